/* test_graph.c: graph building, type rules and every verifier error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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
    /* operands, in order; out of range gives -1 or no node */
    assert_int_equal(astitch_node_num_operands(g, x), 0);
    assert_int_equal(astitch_node_num_operands(g, sel), 3);
    assert_int_equal(astitch_node_operand(g, sel, 0), lt);
    assert_int_equal(astitch_node_operand(g, sel, 1), d);
    assert_int_equal(astitch_node_operand(g, sel, 2), x);
    assert_int_equal(astitch_node_operand(g, d, 1), sb);
    assert_int_equal(astitch_node_operand(g, sel, 3), ASTITCH_NO_NODE);
    assert_int_equal(astitch_node_operand(g, sel, -1), ASTITCH_NO_NODE);
    assert_int_equal(astitch_node_operand(g, 99, 0), ASTITCH_NO_NODE);
    assert_int_equal(astitch_node_num_operands(g, 99), -1);
    assert_int_equal(astitch_node_num_operands(g, -1), -1);
    assert_int_equal(astitch_node_num_operands(NULL, 0), -1);
    assert_int_equal(astitch_node_operand(NULL, 0, 0), ASTITCH_NO_NODE);
    /* the documented sentinels of the other accessors */
    assert_int_equal(astitch_node_op(g, 99), ASTITCH_OP_COUNT);
    assert_int_equal(astitch_node_op(NULL, 0), ASTITCH_OP_COUNT);
    assert_int_equal(astitch_graph_parameter(g, -1), ASTITCH_NO_NODE);
    assert_int_equal(astitch_graph_parameter(g, astitch_graph_num_parameters(g)), ASTITCH_NO_NODE);
    assert_int_equal(astitch_graph_output(g, 99), ASTITCH_NO_NODE);
    assert_int_equal(astitch_graph_num_nodes(NULL), 0);
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

/* A zero extent anywhere makes a tensor empty whatever the order of its extents, each at most
 * 2^40 (docs/graph-format.md): the builder takes such shapes, writes them, and the reader takes
 * back what it wrote; an extent past 2^40 is refused by both, even beside a zero. */
