/*
 * json_node.c: one node of graph.json. Checks its keys against its op, decodes its attributes
 * (strictly: integers must be JSON integers, constants must fit their dtype) and calls the
 * public builder. Problems come back as text without position; json_read.c adds
 * "FILE:LINE:COL: node I 'name' (op): " in front.
 */
#include <float.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define KEY_LIST(X)                                                                        \
    X(NAME, "name") X(OP, "op") X(COMMENT, "comment") X(INPUTS, "inputs")                  \
    X(DTYPE, "dtype") X(SHAPE, "shape") X(VALUE, "value") X(VALUES, "values")              \
    X(AXIS, "axis") X(KIND, "kind") X(AXES, "axes") X(BDIMS, "broadcast_dimensions")       \
    X(PERM, "permutation") X(START, "start") X(LIMIT, "limit") X(STRIDES, "strides")       \
    X(LBATCH, "lhs_batch_dims") X(RBATCH, "rhs_batch_dims")                                \
    X(LCONTRACT, "lhs_contracting_dims") X(RCONTRACT, "rhs_contracting_dims")              \
    X(TARGET, "target")

#define KEY_ENUM(id, name) KEY_##id,
enum { KEY_LIST(KEY_ENUM) KEY_COUNT };
#undef KEY_ENUM
#define KEY_NAME(id, name) name,
static const char *const key_names[] = {KEY_LIST(KEY_NAME)};
#undef KEY_NAME
#define K(id) (1u << KEY_##id)

static bool failf(char *why, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool failf(char *why, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
    return false;
}

/* The keys op allows besides name, op and comment, and those it requires. */
static void op_keys(astitch_op op, uint32_t *allowed, uint32_t *required)
{
    uint32_t opt = 0, req;
    switch (op) {
    case ASTITCH_OP_PARAMETER: req = K(DTYPE) | K(SHAPE); break;
    case ASTITCH_OP_CONSTANT: req = K(DTYPE) | K(SHAPE), opt = K(VALUE) | K(VALUES); break;
    case ASTITCH_OP_IOTA: req = K(DTYPE) | K(SHAPE) | K(AXIS); break;
    case ASTITCH_OP_CONVERT: req = K(INPUTS) | K(DTYPE); break;
    case ASTITCH_OP_BROADCAST_IN_DIM: req = K(INPUTS) | K(SHAPE) | K(BDIMS); break;
    case ASTITCH_OP_RESHAPE: req = K(INPUTS) | K(SHAPE); break;
    case ASTITCH_OP_TRANSPOSE: req = K(INPUTS) | K(PERM); break;
    case ASTITCH_OP_SLICE: req = K(INPUTS) | K(START) | K(LIMIT), opt = K(STRIDES); break;
    case ASTITCH_OP_CONCATENATE: req = K(INPUTS) | K(AXIS); break;
    case ASTITCH_OP_REDUCE: req = K(INPUTS) | K(KIND) | K(AXES); break;
    case ASTITCH_OP_DOT:
        req = K(INPUTS) | K(LCONTRACT) | K(RCONTRACT), opt = K(LBATCH) | K(RBATCH);
        break;
    case ASTITCH_OP_CUSTOM: req = K(INPUTS) | K(TARGET) | K(DTYPE) | K(SHAPE); break;
    default: req = K(INPUTS); break; /* element-wise, select, gather */
    }
    *required = req;
    *allowed = req | opt | K(NAME) | K(OP) | K(COMMENT);
}

static int key_index(const char *key)
{
    for (int k = 0; k < KEY_COUNT; k++)
        if (strcmp(key_names[k], key) == 0)
            return k;
    return -1;
}

static const char *jtype(const json_t *v)
{
    if (!v)
        return "nothing";
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE: return "true";
    case JSON_FALSE: return "false";
    case JSON_NULL: return "null";
    }
    return "?";
}

