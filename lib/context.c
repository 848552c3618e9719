/* context.c: hicp_context, its options, and cancellation. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(_OPENMP)
#include <omp.h>
#endif

#include "backend.h"
#include "budget.h"
#include "cgroup.h"
#include "context.h"
#include "envnames.h"
#include "icp.h"
#include "topology.h"

void hicp_context_options_init_sized(hicp_context_options *opts, size_t size)
{
  hicp_context_options d;
  memset(&d, 0, sizeof d);
  d.threads = 0;
  d.backend = HICP_BACKEND_AUTO;
  hicp__init_sized(opts, size, &d, sizeof d);
}

/* Set, in a child process, on the thread that called fork(): its OpenMP
 * team is the parent's, whose threads the child does not have. */
static _Thread_local int forked_here;

/* The process's threads when it last forked, from /proc/self/status
 * ("Threads:"); -1 when unknown.  Read with system calls alone: a fork may
 * come from a signal handler. */
static volatile int threads_at_fork = -1;

static int process_threads(void)
{
  const int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  /* "\nThreads:" matched a byte at a time (the Groups line before it may
   * be long), then its number */
  static const char key[] = "\nThreads:";
  size_t matched = 1; /* the file begins a line */
  int n = -1, digits = 0;
  char buf[256];
  for (;;) {
    const ssize_t k = read(fd, buf, sizeof buf);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      break;
    for (ssize_t i = 0; i < k; i++) {
      const char c = buf[i];
      if (n < 0) { /* looking for the key */
        matched = c == key[matched] ? matched + 1 : c == '\n' ? 1 : 0;
        if (key[matched] == '\0')
          n = 0;
      } else if (c >= '0' && c <= '9' && n < 1000000) {
        n = 10 * n + (c - '0');
        digits = 1;
      } else if (digits || (c != ' ' && c != '\t')) {
        close(fd);
        return digits && n > 0 ? n : -1;
      }
    }
  }
  close(fd);
  return digits && n > 0 ? n : -1;
}

static void note_threads_before_fork(void)
{
  const int saved = errno;
  threads_at_fork = process_threads();
  errno = saved;
}

/* A process that had no other thread when it forked has no OpenMP team
 * either (a team's threads outlive its regions): its child starts teams
 * as any process does (a pre-fork server whose master never ran a team
 * keeps its workers' threads).  With other threads, or not knowing, the
 * forking thread's team may be among them, and the child works on one
 * thread.  So does the child of a thread already marked: its libgomp
 * still counts the threads of the team it had before its own fork. */
static void note_fork_in_child(void)
{
  forked_here = forked_here || threads_at_fork != 1;
}

/* Cores, not hardware threads: the walk is latency-bound and two hyperthreads
 * of one core share its load ports, so one worker per core is the default.
 * Those the calling thread may run on (taskset, a batch system's cpuset, a
 * pool that pins its workers): more threads than that would only take
 * turns.  No more than the CPU time a cgroup's quota gives (a container's
 * --cpus, a unit's CPUQuota), rounded up: threads beyond it are stopped
 * until the quota's next period, which a registration of a few
 * milliseconds spends waiting. */
int hicp__default_threads(int quota)
{
  int n = hicp__usable_cores();
  if (n <= 0) { /* no topology: the CPUs the thread may run on */
    cpu_set_t set;
    n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  }
  if (n <= 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c > 0 ? (int)c : 1;
  }
  return quota > 0 && quota < n ? quota : n;
}

/* OMP_THREAD_LIMIT caps every team libgomp starts: a context asked for more
 * threads would run fewer than it says (stop 55's review: "2 threads" under
 * OMP_THREAD_LIMIT=1, one running). */
