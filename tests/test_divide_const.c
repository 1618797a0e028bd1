/*
 * test_divide_const.c: a float division by a constant power of two within the normal range
 * (an attention's scale of 1/8) is emitted as a product by its exact reciprocal, and gives IEEE
 * division's result bit for bit: signed zeros, infinities, NaN, the largest finite value,
 * normal and subnormal results, the quotients of random values. Divisors that are no such
 * power (3, 2^127, whose reciprocal is subnormal) stay divisions. The PTX is checked for the
 * h100 model; the values on the host target, whose kernels are the same.
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

enum { N = 1024 };

/* x [N] f32 / c: its only output. */
static astitch_graph *divide(astitch_context *ctx, double c)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t n = N;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 1, &n);
    astitch_node k = astitch_constant(g, ASTITCH_F32, 0, NULL, &c, 1);
    astitch_node q = astitch_binary(g, ASTITCH_OP_DIV, x, astitch_broadcast_in_dim(g, k, 1, &n, NULL));
    assert_int_equal(astitch_add_output(g, q), ASTITCH_OK);
    assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
    return g;
}

/* Whether the PTX of g for the h100 model has a float division (div.<anything>.f32; an
 * integer division of the index arithmetic does not count). */
static bool ptx_divides(astitch_graph *g)
{
    char *ptx = test_emit_ptx(g);
    bool divides = false;
    for (const char *p = ptx; !divides && (p = strstr(p, "div.")) != NULL; p += 4) {
        size_t len = strcspn(p, " \t\n");
        divides = len >= 8 && strncmp(p + len - 4, ".f32", 4) == 0;
    }
    astitch_free(ptx);
    return divides;
}

static uint32_t bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    return u;
}

/* Runs g on the host target over special values and fresh random ones; each quotient must be
 * x / c in IEEE f32, bit for bit (any NaN for a NaN). */
static void check_values(astitch_graph *g, float c, uint64_t seed)
{
    static const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MAX, -FLT_MAX,
                                    FLT_MIN, -FLT_MIN, 0x1p-149f, -0x1p-149f, 0x1.8p-130f,
                                    1.0f, -1.0f, 3.0f, 0x1.fffffep+127f, 0x1p-126f, 12345.678f};
    float *x = malloc(N * sizeof *x), *q = malloc(N * sizeof *q);
    assert_non_null(x);
    assert_non_null(q);
    uint64_t s = seed;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t u = (uint32_t)(s >> 32); /* any bit pattern: every exponent, NaNs too */
        memcpy(&x[i], &u, 4);
    }
    memcpy(x, special, sizeof special);
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_HOST;
    astitch_executable *e = NULL;
    if (astitch_compile(g, &o, &e) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(astitch_graph_context(g)));
    const void *in[1] = {x};
    void *out[1] = {q};
    assert_int_equal(astitch_execute(e, in, out), ASTITCH_OK);
    astitch_executable_destroy(e);
    for (int i = 0; i < N; i++) {
        volatile float want = x[i] / c; /* volatile: one IEEE division, as written */
        if (isnan(want) ? !isnan(q[i]) : bits(q[i]) != bits(want))
            fail_msg("%a / %a (seed %llu, element %d): %a, IEEE gives %a", (double)x[i],
                     (double)c, (unsigned long long)seed, i, (double)q[i], (double)want);
    }
    free(x);
    free(q);
}

static void test_divisors(void **state)
{
    (void)state;
    static const struct {
        float c;
        bool product; /* a power of two within the normal range: no division left */
    } cases[] = {{8.0f, true}, {0.125f, true}, {-4.0f, true}, {1.0f, true}, {0x1p-126f, true},
                 {0x1p126f, true}, {-0x1p100f, true}, {3.0f, false}, {0x1p127f, false},
                 {0x1p-127f, false}, {0.1f, false}};
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    uint64_t seed = diff_fresh_seed();
    printf("seed %llu\n", (unsigned long long)seed);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        astitch_graph *g = divide(ctx, cases[i].c);
        if (ptx_divides(g) == cases[i].product)
            fail_msg("x / %a: %s division in the PTX", (double)cases[i].c,
                     cases[i].product ? "a" : "no");
        check_values(g, cases[i].c, seed + i);
        astitch_graph_destroy(g);
    }
    astitch_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_divisors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
