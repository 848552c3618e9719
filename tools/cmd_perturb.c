/* cmd_perturb.c: hicp perturb INPUT -o OUTPUT: a test scan with a known pose.
 *
 * Takes the model's points (or fresh samples of its surface), keeps the part
 * a distant camera would see, moves it by a known rigid motion (a rotation
 * about the bounding-box centre, then a translation), adds Gaussian noise and
 * gross outliers, and writes the result.  The transform that registers the
 * result back onto the input (scan -> model) is the "truth". */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "synth.h"

static void usage(FILE *f)
{
  fprintf(f,
          "usage: hicp perturb INPUT -o OUTPUT [options]\n"
          "\n"
          "Makes a scan of INPUT with a known pose and prints the transform that\n"
          "registers it back (scan -> model).\n"
          "\n"
          "  --rotate R,P,Y        roll, pitch, yaw in degrees, about the box centre\n"
          "  --translate X,Y,Z     translation\n"
          "  --translate-rel X,Y,Z translation as fractions of the bounding-box diagonal\n"
          "  --view X,Y,Z          keep the part seen from a distant camera in this\n"
          "                        direction (model frame, object -> camera)\n"
          "  --samples N           resample N points on the mesh surface (needs faces)\n"
          "                        instead of using the vertices; 1..100000000\n"
          "  --noise S             Gaussian noise, sigma = S x bounding-box diagonal; 0..1\n"
          "  --outliers F          add F x points gross outliers in the enlarged box; 0..10\n"
          "  --keep N              keep at most N of the visible points (a random subset;\n"
          "                        1..100000000)\n"
          "  --seed N              random seed (default 1)\n"
          "  --truth FILE          also write the truth transform to FILE\n"
          "  --ascii               write ASCII PLY\n"
          "  --json                print the summary as JSON\n"
          "  --memory-limit SIZE   most memory one step may take, in bytes or with K, M,\n"
          "                        G or T (x 2^10, 2^20, 2^30, 2^40), e.g. 512M, 8G\n"
          "                        (default: 3/4 of physical memory)\n");
}

