/* plan.c: plan storage, the kernel fill (ops, roles, inputs, outputs, steps) and the checker. */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_op(const void *a, const void *b)
{
    return cmp_i32(&((const PlanOp *)a)->node, &((const PlanOp *)b)->node);
}

PlanOp *plan_kernel_op(const PlanKernel *k, int32_t n)
{
    size_t lo = 0, hi = (size_t)k->nop;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (k->op[mid].node < n)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < (size_t)k->nop && k->op[lo].node == n ? &k->op[lo] : NULL;
}

const PlanBuffer *plan_kernel_buffer(const PlanKernel *k, astitch_buffer_kind kind, int32_t n)
{
    for (int32_t i = 0; i < k->nbuf; i++)
        if (k->buf[i].kind == kind && k->buf[i].node == n)
            return &k->buf[i];
    return NULL;
}

void plan_kernel_clear_schedule(PlanKernel *k)
{
    for (int32_t i = 0; i < k->ngroup; i++) {
        free(k->group[i].sub);
        free(k->group[i].member);
    }
    for (int32_t i = 0; i < k->nphase; i++)
        free(k->phase[i].root);
    free(k->group);
    free(k->phase);
    free(k->buf);
    k->group = NULL;
    k->phase = NULL;
    k->buf = NULL;
    k->ngroup = k->nphase = k->nbuf = 0;
}

void plan_kernel_clear(PlanKernel *k)
{
    plan_kernel_clear_schedule(k);
    free(k->op);
    free(k->input);
    free(k->output);
    memset(k, 0, sizeof *k);
}

bool plan_kernel_add(PlanKernel *k, int32_t n)
{
    if ((k->nop & (k->nop - 1)) == 0) { /* capacity doubles at powers of two */
        size_t cap = k->nop ? (size_t)k->nop * 2 : 4;
        PlanOp *op = realloc(k->op, cap * sizeof *op);
        if (!op)
            return false;
        k->op = op;
    }
    PlanOp *o = &k->op[k->nop++];
    memset(o, 0, sizeof *o);
    o->node = n;
    o->group = o->phase = o->buf = -1;
    o->role = ASTITCH_ROLE_MEMBER;
    o->scheme = ASTITCH_SCHEME_LOCAL;
    return true;
}

void plan_index_kernel(Planner *pl, const PlanKernel *k)
{
    for (int32_t i = 0; i < k->nop; i++)
        pl->kidx[k->op[i].node] = i;
}

void plan_unindex_kernel(Planner *pl, const PlanKernel *k)
{
    for (int32_t i = 0; i < k->nop; i++)
        pl->kidx[k->op[i].node] = -1;
}

bool plan_op_recomputable(astitch_op op)
{
    switch (astitch_op_class_of(op)) {
    case ASTITCH_CLASS_LIGHT:
    case ASTITCH_CLASS_BROADCAST:
        return true;
    case ASTITCH_CLASS_SHAPE:
        return op != ASTITCH_OP_GATHER;
    default:
        return false;
    }
}

bool plan_is_owned_class(const astitch_graph *g, int32_t n, const bool *is_output)
{
    astitch_op op = gnode(g, n)->op;
    astitch_op_class c = astitch_op_class_of(op);
    if (c == ASTITCH_CLASS_COMPUTE || op == ASTITCH_OP_PARAMETER)
        return false;
    if (c == ASTITCH_CLASS_SOURCE)
        return is_output[n]; /* constant/iota: owned only when it is a graph output */
    return true;
}

static bool is_inlinable_source(const astitch_graph *g, int32_t n)
{
    astitch_op op = gnode(g, n)->op;
    return op == ASTITCH_OP_CONSTANT || op == ASTITCH_OP_IOTA;
}

