/* crew.h: the workers of a batch or a stream (crew.c).
 *
 * A crew is up to 64 workers, each with a context of its own (its own
 * errors, threads, device state): CPU workers of one or more threads and
 * device workers of one CUDA stream each.  Batches (batch.c) keep one per
 * context; a stream (stream.c) makes its own.  Also here: what batches
 * and streams share, their options, a tracked frame's team and its match
 * buffers. */
#ifndef HICP_CREW_H
#define HICP_CREW_H

#include <stddef.h>
#include <stdint.h>

#include "hicp.h"
#include "scheduler.h"

/* Device workers per logical device (see hicp__crew_make). */
#define HICP_GPU_STREAMS 8

typedef struct hicp__crew_member {
  hicp_context *ctx; /* own context: own errors, own device state */
  int gpu;           /* 1: runs frames on its device */
  int dev;           /* a device worker's device */
  int threads;       /* a CPU worker's threads */
  int core;          /* a CPU worker's core (hicp__crew_bind); -1: unbound */
  const char *note;  /* the crew's note for each result: "" or NULL for none */
  int spoiled;       /* its device failed a frame: not to be kept */
} hicp__crew_member;

/* At most this many device workers in a crew (of its 64 members). */
#define CREW_GPU_MAX 32

typedef struct hicp__crew {
  hicp__crew_member m[64];
  int n;
  int ngpu;
  uint64_t model; /* with device workers: the uid of the model they hold */
  char note[120]; /* "hybrid" or "auto" without a listed device */
} hicp__crew;


/* The options of a batch or stream, checked: a NULL `user` is the
 * defaults. */
int hicp__batch_options(hicp_context *ctx, const hicp_batch_options *user,
                        hicp_batch_options *o);

/* A worker's context: the parent's settings, `threads` threads, and the
 * given devices (ndevices 0: every device); cancelled with its parent. */
int hicp__child_context(hicp_context *parent, int threads, hicp_backend backend,
                        const int *devices, int ndevices, hicp_context **out);

/* The workers the context's backend calls for, for at most `frames`
 * frames (SIZE_MAX: a stream's): hicp__crew_plan decides them, with no
 * context made; hicp__crew_build makes their contexts; hicp__crew_make
 * does both.  hicp__crew_free destroys the contexts. */
int hicp__crew_plan(hicp_context *ctx, const hicp_model *m, size_t frames, hicp__crew *c);
int hicp__crew_build(hicp_context *ctx, hicp__crew *c);
int hicp__crew_make(hicp_context *ctx, const hicp_model *m, size_t frames, hicp__crew *c);
void hicp__crew_free(hicp__crew *c);

/* Runs one frame on a worker; a device that fails hands the frame to the
 * CPU unless the user asked for "cuda". */
int hicp__crew_run_frame(hicp_context *parent, hicp__crew_member *cm, const hicp_model *m,
                         const float *p0, size_t n, const double origin[3],
                         const hicp__plan *plan, const hicp_transform *init, hicp_result *r,
                         double t_start);

/* Pins the calling thread for worker cm (device workers near their
 * device, one-thread CPU workers to their core). */
void hicp__crew_bind(const hicp__crew_member *cm);

/* The team of a tracked frame: with "hybrid", the CPU and every device. */
int hicp__track_team(hicp_context *ctx, const hicp_batch_options *bo, hicp__worker *ws,
                     hicp__team *team);

/* A tracked frame's match buffers (crew.c says how their room is kept). */
uint64_t hicp__match_bytes(size_t n, size_t cur_cap, size_t prev_cap);
void hicp__drop_matches(uint32_t **prev, uint32_t **cur, size_t *prev_cap, size_t *cur_cap,
                        size_t *prev_n);
int hicp__match_buffer(uint32_t **buf, size_t *cap, size_t n, size_t prev_cap);

#endif /* HICP_CREW_H */
