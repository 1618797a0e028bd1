/* emit_reduce.c: a reduce phase: each lane's walk over its part of the rows (column mappings
 * several elements per iteration), the combine of a row's lanes (emit_combine.c), and the
 * store of the result (cross-block combines of split rows: emit_split.c). */
#define ASTITCH_EMIT_INTERNAL
#include <stdlib.h>

#include "codegen.h"

static LLVMValueRef imin(Emit *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, b, ""), a, b, "");
}

static LLVMValueRef and3(Emit *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    return LLVMBuildAnd(e->b, LLVMBuildAnd(e->b, a, b, ""), c, "");
}

void emit_space_index(Emit *e, const astitch_mapping *m, const Shape *space, LLVMValueRef row,
                        LLVMValueRef j, Index *ix)
{
    *ix = (Index){.shape = space};
    uint32_t all = m->rank >= 32 ? ~0u : (1u << m->rank) - 1;
    uint32_t trailing = 0, leading = 0;
    for (int i = m->rank - 1; i >= 0 && (m->reduce_axes >> i & 1); i--)
        trailing |= 1u << i;
    for (int i = 0; i < m->rank && (m->reduce_axes >> i & 1); i++)
        leading |= 1u << i;
    if (m->reduce_axes == trailing) {
        ix->lin = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, row, ev_int(e, m->row_len), ""), j, "");
        return;
    }
    if (m->reduce_axes == leading && (all & ~leading)) {
        ix->lin = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, j, ev_int(e, m->rows), ""), row, "");
        return;
    }
    LLVMValueRef r = row, q = j;
    for (int i = m->rank - 1; i >= 0; i--) {
        bool red = m->reduce_axes >> i & 1;
        LLVMValueRef *src = red ? &q : &r;
        int64_t d = space->dim[i];
        ix->axis[i] = LLVMBuildURem(e->b, *src, ev_int(e, d), "");
        *src = LLVMBuildUDiv(e->b, *src, ev_int(e, d), "");
    }
    ix->has_axes = true;
}

/* Elements per iteration of a reduction's element loop: of a column reduction's, and of a row
 * reduction's whose threads take at least ROW_UNROLL_MIN_ELEMENTS elements of their row. A
 * thread reads one element per iteration, so with one per iteration it has a single load in
 * flight per tensor it reads; with several, all loaded and computed before any is stored or
 * combined, it has that many. A phase that already reads more than COLUMN_UNROLL_LOADS_MAX
 * tensors per element keeps one: it has as many loads in flight, and a second element's
 * addresses would not fit its registers (layernorm_backward under --fusion=xla: its dgamma
 * kernel reads dy, x, mean and rstd per element and spills under its 32-register bound at
 * two). Measured on the H100 (2026-11-25; 1, 2, 4, 8 per iteration): two gave batchnorm_train
 * 138.1 -> 128.6 us, gpt2_bwd_mlp_gelu 125.0 -> 118.2 and the rest within 1%; four and eight
 * gained nothing more and slowed the GELU backward graphs (bert_base_bwd_ffn_gelu spills at
 * four, 67.8 -> 72.4). Rows: a batch norm over N, H and W of NCHW activations (a row per channel, split across blocks, 25
 * elements per thread) 44.9 -> 39.7 us at two (resnet50_train_fwd_bn_relu, 2026-11-26); the
 * long softmaxes (4 per thread) did not move, transformer_row_reduce (8) read 2-3% slower.
 * A column thread's runs of 16 bytes (plan_column_vector) take one run per iteration: at the
 * 32-register bound two or four ran 1-4% slower on the means over a sequence and over a leading
 * axis (H200, 2026-11-29, bench/RESULTS.md, *Column runs*); narrower runs (a batch norm's
 * three sums in runs of 2 f32) take two, as single columns do. */
enum { COLUMN_UNROLL = 2, COLUMN_UNROLL_LOADS_MAX = 2, ROW_UNROLL_MIN_ELEMENTS = 16,
       COLUMN_RUN_UNROLL_FULL = 1 };
/* A streamed row's phase that reads one tensor per element, in a kernel whose register bound
 * leaves room (at 32, four runs spill), takes four runs per iteration. Measured on the H100
 * (2026-11-27; 2, 4, 8 runs, interleaved twice): llama2_7b_fwd_cross_entropy 130.6 -> 121.7 us
 * at four (127.7 at eight), softmax_32k (also 64 registers) unchanged;
 * resnet50_train_fwd_bn_relu at 32 registers spilled at four, 33.7 -> 40.8. */
