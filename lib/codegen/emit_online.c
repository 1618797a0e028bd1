/* emit_online.c: a streamed row's max and its sum of exp(x - max) in one walk, the online
 * softmax (plan_online_pair; docs/codegen.md, *Online softmax*).
 *
 * Each lane keeps a pair (m, s): the max of the elements it has seen and the sum of their
 * exp(x - m). A group of elements with maximum r folds as m' = max(m, r), s' = s * scale(m, m')
 * + sum(exp(x - m')), where scale(a, b) is 1 when a = b and exp(a - b) otherwise; lanes, warps
 * and blocks' slots combine pairs alike: M = max(m1, m2), s1 * scale(m1, M) + s2 * scale(m2,
 * M). The reference's non-finite rows come out alike: a term is +0 while the running max is
 * -inf (a -inf met first never makes s NaN), and a row whose max ends at -inf gets a NaN sum, as
 * exp(-inf - -inf) gives the two-walk form; NaN and +inf go through max and exp as there. */
#define ASTITCH_EMIT_INTERNAL
#include <math.h>
#include <stdlib.h>

#include "codegen.h"

static LLVMValueRef f32(Emit *e, double v) { return LLVMConstReal(LLVMFloatTypeInContext(e->c), v); }

static LLVMValueRef exp_f32(Emit *e, LLVMValueRef x)
{
    return prim_call(e->b, e->m, PRIM_EXP_F32, &x, 1);
}

static LLVMValueRef fmax_of(Emit *e, LLVMValueRef a, LLVMValueRef b)
{
    return ev_reduce_combine(e, ASTITCH_REDUCE_MAX, ASTITCH_F32, a, b);
}

/* What a sum kept against max a is worth against max b >= a (b NaN: NaN). */
static LLVMValueRef scale(Emit *e, LLVMValueRef a, LLVMValueRef b)
{
    return LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOEQ, a, b, ""), f32(e, 1),
                           exp_f32(e, LLVMBuildFSub(e->b, a, b, "")), "scale");
}

/* (m, s) combined with (m2, s2), in place. */
static void pair_combine(Emit *e, LLVMValueRef *m, LLVMValueRef *s, LLVMValueRef m2, LLVMValueRef s2)
{
    LLVMValueRef top = fmax_of(e, *m, m2);
    *s = LLVMBuildFAdd(e->b, LLVMBuildFMul(e->b, *s, scale(e, *m, top), ""),
                       LLVMBuildFMul(e->b, s2, scale(e, m2, top), ""), "");
    *m = top;
}

/* The pair acc = (m, s) after the n values x: next. */
static void fold(Emit *e, const LLVMValueRef *acc, const LLVMValueRef *x, int n, LLVMValueRef *next)
{
    LLVMValueRef r = x[0];
    for (int i = 1; i < n; i++)
        r = fmax_of(e, r, x[i]);
    LLVMValueRef top = fmax_of(e, acc[0], r);
    LLVMValueRef terms = exp_f32(e, LLVMBuildFSub(e->b, x[0], top, ""));
    for (int i = 1; i < n; i++)
        terms = LLVMBuildFAdd(e->b, terms, exp_f32(e, LLVMBuildFSub(e->b, x[i], top, "")), "");
    LLVMValueRef none = LLVMBuildFCmp(e->b, LLVMRealOEQ, top, f32(e, -INFINITY), "");
    terms = LLVMBuildSelect(e->b, none, f32(e, 0), terms, "");
    next[0] = top;
    next[1] = LLVMBuildFAdd(e->b, LLVMBuildFMul(e->b, acc[1], scale(e, acc[0], top), ""), terms, "");
}

/* The max's operand x (phase pm's only root is the max) at count runs of v elements of row
 * `row` from reduced index j, step apart, folded into the pair acc: next. */
static void fold_runs(Emit *e, const PlanPhase *pm, const Shape *space, LLVMValueRef row,
                      LLVMValueRef j, int64_t step, int count, int v, const LLVMValueRef *acc,
                      LLVMValueRef *next)
{
    LLVMValueRef x[ITERATION_ELEMENTS_MAX * VECTOR_MAX], lin[VECTOR_MAX];
    int32_t max = pm->root[0];
    for (int c = 0; c < count; c++) {
        LLVMValueRef jc = c ? LLVMBuildNSWAdd(e->b, j, ev_int(e, (int64_t)c * step), "") : j;
        Index run;
        emit_space_index(e, &pm->map, space, row, jc, &run);
        if (v == 1) {
            ev_begin_element(e, &run);
            x[c] = ev_value(e, goperand(e->g, max, 0), &run);
            continue;
        }
        lin[0] = ev_lin(e, &run);
        for (int u = 1; u < v; u++)
            lin[u] = LLVMBuildNSWAdd(e->b, lin[0], ev_int(e, u), "");
        emit_run_roots(e, pm, space, &run, lin, v, 1, &max, &x[c * v]);
    }
    fold(e, acc, x, count * v, next);
}

