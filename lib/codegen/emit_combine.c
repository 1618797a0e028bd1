/* emit_combine.c: the combine of a row's lanes: warp shuffles, and for rows of several warps
 * (and columns) the roots' reduction buffers in shared memory between two block barriers;
 * one value (a reduce) or two (the online softmax's pair) at once. */
#define ASTITCH_EMIT_INTERNAL
#include "codegen.h"

LLVMValueRef emit_shfl_xor(Emit *e, LLVMValueRef v, int mask)
{
    LLVMTypeRef t = LLVMTypeOf(v), i32 = LLVMInt32TypeInContext(e->c);
    LLVMValueRef mk = LLVMConstInt(i32, (unsigned)mask, 0);
    /* a block of whole warps launches with exactly k->block threads */
    bool whole = e->k->block % 32 == 0;
    PrimId xor_f32 = whole ? PRIM_SHFL_XOR_FULL_F32 : PRIM_SHFL_XOR_F32;
    PrimId xor_i32 = whole ? PRIM_SHFL_XOR_FULL_I32 : PRIM_SHFL_XOR_I32;
    if (LLVMGetTypeKind(t) == LLVMFloatTypeKind)
        return prim_call(e->b, e->m, xor_f32, (LLVMValueRef[]){v, mk}, 2);
    unsigned w = LLVMGetIntTypeWidth(t);
    if (w <= 32) {
        LLVMValueRef x = LLVMBuildZExt(e->b, v, i32, "");
        if (w == 32)
            x = v;
        LLVMValueRef r = prim_call(e->b, e->m, xor_i32, (LLVMValueRef[]){x, mk}, 2);
        return w == 32 ? r : LLVMBuildTrunc(e->b, r, t, "");
    }
    LLVMValueRef lo = LLVMBuildTrunc(e->b, v, i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(e->b, LLVMBuildLShr(e->b, v, LLVMConstInt(t, 32, 0), ""), i32, "");
    lo = prim_call(e->b, e->m, xor_i32, (LLVMValueRef[]){lo, mk}, 2);
    hi = prim_call(e->b, e->m, xor_i32, (LLVMValueRef[]){hi, mk}, 2);
    return LLVMBuildOr(e->b, LLVMBuildZExt(e->b, lo, t, ""),
                       LLVMBuildShl(e->b, LLVMBuildZExt(e->b, hi, t, ""), LLVMConstInt(t, 32, 0), ""), "");
}

astitch_dtype emit_acc_dtype(astitch_dtype t) { return dtype_is_float(t) ? ASTITCH_F32 : t; }

void emit_combine_lanes(Emit *e, const astitch_mapping *m, const LaneFold *f, LLVMValueRef *val,
                        LLVMValueRef row_in_tile)
{
    int tpr = m->threads_per_row, n = f->n;
    bool column = m->kind == ASTITCH_MAP_COLUMN_REDUCE;
    LLVMValueRef in[LANE_FOLD_MAX];
    if (tpr == 1)
        return;
    if (!column && tpr <= 32 && (tpr & (tpr - 1)) == 0) {
        for (int off = tpr / 2; off >= 1; off /= 2) {
            for (int i = 0; i < n; i++)
                in[i] = emit_shfl_xor(e, val[i], off);
            f->combine(e, f, val, in);
        }
        return;
    }
    /* through shared memory: warp results (row mapping) or every thread's value (column), one
     * slot per warp or thread in each value's root's REDUCE buffer */
    const PlanBuffer *buf[LANE_FOLD_MAX];
    LLVMValueRef base[LANE_FOLD_MAX];
    int64_t slots = column ? m->block : m->block / 32;
    for (int i = 0; i < n; i++) {
        const Node *node = gnode(e->g, f->root[i]);
        buf[i] = plan_kernel_buffer(e->k, ASTITCH_BUFFER_REDUCE, f->root[i]);
        int64_t need = slots * (int64_t)astitch_dtype_size(emit_acc_dtype(node->dtype));
        if (!buf[i] || buf[i]->bytes < need || (!column && tpr % 32 != 0)) {
            val[i] = ev_fail_node(e, f->root[i], LLVMTypeOf(val[i]), ASTITCH_ERR_UNSUPPORTED,
                                  "%s: reduce node %d '%s': %d lanes per row need a %lld-byte "
                                  "reduction buffer, the plan gives %lld",
                                  e->k->name, f->root[i], node->name, tpr, (long long)need,
                                  (long long)(buf[i] ? buf[i]->bytes : 0));
            return;
        }
        base[i] = ev_buffer_base(e, buf[i]);
    }
    LLVMValueRef slot = e->tid;
    LLVMBasicBlockRef merge = NULL;
    if (!column) {
        for (int off = 16; off >= 1; off /= 2) {
            for (int i = 0; i < n; i++)
                in[i] = emit_shfl_xor(e, val[i], off);
            f->combine(e, f, val, in);
        }
        slot = LLVMBuildUDiv(e->b, e->tid, ev_int(e, 32), "");
        merge = if_begin(e, LLVMBuildICmp(e->b, LLVMIntEQ,
                         LLVMBuildURem(e->b, e->tid, ev_int(e, 32), ""), ev_int(e, 0), ""));
    }
    for (int i = 0; i < n; i++) {
        ev_check_shared(e, buf[i], slot);
        ev_store(e, base[i], emit_acc_dtype(gnode(e->g, f->root[i])->dtype), slot, val[i]);
    }
    if (merge)
        if_end(e, merge);
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
    LLVMBasicBlockRef before = LLVMGetInsertBlock(e->b);
    merge = if_begin(e, LLVMBuildICmp(e->b, LLVMIntEQ, lane, ev_int(e, 0), ""));
    Loop fold;
    LLVMValueRef init[LANE_FOLD_MAX], acc[LANE_FOLD_MAX], next[LANE_FOLD_MAX];
    for (int i = 0; i < n; i++)
        init[i] = f->identity[i];
    loop_begin(e, &fold, ev_int(e, 0), parts, init, n, acc);
    LLVMValueRef at = column
        ? LLVMBuildAdd(e->b, row_in_tile, LLVMBuildMul(e->b, fold.iv, ev_int(e, m->rows_per_block), ""), "")
        : LLVMBuildAdd(e->b, LLVMBuildMul(e->b, row_in_tile, parts, ""), fold.iv, "");
    for (int i = 0; i < n; i++) {
        ev_check_shared(e, buf[i], at);
        in[i] = ev_load(e, base[i], emit_acc_dtype(gnode(e->g, f->root[i])->dtype), at);
        next[i] = acc[i];
    }
    f->combine(e, f, next, in);
    loop_end(e, &fold, ev_int(e, 1), next);
    LLVMBasicBlockRef from = LLVMGetInsertBlock(e->b);
    if_end(e, merge);
    for (int i = 0; i < n; i++) {
        LLVMValueRef res = LLVMBuildPhi(e->b, LLVMTypeOf(f->identity[i]), "rowsum");
        LLVMAddIncoming(res, (LLVMValueRef[]){f->identity[i], fold.carried[i]},
                        (LLVMBasicBlockRef[]){before, from}, 2);
        val[i] = res;
    }
    prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
}

/* LaneFold.combine of one reduce: acc[0] combined with in[0] by its kind. */
static void combine_reduce(Emit *e, const LaneFold *f, LLVMValueRef *acc, const LLVMValueRef *in)
{
    acc[0] = ev_reduce_combine(e, f->kind, f->dtype, acc[0], in[0]);
}

LLVMValueRef emit_combine_reduce(Emit *e, const astitch_mapping *m, int32_t root,
                                 LLVMValueRef acc, LLVMValueRef row_in_tile)
{
    const Node *node = gnode(e->g, root);
    LaneFold f = {.n = 1, .root = {root}, .kind = node->attr.reduce, .dtype = node->dtype,
                  .identity = {ev_reduce_identity(e, node->attr.reduce, node->dtype)},
                  .combine = combine_reduce};
    emit_combine_lanes(e, m, &f, &acc, row_in_tile);
    return acc;
}
