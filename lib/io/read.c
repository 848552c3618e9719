/* read.c: hicp_cloud_read: reading a file whole, telling its format, and
 * handing it to the right parser. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/text.h"

int hicp__read_file(hicp_context *ctx, const char *path, unsigned char **buf, size_t *len)
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
  /* Regular files have a size; pipes and devices are read to their end. */
  size_t cap = S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 1 << 16;
  char what[300];
  snprintf(what, sizeof what, "reading %s", path);
  int rc = hicp__check_budget(ctx, cap, what);
  if (rc != HICP_OK) {
    close(fd);
    return rc;
  }
  unsigned char *b = malloc(cap);
  if (b == NULL) {
    close(fd);
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory reading %s", path);
  }
  size_t n = 0;
  for (;;) {
    if (n + 1 >= cap) {
      if ((rc = hicp__check_budget(ctx, (uint64_t)cap * 2, what)) != HICP_OK) {
        free(b);
        close(fd);
        return rc;
      }
      unsigned char *nb = realloc(b, cap * 2);
      if (nb == NULL) {
        free(b);
        close(fd);
        return hicp__fail(ctx, HICP_ENOMEM, "out of memory reading %s", path);
      }
      b = nb;
      cap *= 2;
    }
    ssize_t got = read(fd, b + n, cap - 1 - n);
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      int e = errno;
      free(b);
      close(fd);
      return hicp__fail(ctx, HICP_EIO, "cannot read %s: %s", path, strerror(e));
    }
    if (got == 0)
      break;
    n += (size_t)got;
  }
  close(fd);
  b[n] = '\0';
  *buf = b;
  *len = n;
  return HICP_OK;
}

static int starts_with(const unsigned char *buf, size_t len, const char *s)
{
  size_t k = strlen(s);
  return len >= k && memcmp(buf, s, k) == 0;
}

/* The first word of the first line that is not a '#' comment. */
static void first_word(const unsigned char *buf, size_t len, char *w, size_t wlen)
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
    break;
  }
  size_t k = 0;
  while (i < len && k + 1 < wlen && buf[i] > ' ' && buf[i] < 127)
    w[k++] = (char)buf[i++];
  w[k] = '\0';
}

hicp_format hicp__detect_format(const char *name, const unsigned char *buf, size_t len)
{
  if (starts_with(buf, len, "HICPMDL"))
    return HICP_FORMAT_MODEL;
  if (starts_with(buf, len, "ply\n") || starts_with(buf, len, "ply\r\n"))
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
                      hicp_format fmt, hicp_cloud **out)
{
  *out = NULL;
  const hicp_format asked = fmt;
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
  return hicp__cloud_from_raw(ctx, &raw, name, out);
}

int hicp_cloud_read(hicp_context *ctx, const char *path, hicp_format fmt, hicp_cloud **out)
{
  if (out == NULL || path == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_cloud_read: NULL argument");
  *out = NULL;
  if ((unsigned)fmt > HICP_FORMAT_MODEL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_cloud_read: unknown format %d", (int)fmt);
  unsigned char *buf;
  size_t len;
  int rc = hicp__read_file(ctx, path, &buf, &len);
  if (rc != HICP_OK)
    return rc;
  rc = hicp__cloud_parse(ctx, path, buf, len, fmt, out);
  free(buf);
  return rc;
}
