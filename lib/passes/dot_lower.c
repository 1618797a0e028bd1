/*
 * dot_lower.c: integer dots as astitch's own ops, a graph rewrite ahead of the pipeline.
 *
 * A dot runs as a compute op: on the GPU through cuBLASLt, which has no integer product of
 * the dtypes a graph holds (its integer GEMMs take 8-bit operands). An integer dot is instead
 * the sum over K of a product, which astitch stitches like any other memory-intensive ops:
 *
 *     lhs' = reshape(transpose(lhs, [batch, free, contract]), [batch, free, K])
 *     rhs' = reshape(transpose(rhs, [batch, free, contract]), [batch, free, K])
 *     dot  = reduce_sum(broadcast(lhs') * broadcast(rhs'), last axis)
 *
 * where both broadcasts fill [batch, lhs free, rhs free, K] (the dot's shape and K): a row
 * reduction of rows of K products, none of them stored. Integer products and sums wrap, and
 * the reference wraps its 64-bit sum to the dtype, so the values are the same bits. A transpose
 * or reshape that would change nothing is left out. A dot whose shape has MAX_RANK axes (no
 * room for K) stays a compute op.
 *
 * The rewritten graph is a copy (the caller's graph is never changed): the sum keeps the dot's
 * name and place among the outputs; the new nodes are named after it ("<dot>.lhs_t", ...).
 */
#include <stdlib.h>

#include "passes/passes.h"

static bool lowered(const astitch_graph *g, int32_t v)
{
    const Node *n = gnode(g, v);
    return n->op == ASTITCH_OP_DOT && dtype_is_int(n->dtype) && n->shape.rank < MAX_RANK;
}

/* Operand x of dot n (its axes batch[], contract[]) as [batch, free, K] in d: ASTITCH_NO_NODE
 * on failure (recorded on d). */
static astitch_node gather_operand(astitch_graph *d, const astitch_graph *src, const Node *n,
                                   astitch_node x, const Shape *xs, const int64_t *batch,
                                   const int64_t *contract, const char *side)
{
    const astitch_dot_dims *dd = &n->attr.dot;
    int64_t perm[MAX_RANK], dims[MAX_RANK];
    uint32_t used = 0;
    int r = 0, rank = 0;
    for (int i = 0; i < dd->nbatch; i++, r++) {
        used |= 1u << batch[i];
        perm[r] = batch[i];
        dims[rank++] = xs->dim[batch[i]];
    }
    for (int i = 0; i < dd->ncontract; i++)
        used |= 1u << contract[i];
    for (int i = 0; i < xs->rank; i++)
        if (!(used >> i & 1)) {
            perm[r++] = i;
            dims[rank++] = xs->dim[i];
        }
    int64_t k = 1;
    for (int i = 0; i < dd->ncontract; i++, r++) {
        perm[r] = contract[i];
        k *= xs->dim[contract[i]];
    }
    dims[rank++] = k;
    char what[16];
    bool moved = false;
    for (int i = 0; i < xs->rank; i++)
        moved |= perm[i] != i;
    if (moved) {
        snprintf(what, sizeof what, "%s_t", side);
        x = graph_name_derived(d, src, astitch_transpose(d, x, perm), n->name, what);
    }
    if (x != ASTITCH_NO_NODE && rank != xs->rank) { /* K from none or several axes */
        snprintf(what, sizeof what, "%s_k", side);
        x = graph_name_derived(d, src, astitch_reshape(d, x, rank, dims), n->name, what);
    }
    return x;
}

/* Appends to d the product and sum that replace src's dot v (operands mapped by map[]);
 * returns the sum, named as v. */
static astitch_node emit_sum(const astitch_graph *src, astitch_graph *d, int32_t v,
                             const int32_t *map)
{
    const Node *n = gnode(src, v);
    const astitch_dot_dims *dd = &n->attr.dot;
    const Shape *ls = &gnode(src, goperand(src, v, 0))->shape;
    const Shape *rs = &gnode(src, goperand(src, v, 1))->shape;
    astitch_node l = gather_operand(d, src, n, map[goperand(src, v, 0)], ls, dd->lhs_batch,
                                    dd->lhs_contract, "lhs");
    astitch_node r = gather_operand(d, src, n, map[goperand(src, v, 1)], rs, dd->rhs_batch,
                                    dd->rhs_contract, "rhs");
    if (l == ASTITCH_NO_NODE || r == ASTITCH_NO_NODE)
        return ASTITCH_NO_NODE;
    /* the product's space: the dot's axes, then K */
    int rank = n->shape.rank + 1, nb = dd->nbatch;
    int nl = ls->rank - nb - dd->ncontract, nr = rs->rank - nb - dd->ncontract;
    int64_t dims[MAX_RANK], lmap[MAX_RANK], rmap[MAX_RANK];
    for (int i = 0; i < n->shape.rank; i++)
        dims[i] = n->shape.dim[i];
    dims[rank - 1] = 1;
    for (int i = 0; i < dd->ncontract; i++)
        dims[rank - 1] *= ls->dim[dd->lhs_contract[i]];
    for (int i = 0; i < nb; i++)
        lmap[i] = rmap[i] = i;
    for (int i = 0; i < nl; i++)
        lmap[nb + i] = nb + i;
    for (int i = 0; i < nr; i++)
        rmap[nb + i] = nb + nl + i;
    lmap[nb + nl] = rmap[nb + nr] = rank - 1;
    astitch_node lb = graph_name_derived(d, src, astitch_broadcast_in_dim(d, l, rank, dims, lmap),
                                         n->name, "lhs_b");
    astitch_node rb = graph_name_derived(d, src, astitch_broadcast_in_dim(d, r, rank, dims, rmap),
                                         n->name, "rhs_b");
    astitch_node prod = graph_name_derived(d, src, astitch_binary(d, ASTITCH_OP_MUL, lb, rb),
                                           n->name, "product");
    int64_t k_axis = rank - 1;
    astitch_node sum = astitch_reduce(d, ASTITCH_REDUCE_SUM, prod, 1, &k_axis);
    if (sum != ASTITCH_NO_NODE && astitch_set_name(d, sum, n->name) != ASTITCH_OK)
        return ASTITCH_NO_NODE;
    return sum;
}

astitch_status pass_dot_lower(const astitch_graph *g, astitch_graph **out)
{
    *out = NULL;
    int32_t count = 0;
    for (int32_t v = 0; v < g->nnode; v++)
        count += lowered(g, v);
    if (!count)
        return ASTITCH_OK;
    int32_t *map = malloc((size_t)g->nnode * sizeof *map);
    if (!map)
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "dot lowering: out of memory");
    astitch_graph *d = NULL;
    astitch_status st = astitch_graph_create(g->ctx, &d);
    for (int32_t v = 0; !st && v < g->nnode; v++) {
        map[v] = lowered(g, v) ? emit_sum(g, d, v, map) : graph_copy_mapped(d, g, v, map);
        if (map[v] == ASTITCH_NO_NODE)
            break;
    }
    if (!st)
        st = graph_copy_finish(d, g, map, "integer dot lowering");
    free(map);
    if (st) {
        astitch_graph_destroy(d);
        return st;
    }
    *out = d;
    return ASTITCH_OK;
}
