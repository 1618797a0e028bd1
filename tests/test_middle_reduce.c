/*
 * test_middle_reduce.c: a reduce over a middle axis read back at its rows (lib/passes/schemes.c
 * with tiles_read_at_row in tiles.c). ConvNeXt's channels-first layer norm (mean and variance
 * over C of NCHW, then (x - u) / sqrt(s + eps) scaled per channel) and a softmax over the class
 * axis of segmentation logits read their statistics at the element's own (n, h, w): for the
 * h100 model their statistics are regional, the kernel has no global barrier and is not
 * persistent. A read of the statistics at another element's row (through a transpose) stays
 * global. Every plan runs on the host target against the reference on fresh random inputs.
 * A normalization whose column tiles are walked twice keeps no more blocks per SM than hold
 * those tiles in the L2 (launch.c).
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

static astitch_node scalar(astitch_graph *g, double v, int rank, const int64_t *dims)
{
    return astitch_broadcast_in_dim(g, astitch_constant(g, ASTITCH_F32, 0, NULL, &v, 1), rank,
                                    dims, NULL);
}

/* v of shape [n, h, w] broadcast back over C of NCHW x (dims d). */
static astitch_node over_c(astitch_graph *g, astitch_node v, const int64_t *d)
{
    static const int64_t keep[3] = {0, 2, 3};
    return astitch_broadcast_in_dim(g, v, 4, d, keep);
}

/* ConvNeXt's LayerNorm(channels_first) of x [n, c, h, w] as its code writes it. */
static void build_layer_norm(astitch_graph *g, const int64_t *d)
{
    int64_t axis = 1, rows[3] = {d[0], d[2], d[3]}, on_c = 1;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 4, d);
    astitch_node w = astitch_parameter(g, "w", ASTITCH_F32, 1, &d[1]);
    astitch_node b = astitch_parameter(g, "b", ASTITCH_F32, 1, &d[1]);
    double n = (double)d[1];
    astitch_node u = named(g, astitch_binary(g, ASTITCH_OP_DIV,
                                             astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, &axis),
                                             scalar(g, n, 3, rows)), "u");
    astitch_node dev = astitch_binary(g, ASTITCH_OP_SUB, x, over_c(g, u, d));
    astitch_node var = astitch_binary(
        g, ASTITCH_OP_DIV,
        astitch_reduce(g, ASTITCH_REDUCE_SUM, astitch_binary(g, ASTITCH_OP_MUL, dev, dev), 1,
                       &axis),
        scalar(g, n, 3, rows));
    astitch_node sd = named(g, astitch_unary(g, ASTITCH_OP_SQRT,
                                             astitch_binary(g, ASTITCH_OP_ADD, var,
                                                            scalar(g, 1e-6, 3, rows))), "sd");
    astitch_node y = astitch_binary(g, ASTITCH_OP_DIV, dev, over_c(g, sd, d));
    y = astitch_binary(g, ASTITCH_OP_MUL, y, astitch_broadcast_in_dim(g, w, 4, d, &on_c));
    y = astitch_binary(g, ASTITCH_OP_ADD, y, astitch_broadcast_in_dim(g, b, 4, d, &on_c));
    assert_int_equal(astitch_add_output(g, y), ASTITCH_OK);
}

/* Softmax over the class axis of NCHW logits [n, c, h, w]; transposed: the maximum is read
 * at (n, w, h) instead (h == w), another block's row. */
static void build_softmax(astitch_graph *g, const int64_t *d, bool transposed)
{
    int64_t axis = 1;
    astitch_node x = astitch_parameter(g, "logits", ASTITCH_F32, 4, d);
    astitch_node mx = named(g, astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, &axis), "max");
    if (transposed) {
        int64_t perm[3] = {0, 2, 1};
        mx = astitch_transpose(g, mx, perm);
    }
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP,
                                   astitch_binary(g, ASTITCH_OP_SUB, x, over_c(g, mx, d)));
    astitch_node sum = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &axis), "sum");
    astitch_node p = astitch_binary(g, ASTITCH_OP_DIV, e, over_c(g, sum, d));
    assert_int_equal(astitch_add_output(g, p), ASTITCH_OK);
}

/* Plans f->g for the h100 model and checks its one kernel: global barriers as wanted (none:
 * a block per tile, and `stats` regional), then runs it on the host target against the
 * reference. */
static void check(Fixture *f, const char *what, const char *const *stats, int nstats,
                  bool global_wanted)
{
    astitch_plan *p = fixture_plan_h100(f);
    assert_int_equal(astitch_plan_num_kernels(p), 1);
    astitch_kernel_info ki;
    assert_int_equal(astitch_plan_kernel_info(p, 0, &ki), ASTITCH_OK);
    printf("%s: block %d, grid %d, %s, %d block and %d global barriers\n", what, ki.block,
           ki.grid, ki.persistent ? "persistent" : "a block per tile", ki.block_barriers,
           ki.global_barriers);
    if ((ki.global_barriers > 0) != global_wanted || ki.persistent != global_wanted)
        fail_msg("%s: %d global barriers, %s; wanted %s", what, ki.global_barriers,
                 ki.persistent ? "persistent" : "a block per tile",
                 global_wanted ? "a global barrier" : "none");
    for (int i = 0; i < nstats; i++) {
        astitch_op_info oi = op_info(p, f->g, stats[i]);
        if (oi.scheme != (global_wanted ? ASTITCH_SCHEME_GLOBAL : ASTITCH_SCHEME_REGIONAL))
            fail_msg("%s: %s is %s", what, stats[i], astitch_scheme_name(oi.scheme));
    }
    check_h100_values(f->g, what);
}

