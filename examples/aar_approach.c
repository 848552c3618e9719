/* aar_approach.c: automated aerial refuelling, the problem hicp was made
 * for.  A receiver aircraft (boeing.off from Debian's libcgal-demo) approaches
 * a tanker whose stereo camera pair looks back at it.  Each frame, the
 * cameras see the receiver's camera-facing surface, with stereo noise that
 * grows with the square of the range; hicp tracks the receiver frame to frame
 * through a stream (each frame starts from the previous pose) and the program
 * prints the pose error along the approach.
 *
 *   aar_approach BOEING.off [FRAMES]
 *
 * Coordinates: the model is in the receiver's body frame (its units taken as
 * metres); the scans are in the camera frame.  A registration maps camera
 * coordinates into body coordinates, so the receiver's pose in the camera
 * frame is the result's inverse.  Between frames the tracker predicts the
 * next pose at constant velocity (the receiver closes about a metre a
 * frame here) and gives it as the frame's initial transform. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hicp.h>

#include "synth.h"

/* Receiver pose in the camera frame at approach fraction s in [0, 1]:
 * from 60 m behind and 15 m below the cameras to 12 m and 3 m, with a gentle
 * bank and heading wobble. */
static void truth_pose(double s, double R[9], double t[3])
{
  double range = 60.0 - 48.0 * s;
  synth_rotation(4.0 * sin(6.0 * s), -3.0 + 2.0 * s, 2.0 * cos(5.0 * s), R);
  t[0] = 1.5 * sin(3.0 * s);
  t[1] = -0.25 * range;
  t[2] = range;
}

/* c = a b for 4x4 row-major transforms */
static void compose(const hicp_transform *a, const hicp_transform *b, hicp_transform *c)
{
  hicp_transform r;
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      double acc = 0.0;
      for (int k = 0; k < 4; k++)
        acc += a->m[4 * i + k] * b->m[4 * k + j];
      r.m[4 * i + j] = acc;
    }
  *c = r;
}

