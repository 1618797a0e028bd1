/* test_long_rows.c: rows of 4097 to 8192 elements (the hidden sizes of larger models: 5120,
 * 6144, 8192) are resident at the most lanes a row takes (256), 20 to 32 elements per lane,
 * planned for the h100 model; a row past 256 x 32 streams. Each plan also runs on the host
 * target against the reference on fresh random inputs (RMSNorm in bf16 and f32, a layer norm,
 * lengths that 256 lanes of vectors do not divide). Streamed rows that no run divides take
 * blocks of 512. With the long_rows option, rows of 8193 to 32768 elements are resident at up
 * to 1024 lanes, a block of 1024 at the register bound 64, one per SM (softmaxes in f32 and
 * bf16, a layer norm, an RMSNorm in single elements, a softmax whose column sum follows in a
 * persistent kernel; their combines across 32 warps by shuffles), on the host target against
 * the reference too; shorter and longer rows plan as
 * without it, and a layer norm's variance keeps its two walks where the option holds its rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "astitch/plan.h"
#include "diff_check.h"
#include "host_check.h"
#include "gen_graph.h"

static astitch_node to_f32(astitch_graph *g, astitch_node x, astitch_dtype t)
{
    return t == ASTITCH_F32 ? x : astitch_convert(g, x, ASTITCH_F32);
}

/* weight * x * rsqrt(mean(x^2) + eps) over the rows of x [rows, cols], in f32, output in t. */
static astitch_graph *rms_norm(astitch_context *ctx, astitch_dtype t, int64_t rows, int64_t cols)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t dims[2] = {rows, cols}, last = 1;
    astitch_node x = to_f32(g, astitch_parameter(g, "x", t, 2, dims), t);
    astitch_node w = to_f32(g, astitch_parameter(g, "weight", t, 1, &cols), t);
    astitch_node out = astitch_binary(g, ASTITCH_OP_MUL, gen_rms_norm(g, x, rows, cols, 1e-6),
                                      astitch_broadcast_in_dim(g, w, 2, dims, &last));
    assert_int_equal(astitch_add_output(g, t == ASTITCH_F32 ? out : astitch_convert(g, out, t)),
                     ASTITCH_OK);
    return g;
}

/* (x - mean) * rstd over the rows of x [rows, cols] (f32), with the mean as a second output. */
static astitch_graph *layer_norm(astitch_context *ctx, astitch_dtype t, int64_t rows,
                                 int64_t cols)
{
    (void)t;
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t dims[2] = {rows, cols};
    astitch_node mean, x = astitch_parameter(g, "x", ASTITCH_F32, 2, dims);
    assert_int_equal(astitch_add_output(g, gen_layer_norm(g, x, rows, cols, 1e-5, &mean)),
                     ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, mean), ASTITCH_OK);
    return g;
}

/* The softmax over the rows of x [rows, cols] (values of t, computed in f32, output in t). */
static astitch_graph *softmax(astitch_context *ctx, astitch_dtype t, int64_t rows, int64_t cols)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t dims[2] = {rows, cols};
    astitch_node x = to_f32(g, astitch_parameter(g, "x", t, 2, dims), t);
    astitch_node p = gen_softmax_rows(g, x, rows, cols);
    assert_int_equal(astitch_add_output(g, t == ASTITCH_F32 ? p : astitch_convert(g, p, t)),
                     ASTITCH_OK);
    return g;
}

/* softmax(), and the sum of its rows as a second output: a column sum after the rows, behind a
 * global barrier of a persistent kernel. */
static astitch_graph *softmax_column_sum(astitch_context *ctx, astitch_dtype t, int64_t rows,
                                         int64_t cols)
{
    astitch_graph *g = softmax(ctx, t, rows, cols);
    int64_t axis = 0;
    astitch_node p = astitch_graph_output(g, 0);
    astitch_node pf = t == ASTITCH_F32 ? p : astitch_convert(g, p, ASTITCH_F32);
    assert_int_equal(astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, pf, 1, &axis)),
                     ASTITCH_OK);
    return g;
}

