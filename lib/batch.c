/* batch.c: many frames against one model: hicp_register_batch and streams.
 *
 * Independent frames run side by side: every worker (one per CPU thread, up
 * to HICP_GPU_STREAMS per listed CUDA device) has its own context and takes
 * the next frame from a shared counter, so fast workers take more frames and
 * frames of different sizes never wait for each other.  Tracking frames run
 * one after another (each starts from the previous pose, and from the
 * previous matches when the sensor grid is the same), each frame's
 * iterations spread over all the workers by the hybrid loop (icp.c).
 * Every result is the bits hicp_register() would give for that frame
 * alone. */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
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

static int batch_options(hicp_context *ctx, const hicp_batch_options *user,
                         hicp_batch_options *o)
{
  hicp_batch_options_init(o);
  if (user != NULL && hicp__copy_sized(o, sizeof *o, user,
                                       offsetof(hicp_batch_options, flags) + sizeof(unsigned),
                                       "hicp_batch_options", ctx) != 0)
    return HICP_EINVAL;
  if ((o->track != 0 && o->track != 1) || (o->reuse_matches != 0 && o->reuse_matches != 1) ||
      !(o->cpu_share == -1.0 || (o->cpu_share >= 0.0 && o->cpu_share <= 1.0)) || o->flags != 0)
    return hicp__fail(ctx, HICP_EINVAL,
                      "hicp_batch_options: track and reuse_matches are 0 or 1, cpu_share -1 or "
                      "in [0, 1], flags 0");
  return HICP_OK;
}

/* ------------------------------------------------------------------------ */
/* The workers of a batch or a stream */

/* Device workers per logical device (see crew_make). */
#define HICP_GPU_STREAMS 8

typedef struct crew_member {
  hicp_context *ctx; /* own context: own errors, own device state */
  int gpu;           /* 1: runs frames on its device */
  int dev;           /* a device worker's device */
  int threads;       /* a CPU worker's threads */
  int core;          /* a CPU worker's core (bind_member); -1: unbound */
  const char *note;  /* the crew's note for each result: "" or NULL for none */
  int spoiled;       /* its device failed a frame: not to be kept */
} crew_member;

/* At most this many device workers in a crew (of its 64 members). */
#define CREW_GPU_MAX 32

typedef struct hicp__crew {
  crew_member m[64];
  int n;
  int ngpu;
  uint64_t model; /* with device workers: the uid of the model they hold */
  char note[120]; /* "hybrid" or "auto" without a listed device */
} crew;

/* A child context: the parent's settings, its own threads and devices
 * (ndevices 0: every device), cancelled with its parent. */
static int child_context(hicp_context *parent, int threads, hicp_backend backend,
                         const int *devices, int ndevices, hicp_context **out)
{
  hicp_context_options o;
  hicp_context_options_init(&o);
  o.threads = threads;
  o.backend = backend;
  o.memory_limit = parent->memory_limit;
  o.flags = parent->fixed_threads ? HICP_CONTEXT_FIXED_THREADS : 0u;
  o.devices = devices;
  o.ndevices = ndevices;
  int rc = hicp_context_create(&o, out);
  if (rc != HICP_OK)
    return hicp__fail(parent, rc, "cannot create a worker context: %s", hicp_strerror(rc));
  (*out)->parent = parent;
  hicp__cancel_begin_child(*out, parent->cancel_seen); /* a batch's: the call's requests */
  return HICP_OK;
}

static void crew_free(crew *c)
{
  for (int i = 0; i < c->n; i++)
    hicp_context_destroy(c->m[i].ctx);
  c->n = 0;
}

/* Device workers for model m on device dev: HICP_GPU_STREAMS, fewer when
 * that many copies of the model (each worker's context uploads its own)
 * would take more than a quarter of the device's memory. */
static int device_streams(const hicp_model *m, int dev)
{
  /* A device's memory, asked once: the properties' query takes the
   * driver's time, and every batch plans its crew (batch_crew) */
  static _Atomic uint64_t memory[CREW_GPU_MAX];
  uint64_t bytes = dev < CREW_GPU_MAX ? atomic_load(&memory[dev]) : 0;
  if (bytes == 0) {
    hicp__gpu_info gi;
    if (hicp__gpu_describe(dev, &gi) != HICP_OK)
      return 1;
    bytes = gi.memory_bytes;
    if (dev < CREW_GPU_MAX)
      atomic_store(&memory[dev], bytes);
  }
  hicp_model_info mi;
  hicp__model_bytes(m, &mi);
  const uint64_t fit = bytes / 4 / mi.bytes_total;
  return fit < 1 ? 1 : fit > HICP_GPU_STREAMS ? HICP_GPU_STREAMS : (int)fit;
}

/* The workers the context's backend calls for: its devices ("cuda", or
 * "auto" when a device is usable), its CPU threads ("cpu", or "auto"
 * without a device), or both ("hybrid"), for at most `frames` frames
 * (SIZE_MAX: a stream's, not known).  A worker takes one frame at a time,
 * so a batch of fewer frames than workers has no use for the others: a
 * device worker's context would set up its own stream, buffers and copy
 * of the model for nothing, and a CPU worker would sit idle, or, beside
 * devices, hold the batch up with a frame on one thread (8 hybrid frames
 * on an H200: 67 ms, against 19 on the devices alone, stop 50).  CPU
 * workers without devices share the threads out instead, among fewer
 * frames than threads, or among the 64 workers a crew has room for: the
 * bits are the same for any thread count. */
