/* test_gpu_diff.c: the generated kernels on a real GPU against the reference interpreter:
 * every example and many random graphs under fusion none, xla and stitch (one reference run per
 * graph); the split fallback forced on every example; two executables running at once on two
 * streams. Exits 77 (skip) without a driver; stops at the first kernel fault (the context is
 * lost then). ASTITCH_GPU_GRAPHS sets the number of random graphs (default 1000, fixed seeds
 * and one fresh seed, printed); ASTITCH_GPU_SHARD=K/N runs only the random graphs i with
 * i % N == K (N processes share the GPU and the machine's cores). */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "diff_check.h"
#include "gen_graph.h"
#include "runtime/cuda_driver.h"

static const astitch_fusion fusions[] = {ASTITCH_FUSION_NONE, ASTITCH_FUSION_XLA,
                                         ASTITCH_FUSION_STITCH};

/* Set once a kernel faulted: the context is lost, so every later run would fail too. */
static bool context_lost;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Compiles g for the GPU under fusion (split: cut at its global barriers) and checks it
 * against d. Returns 1 on a failure (printed), else 0. */
static int check_one(astitch_graph *g, const DiffRef *d, astitch_fusion fusion, bool split,
                     const char *what, uint64_t seed)
{
    if (split)
        setenv("ASTITCH_FORCE_SPLIT", "1", 1);
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    o.plan.fusion = fusion;
    astitch_executable *x = NULL;
    DiffResult r = {.ok = false};
    astitch_status s = astitch_compile(g, &o, &x);
    if (split)
        unsetenv("ASTITCH_FORCE_SPLIT");
    if (s == ASTITCH_OK)
        s = diff_ref_check(d, x, &r);
    if (s != ASTITCH_OK)
        snprintf(r.message, sizeof r.message, "%s", astitch_last_error(astitch_graph_context(g)));
    astitch_executable_destroy(x);
    if (s == ASTITCH_OK && r.ok)
        return 0;
    printf("FAIL %s fusion=%s%s seed=%llu: %s\n", what, astitch_fusion_name(fusion),
           split ? " (split)" : "", (unsigned long long)seed, r.message);
    if (strstr(r.message, "context is now unusable"))
        context_lost = true;
    return 1;
}

/* Every fusion mode (and, with split, stitch cut at its global barriers) against one
 * reference run. Returns the number of failing runs. */
static int check_graph(astitch_graph *g, const char *what, uint64_t seed, bool split, int *runs)
{
    DiffRef *d;
    if (diff_ref_create(g, seed, true, &d) != ASTITCH_OK) {
        printf("FAIL %s: reference: %s\n", what, astitch_last_error(astitch_graph_context(g)));
        return 1;
    }
    int failures = 0;
    for (size_t f = 0; f < sizeof fusions / sizeof fusions[0] && !context_lost; f++, (*runs)++)
        failures += check_one(g, d, fusions[f], false, what, seed);
    if (split && !context_lost) {
        failures += check_one(g, d, ASTITCH_FUSION_STITCH, true, what, seed);
        (*runs)++;
    }
    diff_ref_destroy(d);
    return failures;
}

