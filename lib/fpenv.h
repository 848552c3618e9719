/* fpenv.h: the floating-point environment hicp computes in, whatever the
 * caller's.
 *
 * Exact nearest neighbours and bits that do not change with the thread
 * count or the backend assume IEEE 754's default environment: round to
 * nearest, subnormals kept, exceptions masked (a GPU always computes so).
 * A caller may have another: a program built with gcc's -ffast-math or
 * -Ofast sets flush-to-zero and denormals-are-zero at start-up in every
 * thread; interval code sets a directed rounding; a debugging build
 * unmasks the invalid-operation trap.  Under FTZ/DAZ every method, brute
 * force included, answered a point 1e-20 away where one was at 0; under
 * upward rounding a registration's bits changed with the thread count and
 * from run to run (stop 64's review).  So every public call that computes
 * sets the default environment on its thread and gives the caller's back
 * on return, and every parallel region does the same on each of its
 * threads: a libgomp pool thread keeps the environment of the thread that
 * created it, which may be the caller's from long before.  Threads the
 * library creates itself inherit the default from their creator.
 *
 * On x86 the SSE unit's MXCSR is the environment of float and double
 * arithmetic, and the x87 unit's control word that of long double, which
 * hicp does not use, and of the C library: glibc's strtod and printf round
 * as fegetround() says, which on x86-64 reads the x87 word (stop 64's
 * second review: a text file read under upward rounding gave other
 * coordinates with MXCSR alone reset).  Reading each costs a few cycles,
 * and each is written only where it differs, so a region in the default
 * environment pays two reads.  Elsewhere <fenv.h> does it. */
#ifndef HICP_FPENV_H
#define HICP_FPENV_H

/* (i386 computes in SSE only with -mfpmath=sse, which configure adds:
 * __SSE2_MATH__; else its doubles are the x87's, and <fenv.h> sets both) */
#if (defined(__x86_64__) || (defined(__i386__) && defined(__SSE2_MATH__))) && defined(__GNUC__)
#include <xmmintrin.h>

/* All six exceptions masked, round to nearest, FTZ and DAZ off, no flag. */
#define HICP__MXCSR_DEFAULT 0x1f80u
/* The exception flags (bits 0-5): state, not settings. */
#define HICP__MXCSR_FLAGS 0x3fu
/* The x87 control word: exceptions masked, 64-bit precision, round to
 * nearest (what fninit sets, and fesetenv(FE_DFL_ENV)). */
#define HICP__X87_DEFAULT 0x037fu

typedef struct {
  unsigned mxcsr;
  unsigned short x87;
} hicp__fpenv;

static inline void hicp__fpenv_enter(hicp__fpenv *saved)
{
  saved->mxcsr = _mm_getcsr();
  if ((saved->mxcsr & ~HICP__MXCSR_FLAGS) != HICP__MXCSR_DEFAULT)
    _mm_setcsr(HICP__MXCSR_DEFAULT);
  __asm__ volatile("fnstcw %0" : "=m"(saved->x87));
  if (saved->x87 != HICP__X87_DEFAULT) {
    const unsigned short cw = HICP__X87_DEFAULT;
    __asm__ volatile("fldcw %0" : : "m"(cw));
  }
}

/* The caller's settings and flags back, where they were changed. */
static inline void hicp__fpenv_leave(const hicp__fpenv *saved)
{
  if ((saved->mxcsr & ~HICP__MXCSR_FLAGS) != HICP__MXCSR_DEFAULT)
    _mm_setcsr(saved->mxcsr);
  /* (the flags cleared first: one the library raised, under a mask the
   * caller's word lifts, would trap at the caller's next x87 instruction) */
  if (saved->x87 != HICP__X87_DEFAULT)
    __asm__ volatile("fnclex\n\tfldcw %0" : : "m"(saved->x87));
}

#else
#include <fenv.h>

typedef struct {
  fenv_t env;
} hicp__fpenv;

static inline void hicp__fpenv_enter(hicp__fpenv *saved)
{
  fegetenv(&saved->env);
  fesetenv(FE_DFL_ENV);
}

static inline void hicp__fpenv_leave(const hicp__fpenv *saved)
{
  fesetenv(&saved->env);
}
#endif

#endif
