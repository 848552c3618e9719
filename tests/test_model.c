/* test_model.c: building models: the validator on real and degenerate
 * inputs, duplicate mapping, the fallback for flat inputs and for scales
 * Qhull cannot resolve, bad input. */
#include "config.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "order.h"
#include "pp/reduce.h"
#include "testhelp.h"

static hicp_context *ctx_new(void)
{
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  return ctx;
}

/* n points uniform in the unit cube (seeded), built into *m. */
static void build_unit_cloud(hicp_context *ctx, float *p, int n, uint64_t seed, hicp_model **m)
{
  th_rng r;
  th_rng_seed(&r, seed);
  for (int i = 0; i < 3 * n; i++)
    p[i] = (float)th_uniform(&r);
  cr_assert_eq(hicp_model_build(ctx, p, (size_t)n, 0, NULL, m), 0, "%s", hicp_context_error(ctx));
}

static hicp_model_options validating(void)
{
  hicp_model_options o;
  hicp_model_options_init(&o);
  o.validate = 1;
  return o;
}

Test(model, real_models_validate)
{
  static const char *models[] = {"meshes/bunny00.off", "meshes/ChineseDragon-10kv.off",
                                 "meshes/boeing.off", "meshes/fandisk_large.off",
                                 "meshes/turbine.off", "points_3/kitten.xyz",
                                 /* closest pair 1.8 times Qhull's resolution,
                                  * unmerged: a resolution widened for merges
                                  * that had not happened dropped its graph
                                  * (stop 54's last look) */
                                 "points_3/poste_france.xyz"};
  int found = 0;
  for (size_t k = 0; k < sizeof models / sizeof *models; k++) {
    const char *path = th_data(models[k]);
    if (path == NULL)
      continue;
    found++;
    hicp_context *ctx = ctx_new();
    hicp_model_options o = validating();
    hicp_model *m = NULL;
    cr_assert_eq(hicp_model_open(ctx, path, &o, &m), 0, "%s: %s", path, hicp_context_error(ctx));
    hicp_model_info info;
    hicp_model_info_init(&info);
    cr_assert_eq(hicp_model_get_info(m, &info), 0);
    cr_assert_eq(info.has_delaunay, 1, "%s: %s", models[k], info.fallback_reason);
    cr_assert(info.mean_degree > 8 && info.mean_degree < 30, "%s: mean degree %g", models[k],
              info.mean_degree);
    cr_assert_eq(info.points, info.vertices + info.duplicates);
    uint64_t hist_total = 0;
    for (int b = 0; b < HICP_DEGREE_BINS; b++)
      hist_total += info.degree_hist[b];
    cr_assert_eq(hist_total, info.vertices);
    cr_assert_eq(info.edges % 2, 0);
    /* The graph budget: under 100 bytes per point. */
    cr_assert_lt((double)info.bytes_graph / info.points, 100.0, "%s: %g bytes/point", models[k],
                 (double)info.bytes_graph / info.points);
    hicp_model_destroy(m);
    hicp_context_destroy(ctx);
  }
  if (!found)
    cr_skip_test("libcgal-demo data not found");
}

Test(model, duplicates_map_to_smallest_index)
{
  float p[] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1, 0, 0};
  size_t n = sizeof p / sizeof p[0] / 3; /* points 3 and 7 repeat point 1; 6 repeats 4 */
  hicp_context *ctx = ctx_new();
  hicp_model_options o = validating();
  hicp_model *m;
  cr_assert_eq(hicp_model_build(ctx, p, n, 0, &o, &m), 0, "%s", hicp_context_error(ctx));
  cr_assert_eq(m->nv, 5);
  cr_assert_eq(m->vtx[m->vertex_of[3]].id, 1);
  cr_assert_eq(m->vtx[m->vertex_of[7]].id, 1);
  cr_assert_eq(m->vtx[m->vertex_of[6]].id, 4);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* A flat input of 64 points or more has a Delaunay graph: the guards
 * around it (lib/delaunay_qhull.c) make the triangulation
 * three-dimensional, and the walks answer it exactly
 * (nn::coplanar_collinear_tiny).  A line, fewer than five points, or a
 * build asked for none fall back to the kd-tree with the reason. */
