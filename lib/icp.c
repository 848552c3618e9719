/* icp.c: hicp_register, the ICP driver (Besl & McKay 1992; thesis ch. III).
 *
 * Each iteration k: pass A applies T_k to the scan and finds every point's
 * nearest model vertex, summing the pairs per chunk; the chunk partials are
 * combined in chunk order by a fixed tree; optional filters (max distance,
 * the thesis's sigma filter, trimming) choose the inlier pairs, re-summed by
 * pass B; the stop tests run on the inlier MSE; Horn's method solves for
 * T_{k+1} from the original scan P0 and the matches.  The loop needs only the
 * small per-iteration state (T, MSE, a few thresholds), which is what lets the
 * GPU keep it on the device. */
#include "config.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "cloud.h"
#include "context.h"
#include "fpenv.h"
#include "icp.h"
#include "model.h"
#include "order.h"
#include "scheduler.h"

/* lib/pp/, shared with the device, writes the stop reasons as numbers. */
_Static_assert(HICP_STOP_MAX_ITER == 0 && HICP_STOP_MSE_CHANGE == 1 && HICP_STOP_MSE_ABS == 2 &&
                   HICP_STOP_INCREMENT == 3 && HICP_STOP_NO_PAIRS == 4 &&
                   HICP_STOP_CANCELED == 5 && HICP_STOP_TIMEOUT == 6,
               "lib/pp/solve.h's stop reasons");

void hicp_reg_options_init_sized(hicp_reg_options *opts, size_t size)
{
  hicp_reg_options d;
  memset(&d, 0, sizeof d);
  d.nn = HICP_NN_PNN_OPT;
  d.max_iter = 50;
  d.tol = -1.0;
  d.trim = 1.0;
  d.filter_start = -1;
  d.filter_sigma = 3.0;
  hicp__init_sized(opts, size, &d, sizeof d);
}

void hicp_result_init_sized(hicp_result *result, size_t size)
{
  hicp__init_sized(result, size, NULL, 0);
}

static int finite_nonneg(double x)
{
  return isfinite(x) && x >= 0.0;
}

static int make_plan(hicp_context *ctx, const hicp_model *m, const hicp_reg_options *o,
                     hicp__plan *p)
{
  if ((unsigned)o->nn > HICP_NN_PNN)
    return hicp__fail(ctx, HICP_EINVAL, "unknown nearest-neighbour method %d", (int)o->nn);
  if (o->max_iter < 0 || o->max_iter > 1000000)
    return hicp__fail(ctx, HICP_EINVAL, "max_iter must be between 0 and 1000000, not %d",
                      o->max_iter);
  if (!(o->tol == -1.0 || finite_nonneg(o->tol)))
    return hicp__fail(ctx, HICP_EINVAL, "tol must be finite and >= 0 (or -1 for automatic)");
  if (!finite_nonneg(o->mse_abs) || !finite_nonneg(o->min_step_trans) ||
      !finite_nonneg(o->min_step_rot_deg) || !finite_nonneg(o->max_dist) ||
      !finite_nonneg(o->time_budget_ms))
    return hicp__fail(ctx, HICP_EINVAL,
                      "mse_abs, min_step_trans, min_step_rot_deg, max_dist and time_budget_ms "
                      "must be finite and >= 0");
  if (o->min_step_rot_deg > 180.0)
    return hicp__fail(ctx, HICP_EINVAL, "min_step_rot_deg must be at most 180");
  if (!(o->trim > 0.0 && o->trim <= 1.0))
    return hicp__fail(ctx, HICP_EINVAL, "trim must be in (0, 1], not %g", o->trim);
  if (o->filter_start < -1)
    return hicp__fail(ctx, HICP_EINVAL, "filter_start must be >= 0, or -1 for off");
  if (!(isfinite(o->filter_sigma) && o->filter_sigma > 0.0))
    return hicp__fail(ctx, HICP_EINVAL, "filter_sigma must be finite and > 0");
  int chunk = o->chunk_points ? o->chunk_points : (int)HICP_DEFAULT_CHUNK;
  if (chunk < HICP_LANES || chunk > 65536 || (chunk & (chunk - 1)) != 0)
    return hicp__fail(ctx, HICP_EINVAL,
                      "chunk_points must be a power of two from 256 to 65536, not %d", chunk);
  if (o->flags != 0)
    return hicp__fail(ctx, HICP_EINVAL, "reserved flags must be 0");
  memset(p, 0, sizeof *p);
  p->method = (int)o->nn;
  /* automatic: set by each frame, from its scan too (frame_tol) */
  p->conv.tol = o->tol < 0.0 ? fmax(1e-12 * m->diag * m->diag, DBL_MIN) : o->tol;
  p->tol_auto = o->tol < 0.0;
  p->conv.mse_abs = o->mse_abs;
  p->conv.step_t = o->min_step_trans;
  /* 1 - cos(angle), so the device loop needs no cosine, as 2 sin^2(angle/2):
   * 1 - cos rounds to 0 (off) below 6e-7 degrees, and a threshold that fine
   * must still take part.  Below about 1e-160 degrees 2 sin^2 underflows to
   * 0 too: the least positive double then, which only a rotation step of
   * exactly 0 is under, as for the threshold itself. */
  const double half = o->min_step_rot_deg * M_PI / 360.0;
  p->conv.step_c =
      o->min_step_rot_deg > 0.0 ? fmax(2.0 * sin(half) * sin(half), 0x1p-1074) : 0.0;
  p->conv.max_iter = o->max_iter;
  p->max_d2 = o->max_dist > 0.0 ? o->max_dist * o->max_dist : HUGE_VAL;
  p->trim = o->trim;
  p->filter_start = o->filter_start;
  p->sigma_k = hicp__sigma_k(o->filter_sigma);
  p->chunk = (uint32_t)chunk;
  p->time_budget_ms = o->time_budget_ms;
  return HICP_OK;
}

