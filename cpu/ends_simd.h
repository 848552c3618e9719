/* ends_simd.h: the front and the back of pass A's blocks (cpu/chunk.h:
 * hicp__cpu_front, hicp__cpu_back) in vector registers: the fronts with
 * AVX-512 eight points at a time and with AVX2 four, the back (one for
 * both vector variants) four walks at a time with AVX2.  Each lane repeats the
 * reference's double operations in its order (separate multiplies and
 * adds, correctly rounded square roots and division), so the bits are the
 * same; what they remove is branches on data (whether a point keeps its
 * match, the kind of a certificate: coin tosses in ICP) and gathers and
 * scatters of consecutive records.  Included by walk_simd.c only, inside
 * its x86-64 section (AVX512 and AVX2 are its target attributes), where
 * the blocks are instantiated. */
#ifndef HICP_CPU_ENDS_SIMD_H
#define HICP_CPU_ENDS_SIMD_H

/* On a model of more than HICP_CPU_BIG_NV vertices (cpu/chunk.h) the
 * fronts (front_avx512_big, front_avx2_big) prefetch the vertex records
 * and safe radii of the previous matches HICP_CPU_FRONT_AHEAD points
 * ahead: the front reads them (and the walks begin from them), and on such
 * a model many are misses, with the next group's loads waiting behind them
 * (docs/cpu-engine.md, stop 33).  On bunny00 (38k vertices), whose model stays
 * in the caches, the same prefetches cost about 1%: the other fronts make
 * none. */
#define HICP_CPU_FRONT_AHEAD 16u

/* The prefetches for the m points g + HICP_CPU_FRONT_AHEAD .. of a front
 * that ends before point `end`, when there are m of them.  Always inlined:
 * GCC counts a prefetch as no side effect, so a function of prefetches
 * alone is "const", and its calls, results unused, were deleted as dead
 * code before the inliner saw them. */
static inline __attribute__((always_inline)) void
front_prefetch(const hicp__mview *view, const hicp__frame *f, uint32_t g, uint32_t m, uint32_t end)
{
  if (end - g < HICP_CPU_FRONT_AHEAD + m)
    return;
  const uint32_t *pm = &f->match[g + HICP_CPU_FRONT_AHEAD];
  for (uint32_t t = 0; t < m; t++)
    if (pm[t] != HICP_NONE) {
      __builtin_prefetch(&view->vtx[pm[t]]);
      __builtin_prefetch(&view->safe_r2[pm[t]]);
    }
}

/* The fronts NAME, for a model of at most HICP_CPU_BIG_NV vertices, and
 * NAME##_big, for a larger one (with front_prefetch), from NAME##_in. */
#define HICP_CPU_FRONTS(NAME, ATTR)                                                           \
  ATTR static uint32_t NAME(const hicp__mview *view, hicp__frame *f, const hicp__xf *T,       \
                            int method, uint32_t i0, uint32_t end, hicp__cpu_wave *wv,        \
                            hicp__cpu_todo *td, hicp__walkpart *w, uint32_t *nscan)           \
  {                                                                                           \
    return NAME##_in(view, f, T, method, i0, end, wv, td, w, nscan, 0);                       \
  }                                                                                           \
  ATTR static uint32_t NAME##_big(const hicp__mview *view, hicp__frame *f, const hicp__xf *T, \
                                  int method, uint32_t i0, uint32_t end, hicp__cpu_wave *wv,  \
                                  hicp__cpu_todo *td, hicp__walkpart *w, uint32_t *nscan)     \
  {                                                                                           \
    return NAME##_in(view, f, T, method, i0, end, wv, td, w, nscan, 1);                       \
  }

/* Eight-lane helpers of front_avx512 (double lanes 0-7; float vectors
 * use their low eight lanes). */

/* The low eight floats of a, as doubles. */
AVX512 static inline __m512d wide8(__m512 a)
{
  return _mm512_cvtps_pd(_mm512_castps512_ps256(a));
}

/* (a*a + b*b) + c*c, the order of hicp__pair_e2 and hicp__track_keep. */
AVX512 static inline __m512d norm2_8(__m512d a, __m512d b, __m512d c)
{
  return _mm512_add_pd(_mm512_add_pd(_mm512_mul_pd(a, a), _mm512_mul_pd(b, b)),
                       _mm512_mul_pd(c, c));
}

/* ((r[0] x + r[1] y) + r[2] z) + t: a row of hicp__apply. */
AVX512 static inline __m512d xf_row8(const double *r, double t, __m512d x, __m512d y, __m512d z)
{
  const __m512d rx = _mm512_mul_pd(_mm512_set1_pd(r[0]), x);
  const __m512d ry = _mm512_mul_pd(_mm512_set1_pd(r[1]), y);
  const __m512d rz = _mm512_mul_pd(_mm512_set1_pd(r[2]), z);
  return _mm512_add_pd(_mm512_add_pd(_mm512_add_pd(rx, ry), rz), _mm512_set1_pd(t));
}

/* Each bit of the low four of m four times: the float mask of four
 * 16-byte records. */
static inline __mmask16 nibbles4(unsigned m)
{
  static const uint16_t spread[16] = {0x0000, 0x000f, 0x00f0, 0x00ff, 0x0f00, 0x0f0f,
                                      0x0ff0, 0x0fff, 0xf000, 0xf00f, 0xf0f0, 0xf0ff,
                                      0xff00, 0xff0f, 0xfff0, 0xffff};
  return (__mmask16)spread[m & 15u];
}

/* Eight consecutive 16-byte records of four 32-bit words (certificates,
 * hicp__track: q[3], slack; or walks, hicp__walk), those in mask m: word
 * j of record k in lane k of out[j].  Two loads and a transpose, not four
 * gathers. */
_Static_assert(sizeof(hicp__track) == 16 && sizeof(hicp__walk) == 16,
               "certificates and walks are records of four 32-bit words");

