/* keys_simd.c: the scan's Morton keys as placed by the initial pose, and
 * its box (order.h's hicp__keys_placed), four points at a time with AVX2.
 *
 * Every frame keys all of its points before its first pass, on the calling
 * thread alone below 8,192 points: on E6's boeing frames (2,192 points, 10
 * iterations, 0.3-0.5 ms a frame on the 2-core VM) the scalar loop took
 * 27 us a frame, this one 7.5-9 (docs/cpu-engine.md, "Small tracked
 * frames").  The vector loop does each point's operations in the same
 * order as the scalar one: the pose applied in double without fused
 * multiply-adds (pp/reduce.h's hicp__apply), the cell clamped and
 * truncated as order.h's hicp__zcell does it, so the keys, and the scan's
 * order, are the same bits.  The box is a minimum and a maximum: exact in
 * any order. */
#include "config.h"

#include "icp.h"
#include "order.h"

static inline void key_point(const hicp__zgrid *g, const hicp__xf *T, const float *p,
                             uint32_t *key, float lo[3], float hi[3])
{
  double q[3];
  hicp__apply(T, p, q);
  *key = hicp__zkey21(g, q[0], q[1], q[2]);
  for (int d = 0; d < 3; d++) {
    lo[d] = p[d] < lo[d] ? p[d] : lo[d];
    hi[d] = p[d] > hi[d] ? p[d] : hi[d];
  }
}

/* The scalar loop, the reference: the box in locals, as lo and hi might
 * alias p (the loop then stored and reloaded them at every point). */
static void keys_scalar(const hicp__zgrid *g, const hicp__xf *T, const float *p, size_t n,
                        uint32_t *key, float lo[3], float hi[3])
{
  float l[3] = {lo[0], lo[1], lo[2]}, h[3] = {hi[0], hi[1], hi[2]};
  for (size_t i = 0; i < n; i++)
    key_point(g, T, &p[3 * i], &key[i], l, h);
  for (int d = 0; d < 3; d++) {
    lo[d] = l[d];
    hi[d] = h[d];
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2")))

/* hicp__zcell's cell >> 14 for four values: max(c, 0) is c > 0 ? c : 0
 * (NaN too: maxpd returns its second operand), min(., cells) clamps, and a
 * value in [0, 2^21 - 1] truncates to the same integer in 32 bits as in
 * 64. */
AVX2 static inline __m128i cell7(__m256d v, __m256d lo, __m256d scale)
{
  const __m256d cells = _mm256_set1_pd((double)((1u << 21) - 1u));
  __m256d c = _mm256_mul_pd(_mm256_sub_pd(v, lo), scale);
  c = _mm256_min_pd(_mm256_max_pd(c, _mm256_setzero_pd()), cells);
  return _mm_srli_epi32(_mm256_cvttpd_epi32(c), 14);
}

/* hicp__spread7 for four values. */
AVX2 static inline __m128i spread7(__m128i v)
{
  v = _mm_and_si128(_mm_or_si128(v, _mm_slli_epi32(v, 8)), _mm_set1_epi32(0x0f00f));
  v = _mm_and_si128(_mm_or_si128(v, _mm_slli_epi32(v, 4)), _mm_set1_epi32(0xc30c3));
  v = _mm_and_si128(_mm_or_si128(v, _mm_slli_epi32(v, 2)), _mm_set1_epi32(0x49249));
  return v;
}

/* hicp__apply's row d for four points: ((r0 x + r1 y) + r2 z) + t. */
AVX2 static inline __m256d row(const hicp__xf *T, int d, __m256d x, __m256d y, __m256d z)
{
  const __m256d a = _mm256_mul_pd(_mm256_set1_pd(T->r[3 * d]), x);
  const __m256d b = _mm256_mul_pd(_mm256_set1_pd(T->r[3 * d + 1]), y);
  const __m256d c = _mm256_mul_pd(_mm256_set1_pd(T->r[3 * d + 2]), z);
  return _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(a, b), c), _mm256_set1_pd(T->t[d]));
}

