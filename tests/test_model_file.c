/* test_model_file.c: saving and loading models: bitwise round trips and
 * clean refusal of corrupted, truncated and foreign files. */
#include "config.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "model.h"
#include "testhelp.h"

static hicp_model *random_model(size_t n, int delaunay)
{
  th_rng r;
  th_rng_seed(&r, n);
  float *p = malloc(sizeof(float) * 3 * n);
  for (size_t i = 0; i < 3 * n; i++)
    p[i] = (float)th_normal(&r);
  for (size_t i = 10; i < n; i += 10) /* some duplicates */
    memcpy(&p[3 * i], &p[3 * (i - 7)], 12);
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  hicp_model_options o;
  hicp_model_options_init(&o);
  o.delaunay = delaunay;
  hicp_model *m;
  cr_assert_eq(hicp_model_build(ctx, p, n, 0, &o, &m), 0, "%s", hicp_context_error(ctx));
  hicp_context_destroy(ctx);
  free(p);
  return m;
}

static void assert_same_model(const hicp_model *a, const hicp_model *b)
{
  cr_assert_eq(a->npoints, b->npoints);
  cr_assert_eq(a->nv, b->nv);
  cr_assert_eq(a->has_delaunay, b->has_delaunay);
  cr_assert_eq(memcmp(a->vtx, b->vtx, sizeof(hicp__vtx) * a->nv), 0);
  cr_assert_eq(memcmp(a->vertex_of, b->vertex_of, sizeof(uint32_t) * a->npoints), 0);
  if (a->has_delaunay) {
    cr_assert_eq(a->nedges, b->nedges);
    cr_assert_eq(memcmp(a->row, b->row, sizeof(uint32_t) * (a->nv + 1)), 0);
    cr_assert_eq(memcmp(a->nbr, b->nbr, sizeof(uint32_t) * a->nedges), 0);
    cr_assert_eq(memcmp(a->safe_r2, b->safe_r2, sizeof(float) * a->nv), 0);
    cr_assert_eq(memcmp(a->ecode, b->ecode, a->nedges), 0);
    cr_assert_eq(memcmp(a->eunit, b->eunit, sizeof(float) * a->nv), 0);
    cr_assert_eq(memcmp(a->start_dim, b->start_dim, sizeof a->start_dim), 0);
    cr_assert_eq(memcmp(a->start_lo, b->start_lo, sizeof a->start_lo), 0);
    cr_assert_eq(memcmp(&a->start_inv, &b->start_inv, sizeof a->start_inv), 0);
    cr_assert_eq(memcmp(a->start, b->start,
                        sizeof(uint32_t) * a->start_dim[0] * a->start_dim[1] * a->start_dim[2]),
                 0);
  } else {
    cr_assert_null(b->start);
  }
  cr_assert_eq(a->nkd, b->nkd);
  cr_assert_eq(memcmp(a->kd, b->kd, sizeof(hicp__kdnode) * a->nkd), 0);
  cr_assert_eq(memcmp(a->kd_pts, b->kd_pts, sizeof(hicp__vtx) * a->nv), 0);
  cr_assert_eq(a->zero_start, b->zero_start);
  cr_assert_eq(memcmp(a->origin, b->origin, sizeof a->origin), 0);
}

Test(model_file, round_trip_bitwise)
{
  const char *dir = th_tmpdir();
  for (int g = 0; g <= 1; g++) {
    hicp_model *m = random_model(3001, g);
    hicp_context *ctx;
    cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
    const char *path = th_path(dir, g ? "graph.hicpm" : "kd.hicpm");
    cr_assert_eq(hicp_model_save(ctx, m, path), 0, "%s", hicp_context_error(ctx));
    hicp_model *l;
    cr_assert_eq(hicp_model_load(ctx, path, &l), 0, "%s", hicp_context_error(ctx));
    assert_same_model(m, l);
    cr_assert_eq(hicp__model_validate(ctx, l), 0, "%s", hicp_context_error(ctx));
    /* hicp_model_open recognises the file too */
    hicp_model *o;
    cr_assert_eq(hicp_model_open(ctx, path, NULL, &o), 0, "%s", hicp_context_error(ctx));
    assert_same_model(m, o);
    hicp_model_destroy(o);
    /* answers from the loaded model are identical */
    float q[3 * 100];
    th_rng r;
    th_rng_seed(&r, 4);
    for (int i = 0; i < 300; i++)
      q[i] = (float)(3 * th_normal(&r));
    uint32_t ia[100], ib[100];
    float da[100], db[100];
    cr_assert_eq(hicp_nn_query(ctx, m, q, 100, NULL, ia, da, NULL), 0);
    cr_assert_eq(hicp_nn_query(ctx, l, q, 100, NULL, ib, db, NULL), 0);
    cr_assert_eq(memcmp(ia, ib, sizeof ia), 0);
    cr_assert_eq(memcmp(da, db, sizeof da), 0);
    hicp_model_destroy(l);
    hicp_model_destroy(m);
    hicp_context_destroy(ctx);
  }
}

