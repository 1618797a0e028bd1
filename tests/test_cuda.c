/*
 * The CUDA driver layer on a real GPU: the device model, hand-written PTX kernels loaded,
 * launched and checked (vector add, dynamic shared memory above 48 KiB, a cooperative kernel
 * with the flip-bit grid barrier at full co-residency), JIT errors with their log, a grid too
 * large to be co-resident, device memory exhaustion. Exits 77 (meson: SKIP) where no driver or
 * device is found. Inputs are random (seed printed; ASTITCH_TEST_SEED replays one).
 */
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

#include "runtime/cuda_driver.h"
#include "runtime/nvjitlink.h"

/* sm_90, PTX ISA 8.0. Pointers are generic addresses of global memory (cuMemAlloc's). */
static const char kernels_ptx[] =
    ".version 8.0\n"
    ".target sm_90\n"
    ".address_size 64\n"
    "\n"
    "// c[i] = a[i] + b[i] for i < n\n"
    ".visible .entry vadd(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u32 pn)\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .b32 %r<6>;\n"
    "    .reg .f32 %f<4>;\n"
    "    .reg .b64 %rd<10>;\n"
    "    ld.param.u64 %rd1, [pa];\n"
    "    ld.param.u64 %rd2, [pb];\n"
    "    ld.param.u64 %rd3, [pc];\n"
    "    ld.param.u32 %r1, [pn];\n"
    "    mov.u32 %r2, %ctaid.x;\n"
    "    mov.u32 %r3, %ntid.x;\n"
    "    mov.u32 %r4, %tid.x;\n"
    "    mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "    setp.ge.u32 %p1, %r5, %r1;\n"
    "    @%p1 bra DONE;\n"
    "    mul.wide.u32 %rd4, %r5, 4;\n"
    "    add.s64 %rd5, %rd1, %rd4;\n"
    "    add.s64 %rd6, %rd2, %rd4;\n"
    "    add.s64 %rd7, %rd3, %rd4;\n"
    "    ld.global.f32 %f1, [%rd5];\n"
    "    ld.global.f32 %f2, [%rd6];\n"
    "    add.rn.f32 %f3, %f1, %f2;\n"
    "    st.global.f32 [%rd7], %f3;\n"
    "DONE:\n"
    "    ret;\n"
    "}\n"
    "\n"
    "// y[i] = x[block start + ntid - 1 - tid], through dynamic shared memory at byte offset off\n"
    ".extern .shared .align 16 .b8 dsmem[];\n"
    ".visible .entry shared_reverse(.param .u64 px, .param .u64 py, .param .u32 poff)\n"
    "{\n"
    "    .reg .b32 %r<12>;\n"
    "    .reg .f32 %f<2>;\n"
    "    .reg .b64 %rd<8>;\n"
    "    ld.param.u64 %rd1, [px];\n"
    "    ld.param.u64 %rd2, [py];\n"
    "    ld.param.u32 %r1, [poff];\n"
    "    mov.u32 %r2, %ctaid.x;\n"
    "    mov.u32 %r3, %ntid.x;\n"
    "    mov.u32 %r4, %tid.x;\n"
    "    mad.lo.s32 %r5, %r2, %r3, %r4;\n"
    "    mul.wide.u32 %rd3, %r5, 4;\n"
    "    add.s64 %rd4, %rd1, %rd3;\n"
    "    ld.global.f32 %f1, [%rd4];\n"
    "    mov.u32 %r6, dsmem;\n"
    "    add.u32 %r6, %r6, %r1;\n"
    "    shl.b32 %r7, %r4, 2;\n"
    "    add.u32 %r8, %r6, %r7;\n"
    "    st.shared.f32 [%r8], %f1;\n"
    "    bar.sync 0;\n"
    "    sub.u32 %r9, %r3, %r4;\n"
    "    sub.u32 %r9, %r9, 1;\n"
    "    shl.b32 %r10, %r9, 2;\n"
    "    add.u32 %r11, %r6, %r10;\n"
    "    ld.shared.f32 %f1, [%r11];\n"
    "    add.s64 %rd5, %rd2, %rd3;\n"
    "    st.global.f32 [%rd5], %f1;\n"
    "    ret;\n"
    "}\n"
    "\n"
    "// tmp[i] = 2 x[i]; grid barrier on *ctr (flip-bit counter); y[i] = tmp[(i + ntid) mod\n"
    "// total] + 1, a value another block wrote before the barrier\n"
    ".visible .entry grid_rotate(.param .u64 px, .param .u64 ptmp, .param .u64 py,\n"
    "                            .param .u64 pctr)\n"
    "{\n"
    "    .reg .pred %p<4>;\n"
    "    .reg .b32 %r<20>;\n"
    "    .reg .f32 %f<5>;\n"
    "    .reg .b64 %rd<12>;\n"
    "    ld.param.u64 %rd1, [px];\n"
    "    ld.param.u64 %rd2, [ptmp];\n"
    "    ld.param.u64 %rd3, [py];\n"
    "    ld.param.u64 %rd4, [pctr];\n"
    "    mov.u32 %r1, %tid.x;\n"
    "    mov.u32 %r2, %ntid.x;\n"
    "    mov.u32 %r3, %ctaid.x;\n"
    "    mov.u32 %r4, %nctaid.x;\n"
    "    mad.lo.s32 %r5, %r3, %r2, %r1;\n"
    "    mul.lo.s32 %r6, %r4, %r2;\n"
    "    mul.wide.u32 %rd5, %r5, 4;\n"
    "    add.s64 %rd6, %rd1, %rd5;\n"
    "    ld.global.f32 %f1, [%rd6];\n"
    "    add.rn.f32 %f2, %f1, %f1;\n"
    "    add.s64 %rd7, %rd2, %rd5;\n"
    "    st.global.f32 [%rd7], %f2;\n"
    "    bar.sync 0;\n"
    "    setp.ne.u32 %p1, %r1, 0;\n"
    "    @%p1 bra WAITED;\n"
    "    fence.acq_rel.gpu;\n"
    "    setp.eq.u32 %p2, %r3, 0;\n"
    "    sub.u32 %r7, %r4, 1;\n"
    "    mov.u32 %r8, 0x80000000;\n"
    "    sub.u32 %r8, %r8, %r7;\n"
    "    selp.b32 %r9, %r8, 1, %p2;\n"
    "    atom.release.gpu.global.add.u32 %r10, [%rd4], %r9;\n"
    "SPIN:\n"
    "    ld.acquire.gpu.global.u32 %r11, [%rd4];\n"
    "    xor.b32 %r12, %r11, %r10;\n"
    "    and.b32 %r12, %r12, 0x80000000;\n"
    "    setp.eq.u32 %p3, %r12, 0;\n"
    "    @%p3 bra SPIN;\n"
    "    fence.acq_rel.gpu;\n"
    "WAITED:\n"
    "    bar.sync 0;\n"
    "    add.u32 %r13, %r5, %r2;\n"
    "    rem.u32 %r14, %r13, %r6;\n"
    "    mul.wide.u32 %rd8, %r14, 4;\n"
    "    add.s64 %rd9, %rd2, %rd8;\n"
    "    ld.global.f32 %f3, [%rd9];\n"
    "    add.rn.f32 %f4, %f3, 0f3F800000;\n"
    "    add.s64 %rd10, %rd3, %rd5;\n"
    "    st.global.f32 [%rd10], %f4;\n"
    "    ret;\n"
    "}\n";

