/*
 * astitch_execute_device under CUDA stream capture, on the fake driver's "device" mode
 * (tests/fake_cuda.c, path in ASTITCH_FAKE_CUDA; no GPU): compiling for the fake H100 takes the
 * whole CUDA path but the kernels, and the fake logs every driver call made while a capture is
 * open and refuses, as the real driver does in global mode, calls that allocate or synchronize.
 * A captured run must queue exactly the plan's launches, counter resets and identity fills on
 * the capturing stream and nothing else: examples with grid barriers, split reductions and the
 * parts fallback. Dots run on a fake cuBLASLt (tests/fake_cublaslt.c, ASTITCH_FAKE_CUBLASLT):
 * a captured run queues one cublasLtMatmul per dot on the capturing stream, with the sizes,
 * transposes, leading dimensions and batch strides of the row-major product, and nothing on
 * the host. A run with a compute op on the host (host_compute) must refuse the capture naming
 * the op, queue nothing, and leave the stream usable. Exits 77 (SKIP) where the fakes were not
 * built.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_cublaslt.h"
#include "gen_graph.h"
#include "runtime/compile_cache.h"
#include "runtime/cublaslt.h"
#include "runtime/cuda_driver.h"
#include "runtime/runtime.h"

typedef struct Fake {
    astitch_context *ctx;
    CudaDevice *dev; /* its driver table begins and ends the captures */
    CUstream stream;
    const char *(*log)(void);
    void (*log_reset)(void);
    int (*loads)(void);          /* modules the fake has loaded */
    int (*function_regs)(void);  /* .maxnreg of the function it handed out last */
    void (*set_elapsed)(const float *ms, int n); /* what cuEventElapsedTime gives next */
    int (*matmuls)(FakeMatmul *out, int max);    /* cublasLtMatmul calls since the reset */
    void (*matmuls_reset)(void);
    int (*lt_handles)(void);                     /* cuBLASLt handles alive */
} Fake;

/* What a captured run queued on the capturing stream, from the fake's log. */
typedef struct Queued {
    int launches, cooperative, memsets, copies;
    int fills;              /* launches of the fill kernel (several fills at once) */
    int unmerged;           /* expected: fills before adjacent ones merge (exec_kernel_fills) */
    int other;              /* any other call but context push/pop and capture queries */
    bool reset_before_coop; /* every cooperative launch directly follows a fill */
} Queued;

static void expect_ok(const Fake *f, astitch_status st)
{
    if (st != ASTITCH_OK)
        print_error("%s: %s\n", astitch_status_name(st), astitch_last_error(f->ctx));
    assert_int_equal(st, ASTITCH_OK);
}

static void count_log(const char *log, Queued *q)
{
    memset(q, 0, sizeof *q);
    q->reset_before_coop = true;
    bool after_fill = false;
    for (const char *p = log; *p;) {
        char line[128];
        size_t len = strcspn(p, "\n");
        snprintf(line, sizeof line, "%.*s", (int)len, p);
        p += len + (p[len] == '\n');
        if (!strcmp(line, "cuCtxPushCurrent") || !strcmp(line, "cuCtxPopCurrent") ||
            !strcmp(line, "cuStreamIsCapturing"))
            continue;
        bool memset32 = !strcmp(line, "cuMemsetD32Async@capture");
        bool coop = !strcmp(line, "cuLaunchKernelEx(cooperative)@capture");
        bool plain = !strcmp(line, "cuLaunchKernelEx@capture");
        bool fill = !strcmp(line, "cuLaunchKernelEx(fill)@capture");
        bool copy = !strcmp(line, "cuMemcpyDtoDAsync@capture");
        q->reset_before_coop &= !coop || after_fill;
        q->memsets += memset32;
        q->fills += fill;
        q->cooperative += coop;
        q->launches += coop || plain;
        q->copies += copy;
        if (!memset32 && !coop && !plain && !fill && !copy) {
            print_error("during the capture: %s\n", line);
            q->other++;
        }
        after_fill = memset32 || fill;
    }
}

/* What a run of x must queue: one launch per kernel, or per part when it runs as parts (`as_parts`:
 * ASTITCH_FORCE_PARTS was set at compile time); before each kernel with split-reduction
 * destinations or grid barriers, one fill (a memset, or a launch of the fill kernel, counted
 * together in `memsets`; the examples have at most eight fills per kernel); a copy per
 * parameter output. */
static void expect_from_plan(const astitch_executable *x, bool as_parts, Queued *want)
{
    const astitch_plan *p = astitch_executable_plan(x);
    const astitch_graph *g = astitch_plan_graph(p);
    memset(want, 0, sizeof *want);
    for (int k = 0; k < p->nkernel; k++) {
        const PlanKernel *pk = &p->kernel[k];
        if (pk->grid < 1)
            continue;
        bool parts = as_parts && pk->global_barriers > 0;
        want->launches += parts ? compile_kernel_num_parts(p, k) : 1;
        want->cooperative += !parts && pk->global_barriers > 0;
        SplitInit init[64];
        int n = exec_split_inits(p, k, init, 64) + (pk->global_barriers > 0);
        want->memsets += n > 0;
        want->unmerged += n;
    }
    for (int i = 0; i < astitch_graph_num_outputs(g); i++)
        want->copies += astitch_node_op(g, astitch_graph_output(g, i)) == ASTITCH_OP_PARAMETER;
}

/* Runs x on made-up device addresses inside a global-mode capture of f->stream, with the
 * workspace at ws (of ws_bytes; 0: x's own, astitch_execute_device). Returns the run's status;
 * *end: cuStreamEndCapture's result; *got: what the fake logged in between. */
