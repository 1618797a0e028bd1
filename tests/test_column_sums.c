/* test_column_sums.c: column reductions summed in the resident row pass of the same elements
 * (plan option column_sums_in_rows: the planner's across step, lib/passes/across.c; code in
 * lib/codegen/emit_resident.c), on the host target planned for the h100 model: where the step
 * applies (the column reduce is materialized in the row group's phase, combined by atomics,
 * and the kernel reads its inputs once) and where it must not (option off, deterministic option, the sum read inside the
 * kernel, rows too long to stay in registers, an integer sum); every case checked against the
 * reference on fresh random inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "diff_check.h"
#include "passes/plan.h"

typedef struct Case {
    const char *what;
    astitch_dtype dtype;        /* of the inputs; the sums are f32 (i32 for ASTITCH_I32) */
    int rank;
    int64_t dims[3];            /* the space: the row sum reduces the last axis, the column
                                 * reduce every other */
    astitch_reduce_kind column; /* the column reduce's kind */
    bool column_read;           /* an output reads the column result inside the kernel */
    bool wide_rows, persistent, deterministic;
    bool option_off;            /* plan option column_sums_in_rows off (else on) */
    bool across;                /* expected: the column reduce is summed in the row pass */
} Case;

/* A layer-norm backward's shape over x, dy of c's space: p = x * dy; row sums of p, the
 * column reduce of p, and dx = p - row sum (a later phase of the rows). */
static astitch_graph *build(astitch_context *ctx, const Case *c, astitch_node *col)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int r = c->rank;
    int64_t last = r - 1, lead[2] = {0, 1}, keep_rows[2] = {0, 1}, keep_cols[1] = {r - 1};
    astitch_node x = astitch_parameter(g, "x", c->dtype, r, c->dims);
    astitch_node dy = astitch_parameter(g, "dy", c->dtype, r, c->dims);
    astitch_dtype acc = c->dtype == ASTITCH_I32 ? ASTITCH_I32 : ASTITCH_F32;
    if (c->dtype != acc) {
        x = astitch_convert(g, x, acc);
        dy = astitch_convert(g, dy, acc);
    }
    astitch_node p = astitch_binary(g, ASTITCH_OP_MUL, x, dy);
    astitch_node row = astitch_reduce(g, ASTITCH_REDUCE_SUM, p, 1, &last);
    *col = astitch_reduce(g, c->column, p, r - 1, lead);
    astitch_node dx = astitch_binary(g, ASTITCH_OP_SUB, p,
                                     astitch_broadcast_in_dim(g, row, r, c->dims, keep_rows));
    astitch_add_output(g, row);
    astitch_add_output(g, dx);
    astitch_add_output(g, *col);
    if (c->column_read)
        astitch_add_output(g, astitch_binary(g, ASTITCH_OP_MUL, p,
                                             astitch_broadcast_in_dim(g, *col, r, c->dims,
                                                                      keep_cols)));
    return g;
}

