/*
 * interp_elem.c: element-wise semantics of the reference interpreter.
 *
 * Floats are computed in double and rounded to the node's dtype after every op (f16 and bf16
 * through f32, as the kernels compute them). Integers are computed in 64 bits and wrapped to the
 * dtype's width (two's complement). Defined edge cases:
 *   integer div by zero = 0, INT_MIN / -1 wraps to INT_MIN; rem takes the sign of the dividend
 *   (C % and fmod), integer rem by zero = 0; max/min propagate NaN and order -0 below +0;
 *   round = half away from zero; sign(±0) = ±0, sign(NaN) = NaN; relu(x) = max(x, 0);
 *   float -> int conversion truncates toward zero, saturates, and maps NaN to 0;
 *   conversion to bool is x != 0 (NaN -> true).
 */
#include <math.h>
#include <stdint.h>

#include "ir.h"

double wide_round(astitch_dtype t, double x)
{
    switch (t) {
    case ASTITCH_F32: return (float)x;
    case ASTITCH_F16: return half_to_float(float_to_half((float)x));
    case ASTITCH_BF16: return bf16_to_float(float_to_bf16((float)x));
    default: return x;
    }
}

int64_t wide_wrap(astitch_dtype t, uint64_t x)
{
    switch (t) {
    case ASTITCH_I32: return (int32_t)(uint32_t)x;
    case ASTITCH_BOOL: return x != 0;
    default: return (int64_t)x;
    }
}

Wide wide_from_double(astitch_dtype t, double x)
{
    Wide w;
    if (dtype_is_float(t)) {
        w.f = wide_round(t, x);
        return w;
    }
    if (t == ASTITCH_BOOL) {
        w.i = x != 0;
        return w;
    }
    bool i32 = t == ASTITCH_I32;
    double lim = i32 ? 2147483648.0 : 9223372036854775808.0; /* 2^31, 2^63 */
    if (isnan(x))
        w.i = 0;
    else if (x >= lim)
        w.i = i32 ? INT32_MAX : INT64_MAX;
    else if (x <= -lim)
        w.i = i32 ? INT32_MIN : INT64_MIN;
    else
        w.i = (int64_t)x;
    return w;
}

double wide_max(double a, double b)
{
    if (isnan(a) || isnan(b))
        return NAN;
    if (a == b)
        return signbit(a) ? b : a;
    return a > b ? a : b;
}

double wide_min(double a, double b)
{
    if (isnan(a) || isnan(b))
        return NAN;
    if (a == b)
        return signbit(a) ? a : b;
    return a < b ? a : b;
}

static double unary_float(astitch_op op, double x)
{
    switch (op) {
    case ASTITCH_OP_NEG: return -x;
    case ASTITCH_OP_ABS: return fabs(x);
    case ASTITCH_OP_EXP: return exp(x);
    case ASTITCH_OP_LOG: return log(x);
    case ASTITCH_OP_LOG1P: return log1p(x);
    case ASTITCH_OP_EXPM1: return expm1(x);
    case ASTITCH_OP_SQRT: return sqrt(x);
    case ASTITCH_OP_RSQRT: return 1.0 / sqrt(x);
    case ASTITCH_OP_TANH: return tanh(x);
    case ASTITCH_OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case ASTITCH_OP_ERF: return erf(x);
    case ASTITCH_OP_SIN: return sin(x);
    case ASTITCH_OP_COS: return cos(x);
    case ASTITCH_OP_FLOOR: return floor(x);
    case ASTITCH_OP_CEIL: return ceil(x);
    case ASTITCH_OP_ROUND: return round(x);
    case ASTITCH_OP_SIGN: return isnan(x) || x == 0 ? x : x > 0 ? 1.0 : -1.0;
    case ASTITCH_OP_RELU: return wide_max(x, 0.0);
    default: return NAN;
    }
}

/* x is a value of integer or bool dtype t. */
static int64_t unary_int(astitch_op op, astitch_dtype t, int64_t x)
{
    switch (op) {
    case ASTITCH_OP_NEG: return wide_wrap(t, 0 - (uint64_t)x);
    case ASTITCH_OP_ABS: return x < 0 ? wide_wrap(t, 0 - (uint64_t)x) : x;
    case ASTITCH_OP_SIGN: return (x > 0) - (x < 0);
    case ASTITCH_OP_NOT: return t == ASTITCH_BOOL ? !x : wide_wrap(t, ~(uint64_t)x);
    case ASTITCH_OP_RELU: return x > 0 ? x : 0;
    default: return 0;
    }
}

