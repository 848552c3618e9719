/* budget.c: see budget.h. */
#include "config.h"

#include <stdio.h>
#include <unistd.h>

#include "budget.h"
#include "cgroup.h"

/* The default for a cgroup memory limit of `group` bytes (0: none). */
static uint64_t limit_within(uint64_t group)
{
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t have = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_C(4) << 40;
  /* a container's or a unit's limit: past it the kernel kills the process
   * rather than refusing an allocation */
  if (group != 0 && group < have)
    have = group;
  return have / 4 * 3;
}

uint64_t hicp__memory_limit(uint64_t set)
{
  if (set != 0)
    return set;
  int cpus;
  uint64_t group;
  hicp__cgroup_process(&cpus, &group);
  return limit_within(group);
}

int hicp__over_budget(uint64_t bytes, uint64_t limit, const char *what, char *msg, size_t size)
{
  if (bytes <= limit)
    return 0;
  const int gib = (double)bytes >= 1073741824.0;
  const double unit = gib ? 1073741824.0 : 1048576.0;
  snprintf(msg, size, "%s would need %.3g %s, over the memory limit of %.3g %s", what,
           (double)bytes / unit, gib ? "GiB" : "MiB", (double)limit / unit, gib ? "GiB" : "MiB");
  return 1;
}
