/* stream.c: streams (hicp_stream_create, _submit, _receive, _stop,
 * _destroy): frames submitted one at a time, run by a crew (crew.c) as
 * they come, received in submission order; tracked streams run each frame
 * from the previous one's pose and matches. */
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
  hicp__crew crew;
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
  hicp__team team;                /*   (hicp__track_team), made by the worker */
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
  hicp__crew_member *cm;
} stream_worker;

static void process_entry(hicp_stream *s, hicp__crew_member *cm, entry *e, uint64_t index)
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
      rc = hicp__crew_run_frame(s->ctx, cm, s->m, e->p0, e->n, e->origin, &s->plan,
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
    int matches = rc == HICP_OK &&
                  hicp__frame_fits(cm->ctx, &s->plan, e->n,
                                   copy + hicp__match_bytes(e->n, s->cur_cap, s->prev_cap));
    if (rc == HICP_OK && matches &&
        hicp__match_buffer(&s->cur, &s->cur_cap, e->n, s->prev_cap) != 0)
      matches = 0; /* no memory for them: without, as where the limit leaves no room */
    if (rc == HICP_OK && !matches)
      hicp__drop_matches(&s->prev, &s->cur, &s->prev_cap, &s->cur_cap, &s->prev_n);
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
  hicp__crew_bind(w->cm);
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
  if (s->bo.track && hicp__track_team(w->cm->ctx, &s->bo, s->tw, &s->team) != HICP_OK)
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
  int rc = hicp__batch_options(ctx, bopts, &s->bo);
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
    rc = s->bo.track ? hicp__child_context(ctx, ctx->threads, ctx->backend, ctx->devices,
                                           ctx->ndevices, &s->crew.m[0].ctx)
                     : hicp__crew_make(ctx, m, SIZE_MAX, &s->crew);
  if (rc == HICP_OK && s->bo.track) {
    s->crew.n = 1;
    s->crew.m[0].core = -1; /* one worker: where the system puts it */
  }
  hicp_transform_identity(&s->pose);
  if (rc != HICP_OK) {
    hicp__crew_free(&s->crew);
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
  hicp__crew_free(&s->crew);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->work);
  pthread_cond_destroy(&s->done);
  free(s);
}

