/* test_resident_slot.c: values a resident row run computes a slot at a time (emit_slot.c), so
 * that its kernel inputs are read with vector loads, no scalar load left in the PTX, planned for
 * the h100 model: a concatenate (a ViT's [CLS] token in front of its patch embeddings, then a
 * layer norm), and a broadcast of a kernel input (an RMSNorm's weight over the rows, an
 * attention mask over the heads and queries). Every graph also runs on the host target (the
 * same kernels) against the reference on fresh random inputs, with cases the slot walk cannot
 * take (boundaries that split a vector) or that keep a scalar load (a per-row value broadcast
 * along the row) among them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "diff_check.h"
#include "gen_graph.h"

static astitch_node to_f32(astitch_graph *g, astitch_node x)
{
    return astitch_convert(g, x, ASTITCH_F32);
}

/* The layer norm of x [rows, cols] (f32), in dtype t: an output of g. */
static void layer_norm_out(astitch_graph *g, astitch_node x, int64_t rows, int64_t cols,
                           astitch_dtype t)
{
    astitch_node out = gen_layer_norm(g, x, rows, cols, 1e-5, NULL);
    assert_int_equal(astitch_add_output(g, astitch_convert(g, out, t)), ASTITCH_OK);
}

/* A ViT's embedding: patches [batch, tokens - 1, cols] + bias, the [CLS] token [1, 1, cols]
 * tiled over the batch in front (concatenated along the tokens), + the position embedding
 * [1, tokens, cols]; flattened to rows (an output), then its layer norm. */
static astitch_graph *vit_embed(astitch_context *ctx, astitch_dtype t, int64_t batch,
                                int64_t tokens, int64_t cols)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t pd[3] = {batch, tokens - 1, cols}, one[3] = {1, 1, cols}, pos[3] = {1, tokens, cols};
    int64_t cd[3] = {batch, 1, cols}, all[3] = {batch, tokens, cols}, last = 2;
    int64_t same[3] = {0, 1, 2}, rows[2] = {batch * tokens, cols};
    astitch_node patches = to_f32(g, astitch_parameter(g, "patches", t, 3, pd));
    astitch_node bias = to_f32(g, astitch_parameter(g, "bias", t, 1, &cols));
    astitch_node cls = to_f32(g, astitch_parameter(g, "cls", t, 3, one));
    astitch_node pe = to_f32(g, astitch_parameter(g, "pos", t, 3, pos));
    astitch_node x[2] = {astitch_broadcast_in_dim(g, cls, 3, cd, same),
                         astitch_binary(g, ASTITCH_OP_ADD, patches,
                                        astitch_broadcast_in_dim(g, bias, 3, pd, &last))};
    astitch_node emb = astitch_binary(g, ASTITCH_OP_ADD, astitch_concatenate(g, 2, x, 1),
                                      astitch_broadcast_in_dim(g, pe, 3, all, same));
    astitch_node flat = astitch_reshape(g, emb, 2, rows);
    assert_int_equal(astitch_add_output(g, astitch_convert(g, flat, t)), ASTITCH_OK);
    layer_norm_out(g, flat, rows[0], cols, t);
    return g;
}

/* Rows made of pieces of `widths` columns side by side (a concatenate along the reduced axis),
 * each piece scaled by a vector of its own, then the layer norm. */
static astitch_graph *side_by_side(astitch_context *ctx, astitch_dtype t, int64_t rows,
                                   const int64_t *widths, int n)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    astitch_node x[4];
    int64_t cols = 0, last = 1;
    for (int i = 0; i < n; i++) {
        char name[16];
        int64_t d[2] = {rows, widths[i]};
        snprintf(name, sizeof name, "piece%d", i);
        astitch_node p = to_f32(g, astitch_parameter(g, name, t, 2, d));
        snprintf(name, sizeof name, "scale%d", i);
        astitch_node s = to_f32(g, astitch_parameter(g, name, t, 1, &widths[i]));
        x[i] = astitch_binary(g, ASTITCH_OP_MUL, p, astitch_broadcast_in_dim(g, s, 2, d, &last));
        cols += widths[i];
    }
    layer_norm_out(g, astitch_concatenate(g, n, x, 1), rows, cols, t);
    return g;
}

/* Rows stacked from pieces of `heights` rows (a concatenate along the kept axis), the
 * layer norm of their sum with a broadcast row. */
