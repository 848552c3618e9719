/**
 * @file hicp.h
 * @brief hicp: exact rigid point-set registration (ICP) on CPUs and NVIDIA GPUs.
 *
 * A **model** is built once from a reference cloud: the 3-D Delaunay
 * triangulation of its points (Qhull) flattened into a neighbour graph, plus a
 * kd-tree for cold starts.  A **registration** aligns a sensed cloud (the
 * scan) to the model with point-to-point ICP (Besl & McKay, Horn's quaternion
 * solve); each nearest-neighbour query is a greedy walk on the Delaunay graph
 * started from the previous iteration's match, and is exact.
 *
 * Conventions
 * - Every function that can fail returns 0 (::HICP_OK) or a negative
 *   ::hicp_error code, but for hicp_context_start_threads(), which returns
 *   the number of threads (at least 1) when it succeeds: test its result
 *   for a negative value.  (hicp_context_threads() and hicp_device_count()
 *   return counts and do not fail.)  Functions that take a context also
 *   leave a one-line description of the failure in it (hicp_context_error();
 *   hicp_context_create() has no context to leave it in, and
 *   hicp_stream_receive()'s codes are its answers, with no message).
 * - The library never prints, never exits and never aborts.  GNU OpenMP
 *   (libgomp) prints "Thread creation failed" and exits when the system
 *   refuses a thread to a parallel region (an address-space or process
 *   limit below the thread count): registrations, queries, model builds and
 *   hicp_context_start_threads() first check that the system gives the
 *   threads the calling thread's OpenMP team lacks, and report a refusal
 *   as ::HICP_ENOMEM.  libgomp keeps a thread's team between regions, and
 *   ends its other threads when a smaller team runs there: hicp checks
 *   again after its own smaller teams (a context of fewer threads, a
 *   batch), but cannot see the application's own OpenMP regions on the
 *   calling thread, nor what OMP_DYNAMIC, omp_pause_resource() or an
 *   OMP_THREAD_LIMIT shared with them do to its team, nor a limit reached
 *   between the check and the region (another thread or process taking
 *   the last of it).  Called from inside a parallel region of the
 *   caller's, active or not, hicp runs on the calling thread alone
 *   (result.threads says 1): libgomp keeps no team there, and would create
 *   and end threads at every region.  The libraries beneath print what
 *   their own environment variables get wrong, as they load or start:
 *   libgomp about a malformed OMP_* or GOMP_* value, hwloc about a HWLOC_*
 *   one (an unknown HWLOC_COMPONENTS; HWLOC_HIDE_ERRORS silences most of
 *   those).  Nor do they all survive running out of memory themselves:
 *   libgomp prints "out of memory allocating N bytes" and exits where its
 *   own allocation fails, and hwloc (2.9) may crash where one of its own
 *   fails while a process's first context reads the machine's topology
 *   (stop 67's review); hicp's own allocations are all reported
 *   (::HICP_ENOMEM).
 * - Options structs are filled with defaults by their `*_init()` macro before
 *   use; the macro records the caller's struct size so that later versions of
 *   the library can add fields without breaking older programs.  Likewise
 *   result structs are prepared with hicp_result_init().  A program built
 *   against a later hicp.h may give this library its larger options struct
 *   when the fields this library does not have are zero, as the macro
 *   leaves them; one that is set is refused with ::HICP_EINVAL (the
 *   message names the struct and the byte), as the call would not do what
 *   it asks.  Results are outputs: a later one's added fields are left as
 *   they were.  So that this holds, a later version adds a field only past
 *   a struct's present size, never in its padding, and adds at most 1 KiB
 *   to an options struct: a struct_size beyond that is refused unread, as
 *   a struct not prepared.
 * - A stride (hicp_cloud_from_xyz(), hicp_model_build(),
 *   hicp_reg_options.scan_stride, hicp_nn_options.query_stride) is at
 *   least a point's size, and one whose points would span more than
 *   PTRDIFF_MAX bytes, which no array does (a negative stride kept in a
 *   size_t), is refused with ::HICP_EINVAL.
 * - `*_destroy(NULL)` is a no-op.
 * - The context given to file, model, query and device calls only keeps
 *   their error message and holds them to its memory limit: there it may be
 *   NULL (no message is kept, the default limit applies; such a call that
 *   needs the limit and cannot read the cgroup's files for the moment fails
 *   as hicp_context_create() does).  Registrations,
 *   batches, streams and hicp_context_start_threads() run on it and refuse
 *   a NULL one with ::HICP_EINVAL; for a NULL context
 *   hicp_context_threads() returns 0, hicp_context_error() "no context",
 *   and hicp_context_cancel() does nothing.
 * - Transforms are 4x4 row-major doubles mapping scan coordinates into model
 *   coordinates: x = R p + t.
 * - Every call computes in IEEE 754's default floating-point environment
 *   (round to nearest, subnormals kept, exceptions masked), on its own
 *   thread and on each thread it runs, whatever environment the caller's
 *   threads have, and gives the caller's settings back on return (the
 *   exception flags it leaves raised are unspecified).  A program built
 *   with -ffast-math or -Ofast (which set flush-to-zero at start-up), one
 *   that sets a directed rounding or one that unmasks a trap gets the same
 *   answers and bits as any other.  hicp itself must not be compiled with
 *   fast-math: configure refuses such CFLAGS.
 *
 * Thread safety
 * - A ::hicp_model is immutable once built or loaded: any number of threads
 *   and contexts may use one model at the same time.  Destroy it only when no
 *   call using it is running.
 * - A ::hicp_context holds scratch memory, device state and the last error: it
 *   may be used by one thread at a time.  Use one context per thread.  The one
 *   exception is hicp_context_cancel(), which any thread may call at any time.
 * - A ::hicp_cloud is read-only after creation and may be shared like a model.
 * - hicp_strerror(), hicp_version() and the name helpers are always safe.
 */
#ifndef HICP_H
#define HICP_H

#include <stddef.h>
#include <stdint.h>

#include "hicp_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Marks the exported functions; everything else in libhicp is hidden. */
#if defined(__GNUC__) && __GNUC__ >= 4
#define HICP_API __attribute__((visibility("default")))
#else
#define HICP_API
#endif

/* ------------------------------------------------------------------------ */
/** @name Errors and version */
/** @{ */

/**
 * The error table: name, value, message.  One table generates the enum and
 * hicp_strerror(), so the two cannot drift apart.
 */
#define HICP_ERROR_TABLE(X)                                                  \
  X(HICP_OK, 0, "success") HICP_ERROR_TABLE_REST_(X)
#define HICP_ERROR_TABLE_REST_(X)                                            \
  X(HICP_EINVAL, -1, "invalid argument")                                     \
  X(HICP_ENOMEM, -2, "out of memory")                                        \
  X(HICP_EIO, -3, "input/output error")                                      \
  X(HICP_EFORMAT, -4, "malformed file")                                      \
  X(HICP_EUNSUPPORTED, -5, "unsupported format or feature")                  \
  X(HICP_ENONFINITE, -6, "non-finite coordinate")                            \
  X(HICP_ELIMIT, -7, "resource limit exceeded")                              \
  X(HICP_ENODEVICE, -8, "no CUDA device")                                    \
  X(HICP_EDEVICE, -9, "CUDA device error")                                   \
  X(HICP_EQHULL, -10, "Delaunay triangulation failed")                       \
  X(HICP_EEMPTY, -11, "empty point set")                                     \
  X(HICP_ECANCELED, -12, "canceled")                                         \
  X(HICP_ETIMEOUT, -13, "time budget exhausted")                             \
  X(HICP_EINTERNAL, -14, "internal error")                                   \
  X(HICP_EAGAIN, -15, "no result is ready yet")                             \
  X(HICP_ERANGE, -16, "coordinate out of range")

/** Error codes returned by hicp functions (0 or negative). */
typedef enum hicp_error {
/* Each entry after the first brings its comma ahead of it: C89 and C++98
 * allow no comma after an enum's last entry.  HICP_OK's value is checked
 * against the table's by the test suite (api::error_table). */
#define HICP_X_ENUM_(name, value, msg) , name = value
  HICP_OK = 0 HICP_ERROR_TABLE_REST_(HICP_X_ENUM_)
#undef HICP_X_ENUM_
} hicp_error;

