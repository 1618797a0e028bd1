/* test_gpu_diff.c: the generated kernels on a real GPU against the reference interpreter: every
 * example and many random graphs under fusion none, xla and stitch (one reference run per graph);
 * the parts fallback forced on every example; two executables running at once on two streams; runs
 * captured into CUDA graphs and replayed on fresh inputs, the refused capture of a compute op on
 * the host, and a captured dot on cuBLASLt. The random graphs' dots run on cuBLASLt, their custom
 * ops through a device form (even seeds) or on the host (odd seeds, host_compute).
 * Exits 77 (skip) without a driver; stops at the first kernel fault (the context is lost then).
 * ASTITCH_GPU_GRAPHS sets the number of random graphs (default 1000, fixed seeds and one fresh
 * seed, printed); ASTITCH_GPU_SHARD=K/N runs only the random graphs i with i % N == K (N processes
 * share the GPU and the machine's cores). */
#include <dirent.h>
#include <dlfcn.h>
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

/* Compiles g for the GPU under fusion (as_parts: cut at its global barriers) and checks it
 * against d. Returns 1 on a failure (printed), else 0. */
/* Compiles g for the GPU under fusion; as_parts: every kernel with grid barriers cut at them. */
static astitch_status compile_gpu(astitch_graph *g, astitch_fusion fusion, bool as_parts,
                                  astitch_executable **x)
{
    astitch_context *ctx = astitch_graph_context(g);
    astitch_status s = astitch_context_set_option(ctx, "force_parts", as_parts ? "1" : NULL);
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    o.plan.fusion = fusion;
    if (s == ASTITCH_OK)
        s = astitch_compile(g, &o, x);
    astitch_context_set_option(ctx, "force_parts", NULL);
    return s;
}

static int check_one(astitch_graph *g, const DiffRef *d, astitch_fusion fusion, bool as_parts,
                     const char *what, uint64_t seed)
{
    astitch_executable *x = NULL;
    DiffResult r = {.ok = false};
    astitch_status s = compile_gpu(g, fusion, as_parts, &x);
    if (s == ASTITCH_OK)
        s = diff_ref_check(d, x, &r);
    if (s != ASTITCH_OK)
        snprintf(r.message, sizeof r.message, "%s", astitch_last_error(astitch_graph_context(g)));
    astitch_executable_destroy(x);
    if (s == ASTITCH_OK && r.ok)
        return 0;
    printf("FAIL %s fusion=%s%s seed=%llu: %s\n", what, astitch_fusion_name(fusion),
           as_parts ? " (as parts)" : "", (unsigned long long)seed, r.message);
    if (strstr(r.message, "context is now unusable"))
        context_lost = true;
    return 1;
}

/* Every fusion mode (and, with as_parts, stitch cut at its global barriers) against one
 * reference run. Returns the number of failing runs. */
static int check_graph(astitch_graph *g, const char *what, uint64_t seed, bool as_parts, int *runs)
{
    DiffRef *d;
    if (diff_ref_create(g, seed, true, &d) != ASTITCH_OK) {
        printf("FAIL %s: reference: %s\n", what, astitch_last_error(astitch_graph_context(g)));
        return 1;
    }
    int failures = 0;
    for (size_t f = 0; f < sizeof fusions / sizeof fusions[0] && !context_lost; f++, (*runs)++)
        failures += check_one(g, d, fusions[f], false, what, seed);
    if (as_parts && !context_lost) {
        failures += check_one(g, d, ASTITCH_FUSION_STITCH, true, what, seed);
        (*runs)++;
    }
    diff_ref_destroy(d);
    return failures;
}

