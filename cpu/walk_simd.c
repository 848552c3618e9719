/* walk_simd.c: the Delaunay walk's row scan with AVX2 and AVX-512 on x86-64,
 * chosen at run time.  The row scan here, and the fronts and backs of
 * ends_simd.h, are what differ from the reference walk (lib/pp/nn.h, which
 * the GPU runs with its own row scan, hicp__row_scan4).  A vector scan may read more of a row
 * than the reference (rows of up to 32 neighbours whole, past the
 * length-code cut; the AVX2 scan reads a row's last eight again) and tests
 * a certifying scan's early stop at other points, but a neighbour past the
 * cut can be neither nearer nor tied, each distance is computed with the
 * same float operations in the same order (separate multiply and add
 * instructions, no fused multiply-add), and where the walk goes on, the
 * row's smallest (distance, index) is the same lexicographic minimum.  So
 * every step, answer and certificate equals the reference bit for bit.  (A
 * row with no neighbour within the tie bound ends the walk, and there a
 * vector scan leaves `next` as HICP_NONE: which neighbour is nearest does
 * not matter.)  The tests run all variants (HICP_SIMD).  Pass
 * A's blocks and the query blocks are instantiated here for each variant,
 * with the vector fronts and backs of ends_simd.h. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "envnames.h"
#include "pp/nn.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HICP_X86 1

#define AVX512 __attribute__((target("avx512f")))
#define AVX2 __attribute__((target("avx2")))
/* AVX2 code with AVX-512VL's 32 vector registers (row_scan2_avx2) */
#define AVX512VL __attribute__((target("avx2,avx512f,avx512vl")))

#include "vtx_simd.h"

/* The end of the scanned part of a row: codes are sorted, so it is the
 * first code >= cut, found 16 codes at a time (SSE2).  The code array has
 * 16 bytes of padding after its end (model_build.c, model_file.c). */
static inline uint32_t row_end(const hicp__mview *m, uint32_t b, uint32_t end, uint32_t cut)
{
  if (cut >= 256)
    return end;
  if (cut == 0)
    return b;
  const __m128i lim = _mm_set1_epi8((char)(cut - 1));
  uint32_t e = b;
  while (e < end) {
    const __m128i c = _mm_loadu_si128((const __m128i *)(m->ecode + e));
    unsigned below = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(c, lim), c));
    unsigned stop = ~below; /* bit k: code[e + k] >= cut */
    if (stop != 0) {
      uint32_t k = (uint32_t)__builtin_ctz(stop);
      if (k < 16)
        return e + k < end ? e + k : end;
    }
    e += 16;
  }
  return end;
}

/* Plain row scans read rows of up to this many neighbours whole, without
 * the cut (hicp__row_cut), in both vector variants.  Nearly every row is
 * this short (the mean is about 16), and for them the cut's square root,
 * division and code search, which stand between the row and the loop's
 * bound, cost more than the neighbours they skip (E1, with the AVX2 scan
 * 6-10%, the AVX-512 one 1-1.5% on Zen 4: docs/cpu-engine.md, "Plain row scans
 * whole up to 32 neighbours").  Longer rows (flat CAD faces reach
 * thousands) keep it.  Neighbours past the cut are neither nearer nor
 * near-ties, so the walk takes the same step either way. */
#define HICP_SCAN_WHOLE 32u

/* The neighbours of `cur` that can matter (all of them with `cert`), 16 at
 * a time.  Inlined into the waves: its setup (constants, broadcasts) then
 * leaves the loop, and a call costs a sixth of a typical scan's
 * instructions (E1 bunny00 one thread 28.8 -> 28.4 ms, boeing 2.19 -> 2.13
 * on the Intel VM).  The AVX2 scan is inlined too (see there). */
