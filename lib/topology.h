/* topology.h: machine topology as hwloc sees it (topology.c). */
#ifndef HICP_TOPOLOGY_H
#define HICP_TOPOLOGY_H

#include "backend.h"

#define HICP_TOPO_MAX_NUMA 64
#define HICP_TOPO_MAX_GPU 64

typedef struct hicp__topo_numa {
  int os_index;
  int cores;
  uint64_t memory_bytes;
} hicp__topo_numa;

typedef struct hicp__topo_gpu {
  hicp__gpu_info info;
  int numa_os_index; /* nearest NUMA node, -1 if unknown */
} hicp__topo_gpu;

typedef struct hicp__topology {
  int packages, cores, pus, numa_nodes;
  char cpu_model[128];
  hicp__topo_numa numa[HICP_TOPO_MAX_NUMA];
  int ngpu;
  hicp__topo_gpu gpu[HICP_TOPO_MAX_GPU];
  char gpu_note[256]; /* why there is no GPU */
} hicp__topology;

int hicp__topology_read(hicp__topology *t);

/* Binds the calling thread (best effort; HICP_BIND=0 disables binding),
 * within the CPUs it is allowed (its creator's affinity): to the
 * `index`-th of the cores it may use (counted round; index < 0: left
 * unbound), or to the cores of the NUMA node nearest CUDA device `device`,
 * so that its host buffers land there. */
void hicp__bind_thread_core(int index);
/* The cores the calling thread may run on (those with a CPU in its
 * affinity), 0 when hwloc cannot say. */
int hicp__usable_cores(void);
void hicp__bind_thread_near_gpu(int device);

#endif /* HICP_TOPOLOGY_H */
