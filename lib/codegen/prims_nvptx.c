/* prims_nvptx.c: the primitives of prims.h defined for NVPTX, as LLVM IR text that
 * target_nvptx.c parses and links into each kernel module. Every definition is alwaysinline
 * and is made internal after linking, so no trace of it is left but the inlined code.
 *
 * Notes on the lowering (LLVM 19 NVPTX):
 * - Shuffles pass the lanes that exist as member mask and n-1 as clamp (n: lanes of the
 *   caller's warp, fewer than 32 in the last warp of a block whose size is not a multiple of
 *   32), so a source lane past the end gives the caller's own value, as prims.h says. The
 *   whole-warp shuffles pass the constant mask -1 and clamp 31, which spares the JIT the code
 *   for a partial warp at every shuffle.
 * - LLVM 19 selects neither the IR fence nor acquire loads for NVPTX: fences are inline PTX
 *   and the grid barrier spins with volatile loads.
 * - The grid barrier is the flip-bit counter of docs/codegen.md. Block 0 adds 0x80000000-(n-1), the
 *   others 1; the top bit of the counter changes only when all n blocks have arrived, and the
 *   low 31 bits are back at 0 afterwards, so a zeroed counter stays valid for every later
 *   barrier at the same site and every later launch.
 * - atomic max/min f32 are compare-and-swap loops over llvm.maximum/minimum (NaN propagates,
 *   -0 orders below +0, as in the reference interpreter).
 */
#include "codegen.h"