static astitch_graph *stacked(astitch_context *ctx, astitch_dtype t, int64_t cols,
                              const int64_t *heights, int n)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    astitch_node x[4];
    int64_t rows = 0, last = 1;
    for (int i = 0; i < n; i++) {
        char name[16];
        int64_t d[2] = {heights[i], cols};
        snprintf(name, sizeof name, "part%d", i);
        x[i] = to_f32(g, astitch_parameter(g, name, t, 2, d));
        rows += heights[i];
    }
    int64_t dims[2] = {rows, cols};
    astitch_node shift = to_f32(g, astitch_parameter(g, "shift", t, 1, &cols));
    layer_norm_out(g, astitch_binary(g, ASTITCH_OP_ADD, astitch_concatenate(g, n, x, 0),
                                     astitch_broadcast_in_dim(g, shift, 2, dims, &last)),
                   rows, cols, t);
    return g;
}

/* x * rsqrt(mean(x * x) + eps) * weight over the rows of x [rows, cols], weight [cols], in
 * dtype t: an output. `per_row`: x is first scaled by a kernel input of one value per row
 * (broadcast along the row). */
static astitch_graph *rms_norm(astitch_context *ctx, astitch_dtype t, int64_t rows, int64_t cols,
                               bool per_row)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t d[2] = {rows, cols}, last = 1, first = 0;
    astitch_node x = to_f32(g, astitch_parameter(g, "x", t, 2, d));
    astitch_node w = to_f32(g, astitch_parameter(g, "weight", t, 1, &cols));
    if (per_row) {
        astitch_node s = to_f32(g, astitch_parameter(g, "row_scale", t, 1, &rows));
        x = astitch_binary(g, ASTITCH_OP_MUL, x, astitch_broadcast_in_dim(g, s, 2, d, &first));
    }
    astitch_node y = astitch_binary(g, ASTITCH_OP_MUL, gen_rms_norm(g, x, rows, cols, 1e-6),
                                    astitch_broadcast_in_dim(g, w, 2, d, &last));
    assert_int_equal(astitch_add_output(g, astitch_convert(g, y, t)), ASTITCH_OK);
    return g;
}

/* softmax(scores / 8 + mask) over the keys: scores [batch, heads, queries, keys], the additive
 * padding mask [batch, 1, 1, keys] broadcast over the heads and queries, in dtype t. */
static astitch_graph *masked_softmax(astitch_context *ctx, astitch_dtype t, int64_t batch,
                                     int64_t heads, int64_t queries, int64_t keys)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t d[4] = {batch, heads, queries, keys}, md[4] = {batch, 1, 1, keys};
    int64_t same[4] = {0, 1, 2, 3}, last = 3;
    astitch_node s = to_f32(g, astitch_parameter(g, "scores", t, 4, d));
    astitch_node m = to_f32(g, astitch_parameter(g, "mask", t, 4, md));
    astitch_node eight = astitch_constant(g, ASTITCH_F32, 0, NULL, &(double){8.0}, 1);
    astitch_node x = astitch_binary(g, ASTITCH_OP_DIV, s, astitch_broadcast_in_dim(g, eight, 4, d, NULL));
    x = astitch_binary(g, ASTITCH_OP_ADD, x, astitch_broadcast_in_dim(g, m, 4, d, same));
    astitch_node max = astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, &last);
    astitch_node ex = astitch_unary(g, ASTITCH_OP_EXP, astitch_binary(g, ASTITCH_OP_SUB, x,
                                    astitch_broadcast_in_dim(g, max, 4, d, same)));
    astitch_node sum = astitch_reduce(g, ASTITCH_REDUCE_SUM, ex, 1, &last);
    astitch_node p = astitch_binary(g, ASTITCH_OP_DIV, ex, astitch_broadcast_in_dim(g, sum, 4, d, same));
    assert_int_equal(astitch_add_output(g, astitch_convert(g, p, t)), ASTITCH_OK);
    return g;
}

/* Global loads of one element in ptx (a vector load names .v2, .v4 or .v8). */
static int scalar_loads(const char *ptx)
{
    int n = 0;
    for (const char *p = ptx; (p = strstr(p, "ld.global.")) != NULL; p += 10)
        n += strncmp(p + 10, "v2.", 3) && strncmp(p + 10, "v4.", 3) && strncmp(p + 10, "v8.", 3);
    return n;
}

/* Plans g for the h100 model: its first phase resident; its PTX without a scalar load when
 * `vectors`; then runs it on the host target against the reference. Destroys g. */