AVX512 static inline void rec4_load8(const void *rec, __mmask8 m, __m512 out[4])
{
  const float *p = rec;
  const __m512 a = _mm512_maskz_loadu_ps(nibbles4(m), p);
  const __m512 b = _mm512_maskz_loadu_ps(nibbles4(m >> 4), p + 16);
  const __m512i ix = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int j = 0; j < 4; j++)
    out[j] = _mm512_permutex2var_ps(a, _mm512_add_epi32(ix, _mm512_set1_epi32(j)), b);
}

/* The opposite: lane k of w0 .. w3 into the words of record k, for the
 * records in mask m (a transpose and two masked stores, not four
 * scatters). */
AVX512 static inline void rec4_store8(void *rec, __mmask8 m, __m512 w0, __m512 w1, __m512 w2,
                                      __m512 w3)
{
  float *p = rec;
  const __m512i pairs = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512 xy = _mm512_permutex2var_ps(w0, pairs, w1), zs = _mm512_permutex2var_ps(w2, pairs, w3);
  const __m512i lo = _mm512_setr_epi32(0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23);
  const __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(8));
  _mm512_mask_storeu_ps(p, nibbles4(m), _mm512_permutex2var_ps(xy, lo, zs));
  _mm512_mask_storeu_ps(p + 16, nibbles4(m >> 4), _mm512_permutex2var_ps(xy, hi, zs));
}

/* Four-lane helpers of front_avx2 and back_avx2 (AVX2 has no mask
 * registers: a mask is a vector with all bits set in its lanes). */

/* The safe radii (squared) of vertices at[0 .. 3], lane k vertex at[k]:
 * four loads, not a gather (microcoded on AMD's cores). */
AVX2 static inline __m128 safe4(const hicp__mview *view, const uint32_t at[4])
{
  return _mm_setr_ps(view->safe_r2[at[0]], view->safe_r2[at[1]], view->safe_r2[at[2]],
                     view->safe_r2[at[3]]);
}

/* The 64-bit lanes of a mask as 32-bit lanes. */
AVX2 static inline __m128i narrow4(__m256d m)
{
  const __m256i p = _mm256_permutevar8x32_epi32(_mm256_castpd_si256(m),
                                                _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6));
  return _mm256_castsi256_si128(p);
}

/* hicp__round_down, lane by lane. */
AVX2 static inline __m128 round_down4(__m256d s)
{
  const __m128 f = _mm256_cvtpd_ps(s);
  /* -1 where f rounded up: adding it steps the bits one down */
  const __m128i up = narrow4(_mm256_cmp_pd(_mm256_cvtps_pd(f), s, _CMP_GT_OQ));
  const __m128 down = _mm_castsi128_ps(_mm_add_epi32(_mm_castps_si128(f), up));
  return _mm_and_ps(down, _mm_castsi128_ps(narrow4(_mm256_cmp_pd(s, _mm256_setzero_pd(),
                                                                  _CMP_GT_OQ))));
}

/* Four consecutive 16-byte records of four 32-bit words (as rec4_load8),
 * those in the lanes of m: words 0 and 1 of record k in lanes k and 4 + k
 * of out[0], words 2 and 3 in lanes k and 4 + k of out[1].  Two loads and
 * a transpose.  With `full` (m has all four lanes) plain loads: masked
 * ones are longer micro-op sequences on AMD's cores. */
AVX2 static inline void rec4_load4(const void *rec, __m128i m, int full, __m256 out[2])
{
  const float *p = rec;
  const __m256i pick = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256 a = full ? _mm256_loadu_ps(p)
                        : _mm256_maskload_ps(p, _mm256_cvtepi32_epi64(_mm_unpacklo_epi32(m, m)));
  const __m256 b = full ? _mm256_loadu_ps(p + 8)
                        : _mm256_maskload_ps(p + 8, _mm256_cvtepi32_epi64(_mm_unpackhi_epi32(m, m)));
  out[0] = _mm256_permutevar8x32_ps(_mm256_unpacklo_ps(a, b), pick);
  out[1] = _mm256_permutevar8x32_ps(_mm256_unpackhi_ps(a, b), pick);
}

/* The opposite: lane k of w0 .. w3 into the words of record k, for the
 * records in the lanes of m: with plain stores when m has all four (masked
 * stores are long micro-op sequences on AMD's cores: on Zen 3 one of them
 * was the largest single spot in pass A's block profile, 6% of its
 * samples). */
AVX2 static inline void rec4_store4(void *rec, __m128i m, __m128 w0, __m128 w1, __m128 w2,
                                    __m128 w3)
{
  float *p = rec;
  const __m256i pick = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  const __m256 i01 = _mm256_permutevar8x32_ps(_mm256_set_m128(w1, w0), pick); /* w0 w1 pairs */
  const __m256 i23 = _mm256_permutevar8x32_ps(_mm256_set_m128(w3, w2), pick);
  const __m256d lo = _mm256_unpacklo_pd(_mm256_castps_pd(i01), _mm256_castps_pd(i23));
  const __m256d hi = _mm256_unpackhi_pd(_mm256_castps_pd(i01), _mm256_castps_pd(i23));
  const __m256 r01 = _mm256_castpd_ps(_mm256_permute2f128_pd(lo, hi, 0x20));
  const __m256 r23 = _mm256_castpd_ps(_mm256_permute2f128_pd(lo, hi, 0x31));
  if (_mm_movemask_ps(_mm_castsi128_ps(m)) == 0xf) {
    _mm256_storeu_ps(p, r01);
    _mm256_storeu_ps(p + 8, r23);
  } else {
    _mm256_maskstore_ps(p, _mm256_cvtepi32_epi64(_mm_unpacklo_epi32(m, m)), r01);
    _mm256_maskstore_ps(p + 8, _mm256_cvtepi32_epi64(_mm_unpackhi_epi32(m, m)), r23);
  }
}