bool json_node_check(const json_t *obj, astitch_op op, char *why, size_t len)
{
    uint32_t allowed, required, seen = 0;
    op_keys(op, &allowed, &required);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        int k = key_index(key);
        if (k < 0)
            return failf(why, len, "unknown key \"%.64s\"", key);
        if (!(allowed & (1u << k)))
            return failf(why, len, "key \"%s\" does not apply to op %s", key, astitch_op_name(op));
        seen |= 1u << k;
    }
    for (int k = 0; k < KEY_COUNT; k++)
        if ((required & (1u << k)) && !(seen & (1u << k)))
            return failf(why, len, "missing \"%s\"", key_names[k]);
    if (op == ASTITCH_OP_CONSTANT && !(seen & (K(VALUE) | K(VALUES))))
        return failf(why, len, "missing \"value\" or \"values\"");
    if ((seen & K(VALUE)) && (seen & K(VALUES)))
        return failf(why, len, "both \"value\" and \"values\" given; use one");
    json_t *c = json_object_get(obj, "comment");
    if (c && !json_is_string(c))
        return failf(why, len, "\"comment\" must be a string, not %s", jtype(c));
    json_t *in = json_object_get(obj, "inputs");
    if (!in)
        return true;
    if (!json_is_array(in))
        return failf(why, len, "\"inputs\" must be an array of node names, not %s", jtype(in));
    size_t n = json_array_size(in);
    for (size_t i = 0; i < n; i++)
        if (!json_is_string(json_array_get(in, i)))
            return failf(why, len, "\"inputs\"[%zu] must be a node name (a string), not %s", i,
                         jtype(json_array_get(in, i)));
    int arity = astitch_op_arity(op);
    if (arity >= 0 && n != (size_t)arity)
        return failf(why, len, "takes %d input%s, got %zu", arity, arity == 1 ? "" : "s", n);
    if (arity < 0 && n == 0 && op != ASTITCH_OP_CUSTOM)
        return failf(why, len, "takes at least one input, got none");
    return true;
}

/* Reads the array of at most max integers at key into out[], its length into *n. */
static bool get_ints(const json_t *obj, const char *key, int max, int64_t *out, int *n,
                     char *why, size_t len)
{
    const json_t *a = json_object_get(obj, key);
    if (!json_is_array(a))
        return failf(why, len, "\"%s\" must be an array of integers, not %s", key, jtype(a));
    size_t size = json_array_size(a);
    if (size > (size_t)max) {
        if (strcmp(key, "shape") == 0)
            return failf(why, len, "\"shape\" has rank %zu; the most is %d", size, max);
        return failf(why, len, "\"%s\" has %zu entries; the most is %d", key, size, max);
    }
    for (size_t i = 0; i < size; i++) {
        const json_t *e = json_array_get(a, i);
        if (json_is_real(e))
            return failf(why, len, "\"%s\"[%zu] must be an integer, not the real number %.17g",
                         key, i, json_real_value(e));
        if (!json_is_integer(e))
            return failf(why, len, "\"%s\"[%zu] must be an integer, not %s", key, i, jtype(e));
        out[i] = json_integer_value(e);
    }
    *n = (int)size;
    return true;
}

/* Reads an integer that must fit an int. */
static bool get_int(const json_t *obj, const char *key, int *out, char *why, size_t len)
{
    const json_t *v = json_object_get(obj, key);
    if (!json_is_integer(v))
        return failf(why, len, "\"%s\" must be an integer, not %s", key, jtype(v));
    json_int_t x = json_integer_value(v);
    if (x < INT32_MIN || x > INT32_MAX)
        return failf(why, len, "\"%s\" is out of range (%" PRId64 ")", key, (int64_t)x);
    *out = (int)x;
    return true;
}

static bool get_string(const json_t *obj, const char *key, const char **out, char *why,
                       size_t len)
{
    const json_t *v = json_object_get(obj, key);
    if (!json_is_string(v))
        return failf(why, len, "\"%s\" must be a string, not %s", key, jtype(v));
    *out = json_string_value(v);
    return true;
}

static bool get_dtype(const json_t *obj, astitch_dtype *t, char *why, size_t len)
{
    const char *s = NULL;
    if (!get_string(obj, "dtype", &s, why, len))
        return false;
    if (astitch_dtype_from_name(s, t) != ASTITCH_OK)
        return failf(why, len, "unknown dtype \"%.64s\"", s);
    return true;
}