static void test_zero_extent_shapes(void **state)
{
    Fixture *f = *state;
    const int64_t big = (int64_t)1 << 40;
    const int64_t ok[][3] = {{big, 0, 3}, {3, big, 0}, {0, big, big}, {big, 3, 0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        astitch_graph *g, *back;
        assert_int_equal(astitch_graph_create(f->ctx, &g), ASTITCH_OK);
        astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 3, ok[i]);
        if (x < 0)
            fail_msg("shape %zu refused: %s", i, astitch_last_error(f->ctx));
        assert_int_equal(astitch_add_output(g, astitch_unary(g, ASTITCH_OP_NEG, x)), ASTITCH_OK);
        char *text = NULL;
        assert_int_equal(astitch_graph_write_json(g, &text), ASTITCH_OK);
        if (astitch_graph_read_json(f->ctx, text, strlen(text), NULL, &back) != ASTITCH_OK)
            fail_msg("shape %zu written, then refused: %s", i, astitch_last_error(f->ctx));
        astitch_graph_destroy(back);
        astitch_free(text);
        astitch_graph_destroy(g);
    }
    astitch_graph *g;
    assert_int_equal(astitch_graph_create(f->ctx, &g), ASTITCH_OK);
    const int64_t huge[] = {0, big + 1};
    assert_true(astitch_parameter(g, "x", ASTITCH_F32, 2, huge) < 0);
    assert_error_contains(f->ctx, "dimension 1 (1099511627777) exceeds the limit of 2^40");
    astitch_graph_destroy(g);
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

/* astitch_last_error_node and astitch_last_error_position: the verifier's node, none for a
 * builder call whose node is not kept, a graph.json text's line and column, and both cleared by
 * the next failure that has neither. */
static void test_error_location(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    assert_int_equal(astitch_last_error_node(f->ctx), ASTITCH_NO_NODE);
    int line = -7, col = -7;
    assert_false(astitch_last_error_position(f->ctx, &line, &col));
    assert_int_equal(line, -7);
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, x);
    astitch_node a = astitch_binary(g, ASTITCH_OP_ADD, e, x);
    assert_int_equal(astitch_add_output(g, a), ASTITCH_OK);
    g->node[e].dtype = ASTITCH_I32; /* recorded type no longer what its operand gives */
    assert_int_equal(astitch_graph_verify(g), ASTITCH_ERR_GRAPH);
    assert_int_equal(astitch_last_error_node(f->ctx), e);
    g->node[e].dtype = ASTITCH_F32;
    astitch_node bad = astitch_unary(g, ASTITCH_OP_NOT, x); /* not on f32: refused, not kept */
    assert_int_equal(bad, ASTITCH_NO_NODE);
    assert_error_contains(f->ctx, "needs bool or integer operand");
    assert_int_equal(astitch_last_error_node(f->ctx), ASTITCH_NO_NODE);

    const char *text = "{\"format\": \"astitch-graph\", \"version\": 1,\n"
                       "  \"nodes\": [\n"
                       "    {\"name\": \"x\", \"op\": \"parameter\", \"dtype\": \"f32\",\n"
                       "     \"shape\": [4]},\n"
                       "    {\"name\": \"y\", \"op\": \"nosuchop\", \"inputs\": [\"x\"]}],\n"
                       "  \"outputs\": [\"y\"]}\n";
    astitch_graph *loaded = NULL;
    assert_int_equal(astitch_graph_read_json(f->ctx, text, strlen(text), "t.json", &loaded),
                     ASTITCH_ERR_PARSE);
    printf("# %s\n", astitch_last_error(f->ctx));
    assert_true(astitch_last_error_position(f->ctx, &line, &col));
    char where[32];
    snprintf(where, sizeof where, "t.json:%d:%d:", line, col);
    assert_int_equal(line, 5);
    assert_error_contains(f->ctx, where);
    assert_int_equal(astitch_last_error_node(f->ctx), ASTITCH_NO_NODE);
    const char *broken = "{\"format\": \"astitch-graph\",\n  \"version\": 1,,\n}";
    assert_int_equal(astitch_graph_read_json(f->ctx, broken, strlen(broken), "b.json", &loaded),
                     ASTITCH_ERR_PARSE);
    assert_true(astitch_last_error_position(f->ctx, &line, &col));
    assert_int_equal(line, 2);
    snprintf(where, sizeof where, "b.json:%d:%d:", line, col);
    assert_error_contains(f->ctx, where);
    assert_int_equal(astitch_register_custom(f->ctx, NULL, NULL, NULL), ASTITCH_ERR_ARGUMENT);
    assert_false(astitch_last_error_position(f->ctx, &line, &col));
    assert_false(astitch_last_error_position(NULL, &line, &col));
    assert_int_equal(astitch_last_error_node(NULL), ASTITCH_NO_NODE);
}

/* In debug builds an internal invariant broken (a node id past the graph) aborts with its place;
 * run in a child process. */
