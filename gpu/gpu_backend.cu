/* gpu_backend.cu: the CUDA backend's device probing and context state. */
#include "config.h"

#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

extern "C" {
#include "backend.h"
}

extern "C" int hicp__gpu_compiled(void)
{
  return 1;
}

extern "C" int hicp__gpu_count(char *why, size_t why_len)
{
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why != NULL && why_len > 0)
      snprintf(why, why_len, "no usable CUDA device (%s)", cudaGetErrorString(e));
    cudaGetLastError(); /* clear the sticky-free error state */
    return 0;
  }
  if (n == 0 && why != NULL && why_len > 0)
    snprintf(why, why_len, "no CUDA device found");
  return n;
}

extern "C" int hicp__gpu_describe(int ordinal, hicp__gpu_info *info)
{
  cudaDeviceProp p;
  if (cudaGetDeviceProperties(&p, ordinal) != cudaSuccess) {
    cudaGetLastError();
    return HICP_ENODEVICE;
  }
  memset(info, 0, sizeof *info);
  info->ordinal = ordinal;
  snprintf(info->name, sizeof info->name, "%s", p.name);
  info->cc_major = p.major;
  info->cc_minor = p.minor;
  info->sm_count = p.multiProcessorCount;
  info->memory_bytes = p.totalGlobalMem;
  snprintf(info->pci_bus_id, sizeof info->pci_bus_id, "%04x:%02x:%02x.0", p.pciDomainID,
           p.pciBusID, p.pciDeviceID);
  return HICP_OK;
}

extern "C" void hicp__gpu_release(hicp_context *ctx)
{
  (void)ctx;
}
