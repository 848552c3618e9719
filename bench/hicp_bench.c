/* hicp_bench.c: times hicp registrations and nearest-neighbour queries
 * through the public API, for the benchmark scripts (bench/run).
 *
 *   hicp_bench register MODEL SCAN [--iters N] [--threads T] [--nn M]
 *                       [--repeat R] [--backend B] [--tol T] [--chunk C] [--gap MS]
 *                       [--start-threads 0|1]
 *   hicp_bench nn MODEL QUERIES [--nn M] [--threads T] [--repeat R] [--rounds K]
 *                 [--start-threads 0|1]
 *   hicp_bench build MODEL [--repeat R]
 *   hicp_bench batch MODEL SCAN [--frames F] [--threads T] [--iters N]
 *                    [--repeat R] [--backend B] [--chunk C]
 *   hicp_bench track MODEL @LIST [--iters N] [--threads T] [--repeat R]
 *                    [--backend B] [--tol T] [--nn M] [--chunk C]
 *
 * Prints one JSON object per run on stdout: the median and all times, and
 * the result's pose and errors.  Model building and file reading are
 * excluded from registration times; `build` times them separately.
 * `track` registers the listed frames in order, each from the pose found
 * for the one before (the first from the identity), as a tracker does;
 * each repeat runs the whole sequence again, and it prints one line per
 * frame: that frame's median time and its pose.
 * --gap sleeps MS milliseconds between two registrations, as when frames
 * arrive at a camera's rate rather than back to back (docs/cpu-engine.md,
 * "Two threads on a shared VM").  Like `hicp register` and `hicp nn`, it
 * starts the context's threads before reading the model and scan
 * (hicp_context_start_threads); --start-threads 0 leaves that to the
 * first registration, to measure what it costs. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hicp.h"

static double now_ms(void)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median of v[0..n), v left in run order (times_ms prints it, so
 * that a first run's or a drift's effect shows, as in the peers' output). */
static double median(const double *v, int n)
{
  double *s = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
  if (s == NULL) {
    fprintf(stderr, "hicp_bench: out of memory\n");
    exit(1);
  }
  memcpy(s, v, sizeof(double) * (size_t)n);
  qsort(s, (size_t)n, sizeof *s, cmp_d);
  const double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  free(s);
  return m;
}

/* Ends the run with one line: what failed and, when known, why. */
static void fail(const char *what, const char *why)
{
  fprintf(stderr, "hicp_bench: %s%s%s\n", what, why[0] ? ": " : "", why);
  exit(1);
}

static void die(hicp_context *ctx, const char *what)
{
  fail(what, ctx ? hicp_context_error(ctx) : "");
}

/* An allocation's result: a benchmark has nothing to fall back on, and
 * must not time a half-made workload or crash on its NULL. */
static void *checked(void *p)
{
  if (p == NULL)
    fail("out of memory", "");
  return p;
}

/* S as a JSON string: a path may hold quotes, backslashes and control
 * characters, which would break bench/run's json.loads of the line. */
static void print_string(const char *s)
{
  putchar('"');
  for (const unsigned char *c = (const unsigned char *)s; *c != '\0'; c++)
    if (*c == '"' || *c == '\\')
      printf("\\%c", *c);
    else if (*c < 0x20)
      printf("\\u%04x", *c);
    else
      putchar(*c);
  putchar('"');
}

static void print_times(const double *t, int n)
{
  printf("\"times_ms\":[");
  for (int i = 0; i < n; i++)
    printf("%s%.6f", i ? "," : "", t[i]);
  printf("]");
}

/* SCAN, or @FILE listing one scan per line */
static char **read_list(const char *arg, size_t *count)
{
  char **scans = NULL;
  size_t n = 0;
  if (arg[0] == '@') {
    FILE *lf = fopen(arg + 1, "r");
    if (lf == NULL)
      fail(arg, strerror(errno));
    /* getline: a path of any length stays one path (a fixed buffer
     * would cut a long one into two names, neither of them the file) */
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, lf) != -1) {
      line[strcspn(line, "\r\n")] = '\0';
      if (line[0] == '\0')
        continue;
      scans = checked(realloc(scans, sizeof *scans * (n + 1)));
      scans[n++] = checked(strdup(line));
    }
    if (ferror(lf))
      fail(arg, "read error");
    free(line);
    fclose(lf);
    /* an empty list would time nothing and print nothing, as if it had */
    if (n == 0)
      fail(arg, "lists no scan");
  } else {
    scans = checked(malloc(sizeof *scans));
    scans[n++] = checked(strdup(arg));
  }
  *count = n;
  return scans;
}