/** Static English description of an error code ("unknown error" if none). */
HICP_API const char *hicp_strerror(int code);

/** Version string of the library in use, e.g. "0.1.0". */
HICP_API const char *hicp_version(void);

/** Version number of the library in use (see HICP_VERSION_NUMBER). */
HICP_API int hicp_version_number(void);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Enumerations */
/** @{ */

/** Where the work runs.  On a GPU, hicp sets its own device on the threads
 * that run its calls and puts the caller's back before it returns; it
 * reads no CUDA error the caller left pending, and clears only those its
 * own calls leave. */
typedef enum hicp_backend {
  HICP_BACKEND_AUTO = 0, /**< GPU when one is usable, else CPU */
  HICP_BACKEND_CPU = 1,  /**< OpenMP on the host */
  HICP_BACKEND_CUDA = 2, /**< CUDA devices only; fails without one */
  HICP_BACKEND_HYBRID = 3 /**< CPU workers and CUDA streams together */
} hicp_backend;

/** Nearest-neighbour method.  All are exact; they differ only in speed. */
typedef enum hicp_nn_method {
  HICP_NN_PNN_OPT = 0, /**< walk from the previous match, else from the
                            model's start table (a kd descent without one);
                            the default */
  HICP_NN_BRUTE = 1,   /**< every model point (reference) */
  HICP_NN_KDTREE = 2,  /**< kd-tree with backtracking */
  HICP_NN_ZERO = 3,    /**< Delaunay walk from the vertex nearest the centroid */
  HICP_NN_KDANN = 4,   /**< Delaunay walk from a kd-tree descent (no backtracking) */
  HICP_NN_PNN = 5      /**< Delaunay walk from the query's previous match */
} hicp_nn_method;

/** Why a registration stopped. */
typedef enum hicp_stop {
  HICP_STOP_MAX_ITER = 0,   /**< iteration limit reached (not converged) */
  HICP_STOP_MSE_CHANGE = 1, /**< |change in MSE| below tol (Besl's criterion) */
  HICP_STOP_MSE_ABS = 2,    /**< MSE below the absolute threshold */
  HICP_STOP_INCREMENT = 3,  /**< transform increment below both thresholds */
  HICP_STOP_NO_PAIRS = 4,   /**< fewer than one pair left after filtering */
  HICP_STOP_CANCELED = 5,   /**< hicp_context_cancel() was called */
  HICP_STOP_TIMEOUT = 6     /**< the time budget ran out */
} hicp_stop;

/** Parses "auto", "cpu", "cuda" or "hybrid"; 0 or HICP_EINVAL. */
HICP_API int hicp_backend_from_name(const char *name, hicp_backend *out);
/** Name of a backend ("auto", "cpu", ...), or "unknown". */
HICP_API const char *hicp_backend_name(hicp_backend backend);
/** Parses "brute", "kdtree", "zero", "kdann", "pnn" or "pnn-opt". */
HICP_API int hicp_nn_method_from_name(const char *name, hicp_nn_method *out);
/** Name of a nearest-neighbour method, or "unknown". */
HICP_API const char *hicp_nn_method_name(hicp_nn_method method);
/** Name of a stop reason ("max-iter", "mse-change", ...), or "unknown". */
HICP_API const char *hicp_stop_name(hicp_stop stop);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Context */
/** @{ */

/** Per-thread working state: threads, backend, devices, scratch, last error. */
typedef struct hicp_context hicp_context;

/** Options for hicp_context_create(); fill with hicp_context_options_init(). */
typedef struct hicp_context_options {
  size_t struct_size;   /**< set by hicp_context_options_init() */
  int threads;          /**< CPU worker threads, 0 to 4096; 0 = the
                             environment's OMP_NUM_THREADS where it is
                             set (its first count, as libgomp reads it;
                             a value libgomp refuses is left out), else
                             one per core the
                             calling thread may run on, and no more than
                             its cgroup's CPU quota allows, rounded up
                             (default).  Either is capped by OpenMP's
                             thread limit (OMP_THREAD_LIMIT), as the
                             threads that run are.  After a registration
                             (hicp_register(), hicp_register_cloud())
                             that busy CPUs held up (its calling thread
                             off its CPU for a tenth of it or more: each
                             of its passes waits for its slowest thread),
                             the calling thread's next registrations run
                             on fewer (a batch's or stream's frames too,
                             where a CPU worker runs them alone; not
                             those that "hybrid" tracking spreads over
                             the CPU and devices), as many as CPUs look free (at
                             least one), until the CPUs look free again
                             and a try on all of them is not held up;
                             hicp_result.threads says how many ran.  The
                             threads never change a bit of a result.
                             ::HICP_CONTEXT_FIXED_THREADS, or
                             HICP_THREADS_ADAPT=0 in the environment,
                             runs all of them always; so do settings
                             under which libgomp's threads sleep within a
                             millisecond (OMP_WAIT_POLICY=passive, or a
                             GOMP_SPINCOUNT under 10000, which decides
                             over the policy as in libgomp): their waits
                             do not hold the CPUs. */
  hicp_backend backend; /**< default ::HICP_BACKEND_AUTO */
  const int *devices;   /**< CUDA device ordinals to use, copied; NULL = all.
                             A device may be listed more than once: each entry
                             is one logical device with its own streams.
                             Each entry is 0 or more. */
  int ndevices;         /**< entries in @c devices, 0 to 1024 (not NULL
                             when above 0) */
  uint64_t memory_limit; /**< bytes one call may allocate for input and
                              scratch; 0 = 3/4 of physical memory, or of
                              the process's cgroup memory limit where that
                              is less (default; the cgroup's limit and CPU
                              quota are read at a process's first context,
                              and again in a forked child).
                              Batches and streams hold each worker's frame
                              to it as the single call does (its points
                              and a copy of them, as hicp_register(); a
                              cloud's without a copy, as
                              hicp_register_cloud()), so a call with W
                              workers may take up to W times as much.  A
                              tracked frame also keeps its matches for the
                              next (8 bytes a point) where the limit
                              leaves room, and runs without them, to the
                              same pose, where it does not.  A model build's share
                              for Qhull is an estimate (2.8 KB a point;
                              regular lattices take more). */
  unsigned flags;       /**< 0, or ::HICP_CONTEXT_FIXED_THREADS */
} hicp_context_options;

/** hicp_context_options.flags: registrations run on all the context's
 *  threads however busy the CPUs are, rather than on fewer after one was
 *  held up (hicp_context_options.threads). */
#define HICP_CONTEXT_FIXED_THREADS 1u

/** Fills @p opts with defaults.  Always use this before setting fields. */
#define hicp_context_options_init(opts) \
  hicp_context_options_init_sized((opts), sizeof *(opts))
/** Implementation of hicp_context_options_init(); call the macro instead. */
HICP_API void hicp_context_options_init_sized(hicp_context_options *opts, size_t size);

/**
 * Creates a context.  @p opts may be NULL for defaults.
 * @return 0, ::HICP_EINVAL (bad option: outside the ranges given with its
 *         field, or a later header's field set (Conventions); the message
 *         cannot be stored since there is no context: use hicp_strerror()),
 *         ::HICP_ENOMEM; at a process's first context that takes a
 *         default thread count or memory limit, ::HICP_ELIMIT (no file
 *         descriptor free), ::HICP_ENOMEM or ::HICP_EIO (interrupted, or
 *         the system's resources busy) where
 *         the cgroup's memory limit and CPU quota could not be read (the
 *         defaults need them: the call can be tried again).
 *         Asking for ::HICP_BACKEND_CUDA on a host without a usable device is
 *         not an error here; registrations then fail with ::HICP_ENODEVICE.
 */
HICP_API int hicp_context_create(const hicp_context_options *opts, hicp_context **ctx);