/* Sorted, deduplicated ops; constants and iota read by the kernel added as inlined. */
static bool fill_ops(Planner *pl, int32_t ki)
{
    const astitch_graph *g = pl->g;
    PlanKernel *k = &pl->p->kernel[ki];
    int32_t n0 = k->nop;
    for (int32_t i = 0; i < n0; i++) {
        int32_t v = k->op[i].node;
        for (int j = 0; j < gnode(g, v)->nin; j++) {
            int32_t x = goperand(g, v, j);
            if (is_inlinable_source(g, x) && pl->p->owner[x] != ki && !plan_kernel_add(k, x))
                return false;
        }
    }
    if (k->nop > 1)
        qsort(k->op, (size_t)k->nop, sizeof *k->op, cmp_op);
    int32_t w = 0;
    for (int32_t i = 0; i < k->nop; i++)
        if (w == 0 || k->op[w - 1].node != k->op[i].node)
            k->op[w++] = k->op[i];
    k->nop = w;
    for (int32_t i = 0; i < k->nop; i++) {
        PlanOp *o = &k->op[i];
        if (pl->p->owner[o->node] != ki) {
            o->role = ASTITCH_ROLE_INLINED;
            o->group = -1;
        }
    }
    return true;
}

static bool push_unique(int32_t **arr, int32_t *n, int32_t v)
{
    for (int32_t i = 0; i < *n; i++)
        if ((*arr)[i] == v)
            return true;
    int32_t *a = realloc(*arr, (size_t)(*n + 1) * sizeof **arr);
    if (!a)
        return false;
    a[(*n)++] = v;
    *arr = a;
    return true;
}

/* Membership index: for node v, the kernels that hold it are mk[ms[v] .. ms[v + 1]). */
static bool fill_membership(Planner *pl, int32_t **ms_out, int32_t **mk_out)
{
    astitch_plan *p = pl->p;
    int32_t *ms = calloc((size_t)pl->n + 1, sizeof *ms);
    int64_t total = 0;
    for (int32_t k = 0; k < p->nkernel; k++)
        total += p->kernel[k].nop;
    int32_t *mk = malloc((size_t)(total ? total : 1) * sizeof *mk);
    if (!ms || !mk) {
        free(ms);
        free(mk);
        return false;
    }
    for (int32_t k = 0; k < p->nkernel; k++)
        for (int32_t i = 0; i < p->kernel[k].nop; i++)
            ms[p->kernel[k].op[i].node + 1]++;
    for (int32_t v = 0; v < pl->n; v++)
        ms[v + 1] += ms[v];
    int32_t *fillp = pl->tmp;
    memcpy(fillp, ms, (size_t)pl->n * sizeof *fillp);
    for (int32_t k = 0; k < p->nkernel; k++)
        for (int32_t i = 0; i < p->kernel[k].nop; i++)
            mk[fillp[p->kernel[k].op[i].node]++] = k;
    *ms_out = ms;
    *mk_out = mk;
    return true;
}

static bool fill_io(Planner *pl, int32_t ki, const int32_t *ms, const int32_t *mk)
{
    const astitch_graph *g = pl->g;
    PlanKernel *k = &pl->p->kernel[ki];
    free(k->input);
    free(k->output);
    k->input = k->output = NULL;
    k->ninput = k->noutput = 0;
    for (int32_t i = 0; i < k->nop; i++) {
        int32_t v = k->op[i].node;
        for (int j = 0; j < gnode(g, v)->nin; j++) {
            int32_t x = goperand(g, v, j);
            if (!plan_kernel_op(k, x) && !push_unique(&k->input, &k->ninput, x))
                return false;
        }
        if (k->op[i].role == ASTITCH_ROLE_INLINED)
            continue;
        bool out = pl->is_output[v];
        for (int32_t u = pl->ustart[v]; !out && u < pl->ustart[v + 1]; u++) {
            int32_t c = pl->use[u];
            if (astitch_op_class_of(gnode(g, c)->op) == ASTITCH_CLASS_COMPUTE)
                out = true;
            for (int32_t m = ms[c]; !out && m < ms[c + 1]; m++)
                if (!plan_kernel_op(&pl->p->kernel[mk[m]], v))
                    out = true;
        }
        k->op[i].output = out;
        if (out && !push_unique(&k->output, &k->noutput, v))
            return false;
    }
    if (k->ninput > 1)
        qsort(k->input, (size_t)k->ninput, sizeof *k->input, cmp_i32);
    if (k->noutput > 1)
        qsort(k->output, (size_t)k->noutput, sizeof *k->output, cmp_i32);
    return true;
}

