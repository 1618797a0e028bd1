/*
 * astitch/runtime.h: compile a graph once into an executable, run it many times.
 *
 * Targets
 *   reference  the op-by-op interpreter (the numerical oracle)
 *   host       the generated kernels, compiled for this CPU and run by a SIMT runtime (one
 *              fiber per GPU thread); plans for a small virtual device
 *   cuda       the generated kernels as PTX on an NVIDIA GPU through the driver API
 *   auto       cuda when a driver and a device are present, else host
 *
 * Ownership and threads: an executable refers to its graph, which must outlive it and must not
 * change. One thread at a time may run an executable (runs reuse its workspace); separate
 * executables may run at once, on separate streams.
 */
#ifndef ASTITCH_RUNTIME_H
#define ASTITCH_RUNTIME_H

#include "astitch/astitch.h"
#include "astitch/plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum astitch_target {
    ASTITCH_TARGET_AUTO,
    ASTITCH_TARGET_REFERENCE,
    ASTITCH_TARGET_HOST,
    ASTITCH_TARGET_CUDA
} astitch_target;

ASTITCH_API const char *astitch_target_name(astitch_target t);
/* "auto", "reference", "host", "cuda" -> ASTITCH_OK, else ASTITCH_ERR_ARGUMENT. */
ASTITCH_API astitch_status astitch_target_from_name(const char *name, astitch_target *t);

typedef struct astitch_compile_options {
    astitch_target target;
    astitch_plan_options plan;
    /* Device model to plan for: NULL for the target's own (the driver's for cuda, the virtual
     * host device for host). */
    const astitch_device *device;
    /* cuda: where the planner leaves a launch shape to a measurement (plan switches whose
     * forms no rule orders: wide_rows, column_sums_in_rows, with persistent, split_barriers,
     * long_rows),
     * every form that changes the plan is compiled and the first execution not captured into a
     * CUDA graph times each and keeps the fastest; the choice is kept in the compile cache, so a
     * later compile of the same graph loads only the chosen form. Among them, a form whose one
     * kernel holds rows in registers is also timed at its next register bound (the bound
     * search). Likewise each dot on cuBLASLt times the heuristic's first algorithms at that
     * execution and keeps the fastest. Off: the planner's default, its bound raised only
     * where it spills, and the heuristic's first algorithm only (the same choices in every
     * process). See astitch_executable_variant and docs/codegen.md, *Variant search*. */
    bool variant_search;
    /* cuda: the executable holds no device memory of its own for runs (temporaries between
     * kernels, scratch, barrier counters); each run takes it from the caller
     * (astitch_execute_device_workspace), so that a framework's allocator accounts for it.
     * Such an executable runs only through that call; cuBLASLt's workspace for dots on the
     * GPU comes from it too; a graph with a compute op on the host is refused
     * (ASTITCH_ERR_UNSUPPORTED). Off by default. */
    bool caller_workspace;
    /* An output that is a parameter seen through reshapes, transposes and slices that move no
     * element (astitch_output_view) is not computed: runs on device pointers leave it alone
     * (its pointer may be 0) and the caller takes it as a view of its input, as frameworks do;
     * astitch_execute fills it from the input when its pointer is not NULL. When every output
     * is such a view, output 0 is written as without the option. Off by default: every output
     * is written. See docs/codegen.md, *View outputs*. */
    bool view_outputs;
} astitch_compile_options;

/* Defaults: target auto, planner defaults, the target's device, variant search on, every
 * output written (view_outputs off). */
ASTITCH_API void astitch_compile_options_default(astitch_compile_options *o);

typedef struct astitch_executable astitch_executable;

/* Plans and compiles g (which must verify) for the chosen target. Errors:
 * ASTITCH_ERR_NO_DEVICE (cuda asked for, none present), ASTITCH_ERR_COMPILE, ... */
ASTITCH_API astitch_status astitch_compile(astitch_graph *g, const astitch_compile_options *o,
                                           astitch_executable **out);
