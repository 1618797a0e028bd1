/* build.c: the graph builders (their checks, the node appended with its inferred type and its
 * name) and the copies of nodes between graphs that rewrites make. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"


/* Appends node n with operands in[0..nin), infers its type and names it. Returns its id, or
 * ASTITCH_NO_NODE with a sticky failure recorded on g (the node is not kept). Takes ownership
 * of n->attr.target and n->attr.values in every case. */
static astitch_node add_checked(astitch_graph *g, Node *n, const int32_t *in, int nin,
                                const char *name)
{
    if (!g)
        goto drop;
    if (g->status != ASTITCH_OK)
        goto drop;
    if (nin < 0 || (nin > 0 && !in)) {
        graph_fail(g, ASTITCH_ERR_ARGUMENT, "%s: invalid operand list", astitch_op_name(n->op));
        goto drop;
    }
    for (int k = 0; k < nin; k++)
        if (!graph_valid_id(g, in[k])) {
            graph_fail(g, ASTITCH_ERR_ARGUMENT, "%s: operand %d is not a node of the graph (%d)",
                       astitch_op_name(n->op), k, in[k]);
            goto drop;
        }
    int32_t id = graph_add_node(g, n, in, nin);
    if (id < 0)
        goto drop;
    astitch_dtype t;
    Shape s;
    /* messages name the node as it will be called; the name is registered only on success */
    char shown[64];
    snprintf(shown, sizeof shown, "%s.%d", astitch_op_name(n->op), id);
    g->node[id].name = name ? (char *)name : shown;
    astitch_status st = infer_node(g, id, &t, &s);
    g->node[id].name = NULL;
    bool param = n->op == ASTITCH_OP_PARAMETER;
    if (st == ASTITCH_OK) {
        g->node[id].dtype = t;
        g->node[id].shape = s;
        if (param && !graph_add_param(g, id))
            st = graph_fail(g, ASTITCH_ERR_MEMORY, "out of memory adding a parameter");
        else if ((st = name ? astitch_set_name(g, id, name) : graph_default_name(g, id)) !=
                     ASTITCH_OK &&
                 param)
            g->nparam--;
    }
    if (st != ASTITCH_OK) {
        ctx_error_at_node(g->ctx, ASTITCH_NO_NODE); /* the node the message names is not kept */
        /* naming is the last step that can fail, so the name table never holds this node */
        Node *dead = &g->node[id];
        free(dead->name);
        free(dead->attr.target);
        free(dead->attr.values);
        g->nnode--;
        g->noperand -= nin;
        if (g->status == ASTITCH_OK)
            g->status = st;
        return ASTITCH_NO_NODE;
    }
    return id;
drop:
    free(n->attr.target);
    free(n->attr.values);
    return ASTITCH_NO_NODE;
}

/* graph_copy_node under another name. */
static astitch_node copy_node_named(astitch_graph *g, const astitch_graph *src, int32_t v,
                                    const int32_t *in, const char *name)
{
    const Node *from = gnode(src, v);
    Node n = *from;
    n.name = NULL;
    n.attr.target = NULL;
    n.attr.values = NULL;
    if (from->attr.target && !(n.attr.target = graph_strdup(from->attr.target))) {
        graph_fail(g, ASTITCH_ERR_MEMORY, "out of memory copying node '%s'", from->name);
        return ASTITCH_NO_NODE;
    }
    if (from->attr.values) {
        n.attr.values = malloc((size_t)from->attr.nvalues * sizeof *n.attr.values);
        if (!n.attr.values) {
            free(n.attr.target);
            graph_fail(g, ASTITCH_ERR_MEMORY, "out of memory copying node '%s'", from->name);
            return ASTITCH_NO_NODE;
        }
        memcpy(n.attr.values, from->attr.values,
               (size_t)from->attr.nvalues * sizeof *n.attr.values);
    }
    return add_checked(g, &n, in, from->nin, name);
}

astitch_node graph_copy_node(astitch_graph *g, const astitch_graph *src, int32_t v,
                             const int32_t *in)
{
    return copy_node_named(g, src, v, in, gnode(src, v)->name);
}

/* Writes "<base>.<what>" into buf (256 bytes), with a "_<k>" suffix while src or g already has
 * that name. */
static void derived_name(const astitch_graph *g, const astitch_graph *src, const char *base,
                         const char *what, char *buf)
{
    snprintf(buf, 256, "%s.%s", base, what);
    for (int k = 1; astitch_graph_find(src, buf) >= 0 || astitch_graph_find(g, buf) >= 0; k++)
        snprintf(buf, 256, "%s.%s_%d", base, what, k);
}