static int cmp_double(const void *a, const void *b)
{
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

double hicp__select_kth(double *v, size_t n, size_t k)
{
  /* Quickselect with a three-way partition (equal keys are common: many
   * pairs share a distance when matches coincide).  Keys that rise to the
   * middle and fall again make the middle one the largest of every range,
   * and the selection quadratic (stop 69's review: a trimmed scan of
   * 100,000 points in such an order spent 0.8 s a pass here), so past 16 n
   * keys partitioned the rest is sorted: the k-th smallest is one value,
   * however it is found. */
  size_t lo = 0, hi = n;
  uint64_t work = 0;
  while (hi - lo > 1) {
    if (work > 16 * (uint64_t)n) {
      qsort(v + lo, hi - lo, sizeof *v, cmp_double);
      return v[k];
    }
    work += hi - lo;
    double piv = v[lo + (hi - lo) / 2];
    size_t lt = lo, i = lo, gt = hi;
    while (i < gt) {
      double x = v[i];
      if (x < piv) {
        v[i++] = v[lt];
        v[lt++] = x;
      } else if (x > piv) {
        v[i] = v[--gt];
        v[gt] = x;
      } else {
        i++;
      }
    }
    if (k < lt)
      hi = lt;
    else if (k >= gt)
      lo = gt;
    else
      return piv;
  }
  return v[k];
}

/* Combines the chunk partials by the fixed tree (pp/reduce.h), in a copy:
 * the tree overwrites what it adds. */
static void combine(const hicp__frame *f, hicp__partial *tot)
{
  memcpy(f->sums, f->part, sizeof *f->sums * f->nchunks);
  hicp__partial_tree(f->sums, f->nchunks);
  *tot = f->sums[0];
}

static void walk_add(hicp_walk_stats *s, const hicp__frame *f)
{
  for (uint32_t c = 0; c < f->nchunks; c++) {
    const hicp__walkpart *w = &f->walk[c];
    s->queries += w->queries;
    s->steps += w->steps;
    s->max_steps = w->max_steps > s->max_steps ? w->max_steps : s->max_steps;
    for (int b = 0; b < HICP_WALK_BINS; b++)
      s->hist[b] += w->hist[b];
  }
}

/* Internal transform (relative coordinates) <-> public (absolute). */
static void to_internal(const hicp_transform *pub, const double os[3], const double om[3],
                        hicp__xf *T)
{
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 3; j++)
      T->r[3 * i + j] = pub->m[4 * i + j];
    T->t[i] = pub->m[4 * i + 3] +
              (pub->m[4 * i] * os[0] + pub->m[4 * i + 1] * os[1] + pub->m[4 * i + 2] * os[2]) -
              om[i];
  }
}

static void to_public(const hicp__xf *T, const double os[3], const double om[3],
                      hicp_transform *pub)
{
  hicp_transform_identity(pub);
  for (int i = 0; i < 3; i++) {
    for (int j = 0; j < 3; j++)
      pub->m[4 * i + j] = T->r[3 * i + j];
    pub->m[4 * i + 3] =
        T->t[i] + om[i] - (T->r[3 * i] * os[0] + T->r[3 * i + 1] * os[1] + T->r[3 * i + 2] * os[2]);
  }
}


/* The host-driven iteration loop: each pass split over the team's workers
 * (CPU threads, or CPU and GPU workers in a hybrid frame: scheduler.h); a
 * registration that has a GPU to itself runs gpu/'s icp_kernel instead
 * (hicp__register_frame chooses). */
/* Per-pass timing of each worker feeds its measured rate. */
typedef struct pass_job {
  hicp__worker *w;
  const hicp_model *m;
  hicp__frame *f;
  const hicp__xf *T;
  const hicp__select *sel;
  int method;
  int b; /* 0: pass A, 1: pass B */
  uint32_t c0, c1;
  int rc;
  double ms;
} pass_job;

static void *run_pass(void *arg)
{
  pass_job *j = arg;
  double t0 = hicp__now_ms();
  if (j->c1 > j->c0)
    j->rc = j->b ? j->w->ops->pass_b(j->w, j->m, j->f, j->sel, j->c0, j->c1)
                 : j->w->ops->pass_a(j->w, j->m, j->f, j->T, j->method, j->sel, j->c0, j->c1);
  else
    j->rc = HICP_OK;
  j->ms = hicp__now_ms() - t0;
  return NULL;
}

/* Cuts [0, nchunks) into one range per worker, in proportion to the
 * workers' measured rates (equal shares until measured), or by the fixed
 * CPU share.  The split moves only time, never bits. */
static void split_chunks(const hicp__team *team, uint32_t nchunks, uint32_t *cut)
{
  double share[HICP_TEAM_MAX], total = 0.0;
  int ncpu = 0;
  for (int i = 0; i < team->nw; i++)
    ncpu += !team->w[i]->is_gpu;
  for (int i = 0; i < team->nw; i++) {
    const hicp__worker *w = team->w[i];
    if (team->cpu_share >= 0.0 && ncpu > 0 && ncpu < team->nw)
      share[i] = w->is_gpu ? (1.0 - team->cpu_share) / (team->nw - ncpu) : team->cpu_share / ncpu;
    else if (team->cpu_share >= 0.0)
      share[i] = 1.0;
    else
      share[i] = w->rate > 0.0 ? w->rate : 1.0;
    total += share[i];
  }
  double acc = 0.0;
  cut[0] = 0;
  for (int i = 0; i < team->nw; i++) {
    acc += share[i];
    uint32_t c = i + 1 == team->nw ? nchunks : (uint32_t)((double)nchunks * acc / total + 0.5);
    cut[i + 1] = c < cut[i] ? cut[i] : c > nchunks ? nchunks : c;
  }
}

/* Runs one pass on every worker of the team at once (extra workers in
 * their own threads), then folds the measured times into their rates. */
