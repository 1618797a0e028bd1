/*
 * test_loss_plans.c: the plans of a cross-entropy loss's regions, as a framework hands them
 * over (the logits' forward: max, the target's logit, the sum of exponentials, log-sum-exp;
 * their backward: softmax minus the one-hot target, times the loss gradient over the tokens).
 * Two planner rules keep them at the bandwidth of their bytes (lib/passes/dominant.c,
 * *replicable*; lib/passes/tiles.c, *joins_run*):
 * - a small value made from the kernel's inputs alone and broadcast over a large space (the
 *   loss scale, a per-sample factor) is recomputed where it is read, so the grid still spreads
 *   over the device (one block held the whole space before), while a value made once per
 *   reduction, or broadcast over little (the paper's Figure 5), stays made once;
 * - long streamed rows with several reductions in their first pass (max and, in a label-smoothed
 *   loss, the sum of the logits) run with the next pass tile by tile, so a row is read from
 *   device memory once;
 * and the values on the host target match the reference on fresh random inputs. A contrastive
 * loss's row and column cross-entropies read their logits once each (per-read barriers, the
 * column pick as a gather, the column pair in one walk).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "astitch/plan.h"
#include "astitch/runtime.h"
#include "diff_check.h"
#include "graph_fixture.h"

static astitch_node constant(astitch_graph *g, double v)
{
    return astitch_constant(g, ASTITCH_F32, 0, NULL, &v, 1);
}

static astitch_node scalar(astitch_graph *g, astitch_dtype t, double v, int rank,
                           const int64_t *dims)
{
    return astitch_broadcast_in_dim(g, astitch_constant(g, t, 0, NULL, &v, 1), rank, dims, NULL);
}

/* Plans f->g for the H100 with the default options. */
static const astitch_plan *plan(Fixture *f)
{
    astitch_device d;
    assert_int_equal(astitch_device_builtin("h100", &d), ASTITCH_OK);
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    return fixture_plan(f, &d, &o);
}

static astitch_kernel_info kernel0(const astitch_plan *p)
{
    astitch_kernel_info k;
    assert_int_equal(astitch_plan_num_kernels(p), 1);
    assert_int_equal(astitch_plan_kernel_info(p, 0, &k), ASTITCH_OK);
    return k;
}

/* Output out = x [rows, cols] times `factor` broadcast along `dims` over x. */
static void build_scaled(astitch_graph *g, int64_t rows, int64_t cols, astitch_node factor,
                         int nd, const int64_t *dims)
{
    int64_t s[2] = {rows, cols};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, s);
    astitch_node b = astitch_broadcast_in_dim(g, factor, 2, s, dims);
    astitch_node out = named(g, astitch_binary(g, ASTITCH_OP_MUL, x, b), "out");
    assert_int_equal(astitch_add_output(g, out), ASTITCH_OK);
}

/* The loss scale of a cross-entropy backward, grad_loss / tokens, over [256, 8192]: every
 * element reads it, and the grid covers the device. */
static void test_scalar_scale_spreads(void **state)
{
    Fixture *f = *state;
    astitch_node gl = astitch_parameter(f->g, "grad_loss", ASTITCH_F32, 0, NULL);
    astitch_node sc = named(f->g, astitch_binary(f->g, ASTITCH_OP_DIV, gl, constant(f->g, 256.0)),
                            "scale");
    build_scaled(f->g, 256, 8192, sc, 0, NULL);
    const astitch_plan *p = plan(f);
    astitch_kernel_info k = kernel0(p);
    astitch_device d;
    assert_int_equal(astitch_device_builtin("h100", &d), ASTITCH_OK);
    assert_true(k.grid >= d.sm_count);
    assert_int_equal(k.block_barriers + k.global_barriers, 0);
    assert_int_equal(op_info(p, f->g, "scale").role, ASTITCH_ROLE_MEMBER);
    check_host_values(f->g);
}

/* A factor per sample, exp(w) [8] over [8, 65536]: eight values, each read by 65536 elements;
 * held as a sub-dominant, each block would need a whole sample (eight blocks). */
static void test_per_sample_factor_spreads(void **state)
{
    Fixture *f = *state;
    int64_t n = 8, dim0 = 0;
    astitch_node w = astitch_parameter(f->g, "w", ASTITCH_F32, 1, &n);
    astitch_node e = named(f->g, astitch_unary(f->g, ASTITCH_OP_EXP, w), "factor");
    build_scaled(f->g, 8, 65536, e, 1, &dim0);
    const astitch_plan *p = plan(f);
    astitch_kernel_info k = kernel0(p);
    assert_true(k.grid > 8 * 8);
    assert_int_equal(op_info(p, f->g, "factor").role, ASTITCH_ROLE_MEMBER);
    check_host_values(f->g);
}

