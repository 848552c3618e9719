/* fuzz_cloud.c: libFuzzer harness for one point-cloud reader (FUZZ_FORMAT:
 * a hicp_format value), through the in-memory entry point the file readers
 * share.  Whatever the bytes, the parser must either return a cloud whose
 * every coordinate is finite and every triangle index in range, or fail with
 * a one-line message; never crash, hang or allocate beyond the context's
 * memory limit (64 MiB here, so a lying header is caught by the budget). */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cloud.h"
#include "fuzz.h"

#ifndef FUZZ_FORMAT
#define FUZZ_FORMAT HICP_FORMAT_AUTO
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  hicp_context *ctx = fuzz_context(64u << 20);
  /* the readers' contract: one NUL past the end (hicp__read_file adds it) */
  unsigned char *buf = malloc(size + 1);
  if (buf == NULL)
    return 0;
  if (size)
    memcpy(buf, data, size);
  buf[size] = '\0';
  hicp_cloud *c = NULL;
  int rc = hicp__cloud_parse(ctx, "fuzz-input", buf, size, FUZZ_FORMAT, NULL, &c);
  if (rc == 0) {
    size_t n = hicp_cloud_size(c);
    const float *p = hicp_cloud_xyz(c);
    if (n == 0 || p == NULL)
      abort();
    for (size_t i = 0; i < 3 * n; i++)
      if (!isfinite(p[i]))
        abort();
    size_t nt = hicp_cloud_triangle_count(c);
    const uint32_t *t = hicp_cloud_triangles(c);
    for (size_t i = 0; i < 3 * nt; i++)
      if (t[i] >= n)
        abort();
    hicp_cloud_destroy(c);
  } else {
    const char *msg = hicp_context_error(ctx);
    if (c != NULL || msg[0] == '\0' || strchr(msg, '\n') != NULL || rc > 0)
      abort();
  }
  free(buf);
  return 0;
}
