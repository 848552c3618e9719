/* cmd_devices.c: hicp devices: the CPU topology (hwloc) and the CUDA
 * devices with their nearest NUMA node. */
#include "config.h"

#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "budget.h"
#include "cgroup.h"
#include "cli.h"
#include "envnames.h"
#include "sysfs.h"

int cmd_devices(int argc, char **argv)
{
  int as_json = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--json") == 0) {
      as_json = 1;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: hicp devices [--json]\n\nCPU packages, cores, NUMA nodes, and the CUDA "
             "devices hicp can use (\"none\" is a fine answer).\n");
      return CLI_OK;
    } else {
      cli_error("devices: unknown option '%s'", argv[i]);
      return CLI_USAGE;
    }
  }
  hwloc_topology_t topo = NULL;
  int packages = 0, cores = 0, pus = 0, numa = 0, loaded = 0;
  if (hicp__hwloc_init(&topo) && (loaded = hicp__hwloc_load(topo)) == 1) {
    packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
  } else {
    topo = NULL; /* none made, or destroyed by hicp__hwloc_load */
  }
  cli_common common;
  cli_common_init(&common);
  hicp_context *ctx = cli_context(&common);
  if (ctx == NULL) {
    if (topo != NULL)
      hwloc_topology_destroy(topo);
    return CLI_FAIL;
  }
  int ngpu = hicp_device_count(ctx);
  char why[512];
  snprintf(why, sizeof why, "%s", hicp_context_error(ctx));
  /* the defaults a container or a unit's limits change (lib/cgroup.c) */
  int quota;
  uint64_t group;
  const int err = hicp__cgroup_process(&quota, &group);
  if (err != 0) {
    cli_error("cannot read the cgroup's limits: %s", strerror(err));
    hicp_context_destroy(ctx);
    if (topo != NULL)
      hwloc_topology_destroy(topo);
    return CLI_FAIL;
  }
  const uint64_t limit = hicp__limit_within(group);
  const char *limit_of = group != 0 && limit == group / 4 * 3 ? "cgroup" : "physical";
  json j;
  if (as_json) {
    json_begin(&j, stdout);
    json_int(&j, "packages", packages);
    json_int(&j, "cores", cores);
    json_int(&j, "hardware_threads", pus);
    json_int(&j, "threads_default", hicp_context_threads(ctx));
    json_int(&j, "cgroup_cpu_quota", quota);
    json_str(&j, "vector_code", hicp_cpu_vector_code());
    json_num(&j, "memory_limit_default_gb", (double)limit / 1e9);
    json_str(&j, "memory_limit_default_of", limit_of);
    json_array_begin(&j, "numa_nodes");
  } else {
    const int threads = hicp_context_threads(ctx);
    char why_threads[64] = "";
    const char *omp_limit = getenv("OMP_THREAD_LIMIT");
    if (omp_limit != NULL && atoi(omp_limit) == threads && (cores == 0 || cores > threads))
      snprintf(why_threads, sizeof why_threads, " (OMP_THREAD_LIMIT)");
    else if (hicp__env_num_threads(getenv("OMP_NUM_THREADS")) == threads)
      snprintf(why_threads, sizeof why_threads, " (OMP_NUM_THREADS)");
    else if (quota > 0 && threads == quota)
      snprintf(why_threads, sizeof why_threads, " (its cgroup's CPU quota)");
    if (packages > 0)
      printf("cpu          %d package%s, %d cores, %d hardware threads; hicp uses %d thread%s%s, "
             "%s code\n",
             packages, packages == 1 ? "" : "s", cores, pus, threads, threads == 1 ? "" : "s",
             why_threads, hicp_cpu_vector_code());
    else
      printf("cpu          topology unknown (%s); hicp uses %d thread%s%s, %s code\n",
             loaded < 0 ? "hwloc's HWLOC_* settings describe another machine"
                        : "hwloc cannot read it",
             threads, threads == 1 ? "" : "s", why_threads, hicp_cpu_vector_code());
    printf("memory       %.3g GB a call by default (3/4 of %s)\n", (double)limit / 1e9,
           limit_of[0] == 'c' ? "its cgroup's memory limit" : "physical memory");
    printf("numa         %d node%s\n", numa, numa == 1 ? "" : "s");
  }
  for (int i = 0; i < numa; i++) {
    hwloc_obj_t nn = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, (unsigned)i);
    int ncore = hwloc_get_nbobjs_inside_cpuset_by_type(topo, nn->cpuset, HWLOC_OBJ_CORE);
    double gb = nn->attr ? (double)nn->attr->numanode.local_memory / 1e9 : 0.0;
    if (as_json) {
      json_object_begin(&j, NULL);
      json_int(&j, "node", nn->os_index);
      json_int(&j, "cores", ncore);
      json_num(&j, "memory_gb", gb);
      json_object_end(&j);
    } else {
      printf("  node %u     %d cores, %.1f GB\n", nn->os_index, ncore, gb);
    }
  }
  if (as_json) {
    json_array_end(&j);
    json_array_begin(&j, "cuda_devices");
  } else if (ngpu == 0) {
    printf("cuda         none (%s)\n", why);
  } else {
    printf("cuda         %d device%s\n", ngpu, ngpu == 1 ? "" : "s");
  }
  for (int g = 0; g < ngpu; g++) {
    hicp_device_info di;
    hicp_device_info_init(&di);
    if (hicp_device_get_info(ctx, g, &di) != HICP_OK)
      continue;
    if (as_json) {
      json_object_begin(&j, NULL);
      json_int(&j, "ordinal", di.ordinal);
      json_str(&j, "name", di.name);
      json_int(&j, "cc_major", di.cc_major);
      json_int(&j, "cc_minor", di.cc_minor);
      json_int(&j, "multiprocessors", di.multiprocessors);
      json_num(&j, "memory_gb", (double)di.memory_bytes / 1e9);
      json_str(&j, "pci_bus_id", di.pci_bus_id);
      json_int(&j, "numa_node", di.numa_node);
      json_object_end(&j);
    } else {
      char node[16];
      if (di.numa_node >= 0)
        snprintf(node, sizeof node, "%d", di.numa_node);
      else
        snprintf(node, sizeof node, "unknown");
      printf("  gpu %d      %s, sm_%d%d, %d SMs, %.1f GB, PCI %s, NUMA node %s\n", di.ordinal,
             di.name, di.cc_major, di.cc_minor, di.multiprocessors,
             (double)di.memory_bytes / 1e9, di.pci_bus_id, node);
    }
  }
  if (as_json) {
    json_array_end(&j);
    if (ngpu == 0)
      json_str(&j, "cuda_note", why);
    json_end(&j);
  }
  hicp_context_destroy(ctx);
  if (topo != NULL)
    hwloc_topology_destroy(topo);
  return CLI_OK; /* main checks that standard output took it all */
}
