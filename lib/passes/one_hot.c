/*
 * one_hot.c: the sum of a one-hot selection becomes a gather, a graph rewrite ahead of the
 * stitch pipeline.
 *
 * A framework hands over nll_loss's gather of the target's logit as a one-hot sum over the
 * class axis (here the last; any one axis a alike, below):
 *
 *     R = reduce_sum(select(eq(iota, broadcast(t)), X, 0), last axis)    X: [..., C], t: [...]
 *
 * which compares, selects and adds at every element of X (in a language-model loss over a
 * 32000-token vocabulary, about half the instructions of the pass over the logits). R holds
 * X's element at class t of each row, plus zeros: with the rows flattened,
 *
 *     R = select(0 <= t < C, gather(reshape(X, [rows * C]), row * C + t) + 0, 0)
 *
 * reads one element per row. The "+ 0" keeps the sum's sign rule: a sum of +0 and -0 is +0,
 * so a -0 at the target comes out +0, as from the sum; NaN and infinities pass unchanged and
 * elements off the target are never read, as the select never read them. So the values are
 * the same, bit for bit, and the rewrite takes no option.
 *
 * The class axis may be any one axis a: with X as [outer, C, inner] (inner the product of the
 * axes after a), element (o, i) of R is X's at o * C * inner + t * inner + i (a contrastive
 * loss's column cross-entropy, the channels of NCHW segmentation logits).
 *
 * Matched: a sum over one axis alone, of 2 <= C classes and at least one row (a gather
 * needs a table), of f32, f16 or bf16; the select's other operand +0 (a splat constant,
 * perhaps broadcast); the compare eq of an iota along that axis and t broadcast along it
 * (either order), t of R's shape, i32 or i64, and rows * C within t's type; X not made from a
 * reduction (made_after_reduce: a log-softmax's output stays a sum). The rewritten
 * graph is a copy (the caller's graph is never changed): R keeps its name and place, the nodes
 * only R read are dropped, and the new ones are named after R ("<R>.flat", "<R>.index", ...).
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "passes/passes.h"

/* True when node z is +0 at every element: a splat constant, perhaps broadcast. */
static bool is_plus_zero(const astitch_graph *g, int32_t z)
{
    const Node *n = gnode(g, z);
    if (n->op == ASTITCH_OP_BROADCAST_IN_DIM)
        return is_plus_zero(g, goperand(g, z, 0));
    return n->op == ASTITCH_OP_CONSTANT && n->attr.nvalues == 1 && n->attr.values[0] == 0 &&
           !signbit(n->attr.values[0]);
}

/* The per-row target t when node b broadcasts it along axis a of shape s alone (t's axes
 * kept in order), else -1. */
static int32_t row_target(const astitch_graph *g, int32_t b, const Shape *s, int a)
{
    const Node *bn = gnode(g, b);
    if (bn->op != ASTITCH_OP_BROADCAST_IN_DIM)
        return -1;
    int32_t t = goperand(g, b, 0);
    const Shape *ts = &gnode(g, t)->shape;
    if (ts->rank != s->rank - 1)
        return -1;
    for (int i = 0; i < ts->rank; i++) {
        int to = i < a ? i : i + 1;
        if (bn->attr.dims[i] != to || ts->dim[i] != s->dim[to])
            return -1;
    }
    return t;
}

/* Whether x's value is made, through memory-intensive ops, from a reduction (the walk stops at a
 * matmul's result, a parameter or a source: the kernels' inputs). A gather of such a value reads
 * another element than its reader's own, so the reduction becomes global (a grid barrier and a
 * persistent grid), where the one-hot sum joins the other reductions of the same rows
 * (bench/RESULTS.md, *Survey 5*: a label-smoothing cross-entropy over [8192, 32000] bf16, 423.0 ->
 * 364 us on an H200). True also when the walk's memory cannot be had: the rewrite is then not
 * taken, which leaves the graph as written. */