/* The registration options of every mode: method, iterations, the MSE
 * change to stop at (0: never) and the reduction's chunk size. */
static hicp_reg_options reg_options(hicp_nn_method nn, int iters, double tol, int chunk)
{
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.nn = nn;
  o.max_iter = iters;
  o.tol = tol;
  o.chunk_points = chunk;
  return o;
}

static void print_transform(const hicp_transform *tr)
{
  printf("\"transform\":[");
  for (int q = 0; q < 16; q++)
    printf("%s%.17g", q ? "," : "", tr->m[q]);
  printf("]");
}

int main(int argc, char **argv)
{
  if (argc < 3) {
    fprintf(stderr, "usage: hicp_bench register|nn|build|batch|track MODEL [SCAN] [options]\n");
    return 2;
  }
  const char *mode = argv[1], *model_path = argv[2];
  const char *scan_path = (strcmp(mode, "build") != 0 && argc > 3) ? argv[3] : NULL;
  int iters = 30, gap_ms = 0, start_threads = 1, threads = 0, repeat = 5, rounds = 1;
  int nframes = 64, chunk = 0;
  double tol = 0.0;
  hicp_nn_method nn = HICP_NN_PNN_OPT;
  hicp_backend backend = HICP_BACKEND_CPU;
  for (int i = scan_path ? 4 : 3; i < argc; i += 2) {
    if (i + 1 == argc) {
      fprintf(stderr, "hicp_bench: %s needs a value\n", argv[i]);
      return 2;
    }
    if (!strcmp(argv[i], "--iters"))
      iters = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--threads"))
      threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--gap"))
      gap_ms = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--start-threads"))
      start_threads = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--repeat"))
      repeat = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--rounds"))
      rounds = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--frames"))
      nframes = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--chunk"))
      chunk = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--tol"))
      tol = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--nn") && hicp_nn_method_from_name(argv[i + 1], &nn) == 0)
      ;
    else if (!strcmp(argv[i], "--backend") && hicp_backend_from_name(argv[i + 1], &backend) == 0)
      ;
    else {
      fprintf(stderr, "hicp_bench: bad option %s\n", argv[i]);
      return 2;
    }
  }
  if (strcmp(mode, "register") != 0 && strcmp(mode, "nn") != 0 && strcmp(mode, "build") != 0 &&
      strcmp(mode, "batch") != 0 && strcmp(mode, "track") != 0) {
    fprintf(stderr, "hicp_bench: unknown mode %s\n", mode);
    return 2;
  }
  if (repeat < 1 || repeat > 1000)
    repeat = 5;
  /* no round would leave ns_per_query 0/0, not JSON */
  if (rounds < 1) {
    fprintf(stderr, "hicp_bench: --rounds must be at least 1\n");
    return 2;
  }
  /* each frame is a copy of the scan: bound what is asked before allocating */
  if (nframes < 1 || nframes > 100000) {
    fprintf(stderr, "hicp_bench: --frames must be 1 to 100000\n");
    return 2;
  }
  if (gap_ms < 0 || gap_ms > 60000)
    gap_ms = 0;
  hicp_context_options co;
  hicp_context_options_init(&co);
  co.threads = threads;
  co.backend = backend;
  hicp_context *ctx;
  /* no context holds the message of its own creation's failure */
  const int crc = hicp_context_create(&co, &ctx);
  if (crc != 0)
    fail("context", hicp_strerror(crc));
  /* a team that could not start would leave the first timed run to start
   * it (or fail in it): say so rather than time that */
  if (start_threads && strcmp(mode, "build") != 0 && strcmp(mode, "batch") != 0
      && hicp_context_start_threads(ctx) < 0)
    die(ctx, "starting the threads");
  double *t = checked(calloc((size_t)repeat, sizeof *t));

  if (!strcmp(mode, "build")) {
    hicp_cloud *c;
    if (hicp_cloud_read(ctx, model_path, HICP_FORMAT_AUTO, &c) != 0)
      die(ctx, model_path);
    hicp_model_info mi;
    hicp_model_info_init(&mi);
    for (int r = 0; r < repeat; r++) {
      hicp_model *m;
      double t0 = now_ms();
      if (hicp_model_build_cloud(ctx, c, NULL, &m) != 0)
        die(ctx, "build");
      t[r] = now_ms() - t0;
      hicp_model_get_info(m, &mi);
      hicp_model_destroy(m);
    }
    double med = median(t, repeat);
    printf("{\"mode\":\"build\",\"points\":%llu,\"vertices\":%llu,\"edges\":%llu,\"qhull_ms\":%.3f,"
           "\"graph_bytes_per_point\":%.2f,\"total_bytes_per_point\":%.2f,\"median_ms\":%.3f,",
           (unsigned long long)mi.points, (unsigned long long)mi.vertices,
           (unsigned long long)mi.edges, mi.qhull_ms, (double)mi.bytes_graph / mi.points,
           (double)mi.bytes_total / mi.points, med);
    print_times(t, repeat);
    printf("}\n");
    hicp_cloud_destroy(c);
    hicp_context_destroy(ctx);
    free(t);
    return 0;
  }
  if (scan_path == NULL) {
    fprintf(stderr, "hicp_bench: %s needs a second file\n", mode);
    hicp_context_destroy(ctx);
    free(t);
    return 2;
  }
  hicp_model *m;
  if (hicp_model_open(ctx, model_path, NULL, &m) != 0)
    die(ctx, model_path);

  if (!strcmp(mode, "register")) {
    /* one JSON line for each scan */
    size_t nscans;
    char **scans = read_list(scan_path, &nscans);
    const hicp_reg_options o = reg_options(nn, iters, tol, chunk);
    for (size_t si = 0; si < nscans; si++) {
      hicp_cloud *s;
      if (hicp_cloud_read(ctx, scans[si], HICP_FORMAT_AUTO, &s) != 0)
        die(ctx, scans[si]);
      hicp_result r;
      for (int k = 0; k < repeat; k++) {
        hicp_result_init(&r);
        if (gap_ms > 0 && k > 0) {
          struct timespec g = {gap_ms / 1000, (long)(gap_ms % 1000) * 1000000L};
          nanosleep(&g, NULL);
        }
        double t0 = now_ms();
        if (hicp_register_cloud(ctx, m, s, &o, NULL, &r) != 0)
          die(ctx, "register");
        t[k] = now_ms() - t0;
      }
      double med = median(t, repeat);
      printf("{\"mode\":\"register\",\"scan\":");
      print_string(scans[si]);
      printf(",\"nn\":\"%s\",\"backend\":\"%s\",\"threads\":%d,"
             "\"iterations\":%d,\"scan_points\":%zu,\"median_ms\":%.4f,\"rmse\":%.17g,"
             "\"correspond_ms\":%.4f,\"reduce_ms\":%.4f,\"solve_ms\":%.4f,\"mean_steps\":%.4f,",
             hicp_nn_method_name(nn), hicp_backend_name(r.backend),
             r.threads, r.iterations, hicp_cloud_size(s), med, r.rmse,
             r.correspond_ms, r.reduce_ms, r.solve_ms,
             r.walk.queries ? (double)r.walk.steps / r.walk.queries : 0.0);
      print_transform(&r.transform);
      printf(",\"walk_hist\":[");
      for (int q = 0; q < 16; q++)
        printf("%s%llu", q ? "," : "", (unsigned long long)r.walk.hist[q]);
      printf("],");
      print_times(t, repeat);
      printf("}\n");
      fflush(stdout);
      hicp_cloud_destroy(s);
      free(scans[si]);
    }
    free(scans);
    hicp_model_destroy(m);
    hicp_context_destroy(ctx);
    free(t);
    return 0;
  }
  if (!strcmp(mode, "track")) {
    /* The frames are read first: a tracker's frames arrive in memory. */
    size_t nf;
    char **names = read_list(scan_path, &nf);
    hicp_cloud **fr = checked(calloc(nf, sizeof *fr));
    hicp_result *res = checked(calloc(nf, sizeof *res));
    double *ft = checked(calloc(nf * (size_t)repeat, sizeof *ft));
    for (size_t f = 0; f < nf; f++)
      if (hicp_cloud_read(ctx, names[f], HICP_FORMAT_AUTO, &fr[f]) != 0)
        die(ctx, names[f]);
    const hicp_reg_options o = reg_options(nn, iters, tol, chunk);
    for (int k = 0; k < repeat; k++)
      for (size_t f = 0; f < nf; f++) {
        hicp_result r;
        hicp_result_init(&r);
        double t0 = now_ms();
        if (hicp_register_cloud(ctx, m, fr[f], &o, f ? &res[f - 1].transform : NULL, &r) != 0)
          die(ctx, "register");
        ft[f * (size_t)repeat + (size_t)k] = now_ms() - t0;
        /* every repeat must follow the same track, to the bit */
        if (k > 0 && memcmp(&r.transform, &res[f].transform, sizeof r.transform) != 0)
          die(NULL, "a repeat tracked a different pose");
        res[f] = r;
      }
    for (size_t f = 0; f < nf; f++) {
      double *tf = ft + f * (size_t)repeat;
      printf("{\"mode\":\"track\",\"frame\":%zu,\"scan\":", f);
      print_string(names[f]);
      printf(",\"backend\":\"%s\",\"threads\":%d,"
             "\"iterations\":%d,\"scan_points\":%zu,\"median_ms\":%.4f,\"rmse\":%.17g,"
             "\"mean_steps\":%.4f,",
             hicp_backend_name(res[f].backend), res[f].threads,
             res[f].iterations, hicp_cloud_size(fr[f]), median(tf, repeat), res[f].rmse,
             res[f].walk.queries ? (double)res[f].walk.steps / res[f].walk.queries : 0.0);
      print_transform(&res[f].transform);
      printf(",");
      print_times(tf, repeat);
      printf("}\n");
      hicp_cloud_destroy(fr[f]);
      free(names[f]);
    }
    free(names);
    free(fr);
    free(res);
    free(ft);
    hicp_model_destroy(m);
    hicp_context_destroy(ctx);
    free(t);
    return 0;
  }
  hicp_cloud *s;
  if (hicp_cloud_read(ctx, scan_path, HICP_FORMAT_AUTO, &s) != 0)
    die(ctx, scan_path);

  if (!strcmp(mode, "batch")) {
    /* nframes frames: the scan under small different rotations about the
     * z axis through its origin, each a cloud with that origin, so that
     * frames far from 0 (UTM) are registered where they lie, as `register`
     * registers the scan.  The rotated points are rounded to float before
     * the origin is added back: with the origin 0, the frames' points are
     * floats, and each cloud holds them as they are (origin 0). */
    size_t n = hicp_cloud_size(s);
    const float *p = hicp_cloud_xyz(s);
    double org[3];
    hicp_cloud_origin(s, org);
    hicp_cloud **fr = checked(calloc((size_t)nframes, sizeof *fr));
    hicp_result *res = checked(calloc((size_t)nframes, sizeof *res));
    double *xyz = checked(malloc(sizeof *xyz * 3 * n));
    for (int k = 0; k < nframes; k++) {
      double a = 0.002 * k, c = cos(a), sn = sin(a);
      for (size_t i = 0; i < n; i++) {
        xyz[3 * i] = org[0] + (float)(c * p[3 * i] - sn * p[3 * i + 1]);
        xyz[3 * i + 1] = org[1] + (float)(sn * p[3 * i] + c * p[3 * i + 1]);
        xyz[3 * i + 2] = org[2] + p[3 * i + 2];
      }
      if (hicp_cloud_from_xyz_double(ctx, xyz, n, 0, &fr[k]) != 0)
        die(ctx, "batch frame");
    }
    free(xyz);
    const hicp_reg_options o = reg_options(nn, iters, 0.0, chunk);
    for (int r = 0; r < repeat; r++) {
      for (int k = 0; k < nframes; k++)
        hicp_result_init(&res[k]);
      double t0 = now_ms();
      if (hicp_register_batch_clouds(ctx, m, (const hicp_cloud *const *)fr, (size_t)nframes, &o,
                                     NULL, NULL, res) != 0)
        die(ctx, "batch");
      t[r] = now_ms() - t0;
    }
    double med = median(t, repeat);
    printf("{\"mode\":\"batch\",\"backend\":\"%s\",\"threads\":%d,\"frames\":%d,\"frame_points\":%zu,"
           "\"iterations\":%d,\"median_ms\":%.4f,\"frames_per_s\":%.3f,",
           hicp_backend_name(res[0].backend), hicp_context_threads(ctx), nframes, n, iters, med,
           1000.0 * nframes / med);
    print_times(t, repeat);
    printf("}\n");
    for (int k = 0; k < nframes; k++)
      hicp_cloud_destroy(fr[k]);
    free(fr);
    free(res);
  } else if (!strcmp(mode, "nn")) {
    /* Coherent queries, as in ICP: round r is the query set turned by
     * r x 0.05 degrees about z through its centroid; rounds after the
     * first start from the previous answers (bench/peers/nanoflann_nn.cpp
     * makes the same rounds).  Each round's queries are a cloud with the
     * scan's origin added back, as in `batch`, made outside the timing:
     * queries far from 0 (UTM) are answered where they lie, and queries
     * near it are the same floats as the scan's. */
    size_t n = hicp_cloud_size(s);
    const float *q0 = hicp_cloud_xyz(s);
    double org[3];
    hicp_cloud_origin(s, org);
    double *q = checked(malloc(sizeof *q * 3 * n));
    uint32_t *idx = checked(malloc(sizeof *idx * n));
    float *d2 = checked(malloc(sizeof *d2 * n));
    double c[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++)
      for (int d = 0; d < 3; d++)
        c[d] += q0[3 * i + d] / (double)n;
    hicp_nn_options o;
    hicp_nn_options_init(&o);
    o.method = nn;
    hicp_walk_stats ws;
    memset(&ws, 0, sizeof ws);
    uint64_t hist[16] = {0}, steps = 0, walks = 0;
    for (int k = 0; k < repeat; k++) {
      double busy = 0.0;
      for (int rd = 0; rd < rounds; rd++) {
        double a = rd * 0.05 * M_PI / 180.0, ca = cos(a), sa = sin(a);
        for (size_t i = 0; i < n; i++) {
          double x = q0[3 * i] - c[0], y = q0[3 * i + 1] - c[1];
          q[3 * i] = org[0] + (float)(c[0] + ca * x - sa * y);
          q[3 * i + 1] = org[1] + (float)(c[1] + sa * x + ca * y);
          q[3 * i + 2] = org[2] + q0[3 * i + 2];
        }
        hicp_cloud *qc;
        if (hicp_cloud_from_xyz_double(ctx, q, n, 0, &qc) != 0)
          die(ctx, "nn queries");
        o.warm_start = rd > 0;
        double t0 = now_ms();
        if (hicp_nn_query_cloud(ctx, m, qc, &o, idx, d2, &ws) != 0)
          die(ctx, "nn");
        busy += now_ms() - t0;
        hicp_cloud_destroy(qc);
        if (k == 0 && rd > 0) {
          for (int b = 0; b < 16; b++)
            hist[b] += ws.hist[b];
          steps += ws.steps;
          walks += ws.queries;
        }
      }
      t[k] = busy;
    }
    double med = median(t, repeat);
    printf("{\"mode\":\"nn\",\"nn\":\"%s\",\"threads\":%d,\"queries\":%zu,\"rounds\":%d,"
           "\"median_ms\":%.4f,\"ns_per_query\":%.2f,\"mean_steps_warm\":%.4f,\"walk_hist\":[",
           hicp_nn_method_name(nn), hicp_context_threads(ctx), n, rounds, med,
           med * 1e6 / ((double)n * rounds), walks ? (double)steps / walks : 0.0);
    for (int b = 0; b < 16; b++)
      printf("%s%llu", b ? "," : "", (unsigned long long)hist[b]);
    printf("],");
    print_times(t, repeat);
    printf("}\n");
    free(q);
    free(idx);
    free(d2);
  }
  hicp_cloud_destroy(s);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
  free(t);
  return 0;
}
