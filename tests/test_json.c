/* test_json.c: graph.json round trips (every op, every attribute, exact constants) and reader
 * errors with their line:column and node. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ir/ir.h"

static int setup(void **state)
{
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    *state = ctx;
    return 0;
}

static int teardown(void **state)
{
    astitch_context_destroy(*state);
    return 0;
}

/* Fails unless the two graphs are the same node for node: ops, types, names, operands,
 * attributes, constant bits, parameters, outputs, graph name and comment. */
static void assert_same_graph(const astitch_graph *a, const astitch_graph *b)
{
    assert_int_equal(a->nnode, b->nnode);
    for (int32_t id = 0; id < a->nnode; id++) {
        const Node *x = gnode(a, id), *y = gnode(b, id);
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->op, y->op);
        assert_int_equal(x->dtype, y->dtype);
        assert_true(shape_equal(&x->shape, &y->shape));
        assert_int_equal(x->nin, y->nin);
        for (int k = 0; k < x->nin; k++)
            assert_int_equal(goperand(a, id, k), goperand(b, id, k));
        const NodeAttr *p = &x->attr, *q = &y->attr;
        assert_memory_equal(p->dims, q->dims, sizeof p->dims);
        assert_memory_equal(p->limit, q->limit, sizeof p->limit);
        assert_memory_equal(p->stride, q->stride, sizeof p->stride);
        assert_int_equal(p->axis, q->axis);
        assert_int_equal(p->reduce, q->reduce);
        assert_int_equal(p->axes, q->axes);
        assert_memory_equal(&p->dot, &q->dot, sizeof p->dot);
        assert_int_equal(p->target == NULL, q->target == NULL);
        if (p->target)
            assert_string_equal(p->target, q->target);
        assert_int_equal(p->param, q->param);
        assert_int_equal(p->nvalues, q->nvalues);
        if (p->nvalues)
            assert_memory_equal(p->values, q->values, (size_t)p->nvalues * sizeof *p->values);
    }
    assert_int_equal(a->nparam, b->nparam);
    assert_memory_equal(a->param, b->param, (size_t)a->nparam * sizeof *a->param);
    assert_int_equal(a->noutput, b->noutput);
    assert_memory_equal(a->output, b->output, (size_t)a->noutput * sizeof *a->output);
    assert_int_equal(a->name == NULL, b->name == NULL);
    if (a->name)
        assert_string_equal(a->name, b->name);
    assert_int_equal(a->comment == NULL, b->comment == NULL);
    if (a->comment)
        assert_string_equal(a->comment, b->comment);
}

/* Writes g, reads the text back, writes again: the texts and the graphs must be equal. */
static void assert_round_trip(astitch_context *ctx, const astitch_graph *g)
{
    char *text, *again;
    astitch_graph *back;
    assert_int_equal(astitch_graph_write_json(g, &text), ASTITCH_OK);
    if (astitch_graph_read_json(ctx, text, strlen(text), "written", &back) != ASTITCH_OK)
        fail_msg("reading the writer's text failed: %s\n%s", astitch_last_error(ctx), text);
    assert_same_graph(g, back);
    assert_int_equal(astitch_graph_write_json(back, &again), ASTITCH_OK);
    assert_string_equal(text, again);
    astitch_free(text);
    astitch_free(again);
    astitch_graph_destroy(back);
}

static astitch_node out(astitch_graph *g, astitch_node n)
{
    assert_int_not_equal(n, ASTITCH_NO_NODE);
    assert_int_equal(astitch_add_output(g, n), ASTITCH_OK);
    return n;
}

