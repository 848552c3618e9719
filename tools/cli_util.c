/* cli_util.c: option parsing, transforms, JSON for the hicp tool. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

void cli_error(const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  for (char *c = msg; *c; c++)
    if (*c == '\n')
      *c = ' ';
  fprintf(stderr, "hicp: %s\n", msg);
}

int cli_fail(hicp_context *ctx, const char *what)
{
  const char *msg = ctx != NULL ? hicp_context_error(ctx) : "";
  if (what != NULL && what[0] != '\0' && strstr(msg, what) == NULL)
    cli_error("%s: %s", what, msg[0] ? msg : "failed");
  else
    cli_error("%s", msg[0] ? msg : "failed");
  return CLI_FAIL;
}

int cli_int(const char *opt, const char *s, long lo, long hi, int *out)
{
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) {
    cli_error("%s: expected an integer from %ld to %ld, got '%s'", opt, lo, hi, s);
    return -1;
  }
  *out = (int)v;
  return 0;
}

int cli_u64(const char *opt, const char *s, unsigned long long *out)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
    cli_error("%s: expected a non-negative integer, got '%s'", opt, s);
    return -1;
  }
  *out = v;
  return 0;
}

int cli_size(const char *opt, const char *s, unsigned long long *out)
{
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  int shift = 0;
  if (errno == 0 && end != s && s[0] != '-' && end[0] != '\0' && end[1] == '\0') {
    switch (end[0]) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: break;
    }
  }
  if (errno != 0 || end == s || *end != '\0' || s[0] == '-' || v == 0 || (v << shift) >> shift != v) {
    cli_error("%s: expected a size in bytes such as 1048576, 512M or 8G, got '%s'", opt, s);
    return -1;
  }
  *out = v << shift;
  return 0;
}

int cli_double(const char *opt, const char *s, double lo, double hi, double *out)
{
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0' || !isfinite(v) || v < lo || v > hi) {
    cli_error("%s: expected a number from %g to %g, got '%s'", opt, lo, hi, s);
    return -1;
  }
  *out = v;
  return 0;
}

int cli_vec3(const char *opt, const char *s, double out[3])
{
  char buf[256];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL, *tok = strtok_r(buf, ",", &save);
  int k = 0;
  while (tok != NULL && k < 4) {
    char *end;
    errno = 0;
    double v = strtod(tok, &end);
    if (errno != 0 || end == tok || *end != '\0' || !isfinite(v))
      break;
    if (k < 3)
      out[k] = v;
    k++;
    tok = strtok_r(NULL, ",", &save);
  }
  if (k != 3 || tok != NULL) {
    cli_error("%s: expected three numbers X,Y,Z, got '%s'", opt, s);
    return -1;
  }
  return 0;
}

int cli_int_list(const char *opt, const char *s, int *out, int max)
{
  char buf[512];
  snprintf(buf, sizeof buf, "%s", s);
  char *save = NULL, *tok = strtok_r(buf, ",", &save);
  int n = 0;
  while (tok != NULL) {
    int v;
    if (n >= max || cli_int(opt, tok, 0, 1023, &v) != 0)
      return -1;
    out[n++] = v;
    tok = strtok_r(NULL, ",", &save);
  }
  if (n == 0) {
    cli_error("%s: expected a comma-separated list of device numbers", opt);
    return -1;
  }
  return n;
}

void cli_common_init(cli_common *c)
{
  memset(c, 0, sizeof *c);
  c->backend = HICP_BACKEND_AUTO;
}

int cli_common_option(cli_common *c, const char *name, const char *value)
{
  if (strcmp(name, "threads") == 0)
    return cli_int("--threads", value, 0, 4096, &c->threads) == 0 ? 1 : -1;
  if (strcmp(name, "backend") == 0) {
    if (hicp_backend_from_name(value, &c->backend) != HICP_OK) {
      cli_error("--backend: expected auto, cpu, cuda or hybrid, got '%s'", value);
      return -1;
    }
    return 1;
  }
  if (strcmp(name, "memory-limit") == 0)
    return cli_size("--memory-limit", value, &c->memory_limit) == 0 ? 1 : -1;
  if (strcmp(name, "devices") == 0) {
    int n = cli_int_list("--devices", value, c->devices, 64);
    if (n < 0)
      return -1;
    c->ndevices = n;
    return 1;
  }
  return 0;
}

hicp_context *cli_context(const cli_common *c)
{
  hicp_context_options o;
  hicp_context_options_init(&o);
  o.threads = c->threads;
  o.backend = c->backend;
  o.devices = c->ndevices ? c->devices : NULL;
  o.ndevices = c->ndevices;
  o.memory_limit = c->memory_limit;
  hicp_context *ctx = NULL;
  int rc = hicp_context_create(&o, &ctx);
  if (rc != HICP_OK) {
    cli_error("cannot create a context: %s", hicp_strerror(rc));
    return NULL;
  }
  return ctx;
}

int cli_read_transform(const char *path, hicp_transform *t)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    cli_error("cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  double v[17];
  int n = 0, bad = 0;
  char line[1024];
  while (!bad && fgets(line, sizeof line, f) != NULL) {
    char *hash = strchr(line, '#');
    if (hash != NULL)
      *hash = '\0';
    char *save = NULL;
    for (char *tok = strtok_r(line, " \t,;\r\n", &save); tok != NULL;
         tok = strtok_r(NULL, " \t,;\r\n", &save)) {
      char *end;
      double x = strtod(tok, &end);
      if (end == tok || *end != '\0' || !isfinite(x) || n >= 16) {
        bad = 1;
        break;
      }
      v[n++] = x;
    }
  }
  fclose(f);
  if (bad || (n != 16 && n != 12)) {
    cli_error("%s: expected 16 (4x4) or 12 (3x4) numbers for a transform", path);
    return -1;
  }
  hicp_transform_identity(t);
  memcpy(t->m, v, sizeof(double) * (size_t)n);
  if (hicp_transform_check(t) != HICP_OK) {
    cli_error("%s: not a rigid transform (R must be a rotation, last row 0 0 0 1)", path);
    return -1;
  }
  return 0;
}

void cli_print_transform(FILE *f, const hicp_transform *t, const char *indent)
{
  for (int i = 0; i < 4; i++)
    fprintf(f, "%s%24.17g %24.17g %24.17g %24.17g\n", indent, t->m[4 * i], t->m[4 * i + 1],
            t->m[4 * i + 2], t->m[4 * i + 3]);
}

int cli_write_transform(const char *path, const hicp_transform *t)
{
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    cli_error("cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  fprintf(f, "# rigid transform, 4x4 row-major (scan -> model: x = R p + t)\n");
  cli_print_transform(f, t, "");
  if (fclose(f) != 0) {
    cli_error("cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  return 0;
}

void cli_rotation_angle_axis(const hicp_transform *t, double *deg, double axis[3])
{
  const double *m = t->m;
  double c = (m[0] + m[5] + m[10] - 1.0) / 2.0;
  c = c > 1.0 ? 1.0 : c < -1.0 ? -1.0 : c;
  *deg = acos(c) * 180.0 / M_PI;
  double a[3] = {m[9] - m[6], m[2] - m[8], m[4] - m[1]};
  double n = sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
  for (int i = 0; i < 3; i++)
    axis[i] = n > 0 ? a[i] / n : (i == 2);
}

void cli_transform_error(const hicp_transform *a, const hicp_transform *b, const double at[3],
                         double *rot_deg, double *trans, double *pos)
{
  double tr = 0.0;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      tr += a->m[4 * i + j] * b->m[4 * i + j];
  double c = (tr - 1.0) / 2.0;
  c = c > 1.0 ? 1.0 : c < -1.0 ? -1.0 : c;
  *rot_deg = acos(c) * 180.0 / M_PI;
  /* d = ta - tb, and e = (A - B) at, row by row: the difference first, so
   * that two poses that agree give 0 however far `at` is */
  double d[3], e[3];
  for (int i = 0; i < 3; i++) {
    d[i] = a->m[4 * i + 3] - b->m[4 * i + 3];
    e[i] = d[i];
    for (int j = 0; j < 3; j++)
      e[i] += (a->m[4 * i + j] - b->m[4 * i + j]) * at[j];
  }
  *trans = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
  *pos = sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]);
}

void cli_cloud_centroid(const hicp_cloud *c, double out[3])
{
  const float *p = hicp_cloud_xyz(c);
  const size_t n = hicp_cloud_size(c);
  double s[3] = {0.0, 0.0, 0.0};
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < 3; d++)
      s[d] += p[3 * i + d];
  hicp_cloud_origin(c, out);
  for (int d = 0; d < 3; d++)
    out[d] += n > 0 ? s[d] / (double)n : 0.0;
}

/* ---- JSON ---- */

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

static void put_string(FILE *f, const char *s)
{
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      fprintf(f, "\\%c", c);
    else if (c < 0x20)
      fprintf(f, "\\u%04x", c);
    else
      fputc(c, f);
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
