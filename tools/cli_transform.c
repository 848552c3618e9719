/* cli_transform.c: the hicp tool's transforms: reading a transform file,
 * printing one, and the rotation and position errors it reports (cli.h). */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* The separators of a transform file's numbers.  Brackets too, so that
 * the 4x4 array `register --json` prints as "transform" (`jq .transform`),
 * and NumPy's and MATLAB's printed matrices, read back as --init or
 * --truth: the count of 16 or 12 numbers and the rigidity check still hold
 * whatever the brackets' nesting. */
static int is_separator(int c)
{
  return c == ' ' || c == '\t' || c == ',' || c == ';' || c == '\r' || c == '\n' || c == '[' ||
         c == ']';
}

/* Why a transform file is refused (cli_read_transform). */
enum { XF_OK, XF_NOT_NUMBER, XF_NOT_FINITE, XF_TOO_MANY, XF_NOT_TEXT };

/* Ends the token tok[0 .. len) and adds its number to v[n]; XF_OK, or why
 * it cannot (tok then holds the token). */
static int take_number(char *tok, size_t len, double v[16], int *n)
{
  tok[len] = '\0';
  char *end;
  const double x = strtod(tok, &end);
  if (end == tok || *end != '\0')
    return XF_NOT_NUMBER;
  if (!isfinite(x))
    return XF_NOT_FINITE;
  if (*n >= 16)
    return XF_TOO_MANY;
  v[(*n)++] = x;
  return XF_OK;
}

int cli_read_transform(const char *path, hicp_transform *t)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    cli_error("cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  /* Character by character: a comment may be of any length, and a file of
   * garbage is given up at its first bad token, however long it is. */
  double v[16];
  int n = 0, bad = 0, comment = 0, c;
  char tok[256];
  size_t len = 0;
  errno = 0;
  while (!bad && (c = getc(f)) != EOF) {
    if (comment) { /* to the line's end, whichever its writer used */
      comment = c != '\n' && c != '\r';
      continue;
    }
    if (c != '#' && !is_separator(c)) {
      if (c == '\0' || len + 1 >= sizeof tok)
        bad = XF_NOT_TEXT; /* not text, or longer than any number */
      else
        tok[len++] = (char)c;
      continue;
    }
    comment = c == '#';
    if (len == 0)
      continue;
    bad = take_number(tok, len, v, &n);
    len = 0;
  }
  if (!bad && len > 0) /* the last number, at the end of the file */
    bad = take_number(tok, len, v, &n);
  const int read_error = ferror(f) ? (errno != 0 ? errno : EIO) : 0;
  fclose(f);
  if (read_error != 0) {
    cli_error("cannot read %s: %s", path, strerror(read_error));
    return -1;
  }
  if (bad == XF_NOT_NUMBER || bad == XF_NOT_FINITE || bad == XF_NOT_TEXT) {
    char quoted[sizeof tok + 8] = ""; /* the token, when it was read whole */
    if (bad != XF_NOT_TEXT)
      snprintf(quoted, sizeof quoted, ", '%s',", tok);
    cli_error("%s: value %d%s is %s (a transform is 16 (4x4) or 12 (3x4) numbers)", path, n + 1,
              quoted, bad == XF_NOT_NUMBER   ? "not a number"
                      : bad == XF_NOT_FINITE ? "not finite"
                                             : "not text or longer than any number");
    return -1;
  }
  if (bad == XF_TOO_MANY || (n != 16 && n != 12)) {
    cli_error("%s: expected 16 (4x4) or 12 (3x4) numbers for a transform%s", path,
              bad == XF_TOO_MANY ? ", found more" : "");
    return -1;
  }
  hicp_transform_identity(t);
  memcpy(t->m, v, sizeof(double) * (size_t)n);
  const int last_row = t->m[12] == 0.0 && t->m[13] == 0.0 && t->m[14] == 0.0 && t->m[15] == 1.0;
  for (int i = 0; last_row && i < 3; i++)
    if (fabs(t->m[4 * i + 3]) > HICP_COORD_MAX) {
      char far[32];
      cli_error("%s: the translation %s is beyond the coordinate limit (%g in magnitude)", path,
                cli_beyond(far, sizeof far, t->m[4 * i + 3], HICP_COORD_MAX, 6), HICP_COORD_MAX);
      return -1;
    }
  if (hicp_transform_check(t) != HICP_OK) {
    if (!last_row) {
      cli_error("%s: not a rigid transform (its last row must be 0 0 0 1)", path);
      return -1;
    }
    /* how far R is from a rotation, as hicp_transform_check measures it */
    const double *m = t->m;
    double off = fabs(m[0] * (m[5] * m[10] - m[6] * m[9]) - m[1] * (m[4] * m[10] - m[6] * m[8]) +
                      m[2] * (m[4] * m[9] - m[5] * m[8]) - 1.0);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) {
        const double s = m[4 * i] * m[4 * j] + m[4 * i + 1] * m[4 * j + 1] + m[4 * i + 2] * m[4 * j + 2];
        off = fmax(off, fabs(s - (i == j)));
      }
    char far[32];
    cli_error("%s: not a rigid transform: R is %s from a rotation (R R^T - I and det R - 1 "
              "at most %g; write R with 6 or more significant digits)",
              path, cli_beyond(far, sizeof far, off, HICP_ROTATION_TOL, 2), HICP_ROTATION_TOL);
    return -1;
  }
  return 0;
}

