/*
 * test_examples.c: every examples/NAME.json loads, verifies and round-trips through the writer
 * (write, read back, write again: the two texts are equal), and the required examples exist
 * with the outputs and op names that docs/examples.md promises.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "astitch/astitch.h"

#define MAX_EXAMPLES 64

typedef struct Example {
    char path[1024];
    char file[256];
} Example;

/* Reads a whole file into a NUL-terminated malloc'd buffer; fails the test otherwise. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    do {
        if (cap - len < 4096) {
            cap = cap ? 2 * cap : 65536;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    fclose(f);
    buf[len] = '\0';
    return buf;
}

static int count_occurrences(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static astitch_graph *load(astitch_context *ctx, const char *path)
{
    astitch_graph *g = NULL;
    if (astitch_graph_load_json(ctx, path, &g) != ASTITCH_OK)
        fail_msg("%s: %s", path, astitch_last_error(ctx));
    if (astitch_graph_verify(g) != ASTITCH_OK)
        fail_msg("%s: verify: %s", path, astitch_last_error(ctx));
    return g;
}

/* The node called name has the given op and shape; rank < 0 skips the shape check. */
static void assert_node(const astitch_graph *g, const char *name, astitch_op op, int rank,
                        const int64_t *dims)
{
    astitch_node n = astitch_graph_find(g, name);
    if (n == ASTITCH_NO_NODE)
        fail_msg("no node '%s'", name);
    if (astitch_node_op(g, n) != op)
        fail_msg("node '%s' is %s, expected %s", name, astitch_op_name(astitch_node_op(g, n)),
                 astitch_op_name(op));
    if (rank < 0)
        return;
    astitch_tensor_info info;
    assert_int_equal(astitch_node_info(g, n, &info), ASTITCH_OK);
    assert_int_equal(info.dtype, ASTITCH_F32);
    assert_int_equal(info.rank, rank);
    for (int i = 0; i < rank; i++)
        if (info.dims[i] != dims[i])
            fail_msg("node '%s' dim %d is %lld, expected %lld", name, i, (long long)info.dims[i],
                     (long long)dims[i]);
}

static void test_round_trip(void **state)
{
    const Example *ex = *state;
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    char *file = read_text(ex->path);
    astitch_graph *g1 = load(ctx, ex->path);

    /* The generator writes one node per line: the reader must keep every one of them. */
    assert_int_equal(astitch_graph_num_nodes(g1), count_occurrences(file, "\n    {\"name\": "));
    assert_int_equal(astitch_graph_num_parameters(g1),
                     count_occurrences(file, "\"op\": \"parameter\""));

    char *t1 = NULL, *t2 = NULL;
    if (astitch_graph_write_json(g1, &t1) != ASTITCH_OK)
        fail_msg("%s: write: %s", ex->file, astitch_last_error(ctx));
    astitch_graph *g2 = NULL;
    if (astitch_graph_read_json(ctx, t1, strlen(t1), ex->file, &g2) != ASTITCH_OK)
        fail_msg("%s: reading written text: %s", ex->file, astitch_last_error(ctx));
    assert_int_equal(astitch_graph_verify(g2), ASTITCH_OK);
    assert_int_equal(astitch_graph_write_json(g2, &t2), ASTITCH_OK);
    if (strcmp(t1, t2) != 0)
        fail_msg("%s: text changed on a round trip", ex->file);

    assert_int_equal(astitch_graph_num_nodes(g2), astitch_graph_num_nodes(g1));
    assert_int_equal(astitch_graph_num_outputs(g2), astitch_graph_num_outputs(g1));
    for (int i = 0; i < astitch_graph_num_outputs(g1); i++) {
        astitch_tensor_info a, b;
        assert_int_equal(astitch_node_info(g1, astitch_graph_output(g1, i), &a), ASTITCH_OK);
        assert_int_equal(astitch_node_info(g2, astitch_graph_output(g2, i), &b), ASTITCH_OK);
        assert_string_equal(a.name, b.name);
        assert_int_equal(a.dtype, b.dtype);
        assert_int_equal(a.rank, b.rank);
        assert_memory_equal(a.dims, b.dims, sizeof(int64_t) * (size_t)a.rank);
    }
    astitch_free(t1);
    astitch_free(t2);
    astitch_graph_destroy(g2);
    astitch_graph_destroy(g1);
    free(file);
    astitch_context_destroy(ctx);
}

/* The required examples, each with its number of outputs and the shape of its first. */
typedef struct Expected {
    const char *file;
    int noutputs;
    int rank;
    int64_t dims[4];
} Expected;