/* Reads "shape": rank 0..8, dims >= 0, at most MAX_ELEMENTS elements. */
static bool get_shape(const json_t *obj, Shape *s, int64_t *elements, char *why, size_t len)
{
    if (!get_ints(obj, "shape", MAX_RANK, s->dim, &s->rank, why, len))
        return false;
    int64_t n = 1;
    bool zero = false, big = false;
    for (int i = 0; i < s->rank; i++) {
        int64_t d = s->dim[i];
        if (d < 0)
            return failf(why, len, "\"shape\"[%d] is negative (%" PRId64 ")", i, d);
        if (d > MAX_ELEMENTS) /* even beside a zero extent */
            return failf(why, len, "\"shape\"[%d] (%" PRId64 ") exceeds the limit of 2^40", i, d);
        zero = zero || d == 0;
    }
    for (int i = 0; !zero && !big && i < s->rank; i++) { /* a zero extent: no elements */
        if (n > MAX_ELEMENTS / s->dim[i])
            big = true;
        else
            n *= s->dim[i];
    }
    if (big) {
        char buf[160];
        return failf(why, len, "\"shape\" %s has more than 2^40 elements",
                     type_str(buf, sizeof buf, ASTITCH_F32, s) + 3);
    }
    *elements = zero ? 0 : n;
    return true;
}

/* The largest finite value of float dtype t. */
static double float_max(astitch_dtype t)
{
    switch (t) {
    case ASTITCH_F16: return 65504.0;
    case ASTITCH_BF16: return ldexp(2.0 - ldexp(1, -7), 127); /* 3.3895e38 */
    default: return FLT_MAX;
    }
}

/* Decodes one constant element v of dtype t; `what` names it in messages. */
static bool get_value(const json_t *v, astitch_dtype t, const char *what, double *out,
                      char *why, size_t len)
{
    const char *tn = astitch_dtype_name(t);
    const char *an = t == ASTITCH_BF16 || t == ASTITCH_BOOL ? "a" : "an";
    if (t == ASTITCH_BOOL) {
        if (json_is_boolean(v)) {
            *out = json_is_true(v);
            return true;
        }
        if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) {
            *out = (double)json_integer_value(v);
            return true;
        }
        if (json_is_integer(v))
            return failf(why, len,
                         "%s of a bool constant must be true, false, 0 or 1, not %" PRId64, what,
                         (int64_t)json_integer_value(v));
        return failf(why, len, "%s of a bool constant must be true, false, 0 or 1, not %s", what,
                     jtype(v));
    }
    if (dtype_is_int(t)) {
        if (!json_is_integer(v))
            return failf(why, len, "%s of an %s constant must be an integer, not %s", what, tn,
                         json_is_real(v) ? "a real number" : jtype(v));
        json_int_t x = json_integer_value(v);
        if (t == ASTITCH_I32 && (x < INT32_MIN || x > INT32_MAX))
            return failf(why, len, "%s %" PRId64 " is out of range for i32", what, (int64_t)x);
        if (t == ASTITCH_I64 && (x > ((json_int_t)1 << 53) || x < -((json_int_t)1 << 53)))
            return failf(why, len,
                         "%s %" PRId64 " is out of range for an i64 constant (|v| <= 2^53, "
                         "which a double holds exactly)", what, (int64_t)x);
        *out = (double)x;
        return true;
    }
    double x;
    if (json_is_integer(v)) {
        x = (double)json_integer_value(v);
    } else if (json_is_real(v)) {
        x = json_real_value(v);
    } else if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "nan") == 0)
            x = NAN;
        else if (strcmp(s, "inf") == 0)
            x = INFINITY;
        else if (strcmp(s, "-inf") == 0)
            x = -INFINITY;
        else
            return failf(why, len,
                         "%s must be a number or one of \"nan\", \"inf\", \"-inf\", not \"%.32s\"",
                         what, s);
        *out = x;
        return true;
    } else {
        return failf(why, len, "%s of %s %s constant must be a number, not %s", what, an, tn,
                     jtype(v));
    }
    if (fabs(x) > float_max(t))
        return failf(why, len, "%s %.9g is out of range for %s", what, x, tn);
    *out = x;
    return true;
}

