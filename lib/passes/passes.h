/*
 * passes.h: the stitching planner, private to libastitch. A map of lib/passes:
 *
 *   pipeline.c   astitch_plan_create: the pass pipeline (diagram at its head)
 *   prune.c      nodes that feed no output left out: the plan's own copy of the graph
 *   concat_tree.c  concatenates of more than 64 operands as trees: a graph rewrite
 *   dot_gemm.c   whether a dot is one strided-batched GEMM over its operands (dot_gemm.h)
 *   dot_lower.c  dots made what the targets run: integer ones as a product and a row sum, ...
 *   variance.c   one-pass variance: a graph rewrite ahead of scoping (fusion=stitch)
 *   scope.c      stitch scopes: BFS clusters of memory-intensive ops, no cycles (or one
 *                kernel per op under fusion=none)                          paper 4.1
 *   xla.c        fusion=xla scopes: register-only fusion with duplication  paper 2.3.1
 *   remote.c     remote stitching: merge independent stitch ops            paper 4.1
 *   bound.c      kernels of more input and output tensors than a launch takes cut in pieces
 *   dominant.c   candidates, dominant merging, groups                     paper 4.3 step 1
 *   mapping.c    adaptive thread mapping of each dominant                  paper 3.3, 4.3 step 2
 *   map_column.c ... of a column reduce group: runs of columns, their block
 *   packing.c    ... its vertical packing and task splitting               paper 3.3 (ATM)
 *   propagate.c  schedule propagation: roots, phases, reads                paper 4.2 obs. A
 *   adapt.c      proactive block-locality adaptation                       paper 4.3 step 3
 *   schemes.c    passive block-locality check, schemes, barriers, how a
 *                split reduce combines (atomics or PARTIAL)                paper 4.3 step 3
 *   tiles.c      tile runs: consecutive phases that run tile by tile (before memory)
 *   online.c     which phase pairs of a run take a row's max and sum of exp in one walk
 *   memory.c     shared memory, regional->global fallback, scratch reuse,
 *                PARTIAL buffers                                           paper 4.4
 *   launch.c     assume-relax-apply register bound, blocks per wave        paper 4.5
 *   traffic.c    global-memory bytes a kernel moves, beside the fewest it must move
 *   hoist.c      the cheap producers of a kernel's one global barrier cut off as a kernel
 *                before it, the rest planned again without the barrier
 *   sched.c      shared helpers: index maps, ownership, derivability, barriers
 *   device.c     built-in device models, default options, fusion names
 *   plan.c       plan storage, kernel fill (ops, inputs, outputs, steps), checker
 *   plan_api.c   public accessors and names
 *   plan_text.c  printers: text (astitch_plan_write_text; plan_kernel_text, one kernel as far
 *                as it is planned) and Graphviz (astitch_plan_write_dot)
 *   plan_json.c  printer: JSON (astitch_plan_write_json)
 *   plan.h       the plan's structures, as codegen reads them
 *
 * The planner state (Planner) lives only while astitch_plan_create runs.
 */
#ifndef ASTITCH_PASSES_H
#define ASTITCH_PASSES_H

#include "passes/plan.h"

/* e -> (e / div) % mod over linear (row-major) indices; mod 0 means no modulo. */
typedef struct IndexMap {
    bool known;
    int64_t div;
    int64_t mod;
} IndexMap;

/* A root of a kernel reads a value materialized by another root (src) of the same kernel:
 * element e of the reader's space reads element f(e) of src. */
typedef struct Read {
    int32_t root;
    int32_t src;
    IndexMap f;
    bool own_block; /* schemes: every element read was made by the reading block (and src is
                     * not a split reduce), so a block barrier orders the read, whatever src's
                     * scheme */
} Read;

