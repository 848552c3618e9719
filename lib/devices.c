/* devices.c: the public view of the CUDA devices (probe and description,
 * with the nearest NUMA node from hwloc) and of the CPU's vector code. */
#include "config.h"

#include <string.h>

#include "context.h"
#include "icp.h"
#include "topology.h"

void hicp_device_info_init_sized(hicp_device_info *info, size_t size)
{
  hicp__init_sized(info, size, NULL, 0);
}

int hicp_device_count(hicp_context *ctx)
{
  char why[256] = "";
  int n = hicp__gpu_count(why, sizeof why);
  if (n == 0 && ctx != NULL)
    hicp__fail(ctx, HICP_ENODEVICE, "%s", why);
  return n;
}

int hicp_device_get_info(hicp_context *ctx, int ordinal, hicp_device_info *out)
{
  if (out == NULL || out->struct_size < offsetof(hicp_device_info, numa_node) || ordinal < 0)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_device_get_info: bad argument");
  hicp__topology topo;
  hicp__gpu_info gi;
  if (hicp__gpu_describe(ordinal, &gi) != HICP_OK)
    return hicp__fail(ctx, HICP_ENODEVICE, "no CUDA device %d", ordinal);
  hicp_device_info info;
  memset(&info, 0, sizeof info);
  info.ordinal = gi.ordinal;
  memcpy(info.name, gi.name, sizeof info.name);
  info.cc_major = gi.cc_major;
  info.cc_minor = gi.cc_minor;
  info.multiprocessors = gi.sm_count;
  info.memory_bytes = gi.memory_bytes;
  memcpy(info.pci_bus_id, gi.pci_bus_id, sizeof info.pci_bus_id);
  info.numa_node = -1;
  if (hicp__topology_read(&topo) == HICP_OK)
    for (int g = 0; g < topo.ngpu; g++)
      if (topo.gpu[g].info.ordinal == ordinal)
        info.numa_node = topo.gpu[g].numa_os_index;
  info.struct_size = out->struct_size;
  memcpy(out, &info, out->struct_size < sizeof info ? out->struct_size : sizeof info);
  return HICP_OK;
}

const char *hicp_cpu_vector_code(void)
{
  switch (hicp__cpu_isa()) {
  case 3:
    return "avx512-scan8";
  case 2:
    return "avx512";
  case 1:
    return "avx2";
  default:
    return "scalar";
  }
}
