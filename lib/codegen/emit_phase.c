/* emit_phase.c: one phase of a kernel: the thread-mapping loops of its plan mapping, the
 * evaluation and stores of its roots, and the row/column reductions with their warp-shuffle
 * and shared-memory combines (cross-block combines of split rows: emit_split.c). */
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

static LLVMValueRef imin(Emit *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, b, ""), a, b, "");
}

static LLVMValueRef and3(Emit *e, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    return LLVMBuildAnd(e->b, LLVMBuildAnd(e->b, a, b, ""), c, "");
}

static void begin_element(Emit *e, const Index *ix)
{
    for (int32_t i = 0; i < e->g->nnode; i++)
        e->cache[i] = NULL;
    e->cache_ix = ix;
}

/* Elements per thread task of an element-wise phase: as many consecutive elements as fill 16
 * bytes of the narrowest tensor the phase loads or stores at its elements (4 for f32, 8 for
 * f16/bf16, 8 for narrower ones too), halved until every task of every block is whole (the block's chunk and the
 * element count are multiples of it). A block covers the same elements either way; only which
 * of its threads takes which element changes, and nothing reads another thread's values before
 * a barrier. */
static int elementwise_vector(Emit *e, const PlanPhase *p, const Shape *space)
{
    const astitch_mapping *m = &p->map;
    int64_t least = 4;
    for (int32_t i = 0; i < e->k->ninput; i++) {
        const Node *in = gnode(e->g, e->k->input[i]);
        if (shape_equal(&in->shape, space) && (int64_t)astitch_dtype_size(in->dtype) < least)
            least = (int64_t)astitch_dtype_size(in->dtype);
    }
    for (int32_t r = 0; r < p->nroot; r++) {
        const Node *root = gnode(e->g, p->root[r]);
        if ((int64_t)astitch_dtype_size(root->dtype) < least)
            least = (int64_t)astitch_dtype_size(root->dtype);
    }
    int v = (int)(16 / (least < 2 ? 2 : least > 4 ? 4 : least)); /* at most 8 per thread */
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
    Shape space = {.rank = m->rank};
    for (int i = 0; i < m->rank; i++)
        space.dim[i] = m->dims[i];
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
    /* a vector inside one innermost row: the roots are evaluated over the run (emit_vector.c),
     * so reads through broadcasts, slices and concatenates stay vector accesses */
    bool inner = v > 1 && space.rank > 0 && space.dim[space.rank - 1] % v == 0;
    Index ix[VECTOR_MAX];
    for (int j = 0; j < v; j++)
        ix[j] = (Index){.shape = &space, .lin = j ? LLVMBuildNSWAdd(e->b, row, ev_int(e, j), "") : row};
    if (inner) {
        Index run = ix[0]; /* its innermost axis a multiple of v: say so, for the alignment */
        ev_axes(e, &run);
        run.axis[space.rank - 1] = LLVMBuildAnd(e->b, run.axis[space.rank - 1],
                                                ev_int(e, -(int64_t)v), "");
        ev_vector_begin(e, &run);
        for (int r = 0; r < p->nroot; r++) {
            const Node *root = gnode(e->g, p->root[r]);
            Index own = {.shape = &root->shape, .lin = row};
            if (shape_equal(&root->shape, &space))
                ev_vector(e, p->root[r], &run, v, &val[r * v]);
            else if (root->shape.rank > 0 && root->shape.dim[root->shape.rank - 1] % v == 0)
                ev_vector(e, p->root[r], &own, v, &val[r * v]);
            else
                for (int j = 0; j < v; j++) {
                    own.lin = ix[j].lin;
                    own.has_axes = false;
                    val[r * v + j] = ev_value(e, p->root[r], &own);
                }
        }
    } else {
        /* the kernel's inputs with the space's elements, v at once; an input read only
         * through another index map (a transpose, say) leaves its load dead */
        for (int32_t i = 0; v > 1 && i < e->k->ninput; i++)
            if (same_elements(e, e->k->input[i], &space))
                ev_load_vector(e, e->tensor[e->k->input[i]], gnode(e->g, e->k->input[i])->dtype,
                               row, v, &pre[i * VECTOR_MAX]);
        for (int j = 0; j < v; j++) {
            begin_element(e, &ix[j]);
            for (int32_t i = 0; v > 1 && i < e->k->ninput; i++)
                if (same_elements(e, e->k->input[i], &space))
                    e->cache[e->k->input[i]] = pre[i * VECTOR_MAX + j];
            for (int r = 0; r < p->nroot; r++) {
                const Node *root = gnode(e->g, p->root[r]);
                Index own = {.shape = &root->shape, .lin = ix[j].lin};
                val[r * v + j] = ev_value(e, p->root[r],
                                          shape_equal(&root->shape, &space) ? &ix[j] : &own);
            }
        }
    }
    LLVMBasicBlockRef merge = if_begin(e, ok);
    for (int r = 0; r < p->nroot; r++) {
        int32_t n = p->root[r];
        const Node *root = gnode(e->g, n);
        for (int j = 0; j < v; j++) {
            Index own = {.shape = &root->shape, .lin = ix[j].lin};
            ev_store_root_buffer(e, n, shape_equal(&root->shape, &space) ? &ix[j] : &own,
                                 val[r * v + j]);
        }
        if (plan_kernel_op(e->k, n)->output && e->tensor[n])
            ev_store_vector(e, e->tensor[n], root->dtype, ix[0].lin, v, &val[r * v]);
    }
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
    Shape space = {.rank = m->rank};
    for (int i = 0; i < m->rank; i++)
        space.dim[i] = m->dims[i];
    LLVMValueRef in_chunk = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, tile_iv,
                                         ev_int(e, r->rows_per_block), ""), e->tid, "");
    LLVMValueRef row = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, e->ctaid, ev_int(e, m->chunk), ""),
                                    in_chunk, "row");
    LLVMValueRef ok = and3(e, LLVMBuildICmp(e->b, LLVMIntSLT, e->tid, ev_int(e, r->rows_per_block), ""),
                           LLVMBuildICmp(e->b, LLVMIntSLT, in_chunk, ev_int(e, m->chunk), ""),
                           LLVMBuildICmp(e->b, LLVMIntSLT, row, ev_int(e, m->rows), ""));
    LLVMBasicBlockRef merge = if_begin(e, ok);
    Index ix = {.shape = &space, .lin = row};
    begin_element(e, &ix);
    for (int i = 0; i < p->nroot; i++) {
        const Node *root = gnode(e->g, p->root[i]);
        Index own = {.shape = &root->shape, .lin = row};
        Index *at = shape_equal(&root->shape, &space) ? &ix : &own;
        ev_store_root(e, p->root[i], at, ev_value(e, p->root[i], at));
    }
    if_end(e, merge);
}