/* The unit (kernel k, or nk + v for compute node v) that produces node x, -1 for none. */
static int32_t unit_of(const Planner *pl, int32_t x)
{
    if (pl->p->owner[x] >= 0)
        return pl->p->owner[x];
    if (astitch_op_class_of(gnode(pl->g, x)->op) == ASTITCH_CLASS_COMPUTE)
        return pl->p->nkernel + x;
    return -1;
}

/* Steps: kernels and compute ops in a topological order of the kernel graph (Kahn's
 * algorithm, first-in first-out from units sorted by their first node). */
static astitch_status fill_steps(Planner *pl)
{
    astitch_plan *p = pl->p;
    const astitch_graph *g = pl->g;
    int32_t nk = p->nkernel, n = pl->n, nu = nk + n;
    int64_t ne = 0;
    for (int32_t k = 0; k < nk; k++)
        ne += p->kernel[k].ninput;
    for (int32_t v = 0; v < n; v++)
        if (astitch_op_class_of(gnode(g, v)->op) == ASTITCH_CLASS_COMPUTE)
            ne += gnode(g, v)->nin;
    int32_t *es = calloc((size_t)nu + 1, sizeof *es);
    int32_t *ed = malloc((size_t)(ne ? ne : 1) * sizeof *ed);
    int32_t *indeg = calloc((size_t)nu, sizeof *indeg);
    int32_t *queue = malloc((size_t)nu * sizeof *queue);
    bool *present = calloc((size_t)nu, sizeof *present);
    PlanStep *step = malloc((size_t)(nu ? nu : 1) * sizeof *step);
    astitch_status st = ASTITCH_OK;
    if (!es || !ed || !indeg || !queue || !present || !step) {
        st = ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
        goto done;
    }
    /* edges producer -> consumer unit, as CSR by producer */
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t u = 0; u < nu; u++) {
            int32_t cnt = u < nk ? p->kernel[u].ninput : 0;
            int32_t v = u - nk;
            if (u >= nk) {
                if (astitch_op_class_of(gnode(g, v)->op) != ASTITCH_CLASS_COMPUTE)
                    continue;
                present[u] = true;
                cnt = gnode(g, v)->nin;
            } else {
                present[u] = true;
            }
            for (int32_t i = 0; i < cnt; i++) {
                int32_t x = u < nk ? p->kernel[u].input[i] : goperand(g, v, (int)i);
                int32_t pu = unit_of(pl, x);
                if (pu < 0 || pu == u)
                    continue;
                if (pass == 0) {
                    es[pu + 1]++;
                    indeg[u]++;
                } else {
                    ed[es[pu]++] = u;
                }
            }
        }
        edges_pass_end(es, nu, pass);
    }
    int32_t qh = 0, qt = 0, ns = 0, want = 0;
    for (int32_t v = 0, k = 0; v < n || k < nk;) {
        int32_t first = k < nk && p->kernel[k].nop ? p->kernel[k].op[0].node : 0;
        if (k < nk && (v >= n || first <= v)) {
            want++;
            if (indeg[k] == 0)
                queue[qt++] = k;
            k++;
        } else {
            if (present[nk + v]) {
                want++;
                if (indeg[nk + v] == 0)
                    queue[qt++] = nk + v;
            }
            v++;
        }
    }
    while (qh < qt) {
        int32_t u = queue[qh++];
        step[ns].kind = u < nk ? ASTITCH_STEP_KERNEL : ASTITCH_STEP_COMPUTE;
        step[ns].index = u < nk ? u : u - nk;
        ns++;
        for (int32_t e = es[u]; e < es[u + 1]; e++)
            if (--indeg[ed[e]] == 0)
                queue[qt++] = ed[e];
    }
    if (ns != want) {
        st = ctx_fail(g->ctx, ASTITCH_ERR_INTERNAL,
                      "planner: the kernel graph has a cycle (%d of %d steps ordered)", ns, want);
        goto done;
    }
    free(p->step);
    p->step = step;
    p->nstep = ns;
    step = NULL;
