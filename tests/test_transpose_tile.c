/*
 * test_transpose_tile.c: element-wise kernels that read a value through a transpose moving the
 * innermost axis walk square tiles through shared memory (lib/passes/transpose.c,
 * lib/codegen/emit_transpose.c). For the h100 model: which plans take a tile (a TILE buffer,
 * blocks of 256, one block per tile) and which keep the plain element-wise walk; on the host
 * target, running those plans, every output against the reference on fresh random inputs:
 * edges that do not fill a tile, bf16 (in pairs where both tiled axes are even) and i32 values,
 * the transpose read twice or beside other values, the transposed value itself an output, and
 * transposes of rank 4 whose tiled axes take the axes before them along (NHWC to NCHW tiles C
 * and H x W; NCHW to NHWC, H x W and C), with W under 16 and odd. With the plan option
 * transpose_tiles off, no plan takes a tile.
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

typedef enum Form { BIAS, TWICE, OUTPUT_TOO, RANK4, TO_NHWC, KEEPS_INNER, NARROW, REDUCED } Form;

typedef struct Case {
    const char *what;
    Form form;
    int64_t b, s, h;
    int64_t w; /* RANK4, TO_NHWC: the width */
    astitch_dtype dtype;
    const char *axes; /* the tile's runs, as the text plan names them */
    bool tiled; /* the plan takes a tile */
} Case;

/* [b, s, h] x (+ bias [h]) transposed to [b, h, s], with the extras of c->form. */
static astitch_graph *build(astitch_context *ctx, const Case *c)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t dims[3] = {c->b, c->s, c->h};
    int64_t perm3[3] = {0, 2, 1}, keep3[3] = {1, 0, 2}, to_nchw[4] = {0, 3, 1, 2},
            to_nhwc[4] = {0, 2, 3, 1};
    if (c->form == RANK4 || c->form == TO_NHWC) {
        /* RANK4: [b, s, w, h] as NHWC to [b, h, s, w] as NCHW; TO_NHWC: [b, s, h, w] as NCHW,
         * plus a bias over w (read at each element's own w), to [b, h, w, s] as NHWC */
        int64_t d4[4] = {c->b, c->s, c->form == RANK4 ? c->w : c->h,
                         c->form == RANK4 ? c->h : c->w};
        astitch_node x = astitch_parameter(g, "x", c->dtype, 4, d4);
        if (c->form == TO_NHWC) {
            int64_t on_w = 3;
            astitch_node wb = astitch_parameter(g, "wb", c->dtype, 1, &c->w);
            x = astitch_binary(g, ASTITCH_OP_ADD, x, astitch_broadcast_in_dim(g, wb, 4, d4, &on_w));
        }
        astitch_node t = astitch_transpose(g, x, c->form == RANK4 ? to_nchw : to_nhwc);
        assert_int_equal(astitch_add_output(g, astitch_unary(g, ASTITCH_OP_NEG, t)), ASTITCH_OK);
        assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
        return g;
    }
    astitch_node x = astitch_parameter(g, "x", c->dtype, 3, dims);
    astitch_node bias = astitch_parameter(g, "bias", c->dtype, 1, &c->h);
    int64_t on_h = 2;
    astitch_node y = astitch_binary(g, ASTITCH_OP_ADD, x,
                                    astitch_broadcast_in_dim(g, bias, 3, dims, &on_h));
    astitch_node t = astitch_transpose(g, y, c->form == KEEPS_INNER ? keep3 : perm3);
    switch (c->form) {
    case TWICE: { /* t * t + z, z read at the space's own elements */
        int64_t td[3] = {c->b, c->h, c->s};
        astitch_node z = astitch_parameter(g, "z", c->dtype, 3, td);
        astitch_node sq = astitch_binary(g, ASTITCH_OP_MUL, t, t);
        assert_int_equal(astitch_add_output(g, astitch_binary(g, ASTITCH_OP_ADD, sq, z)),
                         ASTITCH_OK);
        break;
    }
    case OUTPUT_TOO: /* the transposed value and its negation, both outputs */
        assert_int_equal(astitch_add_output(g, t), ASTITCH_OK);
        assert_int_equal(astitch_add_output(g, astitch_unary(g, ASTITCH_OP_NEG, t)),
                         ASTITCH_OK);
        break;
    case REDUCED: { /* a row sum of the transposed value: no longer one element-wise phase */
        int64_t last = 2;
        astitch_node r = astitch_reduce(g, ASTITCH_REDUCE_SUM, t, 1, &last);
        assert_int_equal(astitch_add_output(g, r), ASTITCH_OK);
        break;
    }
    default:
        assert_int_equal(astitch_add_output(g, t), ASTITCH_OK);
    }
    assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
    return g;
}

/* Whether g's one kernel for the h100 model takes a tile: a TILE buffer, and then blocks of
 * 256 with the shared memory of a tile of 64 x 64 for 2-byte values (`narrow`), else 32 x 32,
 * and the text plan's tile line ending in "over axes " `axes` (its two runs).
 * `tiles`: the plan option transpose_tiles; off, the text plan's first line says so. */
