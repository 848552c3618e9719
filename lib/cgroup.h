/* cgroup.h: the limits the process's control groups set (cgroup.c): the
 * memory and CPU time a container, a systemd unit or a batch system gives
 * it, which the machine's totals (sysconf, hwloc) do not show.  Used for
 * the defaults: the memory limit (budget.c) and the thread count
 * (context.c).  Compiled into the CLI too, as budget.c is. */
#ifndef HICP_CGROUP_H
#define HICP_CGROUP_H

#include <stdint.h>

/* Where the kernel's descriptions are read: the process's mount table and
 * cgroup membership, and a prefix put before every mount point (all three
 * are for tests; hicp__cgroup_system gives the real ones). */
typedef struct hicp__cg_files {
  const char *mountinfo; /* /proc/self/mountinfo */
  const char *cgroup;    /* /proc/self/cgroup */
  const char *prefix;    /* "" */
} hicp__cg_files;

extern const hicp__cg_files hicp__cgroup_system;

/* The least memory limit of the process's memory cgroup and its
 * ancestors, in bytes; 0 when none is set or none can be read.  cgroup v2
 * (memory.max) and v1 (memory.limit_in_bytes). */
uint64_t hicp__cgroup_memory(const hicp__cg_files *f);

/* The CPUs the least CPU-time quota of the process's cgroup and its
 * ancestors allows, rounded up (a quota of 1.5 CPUs is 2); 0 when none is
 * set or none can be read.  cgroup v2 (cpu.max) and v1 (cpu.cfs_quota_us
 * over cpu.cfs_period_us). */
int hicp__cgroup_cpus(const hicp__cg_files *f);

/* The process's own two limits (hicp__cgroup_system), read at the first
 * call (some 100 us of /proc and /sys) and again after a fork, in the
 * child, which may have been moved to another cgroup (a container
 * runtime's, a test's).  Used for every default.  Returns 0, or the errno
 * that kept a file from being read for the moment (ENOMEM, ENOBUFS, EMFILE,
 * ENFILE, EINTR, EAGAIN: not an absent or unreadable file, which is no
 * limit);
 * then both are 0 and the next call reads again. */
int hicp__cgroup_process(int *cpus, uint64_t *memory);

#endif /* HICP_CGROUP_H */
