/* test_batch.c: batches, streams, tracking and the hybrid split: every
 * result is the bits of registering that frame alone, whatever the workers,
 * the split of the chunks and the order frames complete in. */
#include "config.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context.h"
#include "scheduler.h"
#include "testhelp.h"

/* A model: a smooth closed surface, and frames: its points moved by small
 * poses, with noise and different sizes. */
#define MODEL_N 6000
static float model_pts[3 * MODEL_N];

static hicp_model *make_model(void)
{
  th_rng r;
  th_rng_seed(&r, 77);
  for (int i = 0; i < MODEL_N; i++) {
    double u = th_uniform(&r) * 2 * M_PI, v = acos(2 * th_uniform(&r) - 1);
    double rad = 1.0 + 0.2 * sin(3 * u) * sin(2 * v);
    model_pts[3 * i] = (float)(1.5 * rad * sin(v) * cos(u));
    model_pts[3 * i + 1] = (float)(rad * sin(v) * sin(u));
    model_pts[3 * i + 2] = (float)(0.7 * rad * cos(v));
  }
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  hicp_model *m;
  cr_assert_eq(hicp_model_build(ctx, model_pts, MODEL_N, 0, NULL, &m), 0);
  hicp_context_destroy(ctx);
  return m;
}

static float *make_frame(int k, size_t *n)
{
  th_rng r;
  th_rng_seed(&r, 1000 + (uint64_t)k);
  *n = 2500 + (size_t)(k * 397) % 2500;
  float *f = malloc(sizeof(float) * 3 * *n);
  double R[9];
  th_rotation(3.0 * sin(k), 2.0 * cos(k), 0.5 * k, R);
  for (size_t i = 0; i < *n; i++) {
    size_t src = (size_t)(th_rng_next(&r) % MODEL_N);
    const float *p = &model_pts[3 * src];
    for (int d = 0; d < 3; d++)
      f[3 * i + d] = (float)(R[3 * d] * p[0] + R[3 * d + 1] * p[1] + R[3 * d + 2] * p[2] +
                             0.02 * (d + 1) * cos(k + d) + 0.003 * th_normal(&r));
  }
  return f;
}

static hicp_reg_options reg_opts(void)
{
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.max_iter = 25;
  o.chunk_points = 512; /* several chunks per frame */
  return o;
}

#define NF 10

/* A stream, tracked or not, with options o, on ctx. */
static hicp_stream *stream_on(hicp_context *ctx, const hicp_model *m, const hicp_reg_options *o,
                              int track)
{
  hicp_batch_options bo;
  hicp_batch_options_init(&bo);
  bo.track = track;
  hicp_stream *s;
  cr_assert_eq(hicp_stream_create(ctx, m, o, &bo, &s), 0, "%s", hicp_context_error(ctx));
  return s;
}

Test(batch, independent_frames_match_single_registrations)
{
  hicp_model *m = make_model();
  const float *frames[NF];
  size_t counts[NF];
  for (int k = 0; k < NF; k++)
    frames[k] = make_frame(k, &counts[k]);
  hicp_reg_options o = reg_opts();
  hicp_result solo[NF];
  hicp_context *one = th_context(1, HICP_BACKEND_CPU);
  for (int k = 0; k < NF; k++) {
    hicp_result_init(&solo[k]);
    cr_assert_eq(hicp_register(one, m, frames[k], counts[k], &o, NULL, &solo[k]), 0);
  }
  hicp_context_destroy(one);
  for (int threads = 1; threads <= 3; threads++) {
    hicp_context *ctx = th_context(threads, HICP_BACKEND_AUTO);
    hicp_result res[NF];
    for (int k = 0; k < NF; k++)
      hicp_result_init(&res[k]);
    cr_assert_eq(hicp_register_batch(ctx, m, frames, counts, NF, &o, NULL, NULL, res), 0, "%s",
                 hicp_context_error(ctx));
    for (int k = 0; k < NF; k++) {
      cr_assert_eq(res[k].error, 0);
      cr_assert_eq(res[k].frame, (uint64_t)k);
      cr_assert(memcmp(&res[k].transform, &solo[k].transform, sizeof solo[k].transform) == 0,
                "%d threads: frame %d differs", threads, k);
      cr_assert_eq(res[k].iterations, solo[k].iterations);
    }
    hicp_context_destroy(ctx);
  }
  /* fewer frames than threads: the workers share the threads out (5 for
   * one frame, 2 and 3 for two, 1, 2 and 2 for three) */
  hicp_context *five = th_context(5, HICP_BACKEND_CPU);
  for (size_t nf = 1; nf <= 3; nf++) {
    hicp_result res[3];
    for (size_t k = 0; k < nf; k++)
      hicp_result_init(&res[k]);
    cr_assert_eq(hicp_register_batch(five, m, frames, counts, nf, &o, NULL, NULL, res), 0, "%s",
                 hicp_context_error(five));
    for (size_t k = 0; k < nf; k++)
      cr_assert(memcmp(&res[k].transform, &solo[k].transform, sizeof solo[k].transform) == 0 &&
                    res[k].iterations == solo[k].iterations,
                "%zu frames on 5 threads: frame %zu differs", nf, k);
  }
  hicp_context_destroy(five);
  /* more threads than a crew has room for workers (64): 100 threads for
   * 128 frames run 64 workers, 36 of them on two threads (they ran on one
   * each, and 36 threads stood idle) */
  enum { NBIG = 128 };
  const float *many[NBIG];
  size_t many_n[NBIG];
  for (int k = 0; k < NBIG; k++) {
    many[k] = frames[k % NF];
    many_n[k] = counts[k % NF];
  }
  hicp_context *hundred = th_context(100, HICP_BACKEND_CPU);
  hicp_result big[NBIG];
  for (int k = 0; k < NBIG; k++)
    hicp_result_init(&big[k]);
  cr_assert_eq(hicp_register_batch(hundred, m, many, many_n, NBIG, &o, NULL, NULL, big), 0, "%s",
               hicp_context_error(hundred));
  int most = 0;
  for (int k = 0; k < NBIG; k++) {
    cr_assert(memcmp(&big[k].transform, &solo[k % NF].transform, sizeof big[k].transform) == 0,
              "100 threads: frame %d differs", k);
    cr_assert(big[k].threads >= 1 && big[k].threads <= 2, "frame %d ran on %d threads", k,
              big[k].threads);
    most = big[k].threads > most ? big[k].threads : most;
  }
  cr_assert_eq(most, 2, "100 threads for 128 frames: every worker ran on one thread");
  hicp_context_destroy(hundred);
  for (int k = 0; k < NF; k++)
    free((void *)frames[k]);
  hicp_model_destroy(m);
}