/* graph_copy_mapped under `name` (NULL: v's own). */
static astitch_node copy_mapped_named(astitch_graph *g, const astitch_graph *src, int32_t v,
                                      const int32_t *map, const char *name)
{
    const Node *n = gnode(src, v);
    int32_t in[64] = {0}, *ops = n->nin <= 64 ? in : malloc((size_t)n->nin * sizeof *ops);
    if (!ops) {
        graph_fail(g, ASTITCH_ERR_MEMORY, "out of memory copying node '%s'", n->name);
        return ASTITCH_NO_NODE;
    }
    for (int j = 0; j < n->nin; j++)
        ops[j] = map[goperand(src, v, j)];
    astitch_node r = copy_node_named(g, src, v, ops, name ? name : n->name);
    if (ops != in)
        free(ops);
    return r;
}

astitch_node graph_copy_mapped(astitch_graph *g, const astitch_graph *src, int32_t v,
                               const int32_t *map)
{
    return copy_mapped_named(g, src, v, map, NULL);
}

astitch_node graph_copy_mapped_derived(astitch_graph *g, const astitch_graph *src, int32_t v,
                                       const int32_t *map, const char *what)
{
    char buf[256];
    derived_name(g, src, gnode(src, v)->name, what, buf);
    return copy_mapped_named(g, src, v, map, buf);
}

astitch_node graph_name_derived(astitch_graph *g, const astitch_graph *src, astitch_node v,
                                const char *base, const char *what)
{
    char buf[256];
    derived_name(g, src, base, what, buf);
    if (v != ASTITCH_NO_NODE && astitch_set_name(g, v, buf) != ASTITCH_OK)
        return ASTITCH_NO_NODE;
    return v;
}

astitch_status graph_copy_finish(astitch_graph *g, const astitch_graph *src, const int32_t *map,
                                 const char *what)
{
    for (int32_t i = 0; g->status == ASTITCH_OK && i < src->noutput; i++)
        astitch_add_output(g, map[src->output[i]]);
    if (g->status == ASTITCH_OK && src->name)
        astitch_graph_set_name(g, src->name);
    if (g->status == ASTITCH_OK && src->comment)
        astitch_graph_set_comment(g, src->comment);
    if (g->status != ASTITCH_OK) { /* the builder's message is on the context: copy it first */
        char why[512];
        snprintf(why, sizeof why, "%s", astitch_last_error(src->ctx));
        return ctx_fail(src->ctx, g->status, "%s of graph '%s': %s", what,
                        src->name ? src->name : "", why);
    }
    return astitch_graph_verify(g);
}

astitch_status graph_rewrite(const astitch_graph *g, GraphRewriteChosen chosen,
                             GraphRewriteEmit emit, const char *what, astitch_graph **out)
{
    *out = NULL;
    int32_t count = 0;
    for (int32_t v = 0; v < g->nnode; v++)
        count += chosen(g, v);
    if (!count)
        return ASTITCH_OK;
    int32_t *map = malloc((size_t)g->nnode * sizeof *map);
    if (!map)
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "%s: out of memory", what);
    astitch_graph *d = NULL;
    astitch_status st = astitch_graph_create(g->ctx, &d);
    for (int32_t v = 0; !st && v < g->nnode; v++) {
        map[v] = chosen(g, v) ? emit(g, d, v, map) : graph_copy_mapped(d, g, v, map);
        if (map[v] == ASTITCH_NO_NODE)
            break;
    }
    if (!st)
        st = graph_copy_finish(d, g, map, what);
    free(map);
    if (st) {
        astitch_graph_destroy(d);
        return st;
    }
    *out = d;
    return ASTITCH_OK;
}

/* Copies rank and dims into a Shape, rejecting bad ranks before any use of dims. */
static bool set_shape(astitch_graph *g, Shape *s, int rank, const int64_t *dims, const char *who)
{
    if (rank < 0 || rank > MAX_RANK || (rank > 0 && !dims)) {
        graph_fail(g, ASTITCH_ERR_GRAPH, "%s: rank %d is outside 0..%d", who, rank, MAX_RANK);
        return false;
    }
    s->rank = rank;
    for (int i = 0; i < rank; i++)
        s->dim[i] = dims[i];
    return true;
}

static bool usable(astitch_graph *g) { return g && g->status == ASTITCH_OK; }

/* Copies one entry of list per axis of x into out (nothing when x is not a node, which
 * add_checked reports); a missing list for an x of rank > 0 fails naming what (who). */
static bool copy_axis_list(astitch_graph *g, astitch_node x, const int64_t *list, int64_t *out,
                           const char *who)
{
    if (!graph_valid_id(g, x))
        return true;
    int xr = g->node[x].shape.rank;
    if (xr > 0 && !list) {
        graph_fail(g, ASTITCH_ERR_ARGUMENT, "%s missing", who);
        return false;
    }
    for (int i = 0; i < xr; i++)
        out[i] = list[i];
    return true;
}