/* ((r[0] x + r[1] y) + r[2] z) + t: a row of hicp__apply. */
AVX2 static inline __m256d xf_row4(const double *r, double t, __m256d x, __m256d y, __m256d z)
{
  const __m256d rx = _mm256_mul_pd(_mm256_set1_pd(r[0]), x);
  const __m256d ry = _mm256_mul_pd(_mm256_set1_pd(r[1]), y);
  const __m256d rz = _mm256_mul_pd(_mm256_set1_pd(r[2]), z);
  return _mm256_add_pd(_mm256_add_pd(_mm256_add_pd(rx, ry), rz), _mm256_set1_pd(t));
}

/* (a*a + b*b) + c*c. */
AVX2 static inline __m256d norm2_4(__m256d a, __m256d b, __m256d c)
{
  return _mm256_add_pd(_mm256_add_pd(_mm256_mul_pd(a, a), _mm256_mul_pd(b, b)),
                       _mm256_mul_pd(c, c));
}

/* The two slacks of hicp__nn_slack for four walks, lane by lane its
 * double operations in its order, with its margins (HICP_SLACK_*, named in
 * lib/pp/nn.h so that the two cannot drift apart): inside the safe ball (safe: the
 * vertex's safe_r2) and inside the cell (rmin, l2min: its certifying row
 * scan); dcur: the walk's distance.  The callers choose between them by
 * the kind of each walk's certificate, with masks. */
AVX2 static inline void slacks4(__m128 dcur, __m128 safe, __m128 rmin, __m128 l2min,
                                __m128 *in_ball, __m128 *in_cell)
{
  const __m256d shrink = _mm256_set1_pd(HICP_SLACK_SHRINK);
  const __m256d dist = _mm256_mul_pd(
      _mm256_sqrt_pd(_mm256_add_pd(_mm256_cvtps_pd(dcur), _mm256_set1_pd(HICP_SLACK_D2_ABS))),
      _mm256_set1_pd(HICP_SLACK_HI));
  *in_ball = round_down4(_mm256_sub_pd(_mm256_sqrt_pd(_mm256_cvtps_pd(safe)), dist));
  const __m256d h = _mm256_mul_pd(
      _mm256_mul_pd(_mm256_set1_pd(0.5), _mm256_sqrt_pd(_mm256_cvtps_pd(rmin))), shrink);
  const __m256d len = _mm256_mul_pd(_mm256_sqrt_pd(_mm256_cvtps_pd(l2min)), shrink);
  const __m256d rad = _mm256_add_pd(dist, h);
  const __m256d margin = _mm256_div_pd(
      _mm256_add_pd(_mm256_mul_pd(_mm256_set1_pd(HICP_SLACK_REL), _mm256_mul_pd(rad, rad)),
                    _mm256_set1_pd(HICP_SLACK_ABS)),
      len);
  *in_cell = round_down4(_mm256_sub_pd(h, margin));
}

/* hicp__guard_safe for the four walks of a group at wave queries q[0 ..
 * 3], stopped at computed squared distances dcur: 1 when it holds in every
 * lane of `lanes` (the walks that ended after a row scan).  Lane by lane
 * the reference's float operations in its order, hicp__tie_bound's with
 * its margins HICP_TIE_REL and HICP_TIE_ABS (lib/pp/nn.h).  Four 16-byte loads and
 * a transpose; each load's fourth float is the next query's first or,
 * past the wave's last query, the record after it in the wave: inside
 * the wave either way, and unused. */
AVX2 static inline int guards_safe4(const hicp__mview *view, const float (*q)[3], __m128 dcur,
                                    __m128i lanes)
{
  __m128 x = _mm_loadu_ps(q[0]), y = _mm_loadu_ps(q[1]), z = _mm_loadu_ps(q[2]);
  __m128 unused = _mm_loadu_ps(q[3]);
  _MM_TRANSPOSE4_PS(x, y, z, unused);
  x = _mm_sub_ps(x, _mm_set1_ps(view->guard_c[0]));
  y = _mm_sub_ps(y, _mm_set1_ps(view->guard_c[1]));
  z = _mm_sub_ps(z, _mm_set1_ps(view->guard_c[2]));
  const __m128 n = _mm_add_ps(_mm_add_ps(_mm_mul_ps(x, x), _mm_mul_ps(y, y)), _mm_mul_ps(z, z));
  const __m128 tie =
      _mm_add_ps(_mm_mul_ps(dcur, _mm_set1_ps(HICP_TIE_REL)), _mm_set1_ps(HICP_TIE_ABS));
  const __m128 r2 = _mm_set1_ps(view->guard_r2);
  const __m128i ok = _mm_castps_si128(
      _mm_and_ps(_mm_cmp_ps(n, r2, _CMP_LE_OQ), _mm_cmp_ps(tie, r2, _CMP_LE_OQ)));
  const __m128i bad = _mm_andnot_si128(ok, lanes);
  return _mm_testz_si128(bad, bad);
}

/* The queries (x, y, z in lanes 0-7) of the points in mask m, in order,
 * as the consecutive float[3] records at out: interleaved in two
 * registers (24 floats) and compressed, each bit of m standing for its
 * point's three floats.  (Copying them point by point from a stored
 * vector was 1.5% of a registration, waiting on the copies' loads.)  With
 * `room` (32 floats free at out) the compressed registers are stored
 * whole; a compressing store to memory is a long microcoded sequence on
 * Zen 4 (docs/cpu-engine.md, stop 34), so it is kept for a wave's last
 * queries. */
