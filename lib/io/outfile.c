/* outfile.c: an output file that a failure never destroys (see outfile.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/outfile.h"

static const char *out_of_memory = "out of memory";

int hicp__outfile_no_memory(const char *why)
{
  return why == out_of_memory || strcmp(why, strerror(ENOMEM)) == 0;
}

/* Why a temporary could not be made beside the target: where its
 * directory refuses (EACCES), the file's own permissions are beside the
 * point, and "Permission denied" alone named the file (stop 63's review:
 * a writable file in a read-only directory). */
static const char *temporary_refused(int e)
{
  return e == EACCES ? "Permission denied in its directory (a file is replaced by a new one "
                       "written beside it)"
                     : strerror(e);
}

/* A name for the temporary file: the target's, ".tmp", the process and a
 * count.  Unique among live processes; a name left behind by a crashed one
 * is skipped (O_EXCL or link's EEXIST, and the next count).  Of a target's
 * last component, the first 200 bytes at most: its own may take a file
 * system's 255, and the suffix (up to 25 bytes) must not make it too long. */
static void temporary_name(char *tmp, size_t size, const char *target)
{
  static atomic_uint count;
  const char *slash = strrchr(target, '/');
  const size_t dir = slash != NULL ? (size_t)(slash + 1 - target) : 0;
  const size_t base = strlen(target + dir);
  snprintf(tmp, size, "%.*s%.*s.tmp%ld.%u", (int)dir, target, (int)(base < 200 ? base : 200),
           target + dir, (long)getpid(), atomic_fetch_add(&count, 1));
}

/* The directory part of a path ("." for a bare name, "/" for one in the
 * root), malloc'd; NULL when out of memory. */
static char *directory_of(const char *path)
{
  const char *slash = strrchr(path, '/');
  return slash == NULL ? strdup(".") : strndup(path, slash == path ? 1 : (size_t)(slash - path));
}

/* The stream's writes: every byte, retried where a signal interrupts the
 * write.  An application's timer whose handler does not restart system
 * calls (no SA_RESTART) interrupts a write into a pipe that waits for its
 * reader, and stdio on a plain descriptor (fdopen) takes that EINTR for a
 * failure (stop 49: a PLY or a model written into a FIFO failed with
 * "Interrupted system call", part of it written). */
static ssize_t write_all(void *cookie, const char *buf, size_t n)
{
  const int fd = (int)(intptr_t)cookie;
  size_t done = 0;
  while (done < n) {
    const ssize_t w = write(fd, buf + done, n - done);
    if (w < 0 && errno == EINTR)
      continue;
    /* stdio takes a short count for the error (errno is write's); a
     * negative one it may not be given (fopencookie(3)): glibc's fwrite
     * then counted it as SIZE_MAX bytes written and copied from before
     * its buffer (the stop's diff review, under valgrind) */
    if (w <= 0)
      return (ssize_t)done;
    done += (size_t)w;
  }
  return (ssize_t)done;
}

static int close_fd(void *cookie)
{
  /* not retried on EINTR: on Linux the descriptor is gone either way */
  return close((int)(intptr_t)cookie) == 0 ? 0 : EOF;
}

/* A buffered stream that owns fd and writes through write_all; NULL with
 * errno set if not (fd is then still open). */
static FILE *stream_on(int fd)
{
  const cookie_io_functions_t io = {NULL, write_all, NULL, close_fd};
  return fopencookie((void *)(intptr_t)fd, "w", io);
}

/* A stream on a copy of fd (close-on-exec), so that closing the stream
 * leaves fd open; NULL with errno set if not.  *copy: the copy's. */
static FILE *stream_on_copy(int fd, int *copy)
{
  *copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (*copy < 0)
    return NULL;
  FILE *f = stream_on(*copy);
  if (f == NULL) {
    const int e = errno;
    close(*copy);
    errno = e;
  }
  return f;
}

#ifdef O_TMPFILE
/* A nameless temporary file in the target's directory (O_TMPFILE), given a
 * name only at the commit.  Returns NULL when it succeeded, `unsupported`
 * when the kernel, the file system or a missing /proc rules it out (the
 * caller then makes a named one), else why it failed. */
static const char unsupported[] = "nameless temporary files not supported";

