/*
 * test_short_reduce.c: a reduce over at most 16 elements per output, off the innermost axis,
 * whose input is its own (lib/passes/short_reduce.c), is planned as element-wise slices: a
 * top-2 mixture-of-experts combine, every reduce kind and dtype over short leading, middle and
 * several axes, against the reference on fresh random inputs; special values bit for bit; and
 * the near misses planned as written.
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

#define REWRITTEN "rewritten (a reduce over a few elements per output as element-wise slices): "

/* Whether g's plan (H100) names reduce `name` as rewritten. */
static bool shortened(astitch_graph *g, const char *name)
{
    char line[256];
    snprintf(line, sizeof line, REWRITTEN "%s\n", name);
    return graph_plan_has(g, NULL, line);
}

/* out = bf16(sum over the 2 experts of f32(y) * w^T broadcast): y [2, tokens, hidden] bf16, w
 * [tokens, 2] f32, the top-2 combine of a mixture of experts. */
static void build_combine(astitch_graph *g, int64_t tokens, int64_t hidden)
{
    const int64_t ys[3] = {2, tokens, hidden}, ws[2] = {tokens, 2}, perm[2] = {1, 0};
    const int64_t bd[2] = {0, 1}, axis = 0;
    astitch_node y = astitch_parameter(g, "expert_out", ASTITCH_BF16, 3, ys);
    astitch_node w = astitch_parameter(g, "topk_weight", ASTITCH_F32, 2, ws);
    astitch_node yf = named(g, astitch_convert(g, y, ASTITCH_F32), "yf");
    astitch_node wt = named(g, astitch_transpose(g, w, perm), "wT");
    astitch_node wb = named(g, astitch_broadcast_in_dim(g, wt, 3, ys, bd), "w.b");
    astitch_node wy = named(g, astitch_binary(g, ASTITCH_OP_MUL, yf, wb), "wy");
    astitch_node comb = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, wy, 1, &axis), "comb");
    astitch_node out = named(g, astitch_convert(g, comb, ASTITCH_BF16), "out");
    assert_int_equal(astitch_add_output(g, out), ASTITCH_OK);
}

/* The combine plans as one element-wise kernel, no barrier and no column walk, and its values
 * match on the host and on the host running the H100's plans. */
static void test_top2_combine(void **state)
{
    Fixture *f = *state;
    build_combine(f->g, 96, 264);
    assert_true(shortened(f->g, "comb"));
    assert_true(graph_plan_has(f->g, NULL, "barriers 0 block / 0 global"));
    assert_false(graph_plan_has(f->g, NULL, "column-reduce"));
    check_host_values(f->g);
    check_h100_values(f->g, "top-2 combine");
}

/* r = reduce(kind, x, axes) as an output, x [dims] of dtype t read by r alone (through a neg
 * for floats and integers, so that the cone is more than the parameter). */
static void build_reduce(astitch_graph *g, astitch_dtype t, astitch_reduce_kind kind, int rank,
                         const int64_t *dims, int naxes, const int64_t *axes)
{
    astitch_node x = astitch_parameter(g, "x", t, rank, dims);
    if (t != ASTITCH_BOOL)
        x = named(g, astitch_unary(g, ASTITCH_OP_NEG, x), "negated");
    astitch_node r = named(g, astitch_reduce(g, kind, x, naxes, axes), "r");
    assert_int_equal(astitch_add_output(g, r), ASTITCH_OK);
}

typedef struct Case {
    astitch_dtype t;
    astitch_reduce_kind kind;
    int rank;
    int64_t dims[4];
    int naxes;
    int64_t axes[2];
} Case;

/* Every kind and dtype, over a leading axis, a middle one, two axes (16 elements) and a unit
 * axis, each rewritten and against the reference on fresh random inputs. */