typedef struct Planner {
    astitch_plan *p;
    astitch_graph *g;
    int32_t n;            /* graph nodes */
    int32_t *ustart;      /* consumers of node v: use[ustart[v] .. ustart[v + 1]) */
    int32_t *use;
    bool *is_output;      /* graph outputs */
    int32_t *kidx;        /* node -> index in the current kernel's ops, -1 */
    int32_t *stamp;       /* visit marks, compared with `epoch` */
    int32_t epoch;
    int32_t *tmp;         /* n ints of scratch for a pass */
    int32_t *tmp2;
    Read *read;           /* reads of the current kernel (propagate.c) */
    int32_t nread, capread;
    int64_t shared_cap;   /* shared bytes per block memory.c may plan (launch feedback) */
    const char *dump_after; /* ASTITCH_DUMP_PLAN=after:<step>: that step's name, else NULL */
} Planner;

/* Derivation of a root's mapping from its group's dominant (sched.c). */
typedef enum Derive {
    DERIVE_NONE,      /* unrelated: cannot share the dominant's mapping */
    DERIVE_SAME,      /* walks the dominant's space (same reduce, or an element-wise op of it) */
    DERIVE_OUTPUT,    /* element-wise over the dominant reduce's result rows */
    DERIVE_QUOTIENT,  /* element-wise over leading dims of an element-wise dominant's space */
    DERIVE_ACROSS     /* a reduce of the dominant row reduce's space over the other axes (its
                       * columns): walks the same elements with the same mapping, but its
                       * results are summed across the rows of every block (across.c); only
                       * the across step groups such a pair */
} Derive;

/* How far planning has brought a kernel; the invariants of each stage hold from it on, until a
 * step that invalidates them (adapt: the phases, until propagate runs again). */
typedef enum PlanStage {
    PLAN_STAGE_FILLED,  /* plan_fill: sorted ops; inlined ops, and only they, not owned */
    PLAN_STAGE_GROUPS,  /* dominant: every owned op in a group (mapping keeps it) */
    PLAN_STAGE_PHASES,  /* propagate, schemes, barriers, tiles: the dominants and
                         * sub-dominants have phases, outputs among them, each root listed
                         * in its own phase */
    PLAN_STAGE_MEMORY,  /* memory: regional and global ops have buffers, every buffer inside
                         * the kernel's shared or scratch bytes */
    PLAN_STAGE_LAUNCH,  /* launch: the launch shape within the device and every phase's
                         * mapping within it */
    PLAN_STAGE_DONE     /* traffic, the kernel planned: persistent if it has global barriers
                         * (a first shape may not be: planned again, persistent), inputs and
                         * outputs within PLAN_KERNEL_MAX_TENSORS */
} PlanStage;

/* plan.c */
/* Rebuilds every kernel's sorted ops, roles of inlined ops, inputs, outputs and the plan's
 * steps from the kernels' op lists and p->owner. Fails only on memory. */
astitch_status plan_fill(Planner *pl);
/* Checks the invariants of a finished plan (coverage, acyclic order, each kernel at
 * PLAN_STAGE_DONE); returns ASTITCH_ERR_INTERNAL with a message naming the kernel and node
 * on a violation. */
astitch_status plan_check(Planner *pl);
/* Checks kernel k (of pl's plan, indexed) against the invariants of `stage` and every stage
 * before it; ASTITCH_ERR_INTERNAL naming the kernel and node on a violation. The pipeline
 * runs it after each step in builds with plan checks (ASTITCH_DEBUG_CHECKS). */
astitch_status plan_check_kernel(Planner *pl, const PlanKernel *k, PlanStage stage);
/* Appends node n to kernel k's op list (unsorted until plan_fill). */
bool plan_kernel_add(PlanKernel *k, int32_t n);
/* Sets pl->kidx for the ops of k (and clears it for k = NULL's previous kernel). */
void plan_index_kernel(Planner *pl, const PlanKernel *k);
void plan_unindex_kernel(Planner *pl, const PlanKernel *k);
bool plan_is_owned_class(const astitch_graph *g, int32_t n, const bool *is_output);
/* Whether op costs little enough to compute again where it is read instead of reading it from
 * memory: a light element-wise, broadcast or shape op other than a gather (recompute.c,
 * hoist.c). */
