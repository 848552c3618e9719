/* cgroup.c: see cgroup.h.
 *
 * A process's limit in a hierarchy is the least of those of its cgroup and
 * every ancestor, so each is read from the process's own directory up to
 * the mount point.  Which directory: /proc/self/cgroup names the process's
 * cgroup within each hierarchy (one line per v1 hierarchy, "0::PATH" for
 * v2), and /proc/self/mountinfo where each hierarchy is mounted and which
 * of its directories the mount shows (a container sees its own cgroup as
 * the mount's root).  A cgroup outside what the mount shows (another
 * namespace's path) is read at the mount point alone.  A file that is
 * absent or unreadable sets no limit; one that cannot be read for the
 * moment (no memory, no descriptor free, interrupted) is an error the
 * caller reports, not kept (hicp__cgroup_process). */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup.h"

const hicp__cg_files hicp__cgroup_system = {"/proc/self/mountinfo", "/proc/self/cgroup", ""};

enum { PATH_LEN = 4096 };

/* Whether the comma-separated list holds tok. */
static int has_token(const char *list, const char *tok)
{
  const size_t n = strlen(tok);
  for (const char *p = list; *p != '\0';) {
    const char *end = strchr(p, ',');
    const size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, tok, n) == 0)
      return 1;
    if (end == NULL)
      break;
    p = end + 1;
  }
  return 0;
}

static void chomp(char *s)
{
  s[strcspn(s, "\n")] = '\0';
}

/* mountinfo writes space, tab, newline and backslash in paths as \ooo. */
static void unescape(char *s)
{
  char *d = s;
  while (*s != '\0') {
    if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
        s[3] >= '0' && s[3] <= '7') {
      *d++ = (char)(((s[1] - '0') << 6) | ((s[2] - '0') << 3) | (s[3] - '0'));
      s += 4;
    } else {
      *d++ = *s++;
    }
  }
  *d = '\0';
}

/* The first error that kept a file from being read for the moment, on
 * this thread.  A file that is absent, shut to this user or unreadable is
 * a limit that is not set; one that could not be opened or read for want
 * of memory or of descriptors says nothing, and taking it for "no limit"
 * dropped a container's memory limit and CPU quota for the process's life
 * (stop 67's review: a build the limit refuses then ran). */
static _Thread_local int read_err;

static void note_error(int e)
{
  if (read_err == 0 && (e == ENOMEM || e == ENOBUFS || e == EMFILE || e == ENFILE || e == EINTR ||
                        e == EAGAIN))
    read_err = e;
}

/* Calls fn on each line of file, its line end removed, until fn returns
 * 1; returns that 1, or 0. */
static int each_line(const char *file, int (*fn)(char *line, void *arg), void *arg)
{
  FILE *f = fopen(file, "re");
  if (f == NULL) {
    note_error(errno);
    return 0;
  }
  char *line = NULL;
  size_t cap = 0;
  int found = 0;
  for (;;) {
    errno = 0;
    if (found || getline(&line, &cap, f) <= 0)
      break;
    chomp(line);
    found = fn(line, arg);
  }
  if (!found)
    note_error(errno); /* getline's ENOMEM; 0 at the file's end */
  free(line);
  fclose(f);
  return found;
}

typedef struct wanted {
  const char *controller; /* a v1 controller, or NULL for v2 */
  char *path, *root, *mnt; /* [PATH_LEN] each */
  int outside;             /* root and mnt hold a mount that does not show path */
} wanted;

/* Whether the directory `root` of a hierarchy holds the cgroup `path`. */
static int holds(const char *root, const char *path)
{
  const size_t rlen = strcmp(root, "/") == 0 ? 0 : strlen(root);
  return strncmp(path, root, rlen) == 0 && (path[rlen] == '/' || path[rlen] == '\0');
}

/* A line of /proc/self/cgroup, "ID:CONTROLLERS:PATH": the process's
 * cgroup in the v1 hierarchy holding the controller, or in v2's ("0::"). */
