/* test_register.c: registration against ground truth on real models, and
 * the engine's determinism: every nearest-neighbour method and every thread
 * count give the same bits. */
#include "config.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "icp.h"
#include "model.h"
#include "scheduler.h"
#include "synth.h"
#include "testhelp.h"

typedef struct scene {
  hicp_cloud *mesh;        /* the real model as read */
  hicp_cloud *model_cloud; /* the truth model: its surface densely sampled */
  hicp_model *model;
  double diag;
  float *scan;
  size_t n;
  hicp_transform truth; /* scan -> model */
} scene;

static double diag_of(const hicp_cloud *c)
{
  const float *p = hicp_cloud_xyz(c);
  double lo[3] = {HUGE_VAL, HUGE_VAL, HUGE_VAL}, hi[3] = {-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
  for (size_t i = 0; i < hicp_cloud_size(c); i++)
    for (int d = 0; d < 3; d++) {
      lo[d] = fmin(lo[d], p[3 * i + d]);
      hi[d] = fmax(hi[d], p[3 * i + d]);
    }
  return sqrt((hi[0] - lo[0]) * (hi[0] - lo[0]) + (hi[1] - lo[1]) * (hi[1] - lo[1]) +
              (hi[2] - lo[2]) * (hi[2] - lo[2]));
}

/* A scan of the model as a camera would see it: the mesh's vertices, or
 * (samples > 0) its surface resampled independently of them; the part facing
 * the camera kept; moved by (R, t) about the model's centroid; Gaussian
 * noise.  The truth is the inverse motion. */
static void make_scan(scene *s, const double rpy[3], const double trel[3], double noise,
                      const double view[3], uint64_t seed, size_t samples)
{
  const hicp_cloud *mc = s->mesh;
  size_t nv = hicp_cloud_size(mc);
  const float *xyz = hicp_cloud_xyz(mc);
  double origin[3];
  hicp_cloud_origin(mc, origin);
  synth_rng rng;
  synth_seed(&rng, seed);
  double *p;
  if (samples > 0) {
    p = malloc(sizeof(double) * 3 * samples);
    cr_assert_not_null(p);
    cr_assert_eq(synth_sample_mesh(xyz, nv, origin, hicp_cloud_triangles(mc),
                                   hicp_cloud_triangle_count(mc), samples, &rng, p),
                 0);
  } else {
    samples = nv;
    p = malloc(sizeof(double) * 3 * samples);
    cr_assert_not_null(p);
    for (size_t i = 0; i < nv; i++)
      for (int d = 0; d < 3; d++)
        p[3 * i + d] = origin[d] + xyz[3 * i + d];
  }
  unsigned char *keep = malloc(samples);
  cr_assert_not_null(keep);
  cr_assert_neq(synth_visible(p, samples, view, keep), SIZE_MAX);
  double c[3] = {0, 0, 0};
  for (size_t i = 0; i < nv; i++)
    for (int d = 0; d < 3; d++)
      c[d] += (origin[d] + xyz[3 * i + d]) / (double)nv;
  double R[9], t[3];
  synth_rotation(rpy[0], rpy[1], rpy[2], R);
  for (int d = 0; d < 3; d++)
    t[d] = trel[d] * s->diag;
  s->scan = malloc(sizeof(float) * 3 * samples);
  s->n = 0;
  for (size_t i = 0; i < samples; i++) {
    if (!keep[i])
      continue;
    double q[3] = {p[3 * i] - c[0], p[3 * i + 1] - c[1], p[3 * i + 2] - c[2]};
    for (int d = 0; d < 3; d++)
      s->scan[3 * s->n + d] = (float)(R[3 * d] * q[0] + R[3 * d + 1] * q[1] + R[3 * d + 2] * q[2] +
                                      c[d] + t[d] + noise * s->diag * synth_normal(&rng));
    s->n++;
  }
  hicp_transform_identity(&s->truth);
  for (int i = 0; i < 3; i++) {
    double acc = 0.0;
    for (int j = 0; j < 3; j++) {
      s->truth.m[4 * i + j] = R[3 * j + i];
      acc += R[3 * j + i] * (c[j] + t[j]);
    }
    s->truth.m[4 * i + 3] = c[i] - acc;
  }
  free(p);
  free(keep);
}

/* The truth model: the real mesh's vertices, or (dense) its surface sampled
 * densely for scans resampled independently of the vertices: point-to-point
 * ICP against a discrete model rests where the scan's pulls towards the
 * model's points balance, off the truth by an amount that shrinks as the
 * model grows denser (worst rotation error of the four models at the two
 * low noise levels, stop 68: 0.074 deg with 60,000 samples, 0.060 with
 * 120,000, 0.049 with 240,000; the same after 1,000 iterations, so not a
 * stop too early: docs/accuracy.md).  The ground truth takes TRUTH_SAMPLES;
 * the other tests, which compare runs with each other, not with the
 * targets, the cheaper MODEL_SAMPLES.
 *
 * Where that rest falls depends on the model's random sampling: over nine
 * samplings of bunny00's 240,000-point model (seeds 4242-4250), the worst
 * case ranged from 0.015 to 0.053 degrees, and at 480,000 points
 * boeing's still reached 0.046 (stop 68's review).  The test's samplings
 * meet the 0.05 degrees (worst 0.0487), but a bound inside that
 * spread would fail on a change of sampler or seed with no change in hicp,
 * so resampled scans are held to RESAMPLED_ROT_TOL, above the spread, and
 * the figures per level are printed (docs/accuracy.md). */
#define RESAMPLED_ROT_TOL 0.075
#define TRUTH_SAMPLES 240000
#define MODEL_SAMPLES 60000
static int load_scene_vertices(scene *s, const char *rel)
{
  memset(s, 0, sizeof *s);
  const char *path = th_data(rel);
  if (path == NULL)
    return 0;
  s->mesh = th_load_cloud(path);
  s->diag = diag_of(s->mesh);
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  cr_assert_eq(hicp_model_build_cloud(ctx, s->mesh, NULL, &s->model), 0, "%s",
               hicp_context_error(ctx));
  hicp_context_destroy(ctx);
  return 1;
}

static int load_scene_n(scene *s, const char *rel, size_t samples);

static int load_scene(scene *s, const char *rel)
{
  return load_scene_n(s, rel, MODEL_SAMPLES);
}

/* The same with `samples` points on the surface. */
static int load_scene_n(scene *s, const char *rel, size_t samples)
{
  memset(s, 0, sizeof *s);
  const char *path = th_data(rel);
  if (path == NULL)
    return 0;
  s->mesh = th_load_cloud(path);
  double origin[3];
  hicp_cloud_origin(s->mesh, origin);
  double *p = malloc(sizeof(double) * 3 * samples);
  synth_rng rng;
  synth_seed(&rng, 4242);
  cr_assert_eq(synth_sample_mesh(hicp_cloud_xyz(s->mesh), hicp_cloud_size(s->mesh), origin,
                                 hicp_cloud_triangles(s->mesh), hicp_cloud_triangle_count(s->mesh),
                                 samples, &rng, p),
               0);
  float *f = malloc(sizeof(float) * 3 * samples);
  for (size_t i = 0; i < 3 * samples; i++)
    f[i] = (float)p[i];
  free(p);
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  cr_assert_eq(hicp_cloud_from_xyz(ctx, f, samples, 0, &s->model_cloud), 0);
  free(f);
  s->diag = diag_of(s->model_cloud);
  cr_assert_eq(hicp_model_build_cloud(ctx, s->model_cloud, NULL, &s->model), 0, "%s",
               hicp_context_error(ctx));
  if (getenv("HICP_TEST_VERBOSE")) {
    hicp_model_info mi;
    hicp_model_info_init(&mi);
    hicp_model_get_info(s->model, &mi);
    fprintf(stderr, "model %s: %llu points, build %.0f ms (qhull %.0f)\n", rel,
            (unsigned long long)mi.points, mi.build_ms, mi.qhull_ms);
  }
  hicp_context_destroy(ctx);
  return 1;
}

static void free_scene(scene *s)
{
  free(s->scan);
  hicp_model_destroy(s->model);
  hicp_cloud_destroy(s->model_cloud);
  hicp_cloud_destroy(s->mesh);
}

static hicp_result run(const scene *s, const float *scan, size_t n, int threads,
                       const hicp_reg_options *o, const hicp_transform *init)
{
  hicp_context *ctx = th_context(threads, HICP_BACKEND_CPU);
  hicp_result r;
  hicp_result_init(&r);
  int rc = hicp_register(ctx, s->model, scan, n, o, init, &r);
  cr_assert_eq(rc, 0, "register: %s", hicp_context_error(ctx));
  hicp_context_destroy(ctx);
  return r;
}

/* Rotation error (degrees) and position error (fraction of the model
 * diagonal): how far apart the two transforms put the scan's centroid, which
 * is what "translation error" means for an object (the translation vectors
 * themselves also absorb rotation error times the distance to the origin). */
static void pose_error_at(const hicp_result *r, const hicp_transform *truth, const float *scan,
                          size_t n, double diag, double *rot_deg, double *trans_rel)
{
  *rot_deg = th_rotation_error_deg(r->transform.m, truth->m);
  double c[3] = {0, 0, 0};
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < 3; d++)
      c[d] += scan[3 * i + d] / (double)n;
  double e = 0.0;
  for (int i = 0; i < 3; i++) {
    double a = r->transform.m[4 * i + 3], b = truth->m[4 * i + 3];
    for (int j = 0; j < 3; j++) {
      a += r->transform.m[4 * i + j] * c[j];
      b += truth->m[4 * i + j] * c[j];
    }
    e += (a - b) * (a - b);
  }
  *trans_rel = sqrt(e) / diag;
}
#define pose_error(r, truth, diag, er, et) pose_error_at((r), (truth), s.scan, s.n, (diag), (er), (et))

/* One model, one scan kind, three noise levels: prints the achieved errors
 * and checks them against the targets. */
