/*
 * simt_prims.c: the primitives host kernels call, and their table for the JIT. Each finds the
 * running launch through simt_current; the scheduler keeps SimtExec.cur on the calling thread.
 * Atomics use __atomic builtins with sequential consistency although fibers of one launch
 * never run in parallel: kernels may share memory with other OS threads, and it costs little.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "simt.h"

/* The running launch; a primitive called outside a kernel is a code generation bug. */
static SimtExec *caller(const char *what)
{
    SimtExec *x = simt_current;
    if (!x || !x->cur) {
        fprintf(stderr, "astitch: %s called outside a SIMT kernel\n", what);
        abort();
    }
    return x;
}

int32_t astitch_simt_thread_idx_x(void) { return caller(__func__)->cur->tid; }

int32_t astitch_simt_block_idx_x(void) { return caller(__func__)->cur->block; }

int32_t astitch_simt_block_dim_x(void) { return caller(__func__)->l->block; }

int32_t astitch_simt_grid_dim_x(void) { return caller(__func__)->l->grid; }

void astitch_simt_barrier(void)
{
    SimtExec *x = caller(__func__);
    simt_arrive(x, &x->bar_block[x->cur->block - x->first_block], SIMT_WAIT_BLOCK);
}

void astitch_simt_grid_barrier(void)
{
    SimtExec *x = caller(__func__);
    if (!x->l->cooperative)
        simt_fail(x, "grid barrier in a launch that is not cooperative");
    simt_arrive(x, &x->bar_grid, SIMT_WAIT_GRID);
}

void *astitch_simt_shared(void)
{
    SimtExec *x = caller(__func__);
    return x->shared + (size_t)(x->cur->block - x->first_block) * x->shared_stride;
}

void astitch_simt_trap(const char *msg)
{
    simt_fail(caller(__func__), "trap: %s", msg ? msg : "(no message)");
}

/* ---- warp shuffles ------------------------------------------------------------------------ */

typedef enum { SHFL_DOWN, SHFL_XOR, SHFL_IDX } ShflMode;

/* Publishes v for the caller's lane, waits for the warp, and returns the source lane's value
 * (v itself where that lane does not exist). Two value buffers alternate: a lane can write a
 * buffer again only after the next shuffle completed, that is after every lane read this one. */
static uint32_t shuffle(const char *what, uint32_t v, ShflMode mode, int32_t b)
{
    SimtExec *x = caller(what);
    SimtThread *t = x->cur;
    SimtWarp *w = &x->warp[(t->block - x->first_block) * x->warps + t->tid / SIMT_WARP_SIZE];
    uint32_t lane = (uint32_t)(t->tid % SIMT_WARP_SIZE);
    uint32_t phase = t->shfl_phase++ & 1;
    w->value[phase][lane] = v;
    simt_arrive(x, &w->bar, SIMT_WAIT_WARP);
    uint64_t src = mode == SHFL_DOWN  ? (uint64_t)lane + (uint32_t)b
                   : mode == SHFL_XOR ? lane ^ (uint32_t)b
                                      : (uint32_t)b % SIMT_WARP_SIZE;
    return src < (uint64_t)w->bar.expected ? w->value[phase][src] : v;
}

float astitch_simt_shfl_down_f32(float v, int32_t delta)
{
    return bits_f32(shuffle(__func__, f32_bits(v), SHFL_DOWN, delta));
}

float astitch_simt_shfl_xor_f32(float v, int32_t mask)
{
    return bits_f32(shuffle(__func__, f32_bits(v), SHFL_XOR, mask));
}

float astitch_simt_shfl_idx_f32(float v, int32_t lane)
{
    return bits_f32(shuffle(__func__, f32_bits(v), SHFL_IDX, lane));
}

int32_t astitch_simt_shfl_down_i32(int32_t v, int32_t delta)
{
    return (int32_t)shuffle(__func__, (uint32_t)v, SHFL_DOWN, delta);
}

