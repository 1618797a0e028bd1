/*
 * codegen.h: code generation, private to libastitch. A map of lib/codegen:
 *
 *   prims.h         the primitives kernels call: the contract between emission and targets
 *   llvm_util.c     primitives and math functions declared into a module, target setup,
 *                   LLVM messages as astitch errors
 *   target_nvptx.c  kernel module -> PTX: primitives from NVVM intrinsics and inline PTX
 *                   (prims_nvptx.c), libdevice, launch bounds, O3
 *   prims_nvptx.c   the NVPTX definitions of the primitives, as LLVM IR text
 *   target_host.c   kernel module -> host code in an ORC LLJIT
 *   host_symbols.c  what host kernels may call: primitives -> the SIMT runtime
 *                   (lib/runtime/simt.h), math -> libm
 *   ptxas.c         runs `ptxas -v` on PTX text and reads registers, spills, shared memory
 *   ptx_pressure.c  the registers a PTX kernel keeps live, estimated from its text; register
 *                   bounds raised where the estimate says they would spill
 *
 * Modules. A kernel module holds kernels `void name(ptr, ..., ptr)` that reach everything
 * target-specific through the primitives of prims.h and the math functions below, declared
 * with prim_get and math_get. The lowerings consume the module (they dispose it); its
 * LLVMContextRef stays the caller's and must outlive the call. A context may be used by one
 * thread at a time.
 */
#ifndef ASTITCH_CODEGEN_H
#define ASTITCH_CODEGEN_H

#include <stdbool.h>

#include <llvm-c/Core.h>
#include <llvm-c/Error.h>
#include <llvm-c/TargetMachine.h>

#include "astitch/astitch.h"
#include "compile.h"
#include "prims.h"

typedef enum PrimId {
#define PRIM_ENUM(id, name) PRIM_##id,
    PRIM_LIST(PRIM_ENUM)
#undef PRIM_ENUM
    PRIM_COUNT
} PrimId;

/* The element-wise math functions, by libdevice stem, with their arity. Each exists as f32
 * (`__nv_<stem>f`) and f64 (`__nv_<stem>`). */
#define MATH_LIST(X) \
    X(EXP, exp, 1)       \
    X(LOG, log, 1)       \
    X(LOG1P, log1p, 1)   \
    X(EXPM1, expm1, 1)   \
    X(SQRT, sqrt, 1)     \
    X(RSQRT, rsqrt, 1)   \
    X(TANH, tanh, 1)     \
    X(ERF, erf, 1)       \
    X(SIN, sin, 1)       \
    X(COS, cos, 1)       \
    X(FLOOR, floor, 1)   \
    X(CEIL, ceil, 1)     \
    X(ROUND, round, 1)   \
    X(POW, pow, 2)       \
    X(FMOD, fmod, 2)

typedef enum MathId {
#define MATH_ENUM(id, stem, arity) MATH_##id,
    MATH_LIST(MATH_ENUM)
#undef MATH_ENUM
    MATH_COUNT
} MathId;

/* ---- llvm_util.c ------------------------------------------------------------------------- */

/* The name of primitive id (prims.h). */
const char *prim_name(PrimId id);
/* The LLVM function type of primitive id in context c. */
LLVMTypeRef prim_type(LLVMContextRef c, PrimId id);
/* Returns primitive id declared in m (declaring it on first use, with its attributes). */
LLVMValueRef prim_get(LLVMModuleRef m, PrimId id);
/* Emits a call of primitive id with n arguments at b's position; returns the call. */
LLVMValueRef prim_call(LLVMBuilderRef b, LLVMModuleRef m, PrimId id, LLVMValueRef *args,
                       unsigned n);
/* Writes the libdevice name of math function id ("__nv_expf", or "__nv_exp" when f64) into
 * buf (at least 32 bytes); returns buf. */
char *math_name(char *buf, MathId id, bool f64);
int math_arity(MathId id);
/* Returns math function id, f32 or f64, declared in m. */
LLVMValueRef math_get(LLVMModuleRef m, MathId id, bool f64);
/* Emits a call of math function id on args (math_arity(id) values of float or double type);
 * returns the call. */
LLVMValueRef math_call(LLVMBuilderRef b, LLVMModuleRef m, MathId id, LLVMValueRef *args);
/* Emits |x| of an f32 at b's position: llvm.fabs.f32 (declared in m on first use), the sign
 * bit cleared, so |-0| is +0 and |-NaN| a NaN; one abs.f32 on NVPTX. */
LLVMValueRef llvm_fabs_f32(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef x);

/* Records "<what>: <msg>" on ctx, disposes msg (an LLVM message, may be NULL) and returns
 * ASTITCH_ERR_COMPILE. */
astitch_status llvm_fail_msg(astitch_context *ctx, const char *what, char *msg);
/* Same for an LLVMErrorRef, which it consumes. */
astitch_status llvm_fail_error(astitch_context *ctx, const char *what, LLVMErrorRef err);
/* Runs the LLVM verifier on m; ASTITCH_ERR_COMPILE with the verifier's message on failure. */
astitch_status llvm_verify(astitch_context *ctx, LLVMModuleRef m, const char *what);
/* Runs the pass pipeline text on m for tm; ASTITCH_ERR_COMPILE on failure. */
astitch_status llvm_run_passes(astitch_context *ctx, LLVMModuleRef m, const char *passes,
                               LLVMTargetMachineRef tm);
