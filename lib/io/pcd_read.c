/* pcd_read.c: PCL's PCD format, DATA ascii, binary and binary_compressed.
 *
 * The header names the fields (FIELDS), their byte sizes (SIZE), types
 * (TYPE: F float, I signed, U unsigned) and element counts (COUNT); x, y, z
 * are found by name among them.  binary stores points one after another
 * (little endian, as PCL writes it); binary_compressed stores a uint32
 * compressed size, a uint32 uncompressed size and an LZF stream that
 * expands to the fields one after another (all x, then all y, ...).
 *
 * Organised clouds mark pixels without a measurement with NaN x, y and z;
 * such points are dropped, as PCL's own tools do.  A point with some but not
 * all coordinates NaN, or any infinity, is an error.  So is data after the
 * declared points: more text lines than POINTS, more bytes than the binary
 * body takes (save the zero padding PCL's writers leave, check_tail). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/bytes.h"
#include "io/lzf.h"
#include "io/text.h"

#define MAX_FIELDS 64

typedef struct field {
  char name[64];
  unsigned size;
  char type;
  uint64_t count;
  size_t offset; /* within a binary point */
} field;

typedef struct pcd {
  hicp_context *ctx;
  const char *name;
  field f[MAX_FIELDS];
  int nf, have_size, have_type, have_count;
  uint64_t width, height, points;
  int have_width, have_points;
  char data[32];
  size_t point_size;
  const unsigned char *start; /* the file's first byte */
} pcd;

static int read_list(pcd *h, hicp__text *t, const char *key, int *n_out,
                     int (*each)(pcd *, int, const char *, size_t))
{
  char tok[128];
  int n = 0;
  while (!hicp__text_at_eol(t, 0)) {
    if (hicp__text_token(t, NULL, tok, sizeof tok) == 0)
      break;
    if (n == MAX_FIELDS)
      return hicp__fail(h->ctx, HICP_EFORMAT, "%s: more than %d fields", h->name, MAX_FIELDS);
    int rc = each(h, n, tok, t->line);
    if (rc != HICP_OK)
      return rc;
    n++;
    hicp__text_skip_blanks(t);
  }
  if (n_out != NULL && *n_out >= 0 && n != *n_out)
    return hicp__fail(h->ctx, HICP_EFORMAT, "%s line %zu: %s lists %d values for %d fields",
                      h->name, t->line, key, n, *n_out);
  if (n_out != NULL && *n_out < 0)
    *n_out = n;
  return HICP_OK;
}

static int set_name(pcd *h, int i, const char *tok, size_t line)
{
  (void)line;
  snprintf(h->f[i].name, sizeof h->f[i].name, "%s", tok);
  h->f[i].count = 1;
  return HICP_OK;
}

static int set_size(pcd *h, int i, const char *tok, size_t line)
{
  if (strcmp(tok, "1") && strcmp(tok, "2") && strcmp(tok, "4") && strcmp(tok, "8"))
    return hicp__fail(h->ctx, HICP_EFORMAT, "%s line %zu: field size '%.*s' is not 1, 2, 4 or 8",
                      h->name, line, hicp__utf8_prec(tok, 20), tok);
  h->f[i].size = (unsigned)atoi(tok);
  return HICP_OK;
}

static int set_type(pcd *h, int i, const char *tok, size_t line)
{
  if (strlen(tok) != 1 || strchr("FIU", tok[0]) == NULL)
    return hicp__fail(h->ctx, HICP_EFORMAT, "%s line %zu: field type '%.*s' is not F, I or U",
                      h->name, line, hicp__utf8_prec(tok, 20), tok);
  h->f[i].type = tok[0];
  return HICP_OK;
}

static int set_count(pcd *h, int i, const char *tok, size_t line)
{
  double v;
  if (hicp__parse_double(tok, &v) != HICP_OK || v < 1 || v > 1e6 || v != floor(v))
    return hicp__fail(h->ctx, HICP_EFORMAT, "%s line %zu: field count '%.*s' is invalid", h->name,
                      line, hicp__utf8_prec(tok, 20), tok);
  h->f[i].count = (uint64_t)v;
  return HICP_OK;
}

