/* failmalloc.c: an LD_PRELOAD module for tests/check-failmalloc.sh that
 * makes one allocation fail: the Nth made directly by code in a chosen
 * shared object (libhicp, or Qhull's libqhull_r).  The library must answer
 * every failed allocation with an error (a return code and its message),
 * or recover from it with the same result, and never crash or carry on
 * with a damaged result (stop 48: Qhull's out of memory was taken for a
 * Qhull failure, and a model without its Delaunay graph was saved, 4.6x
 * slower for every later use).
 *
 * Environment:
 *   HICP_FAILMALLOC_IN      a part of the object's path (default "libhicp")
 *   HICP_FAILMALLOC_AT      the allocation to fail, from 1; 0: none (count)
 *   HICP_FAILMALLOC_REPORT  a file that receives, at exit, "COUNT FAILED":
 *                           that object's allocations, and 1 if one failed
 *
 * The caller is the allocation's return address, found with dladdr(), so
 * only direct calls count (not strdup's or fopen's).  dlsym() may itself
 * call calloc() before the real one is known: a small static pool serves
 * those, and free() leaves them alone. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *(*real_malloc)(size_t);
static void *(*real_calloc)(size_t, size_t);
static void *(*real_realloc)(void *, size_t);
static void (*real_free)(void *);
static int (*real_posix_memalign)(void **, size_t, size_t);
static void *(*real_aligned_alloc)(size_t, size_t);

static const char *fail_in = "libhicp";
static long fail_at;
static long counted;
static int failed;
static __thread int inside; /* our own calls (dladdr, getenv) do not count */

static _Alignas(16) char pool[8192];
static size_t pool_used;

/* Memory for dlsym() while init() looks the real functions up. */
static void *pool_alloc(size_t n)
{
  n = (n + 15) & ~(size_t)15;
  if (n > sizeof pool - pool_used)
    return NULL;
  void *p = pool + pool_used;
  pool_used += n;
  return p; /* static storage: already zero */
}

static void init(void)
{
  static int started;
  if (started) /* done, or dlsym() allocating inside it */
    return;
  started = 1;
  inside++;
  real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
  real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
  real_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
  real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
  real_posix_memalign = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
  real_aligned_alloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
  const char *s = getenv("HICP_FAILMALLOC_IN");
  if (s != NULL && *s != '\0')
    fail_in = s;
  s = getenv("HICP_FAILMALLOC_AT");
  fail_at = s != NULL ? atol(s) : 0;
  inside--;
}

/* Whether the allocation called from `ra` is the one to fail. */
static int fail_here(void *ra)
{
  if (inside)
    return 0;
  inside++;
  int fail = 0;
  Dl_info di;
  if (dladdr(ra, &di) != 0 && di.dli_fname != NULL && strstr(di.dli_fname, fail_in) != NULL) {
    long k = __atomic_add_fetch(&counted, 1, __ATOMIC_SEQ_CST);
    if (k == fail_at) {
      fail = 1;
      __atomic_store_n(&failed, 1, __ATOMIC_SEQ_CST);
    }
  }
  inside--;
  return fail;
}

void *malloc(size_t n)
{
  init();
  if (real_malloc == NULL)
    return pool_alloc(n);
  if (fail_here(__builtin_return_address(0))) {
    errno = ENOMEM;
    return NULL;
  }
  return real_malloc(n);
}

void *calloc(size_t a, size_t b)
{
  init();
  if (real_calloc == NULL)
    return b != 0 && a > sizeof pool / b ? NULL : pool_alloc(a * b);
  if (fail_here(__builtin_return_address(0))) {
    errno = ENOMEM;
    return NULL;
  }
  return real_calloc(a, b);
}

void *realloc(void *p, size_t n)
{
  init();
  if (fail_here(__builtin_return_address(0))) {
    errno = ENOMEM;
    return NULL;
  }
  return real_realloc(p, n);
}

int posix_memalign(void **p, size_t a, size_t n)
{
  init();
  if (fail_here(__builtin_return_address(0)))
    return ENOMEM;
  return real_posix_memalign(p, a, n);
}

void *aligned_alloc(size_t a, size_t n)
{
  init();
  if (fail_here(__builtin_return_address(0))) {
    errno = ENOMEM;
    return NULL;
  }
  return real_aligned_alloc(a, n);
}

void free(void *p)
{
  if (p == NULL || ((char *)p >= pool && (char *)p < pool + sizeof pool))
    return;
  init();
  if (real_free != NULL) /* else p is not the real malloc's */
    real_free(p);
}

__attribute__((destructor)) static void report(void)
{
  const char *path = getenv("HICP_FAILMALLOC_REPORT");
  if (path == NULL || *path == '\0')
    return;
  char line[64];
  int len = snprintf(line, sizeof line, "%ld %d\n", counted, failed);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd >= 0) {
    if (write(fd, line, (size_t)len) != len) {
      /* nothing to do: the script then finds no count and fails */
    }
    close(fd);
  }
}
