/* lzf.c: LZF decompression, written from the format's description.
 *
 * The stream is a sequence of runs, each starting with a control byte c:
 *   c < 32:  a literal run: copy the next c + 1 bytes;
 *   c >= 32: a back-reference of length (c >> 5) + 2, where a length field
 *            of 7 means "add the next byte"; the distance back is
 *            ((c & 31) << 8) + next byte + 1.
 * Back-references may overlap their own output (byte-by-byte copy). */
#include "config.h"

#include "io/lzf.h"

int hicp__lzf_decompress(const unsigned char *in, size_t in_len, unsigned char *out,
                         size_t out_len)
{
  size_t ip = 0, op = 0;
  while (ip < in_len) {
    unsigned c = in[ip++];
    if (c < 32) {
      size_t run = (size_t)c + 1;
      if (run > in_len - ip || run > out_len - op)
        return -1;
      for (size_t i = 0; i < run; i++)
        out[op++] = in[ip++];
    } else {
      size_t run = c >> 5;
      if (run == 7) {
        if (ip >= in_len)
          return -1;
        run += in[ip++];
      }
      run += 2;
      if (ip >= in_len)
        return -1;
      size_t back = ((size_t)(c & 31) << 8) + in[ip++] + 1;
      if (back > op || run > out_len - op)
        return -1;
      for (size_t i = 0; i < run; i++, op++)
        out[op] = out[op - back];
    }
  }
  return op == out_len ? 0 : -1;
}