static astitch_status capture_ws(const Fake *f, astitch_executable *x, uint64_t ws,
                                 size_t ws_bytes, CUresult *end, Queued *got)
{
    const astitch_graph *g = astitch_plan_graph(astitch_executable_plan(x));
    int nin = astitch_graph_num_parameters(g), nout = astitch_graph_num_outputs(g);
    uint64_t *in = calloc((size_t)nin + 1, sizeof *in), *out = calloc((size_t)nout + 1, sizeof *out);
    assert_non_null(in);
    assert_non_null(out);
    for (int i = 0; i < nin; i++)
        in[i] = 0x200000000000ull + ((uint64_t)i << 32);
    for (int i = 0; i < nout; i++)
        out[i] = 0x300000000000ull + ((uint64_t)i << 32);
    const CudaDriver *d = &f->dev->drv;
    f->log_reset();
    assert_int_equal(d->StreamBeginCapture(f->stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    astitch_status s = ws ? astitch_execute_device_workspace(x, in, out, f->stream, ws, ws_bytes)
                          : astitch_execute_device(x, in, out, f->stream);
    CUgraph graph = NULL;
    *end = d->StreamEndCapture(f->stream, &graph);
    count_log(f->log(), got);
    if (graph)
        d->GraphDestroy(graph);
    free(in);
    free(out);
    return s;
}

static astitch_status capture(const Fake *f, astitch_executable *x, CUresult *end, Queued *got)
{
    return capture_ws(f, x, 0, 0, end, got);
}

static astitch_executable *compile_for_fake(const Fake *f, astitch_graph *g, bool as_parts)
{
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    astitch_context *ctx = astitch_graph_context(g);
    expect_ok(f, astitch_context_set_option(ctx, "force_parts", as_parts ? "1" : NULL));
    astitch_executable *x = NULL;
    astitch_status s = astitch_compile(g, &o, &x);
    expect_ok(f, astitch_context_set_option(ctx, "force_parts", NULL));
    expect_ok(f, s);
    return x;
}

/* examples/<file>, loaded on f's context. */
static astitch_graph *load_example(const Fake *f, const char *file)
{
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/examples/%s", root ? root : ".", file);
    astitch_graph *g;
    if (astitch_graph_load_json(f->ctx, path, &g) != ASTITCH_OK)
        fail_msg("%s: %s", path, astitch_last_error(f->ctx));
    return g;
}

/* Captures one run of examples/<file> and compares what it queued with its plan; adds what it
 * showed to *seen (cooperative launches, parts, identity fills). */
static void capture_example(const Fake *f, const char *file, bool as_parts, Queued *seen)
{
    astitch_graph *g = load_example(f, file);
    astitch_executable *x = compile_for_fake(f, g, as_parts);
    Queued want, whole, got;
    expect_from_plan(x, as_parts, &want);
    expect_from_plan(x, false, &whole);
    CUresult end;
    expect_ok(f, capture(f, x, &end, &got));
    printf("# %s%s: %d launches (%d cooperative), %d memsets, %d fill launches, %d copies\n",
           file, as_parts ? " as parts" : "", got.launches, got.cooperative, got.memsets,
           got.fills, got.copies);
    assert_int_equal(end, CUDA_SUCCESS);
    assert_int_equal(got.other, 0);
    assert_int_equal(got.launches, want.launches);
    assert_int_equal(got.cooperative, want.cooperative);
    assert_int_equal(got.memsets + got.fills, want.memsets);
    assert_int_equal(got.copies, want.copies);
    assert_true(got.reset_before_coop);
    seen->cooperative += got.cooperative;
    seen->launches += got.launches > whole.launches;
    seen->memsets += got.memsets + got.fills > got.cooperative;
    seen->fills += got.fills;
    seen->unmerged += got.memsets == 1 && got.fills == 0 && want.unmerged > 1; /* merged */
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
}

static void test_capture_examples(void **state)
{
    const Fake *f = *state;
    static const struct {
        const char *file;
        bool as_parts;
    } cases[] = {
        {"softmax.json", false},        {"layernorm.json", false},
        {"fig7_subgraph.json", false},  {"fig7_subgraph.json", true},
        {"batchnorm_train.json", false}, {"batchnorm_train.json", true},
        {"transformer_row_reduce.json", false},
    };
    Queued seen = {0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        capture_example(f, cases[i].file, cases[i].as_parts, &seen);
    /* the cases cover grid barriers, the parts fallback and split-reduction fills, several
     * fills in one launch (fig7: an output and the counters) and fills merged into one memset
     * (batchnorm: the counters and the three sums after them in the scratch) */
    assert_true(seen.cooperative > 0);
    assert_true(seen.launches > 0);
    assert_true(seen.memsets > 0);
    assert_true(seen.fills > 0);
    assert_true(seen.unmerged > 0);
}

/* The fake's detector works: a synchronization during a capture is refused and breaks it. */
static void test_sync_breaks_capture(void **state)
{
    const Fake *f = *state;
    const CudaDriver *d = &f->dev->drv;
    assert_int_equal(d->StreamBeginCapture(f->stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    astitch_status s = cuda_stream_sync(f->ctx, f->dev, f->stream);
    CUgraph graph = NULL;
    assert_int_equal(d->StreamEndCapture(f->stream, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_int_equal(s, ASTITCH_ERR_DEVICE);
    assert_non_null(strstr(astitch_last_error(f->ctx), "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"));
    assert_null(graph);
}

/* A compute op on the host (the dot between two kernels, under host_compute) cannot be
 * captured: the run is refused before anything is queued, the capture stays valid, and the
 * stream then runs x normally. */
static void test_capture_refuses_compute_op(void **state)
{
    const Fake *f = *state;
    astitch_graph *g = gen_dot_between(f->ctx, 64, 96, 32);
    assert_non_null(g);
    expect_ok(f, astitch_context_set_option(f->ctx, "host_compute", "1"));
    astitch_executable *x = compile_for_fake(f, g, false);
    expect_ok(f, astitch_context_set_option(f->ctx, "host_compute", NULL));
    Queued got;
    CUresult end;
    astitch_status s = capture(f, x, &end, &got);
    const char *msg = astitch_last_error(f->ctx);
    printf("# expected error: %s\n", msg);
    assert_int_equal(s, ASTITCH_ERR_UNSUPPORTED);
    assert_non_null(strstr(msg, "'between' (dot) is a compute op"));
    assert_non_null(strstr(msg, "cannot be captured"));
    assert_int_equal(end, CUDA_SUCCESS);
    assert_int_equal(got.launches + got.memsets + got.copies + got.other, 0);

    uint64_t in[2] = {0x200000000000ull, 0x200100000000ull}, out = 0x300000000000ull;
    expect_ok(f, astitch_execute_device(x, in, &out, f->stream));
    expect_ok(f, cuda_stream_sync(f->ctx, f->dev, f->stream));
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
}

/* An executable compiled with caller_workspace runs only through
 * astitch_execute_device_workspace, on a workspace of at least the size it reports, 16-byte
 * aligned; a captured run on it queues exactly what the plan says (split reductions' fills,
 * counter resets, launches). A graph with a compute op is refused at compile time. */
static void test_caller_workspace(void **state)
{
    const Fake *f = *state;
    astitch_graph *g = load_example(f, "batchnorm_train.json");
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    o.caller_workspace = true;
    astitch_executable *x = NULL;
    expect_ok(f, astitch_compile(g, &o, &x));
    size_t bytes = 0;
    expect_ok(f, astitch_executable_workspace_bytes(x, &bytes));
    assert_true(bytes >= 256);
    assert_true(bytes >= (size_t)astitch_plan_scratch_bytes(astitch_executable_plan(x)));

    uint64_t in[3] = {0x200000000000ull, 0x210000000000ull, 0x220000000000ull};
    uint64_t out[3] = {0x300000000000ull, 0x310000000000ull, 0x320000000000ull};
    assert_int_equal(astitch_execute_device(x, in, out, f->stream), ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(f->ctx), "caller_workspace"));
    const void *hin[3] = {in, in, in};
    void *hout[3] = {out, out, out};
    assert_int_equal(astitch_execute(x, hin, hout), ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(f->ctx), "astitch_execute_device_workspace"));
    uint64_t ws = 0x400000000000ull;
    assert_int_equal(astitch_execute_device_workspace(x, in, out, f->stream, ws, bytes - 1),
                     ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(f->ctx), "the run needs"));
    assert_int_equal(astitch_execute_device_workspace(x, in, out, f->stream, ws + 8, bytes),
                     ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(f->ctx), "not 16-byte aligned"));
    assert_int_equal(astitch_execute_device_workspace(x, in, out, f->stream, 0, bytes),
                     ASTITCH_ERR_ARGUMENT);

    Queued want, got;
    expect_from_plan(x, false, &want);
    CUresult end;
    expect_ok(f, capture_ws(f, x, ws, bytes, &end, &got));
    assert_int_equal(end, CUDA_SUCCESS);
    assert_int_equal(got.other, 0);
    assert_int_equal(got.launches, want.launches);
    assert_int_equal(got.memsets + got.fills, want.memsets);
    assert_true(got.memsets + got.fills > 0);
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);

    /* a dot on cuBLASLt takes cuBLASLt's workspace from the caller's too; on the host it is
     * refused */
    g = gen_dot_between(f->ctx, 64, 96, 32);
    assert_non_null(g);
    expect_ok(f, astitch_compile(g, &o, &x));
    expect_ok(f, astitch_executable_workspace_bytes(x, &bytes));
    f->matmuls_reset();
    expect_ok(f, capture_ws(f, x, ws, bytes, &end, &got));
    assert_int_equal(end, CUDA_SUCCESS);
    assert_int_equal(got.other, 0);
    FakeMatmul mm[2];
    assert_int_equal(f->matmuls(mm, 2), 1);
    printf("# caller workspace of %zu bytes at 0x%llx: cuBLASLt's %zu bytes at 0x%llx\n", bytes,
           (unsigned long long)ws, mm[0].workspace_bytes, (unsigned long long)mm[0].workspace);
    assert_int_equal(mm[0].workspace_bytes, 1u << 20); /* what the fake's heuristic asks */
    assert_int_equal(mm[0].workspace % 256, 0);
    assert_true(mm[0].workspace >= ws);
    assert_true(mm[0].workspace + mm[0].workspace_bytes <= ws + bytes);
    astitch_executable_destroy(x);
    expect_ok(f, astitch_context_set_option(f->ctx, "host_compute", "1"));
    assert_int_equal(astitch_compile(g, &o, &x), ASTITCH_ERR_UNSUPPORTED);
    assert_non_null(strstr(astitch_last_error(f->ctx), "compute op 'between'"));
    expect_ok(f, astitch_context_set_option(f->ctx, "host_compute", NULL));
    astitch_graph_destroy(g);
}

/* The node of the first compute op of x's plan. */
static int32_t first_compute(const astitch_executable *x)
{
    const astitch_plan *p = astitch_executable_plan(x);
    for (int32_t i = 0; i < p->nstep; i++)
        if (p->step[i].kind == ASTITCH_STEP_COMPUTE)
            return p->step[i].index;
    fail_msg("no compute op in the plan");
    return -1;
}

/* Captures one run of x (matmul log reset first), which must succeed, queue the plan's
 * launches and no call the plan does not explain; *got: what it queued. */
static void capture_as_planned(const Fake *f, astitch_executable *x, Queued *got)
{
    Queued want;
    expect_from_plan(x, false, &want);
    f->matmuls_reset();
    CUresult end;
    astitch_status s = capture(f, x, &end, got);
    if (s != ASTITCH_OK)
        print_error("%s\n", astitch_last_error(x->ctx));
    assert_int_equal(s, ASTITCH_OK);
    assert_int_equal(end, CUDA_SUCCESS);
    assert_int_equal(got->other, 0);
    assert_int_equal(got->launches, want.launches);
}

/* Dots on the fake cuBLASLt, captured: one cublasLtMatmul per dot on the capturing stream and
 * no other call but the kernels' (no copy to the host, no synchronization), with the column-
 * major form of the row-major product: m = N, n = M, A = the rhs, B = the lhs (exec_dot.c).
 * The dot between two kernels: x2 [64, 96] . w [96, 32]. */
static void test_capture_dot_on_gpu(void **state)
{
    const Fake *f = *state;
    astitch_graph *g = gen_dot_between(f->ctx, 64, 96, 32);
    assert_non_null(g);
    int handles = f->lt_handles();
    astitch_executable *x = compile_for_fake(f, g, false);
    assert_int_equal(f->lt_handles(), handles + 1);
    assert_true(exec_cuda_compute_on_gpu(x, first_compute(x)));
    assert_int_equal(astitch_executable_host_compute_ops(x), 0);
    Queued got;
    capture_as_planned(f, x, &got);
    assert_int_equal(got.copies, 0);
    assert_true(got.launches >= 2); /* the kernel before the dot and the one after */
    FakeMatmul mm[4];
    assert_int_equal(f->matmuls(mm, 4), 1);
    FakeMatmul m = mm[0];
    printf("# dot: m %llu n %llu k %llu, trans %d %d, ld %lld %lld %lld, batch %d, align %u\n",
           (unsigned long long)m.m, (unsigned long long)m.n, (unsigned long long)m.k, m.transa,
           m.transb, (long long)m.lda, (long long)m.ldb, (long long)m.ldc, m.batch,
           m.algo_align);
    assert_ptr_equal(m.stream, f->stream);
    assert_true(m.m == 32 && m.n == 64 && m.k == 96);
    assert_true(m.transa == 0 && m.transb == 0);
    assert_true(m.lda == 32 && m.ldb == 96 && m.ldc == 32 && m.ldd == 32);
    assert_int_equal(m.batch, 1);
    assert_int_equal(m.a, 0x200100000000ull); /* w, the rhs: the second input */
    assert_true(m.c == m.d && m.b != m.a && m.d != m.a && m.d != m.b);
    assert_true(m.compute == 68 && m.scale == 0 && m.type == 0); /* 32F, f32, f32 */
    assert_true(m.alpha == 1.0f && m.beta == 0.0f);
    assert_int_equal(m.algo_align, 16);
    /* plain runs queue the same */
    f->matmuls_reset();
    uint64_t in[2] = {0x200000000000ull, 0x200100000000ull}, out = 0x300000000000ull;
    expect_ok(f, astitch_execute_device(x, in, &out, f->stream));
    assert_int_equal(f->matmuls(mm, 4), 1);
    astitch_executable_destroy(x);
    assert_int_equal(f->lt_handles(), handles);
    astitch_graph_destroy(g);

    /* K = 7: rows of 28 bytes break 16-byte alignment: the element-aligned algorithm */
    g = gen_dot_between(f->ctx, 64, 7, 32);
    assert_non_null(g);
    x = compile_for_fake(f, g, false);
    capture_as_planned(f, x, &got);
    assert_int_equal(f->matmuls(mm, 4), 1);
    m = mm[0];
    assert_true(m.k == 7 && m.ldb == 7);
    assert_int_equal(m.algo_align, 4);
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
}

/* astitch_execute_device_timed: one time per plan step, from the events around it (the
 * fake's cuEventElapsedTime answers in order), refused with a wrong step count and under
 * capture. */
static void test_timed_run(void **state)
{
    const Fake *f = *state;
    astitch_graph *g = gen_dot_between(f->ctx, 64, 96, 32);
    assert_non_null(g);
    astitch_executable *x = compile_for_fake(f, g, false);
    int nstep = astitch_plan_num_steps(astitch_executable_plan(x));
    assert_true(nstep >= 3 && nstep <= 6); /* a kernel, the dot, a kernel */
    uint64_t in[2] = {0x200000000000ull, 0x200100000000ull}, out = 0x300000000000ull;
    double us[8] = {0};
    f->set_elapsed((const float[]){0.25f, 1.5f, 0.125f, 2.0f, 3.0f, 4.0f}, 6);
    expect_ok(f, astitch_execute_device_timed(x, in, &out, f->stream, us, nstep));
    assert_true(us[0] == 250.0 && us[1] == 1500.0 && us[2] == 125.0);
    assert_int_equal(astitch_execute_device_timed(x, in, &out, f->stream, us, nstep + 1),
                     ASTITCH_ERR_ARGUMENT);
    printf("# expected error: %s\n", astitch_last_error(f->ctx));
    assert_non_null(strstr(astitch_last_error(f->ctx), "one entry per step"));
    const CudaDriver *d = &f->dev->drv;
    assert_int_equal(d->StreamBeginCapture(f->stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    astitch_status s = astitch_execute_device_timed(x, in, &out, f->stream, us, nstep);
    CUgraph graph = NULL;
    assert_int_equal(d->StreamEndCapture(f->stream, &graph), CUDA_SUCCESS);
    if (graph)
        d->GraphDestroy(graph);
    assert_int_equal(s, ASTITCH_ERR_UNSUPPORTED);
    assert_non_null(strstr(astitch_last_error(f->ctx), "cannot be captured"));
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
}

/* What the device form of "dev_op" saw at its last call. */
typedef struct CustomCall {
    int calls;
    void *stream;
    int n;
    astitch_tensor_view in, out;
    astitch_status give; /* what it returns */
} CustomCall;

static astitch_status dev_op(void *user, void *stream, int n, const astitch_tensor_view *in,
                             astitch_tensor_view *out)
{
    CustomCall *c = user;
    c->calls++;
    c->stream = stream;
    c->n = n;
    c->in = in[0];
    c->out = *out;
    return c->give;
}

/* exp(x) -> custom "dev_op" -> x + 1 on [64, 32]: the custom op between two kernels. */
static astitch_graph *custom_between(astitch_context *ctx)
{
    astitch_graph *g;
    if (astitch_graph_create(ctx, &g) != ASTITCH_OK)
        return NULL;
    int64_t d[2] = {64, 32};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, x);
    astitch_node c = astitch_custom(g, "dev_op", 1, &e, ASTITCH_F32, 2, d);
    astitch_set_name(g, c, "op");
    astitch_add_output(g, astitch_binary(g, ASTITCH_OP_ADD, c, x));
    return astitch_graph_verify(g) == ASTITCH_OK ? g : (astitch_graph_destroy(g), NULL);
}

/* A custom op on the cuda target: without a device form the compile is refused naming it and
 * both ways out; with one, a captured run calls it once with the capturing stream, the device
 * addresses and shapes of its tensors, and queues nothing else of its own; an error it
 * returns fails the run naming the op. */
static void test_custom_on_gpu(void **state)
{
    const Fake *f = *state;
    astitch_context *ctx;
    expect_ok(f, astitch_context_create(&ctx));
    astitch_graph *g = custom_between(ctx);
    assert_non_null(g);
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    astitch_executable *x = NULL;
    assert_int_equal(astitch_compile(g, &o, &x), ASTITCH_ERR_UNSUPPORTED);
    const char *msg = astitch_last_error(ctx);
    printf("# expected error: %s\n", msg);
    assert_non_null(strstr(msg, "'op' (target 'dev_op') has no device implementation"));
    assert_non_null(strstr(msg, "astitch_register_custom_device"));
    assert_non_null(strstr(msg, "host_compute"));
    assert_null(x);
    assert_int_equal(astitch_register_custom_device(ctx, "dev_op", "metal", dev_op, NULL),
                     ASTITCH_ERR_ARGUMENT);
    assert_int_equal(astitch_register_custom_device(ctx, "dev_op", "cuda", NULL, NULL),
                     ASTITCH_ERR_ARGUMENT);

    CustomCall call = {0};
    expect_ok(f, astitch_register_custom_device(ctx, "dev_op", "cuda", dev_op, &call));
    expect_ok(f, astitch_compile(g, &o, &x));
    assert_true(exec_cuda_compute_on_gpu(x, first_compute(x)));
    assert_int_equal(astitch_executable_host_compute_ops(x), 0);
    Queued got;
    capture_as_planned(f, x, &got);
    assert_true(got.launches >= 2);
    assert_int_equal(call.calls, 1);
    assert_ptr_equal(call.stream, f->stream);
    assert_int_equal(call.n, 1);
    assert_true(call.in.rank == 2 && call.in.dims[0] == 64 && call.in.dims[1] == 32);
    assert_true(call.out.rank == 2 && call.out.dims[0] == 64 && call.out.dims[1] == 32);
    assert_int_equal(call.in.dtype, ASTITCH_F32);
    assert_true(call.in.data && call.out.data && call.in.data != call.out.data);

    call.give = ASTITCH_ERR_ARGUMENT;
    uint64_t in = 0x200000000000ull, out = 0x300000000000ull;
    astitch_status s = astitch_execute_device(x, &in, &out, f->stream);
    msg = astitch_last_error(ctx);
    printf("# expected error: %s\n", msg);
    assert_int_equal(s, ASTITCH_ERR_DEVICE);
    assert_non_null(strstr(msg, "'op' (target 'dev_op'): its device implementation returned"));
    expect_ok(f, cuda_stream_sync(ctx, f->dev, f->stream));
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

/* examples/bert_layer.json: its eight dots on cuBLASLt, the whole run captured. The attention
 * scores [b,h,s,d] . [b,h,s,d] (batch 0,1, contract 3/3) take the rhs transposed; the context
 * [b,h,s,s] . [b,h,s,d] (contract 3/2) and the projections [B*S,H] . [H,H'] plain. */
static void test_capture_bert_dots(void **state)
{
    const Fake *f = *state;
    astitch_graph *g = load_example(f, "bert_layer.json");
    astitch_executable *x = compile_for_fake(f, g, false);
    Queued got;
    capture_as_planned(f, x, &got);
    FakeMatmul mm[16];
    int n = f->matmuls(mm, 16), scores = 0, context = 0, proj = 0;
    assert_int_equal(n, 8);
    for (int i = 0; i < n; i++) {
        const FakeMatmul *m = &mm[i];
        printf("# bert dot %d: m %llu n %llu k %llu, trans %d %d, ld %lld %lld %lld, batch %d, "
               "strides %lld %lld %lld\n", i, (unsigned long long)m->m, (unsigned long long)m->n,
               (unsigned long long)m->k, m->transa, m->transb, (long long)m->lda,
               (long long)m->ldb, (long long)m->ldc, m->batch, (long long)m->stride_a,
               (long long)m->stride_b, (long long)m->stride_c);
        assert_ptr_equal(m->stream, f->stream);
        if (m->batch == 96 && m->k == 64) { /* scores: M = N = s = 128, K = d = 64 */
            scores++;
            assert_true(m->m == 128 && m->n == 128 && m->transa == 1 && m->transb == 0);
            assert_true(m->lda == 64 && m->ldb == 64 && m->ldc == 128);
            assert_true(m->stride_a == 128 * 64 && m->stride_b == 128 * 64 &&
                        m->stride_c == 128 * 128);
        } else if (m->batch == 96) { /* context: M = s = 128, N = d = 64, K = s = 128 */
            context++;
            assert_true(m->m == 64 && m->n == 128 && m->k == 128);
            assert_true(m->transa == 0 && m->transb == 0);
            assert_true(m->lda == 64 && m->ldb == 128 && m->ldc == 64);
            assert_true(m->stride_a == 128 * 64 && m->stride_b == 128 * 128 &&
                        m->stride_c == 128 * 64);
        } else { /* [1024, H] . [H, H']: m = H', n = 1024, k = H */
            proj++;
            assert_int_equal(m->batch, 1);
            assert_true(m->n == 1024 && m->transa == 0 && m->transb == 0);
            assert_true(m->lda == (int64_t)m->m && m->ldb == (int64_t)m->k &&
                        m->ldc == (int64_t)m->m);
        }
    }
    assert_true(scores == 1 && context == 1 && proj == 6);
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
}

/* Where cuBLASLt is looked for, and a missing one: an error naming every place tried, unless
 * host_compute asks for the dots on the host. */
static void test_cublaslt_missing(void **state)
{
    const Fake *f = *state;
    char places[CUBLASLT_MAX_PLACES][512], *fake = strdup(getenv("ASTITCH_CUBLASLT"));
    assert_int_equal(cublaslt_places(places, CUBLASLT_MAX_PLACES), 1);
    assert_string_equal(places[0], fake);
    unsetenv("ASTITCH_CUBLASLT");
    setenv("ASTITCH_CUDA_PATH", "/nonexistent/cuda", 1);
    int n = cublaslt_places(places, CUBLASLT_MAX_PLACES);
    assert_int_equal(n, 3);
    assert_string_equal(places[0], "/nonexistent/cuda/lib64/libcublasLt.so.13");
    assert_non_null(strstr(places[1], "/lib64/libcublasLt.so.13"));
    assert_string_equal(places[2], "libcublasLt.so.13");
    unsetenv("ASTITCH_CUDA_PATH");

    setenv("ASTITCH_CUBLASLT", "/nonexistent/libcublasLt-missing.so.13", 1);
    astitch_graph *g = gen_dot_between(f->ctx, 64, 96, 32);
    assert_non_null(g);
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    astitch_executable *x = NULL;
    assert_int_equal(astitch_compile(g, &o, &x), ASTITCH_ERR_NO_DEVICE);
    const char *msg = astitch_last_error(f->ctx);
    printf("# expected error: %s\n", msg);
    assert_non_null(strstr(msg, "cuBLASLt"));
    assert_non_null(strstr(msg, "/nonexistent/libcublasLt-missing.so.13 ("));
    assert_non_null(strstr(msg, "host_compute"));
    expect_ok(f, astitch_context_set_option(f->ctx, "host_compute", "1"));
    expect_ok(f, astitch_compile(g, &o, &x));
    assert_false(exec_cuda_compute_on_gpu(x, first_compute(x)));
    assert_int_equal(astitch_executable_host_compute_ops(x), 1);
    astitch_executable_destroy(x);
    expect_ok(f, astitch_context_set_option(f->ctx, "host_compute", NULL));
    setenv("ASTITCH_CUBLASLT", fake, 1);
    free(fake);
    astitch_graph_destroy(g);
}

/* A kernel of a block per tile that spills at its planned register bound is loaded again with
 * the bound of one block fewer per SM until it does not (the fake spills below 48: 32 -> 40 ->
 * 64, three loads), and the compile cache keeps the relaxed PTX, so compiling the same graph
 * again loads it at once; a persistent kernel keeps its bound; without spills one load. */
static void test_relax_spills(void **state)
{
    const Fake *f = *state;
    static const struct { const char *below; bool persistent; int64_t rows; int loads, regs; } cases[] = {
        {"48", false, 1024, 3, 64}, {"48", true, 1024, 1, 32}, {NULL, false, 2048, 1, 32},
        {"48", false, 1024, 1, 64},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        astitch_graph *g;
        assert_int_equal(astitch_graph_create(f->ctx, &g), ASTITCH_OK);
        int64_t d[2] = {cases[i].rows, 1024};
        astitch_node a = astitch_parameter(g, "a", ASTITCH_F32, 2, d);
        astitch_node b = astitch_parameter(g, "b", ASTITCH_F32, 2, d);
        astitch_add_output(g, astitch_binary(g, ASTITCH_OP_ADD, a, b));
        if (cases[i].below)
            setenv("FAKE_CUDA_SPILL_BELOW", cases[i].below, 1);
        astitch_compile_options o;
        astitch_compile_options_default(&o);
        o.target = ASTITCH_TARGET_CUDA;
        o.plan.persistent = cases[i].persistent;
        int before = f->loads();
        astitch_executable *x = NULL;
        expect_ok(f, astitch_compile(g, &o, &x));
        unsetenv("FAKE_CUDA_SPILL_BELOW");
        astitch_kernel_info k;
        assert_int_equal(astitch_plan_kernel_info(astitch_executable_plan(x), 0, &k), ASTITCH_OK);
        printf("# spill below %s, persistent %d: planned %d registers, %d loads, bound %d\n",
               cases[i].below ? cases[i].below : "-", cases[i].persistent, k.regs,
               f->loads() - before, f->function_regs());
        assert_int_equal(k.regs, 32);
        assert_int_equal(f->loads() - before, cases[i].loads);
        assert_int_equal(f->function_regs(), cases[i].regs);
        /* what the executable says it loaded */
        astitch_loaded_kernel lk;
        expect_ok(f, astitch_executable_loaded_kernel(x, 0, &lk));
        assert_int_equal(lk.planned_bound, 32);
        assert_int_equal(lk.bound, cases[i].regs);
        assert_int_equal(lk.regs, cases[i].regs);
        assert_int_equal(lk.local_bytes, cases[i].below && cases[i].persistent ? 16 : 0);
        assert_int_equal(lk.blocks_per_sm, 65536 / (cases[i].regs * k.block));
        assert_int_equal(astitch_executable_loaded_kernel(x, 1, &lk), ASTITCH_ERR_ARGUMENT);
        assert_int_equal(astitch_executable_loaded_kernel(x, -1, &lk), ASTITCH_ERR_ARGUMENT);
        assert_int_equal(astitch_executable_loaded_kernel(x, 0, NULL), ASTITCH_ERR_ARGUMENT);
        astitch_executable_destroy(x);
        if (i == 0) { /* the host target loads no GPU kernels */
            o.target = ASTITCH_TARGET_HOST;
            expect_ok(f, astitch_compile(g, &o, &x));
            assert_int_equal(astitch_executable_loaded_kernel(x, 0, &lk), ASTITCH_ERR_UNSUPPORTED);
            printf("# expected error: %s\n", astitch_last_error(f->ctx));
            astitch_executable_destroy(x);
        }
        astitch_graph_destroy(g);
    }
}

/* Softmax over rows of 768 f32: one warp holds a row at 24 elements per lane by default, the
 * wide form two warps at 12 (the variant search's alternative); rows of 512 have none. */
static astitch_graph *wide_rows_graph(const Fake *f, int64_t cols)
{
    astitch_graph *g;
    expect_ok(f, astitch_graph_create(f->ctx, &g));
    int64_t d[2] = {1024, cols}, axis = 1, keep = 0;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d);
    astitch_node m = astitch_broadcast_in_dim(g, astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, &axis), 2, d, &keep);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, astitch_binary(g, ASTITCH_OP_SUB, x, m));
    astitch_node s = astitch_broadcast_in_dim(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &axis), 2, d, &keep);
    expect_ok(f, astitch_add_output(g, astitch_binary(g, ASTITCH_OP_DIV, e, s)));
    return g;
}

