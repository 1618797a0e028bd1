/* test_column_vectors.c: the vector form of column reductions (plan option column_vectors,
 * lib/codegen/emit_column.c) on the host target, planned for the h100 model, every kernel's
 * register bound raised to the form's least (so that the form applies wherever the shapes
 * allow): outputs against the reference on fresh random inputs, whole kernels and parts form,
 * under every fusion mode; and the LLVM IR shows vector loads exactly where the form applies. */
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

enum { FORM_REGS = 64 }; /* emit_column.c's COLUMN_VECTOR_MIN_REGS */

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

/* Compiles g for the host target, planned for the h100 model under fusion f with column
 * vectors on (or off), every kernel's register bound at least FORM_REGS, deterministic or not;
 * split: the kernels as parts cut at their global barriers. */
static astitch_executable *compile(astitch_graph *g, astitch_fusion f, bool vectors,
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
    o.device = &model;
    astitch_executable *x = NULL;
    if (astitch_compile(g, &o, &x) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(ctx));
    for (int k = 0; k < x->plan->nkernel; k++)
        if (x->plan->kernel[k].regs < FORM_REGS)
            x->plan->kernel[k].regs = FORM_REGS;
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
 * vectors on, against the reference on fresh random inputs. form: the IR has vector loads (1),
 * none (0), or either (-1: graphs with element-wise phases, which have their own). */
static void check_runs(const char *what, Build build, astitch_dtype t, int64_t rows, int64_t cols,
                       int form_wanted)
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
            astitch_executable *x = compile(g, fusions[f], true, form == 2, form == 1);
            int loads = vector_loads(x);
            DiffResult r;
            astitch_status s = diff_ref_check(d, x, &r);
            printf("%s %s [%lld, %lld] fusion %s%s: %d vector loads, seed %llu, worst "
                   "normalized error %.3g\n", what, astitch_dtype_name(t), (long long)rows,
                   (long long)cols, astitch_fusion_name(fusions[f]),
                   form == 1 ? ", parts form" : form == 2 ? ", deterministic" : "", loads,
                   (unsigned long long)seed, r.worst);
            if (s != ASTITCH_OK)
                fail_msg("%s: run: %s", what, astitch_last_error(ctx));
            if (!r.ok)
                fail_msg("%s (seed %llu): %s", what, (unsigned long long)seed, r.message);
            if (form_wanted >= 0 && (loads > 0) != (form_wanted > 0))
                fail_msg("%s: %d vector loads, the form should %sapply", what, loads,
                         form_wanted ? "" : "not ");
            astitch_executable_destroy(x);
        }
    diff_ref_destroy(d);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

/* Column sums and maxima: shapes whose columns take runs of 4 (f32), 8 (bf16), 2 (6 columns)
 * or none (5), rows that split across blocks or not. */
static void test_sums(void **state)
{
    (void)state;
    check_runs("column sums", column_sums, ASTITCH_F32, 3000, 256, 1);
    check_runs("column sums", column_sums, ASTITCH_F32, 37, 64, 1);
    check_runs("column sums", column_sums, ASTITCH_BF16, 1000, 128, 1);
    check_runs("column sums", column_sums, ASTITCH_F32, 500, 6, 1);
    check_runs("column sums", column_sums, ASTITCH_F32, 500, 5, 0);
}

static void test_norm(void **state)
{
    (void)state;
    check_runs("column norm", column_norm, ASTITCH_F32, 2000, 128, -1);
    check_runs("column norm", column_norm, ASTITCH_BF16, 640, 64, -1);
    check_runs("column norm", column_norm, ASTITCH_F32, 96, 12, -1);
}

static void test_rank3(void **state)
{
    (void)state;
    check_runs("rank 3", column_rank3, ASTITCH_F32, 800, 96, 1);
}

/* The form applies where it should: vector loads in the IR of a column sum of 256 columns with
 * the option on, none with it off, none at 5 columns, none below the register bound. */
static void test_form_applies(void **state)
{
    (void)state;
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = column_sums(ctx, ASTITCH_F32, 3000, 256);
    astitch_executable *on = compile(g, ASTITCH_FUSION_STITCH, true, false, false);
    astitch_executable *off = compile(g, ASTITCH_FUSION_STITCH, false, false, false);
    int n_on = vector_loads(on), n_off = vector_loads(off);
    printf("column sums [3000, 256]: %d vector loads with column vectors, %d without\n", n_on, n_off);
    assert_true(n_on > 0);
    assert_int_equal(n_off, 0);
    for (int k = 0; k < on->plan->nkernel; k++)
        on->plan->kernel[k].regs = FORM_REGS - 8;
    assert_int_equal(vector_loads(on), 0);
    astitch_executable_destroy(on);
    astitch_executable_destroy(off);
    astitch_graph_destroy(g);
    g = column_sums(ctx, ASTITCH_F32, 3000, 5);
    on = compile(g, ASTITCH_FUSION_STITCH, true, false, false);
    assert_int_equal(vector_loads(on), 0);
    astitch_executable_destroy(on);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sums),
        cmocka_unit_test(test_norm),
        cmocka_unit_test(test_rank3),
        cmocka_unit_test(test_form_applies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
