/* emit_phase.c: one phase of a kernel, or a run of phases: the thread-mapping loops of its
 * plan mapping and the evaluation and stores of its roots (reduce phases: emit_reduce.c;
 * resident runs: emit_resident.c). */
#define ASTITCH_EMIT_INTERNAL
#include <stdlib.h>

#include "codegen.h"

void loop_begin(Emit *e, Loop *l, LLVMValueRef start, LLVMValueRef end,
                LLVMValueRef *init, int ncarried, LLVMValueRef *carried)
{
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(e->b);
    l->head = LLVMAppendBasicBlockInContext(e->c, e->fn, "loop");
    l->body = LLVMAppendBasicBlockInContext(e->c, e->fn, "body");
    l->exit = LLVMAppendBasicBlockInContext(e->c, e->fn, "exit");
    LLVMBuildBr(e->b, l->head);
    LLVMPositionBuilderAtEnd(e->b, l->head);
    l->iv = LLVMBuildPhi(e->b, e->ix, "iv");
    LLVMAddIncoming(l->iv, &start, &pre, 1);
    l->carried = carried;
    l->ncarried = ncarried;
    for (int i = 0; i < ncarried; i++) {
        carried[i] = LLVMBuildPhi(e->b, LLVMTypeOf(init[i]), "acc");
        LLVMAddIncoming(carried[i], &init[i], &pre, 1);
    }
    LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, l->iv, end, ""), l->body, l->exit);
    LLVMPositionBuilderAtEnd(e->b, l->body);
}

void loop_end(Emit *e, Loop *l, LLVMValueRef step, LLVMValueRef *next)
{
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(e->b);
    LLVMValueRef iv2 = LLVMBuildAdd(e->b, l->iv, step, "");
    LLVMAddIncoming(l->iv, &iv2, &latch, 1);
    for (int i = 0; i < l->ncarried; i++)
        LLVMAddIncoming(l->carried[i], &next[i], &latch, 1);
    LLVMBuildBr(e->b, l->head);
    LLVMPositionBuilderAtEnd(e->b, l->exit);
}

LLVMBasicBlockRef if_begin(Emit *e, LLVMValueRef cond)
{
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(e->c, e->fn, "then");
    LLVMBasicBlockRef merge = LLVMAppendBasicBlockInContext(e->c, e->fn, "endif");
    LLVMBuildCondBr(e->b, cond, then, merge);
    LLVMPositionBuilderAtEnd(e->b, then);
    return merge;
}

void if_end(Emit *e, LLVMBasicBlockRef merge)
{
    LLVMBuildBr(e->b, merge);
    LLVMPositionBuilderAtEnd(e->b, merge);
}

static LLVMValueRef and3(Emit *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    return LLVMBuildAnd(e->b, LLVMBuildAnd(e->b, a, b, ""), c, "");
}

void emit_run_value(Emit *e, int32_t n, const Shape *space, Index *run, const LLVMValueRef *lin,
                    int v, LLVMValueRef *out)
{
    const Node *node = gnode(e->g, n);
    if (shape_equal(&node->shape, space)) {
        ev_vector(e, n, run, v, out);
        return;
    }
    Index own = {.shape = &node->shape, .lin = lin[0]};
    if (node->shape.rank > 0 && node->shape.dim[node->shape.rank - 1] % v == 0) {
        ev_vector(e, n, &own, v, out);
        return;
    }
    for (int j = 0; j < v; j++) {
        own.lin = lin[j];
        own.has_axes = false;
        out[j] = ev_value(e, n, &own);
    }
}

void emit_run_begin(Emit *e, const Shape *space, Index *run, int v)
{
    ev_axes(e, run); /* its innermost axis a multiple of v: say so, for the alignment */
    int last = space->rank - 1;
    run->axis[last] = LLVMBuildAnd(e->b, run->axis[last], ev_int(e, -(int64_t)v), "");
    ev_vector_begin(e, run);
}

void emit_run_values(Emit *e, const PlanPhase *p, const Shape *space, Index *run,
                     const LLVMValueRef *lin, int v, int32_t nred, const int32_t *red,
                     LLVMValueRef *val)
{
    for (int r = 0, q = 0; r < p->nroot; r++) {
        bool reduce = q < nred && red[q] == p->root[r];
        int32_t n = reduce ? goperand(e->g, p->root[r], 0) : p->root[r];
        emit_run_value(e, n, space, run, lin, v, &val[r * v]);
        q += reduce;
    }
}