static void test_round_trip_every_op(void **state)
{
    astitch_context *ctx = *state;
    astitch_graph *g;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    assert_int_equal(astitch_graph_set_name(g, "every \"op\""), ASTITCH_OK);
    assert_int_equal(astitch_graph_set_comment(g, "line 1\nline 2\t\\ caf\xc3\xa9 \x01"),
                     ASTITCH_OK);
    const int64_t d43[] = {4, 3}, d2[] = {2}, d4[] = {4}, d3[] = {3}, d5[] = {5}, d03[] = {0, 3};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d43);
    astitch_node xi = astitch_parameter(g, "x \"int\"", ASTITCH_I32, 2, d43);
    astitch_node xb = astitch_parameter(g, "x\\bool", ASTITCH_BOOL, 2, d43);
    astitch_node xh = astitch_parameter(g, "h\xc3\xa9", ASTITCH_F16, 1, d2);
    astitch_node xbf = astitch_parameter(g, "bf", ASTITCH_BF16, 1, d2);
    astitch_node xl = astitch_parameter(g, "ids", ASTITCH_I64, 1, d5);
    astitch_node s0 = astitch_parameter(g, "scalar", ASTITCH_F32, 0, NULL);
    double quarter = 0.25, dense[] = {0.1, -1e-7}, special[] = {NAN, INFINITY, -INFINITY, -0.0};
    double i32s[] = {INT32_MIN, INT32_MAX}, i64s[] = {-0x1p53, 0x1p53, 7};
    double bools[] = {1, 0, 1}, f16max = 65504, bf = -3.0e38, tiny = 5e-324;
    astitch_node c = astitch_constant(g, ASTITCH_F32, 2, d43, &quarter, 1);
    out(g, astitch_constant(g, ASTITCH_F32, 1, d2, dense, 2));
    out(g, astitch_constant(g, ASTITCH_F32, 1, d4, special, 4));
    out(g, astitch_constant(g, ASTITCH_I32, 1, d2, i32s, 2));
    out(g, astitch_constant(g, ASTITCH_I64, 1, d3, i64s, 3));
    out(g, astitch_constant(g, ASTITCH_BOOL, 1, d3, bools, 3));
    out(g, astitch_constant(g, ASTITCH_F16, 0, NULL, &f16max, 1));
    out(g, astitch_constant(g, ASTITCH_BF16, 0, NULL, &bf, 1));
    out(g, astitch_constant(g, ASTITCH_F32, 2, d03, &quarter, 1));
    out(g, astitch_constant(g, ASTITCH_F32, 0, NULL, &tiny, 1));
    const int64_t d48[] = {4, 8};
    out(g, astitch_iota(g, ASTITCH_I32, 2, d48, 1));
    out(g, astitch_iota(g, ASTITCH_F16, 1, d4, 0));
    for (int op = 0; op < ASTITCH_OP_COUNT; op++) {
        if (!op_is_elementwise(op) || op == ASTITCH_OP_CONVERT || op == ASTITCH_OP_SELECT)
            continue;
        bool logical = op == ASTITCH_OP_NOT || op == ASTITCH_OP_AND || op == ASTITCH_OP_OR;
        astitch_node a = logical ? xb : x, b = logical ? xb : c;
        out(g, astitch_op_arity(op) == 1 ? astitch_unary(g, op, a) : astitch_binary(g, op, a, b));
    }
    out(g, astitch_unary(g, ASTITCH_OP_NEG, xi));
    out(g, astitch_select(g, xb, x, c));
    out(g, astitch_convert(g, x, ASTITCH_F16));
    out(g, astitch_convert(g, xh, ASTITCH_BF16));
    out(g, astitch_convert(g, xbf, ASTITCH_I64));
    const int64_t d325[] = {3, 2, 5}, bd1[] = {1}, d12[] = {12}, d34[] = {3, 4}, p10[] = {1, 0};
    out(g, astitch_broadcast_in_dim(g, xh, 3, d325, bd1));
    out(g, astitch_broadcast_in_dim(g, s0, 2, d43, NULL));
    out(g, astitch_reshape(g, x, 1, d12));
    out(g, astitch_reshape(g, x, 2, d34));
    out(g, astitch_transpose(g, x, p10));
    const int64_t st[] = {1, 0}, li[] = {4, 3}, sr[] = {2, 2};
    out(g, astitch_slice(g, x, st, li, sr));
    out(g, astitch_slice(g, x, st, li, NULL));
    astitch_node cat[] = {x, c, x};
    out(g, astitch_concatenate(g, 3, cat, 0));
    out(g, astitch_concatenate(g, 2, cat, 1));
    astitch_node gathered = astitch_gather(g, x, xl);
    out(g, gathered);
    assert_int_equal(astitch_set_name(g, gathered, "rows picked"), ASTITCH_OK);
    const int64_t ax1[] = {1}, ax01[] = {0, 1}, ax0[] = {0};
    out(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, ax1));
    out(g, astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 2, ax01));
    out(g, astitch_reduce(g, ASTITCH_REDUCE_MIN, x, 0, NULL));
    out(g, astitch_reduce(g, ASTITCH_REDUCE_PROD, xi, 1, ax0));
    out(g, astitch_reduce(g, ASTITCH_REDUCE_ANY, xb, 1, ax1));
    out(g, astitch_reduce(g, ASTITCH_REDUCE_ALL, xb, 2, ax01));
    const int64_t da[] = {2, 4, 3}, db[] = {2, 3, 5}, dw[] = {3, 6};
    astitch_node a = astitch_parameter(g, "a", ASTITCH_F32, 3, da);
    astitch_node b = astitch_parameter(g, "b", ASTITCH_F32, 3, db);
    astitch_node w = astitch_parameter(g, "w", ASTITCH_F32, 2, dw);
    astitch_dot_dims bmm = {.nbatch = 1, .lhs_batch = {0}, .rhs_batch = {0}, .ncontract = 1,
                            .lhs_contract = {2}, .rhs_contract = {1}};
    astitch_dot_dims mm = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
    astitch_dot_dims outer = {0};
    out(g, astitch_dot(g, a, b, &bmm));
    out(g, astitch_dot(g, x, w, &mm));
    out(g, astitch_dot(g, xh, xh, &outer));
    astitch_node cin[] = {x, xi};
    const int64_t d7[] = {7};
    out(g, astitch_custom(g, "my_conv", 2, cin, ASTITCH_F32, 1, d7));
    out(g, astitch_custom(g, "rng \"x\"", 0, NULL, ASTITCH_I64, 1, d2));
    assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);

    uint64_t ops = 0;
    for (int32_t id = 0; id < g->nnode; id++)
        ops |= (uint64_t)1 << g->node[id].op;
    for (int op = 0; op < ASTITCH_OP_COUNT; op++)
        if (!(ops >> op & 1))
            fail_msg("op %s is not covered by the round trip", astitch_op_name(op));
    assert_round_trip(ctx, g);
    astitch_graph_destroy(g);
}

