/*
 * fuzz_graph.c: a libFuzzer target over what a graph.json reaches without code generation:
 * the reader, the verifier, the JSON round trip, the planner under every fusion mode on several
 * device models and option sets, the plan writers (text, JSON, dot), and the reference
 * interpreter on graphs small enough to run at once.
 *
 * It aborts (a finding) on an internal error anywhere, on a graph that verifies but whose
 * written JSON does not read back, or reads back to other text, and on anything the sanitizers
 * see. Every other failure is a clear refusal of bad input and is fine. tools/fuzz.sh builds it
 * with clang's libFuzzer from the sources of lib/ir and lib/passes (below codegen: no LLVM) and
 * runs it; the corpus (tests/fuzz/corpus) and dictionary (tests/fuzz/graph.dict) live here.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "astitch/astitch.h"
#include "astitch/plan.h"

enum {
    MAX_INPUT = 1 << 16,          /* bytes of JSON looked at */
    MAX_RUN_ELEMENTS = 1 << 16,   /* the reference runs graphs of at most this many elements */
};

static void finding(astitch_context *ctx, const char *what)
{
    fprintf(stderr, "fuzz_graph: %s: %s\n", what, ctx ? astitch_last_error(ctx) : "");
    abort();
}

/* Aborts on an internal error: every other status is a refusal with a message. */
static void expect_no_internal(astitch_context *ctx, astitch_status s, const char *what)
{
    if (s == ASTITCH_ERR_INTERNAL)
        finding(ctx, what);
}

static uint64_t hash(const uint8_t *data, size_t size)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < size; i++)
        h = (h ^ data[i]) * 1099511628211ull;
    return h;
}

/* The graph written, read back and written again must give the same text. */
static void round_trip(astitch_context *ctx, const astitch_graph *g)
{
    char *a = NULL, *b = NULL;
    astitch_graph *back = NULL;
    astitch_status s = astitch_graph_write_json(g, &a);
    expect_no_internal(ctx, s, "write");
    if (s != ASTITCH_OK)
        return;
    if (astitch_graph_read_json(ctx, a, strlen(a), "round trip", &back) != ASTITCH_OK)
        finding(ctx, "a verified graph's JSON does not read back");
    if (astitch_graph_write_json(back, &b) != ASTITCH_OK || strcmp(a, b) != 0)
        finding(ctx, "a verified graph's JSON reads back to other text");
    astitch_free(a);
    astitch_free(b);
    astitch_graph_destroy(back);
}

/* Plans g under every fusion mode with option switches from h, on two device models, and
 * writes each plan three ways. */
static void plans(astitch_context *ctx, astitch_graph *g, uint64_t h)
{
    static const char *const devices[] = {"h100", "v100", "a100", "host"};
    static const astitch_fusion modes[] = {ASTITCH_FUSION_NONE, ASTITCH_FUSION_XLA,
                                           ASTITCH_FUSION_STITCH};
    for (int d = 0; d < 2; d++) {
        astitch_device dev;
        if (astitch_device_builtin(devices[(h >> (2 * d)) % 4], &dev) != ASTITCH_OK)
            finding(ctx, "device model");
        for (int m = 0; m < 3; m++) {
            astitch_plan_options o;
            astitch_plan_options_default(&o);
            o.fusion = modes[m];
            uint64_t bits = h >> (8 + 8 * m + 24 * d);
            o.remote = !(bits & 1);
            o.merge = !(bits & 2);
            o.packing = !(bits & 4);
            o.deterministic = bits & 8;
            o.persistent = bits & 16;
            o.one_pass_variance = !(bits & 32);
            o.wide_rows = bits & 64;
            o.column_vectors = bits & 128;
            astitch_plan *p = NULL;
            astitch_status s = astitch_plan_create(g, &dev, &o, &p);
            expect_no_internal(ctx, s, "plan");
            if (s != ASTITCH_OK)
                continue;
            char *text = NULL;
            expect_no_internal(ctx, astitch_plan_text(p, &text), "plan text");
            astitch_free(text);
            text = NULL;
            expect_no_internal(ctx, astitch_plan_json(p, &text), "plan JSON");
            astitch_free(text);
            text = NULL;
            expect_no_internal(ctx, astitch_plan_dot(p, &text), "plan dot");
            astitch_free(text);
            astitch_plan_destroy(p);
        }
    }
}

/* Runs the reference on inputs drawn from h when every node is small. */
static void reference(astitch_context *ctx, astitch_graph *g, uint64_t h)
{
    int64_t total = 0;
    for (int i = 0; i < astitch_graph_num_nodes(g); i++) {
        astitch_tensor_info t;
        if (astitch_node_info(g, i, &t) != ASTITCH_OK)
            return;
        total += t.elements;
        if (total > MAX_RUN_ELEMENTS)
            return;
    }
    int np = astitch_graph_num_parameters(g), no = astitch_graph_num_outputs(g);
    void **in = calloc((size_t)np + 1, sizeof *in), **out = calloc((size_t)no + 1, sizeof *out);
    bool ok = in && out;
    for (int i = 0; ok && i < np; i++) {
        astitch_tensor_info t;
        ok = astitch_node_info(g, astitch_graph_parameter(g, i), &t) == ASTITCH_OK &&
             (in[i] = malloc((size_t)t.bytes + 1)) != NULL;
        for (int64_t k = 0; ok && k < t.bytes; k++) {
            h = h * 6364136223846793005ull + 1442695040888963407ull;
            ((unsigned char *)in[i])[k] = (unsigned char)(h >> 56);
        }
    }
    for (int i = 0; ok && i < no; i++) {
        astitch_tensor_info t;
        ok = astitch_node_info(g, astitch_graph_output(g, i), &t) == ASTITCH_OK &&
             (out[i] = malloc((size_t)t.bytes + 1)) != NULL;
    }
    if (ok)
        expect_no_internal(ctx, astitch_run_reference(g, (const void *const *)in, out), "reference");
    for (int i = 0; in && i < np; i++)
        free(in[i]);
    for (int i = 0; out && i < no; i++)
        free(out[i]);
    free(in);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    astitch_context *ctx = NULL;
    if (astitch_context_create(&ctx) != ASTITCH_OK)
        return 0;
    astitch_graph *g = NULL;
    astitch_status s = astitch_graph_read_json(ctx, (const char *)data, size, "fuzz", &g);
    expect_no_internal(ctx, s, "read");
    if (s == ASTITCH_OK) {
        s = astitch_graph_verify(g);
        expect_no_internal(ctx, s, "verify");
    }
    if (s == ASTITCH_OK) {
        uint64_t h = hash(data, size);
        round_trip(ctx, g);
        plans(ctx, g, h);
        reference(ctx, g, h);
    }
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
    return 0;
}
