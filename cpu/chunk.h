/* chunk.h: pass A's correspondences for a block of points, and nearest
 * neighbours for a block of queries, on the CPU: defined once and
 * instantiated for each walk variant in walk_simd.c. */
#ifndef HICP_CPU_CHUNK_H
#define HICP_CPU_CHUNK_H

#include <string.h>

#include "icp.h"

/* One point of pass A: its query, in double for the pair distance and in
 * float for the search (hicp__pass_query, as on the GPU). */
static inline void hicp__cpu_point(const hicp__xf *T, const hicp__frame *f, uint32_t i,
                                   double qd[3], float q[3])
{
  hicp__pass_query(T, &f->p0[3 * (size_t)i], qd, q);
}

/* Counts n walks of `steps` steps each in *w. */
static inline void hicp__cpu_count(hicp__walkpart *w, uint32_t steps, uint32_t n)
{
  w->queries += n;
  w->steps += (uint64_t)steps * n;
  w->max_steps = n > 0 && steps > w->max_steps ? steps : w->max_steps;
  w->hist[hicp__walk_bin(steps)] += n;
}

/* Stores point i's answer (hicp__pass_answer, as on the GPU) and counts
 * its walk. */
static inline void hicp__cpu_done(const hicp__mview *view, hicp__frame *f, uint32_t i,
                                  const double qd[3], const hicp__nn_res *r, hicp__walkpart *w)
{
  hicp__pass_answer(f->match, f->e2, i, qd, view->vtx, r->v);
  if (r->walked)
    hicp__cpu_count(w, r->steps, 1);
}

/* Walks handled together: a block of pass A, or of nearest-neighbour
 * queries, is at most this many points. */
#define HICP_CPU_WAVE 256

/* A model of more than this many vertices (1 MiB of vertex records, a
 * core's L2 cache on Zen 4) does not stay in the caches, and its walks
 * and fronts prefetch more (below, and front_prefetch in ends_simd.h). */
#define HICP_CPU_BIG_NV (1u << 16)

/* How far ahead, in walks, a wave prefetches the neighbour rows.  On a
 * large model (HICP_CPU_BIG_NV) it also prefetches their length codes, and
 * twice as far ahead the rows' offsets and code units, from which the
 * row's address is read: on E1's 1M-point model each of these was a miss
 * that the scan waited on (docs/cpu-engine.md, stop 33).  On a model in the
 * caches they cost more instructions than they save. */
#define HICP_CPU_AHEAD 4

/* A wave of walks: walk k is for the query q[k]; it ended in the safe ball
 * (how 1), after the row scan rs[k] (how 2) or at a hub, to end in the
 * kd-tree (how 3: hicp__walk_end_hub). */
typedef struct hicp__cpu_wave {
  float q[HICP_CPU_WAVE][3];
  hicp__walk w[HICP_CPU_WAVE];
  hicp__row rs[HICP_CPU_WAVE];
  uint8_t how[HICP_CPU_WAVE];
  uint16_t live[HICP_CPU_WAVE], scan[HICP_CPU_WAVE];
} hicp__cpu_wave;

/* The answer of walk k once the wave has run. */
static inline void hicp__cpu_wave_answer(const hicp__mview *view, const hicp__cpu_wave *wv,
                                         uint32_t k, hicp__nn_res *r)
{
  const hicp__walk *w = &wv->w[k];
  if (wv->how[k] == 1)
    hicp__walk_end_safe(w, r);
  else if (wv->how[k] == 3)
    hicp__walk_end_hub(view, wv->q[k], w, r);
  else
    hicp__walk_end(view, wv->q[k], w, &wv->rs[k], r);
}

/* Defines `static void NAME(view, wv, n)`: runs the walks 0 .. n-1 of
 * *wv, begun with
 * hicp__walk_begin, to their ends, with the row scan ROW_SCAN: the
 * steps of hicp__nn_walk_step, breadth first.  Every walk takes one step
 * (the safe ball test, then the row scan), those that go on take another,
 * and so on.  A walk step is a chain of dependent loads (vertex, row,
 * neighbours) and a branch on their result: one walk alone keeps the core
 * waiting, and when the branch is mispredicted, the work the core had
 * begun past it is lost.  So consecutive steps belong to different walks,
 * each walk's row is prefetched a few steps before its scan, and lists,
 * not branches, sort the walks after each step.  Each walk takes the same
 * steps as it would alone: nothing changes but time. */
/* The first half of a wave step for the n walks list[0 .. n) (walks
 * 0 .. n-1 when list is NULL): the safe ball tests; the walks that need a
 * row scan are listed in wv->scan, and how many is returned. */