enum { ROW_UNROLL_WIDE = 4, ROW_UNROLL_WIDE_REGS = 64 };
/* Such a walk in single elements (a row no 16-byte run divides: GPT-2's 50257-token vocabulary)
 * takes as many elements per iteration as ROW_UNROLL_WIDE runs would hold (32 f16, 16 f32), so
 * that a thread keeps as many bytes in flight. Measured on the H200 (2026-11-30, A B B A): the
 * loss over [8192, 50257] f16 765 -> 264 us (26% -> 74% of the copy rate), over [4096, 50257]
 * f32 253 -> 196 us (77% -> 100%). */
enum { ROW_UNROLL_SCALAR_RUNS = ROW_UNROLL_WIDE };
/* Under a tighter bound such a walk takes ROW_UNROLL_SCALAR_TIGHT elements per iteration, not
 * COLUMN_UNROLL (sixteen spill at 32 registers). Measured on the H200 (2026-11-30, 0 4 8 16 16 8
 * 4 0 by a temporary switch): the log-softmax of GPT-2's vocabulary in f32 (32 registers) 174.6
 * -> 166.4 us at eight (160.0 at sixteen, spilling 48 bytes; as committed, against the library
 * before, 173.5 -> 166.8). A walk in runs of 2 (a GroupNorm of 10 channels a group under
 * channels_last) moved by none of them, so it keeps its two. */
enum { ROW_UNROLL_SCALAR_TIGHT = 8 };
_Static_assert((int)COLUMN_UNROLL <= (int)ITERATION_ELEMENTS_MAX &&
               (int)ROW_UNROLL_WIDE <= (int)ITERATION_ELEMENTS_MAX &&
               (int)ROW_UNROLL_SCALAR_RUNS * 8 <= (int)ITERATION_ELEMENTS_MAX &&
               (int)ROW_UNROLL_SCALAR_TIGHT <= (int)ITERATION_ELEMENTS_MAX,
               "the element loops' arrays bound");

/* The tensors phase-p values read from memory at each element of the rows under node n: kernel
 * inputs and values of earlier phases with more elements than the mapping has rows (the others
 * are the same along the reduced axes, read once per row and kept by the compiler). seen marks
 * the nodes already counted. */
static int element_loads(const Emit *e, const PlanPhase *p, int32_t n, bool *seen)
{
    if (seen[n])
        return 0;
    seen[n] = true;
    const PlanOp *op = plan_kernel_op(e->k, n);
    if (!op || (op->phase >= 0 && op->phase < e->phase))
        return shape_elements(&gnode(e->g, n)->shape) > p->map.rows;
    int loads = 0;
    for (int k = 0; k < gnode(e->g, n)->nin; k++)
        loads += element_loads(e, p, goperand(e->g, n, k), seen);
    return loads;
}

int emit_elements_per_iteration(Emit *e, const PlanPhase *p)
{
    if (e->opt.lean && e->opt.lean[e->k - e->plan->kernel])
        return 1;
    int run = plan_column_vector(&p->map);
    if (run > 1 && run >= plan_access_elements(e->g, e->k, p))
        return COLUMN_RUN_UNROLL_FULL;
    if (p->map.kind != ASTITCH_MAP_COLUMN_REDUCE &&
        astitch_mapping_elements_per_thread(&p->map) < ROW_UNROLL_MIN_ELEMENTS)
        return 1;
    bool *seen = calloc((size_t)e->g->nnode, sizeof *seen);
    if (!seen)
        return 1;
    int loads = 0;
    for (int r = 0; r < p->nroot; r++)
        loads += element_loads(e, p, p->root[r], seen);
    free(seen);
    bool row = p->map.kind != ASTITCH_MAP_COLUMN_REDUCE;
    if (row && loads == 1 && e->k->regs >= ROW_UNROLL_WIDE_REGS) {
        if (plan_row_vector(e->plan, e->k, p) > 1)
            return ROW_UNROLL_WIDE;
        int n = ROW_UNROLL_SCALAR_RUNS * plan_access_elements(e->g, e->k, p);
        return n < ITERATION_ELEMENTS_MAX ? n : ITERATION_ELEMENTS_MAX;
    }
    if (row && loads == 1 && plan_row_vector(e->plan, e->k, p) == 1)
        return ROW_UNROLL_SCALAR_TIGHT;
    return loads <= COLUMN_UNROLL_LOADS_MAX ? COLUMN_UNROLL : 1;
}

