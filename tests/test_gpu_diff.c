/* test_gpu_diff.c: the generated kernels on a real GPU against the reference interpreter:
 * every example and many random graphs under fusion none, xla and stitch; the split fallback
 * forced; two executables running at once on two streams. Exits 77 (skip) without a driver.
 * ASTITCH_GPU_GRAPHS sets the number of random graphs (default 1000, fixed seeds and one fresh
 * seed, printed). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "diff_check.h"
#include "gen_graph.h"
#include "runtime/cuda_driver.h"

static const astitch_fusion fusions[] = {ASTITCH_FUSION_NONE, ASTITCH_FUSION_XLA,
                                         ASTITCH_FUSION_STITCH};

static int check_graph(astitch_graph *g, const char *what, uint64_t seed, int *runs)
{
    int failures = 0;
    for (size_t f = 0; f < sizeof fusions / sizeof fusions[0]; f++) {
        DiffResult r;
        diff_run(g, ASTITCH_TARGET_CUDA, fusions[f], seed, &r);
        (*runs)++;
        if (!r.ok) {
            printf("FAIL %s fusion=%s seed=%llu: %s\n", what, astitch_fusion_name(fusions[f]),
                   (unsigned long long)seed, r.message);
            failures++;
        }
    }
    return failures;
}

static int run_examples(const char *label)
{
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/examples", root ? root : ".");
    DIR *d = opendir(dir);
    assert_non_null(d);
    int failures = 0, count = 0, runs = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        size_t n = strlen(ent->d_name);
        if (n < 6 || strcmp(ent->d_name + n - 5, ".json") != 0)
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        astitch_context *ctx;
        astitch_graph *g;
        assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
        if (astitch_graph_load_json(ctx, path, &g) != ASTITCH_OK)
            fail_msg("%s: %s", path, astitch_last_error(ctx));
        failures += check_graph(g, ent->d_name, 11, &runs);
        count++;
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
    }
    closedir(d);
    printf("%s: %d examples, %d runs, %d failures\n", label, count, runs, failures);
    assert_true(count >= 10);
    return failures;
}

static void test_examples(void **state)
{
    (void)state;
    assert_int_equal(run_examples("examples on the GPU"), 0);
}

/* The plan cut at its global barriers into several kernels must compute the same. */
static void test_split_fallback(void **state)
{
    (void)state;
    setenv("ASTITCH_FORCE_SPLIT", "1", 1);
    int failures = run_examples("examples, split at global barriers");
    unsetenv("ASTITCH_FORCE_SPLIT");
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

static void test_random_graphs(void **state)
{
    (void)state;
    const char *env = getenv("ASTITCH_GPU_GRAPHS");
    int total = env ? atoi(env) : 1000;
    uint64_t fresh = gen_fresh_seed();
    printf("random graphs: %d (seeds 1..%d and fresh seed %llu)\n", total, total - 1,
           (unsigned long long)fresh);
    int failures = 0, runs = 0;
    for (int i = 0; i < total; i++) {
        uint64_t seed = i == total - 1 ? fresh : (uint64_t)i + 1;
        gen_options o;
        gen_options_default(&o);
        o.half = seed % 3 == 0;
        o.max_dim = seed % 4 == 0 ? 256 : seed % 4 == 1 ? 64 : 8;
        o.nodes = 10 + (int)(seed % 50);
        o.percent_custom = seed % 5 == 0 ? 5 : 0;
        astitch_context *ctx;
        assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
        astitch_register_custom(ctx, "gen_custom", gen_custom, NULL);
        astitch_graph *g = gen_graph(ctx, seed, &o);
        if (!g)
            fail_msg("generator failed for seed %llu: %s", (unsigned long long)seed,
                     astitch_last_error(ctx));
        char what[64];
        snprintf(what, sizeof what, "random graph %d", i);
        failures += check_graph(g, what, seed, &runs);
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
    }
    printf("random graphs on the GPU: %d graphs, %d runs, %d failures\n", total, runs, failures);
    assert_int_equal(failures, 0);
}

/* A softmax-like graph over [rows, cols]: exp(x - max) / sum. */
static astitch_graph *softmax_graph(astitch_context *ctx, int64_t rows, int64_t cols)
{
    astitch_graph *g;
    astitch_graph_create(ctx, &g);
    int64_t d[] = {rows, cols}, ax = 1, b0 = 0;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d);
    astitch_node m = astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, &ax);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP,
                                   astitch_binary(g, ASTITCH_OP_SUB, x,
                                                  astitch_broadcast_in_dim(g, m, 2, d, &b0)));
    astitch_node s = astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &ax);
    astitch_node y = astitch_binary(g, ASTITCH_OP_DIV, e, astitch_broadcast_in_dim(g, s, 2, d, &b0));
    astitch_add_output(g, y);
    return g;
}