int32_t astitch_simt_shfl_xor_i32(int32_t v, int32_t mask)
{
    return (int32_t)shuffle(__func__, (uint32_t)v, SHFL_XOR, mask);
}

int32_t astitch_simt_shfl_idx_i32(int32_t v, int32_t lane)
{
    return (int32_t)shuffle(__func__, (uint32_t)v, SHFL_IDX, lane);
}

/* ---- atomics ------------------------------------------------------------------------------ */

float astitch_simt_atomic_add_f32(float *p, float v)
{
    /* The generic builtins compare bit patterns, so a NaN in *p cannot loop forever. */
    float old, sum;
    __atomic_load(p, &old, __ATOMIC_RELAXED);
    do
        sum = old + v;
    while (!__atomic_compare_exchange(p, &old, &sum, false, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
    return old;
}

int32_t astitch_simt_atomic_add_i32(int32_t *p, int32_t v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}

int32_t astitch_simt_atomic_cas_i32(int32_t *p, int32_t expected, int32_t desired)
{
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}

uint32_t astitch_simt_atomic_cas_u32(uint32_t *p, uint32_t expected, uint32_t desired)
{
    __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return expected;
}

int32_t astitch_simt_atomic_exch_i32(int32_t *p, int32_t v)
{
    return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}

uint32_t astitch_simt_atomic_exch_u32(uint32_t *p, uint32_t v)
{
    return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);
}

/* max/min as llvm.maximum/minimum and the reference interpreter: NaN wins, -0 < +0. */
static float ordered_pick(float a, float b, bool max)
{
    if (isnan(a) || isnan(b))
        return isnan(a) ? a : b;
    if (a == b) /* equal numbers, or zeros of either sign */
        return (signbit(a) != 0) == max ? b : a;
    return (a > b) == max ? a : b;
}

static float atomic_pick_f32(float *p, float v, bool max)
{
    uint32_t *u = (uint32_t *)p, old = *u;
    for (;;) {
        float f, pick;
        memcpy(&f, &old, sizeof f);
        pick = ordered_pick(f, v, max);
        uint32_t want;
        memcpy(&want, &pick, sizeof want);
        if (want == old)
            return f;
        uint32_t seen = astitch_simt_atomic_cas_u32(u, old, want);
        if (seen == old)
            return f;
        old = seen;
    }
}

float astitch_simt_atomic_max_f32(float *p, float v) { return atomic_pick_f32(p, v, true); }

float astitch_simt_atomic_min_f32(float *p, float v) { return atomic_pick_f32(p, v, false); }

/* ---- the primitives as host kernels call them --------------------------------------------- */

static void grid_barrier_at(uint32_t *counter)
{
    (void)counter; /* the runtime's grid barrier keeps its own state */
    astitch_simt_grid_barrier();
}

static const HostPrimitives host_primitives = {
    .tid_x = astitch_simt_thread_idx_x,
    .ntid_x = astitch_simt_block_dim_x,
    .ctaid_x = astitch_simt_block_idx_x,
    .nctaid_x = astitch_simt_grid_dim_x,
    .barrier_block = astitch_simt_barrier,
    .barrier_grid = grid_barrier_at,
    .shfl_down_f32 = astitch_simt_shfl_down_f32,
    .shfl_xor_f32 = astitch_simt_shfl_xor_f32,
    .shfl_down_i32 = astitch_simt_shfl_down_i32,
    .shfl_xor_i32 = astitch_simt_shfl_xor_i32,
    .atomic_add_f32 = astitch_simt_atomic_add_f32,
    .atomic_add_i32 = astitch_simt_atomic_add_i32,
    .atomic_cas_i32 = astitch_simt_atomic_cas_i32,
    .atomic_max_f32 = astitch_simt_atomic_max_f32,
    .atomic_min_f32 = astitch_simt_atomic_min_f32,
    .shared_base = astitch_simt_shared,
    .trap = astitch_simt_trap,
};

const HostPrimitives *simt_host_primitives(void) { return &host_primitives; }