/* Every example under every fusion mode and with the parts fallback forced. */
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
    printf("examples on the GPU (none, xla, stitch, stitch cut at global barriers): "
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

/* The device form of gen_custom: the same copy, queued with the driver's cuMemcpyDtoDAsync. */
static CUresult (*copy_async)(CUdeviceptr, CUdeviceptr, size_t, CUstream);

static astitch_status gen_custom_device(void *user, void *stream, int n,
                                        const astitch_tensor_view *in, astitch_tensor_view *out)
{
    (void)user;
    (void)n;
    int64_t count = 1;
    for (int i = 0; i < out->rank; i++)
        count *= out->dims[i];
    size_t bytes = (size_t)count * astitch_dtype_size(out->dtype);
    return copy_async((CUdeviceptr)(uintptr_t)out->data, (CUdeviceptr)(uintptr_t)in[0].data, bytes,
                      (CUstream)stream) == CUDA_SUCCESS
               ? ASTITCH_OK
               : ASTITCH_ERR_DEVICE;
}

/* Custom ops of random graph `seed` on ctx: on the GPU through their device form (even seeds,
 * where the driver is found), else on the host (host_compute). */
static void register_customs(astitch_context *ctx, uint64_t seed)
{
    if (!copy_async && seed % 2 == 0) {
        void *lib = dlopen(getenv("ASTITCH_LIBCUDA") ? getenv("ASTITCH_LIBCUDA") : "libcuda.so.1",
                           RTLD_NOW | RTLD_LOCAL);
        void *p = lib ? dlsym(lib, "cuMemcpyDtoDAsync_v2") : NULL;
        memcpy(&copy_async, &p, sizeof p);
    }
    astitch_register_custom(ctx, "gen_custom", gen_custom, NULL);
    if (copy_async && seed % 2 == 0)
        astitch_register_custom_device(ctx, "gen_custom", "cuda", gen_custom_device, NULL);
    else
        astitch_context_set_option(ctx, "host_compute", "1");
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
        if (o.percent_custom)
            register_customs(ctx, seed);
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

/* Device tensors that are not ASTITCH_TENSOR_ALIGN-aligned, or NULL, or an output over an
 * input, are refused with a message naming the tensor, before anything is launched; the aligned
 * run still works. */
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
    out = din + 16; /* the softmax written over its own input */
    assert_int_equal(astitch_execute_device(x, &in, &out, NULL), ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(ctx), "overlaps input 0 ('x')"));
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

/* Device buffers for a graph's parameters then outputs (each rounded up to 4 bytes, so
 * outputs can be poisoned by words), and host buffers for the outputs. */
typedef struct Io {
    int nin, nout;
    uint64_t *ptr;
    size_t *bytes;
    void **host;
    const astitch_executable *views; /* view outputs (view_outputs) are checked as views of
                                      * their inputs; NULL: every output is written */
} Io;

static void io_alloc(astitch_context *ctx, CudaDevice *dev, const astitch_graph *g, Io *io)
{
    io->views = NULL;
    io->nin = astitch_graph_num_parameters(g);
    io->nout = astitch_graph_num_outputs(g);
    int n = io->nin + io->nout;
    io->ptr = calloc((size_t)n + 1, sizeof *io->ptr);
    io->bytes = calloc((size_t)n + 1, sizeof *io->bytes);
    io->host = calloc((size_t)io->nout + 1, sizeof *io->host);
    assert_true(io->ptr && io->bytes && io->host);
    for (int i = 0; i < n; i++) {
        astitch_tensor_info t;
        astitch_node node = i < io->nin ? astitch_graph_parameter(g, i)
                                        : astitch_graph_output(g, i - io->nin);
        assert_int_equal(astitch_node_info(g, node, &t), ASTITCH_OK);
        CUdeviceptr p = 0;
        assert_int_equal(cuda_alloc(ctx, dev, (t.bytes + 3) & ~(size_t)3, &p), ASTITCH_OK);
        io->ptr[i] = p;
        io->bytes[i] = t.bytes;
        if (i >= io->nin)
            assert_non_null(io->host[i - io->nin] = malloc(t.bytes + 1));
    }
}

static void io_free(CudaDevice *dev, Io *io)
{
    for (int i = 0; i < io->nin + io->nout; i++)
        cuda_free(dev, io->ptr[i]);
    for (int i = 0; i < io->nout; i++)
        free(io->host[i]);
    free(io->ptr);
    free(io->bytes);
    free(io->host);
}

/* Queues on st: d's inputs into io's device buffers, all-ones bits into its outputs. */
static void io_upload(astitch_context *ctx, CudaDevice *dev, const Io *io, const DiffRef *d,
                      CUstream st)
{
    for (int i = 0; i < io->nin; i++)
        assert_int_equal(cuda_copy_to_device(ctx, dev, io->ptr[i], diff_ref_inputs(d)[i],
                                             io->bytes[i], st), ASTITCH_OK);
    for (int i = io->nin; i < io->nin + io->nout; i++)
        if (io->ptr[i])
            assert_int_equal(cuda_memset_u32(ctx, dev, io->ptr[i], 0xffffffffu,
                                             (io->bytes[i] + 3) / 4, st), ASTITCH_OK);
}

/* Reads io's outputs back once st's work is done and compares them with d's reference;
 * prints the result under `what`. */
static bool io_check(astitch_context *ctx, CudaDevice *dev, const Io *io, const DiffRef *d,
                     CUstream st, const char *what)
{
    astitch_status s = ASTITCH_OK;
    for (int i = 0; s == ASTITCH_OK && i < io->nout; i++) {
        bool is_view = false;
        astitch_output_view v;
        if (io->views)
            assert_int_equal(astitch_executable_output_view(io->views, i, &is_view, &v),
                             ASTITCH_OK);
        if (!is_view) {
            s = cuda_copy_to_host(ctx, dev, io->host[i], io->ptr[io->nin + i],
                                  io->bytes[io->nin + i], st);
            continue;
        }
        void *in = malloc(io->bytes[v.input] + 1);
        assert_non_null(in);
        s = cuda_copy_to_host(ctx, dev, in, io->ptr[v.input], io->bytes[v.input], st);
        if (s == ASTITCH_OK && (s = cuda_stream_sync(ctx, dev, st)) == ASTITCH_OK)
            s = astitch_executable_view_copy(io->views, i, in, io->host[i]);
        free(in);
    }
    if (s == ASTITCH_OK)
        s = cuda_stream_sync(ctx, dev, st);
    DiffResult r = {.ok = false};
    if (s != ASTITCH_OK)
        snprintf(r.message, sizeof r.message, "%s", astitch_last_error(ctx));
    else
        diff_ref_compare(d, (const void *const *)io->host, &r);
    printf("  %s: %s, worst error %.3g\n", what, r.ok ? "ok" : r.message, r.worst);
    if (strstr(r.message, "context is now unusable"))
        context_lost = true;
    return r.ok;
}

/* Captures one astitch_execute_device of x into a CUDA graph on st (global mode). Returns the
 * instantiated graph, or NULL after printing why. */
static CUgraphExec capture_run(astitch_context *ctx, CudaDevice *dev, astitch_executable *x,
                               const Io *io, CUstream st, const char *what)
{
    const CudaDriver *drv = &dev->drv;
    CUgraph graph = NULL;
    CUgraphExec exec = NULL;
    CUresult r = drv->StreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL);
    astitch_status s = r == CUDA_SUCCESS ? astitch_execute_device(x, io->ptr, io->ptr + io->nin, st)
                                         : ASTITCH_OK;
    if (r == CUDA_SUCCESS)
        r = drv->StreamEndCapture(st, &graph);
    if (r == CUDA_SUCCESS && s == ASTITCH_OK)
        r = drv->GraphInstantiate(&exec, graph, 0);
    if (graph)
        drv->GraphDestroy(graph);
    char err[256];
    cuda_error_text(drv, r, err, sizeof err);
    if (s != ASTITCH_OK || r != CUDA_SUCCESS)
        printf("FAIL %s: capture: %s\n", what, s != ASTITCH_OK ? astitch_last_error(ctx) : err);
    return s == ASTITCH_OK && r == CUDA_SUCCESS ? exec : NULL;
}

