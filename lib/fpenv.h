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
 * On x86 the SSE unit's MXCSR is the whole environment of float and double
 * arithmetic (the x87 unit is only long double, which hicp does not use):
 * reading it costs a few cycles, and it is written only where it differs,
 * so a region in the default environment pays one read.  Elsewhere
 * <fenv.h> does it. */
#ifndef HICP_FPENV_H
#define HICP_FPENV_H

#if defined(__SSE2__) && (defined(__x86_64__) || defined(__i386__))
#include <xmmintrin.h>

/* All six exceptions masked, round to nearest, FTZ and DAZ off, no flag. */
#define HICP__MXCSR_DEFAULT 0x1f80u
/* The exception flags (bits 0-5): state, not settings. */
#define HICP__MXCSR_FLAGS 0x3fu

typedef struct {
  unsigned mxcsr;
} hicp__fpenv;

static inline void hicp__fpenv_enter(hicp__fpenv *saved)
{
  saved->mxcsr = _mm_getcsr();
  if ((saved->mxcsr & ~HICP__MXCSR_FLAGS) != HICP__MXCSR_DEFAULT)
    _mm_setcsr(HICP__MXCSR_DEFAULT);
}

/* The caller's settings and flags back, where they were changed. */
static inline void hicp__fpenv_leave(const hicp__fpenv *saved)
{
  if ((saved->mxcsr & ~HICP__MXCSR_FLAGS) != HICP__MXCSR_DEFAULT)
    _mm_setcsr(saved->mxcsr);
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