/* Line 8 reads a register that was never declared. */
static const char broken_ptx[] = ".version 8.0\n"
                                 ".target sm_90\n"
                                 ".address_size 64\n"
                                 ".visible .entry broken(.param .u64 pa)\n"
                                 "{\n"
                                 "    .reg .b32 %r<4>;\n"
                                 "    mov.u32 %r1, %tid.x;\n"
                                 "    add.u32 %r2, %r1, %r77;\n"
                                 "    ret;\n"
                                 "}\n";

typedef struct Gpu {
    astitch_context *ctx;
    CudaDevice *dev;
    CudaModule *mod;
} Gpu;

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1), never all zeros. */
static float *rnd_array(size_t n)
{
    float *a = malloc(n * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++)
        a[i] = (float)((double)(rng_next() >> 11) / 4503599627370496.0 - 1.0);
    return a;
}

static void expect_ok(const Gpu *g, astitch_status st)
{
    if (st != ASTITCH_OK)
        print_error("%s: %s\n", astitch_status_name(st), astitch_last_error(g->ctx));
    assert_int_equal(st, ASTITCH_OK);
}

/* Expects status want and a message containing each of the given strings (NULL-terminated). */
static void expect_error(const Gpu *g, astitch_status st, astitch_status want, ...)
{
    const char *msg = astitch_last_error(g->ctx);
    if (st != want)
        print_error("status %s, expected %s; message: %s\n", astitch_status_name(st),
                    astitch_status_name(want), msg);
    assert_int_equal(st, want);
    va_list ap;
    va_start(ap, want);
    const char *part;
    while ((part = va_arg(ap, const char *)) != NULL) {
        if (!strstr(msg, part))
            print_error("message \"%s\" lacks \"%s\"\n", msg, part);
        assert_non_null(strstr(msg, part));
    }
    va_end(ap);
    printf("# expected error: %s\n", msg);
}