/* count elements of one thread's part of reduce phase p, at element indices j, j + step, ...
 * of the rows' reduced axes: the roots of p are evaluated at all of them first, then the
 * reduce roots red fold them into acc in that order (next: the folded values) and the other
 * roots are stored. */
static void reduce_elements(Emit *e, const PlanPhase *p, const Shape *space, LLVMValueRef row,
                            LLVMValueRef j, int64_t step, int count, int32_t nred,
                            const int32_t *red, LLVMValueRef *acc, LLVMValueRef *next)
{
    enum { COUNT_MAX = ITERATION_ELEMENTS_MAX };
    Index ix[COUNT_MAX];
    LLVMValueRef *val = malloc((size_t)p->nroot * COUNT_MAX * sizeof *val);
    if (!val || count > COUNT_MAX) {
        free(val);
        ev_fail(e, e->ix, ASTITCH_ERR_INTERNAL, "%s: %d elements per iteration", e->k->name, count);
        return;
    }
    for (int u = 0; u < count; u++) {
        LLVMValueRef ju = u ? LLVMBuildAdd(e->b, j, ev_int(e, (int64_t)u * step), "") : j;
        emit_space_index(e, &p->map, space, row, ju, &ix[u]);
        ev_begin_element(e, &ix[u]);
        if (e->carry_mode == CARRY_LOAD)
            emit_carry_seed(e, ju, 1);
        for (int r = 0, q = 0; r < p->nroot; r++) {
            int32_t n = p->root[r];
            if (q < nred && red[q] == n) {
                val[r * COUNT_MAX + u] = ev_value(e, goperand(e->g, n, 0), &ix[u]);
                q++;
                continue;
            }
            const Node *node = gnode(e->g, n);
            Index own = {.shape = &node->shape, .lin = ev_lin(e, &ix[u])};
            val[r * COUNT_MAX + u] = ev_value(e, n, shape_equal(&node->shape, space) ? &ix[u] : &own);
        }
        if (e->carry_mode == CARRY_STORE)
            emit_carry_store(e, ju, &ix[u], 1);
    }
    for (int r = 0, q = 0; r < p->nroot; r++) {
        int32_t n = p->root[r];
        if (q < nred && red[q] == n) {
            const Node *node = gnode(e->g, n);
            next[q] = acc[q];
            for (int u = 0; u < count; u++)
                next[q] = ev_reduce_combine(e, node->attr.reduce, node->dtype, next[q],
                                            val[r * COUNT_MAX + u]);
            q++;
            continue;
        }
        for (int u = 0; u < count; u++) {
            const Node *node = gnode(e->g, n);
            Index own = {.shape = &node->shape, .lin = ev_lin(e, &ix[u])};
            Index *where = shape_equal(&node->shape, space) ? &ix[u] : &own;
            ev_store_root(e, n, where, val[r * COUNT_MAX + u]);
        }
    }
    free(val);
}

/* The reduced-axis index at loop value iv of walk_elements: iv itself, or with last (walking
 * backwards) last - iv * tpr. */
static LLVMValueRef element_at(Emit *e, LLVMValueRef last, int64_t tpr, LLVMValueRef iv)
{
    return last ? LLVMBuildSub(e->b, last, LLVMBuildMul(e->b, iv, ev_int(e, tpr), ""), "") : iv;
}

/* count elements of the thread's rows from reduced index j (step apart), or with v > 1 the
 * runs of v rows from row at count reduced indices from j (a column mapping, emit_column_runs)
 * or count runs of v elements of its row from j (a row mapping, emit_row_runs). */
