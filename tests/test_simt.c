/*
 * The host SIMT runtime with hand-written kernels that call its primitives: grid indexing,
 * block barriers with shared memory, warp shuffles, grid barriers, atomics, and every kernel
 * error it reports instead of hanging. Inputs are random (seed printed; ASTITCH_TEST_SEED
 * replays one); expected values are computed here, sequentially.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/simt.h"

static uint64_t rng_state;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [-1, 1). */
static float rnd_f32(void) { return (float)((double)(rng_next() >> 11) / 4503599627370496.0 - 1.0); }

static int32_t rnd_below(int32_t n) { return (int32_t)(rng_next() % (uint64_t)n); }

static float *rnd_array(size_t n)
{
    float *a = malloc(n * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++)
        a[i] = rnd_f32();
    return a;
}

static float *nan_array(size_t n)
{
    float *a = malloc(n * sizeof *a);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++)
        a[i] = NAN;
    return a;
}

static void assert_close(double got, double want, double scale, const char *what, long idx)
{
    double tol = 1e-5 * scale + 1e-6;
    if (!(fabs(got - want) <= tol)) {
        print_error("%s[%ld] = %.9g, expected %.9g (tolerance %.3g)\n", what, idx, got, want, tol);
        fail();
    }
}

/* Launches fn over grid x block with the given argument types and value pointers. */
static astitch_status launch(astitch_context *ctx, const char *name, void (*fn)(void), int nargs,
                             ffi_type **types, void **values, int32_t grid, int32_t block,
                             size_t shared, bool cooperative)
{
    SimtLaunch l = {.fn = fn, .arg_types = types, .arg_values = values, .nargs = nargs,
                    .grid = grid, .block = block, .shared_bytes = shared,
                    .cooperative = cooperative, .name = name};
    return simt_launch(ctx, &l);
}

static void expect_ok(astitch_context *ctx, astitch_status st)
{
    if (st != ASTITCH_OK)
        print_error("launch failed: %s: %s\n", astitch_status_name(st), astitch_last_error(ctx));
    assert_int_equal(st, ASTITCH_OK);
}

/* Expects status want and a message containing each of the given strings (NULL-terminated). */
static void expect_error(astitch_context *ctx, astitch_status st, astitch_status want, ...)
{
    const char *msg = astitch_last_error(ctx);
    if (st != want)
        print_error("status %s, expected %s; message: %s\n", astitch_status_name(st),
                    astitch_status_name(want), msg);
    assert_int_equal(st, want);
    va_list ap;
    va_start(ap, want);
    const char *part;
    while ((part = va_arg(ap, const char *)) != NULL) {
        bool found = strstr(msg, part) != NULL;
        if (!found)
            print_error("message \"%s\" lacks \"%s\"\n", msg, part);
        assert_true(found);
    }
    va_end(ap);
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

#define TID astitch_simt_thread_idx_x()
#define BID astitch_simt_block_idx_x()
#define BDIM astitch_simt_block_dim_x()
#define GDIM astitch_simt_grid_dim_x()
#define GID ((int64_t)BID * BDIM + TID)
#define FN(f) ((void (*)(void))(f))

/* ---- indexing and argument passing ------------------------------------------------------ */

static void k_vec_add(const float *a, const float *b, float *c, int64_t n)
{
    int64_t i = GID;
    if (i < n)
        c[i] = a[i] + b[i];
}

static void run_vec_add(astitch_context *ctx, int32_t grid, int32_t block, int64_t n)
{
    float *a = rnd_array((size_t)n), *b = rnd_array((size_t)n), *c = nan_array((size_t)n + 1);
    ffi_type *types[] = {&ffi_type_pointer, &ffi_type_pointer, &ffi_type_pointer,
                         &ffi_type_sint64};
    void *values[] = {&a, &b, &c, &n};
    expect_ok(ctx, launch(ctx, "vec_add", FN(k_vec_add), 4, types, values, grid, block, 0, false));
    for (int64_t i = 0; i < n; i++)
        assert_true(c[i] == a[i] + b[i]);
    assert_true(isnan(c[n])); /* threads past n wrote nothing */
    free(a);
    free(b);
    free(c);
}

static void test_vector_add(void **state)
{
    run_vec_add(*state, 37, 96, 37 * 96 - 17);
    /* Far more threads than a cooperative launch may hold: blocks run one after another. */
    run_vec_add(*state, 2000, 256, 2000 * 256);
}

/* Mixed argument types through libffi: y = alpha * x + beta * y + k. */
static void k_axpby(float alpha, const float *x, double beta, float *y, int32_t k, int64_t n)
{
    int64_t i = GID;
    if (i < n)
        y[i] = alpha * x[i] + (float)beta * y[i] + (float)k;
}

static void test_argument_types(void **state)
{
    astitch_context *ctx = *state;
    int64_t n = 1000;
    float alpha = rnd_f32();
    double beta = rnd_f32();
    int32_t k = rnd_below(1000) - 500;
    float *x = rnd_array((size_t)n), *y = rnd_array((size_t)n);
    float *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++)
        want[i] = alpha * x[i] + (float)beta * y[i] + (float)k;
    ffi_type *types[] = {&ffi_type_float, &ffi_type_pointer, &ffi_type_double,
                         &ffi_type_pointer, &ffi_type_sint32, &ffi_type_sint64};
    void *values[] = {&alpha, &x, &beta, &y, &k, &n};
    expect_ok(ctx, launch(ctx, "axpby", FN(k_axpby), 6, types, values, 8, 128, 0, false));
    for (int64_t i = 0; i < n; i++)
        assert_true(y[i] == want[i]);
    free(x);
    free(y);
    free(want);
}

