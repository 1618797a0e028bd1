/*
 * test_own_block.c: a global value read at elements the reading block made waits only at a
 * block barrier (lib/passes/schemes.c, Read.own_block; lib/passes/sched.c): a per-sample value
 * broadcast over its sample's elements, also read across samples by a later phase (so global).
 * The blocks then own contiguous chunks, not interleaved tiles (lib/codegen/emit.c), and the
 * values on the host target, running the h100 model's plan, match the reference on fresh
 * random inputs (with interleaved tiles, a block read samples another block had not yet made).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "astitch/plan.h"
#include "astitch/runtime.h"
#include "diff_check.h"
#include "graph_fixture.h"

/* s = sin(tanh(p)) over 54 samples (after the max of p, so behind a grid barrier), broadcast
 * over each sample's [158, 144] (out_big) and [158] (out_row), and the two [54, 158]
 * broadcasts concatenated into [108, 158] (another block's samples). */
static void build(astitch_graph *g)
{
    int64_t n = 54, big[3] = {54, 158, 144}, row[2] = {54, 158}, zero = 0;
    astitch_node p = astitch_parameter(g, "p", ASTITCH_F32, 1, &n);
    astitch_node s = named(g, astitch_unary(g, ASTITCH_OP_SIN, astitch_unary(g, ASTITCH_OP_TANH, p)),
                           "s");
    astitch_node mx = named(g, astitch_reduce(g, ASTITCH_REDUCE_MAX, p, 1, &zero), "max");
    astitch_node b6 = astitch_broadcast_in_dim(g, s, 2, row, &zero);
    astitch_node out_big = named(g, astitch_broadcast_in_dim(g, b6, 3, big, (int64_t[]){0, 1}),
                                 "out_big");
    astitch_node out_row = named(g, astitch_broadcast_in_dim(g, s, 2, row, &zero), "out_row");
    astitch_node cat = named(g, astitch_concatenate(g, 2, (astitch_node[]){b6, out_row}, 0), "cat");
    assert_int_equal(astitch_add_output(g, out_big), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, out_row), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, cat), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, mx), ASTITCH_OK);
}

static void test_own_samples(void **state)
{
    Fixture *f = *state;
    build(f->g);
    const astitch_plan *p = fixture_plan_h100(f);
    astitch_op_info s = op_info(p, f->g, "s"), big = op_info(p, f->g, "out_big");
    assert_int_equal(s.scheme, ASTITCH_SCHEME_GLOBAL);
    assert_int_equal(big.kernel, s.kernel);
    astitch_phase_info ph;
    assert_int_equal(astitch_plan_phase_info(p, big.kernel, big.phase, &ph), ASTITCH_OK);
    assert_int_equal(ph.barrier, ASTITCH_BARRIER_BLOCK);
    astitch_kernel_info k;
    assert_int_equal(astitch_plan_kernel_info(p, big.kernel, &k), ASTITCH_OK);
    assert_int_equal(k.shared_bytes, 0); /* no shared buffer would have stopped interleaving */
    check_h100_values(f->g, "own samples");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_own_samples, fixture_setup, fixture_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
