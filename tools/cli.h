/* cli.h: shared pieces of the hicp command-line tool. */
#ifndef HICP_CLI_H
#define HICP_CLI_H

#include <getopt.h>
#include <stdio.h>

#include "hicp.h"
#include "io/outfile.h"

/* Exit codes: 0 the job ran; 1 it failed (bad file, no device, ...);
 * 2 the command line was wrong. */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

/* Prints "hicp: MESSAGE" as one line on stderr. */
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "hicp: WHAT: <context message>" and returns CLI_FAIL. */
int cli_fail(hicp_context *ctx, const char *what);
/* For getopt_long's '?' or ':' (the commands set opterr = 0 and start their
 * option strings with ':'): one line naming the option, e.g. "hicp: nn:
 * unrecognized option '--foo' (see 'hicp nn --help')"; returns CLI_USAGE. */
int cli_bad_option(const char *cmd, int c, int argc, char *const argv[],
                   const struct option *opts);

/* Flushes standard output: 0, or -1 when this or an earlier write to it
 * failed (the first error is remembered for cli_finish). */
int cli_flush_stdout(void);
/* Opens /dev/null on whichever of descriptors 0, 1 and 2 is closed, before
 * anything else is opened: otherwise an output's file would take the
 * number, and the report printed to standard output would go into it.  A
 * closed standard output then fails the run, as writing to it does. */
void cli_hold_std_fds(void);
/* 1, with the one line, when --filter-sigma was given without
 * --filter-start (which alone turns the filter on), 0 otherwise. */
int cli_filter_sigma_alone(int sigma_given, const hicp_reg_options *o);
/* What the tool exits with: STATUS, or CLI_FAIL with "hicp: cannot write
 * standard output: ..." when STATUS is CLI_OK but standard output failed (a
 * command that failed already said why, in its one line). */
int cli_finish(int status);
/* Why standard output failed (cli_flush_stdout returned -1). */
const char *cli_stdout_error(void);

/* Files named on a command line, in and out. */
typedef struct cli_file {
  const char *what; /* how the user named it: "--output", "SCAN" */
  const char *path; /* NULL: not given */
  int output;
} cli_file;
/* An input's name as the command opens it: "-" is standard input, as an
 * output's "-" is standard output (it was refused, "cannot open -"). */
const char *cli_input(const char *path);
/* How many of the n inputs a command will read, as cli_input gave them
 * (NULL: not given), were "-". */
int cli_stdin_inputs(const char *const *paths, int n);
/* -1 with the one line where more than one of them (and `more` others
 * counted with cli_stdin_inputs) was "-" (the second would read what the
 * first left: nothing from a pipe), else 0.  An option given twice counts
 * once, as its last value is the one read. */
int cli_check_stdin_inputs(const char *const *paths, int n, int more);
/* Refuses, with one line and -1, an output that names the same file as
 * another file of the list (an input it would destroy, or another output):
 * compared by device and inode, so hard links and other spellings count. */
int cli_check_outputs(const cli_file *files, int n);
/* Refuses, with one line and -1, an output file whose name ends in the
 * extension of a format it is not written in (`writes`: "PLY" or "model"):
 * `perturb -o scan.pcd` wrote binary PLY that PCL and Open3D, going by
 * the name, could not read.  Any other name (none, ".ply" for PLY,
 * ".hicpm" for a model, "-") is taken. */
int cli_check_output_name(const char *what, const char *path, const char *writes);

/* Strict number parsing of option values; on error prints
 * "hicp: OPTION: ..." and returns -1.  Decimal only: no blanks, no '+', no
 * hexadecimal (so "010" is ten, as a user means it), no inf or nan; a
 * number too small for a double reads as what strtod makes of it (0 or a
 * subnormal), one too large is refused. */
int cli_int(const char *opt, const char *s, long lo, long hi, int *out);
int cli_u64(const char *opt, const char *s, unsigned long long *out);
/* A size in bytes with an optional K, M, G or T suffix (powers of 1024). */
int cli_size(const char *opt, const char *s, unsigned long long *out);
/* The --memory-limit line of every command's --help. */
#define CLI_MEMORY_HELP \
  "  --memory-limit SIZE most memory one step may take, in bytes or with K, M, G\n" \
  "                      or T (x 2^10, 2^20, 2^30, 2^40), e.g. 512M, 8G\n"     \
  "                      (default: 3/4 of physical memory)\n"
int cli_double(const char *opt, const char *s, double lo, double hi, double *out);
/* Exactly n comma-separated numbers (no empty field); FORM says what was
 * expected, as in "OPT: expected FORM, got 'S'". */
int cli_numbers(const char *opt, const char *s, double *out, int n, const char *form);
/* --min-step T,DEG and --chunk N (register and track) into o. */
int cli_min_step(const char *s, hicp_reg_options *o);
int cli_chunk(const char *s, hicp_reg_options *o);
/* "x,y,z" */
int cli_vec3(const char *opt, const char *s, double out[3]);
/* "0,1,3" -> devices (at most max, no empty field); returns the count or -1. */
int cli_int_list(const char *opt, const char *s, int *out, int max);

/* A context for the common options. */
typedef struct cli_common {
  int threads;
  hicp_backend backend;
  int devices[64];
  int ndevices;
  unsigned long long memory_limit; /* bytes, 0: the library's default */
} cli_common;
void cli_common_init(cli_common *c);
/* Handles --threads, --backend, --devices, --memory-limit; returns 1 if
 * consumed, 0 if not one of them, -1 on a bad value. */
int cli_common_option(cli_common *c, const char *name, const char *value);
/* After the options: -1 with the reason where they contradict each other
 * (--devices with --backend cpu), else 0. */
