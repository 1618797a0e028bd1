/* plan_api.c: the public read accessors of a plan and the names of its vocabulary. */
#include "passes/passes.h"

static const char *const scheme_names[] = {"local", "regional", "global", "independent"};
static const char *const role_names[] = {"dominant", "sub-dominant", "member", "inlined"};
static const char *const map_names[] = {"elementwise", "row-reduce", "column-reduce"};
static const char *const barrier_names[] = {"none", "block", "global"};
static const char *const buffer_names[] = {"shared", "reduce", "scratch", "partial", "carry", "tile"};

#define NAME_OF(table, v) \
    ((unsigned)(v) < sizeof(table) / sizeof(table[0]) ? table[(unsigned)(v)] : NULL)

const char *astitch_scheme_name(astitch_scheme s) { return NAME_OF(scheme_names, s); }
const char *astitch_role_name(astitch_role r) { return NAME_OF(role_names, r); }
const char *astitch_mapping_kind_name(astitch_mapping_kind k) { return NAME_OF(map_names, k); }

int64_t astitch_mapping_elements_per_thread(const astitch_mapping *m)
{
    if (!m || m->rows_per_block < 1 || m->threads_per_row < 1 || m->chunk < 1)
        return 0;
    if (m->kind == ASTITCH_MAP_ELEMENTWISE)
        return (m->chunk + m->rows_per_block - 1) / m->rows_per_block;
    int64_t len = m->split > 1 ? m->split_len : m->row_len;
    int64_t tiles = m->split > 1 ? 1 : m->tasks_per_block;
    if (m->kind == ASTITCH_MAP_COLUMN_REDUCE && m->vector > 1) /* a run of vector rows */
        return tiles * ((len + m->threads_per_row - 1) / m->threads_per_row) * m->vector;
    if (m->vector > 0 && m->split <= 1) {
        int64_t step = (int64_t)m->threads_per_row * m->vector;
        return tiles * ((len + step - 1) / step) * m->vector;
    }
    return tiles * ((len + m->threads_per_row - 1) / m->threads_per_row);
}
const char *astitch_barrier_name(astitch_barrier b) { return NAME_OF(barrier_names, b); }
const char *astitch_buffer_kind_name(astitch_buffer_kind k) { return NAME_OF(buffer_names, k); }

const astitch_graph *astitch_plan_graph(const astitch_plan *p) { return p ? p->graph : NULL; }
const astitch_device *astitch_plan_device(const astitch_plan *p) { return p ? &p->dev : NULL; }

const astitch_plan_options *astitch_plan_get_options(const astitch_plan *p)
{
    return p ? &p->opt : NULL;
}

int astitch_plan_num_kernels(const astitch_plan *p) { return p ? p->nkernel : 0; }
int64_t astitch_plan_scratch_bytes(const astitch_plan *p) { return p ? p->scratch_bytes : 0; }
int astitch_plan_num_steps(const astitch_plan *p) { return p ? p->nstep : 0; }

astitch_step_kind astitch_plan_step(const astitch_plan *p, int i, int *index)
{
    if (!p || i < 0 || i >= p->nstep) {
        if (index)
            *index = -1;
        return ASTITCH_STEP_KERNEL;
    }
    if (index)
        *index = p->step[i].index;
    return p->step[i].kind;
}

static bool node_ok(const astitch_plan *p, astitch_node n)
{
    return p && n >= 0 && n < p->graph->nnode;
}

static const PlanKernel *kernel(const astitch_plan *p, int k)
{
    return p && k >= 0 && k < p->nkernel ? &p->kernel[k] : NULL;
}

int astitch_plan_kernel_of(const astitch_plan *p, astitch_node n)
{
    return node_ok(p, n) ? p->owner[n] : -1;
}

static void op_info(const PlanOp *o, int k, astitch_op_info *info)
{
    info->node = o->node;
    info->kernel = k;
    info->group = o->group;
    info->phase = o->phase;
    info->role = o->role;
    info->scheme = o->scheme;
    info->output = o->output;
    info->evals = o->evals;
}

astitch_status astitch_plan_node_info(const astitch_plan *p, astitch_node n, astitch_op_info *info)
{
    if (!node_ok(p, n) || !info || p->owner[n] < 0)
        return ASTITCH_ERR_ARGUMENT;
    op_info(plan_kernel_op(&p->kernel[p->owner[n]], n), p->owner[n], info);
    return ASTITCH_OK;
}