static int crew_plan(hicp_context *ctx, const hicp_model *m, size_t frames, crew *c)
{
  memset(c, 0, sizeof *c);
  if (frames == 0)
    frames = 1;
  char why[256];
  int ngpu = ctx->backend == HICP_BACKEND_CPU ? 0 : hicp__gpu_count(why, sizeof why);
  if (ctx->backend == HICP_BACKEND_CUDA && ngpu == 0)
    return hicp__fail(ctx, HICP_ENODEVICE, "backend cuda: %s", why);
  int use_gpu = ngpu > 0;
  int use_cpu = ctx->backend == HICP_BACKEND_CPU || ctx->backend == HICP_BACKEND_HYBRID || !use_gpu;
  int nlog = 0;
  int streams[CREW_GPU_MAX]; /* each logical device's workers, asked of it once */
  if (use_gpu) {
    nlog = ctx->ndevices > 0 ? ctx->ndevices : ngpu;
    int usable = 0;
    for (int i = 0; i < nlog; i++) {
      int dev = ctx->ndevices > 0 ? ctx->devices[i] : i;
      if (dev >= ngpu && ctx->backend == HICP_BACKEND_CUDA)
        return hicp__fail(ctx, HICP_ENODEVICE, "no CUDA device %d (this host has %d)", dev, ngpu);
      /* "hybrid" and "auto" carry on without it, as a registration does
       * (a device gone from the bus), and say so in every result */
      if (dev >= ngpu && c->note[0] == '\0')
        snprintf(c->note, sizeof c->note, "no CUDA device %d (this host has %d); ran without it",
                 dev, ngpu);
      if (i < CREW_GPU_MAX) {
        streams[i] = dev < ngpu ? device_streams(m, dev) : 0;
        usable += streams[i] > 0;
      }
    }
    if (usable == 0) {
      use_gpu = 0;
      use_cpu = 1;
      nlog = 0;
    }
  }
  if (use_gpu) {
    /* Up to HICP_GPU_STREAMS workers per logical device, each with its
     * own stream: one frame's registration is mostly waits (barriers, the
     * solve on one thread), so several frames share a device at once */
    for (int k = 0; k < HICP_GPU_STREAMS; k++) {
      for (int i = 0; i < nlog && i < CREW_GPU_MAX && c->n < CREW_GPU_MAX && (size_t)c->n < frames;
           i++) {
        int dev = ctx->ndevices > 0 ? ctx->devices[i] : i;
        if (k >= streams[i])
          continue; /* enough workers for its memory, or no such device */
        c->m[c->n].dev = dev;
        c->m[c->n].threads = 1;
        c->m[c->n++].gpu = 1;
        c->ngpu++;
      }
    }
  }
  if (use_cpu) {
    /* Device workers sleep while their device works, but prepare each
     * frame on the host (about 0.5 ms of a core for 30k points): two cores
     * per device are left for them. */
    int ncpu = ctx->threads - 2 * nlog;
    if (ncpu < 1)
      ncpu = 1;
    int workers = ncpu;
    if (c->ngpu > 0 && (size_t)c->ngpu >= frames)
      workers = ncpu = 0; /* the devices take every frame at once */
    else if (c->ngpu > 0 && frames - (size_t)c->ngpu < (size_t)ncpu)
      workers = ncpu = (int)(frames - (size_t)c->ngpu); /* one thread each */
    else if (c->ngpu == 0 && frames < (size_t)ncpu)
      workers = (int)frames; /* fewer frames than threads: a worker a frame */
    /* Without devices the threads are shared out over the workers (`more`
     * of them with one thread more): fewer frames than threads, or more
     * threads than the crew has room for workers (100 threads for 100
     * frames or more ran 64 workers of one thread: 36 threads stood
     * idle).  Beside devices each CPU worker has one thread, pinned. */
    if (workers > 64 - c->n)
      workers = 64 - c->n;
    if (c->ngpu > 0)
      ncpu = workers;
    const int each = workers > 0 ? ncpu / workers : 0, more = workers > 0 ? ncpu % workers : 0;
    for (int i = 0, first = 0; i < workers; i++) {
      c->m[c->n].threads = each + (i < more);
      /* Beside device workers, the first cores are left to them and each
       * CPU worker of one thread keeps to a core of its own (bind_member).
       * Without devices the system places the workers: it sees every
       * other crew and process, and a fixed core per worker would put the
       * first worker of every stream, batch and process on the same core. */
      c->m[c->n].core = nlog > 0 ? 2 * nlog + first : -1;
      first += c->m[c->n].threads;
      c->m[c->n++].gpu = 0;
    }
  }
  return HICP_OK;
}

/* The planned crew's contexts. */
static int crew_build(hicp_context *ctx, crew *c)
{
  for (int i = 0; i < c->n; i++) {
    crew_member *cm = &c->m[i];
    int rc = cm->gpu ? child_context(ctx, 1, HICP_BACKEND_CUDA, &cm->dev, 1, &cm->ctx)
                     : child_context(ctx, cm->threads, HICP_BACKEND_CPU, NULL, 0, &cm->ctx);
    if (rc != HICP_OK) {
      c->n = i;
      crew_free(c);
      return rc;
    }
    cm->ctx->side_by_side = 1;
    cm->note = c->note;
  }
  return HICP_OK;
}

static int crew_make(hicp_context *ctx, const hicp_model *m, size_t frames, crew *c)
{
  int rc = crew_plan(ctx, m, frames, c);
  return rc != HICP_OK ? rc : crew_build(ctx, c);
}

/* Whether a kept crew is the one planned: the same workers in the same
 * places. */
