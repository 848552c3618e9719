/* model_file.c: saving a model and loading it back.
 *
 * Layout: a fixed header, then ten sections (vertices, original->vertex
 * map, CSR rows, neighbours, kd-tree nodes, kd-tree points, safe radii,
 * edge-length codes and units, start table), each starting on a
 * 64-byte boundary so the loaded arrays are aligned as the code expects.
 * Values are in the writer's byte order; the header records it, and a file
 * from a machine of the other byte order is refused rather than converted.
 * Two checksums: one over the header, one over the sections.
 *
 * Loading reads the file into one block (not a mapping: read_whole says
 * why), verifies the checksums, and range-checks every index the search
 * code follows (rows, neighbours, kd-tree children and leaves), so even a
 * crafted file with valid checksums cannot make a query read outside it.
 * That check is linear and cheap; the full validator (symmetry,
 * reachability) runs in the tests. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cloud.h"
#include "fpenv.h"
#include "model.h"

/* Fuzz builds (tests/fuzz) skip the checksums: a fuzzer cannot forge them,
 * and would otherwise never reach the range checks behind them. */
#if defined(HICP_FUZZING)
#define SKIP_CHECKSUMS 1
#else
#define SKIP_CHECKSUMS 0
#endif

#define MAGIC "HICPMDL"
/* 2: safe radii with an absolute margin (underflow); 3: the start table;
 * 4: a graph built with guard points (lib/delaunay_qhull.c), whose walks
 * need the guards' check (lib/pp/nn.h), which an hicp before it lacks:
 * version 3's header with the number of guards where version 3 has a
 * zero.  A model without guards is saved as version 3, which any hicp
 * since format 3 reads. */
#define FORMAT_VERSION 4u
#define FORMAT_VERSION_3 3u
#define ENDIAN_MARK 0x01020304u
#define ALIGN 64u
#define NSECTIONS 10

enum {
  SEC_VTX,
  SEC_VERTEX_OF,
  SEC_ROW,
  SEC_NBR,
  SEC_KD,
  SEC_KD_PTS,
  SEC_SAFE,
  SEC_ECODE,
  SEC_EUNIT,
  SEC_START
};

/* A start table has at most this many cells per vertex (start_table.c
 * makes at most 4), plus one: a forged header cannot ask for more. */
#define START_CELLS_MAX 8u

/* The fields every format's header begins with (288 bytes, no padding:
 * what follows them lies on an 8-byte boundary in both layouts). */
#define HEADER_COMMON                                                                              \
  char magic[8];                                                                                   \
  uint32_t version;                                                                                \
  uint32_t endian;                                                                                 \
  uint32_t header_size;                                                                            \
  uint32_t has_delaunay;                                                                           \
  uint64_t npoints, nv, nedges, nkd;                                                               \
  uint32_t zero_start, reserved0;                                                                  \
  double origin[3], bbox_min[3], bbox_max[3], diag;                                                \
  double build_ms, qhull_ms;                                                                       \
  char fallback[128];

typedef struct file_header {
  HEADER_COMMON
  uint32_t start_dim[3], guards; /* guards: 0 in version 3 */
  float start_lo[3], start_inv;
  uint64_t offset[NSECTIONS];
  uint64_t size[NSECTIONS];
  uint64_t file_size;
  uint64_t payload_sum;
  uint64_t header_sum; /* over the header with this field zero */
} file_header;

/* Format 2, before the start table: the same header without the table's
 * grid, with nine sections.  Such files still load: their header is read
 * into a file_header (read_header_v2) and the table is built at load. */
#define NSECTIONS_V2 9
typedef struct file_header_v2 {
  HEADER_COMMON
  uint64_t offset[NSECTIONS_V2];
  uint64_t size[NSECTIONS_V2];
  uint64_t file_size;
  uint64_t payload_sum;
  uint64_t header_sum;
} file_header_v2;

int hicp__model_is_file(const unsigned char *buf, size_t len)
{
  return len >= 8 && memcmp(buf, MAGIC, 8) == 0;
}

/* A fast 64-bit checksum: four independent multiply-rotate lanes over
 * 8-byte words (so it runs near memory speed), then a finalising mix.
 * It detects corruption, not tampering. */
static uint64_t rotl64(uint64_t x, int r)
{
  return (x << r) | (x >> (64 - r));
}