/* Parses LLVM IR text (copied) into a new module of context c. */
astitch_status llvm_parse_ir(astitch_context *ctx, LLVMContextRef c, const char *text,
                             const char *name, LLVMModuleRef *out);
/* While active, records the first error diagnostic LLVM reports on context c (linker,
 * bitcode reader, inline asm) instead of LLVM's default of printing it and exiting. */
typedef struct LlvmDiag {
    LLVMContextRef c;
    LLVMDiagnosticHandler old_fn;
    void *old_arg;
    bool error;
    char msg[512];
} LlvmDiag;
/* Installs d on c; llvm_diag_end restores the handler c had before. */
void llvm_diag_begin(LlvmDiag *d, LLVMContextRef c);
/* libdevice.c: links into m the __nv_* functions m declares (and what they call) from the
 * libdevice of the CUDA toolkit at `cuda`, for the target of tm; sets nvvm-reflect-ftz to 0. */
astitch_status libdevice_link(astitch_context *ctx, LLVMModuleRef m, LLVMTargetMachineRef tm,
                              const char *cuda, const LlvmDiag *d);
void llvm_diag_end(LlvmDiag *d);
/* Records "<what>: <first error diagnostic, or fallback>" on ctx; returns ASTITCH_ERR_COMPILE. */
astitch_status llvm_diag_fail(astitch_context *ctx, const LlvmDiag *d, const char *what,
                              const char *fallback);
/* Gives every function and global variable defined in m internal linkage, except the
 * functions named in keep (nkeep names). */
void llvm_internalize(LLVMModuleRef m, const char *const *keep, int nkeep);
/* Sets m's triple and data layout to those of tm. */
void llvm_set_target(LLVMModuleRef m, LLVMTargetMachineRef tm);

/* ---- target_nvptx.c ---------------------------------------------------------------------- */

typedef struct NvptxKernel {
    const char *name;
    int maxntid;  /* threads per block the kernel is launched with at most; 0: unset */
    int maxnreg;  /* registers per thread at most (the plan's register bound); 0: unset */
    int minctasm; /* blocks per SM the kernel must allow; 0: unset */
} NvptxKernel;

typedef struct NvptxOptions {
    int sm;                     /* compute capability x 10 (90 for sm_90); 0: 90 */
    const NvptxKernel *kernel;  /* the kernels of the module: every one must be listed */
    int nkernel;
    const char *cuda_path;      /* toolkit root for libdevice; NULL: env ASTITCH_CUDA_PATH,
                                   else the configured one */
} NvptxOptions;

/* Lowers kernel module m (consumed) to PTX for sm_<o->sm>: defines the primitives, links the
 * libdevice functions m calls, marks the listed kernels (PTX kernel calling convention,
 * nvvm.annotations with their bounds), internalizes everything else, runs O3 and emits PTX.
 * On success *ptx is NUL-terminated text the caller frees with free(). Errors:
 * ASTITCH_ERR_ARGUMENT (a kernel not defined in m, bad options), ASTITCH_ERR_IO (libdevice
 * missing), ASTITCH_ERR_COMPILE (LLVM's message: verifier, linker, passes, instruction
 * selection). */
astitch_status nvptx_compile(astitch_context *ctx, LLVMModuleRef m, const NvptxOptions *o,
                             char **ptx);
/* The CUDA toolkit root: env ASTITCH_CUDA_PATH when set and non-empty, else the configured
 * one. Constant or environment storage; do not free. */
const char *cuda_toolkit_path(void);

/* ---- prims_nvptx.c ----------------------------------------------------------------------- */

/* LLVM IR text defining every primitive for NVPTX (alwaysinline), and the external dynamic
 * shared-memory array `astitch_dynamic_smem`. */
const char *prims_nvptx_ir(void);

/* ---- target_host.c ----------------------------------------------------------------------- */

typedef struct HostModule HostModule;

/* Compiles kernel module m (consumed) for this machine into a new LLJIT: primitives bound to
 * rt's functions, math functions to libm, O2. On success *out owns the JIT. Errors:
 * ASTITCH_ERR_COMPILE with LLVM's message (verifier, passes, unresolved symbols at lookup). */
astitch_status host_compile(astitch_context *ctx, LLVMModuleRef m, const HostPrimitives *rt,
                            HostModule **out);
/* The address of kernel `name`, NULL when hm has no such function (the reason is recorded on
 * ctx, which may be NULL). Valid until host_module_destroy. */
void *host_lookup(HostModule *hm, astitch_context *ctx, const char *name);
void host_module_destroy(HostModule *hm); /* accepts NULL */

/* ---- host_symbols.c ---------------------------------------------------------------------- */

typedef struct HostSymbol {
    const char *name;
    void (*fn)(void); /* cast back to its real type before calling */
} HostSymbol;

enum { HOST_SYMBOLS_MAX = PRIM_COUNT + 4 * MATH_COUNT + 3 };