int cli_common_done(const cli_common *c);
hicp_context *cli_context(const cli_common *c);
/* For the CLI's own buffers (perturb's), the check the library makes of its
 * own against --memory-limit: 0, or -1 after the one-line error naming
 * `what`, the bytes and the limit. */
int cli_check_memory(const cli_common *c, double bytes, const char *what);

/* Transform files: 16 (4x4) or 12 (3x4) numbers, row-major, separated by
 * blanks, commas, semicolons, newlines or brackets (a JSON array of rows
 * reads); '#' starts a comment, which runs
 * to the end of its line (of any length). */
int cli_read_transform(const char *path, hicp_transform *t);
void cli_print_transform(FILE *f, const hicp_transform *t, const char *indent);
/* v, beyond `limit` in magnitude, printed into buf with the fewest
 * significant digits from `digits` up that still read as beyond it (not
 * "1e+17 is beyond the limit of 1e+17"); returns buf. */
const char *cli_beyond(char *buf, size_t len, double v, double limit, int digits);

/* An output file of a command.  It is opened before the work, so that one
 * that cannot be written is said at once; filled by the tool or by the
 * library; and put in place (renamed over what was there) only once
 * everything else the command does has succeeded, standard output included
 * (cli_commit_outputs).  Until then it is a temporary file, without a name
 * where the system allows (see io/outfile.h): a command that fails, or is
 * killed, leaves what was there as it was.  Standard output ("-") is the
 * exception: written as it is made, the command's report going to
 * standard error instead. */
typedef struct cli_output {
  const char *path; /* as given ("standard output" for "-" and its other names);
                       NULL: not given, and every function a no-op */
  hicp__outfile o;
  int watched;      /* 1 + its slot among the temporaries a signal removes */
  int data_fd;      /* standard output as the output: what was descriptor 1
                       (over 2), descriptor 1 now being standard error; else 0 */
  char data_name[24]; /* "/dev/fd/N": the name the library writes by, for
                         data_fd or for a named temporary's descriptor
                         (cli_output_name); "" otherwise */
} cli_output;
/* Whether an output's name means standard output: "-", or a name of
 * descriptor 1 (/dev/stdout, /dev/fd/1, /proc/self/fd/1). */
int cli_is_stdout(const char *path);
/* An option's value that names an output: refused (one line, -1) when empty,
 * before any work (a command-line mistake, exit 2). */
int cli_output_path(const char *opt, const char *s);
/* Opens `path` (NULL: nothing to do); -1 (one line said) if it cannot be
 * written: a folder that cannot take the file, a directory, an existing
 * file without write permission (as the shell's '>' refuses it, though a
 * rename could replace it), ... */
int cli_output_open(cli_output *out, const char *path);
/* The name for the library to write the output to (hicp_cloud_write_ply,
 * hicp_model_save): the temporary file, opened again. */
const char *cli_output_name(const cli_output *out);
/* Says why the library could not write `out` ("hicp: cannot write PATH:
 * ..."), its message naming the output as the user did, not the temporary
 * file; returns CLI_FAIL. */
int cli_output_fail(hicp_context *ctx, const cli_output *out);
/* Writes a transform file to `out` in full (flushed, synced); -1 (one line
 * said) if not. */
int cli_write_transform(cli_output *out, const hicp_transform *t);
/* Flushes standard output and, if that succeeded, puts the n outputs in
 * place, in order; -1 (one line said) if not.  The last step of a command. */
int cli_commit_outputs(cli_output *outs, int n);
/* Gives up an output not committed: removes its temporary file. */
void cli_output_abort(cli_output *out);

/* A progress line on standard error (a terminal), redrawn in place with no
 * newline: printf-like.  cli_error clears it first ("\r\033[K"), so that an
 * error gets a line of its own; cli_progress_clear does so for a line about
 * to be printed on standard output when that is the terminal too. */
void cli_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cli_progress_clear(void);
/* Ends the progress line with a newline, leaving it on the screen. */
void cli_progress_end(void);

/* Rotation angle (degrees) and axis of a transform's rotation part. */
void cli_rotation_angle_axis(const hicp_transform *t, double *deg, double axis[3]);
/* Angle (degrees) of Ra Rb^T, |ta - tb|, and how far apart a and b put the
 * point `at` (the scan's centroid: unlike |ta - tb|, it does not grow with
 * the scan's distance from the coordinate origin). */
void cli_transform_error(const hicp_transform *a, const hicp_transform *b, const double at[3],
                         double *rot_deg, double *trans, double *pos);
/* The centroid of a cloud, in absolute coordinates. */
void cli_cloud_centroid(const hicp_cloud *c, double out[3]);

/* Minimal JSON writer: numbers round-trip (17 significant digits), NaN and
 * infinities become null. */
typedef struct json {
  FILE *f;
  int depth;
  int first[16];
} json;
void json_begin(json *j, FILE *f);
void json_end(json *j);
void json_key(json *j, const char *key);
void json_object_begin(json *j, const char *key);
void json_object_end(json *j);
void json_array_begin(json *j, const char *key);
void json_array_end(json *j);
void json_num(json *j, const char *key, double v);
void json_int(json *j, const char *key, long long v);
void json_bool(json *j, const char *key, int v);
void json_str(json *j, const char *key, const char *v);
void json_null(json *j, const char *key);
/* 4x4 row-major as rows; 3x3 rotation; 3-vector translation. */
void json_transform(json *j, const char *key, const hicp_transform *t);
void json_rotation(json *j, const char *key, const hicp_transform *t);
void json_translation(json *j, const char *key, const hicp_transform *t);

/* Subcommands. */
int cmd_register(int argc, char **argv);
int cmd_nn(int argc, char **argv);
int cmd_model(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_perturb(int argc, char **argv);
int cmd_track(int argc, char **argv);

#endif /* HICP_CLI_H */
