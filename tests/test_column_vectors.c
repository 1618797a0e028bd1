/* test_column_vectors.c: column runs (plan option column_vectors, map_column.c's *Column runs*,
 * lib/codegen/emit_column.c) on the host target, planned for the h100 model with fewer SMs (so
 * that small graphs fill waves the way large ones do on the GPU): outputs against the reference
 * on fresh random inputs, whole kernels and parts form, deterministic, under every fusion
 * mode; and the planner gives runs exactly where its rules allow, with vector loads in the IR
 * where it does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codegen/compile.h"
#include "diff_check.h"
#include "passes/plan.h"
#include "runtime/runtime.h"

/* SMs of the device model: a wave of 2 x SMS blocks of 1024 threads (32 registers). */
enum { SMS = 2 };

typedef astitch_graph *(*Build)(astitch_context *ctx, astitch_dtype t, int64_t rows, int64_t cols);

static astitch_graph *graph_new(astitch_context *ctx)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    return g;
}

static astitch_node bcast_cols(astitch_graph *g, astitch_node v, int64_t rows, int64_t cols)
{
    int64_t d[2] = {rows, cols}, keep[1] = {1};
    return astitch_broadcast_in_dim(g, v, 2, d, keep);
}

/* sum and max over the rows of x [rows, cols] of dtype t (the sum in f32). */
static astitch_graph *column_sums(astitch_context *ctx, astitch_dtype t, int64_t rows, int64_t cols)
{
    astitch_graph *g = graph_new(ctx);
    int64_t d[2] = {rows, cols}, axis = 0;
    astitch_node x = astitch_parameter(g, "x", t, 2, d);
    astitch_node xf = t == ASTITCH_F32 ? x : astitch_convert(g, x, ASTITCH_F32);
    astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, xf, 1, &axis));
    astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, &axis));
    return g;
}

/* A batch norm over the rows of x [rows, cols]: mean, then (x - mean) * gamma + beta, whose
 * column phase has no reduction and reads x again, and the sum of the squared result. */
static astitch_graph *column_norm(astitch_context *ctx, astitch_dtype t, int64_t rows, int64_t cols)
{
    astitch_graph *g = graph_new(ctx);
    int64_t d[2] = {rows, cols}, c[1] = {cols}, axis = 0;
    astitch_node x = astitch_parameter(g, "x", t, 2, d);
    astitch_node gamma = astitch_parameter(g, "gamma", ASTITCH_F32, 1, c);
    astitch_node beta = astitch_parameter(g, "beta", ASTITCH_F32, 1, c);
    astitch_node xf = t == ASTITCH_F32 ? x : astitch_convert(g, x, ASTITCH_F32);
    double inv = 1.0 / (double)rows;
    astitch_node mean = astitch_binary(g, ASTITCH_OP_MUL,
                                       astitch_reduce(g, ASTITCH_REDUCE_SUM, xf, 1, &axis),
                                       astitch_constant(g, ASTITCH_F32, 1, c, &inv, 1));
    astitch_node centered = astitch_binary(g, ASTITCH_OP_SUB, xf, bcast_cols(g, mean, rows, cols));
    astitch_node out = astitch_binary(g, ASTITCH_OP_ADD,
        astitch_binary(g, ASTITCH_OP_MUL, centered, bcast_cols(g, gamma, rows, cols)),
        bcast_cols(g, beta, rows, cols));
    astitch_add_output(g, mean);
    astitch_add_output(g, t == ASTITCH_F32 ? out : astitch_convert(g, out, t));
    astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM,
                                         astitch_binary(g, ASTITCH_OP_MUL, out, out), 1, &axis));
    return g;
}

/* x [4, rows / 4, cols] reduced over its two leading axes: kept elements innermost, rank 3. */
static astitch_graph *column_rank3(astitch_context *ctx, astitch_dtype t, int64_t rows, int64_t cols)
{
    astitch_graph *g = graph_new(ctx);
    int64_t d[3] = {4, rows / 4, cols}, axes[2] = {0, 1};
    astitch_node x = astitch_parameter(g, "x", t, 3, d);
    astitch_node xf = t == ASTITCH_F32 ? x : astitch_convert(g, x, ASTITCH_F32);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, astitch_unary(g, ASTITCH_OP_TANH, xf));
    astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 2, axes));
    return g;
}