AVX512 static inline void queries8(__m256 fx, __m256 fy, __m256 fz, __mmask8 m, float *out,
                                   int room)
{
  const __m512 xy = _mm512_castpd_ps(_mm512_insertf64x4(
      _mm512_castps_pd(_mm512_castps256_ps512(fx)), _mm256_castps_pd(fy), 1));
  const __m512 z = _mm512_castps256_ps512(fz);
  /* float j of the records is coordinate j % 3 of point j / 3: lane
   * (j % 3) * 8 + j / 3 of (xy, z) */
  const __m512i lo = _mm512_setr_epi32(0, 8, 16, 1, 9, 17, 2, 10, 18, 3, 11, 19, 4, 12, 20, 5);
  const __m512i hi = _mm512_setr_epi32(13, 21, 6, 14, 22, 7, 15, 23, 0, 0, 0, 0, 0, 0, 0, 0);
  /* each bit of m three times (bit k to bits 3k .. 3k + 2) */
  uint32_t b = m;
  b = (b | (b << 8)) & 0x00f00fu;
  b = (b | (b << 4)) & 0x0c30c3u;
  b = (b | (b << 2)) & 0x249249u;
  b *= 7u;
  const __m512 r0 = _mm512_permutex2var_ps(xy, lo, z), r1 = _mm512_permutex2var_ps(xy, hi, z);
  float *out1 = out + __builtin_popcount(b & 0xffffu);
  if (room) {
    _mm512_storeu_ps(out, _mm512_maskz_compress_ps((__mmask16)b, r0));
    _mm512_storeu_ps(out1, _mm512_maskz_compress_ps((__mmask16)(b >> 16), r1));
  } else {
    _mm512_mask_compressstoreu_ps(out, (__mmask16)b, r0);
    _mm512_mask_compressstoreu_ps(out1, (__mmask16)(b >> 16), r1);
  }
}

/* hicp__cpu_front eight points at a time: the transform, the certificate
 * test (hicp__track_keep) and the kept points' e2 in vector registers,
 * lane by lane the reference's double operations in its order (separate
 * multiplies and adds), so the same bits.
 * Which points keep their match is a coin toss in ICP's later iterations:
 * decided eight at a time in masks, not point by point in branches.
 * With pnn and pnn-opt it also begins the walks that have a previous
 * match and makes their first safe ball tests, as front_avx2 does (there
 * the whole contract): from the vertex records it loads for the kept
 * points' e2 anyway. */