static int member_line(char *line, void *arg)
{
  wanted *w = arg;
  char *c1 = strchr(line, ':');
  char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
  if (c2 == NULL || strlen(c2 + 1) >= PATH_LEN)
    return 0;
  *c1 = *c2 = '\0';
  if (w->controller != NULL ? !has_token(c1 + 1, w->controller)
                            : strcmp(line, "0") != 0 || c1[1] != '\0')
    return 0;
  strcpy(w->path, c2 + 1);
  return 1;
}

/* A line of /proc/self/mountinfo, "ID PARENT MAJ:MIN ROOT MOUNT-POINT
 * OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER": the hierarchy's mount, the
 * directory of the hierarchy it shows and where it is mounted.  The first
 * mount that shows the process's cgroup (w->path) ends the search; the
 * first that does not is kept (w->outside) in case none does: a hierarchy
 * may be mounted more than once, a subtree of it elsewhere listed first. */
static int mount_line(char *line, void *arg)
{
  wanted *w = arg;
  char *field[6], *save = NULL, *tok;
  int n = 0;
  for (tok = strtok_r(line, " ", &save); tok != NULL && n < 6; tok = strtok_r(NULL, " ", &save))
    field[n++] = tok;
  while (tok != NULL && strcmp(tok, "-") != 0)
    tok = strtok_r(NULL, " ", &save);
  char *type = tok != NULL ? strtok_r(NULL, " ", &save) : NULL;
  char *source = type != NULL ? strtok_r(NULL, " ", &save) : NULL;
  char *super = source != NULL ? strtok_r(NULL, " ", &save) : NULL;
  if (n < 6 || super == NULL || strlen(field[3]) >= PATH_LEN || strlen(field[4]) >= PATH_LEN)
    return 0;
  if (w->controller != NULL ? strcmp(type, "cgroup") != 0 || !has_token(super, w->controller)
                            : strcmp(type, "cgroup2") != 0)
    return 0;
  char root[PATH_LEN], mnt[PATH_LEN];
  strcpy(root, field[3]);
  strcpy(mnt, field[4]);
  unescape(root);
  unescape(mnt);
  const int shows = holds(root, w->path);
  if (shows || !w->outside) {
    strcpy(w->root, root);
    strcpy(w->mnt, mnt);
    w->outside = !shows;
  }
  return shows;
}

/* The process's cgroup in the hierarchy w->controller names (NULL: v2) and
 * that hierarchy's mount: 1 if both are found. */
static int find_hierarchy(const hicp__cg_files *f, wanted *w)
{
  w->outside = 0;
  if (!each_line(f->cgroup, member_line, w))
    return 0;
  return each_line(f->mountinfo, mount_line, w) || w->outside;
}

/* The first line of dir/name into buf[size]; 1 if read. */
static int read_line(const char *dir, const char *name, char *buf, size_t size)
{
  char path[2 * PATH_LEN + 64];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "re");
  if (f == NULL) {
    note_error(errno);
    return 0;
  }
  errno = 0;
  const int ok = fgets(buf, (int)size, f) != NULL;
  if (!ok)
    note_error(errno);
  fclose(f);
  if (ok)
    chomp(buf);
  return ok;
}

/* A whole unsigned decimal number, into *v; 1 if it is one. */
static int parse_u64(const char *s, uint64_t *v)
{
  if (*s < '0' || *s > '9')
    return 0;
  char *end;
  errno = 0;
  const unsigned long long x = strtoull(s, &end, 10);
  if (errno != 0 || (*end != '\0' && *end != ' '))
    return 0;
  *v = (uint64_t)x;
  return 1;
}

/* A level's limit: bytes of memory, or CPUs; 0 for none. */
typedef uint64_t (*level_fn)(const char *dir, int v2);

static uint64_t memory_level(const char *dir, int v2)
{
  char buf[64];
  uint64_t v;
  if (!read_line(dir, v2 ? "memory.max" : "memory.limit_in_bytes", buf, sizeof buf) ||
      !parse_u64(buf, &v))
    return 0; /* "max", or no file: the root has none */
  /* v1 writes "no limit" as the largest page multiple below 2^63 */
  return v >= (UINT64_C(1) << 62) ? 0 : v;
}

