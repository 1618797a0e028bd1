/*
 * run_check.c: astitch-run --check: how far an output is from the reference interpreter's.
 * The error is normalized by the output's largest finite reference magnitude (at least 1), so
 * that one tolerance per dtype serves outputs of any scale.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "run.h"

static bool is_float(astitch_dtype t)
{
    return t == ASTITCH_F32 || t == ASTITCH_F16 || t == ASTITCH_BF16;
}

/* Element i of an integer or bool tensor, exactly. */
static int64_t int_element(astitch_dtype t, const void *data, int64_t i)
{
    switch (t) {
    case ASTITCH_I32: { int32_t v; memcpy(&v, (const char *)data + 4 * i, 4); return v; }
    case ASTITCH_I64: { int64_t v; memcpy(&v, (const char *)data + 8 * i, 8); return v; }
    default: return ((const unsigned char *)data)[i];
    }
}

/* The error of one element pair of float dtype t, before normalization: a zero of the other
 * sign than the reference's is as wrong as a NaN where the sign counts (check_zero_sign_counts:
 * max(-0, +0) must be +0). */
static double float_diff(astitch_dtype t, double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b) ? 0 : INFINITY;
    if (isinf(a) || isinf(b))
        return a == b ? 0 : INFINITY;
    if (a == 0 && b == 0 && signbit(a) != signbit(b) && check_zero_sign_counts(t))
        return INFINITY;
    return fabs(a - b);
}

double check_error(const astitch_tensor_info *t, const void *out, const void *ref)
{
    double scale = 1, worst = 0;
    bool fl = is_float(t->dtype);
    for (int64_t i = 0; i < t->elements; i++) {
        double b = fl ? tio_element(t->dtype, ref, i) : (double)int_element(t->dtype, ref, i);
        if (isfinite(b) && fabs(b) > scale)
            scale = fabs(b);
    }
    for (int64_t i = 0; i < t->elements; i++) {
        double d;
        if (fl) {
            d = float_diff(t->dtype, tio_element(t->dtype, out, i), tio_element(t->dtype, ref, i));
        } else {
            int64_t a = int_element(t->dtype, out, i), b = int_element(t->dtype, ref, i);
            /* |a - b| without overflow; at least 1 when they differ */
            d = a == b ? 0 : a > b ? (double)((uint64_t)a - (uint64_t)b)
                                   : (double)((uint64_t)b - (uint64_t)a);
        }
        if (d / scale > worst)
            worst = d / scale;
    }
    return worst;
}

/* Whether a float reference value keeps its class (finite, NaN, infinity, and a zero its sign)
 * under perturbation. */
static bool same_class(double b, double c)
{
    return isnan(b) == isnan(c) && isfinite(b) == isfinite(c) && (isfinite(b) || isnan(b) || b == c) &&
           (b != 0 || c != 0 || signbit(b) == signbit(c));
}

double check_error_conditioned(const astitch_tensor_info *t, const void *out, const void *ref,
                               const void *pert)
{
    if (!is_float(t->dtype))
        return check_error(t, out, ref);
    double scale = 1, worst = 0;
    for (int64_t i = 0; i < t->elements; i++) {
        double b = tio_element(t->dtype, ref, i);
        if (isfinite(b) && fabs(b) > scale)
            scale = fabs(b);
    }
    for (int64_t i = 0; i < t->elements; i++) {
        double b = tio_element(t->dtype, ref, i), c = tio_element(t->dtype, pert, i);
        if (!same_class(b, c))
            continue;
        double slack = isfinite(b) ? CHECK_SLACK * fabs(b - c) / scale : 0;
        double e = float_diff(t->dtype, tio_element(t->dtype, out, i), b) / scale - slack;
        if (e > worst)
            worst = e;
    }
    return worst;
}
