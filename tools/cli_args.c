/* cli_args.c: strict parsing of the hicp tool's option values (cli.h). */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* Decimal digits, after a '-' where a sign is allowed: strtol and strtoull
 * would also take blanks, '+', and (in base 0) octal and hexadecimal. */
static int is_decimal_integer(const char *s, int sign)
{
  if (sign && *s == '-')
    s++;
  if (!isdigit((unsigned char)*s))
    return 0;
  while (isdigit((unsigned char)*s))
    s++;
  return *s == '\0';
}

/* [-]digits[.digits][e[+-]digits], a digit before or after the point: the
 * numbers --help shows, not strtod's blanks, hexadecimal, inf or nan. */
static int is_decimal_number(const char *s)
{
  if (*s == '-')
    s++;
  size_t digits = 0;
  for (; isdigit((unsigned char)*s); s++)
    digits++;
  if (*s == '.')
    for (s++; isdigit((unsigned char)*s); s++)
      digits++;
  if (digits == 0)
    return 0;
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '+' || *s == '-')
      s++;
    if (!isdigit((unsigned char)*s))
      return 0;
    while (isdigit((unsigned char)*s))
      s++;
  }
  return *s == '\0';
}

/* 0 and the value, -1 no number, -2 too small.  strtod's ERANGE is not
 * checked: on gradual underflow it returns the nearest subnormal, which is
 * the number meant;
 * overflow gives HUGE_VAL, which isfinite refuses.  A number written
 * nonzero that underflows to 0 is refused: for many options 0 means "off"
 * (--max-dist, --time-budget), and 1e-400 would turn the limit it asks
 * for into none. */
static int parse_number(const char *s, double *out)
{
  if (!is_decimal_number(s))
    return -1;
  const double v = strtod(s, NULL);
  if (!isfinite(v))
    return -1;
  if (v == 0.0 && strcspn(s, "123456789") < strcspn(s, "eE"))
    return -2;
  *out = v;
  return 0;
}

int cli_int(const char *opt, const char *s, long lo, long hi, int *out)
{
  const int decimal = is_decimal_integer(s, 1);
  errno = 0;
  const long v = decimal ? strtol(s, NULL, 10) : 0;
  if (!decimal || errno != 0 || v < lo || v > hi) {
    cli_error("%s: expected an integer from %ld to %ld, got '%s'", opt, lo, hi, s);
    return -1;
  }
  *out = (int)v;
  return 0;
}

int cli_u64(const char *opt, const char *s, unsigned long long *out)
{
  const int decimal = is_decimal_integer(s, 0);
  errno = 0;
  const unsigned long long v = decimal ? strtoull(s, NULL, 10) : 0;
  if (!decimal || errno != 0) {
    cli_error("%s: expected a non-negative decimal integer below 2^64, got '%s'", opt, s);
    return -1;
  }
  *out = v;
  return 0;
}

int cli_size(const char *opt, const char *s, unsigned long long *out)
{
  char *end = NULL;
  unsigned long long v = 0;
  errno = 0;
  /* a digit first: strtoull would skip blanks and take " -1" as 2^64 - 1 */
  if (isdigit((unsigned char)s[0]))
    v = strtoull(s, &end, 10);
  int shift = 0;
  if (end != NULL && errno == 0 && end[0] != '\0' && end[1] == '\0') {
    switch (end[0]) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: break;
    }
  }
  if (end == NULL || errno != 0 || *end != '\0' || v == 0 || (v << shift) >> shift != v) {
    cli_error("%s: expected a size in bytes such as 1048576, 512M or 8G, got '%s'", opt, s);
    return -1;
  }
  *out = v << shift;
  return 0;
}

int cli_double(const char *opt, const char *s, double lo, double hi, double *out)
{
  double v;
  const int rc = parse_number(s, &v);
  if (rc == -2) { /* "expected at least 0" would be a condition it meets */
    cli_error("%s: '%s' is too small for a double (it would read as 0)", opt, s);
    return -1;
  }
  if (rc != 0 || v < lo || v > hi) {
    if (isinf(hi)) /* "from 0 to inf" would offer what parse_number refuses */
      cli_error("%s: expected a finite number of at least %g, got '%s'", opt, lo, s);
    else
      cli_error("%s: expected a number from %g to %g, got '%s'", opt, lo, hi, s);
    return -1;
  }
  *out = v;
  return 0;
}

/* The next field of a comma-separated list, copied into field[size]: its
 * length, or 0 when it is empty or too long ("1,,2" has an empty field,
 * which strtok would have skipped). */
static size_t next_field(const char *p, char *field, size_t size)
{
  const size_t len = strcspn(p, ",");
  if (len == 0 || len >= size)
    return 0;
  memcpy(field, p, len);
  field[len] = '\0';
  return len;
}

int cli_numbers(const char *opt, const char *s, double *out, int n, const char *form)
{
  const char *p = s;
  for (int k = 0; k < n; k++) {
    char field[128];
    const size_t len = next_field(p, field, sizeof field);
    const int rc = len == 0 ? -1 : parse_number(field, &out[k]);
    if (rc == -2) {
      cli_error("%s: '%s' in '%s' is too small for a double (it would read as 0)", opt, field, s);
      return -1;
    }
    if (rc != 0)
      break;
    if (p[len] == '\0') {
      if (k == n - 1)
        return 0;
      break;
    }
    p += len + 1;
  }
  cli_error("%s: expected %s, got '%s'", opt, form, s);
  return -1;
}

int cli_vec3(const char *opt, const char *s, double out[3])
{
  return cli_numbers(opt, s, out, 3, "three numbers X,Y,Z");
}

int cli_int_list(const char *opt, const char *s, int *out, int max)
{
  const char *p = s;
  for (int n = 0;; n++) {
    char field[32];
    const size_t len = next_field(p, field, sizeof field);
    if (len == 0) {
      cli_error("%s: expected a comma-separated list of device numbers, got '%s'", opt, s);
      return -1;
    }
    if (n == max) {
      cli_error("%s: at most %d devices can be listed", opt, max);
      return -1;
    }
    if (cli_int(opt, field, 0, 1023, &out[n]) != 0)
      return -1;
    if (p[len] == '\0')
      return n + 1;
    p += len + 1;
  }
}

int cli_output_path(const char *opt, const char *s)
{
  if (s[0] != '\0')
    return 0;
  cli_error("%s: expected a file name, got ''", opt);
  return -1;
}

int cli_min_step(const char *s, hicp_reg_options *o)
{
  const char *form = "T,DEG with T >= 0 and 0 <= DEG <= 180";
  double step[2];
  if (cli_numbers("--min-step", s, step, 2, form) != 0)
    return -1;
  if (step[0] < 0 || step[1] < 0 || step[1] > 180) {
    cli_error("--min-step: expected %s, got '%s'", form, s);
    return -1;
  }
  o->min_step_trans = step[0];
  o->min_step_rot_deg = step[1];
  return 0;
}

int cli_chunk(const char *s, hicp_reg_options *o)
{
  if (cli_int("--chunk", s, 256, 65536, &o->chunk_points) != 0)
    return -1;
  if ((o->chunk_points & (o->chunk_points - 1)) != 0) {
    cli_error("--chunk: expected a power of two from 256 to 65536");
    return -1;
  }
  return 0;
}