static int thread_limit(int n)
{
#if defined(_OPENMP)
  const int limit = omp_get_thread_limit();
  return limit > 0 && limit < n ? limit : n;
#else
  return n;
#endif
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void watch_forks(void)
{
  (void)pthread_atfork(note_threads_before_fork, NULL, note_fork_in_child);
  hicp__error_watch_forks();
}

/* Watching from the library's load, not from the first context: an
 * application that runs OpenMP of its own and forks before it first
 * creates a context has a child whose libgomp cannot start a team, and
 * that child must know it was forked (stop 49: its first registration on
 * two threads waited for ever). */
__attribute__((constructor)) static void watch_forks_from_load(void)
{
  pthread_once(&fork_once, watch_forks);
}

int hicp__team_threads(const hicp_context *ctx)
{
  if (ctx == NULL || forked_here)
    return 1;
#if defined(_OPENMP)
  /* Inside a parallel region of the caller's, active or not, libgomp
   * keeps no pool: a region of hicp's there would create its threads and
   * end them, in every pass, unchecked (stop 66's review: libgomp exited
   * the process under a process limit the first check had passed), and
   * inside an active one it gives one thread whatever hicp asks. */
  if (omp_get_level() > 0)
    return 1;
#endif
  return ctx->threads;
}

int hicp_context_create(const hicp_context_options *user, hicp_context **out)
{
  /* before any team is started: every parallel region runs on a context */
  pthread_once(&fork_once, watch_forks);
  hicp_context_options o;
  hicp_context_options_init(&o);
  if (out == NULL)
    return HICP_EINVAL;
  *out = NULL;
  if (user != NULL && hicp__copy_sized(&o, sizeof o, user, offsetof(hicp_context_options, flags) + sizeof(unsigned), "hicp_context_options", NULL) != 0)
    return HICP_EINVAL;
  if (o.threads < 0 || o.threads > 4096 || (unsigned)o.backend > HICP_BACKEND_HYBRID ||
      (o.flags & ~HICP_CONTEXT_FIXED_THREADS) != 0 || o.ndevices < 0 || o.ndevices > 1024 || (o.ndevices > 0 && o.devices == NULL))
    return HICP_EINVAL;
  for (int i = 0; i < o.ndevices; i++)
    if (o.devices[i] < 0)
      return HICP_EINVAL;

  /* the cgroup's limits where a default needs them, read once a process:
   * a failed read (no memory, no descriptor) fails the call rather than
   * lose them for its life */
  int quota = 0;
  uint64_t group = 0;
  const int err = o.threads > 0 && o.memory_limit != 0 ? 0 : hicp__cgroup_process(&quota, &group);
  if (err != 0)
    return hicp__limit_read_error(err);
  hicp_context *ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL)
    return HICP_ENOMEM;
  const int env_threads = hicp__env_num_threads(getenv("OMP_NUM_THREADS"));
  ctx->threads = thread_limit(o.threads > 0    ? o.threads
                              : env_threads > 0 ? env_threads
                                                : hicp__default_threads(quota));
  ctx->backend = o.backend;
  ctx->memory_limit = o.memory_limit != 0 ? o.memory_limit : hicp__limit_within(group);
  ctx->fixed_threads = (o.flags & HICP_CONTEXT_FIXED_THREADS) != 0;
  atomic_init(&ctx->cancel, 0);
  if (o.ndevices > 0) {
    ctx->devices = malloc(sizeof(int) * (size_t)o.ndevices);
    if (ctx->devices == NULL) {
      free(ctx);
      return HICP_ENOMEM;
    }
    memcpy(ctx->devices, o.devices, sizeof(int) * (size_t)o.ndevices);
    ctx->ndevices = o.ndevices;
  }
  *out = ctx;
  return HICP_OK;
}

void hicp_context_destroy(hicp_context *ctx)
{
  if (ctx == NULL)
    return;
  hicp__batch_crew_free(ctx);
  hicp__gpu_release(ctx);
  for (int k = 0; k < HICP_SCRATCH_SLOTS; k++)
    free(ctx->scratch[k]);
  free(ctx->devices);
  free(ctx);
}

int hicp_context_threads(const hicp_context *ctx)
{
  return ctx != NULL ? ctx->threads : 0;
}

/* Whether the system gives this thread n - 1 more threads at once, with
 * the stacks OpenMP would give them (the default's): they start, wait for
 * one another, and end.  libgomp exits the process when it cannot start a
 * team's thread, so a refusal has to be seen before its region.  0, or the
 * error of the first refused thread. */
typedef struct preflight {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int go;
  pid_t *tids; /* the threads' kernel ids, as they start */
  atomic_int ntids;
} preflight;

