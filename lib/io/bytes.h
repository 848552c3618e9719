/* bytes.h: binary file values by their stated byte order, whatever the
 * host's (PLY's little or big endian, PCD's little endian).  The value is
 * built from its bytes as an integer, never copied into a wider one's
 * first bytes, which is right on a little-endian host only (s390x read a
 * PCD's 4-byte integers 2^32 times too large so). */
#ifndef HICP_IO_BYTES_H
#define HICP_IO_BYTES_H

#include <stdint.h>
#include <string.h>

/* The unsigned integer of the n bytes (1 to 8) at p, little-endian, or
 * big-endian when `big`. */
static inline uint64_t hicp__bytes_uint(const unsigned char *p, unsigned n, int big)
{
  uint64_t u = 0;
  for (unsigned i = 0; i < n; i++)
    u = u << 8 | p[big ? i : n - 1 - i];
  return u;
}

/* An n-byte two's complement integer (1 to 8 bytes) as read by
 * hicp__bytes_uint, sign-extended. */
static inline int64_t hicp__bytes_int(uint64_t u, unsigned n)
{
  const int shift = 64 - 8 * (int)n;
  return (int64_t)(u << shift) >> shift;
}

/* An IEEE float or double from its bits, as read by hicp__bytes_uint (a
 * host keeps a float's bytes in the order of an integer of its size). */
static inline float hicp__bytes_float(uint64_t u)
{
  const uint32_t w = (uint32_t)u;
  float v;
  memcpy(&v, &w, sizeof v);
  return v;
}

static inline double hicp__bytes_double(uint64_t u)
{
  double v;
  memcpy(&v, &u, sizeof v);
  return v;
}

#endif /* HICP_IO_BYTES_H */