/* ---- block barrier and shared memory ----------------------------------------------------- */

/* out[block] = sum of x over the block's elements, by a tree in shared memory. */
static void k_block_sum(const float *x, float *out, int64_t n)
{
    float *sh = astitch_simt_shared();
    int32_t tid = TID, bd = BDIM;
    int64_t i = GID;
    sh[tid] = i < n ? x[i] : 0.0f;
    astitch_simt_barrier();
    int32_t half = 1;
    while (half < bd)
        half *= 2;
    for (half /= 2; half > 0; half /= 2) {
        if (tid < half && tid + half < bd)
            sh[tid] += sh[tid + half];
        astitch_simt_barrier();
    }
    if (tid == 0)
        out[BID] = sh[0];
}

static void run_block_sum(astitch_context *ctx, int32_t grid, int32_t block, int64_t n)
{
    float *x = rnd_array((size_t)n), *out = nan_array((size_t)grid);
    ffi_type *types[] = {&ffi_type_pointer, &ffi_type_pointer, &ffi_type_sint64};
    void *values[] = {&x, &out, &n};
    expect_ok(ctx, launch(ctx, "block_sum", FN(k_block_sum), 3, types, values, grid, block,
                          (size_t)block * sizeof(float), false));
    for (int32_t b = 0; b < grid; b++) {
        double want = 0, scale = 0;
        for (int64_t i = (int64_t)b * block; i < n && i < (int64_t)(b + 1) * block; i++) {
            want += x[i];
            scale += fabs(x[i]);
        }
        assert_close(out[b], want, scale, "block_sum", b);
    }
    free(x);
    free(out);
}

static void test_block_reduction(void **state)
{
    run_block_sum(*state, 20, 128, 20 * 128);
    run_block_sum(*state, 9, 96, 9 * 96 - 50); /* not a power of two; a partial last block */
    run_block_sum(*state, 3, 1024, 3 * 1024);
}

/* Locals live on each fiber's own stack across a barrier. */
static void k_stack_keep(int32_t *ok)
{
    volatile int32_t local[600];
    int32_t tid = TID;
    for (int i = 0; i < 600; i++)
        local[i] = tid * 1000 + i;
    astitch_simt_barrier();
    int32_t good = 1;
    for (int i = 0; i < 600; i++)
        good &= local[i] == tid * 1000 + i;
    ok[GID] = good;
}

static void test_stacks_are_private(void **state)
{
    int32_t grid = 3, block = 200, ok[600];
    memset(ok, 0, sizeof ok);
    int32_t *p = ok;
    ffi_type *types[] = {&ffi_type_pointer};
    void *values[] = {&p};
    expect_ok(*state, launch(*state, "stack_keep", FN(k_stack_keep), 1, types, values, grid,
                             block, 0, false));
    for (int i = 0; i < grid * block; i++)
        assert_int_equal(ok[i], 1);
}

/* Shared memory starts as 0xff bytes in every block, is 64-byte aligned, and is the block's
 * own: blocks of a cooperative launch see their own values after a grid barrier. */
