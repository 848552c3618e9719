/* ply_read.c: Stanford PLY (ascii, binary little and big endian).
 *
 * Any element and property layout: x, y, z are found by name in the
 * "vertex" element among properties of any scalar type; list properties and
 * other elements are skipped; the "face" element's vertex_indices (or
 * vertex_index) lists become triangles (polygons fan-triangulated).  No count
 * in the header is trusted: before anything is allocated the counts are
 * checked against the bytes that remain.  An ascii record is one line with
 * exactly the values its properties call for (blank lines between records
 * pass); nothing but blanks and line ends (ascii), nothing at all (binary),
 * may follow the last record.  A vertex whose x, y and z are all NaN, in a
 * file without faces, is an organised cloud's pixel without a measurement
 * and is dropped (check_vertex). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/bytes.h"
#include "io/text.h"

#define MAX_ELEMENTS 32
#define MAX_PROPS 65536 /* per element; a 3D Gaussian splat has 62, others more */
#define MAX_LIST 1000000 /* longest list a record may carry */

typedef enum { T_NONE, T_I8, T_U8, T_I16, T_U16, T_I32, T_U32, T_F32, T_F64 } ptype;

static const struct {
  const char *name;
  ptype type;
} type_names[] = {{"char", T_I8},     {"int8", T_I8},    {"uchar", T_U8},   {"uint8", T_U8},
                  {"short", T_I16},   {"int16", T_I16},  {"ushort", T_U16}, {"uint16", T_U16},
                  {"int", T_I32},     {"int32", T_I32},  {"uint", T_U32},   {"uint32", T_U32},
                  {"float", T_F32},   {"float32", T_F32}, {"double", T_F64}, {"float64", T_F64}};

static const size_t type_size[] = {0, 1, 1, 2, 2, 4, 4, 4, 8};

typedef struct prop {
  char name[64];
  ptype type;       /* value type */
  ptype count_type; /* list length type, T_NONE for a scalar */
} prop;

typedef struct element {
  char name[64];
  uint64_t count;
  prop *props; /* grown as the header lists them */
  int nprops, cap;
} element;

typedef enum { ASCII, BIN_LE, BIN_BE } encoding;

typedef struct ply {
  hicp_context *ctx;
  const char *name;
  encoding enc;
  element el[MAX_ELEMENTS];
  int nel;
  int faces;             /* the header declares faces: the vertices are a mesh's */
  uint64_t unmeasured;   /* vertices read with x, y and z NaN (check_vertex) */
} ply;

static ptype parse_type(const char *s)
{
  for (size_t i = 0; i < sizeof type_names / sizeof type_names[0]; i++)
    if (strcmp(s, type_names[i].name) == 0)
      return type_names[i].type;
  return T_NONE;
}

/* Whether the line at t is a PLY file's first: "ply", blanks around it.
 * Leaves t past "ply" and its blanks (or past the first word). */
static int ply_first_line(hicp__text *t)
{
  char tok[128];
  hicp__text_token(t, NULL, tok, sizeof tok);
  hicp__text_skip_blanks(t);
  return strcmp(tok, "ply") == 0 && hicp__text_at_eol(t, 0);
}

static int not_ply(hicp_context *ctx, const char *name)
{
  return hicp__fail(ctx, HICP_EFORMAT, "%s: not a PLY file (no 'ply' first line)", name);
}

int hicp__ply_check_head(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len)
{
  hicp__text t;
  hicp__text_init(&t, ctx, name, buf, buf + len, 1);
  /* decided where what follows the first word lies within the head */
  return !ply_first_line(&t) && t.p < t.end ? not_ply(ctx, name) : HICP_OK;
}