AVX512 static inline __attribute__((always_inline)) void
row_scan_avx512(const hicp__mview *m, const float q[3], uint32_t cur, float dcur, int cert,
                hicp__row *o)
{
  const uint32_t b = m->row[cur], end = m->row[cur + 1];
  const uint32_t e = cert || end - b <= HICP_SCAN_WHOLE
                         ? end
                         : row_end(m, b, end, hicp__row_cut(m, cur, dcur));
  const __m512 qx = _mm512_set1_ps(q[0]), qy = _mm512_set1_ps(q[1]), qz = _mm512_set1_ps(q[2]);
  const __m512 bound = _mm512_set1_ps(hicp__tie_bound(dcur));
  const float *base = &m->vtx[0].x;
  const hicp__vtx *v = &m->vtx[cur];
  const __m512 vx = _mm512_set1_ps(v->x), vy = _mm512_set1_ps(v->y), vz = _mm512_set1_ps(v->z);
  /* hicp__bisector's margins (lib/pp/nn.h) */
  const __m512 dv = _mm512_set1_ps(dcur), margin = _mm512_set1_ps(HICP_BISECT_REL);
  const __m512 tiny1 = _mm512_set1_ps(HICP_BISECT_RMIN), tiny4 = _mm512_set1_ps(HICP_BISECT_ABS);
  const __m512 tiny64 = _mm512_set1_ps(HICP_BISECT_L2MIN);
  __m512 best_d = _mm512_set1_ps(HICP_FLT_INF);
  __m512 rmin = _mm512_set1_ps(HICP_FLT_INF), l2min = _mm512_set1_ps(HICP_FLT_INF);
  __m512i best_u = _mm512_set1_epi32(-1);
  __mmask16 ties = 0;
  /* the early stop's sqrt(T), computed while the first step's gathers are
   * on their way rather than after them (as in row_scan_avx2) */
  const float sroot = cert ? HICP_SQRTF(hicp__tie_bound(dcur)) : 0.0f;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  for (uint32_t k = b; k < e; k += 16) {
    const uint32_t cnt = e - k;
    const __mmask16 mk = cnt >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << cnt) - 1u);
    const __m512i u = _mm512_maskz_loadu_epi32(mk, m->nbr + k);
    const __m512i off = _mm512_slli_epi32(u, 2); /* 4 floats per vertex record */
    const __m512 zero = _mm512_setzero_ps();
    /* x and y together as 64-bit pairs (two gathers of 8, in 16-byte
     * records: index 2u, scale 8), then split: a third fewer loads than a
     * gather per coordinate */
    const __m512i u2 = _mm512_slli_epi32(u, 1);
    const __m512 xy0 = _mm512_castsi512_ps(_mm512_mask_i32gather_epi64(
        _mm512_setzero_si512(), (__mmask8)mk, _mm512_castsi512_si256(u2), base, 8));
    const __m512 xy1 = _mm512_castsi512_ps(_mm512_mask_i32gather_epi64(
        _mm512_setzero_si512(), (__mmask8)(mk >> 8), _mm512_extracti64x4_epi64(u2, 1), base, 8));
    const __m512 x = _mm512_permutex2var_ps(xy0, even, xy1);
    const __m512 y = _mm512_permutex2var_ps(xy0, odd, xy1);
    const __m512 z = _mm512_mask_i32gather_ps(zero, mk, off, base + 2, 4);
    const __m512 dx = _mm512_sub_ps(qx, x), dy = _mm512_sub_ps(qy, y), dz = _mm512_sub_ps(qz, z);
    const __m512 d = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(dx, dx), _mm512_mul_ps(dy, dy)),
                                   _mm512_mul_ps(dz, dz));
    const __mmask16 lt = _mm512_mask_cmp_ps_mask(mk, d, best_d, _CMP_LT_OQ);
    const __mmask16 eq = _mm512_mask_cmp_ps_mask(mk, d, best_d, _CMP_EQ_OQ) &
                         _mm512_cmplt_epu32_mask(u, best_u);
    const __mmask16 better = lt | eq;
    best_d = _mm512_mask_mov_ps(best_d, better, d);
    best_u = _mm512_mask_mov_epi32(best_u, better, u);
    ties |= _mm512_mask_cmp_ps_mask(mk, d, bound, _CMP_LE_OQ);
    if (cert) { /* hicp__edge2 and hicp__bisector, lane by lane */
      const __m512 ex = _mm512_sub_ps(x, vx), ey = _mm512_sub_ps(y, vy), ez = _mm512_sub_ps(z, vz);
      const __m512 l2 = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(ex, ex), _mm512_mul_ps(ey, ey)),
                                      _mm512_mul_ps(ez, ez));
      const __m512 num = _mm512_sub_ps(
          _mm512_sub_ps(_mm512_sub_ps(d, dv), _mm512_mul_ps(margin, _mm512_add_ps(d, dv))), tiny4);
      const __mmask16 ok = _mm512_mask_cmp_ps_mask(mk, num, zero, _CMP_GT_OQ) &
                           _mm512_cmp_ps_mask(l2, tiny64, _CMP_GE_OQ);
      const __m512 q2 = _mm512_maskz_div_ps(ok, _mm512_mul_ps(num, num), l2);
      const __m512 r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(q2, tiny1, _CMP_GE_OQ), q2);
      rmin = _mm512_mask_min_ps(rmin, mk, r, rmin);
      l2min = _mm512_mask_min_ps(l2min, mk, l2, l2min);
      float thr_r, thr_l; /* the rest of the row may not matter */
      if (k + 16 < e &&
          hicp__cert_rest(m, cur, sroot, m->ecode[k + 16], &thr_r, &thr_l) &&
          _mm512_cmp_ps_mask(rmin, _mm512_set1_ps(thr_r), _CMP_LE_OQ) != 0 &&
          _mm512_cmp_ps_mask(l2min, _mm512_set1_ps(thr_l), _CMP_LE_OQ) != 0)
        break;
    }
  }
  o->near_tie = ties != 0;
  o->rmin = HICP_FLT_INF;
  o->l2min = HICP_FLT_INF;
  if (ties == 0) {
    /* No neighbour within the tie bound, so none nearer: the walk stops
     * here, and which neighbour is nearest does not matter.  Only such a
     * row's certificate is used (hicp__row), so only here is it reduced. */
    o->next = HICP_NONE;
    o->dnext = HICP_FLT_INF;
    if (cert) {
      o->rmin = _mm512_reduce_min_ps(rmin);
      o->l2min = _mm512_reduce_min_ps(l2min);
    }
    return;
  }
  const float dmin = _mm512_reduce_min_ps(best_d);
  const __mmask16 at = _mm512_cmp_ps_mask(best_d, _mm512_set1_ps(dmin), _CMP_EQ_OQ);
  o->next = (uint32_t)_mm512_mask_reduce_min_epu32(at, best_u);
  o->dnext = dmin;
}

