/* emit_column.c: the vector form of a column reduction (docs/codegen.md, *Reduce phase*). Where
 * the kept elements are innermost, element (row, j) of the reduction lies at j * rows + row, so
 * v adjacent rows at one reduced index are v adjacent elements in memory: a thread takes a run
 * of v rows, reads each tensor with one access of v elements per reduced index (16 bytes of
 * f32 at v = 4) and keeps v accumulators per reduce; the block combines them row by row. */
#define ASTITCH_EMIT_INTERNAL
#include <stdlib.h>

#include "codegen.h"

void emit_column_run(Emit *e, const PlanPhase *p, const Shape *space, LLVMValueRef row,
                     LLVMValueRef j, int v, int32_t nred, const int32_t *red,
                     const LLVMValueRef *acc, LLVMValueRef *next)
{
    LLVMValueRef *val = malloc((size_t)p->nroot * (size_t)v * sizeof *val);
    if (!val) {
        ev_fail(e, e->ix, ASTITCH_ERR_MEMORY, "out of memory");
        return;
    }
    LLVMValueRef lin[VECTOR_MAX];
    lin[0] = LLVMBuildNSWAdd(e->b, LLVMBuildNSWMul(e->b, j, ev_int(e, p->map.rows), ""), row, "");
    for (int u = 1; u < v; u++)
        lin[u] = LLVMBuildNSWAdd(e->b, lin[0], ev_int(e, u), "");
    Index run = {.shape = space, .lin = lin[0]};
    /* every root's values first (all loads in flight), then the folds and stores */
    emit_run_roots(e, p, space, &run, lin, v, nred, red, val);
    for (int r = 0, q = 0; r < p->nroot; r++) {
        const Node *node = gnode(e->g, p->root[r]);
        if (q < nred && red[q] == p->root[r]) {
            for (int u = 0; u < v; u++)
                next[q * v + u] = ev_reduce_combine(e, node->attr.reduce, node->dtype,
                                                    acc[q * v + u], val[r * v + u]);
            q++;
        } else {
            emit_run_store(e, p->root[r], space, lin, v, &val[r * v]);
        }
    }
    free(val);
}

void emit_column_combine(Emit *e, const astitch_mapping *m, int32_t root, int v,
                         const LLVMValueRef *acc, LLVMValueRef tile_first,
                         LLVMValueRef tile_in_chunk)
{
    const Node *node = gnode(e->g, root);
    astitch_reduce_kind kind = node->attr.reduce;
    astitch_dtype t = emit_acc_dtype(node->dtype);
    /* a slot per thread: plan_column_vector checked it */
    const PlanBuffer *buf = plan_kernel_buffer(e->k, ASTITCH_BUFFER_REDUCE, root);
    if (!buf) {
        ev_fail_node(e, root, e->ix, ASTITCH_ERR_INTERNAL,
                     "%s: reduce node %d '%s': a column combine without a slot per thread",
                     e->k->name, root, node->name);
        return;
    }
    int64_t groups = m->rows_per_block / v, lanes = (int64_t)m->threads_per_row * v;
    int64_t q = lanes < 32 ? lanes : 32; /* threads folding one group */
    LLVMValueRef base = ev_buffer_base(e, buf);
    LLVMValueRef group = LLVMBuildUDiv(e->b, e->tid, ev_int(e, q), "");
    LLVMValueRef part = LLVMBuildURem(e->b, e->tid, ev_int(e, q), "");
    LLVMValueRef has_group = LLVMBuildICmp(e->b, LLVMIntULT, group, ev_int(e, groups), "");
    LLVMValueRef first = LLVMBuildNSWAdd(e->b, tile_first,
                                         LLVMBuildNSWMul(e->b, group, ev_int(e, v), ""), "");
    LLVMValueRef ok = LLVMBuildAnd(e->b, has_group,
                                   LLVMBuildICmp(e->b, LLVMIntSLT, first, ev_int(e, m->rows), ""), "");
    if (tile_in_chunk) {
        LLVMValueRef at = LLVMBuildNSWAdd(e->b, tile_in_chunk,
                                          LLVMBuildNSWMul(e->b, group, ev_int(e, v), ""), "");
        ok = LLVMBuildAnd(e->b, ok, LLVMBuildICmp(e->b, LLVMIntSLT, at, ev_int(e, m->chunk), ""), "");
    }
    /* a thread past the last group folds group 0's slots and stores nothing */
    LLVMValueRef g = LLVMBuildSelect(e->b, has_group, group, ev_int(e, 0), "");
    for (int u = 0; u < v; u++) {
        ev_check_shared(e, buf, e->tid);
        ev_store(e, base, t, e->tid, acc[u]);
        prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
        /* slot of lane l of group g: l * groups + g; this thread folds lanes part + k * q */
        LLVMValueRef sum = NULL;
        for (int64_t k = 0; k < lanes / q; k++) {
            LLVMValueRef l = LLVMBuildNSWAdd(e->b, part, ev_int(e, k * q), "");
            LLVMValueRef slot = LLVMBuildNSWAdd(e->b, LLVMBuildNSWMul(e->b, l, ev_int(e, groups), ""),
                                                g, "");
            ev_check_shared(e, buf, slot);
            LLVMValueRef x = ev_load(e, base, t, slot);
            sum = sum ? ev_reduce_combine(e, kind, node->dtype, sum, x) : x;
        }
        for (int off = (int)q / 2; off >= 1; off /= 2)
            sum = ev_reduce_combine(e, kind, node->dtype, sum, emit_shfl_xor(e, sum, off));
        LLVMBasicBlockRef merge = if_begin(e, LLVMBuildAnd(e->b, ok,
            LLVMBuildICmp(e->b, LLVMIntEQ, part, ev_int(e, 0), ""), ""));
        emit_reduce_store(e, m, root, LLVMBuildNSWAdd(e->b, first, ev_int(e, u), ""), sum);
        if_end(e, merge);
        prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0); /* the slots free again */
    }
}