/* The pairs of a row's tpr lanes combined; the row's lane 0 ends with the row's pair. All
 * threads of the block arrive here (shuffles, and for rows of several warps the slots of the
 * two roots' REDUCE buffers and block barriers, as emit_reduce.c combines one value). */
static void combine_pairs(Emit *e, const astitch_mapping *m, int32_t max, int32_t sum,
                          LLVMValueRef *pair, LLVMValueRef row_in_tile)
{
    int tpr = m->threads_per_row;
    if (tpr == 1)
        return;
    int from = tpr <= 32 ? tpr / 2 : 16;
    for (int off = from; off >= 1; off /= 2)
        pair_combine(e, &pair[0], &pair[1], emit_shfl_xor(e, pair[0], off),
                     emit_shfl_xor(e, pair[1], off));
    if (tpr <= 32)
        return;
    const PlanBuffer *bm = plan_kernel_buffer(e->k, ASTITCH_BUFFER_REDUCE, max);
    const PlanBuffer *bs = plan_kernel_buffer(e->k, ASTITCH_BUFFER_REDUCE, sum);
    int64_t need = (int64_t)(m->block / 32) * 4;
    if (!bm || !bs || bm->bytes < need || bs->bytes < need || tpr % 32 != 0) {
        ev_fail_node(e, sum, LLVMFloatTypeInContext(e->c), ASTITCH_ERR_INTERNAL,
                     "%s: online softmax over %d lanes per row without reduction buffers of "
                     "%lld bytes for '%s' and '%s'", e->k->name, tpr, (long long)need,
                     gnode(e->g, max)->name, gnode(e->g, sum)->name);
        return;
    }
    LLVMValueRef base_m = ev_buffer_base(e, bm), base_s = ev_buffer_base(e, bs);
    LLVMValueRef slot = LLVMBuildUDiv(e->b, e->tid, ev_int(e, 32), "");
    LLVMBasicBlockRef merge = if_begin(e, LLVMBuildICmp(e->b, LLVMIntEQ,
                              LLVMBuildURem(e->b, e->tid, ev_int(e, 32), ""), ev_int(e, 0), ""));
    ev_check_shared(e, bm, slot);
    ev_check_shared(e, bs, slot);
    ev_store(e, base_m, ASTITCH_F32, slot, pair[0]);
    ev_store(e, base_s, ASTITCH_F32, slot, pair[1]);
    if_end(e, merge);
    prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
    /* the row's lane 0 folds its warps' slots, in a loop whose trip count comes from the block
     * size at run time (not unrolled into loads of every slot at once; emit_reduce.c) */
    LLVMValueRef ntid = LLVMBuildZExt(e->b, prim_call(e->b, e->m, PRIM_NTID_X, NULL, 0), e->ix, "");
    LLVMValueRef tprv = ev_int(e, tpr);
    LLVMValueRef lanes = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntULT, ntid, tprv, ""),
                                         ntid, tprv, "");
    LLVMValueRef parts = LLVMBuildLShr(e->b, lanes, ev_int(e, 5), "");
    LLVMValueRef lane = LLVMBuildURem(e->b, e->tid, tprv, "");
    LLVMValueRef id[2] = {f32(e, -INFINITY), f32(e, 0)};
    LLVMBasicBlockRef before = LLVMGetInsertBlock(e->b);
    merge = if_begin(e, LLVMBuildICmp(e->b, LLVMIntEQ, lane, ev_int(e, 0), ""));
    Loop slots;
    LLVMValueRef acc[2], next[2];
    loop_begin(e, &slots, ev_int(e, 0), parts, id, 2, acc);
    LLVMValueRef at = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, row_in_tile, parts, ""), slots.iv, "");
    ev_check_shared(e, bm, at);
    ev_check_shared(e, bs, at);
    next[0] = acc[0];
    next[1] = acc[1];
    pair_combine(e, &next[0], &next[1], ev_load(e, base_m, ASTITCH_F32, at),
                 ev_load(e, base_s, ASTITCH_F32, at));
    loop_end(e, &slots, ev_int(e, 1), next);
    LLVMValueRef folded[2] = {slots.carried[0], slots.carried[1]};
    LLVMBasicBlockRef from_block = LLVMGetInsertBlock(e->b);
    if_end(e, merge);
    for (int i = 0; i < 2; i++) {
        LLVMValueRef phi = LLVMBuildPhi(e->b, LLVMFloatTypeInContext(e->c), "rowpair");
        LLVMAddIncoming(phi, (LLVMValueRef[]){id[i], folded[i]},
                        (LLVMBasicBlockRef[]){before, from_block}, 2);
        pair[i] = phi;
    }
    prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
}