/* The hybrid loop with several workers and splits: the bits never move. */
Test(batch, any_split_gives_the_same_bits)
{
  hicp_model *m = make_model();
  size_t n;
  float *f = make_frame(3, &n);
  hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
  hicp_reg_options o = reg_opts();
  o.filter_start = 4; /* pass B too */
  o.trim = 0.9;
  hicp__plan plan;
  size_t stride;
  cr_assert_eq(hicp__make_plan(ctx, m, &o, &plan, &stride), 0);
  static const double zero[3] = {0, 0, 0};
  hicp_result ref;
  hicp_result_init(&ref);
  cr_assert_eq(hicp__register_frame(ctx, m, f, n, zero, &plan, NULL, NULL, NULL, NULL, &ref,
                                    hicp__now_ms()),
               0);
  /* teams of 1..4 CPU workers with uneven measured rates */
  static const double rates[4][4] = {{1, 0, 0, 0}, {1, 5, 0, 0}, {7, 1, 2, 0}, {1, 1, 9, 0.3}};
  for (int t = 0; t < 4; t++) {
    hicp__worker ws[4];
    hicp__team team;
    team.nw = t + 1;
    team.cpu_share = -1.0;
    for (int i = 0; i < team.nw; i++) {
      hicp__cpu_worker_init(&ws[i], ctx, 1 + i % 2);
      ws[i].rate = rates[t][i];
      team.w[i] = &ws[i];
    }
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp__register_frame(ctx, m, f, n, zero, &plan, NULL, &team, NULL, NULL, &r,
                                      hicp__now_ms()),
                 0);
    cr_assert(memcmp(&r.transform, &ref.transform, sizeof r.transform) == 0, "team of %d differs",
              team.nw);
    cr_assert_eq(r.rmse, ref.rmse);
    cr_assert_eq(r.inliers, ref.inliers);
    cr_assert_eq(r.backend, team.nw > 1 ? HICP_BACKEND_HYBRID : HICP_BACKEND_CPU);
  }
  free(f);
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
}

/* Every frame of a batch is the bits of its registration alone. */
static void batch_is_solo(hicp_context *ctx, const hicp_model *m, const float **frames,
                          const size_t *counts, size_t nf, const char *what)
{
  hicp_reg_options o = reg_opts();
  hicp_context *one = th_context(1, HICP_BACKEND_CPU);
  hicp_result res[NF], solo;
  for (size_t k = 0; k < nf; k++)
    hicp_result_init(&res[k]);
  cr_assert_eq(hicp_register_batch(ctx, m, frames, counts, nf, &o, NULL, NULL, res), 0, "%s: %s",
               what, hicp_context_error(ctx));
  for (size_t k = 0; k < nf; k++) {
    hicp_result_init(&solo);
    cr_assert_eq(hicp_register(one, m, frames[k], counts[k], &o, NULL, &solo), 0);
    cr_assert_eq(res[k].error, 0, "%s frame %zu: %s", what, k, res[k].note);
    cr_assert(memcmp(&res[k].transform, &solo.transform, sizeof solo.transform) == 0 &&
                  res[k].iterations == solo.iterations,
              "%s: frame %zu differs", what, k);
  }
  hicp_context_destroy(one);
}

/* A context keeps its batch's workers for the next batch that plans the
 * same ones (on the CPU whatever the model), a cancel made between
 * batches stops none of the next one's frames, and an empty batch leaves
 * them be; a batch that plans other workers (fewer frames than threads)
 * makes them anew (stop 50: a one-frame CUDA batch
 * made its worker at every call, 7.2 ms against a registration's 2.3). */
Test(batch, workers_kept_for_the_next_batch)
{
  hicp_model *a = make_model();
  hicp_context *bctx;
  cr_assert_eq(hicp_context_create(NULL, &bctx), 0);
  hicp_model *b;
  cr_assert_eq(hicp_model_build(bctx, model_pts, MODEL_N / 2, 0, NULL, &b), 0);
  hicp_context_destroy(bctx);
  const float *frames[4];
  size_t counts[4];
  for (int k = 0; k < 4; k++)
    frames[k] = make_frame(k, &counts[k]);
  hicp_context *ctx = th_context(3, HICP_BACKEND_CPU);
  const unsigned made = atomic_load(&hicp__batch_crews_made);
  batch_is_solo(ctx, a, frames, counts, 4, "first batch");
  cr_assert_eq(atomic_load(&hicp__batch_crews_made), made + 1);
  batch_is_solo(ctx, b, frames, counts, 4, "another model");
  hicp_context_cancel(ctx);
  batch_is_solo(ctx, a, frames, counts, 4, "after a cancel between batches");
  cr_assert_eq(atomic_load(&hicp__batch_crews_made), made + 1, "the workers were made again");
  cr_assert_eq(hicp_register_batch(ctx, a, NULL, NULL, 0, NULL, NULL, NULL, (hicp_result *)NULL), 0);
  batch_is_solo(ctx, a, frames, counts, 4, "after an empty batch");
  cr_assert_eq(atomic_load(&hicp__batch_crews_made), made + 1,
               "an empty batch made workers, or gave the kept ones up");
  batch_is_solo(ctx, a, frames, counts, 2, "two frames on three threads");
  cr_assert_eq(atomic_load(&hicp__batch_crews_made), made + 2);
  batch_is_solo(ctx, b, frames, counts, 3, "three frames");
  batch_is_solo(ctx, b, frames, counts, 3, "three frames again");
  cr_assert_eq(atomic_load(&hicp__batch_crews_made), made + 3);
  hicp_context_destroy(ctx); /* frees the kept workers (valgrind and ASan builds check) */
  for (int k = 0; k < 4; k++)
    free((void *)frames[k]);
  hicp_model_destroy(a);
  hicp_model_destroy(b);
}

/* A pass a time budget stopped part way measures no rate: its workers did
 * part of their share (stop 48's diff review: rates of 1.4 and 2.0 chunks
 * a ms became 5922 and 3364, so a hybrid team would have given the CPU,
 * the only worker that stops early, every chunk of the next frame). */
Test(batch, a_stopped_pass_keeps_the_rates)
{
  hicp_model *m = make_model();
  size_t n;
  float *f = make_frame(3, &n);
  hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
  hicp_reg_options o = reg_opts();
  o.time_budget_ms = 1e-3; /* ends before any piece of the first pass */
  hicp__plan plan;
  size_t stride;
  cr_assert_eq(hicp__make_plan(ctx, m, &o, &plan, &stride), 0);
  static const double zero[3] = {0, 0, 0};
  hicp__worker ws[2];
  hicp__team team;
  team.nw = 2;
  team.cpu_share = -1.0;
  for (int i = 0; i < 2; i++) {
    hicp__cpu_worker_init(&ws[i], ctx, 1);
    ws[i].rate = 1.5 + i;
    team.w[i] = &ws[i];
  }
  hicp_result r;
  hicp_result_init(&r);
  cr_assert_eq(hicp__register_frame(ctx, m, f, n, zero, &plan, NULL, &team, NULL, NULL, &r,
                                    hicp__now_ms()),
               0);
  cr_assert_eq(r.stop, HICP_STOP_TIMEOUT);
  cr_assert_eq(r.iterations, 0);
  cr_assert_eq(ws[0].rate, 1.5, "rate %g", ws[0].rate);
  cr_assert_eq(ws[1].rate, 2.5, "rate %g", ws[1].rate);
  free(f);
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
}

/* Tracking: each frame from the previous pose and matches, as if the user
 * chained single registrations; bitwise the same. */
