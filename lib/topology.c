/* topology.c: what the machine offers (hwloc): cores, NUMA nodes, and the
 * NUMA node nearest each CUDA device.  Used by `hicp devices` and by the
 * scheduler to place CPU workers and host buffers. */
#include "config.h"

#include <hwloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "envnames.h"
#include "sysfs.h"
#include "topology.h"

/* Loads *t, with the PCI devices (to find a GPU's NUMA node) when `io`;
 * 1 when loaded. */
static int load_topology(hwloc_topology_t *t, int io)
{
  if (!hicp__hwloc_init(t))
    return 0;
  if (io)
    hwloc_topology_set_io_types_filter(*t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  return hicp__hwloc_load(*t) == 1;
}

int hicp__topology_read(hicp__topology *t)
{
  memset(t, 0, sizeof *t);
  hwloc_topology_t topo;
  if (!load_topology(&topo, 1)) /* PCI devices: the NUMA node of each GPU */
    return HICP_EINTERNAL;
  t->packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
  t->cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  t->pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  t->numa_nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  hwloc_obj_t root = hwloc_get_root_obj(topo);
  const char *model = hwloc_obj_get_info_by_name(root, "CPUModel");
  if (model == NULL) {
    hwloc_obj_t pkg = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
    if (pkg != NULL)
      model = hwloc_obj_get_info_by_name(pkg, "CPUModel");
  }
  snprintf(t->cpu_model, sizeof t->cpu_model, "%s", model != NULL ? model : "unknown");
  for (int i = 0; i < t->numa_nodes && i < HICP_TOPO_MAX_NUMA; i++) {
    hwloc_obj_t nn = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
    t->numa[i].os_index = (int)nn->os_index;
    t->numa[i].memory_bytes = nn->attr != NULL ? nn->attr->numanode.local_memory : 0;
    t->numa[i].cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, nn->cpuset, HWLOC_OBJ_CORE);
  }
  char why[256];
  int ngpu = hicp__gpu_count(why, sizeof why);
  snprintf(t->gpu_note, sizeof t->gpu_note, "%s", ngpu > 0 ? "" : why);
  for (int g = 0; g < ngpu && g < HICP_TOPO_MAX_GPU; g++) {
    hicp__gpu_info gi;
    if (hicp__gpu_describe(g, &gi) != HICP_OK)
      continue;
    hicp__topo_gpu *tg = &t->gpu[t->ngpu++];
    tg->info = gi;
    tg->numa_os_index = -1;
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    if (sscanf(gi.pci_bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) == 4) {
      hwloc_obj_t pci = hwloc_get_pcidev_by_busid(topo, dom, bus, dev, fn);
      hwloc_obj_t anc = pci != NULL ? hwloc_get_non_io_ancestor_obj(topo, pci) : NULL;
      if (anc != NULL && anc->nodeset != NULL) {
        int node = hwloc_bitmap_first(anc->nodeset);
        tg->numa_os_index = node;
      }
    }
  }
  hwloc_topology_destroy(topo);
  return HICP_OK;
}

/* One topology for the process, loaded once: binding threads needs it on
 * every batch, and loading takes milliseconds. */
static hwloc_topology_t shared_topo;
static int shared_ok;
static pthread_once_t shared_once = PTHREAD_ONCE_INIT;

static void load_shared(void)
{
  shared_ok = load_topology(&shared_topo, 1);
}

static int binding_wanted(void)
{
  const char *e = getenv("HICP_BIND");
  return e == NULL || hicp__env_index(hicp__bind_names, e) != 0;
}

/* The CPUs the calling thread may run on: what its creator allowed
 * (taskset, numactl, a batch system's cpuset), which a binding must stay
 * within.  NULL when hwloc cannot say. */
static hwloc_bitmap_t allowed_cpus(hwloc_topology_t topo)
{
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (set != NULL && (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_THREAD) != 0 ||
                      hwloc_bitmap_iszero(set))) {
    hwloc_bitmap_free(set);
    set = NULL;
  }
  return set;
}