static int crew_same(const crew *a, const crew *b)
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
    crew_free(ctx->batch_crew);
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
static int batch_crew(hicp_context *ctx, const hicp_model *m, size_t frames, crew **out)
{
  crew want;
  int rc = crew_plan(ctx, m, frames, &want);
  if (rc != HICP_OK)
    return rc;
  /* Device workers are sized for one copy of the model each (a quarter of
   * the device for all of them, device_streams), but each worker's context
   * would cache up to four: a crew with devices is kept for its model
   * only.  CPU workers hold no copy. */
  want.model = want.ngpu > 0 ? m->uid : 0;
  crew *k = ctx->batch_crew;
  if (k != NULL && crew_same(k, &want)) {
    for (int i = 0; i < k->n; i++) {
      /* this call's requests, as a new worker's (child_context) */
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
  rc = crew_build(ctx, k);
  if (rc != HICP_OK) {
    free(k);
    return rc;
  }
  ctx->batch_crew = k;
  atomic_fetch_add(&hicp__batch_crews_made, 1);
  *out = k;
  return HICP_OK;
}

/* Runs one frame on a crew member; a device that fails hands the frame to
 * the CPU (same context, one thread) unless the user asked for "cuda".
 * t_start: the frame's start, for both tries, and before its copy where
 * the worker made one (the single call's budget and time_ms count it). */
static int run_frame(hicp_context *parent, crew_member *cm, const hicp_model *m, const float *p0,
                     size_t n, const double origin[3], const hicp__plan *plan,
                     const hicp_transform *init, hicp_result *r, double t_start)
{
  int rc =
      hicp__register_frame(cm->ctx, m, p0, n, origin, plan, init, NULL, NULL, NULL, r, t_start);
  /* a device that failed, or ran out of memory, is not kept for the next
   * batch (the note is the library's only on success) */
  if (cm->gpu && (rc == HICP_EDEVICE || rc == HICP_ENOMEM ||
                  (rc == HICP_OK && r->struct_size >= offsetof(hicp_result, error) &&
                   strncmp(r->note, "GPU failed", 10) == 0)))
    cm->spoiled = 1;
  if (rc != HICP_OK && cm->gpu && parent->backend != HICP_BACKEND_CUDA &&
      (rc == HICP_EDEVICE || rc == HICP_ENOMEM || rc == HICP_ENODEVICE)) {
    char note[200];
    const char *why = hicp_context_error(cm->ctx);
    snprintf(note, sizeof note, "GPU failed (%.*s); ran on the CPU", hicp__utf8_prec(why, 120), why);
    hicp__worker cpu;
    hicp__team team;
    hicp__cpu_worker_init(&cpu, cm->ctx, 1);
    team.w[0] = &cpu;
    team.nw = 1;
    team.cpu_share = -1.0;
    hicp__clear_error(cm->ctx);
    rc = hicp__register_frame(cm->ctx, m, p0, n, origin, plan, init, &team, NULL, NULL, r,
                              t_start);
    if (rc == HICP_OK && r->struct_size >= offsetof(hicp_result, error))
      snprintf(r->note, sizeof r->note, "%.*s", hicp__utf8_prec(note, 159), note);
  }
  if (rc == HICP_OK && cm->note != NULL && cm->note[0] != '\0' &&
      r->struct_size >= offsetof(hicp_result, error) &&
      r->note[0] == '\0')
    snprintf(r->note, sizeof r->note, "%s", cm->note);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Batches */

typedef struct batch_job {
  hicp_context *ctx;
  crew_member *cm;
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
  int devices;       /* device workers in the crew */
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

/* Pins a worker: device workers near their device, CPU workers to their
 * core if the crew gave them one. */
static void bind_member(const crew_member *cm)
{
  if (cm->gpu)
    hicp__bind_thread_near_gpu(hicp__context_first_device(cm->ctx));
  else if (cm->ctx->threads == 1) /* threads it starts would inherit a core */
    hicp__bind_thread_core(cm->core);
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
    bind_member(j->cm);
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
      rc = run_frame(j->ctx, j->cm, j->m, p0, j->counts[i], frame_origin(j->origins, i), j->plan,
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
  crew *c = NULL;
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

/* The team of a tracking frame: the CPU plus every device worker.  The
 * CPU worker is the first, which a pass runs on the calling thread
 * (run_team_pass in icp.c): its OpenMP team then persists from pass to
 * pass and is the one the thread preflight counted.  Put after the device
 * workers it ran on a new thread each pass, whose team of threads was made
 * again each time, uncounted: where threads were short, libgomp ended the
 * process (stop 64's review).  The device workers only launch and wait. */
static int track_team(hicp_context *ctx, const hicp_batch_options *bo, hicp__worker *ws,
                      hicp__team *team)
{
  team->nw = 0;
  team->cpu_share = bo->cpu_share;
  if (ctx->backend != HICP_BACKEND_HYBRID)
    return HICP_OK; /* cpu, cuda and auto use the context directly */
  hicp__cpu_worker_init(&ws[0], ctx, hicp__team_use(hicp__team_threads(ctx)));
  team->w[0] = &ws[0];
  team->nw = 1;
  char why[256];
  int ngpu = hicp__gpu_count(why, sizeof why);
  int nlog = ctx->ndevices > 0 ? ctx->ndevices : ngpu;
  for (int i = 0; i < nlog && ngpu > 0 && team->nw < HICP_TEAM_MAX; i++) {
    int rc = hicp__gpu_worker_init(&ws[team->nw], ctx, i);
    if (rc != HICP_OK) {
      for (int k = 0; k < team->nw; k++)
        team->w[k]->ops->destroy(team->w[k]);
      team->nw = 0;
      return rc;
    }
    team->w[team->nw] = &ws[team->nw];
    team->nw++;
  }
  return HICP_OK;
}

/* A tracked frame's match buffer (tracked batches and streams), swapped
 * with the last frame's after each frame.  match_cap: the room the buffer
 * holding cur_cap will have for a frame of n points: at least the last
 * buffer's (prev_cap) where that one is of a size kept (HICP_SCRATCH_KEEP),
 * so that the room never shrinks below the largest such frame and neither
 * buffer grows again after it; the buffer as it is where it is enough and
 * not beyond the kept size.  match_bytes: what the two buffers then hold,
 * for the frame's memory check.  match_buffer gives *buf that room; 0, or
 * -1 out of memory. */
static size_t match_cap(size_t n, size_t cur_cap, size_t prev_cap)
{
  const size_t room =
      prev_cap > n && 4u * (uint64_t)prev_cap <= HICP_SCRATCH_KEEP ? prev_cap : n;
  return cur_cap >= room && (cur_cap == room || 4u * (uint64_t)cur_cap <= HICP_SCRATCH_KEEP)
             ? cur_cap
             : room;
}

static uint64_t match_bytes(size_t n, size_t cur_cap, size_t prev_cap)
{
  return 4u * ((uint64_t)match_cap(n, cur_cap, prev_cap) + prev_cap);
}

/* A tracked frame that runs without matches (no room for them under the
 * limit) holds none beside it: the buffers the frames before it kept are
 * freed, so that the frame takes what the single call would (stop 54's
 * review: they stayed, 4 bytes a point of the last frame over the limit),
 * and the next frame starts with none. */
static void drop_matches(uint32_t **prev, uint32_t **cur, size_t *prev_cap, size_t *cur_cap,
                         size_t *prev_n)
{
  free(*prev);
  free(*cur);
  *prev = *cur = NULL;
  *prev_cap = *cur_cap = *prev_n = 0;
}

static int match_buffer(uint32_t **buf, size_t *cap, size_t n, size_t prev_cap)
{
  const size_t want = match_cap(n, *cap, prev_cap);
  if (*buf != NULL && want == *cap)
    return 0;
  free(*buf);
  *buf = malloc(sizeof **buf * want);
  *cap = *buf != NULL ? want : 0;
  return *buf != NULL ? 0 : -1;
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
  int rc = batch_options(ctx, bopts, &bo);
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
    if (track_team(ctx, &bo, ws, &team) != HICP_OK) {
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
      int matches =
          frc == HICP_OK &&
          hicp__frame_fits(ctx, &plan, counts[i], copy + match_bytes(counts[i], cur_cap, prev_cap));
      if (frc == HICP_OK && !matches)
        drop_matches(&prev, &cur, &prev_cap, &cur_cap, &prev_n);
      if (frc == HICP_OK && !in_place) {
        float *kept = NULL;
        frc = hicp__copy_points_kept(ctx, "scan", frames[i], counts[i], stride, &kept);
        p0 = kept;
      }
      if (frc == HICP_OK && matches && match_buffer(&cur, &cur_cap, counts[i], prev_cap) != 0) {
        /* no memory for them: the frame runs without, as where the limit
         * leaves no room (it failed with HICP_ENOMEM) */
        drop_matches(&prev, &cur, &prev_cap, &cur_cap, &prev_n);
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

/* ------------------------------------------------------------------------ */
/* Streams */

#define STREAM_SPARES 4

typedef struct entry {
  float *p0;        /* the frame's copy, until it has run */
  size_t cap;       /* points p0 has room for */
  size_t n;
  double origin[3]; /* p0 is relative to it (hicp_stream_submit_cloud) */
  int cloud;        /* submitted as a cloud (hicp_stream_submit_cloud) */
  hicp_transform init;
  int has_init;
  unsigned cancel_seen; /* the context's cancel requests before it was submitted */
  int claimed, done;
  hicp_result result;
} entry;

struct hicp_stream {
  hicp_context *ctx;
  const hicp_model *m;
  hicp__plan plan;
  size_t stride;
  hicp_batch_options bo;
  crew crew;
  pthread_t tid[64];
  int nthreads;
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  entry **q;         /* frames base .. base + len - 1 */
  size_t cap, len;
  uint64_t held;     /* bytes of the entries not yet received, with the
                        copies of the frames not yet run */
  uint64_t base;     /* the oldest frame not yet received */
  uint64_t next;     /* the next frame index to submit */
  int stopping;
  /* Threads inside hicp_stream_receive, counted from the call's first
   * touch of the stream, before its lock (a receiver preempted on its way
   * to the lock was not counted, and hicp_stream_destroy freed the stream
   * under it: stop 53's review); hicp_stream_destroy wakes them and waits
   * for the count to reach 0.  Lowered under the lock only. */
  atomic_int receivers;
  /* What the stream keeps for its next frames, so that a caller at a
   * fixed rate gets no allocation per frame once the stream has seen its
   * largest frame (docs/robustness.md, "Real-time use"): entries received
   * and copies whose frames have run, at most STREAM_SPARES of each, the
   * copies up to HICP_SCRATCH_KEEP bytes; under mu. */
  entry *spare_entry[STREAM_SPARES];
  int nspare_entry;
  float *spare_copy[STREAM_SPARES];
  size_t spare_cap[STREAM_SPARES];
  int nspare_copy;
  size_t largest; /* the largest frame accepted whose copy would be kept:
                     each new copy has room for it */
  /* tracking (the tracking worker's alone): the last frame's matches and
   * a buffer for the next's, kept and swapped */
  hicp_transform pose;
  uint32_t *prev, *cur;
  size_t prev_n, prev_cap, cur_cap;
  hicp__worker tw[HICP_TEAM_MAX]; /* "hybrid": the team of a tracked batch */
  hicp__team team;                /*   (track_team), made by the worker */
};

/* The bytes of a frame's copy (hicp__copy_points: packed floats). */
static uint64_t copy_bytes(size_t n)
{
  return 12u * (uint64_t)n;
}

/* The kept copies and entries (under s->mu).  take_copy gives a kept copy
 * with room for n points, or NULL; give_copy keeps or frees one. */
static float *take_copy(hicp_stream *s, size_t n, size_t *cap)
{
  for (int k = 0; k < s->nspare_copy; k++)
    if (s->spare_cap[k] >= n) {
      float *p = s->spare_copy[k];
      *cap = s->spare_cap[k];
      s->nspare_copy--;
      s->spare_copy[k] = s->spare_copy[s->nspare_copy];
      s->spare_cap[k] = s->spare_cap[s->nspare_copy];
      return p;
    }
  return NULL;
}

static void give_copy(hicp_stream *s, float *p, size_t cap)
{
  if (p == NULL)
    return;
  if (copy_bytes(cap) <= HICP_SCRATCH_KEEP) {
    if (s->nspare_copy < STREAM_SPARES) {
      s->spare_copy[s->nspare_copy] = p;
      s->spare_cap[s->nspare_copy++] = cap;
      return;
    }
    /* full: keep the larger, which serves more frames */
    for (int k = 0; k < s->nspare_copy; k++)
      if (s->spare_cap[k] < cap) {
        float *t = s->spare_copy[k];
        s->spare_copy[k] = p;
        s->spare_cap[k] = cap;
        p = t;
        break;
      }
  }
  free(p);
}

static entry *take_entry(hicp_stream *s)
{
  return s->nspare_entry > 0 ? s->spare_entry[--s->nspare_entry] : NULL;
}

static void give_entry(hicp_stream *s, entry *e)
{
  if (s->nspare_entry < STREAM_SPARES)
    s->spare_entry[s->nspare_entry++] = e;
  else
    free(e);
}

/* What a stream's frame is charged for its copy when it runs: what the
 * single call would be (hicp_register: a copy of the frame's size;
 * hicp_register_cloud: none, the cloud's points being used where they
 * are), so that the frame runs or is refused as that call would be.  The
 * copy the stream holds may be larger (a kept one) and is counted apart,
 * in what the stream holds (submit); a frame's outcome does not depend on
 * the frames before it (stop 54's review: a frame too large for the limit
 * left its larger copy to the frames after it, which were refused). */
static uint64_t single_call_copy(const entry *e)
{
  return e->cloud ? 0 : hicp__kept_copy_bytes(e->n);
}

typedef struct stream_worker {
  hicp_stream *s;
  crew_member *cm;
} stream_worker;

static void process_entry(hicp_stream *s, crew_member *cm, entry *e, uint64_t index)
{
  hicp_result *r = &e->result;
  hicp_result_init(r);
  int rc;
  /* A cancel request stops the frames submitted before it: this one now,
   * or at its next iteration boundary once it runs. */
  hicp__cancel_begin_child(cm->ctx, e->cancel_seen);
  if (hicp__canceled(cm->ctx)) {
    rc = hicp__fail(cm->ctx, HICP_ECANCELED, "canceled before it started");
  } else if (!s->bo.track) {
    rc = hicp__check_frame_budget(cm->ctx, &s->plan, e->n, single_call_copy(e));
    if (rc == HICP_OK)
      rc = run_frame(s->ctx, cm, s->m, e->p0, e->n, e->origin, &s->plan,
                     e->has_init ? &e->init : NULL, r, hicp__now_ms()); /* copied at submit */
  } else {
    /* Tracking runs in order on the stream's one worker thread.  Poses
     * are absolute, so a frame may have another origin than the last. */
    const double t_start = hicp__now_ms();
    /* the frame as the single call, and the two frames' matches where the
     * limit leaves room for them (as in a tracked batch: without, the
     * frame runs from the start table to the same pose) */
    const uint64_t copy = single_call_copy(e);
    rc = hicp__check_frame_budget(cm->ctx, &s->plan, e->n, copy);
    int matches =
        rc == HICP_OK &&
        hicp__frame_fits(cm->ctx, &s->plan, e->n, copy + match_bytes(e->n, s->cur_cap, s->prev_cap));
    if (rc == HICP_OK && matches && match_buffer(&s->cur, &s->cur_cap, e->n, s->prev_cap) != 0)
      matches = 0; /* no memory for them: without, as where the limit leaves no room */
    if (rc == HICP_OK && !matches)
      drop_matches(&s->prev, &s->cur, &s->prev_cap, &s->cur_cap, &s->prev_n);
    uint32_t *cur = rc == HICP_OK && matches ? s->cur : NULL;
    const uint32_t *warm =
        matches && s->bo.reuse_matches && s->prev != NULL && s->prev_n == e->n ? s->prev : NULL;
    const hicp_transform *init = e->has_init ? &e->init : &s->pose;
    if (rc == HICP_OK)
      rc = hicp__register_frame(cm->ctx, s->m, e->p0, e->n, e->origin, &s->plan, init,
                                s->team.nw > 0 ? &s->team : NULL, warm, cur, r, t_start);
    if (rc == HICP_OK && !matches) {
      s->pose = r->transform;
      s->prev_n = 0; /* no matches for the next frame to start from */
    } else if (rc == HICP_OK) { /* this frame's matches become the last frame's */
      const size_t cap = s->cur_cap;
      s->pose = r->transform;
      s->cur = s->prev;
      s->cur_cap = s->prev_cap;
      s->prev = cur;
      s->prev_cap = cap;
      s->prev_n = e->n;
    }
  }
  if (rc != HICP_OK && s->bo.track) {
    /* As in a tracked batch, the next frame starts afresh from the last
     * good pose, or from this frame's own init, the caller's word for
     * where the sensor was. */
    if (e->has_init)
      s->pose = e->init;
    s->prev_n = 0;
  }
  if (rc != HICP_OK)
    hicp__result_failed(r, index, rc, hicp_context_error(cm->ctx));
  else
    r->frame = index;
}

static void *stream_worker_main(void *arg)
{
  stream_worker *w = arg;
  hicp_stream *s = w->s;
  /* made by hicp_stream_create, the thread has the caller's environment */
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  bind_member(w->cm);
  /* A tracking worker spreads each frame over the context's threads: its
   * OpenMP team starts now, while the caller reads the first frame, and
   * not inside that frame's registration (docs/cpu-engine.md, "Starting the
   * threads before the first registration").  One thread, or a device
   * worker, has nothing to start.  A refusal is not kept: each frame's
   * registration asks the system again, and a frame it still refuses ends
   * with HICP_ENOMEM and the reason, as a single registration would. */
  (void)hicp_context_start_threads(w->cm->ctx);
  /* A tracked stream on "hybrid" spreads each frame over the devices and
   * the CPU, as a tracked batch does, with a team made on the thread that
   * uses it.  If the team cannot be made, the frames run as on "auto"
   * (the device, else the CPU): the same bits either way. */
  if (s->bo.track && track_team(w->cm->ctx, &s->bo, s->tw, &s->team) != HICP_OK)
    s->team.nw = 0;
  pthread_mutex_lock(&s->mu);
  for (;;) {
    entry *e = NULL;
    uint64_t index = 0;
    for (size_t k = 0; k < s->len; k++)
      if (!s->q[k]->claimed) {
        e = s->q[k];
        index = s->base + k;
        break;
      }
    if (e == NULL) {
      if (s->stopping)
        break;
      pthread_cond_wait(&s->work, &s->mu);
      continue;
    }
    e->claimed = 1;
    pthread_mutex_unlock(&s->mu);
    hicp__clear_error(w->cm->ctx);
    process_entry(s, w->cm, e, index);
    pthread_mutex_lock(&s->mu);
    give_copy(s, e->p0, e->cap);
    e->p0 = NULL;
    s->held -= copy_bytes(e->cap);
    e->done = 1;
    pthread_cond_broadcast(&s->done);
  }
  pthread_mutex_unlock(&s->mu);
  if (s->bo.track) { /* the team is the one tracking worker's alone */
    for (int k = 0; k < s->team.nw; k++)
      s->team.w[k]->ops->destroy(s->team.w[k]);
    s->team.nw = 0;
  }
  free(w);
  hicp__fpenv_leave(&fe);
  return NULL;
}

static int stream_create(hicp_context *ctx, const hicp_model *m, const hicp_reg_options *opts,
                         const hicp_batch_options *bopts, hicp_stream **out)
{
  if (out != NULL)
    *out = NULL;
  if (ctx == NULL)
    return HICP_EINVAL;
  hicp__clear_error(ctx);
  if (out == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_stream_create: NULL out");
  if (m == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_stream_create: NULL model");
  hicp_stream *s = calloc(1, sizeof *s);
  if (s == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for the stream");
  s->ctx = ctx;
  s->m = m;
  int rc = batch_options(ctx, bopts, &s->bo);
  if (rc == HICP_OK)
    rc = hicp__make_plan(ctx, m, opts, &s->plan, &s->stride);
  /* A tracked stream's frames run on the context as hicp_register()'s do:
   * "cuda" without a usable device is refused here, as an untracked
   * stream's crew refuses it, not in every frame's result (stop 65's
   * review) */
  if (rc == HICP_OK && s->bo.track) {
    hicp_backend where;
    rc = hicp__choose_backend(ctx, &where);
  }
  /* Tracking: one worker spreading each frame over all threads. */
  if (rc == HICP_OK)
    rc = s->bo.track ? child_context(ctx, ctx->threads, ctx->backend, ctx->devices,
                                     ctx->ndevices, &s->crew.m[0].ctx)
                     : crew_make(ctx, m, SIZE_MAX, &s->crew);
  if (rc == HICP_OK && s->bo.track) {
    s->crew.n = 1;
    s->crew.m[0].core = -1; /* one worker: where the system puts it */
  }
  hicp_transform_identity(&s->pose);
  if (rc != HICP_OK) {
    crew_free(&s->crew);
    free(s);
    return rc;
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->work, NULL);
  pthread_cond_init(&s->done, NULL);
  for (int i = 0; i < s->crew.n; i++) {
    stream_worker *w = malloc(sizeof *w);
    if (w == NULL)
      break;
    w->s = s;
    w->cm = &s->crew.m[i];
    if (pthread_create(&s->tid[s->nthreads], NULL, stream_worker_main, w) != 0) {
      free(w);
      break;
    }
    s->nthreads++;
  }
  if (s->nthreads == 0) {
    hicp_stream_destroy(s);
    return hicp__fail(ctx, HICP_ENOMEM, "cannot start the stream's threads");
  }
  *out = s;
  return HICP_OK;
}

/* The plan's thresholds (tolerance, step, window multiplier) are computed
 * here, so in the default environment too (stop 65's review: under a
 * caller's flush-to-zero a rotation threshold below 1e-154 became 0, off,
 * and an unmasked invalid trap fired on a NaN option). */
int hicp_stream_create(hicp_context *ctx, const hicp_model *m, const hicp_reg_options *opts,
                       const hicp_batch_options *bopts, hicp_stream **out)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = stream_create(ctx, m, opts, bopts, out);
  hicp__fpenv_leave(&fe);
  return rc;
}

/* A submit to a stream that hicp_stream_stop has stopped. */
static int stopped(hicp_context *ctx)
{
  return hicp__fail(ctx, HICP_ECANCELED, "the stream was stopped (hicp_stream_stop)");
}

/* Queues n points at xyz (stride bytes apart), relative to origin. */
static int submit_body(hicp_stream *s, const float *xyz, size_t n, size_t stride,
                       const double origin[3], int cloud, const hicp_transform *init,
                       uint64_t *frame)
{
  hicp_context *ctx = s->ctx;
  if (init != NULL && hicp_transform_check(init) != HICP_OK)
    return hicp__fail(ctx, HICP_EINVAL, "the initial transform is not rigid");
  int rc = hicp__check_count(ctx, "scan", xyz, n);
  if (rc != HICP_OK)
    return rc;
  /* What the stream holds, this frame's copy and entry included, is held
   * to the limit, so a caller submitting faster than the frames run (or
   * never receiving) is told, not left to exhaust the memory: the bytes are
   * reserved before anything is allocated and given back when a frame has
   * run (its copy, counted at its size: a kept one may be larger than the
   * frame) and been received (its entry).
   * The copy and entry are kept ones where the stream has them; a new copy
   * has room for the largest frame so far (where the limit allows), so
   * that once the largest has been seen any kept copy serves any frame. */
  const uint64_t entry_bytes = sizeof(entry);
  pthread_mutex_lock(&s->mu);
  if (s->stopping) {
    pthread_mutex_unlock(&s->mu);
    return stopped(ctx);
  }
  const uint64_t held = s->held;
  const size_t frames = s->len + 1;
  const uint64_t room_left = held < ctx->memory_limit ? ctx->memory_limit - held : 0;
  size_t cap = 0;
  float *p = n < SIZE_MAX / 16 ? take_copy(s, n, &cap) : NULL;
  if (p != NULL && copy_bytes(cap) + entry_bytes > room_left) {
    give_copy(s, p, cap); /* too large for the limit: a copy of this frame's size */
    p = NULL;
  }
  if (p == NULL) {
    cap = n > s->largest ? n : s->largest;
    if (cap < SIZE_MAX / 16 && copy_bytes(cap) + entry_bytes > room_left)
      cap = n;
  }
  const uint64_t bytes = cap < SIZE_MAX / 16 ? copy_bytes(cap) + entry_bytes : UINT64_MAX / 2;
  const int over = bytes > room_left;
  entry *e = NULL;
  if (!over) {
    s->held += bytes;
    e = take_entry(s);
  }
  pthread_mutex_unlock(&s->mu);
  if (over) {
    char what[96];
    snprintf(what, sizeof what, "the stream's %zu frames not yet run or received", frames);
    return hicp__check_budget(ctx, held + bytes, what);
  }
  /* The frame's registration, with the copy it holds, is checked by the
   * worker that runs it, and a frame over the limit fails in its result. */
  if (e == NULL)
    e = malloc(sizeof *e);
  if (p == NULL && e != NULL)
    p = malloc((size_t)copy_bytes(cap));
  rc = e == NULL || p == NULL
           ? hicp__fail(ctx, HICP_ENOMEM, "out of memory copying %zu scan points", n)
           : hicp__copy_points_to(ctx, "scan", xyz, n, stride, p);
  if (rc != HICP_OK) {
    pthread_mutex_lock(&s->mu);
    give_copy(s, p, cap);
    if (e != NULL)
      give_entry(s, e);
    s->held -= bytes;
    pthread_mutex_unlock(&s->mu);
    return rc;
  }
  memset(e, 0, sizeof *e);
  e->p0 = p;
  e->cap = cap;
  e->n = n;
  e->cloud = cloud;
  e->cancel_seen = hicp__cancel_count(ctx);
  memcpy(e->origin, origin, sizeof e->origin);
  if (init != NULL) {
    e->init = *init;
    e->has_init = 1;
  }
  pthread_mutex_lock(&s->mu);
  if (s->stopping) { /* hicp_stream_stop while the points were copied */
    s->held -= bytes;
    give_copy(s, e->p0, e->cap);
    give_entry(s, e);
    pthread_mutex_unlock(&s->mu);
    return stopped(ctx);
  }
  if (s->len == s->cap) {
    const size_t qcap = s->cap ? 2 * s->cap : 64;
    entry **q = realloc(s->q, sizeof *q * qcap);
    if (q == NULL) {
      s->held -= bytes;
      give_copy(s, e->p0, e->cap);
      give_entry(s, e);
      pthread_mutex_unlock(&s->mu);
      return hicp__fail(ctx, HICP_ENOMEM, "out of memory for the stream's queue of %zu frames", qcap);
    }
    s->q = q;
    s->cap = qcap;
  }
  s->q[s->len++] = e;
  /* a frame accepted, and its copy one the stream would keep */
  if (n > s->largest && copy_bytes(n) <= HICP_SCRATCH_KEEP)
    s->largest = n;
  if (frame != NULL)
    *frame = s->next;
  s->next++;
  pthread_cond_signal(&s->work);
  pthread_mutex_unlock(&s->mu);
  return HICP_OK;
}

static int submit(hicp_stream *s, const float *xyz, size_t n, size_t stride,
                  const double origin[3], int cloud, const hicp_transform *init,
                  uint64_t *frame)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = submit_body(s, xyz, n, stride, origin, cloud, init, frame);
  hicp__fpenv_leave(&fe);
  return rc;
}

int hicp_stream_submit(hicp_stream *s, const float *xyz, size_t n, const hicp_transform *init,
                       uint64_t *frame)
{
  if (s == NULL)
    return HICP_EINVAL;
  static const double zero[3] = {0.0, 0.0, 0.0};
  return submit(s, xyz, n, s->stride, zero, 0, init, frame);
}

int hicp_stream_submit_cloud(hicp_stream *s, const hicp_cloud *cloud, const hicp_transform *init,
                             uint64_t *frame)
{
  if (s == NULL)
    return HICP_EINVAL;
  if (cloud == NULL)
    return hicp__fail(s->ctx, HICP_EINVAL, "hicp_stream_submit_cloud: NULL cloud");
  if (s->stride != 3 * sizeof(float))
    return hicp__fail(s->ctx, HICP_EINVAL, "scan_stride does not apply to a cloud");
  return submit(s, cloud->xyz, cloud->n, s->stride, cloud->origin, 1, init, frame);
}

int hicp__stream_receivers(hicp_stream *s)
{
  return atomic_load(&s->receivers);
}

/* Leaves hicp_stream_receive (under the stream's lock) with `rc`: a
 * destroyer waiting for the receivers to leave hears of it. */
static int receive_leave(hicp_stream *s, int rc)
{
  atomic_fetch_sub(&s->receivers, 1);
  if (s->stopping)
    pthread_cond_broadcast(&s->done);
  pthread_mutex_unlock(&s->mu);
  return rc;
}

int hicp_stream_receive(hicp_stream *s, hicp_result *result, int wait)
{
  if (s == NULL || result == NULL)
    return HICP_EINVAL;
  /* Receiving writes no message to the context: the submitter may be
   * using it on another thread.  A failed frame's message is its note. */
  if (result->struct_size < offsetof(hicp_result, frame) + sizeof(uint64_t))
    return HICP_EINVAL; /* not prepared with hicp_result_init() */
  /* Counted before anything else of the stream is touched: a destroy that
   * begins after this waits for this call to leave (hicp.h). */
  atomic_fetch_add(&s->receivers, 1);
  pthread_mutex_lock(&s->mu);
  entry *e;
  for (;;) {
    /* hicp_stream_destroy on another thread: it waits for this one to
     * leave before it frees anything */
    if (s->stopping)
      return receive_leave(s, HICP_ECANCELED);
    if (s->len == 0)
      return receive_leave(s, HICP_EINVAL); /* no frame is outstanding */
    /* the oldest frame, read again after every wait: another receiver
     * may have taken the one this call waited for (two receivers waiting
     * on one frame both took it, and the second emptied an empty queue:
     * stop 53's review) */
    e = s->q[0];
    if (e->done)
      break;
    if (!wait)
      return receive_leave(s, HICP_EAGAIN);
    pthread_cond_wait(&s->done, &s->mu);
  }
  memmove(s->q, s->q + 1, sizeof *s->q * (s->len - 1));
  s->len--;
  s->base++;
  s->held -= sizeof(entry);
  size_t size = result->struct_size;
  memcpy(result, &e->result, size < sizeof e->result ? size : sizeof e->result);
  result->struct_size = size;
  give_entry(s, e);
  return receive_leave(s, HICP_OK);
}

/* hicp_stream_stop under the stream's lock. */
static void stop_locked(hicp_stream *s)
{
  s->stopping = 1;
  /* Unstarted frames are dropped, and running ones stop at their next
   * iteration boundary (their workers' contexts are cancelled): nobody
   * will receive their results, and a frame with a large max_iter could
   * otherwise hold the caller for minutes. */
  for (size_t k = 0; k < s->len; k++)
    s->q[k]->claimed = 1;
  for (int i = 0; i < s->crew.n; i++)
    hicp_context_cancel(s->crew.m[i].ctx);
  pthread_cond_broadcast(&s->work);
  /* A receiver blocked on another thread, or on its way to the lock,
   * returns HICP_ECANCELED. */
  pthread_cond_broadcast(&s->done);
}

void hicp_stream_stop(hicp_stream *s)
{
  if (s == NULL)
    return;
  pthread_mutex_lock(&s->mu);
  stop_locked(s);
  pthread_mutex_unlock(&s->mu);
}

void hicp_stream_destroy(hicp_stream *s)
{
  if (s == NULL)
    return;
  pthread_mutex_lock(&s->mu);
  stop_locked(s);
  /* nothing is freed until the receivers counted have left */
  while (atomic_load(&s->receivers) > 0)
    pthread_cond_wait(&s->done, &s->mu);
  pthread_mutex_unlock(&s->mu);
  for (int i = 0; i < s->nthreads; i++)
    pthread_join(s->tid[i], NULL);
  if (s->nthreads > 0)
    hicp__threads_ended(); /* the workers and their OpenMP pools */
  for (size_t k = 0; k < s->len; k++) {
    free(s->q[k]->p0);
    free(s->q[k]);
  }
  for (int k = 0; k < s->nspare_entry; k++)
    free(s->spare_entry[k]);
  for (int k = 0; k < s->nspare_copy; k++)
    free(s->spare_copy[k]);
  free(s->q);
  free(s->prev);
  free(s->cur);
  crew_free(&s->crew);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->done);
  free(s);
}
