/* off_read.c: OFF meshes (Geomview): OFF, COFF, NOFF, CNOFF, STOFF and the
 * like, with '#' comments anywhere.  Vertex lines may carry colours, normals
 * or texture coordinates after x y z (ignored); each face line is a vertex
 * count, the indices, and an optional colour; polygons are fan-triangulated.
 * 4OFF (homogeneous) and nOFF with a dimension other than 3 are refused. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "io/text.h"

int hicp__parse_off(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len,
                    hicp__raw_cloud *out)
{
  hicp__text t;
  hicp__text_init(&t, ctx, name, buf, buf + len, 1);
  hicp__text_skip_space(&t, '#');
  char kw[64];
  hicp__text_token(&t, NULL, kw, sizeof kw);
  size_t kl = strlen(kw);
  if (kl < 3 || strcmp(kw + kl - 3, "OFF") != 0)
    return hicp__fail(ctx, HICP_EFORMAT, "%s: not an OFF file (first word '%.20s')", name, kw);
  for (size_t i = 0; i + 3 < kl; i++) {
    if (kw[i] == '4')
      return hicp__fail(ctx, HICP_EUNSUPPORTED, "%s: 4OFF (homogeneous coordinates) is not supported", name);
    if (strchr("STCNn", kw[i]) == NULL)
      return hicp__fail(ctx, HICP_EFORMAT, "%s: unknown OFF variant '%.20s'", name, kw);
  }
  /* Geomview's binary OFF: "OFF BINARY" on the first line */
  hicp__text_skip_blanks(&t);
  if ((size_t)(t.end - t.p) >= 6 && memcmp(t.p, "BINARY", 6) == 0)
    return hicp__fail(ctx, HICP_EUNSUPPORTED,
                      "%s: binary OFF is not supported (ascii OFF, PLY and PCD are)", name);
  uint64_t nv, nf, ne;
  int rc;
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
  /* a vertex needs at least "0 0 0\n", a face "3 0 0 0\n" (the last line
   * of the file may lack its newline: + 1) */
  if (nv > (remaining + 1) / 6 || nf > (remaining + 1) / 8)
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
    hicp__text_next_line(&t); /* colours, normals, ... */
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
    hicp__text_next_line(&t); /* face colour */
  }
  return HICP_OK;
}