/**
 * Frees a context and everything it owns; NULL is a no-op.  What it owns
 * includes the working arrays of its last registration (about 66 bytes per
 * scan point, 8 more when trimming) and hicp_register()'s copy of its scan
 * (12 bytes per point), each kept only up to 64 MiB, for the next one:
 * arrays allocated afresh each time cost a page fault per page.  So on the
 * CPU, once a context has registered a scan, its registrations of scans no
 * larger (up to about a million points, where the blocks reach 64 MiB),
 * with the same options, allocate no memory, as a fixed-rate pose loop
 * wants.  That includes libgomp's, which reuses its teams of two or more
 * threads unless OMP_DYNAMIC, OMP_THREAD_LIMIT=1 or OMP_MAX_ACTIVE_LEVELS=0
 * is set (inside a parallel region of the caller's own, hicp runs on one
 * thread, with no team).
 */
HICP_API void hicp_context_destroy(hicp_context *ctx);

/**
 * The message of the last failed call on @p ctx ("" if none).  Valid until
 * the next call on the context.
 */
HICP_API const char *hicp_context_error(const hicp_context *ctx);

/** The number of CPU worker threads the context uses. */
HICP_API int hicp_context_threads(const hicp_context *ctx);

/**
 * Starts the context's CPU worker threads now, for registrations and queries
 * made from the calling thread, instead of at the first of them.  A program
 * that must answer its first frame quickly calls it before it reads its
 * model and scan: a first registration that starts the threads itself took
 * about 5 ms longer on a two-core virtual machine (docs/cpu-engine.md,
 * "Starting the threads before the first registration").  The threads are
 * the calling thread's OpenMP team: they wait, spinning a little and then
 * sleeping, until its next registration.  A team does not survive
 * fork(): in a child process, the thread that called fork() runs hicp's
 * work on one thread, whatever its contexts say (the same bits, slower),
 * where a team would wait for ever on the parent's threads, whenever the
 * parent had other threads at the fork (its team, hicp's or the
 * application's own OpenMP, may be among them; so also the children of
 * such a child).  The child of a process that had no other thread, such
 * as a pre-fork server's master that loaded a model but ran no team (a
 * registration on several threads runs one, as does a batch of fewer
 * frames than threads), keeps its threads, and threads a child starts, such as a stream's workers,
 * use all of theirs.  Cheap when
 * they are already running.
 * Returns the number of threads running (1 for a one-thread context, and
 * for a ::HICP_BACKEND_CUDA one, which starts none: its registrations run on
 * the device), ::HICP_EINVAL when @p ctx is NULL, or ::HICP_ENOMEM when
 * the system refuses the threads (the first call from each thread checks
 * that it would give them all at once, before OpenMP asks for them).
 */
HICP_API int hicp_context_start_threads(hicp_context *ctx);

/**
 * Asks the registration or batch running on @p ctx to stop: on the CPU
 * within a piece of its pass (a few hundred points a thread), on a GPU at
 * its next iteration boundary.  It returns what its last complete
 * iteration reached, with ::HICP_STOP_CANCELED (as for the time budget:
 * hicp_reg_options.time_budget_ms).
 * A batch's frames that had not started fail with ::HICP_ECANCELED (their
 * results say "canceled before it started"), and the batch returns
 * ::HICP_ECANCELED, unless a frame before them failed for another reason:
 * the batch returns its first failing frame's code.
 * Safe to call from any thread, also when nothing is running (then the next
 * call starts normally: a request applies only to the calls running when it
 * is made).  On a stream's context it stops the frames submitted before it:
 * the running ones at their next iteration boundary, the others before they
 * start (their results fail with ::HICP_ECANCELED); frames submitted later
 * run normally.
 */
HICP_API void hicp_context_cancel(hicp_context *ctx);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Devices */
/** @{ */

/** A CUDA device, as the library sees it. */
typedef struct hicp_device_info {
  size_t struct_size;    /**< set by hicp_device_info_init() */
  int ordinal;           /**< CUDA device ordinal */
  char name[128];
  int cc_major, cc_minor; /**< compute capability */
  int multiprocessors;
  uint64_t memory_bytes;
  char pci_bus_id[32];   /**< domain:bus:device.function */
  int numa_node;         /**< nearest NUMA node (hwloc), -1 if unknown */
} hicp_device_info;

/** Prepares @p info for hicp_device_get_info(). */
#define hicp_device_info_init(info) hicp_device_info_init_sized((info), sizeof *(info))
/** Implementation of hicp_device_info_init(); call the macro instead. */
HICP_API void hicp_device_info_init_sized(hicp_device_info *info, size_t size);

/**
 * Number of usable CUDA devices (0 in builds without CUDA, on hosts without
 * a GPU or driver; then hicp_context_error() says why).  Never fails.
 */
HICP_API int hicp_device_count(hicp_context *ctx);

/** Describes device @p ordinal.  0, ::HICP_EINVAL or ::HICP_ENODEVICE. */
HICP_API int hicp_device_get_info(hicp_context *ctx, int ordinal, hicp_device_info *info);

/**
 * The vector code the CPU backend's nearest-neighbour walks and sums run on
 * this CPU: "avx512", "avx512-scan8", "avx2" or "scalar".  The widest the
 * CPU has; on AMD's cores with AVX-512 (and AVX-512VL) "avx512-scan8",
 * AVX-512 with the AVX2 code's eight-lane row scans, two walks at a time
 * in AVX-512VL's registers (one at a time on models of more than 65,536
 * vertices), which are the faster there.  The
 * environment variable HICP_SIMD=scalar|avx2|avx512|avx512-scan8 picks
 * another that the CPU has.  Models without a Delaunay graph, or of 2^29
 * vertices or more, take the scalar code.  Every variant gives the same
 * bits; only the time differs.  Never fails; the string is static.
 */
HICP_API const char *hicp_cpu_vector_code(void);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Transforms */
/** @{ */

/** Rigid transform as a 4x4 row-major matrix [R t; 0 0 0 1]. */
typedef struct hicp_transform {
  double m[16];
} hicp_transform;

/** Sets @p t to the identity. */
HICP_API void hicp_transform_identity(hicp_transform *t);
/** Sets @p out to the inverse of the rigid transform @p t ([R^T, -R^T t]). */
HICP_API void hicp_transform_invert(const hicp_transform *t, hicp_transform *out);
/**
 * The largest coordinate magnitude hicp accepts, in points and in
 * translations: far beyond any real scene (Earth-centred coordinates in
 * millimetres are below 1e10), and small enough that squared distances of
 * transformed points never overflow a float.  Larger coordinates are
 * refused with ::HICP_ERANGE (::HICP_EINVAL for a transform).
 */
#define HICP_COORD_MAX 1e17

/**
 * The smallest extent (bounding-box diagonal) of a model that hicp
 * registers to; a model of one point, or of identical points, has none
 * and is registered.  The search compares squared distances in float,
 * which lose their precision below about 1e-38: with a model 1e-21 across
 * poses came out 12 times less accurate, with one 1e-23 across wrong.
 * Smaller models are refused with ::HICP_ERANGE; scale their coordinates
 * (another unit).  Nearest-neighbour queries take any model: their
 * answers are float brute force's.
 */
#define HICP_EXTENT_MIN 1e-12

/** How far a rigid transform's R may be from a rotation: each entry of
 * R R^T - I and det R - 1 at most this.  A rotation written with 6
 * significant digits (printf's %g) is within about 2e-6 of one. */
#define HICP_ROTATION_TOL 1e-5

/**
 * Checks that @p t is a rigid transform (finite, R orthonormal with det +1
 * within ::HICP_ROTATION_TOL, last row 0 0 0 1, translation components at
 * most ::HICP_COORD_MAX in magnitude).  0 or ::HICP_EINVAL.
 */
HICP_API int hicp_transform_check(const hicp_transform *t);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Point clouds and files */
/** @{ */

/**
 * A point cloud read from a file or copied from memory: float coordinates
 * relative to a double-precision origin (the true point is origin + xyz), and
 * triangles when the file was a mesh.  The origin is zero unless the
 * coordinates are far from zero compared with their extent (for example UTM
 * coordinates), where keeping them as plain floats would lose detail; then
 * the cloud is centred on its bounding box, or on the medians of its points
 * where stray ones (fewer than half; a missed return at 0) stretch the box
 * to zero, and the origin says where.
 */
typedef struct hicp_cloud hicp_cloud;