/* The sum over the rows of x * y, both [rows, cols]: two tensors of the space. */
static astitch_graph *column_dot(astitch_context *ctx, astitch_dtype t, int64_t rows, int64_t cols)
{
    astitch_graph *g = graph_new(ctx);
    int64_t d[2] = {rows, cols}, axis = 0;
    astitch_node x = astitch_parameter(g, "x", t, 2, d);
    astitch_node y = astitch_parameter(g, "y", t, 2, d);
    astitch_node xy = astitch_binary(g, ASTITCH_OP_MUL, x, y);
    astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, xy, 1, &axis));
    return g;
}

/* x [4, rows, cols] reduced over its middle axis (a mean over a sequence, as a sum). */
static astitch_graph *column_middle(astitch_context *ctx, astitch_dtype t, int64_t rows,
                                    int64_t cols)
{
    astitch_graph *g = graph_new(ctx);
    int64_t d[3] = {4, rows, cols}, axis = 1;
    astitch_node x = astitch_parameter(g, "x", t, 3, d);
    astitch_node xf = t == ASTITCH_F32 ? x : astitch_convert(g, x, ASTITCH_F32);
    astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, xf, 1, &axis));
    return g;
}

/* Compiles g for the host target, planned for the h100 model of `sms` SMs under fusion f with
 * column runs on (or off), deterministic or not; split: the kernels as parts cut at their
 * global barriers. */
static astitch_executable *compile(astitch_graph *g, int sms, astitch_fusion f, bool vectors,
                                   bool deterministic, bool split)
{
    astitch_context *ctx = astitch_graph_context(g);
    if (astitch_graph_verify(g) != ASTITCH_OK)
        fail_msg("verify: %s", astitch_last_error(ctx));
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_HOST;
    o.plan.fusion = f;
    o.plan.column_vectors = vectors;
    o.plan.deterministic = deterministic;
    astitch_device model;
    assert_int_equal(astitch_device_builtin("h100", &model), ASTITCH_OK);
    model.sm_count = sms;
    o.device = &model;
    astitch_executable *x = NULL;
    if (astitch_compile(g, &o, &x) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(ctx));
    assert_int_equal(astitch_context_set_option(ctx, "force_parts", split ? "1" : NULL),
                     ASTITCH_OK);
    host_kernels_destroy(x->hk);
    host_kernels_destroy(x->hk_parts);
    free(x->as_parts);
    x->hk = x->hk_parts = NULL;
    x->as_parts = NULL;
    astitch_status s = exec_host_prepare(x);
    assert_int_equal(astitch_context_set_option(ctx, "force_parts", NULL), ASTITCH_OK);
    if (s != ASTITCH_OK)
        fail_msg("recompile: %s", astitch_last_error(ctx));
    for (int k = 0; k < x->plan->nkernel; k++) /* the switch reached the runtime */
        assert_true(!split || x->plan->kernel[k].global_barriers == 0 || x->as_parts[k]);
    return x;
}

/* The longest column run of x's plan (plan_column_vector over every phase): 1 where none. */
static int plan_runs(const astitch_executable *x)
{
    int most = 1;
    for (int32_t k = 0; k < x->plan->nkernel; k++)
        for (int32_t ph = 0; ph < x->plan->kernel[k].nphase; ph++) {
            int v = plan_column_vector(&x->plan->kernel[k].phase[ph].map);
            most = v > most ? v : most;
        }
    return most;
}

/* Vector loads ("load <") in the LLVM IR of x's kernels. */
static int vector_loads(astitch_executable *x)
{
    char *ir = NULL;
    if (compile_llvm_text(x->ctx, x->plan, &ir) != ASTITCH_OK)
        fail_msg("llvm: %s", astitch_last_error(x->ctx));
    int n = 0;
    for (const char *at = ir; (at = strstr(at, "load <")); at++)
        n++;
    free(ir);
    return n;
}

/* Runs build(t, rows, cols) under every fusion mode, whole, split and deterministic, with column
 * runs on, planned for `sms` SMs, against the reference on fresh random inputs; under fusion
 * stitch the plan's longest run must be runs_wanted, and vector loads appear in the IR where
 * runs do. */
