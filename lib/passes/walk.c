/*
 * walk.c: how a reduce phase's threads take their elements, as code generation emits it
 * (docs/codegen.md, *Reduce phase*) and the planner counts on it (carry.c): the elements of
 * one access, a streamed row lane's runs, a column thread's runs of rows.
 */
#include "passes/passes.h"

Shape plan_mapping_space(const astitch_mapping *m)
{
    Shape s = {.rank = m->rank};
    for (int i = 0; i < m->rank; i++)
        s.dim[i] = m->dims[i];
    return s;
}

int plan_access_elements(const astitch_graph *g, const PlanKernel *k, const PlanPhase *ph)
{
    Shape space = plan_mapping_space(&ph->map);
    int64_t widest = 2;
    for (int32_t i = 0; i < k->ninput; i++) {
        const Node *in = gnode(g, k->input[i]);
        if (shape_equal(&in->shape, &space) && (int64_t)astitch_dtype_size(in->dtype) > widest)
            widest = (int64_t)astitch_dtype_size(in->dtype);
    }
    for (int32_t r = 0; r < ph->nroot; r++) {
        const Node *root = gnode(g, ph->root[r]);
        if (shape_equal(&root->shape, &space) && (int64_t)astitch_dtype_size(root->dtype) > widest)
            widest = (int64_t)astitch_dtype_size(root->dtype);
    }
    return (int)mapping_access_elements(widest); /* 8, 4 or 2 */
}

int plan_row_vector(const astitch_plan *p, const PlanKernel *k, const PlanPhase *ph)
{
    const astitch_mapping *m = &ph->map;
    int last = m->rank - 1;
    if (!p->opt.row_vectors || m->kind != ASTITCH_MAP_ROW_REDUCE || last < 0 ||
        !(m->reduce_axes >> last & 1))
        return 1;
    int v = plan_access_elements(p->graph, k, ph);
    while (v > 1 && (m->dims[last] % v || (m->split > 1 && m->split_len % v)))
        v /= 2;
    return v;
}

int plan_column_vector(const astitch_mapping *m)
{
    return m->kind == ASTITCH_MAP_COLUMN_REDUCE && m->vector > 1 ? m->vector : 1;
}

int64_t plan_column_lane_stride(const astitch_mapping *m)
{
    return m->rows_per_block + 32 * (int64_t)m->rows_per_block / m->block;
}

int64_t plan_column_slots(const astitch_mapping *m)
{
    return plan_column_vector(m) > 1 ? m->threads_per_row * plan_column_lane_stride(m)
                                     : m->block;
}