AVX512 static inline __attribute__((always_inline)) uint32_t
front_avx512_in(const hicp__mview *view, hicp__frame *f, const hicp__xf *T, int method,
                uint32_t i0, uint32_t end, hicp__cpu_wave *wv, hicp__cpu_todo *td,
                hicp__walkpart *w, uint32_t *nscan, const int big_model)
{
  const int cert = hicp__track_cert(method); /* also: walks start at the previous match */
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512 zero = _mm512_setzero_ps();
  const int big = cert && big_model; /* front_prefetch */
  uint32_t n = 0, kept = 0, ns = 0;
  unsigned unbegun = 0; /* lanes that walked without a previous match */
  for (uint32_t g = i0; g < end; g += 8) {
    const __mmask8 mk = (__mmask8)((1u << (end - g < 8 ? end - g : 8)) - 1u);
    if (big)
      front_prefetch(view, f, g, 8, end);
    /* hicp__apply (the points by coordinate: loads, not gathers), and the
     * query in float */
    const float *p = f->p0s + g;
    const __m512d x = wide8(_mm512_maskz_loadu_ps(mk, p)),
                  y = wide8(_mm512_maskz_loadu_ps(mk, p + f->n)),
                  z = wide8(_mm512_maskz_loadu_ps(mk, p + 2 * (size_t)f->n));
    const __m512d qx = xf_row8(&T->r[0], T->t[0], x, y, z);
    const __m512d qy = xf_row8(&T->r[3], T->t[1], x, y, z);
    const __m512d qz = xf_row8(&T->r[6], T->t[2], x, y, z);
    const __m256 fx = _mm512_cvtpd_ps(qx), fy = _mm512_cvtpd_ps(qy), fz = _mm512_cvtpd_ps(qz);
    const __m512i prev = _mm512_maskz_loadu_epi32(mk, &f->match[g]);
    /* the lanes with a previous match, its vertex and safe radius */
    const __mmask8 has =
        (__mmask8)_mm512_mask_cmpneq_epi32_mask(mk, prev, _mm512_set1_epi32(-1));
    __m512 yx = zero, yy = zero, yz = zero, safe = zero;
    if (cert && has) {
      /* whole 16-byte records and a transpose (vtx8_avx2), vertex 0 in
       * the lanes without one: gathers are microcoded on AMD's cores */
      uint32_t at[16];
      _mm512_storeu_si512(at, _mm512_maskz_mov_epi32((__mmask16)has, prev));
      __m256 vx, vy, vz;
      vtx8_avx2(view->vtx, at, &vx, &vy, &vz);
      yx = _mm512_castps256_ps512(vx);
      yy = _mm512_castps256_ps512(vy);
      yz = _mm512_castps256_ps512(vz);
      safe = _mm512_castps256_ps512(_mm256_set_m128(safe4(view, at + 4), safe4(view, at)));
    }
    __mmask8 keep = 0;
    if (cert) { /* hicp__track_keep */
      /* the certificates: q and slack; a group with no previous match (a
       * first pass) has none to test and does not read them (front_avx2) */
      __m512 t[4] = {zero, zero, zero, zero};
      if (has)
        rec4_load8(&f->track[g], mk, t);
      const __m512d slack = wide8(t[3]);
      const __mmask8 elig = has & _mm512_cmp_pd_mask(slack, _mm512_setzero_pd(), _CMP_GT_OQ);
      const __m512d dx = _mm512_sub_pd(_mm512_cvtps_pd(fx), wide8(t[0]));
      const __m512d dy = _mm512_sub_pd(_mm512_cvtps_pd(fy), wide8(t[1]));
      const __m512d dz = _mm512_sub_pd(_mm512_cvtps_pd(fz), wide8(t[2]));
      const __m512d moved2 = norm2_8(dx, dy, dz);
      const __m512d limit2 =
          _mm512_mul_pd(_mm512_mul_pd(slack, slack), _mm512_set1_pd(HICP_KEEP_SHRINK));
      keep = _mm512_mask_cmp_pd_mask(elig, moved2, limit2, _CMP_LT_OQ);
      /* A kept point's certificate stays as it is (hicp__track_keep); the
       * others' record this query now (hicp__track_update), with a slack
       * the back writes when their walks end (a scatter of one word there
       * rather than four) */
      if (mk & ~keep)
        rec4_store8(&f->track[g], mk & ~keep, _mm512_castps256_ps512(fx),
                    _mm512_castps256_ps512(fy), _mm512_castps256_ps512(fz), zero);
      if (keep) {
        /* hicp__cpu_done: the match stays; e2 = hicp__pair_e2 */
        const __m512d e2 = norm2_8(_mm512_sub_pd(qx, wide8(yx)), _mm512_sub_pd(qy, wide8(yy)),
                                   _mm512_sub_pd(qz, wide8(yz)));
        _mm512_mask_storeu_pd(&f->e2[g], keep, e2);
        kept += (uint32_t)__builtin_popcount(keep);
      }
    }
    /* the others' walks, in point order: compressed in registers and
     * stored whole into the list, which has room past its end (a branch,
     * as most groups have walks in ICP's first iterations and none in its
     * last) */
    const __mmask8 todo = mk & ~keep;
    if (todo == 0)
      continue;
    _mm512_storeu_pd(td->qx + n, _mm512_maskz_compress_pd(todo, qx));
    _mm512_storeu_pd(td->qy + n, _mm512_maskz_compress_pd(todo, qy));
    _mm512_storeu_pd(td->qz + n, _mm512_maskz_compress_pd(todo, qz));
    _mm256_storeu_si256((__m256i *)(td->prev + n),
                        _mm512_castsi512_si256(_mm512_maskz_compress_epi32((__mmask16)todo, prev)));
    _mm256_storeu_si256((__m256i *)(td->at + n),
                        _mm512_castsi512_si256(_mm512_maskz_compress_epi32(
                            (__mmask16)todo, _mm512_add_epi32(_mm512_set1_epi32((int)g), iota))));
    queries8(fx, fy, fz, todo, &wv->q[n][0], n + 11 <= HICP_CPU_WAVE);
    const uint32_t cnt = (uint32_t)__builtin_popcount(todo);
    if (cert) {
      /* the walks begun at the previous match (hicp__walk_begin: cur,
       * dcur = hicp__d2 in its float operations and order, steps 0,
       * cert), as records compressed in a register and stored whole */
      unbegun |= todo & ~has;
      const __m512 dx = _mm512_sub_ps(_mm512_castps256_ps512(fx), yx);
      const __m512 dy = _mm512_sub_ps(_mm512_castps256_ps512(fy), yy);
      const __m512 dz = _mm512_sub_ps(_mm512_castps256_ps512(fz), yz);
      const __m512 d = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(dx, dx), _mm512_mul_ps(dy, dy)),
                                     _mm512_mul_ps(dz, dz));
      const unsigned ball = _mm512_mask_cmp_ps_mask((__mmask16)todo, d, safe, _CMP_LT_OQ);
      rec4_store8(&wv->w[n], (__mmask8)((1u << cnt) - 1u),
                  _mm512_maskz_compress_ps((__mmask16)todo, _mm512_castsi512_ps(prev)),
                  _mm512_maskz_compress_ps((__mmask16)todo, d), zero,
                  _mm512_castsi512_ps(_mm512_set1_epi32(cert)));
      /* hicp__walk_in_safe_ball: the walks that need a row scan */
      uint32_t k = n;
      for (unsigned t = todo; t != 0; t &= t - 1, k++) {
        wv->how[k] = 1;
        wv->scan[ns] = (uint16_t)k;
        ns += !((ball >> __builtin_ctz(t)) & 1u);
      }
    }
    n += cnt;
  }
  hicp__cpu_count(w, 0, kept); /* hicp__cpu_done's: walked, no steps */
  if (cert && unbegun == 0)
    *nscan = ns;
  return n;
}

HICP_CPU_FRONTS(front_avx512, AVX512)

/* The lanes of a 4-bit mask, in order, then lane 0: pack4[m] moves the
 * lanes of m to the front of a vector (AVX2 has no compress). */
static const int32_t pack4[16][4] __attribute__((aligned(16))) = {
    {0, 0, 0, 0}, {0, 0, 0, 0}, {1, 0, 0, 0}, {0, 1, 0, 0}, {2, 0, 0, 0}, {0, 2, 0, 0},
    {1, 2, 0, 0}, {0, 1, 2, 0}, {3, 0, 0, 0}, {0, 3, 0, 0}, {1, 3, 0, 0}, {0, 1, 3, 0},
    {2, 3, 0, 0}, {0, 2, 3, 0}, {1, 2, 3, 0}, {0, 1, 2, 3}};

/* hicp__cpu_front four points at a time with AVX2, as front_avx512 does
 * eight: the same double operations lane by lane in the reference's
 * order.  The four certificates (16-byte records) are read as two loads
 * and a transpose, and written back the same way with the new queries
 * (back_avx2 writes the slacks of those that walk).
 * With pnn and pnn-opt it also begins the walks that have a previous
 * match (hicp__cpu_wave_begin's hicp__nn_start and hicp__walk_begin: from
 * that match, its distance by hicp__d2's float operations in its order),
 * from the vertex records it loads for the kept points' e2 anyway, and
 * their first safe ball tests (hicp__walk_in_safe_ball): when every walk
 * of the block began so, *nscan is how many of them need a row scan,
 * listed in wv->scan, for the walks' WALKS##_scans.  A walk without a
 * previous match (a first pass) leaves the starts to hicp__cpu_wave_run
 * (*nscan is left as it was).  The walks' queries and records are written
 * as whole 16-byte records. */