ASTITCH_API void astitch_executable_destroy(astitch_executable *x);
/* The target actually used (auto resolved). */
ASTITCH_API astitch_target astitch_executable_target(const astitch_executable *x);
/* The plan the executable runs; NULL for the reference target. Owned by x. While a variant
 * search is PENDING (astitch_executable_variant) this is the planner's default form, and the
 * first execution may replace it with the fastest form's plan: take it again after a run. */
ASTITCH_API const astitch_plan *astitch_executable_plan(const astitch_executable *x);

/* The variant search of an executable (astitch_compile_options.variant_search). */
typedef enum astitch_variant_state {
    ASTITCH_VARIANT_NONE,     /* no search: off, not cuda, no other form nor trial applies or
                               * could be built, or the timing failed (the planner's default runs; the
                               * search never fails a compile or a run) */
    ASTITCH_VARIANT_PENDING,  /* the forms (and trials) compiled, the first execution will time
                               * them */
    ASTITCH_VARIANT_TIMED,    /* timed at the first execution; us[] holds the times */
    ASTITCH_VARIANT_CACHED,   /* chosen by an earlier timing, found in the compile cache */
    ASTITCH_VARIANT_CAPTURED  /* the first execution was being captured into a CUDA graph, so
                               * nothing was timed and the planner's default stays */
} astitch_variant_state;

/* The forms the variant search chooses among, by index: 0 the caller's options as given, then
 * plan switches turned on over them (docs/codegen.md, *Variant search*). */
#define ASTITCH_VARIANT_FORMS 6

typedef struct astitch_variant_info {
    astitch_variant_state state;
    int form;                 /* the form that runs, 0..ASTITCH_VARIANT_FORMS-1 (PENDING: 0) */
    bool wide_rows;           /* the plan switches of the form that runs */
    bool long_rows;
    bool column_sums_in_rows;
    bool persistent;
    bool split_barriers;
    int nforms;               /* forms compiled for the search, the default's included (1 when
                               * NONE or CACHED) */
    double us[ASTITCH_VARIANT_FORMS]; /* TIMED: microseconds of each form by index, the fastest
                                       * of its timed runs; 0 for a form not built or not timed */
    int ntrials;              /* the bound search's trials compiled: forms built again with
                               * their kernel that holds rows in registers at its next register
                               * bound (docs/codegen.md, *Variant search*) */
    bool raised_bound;        /* TIMED: the form that runs is its trial, faster at the next
                               * bound than at the planned one (a bound recorded so by an
                               * earlier search loads as relaxed: astitch_loaded_kernel) */
    double us_raised[ASTITCH_VARIANT_FORMS]; /* TIMED: each form's trial by index, as us[]; 0
                                              * for a form without one */
    int dots_chosen;          /* dots on cuBLASLt whose algorithm the search chose among the
                               * heuristic's first ones (timed, or from the compile cache) */
    int dots_not_first;       /* of those, the dots that run another than the heuristic's first */
} astitch_variant_info;

/* The switches form i turns on, as text ("default", "wide rows", "column sums in rows",
 * "column sums in rows, persistent", "barriers split"); NULL outside
 * 0..ASTITCH_VARIANT_FORMS-1. */
ASTITCH_API const char *astitch_variant_form_name(int i);

/* Fills *out for x. ASTITCH_ERR_ARGUMENT for a NULL argument. */
ASTITCH_API astitch_status astitch_executable_variant(const astitch_executable *x,
                                                      astitch_variant_info *out);

/* Where astitch_compile's time went for x: wall milliseconds of the calling thread, the
 * variant search's forms included. Work done meanwhile on other threads or processes (modules
 * compiled ahead) shows only where this thread waited for it, in load_ms. */
typedef struct astitch_compile_times {
    double total_ms; /* astitch_compile, from entry to return */
    double plan_ms;  /* planning: the executable's plan and its forms' */
    double ptx_ms;   /* plans to PTX (LLVM), with the wait for the variant search's helper
                      * threads doing the same; 0 for plans found in the compile cache */
    double load_ms;  /* PTX to loaded modules: the driver's JIT, or the wait for and load of a
                      * module compiled ahead; the rest of total_ms is the host side (views,
                      * buffers, the dots' cuBLASLt set-up) */
    int jit_modules;   /* modules the driver's JIT compiled in this thread */
    int ahead_modules; /* modules loaded from a cubin: compiled ahead, or by nvJitLink */
} astitch_compile_times;

