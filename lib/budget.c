/* budget.c: see budget.h. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "budget.h"
#include "cgroup.h"
#include "hicp.h"

uint64_t hicp__limit_within(uint64_t group)
{
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  uint64_t have = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_C(4) << 40;
  /* a container's or a unit's limit: past it the kernel kills the process
   * rather than refusing an allocation */
  if (group != 0 && group < have)
    have = group;
  return have / 4 * 3;
}

int hicp__memory_limit(uint64_t set, uint64_t *limit)
{
  *limit = set;
  if (set != 0)
    return 0;
  int cpus;
  uint64_t group;
  const int err = hicp__cgroup_process(&cpus, &group);
  if (err == 0)
    *limit = hicp__limit_within(group);
  return err;
}

int hicp__limit_read_error(int err)
{
  return err == EMFILE || err == ENFILE   ? HICP_ELIMIT
         : err == ENOMEM || err == ENOBUFS ? HICP_ENOMEM
                                           : HICP_EIO;
}

int hicp__over_budget(uint64_t bytes, uint64_t limit, const char *what, char *msg, size_t size)
{
  if (bytes <= limit)
    return 0;
  const int gib = (double)bytes >= 1073741824.0;
  const double unit = gib ? 1073741824.0 : 1048576.0;
  /* three significant digits, more where those would print the need and
   * the limit alike ("would need 1 MiB, over the memory limit of 1 MiB");
   * no fewer than the need's whole digits (2,000 GiB, not 2e+03) */
  char need[32], lim[32];
  /* the need's whole digits once rounded (999.7 is "1000", not "1e+03") */
  int prec = snprintf(NULL, 0, "%.0f", (double)bytes / unit);
  prec = prec < 3 ? 3 : prec > 17 ? 17 : prec;
  do {
    snprintf(need, sizeof need, "%.*g", prec, (double)bytes / unit);
    snprintf(lim, sizeof lim, "%.*g", prec, (double)limit / unit);
  } while (strcmp(need, lim) == 0 && ++prec <= 17);
  snprintf(msg, size, "%s would need %s %s, over the memory limit of %s %s", what, need,
           gib ? "GiB" : "MiB", lim, gib ? "GiB" : "MiB");
  return 1;
}
