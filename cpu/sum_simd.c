/* sum_simd.c: a chunk's partial sums (hicp__chunk_sum in cpu_backend.c, the
 * reference) with AVX2 and AVX-512, several lanes of the fixed shape at once.
 *
 * The shape (pp/reduce.h): lane l sums the points base + l + 256 j in order
 * of j, then the 256 lanes are combined by the halving tree.  Lanes l .. l+W-1
 * (W = 4 or 8 doubles) read W consecutive points (their coordinates from
 * the frame's copy by coordinate, p0s: loads, not gathers), so a vector
 * holds W lanes, one per element, and every element goes through the same
 * additions in the same order as its scalar lane: the same bits.  A lane that skips a point
 * (the point is past the chunk's end, or the filters drop it) keeps its
 * value through a masked add, as the scalar code skips the addition.  The
 * tree's first steps pair lanes 128, 64, .., W apart, which are whole
 * vectors W apart (carried as the groups are summed, below); the last
 * log2(W) steps pair elements of one vector. */
#include "config.h"

#include <string.h>

#include "chunk.h"
#include "icp.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f")))
#define AVX2 __attribute__((target("avx2")))

#include "vtx_simd.h"

#define NF HICP_PF_COUNT

/* The lane tree of pp/reduce.h, pair for pair, once the group tree (lanes
 * 128 .. W apart, whole vectors: done by the caller with its vectors) has
 * left lanes 0 .. W-1 in g[field * W + element]: the last log2(W) steps
 * pair elements of one vector. */
static void lane_tree_tail(double *g, uint32_t w, hicp__partial *out)
{
  for (uint32_t s = w / 2; s >= 1; s /= 2)
    for (uint32_t fld = 0; fld < NF; fld++)
      for (uint32_t e = 0; e < s; e++)
        g[fld * w + e] = g[fld * w + e] + g[fld * w + e + s];
  for (uint32_t fld = 0; fld < NF; fld++)
    out->v[fld] = g[fld * w];
}

/* The group tree (the halving tree's steps that pair whole vectors) is
 * done as the groups are summed: the groups are taken in bit-reversed
 * order, and each finished group is added to the one waiting on its level,
 * carrying upwards as a binary counter does.  Group k of that order is
 * bitrev(k); the carries then pair exactly what the halving tree pairs
 * (groups NG/2 apart, then those sums NG/4 apart, ...), so the bits are
 * the same, with log2(NG) + 1 groups' sums held (9 KB for AVX-512) rather
 * than all NG of them (48 KB: L1's size, and read back again by a
 * separate tree). */
static inline uint32_t bitrev(uint32_t k, uint32_t bits)
{
  uint32_t r = 0;
  for (uint32_t b = 0; b < bits; b++)
    r |= ((k >> b) & 1u) << (bits - 1 - b);
  return r;
}

/* Floats p[0 .. 7] in the lanes of m (0 elsewhere), as doubles. */
AVX512 static inline __m512d load8(__mmask8 m, const float *p)
{
  return _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_maskz_loadu_ps((__mmask16)m, p)));
}

