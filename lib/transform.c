/* transform.c: small helpers on rigid 4x4 transforms. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "fpenv.h"
#include "internal.h"

void hicp_transform_identity(hicp_transform *t)
{
  if (t == NULL)
    return;
  memset(t, 0, sizeof *t);
  t->m[0] = t->m[5] = t->m[10] = t->m[15] = 1.0;
}

static void transform_invert(const hicp_transform *t, hicp_transform *out)
{
  if (t == NULL || out == NULL)
    return;
  hicp_transform r;
  hicp_transform_identity(&r);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      r.m[4 * i + j] = t->m[4 * j + i];
  for (int i = 0; i < 3; i++)
    r.m[4 * i + 3] = -(r.m[4 * i] * t->m[3] + r.m[4 * i + 1] * t->m[7] + r.m[4 * i + 2] * t->m[11]);
  *out = r;
}

void hicp_transform_invert(const hicp_transform *t, hicp_transform *out)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  transform_invert(t, out);
  hicp__fpenv_leave(&fe);
}

void hicp__transform_inverse(const hicp_transform *t, hicp_transform *out)
{
  const double *m = t->m;
  /* the cofactors of A's rows, so A^-1's row i is column i of them / det */
  const double c[9] = {m[5] * m[10] - m[6] * m[9], m[6] * m[8] - m[4] * m[10],
                       m[4] * m[9] - m[5] * m[8],  m[2] * m[9] - m[1] * m[10],
                       m[0] * m[10] - m[2] * m[8], m[1] * m[8] - m[0] * m[9],
                       m[1] * m[6] - m[2] * m[5],  m[2] * m[4] - m[0] * m[6],
                       m[0] * m[5] - m[1] * m[4]};
  const double det = (m[0] * c[0] + m[1] * c[1]) + m[2] * c[2];
  hicp_transform r;
  hicp_transform_identity(&r);
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      r.m[4 * i + j] = c[3 * j + i] / det;
  for (int i = 0; i < 3; i++)
    r.m[4 * i + 3] = -((r.m[4 * i] * m[3] + r.m[4 * i + 1] * m[7]) + r.m[4 * i + 2] * m[11]);
  *out = r;
}

static int transform_check(const hicp_transform *t)
{
  if (t == NULL)
    return HICP_EINVAL;
  for (int i = 0; i < 16; i++)
    if (!isfinite(t->m[i]))
      return HICP_EINVAL;
  if (t->m[12] != 0.0 || t->m[13] != 0.0 || t->m[14] != 0.0 || t->m[15] != 1.0)
    return HICP_EINVAL;
  for (int i = 0; i < 3; i++)
    if (fabs(t->m[4 * i + 3]) > HICP_COORD_MAX)
      return HICP_EINVAL;
  /* R R^T = I and det R = +1, to HICP_ROTATION_TOL: a rotation printed
   * with 6 significant digits (printf's %g, C++'s and Eigen's default)
   * is up to about 2e-6 from one, and 1e-6 refused a quarter of them. */
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 3; j++) {
      double s = 0.0;
      for (int k = 0; k < 3; k++)
        s += t->m[4 * i + k] * t->m[4 * j + k];
      if (fabs(s - (i == j ? 1.0 : 0.0)) > HICP_ROTATION_TOL)
        return HICP_EINVAL;
    }
  }
  const double *m = t->m;
  double det = m[0] * (m[5] * m[10] - m[6] * m[9]) - m[1] * (m[4] * m[10] - m[6] * m[8]) +
               m[2] * (m[4] * m[9] - m[5] * m[8]);
  if (fabs(det - 1.0) > HICP_ROTATION_TOL)
    return HICP_EINVAL;
  return HICP_OK;
}

int hicp_transform_check(const hicp_transform *t)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = transform_check(t);
  hicp__fpenv_leave(&fe);
  return rc;
}