static void ground_truth(scene *s, const char *name, int resampled, double rot_tol,
                        double trans_tol)
{
  static const double noises[] = {1e-4, 1e-3, 1e-2};
  for (size_t ni = 0; ni < sizeof noises / sizeof *noises; ni++) {
    double worst_rot = 0.0, worst_trans = 0.0;
    int trials = resampled ? 2 : 3;
    for (int trial = 0; trial < trials; trial++) {
      synth_rng rng;
      synth_seed(&rng, 1000 * (uint64_t)resampled + 10 * ni + (uint64_t)trial + (uint64_t)strlen(name));
      /* up to 20 degrees about each axis, up to 10% of the extent */
      double rpy[3], trel[3];
      for (int d = 0; d < 3; d++) {
        rpy[d] = (2.0 * synth_uniform(&rng) - 1.0) * 20.0;
        trel[d] = (2.0 * synth_uniform(&rng) - 1.0) * 0.1 / sqrt(3.0);
      }
      /* a different camera direction for each trial */
      static const double views[3][3] = {{1, 1, 1}, {-1, 0.5, 1}, {1, -1, 0.5}};
      const double *view = views[trial % 3];
      make_scan(s, rpy, trel, noises[ni], view, 77 + (uint64_t)trial, resampled ? 20000 : 0);
      hicp_reg_options o;
      hicp_reg_options_init(&o);
      o.max_iter = 200;
      hicp_result r = run(s, s->scan, s->n, 2, &o, NULL);
      double er, et;
      pose_error_at(&r, &s->truth, s->scan, s->n, s->diag, &er, &et);
      if (getenv("HICP_TEST_VERBOSE"))
        fprintf(stderr, "  trial %d: %d iterations (%s), %.4f deg, %.2e diag, %.1f ms, scan %zu\n",
                trial, r.iterations, hicp_stop_name(r.stop), er, et, r.time_ms, s->n);
      /* fmax would drop a NaN trial: a NaN pose must fail (stop 68's review) */
      cr_assert(isfinite(er) && isfinite(et), "%s trial %d: rotation error %g, position %g", name,
                trial, er, et);
      worst_rot = fmax(worst_rot, er);
      worst_trans = fmax(worst_trans, et);
      free(s->scan);
      s->scan = NULL;
    }
    fprintf(stderr, "accuracy %-30s %-9s noise %.0e: worst rotation %.4f deg, position %.2e diag\n",
            name, resampled ? "resampled" : "vertices", noises[ni], worst_rot, worst_trans);
    if (noises[ni] <= 1e-3) {
      cr_expect_leq(worst_rot, rot_tol, "%s noise %g: rotation error %g deg", name, noises[ni],
                    worst_rot);
      cr_expect_leq(worst_trans, trans_tol, "%s noise %g: position error %g", name, noises[ni],
                    worst_trans);
    } else {
      cr_expect_leq(worst_rot, 1.0, "%s noise %g: rotation error %g deg", name, noises[ni],
                    worst_rot);
      cr_expect_leq(worst_trans, 1e-2, "%s noise %g: position error %g", name, noises[ni],
                    worst_trans);
    }
  }
}

/* Ground truth on the four real models: scans of the camera-facing part,
 * rotations up to 20 degrees about each axis, translations up to 10% of the
 * extent, noise 1e-4, 1e-3, 1e-2 of the diagonal.  Targets at the two low
 * noise levels: 0.05 degrees and 1e-3 of the diagonal, for scans of the
 * model's vertices; scans resampled independently of them, run against a
 * dense model of the surface (TRUTH_SAMPLES), are held to 1e-3 and to
 * RESAMPLED_ROT_TOL, the spread of the sampling bias (above). */
Test(register, ground_truth_real_models, .timeout = 900)
{
  static const char *models[] = {"meshes/bunny00.off", "meshes/ChineseDragon-10kv.off",
                                 "meshes/boeing.off", "meshes/fandisk_large.off"};
  int found = 0;
  for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
    scene s;
    if (!load_scene_vertices(&s, models[k]))
      continue;
    found++;
    ground_truth(&s, models[k], 0, 0.05, 1e-3);
    free_scene(&s);
    if (load_scene_n(&s, models[k], TRUTH_SAMPLES)) {
      ground_truth(&s, models[k], 1, RESAMPLED_ROT_TOL, 1e-3);
      free_scene(&s);
    }
  }
  if (!found)
    cr_skip_test("libcgal-demo data not found");
  /* the archive has all four: a model missing is a broken extraction, not
   * a reason to claim the rest (stop 64's audit) */
  cr_assert_eq(found, 4, "only %d of the 4 models found", found);
}

/* The same registration by every method and thread count: identical bits. */
Test(register, bitwise_methods_threads)
{
  scene s;
  if (!load_scene(&s, "meshes/bunny00.off"))
    cr_skip_test("libcgal-demo data not found");
  double rpy[3] = {10, -8, 12}, trel[3] = {0.02, 0.0, -0.01}, view[3] = {0, 0, 1};
  make_scan(&s, rpy, trel, 1e-3, view, 5, 20000);
  static const hicp_nn_method methods[] = {HICP_NN_PNN_OPT, HICP_NN_PNN, HICP_NN_KDANN,
                                           HICP_NN_ZERO, HICP_NN_KDTREE, HICP_NN_BRUTE};
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.max_iter = 30;
  o.tol = 0.0;
  hicp_result ref = run(&s, s.scan, s.n, 1, &o, NULL);
  cr_assert_eq(ref.iterations, 30);
  for (size_t k = 0; k < sizeof methods / sizeof *methods; k++) {
    for (int threads = 1; threads <= 3; threads++) {
      if (methods[k] == HICP_NN_BRUTE && threads != 2)
        continue; /* slow; one run is enough */
      o.nn = methods[k];
      hicp_result r = run(&s, s.scan, s.n, threads, &o, NULL);
      cr_assert_eq(r.threads, threads, "%d threads ran, not %d", r.threads, threads);
      cr_assert(memcmp(&r.transform, &ref.transform, sizeof r.transform) == 0,
                "%s with %d threads differs", hicp_nn_method_name(methods[k]), threads);
      cr_assert_eq(r.rmse, ref.rmse);
      cr_assert_eq(r.iterations, ref.iterations);
      /* the walks too: counted per chunk, whichever thread took a point */
      if (methods[k] == HICP_NN_PNN_OPT)
        cr_assert(memcmp(&r.walk, &ref.walk, sizeof r.walk) == 0 && r.walk.queries > 0,
                  "walk statistics differ with %d threads", threads);
    }
  }
  /* The vector row scans (cpu/walk_simd.c) give the reference's bits. */
  for (size_t k = 0; k < TH_NSIMD; k++) {
    setenv("HICP_SIMD", th_simd[k], 1);
    hicp_result r = run(&s, s.scan, s.n, 2, &o, NULL);
    cr_assert(memcmp(&r.transform, &ref.transform, sizeof r.transform) == 0,
              "HICP_SIMD=%s differs", th_simd[k]);
  }
  unsetenv("HICP_SIMD");
  /* And with every filter on, whose selection each variant's pass applies
   * on its own (stop 64's audit: an AVX2 pass that ignored the sigma
   * filter passed every test on a host that runs AVX-512) */
  hicp_reg_options of = o;
  of.max_dist = 0.05 * s.diag;
  of.trim = 0.9;
  of.filter_start = 3;
  of.filter_sigma = 2.0;
  const hicp_result ref_f = run(&s, s.scan, s.n, 2, &of, NULL);
  cr_assert(ref_f.inliers < ref.inliers && ref_f.inliers > 0, "the filters dropped nothing: %zu",
            (size_t)ref_f.inliers);
  for (size_t k = 0; k < TH_NSIMD; k++) {
    setenv("HICP_SIMD", th_simd[k], 1);
    hicp_result r = run(&s, s.scan, s.n, k % 2 + 1, &of, NULL);
    cr_assert(memcmp(&r.transform, &ref_f.transform, sizeof r.transform) == 0 &&
                  r.inliers == ref_f.inliers,
              "HICP_SIMD=%s, filtered, differs", th_simd[k]);
  }
  unsetenv("HICP_SIMD");
  /* Another chunk size sums in another shape: close, not necessarily equal. */
  o.nn = HICP_NN_PNN_OPT;
  o.chunk_points = 256;
  hicp_result r = run(&s, s.scan, s.n, 2, &o, NULL);
  for (int i = 0; i < 16; i++)
    cr_assert(fabs(r.transform.m[i] - ref.transform.m[i]) < 1e-9 * (1 + fabs(ref.transform.m[i])));
  free_scene(&s);
}

/* n points on the faces of a 2 x 1 x 0.5 box (exactly coplanar, on the
 * points' hull: the guards' case, lib/delaunay_qhull.c), turned by `deg`
 * degrees about z and y and moved by `shift`. */
static float *box_faces(size_t n, uint64_t seed, double deg, const double shift[3])
{
  th_rng r;
  th_rng_seed(&r, seed);
  const double side[3] = {2.0, 1.0, 0.5}, a = deg * M_PI / 180.0;
  float *p = malloc(sizeof(float) * 3 * n);
  cr_assert_not_null(p);
  for (size_t i = 0; i < n; i++) {
    double x[3];
    th_box_face_point(&r, i, side, x);
    const double y[3] = {cos(a) * x[0] - sin(a) * x[1], sin(a) * x[0] + cos(a) * x[1], x[2]};
    const double z[3] = {cos(a) * y[0] + sin(a) * y[2], y[1], -sin(a) * y[0] + cos(a) * y[2]};
    for (int d = 0; d < 3; d++)
      p[3 * i + d] = (float)(z[d] + shift[d]);
  }
  return p;
}

/* A scan around the model, on a sphere of radius 6 about the centre of a
 * 2 x 1 x 0.5 box whose faces are the model (exactly flat faces on its
 * hull: a graph with guards, R = 6.9): its queries lie beyond the guards'
 * reach (pp/nn.h, hicp__guard_safe), in every direction, where the walks'
 * answers are the kd-tree's and a graph without the guards' test answers
 * wrong (stop 52's review: a scan off one corner never met a missing
 * edge), and come within it as ICP draws the scan in, where the
 * certificates' slacks are cut (hicp__guard_cut).  Every method, thread
 * count and vector variant gives brute force's bits. */
Test(register, scan_around_box_faces_bitwise)
{
  const size_t nm = 6000, ns = 3000;
  const double none[3] = {0, 0, 0};
  float *mp = box_faces(nm, 3, 0.0, none), *sp = malloc(sizeof(float) * 3 * ns);
  cr_assert_not_null(sp);
  th_rng rng;
  th_rng_seed(&rng, 4);
  for (size_t i = 0; i < ns; i++) {
    double u[3], len = 0.0;
    for (int d = 0; d < 3; d++) {
      u[d] = th_normal(&rng);
      len += u[d] * u[d];
    }
    const double c[3] = {1.0, 0.5, 0.25};
    for (int d = 0; d < 3; d++)
      sp[3 * i + d] = (float)(c[d] + 6.0 * u[d] / sqrt(len));
  }
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  scene s;
  memset(&s, 0, sizeof s);
  cr_assert_eq(hicp_model_build(ctx, mp, nm, 0, NULL, &s.model), 0, "%s",
               hicp_context_error(ctx));
  cr_assert(s.model->has_delaunay, "no graph: %s", s.model->fallback);
  hicp_context_destroy(ctx);
  static const hicp_nn_method methods[] = {HICP_NN_BRUTE,  HICP_NN_PNN_OPT, HICP_NN_PNN,
                                           HICP_NN_KDANN, HICP_NN_ZERO,    HICP_NN_KDTREE};
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.max_iter = 40;
  o.tol = 0.0;
  o.nn = HICP_NN_BRUTE;
  const hicp_result ref = run(&s, sp, ns, 2, &o, NULL);
  cr_assert_eq(ref.iterations, 40);
  for (size_t k = 1; k < sizeof methods / sizeof *methods; k++) {
    o.nn = methods[k];
    for (int threads = 1; threads <= 2; threads++) {
      const hicp_result r = run(&s, sp, ns, threads, &o, NULL);
      cr_assert(memcmp(&r.transform, &ref.transform, sizeof r.transform) == 0,
                "%s with %d threads differs from brute force", hicp_nn_method_name(methods[k]),
                threads);
    }
  }
  o.nn = HICP_NN_PNN_OPT;
  for (size_t k = 0; k < TH_NSIMD; k++) {
    setenv("HICP_SIMD", th_simd[k], 1);
    const hicp_result r = run(&s, sp, ns, 2, &o, NULL);
    cr_assert(memcmp(&r.transform, &ref.transform, sizeof r.transform) == 0,
              "HICP_SIMD=%s differs from brute force", th_simd[k]);
  }
  unsetenv("HICP_SIMD");
  hicp_model_destroy(s.model);
  free(mp);
  free(sp);
}

