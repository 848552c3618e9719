/* off_read.c: OFF meshes (Geomview): OFF, COFF, NOFF, CNOFF, STOFF and the
 * like, or no keyword at all, with '#' comments anywhere.  Vertex lines may
 * carry colours, normals or texture coordinates after x y z (ignored); each
 * face line is a vertex
 * count, the indices, and an optional colour; polygons are fan-triangulated.
 * 4OFF (homogeneous) and nOFF with a dimension other than 3 are refused, as
 * is anything after the declared records but blank lines, comments and
 * whole faces (extra_face). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "io/text.h"

/* Reads the next number on the line, if it is one (0 otherwise). */
static int line_number(hicp__text *s, double *v)
{
  char tok[128];
  hicp__text_skip_blanks(s);
  if (hicp__text_at_eol(s, '#'))
    return 0;
  size_t n = hicp__text_token(s, NULL, tok, sizeof tok);
  return n > 0 && n < sizeof tok && hicp__parse_double(tok, v) == HICP_OK;
}

/* 1 if the line at t is a whole face after the declared ones: a count k
 * of at least 3, k indices below nv, at most 4 colour numbers; t is then
 * moved past it. */
static int extra_face(hicp__text *t, uint64_t nv)
{
  hicp__text s = *t;
  double v;
  if (!line_number(&s, &v) || v < 3 || v > 1000000 || v != floor(v))
    return 0;
  const uint64_t k = (uint64_t)v;
  for (uint64_t j = 0; j < k; j++)
    if (!line_number(&s, &v) || v < 0 || v != floor(v) || v >= (double)nv)
      return 0;
  for (int c = 0;; c++) {
    hicp__text_skip_blanks(&s);
    if (hicp__text_at_eol(&s, '#'))
      break;
    if (c == 4 || !line_number(&s, &v))
      return 0;
  }
  if (s.p < s.end && *s.p == '\0')
    return 0;
  *t = s;
  hicp__text_next_line(t);
  return 1;
}

/* The file's first word, kw: HICP_OK for an OFF keyword the reader takes
 * or a number (*counts 1: the counts of a file without the keyword, which
 * Geomview's format makes optional: "many existing files lack this
 * keyword"; only a file named .off, or read as OFF by the caller's word,
 * comes here, as to the content alone it is a list of numbers), else the
 * refusal. */
static int first_word(hicp_context *ctx, const char *name, const char *kw, int *counts)
{
  double number;
  *counts = hicp__parse_double(kw, &number) == HICP_OK;
  if (*counts)
    return HICP_OK;
  size_t kl = strlen(kw);
  if (kl < 3 || strcmp(kw + kl - 3, "OFF") != 0)
    return hicp__fail(ctx, HICP_EFORMAT, "%s: not an OFF file (first word '%.*s')", name,
                      hicp__utf8_prec(kw, 20), kw);
  for (size_t i = 0; i + 3 < kl; i++) {
    if (kw[i] == '4')
      return hicp__fail(ctx, HICP_EUNSUPPORTED, "%s: 4OFF (homogeneous coordinates) is not supported", name);
    if (strchr("STCNn", kw[i]) == NULL)
      return hicp__fail(ctx, HICP_EFORMAT, "%s: unknown OFF variant '%.*s'", name,
                        hicp__utf8_prec(kw, 20), kw);
  }
  return HICP_OK;
}

int hicp__off_check_head(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len)
{
  hicp__text t;
  char kw[64];
  int counts;
  return hicp__text_head_word(&t, ctx, name, buf, len, kw, sizeof kw)
             ? first_word(ctx, name, kw, &counts)
             : HICP_OK;
}

