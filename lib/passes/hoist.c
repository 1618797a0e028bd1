/*
 * hoist.c: small producers of a global barrier's values made a kernel of their own.
 *
 * A kernel needs a global barrier when a phase reads a value (a GLOBAL root) that blocks other
 * than its own produced; then every block must be resident (one persistent wave) and waits
 * for the slowest. When what the barrier waits for is cheap (a masked mean pooling's token
 * count, a sum of the mask's 128 values a row, beside a column sum of 50 MB), the barrier and
 * the persistent wave cost the large part more than the small one is worth: its producers run
 * first as a kernel of their own, and the rest, reading their values as kernel inputs, is
 * planned again without the barrier (a block per tile, its own launch shape, a lone column
 * group's runs).
 *
 * Kernel k is cut when (plan option `hoist`, fusion=stitch):
 *   - it has exactly one global barrier, and moves at least HOIST_MIN_BYTES (below that a
 *     launch of its own costs about what the barrier does);
 *   - H, the ops of k that the GLOBAL roots written before the barrier are computed from
 *     (their operands' cone inside k), leaves some op of k out;
 *   - H's cost, the bytes of k's inputs it reads and twice the bytes of its values the rest
 *     reads (written by H, read back), is at most 1 / HOIST_SHARE of k's minimal bytes.
 * H comes first: it reads nothing of the rest (a cone is closed under operands), so the kernel
 * graph stays acyclic. Kernels are numbered by their first node again (as bound.c does), and
 * the pipeline plans every kernel from plan_fill on again.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

#define HOIST_MIN_BYTES ((int64_t)8 << 20)
#define HOIST_SHARE 16

static int64_t node_bytes(const astitch_graph *g, int32_t n)
{
    const Node *node = gnode(g, n);
    return shape_elements(&node->shape) * (int64_t)astitch_dtype_size(node->dtype);
}

/* Marks in `in` (by node) the ops of kernel ki that the GLOBAL roots written before the
 * kernel's global barrier are computed from; returns how many. pl->tmp holds the walk. */
static int32_t producers(Planner *pl, int32_t ki, bool *in)
{
    const astitch_plan *p = pl->p;
    const PlanKernel *k = &p->kernel[ki];
    int32_t barrier = -1;
    for (int32_t ph = 0; ph < k->nphase && barrier < 0; ph++)
        if (k->phase[ph].barrier == ASTITCH_BARRIER_GLOBAL)
            barrier = ph;
    int32_t *stack = pl->tmp, top = 0, count = 0; /* each node pushed once */
    for (int32_t i = 0; i < k->nop; i++) {
        const PlanOp *o = &k->op[i];
        if (o->scheme == ASTITCH_SCHEME_GLOBAL && o->phase >= 0 && o->phase < barrier &&
            !in[o->node]) {
            in[o->node] = true;
            stack[top++] = o->node;
        }
    }
    while (top > 0) {
        int32_t v = stack[--top];
        count++;
        for (int j = 0; j < gnode(pl->g, v)->nin; j++) {
            int32_t x = goperand(pl->g, v, j);
            if (p->owner[x] == ki && !in[x]) {
                in[x] = true;
                stack[top++] = x;
            }
        }
    }
    return count;
}

/* H's cost (see the head): k's inputs it reads, and twice its values the rest of k reads. */
static int64_t producers_bytes(Planner *pl, int32_t ki, const bool *in)
{
    const astitch_plan *p = pl->p;
    const PlanKernel *k = &p->kernel[ki];
    int64_t bytes = 0;
    pl->epoch++;
    for (int32_t i = 0; i < k->nop; i++) {
        int32_t v = k->op[i].node;
        if (!in[v])
            continue;
        for (int j = 0; j < gnode(pl->g, v)->nin; j++) {
            int32_t x = goperand(pl->g, v, j);
            if (pl->kidx[x] < 0 && pl->stamp[x] != pl->epoch) { /* a kernel input */
                pl->stamp[x] = pl->epoch;
                bytes += node_bytes(pl->g, x);
            }
        }
        for (int32_t u = pl->ustart[v]; u < pl->ustart[v + 1]; u++) {
            int32_t y = pl->use[u];
            if (p->owner[y] == ki && !in[y]) {
                bytes += 2 * node_bytes(pl->g, v);
                break;
            }
        }
    }
    return bytes;
}

/* What a part of a rebuild carries into its fresh kernel. */
typedef struct Part {
    bool hoisted;
    int32_t cut; /* PlanKernel.hoist_cut */
} Part;

static int cmp_first(const void *a, const void *b)
{
    const PlanKernel *x = a, *y = b;
    int32_t fx = x->op[0].node, fy = y->op[0].node; /* parts are never empty */
    return (fx > fy) - (fx < fy);
}

/* Replaces the plan's kernels by fresh ones: part[v] (0 .. nparts - 1) for every owned node
 * v, each part's ops in node order (as scope leaves them), the kernels ordered by their first
 * node; p->owner follows. */
