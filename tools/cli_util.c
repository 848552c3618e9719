/* cli_util.c: option parsing, transforms, JSON for the hicp tool. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "budget.h"
#include "cli.h"
#include "oneline.h"

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
  cli_error("cannot write standard output: %s", strerror(stdout_errno));
  return CLI_FAIL;
}

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

/* Decimal digits, after a '-' where a sign is allowed: strtol and strtoull
 * would also take blanks, '+', and (in base 0) octal and hexadecimal. */
static int is_decimal_integer(const char *s, int sign)
{
  if (sign && *s == '-')
    s++;
  if (!isdigit((unsigned char)*s))
    return 0;
  while (isdigit((unsigned char)*s))
    s++;
  return *s == '\0';
}

/* [-]digits[.digits][e[+-]digits], a digit before or after the point: the
 * numbers --help shows, not strtod's blanks, hexadecimal, inf or nan. */
static int is_decimal_number(const char *s)
{
  if (*s == '-')
    s++;
  size_t digits = 0;
  for (; isdigit((unsigned char)*s); s++)
    digits++;
  if (*s == '.')
    for (s++; isdigit((unsigned char)*s); s++)
      digits++;
  if (digits == 0)
    return 0;
  if (*s == 'e' || *s == 'E') {
    s++;
    if (*s == '+' || *s == '-')
      s++;
    if (!isdigit((unsigned char)*s))
      return 0;
    while (isdigit((unsigned char)*s))
      s++;
  }
  return *s == '\0';
}

/* 0 and the value, -1 no number, -2 too small.  strtod's ERANGE is not
 * checked: on gradual underflow it returns the nearest subnormal, which is
 * the number meant;
 * overflow gives HUGE_VAL, which isfinite refuses.  A number written
 * nonzero that underflows to 0 is refused: for many options 0 means "off"
 * (--max-dist, --time-budget), and 1e-400 would turn the limit it asks
 * for into none. */
static int parse_number(const char *s, double *out)
{
  if (!is_decimal_number(s))
    return -1;
  const double v = strtod(s, NULL);
  if (!isfinite(v))
    return -1;
  if (v == 0.0 && strcspn(s, "123456789") < strcspn(s, "eE"))
    return -2;
  *out = v;
  return 0;
}

int cli_int(const char *opt, const char *s, long lo, long hi, int *out)
{
  const int decimal = is_decimal_integer(s, 1);
  errno = 0;
  const long v = decimal ? strtol(s, NULL, 10) : 0;
  if (!decimal || errno != 0 || v < lo || v > hi) {
    cli_error("%s: expected an integer from %ld to %ld, got '%s'", opt, lo, hi, s);
    return -1;
  }
  *out = (int)v;
  return 0;
}

int cli_u64(const char *opt, const char *s, unsigned long long *out)
{
  const int decimal = is_decimal_integer(s, 0);
  errno = 0;
  const unsigned long long v = decimal ? strtoull(s, NULL, 10) : 0;
  if (!decimal || errno != 0) {
    cli_error("%s: expected a non-negative decimal integer below 2^64, got '%s'", opt, s);
    return -1;
  }
  *out = v;
  return 0;
}

int cli_size(const char *opt, const char *s, unsigned long long *out)
{
  char *end = NULL;
  unsigned long long v = 0;
  errno = 0;
  /* a digit first: strtoull would skip blanks and take " -1" as 2^64 - 1 */
  if (isdigit((unsigned char)s[0]))
    v = strtoull(s, &end, 10);
  int shift = 0;
  if (end != NULL && errno == 0 && end[0] != '\0' && end[1] == '\0') {
    switch (end[0]) {
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: break;
    }
  }
  if (end == NULL || errno != 0 || *end != '\0' || v == 0 || (v << shift) >> shift != v) {
    cli_error("%s: expected a size in bytes such as 1048576, 512M or 8G, got '%s'", opt, s);
    return -1;
  }
  *out = v << shift;
  return 0;
}

