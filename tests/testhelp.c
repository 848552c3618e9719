/* testhelp.c: see testhelp.h. */
#include "config.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model.h"
#include "pp/nn.h"

#include "testhelp.h"

const char *th_data(const char *relpath)
{
  static char buf[8][1024];
  static int slot;
  const char *root = getenv("HICP_TEST_DATA");
  if (root == NULL)
    root = "tests/data";
  char *p = buf[slot++ % 8];
  snprintf(p, sizeof buf[0], "%s/%s", root, relpath);
  return access(p, R_OK) == 0 ? p : NULL;
}

const char *th_tmpdir(void)
{
  static char buf[1024];
  const char *root = getenv("HICP_TEST_TMP");
  char base[900];
  if (root == NULL) {
    const char *data = getenv("HICP_TEST_DATA");
    if (data != NULL)
      snprintf(base, sizeof base, "%s/../tmp", data);
    else
      snprintf(base, sizeof base, "/tmp");
    root = base;
  }
  mkdir(root, 0777);
  snprintf(buf, sizeof buf, "%s/hicp-XXXXXX", root);
  cr_assert_not_null(mkdtemp(buf), "mkdtemp(%s): %s", buf, strerror(errno));
  return buf;
}

const char *th_path(const char *dir, const char *name)
{
  static char buf[8][1200];
  static int slot;
  char *p = buf[slot++ % 8];
  snprintf(p, sizeof buf[0], "%s/%s", dir, name);
  return p;
}

void th_write(const char *path, const void *data, size_t len)
{
  FILE *f = fopen(path, "wb");
  cr_assert_not_null(f, "cannot create %s", path);
  cr_assert_eq(fwrite(data, 1, len, f), len);
  cr_assert_eq(fclose(f), 0);
}

unsigned char *th_read(const char *path, size_t *len)
{
  FILE *f = fopen(path, "rb");
  cr_assert_not_null(f, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc((size_t)n + 1);
  cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
  fclose(f);
  b[n] = 0;
  *len = (size_t)n;
  return b;
}

int th_limit_message(const char *msg, uint64_t limit)
{
  const char *at = strstr(msg, "would need ");
  double need, lim;
  char unit[2][4];
  int end = -1;
  if (at == NULL || sscanf(at, "would need %lf %3[GMiB], over the memory limit of %lf %3[GMiB]%n",
                           &need, unit[0], &lim, unit[1], &end) != 4 || end < 0)
    return 0;
  if (strcmp(unit[0], unit[1]) != 0 || (strcmp(unit[0], "MiB") != 0 && strcmp(unit[0], "GiB") != 0))
    return 0;
  const double want = (double)limit / (unit[0][0] == 'G' ? 1073741824.0 : 1048576.0);
  return need >= lim && fabs(lim - want) <= 5e-3 * want;
}

hicp_context *th_context(int threads, hicp_backend backend)
{
  hicp_context_options o;
  hicp_context_options_init(&o);
  o.threads = threads;
  o.backend = backend;
  /* all of them, busy CPUs or not (lib/contention.c): a test of two
   * threads against one must run two, while make check runs other tests
   * beside it */
  o.flags = HICP_CONTEXT_FIXED_THREADS;
  hicp_context *ctx = NULL;
  cr_assert_eq(hicp_context_create(&o, &ctx), 0);
  return ctx;
}

size_t th_stream_fill_to_limit(hicp_stream *s, hicp_context *ctx, const float *f, size_t n,
                               unsigned limit_mib, const char *what)
{
  size_t k = 0;
  int rc = HICP_OK;
  while (k < 2000 && (rc = hicp_stream_submit(s, f, n, NULL, NULL)) == HICP_OK)
    k++;
  cr_assert_eq(rc, HICP_ELIMIT, "%s: %zu frames of %zu points queued, none refused", what, k, n);
  char limit[64];
  snprintf(limit, sizeof limit, "over the memory limit of %u MiB", limit_mib);
  cr_assert(strstr(hicp_context_error(ctx), "not yet run or received") != NULL &&
                strstr(hicp_context_error(ctx), limit) != NULL,
            "%s: %s", what, hicp_context_error(ctx));
  cr_assert_gt(k, 10, "%s: refused after %zu frames", what, k);
  return k;
}

typedef struct blocked_receiver {
  hicp_stream *s;
  int rc;
} blocked_receiver;

static void *receive_and_wait(void *arg)
{
  blocked_receiver *b = arg;
  hicp_result r;
  hicp_result_init(&r);
  b->rc = hicp_stream_receive(b->s, &r, 1);
  return NULL;
}

void th_stream_destroy_under_a_receiver(hicp_stream *s, const float *f, size_t n,
                                        const char *what)
{
  cr_assert_eq(hicp_stream_submit(s, f, n, NULL, NULL), 0, "%s", what);
  cr_assert_eq(hicp_stream_submit(s, f, n, NULL, NULL), 0, "%s", what);
  usleep(200 * 1000); /* the first frame is running */
  hicp_result r;
  hicp_result_init(&r);
  cr_assert_eq(hicp_stream_receive(s, &r, 0), HICP_EAGAIN, "%s", what);
  blocked_receiver b = {s, 1};
  pthread_t t;
  cr_assert_eq(pthread_create(&t, NULL, receive_and_wait, &b), 0);
  /* the receiver waits on the running frame: it is inside the call (a
   * fixed sleep let a receiver that started late call into the freed
   * stream, helper-75) */
  for (int k = 0; k < 30000 && hicp__stream_receivers(s) < 1; k++) /* 30 s */
    usleep(1000);
  cr_assert_eq(hicp__stream_receivers(s), 1, "%s: the receiver never called", what);
  usleep(10 * 1000); /* and, as a rule, waiting on the frame */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  hicp_stream_destroy(s);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  const double took = 1e3 * (double)(t1.tv_sec - t0.tv_sec) + 1e-6 * (double)(t1.tv_nsec - t0.tv_nsec);
  pthread_join(t, NULL);
  cr_assert_eq(b.rc, HICP_ECANCELED, "%s: the receiver returned %d", what, b.rc);
  cr_assert_lt(took, 20000.0, "%s: hicp_stream_destroy took %.0f ms", what, took);
}

float *th_surface(size_t n, uint64_t seed)
{
  th_rng r;
  th_rng_seed(&r, seed);
  float *p = malloc(sizeof(float) * 3 * n);
  cr_assert_not_null(p);
  for (size_t i = 0; i < n; i++) {
    double u = 2.0 * M_PI * th_uniform(&r), v = acos(2.0 * th_uniform(&r) - 1.0);
    double rad = 1.0 + 0.08 * sin(5.0 * u) * sin(4.0 * v);
    p[3 * i] = (float)(rad * 1.0 * cos(u) * sin(v));
    p[3 * i + 1] = (float)(rad * 0.7 * sin(u) * sin(v));
    p[3 * i + 2] = (float)(rad * 0.5 * cos(v));
  }
  return p;
}

int th_pin_to_one_cpu(cpu_set_t *was)
{
  CPU_ZERO(was);
  cr_assert_eq(sched_getaffinity(0, sizeof *was, was), 0);
  if (CPU_COUNT(was) < 2)
    return -1;
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, was))
      last = c;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(last, &one);
  cr_assert_eq(sched_setaffinity(0, sizeof one, &one), 0);
  return last;
}