static bool plan_tiled(astitch_graph *g, bool narrow, bool tiles, const char *axes)
{
    astitch_device dev;
    astitch_device_builtin("h100", &dev);
    astitch_plan_options po;
    astitch_plan_options_default(&po);
    po.transpose_tiles = tiles;
    astitch_plan *p = NULL;
    if (astitch_plan_create(g, &dev, &po, &p) != ASTITCH_OK)
        fail_msg("plan: %s", astitch_last_error(astitch_graph_context(g)));
    char *text = NULL;
    assert_int_equal(astitch_plan_text(p, &text), ASTITCH_OK);
    assert_true((strstr(text, ", transpose tiles off") != NULL) == !tiles);
    char line[64];
    snprintf(line, sizeof line, "elements over axes %s\n", axes);
    bool axes_named = strstr(text, line) != NULL;
    astitch_free(text);
    assert_int_equal(astitch_plan_num_kernels(p), 1);
    astitch_kernel_info ki;
    assert_int_equal(astitch_plan_kernel_info(p, 0, &ki), ASTITCH_OK);
    bool tiled = false;
    for (int b = 0; b < ki.num_buffers; b++) {
        astitch_buffer_info bi;
        assert_int_equal(astitch_plan_buffer_info(p, 0, b, &bi), ASTITCH_OK);
        tiled |= bi.kind == ASTITCH_BUFFER_TILE;
    }
    if (tiled) {
        if (!axes_named)
            fail_msg("the plan's tile is not over axes %s", axes);
        assert_int_equal(ki.block, 256);
        assert_int_equal(ki.shared_bytes, narrow ? 64 * 65 * 4 : 32 * 33 * 4);
    }
    astitch_plan_destroy(p);
    return tiled;
}

static void test_tiles(void **state)
{
    (void)state;
    static const Case cases[] = {
        {"bias, f32, whole tiles", BIAS, 2, 64, 96, 0, ASTITCH_F32, "1 and 2", true},
        {"bias, f32, edges", BIAS, 3, 45, 17, 0, ASTITCH_F32, "1 and 2", true},
        {"bias, bf16", BIAS, 2, 40, 72, 0, ASTITCH_BF16, "1 and 2", true},
        {"bias, bf16, two tiles each way", BIAS, 1, 130, 200, 0, ASTITCH_BF16, "1 and 2", true},
        {"bias, f16, edges", BIAS, 1, 33, 50, 0, ASTITCH_F16, "1 and 2", true},
        {"bias, i32", BIAS, 2, 32, 48, 0, ASTITCH_I32, "1 and 2", true},
        {"read twice, beside another input", TWICE, 2, 50, 70, 0, ASTITCH_F32, "1 and 2", true},
        {"an output and read again", OUTPUT_TOO, 2, 36, 64, 0, ASTITCH_F32, "1 and 2", true},
        {"rank 4", RANK4, 2, 20, 24, 16, ASTITCH_F32, "1 and 2-3", true},
        {"NHWC to NCHW, 7 x 7", RANK4, 3, 7, 40, 7, ASTITCH_F32, "1 and 2-3", true},
        {"NHWC to NCHW, bf16, odd W in pairs", RANK4, 2, 10, 40, 5, ASTITCH_BF16, "1 and 2-3", true},
        {"NHWC to NCHW, bf16, odd H x W", RANK4, 2, 9, 34, 5, ASTITCH_BF16, "1 and 2-3", true},
        {"NCHW to NHWC, 7 x 7", TO_NHWC, 3, 40, 7, 7, ASTITCH_F32, "1-2 and 3", true},
        {"NCHW to NHWC, bf16, odd W", TO_NHWC, 2, 70, 6, 5, ASTITCH_BF16, "1-2 and 3", true},
        {"NCHW to NHWC, f16, H x W over two tiles", TO_NHWC, 2, 36, 12, 11, ASTITCH_F16, "1-2 and 3", true},
        {"keeps the innermost axis", KEEPS_INNER, 2, 64, 96, 0, ASTITCH_F32, NULL, false},
        {"an axis under 16", NARROW, 4, 64, 8, 0, ASTITCH_F32, NULL, false},
        {"H x W under 16", RANK4, 2, 3, 40, 5, ASTITCH_F32, NULL, false},
        {"reduced after", REDUCED, 2, 64, 96, 0, ASTITCH_F32, NULL, false},
    };
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    uint64_t seed = diff_fresh_seed();
    printf("seed %llu\n", (unsigned long long)seed);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const Case *c = &cases[i];
        astitch_graph *g = build(ctx, c);
        bool narrow = c->dtype == ASTITCH_F16 || c->dtype == ASTITCH_BF16;
        if (plan_tiled(g, narrow, true, c->axes) != c->tiled)
            fail_msg("%s: the plan %s a tile", c->what, c->tiled ? "takes no" : "takes");
        if (plan_tiled(g, narrow, false, c->axes))
            fail_msg("%s: the plan takes a tile with transpose_tiles off", c->what);
        astitch_device model;
        astitch_compile_options o;
        astitch_phase_info first;
        assert_int_equal(diff_host_as(g, "h100", &model, &o, &first), ASTITCH_OK);
        DiffResult r;
        if (diff_run_with(g, &o, seed + i, &r) != ASTITCH_OK)
            fail_msg("%s: %s", c->what, astitch_last_error(ctx));
        if (!r.ok)
            fail_msg("%s (seed %llu): %s", c->what, (unsigned long long)(seed + i), r.message);
        astitch_graph_destroy(g);
    }
    astitch_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
