/* emit_across.c: reduces summed across the rows of a resident run (plan_reduce_across: a
 * column reduce the planner's across step moved into a resident row group, plan option
 * column_sums_in_rows).
 *
 * Taken first in its phase on each tile, one root at a time, so that few values are live at
 * once: the rows of one warp combine by shuffles (lanes threads_per_row apart hold the same
 * columns), and each writer slot (a warp's first row, or each row of several warps) adds its
 * column sums into its own row of the root's REDUCE buffer (emit_across_tile), which no other
 * thread touches: no barrier, no shared-memory atomic (a compare-and-swap loop for floats).
 * Around the block's tiles the slots are set to the identity and, after the last, folded per
 * column and added into the destination by the reduce's atomic (the runtime set it to the
 * identity before the launch), or stored when the mapping has one block (emit_across_fold). */
#define ASTITCH_EMIT_INTERNAL
#include "codegen.h"
#include "resident.h"

/* The REDUCE buffer of across root n: a row of row_len accumulators per writer slot of the
 * block (plan_across_slots); NULL after a failure. */
static const PlanBuffer *across_buffer(Emit *e, const astitch_mapping *m, int32_t n)
{
    const PlanBuffer *buf = plan_kernel_buffer(e->k, ASTITCH_BUFFER_REDUCE, n);
    int64_t need = plan_across_slots(m) * m->row_len;
    if (!buf || buf->elements < need || buf->dtype != gnode(e->g, n)->dtype) {
        ev_fail_node(e, n, LLVMFloatTypeInContext(e->c), ASTITCH_ERR_INTERNAL,
                     "%s: reduce node %d '%s' is summed across rows without a reduction "
                     "buffer of %lld accumulators", e->k->name, n, gnode(e->g, n)->name,
                     (long long)need);
        return NULL;
    }
    return buf;
}

/* Across root n on the lane's tile: its elements (identities where invalid), combined over the
 * rows of the warp by shuffles (lanes threads_per_row apart hold the same columns), added by
 * each writer slot (a warp's first row, or each row of several warps) into its own row of n's
 * buffer: no other thread touches that row until the block's fold (across_fold). */
void emit_across_tile(Emit *e, Resident *r, int32_t n, LLVMValueRef *vals)
{
    const Node *node = gnode(e->g, n);
    const astitch_mapping *m = r->m;
    const PlanBuffer *buf = across_buffer(e, m, n);
    if (!buf)
        return;
    LLVMValueRef id = ev_reduce_identity(e, node->attr.reduce, node->dtype);
    for (int k = 0; k < r->n; k++) {
        resident_at_element(e, r, k);
        LLVMValueRef v = ev_value(e, goperand(e->g, n, 0), &r->ix[k]);
        vals[k] = LLVMBuildSelect(e->b, resident_slot_valid(e, r, k / r->vector), v, id, "");
    }
    int tpr = m->threads_per_row;
    for (int k = 0; k < r->n; k++)
        for (int off = tpr; off < 32; off *= 2)
            vals[k] = ev_reduce_combine(e, node->attr.reduce, node->dtype, vals[k],
                                        emit_shfl_xor(e, vals[k], off));
    LLVMValueRef base = ev_buffer_base(e, buf);
    LLVMValueRef mine = LLVMBuildMul(e->b, LLVMBuildUDiv(e->b, e->tid, ev_int(e, tpr < 32 ? 32 : tpr), ""),
                                     ev_int(e, m->row_len), "slot");
    LLVMBasicBlockRef writer = NULL;
    if (tpr < 32) /* the warp's first row holds its sums */
        writer = if_begin(e, LLVMBuildICmp(e->b, LLVMIntULT, LLVMBuildURem(e->b, e->tid,
                                           ev_int(e, 32), ""), ev_int(e, tpr), ""));
    int w = r->vector < 4 ? r->vector : 4; /* 16-byte accesses at most: the buffer's alignment */
    LLVMValueRef old[4];
    for (int k0 = 0; k0 < r->n; k0 += w) {
        LLVMValueRef ok = r->slot_ok[k0 / r->vector];
        LLVMBasicBlockRef in_row = ok ? if_begin(e, ok) : NULL;
        LLVMValueRef at = LLVMBuildAdd(e->b, mine, r->col[k0], "");
        ev_check_shared(e, buf, at);
        ev_check_shared(e, buf, LLVMBuildAdd(e->b, at, ev_int(e, w - 1), ""));
        ev_load_vector(e, base, buf->dtype, at, w, old);
        for (int u = 0; u < w; u++)
            old[u] = ev_reduce_combine(e, node->attr.reduce, node->dtype, old[u], vals[k0 + u]);
        ev_store_vector(e, base, buf->dtype, at, w, old);
        if (in_row)
            if_end(e, in_row);
    }
    if (writer)
        if_end(e, writer);
}

/* The block's part of each across root of phases [first, end) over all of its tiles: before
 * them (init) every slot's column sums set to the identity; after them each column's slots
 * folded and added into the root's destination (emit_split_store: atomics). Strided over the
 * block's threads; the caller places the block barriers. True when the run has such roots. */
bool emit_across_fold(Emit *e, int32_t first, int32_t end, bool init)
{
    bool any = false;
    for (int32_t ph = first; ph < end && e->status == ASTITCH_OK; ph++) {
        const PlanPhase *p = &e->k->phase[ph];
        for (int i = 0; i < p->nroot && e->status == ASTITCH_OK; i++) {
            int32_t n = p->root[i];
            if (!plan_reduce_across(e->g, &p->map, n))
                continue;
            const PlanBuffer *buf = across_buffer(e, &p->map, n);
            if (!buf)
                return any;
            any = true;
            const Node *node = gnode(e->g, n);
            const astitch_mapping *m = &p->map;
            int64_t slots = plan_across_slots(m), len = init ? slots * m->row_len : m->row_len;
            LLVMValueRef base = ev_buffer_base(e, buf);
            Loop col;
            loop_begin(e, &col, e->tid, ev_int(e, len), NULL, 0, NULL);
            ev_check_shared(e, buf, LLVMBuildAdd(e->b, col.iv, ev_int(e, init ? 0 : (slots - 1) * m->row_len), ""));
            if (init) {
                ev_store(e, base, buf->dtype, col.iv,
                         ev_reduce_identity(e, node->attr.reduce, node->dtype));
            } else {
                LLVMValueRef sum = ev_load(e, base, buf->dtype, col.iv);
                for (int64_t s = 1; s < slots; s++)
                    sum = ev_reduce_combine(e, node->attr.reduce, node->dtype, sum,
                                            ev_load(e, base, buf->dtype, LLVMBuildAdd(e->b, col.iv,
                                                    ev_int(e, s * m->row_len), "")));
                if (plan_kernel_op(e->k, n)->zero_init) { /* the blocks' sums meet by atomics */
                    emit_split_store(e, m, n, col.iv, sum);
                } else { /* one block (schemes.c): the sum is the result */
                    Index at = {.shape = &node->shape, .lin = col.iv};
                    ev_store_root(e, n, &at, sum);
                }
            }
            loop_end(e, &col, ev_int(e, e->k->block), NULL);
        }
    }
    return any;
}