/* Compiles g under stitch (as_parts: cut at its grid barriers), captures one run into a CUDA
 * graph, and replays it `replays` times, each on fresh random inputs written into the buffers
 * the capture saw, against the reference. Adds to *coop the kernels planned with grid barriers
 * that launch whole, and to *split the plans with a reduction split across blocks. Returns
 * the number of failures (printed). */
static int capture_and_replay(astitch_context *ctx, CudaDevice *dev, astitch_graph *g,
                              const char *what, bool as_parts, int replays, int *coop, int *splits)
{
    astitch_executable *x = NULL;
    if (compile_gpu(g, ASTITCH_FUSION_STITCH, as_parts, &x) != ASTITCH_OK) {
        printf("FAIL %s: compile: %s\n", what, astitch_last_error(ctx));
        return 1;
    }
    const astitch_plan *p = astitch_executable_plan(x);
    for (int k = 0; k < astitch_plan_num_kernels(p); k++) {
        astitch_kernel_info ki;
        assert_int_equal(astitch_plan_kernel_info(p, k, &ki), ASTITCH_OK);
        *coop += !as_parts && ki.grid > 0 && ki.global_barriers > 0;
    }
    *splits += diff_max_split(x) > 1;
    CUstream st;
    Io io;
    assert_int_equal(cuda_stream_create(ctx, dev, &st), ASTITCH_OK);
    io_alloc(ctx, dev, g, &io);
    CUgraphExec exec = capture_run(ctx, dev, x, &io, st, what);
    int failures = !exec;
    for (int i = 0; exec && i < replays && !context_lost; i++) {
        DiffRef *d;
        uint64_t seed = diff_fresh_seed();
        assert_int_equal(diff_ref_create(g, seed, true, &d), ASTITCH_OK);
        io_upload(ctx, dev, &io, d, st);
        char replay[160];
        snprintf(replay, sizeof replay, "%s, replay %d (seed %llu)", what, i + 1,
                 (unsigned long long)seed);
        CUresult r = dev->drv.GraphLaunch(exec, st);
        if (r != CUDA_SUCCESS) {
            cuda_fail(ctx, &dev->drv, r, "cuGraphLaunch");
            printf("FAIL %s: %s\n", replay, astitch_last_error(ctx));
            context_lost |= cuda_error_is_sticky(r);
        }
        failures += r != CUDA_SUCCESS || !io_check(ctx, dev, &io, d, st, replay);
        diff_ref_destroy(d);
    }
    if (exec)
        dev->drv.GraphExecDestroy(exec);
    io_free(dev, &io);
    cuda_stream_destroy(dev, st);
    astitch_executable_destroy(x);
    return failures;
}

