/* pp/hd.h: what lets the per-point headers compile as C (gcc, cpu/) and as
 * CUDA (nvcc, gpu/).
 *
 * Bit-identical results depend on both compilers evaluating the same
 * expressions with the same IEEE operations: the build passes
 * -ffp-contract=off to gcc and -fmad=false to nvcc (no fused multiply-add),
 * never fast-math, and the per-point code uses only + - * / and sqrt, which
 * IEEE 754 rounds correctly on both sides.  Expressions are written with the
 * intended association made explicit where it matters. */
#ifndef HICP_PP_HD_H
#define HICP_PP_HD_H

#include <stdint.h>

/* Each float operation rounded to float (FLT_EVAL_METHOD 0), as IEEE 754
 * single precision on the GPU rounds it.  The x87 unit keeps floats in
 * 80 bits (i386's default): ties then broke differently and walks could
 * cycle.  configure adds -msse2 -mfpmath=sse or -fexcess-precision=fast
 * where needed; this catches a build that bypassed it. */
#if defined(__FLT_EVAL_METHOD__) && __FLT_EVAL_METHOD__ != 0 && !defined(__CUDA_ARCH__)
#error "hicp needs float arithmetic rounded to float (FLT_EVAL_METHOD 0): on i386 build with -msse2 -mfpmath=sse"
#endif

#if defined(__CUDACC__)
#define HICP_PP static __host__ __device__ __forceinline__
#define HICP_RESTRICT __restrict__
#else
/* Always inlined: the per-point helpers are generic code called from the
 * AVX2 and AVX-512 variants (cpu/walk_simd.c), and one left out of line
 * (hicp__nn_start) made coherent queries on a 10k model 5x slower (70 ->
 * 370 ns), most likely from switching between legacy-SSE and AVX-512
 * register state at each call. */
#define HICP_PP static inline __attribute__((always_inline))
#define HICP_RESTRICT restrict
#endif

/* Full unrolling of a short fixed loop: on the GPU it keeps small arrays
 * indexed by the loop (the 4x4 matrices of Horn's solve) in registers
 * instead of local memory; gcc unrolls these loops by itself.  It changes
 * no operation, so no bit.  Only in nvcc's device pass: its host pass
 * hands the pragma to the host compiler, which does not know it
 * (-Wunknown-pragmas). */
#if defined(__CUDA_ARCH__)
#define HICP_UNROLL _Pragma("unroll")
#else
#define HICP_UNROLL
#endif

#if defined(__CUDA_ARCH__)
#define HICP_SQRT(x) __dsqrt_rn(x)
#define HICP_SQRTF(x) __fsqrt_rn(x)
#else
#include <math.h>
#define HICP_SQRT(x) sqrt(x)
#define HICP_SQRTF(x) sqrtf(x)
#endif

#define HICP_FLT_EPS 1.19209290e-07f /* 2^-23 */
#define HICP_FLT_MIN 1.17549435e-38f /* smallest normal float */
#if defined(__CUDA_ARCH__)
#define HICP_FLT_INF (__int_as_float(0x7f800000))
#else
#define HICP_FLT_INF (__builtin_inff())
#endif
#define HICP_NONE UINT32_MAX        /* "no vertex" */

#endif /* HICP_PP_HD_H */