int cli_double(const char *opt, const char *s, double lo, double hi, double *out)
{
  double v;
  const int rc = parse_number(s, &v);
  if (rc == -2) { /* "expected at least 0" would be a condition it meets */
    cli_error("%s: '%s' is too small for a double (it would read as 0)", opt, s);
    return -1;
  }
  if (rc != 0 || v < lo || v > hi) {
    if (isinf(hi)) /* "from 0 to inf" would offer what parse_number refuses */
      cli_error("%s: expected a finite number of at least %g, got '%s'", opt, lo, s);
    else
      cli_error("%s: expected a number from %g to %g, got '%s'", opt, lo, hi, s);
    return -1;
  }
  *out = v;
  return 0;
}

/* The next field of a comma-separated list, copied into field[size]: its
 * length, or 0 when it is empty or too long ("1,,2" has an empty field,
 * which strtok would have skipped). */
static size_t next_field(const char *p, char *field, size_t size)
{
  const size_t len = strcspn(p, ",");
  if (len == 0 || len >= size)
    return 0;
  memcpy(field, p, len);
  field[len] = '\0';
  return len;
}

int cli_numbers(const char *opt, const char *s, double *out, int n, const char *form)
{
  const char *p = s;
  for (int k = 0; k < n; k++) {
    char field[128];
    const size_t len = next_field(p, field, sizeof field);
    const int rc = len == 0 ? -1 : parse_number(field, &out[k]);
    if (rc == -2) {
      cli_error("%s: '%s' in '%s' is too small for a double (it would read as 0)", opt, field, s);
      return -1;
    }
    if (rc != 0)
      break;
    if (p[len] == '\0') {
      if (k == n - 1)
        return 0;
      break;
    }
    p += len + 1;
  }
  cli_error("%s: expected %s, got '%s'", opt, form, s);
  return -1;
}

int cli_vec3(const char *opt, const char *s, double out[3])
{
  return cli_numbers(opt, s, out, 3, "three numbers X,Y,Z");
}

int cli_int_list(const char *opt, const char *s, int *out, int max)
{
  const char *p = s;
  for (int n = 0;; n++) {
    char field[32];
    const size_t len = next_field(p, field, sizeof field);
    if (len == 0) {
      cli_error("%s: expected a comma-separated list of device numbers, got '%s'", opt, s);
      return -1;
    }
    if (n == max) {
      cli_error("%s: at most %d devices can be listed", opt, max);
      return -1;
    }
    if (cli_int(opt, field, 0, 1023, &out[n]) != 0)
      return -1;
    if (p[len] == '\0')
      return n + 1;
    p += len + 1;
  }
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
  if (!hicp__over_budget(need, hicp__memory_limit(c->memory_limit), what, msg, sizeof msg))
    return 0;
  cli_error("%s", msg);
  return -1;
}

/* The separators of a transform file's numbers. */
static int is_separator(int c)
{
  return c == ' ' || c == '\t' || c == ',' || c == ';' || c == '\r' || c == '\n';
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

int cli_output_path(const char *opt, const char *s)
{
  if (s[0] != '\0')
    return 0;
  cli_error("%s: expected a file name, got ''", opt);
  return -1;
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
    cli_error("cannot write standard output: %s", strerror(stdout_errno));
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

/* ---- JSON ---- */

static void sep(json *j)
{
  if (!j->first[j->depth])
    fputc(',', j->f);
  j->first[j->depth] = 0;
}

void json_begin(json *j, FILE *f)
{
  j->f = f;
  j->depth = 0;
  j->first[0] = 1;
  fputc('{', f);
}

void json_end(json *j)
{
  fputs("}\n", j->f);
}

/* The length of the well-formed UTF-8 sequence at s, 0 if there is none
 * (Unicode's table 3-7: no overlong forms, no surrogates, nothing above
 * U+10FFFF; a sequence cut short meets a byte that does not continue it, at
 * the latest the terminating NUL). */
static int utf8_length(const unsigned char *s)
{
  unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
  int n;
  if (s[0] < 0x80)
    return 1;
  if (s[0] >= 0xC2 && s[0] <= 0xDF) {
    n = 2;
  } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
    n = 3;
    lo = s[0] == 0xE0 ? 0xA0 : lo;
    hi = s[0] == 0xED ? 0x9F : hi;
  } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
    n = 4;
    lo = s[0] == 0xF0 ? 0x90 : lo;
    hi = s[0] == 0xF4 ? 0x8F : hi;
  } else {
    return 0;
  }
  if (s[1] < lo || s[1] > hi)
    return 0;
  for (int i = 2; i < n; i++)
    if (s[i] < 0x80 || s[i] > 0xBF)
      return 0;
  return n;
}

