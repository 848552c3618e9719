/* names.c: names of the public enumerations, for the CLI and for JSON. */
#include "config.h"

#include <string.h>

#include "hicp.h"

static const char *const backend_names[] = {"auto", "cpu", "cuda", "hybrid"};
static const char *const nn_names[] = {"pnn-opt", "brute", "kdtree", "zero", "kdann", "pnn"};
static const char *const stop_names[] = {"max-iter",  "mse-change", "mse-abs", "increment",
                                         "no-pairs", "canceled",   "timeout"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int lookup(const char *const *names, size_t n, const char *name)
{
  if (name == NULL)
    return -1;
  for (size_t i = 0; i < n; i++)
    if (strcmp(names[i], name) == 0)
      return (int)i;
  return -1;
}

int hicp_backend_from_name(const char *name, hicp_backend *out)
{
  int i = lookup(backend_names, COUNT(backend_names), name);
  if (i < 0 || out == NULL)
    return HICP_EINVAL;
  *out = (hicp_backend)i;
  return HICP_OK;
}

const char *hicp_backend_name(hicp_backend backend)
{
  return (unsigned)backend < COUNT(backend_names) ? backend_names[backend] : "unknown";
}

int hicp_nn_method_from_name(const char *name, hicp_nn_method *out)
{
  int i = lookup(nn_names, COUNT(nn_names), name);
  if (i < 0 || out == NULL)
    return HICP_EINVAL;
  *out = (hicp_nn_method)i;
  return HICP_OK;
}

const char *hicp_nn_method_name(hicp_nn_method method)
{
  return (unsigned)method < COUNT(nn_names) ? nn_names[method] : "unknown";
}

const char *hicp_stop_name(hicp_stop stop)
{
  return (unsigned)stop < COUNT(stop_names) ? stop_names[stop] : "unknown";
}
