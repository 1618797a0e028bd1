/*
 * keepdim.c: a reduce reshaped to its kept dimensions becomes one reduce of that shape, a
 * graph rewrite ahead of the pipeline (fusion stitch and xla).
 *
 * A framework's sum(x, dim, keepdim=True) arrives as
 *
 *     R = reshape(D, S)     D = reduce(X, A)     S: D's shape with unit dimensions inserted
 *
 * When R is an output, D nothing else's, its kernel first combines D (split across blocks, by
 * atomics into scratch) and then copies it into R in a phase of its own behind a global barrier
 * (the bias gradients of a GPT-2 training step's backward: four such barriers in one region).
 * Where A is a leading or trailing run of X's axes, the same elements in the same order are
 *
 *     R = reduce(reshape(X, X'), A')     X' = [X's dims along A, then S]   (A leading)
 *                                        X' = [S, then X's dims along A]   (A trailing)
 *
 * with A' the positions of A's dimensions in X' (the reshape of X is free: it keeps X's element
 * order), so the reduce writes R itself. The rewritten graph is a copy (the caller's graph is
 * never changed): R keeps its name and place in the outputs, D is gone, X' is named
 * "<R>.keepdim_in"; parameters keep their order.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

/* The dimensions of s other than 1, into out; returns how many. */
static int squeezed(const Shape *s, int64_t *out)
{
    int n = 0;
    for (int i = 0; i < s->rank; i++)
        if (s->dim[i] != 1)
            out[n++] = s->dim[i];
    return n;
}

/* True when a and b hold the same dimensions apart from units (the same elements in the same
 * order, their reshape a view). */
static bool same_but_units(const Shape *a, const Shape *b)
{
    int64_t da[MAX_RANK], db[MAX_RANK];
    int na = squeezed(a, da), nb = squeezed(b, db);
    if (na != nb)
        return false;
    for (int i = 0; i < na; i++)
        if (da[i] != db[i])
            return false;
    return true;
}

/* The number k of reduced axes when `axes` are X's first k (leading, *leading = true) or last k
 * axes, else 0. */
static int run_of_axes(int rank, uint32_t axes, bool *leading)
{
    int k = 0;
    for (int i = 0; i < rank; i++)
        k += axes >> i & 1;
    uint32_t first = k ? (1u << k) - 1 : 0, last = first << (rank - k);
    if (k == 0 || (axes != first && axes != last))
        return 0;
    *leading = axes == first;
    return k;
}

/* True when node r is such an R (see the head): readers[] counts each node's readers, output
 * marks the outputs. (siblings_alike then keeps shared mappings.) */
static bool match(const astitch_graph *g, int32_t r, const int32_t *readers, const bool *output)
{
    const Node *rn = gnode(g, r);
    if (rn->op != ASTITCH_OP_RESHAPE || !output[r])
        return false;
    int32_t d = goperand(g, r, 0);
    const Node *dn = gnode(g, d);
    if (dn->op != ASTITCH_OP_REDUCE || output[d] || readers[d] != 1)
        return false;
    const Shape *xs = &gnode(g, goperand(g, d, 0))->shape;
    bool leading;
    int k = run_of_axes(xs->rank, dn->attr.axes, &leading);
    return k > 0 && k + rn->shape.rank <= MAX_RANK && same_but_units(&rn->shape, &dn->shape);
}

/* X' and A' of matched R (the head): X' into *xs, A' into axes (returns how many). */
static int keepdim_shape(const astitch_graph *g, int32_t r, Shape *xs, int64_t *axes)
{
    const Node *rn = gnode(g, r), *dn = gnode(g, goperand(g, r, 0));
    const Shape *in = &gnode(g, goperand(g, goperand(g, r, 0), 0))->shape;
    bool leading;
    int k = run_of_axes(in->rank, dn->attr.axes, &leading), naxes = 0;
    xs->rank = k + rn->shape.rank;
    for (int i = 0; i < in->rank; i++) /* the reduced dims, where they go in X' */
        if (dn->attr.axes >> i & 1) {
            int at = leading ? naxes : rn->shape.rank + naxes;
            axes[naxes++] = at;
            xs->dim[at] = in->dim[i];
        }
    for (int i = 0; i < rn->shape.rank; i++)
        xs->dim[leading ? k + i : i] = rn->shape.dim[i];
    return naxes;
}

/* Whether reduces d and e (nodes of g) share a mapping after the rewrite as before: sched_derive
 * relates two reduces only over equal input shapes, so a matched R whose reduce has a sibling of
 * the same input shape is rewritten only when the sibling is rewritten alike (r_of[]: the
 * matched R of each reduce, or -1). */