astitch_node astitch_parameter(astitch_graph *g, const char *name, astitch_dtype t, int rank,
                               const int64_t *dims)
{
    Node n = {.op = ASTITCH_OP_PARAMETER, .dtype = t};
    if (!usable(g) || !set_shape(g, &n.shape, rank, dims, "parameter"))
        return ASTITCH_NO_NODE;
    return add_checked(g, &n, NULL, 0, name);
}

astitch_node astitch_constant(astitch_graph *g, astitch_dtype t, int rank, const int64_t *dims,
                              const double *values, int64_t count)
{
    Node n = {.op = ASTITCH_OP_CONSTANT, .dtype = t};
    if (!usable(g) || !set_shape(g, &n.shape, rank, dims, "constant"))
        return ASTITCH_NO_NODE;
    if (!values || count < 1 || count > MAX_ELEMENTS) {
        graph_fail(g, ASTITCH_ERR_ARGUMENT, "constant: %" PRId64 " values given", count);
        return ASTITCH_NO_NODE;
    }
    n.attr.values = malloc((size_t)count * sizeof *values);
    if (!n.attr.values) {
        graph_fail(g, ASTITCH_ERR_MEMORY, "constant: out of memory for %" PRId64 " values",
                   count);
        return ASTITCH_NO_NODE;
    }
    memcpy(n.attr.values, values, (size_t)count * sizeof *values);
    n.attr.nvalues = count;
    return add_checked(g, &n, NULL, 0, NULL);
}

astitch_node astitch_iota(astitch_graph *g, astitch_dtype t, int rank, const int64_t *dims,
                          int axis)
{
    Node n = {.op = ASTITCH_OP_IOTA, .dtype = t, .attr.axis = axis};
    if (!usable(g) || !set_shape(g, &n.shape, rank, dims, "iota"))
        return ASTITCH_NO_NODE;
    return add_checked(g, &n, NULL, 0, NULL);
}

astitch_node astitch_unary(astitch_graph *g, astitch_op op, astitch_node x)
{
    if (!usable(g))
        return ASTITCH_NO_NODE;
    if (!op_is_elementwise(op) || astitch_op_arity(op) != 1 || op == ASTITCH_OP_CONVERT) {
        graph_fail(g, ASTITCH_ERR_ARGUMENT, "astitch_unary: '%s' is not a unary element-wise op",
                   astitch_op_name(op) ? astitch_op_name(op) : "?");
        return ASTITCH_NO_NODE;
    }
    Node n = {.op = op};
    return add_checked(g, &n, &x, 1, NULL);
}

astitch_node astitch_binary(astitch_graph *g, astitch_op op, astitch_node a, astitch_node b)
{
    if (!usable(g))
        return ASTITCH_NO_NODE;
    if (!op_is_elementwise(op) || astitch_op_arity(op) != 2) {
        graph_fail(g, ASTITCH_ERR_ARGUMENT,
                   "astitch_binary: '%s' is not a binary element-wise op",
                   astitch_op_name(op) ? astitch_op_name(op) : "?");
        return ASTITCH_NO_NODE;
    }
    Node n = {.op = op};
    int32_t in[2] = {a, b};
    return add_checked(g, &n, in, 2, NULL);
}

astitch_node astitch_select(astitch_graph *g, astitch_node pred, astitch_node on_true,
                            astitch_node on_false)
{
    Node n = {.op = ASTITCH_OP_SELECT};
    int32_t in[3] = {pred, on_true, on_false};
    return usable(g) ? add_checked(g, &n, in, 3, NULL) : ASTITCH_NO_NODE;
}

astitch_node astitch_convert(astitch_graph *g, astitch_node x, astitch_dtype to)
{
    Node n = {.op = ASTITCH_OP_CONVERT, .dtype = to};
    return usable(g) ? add_checked(g, &n, &x, 1, NULL) : ASTITCH_NO_NODE;
}

astitch_node astitch_broadcast_in_dim(astitch_graph *g, astitch_node x, int rank,
                                      const int64_t *dims, const int64_t *broadcast_dims)
{
    Node n = {.op = ASTITCH_OP_BROADCAST_IN_DIM};
    if (!usable(g) || !set_shape(g, &n.shape, rank, dims, "broadcast_in_dim"))
        return ASTITCH_NO_NODE;
    if (!copy_axis_list(g, x, broadcast_dims, n.attr.dims, "broadcast_in_dim: broadcast_dims"))
        return ASTITCH_NO_NODE;
    return add_checked(g, &n, &x, 1, NULL);
}

astitch_node astitch_reshape(astitch_graph *g, astitch_node x, int rank, const int64_t *dims)
{
    Node n = {.op = ASTITCH_OP_RESHAPE};
    if (!usable(g) || !set_shape(g, &n.shape, rank, dims, "reshape"))
        return ASTITCH_NO_NODE;
    return add_checked(g, &n, &x, 1, NULL);
}