static astitch_graph *load_example(astitch_context *ctx, const char *name)
{
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/examples/%s", root ? root : ".", name);
    astitch_graph *g;
    if (astitch_graph_load_json(ctx, path, &g) != ASTITCH_OK)
        fail_msg("%s: %s", path, astitch_last_error(ctx));
    return g;
}

/* The lean form (docs/codegen.md, *Targets*) on the GPU: with the switch force_lean every
 * kernel whose grid must be resident loads in it, reports it, and matches the reference (four
 * on the H100: the two batch norms of resnet50 at their own shapes and batchnorm_train, which
 * carry values across their barrier, and fig7's split combine; batchnorm_train_small takes a
 * block per tile and stays as it is, and so do the resnet50 ones' small copies, whose one
 * block reads its statistics in its own block). */
static void test_lean_form(void **state)
{
    (void)state;
    static const char *const files[] = {
        "examples/batchnorm_train.json", "examples/fig7_subgraph.json",
        "bench/graphs/small/batchnorm_train_small.json",
        "bench/graphs/resnet50_train_fwd_bn_relu.json",
        "bench/graphs/resnet50_train_bwd_relu_bn.json"};
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    int lean = 0, failures = 0;
    for (size_t f = 0; f < sizeof files / sizeof *files && !context_lost; f++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", root ? root : ".", files[f]);
        astitch_context *ctx;
        astitch_graph *g;
        assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
        if (astitch_graph_load_json(ctx, path, &g) != ASTITCH_OK)
            fail_msg("%s: %s", path, astitch_last_error(ctx));
        DiffRef *d;
        if (diff_ref_create(g, 5, true, &d) != ASTITCH_OK)
            fail_msg("%s: reference: %s", path, astitch_last_error(ctx));
        assert_int_equal(astitch_context_set_option(ctx, "force_lean", "1"), ASTITCH_OK);
        astitch_compile_options o;
        astitch_compile_options_default(&o);
        o.target = ASTITCH_TARGET_CUDA;
        astitch_executable *x;
        if (astitch_compile(g, &o, &x) != ASTITCH_OK)
            fail_msg("%s: compile: %s", path, astitch_last_error(ctx));
        const astitch_plan *p = astitch_executable_plan(x);
        for (int k = 0; k < astitch_plan_num_kernels(p); k++) {
            astitch_kernel_info info;
            astitch_loaded_kernel lk;
            assert_int_equal(astitch_plan_kernel_info(p, k, &info), ASTITCH_OK);
            assert_int_equal(astitch_executable_loaded_kernel(x, k, &lk), ASTITCH_OK);
            bool resident = info.persistent || info.global_barriers > 0;
            assert_true(lk.lean == resident);
            lean += lk.lean;
        }
        DiffResult r = {.ok = false};
        if (diff_ref_check(d, x, &r) != ASTITCH_OK || !r.ok) {
            printf("FAIL %s (lean): %s\n", files[f], r.ok ? astitch_last_error(ctx) : r.message);
            failures++;
        }
        astitch_executable_destroy(x);
        diff_ref_destroy(d);
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
    }
    printf("lean form: %zu graphs, %d kernels lean, %d failures\n",
           sizeof files / sizeof *files, lean, failures);
    assert_false(context_lost);
    assert_true(lean >= 4);
    assert_int_equal(failures, 0);
}

