/*
 * remote.c: remote stitching (paper 4.1): stitch ops with no data dependency between them,
 * in either direction and through any path (other stitch ops, compute ops), merge into one.
 *
 * The kernel graph's units are the stitch ops and the compute ops; a unit runs as a whole, so
 * anything that feeds one node of a stitch op precedes all of it. For every unit we keep the
 * set of stitch ops reachable from it as a bitset; two stitch ops are independent when neither
 * reaches the other, and merging independent ones cannot close a cycle. After a merge the
 * reachability of the merged op is the union, and every unit that reached either part now
 * reaches everything the merged op reaches. Kernels are tried in order, each absorbing every
 * later kernel that is still independent of it.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

typedef struct Reach {
    int32_t nk, nu, words;
    uint64_t *bits; /* nu rows of `words` words */
} Reach;

static uint64_t *row(Reach *r, int32_t u) { return r->bits + (size_t)u * (size_t)r->words; }
static bool has(Reach *r, int32_t u, int32_t k) { return row(r, u)[k >> 6] >> (k & 63) & 1; }
static void set(uint64_t *w, int32_t k) { w[k >> 6] |= (uint64_t)1 << (k & 63); }
static void clr(uint64_t *w, int32_t k) { w[k >> 6] &= ~((uint64_t)1 << (k & 63)); }

static void merge_into(Reach *r, int32_t i, int32_t j)
{
    uint64_t *ri = row(r, i), *rj = row(r, j);
    for (int32_t w = 0; w < r->words; w++)
        ri[w] |= rj[w];
    clr(ri, i);
    clr(ri, j);
    for (int32_t u = 0; u < r->nu; u++) {
        if (u == i)
            continue;
        uint64_t *ru = row(r, u);
        bool hit = has(r, u, i) || has(r, u, j);
        clr(ru, j);
        if (!hit)
            continue;
        set(ru, i);
        for (int32_t w = 0; w < r->words; w++)
            ru[w] |= ri[w];
        if (u < r->nk)
            clr(ru, u);
    }
}

/* unit[v] for each node v: the kernel that owns it, a compute node's own unit numbered from
 * the kernel count up, else -1. Returns the number of units. */
static int32_t fill_units(const Planner *pl, int32_t *unit)
{
    int32_t nu = pl->p->nkernel;
    for (int32_t v = 0; v < pl->n; v++) {
        if (pl->p->owner[v] >= 0)
            unit[v] = pl->p->owner[v];
        else if (astitch_op_class_of(gnode(pl->g, v)->op) == ASTITCH_CLASS_COMPUTE)
            unit[v] = nu++;
        else
            unit[v] = -1;
    }
    return nu;
}

/* r's rows (zeroed): the kernels each unit reaches. Kernels are atomic: a unit reaches a kernel
 * if any of its nodes feeds a unit from which that kernel is reachable. Unit edges, a
 * topological order (Kahn), then the closure in reverse order. */
