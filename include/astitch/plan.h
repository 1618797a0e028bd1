/*
 * astitch/plan.h: the stitch plan, public side.
 *
 * A plan says how a graph runs as GPU kernels: which memory-intensive ops each kernel
 * (stitch op) holds, how they form groups around dominant ops, the stitching scheme of every
 * op (local, regional, global, independent), the thread mapping of every group and phase,
 * the shared-memory and global scratch buffers, and the launch shape with its register bound.
 * docs/planner.md explains the passes and the JSON form.
 *
 * Ownership and threads: a plan refers to the graph it was made from, which must outlive it
 * and must not change while it lives. A plan is read-only after astitch_plan_create and may be
 * read by several threads at once. Errors are reported on the graph's context.
 */
#ifndef ASTITCH_PLAN_H
#define ASTITCH_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "astitch/astitch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device model ------------------------------------------------------------------------- */

/* What the planner needs to know about a GPU (or the host's virtual GPU). */
typedef struct astitch_device {
    char name[32];                  /* "h100", "a100", "v100", "host", or a driver's name */
    int sm_version;                 /* compute capability x 10 (90 for H100); 0 for host */
    int sm_count;                   /* streaming multiprocessors */
    int warp_size;
    int max_threads_per_block;
    int max_threads_per_sm;
    int max_blocks_per_sm;
    int regs_per_sm;                /* 32-bit registers per SM */
    int max_regs_per_thread;
    int reg_alloc_unit;             /* registers are granted per thread in multiples of this */
    int64_t shared_per_block;       /* bytes a block may use (with the opt-in attribute) */
    int64_t shared_per_sm;          /* bytes of shared memory per SM */
    int64_t l2_bytes;               /* bytes of L2 cache; 0: not modelled (the host) */
} astitch_device;

/* Copies the built-in model called name ("h100", "a100", "v100", "host") into *dev.
 * Returns ASTITCH_ERR_ARGUMENT for an unknown name. */
ASTITCH_API astitch_status astitch_device_builtin(const char *name, astitch_device *dev);
/* Names of the built-in models, NULL after the last: i = 0, 1, ... */
ASTITCH_API const char *astitch_device_builtin_name(int i);

/* ---- options ------------------------------------------------------------------------------ */

typedef enum astitch_fusion {
    ASTITCH_FUSION_NONE,   /* one kernel per memory-intensive op */
    ASTITCH_FUSION_XLA,    /* register-only fusion: cut after reductions and after heavy ops
                            * that feed a broadcast; cheap producers are duplicated */
    ASTITCH_FUSION_STITCH  /* AStitch: whole memory-intensive clusters per kernel */
} astitch_fusion;