/* Every example under every fusion mode and with the split fallback forced. */
static void test_examples(void **state)
{
    (void)state;
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/examples", root ? root : ".");
    DIR *d = opendir(dir);
    assert_non_null(d);
    int failures = 0, count = 0, runs = 0;
    double t0 = now_seconds();
    struct dirent *ent;
    while ((ent = readdir(d)) && !context_lost) {
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
        double t = now_seconds();
        failures += check_graph(g, ent->d_name, 11, true, &runs);
        printf("  %s: %.1f s\n", ent->d_name, now_seconds() - t);
        count++;
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
    }
    closedir(d);
    printf("examples on the GPU (none, xla, stitch, stitch split at global barriers): "
           "%d examples, %d runs, %d failures, %.0f s\n", count, runs, failures, now_seconds() - t0);
    assert_false(context_lost);
    assert_true(count >= 10);
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
    int total = env ? atoi(env) : 1000, shard = 0, shards = 1;
    const char *sh = getenv("ASTITCH_GPU_SHARD");
    if (sh && (sscanf(sh, "%d/%d", &shard, &shards) != 2 || shards < 1 || shard < 0 ||
               shard >= shards))
        fail_msg("ASTITCH_GPU_SHARD='%s': expected K/N with 0 <= K < N", sh);
    uint64_t fresh = gen_fresh_seed();
    printf("random graphs: %d (seeds 1..%d and fresh seed %llu), shard %d of %d\n", total,
           total - 1, (unsigned long long)fresh, shard, shards);
    int failures = 0, runs = 0;
    double t0 = now_seconds();
    int checked = 0;
    for (int i = shard; i < total && !context_lost; i += shards, checked++) {
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
        int failed = check_graph(g, what, seed, false, &runs);
        failures += failed;
        printf("  %s seed %llu: %s (%.0f s)\n", what, (unsigned long long)seed,
               failed ? "FAILED" : "ok", now_seconds() - t0);
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
    }
    printf("random graphs on the GPU: %d graphs, %d runs, %d failures, %.0f s\n", checked, runs,
           failures, now_seconds() - t0);
    if (context_lost)
        printf("stopped early: a kernel faulted and the CUDA context is lost\n");
    assert_false(context_lost);
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

/* Device tensors that are not ASTITCH_TENSOR_ALIGN-aligned, or NULL, are refused with a
 * message naming the tensor, before anything is launched; the aligned run still works. */
static void test_misaligned_pointers(void **state)
{
    (void)state;
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    CudaDevice *dev;
    assert_int_equal(cuda_device_open(ctx, 0, &dev), ASTITCH_OK);
    assert_int_equal(cuda_enter(ctx, dev), ASTITCH_OK);
    astitch_graph *g = softmax_graph(ctx, 64, 256);
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    astitch_executable *x;
    assert_int_equal(astitch_compile(g, &o, &x), ASTITCH_OK);
    size_t bytes = 64 * 256 * 4;
    CUdeviceptr din, dout;
    assert_int_equal(cuda_alloc(ctx, dev, bytes + 64, &din), ASTITCH_OK);
    assert_int_equal(cuda_alloc(ctx, dev, bytes + 64, &dout), ASTITCH_OK);
    uint64_t in = din + 4, out = dout;
    assert_int_equal(astitch_execute_device(x, &in, &out, NULL), ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(ctx), "input 0 ('x')"));
    assert_non_null(strstr(astitch_last_error(ctx), "not 16-byte aligned"));
    in = din;
    out = dout + 8;
    assert_int_equal(astitch_execute_device(x, &in, &out, NULL), ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(ctx), "output 0"));
    out = 0;
    assert_int_equal(astitch_execute_device(x, &in, &out, NULL), ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(ctx), "is NULL"));
    out = dout + 16;
    if (astitch_execute_device(x, &in, &out, NULL) != ASTITCH_OK)
        fail_msg("aligned run: %s", astitch_last_error(ctx));
    assert_int_equal(cuda_stream_sync(ctx, dev, NULL), ASTITCH_OK);
    cuda_free(dev, din);
    cuda_free(dev, dout);
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
    cuda_leave(dev);
    cuda_device_close(dev);
    astitch_context_destroy(ctx);
}

/* Split reductions of every kind, combined by atomics and in order, on the GPU; the in-order
 * combine must give identical bits over repeated runs (rows of 4M elements: many blocks). */
static void test_split_combines(void **state)
{
    (void)state;
    assert_int_equal(diff_split_combines(ASTITCH_TARGET_CUDA, 3, 40000, 5), 0);
    assert_int_equal(diff_split_combines(ASTITCH_TARGET_CUDA, 2, 4 << 20, 20), 0);
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
    setvbuf(stdout, NULL, _IOLBF, 0);
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_two_streams),
        cmocka_unit_test(test_misaligned_pointers),
        cmocka_unit_test(test_split_combines),
        cmocka_unit_test(test_random_graphs),
    };
    /* a shard runs its random graphs; shard 0 also the split combines */
    const struct CMUnitTest shard[] = {
        cmocka_unit_test(test_random_graphs),
        cmocka_unit_test(test_split_combines),
    };
    const char *sh = getenv("ASTITCH_GPU_SHARD");
    if (sh)
        return _cmocka_run_group_tests("shard", shard, strncmp(sh, "0/", 2) == 0 ? 2 : 1, NULL,
                                       NULL);
    return cmocka_run_group_tests(all, NULL, NULL);
}