/** File formats. */
typedef enum hicp_format {
  HICP_FORMAT_AUTO = 0, /**< detect from content, then extension */
  HICP_FORMAT_PLY = 1,  /**< Stanford PLY: ascii, binary little/big endian */
  HICP_FORMAT_PCD = 2,  /**< PCL PCD: ascii, binary, binary_compressed */
  HICP_FORMAT_OFF = 3,  /**< OFF, COFF, NOFF, ... (comments allowed); also
                             without its optional keyword (the counts
                             first) when named .off or read as this
                             format */
  HICP_FORMAT_XYZ = 4,  /**< text (xyz/txt/csv): the first three columns, or
                             those a header line names x, y and z */
  HICP_FORMAT_MODEL = 5 /**< a prebuilt hicp model file (hicp_model_save()) */
} hicp_format;

/** How hicp_cloud_write_ply() encodes a PLY file. */
typedef enum hicp_ply_encoding {
  HICP_PLY_BINARY = 0, /**< binary little endian (default) */
  HICP_PLY_ASCII = 1
} hicp_ply_encoding;

/**
 * Reads a point cloud (or mesh vertices and faces) from @p path.  In a PCD
 * file, or a PLY file without faces, a point whose x, y and z are all NaN
 * (how organised clouds mark a pixel without a measurement) is skipped, so
 * the cloud may hold fewer points than the file declares; any other NaN or infinity is
 * ::HICP_ENONFINITE.
 * @param fmt ::HICP_FORMAT_AUTO to detect.
 * @return 0; ::HICP_EINVAL (a NULL @p path or @p out, an unknown @p fmt),
 *         ::HICP_EIO (cannot open/read), ::HICP_EFORMAT (malformed: the
 *         message names the file and the problem, with a line number for text
 *         formats), ::HICP_EUNSUPPORTED, ::HICP_ENONFINITE (NaN/Inf
 *         coordinate), ::HICP_ERANGE (a coordinate beyond ::HICP_COORD_MAX),
 *         ::HICP_EEMPTY (no points), ::HICP_ELIMIT (the header asks for more
 *         memory than the context allows), ::HICP_ENOMEM.
 */
HICP_API int hicp_cloud_read(hicp_context *ctx, const char *path, hicp_format fmt,
                             hicp_cloud **out);

/**
 * As hicp_cloud_read(), with the points kept relative to @p origin instead
 * of an origin of the cloud's own choosing: each point is rounded to float
 * once, as (float)(p - origin).  Give a model's origin
 * (hicp_model_info.origin) to read nearest-neighbour queries: a query is
 * then rounded as the model's points were, so one at a model point is at
 * distance 0 however far from the world origin the two lie and however
 * wide the query file (read by hicp_cloud_read(), a query is rounded
 * relative to its file's centre and again into the model's frame: a wide
 * file moved queries by millimetres in UTM coordinates, and a query at a
 * model point could be answered by its neighbour).
 * @param origin finite, within ::HICP_COORD_MAX; every point must lie within
 *        ::HICP_COORD_MAX of it.
 * @return as hicp_cloud_read(); ::HICP_EINVAL for a NULL or invalid
 *         @p origin, ::HICP_ERANGE for a point too far from it.
 */
HICP_API int hicp_cloud_read_relative(hicp_context *ctx, const char *path, hicp_format fmt,
                                      const double origin[3], hicp_cloud **out);

/**
 * Copies @p n points from memory.  @p stride is the distance in bytes between
 * consecutive points (0 = 3 * sizeof(float)); each point is three floats x, y, z.
 * @return 0, ::HICP_EINVAL, ::HICP_ENONFINITE, ::HICP_ERANGE (a coordinate
 *         beyond ::HICP_COORD_MAX), ::HICP_EEMPTY, ::HICP_ELIMIT, ::HICP_ENOMEM.
 */
HICP_API int hicp_cloud_from_xyz(hicp_context *ctx, const float *xyz, size_t n,
                                 size_t stride, hicp_cloud **out);

/**
 * Copies @p n points given in double precision, such as georeferenced
 * (UTM) coordinates that a float cannot hold to the millimetre.  @p stride is
 * the distance in bytes between consecutive points (0 = 3 * sizeof(double)).
 * The origin is chosen as hicp_cloud_read() chooses it: zero when every
 * coordinate is a float already or the coordinates are small next to their
 * extent, else the bounding-box centre, the points kept relative to it.
 * @return 0, ::HICP_EINVAL, ::HICP_ENONFINITE, ::HICP_ERANGE (a coordinate
 *         beyond ::HICP_COORD_MAX), ::HICP_EEMPTY, ::HICP_ELIMIT, ::HICP_ENOMEM.
 */
HICP_API int hicp_cloud_from_xyz_double(hicp_context *ctx, const double *xyz, size_t n,
                                        size_t stride, hicp_cloud **out);

/**
 * As hicp_cloud_from_xyz_double(), with the points kept relative to
 * @p origin, as hicp_cloud_read_relative() keeps a file's: each point is
 * rounded to float once, as (float)(p - origin).  Give a model's origin
 * (hicp_model_info.origin) for nearest-neighbour queries held in double
 * in memory, such as UTM coordinates: a query at a model point is then at
 * distance 0 (with an origin of the cloud's own, a query is rounded about
 * the cloud's centre and again into the model's frame).  Scans to
 * register keep their own (hicp_cloud_from_xyz_double()): a registration
 * moves them, and their rounding about their own centre is the finer.
 * @param origin finite, within ::HICP_COORD_MAX; every point must lie within
 *        ::HICP_COORD_MAX of it.
 * @return as hicp_cloud_from_xyz_double(); ::HICP_EINVAL for a NULL or
 *         invalid @p origin, ::HICP_ERANGE for a point too far from it.
 */
HICP_API int hicp_cloud_from_xyz_double_relative(hicp_context *ctx, const double *xyz, size_t n,
                                                 size_t stride, const double origin[3],
                                                 hicp_cloud **out);

/** Number of points. */
HICP_API size_t hicp_cloud_size(const hicp_cloud *cloud);
/** Packed x, y, z floats (3 per point), relative to the origin. */
HICP_API const float *hicp_cloud_xyz(const hicp_cloud *cloud);
/** Writes the origin the coordinates are relative to into @p origin (0, 0,
 *  0 for a NULL cloud; a NULL @p origin: nothing is written). */
HICP_API void hicp_cloud_origin(const hicp_cloud *cloud, double origin[3]);
/** Number of triangles (faces of a mesh file, fan-triangulated; 0 for clouds). */
HICP_API size_t hicp_cloud_triangle_count(const hicp_cloud *cloud);
/** Triangle vertex indices, 3 per triangle, or NULL if none. */
HICP_API const uint32_t *hicp_cloud_triangles(const hicp_cloud *cloud);

/**
 * Writes the points of @p cloud, moved by @p transform (NULL = as they are),
 * to a PLY file.  Coordinates are written as float, or as double when the
 * cloud's origin is not zero or when the transform moves the points far
 * from the origin next to their extent (a scan moved into UTM
 * coordinates), where floats would lose detail, the rule
 * hicp_cloud_read() keeps.  The file is written to a temporary file beside
 * @p path and renamed into place, so a failed write never leaves a truncated
 * file and never destroys an existing one.  A FIFO or a device is written
 * in place; a pipe whose reader has gone is ::HICP_EIO, not SIGPIPE (held
 * back on the calling thread while it writes).  A name of one of the
 * process's own descriptors ("/dev/stdout", "/dev/fd/N", "/proc/self/fd/N")
 * is written through that descriptor, at its offset, whatever it leads to,
 * but for a file without a name named "/proc/self/fd/N" (an unlinked
 * temporary file): that one is reopened and truncated.
 * @return 0, ::HICP_EIO, ::HICP_EINVAL, ::HICP_ERANGE (a moved point beyond
 *         ::HICP_COORD_MAX, which no hicp call would read back: nothing is
 *         written), ::HICP_ENOMEM.
 */
HICP_API int hicp_cloud_write_ply(hicp_context *ctx, const hicp_cloud *cloud,
                                  const hicp_transform *transform, const char *path,
                                  hicp_ply_encoding encoding);

/** Frees a cloud; NULL is a no-op. */
HICP_API void hicp_cloud_destroy(hicp_cloud *cloud);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Models */
/** @{ */