static int parse_header(ply *f, hicp__text *t)
{
  char tok[128];
  if (!ply_first_line(t))
    return not_ply(f->ctx, f->name);
  /* Lines that end in a lone CR (old Mac writers): end_header's is one CR,
   * and a binary body's first byte may be 10, which is no part of it (the
   * review, stop 53: a point (10, 2, 3) read as (2, 3, 10)). */
  const int lone_cr = t->p < t->end && *t->p == '\r' && (t->p + 1 >= t->end || t->p[1] != '\n');
  hicp__text_next_line(t);
  int have_format = 0;
  for (;;) {
    if (t->p >= t->end)
      return hicp__fail(f->ctx, HICP_EFORMAT, "%s: the header has no end_header line", f->name);
    size_t n = hicp__text_token(t, NULL, tok, sizeof tok);
    if (n == 0) { /* blank line */
      hicp__text_next_line(t);
      continue;
    }
    if (strcmp(tok, "end_header") == 0) {
      while (lone_cr && t->p < t->end && *t->p != '\r' && *t->p != '\n')
        t->p++;
      if (lone_cr && t->p < t->end && *t->p == '\r') {
        t->p++;
        t->line++;
      } else {
        hicp__text_next_line(t);
      }
      break;
    }
    if (strcmp(tok, "comment") == 0 || strcmp(tok, "obj_info") == 0) {
      hicp__text_next_line(t);
      continue;
    }
    if (strcmp(tok, "format") == 0) {
      hicp__text_token(t, NULL, tok, sizeof tok);
      if (strcmp(tok, "ascii") == 0)
        f->enc = ASCII;
      else if (strcmp(tok, "binary_little_endian") == 0)
        f->enc = BIN_LE;
      else if (strcmp(tok, "binary_big_endian") == 0)
        f->enc = BIN_BE;
      else
        return hicp__fail(f->ctx, HICP_EFORMAT, "%s line %zu: unknown PLY format '%.*s'",
                          f->name, t->line, hicp__utf8_prec(tok, 40), tok);
      if (hicp__text_token(t, NULL, tok, sizeof tok) == 0)
        return hicp__fail(f->ctx, HICP_EFORMAT, "%s line %zu: the format line has no version",
                          f->name, t->line);
      if (strcmp(tok, "1.0") != 0 && strcmp(tok, "1") != 0)
        return hicp__fail(f->ctx, HICP_EFORMAT, "%s line %zu: PLY version '%.*s' (1.0 expected)",
                          f->name, t->line, hicp__utf8_prec(tok, 20), tok);
      have_format = 1;
    } else if (strcmp(tok, "element") == 0) {
      if (f->nel == MAX_ELEMENTS)
        return hicp__fail(f->ctx, HICP_EFORMAT, "%s: more than %d elements", f->name, MAX_ELEMENTS);
      element *e = &f->el[f->nel];
      memset(e, 0, sizeof *e);
      if (hicp__text_token(t, NULL, e->name, sizeof e->name) == 0)
        return hicp__fail(f->ctx, HICP_EFORMAT, "%s line %zu: element without a name", f->name,
                          t->line);
      int rc = hicp__text_count(t, 0, 0, "an element count", UINT64_C(1) << 40, &e->count);
      if (rc != HICP_OK)
        return rc;
      f->nel++;
    } else if (strcmp(tok, "property") == 0) {
      if (f->nel == 0)
        return hicp__fail(f->ctx, HICP_EFORMAT, "%s line %zu: property before any element",
                          f->name, t->line);
      element *e = &f->el[f->nel - 1];
      if (e->nprops == MAX_PROPS)
        return hicp__fail(f->ctx, HICP_EFORMAT, "%s: element '%s' has more than %d properties",
                          f->name, e->name, MAX_PROPS);
      if (e->nprops == e->cap) {
        int ncap = e->cap ? 2 * e->cap : 16;
        prop *np = realloc(e->props, sizeof *np * (size_t)ncap);
        if (np == NULL)
          return hicp__fail(f->ctx, HICP_ENOMEM, "%s: out of memory for the header", f->name);
        e->props = np;
        e->cap = ncap;
      }
      prop *p = &e->props[e->nprops];
      memset(p, 0, sizeof *p);
      hicp__text_token(t, NULL, tok, sizeof tok);
      if (strcmp(tok, "list") == 0) {
        hicp__text_token(t, NULL, tok, sizeof tok);
        p->count_type = parse_type(tok);
        if (p->count_type == T_NONE || p->count_type == T_F32 || p->count_type == T_F64)
          return hicp__fail(f->ctx, HICP_EFORMAT, "%s line %zu: bad list count type '%.*s'",
                            f->name, t->line, hicp__utf8_prec(tok, 40), tok);
        hicp__text_token(t, NULL, tok, sizeof tok);
      }
      p->type = parse_type(tok);
      if (p->type == T_NONE)
        return hicp__fail(f->ctx, HICP_EFORMAT, "%s line %zu: unknown property type '%.*s'",
                          f->name, t->line, hicp__utf8_prec(tok, 40), tok);
      if (hicp__text_token(t, NULL, p->name, sizeof p->name) == 0)
        return hicp__fail(f->ctx, HICP_EFORMAT, "%s line %zu: property without a name", f->name,
                          t->line);
      e->nprops++;
    } else {
      return hicp__fail(f->ctx, HICP_EFORMAT, "%s line %zu: unknown header line '%.*s'", f->name,
                        t->line, hicp__utf8_prec(tok, 40), tok);
    }
    hicp__text_skip_blanks(t);
    if (!hicp__text_at_eol(t, 0))
      return hicp__fail(f->ctx, HICP_EFORMAT, "%s line %zu: unexpected text after '%s'", f->name,
                        t->line, tok);
    hicp__text_next_line(t);
  }
  if (!have_format)
    return hicp__fail(f->ctx, HICP_EFORMAT, "%s: the header has no format line", f->name);
  return HICP_OK;
}

