/* outfile.c: an output file that a failure never destroys (see outfile.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/outfile.h"

static const char *out_of_memory = "out of memory";

/* A name for the temporary file: the target's, ".tmp", the process and a
 * count.  Unique among live processes; a name left behind by a crashed one
 * is skipped (O_EXCL and the next count). */
static void temporary_name(char *tmp, size_t size, const char *target)
{
  static atomic_uint count;
  snprintf(tmp, size, "%s.tmp%ld.%u", target, (long)getpid(), atomic_fetch_add(&count, 1));
}

/* A temporary file beside `target`, which it will replace.  keep_mode < 0:
 * a new file, created with mode 0666 for the kernel to apply the umask to
 * (reading the umask would mean setting it, which a library must not do: it
 * is the whole process's, and another thread could create a file meanwhile);
 * otherwise the mode of the file it replaces.  Close-on-exec, so that a
 * thread that forks and runs a program meanwhile does not hand it the file. */
static const char *open_temporary(hicp__outfile *o, const char *target, int keep_mode)
{
  const size_t len = strlen(target);
  o->target = malloc(len + 1);
  const size_t size = len + 48; /* ".tmp", two numbers, '\0' */
  o->tmp = malloc(size);
  if (o->target == NULL || o->tmp == NULL) {
    hicp__outfile_abort(o);
    return out_of_memory;
  }
  memcpy(o->target, target, len + 1);
  int fd = -1;
  for (unsigned attempt = 0; fd < 0 && attempt < 100; attempt++) {
    temporary_name(o->tmp, size, target);
    fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY,
              keep_mode < 0 ? 0666 : 0600);
    if (fd < 0 && errno != EEXIST)
      break;
  }
  if (fd < 0) {
    const int e = errno;
    free(o->tmp);
    o->tmp = NULL; /* nothing was created: nothing to remove */
    hicp__outfile_abort(o);
    return strerror(e);
  }
  if (keep_mode >= 0 && fchmod(fd, (mode_t)keep_mode) != 0) {
    const int e = errno;
    close(fd);
    hicp__outfile_abort(o);
    return strerror(e);
  }
  o->f = fdopen(fd, "wb");
  if (o->f == NULL) {
    const int e = errno;
    close(fd);
    hicp__outfile_abort(o);
    return strerror(e);
  }
  return NULL;
}

/* A FIFO or a device: opened as it is, no O_CREAT (should it vanish after
 * the stat, nothing is created in its place) and no O_TRUNC.  A FIFO waits
 * for its reader here, as a shell's redirection does. */
static const char *open_in_place(hicp__outfile *o, const char *path)
{
  int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return strerror(errno);
  o->f = fdopen(fd, "wb");
  if (o->f == NULL) {
    const int e = errno;
    close(fd);
    return strerror(e);
  }
  return NULL;
}

/* A missing file: a new one, unless the name is a link that leads nowhere. */
static const char *open_new(hicp__outfile *o, const char *path)
{
  struct stat lst;
  if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode))
    return "a symbolic link to a missing file (not written through)";
  return open_temporary(o, path, -1);
}

/* An existing regular file: replaced with its permissions kept (not a
 * set-user-ID or set-group-ID bit: the new file is ours).  Through a link,
 * the file the link names is replaced, so that the link stays one. */
static const char *open_regular(hicp__outfile *o, const char *path, const struct stat *st)
{
  struct stat lst;
  if (lstat(path, &lst) != 0 || !S_ISLNK(lst.st_mode))
    return open_temporary(o, path, (int)(st->st_mode & 0777));
  char *real = realpath(path, NULL);
  if (real == NULL)
    return errno == ENOMEM ? out_of_memory : strerror(errno);
  const char *why = open_temporary(o, real, (int)(st->st_mode & 0777));
  free(real);
  return why;
}

const char *hicp__outfile_open(hicp__outfile *o, const char *path)
{
  memset(o, 0, sizeof *o);
  if (path == NULL || path[0] == '\0')
    return "no file name";
  struct stat st; /* what the name leads to, through any links */
  if (stat(path, &st) != 0)
    return errno == ENOENT ? open_new(o, path) : strerror(errno);
  if (S_ISREG(st.st_mode))
    return open_regular(o, path, &st);
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
    return open_in_place(o, path);
  if (S_ISDIR(st.st_mode))
    return strerror(EISDIR);
  return "not a regular file, a FIFO or a device";
}

const char *hicp__outfile_close(hicp__outfile *o)
{
  if (o->f == NULL)
    return NULL;
  int e = 0;
  if (fflush(o->f) != 0)
    e = errno;
  else if (ferror(o->f))
    e = EIO; /* an earlier write failed, and its errno is gone */
  /* Only the temporary file is synced: the rename promises complete data.
   * A FIFO or a character device cannot be (EINVAL). */
  else if (o->tmp != NULL && fsync(fileno(o->f)) != 0)
    e = errno;
  if (fclose(o->f) != 0 && e == 0)
    e = errno;
  o->f = NULL;
  if (e == 0)
    return NULL;
  hicp__outfile_abort(o);
  return strerror(e);
}

const char *hicp__outfile_commit(hicp__outfile *o)
{
  const char *why = hicp__outfile_close(o);
  if (why != NULL)
    return why;
  if (o->tmp != NULL && rename(o->tmp, o->target) != 0) {
    why = strerror(errno);
    hicp__outfile_abort(o);
    return why;
  }
  free(o->tmp);
  free(o->target);
  o->tmp = o->target = NULL;
  return NULL;
}

void hicp__outfile_abort(hicp__outfile *o)
{
  if (o->f != NULL)
    fclose(o->f);
  if (o->tmp != NULL)
    unlink(o->tmp);
  free(o->tmp);
  free(o->target);
  o->f = NULL;
  o->tmp = o->target = NULL;
}
