/*
 * The NVPTX and host lowerings of kernel modules, on kernels built by hand with the LLVM C API
 * through the primitives of prims.h. Each kernel is compiled for NVPTX and assembled by
 * `ptxas -arch=sm_90 -v` when the toolkit has one (within its register bound, no spills), and
 * compiled for the host and run by the SIMT runtime against values computed here from fresh
 * random inputs (seed printed; ASTITCH_TEST_SEED replays one).
 */
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

#include "codegen/codegen.h"
#include "runtime/simt.h"
#include "test_kernels.h"

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int rnd_range(int lo, int hi) { return lo + (int)(rng_next() % (uint64_t)(hi - lo + 1)); }

/* Uniform in [-1, 1). */
static float rnd_f32(void)
{
    return (float)((double)(rng_next() >> 11) / 4503599627370496.0 - 1.0);
}

static float *rnd_array(size_t n)
{
    float *a = malloc(n * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++)
        a[i] = rnd_f32();
    return a;
}

/* Output buffers start as NaN, so a value the kernel never wrote cannot pass. */
static float *nan_array(size_t n)
{
    float *a = malloc(n * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++)
        a[i] = NAN;
    return a;
}

static void assert_close(double got, double want, double tol, const char *what, long i)
{
    if (!(fabs(got - want) <= tol)) {
        print_error("%s[%ld] = %.9g, expected %.9g (tolerance %.3g)\n", what, i, got, want, tol);
        fail();
    }
}

/* ---- the two targets ---------------------------------------------------------------------- */

/* Fails, showing the PTX, unless text has (or, with want false, lacks) s. */
static void expect_ptx(const char *ptx, const char *kernel, const char *s, bool want)
{
    if ((strstr(ptx, s) != NULL) != want) {
        fprintf(stderr, "%s\n", ptx);
        print_error("PTX of '%s' %s '%s'\n", kernel, want ? "lacks" : "has", s);
        fail();
    }
}

/* Lowers m to PTX for sm_90 with the given bounds, checks the text, and assembles it. */
static void check_nvptx(astitch_context *ctx, LLVMModuleRef m, const char *kernel, int maxntid,
                        int maxnreg, const char *const *must)
{
    NvptxKernel k = {kernel, maxntid, maxnreg, 0};
    NvptxOptions o = {.sm = 90, .kernel = &k, .nkernel = 1};
    char *ptx = NULL, want[64];
    astitch_status st = nvptx_compile(ctx, m, &o, &ptx);
    if (st)
        print_error("nvptx_compile: %s\n", astitch_last_error(ctx));
    assert_int_equal(st, ASTITCH_OK);
    snprintf(want, sizeof want, ".entry %s(", kernel);
    expect_ptx(ptx, kernel, want, true);
    snprintf(want, sizeof want, ".maxntid %d,", maxntid);
    expect_ptx(ptx, kernel, want, true);
    snprintf(want, sizeof want, ".maxnreg %d", maxnreg);
    expect_ptx(ptx, kernel, want, true);
    expect_ptx(ptx, kernel, ".extern .func", false); /* every primitive and math call resolved */
    expect_ptx(ptx, kernel, "__nvvm_reflect", false);
    for (int i = 0; must && must[i]; i++)
        expect_ptx(ptx, kernel, must[i], true);
    PtxasReport r;
    st = ptxas_run(ctx, ptx, 90, &r);
    if (st == ASTITCH_ERR_UNSUPPORTED) {
        printf("# %s: ptxas not found, assembly check skipped\n", kernel);
        free(ptx);
        return;
    }
    if (st)
        print_error("%s\n%s\n", astitch_last_error(ctx), ptx);
    assert_int_equal(st, ASTITCH_OK);
    const PtxasKernel *pk = ptxas_kernel(&r, kernel);
    assert_non_null(pk);
    printf("# %s: %d registers (bound %d), %d spill bytes\n", kernel, pk->registers, maxnreg,
           pk->spill_store_bytes + pk->spill_load_bytes);
    assert_true(pk->registers > 0 && pk->registers <= maxnreg);
    assert_int_equal(pk->spill_store_bytes, 0);
    assert_int_equal(pk->spill_load_bytes, 0);
    ptxas_report_free(&r);
    free(ptx);
}