/* Graphs compiled with caller_workspace run through astitch_execute_device_workspace on a
 * workspace the test allocates and fills with all-ones bits first (whatever a run needs
 * initialized it must initialize itself), first plainly, then captured into a CUDA graph and
 * replayed; the plain entry points refuse such an executable. Split reductions (batchnorm,
 * fig7 also cut at its barrier), several kernels with temporaries between them (fig7). */
static void test_caller_workspace(void **state)
{
    (void)state;
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    CudaDevice *dev;
    assert_int_equal(cuda_device_open(ctx, 0, &dev), ASTITCH_OK);
    assert_int_equal(cuda_enter(ctx, dev), ASTITCH_OK);
    static const struct {
        const char *file;
        bool as_parts;
    } cases[] = {{"batchnorm_train.json", false}, {"fig7_subgraph.json", false},
                 {"fig7_subgraph.json", true}, {"layernorm.json", false}};
    int failures = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases && !context_lost; c++) {
        astitch_graph *g = load_example(ctx, cases[c].file);
        astitch_compile_options o;
        astitch_compile_options_default(&o);
        o.target = ASTITCH_TARGET_CUDA;
        o.caller_workspace = true;
        assert_int_equal(astitch_context_set_option(ctx, "force_parts",
                                                    cases[c].as_parts ? "1" : NULL), ASTITCH_OK);
        astitch_executable *x;
        astitch_status s = astitch_compile(g, &o, &x);
        astitch_context_set_option(ctx, "force_parts", NULL);
        if (s != ASTITCH_OK)
            fail_msg("%s: compile: %s", cases[c].file, astitch_last_error(ctx));
        size_t bytes = 0;
        assert_int_equal(astitch_executable_workspace_bytes(x, &bytes), ASTITCH_OK);
        assert_true(bytes >= 256);
        CUstream st;
        Io io;
        assert_int_equal(cuda_stream_create(ctx, dev, &st), ASTITCH_OK);
        io_alloc(ctx, dev, g, &io);
        assert_int_equal(astitch_execute_device(x, io.ptr, io.ptr + io.nin, st),
                         ASTITCH_ERR_ARGUMENT);
        assert_non_null(strstr(astitch_last_error(ctx), "astitch_execute_device_workspace"));
        CUdeviceptr ws;
        assert_int_equal(cuda_alloc(ctx, dev, bytes, &ws), ASTITCH_OK);
        assert_int_equal(astitch_execute_device_workspace(x, io.ptr, io.ptr + io.nin, st, ws,
                                                          bytes - 1), ASTITCH_ERR_ARGUMENT);
        assert_non_null(strstr(astitch_last_error(ctx), "the run needs"));
        CUgraphExec exec = NULL;
        for (int run = 0; run < 3 && !context_lost; run++) {
            DiffRef *d;
            uint64_t seed = diff_fresh_seed();
            assert_int_equal(diff_ref_create(g, seed, true, &d), ASTITCH_OK);
            io_upload(ctx, dev, &io, d, st);
            assert_int_equal(cuda_memset_u32(ctx, dev, ws, 0xffffffffu, bytes / 4, st),
                             ASTITCH_OK);
            char what[160];
            snprintf(what, sizeof what, "%s%s, caller workspace, %s (seed %llu)",
                     cases[c].file, cases[c].as_parts ? " as parts" : "",
                     run == 0 ? "plain run" : "graph replay", (unsigned long long)seed);
            if (run == 0) {
                s = astitch_execute_device_workspace(x, io.ptr, io.ptr + io.nin, st, ws, bytes);
            } else {
                const CudaDriver *drv = &dev->drv;
                if (!exec) {
                    CUgraph graph = NULL;
                    assert_int_equal(drv->StreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL),
                                     CUDA_SUCCESS);
                    s = astitch_execute_device_workspace(x, io.ptr, io.ptr + io.nin, st, ws,
                                                         bytes);
                    assert_int_equal(drv->StreamEndCapture(st, &graph), CUDA_SUCCESS);
                    assert_int_equal(drv->GraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
                    drv->GraphDestroy(graph);
                    assert_int_equal(cuda_memset_u32(ctx, dev, ws, 0xffffffffu, bytes / 4, st),
                                     ASTITCH_OK);
                }
                if (s == ASTITCH_OK)
                    assert_int_equal(drv->GraphLaunch(exec, st), CUDA_SUCCESS);
            }
            if (s != ASTITCH_OK)
                printf("FAIL %s: %s\n", what, astitch_last_error(ctx));
            failures += s != ASTITCH_OK || !io_check(ctx, dev, &io, d, st, what);
            diff_ref_destroy(d);
        }
        if (exec)
            dev->drv.GraphExecDestroy(exec);
        cuda_free(dev, ws);
        io_free(dev, &io);
        cuda_stream_destroy(dev, st);
        astitch_executable_destroy(x);
        astitch_graph_destroy(g);
    }
    cuda_leave(dev);
    cuda_device_close(dev);
    astitch_context_destroy(ctx);
    assert_int_equal(failures, 0);
}