/* JSON text must be UTF-8, but file names are bytes: each byte that is not
 * part of a well-formed sequence becomes U+FFFD. */
static void put_string(FILE *f, const char *str)
{
  const unsigned char *s = (const unsigned char *)str;
  fputc('"', f);
  while (*s != '\0') {
    const int n = utf8_length(s);
    if (n == 0)
      fputs("\\ufffd", f);
    else if (*s == '"' || *s == '\\')
      fprintf(f, "\\%c", *s);
    else if (*s < 0x20)
      fprintf(f, "\\u%04x", *s);
    else
      fwrite(s, 1, (size_t)n, f);
    s += n > 0 ? n : 1;
  }
  fputc('"', f);
}

void json_key(json *j, const char *key)
{
  sep(j);
  if (key != NULL) {
    put_string(j->f, key);
    fputc(':', j->f);
  }
}

void json_object_begin(json *j, const char *key)
{
  json_key(j, key);
  fputc('{', j->f);
  j->first[++j->depth] = 1;
}

void json_object_end(json *j)
{
  fputc('}', j->f);
  j->depth--;
}

void json_array_begin(json *j, const char *key)
{
  json_key(j, key);
  fputc('[', j->f);
  j->first[++j->depth] = 1;
}

void json_array_end(json *j)
{
  fputc(']', j->f);
  j->depth--;
}

void json_num(json *j, const char *key, double v)
{
  json_key(j, key);
  if (isfinite(v))
    fprintf(j->f, "%.17g", v);
  else
    fputs("null", j->f);
}

void json_int(json *j, const char *key, long long v)
{
  json_key(j, key);
  fprintf(j->f, "%lld", v);
}

void json_bool(json *j, const char *key, int v)
{
  json_key(j, key);
  fputs(v ? "true" : "false", j->f);
}

void json_str(json *j, const char *key, const char *v)
{
  json_key(j, key);
  put_string(j->f, v);
}

void json_null(json *j, const char *key)
{
  json_key(j, key);
  fputs("null", j->f);
}

void json_transform(json *j, const char *key, const hicp_transform *t)
{
  json_array_begin(j, key);
  for (int i = 0; i < 4; i++) {
    json_array_begin(j, NULL);
    for (int k = 0; k < 4; k++)
      json_num(j, NULL, t->m[4 * i + k]);
    json_array_end(j);
  }
  json_array_end(j);
}

void json_rotation(json *j, const char *key, const hicp_transform *t)
{
  json_array_begin(j, key);
  for (int i = 0; i < 3; i++) {
    json_array_begin(j, NULL);
    for (int k = 0; k < 3; k++)
      json_num(j, NULL, t->m[4 * i + k]);
    json_array_end(j);
  }
  json_array_end(j);
}

void json_translation(json *j, const char *key, const hicp_transform *t)
{
  json_array_begin(j, key);
  for (int i = 0; i < 3; i++)
    json_num(j, NULL, t->m[4 * i + 3]);
  json_array_end(j);
}
