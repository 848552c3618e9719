/* sysfs.h: hwloc started so that it prints nothing, for the library
 * (topology.c) and the CLI (cmd_devices.c), which must not print what it
 * did not say itself. */
#ifndef HICP_SYSFS_H
#define HICP_SYSFS_H

#include <hwloc.h>
#include <unistd.h>

/* Whether hwloc can read this machine's CPUs.  On Linux, hwloc reads them
 * from /sys, and without it (a minimal container, a sandbox) it prints
 * "failed to find sysfs cpu topology directory" on standard error: hicp
 * then does without hwloc (the CPUs online, no binding). */
static inline int hicp__hwloc_can_read(void)
{
#if defined(__linux__)
  return access("/sys/devices/system/cpu", F_OK) == 0;
#else
  return 1;
#endif
}

/* hwloc_topology_init(*t), ready to load; 0 (nothing made) when hwloc
 * cannot read this machine or fails.  Without hwloc's x86 (CPUID)
 * component, which under Valgrind writes its own warning to stderr; on
 * Linux it adds nothing hicp reads (cores, NUMA nodes, PCI devices and the
 * CPU model come from /sys and /proc).  hwloc 2.0, which configure
 * accepts, cannot leave a component out (HWLOC_API_VERSION). */
static inline int hicp__hwloc_init(hwloc_topology_t *t)
{
  if (!hicp__hwloc_can_read() || hwloc_topology_init(t) != 0)
    return 0;
#if HWLOC_API_VERSION >= 0x00020100
  hwloc_topology_set_components(*t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
#endif
  return 1;
}

/* hwloc_topology_load(t) of a topology made by hicp__hwloc_init(): 1 when
 * it describes this machine; else the topology is destroyed and 0 returned
 * (it failed), or -1: hwloc's own environment (HWLOC_XMLFILE,
 * HWLOC_SYNTHETIC, HWLOC_FSROOT) made it describe another machine, whose
 * cores and CPU numbers are not this one's (stop 55's review: 512 threads
 * on a 2-core machine under HWLOC_SYNTHETIC). */
static inline int hicp__hwloc_load(hwloc_topology_t t)
{
  if (hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    return 0;
  }
  if (!hwloc_topology_is_thissystem(t)) {
    hwloc_topology_destroy(t);
    return -1;
  }
  return 1;
}

#endif /* HICP_SYSFS_H */