static const char *open_nameless_temporary(hicp__outfile *o, int keep_mode)
{
  char *dir = directory_of(o->target);
  if (dir == NULL)
    return out_of_memory;
  /* keep_mode < 0: a new file, 0666 less the umask (which the kernel
   * applies, as for any new file; reading the umask would mean setting it,
   * which a library must not do: it is the whole process's).  Otherwise the
   * old file's permissions, given at the commit: until then the owner may
   * write, so that the file can be opened again through /proc. */
  const int fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC | O_NOCTTY,
                      keep_mode < 0 ? 0666 : 0600);
  const int e = errno;
  free(dir);
  if (fd < 0)
    return e == EOPNOTSUPP || e == EISDIR || e == EINVAL ? unsupported : temporary_refused(e);
  snprintf(o->fd_path, sizeof o->fd_path, "/proc/self/fd/%d", fd);
  struct stat mine, via_proc;
  if (fstat(fd, &mine) != 0 || stat(o->fd_path, &via_proc) != 0 ||
      mine.st_dev != via_proc.st_dev || mine.st_ino != via_proc.st_ino) {
    close(fd); /* no /proc to link it through */
    return unsupported;
  }
  o->mode = keep_mode;
  if (keep_mode < 0 && (mine.st_mode & S_IWUSR) == 0) {
    /* a umask that takes the owner's write permission */
    o->mode = (int)(mine.st_mode & 0777);
    if (fchmod(fd, (mine.st_mode & 0777) | S_IWUSR) != 0) {
      const int e2 = errno;
      close(fd);
      return strerror(e2);
    }
  }
  o->f = stream_on_copy(fd, &o->f_fd);
  if (o->f == NULL) {
    const int e2 = errno;
    close(fd);
    return strerror(e2);
  }
  o->fd = fd;
  o->nameless = 1;
  return NULL;
}
#endif

/* A temporary file beside `target`, which it will replace.  keep_mode < 0:
 * a new file, created with mode 0666 for the kernel to apply the umask to;
 * otherwise the mode of the file it replaces.  Close-on-exec, so that a
 * thread that forks and runs a program meanwhile does not hand it the file. */
static const char *open_temporary(hicp__outfile *o, const char *target, int keep_mode)
{
  const size_t len = strlen(target);
  o->target = malloc(len + 1);
  if (o->target == NULL)
    return out_of_memory;
  memcpy(o->target, target, len + 1);
#ifdef O_TMPFILE
  const char *why = open_nameless_temporary(o, keep_mode);
  if (why != unsupported) {
    if (why != NULL)
      hicp__outfile_abort(o);
    return why;
  }
#endif
  const size_t size = len + 48; /* ".tmp", two numbers, '\0' */
  o->tmp = malloc(size);
  if (o->tmp == NULL) {
    hicp__outfile_abort(o);
    return out_of_memory;
  }
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
    return temporary_refused(e);
  }
  if (keep_mode >= 0 && fchmod(fd, (mode_t)keep_mode) != 0) {
    const int e = errno;
    close(fd);
    hicp__outfile_abort(o);
    return strerror(e);
  }
  o->f = stream_on(fd);
  o->f_fd = fd;
  if (o->f == NULL) {
    const int e = errno;
    close(fd);
    hicp__outfile_abort(o);
    return strerror(e);
  }
  return NULL;
}

/* A FIFO, a device, or a regular file without a name: opened as it is, no
 * O_CREAT (should it vanish after the stat, nothing is created in its
 * place); a nameless file is truncated, a FIFO or a device is not.  A FIFO
 * waits for its reader here, as a shell's redirection does. */
static const char *open_in_place(hicp__outfile *o, const char *path, int truncate)
{
  int fd;
  do /* retried when a signal interrupts the wait for a FIFO's reader */
    fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC | (truncate ? O_TRUNC : 0));
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return strerror(errno);
  o->f = stream_on(fd);
  o->f_fd = fd;
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

/* Why the rename at the commit could not replace `target` (st: its
 * status), refused here, before any work, rather than at the commit; NULL
 * when it can:
 * - a file mounted over its name (a container's `-v host.ply:/out.ply`):
 *   a rename onto it fails (EBUSY or EXDEV).  statx says so where the
 *   kernel knows (Linux 5.8); otherwise a mount from another file system
 *   shows as another device than its directory's;
 * - another user's file in a sticky directory (/tmp's mode 1777): only the
 *   file's owner, the directory's or root may replace it, though another
 *   user may write it in place. */