static uint64_t next_random(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* A random double of dtype t: any finite bit pattern in range, or an integer in range. */
static double random_value(uint64_t *s, astitch_dtype t)
{
    for (;;) {
        uint64_t r = next_random(s);
        double v;
        switch (t) {
        case ASTITCH_BOOL: return (double)(r & 1);
        case ASTITCH_I32: return (double)(int32_t)(uint32_t)r;
        case ASTITCH_I64: return (double)((int64_t)(r >> 10) - ((int64_t)1 << 53));
        default:
            memcpy(&v, &r, sizeof v);
            if (!isfinite(v))
                continue;
            if (t == ASTITCH_F16)
                v = fmod(v, 65504.0);
            else if (fabs(v) > (t == ASTITCH_BF16 ? 3.3895313892515355e38 : FLT_MAX))
                v = ldexp(frexp(v, &(int){0}), (int)(r % 200) - 100);
            return v;
        }
    }
}

static void test_round_trip_random_constants(void **state)
{
    astitch_context *ctx = *state;
    uint64_t seed = (uint64_t)time(NULL) * 2654435761u | 1, s = seed;
    print_message("random constants: seed %llu\n", (unsigned long long)seed);
    astitch_graph *g;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    const int64_t dims[] = {3, 41};
    double v[3 * 41];
    for (int t = 0; t < ASTITCH_DTYPE_COUNT; t++) {
        for (int i = 0; i < 3 * 41; i++)
            v[i] = random_value(&s, t);
        out(g, astitch_constant(g, t, 2, dims, v, 3 * 41));
        out(g, astitch_constant(g, t, 1, dims + 1, v + 7, 1));
    }
    assert_round_trip(ctx, g);
    astitch_graph_destroy(g);
}

#define HEAD "{\"format\": \"astitch-graph\", \"version\": 1,\n"
#define XNODE "{\"name\": \"x\", \"op\": \"parameter\", \"dtype\": \"f32\", \"shape\": [4, 3]}"

static astitch_graph *read_ok(astitch_context *ctx, const char *text)
{
    astitch_graph *g = NULL;
    if (astitch_graph_read_json(ctx, text, strlen(text), NULL, &g) != ASTITCH_OK)
        fail_msg("unexpected error: %s", astitch_last_error(ctx));
    return g;
}

static void test_forward_references_sorted(void **state)
{
    astitch_context *ctx = *state;
    const char *backwards = HEAD " \"nodes\": [\n"
                            "  {\"name\": \"z\", \"op\": \"mul\", \"inputs\": [\"y\", \"x\"]},\n"
                            "  {\"name\": \"y\", \"op\": \"exp\", \"inputs\": [\"x\"]},\n"
                            "  " XNODE "\n ],\n \"outputs\": [\"z\", \"y\"]}\n";
    const char *forwards = HEAD " \"nodes\": [\n  " XNODE ",\n"
                           "  {\"name\": \"y\", \"op\": \"exp\", \"inputs\": [\"x\"]},\n"
                           "  {\"name\": \"z\", \"op\": \"mul\", \"inputs\": [\"y\", \"x\"]}\n"
                           " ],\n \"outputs\": [\"z\", \"y\"]}\n";
    astitch_graph *g = read_ok(ctx, backwards), *h = read_ok(ctx, forwards);
    assert_int_equal(astitch_graph_find(g, "x"), 0);
    assert_int_equal(astitch_graph_find(g, "y"), 1);
    assert_int_equal(astitch_graph_find(g, "z"), 2);
    assert_same_graph(g, h);
    assert_int_equal(astitch_graph_output(g, 0), 2);
    assert_int_equal(astitch_graph_output(g, 1), 1);
    astitch_graph_destroy(g);
    astitch_graph_destroy(h);
}

static void test_file_order_kept(void **state)
{
    astitch_context *ctx = *state;
    const char *text = HEAD " \"nodes\": [\n"
                       "  {\"name\": \"b\", \"op\": \"parameter\", \"dtype\": \"i32\","
                       " \"shape\": []},\n"
                       "  {\"name\": \"a\", \"op\": \"parameter\", \"dtype\": \"i32\","
                       " \"shape\": []},\n"
                       "  {\"name\": \"d\", \"op\": \"sub\", \"inputs\": [\"a\", \"b\"]},\n"
                       "  {\"name\": \"c\", \"op\": \"add\", \"inputs\": [\"a\", \"b\"]}\n"
                       " ],\n \"outputs\": [\"c\", \"d\"]}\n";
    astitch_graph *g = read_ok(ctx, text);
    const char *order[] = {"b", "a", "d", "c"};
    for (int i = 0; i < 4; i++)
        assert_int_equal(astitch_graph_find(g, order[i]), i);
    assert_int_equal(astitch_graph_parameter(g, 0), 0);
    assert_int_equal(astitch_graph_parameter(g, 1), 1);
    astitch_graph_destroy(g);
}

static void test_accepted_spellings(void **state)
{
    astitch_context *ctx = *state;
    const char *text =
        HEAD " \"comment\": \"top\",\n \"nodes\": [\n"
        "  {\"name\": \"f\", \"op\": \"constant\", \"dtype\": \"f32\", \"shape\": [5],"
        " \"values\": [\"nan\", \"inf\", \"-inf\", 2, -0.0], \"comment\": \"per node\"},\n"
        "  {\"name\": \"p\", \"op\": \"constant\", \"dtype\": \"bool\", \"shape\": [4],"
        " \"values\": [true, false, 1, 0]},\n"
        "  {\"name\": \"e\", \"op\": \"constant\", \"dtype\": \"f16\", \"shape\": [2, 0],"
        " \"value\": 1}\n"
        " ],\n \"outputs\": [\"f\", \"p\", \"e\"]}\n";
    astitch_graph *g = read_ok(ctx, text);
    const Node *f = gnode(g, 0), *p = gnode(g, 1);
    assert_true(isnan(f->attr.values[0]));
    assert_true(isinf(f->attr.values[1]) && f->attr.values[1] > 0);
    assert_true(isinf(f->attr.values[2]) && f->attr.values[2] < 0);
    assert_true(f->attr.values[3] == 2.0);
    assert_true(f->attr.values[4] == 0 && signbit(f->attr.values[4]));
    double bools[] = {1, 0, 1, 0};
    assert_memory_equal(p->attr.values, bools, sizeof bools);
    assert_string_equal(astitch_graph_comment(g), "top");
    assert_null(astitch_graph_name(g));
    assert_round_trip(ctx, g);
    astitch_graph_destroy(g);
}

/* The exact text of a small graph: the layout docs/graph-format.md shows. */
static void test_writer_layout(void **state)
{
    astitch_context *ctx = *state;
    astitch_graph *g;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    assert_int_equal(astitch_graph_set_name(g, "tiny"), ASTITCH_OK);
    const int64_t d[] = {2, 3}, ax[] = {1};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d);
    double v[] = {1, 0.5, -2, 1e-5, 3e20, 0.1};
    astitch_node c = astitch_constant(g, ASTITCH_F32, 2, d, v, 6);
    astitch_node s = astitch_reduce(g, ASTITCH_REDUCE_SUM, astitch_binary(g, ASTITCH_OP_ADD, x, c),
                                    1, ax);
    out(g, s);
    char *text;
    assert_int_equal(astitch_graph_write_json(g, &text), ASTITCH_OK);
    assert_string_equal(
        text,
        "{\n"
        "  \"format\": \"astitch-graph\",\n"
        "  \"version\": 1,\n"
        "  \"name\": \"tiny\",\n"
        "  \"nodes\": [\n"
        "    {\"name\": \"x\", \"op\": \"parameter\", \"dtype\": \"f32\", \"shape\": [2, 3]},\n"
        "    {\"name\": \"constant.1\", \"op\": \"constant\", \"dtype\": \"f32\", "
        "\"shape\": [2, 3], "
        "\"values\": [1.0, 0.5, -2.0, 1e-05, 3e+20, 0.1]},\n"
        "    {\"name\": \"add.2\", \"op\": \"add\", \"inputs\": [\"x\", \"constant.1\"]},\n"
        "    {\"name\": \"reduce.3\", \"op\": \"reduce\", \"kind\": \"sum\", "
        "\"inputs\": [\"add.2\"], "
        "\"axes\": [1]}\n"
        "  ],\n"
        "  \"outputs\": [\"reduce.3\"]\n"
        "}\n");
    astitch_free(text);
    astitch_graph_destroy(g);
}