static void k_shared(int32_t *first, int32_t *after, int32_t *aligned, int32_t coop)
{
    int32_t *sh = astitch_simt_shared();
    int64_t i = GID;
    first[i] = sh[TID];
    aligned[i] = (int32_t)((uintptr_t)sh % 64);
    astitch_simt_barrier();
    sh[TID] = (int32_t)i;
    if (coop)
        astitch_simt_grid_barrier();
    else
        astitch_simt_barrier();
    after[i] = sh[BDIM - 1 - TID];
}

static void test_shared_memory(void **state)
{
    for (int32_t coop = 0; coop < 2; coop++) {
        int32_t grid = 5, block = 48, n = grid * block;
        int32_t first[240], after[240], aligned[240];
        int32_t *pf = first, *pa = after, *pal = aligned;
        ffi_type *types[] = {&ffi_type_pointer, &ffi_type_pointer, &ffi_type_pointer,
                             &ffi_type_sint32};
        void *values[] = {&pf, &pa, &pal, &coop};
        expect_ok(*state, launch(*state, "shared", FN(k_shared), 4, types, values, grid, block,
                                 (size_t)block * sizeof(int32_t) + (size_t)rnd_below(8), coop));
        for (int32_t i = 0; i < n; i++) {
            int32_t tid = i % block;
            assert_int_equal(first[i], -1);
            assert_int_equal(aligned[i], 0);
            assert_int_equal(after[i], i - tid + block - 1 - tid);
        }
    }
}

/* ---- warp shuffles ----------------------------------------------------------------------- */

/* Tree over shfl_down: lane 0 of each warp holds the warp's sum. */
static void k_warp_sum(const float *x, float *out)
{
    float v = x[GID];
    for (int32_t off = 16; off > 0; off /= 2)
        v += astitch_simt_shfl_down_f32(v, off);
    if (TID % 32 == 0)
        out[GID / 32] = v;
}

/* Butterfly over shfl_xor: every lane gets the warp's exact integer sum. */
static void k_warp_sum_i32(const int32_t *x, int32_t *out)
{
    int32_t v = x[GID];
    for (int32_t m = 1; m < 32; m *= 2)
        v += astitch_simt_shfl_xor_i32(v, m);
    out[GID] = v;
}

static void test_warp_reduction(void **state)
{
    astitch_context *ctx = *state;
    int32_t grid = 6, block = 256, n = grid * block, nw = n / 32;
    float *x = rnd_array((size_t)n), *out = nan_array((size_t)nw);
    ffi_type *types[] = {&ffi_type_pointer, &ffi_type_pointer};
    void *values[] = {&x, &out};
    expect_ok(ctx, launch(ctx, "warp_sum", FN(k_warp_sum), 2, types, values, grid, block, 0,
                          false));
    for (int32_t w = 0; w < nw; w++) {
        double want = 0, scale = 0;
        for (int i = 0; i < 32; i++) {
            want += x[w * 32 + i];
            scale += fabs(x[w * 32 + i]);
        }
        assert_close(out[w], want, scale, "warp_sum", w);
    }

    int32_t *xi = malloc((size_t)n * sizeof *xi), *oi = malloc((size_t)n * sizeof *oi);
    for (int32_t i = 0; i < n; i++)
        xi[i] = rnd_below(2000001) - 1000000;
    void *values_i[] = {&xi, &oi};
    expect_ok(ctx, launch(ctx, "warp_sum_i32", FN(k_warp_sum_i32), 2, types, values_i, grid,
                          block, 0, false));
    for (int32_t i = 0; i < n; i++) {
        int32_t want = 0;
        for (int j = 0; j < 32; j++)
            want += xi[i / 32 * 32 + j];
        assert_int_equal(oi[i], want);
    }
    free(x);
    free(out);
    free(xi);
    free(oi);
}

/* Each lane shuffles its own value three ways (i32) and as a float (idx). */
static void k_shuffle_modes(const int32_t *v, int32_t *down, int32_t *xr, int32_t *idx,
                            float *fidx, int32_t d, int32_t m, int32_t s)
{
    int64_t i = GID;
    down[i] = astitch_simt_shfl_down_i32(v[i], d);
    xr[i] = astitch_simt_shfl_xor_i32(v[i], m);
    idx[i] = astitch_simt_shfl_idx_i32(v[i], s);
    fidx[i] = astitch_simt_shfl_idx_f32((float)v[i] * 0.5f, s + 32); /* lane wraps mod 32 */
}