/* The start table (lib/start_table.c) decides where the walks without a
 * previous match begin, never where they end: the same model without it
 * (each such walk then starts from its own kd descent, cpu/chunk.h) gives
 * the same bits from other walks.  (Fewer steps is not the point: a
 * descent's leaf lies nearer than a cell's vertex, at a dozen loads'
 * cost; the time is measured in docs/cpu-engine.md.)  A scan far from its
 * pose (E1's) and one near it (a tracker's next frame). */
Test(register, start_table_moves_time_not_bits)
{
  scene s;
  if (!load_scene(&s, "meshes/bunny00.off"))
    cr_skip_test("libcgal-demo data not found");
  cr_assert_not_null(s.model->start);
  static const double rpy[2][3] = {{10, -8, 12}, {0.5, -0.4, 0.6}};
  static const double trel[2][3] = {{0.02, 0.0, -0.01}, {0.002, 0.001, -0.001}};
  const double view[3] = {0, 0, 1};
  for (int c = 0; c < 2; c++) {
    make_scan(&s, rpy[c], trel[c], 1e-3, view, 7 + c, 20000);
    hicp_reg_options o;
    hicp_reg_options_init(&o);
    o.max_iter = c == 0 ? 30 : 10;
    o.tol = 0.0;
    hicp_result with = run(&s, s.scan, s.n, 2, &o, NULL);
    uint32_t *table = s.model->start;
    s.model->start = NULL;
    hicp_result without = run(&s, s.scan, s.n, 2, &o, NULL);
    s.model->start = table;
    cr_assert(memcmp(&with.transform, &without.transform, sizeof with.transform) == 0,
              "case %d: the start table changed the transform", c);
    cr_assert_eq(with.rmse, without.rmse);
    cr_assert_eq(with.walk.queries, without.walk.queries);
    cr_assert_neq(with.walk.steps, without.walk.steps, "case %d: the table changed no walk", c);
    free(s.scan);
    s.scan = NULL;
  }
  free_scene(&s);
}

/* A model of more than 65,536 vertices takes the walk variants with the
 * large model's prefetches (cpu/walk_simd.c, HICP_CPU_BIG_NV): the same
 * bits as the scalar reference, for every vector variant and thread
 * count, walks included. */
Test(register, bitwise_large_model, .timeout = 600)
{
  scene s;
  if (!load_scene_n(&s, "meshes/bunny00.off", 70000))
    cr_skip_test("libcgal-demo data not found");
  hicp_model_info mi;
  hicp_model_info_init(&mi);
  hicp_model_get_info(s.model, &mi);
  cr_assert_gt(mi.vertices, 65536, "%llu vertices: not a large model",
               (unsigned long long)mi.vertices);
  double rpy[3] = {10, -8, 12}, trel[3] = {0.02, 0.0, -0.01}, view[3] = {0, 0, 1};
  make_scan(&s, rpy, trel, 1e-3, view, 6, 20000);
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.max_iter = 30;
  o.tol = 0.0;
  setenv("HICP_SIMD", "scalar", 1);
  hicp_result ref = run(&s, s.scan, s.n, 1, &o, NULL);
  cr_assert_eq(ref.iterations, 30);
  cr_assert_gt(ref.walk.steps, 0);
  for (size_t k = 0; k < TH_NSIMD; k++) {
    setenv("HICP_SIMD", th_simd[k], 1);
    for (int threads = 1; threads <= 2; threads++) {
      hicp_result r = run(&s, s.scan, s.n, threads, &o, NULL);
      cr_assert(memcmp(&r.transform, &ref.transform, sizeof r.transform) == 0,
                "HICP_SIMD=%s with %d threads differs", th_simd[k], threads);
      cr_assert(memcmp(&r.walk, &ref.walk, sizeof r.walk) == 0,
                "HICP_SIMD=%s with %d threads: walk statistics differ", th_simd[k], threads);
    }
  }
  unsetenv("HICP_SIMD");
  free_scene(&s);
}

/* Forward (scan moved), inverse (the result's inverse is the motion), and
 * shifted far from the origin (both clouds 1000 diagonals away). */
Test(register, forward_inverse_shifted)
{
  scene s;
  if (!load_scene(&s, "meshes/ChineseDragon-10kv.off"))
    cr_skip_test("libcgal-demo data not found");
  double rpy[3] = {-12, 7, 15}, trel[3] = {0.03, -0.04, 0.02}, view[3] = {1, 0.5, 0.2};
  make_scan(&s, rpy, trel, 1e-4, view, 9, 20000);
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.max_iter = 200;
  hicp_result r = run(&s, s.scan, s.n, 2, &o, NULL);
  double er, et;
  pose_error(&r, &s.truth, s.diag, &er, &et);
  cr_assert_leq(er, 0.05, "forward rotation error %g", er);
  cr_assert_leq(et, 1e-3, "forward translation error %g", et);
  hicp_transform inv_truth;
  hicp_transform_invert(&s.truth, &inv_truth);
  cr_assert_leq(th_rotation_error_deg(r.inverse.m, inv_truth.m), 0.05);
  /* model -> scan applied to the model's centroid lands where the scan has it */
  hicp_transform prod; /* inverse * transform = identity */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      double acc = 0;
      for (int k = 0; k < 4; k++)
        acc += r.inverse.m[4 * i + k] * r.transform.m[4 * k + j];
      prod.m[4 * i + j] = acc;
    }
  for (int i = 0; i < 16; i++)
    cr_assert(fabs(prod.m[i] - (i % 5 == 0)) < 1e-12);

  /* shifted: move the scan by a large offset and start from the matching
   * initial translation; the answer is the same motion composed. */
  double shift = 1000.0 * s.diag;
  float *far = malloc(sizeof(float) * 3 * s.n);
  for (size_t i = 0; i < s.n; i++)
    for (int d = 0; d < 3; d++)
      far[3 * i + d] = s.scan[3 * i + d] + (float)(d == 0 ? shift : 0.0);
  hicp_transform init;
  hicp_transform_identity(&init);
  init.m[3] = -shift;
  hicp_result rf = run(&s, far, s.n, 2, &o, &init);
  double er2, et2;
  hicp_transform truth2 = s.truth; /* x = R (p - shift) + t */
  truth2.m[3] -= s.truth.m[0] * shift;
  truth2.m[7] -= s.truth.m[4] * shift;
  truth2.m[11] -= s.truth.m[8] * shift;
  pose_error_at(&rf, &truth2, far, s.n, s.diag, &er2, &et2);
  /* float scan coordinates 1000 diagonals out lose ~1e-4 of the diagonal
   * (measured 0.029 degrees, 1.1e-4): the targets still hold,
   * which the test held to 0.2 degrees and 2e-3 until stop 64's audit */
  cr_assert_leq(er2, 0.05, "shifted rotation error %g", er2);
  cr_assert_leq(et2, 1e-3, "shifted translation error %g", et2);
  fprintf(stderr, "shifted 1000 diagonals: rotation %.4f deg, position %.2e diag\n", er2, et2);
  free(far);
  free_scene(&s);
}

Test(register, outliers_with_filter)
{
  scene s;
  if (!load_scene(&s, "meshes/bunny00.off"))
    cr_skip_test("libcgal-demo data not found");
  double rpy[3] = {8, -5, 10}, trel[3] = {0.02, 0.02, 0.0}, view[3] = {0, 0.3, 1};
  make_scan(&s, rpy, trel, 1e-3, view, 21, 20000);
  /* 20% gross outliers, uniform in a box twice the scan's size */
  size_t nout = s.n / 4; /* 20% of the total */
  float *p = malloc(sizeof(float) * 3 * (s.n + nout));
  memcpy(p, s.scan, sizeof(float) * 3 * s.n);
  synth_rng rng;
  synth_seed(&rng, 3);
  float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
  for (size_t i = 0; i < s.n; i++)
    for (int d = 0; d < 3; d++) {
      lo[d] = fminf(lo[d], s.scan[3 * i + d]);
      hi[d] = fmaxf(hi[d], s.scan[3 * i + d]);
    }
  for (size_t i = s.n; i < s.n + nout; i++)
    for (int d = 0; d < 3; d++)
      p[3 * i + d] = lo[d] - 0.5f * (hi[d] - lo[d]) + 2.0f * (hi[d] - lo[d]) * (float)synth_uniform(&rng);
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.max_iter = 100;
  hicp_result plain = run(&s, p, s.n + nout, 2, &o, NULL);
  double er0, et0;
  pose_error(&plain, &s.truth, s.diag, &er0, &et0);
  o.filter_start = 5;
  o.filter_sigma = 3.0;
  hicp_result filt = run(&s, p, s.n + nout, 2, &o, NULL);
  double er, et;
  pose_error(&filt, &s.truth, s.diag, &er, &et);
  fprintf(stderr, "outliers 20%%: plain ICP %.3f deg %.2e diag; sigma filter %.4f deg %.2e diag\n",
          er0, et0, er, et);
  cr_assert_gt(er0, 1.0, "20%% outliers should throw plain ICP off (%g deg)", er0);
  cr_assert_leq(er, 0.05, "filtered rotation error %g (unfiltered %g)", er, er0);
  cr_assert_leq(et, 1e-3, "filtered translation error %g", et);
  cr_assert_lt(filt.fitness, 0.9);
  /* Below S = 2 too (hicp__sigma_k): the window holds its width.  Until
   * stop 56 it shrank at every iteration: S = 1.25 left this pose 1.05
   * degrees off, keeping 31% of the pairs (with the samples in drawn
   * order, S = 1.25, 1.5 and 1.75 left it 1.58, 0.54 and 2.03 degrees off,
   * keeping 23%, 0.2% and 18%).  (At S = 1 the filter, two-sided as the
   * thesis has it, also drops the nearest pairs while the pose is still
   * far: 0.29 degrees.) */
  for (double S = 1.25; S <= 2.0; S += 0.25) {
    o.filter_sigma = S;
    hicp_result r = run(&s, p, s.n + nout, 2, &o, NULL);
    pose_error(&r, &s.truth, s.diag, &er, &et);
    fprintf(stderr, "outliers 20%%: sigma filter S = %.2f: %.4f deg %.2e diag, fitness %.3f, stop %d\n",
            S, er, et, r.fitness, (int)r.stop);
    cr_assert_neq(r.stop, HICP_STOP_NO_PAIRS, "S = %g", S);
    cr_assert_leq(er, 0.05, "S = %g: rotation error %g", S, er);
    cr_assert_leq(et, 1e-3, "S = %g: translation error %g", S, et);
    cr_assert_gt(r.fitness, 0.3, "S = %g: fitness %g", S, r.fitness);
  }
  o.filter_sigma = 3.0;
  o.filter_start = -1;
  o.trim = 0.75;
  hicp_result trim = run(&s, p, s.n + nout, 2, &o, NULL);
  pose_error(&trim, &s.truth, s.diag, &er, &et);
  fprintf(stderr, "outliers 20%%: trimmed ICP (0.75) %.4f deg %.2e diag\n", er, et);
  cr_assert_leq(er, 0.05, "trimmed rotation error %g", er);
  cr_assert_leq(et, 1e-3, "trimmed translation error %g", et);
  free(p);
  free_scene(&s);
}

