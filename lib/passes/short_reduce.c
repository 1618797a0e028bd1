/*
 * short_reduce.c: a reduce over a few elements per output, not along the innermost axis,
 * becomes element-wise slices; a graph rewrite ahead of the pipeline (fusion stitch).
 *
 * A reduce R = reduce(X, A) whose reduced axes hold K <= SHORT_REDUCE_MAX elements per output
 * (a top-2 mixture-of-experts combine summing [2, T, H], a split-attention sum over a radix of
 * 2, a mean over 12 heads) is planned as a column reduction: a thread per output walking K
 * single elements, a block barrier and a shared buffer before its readers, 2 bytes an access
 * for f16 and bf16. As K slices of X,
 *
 *     R = op(...op(op(slice_0, slice_1), slice_2)..., slice_K-1)
 *     slice_k = reshape(slice(X, k along A), R's shape)
 *
 * (op: add, max, min, mul, or, and for sum, max, min, prod, any, all) every
 * output is an element-wise value read in 16-byte runs (measured on an H200, bench/RESULTS.md,
 * *Survey 6*: the top-2 combine of [2, 16384, 4096] bf16 277 -> 96 us). f16 and bf16 sums and
 * products take their slices in f32 and round once, as the reduce does.
 *
 * Matched: 1 <= K <= SHORT_REDUCE_MAX, X with elements, A not holding X's innermost axis of
 * extent above 1 (a slice then keeps X's rows as runs), and X's cone in its own space (the ops
 * with X's element count that feed X through memory-intensive ops, X included) read by nothing
 * but the cone and R, no output among them: the slices then read each element of the cone once.
 * Where the cone is read elsewhere (a softmax over a short middle axis reads its exponentials
 * for the sum and for the quotient) the reduce is left to the column mapping, which keeps one
 * group over the space. Nor is R rewritten where its element-wise readers read a value made
 * from a reduce of fewer elements than R (a masked mean pooling over 16 tokens divides by the
 * mask's row sums): that reduce's short rows would become the dominant of R's slices.
 *
 * The rewritten graph is a copy (the caller's graph is never changed): R keeps its name and
 * place among the outputs, the new nodes are named after it ("<R>.slice<k>", "<R>.part<k>",
 * ...); parameters keep their order.
 */
#include <stdio.h>
#include <stdlib.h>

#include "passes/passes.h"

/* Elements per output of the largest reduce rewritten: measured at 2, 4 and 12 (a mean over 12
 * heads of rows of 197 f32, read as single elements: 21.4 -> 20.4 us). */
enum { SHORT_REDUCE_MAX = 16 };

/* Readers of every node (graph_readers): node v's are who[at[v] .. at[v + 1]). */
typedef struct Readers {
    int32_t *at, *who;
} Readers;

/* Elements per output of reduce r (K), or 0 when r is not a reduce. */
static int64_t reduced_elements(const astitch_graph *g, int32_t r)
{
    const Node *n = gnode(g, r);
    if (n->op != ASTITCH_OP_REDUCE)
        return 0;
    const Shape *xs = &gnode(g, goperand(g, r, 0))->shape;
    int64_t k = 1;
    for (int i = 0; i < xs->rank; i++)
        if (n->attr.axes >> i & 1)
            k *= xs->dim[i];
    return k;
}

/* Whether the reduced axes of r leave X's innermost axis of extent above 1. */
static bool keeps_innermost(const astitch_graph *g, int32_t r)
{
    const Shape *xs = &gnode(g, goperand(g, r, 0))->shape;
    for (int i = xs->rank - 1; i >= 0; i--)
        if (xs->dim[i] > 1)
            return !(gnode(g, r)->attr.axes >> i & 1);
    return true;
}

/* Whether X's cone (see the head) is read by nothing but itself and r: marks the cone in
 * mark[] with stamp, walking with stack[] (nnode entries). */
static bool cone_private(const astitch_graph *g, int32_t r, const Readers *rd, const bool *output,
                         int32_t *mark, int32_t stamp, int32_t *stack)
{
    int32_t x = goperand(g, r, 0), top = 0, first = 0;
    int64_t space = shape_elements(&gnode(g, x)->shape);
    stack[top++] = x;
    mark[x] = stamp;
    while (top > first) { /* stack[] keeps every cone node: first .. top are yet to walk */
        int32_t v = stack[first++];
        for (int j = 0; j < gnode(g, v)->nin; j++) {
            int32_t u = goperand(g, v, j);
            astitch_op_class c = astitch_op_class_of(gnode(g, u)->op);
            if (mark[u] == stamp || c == ASTITCH_CLASS_SOURCE || c == ASTITCH_CLASS_COMPUTE ||
                shape_elements(&gnode(g, u)->shape) != space)
                continue;
            mark[u] = stamp;
            stack[top++] = u;
        }
    }
    for (int32_t i = 0; i < top; i++) {
        int32_t v = stack[i];
        if (output[v])
            return false;
        for (int32_t e = rd->at[v]; e < rd->at[v + 1]; e++)
            if (rd->who[e] != r && mark[rd->who[e]] != stamp)
                return false;
    }
    return true;
}

