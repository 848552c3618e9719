/* contention.c: how many of a registration's CPU threads to run.
 *
 * A registration is about thirty short passes, and each ends only when
 * the last of its threads has done its share.  Where other processes keep
 * the CPUs busy, the scheduler takes one of those threads off its CPU for
 * a tick or more (the others' time slices; with autogroups, every
 * terminal session and service shares the CPUs as one), and the pass
 * waits for it, while libgomp's threads that have finished spin for
 * milliseconds, using the process's share of the CPUs that the missing
 * thread needs.  On the 2-core VM of docs/cpu-engine.md ("Threads on a
 * busy host"), one busy process beside a two-thread boeing registration
 * made it take 240 ms (medians) where it takes 1.3 ms on a quiet machine
 * and 2.3 ms on one thread beside the same process; libgomp's wait policy
 * cannot be changed once it is loaded.
 *
 * So each registration on several threads is watched from its second
 * pass: where the calling thread was off its CPU for a good part of it
 * (its CPU time short of the wall time), the calling thread's next
 * registrations run on fewer, as many as CPUs look free, until the CPUs
 * look free again (the kernel's count of runnable tasks, /proc/loadavg)
 * and a later try on all of them is not held up.  The calling thread's
 * own clock is exact; the process's lags by up to a tick for its other
 * threads, which made quiet registrations of 1 ms look held up.  The count alone does not decide: on kernels
 * with EEVDF's delayed dequeue it counts tasks that have just gone to
 * sleep, and it showed a task too many for half of the fresh `hicp
 * register` processes on a quiet machine.  The threads never change a bit
 * of a result, only when it comes.  HICP_CONTEXT_FIXED_THREADS or
 * HICP_THREADS_ADAPT=0 runs all of them always. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "envnames.h"
#include "internal.h"

int hicp__threads_left(int want, long running, int cpus, int own)
{
  if (want <= 1 || running < 1 || cpus < 1)
    return want < 1 ? 1 : want;
  long others = running - 1 - (own > 0 ? own : 0); /* less the caller and its team */
  long left = cpus - (others > 0 ? others : 0);
  left = left > 1 ? left : 1;
  return left < want ? (int)left : want;
}