static void step_elements(Emit *e, const PlanPhase *p, const Shape *space, LLVMValueRef row,
                          int v, LLVMValueRef j, int64_t step, int count, int32_t nred,
                          const int32_t *red, LLVMValueRef *acc, LLVMValueRef *next)
{
    /* next starts as acc: an emitter that fails before folding leaves the loop well formed
     * (the failure is reported; the module is never finished) */
    int32_t nacc = v > 1 && p->map.kind == ASTITCH_MAP_COLUMN_REDUCE ? nred * v : nred;
    for (int32_t q = 0; q < nacc; q++)
        next[q] = acc[q];
    if (v > 1 && p->map.kind == ASTITCH_MAP_COLUMN_REDUCE)
        emit_column_runs(e, p, space, row, j, v, step, count, nred, red, acc, next);
    else if (v > 1)
        emit_row_runs(e, p, space, row, j, step, count, v, nred, red, acc, next);
    else
        reduce_elements(e, p, space, row, j, step, count, nred, red, acc, next);
}

/* The element loops of walk_elements over iv in [lo, hi) by unit: groups of `unroll` elements
 * (or runs), then one at a time; the element at iv is iv itself, or with last (walking
 * backwards) last - iv * tpr, and the next ones `step` apart. The accumulators start at init
 * (which it overwrites) and end in acc. */
static void walk_range(Emit *e, const PlanPhase *p, const Shape *space, LLVMValueRef row, int v,
                       int unroll, LLVMValueRef lo, LLVMValueRef hi, int64_t unit,
                       LLVMValueRef last, int64_t tpr, int64_t step, int nacc, int32_t nred,
                       const int32_t *red, LLVMValueRef *init, LLVMValueRef *acc,
                       LLVMValueRef *next)
{
    if (unroll > 1) {
        Loop group;
        loop_begin(e, &group, lo, LLVMBuildSub(e->b, hi, ev_int(e, (unroll - 1) * unit), ""), init,
                   nacc, acc);
        step_elements(e, p, space, row, v, element_at(e, last, tpr, group.iv), step, unroll,
                      nred, red, group.carried, next);
        loop_end(e, &group, ev_int(e, unroll * unit), next);
        lo = group.iv;
        for (int q = 0; q < nacc; q++)
            init[q] = group.carried[q]; /* before the next loop reuses acc for its phis */
    }
    Loop el;
    loop_begin(e, &el, lo, hi, init, nacc, acc);
    step_elements(e, p, space, row, v, element_at(e, last, tpr, el.iv), step, 1, nred, red,
                  el.carried, next);
    loop_end(e, &el, ev_int(e, unit), next);
}

/* One thread's walk over its elements of the rows, at reduced-axis indices start, start +
 * lanes, ... below end (lanes: threads_per_row, times v for a vector form: of a column
 * mapping, whose thread takes the run of v rows from row; of a row mapping, whose thread takes
 * the run of v elements from each index), in groups of elements_per_iteration (one row per
 * thread, or runs of a row) and then one at a time: the reduce roots red fold them into
 * accumulators (one per reduce; v for a column run, acc[q * v + u] for row u of the run) that
 * start at init and end in acc (next: the loop's scratch). A phase without reductions after
 * another phase of its kernel walks backwards, from its last element: the earlier phase's last
 * reads (of the same inputs, as a batch norm's normalization reads x after its statistics) are
 * still in L2 when it starts (H100: batchnorm_train, a column walk, 128.6 -> 122.6 us). A phase
 * that stores or reads carried values (emit_carry.c) takes the iterations kept (the thread's
 * first `slots`, in the forward order) in loops of their own: first when walking forwards, last
 * when backwards. */