/* The element (row, j) of a reduction space: kept axes from row, reduced axes from j. */
static void space_index(Emit *e, const astitch_mapping *m, const Shape *space, LLVMValueRef row,
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

LLVMValueRef emit_shfl_xor(Emit *e, LLVMValueRef v, int mask)
{
    LLVMTypeRef t = LLVMTypeOf(v), i32 = LLVMInt32TypeInContext(e->c);
    LLVMValueRef mk = LLVMConstInt(i32, (unsigned)mask, 0);
    if (LLVMGetTypeKind(t) == LLVMFloatTypeKind)
        return prim_call(e->b, e->m, PRIM_SHFL_XOR_F32, (LLVMValueRef[]){v, mk}, 2);
    unsigned w = LLVMGetIntTypeWidth(t);
    if (w <= 32) {
        LLVMValueRef x = LLVMBuildZExt(e->b, v, i32, "");
        if (w == 32)
            x = v;
        LLVMValueRef r = prim_call(e->b, e->m, PRIM_SHFL_XOR_I32, (LLVMValueRef[]){x, mk}, 2);
        return w == 32 ? r : LLVMBuildTrunc(e->b, r, t, "");
    }
    LLVMValueRef lo = LLVMBuildTrunc(e->b, v, i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(e->b, LLVMBuildLShr(e->b, v, LLVMConstInt(t, 32, 0), ""), i32, "");
    lo = prim_call(e->b, e->m, PRIM_SHFL_XOR_I32, (LLVMValueRef[]){lo, mk}, 2);
    hi = prim_call(e->b, e->m, PRIM_SHFL_XOR_I32, (LLVMValueRef[]){hi, mk}, 2);
    return LLVMBuildOr(e->b, LLVMBuildZExt(e->b, lo, t, ""),
                       LLVMBuildShl(e->b, LLVMBuildZExt(e->b, hi, t, ""), LLVMConstInt(t, 32, 0), ""), "");
}

astitch_dtype emit_acc_dtype(astitch_dtype t) { return dtype_is_float(t) ? ASTITCH_F32 : t; }

/* Combines acc across the tpr lanes of each row; the row's lane 0 ends with the result. All
 * threads of the block must arrive here (it contains shuffles and block barriers). */
static LLVMValueRef combine_lanes(Emit *e, const astitch_mapping *m, int32_t root,
                                  LLVMValueRef acc, LLVMValueRef row_in_tile)
{
    const Node *node = gnode(e->g, root);
    astitch_reduce_kind kind = node->attr.reduce;
    astitch_dtype t = node->dtype;
    int tpr = m->threads_per_row;
    bool column = m->kind == ASTITCH_MAP_COLUMN_REDUCE;
    if (tpr == 1)
        return acc;
    if (!column && tpr <= 32 && (tpr & (tpr - 1)) == 0) {
        for (int off = tpr / 2; off >= 1; off /= 2)
            acc = ev_reduce_combine(e, kind, t, acc, emit_shfl_xor(e, acc, off));
        return acc;
    }
    /* through shared memory: warp sums (row mapping) or every thread's value (column) */
    const PlanBuffer *buf = plan_kernel_buffer(e->k, ASTITCH_BUFFER_REDUCE, root);
    int64_t slots = column ? m->block : m->block / 32;
    int64_t need = slots * (int64_t)astitch_dtype_size(emit_acc_dtype(t));
    if (!buf || buf->bytes < need || (!column && tpr % 32 != 0))
        return ev_fail(e, LLVMTypeOf(acc), ASTITCH_ERR_UNSUPPORTED,
                       "%s: reduce node %d '%s': %d lanes per row need a %lld-byte reduction "
                       "buffer, the plan gives %lld",
                       e->k->name, root, node->name, tpr, (long long)need,
                       (long long)(buf ? buf->bytes : 0));
    LLVMValueRef base = ev_buffer_base(e, buf);
    LLVMValueRef slot = e->tid;
    if (!column) {
        for (int off = 16; off >= 1; off /= 2)
            acc = ev_reduce_combine(e, kind, t, acc, emit_shfl_xor(e, acc, off));
        slot = LLVMBuildUDiv(e->b, e->tid, ev_int(e, 32), "");
        LLVMBasicBlockRef merge = if_begin(e, LLVMBuildICmp(e->b, LLVMIntEQ,
                                  LLVMBuildURem(e->b, e->tid, ev_int(e, 32), ""), ev_int(e, 0), ""));
        ev_check_shared(e, buf, slot);
        ev_store(e, base, emit_acc_dtype(t), slot, acc);
        if_end(e, merge);
    } else {
        ev_check_shared(e, buf, slot);
        ev_store(e, base, emit_acc_dtype(t), slot, acc);
    }
    prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
    /* Lane 0 of each row folds the row's slots in a loop whose trip count comes from the block
     * size at run time, so it is not unrolled into one load per slot (which would keep every
     * slot live at once and spill under a 32-register bound). */
    LLVMValueRef ntid = LLVMBuildZExt(e->b, prim_call(e->b, e->m, PRIM_NTID_X, NULL, 0), e->ix, "");
    /* rows: the row's warps, tpr / 32, written min(ntid, tpr) / 32 (tpr <= ntid) to keep the
     * trip count opaque; the block may hold more rows than rows_per_block (rows past the
     * tile idle), so it is not (ntid / 32) / rows_per_block */
    LLVMValueRef tprv = ev_int(e, tpr);
    LLVMValueRef lanes = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntULT, ntid, tprv, ""),
                                         ntid, tprv, "");
    LLVMValueRef parts = column ? LLVMBuildUDiv(e->b, ntid, ev_int(e, m->rows_per_block), "")
                                : LLVMBuildLShr(e->b, lanes, ev_int(e, 5), "");
    LLVMValueRef lane = column ? LLVMBuildUDiv(e->b, e->tid, ev_int(e, m->rows_per_block), "")
                               : LLVMBuildURem(e->b, e->tid, ev_int(e, tpr), "");
    LLVMValueRef identity = ev_reduce_identity(e, kind, t);
    LLVMBasicBlockRef before = LLVMGetInsertBlock(e->b);
    LLVMBasicBlockRef merge = if_begin(e, LLVMBuildICmp(e->b, LLVMIntEQ, lane, ev_int(e, 0), ""));
    Loop fold;
    LLVMValueRef acc0[1] = {identity}, accv[1], next[1];
    loop_begin(e, &fold, ev_int(e, 0), parts, acc0, 1, accv);
    LLVMValueRef at = column
        ? LLVMBuildAdd(e->b, row_in_tile, LLVMBuildMul(e->b, fold.iv, ev_int(e, m->rows_per_block), ""), "")
        : LLVMBuildAdd(e->b, LLVMBuildMul(e->b, row_in_tile, parts, ""), fold.iv, "");
    ev_check_shared(e, buf, at);
    next[0] = ev_reduce_combine(e, kind, t, accv[0], ev_load(e, base, emit_acc_dtype(t), at));
    loop_end(e, &fold, ev_int(e, 1), next);
    LLVMValueRef folded = fold.carried[0];
    LLVMBasicBlockRef from = LLVMGetInsertBlock(e->b);
    if_end(e, merge);
    LLVMValueRef res = LLVMBuildPhi(e->b, LLVMTypeOf(identity), "rowsum");
    LLVMAddIncoming(res, (LLVMValueRef[]){identity, folded}, (LLVMBasicBlockRef[]){before, from}, 2);
    prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
    return res;
}