AVX512 static void chunk_sum_avx512(const hicp__mview *view, const hicp__frame *f,
                                    const hicp__select *sel, uint32_t c, hicp__partial *out)
{
  enum { W = 8, NG = HICP_LANES / W, LOG = 5 };
  _Static_assert(NG == 1 << LOG, "groups");
  __m512d st[LOG + 1][NF]; /* the group tree's sums waiting, by level */
  const uint32_t base = c * f->chunk;
  const uint32_t end = hicp__chunk_end(f, c);
  const __m512d one = _mm512_set1_pd(1.0), zero = _mm512_setzero_pd();
  const __m512d max_d2 = _mm512_set1_pd(sel->max_d2);
  const __m512d w_lo = _mm512_set1_pd(sel->w_lo), w_hi = _mm512_set1_pd(sel->w_hi);
  const __m512d e_lo = _mm512_set1_pd(sel->e_lo), e_hi = _mm512_set1_pd(sel->e_hi);
  const __m512d trim_e2 = _mm512_set1_pd(sel->trim_e2);
  /* the points' coordinates by coordinate (hicp__frame.p0s) */
  const float *ps = f->p0s;
  const size_t n = f->n;
  for (uint32_t k = 0; k < NG; k++) {
    const uint32_t grp = bitrev(k, LOG);
    __m512d a[NF];
#pragma GCC unroll 24
    for (int fld = 0; fld < NF; fld++)
      a[fld] = zero;
    for (uint32_t i = base + grp * W; i < end; i += HICP_LANES) {
      const uint32_t cnt = end - i;
      const __mmask8 m = cnt >= W ? (__mmask8)0xff : (__mmask8)((1u << cnt) - 1u);
      /* the matched vertices (vertex 0 in the lanes past the chunk):
       * whole records and a transpose, not gathers (vtx_simd.h) */
      uint32_t mt[8];
      const __m512i mt16 = _mm512_maskz_loadu_epi32((__mmask16)m, f->match + i);
      _mm256_storeu_si256((__m256i *)mt, _mm512_castsi512_si256(mt16));
      __m256 vx, vy, vz;
      vtx8_avx2(view->vtx, mt, &vx, &vy, &vz);
      const __m512d e2 = _mm512_maskz_loadu_pd(m, f->e2 + i);
      const __m512d px = load8(m, ps + i), py = load8(m, ps + n + i), pz = load8(m, ps + 2 * n + i);
      const __m512d yx = _mm512_maskz_cvtps_pd(m, vx);
      const __m512d yy = _mm512_maskz_cvtps_pd(m, vy);
      const __m512d yz = _mm512_maskz_cvtps_pd(m, vz);
      /* hicp__partial_add_pair, with masks for its branches */
      a[HICP_PF_N_ALL] = _mm512_mask_add_pd(a[HICP_PF_N_ALL], m, a[HICP_PF_N_ALL], one);
      a[HICP_PF_E2_ALL] = _mm512_mask_add_pd(a[HICP_PF_E2_ALL], m, a[HICP_PF_E2_ALL], e2);
      const __mmask8 cand = _mm512_mask_cmp_pd_mask(m, e2, max_d2, _CMP_LE_OQ);
      a[HICP_PF_N_C] = _mm512_mask_add_pd(a[HICP_PF_N_C], cand, a[HICP_PF_N_C], one);
      a[HICP_PF_E2_C] = _mm512_mask_add_pd(a[HICP_PF_E2_C], cand, a[HICP_PF_E2_C], e2);
      __m512d e = zero;
      if (sel->want_e) {
        e = _mm512_sqrt_pd(e2);
        const __mmask8 win = _mm512_mask_cmp_pd_mask(cand, e, w_lo, _CMP_GE_OQ) &
                             _mm512_cmp_pd_mask(e, w_hi, _CMP_LE_OQ);
        a[HICP_PF_N_W] = _mm512_mask_add_pd(a[HICP_PF_N_W], win, a[HICP_PF_N_W], one);
        a[HICP_PF_E_W] = _mm512_mask_add_pd(a[HICP_PF_E_W], win, a[HICP_PF_E_W], e);
        a[HICP_PF_E2_W] = _mm512_mask_add_pd(a[HICP_PF_E2_W], win, a[HICP_PF_E2_W], e2);
      }
      __mmask8 in = cand;
      if (sel->sigma_on) /* drop e < e_lo or e > e_hi: keep the exact negations */
        in &= _mm512_cmp_pd_mask(e, e_lo, _CMP_NLT_UQ) & _mm512_cmp_pd_mask(e, e_hi, _CMP_NGT_UQ);
      if (sel->trim_on)
        in &= _mm512_cmp_pd_mask(e2, trim_e2, _CMP_NGT_UQ);
      const __m512d add[NF - HICP_PF_N_IN] = {
          one, e2, px, py, pz, yx, yy, yz,
          _mm512_mul_pd(px, yx), _mm512_mul_pd(px, yy), _mm512_mul_pd(px, yz),
          _mm512_mul_pd(py, yx), _mm512_mul_pd(py, yy), _mm512_mul_pd(py, yz),
          _mm512_mul_pd(pz, yx), _mm512_mul_pd(pz, yy), _mm512_mul_pd(pz, yz)};
#pragma GCC unroll 24
      for (int fld = HICP_PF_N_IN; fld < NF; fld++)
        a[fld] = _mm512_mask_add_pd(a[fld], in, a[fld], add[fld - HICP_PF_N_IN]);
    }
    uint32_t lv = 0; /* lanes 128 .. 8 apart: carry */
    for (; (k >> lv) & 1u; lv++)
#pragma GCC unroll 24
      for (int fld = 0; fld < NF; fld++)
        a[fld] = _mm512_add_pd(st[lv][fld], a[fld]);
#pragma GCC unroll 24
    for (int fld = 0; fld < NF; fld++)
      st[lv][fld] = a[fld];
  }
  double g[NF * W] __attribute__((aligned(64)));
#pragma GCC unroll 24
  for (int fld = 0; fld < NF; fld++)
    _mm512_store_pd(&g[fld * W], st[LOG][fld]);
  lane_tree_tail(g, W, out);
}