/* hicp_model_open on a saved model: the options ask for a check, never for
 * another build; what cannot be honoured is refused, not ignored. */
Test(model_file, open_honours_options)
{
  const char *dir = th_tmpdir();
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  for (int g = 0; g <= 1; g++) {
    hicp_model *m = random_model(1500, g);
    const char *path = th_path(dir, g ? "open-graph.hicpm" : "open-kd.hicpm");
    cr_assert_eq(hicp_model_save(ctx, m, path), 0, "%s", hicp_context_error(ctx));
    hicp_model_options o;
    hicp_model *l = NULL;
    /* validate: loads and checks */
    hicp_model_options_init(&o);
    o.validate = 1;
    cr_assert_eq(hicp_model_open(ctx, path, &o, &l), 0, "%s", hicp_context_error(ctx));
    assert_same_model(m, l);
    hicp_model_destroy(l);
    l = NULL;
    /* no graph: fine for a file without one, refused for a file with one */
    hicp_model_options_init(&o);
    o.delaunay = 0;
    int rc = hicp_model_open(ctx, path, &o, &l);
    if (g) {
      cr_assert_eq(rc, HICP_EINVAL);
      cr_assert_null(l);
      cr_assert_not_null(strstr(hicp_context_error(ctx), "keeps its Delaunay graph"), "%s",
                         hicp_context_error(ctx));
      cr_assert_not_null(strstr(hicp_context_error(ctx), path));
    } else {
      cr_assert_eq(rc, 0, "%s", hicp_context_error(ctx));
      assert_same_model(m, l);
      hicp_model_destroy(l);
      l = NULL;
    }
    /* options a build would refuse are refused here too */
    hicp_model_options_init(&o);
    o.flags = 1;
    cr_assert_eq(hicp_model_open(ctx, path, &o, &l), HICP_EINVAL);
    cr_assert_null(l);
    /* validate on a file that loads but breaks an invariant (a kd-tree
     * point's vertex given twice): a malformed file, HICP_EFORMAT */
    m->kd_pts[1] = m->kd_pts[0];
    cr_assert_eq(hicp_model_save(ctx, m, path), 0, "%s", hicp_context_error(ctx));
    cr_assert_eq(hicp_model_load(ctx, path, &l), 0, "%s", hicp_context_error(ctx));
    hicp_model_destroy(l);
    l = NULL;
    hicp_model_options_init(&o);
    o.validate = 1;
    cr_assert_eq(hicp_model_open(ctx, path, &o, &l), HICP_EFORMAT, "%s", hicp_context_error(ctx));
    cr_assert_null(l);
    cr_assert_not_null(strstr(hicp_context_error(ctx), "repeated point"), "%s",
                       hicp_context_error(ctx));
    hicp_model_destroy(m);
  }
  hicp_context_destroy(ctx);
}

