/* batch.c: many frames against one model: hicp_register_batch.
 *
 * Independent frames run side by side: every worker of the context's crew
 * (crew.c: one per CPU thread, up to HICP_GPU_STREAMS per listed CUDA
 * device) has its own context and takes the next frame from a shared
 * counter, so fast workers take more frames and frames of different sizes
 * never wait for each other.  Tracking frames run one after another (each
 * starts from the previous pose, and from the previous matches when the
 * sensor grid is the same), each frame's iterations spread over all the
 * workers by the hybrid loop (icp.c).  Every result is the bits
 * hicp_register() would give for that frame alone.  Streams, which take
 * their frames one at a time, are in stream.c. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "crew.h"
#include "cloud.h"
#include "context.h"
#include "fpenv.h"
#include "model.h"
#include "scheduler.h"
#include "topology.h"

void hicp_batch_options_init_sized(hicp_batch_options *opts, size_t size)
{
  hicp_batch_options d;
  memset(&d, 0, sizeof d);
  d.track = 0;
  d.reuse_matches = 1;
  d.cpu_share = -1.0;
  hicp__init_sized(opts, size, &d, sizeof d);
}

/* ------------------------------------------------------------------------ */
/* The crew a context keeps for its batches */

/* Whether a kept crew is the one planned: the same workers in the same
 * places. */
static int crew_same(const hicp__crew *a, const hicp__crew *b)
{
  if (a->n != b->n || a->ngpu != b->ngpu || a->model != b->model ||
      strcmp(a->note, b->note) != 0)
    return 0;
  for (int i = 0; i < a->n; i++)
    if (a->m[i].gpu != b->m[i].gpu || a->m[i].dev != b->m[i].dev ||
        a->m[i].threads != b->m[i].threads || a->m[i].core != b->m[i].core)
      return 0;
  return 1;
}

atomic_uint hicp__batch_crews_made;

void hicp__batch_crew_free(hicp_context *ctx)
{
  if (ctx->batch_crew != NULL) {
    hicp__crew_free(ctx->batch_crew);
    free(ctx->batch_crew);
    ctx->batch_crew = NULL;
  }
}

/* A batch's crew: the one the context kept from its last batch when it is
 * the crew this batch plans (the same workers; with devices, for the same
 * model), else a new one, kept in its place.  Making a crew costs its
 * contexts, each device worker's stream, buffers and copy of the model,
 * and each CPU worker's scratch: on an H200, 8 CUDA frames took 20.9 ms a
 * call with a crew made each time and 5.0 ms kept (stop 50).  A crew whose
 * device failed a frame is made afresh at the next batch. */
