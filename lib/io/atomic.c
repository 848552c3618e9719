/* atomic.c: writing a file so that a failure never leaves a truncated file
 * and never destroys the one that was there: the writer fills a temporary
 * file beside the target, which is flushed, synced and renamed over it (a
 * FIFO or a device is written in place; see io/outfile.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cloud.h"
#include "io/outfile.h"

int hicp__atomic_write(hicp_context *ctx, const char *path, hicp__writer_fn write, void *arg)
{
  if (path == NULL || path[0] == '\0')
    return hicp__fail(ctx, HICP_EINVAL, "no output file name");
  hicp__outfile o;
  const char *why = hicp__outfile_open(&o, path);
  if (why != NULL)
    return hicp__fail(ctx, HICP_EIO, "cannot write %s: %s", path, why);
  errno = 0;
  int rc = write(ctx, o.f, arg);
  /* A writer stops at the first failed fwrite, whose errno (a full disk,
   * /dev/full) says more than its "write failed". */
  const int e = ferror(o.f) ? errno : 0;
  if (rc != HICP_OK) {
    hicp__outfile_abort(&o);
    if (e != 0)
      return hicp__fail(ctx, rc, "cannot write %s: %s", path, strerror(e));
    return hicp__fail_prefix(ctx, rc, path);
  }
  why = hicp__outfile_commit(&o);
  if (why != NULL)
    return hicp__fail(ctx, HICP_EIO, "cannot write %s: %s", path, why);
  return HICP_OK;
}