static const char prims_ir[] =
    "@astitch_dynamic_smem = external addrspace(3) global [0 x i8], align 16\n"
    "\n"
    "declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
    "declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n"
    "declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
    "declare i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()\n"
    "declare void @llvm.nvvm.barrier0()\n"
    "declare void @llvm.trap()\n"
    "declare float @llvm.fma.f32(float, float, float)\n"
    "declare float @llvm.nvvm.shfl.sync.down.f32(i32, float, i32, i32)\n"
    "declare float @llvm.nvvm.shfl.sync.bfly.f32(i32, float, i32, i32)\n"
    "declare i32 @llvm.nvvm.shfl.sync.down.i32(i32, i32, i32, i32)\n"
    "declare i32 @llvm.nvvm.shfl.sync.bfly.i32(i32, i32, i32, i32)\n"
    "declare float @llvm.maximum.f32(float, float)\n"
    "declare float @llvm.minimum.f32(float, float)\n"
    "\n"
    "define i32 @astitch_tid_x() #0 {\n"
    "  %v = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
    "  ret i32 %v\n"
    "}\n"
    "define i32 @astitch_ntid_x() #0 {\n"
    "  %v = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n"
    "  ret i32 %v\n"
    "}\n"
    "define i32 @astitch_ctaid_x() #0 {\n"
    "  %v = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
    "  ret i32 %v\n"
    "}\n"
    "define i32 @astitch_nctaid_x() #0 {\n"
    "  %v = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()\n"
    "  ret i32 %v\n"
    "}\n"
    "define ptr @astitch_shared_base() #0 {\n"
    "  ret ptr addrspacecast (ptr addrspace(3) @astitch_dynamic_smem to ptr)\n"
    "}\n"
    "\n"
    "define void @astitch_barrier_block() #1 {\n"
    "  call void @llvm.nvvm.barrier0()\n"
    "  ret void\n"
    "}\n"
    "define float @astitch_fdiv_f32(float %a, float %b) #0 {\n"
    "  %v = call float asm \"div.full.f32 $0, $1, $2;\", \"=f,f,f\"(float %a, float %b)\n"
    "  ret float %v\n"
    "}\n"
    /* 1 / x within half an ulp and a little (not always the rounded value: rcp.rn.f32 is,
     * but the JIT expands it into more than the divisions it replaces): the hardware's
     * reciprocal (1 ulp) and one Newton step, for a normal x. At zeros and infinities the step
     * gives NaN and the hardware's +-inf, +-0 stand (testp.normal would not tell: PTX counts
     * zero as normal); NaN stays NaN. */
    "define float @astitch_rcp_f32(float %x) #0 {\n"
    "  %r = call float asm \"rcp.approx.ftz.f32 $0, $1;\", \"=f,f\"(float %x)\n"
    "  %nx = fneg float %x\n"
    "  %e = call float @llvm.fma.f32(float %nx, float %r, float 1.0)\n"
    "  %step = call float @llvm.fma.f32(float %r, float %e, float %r)\n"
    "  %lost = fcmp uno float %step, %step\n"
    "  %v = select i1 %lost, float %r, float %step\n"
    "  ret float %v\n"
    "}\n"
    /* x * log2(e) rounded, then the hardware's 2^p (denormal results kept, +-inf and NaN
     * through): Triton's form of exp, so torch.compile's kernels compute the same. The
     * denormal results are made here as ptxas makes them for ex2.approx.f32 (below p = -126,
     * the square of 2^(p/2), predicated), around the flushing ex2.approx.ftz.f32: the same
     * steps, and the JIT compiles them faster (docs/codegen.md). */
    "define float @astitch_exp_f32(float %x) #0 {\n"
    "  %p = fmul float %x, 0x3FF7154760000000\n"
    "  %v = call float asm \"{ .reg .pred lo; .reg .f32 h; setp.lt.f32 lo, $1, 0fC2FC0000; "
    "mov.f32 h, $1; @lo mul.rn.f32 h, h, 0f3F000000; ex2.approx.ftz.f32 $0, h; "
    "@lo mul.rn.f32 $0, $0, $0; }\", \"=f,f\"(float %p)\n"
    "  ret float %v\n"
    "}\n"
    "define void @astitch_trap(ptr %message) #2 {\n"
    "  call void @llvm.trap()\n"
    "  unreachable\n"
    "}\n"
    "define void @astitch_fence_gpu() #2 {\n"
    "  call void asm sideeffect \"fence.acq_rel.gpu;\", \"~{memory}\"()\n"
    "  ret void\n"
    "}\n"
    "define void @astitch_barrier_grid(ptr %counter) #1 {\n"
    "entry:\n"
    "  call void @llvm.nvvm.barrier0()\n"
    "  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
    "  %leader = icmp eq i32 %tid, 0\n"
    "  br i1 %leader, label %arrive, label %leave\n"
    "arrive:\n"
    "  %bid = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()\n"
    "  %nb = call i32 @llvm.nvvm.read.ptx.sreg.nctaid.x()\n"
    "  %first = icmp eq i32 %bid, 0\n"
    "  %big = sub i32 -2147483647, %nb\n" /* 0x80000000 - (nb - 1) */
    "  %add = select i1 %first, i32 %big, i32 1\n"
    "  %g = addrspacecast ptr %counter to ptr addrspace(1)\n"
    "  call void asm sideeffect \"fence.acq_rel.gpu;\", \"~{memory}\"()\n"
    "  %old = atomicrmw add ptr addrspace(1) %g, i32 %add monotonic, align 4\n"
    "  br label %spin\n"
    "spin:\n"
    "  %now = load volatile i32, ptr addrspace(1) %g, align 4\n"
    "  %diff = xor i32 %now, %old\n"
    "  %flipped = icmp slt i32 %diff, 0\n"
    "  br i1 %flipped, label %acquire, label %spin\n"
    "acquire:\n"
    "  call void asm sideeffect \"fence.acq_rel.gpu;\", \"~{memory}\"()\n"
    "  br label %leave\n"
    "leave:\n"
    "  call void @llvm.nvvm.barrier0()\n"
    "  ret void\n"
    "}\n"
    "\n"
    /* (member mask, clamp) of the caller's warp, as one i64: mask in the low half. */
    "define internal i64 @astitch_nvptx_warp() #0 {\n"
    "  %tid = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()\n"
    "  %nt = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()\n"
    "  %base = and i32 %tid, -32\n"
    "  %left = sub i32 %nt, %base\n"
    "  %few = icmp ult i32 %left, 32\n"
    "  %n = select i1 %few, i32 %left, i32 32\n"
    "  %sh = sub i32 32, %n\n"
    "  %mask = lshr i32 -1, %sh\n"
    "  %clamp = add i32 %n, -1\n"
    "  %lo = zext i32 %mask to i64\n"
    "  %c64 = zext i32 %clamp to i64\n"
    "  %hi = shl i64 %c64, 32\n"
    "  %w = or i64 %hi, %lo\n"
    "  ret i64 %w\n"
    "}\n"