const char *cli_beyond(char *buf, size_t len, double v, double limit, int digits)
{
  snprintf(buf, len, "%.*g", digits, v);
  while (digits < 17 && !(fabs(strtod(buf, NULL)) > limit))
    snprintf(buf, len, "%.*g", ++digits, v);
  return buf;
}

void cli_print_transform(FILE *f, const hicp_transform *t, const char *indent)
{
  for (int i = 0; i < 4; i++)
    fprintf(f, "%s%24.17g %24.17g %24.17g %24.17g\n", indent, t->m[4 * i], t->m[4 * i + 1],
            t->m[4 * i + 2], t->m[4 * i + 3]);
}

/* R = c I + s [a]x + (1 - c) a a^T for a turn by angle (c, s) about a.
 * The antisymmetric part gives 2 s a, the symmetric part (1 - c) a a^T:
 * the first names the axis below 90 degrees, the second beyond, where s
 * vanishes towards 180 degrees and the antisymmetric part holds only
 * rounding (a half turn about (1, 1, 0) was printed as one about z). */
void cli_rotation_angle_axis(const hicp_transform *t, double *deg, double axis[3])
{
  const double *m = t->m;
  const double c = (m[0] + m[5] + m[10] - 1.0) / 2.0;
  const double v[3] = {m[9] - m[6], m[2] - m[8], m[4] - m[1]};
  const double two_s = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
  *deg = atan2(two_s / 2.0, c) * 180.0 / M_PI;
  if (c > 0.0) {
    for (int i = 0; i < 3; i++)
      axis[i] = two_s > 0 ? v[i] / two_s : (i == 2);
    return;
  }
  /* (R + R^T) / 2 - c I = (1 - c) a a^T: its row of the largest diagonal
   * term is a multiple of a at least (1 - c) / sqrt(3) long */
  double sym[3][3];
  int k = 0;
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 3; j++)
      sym[i][j] = (m[4 * i + j] + m[4 * j + i]) / 2.0 - (i == j ? c : 0.0);
    if (sym[i][i] > sym[k][k])
      k = i;
  }
  const double len = sqrt(sym[k][0] * sym[k][0] + sym[k][1] * sym[k][1] + sym[k][2] * sym[k][2]);
  const double sign = sym[k][0] * v[0] + sym[k][1] * v[1] + sym[k][2] * v[2] < 0 ? -1.0 : 1.0;
  for (int i = 0; i < 3; i++)
    axis[i] = sign * sym[k][i] / len;
}

void cli_transform_error(const hicp_transform *a, const hicp_transform *b, const double at[3],
                         double *rot_deg, double *trans, double *pos)
{
  /* The turn from b to a, A B^T, and its angle from both its cosine and
   * its sine, as cli_rotation_angle_axis: acos of the cosine alone lost
   * small errors (1 - cos is about angle^2 / 2, below a double's epsilon
   * for 1e-8 rad: printed 0 or 1e-6 degrees for what was 1e-7) */
  hicp_transform d_rot;
  hicp_transform_identity(&d_rot);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      double s = 0.0;
      for (int k = 0; k < 3; k++)
        s += a->m[4 * i + k] * b->m[4 * j + k];
      d_rot.m[4 * i + j] = s;
    }
  double axis[3];
  cli_rotation_angle_axis(&d_rot, rot_deg, axis);
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