static int run_team_pass(hicp_context *ctx, hicp__team *team, const hicp_model *m,
                         hicp__frame *f, const hicp__xf *T, int method, const hicp__select *sel,
                         int b, const uint32_t *cut)
{
  pass_job jobs[HICP_TEAM_MAX];
  pthread_t tid[HICP_TEAM_MAX];
  int started[HICP_TEAM_MAX] = {0};
  for (int i = 0; i < team->nw; i++) {
    pass_job j = {team->w[i], m, f, T, sel, method, b, cut[i], cut[i + 1], HICP_OK, 0.0};
    jobs[i] = j;
  }
  for (int i = 1; i < team->nw; i++)
    started[i] = pthread_create(&tid[i], NULL, run_pass, &jobs[i]) == 0;
  run_pass(&jobs[0]);
  for (int i = 1; i < team->nw; i++) {
    if (started[i])
      pthread_join(tid[i], NULL);
    else
      run_pass(&jobs[i]); /* no thread: do it here */
  }
  int rc = HICP_OK;
  for (int i = 0; i < team->nw; i++) {
    hicp__worker *w = team->w[i];
    if (jobs[i].rc != HICP_OK && rc == HICP_OK) {
      rc = jobs[i].rc;
      if (w->ctx != ctx)
        hicp__fail(ctx, rc, "%s", hicp_context_error(w->ctx));
    }
    uint32_t nc = jobs[i].c1 - jobs[i].c0;
    /* a pass stopped part way (pass A's halt) measured no rate: its
     * workers did part of their share in the time, the CPU's less */
    if (nc > 0 && jobs[i].ms > 0.0 && !__atomic_load_n(&f->halted, __ATOMIC_RELAXED)) {
      double r = (double)nc / jobs[i].ms;
      w->rate = w->rate > 0.0 ? 0.5 * w->rate + 0.5 * r : r;
    }
  }
  return rc;
}

int hicp__icp_loop(hicp_context *ctx, const hicp_model *m, hicp__frame *f, const hicp__plan *p,
                   const hicp__xf *T0, double t_start, hicp__team *team, hicp__icp_out *out)
{
  hicp__worker solo;
  hicp__team one;
  hicp__threads_watch watch = {0, 0, 0.0, -1.0};
  int want = 0; /* the threads asked for, where they are watched */
  if (team == NULL || team->nw == 0) {
    hicp__cpu_worker_init(&solo, ctx, f->threads);
    want = ctx->fixed_threads ? 0 : hicp__team_threads(ctx);
    one.w[0] = &solo;
    one.nw = 1;
    one.cpu_share = -1.0;
    team = &one;
  }
  int rc = HICP_OK, begun = 0;
  for (; begun < team->nw && rc == HICP_OK; begun++)
    rc = team->w[begun]->ops->begin(team->w[begun], m, f);
  if (rc != HICP_OK) {
    begun--;
    if (team->w[begun]->ctx != ctx)
      hicp__fail(ctx, rc, "%s", hicp_context_error(team->w[begun]->ctx));
  }
  hicp__iter it; /* the pose, the window: what one iteration hands the next */
  hicp__iter_init(&it, T0);
  uint32_t cut[HICP_TEAM_MAX + 1];
  /* the sums at T_prev and the degenerate flag as it was then: what a
   * stop at the previous iteration's end would have returned */
  hicp__partial tot_prev;
  int degenerate_prev = 0;
  memset(&tot_prev, 0, sizeof tot_prev);
  memset(out, 0, sizeof *out);
  f->deadline = p->time_budget_ms > 0.0 ? t_start + p->time_budget_ms : 0.0;
  f->halt_ctx = ctx;
  f->halted = 0;
  while (rc == HICP_OK) {
    const int k = it.k;
    /* watched from the second pass: the first wakes or starts the team;
     * a pass on one thread is not (hicp__threads_watch_end ignores it),
     * nor its thread's CPU clock read, a system call */
    if (k == 1 && want > 0 && solo.threads > 1)
      hicp__threads_watch_begin(&watch, solo.threads, want);
    hicp__select sel = hicp__iter_begin(&it, p->max_d2, p->filter_start);

    double t0 = hicp__now_ms();
    split_chunks(team, f->nchunks, cut);
    rc = run_team_pass(ctx, team, m, f, &it.T, p->method, &sel, 0, cut);
    if (rc != HICP_OK)
      break;
    double t1 = hicp__now_ms();
    if (__atomic_load_n(&f->halted, __ATOMIC_RELAXED)) {
      /* The CPU stopped this pass part way (out of time, or canceled): the
       * registration ends as the check at the last iteration's end would
       * have ended it, with that iteration's pose and sums.  Before any
       * pass was complete, that is the initial pose with no pairs, whose
       * rmse is NaN. */
      out->correspond_ms += t1 - t0;
      out->T = k > 0 ? it.T_prev : it.T;
      out->tot = tot_prev;
      out->iterations = k > 0 ? k - 1 : 0;
      out->degenerate = degenerate_prev;
      out->stop = hicp__iter_halt(hicp__canceled(ctx), 1);
      break;
    }
    hicp__partial tot;
    combine(f, &tot);
    if (hicp__iter_after_a(&it, &tot, p->sigma_k, p->trim, &sel)) {
      if (p->trim < 1.0) {
        size_t nc = 0;
        for (uint32_t i = 0; i < f->n; i++)
          if (hicp__is_candidate(f->e2[i], &sel))
            f->trim_e2[nc++] = f->e2[i];
        if (nc > 0) {
          const size_t keep = (size_t)hicp__trim_keep(p->trim, (double)nc);
          hicp__iter_trim(&sel, hicp__select_kth(f->trim_e2, nc, keep - 1));
        }
      }
      rc = run_team_pass(ctx, team, m, f, &it.T, p->method, &sel, 1, cut);
      if (rc != HICP_OK)
        break;
      combine(f, &tot);
    }
    walk_add(&out->walk, f);
    double t2 = hicp__now_ms();
    out->correspond_ms += t1 - t0;
    out->reduce_ms += t2 - t1;

    double mse;
    int stop = hicp__iter_sums(&it, &p->conv, &tot, &mse);
    if (stop == HICP__GO) {
      const int out_of_time =
          p->time_budget_ms > 0.0 && hicp__now_ms() - t_start >= p->time_budget_ms;
      stop = hicp__iter_halt(hicp__canceled(ctx), out_of_time);
    }
    if (stop != HICP__GO) {
      out->T = it.T;
      out->tot = tot;
      out->iterations = k;
      out->stop = stop;
      out->degenerate = it.degenerate;
      /* the tests that stopped it are solve time too, as in the device's
       * loop (gpu_backend.cu's finish_iteration counts them) */
      out->solve_ms += hicp__now_ms() - t2;
      break;
    }
    tot_prev = tot;
    degenerate_prev = it.degenerate;
    hicp__iter_next(&it, &tot, f->s_noise, mse);
    out->solve_ms += hicp__now_ms() - t2;
  }
  for (int i = 0; i < begun; i++)
    team->w[i]->ops->end(team->w[i]);
  out->threads = 0;
  for (int i = 0; i < team->nw; i++)
    out->threads += team->w[i]->is_gpu ? 0 : team->w[i]->threads;
  if (team == &one) {
    hicp__team_ended(solo.threads);
    if (rc == HICP_OK)
      hicp__threads_watch_end(&watch);
  }
  return rc;
}

