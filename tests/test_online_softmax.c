/*
 * test_online_softmax.c: a streamed row's max and its sum of exp(x - max) taken in one walk
 * (plan_online_pair, lib/codegen/emit_online.c). The plan says so where it applies (long rows
 * of a log-sum-exp, f32 and bf16, several warps per row; columns, down a leading axis with
 * several lanes a column and over a middle axis of 19 classes) and not where it does not (the option
 * off, a sum of exp(x - max) of another x); on the host target, which runs the same kernels,
 * the log-sum-exp and the sum match the reference on rows of special values: all -inf (NaN),
 * -inf first then finite, a NaN, a +inf (NaN), values near the f32 exponent's top, and on
 * fresh random inputs.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "astitch/plan.h"
#include "astitch/runtime.h"
#include "diff_check.h"
#include "graph_fixture.h"

/* How the sum reads x: as the max does (an online pair), or another tensor's values. */
typedef enum Form { FORM_PAIR, FORM_OTHER_X } Form;

/* lse = log(sum(exp(x - max))) + max over axis `axis` of x [dims] (f32 values of xt), outputs
 * lse and sum. */
static void build(astitch_graph *g, int rank, const int64_t *dims, int64_t axis,
                  astitch_dtype xt, Form form)
{
    int64_t bd[8];
    int nk = 0;
    for (int i = 0; i < rank; i++)
        if (i != axis)
            bd[nk++] = i;
    astitch_node x = astitch_parameter(g, "x", xt, rank, dims);
    astitch_node xf = named(g, astitch_convert(g, x, ASTITCH_F32), "xf");
    astitch_node max = named(g, astitch_reduce(g, ASTITCH_REDUCE_MAX, xf, 1, &axis), "max");
    astitch_node mb = named(g, astitch_broadcast_in_dim(g, max, rank, dims, bd), "max.b");
    astitch_node y = xf;
    if (form == FORM_OTHER_X)
        y = named(g, astitch_unary(g, ASTITCH_OP_NEG, xf), "other");
    astitch_node ex = named(g, astitch_unary(g, ASTITCH_OP_EXP, astitch_binary(g, ASTITCH_OP_SUB, y, mb)), "exp");
    astitch_node sum = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, ex, 1, &axis), "sum");
    astitch_node lse = named(g, astitch_binary(g, ASTITCH_OP_ADD, astitch_unary(g, ASTITCH_OP_LOG, sum), max), "lse");
    assert_int_equal(astitch_add_output(g, lse), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, sum), ASTITCH_OK);
}

/* Whether g's plan (stitch, H100, online_softmax as given) takes a pair in one walk. */
static bool online(astitch_graph *g, bool on)
{
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    o.online_softmax = on;
    return graph_plan_has(g, &o, "in one walk (online softmax)");
}

static uint16_t bf16_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    return (uint16_t)((u + 0x7fff + (u >> 16 & 1)) >> 16);
}

/* The value at row r, element c of a row of n: the special rows first, then a ramp. */
static float value(int64_t r, int64_t c, int64_t n)
{
    switch (r) {
    case 0: return -INFINITY;                            /* all -inf: sum NaN */
    case 1: return c == 0 ? -INFINITY : (float)(c % 13) / 4.0f; /* -inf first */
    case 2: return c == n / 2 ? __builtin_nanf("") : 1.0f;      /* a NaN */
    case 3: return c == n - 3 ? INFINITY : 0.5f;                /* +inf: NaN */
    case 4: return 80.0f + (float)(c % 97) / 8.0f;              /* exp(x) alone would overflow */
    case 5: return c == n - 1 ? -INFINITY : -60.0f - (float)(c % 7); /* -inf last */
    case 6: return (float)c * 0.01f;                            /* the max grows all along */
    default: return (float)((r * 31 + c * 17) % 101) / 16.0f - 3.0f;
    }
}

/* Runs g (x [rows, n] as laid out, the reduced axis given by the element's place) on target t
 * (the host with the h100 model's plan) with value(); writes lse and sum per row. */
static void run(astitch_graph *g, astitch_target t, bool on, int64_t rows, int64_t n,
                const int64_t *dims, int64_t axis, astitch_dtype xt, float *lse, float *sum)
{
    int64_t total = rows * n, inner = 1;
    for (int i = (int)axis + 1; i < 3 && dims[i]; i++)
        inner *= dims[i];
    size_t xb = xt == ASTITCH_F32 ? 4 : 2;
    unsigned char *x = malloc((size_t)total * xb);
    assert_non_null(x);
    for (int64_t i = 0; i < total; i++) {
        /* element i: its reduced index c and its row r (the kept axes, in order) */
        int64_t c = i / inner % n, r = i / (inner * n) * inner + i % inner;
        float v = value(r, c, n);
        if (xt == ASTITCH_F32) {
            memcpy(x + 4 * i, &v, 4);
        } else {
            uint16_t b = bf16_bits(v);
            memcpy(x + 2 * i, &b, 2);
        }
    }
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = t;
    o.plan.online_softmax = on;
    astitch_device model; /* the host target runs the plan the GPU would (the h100 model's) */
    assert_int_equal(astitch_device_builtin("h100", &model), ASTITCH_OK);
    if (t == ASTITCH_TARGET_HOST)
        o.device = &model;
    astitch_executable *e = NULL;
    if (astitch_compile(g, &o, &e) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(astitch_graph_context(g)));
    const void *in[1] = {x};
    void *outs[2] = {lse, sum};
    assert_int_equal(astitch_execute(e, in, outs), ASTITCH_OK);
    astitch_executable_destroy(e);
    free(x);
}