/* Compiles m for the host and runs kernel over grid x block with pointer arguments. */
static void run_host(astitch_context *ctx, LLVMModuleRef m, const char *kernel, void **args,
                     int nargs, int grid, int block, size_t shared, bool cooperative)
{
    HostModule *hm = NULL;
    astitch_status st = host_compile(ctx, m, simt_host_primitives(), &hm);
    if (st)
        print_error("host_compile: %s\n", astitch_last_error(ctx));
    assert_int_equal(st, ASTITCH_OK);
    void *fn = host_lookup(hm, ctx, kernel);
    assert_non_null(fn);
    ffi_type *types[16];
    void *values[16];
    for (int i = 0; i < nargs; i++) {
        types[i] = &ffi_type_pointer;
        values[i] = &args[i];
    }
    SimtLaunch l = {.fn = (void (*)(void))fn, .arg_types = types, .arg_values = values,
                    .nargs = nargs, .grid = grid, .block = block, .shared_bytes = shared,
                    .cooperative = cooperative, .name = kernel};
    st = simt_launch(ctx, &l);
    if (st)
        print_error("simt_launch: %s\n", astitch_last_error(ctx));
    assert_int_equal(st, ASTITCH_OK);
    host_module_destroy(hm);
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_vector_add(void **state)
{
    astitch_context *ctx = *state;
    LLVMContextRef c = LLVMContextCreate();
    int n = rnd_range(1, 5000), grid = rnd_range(1, 9), block = 32 * rnd_range(1, 8);
    static const char *const must[] = {"ld.global.f32", "st.global.f32", NULL};
    check_nvptx(ctx, build_vector_add(c, n), "vadd", 256, 32, must);

    float *a = rnd_array((size_t)n), *b = rnd_array((size_t)n), *out = nan_array((size_t)n);
    void *args[] = {a, b, out};
    run_host(ctx, build_vector_add(c, n), "vadd", args, 3, grid, block, 0, false);
    for (int i = 0; i < n; i++)
        assert_close(out[i], a[i] + b[i], 0, "vadd", i);
    free(a), free(b), free(out);
    LLVMContextDispose(c);
}

static void test_block_reduce(void **state)
{
    astitch_context *ctx = *state;
    LLVMContextRef c = LLVMContextCreate();
    int rows = rnd_range(2, 12), ncol = rnd_range(1, 3000), block = 32 << rnd_range(0, 3);
    static const char *const must[] = {"shfl.sync.down.b32", "shfl.sync.bfly.b32", ", 31, -1;",
                                       "bar.sync",
                                       "atom.global.add.f32", "atom.global.cas.b32",
                                       "max.NaN.f32", "min.NaN.f32", NULL};
    check_nvptx(ctx, build_block_reduce(c, ncol), "reduce", 256, 64, must);

    size_t nel = (size_t)rows * (size_t)ncol;
    float *in = rnd_array(nel), *out = nan_array((size_t)rows);
    float total = 0, maxv = -INFINITY, minv = INFINITY;
    int32_t count = 0, claim = 0, *seen = malloc(sizeof *seen * (size_t)rows);
    assert_non_null(seen);
    void *args[] = {in, out, &total, &maxv, &minv, &count, &claim, seen};
    run_host(ctx, build_block_reduce(c, ncol), "reduce", args, 8, rows, block,
             REDUCE_SHARED_BYTES, false);

    int32_t positive = 0, winners = 0;
    double sum_out = 0, abs_out = 0;
    float want_max = -INFINITY, want_min = INFINITY;
    for (int r = 0; r < rows; r++) {
        double s = 0, abs_s = 0;
        for (int j = 0; j < ncol; j++) {
            float x = in[(size_t)r * (size_t)ncol + (size_t)j];
            s += x, abs_s += fabs(x), positive += x > 0;
        }
        assert_close(out[r], s, 1e-6 * abs_s + 1e-6, "row sum", r);
        sum_out += out[r], abs_out += fabs(out[r]);
        want_max = fmaxf(want_max, out[r]), want_min = fminf(want_min, out[r]);
        winners += seen[r] == 0;
        assert_true(seen[r] == 0 || seen[r] == claim);
    }
    assert_close(total, sum_out, 1e-6 * abs_out + 1e-6, "total", 0);
    assert_true(maxv == want_max && minv == want_min); /* one of the row sums, exactly */
    assert_int_equal(count, positive);
    assert_int_equal(winners, 1); /* exactly one block saw the claim free, and took it */
    assert_true(claim >= 1 && claim <= rows && seen[claim - 1] == 0);
    free(in), free(out), free(seen);
    LLVMContextDispose(c);
}

static void test_grid_barrier(void **state)
{
    astitch_context *ctx = *state;
    LLVMContextRef c = LLVMContextCreate();
    int grid = rnd_range(2, 8), block = 32 << rnd_range(0, 2), t = grid * block;
    static const char *const must[] = {"fence.acq_rel.gpu", "atom.global.add.u32",
                                       "ld.volatile.global.u32", "bar.sync", NULL};
    check_nvptx(ctx, build_grid_phases(c), "phases", 128, 32, must);

    float *in = rnd_array((size_t)t), *tmp = nan_array((size_t)t), *out = nan_array((size_t)t);
    uint32_t counter = 0;
    void *args[] = {in, tmp, out, &counter};
    run_host(ctx, build_grid_phases(c), "phases", args, 4, grid, block, 0, true);
    for (int i = 0; i < t; i++) {
        float t1 = in[(i + 1) % t] * 2.0f + 1.0f, t2 = in[t - 1 - i] * 2.0f + 1.0f;
        assert_close(out[i], t1 - 0.5f * t2, 1e-6, "phase 2", i);
    }
    for (int i = 0; i < t; i++)
        assert_close(tmp[i], out[(i + block) % t], 0, "phase 3", i);
    free(in), free(tmp), free(out);
    LLVMContextDispose(c);
}

static void test_math(void **state)
{
    astitch_context *ctx = *state;
    LLVMContextRef c = LLVMContextCreate();
    int n = rnd_range(1, 4000);
    check_nvptx(ctx, build_math(c, n), "math", 256, 64, NULL);

    float *x = rnd_array((size_t)n), *y = rnd_array((size_t)n);
    float *out = nan_array((size_t)n), *out2 = nan_array((size_t)n);
    for (int i = 0; i < n; i++)
        x[i] *= 8.0f;
    void *args[] = {x, y, out, out2};
    run_host(ctx, build_math(c, n), "math", args, 4, rnd_range(1, 4), 64, 0, false);
    for (int i = 0; i < n; i++) {
        float want = expf(x[i]) + tanhf(y[i]);
        assert_close(out[i], want, 1e-6 * fabsf(want), "exp+tanh", i);
        float want2 = (float)pow((double)(x[i] * x[i] + 0.5f), (double)y[i]);
        assert_close(out2[i], want2, 1e-6 * fabsf(want2), "pow", i);
    }
    free(x), free(y), free(out), free(out2);
    LLVMContextDispose(c);
}

static void test_malformed(void **state)
{
    astitch_context *ctx = *state;
    LLVMContextRef c = LLVMContextCreate();
    NvptxKernel k = {"bad", 0, 0, 0};
    NvptxOptions o = {.sm = 90, .kernel = &k, .nkernel = 1};
    char *ptx = NULL;
    assert_int_equal(nvptx_compile(ctx, build_malformed(c), &o, &ptx), ASTITCH_ERR_COMPILE);
    assert_null(ptx);
    assert_non_null(strstr(astitch_last_error(ctx), "does not have terminator"));

    HostModule *hm = NULL;
    assert_int_equal(host_compile(ctx, build_malformed(c), simt_host_primitives(), &hm),
                     ASTITCH_ERR_COMPILE);
    assert_null(hm);
    assert_non_null(strstr(astitch_last_error(ctx), "does not have terminator"));
    LLVMContextDispose(c);
}

static void test_unresolved(void **state)
{
    astitch_context *ctx = *state;
    LLVMContextRef c = LLVMContextCreate();
    NvptxKernel k = {"calls", 0, 0, 0};
    NvptxOptions o = {.sm = 90, .kernel = &k, .nkernel = 1};
    char *ptx = NULL;
    assert_int_equal(nvptx_compile(ctx, build_unresolved(c), &o, &ptx), ASTITCH_ERR_COMPILE);
    printf("# %s\n", astitch_last_error(ctx));
    assert_non_null(strstr(astitch_last_error(ctx), "__nv_nosuchf"));

    HostModule *hm = NULL;
    assert_int_equal(host_compile(ctx, build_unresolved(c), simt_host_primitives(), &hm),
                     ASTITCH_ERR_COMPILE);
    printf("# %s\n", astitch_last_error(ctx));
    assert_non_null(strstr(astitch_last_error(ctx), "__nv_nosuchf"));

    /* a runtime that gives no thread index: the kernel's call to it is refused by name */
    HostPrimitives partial = *simt_host_primitives();
    partial.tid_x = NULL;
    assert_int_equal(host_compile(ctx, build_vector_add(c, 8), &partial, &hm), ASTITCH_ERR_COMPILE);
    printf("# %s\n", astitch_last_error(ctx));
    assert_non_null(strstr(astitch_last_error(ctx), "astitch_tid_x"));
    assert_int_equal(host_compile(ctx, build_vector_add(c, 8), NULL, &hm), ASTITCH_ERR_ARGUMENT);

    NvptxKernel missing = {"absent", 0, 0, 0};
    o.kernel = &missing;
    assert_int_equal(nvptx_compile(ctx, build_vector_add(c, 8), &o, &ptx), ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(ctx), "'absent'"));

    assert_int_equal(host_compile(ctx, build_vector_add(c, 8), simt_host_primitives(), &hm),
                     ASTITCH_OK);
    assert_null(host_lookup(hm, ctx, "absent"));
    assert_non_null(host_lookup(hm, ctx, "vadd"));
    host_module_destroy(hm);
    LLVMContextDispose(c);
}