/* Decodes "value" (one element, splatted) or "values" (exactly `elements` of them). */
static bool get_values(const json_t *obj, astitch_dtype t, int64_t elements, double **vals,
                       int64_t *count, char *why, size_t len)
{
    const json_t *one = json_object_get(obj, "value");
    if (one) {
        *count = 1;
        *vals = malloc(sizeof **vals);
        if (!*vals)
            return failf(why, len, "out of memory");
        return get_value(one, t, "\"value\"", *vals, why, len);
    }
    const json_t *a = json_object_get(obj, "values");
    if (!json_is_array(a))
        return failf(why, len, "\"values\" must be an array of numbers, not %s", jtype(a));
    size_t n = json_array_size(a);
    if ((int64_t)n != elements)
        return failf(why, len, "\"values\" has %zu numbers; the shape has %" PRId64 " elements",
                     n, elements);
    if (n == 0)
        return failf(why, len, "\"values\" is empty; a constant without elements takes \"value\"");
    *count = (int64_t)n;
    *vals = malloc(n * sizeof **vals);
    if (!*vals)
        return failf(why, len, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char what[48];
        snprintf(what, sizeof what, "\"values\"[%zu]", i);
        if (!get_value(json_array_get(a, i), t, what, &(*vals)[i], why, len))
            return false;
    }
    return true;
}

/* Reads list `key` of obj into out, one entry per axis of operand x. */
static bool get_axis_ints(const json_t *obj, const char *key, const astitch_graph *g,
                          astitch_node x, int64_t *out, char *why, size_t len)
{
    int n = 0;
    if (!get_ints(obj, key, MAX_RANK, out, &n, why, len))
        return false;
    astitch_tensor_info info;
    if (astitch_node_info(g, x, &info) != ASTITCH_OK)
        return failf(why, len, "bad operand");
    if (n != info.rank)
        return failf(why, len, "\"%s\" has %d entries; operand '%.64s' has rank %d", key, n,
                     info.name, info.rank);
    return true;
}

/* Decodes the attributes of obj and calls the builder of op; false with why on a problem found
 * before the builder ran. *id receives the builder's result. */
