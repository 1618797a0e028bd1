/*
 * dot_lower.c: dots made what every target runs, a graph rewrite ahead of the pipeline.
 *
 * A dot runs as a compute op: on the GPU through cuBLASLt, as one strided-batched GEMM over its
 * operands where they lie (dot_gemm.h). Three kinds of dot are rewritten first:
 *
 * - An empty contraction (K = 0, the output not empty): the output is zeros, a broadcast
 *   constant that the kernels inline.
 * - An integer dot: cuBLASLt has no product of the integer dtypes a graph holds (its integer
 *   GEMMs take 8-bit operands), so it becomes the sum over K of a product, which astitch
 *   stitches like any other memory-intensive ops:
 *
 *     lhs' = reshape(transpose(lhs, [batch, free, contract]), [batch, free, K])
 *     rhs' = reshape(transpose(rhs, [batch, free, contract]), [batch, free, K])
 *     dot  = reduce_sum(broadcast(lhs') * broadcast(rhs'), last axis)
 *
 *   where both broadcasts fill [batch, lhs free, rhs free, K] (the dot's shape and K): a row
 *   reduction of rows of K products, none of them stored. Integer products and sums wrap, and
 *   the reference wraps its 64-bit sum to the dtype, so the values are the same bits. A dot
 *   whose shape has MAX_RANK axes (no room for K) stays a compute op.
 * - A float dot that is no single GEMM over its operands in memory (batch axes that do not
 *   collapse to one stride, say): its operands are transposed to [batch, free, contract] (lhs)
 *   and [batch, contract, free] (rhs), which is one, and the planner stitches each transpose
 *   into the kernel that makes the operand where it can.
 *
 * A transpose or reshape that would change nothing is left out. The rewritten graph is a copy
 * (the caller's graph is never changed): the result keeps the dot's name and place among the
 * outputs; the new nodes are named after it ("<dot>.lhs_t", "<dot>.zeros", ...).
 */
#include <stdio.h>

#include "passes/dot_gemm.h"
#include "passes/passes.h"

/* Whether dot v is rewritten: an empty contraction, an integer dot with room for K, a float
 * dot that is no single GEMM over its operands in memory. */
static bool lowered(const astitch_graph *g, int32_t v)
{
    const Node *n = gnode(g, v);
    if (n->op != ASTITCH_OP_DOT)
        return false;
    DotGemm gm;
    dot_gemm_layout(g, v, &gm);
    if (gm.kind == DOT_GEMM_ZEROS)
        return true;
    if (dtype_is_int(n->dtype))
        return n->shape.rank < MAX_RANK;
    return gm.kind == DOT_GEMM_NONE;
}

/* x, which stands for dot n in d, named as n. */
static astitch_node named_as(astitch_graph *d, astitch_node x, const Node *n)
{
    return x != ASTITCH_NO_NODE && astitch_set_name(d, x, n->name) == ASTITCH_OK ? x
                                                                               : ASTITCH_NO_NODE;
}

/* Operand `side` (0: lhs, 1: rhs) of src's dot v in d (mapped by map[]), transposed to
 * [batch, free, contract] or, with contract_first, [batch, contract, free]; with one_k the
 * contracting axes reshaped into one. ASTITCH_NO_NODE on failure (recorded on d). */
static astitch_node gather_operand(const astitch_graph *src, astitch_graph *d, int32_t v,
                                   const int32_t *map, int side, bool contract_first, bool one_k)
{
    const Node *n = gnode(src, v);
    astitch_node x = map[goperand(src, v, side)];
    const Shape *xs = &gnode(src, goperand(src, v, side))->shape;
    const int64_t *batch = side ? n->attr.dot.rhs_batch : n->attr.dot.lhs_batch;
    const int64_t *contract = side ? n->attr.dot.rhs_contract : n->attr.dot.lhs_contract;
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
    int64_t k = 1;
    for (int pass = 0; pass < 2; pass++) {
        if ((pass == 0) == contract_first) {
            for (int i = 0; i < dd->ncontract; i++, r++) {
                perm[r] = contract[i];
                k *= xs->dim[contract[i]];
                if (!one_k)
                    dims[rank++] = xs->dim[contract[i]];
            }
            if (one_k)
                dims[rank++] = k;
        } else {
            for (int i = 0; i < xs->rank; i++)
                if (!(used >> i & 1)) {
                    perm[r++] = i;
                    dims[rank++] = xs->dim[i];
                }
        }
    }
    char what[16];
    bool moved = false;
    for (int i = 0; i < xs->rank; i++)
        moved |= perm[i] != i;
    if (moved) {
        snprintf(what, sizeof what, "%s_t", side ? "rhs" : "lhs");
        x = graph_name_derived(d, src, astitch_transpose(d, x, perm), n->name, what);
    }
    if (x != ASTITCH_NO_NODE && rank != xs->rank) { /* K from none or several axes */
        snprintf(what, sizeof what, "%s_k", side ? "rhs" : "lhs");
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
    astitch_node l = gather_operand(src, d, v, map, 0, false, true);
    astitch_node r = gather_operand(src, d, v, map, 1, false, true);
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
    return named_as(d, sum, n);
}

/* Appends to d the zeros of src's dot v (K = 0), named as v. */
static astitch_node emit_zeros(const astitch_graph *src, astitch_graph *d, int32_t v)
{
    const Node *n = gnode(src, v);
    double zero = 0.0;
    astitch_node z = graph_name_derived(d, src, astitch_constant(d, n->dtype, 0, NULL, &zero, 1),
                                        n->name, "zero");
    astitch_node out = astitch_broadcast_in_dim(d, z, n->shape.rank, n->shape.dim, NULL);
    return named_as(d, out, n);
}

/* Appends to d src's float dot v over its operands transposed into one GEMM, named as v. */
static astitch_node emit_gemm(const astitch_graph *src, astitch_graph *d, int32_t v,
                              const int32_t *map)
{
    const Node *n = gnode(src, v);
    const astitch_dot_dims *dd = &n->attr.dot;
    const Shape *ls = &gnode(src, goperand(src, v, 0))->shape;
    astitch_node l = gather_operand(src, d, v, map, 0, false, false);
    astitch_node r = gather_operand(src, d, v, map, 1, true, false);
    astitch_dot_dims nd = {.nbatch = dd->nbatch, .ncontract = dd->ncontract};
    int lfree = ls->rank - dd->nbatch - dd->ncontract;
    for (int i = 0; i < dd->nbatch; i++)
        nd.lhs_batch[i] = nd.rhs_batch[i] = i;
    for (int i = 0; i < dd->ncontract; i++) {
        nd.lhs_contract[i] = dd->nbatch + lfree + i;
        nd.rhs_contract[i] = dd->nbatch + i;
    }
    astitch_node out = l == ASTITCH_NO_NODE || r == ASTITCH_NO_NODE ? ASTITCH_NO_NODE
                                                                     : astitch_dot(d, l, r, &nd);
    return named_as(d, out, n);
}

static astitch_node emit(const astitch_graph *src, astitch_graph *d, int32_t v,
                         const int32_t *map)
{
    DotGemm gm;
    dot_gemm_layout(src, v, &gm);
    if (gm.kind == DOT_GEMM_ZEROS)
        return emit_zeros(src, d, v);
    return dtype_is_int(gnode(src, v)->dtype) ? emit_sum(src, d, v, map)
                                              : emit_gemm(src, d, v, map);
}

astitch_status pass_dot_lower(const astitch_graph *g, astitch_graph **out)
{
    return graph_rewrite(g, lowered, emit, "dot lowering", out);
}