/* One binary value, as a double (exact for every PLY type). */
static double read_bin(const unsigned char *p, ptype t, int big)
{
  const unsigned n = (unsigned)type_size[t];
  const uint64_t u = hicp__bytes_uint(p, n, big);
  switch (t) {
  case T_I8: case T_I16: case T_I32: return (double)hicp__bytes_int(u, n);
  case T_U8: case T_U16: case T_U32: return (double)u;
  case T_F32: return hicp__bytes_float(u);
  case T_F64: return hicp__bytes_double(u);
  default: return 0.0;
  }
}

typedef struct reader {
  ply *f;
  hicp__text t;           /* ascii */
  const unsigned char *p; /* binary position */
  const unsigned char *end;
} reader;

/* read_value's answer at the end of an ascii record's line (the caller,
 * which knows the record, reports it); not a HICP_E* code. */
#define SHORT_LINE 1

/* How read_value takes a value: one hicp does not use (which may then be
 * nan or inf in ascii as in binary: normals of points without one, say),
 * one it uses, or a vertex coordinate, which may be NaN (a pixel without a
 * measurement, checked with the record's other two: check_vertex). */
enum { UNUSED = 0, USED = 1, COORDINATE = 2 };

/* Reads one value of type `t` (ascii or binary), taken as `use` says.  An
 * ascii value must be on the record's line: SHORT_LINE at its end. */
static int read_value(reader *r, ptype t, const char *what, int use, double *v)
{
  if (r->f->enc == ASCII) {
    hicp__text_skip_blanks(&r->t);
    int rc = hicp__text_check_nul(&r->t);
    if (rc != HICP_OK)
      return rc;
    if (hicp__text_at_eol(&r->t, 0))
      return SHORT_LINE;
    if (use != USED) {
      const unsigned char *at = r->t.p;
      char tok[128];
      size_t n = hicp__text_token(&r->t, NULL, tok, sizeof tok);
      if (n > 0 && n < sizeof tok && hicp__parse_double(tok, v) == HICP_ENONFINITE &&
          (use == UNUSED || hicp__is_nan_token(tok))) {
        *v = NAN;
        return HICP_OK;
      }
      r->t.p = at; /* not a non-finite number: reported as usual below */
    }
    rc = hicp__text_number(&r->t, 0, 0, what, v);
    /* An integer property holds what its type holds, as in a binary file:
     * 300 or -1 for a uchar, 0.5 for an int, is a file at odds with its
     * header (the review, stop 53: they were read as given). */
    static const double lo[] = {0, -128.0, 0, -32768.0, 0, -2147483648.0, 0};
    static const double hi[] = {0, 127.0, 255.0, 32767.0, 65535.0, 2147483647.0, 4294967295.0};
    static const char *const name[] = {"", "char", "uchar", "short", "ushort", "int", "uint"};
    if (rc == HICP_OK && t >= T_I8 && t <= T_U32 &&
        !(*v >= lo[t] && *v <= hi[t] && *v == floor(*v)))
      return hicp__fail(r->f->ctx, HICP_EFORMAT, "%s line %zu: %s of %.17g, which a %s cannot hold",
                        r->f->name, r->t.line, what, *v, name[t]);
    return rc;
  }
  if ((size_t)(r->end - r->p) < type_size[t])
    return hicp__fail(r->f->ctx, HICP_EFORMAT, "%s: the file ends in the middle of the data (truncated)",
                      r->f->name);
  *v = read_bin(r->p, t, r->f->enc == BIN_BE);
  r->p += type_size[t];
  return HICP_OK;
}