/* Fills *out for x (all zero for the reference target). ASTITCH_ERR_ARGUMENT for a NULL
 * argument. */
ASTITCH_API astitch_status astitch_executable_compile_times(const astitch_executable *x,
                                                            astitch_compile_times *out);

/* What the cuda target loaded for kernel k of x's plan. The plan's register bound is an
 * assumption: a kernel of a block per tile whose compiled form spills at it is loaded again with
 * a higher bound, and `bound` says which one it runs with; a kernel whose grid must be resident
 * (persistent, or with global barriers) keeps its bound and is emitted again in its lean form
 * instead, one element per iteration of its walks (docs/codegen.md, *Targets*). */
typedef struct astitch_loaded_kernel {
    int regs;           /* registers per thread, as compiled */
    int bound;          /* the register bound it was compiled with: the plan's, raised where
                         * the code's estimated live registers passed it, or relaxed after a
                         * spill (docs/codegen.md, *Targets*) */
    int planned_bound;  /* the plan's (astitch_kernel_info.regs) */
    long local_bytes;   /* local memory per thread (spills): 0 unless even the last bound spilled */
    int blocks_per_sm;  /* resident blocks per SM at that register count */
    bool lean;          /* emitted in its lean form, since the first form spilled */
} astitch_loaded_kernel;

/* Fills *out for kernel k of a cuda executable. ASTITCH_ERR_ARGUMENT for a NULL argument or a
 * k out of range, ASTITCH_ERR_UNSUPPORTED for another target (whose kernels have no registers
 * to report). */
ASTITCH_API astitch_status astitch_executable_loaded_kernel(const astitch_executable *x, int k,
                                                            astitch_loaded_kernel *out);

/* Output i of an executable compiled with view_outputs, as a view of an input: its element
 * (i0, i1, ...) is element offset + sum(i_d * strides[d]) of input `input` (dense, row-major,
 * in the output's dtype). Strides and offset count elements, not bytes. */
typedef struct astitch_output_view {
    int input;
    int64_t offset;
    int rank;                          /* the output's */
    int64_t strides[ASTITCH_MAX_RANK];
} astitch_output_view;

/* Whether runs of x leave output i to the caller as a view of an input: *is_view, and *view
 * filled when it is. ASTITCH_ERR_ARGUMENT for a NULL argument or an i out of range. */
ASTITCH_API astitch_status astitch_executable_output_view(const astitch_executable *x, int i,
                                                          bool *is_view,
                                                          astitch_output_view *view);

/* Copies view output i of x from `input` (host memory holding the input it views) into dst,
 * dense and row-major, as astitch_execute fills it. ASTITCH_ERR_ARGUMENT for a NULL argument, an
 * i out of range or an output that is not a view. */
ASTITCH_API astitch_status astitch_executable_view_copy(const astitch_executable *x, int i,
                                                        const void *input, void *dst);

/* Runs x on host buffers (inputs[i]: parameter i, outputs[i]: output i, dense row-major) and
 * returns when the outputs are written. For cuda, copies through device memory. No output may
 * overlap an input or another output (ASTITCH_ERR_ARGUMENT naming both; empty tensors take no
 * memory). */
ASTITCH_API astitch_status astitch_execute(astitch_executable *x, const void *const *inputs,
                                           void *const *outputs);

/* Device tensors passed to astitch_execute_device must start at a multiple of this many bytes
 * (what cuMemAlloc and the frameworks' allocators give; a view at an odd offset may not). */
#define ASTITCH_TENSOR_ALIGN 16