/* Issue 4 (thesis 3.8): a pair the sigma filter drops may rejoin later.
 * Were a drop final, the kept set could only shrink, and the count of kept
 * pairs could never grow from one iteration to a later one.  The scan is
 * the model's own vertices, moved 15 degrees: while the pose is far, the
 * pairs at the ends of the scan lie beyond the window and drop out; as the
 * pose converges their distances shrink into it.  Measured (stop 65):
 * 12,981 of 15,062 pairs kept after 10 updates, 14,497 after 100. */
Test(register, filtered_pairs_rejoin)
{
  scene s;
  if (!load_scene_vertices(&s, "meshes/bunny00.off"))
    cr_skip_test("libcgal-demo data not found");
  double rpy[3] = {15, -10, 12}, trel[3] = {0.05, 0.03, 0.0}, view[3] = {0, 0.3, 1};
  make_scan(&s, rpy, trel, 0.0, view, 21, 0);
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.filter_start = 0;
  o.filter_sigma = 2.0;
  o.tol = 0.0;
  o.max_iter = 10;
  hicp_result early = run(&s, s.scan, s.n, 2, &o, NULL);
  o.max_iter = 100;
  hicp_result late = run(&s, s.scan, s.n, 2, &o, NULL);
  double er, et;
  pose_error(&late, &s.truth, s.diag, &er, &et);
  fprintf(stderr, "rejoin: %llu of %zu pairs kept after 10 updates, %llu after 100 (%.2e deg)\n",
          (unsigned long long)early.inliers, s.n, (unsigned long long)late.inliers, er);
  cr_assert_eq(early.iterations, 10);
  cr_assert_eq(late.iterations, 100);
  cr_assert_gt(late.inliers, early.inliers + s.n / 50, "kept %llu after 10 updates, %llu after 100",
               (unsigned long long)early.inliers, (unsigned long long)late.inliers);
  cr_assert_leq(er, 0.01, "rotation error %g", er);
  cr_assert_leq(et, 1e-4, "translation error %g", et);
  free_scene(&s);
}

/* Synthetic checks that need no data files. */
static hicp_model *small_model(float *pts, size_t n)
{
  th_rng r;
  th_rng_seed(&r, 1);
  for (size_t i = 0; i < n; i++) {
    double u = th_uniform(&r) * 2 * M_PI, v = acos(2 * th_uniform(&r) - 1);
    pts[3 * i] = (float)(2.0 * sin(v) * cos(u));
    pts[3 * i + 1] = (float)(1.0 * sin(v) * sin(u));
    pts[3 * i + 2] = (float)(0.5 * cos(v));
  }
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  hicp_model *m;
  cr_assert_eq(hicp_model_build(ctx, pts, n, 0, NULL, &m), 0);
  hicp_context_destroy(ctx);
  return m;
}

Test(register, degenerate_scans_and_options)
{
  float pts[3 * 2000];
  hicp_model *m = small_model(pts, 2000);
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  hicp_result r;
  hicp_result_init(&r);
  /* all scan points identical */
  float same[3 * 50];
  for (int i = 0; i < 50; i++) {
    same[3 * i] = 0.3f;
    same[3 * i + 1] = 0.2f;
    same[3 * i + 2] = 0.9f;
  }
  cr_assert_eq(hicp_register(ctx, m, same, 50, NULL, NULL, &r), 0, "%s", hicp_context_error(ctx));
  cr_assert(r.degenerate);
  for (int i = 0; i < 16; i++)
    cr_assert(isfinite(r.transform.m[i]));
  /* n identical points determine no rotation at all: their cross-covariance
   * is zero but for the sums' rounding, which the frame's floor (lib/icp.c
   * frame_s_noise) must take for zero; without it the rounding's
   * eigenvectors picked an arbitrary rotation.  The identity, flagged. */
  static float pile[3 * 300];
  for (int n = 1; n <= 300; n++) {
    const float at[3] = {0.3f + 0.001f * (float)(n % 7), 0.2f, 0.9f - 0.002f * (float)(n % 5)};
    for (int i = 0; i < n; i++)
      memcpy(&pile[3 * i], at, sizeof at);
    hicp_result_init(&r);
    cr_assert_eq(hicp_register(ctx, m, pile, (size_t)n, NULL, NULL, &r), 0, "%d points: %s", n,
                 hicp_context_error(ctx));
    cr_assert(r.degenerate, "%d identical points: not flagged degenerate", n);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        cr_assert_leq(fabs(r.transform.m[4 * i + j] - (i == j)), 1e-12,
                      "%d identical points: rotation entry (%d, %d) is %.17g", n, i, j,
                      r.transform.m[4 * i + j]);
  }
  /* collinear scan */
  float line[3 * 50];
  for (int i = 0; i < 50; i++) {
    line[3 * i] = -1.0f + 0.04f * (float)i;
    line[3 * i + 1] = 0.0f;
    line[3 * i + 2] = 0.6f;
  }
  cr_assert_eq(hicp_register(ctx, m, line, 50, NULL, NULL, &r), 0);
  for (int i = 0; i < 16; i++)
    cr_assert(isfinite(r.transform.m[i]));
  cr_assert_eq(hicp_transform_check(&r.transform), 0);
  /* max_iter 0 returns the initial pose with its error */
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.max_iter = 0;
  hicp_transform init;
  hicp_transform_identity(&init);
  init.m[3] = 0.25;
  cr_assert_eq(hicp_register(ctx, m, pts, 2000, &o, &init, &r), 0);
  cr_assert_eq(memcmp(&r.transform, &init, sizeof init), 0);
  cr_assert_eq(r.iterations, 0);
  cr_assert_eq(r.stop, HICP_STOP_MAX_ITER);
  cr_assert_eq(r.converged, 0);
  /* the stop tests that ended it are solve time, as the device counts
   * them (stop 69's review: 0 here, where no iteration went on) */
  cr_assert_gt(r.solve_ms, 0.0);
  /* registering the model to itself converges at once to the identity */
  hicp_reg_options_init(&o);
  cr_assert_eq(hicp_register(ctx, m, pts, 2000, &o, NULL, &r), 0);
  cr_assert_eq(r.rmse, 0.0);
  cr_assert(r.converged);
  /* max-dist far below every distance: no pairs */
  hicp_reg_options_init(&o);
  o.max_dist = 1e-9;
  init.m[3] = 5.0;
  cr_assert_eq(hicp_register(ctx, m, pts, 2000, &o, &init, &r), 0);
  cr_assert_eq(r.stop, HICP_STOP_NO_PAIRS);
  cr_assert_eq(r.inliers, 0);
  /* out-of-range options */
  hicp_reg_options_init(&o);
  o.max_iter = -1;
  cr_assert_eq(hicp_register(ctx, m, pts, 10, &o, NULL, &r), HICP_EINVAL);
  hicp_reg_options_init(&o);
  o.tol = -2;
  cr_assert_eq(hicp_register(ctx, m, pts, 10, &o, NULL, &r), HICP_EINVAL);
  hicp_reg_options_init(&o);
  o.trim = 0.0;
  cr_assert_eq(hicp_register(ctx, m, pts, 10, &o, NULL, &r), HICP_EINVAL);
  hicp_reg_options_init(&o);
  o.chunk_points = 1000;
  cr_assert_eq(hicp_register(ctx, m, pts, 10, &o, NULL, &r), HICP_EINVAL);
  cr_assert(strstr(hicp_context_error(ctx), "power of two") != NULL);
  hicp_reg_options_init(&o);
  o.filter_sigma = 0;
  cr_assert_eq(hicp_register(ctx, m, pts, 10, &o, NULL, &r), HICP_EINVAL);
  hicp_reg_options_init(&o);
  o.max_dist = NAN;
  cr_assert_eq(hicp_register(ctx, m, pts, 10, &o, NULL, &r), HICP_EINVAL);
  hicp_reg_options_init(&o);
  o.flags = 4;
  cr_assert_eq(hicp_register(ctx, m, pts, 10, &o, NULL, &r), HICP_EINVAL);
  /* bad init, NaN scan, empty scan, uninitialised result */
  init.m[0] = 2.0;
  cr_assert_eq(hicp_register(ctx, m, pts, 10, NULL, &init, &r), HICP_EINVAL);
  float nan_pt[6] = {0, 0, 0, 0, NAN, 0};
  cr_assert_eq(hicp_register(ctx, m, nan_pt, 2, NULL, NULL, &r), HICP_ENONFINITE);
  cr_assert_eq(hicp_register(ctx, m, pts, 0, NULL, NULL, &r), HICP_EEMPTY);
  hicp_result raw;
  memset(&raw, 0, sizeof raw);
  cr_assert_eq(hicp_register(ctx, m, pts, 10, NULL, NULL, &raw), HICP_EINVAL);
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
}

/* (stop 57, a mutation review) The rotation threshold's plan is
 * 1 - cos(min_step_rot_deg), made as 2 sin^2(half): a factor lost there
 * moved the threshold by sqrt(2) in angle, which the one-step test's
 * thresholds (180 degrees, 1e-7) could not see. */
/* The rotation threshold's plan (1 - cos) of options o. */
static double plan_step_c(hicp_context *ctx, const hicp_model *m, const hicp_reg_options *o)
{
  hicp__plan plan;
  size_t stride;
  cr_assert_eq(hicp__make_plan(ctx, m, o, &plan, &stride), 0, "%s", hicp_context_error(ctx));
  return plan.conv.step_c;
}