static double binary_float(astitch_op op, double a, double b)
{
    switch (op) {
    case ASTITCH_OP_ADD: return a + b;
    case ASTITCH_OP_SUB: return a - b;
    case ASTITCH_OP_MUL: return a * b;
    case ASTITCH_OP_DIV: return a / b;
    case ASTITCH_OP_POW: return pow(a, b);
    case ASTITCH_OP_MAX: return wide_max(a, b);
    case ASTITCH_OP_MIN: return wide_min(a, b);
    case ASTITCH_OP_REM: return fmod(a, b);
    default: return NAN;
    }
}

static int64_t binary_int(astitch_op op, astitch_dtype t, int64_t a, int64_t b)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case ASTITCH_OP_ADD: return wide_wrap(t, ua + ub);
    case ASTITCH_OP_SUB: return wide_wrap(t, ua - ub);
    case ASTITCH_OP_MUL: return wide_wrap(t, ua * ub);
    case ASTITCH_OP_DIV: return b == 0 ? 0 : b == -1 ? wide_wrap(t, 0 - ua) : a / b;
    case ASTITCH_OP_REM: return b == 0 || b == -1 ? 0 : a % b;
    case ASTITCH_OP_MAX: return a > b ? a : b;
    case ASTITCH_OP_MIN: return a < b ? a : b;
    case ASTITCH_OP_AND: return a & b;
    case ASTITCH_OP_OR: return a | b;
    default: return 0;
    }
}

/* Comparison op given how its operands order: less, equal, greater (none of the three for an
 * unordered pair, a NaN: then only ne holds, as IEEE says). */
static bool compare_ordered(astitch_op op, bool lt, bool eq, bool gt)
{
    switch (op) {
    case ASTITCH_OP_EQ: return eq;
    case ASTITCH_OP_NE: return !eq;
    case ASTITCH_OP_LT: return lt;
    case ASTITCH_OP_LE: return lt || eq;
    case ASTITCH_OP_GT: return gt;
    default: return gt || eq;
    }
}

static bool compare(astitch_op op, double a, double b)
{
    return compare_ordered(op, a < b, a == b, a > b);
}

static bool compare_int(astitch_op op, int64_t a, int64_t b)
{
    return compare_ordered(op, a < b, a == b, a > b);
}

static void convert(astitch_dtype from, astitch_dtype to, const Wide *x, Wide *out, int64_t n)
{
    for (int64_t k = 0; k < n; k++) {
        if (dtype_is_float(from))
            out[k] = wide_from_double(to, x[k].f);
        else if (to == ASTITCH_F32)
            out[k].f = (float)x[k].i; /* one rounding, even for i64 */
        else if (dtype_is_float(to))
            out[k].f = wide_round(to, (float)x[k].i);
        else
            out[k].i = wide_wrap(to, (uint64_t)x[k].i);
    }
}

astitch_status interp_elementwise(const astitch_graph *g, int32_t id, Wide *const *val, Wide *out)
{
    const Node *n = gnode(g, id);
    astitch_op op = n->op;
    int64_t count = shape_elements(&n->shape);
    const Wide *x = val[goperand(g, id, 0)];
    astitch_dtype xt = gnode(g, goperand(g, id, 0))->dtype;
    astitch_dtype t = n->dtype;
    if (!op_is_elementwise(op) || !op_defined_on(op, op == ASTITCH_OP_SELECT ? t : xt))
        return node_fail(g, id, ASTITCH_ERR_INTERNAL, "no reference semantics on %s",
                         astitch_dtype_name(xt));
    bool flt = dtype_is_float(xt);
    if (op == ASTITCH_OP_CONVERT) {
        convert(xt, t, x, out, count);
    } else if (op == ASTITCH_OP_SELECT) {
        const Wide *a = val[goperand(g, id, 1)], *b = val[goperand(g, id, 2)];
        for (int64_t k = 0; k < count; k++)
            out[k] = x[k].i ? a[k] : b[k];
    } else if (n->nin == 1) {
        for (int64_t k = 0; k < count; k++) {
            if (flt)
                out[k].f = wide_round(t, unary_float(op, x[k].f));
            else
                out[k].i = unary_int(op, t, x[k].i);
        }
    } else if (op_is_compare(op)) {
        const Wide *y = val[goperand(g, id, 1)];
        for (int64_t k = 0; k < count; k++)
            out[k].i = flt ? compare(op, x[k].f, y[k].f) : compare_int(op, x[k].i, y[k].i);
    } else {
        const Wide *y = val[goperand(g, id, 1)];
        for (int64_t k = 0; k < count; k++) {
            if (flt)
                out[k].f = wide_round(t, binary_float(op, x[k].f, y[k].f));
            else
                out[k].i = binary_int(op, t, x[k].i, y[k].i);
        }
    }
    return ASTITCH_OK;
}
