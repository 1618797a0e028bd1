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
    int64_t least = 4;
    for (int32_t i = 0; i < k->ninput; i++) {
        const Node *in = gnode(g, k->input[i]);
        if (shape_equal(&in->shape, &space) && (int64_t)astitch_dtype_size(in->dtype) < least)
            least = (int64_t)astitch_dtype_size(in->dtype);
    }
    for (int32_t r = 0; r < ph->nroot; r++) {
        const Node *root = gnode(g, ph->root[r]);
        if ((int64_t)astitch_dtype_size(root->dtype) < least)
            least = (int64_t)astitch_dtype_size(root->dtype);
    }
    return (int)(16 / (least < 2 ? 2 : least)); /* at most 8 */
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

/* True when m's reduced axes are its leading ones and at least one axis is kept. */
static bool kept_innermost(const astitch_mapping *m)
{
    uint32_t leading = 0;
    for (int i = 0; i < m->rank && (m->reduce_axes >> i & 1); i++)
        leading |= 1u << i;
    uint32_t all = m->rank >= 32 ? ~0u : (1u << m->rank) - 1;
    return m->reduce_axes == leading && (all & ~leading) != 0;
}

/* True when runs of v rows tile m's blocks: whole runs in the innermost axis (inner), in a
 * tile and in a block's chunk, the block's threads exactly groups of lanes, and the lanes a
 * power of two up to a warp or whole warps (the combine's shuffles). */
static bool runs_fit(const astitch_mapping *m, int64_t inner, int v)
{
    if (inner % v || m->rows_per_block % v || m->chunk % v)
        return false;
    int64_t groups = m->rows_per_block / v, lanes = (int64_t)m->threads_per_row * v;
    if (groups * lanes != m->block)
        return false;
    return lanes >= 32 ? lanes % 32 == 0 : (lanes & (lanes - 1)) == 0;
}

/* True when every reduce root of ph over its mapping's axes has a reduction buffer of a slot
 * per thread (the planner gives none where a row's lanes need no combine: one lane per row). */
static bool combine_buffers(const astitch_graph *g, const PlanKernel *k, const PlanPhase *ph)
{
    for (int32_t r = 0; r < ph->nroot; r++) {
        const Node *n = gnode(g, ph->root[r]);
        if (n->op != ASTITCH_OP_REDUCE || n->attr.axes != ph->map.reduce_axes)
            continue;
        const PlanBuffer *buf = plan_kernel_buffer(k, ASTITCH_BUFFER_REDUCE, ph->root[r]);
        size_t slot = astitch_dtype_size(dtype_is_float(n->dtype) ? ASTITCH_F32 : n->dtype);
        if (!buf || buf->bytes < (int64_t)ph->map.block * (int64_t)slot)
            return false;
    }
    return true;
}

/* The least register bound of a kernel whose column phases take runs: below it the kernel
 * holds a block of 1024 threads twice per SM (32 registers), the scalar form then has as many
 * loads in flight per SM as runs would, and runs of 4 spill there (batchnorm_train's statistics
 * phase with three sums: 12 accumulators; its normalization: mean, rstd, gamma and beta of 4
 * columns), which a kernel of grid barriers cannot relax. */
enum { COLUMN_VECTOR_MIN_REGS = 64 };

int plan_column_vector(const astitch_plan *p, const PlanKernel *k, const PlanPhase *ph)
{
    const astitch_mapping *m = &ph->map;
    if (!p->opt.column_vectors || m->kind != ASTITCH_MAP_COLUMN_REDUCE || !kept_innermost(m) ||
        m->rank == 0 || k->regs < COLUMN_VECTOR_MIN_REGS || !combine_buffers(p->graph, k, ph))
        return 1;
    int v = plan_access_elements(p->graph, k, ph);
    while (v > 1 && !runs_fit(m, m->dims[m->rank - 1], v))
        v /= 2;
    return v;
}