/* Chooses where one registration runs: "cpu" on the CPU; "cuda" on the GPU
 * or not at all; "auto" and "hybrid" on the GPU when one is usable, else on
 * the CPU.  (Batches spread frames over both: batch.c.) */
int hicp__choose_backend(hicp_context *ctx, hicp_backend *out)
{
  char why[256];
  if (ctx->backend == HICP_BACKEND_CPU) {
    *out = HICP_BACKEND_CPU;
    return HICP_OK;
  }
  int ngpu = hicp__gpu_count(why, sizeof why);
  if (ctx->backend == HICP_BACKEND_CUDA && ngpu == 0)
    return hicp__fail(ctx, HICP_ENODEVICE, "backend cuda: %s", why);
  *out = ngpu > 0 ? HICP_BACKEND_CUDA : HICP_BACKEND_CPU;
  return HICP_OK;
}

int hicp__make_plan(hicp_context *ctx, const hicp_model *m, const hicp_reg_options *user,
                    hicp__plan *plan, size_t *scan_stride)
{
  hicp_reg_options o;
  hicp_reg_options_init(&o);
  if (user != NULL && hicp__copy_sized(&o, sizeof o, user,
                                       offsetof(hicp_reg_options, flags) + sizeof(unsigned),
                                       "hicp_reg_options", ctx) != 0)
    return HICP_EINVAL;
  int rc = make_plan(ctx, m, &o, plan);
  if (rc == HICP_OK && scan_stride != NULL)
    rc = hicp__point_stride(ctx, "scan", o.scan_stride, 3 * sizeof(float), scan_stride);
  return rc;
}

static void fill_result(const hicp__icp_out *out, const hicp__plan *plan, size_t n,
                        const double origin[3], const hicp_model *m, hicp_backend backend,
                        const char *note, double t_start, hicp_result *result)
{
  hicp_result r;
  memset(&r, 0, sizeof r);
  to_public(&out->T, origin, m->origin, &r.transform);
  hicp__transform_inverse(&r.transform, &r.inverse);
  const hicp__partial *t = &out->tot;
  r.points = n;
  r.inliers = (uint64_t)t->v[HICP_PF_N_IN];
  /* no pairs only where no pass was complete (a budget or a cancel) */
  r.rmse = t->v[HICP_PF_N_ALL] > 0.0 ? sqrt(t->v[HICP_PF_E2_ALL] / t->v[HICP_PF_N_ALL]) : NAN;
  r.inlier_rmse = t->v[HICP_PF_N_IN] > 0.0 ? sqrt(t->v[HICP_PF_E2_IN] / t->v[HICP_PF_N_IN]) : NAN;
  r.fitness = t->v[HICP_PF_N_IN] / (double)n;
  r.iterations = out->iterations;
  r.stop = (hicp_stop)out->stop;
  r.converged = out->stop == HICP_STOP_MSE_CHANGE || out->stop == HICP_STOP_MSE_ABS ||
                out->stop == HICP_STOP_INCREMENT;
  r.degenerate = out->degenerate;
  r.backend = backend;
  r.nn = (hicp_nn_method)plan->method;
  r.correspond_ms = out->correspond_ms;
  r.reduce_ms = out->reduce_ms;
  r.solve_ms = out->solve_ms;
  r.walk = out->walk;
  r.threads = out->threads;
  r.time_ms = hicp__now_ms() - t_start;
  snprintf(r.note, sizeof r.note, "%s", note);
  /* the frame's index, where the caller's struct (maybe an older, shorter
   * one: check_common takes any from offsetof(walk)) has one to read */
  r.frame = result->struct_size >= offsetof(hicp_result, frame) + sizeof r.frame ? result->frame : 0;
  size_t sz = result->struct_size < sizeof r ? result->struct_size : sizeof r;
  r.struct_size = result->struct_size;
  memcpy(result, &r, sz);
}

/* Threads for the frame's per-point copies and keys: one below 8,192
 * points, where starting the others costs more than they save, else the
 * frame's (hicp__frame.threads: no more than its passes take while busy
 * CPUs hold the calling thread to fewer, as a team of more would wait for
 * its thread off its CPU, and spin beside the passes). */
static inline int copy_threads(int frame_threads, size_t n)
{
  return n < 8192 ? 1 : frame_threads;
}

static inline float max_f(float a, float b)
{
  return a > b ? a : b;
}