void emit_run_roots(Emit *e, const PlanPhase *p, const Shape *space, Index *run,
                    const LLVMValueRef *lin, int v, int32_t nred, const int32_t *red,
                    LLVMValueRef *val)
{
    emit_run_begin(e, space, run, v);
    emit_run_values(e, p, space, run, lin, v, nred, red, val);
}

void emit_run_store(Emit *e, int32_t n, const Shape *space, const LLVMValueRef *lin, int v,
                    LLVMValueRef *val)
{
    const Node *node = gnode(e->g, n);
    const Shape *shape = shape_equal(&node->shape, space) ? space : &node->shape;
    for (int j = 0; j < v; j++) {
        Index el = {.shape = shape, .lin = lin[j]};
        ev_store_root_buffer(e, n, &el, val[j]);
    }
    if (plan_kernel_op(e->k, n)->output && e->tensor[n])
        ev_store_vector(e, e->tensor[n], node->dtype, lin[0], v, val);
}

/* Elements per thread task of an element-wise phase: as many consecutive elements as fill 16
 * bytes of the widest tensor the phase loads or stores at its elements
 * (plan_access_elements), halved until every task of every block is whole (the block's chunk
 * and the element count are multiples of it). A block covers the same elements either way;
 * only which of its threads takes which element changes, and nothing reads another thread's
 * values before a barrier. */
static int elementwise_vector(Emit *e, const PlanPhase *p, const Shape *space)
{
    const astitch_mapping *m = &p->map;
    int v = plan_access_elements(e->g, e->k, p);
    while (v > 1 && (m->chunk % v || m->rows % v))
        v /= 2;
    return v;
}

/* True when input tensor n holds one element per element of the space (the same shape, or a
 * reshape of it): its element lin is the space's element lin. */
static bool same_elements(const Emit *e, int32_t n, const Shape *space)
{
    return shape_elements(&gnode(e->g, n)->shape) == shape_elements(space);
}

/* The roots of p at the v elements from row (a multiple of v) of the space, into
 * val[r * v + j]. When v divides the innermost dimension, one run (emit_vector.c), so reads
 * through broadcasts, slices, concatenates and transposes stay vector accesses. Otherwise
 * the kernel's inputs with the space's elements are loaded v at once (an input read only
 * through another index map, a transpose say, leaves that load dead), and the roots are
 * evaluated over sub-runs of the largest power of two dividing both v and the innermost
 * dimension, those loads seeding each sub-run's cache: a channel shuffle's transposed reads
 * of rows of 28 f16 take 8-byte loads, not 2-byte ones. With no such sub-run (an odd
 * innermost dimension), element by element. */
static void elementwise_values(Emit *e, const PlanPhase *p, const Shape *space,
                               const LLVMValueRef *lins, int v, LLVMValueRef *pre,
                               LLVMValueRef *val)
{
    int64_t inner = space->rank > 0 ? space->dim[space->rank - 1] : 1;
    int w = v;
    while (w > 1 && inner % w)
        w /= 2;
    if (w == v && v > 1) {
        Index run = {.shape = space, .lin = lins[0]};
        emit_run_roots(e, p, space, &run, lins, v, 0, NULL, val);
        return;
    }
    const PlanKernel *k = e->k;
    for (int32_t i = 0; v > 1 && i < k->ninput; i++)
        if (same_elements(e, k->input[i], space))
            ev_load_vector(e, e->tensor[k->input[i]], gnode(e->g, k->input[i])->dtype, lins[0],
                           v, &pre[i * VECTOR_MAX]);
    if (w > 1) {
        LLVMValueRef *sub = malloc((size_t)p->nroot * (size_t)w * sizeof *sub);
        if (!sub) {
            ev_fail(e, e->ix, ASTITCH_ERR_MEMORY, "out of memory");
            return;
        }
        for (int s = 0; s < v; s += w) {
            Index run = {.shape = space, .lin = lins[s]};
            emit_run_begin(e, space, &run, w);
            for (int32_t i = 0; i < k->ninput; i++) {
                if (!same_elements(e, k->input[i], space))
                    continue;
                LLVMValueRef *cached = &e->vcache[(size_t)k->input[i] * VECTOR_MAX];
                for (int j = 0; j < w; j++)
                    cached[j] = pre[i * VECTOR_MAX + s + j];
            }
            emit_run_values(e, p, space, &run, &lins[s], w, 0, NULL, sub);
            for (int r = 0; r < p->nroot; r++)
                for (int j = 0; j < w; j++)
                    val[r * v + s + j] = sub[r * w + j];
        }
        free(sub);
        return;
    }
    for (int j = 0; j < v; j++) {
        Index ix = {.shape = space, .lin = lins[j]};
        ev_begin_element(e, &ix);
        for (int32_t i = 0; v > 1 && i < k->ninput; i++)
            if (same_elements(e, k->input[i], space))
                e->cache[k->input[i]] = pre[i * VECTOR_MAX + j];
        for (int r = 0; r < p->nroot; r++) {
            const Node *root = gnode(e->g, p->root[r]);
            Index own = {.shape = &root->shape, .lin = lins[j]};
            val[r * v + j] = ev_value(e, p->root[r], shape_equal(&root->shape, space) ? &ix : &own);
        }
    }
}