/* Reads text as "t.json" and expects failure with a message that starts with `start` and
 * contains `part`. */
static void expect_error(astitch_context *ctx, const char *text, const char *start,
                         const char *part)
{
    astitch_graph *g = (astitch_graph *)ctx; /* must be reset to NULL */
    assert_int_not_equal(astitch_graph_read_json(ctx, text, strlen(text), "t.json", &g),
                         ASTITCH_OK);
    assert_null(g);
    const char *msg = astitch_last_error(ctx);
    if (strncmp(msg, start, strlen(start)) != 0 || !strstr(msg, part))
        fail_msg("message '%s' does not start with '%s' and contain '%s'", msg, start, part);
}

static void test_error_positions(void **state)
{
    astitch_context *ctx = *state;
    /* jansson's own position: the second comma on line 2 is column 15 */
    expect_error(ctx, "{\"format\": \"astitch-graph\",\n \"version\": 1,,\n", "t.json:2:15: ",
                 "string or '}' expected near ','");
    const char *nodes = HEAD " \"nodes\": [\n  " XNODE ",\n"
                        "  {\"name\": \"w\", \"op\": \"parameter\", \"dtype\": \"f32\","
                        " \"shape\": [4]},\n";
    char text[2048];
    snprintf(text, sizeof text,
             "%s  {\"name\": \"sum\", \"op\": \"add\", \"inputs\": [\"x\", \"w\"]}\n ],\n"
             " \"outputs\": [\"sum\"]}\n", nodes);
    expect_error(ctx, text, "t.json:5:3: node 2 'sum' (add): ", "operand shapes differ");
    snprintf(text, sizeof text,
             "%s     {\"name\": \"m\", \"op\": \"matmul\", \"inputs\": [\"x\", \"w\"]}\n ],\n"
             " \"outputs\": [\"m\"]}\n", nodes);
    expect_error(ctx, text, "t.json:5:6: node 2 'm': unknown op \"matmul\"", "");
    snprintf(text, sizeof text,
             "%s  {\"name\": \"e\", \"op\": \"exp\", \"inputs\": [\"x\"], \"shape\": [4, 3]}\n ],\n"
             " \"outputs\": [\"e\"]}\n", nodes);
    expect_error(ctx, text, "t.json:5:3: node 2 'e' (exp): key \"shape\" does not apply", "");
    snprintf(text, sizeof text,
             "%s  {\"name\": \"e\", \"op\": \"exp\", \"inputs\": [\"q\"]}\n ],\n"
             " \"outputs\": [\"e\"]}\n", nodes);
    expect_error(ctx, text, "t.json:5:3: node 2 'e' (exp): ", "refers to unknown node 'q'");
    snprintf(text, sizeof text,
             "%s  {\"name\": \"w\", \"op\": \"exp\", \"inputs\": [\"x\"]}\n ],\n"
             " \"outputs\": [\"w\"]}\n", nodes);
    expect_error(ctx, text, "t.json:5:3: node 2 'w' (exp): duplicate name 'w'", "node 1 at 4:3");
    snprintf(text, sizeof text,
             "%s  {\"name\": \"p\", \"op\": \"neg\", \"inputs\": [\"q\"]},\n"
             "  {\"name\": \"q\", \"op\": \"neg\", \"inputs\": [\"p\"]}\n ],\n"
             " \"outputs\": [\"x\"]}\n", nodes);
    expect_error(ctx, text, "t.json:5:3: node 2 'p' (neg): cycle: p -> q -> p", "");
    snprintf(text, sizeof text, "%s  {\"name\": \"e\", \"op\": \"exp\", \"inputs\": [\"x\"]}\n ],\n"
             " \"outputs\": [\"e\",\n  \"nothing\"]}\n", nodes);
    expect_error(ctx, text, "t.json:8:3: output 'nothing' is not a node", "");
    /* columns count characters, not bytes, as jansson's do */
    expect_error(ctx,
                 HEAD " \"comment\": \"\xc3\xa9\xc3\xa9\", \"nodes\": [{\"name\": \"\xc3\xa9\","
                 " \"op\": \"parameter\", \"dtype\": \"f32\", \"shape\": [-1]}],\n"
                 " \"outputs\": [\"\xc3\xa9\"]}\n",
                 "t.json:2:29: node 0 '\xc3\xa9' (parameter): ", "negative");
    /* no source: "<graph>" */
    astitch_graph *g;
    assert_int_equal(astitch_graph_read_json(ctx, "[]", 2, NULL, &g), ASTITCH_ERR_PARSE);
    assert_string_equal(astitch_last_error(ctx),
                        "<graph>:1:1: the top level must be an object, not an array");
}