/** Immutable, thread-shareable search structure for one reference cloud. */
typedef struct hicp_model hicp_model;

/** Options for building a model; fill with hicp_model_options_init(). */
typedef struct hicp_model_options {
  size_t struct_size; /**< set by hicp_model_options_init() */
  int delaunay;       /**< 1 = build the Delaunay graph (default); 0 = kd-tree
                           only (the walk methods then use the kd-tree) */
  int validate;       /**< 1 = check the built graph (symmetry, reachability,
                           duplicate mapping) before returning; default 0 */
  unsigned flags;     /**< reserved, must be 0 */
} hicp_model_options;

/** Fills @p opts with defaults. */
#define hicp_model_options_init(opts) \
  hicp_model_options_init_sized((opts), sizeof *(opts))
/** Implementation of hicp_model_options_init(); call the macro instead. */
HICP_API void hicp_model_options_init_sized(hicp_model_options *opts, size_t size);

/**
 * Builds a model from @p n points (@p stride bytes apart, 0 = packed).
 * Duplicate points are kept as one vertex answering with the smallest index.
 * Collinear and tiny inputs, and coplanar ones (but those of 64 points or
 * more on an axis-aligned plane, collinear or not, which are triangulated
 * with guard points as below), where a 3-D Delaunay triangulation does
 * not exist, are served exactly by the kd-tree, as is any input Qhull
 * fails on (the reason is in hicp_model_info's fallback_reason; the build
 * does not fail for it).
 * Points with an exactly flat face on their hull (64 or more on one face,
 * to Qhull's roundoff: sampled CAD panels, a depth frame's wall) are
 * triangulated with guard points around them, which keeps
 * Qhull's time near that of other inputs, and such a model is saved as
 * file format 4, which earlier builds of hicp refuse (they lack the check
 * its walks need).  Points far from the origin next to their extent
 * (UTM coordinates) are kept relative to an origin of the model's own
 * (hicp_model_info's origin), exactly: on each axis it is a float within
 * a factor two of every coordinate, or 0.  Queries and scans are in
 * absolute coordinates as always.
 * @return 0, ::HICP_EINVAL, ::HICP_ENONFINITE, ::HICP_ERANGE (a coordinate
 *         beyond ::HICP_COORD_MAX), ::HICP_EEMPTY, ::HICP_ELIMIT,
 *         ::HICP_ENOMEM; with @c validate, ::HICP_EINTERNAL (the graph or
 *         kd-tree built breaks an invariant: a bug, please report it).
 */
HICP_API int hicp_model_build(hicp_context *ctx, const float *xyz, size_t n, size_t stride,
                              const hicp_model_options *opts, hicp_model **out);

/** Builds a model from a cloud (keeps the cloud's origin, to which the
 *  model adds its own for a far float cloud, as hicp_model_build()). */
HICP_API int hicp_model_build_cloud(hicp_context *ctx, const hicp_cloud *cloud,
                                    const hicp_model_options *opts, hicp_model **out);

/**
 * Saves a model to @p path (atomically, as hicp_cloud_write_ply() does).
 * The file has a versioned header, records its byte order and carries a
 * checksum.
 * @return 0, ::HICP_EINVAL (a NULL @p model, a NULL or empty @p path),
 *         ::HICP_EIO (the file could not be written: the message says why;
 *         an existing file at @p path is left as it was), ::HICP_ENOMEM,
 *         ::HICP_EINTERNAL (a model with a graph but no start table, which
 *         no build or load makes).
 */
HICP_API int hicp_model_save(hicp_context *ctx, const hicp_model *model, const char *path);

/**
 * Loads a model saved by hicp_model_save().  Corrupted, truncated or foreign
 * files (other version, other byte order) are refused with ::HICP_EFORMAT.
 * Any file is checked for what a query reads, so none crashes or hangs it;
 * but the checksums find damage, not forgery, and that the graph is the
 * points' Delaunay graph is not checked: answers are exact for the files
 * hicp_model_save() wrote.  Build a model from an untrusted source's points
 * instead (hicp_model_open()'s @c validate checks the graph's other
 * invariants, at several times the load's time).
 * The file is read into memory (its size, charged to the context's memory
 * limit: ::HICP_ELIMIT) and not used after: the model is unaffected if the
 * file is later changed, replaced or removed.
 * @return 0, ::HICP_EINVAL (a NULL argument), ::HICP_EIO (the file cannot
 *         be opened or read, or is not a regular file), ::HICP_EFORMAT,
 *         ::HICP_ELIMIT, ::HICP_ENOMEM.
 */
HICP_API int hicp_model_load(hicp_context *ctx, const char *path, hicp_model **out);

/**
 * Opens @p path as a model: loads it if it is a model file, otherwise reads
 * it as a point cloud and builds the model (with @p opts, NULL = defaults).
 * A model file keeps the graph it was saved with: @p opts->validate checks
 * it after loading (a violation is ::HICP_EFORMAT, a malformed file), and
 * @p opts->delaunay = 0 for a file holding a graph is refused with
 * ::HICP_EINVAL (build from the point cloud instead).  Only a regular file
 * can be a model file; a pipe is read as a point cloud.
 */
HICP_API int hicp_model_open(hicp_context *ctx, const char *path,
                             const hicp_model_options *opts, hicp_model **out);

/** Frees a model; NULL is a no-op. */
HICP_API void hicp_model_destroy(hicp_model *model);

/** Number of degree-histogram bins in ::hicp_model_info (last bin: larger). */
#define HICP_DEGREE_BINS 64

/** Facts about a model; fill with hicp_model_info_init() before the call. */
typedef struct hicp_model_info {
  size_t struct_size;      /**< set by hicp_model_info_init() */
  uint64_t points;         /**< points given */
  uint64_t vertices;       /**< distinct points */
  uint64_t duplicates;     /**< points - vertices */
  uint64_t edges;          /**< directed Delaunay edges (each edge twice) */
  int has_delaunay;        /**< 0 when the kd-tree serves all methods */
  uint32_t max_degree;
  double mean_degree;
  uint64_t degree_hist[HICP_DEGREE_BINS]; /**< vertices per degree */
  uint64_t bytes_total;    /**< memory of the whole model */
  uint64_t bytes_graph;    /**< CSR rows and neighbour lists */
  uint64_t bytes_points;   /**< vertex coordinates and index maps */
  uint64_t bytes_kdtree;
  double build_ms;         /**< whole build, wall clock */
  double qhull_ms;         /**< of which Qhull */
  double origin[3];        /**< coordinates are relative to this */
  double bbox_min[3], bbox_max[3]; /**< bounding box, absolute coordinates */
  char fallback_reason[128]; /**< why there is no Delaunay graph, or "" */
  uint64_t bytes_start;    /**< start table, where pnn-opt's walks without a previous
                                match begin (at most 16 bytes a vertex; 0 without a graph) */
  uint32_t guards;         /**< guard points the graph was triangulated with
                                (a flat face on the points' hull;
                                hicp_model_build), 0 for none */
} hicp_model_info;

/** Prepares @p info for hicp_model_get_info(). */
#define hicp_model_info_init(info) hicp_model_info_init_sized((info), sizeof *(info))
/** Implementation of hicp_model_info_init(); call the macro instead. */
HICP_API void hicp_model_info_init_sized(hicp_model_info *info, size_t size);
/** Fills @p info.  0 or ::HICP_EINVAL. */
HICP_API int hicp_model_get_info(const hicp_model *model, hicp_model_info *info);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Nearest-neighbour queries */
/** @{ */

/** Options for hicp_nn_query(); fill with hicp_nn_options_init(). */
typedef struct hicp_nn_options {
  size_t struct_size;      /**< set by hicp_nn_options_init() */
  hicp_nn_method method;   /**< default ::HICP_NN_PNN_OPT */
  size_t query_stride;     /**< bytes between queries; 0 = packed xyz */
  int warm_start;          /**< 1: @c index holds each query's previous match
                                (model index, or UINT32_MAX for none) on entry;
                                pnn starts there.  0 (default): a first call. */
  unsigned flags;          /**< reserved, must be 0 */
} hicp_nn_options;