static int lanes_per_row(const astitch_executable *x)
{
    const astitch_plan *p = astitch_executable_plan(x);
    return p->kernel[0].group[0].map.threads_per_row;
}

/* Runs x (of up to two inputs and outputs) once outside any capture on made-up addresses. */
static void run_plain(const Fake *f, astitch_executable *x)
{
    uint64_t in[2] = {0x200000000000ull, 0x240000000000ull};
    uint64_t out[2] = {0x300000000000ull, 0x340000000000ull};
    expect_ok(f, astitch_execute_device(x, in, out, f->stream));
}

/* g compiled for the fake device with the variant search off: the planner's default form. */
static astitch_executable *compile_unsearched(const Fake *f, astitch_graph *g)
{
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    o.variant_search = false;
    astitch_executable *x = NULL;
    expect_ok(f, astitch_compile(g, &o, &x));
    return x;
}

/* The variant search: both forms compiled, the first run times them (the fake's event times)
 * and keeps the faster, recorded in the compile cache (memory, then disk); a first run under
 * capture keeps the default untimed and queues only its launches; off, nothing is searched. */
static void test_variant_search(void **state)
{
    const Fake *f = *state;
    astitch_variant_info v;
    astitch_graph *g = wide_rows_graph(f, 512);
    astitch_executable *x = compile_for_fake(f, g, false);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_NONE);
    assert_null(x->alt);
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
    g = wide_rows_graph(f, 768);
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "0"));
    /* the times of the last three runs of each form, in turn (the warm-up pair is not read):
     * each form's fastest counts */
    static const struct { float ms[6], best[2]; bool wide; } timed[] = {
        {{2.0f, 1.0f, 2.2f, 1.1f, 2.1f, 0.9f}, {2.0f, 0.9f}, true},
        {{1.0f, 2.0f, 0.8f, 2.1f, 1.2f, 0.7f}, {0.8f, 0.7f}, true},
        {{1.0f, 2.0f, 0.8f, 2.1f, 1.2f, 1.9f}, {0.8f, 1.9f}, false}};
    for (int i = 0; i < 3; i++) {
        x = compile_for_fake(f, g, false);
        expect_ok(f, astitch_executable_variant(x, &v));
        assert_int_equal(v.state, ASTITCH_VARIANT_PENDING);
        assert_false(v.wide_rows);
        assert_int_equal(lanes_per_row(x), 32);
        f->set_elapsed(timed[i].ms, 6);
        run_plain(f, x);
        expect_ok(f, astitch_executable_variant(x, &v));
        assert_int_equal(v.state, ASTITCH_VARIANT_TIMED);
        assert_int_equal(v.wide_rows, timed[i].wide);
        assert_true(v.us[0] == timed[i].best[0] * 1e3 && v.us[1] == timed[i].best[1] * 1e3);
        assert_int_equal(lanes_per_row(x), timed[i].wide ? 64 : 32);
        assert_int_equal(astitch_executable_plan(x)->opt.wide_rows, timed[i].wide);
        assert_null(x->alt);
        astitch_executable_destroy(x);
    }
    /* a first run from host memory times the forms on device copies of the inputs */
    x = compile_for_fake(f, g, false);
    f->set_elapsed((const float[]){2.0f, 1.0f, 2.0f, 1.0f, 2.0f, 1.0f}, 6);
    static float host_in[1024 * 768], host_out[1024 * 768];
    const void *hin[1] = {host_in};
    void *hout[1] = {host_out};
    expect_ok(f, astitch_execute(x, hin, hout));
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_TIMED);
    assert_true(v.wide_rows);
    assert_null(x->alt);
    assert_int_equal(lanes_per_row(x), 64);
    astitch_executable_destroy(x);
    /* captured first: the default's launches only, the alternative freed after the capture */
    x = compile_for_fake(f, g, false);
    Queued want, got;
    CUresult end;
    expect_from_plan(x, false, &want);
    expect_ok(f, capture(f, x, &end, &got));
    assert_int_equal(end, CUDA_SUCCESS);
    assert_int_equal(got.other, 0);
    assert_int_equal(got.launches, want.launches);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_CAPTURED);
    assert_false(v.wide_rows);
    assert_non_null(x->alt);
    run_plain(f, x);
    assert_null(x->alt);
    assert_int_equal(lanes_per_row(x), 32);
    astitch_executable_destroy(x);
    /* off: no search */
    x = compile_unsearched(f, g);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_NONE);
    assert_null(x->alt);
    astitch_executable_destroy(x);
    /* recorded: memory, then disk after the memory layer is emptied */
    char dir[] = "/tmp/astitch-variant-XXXXXX";
    assert_non_null(mkdtemp(dir));
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "1"));
    expect_ok(f, astitch_context_set_option(f->ctx, "cache_dir", dir));
    compile_cache_reset();
    x = compile_for_fake(f, g, false);
    f->set_elapsed((const float[]){3.0f, 1.5f, 3.0f, 1.5f, 3.0f, 1.5f}, 6);
    run_plain(f, x);
    astitch_executable_destroy(x);
    for (int layer = 0; layer < 2; layer++) {
        if (layer == 1)
            compile_cache_reset();
        x = compile_for_fake(f, g, false);
        expect_ok(f, astitch_executable_variant(x, &v));
        assert_int_equal(v.state, ASTITCH_VARIANT_CACHED);
        assert_true(v.wide_rows);
        assert_null(x->alt);
        assert_int_equal(lanes_per_row(x), 64);
        astitch_executable_destroy(x);
    }
    CompileCacheStats st;
    compile_cache_stats(&st);
    assert_true(st.disk_hits > 0);
    int choices = 0; /* the choice's own file beside the PTX files */
    DIR *dh = opendir(dir);
    assert_non_null(dh);
    for (struct dirent *e; (e = readdir(dh));)
        choices += strncmp(e->d_name, "variant-", 8) == 0;
    closedir(dh);
    assert_int_equal(choices, 1);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    expect_ok(f, astitch_context_set_option(f->ctx, "cache_dir", ""));
    compile_cache_reset();
    astitch_graph_destroy(g);
}