static const char *unreplaceable(const char *target, const struct stat *st)
{
  static const char mounted_over[] =
      "a file mounted over its name (a bind mount), which cannot be replaced";
  int mount_known = 0;
#if defined(STATX_ATTR_MOUNT_ROOT)
  struct statx sx;
  if (statx(AT_FDCWD, target, 0, STATX_BASIC_STATS, &sx) == 0 &&
      (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0) {
    if ((sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0)
      return mounted_over;
    mount_known = 1;
  }
#endif
  char *dir = directory_of(target);
  if (dir == NULL)
    return out_of_memory;
  struct stat ds;
  const int have_dir = stat(dir, &ds) == 0;
  free(dir);
  if (!have_dir)
    return NULL; /* the open of the temporary file beside it will say why */
  if (!mount_known && ds.st_dev != st->st_dev)
    return mounted_over;
  const uid_t me = geteuid();
  if (me != 0 && st->st_uid != me && ds.st_uid != me && (ds.st_mode & S_ISVTX) != 0)
    return "another user's file in a sticky directory, which only its owner may replace";
  return NULL;
}

/* An existing regular file: replaced with its permissions, group and (as
 * root) owner kept (not a set-user-ID or set-group-ID bit).  Through a link,
 * the file the link names is replaced, so that the link stays one. */
static const char *open_regular(hicp__outfile *o, const char *path, const struct stat *st)
{
  struct stat lst;
  char *real = NULL; /* through a link: the file it names */
  if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode) && (real = realpath(path, NULL)) == NULL)
    return errno == ENOMEM ? out_of_memory : strerror(errno);
  const char *target = real != NULL ? real : path;
  const char *why = unreplaceable(target, st);
  if (why == NULL)
    why = open_temporary(o, target, (int)(st->st_mode & 0777));
  free(real);
  /* Its group too (a shared file of a project's group stays the group's),
   * and as root its owner: where the system refuses (a group the user is
   * not in), the new file keeps the user's, as any new file has. */
  if (why == NULL && fchown(o->f_fd, geteuid() == 0 ? st->st_uid : (uid_t)-1, st->st_gid) != 0)
    errno = 0;
  return why;
}

int hicp__outfile_descriptor(const char *path)
{
  if (path == NULL)
    return -1;
  if (strcmp(path, "/dev/stdout") == 0)
    return 1;
  if (strcmp(path, "/dev/stderr") == 0)
    return 2;
  const char *n = strncmp(path, "/dev/fd/", 8) == 0         ? path + 8
                  : strncmp(path, "/proc/self/fd/", 14) == 0 ? path + 14
                                                             : NULL;
  if (n == NULL || *n < '0' || *n > '9' || (n[0] == '0' && n[1] != '\0'))
    return -1;
  long fd = 0;
  for (; *n >= '0' && *n <= '9'; n++)
    if ((fd = fd * 10 + (*n - '0')) > 1000000000L)
      return -1;
  return *n == '\0' ? (int)fd : -1;
}

/* One of the process's own descriptors, named by `path`: written in place
 * through a copy of it, at its offset, as a shell's redirection left it
 * (truncated by '>', appended to by '>>').  Opening the name again would
 * give a new offset at 0, over what the process already wrote there; and
 * replacing the file it leads to (a renamed temporary) would destroy what
 * the process writes through the descriptor itself: `hicp ... -o
 * /dev/stdout > FILE` lost the command's report so.  The exception: a
 * regular file without a name named as /proc/self/fd/N, a temporary file
 * of the caller's (hicp__outfile_name's), reopened and truncated (see
 * outfile.h).  Under any other name (/dev/stdout, /dev/fd/N) such a file is
 * one the caller writes too, as Python's TemporaryFile capturing a child's
 * output is. */
