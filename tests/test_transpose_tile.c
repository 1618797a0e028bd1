/*
 * test_transpose_tile.c: element-wise kernels that read a value through a transpose moving the
 * innermost axis walk square tiles through shared memory (lib/passes/transpose.c,
 * lib/codegen/emit_transpose.c). For the h100 model: which plans take a tile (a TILE buffer,
 * blocks of 256, one block per tile) and which keep the plain element-wise walk; on the host
 * target, running those plans, every output against the reference on fresh random inputs:
 * edges that do not fill a tile, bf16 (in pairs where both tiled axes are even) and i32 values,
 * the transpose read twice or beside other values, the transposed value itself an output, and a
 * transpose of rank 4. With the plan option transpose_tiles off, no plan takes a tile.
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

typedef enum Form { BIAS, TWICE, OUTPUT_TOO, RANK4, KEEPS_INNER, NARROW, REDUCED } Form;

typedef struct Case {
    const char *what;
    Form form;
    int64_t b, s, h;
    astitch_dtype dtype;
    bool tiled; /* the plan takes a tile */
} Case;

/* [b, s, h] x (+ bias [h]) transposed to [b, h, s], with the extras of c->form. */
static astitch_graph *build(astitch_context *ctx, const Case *c)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t dims[3] = {c->b, c->s, c->h};
    int64_t perm3[3] = {0, 2, 1}, keep3[3] = {1, 0, 2}, perm4[4] = {0, 3, 1, 2};
    if (c->form == RANK4) { /* [b, s, 16, h] as NHWC to [b, h, s, 16] as NCHW */
        int64_t d4[4] = {c->b, c->s, 16, c->h};
        astitch_node x = astitch_parameter(g, "x", c->dtype, 4, d4);
        astitch_node t = astitch_transpose(g, x, perm4);
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
 * 256 with the shared memory of a tile of 64 x 64 for 2-byte values (`narrow`), else 32 x 32.
 * `tiles`: the plan option transpose_tiles; off, the text plan's first line says so. */
static bool plan_tiled(astitch_graph *g, bool narrow, bool tiles)
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
        {"bias, f32, whole tiles", BIAS, 2, 64, 96, ASTITCH_F32, true},
        {"bias, f32, edges", BIAS, 3, 45, 17, ASTITCH_F32, true},
        {"bias, bf16", BIAS, 2, 40, 72, ASTITCH_BF16, true},
        {"bias, bf16, two tiles each way", BIAS, 1, 130, 200, ASTITCH_BF16, true},
        {"bias, f16, edges", BIAS, 1, 33, 50, ASTITCH_F16, true},
        {"bias, i32", BIAS, 2, 32, 48, ASTITCH_I32, true},
        {"read twice, beside another input", TWICE, 2, 50, 70, ASTITCH_F32, true},
        {"an output and read again", OUTPUT_TOO, 2, 36, 64, ASTITCH_F32, true},
        {"rank 4", RANK4, 2, 20, 24, ASTITCH_F32, true},
        {"keeps the innermost axis", KEEPS_INNER, 2, 64, 96, ASTITCH_F32, false},
        {"an axis under 16", NARROW, 4, 64, 8, ASTITCH_F32, false},
        {"reduced after", REDUCED, 2, 64, 96, ASTITCH_F32, false},
    };
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    uint64_t seed = diff_fresh_seed();
    printf("seed %llu\n", (unsigned long long)seed);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const Case *c = &cases[i];
        astitch_graph *g = build(ctx, c);
        bool narrow = c->dtype == ASTITCH_F16 || c->dtype == ASTITCH_BF16;
        if (plan_tiled(g, narrow, true) != c->tiled)
            fail_msg("%s: the plan %s a tile", c->what, c->tiled ? "takes no" : "takes");
        if (plan_tiled(g, narrow, false))
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
