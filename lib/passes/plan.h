/*
 * plan.h: the stitch plan as the passes build it and codegen reads it. Private to
 * libastitch; the public view is include/astitch/plan.h. docs/planner.md explains every field
 * with worked examples.
 *
 * A plan is a list of kernels (stitch ops) plus an execution order (steps) that interleaves
 * them with compute ops (dot, custom) run elsewhere. Everything is indexed by small integers:
 * graph node ids, and indices into the arrays of one kernel.
 *
 * How codegen reads a kernel
 * - Arguments: one tensor per kernel input (k->input, graph node ids: parameters, compute-op
 *   results, other kernels' outputs), one per kernel output (k->output), and a pointer to the
 *   plan's global scratch arena (buffers of kind SCRATCH and PARTIAL live at their offsets).
 * - Launch: k->grid blocks of k->block threads, k->shared_bytes of dynamic shared memory, at most
 *   k->regs registers per thread. k->grid <= k->blocks_per_wave always, so a global barrier is
 *   always legal.
 * - Body: the phases in order. Before phase i, wait at phase[i].barrier (NONE, BLOCK: every
 *   thread of the block, GLOBAL: every thread of the grid). Phase i walks its mapping (see
 *   astitch_mapping in astitch/plan.h) and, for every root, computes the root's value at each
 *   element it owns and stores it: into its buffer (PlanOp.buf: SHARED for regional, SCRATCH
 *   for global schemes) and, when PlanOp.output, into the output tensor of that node. A root
 *   that is a reduce over the phase's reduce_axes accumulates over row_len and stores one value
 *   per row; any other root has as many elements as the phase's space, and element e (row-major)
 *   of the space is element e of the root. In a row/column-reduce phase such a root is computed
 *   at every (row, k) the lanes visit (row r over the kept axes, k over the reduced axes, each
 *   row-major), without accumulating. A SHARED buffer of a reduce root holds the block's chunk
 *   of rows; of another root in an element-wise phase, the block's chunk of elements; in a
 *   row-reduce phase (reduced axes trailing), chunk * row_len elements. Roots of column-reduce
 *   phases other than the reduces are never regional.
 * - Values of non-root ops are computed where needed by index propagation from the element
 *   being computed (they are LOCAL: registers). Reading an op that is materialized in an earlier
 *   phase reads its buffer (SHARED: the block's chunk, see PlanBuffer) or, for an op with no
 *   buffer that is an output, its output tensor; kernel inputs are read from their tensors.
 *   Ops with role INLINED (constants, iota, and under fusion=xla cheap ops owned by another
 *   kernel) are likewise computed where needed.
 * - A split reduce (mapping.split > 1) combines its split blocks' partial results: with atomics
 *   into its destination (zero_init set on it), or deterministically through its PARTIAL buffer
 *   of rows * split accumulators. Its scheme is GLOBAL: readers wait at a global barrier.
 */
#ifndef ASTITCH_PASSES_PLAN_H
#define ASTITCH_PASSES_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "astitch/plan.h"
#include "ir/ir.h"

/* One op of a kernel. Kernel ops are sorted by node id (a topological order). */
typedef struct PlanOp {
    int32_t node;
    int32_t group;          /* index in the kernel's groups, -1 for INLINED */
    int32_t phase;          /* the phase that materializes it, -1 if computed where used */
    astitch_role role;
    astitch_scheme scheme;
    bool output;            /* written to its own tensor for readers outside the kernel */
    int32_t buf;            /* its value buffer (SHARED or SCRATCH) in the kernel, -1 if none */
    int64_t evals;          /* element evaluations in this kernel: its element count once per
                             * phase that computes it (informational; shows recomputation) */
    bool zero_init;         /* a split reduce combined with atomics: its destination (output
                             * tensor or scratch) must hold zeros when the kernel starts */
} PlanOp;

/* A dominant, its sub-dominants and the local ops that connect them. */
typedef struct PlanGroup {
    int32_t dominant;       /* node */
    int32_t *sub;           /* nodes of the sub-dominants, ascending */
    int32_t nsub;
    int32_t *member;        /* nodes of the other (local) ops, ascending */
    int32_t nmember;
    astitch_mapping map;    /* thread mapping of the dominant */
} PlanGroup;

/* A stretch of a kernel between barriers that materializes some ops (its roots). */
typedef struct PlanPhase {
    int32_t group;
    astitch_barrier barrier;   /* waited for before the phase */
    int32_t run_first;         /* the first phase of its tile run (tiles.c); itself if alone */
    bool resident;             /* the run's rows stay in registers (tiles.c): its first phase
                                * is a row reduce whose map.vector > 0; every phase of a run
                                * has the first's value */
    int32_t *root;             /* nodes, ascending */
    int32_t nroot;
    astitch_mapping map;
} PlanPhase;