/* Minimum of 8 floats (exact, so any order gives the same bits). */
AVX2 static inline float hmin_avx2(__m256 a)
{
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  m = _mm_min_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

/* What row_scan_avx2 carries from one step of eight neighbours to the
 * next: the row's constants and its running minima, lane by lane.  Whether
 * a neighbour is within the tie bound is read from best_d at the end (a
 * lane's minimum is at most the bound when one of its distances is). */
typedef struct scan_avx2 {
  __m256 qx, qy, qz, bound, vx, vy, vz, dv;
  __m256 best_d, rmin, l2min;
  __m256i best_u;
} scan_avx2;

/* The state of a scan of cur's row for the query q, dcur = hicp__d2(q,
 * cur). */
AVX2 static inline __attribute__((always_inline)) void
scan_begin_avx2(const hicp__mview *m, const float q[3], uint32_t cur, float dcur, scan_avx2 *s)
{
  const hicp__vtx *v = &m->vtx[cur];
  const __m256 inf = _mm256_set1_ps(HICP_FLT_INF);
  s->qx = _mm256_set1_ps(q[0]);
  s->qy = _mm256_set1_ps(q[1]);
  s->qz = _mm256_set1_ps(q[2]);
  s->bound = _mm256_set1_ps(hicp__tie_bound(dcur));
  s->vx = _mm256_set1_ps(v->x);
  s->vy = _mm256_set1_ps(v->y);
  s->vz = _mm256_set1_ps(v->z);
  s->dv = _mm256_set1_ps(dcur);
  s->best_d = inf;
  s->rmin = inf;
  s->l2min = inf;
  s->best_u = _mm256_set1_epi32(-1);
}

/* One step of row_scan_avx2: the neighbours nb[0 .. 7] (indices u), or with
 * `masked` those in the lanes of mk (the others hold vertex 0).  Each lane
 * keeps the lexicographic minimum (distance, index) of what it saw: a
 * smaller distance takes the lane, and an equal one (an exact tie, rare:
 * a branch taken almost never) the smaller index.  Without `masked` no lane
 * needs a mask: a row of eight or more is scanned in whole steps of eight,
 * its last one ending at the row's end and so seeing a few neighbours a
 * second time, which changes none of the minima.  With `again` a whole
 * step may be seen twice (row_scan2_avx2), where every lane ties with
 * itself: then the tie is taken without a branch. */
AVX2 static inline __attribute__((always_inline)) void
scan8_avx2(const hicp__mview *m, const uint32_t *nb, __m256i u, __m256 mk, int masked, int again,
           int cert, scan_avx2 *s)
{
  const __m256 inf = _mm256_set1_ps(HICP_FLT_INF);
  __m256 x, y, z;
  vtx8_avx2(m->vtx, nb, &x, &y, &z);
  const __m256 dx = _mm256_sub_ps(s->qx, x), dy = _mm256_sub_ps(s->qy, y);
  const __m256 dz = _mm256_sub_ps(s->qz, z);
  const __m256 d = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(dx, dx), _mm256_mul_ps(dy, dy)),
                                 _mm256_mul_ps(dz, dz));
  /* the lanes past the row: +inf, never nearer nor a tie */
  const __m256 dm = masked ? _mm256_blendv_ps(inf, d, mk) : d;
  const __m256 lt = _mm256_cmp_ps(dm, s->best_d, _CMP_LT_OQ);
  const __m256 eq = masked ? _mm256_and_ps(_mm256_cmp_ps(dm, s->best_d, _CMP_EQ_OQ), mk)
                           : _mm256_cmp_ps(dm, s->best_d, _CMP_EQ_OQ);
  if (again || _mm256_movemask_ps(eq) != 0)
    s->best_u = _mm256_castps_si256(_mm256_blendv_ps(
        _mm256_castsi256_ps(s->best_u), _mm256_castsi256_ps(_mm256_min_epu32(u, s->best_u)), eq));
  s->best_u = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(s->best_u), _mm256_castsi256_ps(u), lt));
  s->best_d = _mm256_min_ps(dm, s->best_d);
  if (cert) { /* hicp__edge2 and hicp__bisector, lane by lane */
    const __m256 zero = _mm256_setzero_ps();
    const __m256 ex = _mm256_sub_ps(x, s->vx), ey = _mm256_sub_ps(y, s->vy);
    const __m256 ez = _mm256_sub_ps(z, s->vz);
    const __m256 l2 = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(ex, ex), _mm256_mul_ps(ey, ey)),
                                    _mm256_mul_ps(ez, ez));
    const __m256 num = _mm256_sub_ps(
        _mm256_sub_ps(_mm256_sub_ps(d, s->dv),
                      _mm256_mul_ps(_mm256_set1_ps(HICP_BISECT_REL), _mm256_add_ps(d, s->dv))),
        _mm256_set1_ps(HICP_BISECT_ABS));
    const __m256 ok =
        _mm256_and_ps(_mm256_cmp_ps(num, zero, _CMP_GT_OQ),
                      _mm256_cmp_ps(l2, _mm256_set1_ps(HICP_BISECT_L2MIN), _CMP_GE_OQ));
    /* lanes not ok give 0 (the quotient there may be inf or NaN) */
    const __m256 q2 = _mm256_and_ps(_mm256_div_ps(_mm256_mul_ps(num, num), l2), ok);
    const __m256 r =
        _mm256_and_ps(q2, _mm256_cmp_ps(q2, _mm256_set1_ps(HICP_BISECT_RMIN), _CMP_GE_OQ));
    s->rmin = _mm256_min_ps(s->rmin, masked ? _mm256_blendv_ps(inf, r, mk) : r);
    s->l2min = _mm256_min_ps(s->l2min, masked ? _mm256_blendv_ps(inf, l2, mk) : l2);
  }
}

