/* read.c: hicp_cloud_read: reading a file whole (its head first, refused
 * there when it is no point cloud), telling its format, and handing it to
 * the right parser. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fpenv.h"
#include "io/text.h"

/* How much of a file is read before its format is asked for: enough for
 * any header, and little next to a file that is no point cloud at all. */
#define HEAD_BYTES ((size_t)1 << 16)

/* Reads into b[n .. cap - 1) until that is full or the file ends; *eof says
 * which.  An interrupting signal is no failure. */
static int fill(hicp_context *ctx, const char *path, int fd, unsigned char *b, size_t *n,
                size_t cap, int *eof)
{
  *eof = 0;
  while (*n + 1 < cap) {
    ssize_t got = read(fd, b + *n, cap - 1 - *n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return hicp__fail(ctx, HICP_EIO, "cannot read %s: %s", path, strerror(errno));
    if (got == 0) {
      *eof = 1;
      break;
    }
    *n += (size_t)got;
  }
  return HICP_OK;
}

static int is_model_magic(const unsigned char *buf, size_t len);
static size_t first_token(const unsigned char *buf, size_t len);

/* Steps past a UTF-8 byte order mark, which Windows editors (Notepad)
 * write before any text: every format read here starts with text (a
 * PLY's and a PCD's header, an OFF's keyword, an XYZ's first row).  An OFF
 * or PCD file with one was refused as "unknown OFF variant" with the mark
 * printed invisibly in the word (stop 63's review). */
static void skip_bom(const unsigned char **b, size_t *n)
{
  if (*n >= 3 && (*b)[0] == 0xef && (*b)[1] == 0xbb && (*b)[2] == 0xbf) {
    *b += 3;
    *n -= 3;
  }
}

/* Where the first word of the first n bytes ends (after '#' comments and
 * blank lines): n where it may go on past them, or where there is none. */
static size_t first_word_end(const unsigned char *b, size_t n)
{
  size_t k = first_token(b, n);
  while (k < n && b[k] > ' ' && b[k] < 127)
    k++;
  return k;
}

/* Whether a file's first `n` bytes (the whole file when `eof`) already say
 * it is no point cloud hicp reads: a model file's magic, or a first word
 * that is no format's, nor a number, nor cut off by the end of the head
 * (so that the whole file could not say otherwise). */
static int head_is_not_a_cloud(const char *path, const unsigned char *b, size_t n, int eof)
{
  skip_bom(&b, &n);
  const hicp_format f = hicp__detect_format(path, b, n);
  if (f == HICP_FORMAT_MODEL)
    return 1;
  if (f != HICP_FORMAT_AUTO || eof)
    return 0; /* at the end, the parser's own message says why */
  return first_word_end(b, n) < n;
}

/* A file whose head did not show its format (its name or the caller gave
 * it) is refused from the head where the head already shows it is not in
 * that format: its parser's own first step, the one the whole file would
 * fail at too, run on the head by the parser's module (a PLY's first line,
 * a PCD's first key, an OFF's first word, each whole within the head; a
 * NUL byte in text).  Such a file was read whole, up to the memory limit,
 * before its parser said so (stop 63's review: 2 GB of zeros named .ply,
 * 10.8 s and 2.1 GB, against 0.01 s named .dat).  A head whose format the
 * content may still decide (no first word within it) is left to the whole
 * file, so that both are read as the same format. */
static int refusal_from_head(hicp_context *ctx, const char *path, hicp_format fmt,
                             const unsigned char *b, size_t n)
{
  skip_bom(&b, &n);
  if (fmt == HICP_FORMAT_AUTO) {
    if (first_word_end(b, n) >= n)
      return HICP_OK;
    fmt = hicp__detect_format(path, b, n);
  }
  switch (fmt) {
  case HICP_FORMAT_PLY:
    return hicp__ply_check_head(ctx, path, b, n);
  case HICP_FORMAT_PCD:
    return hicp__pcd_check_head(ctx, path, b, n);
  case HICP_FORMAT_OFF:
    return hicp__off_check_head(ctx, path, b, n);
  case HICP_FORMAT_XYZ:
    return hicp__xyz_check_head(ctx, path, b, n);
  default:
    return HICP_OK;
  }
}

int hicp__read_file(hicp_context *ctx, const char *path, hicp_format fmt, unsigned char **buf,
                    size_t *len)
{
  *buf = NULL;
  *len = 0;
  /* a FIFO's open waits for a writer: an application's signal handler
   * without SA_RESTART interrupts it, which is no failure */
  int fd;
  do
    fd = open(path, O_RDONLY | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return hicp__fail(ctx, HICP_EIO, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return hicp__fail(ctx, HICP_EIO, "cannot read %s: %s", path, strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    return hicp__fail(ctx, HICP_EIO, "%s is a directory, not a file", path);
  }
  /* The head first: a file that is no point cloud (a device of zeros, an
   * archive, a model file) is refused from it, where reading it whole took
   * up to the memory limit (3/4 of the machine by default) before the
   * format was asked for (stop 53's review: /dev/zero, 60 s and 16.8 GB). */
  size_t cap = S_ISREG(st.st_mode) && (uint64_t)st.st_size < HEAD_BYTES ? (size_t)st.st_size + 1
                                                                          : HEAD_BYTES + 1;
  char what[300];
  snprintf(what, sizeof what, "reading %s", path);
  int rc = hicp__check_budget(ctx, cap, what);
  unsigned char *b = NULL;
  if (rc == HICP_OK && (b = malloc(cap)) == NULL)
    rc = hicp__fail(ctx, HICP_ENOMEM, "out of memory reading %s", path);
  size_t n = 0;
  int eof = 0;
  if (rc == HICP_OK)
    rc = fill(ctx, path, fd, b, &n, cap, &eof);
  if (rc == HICP_OK && fmt == HICP_FORMAT_AUTO && head_is_not_a_cloud(path, b, n, eof))
    /* hicp_model_open takes a model file from a regular file only (it
     * loads at offsets), and hands anything else here */
    rc = is_model_magic(b, n) && !S_ISREG(st.st_mode)
             ? hicp__fail(ctx, HICP_EUNSUPPORTED,
                          "%s is a hicp model file, not a point cloud; as a model it loads from a "
                          "regular file only, not from a pipe or device", path)
         : is_model_magic(b, n)
             ? hicp__fail(ctx, HICP_EUNSUPPORTED, "%s is a hicp model file, not a point cloud", path)
             : hicp__fail(ctx, HICP_EUNSUPPORTED,
                          "cannot tell the format of %s (PLY, PCD, OFF or XYZ/TXT/CSV expected)",
                          path);
  if (rc == HICP_OK && !eof)
    rc = refusal_from_head(ctx, path, fmt, b, n);
  /* Then the rest: regular files have a size; pipes and devices are read
   * to their end, the buffer doubling. */
  while (rc == HICP_OK && !eof) {
    /* A regular file read to its size: a byte more says whether it ended
     * there, before the buffer doubles for nothing (a file needed twice its
     * size under the memory limit: stop 53's review) */
    unsigned char extra = 0;
    int have_extra = 0;
    if (S_ISREG(st.st_mode) && (uint64_t)n == (uint64_t)st.st_size) {
      ssize_t got;
      do
        got = read(fd, &extra, 1);
      while (got < 0 && errno == EINTR);
      if (got < 0) {
        rc = hicp__fail(ctx, HICP_EIO, "cannot read %s: %s", path, strerror(errno));
        break;
      }
      if (got == 0) {
        eof = 1;
        break;
      }
      have_extra = 1; /* it grew since the stat */
    }
    size_t want = cap * 2;
    if (S_ISREG(st.st_mode) && (uint64_t)st.st_size + 1 > cap && cap == HEAD_BYTES + 1)
      want = (size_t)st.st_size + 1;
    if ((rc = hicp__check_budget(ctx, want, what)) != HICP_OK)
      break;
    unsigned char *nb = realloc(b, want);
    if (nb == NULL) {
      rc = hicp__fail(ctx, HICP_ENOMEM, "out of memory reading %s", path);
      break;
    }
    b = nb;
    cap = want;
    if (have_extra)
      b[n++] = extra;
    rc = fill(ctx, path, fd, b, &n, cap, &eof);
  }
  close(fd);
  if (rc != HICP_OK) {
    free(b);
    return rc;
  }
  b[n] = '\0';
  *buf = b;
  *len = n;
  return HICP_OK;
}

/* A model file's eight bytes of magic, its NUL among them (model_file.c):
 * seven are a file cut short, which the model loader calls too short. */
static int is_model_magic(const unsigned char *buf, size_t len)
{
  return len >= 8 && memcmp(buf, "HICPMDL", 8) == 0;
}

static int starts_with(const unsigned char *buf, size_t len, const char *s)
{
  size_t k = strlen(s);
  return len >= k && memcmp(buf, s, k) == 0;
}

/* Where the first word of the first line that is not a '#' comment begins
 * (len when there is none). */
static size_t first_token(const unsigned char *buf, size_t len)
{
  size_t i = 0;
  for (;;) {
    while (i < len && (buf[i] == ' ' || buf[i] == '\t' || buf[i] == '\r' || buf[i] == '\n'))
      i++;
    if (i < len && buf[i] == '#') {
      while (i < len && buf[i] != '\n' && buf[i] != '\r')
        i++;
      continue;
    }
    return i;
  }
}

/* That word, cut to wlen - 1 bytes. */
static void first_word(const unsigned char *buf, size_t len, char *w, size_t wlen)
{
  size_t i = first_token(buf, len);
  size_t k = 0;
  while (i < len && k + 1 < wlen && buf[i] > ' ' && buf[i] < 127)
    w[k++] = (char)buf[i++];
  w[k] = '\0';
}

hicp_format hicp__detect_format(const char *name, const unsigned char *buf, size_t len)
{
  if (is_model_magic(buf, len))
    return HICP_FORMAT_MODEL;
  if (starts_with(buf, len, "ply\n") || starts_with(buf, len, "ply\r"))
    return HICP_FORMAT_PLY;
  char w[32];
  first_word(buf, len, w, sizeof w);
  if (strcmp(w, "VERSION") == 0 || strcmp(w, "FIELDS") == 0)
    return HICP_FORMAT_PCD;
  size_t wl = strlen(w);
  if (wl >= 3 && wl <= 8 && strcmp(w + wl - 3, "OFF") == 0)
    return HICP_FORMAT_OFF;
  const char *dot = name != NULL ? strrchr(name, '.') : NULL;
  if (dot != NULL) {
    static const struct {
      const char *ext;
      hicp_format fmt;
    } ext[] = {{".ply", HICP_FORMAT_PLY}, {".pcd", HICP_FORMAT_PCD}, {".off", HICP_FORMAT_OFF},
               {".xyz", HICP_FORMAT_XYZ}, {".txt", HICP_FORMAT_XYZ}, {".csv", HICP_FORMAT_XYZ},
               {".pts", HICP_FORMAT_XYZ}, {".asc", HICP_FORMAT_XYZ}};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
      if (strcasecmp(dot, ext[i].ext) == 0)
        return ext[i].fmt;
  }
  /* A first word that reads as a number: a plain point list. */
  double v;
  char wn[32];
  snprintf(wn, sizeof wn, "%s", w);
  char *comma = strpbrk(wn, ",;");
  if (comma != NULL)
    *comma = '\0';
  if (hicp__parse_double(wn, &v) == HICP_OK)
    return HICP_FORMAT_XYZ;
  return HICP_FORMAT_AUTO;
}

int hicp__cloud_parse(hicp_context *ctx, const char *name, const unsigned char *buf, size_t len,
                      hicp_format fmt, const double *origin, hicp_cloud **out)
{
  *out = NULL;
  const hicp_format asked = fmt;
  skip_bom(&buf, &len);
  if (fmt == HICP_FORMAT_AUTO)
    fmt = hicp__detect_format(name, buf, len);
  if (len == 0)
    return hicp__fail(ctx, HICP_EEMPTY, "%s: the file is empty (no points)", name);
  hicp__raw_cloud raw;
  memset(&raw, 0, sizeof raw);
  int rc;
  switch (fmt) {
  case HICP_FORMAT_PLY:
    rc = hicp__parse_ply(ctx, name, buf, len, &raw);
    break;
  case HICP_FORMAT_PCD:
    rc = hicp__parse_pcd(ctx, name, buf, len, &raw);
    break;
  case HICP_FORMAT_OFF:
    rc = hicp__parse_off(ctx, name, buf, len, &raw);
    break;
  case HICP_FORMAT_XYZ:
    rc = hicp__parse_xyz(ctx, name, buf, len, &raw);
    break;
  case HICP_FORMAT_MODEL:
    if (asked == HICP_FORMAT_MODEL) /* the caller's word, not the file's */
      return hicp__fail(ctx, HICP_EUNSUPPORTED,
                        "%s: HICP_FORMAT_MODEL names a hicp model file, which is opened with "
                        "hicp_model_open(), not read as a point cloud", name);
    return hicp__fail(ctx, HICP_EUNSUPPORTED, "%s is a hicp model file, not a point cloud", name);
  default:
    return hicp__fail(ctx, HICP_EUNSUPPORTED,
                      "cannot tell the format of %s (PLY, PCD, OFF or XYZ/TXT/CSV expected)", name);
  }
  if (rc != HICP_OK) {
    hicp__raw_cloud_free(&raw);
    return rc;
  }
  return hicp__cloud_from_raw(ctx, &raw, name, origin, out);
}

/* hicp_cloud_read and, with an origin, hicp_cloud_read_relative (fn). */
static int cloud_read(hicp_context *ctx, const char *fn, const char *path, hicp_format fmt,
                      const double *origin, hicp_cloud **out)
{
  if (out == NULL || path == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "%s: NULL argument", fn);
  *out = NULL;
  if ((unsigned)fmt > HICP_FORMAT_MODEL)
    return hicp__fail(ctx, HICP_EINVAL, "%s: unknown format %d", fn, (int)fmt);
  if (origin != NULL && hicp__check_origin(ctx, fn, origin) != HICP_OK)
    return HICP_EINVAL;
  unsigned char *buf;
  size_t len;
  int rc = hicp__read_file(ctx, path, fmt, &buf, &len);
  if (rc != HICP_OK)
    return rc;
  rc = hicp__cloud_parse(ctx, path, buf, len, fmt, origin, out);
  free(buf);
  return rc;
}

int hicp_cloud_read(hicp_context *ctx, const char *path, hicp_format fmt, hicp_cloud **out)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = cloud_read(ctx, "hicp_cloud_read", path, fmt, NULL, out);
  hicp__fpenv_leave(&fe);
  return rc;
}

int hicp_cloud_read_relative(hicp_context *ctx, const char *path, hicp_format fmt,
                             const double origin[3], hicp_cloud **out)
{
  if (origin == NULL)
    return hicp__null_origin(ctx, "hicp_cloud_read_relative", out);
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = cloud_read(ctx, "hicp_cloud_read_relative", path, fmt, origin, out);
  hicp__fpenv_leave(&fe);
  return rc;
}
