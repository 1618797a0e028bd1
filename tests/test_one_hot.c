/*
 * test_one_hot.c: a sum of a one-hot selection over the class axis (nll_loss's target logit,
 * lib/passes/one_hot.c) is planned as a gather of one element per row, and gives the sum's
 * values bit for bit: targets in range and out of it (-1, the class count, far past it), a -0
 * at the target (the sum makes it +0), a NaN off the target (never read) and at it, f32 and
 * bf16 logits, i32 and i64 targets, rank 2 and 3, the classes along the last axis, the first
 * (a contrastive loss's column cross-entropy) or a middle one (NCHW segmentation logits). Near
 * misses are planned as written, and so is a sum of a value made from a reduction (a
 * log-softmax's), whose rows are walked anyway.
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

enum { CLASSES = 37 };

/* How the one-hot sum is built: the usual form, or one near miss. */
typedef enum Form {
    FORM_USUAL,
    FORM_SWAPPED,        /* eq(broadcast(t), iota): still a one-hot sum */
    FORM_MINUS_ZERO,     /* select(..., x, -0): not rewritten */
    FORM_IOTA_OTHER,     /* iota along another axis than the sum's: not rewritten */
    FORM_SUM_OTHER_AXIS, /* the sum over another axis than the class axis: not rewritten */
    FORM_AFTER_REDUCE,   /* select(..., x - max(x), 0), a value made from a reduction: not
                          * rewritten, so that the max stays regional (no grid barrier) */
} Form;

/* picked = sum over class axis ca of select(iota == t, x, 0): x of dtype xt, the dims lead with
 * CLASSES inserted at axis ca, t [lead...] of dtype tt; returns picked (an output, as is `max`
 * over x, another reader of x). */
static void build(astitch_graph *g, int lead_rank, const int64_t *lead, int ca, astitch_dtype xt,
                  astitch_dtype tt, Form form)
{
    int rank = lead_rank + 1, other = ca == 0 ? rank - 1 : 0;
    int64_t s[8], bd[8], red = form == FORM_SUM_OTHER_AXIS ? other : ca;
    for (int i = 0; i < lead_rank; i++) {
        bd[i] = i < ca ? i : i + 1;
        s[bd[i]] = lead[i];
    }
    s[ca] = CLASSES;
    astitch_node x = astitch_parameter(g, "x", xt, rank, s);
    astitch_node t = astitch_parameter(g, "t", tt, lead_rank, lead);
    astitch_node xf = named(g, astitch_convert(g, x, ASTITCH_F32), "xf");
    astitch_node cls = named(g, astitch_iota(g, tt, rank, s, form == FORM_IOTA_OTHER ? other : ca),
                             "class");
    astitch_node tb = named(g, astitch_broadcast_in_dim(g, t, rank, s, bd), "t.b");
    astitch_node hit = named(g, form == FORM_SWAPPED ? astitch_binary(g, ASTITCH_OP_EQ, tb, cls)
                                                     : astitch_binary(g, ASTITCH_OP_EQ, cls, tb),
                             "hit");
    double z = form == FORM_MINUS_ZERO ? -0.0 : 0.0;
    astitch_node zero = astitch_constant(g, ASTITCH_F32, 0, NULL, &z, 1);
    astitch_node zb = named(g, astitch_broadcast_in_dim(g, zero, rank, s, NULL), "zero.b");
    int64_t class_axis = ca;
    astitch_node max = named(g, astitch_reduce(g, ASTITCH_REDUCE_MAX, xf, 1, &class_axis), "max");
    astitch_node xs = xf;
    if (form == FORM_AFTER_REDUCE)
        xs = named(g, astitch_binary(g, ASTITCH_OP_SUB, xf,
                                     astitch_broadcast_in_dim(g, max, lead_rank ? rank : 1, s, bd)),
                   "shifted");
    astitch_node sel = named(g, astitch_select(g, hit, xs, zb), "target_logit");
    astitch_node picked = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, sel, 1, &red), "picked");
    assert_int_equal(astitch_add_output(g, picked), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, max), ASTITCH_OK);
}

/* Whether the plan of g (stitch, H100) names `picked` as rewritten to a gather. */
static bool gathered(astitch_graph *g)
{
    return graph_plan_has(g, NULL, "rewritten (a one-hot sum as a gather, one element per row): picked");
}