static astitch_status fill_reach(const Planner *pl, const int32_t *unit, Reach *r)
{
    const astitch_graph *g = pl->g;
    int32_t nu = r->nu;
    int32_t *es = calloc((size_t)nu + 1, sizeof *es), *indeg = calloc((size_t)nu, sizeof *indeg);
    int32_t *ed = malloc((size_t)(g->noperand ? g->noperand : 1) * sizeof *ed);
    int32_t *order = malloc((size_t)nu * sizeof *order);
    if (!es || !indeg || !ed || !order) {
        free(es);
        free(indeg);
        free(ed);
        free(order);
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int32_t v = 0; v < pl->n; v++) {
            if (unit[v] < 0)
                continue;
            for (int32_t e = pl->ustart[v]; e < pl->ustart[v + 1]; e++) {
                int32_t w = unit[pl->use[e]];
                if (w < 0 || w == unit[v])
                    continue;
                if (pass == 0) {
                    es[unit[v] + 1]++;
                    indeg[w]++;
                } else {
                    ed[es[unit[v]]++] = w;
                }
            }
        }
        edges_pass_end(es, nu, pass);
    }
    int32_t qh = 0, qt = 0;
    for (int32_t u = 0; u < nu; u++)
        if (indeg[u] == 0)
            order[qt++] = u;
    while (qh < qt) {
        int32_t u = order[qh++];
        for (int32_t e = es[u]; e < es[u + 1]; e++)
            if (--indeg[ed[e]] == 0)
                order[qt++] = ed[e];
    }
    for (int32_t i = qt - 1; i >= 0; i--) {
        uint64_t *ru = row(r, order[i]);
        for (int32_t e = es[order[i]]; e < es[order[i] + 1]; e++) {
            int32_t w = ed[e];
            uint64_t *rw = row(r, w);
            for (int32_t x = 0; x < r->words; x++)
                ru[x] |= rw[x];
            if (w < r->nk)
                set(ru, w);
        }
    }
    free(es);
    free(indeg);
    free(ed);
    free(order);
    if (qt != nu)
        return ctx_fail(g->ctx, ASTITCH_ERR_INTERNAL, "planner: stitch scopes form a cycle");
    return ASTITCH_OK;
}

/* alias[k]: the kernel that kernel k merges into, k itself when none. Kernels in order, each
 * absorbing every later one still independent of it; r follows the merges. */
static void merge_independent(Reach *r, int32_t *alias)
{
    for (int32_t k = 0; k < r->nk; k++) {
        clr(row(r, k), k);
        alias[k] = k;
    }
    for (int32_t i = 0; i < r->nk; i++) {
        if (alias[i] != i)
            continue;
        for (int32_t j = i + 1; j < r->nk; j++) {
            if (alias[j] != j || has(r, i, j) || has(r, j, i))
                continue;
            merge_into(r, i, j);
            alias[j] = i;
        }
    }
}

/* Moves the ops of each merged kernel into the kernel alias names, then compacts the plan's
 * kernels and renumbers the owners; newid: scratch of a slot per kernel. False when out of
 * memory. */
static bool compact_kernels(astitch_plan *p, int32_t n, const int32_t *alias, int32_t *newid)
{
    int32_t nk = p->nkernel, nn = 0;
    for (int32_t k = 0; k < nk; k++)
        if (alias[k] == k)
            newid[k] = nn++;
    for (int32_t k = 0; k < nk; k++) {
        if (alias[k] == k)
            continue;
        PlanKernel *dst = &p->kernel[alias[k]], *src = &p->kernel[k];
        for (int32_t i = 0; i < src->nop; i++)
            if (!plan_kernel_add(dst, src->op[i].node))
                return false;
        plan_kernel_clear(src);
    }
    for (int32_t k = 0, w = 0; k < nk; k++)
        if (alias[k] == k)
            p->kernel[w++] = p->kernel[k];
    for (int32_t v = 0; v < n; v++)
        if (p->owner[v] >= 0)
            p->owner[v] = newid[alias[p->owner[v]]];
    p->nkernel = nn;
    return true;
}

astitch_status pass_remote(Planner *pl)
{
    int32_t nk = pl->p->nkernel;
    if (nk < 2)
        return ASTITCH_OK;
    int32_t *unit = malloc((size_t)pl->n * sizeof *unit);
    int32_t *alias = malloc((size_t)nk * sizeof *alias);
    Reach r = {nk, 0, (nk + 63) / 64, NULL};
    if (unit && alias) {
        r.nu = fill_units(pl, unit);
        r.bits = calloc((size_t)r.nu * (size_t)r.words, sizeof *r.bits);
    }
    astitch_status s = r.bits ? fill_reach(pl, unit, &r)
                              : ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    if (s == ASTITCH_OK) {
        merge_independent(&r, alias);
        /* unit is done with: its first nk slots take the kernels' new numbers */
        if (!compact_kernels(pl->p, pl->n, alias, unit))
            s = ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    }
    free(unit);
    free(r.bits);
    free(alias);
    return s;
}