static inline uint32_t hicp__cpu_wave_balls(const hicp__mview *view, hicp__cpu_wave *wv,
                                            const uint16_t *list, uint32_t n)
{
  uint32_t nscan = 0;
  for (uint32_t j = 0; j < n; j++) {
    const uint32_t k = list != NULL ? list[j] : j;
    wv->how[k] = 1;
    wv->scan[nscan] = (uint16_t)k;
    nscan += !hicp__walk_in_safe_ball(view, &wv->w[k]);
  }
  return nscan;
}

/* Before the j-th of a wave step's nscan row scans: the row of the scan
 * HICP_CPU_AHEAD later into the cache, and with `big` (a model of more than
 * HICP_CPU_BIG_NV vertices) its length codes too, and the row offsets and
 * code units of the scan twice as far ahead. */
static inline __attribute__((always_inline)) void
hicp__cpu_wave_prefetch(const hicp__mview *view, const hicp__cpu_wave *wv, uint32_t j,
                        uint32_t nscan, int big)
{
  if (big && j + 2 * HICP_CPU_AHEAD < nscan) {
    const uint32_t c = wv->w[wv->scan[j + 2 * HICP_CPU_AHEAD]].cur;
    __builtin_prefetch(view->row + c);
    __builtin_prefetch(view->eunit + c);
  }
  if (j + HICP_CPU_AHEAD < nscan) {
    const uint32_t *row = view->nbr + view->row[wv->w[wv->scan[j + HICP_CPU_AHEAD]].cur];
    __builtin_prefetch(row);
    __builtin_prefetch(row + 16);
    if (big)
      __builtin_prefetch(view->ecode + (row - view->nbr));
  }
}

/* After walk k's row scan (in wv->rs[k]): the walk takes its step, and if
 * it moved it is listed in wv->live for the next wave step (*nlive). */
static inline __attribute__((always_inline)) void
hicp__cpu_wave_after(hicp__cpu_wave *wv, uint32_t k, uint32_t *nlive)
{
  wv->how[k] = 2;
  wv->live[*nlive] = (uint16_t)k;
  *nlive += (uint32_t)hicp__walk_move(&wv->w[k], &wv->rs[k]);
}

/* In place of walk k's row scan when it is at a hub (hicp__walk_at_hub,
 * which the row scan loops ask first: a branch never taken on real
 * models): the walk moves to the start table's vertex, listed in wv->live
 * as a walk that moved, or ends (how 3). */
static inline void hicp__cpu_wave_hub(const hicp__mview *view, hicp__cpu_wave *wv, uint32_t k,
                                      uint32_t *nlive)
{
  wv->how[k] = 3;
  wv->live[*nlive] = (uint16_t)k;
  *nlive += (uint32_t)hicp__walk_hub_move(view, wv->q[k], &wv->w[k]);
}

/* BIG is 1 for the variant used on models of more than HICP_CPU_BIG_NV
 * vertices, with the large model's prefetches, and 0 for the others, which
 * compile to the code they had before those prefetches: chosen per model
 * (hicp__cpu_simd_chunk), not tested per scan, since the test and the
 * second copy's code cost the small models about 1% (docs/cpu-engine.md,
 * stop 33). */
#define HICP_CPU_WAVE_WALKS(NAME, ROW_SCAN, ATTR, BIG)                                        \
  /* From the row scans of the nscan walks listed in wv->scan (their safe  \
   * ball tests done: how[] 1 for every walk of the wave) */                                  \
  ATTR static void NAME##_scans(const hicp__mview *view, hicp__cpu_wave *wv, uint32_t nscan)  \
  {                                                                                           \
    for (;;) {                                                                                \
      uint32_t nlive = 0;                                                                     \
      for (uint32_t j = 0; j < nscan; j++) {                                                  \
        hicp__cpu_wave_prefetch(view, wv, j, nscan, BIG);                                     \
        const uint32_t k = wv->scan[j];                                                       \
        const hicp__walk *w = &wv->w[k];                                                      \
        if (__builtin_expect(hicp__walk_at_hub(view, w), 0)) {                                \
          hicp__cpu_wave_hub(view, wv, k, &nlive);                                            \
          continue;                                                                           \
        }                                                                                     \
        ROW_SCAN(view, wv->q[k], w->cur, w->dcur, w->cert, &wv->rs[k]);                       \
        hicp__cpu_wave_after(wv, k, &nlive);                                                  \
      }                                                                                       \
      if (nlive == 0)                                                                         \
        return;                                                                               \
      nscan = hicp__cpu_wave_balls(view, wv, wv->live, nlive);                                \
    }                                                                                         \
  }                                                                                           \
                                                                                              \
  ATTR static void NAME(const hicp__mview *view, hicp__cpu_wave *wv, uint32_t n)             \
  {                                                                                           \
    NAME##_scans(view, wv, hicp__cpu_wave_balls(view, wv, NULL, n));                          \
  }

