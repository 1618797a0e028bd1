/* test_row_vectors.c: the vector form of streamed row reductions (plan option row_vectors,
 * lib/codegen/emit_row.c) on the host target, planned for the h100 model: outputs against the
 * reference on fresh random inputs, whole kernels, parts form and deterministic, under every
 * fusion mode; and the LLVM IR gains vector loads exactly where the form applies. */
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

typedef astitch_graph *(*Build)(astitch_context *ctx, astitch_dtype t, const int64_t *dims);

static astitch_graph *graph_new(astitch_context *ctx)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    return g;
}

static astitch_node to_f32(astitch_graph *g, astitch_node x, astitch_dtype t)
{
    return t == ASTITCH_F32 ? x : astitch_convert(g, x, ASTITCH_F32);
}

/* softmax over the rows of x [dims[0], dims[1]], rows too long to stay in registers (dims[1]
 * above 8192): its output and the row sums. */
static astitch_graph *row_softmax(astitch_context *ctx, astitch_dtype t, const int64_t *dims)
{
    astitch_graph *g = graph_new(ctx);
    int64_t axis = 1, keep = 0;
    astitch_node x = astitch_parameter(g, "x", t, 2, dims);
    astitch_node xf = to_f32(g, x, t);
    astitch_node m = astitch_reduce(g, ASTITCH_REDUCE_MAX, xf, 1, &axis);
    astitch_node ex = astitch_unary(g, ASTITCH_OP_EXP, astitch_binary(g, ASTITCH_OP_SUB, xf,
                                    astitch_broadcast_in_dim(g, m, 2, dims, &keep)));
    astitch_node s = astitch_reduce(g, ASTITCH_REDUCE_SUM, ex, 1, &axis);
    astitch_node out = astitch_binary(g, ASTITCH_OP_DIV, ex,
                                      astitch_broadcast_in_dim(g, s, 2, dims, &keep));
    astitch_add_output(g, t == ASTITCH_F32 ? out : astitch_convert(g, out, t));
    astitch_add_output(g, s);
    return g;
}

/* A batch norm's statistics of NCHW activations x [dims[0..3]] over N, H and W (a row per
 * channel, its innermost axis reduced, not contiguous): the channel means and the squared
 * deviations from them. */
static astitch_graph *channel_norm(astitch_context *ctx, astitch_dtype t, const int64_t *dims)
{
    astitch_graph *g = graph_new(ctx);
    int64_t axes[3] = {0, 2, 3}, keep = 1, c[1] = {dims[1]};
    astitch_node x = astitch_parameter(g, "x", t, 4, dims);
    astitch_node xf = to_f32(g, x, t);
    double inv = 1.0 / (double)(dims[0] * dims[2] * dims[3]);
    astitch_node mean = astitch_binary(g, ASTITCH_OP_MUL,
                                       astitch_reduce(g, ASTITCH_REDUCE_SUM, xf, 3, axes),
                                       astitch_constant(g, ASTITCH_F32, 1, c, &inv, 1));
    astitch_node d = astitch_binary(g, ASTITCH_OP_SUB, xf,
                                    astitch_broadcast_in_dim(g, mean, 4, dims, &keep));
    astitch_node sq = astitch_binary(g, ASTITCH_OP_MUL, d, d);
    astitch_add_output(g, mean);
    astitch_add_output(g, t == ASTITCH_F32 ? sq : astitch_convert(g, sq, t));
    return g;
}

/* Compiles g for the host target, planned for the h100 model under fusion f with row vectors
 * on (or off), deterministic or not; split: the kernels as parts cut at their global barriers. */
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
    o.plan.row_vectors = vectors;
    o.plan.deterministic = deterministic;
    astitch_device model;
    assert_int_equal(astitch_device_builtin("h100", &model), ASTITCH_OK);
    o.device = &model;
    assert_int_equal(astitch_context_set_option(ctx, "force_parts", split ? "1" : NULL),
                     ASTITCH_OK);
    astitch_executable *x = NULL;
    astitch_status s = astitch_compile(g, &o, &x);
    assert_int_equal(astitch_context_set_option(ctx, "force_parts", NULL), ASTITCH_OK);
    if (s != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(ctx));
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