/* a + x in the lanes of mask m, a elsewhere. */
AVX2 static inline __m256d mask_add(__m256d a, __m256d m, __m256d x)
{
  return _mm256_blendv_pd(a, _mm256_add_pd(a, x), m);
}

/* The fields sum_avx2 adds up in double, by its accumulator: those of
 * every selection, then the sigma filter's window (with want_e only).  The
 * counts (N_ALL, N_C, N_W, N_IN) are sums of 1.0: exact whole numbers in
 * any order (a chunk has at most 65,536 points), so they are counted as
 * integers, and the lane tree's result is that count, the same bits.  A
 * field nothing is added to (the window's, without want_e) is +0.0, as the
 * tree of zeros gives.  Fewer accumulators than the 25 fields: AVX2 has 16
 * vector registers, and the 25 lived on the stack. */
static const uint8_t sum_field[] = {
    HICP_PF_E2_ALL,      HICP_PF_E2_C,        HICP_PF_E2_IN,       HICP_PF_SP + 0,
    HICP_PF_SP + 1,      HICP_PF_SP + 2,      HICP_PF_SY + 0,      HICP_PF_SY + 1,
    HICP_PF_SY + 2,      HICP_PF_SPY + 0,     HICP_PF_SPY + 1,     HICP_PF_SPY + 2,
    HICP_PF_SPY + 3,     HICP_PF_SPY + 4,     HICP_PF_SPY + 5,     HICP_PF_SPY + 6,
    HICP_PF_SPY + 7,     HICP_PF_SPY + 8,     HICP_PF_E_W,         HICP_PF_E2_W};
enum { SUM_IN = 2, SUM_W = 18, SUM_MAX = 20 }; /* where sum_field's groups begin */

/* Lanes set in mask m. */
AVX2 static inline uint32_t lanes4(__m256d m)
{
  return (uint32_t)__builtin_popcount((unsigned)_mm256_movemask_pd(m));
}

