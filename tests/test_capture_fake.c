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
 * the op, queue nothing, and leave the stream usable. The variant search's wide form under a
 * capture and outside one. Exits 77 (SKIP) where the fakes were not built. (The runtime's
 * other behaviours on the fake device: test_runtime_fake.c.)
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

#include "fake_device.h"
#include "gen_graph.h"
#include "runtime/compile_cache.h"

/* What a captured run queued on the capturing stream, from the fake's log. */
typedef struct Queued {
    int launches, cooperative, memsets, copies;
    int fills;              /* launches of the fill kernel (several fills at once) */
    int unmerged;           /* expected: fills before adjacent ones merge (exec_kernel_fills) */
    int other;              /* any other call but context push/pop and capture queries */
    bool reset_before_coop; /* every cooperative launch directly follows a fill */
} Queued;

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

/* Whether the last error of f's context holds `needle`. */
static bool error_has(const Fake *f, const char *needle)
{
    bool has = strstr(astitch_last_error(f->ctx), needle) != NULL;
    if (!has)
        printf("# last error: %s\n", astitch_last_error(f->ctx));
    return has;
}

/* An output whose memory overlaps an input's or another output's is refused before anything
 * runs, naming both (kernels read their inputs while they write their outputs), on device
 * pointers and on host buffers, whatever the target; an empty tensor takes no memory, and
 * adjacent tensors do not overlap. The reference target refuses a NULL input (it has no
 * slots to look a size up in). */
