/*
 * scope.c: stitch-scope identification (paper 4.1).
 *
 * fusion=stitch: a breadth-first search from each not yet clustered memory-intensive op grows a
 * cluster over its operand and consumer edges, through memory-intensive ops only (parameters,
 * compute ops and inlined constants bound it). An op joins only if the cluster stays convex: no
 * path may leave the cluster and come back (through a compute op or another cluster), which
 * would make the stitch op and that path depend on each other. Node ids are a topological order
 * and a finished cluster is entered as a whole, so the search for such a path stops at ids that
 * neither reach the cluster nor a finished cluster's span of ids that might (limits in grow).
 *
 * fusion=none: one kernel per memory-intensive op.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

typedef struct Scope {
    Planner *pl;
    int32_t *cl;     /* node -> cluster id, -1 */
    int32_t *mstart; /* members of cluster c: mem[mstart[c] .. mstart[c + 1]) */
    int32_t *cseen;  /* cluster -> epoch in which a search entered it */
    int32_t *stack;
    int32_t *mem;    /* members of the clusters, in order; the current one at the end */
    int32_t *span_lo, *span_hi; /* the finished clusters' id spans, overlapping ones merged,
                                 * ascending: nspan disjoint spans */
    int32_t nspan;
    int32_t lo, hi;  /* the cluster being grown: a search backward (forward) never needs an id
                      * below lo (above hi) */
} Scope;

static void push(Scope *s, int32_t *sp, int32_t y)
{
    Planner *pl = s->pl;
    if (pl->stamp[y] == pl->epoch)
        return;
    pl->stamp[y] = pl->epoch;
    s->stack[(*sp)++] = y;
    int32_t d = s->cl[y];
    if (d < 0 || s->cseen[d] == pl->epoch)
        return;
    s->cseen[d] = pl->epoch; /* entering a finished cluster reaches all of it */
    for (int32_t i = s->mstart[d]; i < s->mstart[d + 1]; i++)
        if (pl->stamp[s->mem[i]] != pl->epoch) {
            pl->stamp[s->mem[i]] = pl->epoch;
            s->stack[(*sp)++] = s->mem[i];
        }
}

/* Is there a path from node v to cluster c (forward: through consumers; backward: through
 * operands) that starts outside c? */
static bool path_to_cluster(Scope *s, int32_t v, int32_t c, bool forward)
{
    Planner *pl = s->pl;
    const astitch_graph *g = pl->g;
    int32_t sp = 0;
    pl->epoch++;
    pl->stamp[v] = pl->epoch;
    s->stack[sp++] = v;
    while (sp > 0) {
        int32_t x = s->stack[--sp];
        int32_t cnt = forward ? pl->ustart[x + 1] - pl->ustart[x] : gnode(g, x)->nin;
        for (int32_t i = 0; i < cnt; i++) {
            int32_t y = forward ? pl->use[pl->ustart[x] + i] : goperand(g, x, (int)i);
            if (s->cl[y] == c) {
                if (x != v)
                    return true; /* reached c through an outside node */
                continue;
            }
            if (forward ? y > s->hi : y < s->lo)
                continue;
            push(s, &sp, y);
        }
    }
    return false;
}

static bool can_join(Scope *s, int32_t v, int32_t c)
{
    return !path_to_cluster(s, v, c, true) && !path_to_cluster(s, v, c, false);
}

static bool is_member_class(const Planner *pl, int32_t v)
{
    return plan_is_owned_class(pl->g, v, pl->is_output);
}

/* Records the id span [lo, hi] of a finished cluster. Seeds ascend and every member-class
 * node below a seed is clustered before it, so a cluster's lowest id is its seed: spans arrive
 * in ascending order of their low ends and merge with the last one alone. */
static void add_span(Scope *s, int32_t lo, int32_t hi)
{
    int32_t k = s->nspan - 1;
    if (k >= 0 && lo <= s->span_hi[k]) {
        if (hi > s->span_hi[k])
            s->span_hi[k] = hi;
        return;
    }
    s->span_lo[++k] = lo;
    s->span_hi[k] = hi;
    s->nspan = k + 1;
}

