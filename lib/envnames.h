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

static inline int hicp__env_blank(char c)
{
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* One count of the list at *s as libgomp's strtoul and its checks take it:
 * blanks, an optional '+', decimal digits, blanks; 0 where there are no
 * digits or the value is 0 or past a long (libgomp's (long) value <= 0),
 * else the value capped at 4096, with *s moved past it. */
static inline unsigned long hicp__env_count(const char **s)
{
  const char *d = *s;
  while (hicp__env_blank(*d))
    d++;
  if (*d == '+')
    d++;
  const char *digits = d;
  unsigned long long v = 0;
  int past = 0;
  for (; *d >= '0' && *d <= '9'; d++) {
    past |= v > (0x7fffffffffffffffull - (unsigned)(*d - '0')) / 10;
    v = past ? v : v * 10 + (unsigned)(*d - '0');
  }
  if (d == digits || v == 0 || past)
    return 0;
  while (hicp__env_blank(*d))
    d++;
  *s = d;
  return v > 4096 ? 4096 : (unsigned long)v;
}

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
  /* the first count; the list's further levels, which hicp leaves, must
   * still be counts, as libgomp refuses the whole value otherwise ("3 2",
   * "2,", "3,0": it warns and ignores it, so hicp does not take 3 or 2) */
  const unsigned long first = hicp__env_count(&s);
  if (first == 0)
    return 0;
  while (*s == ',') {
    s++;
    if (hicp__env_count(&s) == 0)
      return 0;
  }
  return *s == '\0' ? (int)first : 0;
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