astitch_node astitch_transpose(astitch_graph *g, astitch_node x, const int64_t *perm)
{
    Node n = {.op = ASTITCH_OP_TRANSPOSE};
    if (!usable(g) || !copy_axis_list(g, x, perm, n.attr.dims, "transpose: permutation"))
        return ASTITCH_NO_NODE;
    return add_checked(g, &n, &x, 1, NULL);
}

astitch_node astitch_slice(astitch_graph *g, astitch_node x, const int64_t *start,
                           const int64_t *limit, const int64_t *strides)
{
    Node n = {.op = ASTITCH_OP_SLICE};
    if (!usable(g))
        return ASTITCH_NO_NODE;
    if (graph_valid_id(g, x)) {
        int xr = g->node[x].shape.rank;
        if (xr > 0 && (!start || !limit)) {
            graph_fail(g, ASTITCH_ERR_ARGUMENT, "slice: start and limit must be given");
            return ASTITCH_NO_NODE;
        }
        for (int i = 0; i < xr; i++) {
            n.attr.dims[i] = start[i];
            n.attr.limit[i] = limit[i];
            n.attr.stride[i] = strides ? strides[i] : 1;
        }
    }
    return add_checked(g, &n, &x, 1, NULL);
}

astitch_node astitch_concatenate(astitch_graph *g, int count, const astitch_node *xs, int axis)
{
    Node n = {.op = ASTITCH_OP_CONCATENATE, .attr.axis = axis};
    if (!usable(g))
        return ASTITCH_NO_NODE;
    if (count < 1 || !xs) {
        graph_fail(g, ASTITCH_ERR_ARGUMENT, "concatenate: needs at least one operand");
        return ASTITCH_NO_NODE;
    }
    return add_checked(g, &n, xs, count, NULL);
}

astitch_node astitch_gather(astitch_graph *g, astitch_node table, astitch_node indices)
{
    Node n = {.op = ASTITCH_OP_GATHER};
    int32_t in[2] = {table, indices};
    return usable(g) ? add_checked(g, &n, in, 2, NULL) : ASTITCH_NO_NODE;
}

astitch_node astitch_reduce(astitch_graph *g, astitch_reduce_kind kind, astitch_node x,
                            int naxes, const int64_t *axes)
{
    Node n = {.op = ASTITCH_OP_REDUCE, .attr.reduce = kind};
    if (!usable(g))
        return ASTITCH_NO_NODE;
    if (naxes < 0 || naxes > MAX_RANK || (naxes > 0 && !axes)) {
        graph_fail(g, ASTITCH_ERR_ARGUMENT, "reduce: invalid axis list (%d axes)", naxes);
        return ASTITCH_NO_NODE;
    }
    for (int i = 0; i < naxes; i++) {
        if (axes[i] < 0 || axes[i] >= MAX_RANK || (n.attr.axes >> axes[i] & 1)) {
            graph_fail(g, ASTITCH_ERR_GRAPH, "reduce: axis %" PRId64 " is out of range or repeated",
                       axes[i]);
            return ASTITCH_NO_NODE;
        }
        n.attr.axes |= 1u << axes[i];
    }
    return add_checked(g, &n, &x, 1, NULL);
}

astitch_node astitch_dot(astitch_graph *g, astitch_node lhs, astitch_node rhs,
                         const astitch_dot_dims *dims)
{
    Node n = {.op = ASTITCH_OP_DOT};
    if (!usable(g))
        return ASTITCH_NO_NODE;
    if (!dims) {
        graph_fail(g, ASTITCH_ERR_ARGUMENT, "dot: dimension numbers missing");
        return ASTITCH_NO_NODE;
    }
    n.attr.dot = *dims;
    int32_t in[2] = {lhs, rhs};
    return add_checked(g, &n, in, 2, NULL);
}

astitch_node astitch_custom(astitch_graph *g, const char *target, int count,
                            const astitch_node *inputs, astitch_dtype t, int rank,
                            const int64_t *dims)
{
    Node n = {.op = ASTITCH_OP_CUSTOM, .dtype = t};
    if (!usable(g) || !set_shape(g, &n.shape, rank, dims, "custom"))
        return ASTITCH_NO_NODE;
    if (!target || !*target) {
        graph_fail(g, ASTITCH_ERR_ARGUMENT, "custom: a target name is required");
        return ASTITCH_NO_NODE;
    }
    if (!(n.attr.target = graph_strdup(target))) {
        graph_fail(g, ASTITCH_ERR_MEMORY, "custom: out of memory");
        return ASTITCH_NO_NODE;
    }
    return add_checked(g, &n, inputs, count, NULL);
}