static astitch_status rebuild(Planner *pl, const int32_t *part, int32_t nparts, const Part *mark)
{
    astitch_plan *p = pl->p;
    PlanKernel *nk = calloc((size_t)nparts, sizeof *nk);
    bool ok = nk != NULL;
    for (int32_t v = 0; ok && v < pl->n; v++)
        if (p->owner[v] >= 0)
            ok = plan_kernel_add(&nk[part[v]], v);
    if (!ok) {
        for (int32_t k = 0; nk && k < nparts; k++)
            plan_kernel_clear(&nk[k]);
        free(nk);
        return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    }
    for (int32_t k = 0; k < nparts; k++) {
        nk[k].hoisted = mark[k].hoisted;
        nk[k].hoist_cut = mark[k].cut;
    }
    qsort(nk, (size_t)nparts, sizeof *nk, cmp_first);
    for (int32_t k = 0; k < nparts; k++)
        for (int32_t i = 0; i < nk[k].nop; i++)
            p->owner[nk[k].op[i].node] = k;
    for (int32_t k = 0; k < p->nkernel; k++)
        plan_kernel_clear(&p->kernel[k]);
    free(p->kernel);
    p->kernel = nk;
    p->nkernel = nparts;
    return ASTITCH_OK;
}

/* Whether kernel ki is worth cutting (the head's rules), its producers marked in `in`. */
static bool worth_cutting(Planner *pl, int32_t ki, bool *in)
{
    const astitch_plan *p = pl->p;
    const PlanKernel *k = &p->kernel[ki];
    if (k->global_barriers != 1 || k->min_bytes < HOIST_MIN_BYTES)
        return false;
    int32_t owned = 0;
    for (int32_t i = 0; i < k->nop; i++)
        owned += p->owner[k->op[i].node] == ki;
    memset(in, 0, (size_t)pl->n * sizeof *in);
    int32_t count = producers(pl, ki, in);
    if (count == 0 || count >= owned)
        return false;
    plan_index_kernel(pl, k);
    int64_t bytes = producers_bytes(pl, ki, in);
    plan_unindex_kernel(pl, k);
    return bytes <= k->min_bytes / HOIST_SHARE;
}

/* A rebuild's node -> part assignment and each part's marks. */
typedef struct Parts {
    int32_t *part;
    Part *mark;
    int32_t n;
} Parts;

static astitch_status parts_fail(Planner *pl, Parts *ps)
{
    free(ps->part);
    free(ps->mark);
    return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
}

astitch_status pass_hoist(Planner *pl, bool *changed)
{
    astitch_plan *p = pl->p;
    int32_t nk = p->nkernel;
    *changed = false;
    Parts ps = {malloc((size_t)pl->n * sizeof(int32_t)), calloc((size_t)nk * 2, sizeof(Part)),
                nk};
    bool *in = malloc((size_t)pl->n * sizeof *in);
    if (!ps.part || !ps.mark || !in) {
        free(in);
        return parts_fail(pl, &ps);
    }
    for (int32_t v = 0; v < pl->n; v++)
        ps.part[v] = p->owner[v];
    int32_t cuts = 0;
    for (int32_t ki = 0; ki < nk; ki++) {
        if (!worth_cutting(pl, ki, in))
            continue;
        ps.mark[ki].cut = ++cuts;
        ps.mark[ps.n] = (Part){true, cuts};
        for (int32_t v = 0; v < pl->n; v++)
            if (in[v] && p->owner[v] == ki)
                ps.part[v] = ps.n;
        ps.n++;
    }
    free(in);
    astitch_status st = cuts ? rebuild(pl, ps.part, ps.n, ps.mark) : ASTITCH_OK;
    *changed = cuts > 0 && st == ASTITCH_OK;
    free(ps.part);
    free(ps.mark);
    return st;
}

astitch_status pass_hoist_undo(Planner *pl, bool *changed)
{
    astitch_plan *p = pl->p;
    int32_t nk = p->nkernel;
    *changed = false;
    /* the cuts whose rest still has a global barrier */
    bool *undo = calloc((size_t)nk + 1, sizeof *undo);
    int32_t *dest = malloc((size_t)nk * sizeof *dest);
    Parts ps = {malloc((size_t)pl->n * sizeof(int32_t)), calloc((size_t)nk, sizeof(Part)), 0};
    if (!undo || !dest || !ps.part || !ps.mark) {
        free(undo);
        free(dest);
        return parts_fail(pl, &ps);
    }
    for (int32_t ki = 0; ki < nk; ki++) {
        const PlanKernel *k = &p->kernel[ki];
        if (k->hoist_cut > 0 && !k->hoisted && k->global_barriers > 0) {
            undo[k->hoist_cut] = true;
            *changed = true;
        }
    }
    /* every kernel its own part, but a hoisted piece of an undone cut joins its rest */
    for (int32_t ki = 0; ki < nk; ki++) {
        const PlanKernel *k = &p->kernel[ki];
        dest[ki] = -1;
        if (k->hoisted && undo[k->hoist_cut])
            continue;
        dest[ki] = ps.n;
        ps.mark[ps.n++] = undo[k->hoist_cut] ? (Part){false, 0} : (Part){k->hoisted, k->hoist_cut};
    }
    for (int32_t ki = 0; ki < nk; ki++)
        for (int32_t ri = 0; dest[ki] < 0 && ri < nk; ri++)
            if (ri != ki && p->kernel[ri].hoist_cut == p->kernel[ki].hoist_cut)
                dest[ki] = dest[ri];
    for (int32_t v = 0; v < pl->n; v++)
        ps.part[v] = p->owner[v] >= 0 ? dest[p->owner[v]] : -1;
    astitch_status st = *changed ? rebuild(pl, ps.part, ps.n, ps.mark) : ASTITCH_OK;
    free(undo);
    free(dest);
    free(ps.part);
    free(ps.mark);
    return st;
}
