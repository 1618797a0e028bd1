/* emit_online.c: a streamed row's max and its sum of exp(x - max) in one walk, the online
 * softmax (plan_online_pair; docs/codegen.md, *Online softmax*); the rows of a row mapping or
 * the columns of a column mapping.
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

/* LaneFold.combine of the pair (emit_combine_lanes): acc = (m, s) combined with in = (m2,
 * s2). */
static void combine_pair(Emit *e, const LaneFold *f, LLVMValueRef *acc, const LLVMValueRef *in)
{
    (void)f;
    LLVMValueRef top = fmax_of(e, acc[0], in[0]);
    acc[1] = LLVMBuildFAdd(e->b, LLVMBuildFMul(e->b, acc[1], scale(e, acc[0], top), ""),
                           LLVMBuildFMul(e->b, in[1], scale(e, in[0], top), ""), "");
    acc[0] = top;
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
            if (e->carry_mode == CARRY_STORE)
                emit_carry_store(e, jc, &run, 1);
            continue;
        }
        lin[0] = ev_lin(e, &run);
        for (int u = 1; u < v; u++)
            lin[u] = LLVMBuildNSWAdd(e->b, lin[0], ev_int(e, u), "");
        emit_run_roots(e, pm, space, &run, lin, v, 1, &max, &x[c * v]);
        if (e->carry_mode == CARRY_STORE)
            emit_carry_store(e, jc, &run, v);
    }
    fold(e, acc, x, count * v, next);
}

void emit_online(Emit *e, const PlanPhase *pm, const PlanPhase *ps, LLVMValueRef tile_iv)
{
    const astitch_mapping *m = &pm->map;
    Shape space = plan_mapping_space(m);
    int32_t max = pm->root[0], sum = ps->root[0];
    /* a column mapping (single columns: plan_online_pair) has its rows across adjacent
     * threads and its lanes down the reduced axes, as in emit_reduce */
    bool column = m->kind == ASTITCH_MAP_COLUMN_REDUCE;
    int v = column ? 1 : plan_row_vector(e->plan, e->k, pm);
    int tpr = m->threads_per_row, rpb = m->rows_per_block;
    LLVMValueRef row_in_tile = column ? LLVMBuildURem(e->b, e->tid, ev_int(e, rpb), "")
                                      : LLVMBuildUDiv(e->b, e->tid, ev_int(e, tpr), "");
    LLVMValueRef lane = column ? LLVMBuildUDiv(e->b, e->tid, ev_int(e, rpb), "")
                               : LLVMBuildURem(e->b, e->tid, ev_int(e, tpr), "");
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
    /* values a later walk of the row reads back (carry.c keeps every iteration across a
     * block barrier, so the walk stores at each) */
    int carry = emit_carry_role(e);
    if (carry == CARRY_STORE && e->k->carry.slots < e->k->carry.iterations) {
        ev_fail(e, e->ix, ASTITCH_ERR_INTERNAL, "%s: phase %d keeps %lld of %lld iterations in "
                "its online walk, which keeps all or none", e->k->name, e->phase,
                (long long)e->k->carry.slots, (long long)e->k->carry.iterations);
        return;
    }
    e->carry_mode = carry == CARRY_STORE ? CARRY_STORE : CARRY_NONE;
    e->carry_start = start;
    e->carry_step = stride;
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
    e->carry_mode = CARRY_NONE;
    LLVMValueRef pair[2] = {el.carried[0], el.carried[1]};
    LaneFold f = {.n = 2, .root = {max, sum}, .identity = {f32(e, -INFINITY), f32(e, 0)},
                  .combine = combine_pair};
    emit_combine_lanes(e, m, &f, pair, row_in_tile);
    /* a row whose max is -inf: the two walks' exp(-inf - -inf) makes its sum NaN */
    LLVMValueRef empty = LLVMBuildFCmp(e->b, LLVMRealOEQ, pair[0], f32(e, -INFINITY), "");
    pair[1] = LLVMBuildSelect(e->b, empty, f32(e, NAN), pair[1], "");
    LLVMBasicBlockRef merge = if_begin(e, LLVMBuildAnd(e->b, valid,
                              LLVMBuildICmp(e->b, LLVMIntEQ, lane, ev_int(e, 0), ""), ""));
    emit_reduce_store(e, m, max, row, pair[0]);
    emit_reduce_store(e, &ps->map, sum, row, pair[1]);
    if_end(e, merge);
}
