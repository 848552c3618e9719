/* cmd_register.c: hicp register MODEL SCAN: the main job. */
#include "config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static void usage(FILE *f)
{
  fprintf(f,
          "usage: hicp register MODEL SCAN [options]\n"
          "\n"
          "Aligns SCAN to MODEL with point-to-point ICP and prints the transform that maps\n"
          "scan coordinates into model coordinates (x = R p + t).  Exits 0 when the\n"
          "registration ran, also when it did not converge (it says so).\n"
          "\n"
          "  --max-iter N        transform updates at most, 0..1000000 (default 50)\n"
          "  --tol T             stop when |change in MSE| < T (default: 1e-12 x the\n"
          "                      squared diagonal of the smaller box, model's or scan's;\n"
          "                      0 never stops early)\n"
          "  --mse-abs E         stop when MSE < E (default 0: off)\n"
          "  --min-step T,DEG    stop when an update moves less than T and turns less than DEG\n"
          "                      (0 for either: that one takes no part; default 0,0: off)\n"
          "  --nn METHOD         brute, kdtree, zero, kdann, pnn, pnn-opt (default)\n"
          "  --max-dist D        ignore pairs farther apart than D (0: no limit, the default)\n"
          "  --trim F            keep the best fraction F (1e-9..1) of pairs (trimmed ICP)\n"
          "  --filter-start K    from iteration K (0..1000000) drop pairs whose distance\n"
          "                      is over --filter-sigma S standard deviations from the mean\n"
          "  --filter-sigma S    1e-9..1e9 (default 3; needs --filter-start)\n"
          "  --init FILE         initial transform (4x4 or 3x4 numbers, row-major)\n"
          "  --truth FILE        known transform: also print the error against it\n"
          "  --output FILE       write the aligned scan as PLY (binary; --ascii for text)\n"
          "  --chunk N           points per reduction chunk (power of two, 256..65536;\n"
          "                      default 1024)\n"
          "  --time-budget MS    stop after MS milliseconds (0: no limit, the default)\n"
          "  --threads N         CPU threads, 1..4096 (default 0: OMP_NUM_THREADS,\n"
          "                      else one per core)\n"
          "  --backend B         auto, cpu, cuda, hybrid (default auto)\n"
          "  --devices LIST      CUDA devices, e.g. 0,1 (a device may repeat)\n"
          CLI_MEMORY_HELP
          "  --json              print one JSON object instead of text\n");
}

enum {
  OPT_MAX_ITER = 256,
  OPT_TOL,
  OPT_MSE_ABS,
  OPT_MIN_STEP,
  OPT_NN,
  OPT_MAX_DIST,
  OPT_TRIM,
  OPT_FILTER_START,
  OPT_FILTER_SIGMA,
  OPT_INIT,
  OPT_TRUTH,
  OPT_OUTPUT,
  OPT_ASCII,
  OPT_CHUNK,
  OPT_BUDGET,
  OPT_THREADS,
  OPT_BACKEND,
  OPT_DEVICES,
  OPT_MEMORY_LIMIT,
  OPT_JSON,
  OPT_HELP
};

static const struct option long_opts[] = {
    {"max-iter", required_argument, NULL, OPT_MAX_ITER},
    {"tol", required_argument, NULL, OPT_TOL},
    {"mse-abs", required_argument, NULL, OPT_MSE_ABS},
    {"min-step", required_argument, NULL, OPT_MIN_STEP},
    {"nn", required_argument, NULL, OPT_NN},
    {"max-dist", required_argument, NULL, OPT_MAX_DIST},
    {"trim", required_argument, NULL, OPT_TRIM},
    {"filter-start", required_argument, NULL, OPT_FILTER_START},
    {"filter-sigma", required_argument, NULL, OPT_FILTER_SIGMA},
    {"init", required_argument, NULL, OPT_INIT},
    {"truth", required_argument, NULL, OPT_TRUTH},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"ascii", no_argument, NULL, OPT_ASCII},
    {"chunk", required_argument, NULL, OPT_CHUNK},
    {"time-budget", required_argument, NULL, OPT_BUDGET},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"backend", required_argument, NULL, OPT_BACKEND},
    {"devices", required_argument, NULL, OPT_DEVICES},
    {"memory-limit", required_argument, NULL, OPT_MEMORY_LIMIT},
    {"json", no_argument, NULL, OPT_JSON},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0}};

/* The model's bounding-box diagonal, the scale of the error report (0 for
 * a model of one distinct point, which has none). */