static void test_ptxas_parse(void **state)
{
    (void)state;
    static const char log[] =
        "ptxas info    : 0 bytes gmem\n"
        "ptxas info    : Compiling entry function 'k1' for 'sm_90'\n"
        "ptxas info    : Function properties for k1\n"
        "    24 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Used 40 registers, used 1 barriers, 512 bytes smem\n"
        "ptxas info    : Function properties for helper\n"
        "    16 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Compiling entry function 'k2' for 'sm_80'\n"
        "ptxas info    : Function properties for k2\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 7 registers, 372 bytes cmem[0]\n";
    PtxasReport r = {0};
    assert_true(ptxas_parse(log, &r));
    assert_int_equal(r.nkernel, 2);
    const PtxasKernel *a = ptxas_kernel(&r, "k1"), *b = ptxas_kernel(&r, "k2");
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(a->registers, 40);
    assert_int_equal(a->stack_bytes, 24);
    assert_int_equal(a->spill_store_bytes, 8);
    assert_int_equal(a->spill_load_bytes, 12);
    assert_int_equal(a->shared_bytes, 512);
    assert_int_equal(b->registers, 7);
    assert_int_equal(b->shared_bytes, 0);
    assert_int_equal(b->spill_store_bytes, 0);
    assert_null(ptxas_kernel(&r, "helper"));
    ptxas_report_free(&r);
}