typedef struct astitch_plan_options {
    astitch_fusion fusion;
    bool remote;   /* remote stitching: merge independent stitch ops (stitch only) */
    bool merge;    /* dominant merging */
    bool packing;  /* horizontal packing and task splitting (vertical packing stays on
                    * where a single wave requires it) */
    bool deterministic; /* a reduction split across blocks combines its partial results in a
                         * fixed order (no float atomics), so repeated runs give the same bits;
                         * splits whose dtype or kind has no atomic combine do so anyway */
    bool persistent; /* every kernel is one wave of blocks walking chunks of tiles (the paper's
                      * vertical packing); off, only kernels with global barriers are, and the
                      * others launch a block per tile in as many waves as it takes */
    bool one_pass_variance; /* fusion=stitch: a sum of squared deviations from a mean whose rows
                             * cannot stay in registers is computed in the same pass over its
                             * input as the mean, from sums shifted by one element of each row
                             * (the plan's graph is then a rewritten copy, see
                             * astitch_plan_graph); off, the graph is planned as given */
    bool recompute_outputs; /* fusion=stitch: an output computed from positions and constants
                             * alone (iota, constants, cheap element-wise and shape ops: a
                             * causal mask) that the graph also reads is recomputed by its
                             * readers instead of read back behind a global barrier (the
                             * plan's graph is then a rewritten copy); off, readers wait for it */
    bool wide_rows; /* a resident row of 33 to 1024 elements spreads over as many lanes as
                     * hold about 16 elements each (several warps, whose combines exchange
                     * partial results through shared memory); off, one warp holds it, up to
                     * 32 elements per lane. Neither wins everywhere: the cuda target times
                     * both where they differ (astitch_compile_options.variant_search) */
    bool long_rows; /* a row of 8193 to 32768 elements reduced over trailing axes is resident
                     * too: a block of up to 1024 lanes holds it in registers, up to 32
                     * elements each, one block per SM (the register bound 64); off, such rows
                     * are streamed (read from memory, the L2 or shared memory once per walk).
                     * Neither wins everywhere: the cuda target times both where they differ,
                     * and leaves out the form where ptxas spills it */
    bool column_vectors; /* a thread of a column reduction alone in its kernel takes runs of
                          * adjacent columns, 16 bytes of the widest tensor per access (4
                          * with an f32, 8 when all are f16/bf16), where the planner's rules
                          * allow (docs/planner.md, *mapping*; the mapping's `vector`); off,
                          * one column per thread */
    bool row_vectors; /* a lane of a row reduction that streams its row (too long to stay in
                       * registers, or not reduced over trailing axes, as a batch norm of NCHW
                       * activations) takes 16 bytes of consecutive elements per access (4
                       * f32, 8 f16/bf16) where the row's innermost axis is reduced and the
                       * shapes allow (docs/codegen.md, *Reduce phase*); off, one element per
                       * access. Code generation alone: the plan is the same either way */
    bool online_softmax; /* a streamed row's max and its sum of exp(x - max) (a softmax's or a
                          * cross-entropy's) taken in one walk with a running pair, rescaling
                          * the sum when the max grows, instead of two walks (docs/planner.md,
                          * *tiles*). Code generation alone: the plan is the same either way;
                          * the sum differs from the two-walk one by rounding */
    bool column_sums_in_rows; /* fusion=stitch: a column reduction (f32 sum, max or min) of the
                               * elements a resident row group walks, read by nothing in its
                               * kernel, is taken in the row pass: each block sums its rows'
                               * columns in shared memory and adds them into the destination
                               * by atomics, so the kernel reads its inputs once (docs/
                               * planner.md, *across*). Off by default: faster on some
                               * backward norms, slower on others (bench/RESULTS.md); the cuda
                               * target's variant search times it, also with persistent */
    bool carry; /* a persistent kernel whose later phase walks the same elements as an earlier
                 * one, with the same mapping, after a global barrier (a batch norm's
                 * normalization after its statistics) keeps values of the earlier walk in the
                 * shared memory its planned residency leaves free, so the later walk reads
                 * them there instead of reading their inputs from global memory again
                 * (docs/planner.md, *carry*); off, the later walk reads its inputs again */
    bool transpose_tiles; /* an element-wise kernel that reads a value through a transpose
                           * moving the innermost axis walks square tiles through shared
                           * memory, so that its reads and its writes are both coalesced
                           * (docs/planner.md, *transpose*); off, each thread reads the
                           * transpose's operand element by element, a row apart */
    bool hoist; /* fusion=stitch: a kernel whose one global barrier waits for values that are
                 * cheap to make (at most a sixteenth of its bytes) has their producers cut off
                 * as a kernel of its own before it, and the rest planned again without the
                 * barrier (docs/planner.md, *hoist*); off, the barrier stays */
    bool split_barriers; /* fusion=stitch: every kernel with global barriers is cut at them
                          * whatever the producers cost: what each barrier waits for is made
                          * by a kernel of its own, and the light element-wise ops the later
                          * kernels read of it are recomputed there (a batch norm's backward:
                          * its channel sums, then dx in 16-byte vectors; docs/planner.md,
                          * *hoist*). Off by default; the cuda target's variant search times it */
} astitch_plan_options;

/* Fills *o with the defaults: fusion=stitch, every switch on (one_pass_variance,
 * recompute_outputs, column_vectors, row_vectors, online_softmax, carry, transpose_tiles and
 * hoist included), deterministic, persistent, wide_rows, long_rows, column_sums_in_rows and
 * split_barriers off. */
ASTITCH_API void astitch_plan_options_default(astitch_plan_options *o);
/* "none", "xla", "stitch"; NULL for an out-of-range value. */
ASTITCH_API const char *astitch_fusion_name(astitch_fusion f);
/* "none", "xla", "stitch" -> ASTITCH_OK, else ASTITCH_ERR_ARGUMENT. */
ASTITCH_API astitch_status astitch_fusion_from_name(const char *name, astitch_fusion *f);

/* ---- plan vocabulary ---------------------------------------------------------------------- */

