/* cloud.h: the point-cloud object and the file readers' common ground. */
#ifndef HICP_CLOUD_H
#define HICP_CLOUD_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "internal.h"

struct hicp_cloud {
  size_t n;
  float *xyz;        /* 3n floats, relative to origin */
  double origin[3];
  size_t ntri;
  uint32_t *tri;     /* 3 ntri vertex indices */
};

/* What a reader produces: coordinates in double (files may hold doubles with
 * more precision than a float keeps) and triangles. */
typedef struct hicp__raw_cloud {
  size_t n;
  double *xyz;       /* 3n */
  size_t ntri;
  uint32_t *tri;     /* 3 ntri */
} hicp__raw_cloud;

void hicp__raw_cloud_free(hicp__raw_cloud *raw);

/* Turns a raw cloud into a hicp_cloud (takes ownership of raw's arrays, even
 * on failure).  Rejects NaN/Inf coordinates and empty clouds, naming `name`.
 * The points are kept relative to `origin` where it is not NULL (the
 * caller's: hicp_cloud_read_relative), else by the origin policy: zero when
 * every coordinate is a float already or the coordinates are small next to
 * the extent; otherwise the bounding-box centre (docs/design.md,
 * "Coordinates far from the origin"). */
int hicp__cloud_from_raw(hicp_context *ctx, hicp__raw_cloud *raw, const char *name,
                         const double *origin, hicp_cloud **out);

/* The relative forms' refusal of a NULL origin (there is no origin to
 * choose for them): HICP_EINVAL naming the call `fn`, *out NULL. */
int hicp__null_origin(hicp_context *ctx, const char *fn, hicp_cloud **out);

/* HICP_EINVAL, naming the call `fn`, unless each of a caller's origin's
 * coordinates is finite and within HICP_COORD_MAX (the relative readers). */
int hicp__check_origin(hicp_context *ctx, const char *fn, const double origin[3]);

/* Parses a file already in memory (the entry point of the fuzz harnesses).
 * `name` is used in messages only; `origin` as hicp__cloud_from_raw's. */
int hicp__cloud_parse(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len,
                      hicp_format fmt, const double *origin, hicp_cloud **out);

/* Detects the format from the content (then from the name's extension). */
hicp_format hicp__detect_format(const char *name, const unsigned char *buf, size_t len);

/* Reads a whole file into memory (checked against the memory budget).
 * *buf is NUL-terminated (one byte past len) for the text parsers.  With
 * fmt HICP_FORMAT_AUTO, a file whose first 64 KiB show it is no point
 * cloud is refused before the rest is read. */
int hicp__read_file(hicp_context *ctx, const char *path, hicp_format fmt, unsigned char **buf,
                    size_t *len);

/* Writes a file atomically: `write` fills a temporary file in the target's
 * directory, which is then flushed, synced and renamed over `path` (over the
 * file a symbolic link names; a FIFO or a device is written in place: see
 * io/outfile.h).  On any failure the temporary file is removed and `path` is
 * left as it was. */
typedef int (*hicp__writer_fn)(hicp_context *ctx, FILE *f, void *arg);
int hicp__atomic_write(hicp_context *ctx, const char *path, hicp__writer_fn write, void *arg);

#endif /* HICP_CLOUD_H */
