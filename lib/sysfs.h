/* sysfs.h: whether hwloc can read this machine's CPUs, for the library
 * (topology.c) and the CLI (cmd_devices.c).  On Linux, hwloc reads them
 * from /sys, and without it (a minimal container, a sandbox) it prints
 * "failed to find sysfs cpu topology directory" on standard error, which
 * a library must not: hicp then does without hwloc (the CPUs online, no
 * binding). */
#ifndef HICP_SYSFS_H
#define HICP_SYSFS_H

#include <unistd.h>

static inline int hicp__hwloc_can_read(void)
{
#if defined(__linux__)
  return access("/sys/devices/system/cpu", F_OK) == 0;
#else
  return 1;
#endif
}

#endif /* HICP_SYSFS_H */