static void test_overlapping_buffers(void **state)
{
    const Fake *f = *state;
    astitch_graph *g;
    expect_ok(f, astitch_graph_create(f->ctx, &g));
    int64_t d = 256, none = 0;
    astitch_node a = astitch_parameter(g, "a", ASTITCH_F32, 1, &d);
    astitch_node b = astitch_parameter(g, "b", ASTITCH_F32, 1, &d);
    astitch_node e = astitch_parameter(g, "e", ASTITCH_F32, 1, &none);
    astitch_node sum = astitch_binary(g, ASTITCH_OP_ADD, a, b);
    astitch_node prod = astitch_binary(g, ASTITCH_OP_MUL, a, b);
    astitch_node empty = astitch_binary(g, ASTITCH_OP_ADD, e, e);
    expect_ok(f, astitch_set_name(g, sum, "sum"));
    expect_ok(f, astitch_set_name(g, prod, "prod"));
    expect_ok(f, astitch_set_name(g, empty, "empty"));
    expect_ok(f, astitch_add_output(g, sum));
    expect_ok(f, astitch_add_output(g, prod));
    expect_ok(f, astitch_add_output(g, empty));
    astitch_executable *x = compile_for_fake(f, g, false);
    uint64_t A = 0x200000000000ull, B = 0x210000000000ull, O = 0x300000000000ull;
    uint64_t in[3] = {A, B, A};
    uint64_t out[3] = {A + 64, O + 1024, A};
    assert_int_equal(astitch_execute_device(x, in, out, f->stream), ASTITCH_ERR_ARGUMENT);
    assert_true(error_has(f, "astitch_execute_device: output 0 ('sum') overlaps input 0 ('a')"));
    out[0] = O;
    out[1] = O + 1008;
    assert_int_equal(astitch_execute_device(x, in, out, f->stream), ASTITCH_ERR_ARGUMENT);
    assert_true(error_has(f, "output 1 ('prod') overlaps output 0 ('sum')"));
    out[1] = B + 1024; /* right after b; the empty output at a's address */
    expect_ok(f, astitch_execute_device(x, in, out, f->stream));

    static float pool[4 * 256];
    float *ha = pool, *hb = pool + 256, *hs = pool + 512, *hp = pool + 768;
    const void *hin[3] = {ha, hb, ha};
    void *hout[3] = {hs, hb + 255, ha};
    static const astitch_target targets[] = {ASTITCH_TARGET_CUDA, ASTITCH_TARGET_HOST,
                                             ASTITCH_TARGET_REFERENCE};
    for (int t = 0; t < 3; t++) {
        astitch_executable *y = x;
        if (t > 0) {
            astitch_compile_options o;
            astitch_compile_options_default(&o);
            o.target = targets[t];
            expect_ok(f, astitch_compile(g, &o, &y));
        }
        hout[1] = hb + 255;
        assert_int_equal(astitch_execute(y, hin, hout), ASTITCH_ERR_ARGUMENT);
        assert_true(error_has(f, "astitch_execute: output 1 ('prod') overlaps input 1 ('b')"));
        hout[1] = hp;
        if (targets[t] != ASTITCH_TARGET_CUDA) {
            expect_ok(f, astitch_execute(y, hin, hout));
            assert_true(hs[0] == ha[0] + hb[0]);
            const void *missing[3] = {ha, NULL, ha};
            assert_int_equal(astitch_execute(y, missing, hout), ASTITCH_ERR_ARGUMENT);
            assert_true(error_has(f, "input 1 ('b') is NULL"));
        }
        if (y != x)
            astitch_executable_destroy(y);
    }
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

/* Softmax over rows of 768 f32: one warp holds a row at 24 elements per lane by default, the
 * wide form two warps at 12 (the variant search's alternative); rows of 512 have none, nor a
 * bound trial. */
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

/* The fake's event times for wide_rows_graph's search of "0 1 1+": the two forms' three
 * timed rounds from ms (form 0, form 1 in turn), the trial at trial_ms in each. */
static void set_elapsed_with_trial(const Fake *f, const float ms[6], float trial_ms)
{
    float all[9];
    for (int r = 0; r < 3; r++) {
        all[3 * r] = ms[2 * r];
        all[3 * r + 1] = ms[2 * r + 1];
        all[3 * r + 2] = trial_ms;
    }
    f->set_elapsed(all, 9);
}

static int lanes_per_row(const astitch_executable *x)
{
    const astitch_plan *p = astitch_executable_plan(x);
    return p->kernel[0].group[0].map.threads_per_row;
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
    char chain[64];
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_NONE);
    assert_null(x->alt);
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
    g = wide_rows_graph(f, 768);
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "0"));
    /* the times of the last three runs of each form, in turn (the warm-up round is not read):
     * each form's fastest counts; the wide form's bound trial (its rows at 12 elements per lane
     * may take the next register bound; the one-warp form's may not) runs third, at 5 ms */
    static const struct { float ms[6], best[2]; bool wide; } timed[] = {
        {{2.0f, 1.0f, 2.2f, 1.1f, 2.1f, 0.9f}, {2.0f, 0.9f}, true},
        {{1.0f, 2.0f, 0.8f, 2.1f, 1.2f, 0.7f}, {0.8f, 0.7f}, true},
        {{1.0f, 2.0f, 0.8f, 2.1f, 1.2f, 1.9f}, {0.8f, 1.9f}, false}};
    for (int i = 0; i < 3; i++) {
        x = compile_for_fake(f, g, false);
        expect_ok(f, astitch_executable_variant(x, &v));
        assert_int_equal(v.state, ASTITCH_VARIANT_PENDING);
        assert_string_equal(chain_text(x, chain, sizeof chain), "0 1 1+");
        assert_false(v.wide_rows);
        assert_int_equal(lanes_per_row(x), 32);
        set_elapsed_with_trial(f, timed[i].ms, 5.0f);
        run_plain(f, x);
        expect_ok(f, astitch_executable_variant(x, &v));
        assert_int_equal(v.state, ASTITCH_VARIANT_TIMED);
        assert_int_equal(v.wide_rows, timed[i].wide);
        assert_false(v.raised_bound);
        assert_true(v.us[0] == timed[i].best[0] * 1e3 && v.us[1] == timed[i].best[1] * 1e3 &&
                    v.us_raised[1] == 5.0f * 1e3 && v.us_raised[0] == 0);
        assert_int_equal(lanes_per_row(x), timed[i].wide ? 64 : 32);
        assert_int_equal(astitch_executable_plan(x)->opt.wide_rows, timed[i].wide);
        assert_null(x->alt);
        astitch_executable_destroy(x);
    }
    /* a first run from host memory times the forms on device copies of the inputs */
    x = compile_for_fake(f, g, false);
    set_elapsed_with_trial(f, (const float[]){2.0f, 1.0f, 2.0f, 1.0f, 2.0f, 1.0f}, 5.0f);
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
    set_elapsed_with_trial(f, (const float[]){3.0f, 1.5f, 3.0f, 1.5f, 3.0f, 1.5f}, 5.0f);
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
    /* the choice's own file beside the PTX files, and the wide form's kept bound */
    int choices = 0, bounds = 0;
    DIR *dh = opendir(dir);
    assert_non_null(dh);
    for (struct dirent *e; (e = readdir(dh));) {
        choices += strncmp(e->d_name, "variant-", 8) == 0;
        bounds += strncmp(e->d_name, "bound-", 6) == 0;
    }
    closedir(dh);
    assert_int_equal(choices, 1);
    assert_int_equal(bounds, 1);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    expect_ok(f, astitch_context_set_option(f->ctx, "cache_dir", ""));
    compile_cache_reset();
    astitch_graph_destroy(g);
}

int main(void)
{
    if (!fake_device_built())
        return 77; /* SKIP */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variant_search),
        cmocka_unit_test(test_capture_examples),
        cmocka_unit_test(test_sync_breaks_capture),
        cmocka_unit_test(test_capture_refuses_compute_op),
        cmocka_unit_test(test_capture_dot_on_gpu),
        cmocka_unit_test(test_capture_bert_dots),
        cmocka_unit_test(test_custom_on_gpu),
        cmocka_unit_test(test_caller_workspace),
        cmocka_unit_test(test_overlapping_buffers),
    };
    return cmocka_run_group_tests(tests, fake_setup, fake_teardown);
}