/* The kd descents of the walks list[0 .. n) of *wv (hicp__nn_kd_descend):
 * their starts, in start[].  Eight at a time in step, one level each in
 * turn, so that eight chains of dependent loads overlap and only the last
 * level ends in a mispredicted branch. */
static inline void hicp__cpu_descend(const hicp__mview *view, const hicp__cpu_wave *wv,
                                     const uint16_t *list, uint32_t n, uint32_t *start)
{
  for (uint32_t g0 = 0; g0 < n; g0 += 8) {
    const uint32_t gn = n - g0 < 8 ? n - g0 : 8;
    uint32_t node[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int level = 0; level < HICP_KD_MAX_DEPTH; level++) {
      int inner = 0;
      for (uint32_t g = 0; g < gn; g++) {
        const uint32_t next = hicp__kd_child(view, wv->q[list[g0 + g]], node[g]);
        inner |= next != node[g];
        node[g] = next;
      }
      if (!inner)
        break;
    }
    for (uint32_t g = 0; g < gn; g++)
      start[list[g0 + g]] = hicp__kd_leaf_best(view, wv->q[list[g0 + g]], node[g]);
  }
}

/* Begins the walks 0 .. n-1 of *wv (queries in wv->q) by `method`, walk
 * k from the previous match prev[k]: the kd descents among the starts go
 * in step (hicp__cpu_descend), the others by hicp__nn_start. */
static inline void hicp__cpu_wave_begin(const hicp__mview *view, hicp__cpu_wave *wv,
                                        uint32_t n, int method, const uint32_t *prev, int cert)
{
  uint32_t start[HICP_CPU_WAVE], nkd = 0;
  uint16_t kd[HICP_CPU_WAVE];
  for (uint32_t k = 0; k < n; k++) {
    if (hicp__nn_start_descends(view, method, prev[k]))
      kd[nkd++] = (uint16_t)k;
    else
      start[k] = hicp__nn_start(view, wv->q[k], method, prev[k]);
  }
  if (nkd > 0)
    hicp__cpu_descend(view, wv, kd, nkd, start);
  for (uint32_t k = 0; k < n; k++)
    hicp__walk_begin(view, wv->q[k], start[k], cert, &wv->w[k]);
}

/* A HICP_CPU_WAVE_WALKS function. */
typedef void (*hicp__walks_fn)(const hicp__mview *view, hicp__cpu_wave *wv, uint32_t n);

/* Begins the n walks of *wv (hicp__cpu_wave_begin: a front that begins
 * none, as in a first pass) and runs them with `walks`.  Out of line:
 * inlined into the chunk functions, E1 ran 1-2% slower (when it also
 * chose the anchors' starts, which the start table replaced). */
static __attribute__((noinline, unused)) void
hicp__cpu_wave_run(const hicp__mview *view, hicp__cpu_wave *wv, uint32_t n, int method,
                   const uint32_t *prev, int cert, hicp__walks_fn walks)
{
  hicp__cpu_wave_begin(view, wv, n, method, prev, cert);
  walks(view, wv, n);
}

/* Pass A's points in blocks of HICP_CPU_BLOCK, aligned on their index: a
 * piece of pass A is whole blocks (cpu/segments.h), the last one cut at
 * the end of the points. */
#define HICP_CPU_BLOCK 64u

/* Where a block's walks are listed before they run: walk k is for point
 * at[k], with the transformed point (qx[k], qy[k], qz[k]) (double), its
 * query (in the wave) and the point's previous match prev[k].  By
 * coordinate, so that the vector fronts list their walks with whole
 * vector stores and the back loads four walks' points. */
typedef struct hicp__cpu_todo {
  /* 8 more each: the vector fronts store whole vectors past the last
   * walk (four lanes with AVX2, eight with AVX-512) */
  uint32_t at[HICP_CPU_WAVE + 8], prev[HICP_CPU_WAVE + 8];
  double qx[HICP_CPU_WAVE + 8], qy[HICP_CPU_WAVE + 8], qz[HICP_CPU_WAVE + 8];
} hicp__cpu_todo;