static bool build(astitch_graph *g, const json_t *obj, astitch_op op, const astitch_node *in,
                  int nin, astitch_node *id, char *why, size_t len)
{
    astitch_dtype t = ASTITCH_F32;
    Shape s = {0};
    int64_t elements = 0;
    int n, axis;
    *id = ASTITCH_NO_NODE;
    if (json_object_get(obj, "dtype") && !get_dtype(obj, &t, why, len))
        return false;
    if (json_object_get(obj, "shape") && !get_shape(obj, &s, &elements, why, len))
        return false;
    switch (op) {
    case ASTITCH_OP_PARAMETER:
        *id = astitch_parameter(g, json_string_value(json_object_get(obj, "name")), t, s.rank,
                                s.dim);
        return true;
    case ASTITCH_OP_CONSTANT: {
        double *vals = NULL;
        int64_t count = 0;
        bool ok = get_values(obj, t, elements, &vals, &count, why, len);
        if (ok)
            *id = astitch_constant(g, t, s.rank, s.dim, vals, count);
        free(vals);
        return ok;
    }
    case ASTITCH_OP_IOTA:
        if (!get_int(obj, "axis", &axis, why, len))
            return false;
        *id = astitch_iota(g, t, s.rank, s.dim, axis);
        return true;
    case ASTITCH_OP_CONVERT: *id = astitch_convert(g, in[0], t); return true;
    case ASTITCH_OP_SELECT: *id = astitch_select(g, in[0], in[1], in[2]); return true;
    case ASTITCH_OP_BROADCAST_IN_DIM: {
        int64_t bd[MAX_RANK];
        if (!get_axis_ints(obj, "broadcast_dimensions", g, in[0], bd, why, len))
            return false;
        *id = astitch_broadcast_in_dim(g, in[0], s.rank, s.dim, bd);
        return true;
    }
    case ASTITCH_OP_RESHAPE: *id = astitch_reshape(g, in[0], s.rank, s.dim); return true;
    case ASTITCH_OP_TRANSPOSE: {
        int64_t perm[MAX_RANK];
        if (!get_axis_ints(obj, "permutation", g, in[0], perm, why, len))
            return false;
        *id = astitch_transpose(g, in[0], perm);
        return true;
    }
    case ASTITCH_OP_SLICE: {
        int64_t start[MAX_RANK], limit[MAX_RANK], stride[MAX_RANK];
        bool strided = json_object_get(obj, "strides") != NULL;
        if (!get_axis_ints(obj, "start", g, in[0], start, why, len) ||
            !get_axis_ints(obj, "limit", g, in[0], limit, why, len) ||
            (strided && !get_axis_ints(obj, "strides", g, in[0], stride, why, len)))
            return false;
        *id = astitch_slice(g, in[0], start, limit, strided ? stride : NULL);
        return true;
    }
    case ASTITCH_OP_CONCATENATE:
        if (!get_int(obj, "axis", &axis, why, len))
            return false;
        *id = astitch_concatenate(g, nin, in, axis);
        return true;
    case ASTITCH_OP_GATHER: *id = astitch_gather(g, in[0], in[1]); return true;
    case ASTITCH_OP_REDUCE: {
        const char *kind;
        astitch_reduce_kind k;
        int64_t axes[MAX_RANK];
        if (!get_string(obj, "kind", &kind, why, len))
            return false;
        if (astitch_reduce_from_name(kind, &k) != ASTITCH_OK)
            return failf(why, len, "unknown reduce kind \"%.64s\"", kind);
        if (!get_ints(obj, "axes", MAX_RANK, axes, &n, why, len))
            return false;
        *id = astitch_reduce(g, k, in[0], n, axes);
        return true;
    }
    case ASTITCH_OP_DOT: {
        astitch_dot_dims d = {0};
        int nl = 0, nr = 0;
        if (json_object_get(obj, "lhs_batch_dims") &&
            !get_ints(obj, "lhs_batch_dims", MAX_RANK, d.lhs_batch, &nl, why, len))
            return false;
        if (json_object_get(obj, "rhs_batch_dims") &&
            !get_ints(obj, "rhs_batch_dims", MAX_RANK, d.rhs_batch, &nr, why, len))
            return false;
        if (nl != nr)
            return failf(why, len, "\"lhs_batch_dims\" has %d entries, \"rhs_batch_dims\" %d",
                         nl, nr);
        d.nbatch = nl;
        if (!get_ints(obj, "lhs_contracting_dims", MAX_RANK, d.lhs_contract, &nl, why, len) ||
            !get_ints(obj, "rhs_contracting_dims", MAX_RANK, d.rhs_contract, &nr, why, len))
            return false;
        if (nl != nr)
            return failf(why, len,
                         "\"lhs_contracting_dims\" has %d entries, \"rhs_contracting_dims\" %d",
                         nl, nr);
        d.ncontract = nl;
        *id = astitch_dot(g, in[0], in[1], &d);
        return true;
    }
    case ASTITCH_OP_CUSTOM: {
        const char *target;
        if (!get_string(obj, "target", &target, why, len))
            return false;
        if (!*target)
            return failf(why, len, "\"target\" is empty");
        *id = astitch_custom(g, target, nin, in, t, s.rank, s.dim);
        return true;
    }
    default:
        break;
    }
    if (astitch_op_arity(op) == 1)
        *id = astitch_unary(g, op, in[0]);
    else
        *id = astitch_binary(g, op, in[0], in[1]);
    return true;
}

/* Copies a builder message without its "node N 'name' (op): " prefix, which names the node by
 * its id in the graph under construction; the caller names it by its place in the file. */
static void strip_node_prefix(const char *msg, char *why, size_t len)
{
    if (strncmp(msg, "node ", 5) == 0) {
        const char *end = strstr(msg, "): ");
        if (end)
            msg = end + 3;
    }
    snprintf(why, len, "%s", msg);
}

astitch_node json_node_build(astitch_graph *g, const json_t *obj, astitch_op op,
                             const astitch_node *in, int nin, char *why, size_t len,
                             astitch_status *status)
{
    astitch_node id;
    if (!build(g, obj, op, in, nin, &id, why, len)) {
        *status = ASTITCH_ERR_GRAPH;
        return ASTITCH_NO_NODE;
    }
    if (id == ASTITCH_NO_NODE) {
        strip_node_prefix(astitch_last_error(g->ctx), why, len);
        *status = astitch_graph_status(g);
        if (*status == ASTITCH_OK)
            *status = ASTITCH_ERR_GRAPH;
    }
    return id;
}