/* Moves past the DATA line.  A binary body starts right after its line
 * end, "\n" or "\r\n", as PCL reads it; but in a header whose lines end in
 * a lone "\r" (classic Mac OS) the "\r" alone ends it, and a "\n" after it
 * is the body's first byte (0x0A, a coordinate's low byte), which taking
 * "\r\n" for one line end would eat, shifting every point by a byte. */
static void end_data_line(pcd *h, hicp__text *t)
{
  while (t->p < t->end && *t->p != '\n' && *t->p != '\r')
    t->p++;
  if (strcmp(h->data, "ascii") != 0 && t->end - t->p >= 2 && t->p[0] == '\r' &&
      t->p[1] == '\n' && memchr(h->start, '\n', (size_t)(t->p - h->start)) == NULL) {
    t->p++;
    t->line++;
    return;
  }
  hicp__text_next_line(t);
}

/* The header's keys, as parse_header takes them (VERSION and VIEWPOINT
 * read past, COLUMNS for FIELDS). */
static int pcd_key(const char *key)
{
  static const char *const keys[] = {"VERSION", "VIEWPOINT", "FIELDS", "COLUMNS", "SIZE", "TYPE",
                                     "COUNT",   "WIDTH",     "HEIGHT", "POINTS",  "DATA"};
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
    if (strcmp(key, keys[i]) == 0)
      return 1;
  return 0;
}

static int unknown_key(hicp_context *ctx, const char *name, size_t line, const char *key)
{
  return hicp__fail(ctx, HICP_EFORMAT, "%s line %zu: unknown PCD header line '%.*s'", name, line,
                    hicp__utf8_prec(key, 40), key);
}

int hicp__pcd_check_head(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len)
{
  hicp__text t;
  char key[64];
  return hicp__text_head_word(&t, ctx, name, buf, len, key, sizeof key) && !pcd_key(key)
             ? unknown_key(ctx, name, t.line, key)
             : HICP_OK;
}

