/* topology.c: what the machine offers (hwloc): cores, NUMA nodes, and the
 * NUMA node nearest each CUDA device.  Used by `hicp devices` and by the
 * scheduler to place CPU workers and host buffers. */
#include "config.h"

#include <hwloc.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "topology.h"

int hicp__topology_read(hicp__topology *t)
{
  memset(t, 0, sizeof *t);
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0)
    return HICP_EINTERNAL;
  /* PCI devices are needed to find the NUMA node of each GPU. */
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return HICP_EINTERNAL;
  }
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
