/*
 * test_group_order.c: a group that reads another group's results runs after all of that
 * group's phases (lib/passes/propagate.c, root_order). AdaIN normalizes the content by its own
 * statistics and scales it by the style's: placed in node order, the content's statistics ran
 * first, the style's between them and the output, and the output read the content a second
 * time. Now the style's phases come first and the content's statistics and the output are one
 * tile run over rows held in registers, so the kernel moves its minimal bytes; the values on the
 * host target, running the h100 model's plan, match the reference on fresh random inputs.
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

static astitch_node splat(astitch_graph *g, double v, int rank, const int64_t *dims)
{
    astitch_node c = astitch_constant(g, ASTITCH_F32, 0, NULL, &v, 1);
    return astitch_broadcast_in_dim(g, c, rank, dims, NULL);
}

/* Per-channel mean and standard deviation of x [n, c, h, w] over h and w; the mean is also
 * returned broadcast back over x (for the centered values). */
static void stats(astitch_graph *g, astitch_node x, const int64_t *dims, const char *tag,
                  astitch_node *mean, astitch_node *std)
{
    int64_t nc[2] = {dims[0], dims[1]}, hw[2] = {2, 3};
    double count = (double)(dims[2] * dims[3]);
    char name[32];
    snprintf(name, sizeof name, "%s.sum", tag);
    astitch_node s = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 2, hw), name);
    *mean = astitch_binary(g, ASTITCH_OP_DIV, s, splat(g, count, 2, nc));
    astitch_node d = astitch_binary(g, ASTITCH_OP_SUB, x,
                                    astitch_broadcast_in_dim(g, *mean, 4, dims, (int64_t[]){0, 1}));
    snprintf(name, sizeof name, "%s.sq", tag);
    astitch_node q = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM,
                                             astitch_binary(g, ASTITCH_OP_MUL, d, d), 2, hw),
                           name);
    astitch_node var = astitch_binary(g, ASTITCH_OP_DIV, q, splat(g, count, 2, nc));
    *std = astitch_unary(g, ASTITCH_OP_SQRT,
                         astitch_binary(g, ASTITCH_OP_ADD, var, splat(g, 1e-5, 2, nc)));
}

/* y = (c - mean(c)) / std(c) * std(s) + mean(s): the content's statistics come first in node
 * order, as torch writes it. */
static void build_adain(astitch_graph *g, int64_t n, int64_t ch, int64_t ch_side, int64_t st_side)
{
    int64_t cd[4] = {n, ch, ch_side, ch_side}, sd[4] = {n, ch, st_side, st_side};
    int64_t keep[2] = {0, 1};
    astitch_node c = astitch_parameter(g, "content", ASTITCH_F32, 4, cd);
    astitch_node s = astitch_parameter(g, "style", ASTITCH_F32, 4, sd);
    astitch_node cm, cs, sm, ss;
    stats(g, c, cd, "c", &cm, &cs);
    stats(g, s, sd, "s", &sm, &ss);
    astitch_node norm = astitch_binary(
        g, ASTITCH_OP_DIV,
        astitch_binary(g, ASTITCH_OP_SUB, c, astitch_broadcast_in_dim(g, cm, 4, cd, keep)),
        astitch_broadcast_in_dim(g, cs, 4, cd, keep));
    astitch_node y = astitch_binary(
        g, ASTITCH_OP_ADD,
        astitch_binary(g, ASTITCH_OP_MUL, norm, astitch_broadcast_in_dim(g, ss, 4, cd, keep)),
        astitch_broadcast_in_dim(g, sm, 4, cd, keep));
    assert_int_equal(astitch_add_output(g, named(g, y, "y")), ASTITCH_OK);
}

/* The content [8, 512, 64, 64] and style [8, 512, 32, 32] of a style-transfer network. */
static void test_adain_reads_once(void **state)
{
    Fixture *f = *state;
    build_adain(f->g, 8, 512, 64, 32);
    const astitch_plan *p = fixture_plan_h100(f);
    astitch_op_info csum = op_info(p, f->g, "c.sum"), ssq = op_info(p, f->g, "s.sq");
    astitch_op_info y = op_info(p, f->g, "y");
    assert_int_equal(y.kernel, csum.kernel);
    assert_int_equal(ssq.kernel, csum.kernel);
    assert_true(ssq.phase < csum.phase); /* the style's statistics first */
    astitch_phase_info ph;
    assert_int_equal(astitch_plan_phase_info(p, y.kernel, y.phase, &ph), ASTITCH_OK);
    assert_int_equal(ph.run_first, csum.phase); /* one tile run: the content's rows kept */
    astitch_kernel_info k;
    assert_int_equal(astitch_plan_kernel_info(p, y.kernel, &k), ASTITCH_OK);
    assert_int_equal(k.moved_bytes, k.min_bytes);
}

/* Small shapes on the host target with the h100 model's plan. */
static void test_adain_values(void **state)
{
    Fixture *f = *state;
    build_adain(f->g, 2, 24, 16, 8);
    check_h100_values(f->g, "adain");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_adain_reads_once),
        FIXTURE_TEST(test_adain_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