static void test_shuffle_modes(void **state)
{
    astitch_context *ctx = *state;
    int32_t grid = 3, block = 40; /* warps of 32 and 8 lanes */
    int32_t n = grid * block;
    int32_t *v = malloc((size_t)n * sizeof *v), *down = malloc((size_t)n * sizeof *down);
    int32_t *xr = malloc((size_t)n * sizeof *xr), *idx = malloc((size_t)n * sizeof *idx);
    float *fidx = malloc((size_t)n * sizeof *fidx);
    for (int32_t i = 0; i < n; i++)
        v[i] = rnd_below(1 << 20);
    int32_t d = 1 + rnd_below(12), m = 1 + rnd_below(31), s = rnd_below(32);
    ffi_type *types[] = {&ffi_type_pointer, &ffi_type_pointer, &ffi_type_pointer,
                         &ffi_type_pointer, &ffi_type_pointer, &ffi_type_sint32,
                         &ffi_type_sint32, &ffi_type_sint32};
    void *values[] = {&v, &down, &xr, &idx, &fidx, &d, &m, &s};
    expect_ok(ctx, launch(ctx, "shuffle_modes", FN(k_shuffle_modes), 8, types, values, grid,
                          block, 0, false));
    for (int32_t i = 0; i < n; i++) {
        int32_t tid = i % block, base = i - tid % 32, lane = tid % 32;
        int32_t lanes = block - tid / 32 * 32 < 32 ? block - tid / 32 * 32 : 32;
        int32_t want_down = lane + d < lanes ? v[base + lane + d] : v[i];
        int32_t want_xor = (lane ^ m) < lanes ? v[base + (lane ^ m)] : v[i];
        int32_t want_idx = s < lanes ? v[base + s] : v[i];
        assert_int_equal(down[i], want_down);
        assert_int_equal(xr[i], want_xor);
        assert_int_equal(idx[i], want_idx);
        assert_true(fidx[i] == (float)want_idx * 0.5f);
    }
    free(v);
    free(down);
    free(xr);
    free(idx);
    free(fidx);
}

/* ---- grid barrier ------------------------------------------------------------------------ */

/* Phase 1: per-block partial sums of x (grid-stride loop, then a shared-memory tree).
 * Phase 2, after a grid barrier: every block sums all partials and writes y = x - mean.
 * Phase 3, after another: block 0 sums y into check[0]. Each block also checks that its shared
 * memory survived the other blocks' phases, and records the total it computed. */
static void k_center(const float *x, float *y, float *partial, float *totals, float *check,
                     int64_t n)
{
    float *sh = astitch_simt_shared();
    int32_t *mark = (int32_t *)(sh + BDIM);
    int32_t tid = TID, bd = BDIM, bid = BID;
    int64_t stride = (int64_t)GDIM * bd;
    float acc = 0;
    for (int64_t i = GID; i < n; i += stride)
        acc += x[i];
    sh[tid] = acc;
    if (tid == 0)
        *mark = 1000 + bid;
    astitch_simt_barrier();
    for (int32_t half = bd / 2; half > 0; half /= 2) {
        if (tid < half)
            sh[tid] += sh[tid + half];
        astitch_simt_barrier();
    }
    if (tid == 0)
        partial[bid] = sh[0];
    astitch_simt_grid_barrier();
    if (*mark != 1000 + bid)
        astitch_simt_trap("shared memory changed across the grid barrier");
    float total = 0;
    for (int32_t b = 0; b < GDIM; b++)
        total += partial[b];
    if (tid == 0)
        totals[bid] = total;
    float mean = total / (float)n;
    for (int64_t i = GID; i < n; i += stride)
        y[i] = x[i] - mean;
    astitch_simt_grid_barrier();
    if (bid == 0 && tid == 0) {
        float s = 0;
        for (int64_t i = 0; i < n; i++)
            s += y[i];
        check[0] = s;
    }
}

static void test_grid_barrier(void **state)
{
    astitch_context *ctx = *state;
    int32_t grid = 12, block = 64;
    int64_t n = (int64_t)grid * block * 3 + rnd_below(500);
    float *x = rnd_array((size_t)n), *y = nan_array((size_t)n);
    float *partial = nan_array((size_t)grid), *totals = nan_array((size_t)grid);
    float *check = nan_array(1);
    ffi_type *types[] = {&ffi_type_pointer, &ffi_type_pointer, &ffi_type_pointer,
                         &ffi_type_pointer, &ffi_type_pointer, &ffi_type_sint64};
    void *values[] = {&x, &y, &partial, &totals, &check, &n};
    expect_ok(ctx, launch(ctx, "center", FN(k_center), 6, types, values, grid, block,
                          (size_t)block * sizeof(float) + sizeof(int32_t), true));
    double total = 0, scale = 0;
    for (int64_t i = 0; i < n; i++) {
        total += x[i];
        scale += fabs(x[i]);
    }
    for (int32_t b = 0; b < grid; b++) {
        assert_close(totals[b], total, scale, "totals", b);
        assert_true(totals[b] == totals[0]); /* every block read the same partials */
    }
    double mean = total / (double)n, ysum = 0, yscale = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_close(y[i], x[i] - mean, 1.0, "y", (long)i);
        ysum += y[i];
        yscale += fabs(y[i]);
    }
    assert_close(check[0], ysum, yscale, "check", 0);
    free(x);
    free(y);
    free(partial);
    free(totals);
    free(check);
}

