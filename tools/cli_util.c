/* cli_util.c: the hicp tool's messages, exit status and standard output,
 * and the options every command takes (cli.h).  Option values are parsed
 * in cli_args.c, output files in cli_output.c, transforms in
 * cli_transform.c, JSON in cli_json.c. */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "budget.h"
#include "cli.h"
#include "oneline.h"

/* The name cli_input gives "-": one array, so that cli_check_stdin_inputs
 * tells a "-" by its address from a /dev/stdin the user wrote (which may
 * be a regular file, and be read twice). */
static const char stdin_name[] = "/dev/stdin";

const char *cli_input(const char *path)
{
  return path != NULL && strcmp(path, "-") == 0 ? stdin_name : path;
}

int cli_stdin_inputs(const char *const *paths, int n)
{
  int count = 0;
  for (int i = 0; i < n; i++)
    count += paths[i] == stdin_name;
  return count;
}

int cli_check_stdin_inputs(const char *const *paths, int n, int more)
{
  const int count = cli_stdin_inputs(paths, n) + more;
  if (count < 2)
    return 0;
  cli_error("%d inputs are standard input ('-'), which can be read only once", count);
  return -1;
}

/* Whether a progress line is on standard error, without its newline. */
static int progress_shown;

void cli_progress(const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  fputc('\r', stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fflush(stderr);
  progress_shown = 1;
}

void cli_progress_clear(void)
{
  if (progress_shown)
    fputs("\r\033[K", stderr);
  progress_shown = 0;
}

void cli_progress_end(void)
{
  if (progress_shown)
    fputc('\n', stderr);
  progress_shown = 0;
}

void cli_error(const char *fmt, ...)
{
  cli_progress_clear();
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* as the library's messages: they quote paths and arguments */
  hicp__one_clean_line(msg);
  fprintf(stderr, "hicp: %s\n", msg);
}

int cli_fail(hicp_context *ctx, const char *what)
{
  const char *msg = ctx != NULL ? hicp_context_error(ctx) : "";
  /* the library's message quotes a path cleaned: compare it so */
  char clean[512];
  snprintf(clean, sizeof clean, "%s", what != NULL ? what : "");
  hicp__one_clean_line(clean);
  if (clean[0] != '\0' && strstr(msg, clean) == NULL)
    cli_error("%s: %s", what, msg[0] ? msg : "failed");
  else
    cli_error("%s", msg[0] ? msg : "failed");
  return CLI_FAIL;
}

/* How many long options begin with name[0..len): more than one makes an
 * abbreviation ambiguous. */
static int prefix_matches(const struct option *opts, const char *name, size_t len)
{
  int n = 0;
  for (; opts->name != NULL; opts++)
    if (strncmp(opts->name, name, len) == 0)
      n++;
  return n;
}

int cli_bad_option(const char *cmd, int c, int argc, char *const argv[],
                   const struct option *opts)
{
  /* getopt has moved past a long option (and a finished cluster of short
   * ones); a short one is in optopt, which is 0 for an unknown long one. */
  const char *arg = optind >= 1 && optind <= argc ? argv[optind - 1] : "";
  const int is_long = strncmp(arg, "--", 2) == 0;
  const size_t len = strcspn(arg, "="); /* without "=VALUE" */
  char name[128];
  if (is_long)
    snprintf(name, sizeof name, "%.*s", (int)(len < 100 ? len : 100), arg);
  else
    snprintf(name, sizeof name, "-%c", optopt > ' ' && optopt < 127 ? optopt : '?');
  char msg[256];
  if (c == ':')
    snprintf(msg, sizeof msg, "option '%s' needs a value", name);
  else if (is_long && optopt == 0)
    snprintf(msg, sizeof msg, "%s option '%s'",
             prefix_matches(opts, arg + 2, len - 2) > 1 ? "ambiguous" : "unrecognized", name);
  else if (is_long && arg[len] == '=')
    snprintf(msg, sizeof msg, "option '%s' takes no value", name);
  else
    snprintf(msg, sizeof msg, "unrecognized option '%s'", name);
  cli_error("%s: %s (see 'hicp %s --help')", cmd, msg, cmd);
  return CLI_USAGE;
}

/* The first error writing standard output: a later fflush may succeed, its
 * buffer gone, while the output is incomplete. */
static int stdout_errno;

int cli_filter_sigma_alone(int sigma_given, const hicp_reg_options *o)
{
  if (!sigma_given || o->filter_start >= 0)
    return 0;
  cli_error("--filter-sigma needs --filter-start K: the filter is off without it");
  return 1;
}

void cli_hold_std_fds(void)
{
  for (int fd = 0; fd <= 2; fd++) {
    if (fcntl(fd, F_GETFD) != -1 || errno != EBADF)
      continue;
    /* the lowest free descriptor: this one */
    const int held = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (held != fd && held >= 0)
      close(held);
    if (fd == 1)
      stdout_errno = EBADF; /* the report has nowhere to go: a failure */
  }
}

int cli_flush_stdout(void)
{
  errno = 0;
  if (fflush(stdout) != 0 && stdout_errno == 0)
    stdout_errno = errno != 0 ? errno : EIO;
  if (ferror(stdout) && stdout_errno == 0)
    stdout_errno = EIO;
  return stdout_errno != 0 ? -1 : 0;
}

int cli_finish(int status)
{
  if (cli_flush_stdout() == 0 || status != CLI_OK)
    return status;
  cli_error("cannot write standard output: %s", cli_stdout_error());
  return CLI_FAIL;
}

const char *cli_stdout_error(void)
{
  return strerror(stdout_errno != 0 ? stdout_errno : EIO);
}

void cli_common_init(cli_common *c)
{
  memset(c, 0, sizeof *c);
  c->backend = HICP_BACKEND_AUTO;
}

int cli_common_option(cli_common *c, const char *name, const char *value)
{
  if (strcmp(name, "threads") == 0)
    return cli_int("--threads", value, 0, 4096, &c->threads) == 0 ? 1 : -1;
  if (strcmp(name, "backend") == 0) {
    if (hicp_backend_from_name(value, &c->backend) != HICP_OK) {
      cli_error("--backend: expected auto, cpu, cuda or hybrid, got '%s'", value);
      return -1;
    }
    return 1;
  }
  if (strcmp(name, "memory-limit") == 0)
    return cli_size("--memory-limit", value, &c->memory_limit) == 0 ? 1 : -1;
  if (strcmp(name, "devices") == 0) {
    int n = cli_int_list("--devices", value, c->devices, 64);
    if (n < 0)
      return -1;
    c->ndevices = n;
    return 1;
  }
  return 0;
}

int cli_common_done(const cli_common *c)
{
  /* the devices would go unused, silently (stop 63's review); checked
   * once every option is read, so that the last --backend given counts */
  if (c->ndevices > 0 && c->backend == HICP_BACKEND_CPU) {
    cli_error("--devices names CUDA devices, which --backend cpu does not use");
    return -1;
  }
  return 0;
}

hicp_context *cli_context(const cli_common *c)
{
  hicp_context_options o;
  hicp_context_options_init(&o);
  o.threads = c->threads;
  o.backend = c->backend;
  o.devices = c->ndevices ? c->devices : NULL;
  o.ndevices = c->ndevices;
  o.memory_limit = c->memory_limit;
  hicp_context *ctx = NULL;
  int rc = hicp_context_create(&o, &ctx);
  if (rc != HICP_OK) {
    cli_error("cannot create a context: %s", hicp_strerror(rc));
    return NULL;
  }
  return ctx;
}

int cli_check_memory(const cli_common *c, double bytes, const char *what)
{
  char msg[256];
  const uint64_t need = bytes < 0x1p63 ? (uint64_t)bytes : UINT64_MAX;
  uint64_t limit;
  const int err = hicp__memory_limit(c->memory_limit, &limit);
  if (err != 0) {
    cli_error("cannot read the cgroup's memory limit: %s", strerror(err));
    return -1;
  }
  if (!hicp__over_budget(need, limit, what, msg, sizeof msg))
    return 0;
  cli_error("%s", msg);
  return -1;
}