Test(batch, tracking_chains_poses)
{
  hicp_model *m = make_model();
  const float *frames[NF];
  size_t counts[NF];
  /* one sensor grid: same size, a slowly moving object */
  for (int k = 0; k < NF; k++) {
    size_t n;
    float *f = make_frame(0, &n);
    double R[9];
    th_rotation(0.3 * k, 0.1 * k, 0.2 * k, R);
    for (size_t i = 0; i < n; i++) {
      float p[3] = {f[3 * i], f[3 * i + 1], f[3 * i + 2]};
      for (int d = 0; d < 3; d++)
        f[3 * i + d] = (float)(R[3 * d] * p[0] + R[3 * d + 1] * p[1] + R[3 * d + 2] * p[2] + 0.004 * k);
    }
    frames[k] = f;
    counts[k] = n;
  }
  hicp_reg_options o = reg_opts();
  hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
  hicp_result chain[NF];
  hicp_transform pose;
  hicp_transform_identity(&pose);
  for (int k = 0; k < NF; k++) {
    hicp_result_init(&chain[k]);
    cr_assert_eq(hicp_register(ctx, m, frames[k], counts[k], &o, &pose, &chain[k]), 0);
    pose = chain[k].transform;
  }
  hicp_batch_options bo;
  hicp_batch_options_init(&bo);
  bo.track = 1;
  hicp_result res[NF];
  for (int k = 0; k < NF; k++)
    hicp_result_init(&res[k]);
  cr_assert_eq(hicp_register_batch(ctx, m, frames, counts, NF, &o, &bo, NULL, res), 0, "%s",
               hicp_context_error(ctx));
  uint64_t steps_chain = 0, steps_track = 0;
  for (int k = 0; k < NF; k++) {
    cr_assert(memcmp(&res[k].transform, &chain[k].transform, sizeof res[k].transform) == 0,
              "tracked frame %d differs", k);
    if (k > 0) {
      steps_chain += chain[k].walk.steps;
      steps_track += res[k].walk.steps;
    }
  }
  /* reusing the previous frame's matches shortens the walks */
  cr_assert_leq(steps_track, steps_chain, "%llu vs %llu", (unsigned long long)steps_track,
                (unsigned long long)steps_chain);
  hicp_context_destroy(ctx);
  for (int k = 0; k < NF; k++)
    free((void *)frames[k]);
  hicp_model_destroy(m);
}

Test(batch, stream_answers_in_order)
{
  hicp_model *m = make_model();
  const float *frames[NF];
  size_t counts[NF];
  for (int k = 0; k < NF; k++)
    frames[k] = make_frame(k, &counts[k]);
  hicp_reg_options o = reg_opts();
  hicp_context *ref_ctx = th_context(2, HICP_BACKEND_CPU);
  hicp_result ref[NF];
  for (int k = 0; k < NF; k++) {
    hicp_result_init(&ref[k]);
    cr_assert_eq(hicp_register(ref_ctx, m, frames[k], counts[k], &o, NULL, &ref[k]), 0);
  }
  hicp_context_destroy(ref_ctx);
  for (int track = 0; track <= 1; track++) {
    hicp_context *ctx = th_context(3, HICP_BACKEND_CPU);
    hicp_stream *s = stream_on(ctx, m, &o, track);
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp_stream_receive(s, &r, 0), HICP_EINVAL); /* nothing outstanding */
    hicp_transform ident;
    hicp_transform_identity(&ident);
    for (int k = 0; k < NF; k++) {
      uint64_t id;
      /* tracking: give every frame its own start so results compare */
      cr_assert_eq(hicp_stream_submit(s, frames[k], counts[k], track ? &ident : NULL, &id), 0);
      cr_assert_eq(id, (uint64_t)k);
    }
    float bad[6] = {0, 0, 0, NAN, 0, 0};
    cr_assert_eq(hicp_stream_submit(s, bad, 2, NULL, NULL), HICP_ENONFINITE);
    for (int k = 0; k < NF; k++) {
      hicp_result_init(&r);
      int rc;
      while ((rc = hicp_stream_receive(s, &r, k % 2)) == HICP_EAGAIN)
        usleep(100);
      cr_assert_eq(rc, 0);
      cr_assert_eq(r.frame, (uint64_t)k);
      cr_assert_eq(r.error, 0);
      cr_assert(memcmp(&r.transform, &ref[k].transform, sizeof r.transform) == 0,
                "track %d: streamed frame %d differs", track, k);
    }
    /* a frame that fails is reported in its result; later frames go on */
    float empty_ok[3] = {0.1f, 0.2f, 0.3f};
    cr_assert_eq(hicp_stream_submit(s, empty_ok, 1, NULL, NULL), 0);
    cr_assert_eq(hicp_stream_submit(s, frames[0], counts[0], NULL, NULL), 0);
    hicp_result_init(&r);
    cr_assert_eq(hicp_stream_receive(s, &r, 1), 0);
    hicp_result_init(&r);
    cr_assert_eq(hicp_stream_receive(s, &r, 1), 0);
    cr_assert_eq(r.error, 0);
    /* destroying with frames outstanding is clean */
    for (int k = 0; k < 4; k++)
      cr_assert_eq(hicp_stream_submit(s, frames[k], counts[k], NULL, NULL), 0);
    hicp_stream_destroy(s);
    hicp_context_destroy(ctx);
  }
  hicp_stream_destroy(NULL);
  for (int k = 0; k < NF; k++)
    free((void *)frames[k]);
  hicp_model_destroy(m);
}

/* The CPUs thread `tid` of this process may run on, as the kernel lists
 * them ("1", "0-3"); 0 if it cannot be read. */
static int task_cpus(const char *tid, char *out, size_t size)
{
  char path[96], line[256];
  snprintf(path, sizeof path, "/proc/self/task/%.40s/status", tid);
  FILE *f = fopen(path, "r");
  int found = 0;
  while (f != NULL && !found && fgets(line, sizeof line, f) != NULL)
    if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
      snprintf(out, size, "%.200s", line + 18 + strspn(line + 18, " \t"));
      out[strcspn(out, "\n")] = '\0';
      found = 1;
    }
  if (f != NULL)
    fclose(f);
  return found;
}

