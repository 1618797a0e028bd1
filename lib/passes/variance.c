/*
 * variance.c: one-pass variance, a graph rewrite ahead of the stitch pipeline.
 *
 * A sum of squared deviations
 *
 *     R = reduce_sum(C * C, A)      C = X - broadcast(m), m constant along the reduced axes A
 *
 * reads X twice when X's rows over A cannot stay in registers (column reductions, rows longer
 * than a resident row): once for whatever m comes from (the mean), then again for R, behind a
 * global barrier. With s the element of X at index 0 of every reduced axis (one per row),
 * D = X - s, S1 = sum(D), S2 = sum(D * D), t = s - m and N the elements per row,
 *
 *     sum((X - m)^2) = S2 + t * (2 S1 + N t)
 *
 * holds exactly for any m, and S1 and S2 read X in the same pass as the mean's own reduction.
 * The shift by a row's own element keeps every term at the scale of the row's spread rather
 * than of its mean (the textbook sum(x^2) - sum(x)^2 / N loses every digit on data far from
 * zero); the rewrite changes rounding only, and only of f32 values, where the kernels
 * accumulate in f32 anyway.
 *
 * The rewritten graph is a copy (the caller's graph is never changed): R keeps its name and
 * place in the outputs, parameters keep their order, and the nodes only R read (C * C, and C or
 * the broadcast when nothing else reads them) are dropped. The new nodes are named after R
 * ("<R>.shift", "<R>.s1", ...). Off with astitch_plan_options.one_pass_variance = false.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

/* What rewriting reduce R needs: its deviations' source X, the subtracted m (as the broadcast
 * reads it) and the reduced axes. */
typedef struct Match {
    int32_t x, m;
    uint32_t axes;
    int64_t n; /* elements per row */
} Match;

/* True when broadcast b repeats its operand along every axis in `axes` of its output and keeps
 * the operand's axes in order (so a reshape gives the per-row vector). */
static bool constant_along(const astitch_graph *g, int32_t b, uint32_t axes)
{
    const Node *bn = gnode(g, b);
    const Node *src = gnode(g, goperand(g, b, 0));
    for (int j = 0; j < src->shape.rank; j++) {
        int64_t o = bn->attr.dims[j];
        if (j > 0 && o <= bn->attr.dims[j - 1])
            return false;
        if ((axes >> o & 1) && src->shape.dim[j] != 1)
            return false;
    }
    return true;
}

/* Fills *mt when node r is a sum of squared deviations worth rewriting (see the head). */
static bool match(const astitch_graph *g, int32_t r, bool packing, bool long_rows, Match *mt)
{
    const Node *rn = gnode(g, r);
    if (rn->op != ASTITCH_OP_REDUCE || rn->attr.reduce != ASTITCH_REDUCE_SUM ||
        rn->dtype != ASTITCH_F32 || rn->attr.axes == 0)
        return false;
    int32_t sq = goperand(g, r, 0);
    if (gnode(g, sq)->op != ASTITCH_OP_MUL || goperand(g, sq, 0) != goperand(g, sq, 1))
        return false;
    int32_t c = goperand(g, sq, 0);
    if (gnode(g, c)->op != ASTITCH_OP_SUB)
        return false;
    int32_t x = goperand(g, c, 0), b = goperand(g, c, 1);
    if (gnode(g, b)->op != ASTITCH_OP_BROADCAST_IN_DIM || !constant_along(g, b, rn->attr.axes))
        return false;
    const Shape *xs = &gnode(g, x)->shape;
    if (packing && mapping_rows_may_reside(xs, rn->attr.axes, long_rows))
        return false; /* a resident row reads X once already */
    int64_t n = 1;
    for (int i = 0; i < xs->rank; i++)
        if (rn->attr.axes >> i & 1)
            n *= xs->dim[i];
    if (n < 2)
        return false;
    *mt = (Match){x, goperand(g, b, 0), rn->attr.axes, n};
    return true;
}

/* Builds the new graph and its names. */
typedef struct Rewrite {
    const astitch_graph *src;
    astitch_graph *dst;
    const char *base; /* the rewritten reduce's name */
} Rewrite;

static astitch_node named(Rewrite *rw, astitch_node v, const char *what)
{
    return graph_name_derived(rw->dst, rw->src, v, rw->base, what);
}