/* Binds the calling thread to the CPUs of `where` it is allowed, if any. */
static void bind_within(hwloc_const_cpuset_t where, hwloc_const_bitmap_t allowed)
{
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (set == NULL)
    return;
  hwloc_bitmap_and(set, where, allowed);
  if (!hwloc_bitmap_iszero(set))
    hwloc_set_cpubind(shared_topo, set, HWLOC_CPUBIND_THREAD); /* best effort */
  hwloc_bitmap_free(set);
}

/* The cores of `topo` that share a CPU with `allowed`, how many (*count),
 * and the index-th of them counted round (NULL when there is none).  A
 * core with one of its hardware threads allowed counts: `taskset -c 1`
 * allows a core where core 0 is CPUs 0 and 1. */
static hwloc_obj_t core_within(hwloc_topology_t topo, hwloc_const_bitmap_t allowed, int index,
                               int *count)
{
  int k = 0;
  for (hwloc_obj_t c = NULL; (c = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, c)) != NULL;)
    k += hwloc_bitmap_intersects(c->cpuset, allowed);
  *count = k;
  if (k == 0 || index < 0)
    return NULL;
  int want = index % k;
  for (hwloc_obj_t c = NULL; (c = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, c)) != NULL;)
    if (hwloc_bitmap_intersects(c->cpuset, allowed) && want-- == 0)
      return c;
  return NULL;
}

void hicp__bind_thread_core(int index)
{
  if (!binding_wanted() || index < 0)
    return;
  pthread_once(&shared_once, load_shared);
  if (!shared_ok)
    return;
  hwloc_bitmap_t allowed = allowed_cpus(shared_topo);
  if (allowed == NULL)
    return;
  int k;
  hwloc_obj_t core = core_within(shared_topo, allowed, index, &k);
  if (core != NULL)
    bind_within(core->cpuset, allowed);
  hwloc_bitmap_free(allowed);
}

/* The machine's cores, loaded once (no I/O devices: quicker than the
 * shared topology, and all that counting cores needs). */
static hwloc_topology_t cores_topo;
static int cores_ok;
static pthread_once_t cores_once = PTHREAD_ONCE_INIT;

static void load_cores(void)
{
  cores_ok = load_topology(&cores_topo, 0);
}

int hicp__usable_cores(void)
{
  pthread_once(&cores_once, load_cores);
  if (!cores_ok)
    return 0;
  /* the caller's affinity now (one system call), not the first caller's */
  int n = 0;
  hwloc_bitmap_t allowed = allowed_cpus(cores_topo);
  if (allowed != NULL)
    (void)core_within(cores_topo, allowed, -1, &n);
  else
    n = hwloc_get_nbobjs_by_type(cores_topo, HWLOC_OBJ_CORE);
  hwloc_bitmap_free(allowed);
  return n;
}

void hicp__bind_thread_near_gpu(int device)
{
  if (!binding_wanted())
    return;
  pthread_once(&shared_once, load_shared);
  hicp__gpu_info gi;
  if (!shared_ok || hicp__gpu_describe(device, &gi) != HICP_OK)
    return;
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  if (sscanf(gi.pci_bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4)
    return;
  hwloc_obj_t pci = hwloc_get_pcidev_by_busid(shared_topo, dom, bus, dev, fn);
  hwloc_obj_t anc = pci != NULL ? hwloc_get_non_io_ancestor_obj(shared_topo, pci) : NULL;
  /* The thread runs on the cores of the GPU's NUMA node, so the host
   * buffers it allocates (first touch) live in that node's memory: those
   * it is allowed, or where it was if it is allowed none of them. */
  hwloc_bitmap_t allowed = anc != NULL && anc->cpuset != NULL ? allowed_cpus(shared_topo) : NULL;
  if (allowed != NULL)
    bind_within(anc->cpuset, allowed);
  hwloc_bitmap_free(allowed);
}