/* This process's threads, as /proc names them: up to 256. */
static int task_ids(char ids[][16], int max)
{
  DIR *d = opendir("/proc/self/task");
  int n = 0;
  for (struct dirent *e; d != NULL && n < max && (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.')
      snprintf(ids[n++], 16, "%.15s", e->d_name);
  if (d != NULL)
    closedir(d);
  return n;
}

/* A caller that submits faster than the frames run, or never receives,
 * is refused once what the stream holds (the copies of frames not yet
 * run, the results not yet received) would pass the memory limit, where
 * the queue grew until the memory ran out (stop 44).  Every frame queued
 * before the refusal still answers, and once they are received the
 * stream takes frames again. */
Test(batch, stream_holds_what_it_queues_to_the_limit)
{
  hicp_model *m = make_model();
  size_t n;
  float *f = make_frame(0, &n);
  hicp_reg_options o = reg_opts();
  for (int track = 0; track <= 1; track++) {
    hicp_context_options co;
    hicp_context_options_init(&co);
    co.threads = 1;
    co.backend = HICP_BACKEND_CPU;
    co.memory_limit = UINT64_C(4) << 20;
    hicp_context *ctx;
    cr_assert_eq(hicp_context_create(&co, &ctx), 0);
    hicp_stream *s = stream_on(ctx, m, &o, track);
    char what[16];
    snprintf(what, sizeof what, "track %d", track);
    const size_t k = th_stream_fill_to_limit(s, ctx, f, n, 4, what);
    for (size_t i = 0; i < k; i++) {
      hicp_result r;
      hicp_result_init(&r);
      cr_assert_eq(hicp_stream_receive(s, &r, 1), HICP_OK);
      cr_assert_eq(r.frame, (uint64_t)i);
      cr_assert_eq(r.error, 0, "frame %zu: %s", i, r.note);
    }
    for (int again = 0; again < 3; again++)
      cr_assert_eq(hicp_stream_submit(s, f, n, NULL, NULL), HICP_OK, "%s",
                   hicp_context_error(ctx));
    hicp_stream_destroy(s);
    hicp_context_destroy(ctx);
  }
  free(f);
  hicp_model_destroy(m);
}

/* A process kept to one CPU (taskset, a batch system's cpuset) gets one
 * thread by default, and the workers of its streams stay on that CPU: the
 * library may place its threads within what it was given, never outside. */
Test(batch, workers_keep_to_the_cpus_they_are_given)
{
  cpu_set_t all;
  const int last = th_pin_to_one_cpu(&all);
  if (last < 0)
    cr_skip_test("one CPU: nothing to keep to");
  char want[16], got[256];
  snprintf(want, sizeof want, "%d", last);

  /* the default count is taken once per process, here under the mask */
  hicp_context *dflt = th_context(0, HICP_BACKEND_CPU);
  cr_expect_eq(hicp_context_threads(dflt), 1, "%d threads by default on one CPU",
               hicp_context_threads(dflt));
  hicp_context_destroy(dflt);

  static char before[256][16], after[256][16];
  const int nbefore = task_ids(before, 256);
  hicp_model *m = make_model();
  hicp_reg_options o = reg_opts();
  hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
  hicp_stream *s = stream_on(ctx, m, &o, 0);
  size_t n;
  float *f = make_frame(1, &n);
  for (int k = 0; k < 4; k++)
    cr_assert_eq(hicp_stream_submit(s, f, n, NULL, NULL), 0);
  for (int k = 0; k < 4; k++) {
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp_stream_receive(s, &r, 1), 0);
    cr_assert_eq(r.error, 0);
  }
  /* every worker has started (and placed itself) by now */
  const int nafter = task_ids(after, 256);
  int fresh = 0;
  for (int i = 0; i < nafter; i++) {
    int old = 0;
    for (int j = 0; j < nbefore && !old; j++)
      old = strcmp(after[i], before[j]) == 0;
    if (old)
      continue;
    fresh++;
    cr_assert(task_cpus(after[i], got, sizeof got));
    cr_expect_str_eq(got, want, "thread %s may run on CPUs %s, outside the %s it was given",
                     after[i], got, want);
  }
  cr_expect_geq(fresh, 2, "the stream's two workers were not found");
  hicp_stream_destroy(s);
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
  free(f);
}

/* Frames far from the origin (UTM-like coordinates, given in double):
 * each cloud has its own origin, and a streamed or batched frame is the
 * bits of hicp_register_cloud() of it, independent or tracked.  Tracking carries
 * absolute poses from one frame's origin to the next's. */
static hicp_cloud *far_cloud(hicp_context *ctx, const float *p, size_t n, const double off[3])
{
  double *d = malloc(sizeof(double) * 3 * n);
  cr_assert_not_null(d);
  for (size_t i = 0; i < 3 * n; i++)
    d[i] = (double)p[i] + off[i % 3];
  hicp_cloud *c;
  cr_assert_eq(hicp_cloud_from_xyz_double(ctx, d, n, 0, &c), 0, "%s", hicp_context_error(ctx));
  free(d);
  double o[3];
  hicp_cloud_origin(c, o);
  cr_assert(fabs(o[0] - off[0]) < 10.0 && fabs(o[1] - off[1]) < 10.0,
            "the origin follows the data");
  return c;
}

Test(batch, frames_far_from_the_origin)
{
  const double off[3] = {512345.678, 4234567.891, 123.4};
  hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
  hicp_model *plain = make_model(); /* fills model_pts */
  hicp_model_destroy(plain);
  hicp_cloud *mc = far_cloud(ctx, model_pts, MODEL_N, off);
  hicp_model *m;
  cr_assert_eq(hicp_model_build_cloud(ctx, mc, NULL, &m), 0, "%s", hicp_context_error(ctx));
  enum { FN = 4 };
  hicp_cloud *fc[FN];
  for (int k = 0; k < FN; k++) {
    size_t n;
    float *f = make_frame(k, &n);
    /* every frame a little elsewhere: its own origin */
    const double fo[3] = {off[0] + 0.01 * k, off[1] - 0.02 * k, off[2]};
    fc[k] = far_cloud(ctx, f, n, fo);
    free(f);
  }
  hicp_reg_options o = reg_opts();
  /* poses are absolute: the frames are the model's points moved a little,
   * at the same place, so the identity is a good start */
  hicp_transform ident;
  hicp_transform_identity(&ident);
  hicp_result alone[FN], chain[FN];
  hicp_transform pose = ident;
  for (int k = 0; k < FN; k++) {
    hicp_result_init(&alone[k]);
    cr_assert_eq(hicp_register_cloud(ctx, m, fc[k], &o, &ident, &alone[k]), 0, "%s",
                 hicp_context_error(ctx));
    hicp_result_init(&chain[k]);
    cr_assert_eq(hicp_register_cloud(ctx, m, fc[k], &o, &pose, &chain[k]), 0);
    pose = chain[k].transform;
    /* the fit is as good as near the origin: the model surface is reached */
    cr_assert_lt(alone[k].rmse, 0.02, "frame %d rmse %g", k, alone[k].rmse);
  }
  for (int track = 0; track <= 1; track++) {
    hicp_context *sctx = th_context(2, HICP_BACKEND_CPU);
    hicp_batch_options bo;
    hicp_batch_options_init(&bo);
    bo.track = track;
    hicp_stream *s;
    cr_assert_eq(hicp_stream_create(sctx, m, &o, &bo, &s), 0);
    for (int k = 0; k < FN; k++)
      cr_assert_eq(hicp_stream_submit_cloud(s, fc[k], track && k > 0 ? NULL : &ident, NULL), 0,
                   "%s", hicp_context_error(sctx));
    cr_assert_eq(hicp_stream_submit_cloud(s, NULL, NULL, NULL), HICP_EINVAL);
    for (int k = 0; k < FN; k++) {
      hicp_result r;
      hicp_result_init(&r);
      cr_assert_eq(hicp_stream_receive(s, &r, 1), 0);
      cr_assert_eq(r.error, 0, "%s", r.note);
      const hicp_result *want = track ? &chain[k] : &alone[k];
      cr_assert(memcmp(&r.transform, &want->transform, sizeof r.transform) == 0,
                "track %d: far frame %d differs from hicp_register_cloud", track, k);
    }
    hicp_stream_destroy(s);
    hicp_context_destroy(sctx);
  }
  /* a batch of the same clouds: the same bits again */
  hicp_transform inits[FN];
  for (int k = 0; k < FN; k++)
    inits[k] = ident;
  for (int track = 0; track <= 1; track++) {
    hicp_batch_options bo;
    hicp_batch_options_init(&bo);
    bo.track = track;
    hicp_result res[FN];
    for (int k = 0; k < FN; k++)
      hicp_result_init(&res[k]);
    cr_assert_eq(hicp_register_batch_clouds(ctx, m, (const hicp_cloud *const *)fc, FN, &o, &bo,
                                            inits, res),
                 0, "%s", hicp_context_error(ctx));
    for (int k = 0; k < FN; k++)
      cr_assert(memcmp(&res[k].transform, track ? &chain[k].transform : &alone[k].transform,
                       sizeof res[k].transform) == 0,
                "batch, track %d: far frame %d differs from hicp_register_cloud", track, k);
  }
  const hicp_cloud *with_null[2] = {fc[0], NULL};
  hicp_result two[2];
  hicp_result_init(&two[0]);
  hicp_result_init(&two[1]);
  /* a NULL cloud fails its frame alone, as a NULL frame does in a batch */
  cr_assert_eq(hicp_register_batch_clouds(ctx, m, with_null, 2, &o, NULL, NULL, two), HICP_EINVAL);
  cr_assert(strstr(hicp_context_error(ctx), "frame 1") != NULL, "%s", hicp_context_error(ctx));
  cr_assert_eq(two[0].error, 0, "%s", two[0].note);
  cr_assert(memcmp(&two[0].transform, &alone[0].transform, sizeof two[0].transform) == 0);
  cr_assert_eq(two[1].error, HICP_EINVAL);
  /* a cloud's points are packed: a stream with a stride cannot take one */
  hicp_reg_options strided = o;
  strided.scan_stride = 16;
  hicp_stream *s;
  cr_assert_eq(hicp_stream_create(ctx, m, &strided, NULL, &s), 0);
  cr_assert_eq(hicp_stream_submit_cloud(s, fc[0], NULL, NULL), HICP_EINVAL);
  cr_assert(strstr(hicp_context_error(ctx), "scan_stride") != NULL);
  hicp_stream_destroy(s);
  cr_assert_eq(hicp_register_batch_clouds(ctx, m, (const hicp_cloud *const *)fc, 1, &strided,
                                          NULL, NULL, two),
               HICP_EINVAL);
  cr_assert(strstr(hicp_context_error(ctx), "scan_stride") != NULL);
  for (int k = 0; k < FN; k++)
    hicp_cloud_destroy(fc[k]);
  hicp_model_destroy(m);
  hicp_cloud_destroy(mc);
  hicp_context_destroy(ctx);
}

typedef struct cancel_arg {
  hicp_context *ctx;
  int delay_us;
} cancel_arg;

static void *cancel_later(void *p)
{
  cancel_arg *a = p;
  usleep((useconds_t)a->delay_us);
  hicp_context_cancel(a->ctx);
  return NULL;
}

/* A batch cancelled from another thread: every frame is accounted for,
 * finished, stopped early, or not started; none lost or duplicated.  The
 * cancel comes 30 ms into a batch of some 600 ms; where a loaded machine
 * delayed it past the batch's end, the batch is run again (5 tries). */
Test(batch, cancel_accounts_for_every_frame)
{
  hicp_model *m = make_model();
  enum { N = 40 };
  const float *frames[N];
  size_t counts[N];
  for (int k = 0; k < N; k++)
    frames[k] = make_frame(k, &counts[k]);
  hicp_reg_options o = reg_opts();
  o.max_iter = 200;
  o.tol = 0;
  hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
  int done = 0, stopped = 0, skipped = 0;
  for (int tries = 0; tries < 5 && skipped + stopped == 0; tries++) {
    hicp_result res[N];
    for (int k = 0; k < N; k++)
      hicp_result_init(&res[k]);
    cancel_arg a = {ctx, 30000};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, cancel_later, &a), 0);
    int rc = hicp_register_batch(ctx, m, frames, counts, N, &o, NULL, NULL, res);
    pthread_join(t, NULL);
    cr_assert(rc == HICP_ECANCELED || rc == 0, "rc %d", rc);
    done = stopped = skipped = 0;
    for (int k = 0; k < N; k++) {
      if (res[k].error == HICP_ECANCELED) {
        skipped++;
      } else {
        cr_assert_eq(res[k].error, 0);
        cr_assert_eq(res[k].frame, (uint64_t)k);
        if (res[k].stop == HICP_STOP_CANCELED)
          stopped++;
        else
          done++;
      }
    }
    cr_assert_eq(done + stopped + skipped, N);
  }
  cr_assert_gt(skipped + stopped, 0, "the cancel came too late to test anything, 5 times");
  hicp_context_destroy(ctx);
  for (int k = 0; k < N; k++)
    free((void *)frames[k]);
  hicp_model_destroy(m);
}

