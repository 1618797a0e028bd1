/* test_diff_host.c: the differential test of the generated kernels on the host target: every
 * example and many random graphs, under fusion none, xla and stitch, against the reference
 * interpreter (tolerances in diff_check.h), with outputs poisoned before each run.
 * ASTITCH_DIFF_GRAPHS sets the number of random graphs (default 500: fixed seeds 1..N-1 and one
 * fresh seed, printed; ASTITCH_FRESH_SEED replays one). ASTITCH_DIFF_MODEL_GRAPHS more (default
 * 120) are planned for the h100 model, as the GPU runs them, under fusion xla and stitch with
 * and without persistent grids. The examples and 100 graphs run once more split at global
 * barriers.
 * ASTITCH_DIFF_SHARD=K/N runs only the K-th of N shares of the examples and random graphs (and
 * the split-combine test in share 0), so that meson runs the shares in parallel. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "diff_check.h"
#include "gen_graph.h"

static const astitch_fusion fusions[] = {ASTITCH_FUSION_NONE, ASTITCH_FUSION_XLA,
                                         ASTITCH_FUSION_STITCH};

static int shard, shards = 1; /* ASTITCH_DIFF_SHARD */

/* True when work item i belongs to this shard: items are dealt by a hash of their number,
 * since the generator's options cycle with the seed (graph size with seed % 4). */
static bool mine(int i)
{
    uint32_t h = (uint32_t)i * 2654435761u;
    return (int)((h >> 16) % (uint32_t)shards) == shard;
}

static int check_graph(astitch_graph *g, const char *what, uint64_t seed)
{
    int failures = 0;
    for (size_t f = 0; f < sizeof fusions / sizeof fusions[0]; f++) {
        DiffResult r;
        diff_run(g, ASTITCH_TARGET_HOST, fusions[f], seed, &r);
        if (!r.ok) {
            printf("FAIL %s fusion=%s seed=%llu: %s\n", what, astitch_fusion_name(fusions[f]),
                   (unsigned long long)seed, r.message);
            failures++;
        }
    }
    return failures;
}

/* check_graph for g planned for the GPU model `model` instead of the host's, so that its
 * kernels take the GPU's launch shapes (resident rows, warps per row, grid barriers): fusion
 * xla and stitch, each with blocks per tile and with persistent grids. */
static int check_graph_model(astitch_graph *g, const char *what, uint64_t seed, const char *model)
{
    astitch_device dev;
    assert_int_equal(astitch_device_builtin(model, &dev), ASTITCH_OK);
    int failures = 0;
    for (int f = 1; f < 3; f++)
        for (int persistent = 0; persistent < 2; persistent++) {
            astitch_compile_options o;
            astitch_compile_options_default(&o);
            o.target = ASTITCH_TARGET_HOST;
            o.device = &dev;
            o.plan.fusion = fusions[f];
            o.plan.persistent = persistent;
            DiffResult r;
            diff_run_with(g, &o, seed, &r);
            if (!r.ok) {
                printf("FAIL %s (%s model) fusion=%s%s seed=%llu: %s\n", what, model,
                       astitch_fusion_name(fusions[f]), persistent ? " persistent" : "",
                       (unsigned long long)seed, r.message);
                failures++;
            }
        }
    return failures;
}

static void test_examples(void **state)
{
    (void)state;
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/examples", root ? root : ".");
    DIR *d = opendir(dir);
    assert_non_null(d);
    int failures = 0, count = 0, seen = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        size_t n = strlen(ent->d_name);
        if (n < 6 || strcmp(ent->d_name + n - 5, ".json") != 0 || !mine(seen++))
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        astitch_context *ctx;
        astitch_graph *g;
        assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
        if (astitch_graph_load_json(ctx, path, &g) != ASTITCH_OK)
            fail_msg("%s: %s", path, astitch_last_error(ctx));
        failures += check_graph(g, ent->d_name, 7);
        count++;
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
    }
    closedir(d);
    printf("examples: %d of %d graphs x 3 fusions, %d failures\n", count, seen, failures);
    assert_true(seen >= 10);
    assert_int_equal(failures, 0);
}