/* The largest cooperative launch: every thread passes a grid barrier, then reads a value
 * written by a thread of another block. */
static void k_grid_rotate(int32_t *a, int32_t *b)
{
    int64_t total = (int64_t)GDIM * BDIM, i = GID;
    a[i] = (int32_t)(i * 7 + 3);
    astitch_simt_grid_barrier();
    b[i] = a[(i + BDIM) % total];
}

static void test_grid_barrier_full(void **state)
{
    int32_t block = 256, grid = SIMT_MAX_LIVE_THREADS / block, n = grid * block;
    int32_t *a = malloc((size_t)n * sizeof *a), *b = malloc((size_t)n * sizeof *b);
    ffi_type *types[] = {&ffi_type_pointer, &ffi_type_pointer};
    void *values[] = {&a, &b};
    expect_ok(*state, launch(*state, "grid_rotate", FN(k_grid_rotate), 2, types, values, grid,
                             block, 0, true));
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(b[i], ((i + block) % n) * 7 + 3);
    free(a);
    free(b);
}

/* ---- atomics ----------------------------------------------------------------------------- */

typedef struct AtomicOut {
    int32_t hist[16];
    float acc;
    int32_t maxv;
    int32_t slot;
    uint32_t claim[7];
    uint32_t uslot;
} AtomicOut;

/* Every kind of atomic, with a block barrier in the middle so that the threads' updates
 * interleave. The cas loop computes a maximum; exch leaves a chain of previous values; cas_u32
 * claims a bin for the first thread that gets there. */
static void k_atomics(const int32_t *v, const float *x, AtomicOut *o, int32_t *prev,
                      uint32_t *won, uint32_t *uprev)
{
    int64_t i = GID;
    astitch_simt_atomic_add_i32(&o->hist[v[i] % 16], 1);
    astitch_simt_atomic_add_f32(&o->acc, x[i]);
    astitch_simt_barrier();
    int32_t old = o->maxv;
    while (v[i] > old) {
        int32_t seen = astitch_simt_atomic_cas_i32(&o->maxv, old, v[i]);
        if (seen == old)
            break;
        old = seen;
    }
    prev[i] = astitch_simt_atomic_exch_i32(&o->slot, (int32_t)i + 1);
    astitch_simt_barrier();
    won[i] = astitch_simt_atomic_cas_u32(&o->claim[v[i] % 7], 0xffffffffu, (uint32_t)i) ==
             0xffffffffu;
    uprev[i] = astitch_simt_atomic_exch_u32(&o->uslot, 0x80000000u + (uint32_t)i);
}