static void test_debug_assertion(void **state)
{
#ifdef ASTITCH_DEBUG_CHECKS
    Fixture *f = *state;
    astitch_node x = astitch_parameter(f->g, "x", ASTITCH_F32, 2, d43);
    assert_true(x >= 0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        (void)gnode(f->g, f->g->nnode);
        _exit(0);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
#else
    (void)state;
    skip();
#endif
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

/* Type rules that builders enforce, each met by one call on a fresh graph. The message is
 * compared whole: it must name the node, its op, and the dtypes and shapes involved. */
typedef astitch_node (*RuleBuild)(astitch_graph *g);

static astitch_node rule_param_dtype(astitch_graph *g)
{
    return astitch_parameter(g, "p", ASTITCH_DTYPE_COUNT, 2, d43);
}
static astitch_node rule_convert_dtype(astitch_graph *g)
{
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
    return astitch_convert(g, x, ASTITCH_DTYPE_COUNT);
}
static astitch_node rule_not_f32(astitch_graph *g)
{
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
    return astitch_unary(g, ASTITCH_OP_NOT, x);
}
static astitch_node rule_and_f16(astitch_graph *g)
{
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F16, 2, d43);
    return astitch_binary(g, ASTITCH_OP_AND, x, x);
}
static astitch_node rule_iota_bool(astitch_graph *g)
{
    return astitch_iota(g, ASTITCH_BOOL, 2, d43, 0);
}
static astitch_node rule_broadcast_lower_rank(astitch_graph *g)
{
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
    return astitch_broadcast_in_dim(g, x, 1, (int64_t[]){4}, (int64_t[]){0, 1});
}
static astitch_node rule_broadcast_dim_repeated(astitch_graph *g)
{
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, (int64_t[]){3, 3});
    return astitch_broadcast_in_dim(g, x, 2, (int64_t[]){3, 3}, (int64_t[]){0, 0});
}
static astitch_node rule_broadcast_dim_range(astitch_graph *g)
{
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 1, (int64_t[]){3});
    return astitch_broadcast_in_dim(g, x, 2, d43, (int64_t[]){2});
}
static astitch_node rule_broadcast_dim_negative(astitch_graph *g)
{
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 1, (int64_t[]){3});
    return astitch_broadcast_in_dim(g, x, 2, d43, (int64_t[]){-1});
}
static astitch_node rule_concat_none(astitch_graph *g)
{
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
    return astitch_concatenate(g, 0, &x, 0);
}
static astitch_node rule_concat_axis(astitch_graph *g)
{
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
    return astitch_concatenate(g, 2, (astitch_node[]){x, x}, 2);
}
static astitch_node rule_concat_axis_negative(astitch_graph *g)
{
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
    return astitch_concatenate(g, 2, (astitch_node[]){x, x}, -1);
}
static astitch_node rule_concat_too_big(astitch_graph *g)
{
    astitch_node x = astitch_parameter(g, "big", ASTITCH_F32, 1, (int64_t[]){MAX_ELEMENTS});
    return astitch_concatenate(g, 2, (astitch_node[]){x, x}, 0);
}
static astitch_node rule_gather_no_rows(astitch_graph *g)
{
    astitch_node t = astitch_parameter(g, "t", ASTITCH_F32, 2, (int64_t[]){0, 3});
    astitch_node ix = astitch_parameter(g, "ix", ASTITCH_I32, 1, (int64_t[]){2});
    return astitch_gather(g, t, ix);
}
static astitch_node rule_gather_scalar_table(astitch_graph *g)
{
    astitch_node t = astitch_parameter(g, "t", ASTITCH_F32, 0, NULL);
    astitch_node ix = astitch_parameter(g, "ix", ASTITCH_I32, 1, (int64_t[]){2});
    return astitch_gather(g, t, ix);
}
static astitch_node rule_gather_rank(astitch_graph *g)
{
    int64_t ones[] = {1, 1, 1, 1, 1};
    astitch_node t = astitch_parameter(g, "t", ASTITCH_F32, 5, ones);
    astitch_node ix = astitch_parameter(g, "ix", ASTITCH_I32, 5, ones);
    return astitch_gather(g, t, ix);
}
static astitch_node rule_gather_too_big(astitch_graph *g)
{
    astitch_node t = astitch_parameter(g, "t", ASTITCH_F32, 2, (int64_t[]){1, MAX_ELEMENTS});
    astitch_node ix = astitch_parameter(g, "ix", ASTITCH_I64, 1, (int64_t[]){2});
    return astitch_gather(g, t, ix);
}
static astitch_node rule_reduce_kind(astitch_graph *g)
{
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
    return astitch_reduce(g, ASTITCH_REDUCE_COUNT, x, 1, (int64_t[]){1});
}
static astitch_node rule_dot_dtypes(astitch_graph *g)
{
    astitch_node l = astitch_parameter(g, "l", ASTITCH_F32, 2, d43);
    astitch_node r = astitch_parameter(g, "r", ASTITCH_F16, 2, (int64_t[]){3, 2});
    astitch_dot_dims dd = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
    return astitch_dot(g, l, r, &dd);
}
static astitch_node rule_dot_bool(astitch_graph *g)
{
    astitch_node l = astitch_parameter(g, "l", ASTITCH_BOOL, 2, d43);
    astitch_node r = astitch_parameter(g, "r", ASTITCH_BOOL, 2, (int64_t[]){3, 2});
    astitch_dot_dims dd = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
    return astitch_dot(g, l, r, &dd);
}
static astitch_node rule_dot_dim_range(astitch_graph *g)
{
    astitch_node l = astitch_parameter(g, "l", ASTITCH_F32, 2, d43);
    astitch_node r = astitch_parameter(g, "r", ASTITCH_F32, 2, (int64_t[]){3, 2});
    astitch_dot_dims dd = {.ncontract = 1, .lhs_contract = {2}, .rhs_contract = {0}};
    return astitch_dot(g, l, r, &dd);
}
static astitch_node rule_dot_dim_repeated(astitch_graph *g)
{
    astitch_node l = astitch_parameter(g, "l", ASTITCH_F32, 2, (int64_t[]){3, 3});
    astitch_node r = astitch_parameter(g, "r", ASTITCH_F32, 2, (int64_t[]){3, 3});
    astitch_dot_dims dd = {.nbatch = 1, .lhs_batch = {0}, .rhs_batch = {0},
                           .ncontract = 1, .lhs_contract = {0}, .rhs_contract = {1}};
    return astitch_dot(g, l, r, &dd);
}
static astitch_node rule_dot_batch(astitch_graph *g)
{
    astitch_node l = astitch_parameter(g, "l", ASTITCH_F32, 3, (int64_t[]){2, 4, 3});
    astitch_node r = astitch_parameter(g, "r", ASTITCH_F32, 3, (int64_t[]){5, 3, 6});
    astitch_dot_dims dd = {.nbatch = 1, .lhs_batch = {0}, .rhs_batch = {0},
                           .ncontract = 1, .lhs_contract = {2}, .rhs_contract = {1}};
    return astitch_dot(g, l, r, &dd);
}
static astitch_node rule_dot_rank(astitch_graph *g)
{
    int64_t ones[] = {1, 1, 1, 1, 1};
    astitch_node l = astitch_parameter(g, "l", ASTITCH_F32, 5, ones);
    astitch_node r = astitch_parameter(g, "r", ASTITCH_F32, 5, ones);
    astitch_dot_dims dd = {0};
    return astitch_dot(g, l, r, &dd);
}
static astitch_node rule_dot_too_big(astitch_graph *g)
{
    astitch_node l = astitch_parameter(g, "l", ASTITCH_F32, 2, (int64_t[]){(int64_t)1 << 21, 1});
    astitch_node r = astitch_parameter(g, "r", ASTITCH_F32, 2, (int64_t[]){1, (int64_t)1 << 20});
    astitch_dot_dims dd = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
    return astitch_dot(g, l, r, &dd);
}

