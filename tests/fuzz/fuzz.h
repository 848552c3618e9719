/* fuzz.h: what the libFuzzer harnesses share. */
#ifndef HICP_FUZZ_H
#define HICP_FUZZ_H

#include <stdint.h>
#include <stdlib.h>

#include "hicp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One single-threaded context for the whole run, created on first use;
 * memory_limit 0 is the library's default. */
static inline hicp_context *fuzz_context(uint64_t memory_limit)
{
  static hicp_context *ctx;
  if (ctx == NULL) {
    hicp_context_options o;
    hicp_context_options_init(&o);
    o.threads = 1;
    o.memory_limit = memory_limit;
    if (hicp_context_create(&o, &ctx) != 0)
      abort();
  }
  return ctx;
}

#endif /* HICP_FUZZ_H */
