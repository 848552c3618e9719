/* synth.h: making test scans from a model: surface resampling, the part
 * visible from a camera, noise.  Used by `hicp perturb`, the tests and the
 * benchmarks (compiled into each). */
#ifndef HICP_SYNTH_H
#define HICP_SYNTH_H

#include <stddef.h>
#include <stdint.h>

typedef struct synth_rng {
  uint64_t s[4];
} synth_rng;

void synth_seed(synth_rng *r, uint64_t seed);
uint64_t synth_next(synth_rng *r);
double synth_uniform(synth_rng *r); /* [0, 1) */
double synth_normal(synth_rng *r);  /* N(0, 1) */

/* Rotation (row-major) from roll, pitch, yaw in degrees: Rz(yaw) Ry(pitch) Rx(roll). */
void synth_rotation(double roll, double pitch, double yaw, double r[9]);

/* `count` points sampled uniformly by area on the triangles of a mesh whose
 * vertices are origin + xyz; out receives 3 * count doubles, face by face
 * in the mesh's order of faces.  Returns 0,
 * -1 when the mesh has no triangle of positive area, or -2 when memory ran
 * short. */
int synth_sample_mesh(const float *xyz, size_t nv, const double origin[3], const uint32_t *tri,
                      size_t ntri, size_t count, synth_rng *r, double *out);

/* Marks the points visible from a distant camera in direction `toward`
 * (from the object towards the camera): an orthographic depth buffer over a
 * grid about two points per occupied cell wide; a point is kept when it lies
 * within one cell size of the nearest depth in its cell.  Returns the number
 * kept (keep[i] is set to 0 or 1), or SIZE_MAX when memory ran short. */
size_t synth_visible(const double *p, size_t n, const double toward[3], unsigned char *keep);

#endif /* HICP_SYNTH_H */