Test(register, rotation_threshold_plan)
{
  float pts[3 * 500];
  hicp_model *m = small_model(pts, 500);
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  const double degs[4] = {0.01, 0.5, 2.0, 30.0};
  for (int k = 0; k < 4; k++) {
    hicp_reg_options o;
    hicp_reg_options_init(&o);
    o.min_step_rot_deg = degs[k];
    const double step_c = plan_step_c(ctx, m, &o);
    const double a = degs[k] * M_PI / 180.0; /* 1 - cos a, without its cancellation */
    const double want = sin(a) * sin(a) / (1.0 + cos(a));
    cr_assert(fabs(step_c - want) <= 1e-12 * want, "%g degrees: %.17g, want %.17g", degs[k],
              step_c, want);
  }
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
}

/* The trimming tests' case: a model of 2,000 points (small_model), a scan
 * of its first 500 with noise 0.01 (off the vertices: distances differ),
 * and an initial pose 0.02 off in x. */
static hicp_model *trim_case(float pts[3 * 2000], float scan[3 * 500], hicp_transform *init)
{
  hicp_model *m = small_model(pts, 2000);
  th_rng r0;
  th_rng_seed(&r0, 5);
  for (int i = 0; i < 3 * 500; i++)
    scan[i] = pts[i] + (float)(0.01 * th_normal(&r0));
  hicp_transform_identity(init);
  init->m[3] = 0.02;
  return m;
}

/* (stop 57, a mutation review) Trimming keeps the best ceil(trim * n)
 * pairs exactly, where the distances differ (ties at the threshold are
 * all kept): no test counted them, and a threshold one pair short went
 * unseen.  At the initial pose (max_iter 0) and after iterations. */
Test(register, trim_keeps_its_count)
{
  float pts[3 * 2000], scan[3 * 500];
  hicp_transform init;
  hicp_model *m = trim_case(pts, scan, &init);
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  const double trims[3] = {0.5, 0.3, 0.999};
  const uint64_t want[3] = {250, 150, 500};
  for (int t = 0; t < 3; t++)
    for (int iters = 0; iters <= 10; iters += 10) {
      hicp_reg_options o;
      hicp_reg_options_init(&o);
      o.trim = trims[t];
      o.max_iter = iters;
      o.tol = 0;
      hicp_result r;
      hicp_result_init(&r);
      cr_assert_eq(hicp_register(ctx, m, scan, 500, &o, &init, &r), 0, "%s",
                   hicp_context_error(ctx));
      cr_assert_eq(r.inliers, want[t], "trim %g, %d iterations: %llu pairs kept", trims[t],
                   iters, (unsigned long long)r.inliers);
    }
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
}

