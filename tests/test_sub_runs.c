/* test_sub_runs.c: phases whose thread's run of v elements does not divide the innermost
 * dimension. Element-wise (lib/codegen/emit_phase.c, elementwise_values): the roots are
 * evaluated over sub-runs of the largest power of two dividing both, so a channel shuffle's
 * transposed reads and a gate broadcast over 14 x 14 stay vector accesses; with an odd innermost
 * dimension, element by element. Row reductions over odd rows (lib/codegen/emit_reduce.c,
 * emit_elements_per_iteration): the single-element walk takes as many elements per iteration as
 * the runs would. Planned for the h100 model, run on the host target against the reference on
 * fresh random inputs; the LLVM IR's loads say which form was taken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codegen/compile.h"
#include "diff_check.h"
#include "runtime/runtime.h"

static astitch_graph *graph_new(astitch_context *ctx)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    return g;
}

/* ShuffleNet's channel shuffle of x [n, c, h, w] in 2 groups (view, transpose(1, 2), view),
 * plus y [n, c, h, w] read at the same elements when with_sum. */
static astitch_graph *shuffle(astitch_context *ctx, astitch_dtype t, const int64_t *d,
                              bool with_sum)
{
    astitch_graph *g = graph_new(ctx);
    int64_t split[5] = {d[0], 2, d[1] / 2, d[2], d[3]}, perm[5] = {0, 2, 1, 3, 4};
    astitch_node x = astitch_parameter(g, "x", t, 4, d);
    astitch_node s = astitch_reshape(g, astitch_transpose(g, astitch_reshape(g, x, 5, split), perm),
                                     4, d);
    if (with_sum)
        s = astitch_binary(g, ASTITCH_OP_ADD, s, astitch_parameter(g, "y", t, 4, d));
    astitch_add_output(g, s);
    return g;
}

/* A squeeze-and-excitation gate: x [n, c, h, w] * broadcast(sigmoid(s [n, c])). */
static astitch_graph *gate(astitch_context *ctx, astitch_dtype t, const int64_t *d)
{
    astitch_graph *g = graph_new(ctx);
    int64_t keep[2] = {0, 1};
    astitch_node x = astitch_parameter(g, "x", t, 4, d);
    astitch_node s = astitch_parameter(g, "s", t, 2, d);
    astitch_node sig = astitch_unary(g, ASTITCH_OP_SIGMOID, astitch_convert(g, s, ASTITCH_F32));
    astitch_node y = astitch_binary(g, ASTITCH_OP_MUL, astitch_convert(g, x, ASTITCH_F32),
                                    astitch_broadcast_in_dim(g, sig, 4, d, keep));
    astitch_add_output(g, astitch_convert(g, y, t));
    return g;
}

/* The log-sum-exp of each row of x [rows, cols] in f32, x of type t, and their sum, as a loss
 * over tokens: the kernel that also holds that small sum is planned at 64 registers. */
static astitch_graph *logsumexp(astitch_context *ctx, astitch_dtype t, int64_t rows, int64_t cols)
{
    astitch_graph *g = graph_new(ctx);
    int64_t d[2] = {rows, cols}, keep[1] = {0}, axis[1] = {1};
    astitch_node x = astitch_convert(g, astitch_parameter(g, "x", t, 2, d), ASTITCH_F32);
    astitch_node max = astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, axis);
    astitch_node e = astitch_unary(
        g, ASTITCH_OP_EXP,
        astitch_binary(g, ASTITCH_OP_SUB, x, astitch_broadcast_in_dim(g, max, 2, d, keep)));
    astitch_node sum = astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, axis);
    astitch_node lse = astitch_binary(g, ASTITCH_OP_ADD, astitch_unary(g, ASTITCH_OP_LOG, sum), max);
    int64_t rows_axis[1] = {0};
    astitch_add_output(g, lse);
    astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, lse, 1, rows_axis));
    return g;
}

/* g compiled for the host target with the h100 model's plan (diff_host_as). */
static astitch_executable *compile(astitch_graph *g)
{
    astitch_context *ctx = astitch_graph_context(g);
    astitch_device model;
    astitch_compile_options o;
    astitch_phase_info first;
    astitch_executable *x = NULL;
    if (astitch_graph_verify(g) != ASTITCH_OK ||
        diff_host_as(g, "h100", &model, &o, &first) != ASTITCH_OK ||
        astitch_compile(g, &o, &x) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(ctx));
    return x;
}

/* Occurrences of pattern in the LLVM IR of x's kernels. */
static int ir_count(astitch_executable *x, const char *pattern)
{
    char *ir = NULL;
    if (compile_llvm_text(x->ctx, x->plan, &ir) != ASTITCH_OK)
        fail_msg("llvm: %s", astitch_last_error(x->ctx));
    int n = 0;
    for (const char *at = ir; (at = strstr(at, pattern)); at++)
        n++;
    free(ir);
    return n;
}

/* Runs g against the reference on fresh random inputs; its IR (before optimization, so a dead
 * load still counts) must hold at least `vectors` occurrences of the pattern `vector` and
 * exactly `scalars` of the pattern `scalar`. */