/* Two executables queued alternately on two streams, then checked against the reference. */
static void test_two_streams(void **state)
{
    (void)state;
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    CudaDevice *dev;
    assert_int_equal(cuda_device_open(ctx, 0, &dev), ASTITCH_OK);
    assert_int_equal(cuda_enter(ctx, dev), ASTITCH_OK);
    int64_t shape[2][2] = {{4096, 1000}, {300, 30000}};
    astitch_graph *g[2];
    astitch_executable *x[2];
    CUstream st[2];
    CUdeviceptr din[2], dout[2];
    float *in[2], *out[2], *ref[2];
    uint64_t seed = diff_fresh_seed();
    printf("two streams: seed %llu\n", (unsigned long long)seed);
    for (int i = 0; i < 2; i++) {
        g[i] = softmax_graph(ctx, shape[i][0], shape[i][1]);
        astitch_compile_options o;
        astitch_compile_options_default(&o);
        o.target = ASTITCH_TARGET_CUDA;
        assert_int_equal(astitch_compile(g[i], &o, &x[i]), ASTITCH_OK);
        size_t n = (size_t)(shape[i][0] * shape[i][1]);
        in[i] = malloc(n * 4);
        out[i] = malloc(n * 4);
        ref[i] = malloc(n * 4);
        for (size_t k = 0; k < n; k++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            in[i][k] = (float)((double)(seed >> 11) * 0x1.0p-53 * 8 - 4);
        }
        assert_int_equal(astitch_run_reference(g[i], (const void *const *)&in[i], (void *const *)&ref[i]), ASTITCH_OK);
        assert_int_equal(cuda_stream_create(ctx, dev, &st[i]), ASTITCH_OK);
        assert_int_equal(cuda_alloc(ctx, dev, n * 4, &din[i]), ASTITCH_OK);
        assert_int_equal(cuda_alloc(ctx, dev, n * 4, &dout[i]), ASTITCH_OK);
        assert_int_equal(cuda_copy_to_device(ctx, dev, din[i], in[i], n * 4, st[i]), ASTITCH_OK);
        assert_int_equal(cuda_memset_u32(ctx, dev, dout[i], 0xffffffffu, n, st[i]), ASTITCH_OK);
    }
    for (int rep = 0; rep < 20; rep++)
        for (int i = 0; i < 2; i++) {
            uint64_t a = din[i], b = dout[i];
            if (astitch_execute_device(x[i], &a, &b, st[i]) != ASTITCH_OK)
                fail_msg("execute on stream %d: %s", i, astitch_last_error(ctx));
        }
    for (int i = 0; i < 2; i++) {
        size_t n = (size_t)(shape[i][0] * shape[i][1]);
        assert_int_equal(cuda_copy_to_host(ctx, dev, out[i], dout[i], n * 4, st[i]), ASTITCH_OK);
        assert_int_equal(cuda_stream_sync(ctx, dev, st[i]), ASTITCH_OK);
        double worst = 0;
        for (size_t k = 0; k < n; k++) {
            double e = out[i][k] > ref[i][k] ? out[i][k] - ref[i][k] : ref[i][k] - out[i][k];
            if (!(e <= worst))
                worst = e;
        }
        printf("stream %d: worst error %.3g\n", i, worst);
        assert_true(worst < 1e-5);
        cuda_free(dev, din[i]);
        cuda_free(dev, dout[i]);
        cuda_stream_destroy(dev, st[i]);
        astitch_executable_destroy(x[i]);
        astitch_graph_destroy(g[i]);
        free(in[i]);
        free(out[i]);
        free(ref[i]);
    }
    cuda_leave(dev);
    cuda_device_close(dev);
    astitch_context_destroy(ctx);
}

int main(void)
{
    astitch_context *ctx;
    astitch_context_create(&ctx);
    CudaDevice *dev;
    if (cuda_device_open(ctx, 0, &dev) != ASTITCH_OK) {
        printf("skipping: %s\n", astitch_last_error(ctx));
        astitch_context_destroy(ctx);
        return 77;
    }
    printf("device: %s\n", dev->info.name);
    cuda_device_close(dev);
    astitch_context_destroy(ctx);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_split_fallback),
        cmocka_unit_test(test_two_streams),
        cmocka_unit_test(test_random_graphs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