static astitch_status gen_custom(void *user, int n, const astitch_tensor_view *in,
                                 astitch_tensor_view *out)
{
    (void)user;
    (void)n;
    int64_t count = 1;
    for (int i = 0; i < out->rank; i++)
        count *= out->dims[i];
    memcpy(out->data, in[0].data, (size_t)count * astitch_dtype_size(out->dtype));
    return ASTITCH_OK;
}

/* Random graphs: seeds 1..total-1 and a fresh one, planned for the host's model (model NULL) or
 * for the named GPU model. */
static void random_graphs(int total, const char *model)
{
    uint64_t fresh = gen_fresh_seed();
    printf("random graphs%s%s: %d (seeds 1..%d and fresh seed %llu; rerun it with "
           "ASTITCH_FRESH_SEED=%llu)\n", model ? " for the model " : "", model ? model : "",
           total, total - 1, (unsigned long long)fresh, (unsigned long long)fresh);
    int failures = 0, checked = 0;
    for (int i = 0; i < total; i++) {
        if (!mine(i))
            continue;
        checked++;
        uint64_t seed = i == total - 1 ? fresh : (uint64_t)i + 1;
        gen_options o;
        gen_options_cycled(&o, seed);
        o.discontinuous = model && seed % 2;
        astitch_context *ctx;
        assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
        astitch_register_custom(ctx, "gen_custom", gen_custom, NULL);
        astitch_graph *g = gen_graph(ctx, seed, &o);
        if (!g)
            fail_msg("generator failed for seed %llu: %s", (unsigned long long)seed,
                     astitch_last_error(ctx));
        char what[64];
        snprintf(what, sizeof what, "random graph %d", i);
        failures += model ? check_graph_model(g, what, seed, model) : check_graph(g, what, seed);
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
    }
    printf("random graphs: %d of %d x %s, %d failures\n", checked, total,
           model ? "2 fusions x 2 grids" : "3 fusions", failures);
    assert_int_equal(failures, 0);
}

static void test_random_graphs(void **state)
{
    (void)state;
    const char *env = getenv("ASTITCH_DIFF_GRAPHS");
    random_graphs(env ? atoi(env) : 500, NULL);
}

/* The kernels the GPU runs, on the host: random graphs planned for the h100 model. */
static void test_random_graphs_h100(void **state)
{
    (void)state;
    const char *env = getenv("ASTITCH_DIFF_MODEL_GRAPHS");
    random_graphs(env ? atoi(env) : 120, "h100");
}

/* Every kernel with global barriers run as its parts cut at the barriers (the fallback when
 * its blocks cannot all be resident) must compute the same. */
static void test_split_fallback(void **state)
{
    setenv("ASTITCH_FORCE_PARTS", "1", 1);
    printf("split at global barriers:\n");
    test_examples(state);
    random_graphs(100, NULL);
    unsetenv("ASTITCH_FORCE_PARTS");
}

/* Split reductions of every kind, combined by atomics and in order, on the host's SIMT
 * runtime (few long rows: the host model splits them). */
static void test_split_combines(void **state)
{
    (void)state;
    if (shard == 0)
        assert_int_equal(diff_split_combines(ASTITCH_TARGET_HOST, 3, 40000, 3), 0);
}

int main(void)
{
    const char *env = getenv("ASTITCH_DIFF_SHARD");
    if (env && (sscanf(env, "%d/%d", &shard, &shards) != 2 || shards < 1 || shard < 0 ||
                shard >= shards)) {
        fprintf(stderr, "ASTITCH_DIFF_SHARD='%s': expected K/N with 0 <= K < N\n", env);
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_random_graphs),
        cmocka_unit_test(test_random_graphs_h100),
        cmocka_unit_test(test_split_fallback),
        cmocka_unit_test(test_split_combines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