/* Runs build(t, dims) under every fusion mode, whole, split and deterministic, with row vectors
 * on, against the reference on fresh random inputs; applies: whether the form should add vector
 * loads to the IR (compared with the same plan with the option off). */
static void check_runs(const char *what, Build build, astitch_dtype t, const int64_t *dims,
                       bool applies)
{
    static const astitch_fusion fusions[] = {ASTITCH_FUSION_NONE, ASTITCH_FUSION_XLA,
                                             ASTITCH_FUSION_STITCH};
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = build(ctx, t, dims);
    uint64_t seed = diff_fresh_seed();
    DiffRef *d = NULL;
    if (diff_ref_create(g, seed, true, &d) != ASTITCH_OK)
        fail_msg("%s: reference: %s", what, astitch_last_error(ctx));
    for (int f = 0; f < 3; f++)
        for (int form = 0; form < 3; form++) { /* whole, parts form, deterministic */
            astitch_executable *x = compile(g, fusions[f], true, form == 2, form == 1);
            astitch_executable *off = compile(g, fusions[f], false, form == 2, form == 1);
            int loads = vector_loads(x), loads_off = vector_loads(off);
            DiffResult r;
            astitch_status s = diff_ref_check(d, x, &r);
            printf("%s %s fusion %s%s: %d vector loads (%d without the form), seed %llu, worst "
                   "normalized error %.3g\n", what, astitch_dtype_name(t),
                   astitch_fusion_name(fusions[f]),
                   form == 1 ? ", parts form" : form == 2 ? ", deterministic" : "", loads,
                   loads_off, (unsigned long long)seed, r.worst);
            if (s != ASTITCH_OK)
                fail_msg("%s: run: %s", what, astitch_last_error(ctx));
            if (!r.ok)
                fail_msg("%s (seed %llu): %s", what, (unsigned long long)seed, r.message);
            if ((loads > loads_off) != applies)
                fail_msg("%s: %d vector loads against %d without row vectors, the form should "
                         "%sapply", what, loads, loads_off, applies ? "" : "not ");
            astitch_executable_destroy(x);
            astitch_executable_destroy(off);
        }
    diff_ref_destroy(d);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

/* Long rows: runs of 4 (f32), 8 (bf16), 2 (a row of 2 mod 4), none (an odd row); few rows, so
 * that they split across blocks (at a split whose part the run divides, or not). */
static void test_softmax(void **state)
{
    (void)state;
    check_runs("long softmax", row_softmax, ASTITCH_F32, (int64_t[]){6, 20000}, true);
    check_runs("long softmax", row_softmax, ASTITCH_BF16, (int64_t[]){3, 16384}, true);
    check_runs("long softmax", row_softmax, ASTITCH_F32, (int64_t[]){5, 9002}, true);
    check_runs("long softmax", row_softmax, ASTITCH_F32, (int64_t[]){4, 9001}, false);
    check_runs("long softmax", row_softmax, ASTITCH_F32, (int64_t[]){1, 131072}, true);
}

/* Rows over N, H and W: innermost 20 (runs of 4), 10 (2), 7 (none). */
static void test_channels(void **state)
{
    (void)state;
    check_runs("channel norm", channel_norm, ASTITCH_F32, (int64_t[]){8, 3, 12, 20}, true);
    check_runs("channel norm", channel_norm, ASTITCH_BF16, (int64_t[]){4, 5, 16, 16}, true);
    check_runs("channel norm", channel_norm, ASTITCH_F32, (int64_t[]){6, 4, 9, 10}, true);
    check_runs("channel norm", channel_norm, ASTITCH_F32, (int64_t[]){6, 4, 9, 7}, false);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_channels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
