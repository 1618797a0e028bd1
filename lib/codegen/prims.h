/*
 * prims.h: the contract between kernel emission and the targets.
 *
 * Kernel emission (lib/codegen/emit*.c) builds one LLVM function per stitch op in a
 * target-neutral SIMT form. Everything that differs between targets is reached through the
 * primitives below, declared in the module as external functions with these exact names and
 * LLVM types (ptr is the generic address space 0). Each target lowers only these:
 *
 *   NVPTX (target_nvptx.c): links a small module that defines each primitive with NVVM
 *     intrinsics or inline PTX (always_inline), links libdevice, marks kernels with the PTX
 *     kernel calling convention and nvvm.annotations, runs O3, emits PTX.
 *   host (target_host.c): resolves each primitive to a C function the runtime gives
 *     (HostPrimitives in compile.h; lib/runtime/simt.h) and the math functions to libm,
 *     through absolute symbols in an ORC LLJIT.
 *
 *   name                          LLVM type                           meaning
 *   astitch_tid_x                 i32 ()                              thread index in block
 *   astitch_ntid_x                i32 ()                              threads per block
 *   astitch_ctaid_x               i32 ()                              block index in grid
 *   astitch_nctaid_x              i32 ()                              blocks in grid
 *   astitch_barrier_block         void ()                             bar.sync 0
 *   astitch_barrier_grid          void (ptr counter)                  all blocks of the launch
 *                                                                     (counter: a zeroed u32 in
 *                                                                     global memory per barrier
 *                                                                     site, flip-bit protocol)
 *   astitch_shfl_down_f32         float (float v, i32 delta)          warp shuffle, 32 lanes
 *   astitch_shfl_xor_f32          float (float v, i32 mask)
 *   astitch_shfl_down_i32         i32 (i32 v, i32 delta)
 *   astitch_shfl_xor_i32          i32 (i32 v, i32 mask)
 *   astitch_shfl_xor_full_f32     float (float v, i32 mask)           as astitch_shfl_xor_f32, in
 *   astitch_shfl_xor_full_i32     i32 (i32 v, i32 mask)               a warp whose 32 lanes all
 *                                                                     exist (a block of a
 *                                                                     multiple of 32 threads);
 *                                                                     NVPTX: a constant member
 *                                                                     mask, no partial warp to
 *                                                                     handle
 *   astitch_atomic_add_f32        float (ptr p, float v)              returns the old value
 *   astitch_atomic_add_i32        i32 (ptr p, i32 v)
 *   astitch_atomic_cas_i32        i32 (ptr p, i32 expect, i32 desired)
 *   astitch_atomic_max_f32        float (ptr p, float v)              via CAS loop on NVPTX
 *   astitch_atomic_min_f32        float (ptr p, float v)
 *   astitch_shared_base           ptr ()                              this block's dynamic shared
 *                                                                     memory (generic pointer)
 *   astitch_fence_gpu             void ()                             gpu-scope memory fence
 *   astitch_fdiv_f32              float (float a, float b)            a / b within 2 ulp over the
 *                                                                     full range (NVPTX:
 *                                                                     div.full.f32; host: IEEE)
 *   astitch_rcp_f32               float (float x)                     1 / x within half an ulp
 *                                                                     and a little for a normal
 *                                                                     x, +-inf at +-0, +-0 at
 *                                                                     +-inf (NVPTX:
 *                                                                     rcp.approx.ftz.f32 and a
 *                                                                     Newton step; host: IEEE);
 *                                                                     for divisions sharing a
 *                                                                     divisor (emit_divisor.c)
 *   astitch_exp_f32               float (float x)                     e^x as Triton computes it
 *                                                                     (NVPTX: 2^p of p = x *
 *                                                                     log2(e), ex2.approx's
 *                                                                     values, within 2 + 1.2 |x|
 *                                                                     ulp, CUDA's bound for
 *                                                                     __expf, subnormal results
 *                                                                     kept; host: expf)
 *   astitch_trap                  void (ptr message)                  ends the launch with a
 *                                                                     kernel error (host: the
 *                                                                     message; NVPTX: trap)
 *
 * Math: element-wise functions are called by their libdevice names with f32 or f64 types
 * (__nv_logf, __nv_log1pf, __nv_expm1f, __nv_sqrtf, __nv_rsqrtf, __nv_tanhf, __nv_erff,
 * __nv_sinf, __nv_cosf, __nv_powf, __nv_fmodf, __nv_floorf, __nv_ceilf, __nv_roundf, and the
 * f64 forms without the trailing f, __nv_exp among them; f32 exp is astitch_exp_f32 above).
 * NVPTX links libdevice; the host binds the same names to libm (rsqrt as 1/sqrt).
 *
 * Kernel signature: every kernel is `void name(ptr arg0, ..., ptr argN)`; the list is the
 * plan's kernel inputs, then outputs, then the scratch buffer, then the barrier counters
 * buffer, in that order (see lib/codegen/codegen.h for the exact list of a compiled kernel).
 */
#ifndef ASTITCH_PRIMS_H
#define ASTITCH_PRIMS_H

#define PRIM_LIST(X)                 \
    X(TID_X, "astitch_tid_x")        \
    X(NTID_X, "astitch_ntid_x")      \
    X(CTAID_X, "astitch_ctaid_x")    \
    X(NCTAID_X, "astitch_nctaid_x")  \
    X(BARRIER_BLOCK, "astitch_barrier_block") \
    X(BARRIER_GRID, "astitch_barrier_grid")   \
    X(SHFL_DOWN_F32, "astitch_shfl_down_f32") \
    X(SHFL_XOR_F32, "astitch_shfl_xor_f32")   \
    X(SHFL_DOWN_I32, "astitch_shfl_down_i32") \
    X(SHFL_XOR_I32, "astitch_shfl_xor_i32")   \
    X(SHFL_XOR_FULL_F32, "astitch_shfl_xor_full_f32") \
    X(SHFL_XOR_FULL_I32, "astitch_shfl_xor_full_i32") \
    X(ATOMIC_ADD_F32, "astitch_atomic_add_f32") \
    X(ATOMIC_ADD_I32, "astitch_atomic_add_i32") \
    X(ATOMIC_CAS_I32, "astitch_atomic_cas_i32") \
    X(ATOMIC_MAX_F32, "astitch_atomic_max_f32") \
    X(ATOMIC_MIN_F32, "astitch_atomic_min_f32") \
    X(SHARED_BASE, "astitch_shared_base")     \
    X(FENCE_GPU, "astitch_fence_gpu")        \
    X(FDIV_F32, "astitch_fdiv_f32")          \
    X(RCP_F32, "astitch_rcp_f32")            \
    X(EXP_F32, "astitch_exp_f32")            \
    X(TRAP, "astitch_trap")

#endif
