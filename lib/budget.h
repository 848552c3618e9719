/* budget.h: the memory limit's arithmetic (budget.c), one for the library
 * (hicp__check_budget, util.c) and the CLI's own buffers (perturb), which
 * compiles budget.c in as it does outfile.c: libhicp exports only hicp_*. */
#ifndef HICP_BUDGET_H
#define HICP_BUDGET_H

#include <stddef.h>
#include <stdint.h>

/* The limit a setting means, in *limit: `set` bytes, or for 0 three
 * quarters of physical memory or of the process's cgroup memory limit, the
 * less (3 TiB when neither says); the cgroup's limit is read once a
 * process (hicp__cgroup_process).  Returns 0, or the errno that kept the
 * cgroup's files from being read for the moment (*limit then 0: a call
 * that went on would lose a container's limit, stop 68's review). */
int hicp__memory_limit(uint64_t set, uint64_t *limit);

/* The hicp code for such an errno: HICP_ELIMIT where no descriptor was
 * free, HICP_ENOMEM where no memory was, else HICP_EIO. */
int hicp__limit_read_error(int err);

/* The default for a cgroup memory limit of `group` bytes (0: none): three
 * quarters of it or of physical memory, the less. */
uint64_t hicp__limit_within(uint64_t group);

/* 0 when `bytes` fit in `limit`; otherwise 1, with the one-line refusal in
 * msg[size]: "WHAT would need X U, over the memory limit of Y U", both in
 * the unit that suits the larger need (MiB below 1 GiB, else GiB). */
int hicp__over_budget(uint64_t bytes, uint64_t limit, const char *what, char *msg, size_t size);

#endif /* HICP_BUDGET_H */