AVX2 static inline __attribute__((always_inline)) uint32_t
front_avx2_in(const hicp__mview *view, hicp__frame *f, const hicp__xf *T, int method,
              uint32_t i0, uint32_t end, hicp__cpu_wave *wv, hicp__cpu_todo *td,
              hicp__walkpart *w, uint32_t *nscan, const int big_model)
{
  const int cert = hicp__track_cert(method); /* also: walks start at the previous match */
  const __m128i lane = _mm_setr_epi32(0, 1, 2, 3), none = _mm_set1_epi32(-1);
  uint32_t n = 0, kept = 0, ns = 0;
  unsigned unbegun = 0; /* lanes that walked without a previous match */
  const int big = cert && big_model; /* front_prefetch */
  for (uint32_t g = i0; g < end; g += 4) {
    const uint32_t cnt = end - g < 4 ? end - g : 4;
    if (big)
      front_prefetch(view, f, g, 4, end);
    const __m128i m32 = _mm_cmpgt_epi32(_mm_set1_epi32((int)cnt), lane);
    const __m256d m64 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(m32));
    /* hicp__apply (the points by coordinate: loads), and the query in float */
    const float *p = f->p0s + g;
    const int full = cnt == 4; /* then plain loads (rec4_load4) */
    const float *py = p + f->n, *pz = p + 2 * (size_t)f->n;
    const __m256d x = _mm256_cvtps_pd(full ? _mm_loadu_ps(p) : _mm_maskload_ps(p, m32));
    const __m256d y = _mm256_cvtps_pd(full ? _mm_loadu_ps(py) : _mm_maskload_ps(py, m32));
    const __m256d z = _mm256_cvtps_pd(full ? _mm_loadu_ps(pz) : _mm_maskload_ps(pz, m32));
    const __m256d qx = xf_row4(&T->r[0], T->t[0], x, y, z);
    const __m256d qy = xf_row4(&T->r[3], T->t[1], x, y, z);
    const __m256d qz = xf_row4(&T->r[6], T->t[2], x, y, z);
    const __m128 fx = _mm256_cvtpd_ps(qx), fy = _mm256_cvtpd_ps(qy), fz = _mm256_cvtpd_ps(qz);
    const __m128i prev = full ? _mm_loadu_si128((const __m128i *)&f->match[g])
                              : _mm_maskload_epi32((const int *)&f->match[g], m32);
    /* the lanes in the group with a previous match, and its vertex (vertex
     * 0 in the others, masked off below) */
    const __m128i has = _mm_andnot_si128(_mm_cmpeq_epi32(prev, none), m32);
    __m128 yx = _mm_setzero_ps(), yy = yx, yz = yx, safe = yx;
    if (cert && !_mm_testz_si128(has, has)) {
      uint32_t at[4];
      _mm_storeu_si128((__m128i *)at, _mm_and_si128(prev, has));
      vtx4_avx2(view->vtx, at, &yx, &yy, &yz);
      safe = safe4(view, at);
    }
    unsigned keep = 0;
    if (cert) { /* hicp__track_keep */
      /* the certificates: x, y | z, slack.  A group with no previous
       * match (a first pass) has none to test and does not read them
       * (when the records were fresh calloc'd pages, reading them first
       * mapped the zero page, and each first write then cost a fault and
       * a TLB flush on both cores: docs/cpu-engine.md, stop 32). */
      __m256 t[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
      if (!_mm_testz_si128(has, has))
        rec4_load4(&f->track[g], m32, full, t);
      const __m256 xy = t[0], zs = t[1];
      const __m256d slack = _mm256_cvtps_pd(_mm256_extractf128_ps(zs, 1));
      const __m256d elig =
          _mm256_and_pd(_mm256_castsi256_pd(_mm256_cvtepi32_epi64(has)),
                        _mm256_cmp_pd(slack, _mm256_setzero_pd(), _CMP_GT_OQ));
      const __m256d dx = _mm256_sub_pd(_mm256_cvtps_pd(fx), _mm256_cvtps_pd(_mm256_castps256_ps128(xy)));
      const __m256d dy = _mm256_sub_pd(_mm256_cvtps_pd(fy), _mm256_cvtps_pd(_mm256_extractf128_ps(xy, 1)));
      const __m256d dz = _mm256_sub_pd(_mm256_cvtps_pd(fz), _mm256_cvtps_pd(_mm256_castps256_ps128(zs)));
      const __m256d moved2 = norm2_4(dx, dy, dz);
      const __m256d limit2 =
          _mm256_mul_pd(_mm256_mul_pd(slack, slack), _mm256_set1_pd(HICP_KEEP_SHRINK));
      const __m256d km = _mm256_and_pd(elig, _mm256_cmp_pd(moved2, limit2, _CMP_LT_OQ));
      keep = (unsigned)_mm256_movemask_pd(km);
      /* A kept point's certificate stays as it is (written back as it
       * was, so that a whole group takes plain stores); the others' record
       * this query, with a slack the back writes when their walks end */
      const __m128i k32 = narrow4(km);
      const __m128 kf = _mm_castsi128_ps(k32);
      if (keep != (unsigned)_mm256_movemask_pd(m64))
        rec4_store4(&f->track[g], m32, _mm_blendv_ps(fx, _mm256_castps256_ps128(xy), kf),
                    _mm_blendv_ps(fy, _mm256_extractf128_ps(xy, 1), kf),
                    _mm_blendv_ps(fz, _mm256_castps256_ps128(zs), kf),
                    _mm_and_ps(_mm256_extractf128_ps(zs, 1), kf));
      if (keep) {
        /* hicp__cpu_done: the match stays; e2 = hicp__pair_e2 */
        const __m256d e2 = norm2_4(_mm256_sub_pd(qx, _mm256_cvtps_pd(yx)),
                                   _mm256_sub_pd(qy, _mm256_cvtps_pd(yy)),
                                   _mm256_sub_pd(qz, _mm256_cvtps_pd(yz)));
        if (cnt == 4) /* the others' old e2 written back: a plain store */
          _mm256_storeu_pd(&f->e2[g], _mm256_blendv_pd(_mm256_loadu_pd(&f->e2[g]), e2, km));
        else
          _mm256_maskstore_pd(&f->e2[g], _mm256_castpd_si256(km), e2);
        kept += (uint32_t)__builtin_popcount(keep);
      }
    }
    unsigned todo = ((1u << cnt) - 1u) & ~keep;
    if (todo == 0)
      continue;
    /* the others' walks, in point order: the queries as (x, y, z, -)
     * records, and with `cert` the walks begun at the previous match
     * (hicp__walk_begin: cur, dcur = hicp__d2, steps 0, cert) */
    __m128 qr0 = fx, qr1 = fy, qr2 = fz, qr3 = _mm_setzero_ps();
    _MM_TRANSPOSE4_PS(qr0, qr1, qr2, qr3);
    const __m128 qrec[4] = {qr0, qr1, qr2, qr3};
    __m128 wrec[4] = {qr3, qr3, qr3, qr3}; /* the walks' records: set and used with `cert` */
    unsigned ball = 0; /* lanes whose walk ends in its start's safe ball */
    if (cert) {
      unbegun |= todo & ~(unsigned)_mm_movemask_ps(_mm_castsi128_ps(has));
      const __m128 dx = _mm_sub_ps(fx, yx), dy = _mm_sub_ps(fy, yy), dz = _mm_sub_ps(fz, yz);
      __m128 w0 = _mm_castsi128_ps(prev);
      __m128 w1 = _mm_add_ps(_mm_add_ps(_mm_mul_ps(dx, dx), _mm_mul_ps(dy, dy)), _mm_mul_ps(dz, dz));
      ball = (unsigned)_mm_movemask_ps(_mm_cmplt_ps(w1, safe));
      __m128 w2 = _mm_setzero_ps(), w3 = _mm_castsi128_ps(_mm_set1_epi32(cert));
      _MM_TRANSPOSE4_PS(w0, w1, w2, w3);
      wrec[0] = w0;
      wrec[1] = w1;
      wrec[2] = w2;
      wrec[3] = w3;
    }
    /* the walks' points, transformed points and previous matches, packed
     * to the front of whole vectors (td has room past its last walk) */
    const __m128i p4 = _mm_load_si128((const __m128i *)pack4[todo]);
    const __m256i p8 = _mm256_add_epi32(
        _mm256_slli_epi32(_mm256_permutevar8x32_epi32(_mm256_castsi128_si256(p4),
                                                      _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3)),
                          1),
        _mm256_setr_epi32(0, 1, 0, 1, 0, 1, 0, 1));
    _mm256_storeu_pd(td->qx + n, _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(qx), p8)));
    _mm256_storeu_pd(td->qy + n, _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(qy), p8)));
    _mm256_storeu_pd(td->qz + n, _mm256_castps_pd(_mm256_permutevar8x32_ps(_mm256_castpd_ps(qz), p8)));
    _mm_storeu_si128((__m128i *)(td->prev + n),
                     _mm_castps_si128(_mm_permutevar_ps(_mm_castsi128_ps(prev), p4)));
    _mm_storeu_si128((__m128i *)(td->at + n), _mm_add_epi32(_mm_set1_epi32((int)g), p4));
    for (; todo != 0; todo &= todo - 1) {
      const unsigned k = (unsigned)__builtin_ctz(todo);
      if (n + 1 < HICP_CPU_WAVE) /* the record's fourth float lands on the next query */
        _mm_storeu_ps(&wv->q[n][0], qrec[k]);
      else
        _mm_maskstore_ps(&wv->q[n][0], _mm_setr_epi32(-1, -1, -1, 0), qrec[k]);
      if (cert) {
        _mm_storeu_ps((float *)&wv->w[n], wrec[k]);
        wv->how[n] = 1;
        wv->scan[ns] = (uint16_t)n;
        ns += !((ball >> k) & 1u);
      }
      n++;
    }
  }
  hicp__cpu_count(w, 0, kept); /* hicp__cpu_done's: walked, no steps */
  if (cert && unbegun == 0)
    *nscan = ns;
  return n;
}