/* The functions host kernels may call, written to out (returns the count, at most
 * HOST_SYMBOLS_MAX): every primitive (rt's functions, where set; fence, fdiv, rcp and exp
 * here), every math function under its libdevice and its libm name, memcpy, memmove,
 * memset. */
int host_symbols(const HostPrimitives *rt, HostSymbol *out);

/* ---- ptxas.c ----------------------------------------------------------------------------- */

typedef struct PtxasKernel {
    char name[128];
    int registers;
    int spill_store_bytes;
    int spill_load_bytes;
    int stack_bytes;
    int shared_bytes; /* static shared memory ("smem"); dynamic shared memory is not counted */
} PtxasKernel;

typedef struct PtxasReport {
    PtxasKernel *kernel; /* in the order ptxas reported them */
    int nkernel;
    char *log;           /* ptxas's whole output, NUL-terminated */
} PtxasReport;

/* The ptxas program: <toolkit>/bin/ptxas when it exists, else the first on PATH; NULL when
 * there is none. The caller frees the string. */
char *ptxas_find(void);
/* Assembles ptx with the ptxas program exe (`-arch=sm_<sm> -v -o CUBIN`: the whole program, as
 * the driver's JIT compiles, not relocatable code) into *cubin (*size bytes) and *log (its
 * output, "" if none), both malloc'd; temporary files in TMPDIR. Safe from any thread. False
 * with the reason (ptxas's output where it failed) in why (len bytes) and nothing to free. */
bool ptxas_assemble(const char *exe, const char *ptx, int sm, void **cubin, size_t *size,
                    char **log, char *why, size_t len);
/* Assembles ptx with `ptxas -arch=sm_<sm> -v` into a discarded cubin and fills *r (free it with
 * ptxas_report_free). Errors: ASTITCH_ERR_UNSUPPORTED (no ptxas), ASTITCH_ERR_IO (temporary
 * files, spawning), ASTITCH_ERR_COMPILE (ptxas failed; its output is the message and stays in
 * r->log). On other errors *r is left empty. */
astitch_status ptxas_run(astitch_context *ctx, const char *ptx, int sm, PtxasReport *r);
/* Reads the per-function lines of a `ptxas -v` log into *r (r->log is left alone). Returns
 * false when out of memory. */
bool ptxas_parse(const char *log, PtxasReport *r);
/* The entry of kernel name in r, NULL when absent. */
const PtxasKernel *ptxas_kernel(const PtxasReport *r, const char *name);
void ptxas_report_free(PtxasReport *r); /* accepts NULL; leaves *r empty */

/* ---- ptx_pressure.c ---------------------------------------------------------------------- */

/* compile.c: where kernel `name`'s declaration in PTX text ptx starts (its name after
 * `.entry `), or NULL. */
const char *ptx_entry(const char *ptx, const char *name);

/* The most 32-bit registers kernel `name` of PTX text ptx keeps live at once in program order
 * (a register from its first mention to its last, one live into a loop to the loop's end;
 * predicates free, 64-bit registers two): an estimate of what ptxas needs, before ptxas. -1
 * when the kernel is not there or memory runs out. */
int ptx_live_registers(const char *ptx, const char *name);
/* Raises, in *ptx (p's whole kernels from compile_ptx, replaced), the register bound of each
 * kernel of a block per tile whose ptx_live_registers passes its bound by a margin (a wide one
 * for kernels that do not hold rows in registers, whose loops the estimate counts coarsely), to
 * the bound of one block fewer per SM (launch_next_bound): the bound the runtime would relax it
 * to after it spilled, without compiling it twice. Fails only when out of memory. */
astitch_status ptx_raise_bounds(astitch_context *ctx, const astitch_plan *p, char **ptx);

/* ---- kernel emission (emit*.c) ----------------------------------------------------------- */

/* Kernel emission reads a plan (lib/passes/plan.h) and writes one kernel function per stitch op
 * into a module, in the target-neutral form above.
 *
 *   emit.c         the module, each kernel's arguments and its phases in order
 *   emit_phase.c   a phase's thread-mapping loops and stores of its roots
 *   emit_reduce.c  a reduce phase: the lanes' walk over rows, their combine, the results
 *   emit_combine.c the combine of a row's lanes: shuffles, shared memory across warps
 *   emit_column.c  the vector form of a column reduce phase: runs of adjacent rows per thread
 *   emit_row.c     the vector form of a streamed row reduce phase: runs of a row per lane
 *   emit_online.c  a streamed row's max and sum of exp(x - max) in one walk (online softmax)
 *   emit_carry.c   values a walk keeps in shared memory for a later walk across a global
 *                  barrier
 *   emit_transpose.c  an element-wise phase walked in square tiles through shared memory, for
 *                  a transpose that moves the innermost axis
 *   emit_resident.c  a resident tile run: rows kept in registers across its phases
 *   emit_slot.c    a resident lane's slot computed as one run through a concatenate
 *   emit_guard.c   kernel inputs a select discards where its condition (read from no tensor)
 *                  fails: their loads are skipped there
 *   emit_value.c   the value of an op at an element: index propagation, a walk over the
 *                  operands on a stack of frames of its own
 *   emit_ops.c     the arithmetic of one element: element-wise ops, reductions' combines
 *   emit_divisor.c the emitted module's divisions that share a divisor: one reciprocal each
 *   emit_memory.c  loads and stores: f16/bf16 conversions, vectors, buffers, materialized
 *                  values, dense constants, the stores of a phase's roots
 */
