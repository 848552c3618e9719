/* envnames.h: the values of the environment settings the library reads
 * (hicp(1), ENVIRONMENT), for the library and for the CLI.  The library
 * takes an unknown value as the default, since it never fails for its
 * environment; the CLI refuses one with a line naming it, so that a
 * mistyped setting in a comparison is not silently measured as the
 * default. */
#ifndef HICP_ENVNAMES_H
#define HICP_ENVNAMES_H

/* HICP_SIMD: the walks' and sums' variant (cpu/walk_simd.c), in the
 * order of hicp__cpu_isa's levels */
static const char *const hicp__simd_names[] = {"scalar", "avx2", "avx512", "avx512-scan8", 0};
/* HICP_BIND: 0 leaves device workers unbound (lib/topology.c) */
static const char *const hicp__bind_names[] = {"0", "1", 0};
/* HICP_QORDER: the queries' order off or on, for measurements (lib/nn.c) */
static const char *const hicp__qorder_names[] = {"0", "1", 0};
/* HICP_THREADS_ADAPT: 0 runs a registration on all its context's threads
 * however busy the CPUs are (lib/contention.c) */
static const char *const hicp__adapt_names[] = {"0", "1", 0};
/* HICP_GPU_FAULT: the tests' fault injection, read by the CUDA backend
 * (gpu/gpu_backend.cu); any other value injects nothing */
static const char *const hicp__gpu_fault_names[] = {"alloc", "kernel", "lost", 0};

/* OMP_NUM_THREADS where the user set it, read as libgomp reads it: a
 * positive decimal count, the first of a list (its outermost level),
 * blanks around it; 0 where unset or malformed (libgomp warns of a
 * malformed one and ignores it).  Batch systems and job scripts set it to
 * the CPUs they give a process (OMP_NUM_THREADS=1 beside MPI ranks that
 * are not bound), and one thread per core of the machine beside them
 * waits on the others at every pass (stop 69's review: it was ignored,
 * and the count came from the cores). */
static inline int hicp__env_num_threads(const char *s)
{
  if (s == NULL)
    return 0;
  while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\f' || *s == '\v')
    s++;
  unsigned long v = 0;
  const char *d = s;
  for (; *d >= '0' && *d <= '9'; d++)
    v = v > 4096 ? v : v * 10 + (unsigned long)(*d - '0');
  if (d == s || v == 0 || d - s > 18) /* libgomp refuses what overflows */
    return 0;
  /* the rest: blanks, or further levels of the list, which hicp leaves */
  for (; *d != '\0'; d++)
    if (!(*d == ',' || *d == ' ' || *d == '\t' || (*d >= '0' && *d <= '9')))
      return 0;
  return v > 4096 ? 4096 : (int)v;
}

/* The index of value in names, or -1. */
static inline int hicp__env_index(const char *const *names, const char *value)
{
  for (int i = 0; names[i] != 0; i++) {
    const char *a = names[i], *b = value;
    while (*a != '\0' && *a == *b)
      a++, b++;
    if (*a == '\0' && *b == '\0')
      return i;
  }
  return -1;
}

#endif /* HICP_ENVNAMES_H */