#define SHFL(name, ty, mode)                                                              \
    "define " ty " @astitch_shfl_" name "(" ty " %v, i32 %d) #1 {\n"                       \
    "  %w = call i64 @astitch_nvptx_warp()\n"                                              \
    "  %mask = trunc i64 %w to i32\n"                                                      \
    "  %hi = lshr i64 %w, 32\n"                                                            \
    "  %clamp = trunc i64 %hi to i32\n"                                                    \
    "  %r = call " ty " @llvm.nvvm.shfl.sync." mode "(i32 %mask, " ty " %v, i32 %d, i32 %clamp)\n" \
    "  ret " ty " %r\n"                                                                    \
    "}\n"
    SHFL("down_f32", "float", "down.f32")
    SHFL("xor_f32", "float", "bfly.f32")
    SHFL("down_i32", "i32", "down.i32")
    SHFL("xor_i32", "i32", "bfly.i32")
#undef SHFL
/* A whole warp: the constant member mask spares ptxas the code for a partial one. */
#define SHFL_FULL(name, ty, mode)                                                         \
    "define " ty " @astitch_shfl_" name "(" ty " %v, i32 %d) #1 {\n"                       \
    "  %r = call " ty " @llvm.nvvm.shfl.sync." mode "(i32 -1, " ty " %v, i32 %d, i32 31)\n" \
    "  ret " ty " %r\n"                                                                    \
    "}\n"
    SHFL_FULL("xor_full_f32", "float", "bfly.f32")
    SHFL_FULL("xor_full_i32", "i32", "bfly.i32")
#undef SHFL_FULL
    "\n"
    "define float @astitch_atomic_add_f32(ptr %p, float %v) #2 {\n"
    "  %o = atomicrmw fadd ptr %p, float %v monotonic, align 4\n"
    "  ret float %o\n"
    "}\n"
    "define i32 @astitch_atomic_add_i32(ptr %p, i32 %v) #2 {\n"
    "  %o = atomicrmw add ptr %p, i32 %v monotonic, align 4\n"
    "  ret i32 %o\n"
    "}\n"
    "define i32 @astitch_atomic_cas_i32(ptr %p, i32 %e, i32 %d) #2 {\n"
    "  %r = cmpxchg ptr %p, i32 %e, i32 %d monotonic monotonic, align 4\n"
    "  %o = extractvalue { i32, i1 } %r, 0\n"
    "  ret i32 %o\n"
    "}\n"
#define ATOMIC_MINMAX(name, op)                                                           \
    "define float @astitch_atomic_" name "_f32(ptr %p, float %v) #2 {\n"                   \
    "entry:\n"                                                                             \
    "  %first = load volatile i32, ptr %p, align 4\n"                                      \
    "  br label %loop\n"                                                                   \
    "loop:\n"                                                                              \
    "  %old = phi i32 [ %first, %entry ], [ %seen, %retry ]\n"                             \
    "  %oldf = bitcast i32 %old to float\n"                                                \
    "  %newf = call float @llvm." op ".f32(float %oldf, float %v)\n"                       \
    "  %new = bitcast float %newf to i32\n"                                                \
    "  %same = icmp eq i32 %new, %old\n"                                                   \
    "  br i1 %same, label %done, label %retry\n"                                           \
    "retry:\n"                                                                             \
    "  %r = cmpxchg ptr %p, i32 %old, i32 %new monotonic monotonic, align 4\n"             \
    "  %seen = extractvalue { i32, i1 } %r, 0\n"                                           \
    "  %ok = extractvalue { i32, i1 } %r, 1\n"                                             \
    "  br i1 %ok, label %done, label %loop\n"                                              \
    "done:\n"                                                                              \
    "  ret float %oldf\n"                                                                  \
    "}\n"
    ATOMIC_MINMAX("max", "maximum")
    ATOMIC_MINMAX("min", "minimum")
#undef ATOMIC_MINMAX
    "\n"
    "attributes #0 = { alwaysinline nounwind memory(none) }\n"
    "attributes #1 = { alwaysinline nounwind convergent }\n"
    "attributes #2 = { alwaysinline nounwind }\n";

const char *prims_nvptx_ir(void) { return prims_ir; }