/* A norm's backward in small: dx = dy - sum_row(dy * x) * x and dgamma = sum over the rows of
 * dy * x, rows of `cols` f32: the column sum can be taken in the row pass (forms 2 and 3 of the
 * variant search), which replaces the one-warp or wide choice of rows of 768. */
static astitch_graph *column_sums_graph(const Fake *f, int64_t cols)
{
    astitch_graph *g;
    expect_ok(f, astitch_graph_create(f->ctx, &g));
    int64_t d[2] = {1024, cols}, axis1 = 1, axis0 = 0, keep = 0;
    astitch_node dy = astitch_parameter(g, "dy", ASTITCH_F32, 2, d);
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d);
    astitch_node p = astitch_binary(g, ASTITCH_OP_MUL, dy, x);
    astitch_node s = astitch_broadcast_in_dim(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, p, 1, &axis1), 2, d, &keep);
    expect_ok(f, astitch_add_output(g, astitch_binary(g, ASTITCH_OP_SUB, dy,
                                                      astitch_binary(g, ASTITCH_OP_MUL, s, x))));
    expect_ok(f, astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, p, 1, &axis0)));
    return g;
}

/* Times the three forms of a column_sums_graph (0, 2, 3, in that order) over three rounds:
 * each form's time is base + its position / 10, but `fast` (a position) gets 1 ms in round 1. */
