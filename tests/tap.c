/* tap.c: what the plain TAP test programs share (tap.h). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "synth.h"
#include "tap.h"

static int ntests, nfailed;

void tap_report(int ok, const char *name, const char *why)
{
  ntests++;
  nfailed += !ok;
  printf("%s %d - %s%s%s\n", ok ? "ok" : "not ok", ntests, name, ok ? "" : ": ", ok ? "" : why);
  fflush(stdout);
}

int tap_failed(void)
{
  return nfailed;
}

float *tap_surface(size_t n, uint64_t seed)
{
  float *p = malloc(sizeof(float) * 3 * n);
  if (p == NULL)
    abort();
  synth_rng r;
  synth_seed(&r, seed);
  for (size_t i = 0; i < n; i++) {
    double u = 2.0 * M_PI * synth_uniform(&r), v = acos(2.0 * synth_uniform(&r) - 1.0);
    double rad = 1.0 + 0.08 * sin(5.0 * u) * sin(4.0 * v);
    p[3 * i] = (float)(rad * cos(u) * sin(v));
    p[3 * i + 1] = (float)(rad * 0.7 * sin(u) * sin(v));
    p[3 * i + 2] = (float)(rad * 0.5 * cos(v));
  }
  return p;
}