/* a and b alike: both NaN, or within rel of each other (equal infinities). */
static bool close_to(float a, float b, double rel)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    if (isinf(a) || isinf(b))
        return a == b;
    return fabs((double)a - (double)b) <= rel * fmax(fabs((double)b), 1e-30);
}

/* The pair on the host target (and with the option off) against the reference, row by row. */
static void check_rows(int rank, const int64_t *dims, int64_t axis, astitch_dtype xt)
{
    astitch_context *ctx;
    astitch_graph *g;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    build(g, rank, dims, axis, xt, FORM_PAIR);
    assert_true(online(g, true));
    assert_false(online(g, false));
    int64_t n = dims[axis], rows = 1, d3[3] = {0, 0, 0};
    for (int i = 0; i < rank; i++) {
        d3[i] = dims[i];
        rows *= i == axis ? 1 : dims[i];
    }
    float *ref = malloc((size_t)rows * 8), *got = malloc((size_t)rows * 8);
    float *off = malloc((size_t)rows * 8);
    assert_true(ref && got && off);
    run(g, ASTITCH_TARGET_REFERENCE, true, rows, n, d3, axis, xt, ref, ref + rows);
    run(g, ASTITCH_TARGET_HOST, true, rows, n, d3, axis, xt, got, got + rows);
    run(g, ASTITCH_TARGET_HOST, false, rows, n, d3, axis, xt, off, off + rows);
    for (int64_t i = 0; i < 2 * rows; i++) {
        const char *what = i < rows ? "lse" : "sum";
        int64_t r = i % rows;
        if (!close_to(got[i], ref[i], 1e-5))
            fail_msg("%s of row %lld: online %a, reference %a", what, (long long)r,
                     (double)got[i], (double)ref[i]);
        if (!close_to(off[i], ref[i], 1e-5))
            fail_msg("%s of row %lld: two walks %a, reference %a", what, (long long)r,
                     (double)off[i], (double)ref[i]);
    }
    /* the special rows as the reference has them */
    assert_true(isnan(ref[0]) && isnan(ref[rows]));   /* all -inf */
    assert_true(isfinite(ref[1]) && isfinite(ref[4])); /* -inf first; near the top */
    assert_true(isnan(ref[2]) && isnan(ref[3]));       /* a NaN; a +inf */
    free(ref);
    free(got);
    free(off);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

/* Rows of 16384 f32, more rows than a wave has blocks: streamed, a block per row. */
static void test_long_rows_f32(void **state)
{
    (void)state;
    const int64_t dims[2] = {264, 16384};
    check_rows(2, dims, 1, ASTITCH_F32);
}

/* bf16 logits converted to f32, as a language model's loss has them, rows of 20000 (not a
 * multiple of the lanes' runs). */
static void test_long_rows_bf16(void **state)
{
    (void)state;
    const int64_t dims[2] = {200, 20000};
    check_rows(2, dims, 1, ASTITCH_BF16);
}

/* A column log-sum-exp down 100 rows of 20000 columns (torch.logsumexp(x, 0)): single columns
 * (not runs), several lanes down each, their pairs combined through shared memory. */
static void test_columns(void **state)
{
    (void)state;
    const int64_t dims[2] = {100, 20000};
    check_rows(2, dims, 0, ASTITCH_F32);
}

/* Over the 19 classes of NCHW segmentation logits, [6, 19, 500]: a thread a column. */
static void test_middle_axis(void **state)
{
    (void)state;
    const int64_t dims[3] = {6, 19, 500};
    check_rows(3, dims, 1, ASTITCH_BF16);
}

/* A sum of exp(y - max) where y is not max's own operand: two walks. */
static void test_other_operand(void **state)
{
    Fixture *f = *state;
    const int64_t dims[2] = {264, 16384}; /* the shape of test_long_rows_f32's pair */
    build(f->g, 2, dims, 1, ASTITCH_F32, FORM_OTHER_X);
    assert_false(online(f->g, true));
}

/* Fresh random inputs through the online form against the reference. */
static void test_random_inputs(void **state)
{
    Fixture *f = *state;
    const int64_t dims[2] = {300, 10000};
    build(f->g, 2, dims, 1, ASTITCH_BF16, FORM_PAIR);
    assert_true(online(f->g, true));
    check_host_values(f->g);
    check_h100_values(f->g, "rows");
}

/* The same down columns, in the h100 model's plan. */
static void test_random_columns(void **state)
{
    Fixture *f = *state;
    const int64_t dims[2] = {100, 20000};
    build(f->g, 2, dims, 0, ASTITCH_F32, FORM_PAIR);
    assert_true(online(f->g, true));
    check_h100_values(f->g, "columns");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_long_rows_f32),
        cmocka_unit_test(test_long_rows_bf16),
        cmocka_unit_test(test_columns),
        cmocka_unit_test(test_middle_axis),
        cmocka_unit_test_setup_teardown(test_other_operand, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_random_inputs, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_random_columns, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