/* The result of a scan whose steps are done, into *o. */
AVX2 static inline __attribute__((always_inline)) void
scan_end_avx2(const scan_avx2 *s, int cert, hicp__row *o)
{
  o->near_tie = _mm256_movemask_ps(_mm256_cmp_ps(s->best_d, s->bound, _CMP_LE_OQ)) != 0;
  o->rmin = HICP_FLT_INF;
  o->l2min = HICP_FLT_INF;
  if (!o->near_tie) { /* as in row_scan_avx512 */
    o->next = HICP_NONE;
    o->dnext = HICP_FLT_INF;
    if (cert) {
      o->rmin = hmin_avx2(s->rmin);
      o->l2min = hmin_avx2(s->l2min);
    }
    return;
  }
  /* The lexicographic minimum across the lanes: the smallest distance,
   * then the smallest index among the lanes that hold it (as
   * row_scan_avx512 does with its reductions). */
  const float dmin = hmin_avx2(s->best_d);
  const __m256 at = _mm256_cmp_ps(s->best_d, _mm256_set1_ps(dmin), _CMP_EQ_OQ);
  const __m256i cand = _mm256_castps_si256(_mm256_blendv_ps(
      _mm256_castsi256_ps(_mm256_set1_epi32(-1)), _mm256_castsi256_ps(s->best_u), at));
  __m128i um = _mm_min_epu32(_mm256_castsi256_si128(cand), _mm256_extracti128_si256(cand, 1));
  um = _mm_min_epu32(um, _mm_shuffle_epi32(um, _MM_SHUFFLE(1, 0, 3, 2)));
  um = _mm_min_epu32(um, _mm_shuffle_epi32(um, _MM_SHUFFLE(2, 3, 0, 1)));
  o->next = (uint32_t)_mm_cvtsi128_si32(um);
  o->dnext = dmin;
}