bool plan_op_recomputable(astitch_op op);

/* sched.c */
IndexMap index_identity(void);
/* The map from element e of consumer node c to the element of its operand number k. */
IndexMap index_operand(const astitch_graph *g, int32_t c, int k);
IndexMap index_compose(IndexMap first, IndexMap then);
bool index_equal(IndexMap a, IndexMap b, int64_t n);
/* Which block owns element e of the space of root r in its phase: e -> block as an index map
 * (div = elements per block run, mod = wrap); unknown when not block-contiguous. */
IndexMap sched_owner(const astitch_graph *g, const PlanPhase *ph, int32_t r);
/* True when reader root r (phase pr) reading src (phase ps) through f finds every element it
 * needs in the part of src its own block produced. */
bool sched_regional(const astitch_graph *g, const PlanPhase *pr, int32_t r, const PlanPhase *ps,
                    int32_t src, IndexMap f);
Derive sched_derive(const astitch_graph *g, int32_t dom, int32_t r, int64_t *q);
/* The iteration space of root r walked by its own mapping: a reduce's operand, or r. */
void sched_space(const astitch_graph *g, int32_t r, Shape *s, uint32_t *axes);
bool sched_map_equal(const astitch_mapping *a, const astitch_mapping *b);
/* tiles.c: sets run_first of every phase of k: the phases after a reduce phase that share its
 * mapping (or run over its rows), wait only for block barriers, and read what the run's earlier
 * phases made at their own rows alone join its tile run. Requires phases and barriers. */
void pass_tiles(const astitch_graph *g, PlanKernel *k);
/* Whether root r of phase pr reads src, a value of the rows made in the earlier phase ps (a
 * reduce, or a root of a phase element-wise over the rows), only at r's own row of one reduce
 * mapping (not split) that both phases share: the same mapping, or one phase element-wise over
 * the other's rows. Blocks then own the same rows in both phases, so every element of src that
 * r reads was made in r's own block (schemes.c: regional where sched_regional's index maps
 * cannot say, a reduce over middle axes). reaches, memo: scratch of g->nnode and 2 * g->nnode
 * entries, zero at every node outside k's ops. */
bool tiles_read_at_row(const astitch_graph *g, const PlanKernel *k, int32_t pr, int32_t r,
                       int32_t ps, int32_t src, bool *reaches, signed char *memo);
/* After barriers changed (a regional root turned global): a run whose phase now waits for
 * another barrier than a block barrier ends before it, and the run's later phases run alone.
 * Both set PlanPhase.resident from each run's first mapping. */
void pass_tiles_cut(PlanKernel *k);
/* transpose.c: sets k->tile, and then k's launch shape and shared memory, when k is one
 * element-wise phase whose roots read a value through a transpose that moves the innermost
 * axis (after memory: the kernel has no buffer); clears it otherwise. */
void pass_transpose_tile(Planner *pl, PlanKernel *k);
/* plan_text.c: kernel k of p as astitch_plan_write_text prints it, as far as it is planned. */
void plan_kernel_text(FILE *f, const astitch_plan *p, const PlanKernel *k);
/* traffic.c: sets k->min_bytes and k->moved_bytes from the finished kernel (false when out of
 * memory). */
bool plan_kernel_traffic(const astitch_plan *p, PlanKernel *k);
/* Recomputes phase barriers and barrier counts of k from its roots' schemes and pl->read (the
 * pipeline's step `barriers`, after schemes): a block barrier before a read of a regional root,
 * or of a global one at the reading block's own elements (Read.own_block), a global barrier
 * before any other read of a global root. */