/** Fills @p opts with defaults. */
#define hicp_nn_options_init(opts) hicp_nn_options_init_sized((opts), sizeof *(opts))
/** Implementation of hicp_nn_options_init(); call the macro instead. */
HICP_API void hicp_nn_options_init_sized(hicp_nn_options *opts, size_t size);

/** Walk statistics of a batch of queries: the work done, not part of the
 * answer.  A registration's are the same for any thread count and on every
 * backend: the CPU and a GPU start each walk at the same vertex and take
 * the same steps.  Unlike the option and result structs it has no
 * struct_size: hicp_nn_query() fills it whole, so its layout is fixed for
 * this library's major version, and statistics added later will come in a
 * struct of their own. */
typedef struct hicp_walk_stats {
  uint64_t queries;  /**< queries answered by the Delaunay graph: walks and,
                          in a registration (pnn, pnn-opt), points kept by
                          their certificate, counted as walks of 0 steps.
                          A walk whose end a near tie, a hub or a guard
                          hands to the kd-tree or to brute force counts as
                          a walk too: queries 1e4 model diagonals away or
                          more, where float distances to much of the model
                          tie, each scan the model and show as walks of
                          0 steps */
  uint64_t steps;    /**< vertices moved to, summed over queries */
  uint32_t max_steps;
  uint64_t hist[16]; /**< queries per step count; the last bin is 15 or more */
} hicp_walk_stats;

/**
 * For each of @p n queries (absolute coordinates, as hicp_register()'s
 * scan points: the origin of a model that has one, see
 * hicp_model_get_info(), is taken off each query in double), finds the
 * nearest model point: @p index receives the
 * smallest original index among the nearest points, @p d2 (may be NULL) the
 * squared distance computed in float as ((dx*dx + dy*dy) + dz*dz), in the
 * model's frame: each difference is the query less the origin (rounded to
 * float) less the vertex's stored coordinate, which for a model without an
 * origin, or a query within a factor two of it on each axis, is the
 * absolute coordinates' difference, rounded.  Results
 * are the same for every method and thread count.  Queries run on the
 * CPU's threads whatever the context's backend.
 * @param stats may be NULL.
 * @return 0, ::HICP_EINVAL (a NULL argument, bad options, a previous match
 *         that is not a model index), ::HICP_ENONFINITE, ::HICP_ERANGE (a
 *         query coordinate beyond ::HICP_COORD_MAX), ::HICP_ELIMIT,
 *         ::HICP_ENOMEM.
 */
HICP_API int hicp_nn_query(hicp_context *ctx, const hicp_model *model, const float *queries,
                           size_t n, const hicp_nn_options *opts, uint32_t *index, float *d2,
                           hicp_walk_stats *stats);

/** hicp_nn_query() for the points of a cloud (its origin is taken into
 *  account).  A cloud's points are packed: opts->query_stride must be 0 (or
 *  3 * sizeof(float)), another is refused with ::HICP_EINVAL. */
HICP_API int hicp_nn_query_cloud(hicp_context *ctx, const hicp_model *model,
                                 const hicp_cloud *queries, const hicp_nn_options *opts,
                                 uint32_t *index, float *d2, hicp_walk_stats *stats);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Registration */
/** @{ */

/** Registration options; fill with hicp_reg_options_init(). */
typedef struct hicp_reg_options {
  size_t struct_size;    /**< set by hicp_reg_options_init() */
  hicp_nn_method nn;     /**< default ::HICP_NN_PNN_OPT */
  int max_iter;          /**< transform updates at most, 0 to 1,000,000;
                              default 50 */
  double tol;            /**< stop when |MSE change| < tol (squared model
                              units); default -1 = automatic, 1e-12 times the
                              squared diagonal of the smaller bounding box,
                              the model's or the scan's (so that a local
                              scan in a wide map is not called converged
                              while it still slides), at least DBL_MIN (so
                              that an unchanged MSE stops a model of one
                              point); 0 = never */
  double mse_abs;        /**< stop when MSE < this; default 0 (off) */
  double min_step_trans; /**< stop when the translation increment is below
                              this and the rotation increment below
                              min_step_rot_deg; default 0 (off).  A
                              threshold of 0 takes no part: the other one
                              alone decides.  The translation increment is
                              how far the scan's origin moves: a cloud's
                              origin (hicp_cloud_origin) where it has one,
                              else the coordinate origin (the change of the
                              transform's translation). */
  double min_step_rot_deg; /**< degrees, 0 to 180: see min_step_trans */
  double max_dist;       /**< ignore pairs farther apart than this; 0 = off */
  double trim;           /**< keep the best fraction (0, 1] of pairs; 1 = off.
                              The fraction is of the pairs within max_dist;
                              with the sigma filter too, a pair must pass
                              both, so fewer may be kept. */
  int filter_start;      /**< iteration from which the sigma filter runs;
                              -1 = off (default) */
  double filter_sigma;   /**< drop pairs whose distance is more than this many
                              standard deviations from the mean (default 3).
                              The mean and deviation are those of the pairs
                              the previous iteration kept (a window that
                              tightens as outliers drop out), the deviation
                              scaled up by what that cut takes from a normal
                              distribution's (by 1.4% at 3, 85% at 1), so
                              the window keeps its width for any value.  The
                              first filtered iteration, which has every pair
                              and no cut before it, is scaled up alike (a
                              first cut that much wider than S deviations:
                              docs/design.md, "ICP semantics").  The
                              filter is two-sided: below about 1.5 it drops
                              some of the nearest pairs too (trim is the
                              better cut).  Where the last window held no pair it
                              starts again from all of them; otherwise the
                              bounds keep at least its pair nearest the mean
                              (a deviation under 1e-6 of the distances,
                              their sums' rounding, counts as 1e-6), so the
                              filter alone never leaves no pairs; with trim
                              the two together may, and then the
                              registration stops with ::HICP_STOP_NO_PAIRS. */
  size_t scan_stride;    /**< bytes between scan points; 0 = packed xyz */
  int chunk_points;      /**< points per reduction chunk, a power of two from
                              256 to 65536; 0 = 1024.  Results are bit-identical
                              for a given chunk size whatever the threads,
                              backend or split. */
  double time_budget_ms; /**< stop after this much time; 0 = none.  Counted
                              from the call (a batch's or stream's frame:
                              from its start, not its wait in the queue).
                              Checked, as a cancel is, on the CPU between
                              pieces of a pass (a few hundred points a
                              thread: it overruns by microseconds, beyond
                              the scan's set-up before the first pass), on
                              a GPU at iteration boundaries (up to one
                              pass, the first one included).  It stops with
                              ::HICP_STOP_TIMEOUT and what the last complete
                              iteration reached: its pose, rmse and counts,
                              as a run stopped after that many iterations
                              returns them.  Where no pass was complete, the
                              initial pose, 0 iterations, fitness 0, and
                              rmse and inlier_rmse NaN */
  unsigned flags;        /**< reserved, must be 0 */
} hicp_reg_options;

/** Fills @p opts with defaults. */
#define hicp_reg_options_init(opts) hicp_reg_options_init_sized((opts), sizeof *(opts))
/** Implementation of hicp_reg_options_init(); call the macro instead. */
HICP_API void hicp_reg_options_init_sized(hicp_reg_options *opts, size_t size);