/* GPT-2's attention region with view_outputs: v split into heads and transposed is left as a
 * view of qkv, and its output pointer is 0; a plain run, then a run captured into a CUDA graph
 * and replayed twice, each on fresh inputs, give the reference's values, the view read from
 * the input on the device. */
static void test_view_outputs(void **state)
{
    (void)state;
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    CudaDevice *dev;
    assert_int_equal(cuda_device_open(ctx, 0, &dev), ASTITCH_OK);
    assert_int_equal(cuda_enter(ctx, dev), ASTITCH_OK);
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/bench/graphs/small/gpt2_train_fwd_attn_small.json",
             root ? root : ".");
    astitch_graph *g;
    if (astitch_graph_load_json(ctx, path, &g) != ASTITCH_OK)
        fail_msg("%s: %s", path, astitch_last_error(ctx));
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    o.view_outputs = true;
    astitch_executable *x;
    if (astitch_compile(g, &o, &x) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(ctx));
    CUstream st;
    Io io;
    assert_int_equal(cuda_stream_create(ctx, dev, &st), ASTITCH_OK);
    io_alloc(ctx, dev, g, &io);
    io.views = x;
    int views = 0;
    for (int i = 0; i < io.nout; i++) {
        bool is_view;
        astitch_output_view v;
        assert_int_equal(astitch_executable_output_view(x, i, &is_view, &v), ASTITCH_OK);
        if (is_view) {
            views++;
            cuda_free(dev, io.ptr[io.nin + i]);
            io.ptr[io.nin + i] = 0;
        }
    }
    assert_int_equal(views, 1);
    int failures = 0;
    CUgraphExec exec = NULL;
    for (int run = 0; run < 3 && !context_lost; run++) {
        DiffRef *d;
        uint64_t seed = diff_fresh_seed();
        assert_int_equal(diff_ref_create(g, seed, true, &d), ASTITCH_OK);
        io_upload(ctx, dev, &io, d, st);
        char what[160];
        snprintf(what, sizeof what, "gpt2_train_fwd_attn_small, view outputs, %s (seed %llu)",
                 run == 0 ? "plain run" : "graph replay", (unsigned long long)seed);
        astitch_status s = ASTITCH_OK;
        CUresult r = CUDA_SUCCESS;
        if (run == 0)
            s = astitch_execute_device(x, io.ptr, io.ptr + io.nin, st);
        else if (exec || (exec = capture_run(ctx, dev, x, &io, st, what)))
            r = dev->drv.GraphLaunch(exec, st);
        if (s != ASTITCH_OK)
            printf("FAIL %s: %s\n", what, astitch_last_error(ctx));
        failures += s != ASTITCH_OK || r != CUDA_SUCCESS || (run > 0 && !exec) ||
                    !io_check(ctx, dev, &io, d, st, what);
        diff_ref_destroy(d);
    }
    if (exec)
        dev->drv.GraphExecDestroy(exec);
    io_free(dev, &io);
    cuda_stream_destroy(dev, st);
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
    cuda_leave(dev);
    cuda_device_close(dev);
    astitch_context_destroy(ctx);
    assert_false(context_lost);
    assert_int_equal(failures, 0);
}