/* The scan in the model's Morton order (order.h), as placed by the initial
 * pose: consecutive points then search nearby vertices, in every iteration,
 * so the model's rows and coordinates are read from the cache rather than
 * from memory.  *sorted = the points in that order, *order[j] = the scan
 * index of point j.
 * The order depends only on the scan, the pose and the model, so results
 * stay reproducible to the bit.
 * The keys and the copies run in parallel on large scans (on 30k points
 * one thread takes 0.24 ms on an H100's host, as long as five of the GPU's
 * iterations), and without a parallel region on one thread: a region of
 * one thread allocates its team in libgomp at every call.  The keys are
 * cpu/keys_simd.c's (vector code, the same bits as the scalar loop), in
 * blocks of KEY_BLOCK points on several threads.  The sort is the serial
 * counting sort, so the order is the same for any thread count. */
#define KEY_BLOCK ((size_t)4096)

/* Besl's tolerance where the caller left it to the library: 1e-12 of the
 * squared diagonal of the smaller box, the model's or the scan's, and no
 * less than the least normal double, so that a model of one point (a
 * diagonal of 0) still stops once the MSE no longer changes (at 0 the test
 * was off).  The model's alone made a local scan in a wide map stop while
 * it was still sliding, and call itself converged: a 50 m scan in a map
 * 50 km wide, 0.96 degrees and 110 mm off, or a map with one stray point
 * at (0, 0, 0), 4.5e6 from the rest, after one iteration, 8 degrees off
 * (stop 66's review). */
static double frame_tol(const hicp_model *m, const float lo[3], const float hi[3])
{
  double d2 = 0.0;
  for (int d = 0; d < 3; d++)
    d2 += ((double)hi[d] - lo[d]) * ((double)hi[d] - lo[d]);
  return fmax(1e-12 * fmin(d2, m->diag * m->diag), DBL_MIN);
}

static int scan_order(hicp_context *ctx, const hicp_model *m, const float *p0, uint32_t n,
                      int threads, const hicp__xf *T0, uint32_t *key, uint32_t *buckets,
                      float *sorted, uint32_t *order, float lo[3], float hi[3])
{
  const long long nn = (long long)n;
  const int nt = copy_threads(threads, n);
  hicp__zgrid g;
  hicp__zgrid_init(&g, m->bbox_min, m->bbox_max);
  /* The scan's box, taken with the keys rather than in a pass of its own
   * (stop 66's review: 3.3 ms a million points on one thread): a minimum
   * and a maximum are exact, whatever the threads. */
  for (int d = 0; d < 3; d++) {
    lo[d] = INFINITY;
    hi[d] = -INFINITY;
  }
  if (nt == 1) {
    hicp__keys_placed(&g, T0, p0, n, key, lo, hi);
  } else {
#pragma omp parallel num_threads(nt) reduction(min : lo[:3]) reduction(max : hi[:3])
    {
      hicp__fpenv fe; /* a pool thread's own environment may differ (fpenv.h) */
      hicp__fpenv_enter(&fe);
      /* in blocks, each keyed by the vector code (cpu/keys_simd.c) */
      const long long blocks = (nn + KEY_BLOCK - 1) / KEY_BLOCK;
#pragma omp for schedule(static)
      for (long long b = 0; b < blocks; b++) {
        const size_t i0 = (size_t)b * KEY_BLOCK;
        const size_t k = n - i0 < KEY_BLOCK ? n - i0 : KEY_BLOCK;
        hicp__keys_placed(&g, T0, &p0[3 * i0], k, &key[i0], lo, hi);
      }
      hicp__fpenv_leave(&fe);
    }
  }
  if (hicp__zsort(key, n, order, NULL, buckets) != HICP_OK)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for %u scan points", (unsigned)n);
  if (nt == 1) {
    for (long long j = 0; j < nn; j++)
      memcpy(&sorted[3 * (size_t)j], &p0[3 * (size_t)order[j]], 3 * sizeof(float));
  } else {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (long long j = 0; j < nn; j++)
      memcpy(&sorted[3 * (size_t)j], &p0[3 * (size_t)order[j]], 3 * sizeof(float));
    hicp__team_ended(nt); /* the team's idle threads spin a while (lib/contention.c) */
  }
  return HICP_OK;
}

/* The CPU loop's copy of the sorted points by coordinate (hicp__frame.p0s):
 * n x, then n y, then n z, without a parallel region on one thread (as
 * scan_order).  The device loop does not read it. */
static inline void split_point(const float *sorted, size_t n, size_t j, float *b)
{
  const float *p = &sorted[3 * j];
  const float x = p[0], y = p[1], z = p[2];
  b[j] = x;
  b[n + j] = y;
  b[2 * n + j] = z;
}

static void by_coordinate(int threads, const float *sorted, size_t n, float *b)
{
  const long long nn = (long long)n;
  const int nt = copy_threads(threads, n);
  if (nt == 1) {
    for (long long j = 0; j < nn; j++)
      split_point(sorted, n, (size_t)j, b);
  } else {
#pragma omp parallel for num_threads(nt) schedule(static)
    for (long long j = 0; j < nn; j++)
      split_point(sorted, n, (size_t)j, b);
    hicp__team_ended(nt);
  }
}

/* A frame's state before its first pass: no certificates, and each
 * point's walk starting from its warm match (warm[order[j]], the caller's
 * point order), or from nothing (HICP_NONE: the start table). */
static void frame_start(hicp__frame *f, const uint32_t *warm, const uint32_t *order, uint32_t nv)
{
  memset(f->track, 0, sizeof *f->track * f->n);
  if (warm == NULL) {
    memset(f->match, 0xff, sizeof *f->match * f->n); /* HICP_NONE */
    return;
  }
  for (uint32_t j = 0; j < f->n; j++)
    f->match[j] = warm[order[j]] < nv ? warm[order[j]] : HICP_NONE;
}

/* hicp__s_noise for the frame's sums: the deepest path through them (a
 * lane's points, the lane tree, the chunk tree), the scan's largest
 * |coordinate| pmax and the model's. */