/* Cancelling a stream's context stops the frames submitted before the
 * request, and only those: a request made while nothing ran, or before
 * later frames were submitted, leaves them alone. */
Test(batch, stream_cancel_applies_to_earlier_frames)
{
  hicp_model *m = make_model();
  enum { N = 10, BEFORE = 8 };
  const float *frames[N];
  size_t counts[N];
  for (int k = 0; k < N; k++)
    frames[k] = make_frame(k, &counts[k]);
  hicp_reg_options o = reg_opts();
  o.max_iter = 200; /* long frames, so the request finds some unfinished */
  o.tol = 0;
  hicp_context *ref_ctx = th_context(2, HICP_BACKEND_CPU);
  hicp_result ref[N];
  for (int k = 0; k < N; k++) {
    hicp_result_init(&ref[k]);
    cr_assert_eq(hicp_register(ref_ctx, m, frames[k], counts[k], &o, NULL, &ref[k]), 0);
  }
  hicp_context_destroy(ref_ctx);
  hicp_transform ident;
  hicp_transform_identity(&ident);
  for (int track = 0; track <= 1; track++) {
    hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
    hicp_context_cancel(ctx); /* nothing is running: no frame is stopped by it */
    hicp_stream *s = stream_on(ctx, m, &o, track);
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp_stream_submit(s, frames[0], counts[0], &ident, NULL), 0);
    cr_assert_eq(hicp_stream_receive(s, &r, 1), 0);
    cr_assert_eq(r.error, 0, "track %d: %s", track, r.note);
    cr_assert_neq(r.stop, HICP_STOP_CANCELED, "track %d: an old request stopped a frame", track);
    cr_assert(memcmp(&r.transform, &ref[0].transform, sizeof r.transform) == 0);

    /* Each frame starts from the identity, so every result compares.
     * Where a loaded machine held the caller up until the frames before
     * the request had all run, it goes again (5 tries). */
    int hit = 0;
    for (int tries = 0; tries < 5 && hit == 0; tries++) {
      const uint64_t first = 1 + (uint64_t)tries * N; /* the first frame's index */
      for (int k = 0; k < BEFORE; k++)
        cr_assert_eq(hicp_stream_submit(s, frames[k], counts[k], &ident, NULL), 0);
      hicp_context_cancel(ctx);
      for (int k = BEFORE; k < N; k++)
        cr_assert_eq(hicp_stream_submit(s, frames[k], counts[k], &ident, NULL), 0);
      for (int k = 0; k < N; k++) {
        hicp_result_init(&r);
        cr_assert_eq(hicp_stream_receive(s, &r, 1), 0);
        cr_assert_eq(r.frame, first + (uint64_t)k);
        if (k < BEFORE) {
          if (r.error == HICP_ECANCELED || r.stop == HICP_STOP_CANCELED)
            hit++;
          else
            cr_assert_eq(r.error, 0, "track %d frame %d: %s", track, k, r.note);
        } else {
          cr_assert_eq(r.error, 0, "track %d frame %d: %s", track, k, r.note);
          cr_assert_neq(r.stop, HICP_STOP_CANCELED, "track %d: frame %d submitted after the "
                        "request was stopped by it", track, k);
          cr_assert(memcmp(&r.transform, &ref[k].transform, sizeof r.transform) == 0,
                    "track %d: frame %d differs", track, k);
        }
      }
    }
    cr_assert_gt(hit, 0, "track %d: the request stopped none of the frames before it, 5 times",
                 track);
    hicp_stream_destroy(s);
    hicp_context_destroy(ctx);
  }
  for (int k = 0; k < N; k++)
    free((void *)frames[k]);
  hicp_model_destroy(m);
}

/* Destroying a stream stops the frame it is running at the frame's next
 * iteration boundary, rather than waiting for it to finish: here a frame
 * of a million iterations (minutes) must not hold the caller.  The bound
 * is generous (sanitizer builds, a loaded machine); the frame alone would
 * take hundreds of times longer.  A thread waiting in hicp_stream_receive
 * meanwhile is woken and returns HICP_ECANCELED, and the stream is freed
 * only once it has left (stop 44: it waited for ever, or the stream was
 * freed under it).  The caller's own context is not cancelled by it: a
 * registration on it afterwards runs normally. */