Test(model_file, corrupted_files_are_refused)
{
  const char *dir = th_tmpdir();
  hicp_model *m = random_model(2000, 1);
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  const char *good = th_path(dir, "good.hicpm");
  cr_assert_eq(hicp_model_save(ctx, m, good), 0);
  size_t len;
  unsigned char *data = th_read(good, &len);
  const char *bad = th_path(dir, "bad.hicpm");
  hicp_model *l = NULL;

  /* every truncation */
  for (size_t cut = 0; cut < len; cut += (cut < 600 ? 1 : 997)) {
    th_write(bad, data, cut);
    cr_assert_eq(hicp_model_load(ctx, bad, &l), HICP_EFORMAT, "cut at %zu", cut);
    cr_assert_null(l);
    cr_assert(strstr(hicp_context_error(ctx), "bad.hicpm") != NULL, "%s", hicp_context_error(ctx));
  }
  /* cut after its header, it says so; with bytes after its end, it says
   * that (stop 63's review: "truncated?" both ways) */
  th_write(bad, data, len - 64);
  cr_assert_eq(hicp_model_load(ctx, bad, &l), HICP_EFORMAT);
  cr_assert(strstr(hicp_context_error(ctx), "(truncated?)") != NULL, "%s", hicp_context_error(ctx));
  unsigned char *longer = calloc(len + 64, 1);
  memcpy(longer, data, len);
  th_write(bad, longer, len + 64);
  free(longer);
  cr_assert_eq(hicp_model_load(ctx, bad, &l), HICP_EFORMAT);
  cr_assert(strstr(hicp_context_error(ctx), "(data appended?)") != NULL, "%s",
            hicp_context_error(ctx));
  cr_assert_null(l);
  /* opened (a model file or a point cloud), a file cut within the magic is
   * a model file too short, not a cloud of no known format, nor a model
   * file that is "not a point cloud" (stop 53's review: 7 bytes) */
  for (size_t cut = 4; cut <= 12; cut++) {
    th_write(bad, data, cut);
    cr_assert_eq(hicp_model_open(ctx, bad, NULL, &l), HICP_EFORMAT, "cut at %zu", cut);
    cr_assert(strstr(hicp_context_error(ctx), "too short for a hicp model file") != NULL,
              "cut at %zu: %s", cut, hicp_context_error(ctx));
  }
  /* Which bytes the checksums cover, from the layout (lib/model_file.c):
   * the header checksum all of the header (its own 8 bytes count as zero,
   * so a flip there is a mismatch too), the payload checksum every byte of
   * every section.  The header gives its size at byte 16 and ends with
   * offset[10], size[10], file_size, payload_sum and header_sum, 8 bytes
   * each.  Nothing else is covered: the zeros before each section and at
   * the end that bring it to a 64-byte boundary, under 64 bytes a gap. */
  uint32_t hsize;
  memcpy(&hsize, data + 16, 4);
  cr_assert(hsize % 8 == 0 && hsize >= 288 + 184 && hsize < len, "header of %u bytes", hsize);
  uint64_t offset[10], size[10], file_size;
  memcpy(offset, data + hsize - 184, sizeof offset);
  memcpy(size, data + hsize - 104, sizeof size);
  memcpy(&file_size, data + hsize - 24, 8);
  cr_assert_eq(file_size, len);
  unsigned char *covered = calloc(len, 1);
  memset(covered, 1, hsize);
  size_t end = hsize, uncovered = 0;
  for (int s = 0; s < 10; s++) {
    if (size[s] == 0)
      continue;
    cr_assert(offset[s] % 64 == 0 && offset[s] >= end && offset[s] - end < 64 &&
                  size[s] <= len - offset[s],
              "section %d at %llu after %zu", s, (unsigned long long)offset[s], end);
    uncovered += offset[s] - end;
    memset(covered + offset[s], 1, size[s]);
    end = offset[s] + size[s];
  }
  cr_assert(len % 64 == 0 && len - end < 64, "%zu bytes after the last section", len - end);
  uncovered += len - end;
  cr_assert_leq(uncovered, 11 * 63, "%zu bytes outside the checksums", uncovered);
  /* a flipped bit in a covered byte is refused, by the checksum that covers
   * it (a flip that loads got past both): every byte of the header, the
   * first and last of every section and a sample between; the magic,
   * version and byte-order mark (bytes 0-15) are refused by their own
   * checks first.  A flip in the padding may load. */
  int flipped_sections = 0;
  for (size_t pos = 0; pos < len; pos++) {
    int edge = 0;
    for (int s = 0; s < 10; s++)
      edge |= size[s] != 0 && (pos == offset[s] || pos == offset[s] + size[s] - 1);
    if (!(pos < hsize || edge || !covered[pos] || pos % 1013 == 0))
      continue;
    unsigned char saved = data[pos];
    data[pos] ^= 0x10;
    th_write(bad, data, len);
    int rc = hicp_model_load(ctx, bad, &l);
    data[pos] = saved;
    if (!covered[pos]) {
      cr_assert(rc == 0 || rc == HICP_EFORMAT, "flip in the padding at %zu: %d", pos, rc);
      hicp_model_destroy(l);
      l = NULL;
      continue;
    }
    cr_assert_eq(rc, HICP_EFORMAT, "flip at %zu (%s) loaded: %d", pos,
                 pos < hsize ? "header" : "section", rc);
    cr_assert_null(l);
    const char *want = pos < 16 ? "" : pos < hsize ? "corrupted header (checksum mismatch)"
                                                   : "corrupted data (checksum mismatch)";
    cr_assert(strstr(hicp_context_error(ctx), want) != NULL, "flip at %zu: %s", pos,
              hicp_context_error(ctx));
    flipped_sections += pos >= hsize;
  }
  cr_assert_geq(flipped_sections, 20, "only %d flips in the sections", flipped_sections);
  free(covered);
  /* byte order and version */
  unsigned char other[4] = {0x01, 0x02, 0x03, 0x04};
  uint32_t mark;
  memcpy(&mark, other, 4);
  unsigned char *copy = malloc(len);
  memcpy(copy, data, len);
  uint32_t swapped = 0x04030201u;
  memcpy(copy + 12, &swapped, 4);
  th_write(bad, copy, len);
  cr_assert_eq(hicp_model_load(ctx, bad, &l), HICP_EFORMAT);
  cr_assert(strstr(hicp_context_error(ctx), "byte order") != NULL, "%s", hicp_context_error(ctx));
  memcpy(copy, data, len);
  uint32_t version = 99;
  memcpy(copy + 8, &version, 4);
  th_write(bad, copy, len);
  cr_assert_eq(hicp_model_load(ctx, bad, &l), HICP_EFORMAT);
  cr_assert(strstr(hicp_context_error(ctx), "version 99") != NULL, "%s", hicp_context_error(ctx));
  /* not a model at all, and missing */
  th_write(bad, "HELLO WORLD, NOT A MODEL", 24);
  cr_assert_eq(hicp_model_load(ctx, bad, &l), HICP_EFORMAT);
  cr_assert_eq(hicp_model_load(ctx, th_path(dir, "missing.hicpm"), &l), HICP_EIO);
  cr_assert_eq(hicp_model_load(ctx, dir, &l), HICP_EIO);
  free(copy);
  free(data);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* Files whose checksums are right but whose contents would make a query
 * read out of bounds (found by tests/fuzz/fuzz_model_file.c, which skips
 * the checksums): forged by corrupting a built model in memory and saving
 * it, so the checksums are computed over the corruption. */
/* Makes m's kd-tree a chain of `depth` inner nodes, each sending every
 * query left to the next, ending in two leaves that hold every point. */
static const hicp__vtx *by_x_vtx;
static int by_x(const void *a, const void *b)
{
  const float xa = by_x_vtx[*(const uint32_t *)a].x, xb = by_x_vtx[*(const uint32_t *)b].x;
  return (xa > xb) - (xa < xb);
}

/* A kd-tree `depth` levels deep that still holds every vertex once, in
 * leaves of at most HICP_KD_LEAF_SIZE points as a build makes them: the
 * vertices in order of x, a chain of `depth` inner nodes (node 2k, its
 * children 2k + 1 and 2k + 2) each splitting a leaf off on the left, the
 * last leaf at the bottom.  Needs depth + 1 <= nv <= 8 (depth + 1).  The
 * nodes are a new array, returned for the caller to free after the model
 * (which does not own it). */
static hicp__kdnode *make_deep(hicp_model *m, uint32_t depth)
{
  const uint32_t leaves = depth + 1;
  cr_assert(m->nv >= leaves && m->nv <= HICP_KD_LEAF_SIZE * leaves, "%u vertices", m->nv);
  hicp__kdnode *nodes = calloc(2 * (size_t)depth + 1, sizeof *nodes);
  cr_assert_not_null(nodes);
  m->kd = nodes;
  uint32_t *order = malloc(sizeof *order * m->nv);
  for (uint32_t v = 0; v < m->nv; v++)
    order[v] = v;
  by_x_vtx = m->vtx;
  qsort(order, m->nv, sizeof *order, by_x);
  for (uint32_t i = 0; i < m->nv; i++) {
    m->kd_pts[i] = m->vtx[order[i]];
    m->kd_pts[i].id = order[i];
  }
  free(order);
  for (uint32_t k = 0, at = 0; k < leaves; k++) {
    const uint32_t count = (m->nv - at) / (leaves - k); /* the rest, spread evenly */
    hicp__kdnode *leaf = &m->kd[k < depth ? 2 * k + 1 : 2 * k];
    leaf->dim = HICP_KD_LEAF;
    leaf->first = at;
    leaf->count = count;
    leaf->split = 0.0f;
    at += count;
    if (k < depth) { /* left: x up to the leaf's last; right: the chain on */
      m->kd[2 * k].dim = 0;
      m->kd[2 * k].split = m->kd_pts[at - 1].x;
      m->kd[2 * k].first = 2 * k + 1;
      m->kd[2 * k].count = m->nv - leaf->first;
    }
  }
  m->nkd = 2 * depth + 1;
  return nodes;
}

Test(model_file, forged_files_with_valid_checksums_are_refused)
{
  const char *dir = th_tmpdir();
  const char *bad = th_path(dir, "forged.hicpm");
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  static const char *const want[] = {"kd-tree leaf out of range", "invalid coordinate",
                                     "invalid coordinate", "disagrees with its vertex",
                                     "graph neighbour out of range",
                                     "invalid origin or bounding box",
                                     "invalid origin or bounding box",
                                     "invalid origin or bounding box",
                                     "invalid diagonal or build time",
                                     "invalid diagonal or build time",
                                     "kd-tree deeper than 63 levels",
                                     "control characters in the header's text",
                                     "start table entry out of range",
                                     "invalid start table",
                                     "invalid start table",
                                     "invalid start table",
                                     "invalid start table",
                                     "control characters in the header's text",
                                     "kd-tree leaf of 901 points (a build makes 8 at most)",
                                     "bounding box or diagonal disagrees with the vertices",
                                     "bounding box or diagonal disagrees with the vertices",
                                     "bounding box or diagonal disagrees with the vertices",
                                     "kd-tree node 2 has two parents"};
  const int cases = (int)(sizeof want / sizeof want[0]);
  for (int k = 0; k < cases; k++) {
    hicp_model *m = random_model(k == 10 ? 500 : 1000, 1); /* (make_deep's limit) */
    uint32_t *big = NULL;
    hicp__kdnode *deep = NULL;
    hicp__kdnode *leaf = m->kd;
    while (leaf->dim != HICP_KD_LEAF)
      leaf = &m->kd[leaf->first];
    switch (k) {
    case 0: leaf->count = 0; break;                 /* a descent with no start */
    case 1: m->vtx[7].y = NAN; break;
    case 2: m->vtx[7].z = 1e30f; break;             /* beyond HICP_COORD_MAX */
    case 3: m->kd_pts[3].x += 1.0f; break;
    case 4: m->nbr[m->nedges / 2] = m->nv; break;
    case 5: m->origin[1] = NAN; break;               /* every answer NaN */
    case 6: m->origin[0] = 1e300; break;             /* every answer inf */
    case 7: m->bbox_max[2] = NAN; break;             /* nan in model info --json */
    case 8: m->diag = HUGE_VAL; break;
    case 9: m->build_ms = NAN; break;
    case 10: deep = make_deep(m, 100); break;               /* a descent ends on an inner node */
    case 11: strcpy(m->fallback, "\x1b]0;owned\x07"); break; /* printed by model info */
    case 12: m->start[m->start_dim[0] + 1] = m->nv; break;  /* a walk from past the end */
    case 13: m->start_inv = NAN; break;               /* every query in cell 0 */
    case 14: m->start_lo[2] = 1e30f; break;
    case 15: m->start_dim[1] = 0; break;             /* no cell, no start */
    case 16: /* more cells than 8 a vertex: a table the size of the box */
      big = calloc(8 * (size_t)m->nv + 2, sizeof *big);
      m->start = big;
      m->start_dim[0] = 8 * m->nv + 2;
      m->start_dim[1] = m->start_dim[2] = 1;
      break;
    case 17: /* a C1 control as UTF-8 writes it: U+009B, CSI on some terminals */
      strcpy(m->fallback, "Qhull \xc2\x9b" "31m failed");
      break;
    case 18: /* (stop 47) one leaf of every vertex: each kd search a scan */
      m->kd[0].dim = HICP_KD_LEAF;
      m->kd[0].first = 0;
      m->kd[0].count = m->nv;
      m->nkd = 1;
      break;
    /* (stop 60's review) a box or diagonal the vertices do not have, each
     * valid in itself: they set the default tolerance, the noise scale
     * and the scan order's grid */
    case 19: m->diag *= 2.0; break;
    case 20: m->bbox_min[0] -= 0.5; break;
    case 21: m->bbox_max[1] = nextafter(m->bbox_max[1], HUGE_VAL); break;
    case 22: /* (stop 64's review) node 2 a child of the root and of node 1:
              * chains of such nodes make searches of exponential time */
      cr_assert(m->kd[0].first == 1 && m->kd[1].dim != HICP_KD_LEAF);
      m->kd[1].first = 2;
      break;
    }
    cr_assert_eq(hicp_model_save(ctx, m, bad), 0, "%s", hicp_context_error(ctx));
    hicp_model *l = NULL;
    cr_assert_eq(hicp_model_load(ctx, bad, &l), HICP_EFORMAT, "case %d", k);
    cr_assert_null(l);
    cr_assert(strstr(hicp_context_error(ctx), want[k]) != NULL, "case %d: %s", k,
              hicp_context_error(ctx));
    hicp_model_destroy(m);
    free(big);
    free(deep);
  }
  /* a model with a graph always has a start table: one without it (only
   * made by hand) is not saved as a file no reader would accept */
  hicp_model *m = random_model(500, 1);
  uint32_t *table = m->start;
  m->start = NULL;
  cr_assert_eq(hicp_model_save(ctx, m, bad), HICP_EINTERNAL);
  cr_assert(strstr(hicp_context_error(ctx), "no start table") != NULL, "%s",
            hicp_context_error(ctx));
  m->start = table;
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* The deepest kd-tree the searches take (leaves 63 levels down) loads and
 * answers exactly by every method. */
Test(model_file, deep_kdtree_at_the_limit)
{
  const char *dir = th_tmpdir();
  const char *path = th_path(dir, "deep.hicpm");
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  hicp_model *m = random_model(500, 1);
  hicp__kdnode *deep = make_deep(m, HICP_KD_MAX_DEPTH - 1);
  cr_assert_eq(hicp_model_save(ctx, m, path), 0, "%s", hicp_context_error(ctx));
  hicp_model *l = NULL;
  cr_assert_eq(hicp_model_load(ctx, path, &l), 0, "%s", hicp_context_error(ctx));
  float q[3 * 50];
  for (int i = 0; i < 150; i++)
    q[i] = (float)((i * 37) % 101) / 25.0f - 2.0f;
  uint32_t want[50], got[50];
  hicp_nn_options o;
  hicp_nn_options_init(&o);
  o.method = HICP_NN_BRUTE;
  cr_assert_eq(hicp_nn_query(ctx, l, q, 50, &o, want, NULL, NULL), 0);
  for (int method = 0; method <= HICP_NN_PNN; method++) {
    o.method = (hicp_nn_method)method;
    cr_assert_eq(hicp_nn_query(ctx, l, q, 50, &o, got, NULL, NULL), 0, "%s", hicp_context_error(ctx));
    cr_assert_eq(memcmp(got, want, sizeof want), 0, "method %d", method);
  }
  hicp_model_destroy(l);
  hicp_model_destroy(m);
  free(deep);
  hicp_context_destroy(ctx);
}

/* A point cloud through a FIFO (a pipe, a process substitution) is read
 * once: peeking at it for a model file's magic consumed the data, and the
 * read after it waited for a writer that had gone. */
Test(model_file, open_reads_a_fifo_once, .timeout = 20)
{
  const char *dir = th_tmpdir();
  const char *fifo = th_path(dir, "cloud.xyz");
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    FILE *w = fopen(fifo, "w");
    for (int i = 0; w != NULL && i < 500; i++)
      fprintf(w, "%d %d %d\n", i % 10, (i / 10) % 10, i / 100);
    _exit(w != NULL && fclose(w) == 0 ? 0 : 1);
  }
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  hicp_model *m = NULL;
  int rc = hicp_model_open(ctx, fifo, NULL, &m);
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  cr_assert_eq(rc, 0, "%s", hicp_context_error(ctx));
  cr_assert_eq(m->npoints, 500);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* hicp_model_load refuses a FIFO at once: its open waited for a writer
 * (for ever if none came), only for the FIFO to be refused once one did.
 * Without the fix this test hangs until Criterion's timeout. */
Test(model_file, load_refuses_a_fifo_without_waiting, .timeout = 20)
{
  const char *fifo = th_path(th_tmpdir(), "model.hicp");
  cr_assert_eq(mkfifo(fifo, 0600), 0);
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  hicp_model *m = (hicp_model *)&ctx; /* not NULL: the call must clear it */
  cr_assert_eq(hicp_model_load(ctx, fifo, &m), HICP_EIO);
  cr_assert_null(m);
  cr_assert(strstr(hicp_context_error(ctx), "is not a regular file") != NULL, "%s",
            hicp_context_error(ctx));
  hicp_context_destroy(ctx);
}

/* Entries in dir but "." and "..": a temporary's name may begin with '.'. */
static int dir_entries(const char *dir)
{
  DIR *d = opendir(dir);
  cr_assert_not_null(d, "%s", dir);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
  closedir(d);
  return n;
}

/* A save that fails leaves the file it would have replaced as it was and
 * nothing beside it: the model goes to a temporary, renamed over the old
 * file only once whole.  The failure part-way is the file size limit
 * (RLIMIT_FSIZE), set in a child so that it binds no other test.  SIGXFSZ
 * keeps its default action, which ends the process: the library holds it
 * back while it writes, so the write fails with EFBIG, as on a full disk,
 * and none is left pending (stop 64's review: ulimit -f killed
 * `hicp model build` by that signal). */
Test(model_file, save_failure_keeps_old_file)
{
  const char *dir = th_tmpdir();
  hicp_model *m = random_model(500, 1);
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  cr_assert_eq(hicp_model_save(ctx, m, th_path(dir, "no/such/dir/m.hicpm")), HICP_EIO);
  cr_assert(strstr(hicp_context_error(ctx), "m.hicpm") != NULL, "%s", hicp_context_error(ctx));
  cr_assert_eq(dir_entries(dir), 0);
  /* the whole file is several times the limit below */
  enum { LIMIT = 8192 };
  const char *whole = th_path(dir, "whole.hicpm");
  cr_assert_eq(hicp_model_save(ctx, m, whole), 0, "%s", hicp_context_error(ctx));
  struct stat st;
  cr_assert_eq(stat(whole, &st), 0);
  cr_assert_gt(st.st_size, 3 * LIMIT);
  /* an old file of known bytes, under the limit */
  unsigned char before[3000];
  for (size_t i = 0; i < sizeof before; i++)
    before[i] = (unsigned char)(i * 7 + 1);
  const char *old = th_path(dir, "old.hicpm");
  th_write(old, before, sizeof before);
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    const struct rlimit lim = {LIMIT, LIMIT};
    signal(SIGXFSZ, SIG_DFL);
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
      _exit(3);
    int rc = hicp_model_save(ctx, m, old);
    if (rc != HICP_EIO)
      _exit(1);
    sigset_t pending, mask;
    if (sigpending(&pending) != 0 || sigismember(&pending, SIGXFSZ) ||
        pthread_sigmask(SIG_SETMASK, NULL, &mask) != 0 || sigismember(&mask, SIGXFSZ))
      _exit(4);
    _exit(strstr(hicp_context_error(ctx), "old.hicpm") != NULL ? 0 : 2);
  }
  int status;
  cr_assert_eq(waitpid(pid, &status, 0), pid);
  size_t len;
  unsigned char *after = th_read(old, &len);
  cr_assert(len == sizeof before && memcmp(after, before, len) == 0,
            "the old file was changed (%zu bytes)", len);
  free(after);
  cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "the save under the limit: status %#x (1: not HICP_EIO, 2: the message does not "
            "name the file, 3: setrlimit failed, 4: SIGXFSZ left pending or blocked; "
            "a signal: SIGXFSZ was not held back)",
            status);
  cr_assert_eq(dir_entries(dir), 2, "a temporary was left beside the old file");
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* The answers of every method on @p m for a fixed set of queries. */
static void answers_of(hicp_context *ctx, const hicp_model *m, uint32_t *idx, float *d2, int nq)
{
  static const hicp_nn_method methods[] = {HICP_NN_PNN_OPT, HICP_NN_PNN, HICP_NN_KDTREE};
  th_rng r;
  th_rng_seed(&r, 11);
  float *q = malloc(sizeof(float) * 3 * (size_t)nq);
  for (int i = 0; i < 3 * nq; i++)
    q[i] = (float)(2 * th_normal(&r));
  for (int k = 0; k < 3; k++) {
    hicp_nn_options o;
    hicp_nn_options_init(&o);
    o.method = methods[k];
    cr_assert_eq(hicp_nn_query(ctx, m, q, (size_t)nq, &o, idx + k * nq, d2 + k * nq, NULL), 0,
                 "%s", hicp_context_error(ctx));
  }
  free(q);
}

/* Files of format 2 (before the start table) still load: the loader builds
 * the table the file lacks, exactly as a build makes it, and saving the
 * model writes format 3.  The files are hicp 0.1.0's own, kept in the fuzz
 * corpus (tests/fuzz/corpus/model_file/format2-*). */
Test(model_file, format2_files_load_with_a_table)
{
  const char *src = getenv("HICP_SRCDIR") != NULL ? getenv("HICP_SRCDIR") : ".";
  char path[2][1024];
  snprintf(path[0], sizeof path[0], "%s/tests/fuzz/corpus/model_file/format2-delaunay.hicpm", src);
  snprintf(path[1], sizeof path[1], "%s/tests/fuzz/corpus/model_file/format2-kdtree.hicpm", src);
  const char *dir = th_tmpdir();
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  for (int k = 0; k < 2; k++) {
    size_t len;
    unsigned char *data = th_read(path[k], &len);
    uint32_t version;
    memcpy(&version, data + 8, 4);
    cr_assert_eq(version, 2, "%s is not a format 2 file", path[k]);
    free(data);
    hicp_model *m;
    cr_assert_eq(hicp_model_load(ctx, path[k], &m), 0, "%s: %s", path[k], hicp_context_error(ctx));
    cr_assert_eq(m->has_delaunay, k == 0);
    cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
    if (k == 1) {
      cr_assert_null(m->start);
      hicp_model_destroy(m);
      continue;
    }
    /* the table as a build makes it */
    cr_assert_gt(th_assert_start_table_exact(m), m->nv);
    /* saved again: format 3 (no guards), the same model */
    const char *again = th_path(dir, "again.hicpm");
    cr_assert_eq(hicp_model_save(ctx, m, again), 0, "%s", hicp_context_error(ctx));
    unsigned char *saved = th_read(again, &len);
    memcpy(&version, saved + 8, 4);
    free(saved);
    cr_assert_eq(version, 3);
    hicp_model *l;
    cr_assert_eq(hicp_model_load(ctx, again, &l), 0, "%s", hicp_context_error(ctx));
    assert_same_model(m, l);
    hicp_model_destroy(l);
    hicp_model_destroy(m);
  }
  hicp_context_destroy(ctx);
}


/* Files of format 3 (graphs built without the guards, lib/delaunay_qhull.c)
 * still load and answer every method alike: their graphs hold every
 * Delaunay edge the guards' check could need.  The file is hicp's own
 * before format 4 (tests/fuzz/corpus/model_file/format3-delaunay.hicpm);
 * answers_of's queries lie around and far outside its 40 points. */
Test(model_file, format3_files_load)
{
  const char *src = getenv("HICP_SRCDIR") != NULL ? getenv("HICP_SRCDIR") : ".";
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/fuzz/corpus/model_file/format3-delaunay.hicpm", src);
  size_t len;
  unsigned char *data = th_read(path, &len);
  uint32_t version;
  memcpy(&version, data + 8, 4);
  free(data);
  cr_assert_eq(version, 3, "%s is not a format 3 file", path);
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  hicp_model *m;
  cr_assert_eq(hicp_model_load(ctx, path, &m), 0, "%s: %s", path, hicp_context_error(ctx));
  cr_assert(m->has_delaunay);
  cr_assert_eq(hicp__model_validate(ctx, m), 0, "%s", hicp_context_error(ctx));
  enum { NQ = 2000 };
  uint32_t *idx = malloc(sizeof *idx * 3 * NQ);
  float *d2 = malloc(sizeof *d2 * 3 * NQ);
  answers_of(ctx, m, idx, d2, NQ);
  for (int i = 0; i < NQ; i++)
    for (int k = 0; k < 2; k++)
      cr_assert(idx[k * NQ + i] == idx[2 * NQ + i] && d2[k * NQ + i] == d2[2 * NQ + i],
                "query %d: method %d answers %u, the kd-tree %u", i, k, idx[k * NQ + i],
                idx[2 * NQ + i]);
  free(idx);
  free(d2);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}

/* A model built with guards (points on the six faces of a box: a flat
 * face on the hull, lib/model_build.c) is saved as format 4, which an
 * hicp before the guards' check refuses, with the number of guards; it
 * loads as it was and answers alike.  One without guards is saved as
 * format 3 (model_file::format2_files_load_with_a_table). */
Test(model_file, guarded_models_save_as_format4)
{
  enum { N = 1200, NQ = 2000 };
  float *p = malloc(sizeof(float) * 3 * N);
  th_rng r;
  th_rng_seed(&r, 21);
  static const double unit[3] = {1.0, 1.0, 1.0};
  for (int i = 0; i < N; i++) {
    double x[3];
    th_box_face_point(&r, (size_t)i, unit, x);
    for (int d = 0; d < 3; d++)
      p[3 * i + d] = (float)x[d];
  }
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  hicp_model *m;
  cr_assert_eq(hicp_model_build(ctx, p, N, 0, NULL, &m), 0, "%s", hicp_context_error(ctx));
  cr_assert(m->has_delaunay && m->guards > 0, "guards %u", m->guards);
  const char *path = th_path(th_tmpdir(), "guarded.hicpm");
  cr_assert_eq(hicp_model_save(ctx, m, path), 0, "%s", hicp_context_error(ctx));
  size_t len;
  unsigned char *data = th_read(path, &len);
  uint32_t version;
  memcpy(&version, data + 8, 4);
  free(data);
  cr_assert_eq(version, 4);
  hicp_model *l;
  cr_assert_eq(hicp_model_load(ctx, path, &l), 0, "%s", hicp_context_error(ctx));
  cr_assert_eq(l->guards, m->guards);
  assert_same_model(m, l);
  uint32_t *want_i = malloc(sizeof(uint32_t) * 3 * NQ), *got_i = malloc(sizeof(uint32_t) * 3 * NQ);
  float *want_d = malloc(sizeof(float) * 3 * NQ), *got_d = malloc(sizeof(float) * 3 * NQ);
  answers_of(ctx, m, want_i, want_d, NQ);
  answers_of(ctx, l, got_i, got_d, NQ);
  cr_assert(memcmp(want_i, got_i, sizeof(uint32_t) * 3 * NQ) == 0 &&
            memcmp(want_d, got_d, sizeof(float) * 3 * NQ) == 0);
  for (int i = 0; i < NQ; i++)
    cr_assert(want_i[i] == want_i[2 * NQ + i] && want_i[NQ + i] == want_i[2 * NQ + i],
              "query %d: the walks and the kd-tree differ", i);
  free(want_i);
  free(got_i);
  free(want_d);
  free(got_d);
  hicp_model_destroy(l);
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
  free(p);
}

/* A loaded model is the file's bytes as they were checked: a file cut
 * short, or rewritten in place (cp over it, a program writing through
 * O_TRUNC), while a process holds the model it was loaded from changes
 * none of its answers and faults nothing.  (A model mapped from its file
 * would follow the file past the checks, and take SIGBUS on the pages cut
 * off.) */
Test(model_file, loaded_model_outlives_changes_to_its_file)
{
  enum { NQ = 2000 };
  const char *dir = th_tmpdir();
  hicp_model *m = random_model(20000, 1);
  hicp_context *ctx;
  cr_assert_eq(hicp_context_create(NULL, &ctx), 0);
  static uint32_t want_i[3 * NQ], got_i[3 * NQ];
  static float want_d[3 * NQ], got_d[3 * NQ];
  answers_of(ctx, m, want_i, want_d, NQ);
  for (int how = 0; how < 4; how++) {
    const char *path = th_path(dir, "m.hicpm");
    cr_assert_eq(hicp_model_save(ctx, m, path), 0, "%s", hicp_context_error(ctx));
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    hicp_model *l;
    if (how % 2 == 0)
      cr_assert_eq(hicp_model_load(ctx, path, &l), 0, "%s", hicp_context_error(ctx));
    else
      cr_assert_eq(hicp_model_open(ctx, path, NULL, &l), 0, "%s", hicp_context_error(ctx));
    FILE *f = fopen(path, how < 2 ? "w" : "r+");
    cr_assert_not_null(f);
    if (how < 2) { /* cut to a few bytes */
      cr_assert_eq(fwrite("hicp", 1, 4, f), 4);
    } else { /* every byte changed, the length kept */
      unsigned char *junk = malloc((size_t)st.st_size);
      memset(junk, 0xa5, (size_t)st.st_size);
      cr_assert_eq(fwrite(junk, 1, (size_t)st.st_size, f), (size_t)st.st_size);
      free(junk);
    }
    cr_assert_eq(fclose(f), 0);
    answers_of(ctx, l, got_i, got_d, NQ);
    cr_assert_eq(memcmp(got_i, want_i, sizeof want_i), 0, "case %d: other answers", how);
    cr_assert_eq(memcmp(got_d, want_d, sizeof want_d), 0, "case %d: other distances", how);
    hicp_model_destroy(l);
    cr_assert_eq(unlink(path), 0);
  }
  hicp_model_destroy(m);
  hicp_context_destroy(ctx);
}
