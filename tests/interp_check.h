/*
 * interp_check.h: what the reference-interpreter tests share (interp_check.c).
 *
 * Expected values never come from the library: f16/bf16 are decoded here and rounded by a
 * search over the representable values, integer wrap-around is computed in 128 bits, and each
 * test computes its op with its own loops.
 */
#ifndef INTERP_CHECK_H
#define INTERP_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "astitch/astitch.h"

__extension__ typedef __int128 i128;

/* random numbers (splitmix64); rng is the state, seeded by main */
extern uint64_t rng;
uint64_t next64(void);
double uniform(double lo, double hi);
int64_t rand_int(int64_t lo, int64_t hi); /* inclusive */
/* A float in [lo, hi]; a quarter of them are multiples of 0.5 (ties for round). */
float rand_float(double lo, double hi);
float *rand_floats(int64_t n, double lo, double hi); /* malloc'd */

/* f16 and bf16 */
double f16_value(uint16_t h);
double bf16_value(uint16_t h);
uint16_t to_f16(double v); /* nearest, ties to even, overflow to infinity */
uint16_t to_bf16(double v);
uint16_t rand_f16(void); /* finite, magnitude in [2^-4, 2^4) */
uint16_t rand_bf16(void);

/* integers */
int64_t wrap(astitch_dtype t, i128 x); /* x modulo the width of i32 or i64 */
void put_int(astitch_dtype t, void *buf, int64_t k, int64_t v);
int64_t get_int(astitch_dtype t, const void *buf, int64_t k);
int64_t rand_of(astitch_dtype t); /* full range, small, or an edge value */

/* graphs */
typedef struct Fx {
    astitch_context *ctx;
    astitch_graph *g;
    int nparam;
} Fx;
void fx_open(Fx *f);
void fx_close(Fx *f);
astitch_node param(Fx *f, astitch_dtype t, int rank, const int64_t *dims); /* named p0, p1, ... */
void output(Fx *f, astitch_node n); /* fails the test if building n failed */
void run(Fx *f, const void *const *in, void *const *out); /* fails unless ASTITCH_OK */
void assert_error_contains(Fx *f, const char *needle);

/* comparisons */
/* got must be want rounded to float: exactly (rel 0, sign of zero included) or within rel. */
void expect_f32(const char *what, int64_t n, const float *got, const double *want, double rel);
/* got must be within max_steps representable values of want; NaN matches NaN. */
void expect_16(const char *what, int64_t n, const uint16_t *got, const uint16_t *want,
               int max_steps, bool bf);
void expect_ints(const char *what, int64_t n, astitch_dtype t, const void *got,
                 const int64_t *want);

/* the test lists of test_interp_elem.c and test_interp_shape.c */
extern const struct CMUnitTest interp_elem_tests[];
extern const size_t interp_elem_ntests;
extern const struct CMUnitTest interp_shape_tests[];
extern const size_t interp_shape_ntests;

#endif
