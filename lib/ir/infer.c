/* infer.c: the type rules of every op: a node's dtype and shape from its op, attributes and
 * operands (infer_node), for the builders and the verifier. */
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "ir.h"

bool shape_check(const Shape *s, char *why, size_t len)
{
    if (s->rank < 0 || s->rank > MAX_RANK) {
        snprintf(why, len, "rank %d is outside 0..%d", s->rank, MAX_RANK);
        return false;
    }
    bool zero = false;
    for (int i = 0; i < s->rank; i++) {
        if (s->dim[i] < 0) {
            snprintf(why, len, "dimension %d is negative (%" PRId64 ")", i, s->dim[i]);
            return false;
        }
        /* even beside a zero extent, which makes the count 0 */
        if (s->dim[i] > MAX_ELEMENTS) {
            snprintf(why, len, "dimension %d (%" PRId64 ") exceeds the limit of 2^40", i,
                     s->dim[i]);
            return false;
        }
        zero = zero || s->dim[i] == 0;
    }
    for (int64_t i = 0, n = 1; !zero && i < s->rank; i++) {
        if (n > MAX_ELEMENTS / s->dim[i]) {
            snprintf(why, len, "element count exceeds the limit of 2^40");
            return false;
        }
        n *= s->dim[i];
    }
    return true;
}

static bool dtype_is_numeric(astitch_dtype t) { return dtype_is_float(t) || dtype_is_int(t); }

/* Checks that v is representable in t (non-finite only for floats). */
static bool value_fits(astitch_dtype t, double v, char *why, size_t len)
{
    double max = 0;
    switch (t) {
    case ASTITCH_F32: max = FLT_MAX; break;
    case ASTITCH_F16: max = 65504.0; break;
    case ASTITCH_BF16: max = 3.3895313892515355e38; break;
    case ASTITCH_I32:
    case ASTITCH_I64:
    case ASTITCH_BOOL:
        if (!isfinite(v) || v != floor(v)) {
            snprintf(why, len, "value %g is not an integer", v);
            return false;
        }
        if (t == ASTITCH_BOOL ? (v != 0 && v != 1)
            : t == ASTITCH_I32 ? (v < -2147483648.0 || v > 2147483647.0)
                               : (v < -9223372036854775808.0 || v >= 9223372036854775808.0)) {
            snprintf(why, len, "value %.17g is out of range for %s", v, astitch_dtype_name(t));
            return false;
        }
        return true;
    case ASTITCH_DTYPE_COUNT: break;
    }
    if (isfinite(v) && fabs(v) > max) {
        snprintf(why, len, "value %g is out of range for %s", v, astitch_dtype_name(t));
        return false;
    }
    return true;
}

#define TS(buf, node) type_str(buf, sizeof buf, (node)->dtype, &(node)->shape)

static astitch_status infer_declared(const astitch_graph *g, int32_t id, const Node *n)
{
    char why[160];
    if (!dtype_is_valid(n->dtype))
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "invalid dtype %d", (int)n->dtype);
    if (!shape_check(&n->shape, why, sizeof why))
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "%s", why);
    return ASTITCH_OK;
}

static astitch_status infer_constant(const astitch_graph *g, int32_t id, const Node *n)
{
    char why[160];
    int64_t count = shape_elements(&n->shape);
    if (n->attr.nvalues != 1 && n->attr.nvalues != count)
        return node_fail(g, id, ASTITCH_ERR_GRAPH,
                         "%" PRId64 " values given for %" PRId64 " elements (give 1 or all)",
                         n->attr.nvalues, count);
    if (!n->attr.values)
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "no values");
    for (int64_t i = 0; i < n->attr.nvalues; i++)
        if (!value_fits(n->dtype, n->attr.values[i], why, sizeof why))
            return node_fail(g, id, ASTITCH_ERR_GRAPH, "element %" PRId64 ": %s", i, why);
    return ASTITCH_OK;
}