/* A scale made from a reduction (the mean of x, broadcast back over x) is made once: its
 * readers wait for the reduction anyway. */
static void test_scale_from_reduction_made_once(void **state)
{
    Fixture *f = *state;
    int64_t s[2] = {64, 4096}, axes[2] = {0, 1};
    astitch_node x = astitch_parameter(f->g, "x", ASTITCH_F32, 2, s);
    astitch_node sum = astitch_reduce(f->g, ASTITCH_REDUCE_SUM, x, 2, axes);
    astitch_node mean = named(f->g, astitch_binary(f->g, ASTITCH_OP_DIV, sum,
                                                   constant(f->g, 64.0 * 4096.0)), "mean");
    astitch_node out = astitch_binary(f->g, ASTITCH_OP_SUB, x,
                                      astitch_broadcast_in_dim(f->g, mean, 2, s, NULL));
    assert_int_equal(astitch_add_output(f->g, named(f->g, out, "out")), ASTITCH_OK);
    const astitch_plan *p = plan(f);
    astitch_role role = op_info(p, f->g, "mean").role;
    if (role != ASTITCH_ROLE_DOMINANT && role != ASTITCH_ROLE_SUB_DOMINANT)
        fail_msg("mean is %s, recomputed per element", astitch_role_name(role));
    assert_int_equal(op_info(p, f->g, "mean").evals, 1);
    check_host_values(f->g);
}

/* The forward of a cross-entropy over [rows, vocab] f32 logits and i32 targets: per row the
 * max, the target's logit (one-hot by an iota compare; planned as a gather, one_hot.c),
 * log-sum-exp; the mean loss of lse - picked, or with label smoothing 0.1 (`smooth`, which also
 * sums the logits) 0.9 (lse - picked) + 0.1 (lse - sum / vocab). */
static void cross_entropy(astitch_graph *g, int64_t rows, int64_t vocab, bool smooth)
{
    int64_t s[2] = {rows, vocab}, last = 1, keep = 0, all = 0;
    astitch_node x = astitch_parameter(g, "logits", ASTITCH_F32, 2, s);
    astitch_node t = astitch_parameter(g, "target", ASTITCH_I32, 1, &rows);
    astitch_node m = named(g, astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, &last), "max");
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, astitch_binary(g, ASTITCH_OP_SUB, x,
                                   astitch_broadcast_in_dim(g, m, 2, s, &keep)));
    astitch_node se = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &last), "sumexp");
    astitch_node lse = named(g, astitch_binary(g, ASTITCH_OP_ADD,
                                               astitch_unary(g, ASTITCH_OP_LOG, se), m), "lse");
    astitch_node hit = astitch_binary(g, ASTITCH_OP_EQ, astitch_iota(g, ASTITCH_I32, 2, s, 1),
                                      astitch_broadcast_in_dim(g, t, 2, s, &keep));
    astitch_node picked = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM,
                                astitch_select(g, hit, x, scalar(g, ASTITCH_F32, 0, 2, s)),
                                1, &last), "picked");
    astitch_node nll = astitch_binary(g, ASTITCH_OP_SUB, lse, picked);
    if (smooth) {
        astitch_node xsum = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, &last), "xsum");
        astitch_node loss_s = astitch_binary(
            g, ASTITCH_OP_SUB, lse,
            astitch_binary(g, ASTITCH_OP_DIV, xsum, scalar(g, ASTITCH_F32, (double)vocab, 1, &rows)));
        nll = astitch_binary(
            g, ASTITCH_OP_ADD,
            astitch_binary(g, ASTITCH_OP_MUL, scalar(g, ASTITCH_F32, 0.9, 1, &rows), nll),
            astitch_binary(g, ASTITCH_OP_MUL, scalar(g, ASTITCH_F32, 0.1, 1, &rows), loss_s));
    }
    astitch_node loss = astitch_binary(g, ASTITCH_OP_DIV,
                                       astitch_reduce(g, ASTITCH_REDUCE_SUM, nll, 1, &all),
                                       constant(g, (double)rows));
    assert_int_equal(astitch_add_output(g, named(g, loss, "loss")), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, lse), ASTITCH_OK);
}

static void build_cross_entropy(astitch_graph *g, int64_t rows, int64_t vocab)
{
    cross_entropy(g, rows, vocab, true);
}