static const char *open_descriptor(hicp__outfile *o, const char *path, int fd, int *handled)
{
  struct stat st;
  *handled = 1;
  if (fstat(fd, &st) != 0)
    return errno == EBADF ? "not an open file descriptor" : strerror(errno);
  if (S_ISREG(st.st_mode) && st.st_nlink == 0 && strncmp(path, "/proc/self/fd/", 14) == 0) {
    *handled = 0;
    return NULL;
  }
  if (S_ISDIR(st.st_mode))
    return strerror(EISDIR);
  const int mode = fcntl(fd, F_GETFL);
  if (mode == -1)
    return strerror(errno);
  if ((mode & O_ACCMODE) == O_RDONLY)
    return "a file descriptor open only for reading";
  o->f = stream_on_copy(fd, &o->f_fd);
  return o->f != NULL ? NULL : strerror(errno);
}

const char *hicp__outfile_open(hicp__outfile *o, const char *path)
{
  memset(o, 0, sizeof *o);
  o->mode = -1;
  if (path == NULL || path[0] == '\0')
    return "no file name";
  const int fd = hicp__outfile_descriptor(path);
  if (fd >= 0) {
    int handled;
    const char *why = open_descriptor(o, path, fd, &handled);
    if (handled)
      return why;
  }
  struct stat st; /* what the name leads to, through any links */
  if (stat(path, &st) != 0)
    return errno == ENOENT ? open_new(o, path) : strerror(errno);
  if (S_ISREG(st.st_mode) && st.st_nlink == 0)
    return open_in_place(o, path, 1);
  if (S_ISREG(st.st_mode))
    return open_regular(o, path, &st);
  if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode))
    return open_in_place(o, path, 0);
  if (S_ISDIR(st.st_mode))
    return strerror(EISDIR);
  return "not a regular file, a FIFO or a device";
}

const char *hicp__outfile_name(const hicp__outfile *o, const char *path)
{
  if (o->nameless)
    return o->fd_path;
  return o->tmp != NULL ? o->tmp : path;
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
  /* Only a temporary file is synced: the rename promises complete data.
   * A FIFO or a character device cannot be (EINVAL). */
  else if ((o->tmp != NULL || o->nameless) && fsync(o->f_fd) != 0)
    e = errno;
  if (fclose(o->f) != 0 && e == 0)
    e = errno;
  o->f = NULL;
  if (e == 0)
    return NULL;
  hicp__outfile_abort(o);
  return strerror(e);
}

/* Gives the nameless temporary file its permissions and a temporary name
 * beside the target: linkat through /proc, as open(2) shows (AT_EMPTY_PATH
 * would need a capability). */
static const char *name_nameless(hicp__outfile *o)
{
  if (o->mode >= 0 && fchmod(o->fd, (mode_t)o->mode) != 0)
    return strerror(errno);
  const size_t size = strlen(o->target) + 48;
  o->tmp = malloc(size);
  if (o->tmp == NULL)
    return out_of_memory;
  for (unsigned attempt = 0; attempt < 100; attempt++) {
    temporary_name(o->tmp, size, o->target);
    if (linkat(AT_FDCWD, o->fd_path, AT_FDCWD, o->tmp, AT_SYMLINK_FOLLOW) == 0)
      return NULL;
    if (errno != EEXIST)
      break;
  }
  const int e = errno;
  free(o->tmp);
  o->tmp = NULL; /* nothing was linked: nothing to remove */
  return strerror(e);
}

const char *hicp__outfile_ready(hicp__outfile *o)
{
  const char *why = hicp__outfile_close(o);
  if (why != NULL)
    return why;
  if (o->nameless && o->tmp == NULL && (why = name_nameless(o)) != NULL) {
    hicp__outfile_abort(o);
    return why;
  }
  return NULL;
}

const char *hicp__outfile_commit(hicp__outfile *o)
{
  const char *why = hicp__outfile_ready(o);
  if (why != NULL)
    return why;
  if (o->tmp != NULL && rename(o->tmp, o->target) != 0) {
    why = strerror(errno);
    hicp__outfile_abort(o);
    return why;
  }
  if (o->nameless)
    close(o->fd);
  free(o->tmp);
  free(o->target);
  o->tmp = o->target = NULL;
  o->nameless = 0;
  return NULL;
}

void hicp__outfile_abort(hicp__outfile *o)
{
  if (o->f != NULL)
    fclose(o->f);
  if (o->tmp != NULL)
    unlink(o->tmp);
  if (o->nameless)
    close(o->fd); /* the last reference: the file goes with it */
  free(o->tmp);
  free(o->target);
  o->f = NULL;
  o->tmp = o->target = NULL;
  o->nameless = 0;
}