static int parse_header(pcd *h, hicp__text *t)
{
  char key[64];
  int nf = -1;
  for (;;) {
    hicp__text_skip_space(t, '#');
    if (t->p >= t->end)
      return hicp__fail(h->ctx, HICP_EFORMAT, "%s: the header has no DATA line", h->name);
    hicp__text_token(t, NULL, key, sizeof key);
    if (!pcd_key(key))
      return unknown_key(h->ctx, h->name, t->line, key);
    int rc = HICP_OK;
    if (strcmp(key, "VERSION") == 0 || strcmp(key, "VIEWPOINT") == 0) {
      hicp__text_next_line(t);
      continue;
    } else if (strcmp(key, "FIELDS") == 0 || strcmp(key, "COLUMNS") == 0) {
      /* a second list would leave fields without a size or type */
      if (h->nf > 0)
        return hicp__fail(h->ctx, HICP_EFORMAT, "%s line %zu: FIELDS given twice", h->name,
                          t->line);
      nf = -1;
      rc = read_list(h, t, key, &nf, set_name);
      h->nf = nf;
    } else if (h->nf == 0 && (strcmp(key, "SIZE") == 0 || strcmp(key, "TYPE") == 0 ||
                              strcmp(key, "COUNT") == 0)) {
      return hicp__fail(h->ctx, HICP_EFORMAT, "%s line %zu: %s before FIELDS", h->name, t->line,
                        key);
    } else if (strcmp(key, "SIZE") == 0) {
      rc = read_list(h, t, key, &h->nf, set_size);
      h->have_size = 1;
    } else if (strcmp(key, "TYPE") == 0) {
      rc = read_list(h, t, key, &h->nf, set_type);
      h->have_type = 1;
    } else if (strcmp(key, "COUNT") == 0) {
      rc = read_list(h, t, key, &h->nf, set_count);
    } else if (strcmp(key, "WIDTH") == 0) {
      rc = hicp__text_count(t, 0, 0, "WIDTH", UINT64_C(1) << 40, &h->width);
      h->have_width = 1;
    } else if (strcmp(key, "HEIGHT") == 0) {
      rc = hicp__text_count(t, 0, 0, "HEIGHT", UINT64_C(1) << 40, &h->height);
    } else if (strcmp(key, "POINTS") == 0) {
      rc = hicp__text_count(t, 0, 0, "POINTS", UINT64_C(1) << 40, &h->points);
      h->have_points = 1;
    } else if (strcmp(key, "DATA") == 0) {
      hicp__text_token(t, NULL, h->data, sizeof h->data);
      end_data_line(h, t);
      break;
    }
    if (rc != HICP_OK)
      return rc;
    hicp__text_next_line(t);
  }
  if (h->nf <= 0)
    return hicp__fail(h->ctx, HICP_EFORMAT, "%s: the header has no FIELDS", h->name);
  if (!h->have_size || !h->have_type)
    return hicp__fail(h->ctx, HICP_EFORMAT, "%s: the header lacks SIZE or TYPE", h->name);
  if (!h->have_points && !h->have_width)
    return hicp__fail(h->ctx, HICP_EFORMAT, "%s: the header has neither POINTS nor WIDTH",
                      h->name);
  if (h->have_width) {
    /* each is at most 2^40: their product could wrap around */
    const uint64_t height = h->height ? h->height : 1, max = UINT64_C(1) << 40;
    if (h->width > max / height)
      return hicp__fail(h->ctx, HICP_EFORMAT,
                        "%s: WIDTH %llu times HEIGHT %llu is not a point count from 0 to %llu",
                        h->name, (unsigned long long)h->width, (unsigned long long)height,
                        (unsigned long long)max);
    /* both given: they must agree (PCL refuses such a file too), else
     * which one describes the data is a guess */
    if (h->have_points && h->points != h->width * height)
      return hicp__fail(h->ctx, HICP_EFORMAT,
                        "%s: POINTS %llu is not WIDTH %llu times HEIGHT %llu", h->name,
                        (unsigned long long)h->points, (unsigned long long)h->width,
                        (unsigned long long)height);
    h->points = h->width * height;
  }
  h->point_size = 0;
  for (int i = 0; i < h->nf; i++) {
    const unsigned sz = h->f[i].size;
    if ((sz != 1 && sz != 2 && sz != 4 && sz != 8) || h->f[i].count == 0)
      return hicp__fail(h->ctx, HICP_EFORMAT, "%s: field '%s' has no valid SIZE or COUNT", h->name,
                        h->f[i].name);
    if (h->f[i].type == 'F' && h->f[i].size != 4 && h->f[i].size != 8)
      return hicp__fail(h->ctx, HICP_EFORMAT, "%s: float field '%s' has size %u", h->name,
                        h->f[i].name, h->f[i].size);
    h->f[i].offset = h->point_size;
    h->point_size += (size_t)h->f[i].size * h->f[i].count;
  }
  return HICP_OK;
}

static double value_at(const unsigned char *p, const field *f)
{
  const uint64_t u = hicp__bytes_uint(p, f->size, 0);
  if (f->type == 'F')
    return f->size == 4 ? hicp__bytes_float(u) : hicp__bytes_double(u);
  return f->type == 'U' ? (double)u : (double)hicp__bytes_int(u, f->size);
}

/* Keeps a point unless all three coordinates are NaN (no measurement). */
static int store(pcd *h, hicp__raw_cloud *out, uint64_t index, const double v[3])
{
  int nans = isnan(v[0]) + isnan(v[1]) + isnan(v[2]);
  if (nans == 3)
    return HICP_OK;
  if (nans > 0 || !isfinite(v[0]) || !isfinite(v[1]) || !isfinite(v[2]))
    return hicp__fail(h->ctx, HICP_ENONFINITE, "%s: point %llu has a non-finite coordinate",
                      h->name, (unsigned long long)index);
  /* the magnitude, numbered as the file numbers it */
  int rc = hicp__raw_check_point(h->ctx, h->name, index, v);
  if (rc != HICP_OK)
    return rc;
  memcpy(&out->xyz[3 * out->n], v, 3 * sizeof(double));
  out->n++;
  return HICP_OK;
}