static double model_diagonal(const hicp_model_info *mi)
{
  double d = 0.0;
  for (int i = 0; i < 3; i++)
    d += (mi->bbox_max[i] - mi->bbox_min[i]) * (mi->bbox_max[i] - mi->bbox_min[i]);
  return sqrt(d);
}

static void print_text(const char *model_path, const hicp_model_info *mi, double build_ms,
                       const char *scan_path, const hicp_result *r,
                       const hicp_transform *truth, const double centroid[3])
{
  printf("model        %s: %llu points", model_path, (unsigned long long)mi->points);
  if (mi->has_delaunay)
    printf(", Delaunay graph %.1f neighbours/vertex", mi->mean_degree);
  else
    printf(", kd-tree only (%s)", mi->fallback_reason);
  printf(" (prepared in %.1f ms)\n", build_ms);
  printf("scan         %s: %llu points\n", scan_path, (unsigned long long)r->points);
  printf("transform    scan -> model (x = R p + t):\n");
  cli_print_transform(stdout, &r->transform, "  ");
  double deg, axis[3];
  cli_rotation_angle_axis(&r->transform, &deg, axis);
  printf("rotation     %.6f deg about (%.6f, %.6f, %.6f)\n", deg, axis[0], axis[1], axis[2]);
  printf("translation  %.9g %.9g %.9g\n", r->transform.m[3], r->transform.m[7],
         r->transform.m[11]);
  if (isfinite(r->inlier_rmse))
    printf("rmse         %.9g (inliers %.9g, fitness %.4f)\n", r->rmse, r->inlier_rmse,
           r->fitness);
  else if (!isfinite(r->rmse)) /* stopped before its first pass was complete */
    printf("rmse         unknown (no pass over the scan was complete)\n");
  else /* no pair was left: no inlier error to give */
    printf("rmse         %.9g (no inliers, fitness %.4f)\n", r->rmse, r->fitness);
  printf("iterations   %d, %s (%s)%s\n", r->iterations, r->converged ? "converged" : "not converged",
         hicp_stop_name(r->stop),
         r->degenerate ? ", rotation not fully determined by the pairs (scan, model or filters)"
                       : "");
  if (r->note[0] != '\0') /* e.g. a GPU that failed, and the CPU that finished */
    printf("note         %s\n", r->note);
  char on[32] = ""; /* a GPU alone ran no CPU thread */
  if (r->threads > 0)
    snprintf(on, sizeof on, ", %d thread%s", r->threads, r->threads == 1 ? "" : "s");
  printf("time         %.3f ms on %s%s (correspond %.3f, reduce %.3f, solve %.3f)\n", r->time_ms,
         hicp_backend_name(r->backend), on, r->correspond_ms, r->reduce_ms, r->solve_ms);
  if (r->walk.queries > 0)
    printf("walk         %s: %.3f steps per query (max %u)\n", hicp_nn_method_name(r->nn),
           (double)r->walk.steps / (double)r->walk.queries, r->walk.max_steps);
  else
    printf("search       %s\n", hicp_nn_method_name(r->nn));
  if (truth != NULL) {
    double er, et, ep;
    cli_transform_error(&r->transform, truth, centroid, &er, &et, &ep);
    const double diag = model_diagonal(mi);
    if (diag > 0)
      printf("error        rotation %.3g deg, translation %.3g (%.3g of the model diagonal), "
             "at the scan's centroid %.3g (%.3g)\n",
             er, et, et / diag, ep, ep / diag);
    else
      printf("error        rotation %.3g deg, translation %.3g, at the scan's centroid %.3g "
             "(the model has no diagonal)\n",
             er, et, ep);
  }
}