static const Expected expected[] = {
    {"layernorm.json", 1, 3, {200, 128, 768}},
    {"softmax.json", 1, 4, {200, 12, 128, 128}},
    {"gelu_bias.json", 1, 3, {200, 128, 3072}},
    {"fig5_power_broadcast_add.json", 1, 2, {2, 128}},
    {"fig7_subgraph.json", 2, 1, {512}},
    {"dien_row_reduce.json", 1, 1, {750000}},
    {"transformer_row_reduce.json", 1, 1, {64}},
    {"layernorm_backward.json", 3, 2, {4096, 1024}},
    {"batchnorm_train.json", 3, 4, {32, 56, 56, 256}},
    {"bert_layer.json", 1, 3, {8, 128, 768}},
};

static void test_required_examples(void **state)
{
    const char *root = *state;
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        const Expected *e = &expected[i];
        char path[1024];
        snprintf(path, sizeof path, "%s/examples/%s", root, e->file);
        astitch_graph *g = load(ctx, path);
        assert_int_equal(astitch_graph_num_outputs(g), e->noutputs);
        astitch_tensor_info info;
        assert_int_equal(astitch_node_info(g, astitch_graph_output(g, 0), &info), ASTITCH_OK);
        if (info.rank != e->rank || memcmp(info.dims, e->dims, sizeof(int64_t) * (size_t)e->rank))
            fail_msg("%s: first output '%s' has an unexpected shape", e->file, info.name);
        astitch_graph_destroy(g);
    }
    astitch_context_destroy(ctx);
}

/* The paper's names in Figure 7(a) and Figure 5 are kept, with the ops they name. */
static void test_paper_names(void **state)
{
    const char *root = *state;
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/fig7_subgraph.json", root);
    astitch_graph *g = load(ctx, path);
    const int64_t rc[] = {1024, 512}, r[] = {1024}, c[] = {512};
    assert_node(g, "parameter.1", ASTITCH_OP_PARAMETER, 2, rc);
    assert_node(g, "parameter.2", ASTITCH_OP_PARAMETER, 1, r);
    assert_node(g, "broadcast.1", ASTITCH_OP_BROADCAST_IN_DIM, 2, rc);
    assert_node(g, "add.1", ASTITCH_OP_ADD, 2, rc);
    assert_node(g, "reduce.1", ASTITCH_OP_REDUCE, 1, r);
    assert_node(g, "divide.1", ASTITCH_OP_DIV, 1, r);
    assert_node(g, "power.1", ASTITCH_OP_POW, 1, r);
    assert_node(g, "broadcast.2", ASTITCH_OP_BROADCAST_IN_DIM, 2, rc);
    assert_node(g, "reduce.2", ASTITCH_OP_REDUCE, 1, c);
    assert_node(g, "multiply.1", ASTITCH_OP_MUL, 2, rc);
    assert_int_equal(astitch_graph_output(g, 1), astitch_graph_find(g, "multiply.1"));
    astitch_graph_destroy(g);

    snprintf(path, sizeof path, "%s/examples/fig5_power_broadcast_add.json", root);
    g = load(ctx, path);
    const int64_t two[] = {2}, wide[] = {2, 128};
    assert_node(g, "power.1", ASTITCH_OP_POW, 1, two);
    assert_node(g, "broadcast.1", ASTITCH_OP_BROADCAST_IN_DIM, 2, wide);
    assert_node(g, "add.1", ASTITCH_OP_ADD, 2, wide);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

static int by_file(const void *a, const void *b)
{
    return strcmp(((const Example *)a)->file, ((const Example *)b)->file);
}

int main(void)
{
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    if (!root) {
        fprintf(stderr, "ASTITCH_SOURCE_ROOT is not set\n");
        return 1;
    }
    static Example ex[MAX_EXAMPLES];
    static struct CMUnitTest tests[MAX_EXAMPLES + 2];
    int n = 0;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/examples", root);
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", dir);
        return 1;
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        if (n == MAX_EXAMPLES || len >= sizeof ex[n].file ||
            snprintf(ex[n].path, sizeof ex[n].path, "%s/%s", dir, e->d_name) >=
                (int)sizeof ex[n].path) {
            fprintf(stderr, "too many examples or path too long: %s\n", e->d_name);
            closedir(d);
            return 1;
        }
        snprintf(ex[n].file, sizeof ex[n].file, "%s", e->d_name);
        n++;
    }
    closedir(d);
    qsort(ex, (size_t)n, sizeof ex[0], by_file);

    int nt = 0;
    tests[nt++] = (struct CMUnitTest){"required_examples", test_required_examples, NULL, NULL,
                                      (void *)root};
    tests[nt++] = (struct CMUnitTest){"paper_names", test_paper_names, NULL, NULL, (void *)root};
    for (int i = 0; i < n; i++)
        tests[nt++] = (struct CMUnitTest){ex[i].file, test_round_trip, NULL, NULL, &ex[i]};
    return _cmocka_run_group_tests("examples", tests, (size_t)nt, NULL, NULL);
}