/* Writes a chain n0 <- n1 <- ... <- n(len-1) of neg nodes, last node first; n0 is a parameter,
 * or, when cyclic, a neg of the last node. Returns malloc'd text. */
static char *chain_text(int len, bool cyclic, size_t *size)
{
    char *text = malloc((size_t)len * 80 + 256);
    if (!text) {
        fail_msg("out of memory");
        return NULL;
    }
    size_t at = (size_t)sprintf(text, HEAD " \"nodes\": [\n");
    for (int i = len - 1; i >= 1; i--)
        at += (size_t)sprintf(text + at,
                              "  {\"name\": \"n%d\", \"op\": \"neg\", \"inputs\": [\"n%d\"]},\n", i,
                              i - 1);
    if (cyclic)
        at += (size_t)sprintf(text + at,
                              "  {\"name\": \"n0\", \"op\": \"neg\", \"inputs\": [\"n%d\"]}\n",
                              len - 1);
    else
        at += (size_t)sprintf(text + at, "  {\"name\": \"n0\", \"op\": \"parameter\","
                                         " \"dtype\": \"f32\", \"shape\": [2]}\n");
    at += (size_t)sprintf(text + at, " ],\n \"outputs\": [\"n%d\"]}\n", len - 1);
    *size = at;
    return text;
}