static int batch_crew(hicp_context *ctx, const hicp_model *m, size_t frames, hicp__crew **out)
{
  hicp__crew want;
  int rc = hicp__crew_plan(ctx, m, frames, &want);
  if (rc != HICP_OK)
    return rc;
  /* Device workers are sized for one copy of the model each (a quarter of
   * the device for all of them, device_streams), but each worker's context
   * would cache up to four: a crew with devices is kept for its model
   * only.  CPU workers hold no copy. */
  want.model = want.ngpu > 0 ? m->uid : 0;
  hicp__crew *k = ctx->batch_crew;
  if (k != NULL && crew_same(k, &want)) {
    for (int i = 0; i < k->n; i++) {
      /* this call's requests, as a new worker's (hicp__child_context) */
      hicp__cancel_begin(k->m[i].ctx);
      hicp__cancel_begin_child(k->m[i].ctx, ctx->cancel_seen);
    }
    *out = k;
    return HICP_OK;
  }
  hicp__batch_crew_free(ctx);
  k = malloc(sizeof *k);
  if (k == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for the batch's workers");
  *k = want;
  rc = hicp__crew_build(ctx, k);
  if (rc != HICP_OK) {
    free(k);
    return rc;
  }
  ctx->batch_crew = k;
  atomic_fetch_add(&hicp__batch_crews_made, 1);
  *out = k;
  return HICP_OK;
}

/* ------------------------------------------------------------------------ */
/* Batches */

typedef struct batch_job {
  hicp_context *ctx;
  hicp__crew_member *cm;
  int slot;
  const hicp_model *m;
  const float *const *frames;
  const size_t *counts;
  const double (*origins)[3]; /* NULL: every frame's origin is zero */
  /* the frames are clouds' points (hicp_register_batch_clouds), packed and
   * checked when each cloud was made: registered where they are, as
   * hicp_register_cloud() does, with no copy made or counted */
  int in_place;
  size_t nframes, stride;
  const hicp__plan *plan;
  const hicp_transform *inits;
  hicp_result *results;
  size_t rstride; /* bytes from one result to the next */
  atomic_size_t *next;
  struct batch_pace *pace;
} batch_job;

/* What the workers of a batch have done so far, for the end game of the
 * CPU workers in a crew with devices: a CPU worker takes no new frame once
 * the devices would finish all the frames left before it finished one, so
 * that the batch does not wait for a slow CPU frame at its end. */
typedef struct batch_pace {
  pthread_mutex_t lock;
  pthread_mutex_t start; /* held by a CPU worker starting its OpenMP team */
  pthread_cond_t created; /* signalled once every worker thread is made */
  int all_created;
  int all_fit; /* the workers' teams, checked together, fit at once */
  double t0;
  int devices;       /* device workers in the hicp__crew */
  size_t gpu_frames; /* frames the device workers finished */
  size_t cpu_frames; /* frames the CPU workers finished, and their time */
  double cpu_ms;
} batch_pace;

static int cpu_should_stop(const batch_job *j)
{
  batch_pace *p = j->pace;
  if (p->devices == 0 || j->cm->gpu)
    return 0;
  pthread_mutex_lock(&p->lock);
  int stop = 0;
  if (p->gpu_frames > 0 && p->cpu_frames > 0) {
    size_t done = atomic_load(j->next);
    double left = done < j->nframes ? (double)(j->nframes - done) : 0.0;
    double gpu_per_ms = (double)p->gpu_frames / (hicp__now_ms() - p->t0);
    stop = left < gpu_per_ms * (p->cpu_ms / (double)p->cpu_frames);
  }
  pthread_mutex_unlock(&p->lock);
  return stop;
}

static void pace_done(const batch_job *j, double ms)
{
  batch_pace *p = j->pace;
  pthread_mutex_lock(&p->lock);
  if (j->cm->gpu) {
    p->gpu_frames++;
  } else {
    p->cpu_frames++;
    p->cpu_ms += ms;
  }
  pthread_mutex_unlock(&p->lock);
}

/* A batch's results are an array of the caller's hicp_result, whose size
 * is what its header says: the call's macro passes it (sizeof *(results)),
 * and a program built against an older or newer header than this
 * library's steps through it by that size, not by this library's sizeof.
 * (Until stop 65 the first result's struct_size gave it: an unprepared
 * first result holding 8192 sent the checks 8 KiB past a 2 KiB array, and
 * where the bytes there happened to match, frames were written over the
 * caller's other data.)  A size too small to hold a frame's index, or not
 * a whole number of hicp_result's alignment, is no array of results. */
#define RESULT_MIN (offsetof(hicp_result, frame) + sizeof(uint64_t))

static int result_size_ok(size_t rsize)
{
  return rsize >= RESULT_MIN && rsize % _Alignof(hicp_result) == 0;
}

static hicp_result *result_at(hicp_result *results, size_t stride, size_t i)
{
  return (hicp_result *)(void *)((char *)results + i * stride);
}


/* Frame i's origin: origins[i], or zero without origins. */
static const double *frame_origin(const double (*origins)[3], size_t i)
{
  static const double zero[3] = {0.0, 0.0, 0.0};
  return origins != NULL ? origins[i] : zero;
}

static void *batch_worker(void *arg)
{
  batch_job *j = arg;
  if (j->slot > 0) /* the caller's own thread is left where it is */
    hicp__crew_bind(j->cm);
  /* The system must give the CPU workers' OpenMP teams together.  Checked
   * one by one as their frames began, two checks passed that together the
   * system could not give, and libgomp, which cannot report a refused
   * thread, exited the process (stop 65's review: 4 frames on 8 threads at
   * a limit of 8 processes).  So the calling thread checks them all at
   * once, after every worker thread is made; where they fit, the teams
   * start with the first frames, as before.  Where they do not, each
   * worker starts its team before its first frame, one at a time, each
   * check made while the teams before it are up and no other is under
   * way, and a worker refused takes no frame, but the calling thread's,
   * whose frames fail with HICP_ENOMEM where its check fails again. */
  if (!j->cm->gpu) {
    pthread_mutex_lock(&j->pace->start);
    while (!j->pace->all_created)
      pthread_cond_wait(&j->pace->created, &j->pace->start);
    int started = 1;
    if (j->pace->all_fit)
      hicp__team_assume_ready(j->cm->ctx);
    else
      started = hicp_context_start_threads(j->cm->ctx) >= 0;
    pthread_mutex_unlock(&j->pace->start);
    if (!started && j->slot > 0)
      return NULL;
  }
  for (;;) {
    if (cpu_should_stop(j))
      break;
    size_t i = atomic_fetch_add(j->next, 1);
    if (i >= j->nframes)
      break;
    const double t_frame = hicp__now_ms();
    hicp_result *r = result_at(j->results, j->rstride, i);
    if (hicp__canceled(j->ctx)) {
      hicp__result_failed(r, i, HICP_ECANCELED, "canceled before it started");
      continue;
    }
    hicp__clear_error(j->cm->ctx);
    const float *p0 = j->frames[i];
    int rc;
    if (j->in_place) { /* a NULL cloud fails here, on its NULL points */
      rc = hicp__check_count(j->cm->ctx, "scan", p0, j->counts[i]);
    } else { /* the frame with this worker's copy of it, before either */
      float *copy = NULL;
      rc = hicp__check_frame_budget(j->cm->ctx, j->plan, j->counts[i],
                                    hicp__kept_copy_bytes(j->counts[i]));
      if (rc == HICP_OK)
        rc = hicp__copy_points_kept(j->cm->ctx, "scan", j->frames[i], j->counts[i], j->stride,
                                    &copy);
      p0 = copy;
    }
    if (rc == HICP_OK)
      rc = hicp__crew_run_frame(j->ctx, j->cm, j->m, p0, j->counts[i],
                                frame_origin(j->origins, i), j->plan,
                                j->inits != NULL ? &j->inits[i] : NULL, r, t_frame);
    hicp__scratch_done(j->cm->ctx, HICP_SCRATCH_SCAN);
    if (rc != HICP_OK)
      hicp__result_failed(r, i, rc, hicp_context_error(j->cm->ctx));
    else
      r->frame = i;
    pace_done(j, hicp__now_ms() - t_frame);
  }
  return NULL;
}

static int batch_independent(hicp_context *ctx, const hicp_model *m, const float *const *frames,
                             const size_t *counts, const double (*origins)[3], size_t nframes,
                             size_t stride, const hicp__plan *plan, const hicp_transform *inits,
                             hicp_result *results, size_t rstride)
{
  if (nframes == 0)
    return HICP_OK; /* no workers to make, and the kept ones stay */
  hicp__crew *c = NULL;
  int rc = batch_crew(ctx, m, nframes, &c);
  if (rc != HICP_OK)
    return rc;
  atomic_size_t next;
  atomic_init(&next, 0);
  batch_pace pace;
  memset(&pace, 0, sizeof pace);
  pthread_mutex_init(&pace.lock, NULL);
  pthread_mutex_init(&pace.start, NULL);
  pthread_cond_init(&pace.created, NULL);
  pace.t0 = hicp__now_ms();
  pace.devices = c->ngpu;
  batch_job jobs[64];
  pthread_t tid[64];
  int started[64] = {0};
  for (int i = 0; i < c->n; i++) {
    batch_job j = {ctx,     &c->m[i], i,     m,       frames,  counts, origins,
                   origins != NULL, nframes, stride, plan, inits, results, rstride,
                   &next,   &pace};
    jobs[i] = j;
  }
  for (int i = 1; i < c->n; i++)
    started[i] = pthread_create(&tid[i], NULL, batch_worker, &jobs[i]) == 0;
  int extra = 0; /* the teams' threads beyond the workers' own */
  for (int i = 0; i < c->n; i++)
    if (!c->m[i].gpu && (i == 0 || started[i]))
      extra += i == 0 ? hicp__team_missing(c->m[i].ctx) : c->m[i].ctx->threads - 1;
  pthread_mutex_lock(&pace.start);
  pace.all_fit = hicp__threads_check(extra) == 0;
  pace.all_created = 1;
  pthread_cond_broadcast(&pace.created);
  pthread_mutex_unlock(&pace.start);
  batch_worker(&jobs[0]);
  for (int i = 1; i < c->n; i++)
    if (started[i])
      pthread_join(tid[i], NULL);
  hicp__threads_ended(); /* the workers and their OpenMP pools */
  pthread_mutex_destroy(&pace.lock);
  pthread_mutex_destroy(&pace.start);
  pthread_cond_destroy(&pace.created);
  int spoiled = 0;
  for (int i = 0; i < c->n; i++)
    spoiled |= c->m[i].spoiled;
  if (spoiled)
    hicp__batch_crew_free(ctx);
  return HICP_OK;
}


/* A batch that cannot start (a bad argument, no memory, no workers): every
 * prepared result says so, as a failed frame's would, so that no result of
 * the call reads as a frame that ran.  Returns rc. */
static int fail_all_with(hicp_result *results, size_t nframes, size_t rsize, int rc,
                         const char *msg)
{
  for (size_t i = 0; results != NULL && result_size_ok(rsize) && i < nframes; i++) {
    hicp_result *r = result_at(results, rsize, i);
    if (r->struct_size == rsize)
      hicp__result_failed(r, i, rc, msg);
  }
  return rc;
}

static int fail_all(hicp_context *ctx, hicp_result *results, size_t nframes, size_t rsize, int rc)
{
  return fail_all_with(results, nframes, rsize, rc, hicp_context_error(ctx));
}

/* A batch refused for a NULL argument, `msg` saying which: in every
 * prepared result too (a NULL model or frames left the results of an
 * earlier batch to read as frames that ran: stop 53's review), and on the
 * context when there is one. */
static int refuse(hicp_context *ctx, hicp_result *results, size_t nframes, size_t rsize,
                  const char *msg)
{
  if (ctx == NULL)
    return fail_all_with(results, nframes, rsize, HICP_EINVAL, msg);
  return fail_all(ctx, results, nframes, rsize, hicp__fail(ctx, HICP_EINVAL, "%s", msg));
}

/* hicp_register_batch, and with origins (one per frame, or NULL) that of
 * clouds. */
static int batch_run_body(hicp_context *ctx, const hicp_model *m, const float *const *frames,
                          const size_t *counts, const double (*origins)[3], size_t nframes,
                          const hicp_reg_options *opts, const hicp_batch_options *bopts,
                          const hicp_transform *inits, hicp_result *results, size_t rstride)
{
  if (nframes > 0 && !result_size_ok(rstride))
    return hicp__fail(ctx, HICP_EINVAL,
                      "hicp_register_batch: results of %zu bytes apart, where a hicp_result "
                      "takes at least %zu (call the macro, which passes sizeof *(results))",
                      rstride, (size_t)RESULT_MIN);
  for (size_t i = 0; i < nframes; i++)
    if (result_at(results, rstride, i)->struct_size != rstride)
      return fail_all(ctx, results, nframes, rstride,
                      hicp__fail(ctx, HICP_EINVAL,
                                 "hicp_register_batch: prepare every result with "
                                 "hicp_result_init() (result %zu is not)", i));
  hicp_batch_options bo;
  int rc = hicp__batch_options(ctx, bopts, &bo);
  if (rc != HICP_OK)
    return fail_all(ctx, results, nframes, rstride, rc);
  hicp__plan plan;
  size_t stride;
  rc = hicp__make_plan(ctx, m, opts, &plan, &stride);
  if (rc != HICP_OK)
    return fail_all(ctx, results, nframes, rstride, rc);
  if (origins != NULL && stride != 3 * sizeof(float))
    return fail_all(ctx, results, nframes, rstride,
                    hicp__fail(ctx, HICP_EINVAL, "scan_stride does not apply to a cloud"));
  /* Tracking starts every frame from inits[0] until one succeeds: a bad
   * one would fail them all, each with the same message. */
  if (bo.track && nframes > 0 && inits != NULL && hicp_transform_check(&inits[0]) != HICP_OK)
    return fail_all(ctx, results, nframes, rstride,
                    hicp__fail(ctx, HICP_EINVAL,
                               "hicp_register_batch: inits[0] is not rigid (R must be a "
                               "rotation, last row 0 0 0 1)"));

  if (!bo.track) {
    rc = batch_independent(ctx, m, frames, counts, origins, nframes, stride, &plan, inits,
                           results, rstride);
  } else {
    hicp__worker ws[HICP_TEAM_MAX];
    hicp__team team;
    /* Without its team (a device worker that cannot start), "hybrid"
     * frames run as on "auto", as a tracked stream's do. */
    if (hicp__track_team(ctx, &bo, ws, &team) != HICP_OK) {
      team.nw = 0;
      hicp__clear_error(ctx);
    }
    /* the last frame's matches and the next's, swapped, each grown only
     * for a frame larger than it has held */
    uint32_t *prev = NULL, *cur = NULL;
    size_t prev_n = 0, prev_cap = 0, cur_cap = 0;
    hicp_transform pose;
    hicp_transform_identity(&pose);
    if (inits != NULL && nframes > 0)
      pose = inits[0];
    for (size_t i = 0; i < nframes && rc == HICP_OK; i++) {
      hicp_result *r = result_at(results, rstride, i);
      if (hicp__canceled(ctx)) {
        hicp__result_failed(r, i, HICP_ECANCELED, "canceled before it started");
        continue;
      }
      const double t_start = hicp__now_ms(); /* the frame's start: its copy counts */
      /* The frame is held to the limit as the single call is (hicp_register:
       * the registration and its copy; hicp_register_cloud: the
       * registration of the cloud's points where they are), before
       * anything is allocated.  The two frames' matches only speed the
       * searches: where the limit leaves no room for them the frame runs
       * without, from the start table, to the same pose. */
      const int in_place = origins != NULL;
      const uint64_t copy = in_place ? 0 : hicp__kept_copy_bytes(counts[i]);
      const float *p0 = frames[i];
      int frc = in_place ? hicp__check_count(ctx, "scan", p0, counts[i])
                         : hicp__check_frame_budget(ctx, &plan, counts[i], copy);
      int matches = frc == HICP_OK &&
                    hicp__frame_fits(ctx, &plan, counts[i],
                                     copy + hicp__match_bytes(counts[i], cur_cap, prev_cap));
      if (frc == HICP_OK && !matches)
        hicp__drop_matches(&prev, &cur, &prev_cap, &cur_cap, &prev_n);
      if (frc == HICP_OK && !in_place) {
        float *kept = NULL;
        frc = hicp__copy_points_kept(ctx, "scan", frames[i], counts[i], stride, &kept);
        p0 = kept;
      }
      if (frc == HICP_OK && matches &&
          hicp__match_buffer(&cur, &cur_cap, counts[i], prev_cap) != 0) {
        /* no memory for them: the frame runs without, as where the limit
         * leaves no room (it failed with HICP_ENOMEM) */
        hicp__drop_matches(&prev, &cur, &prev_cap, &cur_cap, &prev_n);
        matches = 0;
      }
      if (frc == HICP_OK) {
        const uint32_t *warm =
            matches && bo.reuse_matches && prev != NULL && prev_n == counts[i] ? prev : NULL;
        frc = hicp__register_frame(ctx, m, p0, counts[i], frame_origin(origins, i), &plan, &pose,
                                   team.nw > 0 ? &team : NULL, warm, matches ? cur : NULL, r,
                                   t_start);
      }
      hicp__scratch_done(ctx, HICP_SCRATCH_SCAN);
      if (frc != HICP_OK) {
        hicp__result_failed(r, i, frc, hicp_context_error(ctx));
        prev_n = 0; /* the next frame starts afresh from the last good pose */
      } else if (!matches) {
        r->frame = i;
        pose = r->transform;
        prev_n = 0; /* no matches for the next frame to start from */
      } else {
        r->frame = i;
        pose = r->transform;
        uint32_t *t = prev;
        const size_t t_cap = prev_cap;
        prev = cur;
        prev_cap = cur_cap;
        cur = t;
        cur_cap = t_cap;
        prev_n = counts[i];
      }
    }
    free(prev);
    free(cur);
    for (int i = 0; i < team.nw; i++)
      team.w[i]->ops->destroy(team.w[i]);
  }
  if (rc != HICP_OK) /* no workers, no device: no frame ran */
    return fail_all(ctx, results, nframes, rstride, rc);
  for (size_t i = 0; i < nframes; i++) {
    const hicp_result *r = result_at(results, rstride, i);
    if (r->error != HICP_OK)
      return hicp__fail(ctx, r->error, "frame %zu: %s", i, r->note);
  }
  return HICP_OK;
}

static int batch_run(hicp_context *ctx, const hicp_model *m, const float *const *frames,
                     const size_t *counts, const double (*origins)[3], size_t nframes,
                     const hicp_reg_options *opts, const hicp_batch_options *bopts,
                     const hicp_transform *inits, hicp_result *results, size_t rsize)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc =
      batch_run_body(ctx, m, frames, counts, origins, nframes, opts, bopts, inits, results, rsize);
  hicp__fpenv_leave(&fe);
  return rc;
}

