/* register_files.c: register two point-cloud files through the public API.
 *
 *   register_files MODEL SCAN
 *
 * prints the transform that maps SCAN onto MODEL, the RMS error, the number
 * of iterations and the time.  Build against an installed hicp with
 *   cc register_files.c $(pkg-config --cflags --libs hicp)
 */
#include <stdio.h>

#include <hicp.h>

int main(int argc, char **argv)
{
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL SCAN\n", argv[0]);
    return 2;
  }
  hicp_context *ctx = NULL;
  hicp_model *model = NULL;
  hicp_cloud *scan = NULL;
  int rc = hicp_context_create(NULL, &ctx);
  if (rc != HICP_OK) {
    fprintf(stderr, "hicp: %s\n", hicp_strerror(rc));
    return 1;
  }
  /* Start the CPU threads now, so that they are running by the time the
   * files are read and the registration begins. */
  hicp_context_start_threads(ctx);
  /* The model: built once (here from a cloud file; a saved model loads faster). */
  rc = hicp_model_open(ctx, argv[1], NULL, &model);
  if (rc == HICP_OK)
    rc = hicp_cloud_read(ctx, argv[2], HICP_FORMAT_AUTO, &scan);
  hicp_result result;
  hicp_result_init(&result);
  if (rc == HICP_OK)
    rc = hicp_register_cloud(ctx, model, scan, NULL, NULL, &result);
  if (rc != HICP_OK) {
    fprintf(stderr, "hicp: %s\n", hicp_context_error(ctx));
  } else {
    for (int i = 0; i < 4; i++)
      printf("%.17g %.17g %.17g %.17g\n", result.transform.m[4 * i], result.transform.m[4 * i + 1],
             result.transform.m[4 * i + 2], result.transform.m[4 * i + 3]);
    printf("rmse %.9g, %d iterations, %s, %.3f ms\n", result.rmse, result.iterations,
           result.converged ? "converged" : "not converged", result.time_ms);
  }
  hicp_cloud_destroy(scan);
  hicp_model_destroy(model);
  hicp_context_destroy(ctx);
  return rc == HICP_OK ? 0 : 1;
}
