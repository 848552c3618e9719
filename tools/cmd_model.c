/* cmd_model.c: hicp model build MODEL -o FILE; hicp model info FILE. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *f)
{
  fprintf(f,
          "usage: hicp model build MODEL -o FILE [--no-delaunay] [--validate] [--json]\n"
          "                        [--memory-limit SIZE]\n"
          "       hicp model info FILE [--json]\n"
          "\n"
          "build  builds the model's Delaunay graph and kd-tree once and saves them;\n"
          "       FILE can then be given wherever a MODEL is expected (it loads in\n"
          "       milliseconds instead of being rebuilt).\n"
          "info   points, edges, degree histogram, memory and build time of a model\n"
          "       (a model file, or a point cloud, which is built first).\n"
          "\n"
          "  --no-delaunay        build the kd-tree only (a saved model keeps its graph)\n"
          "  --validate           check the graph (symmetry, reachability, duplicates)\n"
          "  --json               print the facts as JSON (build: of the model it saved)\n"
          "  --memory-limit SIZE  most memory one step may take, in bytes or with K, M,\n"
          "                       G or T (x 2^10, 2^20, 2^30, 2^40), e.g. 512M, 8G\n"
          "                       (default: 3/4 of physical memory)\n");
}

static void print_info(const char *path, const hicp_model_info *mi, int as_json)
{
  if (as_json) {
    json j;
    json_begin(&j, stdout);
    json_str(&j, "model", path);
    json_int(&j, "points", (long long)mi->points);
    json_int(&j, "vertices", (long long)mi->vertices);
    json_int(&j, "duplicates", (long long)mi->duplicates);
    json_bool(&j, "delaunay", mi->has_delaunay);
    json_str(&j, "fallback_reason", mi->fallback_reason);
    json_int(&j, "edges", (long long)mi->edges);
    json_num(&j, "mean_degree", mi->mean_degree);
    json_int(&j, "max_degree", mi->max_degree);
    json_int(&j, "guards", (long long)mi->guards);
    json_array_begin(&j, "degree_histogram");
    for (int b = 0; b < HICP_DEGREE_BINS; b++)
      json_int(&j, NULL, (long long)mi->degree_hist[b]);
    json_array_end(&j);
    json_int(&j, "bytes_total", (long long)mi->bytes_total);
    json_int(&j, "bytes_graph", (long long)mi->bytes_graph);
    json_int(&j, "bytes_points", (long long)mi->bytes_points);
    json_int(&j, "bytes_kdtree", (long long)mi->bytes_kdtree);
    json_int(&j, "bytes_start", (long long)mi->bytes_start);
    json_num(&j, "graph_bytes_per_point", mi->points ? (double)mi->bytes_graph / (double)mi->points : 0);
    json_num(&j, "build_ms", mi->build_ms);
    json_num(&j, "qhull_ms", mi->qhull_ms);
    json_array_begin(&j, "origin");
    for (int i = 0; i < 3; i++)
      json_num(&j, NULL, mi->origin[i]);
    json_array_end(&j);
    json_array_begin(&j, "bbox_min");
    for (int i = 0; i < 3; i++)
      json_num(&j, NULL, mi->bbox_min[i]);
    json_array_end(&j);
    json_array_begin(&j, "bbox_max");
    for (int i = 0; i < 3; i++)
      json_num(&j, NULL, mi->bbox_max[i]);
    json_array_end(&j);
    json_end(&j);
    return;
  }
  printf("model        %s\n", path);
  printf("points       %llu (%llu distinct, %llu duplicates)\n", (unsigned long long)mi->points,
         (unsigned long long)mi->vertices, (unsigned long long)mi->duplicates);
  if (mi->has_delaunay) {
    printf("graph        Delaunay: %llu directed edges, degree mean %.2f, max %u\n",
           (unsigned long long)mi->edges, mi->mean_degree, mi->max_degree);
    if (mi->guards > 0)
      printf("guards       %u points around a flat face on the hull\n", (unsigned)mi->guards);
    printf("degrees      ");
    int col = 0;
    for (int b = 0; b < HICP_DEGREE_BINS; b++) {
      if (mi->degree_hist[b] == 0)
        continue;
      printf("%s%d%s:%llu", col++ ? " " : "", b, b == HICP_DEGREE_BINS - 1 ? "+" : "",
             (unsigned long long)mi->degree_hist[b]);
    }
    printf("\n");
  } else {
    printf("graph        none: the kd-tree answers every method (%s)\n", mi->fallback_reason);
  }
  printf("memory       %.2f MB (graph %.1f bytes/point, points %.1f, kd-tree %.1f, start "
         "table %.1f)\n",
         (double)mi->bytes_total / 1e6, mi->points ? (double)mi->bytes_graph / mi->points : 0.0,
         mi->points ? (double)mi->bytes_points / mi->points : 0.0,
         mi->points ? (double)mi->bytes_kdtree / mi->points : 0.0,
         mi->points ? (double)mi->bytes_start / mi->points : 0.0);
  printf("build        %.1f ms (Qhull %.1f ms)\n", mi->build_ms, mi->qhull_ms);
  printf("bounds       (%.9g, %.9g, %.9g) .. (%.9g, %.9g, %.9g)\n", mi->bbox_min[0],
         mi->bbox_min[1], mi->bbox_min[2], mi->bbox_max[0], mi->bbox_max[1], mi->bbox_max[2]);
  if (mi->origin[0] != 0 || mi->origin[1] != 0 || mi->origin[2] != 0)
    printf("origin       %.17g %.17g %.17g (coordinates are stored relative to it)\n",
           mi->origin[0], mi->origin[1], mi->origin[2]);
}

int cmd_model(int argc, char **argv)
{
  static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
                                       {"no-delaunay", no_argument, NULL, 'n'},
                                       {"validate", no_argument, NULL, 'v'},
                                       {"json", no_argument, NULL, 'j'},
                                       {"memory-limit", required_argument, NULL, 'M'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  if (argc < 2) {
    cli_error("model: build or info? (try 'hicp model --help')");
    return CLI_USAGE;
  }
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(stdout);
    return CLI_OK;
  }
  const char *sub = argv[1];
  if (strcmp(sub, "build") != 0 && strcmp(sub, "info") != 0) {
    cli_error("model: unknown subcommand '%s' (build or info)", sub);
    return CLI_USAGE;
  }
  hicp_model_options mo;
  hicp_model_options_init(&mo);
  cli_common common;
  cli_common_init(&common);
  const char *out = NULL;
  const char *build_only = NULL; /* an option of build given to info */
  int as_json = 0, c;
  optind = 0;
  opterr = 0;
  while ((c = getopt_long(argc - 1, argv + 1, ":ho:", opts, NULL)) != -1) {
    switch (c) {
    case 'o':
      out = optarg;
      build_only = "-o/--output";
      if (cli_output_path("-o/--output", optarg) != 0)
        return CLI_USAGE;
      break;
    case 'n':
      mo.delaunay = 0;
      build_only = "--no-delaunay";
      break;
    case 'v':
      mo.validate = 1;
      build_only = "--validate";
      break;
    case 'j':
      as_json = 1;
      break;
    case 'M':
      if (cli_common_option(&common, "memory-limit", optarg) < 0)
        return CLI_USAGE;
      break;
    case 'h':
      usage(stdout);
      return CLI_OK;
    default:
      return cli_bad_option("model", c, argc - 1, argv + 1, opts);
    }
  }
  if (argc - 1 - optind != 1) {
    cli_error("model %s needs one MODEL argument", sub);
    return CLI_USAGE;
  }
  const char *path = cli_input(argv[1 + optind]);
  int build = strcmp(sub, "build") == 0;
  if (build && out == NULL) {
    cli_error("model build needs -o FILE");
    return CLI_USAGE;
  }
  /* info takes what its usage says, --json and --memory-limit: -o would
   * write nothing, and for a model file the build options would be ignored
   * (its graph is saved in it) */
  if (!build && build_only != NULL) {
    cli_error("model info: %s applies to 'model build' only", build_only);
    return CLI_USAGE;
  }
  const cli_file files[] = {{"MODEL", path, 0}, {"-o", out, 1}};
  if (cli_check_outputs(files, 2) != 0 || cli_check_output_name("-o", out, "model") != 0)
    return CLI_USAGE;
  cli_output saved;
  if (cli_output_open(&saved, out) != 0)
    return CLI_FAIL;
  hicp_context *ctx = cli_context(&common);
  if (ctx == NULL) {
    cli_output_abort(&saved);
    return CLI_FAIL;
  }
  int status = CLI_FAIL;
  hicp_model *m = NULL;
  if (hicp_model_open(ctx, path, &mo, &m) != HICP_OK) {
    cli_fail(ctx, path);
    goto done;
  }
  hicp_model_info mi;
  hicp_model_info_init(&mi);
  hicp_model_get_info(m, &mi);
  if (build) {
    /* into the temporary file, put in place once the report is out too */
    if (hicp_model_save(ctx, m, cli_output_name(&saved)) != HICP_OK) {
      cli_output_fail(ctx, &saved);
      goto done;
    }
    if (!as_json)
      printf("saved        %s\n", out);
  }
  print_info(path, &mi, as_json);
  if (cli_commit_outputs(&saved, 1) != 0)
    goto done;
  status = CLI_OK;
done:
  cli_output_abort(&saved); /* nothing left to do once committed */
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
  return status;
}