static void run_atomics(astitch_context *ctx, bool cooperative)
{
    int32_t grid = 40, block = 96, n = grid * block;
    int32_t *v = malloc((size_t)n * sizeof *v), *prev = malloc((size_t)n * sizeof *prev);
    uint32_t *won = malloc((size_t)n * sizeof *won), *uprev = malloc((size_t)n * sizeof *uprev);
    float *x = rnd_array((size_t)n);
    AtomicOut out = {.maxv = INT32_MIN, .slot = 0, .uslot = 7}, *o = &out;
    memset(out.claim, 0xff, sizeof out.claim);
    for (int32_t i = 0; i < n; i++)
        v[i] = rnd_below(1 << 30);
    ffi_type *types[] = {&ffi_type_pointer, &ffi_type_pointer, &ffi_type_pointer,
                         &ffi_type_pointer, &ffi_type_pointer, &ffi_type_pointer};
    void *values[] = {&v, &x, &o, &prev, &won, &uprev};
    expect_ok(ctx, launch(ctx, "atomics", FN(k_atomics), 6, types, values, grid, block, 0,
                          cooperative));

    int32_t hist[16] = {0}, maxv = INT32_MIN;
    double acc = 0, scale = 0;
    for (int32_t i = 0; i < n; i++) {
        hist[v[i] % 16]++;
        maxv = v[i] > maxv ? v[i] : maxv;
        acc += x[i];
        scale += fabs(x[i]);
    }
    for (int b = 0; b < 16; b++)
        assert_int_equal(out.hist[b], hist[b]);
    assert_close(out.acc, acc, scale, "acc", 0);
    assert_int_equal(out.maxv, maxv);

    /* exch: the previous values and the final one are 0, 1, ..., n, each exactly once. */
    char *seen = calloc((size_t)n + 1, 1);
    seen[out.slot]++;
    for (int32_t i = 0; i < n; i++) {
        assert_in_range(prev[i], 0, n);
        seen[prev[i]]++;
    }
    for (int32_t i = 0; i <= n; i++)
        assert_int_equal(seen[i], 1);
    memset(seen, 0, (size_t)n + 1);
    /* exch_u32 the same with values above 2^31, starting from 7. */
    for (int32_t i = 0; i < n; i++) {
        uint32_t p = uprev[i];
        if (p == 7)
            seen[n]++;
        else {
            assert_true(p >= 0x80000000u && p < 0x80000000u + (uint32_t)n);
            seen[p - 0x80000000u]++;
        }
    }
    assert_true(out.uslot >= 0x80000000u && out.uslot < 0x80000000u + (uint32_t)n);
    seen[out.uslot - 0x80000000u]++;
    for (int32_t i = 0; i <= n; i++)
        assert_int_equal(seen[i], 1);
    /* cas_u32: one winner per bin, the one stored there. */
    int winners[7] = {0};
    for (int32_t i = 0; i < n; i++) {
        if (won[i]) {
            winners[v[i] % 7]++;
            assert_int_equal(out.claim[v[i] % 7], (uint32_t)i);
        }
    }
    for (int b = 0; b < 7; b++)
        assert_int_equal(winners[b], 1);
    free(seen);
    free(v);
    free(prev);
    free(won);
    free(uprev);
    free(x);
}

static void test_atomics(void **state)
{
    run_atomics(*state, false);
    run_atomics(*state, true);
}

/* The last block to finish (found with an atomic counter) sums every block's partial. */
static void k_last_block(const float *x, float *partial, int32_t *counter, float *out)
{
    float *sh = astitch_simt_shared();
    int32_t tid = TID, bd = BDIM;
    sh[tid] = x[GID];
    astitch_simt_barrier();
    if (tid == 0) {
        float s = 0;
        for (int32_t i = 0; i < bd; i++)
            s += sh[i];
        partial[BID] = s;
        if (astitch_simt_atomic_add_i32(counter, 1) == GDIM - 1) {
            float total = 0;
            for (int32_t b = 0; b < GDIM; b++)
                total += partial[b];
            *out = total;
        }
    }
}

static void test_last_block_pattern(void **state)
{
    int32_t grid = 33, block = 64, counter = 0;
    float *x = rnd_array((size_t)grid * block), *partial = nan_array((size_t)grid), out = NAN;
    float *pout = &out;
    int32_t *pcounter = &counter;
    ffi_type *types[] = {&ffi_type_pointer, &ffi_type_pointer, &ffi_type_pointer,
                         &ffi_type_pointer};
    void *values[] = {&x, &partial, &pcounter, &pout};
    expect_ok(*state, launch(*state, "last_block", FN(k_last_block), 4, types, values, grid,
                             block, (size_t)block * sizeof(float), false));
    double want = 0, scale = 0;
    for (int32_t i = 0; i < grid * block; i++) {
        want += x[i];
        scale += fabs(x[i]);
    }
    assert_int_equal(counter, grid);
    assert_close(out, want, scale, "last_block", 0);
    free(x);
    free(partial);
}

/* ---- errors ------------------------------------------------------------------------------ */

static void k_nothing(void) {}