typedef struct astitch_plan astitch_plan;

typedef struct EmitOptions {
    unsigned const_addrspace; /* address space of dense-constant tables: 0 host, 1 NVPTX */
    bool as_parts;        /* emit each kernel as parts cut at its global barriers (the
                               * fallback when its blocks cannot all be resident) */
    unsigned tensor_align;    /* bytes of alignment the runtime guarantees for the tensor and
                               * scratch arguments (16 on NVPTX, where it lets loads and stores
                               * merge into vector accesses); 0 or 1: none */
    bool check_shared;        /* every shared-memory access checks its index against its
                               * buffer and traps outside it (the host target: its SIMT
                               * runtime has no memory protection between blocks) */
    bool native_bf16;         /* f32 -> bf16 by LLVM's bfloat type (NVPTX sm_80 on: one
                               * cvt.rn.bf16.f32); else by integer arithmetic, same rounding */
    int64_t spill_gap;        /* parts form: bytes left free before each SHARED buffer kept in
                               * scratch (the host's redzones between them); 0 on NVPTX */
    const bool *lean;         /* per kernel, or NULL for none: its walks take one element (or
                               * run) per iteration, never a group (compile_ptx_lean) */
} EmitOptions;

/* The argument list of kernel k of plan p, as emitted: its input tensors (plan order), its
 * output tensors (plan order), then the scratch arena and the barrier counter. */
int emit_kernel_num_args(const astitch_plan *p, int k);
/* Scratch bytes the parts form of p needs: the plan's scratch, then room for the values the
 * whole kernels keep in shared memory, which the parts keep in global memory instead (a part
 * boundary clears shared memory), each whole tensor 256-byte aligned after `gap` free bytes
 * (EmitOptions.spill_gap). */
int64_t emit_parts_scratch_bytes(const astitch_plan *p, int64_t gap);
/* Where the parts form of kernel k keeps its SHARED buffers under that gap: spill[b] the
 * scratch offset of buffer b, -1 for a buffer of another kind (spill holds k's nbuf entries). */
void emit_parts_spill(const astitch_plan *p, int k, int64_t gap, int64_t *spill);
/* Parts of kernel k when cut at its global barriers: 1 + the number of global barriers. */
int emit_kernel_num_parts(const astitch_plan *p, int k);
/* The LLVM (and PTX) function name of kernel k (part < 0) or of its part `part`: the plan name
 * with '.' as '_', and "_s<part>" for parts. */
char *emit_kernel_name(const astitch_plan *p, int k, int part, char *buf, size_t len);

/* Emits every kernel of p into a new module of context c named after the graph. On success
 * *out is the module (the caller disposes it or hands it to a lowering). Errors:
 * ASTITCH_ERR_UNSUPPORTED for a plan shape the emitter cannot handle, named precisely;
 * ASTITCH_ERR_COMPILE if the module fails LLVM's verifier. */
astitch_status emit_plan(astitch_context *ctx, const astitch_plan *p, LLVMContextRef c,
                         const EmitOptions *o, LLVMModuleRef *out);

#endif

/* ---- emission state (emit*.c only) -------------------------------------------------------- */
#ifdef ASTITCH_EMIT_INTERNAL
#include "ir/ir.h"
#include "passes/plan.h"

/* An element of a tensor of shape *shape: its linear row-major index and/or its per-axis
 * indices; whichever is missing is derived on demand (ev_lin, ev_axes). */
typedef struct Index {
    const Shape *shape;
    LLVMValueRef lin;
    LLVMValueRef axis[MAX_RANK];
    bool has_axes;
} Index;