typedef struct sum_state {
  uint64_t h[4];
  uint64_t len;
} sum_state;

static void sum_init(sum_state *s)
{
  s->h[0] = 0x243f6a8885a308d3ull;
  s->h[1] = 0x13198a2e03707344ull;
  s->h[2] = 0xa4093822299f31d0ull;
  s->h[3] = 0x082efa98ec4e6c89ull;
  s->len = 0;
}

/* len must be a multiple of 8 except on the last call. */
static void sum_update(sum_state *s, const unsigned char *p, size_t len)
{
  size_t words = len / 8;
  for (size_t i = 0; i < words; i++) {
    uint64_t w;
    memcpy(&w, p + 8 * i, 8);
    uint64_t *h = &s->h[(s->len / 8 + i) & 3];
    *h = rotl64(*h ^ w, 29) * 0x9e3779b97f4a7c15ull;
  }
  if (len % 8 != 0) {
    uint64_t w = 0;
    memcpy(&w, p + 8 * words, len % 8);
    uint64_t *h = &s->h[(s->len / 8 + words) & 3];
    *h = rotl64(*h ^ w ^ 0xff, 29) * 0x9e3779b97f4a7c15ull;
  }
  s->len += len;
}

static uint64_t sum_final(const sum_state *s)
{
  uint64_t h = s->len;
  for (int i = 0; i < 4; i++) {
    h ^= s->h[i];
    h = rotl64(h, 27) * 0xbf58476d1ce4e5b9ull + 0x94d049bb133111ebull;
  }
  h ^= h >> 31;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 29;
  return h;
}

/* The checksum of a header of `size` bytes (either format's) whose last 8
 * bytes, its own checksum, count as zero. */
_Static_assert(offsetof(file_header, header_sum) + 8 == sizeof(file_header) &&
                   offsetof(file_header_v2, header_sum) + 8 == sizeof(file_header_v2) &&
                   sizeof(file_header_v2) <= sizeof(file_header),
               "both headers end with their checksum");
static uint64_t header_checksum_of(const void *header, size_t size)
{
  unsigned char copy[sizeof(file_header)];
  memcpy(copy, header, size);
  memset(copy + size - 8, 0, 8);
  sum_state s;
  sum_init(&s);
  sum_update(&s, copy, size);
  return sum_final(&s);
}

static uint64_t header_checksum(const file_header *h)
{
  return header_checksum_of(h, sizeof *h);
}

static uint64_t align_up(uint64_t x)
{
  return (x + ALIGN - 1) / ALIGN * ALIGN;
}

typedef struct save_job {
  const hicp_model *m;
  file_header h;
  const void *sec[NSECTIONS];
} save_job;

static int write_model(hicp_context *ctx, FILE *f, void *arg)
{
  save_job *job = arg;
  static const unsigned char zeros[ALIGN];
  if (fwrite(&job->h, sizeof job->h, 1, f) != 1)
    return hicp__fail(ctx, HICP_EIO, "write failed");
  uint64_t pos = sizeof job->h;
  for (int s = 0; s < NSECTIONS; s++) {
    if (job->h.size[s] == 0)
      continue;
    if (fwrite(zeros, 1, job->h.offset[s] - pos, f) != job->h.offset[s] - pos ||
        fwrite(job->sec[s], 1, job->h.size[s], f) != job->h.size[s])
      return hicp__fail(ctx, HICP_EIO, "write failed");
    pos = job->h.offset[s] + job->h.size[s];
  }
  if (fwrite(zeros, 1, job->h.file_size - pos, f) != job->h.file_size - pos)
    return hicp__fail(ctx, HICP_EIO, "write failed");
  return HICP_OK;
}