/* One run of each graph captured into a CUDA graph and replayed three times on fresh inputs:
 * softmax, layernorm, a grid barrier with a split column reduce (fig7, also cut at its barrier:
 * the parts fallback), batchnorm's four grid barriers, split row reductions of every combine. */
static void test_graph_replay(void **state)
{
    (void)state;
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    CudaDevice *dev;
    assert_int_equal(cuda_device_open(ctx, 0, &dev), ASTITCH_OK);
    assert_int_equal(cuda_enter(ctx, dev), ASTITCH_OK);
    struct {
        const char *what;
        astitch_graph *g;
        bool as_parts;
    } cases[] = {
        {"softmax [512, 1000]", softmax_graph(ctx, 512, 1000), false},
        {"layernorm.json", load_example(ctx, "layernorm.json"), false},
        {"fig7_subgraph.json", load_example(ctx, "fig7_subgraph.json"), false},
        {"fig7_subgraph.json as parts", load_example(ctx, "fig7_subgraph.json"), true},
        {"batchnorm_train.json", load_example(ctx, "batchnorm_train.json"), false},
        {"transformer_row_reduce.json", load_example(ctx, "transformer_row_reduce.json"), false},
        {"split kinds [3, 40000]", gen_split_kinds(ctx, 3, 40000), false},
    };
    int failures = 0, coop = 0, splits = 0, n = (int)(sizeof cases / sizeof *cases);
    for (int i = 0; i < n && !context_lost; i++) {
        assert_non_null(cases[i].g);
        failures += capture_and_replay(ctx, dev, cases[i].g, cases[i].what, cases[i].as_parts, 3,
                                       &coop, &splits);
    }
    printf("graph replays: %d graphs, %d kernels with grid barriers, %d split reductions, %d "
           "failures\n", n, coop, splits, failures);
    for (int i = 0; i < n; i++)
        astitch_graph_destroy(cases[i].g);
    cuda_leave(dev);
    cuda_device_close(dev);
    astitch_context_destroy(ctx);
    assert_false(context_lost);
    assert_int_equal(failures, 0);
    assert_true(coop > 0 && splits > 0);
}

