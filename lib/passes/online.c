/*
 * online.c: which phases take a streamed row's max and its sum of exponentials in one walk
 * (plan option online_softmax; docs/planner.md, *tiles*; codegen: emit_online.c).
 *
 * A softmax or a cross-entropy over long rows reduces each row twice: m = max(x), then
 * s = sum(exp(x - m)). Planned as two phases of one streamed tile run, the second walks the row
 * again. The online form keeps a running pair (m, s) per lane instead, rescaling s whenever m
 * grows, so the row is walked once. This is a query over a finished plan, not a rewrite: the
 * plan keeps both phases (their roots, buffers and barriers), and code generation emits the
 * pair in the first phase's walk and nothing for the second. A column mapping's columns (a
 * log-sum-exp down the rows of a contrastive loss's logits, over the classes of NCHW
 * segmentation logits) take it alike, in single columns (not runs of them).
 */
#include "passes/passes.h"

/* True when node n is an f32 reduce of `kind` over the reduced axes of m, whose operand has
 * m's iteration space as its shape. */
static bool row_reduce_of(const astitch_graph *g, int32_t n, astitch_reduce_kind kind,
                          const astitch_mapping *m)
{
    const Node *r = gnode(g, n);
    if (r->op != ASTITCH_OP_REDUCE || r->attr.reduce != kind || r->dtype != ASTITCH_F32 ||
        r->attr.axes != m->reduce_axes)
        return false;
    Shape space = plan_mapping_space(m);
    return shape_equal(&gnode(g, goperand(g, n, 0))->shape, &space);
}

bool plan_online_nodes(const astitch_graph *g, int32_t max, int32_t sum, const astitch_mapping *m)
{
    if (!row_reduce_of(g, max, ASTITCH_REDUCE_MAX, m) ||
        !row_reduce_of(g, sum, ASTITCH_REDUCE_SUM, m))
        return false;
    /* sum = reduce_sum(exp(x - broadcast(max))) with x max's own operand */
    int32_t ex = goperand(g, sum, 0);
    if (gnode(g, ex)->op != ASTITCH_OP_EXP || gnode(g, ex)->dtype != ASTITCH_F32)
        return false;
    int32_t sub = goperand(g, ex, 0);
    if (gnode(g, sub)->op != ASTITCH_OP_SUB || gnode(g, sub)->dtype != ASTITCH_F32 ||
        goperand(g, sub, 0) != goperand(g, max, 0))
        return false;
    int32_t b = goperand(g, sub, 1);
    if (gnode(g, b)->op != ASTITCH_OP_BROADCAST_IN_DIM || goperand(g, b, 0) != max)
        return false;
    for (int i = 0, kept = 0; i < m->rank; i++) /* max's element j along the row's kept axes */
        if (!(m->reduce_axes >> i & 1) && gnode(g, b)->attr.dims[kept++] != i)
            return false;
    return true;
}

bool plan_online_pair(const astitch_plan *p, const PlanKernel *k, int32_t ph)
{
    if (!p->opt.online_softmax || ph < 0 || ph + 1 >= k->nphase)
        return false;
    const PlanPhase *pm = &k->phase[ph], *ps = &k->phase[ph + 1];
    const astitch_mapping *m = &pm->map;
    bool row = m->kind == ASTITCH_MAP_ROW_REDUCE;
    bool column = m->kind == ASTITCH_MAP_COLUMN_REDUCE && plan_column_vector(m) == 1;
    if (pm->resident || ps->resident || ps->run_first != pm->run_first || pm->nroot != 1 ||
        ps->nroot != 1 || !(row || column) || m->split > 1 || m->row_len < 1 ||
        !sched_map_equal(m, &ps->map))
        return false;
    return plan_online_nodes(p->graph, pm->root[0], ps->root[0], m);
}