done:
    free(es);
    free(ed);
    free(indeg);
    free(queue);
    free(present);
    free(step);
    return st;
}

astitch_status plan_fill(Planner *pl)
{
    astitch_plan *p = pl->p;
    for (int32_t k = 0; k < p->nkernel; k++)
        if (!fill_ops(pl, k))
            return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    int32_t *ms, *mk;
    if (!fill_membership(pl, &ms, &mk))
        return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    bool ok = true;
    for (int32_t k = 0; ok && k < p->nkernel; k++)
        ok = fill_io(pl, k, ms, mk);
    free(ms);
    free(mk);
    if (!ok)
        return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    return fill_steps(pl);
}

static astitch_status check_fail(Planner *pl, const PlanKernel *k, int32_t v, const char *what)
{
    if (v >= 0) {
        ctx_fail(pl->g->ctx, ASTITCH_ERR_INTERNAL, "planner: kernel %s: node %d '%s' (%s): %s",
                 k ? k->name : "-", (int)v, gnode(pl->g, v)->name,
                 astitch_op_name(gnode(pl->g, v)->op), what);
        ctx_error_at_node(pl->g->ctx, v);
        return ASTITCH_ERR_INTERNAL;
    }
    return ctx_fail(pl->g->ctx, ASTITCH_ERR_INTERNAL, "planner: kernel %s: %s",
                    k ? k->name : "-", what);
}

/* The ops of kernel k against the invariants of `stage` and the stages before it. */
static astitch_status check_ops(Planner *pl, const PlanKernel *k, int32_t ki, PlanStage stage)
{
    const astitch_plan *p = pl->p;
    for (int32_t i = 0; i < k->nop; i++) {
        const PlanOp *o = &k->op[i];
        bool owned = p->owner[o->node] == ki;
        if (owned == (o->role == ASTITCH_ROLE_INLINED))
            return check_fail(pl, k, o->node, "role does not match ownership");
        if (stage < PLAN_STAGE_GROUPS)
            continue;
        if (owned && (o->group < 0 || o->group >= k->ngroup))
            return check_fail(pl, k, o->node, "owned op outside every group");
        if (stage < PLAN_STAGE_PHASES)
            continue;
        if ((o->role == ASTITCH_ROLE_DOMINANT || o->role == ASTITCH_ROLE_SUB_DOMINANT) !=
            (o->phase >= 0))
            return check_fail(pl, k, o->node, "materialized ops and phases disagree");
        if (o->phase >= k->nphase)
            return check_fail(pl, k, o->node, "phase past the kernel's phases");
        if (o->output && o->phase < 0)
            return check_fail(pl, k, o->node, "an output is not materialized");
        if (stage < PLAN_STAGE_MEMORY)
            continue;
        if (o->phase >= 0 && o->scheme != ASTITCH_SCHEME_LOCAL && o->scheme != ASTITCH_SCHEME_INDEPENDENT &&
            !o->output && o->buf < 0 &&
            !(o->scheme == ASTITCH_SCHEME_REGIONAL && k->phase[o->phase].resident))
            return check_fail(pl, k, o->node, "a regional or global op has no buffer");
        if (o->buf >= k->nbuf)
            return check_fail(pl, k, o->node, "buffer past the kernel's buffers");
    }
    return ASTITCH_OK;
}