long hicp__runnable_tasks(const char *path)
{
  char buf[128];
  int fd;
  do
    fd = open(path, O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return -1;
  ssize_t got;
  do
    got = read(fd, buf, sizeof buf - 1);
  while (got < 0 && errno == EINTR);
  close(fd);
  if (got <= 0)
    return -1;
  buf[got] = '\0';
  /* "0.52 0.58 0.59 3/412 31419": three averages, then running/total */
  const char *p = buf;
  for (int field = 0; field < 3; field++) {
    while (*p != '\0' && *p != ' ')
      p++;
    while (*p == ' ')
      p++;
  }
  long n = 0;
  const char *digits = p;
  while (*p >= '0' && *p <= '9' && n < 100000000L)
    n = n * 10 + (*p++ - '0');
  return p > digits && *p == '/' ? n : -1;
}

/* How long libgomp's threads go on spinning after a region ends, in ms,
 * read once from the settings libgomp read when it loaded: for ever under
 * OMP_WAIT_POLICY=active, not at all under passive; GOMP_SPINCOUNT spins
 * of some 10-100 ns; by default 300,000 spins, which took 11-12 ms on the
 * VM of these measurements (30 ms allows for slower spins).  Both are read
 * as libgomp's env.c reads them: blanks around the values, the policy's
 * case and the count's suffix (k, M, G, T, either case) ignored, and a
 * count it finds invalid (it says so on stderr) passed over for the
 * policy.  OMP_WAIT_POLICY_ALL (GCC 13's libgomp) is not read: an older
 * libgomp ignores it, and would spin. */
static double spin_ms;
static pthread_once_t spin_once = PTHREAD_ONCE_INIT;

static int blank(char c)
{
  return c == ' ' || (c >= '\t' && c <= '\r');
}

/* OMP_WAIT_POLICY: 1 active, 0 passive, -1 unset or invalid. */
static int wait_policy(const char *v)
{
  if (v == NULL)
    return -1;
  while (blank(*v))
    v++;
  const int policy = strncasecmp(v, "active", 6) == 0 ? 1 : strncasecmp(v, "passive", 7) == 0 ? 0 : -1;
  if (policy < 0)
    return -1;
  v += policy > 0 ? 6 : 7;
  while (blank(*v))
    v++;
  return *v == '\0' ? policy : -1;
}

/* GOMP_SPINCOUNT: 1 and *spins, or 0 where unset or invalid. */
static int spin_count(const char *v, double *spins)
{
  if (v == NULL)
    return 0;
  while (blank(*v))
    v++;
  double mult = 1.0;
  const char *end;
  if (strncasecmp(v, "infinite", 8) == 0 || strncasecmp(v, "infinity", 8) == 0) {
    *spins = 1e300;
    end = v + 8;
  } else {
    char *digits_end;
    errno = 0;
    const unsigned long long n = strtoull(v, &digits_end, 10);
    if (errno != 0 || digits_end == v)
      return 0;
    *spins = (double)n;
    end = digits_end;
    while (blank(*end))
      end++;
    if (*end != '\0') {
      switch (*end | 0x20) {
      case 'k': mult = 1e3; break;
      case 'm': mult = 1e6; break;
      case 'g': mult = 1e9; break;
      case 't': mult = 1e12; break;
      default: return 0;
      }
      end++;
    }
  }
  while (blank(*end))
    end++;
  if (*end != '\0')
    return 0;
  *spins = *spins * mult < 1e300 ? *spins * mult : 1e300;
  return 1;
}

double hicp__spin_ms(const char *policy, const char *count)
{
  double spins;
  if (spin_count(count, &spins))
    return spins < 1e300 ? spins * 100e-6 : 1e300;
  const int p = wait_policy(policy);
  return p > 0 ? 1e300 : p == 0 ? 0.0 : 30.0;
}

static void read_spin(void)
{
  spin_ms = hicp__spin_ms(getenv("OMP_WAIT_POLICY"), getenv("GOMP_SPINCOUNT"));
}

/* The calling thread's state: its last team (when a parallel region of
 * its ended, and of how many threads: they may still be spinning, and
 * are counted as its own), and the threads its registrations are held to
 * after one was held up (0: none), the most threads asked for by the
 * registrations held up since (cap_want: a clean try on that many ends
 * the cut), until when, and the wait before the next try on all of them. */
static _Thread_local double team_end_ms = -1e300;
static _Thread_local int team_threads = 1;
static _Thread_local int cap, cap_want;
static _Thread_local double retry_ms, backoff_ms;

void hicp__team_ended(int threads)
{
  if (threads > 1) {
    team_end_ms = hicp__now_ms();
    team_threads = threads;
  }
}

int hicp__threads_held_up(double wall_ms, double cpu_ms)
{
  const double off = wall_ms - cpu_ms; /* the calling thread off its CPU */
  return off > 0.3 && off > 0.1 * wall_ms;
}

/* Whether adaptation applies: not when turned off, nor where libgomp's
 * threads sleep within a millisecond (OMP_WAIT_POLICY=passive, a small
 * GOMP_SPINCOUNT): their waits do not hold the CPUs, and their sleep
 * would read as time off the CPUs. */
static int adapting(void)
{
  const char *adapt = getenv("HICP_THREADS_ADAPT");
  if (adapt != NULL && hicp__env_index(hicp__adapt_names, adapt) == 0)
    return 0;
  pthread_once(&spin_once, read_spin);
  return spin_ms >= 1.0;
}

/* The threads the CPUs leave for `want` now, by the kernel's count; want
 * where the count cannot say (no /proc, or the thread may run on fewer
 * CPUs than are online, as in a container's cpuset: the count mixes in
 * the host's other CPUs). */
static int count_left(int want)
{
  cpu_set_t set;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  if (online < 1 || sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < online)
    return want;
  const int own = hicp__now_ms() - team_end_ms < spin_ms ? team_threads - 1 : 0;
  return hicp__threads_left(want, hicp__runnable_tasks("/proc/loadavg"), (int)online, own);
}

int hicp__threads_now_at(int want, double now)
{
  if (want <= 1 || cap == 0 || cap >= want || !adapting())
    return want < 1 ? 1 : want;
  /* a try on all of them once the wait is over and the CPUs look free,
   * or a minute past it whatever the count says (it may never look free) */
  if (now >= retry_ms && (count_left(want) == want || now >= retry_ms + 60000.0))
    return want;
  return cap;
}

int hicp__threads_now(int want)
{
  return hicp__threads_now_at(want, hicp__now_ms());
}

void hicp__threads_watch_begin(hicp__threads_watch *w, int threads, int want)
{
  w->threads = threads;
  w->want = want;
  w->wall_ms = hicp__now_ms();
  struct timespec ts;
  w->cpu_ms = clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0 ? ts.tv_sec * 1e3 + ts.tv_nsec / 1e6
                                                                : -1.0;
}

void hicp__threads_watch_end(const hicp__threads_watch *w)
{
  struct timespec ts;
  if (w->threads <= 1 || w->cpu_ms < 0.0 || !adapting() ||
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
    return;
  const double now = hicp__now_ms();
  const double cpu = ts.tv_sec * 1e3 + ts.tv_nsec / 1e6 - w->cpu_ms;
  hicp__threads_record(w->threads, w->want, hicp__threads_held_up(now - w->wall_ms, cpu), now);
}

void hicp__threads_record(int threads, int want, int held_up, double now)
{
  if (threads <= 1)
    return;
  if (held_up) {
    /* fewer: as many as the CPUs look to leave, and at least one fewer */
    const int left = count_left(want);
    cap = left < threads ? left : threads - 1;
    cap = cap > 1 ? cap : 1;
    cap_want = want > cap_want ? want : cap_want;
    /* the wait before the next try: short, as the count guards it, and
     * doubling while tries are held up (10 ms to 10 s) */
    backoff_ms = backoff_ms > 0.0 ? (backoff_ms < 5000.0 ? 2.0 * backoff_ms : 10000.0) : 10.0;
    retry_ms = now + backoff_ms;
  } else if (threads >= want && threads > cap) {
    /* all of them, not held up, and more than the calling thread's
     * registrations were held to.  A context of as many threads as the
     * largest held up ends the cut; a smaller context's (on more than the
     * cap but fewer than that) says nothing of more than its own: the cut
     * rises to them, and the larger context still waits for its own try
     * on all of its threads: the count's word for them, and the wait
     * doubled while its tries are held up */
    if (threads >= cap_want) {
      cap = 0;
      cap_want = 0;
      backoff_ms = 0.0;
    } else {
      cap = threads;
    }
  }
}
