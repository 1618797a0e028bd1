/* host_symbols.c: what host kernels may call, by name, as C functions. target_host.c binds
 * exactly these into each JIT as absolute symbols:
 *   - every primitive of prims.h: the thread primitives to the functions the runtime gives
 *     (HostPrimitives, compile.h), fence, fdiv, rcp and exp to small functions here;
 *   - every math function of MATH_LIST under its libdevice name (`__nv_expf`) and its libm name
 *     (`expf`, which LLVM itself calls for some intrinsics), over libm; rsqrt is 1/sqrt;
 *   - memcpy, memmove, memset, which LLVM may call for loops it recognizes.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "codegen.h"

typedef void (*AnyFn)(void);

static void host_fence_gpu(void) { atomic_thread_fence(memory_order_seq_cst); }

static float host_fdiv_f32(float a, float b) { return a / b; }
static float host_rcp_f32(float x) { return 1.0f / x; }
static float host_exp_f32(float x) { return expf(x); }

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
static const HostSymbol own[] = {
    {"astitch_fence_gpu", (AnyFn)host_fence_gpu},
    {"astitch_fdiv_f32", (AnyFn)host_fdiv_f32},
    {"astitch_rcp_f32", (AnyFn)host_rcp_f32},
    {"astitch_exp_f32", (AnyFn)host_exp_f32},
#define HM_ENTRY(id, stem, arity)                                      \
    {"__nv_" #stem "f", (AnyFn)hm_##stem##f}, {"__nv_" #stem, (AnyFn)hm_##stem}, \
    {#stem "f", (AnyFn)hm_##stem##f}, {#stem, (AnyFn)hm_##stem},
    MATH_LIST(HM_ENTRY)
#undef HM_ENTRY
    {"memcpy", (AnyFn)memcpy},
    {"memmove", (AnyFn)memmove},
    {"memset", (AnyFn)memset},
};

int host_symbols(const HostPrimitives *rt, HostSymbol *out)
{
    const HostSymbol given[] = {
        {"astitch_tid_x", (AnyFn)rt->tid_x},
        {"astitch_ntid_x", (AnyFn)rt->ntid_x},
        {"astitch_ctaid_x", (AnyFn)rt->ctaid_x},
        {"astitch_nctaid_x", (AnyFn)rt->nctaid_x},
        {"astitch_barrier_block", (AnyFn)rt->barrier_block},
        {"astitch_barrier_grid", (AnyFn)rt->barrier_grid},
        {"astitch_shfl_down_f32", (AnyFn)rt->shfl_down_f32},
        {"astitch_shfl_xor_f32", (AnyFn)rt->shfl_xor_f32},
        {"astitch_shfl_down_i32", (AnyFn)rt->shfl_down_i32},
        {"astitch_shfl_xor_i32", (AnyFn)rt->shfl_xor_i32},
        {"astitch_shfl_xor_full_f32", (AnyFn)rt->shfl_xor_f32}, /* every host warp is whole */
        {"astitch_shfl_xor_full_i32", (AnyFn)rt->shfl_xor_i32},
        {"astitch_atomic_add_f32", (AnyFn)rt->atomic_add_f32},
        {"astitch_atomic_add_i32", (AnyFn)rt->atomic_add_i32},
        {"astitch_atomic_cas_i32", (AnyFn)rt->atomic_cas_i32},
        {"astitch_atomic_max_f32", (AnyFn)rt->atomic_max_f32},
        {"astitch_atomic_min_f32", (AnyFn)rt->atomic_min_f32},
        {"astitch_shared_base", (AnyFn)rt->shared_base},
        {"astitch_trap", (AnyFn)rt->trap},
    };
    int n = 0;
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++)
        if (given[i].fn) /* an unset one leaves calls to it unresolved: check_calls says so */
            out[n++] = given[i];
    for (size_t i = 0; i < sizeof own / sizeof own[0] && n < HOST_SYMBOLS_MAX; i++)
        out[n++] = own[i];
    return n;
}
