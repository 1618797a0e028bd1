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
 *
 * With the plan option split_barriers, kernel k is cut at every one of its global barriers
 * whatever the producers cost (k still moves at least HOIST_MIN_BYTES): piece i holds the ops
 * the GLOBAL roots written before the i-th barrier are computed from, that no earlier piece
 * took; the rest is the last kernel. A light element-wise, broadcast or shape op of a piece
 * that a later piece reads is recomputed there (held inlined, with such operands of its own),
 * so that the later kernel reads the piece's inputs instead of a full-size intermediate.
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

/* Marks lev[v] for the ops of kernel ki that the GLOBAL roots written before one of its first
 * `barriers` global barriers are computed from (their operands' cone inside ki): the index of
 * the first barrier after the root's phase, an op in several cones taking the earliest; the
 * others keep -1. Returns how many ops were marked. pl->tmp holds the walk. */
static int32_t producers(Planner *pl, int32_t ki, int32_t barriers, int32_t *lev)
{
    const astitch_plan *p = pl->p;
    const PlanKernel *k = &p->kernel[ki];
    int32_t *stack = pl->tmp, count = 0, b = 0; /* each node pushed once */
    for (int32_t ph = 0; ph < k->nphase && b < barriers; ph++) {
        if (k->phase[ph].barrier != ASTITCH_BARRIER_GLOBAL)
            continue;
        int32_t top = 0;
        for (int32_t i = 0; i < k->nop; i++) {
            const PlanOp *o = &k->op[i];
            if (o->scheme == ASTITCH_SCHEME_GLOBAL && o->phase >= 0 && o->phase < ph &&
                p->owner[o->node] == ki && lev[o->node] < 0) {
                lev[o->node] = b;
                stack[top++] = o->node;
            }
        }
        while (top > 0) {
            int32_t v = stack[--top];
            count++;
            for (int j = 0; j < gnode(pl->g, v)->nin; j++) {
                int32_t x = goperand(pl->g, v, j);
                if (p->owner[x] == ki && lev[x] < 0) {
                    lev[x] = b;
                    stack[top++] = x;
                }
            }
        }
        b++;
    }
    return count;
}