static void time_three_forms(const Fake *f, float base, int fast)
{
    float ms[9];
    for (int i = 0; i < 9; i++)
        ms[i] = base + 0.1f * (float)(i % 3);
    if (fast >= 0)
        ms[3 + fast] = 1.0f;
    f->set_elapsed(ms, 9);
}

/* The search over several forms: every form that applies is built and timed in turn, the
 * fastest runs with its switches in its plan, and its index is what the cache keeps; a
 * recorded index that no form of the graph has is ignored. */
static void test_variant_forms(void **state)
{
    const Fake *f = *state;
    astitch_variant_info v;
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "0"));
    astitch_graph *g = column_sums_graph(f, 768);
    astitch_executable *x = compile_for_fake(f, g, false);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_PENDING);
    assert_int_equal(v.nforms, 3);
    assert_int_equal(v.form, 0);
    assert_int_equal(x->alt->variant.form, 2);
    assert_int_equal(x->alt->alt->variant.form, 3);
    assert_null(x->alt->alt->alt);
    time_three_forms(f, 2.0f, 2); /* form 3 fastest in one round of three */
    run_plain(f, x);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_TIMED);
    assert_int_equal(v.form, 3);
    assert_true(v.column_sums_in_rows && v.persistent && !v.wide_rows);
    assert_true(v.us[0] == 2.0f * 1e3 && v.us[1] == 0 && v.us[2] == (2.0f + 0.1f) * 1e3 &&
                v.us[3] == 1.0f * 1e3);
    const astitch_plan *p = astitch_executable_plan(x);
    assert_true(p->opt.column_sums_in_rows && p->opt.persistent && !p->opt.wide_rows);
    assert_null(x->alt);
    astitch_executable_destroy(x);
    /* the same times but none faster: the default stays */
    x = compile_for_fake(f, g, false);
    time_three_forms(f, 2.0f, -1);
    run_plain(f, x);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.form, 0);
    assert_false(astitch_executable_plan(x)->opt.column_sums_in_rows);
    astitch_executable_destroy(x);
    /* recorded: the index; a later compile builds only that form */
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "1"));
    compile_cache_reset();
    x = compile_for_fake(f, g, false);
    time_three_forms(f, 2.0f, 1);
    run_plain(f, x);
    astitch_executable_destroy(x);
    x = compile_for_fake(f, g, false);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_CACHED);
    assert_int_equal(v.form, 2);
    assert_int_equal(v.nforms, 1);
    assert_true(v.column_sums_in_rows && !v.persistent && !v.wide_rows);
    assert_true(astitch_executable_plan(x)->opt.column_sums_in_rows);
    assert_null(x->alt);
    astitch_executable_destroy(x);
    /* an index out of range, as a foreign or damaged entry could hold, or of a form the graph
     * does not have (1: wide rows): searched again (the choice is kept under the default
     * form's plan, which the search off compiles) */
    for (int bad = 0; bad < 2; bad++) {
        x = compile_unsearched(f, g);
        assert_int_equal(compile_cache_choice(x->plan, exec_cuda_sm(x)), bad ? 9 : 2);
        compile_cache_set_choice(x->plan, exec_cuda_sm(x), bad ? 1 : 9);
        astitch_executable_destroy(x);
        x = compile_for_fake(f, g, false);
        expect_ok(f, astitch_executable_variant(x, &v));
        assert_int_equal(v.state, ASTITCH_VARIANT_PENDING);
        assert_int_equal(v.nforms, 3);
        astitch_executable_destroy(x);
    }
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "1")); /* as the tests after expect */
    compile_cache_reset();
    astitch_graph_destroy(g);
}

