/* emit_column.c: the run form of a column reduction (docs/codegen.md, *Reduce phase*). The
 * innermost axis of a column mapping is kept, so v adjacent rows (the first a multiple of v,
 * v dividing that axis) at one reduced index are v adjacent elements in memory: a thread takes
 * a run of v rows, reads each tensor with one access of v elements per reduced index (16 bytes
 * of f32 at v = 4) and keeps v accumulators per reduce; the block combines them in one
 * exchange. */
#define ASTITCH_EMIT_INTERNAL
#include <stdlib.h>

#include "codegen.h"

void emit_column_runs(Emit *e, const PlanPhase *p, const Shape *space, LLVMValueRef row,
                      LLVMValueRef j, int v, int64_t step, int count, int32_t nred,
                      const int32_t *red, const LLVMValueRef *acc, LLVMValueRef *next)
{
    size_t per_run = (size_t)p->nroot * (size_t)v;
    LLVMValueRef *val = malloc((size_t)count * per_run * sizeof *val);
    LLVMValueRef *lin = malloc((size_t)count * (size_t)v * sizeof *lin);
    if (!val || !lin) {
        free(val);
        free(lin);
        ev_fail(e, e->ix, ASTITCH_ERR_MEMORY, "out of memory");
        return;
    }
    /* every run's values first (all loads in flight), then the folds and stores in order, so
     * that the sums are those of one run per iteration */
    for (int c = 0; c < count; c++) {
        LLVMValueRef *l = &lin[c * v];
        LLVMValueRef jc = c ? LLVMBuildNSWAdd(e->b, j, ev_int(e, c * step), "") : j;
        Index run;
        emit_space_index(e, &p->map, space, row, jc, &run);
        l[0] = ev_lin(e, &run);
        for (int u = 1; u < v; u++)
            l[u] = LLVMBuildNSWAdd(e->b, l[0], ev_int(e, u), "");
        emit_run_roots(e, p, space, &run, l, v, nred, red, &val[c * per_run]);
    }
    for (int c = 0; c < count; c++) {
        LLVMValueRef *vc = &val[c * per_run];
        for (int r = 0, q = 0; r < p->nroot; r++) {
            const Node *node = gnode(e->g, p->root[r]);
            if (q < nred && red[q] == p->root[r]) {
                for (int u = 0; u < v; u++)
                    next[q * v + u] = ev_reduce_combine(e, node->attr.reduce, node->dtype,
                                                        c ? next[q * v + u] : acc[q * v + u],
                                                        vc[r * v + u]);
                q++;
            } else {
                emit_run_store(e, p->root[r], space, &lin[c * v], v, &vc[r * v]);
            }
        }
    }
    free(val);
    free(lin);
}

/* The combine buffer of a tile of rpb = rows_per_block rows: a row of rpb slots per lane, lane
 * l's slot of tile row c at l * (rpb + pad) + c, pad = 32 * rpb / block (plan_column_lane_stride).
 * A thread stores its run's v accumulators as one vector (a warp's 32 runs: one contiguous
 * stretch); the threads folding a row read one slot of each lane, and the pad puts the rows a
 * warp folds at once in distinct banks. */
static LLVMValueRef column_slot(Emit *e, const astitch_mapping *m, LLVMValueRef l, LLVMValueRef c)
{
    LLVMValueRef row = LLVMBuildNSWMul(e->b, l, ev_int(e, plan_column_lane_stride(m)), "");
    return LLVMBuildNSWAdd(e->b, row, c, "");
}

/* Stores a[0..v) at slot (aligned to v elements) of buffer base as vectors of up to 4. */
static void store_run(Emit *e, LLVMValueRef base, const PlanBuffer *buf, LLVMValueRef slot,
                      int v, const LLVMValueRef *a)
{
    LLVMTypeRef f32 = LLVMFloatTypeInContext(e->c);
    for (int u = 0; u < v; u += 4) {
        int n = v - u < 4 ? v - u : 4;
        LLVMValueRef at = LLVMBuildNSWAdd(e->b, slot, ev_int(e, u), "");
        ev_check_shared(e, buf, LLVMBuildNSWAdd(e->b, at, ev_int(e, n - 1), ""));
        LLVMValueRef vec = LLVMGetUndef(LLVMVectorType(f32, (unsigned)n));
        for (int i = 0; i < n; i++)
            vec = LLVMBuildInsertElement(e->b, vec, a[u + i], ev_int(e, i), "");
        LLVMValueRef ptr = LLVMBuildGEP2(e->b, f32, base, &at, 1, "");
        LLVMSetAlignment(LLVMBuildStore(e->b, vec, ptr), (unsigned)(4 * n));
    }
}