/* 512 rows of 16384 (no split across blocks; streamed, not held in registers): the pass with
 * the max and the sum of the logits and the pass with the sum of exponentials are one tile
 * run. */
static void test_cross_entropy_one_read(void **state)
{
    Fixture *f = *state;
    build_cross_entropy(f->g, 512, 16384);
    const astitch_plan *p = plan(f);
    astitch_op_info mx = op_info(p, f->g, "max"), se = op_info(p, f->g, "sumexp");
    assert_int_equal(op_info(p, f->g, "xsum").phase, mx.phase);
    assert_true(se.phase > mx.phase);
    astitch_phase_info ph;
    assert_int_equal(astitch_plan_phase_info(p, se.kernel, se.phase, &ph), ASTITCH_OK);
    assert_false(ph.resident);
    assert_int_equal(ph.run_first, mx.phase);
    check_host_values(f->g);
}

/* The lanes per row of op `name`'s phase in plan p of g. */
static int lanes_of(const astitch_plan *p, const astitch_graph *g, const char *name)
{
    astitch_op_info o = op_info(p, g, name);
    astitch_phase_info ph;
    assert_int_equal(astitch_plan_phase_info(p, o.kernel, o.phase, &ph), ASTITCH_OK);
    return ph.mapping.threads_per_row;
}

/* A cross-entropy without label smoothing (the suite's Llama-2 loss), in a graph of its own. */
static astitch_graph *hard_cross_entropy(astitch_context *ctx, int64_t rows, int64_t vocab)
{
    astitch_graph *g;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    cross_entropy(g, rows, vocab, false);
    return g;
}

static astitch_plan *plan_on(astitch_graph *g, const char *device, bool online)
{
    astitch_device d;
    assert_int_equal(astitch_device_builtin(device, &d), ASTITCH_OK);
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    o.online_softmax = online;
    astitch_plan *p = NULL;
    if (astitch_plan_create(g, &d, &o, &p) != ASTITCH_OK)
        fail_msg("%s", astitch_last_error(astitch_graph_context(g)));
    return p;
}

/* A streamed row takes a warp where the rows give at least half the warps of a wave one each
 * and its tile run walks it once (lib/passes/map_row.c, STREAM_WARP_SHARE,
 * mapping_stream_rewalks): a Llama-2 batch of 4096 tokens over its 32000 logits on the H100,
 * 16 rows a block, no block barrier between rows. A block's lanes each where the run walks the
 * rows twice (the online form off; label smoothing, whose sum of the logits shares the max's
 * walk) and the rows of a wave's warps outgrow the L2, and where 512 rows leave most warps
 * without one. The values on the host, whose model has few SMs, come from the warp-per-row
 * form (512 rows of 16384 there). */
static void test_streamed_rows_take_a_warp(void **state)
{
    Fixture *f = *state;
    astitch_context *ctx = astitch_graph_context(f->g);
    astitch_graph *big = hard_cross_entropy(ctx, 4096, 32000);
    astitch_plan *p = plan_on(big, "h100", true);
    assert_int_equal(lanes_of(p, big, "max"), 32);
    astitch_phase_info ph;
    astitch_op_info mx = op_info(p, big, "max");
    assert_int_equal(astitch_plan_phase_info(p, mx.kernel, mx.phase, &ph), ASTITCH_OK);
    assert_int_equal(ph.mapping.rows_per_block * 32, ph.mapping.block);
    assert_false(plan_text_has(p, "streamed rows:"));
    astitch_plan_destroy(p);
    p = plan_on(big, "h100", false);
    assert_true(lanes_of(p, big, "max") > 32);
    assert_true(plan_text_has(p, "streamed rows: a block's lanes each; a warp each would walk "
                                 "them again beyond half the L2"));
    astitch_plan_destroy(p);
    astitch_graph_destroy(big);

    build_cross_entropy(f->g, 4096, 32000);
    assert_true(lanes_of(plan(f), f->g, "max") > 32);

    astitch_graph *small = hard_cross_entropy(ctx, 512, 16384);
    p = plan_on(small, "h100", true);
    assert_true(lanes_of(p, small, "max") > 32);
    astitch_plan_destroy(p);
    p = plan_on(small, "host", true);
    assert_int_equal(lanes_of(p, small, "max"), 32);
    astitch_plan_destroy(p);
    check_host_values(small);
    astitch_graph_destroy(small);
}