static astitch_node emit_one_pass(Rewrite *rw, int32_t r, const Match *mt, const int32_t *map)
{
    astitch_graph *d = rw->dst;
    const Shape *xs = &gnode(rw->src, mt->x)->shape, *rs = &gnode(rw->src, r)->shape;
    int64_t start[MAX_RANK] = {0}, limit[MAX_RANK], ident[MAX_RANK], axes[MAX_RANK];
    int naxes = 0;
    for (int i = 0; i < xs->rank; i++) {
        limit[i] = mt->axes >> i & 1 ? 1 : xs->dim[i];
        ident[i] = i;
        if (mt->axes >> i & 1)
            axes[naxes++] = i;
    }
    astitch_node x = map[mt->x];
    astitch_node shift = named(rw, astitch_slice(d, x, start, limit, NULL), "shift");
    astitch_node shift_b = named(rw, astitch_broadcast_in_dim(d, shift, xs->rank, xs->dim, ident),
                                 "shift_b");
    astitch_node dev = named(rw, astitch_binary(d, ASTITCH_OP_SUB, x, shift_b), "dev");
    astitch_node dev2 = named(rw, astitch_binary(d, ASTITCH_OP_MUL, dev, dev), "dev2");
    astitch_node s1 = named(rw, astitch_reduce(d, ASTITCH_REDUCE_SUM, dev, naxes, axes), "s1");
    astitch_node s2 = named(rw, astitch_reduce(d, ASTITCH_REDUCE_SUM, dev2, naxes, axes), "s2");
    astitch_node row_shift = named(rw, astitch_reshape(d, shift, rs->rank, rs->dim), "row_shift");
    astitch_node m = map[mt->m];
    if (!shape_equal(&gnode(rw->src, mt->m)->shape, rs))
        m = named(rw, astitch_reshape(d, m, rs->rank, rs->dim), "row_m");
    astitch_node t = named(rw, astitch_binary(d, ASTITCH_OP_SUB, row_shift, m), "t");
    double count = (double)mt->n;
    astitch_node n = named(rw, astitch_constant(d, ASTITCH_F32, 0, NULL, &count, 1), "n");
    astitch_node n_b = named(rw, astitch_broadcast_in_dim(d, n, rs->rank, rs->dim, NULL), "n_b");
    astitch_node nt = named(rw, astitch_binary(d, ASTITCH_OP_MUL, n_b, t), "nt");
    astitch_node s1x2 = named(rw, astitch_binary(d, ASTITCH_OP_ADD, s1, s1), "s1x2");
    astitch_node u = named(rw, astitch_binary(d, ASTITCH_OP_ADD, s1x2, nt), "u");
    astitch_node tu = named(rw, astitch_binary(d, ASTITCH_OP_MUL, t, u), "tu");
    astitch_node out = astitch_binary(d, ASTITCH_OP_ADD, s2, tu);
    if (out != ASTITCH_NO_NODE && astitch_set_name(d, out, gnode(rw->src, r)->name) != ASTITCH_OK)
        return ASTITCH_NO_NODE;
    return out;
}

/* Marks in live[] the nodes of g the outputs need once every matched reduce (is[r]) reads X
 * and m instead of its operand; parameters are always live. */
static void mark_live(const astitch_graph *g, const Match *mt, const bool *is, bool *live)
{
    for (int32_t i = 0; i < g->noutput; i++)
        live[g->output[i]] = true;
    for (int32_t v = g->nnode - 1; v >= 0; v--) {
        if (gnode(g, v)->op == ASTITCH_OP_PARAMETER)
            live[v] = true;
        if (!live[v])
            continue;
        if (is[v]) {
            live[mt[v].x] = live[mt[v].m] = true;
            continue;
        }
        for (int j = 0; j < gnode(g, v)->nin; j++)
            live[goperand(g, v, j)] = true;
    }
}

/* Copies g into rw->dst, rewriting every matched reduce. */
static astitch_status copy_rewritten(Rewrite *rw, const Match *mt, const bool *is,
                                     const bool *live, int32_t *map, int32_t *rewritten,
                                     int32_t *nrewritten)
{
    const astitch_graph *g = rw->src;
    astitch_graph *d = rw->dst;
    for (int32_t v = 0; v < g->nnode; v++) {
        map[v] = ASTITCH_NO_NODE;
        if (!live[v])
            continue;
        if (is[v]) {
            rw->base = gnode(g, v)->name;
            map[v] = emit_one_pass(rw, v, &mt[v], map);
            if (map[v] != ASTITCH_NO_NODE)
                rewritten[(*nrewritten)++] = map[v];
        } else {
            map[v] = graph_copy_mapped(d, g, v, map);
        }
        if (map[v] == ASTITCH_NO_NODE)
            break;
    }
    return graph_copy_finish(d, g, map, "one-pass variance");
}

astitch_status pass_variance(const astitch_graph *g, bool packing, bool long_rows,
                             astitch_graph **out, int32_t **rewritten, int32_t *nrewritten)
{
    *out = NULL;
    *rewritten = NULL;
    *nrewritten = 0;
    size_t n = (size_t)(g->nnode ? g->nnode : 1);
    Match *mt = calloc(n, sizeof *mt);
    bool *is = calloc(n, sizeof *is), *live = calloc(n, sizeof *live);
    int32_t *map = malloc(n * sizeof *map), *rw_ids = malloc(n * sizeof *rw_ids);
    astitch_status st = ASTITCH_OK;
    if (!mt || !is || !live || !map || !rw_ids) {
        st = ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "one-pass variance: out of memory");
        goto done;
    }
    int32_t found = 0;
    for (int32_t v = 0; v < g->nnode; v++)
        found += is[v] = match(g, v, packing, long_rows, &mt[v]);
    if (!found)
        goto done;
    mark_live(g, mt, is, live);
    Rewrite rw = {.src = g};
    if ((st = astitch_graph_create(g->ctx, &rw.dst)) != ASTITCH_OK)
        goto done;
    st = copy_rewritten(&rw, mt, is, live, map, rw_ids, nrewritten);
    if (st) {
        astitch_graph_destroy(rw.dst);
        *nrewritten = 0;
        goto done;
    }
    *out = rw.dst;
    *rewritten = rw_ids;
    rw_ids = NULL;
done:
    free(mt);
    free(is);
    free(live);
    free(map);
    free(rw_ids);
    return st;
}