/* Emits reduce phase p: over every tile of the block in a loop of its own, or, with tile_iv,
 * over that tile alone (the phase is part of a tile run, emit_phase_run). */
static void emit_reduce(Emit *e, const PlanPhase *p, LLVMValueRef tile_iv)
{
    const astitch_mapping *m = &p->map;
    Shape space = {.rank = m->rank};
    for (int i = 0; i < m->rank; i++)
        space.dim[i] = m->dims[i];
    bool column = m->kind == ASTITCH_MAP_COLUMN_REDUCE;
    int tpr = m->threads_per_row, rpb = m->rows_per_block;
    LLVMValueRef row_in_tile = column ? LLVMBuildURem(e->b, e->tid, ev_int(e, rpb), "")
                                      : LLVMBuildUDiv(e->b, e->tid, ev_int(e, tpr), "");
    LLVMValueRef lane = column ? LLVMBuildUDiv(e->b, e->tid, ev_int(e, rpb), "")
                               : LLVMBuildURem(e->b, e->tid, ev_int(e, tpr), "");
    int32_t nred = 0, *red = malloc((size_t)p->nroot * sizeof *red);
    LLVMValueRef *init = malloc((size_t)p->nroot * sizeof *init);
    LLVMValueRef *acc = malloc((size_t)p->nroot * sizeof *acc);
    LLVMValueRef *next = malloc((size_t)p->nroot * sizeof *next);
    if (!red || !init || !acc || !next) {
        ev_fail(e, e->ix, ASTITCH_ERR_MEMORY, "out of memory");
        goto out;
    }
    for (int r = 0; r < p->nroot; r++) {
        const Node *n = gnode(e->g, p->root[r]);
        if (n->op == ASTITCH_OP_REDUCE && n->attr.axes == m->reduce_axes &&
            shape_equal(&gnode(e->g, goperand(e->g, p->root[r], 0))->shape, &space)) {
            init[nred] = ev_reduce_identity(e, n->attr.reduce, n->dtype);
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
    LLVMValueRef tile_base, jlo, jhi, in_chunk;
    if (m->split > 1) {
        LLVMValueRef part = LLVMBuildURem(e->b, e->ctaid, ev_int(e, m->split), "");
        tile_base = LLVMBuildMul(e->b, LLVMBuildUDiv(e->b, e->ctaid, ev_int(e, m->split), ""), ev_int(e, rpb), "");
        jlo = LLVMBuildMul(e->b, part, ev_int(e, m->split_len), "");
        jhi = imin(e, LLVMBuildAdd(e->b, jlo, ev_int(e, m->split_len), ""), ev_int(e, m->row_len));
        in_chunk = row_in_tile;
    } else {
        LLVMValueRef t0 = LLVMBuildMul(e->b, tile_iv, ev_int(e, rpb), "");
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
    Loop el;
    loop_begin(e, &el, LLVMBuildAdd(e->b, jlo, lane, ""), end, init, nred, acc);
    Index ix;
    space_index(e, m, &space, row, el.iv, &ix);
    begin_element(e, &ix);
    for (int r = 0, q = 0; r < p->nroot; r++) {
        int32_t n = p->root[r];
        if (q < nred && red[q] == n) {
            const Node *node = gnode(e->g, n);
            LLVMValueRef v = ev_value(e, goperand(e->g, n, 0), &ix);
            next[q] = ev_reduce_combine(e, node->attr.reduce, node->dtype, acc[q], v);
            q++;
        } else {
            const Node *node = gnode(e->g, n);
            Index own = {.shape = &node->shape, .lin = ev_lin(e, &ix)};
            Index *at = shape_equal(&node->shape, &space) ? &ix : &own;
            ev_store_root(e, n, at, ev_value(e, n, at));
        }
    }
    loop_end(e, &el, ev_int(e, tpr), next);
    for (int q = 0; q < nred; q++) {
        LLVMValueRef total = combine_lanes(e, m, red[q], el.carried[q], row_in_tile);
        LLVMBasicBlockRef merge = if_begin(e, LLVMBuildAnd(e->b, valid,
                                  LLVMBuildICmp(e->b, LLVMIntEQ, lane, ev_int(e, 0), ""), ""));
        const Node *node = gnode(e->g, red[q]);
        if (m->split > 1) {
            emit_split_store(e, m, red[q], row, total);
        } else {
            Index out = {.shape = &node->shape, .lin = row};
            ev_store_root(e, red[q], &out, total);
        }
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
        if (p->map.kind == ASTITCH_MAP_ELEMENTWISE)
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
            if (e->k->phase[ph].map.kind == ASTITCH_MAP_ELEMENTWISE)
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