static void test_layer_norm(void **state)
{
    Fixture *f = *state;
    static const int64_t d[4] = {4, 48, 14, 14};
    static const char *const stats[] = {"u", "sd"};
    build_layer_norm(f->g, d);
    check(f, "channels-first layer norm [4, 48, 14, 14]", stats, 2, false);
}

static void test_layer_norm_odd(void **state)
{
    Fixture *f = *state;
    static const int64_t d[4] = {3, 37, 5, 7};
    static const char *const stats[] = {"u", "sd"};
    build_layer_norm(f->g, d);
    check(f, "channels-first layer norm [3, 37, 5, 7]", stats, 2, false);
}

static void test_softmax(void **state)
{
    Fixture *f = *state;
    static const int64_t d[4] = {2, 19, 32, 48};
    static const char *const stats[] = {"max", "sum"};
    build_softmax(f->g, d, false);
    check(f, "class softmax [2, 19, 32, 48]", stats, 2, false);
}

static void test_other_row(void **state)
{
    Fixture *f = *state;
    static const int64_t d[4] = {2, 7, 40, 40};
    static const char *const stats[] = {"max"};
    build_softmax(f->g, d, true);
    check(f, "class softmax with the maximum transposed [2, 7, 40, 40]", stats, 1, true);
}

/* PixelNorm: x * rsqrt(mean(x^2 over C) + eps) of NCHW x [n, c, h, w]. */
static void build_pixel_norm(astitch_graph *g, const int64_t *d)
{
    int64_t axis = 1, rows[3] = {d[0], d[2], d[3]};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 4, d);
    astitch_node ms = astitch_binary(
        g, ASTITCH_OP_DIV,
        astitch_reduce(g, ASTITCH_REDUCE_SUM, astitch_binary(g, ASTITCH_OP_MUL, x, x), 1, &axis),
        scalar(g, (double)d[1], 3, rows));
    astitch_node r = astitch_unary(g, ASTITCH_OP_RSQRT,
                                   astitch_binary(g, ASTITCH_OP_ADD, ms, scalar(g, 1e-8, 3, rows)));
    astitch_node y = astitch_binary(g, ASTITCH_OP_MUL, x, over_c(g, r, d));
    assert_int_equal(astitch_add_output(g, y), ASTITCH_OK);
}

/* Blocks per SM and register bound of g's one kernel on the h100 model. */
static void residency(Fixture *f, int32_t *blocks_per_sm, int32_t *regs)
{
    astitch_plan *p = fixture_plan_h100(f);
    assert_int_equal(astitch_plan_num_kernels(p), 1);
    astitch_kernel_info ki;
    assert_int_equal(astitch_plan_kernel_info(p, 0, &ki), ASTITCH_OK);
    assert_false(ki.persistent);
    *blocks_per_sm = ki.blocks_per_sm;
    *regs = ki.regs;
}

/* The column tiles the normalization walks again stay in the L2: PixelNorm over 512 channels
 * walks tiles of 128 x 512 f32 (256 KB), so one block per SM (132 tiles, 34 MB, within the
 * h100 model's 50 MB; two would hold 68), at the bound of one block; over 192 channels the
 * tiles of a full residency fit and it stays. The small case runs against the reference. */
static void test_rewalked_tiles_in_l2(void **state)
{
    Fixture *f = *state;
    static const int64_t wide[4] = {32, 512, 64, 64};
    int32_t bps, regs;
    build_pixel_norm(f->g, wide);
    residency(f, &bps, &regs);
    printf("pixel norm [32, 512, 64, 64]: %d blocks per SM, %d registers\n", bps, regs);
    assert_int_equal(bps, 1);
    assert_int_equal(regs, 64);

    Fixture g = {0};
    assert_int_equal(astitch_context_create(&g.ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(g.ctx, &g.g), ASTITCH_OK);
    static const int64_t narrow[4] = {32, 192, 64, 64};
    build_pixel_norm(g.g, narrow);
    residency(&g, &bps, &regs);
    printf("pixel norm [32, 192, 64, 64]: %d blocks per SM, %d registers\n", bps, regs);
    assert_true(bps > 1 && regs == 32);
    astitch_plan_destroy(g.p);
    astitch_graph_destroy(g.g);
    astitch_context_destroy(g.ctx);

    Fixture h = {0};
    assert_int_equal(astitch_context_create(&h.ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(h.ctx, &h.g), ASTITCH_OK);
    static const int64_t small[4] = {2, 24, 9, 16};
    build_pixel_norm(h.g, small);
    check_h100_values(h.g, "pixel norm [2, 24, 9, 16]");
    astitch_graph_destroy(h.g);
    astitch_context_destroy(h.ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_layer_norm),
        FIXTURE_TEST(test_layer_norm_odd),
        FIXTURE_TEST(test_softmax),
        FIXTURE_TEST(test_other_row),
        FIXTURE_TEST(test_rewalked_tiles_in_l2),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