/* Grows cluster c from seed; its members are appended to s->mem from s->mstart[c]. Edges go
 * to higher ids, except that entering a finished cluster reaches all of its span (merged
 * spans included). Forward from y above c's highest id and above every finished span, no id
 * of c is reachable: hi. Backward, c's ids are at least seed, and from y below seed and below
 * the one span that may reach up to seed (only the last can) nothing reaches seed: lo. */
static void grow(Scope *s, int32_t seed, int32_t c)
{
    Planner *pl = s->pl;
    const astitch_graph *g = pl->g;
    int32_t qh = s->mstart[c], qt = qh;
    int32_t last = s->nspan - 1, fin_hi = last >= 0 ? s->span_hi[last] : -1;
    s->lo = last >= 0 && s->span_hi[last] >= seed ? s->span_lo[last] : seed;
    s->hi = seed > fin_hi ? seed : fin_hi;
    int32_t top = seed;
    s->cl[seed] = c;
    s->mem[qt++] = seed;
    s->mstart[c + 1] = qt;
    while (qh < qt) {
        int32_t u = s->mem[qh++];
        int32_t nin = gnode(g, u)->nin;
        int32_t nuse = pl->ustart[u + 1] - pl->ustart[u];
        for (int32_t i = 0; i < nin + nuse; i++) {
            int32_t w = i < nin ? goperand(g, u, (int)i) : pl->use[pl->ustart[u] + i - nin];
            if (s->cl[w] >= 0 || !is_member_class(pl, w))
                continue;
            /* a source owned as a graph output stays alone: it is not a memory-intensive op */
            if (astitch_op_class_of(gnode(g, w)->op) == ASTITCH_CLASS_SOURCE)
                continue;
            if (!can_join(s, w, c))
                continue;
            s->cl[w] = c;
            s->mem[qt++] = w;
            s->mstart[c + 1] = qt;
            if (w > top)
                top = w;
            if (w > s->hi)
                s->hi = w;
        }
    }
    add_span(s, seed, top);
}

static astitch_status make_kernels(Planner *pl, const int32_t *cl, int32_t ncl)
{
    astitch_plan *p = pl->p;
    p->kernel = calloc((size_t)(ncl ? ncl : 1), sizeof *p->kernel);
    if (!p->kernel)
        return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    p->nkernel = ncl;
    for (int32_t v = 0; v < pl->n; v++) {
        p->owner[v] = cl[v];
        if (cl[v] >= 0 && !plan_kernel_add(&p->kernel[cl[v]], v))
            return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    }
    return ASTITCH_OK;
}

astitch_status pass_scope(Planner *pl)
{
    int32_t n = pl->n;
    size_t sz = (size_t)n + 1;
    Scope s = {pl, malloc(sz * sizeof(int32_t)), calloc(sz + 1, sizeof(int32_t)),
               calloc(sz, sizeof(int32_t)), malloc(sz * sizeof(int32_t)),
               malloc(sz * sizeof(int32_t)), malloc(sz * sizeof(int32_t)),
               malloc(sz * sizeof(int32_t)), 0, 0, 0};
    astitch_status st = ASTITCH_OK;
    if (!s.cl || !s.mstart || !s.cseen || !s.stack || !s.mem || !s.span_lo || !s.span_hi) {
        st = ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
        goto done;
    }
    int32_t ncl = 0;
    for (int32_t v = 0; v < n; v++)
        s.cl[v] = -1;
    for (int32_t v = 0; v < n; v++) {
        if (s.cl[v] >= 0 || !is_member_class(pl, v))
            continue;
        if (pl->p->opt.fusion == ASTITCH_FUSION_NONE ||
            astitch_op_class_of(gnode(pl->g, v)->op) == ASTITCH_CLASS_SOURCE) {
            s.cl[v] = ncl;
            s.mem[s.mstart[ncl]] = v;
            s.mstart[ncl + 1] = s.mstart[ncl] + 1;
            add_span(&s, v, v);
            ncl++;
            continue;
        }
        grow(&s, v, ncl++);
    }
    st = make_kernels(pl, s.cl, ncl);
done:
    free(s.cl);
    free(s.mstart);
    free(s.cseen);
    free(s.stack);
    free(s.mem);
    free(s.span_lo);
    free(s.span_hi);
    return st;
}