Test(model, flat_inputs_have_a_graph)
{
  float p[3 * 100];
  for (int i = 0; i < 100; i++) {
    p[3 * i] = (float)(i % 10);
    p[3 * i + 1] = (float)(i / 10);
    p[3 * i + 2] = 0.0f;
  }
  float line[3 * 50];
  for (int i = 0; i < 50; i++) {
    line[3 * i] = (float)i;
    line[3 * i + 1] = 2.0f * (float)i;
    line[3 * i + 2] = -0.5f * (float)i;
  }
  hicp_context *ctx = ctx_new();
  hicp_model_options o = validating();
  hicp_model_info info;
  hicp_model_info_init(&info);
  const struct {
    const float *p;
    size_t n;
    int graph;
    const char *reason;
  } cases[] = {{p, 100, 1, ""}, {line, 50, 0, "Qhull"}, {p, 4, 0, "too few"}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    hicp_model *m;
    cr_assert_eq(hicp_model_build(ctx, cases[k].p, cases[k].n, 0, &o, &m), 0, "%s",
                 hicp_context_error(ctx));
    hicp_model_get_info(m, &info);
    cr_assert_eq(info.has_delaunay, cases[k].graph, "case %zu: %s", k, info.fallback_reason);
    cr_assert_eq(info.guards > 0, k == 0, "case %zu: %u guards", k, (unsigned)info.guards);
    cr_assert(strstr(info.fallback_reason, cases[k].reason) != NULL, "case %zu: reason %s", k,
              info.fallback_reason);
    cr_assert_str_empty(hicp_context_error(ctx));
    /* built without a context, the same reason (it said "Qhull failed"
     * for every input: stop 53's review) */
    char reason[sizeof info.fallback_reason];
    memcpy(reason, info.fallback_reason, sizeof reason);
    hicp_model_destroy(m);
    cr_assert_eq(hicp_model_build(NULL, cases[k].p, cases[k].n, 0, &o, &m), 0);
    hicp_model_get_info(m, &info);
    cr_assert_str_eq(info.fallback_reason, reason, "case %zu", k);
    hicp_model_destroy(m);
  }
  /* explicitly without a graph */
  o.delaunay = 0;
  hicp_model *m;
  cr_assert_eq(hicp_model_build(ctx, p, 100, 0, &o, &m), 0);
  hicp_model_get_info(m, &info);
  cr_assert_eq(info.has_delaunay, 0);
  cr_assert(strstr(info.fallback_reason, "by request") != NULL, "reason: %s", info.fallback_reason);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* The guards go where the points' hull has a flat face of 64 points or
 * more, whatever its direction (lib/model_build.c, needs_guards): a box's
 * faces, and a half cylinder cut along the plane x = y (exact in float;
 * stop 52's review found 60,000 such points took 515 s of Qhull while
 * only the box's planes were looked at), but not the box turned 30
 * degrees about z and 20 about x (rounding takes its points off their
 * planes) nor a sphere. */
Test(model, flat_hull_faces_get_guards)
{
  enum { N = 2000 };
  float *p = malloc(sizeof(float) * 3 * N);
  th_rng r;
  th_rng_seed(&r, 8);
  hicp_context *ctx = ctx_new();
  hicp_model_options o = validating();
  const double a = 30.0 * M_PI / 180.0;
  for (int kind = 0; kind < 4; kind++) {
    for (int i = 0; i < N; i++) {
      double x[3];
      if (kind <= 1) { /* a box's faces, turned 30 degrees about z for kind 1 */
        static const double unit[3] = {1.0, 1.0, 1.0};
        th_box_face_point(&r, (size_t)i, unit, x);
        if (kind == 1) { /* and 20 degrees about x */
          const double u = cos(a) * x[0] - sin(a) * x[1], v = sin(a) * x[0] + cos(a) * x[1];
          const double b = 20.0 * M_PI / 180.0;
          x[0] = u;
          x[1] = cos(b) * v - sin(b) * x[2];
          x[2] = sin(b) * v + cos(b) * x[2];
        }
      } else if (kind == 2) { /* the wedge: half on the plane x = y */
        const double t = th_uniform(&r) * 2.0 - 1.0;
        const double th = (th_uniform(&r) * 180.0 - 135.0) * M_PI / 180.0;
        x[0] = i % 2 ? t / sqrt(2.0) : cos(th);
        x[1] = i % 2 ? t / sqrt(2.0) : sin(th);
        x[2] = th_uniform(&r);
      } else { /* a sphere */
        double len = 0.0;
        for (int d = 0; d < 3; d++) {
          x[d] = th_normal(&r);
          len += x[d] * x[d];
        }
        for (int d = 0; d < 3; d++)
          x[d] /= sqrt(len);
      }
      for (int d = 0; d < 3; d++)
        p[3 * i + d] = (float)x[d];
    }
    hicp_model *m;
    cr_assert_eq(hicp_model_build(ctx, p, N, 0, &o, &m), 0, "%s", hicp_context_error(ctx));
    cr_assert(m->has_delaunay, "kind %d: %s", kind, m->fallback);
    cr_assert_eq(m->guards > 0, kind == 0 || kind == 2, "kind %d: %u guards", kind, m->guards);
    hicp_model_destroy(m);
  }
  hicp_context_destroy(ctx);
  free(p);
}

/* Four unit spheres 1e5 apart: points on a sphere lie closer to each
 * other than Qhull resolves at that range, which is known before Qhull
 * runs (hicp__delaunay_resolution_floor), so the build goes to the kd-tree
 * without it (stop 51: it ran Qhull 12.5 s for 40,000 such points, then
 * refused the graph).  Qhull's time must be 0, and the kd-tree exact. */
Test(model, unresolvable_clusters_skip_qhull)
{
  enum { PER = 3000, N = 4 * PER };
  static const double centre[4][3] = {{0, 0, 0}, {1e5, 1e5, 1e5}, {0, 1e5, 0}, {1e5, 0, 1e5}};
  float *p = malloc(sizeof(float) * 3 * N);
  cr_assert_not_null(p);
  th_rng r;
  th_rng_seed(&r, 5);
  for (int i = 0; i < N; i++) {
    const double u = 2.0 * M_PI * th_uniform(&r), v = acos(2.0 * th_uniform(&r) - 1.0);
    const double *c = centre[i / PER];
    p[3 * i] = (float)(c[0] + cos(u) * sin(v));
    p[3 * i + 1] = (float)(c[1] + sin(u) * sin(v));
    p[3 * i + 2] = (float)(c[2] + cos(v));
  }
  hicp_context *ctx = ctx_new();
  hicp_model_options o = validating();
  hicp_model *m;
  cr_assert_eq(hicp_model_build(ctx, p, N, 0, &o, &m), 0, "%s", hicp_context_error(ctx));
  hicp_model_info info;
  hicp_model_info_init(&info);
  hicp_model_get_info(m, &info);
  cr_assert_eq(info.has_delaunay, 0);
  cr_assert(strstr(info.fallback_reason, "resolution") != NULL, "reason: %s",
            info.fallback_reason);
  cr_assert_eq(info.qhull_ms, 0.0, "Qhull ran for %.1f ms", info.qhull_ms);
  /* the kd-tree's answers against brute force, queries near each sphere */
  for (int k = 0; k < 200; k++) {
    const float *a = &p[3 * (size_t)(th_rng_next(&r) % N)];
    const float q[3] = {a[0] + 0.01f * (float)(th_uniform(&r) - 0.5),
                        a[1] + 0.01f * (float)(th_uniform(&r) - 0.5),
                        a[2] + 0.3f * (float)(th_uniform(&r) - 0.5)};
    uint32_t idx;
    float d2;
    cr_assert_eq(hicp_nn_query(ctx, m, q, 1, NULL, &idx, &d2, NULL), 0, "%s",
                 hicp_context_error(ctx));
    uint32_t bi = 0;
    double bd = HUGE_VAL;
    for (int i = 0; i < N; i++) {
      const double dx = q[0] - p[3 * i], dy = q[1] - p[3 * i + 1], dz = q[2] - p[3 * i + 2];
      const double d = dx * dx + dy * dy + dz * dz;
      if (d < bd) {
        bd = d;
        bi = (uint32_t)i;
      }
    }
    const float *b = &p[3 * (size_t)bi], *g = &p[3 * (size_t)idx];
    const double dg = (q[0] - g[0]) * (q[0] - g[0]) + (q[1] - g[1]) * (q[1] - g[1]) +
                      (q[2] - g[2]) * (q[2] - g[2]);
    cr_assert(dg <= bd * (1 + 1e-5), "query %d: vertex %u at %g, brute force %u (%g, %g %g %g)",
              k, idx, dg, bi, bd, b[0], b[1], b[2]);
  }
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
  free(p);
}

/* Unit-scale points beside one far away.  With the far point at 2^44,
 * the points' lifted coordinates (x^2 + y^2 + z^2) differ by some 1e-26 of
 * the largest, far below double roundoff, and Qhull's triangulation missed
 * the Delaunay edges 0-3 and 0-4 (the fuzzer's find): the walk from vertex
 * 0 then stopped there.  Such a model must go to the kd-tree and answer
 * exactly; with the far point at 1e3 it keeps its graph. */
Test(model, unresolvable_scales_fall_back_to_kdtree)
{
  float p[] = {0, 0, 0, 0, 1, 0, 0, 0, 1.001434326171875f, 1, 17592186044416.0f, 1,
               0.5f, 0.25f, 0.75f, -1.0000300407409668f, 0.0078125f, 0.5f};
  const float q[3] = {-0.25001502f, 0.12890625f, 0.625f}; /* nearest: point 2 */
  hicp_context *ctx = ctx_new();
  hicp_model_options o = validating();
  for (int far = 0; far < 2; far++) {
    p[10] = far == 0 ? 17592186044416.0f : 1000.0f;
    hicp_model *m;
    cr_assert_eq(hicp_model_build(ctx, p, 6, 0, &o, &m), 0, "%s", hicp_context_error(ctx));
    hicp_model_info info;
    hicp_model_info_init(&info);
    hicp_model_get_info(m, &info);
    if (far == 0) {
      cr_assert_eq(info.has_delaunay, 0);
      cr_assert(strstr(info.fallback_reason, "resolution") != NULL, "reason: %s",
                info.fallback_reason);
    } else {
      cr_assert_eq(info.has_delaunay, 1, "%s", info.fallback_reason);
    }
    for (int method = HICP_NN_PNN_OPT; method <= HICP_NN_PNN; method++) {
      hicp_nn_options no;
      hicp_nn_options_init(&no);
      no.method = (hicp_nn_method)method;
      uint32_t idx;
      float d2;
      cr_assert_eq(hicp_nn_query(ctx, m, q, 1, &no, &idx, &d2, NULL), 0);
      cr_assert_eq(idx, 2, "far point %s, method %d: %u", far == 0 ? "2^44" : "1e3", method, idx);
    }
    hicp_model_destroy(m);
  }
  hicp_context_destroy(ctx);
}

/* Two integer lattices 3e6 apart: the hull's flat faces bring guards 1e7
 * out, and Qhull merged the lattices' cospherical cells 19 times its
 * roundoff thick, a region of hundreds triangulated as it fell; walks
 * answered model points with a neighbour 1 away (stop 54's review).  The
 * merged cells' thickness is now part of the resolution: such a graph is
 * refused and the kd-tree answers.  Whatever the build chooses, every
 * method answers as brute force, on the points and between them. */
Test(model, merged_lattices_answer_exactly)
{
  enum { K = 6, N = 2 * K * K * K };
  static float p[3 * N];
  int n = 0;
  for (int c = 0; c < 2; c++)
    for (int x = 0; x < K; x++)
      for (int y = 0; y < K; y++)
        for (int z = 0; z < K; z++, n++) {
          p[3 * n] = (float)(x + c * 3e6);
          p[3 * n + 1] = (float)y;
          p[3 * n + 2] = (float)(z + c * 9e5);
        }
  /* queries: the points, and a half-integer grid about the first lattice */
  enum { H = 2 * K + 1, NQ = N + H * H * H };
  static float q[3 * NQ];
  memcpy(q, p, sizeof p);
  int nq = N;
  for (int x = 0; x < H; x++)
    for (int y = 0; y < H; y++)
      for (int z = 0; z < H; z++, nq++) {
        q[3 * nq] = 0.5f * (float)x - 0.5f;
        q[3 * nq + 1] = 0.5f * (float)y - 0.5f;
        q[3 * nq + 2] = 0.5f * (float)z - 0.5f;
      }
  hicp_context *ctx = ctx_new();
  hicp_model *m;
  cr_assert_eq(hicp_model_build(ctx, p, N, 0, NULL, &m), 0, "%s", hicp_context_error(ctx));
  static uint32_t want[NQ], got[NQ];
  static float want_d[NQ], got_d[NQ];
  hicp_nn_options no;
  hicp_nn_options_init(&no);
  no.method = HICP_NN_BRUTE;
  cr_assert_eq(hicp_nn_query(ctx, m, q, NQ, &no, want, want_d, NULL), 0);
  for (int i = 0; i < N; i++)
    cr_assert(want[i] == (uint32_t)i && want_d[i] == 0.0f, "brute force: point %d", i);
  const hicp_nn_method methods[] = {HICP_NN_PNN_OPT, HICP_NN_PNN, HICP_NN_ZERO, HICP_NN_KDTREE,
                                    HICP_NN_KDANN};
  for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
    no.method = methods[k];
    cr_assert_eq(hicp_nn_query(ctx, m, q, NQ, &no, got, got_d, NULL), 0);
    for (int i = 0; i < NQ; i++)
      cr_assert(got[i] == want[i] && got_d[i] == want_d[i],
                "method %d, query %d (%g %g %g): %u at %g, brute force %u at %g", (int)methods[k],
                i, q[3 * i], q[3 * i + 1], q[3 * i + 2], got[i], got_d[i], want[i], want_d[i]);
  }
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

Test(model, strided_input)
{
  struct {
    float xyz[3];
    float intensity;
    double pad;
  } pts[64];
  th_rng r;
  th_rng_seed(&r, 2);
  float packed[3 * 64];
  for (int i = 0; i < 64; i++) {
    for (int d = 0; d < 3; d++)
      packed[3 * i + d] = pts[i].xyz[d] = (float)th_uniform(&r);
    pts[i].intensity = NAN; /* must not be read */
  }
  hicp_context *ctx = ctx_new();
  hicp_model *a, *b;
  cr_assert_eq(hicp_model_build(ctx, pts[0].xyz, 64, sizeof pts[0], NULL, &a), 0, "%s",
               hicp_context_error(ctx));
  cr_assert_eq(hicp_model_build(ctx, packed, 64, 0, NULL, &b), 0);
  cr_assert_eq(a->nv, b->nv);
  cr_assert_eq(memcmp(a->vtx, b->vtx, sizeof(hicp__vtx) * a->nv), 0);
  cr_assert_eq(a->nedges, b->nedges);
  cr_assert_eq(memcmp(a->nbr, b->nbr, sizeof(uint32_t) * a->nedges), 0);
  hicp_model_destroy(a);
  hicp_model_destroy(b);
  hicp_context_destroy(ctx);
}

Test(model, bad_input)
{
  hicp_context *ctx = ctx_new();
  hicp_model *m = (hicp_model *)0x1;
  float p[] = {0, 0, 0, 1, 1, NAN};
  cr_assert_eq(hicp_model_build(ctx, p, 2, 0, NULL, &m), HICP_ENONFINITE);
  cr_assert_null(m);
  cr_assert(strstr(hicp_context_error(ctx), "point 1") != NULL, "%s", hicp_context_error(ctx));
  p[5] = INFINITY;
  cr_assert_eq(hicp_model_build(ctx, p, 2, 0, NULL, &m), HICP_ENONFINITE);
  cr_assert_eq(hicp_model_build(ctx, p, 0, 0, NULL, &m), HICP_EEMPTY);
  cr_assert_eq(hicp_model_build(ctx, NULL, 3, 0, NULL, &m), HICP_EINVAL);
  cr_assert_eq(hicp_model_build(ctx, p, 1, 8, NULL, &m), HICP_EINVAL);
  cr_assert_eq(hicp_model_build(ctx, p, 1, 0, NULL, NULL), HICP_EINVAL);
  hicp_model_options o;
  hicp_model_options_init(&o);
  o.flags = 1;
  cr_assert_eq(hicp_model_build(ctx, p, 1, 0, &o, &m), HICP_EINVAL);
  hicp_model_options_init(&o);
  o.delaunay = 7;
  cr_assert_eq(hicp_model_build(ctx, p, 1, 0, &o, &m), HICP_EINVAL);
  /* a single point is a fine model */
  cr_assert_eq(hicp_model_build(ctx, p, 1, 0, NULL, &m), 0);
  hicp_model_destroy(m);
  hicp_model_destroy(NULL);
  hicp_context_options co;
  hicp_context_options_init(&co);
  co.memory_limit = 1000;
  hicp_context *small;
  cr_assert_eq(hicp_context_create(&co, &small), 0);
  float big[3 * 100] = {0};
  for (int i = 0; i < 300; i++)
    big[i] = (float)i;
  cr_assert_eq(hicp_model_build(small, big, 100, 0, NULL, &m), HICP_ELIMIT);
  cr_assert(strstr(hicp_context_error(small), "memory limit") != NULL);
  hicp_context_destroy(small);
  hicp_context_destroy(ctx);
}

/* m fails validation with `words` in its message. */
static void expect_fault(hicp_context *ctx, const hicp_model *m, const char *words)
{
  cr_assert_eq(hicp__model_validate(ctx, m), HICP_EINTERNAL);
  cr_assert(strstr(hicp_context_error(ctx), words) != NULL, "%s", hicp_context_error(ctx));
}

Test(model, validator_catches_corruption)
{
  float p[3 * 200];
  hicp_context *ctx = ctx_new();
  hicp_model *m;
  build_unit_cloud(ctx, p, 200, 8, &m);
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  /* break symmetry: point one edge elsewhere */
  uint32_t saved = m->nbr[0];
  m->nbr[0] = m->nbr[0] == 199 ? 198 : 199;
  cr_assert_eq(hicp__model_validate(ctx, m), HICP_EINTERNAL);
  m->nbr[0] = saved;
  cr_assert_eq(hicp__model_validate(ctx, m), 0);
  uint32_t v = m->vertex_of[5];
  m->vertex_of[5] = v == 0 ? 1 : 0;
  cr_assert_eq(hicp__model_validate(ctx, m), HICP_EINTERNAL);
  m->vertex_of[5] = v;
  hicp__vtx kp = m->kd_pts[3];
  m->kd_pts[3] = m->kd_pts[4];
  cr_assert_eq(hicp__model_validate(ctx, m), HICP_EINTERNAL);
  m->kd_pts[3] = kp;
  cr_assert_eq(hicp__model_validate(ctx, m), 0);
  /* a split moved so that points of the left side lie past it, and one
   * that is NaN: the kd-tree search would prune the nearest vertex */
  cr_assert_neq(m->kd[0].dim, HICP_KD_LEAF);
  const float split = m->kd[0].split;
  m->kd[0].split = split - 0.25f;
  expect_fault(ctx, m, "on the wrong side of a split");
  m->kd[0].split = NAN;
  cr_assert_eq(hicp__model_validate(ctx, m), HICP_EINTERNAL);
  m->kd[0].split = split;
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  /* a child split outside the box its parent leaves it */
  const uint32_t left = m->kd[0].first;
  cr_assert_neq(m->kd[left].dim, HICP_KD_LEAF);
  const float inner = m->kd[left].split;
  if (m->kd[left].dim == m->kd[0].dim) {
    m->kd[left].split = split + 1.0f;
    cr_assert_eq(hicp__model_validate(ctx, m), HICP_EINTERNAL);
    m->kd[left].split = inner;
  }
  /* two nodes sharing their children: the leaves still cover every
   * vertex once, but the other children are never reached */
  const uint32_t right = left + 1, shared = m->kd[left].first;
  cr_assert_neq(m->kd[right].dim, HICP_KD_LEAF);
  const uint32_t own = m->kd[right].first;
  m->kd[right].first = shared;
  expect_fault(ctx, m, "reached twice");
  m->kd[right].first = own;
  cr_assert_eq(hicp__model_validate(ctx, m), 0);
  /* a start table entry past the vertices, and an empty grid */
  const uint32_t entry = m->start[2];
  m->start[2] = m->nv;
  expect_fault(ctx, m, "start table cell 2");
  m->start[2] = entry;
  const uint32_t dim1 = m->start_dim[1];
  m->start_dim[1] = 0;
  cr_assert_eq(hicp__model_validate(ctx, m), HICP_EINTERNAL);
  m->start_dim[1] = dim1;
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* The graph's other checks, each on the one fault it alone sees and
 * named: a row out of order (the walks stop at the first edge longer than
 * needed), a vertex its own neighbour, a length code above the length, a
 * safe radius past half the shortest edge, and a point answered by a
 * duplicate that is not its first. */
Test(model, validator_names_each_graph_fault)
{
  enum { N = 200 };
  float p[3 * (N + 1)];
  hicp_context *ctx = ctx_new();
  hicp_model *m;
  build_unit_cloud(ctx, p, N, 8, &m);
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  /* a row's first two edges swapped, the codes with them */
  uint32_t v = 0, e0 = 0;
  for (; v < m->nv; v++) {
    e0 = m->row[v];
    if (m->ecode[e0] < m->ecode[e0 + 1])
      break;
  }
  cr_assert_lt(v, m->nv, "a row with two lengths");
  const uint32_t n0 = m->nbr[e0], n1 = m->nbr[e0 + 1];
  const uint8_t c0 = m->ecode[e0], c1 = m->ecode[e0 + 1];
  m->nbr[e0] = n1;
  m->ecode[e0] = c1;
  m->nbr[e0 + 1] = n0;
  m->ecode[e0 + 1] = c0;
  expect_fault(ctx, m, "is not sorted by edge length");
  m->nbr[e0] = n0;
  m->ecode[e0] = c0;
  m->nbr[e0 + 1] = n1;
  m->ecode[e0 + 1] = c1;
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  /* the row's first edge pointing back at v */
  m->nbr[e0] = v;
  expect_fault(ctx, m, "is its own neighbour");
  m->nbr[e0] = n0;
  /* the first edge's code one more (the row still sorted): above its length */
  cr_assert_gt((c0 + 1.0) * m->eunit[v], sqrt(hicp__vtx_dist2(&m->vtx[v], &m->vtx[n0])));
  m->ecode[e0] = (uint8_t)(c0 + 1);
  expect_fault(ctx, m, "has a length code above its length");
  m->ecode[e0] = c0;
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  /* a safe radius of the whole shortest edge, not half of it */
  const float r2 = m->safe_r2[v];
  m->safe_r2[v] = (float)(0.5 * hicp__shortest_edge2(m, v));
  expect_fault(ctx, m, "has an unsafe safe radius");
  m->safe_r2[v] = r2;
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  hicp_model_destroy(m);
  /* point N repeats point 5: its vertex must answer with 5, not N */
  memcpy(p + 3 * N, p + 15, sizeof(float) * 3);
  cr_assert_eq(hicp_model_build(ctx, p, N + 1, 0, NULL, &m), 0, "%s", hicp_context_error(ctx));
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  const uint32_t dup = m->vertex_of[5];
  cr_assert_eq(m->vertex_of[N], dup);
  cr_assert_eq(m->vtx[dup].id, 5);
  m->vtx[dup].id = N;
  expect_fault(ctx, m, "point 5 maps to a vertex that is not its smallest");
  m->vtx[dup].id = 5;
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* A graph every other check passes but that falls apart: the vertices
 * in pairs, each pair's two joined only to each other (symmetric, no
 * empty row, no repeat, codes of 0 below every length).  A walk would
 * never leave its pair; only the breadth-first reachability sees it. */
Test(model, validator_sees_a_graph_in_pieces)
{
  enum { N = 200 };
  float p[3 * N];
  hicp_context *ctx = ctx_new();
  hicp_model *m;
  build_unit_cloud(ctx, p, N, 8, &m);
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  const uint32_t nv = m->nv;
  cr_assert_eq(nv % 2, 0, "distinct points in pairs");
  cr_assert_gt(m->nedges, nv + 2);
  uint32_t *row = malloc(sizeof(uint32_t) * (nv + 1)), *nbr = malloc(sizeof(uint32_t) * (nv + 2));
  uint8_t *code = malloc(nv + 2);
  float *r2 = malloc(sizeof(float) * nv);
  cr_assert(row && nbr && code && r2);
  memcpy(row, m->row, sizeof(uint32_t) * (nv + 1));
  memcpy(nbr, m->nbr, sizeof(uint32_t) * (nv + 2));
  memcpy(code, m->ecode, nv + 2);
  memcpy(r2, m->safe_r2, sizeof(float) * nv);
  const uint64_t nedges = m->nedges;
  for (uint32_t v = 0; v < nv; v++) {
    m->row[v] = v;
    m->nbr[v] = v ^ 1u;
    m->ecode[v] = 0;
    m->safe_r2[v] = 0.0f;
  }
  m->row[nv] = nv;
  m->nedges = nv;
  expect_fault(ctx, m, "only 2 of");
  cr_assert(strstr(hicp_context_error(ctx), "vertices are reachable") != NULL, "%s",
            hicp_context_error(ctx));
  /* the first two pairs joined into a chain 0-1-2-3: four reached */
  const uint32_t chain[] = {1, 0, 2, 1, 3, 2};
  memcpy(m->nbr, chain, sizeof chain);
  m->row[1] = 1;
  m->row[2] = 3;
  m->row[3] = 5;
  m->row[4] = 6;
  for (uint32_t v = 4; v < nv; v++) {
    m->row[v] = v + 2;
    m->nbr[v + 2] = v ^ 1u;
    m->ecode[v + 2] = 0;
  }
  m->ecode[nv] = m->ecode[nv + 1] = 0;
  m->row[nv] = nv + 2;
  m->nedges = nv + 2;
  expect_fault(ctx, m, "only 4 of");
  memcpy(m->row, row, sizeof(uint32_t) * (nv + 1));
  memcpy(m->nbr, nbr, sizeof(uint32_t) * (nv + 2));
  memcpy(m->ecode, code, nv + 2);
  memcpy(m->safe_r2, r2, sizeof(float) * nv);
  m->nedges = nedges;
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  free(row);
  free(nbr);
  free(code);
  free(r2);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* The graph's checks on a vertex joined to every other (the centre of
 * points on a sphere: its row has n - 1 neighbours, and checking its
 * repeats and reverse edges pair by pair was quadratic in that), and the
 * two faults they look for, each named. */
Test(model, validator_on_a_hub_vertex)
{
  enum { N = 3001 };
  static float p[3 * N];
  for (int i = 0; i < N - 1; i++) { /* a Fibonacci sphere, and its centre */
    const double z = 1.0 - (2.0 * i + 1.0) / (N - 1), r = sqrt(1.0 - z * z);
    const double phi = 2.399963229728653 * i;
    p[3 * i] = (float)(r * cos(phi));
    p[3 * i + 1] = (float)(r * sin(phi));
    p[3 * i + 2] = (float)z;
  }
  p[3 * (N - 1)] = p[3 * (N - 1) + 1] = p[3 * (N - 1) + 2] = 0.0f;
  hicp_context *ctx = ctx_new();
  hicp_model_options o = validating();
  hicp_model *m;
  cr_assert_eq(hicp_model_build(ctx, p, N, 0, &o, &m), 0, "%s", hicp_context_error(ctx));
  const uint32_t hub = m->vertex_of[N - 1];
  cr_assert_eq(m->row[hub + 1] - m->row[hub], N - 1, "the centre has %u neighbours",
               (unsigned)(m->row[hub + 1] - m->row[hub]));
  /* the start table exact, its cells' walks that reach the hub finished
   * by the kd-tree rather than a scan of the hub's row (lib/start_table.c) */
  cr_assert_gt(th_assert_start_table_exact(m), (uint64_t)m->nv);
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  /* a repeat: the hub's second neighbour made its first (same code) */
  const uint32_t e0 = m->row[hub];
  const uint32_t nbr1 = m->nbr[e0 + 1], code1 = m->ecode[e0 + 1];
  m->nbr[e0 + 1] = m->nbr[e0];
  m->ecode[e0 + 1] = m->ecode[e0];
  expect_fault(ctx, m, "repeats neighbour");
  m->nbr[e0 + 1] = nbr1;
  m->ecode[e0 + 1] = code1;
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  /* a missing reverse edge: in a sphere vertex's row, the hub (its
   * longest edge, about 1) replaced by the sphere vertex farthest from it
   * (about 2, not its neighbour): the length code stays below the length
   * and the row stays sorted, so only the reverse-edge check can see it */
  const uint32_t a = m->vertex_of[0];
  uint32_t at = HICP_NONE, far = HICP_NONE;
  double far2 = 0.0;
  for (uint32_t e = m->row[a]; e < m->row[a + 1]; e++)
    if (m->nbr[e] == hub)
      at = e;
  for (uint32_t b = 0; b < m->nv; b++) {
    const double d2 = hicp__vtx_dist2(&m->vtx[a], &m->vtx[b]);
    if (b != hub && d2 > far2) {
      far2 = d2;
      far = b;
    }
  }
  cr_assert_neq(at, HICP_NONE, "the hub is vertex 0's neighbour");
  cr_assert_gt(far2, 3.9);
  for (uint32_t e = m->row[a]; e < m->row[a + 1]; e++)
    cr_assert_neq(m->nbr[e], far, "the far vertex is no neighbour");
  m->nbr[at] = far;
  expect_fault(ctx, m, "has no reverse edge");
  m->nbr[at] = hub;
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* The Morton (Z-order) key of a point, computed here from the definition
 * rather than with the library's bit tricks: the box [lo, lo + ext] cut
 * into 2^21 - 1 cells per axis along its largest extent (points on the far
 * face in the last cell, 2^21 - 1), and the three cell numbers' bits
 * interleaved one at a time, x lowest: bit 3b + d of the key is bit b of
 * axis d's cell. */
static uint64_t morton_key(const double lo[3], double ext, const double p[3])
{
  const double cells = (double)((1u << 21) - 1u);
  uint64_t c[3];
  for (int d = 0; d < 3; d++) {
    const double x = ext > 0.0 ? (p[d] - lo[d]) * (cells / ext) : 0.0;
    c[d] = x <= 0.0 ? 0 : x >= cells ? (uint64_t)cells : (uint64_t)floor(x);
  }
  uint64_t key = 0;
  for (int b = 0; b < 21; b++)
    for (int d = 0; d < 3; d++)
      key |= ((c[d] >> b) & 1u) << (3 * b + d);
  return key;
}

/* hicp__keys_placed (cpu/keys_simd.c: vector code by default) against the
 * scalar definition, point by point, for every HICP_SIMD variant: the keys
 * of the points placed by a pose (hicp__apply, then hicp__zkey21), points
 * outside the grid's box on either side (clamped cells) and on its faces
 * included, and the box of the points as given, folded into the one
 * passed in; counts that leave 0 to 3 points past the vector code's groups
 * of four. */
Test(model, placed_keys_are_the_scalar_keys)
{
  th_rng r;
  th_rng_seed(&r, 29);
  const double glo[3] = {-1.0, -0.5, 0.25}, ghi[3] = {2.0, 1.5, 0.75};
  hicp__zgrid g;
  hicp__zgrid_init(&g, glo, ghi);
  const double a = 0.3, c = cos(a), sn = sin(a);
  const hicp__xf T = {{c, -sn, 0.0, sn, c, 0.0, 0.0, 0.0, 1.0}, {0.1, -0.2, 0.05}};
  const size_t most = 1003;
  float *p = malloc(sizeof(float) * 3 * most);
  for (size_t i = 0; i < most; i++)
    for (int d = 0; d < 3; d++)
      p[3 * i + d] = (float)(glo[d] - 1.0 + th_uniform(&r) * (ghi[d] - glo[d] + 2.0));
  /* a point on the box's low corner and one on its high corner, as placed */
  const hicp__xf inv = {{c, sn, 0.0, -sn, c, 0.0, 0.0, 0.0, 1.0}, {0.0, 0.0, 0.0}};
  for (int k = 0; k < 2; k++) {
    const float at[3] = {(float)((k ? ghi[0] : glo[0]) - T.t[0]),
                         (float)((k ? ghi[1] : glo[1]) - T.t[1]),
                         (float)((k ? ghi[2] : glo[2]) - T.t[2])};
    double back[3];
    hicp__apply(&inv, at, back);
    for (int d = 0; d < 3; d++)
      p[3 * (5 + (size_t)k) + d] = (float)back[d];
  }
  uint32_t *key = malloc(sizeof *key * most);
  static const size_t counts[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 1000, 1003};
  size_t clamped = 0;
  for (size_t v = 0; v < TH_NSIMD; v++) {
    setenv("HICP_SIMD", th_simd[v], 1);
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
      const size_t n = counts[k];
      /* a box passed in that some points widen and some do not */
      float lo[3] = {0.5f, INFINITY, -3.0f}, hi[3] = {0.5f, -INFINITY, 3.0f};
      float want_lo[3], want_hi[3];
      memcpy(want_lo, lo, sizeof lo);
      memcpy(want_hi, hi, sizeof hi);
      hicp__keys_placed(&g, &T, p, n, key, lo, hi);
      for (size_t i = 0; i < n; i++) {
        double q[3];
        hicp__apply(&T, &p[3 * i], q);
        const uint32_t want = hicp__zkey21(&g, q[0], q[1], q[2]);
        cr_assert_eq(key[i], want, "HICP_SIMD=%s, %zu points: point %zu's key %#x, want %#x",
                     th_simd[v], n, i, key[i], want);
        for (int d = 0; d < 3; d++) {
          clamped += v == 0 && n == most && (q[d] < glo[d] || q[d] > ghi[d]);
          want_lo[d] = p[3 * i + d] < want_lo[d] ? p[3 * i + d] : want_lo[d];
          want_hi[d] = p[3 * i + d] > want_hi[d] ? p[3 * i + d] : want_hi[d];
        }
      }
      for (int d = 0; d < 3; d++)
        cr_assert(lo[d] == want_lo[d] && hi[d] == want_hi[d],
                  "HICP_SIMD=%s, %zu points, axis %d: box %g .. %g, want %g .. %g", th_simd[v], n,
                  d, (double)lo[d], (double)hi[d], (double)want_lo[d], (double)want_hi[d]);
    }
  }
  unsetenv("HICP_SIMD");
  cr_assert_gt(clamped, most / 4, "points outside the grid's box should be clamped");
  free(key);
  free(p);
}

/* Vertices are stored along the Morton curve over the model's box, ties in
 * original order (the order checked with the key computed here, and the
 * library's keys against it); the short query keys are the long keys' top
 * bits; the counting sort orders by them, stably, with its inverse. */
Test(model, spatial_order)
{
  th_rng r;
  th_rng_seed(&r, 17);
  const size_t n = 5000;
  float *p = malloc(sizeof(float) * 3 * n);
  for (size_t i = 0; i < 3 * n; i++)
    p[i] = (float)(th_uniform(&r) * (i % 3 == 2 ? 0.3 : 2.0));
  hicp_context *ctx = ctx_new();
  hicp_model_options o = validating();
  hicp_model *m;
  cr_assert_eq(hicp_model_build(ctx, p, n, 0, &o, &m), 0, "%s", hicp_context_error(ctx));
  hicp__zgrid g;
  hicp__zgrid_init(&g, m->bbox_min, m->bbox_max);
  /* the box of the input points, found here */
  double lo[3] = {HUGE_VAL, HUGE_VAL, HUGE_VAL}, hi[3] = {-HUGE_VAL, -HUGE_VAL, -HUGE_VAL};
  for (size_t i = 0; i < n; i++)
    for (int d = 0; d < 3; d++) {
      lo[d] = fmin(lo[d], p[3 * i + d]);
      hi[d] = fmax(hi[d], p[3 * i + d]);
    }
  const double ext = fmax(hi[0] - lo[0], fmax(hi[1] - lo[1], hi[2] - lo[2]));
  uint64_t prev = 0, prev_mine = 0;
  size_t moved = 0;
  for (uint32_t v = 0; v < m->nv; v++) {
    const double at[3] = {m->vtx[v].x, m->vtx[v].y, m->vtx[v].z};
    const uint64_t mine = morton_key(lo, ext, at);
    cr_assert_geq(mine, prev_mine, "vertex %u (point %u) is out of Morton order", v, m->vtx[v].id);
    cr_assert(mine > prev_mine || v == 0 || m->vtx[v].id > m->vtx[v - 1].id,
              "vertex %u: equal Morton keys out of original order", v);
    uint64_t k = hicp__zkey(&g, m->vtx[v].x, m->vtx[v].y, m->vtx[v].z);
    cr_assert_eq(k, mine, "vertex %u: hicp__zkey %#llx, the Morton key is %#llx", v,
                 (unsigned long long)k, (unsigned long long)mine);
    cr_assert_geq(k, prev, "vertex %u is out of Morton order", v);
    cr_assert(k > prev || v == 0 || m->vtx[v].id > m->vtx[v - 1].id);
    moved += m->vtx[v].id != v;
    prev = k;
    prev_mine = mine;
  }
  cr_assert_gt(moved, n / 2, "a random cloud should be reordered");

  uint32_t *key = malloc(sizeof *key * n), *order = malloc(sizeof *order * n);
  uint32_t *inv = malloc(sizeof *inv * n);
  for (size_t i = 0; i < n; i++) {
    const float *q = &p[3 * i];
    key[i] = hicp__zkey21(&g, q[0], q[1], q[2]);
    cr_assert_eq(key[i], (uint32_t)(hicp__zkey(&g, q[0], q[1], q[2]) >> 42));
    const double at[3] = {q[0], q[1], q[2]};
    cr_assert_eq(key[i], (uint32_t)(morton_key(lo, ext, at) >> 42), "point %zu", i);
  }
  cr_assert_eq(hicp__zsort(key, (uint32_t)n, order, inv, NULL), HICP_OK);
  const int shift = 21 - 13; /* 2^13 buckets: the first power of two >= 5000 */
  for (size_t j = 0; j < n; j++) {
    cr_assert_eq(inv[order[j]], j);
    if (j > 0) {
      uint32_t a = key[order[j - 1]] >> shift, b = key[order[j]] >> shift;
      cr_assert(a < b || (a == b && order[j - 1] < order[j]), "position %zu", j);
    }
  }
  free(key);
  free(order);
  free(inv);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
  free(p);
}

/* The start table (lib/start_table.c): a walk without a previous match
 * begins at its cell's entry, which must be the vertex nearest the cell's
 * centre (the brute force's answer, ties to the smaller id), in a grid of
 * at most 4 cells a vertex; none without a graph.
 * A cloud, a thin slab (one axis 1e-3 of the others: most of its cells'
 * centres lie far off the points) and a cloud with duplicates. */
Test(model, start_table_is_exact)
{
  th_rng r;
  th_rng_seed(&r, 23);
  const size_t n = 3000;
  float *p = malloc(sizeof(float) * 3 * n);
  for (int shape = 0; shape < 3; shape++) {
    for (size_t i = 0; i < 3 * n; i++)
      p[i] = (float)(shape == 1 && i % 3 == 1 ? 1e-3 * th_uniform(&r) : th_normal(&r));
    if (shape == 2)
      for (size_t i = 10; i < n; i += 5)
        memcpy(&p[3 * i], &p[3 * (i - 9)], 12);
    hicp_context *ctx = ctx_new();
    hicp_model_options o = validating();
    hicp_model *m;
    cr_assert_eq(hicp_model_build(ctx, p, n, 0, &o, &m), 0, "%s", hicp_context_error(ctx));
    cr_assert_eq(m->has_delaunay, 1, "shape %d: %s", shape, m->fallback);
    cr_assert_not_null(m->start);
    uint64_t cells = 1;
    for (int d = 0; d < 3; d++) {
      cr_assert_geq(m->start_dim[d], 1);
      cells *= m->start_dim[d];
    }
    cr_assert_leq(cells, 4 * (uint64_t)m->nv, "shape %d: %llu cells", shape,
                  (unsigned long long)cells);
    cr_assert_gt(cells, (uint64_t)m->nv, "shape %d: %llu cells", shape, (unsigned long long)cells);
    cr_assert_eq(th_assert_start_table_exact(m), cells);
    hicp_model_info info;
    hicp_model_info_init(&info);
    cr_assert_eq(hicp_model_get_info(m, &info), 0);
    cr_assert_eq(info.bytes_start, 4 * cells);
    hicp_model_destroy(m);
    /* without a graph: no table, no bytes */
    o.delaunay = 0;
    cr_assert_eq(hicp_model_build(ctx, p, n, 0, &o, &m), 0, "%s", hicp_context_error(ctx));
    cr_assert_null(hicp__model_view(m).start);
    cr_assert_eq(hicp_model_get_info(m, &info), 0);
    cr_assert_eq(info.bytes_start, 0);
    hicp_model_destroy(m);
    hicp_context_destroy(ctx);
  }
  free(p);
}

/* A box too small for the table's float scale (a forged format 2 file's
 * header can claim any box; its table is built as it loads) gives one
 * cell, at once: the grid's ladder once never ended on a box of 1e-310
 * (tests/fuzz/corpus/model_file/regression-962dfca2). */
Test(model, start_table_of_a_tiny_box, .timeout = 30)
{
  float p[3 * 300];
  hicp_context *ctx = ctx_new();
  hicp_model *m;
  build_unit_cloud(ctx, p, 300, 5, &m);
  const double tiny[] = {1e-310, 1e-40, 0.0};
  for (size_t k = 0; k < sizeof tiny / sizeof *tiny; k++) {
    for (int d = 0; d < 3; d++) {
      m->bbox_min[d] = 0.0;
      m->bbox_max[d] = tiny[k];
    }
    cr_assert_eq(hicp__start_table_build(ctx, m), 0, "%s", hicp_context_error(ctx));
    cr_assert(m->start_dim[0] == 1 && m->start_dim[1] == 1 && m->start_dim[2] == 1,
              "box %g: %u x %u x %u cells", tiny[k], m->start_dim[0], m->start_dim[1],
              m->start_dim[2]);
    cr_assert_eq(th_assert_start_table_exact(m), 1);
  }
  /* a box of 1e-30, as coordinates near 1e-30 give: a grid as usual */
  for (int d = 0; d < 3; d++)
    m->bbox_max[d] = 1e-30;
  cr_assert_eq(hicp__start_table_build(ctx, m), 0, "%s", hicp_context_error(ctx));
  cr_assert_gt((uint64_t)m->start_dim[0] * m->start_dim[1] * m->start_dim[2], 300);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}