/* cuda only: runs x on device pointers (CUdeviceptr values) in `stream` (a CUstream, NULL for
 * the default stream) of the device's primary context, asynchronously: it returns after the
 * launches are queued. Every non-empty input and output must be ASTITCH_TENSOR_ALIGN-aligned
 * (ASTITCH_ERR_ARGUMENT, naming the tensor, otherwise), and no output may overlap an input or
 * another output (kernels read their inputs while they write their outputs: ASTITCH_ERR_ARGUMENT
 * naming both).
 *
 * CUDA graphs: a run may be captured (cuStreamBeginCapture on `stream`, in any mode; this call;
 * cuStreamEndCapture) and the graph replayed with the same results. The run queues only
 * asynchronous work on `stream` (launches, memsets of x's workspace and of split-reduction
 * outputs, device-to-device copies) and neither allocates nor synchronizes. A replay uses the
 * device pointers the captured call was given (write new inputs into those buffers) and x's
 * workspace: keep x alive while the graph may be launched, and keep replays and other runs of x
 * from overlapping (queue them on one stream). Dots on cuBLASLt are captured too (one
 * cublasLtMatmul each); a plan with a compute op on the host (astitch_executable_host_compute_ops)
 * cannot be captured: on a capturing stream the call queues nothing and returns
 * ASTITCH_ERR_UNSUPPORTED naming the op; the capture stays valid. After any other error the
 * capture may hold part of the run: discard its graph. */
ASTITCH_API astitch_status astitch_execute_device(astitch_executable *x, const uint64_t *inputs,
                                                  const uint64_t *outputs, void *stream);

/* cuda only, for profiling: one run as astitch_execute_device, with a CUDA event recorded on
 * `stream` before the first step of x's plan and after each one; waits for the run and writes
 * step i's time in microseconds (from the end of step i - 1 to the end of step i) to
 * step_us[i], for the nstep = astitch_plan_num_steps steps of astitch_executable_plan(x),
 * kernels and compute ops alike. Refuses a stream under capture and an executable compiled
 * with caller_workspace. */
ASTITCH_API astitch_status astitch_execute_device_timed(astitch_executable *x,
                                                        const uint64_t *inputs,
                                                        const uint64_t *outputs, void *stream,
                                                        double *step_us, int nstep);

/* How many of x's compute ops (dot, custom) run on the host between kernels, through the
 * reference interpreter: on the cuda target those cuBLASLt does not take (integer dots, layouts
 * that are not one strided-batched GEMM, custom ops; all of them under the context switch
 * host_compute); on the host and reference targets all of them. A run of x can be captured
 * into a CUDA graph only when this is 0. 0 for NULL. */
ASTITCH_API int astitch_executable_host_compute_ops(const astitch_executable *x);

/* cuda only: the bytes of device memory one run of x uses besides its inputs and outputs (the
 * temporaries between its kernels, split-reduction partials, barrier counters), at least 256;
 * while a variant search is PENDING, the largest of its forms' needs. ASTITCH_ERR_UNSUPPORTED
 * for another target. */
ASTITCH_API astitch_status astitch_executable_workspace_bytes(const astitch_executable *x,
                                                              size_t *bytes);

/* astitch_execute_device with the run's memory from the caller: `workspace` (a CUdeviceptr,
 * ASTITCH_TENSOR_ALIGN-aligned) of workspace_bytes >= astitch_executable_workspace_bytes. The
 * run (and the first run's variant timing) uses it instead of x's own memory; it must stay
 * allocated until the work queued on `stream` has finished (stream order suffices, as with a
 * framework's caching allocator), and runs in flight at once need separate workspaces. The
 * only way to run an executable compiled with caller_workspace; the rules of
 * astitch_execute_device (capture, alignment, errors) apply. */
ASTITCH_API astitch_status astitch_execute_device_workspace(astitch_executable *x,
                                                            const uint64_t *inputs,
                                                            const uint64_t *outputs, void *stream,
                                                            uint64_t workspace,
                                                            size_t workspace_bytes);

/* What the compiler generates for g under o: "llvm" (target-neutral kernel IR) or "ptx"
 * (for the device model's sm version, 90 when the model has none). *text: free with
 * astitch_free. */
ASTITCH_API astitch_status astitch_emit(astitch_graph *g, const astitch_compile_options *o,
                                        const char *what, char **text);

#ifdef __cplusplus
}
#endif
#endif