AVX2 static inline __attribute__((always_inline)) void
sum_avx2(const hicp__mview *view, const hicp__frame *f, const hicp__select *sel, uint32_t c,
         hicp__partial *out, const int want_e)
{
  enum { W = 4, NG = HICP_LANES / W, LOG = 6 };
  _Static_assert(NG == 1 << LOG, "groups");
  const int ns = want_e ? SUM_MAX : SUM_W; /* accumulators in use */
  __m256d st[LOG + 1][SUM_MAX]; /* the group tree's sums waiting, by level */
  uint32_t n_all = 0, n_c = 0, n_w = 0, n_in = 0;
  const uint32_t base = c * f->chunk;
  const uint32_t end = hicp__chunk_end(f, c);
  const __m256d zero = _mm256_setzero_pd();
  const __m256d max_d2 = _mm256_set1_pd(sel->max_d2);
  const __m256d w_lo = _mm256_set1_pd(sel->w_lo), w_hi = _mm256_set1_pd(sel->w_hi);
  const __m256d e_lo = _mm256_set1_pd(sel->e_lo), e_hi = _mm256_set1_pd(sel->e_hi);
  const __m256d trim_e2 = _mm256_set1_pd(sel->trim_e2);
  const float *ps = f->p0s;
  const size_t n = f->n;
  const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
  for (uint32_t k = 0; k < NG; k++) {
    const uint32_t grp = bitrev(k, LOG);
    __m256d a[SUM_MAX];
#pragma GCC unroll 24
    for (int fld = 0; fld < ns; fld++)
      a[fld] = zero;
    for (uint32_t i = base + grp * W; i < end; i += HICP_LANES) {
      const __m256i mi = _mm256_cmpgt_epi64(_mm256_set1_epi64x((long long)(end - i)), lane);
      const __m256d m = _mm256_castsi256_pd(mi);
      const __m128i m32 = _mm256_castsi256_si128(
          _mm256_permutevar8x32_epi32(mi, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
      /* the matched vertices (vertex 0 in the lanes past the chunk) */
      uint32_t mt[4];
      _mm_storeu_si128((__m128i *)mt, _mm_maskload_epi32((const int *)(f->match + i), m32));
      __m128 vx, vy, vz;
      vtx4_avx2(view->vtx, mt, &vx, &vy, &vz);
      const __m256d e2 = _mm256_maskload_pd(f->e2 + i, mi);
      const __m256d px = _mm256_cvtps_pd(_mm_maskload_ps(ps + i, m32));
      const __m256d py = _mm256_cvtps_pd(_mm_maskload_ps(ps + n + i, m32));
      const __m256d pz = _mm256_cvtps_pd(_mm_maskload_ps(ps + 2 * n + i, m32));
      const __m256d yx = _mm256_cvtps_pd(vx), yy = _mm256_cvtps_pd(vy), yz = _mm256_cvtps_pd(vz);
      /* hicp__partial_add_pair, with masks for its branches */
      n_all += lanes4(m);
      a[0] = mask_add(a[0], m, e2);
      const __m256d cand = _mm256_and_pd(m, _mm256_cmp_pd(e2, max_d2, _CMP_LE_OQ));
      n_c += lanes4(cand);
      a[1] = mask_add(a[1], cand, e2);
      __m256d e = zero;
      if (want_e) {
        e = _mm256_sqrt_pd(e2);
        const __m256d win = _mm256_and_pd(cand, _mm256_and_pd(_mm256_cmp_pd(e, w_lo, _CMP_GE_OQ),
                                                              _mm256_cmp_pd(e, w_hi, _CMP_LE_OQ)));
        n_w += lanes4(win);
        a[SUM_W] = mask_add(a[SUM_W], win, e);
        a[SUM_W + 1] = mask_add(a[SUM_W + 1], win, e2);
      }
      __m256d in = cand;
      if (sel->sigma_on)
        in = _mm256_and_pd(in, _mm256_and_pd(_mm256_cmp_pd(e, e_lo, _CMP_NLT_UQ),
                                             _mm256_cmp_pd(e, e_hi, _CMP_NGT_UQ)));
      if (sel->trim_on)
        in = _mm256_and_pd(in, _mm256_cmp_pd(e2, trim_e2, _CMP_NGT_UQ));
      n_in += lanes4(in);
      const __m256d add[SUM_W - SUM_IN] = {
          e2, px, py, pz, yx, yy, yz,
          _mm256_mul_pd(px, yx), _mm256_mul_pd(px, yy), _mm256_mul_pd(px, yz),
          _mm256_mul_pd(py, yx), _mm256_mul_pd(py, yy), _mm256_mul_pd(py, yz),
          _mm256_mul_pd(pz, yx), _mm256_mul_pd(pz, yy), _mm256_mul_pd(pz, yz)};
      if (_mm256_movemask_pd(in) == 0xf) /* every lane an inlier: no blends */
#pragma GCC unroll 24
        for (int fld = SUM_IN; fld < SUM_W; fld++)
          a[fld] = _mm256_add_pd(a[fld], add[fld - SUM_IN]);
      else
#pragma GCC unroll 24
        for (int fld = SUM_IN; fld < SUM_W; fld++)
          a[fld] = mask_add(a[fld], in, add[fld - SUM_IN]);
    }
    uint32_t lv = 0; /* lanes 128 .. 4 apart: carry */
    for (; (k >> lv) & 1u; lv++)
#pragma GCC unroll 24
      for (int fld = 0; fld < ns; fld++)
        a[fld] = _mm256_add_pd(st[lv][fld], a[fld]);
#pragma GCC unroll 24
    for (int fld = 0; fld < ns; fld++)
      st[lv][fld] = a[fld];
  }
  /* the lane tree's last steps; the fields without an accumulator are
   * zeros there (the counts are written over below) */
  double g[NF * W] __attribute__((aligned(32))) = {0.0};
  for (int fld = 0; fld < ns; fld++)
    _mm256_store_pd(&g[sum_field[fld] * W], st[LOG][fld]);
  lane_tree_tail(g, W, out);
  out->v[HICP_PF_N_ALL] = (double)n_all;
  out->v[HICP_PF_N_C] = (double)n_c;
  out->v[HICP_PF_N_W] = (double)n_w;
  out->v[HICP_PF_N_IN] = (double)n_in;
}

AVX2 static void chunk_sum_avx2(const hicp__mview *view, const hicp__frame *f,
                                const hicp__select *sel, uint32_t c, hicp__partial *out)
{
  if (sel->want_e)
    sum_avx2(view, f, sel, c, out, 1);
  else
    sum_avx2(view, f, sel, c, out, 0);
}
#endif

hicp__sum_fn hicp__cpu_simd_sum(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
  switch (hicp__cpu_isa()) {
  case 2:
  case 3:
    return chunk_sum_avx512;
  case 1:
    return chunk_sum_avx2;
  default:
    break;
  }
#endif
  return hicp__chunk_sum;
}