int hicp__parse_off(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len,
                    hicp__raw_cloud *out)
{
  hicp__text t;
  hicp__text_init(&t, ctx, name, buf, buf + len, 1);
  hicp__text_skip_space(&t, '#');
  char kw[64];
  const hicp__text counts = t;
  hicp__text_token(&t, NULL, kw, sizeof kw);
  int no_keyword;
  int rc = first_word(ctx, name, kw, &no_keyword);
  if (rc != HICP_OK)
    return rc;
  if (no_keyword) { /* the counts are read from where the keyword would be */
    t = counts;
    strcpy(kw, "OFF");
  }
  /* Geomview's binary OFF: "OFF BINARY" on the first line */
  hicp__text_skip_blanks(&t);
  if ((size_t)(t.end - t.p) >= 6 && memcmp(t.p, "BINARY", 6) == 0)
    return hicp__fail(ctx, HICP_EUNSUPPORTED,
                      "%s: binary OFF is not supported (ascii OFF, PLY and PCD are)", name);
  uint64_t nv, nf, ne;
  if (strchr(kw, 'n') != NULL) {
    uint64_t dim;
    rc = hicp__text_count(&t, 1, '#', "the dimension", 1000, &dim);
    if (rc != HICP_OK)
      return rc;
    if (dim != 3)
      return hicp__fail(ctx, HICP_EUNSUPPORTED, "%s: %llu-dimensional OFF is not supported", name,
                        (unsigned long long)dim);
  }
  if ((rc = hicp__text_count(&t, 1, '#', "the vertex count", UINT64_C(1) << 40, &nv)) != HICP_OK ||
      (rc = hicp__text_count(&t, 1, '#', "the face count", UINT64_C(1) << 40, &nf)) != HICP_OK)
    return rc;
  hicp__text_skip_blanks(&t);
  if (!hicp__text_at_eol(&t, '#') &&
      (rc = hicp__text_count(&t, 0, '#', "the edge count", UINT64_C(1) << 40, &ne)) != HICP_OK)
    return rc;
  hicp__text_next_line(&t);
  size_t remaining = (size_t)(t.end - t.p);
  /* a vertex needs at least "0 0 0\n", a face "0\n" (faces of fewer than
   * three vertices are legal and add no triangle); the last line of the
   * file may lack its newline: + 1.  Both counts are at most 2^40, so the
   * sum cannot wrap. */
  if (6 * nv + 2 * nf > (uint64_t)remaining + 1)
    return hicp__fail(ctx, HICP_EFORMAT,
                      "%s: the header promises %llu vertices and %llu faces but the file is too "
                      "short for them (truncated or corrupt)",
                      name, (unsigned long long)nv, (unsigned long long)nf);
  rc = hicp__raw_reserve_points(ctx, name, out, (size_t)nv);
  if (rc != HICP_OK)
    return rc;
  for (uint64_t i = 0; i < nv; i++) {
    for (int d = 0; d < 3; d++) {
      rc = hicp__text_number(&t, d == 0, '#', "a vertex coordinate", &out->xyz[3 * i + d]);
      if (rc != HICP_OK)
        return rc;
    }
    out->n = (size_t)i + 1;
    if ((rc = hicp__text_skip_line(&t)) != HICP_OK) /* colours, normals, ... */
      return rc;
  }
  size_t cap = 0;
  for (uint64_t i = 0; i < nf; i++) {
    uint64_t k;
    rc = hicp__text_count(&t, 1, '#', "a face's vertex count", 1000000, &k);
    if (rc != HICP_OK)
      return rc;
    uint32_t first = 0, prev = 0;
    for (uint64_t j = 0; j < k; j++) {
      uint64_t v;
      rc = hicp__text_count(&t, 0, '#', "a vertex index", UINT32_MAX - 1, &v);
      if (rc != HICP_OK)
        return rc;
      if (v >= nv)
        return hicp__fail(ctx, HICP_EFORMAT, "%s line %zu: face %llu uses vertex %llu of %llu",
                          name, t.line, (unsigned long long)i, (unsigned long long)v,
                          (unsigned long long)nv);
      if (j == 0)
        first = (uint32_t)v;
      else if (j >= 2 &&
               (rc = hicp__raw_push_triangle(ctx, name, out, &cap, first, prev, (uint32_t)v)) !=
                   HICP_OK)
        return rc;
      prev = (uint32_t)v;
    }
    if ((rc = hicp__text_skip_line(&t)) != HICP_OK) /* face colour */
      return rc;
  }
  /* Only blank lines and comments may follow the declared records, and,
   * after faces, whole faces the count leaves out (ignored, as CGAL and
   * Geomview ignore them: CGAL's own meshes/prim.off declares 7 faces and
   * gives 8).  Anything else, vertices say, is refused. */
  for (;;) {
    hicp__text_skip_space(&t, '#');
    if (t.p >= t.end)
      return HICP_OK;
    if (nf == 0 || !extra_face(&t, nv))
      break;
  }
  char what[96];
  if (nf > 0)
    snprintf(what, sizeof what, "the %llu declared faces", (unsigned long long)nf);
  else
    snprintf(what, sizeof what, "the %llu declared vertices (and no faces)", (unsigned long long)nv);
  return hicp__text_expect_end(&t, '#', what);
}
