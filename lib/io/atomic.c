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

/* Two signals a write can raise kill the process unless the application
 * set them aside: SIGPIPE, from a FIFO whose reader has gone, and SIGXFSZ,
 * past the file size limit (ulimit -f).  The library holds both back on the
 * writing thread while it writes (the write then fails with EPIPE or EFBIG,
 * reported as any failed write is), takes each one it caused, and leaves
 * the thread's mask and any such signal already pending as they were. */
static const int held_signals[] = {SIGPIPE, SIGXFSZ};
enum { NHELD = sizeof held_signals / sizeof held_signals[0] };

int hicp__atomic_write(hicp_context *ctx, const char *path, hicp__writer_fn write, void *arg)
{
  sigset_t hold, was, pending;
  sigemptyset(&hold);
  for (int i = 0; i < NHELD; i++)
    sigaddset(&hold, held_signals[i]);
  const int held = pthread_sigmask(SIG_BLOCK, &hold, &was) == 0;
  int had[NHELD] = {0};
  if (held && sigpending(&pending) == 0)
    for (int i = 0; i < NHELD; i++)
      had[i] = sigismember(&pending, held_signals[i]) == 1;
  const int rc = write_file(ctx, path, write, arg);
  if (held) {
    for (int i = 0; i < NHELD; i++)
      if (!had[i] && sigpending(&pending) == 0 && sigismember(&pending, held_signals[i]) == 1) {
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, held_signals[i]);
        const struct timespec now = {0, 0};
        while (sigtimedwait(&one, NULL, &now) < 0 && errno == EINTR)
          ;
      }
    pthread_sigmask(SIG_SETMASK, &was, NULL);
  }
  return rc;
}

/* A temporary file that could not be made or put in place: HICP_ENOMEM
 * where memory was wanted (hicp.h's code for it), else HICP_EIO. */
static int refused(hicp_context *ctx, const char *path, const char *why)
{
  return hicp__fail(ctx, hicp__outfile_no_memory(why) ? HICP_ENOMEM : HICP_EIO,
                    "cannot write %s: %s", path, why);
}

static int write_file(hicp_context *ctx, const char *path, hicp__writer_fn write, void *arg)
{
  if (path == NULL || path[0] == '\0')
    return hicp__fail(ctx, HICP_EINVAL, "no output file name");
  hicp__outfile o;
  const char *why = hicp__outfile_open(&o, path);
  if (why != NULL)
    return refused(ctx, path, why);
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
    return refused(ctx, path, why);
  return HICP_OK;
}