astitch_status astitch_plan_kernel_info(const astitch_plan *p, int k, astitch_kernel_info *info)
{
    const PlanKernel *kk = kernel(p, k);
    if (!kk || !info)
        return ASTITCH_ERR_ARGUMENT;
    info->name = kk->name;
    info->num_ops = kk->nop;
    info->num_inputs = kk->ninput;
    info->num_outputs = kk->noutput;
    info->num_groups = kk->ngroup;
    info->num_phases = kk->nphase;
    info->num_buffers = kk->nbuf;
    info->block = kk->block;
    info->grid = kk->grid;
    info->shared_bytes = kk->shared_bytes;
    info->scratch_bytes = kk->scratch_bytes;
    info->regs = kk->regs;
    info->blocks_per_sm = kk->blocks_per_sm;
    info->blocks_per_wave = kk->blocks_per_wave;
    info->block_barriers = kk->block_barriers;
    info->global_barriers = kk->global_barriers;
    info->persistent = kk->persistent;
    info->min_bytes = kk->min_bytes;
    info->moved_bytes = kk->moved_bytes;
    info->hoisted = kk->hoisted;
    return ASTITCH_OK;
}

astitch_status astitch_plan_kernel_op(const astitch_plan *p, int k, int i, astitch_op_info *info)
{
    const PlanKernel *kk = kernel(p, k);
    if (!kk || !info || i < 0 || i >= kk->nop)
        return ASTITCH_ERR_ARGUMENT;
    op_info(&kk->op[i], k, info);
    return ASTITCH_OK;
}

astitch_node astitch_plan_kernel_input(const astitch_plan *p, int k, int i)
{
    const PlanKernel *kk = kernel(p, k);
    return kk && i >= 0 && i < kk->ninput ? kk->input[i] : ASTITCH_NO_NODE;
}

astitch_node astitch_plan_kernel_output(const astitch_plan *p, int k, int i)
{
    const PlanKernel *kk = kernel(p, k);
    return kk && i >= 0 && i < kk->noutput ? kk->output[i] : ASTITCH_NO_NODE;
}

static const PlanGroup *group(const astitch_plan *p, int k, int g)
{
    const PlanKernel *kk = kernel(p, k);
    return kk && g >= 0 && g < kk->ngroup ? &kk->group[g] : NULL;
}

astitch_status astitch_plan_group_info(const astitch_plan *p, int k, int g,
                                       astitch_group_info *info)
{
    const PlanGroup *gr = group(p, k, g);
    if (!gr || !info)
        return ASTITCH_ERR_ARGUMENT;
    info->dominant = gr->dominant;
    info->num_sub_dominants = gr->nsub;
    info->num_members = gr->nmember;
    info->mapping = gr->map;
    return ASTITCH_OK;
}

astitch_node astitch_plan_group_sub_dominant(const astitch_plan *p, int k, int g, int i)
{
    const PlanGroup *gr = group(p, k, g);
    return gr && i >= 0 && i < gr->nsub ? gr->sub[i] : ASTITCH_NO_NODE;
}

astitch_node astitch_plan_group_member(const astitch_plan *p, int k, int g, int i)
{
    const PlanGroup *gr = group(p, k, g);
    return gr && i >= 0 && i < gr->nmember ? gr->member[i] : ASTITCH_NO_NODE;
}

static const PlanPhase *phase(const astitch_plan *p, int k, int ph)
{
    const PlanKernel *kk = kernel(p, k);
    return kk && ph >= 0 && ph < kk->nphase ? &kk->phase[ph] : NULL;
}

astitch_status astitch_plan_phase_info(const astitch_plan *p, int k, int ph,
                                       astitch_phase_info *info)
{
    const PlanPhase *x = phase(p, k, ph);
    if (!x || !info)
        return ASTITCH_ERR_ARGUMENT;
    info->group = x->group;
    info->barrier = x->barrier;
    info->run_first = x->run_first;
    info->resident = x->resident;
    info->num_roots = x->nroot;
    info->mapping = x->map;
    return ASTITCH_OK;
}

astitch_node astitch_plan_phase_root(const astitch_plan *p, int k, int ph, int i)
{
    const PlanPhase *x = phase(p, k, ph);
    return x && i >= 0 && i < x->nroot ? x->root[i] : ASTITCH_NO_NODE;
}

astitch_status astitch_plan_buffer_info(const astitch_plan *p, int k, int b,
                                        astitch_buffer_info *info)
{
    const PlanKernel *kk = kernel(p, k);
    if (!kk || !info || b < 0 || b >= kk->nbuf)
        return ASTITCH_ERR_ARGUMENT;
    const PlanBuffer *x = &kk->buf[b];
    info->kind = x->kind;
    info->node = x->node;
    info->offset = x->offset;
    info->bytes = x->bytes;
    info->first_phase = x->first_phase;
    info->last_phase = x->last_phase;
    info->zero_init = x->zero_init;
    return ASTITCH_OK;
}