static double frame_s_noise(const hicp__frame *f, const hicp_model *m, double pmax)
{
  double adds = (double)(f->chunk / HICP_LANES) + 8.0;
  for (uint32_t c = 1; c < f->nchunks; c <<= 1)
    adds += 1.0;
  double ymax = 0.0;
  for (int d = 0; d < 3; d++)
    ymax = fmax(ymax, fmax(fabs(m->bbox_min[d]), fabs(m->bbox_max[d])));
  return hicp__s_noise(adds, pmax, ymax);
}

/* 1 when the team has a device worker. */
static int team_has_gpu(const hicp__team *team)
{
  for (int i = 0; team != NULL && i < team->nw; i++)
    if (team->w[i]->is_gpu)
      return 1;
  return 0;
}

/* The frame's arrays, carved from the context's scratch block: kept from
 * one registration to the next, their pages are not faulted in again
 * (docs/cpu-engine.md, "The AVX2 front begins the walks; pages and
 * latencies").  Each array starts a different number of cache lines past a
 * 64-byte boundary: laid end to end, arrays read side by side can share
 * their low address bits, and one-thread registrations were 1% slower that
 * way.  The scan order's buckets, the loop's copy of the partials and
 * trim's copy of the distances are here too, so that a registration after
 * the first allocates nothing.  Fills at[] with each array's offset;
 * returns the block's size. */
enum { KEY, ORDER, SORTED, P0S, MATCH, E2, TRACK, PART, WALK, DONE, BUCKETS, SUMS, TRIM,
       FRAME_ARRAYS };
static uint64_t frame_layout(size_t n, uint32_t nchunks, int trim, size_t at[FRAME_ARRAYS])
{
  /* In 64 bits: 64-76 bytes a point wrap a 32-bit size_t from about 56 M
   * points, fewer than a scan may have there (stop 69's review), and a
   * wrapped size would pass the budget and leave the arrays past the
   * block.  The offsets are only used where the total fits a size_t. */
  const uint64_t n64 = n, c64 = nchunks;
  const uint64_t bytes[FRAME_ARRAYS] = {
      [KEY] = sizeof(uint32_t) * n64,
      [ORDER] = sizeof(uint32_t) * n64,
      [SORTED] = sizeof(float) * 3 * n64,
      [P0S] = sizeof(float) * 3 * n64,
      [MATCH] = sizeof(uint32_t) * n64,
      [E2] = sizeof(double) * n64,
      [TRACK] = sizeof(hicp__track) * n64,
      [PART] = sizeof(hicp__partial) * c64,
      [WALK] = sizeof(hicp__walkpart) * c64,
      [DONE] = sizeof(uint32_t) * c64,
      [BUCKETS] = sizeof(uint32_t) * (uint64_t)hicp__zsort_buckets((uint32_t)n),
      [SUMS] = sizeof(hicp__partial) * c64,
      [TRIM] = trim ? sizeof(double) * n64 : 0};
  uint64_t total = 0;
  for (int k = 0; k < FRAME_ARRAYS; k++) {
    at[k] = (size_t)total;
    total += (bytes[k] + 63) / 64 * 64 + 64 * (uint64_t)(3 * k + 1);
  }
  return total;
}

uint64_t hicp__frame_bytes(const hicp__plan *plan, size_t n)
{
  const uint32_t nchunks = (uint32_t)((n + plan->chunk - 1) / plan->chunk);
  size_t at[FRAME_ARRAYS];
  return frame_layout(n, nchunks, plan->trim < 1.0, at);
}

int hicp__check_frame_budget(hicp_context *ctx, const hicp__plan *plan, size_t n,
                             uint64_t held)
{
  if (n == 0 || n > HICP_SCAN_MAX)
    return HICP_OK; /* refused by the registration, with its own message */
  return hicp__check_budget(ctx, hicp__frame_bytes(plan, n) + held, "the registration");
}

int hicp__frame_fits(const hicp_context *ctx, const hicp__plan *plan, size_t n, uint64_t held)
{
  if (n == 0 || n > HICP_SCAN_MAX)
    return 1; /* refused by the registration, with its own message */
  return hicp__frame_bytes(plan, n) + held <= ctx->memory_limit;
}

