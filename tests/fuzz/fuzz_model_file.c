/* fuzz_model_file.c: libFuzzer harness for the model-file loader.  The
 * bytes are written to an in-memory file and loaded; a load either fails
 * with a one-line message or gives a model on which queries terminate and
 * return indices in range (a forged file may give wrong answers, never a
 * crash).  Fuzz builds define HICP_FUZZING, which makes the loader skip its
 * checksums so that mutations reach the checks behind them. */
#include "config.h" /* _GNU_SOURCE, for memfd_create */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  hicp_context *ctx = fuzz_context(64u << 20);
  int fd = memfd_create("hicp-fuzz-model", MFD_CLOEXEC);
  if (fd < 0)
    return 0;
  size_t done = 0;
  while (done < size) {
    ssize_t w = write(fd, data + done, size - done);
    if (w <= 0) {
      close(fd);
      return 0;
    }
    done += (size_t)w;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  hicp_model *m = NULL;
  int rc = hicp_model_load(ctx, path, &m);
  if (rc == 0) {
    hicp_model_info info;
    hicp_model_info_init(&info);
    if (hicp_model_get_info(m, &info) != 0)
      abort();
    /* queries at a few places, by every method */
    float q[3 * 4] = {0, 0, 0, 1, -2, 3, -1e3f, 5e2f, 7, 0.25f, 0.5f, -0.75f};
    for (int d = 0; d < 3; d++)
      q[d] = (float)(0.5 * (info.bbox_min[d] + info.bbox_max[d]));
    for (int method = 0; method <= 5; method++) {
      hicp_nn_options no;
      hicp_nn_options_init(&no);
      no.method = (hicp_nn_method)method;
      uint32_t idx[4];
      float d2[4];
      if (hicp_nn_query(ctx, m, q, 4, &no, idx, d2, NULL) == 0)
        for (int i = 0; i < 4; i++)
          if (idx[i] >= info.points)
            abort();
    }
    hicp_model_destroy(m);
  } else {
    const char *msg = hicp_context_error(ctx);
    if (m != NULL || msg[0] == '\0' || strchr(msg, '\n') != NULL)
      abort();
  }
  close(fd);
  return 0;
}
