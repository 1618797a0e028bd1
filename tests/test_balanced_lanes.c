/* test_balanced_lanes.c: a resident row whose power-of-two lanes leave a fifth or more of their
 * vector slots idle takes the multiple of a warp that holds it in the fewest registers, and its
 * block follows (lib/passes/map_row.c, balanced_lanes): layer norms over 2560 and 4544 bf16
 * (160 and 192 lanes), an RMSNorm over 3072 bf16 (192), planned for the h100 model and run on
 * the host target against the reference on fresh random inputs. Rows with fewer idle slots
 * (5120 bf16, 4544 f32), a kernel whose block does not follow its rows (a weight gradient's
 * column sum beside them) and persistent kernels keep 256 lanes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "astitch/plan.h"
#include "diff_check.h"
#include "host_check.h"
#include "gen_graph.h"

static astitch_node to_f32(astitch_graph *g, astitch_node x, astitch_dtype t)
{
    return t == ASTITCH_F32 ? x : astitch_convert(g, x, ASTITCH_F32);
}

static astitch_node to_t(astitch_graph *g, astitch_node x, astitch_dtype t)
{
    return t == ASTITCH_F32 ? x : astitch_convert(g, x, t);
}

static astitch_graph *new_graph(astitch_context *ctx)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    return g;
}

/* A layer norm over the rows of x [rows, cols] of t, statistics in f32, output in t. */
static astitch_graph *layer_norm(astitch_context *ctx, astitch_dtype t, int64_t rows,
                                 int64_t cols)
{
    astitch_graph *g = new_graph(ctx);
    int64_t dims[2] = {rows, cols};
    astitch_node mean, x = to_f32(g, astitch_parameter(g, "x", t, 2, dims), t);
    astitch_node y = gen_layer_norm(g, x, rows, cols, 1e-5, &mean);
    assert_int_equal(astitch_add_output(g, to_t(g, y, t)), ASTITCH_OK);
    return g;
}

/* weight * x * rsqrt(mean(x^2) + eps) over the rows of x [rows, cols] of t, output in t. */
static astitch_graph *rms_norm(astitch_context *ctx, astitch_dtype t, int64_t rows, int64_t cols)
{
    astitch_graph *g = new_graph(ctx);
    int64_t dims[2] = {rows, cols}, last = 1;
    astitch_node x = to_f32(g, astitch_parameter(g, "x", t, 2, dims), t);
    astitch_node w = to_f32(g, astitch_parameter(g, "weight", t, 1, &cols), t);
    astitch_node out = astitch_binary(g, ASTITCH_OP_MUL, gen_rms_norm(g, x, rows, cols, 1e-6),
                                      astitch_broadcast_in_dim(g, w, 2, dims, &last));
    assert_int_equal(astitch_add_output(g, to_t(g, out, t)), ASTITCH_OK);
    return g;
}

/* rms_norm's normalized rows, and beside them the sum down the rows of dy * x * r with r an
 * input [rows] (an RMSNorm weight's gradient from the saved rstd): a column group beside the
 * resident rows in one kernel of a block per tile. */
static astitch_graph *rms_norm_weight_grad(astitch_context *ctx, astitch_dtype t, int64_t rows,
                                           int64_t cols)
{
    astitch_graph *g = new_graph(ctx);
    int64_t dims[2] = {rows, cols}, first = 0;
    astitch_node x = to_f32(g, astitch_parameter(g, "x", t, 2, dims), t);
    astitch_node dy = to_f32(g, astitch_parameter(g, "dy", t, 2, dims), t);
    astitch_node r = astitch_parameter(g, "rstd", ASTITCH_F32, 1, &rows);
    astitch_node n = gen_rms_norm(g, x, rows, cols, 1e-6);
    assert_int_equal(astitch_add_output(g, to_t(g, n, t)), ASTITCH_OK);
    astitch_node xr = astitch_binary(g, ASTITCH_OP_MUL, x,
                                     astitch_broadcast_in_dim(g, r, 2, dims, &first));
    astitch_node prod = astitch_binary(g, ASTITCH_OP_MUL, dy, xr);
    assert_int_equal(astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, prod, 1, &first)),
                     ASTITCH_OK);
    return g;
}

typedef astitch_graph *(*Build)(astitch_context *ctx, astitch_dtype t, int64_t rows,
                                int64_t cols);

/* Plans build(t, rows, cols) for the h100 model (persistent where asked): its first phase is
 * resident at `lanes` lanes of `per_lane` elements, its first kernel's block a multiple of
 * them (`block` where not 0); then runs it on the host target against the reference. */
static void check(const char *what, Build build, astitch_dtype t, int64_t rows, int64_t cols,
                  bool persistent, int lanes, int64_t per_lane, int block)
{
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = build(ctx, t, rows, cols);
    astitch_compile_options o;
    astitch_device model;
    astitch_phase_info ph;
    host_check_plan(g, what, &model, &o, &ph);
    o.plan.persistent = persistent;
    astitch_kernel_info k;
    host_check_replan(g, what, &o, &ph, &k);
    int64_t e = astitch_mapping_elements_per_thread(&ph.mapping);
    printf("%s %s [%lld, %lld]%s: %s, %d lanes per row, %lld elements per lane, block %d\n",
           what, astitch_dtype_name(t), (long long)rows, (long long)cols,
           persistent ? " persistent" : "", ph.resident ? "resident" : "streamed",
           ph.mapping.threads_per_row, (long long)e, k.block);
    assert_true(ph.resident);
    assert_int_equal(ph.mapping.threads_per_row, lanes);
    assert_int_equal(e, per_lane);
    assert_int_equal(k.block % lanes, 0);
    if (block > 0)
        assert_int_equal(k.block, block);
    host_check_run(g, &o, what);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

static void test_balanced(void **state)
{
    (void)state;
    /* 320 vectors of 8: 256 lanes of 2 leave 192 of 512 slots idle; 160 lanes of 2 none */
    check("layernorm", layer_norm, ASTITCH_BF16, 5, 2560, false, 160, 16, 160);
    /* 568 vectors: 256 lanes of 3 leave 200 of 768 idle; 192 lanes of 3 leave 8 */
    check("layernorm", layer_norm, ASTITCH_BF16, 3, 4544, false, 192, 24, 192);
    /* 384 vectors: 256 lanes of 2 leave 128 of 512 idle; 192 lanes of 2 none */
    check("rmsnorm", rms_norm, ASTITCH_BF16, 7, 3072, false, 192, 16, 192);
}

static void test_kept(void **state)
{
    (void)state;
    /* 640 vectors: 256 lanes of 3 leave 128 of 768 idle, less than a fifth */
    check("rmsnorm", rms_norm, ASTITCH_BF16, 6, 5120, false, 256, 24, 256);
    /* 1136 vectors of 4: 256 lanes of 5 leave 144 of 1280 idle */
    check("layernorm", layer_norm, ASTITCH_F32, 3, 4544, false, 256, 20, 256);
    /* the block follows the column sum, not the rows */
    check("rmsnorm weight gradient", rms_norm_weight_grad, ASTITCH_BF16, 6, 2560, false, 256,
          16, 256);
    /* a persistent kernel's block is the wave's */
    check("layernorm", layer_norm, ASTITCH_BF16, 5, 2560, true, 256, 16, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_balanced),
        cmocka_unit_test(test_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