/* Whether the values R's element-wise readers make (its forward cone in its own space, marked
 * in mark[] with stamp) read a value made from a reduce whose input has fewer elements than R
 * (a masked mean pooling's count of tokens: R / broadcast(sum(mask))): that reduce would
 * become the dominant of R's slices, and its short rows' tiles would set the grid of R's
 * whole space. Walks with stack[] (nnode entries) and seen[] (stamped with stamp too). */
static bool reads_smaller_reduce(const astitch_graph *g, int32_t r, const Readers *rd,
                                 int32_t *mark, int32_t *seen, int32_t stamp, int32_t *stack)
{
    int64_t space = shape_elements(&gnode(g, r)->shape);
    int32_t top = 0, first = 0;
    stack[top++] = r;
    mark[r] = stamp;
    while (top > first) { /* the forward cone: stack[0 .. top) */
        int32_t v = stack[first++];
        for (int32_t e = rd->at[v]; e < rd->at[v + 1]; e++) {
            int32_t u = rd->who[e];
            astitch_op_class c = astitch_op_class_of(gnode(g, u)->op);
            if (mark[u] == stamp || c == ASTITCH_CLASS_COMPUTE || c == ASTITCH_CLASS_REDUCE ||
                shape_elements(&gnode(g, u)->shape) != space)
                continue;
            mark[u] = stamp;
            stack[top++] = u;
        }
    }
    int32_t cone = top;
    for (int32_t i = 0; i < cone; i++) /* what the cone reads from outside it, walked back */
        for (int j = 0; j < gnode(g, stack[i])->nin; j++) {
            int32_t o = goperand(g, stack[i], j);
            if (mark[o] == stamp || seen[o] == stamp)
                continue;
            seen[o] = stamp;
            stack[top++] = o;
        }
    for (int32_t i = cone; i < top; i++) {
        int32_t v = stack[i];
        const Node *n = gnode(g, v);
        astitch_op_class c = astitch_op_class_of(n->op);
        if (c == ASTITCH_CLASS_SOURCE || c == ASTITCH_CLASS_COMPUTE)
            continue;
        if (c == ASTITCH_CLASS_REDUCE &&
            shape_elements(&gnode(g, goperand(g, v, 0))->shape) < space)
            return true;
        for (int j = 0; j < n->nin; j++) {
            int32_t o = goperand(g, v, j);
            if (mark[o] != stamp && seen[o] != stamp) {
                seen[o] = stamp;
                stack[top++] = o;
            }
        }
    }
    return false;
}

/* The element-wise op that combines two values of reduce kind k. */
static astitch_op combine_op(astitch_reduce_kind k)
{
    switch (k) {
    case ASTITCH_REDUCE_SUM: return ASTITCH_OP_ADD;
    case ASTITCH_REDUCE_MAX: return ASTITCH_OP_MAX;
    case ASTITCH_REDUCE_MIN: return ASTITCH_OP_MIN;
    case ASTITCH_REDUCE_PROD: return ASTITCH_OP_MUL;
    case ASTITCH_REDUCE_ANY: return ASTITCH_OP_OR;
    default: return ASTITCH_OP_AND;
    }
}

static astitch_node named(const astitch_graph *src, astitch_graph *d, astitch_node v,
                          const char *base, const char *what, int64_t i)
{
    char w[48];
    snprintf(w, sizeof w, "%s%lld", what, (long long)i);
    return graph_name_derived(d, src, v, base, w);
}

/* Slice k of X (mapped: x) along r's reduced axes in R's shape, then in f32 when wide; the
 * last node named "<R>.<what>k" unless it is `last` (R's own name comes after). */
static astitch_node emit_slice(const astitch_graph *src, astitch_graph *d, int32_t r,
                               astitch_node x, int64_t k, bool wide, bool last)
{
    const Node *rn = gnode(src, r);
    const Shape *xs = &gnode(src, goperand(src, r, 0))->shape;
    int64_t start[MAX_RANK], limit[MAX_RANK], rest = k;
    for (int i = xs->rank - 1; i >= 0; i--) { /* k's index along the reduced axes, row-major */
        start[i] = 0;
        limit[i] = xs->dim[i];
        if (rn->attr.axes >> i & 1) {
            start[i] = rest % xs->dim[i];
            limit[i] = start[i] + 1;
            rest /= xs->dim[i];
        }
    }
    astitch_node s = named(src, d, astitch_slice(d, x, start, limit, NULL), rn->name, "slice", k);
    s = astitch_reshape(d, s, rn->shape.rank, rn->shape.dim);
    if (!wide)
        return last ? s : named(src, d, s, rn->name, "row", k);
    s = named(src, d, s, rn->name, "row", k);
    return named(src, d, astitch_convert(d, s, ASTITCH_F32), rn->name, "wide", k);
}