static void print_json(const char *model_path, const hicp_model_info *mi, double build_ms,
                       const char *scan_path, const hicp_result *r,
                       const hicp_transform *truth, const double centroid[3])
{
  json j;
  json_begin(&j, stdout);
  json_transform(&j, "transform", &r->transform);
  json_rotation(&j, "rotation", &r->transform);
  json_translation(&j, "translation", &r->transform);
  json_transform(&j, "inverse", &r->inverse);
  json_num(&j, "rmse", r->rmse);
  json_num(&j, "inlier_rmse", r->inlier_rmse);
  json_num(&j, "fitness", r->fitness);
  json_int(&j, "inliers", (long long)r->inliers);
  json_int(&j, "iterations", r->iterations);
  json_bool(&j, "converged", r->converged);
  json_str(&j, "stop", hicp_stop_name(r->stop));
  json_bool(&j, "degenerate", r->degenerate);
  json_num(&j, "time_ms", r->time_ms);
  json_num(&j, "correspond_ms", r->correspond_ms);
  json_num(&j, "reduce_ms", r->reduce_ms);
  json_num(&j, "solve_ms", r->solve_ms);
  json_str(&j, "backend", hicp_backend_name(r->backend));
  json_str(&j, "note", r->note); /* "" or why the backend is not the one asked for */
  json_int(&j, "threads", r->threads);
  json_str(&j, "nn", hicp_nn_method_name(r->nn));
  json_int(&j, "model_points", (long long)mi->points);
  json_int(&j, "scan_points", (long long)r->points);
  json_str(&j, "model", model_path);
  json_str(&j, "scan", scan_path);
  json_num(&j, "model_build_ms", build_ms);
  json_bool(&j, "model_delaunay", mi->has_delaunay);
  json_object_begin(&j, "walk");
  json_int(&j, "queries", (long long)r->walk.queries);
  json_int(&j, "steps", (long long)r->walk.steps);
  json_num(&j, "mean_steps",
           r->walk.queries ? (double)r->walk.steps / (double)r->walk.queries : 0.0);
  json_int(&j, "max_steps", r->walk.max_steps);
  json_array_begin(&j, "histogram");
  for (int b = 0; b < 16; b++)
    json_int(&j, NULL, (long long)r->walk.hist[b]);
  json_array_end(&j);
  json_object_end(&j);
  if (truth != NULL) {
    double er, et, ep;
    cli_transform_error(&r->transform, truth, centroid, &er, &et, &ep);
    const double diag = model_diagonal(mi);
    json_object_begin(&j, "error");
    json_num(&j, "rotation_deg", er);
    json_num(&j, "translation", et);
    if (diag > 0) /* a one-point model has no size to relate the errors to */
      json_num(&j, "translation_rel", et / diag);
    else
      json_null(&j, "translation_rel");
    json_num(&j, "position", ep);
    if (diag > 0)
      json_num(&j, "position_rel", ep / diag);
    else
      json_null(&j, "position_rel");
    json_object_end(&j);
  }
  json_end(&j);
}

