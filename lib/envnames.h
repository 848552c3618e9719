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