/* Smallest bytes one record of `e` can take: proves counts plausible. */
static size_t min_record(const ply *f, const element *e)
{
  size_t s = 0;
  for (int i = 0; i < e->nprops; i++) {
    if (f->enc == ASCII)
      s += 2; /* a digit and a separator */
    else
      s += type_size[e->props[i].count_type != T_NONE ? e->props[i].count_type : e->props[i].type];
  }
  return s;
}

/* An ascii record whose line holds fewer or more values than its
 * properties call for: `want` values so far (lists counted with their
 * items), `open`: 1 if properties not yet reached may call for more (a
 * list whose length is not read yet). */
static int bad_record(reader *r, const element *e, uint64_t rec, const unsigned char *line,
                      uint64_t want, int open)
{
  size_t have = hicp__text_count_tokens(&r->t, line, NULL);
  return hicp__fail(r->f->ctx, HICP_EFORMAT,
                    "%s line %zu: %s %llu has %zu value%s, its %d propert%s call%s for %s%llu "
                    "(one record a line)",
                    r->f->name, r->t.line, e->name, (unsigned long long)rec, have,
                    have == 1 ? "" : "s", e->nprops, e->nprops == 1 ? "y" : "ies",
                    e->nprops == 1 ? "s" : "", open ? "at least " : "", (unsigned long long)want);
}

/* 1 if the header declares faces: the vertices are a mesh's, not a
 * sensor's pixels. */
static int has_faces(const ply *f)
{
  for (int i = 0; i < f->nel; i++)
    if (strcmp(f->el[i].name, "face") == 0 && f->el[i].count > 0)
      return 1;
  return 0;
}

/* A vertex with all three coordinates NaN is a pixel without a measurement,
 * as PCL writes an organised cloud (savePLYFile), dropped after reading
 * (drop_unmeasured) as the PCD reader drops it; in a mesh it is refused.
 * Some but not all NaN, any infinity, or a magnitude beyond hicp's limit
 * is refused, with the vertex's number in the file. */
static int check_vertex(reader *r, uint64_t rec, const double v[3])
{
  const int nans = isnan(v[0]) + isnan(v[1]) + isnan(v[2]);
  if (nans == 0) /* infinities and magnitudes, numbered as the file numbers them */
    return hicp__raw_check_point(r->f->ctx, r->f->name, rec, v);
  if (nans == 3 && !r->f->faces) {
    r->f->unmeasured++;
    return HICP_OK;
  }
  if (r->f->enc == ASCII)
    return hicp__fail(r->f->ctx, HICP_ENONFINITE, "%s line %zu: vertex %llu has a NaN coordinate%s",
                      r->f->name, r->t.line, (unsigned long long)rec,
                      nans == 3 ? " (a mesh's vertex must have one)" : "");
  return hicp__fail(r->f->ctx, HICP_ENONFINITE, "%s: vertex %llu has a NaN coordinate%s", r->f->name,
                    (unsigned long long)rec, nans == 3 ? " (a mesh's vertex must have one)" : "");
}

/* Drops the vertices check_vertex let through with x, y and z NaN. */
static void drop_unmeasured(hicp__raw_cloud *out)
{
  size_t kept = 0;
  for (size_t i = 0; i < out->n; i++) {
    const double *v = &out->xyz[3 * i];
    if (isnan(v[0]) && isnan(v[1]) && isnan(v[2]))
      continue;
    if (kept != i)
      memmove(&out->xyz[3 * kept], v, 3 * sizeof(double));
    kept++;
  }
  out->n = kept;
}

/* 1 if a property after the k-th is a list (which calls for its length
 * and at least that many values more). */
static int list_after(const element *e, int k)
{
  for (int i = k + 1; i < e->nprops; i++)
    if (e->props[i].count_type != T_NONE)
      return 1;
  return 0;
}

static int find_prop(const element *e, const char *name)
{
  for (int i = 0; i < e->nprops; i++)
    if (strcmp(e->props[i].name, name) == 0)
      return i;
  return -1;
}

