/*
 * test_access_width.c: a phase's accesses fill 16 bytes of the widest tensor it reads or writes
 * at its elements, not of the narrowest (plan_access_elements, lib/passes/walk.c; the planner's
 * space_access_bytes, lib/passes/mapping.c). An f16 gradient unscaled into f32 with a found-inf
 * check took 8 elements per access: each lane stored 32 bytes of f32 as two 16-byte halves, and
 * ran at 0.66 of the same walk in runs of 4 (bench/RESULTS.md, *Accesses as wide as the widest
 * tensor*). Checked in the LLVM IR of the h100 model's plan (no 8-wide f32 vector, 4-wide ones
 * present), in the resident rows' `vector`, and by the values on the host target against the
 * reference on fresh random inputs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "astitch/plan.h"
#include "astitch/runtime.h"
#include "codegen/compile.h"
#include "diff_check.h"
#include "graph_fixture.h"
#include "runtime/runtime.h"

/* Occurrences of `needle` in the LLVM IR of g compiled for the host target with the h100
 * model's plan. */
static int ir_count(astitch_graph *g, const char *needle)
{
    astitch_context *ctx = astitch_graph_context(g);
    if (astitch_graph_verify(g) != ASTITCH_OK)
        fail_msg("verify: %s", astitch_last_error(ctx));
    astitch_device model;
    astitch_compile_options o;
    astitch_phase_info first;
    if (diff_host_as(g, "h100", &model, &o, &first) != ASTITCH_OK)
        fail_msg("plan: %s", astitch_last_error(ctx));
    astitch_executable *x = NULL;
    if (astitch_compile(g, &o, &x) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(ctx));
    char *ir = NULL;
    if (compile_llvm_text(x->ctx, x->plan, &ir) != ASTITCH_OK)
        fail_msg("llvm: %s", astitch_last_error(ctx));
    int n = 0;
    for (const char *at = ir; (at = strstr(at, needle)); at++)
        n++;
    free(ir);
    astitch_executable_destroy(x);
    return n;
}

static astitch_node splat(astitch_graph *g, astitch_node scalar, int rank, const int64_t *dims)
{
    return astitch_broadcast_in_dim(g, scalar, rank, dims, NULL);
}

/* GradScaler's unscale of f16 gradients g [dims] into f32: out = f32(g) * inv_scale, and
 * found_inf = any(|g| == inf or g != g) over every element (a bool scalar: a reduce's result,
 * not a tensor of the phase's elements). */
static void build_unscale(astitch_graph *g, const int64_t *dims)
{
    astitch_node x = astitch_parameter(g, "g", ASTITCH_F16, 2, dims);
    astitch_node s = astitch_parameter(g, "inv_scale", ASTITCH_F32, 0, NULL);
    astitch_node xf = astitch_convert(g, x, ASTITCH_F32);
    double inf = INFINITY;
    astitch_node big = splat(g, astitch_constant(g, ASTITCH_F32, 0, NULL, &inf, 1), 2, dims);
    astitch_node bad = astitch_binary(
        g, ASTITCH_OP_OR,
        astitch_binary(g, ASTITCH_OP_EQ, astitch_unary(g, ASTITCH_OP_ABS, xf), big),
        astitch_binary(g, ASTITCH_OP_NE, xf, xf));
    int64_t all[2] = {0, 1};
    assert_int_equal(astitch_add_output(g, named(g, astitch_binary(g, ASTITCH_OP_MUL, xf,
                                                                   splat(g, s, 2, dims)),
                                                 "out")),
                     ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, named(g, astitch_reduce(g, ASTITCH_REDUCE_ANY, bad, 2,
                                                                   all),
                                                 "found_inf")),
                     ASTITCH_OK);
}

/* One long row (streamed, split over blocks): f32 stores of 4, f16 loads of 4 (as i16). */
static void test_unscale_streamed(void **state)
{
    Fixture *f = *state;
    build_unscale(f->g, (int64_t[]){64, 4096});
    assert_int_equal(ir_count(f->g, "store <8 x float>"), 0);
    assert_true(ir_count(f->g, "store <4 x float>") > 0);
    assert_true(ir_count(f->g, "load <4 x i16>") > 0);
    check_h100_values(f->g, "unscale");
}

/* x * s stored as bf16, element-wise: f32 loads of 4 (two of 4 in a lane were 32 bytes). */
static void test_cast_down(void **state)
{
    Fixture *f = *state;
    int64_t dims[2] = {512, 1024};
    astitch_node x = astitch_parameter(f->g, "x", ASTITCH_F32, 2, dims);
    astitch_node s = astitch_parameter(f->g, "s", ASTITCH_F32, 0, NULL);
    astitch_node y = astitch_binary(f->g, ASTITCH_OP_MUL, x, splat(f->g, s, 2, dims));
    assert_int_equal(astitch_add_output(f->g, named(f->g, astitch_convert(f->g, y, ASTITCH_BF16),
                                                    "y")),
                     ASTITCH_OK);
    assert_int_equal(ir_count(f->g, "load <8 x float>"), 0);
    assert_true(ir_count(f->g, "load <4 x float>") > 0);
    check_h100_values(f->g, "cast down");
}

/* A softmax of bf16 rows of 1024 written as f32, rows held in registers: vector 4. The same in
 * bf16 throughout keeps 8. */
static void softmax(astitch_graph *g, astitch_dtype out_type)
{
    int64_t dims[2] = {64, 1024}, axis = 1, keep = 0;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_BF16, 2, dims);
    astitch_node xf = astitch_convert(g, x, ASTITCH_F32);
    astitch_node m = astitch_reduce(g, ASTITCH_REDUCE_MAX, xf, 1, &axis);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, astitch_binary(g, ASTITCH_OP_SUB, xf,
                                   astitch_broadcast_in_dim(g, m, 2, dims, &keep)));
    astitch_node sum = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &axis), "sum");
    astitch_node p = astitch_binary(g, ASTITCH_OP_DIV, e,
                                    astitch_broadcast_in_dim(g, sum, 2, dims, &keep));
    if (out_type != ASTITCH_F32)
        p = astitch_convert(g, p, out_type);
    assert_int_equal(astitch_add_output(g, named(g, p, "p")), ASTITCH_OK);
}

static int32_t sum_vector(Fixture *f)
{
    const astitch_plan *p = fixture_plan_h100(f);
    astitch_op_info sum = op_info(p, f->g, "sum");
    astitch_phase_info ph;
    assert_int_equal(astitch_plan_phase_info(p, sum.kernel, sum.phase, &ph), ASTITCH_OK);
    return ph.mapping.vector;
}

static void test_resident_rows(void **state)
{
    Fixture *f = *state;
    softmax(f->g, ASTITCH_F32);
    assert_int_equal(sum_vector(f), 4);
    assert_int_equal(ir_count(f->g, "store <8 x float>"), 0);
    check_h100_values(f->g, "softmax to f32");
}

static void test_resident_rows_bf16(void **state)
{
    Fixture *f = *state;
    softmax(f->g, ASTITCH_BF16);
    assert_int_equal(sum_vector(f), 8);
    check_h100_values(f->g, "softmax in bf16");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_unscale_streamed),
        FIXTURE_TEST(test_cast_down),
        FIXTURE_TEST(test_resident_rows),
        FIXTURE_TEST(test_resident_rows_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