uint64_t th_run_seed(void)
{
  const char *s = getenv("HICP_TEST_SEED");
  if (s != NULL)
    return strtoull(s, NULL, 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000003u + (uint64_t)ts.tv_nsec;
}

hicp_cloud *th_load_cloud(const char *path)
{
  hicp_context *ctx = NULL;
  hicp_cloud *c = NULL;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  int rc = hicp_cloud_read(ctx, path, HICP_FORMAT_AUTO, &c);
  cr_assert_eq(rc, 0, "reading %s: %s", path, hicp_context_error(ctx));
  hicp_context_destroy(ctx);
  return c;
}

double th_rotation_error_deg(const double *ma, const double *mb)
{
  double tr = 0.0;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      tr += ma[4 * i + j] * mb[4 * i + j];
  double c = (tr - 1.0) / 2.0;
  if (c > 1.0)
    c = 1.0;
  if (c < -1.0)
    c = -1.0;
  return acos(c) * 180.0 / M_PI;
}

uint64_t th_assert_start_table_exact(const hicp_model *m)
{
  cr_assert_not_null(m->start);
  const hicp__mview v = hicp__model_view(m);
  uint64_t c = 0;
  for (uint32_t z = 0; z < m->start_dim[2]; z++)
    for (uint32_t y = 0; y < m->start_dim[1]; y++)
      for (uint32_t x = 0; x < m->start_dim[0]; x++, c++) {
        const uint32_t at[3] = {x, y, z};
        float q[3];
        for (int d = 0; d < 3; d++)
          q[d] = m->start_lo[d] + ((float)at[d] + 0.5f) / m->start_inv;
        /* the centre maps back to its own cell */
        cr_assert_eq(hicp__start_vertex(&v, q), m->start[c], "cell %llu", (unsigned long long)c);
        uint32_t best;
        float bd;
        hicp__nn_brute(&v, q, &best, &bd);
        cr_assert_eq(m->start[c], best, "cell %llu: %u, nearest %u", (unsigned long long)c,
                     m->start[c], best);
      }
  return c;
}

int th_tasks(void)
{
  int n = 0;
  DIR *d = opendir("/proc/self/task");
  if (d == NULL)
    return -1;
  for (struct dirent *e; (e = readdir(d)) != NULL;)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}