static void test_type_rule_errors(void **state)
{
    Fixture *f = *state;
    struct { RuleBuild fn; astitch_status status; const char *msg; } cases[] = {
        {rule_param_dtype, ASTITCH_ERR_GRAPH, "node 0 'p' (parameter): invalid dtype 6"},
        {rule_convert_dtype, ASTITCH_ERR_GRAPH,
         "node 1 'convert.1' (convert): invalid target dtype 6"},
        {rule_not_f32, ASTITCH_ERR_GRAPH,
         "node 1 'not.1' (not): needs bool or integer operand, got f32[4,3]"},
        {rule_and_f16, ASTITCH_ERR_GRAPH,
         "node 1 'and.1' (and): needs bool or integer operand, got f16[4,3]"},
        {rule_iota_bool, ASTITCH_ERR_GRAPH,
         "node 0 'iota.0' (iota): iota needs a float or integer dtype, not bool"},
        {rule_broadcast_lower_rank, ASTITCH_ERR_GRAPH,
         "node 1 'broadcast_in_dim.1' (broadcast_in_dim): cannot broadcast f32[4,3] to lower "
         "rank f32[4]"},
        {rule_broadcast_dim_repeated, ASTITCH_ERR_GRAPH,
         "node 1 'broadcast_in_dim.1' (broadcast_in_dim): broadcast_dimensions[1] = 0 is out "
         "of range or repeated for output rank 2"},
        {rule_broadcast_dim_range, ASTITCH_ERR_GRAPH,
         "node 1 'broadcast_in_dim.1' (broadcast_in_dim): broadcast_dimensions[0] = 2 is out "
         "of range or repeated for output rank 2"},
        {rule_broadcast_dim_negative, ASTITCH_ERR_GRAPH,
         "node 1 'broadcast_in_dim.1' (broadcast_in_dim): broadcast_dimensions[0] = -1 is out "
         "of range or repeated for output rank 2"},
        {rule_concat_none, ASTITCH_ERR_ARGUMENT, "concatenate: needs at least one operand"},
        {rule_concat_axis, ASTITCH_ERR_GRAPH,
         "node 1 'concatenate.1' (concatenate): axis 2 is out of range for f32[4,3]"},
        {rule_concat_axis_negative, ASTITCH_ERR_GRAPH,
         "node 1 'concatenate.1' (concatenate): axis -1 is out of range for f32[4,3]"},
        {rule_concat_too_big, ASTITCH_ERR_GRAPH,
         "node 1 'concatenate.1' (concatenate): result: dimension 0 (2199023255552) exceeds "
         "the limit of 2^40"},
        {rule_gather_no_rows, ASTITCH_ERR_GRAPH,
         "node 2 'gather.2' (gather): table f32[0,3] must have at least one row"},
        {rule_gather_scalar_table, ASTITCH_ERR_GRAPH,
         "node 2 'gather.2' (gather): table f32[] must have at least one row"},
        {rule_gather_rank, ASTITCH_ERR_GRAPH,
         "node 2 'gather.2' (gather): result of gathering f32[1,1,1,1,1] by i32[1,1,1,1,1] "
         "exceeds rank 8"},
        {rule_gather_too_big, ASTITCH_ERR_GRAPH,
         "node 2 'gather.2' (gather): result: element count exceeds the limit of 2^40"},
        {rule_reduce_kind, ASTITCH_ERR_GRAPH, "node 1 'reduce.1' (reduce): invalid reduce kind 6"},
        {rule_dot_dtypes, ASTITCH_ERR_GRAPH,
         "node 2 'dot.2' (dot): operands must share a float or integer dtype: f32[4,3] and "
         "f16[3,2]"},
        {rule_dot_bool, ASTITCH_ERR_GRAPH,
         "node 2 'dot.2' (dot): operands must share a float or integer dtype: bool[4,3] and "
         "bool[3,2]"},
        {rule_dot_dim_range, ASTITCH_ERR_GRAPH,
         "node 2 'dot.2' (dot): batch/contracting dimensions out of range or repeated for "
         "f32[4,3] x f32[3,2]"},
        {rule_dot_dim_repeated, ASTITCH_ERR_GRAPH,
         "node 2 'dot.2' (dot): batch/contracting dimensions out of range or repeated for "
         "f32[3,3] x f32[3,3]"},
        {rule_dot_batch, ASTITCH_ERR_GRAPH,
         "node 2 'dot.2' (dot): batch dimension 0 differs: f32[2,4,3] x f32[5,3,6]"},
        {rule_dot_rank, ASTITCH_ERR_GRAPH, "node 2 'dot.2' (dot): result rank 10 exceeds 8"},
        {rule_dot_too_big, ASTITCH_ERR_GRAPH,
         "node 2 'dot.2' (dot): result: element count exceeds the limit of 2^40"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        astitch_graph *g;
        assert_int_equal(astitch_graph_create(f->ctx, &g), ASTITCH_OK);
        assert_int_equal(cases[i].fn(g), ASTITCH_NO_NODE);
        assert_int_equal(astitch_graph_status(g), cases[i].status);
        assert_string_equal(astitch_last_error(f->ctx), cases[i].msg);
        /* the verifier refuses the graph and says why, with the builder's status */
        assert_int_equal(astitch_graph_verify(g), cases[i].status);
        char want[128];
        snprintf(want, sizeof want, "graph is unusable: an earlier builder call failed (%s)",
                 astitch_status_name(cases[i].status));
        assert_string_equal(astitch_last_error(f->ctx), want);
        astitch_graph_destroy(g);
    }
}

/* Arithmetic reductions refuse bool operands; the logical ones take only bool. */
static void test_reduce_kinds_on_bool(void **state)
{
    Fixture *f = *state;
    for (int k = 0; k < ASTITCH_REDUCE_COUNT; k++) {
        astitch_graph *g;
        assert_int_equal(astitch_graph_create(f->ctx, &g), ASTITCH_OK);
        astitch_node b = astitch_parameter(g, "b", ASTITCH_BOOL, 2, d43);
        astitch_node r = astitch_reduce(g, (astitch_reduce_kind)k, b, 1, (int64_t[]){1});
        if (k == ASTITCH_REDUCE_ANY || k == ASTITCH_REDUCE_ALL) {
            assert_int_not_equal(r, ASTITCH_NO_NODE);
            assert_int_equal(astitch_graph_status(g), ASTITCH_OK);
        } else {
            assert_int_equal(r, ASTITCH_NO_NODE);
            assert_int_equal(astitch_graph_status(g), ASTITCH_ERR_GRAPH);
            char want[160];
            snprintf(want, sizeof want,
                     "node 1 'reduce.1' (reduce): reduce %s needs a float or integer operand, "
                     "got bool[4,3]",
                     astitch_reduce_name((astitch_reduce_kind)k));
            assert_string_equal(astitch_last_error(f->ctx), want);
        }
        astitch_graph_destroy(g);
    }
}

/* Errors that no builder lets through (each builder checks its arguments first), caught by the
 * verifier on a graph corrupted after building, as a buggy pass would. */
static void test_verifier_rechecks_builder_guards(void **state)
{
    Fixture *f = *state;
    enum { NO_VALUES, ARITY, CONCAT_EMPTY, NO_TARGET, EMPTY_TARGET, NPARAM, NCASE };
    const char *needle[NCASE] = {
        "node 1 'constant.1' (constant): no values",
        "node 4 'add.4' (add): has 1 operand, needs 2",
        "node 2 'concatenate.2' (concatenate): has 0 operands, needs at least 1",
        "node 3 'custom.3' (custom): custom op needs a target name",
        "node 3 'custom.3' (custom): custom op needs a target name",
        "graph lists 2 parameters but has 1",
    };
    for (int c = 0; c < NCASE; c++) {
        astitch_graph *g;
        assert_int_equal(astitch_graph_create(f->ctx, &g), ASTITCH_OK);
        astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
        double half = 0.5;
        astitch_node k = astitch_constant(g, ASTITCH_F32, 2, d43, &half, 1);
        astitch_node cat = astitch_concatenate(g, 2, (astitch_node[]){x, k}, 0);
        astitch_node cu = astitch_custom(g, "twice", 1, &cat, ASTITCH_F32, 2, (int64_t[]){8, 3});
        astitch_node a = astitch_binary(g, ASTITCH_OP_ADD, cu, cat);
        assert_int_equal(astitch_add_output(g, a), ASTITCH_OK);
        assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
        Node *n;
        switch (c) {
        case NO_VALUES:
            n = &g->node[k];
            free(n->attr.values);
            n->attr.values = NULL;
            break;
        case ARITY: g->node[a].nin = 1; break;
        case CONCAT_EMPTY: g->node[cat].nin = 0; break;
        case NO_TARGET:
            n = &g->node[cu];
            free(n->attr.target);
            n->attr.target = NULL;
            break;
        case EMPTY_TARGET: g->node[cu].attr.target[0] = '\0'; break;
        case NPARAM: g->nparam = 2; break;
        }
        assert_int_equal(astitch_graph_verify(g), ASTITCH_ERR_GRAPH);
        assert_error_contains(f->ctx, needle[c]);
        if (c == NPARAM)
            g->nparam = 1;
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

/* A context's switches: read from the environment when it is made, set and unset through
 * astitch_context_set_option afterwards, an unknown name refused with the list of names. */
static void test_context_options(void **state)
{
    (void)state;
    setenv("ASTITCH_CACHE", "off", 1);
    unsetenv("ASTITCH_FORCE_PARTS");
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    unsetenv("ASTITCH_CACHE");
    setenv("ASTITCH_FORCE_PARTS", "1", 1); /* too late for ctx */
    assert_string_equal(astitch_context_option(ctx, "cache"), "off");
    assert_null(astitch_context_option(ctx, "force_parts"));
    assert_false(config_cache_on(&ctx->config));
    assert_false(config_force_parts(&ctx->config));
    assert_int_equal(astitch_context_set_option(ctx, "force_parts", "1"), ASTITCH_OK);
    assert_true(config_force_parts(&ctx->config));
    assert_int_equal(astitch_context_set_option(ctx, "cache", NULL), ASTITCH_OK);
    assert_null(astitch_context_option(ctx, "cache"));
    assert_true(config_cache_on(&ctx->config));
    assert_false(config_host_compute(&ctx->config));
    assert_int_equal(astitch_context_set_option(ctx, "host_compute", "1"), ASTITCH_OK);
    assert_true(config_host_compute(&ctx->config));
    assert_int_equal(astitch_context_set_option(ctx, "host_compute", "0"), ASTITCH_OK);
    assert_false(config_host_compute(&ctx->config));
    assert_false(config_force_lean(&ctx->config));
    assert_int_equal(astitch_context_set_option(ctx, "force_lean", "1"), ASTITCH_OK);
    assert_true(config_force_lean(&ctx->config));
    assert_int_equal(astitch_context_set_option(ctx, "force_lean", NULL), ASTITCH_OK);
    assert_false(config_force_lean(&ctx->config));
    assert_int_equal(astitch_context_set_option(ctx, "dump_plan", "after:memory"), ASTITCH_OK);
    assert_string_equal(config_dump_plan(&ctx->config), "after:memory");
    assert_int_equal(astitch_context_set_option(ctx, "dump_plan", "0"), ASTITCH_OK);
    assert_null(config_dump_plan(&ctx->config));
    char dir[64];
    assert_int_equal(astitch_context_set_option(ctx, "cache_dir", "/x/y"), ASTITCH_OK);
    assert_true(config_cache_dir(&ctx->config, dir, sizeof dir));
    assert_string_equal(dir, "/x/y");
    assert_int_equal(astitch_context_set_option(ctx, "cache_dir", "off"), ASTITCH_OK);
    assert_false(config_cache_dir(&ctx->config, dir, sizeof dir));
    assert_int_equal(astitch_context_set_option(ctx, "ASTITCH_CACHE", "0"), ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(ctx), "no switch named 'ASTITCH_CACHE'"));
    assert_non_null(strstr(astitch_last_error(ctx),
                           "dump_plan, force_parts, cache, cache_dir, host_compute, force_lean"));
    assert_int_equal(astitch_context_set_option(ctx, NULL, "1"), ASTITCH_ERR_ARGUMENT);
    assert_int_equal(astitch_context_set_option(NULL, "cache", "1"), ASTITCH_ERR_ARGUMENT);
    assert_null(astitch_context_option(ctx, "nothing"));
    assert_null(astitch_context_option(NULL, "cache"));
    unsetenv("ASTITCH_FORCE_PARTS");
    astitch_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_layernorm_like_graph_builds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shapes_of_data_movement, setup, teardown),
        cmocka_unit_test_setup_teardown(test_builder_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zero_extent_shapes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_names_node, setup, teardown),
        cmocka_unit_test(test_context_options),
        cmocka_unit_test_setup_teardown(test_error_location, setup, teardown),
        cmocka_unit_test_setup_teardown(test_debug_assertion, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verifier_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_type_rule_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reduce_kinds_on_bool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verifier_rechecks_builder_guards, setup, teardown),
        cmocka_unit_test(test_tables),
        cmocka_unit_test(test_half_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