static void test_kinds_and_axes(void **state)
{
    (void)state;
    const Case cases[] = {
        {ASTITCH_F32, ASTITCH_REDUCE_SUM, 3, {3, 5, 40}, 1, {0}},
        {ASTITCH_F32, ASTITCH_REDUCE_MAX, 3, {4, 7, 33}, 1, {1}},
        {ASTITCH_F32, ASTITCH_REDUCE_MIN, 3, {4, 5, 24}, 1, {1}},
        {ASTITCH_F32, ASTITCH_REDUCE_PROD, 3, {2, 5, 24}, 1, {1}},
        {ASTITCH_F16, ASTITCH_REDUCE_SUM, 3, {6, 16, 40}, 1, {1}},
        {ASTITCH_BF16, ASTITCH_REDUCE_SUM, 3, {5, 4, 64}, 1, {0}},
        {ASTITCH_F16, ASTITCH_REDUCE_MAX, 3, {3, 9, 17}, 1, {1}},
        {ASTITCH_I32, ASTITCH_REDUCE_SUM, 3, {3, 11, 40}, 1, {1}},
        {ASTITCH_I64, ASTITCH_REDUCE_PROD, 2, {3, 50}, 1, {0}},
        {ASTITCH_BOOL, ASTITCH_REDUCE_ANY, 3, {4, 5, 24}, 1, {1}},
        {ASTITCH_BOOL, ASTITCH_REDUCE_ALL, 3, {4, 5, 24}, 1, {1}},
        {ASTITCH_F32, ASTITCH_REDUCE_SUM, 4, {5, 4, 4, 24}, 2, {1, 2}},
        {ASTITCH_F32, ASTITCH_REDUCE_SUM, 4, {2, 3, 4, 32}, 2, {0, 2}},
        {ASTITCH_F32, ASTITCH_REDUCE_SUM, 3, {6, 1, 48}, 1, {1}},
        {ASTITCH_F32, ASTITCH_REDUCE_MAX, 3, {6, 8, 1}, 1, {0}}, /* the innermost a unit */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const Case *c = &cases[i];
        astitch_context *ctx;
        astitch_graph *g;
        assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
        assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
        build_reduce(g, c->t, c->kind, c->rank, c->dims, c->naxes, c->axes);
        printf("  case %zu: %s %s\n", i, astitch_dtype_name(c->t), astitch_reduce_name(c->kind));
        if (!shortened(g, "r"))
            fail_msg("case %zu: not rewritten", i);
        check_host_values(g);
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
    }
}

/* max, min and sum over 3 rows of special values: NaN, signed zeros, infinities, bit for bit
 * against the reference (a sum of -0 alone is -0; max and min order -0 below +0). */
static void test_special_values(void **state)
{
    (void)state;
    const float nan = __builtin_nanf(""), inf = __builtin_inff();
    /* column j of x [3, 8]: rows 0, 1, 2 */
    const float x[3][8] = {
        {-0.0f, -0.0f, nan, 1.0f, inf, -inf, 2.5f, -0.0f},
        {-0.0f, 0.0f, 1.0f, nan, -inf, -inf, -2.5f, 3.0f},
        {-0.0f, -0.0f, 2.0f, 1.0f, 1.0f, 7.0f, 1e-45f, -3.0f},
    };
    const astitch_reduce_kind kinds[] = {ASTITCH_REDUCE_MAX, ASTITCH_REDUCE_MIN,
                                         ASTITCH_REDUCE_SUM};
    for (size_t k = 0; k < 3; k++) {
        astitch_context *ctx;
        astitch_graph *g;
        assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
        assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
        const int64_t dims[2] = {3, 8}, axis = 0;
        astitch_node p = astitch_parameter(g, "x", ASTITCH_F32, 2, dims);
        astitch_node r = named(g, astitch_reduce(g, kinds[k], p, 1, &axis), "r");
        assert_int_equal(astitch_add_output(g, r), ASTITCH_OK);
        assert_true(shortened(g, "r"));
        float out[2][8];
        for (int t = 0; t < 2; t++) {
            astitch_compile_options o;
            astitch_compile_options_default(&o);
            o.target = t ? ASTITCH_TARGET_HOST : ASTITCH_TARGET_REFERENCE;
            astitch_executable *e = NULL;
            if (astitch_compile(g, &o, &e) != ASTITCH_OK)
                fail_msg("compile: %s", astitch_last_error(ctx));
            const void *in[1] = {x};
            void *outs[1] = {out[t]};
            assert_int_equal(astitch_execute(e, in, outs), ASTITCH_OK);
            astitch_executable_destroy(e);
        }
        for (int j = 0; j < 8; j++)
            if (memcmp(&out[0][j], &out[1][j], 4) != 0)
                fail_msg("%s column %d: host %a, reference %a",
                         astitch_reduce_name(kinds[k]), j, (double)out[1][j],
                         (double)out[0][j]);
        if (kinds[k] == ASTITCH_REDUCE_SUM)
            assert_true(signbit(out[1][0]) && !signbit(out[1][1]));
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
    }
}

/* An f16 sum over 16 rows rounds once, as the reduce does: 2048 and fifteen ones sum to 2063,
 * 2064 in f16, where sums rounded pair by pair in f16 give 2062; 1024 and fifteen halves to
 * 1032 (1031 pair by pair). Bit for bit against the reference. */