static void check_case(const Case *c)
{
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_node col;
    astitch_graph *g = build(ctx, c, &col);
    if (astitch_graph_verify(g) != ASTITCH_OK)
        fail_msg("%s: verify: %s", c->what, astitch_last_error(ctx));
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_HOST;
    o.plan.wide_rows = c->wide_rows;
    o.plan.persistent = c->persistent;
    o.plan.deterministic = c->deterministic;
    o.plan.column_sums_in_rows = !c->option_off;
    astitch_device model;
    assert_int_equal(astitch_device_builtin("h100", &model), ASTITCH_OK);
    o.device = &model;
    astitch_executable *x = NULL;
    if (astitch_compile(g, &o, &x) != ASTITCH_OK)
        fail_msg("%s: compile: %s", c->what, astitch_last_error(ctx));
    const astitch_plan *plan = astitch_executable_plan(x);
    astitch_op_info info;
    assert_int_equal(astitch_plan_node_info(plan, col, &info), ASTITCH_OK);
    astitch_phase_info ph;
    assert_int_equal(astitch_plan_phase_info(plan, info.kernel, info.phase, &ph), ASTITCH_OK);
    bool across = ph.mapping.kind == ASTITCH_MAP_ROW_REDUCE;
    if (across != c->across)
        fail_msg("%s: the column reduce is %s in the row pass", c->what,
                 across ? "summed" : "not summed");
    if (across) {
        astitch_kernel_info k;
        assert_int_equal(astitch_plan_kernel_info(plan, info.kernel, &k), ASTITCH_OK);
        /* atomics into a destination set before the launch, unless one block does it all */
        assert_true(plan_kernel_op(&plan->kernel[info.kernel], col)->zero_init ==
                    (ph.mapping.grid > 1));
        assert_true(ph.mapping.vector > 0);
        if (k.moved_bytes != k.min_bytes)
            fail_msg("%s: kernel moves %lld bytes, %lld minimal", c->what,
                     (long long)k.moved_bytes, (long long)k.min_bytes);
    }
    uint64_t seed = diff_fresh_seed();
    DiffRef *d = NULL;
    if (diff_ref_create(g, seed, true, &d) != ASTITCH_OK)
        fail_msg("%s: reference: %s", c->what, astitch_last_error(ctx));
    DiffResult r;
    astitch_status s = diff_ref_check(d, x, &r);
    printf("%s: %s, seed %llu, worst normalized error %.3g\n", c->what,
           across ? "summed in the row pass" : "own pass", (unsigned long long)seed, r.worst);
    if (s != ASTITCH_OK)
        fail_msg("%s: run: %s", c->what, astitch_last_error(ctx));
    if (!r.ok)
        fail_msg("%s (seed %llu): %s", c->what, (unsigned long long)seed, r.message);
    diff_ref_destroy(d);
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

static const astitch_reduce_kind SUM = ASTITCH_REDUCE_SUM;

/* Where the step applies: mappings of every kind it meets. */
static void test_summed_in_rows(void **state)
{
    (void)state;
    static const Case cases[] = {
        {"a warp per row", ASTITCH_F32, 2, {512, 1024}, SUM, .across = true},
        {"rows of a partial last tile", ASTITCH_F32, 2, {300, 768}, SUM, .across = true},
        {"short rows, several per warp", ASTITCH_F32, 2, {333, 96}, SUM, .across = true},
        {"ragged rows", ASTITCH_F32, 2, {129, 50}, SUM, .across = true},
        {"bf16 inputs, 8 per access", ASTITCH_BF16, 2, {256, 768}, SUM, .across = true},
        {"wide rows, several warps per row", ASTITCH_F32, 2, {96, 2048}, SUM, .wide_rows = true,
         .across = true},
        {"long rows over 256 lanes", ASTITCH_F32, 2, {40, 4096}, SUM, .across = true},
        {"column max", ASTITCH_F32, 2, {200, 256}, ASTITCH_REDUCE_MAX, .across = true},
        {"column min", ASTITCH_F16, 2, {200, 256}, ASTITCH_REDUCE_MIN, .across = true},
        {"rank 3, two leading axes", ASTITCH_F32, 3, {3, 70, 160}, SUM, .across = true},
        {"persistent: tiles walked per block", ASTITCH_F32, 2, {4000, 128}, SUM,
         .persistent = true, .across = true},
        {"one block, no atomics", ASTITCH_F32, 2, {6, 64}, SUM, .across = true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
}

/* Where it must not: the column reduce keeps its own pass, and is still right. */
static void test_own_pass(void **state)
{
    (void)state;
    static const Case cases[] = {
        {"option off (the default)", ASTITCH_F32, 2, {512, 1024}, SUM, .option_off = true},
        {"deterministic option", ASTITCH_F32, 2, {512, 1024}, SUM, .deterministic = true},
        {"column sum read in the kernel", ASTITCH_F32, 2, {512, 1024}, SUM, .column_read = true},
        {"rows too long for registers", ASTITCH_F32, 2, {16, 20000}, SUM, .across = false},
        {"integer sum", ASTITCH_I32, 2, {256, 512}, SUM, .across = false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_case(&cases[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summed_in_rows),
        cmocka_unit_test(test_own_pass),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