static bool made_after_reduce(const astitch_graph *g, int32_t x)
{
    unsigned char *seen = calloc((size_t)g->nnode, 1);
    int32_t *stack = malloc((size_t)g->nnode * sizeof *stack);
    bool found = !seen || !stack;
    int32_t top = 0;
    if (!found) {
        stack[top++] = x;
        seen[x] = 1;
    }
    while (!found && top > 0) {
        int32_t v = stack[--top];
        const Node *n = gnode(g, v);
        astitch_op_class c = astitch_op_class_of(n->op);
        if (c == ASTITCH_CLASS_COMPUTE || c == ASTITCH_CLASS_SOURCE)
            continue;
        found = n->op == ASTITCH_OP_REDUCE;
        for (int k = 0; !found && k < n->nin; k++) {
            int32_t u = goperand(g, v, k);
            if (!seen[u]) {
                seen[u] = 1;
                stack[top++] = u;
            }
        }
    }
    free(seen);
    free(stack);
    return found;
}

/* The one axis of a rank-`rank` tensor that reduce axes `axes` name, or -1 when they name
 * none or several. */
static int class_axis(uint32_t axes, int rank)
{
    for (int a = 0; a < rank; a++)
        if (axes == 1u << a)
            return a;
    return -1;
}

/* The target t of one-hot sum r (see the head), or -1 when r is none. *x is the selected
 * tensor. */
static int32_t match(const astitch_graph *g, int32_t r, int32_t *x)
{
    const Node *rn = gnode(g, r);
    if (rn->op != ASTITCH_OP_REDUCE || rn->attr.reduce != ASTITCH_REDUCE_SUM ||
        !dtype_is_float(rn->dtype))
        return -1;
    int32_t sel = goperand(g, r, 0);
    const Shape *s = &gnode(g, sel)->shape;
    int a = class_axis(rn->attr.axes, s->rank);
    if (a < 0 || s->dim[a] < 2 || shape_elements(s) < 1 ||
        gnode(g, sel)->op != ASTITCH_OP_SELECT || !is_plus_zero(g, goperand(g, sel, 2)))
        return -1;
    int32_t hit = goperand(g, sel, 0);
    if (gnode(g, hit)->op != ASTITCH_OP_EQ)
        return -1;
    for (int side = 0; side < 2; side++) {
        int32_t i = goperand(g, hit, side), t = row_target(g, goperand(g, hit, 1 - side), s, a);
        const Node *in = gnode(g, i);
        if (t < 0 || in->op != ASTITCH_OP_IOTA || in->attr.axis != a)
            continue;
        if (in->dtype != ASTITCH_I32 && in->dtype != ASTITCH_I64)
            return -1;
        if (in->dtype == ASTITCH_I32 && shape_elements(s) > INT32_MAX)
            return -1;
        *x = goperand(g, sel, 1);
        return made_after_reduce(g, *x) ? -1 : t;
    }
    return -1;
}

static bool chosen(const astitch_graph *g, int32_t v)
{
    int32_t x;
    return match(g, v, &x) >= 0;
}