static uint16_t bf16_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    return (uint16_t)(u >> 16); /* the test's values are exact in bf16 */
}

/* Runs g on target t with logits holding row r's class c at (r * 7 + c) / 8 - 2 (exact in
 * bf16), the given targets, and the special values of the head; writes `picked` to out. Row r
 * is (outer, inner) = (r / inner, r % inner) of logits [outer, CLASSES, inner]. */
static void run(astitch_graph *g, astitch_target t, int64_t rows, int64_t inner, astitch_dtype xt,
                astitch_dtype tt, const int64_t *targets, float *out, float *max)
{
    size_t xb = xt == ASTITCH_F32 ? 4 : 2;
    unsigned char *x = malloc((size_t)(rows * CLASSES) * xb);
    void *tv = malloc((size_t)rows * 8);
    assert_non_null(x);
    assert_non_null(tv);
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < CLASSES; c++) {
            float v = (float)((r * 7 + c) % 29) / 8.0f - 2.0f;
            if (r == 0 && c == 3)
                v = -0.0f; /* target of row 0: the sum gives +0 */
            if (r == 1 && c == 5)
                v = __builtin_nanf(""); /* off row 1's target: never read */
            if (r == 2 && c == CLASSES - 1)
                v = __builtin_nanf(""); /* row 2's target */
            size_t i = (size_t)(((r / inner) * CLASSES + c) * inner + r % inner);
            if (xt == ASTITCH_F32)
                memcpy(x + 4 * i, &v, 4);
            else {
                uint16_t b = bf16_bits(v);
                memcpy(x + 2 * i, &b, 2);
            }
        }
        if (tt == ASTITCH_I32)
            ((int32_t *)tv)[r] = (int32_t)targets[r];
        else
            ((int64_t *)tv)[r] = targets[r];
    }
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = t;
    astitch_executable *e = NULL;
    if (astitch_compile(g, &o, &e) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(astitch_graph_context(g)));
    const void *in[2] = {x, tv};
    void *outs[2] = {out, max};
    assert_int_equal(astitch_execute(e, in, outs), ASTITCH_OK);
    astitch_executable_destroy(e);
    free(x);
    free(tv);
}