static bool siblings_alike(const astitch_graph *g, int32_t d, const int32_t *r_of)
{
    const Shape *in = &gnode(g, goperand(g, d, 0))->shape;
    Shape mine;
    int64_t axes[MAX_RANK], other_axes[MAX_RANK];
    int na = keepdim_shape(g, r_of[d], &mine, axes);
    for (int32_t e = 0; e < g->nnode; e++) {
        if (e == d || gnode(g, e)->op != ASTITCH_OP_REDUCE ||
            !shape_equal(&gnode(g, goperand(g, e, 0))->shape, in))
            continue;
        if (r_of[e] < 0)
            return false;
        Shape theirs;
        int nb = keepdim_shape(g, r_of[e], &theirs, other_axes);
        if (!shape_equal(&mine, &theirs) || na != nb ||
            memcmp(axes, other_axes, (size_t)na * sizeof axes[0]))
            return false;
    }
    return true;
}

/* Appends reduce(reshape(X, X'), A') for the matched R (the head), named R. */
static astitch_node emit_keepdim(astitch_graph *d, const astitch_graph *g, int32_t r,
                                 const int32_t *map)
{
    const Node *rn = gnode(g, r), *dn = gnode(g, goperand(g, r, 0));
    int32_t x = goperand(g, goperand(g, r, 0), 0);
    Shape xs;
    int64_t axes[MAX_RANK];
    int k = keepdim_shape(g, r, &xs, axes);
    astitch_node in = graph_name_derived(d, g, astitch_reshape(d, map[x], xs.rank, xs.dim),
                                         rn->name, "keepdim_in");
    astitch_node out = astitch_reduce(d, dn->attr.reduce, in, k, axes);
    if (out != ASTITCH_NO_NODE && astitch_set_name(d, out, rn->name) != ASTITCH_OK)
        return ASTITCH_NO_NODE;
    return out;
}

astitch_status pass_keepdim(const astitch_graph *g, astitch_graph **out, int32_t *ids,
                            int32_t nids, int32_t *ids2, int32_t nids2)
{
    *out = NULL;
    size_t n = (size_t)(g->nnode ? g->nnode : 1);
    int32_t *readers = calloc(n, sizeof *readers), *map = malloc(n * sizeof *map);
    int32_t *r_of = malloc(n * sizeof *r_of);
    bool *output = calloc(n, sizeof *output), *is = calloc(n, sizeof *is);
    bool *gone = calloc(n, sizeof *gone);
    astitch_status st = ASTITCH_OK;
    if (!readers || !map || !r_of || !output || !is || !gone) {
        st = ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "reduces to kept dimensions: out of memory");
        goto done;
    }
    for (int32_t v = 0; v < g->nnode; v++)
        for (int j = 0; j < gnode(g, v)->nin; j++)
            readers[goperand(g, v, j)]++;
    for (int32_t i = 0; i < g->noutput; i++)
        output[g->output[i]] = true;
    for (int32_t v = 0; v < g->nnode; v++) /* r_of: the matched R of each reduce, or -1 */
        r_of[v] = -1;
    for (int32_t v = 0; v < g->nnode; v++)
        if (match(g, v, readers, output))
            r_of[goperand(g, v, 0)] = v;
    for (bool changed = true; changed;) { /* until no sibling stops a rewrite */
        changed = false;
        for (int32_t v = 0; v < g->nnode; v++)
            if (r_of[v] >= 0 && !siblings_alike(g, v, r_of)) {
                r_of[v] = -1;
                changed = true;
            }
    }
    int32_t found = 0;
    for (int32_t v = 0; v < g->nnode; v++)
        if (r_of[v] >= 0) {
            is[r_of[v]] = gone[v] = true;
            found++;
        }
    if (!found)
        goto done;
    astitch_graph *d = NULL;
    if ((st = astitch_graph_create(g->ctx, &d)) != ASTITCH_OK)
        goto done;
    for (int32_t v = 0; v < g->nnode; v++) {
        map[v] = ASTITCH_NO_NODE;
        if (gone[v]) /* a matched R's reduce: R's rewrite replaces it */
            continue;
        map[v] = is[v] ? emit_keepdim(d, g, v, map) : graph_copy_mapped(d, g, v, map);
        if (map[v] == ASTITCH_NO_NODE)
            break;
    }
    st = graph_copy_finish(d, g, map, "reduces to kept dimensions");
    if (st) {
        astitch_graph_destroy(d);
        goto done;
    }
    for (int32_t i = 0; i < nids; i++)
        ids[i] = map[ids[i]];
    for (int32_t i = 0; i < nids2; i++)
        ids2[i] = map[ids2[i]];
    *out = d;
done:
    free(readers);
    free(map);
    free(r_of);
    free(output);
    free(is);
    free(gone);
    return st;
}