/* Exact float comparison: every kernel here does one correctly rounded operation per value. */
static void expect_equal(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            print_error("%s[%zu] = %.9g, expected %.9g\n", what, i, got[i], want[i]);
            fail();
        }
}

static void test_device_model(void **state)
{
    const Gpu *g = *state;
    const CudaDeviceInfo *in = &g->dev->info;
    printf("# %s: sm_%d%d, %d SMs, %d threads/block, %d regs/SM, shared %zu/%zu/%zu "
           "(block/opt-in/SM), %zu MiB\n",
           in->name, in->cc_major, in->cc_minor, in->sm_count, in->max_threads_per_block,
           in->regs_per_sm, in->shared_per_block, in->shared_per_block_optin, in->shared_per_sm,
           in->total_memory >> 20);
    assert_true(in->name[0] != '\0');
    assert_true(in->cc_major >= 3);
    assert_true(in->sm_count >= 1);
    assert_int_equal(in->warp_size, 32);
    assert_true(in->max_threads_per_block >= 256);
    assert_true(in->max_threads_per_block <= in->max_threads_per_sm);
    assert_true(in->max_blocks_per_sm >= 1);
    assert_true(in->regs_per_block >= 16384 && in->regs_per_block <= in->regs_per_sm);
    assert_int_equal(in->shared_per_block, 48 << 10);
    assert_true(in->shared_per_block_optin >= in->shared_per_block);
    assert_true(in->shared_per_sm >= in->shared_per_block_optin);
    assert_true(in->total_memory > ((size_t)1 << 30));

    astitch_device m;
    cuda_device_model(g->dev, &m);
    assert_int_equal(m.sm_version, in->cc_major * 10 + in->cc_minor);
    assert_int_equal(m.sm_count, in->sm_count);
    assert_int_equal(m.regs_per_sm, in->regs_per_sm);
    assert_int_equal(m.shared_per_block, (int64_t)in->shared_per_block_optin);
    assert_int_equal(strncmp(m.name, in->name, sizeof m.name - 1), 0);

    size_t free_bytes = 0, total = 0;
    expect_ok(g, cuda_mem_info(g->ctx, g->dev, &free_bytes, &total));
    assert_true(free_bytes > 0 && free_bytes <= total);
    assert_true(total <= in->total_memory);
}

/* A buffer allocated by another user of the primary context (as a framework would, straight
 * through the driver) works in our launches, on our stream. */