/* Memory a kernel uses besides its argument tensors. SHARED: one block's chunk of a regional
 * op: element e of the op lives at offset + (e - first element the block owns) * dtype size,
 * elements = the most elements one block owns. REDUCE: block-reduction workspace of a reduce
 * root (one accumulator per warp of the block, elements of f32/i64/... accumulator dtype; for
 * a reduce summed across rows, plan_reduce_across, plan_across_slots x row_len).
 * SCRATCH: all elements of a global op, row-major, in the scratch arena. PARTIAL: rows * split
 * accumulators of a split reduce, in the arena. */
typedef struct PlanBuffer {
    astitch_buffer_kind kind;
    int32_t node;
    astitch_dtype dtype;       /* element type stored (accumulator type for REDUCE/PARTIAL) */
    int64_t elements;
    int64_t offset;            /* bytes: in shared memory, or in the scratch arena */
    int64_t bytes;
    int32_t first_phase;       /* written first in this phase ... */
    int32_t last_phase;        /* ... read last in this one */
    bool zero_init;
} PlanBuffer;

/* The most input and output tensors one kernel has (bound.c): with the scratch arena and the
 * barrier counter, its arguments stay within what every launcher takes (the host runtime's
 * SIMT_MAX_ARGS, 256; CUDA's parameter space). */
#define PLAN_KERNEL_MAX_TENSORS 240

/* Values carried across a barrier (carry.c, plan option carry). Phase `from` and the later
 * phase `to` walk the same elements with the same mapping, each thread its elements at reduced
 * indices start, start + step, ... (its iterations): across a global barrier, a persistent
 * kernel's streamed row or column reduce of one tile per block; across a block barrier, a
 * kernel of a block per tile whose tile run streams a row twice (every iteration kept). For
 * the thread's first `slots` iterations, `from` stores the values of every node with a CARRY
 * buffer in shared memory and `to` reads them there instead of computing them: slot s of
 * thread t holds `vector` elements (the walk's run) at element ((s * block + t) * vector) of
 * each such buffer, so a thread reads back only what it stored. The kernel carries nothing
 * when slots is 0. */
typedef struct PlanCarry {
    int32_t from, to;
    astitch_barrier barrier; /* the kind of barrier carried across: BLOCK or GLOBAL */
    int32_t vector;        /* elements per iteration (the walk's run: plan_walk_vector) */
    int64_t slots;         /* iterations kept per thread */
    int64_t iterations;    /* the most iterations a thread of the walk takes */
} PlanCarry;

/* A transpose walked in square tiles (transpose.c): when `on`, the kernel is one element-wise
 * phase, and each block takes one tile of size x size elements of its space over two runs of
 * axes taken as one each: A, the axes axis_from..axis (axis: where the operand's innermost
 * axis lands), and L, the axes inner_from..rank - 1 (the innermost); each run's axes are
 * adjacent and in the same order in the operand too (NHWC to NCHW: L is H and W). It evaluates
 * transpose `node`'s operand over the tile in the operand's own order into its TILE buffer
 * (size x (size + 1) slots of f32 or i32 in shared memory), and after a block barrier the roots
 * in the space's order, taking the transpose's value from there (emit_transpose.c). */
typedef struct PlanTile {
    bool on;
    int32_t node;
    int32_t axis_from, axis;
    int32_t inner_from;
    int32_t size;
} PlanTile;

typedef struct PlanKernel {
    char name[24];
    PlanOp *op;
    int32_t nop;
    int32_t *input;            /* graph nodes read from outside, ascending */
    int32_t ninput;
    int32_t *output;           /* nodes written for outside, ascending */
    int32_t noutput;
    PlanGroup *group;
    int32_t ngroup;
    PlanPhase *phase;
    int32_t nphase;
    PlanBuffer *buf;
    int32_t nbuf;
    /* launch shape (launch.c) */
    int32_t block;
    int32_t grid;
    int32_t regs;
    int32_t blocks_per_sm;
    int32_t blocks_per_wave;
    int32_t wave_limit;        /* blocks per wave the thread mapping was made for */
    bool stream_by_block;      /* streamed rows take a block's lanes, never a warp each: a warp
                                * per row would walk them again beyond the L2 (mapping.c) */
    int64_t shared_bytes;
    int64_t scratch_bytes;
    int32_t block_barriers;
    int32_t global_barriers;
    bool persistent;           /* grid <= one wave, blocks walk chunks of tiles (pipeline.c) */
    int64_t min_bytes;         /* global memory: inputs read once, outputs written once */
    int64_t moved_bytes;       /* ... as the phases read and write it (traffic.c) */
    PlanCarry carry;           /* values kept across a global barrier (carry.c) */
    PlanTile tile;             /* a transpose walked in square tiles (transpose.c) */
    bool hoisted;              /* the producers of a later kernel's values, cut off before it
                                * instead of behind a global barrier (hoist.c) */
    int32_t hoist_cut;         /* both kernels of one cut by hoist.c: its number (from 1), else 0 */
} PlanKernel;