Test(batch, stream_destroy_stops_a_running_frame, .timeout = 60)
{
  hicp_model *m = make_model();
  size_t n;
  float *f = make_frame(3, &n);
  hicp_reg_options o = reg_opts();
  o.max_iter = 1000000;
  o.tol = 0;
  for (int track = 0; track <= 1; track++) {
    hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
    hicp_stream *s = stream_on(ctx, m, &o, track);
    char what[16];
    snprintf(what, sizeof what, "track %d", track);
    th_stream_destroy_under_a_receiver(s, f, n, what);
    hicp_result r;
    hicp_result_init(&r);
    hicp_reg_options few = reg_opts();
    cr_assert_eq(hicp_register(ctx, m, f, n, &few, NULL, &r), 0, "%s", hicp_context_error(ctx));
    cr_assert_neq(r.stop, HICP_STOP_CANCELED, "track %d: the context stayed cancelled", track);
    cr_assert_gt(r.iterations, 0, "track %d", track);
    hicp_context_destroy(ctx);
  }
  free(f);
  hicp_model_destroy(m);
}

/* (stop 57, from a review) hicp_stream_destroy cannot protect a call that
 * has only just begun on another thread: a receiver that loops, or a
 * submitter copying its points, met a freed stream (valgrind: invalid
 * reads at the stream's lock).  hicp_stream_stop ends them safely: each
 * thread's next (or current) call returns HICP_ECANCELED, the program
 * joins them, and only then destroys.  A submitter and a receiver loop
 * until then, on a stream tracked and not; the stop comes while they run. */
typedef struct stream_user {
  hicp_stream *s;
  const float *f;
  size_t n;
  int rc;   /* the code that ended the loop */
  long ok;  /* calls that succeeded */
} stream_user;

static void *submit_until_stopped(void *arg)
{
  stream_user *u = arg;
  for (;;) {
    u->rc = hicp_stream_submit(u->s, u->f, u->n, NULL, NULL);
    if (u->rc == HICP_ELIMIT) { /* the receiver is behind: let it catch up */
      usleep(1000);
      continue;
    }
    if (u->rc != HICP_OK)
      return NULL;
    u->ok++;
  }
}

static void *receive_until_stopped(void *arg)
{
  stream_user *u = arg;
  for (;;) {
    hicp_result r;
    hicp_result_init(&r);
    u->rc = hicp_stream_receive(u->s, &r, 1);
    if (u->rc == HICP_EINVAL) { /* nothing outstanding yet */
      usleep(200);
      continue;
    }
    if (u->rc != HICP_OK)
      return NULL;
    u->ok++;
  }
}

Test(batch, stream_stop_ends_its_threads_calls, .timeout = 120)
{
  hicp_model *m = make_model();
  size_t n;
  float *f = make_frame(4, &n);
  hicp_reg_options o = reg_opts();
  for (int track = 0; track <= 1; track++) {
    hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
    hicp_stream *s = stream_on(ctx, m, &o, track);
    stream_user sub = {s, f, n, -1000, 0}, rec = {s, f, n, -1000, 0};
    pthread_t ts, tr;
    cr_assert_eq(pthread_create(&ts, NULL, submit_until_stopped, &sub), 0);
    cr_assert_eq(pthread_create(&tr, NULL, receive_until_stopped, &rec), 0);
    for (int k = 0; k < 2000 && rec.ok < 5; k++) /* some frames through */
      usleep(5000);
    hicp_stream_stop(s);
    hicp_stream_stop(s); /* again: nothing more */
    pthread_join(ts, NULL);
    pthread_join(tr, NULL);
    cr_assert_eq(sub.rc, HICP_ECANCELED, "track %d: the submitter ended with %d", track, sub.rc);
    cr_assert_eq(rec.rc, HICP_ECANCELED, "track %d: the receiver ended with %d", track, rec.rc);
    cr_assert_geq(rec.ok, 5, "track %d: only %ld frames received before the stop", track,
                  rec.ok);
    /* a stopped stream takes nothing and gives nothing; it says why */
    cr_assert_eq(hicp_stream_submit(s, f, n, NULL, NULL), HICP_ECANCELED);
    cr_assert(strstr(hicp_context_error(ctx), "hicp_stream_stop") != NULL, "%s",
              hicp_context_error(ctx));
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp_stream_receive(s, &r, 0), HICP_ECANCELED);
    hicp_stream_destroy(s);
    hicp_context_destroy(ctx);
  }
  hicp_stream_stop(NULL);
  free(f);
  hicp_model_destroy(m);
}

/* hicp_stream_create's NULL arguments: its output NULL whenever it has
 * one, and a message on the context when there is one (a NULL output
 * left the last call's message). */
Test(batch, stream_create_null_arguments)
{
  hicp_model *m = make_model();
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  hicp_stream *s = (hicp_stream *)(void *)ctx; /* anything but NULL */
  cr_assert_eq(hicp_stream_create(NULL, m, NULL, NULL, &s), HICP_EINVAL);
  cr_assert_null(s);
  cr_assert_eq(hicp_register(ctx, NULL, NULL, 0, NULL, NULL, NULL), HICP_EINVAL);
  cr_assert_eq(hicp_stream_create(ctx, m, NULL, NULL, NULL), HICP_EINVAL);
  cr_assert_str_eq(hicp_context_error(ctx), "hicp_stream_create: NULL out");
  s = (hicp_stream *)(void *)ctx;
  cr_assert_eq(hicp_stream_create(ctx, NULL, NULL, NULL, &s), HICP_EINVAL);
  cr_assert_null(s);
  cr_assert_str_eq(hicp_context_error(ctx), "hicp_stream_create: NULL model");
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
}

/* A tracked frame that fails hands on what a tracked batch hands on: its
 * own init when it had one, and no warm matches. */
Test(batch, tracked_stream_after_a_failed_frame)
{
  hicp_model *m = make_model();
  size_t n1, n2;
  float *f1 = make_frame(1, &n1), *f2 = make_frame(2, &n2);
  /* frame 0: too big for the memory limit below, so it fails when it runs */
  size_t nbig = 16 * n1;
  float *big = malloc(sizeof(float) * 3 * nbig);
  for (size_t c = 0; c < 16; c++)
    memcpy(big + 3 * n1 * c, f1, sizeof(float) * 3 * n1);
  hicp_context_options co;
  hicp_context_options_init(&co);
  co.threads = 2;
  co.backend = HICP_BACKEND_CPU;
  co.memory_limit = 2u << 20;
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(&co, &ctx), 0);
  double R[9];
  th_rotation(2.0, -1.5, 3.0, R);
  hicp_transform init;
  hicp_transform_identity(&init);
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 3; j++)
      init.m[4 * i + j] = R[3 * i + j];
    init.m[4 * i + 3] = 0.01 * (i + 1);
  }
  hicp_reg_options o = reg_opts();
  hicp_batch_options bo;
  hicp_batch_options_init(&bo);
  bo.track = 1;
  const float *frames[3] = {big, f1, f2};
  size_t counts[3] = {nbig, n1, n2};
  hicp_transform inits[3] = {init, init, init}; /* tracking reads only the first */
  hicp_result batch[3];
  for (int k = 0; k < 3; k++)
    hicp_result_init(&batch[k]);
  cr_assert_eq(hicp_register_batch(ctx, m, frames, counts, 3, &o, &bo, inits, batch), HICP_ELIMIT,
               "%s", hicp_context_error(ctx));
  cr_assert_eq(batch[0].error, HICP_ELIMIT);
  cr_assert_eq(batch[1].error, 0);
  hicp_result solo;
  hicp_result_init(&solo);
  cr_assert_eq(hicp_register(ctx, m, f1, n1, &o, &init, &solo), 0);
  cr_assert(memcmp(&batch[1].transform, &solo.transform, sizeof solo.transform) == 0);

  hicp_stream *s;
  cr_assert_eq(hicp_stream_create(ctx, m, &o, &bo, &s), 0);
  cr_assert_eq(hicp_stream_submit(s, big, nbig, &init, NULL), 0);
  cr_assert_eq(hicp_stream_submit(s, f1, n1, NULL, NULL), 0);
  cr_assert_eq(hicp_stream_submit(s, f2, n2, NULL, NULL), 0);
  /* The context's message is the submitter's: receiving, also a failed
   * frame, leaves it as it is (the receiver may be another thread). */
  const float nan_pt[3] = {NAN, 0.0f, 0.0f};
  cr_assert_eq(hicp_stream_submit(s, nan_pt, 1, NULL, NULL), HICP_ENONFINITE);
  char said[512];
  snprintf(said, sizeof said, "%s", hicp_context_error(ctx));
  cr_assert(said[0] != '\0');
  for (int k = 0; k < 3; k++) {
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp_stream_receive(s, &r, 1), 0);
    cr_assert_eq(r.error, batch[k].error, "frame %d: %s", k, r.note);
    cr_assert(memcmp(&r.transform, &batch[k].transform, sizeof r.transform) == 0,
              "streamed frame %d differs from the tracked batch's", k);
    cr_assert_eq(r.walk.steps, batch[k].walk.steps, "frame %d: other walks", k);
  }
  cr_assert_str_eq(hicp_context_error(ctx), said);
  hicp_stream_destroy(s);
  hicp_context_destroy(ctx);
  free(big);
  free(f1);
  free(f2);
  hicp_model_destroy(m);
}