static astitch_status infer_broadcast(const astitch_graph *g, int32_t id, const Node *n,
                                      const Node *x)
{
    char a[160], b[160];
    if (n->shape.rank < x->shape.rank)
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "cannot broadcast %s to lower rank %s",
                         TS(a, x), type_str(b, sizeof b, x->dtype, &n->shape));
    uint32_t used = 0;
    for (int i = 0; i < x->shape.rank; i++) {
        int64_t d = n->attr.dims[i];
        if (d < 0 || d >= n->shape.rank || (used >> d & 1))
            return node_fail(g, id, ASTITCH_ERR_GRAPH,
                             "broadcast_dimensions[%d] = %" PRId64
                             " is out of range or repeated for output rank %d",
                             i, d, n->shape.rank);
        used |= 1u << d;
        if (x->shape.dim[i] != 1 && x->shape.dim[i] != n->shape.dim[d])
            return node_fail(g, id, ASTITCH_ERR_GRAPH,
                             "cannot broadcast %s to %s: operand dimension %d (%" PRId64
                             ") maps to output dimension %" PRId64 " (%" PRId64 ")",
                             TS(a, x), type_str(b, sizeof b, x->dtype, &n->shape), i,
                             x->shape.dim[i], d, n->shape.dim[d]);
    }
    return ASTITCH_OK;
}

static astitch_status infer_slice(const astitch_graph *g, int32_t id, const Node *n,
                                  const Node *x, Shape *out)
{
    char a[160];
    *out = x->shape;
    for (int i = 0; i < x->shape.rank; i++) {
        int64_t s = n->attr.dims[i], l = n->attr.limit[i], st = n->attr.stride[i];
        if (st < 1 || s < 0 || l < s || l > x->shape.dim[i])
            return node_fail(g, id, ASTITCH_ERR_GRAPH,
                             "slice of %s: dimension %d needs 0 <= start <= limit <= %" PRId64
                             " and stride >= 1, got start %" PRId64 " limit %" PRId64
                             " stride %" PRId64,
                             TS(a, x), i, x->shape.dim[i], s, l, st);
        out->dim[i] = (l - s + st - 1) / st;
    }
    return ASTITCH_OK;
}

static astitch_status infer_concatenate(const astitch_graph *g, int32_t id, const Node *n,
                                        Shape *out)
{
    char a[160], b[160];
    if (n->nin < 1)
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "needs at least one operand");
    const Node *x0 = gnode(g, goperand(g, id, 0));
    int axis = n->attr.axis;
    if (axis < 0 || axis >= x0->shape.rank)
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "axis %d is out of range for %s", axis,
                         TS(a, x0));
    *out = x0->shape;
    for (int k = 1; k < n->nin; k++) {
        const Node *x = gnode(g, goperand(g, id, k));
        bool ok = x->dtype == x0->dtype && x->shape.rank == x0->shape.rank;
        for (int i = 0; ok && i < x->shape.rank; i++)
            ok = i == axis || x->shape.dim[i] == x0->shape.dim[i];
        if (!ok)
            return node_fail(g, id, ASTITCH_ERR_GRAPH,
                             "operand %d %s does not match operand 0 %s outside axis %d", k,
                             TS(a, x), TS(b, x0), axis);
        out->dim[axis] += x->shape.dim[axis];
    }
    char why[160];
    if (!shape_check(out, why, sizeof why))
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "result: %s", why);
    return ASTITCH_OK;
}

