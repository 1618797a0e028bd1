/*
 * test_short_rows.c: the lanes of a resident row whose length no vector divides (mapping.c,
 * resident_layout: single elements fill a 32-byte sector, 16-byte vectors a 128-byte line).
 * For the h100 model: a mean over the 49 positions of a 7 x 7 map takes 8 lanes of f32 and 16
 * of f16, a softmax over 77 f16 keys 16 lanes, over 257 32; rows that vectors divide keep the
 * line (48 f32: 8 lanes of vectors of 4; 64 f16: 8 lanes of vectors of 8). Every plan runs
 * on the host target against the reference on fresh random inputs.
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

typedef enum Form { MEAN, SOFTMAX } Form;

/* A mean or a softmax over the last axis of [rows, len] of dtype t (computed in f32). */
static void build(astitch_graph *g, Form form, astitch_dtype t, int64_t rows, int64_t len)
{
    int64_t d[2] = {rows, len}, axis = 1, keep = 0;
    astitch_node x = astitch_parameter(g, "x", t, 2, d);
    astitch_node xf = t == ASTITCH_F32 ? x : astitch_convert(g, x, ASTITCH_F32);
    astitch_node y;
    if (form == MEAN) {
        double n = (double)len;
        astitch_node count = astitch_broadcast_in_dim(
            g, astitch_constant(g, ASTITCH_F32, 0, NULL, &n, 1), 1, d, NULL);
        y = astitch_binary(g, ASTITCH_OP_DIV, astitch_reduce(g, ASTITCH_REDUCE_SUM, xf, 1, &axis),
                           count);
    } else {
        astitch_node mx = astitch_reduce(g, ASTITCH_REDUCE_MAX, xf, 1, &axis);
        astitch_node e = astitch_unary(
            g, ASTITCH_OP_EXP,
            astitch_binary(g, ASTITCH_OP_SUB, xf, astitch_broadcast_in_dim(g, mx, 2, d, &keep)));
        astitch_node sum = astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &axis);
        y = astitch_binary(g, ASTITCH_OP_DIV, e, astitch_broadcast_in_dim(g, sum, 2, d, &keep));
    }
    if (t != ASTITCH_F32)
        y = astitch_convert(g, y, t);
    assert_int_equal(astitch_add_output(g, y), ASTITCH_OK);
}

static void check(Fixture *f, Form form, astitch_dtype t, int64_t rows, int64_t len,
                  int32_t lanes, int32_t vector)
{
    build(f->g, form, t, rows, len);
    astitch_plan *p = fixture_plan_h100(f);
    astitch_group_info gi;
    assert_int_equal(astitch_plan_group_info(p, 0, 0, &gi), ASTITCH_OK);
    const char *what = form == MEAN ? "mean" : "softmax";
    printf("%s over [%lld, %lld] %s: %d lanes of vectors of %d\n", what, (long long)rows,
           (long long)len, astitch_dtype_name(t), gi.mapping.threads_per_row, gi.mapping.vector);
    if (gi.mapping.threads_per_row != lanes || gi.mapping.vector != vector)
        fail_msg("%s over %lld %s: %d lanes of vectors of %d, wanted %d of %d", what,
                 (long long)len, astitch_dtype_name(t), gi.mapping.threads_per_row,
                 gi.mapping.vector, lanes, vector);
    check_h100_values(f->g, what);
}

static void test_pool_f32(void **state) { check(*state, MEAN, ASTITCH_F32, 300, 49, 8, 1); }
static void test_pool_f16(void **state) { check(*state, MEAN, ASTITCH_F16, 300, 49, 16, 1); }
static void test_keys_77(void **state) { check(*state, SOFTMAX, ASTITCH_F16, 200, 77, 16, 1); }
static void test_keys_257(void **state) { check(*state, SOFTMAX, ASTITCH_F16, 64, 257, 32, 1); }
static void test_vectors_f32(void **state) { check(*state, MEAN, ASTITCH_F32, 300, 48, 8, 4); }
static void test_vectors_f16(void **state) { check(*state, SOFTMAX, ASTITCH_F16, 200, 64, 8, 8); }

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_pool_f32),    FIXTURE_TEST(test_pool_f16),
        FIXTURE_TEST(test_keys_77),     FIXTURE_TEST(test_keys_257),
        FIXTURE_TEST(test_vectors_f32), FIXTURE_TEST(test_vectors_f16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
