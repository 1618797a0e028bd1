/*
 * test_heavy_broadcast.c: which expensive values before a broadcast are made once and which are
 * recomputed per element (lib/passes/dominant.c, few_instructions). For the h100 model: a
 * squeeze-and-excitation gate, x * broadcast(sigmoid(s)), recomputes the sigmoid per element
 * (local, no block barrier), as exp, log, sqrt and rsqrt of an input; cos of an input (a
 * library sequence) is made once, a sub-dominant, and so is an exp of a reduction (its readers
 * wait for the reduction anyway). Every plan runs on the host target against the reference on
 * fresh random inputs.
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
#include "graph_fixture.h"

enum { B = 4, C = 24, HW = 49 };

/* out = x * broadcast(op(v)) over [B, C, HW]: v is the input s [B, C] (positive, for log and
 * sqrt: s * s + 1), or with reduced, the sum of x over HW. */
static void build(astitch_graph *g, astitch_op op, bool reduced)
{
    int64_t d[3] = {B, C, HW}, vd[2] = {B, C}, keep[2] = {0, 1}, axis = 2;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 3, d);
    astitch_node v;
    if (reduced) {
        v = astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, &axis);
    } else {
        double one = 1.0;
        astitch_node s = astitch_parameter(g, "s", ASTITCH_F32, 2, vd);
        v = astitch_binary(g, ASTITCH_OP_ADD, astitch_binary(g, ASTITCH_OP_MUL, s, s),
                           astitch_constant(g, ASTITCH_F32, 2, vd, &one, 1));
    }
    astitch_node gate = named(g, astitch_unary(g, op, v), "gate");
    astitch_node y = astitch_binary(g, ASTITCH_OP_MUL, x,
                                    astitch_broadcast_in_dim(g, gate, 3, d, keep));
    assert_int_equal(astitch_add_output(g, y), ASTITCH_OK);
}

static void check(Fixture *f, astitch_op op, bool reduced, bool recomputed)
{
    build(f->g, op, reduced);
    astitch_plan *p = fixture_plan_h100(f);
    astitch_op_info gi = op_info(p, f->g, "gate");
    astitch_kernel_info ki;
    assert_int_equal(astitch_plan_kernel_info(p, gi.kernel, &ki), ASTITCH_OK);
    char what[64];
    snprintf(what, sizeof what, "%s of %s", astitch_op_name(op), reduced ? "a sum" : "an input");
    printf("%s: %s, phase %d, %lld evaluations, %d block barriers\n", what,
           astitch_role_name(gi.role), gi.phase, (long long)gi.evals, ki.block_barriers);
    bool local = gi.phase < 0;
    if (local != recomputed)
        fail_msg("%s: %s, wanted %s", what, local ? "recomputed" : "made once",
                 recomputed ? "recomputed" : "made once");
    if (recomputed && (gi.evals != (int64_t)B * C * HW || ki.block_barriers != 0))
        fail_msg("%s: %lld evaluations, %d block barriers", what, (long long)gi.evals,
                 ki.block_barriers);
    check_h100_values(f->g, what);
}

static void test_sigmoid(void **state) { check(*state, ASTITCH_OP_SIGMOID, false, true); }
static void test_exp(void **state) { check(*state, ASTITCH_OP_EXP, false, true); }
static void test_log(void **state) { check(*state, ASTITCH_OP_LOG, false, true); }
static void test_sqrt(void **state) { check(*state, ASTITCH_OP_SQRT, false, true); }
static void test_rsqrt(void **state) { check(*state, ASTITCH_OP_RSQRT, false, true); }
static void test_cos(void **state) { check(*state, ASTITCH_OP_COS, false, false); }
static void test_tanh(void **state) { check(*state, ASTITCH_OP_TANH, false, false); }
static void test_after_reduce(void **state) { check(*state, ASTITCH_OP_SIGMOID, true, false); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_sigmoid), FIXTURE_TEST(test_exp),  FIXTURE_TEST(test_log),
        FIXTURE_TEST(test_sqrt),    FIXTURE_TEST(test_rsqrt), FIXTURE_TEST(test_cos),
        FIXTURE_TEST(test_tanh),    FIXTURE_TEST(test_after_reduce),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