/* Each thread evaluates the roots of p at v consecutive elements (starting at a multiple of v)
 * per tile, computing every value before storing any, so that the lowering merges the v loads
 * of an input, and the v stores of an output, into single vector accesses (NVPTX, whose tensor
 * arguments are 16-byte aligned: ld/st.global.v4). A task outside the block's chunk computes at
 * the block's first element (in bounds for every tensor, and in the block's own part of every
 * regional value it reads from shared memory) and stores nothing. (Two vector tasks per thread
 * and iteration were measured on the H100, 2026-11-24: eltwise_16m moved by under 1%, gelu_bias
 * slowed by 4% from spills; one it is.) */
static void emit_elementwise(Emit *e, const PlanPhase *p)
{
    const astitch_mapping *m = &p->map;
    Shape space = plan_mapping_space(m);
    int v = elementwise_vector(e, p, &space);
    int64_t step = (int64_t)m->rows_per_block * v;
    LLVMValueRef first = LLVMBuildMul(e->b, e->ctaid, ev_int(e, m->chunk), "");
    int64_t steps = (m->chunk + step - 1) / step;
    if (e->interleave) { /* task i of tile T of block b: element ((T * grid + b) * step + i) */
        first = ev_int(e, 0);
        steps = ((m->rows + step - 1) / step + m->grid - 1) / m->grid;
    }
    LLVMValueRef *val = malloc((size_t)p->nroot * (size_t)v * sizeof *val);
    LLVMValueRef *pre = malloc(((size_t)e->k->ninput * VECTOR_MAX + 1) * sizeof *pre);
    if (!val || !pre) {
        free(val);
        free(pre);
        ev_fail(e, e->ix, ASTITCH_ERR_MEMORY, "out of memory");
        return;
    }
    Loop tile;
    loop_begin(e, &tile, ev_int(e, 0), ev_int(e, steps), NULL, 0, NULL);
    LLVMValueRef tile_ix = tile.iv;
    if (e->interleave)
        tile_ix = LLVMBuildNSWAdd(e->b, LLVMBuildNSWMul(e->b, tile.iv, ev_int(e, m->grid), ""),
                                  e->ctaid, "");
    LLVMValueRef task = LLVMBuildNSWAdd(e->b, LLVMBuildNSWMul(e->b, tile_ix,
                                        ev_int(e, m->rows_per_block), ""), e->tid, "");
    LLVMValueRef in_chunk = LLVMBuildNSWMul(e->b, task, ev_int(e, v), "");
    LLVMValueRef row = LLVMBuildNSWAdd(e->b, first, in_chunk, "row");
    LLVMValueRef in_block = e->interleave ? LLVMConstInt(LLVMInt1TypeInContext(e->c), 1, 0)
                            : LLVMBuildICmp(e->b, LLVMIntSLT, in_chunk, ev_int(e, m->chunk), "");
    LLVMValueRef ok = and3(e, LLVMBuildICmp(e->b, LLVMIntSLT, e->tid, ev_int(e, m->rows_per_block), ""),
                           in_block, LLVMBuildICmp(e->b, LLVMIntSLT, row, ev_int(e, m->rows), ""));
    row = LLVMBuildSelect(e->b, ok, row, first, "row.safe");
    LLVMValueRef lins[VECTOR_MAX];
    for (int j = 0; j < v; j++)
        lins[j] = j ? LLVMBuildNSWAdd(e->b, row, ev_int(e, j), "") : row;
    elementwise_values(e, p, &space, lins, v, pre, val);
    LLVMBasicBlockRef merge = if_begin(e, ok);
    for (int r = 0; r < p->nroot; r++)
        emit_run_store(e, p->root[r], &space, lins, v, &val[r * v]);
    if_end(e, merge);
    loop_end(e, &tile, ev_int(e, 1), NULL);
    free(pre);
    free(val);
}