/* The front of a block of pass A, points i0 .. end-1 (at most
 * HICP_CPU_WAVE): applies T, answers at once the points whose certificate
 * holds (hicp__track_keep: match kept, e2 stored, counted in *w), and lists
 * the others' walks in *td and wv->q.  Returns how many walks.  The
 * reference; cpu/ends_simd.h has AVX-512 and AVX2 ones, eight and four
 * points at a time, that give the same bits. */
static inline uint32_t hicp__cpu_front(const hicp__mview *view, hicp__frame *f,
                                       const hicp__xf *T, int method, uint32_t i0, uint32_t end,
                                       hicp__cpu_wave *wv, hicp__cpu_todo *td, hicp__walkpart *w,
                                       uint32_t *nscan)
{
  (void)nscan; /* the walks begin in hicp__cpu_wave_run */
  uint32_t n = 0;
  for (uint32_t i = i0; i < end; i++) {
    hicp__nn_res r;
    double qd[3];
    hicp__cpu_point(T, f, i, qd, wv->q[n]);
    if (hicp__track_keep(view, wv->q[n], method, f->match[i], &f->track[i], &r)) {
      hicp__cpu_done(view, f, i, qd, &r, w);
    } else {
      td->qx[n] = qd[0];
      td->qy[n] = qd[1];
      td->qz[n] = qd[2];
      td->prev[n] = f->match[i];
      td->at[n++] = i;
    }
  }
  return n;
}

/* The back of a block of pass A, walks k0 .. k1-1 of the wave *wv, run:
 * each answer, its certificate (with `cert`) and its point's match, e2
 * and walk statistics.  The reference; cpu/ends_simd.h has AVX-512 and AVX2
 * ones. */
static inline void hicp__cpu_back(const hicp__mview *view, hicp__frame *f, int cert,
                                  const hicp__cpu_wave *wv, const hicp__cpu_todo *td, uint32_t k0,
                                  uint32_t k1, hicp__walkpart *w)
{
  for (uint32_t k = k0; k < k1; k++) {
    hicp__nn_res r;
    hicp__cpu_wave_answer(view, wv, k, &r);
    hicp__track_update(view, wv->q[k], cert, &r, &f->track[td->at[k]]);
    const double qd[3] = {td->qx[k], td->qy[k], td->qz[k]};
    hicp__cpu_done(view, f, td->at[k], qd, &r, w);
  }
}

/* Defines `static void NAME(view, f, T, method, i0, i1, w)`: for points
 * i0 .. i1-1 (at most HICP_CPU_WAVE), apply T, find the nearest vertex (the
 * answer and certificate of hicp__nn_track, SUFFIX variant; WALKS a
 * HICP_CPU_WAVE_WALKS function of the same row scan), store match and e2,
 * and add the walk statistics to *w.  The points whose certificate holds
 * are done at once (FRONT: hicp__cpu_front or a vector one); the others'
 * walks run as one wave, and BACK (hicp__cpu_back or a vector one) stores
 * their answers.  Methods without walks (brute, kdtree) and models
 * without a graph go one point at a time. */
#define HICP_CPU_CHUNK_CORRESPOND(NAME, SUFFIX, FRONT, WALKS, BACK, ATTR)                     \
  ATTR static void NAME(const hicp__mview *view, hicp__frame *f, const hicp__xf *T,           \
                        int method, uint32_t i0, uint32_t end, hicp__walkpart *w)             \
  {                                                                                           \
    if (view->row == NULL || method == 1 || method == 2) {                                    \
      for (uint32_t i = i0; i < end; i++) {                                                   \
        double qd[3];                                                                         \
        float q[3];                                                                           \
        hicp__cpu_point(T, f, i, qd, q);                                                      \
        hicp__nn_res r = hicp__nn_track##SUFFIX(view, q, method, f->match[i], &f->track[i]);  \
        hicp__cpu_done(view, f, i, qd, &r, w);                                                \
      }                                                                                       \
      return;                                                                                 \
    }                                                                                         \
    const int cert = hicp__track_cert(method);                                                \
    hicp__cpu_wave wv;                                                                        \
    hicp__cpu_todo td;                                                                        \
    uint32_t nscan = UINT32_MAX; /* set by a front that begins the walks */                \
    const uint32_t n = FRONT(view, f, T, method, i0, end, &wv, &td, w, &nscan);               \
    if (n == 0)                                                                               \
      return;                                                                                 \
    if (nscan != UINT32_MAX) {                                                                \
      WALKS##_scans(view, &wv, nscan);                                                        \
    } else {                                                                                  \
      hicp__cpu_wave_run(view, &wv, n, method, td.prev, cert, WALKS);                         \
    }                                                                                         \
    BACK(view, f, cert, &wv, &td, 0, n, w);                                                   \
  }