/* The same, 8 at a time.  Inlined into the waves like the AVX-512 scan.
 * While it gathered it ran 3% slower inlined (Intel VM); since it loads
 * whole vertex records (vtx_simd.h), inlining pays a little on Zen 3
 * (E1 one thread, 16 alternated rounds, pair by pair: boeing x0.977,
 * ChineseDragon-10kv x0.960, bunny00 x0.966; docs/cpu-engine.md).  A row of
 * eight or more goes in whole steps of eight without masks (scan8_avx2),
 * and each lane keeps its minimum with one compare and one blend, an exact
 * tie taking a branch: 6% less time on E1's bunny00 and ChineseDragon-10kv
 * cases and 3% on boeing (one thread, 40 alternated rounds, pair by pair). */
AVX2 static inline __attribute__((always_inline)) void
row_scan_avx2(const hicp__mview *m, const float q[3], uint32_t cur, float dcur, int cert,
              hicp__row *o)
{
  const uint32_t b = m->row[cur], end = m->row[cur + 1];
  const uint32_t e = cert || end - b <= HICP_SCAN_WHOLE
                         ? end
                         : row_end(m, b, end, hicp__row_cut(m, cur, dcur));
  const __m256 inf = _mm256_set1_ps(HICP_FLT_INF);
  scan_avx2 s;
  scan_begin_avx2(m, q, cur, dcur, &s);
  /* the early stop's sqrt(T), computed while the first step's loads are
   * on their way rather than after them */
  const float sroot = cert ? HICP_SQRTF(hicp__tie_bound(dcur)) : 0.0f;
  if (e - b >= 8) {
    for (uint32_t k = b;;) {
      scan8_avx2(m, m->nbr + k, _mm256_loadu_si256((const __m256i *)(m->nbr + k)), inf, 0, 0,
                 cert, &s);
      if (k + 8 >= e)
        break;
      /* The early stop (as in row_scan_avx512), only when more than one
       * step remains: a row of 9-16 takes its two steps without the
       * test's loads and branches, which cost more than a step here
       * (docs/cpu-engine.md, stop 32) */
      float thr_r, thr_l;
      if (cert && k + 16 < e &&
          hicp__cert_rest(m, cur, sroot, m->ecode[k + 8], &thr_r, &thr_l) &&
          _mm256_movemask_ps(_mm256_cmp_ps(s.rmin, _mm256_set1_ps(thr_r), _CMP_LE_OQ)) != 0 &&
          _mm256_movemask_ps(_mm256_cmp_ps(s.l2min, _mm256_set1_ps(thr_l), _CMP_LE_OQ)) != 0)
        break;
      k = k + 16 <= e ? k + 8 : e - 8; /* the last step ends at the row's end */
    }
  } else if (e > b) {
    /* fewer than eight: one step, its indices from a masked load (vertex 0
     * in the lanes past the row, which mk leaves out): nbr has no padding */
    const __m256i mki = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(e - b)),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i u = _mm256_maskload_epi32((const int *)(m->nbr + b), mki);
    uint32_t idx[8];
    _mm256_storeu_si256((__m256i *)idx, u);
    scan8_avx2(m, idx, u, _mm256_castsi256_ps(mki), 1, 0, cert, &s);
  }
  scan_end_avx2(&s, cert, o);
}

/* Rows of HICP_CPU_PAIR_MIN to HICP_CPU_PAIR_MAX neighbours (cpu/chunk.h)
 * go into row_scan2_avx2: at least one whole step of eight, and no longer
 * than the plain scan reads whole (so neither scan has a length cut). */
_Static_assert(HICP_CPU_PAIR_MIN == 8u && HICP_CPU_PAIR_MAX <= HICP_SCAN_WHOLE, "pair rows");

static inline int pair_fits(const hicp__mview *m, const hicp__walk *w)
{
  return m->row[w->cur + 1] - m->row[w->cur] - HICP_CPU_PAIR_MIN <=
         HICP_CPU_PAIR_MAX - HICP_CPU_PAIR_MIN;
}