/* H's cost (see the head): k's inputs it reads, and twice its values the rest of k reads. */
static int64_t producers_bytes(Planner *pl, int32_t ki, const int32_t *lev)
{
    const astitch_plan *p = pl->p;
    const PlanKernel *k = &p->kernel[ki];
    int64_t bytes = 0;
    pl->epoch++;
    for (int32_t i = 0; i < k->nop; i++) {
        int32_t v = k->op[i].node;
        if (lev[v] < 0)
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
            if (p->owner[y] == ki && lev[y] < 0) {
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

/* A rebuild's node -> part assignment, each part's marks, and the ops a part recomputes
 * (held inlined) that another part owns. */
typedef struct Parts {
    int32_t *part;
    Part *mark;
    int32_t n;
    int32_t *copy_node, *copy_part; /* ncopy pairs, no pair twice (add_copies) */
    int32_t ncopy, capcopy;
} Parts;

static void parts_free(Parts *ps)
{
    free(ps->part);
    free(ps->mark);
    free(ps->copy_node);
    free(ps->copy_part);
}

static astitch_status parts_fail(Planner *pl, Parts *ps)
{
    parts_free(ps);
    return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
}

/* Appends the pair (v, part); false on memory. */
static bool copy_add(Parts *ps, int32_t v, int32_t part)
{
    if (ps->ncopy == ps->capcopy) {
        int32_t cap = ps->capcopy ? 2 * ps->capcopy : 16;
        int32_t *a = realloc(ps->copy_node, (size_t)cap * sizeof *a);
        if (a)
            ps->copy_node = a;
        int32_t *b = a ? realloc(ps->copy_part, (size_t)cap * sizeof *b) : NULL;
        if (!b)
            return false;
        ps->copy_part = b;
        ps->capcopy = cap;
    }
    ps->copy_node[ps->ncopy] = v;
    ps->copy_part[ps->ncopy++] = part;
    return true;
}

static int cmp_first(const void *a, const void *b, void *ctx)
{
    const PlanKernel *k = ctx;
    int32_t fx = k[*(const int32_t *)a].op[0].node, fy = k[*(const int32_t *)b].op[0].node;
    return (fx > fy) - (fx < fy); /* parts are never empty, first nodes differ */
}

/* Whether node v, held by old kernel k, is one k recomputes (inlined), not a constant or iota. */
static bool inlined_op(const Planner *pl, int32_t k, int32_t v)
{
    astitch_op op = gnode(pl->g, v)->op;
    return pl->p->owner[v] != k && op != ASTITCH_OP_CONSTANT && op != ASTITCH_OP_IOTA;
}

/* Replaces the plan's kernels by fresh ones: part[v] (0 .. nparts - 1) for every owned node
 * v, each part's ops in node order (as scope leaves them), the kernels ordered by their first
 * owned node; p->owner follows. Then each part also holds the ops ps lists for it, and the
 * ops old kernel k recomputed, in part keep[k] (NULL: part k). */
static astitch_status rebuild(Planner *pl, const Parts *ps, const int32_t *keep)
{
    astitch_plan *p = pl->p;
    int32_t nparts = ps->n;
    PlanKernel *nk = calloc((size_t)nparts, sizeof *nk), *sorted = NULL;
    int32_t *order = malloc((size_t)nparts * sizeof *order);
    int32_t *at = malloc((size_t)nparts * sizeof *at); /* part -> its index after the sort */
    bool ok = nk && order && at;
    for (int32_t v = 0; ok && v < pl->n; v++)
        if (p->owner[v] >= 0)
            ok = plan_kernel_add(&nk[ps->part[v]], v);
    for (int32_t k = 0; ok && k < p->nkernel; k++)
        for (int32_t i = 0; ok && i < p->kernel[k].nop; i++)
            if (inlined_op(pl, k, p->kernel[k].op[i].node))
                ok = plan_kernel_add(&nk[keep ? keep[k] : k], p->kernel[k].op[i].node);
    for (int32_t i = 0; ok && i < ps->ncopy; i++)
        ok = plan_kernel_add(&nk[ps->copy_part[i]], ps->copy_node[i]);
    sorted = ok ? calloc((size_t)nparts, sizeof *sorted) : NULL;
    if (!sorted) {
        for (int32_t k = 0; nk && k < nparts; k++)
            plan_kernel_clear(&nk[k]);
        free(nk);
        free(order);
        free(at);
        return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    }
    /* each part's first op is owned: owned ops went in first, node by node */
    for (int32_t k = 0; k < nparts; k++) {
        nk[k].hoisted = ps->mark[k].hoisted;
        nk[k].hoist_cut = ps->mark[k].cut;
        order[k] = k;
    }
    qsort_r(order, (size_t)nparts, sizeof *order, cmp_first, nk);
    for (int32_t i = 0; i < nparts; i++) {
        sorted[i] = nk[order[i]];
        at[order[i]] = i;
    }
    for (int32_t v = 0; v < pl->n; v++)
        if (p->owner[v] >= 0)
            p->owner[v] = at[ps->part[v]];
    for (int32_t k = 0; k < p->nkernel; k++)
        plan_kernel_clear(&p->kernel[k]);
    free(p->kernel);
    free(nk);
    free(order);
    free(at);
    p->kernel = sorted;
    p->nkernel = nparts;
    return ASTITCH_OK;
}

/* Whether kernel ki is cut (the head's rules), its producers marked in lev (-1 for the
 * rest); *levels says into how many pieces besides the rest. */
static bool worth_cutting(Planner *pl, int32_t ki, int32_t *lev, int32_t *levels)
{
    const astitch_plan *p = pl->p;
    const PlanKernel *k = &p->kernel[ki];
    bool split = p->opt.split_barriers;
    *levels = split ? k->global_barriers : 1;
    if (k->global_barriers < 1 || (!split && k->global_barriers != 1) ||
        k->min_bytes < HOIST_MIN_BYTES)
        return false;
    int32_t owned = 0;
    for (int32_t i = 0; i < k->nop; i++)
        owned += p->owner[k->op[i].node] == ki;
    for (int32_t v = 0; v < pl->n; v++)
        lev[v] = -1;
    int32_t count = producers(pl, ki, *levels, lev);
    if (count == 0 || count >= owned)
        return false;
    if (split)
        return true;
    plan_index_kernel(pl, k);
    int64_t bytes = producers_bytes(pl, ki, lev);
    plan_unindex_kernel(pl, k);
    return bytes <= k->min_bytes / HOIST_SHARE;
}

/* split_barriers: each op of cut kernel ki that a later part of it reads (its pieces are parts
 * first .. first + levels - 1, its rest part ki), and that plan_op_recomputable allows, is
 * recomputed there, with such operands of its own, instead of written by its own part. One
 * walk per part; pl->tmp holds it. */
static bool add_copies(Planner *pl, int32_t ki, Parts *ps, int32_t first, int32_t levels)
{
    const astitch_plan *p = pl->p;
    int32_t *stack = pl->tmp;
    for (int32_t l = 0; l <= levels; l++) {
        int32_t dest = l < levels ? first + l : ki, top = 0;
        pl->epoch++;
        for (int32_t v = 0; v < pl->n; v++) {
            if (p->owner[v] != ki || ps->part[v] == dest ||
                !plan_op_recomputable(gnode(pl->g, v)->op))
                continue;
            for (int32_t u = pl->ustart[v]; u < pl->ustart[v + 1]; u++) {
                int32_t y = pl->use[u];
                if (p->owner[y] == ki && ps->part[y] == dest) {
                    pl->stamp[v] = pl->epoch;
                    stack[top++] = v;
                    break;
                }
            }
        }
        while (top > 0) { /* each node pushed once */
            int32_t x = stack[--top];
            if (!copy_add(ps, x, dest))
                return false;
            for (int j = 0; j < gnode(pl->g, x)->nin; j++) {
                int32_t w = goperand(pl->g, x, j);
                if (p->owner[w] == ki && ps->part[w] != dest && pl->stamp[w] != pl->epoch &&
                    plan_op_recomputable(gnode(pl->g, w)->op)) {
                    pl->stamp[w] = pl->epoch;
                    stack[top++] = w;
                }
            }
        }
    }
    return true;
}

astitch_status pass_hoist(Planner *pl, bool *changed)
{
    astitch_plan *p = pl->p;
    int32_t nk = p->nkernel, most = nk;
    for (int32_t k = 0; k < nk; k++)
        most += p->kernel[k].global_barriers > 1 ? p->kernel[k].global_barriers : 1;
    *changed = false;
    Parts ps = {malloc((size_t)pl->n * sizeof(int32_t)), calloc((size_t)most, sizeof(Part)), nk,
                NULL, NULL, 0, 0};
    int32_t *lev = malloc((size_t)pl->n * sizeof *lev);
    if (!ps.part || !ps.mark || !lev) {
        free(lev);
        return parts_fail(pl, &ps);
    }
    for (int32_t v = 0; v < pl->n; v++)
        ps.part[v] = p->owner[v];
    int32_t cuts = 0, levels = 0;
    bool ok = true;
    for (int32_t ki = 0; ok && ki < nk; ki++) {
        if (!worth_cutting(pl, ki, lev, &levels))
            continue;
        ps.mark[ki].cut = ++cuts;
        for (int32_t j = 0; j < levels; j++)
            ps.mark[ps.n + j] = (Part){true, cuts};
        for (int32_t v = 0; v < pl->n; v++)
            if (lev[v] >= 0 && p->owner[v] == ki)
                ps.part[v] = ps.n + lev[v];
        ok = !p->opt.split_barriers || add_copies(pl, ki, &ps, ps.n, levels);
        ps.n += levels;
    }
    free(lev);
    astitch_status st = !ok ? ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory")
                        : cuts ? rebuild(pl, &ps, NULL)
                               : ASTITCH_OK;
    *changed = cuts > 0 && st == ASTITCH_OK;
    parts_free(&ps);
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
    Parts ps = {malloc((size_t)pl->n * sizeof(int32_t)), calloc((size_t)nk, sizeof(Part)), 0,
                NULL, NULL, 0, 0};
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
    astitch_status st = *changed ? rebuild(pl, &ps, dest) : ASTITCH_OK;
    free(undo);
    free(dest);
    parts_free(&ps);
    return st;
}
