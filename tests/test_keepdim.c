/*
 * test_keepdim.c: reduces reshaped to their kept dimensions (lib/passes/keepdim.c) through the
 * public API: which outputs the rewrite takes (bias gradients, sum over leading axes with
 * keepdim; row sums over trailing axes) and which it leaves (reduced axes in the middle, a
 * reduce read by something else too, a reshape that reorders elements, fusion none), what the
 * plan gains (no global barrier where the sums split across blocks), the caller's graph left
 * alone, and the values on the host target against the reference on fresh random inputs.
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

/* Output `name`: reduce kind of x over naxes axes, reshaped to rank/dims. */
static void keepdim_output(astitch_graph *g, astitch_reduce_kind kind, astitch_node x, int naxes,
                           const int64_t *axes, int rank, const int64_t *dims, const char *name)
{
    astitch_node r = astitch_reduce(g, kind, x, naxes, axes);
    assert_int_equal(astitch_add_output(g, named(g, astitch_reshape(g, r, rank, dims), name)),
                     ASTITCH_OK);
}

/* A linear layer's bias gradients as AOTAutograd hands them over: dy [tokens, n] summed over
 * the tokens with keepdim ("db" [1, n]), and over batch and sequence of [b, s, n] ("db3"
 * [1, 1, n]); row maxima of h [tokens, 2n] with keepdim ("rowmax" [tokens, 1]). */
static void build_bias_grads(astitch_graph *g, int64_t b, int64_t s, int64_t n)
{
    int64_t dy_dims[2] = {b * s, n}, dy3_dims[3] = {b, s, n};
    astitch_node dy = astitch_parameter(g, "dy", ASTITCH_F32, 2, dy_dims);
    astitch_node dy3 = astitch_parameter(g, "dy3", ASTITCH_F32, 3, dy3_dims);
    keepdim_output(g, ASTITCH_REDUCE_SUM, dy, 1, (int64_t[]){0}, 2, (int64_t[]){1, n}, "db");
    keepdim_output(g, ASTITCH_REDUCE_SUM, dy3, 2, (int64_t[]){0, 1}, 3, (int64_t[]){1, 1, n},
                   "db3");
    int64_t h_dims[2] = {b * s, 2 * n};
    astitch_node h = astitch_parameter(g, "h", ASTITCH_F32, 2, h_dims);
    keepdim_output(g, ASTITCH_REDUCE_MAX, h, 1, (int64_t[]){1}, 2, (int64_t[]){b * s, 1},
                   "rowmax");
}

