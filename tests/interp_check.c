/*
 * interp_check.c: helpers of the reference-interpreter tests: random inputs, f16/bf16 values
 * and rounding computed without the library, integer wrap-around, small-graph fixtures and
 * comparisons that name the failing element.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp_check.h"

/* ---- random numbers (splitmix64) ---------------------------------------------------------- */

uint64_t rng;

uint64_t next64(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15u);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

double uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(next64() >> 11) * 0x1p-53;
}

/* Uniform in [lo, hi] (inclusive). */
int64_t rand_int(int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1;
    return (int64_t)((uint64_t)lo + (span ? next64() % span : next64()));
}

/* A float in [lo, hi]; a quarter of them are multiples of 0.5 (ties for round). */
float rand_float(double lo, double hi)
{
    if (next64() % 4 == 0)
        return (float)(floor(uniform(lo, hi) * 2) / 2);
    return (float)uniform(lo, hi);
}

float *rand_floats(int64_t n, double lo, double hi)
{
    float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
    for (int64_t k = 0; k < n; k++)
        p[k] = rand_float(lo, hi);
    return p;
}

/* ---- f16 / bf16, independently of the library --------------------------------------------- */

double f16_value(uint16_t h)
{
    int e = h >> 10 & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(m + 1024, e - 25);
    return h & 0x8000 ? -v : v;
}

double bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The nearest 16-bit pattern to v (ties to the even pattern) among those of the format whose
 * positive finite patterns run from 0 to maxfinite, found by binary search over the values. */
static uint16_t nearest16(double v, double (*value)(uint16_t), uint16_t maxfinite)
{
    if (isnan(v))
        return 0x7fff;
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double a = fabs(v);
    uint16_t lo = 0, hi = maxfinite; /* value(lo) <= a, find the last such pattern */
    if (a >= value(maxfinite)) {
        lo = maxfinite;
    } else {
        while (hi - lo > 1) {
            uint16_t mid = (uint16_t)((lo + hi) / 2);
            if (value(mid) <= a)
                lo = mid;
            else
                hi = mid;
        }
    }
    double below = value(lo);
    /* the value one step above maxfinite is where rounding overflows to infinity */
    double above = lo == maxfinite ? 2 * value(maxfinite) - value((uint16_t)(maxfinite - 1))
                                   : value((uint16_t)(lo + 1));
    uint16_t pick = lo;
    if (a - below > above - a || (a - below == above - a && (lo & 1)))
        pick = (uint16_t)(lo + 1);
    return (uint16_t)(sign | pick); /* maxfinite + 1 is the infinity pattern in both formats */
}

uint16_t to_f16(double v) { return nearest16(v, f16_value, 0x7bff); }
uint16_t to_bf16(double v) { return nearest16(v, bf16_value, 0x7f7f); }

/* Random finite 16-bit patterns with magnitudes in [2^-4, 2^4). */
uint16_t rand_f16(void)
{
    return (uint16_t)((next64() & 1) << 15 | (uint64_t)rand_int(11, 18) << 10 | (next64() & 1023));
}

uint16_t rand_bf16(void)
{
    return (uint16_t)((next64() & 1) << 15 | (uint64_t)rand_int(123, 130) << 7 | (next64() & 127));
}

/* Position of a pattern on the number line, so adjacent values differ by 1. */
static int32_t order16(uint16_t h) { return h & 0x8000 ? -(int32_t)(h & 0x7fff) : h; }

/* ---- integers ------------------------------------------------------------------------------ */

int64_t wrap(astitch_dtype t, i128 x)
{
    i128 m = (i128)1 << (t == ASTITCH_I32 ? 32 : 64);
    i128 r = x % m;
    if (r < 0)
        r += m;
    if (r >= m / 2)
        r -= m;
    return (int64_t)r;
}

void put_int(astitch_dtype t, void *buf, int64_t k, int64_t v)
{
    if (t == ASTITCH_I32)
        ((int32_t *)buf)[k] = (int32_t)v;
    else if (t == ASTITCH_I64)
        ((int64_t *)buf)[k] = v;
    else
        ((uint8_t *)buf)[k] = (uint8_t)v;
}

