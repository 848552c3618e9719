/* cli_output.c: the hicp tool's output files: one name for two files
 * refused, a name whose extension is another format's refused, and outputs
 * written to temporaries and put in place together once the whole command
 * has succeeded (cli.h). */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "cli.h"

/* What a name leads to, to tell whether two names are one file: an
 * existing file's device and inode; for a missing one, its directory's and
 * its last component (two outputs not yet written can still collide). */
typedef struct file_id {
  int exists, regular, fifo;
  dev_t dev;
  ino_t ino;
  const char *base;
} file_id;

int cli_is_stdout(const char *path)
{
  return path != NULL && (strcmp(path, "-") == 0 || hicp__outfile_descriptor(path) == 1);
}

static int identify(const char *path, file_id *id)
{
  struct stat st;
  memset(id, 0, sizeof *id);
  if (strcmp(path, "-") == 0)
    path = "/dev/stdout";
  if (stat(path, &st) == 0) {
    id->exists = 1;
    id->regular = S_ISREG(st.st_mode);
    id->fifo = S_ISFIFO(st.st_mode);
  } else {
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (slash == NULL)
      snprintf(dir, sizeof dir, ".");
    else
      snprintf(dir, sizeof dir, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    id->base = slash != NULL ? slash + 1 : path;
    if (id->base[0] == '\0' || stat(dir, &st) != 0)
      return -1; /* the write will fail, and say why */
  }
  id->dev = st.st_dev;
  id->ino = st.st_ino;
  return 0;
}

/* Whether writing output a spoils b: both the same regular file (which
 * the output replaces), one pipe (whose reader would get both outputs
 * mixed, or which hicp would read while holding its write end, waiting
 * for an end that never comes), or both missing names of one directory
 * entry.  A device is written in place, which spoils nothing. */
static int collide(const file_id *a, const file_id *b)
{
  if (a->dev != b->dev || a->ino != b->ino || a->exists != b->exists)
    return 0;
  return a->exists ? a->regular || a->fifo : strcmp(a->base, b->base) == 0;
}

int cli_check_outputs(const cli_file *files, int n)
{
  for (int i = 0; i < n; i++) {
    file_id a, b;
    if (!files[i].output || files[i].path == NULL)
      continue;
    for (int k = i + 1; k < n; k++)
      if (files[k].output && cli_is_stdout(files[i].path) && cli_is_stdout(files[k].path)) {
        cli_error("%s '%s' and %s '%s' are both standard output (refusing to mix them)",
                  files[i].what, files[i].path, files[k].what, files[k].path);
        return -1;
      }
    if (identify(files[i].path, &a) != 0)
      continue;
    for (int k = 0; k < n; k++) {
      /* a missing input fails on its own; only two outputs can collide
       * before either exists */
      if (k == i || (files[k].output && k < i) || files[k].path == NULL ||
          (!a.exists && !files[k].output) || identify(files[k].path, &b) != 0 ||
          !collide(&a, &b))
        continue;
      if (a.fifo)
        cli_error("%s '%s' and %s '%s' are the same pipe (refusing to %s it)", files[i].what,
                  files[i].path, files[k].what, files[k].path,
                  files[k].output ? "write both into" : "read what is written into");
      else
        cli_error("%s '%s' and %s '%s' are the same file (refusing to overwrite it)",
                  files[i].what, files[i].path, files[k].what, files[k].path);
      return -1;
    }
  }
  return 0;
}

int cli_check_output_name(const char *what, const char *path, const char *writes)
{
  /* the formats hicp reads or a user may mean, but for the one written */
  static const char *const kinds[] = {"ply", "pcd", "xyz", "txt", "csv", "asc", "pts", "off",
                                      "obj", "stl", "las", "laz", "e57", "hicpm"};
  const char *mine = strcmp(writes, "PLY") == 0 ? "ply" : "hicpm";
  if (path == NULL)
    return 0;
  const char *base = strrchr(path, '/');
  base = base != NULL ? base + 1 : path;
  const char *dot = strrchr(base, '.');
  if (dot == NULL || dot == base)
    return 0;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (strcasecmp(dot + 1, kinds[i]) == 0 && strcmp(kinds[i], mine) != 0) {
      cli_error("%s '%s': the file is written as %s, not as its name's .%s says; name it .%s",
                what, path, strcmp(writes, "PLY") == 0 ? "PLY" : "an hicp model file", dot + 1,
                mine);
      return -1;
    }
  return 0;
}

/* The named temporaries of the outputs open, where the system gives no
 * nameless one (no /proc, a file system without O_TMPFILE): a signal that
 * ends the run from outside (SIGINT, SIGTERM, SIGHUP) removes them, and
 * then ends it as it would have.  Nameless temporaries vanish by
 * themselves. */
enum { TEMPS = 4 };
static char temp_path[TEMPS][4096];
static volatile sig_atomic_t temp_set[TEMPS];

static void remove_temps(int sig)
{
  for (int i = 0; i < TEMPS; i++)
    if (temp_set[i])
      unlink(temp_path[i]);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void watch_temp(cli_output *out)
{
  static const int ends[] = {SIGINT, SIGTERM, SIGHUP};
  static int installed;
  if (out->o.tmp == NULL || strlen(out->o.tmp) >= sizeof temp_path[0])
    return;
  for (int i = 0; i < TEMPS; i++) {
    if (temp_set[i])
      continue;
    strcpy(temp_path[i], out->o.tmp);
    /* the handler must see the whole path once it sees the slot set */
    atomic_signal_fence(memory_order_seq_cst);
    temp_set[i] = 1;
    out->watched = i + 1;
    break;
  }
  for (size_t k = 0; !installed && k < sizeof ends / sizeof ends[0]; k++) {
    struct sigaction was, now;
    /* a signal the caller set aside (nohup's SIGHUP) stays so */
    if (sigaction(ends[k], NULL, &was) != 0 || was.sa_handler != SIG_DFL)
      continue;
    memset(&now, 0, sizeof now);
    now.sa_handler = remove_temps;
    sigemptyset(&now.sa_mask);
    sigaction(ends[k], &now, NULL);
  }
  installed = 1;
}

static void unwatch_temp(cli_output *out)
{
  if (out->watched > 0)
    temp_set[out->watched - 1] = 0;
  out->watched = 0;
}

/* Standard output as an output ("-", /dev/stdout): the data go to the
 * descriptor that was standard output, and the report to standard error
 * from here on (descriptor 1 becomes a copy of 2), so that a pipe or a
 * redirection gets the file alone.  The data are written in place, as
 * they are made: a stream cannot be replaced whole, only written. */
static int open_stdout(cli_output *out)
{
  out->path = "standard output";
  if (cli_flush_stdout() != 0) {
    cli_error("cannot write standard output: %s", cli_stdout_error());
    return -1;
  }
  const int data = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
  if (data < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    cli_error("cannot write standard output: %s", strerror(errno));
    if (data >= 0)
      close(data);
    return -1;
  }
  out->data_fd = data;
  snprintf(out->data_name, sizeof out->data_name, "/dev/fd/%d", out->data_fd);
  const char *why = hicp__outfile_open(&out->o, out->data_name);
  if (why != NULL) {
    cli_error("cannot write standard output: %s", why);
    close(out->data_fd);
    out->data_fd = 0;
    return -1;
  }
  return 0;
}

int cli_output_open(cli_output *out, const char *path)
{
  memset(out, 0, sizeof *out);
  if (path == NULL)
    return 0;
  if (cli_is_stdout(path))
    return open_stdout(out);
  /* An existing file its owner made read-only is refused, as the shell's
   * '>' refuses it: the rename that replaces a file needs only the
   * directory's permission.  (The effective IDs, as open would use them;
   * root may write anything.) */
  struct stat st;
  if (stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
      faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) != 0) {
    cli_error("cannot write %s: %s", path, strerror(errno));
    return -1;
  }
  const char *why = hicp__outfile_open(&out->o, path);
  if (why != NULL) {
    cli_error("cannot write %s: %s", path, why);
    return -1;
  }
  out->path = path;
  if (out->o.tmp != NULL)
    snprintf(out->data_name, sizeof out->data_name, "/dev/fd/%d", out->o.f_fd);
  watch_temp(out);
  return 0;
}

/* The name the library writes the output by.  A named temporary goes by
 * its descriptor: by its name, the library would take it for an existing
 * file to replace and write a temporary of its own beside it, which no
 * signal handler here knows of (stop 56's review: a SIGTERM during the
 * write left OUT.tmpPID.0.tmpPID.0).  Through the descriptor the library
 * writes this fresh, empty file in place. */
const char *cli_output_name(const cli_output *out)
{
  if (out->data_fd > 0 || (out->o.tmp != NULL && out->data_name[0] != '\0'))
    return out->data_name;
  return out->path != NULL ? hicp__outfile_name(&out->o, out->path) : NULL;
}

int cli_output_fail(hicp_context *ctx, const cli_output *out)
{
  const char *msg = ctx != NULL ? hicp_context_error(ctx) : "";
  const char *name = cli_output_name(out);
  if (name == NULL || out->path == NULL)
    return cli_fail(ctx, "");
  /* the temporary file's name, wherever the message has it, becomes the
   * output's */
  char text[2048];
  size_t at = 0;
  const size_t nlen = strlen(name), plen = strlen(out->path);
  for (const char *p = msg; *p != '\0' && at < sizeof text - 1;) {
    if (nlen > 0 && strncmp(p, name, nlen) == 0) {
      const size_t k = plen < sizeof text - 1 - at ? plen : sizeof text - 1 - at;
      memcpy(text + at, out->path, k);
      at += k;
      p += nlen;
    } else {
      text[at++] = *p++;
    }
  }
  text[at] = '\0';
  if (strstr(text, out->path) == NULL)
    cli_error("cannot write %s: %s", out->path, text[0] ? text : "failed");
  else
    cli_error("%s", text);
  return CLI_FAIL;
}

int cli_write_transform(cli_output *out, const hicp_transform *t)
{
  if (out->path == NULL)
    return 0;
  fprintf(out->o.f, "# rigid transform, 4x4 row-major (scan -> model: x = R p + t)\n");
  cli_print_transform(out->o.f, t, "");
  const char *why = hicp__outfile_close(&out->o);
  if (why != NULL) {
    cli_error("cannot write %s: %s", out->path, why);
    return -1;
  }
  return 0;
}

static void close_data_fd(cli_output *out)
{
  if (out->data_fd > 0)
    close(out->data_fd);
  out->data_fd = 0;
}

int cli_commit_outputs(cli_output *outs, int n)
{
  /* standard output first: a command whose report was lost has failed, and
   * replaces nothing */
  if (cli_flush_stdout() != 0) {
    cli_finish(CLI_OK); /* says so */
    return -1;
  }
  /* every file ready before any replaces its target: one that cannot be
   * leaves the others' targets as they were.  All closed (and synced)
   * first, then all named: a SIGKILL leaves a named temporary file behind,
   * so the names come together, just before the renames. */
  for (int step = 0; step < 2; step++)
    for (int i = 0; i < n; i++) {
      if (outs[i].path == NULL)
        continue;
      const char *why = step == 0 ? hicp__outfile_close(&outs[i].o) : hicp__outfile_ready(&outs[i].o);
      if (why != NULL) {
        cli_error("cannot write %s: %s", outs[i].path, why);
        for (int j = 0; j < n; j++)
          cli_output_abort(&outs[j]);
        return -1;
      }
      if (step == 1 && outs[i].watched == 0)
        watch_temp(&outs[i]); /* a nameless temporary file has its name now */
    }
  for (int i = 0; i < n; i++) {
    if (outs[i].path == NULL)
      continue;
    const char *why = hicp__outfile_commit(&outs[i].o);
    close_data_fd(&outs[i]);
    unwatch_temp(&outs[i]);
    if (why != NULL) {
      cli_error("cannot write %s: %s", outs[i].path, why);
      for (int j = i + 1; j < n; j++)
        cli_output_abort(&outs[j]);
      return -1;
    }
  }
  return 0;
}

void cli_output_abort(cli_output *out)
{
  close_data_fd(out);
  if (out->path != NULL)
    hicp__outfile_abort(&out->o);
  unwatch_temp(out);
}