void sched_barriers(Planner *pl, PlanKernel *k);
int64_t sched_elements(const astitch_graph *g, int32_t n);
/* Edge lists by unit (plan.c's steps, remote.c's merge graph) are built in two passes over the
 * edges: pass 0 counts unit u's edges in es[u + 1], pass 1 writes edge i of u at es[u]++.
 * Ends pass `pass` on es (nu + 1 entries): the counts become starts, or the starts that pass 1
 * advanced are restored. */
void edges_pass_end(int32_t *es, int32_t nu, int pass);
int64_t pow2_ceil(int64_t x);
int64_t pow2_floor(int64_t x);
int64_t ceil_div(int64_t a, int64_t b);

/* device.c: see astitch_device_builtin */

/* the passes, in pipeline order */
/* variance.c: when g has sums of squared deviations that would read their input twice, *out
 * is a rewritten copy of g (owned by the caller) and *rewritten its nrewritten replacing
 * nodes (malloc'd); else *out is NULL. Fails only on memory. */
astitch_status pass_variance(const astitch_graph *g, bool packing, bool long_rows,
                             astitch_graph **out, int32_t **rewritten, int32_t *nrewritten);
/* recompute.c: when g has outputs computed from positions and constants alone that are also
 * read inside g, *out is a rewritten copy of g (owned by the caller) whose readers read a
 * recomputed copy of each, and *recomputed the nrecomputed outputs (malloc'd); ids[0..nids)
 * (nodes of g) are mapped to the new graph. Else *out is NULL. Fails only on memory. */
astitch_status pass_recompute(const astitch_graph *g, astitch_graph **out, int32_t **recomputed,
                              int32_t *nrecomputed, int32_t *ids, int32_t nids);
/* keepdim.c: when g has outputs that reshape a reduce read by nothing else to its kept
 * dimensions (sum with keepdim), over leading or trailing axes, *out is a rewritten copy of g
 * (owned by the caller) where each is one reduce of the output's shape; ids[0..nids) and
 * ids2[0..nids2) (nodes of g) are mapped to the new graph. Else *out is NULL. Fails only on
 * memory. */
astitch_status pass_keepdim(const astitch_graph *g, astitch_graph **out, int32_t *ids,
                            int32_t nids, int32_t *ids2, int32_t nids2);
/* prune.c: when g has nodes that feed no output (parameters excepted), *out is a new graph
 * (g's context) without them and *dropped their names (ndropped of them, malloc'd, free with
 * prune_free_names); else *out is NULL. Fails only on memory. */
astitch_status pass_prune(const astitch_graph *g, astitch_graph **out, char ***dropped,
                          int32_t *ndropped);
void prune_free_names(char **names, int32_t n);
/* one_hot.c: when g has a sum of a one-hot selection over its last axis (nll_loss's target
 * logit), *out is a copy of g (owned by the caller) where each is a gather of one element per
 * row, the same values bit for bit, and *gathered their names (ngathered of them, malloc'd,
 * free with prune_free_names); else *out is NULL. Fails only on memory. */
astitch_status pass_one_hot(const astitch_graph *g, astitch_graph **out, char ***gathered,
                            int32_t *ngathered);
/* short_reduce.c: when g has reduces over at most a few elements per output, off the
 * innermost axis, whose input is theirs alone, *out is a copy of g (owned by the caller) where
 * each is its slices folded by element-wise ops, and *names their names (nnames of them,
 * malloc'd, free with prune_free_names); else *out is NULL. Fails only on memory. */
astitch_status pass_short_reduce(const astitch_graph *g, astitch_graph **out, char ***names,
                                 int32_t *nnames);
/* concat_tree.c: when g has a concatenate of more than CONCAT_TREE_WIDTH operands, *out is a
 * copy of g (owned by the caller) where each is a tree of concatenates of at most that many;
 * else *out is NULL. Fails only on memory. */
#define CONCAT_TREE_WIDTH 64
astitch_status pass_concat_tree(const astitch_graph *g, astitch_graph **out);
/* dot_lower.c: when g has an integer dot (of fewer than MAX_RANK axes), *out is a copy of g
 * (owned by the caller) where each is the row sum of a product of its broadcast operands,
 * named as the dot; else *out is NULL. Fails only on memory. */
