/*
 * test_recompute.c: generated outputs recomputed where they are read (lib/passes/recompute.c)
 * through the public API: which outputs the rewrite takes (a causal mask made of iotas and
 * constants) and which it leaves (a parameter, a heavy op or too long a chain in the cone, no
 * reader inside the graph, fusion modes other than stitch), what the plan gains (no global
 * barrier), the caller's graph left alone, unique names, and the values on the host target
 * against the reference on fresh random inputs.
 */
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

static astitch_node scalar(astitch_graph *g, astitch_dtype t, double v, int rank,
                           const int64_t *dims)
{
    return astitch_broadcast_in_dim(g, astitch_constant(g, t, 0, NULL, &v, 1), rank, dims, NULL);
}

/* The plane's mask as a traced causal mask is made: key - query <= 0, and-ed with true,
 * negated ("mask", true above the diagonal). */
static astitch_node causal_mask(astitch_graph *g, int64_t s)
{
    int64_t plane[2] = {s, s};
    astitch_node query = astitch_iota(g, ASTITCH_I64, 2, plane, 0);
    astitch_node key = astitch_iota(g, ASTITCH_I64, 2, plane, 1);
    astitch_node ahead = astitch_binary(g, ASTITCH_OP_LE,
                                        astitch_binary(g, ASTITCH_OP_SUB, key, query),
                                        scalar(g, ASTITCH_I64, 0, 2, plane));
    astitch_node allowed = astitch_binary(g, ASTITCH_OP_AND, ahead,
                                          scalar(g, ASTITCH_BOOL, 1, 2, plane));
    return named(g, astitch_unary(g, ASTITCH_OP_NOT, allowed), "mask");
}

/* GPT-2's training attention region, small: scores [b, h, s, s] masked by `mask` [s, s]
 * (broadcast over batch and heads) and soft-maxed over keys. Outputs: mask, probs. */
static void build_attention(astitch_graph *g, astitch_node mask, int64_t s)
{
    int64_t dims[4] = {2, 3, s, s}, keep[3] = {0, 1, 2}, last = 3, plane_dims[2] = {2, 3};
    astitch_node scores = astitch_parameter(g, "scores", ASTITCH_F32, 4, dims);
    astitch_node fill = scalar(g, ASTITCH_F32, -3.4028234663852886e38, 4, dims);
    astitch_node masked = astitch_select(
        g, astitch_broadcast_in_dim(g, mask, 4, dims, plane_dims), fill, scores);
    astitch_node mx = astitch_reduce(g, ASTITCH_REDUCE_MAX, masked, 1, &last);
    astitch_node e = astitch_unary(
        g, ASTITCH_OP_EXP,
        astitch_binary(g, ASTITCH_OP_SUB, masked, astitch_broadcast_in_dim(g, mx, 4, dims, keep)));
    astitch_node sum = astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &last);
    astitch_node probs = astitch_binary(g, ASTITCH_OP_DIV, e,
                                        astitch_broadcast_in_dim(g, sum, 4, dims, keep));
    assert_int_equal(astitch_add_output(g, mask), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, named(g, probs, "probs")), ASTITCH_OK);
}

static astitch_plan *plan_with(Fixture *f, astitch_fusion fusion, bool recompute)
{
    astitch_device d;
    assert_int_equal(astitch_device_builtin("h100", &d), ASTITCH_OK);
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    o.fusion = fusion;
    o.recompute_outputs = recompute;
    astitch_plan *p = NULL;
    if (astitch_plan_create(f->g, &d, &o, &p) != ASTITCH_OK)
        fail_msg("plan: %s", astitch_last_error(f->ctx));
    return p;
}

static int global_barriers(const astitch_plan *p)
{
    int n = 0;
    for (int k = 0; k < astitch_plan_num_kernels(p); k++) {
        astitch_kernel_info ki;
        assert_int_equal(astitch_plan_kernel_info(p, k, &ki), ASTITCH_OK);
        n += ki.global_barriers;
    }
    return n;
}

/* The mask is recomputed by the softmax's readers: no global barrier, a block per tile; off,
 * the softmax waits for the mask behind one. The caller's graph is left alone. */