/** The outcome of one registration; prepare with hicp_result_init(). */
typedef struct hicp_result {
  size_t struct_size;       /**< set by hicp_result_init() */
  hicp_transform transform; /**< scan -> model: x = R p + t */
  hicp_transform inverse;   /**< model -> scan: the object's pose in the sensor
                                 frame; the inverse of transform, also where
                                 that is the initial pose (0 iterations), which
                                 may be up to ::HICP_ROTATION_TOL from a
                                 rotation */
  double rmse;              /**< RMS distance of all pairs at the final
                                 transform; NaN where no pass over the scan
                                 was complete (stopped by the time budget
                                 or a cancel before the first) */
  double inlier_rmse;       /**< RMS distance of the pairs kept by the filters;
                                 NaN when none was kept (inliers 0, stopped
                                 by ::HICP_STOP_NO_PAIRS), or as rmse */
  double fitness;           /**< inliers / points */
  uint64_t points;          /**< scan points */
  uint64_t inliers;         /**< pairs kept by the filters at the final
                                 transform (as rmse and inlier_rmse are) */
  int iterations;           /**< transform updates performed */
  int converged;            /**< 1 if a convergence test stopped it */
  hicp_stop stop;           /**< which test stopped it */
  int degenerate;           /**< 1 if the rotation was not fully determined
                                 by the inlier pairs (identical or collinear
                                 scan points, a model of one or two points,
                                 or every pair matched to one vertex); the
                                 rotation consistent with
                                 the data nearest the pose it started the
                                 iteration from (the initial pose's, at
                                 first) was returned */
  hicp_backend backend;     /**< where it ran */
  hicp_nn_method nn;        /**< method used */
  double time_ms;           /**< registration wall time (no I/O, no model build) */
  double correspond_ms;     /**< of which: apply + nearest neighbour (on the
                                 CPU also the chunk sums, made as each
                                 chunk's points are matched; on a GPU those
                                 count in reduce_ms) */
  double reduce_ms;         /**< filtering and reductions */
  double solve_ms;          /**< 4x4 eigen-solve and convergence tests */
  hicp_walk_stats walk;     /**< over all iterations */
  char note[160];           /**< "" or a remark, e.g. that the GPU failed and
                                 the CPU finished the registration */
  int error;                /**< 0, or the error code of this frame (then
                                 frame and note are set, the note saying
                                 why, and the other fields are 0).  A single
                                 registration's failure leaves its result
                                 so too, but where the result itself was
                                 refused (NULL, not prepared). */
  uint64_t frame;           /**< batches and streams: the frame's index */
  int threads;              /**< the CPU threads it ran on (0 on a GPU
                                 alone): the context's, or fewer after
                                 busy CPUs held up a registration
                                 (hicp_context_options.threads) */
} hicp_result;

/** Prepares @p result for a registration call. */
#define hicp_result_init(result) hicp_result_init_sized((result), sizeof *(result))
/** Implementation of hicp_result_init(); call the macro instead. */
HICP_API void hicp_result_init_sized(hicp_result *result, size_t size);

/**
 * Registers @p n scan points to @p model with point-to-point ICP.
 * @param scan  x, y, z floats in the model's coordinate system conventions
 *              (absolute coordinates; opts->scan_stride bytes apart).
 * @param opts  NULL for defaults.
 * @param init  initial scan -> model transform; NULL = identity.
 * @param result prepared with hicp_result_init().
 * @return 0 when the registration ran (converged or not: see result->converged),
 *         ::HICP_EINVAL, ::HICP_ENONFINITE, ::HICP_ERANGE (a scan coordinate
 *         beyond ::HICP_COORD_MAX), ::HICP_EEMPTY, ::HICP_ENODEVICE,
 *         ::HICP_EDEVICE, ::HICP_ELIMIT, ::HICP_ENOMEM.
 */
HICP_API int hicp_register(hicp_context *ctx, const hicp_model *model, const float *scan,
                           size_t n, const hicp_reg_options *opts, const hicp_transform *init,
                           hicp_result *result);

/** hicp_register() for a cloud (its origin is taken into account).  A
 *  cloud's points are packed: opts->scan_stride must be 0 (or
 *  3 * sizeof(float)), another is refused with ::HICP_EINVAL. */
HICP_API int hicp_register_cloud(hicp_context *ctx, const hicp_model *model,
                                 const hicp_cloud *scan, const hicp_reg_options *opts,
                                 const hicp_transform *init, hicp_result *result);

/** @} */

/* ------------------------------------------------------------------------ */
/** @name Batches, streams and tracking */
/** @{ */

/** How a batch or a stream schedules its frames; fill with hicp_batch_options_init(). */
typedef struct hicp_batch_options {
  size_t struct_size;  /**< set by hicp_batch_options_init() */
  int track;           /**< 1: tracking, each frame starts from the previous
                            frame's pose (the first from its own init); the
                            frames then run one after another, each spread
                            over every worker.  A frame that fails leaves
                            the pose as it was: the next starts from the
                            last pose found (in a stream, from the failed
                            frame's own init where it was given one),
                            with no matches carried over.  A frame stopped
                            early by the time budget, or in a stream by
                            hicp_context_cancel(), did not fail: the next
                            frame to run starts from the pose it reached,
                            which depends on when it stopped.
                            0 (default): frames are
                            independent and run side by side. */
  int reuse_matches;   /**< with track: frames with as many points as the
                            previous one (the same sensor grid) start their
                            searches from its matches.  Default 1.  On
                            "cuda" a tracked batch's frames run on the
                            device loop, which keeps its matches on the
                            device: each starts from the model's start
                            table, as with 0 (the same poses either way;
                            only the walk statistics differ). */
  double cpu_share;    /**< hybrid tracking: the fraction of each iteration's
                            chunks given to the CPU; -1 (default) measures
                            the workers' throughput and adapts as it runs.
                            Any split gives the same bits. */
  unsigned flags;      /**< reserved, must be 0 */
} hicp_batch_options;

/** Fills @p opts with defaults. */
#define hicp_batch_options_init(opts) hicp_batch_options_init_sized((opts), sizeof *(opts))
/** Implementation of hicp_batch_options_init(); call the macro instead. */
HICP_API void hicp_batch_options_init_sized(hicp_batch_options *opts, size_t size);

/**
 * Registers @p nframes scans to one model.  Frame i has counts[i] points at
 * frames[i] (x, y, z floats, opts->scan_stride bytes apart) and starts from
 * inits[i] (@p inits may be NULL: identity); with tracking, frames after
 * the first start from the previous frame's pose, and their inits[i] are
 * not read (a stream's frames, submitted one by one, take their own).
 * Each results[i] must be prepared with hicp_result_init().  This is a
 * macro: it passes the size of the caller's hicp_result, sizeof *(results),
 * by which the library steps through the array, so a program built against
 * another version of this header passes its own array (a size read from
 * the array itself, results[0].struct_size, let an unprepared first result
 * send the library outside it: stop 65's review).  @p results therefore
 * needs its type: with no frames, a null hicp_result pointer, not a bare
 * NULL.
 * The context's backend decides the workers: "cpu" its CPU threads, "cuda"
 * its devices (each listed device runs up to eight frames at once, fewer
 * when the model takes more than 1/32 of its memory; a device listed twice
 * counts twice), "hybrid" both, "auto" the devices when present, else
 * the CPU.  Each worker runs one frame at a time, on one CPU thread, so a
 * batch of fewer frames than that makes only the workers it can use: the
 * devices' first, and on the CPU alone its frames share out the threads
 * (one frame on a context of 16 threads runs on all 16, the first frame
 * on the calling thread's OpenMP team, as hicp_register() does).  The
 * context keeps a batch's workers, with their working memory and, on a
 * device, each one's copy of the model, for its next batch that plans the
 * same workers (as many frames as workers or more, or the same number
 * below that; on a device, the same model), until hicp_context_destroy()
 * or a batch that plans others.  With tracking (hicp_batch_options.track) the frames run one
 * after another: on "hybrid" each frame's iterations are spread over the
 * CPU and every device, on "cuda" each frame runs on the context's first
 * device.
 * Every result is the same bits as hicp_register() of that frame alone,
 * whatever the workers, the split and the completion order.
 * @param bopts NULL for defaults.
 * @return 0 when every frame ran; otherwise the first failing frame's code
 *         (each result says whether its frame failed, in results[i].error),
 *         ::HICP_ECANCELED when hicp_context_cancel() stopped frames before
 *         they started; ::HICP_EINVAL for a result not prepared with this
 *         size (no frame runs, and the results so prepared say so).
 */
#define hicp_register_batch(ctx, model, frames, counts, nframes, opts, bopts, inits, results)   \
  hicp_register_batch_sized((ctx), (model), (frames), (counts), (nframes), (opts), (bopts),      \
                            (inits), (results), HICP__RESULT_SIZE(results))
/* sizeof *(results), and a compile error where results is not a pointer
 * to a struct with a struct_size (void *: sizeof would be 1) */
#define HICP__RESULT_SIZE(results) (sizeof *(results) + 0 * sizeof((results)->struct_size))
/** Implementation of hicp_register_batch(), the results @p result_size
 *  bytes apart (at least up to hicp_result's `frame`); call the macro
 *  instead. */