int cmd_perturb(int argc, char **argv)
{
  static const struct option opts[] = {
      {"output", required_argument, NULL, 'o'},   {"rotate", required_argument, NULL, 'r'},
      {"translate", required_argument, NULL, 't'}, {"translate-rel", required_argument, NULL, 'T'},
      {"view", required_argument, NULL, 'v'},     {"samples", required_argument, NULL, 's'},
      {"noise", required_argument, NULL, 'n'},    {"outliers", required_argument, NULL, 'O'},
      {"seed", required_argument, NULL, 'S'},     {"truth", required_argument, NULL, 'u'},
      {"ascii", no_argument, NULL, 'a'},          {"json", no_argument, NULL, 'j'},
      {"keep", required_argument, NULL, 'K'},       {"memory-limit", required_argument, NULL, 'M'},
      {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
  const char *out = NULL, *truth_path = NULL;
  double rot[3] = {0, 0, 0}, tr[3] = {0, 0, 0}, trel[3] = {0, 0, 0}, view[3] = {0, 0, 0};
  double noise = 0.0, outliers = 0.0;
  int samples = 0, have_view = 0, ascii = 0, as_json = 0, keep_n = 0, c;
  unsigned long long seed = 1;
  cli_common common;
  cli_common_init(&common);
  optind = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":ho:", opts, NULL)) != -1) {
    int bad = 0;
    switch (c) {
    case 'o':
      out = optarg;
      bad = cli_output_path("-o/--output", optarg);
      break;
    case 'r':
      bad = cli_vec3("--rotate", optarg, rot);
      break;
    case 't':
      bad = cli_vec3("--translate", optarg, tr);
      break;
    case 'T':
      bad = cli_vec3("--translate-rel", optarg, trel);
      break;
    case 'v':
      bad = cli_vec3("--view", optarg, view);
      have_view = 1;
      if (!bad && view[0] == 0 && view[1] == 0 && view[2] == 0) {
        cli_error("--view: the direction must not be zero");
        bad = 1;
      }
      break;
    case 's':
      bad = cli_int("--samples", optarg, 1, 100000000, &samples);
      break;
    case 'n':
      bad = cli_double("--noise", optarg, 0, 1, &noise);
      break;
    case 'O':
      bad = cli_double("--outliers", optarg, 0, 10, &outliers);
      break;
    case 'S':
      bad = cli_u64("--seed", optarg, &seed);
      break;
    case 'u':
      truth_path = optarg;
      bad = cli_output_path("--truth", optarg);
      break;
    case 'a':
      ascii = 1;
      break;
    case 'K':
      bad = cli_int("--keep", optarg, 1, 100000000, &keep_n);
      break;
    case 'j':
      as_json = 1;
      break;
    case 'M':
      bad = cli_common_option(&common, "memory-limit", optarg) < 0;
      break;
    case 'h':
      usage(stdout);
      return CLI_OK;
    default:
      return cli_bad_option("perturb", c, argc, argv, opts);
    }
    if (bad)
      return CLI_USAGE;
  }
  if (argc - optind != 1 || out == NULL) {
    cli_error("perturb needs INPUT and -o OUTPUT (see 'hicp perturb --help')");
    return CLI_USAGE;
  }
  const char *in = cli_input(argv[optind]);
  const cli_file files[] = {{"INPUT", in, 0}, {"-o", out, 1}, {"--truth", truth_path, 1}};
  if (cli_check_outputs(files, 3) != 0 || cli_check_output_name("-o", out, "PLY") != 0)
    return CLI_USAGE;
  /* outs[0] the truth, outs[1] the scan: opened before the work, put in
   * place only once all of it has succeeded */
  cli_output outs[2];
  if (cli_output_open(&outs[0], truth_path) != 0)
    return CLI_FAIL;
  if (cli_output_open(&outs[1], out) != 0) {
    cli_output_abort(&outs[0]);
    return CLI_FAIL;
  }
  hicp_context *ctx = cli_context(&common);
  if (ctx == NULL) {
    cli_output_abort(&outs[0]);
    cli_output_abort(&outs[1]);
    return CLI_FAIL;
  }
  int status = CLI_FAIL;
  hicp_cloud *src = NULL, *dst = NULL;
  double *p = NULL;
  unsigned char *keep = NULL;
  double *f = NULL;
  if (hicp_cloud_read(ctx, in, HICP_FORMAT_AUTO, &src) != HICP_OK) {
    cli_fail(ctx, in);
    goto done;
  }
  size_t nv = hicp_cloud_size(src);
  const float *xyz = hicp_cloud_xyz(src);
  double origin[3];
  hicp_cloud_origin(src, origin);
  synth_rng rng;
  synth_seed(&rng, seed);
  size_t n = samples > 0 ? (size_t)samples : nv;
  /* What this command holds at once, at most, before it allocates any of
   * it: the points in double, the view's and the subset's marks, the moved
   * points with their outliers, and the cloud the library makes of them
   * (36 bytes a point, which it checks itself). */
  const double nall = (double)n + floor(outliers * (double)n + 0.5) + 1.0;
  if (cli_check_memory(&common,
                       24.0 * (double)n + (have_view ? (double)n : 0.0) +
                           (keep_n > 0 ? 17.0 * (double)n : 0.0) + 24.0 * nall + 36.0 * nall,
                       "perturb") != 0)
    goto done;
  p = malloc(sizeof(double) * 3 * n);
  if (p == NULL) {
    cli_error("out of memory for the scan's %zu points", n);
    goto done;
  }
  if (samples > 0) {
    const int sampled = synth_sample_mesh(xyz, nv, origin, hicp_cloud_triangles(src),
                                         hicp_cloud_triangle_count(src), n, &rng, p);
    if (sampled != 0) {
      if (sampled == -2)
        cli_error("out of memory for sampling %zu points on %s", n, in);
      else
        cli_error("%s: --samples needs a mesh with faces of positive area", in);
      goto done;
    }
  } else {
    for (size_t i = 0; i < n; i++)
      for (int d = 0; d < 3; d++)
        p[3 * i + d] = origin[d] + xyz[3 * i + d];
  }
  if (have_view) {
    keep = malloc(n);
    if (keep == NULL) {
      cli_error("out of memory for the view's mask of %zu points", n);
      goto done;
    }
    if (synth_visible(p, n, view, keep) == SIZE_MAX) {
      cli_error("out of memory for the view of %zu points", n);
      goto done;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
      if (keep[i])
        memmove(&p[3 * k++], &p[3 * i], 3 * sizeof(double));
    n = k;
  }
  if (keep_n > 0 && (size_t)keep_n < n) {
    /* a random subset, in the original order (partial Fisher-Yates on
     * indices, then sorted back) */
    size_t *idx = malloc(sizeof *idx * n);
    if (idx == NULL) {
      cli_error("out of memory for choosing %d of %zu points", keep_n, n);
      goto done;
    }
    for (size_t i = 0; i < n; i++)
      idx[i] = i;
    for (size_t i = 0; i < (size_t)keep_n; i++) {
      size_t j = i + (size_t)(synth_next(&rng) % (n - i));
      size_t t = idx[i];
      idx[i] = idx[j];
      idx[j] = t;
    }
    unsigned char *take = calloc(n, 1);
    if (take == NULL) {
      free(idx);
      cli_error("out of memory for choosing %d of %zu points", keep_n, n);
      goto done;
    }
    for (size_t i = 0; i < (size_t)keep_n; i++)
      take[idx[i]] = 1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
      if (take[i])
        memmove(&p[3 * k++], &p[3 * i], 3 * sizeof(double));
    n = k;
    free(take);
    free(idx);
  }
  /* Box centre and diagonal of the model. */
  double lo[3] = {HUGE_VAL, HUGE_VAL, HUGE_VAL}, hi[3] = {-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
  for (size_t i = 0; i < nv; i++)
    for (int d = 0; d < 3; d++) {
      lo[d] = fmin(lo[d], origin[d] + xyz[3 * i + d]);
      hi[d] = fmax(hi[d], origin[d] + xyz[3 * i + d]);
    }
  double centre[3], diag = 0.0;
  for (int d = 0; d < 3; d++) {
    centre[d] = 0.5 * (lo[d] + hi[d]);
    diag += (hi[d] - lo[d]) * (hi[d] - lo[d]);
  }
  diag = sqrt(diag);
  double R[9], t[3];
  synth_rotation(rot[0], rot[1], rot[2], R);
  for (int d = 0; d < 3; d++)
    t[d] = tr[d] + trel[d] * diag;
  size_t nout = (size_t)floor(outliers * (double)n + 0.5);
  if (diag == 0.0 && (noise > 0.0 || nout > 0 || trel[0] != 0.0 || trel[1] != 0.0 ||
                      trel[2] != 0.0)) {
    /* they scale with the diagonal: outliers would be copies of the point,
     * the noise none, and the output would not be what was asked for
     * (stop 69's review: exit 0, "6 points (5 outliers)", all one point) */
    cli_error("%s: all its points are one point, so --noise, --outliers and --translate-rel "
              "(sized by its bounding-box diagonal, 0) would change nothing",
              in);
    status = CLI_USAGE;
    goto done;
  }
  f = malloc(sizeof(double) * 3 * (n + nout + 1));
  if (f == NULL) {
    cli_error("out of memory for the scan's %zu points and %zu outliers", n, nout);
    goto done;
  }
  double mlo[3] = {HUGE_VAL, HUGE_VAL, HUGE_VAL}, mhi[3] = {-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
  for (size_t i = 0; i < n; i++) {
    double q[3];
    for (int d = 0; d < 3; d++)
      q[d] = p[3 * i + d] - centre[d];
    for (int d = 0; d < 3; d++) {
      double x = R[3 * d] * q[0] + R[3 * d + 1] * q[1] + R[3 * d + 2] * q[2] + centre[d] + t[d];
      if (noise > 0.0)
        x += noise * diag * synth_normal(&rng);
      f[3 * i + d] = x;
      mlo[d] = fmin(mlo[d], x);
      mhi[d] = fmax(mhi[d], x);
    }
  }
  for (size_t i = n; i < n + nout; i++)
    for (int d = 0; d < 3; d++) {
      double span = mhi[d] - mlo[d];
      f[3 * i + d] = mlo[d] - 0.25 * span + 1.5 * span * synth_uniform(&rng);
    }
  if (n + nout == 0) {
    cli_error("%s: no points left to write", in);
    goto done;
  }
  /* Truth: the inverse motion, x = R^T (p - centre - t) + centre. */
  hicp_transform truth;
  hicp_transform_identity(&truth);
  for (int i = 0; i < 3; i++) {
    double s = 0.0;
    for (int j = 0; j < 3; j++) {
      truth.m[4 * i + j] = R[3 * j + i];
      s += R[3 * j + i] * (centre[j] + t[j]);
    }
    truth.m[4 * i + 3] = centre[i] - s;
  }
  /* in double: a scan far from the origin keeps its detail (the cloud
   * gets an origin, and the file doubles) */
  const int made = hicp_cloud_from_xyz_double(ctx, f, n + nout, 0, &dst);
  if (made == HICP_ERANGE || made == HICP_ENONFINITE) {
    /* the input was finite and in range: the command line moved it out,
     * not the output file's fault (stop 55's review: "c.ply: ...", exit 1) */
    cli_error("the moved points: %s (--translate, --translate-rel%s)", hicp_context_error(ctx),
              noise > 0.0 ? ", --noise" : "");
    status = CLI_USAGE;
    goto done;
  }
  if (made != HICP_OK) {
    cli_fail(ctx, out);
    goto done;
  }
  /* A truth whose translation is beyond the coordinate limit could not be
   * read back (--truth, --init refuse it): a cloud far from the origin
   * turned about its centre moves the origin up to twice as far.  Refused
   * before anything is written (stop 60's review: written, then unusable). */
  for (int i = 0; i < 3; i++)
    if (fabs(truth.m[4 * i + 3]) > HICP_COORD_MAX) {
      char far[32];
      cli_error("the truth's translation %s is beyond the coordinate limit (%g in magnitude), "
                "which --truth and --init could not read back (--rotate, --translate about a "
                "cloud this far from the origin)",
                cli_beyond(far, sizeof far, truth.m[4 * i + 3], HICP_COORD_MAX, 6),
                HICP_COORD_MAX);
      status = CLI_USAGE;
      goto done;
    }
  /* Both go in full to temporary files first, renamed only once the report
   * is out too: a failure of either replaces neither.  (Only the final
   * rename could still fail after the other's, and renaming within one
   * directory hardly does.) */
  if (cli_write_transform(&outs[0], &truth) != 0)
    goto done;
  if (hicp_cloud_write_ply(ctx, dst, NULL, cli_output_name(&outs[1]),
                           ascii ? HICP_PLY_ASCII : HICP_PLY_BINARY) != HICP_OK) {
    cli_output_fail(ctx, &outs[1]);
    goto done;
  }
  if (as_json) {
    json j;
    json_begin(&j, stdout);
    json_str(&j, "output", out);
    json_int(&j, "points", (long long)(n + nout)); /* as written, outliers included */
    json_int(&j, "outliers", (long long)nout);
    json_num(&j, "diagonal", diag);
    json_transform(&j, "truth", &truth);
    json_end(&j);
  } else {
    printf("wrote        %s: %zu points (%zu outliers)\n", out, n + nout, nout);
    printf("truth        scan -> model:\n");
    cli_print_transform(stdout, &truth, "  ");
  }
  if (cli_commit_outputs(outs, 2) != 0)
    goto done;
  status = CLI_OK;
done:
  cli_output_abort(&outs[0]); /* nothing left to do once committed */
  cli_output_abort(&outs[1]);
  free(p);
  free(keep);
  free(f);
  hicp_cloud_destroy(src);
  hicp_cloud_destroy(dst);
  hicp_context_destroy(ctx);
  return status;
}
