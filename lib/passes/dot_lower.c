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
 * - A float dot that is one GEMM but reads an operand through a reshape that only merges or
 *   splits the free axes ahead of the contracting ones (x [batch, seq, hidden] as
 *   [batch * seq, hidden]: reshape_source): it reads the reshape's source instead, which holds
 *   the same elements at the same places, and its product is reshaped back to the dot's
 *   shape, so no kernel copies x into a reshaped tensor for the GEMM alone. Only where the
 *   dot's readers take that reshape as a view: not an output, no compute op.
 *
 * A transpose or reshape that would change nothing is left out. The rewritten graph is a copy
 * (the caller's graph is never changed): the result keeps the dot's name and place among the
 * outputs; the new nodes are named after it ("<dot>.lhs_t", "<dot>.zeros", ...).
 */
#include <stdio.h>

#include "passes/dot_gemm.h"
#include "passes/passes.h"

/* Whether node v is a graph output or an operand of a compute op (dot, custom), which read
 * it from memory as it lies. */
static bool read_as_tensor(const astitch_graph *g, int32_t v)
{
    for (int32_t i = 0; i < g->noutput; i++)
        if (g->output[i] == v)
            return true;
    for (int32_t u = v + 1; u < g->nnode; u++) {
        const Node *n = gnode(g, u);
        for (int i = 0; (n->op == ASTITCH_OP_DOT || n->op == ASTITCH_OP_CUSTOM) && i < n->nin; i++)
            if (goperand(g, u, i) == v)
                return true;
    }
    return false;
}

/* The node under operand `side` of float dot v (no batch axes) that the GEMM can read in its
 * place, or -1: the operand is a reshape (of reshapes) of it that keeps the contracting axes
 * as the trailing ones of both, in order, and merges or splits only the free axes ahead of
 * them (x [batch, seq, hidden] read as [batch * seq, hidden]). Row-major, the source then
 * holds the operand's elements at the same places. */
static int32_t reshape_source(const astitch_graph *g, int32_t v, int side)
{
    const Node *n = gnode(g, v);
    const astitch_dot_dims *dd = &n->attr.dot;
    const int64_t *contract = side ? dd->rhs_contract : dd->lhs_contract;
    int32_t r = goperand(g, v, side);
    const Shape *rs = &gnode(g, r)->shape;
    int nc = dd->ncontract;
    for (int i = 0; i < nc; i++)
        if (contract[i] != rs->rank - nc + i)
            return -1;
    int32_t src = -1;
    for (int32_t at = r; gnode(g, at)->op == ASTITCH_OP_RESHAPE;) {
        at = goperand(g, at, 0);
        const Shape *xs = &gnode(g, at)->shape;
        bool keeps = xs->rank > nc;
        for (int i = 0; keeps && i < nc; i++)
            keeps = xs->dim[xs->rank - nc + i] == rs->dim[rs->rank - nc + i];
        if (!keeps)
            break;
        src = at;
    }
    if (src < 0)
        return -1;
    /* the output gains the source's free axes in place of the operand's */
    const Node *other = gnode(g, goperand(g, v, 1 - side));
    int rank = gnode(g, src)->shape.rank - nc + other->shape.rank - nc;
    return rank <= MAX_RANK ? src : -1;
}

/* Whether float dot v, one GEMM over its operands, reads an operand that is a reshape of a
 * tensor the GEMM can read instead (reshape_source), where v itself is read only by ops that
 * take the reshape of its output back as a view (not an output, no compute op). */
static bool through_reshape(const astitch_graph *g, int32_t v)
{
    const Node *n = gnode(g, v);
    if (n->op != ASTITCH_OP_DOT || dtype_is_int(n->dtype) || n->attr.dot.nbatch > 0 ||
        (reshape_source(g, v, 0) < 0 && reshape_source(g, v, 1) < 0))
        return false;
    DotGemm gm;
    dot_gemm_layout(g, v, &gm);
    return gm.kind == DOT_GEMM_GEMM && !read_as_tensor(g, v);
}

/* Whether dot v is rewritten: an empty contraction, an integer dot with room for K, a float
 * dot that is no single GEMM over its operands in memory, one that reads through a reshape. */
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
    return gm.kind == DOT_GEMM_NONE || through_reshape(g, v);
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

/* Appends to d src's dot v over the reshape sources of its operands (through_reshape), then
 * the reshape of that product to v's shape, named as v. */
static astitch_node emit_through(const astitch_graph *src, astitch_graph *d, int32_t v,
                                 const int32_t *map)
{
    const Node *n = gnode(src, v);
    astitch_dot_dims nd = n->attr.dot;
    astitch_node side[2];
    for (int s = 0; s < 2; s++) {
        int32_t x = reshape_source(src, v, s);
        side[s] = map[x >= 0 ? x : goperand(src, v, s)];
        int64_t *contract = s ? nd.rhs_contract : nd.lhs_contract;
        for (int i = 0; x >= 0 && i < nd.ncontract; i++) /* the trailing axes, in order */
            contract[i] = gnode(src, x)->shape.rank - nd.ncontract + i;
    }
    astitch_node dot = graph_name_derived(d, src, astitch_dot(d, side[0], side[1], &nd), n->name,
                                          "source");
    astitch_node out = dot == ASTITCH_NO_NODE ? ASTITCH_NO_NODE
                                              : astitch_reshape(d, dot, n->shape.rank, n->shape.dim);
    return named_as(d, out, n);
}

static astitch_node emit(const astitch_graph *src, astitch_graph *d, int32_t v,
                         const int32_t *map)
{
    DotGemm gm;
    dot_gemm_layout(src, v, &gm);
    if (gm.kind == DOT_GEMM_ZEROS)
        return emit_zeros(src, d, v);
    if (dtype_is_int(gnode(src, v)->dtype))
        return emit_sum(src, d, v, map);
    return gm.kind == DOT_GEMM_GEMM ? emit_through(src, d, v, map) : emit_gemm(src, d, v, map);
}

astitch_status pass_dot_lower(const astitch_graph *g, astitch_graph **out)
{
    return graph_rewrite(g, lowered, emit, "dot lowering", out);
}