/* How an op's values reach their consumers (the paper's Table 1). */
typedef enum astitch_scheme {
    ASTITCH_SCHEME_LOCAL,       /* registers: one-to-one, computed where consumed */
    ASTITCH_SCHEME_REGIONAL,    /* shared memory, read by the same block after a block barrier */
    ASTITCH_SCHEME_GLOBAL,      /* global memory, read by any block after a global barrier */
    ASTITCH_SCHEME_INDEPENDENT  /* a result no op of its kernel reads: written for outside */
} astitch_scheme;

/* The role of an op inside its group. */
typedef enum astitch_role {
    ASTITCH_ROLE_DOMINANT,      /* its thread mapping is the group's */
    ASTITCH_ROLE_SUB_DOMINANT,  /* materialized; mapping derived from the dominant */
    ASTITCH_ROLE_MEMBER,        /* local op computed inside the group */
    ASTITCH_ROLE_INLINED        /* constant/iota or (fusion=xla) a cheap op recomputed here;
                                 * owned by no group */
} astitch_role;

typedef enum astitch_mapping_kind {
    ASTITCH_MAP_ELEMENTWISE,    /* one thread per element */
    ASTITCH_MAP_ROW_REDUCE,     /* reduced elements adjacent in memory: lanes along a row */
    ASTITCH_MAP_COLUMN_REDUCE   /* kept elements adjacent: threads across rows, lanes down */
} astitch_mapping_kind;

typedef enum astitch_barrier {
    ASTITCH_BARRIER_NONE,
    ASTITCH_BARRIER_BLOCK,
    ASTITCH_BARRIER_GLOBAL
} astitch_barrier;

typedef enum astitch_buffer_kind {
    ASTITCH_BUFFER_SHARED,        /* an op's regional values (block's chunk), shared memory */
    ASTITCH_BUFFER_REDUCE,        /* block-reduction workspace of a reduce, shared memory */
    ASTITCH_BUFFER_SCRATCH,       /* an op's global values, in the plan's scratch arena */
    ASTITCH_BUFFER_PARTIAL,       /* per-split partial results of a split reduce, scratch */
    ASTITCH_BUFFER_CARRY,         /* an op's values a phase keeps for a later phase of the same
                                   * walk across a global barrier (option carry), shared memory */
    ASTITCH_BUFFER_TILE           /* a transpose's operand over a block's square tile, staged
                                   * in the operand's order (docs/codegen.md), shared memory */
} astitch_buffer_kind;

/* Constant names ("regional", "dominant", "row-reduce", "block", "shared", ...); NULL for
 * out-of-range values. */
ASTITCH_API const char *astitch_scheme_name(astitch_scheme s);
ASTITCH_API const char *astitch_role_name(astitch_role r);
ASTITCH_API const char *astitch_mapping_kind_name(astitch_mapping_kind k);
ASTITCH_API const char *astitch_barrier_name(astitch_barrier b);
ASTITCH_API const char *astitch_buffer_kind_name(astitch_buffer_kind k);

/* ---- the plan ----------------------------------------------------------------------------- */

typedef struct astitch_plan astitch_plan;

/* Plans g (which must verify) for dev under opts (NULL: defaults). On success *out owns the
 * plan; on failure *out is NULL and the context of g holds the message. */
ASTITCH_API astitch_status astitch_plan_create(astitch_graph *g, const astitch_device *dev,
                                               const astitch_plan_options *opts,
                                               astitch_plan **out);
/* Frees p and everything it owns; p may be NULL. */
ASTITCH_API void astitch_plan_destroy(astitch_plan *p);

/* Writers. The _file forms write to f; the string forms return malloc'd NUL-terminated text
 * in *text (free with astitch_free). */
ASTITCH_API astitch_status astitch_plan_write_text(const astitch_plan *p, FILE *f);
ASTITCH_API astitch_status astitch_plan_write_json(const astitch_plan *p, FILE *f);
ASTITCH_API astitch_status astitch_plan_write_dot(const astitch_plan *p, FILE *f);
ASTITCH_API astitch_status astitch_plan_text(const astitch_plan *p, char **text);
ASTITCH_API astitch_status astitch_plan_json(const astitch_plan *p, char **text);
ASTITCH_API astitch_status astitch_plan_dot(const astitch_plan *p, char **text);

/* ---- reading a plan ----------------------------------------------------------------------- */

