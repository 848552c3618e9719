/* backend.h: what lib/ asks of the CUDA backend (gpu/).  gpu/gpu_backend.cu
 * implements it when configure finds CUDA; gpu/gpu_stub.c otherwise, where
 * every probe answers "no device".  No CUDA type appears here. */
#ifndef HICP_BACKEND_H
#define HICP_BACKEND_H

#include "internal.h"

/* A CUDA device as `hicp devices` shows it. */
typedef struct hicp__gpu_info {
  int ordinal;
  char name[128];
  int cc_major, cc_minor;
  int sm_count;
  uint64_t memory_bytes;
  char pci_bus_id[32];     /* "0000:65:00.0", for hwloc's NUMA lookup */
} hicp__gpu_info;

/* Number of usable CUDA devices (0 with the reason in `why` when none). */
int hicp__gpu_count(char *why, size_t why_len);
/* Describes device `ordinal`. 0 or HICP_ENODEVICE/HICP_EDEVICE. */
int hicp__gpu_describe(int ordinal, hicp__gpu_info *info);
/* Frees the context's device state (streams, buffers, uploaded models). */
void hicp__gpu_release(hicp_context *ctx);
/* 1 when this build has the CUDA backend. */
int hicp__gpu_compiled(void);

struct hicp__frame;
struct hicp__plan;
struct hicp__icp_out;
struct hicp__xf;

/* Runs a whole registration on the context's first CUDA device: the model
 * is uploaded once per context (cached by its uid), the scan copied, and
 * the iteration loop runs inside one persistent kernel (grid-wide barriers
 * between passes) so the host waits only once, at the end.  Same results,
 * bit for bit, as the CPU loop.  Returns 0, HICP_ENODEVICE, HICP_EDEVICE
 * (with the CUDA message) or HICP_ENOMEM (device memory). */
int hicp__gpu_register(hicp_context *ctx, const hicp_model *m, const struct hicp__frame *f,
                       const struct hicp__plan *p, const struct hicp__xf *T0,
                       double t_start, struct hicp__icp_out *out);

/* Nearest vertex of n queries (model-relative floats) on the GPU; `vertex`
 * holds warm starts on entry (HICP_NONE for none) and answers on exit. */
int hicp__gpu_nn(hicp_context *ctx, const hicp_model *m, const float *q, size_t n, int method,
                 uint32_t *vertex, float *d2, hicp_walk_stats *stats);

#endif /* HICP_BACKEND_H */