int hicp_register_batch_sized(hicp_context *ctx, const hicp_model *m, const float *const *frames,
                              const size_t *counts, size_t nframes, const hicp_reg_options *opts,
                              const hicp_batch_options *bopts, const hicp_transform *inits,
                              hicp_result *results, size_t rsize)
{
  if (ctx == NULL)
    return refuse(ctx, results, nframes, rsize, "hicp_register_batch: NULL context");
  hicp__clear_error(ctx);
  hicp__cancel_begin(ctx);
  if (m == NULL || (nframes > 0 && (frames == NULL || counts == NULL || results == NULL)))
    return refuse(ctx, results, nframes, rsize, "hicp_register_batch: NULL argument");
  return batch_run(ctx, m, frames, counts, NULL, nframes, opts, bopts, inits, results, rsize);
}

int hicp_register_batch_clouds_sized(hicp_context *ctx, const hicp_model *m,
                                     const hicp_cloud *const *clouds, size_t nframes,
                                     const hicp_reg_options *opts,
                                     const hicp_batch_options *bopts, const hicp_transform *inits,
                                     hicp_result *results, size_t rsize)
{
  if (ctx == NULL)
    return refuse(ctx, results, nframes, rsize, "hicp_register_batch_clouds: NULL context");
  hicp__clear_error(ctx);
  hicp__cancel_begin(ctx);
  if (m == NULL || (nframes > 0 && (clouds == NULL || results == NULL)))
    return refuse(ctx, results, nframes, rsize, "hicp_register_batch_clouds: NULL argument");
  if (nframes == 0)
    return batch_run(ctx, m, NULL, NULL, NULL, 0, opts, bopts, inits, results, rsize);
  const float **frames = malloc(sizeof *frames * nframes);
  size_t *counts = malloc(sizeof *counts * nframes);
  double(*origins)[3] = malloc(sizeof *origins * nframes);
  int rc;
  if (frames == NULL || counts == NULL || origins == NULL) {
    rc = fail_all(ctx, results, nframes, rsize, hicp__fail(ctx, HICP_ENOMEM, "out of memory for the batch's %zu frames", nframes));
  } else {
    /* A NULL cloud is a NULL frame of a point: that frame alone fails, on
     * its NULL points (HICP_EINVAL), as in hicp_register_batch. */
    static const double zero[3] = {0.0, 0.0, 0.0};
    for (size_t i = 0; i < nframes; i++) {
      const hicp_cloud *c = clouds[i];
      frames[i] = c != NULL ? c->xyz : NULL;
      counts[i] = c != NULL ? c->n : 1;
      memcpy(origins[i], c != NULL ? c->origin : zero, sizeof origins[i]);
    }
    rc = batch_run(ctx, m, frames, counts, (const double(*)[3])origins, nframes, opts, bopts,
                   inits, results, rsize);
  }
  free(frames);
  free(counts);
  free(origins);
  return rc;
}