void emit_column_combine(Emit *e, const astitch_mapping *m, int32_t root, int v,
                         const LLVMValueRef *acc, LLVMValueRef tile_first,
                         LLVMValueRef tile_in_chunk)
{
    const Node *node = gnode(e->g, root);
    astitch_reduce_kind kind = node->attr.reduce;
    astitch_dtype t = emit_acc_dtype(node->dtype);
    const PlanBuffer *buf = plan_kernel_buffer(e->k, ASTITCH_BUFFER_REDUCE, root);
    int64_t rpb = m->rows_per_block, lanes = m->threads_per_row, folders = m->block / rpb;
    if (!buf || buf->elements < plan_column_slots(m) || t != ASTITCH_F32 || folders > 32 ||
        (folders & (folders - 1)) || lanes % folders) {
        ev_fail_node(e, root, e->ix, ASTITCH_ERR_INTERNAL,
                     "%s: reduce node %d '%s': a column combine of runs needs %lld f32 slots and "
                     "a power of two up to 32 threads per row (%lld)", e->k->name, root,
                     node->name, (long long)plan_column_slots(m), (long long)folders);
        return;
    }
    LLVMValueRef base = ev_buffer_base(e, buf);
    /* every run's accumulators into its lane's row, then one barrier */
    LLVMValueRef groups = ev_int(e, rpb / v);
    LLVMValueRef mine = column_slot(e, m, LLVMBuildUDiv(e->b, e->tid, groups, ""),
                                    LLVMBuildNSWMul(e->b, LLVMBuildURem(e->b, e->tid, groups, ""),
                                                    ev_int(e, v), ""));
    store_run(e, base, buf, mine, v, acc);
    prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
    /* `folders` adjacent threads fold tile row c: lanes part, part + folders, ... apiece, then
     * shuffles; part 0 stores it */
    LLVMValueRef c = LLVMBuildUDiv(e->b, e->tid, ev_int(e, folders), "");
    LLVMValueRef part = LLVMBuildURem(e->b, e->tid, ev_int(e, folders), "");
    LLVMValueRef sum = NULL;
    for (int64_t k = 0; k < lanes / folders; k++) {
        LLVMValueRef l = LLVMBuildNSWAdd(e->b, part, ev_int(e, k * folders), "");
        LLVMValueRef slot = column_slot(e, m, l, c);
        ev_check_shared(e, buf, slot);
        LLVMValueRef x = ev_load(e, base, t, slot);
        sum = sum ? ev_reduce_combine(e, kind, node->dtype, sum, x) : x;
    }
    for (int off = (int)folders / 2; off >= 1; off /= 2)
        sum = ev_reduce_combine(e, kind, node->dtype, sum, emit_shfl_xor(e, sum, off));
    LLVMValueRef row = LLVMBuildNSWAdd(e->b, tile_first, c, "");
    LLVMValueRef ok = LLVMBuildAnd(e->b, LLVMBuildICmp(e->b, LLVMIntEQ, part, ev_int(e, 0), ""),
                                   LLVMBuildICmp(e->b, LLVMIntSLT, row, ev_int(e, m->rows), ""),
                                   "");
    if (tile_in_chunk) {
        LLVMValueRef at = LLVMBuildNSWAdd(e->b, tile_in_chunk, c, "");
        ok = LLVMBuildAnd(e->b, ok, LLVMBuildICmp(e->b, LLVMIntSLT, at, ev_int(e, m->chunk), ""), "");
    }
    LLVMBasicBlockRef merge = if_begin(e, ok);
    emit_reduce_store(e, m, root, row, sum);
    if_end(e, merge);
    prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0); /* the slots free again */
}