int cmd_register(int argc, char **argv)
{
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  cli_common common;
  cli_common_init(&common);
  const char *init_path = NULL, *truth_path = NULL, *out_path = NULL;
  int as_json = 0, ascii = 0, sigma_given = 0, c;
  optind = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", long_opts, NULL)) != -1) {
    int bad = 0;
    switch (c) {
    case OPT_MAX_ITER:
      bad = cli_int("--max-iter", optarg, 0, 1000000, &o.max_iter);
      break;
    case OPT_TOL:
      bad = cli_double("--tol", optarg, 0, HUGE_VAL, &o.tol);
      break;
    case OPT_MSE_ABS:
      bad = cli_double("--mse-abs", optarg, 0, HUGE_VAL, &o.mse_abs);
      break;
    case OPT_MIN_STEP:
      bad = cli_min_step(optarg, &o);
      break;
    case OPT_NN:
      if (hicp_nn_method_from_name(optarg, &o.nn) != HICP_OK) {
        cli_error("--nn: expected brute, kdtree, zero, kdann, pnn or pnn-opt, got '%s'", optarg);
        bad = -1;
      }
      break;
    case OPT_MAX_DIST:
      bad = cli_double("--max-dist", optarg, 0, HUGE_VAL, &o.max_dist);
      break;
    case OPT_TRIM:
      bad = cli_double("--trim", optarg, 1e-9, 1.0, &o.trim);
      break;
    case OPT_FILTER_START:
      bad = cli_int("--filter-start", optarg, 0, 1000000, &o.filter_start);
      break;
    case OPT_FILTER_SIGMA:
      bad = cli_double("--filter-sigma", optarg, 1e-9, 1e9, &o.filter_sigma);
      sigma_given = 1;
      break;
    case OPT_INIT:
      init_path = cli_input(optarg);
      break;
    case OPT_TRUTH:
      truth_path = cli_input(optarg);
      break;
    case OPT_OUTPUT:
      out_path = optarg;
      bad = cli_output_path("--output", optarg);
      break;
    case OPT_ASCII:
      ascii = 1;
      break;
    case OPT_CHUNK:
      bad = cli_chunk(optarg, &o);
      break;
    case OPT_BUDGET:
      bad = cli_double("--time-budget", optarg, 0, HUGE_VAL, &o.time_budget_ms);
      break;
    case OPT_THREADS:
      bad = cli_common_option(&common, "threads", optarg) < 0;
      break;
    case OPT_BACKEND:
      bad = cli_common_option(&common, "backend", optarg) < 0;
      break;
    case OPT_DEVICES:
      bad = cli_common_option(&common, "devices", optarg) < 0;
      break;
    case OPT_MEMORY_LIMIT:
      bad = cli_common_option(&common, "memory-limit", optarg) < 0;
      break;
    case OPT_JSON:
      as_json = 1;
      break;
    case OPT_HELP:
    case 'h':
      usage(stdout);
      return CLI_OK;
    default:
      return cli_bad_option("register", c, argc, argv, long_opts);
    }
    if (bad)
      return CLI_USAGE;
  }
  if (cli_filter_sigma_alone(sigma_given, &o) || cli_common_done(&common) != 0)
    return CLI_USAGE;
  if (ascii && out_path == NULL) {
    cli_error("--ascii needs --output FILE: without it nothing is written");
    return CLI_USAGE;
  }
  if (argc - optind != 2) {
    cli_error("register needs MODEL and SCAN (see 'hicp register --help')");
    return CLI_USAGE;
  }
  const char *model_path = cli_input(argv[optind]), *scan_path = cli_input(argv[optind + 1]);
  const cli_file files[] = {{"MODEL", model_path, 0},    {"SCAN", scan_path, 0},
                            {"--init", init_path, 0},    {"--truth", truth_path, 0},
                            {"--output", out_path, 1}};
  const char *const inputs[] = {model_path, scan_path, init_path, truth_path};
  if (cli_check_stdin_inputs(inputs, 4, 0) != 0 ||
      cli_check_outputs(files, (int)(sizeof files / sizeof files[0])) != 0 ||
      cli_check_output_name("--output", out_path, "PLY") != 0)
    return CLI_USAGE;
  hicp_transform init, truth;
  if (init_path != NULL && cli_read_transform(init_path, &init) != 0)
    return CLI_FAIL;
  if (truth_path != NULL && cli_read_transform(truth_path, &truth) != 0)
    return CLI_FAIL;
  cli_output out;
  if (cli_output_open(&out, out_path) != 0)
    return CLI_FAIL;

  hicp_context *ctx = cli_context(&common);
  if (ctx == NULL) {
    cli_output_abort(&out);
    return CLI_FAIL;
  }
  /* the threads start while the model and scan are read, so that the
   * registration does not wait for them */
  if (hicp_context_start_threads(ctx) < 0) { /* the system refused them */
    cli_fail(ctx, NULL);
    hicp_context_destroy(ctx);
    cli_output_abort(&out);
    return CLI_FAIL;
  }
  int status = CLI_FAIL;
  hicp_model *model = NULL;
  hicp_cloud *scan = NULL;
  hicp_model_info mi;
  hicp_model_info_init(&mi);
  /* Model preparation is timed apart from the registration. */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (hicp_model_open(ctx, model_path, NULL, &model) != HICP_OK) {
    cli_fail(ctx, model_path);
    goto done;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double build_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
  hicp_model_get_info(model, &mi);
  if (hicp_cloud_read(ctx, scan_path, HICP_FORMAT_AUTO, &scan) != HICP_OK) {
    cli_fail(ctx, scan_path);
    goto done;
  }
  hicp_result r;
  hicp_result_init(&r);
  if (hicp_register_cloud(ctx, model, scan, &o, init_path ? &init : NULL, &r) != HICP_OK) {
    cli_fail(ctx, "register");
    goto done;
  }
  /* into the temporary file: the output replaces what was there only
   * once the report is out too */
  if (out_path != NULL &&
      hicp_cloud_write_ply(ctx, scan, &r.transform, cli_output_name(&out),
                           ascii ? HICP_PLY_ASCII : HICP_PLY_BINARY) != HICP_OK) {
    cli_output_fail(ctx, &out);
    goto done;
  }
  double centroid[3];
  cli_cloud_centroid(scan, centroid);
  if (as_json)
    print_json(model_path, &mi, build_ms, scan_path, &r,
               truth_path ? &truth : NULL, centroid);
  else
    print_text(model_path, &mi, build_ms, scan_path, &r,
               truth_path ? &truth : NULL, centroid);
  if (cli_commit_outputs(&out, 1) != 0)
    goto done;
  status = CLI_OK;
done:
  cli_output_abort(&out); /* nothing left to do once committed */
  hicp_cloud_destroy(scan);
  hicp_model_destroy(model);
  hicp_context_destroy(ctx);
  return status;
}
