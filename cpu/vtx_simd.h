/* vtx_simd.h: the coordinates of a few model vertices, given their
 * indices, as one vector per coordinate, with AVX2 but without its
 * gathers.  Each vertex is one 16-byte record (x, y, z, id: lib/pp/types.h),
 * so four or eight whole-record loads and a transpose give the same floats
 * as three gathers, in fewer instructions where gathers are microcoded:
 * on Zen 3 (docs/cpu-engine.md, "Gathers on AVX2") an 8-lane row scan took
 * 15% less time this way.  Every index must be a vertex; lanes a caller
 * leaves out should hold a valid one (0) and be masked off afterwards.
 * Included by walk_simd.c and sum_simd.c inside their x86-64 sections,
 * where AVX2 is their target attribute. */
#ifndef HICP_CPU_VTX_SIMD_H
#define HICP_CPU_VTX_SIMD_H

#include <immintrin.h>

#include "pp/types.h"

/* Vertices idx[0..3]: lane k of *x, *y, *z is vertex idx[k]'s coordinate. */
AVX2 static inline void vtx4_avx2(const hicp__vtx *vtx, const uint32_t idx[4], __m128 *x,
                                  __m128 *y, __m128 *z)
{
  const __m128 r0 = _mm_load_ps(&vtx[idx[0]].x), r1 = _mm_load_ps(&vtx[idx[1]].x);
  const __m128 r2 = _mm_load_ps(&vtx[idx[2]].x), r3 = _mm_load_ps(&vtx[idx[3]].x);
  const __m128 t0 = _mm_unpacklo_ps(r0, r1), t1 = _mm_unpacklo_ps(r2, r3); /* x0 x1 y0 y1 */
  const __m128 t2 = _mm_unpackhi_ps(r0, r1), t3 = _mm_unpackhi_ps(r2, r3); /* z0 z1 i0 i1 */
  *x = _mm_movelh_ps(t0, t1);
  *y = _mm_movehl_ps(t1, t0);
  *z = _mm_movelh_ps(t2, t3);
}

/* The same for vertices idx[0..7], lane k vertex idx[k]: records k and
 * k + 4 share a 256-bit register, so one in-lane transpose serves both. */
AVX2 static inline void vtx8_avx2(const hicp__vtx *vtx, const uint32_t idx[8], __m256 *x,
                                  __m256 *y, __m256 *z)
{
#define HICP_VTX_PAIR(a, b)                                                                 \
  _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_load_ps(&vtx[idx[a]].x)),                 \
                       _mm_load_ps(&vtx[idx[b]].x), 1)
  const __m256 a0 = HICP_VTX_PAIR(0, 4), a1 = HICP_VTX_PAIR(1, 5);
  const __m256 a2 = HICP_VTX_PAIR(2, 6), a3 = HICP_VTX_PAIR(3, 7);
#undef HICP_VTX_PAIR
  const __m256 t0 = _mm256_unpacklo_ps(a0, a1), t1 = _mm256_unpacklo_ps(a2, a3);
  const __m256 t2 = _mm256_unpackhi_ps(a0, a1), t3 = _mm256_unpackhi_ps(a2, a3);
  *x = _mm256_shuffle_ps(t0, t1, 0x44);
  *y = _mm256_shuffle_ps(t0, t1, 0xee);
  *z = _mm256_shuffle_ps(t2, t3, 0x44);
}

#endif /* HICP_CPU_VTX_SIMD_H */