static void *preflight_thread(void *arg)
{
  preflight *p = arg;
  p->tids[atomic_fetch_add(&p->ntids, 1)] = (pid_t)syscall(SYS_gettid);
  pthread_mutex_lock(&p->mu);
  while (!p->go)
    pthread_cond_wait(&p->cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* The stack size libgomp gives its threads: OMP_STACKSIZE, else
 * GOMP_STACKSIZE, else OMP_STACKSIZE_ALL (GCC 13's libgomp; an older one
 * ignores it, and the check is then only stricter), parsed as libgomp's
 * parse_stacksize does (strtoul, so a sign is taken; optionally B, K, M or
 * G after, K when none; an invalid value is passed over, as libgomp does);
 * 0 when none is set and valid, or the value is 0 (libgomp then uses the
 * default's, as the check does). */
static size_t omp_stacksize(void)
{
  static const char *const names[] = {"OMP_STACKSIZE", "GOMP_STACKSIZE", "OMP_STACKSIZE_ALL"};
  for (int i = 0; i < 3; i++) {
    const char *s = getenv(names[i]);
    if (s == NULL)
      continue;
    while (*s == ' ' || (*s >= '\t' && *s <= '\r'))
      s++;
    if (*s == '\0')
      continue; /* invalid: libgomp says so, and tries the next */
    char *end;
    errno = 0;
    const unsigned long v = strtoul(s, &end, 10);
    if (end == s)
      continue;
    int shift = 10;
    while (*end == ' ' || (*end >= '\t' && *end <= '\r'))
      end++;
    if (*end != '\0') {
      switch (*end | 0x20) {
      case 'b': shift = 0; break;
      case 'k': break;
      case 'm': shift = 20; break;
      case 'g': shift = 30; break;
      default: end = NULL; break;
      }
      if (end == NULL)
        continue;
      for (end++; *end == ' ' || (*end >= '\t' && *end <= '\r'); end++)
        ;
    }
    if (errno != 0 || *end != '\0' || ((v << shift) >> shift) != v)
      continue;
    return (size_t)(v << shift);
  }
  return 0;
}

/* Whether the kernel still has thread `tid` of this process. */
static int task_alive(pid_t tid)
{
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%ld", (long)tid);
  return access(path, F_OK) == 0;
}

/* When hicp last let threads end (hicp__team_use's shrink, a batch's
 * workers): a check soon after meets them not yet released. */
static _Atomic double threads_ended_ms = -1e300;

static int threads_available(int n)
{
  pthread_t *tid = malloc(sizeof *tid * (size_t)n);
  pid_t *ktid = malloc(sizeof *ktid * (size_t)n);
  if (tid == NULL || ktid == NULL) {
    free(tid);
    free(ktid);
    return ENOMEM;
  }
  /* the stacks OpenMP will give the team: OMP_STACKSIZE=1G under an
   * address-space limit passed a check with the default's 8 MiB, and
   * libgomp then exited the process */
  pthread_attr_t attr;
  pthread_attr_t *ap = NULL;
  const size_t stack = omp_stacksize();
  if (stack != 0 && pthread_attr_init(&attr) == 0) {
    ap = &attr;
    (void)pthread_attr_setstacksize(ap, stack); /* refused: libgomp says so itself */
  }
  preflight p = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, ktid, 0};
  int started = 0, err = 0;
  /* Threads that ended a moment ago (a pool that shrank, a batch's
   * workers) still count until the kernel releases them: a refusal then
   * is tried again for up to 50 ms after the last such end. */
  const double ended = atomic_load(&threads_ended_ms);
  while (started < n - 1) {
    err = pthread_create(&tid[started], ap, preflight_thread, &p);
    if (err == 0) {
      started++;
    } else if (err == EAGAIN && hicp__now_ms() < ended + 50.0) {
      const struct timespec pause = {0, 200000};
      nanosleep(&pause, NULL);
    } else {
      break;
    }
  }
  if (ap != NULL)
    pthread_attr_destroy(ap);
  pthread_mutex_lock(&p.mu);
  p.go = 1;
  pthread_cond_broadcast(&p.cv);
  pthread_mutex_unlock(&p.mu);
  for (int i = 0; i < started; i++)
    pthread_join(tid[i], NULL);
  free(tid);
  /* A joined thread is still counted against the process limits until the
   * kernel has released it, a moment after the join returns: a team
   * started into that moment would be refused as the check was not (and
   * libgomp exits).  So the check ends when its own threads are gone from
   * /proc/self/task, the kernel's release, or after 50 ms.  (Waiting for
   * the process's thread count to come back, as stop 65 first did, waited
   * on every thread another part of the program started: concurrent first
   * registrations took 56-196 ms, not 9: its second review.) */
  const double until = hicp__now_ms() + 50.0;
  const int nk = atomic_load(&p.ntids);
  for (int i = 0; i < nk; i++)
    while (task_alive(ktid[i]) && hicp__now_ms() < until) {
      const struct timespec pause = {0, 20000};
      nanosleep(&pause, NULL);
    }
  free(ktid);
  return err;
}

/* The calling thread's OpenMP team as libgomp holds it between regions,
 * per thread, not per context (libgomp keeps a pool of threads for each
 * thread that starts a region, and a context may go from thread to
 * thread, one at a time, as a pool's tasks take it):
 * - team_pool: the threads of hicp's last region of two or more on this
 *   thread, the caller included; libgomp keeps that region's threads, and
 *   only those: a smaller region ends the pool's other threads at once
 *   (libgomp's team.c, gomp_team_start), and a larger one creates the
 *   missing ones, exiting the process where it cannot;
 * - team_room: the largest team a check has shown the system gives this
 *   thread since its pool last shrank.  A team up to it starts unchecked;
 *   a larger one is checked first, for the threads the pool lacks.
 * Until stop 66 one record, "the largest team ever checked", stood for
 * both: after a smaller team (a batch's, a context of fewer threads) had
 * ended the pool's threads, the next large team created them unchecked,
 * and under a process limit libgomp exited the process at once, with no
 * one else taking a thread (stop 66's review, 10 runs of 10).  Regions of
 * the application's own on this thread change the pool unseen (hicp.h's
 * conventions say so). */
static _Thread_local int team_pool = 1, team_room = 1;
atomic_uint hicp__team_preflights;

void hicp__threads_ended(void)
{
  atomic_store(&threads_ended_ms, hicp__now_ms());
}

int hicp__team_ready(hicp_context *ctx)
{
  return hicp__team_ready_for(ctx, hicp__team_threads(ctx));
}

int hicp__team_ready_for(hicp_context *ctx, int n)
{
  if (n <= team_room)
    return HICP_OK;
  atomic_fetch_add(&hicp__team_preflights, 1u);
  const int err = threads_available(n - team_pool + 1);
  if (err != 0)
    return hicp__fail(ctx, HICP_ENOMEM, "cannot start %d threads: %s", n, strerror(err));
  team_room = n;
  return HICP_OK;
}

int hicp__team_use(int k)
{
  if (k <= 1)
    return 1; /* a region of one keeps the pool as it is */
  if (k > team_room) {
    atomic_fetch_add(&hicp__team_preflights, 1u);
    if (threads_available(k - team_pool + 1) == 0)
      team_room = k;
    else
      k = team_pool; /* the threads there are: the bits are the same */
    if (k <= 1)
      return 1;
  }
  if (k < team_pool) {
    team_room = k;
    hicp__threads_ended();
  }
  team_pool = k;
  return k;
}

int hicp__threads_check(int extra)
{
  return extra > 0 ? threads_available(extra + 1) : 0;
}

int hicp__team_missing(const hicp_context *ctx)
{
  const int n = hicp__team_threads(ctx);
  return n <= team_room ? 0 : n - team_pool;
}

void hicp__team_assume_ready(const hicp_context *ctx)
{
  const int n = hicp__team_threads(ctx);
  if (n > team_room)
    team_room = n;
}

int hicp_context_start_threads(hicp_context *ctx)
{
  if (ctx == NULL)
    return HICP_EINVAL;
  /* One thread has nothing to start, nor has a context whose registrations
   * run on CUDA only; more are OpenMP's team of the calling thread, which
   * libgomp keeps between parallel regions. */
  if (hicp__team_threads(ctx) <= 1 || ctx->backend == HICP_BACKEND_CUDA)
    return 1;
  const int rc = hicp__team_ready(ctx);
  return rc != HICP_OK ? rc : hicp__cpu_start_threads(hicp__team_use(hicp__team_threads(ctx)));
}

void hicp_context_cancel(hicp_context *ctx)
{
  if (ctx != NULL)
    atomic_fetch_add(&ctx->cancel, 1u);
}

struct hicp__gpu **hicp__context_gpu_slot(hicp_context *ctx)
{
  return &ctx->gpu;
}

unsigned hicp__cancel_count(const hicp_context *ctx)
{
  return atomic_load(&((hicp_context *)ctx)->cancel);
}

void hicp__cancel_begin(hicp_context *ctx)
{
  ctx->cancel_seen = hicp__cancel_count(ctx);
}

void hicp__cancel_begin_child(hicp_context *child, unsigned seen)
{
  child->parent_seen = seen;
}

int hicp__canceled(const hicp_context *ctx)
{
  if (ctx == NULL)
    return 0;
  if (hicp__cancel_count(ctx) != ctx->cancel_seen)
    return 1;
  return ctx->parent != NULL && hicp__cancel_count(ctx->parent) != ctx->parent_seen;
}

int hicp__context_is_worker(const hicp_context *ctx)
{
  return ctx != NULL && ctx->side_by_side;
}

int hicp__context_first_device(const hicp_context *ctx)
{
  return ctx != NULL && ctx->ndevices > 0 ? ctx->devices[0] : 0;
}

int hicp__context_device(const hicp_context *ctx, int logical)
{
  if (ctx != NULL && ctx->ndevices > 0)
    return ctx->devices[logical % ctx->ndevices];
  return logical;
}