static void test_bad_launches(void **state)
{
    astitch_context *ctx = *state;
    void (*fn)(void) = FN(k_nothing);
    expect_error(ctx, launch(ctx, "big", fn, 0, NULL, NULL, 129, 128, 0, true),
                 ASTITCH_ERR_ARGUMENT, "kernel 'big'", "16512 threads", "16384", NULL);
    expect_error(ctx, launch(ctx, "wide", fn, 0, NULL, NULL, 1, 2048, 0, false),
                 ASTITCH_ERR_ARGUMENT, "block size out of range", NULL);
    expect_error(ctx, launch(ctx, "empty", fn, 0, NULL, NULL, 0, 32, 0, false),
                 ASTITCH_ERR_ARGUMENT, "grid of fewer than 1 block", NULL);
    expect_error(ctx, launch(ctx, "fat", fn, 0, NULL, NULL, 1, 32, SIMT_MAX_SHARED + 1, false),
                 ASTITCH_ERR_ARGUMENT, "shared memory", NULL);
    expect_error(ctx, launch(ctx, "noargs", fn, 2, NULL, NULL, 1, 32, 0, false),
                 ASTITCH_ERR_ARGUMENT, "argument types or values missing", NULL);
    expect_error(ctx, launch(ctx, "nofn", NULL, 0, NULL, NULL, 1, 32, 0, false),
                 ASTITCH_ERR_ARGUMENT, "no kernel function", NULL);
    /* Within the limits, many cooperative blocks whose shared memory adds up to too much. */
    expect_error(ctx, launch(ctx, "shared", fn, 0, NULL, NULL, 4096, 1, SIMT_MAX_SHARED, true),
                 ASTITCH_ERR_MEMORY, "shared memory", NULL);
}

static void k_diverge_block(int32_t k)
{
    if (TID >= k)
        return;
    astitch_simt_barrier();
}

static void k_diverge_warp(int32_t *out)
{
    int32_t tid = TID;
    if (tid % 2 == 1 && tid < 32)
        return;
    out[tid] = astitch_simt_shfl_xor_i32(tid, 1);
}

static void k_diverge_grid(int32_t bad)
{
    if (BID == bad)
        return;
    astitch_simt_grid_barrier();
}

/* Half of each block waits at a block barrier, the other half at the grid barrier. */
static void k_diverge_mixed(void)
{
    if (TID < BDIM / 2)
        astitch_simt_barrier();
    else
        astitch_simt_grid_barrier();
}

static void k_grid_sync(void) { astitch_simt_grid_barrier(); }

static void test_barrier_divergence(void **state)
{
    astitch_context *ctx = *state;
    int32_t k = 1 + rnd_below(60);
    char want[64];
    snprintf(want, sizeof want, "block barrier reached by %d of 64 threads (%d exited)", k,
             64 - k);
    ffi_type *ti[] = {&ffi_type_sint32}, *tp[] = {&ffi_type_pointer};
    void *vk[] = {&k};
    expect_error(ctx, launch(ctx, "div_block", FN(k_diverge_block), 1, ti, vk, 5, 64, 0, false),
                 ASTITCH_ERR_DEVICE, "kernel 'div_block' block 0: ", want, NULL);

    int32_t out[64], *pout = out;
    void *vo[] = {&pout};
    expect_error(ctx, launch(ctx, "div_warp", FN(k_diverge_warp), 1, tp, vo, 2, 64, 0, false),
                 ASTITCH_ERR_DEVICE,
                 "block 0 warp 0: warp shuffle reached by 16 of 32 lanes (16 exited)", NULL);

    int32_t bad = rnd_below(6);
    void *vb[] = {&bad};
    expect_error(ctx, launch(ctx, "div_grid", FN(k_diverge_grid), 1, ti, vb, 6, 32, 0, true),
                 ASTITCH_ERR_DEVICE, "grid barrier reached by 160 of 192 threads (32 exited)",
                 NULL);
    expect_error(ctx, launch(ctx, "div_mixed", FN(k_diverge_mixed), 0, NULL, NULL, 3, 64, 0,
                             true),
                 ASTITCH_ERR_DEVICE,
                 "block 0: block barrier reached by 32 of 64 threads (32 at the grid barrier)",
                 NULL);
    expect_error(ctx, launch(ctx, "plain", FN(k_grid_sync), 0, NULL, NULL, 2, 32, 0, false),
                 ASTITCH_ERR_DEVICE, "kernel 'plain' block 0 thread 0:",
                 "grid barrier in a launch that is not cooperative", NULL);
    /* The runtime is usable after failed launches. */
    run_vec_add(ctx, 4, 64, 250);
}

static void k_trap(int32_t at_block, int32_t at_thread, int32_t *passed)
{
    if (BID == at_block && TID == at_thread)
        astitch_simt_trap("index out of bounds");
    astitch_simt_barrier();
    astitch_simt_atomic_add_i32(&passed[BID], 1);
}