static int find_xyz(pcd *h, int idx[3])
{
  static const char *names[3] = {"x", "y", "z"};
  for (int k = 0; k < 3; k++) {
    idx[k] = -1;
    for (int i = 0; i < h->nf && idx[k] < 0; i++) /* the first of a name, as PCL and PLY */
      if (strcmp(h->f[i].name, names[k]) == 0)
        idx[k] = i;
    if (idx[k] < 0)
      return hicp__fail(h->ctx, HICP_EFORMAT, "%s: no '%s' field", h->name, names[k]);
  }
  return HICP_OK;
}

/* 1 if x is a value an integer field (TYPE I or U, SIZE 1 to 8) holds:
 * a whole number within its type's range.  PCL's binary files cannot
 * hold anything else, so an ascii "300" in a U 1 field, "-1" in a U or
 * "1.5" in an I is a corrupt or mislabelled file, not a value to read. */
static int fits_integer_field(const field *f, double x)
{
  if (!(x == floor(x))) /* also NaN and infinities */
    return 0;
  const double span = ldexp(1.0, 8 * (int)f->size); /* 2^bits, exact */
  if (f->type == 'U')
    return x >= 0 && x < span;
  return x >= -span / 2 && x < span / 2;
}

static int read_ascii(pcd *h, hicp__text *t, const int idx[3], hicp__raw_cloud *out)
{
  for (uint64_t i = 0; i < h->points; i++) {
    double v[3] = {0, 0, 0};
    hicp__text_skip_space(t, '#');
    for (int fi = 0; fi < h->nf; fi++) {
      for (uint64_t c = 0; c < h->f[fi].count; c++) {
        char tok[128];
        hicp__text_skip_blanks(t);
        int rc = hicp__text_check_nul(t);
        if (rc != HICP_OK)
          return rc;
        if (hicp__text_at_eol(t, 0))
          return hicp__fail(h->ctx, HICP_EFORMAT, "%s line %zu: point %llu has too few values",
                            h->name, t->line, (unsigned long long)i);
        rc = hicp__text_number_token(t, NULL, "a number", tok, sizeof tok);
        if (rc != HICP_OK)
          return rc;
        double x;
        rc = hicp__parse_double(tok, &x);
        const int used = c == 0 && (fi == idx[0] || fi == idx[1] || fi == idx[2]);
        /* nan is a legal PCD value (missing measurement), in any of the
         * spellings the PLY reader takes (stop 63's review: "NAN" and "-NaN"
         * were refused); a field hicp does not use may hold any non-finite
         * value, as in binary files */
        const int integer = h->f[fi].type != 'F';
        if (rc == HICP_ENONFINITE && !integer && (hicp__is_nan_token(tok) || !used))
          x = NAN, rc = HICP_OK;
        if (rc == HICP_OK && integer && !fits_integer_field(&h->f[fi], x))
          return hicp__fail(h->ctx, HICP_EFORMAT,
                            "%s line %zu: '%.*s' is not a value of field '%.*s' (TYPE %c, SIZE %u)",
                            h->name, t->line, hicp__utf8_prec(tok, 24), tok,
                            hicp__utf8_prec(h->f[fi].name, 24), h->f[fi].name, h->f[fi].type,
                            h->f[fi].size);
        if (rc == HICP_ENONFINITE)
          return hicp__fail(h->ctx, rc, "%s line %zu: non-finite number '%.*s'", h->name,
                            t->line, hicp__utf8_prec(tok, 24), tok);
        if (rc != HICP_OK)
          return hicp__fail(h->ctx, rc, "%s line %zu: expected a number, got '%.*s'", h->name,
                            t->line, hicp__utf8_prec(tok, 24), tok);
        if (used)
          for (int k = 0; k < 3; k++)
            if (fi == idx[k])
              v[k] = x;
      }
    }
    hicp__text_skip_blanks(t);
    int rc = hicp__text_check_nul(t);
    if (rc != HICP_OK)
      return rc;
    if (!hicp__text_at_eol(t, 0))
      return hicp__fail(h->ctx, HICP_EFORMAT, "%s line %zu: point %llu has too many values",
                        h->name, t->line, (unsigned long long)i);
    rc = store(h, out, i, v);
    if (rc != HICP_OK)
      return rc;
  }
  char what[64];
  snprintf(what, sizeof what, "the %llu declared points", (unsigned long long)h->points);
  return hicp__text_expect_end(t, '#', what);
}