/* Two walks' row scans at once, for the AVX-512 machines' eight-lane walks
 * (avx512-scan8), whose 32 vector registers hold both scans' state.
 *
 * Why: a row scan ends in branches on its data (how many steps its row
 * takes; whether a neighbour is nearer, the walk's coin toss), and the
 * core mispredicts about one per scan.  Each misprediction discards the
 * next scan's work that was begun behind it, so one walk's scans wait on
 * another's.  Scanned together, two walks' loads and arithmetic are in
 * flight before either's branches: E1's bunny00 4% faster,
 * ChineseDragon-10kv and fandisk_large 2.5% on one thread
 * (docs/cpu-engine.md, "Two walks' row scans at once").  With 16 registers
 * (AVX2 alone) the two states spill and nothing is gained; three walks
 * spill even with 32.
 *
 * Both rows have HICP_CPU_PAIR_MIN to HICP_CPU_PAIR_MAX neighbours
 * (pair_fits), read whole, in steps of eight as row_scan_avx2 reads them;
 * the shorter row's last step is repeated while the longer one's go on (a
 * step seen twice changes none of the minima: scan8_avx2's `again`), so
 * the pair takes one loop and one loop exit.  Whole rows: the certifying
 * scans' early stop, which would end the two walks' loops at different
 * steps, is left out (it changes where a scan stops, never its result).
 * Each result is row_scan_avx2's, bit for bit (tests/test_nn.c). */
AVX512VL static inline __attribute__((always_inline)) void
row_scan2_avx2(const hicp__mview *m, const float qa[3], uint32_t cura, float dcura, int certa,
               hicp__row *oa, const float qb[3], uint32_t curb, float dcurb, int certb,
               hicp__row *ob)
{
  const uint32_t ba = m->row[cura], ea = m->row[cura + 1] - 8u;
  const uint32_t bb = m->row[curb], eb = m->row[curb + 1] - 8u;
  const __m256 inf = _mm256_set1_ps(HICP_FLT_INF);
  scan_avx2 sa, sb;
  scan_begin_avx2(m, qa, cura, dcura, &sa);
  scan_begin_avx2(m, qb, curb, dcurb, &sb);
  /* steps: ceil(length / 8) each, the last one ending at the row's end */
  const uint32_t na = (ea - ba + 15u) / 8u, nb = (eb - bb + 15u) / 8u;
  const uint32_t n = na > nb ? na : nb;
  for (uint32_t t = 0; t < n; t++) {
    const uint32_t ka = ba + 8u * t < ea ? ba + 8u * t : ea;
    const uint32_t kb = bb + 8u * t < eb ? bb + 8u * t : eb;
    scan8_avx2(m, m->nbr + ka, _mm256_loadu_si256((const __m256i *)(m->nbr + ka)), inf, 0, 1,
               certa, &sa);
    scan8_avx2(m, m->nbr + kb, _mm256_loadu_si256((const __m256i *)(m->nbr + kb)), inf, 0, 1,
               certb, &sb);
  }
  scan_end_avx2(&sa, certa, oa);
  scan_end_avx2(&sb, certb, ob);
}

/* Walk k's step alone: its row scan, or at a hub hicp__cpu_wave_hub (a
 * hub's row never fits a pair). */
AVX512VL static inline __attribute__((always_inline)) void
walk_alone(const hicp__mview *view, hicp__cpu_wave *wv, uint32_t k, uint32_t *nlive)
{
  const hicp__walk *w = &wv->w[k];
  if (__builtin_expect(hicp__walk_at_hub(view, w), 0)) {
    hicp__cpu_wave_hub(view, wv, k, nlive);
    return;
  }
  row_scan_avx2(view, wv->q[k], w->cur, w->dcur, w->cert, &wv->rs[k]);
  hicp__cpu_wave_after(wv, k, nlive);
}

/* The waves of HICP_CPU_WAVE_WALKS (cpu/chunk.h), small models, with the
 * row scans of consecutive walks in pairs where both rows fit
 * (row_scan2_avx2); the others, and an odd last one, go alone.  Written
 * as one loop that steps by one or two walks (a single scan inlined once,
 * not three times) it ran 2-3% slower (E1, one thread, 16 rounds). */