/* The host binds every primitive and every math function, under both names. */
static void test_host_symbols(void **state)
{
    (void)state;
    HostSymbol s[HOST_SYMBOLS_MAX];
    int n = host_symbols(simt_host_primitives(), s);
    for (int id = 0; id < PRIM_COUNT + 2 * MATH_COUNT; id++) {
        char name[32];
        if (id < PRIM_COUNT)
            snprintf(name, sizeof name, "%s", prim_name((PrimId)id));
        else
            math_name(name, (MathId)((id - PRIM_COUNT) / 2), (id - PRIM_COUNT) % 2);
        int i = 0;
        while (i < n && strcmp(s[i].name, name) != 0)
            i++;
        if (i == n)
            print_error("no host function for '%s'\n", name);
        assert_true(i < n && s[i].fn);
    }
}

static int setup(void **state)
{
    astitch_context *ctx;
    if (astitch_context_create(&ctx) != ASTITCH_OK)
        return -1;
    *state = ctx;
    return 0;
}

static int teardown(void **state)
{
    astitch_context_destroy(*state);
    return 0;
}

int main(void)
{
    const char *env = getenv("ASTITCH_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
    rng_state = seed;
    printf("# seed %llu (ASTITCH_TEST_SEED replays it)\n", (unsigned long long)seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector_add),
        cmocka_unit_test(test_block_reduce),
        cmocka_unit_test(test_grid_barrier),
        cmocka_unit_test(test_math),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_unresolved),
        cmocka_unit_test(test_ptxas_parse),
        cmocka_unit_test(test_host_symbols),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