/* The slices' fold that replaces reduce r of src (operand mapped by map[]), named as r. In
 * order, not as a balanced tree: each slice is folded in as it is read, which fewer registers
 * hold (a mean over 12 heads of [32, 12, 197, 197] f32 at the bound of 32 registers: 20.5 us in
 * order, 23.7 as a tree, on an H200). */
static astitch_node emit_short(const astitch_graph *src, astitch_graph *d, int32_t r,
                               const int32_t *map)
{
    const Node *rn = gnode(src, r);
    int64_t k = reduced_elements(src, r);
    bool wide = k > 1 && (rn->dtype == ASTITCH_F16 || rn->dtype == ASTITCH_BF16) &&
                (rn->attr.reduce == ASTITCH_REDUCE_SUM || rn->attr.reduce == ASTITCH_REDUCE_PROD);
    astitch_node part[SHORT_REDUCE_MAX] = {ASTITCH_NO_NODE};
    for (int64_t i = 0; i < k; i++) {
        part[i] = emit_slice(src, d, r, map[goperand(src, r, 0)], i, wide, k == 1);
        if (part[i] == ASTITCH_NO_NODE)
            return ASTITCH_NO_NODE;
    }
    astitch_op op = combine_op(rn->attr.reduce);
    for (int64_t i = 1; i < k; i++) { /* in order: each slice folded in as it is read */
        astitch_node v = astitch_binary(d, op, part[0], part[i]);
        part[0] = i == k - 1 && !wide ? v : named(src, d, v, rn->name, "part", i);
    }
    astitch_node out = wide ? astitch_convert(d, part[0], rn->dtype) : part[0];
    if (out != ASTITCH_NO_NODE && astitch_set_name(d, out, rn->name) != ASTITCH_OK)
        return ASTITCH_NO_NODE;
    return out;
}

astitch_status pass_short_reduce(const astitch_graph *g, astitch_graph **out, char ***names,
                                 int32_t *nnames)
{
    *out = NULL;
    *names = NULL;
    *nnames = 0;
    size_t n = (size_t)(g->nnode ? g->nnode : 1);
    Readers rd = {0};
    bool *output = calloc(n, sizeof *output), *chosen = calloc(n, sizeof *chosen);
    int32_t *mark = calloc(n, sizeof *mark), *seen = calloc(n, sizeof *seen);
    int32_t *stack = malloc(n * sizeof *stack);
    int32_t *map = malloc(n * sizeof *map), found = 0;
    astitch_status st = ASTITCH_OK;
    if (!output || !chosen || !mark || !seen || !stack || !map ||
        !graph_readers(g, &rd.at, &rd.who)) {
        st = ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "short reduces: out of memory");
        goto done;
    }
    for (int32_t i = 0; i < g->noutput; i++)
        output[g->output[i]] = true;
    for (int32_t v = 0; v < g->nnode; v++) {
        int64_t k = reduced_elements(g, v);
        chosen[v] = k >= 1 && k <= SHORT_REDUCE_MAX &&
                    shape_elements(&gnode(g, goperand(g, v, 0))->shape) > 0 &&
                    keeps_innermost(g, v) && cone_private(g, v, &rd, output, mark, v + 1, stack) &&
                    !reads_smaller_reduce(g, v, &rd, mark, seen, -(v + 1), stack);
        found += chosen[v];
    }
    if (!found)
        goto done;
    char **list = calloc((size_t)found, sizeof *list);
    astitch_graph *d = NULL;
    if (!list || (st = astitch_graph_create(g->ctx, &d)) != ASTITCH_OK) {
        free(list);
        st = st ? st : ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "short reduces: out of memory");
        goto done;
    }
    for (int32_t v = 0; v < g->nnode; v++) {
        map[v] = chosen[v] ? emit_short(g, d, v, map) : graph_copy_mapped(d, g, v, map);
        if (map[v] == ASTITCH_NO_NODE)
            break;
    }
    st = graph_copy_finish(d, g, map, "short reduces");
    int32_t nl = 0;
    for (int32_t v = 0; !st && v < g->nnode; v++)
        if (chosen[v] && !(list[nl++] = graph_strdup(gnode(g, v)->name)))
            st = ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "short reduces: out of memory");
    if (st) {
        prune_free_names(list, nl);
        astitch_graph_destroy(d);
        goto done;
    }
    *out = d;
    *names = list;
    *nnames = nl;
done:
    free(rd.at);
    free(rd.who);
    free(output);
    free(chosen);
    free(mark);
    free(seen);
    free(stack);
    free(map);
    return st;
}