static void walk_elements(Emit *e, const PlanPhase *p, const Shape *space, LLVMValueRef row,
                          int v, LLVMValueRef start, LLVMValueRef end, int32_t nred,
                          const int32_t *red, LLVMValueRef *init, LLVMValueRef *acc,
                          LLVMValueRef *next)
{
    bool column = p->map.kind == ASTITCH_MAP_COLUMN_REDUCE;
    /* a column run's lanes are threads_per_row; a row lane's runs lie threads_per_row * v apart */
    int64_t tpr = column ? p->map.threads_per_row : (int64_t)p->map.threads_per_row * v;
    int nacc = column ? nred * v : nred;
    int unroll = emit_elements_per_iteration(e, p);
    bool reverse = nred == 0 && e->phase > e->part_first;
    int carry = emit_carry_role(e);
    /* the thread's n elements: forward iv is the element's index itself; backward iv = k
     * counts them, element k at last - k * tpr */
    LLVMValueRef n = NULL, last = NULL;
    if (reverse || carry != CARRY_NONE) {
        n = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, end, start, ""),
            LLVMBuildAdd(e->b, LLVMBuildSDiv(e->b, LLVMBuildSub(e->b, LLVMBuildSub(e->b, end, start, ""),
                ev_int(e, 1), ""), ev_int(e, tpr), ""), ev_int(e, 1), ""), ev_int(e, 0), "n");
    }
    if (reverse)
        last = LLVMBuildAdd(e->b, start, LLVMBuildMul(e->b, LLVMBuildSub(e->b, n, ev_int(e, 1), ""),
                                                      ev_int(e, tpr), ""), "last");
    LLVMValueRef lo = reverse ? ev_int(e, 0) : start, hi = reverse ? n : end;
    int64_t unit = reverse ? 1 : tpr, step = reverse ? -tpr : tpr;
    if (carry == CARRY_NONE) {
        walk_range(e, p, space, row, v, unroll, lo, hi, unit, last, tpr, step, nacc, nred, red,
                   init, acc, next);
        return;
    }
    e->carry_start = start;
    e->carry_step = tpr;
    if (e->k->carry.slots >= e->k->carry.iterations) {
        /* every iteration kept: one loop, none for the others (it would never run) */
        e->carry_mode = carry;
        walk_range(e, p, space, row, v, unroll, lo, hi, unit, last, tpr, step, nacc, nred, red,
                   init, acc, next);
        e->carry_mode = CARRY_NONE;
        return;
    }
    LLVMValueRef slots = ev_int(e, e->k->carry.slots);
    LLVMValueRef kept = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, n, slots, ""), n,
                                        slots, "kept");
    /* forward: the kept iterations from start; backward: the others first (k < n - kept) */
    LLVMValueRef mid = reverse ? LLVMBuildSub(e->b, n, kept, "")
                               : LLVMBuildAdd(e->b, start, LLVMBuildMul(e->b, kept, ev_int(e, tpr), ""), "");
    e->carry_mode = reverse ? CARRY_NONE : carry;
    walk_range(e, p, space, row, v, unroll, lo, mid, unit, last, tpr, step, nacc, nred, red,
               init, acc, next);
    for (int q = 0; q < nacc; q++)
        init[q] = acc[q];
    e->carry_mode = reverse ? carry : CARRY_NONE;
    walk_range(e, p, space, row, v, unroll, mid, hi, unit, last, tpr, step, nacc, nred, red,
               init, acc, next);
    e->carry_mode = CARRY_NONE;
}

void emit_reduce_store(Emit *e, const astitch_mapping *m, int32_t root, LLVMValueRef row,
                       LLVMValueRef sum)
{
    if (m->split > 1) {
        emit_split_store(e, m, root, row, sum);
        return;
    }
    Index out = {.shape = &gnode(e->g, root)->shape, .lin = row};
    ev_store_root(e, root, &out, sum);
}