static void test_vector_add(void **state)
{
    const Gpu *g = *state;
    const CudaDriver *d = &g->dev->drv;
    uint32_t n = 100000 + (uint32_t)(rng_next() % 5000);
    size_t bytes = n * sizeof(float);
    float *a = rnd_array(n), *b = rnd_array(n), *c = malloc(bytes), *want = malloc(bytes);
    assert_non_null(c);
    assert_non_null(want);
    for (uint32_t i = 0; i < n; i++)
        want[i] = a[i] + b[i];

    CudaKernel k;
    expect_ok(g, cuda_kernel_get(g->ctx, g->mod, "vadd", 256, 0, &k));
    assert_true(k.regs > 0 && k.blocks_per_sm >= 1);
    assert_int_equal(k.max_coresident, k.blocks_per_sm * g->dev->info.sm_count);

    CUdeviceptr da, db, dc = 0;
    expect_ok(g, cuda_alloc(g->ctx, g->dev, bytes, &da));
    expect_ok(g, cuda_alloc(g->ctx, g->dev, bytes, &db));
    assert_int_equal(d->CtxPushCurrent(g->dev->primary), CUDA_SUCCESS);
    assert_int_equal(d->MemAlloc(&dc, bytes), CUDA_SUCCESS);
    CUcontext popped;
    assert_int_equal(d->CtxPopCurrent(&popped), CUDA_SUCCESS);
    assert_ptr_equal(popped, g->dev->primary);

    CUstream s;
    expect_ok(g, cuda_stream_create(g->ctx, g->dev, &s));
    expect_ok(g, cuda_copy_to_device(g->ctx, g->dev, da, a, bytes, s));
    expect_ok(g, cuda_copy_to_device(g->ctx, g->dev, db, b, bytes, s));
    expect_ok(g, cuda_memset_u32(g->ctx, g->dev, dc, 0x7fc00000u, n, s));
    void *args[] = {&da, &db, &dc, &n};
    CudaLaunch l = {.kernel = &k, .grid = (n + 255) / 256, .args = args, .stream = s};
    expect_ok(g, cuda_launch(g->ctx, g->dev, &l));
    expect_ok(g, cuda_copy_to_host(g->ctx, g->dev, c, dc, bytes, s));
    expect_ok(g, cuda_stream_sync(g->ctx, g->dev, s));
    expect_equal(c, want, n, "c");

    cuda_stream_destroy(g->dev, s);
    cuda_free(g->dev, da);
    cuda_free(g->dev, db);
    cuda_free(g->dev, dc);
    free(a);
    free(b);
    free(c);
    free(want);
}

/* Dynamic shared memory above the 48 KiB default needs the per-function opt-in. */
static void test_dynamic_shared(void **state)
{
    const Gpu *g = *state;
    const CudaDeviceInfo *in = &g->dev->info;
    int block = 256;
    uint32_t blocks = 64 + (uint32_t)(rng_next() % 64);
    size_t n = (size_t)blocks * (size_t)block, bytes = n * sizeof(float);
    size_t dyn = in->shared_per_block_optin > (96u << 10) ? (96u << 10) : in->shared_per_block_optin;
    assert_true(dyn > in->shared_per_block);
    uint32_t off = (uint32_t)(dyn - (size_t)block * sizeof(float));

    CudaKernel k;
    expect_ok(g, cuda_kernel_get(g->ctx, g->mod, "shared_reverse", block, dyn, &k));
    expect_error(g, cuda_kernel_get(g->ctx, g->mod, "shared_reverse", block,
                                    in->shared_per_block_optin + 16, &k),
                 ASTITCH_ERR_UNSUPPORTED, "shared_reverse", "shared memory", NULL);
    expect_ok(g, cuda_kernel_get(g->ctx, g->mod, "shared_reverse", block, dyn, &k));
    assert_int_equal(k.dynamic_shared, dyn);

    float *x = rnd_array(n), *y = malloc(bytes), *want = malloc(bytes);
    assert_non_null(y);
    assert_non_null(want);
    for (size_t i = 0; i < n; i++)
        want[i] = x[i - i % (size_t)block + (size_t)block - 1 - i % (size_t)block];
    CUdeviceptr dx, dy;
    expect_ok(g, cuda_alloc(g->ctx, g->dev, bytes, &dx));
    expect_ok(g, cuda_alloc(g->ctx, g->dev, bytes, &dy));
    expect_ok(g, cuda_copy_to_device(g->ctx, g->dev, dx, x, bytes, NULL));
    void *args[] = {&dx, &dy, &off};
    CudaLaunch l = {.kernel = &k, .grid = blocks, .args = args};
    expect_ok(g, cuda_launch(g->ctx, g->dev, &l));
    expect_ok(g, cuda_copy_to_host(g->ctx, g->dev, y, dy, bytes, NULL));
    expect_ok(g, cuda_stream_sync(g->ctx, g->dev, NULL));
    expect_equal(y, want, n, "y");
    cuda_free(g->dev, dx);
    cuda_free(g->dev, dy);
    free(x);
    free(y);
    free(want);
}