typedef astitch_graph *(*Build)(astitch_context *ctx, astitch_dtype t, int64_t rows,
                                int64_t cols);

/* Plans build(t, rows, cols) for the h100 model (with the long_rows option where `long_rows`):
 * its first phase is resident with `lanes` lanes of `per_lane` elements (per_lane 0: streamed);
 * then runs it on the host target against the reference. */
static void check_rows_as(const char *what, Build build, astitch_dtype t, int64_t rows,
                          int64_t cols, bool long_rows, int lanes, int64_t per_lane)
{
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = build(ctx, t, rows, cols);
    astitch_compile_options o;
    astitch_device model;
    astitch_phase_info ph;
    host_check_plan(g, what, &model, &o, &ph);
    if (long_rows) { /* the first phase again, under the option */
        o.plan.long_rows = true;
        astitch_kernel_info k;
        host_check_replan(g, what, &o, &ph, &k);
    }
    int64_t e = astitch_mapping_elements_per_thread(&ph.mapping);
    printf("%s %s [%lld, %lld]: %s, %d lanes per row, %lld elements per lane\n", what,
           astitch_dtype_name(t), (long long)rows, (long long)cols,
           ph.resident ? "resident" : "streamed", ph.mapping.threads_per_row, (long long)e);
    assert_int_equal(ph.resident, per_lane > 0);
    if (per_lane > 0) {
        assert_int_equal(ph.mapping.threads_per_row, lanes);
        assert_int_equal(e, per_lane);
    }
    host_check_run(g, &o, what);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

static void check_rows(const char *what, Build build, astitch_dtype t, int64_t rows, int64_t cols,
                       int64_t per_lane)
{
    check_rows_as(what, build, t, rows, cols, false, 256, per_lane);
}

static void test_resident(void **state)
{
    (void)state;
    check_rows("rmsnorm", rms_norm, ASTITCH_BF16, 6, 5120, 24);  /* 640 vectors of 8 */
    check_rows("rmsnorm", rms_norm, ASTITCH_BF16, 3, 8192, 32);
    check_rows("rmsnorm", rms_norm, ASTITCH_F32, 4, 6000, 24);   /* 1500 vectors of 4 */
    check_rows("layernorm", layer_norm, ASTITCH_F32, 5, 8192, 32);
    check_rows("layernorm", layer_norm, ASTITCH_F32, 3, 4098, 18); /* vectors of 2 */
}

static void test_streamed(void **state)
{
    (void)state;
    check_rows("rmsnorm", rms_norm, ASTITCH_F32, 2, 8200, 0); /* 36 per lane: more than 32 */
    check_rows("layernorm", layer_norm, ASTITCH_F32, 2, 9000, 0);
}

/* build(t, rows, cols) planned for the h100 model, with or without long_rows: its text
 * past the line of options (malloc'd) and its one kernel's info. */
static char *h100_plan(Build build, astitch_dtype t, int64_t rows, int64_t cols, bool long_rows,
                       astitch_kernel_info *k)
{
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = build(ctx, t, rows, cols);
    astitch_device d;
    assert_int_equal(astitch_device_builtin("h100", &d), ASTITCH_OK);
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    o.long_rows = long_rows;
    astitch_plan *p = NULL;
    if (astitch_plan_create(g, &d, &o, &p) != ASTITCH_OK)
        fail_msg("plan: %s", astitch_last_error(ctx));
    assert_int_equal(astitch_plan_num_kernels(p), 1);
    assert_int_equal(astitch_plan_kernel_info(p, 0, k), ASTITCH_OK);
    char *text = NULL, *nl;
    assert_int_equal(astitch_plan_text(p, &text), ASTITCH_OK);
    nl = strchr(text, '\n'); /* past the line of options, which names long rows */
    char *copy = strdup(nl ? nl + 1 : "");
    assert_non_null(copy);
    astitch_free(text);
    astitch_plan_destroy(p);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
    return copy;
}

/* The block of build(F32, rows, cols)'s one kernel planned for the h100 model. */
static int32_t h100_block(Build build, int64_t rows, int64_t cols)
{
    astitch_kernel_info k;
    free(h100_plan(build, ASTITCH_F32, rows, cols, false, &k));
    return k.block;
}

/* Rows streamed in single elements (no 16-byte run divides 9999 or 15999) take blocks of 512
 * (lib/passes/mapping.c, STREAM_SINGLE_BLOCK); rows that runs divide keep blocks of 1024; the
 * single-element walk in those blocks against the reference on the host. */
static void test_streamed_single_block(void **state)
{
    (void)state;
    assert_int_equal(h100_block(layer_norm, 4096, 9999), 512);
    assert_int_equal(h100_block(rms_norm, 4096, 15999), 512);
    assert_int_equal(h100_block(layer_norm, 2048, 16384), 1024);
    check_rows("layernorm", layer_norm, ASTITCH_F32, 600, 9999, 0); /* a row per block: no split */
    check_rows("rmsnorm", rms_norm, ASTITCH_F32, 600, 15999, 0);
}

/* Rows of 8193 to 32768 elements with the long_rows option: resident at 1024 lanes (16-byte
 * vectors of f32 and bf16, single elements where none divides 15999 or 20001), and against the
 * reference on the host; without it, or past 1024 x 32 elements, streamed. */
static void test_long_option(void **state)
{
    (void)state;
    check_rows_as("softmax", softmax, ASTITCH_F32, 3, 32768, true, 1024, 32);
    check_rows_as("softmax", softmax, ASTITCH_BF16, 2, 32768, true, 1024, 32);
    check_rows_as("softmax", softmax, ASTITCH_F16, 2, 20001, true, 1024, 20);
    check_rows_as("layernorm", layer_norm, ASTITCH_F32, 3, 16384, true, 1024, 16);
    check_rows_as("rmsnorm", rms_norm, ASTITCH_F32, 2, 15999, true, 1024, 16);
    check_rows_as("softmax, column sum", softmax_column_sum, ASTITCH_BF16, 6, 20000, true, 1024,
                  24); /* a persistent kernel: one block of 1024 per SM, a global barrier */
    check_rows_as("softmax", softmax, ASTITCH_F32, 2, 32768, false, 0, 0);
    check_rows_as("softmax", softmax, ASTITCH_F32, 2, 40000, true, 0, 0); /* 40 per lane */
}

/* The kernel of a long resident row: a block of 1024 threads at the bound they leave (64), one
 * per SM, a block per row. Rows up to 8192 plan the same with the option; a layer norm over
 * 16384 keeps its variance's second walk over registers with it, and takes the one-pass
 * variance without. */
static void test_long_kernel(void **state)
{
    (void)state;
    astitch_kernel_info k;
    free(h100_plan(softmax, ASTITCH_F32, 2048, 32768, true, &k));
    assert_int_equal(k.block, 1024);
    assert_int_equal(k.regs, 64);
    assert_int_equal(k.blocks_per_sm, 1);
    assert_int_equal(k.grid, 2048);
    char *off = h100_plan(layer_norm, ASTITCH_F32, 64, 8192, false, &k);
    char *on = h100_plan(layer_norm, ASTITCH_F32, 64, 8192, true, &k);
    assert_string_equal(off, on);
    free(off);
    free(on);
    off = h100_plan(layer_norm, ASTITCH_F32, 2048, 16384, false, &k);
    on = h100_plan(layer_norm, ASTITCH_F32, 2048, 16384, true, &k);
    assert_non_null(strstr(off, "rewritten (one-pass variance"));
    assert_null(strstr(on, "rewritten (one-pass variance"));
    free(off);
    free(on);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resident),
        cmocka_unit_test(test_streamed),
        cmocka_unit_test(test_streamed_single_block),
        cmocka_unit_test(test_long_option),
        cmocka_unit_test(test_long_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