int hicp__register_frame(hicp_context *ctx, const hicp_model *m, const float *p0, size_t n,
                         const double origin[3], const hicp__plan *plan,
                         const hicp_transform *init, hicp__team *team, const uint32_t *warm,
                         uint32_t *match_out, hicp_result *result, double t_start)
{
  if (n == 0)
    return hicp__fail(ctx, HICP_EEMPTY, "the scan has no points");
  if (n > HICP_SCAN_MAX)
    return hicp__fail(ctx, HICP_ELIMIT, "%zu scan points: at most %u are supported", n,
                      (unsigned)HICP_SCAN_MAX);
  /* The threads of every region on this thread in this registration: the
   * scan's copies and, alone, the passes (a team's CPU worker has its
   * own, which its copies then take too).  One number, checked for here
   * and given to every region, so that the OpenMP pool stays what
   * context.c counted (checked for the context's whole team, a registration
   * cut to fewer by the adaptation was refused next to a process limit that
   * the pool it needs fitted: stop 66's second review). */
  int threads = 1;
  if (team != NULL && team->nw > 0) {
    for (int i = 0; i < team->nw; i++)
      if (!team->w[i]->is_gpu)
        threads = team->w[i]->threads;
  } else {
    threads = ctx->fixed_threads ? hicp__team_threads(ctx)
                                 : hicp__threads_now(hicp__team_threads(ctx));
  }
  int rc = hicp__team_ready_for(ctx, threads);
  if (rc != HICP_OK)
    return rc;
  double extent2 = 0.0;
  for (int d = 0; d < 3; d++)
    extent2 += (m->bbox_max[d] - m->bbox_min[d]) * (m->bbox_max[d] - m->bbox_min[d]);
  if (extent2 > 0.0 && extent2 < HICP_EXTENT_MIN * HICP_EXTENT_MIN)
    return hicp__fail(ctx, HICP_ERANGE,
                      "the model spans %.3g, under HICP_EXTENT_MIN (%g): its squared distances "
                      "lose their precision in float; scale its coordinates",
                      sqrt(extent2), HICP_EXTENT_MIN);
  hicp_transform init_pub;
  if (init != NULL) {
    if (hicp_transform_check(init) != HICP_OK)
      return hicp__fail(ctx, HICP_EINVAL,
                        "the initial transform is not rigid (R must be a rotation, last row 0 0 0 1)");
    init_pub = *init;
  } else {
    hicp_transform_identity(&init_pub);
  }
  hicp_backend backend = HICP_BACKEND_CPU;
  char note[160] = "";
  if (team != NULL && team->nw > 0) {
    backend = team->nw > 1 ? HICP_BACKEND_HYBRID
                           : team->w[0]->is_gpu ? HICP_BACKEND_CUDA : HICP_BACKEND_CPU;
  } else {
    rc = hicp__choose_backend(ctx, &backend);
    if (rc != HICP_OK)
      return rc;
  }

  hicp__frame f;
  memset(&f, 0, sizeof f);
  f.n = (uint32_t)n;
  f.chunk = plan->chunk;
  f.nchunks = (uint32_t)((n + plan->chunk - 1) / plan->chunk);
  f.threads = team != NULL && team->nw > 0 ? threads : hicp__team_use(threads);
  rc = hicp__check_budget(ctx, hicp__frame_bytes(plan, n), "the registration");
  if (rc != HICP_OK)
    return rc;
  hicp__xf T0;
  to_internal(&init_pub, origin, m->origin, &T0);
  size_t at[FRAME_ARRAYS];
  const uint64_t total = frame_layout(n, f.nchunks, plan->trim < 1.0, at);
  if (total > SIZE_MAX)
    return hicp__fail(ctx, HICP_ELIMIT,
                      "%zu scan points need %llu bytes of working memory, more than this "
                      "system's address space",
                      n, (unsigned long long)total);
  char *blk = hicp__scratch(ctx, HICP_SCRATCH_FRAME, (size_t)total);
  if (blk == NULL)
    return hicp__fail(ctx, HICP_ENOMEM, "out of memory for %zu scan points", n);
  uint32_t *key = (uint32_t *)(void *)(blk + at[KEY]);
  uint32_t *order = (uint32_t *)(void *)(blk + at[ORDER]);
  float *sorted = (float *)(void *)(blk + at[SORTED]);
  float *p0s = (float *)(void *)(blk + at[P0S]);
  f.match = (uint32_t *)(void *)(blk + at[MATCH]);
  f.e2 = (double *)(void *)(blk + at[E2]);
  f.track = (hicp__track *)(void *)(blk + at[TRACK]);
  f.part = (hicp__partial *)(void *)(blk + at[PART]);
  f.walk = (hicp__walkpart *)(void *)(blk + at[WALK]);
  f.points_done = (uint32_t *)(void *)(blk + at[DONE]);
  uint32_t *buckets = (uint32_t *)(void *)(blk + at[BUCKETS]);
  f.sums = (hicp__partial *)(void *)(blk + at[SUMS]);
  f.trim_e2 = plan->trim < 1.0 ? (double *)(void *)(blk + at[TRIM]) : NULL;
  float lo[3], hi[3]; /* the scan's box */
  rc = scan_order(ctx, m, p0, (uint32_t)n, f.threads, &T0, key, buckets, sorted, order, lo, hi);
  float pmax = 0.0f; /* the largest |coordinate| */
  for (int d = 0; d < 3; d++)
    pmax = max_f(pmax, max_f(fabsf(lo[d]), fabsf(hi[d])));
  hicp__plan frame_plan = *plan;
  if (plan->tol_auto && rc == HICP_OK)
    frame_plan.conv.tol = frame_tol(m, lo, hi);
  plan = &frame_plan;
  if (rc == HICP_OK) {
    f.p0 = sorted;
    f.s_noise = frame_s_noise(&f, m, pmax);
    frame_start(&f, warm, order, m->nv);
    hicp__icp_out out;
    /* Which loop runs: the device loop (hicp__gpu_register, gpu/) when the
     * registration has a GPU to itself (backend cuda, or auto with a usable
     * device, and no team); the host loop (hicp__icp_loop) otherwise: CPU
     * threads, or a hybrid team's CPU and GPU workers.  Two ifs, not an
     * if/else: a device that fails under auto or hybrid turns `backend`
     * into CPU in the first, and the second then runs the frame on the
     * host loop. */
    if (backend == HICP_BACKEND_CUDA && team == NULL) {
      rc = hicp__gpu_register(ctx, m, &f, plan, &T0, t_start, &out);
      /* "auto" and "hybrid" carry on on the CPU when the device fails. */
      if (rc != HICP_OK && ctx->backend != HICP_BACKEND_CUDA && rc != HICP_EINVAL) {
        snprintf(note, sizeof note, "GPU failed (%.*s); ran on the CPU",
                 hicp__utf8_prec(ctx->err, 100), ctx->err);
        hicp__clear_error(ctx);
        backend = HICP_BACKEND_CPU;
      } else if (rc == HICP_OK && match_out != NULL) {
        /* The device loop keeps its matches on the device: the caller's
         * next frame finds none to start from, and starts as a first
         * frame does (from the start table), not from stale indices. */
        for (size_t j = 0; j < n; j++)
          match_out[j] = HICP_NONE;
        match_out = NULL;
      }
    }
    if (backend != HICP_BACKEND_CUDA || team != NULL) {
      by_coordinate(f.threads, sorted, n, p0s);
      f.p0s = p0s;
      rc = hicp__icp_loop(ctx, m, &f, plan, &T0, t_start, team, &out);
      /* A team with devices ("hybrid") carries on on the CPU alone when a
       * device fails, as the device loop does.  The device's passes may
       * have left some chunks' matches without their certificates, so the
       * frame starts again from its own starts. */
      if (rc != HICP_OK && team_has_gpu(team) && ctx->backend != HICP_BACKEND_CUDA &&
          (rc == HICP_EDEVICE || rc == HICP_ENOMEM || rc == HICP_ENODEVICE)) {
        snprintf(note, sizeof note, "GPU failed (%.*s); ran on the CPU",
                 hicp__utf8_prec(ctx->err, 100), ctx->err);
        hicp__clear_error(ctx);
        frame_start(&f, warm, order, m->nv);
        backend = HICP_BACKEND_CPU;
        rc = hicp__icp_loop(ctx, m, &f, plan, &T0, t_start, NULL, &out);
      }
    }
    if (rc == HICP_OK) {
      fill_result(&out, plan, n, origin, m, backend, note, t_start, result);
      if (match_out != NULL)
        for (size_t j = 0; j < n; j++)
          match_out[order[j]] = f.match[j];
    }
  }
  hicp__scratch_done(ctx, HICP_SCRATCH_FRAME);
  return rc;
}