static void test_jit_error_log(void **state)
{
    const Gpu *g = *state;
    CudaModule *m = (CudaModule *)1;
    /* unset: nvJitLink fails, then the driver's JIT, whose error stands, says why; "driver"
     * the same; "nvjitlink": nvJitLink's log */
    expect_error(g, cuda_module_load(g->ctx, g->dev, broken_ptx, "broken", &m),
                 ASTITCH_ERR_COMPILE, "module 'broken'", "cuModuleLoadDataEx", "%r77", NULL);
    assert_null(m);
    assert_int_equal(astitch_context_set_option(g->ctx, "ptx_jit", "driver"), ASTITCH_OK);
    expect_error(g, cuda_module_load(g->ctx, g->dev, broken_ptx, "broken", &m),
                 ASTITCH_ERR_COMPILE, "module 'broken'", "cuModuleLoadDataEx", "%r77", NULL);
    if (nvjitlink_path()) {
        m = (CudaModule *)1;
        assert_int_equal(astitch_context_set_option(g->ctx, "ptx_jit", "nvjitlink"), ASTITCH_OK);
        expect_error(g, cuda_module_load(g->ctx, g->dev, broken_ptx, "broken", &m),
                     ASTITCH_ERR_COMPILE, "module 'broken': nvJitLink (", "nvJitLink error log",
                     "%r77", NULL);
        assert_null(m);
    }
    assert_int_equal(astitch_context_set_option(g->ctx, "ptx_jit", NULL), ASTITCH_OK);

    CudaKernel k;
    expect_error(g, cuda_kernel_get(g->ctx, g->mod, "no_such_kernel", 128, 0, &k),
                 ASTITCH_ERR_DEVICE, "cuModuleGetFunction('no_such_kernel')",
                 "CUDA_ERROR_NOT_FOUND", NULL);
    assert_null(k.fn);
}

/* The flip-bit grid barrier at exactly the co-resident capacity, twice with fresh counters;
 * one block more is refused by our check and by the driver, without hanging. */