static void check(const char *what, astitch_graph *g, bool vectors)
{
    astitch_context *ctx = astitch_graph_context(g);
    if (astitch_graph_verify(g) != ASTITCH_OK)
        fail_msg("%s: verify: %s", what, astitch_last_error(ctx));
    astitch_compile_options o;
    astitch_device model;
    astitch_phase_info ph;
    if (diff_host_as(g, "h100", &model, &o, &ph) != ASTITCH_OK)
        fail_msg("%s: plan: %s", what, astitch_last_error(ctx));
    if (!ph.resident)
        fail_msg("%s: the first phase is not resident", what);
    astitch_compile_options po = o;
    po.target = ASTITCH_TARGET_CUDA;
    char *ptx = NULL;
    if (astitch_emit(g, &po, "ptx", &ptx) != ASTITCH_OK)
        fail_msg("%s: emit ptx: %s", what, astitch_last_error(ctx));
    int scalars = scalar_loads(ptx);
    astitch_free(ptx);
    uint64_t seed = diff_fresh_seed();
    DiffResult r;
    if (diff_run_with(g, &o, seed, &r) != ASTITCH_OK)
        fail_msg("%s: run: %s", what, astitch_last_error(ctx));
    printf("%s: %d lanes per row, vector %d, %d scalar global loads; host against the "
           "reference: seed %llu, worst normalized error %.3g\n", what,
           ph.mapping.threads_per_row, ph.mapping.vector, scalars, (unsigned long long)seed,
           r.worst);
    if (!r.ok)
        fail_msg("%s (seed %llu): %s", what, (unsigned long long)seed, r.message);
    if (vectors && scalars)
        fail_msg("%s: %d scalar global loads in the PTX", what, scalars);
    astitch_graph_destroy(g);
}

static astitch_context *context(void)
{
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    return ctx;
}

static void test_vit_embedding(void **state)
{
    (void)state;
    astitch_context *ctx = context();
    check("vit f32 [5, 9, 768]", vit_embed(ctx, ASTITCH_F32, 5, 9, 768), true);
    check("vit bf16 [3, 7, 512]", vit_embed(ctx, ASTITCH_BF16, 3, 7, 512), true);
    check("vit f32 [4, 5, 64]", vit_embed(ctx, ASTITCH_F32, 4, 5, 64), true);
    astitch_context_destroy(ctx);
}

static void test_side_by_side(void **state)
{
    (void)state;
    astitch_context *ctx = context();
    int64_t whole[2] = {256, 512}, three[3] = {128, 64, 320}, split[2] = {30, 34};
    check("pieces 256 + 512", side_by_side(ctx, ASTITCH_F32, 6, whole, 2), true);
    check("pieces 128 + 64 + 320 bf16", side_by_side(ctx, ASTITCH_BF16, 5, three, 3), true);
    /* 30 columns end inside a vector: element by element, still right */
    check("pieces 30 + 34", side_by_side(ctx, ASTITCH_F32, 7, split, 2), false);
    astitch_context_destroy(ctx);
}

static void test_stacked(void **state)
{
    (void)state;
    astitch_context *ctx = context();
    int64_t h[3] = {2, 3, 4};
    check("stacked 2 + 3 + 4 rows of 1024", stacked(ctx, ASTITCH_F32, 1024, h, 3), true);
    check("stacked 2 + 3 + 4 rows of 96 bf16", stacked(ctx, ASTITCH_BF16, 96, h, 3), true);
    astitch_context_destroy(ctx);
}

static void test_norm_weight(void **state)
{
    (void)state;
    astitch_context *ctx = context();
    check("rmsnorm f32 [6, 4096]", rms_norm(ctx, ASTITCH_F32, 6, 4096, false), true);
    check("rmsnorm bf16 [5, 1024]", rms_norm(ctx, ASTITCH_BF16, 5, 1024, false), true);
    check("rmsnorm f32 [7, 200]", rms_norm(ctx, ASTITCH_F32, 7, 200, false), true);
    /* the row's own scale is one value per row: read once, as a scalar */
    check("rmsnorm f32 [6, 512] scaled per row", rms_norm(ctx, ASTITCH_F32, 6, 512, true), false);
    astitch_context_destroy(ctx);
}

static void test_attention_mask(void **state)
{
    (void)state;
    astitch_context *ctx = context();
    check("softmax f32 [2, 3, 16, 128]", masked_softmax(ctx, ASTITCH_F32, 2, 3, 16, 128), true);
    check("softmax bf16 [2, 2, 8, 256]", masked_softmax(ctx, ASTITCH_BF16, 2, 2, 8, 256), true);
    check("softmax f32 [3, 2, 5, 36]", masked_softmax(ctx, ASTITCH_F32, 3, 2, 5, 36), false);
    astitch_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vit_embedding),
        cmocka_unit_test(test_side_by_side),
        cmocka_unit_test(test_stacked),
        cmocka_unit_test(test_norm_weight),
        cmocka_unit_test(test_attention_mask),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