static astitch_status infer_gather(const astitch_graph *g, int32_t id, const Node *t,
                                   const Node *ix, Shape *out)
{
    char a[160], b[160], why[160];
    if (t->shape.rank < 1 || t->shape.dim[0] < 1)
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "table %s must have at least one row",
                         TS(a, t));
    if (!dtype_is_int(ix->dtype))
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "indices %s must be i32 or i64", TS(a, ix));
    if (ix->shape.rank + t->shape.rank - 1 > MAX_RANK)
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "result of gathering %s by %s exceeds rank %d",
                         TS(a, t), TS(b, ix), MAX_RANK);
    out->rank = ix->shape.rank + t->shape.rank - 1;
    for (int i = 0; i < ix->shape.rank; i++)
        out->dim[i] = ix->shape.dim[i];
    for (int i = 1; i < t->shape.rank; i++)
        out->dim[ix->shape.rank + i - 1] = t->shape.dim[i];
    if (!shape_check(out, why, sizeof why))
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "result: %s", why);
    return ASTITCH_OK;
}

static astitch_status infer_reduce(const astitch_graph *g, int32_t id, const Node *n,
                                   const Node *x, Shape *out)
{
    char a[160];
    astitch_reduce_kind k = n->attr.reduce;
    if ((unsigned)k >= ASTITCH_REDUCE_COUNT)
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "invalid reduce kind %d", (int)k);
    bool logical = k == ASTITCH_REDUCE_ANY || k == ASTITCH_REDUCE_ALL;
    if (logical ? x->dtype != ASTITCH_BOOL : !dtype_is_numeric(x->dtype))
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "reduce %s needs %s operand, got %s",
                         astitch_reduce_name(k), logical ? "a bool" : "a float or integer",
                         TS(a, x));
    if (x->shape.rank < 32 && (n->attr.axes >> x->shape.rank) != 0)
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "reduced axes exceed the rank of %s",
                         TS(a, x));
    out->rank = 0;
    for (int i = 0; i < x->shape.rank; i++)
        if (!(n->attr.axes >> i & 1))
            out->dim[out->rank++] = x->shape.dim[i];
    return ASTITCH_OK;
}

/* Checks one operand's dimension list of a dot; used marks dims taken. */
static bool dot_dims_ok(const int64_t *d, int n, int rank, uint32_t *used)
{
    for (int i = 0; i < n; i++) {
        if (d[i] < 0 || d[i] >= rank || (*used >> d[i] & 1))
            return false;
        *used |= 1u << d[i];
    }
    return true;
}

static astitch_status infer_dot(const astitch_graph *g, int32_t id, const Node *n,
                                const Node *l, const Node *r, Shape *out)
{
    char a[160], b[160];
    const astitch_dot_dims *dd = &n->attr.dot;
    if (l->dtype != r->dtype || !dtype_is_numeric(l->dtype))
        return node_fail(g, id, ASTITCH_ERR_GRAPH,
                         "operands must share a float or integer dtype: %s and %s", TS(a, l),
                         TS(b, r));
    uint32_t lu = 0, ru = 0;
    if (dd->nbatch < 0 || dd->ncontract < 0 || dd->nbatch + dd->ncontract > MAX_RANK ||
        !dot_dims_ok(dd->lhs_batch, dd->nbatch, l->shape.rank, &lu) ||
        !dot_dims_ok(dd->lhs_contract, dd->ncontract, l->shape.rank, &lu) ||
        !dot_dims_ok(dd->rhs_batch, dd->nbatch, r->shape.rank, &ru) ||
        !dot_dims_ok(dd->rhs_contract, dd->ncontract, r->shape.rank, &ru))
        return node_fail(g, id, ASTITCH_ERR_GRAPH,
                         "batch/contracting dimensions out of range or repeated for %s x %s",
                         TS(a, l), TS(b, r));
    for (int i = 0; i < dd->nbatch; i++)
        if (l->shape.dim[dd->lhs_batch[i]] != r->shape.dim[dd->rhs_batch[i]])
            return node_fail(g, id, ASTITCH_ERR_GRAPH, "batch dimension %d differs: %s x %s", i,
                             TS(a, l), TS(b, r));
    for (int i = 0; i < dd->ncontract; i++)
        if (l->shape.dim[dd->lhs_contract[i]] != r->shape.dim[dd->rhs_contract[i]])
            return node_fail(g, id, ASTITCH_ERR_GRAPH,
                             "contracting dimension %d differs: %s x %s", i, TS(a, l), TS(b, r));
    int rank = dd->nbatch + (l->shape.rank - dd->nbatch - dd->ncontract) +
               (r->shape.rank - dd->nbatch - dd->ncontract);
    if (rank > MAX_RANK)
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "result rank %d exceeds %d", rank, MAX_RANK);
    out->rank = 0;
    for (int i = 0; i < dd->nbatch; i++)
        out->dim[out->rank++] = l->shape.dim[dd->lhs_batch[i]];
    for (int i = 0; i < l->shape.rank; i++)
        if (!(lu >> i & 1))
            out->dim[out->rank++] = l->shape.dim[i];
    for (int i = 0; i < r->shape.rank; i++)
        if (!(ru >> i & 1))
            out->dim[out->rank++] = r->shape.dim[i];
    char why[160];
    if (!shape_check(out, why, sizeof why))
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "result: %s", why);
    return ASTITCH_OK;
}