/* A chain written backwards is sorted into order; a cycle through 100000 nodes is found
 * without deep recursion and reported with a bounded message. */
static void test_long_chain_and_cycle(void **state)
{
    astitch_context *ctx = *state;
    size_t size = 0;
    char *text = chain_text(3000, false, &size);
    astitch_graph *g;
    assert_int_equal(astitch_graph_read_json(ctx, text, size, "chain", &g), ASTITCH_OK);
    free(text);
    assert_int_equal(astitch_graph_num_nodes(g), 3000);
    assert_int_equal(astitch_graph_find(g, "n0"), 0);
    assert_int_equal(astitch_graph_find(g, "n1234"), 1234);
    assert_int_equal(astitch_graph_output(g, 0), 2999);
    astitch_graph_destroy(g);

    text = chain_text(100000, true, &size);
    assert_int_equal(astitch_graph_read_json(ctx, text, size, "chain", &g), ASTITCH_ERR_GRAPH);
    free(text);
    const char *msg = astitch_last_error(ctx);
    if (!strstr(msg, "chain:3:3: node 0 'n99999' (neg): cycle: n99999 -> n0 -> n1 -> n2 -> ") ||
        !strstr(msg, " -> ..."))
        fail_msg("unexpected message '%s'", msg);
}

static void test_files_and_arguments(void **state)
{
    astitch_context *ctx = *state;
    char path[] = "/tmp/astitch_json_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    const char *text = HEAD " \"nodes\": [" XNODE "], \"outputs\": [\"x\"]}";
    astitch_graph *g = read_ok(ctx, text), *back;
    assert_int_equal(astitch_graph_save_json(g, path), ASTITCH_OK);
    assert_int_equal(astitch_graph_load_json(ctx, path, &back), ASTITCH_OK);
    assert_same_graph(g, back);
    astitch_graph_destroy(back);
    /* errors in a loaded file name the file */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"format\": \"astitch-graph\"}", f);
    fclose(f);
    assert_int_equal(astitch_graph_load_json(ctx, path, &back), ASTITCH_ERR_PARSE);
    assert_null(back);
    char want[128];
    snprintf(want, sizeof want, "%s:1:1: missing \"version\"", path);
    assert_non_null(strstr(astitch_last_error(ctx), want));
    unlink(path);
    assert_int_equal(astitch_graph_load_json(ctx, path, &back), ASTITCH_ERR_IO);
    assert_non_null(strstr(astitch_last_error(ctx), path));
    assert_int_equal(astitch_graph_save_json(g, "/nonexistent-dir/x.json"), ASTITCH_ERR_IO);
    assert_non_null(strstr(astitch_last_error(ctx), "/nonexistent-dir/x.json"));
    /* the text need not end in NUL: only len bytes are read */
    char buf[512];
    size_t n = strlen(text);
    memcpy(buf, text, n);
    memcpy(buf + n, "}}}garbage", 10);
    assert_int_equal(astitch_graph_read_json(ctx, buf, n, NULL, &back), ASTITCH_OK);
    astitch_graph_destroy(back);
    char *out_text;
    assert_int_equal(astitch_graph_read_json(NULL, text, n, NULL, &back), ASTITCH_ERR_ARGUMENT);
    assert_int_equal(astitch_graph_read_json(ctx, NULL, 5, NULL, &back), ASTITCH_ERR_ARGUMENT);
    assert_int_equal(astitch_graph_read_json(ctx, text, n, NULL, NULL), ASTITCH_ERR_ARGUMENT);
    assert_int_equal(astitch_graph_write_json(NULL, &out_text), ASTITCH_ERR_ARGUMENT);
    assert_null(out_text);
    assert_int_equal(astitch_graph_write_json(g, NULL), ASTITCH_ERR_ARGUMENT);
    assert_int_equal(astitch_graph_load_json(ctx, NULL, &back), ASTITCH_ERR_ARGUMENT);
    /* a graph whose building failed is not written */
    const int64_t d[] = {4};
    astitch_node bad = astitch_binary(g, ASTITCH_OP_ADD, 0, astitch_parameter(g, "v", ASTITCH_F32,
                                                                              1, d));
    assert_int_equal(bad, ASTITCH_NO_NODE);
    assert_int_not_equal(astitch_graph_write_json(g, &out_text), ASTITCH_OK);
    assert_null(out_text);
    astitch_graph_destroy(g);
}