static void check(const char *what, astitch_graph *g, const char *vector, int vectors,
                  const char *scalar, int scalars)
{
    astitch_context *ctx = astitch_graph_context(g);
    uint64_t seed = diff_fresh_seed();
    DiffRef *d = NULL;
    if (diff_ref_create(g, seed, true, &d) != ASTITCH_OK)
        fail_msg("%s: reference: %s", what, astitch_last_error(ctx));
    astitch_executable *x = compile(g);
    int nv = ir_count(x, vector), ns = ir_count(x, scalar);
    DiffResult r;
    astitch_status s = diff_ref_check(d, x, &r);
    printf("%s: %d '%s', %d '%s', seed %llu, worst normalized error %.3g\n", what, nv, vector,
           ns, scalar, (unsigned long long)seed, r.worst);
    if (s != ASTITCH_OK)
        fail_msg("%s: run: %s", what, astitch_last_error(ctx));
    if (!r.ok)
        fail_msg("%s (seed %llu): %s", what, (unsigned long long)seed, r.message);
    if (nv < vectors || ns != scalars)
        fail_msg("%s: %d '%s' (at least %d wanted) and %d '%s' (%d wanted)", what, nv, vector,
                 vectors, ns, scalar, scalars);
    astitch_executable_destroy(x);
    diff_ref_destroy(d);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

static astitch_context *context(void)
{
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    return ctx;
}

/* f16 runs of 8 over rows of 28: two sub-runs of 4, each one 8-byte load of x. */
static void test_shuffle_f16(void **state)
{
    (void)state;
    astitch_graph *g = shuffle(context(), ASTITCH_F16, (int64_t[]){4, 12, 28, 28}, false);
    check("shuffle f16 [4, 12, 28, 28]", g, "load <4 x i16>", 2, "load i16", 0);
}

/* f32 runs of 4 over rows of 6: sub-runs of 2; y, read at the run's own elements, stays one
 * 16-byte load. */
static void test_shuffle_f32_sum(void **state)
{
    (void)state;
    astitch_graph *g = shuffle(context(), ASTITCH_F32, (int64_t[]){3, 10, 5, 6}, true);
    check("shuffle + y f32 [3, 10, 5, 6], runs of 2", g, "load <2 x float>", 2, "load float", 0);
    g = shuffle(context(), ASTITCH_F32, (int64_t[]){3, 10, 5, 6}, true);
    check("shuffle + y f32 [3, 10, 5, 6], y whole", g, "load <4 x float>", 1, "load float", 0);
}

/* An odd innermost dimension: no sub-run, element by element. */
static void test_shuffle_odd(void **state)
{
    (void)state;
    astitch_graph *g = shuffle(context(), ASTITCH_F16, (int64_t[]){2, 8, 7, 7}, false);
    check("shuffle f16 [2, 8, 7, 7]", g, "load <4 x i16>", 0, "load i16", 8);
}

/* The gate over 14 x 14 f16: x one 16-byte load, the gate at sub-runs of 2 (14 = 2 x 7), once
 * per sub-run: 4 loads of s, not 8. */
static void test_gate(void **state)
{
    (void)state;
    check("gate f16 [4, 24, 14, 14]", gate(context(), ASTITCH_F16, (int64_t[]){4, 24, 14, 14}),
          "load <8 x i16>", 1, "load i16", 4);
}

/* GPT-2's vocabulary, 50257 f16 logits a row: no run divides the row, so the max and the sum
 * (one online walk) take single elements, 32 a thread per iteration (as many bytes as four
 * 16-byte runs), not 4. */
static void test_odd_row_walk(void **state)
{
    (void)state;
    astitch_graph *g = logsumexp(context(), ASTITCH_F16, 256, 50257);
    check("log-sum-exp f16 [256, 50257]", g, "load i16", 32, "load <8 x i16>", 0);
}

/* GPT-2's log-softmax in f32, [rows, 50257]: its output x - lse. */
static astitch_graph *logsoftmax(astitch_context *ctx, int64_t rows, int64_t cols)
{
    astitch_graph *g = graph_new(ctx);
    int64_t d[2] = {rows, cols}, keep[1] = {0}, axis[1] = {1};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d);
    astitch_node max = astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, axis);
    astitch_node sh =
        astitch_binary(g, ASTITCH_OP_SUB, x, astitch_broadcast_in_dim(g, max, 2, d, keep));
    astitch_node sum =
        astitch_reduce(g, ASTITCH_REDUCE_SUM, astitch_unary(g, ASTITCH_OP_EXP, sh), 1, axis);
    astitch_node lse = astitch_unary(g, ASTITCH_OP_LOG, sum);
    astitch_add_output(g, astitch_binary(g, ASTITCH_OP_SUB, sh,
                                         astitch_broadcast_in_dim(g, lse, 2, d, keep)));
    return g;
}

/* The same rows in f32 under the 32-register bound (a block of 1024 per row): the walks take 8
 * single elements a thread per iteration, not 2 (the online max-and-sum walk and the output's,
 * with their remainders: at least 32 loads of x in the code; 15 at two). */
static void test_odd_row_walk_tight(void **state)
{
    (void)state;
    astitch_graph *g = logsoftmax(context(), 256, 50257);
    check("log-softmax f32 [256, 50257]", g, "load float", 32, "load <4 x float>", 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shuffle_f16),
        cmocka_unit_test(test_shuffle_f32_sum),
        cmocka_unit_test(test_shuffle_odd),
        cmocka_unit_test(test_gate),
        cmocka_unit_test(test_odd_row_walk),
        cmocka_unit_test(test_odd_row_walk_tight),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