static astitch_status infer_elementwise(const astitch_graph *g, int32_t id, const Node *n,
                                        astitch_dtype *dtype, Shape *shape)
{
    char a[160], b[160];
    const Node *x = gnode(g, goperand(g, id, 0));
    int first = n->op == ASTITCH_OP_SELECT ? 1 : 0;
    const Node *v = gnode(g, goperand(g, id, first));
    for (int k = 1; k < n->nin; k++) {
        const Node *y = gnode(g, goperand(g, id, k));
        if (!shape_equal(&x->shape, &y->shape))
            return node_fail(g, id, ASTITCH_ERR_GRAPH,
                             "operand shapes differ: %s vs %s (broadcasts are explicit)",
                             TS(a, x), TS(b, y));
        if (k > first && y->dtype != v->dtype)
            return node_fail(g, id, ASTITCH_ERR_GRAPH, "operand dtypes differ: %s vs %s",
                             TS(a, v), TS(b, y));
    }
    *shape = x->shape;
    if (n->op == ASTITCH_OP_SELECT) {
        if (x->dtype != ASTITCH_BOOL)
            return node_fail(g, id, ASTITCH_ERR_GRAPH, "predicate %s must be bool", TS(a, x));
        *dtype = v->dtype;
        return ASTITCH_OK;
    }
    if (n->op == ASTITCH_OP_CONVERT) {
        *dtype = n->dtype;
        return dtype_is_valid(n->dtype)
                   ? ASTITCH_OK
                   : node_fail(g, id, ASTITCH_ERR_GRAPH, "invalid target dtype %d", (int)n->dtype);
    }
    if (!op_defined_on(n->op, x->dtype))
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "needs %s operand, got %s",
                         op_operands_rule(n->op), TS(a, x));
    *dtype = op_is_compare(n->op) ? ASTITCH_BOOL : x->dtype;
    return ASTITCH_OK;
}

