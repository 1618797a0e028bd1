/*
 * compile.h: what lib/codegen offers the rest of libastitch, with no LLVM types in sight
 * (only lib/codegen includes llvm-c). compile.c implements it on top of codegen.h.
 */
#ifndef ASTITCH_COMPILE_H
#define ASTITCH_COMPILE_H

#include <stdbool.h>
#include <stdint.h>

#include "astitch/astitch.h"
#include "astitch/plan.h"

/* The alignment in bytes that compiled kernels assume of every tensor and scratch argument
 * (NVPTX: 16-byte vector accesses); whoever launches them guarantees at least this. */
#define COMPILE_TENSOR_ALIGN 16

/* The SIMT primitives of prims.h as the host target calls them: C functions of the runtime
 * that runs host kernels (lib/runtime/simt.h), one per primitive, given to compile_host. The
 * others (fence, fdiv, math) codegen binds itself. */
typedef struct HostPrimitives {
    int32_t (*tid_x)(void);
    int32_t (*ntid_x)(void);
    int32_t (*ctaid_x)(void);
    int32_t (*nctaid_x)(void);
    void (*barrier_block)(void);
    void (*barrier_grid)(uint32_t *counter);
    float (*shfl_down_f32)(float v, int32_t delta);
    float (*shfl_xor_f32)(float v, int32_t mask);
    int32_t (*shfl_down_i32)(int32_t v, int32_t delta);
    int32_t (*shfl_xor_i32)(int32_t v, int32_t mask);
    float (*atomic_add_f32)(float *p, float v);
    int32_t (*atomic_add_i32)(int32_t *p, int32_t v);
    int32_t (*atomic_cas_i32)(int32_t *p, int32_t expected, int32_t desired);
    float (*atomic_max_f32)(float *p, float v); /* NaN wins, -0 < +0 (llvm.maximum) */
    float (*atomic_min_f32)(float *p, float v);
    void *(*shared_base)(void);
    void (*trap)(const char *message);
} HostPrimitives;

typedef struct HostKernels HostKernels;

/* Emits the kernels of p and compiles them for this machine (ORC JIT), their primitives bound
 * to rt (which must outlive the kernels). With as_parts, every kernel is compiled as its parts
 * cut at the global barriers (see compile_kernel_num_parts). */
astitch_status compile_host(astitch_context *ctx, const astitch_plan *p, bool as_parts,
                            const HostPrimitives *rt, HostKernels **out);
/* Kernel k of the plan (part < 0), or its part `part` when compiled as parts; callable with its
 * argument list through the SIMT runtime. */
void (*host_kernel(const HostKernels *hk, int k, int part))(void);
void host_kernels_destroy(HostKernels *hk); /* accepts NULL */

/* Emits the kernels of p (as_parts: as their parts) and lowers them to PTX for sm_<sm> with each
 * kernel's launch bounds (maxntid, maxnreg from the plan). *ptx is malloc'd text. */
astitch_status compile_ptx(astitch_context *ctx, const astitch_plan *p, int sm, bool as_parts,
                           char **ptx);

/* As compile_ptx (whole kernels), with kernel k in its lean form where lean[k]: every walk of
 * its elements takes one element, or one run, per iteration instead of a group of them, the
 * form that keeps the fewest values live. For a kernel that spills at a register bound its
 * launch cannot leave (a grid that must be resident). The PTX marks each lean kernel. */
astitch_status compile_ptx_lean(astitch_context *ctx, const astitch_plan *p, int sm,
                                const bool *lean, char **ptx);
/* Whether kernel `name` of PTX text ptx (from compile_ptx_lean) is in its lean form. */
bool compile_ptx_is_lean(const char *ptx, const char *name);

/* A copy of PTX text ptx (from compile_ptx) in which kernel `name` is bounded to `regs`
 * registers per thread (its .maxnreg directive rewritten): malloc'd, or NULL when the kernel
 * or its directive is not there or memory runs out. */
char *compile_ptx_with_maxnreg(const char *ptx, const char *name, int regs);
/* The register bound (.maxnreg) of kernel `name` in PTX text ptx; 0 when it has none. */
int compile_ptx_maxnreg(const char *ptx, const char *name);

/* The target-neutral LLVM IR of p's kernels as text (what --emit=llvm prints). */
astitch_status compile_llvm_text(astitch_context *ctx, const astitch_plan *p, char **text);

/* Writes the PTX/LLVM function name of kernel k of p (part < 0) or of its part into buf. */
char *compile_kernel_name(const astitch_plan *p, int k, int part, char *buf, size_t len);
/* Bytes the host's parts form leaves free before each SHARED buffer it keeps in scratch, a
 * redzone the runtime checks (the CUDA form leaves none). */
#define COMPILE_HOST_SPILL_GAP 64
/* Scratch bytes the parts form of p needs for the host or CUDA (more than the plan's: see
 * codegen.h). */
int64_t compile_parts_scratch_bytes(const astitch_plan *p, bool host);
/* Where the host's or CUDA's parts form of kernel k keeps its SHARED buffers: spill[b] the
 * scratch offset of buffer b, -1 for a buffer of another kind (spill holds k's nbuf entries). */
void compile_parts_spill(const astitch_plan *p, int k, bool host, int64_t *spill);
/* Parts of kernel k when cut at its global barriers. */
int compile_kernel_num_parts(const astitch_plan *p, int k);
/* Number of pointer arguments of kernel k: inputs, outputs, scratch, barrier counter. */
int compile_kernel_num_args(const astitch_plan *p, int k);

#endif
