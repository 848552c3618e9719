/* order.c: Morton keys and a counting sort on them (order.h). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "order.h"

#define ZBITS 21
#define ZCELLS ((double)((1u << ZBITS) - 1u))

void hicp__zgrid_init(hicp__zgrid *g, const double lo[3], const double hi[3])
{
  double ext = 0.0;
  for (int d = 0; d < 3; d++) {
    g->lo[d] = lo[d];
    ext = hi[d] - lo[d] > ext ? hi[d] - lo[d] : ext;
  }
  g->scale = ext > 0.0 ? ZCELLS / ext : 0.0;
}

/* Spreads the low 21 bits of v to every third bit of a 63-bit word. */
static uint64_t spread3(uint64_t v)
{
  v &= 0x1fffffu;
  v = (v | v << 32) & 0x1f00000000ffffull;
  v = (v | v << 16) & 0x1f0000ff0000ffull;
  v = (v | v << 8) & 0x100f00f00f00f00full;
  v = (v | v << 4) & 0x10c30c30c30c30c3ull;
  v = (v | v << 2) & 0x1249249249249249ull;
  return v;
}

uint64_t hicp__zkey(const hicp__zgrid *g, double x, double y, double z)
{
  return spread3(hicp__zcell(g, 0, x)) | spread3(hicp__zcell(g, 1, y)) << 1 |
         spread3(hicp__zcell(g, 2, z)) << 2;
}

/* about one bucket per item, at least 2^3 and at most 2^21 */
static int zsort_bits(uint32_t n)
{
  int bits = 3;
  while (bits < 21 && ((uint32_t)1 << bits) < n)
    bits++;
  return bits;
}

size_t hicp__zsort_buckets(uint32_t n)
{
  return ((size_t)1 << zsort_bits(n)) + 1;
}

int hicp__zsort(const uint32_t *key, uint32_t n, uint32_t *order, uint32_t *inv,
                uint32_t *buckets)
{
  const int bits = zsort_bits(n);
  const int shift = 21 - bits;
  const size_t nb = (size_t)1 << bits;
  uint32_t *start = buckets != NULL ? buckets : malloc(sizeof *start * (nb + 1));
  if (start == NULL)
    return HICP_ENOMEM;
  memset(start, 0, sizeof *start * (nb + 1));
  for (uint32_t i = 0; i < n; i++)
    start[(key[i] >> shift) + 1]++;
  for (size_t b = 0; b < nb; b++)
    start[b + 1] += start[b];
  for (uint32_t i = 0; i < n; i++) {
    const uint32_t j = start[key[i] >> shift]++;
    order[j] = i;
    if (inv != NULL)
      inv[i] = j;
  }
  if (buckets == NULL)
    free(start);
  return HICP_OK;
}

int hicp__order_pays(const hicp_model *m, size_t n)
{
  const uint64_t bytes = (uint64_t)m->nv * (sizeof(hicp__vtx) + 3 * sizeof(uint32_t)) +
                         m->nedges * (sizeof(uint32_t) + 1);
  return n >= 4096 && bytes >= (UINT64_C(64) << 20);
}