/* A one-thread CPU context with memory limit `limit`. */
static hicp_context *limited_context(uint64_t limit)
{
  hicp_context_options co;
  hicp_context_options_init(&co);
  co.threads = 1;
  co.backend = HICP_BACKEND_CPU;
  co.memory_limit = limit;
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(&co, &ctx), 0);
  return ctx;
}

/* The least memory limit under which the single call registers frame f
 * (n points; as a cloud with `cloud`), found by halving. */
static uint64_t least_limit(const hicp_model *m, const float *f, size_t n, int cloud,
                            const hicp_reg_options *o)
{
  uint64_t lo = 1024, hi = UINT64_C(256) << 20; /* refused, and run */
  while (hi - lo > 1) {
    const uint64_t mid = lo + (hi - lo) / 2;
    hicp_context *ctx = limited_context(mid);
    hicp_cloud *c = NULL;
    if (cloud)
      cr_assert_eq(hicp_cloud_from_xyz(ctx, f, n, 0, &c), 0, "%s", hicp_context_error(ctx));
    hicp_result r;
    hicp_result_init(&r);
    const int rc = cloud ? hicp_register_cloud(ctx, m, c, o, NULL, &r)
                         : hicp_register(ctx, m, f, n, o, NULL, &r);
    cr_assert(rc == HICP_OK || rc == HICP_ELIMIT, "%s", hicp_context_error(ctx));
    *(rc == HICP_OK ? &hi : &lo) = mid;
    hicp_cloud_destroy(c);
    hicp_context_destroy(ctx);
  }
  return hi;
}

/* Batches and streams hold each frame to the memory limit as the single
 * call does: under the least limit at which hicp_register (or
 * hicp_register_cloud) runs a frame, a batch's or stream's frame runs
 * too, with the same pose (stop 54's review: cloud batches copied the
 * clouds and counted the copy, tracked batches counted their matches,
 * and a stream charged a frame the larger copy an earlier frame, refused
 * for its size, had left). */
Test(batch, frames_held_to_the_limit_as_the_single_call)
{
  hicp_model *m = make_model();
  size_t n;
  float *f = make_frame(3, &n);
  const hicp_reg_options o = reg_opts();
  const float *frames[3] = {f, f, f};
  const size_t counts[3] = {n, n, n};
  /* the poses with room to spare: tracked and not */
  hicp_transform want[2][3];
  hicp_context *ctx = limited_context(0);
  for (int track = 0; track <= 1; track++) {
    hicp_batch_options bo;
    hicp_batch_options_init(&bo);
    bo.track = track;
    hicp_result r[3];
    for (int k = 0; k < 3; k++)
      hicp_result_init(&r[k]);
    cr_assert_eq(hicp_register_batch(ctx, m, frames, counts, 3, &o, &bo, NULL, r), 0);
    for (int k = 0; k < 3; k++)
      want[track][k] = r[k].transform;
  }
  hicp_context_destroy(ctx);

  for (int cloud = 0; cloud <= 1; cloud++) {
    const uint64_t limit = least_limit(m, f, n, cloud, &o);
    ctx = limited_context(limit);
    hicp_cloud *c = NULL;
    cr_assert_eq(hicp_cloud_from_xyz(ctx, f, n, 0, &c), 0);
    const hicp_cloud *clouds[3] = {c, c, c};
    for (int track = 0; track <= 1; track++) {
      hicp_batch_options bo;
      hicp_batch_options_init(&bo);
      bo.track = track;
      hicp_result r[3];
      for (int k = 0; k < 3; k++)
        hicp_result_init(&r[k]);
      const int rc = cloud ? hicp_register_batch_clouds(ctx, m, clouds, 3, &o, &bo, NULL, r)
                           : hicp_register_batch(ctx, m, frames, counts, 3, &o, &bo, NULL, r);
      cr_assert_eq(rc, HICP_OK, "cloud %d, track %d, limit %llu: %s", cloud, track,
                   (unsigned long long)limit, hicp_context_error(ctx));
      for (int k = 0; k < 3; k++)
        cr_assert(memcmp(&r[k].transform, &want[track][k], sizeof r[k].transform) == 0,
                  "cloud %d, track %d: frame %d's pose differs", cloud, track, k);

      /* A stream: first a frame three times as large, which the limit
       * refuses when it runs, then the frame itself. */
      const size_t nbig = 3 * n;
      float *big = malloc(sizeof(float) * 3 * nbig);
      cr_assert_not_null(big);
      for (int k = 0; k < 3; k++)
        memcpy(big + 3 * n * (size_t)k, f, sizeof(float) * 3 * n);
      hicp_stream *s = stream_on(ctx, m, &o, track);
      cr_assert_eq(hicp_stream_submit(s, big, nbig, NULL, NULL), 0, "%s",
                   hicp_context_error(ctx));
      hicp_result rs;
      hicp_result_init(&rs);
      cr_assert_eq(hicp_stream_receive(s, &rs, 1), 0);
      cr_assert_eq(rs.error, HICP_ELIMIT, "the large frame: %s", rs.note);
      for (int k = 0; k < 2; k++) {
        cr_assert_eq(cloud ? hicp_stream_submit_cloud(s, c, NULL, NULL)
                           : hicp_stream_submit(s, f, n, NULL, NULL),
                     0, "%s", hicp_context_error(ctx));
        hicp_result_init(&rs);
        cr_assert_eq(hicp_stream_receive(s, &rs, 1), 0);
        cr_assert_eq(rs.error, 0, "cloud %d, track %d, frame %d after the large one: %s", cloud,
                     track, k, rs.note);
        cr_assert(memcmp(&rs.transform, &want[track][k], sizeof rs.transform) == 0,
                  "cloud %d, track %d: streamed frame %d's pose differs", cloud, track, k);
      }
      hicp_stream_destroy(s);
      free(big);
    }
    hicp_cloud_destroy(c);
    hicp_context_destroy(ctx);
  }
  free(f);
  hicp_model_destroy(m);
}

