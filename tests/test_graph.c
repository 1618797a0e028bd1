/* test_graph.c: graph building, type rules and every verifier error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ir/ir.h"

typedef struct Fixture {
    astitch_context *ctx;
    astitch_graph *g;
} Fixture;

static int setup(void **state)
{
    static Fixture f;
    assert_int_equal(astitch_context_create(&f.ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(f.ctx, &f.g), ASTITCH_OK);
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    Fixture *f = *state;
    astitch_graph_destroy(f->g);
    astitch_context_destroy(f->ctx);
    return 0;
}

static void assert_error_contains(astitch_context *ctx, const char *needle)
{
    const char *msg = astitch_last_error(ctx);
    if (!strstr(msg, needle))
        fail_msg("error '%s' does not contain '%s'", msg, needle);
}

static const int64_t d43[] = {4, 3};

static void test_layernorm_like_graph_builds(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
    int64_t ax = 1, b0 = 0;
    astitch_node s = astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, &ax);
    astitch_node sb = astitch_broadcast_in_dim(g, s, 2, d43, &b0);
    astitch_node d = astitch_binary(g, ASTITCH_OP_SUB, x, sb);
    astitch_node lt = astitch_binary(g, ASTITCH_OP_LT, d, x);
    astitch_node sel = astitch_select(g, lt, d, x);
    assert_int_equal(astitch_add_output(g, sel), ASTITCH_OK);
    assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
    astitch_tensor_info info;
    assert_int_equal(astitch_node_info(g, s, &info), ASTITCH_OK);
    assert_int_equal(info.rank, 1);
    assert_int_equal(info.dims[0], 4);
    assert_int_equal(astitch_node_info(g, lt, &info), ASTITCH_OK);
    assert_int_equal(info.dtype, ASTITCH_BOOL);
    assert_string_equal(info.name, "lt.4");
    assert_int_equal(astitch_graph_find(g, "x"), x);
    assert_int_equal(astitch_graph_num_parameters(g), 1);
    assert_int_equal(astitch_graph_output(g, 0), sel);
}

static void test_shapes_of_data_movement(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    int64_t d[] = {2, 3, 4};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F16, 3, d);
    int64_t perm[] = {2, 0, 1};
    astitch_node t = astitch_transpose(g, x, perm);
    int64_t st[] = {0, 1, 0}, li[] = {2, 3, 4}, sr[] = {1, 1, 3};
    astitch_node sl = astitch_slice(g, x, st, li, sr);
    astitch_node xs[] = {x, x};
    astitch_node c = astitch_concatenate(g, 2, xs, 1);
    int64_t tab[] = {10, 5}, idx[] = {3, 7};
    astitch_node table = astitch_parameter(g, "table", ASTITCH_BF16, 2, tab);
    astitch_node ids = astitch_parameter(g, "ids", ASTITCH_I32, 2, idx);
    astitch_node ga = astitch_gather(g, table, ids);
    astitch_dot_dims dd = {.nbatch = 1, .lhs_batch = {0}, .rhs_batch = {0}, .ncontract = 1,
                           .lhs_contract = {2}, .rhs_contract = {1}};
    int64_t rd[] = {2, 4, 6};
    astitch_node r = astitch_parameter(g, "r", ASTITCH_F16, 3, rd);
    astitch_node dot = astitch_dot(g, x, r, &dd);
    assert_int_equal(astitch_graph_status(g), ASTITCH_OK);
    struct { astitch_node n; int rank; int64_t dims[4]; } want[] = {
        {t, 3, {4, 2, 3}}, {sl, 3, {2, 2, 2}}, {c, 3, {2, 6, 4}},
        {ga, 3, {3, 7, 5}}, {dot, 3, {2, 3, 6}},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        astitch_tensor_info info;
        assert_int_equal(astitch_node_info(g, want[i].n, &info), ASTITCH_OK);
        assert_int_equal(info.rank, want[i].rank);
        for (int k = 0; k < info.rank; k++)
            assert_int_equal(info.dims[k], want[i].dims[k]);
    }
}

/* Each case builds one bad node on a fresh graph and expects a message fragment. */
typedef astitch_node (*BadBuild)(astitch_graph *g, astitch_node x, astitch_node y);