typedef struct Emit {
    astitch_context *ctx;
    const astitch_plan *plan;
    const astitch_graph *g;
    const PlanKernel *k;
    EmitOptions opt;
    LLVMContextRef c;
    LLVMModuleRef m;
    LLVMBuilderRef b;
    LLVMValueRef fn;
    LLVMTypeRef ix;          /* index type: i32 when every tensor has < 2^31 elements, else i64 */
    LLVMValueRef *tensor;    /* per graph node: its tensor argument in this kernel, or NULL */
    LLVMValueRef scratch;    /* the scratch arena */
    LLVMValueRef counter;    /* the grid-barrier counter */
    LLVMValueRef shared;     /* this block's dynamic shared memory */
    LLVMValueRef tid, ctaid; /* thread and block index, as ix */
    int32_t phase;           /* the phase being emitted */
    int32_t part_first;      /* first phase of the function being emitted */
    int64_t *spill;          /* parts form: per buffer of the kernel, the scratch offset that
                              * replaces a SHARED buffer, else -1 */
    LLVMValueRef *cache;     /* per graph node: its value at *cache_ix, or NULL */
    const Index *cache_ix;
    LLVMValueRef *vcache;    /* per graph node: VECTOR_MAX values at the run *vcache_ix
                              * (emit_vector.c), or NULLs */
    const Index *vcache_ix;
    LLVMValueRef *rowval;    /* resident run (emit_resident.c): per graph node, its value at
                              * the row being emitted, or NULL; NULL outside such a run */
    struct Resident *resident; /* resident run: the lane's tile whose element the cache is
                              * for (resident.h), else NULL */
    bool interleave;         /* no SHARED buffer and no block barrier before a run in the
                              * kernel (no run reads what its own block made in an earlier
                              * one): element-wise phases and
                              * resident runs take tiles ctaid, ctaid + grid, ... (all blocks
                              * sweep the tensors together) instead of a contiguous chunk */
    int32_t run_first;       /* resident run: its phases [run_first, run_end); run_end 0 */
    int32_t run_end;         /* outside one */
    int branch_depth;        /* > 0 inside conditional code: values there are not cached */
    int carry_mode;          /* CARRY_STORE or CARRY_LOAD while the walk emits the iterations
                              * it keeps (emit_carry.c), else CARRY_NONE */
    LLVMValueRef carry_start; /* the thread's first reduced index of that walk */
    int64_t carry_step;      /* reduced indices between two of its iterations */
    astitch_status status;   /* first failure; emission continues harmlessly after it */
} Emit;

/* emit_value.c */
enum { VECTOR_MAX = 16 }; /* most elements in one vector access or run */
LLVMValueRef ev_int(Emit *e, int64_t v);                  /* constant of type ix */
LLVMTypeRef ev_type(Emit *e, astitch_dtype t);            /* register type: f32, i32, i64, i1 */
LLVMValueRef ev_lin(Emit *e, Index *ix);
void ev_axes(Emit *e, Index *ix);
/* The value of node n at element *ix of its shape, in its register type. */
LLVMValueRef ev_value(Emit *e, int32_t n, Index *ix);
/* Empties the value cache and makes *ix its element: the values ev_value computes at it are
 * kept until the next call. */
void ev_begin_element(Emit *e, const Index *ix);
/* The element walks' stacks of frames (emit_value.c, emit_vector.c): *frames holds *n of *cap
 * frames of `size` bytes, in `local` (the walk's own array) or on the heap. Returns frame *n,
 * the new top (*n grows by one), doubling the frames first when full (moving them to the heap
 * from local); NULL when out of memory (the frames stay as they were). Frames move when the
 * stack grows: a walk finds a frame again by its index, never by a pointer kept across a push. */
void *ev_frames_push(void **frames, const void *local, int32_t *n, int32_t *cap, size_t size);
/* The element walks' memo of values computed at an index other than the element cache's: a
 * node at the index of one generation (the walk's own index is generation 0; each index a frame
 * derives for its operands gets a new one) maps to a slot of the walk's values. Within one
 * generation every value is emitted where the rest of that generation's code is dominated by
 * it, so a node read twice at one index (a select of v and a compare of v behind a slice) is
 * computed once, not once per path (exponential in a chain of such diamonds). */
typedef struct EvMemo {
    uint64_t *key;  /* (generation << 32 | node) + 1; 0 for an empty entry */
    int32_t *slot;
    int32_t cap, n; /* cap a power of two, 0 before the first entry */
} EvMemo;
int32_t ev_memo_find(const EvMemo *m, int32_t node, uint32_t gen); /* the slot, or -1 */
bool ev_memo_add(EvMemo *m, int32_t node, uint32_t gen, int32_t slot); /* false: no memory */
void ev_memo_free(EvMemo *m);

/* The index *sub, in the operand shape `source`, of the element *ix of broadcast `bcast` (a
 * size-1 operand axis reads index 0). */
void ev_broadcast_source(Emit *e, const Node *bcast, const Shape *source, Index *ix,
                         Index *sub);
/* The index *sub, in the operand shape `source`, of the element *ix of `transpose`. */
void ev_transpose_source(Emit *e, const Node *transpose, const Shape *source, Index *ix,
                         Index *sub);
/* The index *sub, in the slice's operand shape `source`, of the element *ix of slice `slice`. */
void ev_slice_source(Emit *e, const Node *slice, const Shape *source, Index *ix, Index *sub);

/* emit_vector.c */
/* Starts the runs at *ix: clears the run cache (and turns the element cache off). */
void ev_vector_begin(Emit *e, const Index *ix);
/* The values of node n at the v (<= VECTOR_MAX) consecutive elements from *ix, whose innermost
 * axis is a multiple of v in a shape whose innermost dimension v divides, into out[0 .. v). */
void ev_vector(Emit *e, int32_t n, Index *ix, int v, LLVMValueRef *out);

/* emit_memory.c */
/* Stores v, the value of root n at *ix, wherever the plan wants it (buffer, output tensor).
 * Inside a resident run, a SHARED buffer read only by the run's phases is not written: they
 * find the value in registers. */
void ev_store_root(Emit *e, int32_t n, Index *ix, LLVMValueRef v);
/* The buffer part of ev_store_root alone (no output tensor). */
void ev_store_root_buffer(Emit *e, int32_t n, Index *ix, LLVMValueRef v);
/* Stores n values vals (register type of t) at elements lin .. lin + n - 1 (lin a multiple of
 * n) with one vector store, aligned like ev_load_vector. */
