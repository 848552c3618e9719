/* atomic.c: writing a file so that a failure never leaves a truncated file
 * and never destroys the one that was there: write a temporary file in the
 * same directory (same file system, so rename is atomic), flush and sync it,
 * then rename it over the target. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cloud.h"

int hicp__atomic_write(hicp_context *ctx, const char *path, hicp__writer_fn write, void *arg)
{
  if (path == NULL || path[0] == '\0')
    return hicp__fail(ctx, HICP_EINVAL, "no output file name");
  size_t len = strlen(path);
  char *tmp = malloc(len + 16);
  if (tmp == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory");
  memcpy(tmp, path, len);
  memcpy(tmp + len, ".tmpXXXXXX", 11);
  int fd = mkstemp(tmp);
  if (fd < 0) {
    int e = errno;
    free(tmp);
    return hicp__fail(ctx, HICP_EIO, "cannot write %s: %s", path, strerror(e));
  }
  /* mkstemp makes the file 0600: give it the mode a new file would get, or
   * that of the file it replaces. */
  struct stat st;
  mode_t mode;
  if (stat(path, &st) == 0) {
    mode = st.st_mode & 07777;
  } else {
    mode_t mask = umask(0);
    umask(mask);
    mode = 0666 & ~mask;
  }
  int rc = HICP_OK;
  FILE *f = fdopen(fd, "wb");
  if (f == NULL) {
    int e = errno;
    close(fd);
    rc = hicp__fail(ctx, HICP_EIO, "cannot write %s: %s", path, strerror(e));
  } else {
    fchmod(fd, mode);
    rc = write(ctx, f, arg);
    int e = 0;
    if (rc == HICP_OK && (fflush(f) != 0 || fsync(fileno(f)) != 0))
      e = errno;
    if (fclose(f) != 0 && e == 0)
      e = errno;
    if (rc == HICP_OK && e != 0)
      rc = hicp__fail(ctx, HICP_EIO, "cannot write %s: %s", path, strerror(e));
    else if (rc != HICP_OK)
      hicp__fail_prefix(ctx, rc, path);
    if (rc == HICP_OK && rename(tmp, path) != 0)
      rc = hicp__fail(ctx, HICP_EIO, "cannot write %s: %s", path, strerror(errno));
  }
  if (rc != HICP_OK)
    unlink(tmp);
  free(tmp);
  return rc;
}