static astitch_node bad_binary_shape(astitch_graph *g, astitch_node x, astitch_node y)
{
    return astitch_binary(g, ASTITCH_OP_ADD, x, y);
}
static astitch_node bad_exp_int(astitch_graph *g, astitch_node x, astitch_node y)
{
    return astitch_unary(g, ASTITCH_OP_EXP, astitch_convert(g, x, ASTITCH_I32));
}
static astitch_node bad_broadcast(astitch_graph *g, astitch_node x, astitch_node y)
{
    int64_t out[] = {4, 5}, bd[] = {0, 1};
    return astitch_broadcast_in_dim(g, x, 2, out, bd);
}
static astitch_node bad_reshape(astitch_graph *g, astitch_node x, astitch_node y)
{
    int64_t out[] = {5};
    return astitch_reshape(g, x, 1, out);
}
static astitch_node bad_transpose(astitch_graph *g, astitch_node x, astitch_node y)
{
    int64_t perm[] = {0, 0};
    return astitch_transpose(g, x, perm);
}
static astitch_node bad_slice(astitch_graph *g, astitch_node x, astitch_node y)
{
    int64_t s[] = {0, 2}, l[] = {4, 1};
    return astitch_slice(g, x, s, l, NULL);
}
static astitch_node bad_reduce_axis(astitch_graph *g, astitch_node x, astitch_node y)
{
    int64_t ax[] = {1, 1};
    return astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 2, ax);
}
static astitch_node bad_reduce_any(astitch_graph *g, astitch_node x, astitch_node y)
{
    int64_t ax[] = {1};
    return astitch_reduce(g, ASTITCH_REDUCE_ANY, x, 1, ax);
}
static astitch_node bad_rank9(astitch_graph *g, astitch_node x, astitch_node y)
{
    int64_t d[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    return astitch_parameter(g, "p9", ASTITCH_F32, 9, d);
}
static astitch_node bad_overflow(astitch_graph *g, astitch_node x, astitch_node y)
{
    int64_t d[] = {INT64_MAX / 2, 4};
    return astitch_parameter(g, "big", ASTITCH_F32, 2, d);
}
static astitch_node bad_negative(astitch_graph *g, astitch_node x, astitch_node y)
{
    int64_t d[] = {3, -1};
    return astitch_parameter(g, "neg", ASTITCH_F32, 2, d);
}
static astitch_node bad_dup_name(astitch_graph *g, astitch_node x, astitch_node y)
{
    return astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
}
static astitch_node bad_constant_range(astitch_graph *g, astitch_node x, astitch_node y)
{
    double v = 1e6;
    return astitch_constant(g, ASTITCH_F16, 0, NULL, &v, 1);
}
static astitch_node bad_constant_count(astitch_graph *g, astitch_node x, astitch_node y)
{
    double v[] = {1, 2, 3};
    return astitch_constant(g, ASTITCH_F32, 2, d43, v, 3);
}
static astitch_node bad_select(astitch_graph *g, astitch_node x, astitch_node y)
{
    return astitch_select(g, x, x, x);
}
static astitch_node bad_dot(astitch_graph *g, astitch_node x, astitch_node y)
{
    astitch_dot_dims dd = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
    return astitch_dot(g, x, y, &dd);
}
static astitch_node bad_concat(astitch_graph *g, astitch_node x, astitch_node y)
{
    astitch_node xs[] = {x, y};
    return astitch_concatenate(g, 2, xs, 1);
}
static astitch_node bad_gather(astitch_graph *g, astitch_node x, astitch_node y)
{
    return astitch_gather(g, x, y);
}
static astitch_node bad_iota(astitch_graph *g, astitch_node x, astitch_node y)
{
    return astitch_iota(g, ASTITCH_I32, 2, d43, 2);
}
static astitch_node bad_operand(astitch_graph *g, astitch_node x, astitch_node y)
{
    return astitch_unary(g, ASTITCH_OP_NEG, 99);
}
static astitch_node bad_unary_op(astitch_graph *g, astitch_node x, astitch_node y)
{
    return astitch_unary(g, ASTITCH_OP_ADD, x);
}

static void test_builder_errors(void **state)
{
    Fixture *f = *state;
    struct { BadBuild fn; const char *needle; } cases[] = {
        {bad_binary_shape, "operand shapes differ: f32[4,3] vs f32[2]"},
        {bad_exp_int, "needs a float operand, got i32[4,3]"},
        {bad_broadcast, "cannot broadcast f32[4,3] to f32[4,5]"},
        {bad_reshape, "element counts differ"},
        {bad_transpose, "not a permutation"},
        {bad_slice, "start <= limit"},
        {bad_reduce_axis, "out of range or repeated"},
        {bad_reduce_any, "needs a bool operand"},
        {bad_rank9, "rank 9 is outside 0..8"},
        {bad_overflow, "exceeds the limit of 2^40"},
        {bad_negative, "dimension 1 is negative"},
        {bad_dup_name, "duplicate name 'x'"},
        {bad_constant_range, "out of range for f16"},
        {bad_constant_count, "3 values given for 12 elements"},
        {bad_select, "predicate f32[4,3] must be bool"},
        {bad_dot, "contracting dimension 0 differs"},
        {bad_concat, "does not match operand 0"},
        {bad_gather, "must be i32 or i64"},
        {bad_iota, "axis 2 is out of range"},
        {bad_operand, "operand 0 is not a node of the graph"},
        {bad_unary_op, "'add' is not a unary"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        astitch_graph *g;
        assert_int_equal(astitch_graph_create(f->ctx, &g), ASTITCH_OK);
        int64_t d2[] = {2};
        astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
        astitch_node y = astitch_parameter(g, "y", ASTITCH_F32, 1, d2);
        int before = astitch_graph_num_nodes(g);
        assert_int_equal(cases[i].fn(g, x, y), ASTITCH_NO_NODE);
        assert_int_not_equal(astitch_graph_status(g), ASTITCH_OK);
        assert_error_contains(f->ctx, cases[i].needle);
        /* sticky: nothing more can be added, and the failed node left no trace */
        assert_int_equal(astitch_unary(g, ASTITCH_OP_NEG, x), ASTITCH_NO_NODE);
        assert_true(astitch_graph_num_nodes(g) <= before + 1);
        assert_int_not_equal(astitch_graph_verify(g), ASTITCH_OK);
        astitch_graph_destroy(g);
    }
}

static void test_error_names_node(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
    int64_t d2[] = {2};
    astitch_node y = astitch_parameter(g, "y", ASTITCH_F32, 1, d2);
    astitch_binary(g, ASTITCH_OP_ADD, x, y);
    assert_string_equal(astitch_last_error(f->ctx),
                        "node 2 'add.2' (add): operand shapes differ: f32[4,3] vs f32[2] "
                        "(broadcasts are explicit)");
}

/* The verifier re-checks what builders guarantee: corrupt a good graph in each way. */
static void test_verifier_errors(void **state)
{
    Fixture *f = *state;
    enum { NAME, TYPE, OPERAND, ORDER, PARAM, OUTPUTS_NONE, OUTPUT_DUP, OUTPUT_RANGE, OP, NCASE };
    const char *needle[NCASE] = {
        "not unique", "recorded type f32[4,7]", "is not an earlier node", "is not an earlier node",
        "parameter list", "no outputs", "is output 0 and 1", "refers to no node", "unknown op",
    };
    for (int c = 0; c < NCASE; c++) {
        astitch_graph *g;
        assert_int_equal(astitch_graph_create(f->ctx, &g), ASTITCH_OK);
        astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
        astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, x);
        astitch_node a = astitch_binary(g, ASTITCH_OP_ADD, e, x);
        assert_int_equal(astitch_add_output(g, a), ASTITCH_OK);
        assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
        switch (c) {
        case NAME: g->node[e].name[0] = 'x'; g->node[e].name[1] = 0; break;
        case TYPE: g->node[a].shape.dim[1] = 7; break;
        case OPERAND: g->operand[g->node[a].in] = 57; break;
        case ORDER: g->operand[g->node[e].in] = a; break;
        case PARAM: g->node[x].attr.param = 3; break;
        case OUTPUTS_NONE: g->noutput = 0; break;
        case OUTPUT_DUP: g->output[1] = a; g->noutput = 2; break;
        case OUTPUT_RANGE: g->output[0] = 40; break;
        case OP: g->node[e].op = (astitch_op)200; break;
        }
        assert_int_equal(astitch_graph_verify(g), ASTITCH_ERR_GRAPH);
        assert_error_contains(f->ctx, needle[c]);
        if (c == NAME)
            g->node[e].name[0] = 0; /* keep destroy happy: names are freed, not looked up */
        if (c == OP)
            g->node[e].op = ASTITCH_OP_EXP;
        astitch_graph_destroy(g);
    }
}

static void test_tables(void **state)
{
    (void)state;
    astitch_op op;
    assert_int_equal(astitch_op_from_name("broadcast_in_dim", &op), ASTITCH_OK);
    assert_int_equal(op, ASTITCH_OP_BROADCAST_IN_DIM);
    assert_int_equal(astitch_op_class_of(ASTITCH_OP_TANH), ASTITCH_CLASS_HEAVY);
    assert_int_equal(astitch_op_class_of(ASTITCH_OP_DOT), ASTITCH_CLASS_COMPUTE);
    assert_int_equal(astitch_op_from_name("matmul", &op), ASTITCH_ERR_ARGUMENT);
    for (int i = 0; i < ASTITCH_OP_COUNT; i++) {
        assert_int_equal(astitch_op_from_name(astitch_op_name((astitch_op)i), &op), ASTITCH_OK);
        assert_int_equal(op, i);
    }
    assert_int_equal(astitch_dtype_size(ASTITCH_BF16), 2);
    assert_string_equal(astitch_version(), ASTITCH_VERSION_STRING);
}

static void test_half_round_trip(void **state)
{
    (void)state;
    /* every f16 bit pattern that is not NaN survives a trip through f32 */
    for (uint32_t h = 0; h < 0x10000; h++) {
        float v = half_to_float((uint16_t)h);
        if (v != v)
            continue;
        assert_int_equal(float_to_half(v), h);
    }
    assert_int_equal(float_to_half(65520.0f), 0x7c00); /* rounds to inf */
    assert_int_equal(float_to_half(65519.0f), 0x7bff);
    assert_true(half_to_float(float_to_half(1.0f / 3.0f)) - 1.0f / 3.0f < 1e-3f);
    assert_int_equal(float_to_bf16(1.0f), 0x3f80);
    assert_int_equal(float_to_bf16(1.00390625f), 0x3f80); /* tie to even */
    assert_int_equal(float_to_bf16(1.01171875f), 0x3f82);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_layernorm_like_graph_builds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shapes_of_data_movement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_builder_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_names_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verifier_errors, setup, teardown),
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_half_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
