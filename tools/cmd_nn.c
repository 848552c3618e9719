/* cmd_nn.c: hicp nn MODEL QUERIES: nearest model point of each query. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static void usage(FILE *f)
{
  fprintf(f,
          "usage: hicp nn MODEL QUERIES [options]\n"
          "\n"
          "For each point of QUERIES, the nearest point of MODEL: one line per query,\n"
          "'query_index model_index squared_distance' (the smallest model index among\n"
          "equally near points; the squared distance as computed in float).\n"
          "\n"
          "  --nn METHOD     brute, kdtree, zero, kdann, pnn, pnn-opt (default); all exact\n"
          "  --csv           comma-separated, with a header line\n"
          "  --stats         print timing and walk statistics on stderr\n"
          "  --threads N     CPU threads, 1..4096 (default 0: OMP_NUM_THREADS,\n"
          "                  else one per core)\n"
          "  --memory-limit SIZE  most memory one step may take, in bytes or with K, M,\n"
          "                  G or T (x 2^10, 2^20, 2^30, 2^40), e.g. 512M, 8G\n"
          "                  (default: 3/4 of physical memory)\n");
}

int cmd_nn(int argc, char **argv)
{
  static const struct option opts[] = {{"nn", required_argument, NULL, 'm'},
                                       {"csv", no_argument, NULL, 'c'},
                                       {"stats", no_argument, NULL, 's'},
                                       {"threads", required_argument, NULL, 't'},
                                       {"memory-limit", required_argument, NULL, 'M'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  hicp_nn_options o;
  hicp_nn_options_init(&o);
  cli_common common;
  cli_common_init(&common);
  int csv = 0, stats = 0, c;
  optind = 0;
  opterr = 0;
  while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
    switch (c) {
    case 'm':
      if (hicp_nn_method_from_name(optarg, &o.method) != HICP_OK) {
        cli_error("--nn: expected brute, kdtree, zero, kdann, pnn or pnn-opt, got '%s'", optarg);
        return CLI_USAGE;
      }
      break;
    case 'c':
      csv = 1;
      break;
    case 's':
      stats = 1;
      break;
    case 't':
      if (cli_common_option(&common, "threads", optarg) < 0)
        return CLI_USAGE;
      break;
    case 'M':
      if (cli_common_option(&common, "memory-limit", optarg) < 0)
        return CLI_USAGE;
      break;
    case 'h':
      usage(stdout);
      return CLI_OK;
    default:
      return cli_bad_option("nn", c, argc, argv, opts);
    }
  }
  if (argc - optind != 2) {
    cli_error("nn needs MODEL and QUERIES (see 'hicp nn --help')");
    return CLI_USAGE;
  }
  const char *model_path = cli_input(argv[optind]), *query_path = cli_input(argv[optind + 1]);
  const char *const inputs[] = {model_path, query_path};
  if (cli_check_stdin_inputs(inputs, 2, 0) != 0)
    return CLI_USAGE;
  hicp_context *ctx = cli_context(&common);
  if (ctx == NULL)
    return CLI_FAIL;
  /* the threads start while the model and queries are read, so that the
   * queries do not wait for them */
  if (hicp_context_start_threads(ctx) < 0) { /* the system refused them */
    cli_fail(ctx, NULL);
    hicp_context_destroy(ctx);
    return CLI_FAIL;
  }
  int status = CLI_FAIL;
  hicp_model *model = NULL;
  hicp_cloud *q = NULL;
  uint32_t *idx = NULL;
  float *d2 = NULL;
  if (hicp_model_open(ctx, model_path, NULL, &model) != HICP_OK) {
    cli_fail(ctx, model_path);
    goto done;
  }
  /* The queries relative to the model's origin: each rounded to float once,
   * as the model's points were, so a query at a model point is at 0 (read
   * relative to their own centre, queries in UTM coordinates moved by up to
   * millimetres, and one at a model point could get its neighbour). */
  hicp_model_info info;
  hicp_model_info_init(&info);
  if (hicp_model_get_info(model, &info) != HICP_OK ||
      hicp_cloud_read_relative(ctx, query_path, HICP_FORMAT_AUTO, info.origin, &q) != HICP_OK) {
    cli_fail(ctx, query_path);
    goto done;
  }
  size_t n = hicp_cloud_size(q);
  idx = malloc(sizeof *idx * n);
  d2 = malloc(sizeof *d2 * n);
  if (idx == NULL || d2 == NULL) {
    cli_error("out of memory for %zu queries", n);
    goto done;
  }
  hicp_walk_stats ws;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  if (hicp_nn_query_cloud(ctx, model, q, &o, idx, d2, &ws) != HICP_OK) {
    cli_fail(ctx, "nn");
    goto done;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (csv)
    printf("query_index,model_index,squared_distance\n");
  for (size_t i = 0; i < n; i++)
    printf(csv ? "%zu,%u,%.9g\n" : "%zu %u %.9g\n", i, idx[i], (double)d2[i]);
  if (stats) {
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-6;
    fprintf(stderr, "hicp nn: %zu queries by %s in %.3f ms (%.1f ns/query, %d threads)", n,
            hicp_nn_method_name(o.method), ms, n ? ms * 1e6 / (double)n : 0.0,
            hicp_context_threads(ctx));
    if (ws.queries)
      fprintf(stderr, "; walk %.3f steps/query, max %u", (double)ws.steps / (double)ws.queries,
              ws.max_steps);
    fprintf(stderr, "\n");
  }
  status = CLI_OK; /* main checks that standard output took it all */
done:
  free(idx);
  free(d2);
  hicp_cloud_destroy(q);
  hicp_model_destroy(model);
  hicp_context_destroy(ctx);
  return status;
}