HICP_API int hicp_register_batch_sized(hicp_context *ctx, const hicp_model *model,
                                       const float *const *frames, const size_t *counts,
                                       size_t nframes, const hicp_reg_options *opts,
                                       const hicp_batch_options *bopts,
                                       const hicp_transform *inits, hicp_result *results,
                                       size_t result_size);

/**
 * hicp_register_batch() for clouds, each with its origin taken into account
 * (frames far from the origin, see hicp_cloud_read()): result i is the same
 * bits as hicp_register_cloud() of cloud i (with tracking, from the frame
 * before's pose; poses are absolute, so the clouds' origins need not
 * agree).  A cloud's points are packed: opts->scan_stride must be 0 (or
 * 3 * sizeof(float)).
 * A macro, as hicp_register_batch() is.
 * @return as hicp_register_batch(); ::HICP_EINVAL also for another
 *         scan_stride (no frame runs) or a NULL cloud (that frame fails, as
 *         a NULL frame does in hicp_register_batch(); the others run).
 */
#define hicp_register_batch_clouds(ctx, model, clouds, nframes, opts, bopts, inits, results)    \
  hicp_register_batch_clouds_sized((ctx), (model), (clouds), (nframes), (opts), (bopts),         \
                                   (inits), (results), HICP__RESULT_SIZE(results))
/** Implementation of hicp_register_batch_clouds(); call the macro
 *  instead. */
HICP_API int hicp_register_batch_clouds_sized(hicp_context *ctx, const hicp_model *model,
                                              const hicp_cloud *const *clouds, size_t nframes,
                                              const hicp_reg_options *opts,
                                              const hicp_batch_options *bopts,
                                              const hicp_transform *inits,
                                              hicp_result *results, size_t result_size);

/** A stream of frames against one model, answered in submission order. */
typedef struct hicp_stream hicp_stream;

/**
 * Starts a stream on @p ctx, which then keeps the submitter's messages
 * until hicp_stream_destroy(): one thread at a time submits
 * (hicp_stream_submit(), hicp_stream_submit_cloud()), and meanwhile
 * @p ctx takes no other call but, from the submitting thread,
 * hicp_context_error() and the file and cloud calls that only keep their
 * message in it (hicp_cloud_read(), as `hicp track` reads its frames),
 * and hicp_context_cancel() from any thread; the stream's workers run on
 * contexts of their own.  Any number of threads may receive at once
 * (hicp_stream_receive(), which keeps no message), and any thread may
 * stop the stream (hicp_stream_stop()).  The model must outlive the
 * stream.
 * The stream's workers are threads of its own, which start their CPU
 * threads when the stream starts: hicp_context_start_threads() is not
 * needed for a stream.
 * @return 0, ::HICP_EINVAL (a NULL argument, bad options), ::HICP_ENOMEM
 *         (also when its threads cannot start), ::HICP_ENODEVICE
 *         (backend "cuda" without a usable device; an untracked stream
 *         also when the context lists a device the host does not have).
 */
HICP_API int hicp_stream_create(hicp_context *ctx, const hicp_model *model,
                                const hicp_reg_options *opts, const hicp_batch_options *bopts,
                                hicp_stream **out);

/**
 * Queues a frame of @p n points (copied: the caller may reuse @p xyz at
 * once).  @p init may be NULL.  @p frame, when not NULL, receives the
 * frame's index (0, 1, 2, ... in submission order).  What the stream
 * holds is held to the context's memory limit: the copies of the frames
 * not yet run and the results not yet received (about 1 KB each), with
 * this frame's.  Beyond it the frame is refused with ::HICP_ELIMIT and
 * nothing queued: receive results, or let frames run, and submit again.
 * Short of that limit, frames submitted faster than they run wait their
 * turn, and their latency grows: a real-time caller bounds it by counting
 * its frames outstanding (submitted less received) and skipping a sensor
 * frame at its bound.  For the frames to come, the stream keeps up to four
 * copies of frames that have run (each up to 64 MiB) and four received
 * results' places, outside that count, and a tracked stream the matches
 * of its last frame and a buffer for the next's.  A frame may be given a
 * kept copy larger than itself, counted at its size in what the stream
 * holds; the frame's registration is held to the limit as the single
 * call's (hicp_context_options.memory_limit), whatever copy it was given.
 * A new copy has room for the largest frame so far where the limit
 * allows: once a stream has seen its largest frame, with up to four
 * frames outstanding, submitting and receiving allocate no memory on the
 * CPU backend (as hicp_context_destroy() says of registrations).  On a
 * GPU, each of the stream's device workers also allocates (host memory
 * too, through the CUDA driver) when it takes its first frame.
 * @return 0, ::HICP_EINVAL (a NULL argument, an initial transform that is
 *         not rigid), ::HICP_ENONFINITE, ::HICP_ERANGE, ::HICP_EEMPTY,
 *         ::HICP_ELIMIT, ::HICP_ENOMEM, ::HICP_ECANCELED (the stream was
 *         stopped: hicp_stream_stop()).
 */
HICP_API int hicp_stream_submit(hicp_stream *stream, const float *xyz, size_t n,
                                const hicp_transform *init, uint64_t *frame);

/**
 * hicp_stream_submit() for the points of a cloud, with its origin taken
 * into account (frames far from the origin, see hicp_cloud_read()): the
 * frame's result is the same bits as hicp_register_cloud() of it.  With
 * tracking, poses are absolute, so consecutive frames may have different
 * origins.  A cloud's points are packed: the stream's scan_stride must be
 * 0 (or 3 * sizeof(float)).
 * @return 0; ::HICP_EINVAL (NULL cloud, or another scan_stride), or
 *         hicp_stream_submit()'s codes.
 */
HICP_API int hicp_stream_submit_cloud(hicp_stream *stream, const hicp_cloud *cloud,
                                      const hicp_transform *init, uint64_t *frame);

/**
 * The result of the oldest frame not yet received, in submission order.
 * Several threads may receive at once: each result goes to one of them,
 * and a receiver whose frame another took waits for the next frame (or
 * returns ::HICP_EINVAL when none is outstanding).
 * @param wait 1: block until it is ready; 0: return ::HICP_EAGAIN if it is
 *        not ready yet.  ::HICP_EINVAL when nothing is outstanding.
 * @param result prepared with hicp_result_init(); its `frame` and `error`
 *        fields say which frame and whether it failed, and a failed frame's
 *        `note` says why.
 * @return 0 when a result was received (also for a failed frame),
 *         ::HICP_EAGAIN, ::HICP_ECANCELED (the stream was stopped:
 *         hicp_stream_stop(), or hicp_stream_destroy() on another thread
 *         while this call waited, and then the stream is gone once this
 *         returns), or ::HICP_EINVAL (a NULL argument, a result not
 *         prepared, nothing outstanding).  Receiving sets no message on the
 *         stream's context, which the submitter may be using on another
 *         thread.
 */
HICP_API int hicp_stream_receive(hicp_stream *stream, hicp_result *result, int wait);

/**
 * Stops the stream without freeing it; NULL is a no-op.  Frames not yet
 * started are dropped, a running one stops at its next iteration, and
 * from then on hicp_stream_submit() and hicp_stream_receive() return
 * ::HICP_ECANCELED, on any thread, including receivers waiting in
 * hicp_stream_receive() at the time.  Any thread may call it, at any time
 * before hicp_stream_destroy(), as often as it likes.  The way to end a
 * stream that other threads use: hicp_stream_stop(), let those threads see
 * ::HICP_ECANCELED and join them, then hicp_stream_destroy().
 */
HICP_API void hicp_stream_stop(hicp_stream *stream);

/**
 * Stops the stream (unreceived results are dropped) and frees it; NULL is a
 * no-op.  A receiver waiting in hicp_stream_receive() on another thread
 * returns ::HICP_ECANCELED, and the stream is freed once it has left.  No
 * other call on the stream may be under way or start once this one has:
 * a call that has only just begun cannot be told from one not yet made,
 * whose stream this frees under it.  A program whose other threads call
 * on the stream (a receiver that loops, a submitter) stops it with
 * hicp_stream_stop() and joins them first.
 */
HICP_API void hicp_stream_destroy(hicp_stream *stream);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* HICP_H */