static void test_causal_mask_recomputed(void **state)
{
    Fixture *f = *state;
    build_attention(f->g, causal_mask(f->g, 64), 64);
    int before = astitch_graph_num_nodes(f->g);
    astitch_plan *on = plan_with(f, ASTITCH_FUSION_STITCH, true);
    astitch_plan *off = plan_with(f, ASTITCH_FUSION_STITCH, false);
    assert_int_equal(astitch_graph_num_nodes(f->g), before);
    assert_ptr_equal(astitch_plan_graph(off), f->g);
    const astitch_graph *rg = astitch_plan_graph(on);
    assert_ptr_not_equal(rg, f->g);
    assert_int_equal(astitch_graph_num_nodes(rg), before + 1);
    astitch_node copy = astitch_graph_find(rg, "mask.recompute");
    assert_true(copy >= 0);
    assert_int_equal(astitch_graph_output(rg, 0), astitch_graph_find(rg, "mask"));
    assert_int_equal(astitch_graph_num_outputs(rg), 2);
    assert_true(plan_text_has(on, "recomputed where read (outputs of positions and constants "
                                  "alone): mask\n"));
    assert_false(plan_text_has(off, "recomputed"));
    assert_true(plan_text_has(off, "output recompute off"));
    assert_int_equal(global_barriers(on), 0);
    assert_true(global_barriers(off) > 0);
    astitch_plan_destroy(on);
    astitch_plan_destroy(off);
}

/* Outputs left as they are: one read by nothing inside the graph; one with a parameter, one
 * with a heavy op and one with a chain of 40 ops in its cone; any output under xla or none. */
static void test_not_recomputed(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    int64_t plane[2] = {16, 16};
    astitch_node alone = causal_mask(g, 16);
    assert_int_equal(astitch_add_output(g, alone), ASTITCH_OK);
    astitch_node p = astitch_parameter(g, "p", ASTITCH_F32, 2, plane);
    astitch_node from_p = astitch_unary(g, ASTITCH_OP_NEG, p);
    astitch_node heavy = astitch_unary(g, ASTITCH_OP_EXP,
                                       astitch_convert(g, astitch_iota(g, ASTITCH_I32, 2, plane, 1),
                                                       ASTITCH_F32));
    astitch_node chain = astitch_convert(g, astitch_iota(g, ASTITCH_I32, 2, plane, 0), ASTITCH_F32);
    for (int i = 0; i < 40; i++)
        chain = astitch_unary(g, ASTITCH_OP_NEG, chain);
    astitch_node outs[3] = {from_p, heavy, chain};
    astitch_node total = p;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(astitch_add_output(g, outs[i]), ASTITCH_OK);
        total = astitch_binary(g, ASTITCH_OP_ADD, total, outs[i]);
    }
    int64_t axis = 1;
    assert_int_equal(astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, total, 1, &axis)),
                     ASTITCH_OK);
    astitch_fusion modes[3] = {ASTITCH_FUSION_STITCH, ASTITCH_FUSION_XLA, ASTITCH_FUSION_NONE};
    for (int m = 0; m < 3; m++) {
        astitch_plan *pl = plan_with(f, modes[m], true);
        assert_ptr_equal(astitch_plan_graph(pl), g);
        assert_false(plan_text_has(pl, "recomputed"));
        astitch_plan_destroy(pl);
    }
    /* the same graph with the mask read: taken under stitch alone */
    astitch_node read = astitch_select(g, alone, scalar(g, ASTITCH_F32, 0, 2, plane), p);
    assert_int_equal(astitch_add_output(g, read), ASTITCH_OK);
    for (int m = 0; m < 3; m++) {
        astitch_plan *pl = plan_with(f, modes[m], true);
        assert_true((astitch_plan_graph(pl) != g) == (modes[m] == ASTITCH_FUSION_STITCH));
        astitch_plan_destroy(pl);
    }
}

/* The copy's name is taken: it gets a suffix, nothing collides. */
static void test_names_kept_unique(void **state)
{
    Fixture *f = *state;
    astitch_node mask = causal_mask(f->g, 32);
    named(f->g, astitch_unary(f->g, ASTITCH_OP_NOT, mask), "mask.recompute");
    build_attention(f->g, mask, 32);
    assert_int_equal(astitch_add_output(f->g, astitch_graph_find(f->g, "mask.recompute")),
                     ASTITCH_OK);
    astitch_plan *p = plan_with(f, ASTITCH_FUSION_STITCH, true);
    const astitch_graph *rg = astitch_plan_graph(p);
    assert_true(astitch_graph_find(rg, "mask.recompute_1") >= 0);
    assert_int_equal(global_barriers(p), 0);
    astitch_plan_destroy(p);
}

/* Values on the host target, fresh inputs, against the reference: the mask and the probs. */
static void test_values(void **state)
{
    Fixture *f = *state;
    build_attention(f->g, causal_mask(f->g, 48), 48);
    check_host_values(f->g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_causal_mask_recomputed),
        FIXTURE_TEST(test_not_recomputed),
        FIXTURE_TEST(test_names_kept_unique),
        FIXTURE_TEST(test_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
