/*
 * runtime.h: executables, private to libastitch. A map of lib/runtime:
 *
 *   exec.c         the public executable API (astitch/runtime.h): compile, target dispatch,
 *                  where every value lives during a run, split-reduction initial values
 *   exec_host.c    running an executable's steps on the host SIMT runtime
 *   exec_cuda.c    running them on a GPU: device buffers, launches, fallback
 *   exec_cuda_load.c     its PTX loaded, with the register feedback (relaxed bounds, lean
 *                        forms) and the parts of kernels that cannot be resident
 *   exec_cuda_compute.c  its compute steps: cuBLASLt, custom device forms, or the host
 *   exec_cuda_fill.c     the fills before a kernel (identities, counters) in one launch
 *   exec_dot.c     dots on the GPU through cuBLASLt (cublaslt.h), over the GEMM each is
 *                  (passes/dot_gemm.h)
 *   view_outputs.c outputs left to the caller as views of an input (view_outputs)
 *   variant.c      the variant search: the forms of a plan the cost model cannot rank,
 *                  timed at the first run (docs/codegen.md, *Variant search*)
 *   compile_cache*.c  the PTX cache and the search's choices (compile_cache.h)
 *   compile_clock.c   where a compile's time goes (compile_clock.h)
 *   simt*.c        the host SIMT runtime (simt.h)
 *   cuda_*.c       the CUDA driver, loaded with dlopen (cuda_driver.h)
 */
#ifndef ASTITCH_RUNTIME_PRIVATE_H
#define ASTITCH_RUNTIME_PRIVATE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "astitch/runtime.h"
#include "codegen/compile.h"
#include "ir/ir.h"
#include "passes/plan.h"

/* Where a node's value lives during a run. */
typedef enum SlotKind {
    SLOT_NONE,   /* never read across steps (lives inside one kernel) */
    SLOT_INPUT,  /* the caller's input `index` (a parameter) */
    SLOT_OUTPUT, /* the caller's output `index` */
    SLOT_TEMP    /* the executable's temporary arena at `offset` */
} SlotKind;

typedef struct Slot {
    SlotKind kind;
    int index;
    size_t offset;
    size_t bytes;
} Slot;

/* Bytes of a run's grid-barrier counters (u32 words; a whole kernel uses the first): laid out
 * just before the scratch arena, so that zeroing them and the scratch's identity fills that
 * start the arena merge into one fill. */
#define EXEC_COUNTER_BYTES 256

/* Words set before a kernel runs: `words` 32-bit words from dst to bits. */
typedef struct ExecFill {
    uint64_t dst;
    uint32_t bits;
    int64_t words;
    bool own; /* in the run's counters and scratch, one allocation (a memset may not span two:
               * the caller's tensors may lie end to end in separate ones) */
} ExecFill;

/* A destination a split reduction combines into by atomics: it must hold the reduction's
 * identity before the kernel runs. */
typedef struct SplitInit {
    int32_t node;
    bool scratch;     /* at scratch + offset; else the node's own slot */
    size_t offset;
    int64_t elements;
    uint32_t bits;    /* the identity's 32-bit pattern (f32 or i32) */
} SplitInit;

typedef struct ExecCuda ExecCuda;
typedef struct ViewOutputs ViewOutputs;

struct astitch_executable {
    astitch_context *ctx;
    astitch_graph *g;    /* the graph it runs: the plan's (the caller's, or a rewritten copy) */
    astitch_target target;
    astitch_plan *plan;
    Slot *slot;          /* per node */
    void **const_data;   /* per node: the value of a constant or iota that no kernel owns but
                          * a compute op reads (computed once at compile time), else NULL */
    size_t temp_bytes;
    HostKernels *hk;     /* host: whole kernels */
    HostKernels *hk_parts; /* host: parts of every kernel, when some kernel needs the fallback */
    bool *as_parts;        /* host: per kernel, runs as parts */
    ExecCuda *cuda;      /* cuda */
    astitch_variant_info variant; /* the variant search (variant.c) */
    astitch_executable *alt; /* PENDING: the search's other forms, compiled, not yet run: a
                              * chain through each form's own alt (variant.c) */
    bool dot_search;       /* cuda, variant search on: the dots' algorithms are still to be
                            * chosen at the first run outside a capture (variant.c) */
    bool bound_trial;      /* cuda: built by the bound search, its form's plan with the kernel
                            * of exec_cuda_bound_searchable at its next register bound
                            * (variant.c) */
    bool caller_workspace; /* cuda: runs take their workspace from the caller
                            * (astitch_compile_options.caller_workspace) */
    ViewOutputs *views;    /* outputs left as views (view_outputs), or NULL: x->g's outputs
                            * are then the caller's */
    astitch_compile_times times; /* where astitch_compile's time went (compile_clock.h) */
};