AVX512VL static void walks_avx2_pairs_scans(const hicp__mview *view, hicp__cpu_wave *wv,
                                            uint32_t nscan)
{
  for (;;) {
    uint32_t nlive = 0, j = 0;
    for (; j + 1 < nscan; j += 2) {
      hicp__cpu_wave_prefetch(view, wv, j, nscan, 0);
      hicp__cpu_wave_prefetch(view, wv, j + 1, nscan, 0);
      const uint32_t ka = wv->scan[j], kb = wv->scan[j + 1];
      const hicp__walk *wa = &wv->w[ka], *wb = &wv->w[kb];
      if (pair_fits(view, wa) && pair_fits(view, wb)) {
        row_scan2_avx2(view, wv->q[ka], wa->cur, wa->dcur, wa->cert, &wv->rs[ka], wv->q[kb],
                       wb->cur, wb->dcur, wb->cert, &wv->rs[kb]);
        hicp__cpu_wave_after(wv, ka, &nlive);
        hicp__cpu_wave_after(wv, kb, &nlive);
      } else {
        walk_alone(view, wv, ka, &nlive);
        walk_alone(view, wv, kb, &nlive);
      }
    }
    if (j < nscan)
      walk_alone(view, wv, wv->scan[j], &nlive);
    if (nlive == 0)
      return;
    nscan = hicp__cpu_wave_balls(view, wv, wv->live, nlive);
  }
}

AVX512VL static void walks_avx2_pairs(const hicp__mview *view, hicp__cpu_wave *wv, uint32_t n)
{
  walks_avx2_pairs_scans(view, wv, hicp__cpu_wave_balls(view, wv, NULL, n));
}

/* For the tests: row_scan2_avx2 out of line. */
AVX512VL static void row_scan2_tested(const hicp__mview *m, const float qa[3], uint32_t cura,
                                      float dcura, int certa, hicp__row *oa, const float qb[3],
                                      uint32_t curb, float dcurb, int certb, hicp__row *ob)
{
  row_scan2_avx2(m, qa, cura, dcura, certa, oa, qb, curb, dcurb, certb, ob);
}

/* The fronts and the back of pass A's blocks (front_avx512, front_avx2,
 * back_avx2). */
#include "ends_simd.h"

HICP_NN_FUNCTIONS(_avx512, row_scan_avx512, AVX512)
HICP_NN_FUNCTIONS(_avx2, row_scan_avx2, AVX2)
HICP_CPU_WAVE_WALKS(walks_avx512, row_scan_avx512, AVX512, 0)
HICP_CPU_WAVE_WALKS(walks_avx2, row_scan_avx2, AVX2, 0)
HICP_CPU_CHUNK_CORRESPOND(chunk_avx512, _avx512, front_avx512, walks_avx512, back_avx2, AVX512)
HICP_CPU_CHUNK_CORRESPOND(chunk_avx2, _avx2, front_avx2, walks_avx2, back_avx2, AVX2)

HICP_CPU_QUERY_BLOCK(query_avx512, _avx512, walks_avx512, AVX512)
HICP_CPU_QUERY_BLOCK(query_avx2, _avx2, walks_avx2, AVX2)

/* The same for models of more than HICP_CPU_BIG_NV vertices, with the
 * prefetches that pay only where the model is not in the caches */
HICP_CPU_WAVE_WALKS(walks_avx512_big, row_scan_avx512, AVX512, 1)
HICP_CPU_WAVE_WALKS(walks_avx2_big, row_scan_avx2, AVX2, 1)
HICP_CPU_CHUNK_CORRESPOND(chunk_avx512_big, _avx512, front_avx512_big, walks_avx512_big,
                          back_avx2, AVX512)
HICP_CPU_CHUNK_CORRESPOND(chunk_avx2_big, _avx2, front_avx2_big, walks_avx2_big, back_avx2, AVX2)

HICP_CPU_QUERY_BLOCK(query_avx512_big, _avx512, walks_avx512_big, AVX512)
HICP_CPU_QUERY_BLOCK(query_avx2_big, _avx2, walks_avx2_big, AVX2)

/* "avx512-scan8", the default on AMD's cores with AVX-512: the AVX-512
 * fronts (and sums, sum_simd.c) with the AVX2 walks and back, whose row
 * scans load eight vertex records and transpose them where the AVX-512
 * ones gather sixteen (gathers are microcoded on Zen 4; docs/cpu-engine.md,
 * stop 34), on small models two walks' scans at once (walks_avx2_pairs).
 * Its queries are the AVX2 variant's. */
HICP_CPU_CHUNK_CORRESPOND(chunk_avx512_scan8, _avx2, front_avx512, walks_avx2_pairs, back_avx2,
                          AVX512)