/* The complete example of docs/graph-format.md (its first json block) loads, has the shapes the
 * page states, and round-trips. */
static void test_documented_example(void **state)
{
    astitch_context *ctx = *state;
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    assert_non_null(root);
    char path[1024];
    snprintf(path, sizeof path, "%s/docs/graph-format.md", root);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char page[1 << 16];
    size_t n = fread(page, 1, sizeof page - 1, f);
    fclose(f);
    page[n] = '\0';
    char *start = strstr(page, "```json\n"), *end = start ? strstr(start, "\n```") : NULL;
    assert_non_null(end);
    start += 8;
    astitch_graph *g;
    if (astitch_graph_read_json(ctx, start, (size_t)(end - start), "example", &g) != ASTITCH_OK)
        fail_msg("%s", astitch_last_error(ctx));
    struct {
        const char *name;
        astitch_dtype dtype;
        int rank;
        int64_t dims[3];
    } want[] = {
        {"emb", ASTITCH_F32, 3, {2, 4, 8}}, {"h", ASTITCH_F32, 3, {2, 4, 8}},
        {"sum", ASTITCH_F32, 2, {2, 4}},    {"mean", ASTITCH_F32, 2, {2, 4}},
        {"left", ASTITCH_BOOL, 3, {2, 4, 8}}, {"proj", ASTITCH_F16, 3, {2, 4, 16}},
        {"flat.t", ASTITCH_F16, 2, {16, 8}}, {"even", ASTITCH_F16, 2, {8, 8}},
        {"twice", ASTITCH_F16, 2, {8, 16}}, {"out", ASTITCH_F16, 2, {8, 16}},
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        astitch_tensor_info info;
        assert_int_equal(astitch_node_info(g, astitch_graph_find(g, want[i].name), &info),
                         ASTITCH_OK);
        assert_int_equal(info.dtype, want[i].dtype);
        assert_int_equal(info.rank, want[i].rank);
        assert_memory_equal(info.dims, want[i].dims, (size_t)want[i].rank * sizeof(int64_t));
    }
    assert_string_equal(astitch_graph_name(g), "tour");
    assert_int_equal(astitch_graph_num_parameters(g), 4);
    assert_round_trip(ctx, g);
    astitch_graph_destroy(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_every_op, setup, teardown),
        cmocka_unit_test_setup_teardown(test_round_trip_random_constants, setup, teardown),
        cmocka_unit_test_setup_teardown(test_forward_references_sorted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_file_order_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_accepted_spellings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_writer_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_error_positions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_chain_and_cycle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_files_and_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_documented_example, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