/* The lowest (or highest) of a vector's four floats. */
AVX2 static inline float min4(__m128 v)
{
  v = _mm_min_ps(v, _mm_movehl_ps(v, v));
  v = _mm_min_ss(v, _mm_shuffle_ps(v, v, 1));
  return _mm_cvtss_f32(v);
}

AVX2 static inline float max4(__m128 v)
{
  v = _mm_max_ps(v, _mm_movehl_ps(v, v));
  v = _mm_max_ss(v, _mm_shuffle_ps(v, v, 1));
  return _mm_cvtss_f32(v);
}

AVX2 static void keys_avx2(const hicp__zgrid *g, const hicp__xf *T, const float *p, size_t n,
                           uint32_t *key, float lo[3], float hi[3])
{
  const __m256d glo[3] = {_mm256_set1_pd(g->lo[0]), _mm256_set1_pd(g->lo[1]),
                          _mm256_set1_pd(g->lo[2])};
  const __m256d scale = _mm256_set1_pd(g->scale);
  /* the box by axis, four points' worth: p < lo ? p : lo is minps(p, lo) */
  __m128 l[3], h[3];
  for (int d = 0; d < 3; d++) {
    l[d] = _mm_set1_ps(lo[d]);
    h[d] = _mm_set1_ps(hi[d]);
  }
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    /* four points x y z x | y z x y | z x y z, by axis */
    const float *q = &p[3 * i];
    const __m128 a = _mm_loadu_ps(q), b = _mm_loadu_ps(q + 4), c = _mm_loadu_ps(q + 8);
    const __m128 x = _mm_shuffle_ps(a, _mm_shuffle_ps(b, c, _MM_SHUFFLE(1, 1, 2, 2)),
                                    _MM_SHUFFLE(2, 0, 3, 0));
    const __m128 y = _mm_shuffle_ps(_mm_shuffle_ps(a, b, _MM_SHUFFLE(0, 0, 1, 1)),
                                    _mm_shuffle_ps(b, c, _MM_SHUFFLE(2, 2, 3, 3)),
                                    _MM_SHUFFLE(2, 0, 2, 0));
    const __m128 z = _mm_shuffle_ps(_mm_shuffle_ps(a, b, _MM_SHUFFLE(1, 1, 2, 2)), c,
                                    _MM_SHUFFLE(3, 0, 2, 0));
    const __m256d xd = _mm256_cvtps_pd(x), yd = _mm256_cvtps_pd(y), zd = _mm256_cvtps_pd(z);
    const __m128i kx = spread7(cell7(row(T, 0, xd, yd, zd), glo[0], scale));
    const __m128i ky = spread7(cell7(row(T, 1, xd, yd, zd), glo[1], scale));
    const __m128i kz = spread7(cell7(row(T, 2, xd, yd, zd), glo[2], scale));
    const __m128i k =
        _mm_or_si128(kx, _mm_or_si128(_mm_slli_epi32(ky, 1), _mm_slli_epi32(kz, 2)));
    _mm_storeu_si128((__m128i *)(void *)&key[i], k);
    l[0] = _mm_min_ps(x, l[0]);
    l[1] = _mm_min_ps(y, l[1]);
    l[2] = _mm_min_ps(z, l[2]);
    h[0] = _mm_max_ps(x, h[0]);
    h[1] = _mm_max_ps(y, h[1]);
    h[2] = _mm_max_ps(z, h[2]);
  }
  for (int d = 0; d < 3; d++) {
    lo[d] = min4(l[d]);
    hi[d] = max4(h[d]);
  }
  keys_scalar(g, T, &p[3 * i], n - i, &key[i], lo, hi);
}
#endif

void hicp__keys_placed(const hicp__zgrid *g, const struct hicp__xf *T, const float *p, size_t n,
                       uint32_t *key, float lo[3], float hi[3])
{
#if defined(__x86_64__) && defined(__GNUC__)
  if (hicp__cpu_isa() >= 1) {
    keys_avx2(g, T, p, n, key, lo, hi);
    return;
  }
#endif
  keys_scalar(g, T, p, n, key, lo, hi);
}
