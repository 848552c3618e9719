/* replay.c: runs a fuzz harness over files without libFuzzer, so that
 * `make check` replays the committed corpus and every regression input with
 * the ordinary compiler (and under the sanitizers in that configuration).
 *     replay FILE|DIR...     prints TAP, one line per file */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count;

static void run_file(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    printf("not ok %d - %s (cannot open)\n", ++count, path);
    return;
  }
  size_t cap = 1 << 16, len = 0;
  unsigned char *buf = malloc(cap);
  size_t got;
  while (buf != NULL && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) {
      unsigned char *nb = realloc(buf, cap *= 2);
      if (nb == NULL) {
        free(buf);
        buf = NULL;
      }
      buf = nb;
    }
  }
  fclose(f);
  if (buf == NULL) {
    printf("not ok %d - %s (out of memory)\n", ++count, path);
    return;
  }
  LLVMFuzzerTestOneInput(buf, len); /* a failure aborts the whole run */
  free(buf);
  printf("ok %d - %s\n", ++count, path);
  fflush(stdout);
}

static int by_name(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_path(const char *path)
{
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) {
    run_file(path);
    return;
  }
  DIR *d = opendir(path);
  if (d == NULL)
    return;
  char **names = NULL;
  size_t n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.')
      continue;
    char **nn = realloc(names, sizeof *names * (n + 1));
    if (nn == NULL)
      break;
    names = nn;
    size_t l = strlen(path) + strlen(e->d_name) + 2;
    names[n] = malloc(l);
    if (names[n] == NULL)
      break;
    snprintf(names[n], l, "%s/%s", path, e->d_name);
    n++;
  }
  closedir(d);
  qsort(names, n, sizeof *names, by_name); /* the same order every run */
  for (size_t i = 0; i < n; i++) {
    run_file(names[i]);
    free(names[i]);
  }
  free(names);
}

int main(int argc, char **argv)
{
  for (int i = 1; i < argc; i++)
    run_path(argv[i]);
  printf("1..%d\n", count);
  return 0;
}