void ev_store_vector(Emit *e, LLVMValueRef base, astitch_dtype t, LLVMValueRef lin, int n,
                     LLVMValueRef *vals);
/* Loads/stores element lin of a tensor of dtype t at base. */
LLVMValueRef ev_load(Emit *e, LLVMValueRef base, astitch_dtype t, LLVMValueRef lin);
void ev_store(Emit *e, LLVMValueRef base, astitch_dtype t, LLVMValueRef lin, LLVMValueRef v);
/* Loads elements lin .. lin + n - 1 (lin a multiple of n) with one vector load into out[0..n),
 * in t's register type; aligned to the whole vector when the tensor alignment allows. */
void ev_load_vector(Emit *e, LLVMValueRef base, astitch_dtype t, LLVMValueRef lin, int n,
                    LLVMValueRef *out);
/* With EmitOptions.check_shared, traps unless element index lin (of the buffer's dtype, or its
 * accumulators for REDUCE) lies inside shared buffer buf; nothing otherwise. */
void ev_check_shared(Emit *e, const PlanBuffer *buf, LLVMValueRef lin);
/* The address of buffer buf of the kernel (shared or scratch), as a generic pointer. */
LLVMValueRef ev_buffer_base(Emit *e, const PlanBuffer *buf);
/* Rounds an f32 register value to the precision of t (f16, bf16); other types unchanged. */
LLVMValueRef ev_round_to(Emit *e, astitch_dtype t, LLVMValueRef v);
/* The value of node n at *ix where an earlier phase materialized it (op, its plan entry) or,
 * op NULL, of a kernel input. */
LLVMValueRef ev_load_materialized(Emit *e, int32_t n, const PlanOp *op, Index *ix);
/* Dense constant n's table as a module global (in the options' address space), as a generic
 * pointer. */
LLVMValueRef ev_constant_table(Emit *e, int32_t n);

/* emit_divisor.c */
/* Rewrites the float divisions of m (calls of astitch_fdiv_f32) that share a divisor into
 * products with its reciprocal, taken once after the divisor's definition. Errors:
 * ASTITCH_ERR_MEMORY. */
astitch_status emit_share_divisors(astitch_context *ctx, LLVMModuleRef m);

/* emit_ops.c */
/* Element-wise op n (convert and select included) applied to its operands' values arg[0 ..
 * nin), in register types. */
LLVMValueRef ev_apply(Emit *e, int32_t n, LLVMValueRef *arg);
/* A constant of dtype t holding v, in its register type. */
LLVMValueRef ev_const(Emit *e, astitch_dtype t, double v);
/* Reduction helpers: the identity and the combination of kind k in register type of t. */
LLVMValueRef ev_reduce_identity(Emit *e, astitch_reduce_kind k, astitch_dtype t);
/* Where an accumulator over rows of len elements starts: the identity, or for len 0 the result
 * over no elements (reduce_empty: an empty float sum is +0). */
LLVMValueRef ev_reduce_start(Emit *e, astitch_reduce_kind k, astitch_dtype t, int64_t len);
LLVMValueRef ev_reduce_combine(Emit *e, astitch_reduce_kind k, astitch_dtype t, LLVMValueRef a,
                               LLVMValueRef b);