static void test_trap(void **state)
{
    astitch_context *ctx = *state;
    int32_t grid = 8, block = 32, at_block = rnd_below(grid), at_thread = rnd_below(block);
    int32_t passed[8] = {0}, *pp = passed;
    ffi_type *types[] = {&ffi_type_sint32, &ffi_type_sint32, &ffi_type_pointer};
    void *values[] = {&at_block, &at_thread, &pp};
    char want[128];
    snprintf(want, sizeof want, "kernel 'trapper' block %d thread %d: trap: index out of bounds",
             at_block, at_thread);
    expect_error(ctx, launch(ctx, "trapper", FN(k_trap), 3, types, values, grid, block, 0, false),
                 ASTITCH_ERR_DEVICE, want, NULL);
    /* Blocks run in order: the ones before the trap finished, nothing after it ran, and no
     * thread of the trapping block passed the barrier. */
    for (int32_t b = 0; b < grid; b++)
        assert_int_equal(passed[b], b < at_block ? block : 0);
    memset(passed, 0, sizeof passed);
    expect_error(ctx, launch(ctx, "trapper", FN(k_trap), 3, types, values, grid, block, 0, true),
                 ASTITCH_ERR_DEVICE, want, NULL);
    assert_int_equal(passed[at_block], 0);
}

/* A kernel that tries to launch: refused, the outer launch goes on. */
static void k_nested(astitch_context *ctx, int32_t *status)
{
    SimtLaunch l = {.fn = FN(k_nothing), .grid = 1, .block = 1, .name = "inner"};
    status[GID] = (int32_t)simt_launch(ctx, &l);
}

static void test_nested_launch(void **state)
{
    astitch_context *ctx = *state;
    int32_t status[4] = {-1, -1, -1, -1}, *ps = status;
    ffi_type *types[] = {&ffi_type_pointer, &ffi_type_pointer};
    void *values[] = {&ctx, &ps};
    expect_ok(ctx, launch(ctx, "outer", FN(k_nested), 2, types, values, 2, 2, 0, false));
    for (int i = 0; i < 4; i++)
        assert_int_equal(status[i], ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(ctx), "launch from inside a kernel"));
}

/* The table host kernels bind the primitives through: every one set, each a different
 * function, the thread index and shuffles the runtime's own. */
static void test_symbols(void **state)
{
    (void)state;
    const HostPrimitives *h = simt_host_primitives();
    void (*const fn[])(void) = {
        FN(h->tid_x),          FN(h->ntid_x),         FN(h->ctaid_x),        FN(h->nctaid_x),
        FN(h->barrier_block),  FN(h->barrier_grid),   FN(h->shfl_down_f32),  FN(h->shfl_xor_f32),
        FN(h->shfl_down_i32),  FN(h->shfl_xor_i32),   FN(h->atomic_add_f32), FN(h->atomic_add_i32),
        FN(h->atomic_cas_i32), FN(h->atomic_max_f32), FN(h->atomic_min_f32), FN(h->shared_base),
        FN(h->trap),
    };
    int n = (int)(sizeof fn / sizeof fn[0]);
    assert_int_equal(n, (int)(sizeof *h / sizeof(void (*)(void))));
    for (int i = 0; i < n; i++) {
        assert_non_null(fn[i]);
        for (int j = 0; j < i; j++)
            assert_true(fn[i] != fn[j]);
    }
    assert_true(FN(h->tid_x) == FN(astitch_simt_thread_idx_x));
    assert_true(FN(h->shfl_xor_f32) == FN(astitch_simt_shfl_xor_f32));
}

int main(void)
{
    const char *env = getenv("ASTITCH_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)getpid() << 20;
    rng_state = seed;
    printf("# seed %llu (ASTITCH_TEST_SEED replays it)\n", (unsigned long long)seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector_add),
        cmocka_unit_test(test_argument_types),
        cmocka_unit_test(test_block_reduction),
        cmocka_unit_test(test_stacks_are_private),
        cmocka_unit_test(test_shared_memory),
        cmocka_unit_test(test_warp_reduction),
        cmocka_unit_test(test_shuffle_modes),
        cmocka_unit_test(test_grid_barrier),
        cmocka_unit_test(test_grid_barrier_full),
        cmocka_unit_test(test_atomics),
        cmocka_unit_test(test_last_block_pattern),
        cmocka_unit_test(test_bad_launches),
        cmocka_unit_test(test_barrier_divergence),
        cmocka_unit_test(test_trap),
        cmocka_unit_test(test_nested_launch),
        cmocka_unit_test(test_symbols),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