/* The rewritten sum on the host target against the reference interpreter, bit for bit. */
static void check_bits(astitch_dtype xt, astitch_dtype tt, int lead_rank, const int64_t *lead,
                       int ca, Form form)
{
    astitch_context *ctx;
    astitch_graph *g;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    build(g, lead_rank, lead, ca, xt, tt, form);
    assert_true(gathered(g));
    int64_t rows = 1, inner = 1;
    for (int i = 0; i < lead_rank; i++)
        rows *= lead[i];
    for (int i = ca; i < lead_rank; i++)
        inner *= lead[i];
    /* row 0 at the -0, row 1 past its NaN, row 2 at its NaN, then the class ends and misses,
     * the last two wrapping row * C + t around */
    const int64_t pick[] = {3, 4, CLASSES - 1, 0, -1, CLASSES, 1000000, CLASSES - 1, 17, -7,
                            INT32_MAX, INT32_MIN};
    const int64_t npick = (int64_t)(sizeof pick / sizeof *pick);
    int64_t *targets = calloc((size_t)rows, sizeof *targets);
    float *ref = malloc((size_t)rows * 4), *got = malloc((size_t)rows * 4);
    float *mref = malloc((size_t)rows * 4), *mgot = malloc((size_t)rows * 4);
    assert_true(targets && ref && got && mref && mgot);
    for (int64_t r = 0; r < rows; r++)
        targets[r] = pick[r % npick];
    run(g, ASTITCH_TARGET_REFERENCE, rows, inner, xt, tt, targets, ref, mref);
    run(g, ASTITCH_TARGET_HOST, rows, inner, xt, tt, targets, got, mgot);
    for (int64_t r = 0; r < rows; r++)
        if (memcmp(&ref[r], &got[r], 4) != 0)
            fail_msg("row %lld (target %lld): host %a, reference %a", (long long)r,
                     (long long)targets[r], (double)got[r], (double)ref[r]);
    /* the -0 at row 0's target comes out +0 */
    assert_false(signbit(ref[0]));
    free(targets);
    free(ref);
    free(got);
    free(mref);
    free(mgot);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

static void test_f32_i32_rows(void **state)
{
    (void)state;
    const int64_t lead[1] = {23};
    check_bits(ASTITCH_F32, ASTITCH_I32, 1, lead, 1, FORM_USUAL);
}

/* The classes along the first axis: column picks, x[t[j], j]. */
static void test_f32_i32_columns(void **state)
{
    (void)state;
    const int64_t lead[1] = {23};
    check_bits(ASTITCH_F32, ASTITCH_I32, 1, lead, 0, FORM_USUAL);
}

/* The classes along the middle axis of [3, CLASSES, 7] (NCHW segmentation logits). */
static void test_middle_axis(void **state)
{
    (void)state;
    const int64_t lead[2] = {3, 7};
    check_bits(ASTITCH_F32, ASTITCH_I64, 2, lead, 1, FORM_USUAL);
    check_bits(ASTITCH_BF16, ASTITCH_I32, 2, lead, 1, FORM_SWAPPED);
}

static void test_swapped_compare(void **state)
{
    (void)state;
    const int64_t lead[1] = {12};
    check_bits(ASTITCH_F32, ASTITCH_I32, 1, lead, 1, FORM_SWAPPED);
}

static void test_f32_i64_rank3(void **state)
{
    (void)state;
    const int64_t lead[2] = {3, 7};
    check_bits(ASTITCH_F32, ASTITCH_I64, 2, lead, 2, FORM_USUAL);
}

/* The sum of bf16 logits converted to f32 (the loss's form); the picked value stays f32. */
static void test_bf16_logits(void **state)
{
    (void)state;
    const int64_t lead[1] = {20};
    check_bits(ASTITCH_BF16, ASTITCH_I32, 1, lead, 1, FORM_USUAL);
}

/* Near misses keep their sums, and the plan says nothing of a gather. */
static void test_near_misses(void **state)
{
    (void)state;
    const Form miss[] = {FORM_MINUS_ZERO, FORM_IOTA_OTHER, FORM_SUM_OTHER_AXIS,
                         FORM_AFTER_REDUCE};
    for (size_t i = 0; i < sizeof miss / sizeof *miss; i++) {
        astitch_context *ctx;
        astitch_graph *g;
        assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
        assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
        const int64_t lead[1] = {CLASSES};
        build(g, 1, lead, 1, ASTITCH_F32, ASTITCH_I32, miss[i]);
        assert_false(gathered(g));
        if (miss[i] == FORM_AFTER_REDUCE) /* the max and the sum in one walk of the rows */
            assert_true(graph_plan_has(g, NULL, " block / 0 global"));
        check_host_values(g); /* random integers are below 16: targets in range */
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
    }
}

/* No rows: nothing to gather from, the sum stays (and plans). */
static void test_no_rows(void **state)
{
    Fixture *f = *state;
    const int64_t lead[1] = {0};
    build(f->g, 1, lead, 1, ASTITCH_F32, ASTITCH_I32, FORM_USUAL);
    assert_false(gathered(f->g));
}

/* Fresh random inputs through the rewritten plan against the reference. */
static void test_random_inputs(void **state)
{
    Fixture *f = *state;
    const int64_t lead[1] = {64};
    build(f->g, 1, lead, 1, ASTITCH_F32, ASTITCH_I32, FORM_USUAL);
    assert_true(gathered(f->g));
    check_host_values(f->g);
}

/* The same with the classes along a middle axis, [4, CLASSES, 5, 6]. */
static void test_random_inputs_middle(void **state)
{
    Fixture *f = *state;
    const int64_t lead[3] = {4, 5, 6};
    build(f->g, 3, lead, 1, ASTITCH_F32, ASTITCH_I32, FORM_USUAL);
    assert_true(gathered(f->g));
    check_host_values(f->g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_i32_rows),
        cmocka_unit_test(test_f32_i32_columns),
        cmocka_unit_test(test_middle_axis),
        cmocka_unit_test(test_swapped_compare),
        cmocka_unit_test(test_f32_i64_rank3),
        cmocka_unit_test(test_bf16_logits),
        cmocka_unit_test(test_near_misses),
        cmocka_unit_test_setup_teardown(test_no_rows, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_random_inputs, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(test_random_inputs_middle, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
