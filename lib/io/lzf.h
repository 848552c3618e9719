/* lzf.h: LZF decompression (the compression of PCL's binary_compressed). */
#ifndef HICP_IO_LZF_H
#define HICP_IO_LZF_H

#include <stddef.h>

/* Decompresses `in` into exactly `out_len` bytes of `out`.  Returns 0, or
 * -1 if the stream is malformed or does not produce exactly out_len bytes.
 * Every read and write is bounds-checked. */
int hicp__lzf_decompress(const unsigned char *in, size_t in_len, unsigned char *out,
                         size_t out_len);

#endif /* HICP_IO_LZF_H */