/* Bytes after a binary body: only the zeros PCL's writers pad their files
 * with.  Older writers of binary data (and PCLPointCloud2's still) stretch
 * the file to getpagesize() + the data's size before mapping it, so the
 * zeros pad the header to a page: header + tail is a page.  The writer of
 * binary_compressed PCLPointCloud2 data (PCL 1.9 to 1.15, the one ROS's
 * pointcloud_to_pcd calls) rounds the whole file up to whole pages: the
 * file's size is a multiple of a page and the tail shorter than one.
 * Pages are powers of two from 4096 to 65536 (the page sizes of x86,
 * arm64 and ppc64 hosts).  `header` is the header's length, `at` where
 * the tail starts. */
static int check_tail(pcd *h, size_t header, size_t at, const unsigned char *tail, size_t n,
                      int compressed)
{
  if (n == 0)
    return HICP_OK;
  int zeros = 1;
  for (size_t i = 0; i < n && zeros; i++)
    zeros = tail[i] == 0;
  for (size_t page = 4096; zeros && page <= 65536; page *= 2) {
    if (header + n == page)
      return HICP_OK;
    /* at + n cannot overflow: the file is in memory */
    if (compressed && n < page && (at + n) % page == 0)
      return HICP_OK;
  }
  return hicp__fail(h->ctx, HICP_EFORMAT, "%s: %zu byte%s of data after the %llu declared points",
                    h->name, n, n == 1 ? "" : "s", (unsigned long long)h->points);
}

static int read_binary(pcd *h, size_t offset, const unsigned char *p, size_t avail,
                       const int idx[3], hicp__raw_cloud *out)
{
  if (h->point_size == 0 || h->points > avail / h->point_size)
    return hicp__fail(h->ctx, HICP_EFORMAT,
                      "%s: the header promises %llu points of %zu bytes but %zu bytes remain "
                      "(truncated or corrupt)",
                      h->name, (unsigned long long)h->points, h->point_size, avail);
  const size_t used = (size_t)h->points * h->point_size;
  int trc = check_tail(h, offset, offset + used, p + used, avail - used, 0);
  if (trc != HICP_OK)
    return trc;
  for (uint64_t i = 0; i < h->points; i++) {
    const unsigned char *rec = p + i * h->point_size;
    double v[3];
    for (int k = 0; k < 3; k++)
      v[k] = value_at(rec + h->f[idx[k]].offset, &h->f[idx[k]]);
    int rc = store(h, out, i, v);
    if (rc != HICP_OK)
      return rc;
  }
  return HICP_OK;
}