static int read_element(reader *r, const element *e, hicp__raw_cloud *out, size_t *tri_cap,
                        int *have_vertex)
{
  ply *f = r->f;
  int is_vertex = strcmp(e->name, "vertex") == 0 && !*have_vertex;
  int is_face = strcmp(e->name, "face") == 0;
  int ix = -1, iy = -1, iz = -1, ifc = -1;
  if (is_vertex) {
    ix = find_prop(e, "x");
    iy = find_prop(e, "y");
    iz = find_prop(e, "z");
    if (ix < 0 || iy < 0 || iz < 0)
      return hicp__fail(f->ctx, HICP_EFORMAT, "%s: the vertex element has no %s property",
                        f->name, ix < 0 ? "x" : iy < 0 ? "y" : "z");
    if (e->props[ix].count_type != T_NONE || e->props[iy].count_type != T_NONE ||
        e->props[iz].count_type != T_NONE)
      return hicp__fail(f->ctx, HICP_EFORMAT, "%s: vertex x, y, z must not be lists", f->name);
  }
  if (is_face) {
    ifc = find_prop(e, "vertex_indices");
    if (ifc < 0)
      ifc = find_prop(e, "vertex_index");
    if (ifc >= 0 && e->props[ifc].count_type == T_NONE)
      return hicp__fail(f->ctx, HICP_EFORMAT, "%s: face vertex_indices must be a list", f->name);
  }
  /* Indices are checked here, against the header's vertex count, so that
   * the message names the face of the file, not a triangle of the fan
   * (none: refused after reading, "no vertex element"). */
  uint64_t nvert = UINT64_MAX;
  for (int i = 0; is_face && i < f->nel; i++)
    if (strcmp(f->el[i].name, "vertex") == 0) {
      nvert = f->el[i].count;
      break;
    }
  size_t remaining = f->enc == ASCII ? (size_t)(r->t.end - r->t.p) : (size_t)(r->end - r->p);
  size_t minrec = min_record(f, e);
  /* in ascii the file's last record may lack its final separator */
  size_t slack = f->enc == ASCII ? 1 : 0;
  if (minrec > 0 && e->count > (remaining + slack) / minrec)
    return hicp__fail(f->ctx, HICP_EFORMAT,
                      "%s: the header promises %llu %s records but the file is too short for them "
                      "(truncated or corrupt)",
                      f->name, (unsigned long long)e->count, e->name);
  if (is_vertex) {
    int rc = hicp__raw_reserve_points(f->ctx, f->name, out, (size_t)e->count);
    if (rc != HICP_OK)
      return rc;
    out->n = (size_t)e->count;
    *have_vertex = 1;
  }
  if (e->nprops == 0)
    return HICP_OK; /* empty records: nothing to read, however many the header says */
  uint32_t idx[3] = {0, 0, 0};
  for (uint64_t rec = 0; rec < e->count; rec++) {
    /* ascii: one record a line; blank lines between records are let pass */
    const unsigned char *line = NULL;
    uint64_t want = 0; /* values the record's properties call for so far */
    if (f->enc == ASCII) {
      hicp__text_skip_space(&r->t, 0);
      line = r->t.p;
    }
    for (int k = 0; k < e->nprops; k++) {
      const prop *p = &e->props[k];
      const uint64_t rest = (uint64_t)(e->nprops - 1 - k); /* at least one value each */
      double v;
      int rc;
      want++;
      if (p->count_type == T_NONE) {
        const int used = is_vertex && (k == ix || k == iy || k == iz);
        rc = read_value(r, p->type, "a number", used ? COORDINATE : UNUSED, &v);
        if (rc == SHORT_LINE)
          return bad_record(r, e, rec, line, want + rest, list_after(e, k));
        if (rc != HICP_OK)
          return rc;
        if (used)
          out->xyz[3 * rec + (k == ix ? 0 : k == iy ? 1 : 2)] = v;
        continue;
      }
      double len;
      rc = read_value(r, p->count_type, "a list length", USED, &len);
      if (rc == SHORT_LINE)
        return bad_record(r, e, rec, line, want + rest, 1);
      if (rc != HICP_OK)
        return rc;
      if (len < 0 || len != floor(len) || len > MAX_LIST)
        return hicp__fail(f->ctx, HICP_EFORMAT, "%s: %s record %llu has a list of length %g",
                          f->name, e->name, (unsigned long long)rec, len);
      want += (uint64_t)len;
      for (uint32_t j = 0; j < (uint32_t)len; j++) {
        rc = read_value(r, p->type, "a list item", k == ifc ? USED : UNUSED, &v);
        if (rc == SHORT_LINE)
          return bad_record(r, e, rec, line, want + rest, list_after(e, k));
        if (rc != HICP_OK)
          return rc;
        if (k != ifc)
          continue;
        if (v < 0 || v != floor(v) || v >= 4294967295.0)
          return hicp__fail(f->ctx, HICP_EFORMAT, "%s: face %llu has an invalid vertex index %g",
                            f->name, (unsigned long long)rec, v);
        if (v >= (double)nvert)
          return hicp__fail(f->ctx, HICP_EFORMAT,
                            "%s: face %llu uses vertex %.0f but there are %llu vertices", f->name,
                            (unsigned long long)rec, v, (unsigned long long)nvert);
        /* fan: (i0, i_{j-1}, i_j) */
        if (j == 0)
          idx[0] = (uint32_t)v;
        else if (j == 1)
          idx[1] = (uint32_t)v;
        else {
          idx[2] = (uint32_t)v;
          rc = hicp__raw_push_triangle(f->ctx, f->name, out, tri_cap, idx[0], idx[1], idx[2]);
          if (rc != HICP_OK)
            return rc;
          idx[1] = idx[2];
        }
      }
    }
    if (f->enc == ASCII) {
      hicp__text_skip_blanks(&r->t);
      int rc = hicp__text_check_nul(&r->t);
      if (rc != HICP_OK)
        return rc;
      if (!hicp__text_at_eol(&r->t, 0))
        return bad_record(r, e, rec, line, want, 0);
    }
    if (is_vertex) {
      int rc = check_vertex(r, rec, &out->xyz[3 * rec]);
      if (rc != HICP_OK)
        return rc;
    }
  }
  return HICP_OK;
}