/* Whether block b's part of the value of op o, held in a shared buffer, is the run of its
 * elements that codegen indexes it by (emit_memory.c, shared_first): under o's phase mapping m,
 * elements [b x chunk x per, (b + 1) x chunk x per) with per = 1 for a reduce or a value of the
 * rows and row_len for a value of the space. A value of the rows always is; a value of the
 * space only where each row's elements are consecutive (a row mapping reduces trailing axes)
 * or one unsplit block owns every row. */
static bool shared_part_contiguous(const Planner *pl, const PlanKernel *k, const PlanOp *o)
{
    const astitch_mapping *m = &k->phase[o->phase].map;
    const Node *n = gnode(pl->g, o->node);
    int64_t all = sched_elements(pl->g, o->node);
    bool red = n->op == ASTITCH_OP_REDUCE && m->kind != ASTITCH_MAP_ELEMENTWISE;
    if (red || m->kind == ASTITCH_MAP_ELEMENTWISE || m->row_len == 1)
        return all <= m->rows;
    if (all != m->rows * m->row_len)
        return false;
    if (m->grid <= 1 && m->split <= 1)
        return true;
    return m->kind == ASTITCH_MAP_ROW_REDUCE && plan_reduces_trailing(m) && m->split <= 1;
}

/* Every buffer of k inside the memory the kernel plans: shared ones in its shared bytes,
 * scratch ones in its scratch bytes; an op's shared buffer holds its block's part as codegen
 * indexes it (shared_part_contiguous). */
static astitch_status check_buffers(Planner *pl, const PlanKernel *k)
{
    for (int32_t i = 0; i < k->nbuf; i++) {
        const PlanBuffer *b = &k->buf[i];
        bool shared = plan_buffer_shared(b->kind);
        int64_t top = shared ? k->shared_bytes : k->scratch_bytes;
        if (b->offset < 0 || b->bytes < 0 || b->offset + b->bytes > top)
            return check_fail(pl, k, b->node, shared ? "buffer outside the shared memory"
                                                     : "buffer outside the scratch bytes");
        if (b->kind != ASTITCH_BUFFER_SHARED)
            continue;
        const PlanOp *o = plan_kernel_op(k, b->node);
        if (!o || o->phase < 0 || o->phase >= k->nphase || !shared_part_contiguous(pl, k, o))
            return check_fail(pl, k, b->node,
                              "shared buffer of a value whose block's part is not one run of "
                              "its elements");
    }
    return ASTITCH_OK;
}

/* Launch shape within the device and every phase's mapping within the launch shape. */
static astitch_status check_launch(Planner *pl, const PlanKernel *k)
{
    const astitch_device *d = &pl->p->dev;
    if (k->block < 1 || k->block > d->max_threads_per_block || k->grid < 1 ||
        (k->persistent && k->grid > k->blocks_per_wave) || k->shared_bytes > d->shared_per_block ||
        k->regs < 32 || k->regs > d->max_regs_per_thread)
        return check_fail(pl, k, -1, "launch shape outside the device limits");
    for (int32_t i = 0; i < k->nphase; i++) {
        const PlanPhase *ph = &k->phase[i];
        if (ph->map.grid > k->grid || ph->map.block != k->block)
            return check_fail(pl, k, -1, "a phase's mapping exceeds the launch shape");
    }
    return ASTITCH_OK;
}

