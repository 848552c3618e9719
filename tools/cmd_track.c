/* cmd_track.c: hicp track MODEL FRAME...: a sequence of frames (a tracking
 * pipeline, or a batch), one JSON line or text line per frame, in input
 * order. */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static void usage(FILE *f)
{
  fprintf(f,
          "usage: hicp track MODEL FRAME... [options]\n"
          "       hicp track MODEL --from-list FILE [options]\n"
          "\n"
          "Registers each FRAME to MODEL and prints one line per frame, in input order.\n"
          "By default each frame starts from the previous frame's pose (tracking);\n"
          "--independent registers the frames side by side instead (a batch).\n"
          "\n"
          "  --from-list FILE    read frame file names from FILE, one per line\n"
          "  --independent       frames are unrelated: spread them over all workers\n"
          "  --init FILE         initial transform of the first frame (of every frame\n"
          "                      with --independent)\n"
          "  --max-iter N, --tol T, --mse-abs E, --min-step T,DEG, --nn METHOD,\n"
          "  --max-dist D, --trim F, --filter-start K, --filter-sigma S,\n"
          "  --chunk N           as for 'hicp register'\n"
          "  --time-budget MS    stop each frame after MS milliseconds (0: no limit);\n"
          "                      the next frame starts from the pose it reached\n"
          "  --threads N         CPU threads, 1..4096 (default 0: OMP_NUM_THREADS,\n"
          "                      else one per core)\n"
          "  --backend B         auto, cpu, cuda, hybrid (default auto)\n"
          "  --devices LIST      CUDA devices, e.g. 0,1 or 0,0 (a device may repeat)\n"
          CLI_MEMORY_HELP
          "  --json              one JSON object per frame (JSON lines)\n"
          "A progress line with frames/s and the time left is shown on a terminal.\n");
}

/* Frees the n names of a list read by read_list. */
static void free_list(char **names, size_t n)
{
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
}

/* Appends a copy of name to *list (count names, room for *cap); 0 or -1. */
static int add_name(char ***list, size_t *count, size_t *cap, const char *name)
{
  if (*count == *cap) {
    const size_t ncap = *cap == 0 ? 64 : 2 * *cap;
    char **grown = realloc(*list, sizeof *grown * ncap);
    if (grown == NULL)
      return -1;
    *list = grown;
    *cap = ncap;
  }
  char *copy = strdup(name);
  if (copy == NULL)
    return -1;
  (*list)[(*count)++] = copy;
  return 0;
}

/* Whether a list line holds no name: blanks alone, or a '#' comment
 * after any blanks (stop 63's review: a line of spaces, or an indented
 * comment, was a frame's name, and the run failed on it). */
static int no_name(const char *line)
{
  line += strspn(line, " \t");
  return line[0] == '\0' || line[0] == '#';
}

/* Frame file names: the lines of a list file, but blank lines and '#'
 * comment lines (no_name).  Lines end as in the library's text readers:
 * "\n", "\r\n" or a lone "\r" (an old Mac's), which fgets would have taken
 * for one long line, and a UTF-8 byte order mark at the start (an editor's)
 * is skipped, as they skip it.  A line longer than a path can be is an
 * error, not two names, and a NUL byte marks a file that is no list.  A
 * name keeps any blanks around it: file names may have them. */