static void test_cooperative(void **state)
{
    const Gpu *g = *state;
    if (!g->dev->info.cooperative_launch)
        skip();
    int block = 256;
    CudaKernel k;
    expect_ok(g, cuda_kernel_get(g->ctx, g->mod, "grid_rotate", block, 0, &k));
    unsigned grid = (unsigned)k.max_coresident;
    size_t n = (size_t)grid * (size_t)block, bytes = n * sizeof(float);
    printf("# grid_rotate: %d regs, %d blocks/SM, grid %u x %d\n", k.regs, k.blocks_per_sm, grid,
           block);

    CudaWorkspace ws;
    cuda_workspace_init(&ws, g->dev);
    expect_ok(g, cuda_workspace_reserve(g->ctx, &ws, bytes, 1));
    assert_true(ws.scratch != 0 && ws.scratch_bytes >= bytes && ws.ncounters == 1);
    CUdeviceptr dx, dy;
    expect_ok(g, cuda_alloc(g->ctx, g->dev, bytes, &dx));
    expect_ok(g, cuda_alloc(g->ctx, g->dev, bytes, &dy));
    float *y = malloc(bytes), *want = malloc(bytes);
    assert_non_null(y);
    assert_non_null(want);
    CUstream s;
    expect_ok(g, cuda_stream_create(g->ctx, g->dev, &s));
    for (int run = 0; run < 2; run++) {
        float *x = rnd_array(n);
        for (size_t i = 0; i < n; i++)
            want[i] = 2.0f * x[(i + (size_t)block) % n] + 1.0f;
        expect_ok(g, cuda_copy_to_device(g->ctx, g->dev, dx, x, bytes, s));
        expect_ok(g, cuda_workspace_clear_counters(g->ctx, &ws, 1, s));
        void *args[] = {&dx, &ws.scratch, &dy, &ws.counters};
        CudaLaunch l = {.kernel = &k, .grid = grid, .args = args, .cooperative = true,
                        .stream = s};
        expect_ok(g, cuda_launch(g->ctx, g->dev, &l));
        uint32_t counter = 0;
        expect_ok(g, cuda_copy_to_host(g->ctx, g->dev, y, dy, bytes, s));
        expect_ok(g, cuda_copy_to_host(g->ctx, g->dev, &counter, ws.counters, 4, s));
        expect_ok(g, cuda_stream_sync(g->ctx, g->dev, s));
        expect_equal(y, want, n, "y");
        assert_int_equal(counter, 0x80000000u); /* one barrier: the top bit flipped once */
        free(x);
    }

    void *args[] = {&dx, &ws.scratch, &dy, &ws.counters};
    CudaLaunch big = {.kernel = &k, .grid = grid + 1, .args = args, .cooperative = true,
                      .stream = s};
    expect_error(g, cuda_launch(g->ctx, g->dev, &big), ASTITCH_ERR_UNSUPPORTED, "grid_rotate",
                 "co-resident", NULL);
    /* The driver agrees with the occupancy figure: one block more is too large. */
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr.value.cooperative = 1;
    CUlaunchConfig cfg = {.gridDimX = grid + 1, .gridDimY = 1, .gridDimZ = 1,
                          .blockDimX = (unsigned)block, .blockDimY = 1, .blockDimZ = 1,
                          .hStream = s, .attrs = &attr, .numAttrs = 1};
    const CudaDriver *d = &g->dev->drv;
    assert_int_equal(d->CtxPushCurrent(g->dev->primary), CUDA_SUCCESS);
    CUresult r = d->LaunchKernelEx(&cfg, k.fn, args, NULL);
    CUcontext popped;
    d->CtxPopCurrent(&popped);
    assert_int_equal(r, CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    expect_error(g, cuda_fail(g->ctx, d, r, "launch"), ASTITCH_ERR_UNSUPPORTED,
                 "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", NULL);
    /* The context is still usable. */
    expect_ok(g, cuda_stream_sync(g->ctx, g->dev, s));

    cuda_stream_destroy(g->dev, s);
    cuda_workspace_release(&ws);
    assert_int_equal(ws.scratch, 0);
    cuda_free(g->dev, dx);
    cuda_free(g->dev, dy);
    free(y);
    free(want);
}

/* An allocation far beyond the device's memory fails with ERR_MEMORY naming the size, takes
 * nothing, and leaves the device usable; a workspace that cannot grow stays consistent. */
static void test_out_of_memory(void **state)
{
    const Gpu *g = *state;
    size_t before = 0, after = 0, total = 0;
    expect_ok(g, cuda_mem_info(g->ctx, g->dev, &before, &total));
    size_t absurd = g->dev->info.total_memory * 4;
    char bytes_text[32];
    snprintf(bytes_text, sizeof bytes_text, "%zu bytes", absurd);
    CUdeviceptr p = 1;
    expect_error(g, cuda_alloc(g->ctx, g->dev, absurd, &p), ASTITCH_ERR_MEMORY, bytes_text,
                 "CUDA_ERROR_OUT_OF_MEMORY", NULL);
    assert_int_equal(p, 0);

    CudaWorkspace ws;
    cuda_workspace_init(&ws, g->dev);
    expect_ok(g, cuda_workspace_reserve(g->ctx, &ws, 1 << 20, 4));
    expect_error(g, cuda_workspace_reserve(g->ctx, &ws, absurd, 4), ASTITCH_ERR_MEMORY,
                 bytes_text, NULL);
    assert_int_equal(ws.scratch, 0);
    assert_int_equal(ws.scratch_bytes, 0);
    assert_int_equal(ws.ncounters, 4);
    expect_ok(g, cuda_workspace_reserve(g->ctx, &ws, 1 << 20, 8));
    assert_true(ws.scratch != 0 && ws.ncounters == 8);
    expect_ok(g, cuda_workspace_clear_counters(g->ctx, &ws, 8, NULL));
    expect_error(g, cuda_workspace_clear_counters(g->ctx, &ws, 9, NULL), ASTITCH_ERR_ARGUMENT,
                 "9 counters", NULL);
    cuda_workspace_release(&ws);

    expect_ok(g, cuda_mem_info(g->ctx, g->dev, &after, &total));
    /* Whatever the failed calls took is back (the driver may round by a page or two). */
    if (after + (4u << 20) < before)
        print_error("free device memory fell from %zu to %zu bytes\n", before, after);
    assert_true(after + (4u << 20) >= before);
    CUdeviceptr q;
    expect_ok(g, cuda_alloc(g->ctx, g->dev, 1 << 20, &q));
    assert_true(q != 0);
    cuda_free(g->dev, q);
}

static void test_events(void **state)
{
    const Gpu *g = *state;
    CUevent a, b;
    expect_ok(g, cuda_event_create(g->ctx, g->dev, &a));
    expect_ok(g, cuda_event_create(g->ctx, g->dev, &b));
    CUdeviceptr p;
    size_t words = (size_t)1 << 24;
    expect_ok(g, cuda_alloc(g->ctx, g->dev, words * 4, &p));
    expect_ok(g, cuda_event_record(g->ctx, g->dev, a, NULL));
    uint32_t v = (uint32_t)rng_next();
    expect_ok(g, cuda_memset_u32(g->ctx, g->dev, p, v, words, NULL));
    expect_ok(g, cuda_event_record(g->ctx, g->dev, b, NULL));
    float ms = -1.0f;
    expect_ok(g, cuda_event_elapsed(g->ctx, g->dev, a, b, &ms));
    assert_true(ms >= 0.0f);
    uint32_t last = ~v;
    expect_ok(g, cuda_copy_to_host(g->ctx, g->dev, &last, p + (words - 1) * 4, 4, NULL));
    expect_ok(g, cuda_stream_sync(g->ctx, g->dev, NULL));
    assert_int_equal(last, v);
    cuda_free(g->dev, p);
    cuda_event_destroy(g->dev, a);
    cuda_event_destroy(g->dev, b);
}

static int setup(void **state)
{
    Gpu *g = calloc(1, sizeof *g);
    if (!g || astitch_context_create(&g->ctx) != ASTITCH_OK)
        return -1;
    if (cuda_device_open(g->ctx, 0, &g->dev) != ASTITCH_OK ||
        cuda_module_load(g->ctx, g->dev, kernels_ptx, "test_kernels", &g->mod) != ASTITCH_OK) {
        fprintf(stderr, "setup: %s\n", astitch_last_error(g->ctx));
        return -1;
    }
    printf("# JIT log:\n# %s\n", cuda_module_log(g->mod));
    *state = g;
    return 0;
}

static int teardown(void **state)
{
    Gpu *g = *state;
    if (!g)
        return 0;
    cuda_module_unload(g->mod);
    cuda_device_close(g->dev);
    astitch_context_destroy(g->ctx);
    free(g);
    return 0;
}

int main(void)
{
    astitch_context *ctx;
    CudaDevice *dev;
    if (astitch_context_create(&ctx) != ASTITCH_OK)
        return 1;
    astitch_status st = cuda_device_open(ctx, 0, &dev);
    if (st == ASTITCH_ERR_NO_DEVICE) {
        printf("# SKIP: %s\n", astitch_last_error(ctx));
        astitch_context_destroy(ctx);
        return 77;
    }
    cuda_device_close(dev);
    astitch_context_destroy(ctx);

    const char *env = getenv("ASTITCH_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
    rng_state = seed;
    printf("# seed %llu (ASTITCH_TEST_SEED replays it)\n", (unsigned long long)seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_model),   cmocka_unit_test(test_vector_add),
        cmocka_unit_test(test_dynamic_shared), cmocka_unit_test(test_jit_error_log),
        cmocka_unit_test(test_cooperative),    cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_events),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
