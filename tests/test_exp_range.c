/*
 * test_exp_range.c: f32 exp over its whole range on a target, against exp in double: within
 * 2 + 1.2 |x| ulp of the result and one denormal spacing (docs/codegen.md, the arithmetic), so
 * results below 2^-126 must stay denormal rather than flush to zero; exp(-inf) = +0,
 * exp(+inf) = +inf, NaN through, +inf past ln(FLT_MAX) (and within a few ulp below it). Also
 * that the PTX for the h100 model computes the denormal results itself around the flushing
 * ex2.approx.ftz.f32 (the form the JIT compiles fastest), with no ex2.approx.f32 left.
 *
 * Usage: test_exp_range [host|cuda] (default host, whose exp is the C library's; the gpu suite
 * runs cuda and it exits 77, a skip, without a usable device). Inputs: a grid over [-110, 90]
 * dense across the denormal results, special values, and fresh random values each run.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "astitch/runtime.h"
#include "diff_check.h"
#include "test_target.h"

enum { N = 8192 };

static astitch_target target = ASTITCH_TARGET_HOST;

/* y = exp(x), x [N] f32: its only output. */
static astitch_graph *exp_graph(astitch_context *ctx)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t n = N;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 1, &n);
    assert_int_equal(astitch_add_output(g, astitch_unary(g, ASTITCH_OP_EXP, x)), ASTITCH_OK);
    assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
    return g;
}

/* The inputs: special values first, then 2048 steps over [-110, 90], 2048 more over [-104,
 * -87] (the denormal results), then random values over [-120, 100] from seed. */
static void fill_inputs(float *x, uint64_t seed)
{
    static const float special[] = {0.0f,     -0.0f,     INFINITY,  -INFINITY, NAN,
                                    0x1p-149f, -0x1p-149f, FLT_MIN,  88.72283f, 88.7228f,
                                    88.5f,    89.0f,     -87.33654f, -87.3365f, -103.2789f,
                                    -103.9720f, -104.0f, -150.0f,   -FLT_MAX,  FLT_MAX};
    int n = 0;
    for (size_t i = 0; i < sizeof special / sizeof *special; i++)
        x[n++] = special[i];
    for (int i = 0; i < 2048; i++)
        x[n++] = -110.0f + 200.0f * (float)i / 2048.0f;
    for (int i = 0; i < 2048; i++)
        x[n++] = -104.0f + 17.0f * (float)i / 2048.0f;
    uint64_t s = seed;
    while (n < N) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[n++] = -120.0f + 220.0f * (float)((s >> 40) & 0xffffff) / 16777216.0f;
    }
}

/* Whether y is within the documented bound of exp(x); explains in why when not. */
static bool exp_ok(float x, float y, char *why, size_t len)
{
    double want = exp((double)x);
    if (isnan(x)) {
        snprintf(why, len, "NaN in, %a out", (double)y);
        return isnan(y);
    }
    if (want > (double)FLT_MAX) {
        snprintf(why, len, "overflows, %a out", (double)y);
        return isinf(y) && y > 0;
    }
    if (isinf(x)) { /* -inf: +0 */
        snprintf(why, len, "exp(-inf) is +0, %a out", (double)y);
        return y == 0 && !signbit(y);
    }
    if (isinf(y) && y > 0 && x > 88.72f) /* within a few ulp below ln(FLT_MAX) */
        return true;
    if (!(y >= 0) || isinf(y)) {
        snprintf(why, len, "%a out, exp is %a", (double)y, want);
        return false;
    }
    double bound = (2.0 + 1.2 * fabs((double)x)) * want * 0x1p-23 + 0x1p-149;
    snprintf(why, len, "%a out, exp is %a: off by %.3g, bound %.3g", (double)y, want,
             fabs((double)y - want), bound);
    return fabs((double)y - want) <= bound;
}

static void test_exp_range(void **state)
{
    (void)state;
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = exp_graph(ctx);

    char *ptx = test_emit_ptx(g);
    bool ftz = strstr(ptx, "ex2.approx.ftz.f32") != NULL;
    bool plain = strstr(ptx, "ex2.approx.f32") != NULL;
    astitch_free(ptx);
    if (!ftz || plain)
        fail_msg("PTX: ex2.approx.ftz.f32 %s, ex2.approx.f32 %s", ftz ? "present" : "missing",
                 plain ? "present" : "absent");

    uint64_t seed = diff_fresh_seed();
    printf("target %s, seed %llu\n", target == ASTITCH_TARGET_CUDA ? "cuda" : "host",
           (unsigned long long)seed);
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    fill_inputs(x, seed);
    for (int i = 0; i < N; i++)
        y[i] = NAN;
    test_run_on(g, target, (const void *[]){x}, (void *[]){y});
    int bad = 0, denormal = 0;
    for (int i = 0; i < N; i++) {
        char why[160];
        denormal += y[i] > 0 && y[i] < FLT_MIN;
        if (!exp_ok(x[i], y[i], why, sizeof why) && bad++ < 8)
            printf("exp(%a) (element %d): %s\n", (double)x[i], i, why);
    }
    printf("%d of %d outside the bound; %d denormal results\n", bad, N, denormal);
    free(x);
    free(y);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
    assert_int_equal(bad, 0);
    assert_true(denormal > 1000); /* the grid's dense part lands there */
}

int main(int argc, char **argv)
{
    int status = test_target_from_args(argc, argv, "test_exp_range", &target);
    if (status >= 0)
        return status;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
