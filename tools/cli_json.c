/* cli_json.c: the hicp tool's --json output (cli.h). */
#include "config.h"

#include <math.h>

#include "cli.h"

static void sep(json *j)
{
  if (!j->first[j->depth])
    fputc(',', j->f);
  j->first[j->depth] = 0;
}

void json_begin(json *j, FILE *f)
{
  j->f = f;
  j->depth = 0;
  j->first[0] = 1;
  fputc('{', f);
}

void json_end(json *j)
{
  fputs("}\n", j->f);
}

/* The length of the well-formed UTF-8 sequence at s, 0 if there is none
 * (Unicode's table 3-7: no overlong forms, no surrogates, nothing above
 * U+10FFFF; a sequence cut short meets a byte that does not continue it, at
 * the latest the terminating NUL). */
static int utf8_length(const unsigned char *s)
{
  unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
  int n;
  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xC2 && s[0] <= 0xDF) {
    n = 2;
  } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
    n = 3;
    lo = s[0] == 0xE0 ? 0xA0 : lo;
    hi = s[0] == 0xED ? 0x9F : hi;
  } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
    n = 4;
    lo = s[0] == 0xF0 ? 0x90 : lo;
    hi = s[0] == 0xF4 ? 0x8F : hi;
  } else {
    return 0;
  }
  if (s[1] < lo || s[1] > hi)
    return 0;
  for (int i = 2; i < n; i++)
    if (s[i] < 0x80 || s[i] > 0xBF)
      return 0;
  return n;
}

/* JSON text must be UTF-8, but file names are bytes: each byte that is not
 * part of a well-formed sequence becomes U+FFFD. */
static void put_string(FILE *f, const char *str)
{
  const unsigned char *s = (const unsigned char *)str;
  fputc('"', f);
  while (*s != '\0') {
    const int n = utf8_length(s);
    if (n == 0)
      fputs("\\ufffd", f);
    else if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if (*s < 0x20)
      fprintf(f, "\\u%04x", *s);
    else
      fwrite(s, 1, (size_t)n, f);
    s += n > 0 ? n : 1;
  }
  fputc('"', f);
}

void json_key(json *j, const char *key)
{
  sep(j);
  if (key != NULL) {
    put_string(j->f, key);
    fputc(':', j->f);
  }
}

void json_object_begin(json *j, const char *key)
{
  json_key(j, key);
  fputc('{', j->f);
  j->first[++j->depth] = 1;
}

void json_object_end(json *j)
{
  fputc('}', j->f);
  j->depth--;
}

void json_array_begin(json *j, const char *key)
{
  json_key(j, key);
  fputc('[', j->f);
  j->first[++j->depth] = 1;
}

void json_array_end(json *j)
{
  fputc(']', j->f);
  j->depth--;
}

void json_num(json *j, const char *key, double v)
{
  json_key(j, key);
  if (isfinite(v))
    fprintf(j->f, "%.17g", v);
  else
    fputs("null", j->f);
}

void json_int(json *j, const char *key, long long v)
{
  json_key(j, key);
  fprintf(j->f, "%lld", v);
}

void json_bool(json *j, const char *key, int v)
{
  json_key(j, key);
  fputs(v ? "true" : "false", j->f);
}

void json_str(json *j, const char *key, const char *v)
{
  json_key(j, key);
  put_string(j->f, v);
}

void json_null(json *j, const char *key)
{
  json_key(j, key);
  fputs("null", j->f);
}

void json_transform(json *j, const char *key, const hicp_transform *t)
{
  json_array_begin(j, key);
  for (int i = 0; i < 4; i++) {
    json_array_begin(j, NULL);
    for (int k = 0; k < 4; k++)
      json_num(j, NULL, t->m[4 * i + k]);
    json_array_end(j);
  }
  json_array_end(j);
}

void json_rotation(json *j, const char *key, const hicp_transform *t)
{
  json_array_begin(j, key);
  for (int i = 0; i < 3; i++) {
    json_array_begin(j, NULL);
    for (int k = 0; k < 3; k++)
      json_num(j, NULL, t->m[4 * i + k]);
    json_array_end(j);
  }
  json_array_end(j);
}

void json_translation(json *j, const char *key, const hicp_transform *t)
{
  json_array_begin(j, key);
  for (int i = 0; i < 3; i++)
    json_num(j, NULL, t->m[4 * i + 3]);
  json_array_end(j);
}
