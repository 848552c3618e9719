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
 * environment pays six reads.  Elsewhere <fenv.h> does it. */
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
/* The x87 status word's exception state: the six flags, the stack fault,
 * the error summary and busy bits (the rest are condition codes and the
 * stack top, which no caller keeps across a call). */
#define HICP__X87_FLAGS 0x80ffu

typedef struct {
  unsigned mxcsr;
  unsigned short x87cw, x87sw;
} hicp__fpenv;

static inline void hicp__fpenv_enter(hicp__fpenv *saved)
{
  saved->mxcsr = _mm_getcsr();
  if ((saved->mxcsr & ~HICP__MXCSR_FLAGS) != HICP__MXCSR_DEFAULT)
    _mm_setcsr(HICP__MXCSR_DEFAULT);
  __asm__ volatile("fnstcw %0" : "=m"(saved->x87cw));
  __asm__ volatile("fnstsw %0" : "=m"(saved->x87sw));
  if (saved->x87cw != HICP__X87_DEFAULT) {
    /* fldcw waits for a pending unmasked exception of the caller's, which
     * would be delivered here, inside the library (stop 65's second
     * review): cleared first, and put back on leaving, where the caller's
     * next x87 instruction meets it as it would have */
    if (saved->x87sw & 0x80u)
      __asm__ volatile("fnclex");
    const unsigned short cw = HICP__X87_DEFAULT;
    __asm__ volatile("fldcw %0" : : "m"(cw));
  }
}

/* The caller's settings and flags back, exactly: a flag the library raised
 * (an invalid operation in a check of a NaN option) is not the caller's,
 * and one the caller had stays set (stop 65's review: on x86 both went
 * wrong where the fenv.h fallback, fesetenv, was right).  MXCSR is written
 * whole; the x87 status word has no store of its own, so the environment
 * is read, the control word and flags put back in it, and loaded, only
 * where something differs (the x87 unit is used by glibc's text
 * conversions, not by hicp's arithmetic). */
static inline void hicp__fpenv_leave(const hicp__fpenv *saved)
{
  if (_mm_getcsr() != saved->mxcsr)
    _mm_setcsr(saved->mxcsr);
  unsigned short cw, sw;
  __asm__ volatile("fnstcw %0" : "=m"(cw));
  __asm__ volatile("fnstsw %0" : "=m"(sw));
  if (cw != saved->x87cw || (sw & HICP__X87_FLAGS) != (saved->x87sw & HICP__X87_FLAGS)) {
    /* fnstenv's 28-byte layout in 32- and 64-bit modes: the control word
     * at byte 0, the status word at byte 4 */
    unsigned short env[14];
    __asm__ volatile("fnstenv %0" : "=m"(env));
    env[0] = saved->x87cw;
    env[2] = (unsigned short)((env[2] & ~HICP__X87_FLAGS) | (saved->x87sw & HICP__X87_FLAGS));
    __asm__ volatile("fldenv %0" : : "m"(env));
  }
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