HICP_CPU_FRONTS(front_avx2, AVX2)

/* hicp__cpu_back four walks at a time: the slacks of both kinds of
 * certificate and e2 in vector registers (lane by lane the reference's
 * double operations in its order), chosen by masks rather than by
 * branches on the kind; then the stores lane by lane.  A group with a
 * near tie (the flood, rare) goes to the reference.  The AVX-512 variants
 * use it too: their own back, eight walks at a time with gathers of the
 * row scans' words and the vertex records and scatters of the results,
 * was 4% slower on E1 (Zen 4, docs/cpu-engine.md, stop 34). */
AVX2 static inline __attribute__((always_inline)) void
back_avx2(const hicp__mview *view, hicp__frame *f, int cert, const hicp__cpu_wave *wv,
          const hicp__cpu_todo *td, uint32_t k0, uint32_t k1, hicp__walkpart *w)
{
  const __m128i lane = _mm_setr_epi32(0, 1, 2, 3);
  const __m128i zeroi = _mm_setzero_si128();
  const __m128 inf = _mm_set1_ps(HICP_FLT_INF);
  for (uint32_t g = k0; g < k1; g += 4) {
    const uint32_t cnt = k1 - g < 4 ? k1 - g : 4;
    const __m128i m32 = _mm_cmpgt_epi32(_mm_set1_epi32((int)cnt), lane);
    const __m256d m64 = _mm256_castsi256_pd(_mm256_cvtepi32_epi64(m32));
    /* their last row scans (hicp__row: 5 words) */
    const int *ri = (const int *)&wv->rs[g];
    int how4;
    memcpy(&how4, &wv->how[g], sizeof how4);
    const __m128i how = _mm_cvtepu8_epi32(_mm_cvtsi32_si128(how4));
    /* a walk that ended at a hub (how 3, rare): the reference */
    const __m128i hub = _mm_and_si128(m32, _mm_cmpeq_epi32(how, _mm_set1_epi32(3)));
    if (!_mm_testz_si128(hub, hub)) {
      hicp__cpu_back(view, f, cert, wv, td, g, g + cnt, w);
      continue;
    }
    const __m128i ball = _mm_and_si128(m32, _mm_cmpeq_epi32(how, _mm_set1_epi32(1)));
    const __m128i scanned = _mm_andnot_si128(ball, m32);
    /* words 2-4 of the four row scans (near_tie, rmin, l2min): four 16-byte
     * loads and a transpose, not three gathers (the fourth word is the
     * next record's first, or for the wave's last record how[0]: inside
     * *wv either way) */
    __m128 s0 = _mm_loadu_ps((const float *)(ri + 2)), s1 = _mm_loadu_ps((const float *)(ri + 7));
    __m128 s2 = _mm_loadu_ps((const float *)(ri + 12)), s3 = _mm_loadu_ps((const float *)(ri + 17));
    _MM_TRANSPOSE4_PS(s0, s1, s2, s3);
    const __m128i near_tie = _mm_and_si128(_mm_castps_si128(s0), scanned);
    if (!_mm_testz_si128(near_tie, near_tie)) { /* the flood */
      hicp__cpu_back(view, f, cert, wv, td, g, g + cnt, w);
      continue;
    }
    __m256 wk[2]; /* the walks (hicp__walk): cur, dcur | steps, cert */
    rec4_load4(&wv->w[g], m32, cnt == 4, wk);
    const __m256 cd = wk[0], sc = wk[1];
    const __m128i cur = _mm_castps_si128(_mm256_castps256_ps128(cd));
    const __m128 dcur = _mm256_extractf128_ps(cd, 1);
    /* the kd-tree answers (rare; never without guards, lib/model.c) */
    if (view->guard_r2 < HICP_FLT_INF && !guards_safe4(view, &wv->q[g], dcur, scanned)) {
      hicp__cpu_back(view, f, cert, wv, td, g, g + cnt, w);
      continue;
    }
    const __m128i steps = _mm_castps_si128(_mm256_castps256_ps128(sc));
    __m128 slack = _mm_setzero_ps();
    if (cert) { /* hicp__nn_slack */
      const __m128i wcert = _mm_castps_si128(_mm256_extractf128_ps(sc, 1));
      const __m128 sf = _mm_castsi128_ps(scanned);
      const __m128 rmin = _mm_blendv_ps(inf, s1, sf);
      const __m128 l2min = _mm_blendv_ps(inf, s2, sf);
      const __m128 safe = _mm_mask_i32gather_ps(_mm_setzero_ps(), view->safe_r2, cur,
                                                _mm_castsi128_ps(ball), 4);
      __m128 in_ball, in_cell;
      slacks4(dcur, safe, rmin, l2min, &in_ball, &in_cell);
      const __m128 cell = _mm_and_ps(
          _mm_and_ps(_mm_castsi128_ps(_mm_andnot_si128(_mm_cmpeq_epi32(wcert, zeroi), scanned)),
                     _mm_cmplt_ps(rmin, inf)),
          _mm_and_ps(_mm_cmpgt_ps(l2min, _mm_set1_ps(HICP_SLACK_L2MIN)), _mm_cmplt_ps(l2min, inf)));
      /* a row certificate's slack cut to the guards' reach: hicp__guard_cut */
      in_cell = _mm_min_ps(in_cell, _mm_set1_ps(view->guard_slack));
      slack = _mm_or_ps(_mm_and_ps(_mm_castsi128_ps(ball), in_ball), _mm_and_ps(cell, in_cell));
    }
    /* e2 = hicp__pair_e2 of the query (double) and the answer (vertex 0
     * in the lanes past the group, which rec4_load4 left 0) */
    uint32_t cu[4];
    _mm_storeu_si128((__m128i *)cu, cur);
    __m128 yx, yy, yz;
    vtx4_avx2(view->vtx, cu, &yx, &yy, &yz);
    const __m256i m64i = _mm256_castpd_si256(m64);
    const __m256d e2 =
        norm2_4(_mm256_sub_pd(_mm256_maskload_pd(td->qx + g, m64i), _mm256_cvtps_pd(yx)),
                _mm256_sub_pd(_mm256_maskload_pd(td->qy + g, m64i), _mm256_cvtps_pd(yy)),
                _mm256_sub_pd(_mm256_maskload_pd(td->qz + g, m64i), _mm256_cvtps_pd(yz)));
    /* hicp__track_update and hicp__cpu_done, walk by walk */
    float sl[4];
    uint32_t st[4];
    double ee[4];
    _mm_storeu_ps(sl, slack);
    _mm_storeu_si128((__m128i *)st, steps);
    _mm256_storeu_pd(ee, e2);
    for (uint32_t k = 0; k < cnt; k++) {
      const uint32_t i = td->at[g + k];
      hicp__track *t = &f->track[i];
      if (!cert) /* else the front (front_avx2 or front_avx512) wrote the query */
        memcpy(t->q, wv->q[g + k], sizeof t->q);
      t->slack = sl[k];
      f->match[i] = cu[k];
      f->e2[i] = ee[k];
      hicp__cpu_count(w, st[k], 1);
    }
  }
}

#endif /* HICP_CPU_ENDS_SIMD_H */
