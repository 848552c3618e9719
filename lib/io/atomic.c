/* atomic.c: writing a file so that a failure never leaves a truncated file
 * and never destroys the one that was there: the writer fills a temporary
 * file beside the target, which is flushed, synced and renamed over it (a
 * FIFO or a device is written in place; see io/outfile.h). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cloud.h"
#include "io/outfile.h"

static int write_file(hicp_context *ctx, const char *path, hicp__writer_fn write, void *arg);

/* A FIFO whose reader has gone makes a write raise SIGPIPE, which kills
 * the process unless the application set it aside: the library holds it
 * back on the writing thread while it writes (the write then fails with
 * EPIPE, reported as any failed write is), takes the one it caused, and
 * leaves the thread's mask and any SIGPIPE already pending as they were. */
int hicp__atomic_write(hicp_context *ctx, const char *path, hicp__writer_fn write, void *arg)
{
  sigset_t pipe_only, was, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  const int held = pthread_sigmask(SIG_BLOCK, &pipe_only, &was) == 0;
  const int had = held && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  const int rc = write_file(ctx, path, write, arg);
  if (held) {
    if (!had && sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1) {
      const struct timespec now = {0, 0};
      while (sigtimedwait(&pipe_only, NULL, &now) < 0 && errno == EINTR)
        ;
    }
    pthread_sigmask(SIG_SETMASK, &was, NULL);
  }
  return rc;
}

static int write_file(hicp_context *ctx, const char *path, hicp__writer_fn write, void *arg)
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