/* emit_value.c */
/* Records a failure (the first one is kept) and returns an undefined value of type ty. */
LLVMValueRef ev_fail(Emit *e, LLVMTypeRef ty, astitch_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same for a failure that concerns graph node `node` (astitch_last_error_node). */
LLVMValueRef ev_fail_node(Emit *e, int32_t node, LLVMTypeRef ty, astitch_status s,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* emit_phase.c */
/* Emits phases [first, end) of the kernel at the builder's position, after the barrier the
 * first one waits for: one phase as the plan maps it, a tile run (PlanPhase.run_first) as one
 * walk over the block's tiles, or a resident run (emit_resident_run). */
void emit_phase_run(Emit *e, int32_t first, int32_t end);
/* The values of phase root n at the run of v elements lin[0 .. v) of space (run: lin[0] with
 * its axes, ev_vector_begin'd): a root of the space's shape over the run, one with the space's
 * elements in another shape as a run of its own where its innermost dimension allows, else
 * element by element. */
void emit_run_value(Emit *e, int32_t n, const Shape *space, Index *run, const LLVMValueRef *lin,
                    int v, LLVMValueRef *out);
/* Begins the run of v elements at *run (its first element, whose innermost axis becomes a
 * multiple of v, for the alignment): ev_vector_begin. */
void emit_run_begin(Emit *e, const Shape *space, Index *run, int v);
/* The values of p's roots at the run begun at *run (lin its elements): a reduce root among red
 * (nred of them, in root order) valued at its operand; root r's into val[r * v .. r * v + v). */
void emit_run_values(Emit *e, const PlanPhase *p, const Shape *space, Index *run,
                     const LLVMValueRef *lin, int v, int32_t nred, const int32_t *red,
                     LLVMValueRef *val);
/* emit_run_begin, then emit_run_values. */
void emit_run_roots(Emit *e, const PlanPhase *p, const Shape *space, Index *run,
                    const LLVMValueRef *lin, int v, int32_t nred, const int32_t *red,
                    LLVMValueRef *val);
/* Stores root n's values val at those elements: its buffer element by element, its output
 * tensor with one vector store. */
void emit_run_store(Emit *e, int32_t n, const Shape *space, const LLVMValueRef *lin, int v,
                    LLVMValueRef *val);

/* emit_transpose.c: the one element-wise phase p of a kernel whose transpose is walked in
 * square tiles (PlanTile): the transpose's operand staged in shared memory in its own order,
 * then the roots evaluated and stored in the space's order. */
void emit_transposed(Emit *e, const PlanPhase *p);

/* emit_carry.c: values carried across a global barrier (PlanCarry, docs/codegen.md). */
enum { CARRY_NONE, CARRY_STORE, CARRY_LOAD };
/* What the phase being emitted does with the kernel's carried values: CARRY_STORE in
 * carry.from, CARRY_LOAD in carry.to, CARRY_NONE elsewhere and in the parts form. */
int emit_carry_role(const Emit *e);
/* The store of CARRY_STORE at the walk's element (or run of v elements) *ix at reduced index
 * j: every carried node's value there (already computed by the roots, so from the caches)
 * into its slot of the iteration (j - carry_start) / carry_step. */
void emit_carry_store(Emit *e, LLVMValueRef j, Index *ix, int v);
/* The loads of CARRY_LOAD at reduced index j, after the element (v = 1: ev_begin_element) or
 * run (ev_vector_begin) began: every carried node's value from its slot into the element or
 * run cache, where the phase's roots find it. */
void emit_carry_seed(Emit *e, LLVMValueRef j, int v);

/* emit_reduce.c */
/* Emits reduce phase p: over every tile of the block in a loop of its own, or, with tile_iv,
 * over that tile alone (the phase is part of a tile run, emit_phase_run). */
void emit_reduce(Emit *e, const PlanPhase *p, LLVMValueRef tile_iv);
/* The element (row, j) of reduction space `space` of mapping m: its kept axes from row, its
 * reduced axes from j (a linear index where the reduced axes are trailing or leading, else
 * axes). */
void emit_space_index(Emit *e, const astitch_mapping *m, const Shape *space, LLVMValueRef row,
                      LLVMValueRef j, Index *ix);
/* Elements (or runs of elements) per iteration of reduce phase p's element loop: more than one
 * where its thread takes enough of its row and reads few tensors per element (the rule and
 * its measurements: emit_reduce.c). */
int emit_elements_per_iteration(Emit *e, const PlanPhase *p);
/* Stores sum, the result of reduce root `root` at row `row` of mapping m, to its destinations
 * (a split row: combined with the other split blocks', emit_split_store). */
void emit_reduce_store(Emit *e, const astitch_mapping *m, int32_t root, LLVMValueRef row,
                       LLVMValueRef sum);

/* emit_combine.c */
/* How emit_combine_lanes folds the values of a row's lanes: n of them at once (a reduce: one;
 * the online softmax's pair: two), value i kept through the REDUCE buffer of root[i] (its
 * accumulator dtype, emit_acc_dtype), combine folding in[0 .. n) into acc[0 .. n). */
enum { LANE_FOLD_MAX = 2 };
typedef struct LaneFold LaneFold;
struct LaneFold {
    int n;
    int32_t root[LANE_FOLD_MAX];
    LLVMValueRef identity[LANE_FOLD_MAX]; /* constants: what the other lanes end with */
    astitch_reduce_kind kind;             /* of a single reduce (emit_combine_reduce) */
    astitch_dtype dtype;
    void (*combine)(Emit *e, const LaneFold *f, LLVMValueRef *acc, const LLVMValueRef *in);
};
/* Combines val[0 .. f->n) across the threads_per_row lanes of each row of mapping m (a column
 * mapping: its threads of a row); the row's lane 0 ends with the row's values, every other
 * lane with the identities when the values go through shared memory. All threads of the block
 * must arrive here (shuffles; for rows of several warps, and columns, the roots' REDUCE buffers
 * between two block barriers). */
void emit_combine_lanes(Emit *e, const astitch_mapping *m, const LaneFold *f, LLVMValueRef *val,
                        LLVMValueRef row_in_tile);
/* Combines acc, reduce root's lane value, across the lanes of each row of m; the row's lane 0
 * ends with the result (emit_combine_lanes). */
LLVMValueRef emit_combine_reduce(Emit *e, const astitch_mapping *m, int32_t root,
                                 LLVMValueRef acc, LLVMValueRef row_in_tile);
/* Shuffles v (any register type) by xor mask across the warp. */
LLVMValueRef emit_shfl_xor(Emit *e, LLVMValueRef v, int mask);
/* The type reduction accumulators of dtype t are kept in: f32 for floats, else t. */
astitch_dtype emit_acc_dtype(astitch_dtype t);

/* emit_column.c */
/* The roots of p at the runs of v rows from row (a multiple of v) at count reduced indices j,
 * j + step, ...: every run's tensors read first, with v-element accesses; then, run by run,
 * the reduce roots red fold into next[q * v + u] (from acc[q * v + u]) with row u's value and
 * the other roots are stored (one vector store to an output tensor). */
void emit_column_runs(Emit *e, const PlanPhase *p, const Shape *space, LLVMValueRef row,
                      LLVMValueRef j, int v, int64_t step, int count, int32_t nred,
                      const int32_t *red, const LLVMValueRef *acc, LLVMValueRef *next);
/* Combines acc[u] (u < v, every thread's accumulators of reduce root `root`) across the lanes
 * of each group and stores row tile_first + g * v + u's result (emit_reduce_store), for rows
 * in the mapping and, with tile_in_chunk (the tile's first row within the block's chunk; NULL
 * for a split row), in the block's chunk. Every accumulator goes into the root's reduction
 * buffer (plan_column_slots) before one block barrier; then up to 32 threads per group fold
 * each row's lanes and shuffle, and a second barrier frees the slots. All threads of the block
 * must arrive. */
void emit_column_combine(Emit *e, const astitch_mapping *m, int32_t root, int v,
                         const LLVMValueRef *acc, LLVMValueRef tile_first,
                         LLVMValueRef tile_in_chunk);

/* emit_row.c */
/* The most elements (or runs of elements) one iteration of a reduction's element loop takes:
 * the bound of emit_row_runs's count and of emit_reduce.c's unrolled loops. */
enum { ITERATION_ELEMENTS_MAX = 32 };
/* The roots of p at count runs of v elements of the row `row`, from reduced indices j, j +
 * step, ... (multiples of v): every value first, each tensor read with v-element accesses;
 * then the reduce roots red fold every run's values in order into next[q] = acc[q] combined
 * with them, and the other roots are stored (one vector store to an output tensor). */
void emit_row_runs(Emit *e, const PlanPhase *p, const Shape *space, LLVMValueRef row,
                   LLVMValueRef j, int64_t step, int count, int v, int32_t nred,
                   const int32_t *red, const LLVMValueRef *acc, LLVMValueRef *next);

/* emit_online.c */
/* Emits phases pm and ps (plan_online_pair: a streamed row's max, then the sum of exp(x - max))
 * for tile tile_iv of a tile run in one walk: each lane keeps a running (max, sum) pair, the
 * row's lanes combine pairs, and the row's lane 0 stores both results where the two phases
 * would have. */
void emit_online(Emit *e, const PlanPhase *pm, const PlanPhase *ps, LLVMValueRef tile_iv);

/* emit_guard.c */
/* Kernel input `in` matters only where select *select takes its arm *when (true: operand 1):
 * every use of it reaches that arm through element-wise ops and reshapes of one use each, none
 * a graph output, and the select's condition reads no tensor or buffer, so it can be computed
 * before the load. False when not. */
bool emit_load_guard(const Emit *e, int32_t in, int32_t *select, bool *when);

/* emit_resident.c */
/* Emits the resident run [first, end) (PlanPhase.resident): one walk over the block's tiles;
 * on each, every lane loads its part of the row once (map.vector elements per access) and
 * keeps every value it computes from it in registers across the run's phases; reductions end
 * in every lane of the row (warp shuffles, and a shared-memory exchange across the row's warps
 * when it has several); the run's phases read each other's results from registers, with no
 * block barrier between them. */
void emit_resident_run(Emit *e, int32_t first, int32_t end);


/* A counted loop iv = start; iv < end; iv += step (type ix), with loop-carried values. */
typedef struct Loop {
    LLVMBasicBlockRef head, body, exit;
    LLVMValueRef iv;
    LLVMValueRef *carried; /* phis in head */
    int ncarried;
} Loop;
void loop_begin(Emit *e, Loop *l, LLVMValueRef start, LLVMValueRef end, LLVMValueRef *init,
                int ncarried, LLVMValueRef *carried);
/* Closes the loop; next[i] are the carried values at the end of the body. After it, the
 * builder is at the exit, where l->carried[i] hold the final values. */
void loop_end(Emit *e, Loop *l, LLVMValueRef step, LLVMValueRef *next);
/* if (cond) { ... }: returns the merge block; the builder is in the then block. */
LLVMBasicBlockRef if_begin(Emit *e, LLVMValueRef cond);
void if_end(Emit *e, LLVMBasicBlockRef merge);

/* emit_split.c */
/* Lane 0 of row `row` of a split reduce phase (mapping m) holds acc, its block's partial
 * result of reduce root `root`: combines it with the other split blocks' into the root's
 * destinations, by atomics (PlanOp.zero_init) or in split order through its PARTIAL buffer. */
void emit_split_store(Emit *e, const astitch_mapping *m, int32_t root, LLVMValueRef row,
                      LLVMValueRef acc);
/* Combines v into the element at `at` (global or shared memory) with the atomic of reduce
 * root's kind and dtype (f32 sum, max, min; i32 sum); fails on Emit for any other. */
void emit_atomic_combine(Emit *e, int32_t root, LLVMValueRef at, LLVMValueRef v);
#endif
