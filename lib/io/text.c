/* text.c: locale-independent numbers, the text cursor, raw-cloud arrays. */
#include "config.h"

#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/text.h"

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;

static void make_c_locale(void)
{
  c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

locale_t hicp__c_locale(void)
{
  pthread_once(&c_locale_once, make_c_locale);
  return c_locale;
}

int hicp__parse_double(const char *tok, double *out)
{
  pthread_once(&c_locale_once, make_c_locale);
  if (tok[0] == '\0')
    return HICP_EFORMAT;
  char *end;
  double v = c_locale != (locale_t)0 ? strtod_l(tok, &end, c_locale) : strtod(tok, &end);
  if (end == tok || *end != '\0')
    return HICP_EFORMAT;
  if (!isfinite(v))
    return HICP_ENONFINITE;
  *out = v;
  return HICP_OK;
}

int hicp__is_nan_token(const char *tok)
{
  if (*tok == '-' || *tok == '+')
    tok++;
  return (tok[0] == 'n' || tok[0] == 'N') && (tok[1] == 'a' || tok[1] == 'A') &&
         (tok[2] == 'n' || tok[2] == 'N') && tok[3] == '\0';
}

void hicp__text_init(hicp__text *t, hicp_context *ctx, const char *name, const unsigned char *p,
                     const unsigned char *end, size_t first_line)
{
  t->p = p;
  t->end = end;
  t->line = first_line;
  t->name = name;
  t->ctx = ctx;
}

/* Line ends: "\n", "\r\n" and a lone "\r" (classic Mac OS files, which
 * would otherwise read as one long line: one point and ignored columns). */
static int eol_char(unsigned char c)
{
  return c == '\n' || c == '\r';
}

/* Steps over the line end at t->p (one line, even for "\r\n"). */
static void take_eol(hicp__text *t)
{
  if (*t->p++ == '\r' && t->p < t->end && *t->p == '\n')
    t->p++;
  t->line++;
}

static int blank(unsigned char c)
{
  return c == ' ' || c == '\t' || c == '\v' || c == '\f';
}

int hicp__text_head_word(hicp__text *t, hicp_context *ctx, const char *name,
                         const unsigned char *buf, size_t len, char *word, size_t wordlen)
{
  hicp__text_init(t, ctx, name, buf, buf + len, 1);
  hicp__text_skip_space(t, '#');
  hicp__text_token(t, NULL, word, wordlen);
  return t->p < t->end;
}

void hicp__text_skip_blanks(hicp__text *t)
{
  while (t->p < t->end && blank(*t->p))
    t->p++;
}

void hicp__text_next_line(hicp__text *t)
{
  while (t->p < t->end && !eol_char(*t->p))
    t->p++;
  if (t->p < t->end)
    take_eol(t);
}

void hicp__text_skip_space(hicp__text *t, char comment)
{
  for (;;) {
    hicp__text_skip_blanks(t);
    if (t->p >= t->end)
      return;
    if (eol_char(*t->p)) {
      take_eol(t);
    } else if (comment != 0 && *t->p == (unsigned char)comment) {
      hicp__text_next_line(t);
    } else {
      return;
    }
  }
}

int hicp__text_at_eol(const hicp__text *t, char comment)
{
  return t->p >= t->end || eol_char(*t->p) || *t->p == '\0' ||
         (comment != 0 && *t->p == (unsigned char)comment);
}

int hicp__text_check_nul(const hicp__text *t)
{
  if (t->p < t->end && *t->p == '\0')
    return hicp__fail(t->ctx, HICP_EFORMAT, "%s line %zu: a NUL byte in a text file", t->name,
                      t->line);
  return HICP_OK;
}

int hicp__text_skip_line(hicp__text *t)
{
  while (t->p < t->end && !eol_char(*t->p)) {
    if (*t->p == '\0')
      return hicp__text_check_nul(t);
    t->p++;
  }
  if (t->p < t->end)
    take_eol(t);
  return HICP_OK;
}

static int token_char(unsigned char c, const char *seps)
{
  return !blank(c) && !eol_char(c) && c != '\0' && (seps == NULL || strchr(seps, c) == NULL);
}

size_t hicp__text_count_tokens(const hicp__text *t, const unsigned char *p, const char *seps)
{
  size_t n = 0;
  while (p < t->end && !eol_char(*p) && *p != '\0') {
    if (token_char(*p, seps)) {
      n++;
      while (p < t->end && token_char(*p, seps))
        p++;
    } else {
      p++;
    }
  }
  return n;
}

int hicp__text_expect_end(hicp__text *t, char comment, const char *what)
{
  hicp__text_skip_space(t, comment);
  if (t->p >= t->end)
    return HICP_OK;
  int rc = hicp__text_check_nul(t);
  if (rc != HICP_OK)
    return rc;
  return hicp__fail(t->ctx, HICP_EFORMAT, "%s line %zu: data after %s", t->name, t->line, what);
}

size_t hicp__text_token(hicp__text *t, const char *seps, char *tok, size_t toklen)
{
  hicp__text_skip_blanks(t);
  size_t n = 0;
  while (t->p < t->end && token_char(*t->p, seps)) {
    if (n + 1 < toklen)
      tok[n] = (char)*t->p;
    n++;
    t->p++;
  }
  tok[n < toklen ? n : toklen - 1] = '\0';
  return n;
}

/* Quotes a token for a message: printable, at most 24 characters. */
static void quote(const char *tok, char *out, size_t outlen)
{
  size_t k = 0;
  for (size_t i = 0; tok[i] != '\0' && k + 4 < outlen && i < 24; i++)
    out[k++] = (tok[i] >= 32 && tok[i] < 127) ? tok[i] : '?';
  if (strlen(tok) > 24 && k + 4 < outlen) {
    out[k++] = '.';
    out[k++] = '.';
    out[k++] = '.';
  }
  out[k] = '\0';
}

int hicp__text_number_token(hicp__text *t, const char *seps, const char *what, char *tok,
                            size_t toklen)
{
  size_t n = hicp__text_token(t, seps, tok, toklen);
  if (n >= toklen)
    return hicp__fail(t->ctx, HICP_EFORMAT, "%s line %zu: expected %s, got %zu characters",
                      t->name, t->line, what, n);
  return HICP_OK;
}

int hicp__text_number(hicp__text *t, int skip_newlines, char comment, const char *what,
                      double *out)
{
  char tok[128], q[40];
  if (skip_newlines)
    hicp__text_skip_space(t, comment);
  else
    hicp__text_skip_blanks(t);
  if (hicp__text_at_eol(t, comment))
    return hicp__fail(t->ctx, HICP_EFORMAT, "%s line %zu: expected %s, found %s", t->name,
                      t->line, what, t->p >= t->end ? "the end of the file" : "the end of the line");
  int rc = hicp__text_number_token(t, NULL, what, tok, sizeof tok);
  if (rc != HICP_OK)
    return rc;
  rc = hicp__parse_double(tok, out);
  if (rc == HICP_ENONFINITE)
    return hicp__fail(t->ctx, rc, "%s line %zu: non-finite number '%s'", t->name, t->line,
                      (quote(tok, q, sizeof q), q));
  if (rc != HICP_OK)
    return hicp__fail(t->ctx, rc, "%s line %zu: expected %s, got '%s'", t->name, t->line, what,
                      (quote(tok, q, sizeof q), q));
  return HICP_OK;
}

int hicp__text_count(hicp__text *t, int skip_newlines, char comment, const char *what,
                     uint64_t max, uint64_t *out)
{
  double v;
  int rc = hicp__text_number(t, skip_newlines, comment, what, &v);
  if (rc != HICP_OK)
    return rc;
  if (v < 0 || v != floor(v) || v > (double)max)
    return hicp__fail(t->ctx, HICP_EFORMAT, "%s line %zu: %s %.17g is not a count from 0 to %llu",
                      t->name, t->line, what, v, (unsigned long long)max);
  *out = (uint64_t)v;
  return HICP_OK;
}

int hicp__raw_reserve_points(hicp_context *ctx, const char *name, hicp__raw_cloud *raw, size_t n)
{
  size_t bytes;
  if (n >= UINT32_MAX || hicp__mul_size(n, 3 * sizeof(double), &bytes) != 0)
    return hicp__fail(ctx, HICP_ELIMIT, "%s: %zu points are more than hicp supports", name, n);
  char what[300];
  snprintf(what, sizeof what, "%s: %zu points", name, n);
  /* Reading needs the doubles and, later, the floats of the cloud. */
  int rc = hicp__check_budget(ctx, (uint64_t)n * 36u, what);
  if (rc != HICP_OK)
    return rc;
  double *x = realloc(raw->xyz, bytes != 0 ? bytes : 1);
  if (x == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "%s: out of memory for %zu points", name, n);
  raw->xyz = x;
  return HICP_OK;
}

int hicp__raw_push_triangle(hicp_context *ctx, const char *name, hicp__raw_cloud *raw,
                            size_t *cap, uint32_t a, uint32_t b, uint32_t c)
{
  if (raw->ntri == *cap) {
    size_t ncap = *cap ? *cap * 2 : 1024;
    char what[300];
    snprintf(what, sizeof what, "%s: %zu triangles", name, ncap);
    int rc = hicp__check_budget(ctx, (uint64_t)ncap * 12u, what);
    if (rc != HICP_OK)
      return rc;
    uint32_t *t = realloc(raw->tri, ncap * 3 * sizeof(uint32_t));
    if (t == NULL)
      return hicp__fail(ctx, HICP_ENOMEM, "%s: out of memory for triangles", name);
    raw->tri = t;
    *cap = ncap;
  }
  raw->tri[3 * raw->ntri] = a;
  raw->tri[3 * raw->ntri + 1] = b;
  raw->tri[3 * raw->ntri + 2] = c;
  raw->ntri++;
  return HICP_OK;
}

int hicp__raw_check_point(hicp_context *ctx, const char *name, uint64_t index, const double v[3])
{
  char what[160];
  snprintf(what, sizeof what, "%.*s:", hicp__utf8_prec(name, 150), name);
  return hicp__check_point(ctx, what, (size_t)index, v[0], v[1], v[2]);
}

int hicp__raw_check_triangles(hicp_context *ctx, const char *name, const hicp__raw_cloud *raw)
{
  for (size_t i = 0; i < 3 * raw->ntri; i++)
    if (raw->tri[i] >= raw->n)
      return hicp__fail(ctx, HICP_EFORMAT, "%s: face %zu uses vertex %u but there are %zu vertices",
                        name, i / 3, (unsigned)raw->tri[i], raw->n);
  return HICP_OK;
}