/* Element-wise phase p over the rows of reduce mapping r, for tile tile_iv of r alone (a tile
 * run): thread i of the tile's first rows_per_block threads takes the tile's row i. */
static void emit_rows(Emit *e, const PlanPhase *p, const astitch_mapping *r, LLVMValueRef tile_iv)
{
    const astitch_mapping *m = &p->map;
    Shape space = plan_mapping_space(m);
    LLVMValueRef in_chunk = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, tile_iv,
                                         ev_int(e, r->rows_per_block), ""), e->tid, "");
    LLVMValueRef row = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, e->ctaid, ev_int(e, m->chunk), ""),
                                    in_chunk, "row");
    LLVMValueRef ok = and3(e, LLVMBuildICmp(e->b, LLVMIntSLT, e->tid, ev_int(e, r->rows_per_block), ""),
                           LLVMBuildICmp(e->b, LLVMIntSLT, in_chunk, ev_int(e, m->chunk), ""),
                           LLVMBuildICmp(e->b, LLVMIntSLT, row, ev_int(e, m->rows), ""));
    LLVMBasicBlockRef merge = if_begin(e, ok);
    Index ix = {.shape = &space, .lin = row};
    ev_begin_element(e, &ix);
    for (int i = 0; i < p->nroot; i++) {
        const Node *root = gnode(e->g, p->root[i]);
        Index own = {.shape = &root->shape, .lin = row};
        Index *at = shape_equal(&root->shape, &space) ? &ix : &own;
        ev_store_root(e, p->root[i], at, ev_value(e, p->root[i], at));
    }
    if_end(e, merge);
}

void emit_phase_run(Emit *e, int32_t first, int32_t end)
{
    const PlanPhase *p = &e->k->phase[first];
    if (first == e->part_first)
        ; /* a function starts here: nothing came before it */
    else if (p->barrier == ASTITCH_BARRIER_BLOCK)
        prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
    else if (p->barrier == ASTITCH_BARRIER_GLOBAL)
        prim_call(e->b, e->m, PRIM_BARRIER_GRID, &e->counter, 1);
    e->phase = first;
    /* blocks beyond the mapping's grid sit the phases out (uniformly per block; the phases of
     * a run share their mapping) */
    LLVMBasicBlockRef merge = NULL;
    if (p->map.grid < e->k->grid)
        merge = if_begin(e, LLVMBuildICmp(e->b, LLVMIntSLT, e->ctaid, ev_int(e, p->map.grid), ""));
    if (p->resident) {
        emit_resident_run(e, first, end);
    } else if (end - first == 1) {
        if (p->map.kind == ASTITCH_MAP_ELEMENTWISE && e->k->tile.on)
            emit_transposed(e, p);
        else if (p->map.kind == ASTITCH_MAP_ELEMENTWISE)
            emit_elementwise(e, p);
        else
            emit_reduce(e, p, NULL);
    } else { /* one walk over the tiles; on each, every phase, block barriers between them */
        Loop tile;
        loop_begin(e, &tile, ev_int(e, 0), ev_int(e, p->map.tasks_per_block), NULL, 0, NULL);
        for (int32_t ph = first; ph < end && e->status == ASTITCH_OK; ph++) {
            if (ph > first)
                prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
            e->phase = ph;
            if (ph + 1 < end && plan_online_pair(e->plan, e->k, ph)) {
                emit_online(e, &e->k->phase[ph], &e->k->phase[ph + 1], tile.iv);
                ph++; /* taken with ph */
            } else if (e->k->phase[ph].map.kind == ASTITCH_MAP_ELEMENTWISE)
                emit_rows(e, &e->k->phase[ph], &p->map, tile.iv);
            else
                emit_reduce(e, &e->k->phase[ph], tile.iv);
        }
        loop_end(e, &tile, ev_int(e, 1), NULL);
    }
    if (merge)
        if_end(e, merge);
    /* a block that sat the run out passed none of the block barriers between its phases, which
     * the plan may count on to order an earlier phase's shared-memory writes before a later
     * phase's reads: it waits here instead (a block that ran the run waits once more) */
    bool inner_barrier = false;
    for (int32_t ph = first + 1; ph < end; ph++)
        inner_barrier = inner_barrier || !p->resident || e->k->phase[ph].barrier != ASTITCH_BARRIER_NONE;
    if (merge && inner_barrier)
        prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
}
