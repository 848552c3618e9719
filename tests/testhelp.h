/* testhelp.h: small helpers shared by the Criterion suites. */
#ifndef HICP_TESTHELP_H
#define HICP_TESTHELP_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hicp.h"
#include "../tools/synth.h"

/* Path of a libcgal-demo file extracted by tests/fetch-data.sh (e.g.
 * "meshes/bunny00.off"), or NULL when it is not there: the caller then
 * skips with cr_skip_test (never passes without data). */
const char *th_data(const char *relpath);

/* A fresh empty directory for one test (removed by `make clean`). */
const char *th_tmpdir(void);
/* Joins dir and name into a static buffer (8 rotating slots). */
const char *th_path(const char *dir, const char *name);
/* Writes len bytes to path; aborts the test on failure. */
void th_write(const char *path, const void *data, size_t len);
/* Reads a whole file; *len receives its size.  Caller frees. */
unsigned char *th_read(const char *path, size_t *len);

/* Asserts that every cell of m's start table holds the vertex nearest the
 * cell's centre (the brute force's, ties to the smaller id), as a build
 * makes it (lib/start_table.c); returns the number of cells. */
uint64_t th_assert_start_table_exact(const hicp_model *m);

/* 1 when msg is a memory-limit refusal that gives both sizes, as
 * hicp__check_budget (lib/util.c) writes it: "... would need X U, over the
 * memory limit of Y U", U MiB or GiB, X not under Y, and Y the `limit`
 * bytes the caller set, to the 3 digits printed.  A refusal without the
 * sizes leaves the user guessing what limit would do. */
int th_limit_message(const char *msg, uint64_t limit);

/* A context with `threads` CPU threads on `backend`; asserts it was made. */
hicp_context *th_context(int threads, hicp_backend backend);

/* Submits frame f (n points) to stream s, made on ctx under a memory
 * limit of limit_mib MiB, until the stream refuses it for that limit, as
 * it must well before 2,000 frames: the frames not yet run or received
 * count against the limit.  Asserts the refusal and its message; returns
 * how many frames were queued (more than 10). */
size_t th_stream_fill_to_limit(hicp_stream *s, hicp_context *ctx, const float *f, size_t n,
                               unsigned limit_mib, const char *what);

/* Destroys stream s while it runs a frame that would take minutes (the
 * caller made s with max_iter 1e6 and tol 0) and another thread waits in
 * hicp_stream_receive: the frame stops at an iteration boundary, destroy
 * returns within 20 s, and the waiting thread returns HICP_ECANCELED
 * before anything is freed under it.  Submits f (n points) twice itself. */
void th_stream_destroy_under_a_receiver(hicp_stream *s, const float *f, size_t n,
                                        const char *what);

/* A bumpy closed surface (an ellipsoid with ripples), n points, about 2
 * units across; deterministic for a seed.  Caller frees. */
float *th_surface(size_t n, uint64_t seed);
/* The threads of this process, as the kernel lists them in /proc/self/task;
 * -1 where it cannot be read. */
int th_tasks(void);
/* 1 on a big-endian host (s390x): files the tests write in the host's
 * byte order say so in their headers. */
static inline int th_big_endian(void)
{
  const uint16_t one = 1;
  unsigned char first;
  memcpy(&first, &one, 1);
  return first == 0;
}

/* Keeps the calling thread (and the threads it starts) to its last
 * allowed CPU; *was receives the CPUs it had.  The CPU, or -1 (nothing
 * changed) when it had fewer than two. */
int th_pin_to_one_cpu(cpu_set_t *was);

/* Deterministic random numbers: the generator of tools/synth.c
 * (xoshiro256**), under the tests' names. */
typedef synth_rng th_rng;
static inline void th_rng_seed(th_rng *r, uint64_t seed) { synth_seed(r, seed); }
static inline uint64_t th_rng_next(th_rng *r) { return synth_next(r); }
static inline double th_uniform(th_rng *r) { return synth_uniform(r); } /* [0, 1) */
static inline double th_normal(th_rng *r) { return synth_normal(r); }   /* N(0, 1) */
/* Point i of a set on the faces of the box [0, side]: face i % 6 lies on
 * axis (i % 6) / 2, at 0 or side, and its other two coordinates are drawn
 * uniform, in axis order.  Exactly flat faces on the points' hull: the
 * models that get guards (lib/delaunay_qhull.c). */
static inline void th_box_face_point(th_rng *r, size_t i, const double side[3], double x[3])
{
  const int face = (int)(i % 6), axis = face / 2;
  for (int d = 0; d < 3; d++)
    x[d] = d == axis ? (face % 2 ? side[d] : 0.0) : th_uniform(r) * side[d];
}

/* The seed for "randomised each run" tests: $HICP_TEST_SEED if set, else the
 * time; printed by the caller so a failure can be replayed. */
uint64_t th_run_seed(void);

/* Reads a cloud with a throwaway context; aborts the test on failure. */
hicp_cloud *th_load_cloud(const char *path);

/* Rotation matrix (row-major) from roll, pitch, yaw in degrees:
 * R = Rz(yaw) Ry(pitch) Rx(roll). */
static inline void th_rotation(double roll, double pitch, double yaw, double r[9])
{
  synth_rotation(roll, pitch, yaw, r);
}
/* Angle in degrees of R_a R_b^T (rotation difference). */
double th_rotation_error_deg(const double *ma, const double *mb); /* 4x4 row-major */

/* Every value of HICP_SIMD, the CPU's vector variants (cpu/walk_simd.c),
 * the scalar reference first: the suites run each and compare bits.  A
 * variant the CPU lacks runs the widest it has. */
static const char *const th_simd[] = {"scalar", "avx2", "avx512", "avx512-scan8"};
#define TH_NSIMD (sizeof th_simd / sizeof *th_simd)

#endif /* HICP_TESTHELP_H */