astitch_status pass_dot_lower(const astitch_graph *g, astitch_graph **out);
/* scope.c (fusion stitch or none) and xla.c (fusion xla): split the graph's memory-intensive
 * ops into kernels (p->kernel, their op lists; p->owner), no cycle between kernels. Require
 * a fresh Planner; fail only on memory. */
astitch_status pass_scope(Planner *pl);
astitch_status pass_xla(Planner *pl);
/* remote.c: merges independent kernels (no path between them) where that pays; keeps
 * p->owner and the op lists consistent. Fails only on memory. */
astitch_status pass_remote(Planner *pl);
/* bound.c: cuts every kernel with more than PLAN_KERNEL_MAX_TENSORS inputs and outputs into
 * pieces within it (kernels renumbered by first node when any is cut); refuses (UNSUPPORTED)
 * only an xla kernel over the bound that recomputes another kernel's op. */
astitch_status pass_bound(Planner *pl);
/* hoist.c: cuts off, as a kernel of its own before it, the cheap producers of a planned
 * kernel's one global barrier (option hoist); *changed when any kernel was cut, the kernels
 * then fresh op lists for plan_fill. Fails only on memory. */
astitch_status pass_hoist(Planner *pl, bool *changed);
/* hoist.c: puts back together, after they were planned, the two kernels of each cut whose rest
 * still needs a global barrier (a task split the wider grid asked for); *changed as above. */
astitch_status pass_hoist_undo(Planner *pl, bool *changed);
/* What thread mapping (mapping.c, map_row.c, map_column.c, packing.c) knows of the kernel it
 * maps. */
typedef struct MapCtx {
    const astitch_device *dev;
    int32_t block;
    int32_t wave;
    bool packing;
    bool persistent; /* the grid is at most one wave; else a block per tile */
    bool wide_rows;  /* astitch_plan_options.wide_rows */
    bool long_rows;  /* astitch_plan_options.long_rows */
    bool alone;      /* the kernel has one group */
    bool stream_warp; /* a streamed row may take one warp (not k->stream_by_block) */
    bool column_runs; /* astitch_plan_options.column_vectors */
    bool whole_columns; /* a lone column group takes no task split: map_column_block chose a
                         * block for runs whose wider wave would have split the rows */
    bool online;        /* astitch_plan_options.online_softmax */
    bool balance_lanes; /* the block follows the resident rows' lanes (mapping.c, rows_block,
                         * one row layout): their lanes need not be a power of two */
} MapCtx;
/* What map_column knows of a column group's walk: the element size of the space's widest
 * tensor, the group's reductions (and those of them not of floats, whose accumulators are not
 * f32), the kernel's inputs of the space's size, and whether it holds an online pair. */
typedef struct ColumnWalk {
    int64_t access_bytes;
    int64_t reduces;
    int64_t not_float;
    int64_t inputs;
    bool online_pair; /* the group's max and a sum of exp(x - max) (plan_online_nodes), which
                       * the online walk takes together in single columns */
} ColumnWalk;
/* mapping.c: the elements of a 16-byte access of a tensor of access_bytes elements (2 i64,
 * 4 f32, 8 f16/bf16 and narrower). */
int64_t mapping_access_elements(int64_t access_bytes);
/* The smallest and the largest element size in bytes of the tensors of a mapping's space. */
typedef struct ElementSizes {
    int64_t least, most;
} ElementSizes;
/* map_row.c: the most lanes a resident row takes without the long_rows option; a kernel with
 * resident rows keeps blocks of at least this many threads (mapping.c). */
enum { MAP_ROW_LANES_MAX = 256 };
/* map_row.c: row group m's lanes per row, vector (> 0 when its rows are resident), rows per
 * block and split, with c's block and wave and b the element sizes of its space's tensors. */
