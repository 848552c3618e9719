/* tap.h: what the plain TAP test programs share (test_threads, test_alloc:
 * programs without Criterion, which cannot start under ThreadSanitizer or
 * would count Criterion's own allocations). */
#ifndef HICP_TESTS_TAP_H
#define HICP_TESTS_TAP_H

#include <stddef.h>
#include <stdint.h>

/* Prints "ok N - name" or "not ok N - name: why" and counts it. */
void tap_report(int ok, const char *name, const char *why);

/* The tests that failed so far. */
int tap_failed(void);

/* A bumpy closed surface, n points, about 2 units across (malloc'd;
 * aborts when out of memory). */
float *tap_surface(size_t n, uint64_t seed);

#endif