static int read_list(const char *path, char ***names, size_t *n)
{
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    cli_error("cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  size_t cap = 0, count = 0, lineno = 1, len = 0;
  char **list = NULL;
  char line[4096];
  int rc = 0;
  /* the mark's bytes read so far, where they turn out to be a name's (a
   * list may be a pipe: one byte can be put back, not three) */
  static const unsigned char bom[3] = {0xef, 0xbb, 0xbf};
  for (int c; len < 3; len++)
    if ((c = getc(f)) != bom[len]) {
      if (c != EOF)
        ungetc(c, f);
      break;
    }
  if (len == 3)
    len = 0;
  else
    memcpy(line, bom, len);
  for (;;) {
    const int c = getc(f);
    if (c == EOF || c == '\n' || c == '\r') {
      if (c == '\r') {
        const int next = getc(f);
        if (next != '\n' && next != EOF)
          ungetc(next, f);
      }
      line[len] = '\0';
      if (!no_name(line) && add_name(&list, &count, &cap, line) != 0) {
        cli_error("%s: out of memory after %zu frame names", path, count);
        rc = -1;
        break;
      }
      if (c == EOF)
        break;
      lineno++;
      len = 0;
    } else if (c == '\0') {
      cli_error("%s:%zu: a NUL byte: not a list of file names", path, lineno);
      rc = -1;
      break;
    } else if (len == sizeof line - 1) {
      cli_error("%s:%zu: line longer than %zu characters", path, lineno, sizeof line - 1);
      rc = -1;
      break;
    } else {
      line[len++] = (char)c;
    }
  }
  if (rc == 0 && ferror(f)) {
    cli_error("cannot read %s: %s", path, strerror(errno != 0 ? errno : EIO));
    rc = -1;
  }
  fclose(f);
  if (rc == 0 && count == 0) {
    cli_error("%s lists no frames", path);
    rc = -1;
  }
  if (rc != 0) {
    free_list(list, count);
    return -1;
  }
  *names = list;
  *n = count;
  return 0;
}

static void progress(size_t done, size_t total, double t0)
{
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double el = (double)ts.tv_sec + ts.tv_nsec * 1e-9 - t0;
  double rate = el > 0 ? (double)done / el : 0.0;
  double left = rate > 0 ? (double)(total - done) / rate : 0.0;
  int width = 30, fill = total ? (int)((double)width * done / total) : width;
  /* an error printed meanwhile clears the line first (cli_error) */
  cli_progress("[%.*s%*s] %zu/%zu frames, %.1f frames/s, ETA %.0f s   ", fill,
               "##############################", width - fill, "", done, total, rate, left);
  if (done == total)
    cli_progress_end();
}

int cmd_track(int argc, char **argv)
{
  static const struct option opts[] = {
      {"from-list", required_argument, NULL, 'L'}, {"independent", no_argument, NULL, 'I'},
      {"init", required_argument, NULL, 'i'},      {"max-iter", required_argument, NULL, 'm'},
      {"tol", required_argument, NULL, 't'},       {"nn", required_argument, NULL, 'n'},
      {"max-dist", required_argument, NULL, 'd'},  {"trim", required_argument, NULL, 'r'},
      {"filter-start", required_argument, NULL, 'f'}, {"filter-sigma", required_argument, NULL, 's'},
      {"threads", required_argument, NULL, 'T'},   {"backend", required_argument, NULL, 'B'},
      {"devices", required_argument, NULL, 'D'},   {"json", no_argument, NULL, 'j'},
      {"memory-limit", required_argument, NULL, 'M'}, {"time-budget", required_argument, NULL, 'b'},
      {"mse-abs", required_argument, NULL, 'E'},   {"min-step", required_argument, NULL, 'P'},
      {"chunk", required_argument, NULL, 'C'},     {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  hicp_batch_options bo;
  hicp_batch_options_init(&bo);
  bo.track = 1;
  cli_common common;
  cli_common_init(&common);
  const char *list = NULL, *init_path = NULL;
  int as_json = 0, sigma_given = 0, c;
  optind = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    int bad = 0;
    switch (c) {
    case 'L': list = cli_input(optarg); break;
    case 'I': bo.track = 0; break;
    case 'i': init_path = cli_input(optarg); break;
    case 'm': bad = cli_int("--max-iter", optarg, 0, 1000000, &o.max_iter); break;
    case 't': bad = cli_double("--tol", optarg, 0, HUGE_VAL, &o.tol); break;
    case 'E': bad = cli_double("--mse-abs", optarg, 0, HUGE_VAL, &o.mse_abs); break;
    case 'P': bad = cli_min_step(optarg, &o); break;
    case 'C': bad = cli_chunk(optarg, &o); break;
    case 'n':
      if (hicp_nn_method_from_name(optarg, &o.nn) != HICP_OK) {
        cli_error("--nn: expected brute, kdtree, zero, kdann, pnn or pnn-opt, got '%s'", optarg);
        bad = 1;
      }
      break;
    case 'd': bad = cli_double("--max-dist", optarg, 0, HUGE_VAL, &o.max_dist); break;
    case 'b': bad = cli_double("--time-budget", optarg, 0, HUGE_VAL, &o.time_budget_ms); break;
    case 'r': bad = cli_double("--trim", optarg, 1e-9, 1.0, &o.trim); break;
    case 'f': bad = cli_int("--filter-start", optarg, 0, 1000000, &o.filter_start); break;
    case 's':
      bad = cli_double("--filter-sigma", optarg, 1e-9, 1e9, &o.filter_sigma);
      sigma_given = 1;
      break;
    case 'T': bad = cli_common_option(&common, "threads", optarg) < 0; break;
    case 'B': bad = cli_common_option(&common, "backend", optarg) < 0; break;
    case 'D': bad = cli_common_option(&common, "devices", optarg) < 0; break;
    case 'M': bad = cli_common_option(&common, "memory-limit", optarg) < 0; break;
    case 'j': as_json = 1; break;
    case 'h': usage(stdout); return CLI_OK;
    default: return cli_bad_option("track", c, argc, argv, opts);
    }
    if (bad)
      return CLI_USAGE;
  }
  if (cli_filter_sigma_alone(sigma_given, &o) || cli_common_done(&common) != 0)
    return CLI_USAGE;
  if (list != NULL && argc - optind > 1) {
    cli_error("track takes its frames from --from-list %s or from the command line ('%s' ...), "
              "not both",
              list, argv[optind + 1]);
    return CLI_USAGE;
  }
  if (argc - optind < 1 || (list == NULL && argc - optind < 2)) {
    cli_error("track needs MODEL and FRAME files (or --from-list FILE)");
    return CLI_USAGE;
  }
  const char *model_path = cli_input(argv[optind]);
  for (int i = optind + 1; list == NULL && i < argc; i++) /* never written through */
    argv[i] = (char *)cli_input(argv[i]);
  const char *const options_in[] = {model_path, init_path, list};
  const int frames_in =
      list == NULL ? cli_stdin_inputs((const char *const *)argv + optind + 1, argc - optind - 1) : 0;
  if (cli_check_stdin_inputs(options_in, 3, frames_in) != 0)
    return CLI_USAGE;
  hicp_transform init;
  if (init_path != NULL && cli_read_transform(init_path, &init) != 0)
    return CLI_FAIL;
  char **names = NULL;
  size_t n = 0, nnames = 0; /* n frames to report; nnames read from a list */
  int own_names = 0;
  if (list != NULL) {
    if (read_list(list, &names, &nnames) != 0)
      return CLI_FAIL;
    n = nnames;
    own_names = 1;
  } else {
    names = argv + optind + 1;
    n = (size_t)(argc - optind - 1);
  }
  hicp_context *ctx = cli_context(&common);
  if (ctx == NULL) {
    if (own_names)
      free_list(names, nnames);
    return CLI_FAIL;
  }
  int status = CLI_FAIL, tty = isatty(STDERR_FILENO);
  /* standard output on the terminal too: each frame's line replaces the
   * progress line, which is drawn again below it */
  const int stdout_tty = tty && isatty(STDOUT_FILENO);
  hicp_model *model = NULL;
  hicp_stream *s = NULL;
  if (hicp_model_open(ctx, model_path, NULL, &model) != HICP_OK) {
    cli_fail(ctx, model_path);
    goto done;
  }
  if (hicp_stream_create(ctx, model, &o, &bo, &s) != HICP_OK) {
    cli_fail(ctx, "track");
    goto done;
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double t0 = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
  /* Read ahead: keep a few frames queued so reading overlaps registering. */
  size_t submitted = 0, received = 0, failed = 0;
  const size_t ahead = 8;
  status = CLI_OK;
  hicp_cloud *waiting = NULL; /* read, and refused while the stream was full */
  while (received < n) {
    while (submitted < n && submitted - received < ahead) {
      hicp_cloud *cloud = waiting;
      waiting = NULL;
      if (cloud == NULL &&
          hicp_cloud_read(ctx, names[submitted], HICP_FORMAT_AUTO, &cloud) != HICP_OK) {
        const char *name = names[submitted];
        const size_t len = strlen(name);
        if (len > 0 && (name[0] == ' ' || name[0] == '\t' || name[len - 1] == ' ' ||
                        name[len - 1] == '\t'))
          cli_error("frame '%s', blanks and all: %s", name, hicp_context_error(ctx));
        else
          cli_fail(ctx, name);
        status = CLI_FAIL;
        n = submitted; /* stop reading; report what was queued */
        break;
      }
      /* the cloud's origin goes with it: frames far from the origin */
      int rc = hicp_stream_submit_cloud(
          s, cloud, init_path != NULL && (submitted == 0 || !bo.track) ? &init : NULL, NULL);
      /* the frames queued ahead fill the memory limit: this one waits
       * for the oldest result; alone, it is too large */
      if (rc == HICP_ELIMIT && submitted > received) {
        waiting = cloud;
        break;
      }
      hicp_cloud_destroy(cloud);
      if (rc != HICP_OK) {
        cli_fail(ctx, names[submitted]);
        status = CLI_FAIL;
        n = submitted;
        break;
      }
      submitted++;
    }
    if (received >= n)
      break;
    hicp_result r;
    hicp_result_init(&r);
    if (hicp_stream_receive(s, &r, 1) != HICP_OK) {
      /* only misuse fails here (a frame is outstanding, r is prepared), and
       * receiving sets no message on the context */
      cli_error("track: cannot receive frame %zu's result", received);
      status = CLI_FAIL;
      break;
    }
    const char *name = names[received];
    received++;
    if (stdout_tty)
      cli_progress_clear();
    if (r.error != HICP_OK) {
      failed++;
      if (as_json) {
        json j;
        json_begin(&j, stdout);
        json_int(&j, "frame", (long long)r.frame);
        json_str(&j, "file", name);
        json_str(&j, "error", r.note);
        json_end(&j);
      } else {
        printf("%llu %s: failed: %s\n", (unsigned long long)r.frame, name, r.note);
      }
    } else if (as_json) {
      json j;
      json_begin(&j, stdout);
      json_int(&j, "frame", (long long)r.frame);
      json_str(&j, "file", name);
      json_transform(&j, "transform", &r.transform);
      json_num(&j, "rmse", r.rmse);
      json_int(&j, "iterations", r.iterations);
      json_bool(&j, "converged", r.converged);
      json_str(&j, "stop", hicp_stop_name(r.stop));
      /* the rotation carried over, not measured (as register says it) */
      json_bool(&j, "degenerate", r.degenerate);
      json_num(&j, "time_ms", r.time_ms);
      json_str(&j, "backend", hicp_backend_name(r.backend));
      json_str(&j, "note", r.note); /* as register's */
      json_int(&j, "threads", r.threads);
      json_str(&j, "nn", hicp_nn_method_name(r.nn));
      json_int(&j, "scan_points", (long long)r.points);
      json_end(&j);
    } else {
      double deg, axis[3];
      cli_rotation_angle_axis(&r.transform, &deg, axis);
      printf("%llu %s: rotation %.4f deg, translation %.9g %.9g %.9g, rmse %.6g, %d it%s%s%s%s, "
             "%.2f ms\n",
             (unsigned long long)r.frame, name, deg, r.transform.m[3], r.transform.m[7],
             r.transform.m[11], r.rmse, r.iterations, r.converged ? "" : " (not converged: ",
             r.converged ? "" : hicp_stop_name(r.stop), r.converged ? "" : ")",
             r.degenerate ? ", rotation not fully determined by the pairs" : "", r.time_ms);
      if (r.note[0] != '\0')
        printf("%llu %s: note: %s\n", (unsigned long long)r.frame, name, r.note);
    }
    /* frames nobody can read are not worth registering: main says why */
    if (cli_flush_stdout() != 0)
      break;
    if (tty)
      progress(received, n, t0);
  }
  hicp_cloud_destroy(waiting);
  if (failed > 0 && status == CLI_OK) {
    cli_error("%zu of %zu frames failed", failed, received);
    status = CLI_FAIL;
  }
done:
  cli_progress_end(); /* a line left unfinished (an error ended the loop) */
  hicp_stream_destroy(s);
  hicp_model_destroy(model);
  hicp_context_destroy(ctx);
  if (own_names)
    free_list(names, nnames);
  return status;
}