/* One cross-entropy of a contrastive loss (CLIP's): over the rows of logits [n, n] (axis 1)
 * or down its columns (axis 0), the targets arange(n) picked by a one-hot sum; returns its
 * summed nll (the log-sum-exp of each row or column, made in the mean's group, reads the max). */
static astitch_node contrastive_half(astitch_graph *g, astitch_node x, astitch_node t, int64_t n,
                                     int64_t axis, const char *name)
{
    int64_t s[2] = {n, n}, kept = 1 - axis, all = 0;
    char nm[32];
    astitch_node max = astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, &axis);
    snprintf(nm, sizeof nm, "%s.max", name);
    named(g, max, nm);
    astitch_node ex = astitch_unary(g, ASTITCH_OP_EXP, astitch_binary(g, ASTITCH_OP_SUB, x,
                                    astitch_broadcast_in_dim(g, max, 2, s, &kept)));
    astitch_node sum = astitch_reduce(g, ASTITCH_REDUCE_SUM, ex, 1, &axis);
    snprintf(nm, sizeof nm, "%s.sum", name);
    named(g, sum, nm);
    astitch_node hit = astitch_binary(g, ASTITCH_OP_EQ, astitch_iota(g, ASTITCH_I32, 2, s, axis),
                                      astitch_broadcast_in_dim(g, t, 2, s, &kept));
    astitch_node pick = astitch_reduce(g, ASTITCH_REDUCE_SUM,
                                       astitch_select(g, hit, x, scalar(g, ASTITCH_F32, 0, 2, s)),
                                       1, &axis);
    astitch_node lse = astitch_binary(g, ASTITCH_OP_ADD, astitch_unary(g, ASTITCH_OP_LOG, sum), max);
    return astitch_reduce(g, ASTITCH_REDUCE_SUM, astitch_binary(g, ASTITCH_OP_SUB, lse, pick), 1,
                          &all);
}

/* CLIP's loss over logits [8192, 8192] f32: each row's max is global (the mean's group reads it
 * at every row) yet its sum waits only at a block barrier, in one tile run with it
 * (schemes.c, per-read barriers); the column pick is a gather, and the column max and sum are
 * one online walk; so the kernel reads the logits twice, not four times. 256 columns on the
 * host target (where the column group is split and takes two walks) match the reference. */
static void test_contrastive_loss(void **state)
{
    Fixture *f = *state;
    astitch_context *ctx = astitch_graph_context(f->g);
    for (int big = 1; big >= 0; big--) {
        int64_t n = big ? 8192 : 256;
        astitch_graph *g = f->g;
        if (big)
            assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
        astitch_node x = astitch_parameter(g, "logits", ASTITCH_F32, 2, (int64_t[]){n, n});
        astitch_node t = astitch_parameter(g, "labels", ASTITCH_I32, 1, &n);
        astitch_node tot = astitch_binary(g, ASTITCH_OP_ADD, contrastive_half(g, x, t, n, 1, "r"),
                                          contrastive_half(g, x, t, n, 0, "c"));
        astitch_node loss = astitch_binary(g, ASTITCH_OP_DIV, tot, constant(g, 2.0 * (double)n));
        assert_int_equal(astitch_add_output(g, named(g, loss, "loss")), ASTITCH_OK);
        if (!big) {
            check_h100_values(g, "contrastive loss");
            break;
        }
        astitch_plan *p = plan_on(g, "h100", true);
        astitch_kernel_info k = kernel0(p);
        assert_true(k.moved_bytes <= 2 * k.min_bytes + (1 << 20));
        astitch_op_info mx = op_info(p, g, "r.max"), sm = op_info(p, g, "r.sum");
        assert_int_equal(mx.scheme, ASTITCH_SCHEME_GLOBAL);
        astitch_phase_info ph;
        assert_int_equal(astitch_plan_phase_info(p, sm.kernel, sm.phase, &ph), ASTITCH_OK);
        assert_int_equal(ph.barrier, ASTITCH_BARRIER_BLOCK);
        assert_int_equal(ph.run_first, mx.phase);
        assert_true(plan_text_has(p, "rewritten (a one-hot sum as a gather, one element per row)"));
        assert_true(plan_text_has(p, "in one walk (online softmax): c.max"));
        astitch_plan_destroy(p);
        astitch_graph_destroy(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_scalar_scale_spreads),
        FIXTURE_TEST(test_per_sample_factor_spreads),
        FIXTURE_TEST(test_scale_from_reduction_made_once),
        FIXTURE_TEST(test_cross_entropy_one_read),
        FIXTURE_TEST(test_streamed_rows_take_a_warp),
        FIXTURE_TEST(test_contrastive_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