Test(batch, bad_arguments)
{
  hicp_model *m = make_model();
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  size_t n;
  const float *f[1] = {make_frame(1, &n)};
  hicp_result r;
  memset(&r, 0, sizeof r);
  cr_assert_eq(hicp_register_batch(ctx, m, f, &n, 1, NULL, NULL, NULL, &r), HICP_EINVAL);
  hicp_result_init(&r);
  hicp_batch_options bo;
  hicp_batch_options_init(&bo);
  bo.cpu_share = 2.0;
  cr_assert_eq(hicp_register_batch(ctx, m, f, &n, 1, NULL, &bo, NULL, &r), HICP_EINVAL);
  cr_assert_eq(r.error, HICP_EINVAL, "a rejected batch's result reads as a frame that ran");
  cr_assert(strstr(r.note, "cpu_share") != NULL, "%s", r.note);
  bo.cpu_share = -1.0;
  /* bad registration options, with and without tracking, and a tracked
   * batch whose first pose is not rigid: rejected, every result says so */
  for (int track = 0; track <= 1; track++) {
    hicp_reg_options bad = reg_opts();
    bad.max_iter = -1;
    bo.track = track;
    hicp_result_init(&r);
    cr_assert_eq(hicp_register_batch(ctx, m, f, &n, 1, &bad, &bo, NULL, &r), HICP_EINVAL);
    cr_assert_eq(r.error, HICP_EINVAL, "track %d", track);
    cr_assert(strstr(r.note, "max_iter") != NULL, "%s", r.note);
  }
  hicp_transform skew;
  hicp_transform_identity(&skew);
  skew.m[1] = 0.5;
  const float *f2[2] = {f[0], f[0]};
  size_t n2[2] = {n, n};
  hicp_result r2[2];
  hicp_result_init(&r2[0]);
  hicp_result_init(&r2[1]);
  hicp_transform inits2[2] = {skew, skew};
  hicp_transform_identity(&inits2[1]);
  cr_assert_eq(hicp_register_batch(ctx, m, f2, n2, 2, NULL, &bo, inits2, r2), HICP_EINVAL);
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(r2[k].error, HICP_EINVAL, "result %d", k);
    cr_assert_eq(r2[k].frame, (uint64_t)k);
    cr_assert(strstr(r2[k].note, "inits[0]") != NULL, "%s", r2[k].note);
  }
  bo.track = 0;
  /* clouds: a scan_stride, which clouds do not take, and a NULL cloud */
  hicp_cloud *cl;
  cr_assert_eq(hicp_cloud_from_xyz(ctx, f[0], n, 0, &cl), 0, "%s", hicp_context_error(ctx));
  const hicp_cloud *cls[2] = {cl, NULL};
  hicp_reg_options strided = reg_opts();
  strided.scan_stride = 16;
  hicp_result_init(&r);
  cr_assert_eq(hicp_register_batch_clouds(ctx, m, cls, 1, &strided, NULL, NULL, &r), HICP_EINVAL);
  cr_assert_eq(r.error, HICP_EINVAL);
  hicp_result_init(&r2[0]);
  hicp_result_init(&r2[1]);
  cr_assert_eq(hicp_register_batch_clouds(ctx, m, cls, 2, NULL, NULL, NULL, r2), HICP_EINVAL);
  cr_assert_eq(r2[0].error, 0, "%s", r2[0].note);
  cr_assert_eq(r2[1].error, HICP_EINVAL);
  hicp_cloud_destroy(cl);
  cr_assert_eq(hicp_register_batch(ctx, m, NULL, &n, 1, NULL, NULL, NULL, &r), HICP_EINVAL);
  cr_assert_eq(hicp_register_batch(ctx, m, f, &n, 0, NULL, NULL, NULL, (hicp_result *)NULL), 0);
  /* no frames to track: the inits are not read (one past the end here) */
  hicp_transform one[1];
  hicp_transform_identity(&one[0]);
  bo.cpu_share = -1.0;
  bo.track = 1;
  cr_assert_eq(hicp_register_batch(ctx, m, NULL, NULL, 0, NULL, &bo, one + 1, (hicp_result *)NULL), 0);
  bo.track = 0;
  /* a bad frame fails alone */
  float bad[3] = {NAN, 0, 0};
  const float *two[2] = {bad, f[0]};
  size_t nn[2] = {1, n};
  hicp_result rr[2];
  hicp_result_init(&rr[0]);
  hicp_result_init(&rr[1]);
  cr_assert_eq(hicp_register_batch(ctx, m, two, nn, 2, NULL, NULL, NULL, rr), HICP_ENONFINITE);
  cr_assert_eq(rr[0].error, HICP_ENONFINITE);
  cr_assert_eq(rr[1].error, 0);
  cr_assert_gt(rr[1].iterations, 0);
  /* refused for a NULL argument, results that hold an earlier batch's
   * frames say so, as hicp_register's does (stop 53's review: they read
   * as frames that ran) */
  hicp_cloud *c1;
  cr_assert_eq(hicp_cloud_from_xyz(ctx, f[0], n, 0, &c1), 0);
  const hicp_cloud *cl2[2] = {c1, c1};
  const float *ok2[2] = {f[0], f[0]};
  size_t okn[2] = {n, n};
  for (int k = 0; k < 5; k++) {
    cr_assert_eq(hicp_register_batch(ctx, m, ok2, okn, 2, NULL, NULL, NULL, rr), 0);
    cr_assert(rr[0].error == 0 && rr[1].error == 0 && rr[1].iterations > 0);
    int rc = k == 0   ? hicp_register_batch(ctx, NULL, two, nn, 2, NULL, NULL, NULL, rr)
             : k == 1 ? hicp_register_batch(ctx, m, NULL, nn, 2, NULL, NULL, NULL, rr)
             : k == 2 ? hicp_register_batch(NULL, m, two, nn, 2, NULL, NULL, NULL, rr)
             : k == 3 ? hicp_register_batch_clouds(ctx, NULL, cl2, 2, NULL, NULL, NULL, rr)
                      : hicp_register_batch_clouds(NULL, m, cl2, 2, NULL, NULL, NULL, rr);
    cr_assert_eq(rc, HICP_EINVAL, "case %d", k);
    for (int i = 0; i < 2; i++) {
      cr_assert_eq(rr[i].error, HICP_EINVAL, "case %d, result %d", k, i);
      cr_assert_eq(rr[i].iterations, 0, "case %d, result %d", k, i);
      cr_assert(strstr(rr[i].note, "NULL") != NULL, "case %d: %s", k, rr[i].note);
    }
  }
  hicp_cloud_destroy(c1);
  /* a batch that cannot start says so in every result */
  hicp_context_options co;
  hicp_context_options_init(&co);
  co.backend = HICP_BACKEND_CUDA;
  int dev = 99;
  co.devices = &dev;
  co.ndevices = 1;
  hicp_context *nodev;
  cr_assert_eq(hicp_context_create(&co, &nodev), 0);
  const float *twice[2] = {f[0], f[0]};
  size_t nn2[2] = {n, n};
  rr[0].error = rr[1].error = 0;
  cr_assert_eq(hicp_register_batch(nodev, m, twice, nn2, 2, NULL, NULL, NULL, rr), HICP_ENODEVICE);
  for (int k = 0; k < 2; k++) {
    cr_assert_eq(rr[k].error, HICP_ENODEVICE, "result %d", k);
    cr_assert_eq(rr[k].frame, (uint64_t)k);
    cr_assert(rr[k].note[0] != '\0');
  }
  hicp_context_destroy(nodev);
  free((void *)f[0]);
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
}