void emit_online(Emit *e, const PlanPhase *pm, const PlanPhase *ps, LLVMValueRef tile_iv)
{
    const astitch_mapping *m = &pm->map;
    Shape space = {.rank = m->rank};
    for (int i = 0; i < m->rank; i++)
        space.dim[i] = m->dims[i];
    int32_t max = pm->root[0], sum = ps->root[0];
    int v = emit_row_vector(e, pm, &space);
    int tpr = m->threads_per_row, rpb = m->rows_per_block;
    LLVMValueRef row_in_tile = LLVMBuildUDiv(e->b, e->tid, ev_int(e, tpr), "");
    LLVMValueRef lane = LLVMBuildURem(e->b, e->tid, ev_int(e, tpr), "");
    LLVMValueRef t0 = LLVMBuildMul(e->b, tile_iv, ev_int(e, rpb), "");
    LLVMValueRef row = LLVMBuildAdd(e->b, LLVMBuildAdd(e->b, LLVMBuildMul(e->b, e->ctaid,
                                    ev_int(e, m->chunk), ""), t0, ""), row_in_tile, "row");
    LLVMValueRef in_chunk = LLVMBuildAdd(e->b, t0, row_in_tile, "");
    LLVMValueRef valid = LLVMBuildAnd(e->b, LLVMBuildAnd(e->b,
        LLVMBuildICmp(e->b, LLVMIntSLT, row_in_tile, ev_int(e, rpb), ""),
        LLVMBuildICmp(e->b, LLVMIntSLT, in_chunk, ev_int(e, m->chunk), ""), ""),
        LLVMBuildICmp(e->b, LLVMIntSLT, row, ev_int(e, m->rows), ""), "");
    /* invalid threads walk nothing but join the combines */
    LLVMValueRef end = LLVMBuildSelect(e->b, valid, ev_int(e, m->row_len), ev_int(e, 0), "");
    LLVMValueRef start = v > 1 ? LLVMBuildMul(e->b, lane, ev_int(e, v), "") : lane;
    int64_t stride = (int64_t)tpr * v;
    int unroll = emit_elements_per_iteration(e, pm);
    LLVMValueRef init[2] = {f32(e, -INFINITY),
                            ev_reduce_start(e, ASTITCH_REDUCE_SUM, ASTITCH_F32, m->row_len)};
    LLVMValueRef group_acc[2], acc[2], next[2];
    LLVMValueRef lo = start;
    if (unroll > 1) {
        Loop group;
        loop_begin(e, &group, lo, LLVMBuildSub(e->b, end, ev_int(e, (unroll - 1) * stride), ""),
                   init, 2, group_acc);
        fold_runs(e, pm, &space, row, group.iv, stride, unroll, v, group.carried, next);
        loop_end(e, &group, ev_int(e, unroll * stride), next);
        lo = group.iv;
        init[0] = group.carried[0];
        init[1] = group.carried[1];
    }
    Loop el;
    loop_begin(e, &el, lo, end, init, 2, acc);
    fold_runs(e, pm, &space, row, el.iv, stride, 1, v, el.carried, next);
    loop_end(e, &el, ev_int(e, stride), next);
    LLVMValueRef pair[2] = {el.carried[0], el.carried[1]};
    combine_pairs(e, m, max, sum, pair, row_in_tile);
    /* a row whose max is -inf: the two walks' exp(-inf - -inf) makes its sum NaN */
    LLVMValueRef empty = LLVMBuildFCmp(e->b, LLVMRealOEQ, pair[0], f32(e, -INFINITY), "");
    pair[1] = LLVMBuildSelect(e->b, empty, f32(e, NAN), pair[1], "");
    LLVMBasicBlockRef merge = if_begin(e, LLVMBuildAnd(e->b, valid,
                              LLVMBuildICmp(e->b, LLVMIntEQ, lane, ev_int(e, 0), ""), ""));
    emit_reduce_store(e, m, max, row, pair[0]);
    emit_reduce_store(e, &ps->map, sum, row, pair[1]);
    if_end(e, merge);
}