/* The gather that replaces one-hot sum v of src (see the head), appended to d. */
static astitch_node emit_gather(const astitch_graph *src, astitch_graph *d, int32_t v,
                                const int32_t *map)
{
    int32_t x, t = match(src, v, &x);
    const Node *rn = gnode(src, v), *xn = gnode(src, x);
    const char *base = rn->name;
    astitch_dtype it = gnode(src, t)->dtype, ft = rn->dtype;
    int a = class_axis(rn->attr.axes, xn->shape.rank);
    int64_t classes = xn->shape.dim[a], inner = 1;
    for (int i = a + 1; i < xn->shape.rank; i++)
        inner *= xn->shape.dim[i];
    int64_t rows = shape_elements(&rn->shape), total = rows * classes;
    int64_t grid[2] = {rows / inner, inner};
    double c = (double)classes, zero = 0, plane = (double)inner, block = (double)(classes * inner);
#define NAMED(node, what) graph_name_derived(d, src, (node), base, (what))
    astitch_node flat = NAMED(astitch_reshape(d, map[x], 1, &total), "flat");
    astitch_node tr = map[t];
    if (rn->shape.rank != 1)
        tr = NAMED(astitch_reshape(d, tr, 1, &rows), "row_target");
    astitch_node cn, index;
    if (inner == 1) { /* the last axis: row * C + t */
        astitch_node row = NAMED(astitch_iota(d, it, 1, &rows, 0), "row");
        cn = NAMED(astitch_constant(d, it, 1, &rows, &c, 1), "classes");
        astitch_node start = NAMED(astitch_binary(d, ASTITCH_OP_MUL, row, cn), "row_start");
        index = NAMED(astitch_binary(d, ASTITCH_OP_ADD, start, tr), "index");
    } else { /* [outer, C, inner] flattened: outer * C * inner + t * inner + inner index */
        cn = NAMED(astitch_constant(d, it, 1, &rows, &c, 1), "classes");
        astitch_node o = NAMED(astitch_iota(d, it, 2, grid, 0), "outer");
        astitch_node in = NAMED(astitch_iota(d, it, 2, grid, 1), "inner");
        astitch_node bn = NAMED(astitch_constant(d, it, 2, grid, &block, 1), "block");
        astitch_node start = NAMED(astitch_binary(d, ASTITCH_OP_ADD,
                                   NAMED(astitch_binary(d, ASTITCH_OP_MUL, o, bn), "block_start"),
                                   in), "start");
        astitch_node start1 = NAMED(astitch_reshape(d, start, 1, &rows), "row_start");
        astitch_node pn = NAMED(astitch_constant(d, it, 1, &rows, &plane, 1), "plane");
        astitch_node off = NAMED(astitch_binary(d, ASTITCH_OP_MUL, tr, pn), "class_start");
        index = NAMED(astitch_binary(d, ASTITCH_OP_ADD, start1, off), "index");
    }
    astitch_node picked = NAMED(astitch_gather(d, flat, index), "picked");
    astitch_node fz = NAMED(astitch_constant(d, ft, 1, &rows, &zero, 1), "zero");
    astitch_node plus = NAMED(astitch_binary(d, ASTITCH_OP_ADD, picked, fz), "plus_zero");
    astitch_node iz = NAMED(astitch_constant(d, it, 1, &rows, &zero, 1), "first");
    astitch_node ge = NAMED(astitch_binary(d, ASTITCH_OP_GE, tr, iz), "at_least_first");
    astitch_node lt = NAMED(astitch_binary(d, ASTITCH_OP_LT, tr, cn), "below_classes");
    astitch_node ok = NAMED(astitch_binary(d, ASTITCH_OP_AND, ge, lt), "in_range");
#undef NAMED
    astitch_node out = astitch_select(d, ok, plus, fz);
    if (rn->shape.rank != 1)
        out = astitch_reshape(d, out, rn->shape.rank, rn->shape.dim);
    if (out != ASTITCH_NO_NODE && astitch_set_name(d, out, base) != ASTITCH_OK)
        return ASTITCH_NO_NODE;
    return out;
}

astitch_status pass_one_hot(const astitch_graph *g, astitch_graph **out, char ***gathered,
                            int32_t *ngathered)
{
    *out = NULL;
    *gathered = NULL;
    *ngathered = 0;
    astitch_graph *rw = NULL;
    astitch_status st = graph_rewrite(g, chosen, emit_gather, "one-hot gather", &rw);
    if (st || !rw)
        return st;
    int32_t n = 0;
    char **names = calloc((size_t)g->nnode, sizeof *names);
    if (!names) {
        astitch_graph_destroy(rw);
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "one-hot gather: out of memory");
    }
    for (int32_t v = 0; v < g->nnode; v++) {
        if (!chosen(g, v))
            continue;
        if (!(names[n++] = graph_strdup(gnode(g, v)->name))) {
            prune_free_names(names, n);
            astitch_graph_destroy(rw);
            return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "one-hot gather: out of memory");
        }
    }
    /* the compares and selects only the sums read feed nothing now */
    astitch_graph *pruned = NULL;
    char **dropped = NULL;
    int32_t ndropped = 0;
    st = pass_prune(rw, &pruned, &dropped, &ndropped);
    prune_free_names(dropped, ndropped);
    if (st) {
        prune_free_names(names, n);
        astitch_graph_destroy(rw);
        return st;
    }
    if (pruned) {
        astitch_graph_destroy(rw);
        rw = pruned;
    }
    *out = rw;
    *gathered = names;
    *ngathered = n;
    return ASTITCH_OK;
}