/* The thread mapping of a group or phase. Rows are the independent tasks: the output elements
 * of a reduction (each reducing row_len inputs) or, element-wise, the elements themselves.
 * Unless split > 1, block b owns rows [b * chunk, (b + 1) * chunk) and walks them in tiles of
 * rows_per_block rows (tasks_per_block tiles: vertical packing); within a tile,
 * threads_per_row lanes share one row (rows_per_block > 1 is horizontal packing). With
 * split > 1, block b takes tile b / split and the row elements
 * [(b % split) * split_len, ...) of it; the split blocks combine their partial results. */
typedef struct astitch_mapping {
    astitch_mapping_kind kind;
    int rank;                        /* the iteration space: a reduce's operand shape, or the */
    int64_t dims[ASTITCH_MAX_RANK];  /* element-wise root's shape */
    uint32_t reduce_axes;            /* bit i: space axis i is reduced (0 element-wise) */
    int64_t rows;
    int64_t row_len;                 /* 1 element-wise */
    int32_t block;                   /* threads per block (the kernel's block size) */
    int32_t grid;                    /* blocks taking part (<= the kernel's grid) */
    int32_t threads_per_row;         /* lanes per row; 1 element-wise */
    int32_t rows_per_block;          /* rows per tile */
    int64_t chunk;                   /* rows owned by one block */
    int64_t tasks_per_block;         /* tiles walked by one block: ceil(chunk / rows_per_block) */
    int32_t split;                   /* blocks sharing one tile, 1 if not split */
    int64_t split_len;               /* row elements per split part */
    int32_t vector;                  /* row reduce: > 0 when a lane keeps its part of a row in
                                      * registers (a resident row), taking `vector` consecutive
                                      * elements per access: lane l holds elements
                                      * [(s * threads_per_row + l) * vector, ... + vector) for
                                      * s = 0, 1, ...; 0 when lanes stream the row (lane l takes
                                      * l, l + threads_per_row, ...). Column reduce: > 1 when a
                                      * thread takes runs of `vector` adjacent rows (adjacent
                                      * elements) with one access per tensor and reduced index:
                                      * a tile's rows_per_block / vector groups of
                                      * threads_per_row lanes. 0 for other kinds */
} astitch_mapping;

/* Elements one thread visits in a phase of mapping m: element-wise, ceil(chunk /
 * rows_per_block); a reduction, its tiles times ceil(len / threads_per_row), len the row
 * (row_len) or its part (split_len when split > 1), for a resident row (vector > 0) its
 * tiles times ceil(row_len / (threads_per_row * vector)) * vector, for a column reduce of runs
 * (vector > 1) the elements of its runs. 0 for an empty mapping. */
ASTITCH_API int64_t astitch_mapping_elements_per_thread(const astitch_mapping *m);

typedef struct astitch_kernel_info {
    const char *name;             /* "stitch.0", ... (owned by the plan) */
    int num_ops;                  /* entries of this kernel (inlined ones included) */
    int num_inputs;               /* graph values read from outside the kernel */
    int num_outputs;              /* values written for readers outside the kernel */
    int num_groups;
    int num_phases;
    int num_buffers;
    int32_t block;                /* launch shape */
    int32_t grid;
    int64_t shared_bytes;         /* dynamic shared memory per block */
    int64_t scratch_bytes;        /* global scratch this kernel uses (from the arena start) */
    int32_t regs;                 /* register bound per thread (assume-relax-apply) */
    int32_t blocks_per_sm;        /* resident blocks per SM at that bound */
    int32_t blocks_per_wave;
    int block_barriers;
    int global_barriers;          /* > 0: every block must be resident (cooperative launch) */
    bool persistent;              /* the grid is at most one wave (blocks_per_wave) and each block
                                   * walks a chunk of tiles; false: a block per tile, the grid
                                   * may exceed a wave (no global barriers) */
    int64_t min_bytes;            /* global memory it must move: inputs once, outputs once */
    int64_t moved_bytes;          /* global memory its phases read and write (a phase re-reading
                                   * an input counts it again; a resident run reads once) */
    bool hoisted;                 /* it makes what a later kernel's global barrier would have
                                   * waited for (plan option hoist) */
} astitch_kernel_info;

typedef struct astitch_op_info {
    astitch_node node;
    int kernel;                   /* index of the kernel, -1 outside any */
    int group;                    /* index within the kernel, -1 for inlined ops */
    int phase;                    /* phase that materializes it, -1 if computed where used */
    astitch_role role;
    astitch_scheme scheme;
    bool output;                  /* written for readers outside the kernel */
    int64_t evals;                /* element evaluations in this kernel (recomputation shows) */
} astitch_op_info;