static astitch_plan *plan_with(Fixture *f, astitch_fusion fusion)
{
    astitch_device d;
    assert_int_equal(astitch_device_builtin("h100", &d), ASTITCH_OK);
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    o.fusion = fusion;
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

/* The op of the plan graph's node named `name`, ASTITCH_OP_COUNT when there is none. */
static astitch_op op_named(const astitch_graph *g, const char *name)
{
    astitch_node v = astitch_graph_find(g, name);
    return v == ASTITCH_NO_NODE ? ASTITCH_OP_COUNT : astitch_node_op(g, v);
}

/* Each keepdim output becomes a reduce of its own name and shape (stitch and xla), so the split
 * sums need no global barrier; under none the graph stays as given. The caller's graph is left
 * alone. */
static void test_outputs_reduced_in_place(void **state)
{
    Fixture *f = *state;
    build_bias_grads(f->g, 8, 1024, 768);
    int before = astitch_graph_num_nodes(f->g);
    static const astitch_fusion modes[] = {ASTITCH_FUSION_STITCH, ASTITCH_FUSION_XLA};
    for (int m = 0; m < 2; m++) {
        astitch_plan *p = plan_with(f, modes[m]);
        const astitch_graph *rg = astitch_plan_graph(p);
        assert_ptr_not_equal(rg, f->g);
        assert_int_equal(op_named(rg, "db"), ASTITCH_OP_REDUCE);
        assert_int_equal(op_named(rg, "db3"), ASTITCH_OP_REDUCE);
        assert_int_equal(op_named(rg, "rowmax"), ASTITCH_OP_REDUCE);
        assert_int_equal(op_named(rg, "db.keepdim_in"), ASTITCH_OP_RESHAPE);
        assert_int_equal(global_barriers(p), 0);
        astitch_plan_destroy(p);
    }
    assert_int_equal(astitch_graph_num_nodes(f->g), before);
    assert_int_equal(op_named(f->g, "db"), ASTITCH_OP_RESHAPE);
    astitch_plan *none = plan_with(f, ASTITCH_FUSION_NONE);
    assert_ptr_equal(astitch_plan_graph(none), f->g);
    astitch_plan_destroy(none);
}

/* Left alone: a reduce over a middle axis, a reduce also read by another op, a reshape that is
 * no output, a reshape that moves elements (kept dims regrouped), and two keepdim reduces of
 * one input over different axes (rewritten, they could no longer share a mapping). */
static void test_left_alone(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    int64_t dims[3] = {64, 48, 40};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 3, dims);
    keepdim_output(g, ASTITCH_REDUCE_SUM, x, 1, (int64_t[]){1}, 3, (int64_t[]){64, 1, 40},
                   "middle");
    astitch_node r = astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, (int64_t[]){0});
    astitch_node shared = astitch_reshape(g, r, 3, (int64_t[]){1, 48, 40});
    assert_int_equal(astitch_add_output(g, named(g, shared, "shared")), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, named(g, astitch_unary(g, ASTITCH_OP_EXP, r), "exp")),
                     ASTITCH_OK);
    astitch_node q = astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, (int64_t[]){2});
    astitch_node inner = named(g, astitch_reshape(g, q, 3, (int64_t[]){64, 48, 1}), "inner");
    astitch_node neg = astitch_unary(g, ASTITCH_OP_NEG, inner);
    assert_int_equal(astitch_add_output(g, named(g, neg, "neg")), ASTITCH_OK);
    keepdim_output(g, ASTITCH_REDUCE_MIN, x, 1, (int64_t[]){0}, 2, (int64_t[]){40, 48}, "moved");
    int64_t yd[2] = {96, 40};
    astitch_node y = astitch_parameter(g, "y", ASTITCH_F32, 2, yd);
    keepdim_output(g, ASTITCH_REDUCE_SUM, y, 1, (int64_t[]){0}, 2, (int64_t[]){1, 40}, "ycols");
    keepdim_output(g, ASTITCH_REDUCE_SUM, y, 1, (int64_t[]){1}, 2, (int64_t[]){96, 1}, "yrows");
    astitch_plan *p = plan_with(f, ASTITCH_FUSION_STITCH);
    const astitch_graph *rg = astitch_plan_graph(p);
    assert_int_equal(op_named(rg, "middle"), ASTITCH_OP_RESHAPE);
    assert_int_equal(op_named(rg, "shared"), ASTITCH_OP_RESHAPE);
    assert_int_equal(op_named(rg, "inner"), ASTITCH_OP_RESHAPE);
    assert_int_equal(op_named(rg, "moved"), ASTITCH_OP_RESHAPE);
    assert_int_equal(op_named(rg, "ycols"), ASTITCH_OP_RESHAPE);
    assert_int_equal(op_named(rg, "yrows"), ASTITCH_OP_RESHAPE);
    astitch_plan_destroy(p);
}

/* Values on the host target, fresh inputs, against the reference, under every fusion mode. */
static void test_values(void **state)
{
    Fixture *f = *state;
    build_bias_grads(f->g, 4, 96, 40);
    static const astitch_fusion modes[] = {ASTITCH_FUSION_STITCH, ASTITCH_FUSION_XLA,
                                           ASTITCH_FUSION_NONE};
    for (int m = 0; m < 3; m++) {
        uint64_t seed = diff_fresh_seed();
        DiffResult r;
        if (diff_run(f->g, ASTITCH_TARGET_HOST, modes[m], seed, &r) != ASTITCH_OK)
            fail_msg("seed %llu: %s", (unsigned long long)seed, astitch_last_error(f->ctx));
        if (!r.ok)
            fail_msg("seed %llu: %s", (unsigned long long)seed, r.message);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_outputs_reduced_in_place),
        FIXTURE_TEST(test_left_alone),
        FIXTURE_TEST(test_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