/* "3 vertex, 1 face": the declared records, for messages. */
static void describe_elements(const ply *f, char *s, size_t n)
{
  size_t at = 0;
  s[0] = '\0';
  for (int i = 0; i < f->nel && at + 1 < n; i++) {
    int k = snprintf(s + at, n - at, "%s%llu %s", i ? ", " : "",
                     (unsigned long long)f->el[i].count, f->el[i].name);
    if (k < 0)
      break;
    at += (size_t)k;
  }
}

/* Nothing may follow the last record but blanks and line ends (in a binary
 * file too: some writers end it with a newline). */
static int check_end(reader *r)
{
  ply *f = r->f;
  char els[160], what[200];
  describe_elements(f, els, sizeof els);
  if (f->enc == ASCII) {
    snprintf(what, sizeof what, "the last declared record (%s)", els);
    return hicp__text_expect_end(&r->t, 0, what);
  }
  const unsigned char *q = r->p;
  while (q < r->end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
    q++;
  if (q == r->end)
    return HICP_OK;
  const size_t n = (size_t)(r->end - r->p);
  return hicp__fail(f->ctx, HICP_EFORMAT, "%s: %zu byte%s after the last declared record (%s)",
                    f->name, n, n == 1 ? "" : "s", els);
}

int hicp__parse_ply(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len,
                    hicp__raw_cloud *out)
{
  ply *f = calloc(1, sizeof *f);
  if (f == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "%s: out of memory", name);
  f->ctx = ctx;
  f->name = name;
  reader r;
  hicp__text_init(&r.t, ctx, name, buf, buf + len, 1);
  int rc = parse_header(f, &r.t);
  if (rc == HICP_OK) {
    r.f = f;
    r.p = r.t.p;
    r.end = buf + len;
    f->faces = has_faces(f);
    size_t tri_cap = 0;
    int have_vertex = 0;
    for (int i = 0; i < f->nel && rc == HICP_OK; i++)
      rc = read_element(&r, &f->el[i], out, &tri_cap, &have_vertex);
    if (rc == HICP_OK && !have_vertex)
      rc = hicp__fail(ctx, HICP_EFORMAT, "%s: no vertex element", name);
    if (rc == HICP_OK)
      rc = check_end(&r);
    if (rc == HICP_OK && f->unmeasured > 0)
      drop_unmeasured(out);
    if (rc == HICP_OK)
      rc = hicp__raw_check_triangles(ctx, name, out);
  }
  for (int i = 0; i < f->nel; i++)
    free(f->el[i].props);
  free(f);
  return rc;
}