HICP_CPU_CHUNK_CORRESPOND(chunk_avx512_scan8_big, _avx2, front_avx512_big, walks_avx2_big,
                          back_avx2, AVX512)
#endif

/* The scalar walks call the reference row scan out of line, as the vector
 * walks do theirs: inlined into the wave loop it took 5-25% longer,
 * depending on small changes to its code. */
__attribute__((noinline)) static void row_scan_scalar(const hicp__mview *m, const float q[3],
                                                      uint32_t cur, float dcur, int cert,
                                                      hicp__row *o)
{
  hicp__row_scan(m, q, cur, dcur, cert, o);
}

HICP_CPU_WAVE_WALKS(walks_scalar, row_scan_scalar, , 0)
HICP_CPU_CHUNK_CORRESPOND(chunk_scalar, , hicp__cpu_front, walks_scalar, hicp__cpu_back, )
HICP_CPU_QUERY_BLOCK(query_scalar, , walks_scalar, )

int hicp__cpu_isa(void)
{
#if defined(HICP_X86)
  const int avx2 = __builtin_cpu_supports("avx2") != 0;
  const int avx512 = avx2 && __builtin_cpu_supports("avx512f") != 0;
  /* avx512-scan8's paired scans use AVX-512VL's 32 vector registers */
  const int avx512vl = avx512 && __builtin_cpu_supports("avx512vl") != 0;
  const char *force = getenv("HICP_SIMD");
  switch (force != NULL ? hicp__env_index(hicp__simd_names, force) : -1) {
  case 0: return 0;
  case 1: return avx2;
  case 2: return avx512 ? 2 : avx2;
  case 3: return avx512vl ? 3 : avx2;
  default: break; /* unset or unknown: the default below */
  }
  /* On AMD's cores with AVX-512 (Zen 4) the AVX-512 row scans' gathers are
   * microcoded: there the AVX-512 fronts and sums run with the AVX2 walks,
   * 5-8% faster on E1 than the AVX2 variant, which was the default there
   * until then (docs/cpu-engine.md, "AVX-512 fronts with eight-lane scans"). */
  if (avx512)
    return __builtin_cpu_is("amd") && avx512vl ? 3 : 2;
  return avx2;
#endif
  return 0;
}

/* The walk variants, by hicp__cpu_isa's level; query_big and chunk_big
 * for models of more than HICP_CPU_BIG_NV vertices (the scalar reference
 * has one variant for all). */
static const struct {
  hicp__query_fn query, query_big;
  hicp__chunk_fn chunk, chunk_big;
  hicp__row_fn row;
} variants[] = {
    {query_scalar, query_scalar, chunk_scalar, chunk_scalar, row_scan_scalar},
#if defined(HICP_X86)
    {query_avx2, query_avx2_big, chunk_avx2, chunk_avx2_big, row_scan_avx2},
    {query_avx512, query_avx512_big, chunk_avx512, chunk_avx512_big, row_scan_avx512},
    {query_avx2, query_avx2_big, chunk_avx512_scan8, chunk_avx512_scan8_big, row_scan_avx2},
#endif
};

/* Which walk variant: 0 for scalar, else hicp__cpu_isa's level.  (The
 * gathers index floats with 32-bit offsets, 4 per vertex: hence the
 * vertex limit.) */
static int simd_level(const hicp__mview *view)
{
  if (view->row == NULL || view->nv >= (1u << 29))
    return 0;
  return hicp__cpu_isa();
}

/* Whether the model takes the large-model variants (query_big, chunk_big). */
static int big_model(const hicp__mview *view)
{
  return view->nv > HICP_CPU_BIG_NV;
}

hicp__query_fn hicp__cpu_simd_query(const hicp__mview *view)
{
  const int v = simd_level(view);
  return big_model(view) ? variants[v].query_big : variants[v].query;
}

hicp__row_fn hicp__cpu_simd_row(const hicp__mview *view)
{
  return variants[simd_level(view)].row;
}

hicp__row2_fn hicp__cpu_simd_row2(const hicp__mview *view)
{
#if defined(HICP_X86)
  if (simd_level(view) == 3 && !big_model(view))
    return row_scan2_tested;
#else
  (void)view;
#endif
  return NULL;
}

hicp__chunk_fn hicp__cpu_simd_chunk(const hicp__mview *view)
{
  const int v = simd_level(view);
  return big_model(view) ? variants[v].chunk_big : variants[v].chunk;
}