void hicp__result_failed(hicp_result *r, uint64_t frame, int code, const char *msg)
{
  size_t size = r->struct_size;
  memset(r, 0, size < sizeof *r ? size : sizeof *r);
  r->struct_size = size;
  if (size >= offsetof(hicp_result, frame) + sizeof(uint64_t)) {
    r->error = code;
    r->frame = frame;
    snprintf(r->note, sizeof r->note, "%s", msg);
  }
}

/* A single registration that failed after its result was found usable
 * leaves it as a batch's failed frame does: zero, with the error and the
 * message as its note, so that a caller who reads it without the return
 * code sees no earlier frame's pose. */
static int failed(hicp_context *ctx, int rc, hicp_result *result)
{
  if (rc != HICP_OK)
    hicp__result_failed(result, 0, rc, hicp_context_error(ctx));
  return rc;
}

static int check_common(hicp_context *ctx, const hicp_model *m, hicp_result *result)
{
  /* a result the library may write: any other is left as it is */
  const int usable = result != NULL && result->struct_size >= offsetof(hicp_result, walk);
  if (ctx == NULL) {
    if (usable)
      hicp__result_failed(result, 0, HICP_EINVAL, "hicp_register: NULL context");
    return HICP_EINVAL;
  }
  hicp__clear_error(ctx);
  hicp__cancel_begin(ctx);
  if (result == NULL)
    return hicp__fail(ctx, HICP_EINVAL, "hicp_register: NULL result");
  if (!usable)
    return hicp__fail(ctx, HICP_EINVAL,
                      "hicp_register: prepare the result with hicp_result_init()");
  if (m == NULL)
    return failed(ctx, hicp__fail(ctx, HICP_EINVAL, "hicp_register: NULL model"), result);
  return HICP_OK;
}

static int register_floats(hicp_context *ctx, const hicp_model *m, const float *scan, size_t n,
                           const hicp_reg_options *opts, const hicp_transform *init,
                           hicp_result *result)
{
  const double t_start = hicp__now_ms(); /* the budget and time_ms count the copy too */
  int rc = check_common(ctx, m, result);
  if (rc != HICP_OK)
    return rc;
  hicp__plan plan;
  size_t stride;
  rc = hicp__make_plan(ctx, m, opts, &plan, &stride);
  if (rc != HICP_OK)
    return failed(ctx, rc, result);
  /* the registration with the copy of the scan it holds, before either */
  rc = hicp__check_frame_budget(ctx, &plan, n, hicp__kept_copy_bytes(n));
  float *p0 = NULL;
  if (rc == HICP_OK)
    rc = hicp__copy_points_kept(ctx, "scan", scan, n, stride, &p0);
  if (rc == HICP_OK) {
    static const double zero[3] = {0.0, 0.0, 0.0};
    rc = hicp__register_frame(ctx, m, p0, n, zero, &plan, init, NULL, NULL, NULL, result,
                              t_start);
  }
  hicp__scratch_done(ctx, HICP_SCRATCH_SCAN);
  return failed(ctx, rc, result);
}

/* Each public call that computes runs in IEEE's default floating-point
 * environment and gives the caller's back (fpenv.h): here, as in every
 * other file, the exported function wraps the one that does the work. */
int hicp_register(hicp_context *ctx, const hicp_model *m, const float *scan, size_t n,
                  const hicp_reg_options *opts, const hicp_transform *init, hicp_result *result)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = register_floats(ctx, m, scan, n, opts, init, result);
  hicp__fpenv_leave(&fe);
  return rc;
}

static int register_cloud(hicp_context *ctx, const hicp_model *m, const hicp_cloud *scan,
                          const hicp_reg_options *opts, const hicp_transform *init,
                          hicp_result *result)
{
  const double t_start = hicp__now_ms();
  int rc = check_common(ctx, m, result);
  if (rc != HICP_OK)
    return rc;
  hicp__plan plan;
  size_t stride = 0;
  rc = scan == NULL ? hicp__fail(ctx, HICP_EINVAL, "hicp_register_cloud: NULL scan")
                    : hicp__make_plan(ctx, m, opts, &plan, &stride);
  if (rc == HICP_OK && stride != 3 * sizeof(float))
    rc = hicp__fail(ctx, HICP_EINVAL, "scan_stride does not apply to a cloud");
  if (rc == HICP_OK)
    rc = hicp__register_frame(ctx, m, scan->xyz, scan->n, scan->origin, &plan, init, NULL, NULL,
                              NULL, result, t_start);
  return failed(ctx, rc, result);
}

int hicp_register_cloud(hicp_context *ctx, const hicp_model *m, const hicp_cloud *scan,
                        const hicp_reg_options *opts, const hicp_transform *init,
                        hicp_result *result)
{
  hicp__fpenv fe;
  hicp__fpenv_enter(&fe);
  const int rc = register_cloud(ctx, m, scan, opts, init, result);
  hicp__fpenv_leave(&fe);
  return rc;
}