static void check_runs(const char *what, Build build, astitch_dtype t, int64_t rows, int64_t cols,
                       int sms, int runs_wanted)
{
    static const astitch_fusion fusions[] = {ASTITCH_FUSION_NONE, ASTITCH_FUSION_XLA,
                                             ASTITCH_FUSION_STITCH};
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = build(ctx, t, rows, cols);
    uint64_t seed = diff_fresh_seed();
    DiffRef *d = NULL;
    if (diff_ref_create(g, seed, true, &d) != ASTITCH_OK)
        fail_msg("%s: reference: %s", what, astitch_last_error(ctx));
    for (int f = 0; f < 3; f++)
        for (int form = 0; form < 3; form++) { /* whole, parts form, deterministic */
            astitch_executable *x = compile(g, sms, fusions[f], true, form == 2, form == 1);
            int runs = plan_runs(x), loads = vector_loads(x);
            DiffResult r;
            astitch_status s = diff_ref_check(d, x, &r);
            printf("%s %s [%lld, %lld] on %d SMs, fusion %s%s: runs of %d, %d vector loads, "
                   "seed %llu, worst normalized error %.3g\n", what, astitch_dtype_name(t),
                   (long long)rows, (long long)cols, sms, astitch_fusion_name(fusions[f]),
                   form == 1 ? ", parts form" : form == 2 ? ", deterministic" : "", runs, loads,
                   (unsigned long long)seed, r.worst);
            if (s != ASTITCH_OK)
                fail_msg("%s: run: %s", what, astitch_last_error(ctx));
            if (!r.ok)
                fail_msg("%s (seed %llu): %s", what, (unsigned long long)seed, r.message);
            if (fusions[f] == ASTITCH_FUSION_STITCH && runs != runs_wanted)
                fail_msg("%s: runs of %d, wanted %d", what, runs, runs_wanted);
            if (runs > 1 && loads == 0)
                fail_msg("%s: runs of %d without a vector load", what, runs);
            astitch_executable_destroy(x);
        }
    diff_ref_destroy(d);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

/* Column sums and maxima (two reduces: at most 8 accumulators, so bf16 takes runs of 4):
 * 13 runs a lane (400 rows over 32 lanes, uneven), 4 tiles on a wave of 4; a split into 4
 * parts of 16 runs on a wave of 16 (8 SMs); 100 rows, whole in a block of 8 lanes (13 runs);
 * 40 rows in a block of 2 lanes of 20 runs of 2 (a warp's runs of 4 would not fit it); too
 * few runs a lane even at 2 lanes (20 rows), and 5 columns: none. */
static void test_sums(void **state)
{
    (void)state;
    check_runs("column sums", column_sums, ASTITCH_F32, 400, 512, SMS, 4);
    check_runs("column sums", column_sums, ASTITCH_BF16, 400, 512, SMS, 4);
    check_runs("column sums", column_sums, ASTITCH_F32, 2048, 512, 8, 4);
    check_runs("column sums", column_sums, ASTITCH_F32, 100, 512, SMS, 4);
    check_runs("column sums", column_sums, ASTITCH_F32, 40, 512, SMS, 2);
    check_runs("column sums", column_sums, ASTITCH_F32, 20, 512, SMS, 1);
    check_runs("column sums", column_sums, ASTITCH_F32, 500, 5, SMS, 1);
}

/* A batch norm over the rows (a mean, then a phase without reductions that reads x again and
 * stores the normalized output in runs, and a sum of its squares): two reduces, so runs of 4
 * in bf16 too. */
static void test_norm(void **state)
{
    (void)state;
    check_runs("column norm", column_norm, ASTITCH_F32, 400, 512, SMS, 4);
    check_runs("column norm", column_norm, ASTITCH_BF16, 400, 1024, SMS, 4);
}

/* Reductions over leading and middle axes of rank 3, bf16 in runs of 8. */
static void test_rank3(void **state)
{
    (void)state;
    check_runs("rank 3", column_rank3, ASTITCH_F32, 800, 256, SMS, 4);
    check_runs("middle axis", column_middle, ASTITCH_BF16, 400, 512, SMS, 8);
    check_runs("middle axis", column_middle, ASTITCH_F32, 384, 96, SMS, 4);
}

/* The block of the one kernel of g planned under fusion stitch with runs on for `sms` SMs. */
static int32_t kernel_block(astitch_graph *g, int sms)
{
    astitch_executable *x = compile(g, sms, ASTITCH_FUSION_STITCH, true, false, false);
    assert_int_equal(x->plan->nkernel, 1);
    int32_t block = x->plan->kernel[0].block;
    astitch_executable_destroy(x);
    return block;
}

/* Checks build(t, rows, cols) as check_runs does and that its kernel's block is `block`. */
static void check_block(const char *what, Build build, astitch_dtype t, int64_t rows, int64_t cols,
                        int runs_wanted, int32_t block)
{
    check_runs(what, build, t, rows, cols, SMS, runs_wanted);
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = build(ctx, t, rows, cols);
    int32_t got = kernel_block(g, SMS);
    printf("%s %s [%lld, %lld]: block %d\n", what, astitch_dtype_name(t), (long long)rows,
           (long long)cols, (int)got);
    if (got != block)
        fail_msg("%s: block %d, wanted %d", what, (int)got, (int)block);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

/* The plan of a mean over the 14 x 14 positions of [64, 14, 14, 1024] f16 for the h100 model:
 * runs only in a block of 512 or less, whose wave would split the rows in parts (a split
 * group's mean needs its parts joined before the division: a grid barrier, a persistent
 * kernel); so the rows stay whole, on 256 blocks of 512 under that wave, in runs of 8. */
static void check_whole_columns(void)
{
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = graph_new(ctx);
    int64_t d[4] = {64, 14, 14, 1024}, axes[2] = {1, 2}, od[2] = {64, 1024};
    double count = 196;
    astitch_node x = astitch_convert(g, astitch_parameter(g, "x", ASTITCH_F16, 4, d), ASTITCH_F32);
    astitch_node n = astitch_constant(g, ASTITCH_F32, 2, od, &count, 1);
    astitch_node sum = astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 2, axes);
    astitch_node mean = astitch_binary(g, ASTITCH_OP_DIV, sum, n);
    astitch_add_output(g, astitch_convert(g, mean, ASTITCH_F16));
    assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
    astitch_device model;
    assert_int_equal(astitch_device_builtin("h100", &model), ASTITCH_OK);
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    astitch_plan *p = NULL;
    if (astitch_plan_create(g, &model, &o, &p) != ASTITCH_OK)
        fail_msg("plan: %s", astitch_last_error(ctx));
    const PlanKernel *k = &p->kernel[0];
    printf("mean over 14 x 14 of [64, 14, 14, 1024] f16: block %d, grid %d, %s, runs of %d, "
           "split %d\n", (int)k->block, (int)k->grid,
           k->persistent ? "persistent" : "a block per tile",
           plan_column_vector(&k->phase[0].map), (int)k->phase[0].map.split);
    assert_int_equal(p->nkernel, 1);
    assert_int_equal(k->block, 512);
    assert_int_equal(k->grid, 256);
    assert_int_equal(plan_column_vector(&k->phase[0].map), 8);
    assert_int_equal(k->phase[0].map.split, 1);
    assert_int_equal(k->global_barriers, 0);
    assert_false(k->persistent);
    astitch_plan_destroy(p);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

/* Too few rows for 12 runs a lane of 32 lanes: the block shrinks until its lanes take them (a
 * pool over 49 positions: 4 lanes of 13 runs; 197 tokens: 16 lanes), bf16 in runs of 4 where
 * a block of 128 holds a warp's runs of 4 but not of 8; 32 rows (a pooling over 32 tokens) in
 * a block of 2 lanes of 16 runs of 2; 20 rows, too few at 2 lanes, keep single columns at the
 * planned block; rows that a smaller block's wave would split stay whole on a grid under that
 * wave (100 rows of 4 x 128 columns: 4 blocks of 256 on a wave of 16). */
static void test_smaller_blocks(void **state)
{
    (void)state;
    check_block("pool", column_sums, ASTITCH_F32, 49, 4096, 4, 128);
    check_block("pool", column_middle, ASTITCH_BF16, 49, 2048, 4, 128);
    check_block("token mean", column_middle, ASTITCH_F32, 197, 768, 4, 512);
    check_block("32 rows", column_middle, ASTITCH_F32, 32, 2048, 2, 64);
    check_block("few rows", column_sums, ASTITCH_F32, 20, 4096, 1, 1024);
    check_block("rows kept whole", column_middle, ASTITCH_F32, 100, 128, 4, 256);
    check_whole_columns();
}

/* The rules: no runs with the option off, none where the walk reads two tensors of the space,
 * none where a reduce is not of floats (an i32 maximum). */
static void test_form_applies(void **state)
{
    (void)state;
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = column_sums(ctx, ASTITCH_F32, 400, 512);
    astitch_executable *on = compile(g, SMS, ASTITCH_FUSION_STITCH, true, false, false);
    astitch_executable *off = compile(g, SMS, ASTITCH_FUSION_STITCH, false, false, false);
    printf("column sums [400, 512]: runs of %d with the option, %d without\n", plan_runs(on),
           plan_runs(off));
    assert_int_equal(plan_runs(on), 4);
    assert_int_equal(plan_runs(off), 1);
    assert_int_equal(vector_loads(off), 0);
    astitch_executable_destroy(on);
    astitch_executable_destroy(off);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
    check_runs("column dot", column_dot, ASTITCH_F32, 400, 512, SMS, 1);
    check_runs("column sums", column_sums, ASTITCH_I32, 400, 512, SMS, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sums),
        cmocka_unit_test(test_norm),
        cmocka_unit_test(test_rank3),
        cmocka_unit_test(test_smaller_blocks),
        cmocka_unit_test(test_form_applies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