static int cmp_double(const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Squared distances, in double, from each scan point moved by T (scan ->
 * model) to its nearest of the nv points pts, by brute force: which pairs
 * max_dist leaves, counted without the library's search. */
static void brute_d2(const float *pts, size_t nv, const hicp_transform *T, const float *scan,
                     size_t n, double *d2)
{
  for (size_t i = 0; i < n; i++) {
    double q[3];
    for (int r = 0; r < 3; r++)
      q[r] = T->m[4 * r] * scan[3 * i] + T->m[4 * r + 1] * scan[3 * i + 1] +
             T->m[4 * r + 2] * scan[3 * i + 2] + T->m[4 * r + 3];
    double best = HUGE_VAL;
    for (size_t j = 0; j < nv; j++) {
      const double dx = q[0] - pts[3 * j], dy = q[1] - pts[3 * j + 1], dz = q[2] - pts[3 * j + 2];
      best = fmin(best, dx * dx + dy * dy + dz * dz);
    }
    d2[i] = best;
  }
}

/* The pairs within max_dist md at T, by brute force; no distance may lie
 * so near md (1e-6 of it) that the library's float search could count it
 * otherwise. */
static uint64_t brute_candidates(const float *pts, size_t nv, const hicp_transform *T,
                                 const float *scan, size_t n, double md, const char *what)
{
  double *d2 = malloc(sizeof(double) * n);
  cr_assert_not_null(d2);
  brute_d2(pts, nv, T, scan, n, d2);
  uint64_t c = 0;
  for (size_t i = 0; i < n; i++) {
    const double d = sqrt(d2[i]);
    cr_assert_gt(fabs(d - md), 1e-6 * md,
                 "%s: point %zu lies %.17g from the model, too near max_dist %.17g", what, i, d,
                 md);
    c += d <= md;
  }
  free(d2);
  return c;
}

/* (stop 66's mutation review) trim's fraction is of the pairs within
 * max_dist (hicp.h): the inliers are ceil(trim * candidates), the
 * candidates those max_dist leaves, counted here by brute force at the
 * returned pose.  trim_keeps_its_count sets no max_dist, so a threshold
 * taken over all pairs (M10: the quantile of every distance, the candidates
 * then those under it and max_dist) went unseen: with max_dist leaving 300
 * of 500 pairs, trim 0.5 kept 250 of them where 150 are due.  max_dist at
 * the initial pose's 60% quantile; at the initial pose (max_iter 0; with
 * trim 1, the library's own count of the candidates agrees) and after 10
 * iterations. */
Test(register, trim_is_a_fraction_of_the_pairs_within_max_dist)
{
  float pts[3 * 2000], scan[3 * 500];
  hicp_transform init;
  hicp_model *m = trim_case(pts, scan, &init);
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  double d2[500];
  brute_d2(pts, 2000, &init, scan, 500, d2);
  qsort(d2, 500, sizeof *d2, cmp_double);
  const double md = 0.5 * (sqrt(d2[299]) + sqrt(d2[300]));
  cr_assert_eq(brute_candidates(pts, 2000, &init, scan, 500, md, "initial pose"), 300);
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.max_dist = md;
  o.max_iter = 0;
  hicp_result r;
  hicp_result_init(&r);
  cr_assert_eq(hicp_register(ctx, m, scan, 500, &o, &init, &r), 0, "%s", hicp_context_error(ctx));
  cr_assert_eq(r.inliers, 300, "max_dist %g, no trim: %llu pairs kept, 300 within it", md,
               (unsigned long long)r.inliers);
  /* trim num / den, ceil(trim * c) in integers */
  const uint64_t num[2] = {1, 3}, den[2] = {2, 10};
  for (int t = 0; t < 2; t++)
    for (int iters = 0; iters <= 10; iters += 10) {
      hicp_reg_options_init(&o);
      o.max_dist = md;
      o.trim = (double)num[t] / (double)den[t];
      o.max_iter = iters;
      o.tol = 0;
      hicp_result_init(&r);
      cr_assert_eq(hicp_register(ctx, m, scan, 500, &o, &init, &r), 0, "%s",
                   hicp_context_error(ctx));
      char what[64];
      snprintf(what, sizeof what, "trim %g, %d iterations", o.trim, iters);
      const uint64_t c = brute_candidates(pts, 2000, &r.transform, scan, 500, md, what);
      cr_assert(c > 0 && c < 500, "%s: %llu of 500 pairs within max_dist", what,
                (unsigned long long)c);
      const uint64_t want = (num[t] * c + den[t] - 1) / den[t];
      if (getenv("HICP_TEST_VERBOSE"))
        fprintf(stderr, "%s: %llu kept of %llu within max_dist %g\n", what,
                (unsigned long long)r.inliers, (unsigned long long)c, md);
      cr_assert_eq(r.inliers, want, "%s: %llu pairs kept, want ceil(%g * %llu) = %llu", what,
                   (unsigned long long)r.inliers, o.trim, (unsigned long long)c,
                   (unsigned long long)want);
    }
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
}

/* Each increment threshold works alone (0 is off and takes no part), and
 * the sigma filter keeps a scan whose pair distances are all equal, for
 * every count (the mean of equal values rounds to a neighbour of them). */
Test(register, one_step_threshold_and_equal_distances)
{
  float pts[3 * 2000];
  hicp_model *m = small_model(pts, 2000);
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  hicp_result r;
  hicp_result_init(&r);
  hicp_transform init;
  hicp_transform_identity(&init);
  init.m[3] = 0.05;
  init.m[7] = -0.03;
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.tol = 0;
  o.max_iter = 40;
  o.min_step_trans = 1e9; /* any move is smaller; no rotation threshold */
  cr_assert_eq(hicp_register(ctx, m, pts, 500, &o, &init, &r), 0);
  cr_assert_eq(r.stop, HICP_STOP_INCREMENT, "translation alone: stop %d after %d", (int)r.stop,
               r.iterations);
  cr_assert_eq(r.iterations, 1);
  cr_assert_eq(r.converged, 1); /* an increment test is a convergence test */
  hicp_reg_options_init(&o);
  o.tol = 0;
  o.max_iter = 40;
  o.min_step_rot_deg = 180.0; /* any turn is smaller; no translation threshold */
  cr_assert_eq(hicp_register(ctx, m, pts, 500, &o, &init, &r), 0);
  cr_assert_eq(r.stop, HICP_STOP_INCREMENT, "rotation alone: stop %d after %d", (int)r.stop,
               r.iterations);
  cr_assert_eq(r.iterations, 1);
  cr_assert_eq(r.converged, 1);
  /* A rotation threshold finer than 1 - cos can hold (6e-7 degrees) still
   * takes part: the translation's alone does not stop the first step
   * (until stop 42 it did: the threshold rounded to 0, "off") */
  o.min_step_trans = 1e9;
  o.min_step_rot_deg = 1e-7;
  cr_assert_eq(hicp_register(ctx, m, pts, 500, &o, &init, &r), 0);
  cr_assert_gt(r.iterations, 1, "a 1e-7 degree threshold: stop %d after %d", (int)r.stop,
               r.iterations);

  float same[3 * 64];
  for (int i = 0; i < 64; i++) {
    same[3 * i] = 0.1f;
    same[3 * i + 1] = 0.2f;
    same[3 * i + 2] = 0.3f;
  }
  hicp_reg_options_init(&o);
  o.filter_start = 0;
  for (size_t n = 1; n <= 64; n++) {
    cr_assert_eq(hicp_register(ctx, m, same, n, &o, NULL, &r), 0);
    cr_assert_neq(r.stop, HICP_STOP_NO_PAIRS, "%zu equal points: the filter dropped them all (iteration %d, rmse %.17g)", n, r.iterations, r.rmse);
    cr_assert_eq(r.inliers, n, "%zu equal points: %llu kept", n, (unsigned long long)r.inliers);
    cr_assert(isfinite(r.inlier_rmse));
  }
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
}

Test(register, strided_scan_and_time_budget)
{
  float pts[3 * 2000];
  hicp_model *m = small_model(pts, 2000);
  struct {
    float xyz[3];
    unsigned rgb;
  } s[2000];
  for (int i = 0; i < 2000; i++) {
    memcpy(s[i].xyz, &pts[3 * i], 12);
    s[i].rgb = 0xffffffffu;
  }
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  hicp_transform init;
  hicp_transform_identity(&init);
  init.m[3] = 0.05;
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  hicp_result a, b;
  hicp_result_init(&a);
  hicp_result_init(&b);
  cr_assert_eq(hicp_register(ctx, m, pts, 2000, &o, &init, &a), 0);
  o.scan_stride = sizeof s[0];
  cr_assert_eq(hicp_register(ctx, m, s[0].xyz, 2000, &o, &init, &b), 0);
  cr_assert_eq(memcmp(&a.transform, &b.transform, sizeof a.transform), 0);
  o.scan_stride = 8;
  cr_assert_eq(hicp_register(ctx, m, pts, 2000, &o, &init, &b), HICP_EINVAL);
  hicp_reg_options_init(&o);
  o.time_budget_ms = 1e-9;
  o.tol = 0;
  o.max_iter = 1000;
  cr_assert_eq(hicp_register(ctx, m, pts, 2000, &o, &init, &b), 0);
  cr_assert_eq(b.stop, HICP_STOP_TIMEOUT);
  cr_assert_lt(b.iterations, 5);
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
}

/* The budget stops the CPU inside a pass, between pieces of a few hundred
 * points, not at the iteration's end (stop 48: a 5 ms budget on the
 * 1M-point model returned after 39 ms, the length of its first pass).
 * What comes back is what the last complete iteration reached: the pose
 * and rmse of a run stopped after as many iterations, to the bit; before
 * the first pass completes, the initial pose and a NaN rmse. */
Test(register, budget_stops_inside_a_pass, .timeout = 120)
{
  const size_t n = 30000;
  float *pts = th_surface(n, 48);
  /* one thread: on a loaded machine a team waits for its descheduled
   * threads, and passes take long and unevenly */
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  hicp_model *m = NULL;
  cr_assert_eq(hicp_model_build(ctx, pts, n, 0, NULL, &m), 0, "%s", hicp_context_error(ctx));
  hicp_transform init;
  hicp_transform_identity(&init);
  double rot[9];
  th_rotation(0.1, -0.05, 0.08, rot);
  for (int r = 0; r < 3; r++)
    for (int c = 0; c < 3; c++)
      init.m[4 * r + c] = rot[3 * r + c];
  init.m[3] = 0.03;
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.tol = 0;
  o.max_iter = 1000;
  hicp_result r, ref;
  hicp_result_init(&r);
  hicp_result_init(&ref);
  /* 1 microsecond: the scan's set-up alone takes longer, so no piece of
   * the first pass starts */
  o.time_budget_ms = 1e-3;
  cr_assert_eq(hicp_register(ctx, m, pts, n, &o, &init, &r), 0, "%s", hicp_context_error(ctx));
  cr_assert_eq(r.stop, HICP_STOP_TIMEOUT);
  cr_assert_eq(r.iterations, 0);
  cr_assert(isnan(r.rmse), "rmse %g: the first pass ran to its end", r.rmse);
  cr_assert_eq(r.fitness, 0.0);
  for (int k = 0; k < 16; k++)
    cr_assert(fabs(r.transform.m[k] - init.m[k]) < 1e-12, "element %d moved", k);
  /* budgets that end inside later passes: each answer is a whole
   * iteration's, pose and rmse together */
  int later = 0;
  for (double budget = 0.2; budget < 5000.0 && later < 3; budget *= 1.5) {
    o.time_budget_ms = budget;
    o.max_iter = 1000;
    cr_assert_eq(hicp_register(ctx, m, pts, n, &o, &init, &r), 0);
    if (r.stop != HICP_STOP_TIMEOUT || r.iterations == 0)
      continue;
    later++;
    hicp_reg_options plain = o;
    plain.time_budget_ms = 0;
    plain.max_iter = r.iterations;
    cr_assert_eq(hicp_register(ctx, m, pts, n, &plain, &init, &ref), 0);
    cr_assert_eq(ref.iterations, r.iterations);
    cr_assert(memcmp(&r.transform, &ref.transform, sizeof r.transform) == 0,
              "budget %g ms: the pose is not iteration %d's", budget, r.iterations);
    cr_assert(memcmp(&r.rmse, &ref.rmse, sizeof r.rmse) == 0,
              "budget %g ms: rmse %.17g, iteration %d's is %.17g", budget, r.rmse, r.iterations,
              ref.rmse);
  }
  cr_assert_gt(later, 0, "no budget ended after the first pass");
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
  free(pts);
}

/* A model of one point (a diagonal of 0) and scans on it stop once the
 * MSE no longer changes, under the automatic tolerance (stop 44: the
 * tolerance, 1e-12 of the squared diagonal, was 0, which is off, and every
 * such registration ran to max_iter, "not converged"). */
Test(register, one_point_model_converges)
{
  const float one[3] = {1.0f, 2.0f, 3.0f};
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  hicp_model *m = NULL;
  cr_assert_eq(hicp_model_build(ctx, one, 1, 0, NULL, &m), 0, "%s", hicp_context_error(ctx));
  const float scans[2][6] = {{1.0f, 2.0f, 3.0f, 1.0f, 2.0f, 3.0f}, {1.5f, 2.0f, 3.0f, 1.0f, 2.5f, 3.0f}};
  for (int k = 0; k < 2; k++) {
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp_register(ctx, m, scans[k], 2, NULL, NULL, &r), 0, "%s",
                 hicp_context_error(ctx));
    cr_assert(r.converged, "scan %d: stop %s after %d iterations", k, hicp_stop_name(r.stop),
              r.iterations);
    cr_assert_eq(r.stop, HICP_STOP_MSE_CHANGE);
    cr_assert_leq(r.iterations, 3, "scan %d: %d iterations", k, r.iterations);
  }
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* A surface of N points with one far point (a wide map), and a scan of
 * S points of another sampling of the surface, turned (6, -4, 5) degrees,
 * shifted (0, 0.03, 0.06), noise 1e-3; with `landmark`, the scan also
 * holds the far point so moved (a scene with the map's far point in it).
 * *truth = the scan's pose in the model (the inverse of that motion). */
enum { TOL_N = 4000, TOL_S = 1500 };
static hicp_model *tol_case(hicp_context *ctx, int landmark, double deg, float *scan, size_t *ns,
                            hicp_transform *truth)
{
  float *model = th_surface(TOL_N + 1, 21), *fresh = th_surface(TOL_S + 1, 23);
  model[3 * TOL_N] = fresh[3 * TOL_S] = 1000.0f;
  model[3 * TOL_N + 1] = model[3 * TOL_N + 2] = fresh[3 * TOL_S + 1] = fresh[3 * TOL_S + 2] = 0.0f;
  double R[9];
  th_rotation(6 * deg, -4 * deg, 5 * deg, R);
  th_rng g;
  th_rng_seed(&g, 22);
  *ns = TOL_S + (landmark ? 1 : 0);
  for (size_t i = 0; i < *ns; i++) {
    const float *q = fresh + 3 * i;
    for (int r = 0; r < 3; r++)
      scan[3 * i + r] = (float)(R[3 * r] * q[0] + R[3 * r + 1] * q[1] + R[3 * r + 2] * q[2] +
                                0.03 * r + 1e-3 * th_normal(&g));
  }
  hicp_transform_identity(truth);
  for (int a = 0; a < 3; a++) {
    for (int b = 0; b < 3; b++)
      truth->m[4 * a + b] = R[3 * b + a];
    truth->m[4 * a + 3] = -(R[3 + a] * 0.03 + R[6 + a] * 0.06);
  }
  hicp_model *m = NULL;
  cr_assert_eq(hicp_model_build(ctx, model, TOL_N + 1, 0, NULL, &m), 0, "%s",
               hicp_context_error(ctx));
  free(model);
  free(fresh);
  return m;
}

/* The squared diagonal of the box of n float points, in double. */
static double box_d2(const float *p, size_t n)
{
  double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY}, d2 = 0;
  for (size_t i = 0; i < 3 * n; i++) {
    lo[i % 3] = fmin(lo[i % 3], p[i]);
    hi[i % 3] = fmax(hi[i % 3], p[i]);
  }
  for (int d = 0; d < 3; d++)
    d2 += (hi[d] - lo[d]) * (hi[d] - lo[d]);
  return d2;
}

/* The automatic tolerance is 1e-12 of the squared diagonal of the smaller
 * box, the model's or the scan's: a registration left to it stops where
 * one given that figure stops, bit for bit, and ten times more or less
 * stops it earlier or later (so the factor, not only the rule, is what the
 * documentation says).  A far point in both makes the diagonal long next
 * to the MSE's changes, whose last ones then fall on both sides of it. */
Test(register, automatic_tolerance_is_1e_12_of_the_squared_diagonal)
{
  float scan[3 * (TOL_S + 1)];
  size_t ns;
  hicp_transform truth;
  hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
  hicp_model *m = tol_case(ctx, 1, 1.0, scan, &ns, &truth);
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.max_iter = 500;
  cr_assert_eq(o.tol, -1.0);
  hicp_result r[4];
  const double d2 = fmin(m->diag * m->diag, box_d2(scan, ns));
  const double tols[4] = {-1.0, 1e-12 * d2, 1e-11 * d2, 1e-13 * d2};
  for (int k = 0; k < 4; k++) {
    o.tol = tols[k];
    hicp_result_init(&r[k]);
    cr_assert_eq(hicp_register(ctx, m, scan, ns, &o, NULL, &r[k]), 0, "%s",
                 hicp_context_error(ctx));
    cr_assert_eq(r[k].stop, HICP_STOP_MSE_CHANGE, "tol %g: stop %s after %d", tols[k],
                 hicp_stop_name(r[k].stop), r[k].iterations);
  }
  cr_assert_eq(r[0].iterations, r[1].iterations);
  cr_assert(memcmp(&r[0].transform, &r[1].transform, sizeof r[0].transform) == 0);
  cr_assert_lt(r[2].iterations, r[0].iterations, "1e-11: %d, automatic: %d", r[2].iterations,
               r[0].iterations);
  cr_assert_gt(r[3].iterations, r[0].iterations, "1e-13: %d, automatic: %d", r[3].iterations,
               r[0].iterations);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* A local scan in a wide map (the scan without the map's far point): the
 * automatic tolerance follows the scan's smaller box, and the registration
 * goes on to where ICP settles (the pose of 500 iterations with tol 0).
 * The model's diagonal alone (until stop 66) stopped such a scan while it
 * still slid, and called it converged: a 50 m scan in a map 50 km wide,
 * 0.96 degrees and 110 mm off (stop 66's review); here, that tolerance
 * given explicitly stops a third of a degree short. */
Test(register, automatic_tolerance_follows_a_local_scan)
{
  float scan[3 * (TOL_S + 1)];
  size_t ns;
  hicp_transform truth;
  hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
  hicp_model *m = tol_case(ctx, 0, 1.0, scan, &ns, &truth);
  const double scan_d2 = box_d2(scan, ns);
  cr_assert_lt(1e4 * scan_d2, m->diag * m->diag);
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.max_iter = 500;
  hicp_result r[4];
  const double tols[4] = {-1.0, 1e-12 * scan_d2, 1e-12 * m->diag * m->diag, 0.0};
  for (int k = 0; k < 4; k++) {
    o.tol = tols[k];
    hicp_result_init(&r[k]);
    cr_assert_eq(hicp_register(ctx, m, scan, ns, &o, NULL, &r[k]), 0, "%s",
                 hicp_context_error(ctx));
  }
  const double settled = th_rotation_error_deg(r[0].transform.m, r[3].transform.m),
               early = th_rotation_error_deg(r[2].transform.m, r[3].transform.m);
  cr_assert_eq(r[0].stop, HICP_STOP_MSE_CHANGE);
  cr_assert_eq(r[0].iterations, r[1].iterations);
  cr_assert(memcmp(&r[0].transform, &r[1].transform, sizeof r[0].transform) == 0);
  cr_assert_lt(settled, 1e-3, "automatic: %d iterations, %.4g degrees from the settled pose",
               r[0].iterations, settled);
  cr_assert_gt(early, 0.1, "the model's tolerance: %d iterations, %.4g degrees from it",
               r[2].iterations, early);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* A scan that determines no rotation (one point, or ten identical ones)
 * keeps the initial pose's rotation, flagged degenerate, and moves onto
 * the model: the rotation came out as the identity, dropping the caller's
 * --init (stop 46). */
Test(register, degenerate_scan_keeps_the_initial_rotation)
{
  float model[3 * 64];
  th_rng g;
  th_rng_seed(&g, 9);
  for (int i = 0; i < 3 * 64; i++)
    model[i] = (float)th_uniform(&g);
  hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
  hicp_model *m = NULL;
  cr_assert_eq(hicp_model_build(ctx, model, 64, 0, NULL, &m), 0, "%s", hicp_context_error(ctx));
  hicp_transform init;
  double R[9];
  th_rotation(10, -20, 30, R);
  for (int i = 0; i < 16; i++)
    init.m[i] = i == 15 ? 1.0 : 0.0;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++)
      init.m[4 * i + j] = R[3 * i + j];
  init.m[3] = 0.1;
  float scan[30];
  for (int i = 0; i < 10; i++)
    for (int d = 0; d < 3; d++)
      scan[3 * i + d] = 0.3f + 0.1f * (float)d;
  for (size_t n = 1; n <= 10; n += 9) {
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp_register(ctx, m, scan, n, NULL, &init, &r), 0, "%s",
                 hicp_context_error(ctx));
    cr_assert(r.degenerate, "%zu points", n);
    cr_assert_lt(th_rotation_error_deg(r.transform.m, init.m), 1e-9,
                 "%zu points: %g degrees from the initial rotation", n,
                 th_rotation_error_deg(r.transform.m, init.m));
    cr_assert_lt(r.rmse, 1e-6, "%zu points: rmse %g, not on a model point", n, r.rmse);
  }
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* (stop 66's mutation review) result.degenerate describes the solve that
 * gave the returned pose, not the one before it: the tested registrations
 * were degenerate at every solve or at none, so returning the previous
 * solve's flag (M18) passed.  A model of a line (41 points on the x axis)
 * and a square grid (121 points at z = 2); the scan is the line raised 0.1
 * and the grid raised 0.2, max_dist 0.15.  At the initial pose only the
 * line's pairs are within max_dist: the first solve sees collinear scan
 * points (degenerate) and lowers the scan by 0.1, which brings the grid's
 * pairs within max_dist; the second solve sees them all (not degenerate).
 * So max_iter 0, 1, 2 return 0, 1, 0; M18 returned 0, 0, 1. */
Test(register, degenerate_describes_the_last_solve)
{
  float model[3 * (41 + 121)], scan[3 * (41 + 121)];
  size_t n = 0;
  for (int i = 0; i <= 40; i++, n++) {
    const float p[3] = {-1.0f + 0.05f * (float)i, 0.0f, 0.0f};
    for (int d = 0; d < 3; d++) {
      model[3 * n + d] = p[d];
      scan[3 * n + d] = p[d] + (d == 2 ? 0.1f : 0.0f);
    }
  }
  for (int i = 0; i <= 10; i++)
    for (int j = 0; j <= 10; j++, n++) {
      const float p[3] = {-1.0f + 0.2f * (float)i, -1.0f + 0.2f * (float)j, 2.0f};
      for (int d = 0; d < 3; d++) {
        model[3 * n + d] = p[d];
        scan[3 * n + d] = p[d] + (d == 2 ? 0.2f : 0.0f);
      }
    }
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  hicp_model *m = NULL;
  cr_assert_eq(hicp_model_build(ctx, model, n, 0, NULL, &m), 0, "%s", hicp_context_error(ctx));
  const int want_degenerate[3] = {0, 1, 0};
  const uint64_t want_inliers[3] = {41, 41 + 121, 41 + 121};
  for (int iters = 0; iters <= 2; iters++) {
    hicp_reg_options o;
    hicp_reg_options_init(&o);
    o.max_dist = 0.15;
    o.max_iter = iters;
    o.tol = 0;
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp_register(ctx, m, scan, n, &o, NULL, &r), 0, "%s", hicp_context_error(ctx));
    cr_assert_eq(r.iterations, iters, "max_iter %d: %d iterations (stop %s)", iters,
                 r.iterations, hicp_stop_name(r.stop));
    cr_assert_eq(r.inliers, want_inliers[iters], "max_iter %d: %llu inliers, want %llu", iters,
                 (unsigned long long)r.inliers, (unsigned long long)want_inliers[iters]);
    cr_assert_eq(r.degenerate, want_degenerate[iters], "max_iter %d: degenerate %d, want %d",
                 iters, r.degenerate, want_degenerate[iters]);
  }
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* The brute-force distance, in double, from each scan point moved by T
 * (scan -> model, absolute coordinates) to its nearest vertex of the mesh
 * cloud mc (absolute: origin + xyz): the oracle for the result's
 * statistics, independent of the library's search and sums. */
static void brute_distances(const hicp_cloud *mc, const hicp_transform *T, const float *scan,
                            size_t n, double *dist)
{
  const size_t nv = hicp_cloud_size(mc);
  const float *v = hicp_cloud_xyz(mc);
  double origin[3];
  hicp_cloud_origin(mc, origin);
  double *y = malloc(sizeof(double) * 3 * nv);
  cr_assert_not_null(y);
  for (size_t j = 0; j < nv; j++)
    for (int d = 0; d < 3; d++)
      y[3 * j + d] = origin[d] + (double)v[3 * j + d];
  for (size_t i = 0; i < n; i++) {
    double q[3];
    for (int r = 0; r < 3; r++)
      q[r] = T->m[4 * r] * scan[3 * i] + T->m[4 * r + 1] * scan[3 * i + 1] +
             T->m[4 * r + 2] * scan[3 * i + 2] + T->m[4 * r + 3];
    double best = HUGE_VAL;
    for (size_t j = 0; j < nv; j++) {
      const double dx = q[0] - y[3 * j], dy = q[1] - y[3 * j + 1], dz = q[2] - y[3 * j + 2];
      const double e2 = dx * dx + dy * dy + dz * dz;
      if (e2 < best)
        best = e2;
    }
    dist[i] = sqrt(best);
  }
  free(y);
}

/* Checks r's rmse, inlier_rmse, fitness, inliers and points against the
 * brute force at r's own transform (the result's values are those of the
 * pairs at the final transform), with max_dist md (0 = off, every pair
 * kept).  Returns the fraction of pairs max_dist cut.
 * Tolerance: the library matches each point in float (the query rounded
 * to float, about 1e-7 of the coordinates), so in a near tie it may pair a
 * point with another vertex than the brute force's, farther by a rounding
 * of the coordinates; its squared distances and sums are then in double.
 * The RMS values so agree to about 1e-9 (measured: under 1e-12 on this
 * scan); 1e-7 leaves room for a few such ties and is still five orders
 * below what a missing sqrt or a wrong count gives. */
static double check_statistics(const scene *s, const hicp_result *r, double md, const char *what)
{
  double *dist = malloc(sizeof(double) * s->n);
  cr_assert_not_null(dist);
  brute_distances(s->mesh, &r->transform, s->scan, s->n, dist);
  double e2_all = 0.0, e2_in = 0.0;
  uint64_t in = 0;
  for (size_t i = 0; i < s->n; i++) {
    e2_all += dist[i] * dist[i];
    if (md > 0.0)
      cr_assert_gt(fabs(dist[i] - md), 1e-6 * md,
                   "%s: point %zu lies %.17g from the model, too near max_dist %.17g to count "
                   "it for sure: pick another max_dist",
                   what, i, dist[i], md);
    if (md == 0.0 || dist[i] <= md) {
      in++;
      e2_in += dist[i] * dist[i];
    }
  }
  const double rmse = sqrt(e2_all / (double)s->n), inlier_rmse = sqrt(e2_in / (double)in);
  if (getenv("HICP_TEST_VERBOSE"))
    fprintf(stderr,
            "%s: %llu of %zu kept; rmse %.17g (brute %.17g), inlier_rmse %.17g (brute %.17g)\n",
            what, (unsigned long long)r->inliers, s->n, r->rmse, rmse, r->inlier_rmse,
            inlier_rmse);
  cr_assert_eq(r->points, s->n, "%s", what);
  cr_assert_eq(r->inliers, in, "%s: %llu inliers, the brute force counts %llu within %g", what,
               (unsigned long long)r->inliers, (unsigned long long)in, md);
  cr_assert_eq(r->fitness, (double)in / (double)s->n, "%s: fitness %.17g, want %llu / %zu", what,
               r->fitness, (unsigned long long)in, s->n);
  cr_assert_leq(fabs(r->rmse - rmse), 1e-7 * rmse, "%s: rmse %.17g, brute force %.17g", what,
                r->rmse, rmse);
  cr_assert_gt(in, 0);
  cr_assert_leq(fabs(r->inlier_rmse - inlier_rmse), 1e-7 * inlier_rmse,
                "%s: inlier_rmse %.17g, brute force %.17g", what, r->inlier_rmse, inlier_rmse);
  free(dist);
  return 1.0 - (double)in / (double)s->n;
}

/* rmse, inlier_rmse, fitness and inliers are the true values at the final
 * transform: against a brute force in double, on a scan of bunny00 (its
 * surface resampled, 1e-3 noise, a moderate misalignment), unfiltered and
 * with a max_dist at the unfiltered run's median distance, starting where
 * that run ended (from the misaligned start so tight a max_dist keeps too
 * few pairs to converge), which must cut a real share of the pairs (a
 * max_dist compared unsquared with squared distances cuts none or all of
 * them).  6 s on a loaded 2-core machine: the timeout only catches a hang. */
Test(register, result_statistics_brute_force, .timeout = 300)
{
  scene s;
  if (!load_scene_vertices(&s, "meshes/bunny00.off"))
    cr_skip_test("libcgal-demo data not found");
  const double rpy[3] = {6, -4, 8}, trel[3] = {0.02, -0.01, 0.015}, view[3] = {0.3, 1, 0.6};
  make_scan(&s, rpy, trel, 1e-3, view, 31, 4000);
  cr_assert_gt(s.n, 1000);
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  o.max_iter = 100;
  hicp_result plain = run(&s, s.scan, s.n, 2, &o, NULL);
  cr_assert(plain.converged, "stop %s", hicp_stop_name(plain.stop));
  check_statistics(&s, &plain, 0.0, "no filter");
  cr_assert_eq(plain.inliers, s.n);
  cr_assert_eq(plain.fitness, 1.0);
  cr_assert_eq(plain.rmse, plain.inlier_rmse);

  /* max_dist between the two distances at the unfiltered median */
  double *dist = malloc(sizeof(double) * s.n);
  brute_distances(s.mesh, &plain.transform, s.scan, s.n, dist);
  qsort(dist, s.n, sizeof *dist, cmp_double);
  const double md = 0.5 * (dist[s.n / 2 - 1] + dist[s.n / 2]);
  free(dist);
  cr_assert_lt(md, 1.0); /* bunny00 is 0.2 across: md^2 < md */
  o.max_dist = md;
  hicp_result cut = run(&s, s.scan, s.n, 2, &o, &plain.transform);
  cr_assert(cut.converged, "stop %s", hicp_stop_name(cut.stop));
  const double frac = check_statistics(&s, &cut, md, "max_dist");
  cr_assert(frac >= 0.2 && frac <= 0.8, "max_dist %g cut %.3f of the pairs", md, frac);
  cr_assert_lt(cut.inlier_rmse, cut.rmse);
  free_scene(&s);
}

/* (stop 61's review) The sigma filter keeps pairs whose distances are
 * equal to float precision: a scan on a sphere of radius 1 about a model
 * of one point, every pair 1 apart but for the coordinates' rounding
 * (1e-7), with the filter from the first iteration.  Their variance is
 * rounding, and the bounds it gave kept no pair for 3 of these 29 scans
 * (8, 23 and 1,387 points): each stopped at once, no-pairs, 0 inliers. */
Test(register, sigma_filter_keeps_distances_equal_to_float_precision)
{
  const float one[3] = {0.25f, 0.5f, 0.75f};
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  hicp_model *m = NULL;
  cr_assert_eq(hicp_model_build(ctx, one, 1, 0, NULL, &m), 0, "%s", hicp_context_error(ctx));
  th_rng rng;
  th_rng_seed(&rng, 3);
  static float scan[3 * 3000];
  for (int n = 3; n <= 3000; n = n * 5 / 4 + 1) {
    for (int i = 0; i < n; i++) {
      double v[3], r;
      do {
        for (int d = 0; d < 3; d++)
          v[d] = th_normal(&rng);
        r = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
      } while (r < 1e-3);
      for (int d = 0; d < 3; d++)
        scan[3 * i + d] = (float)(one[d] + v[d] / r);
    }
    hicp_reg_options o;
    hicp_reg_options_init(&o);
    o.filter_start = 0;
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp_register(ctx, m, scan, (size_t)n, &o, NULL, &r), 0, "%s",
                 hicp_context_error(ctx));
    cr_assert_neq(r.stop, HICP_STOP_NO_PAIRS,
                  "%d points 1 from the model: the filter kept none (rmse %.17g)", n, r.rmse);
    cr_assert_eq(r.inliers, (uint64_t)n, "%d points 1 from the model: %llu kept", n,
                 (unsigned long long)r.inliers);
  }
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* (stop 61's review) A rotation threshold under about 1e-160 degrees,
 * whose 1 - cos underflows to 0 in the plan, still takes part (0 alone is
 * off): with a translation threshold that any step is under, it stops only
 * once the rotation stops changing, as 1e-100 degrees does, not after the
 * first step (the translation's alone). */
Test(register, rotation_threshold_below_underflow_takes_part)
{
  float pts[3 * 2000];
  hicp_model *m = small_model(pts, 2000);
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  hicp_transform init;
  hicp_transform_identity(&init);
  init.m[3] = 0.05;
  init.m[7] = -0.03;
  const double degs[3] = {1e-100, 1e-170, 1e-300};
  int iters[3];
  for (int k = 0; k < 3; k++) {
    hicp_reg_options o;
    hicp_reg_options_init(&o);
    o.tol = 0;
    o.max_iter = 40;
    o.min_step_trans = 1e9;
    o.min_step_rot_deg = degs[k];
    cr_assert_gt(plan_step_c(ctx, m, &o), 0.0, "%g degrees: the rotation threshold is off",
                 degs[k]);
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp_register(ctx, m, pts, 500, &o, &init, &r), 0, "%s",
                 hicp_context_error(ctx));
    cr_assert_eq(r.stop, HICP_STOP_INCREMENT, "%g degrees: stop %s", degs[k],
                 hicp_stop_name(r.stop));
    iters[k] = r.iterations;
    cr_assert_gt(r.iterations, 1, "%g degrees: stopped by the translation alone", degs[k]);
    cr_assert_eq(r.iterations, iters[0], "%g degrees: %d iterations, 1e-100 degrees %d",
                 degs[k], r.iterations, iters[0]);
  }
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
}

/* The stop rules and the sigma filter's start, through a registration end
 * to end (stop 64's audit: an engine that ignored mse_abs, or ran the
 * filter from iteration 0 whatever filter_start, passed every test).  A
 * bumpy surface, a scan of it turned 8 degrees, and a tenth of the scan
 * gross outliers. */
Test(register, stop_rules_and_filter_start_end_to_end)
{
  enum { NM = 20000, NS = 4000, NOUT = 400 };
  float *p = th_surface(NM, 7), *q = th_surface(NS + NOUT, 8);
  double R[9];
  th_rotation(6, -4, 5, R);
  th_rng rng;
  th_rng_seed(&rng, 9);
  for (size_t i = 0; i < NS + NOUT; i++) {
    const double x[3] = {q[3 * i], q[3 * i + 1], q[3 * i + 2]};
    for (int d = 0; d < 3; d++)
      q[3 * i + d] = i < NS ? (float)(R[3 * d] * x[0] + R[3 * d + 1] * x[1] +
                                      R[3 * d + 2] * x[2] + 0.02)
                            : (float)(4.0 * th_uniform(&rng) - 2.0); /* gross */
  }
  hicp_context *ctx = th_context(2, HICP_BACKEND_CPU);
  hicp_model *m = NULL;
  cr_assert_eq(hicp_model_build(ctx, p, NM, 0, NULL, &m), 0, "%s", hicp_context_error(ctx));
  hicp_reg_options o;
  hicp_result r;
  /* an absolute MSE above the first pass's: stopped by it at once */
  hicp_reg_options_init(&o);
  o.mse_abs = 1e6;
  hicp_result_init(&r);
  cr_assert_eq(hicp_register(ctx, m, q, NS + NOUT, &o, NULL, &r), 0);
  cr_assert(r.stop == HICP_STOP_MSE_ABS && r.iterations <= 1 && r.converged, "%s after %d",
            hicp_stop_name(r.stop), r.iterations);
  /* the filter from iteration K = 4, counted from 0: the four updates
   * before it are the unfiltered registration's bits (pass K, whose sums
   * give the result's statistics, is filtered already), the fifth is not,
   * and pairs drop */
  enum { K = 4 };
  hicp_result plain[2], filtered[2];
  for (int f = 0; f < 2; f++) {
    for (int extra = 0; extra < 2; extra++) {
      hicp_reg_options_init(&o);
      o.tol = 0.0;
      o.max_iter = K + extra;
      if (f) {
        o.filter_start = K;
        o.filter_sigma = 2.0;
      }
      hicp_result *out = f ? &filtered[extra] : &plain[extra];
      hicp_result_init(out);
      cr_assert_eq(hicp_register(ctx, m, q, NS + NOUT, &o, NULL, out), 0);
      cr_assert_eq(out->iterations, K + extra);
    }
  }
  cr_assert(memcmp(&filtered[0].transform, &plain[0].transform, sizeof plain[0].transform) == 0,
            "the filter ran before iteration %d", K);
  cr_assert(memcmp(&filtered[1].transform, &plain[1].transform, sizeof plain[1].transform) != 0,
            "the filter did not run at iteration %d", K);
  cr_assert(filtered[1].inliers < NS + NOUT && filtered[1].inliers > NS / 2, "%llu kept",
            (unsigned long long)filtered[1].inliers);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
  free(p);
  free(q);
}

/* (stop 69's review) The result's inverse is the inverse of the result's
 * transform also where that is the caller's initial pose: a run that stops
 * before its first update (max_iter 0, as to score a given pose; no pairs
 * at once; a budget or cancel before the first pass) returns the initial
 * matrix, which hicp_transform_check lets be 1e-5 from a rotation, as a
 * rotation printed with 6 digits is.  Its transpose is then no inverse:
 * with a map's translation (4e6, 5e6) the inverse's position was 2.0 off
 * (transform x inverse), where an update's rotation gave 1e-16. */
Test(register, inverse_of_an_initial_pose_printed_with_6_digits)
{
  float pts[3 * 2000];
  hicp_model *m = small_model(pts, 2000);
  hicp_context *ctx = th_context(1, HICP_BACKEND_CPU);
  hicp_transform init;
  hicp_transform_identity(&init);
  /* 33.3 degrees about z as printf's %g writes it (6 significant digits) */
  init.m[0] = 0.835807;
  init.m[1] = -0.549023;
  init.m[4] = 0.549023;
  init.m[5] = 0.835807;
  init.m[3] = 4e6;
  init.m[7] = 5e6;
  init.m[11] = 100.0;
  cr_assert_eq(hicp_transform_check(&init), HICP_OK);
  for (int iters = 0; iters <= 1; iters++) {
    hicp_reg_options o;
    hicp_reg_options_init(&o);
    o.max_iter = iters;
    hicp_result r;
    hicp_result_init(&r);
    cr_assert_eq(hicp_register(ctx, m, pts, 500, &o, &init, &r), 0, "%s",
                 hicp_context_error(ctx));
    cr_assert_eq(r.iterations, iters);
    if (iters == 0)
      cr_assert(memcmp(r.transform.m, init.m, sizeof init.m) == 0, "the initial pose moved");
    for (int i = 0; i < 4; i++)
      for (int j = 0; j < 4; j++) {
        double fwd = 0.0, back = 0.0; /* transform x inverse, inverse x transform */
        for (int k = 0; k < 4; k++) {
          fwd += r.transform.m[4 * i + k] * r.inverse.m[4 * k + j];
          back += r.inverse.m[4 * i + k] * r.transform.m[4 * k + j];
        }
        /* a translation of 6.4e6 leaves some 1e-9 of rounding */
        const double tol = j == 3 ? 1e-6 : 1e-12;
        cr_assert(fabs(fwd - (i == j)) <= tol && fabs(back - (i == j)) <= tol,
                  "max_iter %d: (transform x inverse)[%d][%d] = %.17g, (inverse x transform) "
                  "%.17g",
                  iters, i, j, fwd, back);
      }
  }
  hicp_context_destroy(ctx);
  hicp_model_destroy(m);
}