void map_row(astitch_mapping *m, const MapCtx *c, ElementSizes b);
/* map_row.c: the resident layout of row mapping m under c (lanes per row, vector width);
 * false when its rows are streamed instead (not reduced over trailing axes, too long, or
 * packing off). */
bool map_row_resident_layout(const astitch_mapping *m, const MapCtx *c, ElementSizes b,
                             int64_t *lanes, int32_t *vector);
/* map_row.c: the register bound a resident row of e elements per lane, u tiles at once, is
 * planned with (a kernel of a block per tile unless `persistent`). */
int64_t map_row_resident_regs(int64_t e, int64_t u, bool persistent);
/* map_column.c: column group m's rows per block, lanes, runs (vector) and split, with c's
 * block and wave and what w says of its walk (docs/planner.md, *mapping*). */
void map_column(astitch_mapping *m, const MapCtx *c, const ColumnWalk *w);
/* map_column.c: the block of a kernel (not persistent) whose one group is column group m,
 * planned at c->block and `regs` registers within wave_limit (when above 0): c->block, or the
 * largest block of fewer warps down the rows at which m takes runs, unsplit, where it takes
 * none at c->block (docs/planner.md, *Column runs*); *whole when the runs hold only with the
 * rows kept whole on a grid under the smaller block's wave (MapCtx.whole_columns). */
int32_t map_column_block(const astitch_mapping *m, const MapCtx *c, const ColumnWalk *w,
                         int64_t regs, int64_t wave_limit, bool *whole);
/* mapping.c: blocks per wave of `block` threads at `regs` registers on dev, within wave_limit
 * (when above 0); 0 when an SM cannot hold one such block. */
int64_t mapping_wave(const astitch_device *dev, int64_t block, int64_t regs, int64_t wave_limit);
/* packing.c. Sets m's block, grid, chunk, tasks_per_block and split_len for `tiles` tiles of
 * tile_rows rows each (m->split, rows_per_block set): split tiles a block per part; else a
 * block per tile, or, persistent, at most a wave of blocks each walking a contiguous chunk of
 * tiles (vertical packing; chunks a multiple of quantum). */
void packing_finish(astitch_mapping *m, const MapCtx *c, int64_t tiles, int64_t tile_rows,
                    int64_t quantum);
/* The most parts a row of reduce mapping m (threads_per_row and vector set) may be split into
 * across blocks: 1 when it is not split at all (packing off, resident rows, short rows). */
int64_t packing_split_most(const astitch_mapping *m, const MapCtx *c);
/* Parts (at most `most`) to split each of `tiles` tiles into when there are fewer tiles than
 * blocks per wave; `balance`: choose the count that fills the waves best (a column group alone
 * in a kernel of a block per tile). */
int64_t packing_split(const MapCtx *c, int64_t tiles, int64_t most, bool balance);

/* The steps on one kernel (pl->kidx indexed for it), in pipeline order; each may fail with
 * UNSUPPORTED naming what the device cannot do, or on memory.
 * dominant.c: roles, groups and each group's dominant (PLAN_STAGE_GROUPS). */
astitch_status pass_dominant(Planner *pl, PlanKernel *k);
/* mapping.c: each group's thread mapping from its dominant, within k->wave_limit when set;
 * invalidates the phases (propagate makes them again). */
astitch_status pass_mapping(Planner *pl, PlanKernel *k);
/* mapping.c: true when a streamed row that the mapping gave one warp is walked more than once
 * by its tile run (an online max and sum counting once) while the rows of a wave's warps hold
 * more than half the device's L2 (any, where the model knows no L2): the later walks would read
 * DRAM again. The mapping is then made again with k->stream_by_block. */
bool mapping_stream_rewalks(const Planner *pl, const PlanKernel *k);
/* mapping.c: the bytes of one block's tile of a column walk that its tile run walks again
 * (the largest such tile of kernel k), 0 when no column walk is walked twice. */
