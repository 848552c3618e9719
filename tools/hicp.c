/* hicp.c: the hicp command-line tool: subcommand dispatch. */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "envnames.h"

static void usage(FILE *f)
{
  fprintf(f,
          "usage: hicp COMMAND [options]\n"
          "\n"
          "Exact rigid registration (ICP) of a scan to a model, on CPUs and NVIDIA GPUs.\n"
          "\n"
          "commands:\n"
          "  register MODEL SCAN   align SCAN to MODEL and print the pose\n"
          "  nn MODEL QUERIES      nearest model point of each query point\n"
          "  model build MODEL -o FILE   save a prebuilt model (Delaunay graph, kd-tree)\n"
          "  model info FILE       facts about a model\n"
          "  track MODEL FRAME...  a sequence of frames, tracked or side by side\n"
          "  perturb INPUT -o OUT  make a test scan: move, resample, add noise and outliers\n"
          "  devices               CPU topology and CUDA devices\n"
          "\n"
          "MODEL is a point cloud or mesh (PLY, PCD, OFF, XYZ/TXT/CSV) or a model file\n"
          "from 'hicp model build'.  'hicp COMMAND --help' describes each command.\n"
          "  --version             print the version\n");
}

/* The library takes an unknown value of its settings as the default; the
 * tool refuses one, so that a mistyped setting is not run as the default
 * unnoticed.  An empty value is unset. */
static int check_environment(void)
{
  static const struct {
    const char *name;
    const char *const *values;
  } settings[] = {{"HICP_SIMD", hicp__simd_names},
                  {"HICP_BIND", hicp__bind_names},
                  {"HICP_QORDER", hicp__qorder_names},
                  {"HICP_THREADS_ADAPT", hicp__adapt_names},
                  {"HICP_GPU_FAULT", hicp__gpu_fault_names}};
  for (size_t i = 0; i < sizeof settings / sizeof settings[0]; i++) {
    const char *v = getenv(settings[i].name);
    if (v == NULL || v[0] == '\0' || hicp__env_index(settings[i].values, v) >= 0)
      continue;
    char list[128] = "";
    for (int k = 0; settings[i].values[k] != NULL; k++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k > 0 ? ", " : "",
               settings[i].values[k]);
    cli_error("%s=%s: not one of %s", settings[i].name, v, list);
    return -1;
  }
  return 0;
}

int main(int argc, char **argv)
{
  cli_hold_std_fds();
  /* Past the file size limit (ulimit -f) a write raises SIGXFSZ, which
   * ended the process with its output cut and no word (stop 64's review:
   * `hicp nn ... > file`); ignored, the write fails with EFBIG and the
   * command says "cannot write standard output: File too large", exit 1,
   * as for a full disk.  (The library holds it back around its own
   * writes; SIGPIPE keeps its action, which ends `hicp ... | head`.) */
  signal(SIGXFSZ, SIG_IGN);
  if (argc < 2) { /* a failure's one line; the usage is --help's */
    cli_error("no command given (try 'hicp --help')");
    return CLI_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
    if (argc > 2) { /* as every command refuses what it does not take */
      cli_error("%s takes no arguments (got '%s')", cmd, argv[2]);
      return CLI_USAGE;
    }
    printf("hicp %s (library %s)\n", HICP_VERSION_STRING, hicp_version());
    return cli_finish(CLI_OK);
  }
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return cli_finish(CLI_OK);
  }
  /* a command's --help does not look at the settings either (hicp.1) */
  int asks_help = 0;
  for (int i = 2; i < argc; i++)
    asks_help = asks_help || strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
  if (!asks_help && check_environment() != 0)
    return CLI_USAGE;
  static const struct {
    const char *name;
    int (*fn)(int, char **);
  } table[] = {{"register", cmd_register}, {"nn", cmd_nn},           {"model", cmd_model},
               {"devices", cmd_devices},   {"perturb", cmd_perturb},
               {"track", cmd_track}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(cmd, table[i].name) == 0)
      return cli_finish(table[i].fn(argc - 1, argv + 1));
  cli_error("unknown command '%s' (try 'hicp --help')", cmd);
  return CLI_USAGE;
}