/* Whether kernel k holds rows in registers in some phase (PlanPhase.resident). */
static inline bool plan_kernel_holds_rows(const PlanKernel *k)
{
    for (int32_t ph = 0; ph < k->nphase; ph++)
        if (k->phase[ph].resident)
            return true;
    return false;
}

typedef struct PlanStep {
    astitch_step_kind kind;
    int32_t index;             /* kernel index or compute node */
} PlanStep;

struct astitch_plan {
    astitch_graph *graph;      /* the caller's graph, or own_graph */
    astitch_graph *own_graph;  /* the graph pruned (pass_prune) and/or rewritten by
                                * pass_variance or pass_recompute, or NULL */
    int32_t *rewritten;        /* nodes of own_graph that replace a rewritten op */
    int32_t nrewritten;
    int32_t *recomputed;       /* outputs of own_graph that their readers recompute
                                * (pass_recompute) */
    int32_t nrecomputed;
    char **dropped;            /* names of the caller's nodes that feed no output (pass_prune),
                                * not planned: own_graph lacks them */
    int32_t ndropped;
    char **gathered;           /* names of the one-hot sums pass_one_hot made gathers */
    int32_t ngathered;
    char **shortened;          /* names of the reduces pass_short_reduce made slices */
    int32_t nshortened;
    astitch_device dev;
    astitch_plan_options opt;
    PlanKernel *kernel;
    int32_t nkernel;
    int32_t *owner;            /* node -> owning kernel, -1 */
    PlanStep *step;
    int32_t nstep;
    int64_t scratch_bytes;
};

/* True when mapping m reduces a run of trailing axes (none for an element-wise mapping): each
 * row's elements are then consecutive in its space. */
static inline bool plan_reduces_trailing(const astitch_mapping *m)
{
    uint32_t trailing = 0;
    for (int i = m->rank - 1; i >= 0 && (m->reduce_axes >> i & 1); i--)
        trailing |= 1u << i;
    return m->reduce_axes == trailing;
}

/* Resident rows (map.vector > 0): row elements one lane holds, and the tiles one thread takes
 * per iteration (short rows: several tiles at once, so that a thread has about
 * PLAN_LANE_ELEMENTS_GOAL elements in flight). */
enum { PLAN_LANE_ELEMENTS_GOAL = 16, PLAN_RESIDENT_TILES_MAX = 4 };
static inline int64_t plan_lane_elements(const astitch_mapping *m)
{
    int64_t stride = (int64_t)m->threads_per_row * m->vector;
    return m->vector > 0 ? (m->row_len + stride - 1) / stride * m->vector : 0;
}
static inline int plan_resident_tiles(const astitch_mapping *m)
{
    int64_t e = plan_lane_elements(m), u = e > 0 ? PLAN_LANE_ELEMENTS_GOAL / e : 1;
    return (int)(u < 1 ? 1 : u > PLAN_RESIDENT_TILES_MAX ? PLAN_RESIDENT_TILES_MAX : u);
}

/* True when root n, materialized in a phase of mapping m, is a reduce taken across the rows
 * of row mapping m rather than along them: a column reduce the across step put into a
 * resident row group (across.c). Each block sums its rows' elements of every column through a
 * REDUCE buffer (plan_across_slots rows of m.row_len accumulators); the blocks' sums meet in
 * the destination by atomics (zero_init). */
static inline bool plan_reduce_across(const astitch_graph *g, const astitch_mapping *m, int32_t n)
{
    const Node *x = gnode(g, n);
    return x->op == ASTITCH_OP_REDUCE && m->kind == ASTITCH_MAP_ROW_REDUCE &&
           x->attr.axes != m->reduce_axes;
}

/* Writer slots of a reduce summed across the rows of resident mapping m: each warp when a
 * warp holds several rows (after combining them by shuffles), else each row of the block. Its
 * REDUCE buffer holds a row of m->row_len accumulators per slot. */
static inline int64_t plan_across_slots(const astitch_mapping *m)
{
    int32_t t = m->threads_per_row < 32 ? 32 : m->threads_per_row;
    return m->block / t > 0 ? m->block / t : 1;
}

/* True for the buffer kinds that live in a block's shared memory (the others: the scratch
 * arena). */
static inline bool plan_buffer_shared(astitch_buffer_kind kind)
{
    return kind == ASTITCH_BUFFER_SHARED || kind == ASTITCH_BUFFER_REDUCE ||
           kind == ASTITCH_BUFFER_CARRY || kind == ASTITCH_BUFFER_TILE;
}

