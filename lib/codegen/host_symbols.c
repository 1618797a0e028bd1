/* host_symbols.c: what host kernels may call, by name, as C functions. target_host.c binds
 * exactly these into each JIT as absolute symbols:
 *   - every primitive of prims.h, bound to the SIMT runtime (lib/runtime/simt.h) or to a small
 *     adapter here where the runtime's function differs or is missing;
 *   - every math function of MATH_LIST under its libdevice name (`__nv_expf`) and its libm name
 *     (`expf`, which LLVM itself calls for some intrinsics), over libm; rsqrt is 1/sqrt;
 *   - memcpy, memmove, memset, which LLVM may call for loops it recognizes.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "codegen.h"
#include "runtime/simt.h"

typedef void (*AnyFn)(void);

static void host_barrier_grid(uint32_t *counter)
{
    (void)counter; /* the runtime's grid barrier keeps its own state */
    astitch_simt_grid_barrier();
}

static void host_fence_gpu(void) { atomic_thread_fence(memory_order_seq_cst); }

static float host_fdiv_f32(float a, float b) { return a / b; }

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

static float host_atomic_max_f32(float *p, float v) { return atomic_pick_f32(p, v, true); }
static float host_atomic_min_f32(float *p, float v) { return atomic_pick_f32(p, v, false); }

#define HM_1(stem)                                                        \
    static float hm_##stem##f(float x) { return stem##f(x); }            \
    static double hm_##stem(double x) { return stem(x); }
#define HM_2(stem)                                                        \
    static float hm_##stem##f(float x, float y) { return stem##f(x, y); } \
    static double hm_##stem(double x, double y) { return stem(x, y); }

HM_1(exp)
HM_1(log)
HM_1(log1p)
HM_1(expm1)
HM_1(sqrt)
HM_1(tanh)
HM_1(erf)
HM_1(sin)
HM_1(cos)
HM_1(floor)
HM_1(ceil)
HM_1(round)
HM_2(pow)
HM_2(fmod)

static float hm_rsqrtf(float x) { return 1.0f / sqrtf(x); }
static double hm_rsqrt(double x) { return 1.0 / sqrt(x); }

/* A function of MATH_LIST without a wrapper above fails to compile here. */
static const HostSymbol symbols[] = {
    {"astitch_tid_x", (AnyFn)astitch_simt_thread_idx_x},
    {"astitch_ntid_x", (AnyFn)astitch_simt_block_dim_x},
    {"astitch_ctaid_x", (AnyFn)astitch_simt_block_idx_x},
    {"astitch_nctaid_x", (AnyFn)astitch_simt_grid_dim_x},
    {"astitch_barrier_block", (AnyFn)astitch_simt_barrier},
    {"astitch_barrier_grid", (AnyFn)host_barrier_grid},
    {"astitch_shfl_down_f32", (AnyFn)astitch_simt_shfl_down_f32},
    {"astitch_shfl_xor_f32", (AnyFn)astitch_simt_shfl_xor_f32},
    {"astitch_shfl_down_i32", (AnyFn)astitch_simt_shfl_down_i32},
    {"astitch_shfl_xor_i32", (AnyFn)astitch_simt_shfl_xor_i32},
    {"astitch_atomic_add_f32", (AnyFn)astitch_simt_atomic_add_f32},
    {"astitch_atomic_add_i32", (AnyFn)astitch_simt_atomic_add_i32},
    {"astitch_atomic_cas_i32", (AnyFn)astitch_simt_atomic_cas_i32},
    {"astitch_atomic_max_f32", (AnyFn)host_atomic_max_f32},
    {"astitch_atomic_min_f32", (AnyFn)host_atomic_min_f32},
    {"astitch_shared_base", (AnyFn)astitch_simt_shared},
    {"astitch_fence_gpu", (AnyFn)host_fence_gpu},
    {"astitch_fdiv_f32", (AnyFn)host_fdiv_f32},
    {"astitch_trap", (AnyFn)astitch_simt_trap},
#define HM_ENTRY(id, stem, arity)                                      \
    {"__nv_" #stem "f", (AnyFn)hm_##stem##f}, {"__nv_" #stem, (AnyFn)hm_##stem}, \
    {#stem "f", (AnyFn)hm_##stem##f}, {#stem, (AnyFn)hm_##stem},
    MATH_LIST(HM_ENTRY)
#undef HM_ENTRY
    {"memcpy", (AnyFn)memcpy},
    {"memmove", (AnyFn)memmove},
    {"memset", (AnyFn)memset},
};

const HostSymbol *host_symbols(int *n)
{
    *n = (int)(sizeof symbols / sizeof symbols[0]);
    return symbols;
}