int64_t mapping_column_rewalk_bytes(const Planner *pl, const PlanKernel *k);
/* map_row.c: the fewest registers a resident row of e elements per lane may be bounded to. */
int64_t mapping_resident_min_regs(int64_t e);
/* map_row.c: true when a reduction over `axes` of a tensor of shape s could keep its rows in
 * registers (trailing axes, a row no longer than a resident row may be, with long_rows as
 * astitch_plan_options.long_rows). */
bool mapping_rows_may_reside(const Shape *s, uint32_t axes, bool long_rows);
/* across.c: moves every column group whose reductions can be summed inside a resident row
 * group of the same space (plan_reduce_across) into that group; *moved says whether it moved
 * one (the mapping step then runs again over the groups left). Requires the groups'
 * mappings; fails only on memory. */
astitch_status pass_across(Planner *pl, PlanKernel *k, bool *moved);
/* propagate.c: roots, phases in dependence order and pl->read from the groups' mappings
 * (PLAN_STAGE_PHASES but for schemes and barriers). */
astitch_status pass_propagate(Planner *pl, PlanKernel *k);
/* adapt.c: true when it changed a group's mapping (block locality), which invalidates the
 * phases: propagate again. */
bool pass_adapt(Planner *pl, PlanKernel *k);
/* schemes.c: each materialized op's scheme and zero-init from the phases and pl->read; the
 * barriers step follows. */
astitch_status pass_schemes(Planner *pl, PlanKernel *k);
/* memory.c: buffers, their offsets, k->shared_bytes and k->scratch_bytes within
 * pl->shared_cap; over the cap, regional ops turn global (barriers and tile runs cut again)
 * until it fits (PLAN_STAGE_MEMORY). Requires tile runs. */
astitch_status pass_memory(Planner *pl, PlanKernel *k);
/* launch.c: sets k's register bound and residency. When a persistent grid exceeds a wave at the
 * planned shared memory, sets *smaller_wave and lowers k->wave_limit for another try instead;
 * fails (UNSUPPORTED) only when no block fits on an SM. */
astitch_status pass_launch(Planner *pl, PlanKernel *k, bool *smaller_wave);
/* carry.c: with plan option carry, gives launched persistent kernel k the values its later
 * walk reads again after a global barrier, kept by the earlier walk in the shared memory its
 * residency leaves free (CARRY buffers, k->carry); nothing otherwise. Fails only when out of
 * memory. */
astitch_status pass_carry(Planner *pl, PlanKernel *k);
/* The most registers per thread (in allocation units, at most the device's per-thread limit)
 * at which `blocks` blocks of `block` threads fit on an SM of d; also what the CUDA runtime
 * relaxes a spilling kernel to (exec_cuda.c). */
int64_t launch_regs_for(const astitch_device *d, int64_t block, int64_t blocks);
/* How many blocks of `block` threads at `regs` registers each and `shared` bytes of shared
 * memory fit on an SM of d (the device's block and thread limits included). */
int64_t launch_blocks_per_sm(const astitch_device *d, int64_t block, int64_t regs, int64_t shared);
/* The register bound for a kernel of `block` threads at `regs` registers and `blocks_per_sm`
 * resident blocks that gives up the fewest blocks per SM and still raises its registers (what
 * a spilling kernel is relaxed to), or 0 when none does. */
int64_t launch_next_regs(const astitch_device *d, int64_t block, int64_t regs,
                         int64_t blocks_per_sm);
/* Whether kernel k may run at another register bound than planned: a block per tile (a
 * persistent grid, or one with global barriers, counts on the planned residency). */
bool launch_bound_may_change(const PlanKernel *k);
/* launch_next_regs of kernel k at `bound`, with as many blocks per SM as the bound and its
 * shared memory allow on d; 0 when there is no higher bound. */
int64_t launch_next_bound(const astitch_device *d, const PlanKernel *k, int64_t bound);

#endif
