/* crew.c: the workers of a batch or a stream (crew.h), and what batches
 * and streams share: their options, a tracked frame's team and its match
 * buffers.  Batches are in batch.c, streams in stream.c. */
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

int hicp__batch_options(hicp_context *ctx, const hicp_batch_options *user,
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


/* A child context: the parent's settings, its own threads and devices
 * (ndevices 0: every device), cancelled with its parent. */
int hicp__child_context(hicp_context *parent, int threads, hicp_backend backend,
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

void hicp__crew_free(hicp__crew *c)
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
int hicp__crew_plan(hicp_context *ctx, const hicp_model *m, size_t frames, hicp__crew *c)
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
       * CPU worker of one thread keeps to a core of its own (hicp__crew_bind).
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
int hicp__crew_build(hicp_context *ctx, hicp__crew *c)
{
  for (int i = 0; i < c->n; i++) {
    hicp__crew_member *cm = &c->m[i];
    int rc = cm->gpu ? hicp__child_context(ctx, 1, HICP_BACKEND_CUDA, &cm->dev, 1, &cm->ctx)
                     : hicp__child_context(ctx, cm->threads, HICP_BACKEND_CPU, NULL, 0, &cm->ctx);
    if (rc != HICP_OK) {
      c->n = i;
      hicp__crew_free(c);
      return rc;
    }
    cm->ctx->side_by_side = 1;
    cm->note = c->note;
  }
  return HICP_OK;
}

int hicp__crew_make(hicp_context *ctx, const hicp_model *m, size_t frames, hicp__crew *c)
{
  int rc = hicp__crew_plan(ctx, m, frames, c);
  return rc != HICP_OK ? rc : hicp__crew_build(ctx, c);
}

/* Runs one frame on a crew member; a device that fails hands the frame to
 * the CPU (same context, one thread) unless the user asked for "cuda".
 * t_start: the frame's start, for both tries, and before its copy where
 * the worker made one (the single call's budget and time_ms count it). */
int hicp__crew_run_frame(hicp_context *parent, hicp__crew_member *cm, const hicp_model *m,
                         const float *p0, size_t n, const double origin[3],
                         const hicp__plan *plan, const hicp_transform *init, hicp_result *r,
                         double t_start)
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


/* Pins a worker: device workers near their device, CPU workers to their
 * core if the crew gave them one. */
void hicp__crew_bind(const hicp__crew_member *cm)
{
  if (cm->gpu)
    hicp__bind_thread_near_gpu(hicp__context_first_device(cm->ctx));
  else if (cm->ctx->threads == 1) /* threads it starts would inherit a core */
    hicp__bind_thread_core(cm->core);
}


/* The team of a tracking frame: the CPU plus every device worker.  The
 * CPU worker is the first, which a pass runs on the calling thread
 * (run_team_pass in icp.c): its OpenMP team then persists from pass to
 * pass and is the one the thread preflight counted.  Put after the device
 * workers it ran on a new thread each pass, whose team of threads was made
 * again each time, uncounted: where threads were short, libgomp ended the
 * process (stop 64's review).  The device workers only launch and wait. */
int hicp__track_team(hicp_context *ctx, const hicp_batch_options *bo, hicp__worker *ws,
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
 * not beyond the kept size.  hicp__match_bytes: what the two buffers then hold,
 * for the frame's memory check.  hicp__match_buffer gives *buf that room; 0, or
 * -1 out of memory. */
static size_t match_cap(size_t n, size_t cur_cap, size_t prev_cap)
{
  const size_t room =
      prev_cap > n && 4u * (uint64_t)prev_cap <= HICP_SCRATCH_KEEP ? prev_cap : n;
  return cur_cap >= room && (cur_cap == room || 4u * (uint64_t)cur_cap <= HICP_SCRATCH_KEEP)
             ? cur_cap
             : room;
}

uint64_t hicp__match_bytes(size_t n, size_t cur_cap, size_t prev_cap)
{
  return 4u * ((uint64_t)match_cap(n, cur_cap, prev_cap) + prev_cap);
}

/* A tracked frame that runs without matches (no room for them under the
 * limit) holds none beside it: the buffers the frames before it kept are
 * freed, so that the frame takes what the single call would (stop 54's
 * review: they stayed, 4 bytes a point of the last frame over the limit),
 * and the next frame starts with none. */
void hicp__drop_matches(uint32_t **prev, uint32_t **cur, size_t *prev_cap, size_t *cur_cap,
                        size_t *prev_n)
{
  free(*prev);
  free(*cur);
  *prev = *cur = NULL;
  *prev_cap = *cur_cap = *prev_n = 0;
}

int hicp__match_buffer(uint32_t **buf, size_t *cap, size_t n, size_t prev_cap)
{
  const size_t want = match_cap(n, *cap, prev_cap);
  if (*buf != NULL && want == *cap)
    return 0;
  free(*buf);
  *buf = malloc(sizeof **buf * want);
  *cap = *buf != NULL ? want : 0;
  return *buf != NULL ? 0 : -1;
}