/* exec.c */
/* Plans x->g under po for dev and prepares x to run (x->target resolved; x->cuda open for
 * cuda). On failure x holds what was made, for astitch_executable_destroy. */
astitch_status exec_build(astitch_executable *x, const astitch_device *dev,
                          const astitch_plan_options *po);
/* The destinations kernel k must have initialized; returns the count (0..n) written to out. */
int exec_split_inits(const astitch_plan *p, int k, SplitInit *out, int n);

/* view_outputs.c (docs/codegen.md, *View outputs*) */
/* *out: the view outputs of g, or NULL when it has none (g runs as it is). */
astitch_status views_create(const astitch_graph *g, ViewOutputs **out);
void views_destroy(ViewOutputs *v); /* accepts NULL */
/* The graph an executable with views runs: g without the outputs left as views. */
astitch_graph *views_graph(const ViewOutputs *v);
/* The caller's index of output j of views_graph (j itself for NULL v). */
int32_t views_caller_index(const ViewOutputs *v, int32_t j);
/* A run's output arrays, the caller's, as views_graph's (the same arrays for NULL v): the
 * pointers of view outputs are left out. Valid until the next call on v. */
void *const *views_host_outputs(ViewOutputs *v, void *const *outputs);
const uint64_t *views_device_outputs(ViewOutputs *v, const uint64_t *outputs);
/* Fills the view outputs of a run that are given (not NULL) from host inputs (nothing for
 * NULL v). */
void views_fill_host(const ViewOutputs *v, const void *const *inputs, void *const *outputs);

/* variant.c: the variant search (docs/codegen.md, *Variant search*) */
/* The most executables the search times at once: each form, and each form's bound trial. */
enum { VARIANT_RUNS = 2 * ASTITCH_VARIANT_FORMS };
/* After x was planned from g under po for dev (cuda), before it is prepared: where another
 * form will be built (every form, or the recorded choice), modules compile ahead, and the
 * compile cache keeps PTX for the builds to find it again, the LLVM steps of x's plan and of
 * each other form run here, at once on this thread and up to two helper threads, and each
 * module starts compiling ahead as soon as its PTX is there (exec_cuda_compile_ahead). Nothing
 * fails here: what is not started is compiled where it is loaded. */
void exec_variant_ahead(astitch_executable *x, astitch_graph *g, const astitch_device *dev,
                        const astitch_plan_options *po);
/* After x was built from g under po for dev (cuda): when another form of the search applies
 * (its plan's kernels differ), takes the choice the compile cache recorded, or compiles every
 * such form into the chain x->alt and, after each executable of that search whose kernel
 * that holds rows in registers may run at a higher register bound
 * (exec_cuda_bound_searchable), a trial of it at that bound; PENDING when any joined. */
astitch_status exec_variant_prepare(astitch_executable *x, astitch_graph *g,
                                    const astitch_device *dev, const astitch_plan_options *po);
/* PENDING: times the forms and trials on these device pointers in `stream`
 * (exec_cuda_time_forms, synchronizing once), keeps the fastest in x and records the choice
 * and the bound search's verdict for its form (exec_cuda_bound_record); on a capturing stream
 * keeps the default untimed (CAPTURED). Then, outside a capture, the dots' algorithm search
 * of the form kept (x->dot_search, exec_cuda_settle_dots), once. */
astitch_status exec_variant_settle(astitch_executable *x, const uint64_t *inputs,
                                   const uint64_t *outputs, void *stream);
/* The same for a run from host memory: the inputs are copied to device buffers for it. */
astitch_status exec_variant_settle_host(astitch_executable *x, const void *const *inputs);

/* One run of a plan, for every target: exec_run_steps owns the order (each step, a kernel or a
 * compute op, then the outputs that are parameters) and each kernel's argument list and
 * split-reduction initial values; a target gives the few primitives that differ (ExecTarget)
 * and a run that starts with an ExecRun. */
typedef struct ExecRun ExecRun;
typedef struct ExecTarget {
    /* The address of node n's value in this run: an input, an output or a temporary. */
    uint64_t (*value)(ExecRun *r, int32_t n);
    /* Queues the n fills (n >= 1) before the next launch. */
    astitch_status (*fill)(ExecRun *r, const ExecFill *fills, int n);
    /* Launches kernel k (grid > 0) with args, its argument list (compile_kernel_num_args of
     * them), whole or as its parts. */
    astitch_status (*launch)(ExecRun *r, int k, const uint64_t *args, int nargs);
    /* Runs compute op n. */
    astitch_status (*compute)(ExecRun *r, int32_t n);
    /* Copies graph output i, parameter node n, from its input. */
    astitch_status (*copy_param)(ExecRun *r, int i, int32_t n);
} ExecTarget;
struct ExecRun {
    astitch_executable *x;
    const ExecTarget *t;
    uint64_t scratch;  /* the scratch arena */
    uint64_t counters; /* the grid-barrier counters */
    /* NULL, or called after step i is queued (a timed run records an event there) */
    astitch_status (*after_step)(ExecRun *r, int32_t i);
};
astitch_status exec_run_steps(ExecRun *r);
/* What r sets before kernel k runs, into out (room for 2 * the kernel's ops + 2): the split
 * reductions' identities (exec_split_inits) and, for a kernel with grid barriers, its counters
 * zeroed; sorted by address, a fill of the counters and scratch that starts where the one
 * before ends, with the same bits, merged into it. Returns their count, -1 when out of memory. */