astitch_status infer_node(const astitch_graph *g, int32_t id, astitch_dtype *dtype, Shape *shape)
{
    const Node *n = gnode(g, id);
    char a[160], b[160];
    if ((unsigned)n->op >= ASTITCH_OP_COUNT)
        return node_fail(g, id, ASTITCH_ERR_GRAPH, "unknown op %d", (int)n->op);
    int arity = astitch_op_arity(n->op);
    if ((arity >= 0 && n->nin != arity) || (arity < 0 && n->op != ASTITCH_OP_CUSTOM && n->nin < 1))
        return arity >= 0 ? node_fail(g, id, ASTITCH_ERR_GRAPH, "has %d operand%s, needs %d",
                                      n->nin, n->nin == 1 ? "" : "s", arity)
                          : node_fail(g, id, ASTITCH_ERR_GRAPH, "has %d operands, needs at least 1",
                                      n->nin);
    for (int k = 0; k < n->nin; k++)
        if (goperand(g, id, k) < 0 || goperand(g, id, k) >= id)
            return node_fail(g, id, ASTITCH_ERR_GRAPH, "operand %d (%d) is not an earlier node", k,
                             goperand(g, id, k));
    *dtype = n->dtype;
    *shape = n->shape;
    const Node *x = n->nin > 0 ? gnode(g, goperand(g, id, 0)) : NULL;
    astitch_status s;
    switch (n->op) {
    case ASTITCH_OP_PARAMETER:
        return infer_declared(g, id, n);
    case ASTITCH_OP_CONSTANT:
        if ((s = infer_declared(g, id, n)) != ASTITCH_OK)
            return s;
        return infer_constant(g, id, n);
    case ASTITCH_OP_IOTA:
        if ((s = infer_declared(g, id, n)) != ASTITCH_OK)
            return s;
        if (!dtype_is_numeric(n->dtype))
            return node_fail(g, id, ASTITCH_ERR_GRAPH, "iota needs a float or integer dtype, not %s",
                             astitch_dtype_name(n->dtype));
        if (n->attr.axis < 0 || n->attr.axis >= n->shape.rank)
            return node_fail(g, id, ASTITCH_ERR_GRAPH, "axis %d is out of range for %s",
                             n->attr.axis, TS(a, n));
        return ASTITCH_OK;
    case ASTITCH_OP_CUSTOM:
        if (!n->attr.target || !*n->attr.target)
            return node_fail(g, id, ASTITCH_ERR_GRAPH, "custom op needs a target name");
        return infer_declared(g, id, n);
    case ASTITCH_OP_BROADCAST_IN_DIM:
        if ((s = infer_declared(g, id, n)) != ASTITCH_OK)
            return s;
        *dtype = x->dtype;
        return infer_broadcast(g, id, n, x);
    case ASTITCH_OP_RESHAPE:
        if ((s = infer_declared(g, id, n)) != ASTITCH_OK)
            return s;
        *dtype = x->dtype;
        if (shape_elements(&n->shape) != shape_elements(&x->shape))
            return node_fail(g, id, ASTITCH_ERR_GRAPH,
                             "cannot reshape %s to %s: element counts differ", TS(a, x),
                             type_str(b, sizeof b, x->dtype, &n->shape));
        return ASTITCH_OK;
    case ASTITCH_OP_TRANSPOSE: {
        *dtype = x->dtype;
        shape->rank = x->shape.rank;
        uint32_t used = 0;
        for (int i = 0; i < x->shape.rank; i++) {
            int64_t p = n->attr.dims[i];
            if (p < 0 || p >= x->shape.rank || (used >> p & 1))
                return node_fail(g, id, ASTITCH_ERR_GRAPH,
                                 "permutation is not a permutation of 0..%d for %s",
                                 x->shape.rank - 1, TS(a, x));
            used |= 1u << p;
            shape->dim[i] = x->shape.dim[p];
        }
        return ASTITCH_OK;
    }
    case ASTITCH_OP_SLICE:
        *dtype = x->dtype;
        return infer_slice(g, id, n, x, shape);
    case ASTITCH_OP_CONCATENATE:
        *dtype = x->dtype;
        return infer_concatenate(g, id, n, shape);
    case ASTITCH_OP_GATHER:
        *dtype = x->dtype;
        return infer_gather(g, id, x, gnode(g, goperand(g, id, 1)), shape);
    case ASTITCH_OP_REDUCE:
        *dtype = x->dtype;
        return infer_reduce(g, id, n, x, shape);
    case ASTITCH_OP_DOT:
        *dtype = x->dtype;
        return infer_dot(g, id, n, x, gnode(g, goperand(g, id, 1)), shape);
    default:
        return infer_elementwise(g, id, n, dtype, shape);
    }
}