static uint64_t cpu_level(const char *dir, int v2)
{
  char buf[64], pbuf[64];
  uint64_t quota, period;
  if (v2) {
    if (!read_line(dir, "cpu.max", buf, sizeof buf) || !parse_u64(buf, &quota))
      return 0; /* "max PERIOD" */
    const char *sp = strchr(buf, ' ');
    if (sp == NULL || !parse_u64(sp + 1, &period))
      return 0;
  } else if (!read_line(dir, "cpu.cfs_quota_us", buf, sizeof buf) || !parse_u64(buf, &quota) ||
             !read_line(dir, "cpu.cfs_period_us", pbuf, sizeof pbuf) ||
             !parse_u64(pbuf, &period)) {
    return 0; /* "-1": none */
  }
  if (quota == 0 || period == 0)
    return 0;
  return quota / period + (quota % period != 0);
}

/* The least nonzero limit from the process's cgroup of `controller` up to
 * its hierarchy's mount point; v1 where a v1 hierarchy holds the
 * controller, else v2. */
static uint64_t least_limit(const hicp__cg_files *f, const char *controller, level_fn level)
{
  char path[PATH_LEN], root[PATH_LEN], mnt[PATH_LEN];
  wanted w = {controller, path, root, mnt, 0};
  int v2 = 0;
  if (!find_hierarchy(f, &w)) {
    v2 = 1;
    w.controller = NULL;
    if (!find_hierarchy(f, &w))
      return 0;
  }
  const size_t rlen = strcmp(root, "/") == 0 ? 0 : strlen(root);
  const char *rel = holds(root, path) ? path + rlen : "";
  char dir[3 * PATH_LEN];
  const int base = snprintf(dir, sizeof dir, "%s%s", f->prefix, mnt);
  if (base < 0 || (size_t)base >= sizeof dir)
    return 0;
  snprintf(dir + base, sizeof dir - (size_t)base, "%s", rel);
  uint64_t least = 0;
  for (;;) {
    size_t len = strlen(dir);
    while (len > (size_t)base && dir[len - 1] == '/')
      dir[--len] = '\0';
    const uint64_t v = level(dir, v2);
    if (v != 0 && (least == 0 || v < least))
      least = v;
    if (len <= (size_t)base)
      break;
    char *slash = strrchr(dir + base, '/');
    if (slash == NULL)
      break;
    *slash = '\0';
  }
  return least;
}

uint64_t hicp__cgroup_memory(const hicp__cg_files *f)
{
  return least_limit(f, "memory", memory_level);
}

int hicp__cgroup_cpus(const hicp__cg_files *f)
{
  const uint64_t n = least_limit(f, "cpu", cpu_level);
  return n > 65536 ? 65536 : (int)n;
}

static struct {
  pthread_mutex_t mu;
  int read, cpus;
  uint64_t memory;
} process = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};

static void forget_in_child(void)
{
  process.read = 0; /* the child's one thread holds no lock */
  pthread_mutex_init(&process.mu, NULL);
}

static pthread_once_t watch_once = PTHREAD_ONCE_INIT;

static void watch_forks(void)
{
  (void)pthread_atfork(NULL, NULL, forget_in_child);
}

int hicp__cgroup_process(int *cpus, uint64_t *memory)
{
  pthread_once(&watch_once, watch_forks);
  pthread_mutex_lock(&process.mu);
  int err = 0;
  if (!process.read) {
    read_err = 0;
    const int c = hicp__cgroup_cpus(&hicp__cgroup_system);
    const uint64_t m = hicp__cgroup_memory(&hicp__cgroup_system);
    err = read_err;
    if (err == 0) { /* kept only when read: a failed read is tried again */
      process.cpus = c;
      process.memory = m;
      process.read = 1;
    }
  }
  *cpus = err == 0 ? process.cpus : 0;
  *memory = err == 0 ? process.memory : 0;
  pthread_mutex_unlock(&process.mu);
  return err;
}