static double rot_error_deg(const double A[9], const double B[9])
{
  double tr = 0.0;
  for (int i = 0; i < 9; i++)
    tr += A[i] * B[i];
  double c = (tr - 1.0) / 2.0;
  c = c > 1 ? 1 : c < -1 ? -1 : c;
  return acos(c) * 180.0 / M_PI;
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: %s BOEING.off [FRAMES]\n", argv[0]);
    return 2;
  }
  long want = 40;
  if (argc > 2) {
    char *end;
    want = strtol(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0')
      want = 0; /* "40x" is not a number of frames */
  }
  if (want < 2 || want > 100000) {
    fprintf(stderr, "aar_approach: FRAMES must be a whole number from 2 to 100000\n");
    return 2;
  }
  const int frames = (int)want;
  hicp_context *ctx;
  const int made = hicp_context_create(NULL, &ctx);
  if (made != HICP_OK) {
    fprintf(stderr, "aar_approach: cannot make a context: %s\n", hicp_strerror(made));
    return 1;
  }
  hicp_cloud *mesh = NULL;
  hicp_model *model = NULL;
  hicp_stream *stream = NULL;
  double *dense = NULL, *model_d = NULL;
  float *mf = NULL, *scan = NULL;
  unsigned char *keep = NULL;
  int status = 1;
  if (hicp_cloud_read(ctx, argv[1], HICP_FORMAT_AUTO, &mesh) != HICP_OK ||
      hicp_cloud_triangle_count(mesh) == 0) {
    if (mesh == NULL) /* the library's message names the file */
      fprintf(stderr, "aar_approach: %s\n", hicp_context_error(ctx));
    else
      fprintf(stderr, "aar_approach: %s: needs a mesh with faces\n", argv[1]);
    goto done;
  }
  /* The truth model: the receiver's surface sampled densely, built once. */
  /* (Dense samples of a CAD model's flat panels are slow for Qhull, about
   * a second per 5,000 here: see docs/design.md.) */
  enum { MODEL_POINTS = 15000, SENSE_POINTS = 30000 };
  double origin[3];
  hicp_cloud_origin(mesh, origin);
  synth_rng rng;
  synth_seed(&rng, 2024);
  dense = malloc(sizeof(double) * 3 * SENSE_POINTS);
  mf = malloc(sizeof(float) * 3 * MODEL_POINTS);
  scan = malloc(sizeof(float) * 3 * SENSE_POINTS);
  keep = malloc(SENSE_POINTS);
  model_d = malloc(sizeof(double) * 3 * MODEL_POINTS);
  if (dense == NULL || mf == NULL || scan == NULL || keep == NULL || model_d == NULL) {
    fprintf(stderr, "aar_approach: out of memory\n");
    goto done;
  }
  const int sampled = synth_sample_mesh(hicp_cloud_xyz(mesh), hicp_cloud_size(mesh), origin,
                                        hicp_cloud_triangles(mesh),
                                        hicp_cloud_triangle_count(mesh), MODEL_POINTS, &rng,
                                        model_d);
  if (sampled != 0) {
    if (sampled == -2)
      fprintf(stderr, "aar_approach: out of memory\n");
    else
      fprintf(stderr, "aar_approach: %s: a mesh with faces of positive area is needed\n",
              argv[1]);
    goto done;
  }
  for (int i = 0; i < 3 * MODEL_POINTS; i++)
    mf[i] = (float)model_d[i];
  free(model_d);
  model_d = NULL;
  if (hicp_model_build(ctx, mf, MODEL_POINTS, 0, NULL, &model) != HICP_OK) {
    fprintf(stderr, "aar_approach: %s\n", hicp_context_error(ctx));
    goto done;
  }
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.max_iter = 30; /* a real-time budget, as in the thesis's stereo runs */
  o.filter_start = 15;
  o.filter_sigma = 3.0;
  hicp_batch_options bo;
  hicp_batch_options_init(&bo);
  bo.track = 1;
  if (hicp_stream_create(ctx, model, &o, &bo, &stream) != HICP_OK) {
    fprintf(stderr, "aar_approach: %s\n", hicp_context_error(ctx));
    goto done;
  }
  printf("%5s %8s %7s %10s %12s %9s %5s\n", "frame", "range_m", "points", "rot_err_deg",
         "pos_err_m", "time_ms", "iter");
  double worst_rot = 0, worst_pos = 0, sum_ms = 0;
  hicp_transform pose_prev, pose_prev2; /* receiver poses in the camera frame */
  for (int k = 0; k < frames; k++) {
    double s = (double)k / (frames - 1), R[9], t[3];
    truth_pose(s, R, t);
    /* What the cameras see: fresh surface samples each frame, the part
     * facing the cameras (the direction from the receiver to the cameras
     * in the body frame is R^T (0 - t)), moved into the camera frame, with
     * stereo noise of sigma = 2e-5 r^2 metres: 7 cm at 60 m, 3 mm at 12 m. */
    if (synth_sample_mesh(hicp_cloud_xyz(mesh), hicp_cloud_size(mesh), origin,
                          hicp_cloud_triangles(mesh), hicp_cloud_triangle_count(mesh),
                          SENSE_POINTS, &rng, dense) != 0) {
      fprintf(stderr, "aar_approach: out of memory\n");
      goto done;
    }
    double view[3];
    for (int i = 0; i < 3; i++)
      view[i] = -(R[i] * t[0] + R[3 + i] * t[1] + R[6 + i] * t[2]);
    if (synth_visible(dense, SENSE_POINTS, view, keep) == SIZE_MAX) {
      fprintf(stderr, "aar_approach: out of memory\n");
      goto done;
    }
    double range = sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2]);
    double sigma = 2e-5 * range * range;
    size_t n = 0;
    for (int i = 0; i < SENSE_POINTS; i++) {
      if (!keep[i])
        continue;
      const double *x = &dense[3 * i];
      for (int d = 0; d < 3; d++)
        scan[3 * n + d] = (float)(R[3 * d] * x[0] + R[3 * d + 1] * x[1] + R[3 * d + 2] * x[2] +
                                  t[d] + sigma * synth_normal(&rng));
      n++;
    }
    /* The first frame starts from a coarse acquisition: the truth off by a
     * few degrees and half a metre; later frames from the previous pose. */
    hicp_transform init;
    if (k == 0) {
      double Rc[9], Re[9];
      synth_rotation(3.0, -2.0, 4.0, Re);
      for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
          Rc[3 * i + j] = Re[3 * i] * R[j] + Re[3 * i + 1] * R[3 + j] + Re[3 * i + 2] * R[6 + j];
      /* camera -> body: x = R^T (p - t), perturbed */
      hicp_transform_identity(&init);
      for (int i = 0; i < 3; i++) {
        double acc = 0;
        for (int j = 0; j < 3; j++) {
          init.m[4 * i + j] = Rc[3 * j + i];
          acc += Rc[3 * j + i] * t[j];
        }
        init.m[4 * i + 3] = -acc + 0.5;
      }
    }
    if (k >= 2) {
      /* constant velocity: P_k = (P_{k-1} P_{k-2}^-1) P_{k-1}; init = P_k^-1 */
      hicp_transform inv2, step, pred;
      hicp_transform_invert(&pose_prev2, &inv2);
      compose(&pose_prev, &inv2, &step);
      compose(&step, &pose_prev, &pred);
      hicp_transform_invert(&pred, &init);
    }
    if (hicp_stream_submit(stream, scan, n, k == 0 || k >= 2 ? &init : NULL, NULL) != HICP_OK) {
      fprintf(stderr, "aar_approach: %s\n", hicp_context_error(ctx));
      goto done;
    }
    hicp_result r;
    hicp_result_init(&r);
    const int got = hicp_stream_receive(stream, &r, 1);
    if (got != HICP_OK || r.error != HICP_OK) {
      /* the frame's own failure is in its result, a receive's in its code */
      fprintf(stderr, "aar_approach: frame %d: %s\n", k,
              got != HICP_OK ? hicp_strerror(got) : r.note[0] ? r.note : hicp_strerror(r.error));
      goto done;
    }
    pose_prev2 = pose_prev;
    pose_prev = r.inverse;
    /* The receiver's pose in the camera frame is the inverse result. */
    double Rest[9], test[3];
    for (int i = 0; i < 3; i++) {
      for (int j = 0; j < 3; j++)
        Rest[3 * i + j] = r.inverse.m[4 * i + j];
      test[i] = r.inverse.m[4 * i + 3];
    }
    double er = rot_error_deg(Rest, R);
    double ep = sqrt((test[0] - t[0]) * (test[0] - t[0]) + (test[1] - t[1]) * (test[1] - t[1]) +
                     (test[2] - t[2]) * (test[2] - t[2]));
    worst_rot = er > worst_rot ? er : worst_rot;
    worst_pos = ep > worst_pos ? ep : worst_pos;
    sum_ms += r.time_ms;
    printf("%5d %8.2f %7zu %10.4f %12.4f %9.2f %5d\n", k, range, n, er, ep, r.time_ms,
           r.iterations);
  }
  printf("approach: %d frames, worst rotation error %.3f deg, worst position error %.3f m, "
         "mean %.2f ms per frame (%.0f frames/s)\n",
         frames, worst_rot, worst_pos, sum_ms / frames, 1000.0 * frames / sum_ms);
  status = 0;
done:
  free(dense);
  free(model_d);
  free(mf);
  free(scan);
  free(keep);
  hicp_stream_destroy(stream);
  hicp_model_destroy(model);
  hicp_cloud_destroy(mesh);
  hicp_context_destroy(ctx);
  return status;
}