/* plan.c: storage */
/* The entry of node n in kernel k, or NULL. */
PlanOp *plan_kernel_op(const PlanKernel *k, int32_t n);
/* The buffer of kind `kind` that kernel k keeps for node n, or NULL. */
const PlanBuffer *plan_kernel_buffer(const PlanKernel *k, astitch_buffer_kind kind, int32_t n);

/* schemes.c */
/* True when a split reduce of this dtype and kind can combine its partial results with
 * atomics into its destination (f32 sum, max, min; i32 sum). Otherwise, or with the
 * deterministic option, it combines through its PARTIAL buffer. */
bool plan_split_atomic(const Node *reduce);

/* online.c */
/* True when phase ph of kernel k of p and the phase after it are a streamed row's max and its
 * sum of exp(x - max) over the same x, in one tile run with the same walk (plan option
 * online_softmax): code generation takes both in phase ph's walk with a running pair and emits
 * nothing for phase ph + 1 (emit_online.c). */
bool plan_online_pair(const astitch_plan *p, const PlanKernel *k, int32_t ph);
/* Whether reduces max and sum of g are a pair the online walk can take over mapping m's space:
 * max an f32 max over m's reduced axes, sum an f32 sum of exp(x - broadcast(max)) of max's own
 * operand x (online.c). */
bool plan_online_nodes(const astitch_graph *g, int32_t max, int32_t sum, const astitch_mapping *m);

/* walk.c: how a phase's threads take its elements, as code generation emits them. */
/* Elements in 16 bytes of the widest tensor phase ph of k reads or writes at the elements of
 * its mapping's space (k's inputs and ph's roots of that shape; a reduce's result is not one),
 * counting sizes below 2 bytes as 2: 8 when all are f16/bf16 or narrower, 4 with an f32 or
 * i32 among them, 2 with an i64. So the widest tensor moves 16 bytes per access and a narrower
 * one fewer, each access of a warp's lanes one contiguous span: with the narrowest, an f32
 * output of f16 inputs stored 32 bytes per lane as two 16-byte halves, each store instruction
 * half-filling twice the sectors (bench/RESULTS.md, *Accesses as wide as the widest tensor*). */
int plan_access_elements(const astitch_graph *g, const PlanKernel *k, const PlanPhase *ph);
/* Elements per run of a lane of a streamed row reduce phase: v > 1 in the vector form (plan
 * option row_vectors; the innermost axis reduced; plan_access_elements halved until v divides
 * the innermost dimension and a split row's part; docs/codegen.md, *Reduce phase*), else 1.
 * Lane l takes the runs of v elements from reduced indices l * v, (l + threads_per_row) * v,
 * ... of its row (part). */
int plan_row_vector(const astitch_plan *p, const PlanKernel *k, const PlanPhase *ph);
/* Rows per thread run of column reduce mapping m: m->vector where the planner gave it runs
 * (plan option column_vectors; map_column.c, column_run), else 1. The thread of lane l and group g
 * (tid = l * rows_per_block / v + g) takes rows [g * v, g * v + v) of each tile at reduced
 * indices l, l + threads_per_row, ... (threads_per_row lanes, rows_per_block / v groups). */
int plan_column_vector(const astitch_mapping *m);
/* Slots of the combine buffer of a reduce of column mapping m with more than one lane: one
 * per thread, or with runs (rows_per_block = 32 runs of v rows), a row of rows_per_block slots
 * per lane padded by 32 * rows_per_block / block against bank conflicts in the fold
 * (emit_column.c). */
int64_t plan_column_slots(const astitch_mapping *m);
/* The slots between one lane's row and the next in that buffer, for runs: rows_per_block and
 * the pad. */
int64_t plan_column_lane_stride(const astitch_mapping *m);
/* The space of mapping m as a shape. */
Shape plan_mapping_space(const astitch_mapping *m);
/* The elements of tile t's run L (inner) or A over its kernel's space (transpose.c). */
int64_t plan_tile_extent(const PlanTile *t, const Shape *space, bool inner);

/* plan.c: storage (continued) */
/* A PARTIAL buffer holds rows x split accumulators of its dtype, row-major (split index
 * fastest), then at this byte offset one u32 arrival counter per row, zero at kernel start:
 * the last block to arrive at a row combines the row's partials in split order. */
static inline int64_t plan_partial_counters(const PlanBuffer *b)
{
    return (b->elements * (int64_t)astitch_dtype_size(b->dtype) + 15) / 16 * 16;
}
/* Frees what k owns and zeroes it. */
void plan_kernel_clear(PlanKernel *k);
/* Frees the groups, phases and buffers of k (the parts the passes after scope rebuild). */
void plan_kernel_clear_schedule(PlanKernel *k);

#endif