astitch_status plan_check_kernel(Planner *pl, const PlanKernel *k, PlanStage stage)
{
    int32_t ki = (int32_t)(k - pl->p->kernel);
    astitch_status st = check_ops(pl, k, ki, stage);
    for (int32_t i = 0; !st && stage >= PLAN_STAGE_PHASES && i < k->nphase; i++) {
        const PlanPhase *ph = &k->phase[i];
        for (int32_t r = 0; !st && r < ph->nroot; r++) {
            const PlanOp *o = plan_kernel_op(k, ph->root[r]);
            if (!o || o->phase != i)
                st = check_fail(pl, k, ph->root[r], "root listed in another phase");
        }
    }
    if (!st && stage >= PLAN_STAGE_MEMORY)
        st = check_buffers(pl, k);
    if (!st && stage >= PLAN_STAGE_LAUNCH)
        st = check_launch(pl, k);
    if (!st && stage >= PLAN_STAGE_DONE && k->ninput + k->noutput > PLAN_KERNEL_MAX_TENSORS)
        st = check_fail(pl, k, -1, "more input and output tensors than a kernel takes");
    if (!st && stage >= PLAN_STAGE_DONE && k->global_barriers > 0 && !k->persistent)
        st = check_fail(pl, k, -1, "global barriers in a kernel that is not persistent");
    return st;
}

/* The inputs of kernel ki: made by an earlier step that writes them, or parameters. */
static astitch_status check_inputs(Planner *pl, int32_t ki, const int32_t *pos)
{
    const astitch_plan *p = pl->p;
    const astitch_graph *g = pl->g;
    const PlanKernel *k = &p->kernel[ki];
    for (int32_t i = 0; i < k->ninput; i++) {
        int32_t x = k->input[i];
        int32_t ow = p->owner[x];
        astitch_op_class c = astitch_op_class_of(gnode(g, x)->op);
        if (ow < 0 && gnode(g, x)->op != ASTITCH_OP_PARAMETER && c != ASTITCH_CLASS_COMPUTE)
            return check_fail(pl, k, x, "input produced by nothing");
        if (ow >= 0) {
            const PlanOp *src = plan_kernel_op(&p->kernel[ow], x);
            if (!src || !src->output)
                return check_fail(pl, k, x, "input not written by its owner");
            if (pos[ow] >= pos[ki])
                return check_fail(pl, k, x, "input produced by a later step");
        } else if (c == ASTITCH_CLASS_COMPUTE && pos[p->nkernel + x] >= pos[ki]) {
            return check_fail(pl, k, x, "input computed by a later step");
        }
    }
    return ASTITCH_OK;
}

astitch_status plan_check(Planner *pl)
{
    const astitch_plan *p = pl->p;
    const astitch_graph *g = pl->g;
    int32_t nu = p->nkernel + pl->n;
    int32_t *pos = malloc((size_t)(nu ? nu : 1) * sizeof *pos);
    if (!pos)
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    for (int32_t u = 0; u < nu; u++)
        pos[u] = -1;
    astitch_status st = ASTITCH_OK;
    for (int32_t s = 0; s < p->nstep; s++) {
        int32_t u = p->step[s].kind == ASTITCH_STEP_KERNEL ? p->step[s].index
                                                            : p->nkernel + p->step[s].index;
        if (pos[u] >= 0) {
            st = check_fail(pl, NULL, -1, "a step appears twice");
            goto done;
        }
        pos[u] = s;
    }
    for (int32_t k = 0; k < p->nkernel; k++)
        if (pos[k] < 0) {
            st = check_fail(pl, &p->kernel[k], -1, "kernel missing from the steps");
            goto done;
        }
    for (int32_t v = 0; v < pl->n; v++) {
        bool owned = plan_is_owned_class(g, v, pl->is_output);
        if (owned != (p->owner[v] >= 0)) {
            st = check_fail(pl, NULL, v, owned ? "owned by no kernel" : "owned unexpectedly");
            goto done;
        }
        if (owned && !plan_kernel_op(&p->kernel[p->owner[v]], v)) {
            st = check_fail(pl, &p->kernel[p->owner[v]], v, "owner does not hold it");
            goto done;
        }
    }
    for (int32_t k = 0; !st && k < p->nkernel; k++) {
        st = check_inputs(pl, k, pos);
        if (!st)
            st = plan_check_kernel(pl, &p->kernel[k], PLAN_STAGE_DONE);
    }
done:
    free(pos);
    return st;
}