int hicp_model_save(hicp_context *ctx, const hicp_model *m, const char *path)
{
  if (m == NULL || path == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_model_save: NULL argument");
  if (m->has_delaunay && m->start == NULL) /* every build makes one */
    return hicp__fail(ctx, HICP_EINTERNAL, "hicp_model_save: the model has no start table");
  save_job job;
  memset(&job, 0, sizeof job);
  job.m = m;
  file_header *h = &job.h;
  memcpy(h->magic, MAGIC, 8);
  h->version = m->guards != 0 ? FORMAT_VERSION : FORMAT_VERSION_3;
  h->guards = m->guards;
  h->endian = ENDIAN_MARK;
  h->header_size = sizeof *h;
  h->has_delaunay = (uint32_t)m->has_delaunay;
  h->npoints = m->npoints;
  h->nv = m->nv;
  h->nedges = m->has_delaunay ? m->nedges : 0;
  h->nkd = m->nkd;
  h->zero_start = m->zero_start;
  for (int i = 0; i < 3; i++) {
    h->origin[i] = m->origin[i];
    h->bbox_min[i] = m->bbox_min[i];
    h->bbox_max[i] = m->bbox_max[i];
  }
  h->diag = m->diag;
  h->build_ms = m->build_ms;
  h->qhull_ms = m->qhull_ms;
  memcpy(h->fallback, m->fallback, sizeof h->fallback);
  for (int i = 0; i < 3; i++) {
    h->start_dim[i] = m->has_delaunay ? m->start_dim[i] : 0;
    h->start_lo[i] = m->has_delaunay ? m->start_lo[i] : 0.0f;
  }
  h->start_inv = m->has_delaunay ? m->start_inv : 0.0f;
  job.sec[SEC_VTX] = m->vtx;
  h->size[SEC_VTX] = sizeof(hicp__vtx) * m->nv;
  job.sec[SEC_VERTEX_OF] = m->vertex_of;
  h->size[SEC_VERTEX_OF] = sizeof(uint32_t) * m->npoints;
  job.sec[SEC_ROW] = m->row;
  h->size[SEC_ROW] = m->has_delaunay ? sizeof(uint32_t) * ((uint64_t)m->nv + 1) : 0;
  job.sec[SEC_NBR] = m->nbr;
  h->size[SEC_NBR] = m->has_delaunay ? sizeof(uint32_t) * m->nedges : 0;
  job.sec[SEC_KD] = m->kd;
  h->size[SEC_KD] = sizeof(hicp__kdnode) * m->nkd;
  job.sec[SEC_KD_PTS] = m->kd_pts;
  h->size[SEC_KD_PTS] = sizeof(hicp__vtx) * m->nv;
  job.sec[SEC_SAFE] = m->safe_r2;
  h->size[SEC_SAFE] = m->has_delaunay ? sizeof(float) * m->nv : 0;
  /* the edge units follow the codes, so vector scans reading up to 16
   * bytes past the last code stay inside the loaded file (cpu/walk_simd.c) */
  job.sec[SEC_ECODE] = m->ecode;
  h->size[SEC_ECODE] = m->has_delaunay ? m->nedges : 0;
  job.sec[SEC_EUNIT] = m->eunit;
  h->size[SEC_EUNIT] = m->has_delaunay ? sizeof(float) * m->nv : 0;
  job.sec[SEC_START] = m->start;
  h->size[SEC_START] = m->has_delaunay ? sizeof(uint32_t) * (uint64_t)m->start_dim[0] *
                                             m->start_dim[1] * m->start_dim[2]
                                       : 0;
  uint64_t pos = align_up(sizeof *h);
  sum_state s;
  sum_init(&s);
  for (int i = 0; i < NSECTIONS; i++) {
    h->offset[i] = h->size[i] ? pos : 0;
    if (h->size[i]) {
      /* Sections are multiples of 4 bytes; checksum them padded to 8. */
      sum_update(&s, job.sec[i], h->size[i] / 8 * 8);
      if (h->size[i] % 8)
        sum_update(&s, (const unsigned char *)job.sec[i] + h->size[i] / 8 * 8, h->size[i] % 8);
      pos = align_up(pos + h->size[i]);
    }
  }
  h->file_size = pos;
  h->payload_sum = sum_final(&s);
  h->header_sum = header_checksum(h);
  return hicp__atomic_write(ctx, path, write_model, &job);
}

/* Linear range checks of everything a query dereferences. */
static int check_indices(hicp_context *ctx, const hicp_model *m, const char *path)
{
  for (uint32_t v = 0; v < m->nv; v++) {
    const hicp__vtx *p = &m->vtx[v];
    if (p->id >= m->npoints)
      return hicp__fail(ctx, HICP_EFORMAT, "%s: vertex %u has an invalid index", path, v);
    if (!(fabsf(p->x) <= HICP_COORD_MAX && fabsf(p->y) <= HICP_COORD_MAX &&
          fabsf(p->z) <= HICP_COORD_MAX)) /* also catches NaN */
      return hicp__fail(ctx, HICP_EFORMAT, "%s: vertex %u has an invalid coordinate", path, v);
  }
  for (uint64_t i = 0; i < m->npoints; i++)
    if (m->vertex_of[i] >= m->nv)
      return hicp__fail(ctx, HICP_EFORMAT, "%s: point %llu maps to an invalid vertex", path,
                        (unsigned long long)i);
  if (m->zero_start >= m->nv)
    return hicp__fail(ctx, HICP_EFORMAT, "%s: invalid start vertex", path);
  if (m->has_delaunay) {
    if (m->row[0] != 0 || m->row[m->nv] != m->nedges)
      return hicp__fail(ctx, HICP_EFORMAT, "%s: graph rows do not match the edge count", path);
    for (uint32_t v = 0; v < m->nv; v++)
      if (m->row[v + 1] < m->row[v])
        return hicp__fail(ctx, HICP_EFORMAT, "%s: graph rows are not increasing", path);
    for (uint64_t e = 0; e < m->nedges; e++)
      if (m->nbr[e] >= m->nv)
        return hicp__fail(ctx, HICP_EFORMAT, "%s: graph neighbour out of range", path);
    for (uint32_t v = 0; v < m->nv; v++)
      if (!(m->eunit[v] >= 0.0f && m->eunit[v] < HUGE_VALF) ||
          !(m->safe_r2[v] >= 0.0f && m->safe_r2[v] < HUGE_VALF))
        return hicp__fail(ctx, HICP_EFORMAT, "%s: invalid edge unit or safe radius", path);
    const uint64_t cells = (uint64_t)m->start_dim[0] * m->start_dim[1] * m->start_dim[2];
    for (uint64_t c = 0; c < cells; c++)
      if (m->start[c] >= m->nv)
        return hicp__fail(ctx, HICP_EFORMAT, "%s: start table entry out of range", path);
  }
  for (uint32_t n = 0; n < m->nkd; n++) {
    const hicp__kdnode *nd = &m->kd[n];
    if (nd->dim == HICP_KD_LEAF) {
      /* an empty leaf would leave a kd-tree descent without a start */
      if (nd->count == 0 || (uint64_t)nd->first + nd->count > m->nv)
        return hicp__fail(ctx, HICP_EFORMAT, "%s: kd-tree leaf out of range", path);
      if (nd->count > HICP_KD_LEAF_SIZE)
        return hicp__fail(ctx, HICP_EFORMAT, "%s: kd-tree leaf of %u points (a build makes %u at most)",
                          path, (unsigned)nd->count, (unsigned)HICP_KD_LEAF_SIZE);
    } else if (nd->dim > 2 || nd->first <= n || (uint64_t)nd->first + 1 >= m->nkd) {
      /* Children always follow their parent: no cycles, no escape. */
      return hicp__fail(ctx, HICP_EFORMAT, "%s: kd-tree node %u is malformed", path, n);
    }
  }
  /* A tree, and its depth.  The searches' stacks and the descents' level
   * loops stop at HICP_KD_MAX_DEPTH levels (a built tree has at most 32); a
   * deeper forged tree left a descent on an inner node, scanned as a leaf.
   * Each node must have one parent: nodes shared by two (node i's children
   * i+1 and i+2) make a graph of few nodes with a number of paths
   * exponential in its depth, and a search walks every path (stop 64's
   * review: one query ran for days).  Children follow their parent, so one
   * pass in node order meets each parent before its children: a child
   * already given a depth has a parent before this one. */
  unsigned char *depth = calloc(m->nkd, 1);
  if (depth == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "%s: out of memory checking the kd-tree", path);
  for (uint32_t n = 0; n < m->nkd; n++) {
    const hicp__kdnode *nd = &m->kd[n];
    if (nd->dim == HICP_KD_LEAF)
      continue;
    if (depth[n] + 1 >= HICP_KD_MAX_DEPTH) {
      free(depth);
      return hicp__fail(ctx, HICP_EFORMAT, "%s: kd-tree deeper than %d levels", path,
                        HICP_KD_MAX_DEPTH - 1);
    }
    for (uint32_t c = nd->first; c <= nd->first + 1; c++) {
      if (depth[c] != 0) {
        free(depth);
        return hicp__fail(ctx, HICP_EFORMAT, "%s: kd-tree node %u has two parents", path, c);
      }
      depth[c] = (unsigned char)(depth[n] + 1);
    }
  }
  free(depth);
  for (uint32_t i = 0; i < m->nv; i++) {
    const hicp__vtx *k = &m->kd_pts[i];
    if (k->id >= m->nv)
      return hicp__fail(ctx, HICP_EFORMAT, "%s: kd-tree point out of range", path);
    const hicp__vtx *v = &m->vtx[k->id];
    if (k->x != v->x || k->y != v->y || k->z != v->z)
      return hicp__fail(ctx, HICP_EFORMAT, "%s: kd-tree point %u disagrees with its vertex", path, i);
  }
  return HICP_OK;
}

static int check_header(hicp_context *ctx, const file_header *h, uint64_t actual, const char *path)
{
  if (memcmp(h->magic, MAGIC, 8) != 0)
    return hicp__fail(ctx, HICP_EFORMAT, "%s: not a hicp model file", path);
  if (h->endian != ENDIAN_MARK) {
    if (h->endian == 0x04030201u)
      return hicp__fail(ctx, HICP_EFORMAT,
                        "%s: written on a machine of the other byte order; rebuild the model",
                        path);
    return hicp__fail(ctx, HICP_EFORMAT, "%s: corrupted header (byte-order mark)", path);
  }
  /* version 2: a header read_header_v2 converted, its checksum checked there */
  const int v2 = h->version == 2;
  if (h->version != FORMAT_VERSION && h->version != FORMAT_VERSION_3 && !v2)
    return hicp__fail(ctx, HICP_EFORMAT,
                      "%s: model file format version %u; this hicp reads versions 2 to %u "
                      "(rebuild the model)",
                      path, h->version, FORMAT_VERSION);
  if (!v2 && (h->header_size != sizeof *h ||
              (h->header_sum != header_checksum(h) && !SKIP_CHECKSUMS)))
    return hicp__fail(ctx, HICP_EFORMAT, "%s: corrupted header (checksum mismatch)", path);
  if (h->file_size != actual)
    return hicp__fail(ctx, HICP_EFORMAT, "%s: file is %llu bytes, its header says %llu (%s)", path,
                      (unsigned long long)actual, (unsigned long long)h->file_size,
                      actual < h->file_size ? "truncated?" : "data appended?");
  int g = h->has_delaunay != 0;
  if (h->has_delaunay > 1 || h->nv == 0 || h->nv > h->npoints || h->npoints >= UINT32_MAX ||
      h->nkd == 0 || h->nkd > 2 * h->nv + 3 || h->nkd >= UINT32_MAX || h->nedges > UINT32_MAX ||
      h->size[SEC_VTX] != sizeof(hicp__vtx) * h->nv ||
      h->size[SEC_VERTEX_OF] != sizeof(uint32_t) * h->npoints ||
      h->size[SEC_ROW] != (g ? sizeof(uint32_t) * (h->nv + 1) : 0) ||
      h->size[SEC_NBR] != (g ? sizeof(uint32_t) * h->nedges : 0) ||
      h->size[SEC_KD] != sizeof(hicp__kdnode) * h->nkd ||
      h->size[SEC_KD_PTS] != sizeof(hicp__vtx) * h->nv ||
      h->size[SEC_SAFE] != (g ? sizeof(float) * h->nv : 0) ||
      h->size[SEC_ECODE] != (g ? h->nedges : 0) ||
      h->size[SEC_EUNIT] != (g ? sizeof(float) * h->nv : 0) || (g && h->nedges == 0))
    return hicp__fail(ctx, HICP_EFORMAT, "%s: inconsistent counts in the header", path);
  /* The start table's grid (nv is in range now): at least one cell along
   * each axis and at most START_CELLS_MAX a vertex in all, each product
   * checked before it is made; a corner within the coordinate range and a
   * finite positive scale; all zero without a graph. */
  const uint64_t limit = START_CELLS_MAX * h->nv + 1;
  uint64_t cells = g && !v2 ? 1 : 0; /* a format 2 file has no table */
  if (h->version == FORMAT_VERSION ? !(g && h->guards > 0 && h->guards <= HICP_GUARDS_MAX)
                                   : h->guards != 0)
    return hicp__fail(ctx, HICP_EFORMAT, "%s: invalid guard count in the header", path);
  int start_ok = 1;
  for (int d = 0; d < 3; d++) {
    if (!g || v2) {
      start_ok &= h->start_dim[d] == 0 && h->start_lo[d] == 0.0f;
      continue;
    }
    start_ok &= fabsf(h->start_lo[d]) <= HICP_COORD_MAX; /* also catches NaN */
    if (h->start_dim[d] >= 1 && h->start_dim[d] <= limit / cells)
      cells *= h->start_dim[d];
    else
      start_ok = 0;
  }
  start_ok &= g && !v2 ? h->start_inv > 0.0f && h->start_inv < HUGE_VALF : h->start_inv == 0.0f;
  if (!start_ok || h->size[SEC_START] != sizeof(uint32_t) * cells)
    return hicp__fail(ctx, HICP_EFORMAT, "%s: invalid start table in the header", path);
  /* The origin shifts every query and answer (a NaN one made every
   * distance NaN); the box, diagonal and times are reported, in JSON too. */
  for (int d = 0; d < 3; d++)
    if (!(fabs(h->origin[d]) <= HICP_COORD_MAX) || !(fabs(h->bbox_min[d]) <= HICP_COORD_MAX) ||
        !(fabs(h->bbox_max[d]) <= HICP_COORD_MAX) || !(h->bbox_min[d] <= h->bbox_max[d]))
      return hicp__fail(ctx, HICP_EFORMAT, "%s: invalid origin or bounding box in the header", path);
  if (!(h->diag >= 0.0 && h->diag <= 4.0 * HICP_COORD_MAX) ||
      !(h->build_ms >= 0.0 && h->build_ms < HUGE_VAL) ||
      !(h->qhull_ms >= 0.0 && h->qhull_ms < HUGE_VAL))
    return hicp__fail(ctx, HICP_EFORMAT, "%s: invalid diagonal or build time in the header", path);
  /* The reason a model has no graph is printed by hicp model info: no
   * control characters (a forged one could drive the user's terminal),
   * C1 ones as UTF-8 writes them included (0xC2 0x80-0x9F: U+009B opens an
   * escape sequence on some terminals), as error messages are cleaned. */
  const unsigned char *text = (const unsigned char *)h->fallback;
  for (size_t i = 0; i < sizeof h->fallback && text[i] != '\0'; i++)
    if (text[i] < 0x20 || text[i] == 0x7f ||
        (text[i] == 0xc2 && i + 1 < sizeof h->fallback && text[i + 1] >= 0x80 &&
         text[i + 1] <= 0x9f))
      return hicp__fail(ctx, HICP_EFORMAT, "%s: control characters in the header's text", path);
  uint64_t prev_end = align_up(v2 ? sizeof(file_header_v2) : sizeof *h);
  for (int s = 0; s < NSECTIONS; s++) {
    if (h->size[s] == 0)
      continue;
    if (h->offset[s] % ALIGN != 0 || h->offset[s] < prev_end || h->offset[s] > actual ||
        h->size[s] > actual - h->offset[s])
      return hicp__fail(ctx, HICP_EFORMAT, "%s: section %d lies outside the file", path, s);
    prev_end = h->offset[s] + h->size[s];
  }
  return HICP_OK;
}

/* A format 2 header at the start of fd into *h: its identity and checksum
 * checked here, its sections copied, the start table's fields zero. */
static int read_header_v2(hicp_context *ctx, int fd, uint64_t actual, const char *path,
                          file_header *h)
{
  file_header_v2 o;
  if (actual < sizeof o || pread(fd, &o, sizeof o, 0) != (ssize_t)sizeof o)
    return hicp__fail(ctx, HICP_EFORMAT, "%s: too short for a hicp model file", path);
  if (o.header_size != sizeof o ||
      (o.header_sum != header_checksum_of(&o, sizeof o) && !SKIP_CHECKSUMS))
    return hicp__fail(ctx, HICP_EFORMAT, "%s: corrupted header (checksum mismatch)", path);
  _Static_assert(offsetof(file_header, start_dim) == offsetof(file_header_v2, offset),
                 "the common header fields lie alike in both formats");
  memset(h, 0, sizeof *h);
  memcpy(h, &o, offsetof(file_header_v2, offset));
  h->header_size = sizeof *h;
  for (int s = 0; s < NSECTIONS_V2; s++) {
    h->offset[s] = o.offset[s];
    h->size[s] = o.size[s];
  }
  h->file_size = o.file_size;
  h->payload_sum = o.payload_sum; /* the same sum: the missing section is empty */
  return HICP_OK;
}

/* The whole file, read into memory checked against the limit, into *out
 * (hicp__aligned_free).  Read, not mapped: the bytes the checksums and the
 * index checks pass are then the bytes the walks use.  A mapping follows
 * the file, so a model file rewritten in place while loaded (cp over it, a
 * writer truncating it) would change under the walks past every check, and
 * its pages cut off would fault (SIGBUS).  The copy costs the file's size
 * in memory, as a built model does, and a read of it, which the checksum
 * pass had to make anyway. */
static int read_whole(hicp_context *ctx, int fd, uint64_t size, const char *path,
                      unsigned char **out)
{
  /* zeros past the end, as a mapping's last page has: vector loads of a
   * section's last elements may read a little beyond it */
  const size_t pad = ALIGN;
  if (size > SIZE_MAX - pad)
    return hicp__fail(ctx, HICP_ELIMIT, "%s: too large for this machine", path);
  int rc = hicp__check_budget(ctx, size + pad, "loading the model file");
  if (rc != HICP_OK)
    return rc;
  unsigned char *buf = hicp__aligned_alloc(ALIGN, (size_t)size + pad);
  if (buf == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory reading %s", path);
  memset(buf + size, 0, pad);
  uint64_t done = 0;
  while (done < size) {
    const size_t want = size - done < (1u << 30) ? (size_t)(size - done) : (size_t)1 << 30;
    const ssize_t got = pread(fd, buf + done, want, (off_t)done);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0) {
      const int err = errno;
      hicp__aligned_free(buf);
      if (got == 0)
        return hicp__fail(ctx, HICP_EFORMAT, "%s: the file shrank while it was read", path);
      return hicp__fail(ctx, HICP_EIO, "cannot read %s: %s", path, strerror(err));
    }
    done += (uint64_t)got;
  }
  *out = buf;
  return HICP_OK;
}

static int model_load(hicp_context *ctx, const char *path, hicp_model **out)
{
  if (path == NULL || out == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_model_load: NULL argument");
  *out = NULL;
  int fd;
  /* O_NONBLOCK: a FIFO's open would wait for a writer, only for the
   * FIFO to be refused below (reads of a regular file ignore the flag) */
  do
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  while (fd < 0 && errno == EINTR);
  if (fd < 0)
    return hicp__fail(ctx, HICP_EIO, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return hicp__fail(ctx, HICP_EIO, "%s is not a regular file", path);
  }
  file_header h;
  uint32_t id[3]; /* the magic's 8 bytes, then the version */
  int rc = HICP_OK;
  if ((uint64_t)st.st_size >= sizeof id && pread(fd, id, sizeof id, 0) == (ssize_t)sizeof id &&
      memcmp(id, MAGIC, 8) == 0 && id[2] == 2u) {
    rc = read_header_v2(ctx, fd, (uint64_t)st.st_size, path, &h);
  } else if ((uint64_t)st.st_size < sizeof h || pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
    close(fd);
    return hicp__fail(ctx, HICP_EFORMAT, "%s: too short for a hicp model file", path);
  }
  if (rc == HICP_OK)
    rc = check_header(ctx, &h, (uint64_t)st.st_size, path);
  if (rc != HICP_OK) {
    close(fd);
    return rc;
  }
  unsigned char *base = NULL;
  rc = read_whole(ctx, fd, (uint64_t)st.st_size, path, &base);
  close(fd);
  if (rc != HICP_OK)
    return rc;
  sum_state s;
  sum_init(&s);
  for (int i = 0; i < NSECTIONS; i++) {
    if (h.size[i] == 0)
      continue;
    sum_update(&s, base + h.offset[i], h.size[i] / 8 * 8);
    if (h.size[i] % 8)
      sum_update(&s, base + h.offset[i] + h.size[i] / 8 * 8, h.size[i] % 8);
  }
  if (sum_final(&s) != h.payload_sum && !SKIP_CHECKSUMS) {
    hicp__aligned_free(base);
    return hicp__fail(ctx, HICP_EFORMAT, "%s: corrupted data (checksum mismatch)", path);
  }
  hicp_model *m = hicp__model_new();
  if (m == NULL) {
    hicp__aligned_free(base);
    return hicp__fail(ctx, HICP_ENOMEM, "%s: out of memory for the model", path);
  }
  if (hicp__model_own(m, base) == NULL) { /* cannot fail on a new model */
    hicp_model_destroy(m);
    return hicp__fail(ctx, HICP_ENOMEM, "%s: out of memory for the model", path);
  }
  m->npoints = h.npoints;
  m->nv = (uint32_t)h.nv;
  m->nedges = h.nedges;
  m->nkd = (uint32_t)h.nkd;
  m->zero_start = h.zero_start;
  m->has_delaunay = (int)h.has_delaunay;
  m->guards = h.guards;
  for (int i = 0; i < 3; i++) {
    m->origin[i] = h.origin[i];
    m->bbox_min[i] = h.bbox_min[i];
    m->bbox_max[i] = h.bbox_max[i];
  }
  m->diag = h.diag;
  m->build_ms = h.build_ms;
  m->qhull_ms = h.qhull_ms;
  memcpy(m->fallback, h.fallback, sizeof m->fallback);
  m->fallback[sizeof m->fallback - 1] = '\0';
  /* The sections are used where they lie in the file's block. */
  m->vtx = (hicp__vtx *)(base + h.offset[SEC_VTX]);
  m->vertex_of = (uint32_t *)(base + h.offset[SEC_VERTEX_OF]);
  m->row = m->has_delaunay ? (uint32_t *)(base + h.offset[SEC_ROW]) : NULL;
  m->nbr = m->has_delaunay ? (uint32_t *)(base + h.offset[SEC_NBR]) : NULL;
  m->kd = (hicp__kdnode *)(base + h.offset[SEC_KD]);
  m->kd_pts = (hicp__vtx *)(base + h.offset[SEC_KD_PTS]);
  m->safe_r2 = m->has_delaunay ? (float *)(base + h.offset[SEC_SAFE]) : NULL;
  m->ecode = m->has_delaunay ? (uint8_t *)(base + h.offset[SEC_ECODE]) : NULL;
  m->eunit = m->has_delaunay ? (float *)(base + h.offset[SEC_EUNIT]) : NULL;
  m->start = h.size[SEC_START] != 0 ? (uint32_t *)(base + h.offset[SEC_START]) : NULL;
  for (int i = 0; i < 3; i++) {
    m->start_dim[i] = h.start_dim[i];
    m->start_lo[i] = h.start_lo[i];
  }
  m->start_inv = h.start_inv;
  hicp__kdtree_box(m);
  rc = check_indices(ctx, m, path);
  /* The box and diagonal set the default --tol, the noise scale and the
   * scan order's grid: a header that disagrees with the vertices (forged,
   * the checksums being no seal) would change the answers (stop 60's
   * review).  The build's own arithmetic gives the same bits. */
  if (rc == HICP_OK) {
    double lo[3], hi[3], diag;
    hicp__model_box(m, lo, hi, &diag);
    int same = diag == m->diag;
    for (int d = 0; d < 3; d++)
      same &= lo[d] == m->bbox_min[d] && hi[d] == m->bbox_max[d];
    if (!same)
      rc = hicp__fail(ctx, HICP_EFORMAT,
                      "%s: the header's bounding box or diagonal disagrees with the vertices", path);
  }
  /* A format 2 file has no start table: built now, as a build makes it
   * (tens of milliseconds for 40k points, a few seconds for 1M); saving
   * the model again writes it into a format 3 file (it has no guards). */
  if (rc == HICP_OK && m->has_delaunay && m->start == NULL)
    rc = hicp__start_table_build(ctx, m);
  if (rc != HICP_OK) {
    hicp_model_destroy(m);
    return rc;
  }
  *out = m;
  return HICP_OK;
}

int hicp_model_load(hicp_context *ctx, const char *path, hicp_model **out)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = model_load(ctx, path, out);
  hicp__fpenv_leave(&fe);
  return rc;
}