int64_t get_int(astitch_dtype t, const void *buf, int64_t k)
{
    if (t == ASTITCH_I32)
        return ((const int32_t *)buf)[k];
    if (t == ASTITCH_I64)
        return ((const int64_t *)buf)[k];
    return ((const uint8_t *)buf)[k];
}

/* A random value of t: full range, small, or an edge value. */
int64_t rand_of(astitch_dtype t)
{
    int64_t lo = t == ASTITCH_I32 ? INT32_MIN : INT64_MIN;
    int64_t hi = t == ASTITCH_I32 ? INT32_MAX : INT64_MAX;
    const int64_t edge[] = {0, 1, -1, lo, hi, lo + 1, hi - 1};
    switch (next64() % 3) {
    case 0: return rand_int(lo, hi);
    case 1: return rand_int(-20, 20);
    default: return edge[next64() % 7];
    }
}

/* ---- graphs -------------------------------------------------------------------------------- */

void fx_open(Fx *f)
{
    memset(f, 0, sizeof *f);
    assert_int_equal(astitch_context_create(&f->ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(f->ctx, &f->g), ASTITCH_OK);
}

void fx_close(Fx *f)
{
    astitch_graph_destroy(f->g);
    astitch_context_destroy(f->ctx);
}

astitch_node param(Fx *f, astitch_dtype t, int rank, const int64_t *dims)
{
    char name[16];
    snprintf(name, sizeof name, "p%d", f->nparam++);
    astitch_node n = astitch_parameter(f->g, name, t, rank, dims);
    if (n < 0)
        fail_msg("parameter: %s", astitch_last_error(f->ctx));
    return n;
}

/* Marks n as the next output after checking the builder calls that made it. */
void output(Fx *f, astitch_node n)
{
    if (n < 0 || astitch_add_output(f->g, n) != ASTITCH_OK)
        fail_msg("building the graph failed: %s", astitch_last_error(f->ctx));
}

void run(Fx *f, const void *const *in, void *const *out)
{
    astitch_status s = astitch_run_reference(f->g, in, out);
    if (s != ASTITCH_OK)
        fail_msg("run failed (%s): %s", astitch_status_name(s), astitch_last_error(f->ctx));
}

void assert_error_contains(Fx *f, const char *needle)
{
    const char *msg = astitch_last_error(f->ctx);
    if (!strstr(msg, needle))
        fail_msg("error '%s' does not contain '%s'", msg, needle);
}

/* Fails unless got is want rounded to float: exactly (rel 0, sign of zero included) or within
 * rel relative error; NaN matches NaN. */
void expect_f32(const char *what, int64_t n, const float *got, const double *want,
                       double rel)
{
    for (int64_t k = 0; k < n; k++) {
        float w = (float)want[k];
        bool ok = isnan(w) ? isnan(got[k])
                  : rel == 0 || isinf(w) ? got[k] == w && signbit(got[k]) == signbit(w)
                                         : fabs((double)got[k] - w) <= rel * fabs(w);
        if (!ok)
            fail_msg("%s: element %lld: got %.9g, want %.9g", what, (long long)k, got[k], w);
    }
}

/* Fails unless got is within max_steps representable values of want (NaN matches NaN). */
void expect_16(const char *what, int64_t n, const uint16_t *got, const uint16_t *want,
                      int max_steps, bool bf)
{
    double (*value)(uint16_t) = bf ? bf16_value : f16_value;
    for (int64_t k = 0; k < n; k++) {
        bool ok = isnan(value(want[k])) ? isnan(value(got[k]))
                                        : abs(order16(got[k]) - order16(want[k])) <= max_steps;
        if (!ok)
            fail_msg("%s: element %lld: got 0x%04x (%.9g), want 0x%04x (%.9g)", what,
                     (long long)k, got[k], value(got[k]), want[k], value(want[k]));
    }
}

void expect_ints(const char *what, int64_t n, astitch_dtype t, const void *got,
                        const int64_t *want)
{
    for (int64_t k = 0; k < n; k++)
        if (get_int(t, got, k) != want[k])
            fail_msg("%s: element %lld: got %lld, want %lld", what, (long long)k,
                     (long long)get_int(t, got, k), (long long)want[k]);
}