typedef struct astitch_group_info {
    astitch_node dominant;
    int num_sub_dominants;
    int num_members;              /* members other than dominant and sub-dominants */
    astitch_mapping mapping;      /* the dominant's */
} astitch_group_info;

typedef struct astitch_phase_info {
    int group;
    astitch_barrier barrier;      /* waited for before the phase starts */
    int run_first;                /* first phase of its tile run (itself when alone) */
    bool resident;                /* its rows stay in registers across its tile run */
    int num_roots;                /* ops the phase materializes */
    astitch_mapping mapping;
} astitch_phase_info;

typedef struct astitch_buffer_info {
    astitch_buffer_kind kind;
    astitch_node node;
    int64_t offset;               /* in the kernel's shared memory, or in the scratch arena */
    int64_t bytes;
    int first_phase, last_phase;  /* lifetime in phases */
    bool zero_init;               /* must hold zeros when the kernel starts */
} astitch_buffer_info;

typedef enum astitch_step_kind { ASTITCH_STEP_KERNEL, ASTITCH_STEP_COMPUTE } astitch_step_kind;

/* The graph, device model and options the plan was made from (owned by the plan or caller).
 * The graph is the caller's, or the plan's own copy where the planner left out the nodes that
 * feed no output or rewrote a variance or a one-hot sum (docs/planner.md, *prune*, *variance*
 * and *one_hot*): node ids of the plan refer to it; the caller's nodes keep their names there. */
ASTITCH_API const astitch_graph *astitch_plan_graph(const astitch_plan *p);
ASTITCH_API const astitch_device *astitch_plan_device(const astitch_plan *p);
ASTITCH_API const astitch_plan_options *astitch_plan_get_options(const astitch_plan *p);
ASTITCH_API int astitch_plan_num_kernels(const astitch_plan *p);
/* Bytes of global scratch the whole plan needs (the largest kernel's). */
ASTITCH_API int64_t astitch_plan_scratch_bytes(const astitch_plan *p);
/* The execution order: kernels and compute ops (dot, custom) interleaved. For step i,
 * *index is the kernel index or the compute node. */
ASTITCH_API int astitch_plan_num_steps(const astitch_plan *p);
ASTITCH_API astitch_step_kind astitch_plan_step(const astitch_plan *p, int i, int *index);
/* The kernel that owns (computes and, if needed, writes) node n; -1 for parameters, compute
 * ops and constants/iota that are only inlined. */
ASTITCH_API int astitch_plan_kernel_of(const astitch_plan *p, astitch_node n);
/* Info on node n in its owning kernel; ASTITCH_ERR_ARGUMENT if it has none. */
ASTITCH_API astitch_status astitch_plan_node_info(const astitch_plan *p, astitch_node n,
                                                  astitch_op_info *info);

/* Per kernel k; every index is range-checked (ASTITCH_ERR_ARGUMENT, or -1 for node lookups). */
ASTITCH_API astitch_status astitch_plan_kernel_info(const astitch_plan *p, int k,
                                                    astitch_kernel_info *info);
ASTITCH_API astitch_status astitch_plan_kernel_op(const astitch_plan *p, int k, int i,
                                                  astitch_op_info *info);
ASTITCH_API astitch_node astitch_plan_kernel_input(const astitch_plan *p, int k, int i);
ASTITCH_API astitch_node astitch_plan_kernel_output(const astitch_plan *p, int k, int i);
ASTITCH_API astitch_status astitch_plan_group_info(const astitch_plan *p, int k, int g,
                                                   astitch_group_info *info);
ASTITCH_API astitch_node astitch_plan_group_sub_dominant(const astitch_plan *p, int k, int g,
                                                         int i);
ASTITCH_API astitch_node astitch_plan_group_member(const astitch_plan *p, int k, int g, int i);
ASTITCH_API astitch_status astitch_plan_phase_info(const astitch_plan *p, int k, int ph,
                                                   astitch_phase_info *info);
ASTITCH_API astitch_node astitch_plan_phase_root(const astitch_plan *p, int k, int ph, int i);
ASTITCH_API astitch_status astitch_plan_buffer_info(const astitch_plan *p, int k, int b,
                                                    astitch_buffer_info *info);

#ifdef __cplusplus
}
#endif
#endif