static int setup(void **state)
{
    const char *fake = getenv("ASTITCH_FAKE_CUDA");
    setenv("ASTITCH_LIBCUDA", fake, 1);
    setenv("FAKE_CUDA_MODE", "device", 1);
    const char *fake_lt = getenv("ASTITCH_FAKE_CUBLASLT");
    if (!fake_lt)
        return -1;
    setenv("ASTITCH_CUBLASLT", fake_lt, 1);
    setenv("ASTITCH_CACHE_DIR", "", 1); /* no PTX files for a device that does not exist */
    Fake *f = calloc(1, sizeof *f);
    void *lib = dlopen(fake, RTLD_NOW | RTLD_LOCAL); /* the instance the library opens too */
    *state = f;
    if (!f || !lib || astitch_context_create(&f->ctx) != ASTITCH_OK)
        return -1;
    void *log = dlsym(lib, "fake_cuda_log"), *reset = dlsym(lib, "fake_cuda_log_reset");
    void *loads = dlsym(lib, "fake_cuda_loads"), *regs = dlsym(lib, "fake_cuda_function_regs");
    memcpy(&f->log, &log, sizeof log); /* POSIX: dlsym's pointer converts to a function's */
    memcpy(&f->log_reset, &reset, sizeof reset);
    memcpy(&f->loads, &loads, sizeof loads);
    memcpy(&f->function_regs, &regs, sizeof regs);
    void *elapsed = dlsym(lib, "fake_cuda_set_elapsed");
    memcpy(&f->set_elapsed, &elapsed, sizeof elapsed);
    void *lt = dlopen(fake_lt, RTLD_NOW | RTLD_LOCAL); /* the instance the library opens */
    void *mm = lt ? dlsym(lt, "fake_cublaslt_matmuls") : NULL;
    void *mr = lt ? dlsym(lt, "fake_cublaslt_reset") : NULL;
    void *lh = lt ? dlsym(lt, "fake_cublaslt_handles") : NULL;
    if (!mm || !mr || !lh)
        return -1;
    memcpy(&f->matmuls, &mm, sizeof mm);
    memcpy(&f->matmuls_reset, &mr, sizeof mr);
    memcpy(&f->lt_handles, &lh, sizeof lh);
    if (!f->log || !f->log_reset || !f->loads || !f->function_regs || !f->set_elapsed || cuda_device_open(f->ctx, 0, &f->dev) != ASTITCH_OK ||
        cuda_stream_create(f->ctx, f->dev, &f->stream) != ASTITCH_OK) {
        fprintf(stderr, "setup: %s\n", astitch_last_error(f->ctx));
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    Fake *f = *state;
    if (!f)
        return 0;
    cuda_stream_destroy(f->dev, f->stream);
    cuda_device_close(f->dev);
    astitch_context_destroy(f->ctx);
    free(f);
    return 0;
}

int main(void)
{
    const char *fake = getenv("ASTITCH_FAKE_CUDA");
    if (!fake || !*fake) {
        printf("# SKIP: ASTITCH_FAKE_CUDA is not set\n");
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variant_search),
        cmocka_unit_test(test_variant_forms),
        cmocka_unit_test(test_capture_examples),
        cmocka_unit_test(test_sync_breaks_capture),
        cmocka_unit_test(test_capture_refuses_compute_op),
        cmocka_unit_test(test_capture_dot_on_gpu),
        cmocka_unit_test(test_capture_bert_dots),
        cmocka_unit_test(test_custom_on_gpu),
        cmocka_unit_test(test_timed_run),
        cmocka_unit_test(test_cublaslt_missing),
        cmocka_unit_test(test_caller_workspace),
        cmocka_unit_test(test_relax_spills),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