static int read_compressed(pcd *h, size_t offset, const unsigned char *p, size_t avail,
                           const int idx[3], hicp__raw_cloud *out)
{
  if (avail < 8)
    return hicp__fail(h->ctx, HICP_EFORMAT, "%s: compressed data is truncated", h->name);
  const uint32_t csize = (uint32_t)hicp__bytes_uint(p, 4, 0);
  const uint32_t usize = (uint32_t)hicp__bytes_uint(p + 4, 4, 0);
  /* POINTS (up to 2^40) need not fit a 32-bit size_t: refused before the
   * cast, which made 2^32 + 1 points one, and the loop below wrote past
   * the one reserved */
  if ((uint64_t)(size_t)h->points != h->points)
    return hicp__fail(h->ctx, HICP_ELIMIT, "%s: %llu points are more than this system can address",
                      h->name, (unsigned long long)h->points);
  size_t want = 0;
  if (hicp__mul_size((size_t)h->points, h->point_size, &want) != 0 || usize != want)
    return hicp__fail(h->ctx, HICP_EFORMAT,
                      "%s: compressed data expands to %u bytes, %llu points need %zu", h->name,
                      usize, (unsigned long long)h->points, want);
  if (csize > avail - 8)
    return hicp__fail(h->ctx, HICP_EFORMAT, "%s: compressed data is truncated (%u of %zu bytes)",
                      h->name, csize, avail - 8);
  /* LZF expands at most ~256x (a 3-byte back-reference of 264 bytes): an
   * uncompressed size beyond that is a lie, refused before allocating. */
  if ((uint64_t)usize > (uint64_t)csize * 300u + 64u)
    return hicp__fail(h->ctx, HICP_EFORMAT, "%s: implausible compressed sizes", h->name);
  /* the data ends with the compressed stream the first word sizes (the
   * second word is the size it expands to, not what the file holds) */
  int rc = check_tail(h, offset, offset + 8 + csize, p + 8 + csize, avail - 8 - csize, 1);
  if (rc != HICP_OK)
    return rc;
  /* Only now, the sizes agreeing with the data, is POINTS believed. */
  rc = hicp__raw_reserve_points(h->ctx, h->name, out, (size_t)h->points);
  if (rc != HICP_OK)
    return rc;
  char what[300];
  snprintf(what, sizeof what, "%s: decompressing %u bytes", h->name, usize);
  rc = hicp__check_budget(h->ctx, usize, what);
  if (rc != HICP_OK)
    return rc;
  unsigned char *u = malloc(usize ? usize : 1);
  if (u == NULL)
    return hicp__fail(h->ctx, HICP_ENOMEM, "%s: out of memory", h->name);
  if (hicp__lzf_decompress(p + 8, csize, u, usize) != 0) {
    free(u);
    return hicp__fail(h->ctx, HICP_EFORMAT, "%s: corrupt compressed data", h->name);
  }
  /* Field-major: field f's values for all points start at points * offset. */
  for (uint64_t i = 0; i < h->points && rc == HICP_OK; i++) {
    double v[3];
    for (int k = 0; k < 3; k++) {
      const field *f = &h->f[idx[k]];
      v[k] = value_at(u + (size_t)h->points * f->offset + i * f->size * f->count, f);
    }
    rc = store(h, out, i, v);
  }
  free(u);
  return rc;
}

int hicp__parse_pcd(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len,
                    hicp__raw_cloud *out)
{
  pcd *h = calloc(1, sizeof *h);
  if (h == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "%s: out of memory", name);
  h->ctx = ctx;
  h->name = name;
  h->start = buf;
  hicp__text t;
  hicp__text_init(&t, ctx, name, buf, buf + len, 1);
  int idx[3];
  int rc = parse_header(h, &t);
  if (rc == HICP_OK)
    rc = find_xyz(h, idx);
  size_t avail = (size_t)(t.end - t.p);
  if (rc == HICP_OK) {
    int ascii = strcmp(h->data, "ascii") == 0;
    int binary = strcmp(h->data, "binary") == 0;
    int compressed = strcmp(h->data, "binary_compressed") == 0;
    if (!ascii && !binary && !compressed)
      rc = hicp__fail(ctx, HICP_EFORMAT, "%s: unknown DATA kind '%.*s'", name,
                      hicp__utf8_prec(h->data, 30), h->data);
    /* "0 " per field, the last line's newline perhaps missing (+ 1) */
    else if (ascii && h->points > (avail + 1) / (2 * (size_t)h->nf))
      rc = hicp__fail(ctx, HICP_EFORMAT,
                      "%s: the header promises %llu points but the file is too short for them",
                      name, (unsigned long long)h->points);
    else if (binary && (h->point_size == 0 || h->points > avail / h->point_size))
      rc = hicp__fail(ctx, HICP_EFORMAT,
                      "%s: the header promises %llu points of %zu bytes but %zu bytes remain "
                      "(truncated or corrupt)",
                      name, (unsigned long long)h->points, h->point_size, avail);
    /* binary_compressed reserves once its sizes are checked (a lying
     * POINTS must not allocate, nor read as a memory shortage) */
    if (rc == HICP_OK && !compressed)
      rc = hicp__raw_reserve_points(ctx, name, out, (size_t)h->points);
    if (rc == HICP_OK) {
      out->n = 0;
      if (ascii)
        rc = read_ascii(h, &t, idx, out);
      else if (binary)
        rc = read_binary(h, (size_t)(t.p - buf), t.p, avail, idx, out);
      else
        rc = read_compressed(h, (size_t)(t.p - buf), t.p, avail, idx, out);
    }
  }
  free(h);
  return rc;
}