static void test_f16_sum_rounds_once(void **state)
{
    Fixture *f = *state;
    const int64_t dims[2] = {16, 4}, axis = 0;
    astitch_node x = astitch_parameter(f->g, "x", ASTITCH_F16, 2, dims);
    astitch_node r = named(f->g, astitch_reduce(f->g, ASTITCH_REDUCE_SUM, x, 1, &axis), "r");
    assert_int_equal(astitch_add_output(f->g, r), ASTITCH_OK);
    assert_true(shortened(f->g, "r"));
    uint16_t in[16][4], out[2][4];
    for (int i = 0; i < 16; i++) {
        in[i][0] = i ? 0x3C00 : 0x6800; /* 1, or 2048 first */
        in[i][1] = i ? 0x3800 : 0x6400; /* 0.5, or 1024 first */
        in[i][2] = 0x3C00;
        in[i][3] = i % 2 ? 0xBC00 : 0x3C00; /* -1 and 1: +0 */
    }
    for (int t = 0; t < 2; t++) {
        astitch_compile_options o;
        astitch_compile_options_default(&o);
        o.target = t ? ASTITCH_TARGET_HOST : ASTITCH_TARGET_REFERENCE;
        astitch_executable *e = NULL;
        if (astitch_compile(f->g, &o, &e) != ASTITCH_OK)
            fail_msg("compile: %s", astitch_last_error(f->ctx));
        const void *ins[1] = {in};
        void *outs[1] = {out[t]};
        assert_int_equal(astitch_execute(e, ins, outs), ASTITCH_OK);
        astitch_executable_destroy(e);
    }
    assert_int_equal(out[0][0], 0x6808); /* 2064 */
    assert_int_equal(out[0][1], 0x6408); /* 1032 */
    for (int j = 0; j < 4; j++)
        if (out[0][j] != out[1][j])
            fail_msg("column %d: host 0x%04x, reference 0x%04x", j, out[1][j], out[0][j]);
}

/* How a near miss is built. */
typedef enum Miss {
    MISS_SEVENTEEN,  /* 17 elements per output */
    MISS_INNERMOST,  /* the innermost axis reduced */
    MISS_CONE_READ,  /* a softmax over a short middle axis: the exponentials read twice */
    MISS_CONE_OUT,   /* the reduce's input also an output */
    MISS_SMALLER,    /* divided by a row sum of fewer elements (a masked mean pooling) */
} Miss;

static void build_miss(astitch_graph *g, Miss m)
{
    const int64_t s[3] = {8, m == MISS_SEVENTEEN ? 17 : 6, 40}, axis = 1, last = 2;
    const int64_t bd[2] = {0, 2}, ps[2] = {8, 40}, ms[2] = {8, 6}, pbd[1] = {0};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 3, s);
    astitch_node e = named(g, astitch_unary(g, ASTITCH_OP_EXP, x), "e");
    astitch_node r;
    if (m == MISS_INNERMOST) {
        r = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &last), "r");
    } else {
        r = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &axis), "r");
    }
    if (m == MISS_CONE_READ) {
        astitch_node rb = named(g, astitch_broadcast_in_dim(g, r, 3, s, bd), "r.b");
        r = named(g, astitch_binary(g, ASTITCH_OP_DIV, e, rb), "p");
    }
    if (m == MISS_CONE_OUT)
        assert_int_equal(astitch_add_output(g, e), ASTITCH_OK);
    if (m == MISS_SMALLER) {
        astitch_node mask = astitch_parameter(g, "mask", ASTITCH_F32, 2, ms);
        astitch_node den = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, mask, 1, &axis), "den");
        astitch_node db = named(g, astitch_broadcast_in_dim(g, den, 2, ps, pbd), "den.b");
        r = named(g, astitch_binary(g, ASTITCH_OP_DIV, r, db), "pooled");
    }
    assert_int_equal(astitch_add_output(g, r), ASTITCH_OK);
}

/* Near misses keep their reduce, plan, and match the reference. */
static void test_near_misses(void **state)
{
    (void)state;
    const Miss miss[] = {MISS_SEVENTEEN, MISS_INNERMOST, MISS_CONE_READ, MISS_CONE_OUT,
                         MISS_SMALLER};
    for (size_t i = 0; i < sizeof miss / sizeof *miss; i++) {
        astitch_context *ctx;
        astitch_graph *g;
        assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
        assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
        build_miss(g, miss[i]);
        if (graph_plan_has(g, NULL, "rewritten (a reduce over a few"))
            fail_msg("near miss %zu rewritten", i);
        check_host_values(g);
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
    }
}

/* A reduce whose input has no elements keeps its reduce (its identity values). */
static void test_no_elements(void **state)
{
    Fixture *f = *state;
    const int64_t dims[3] = {2, 0, 8}, axis = 0;
    astitch_node x = astitch_parameter(f->g, "x", ASTITCH_F32, 3, dims);
    astitch_node r = named(f->g, astitch_reduce(f->g, ASTITCH_REDUCE_SUM, x, 1, &axis), "r");
    assert_int_equal(astitch_add_output(f->g, r), ASTITCH_OK);
    assert_false(shortened(f->g, "r"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_top2_combine),
        cmocka_unit_test(test_kinds_and_axes),
        cmocka_unit_test(test_special_values),
        FIXTURE_TEST(test_f16_sum_rounds_once),
        cmocka_unit_test(test_near_misses),
        FIXTURE_TEST(test_no_elements),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