int exec_kernel_fills(ExecRun *r, int k, ExecFill *out);

/* exec_host.c */
astitch_status exec_host_prepare(astitch_executable *x);
astitch_status exec_host_run(astitch_executable *x, const void *const *inputs,
                             void *const *outputs);

/* exec_cuda.c */
/* Opens the driver and device (ASTITCH_ERR_NO_DEVICE if none) and fills *dev with its model. */
astitch_status exec_cuda_open(astitch_context *ctx, ExecCuda **out, astitch_device *dev);
/* Compiles x->plan to PTX and loads it. */
astitch_status exec_cuda_prepare(astitch_executable *x);
/* For the variant search: x's compute capability as sm (90); whether stream is capturing a
 * CUDA graph; runs x[0 .. n) in turn, four rounds, on stream, each run after a fill of twice
 * the L2 (inputs out of the cache), and gives the fastest of each one's last three runs in
 * us[i], synchronizing. */
int exec_cuda_sm(const astitch_executable *x);
/* exec_cuda_load.c: plan p's PTX for sm_<sm> (through the compile cache, LLVM in the calling
 * thread), then its module starts compiling on a worker thread for thread `owner`
 * (cubin_job_start_for), and the module of its next register bound where that can be guessed;
 * nothing where ctx compiles nothing ahead (cuda_module_compiles_ahead). ctx may be a shadow
 * of the compile's context (ctx_shadow), so that several threads run this at once. */
void exec_cuda_compile_ahead(astitch_context *ctx, int sm, const astitch_plan *p,
                             pthread_t owner);
astitch_status exec_cuda_capturing(astitch_executable *x, void *stream, bool *capturing);
astitch_status exec_cuda_time_forms(astitch_executable *const *x, int n, const uint64_t *in,
                                    const uint64_t *out, void *stream, double *us);
/* The dots' algorithm search: where a dot of x has several candidates (exec_dots_searchable),
 * takes the choices the compile cache recorded for x's plan, or runs x once on these device
 * pointers with the dots timing their candidates (synchronizing), and records the choices.
 * The stream must not be capturing. */
astitch_status exec_cuda_settle_dots(astitch_executable *x, const uint64_t *in,
                                     const uint64_t *out, void *stream);
/* The device buffers of x's inputs and outputs that exec_cuda_run_host uses (allocated at the
 * first call, kept in x), with the inputs copied in: *io (malloc'd, free it) holds their
 * pointers, inputs first. */
astitch_status exec_cuda_stage_host(astitch_executable *x, const void *const *inputs, uint64_t **io);
astitch_status exec_cuda_run_host(astitch_executable *x, const void *const *inputs,
                                  void *const *outputs);
/* Bytes of the workspace a run of x takes from its caller: the temporaries between kernels,
 * the barrier counters, the scratch and cuBLASLt's workspace, in that order, each a multiple of
 * 256 bytes (cuBLASLt's starting at a multiple of 256). */
size_t exec_cuda_workspace_bytes(const astitch_executable *x);
/* The device memory x's runs use from now on: carved from base (at least
 * exec_cuda_workspace_bytes), or x's own for base 0 (none under caller_workspace). */
void exec_cuda_use_workspace(astitch_executable *x, uint64_t base);
/* Whether compute op n of x's plan runs on the GPU (a dot on cuBLASLt, a custom op's device
 * form), not on the host. */
bool exec_cuda_compute_on_gpu(const astitch_executable *x, int32_t n);
/* One run of x on stream with an event before its first step and after each one; waits for
 * it and writes step i's time in microseconds to us[i] (the plan's nstep of them). Refuses a
 * capturing stream. */
astitch_status exec_cuda_run_timed(astitch_executable *x, const uint64_t *inputs,
                                   const uint64_t *outputs, void *stream, double *us);
/* Queues x's run on stream; refuses a capturing stream when the plan has a compute op that
 * runs on the host. */
astitch_status exec_cuda_run_device(astitch_executable *x, const uint64_t *inputs,
                                    const uint64_t *outputs, void *stream);
void exec_cuda_close(ExecCuda *c); /* accepts NULL */
/* exec_cuda_load.c: kernel k as loaded (k in range of a prepared executable). */
void exec_cuda_loaded_kernel(const astitch_executable *x, int k, astitch_loaded_kernel *out);

#endif