/* A run with a compute op on the host (host_compute) is refused inside a capture, naming the
 * op, before anything is queued: the capture stays valid and ends; the stream then runs the
 * graph as usual. Without host_compute the dot runs on cuBLASLt: the run is captured, and the
 * replayed graph gives the reference's values. */
static void test_graph_capture_compute_op(void **state)
{
    (void)state;
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    CudaDevice *dev;
    assert_int_equal(cuda_device_open(ctx, 0, &dev), ASTITCH_OK);
    assert_int_equal(cuda_enter(ctx, dev), ASTITCH_OK);
    astitch_graph *g = gen_dot_between(ctx, 64, 96, 32);
    assert_non_null(g);
    astitch_executable *x;
    assert_int_equal(astitch_context_set_option(ctx, "host_compute", "1"), ASTITCH_OK);
    assert_int_equal(compile_gpu(g, ASTITCH_FUSION_STITCH, false, &x), ASTITCH_OK);
    assert_int_equal(astitch_context_set_option(ctx, "host_compute", NULL), ASTITCH_OK);
    CUstream st;
    Io io;
    DiffRef *d;
    assert_int_equal(cuda_stream_create(ctx, dev, &st), ASTITCH_OK);
    io_alloc(ctx, dev, g, &io);
    assert_int_equal(diff_ref_create(g, diff_fresh_seed(), true, &d), ASTITCH_OK);
    io_upload(ctx, dev, &io, d, st);

    CUgraph graph = NULL;
    assert_int_equal(dev->drv.StreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    astitch_status s = astitch_execute_device(x, io.ptr, io.ptr + io.nin, st);
    CUresult r = dev->drv.StreamEndCapture(st, &graph);
    printf("expected error: %s\n", astitch_last_error(ctx));
    assert_int_equal(s, ASTITCH_ERR_UNSUPPORTED);
    assert_non_null(strstr(astitch_last_error(ctx), "'between' (dot) is a compute op"));
    assert_int_equal(r, CUDA_SUCCESS);
    assert_non_null(graph);
    dev->drv.GraphDestroy(graph);

    if (astitch_execute_device(x, io.ptr, io.ptr + io.nin, st) != ASTITCH_OK)
        fail_msg("run after the refused capture: %s", astitch_last_error(ctx));
    assert_true(io_check(ctx, dev, &io, d, st, "dot between kernels, after the refused capture"));
    astitch_executable_destroy(x);

    assert_int_equal(compile_gpu(g, ASTITCH_FUSION_STITCH, false, &x), ASTITCH_OK);
    assert_int_equal(astitch_executable_host_compute_ops(x), 0);
    assert_int_equal(dev->drv.StreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    s = astitch_execute_device(x, io.ptr, io.ptr + io.nin, st);
    r = dev->drv.StreamEndCapture(st, &graph);
    if (s != ASTITCH_OK)
        fail_msg("captured run with the dot on cuBLASLt: %s", astitch_last_error(ctx));
    assert_int_equal(r, CUDA_SUCCESS);
    CUgraphExec exec = NULL;
    assert_int_equal(dev->drv.GraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
    assert_int_equal(dev->drv.GraphLaunch(exec, st), CUDA_SUCCESS);
    assert_true(io_check(ctx, dev, &io, d, st, "dot on cuBLASLt, replayed from a CUDA graph"));
    dev->drv.GraphExecDestroy(exec);
    dev->drv.GraphDestroy(graph);
    diff_ref_destroy(d);
    io_free(dev, &io);
    cuda_stream_destroy(dev, st);
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
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
    setvbuf(stdout, NULL, _IOLBF, 0);
    const struct CMUnitTest all[] = {
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_two_streams),
        cmocka_unit_test(test_misaligned_pointers),
        cmocka_unit_test(test_split_combines),
        cmocka_unit_test(test_graph_replay),
        cmocka_unit_test(test_caller_workspace),
        cmocka_unit_test(test_graph_capture_compute_op),
        cmocka_unit_test(test_view_outputs),
        cmocka_unit_test(test_lean_form),
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