void emit_reduce(Emit *e, const PlanPhase *p, LLVMValueRef tile_iv)
{
    const astitch_mapping *m = &p->map;
    Shape space = plan_mapping_space(m);
    bool column = m->kind == ASTITCH_MAP_COLUMN_REDUCE;
    int tpr = m->threads_per_row, rpb = m->rows_per_block;
    /* a column thread takes the run of v rows from row_in_tile, a row lane runs of v elements
     * of its row (v = 1: one row, one element) */
    int v = column ? plan_column_vector(&p->map) : plan_row_vector(e->plan, e->k, p);
    ASTITCH_ASSERT(v >= 1 && v <= VECTOR_MAX && (!column || rpb % v == 0));
    LLVMValueRef row_in_tile = column ? LLVMBuildURem(e->b, e->tid, ev_int(e, rpb / v), "")
                                      : LLVMBuildUDiv(e->b, e->tid, ev_int(e, tpr), "");
    if (column && v > 1)
        row_in_tile = LLVMBuildMul(e->b, row_in_tile, ev_int(e, v), "");
    LLVMValueRef lane = column ? LLVMBuildUDiv(e->b, e->tid, ev_int(e, rpb / v), "")
                               : LLVMBuildURem(e->b, e->tid, ev_int(e, tpr), "");
    int per = column ? v : 1; /* accumulators per reduce */
    size_t nacc = (size_t)p->nroot * (size_t)per;
    int32_t nred = 0, *red = malloc((size_t)p->nroot * sizeof *red);
    LLVMValueRef *init = malloc(nacc * sizeof *init);
    LLVMValueRef *acc = malloc(nacc * sizeof *acc);
    LLVMValueRef *next = malloc(nacc * sizeof *next);
    if (!red || !init || !acc || !next) {
        ev_fail(e, e->ix, ASTITCH_ERR_MEMORY, "out of memory");
        goto out;
    }
    for (int r = 0; r < p->nroot; r++) {
        const Node *n = gnode(e->g, p->root[r]);
        if (n->op == ASTITCH_OP_REDUCE && n->attr.axes == m->reduce_axes &&
            shape_equal(&gnode(e->g, goperand(e->g, p->root[r], 0))->shape, &space)) {
            LLVMValueRef id = ev_reduce_start(e, n->attr.reduce, n->dtype, m->row_len);
            for (int u = 0; u < per; u++)
                init[nred * per + u] = id;
            red[nred++] = p->root[r];
        }
    }
    Loop tile;
    int64_t tiles = m->split > 1 ? 1 : m->tasks_per_block;
    if (!tile_iv) {
        loop_begin(e, &tile, ev_int(e, 0), ev_int(e, tiles), NULL, 0, NULL);
        tile_iv = tile.iv;
    } else {
        tile.head = NULL;
    }
    LLVMValueRef tile_base, jlo, jhi, in_chunk, t0 = NULL;
    if (m->split > 1) {
        LLVMValueRef part = LLVMBuildURem(e->b, e->ctaid, ev_int(e, m->split), "");
        tile_base = LLVMBuildMul(e->b, LLVMBuildUDiv(e->b, e->ctaid, ev_int(e, m->split), ""), ev_int(e, rpb), "");
        jlo = LLVMBuildMul(e->b, part, ev_int(e, m->split_len), "");
        jhi = imin(e, LLVMBuildAdd(e->b, jlo, ev_int(e, m->split_len), ""), ev_int(e, m->row_len));
        in_chunk = row_in_tile;
    } else {
        t0 = LLVMBuildMul(e->b, tile_iv, ev_int(e, rpb), "");
        tile_base = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, e->ctaid, ev_int(e, m->chunk), ""), t0, "");
        jlo = ev_int(e, 0);
        jhi = ev_int(e, m->row_len);
        in_chunk = LLVMBuildAdd(e->b, t0, row_in_tile, "");
    }
    LLVMValueRef row = LLVMBuildAdd(e->b, tile_base, row_in_tile, "row");
    LLVMValueRef chunk_ok = m->split > 1 ? LLVMConstInt(LLVMInt1TypeInContext(e->c), 1, 0)
                                         : LLVMBuildICmp(e->b, LLVMIntSLT, in_chunk, ev_int(e, m->chunk), "");
    LLVMValueRef valid = and3(e, LLVMBuildICmp(e->b, LLVMIntSLT, row_in_tile, ev_int(e, rpb), ""),
                              chunk_ok, LLVMBuildICmp(e->b, LLVMIntSLT, row, ev_int(e, m->rows), ""));
    /* invalid threads run an empty element loop but still join the combine */
    LLVMValueRef end = LLVMBuildSelect(e->b, valid, jhi, ev_int(e, 0), "");
    LLVMValueRef start = LLVMBuildAdd(e->b, jlo, !column && v > 1
                                      ? LLVMBuildMul(e->b, lane, ev_int(e, v), "") : lane, "");
    walk_elements(e, p, &space, row, v, start, end, nred, red, init, acc, next);
    for (int q = 0; q < nred; q++) {
        if (column && v > 1) {
            emit_column_combine(e, m, red[q], v, &acc[q * v], tile_base, t0);
            continue;
        }
        LLVMValueRef sum = emit_combine_reduce(e, m, red[q], acc[q], row_in_tile);
        LLVMBasicBlockRef merge = if_begin(e, LLVMBuildAnd(e->b, valid,
                                  LLVMBuildICmp(e->b, LLVMIntEQ, lane, ev_int(e, 0), ""), ""));
        emit_reduce_store(e, m, red[q], row, sum);
        if_end(e, merge);
    }
    if (tile.head)
        loop_end(e, &tile, ev_int(e, 1), NULL);
out:
    free(red);
    free(init);
    free(acc);
    free(next);
}