typedef void (*hicp__chunk_fn)(const hicp__mview *view, hicp__frame *f, const hicp__xf *T,
                               int method, uint32_t i0, uint32_t i1, hicp__walkpart *w);

/* Defines `static void NAME(view, method, n, q, prev, res)`: res[i] =
 * hicp__nn_query (SUFFIX variant) of the query at q[3i] with previous match
 * prev[i], for n <= HICP_CPU_WAVE queries, the walks as one wave (WALKS). */
#define HICP_CPU_QUERY_BLOCK(NAME, SUFFIX, WALKS, ATTR)                                       \
  ATTR static void NAME(const hicp__mview *view, int method, uint32_t n, const float *q,      \
                        const uint32_t *prev, hicp__nn_res *res)                              \
  {                                                                                           \
    if (view->row == NULL || method == 1 || method == 2) {                                    \
      for (uint32_t i = 0; i < n; i++)                                                        \
        res[i] = hicp__nn_query##SUFFIX(view, &q[3 * (size_t)i], method, prev[i]);            \
      return;                                                                                 \
    }                                                                                         \
    hicp__cpu_wave wv;                                                                        \
    memcpy(wv.q, q, sizeof wv.q[0] * n);                                                      \
    hicp__cpu_wave_begin(view, &wv, n, method, prev, 0);                                      \
    WALKS(view, &wv, n);                                                                      \
    for (uint32_t k = 0; k < n; k++)                                                          \
      hicp__cpu_wave_answer(view, &wv, k, &res[k]);                                           \
  }

/* A block of queries (a HICP_CPU_QUERY_BLOCK function). */
typedef void (*hicp__query_fn)(const hicp__mview *view, int method, uint32_t n, const float *q,
                               const uint32_t *prev, hicp__nn_res *res);

/* A row scan (hicp__row_scan or a vector variant). */
typedef void (*hicp__row_fn)(const hicp__mview *view, const float q[3], uint32_t cur, float dcur,
                             int cert, hicp__row *o);

/* The row scan of the walks of hicp__cpu_simd_chunk and hicp__cpu_simd_query
 * (walk_simd.c; the tests compare it with whole rows). */
hicp__row_fn hicp__cpu_simd_row(const hicp__mview *view);

/* The rows a paired scan takes: HICP_CPU_PAIR_MIN to HICP_CPU_PAIR_MAX
 * neighbours (a row read whole in steps of eight). */
#define HICP_CPU_PAIR_MIN 8u
#define HICP_CPU_PAIR_MAX 32u

/* Two rows scanned at once, each as a hicp__row_fn would (rows of
 * HICP_CPU_PAIR_MIN to HICP_CPU_PAIR_MAX neighbours). */
typedef void (*hicp__row2_fn)(const hicp__mview *view, const float qa[3], uint32_t cura,
                              float dcura, int certa, hicp__row *oa, const float qb[3],
                              uint32_t curb, float dcurb, int certb, hicp__row *ob);

/* The paired row scan of hicp__cpu_simd_chunk's walks, or NULL where they
 * scan one row at a time (walk_simd.c; the tests compare it with whole
 * rows). */
hicp__row2_fn hicp__cpu_simd_row2(const hicp__mview *view);

/* The fastest query block function this CPU supports (walk_simd.c). */
hicp__query_fn hicp__cpu_simd_query(const hicp__mview *view);

/* The fastest chunk function this CPU supports (walk_simd.c; see
 * hicp__cpu_isa). */
hicp__chunk_fn hicp__cpu_simd_chunk(const hicp__mview *view);

/* hicp__cpu_isa (lib/icp.h) picks the variant: 0 scalar, 1 AVX2, 2 AVX-512F,
 * 3 AVX-512F fronts and sums with the AVX2 walks. */

/* One chunk's partial sums (a hicp__chunk_sum variant). */
typedef void (*hicp__sum_fn)(const hicp__mview *view, const hicp__frame *f,
                             const hicp__select *sel, uint32_t c, hicp__partial *out);

/* The fastest chunk sum this CPU supports (sum_simd.c); every variant gives
 * hicp__chunk_sum's bits. */
hicp__sum_fn hicp__cpu_simd_sum(void);

#endif /* HICP_CPU_CHUNK_H */
