/*
 * test_interp_elem.c: element-wise ops, convert and f16/bf16 arithmetic of the reference
 * interpreter, each op on every dtype it accepts, on random inputs plus edge values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "interp_check.h"

/* ---- element-wise: unary ------------------------------------------------------------------- */

static double r_neg(double x) { return -x; }
static double r_rsqrt(double x) { return 1 / sqrt(x); }
static double r_sigmoid(double x) { return x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)); }
static double r_round(double x) { return copysign(floor(fabs(x) + 0.5), x); }
static double r_sign(double x) { return x > 0 ? 1 : x < 0 ? -1 : x; }
static double r_relu(double x) { return isnan(x) ? x : x > 0 ? x : 0.0; }

typedef struct UnaryCase {
    astitch_op op;
    double (*ref)(double);
    double lo, hi, rel;
} UnaryCase;

static const UnaryCase unary_cases[] = {
    {ASTITCH_OP_NEG, r_neg, -10, 10, 0},        {ASTITCH_OP_ABS, fabs, -10, 10, 0},
    {ASTITCH_OP_EXP, exp, -10, 10, 1e-6},       {ASTITCH_OP_LOG, log, 1e-3, 100, 1e-6},
    {ASTITCH_OP_LOG1P, log1p, -0.9, 10, 1e-6},  {ASTITCH_OP_EXPM1, expm1, -5, 5, 1e-6},
    {ASTITCH_OP_SQRT, sqrt, 0, 100, 0},         {ASTITCH_OP_RSQRT, r_rsqrt, 1e-2, 100, 1e-6},
    {ASTITCH_OP_TANH, tanh, -5, 5, 1e-6},       {ASTITCH_OP_SIGMOID, r_sigmoid, -30, 30, 1e-6},
    {ASTITCH_OP_ERF, erf, -3, 3, 1e-6},         {ASTITCH_OP_SIN, sin, -10, 10, 1e-6},
    {ASTITCH_OP_COS, cos, -10, 10, 1e-6},       {ASTITCH_OP_FLOOR, floor, -10, 10, 0},
    {ASTITCH_OP_CEIL, ceil, -10, 10, 0},        {ASTITCH_OP_ROUND, r_round, -10, 10, 0},
    {ASTITCH_OP_SIGN, r_sign, -10, 10, 0},      {ASTITCH_OP_RELU, r_relu, -10, 10, 0},
};

static const float float_specials[] = {NAN,  INFINITY, -INFINITY, -0.0f, 0.0f,   0.5f,
                                       -0.5f, 2.5f,     -2.5f,     1.0f,  1e-12f, -3e-13f};
#define NSPECIAL (int)(sizeof float_specials / sizeof float_specials[0])

static void test_unary_float(void **state)
{
    for (size_t c = 0; c < sizeof unary_cases / sizeof unary_cases[0]; c++) {
        const UnaryCase *uc = &unary_cases[c];
        Fx f;
        fx_open(&f);
        int64_t dims[] = {5, 8};
        int64_t n = 40;
        output(&f, astitch_unary(f.g, uc->op, param(&f, ASTITCH_F32, 2, dims)));
        float *x = rand_floats(n, uc->lo, uc->hi), got[40];
        memcpy(x, float_specials, sizeof float_specials);
        double want[40];
        for (int64_t k = 0; k < n; k++)
            want[k] = uc->ref(x[k]);
        run(&f, (const void *[]){x}, (void *[]){got});
        expect_f32(astitch_op_name(uc->op), n, got, want, uc->rel);
        free(x);
        fx_close(&f);
    }
}

static int64_t r_unary_int(astitch_op op, astitch_dtype t, int64_t x)
{
    switch (op) {
    case ASTITCH_OP_NEG: return wrap(t, -(i128)x);
    case ASTITCH_OP_ABS: return wrap(t, x < 0 ? -(i128)x : x);
    case ASTITCH_OP_SIGN: return x > 0 ? 1 : x < 0 ? -1 : 0;
    case ASTITCH_OP_NOT: return t == ASTITCH_BOOL ? !x : -1 - x;
    default: return x > 0 ? x : 0; /* relu */
    }
}

static void test_unary_int(void **state)
{
    const astitch_op ops[] = {ASTITCH_OP_NEG, ASTITCH_OP_ABS, ASTITCH_OP_SIGN, ASTITCH_OP_NOT,
                              ASTITCH_OP_RELU};
    const astitch_dtype types[] = {ASTITCH_I32, ASTITCH_I64, ASTITCH_BOOL};
    for (int ti = 0; ti < 3; ti++)
        for (int oi = 0; oi < 5; oi++) {
            astitch_dtype t = types[ti];
            if (t == ASTITCH_BOOL && ops[oi] != ASTITCH_OP_NOT)
                continue;
            Fx f;
            fx_open(&f);
            int64_t n = 64;
            output(&f, astitch_unary(f.g, ops[oi], param(&f, t, 1, &n)));
            int64_t x[64], want[64], xb[64], got[64];
            for (int64_t k = 0; k < n; k++) {
                x[k] = t == ASTITCH_BOOL ? (int64_t)(next64() & 1) : rand_of(t);
                put_int(t, xb, k, x[k]);
                want[k] = r_unary_int(ops[oi], t, x[k]);
            }
            run(&f, (const void *[]){xb}, (void *[]){got});
            expect_ints(astitch_op_name(ops[oi]), n, t, got, want);
            fx_close(&f);
        }
}

/* ---- element-wise: binary ------------------------------------------------------------------ */

static double r_max(double a, double b)
{
    if (isnan(a) || isnan(b))
        return NAN;
    if (a == 0 && b == 0)
        return signbit(a) && signbit(b) ? -0.0 : 0.0;
    return a > b ? a : b;
}

static double r_min(double a, double b)
{
    if (isnan(a) || isnan(b))
        return NAN;
    if (a == 0 && b == 0)
        return signbit(a) || signbit(b) ? -0.0 : 0.0;
    return a < b ? a : b;
}

static double r_binary_float(astitch_op op, double a, double b)
{
    switch (op) {
    case ASTITCH_OP_ADD: return a + b;
    case ASTITCH_OP_SUB: return a - b;
    case ASTITCH_OP_MUL: return a * b;
    case ASTITCH_OP_DIV: return a / b;
    case ASTITCH_OP_POW: return pow(a, b);
    case ASTITCH_OP_MAX: return r_max(a, b);
    case ASTITCH_OP_MIN: return r_min(a, b);
    case ASTITCH_OP_REM: return fmod(a, b);
    case ASTITCH_OP_EQ: return a == b;
    case ASTITCH_OP_NE: return a != b;
    case ASTITCH_OP_LT: return a < b;
    case ASTITCH_OP_LE: return a <= b;
    case ASTITCH_OP_GT: return a > b;
    default: return a >= b;
    }
}

static bool is_compare(astitch_op op) { return op >= ASTITCH_OP_EQ && op <= ASTITCH_OP_GE; }

static void test_binary_float(void **state)
{
    const astitch_op ops[] = {ASTITCH_OP_ADD, ASTITCH_OP_SUB, ASTITCH_OP_MUL, ASTITCH_OP_DIV,
                              ASTITCH_OP_POW, ASTITCH_OP_MAX, ASTITCH_OP_MIN, ASTITCH_OP_REM,
                              ASTITCH_OP_EQ,  ASTITCH_OP_NE,  ASTITCH_OP_LT,  ASTITCH_OP_LE,
                              ASTITCH_OP_GT,  ASTITCH_OP_GE};
    const float pairs[][2] = {{NAN, 1},       {1, NAN},     {-0.0f, 0.0f}, {0.0f, -0.0f},
                              {INFINITY, INFINITY}, {INFINITY, -INFINITY}, {-INFINITY, 2},
                              {3, 0},         {-3, 0},      {0, 0},        {2.5f, 2.5f},
                              {-2, 3},        {-2, 0.5f},   {-7.5f, 2},    {7.5f, -2}};
    const int npairs = (int)(sizeof pairs / sizeof pairs[0]);
    for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
        astitch_op op = ops[oi];
        Fx f;
        fx_open(&f);
        int64_t dims[] = {4, 16};
        int64_t n = 64;
        astitch_node a = param(&f, ASTITCH_F32, 2, dims), b = param(&f, ASTITCH_F32, 2, dims);
        output(&f, astitch_binary(f.g, op, a, b));
        float *x = rand_floats(n, op == ASTITCH_OP_POW ? 0 : -10, 10);
        float *y = rand_floats(n, op == ASTITCH_OP_POW ? -3 : -10, op == ASTITCH_OP_POW ? 3 : 10);
        for (int k = 0; k < npairs; k++) {
            x[k] = pairs[k][0];
            y[k] = pairs[k][1];
        }
        for (int64_t k = npairs; k < n; k += 5)
            y[k] = x[k]; /* equal operands for the compares */
        float got[64];
        uint8_t gotb[64];
        double want[64];
        for (int64_t k = 0; k < n; k++)
            want[k] = r_binary_float(op, x[k], y[k]);
        bool cmp = is_compare(op);
        run(&f, (const void *[]){x, y}, (void *[]){cmp ? (void *)gotb : (void *)got});
        if (cmp) {
            int64_t wi[64];
            for (int64_t k = 0; k < n; k++)
                wi[k] = (int64_t)want[k];
            expect_ints(astitch_op_name(op), n, ASTITCH_BOOL, gotb, wi);
        } else {
            expect_f32(astitch_op_name(op), n, got, want, op == ASTITCH_OP_POW ? 1e-6 : 0);
        }
        free(x);
        free(y);
        fx_close(&f);
    }
}

static int64_t r_binary_int(astitch_op op, astitch_dtype t, int64_t a, int64_t b)
{
    switch (op) {
    case ASTITCH_OP_ADD: return wrap(t, (i128)a + b);
    case ASTITCH_OP_SUB: return wrap(t, (i128)a - b);
    case ASTITCH_OP_MUL: return wrap(t, (i128)a * b);
    case ASTITCH_OP_DIV: return b == 0 ? 0 : wrap(t, (i128)a / b);
    case ASTITCH_OP_REM: return b == 0 ? 0 : wrap(t, (i128)a - (i128)a / b * b);
    case ASTITCH_OP_MAX: return a > b ? a : b;
    case ASTITCH_OP_MIN: return a < b ? a : b;
    case ASTITCH_OP_AND: return t == ASTITCH_BOOL ? (a && b) : (a & b);
    case ASTITCH_OP_OR: return t == ASTITCH_BOOL ? (a || b) : (a | b);
    case ASTITCH_OP_EQ: return a == b;
    case ASTITCH_OP_NE: return a != b;
    case ASTITCH_OP_LT: return a < b;
    case ASTITCH_OP_LE: return a <= b;
    case ASTITCH_OP_GT: return a > b;
    default: return a >= b;
    }
}

static void test_binary_int(void **state)
{
    const astitch_op ops[] = {ASTITCH_OP_ADD, ASTITCH_OP_SUB, ASTITCH_OP_MUL, ASTITCH_OP_DIV,
                              ASTITCH_OP_REM, ASTITCH_OP_MAX, ASTITCH_OP_MIN, ASTITCH_OP_AND,
                              ASTITCH_OP_OR,  ASTITCH_OP_EQ,  ASTITCH_OP_NE,  ASTITCH_OP_LT,
                              ASTITCH_OP_LE,  ASTITCH_OP_GT,  ASTITCH_OP_GE};
    const astitch_dtype types[] = {ASTITCH_I32, ASTITCH_I64, ASTITCH_BOOL};
    for (int ti = 0; ti < 3; ti++)
        for (size_t oi = 0; oi < sizeof ops / sizeof ops[0]; oi++) {
            astitch_dtype t = types[ti];
            astitch_op op = ops[oi];
            bool logical = op == ASTITCH_OP_AND || op == ASTITCH_OP_OR || op == ASTITCH_OP_EQ ||
                           op == ASTITCH_OP_NE;
            if (t == ASTITCH_BOOL && !logical)
                continue;
            Fx f;
            fx_open(&f);
            int64_t n = 200;
            astitch_node a = param(&f, t, 1, &n), b = param(&f, t, 1, &n);
            output(&f, astitch_binary(f.g, op, a, b));
            int64_t x[200], y[200], want[200], xb[200], yb[200], got[200];
            for (int64_t k = 0; k < n; k++) {
                x[k] = t == ASTITCH_BOOL ? (int64_t)(next64() & 1) : rand_of(t);
                y[k] = t == ASTITCH_BOOL ? (int64_t)(next64() & 1) : rand_of(t);
                if (k % 7 == 0)
                    y[k] = x[k];
                put_int(t, xb, k, x[k]);
                put_int(t, yb, k, y[k]);
                want[k] = r_binary_int(op, t, x[k], y[k]);
            }
            run(&f, (const void *[]){xb, yb}, (void *[]){got});
            char what[64];
            snprintf(what, sizeof what, "%s %s", astitch_op_name(op), astitch_dtype_name(t));
            expect_ints(what, n, is_compare(op) ? ASTITCH_BOOL : t, got, want);
            fx_close(&f);
        }
}

/* A wrapped sum is what later ops see: (a + b) / 7 and (a + b) < 0 in i32, and the sums of a
 * reduce and a dot widened to i64. */
static void test_int_wrap_feeds_later_ops(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t n = 64;
    astitch_node a = param(&f, ASTITCH_I32, 1, &n), b = param(&f, ASTITCH_I32, 1, &n);
    astitch_node s = astitch_binary(f.g, ASTITCH_OP_ADD, a, b);
    astitch_node seven = astitch_constant(f.g, ASTITCH_I32, 1, &n, (const double[]){7}, 1);
    astitch_node zero = astitch_constant(f.g, ASTITCH_I32, 1, &n, (const double[]){0}, 1);
    output(&f, astitch_binary(f.g, ASTITCH_OP_DIV, s, seven));
    output(&f, astitch_binary(f.g, ASTITCH_OP_LT, s, zero));
    output(&f, astitch_convert(f.g, s, ASTITCH_I64));
    int64_t md[] = {64, 2}, two = 2;
    astitch_node m = param(&f, ASTITCH_I32, 2, md), ones = param(&f, ASTITCH_I32, 1, &two);
    astitch_dot_dims dd = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
    output(&f, astitch_convert(f.g, astitch_reduce(f.g, ASTITCH_REDUCE_SUM, m, 1, (const int64_t[]){1}),
                               ASTITCH_I64));
    output(&f, astitch_convert(f.g, astitch_dot(f.g, m, ones, &dd), ASTITCH_I64));
    int32_t x[64], y[64], q[64], xy[128], one[2] = {1, 1};
    int64_t rsum[64], dsum[64];
    uint8_t neg[64];
    int64_t wide[64], wq[64], wn[64], ws[64];
    for (int64_t k = 0; k < n; k++) {
        x[k] = (int32_t)rand_int(INT32_MAX / 2, INT32_MAX);
        y[k] = (int32_t)rand_int(INT32_MAX / 2, INT32_MAX);
        ws[k] = wrap(ASTITCH_I32, (i128)x[k] + y[k]); /* always overflows */
        wq[k] = ws[k] / 7;
        wn[k] = ws[k] < 0;
        xy[2 * k] = x[k];
        xy[2 * k + 1] = y[k];
    }
    run(&f, (const void *[]){x, y, xy, one}, (void *[]){q, neg, wide, rsum, dsum});
    expect_ints("wrapped reduce sum as i64", n, ASTITCH_I64, rsum, ws);
    expect_ints("wrapped dot as i64", n, ASTITCH_I64, dsum, ws);
    expect_ints("wrapped sum / 7", n, ASTITCH_I32, q, wq);
    expect_ints("wrapped sum < 0", n, ASTITCH_BOOL, neg, wn);
    expect_ints("wrapped sum as i64", n, ASTITCH_I64, wide, ws);
    fx_close(&f);
}

/* Division and remainder by zero, INT_MIN / -1, and signs of remainders, spelled out. */
static void test_int_division_edges(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t n = 8;
    astitch_node a = param(&f, ASTITCH_I32, 1, &n), b = param(&f, ASTITCH_I32, 1, &n);
    output(&f, astitch_binary(f.g, ASTITCH_OP_DIV, a, b));
    output(&f, astitch_binary(f.g, ASTITCH_OP_REM, a, b));
    int32_t x[] = {7, -7, 7, -7, 5, INT32_MIN, INT32_MIN, 0};
    int32_t y[] = {2, 2, -2, -2, 0, -1, 1, 0};
    int32_t q[8], r[8];
    run(&f, (const void *[]){x, y}, (void *[]){q, r});
    const int64_t wq[] = {3, -3, -3, 3, 0, INT32_MIN, INT32_MIN, 0};
    const int64_t wr[] = {1, -1, 1, -1, 0, 0, 0, 0};
    expect_ints("div", n, ASTITCH_I32, q, wq);
    expect_ints("rem", n, ASTITCH_I32, r, wr);
    fx_close(&f);
}

static void test_select(void **state)
{
    const astitch_dtype types[] = {ASTITCH_F32, ASTITCH_I64, ASTITCH_F16};
    for (int ti = 0; ti < 3; ti++) {
        astitch_dtype t = types[ti];
        Fx f;
        fx_open(&f);
        int64_t dims[] = {3, 7}, n = 21;
        astitch_node p = param(&f, ASTITCH_BOOL, 2, dims);
        astitch_node a = param(&f, t, 2, dims), b = param(&f, t, 2, dims);
        output(&f, astitch_select(f.g, p, a, b));
        uint8_t pb[21];
        int64_t x[21], y[21], got[21];
        for (int64_t k = 0; k < n; k++) {
            pb[k] = (uint8_t)(next64() % 2 ? 1 + next64() % 200 : 0); /* any nonzero is true */
            x[k] = (int64_t)next64();
            y[k] = (int64_t)next64();
            if (t == ASTITCH_F16) {
                x[k] = rand_f16(), y[k] = rand_f16();
            } else if (t == ASTITCH_F32) {
                x[k] = rand_int(-1000000, 1000000), y[k] = rand_int(-1000000, 1000000);
            }
        }
        union {
            float f[21];
            int64_t i[21];
            uint16_t h[21];
        } xa, ya;
        for (int64_t k = 0; k < n; k++) {
            if (t == ASTITCH_F32)
                xa.f[k] = (float)x[k], ya.f[k] = (float)y[k];
            else if (t == ASTITCH_I64)
                xa.i[k] = x[k], ya.i[k] = y[k];
            else
                xa.h[k] = (uint16_t)x[k], ya.h[k] = (uint16_t)y[k];
        }
        run(&f, (const void *[]){pb, &xa, &ya}, (void *[]){got});
        for (int64_t k = 0; k < n; k++) {
            int64_t w = pb[k] ? x[k] : y[k];
            int64_t g = t == ASTITCH_F32   ? (int64_t)((float *)got)[k]
                        : t == ASTITCH_I64 ? got[k]
                                           : ((uint16_t *)got)[k];
            if (g != w)
                fail_msg("select %s: element %lld: got %lld, want %lld", astitch_dtype_name(t),
                         (long long)k, (long long)g, (long long)w);
        }
        fx_close(&f);
    }
}

/* ---- convert ------------------------------------------------------------------------------- */

static void test_convert_float_to_int(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t n = 64;
    astitch_node x = param(&f, ASTITCH_F32, 1, &n);
    output(&f, astitch_convert(f.g, x, ASTITCH_I32));
    output(&f, astitch_convert(f.g, x, ASTITCH_I64));
    output(&f, astitch_convert(f.g, x, ASTITCH_BOOL));
    const float edge[] = {1e10f, -1e10f, NAN, -2.7f, 2.7f, 2147483520.0f, -2147483648.0f,
                          INFINITY, -INFINITY, -0.0f, 1e19f, -1e19f, 9223371487098961920.0f,
                          -9223372036854775808.0f, 0.1f, 123456.75f};
    const int64_t w32[] = {INT32_MAX, INT32_MIN, 0, -2, 2, 2147483520, INT32_MIN, INT32_MAX,
                           INT32_MIN, 0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 0, 123456};
    const int64_t w64[] = {10000000000, -10000000000, 0, -2, 2, 2147483520, -2147483648,
                           INT64_MAX, INT64_MIN, 0, INT64_MAX, INT64_MIN,
                           9223371487098961920, INT64_MIN, 0, 123456};
    float *in = rand_floats(n, -1e6, 1e6);
    memcpy(in, edge, sizeof edge);
    int64_t want32[64], want64[64], wantb[64];
    for (int64_t k = 0; k < n; k++) {
        bool is_edge = k < (int64_t)(sizeof edge / sizeof edge[0]);
        want32[k] = is_edge ? w32[k] : (int64_t)trunc(in[k]);
        want64[k] = is_edge ? w64[k] : (int64_t)trunc(in[k]);
        wantb[k] = in[k] != 0;
    }
    int32_t g32[64];
    int64_t g64[64];
    uint8_t gb[64];
    run(&f, (const void *[]){in}, (void *[]){g32, g64, gb});
    expect_ints("f32->i32", n, ASTITCH_I32, g32, want32);
    expect_ints("f32->i64", n, ASTITCH_I64, g64, want64);
    expect_ints("f32->bool", n, ASTITCH_BOOL, gb, wantb);
    free(in);
    fx_close(&f);
}

/* The float nearest to v (ties to even), by integer arithmetic. */
static double nearest_float(int64_t v)
{
    uint64_t a = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    int e = 63;
    while (e > 0 && !(a >> e & 1))
        e--;
    if (e > 23) {
        uint64_t ulp = (uint64_t)1 << (e - 23), q = a / ulp, r = a % ulp;
        if (r > ulp / 2 || (r == ulp / 2 && (q & 1)))
            q++;
        return (v < 0 ? -1.0 : 1.0) * ldexp((double)q, e - 23);
    }
    return (double)v;
}

static void test_convert_int(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t n = 100;
    astitch_node a = param(&f, ASTITCH_I64, 1, &n), b = param(&f, ASTITCH_I32, 1, &n);
    astitch_node c = param(&f, ASTITCH_BOOL, 1, &n);
    output(&f, astitch_convert(f.g, a, ASTITCH_I32));
    output(&f, astitch_convert(f.g, a, ASTITCH_F32));
    output(&f, astitch_convert(f.g, b, ASTITCH_I64));
    output(&f, astitch_convert(f.g, b, ASTITCH_BOOL));
    output(&f, astitch_convert(f.g, b, ASTITCH_F16));
    output(&f, astitch_convert(f.g, c, ASTITCH_F32));
    output(&f, astitch_convert(f.g, c, ASTITCH_I32));
    int64_t x[100], big[100], w_a32[100], w_b64[100], w_bb[100], w_c32[100];
    int32_t y[100];
    uint8_t z[100];
    double w_af[100], w_cf[100];
    uint16_t w_bh[100];
    for (int64_t k = 0; k < n; k++) {
        x[k] = rand_of(ASTITCH_I64);
        big[k] = k < 2 ? (k ? -1 : 1) * (((int64_t)1 << 62) + ((int64_t)1 << 38) + 1)
                       : (int64_t)next64() >> rand_int(0, 40);
        y[k] = k % 2 ? (int32_t)rand_int(-70000, 70000) : (int32_t)rand_of(ASTITCH_I32);
        z[k] = (uint8_t)(next64() % 2 ? next64() % 256 : 0); /* any nonzero byte is true */
        w_a32[k] = wrap(ASTITCH_I32, x[k]);
        w_af[k] = nearest_float(big[k]);
        w_b64[k] = y[k];
        w_bb[k] = y[k] != 0;
        w_bh[k] = to_f16((double)y[k]);
        w_cf[k] = z[k] != 0;
        w_c32[k] = z[k] != 0;
    }
    int32_t g_a32[100], g_c32[100];
    float g_af[100], g_cf[100];
    int64_t g_b64[100];
    uint8_t g_bb[100];
    uint16_t g_bh[100];
    run(&f, (const void *[]){x, y, z}, (void *[]){g_a32, g_af, g_b64, g_bb, g_bh, g_cf, g_c32});
    expect_ints("i64->i32", n, ASTITCH_I32, g_a32, w_a32);
    expect_ints("i32->i64", n, ASTITCH_I64, g_b64, w_b64);
    expect_ints("i32->bool", n, ASTITCH_BOOL, g_bb, w_bb);
    expect_ints("bool->i32", n, ASTITCH_I32, g_c32, w_c32);
    expect_f32("bool->f32", n, g_cf, w_cf, 0);
    expect_16("i32->f16", n, g_bh, w_bh, 0, false);
    /* i64 -> f32 rounds once: 2^62 + 2^38 + 1 must not round through double to a tie */
    fx_close(&f);
    fx_open(&f);
    output(&f, astitch_convert(f.g, param(&f, ASTITCH_I64, 1, &n), ASTITCH_F32));
    run(&f, (const void *[]){big}, (void *[]){g_af});
    expect_f32("i64->f32", n, g_af, w_af, 0);
    fx_close(&f);
}

/* Every f16 and bf16 pattern decodes exactly; encodings round to nearest even. */
static void test_convert_16bit(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t all = 65536, n = 200;
    astitch_node h = param(&f, ASTITCH_F16, 1, &all), b = param(&f, ASTITCH_BF16, 1, &all);
    astitch_node x = param(&f, ASTITCH_F32, 1, &n);
    output(&f, astitch_convert(f.g, h, ASTITCH_F32));
    output(&f, astitch_convert(f.g, b, ASTITCH_F32));
    output(&f, astitch_convert(f.g, x, ASTITCH_F16));
    output(&f, astitch_convert(f.g, x, ASTITCH_BF16));
    output(&f, astitch_convert(f.g, h, ASTITCH_BF16));
    output(&f, astitch_convert(f.g, b, ASTITCH_F16));
    uint16_t *pat = malloc(65536 * sizeof *pat);
    float *gh = malloc(65536 * sizeof *gh), *gb = malloc(65536 * sizeof *gb);
    uint16_t *g_hb = malloc(65536 * sizeof *g_hb), *g_bh = malloc(65536 * sizeof *g_bh);
    double *want = malloc(65536 * sizeof *want);
    uint16_t *w16 = malloc(65536 * sizeof *w16);
    for (int64_t k = 0; k < all; k++)
        pat[k] = (uint16_t)k;
    const float edge[] = {1.0f, -2.0f, 65504.0f, 65519.99f, 65520.0f, 1e6f, -INFINITY, 0x1p-24f,
                          0x1p-25f, 0x3p-25f, 0x1p-14f, 1 + 0x1p-11f, 1 + 0x3p-11f, 0.1f,
                          -0.0f, NAN, FLT_MAX, 1 + 0x1p-8f, 1 + 0x3p-8f, 0x1p-130f};
    float xs[200];
    uint16_t xh[200], xb[200], wh[200], wb[200];
    for (int64_t k = 0; k < n; k++)
        xs[k] = k < 20 ? edge[k] : (float)(uniform(-1, 1) * ldexp(1, (int)rand_int(-30, 20)));
    run(&f, (const void *[]){pat, pat, xs}, (void *[]){gh, gb, xh, xb, g_hb, g_bh});
    for (int64_t k = 0; k < all; k++)
        want[k] = f16_value((uint16_t)k);
    expect_f32("f16->f32 (all patterns)", all, gh, want, 0);
    for (int64_t k = 0; k < all; k++)
        want[k] = bf16_value((uint16_t)k);
    expect_f32("bf16->f32 (all patterns)", all, gb, want, 0);
    for (int64_t k = 0; k < n; k++) {
        wh[k] = to_f16(xs[k]);
        wb[k] = to_bf16(xs[k]);
    }
    expect_16("f32->f16", n, xh, wh, 0, false);
    expect_16("f32->bf16", n, xb, wb, 0, true);
    const uint16_t spelled[] = {0x3c00, 0xc000, 0x7bff, 0x7bff, 0x7c00, 0x7c00, 0xfc00, 0x0001,
                                0x0000, 0x0002, 0x0400, 0x3c00, 0x3c02, 0x2e66, 0x8000};
    for (int k = 0; k < 15; k++)
        if (xh[k] != spelled[k])
            fail_msg("f32->f16 of %.9g: got 0x%04x, want 0x%04x", xs[k], xh[k], spelled[k]);
    for (int64_t k = 0; k < all; k++)
        w16[k] = to_bf16(f16_value((uint16_t)k));
    expect_16("f16->bf16 (all patterns)", all, g_hb, w16, 0, true);
    for (int64_t k = 0; k < all; k++)
        w16[k] = to_f16(bf16_value((uint16_t)k));
    expect_16("bf16->f16 (all patterns)", all, g_bh, w16, 0, false);
    free(pat);
    free(gh);
    free(gb);
    free(g_hb);
    free(g_bh);
    free(want);
    free(w16);
    fx_close(&f);
}

/* ---- f16 / bf16 arithmetic ----------------------------------------------------------------- */

static double r_unary16(astitch_op op, double x)
{
    switch (op) {
    case ASTITCH_OP_EXP: return exp(x);
    case ASTITCH_OP_TANH: return tanh(x);
    case ASTITCH_OP_RSQRT: return 1 / sqrt(x);
    case ASTITCH_OP_FLOOR: return floor(x);
    default: return -x;
    }
}

typedef struct HalfCase {
    astitch_op op;
    int steps; /* allowed distance: 0 where f32 holds the exact result, else double rounding */
} HalfCase;

static void test_16bit_arithmetic(void **state)
{
    const HalfCase cases[] = {{ASTITCH_OP_ADD, 0},  {ASTITCH_OP_SUB, 0}, {ASTITCH_OP_MUL, 0},
                              {ASTITCH_OP_DIV, 1},  {ASTITCH_OP_MAX, 0}, {ASTITCH_OP_POW, 1},
                              {ASTITCH_OP_EXP, 1},  {ASTITCH_OP_TANH, 1}, {ASTITCH_OP_RSQRT, 1},
                              {ASTITCH_OP_FLOOR, 0}, {ASTITCH_OP_NEG, 0}};
    for (int bf = 0; bf < 2; bf++)
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            astitch_op op = cases[c].op;
            astitch_dtype t = bf ? ASTITCH_BF16 : ASTITCH_F16;
            double (*value)(uint16_t) = bf ? bf16_value : f16_value;
            Fx f;
            fx_open(&f);
            int64_t n = 256;
            astitch_node a = param(&f, t, 1, &n), b = param(&f, t, 1, &n);
            bool unary = astitch_op_arity(op) == 1;
            output(&f, unary ? astitch_unary(f.g, op, a) : astitch_binary(f.g, op, a, b));
            uint16_t x[256], y[256], got[256], want[256];
            for (int64_t k = 0; k < n; k++) {
                x[k] = bf ? rand_bf16() : rand_f16();
                y[k] = bf ? rand_bf16() : rand_f16();
                if (op == ASTITCH_OP_RSQRT || op == ASTITCH_OP_POW)
                    x[k] &= 0x7fff;
                double u = value(x[k]), v = value(y[k]);
                double r = unary ? r_unary16(op, u) : r_binary_float(op, u, v);
                want[k] = bf ? to_bf16(r) : to_f16(r);
            }
            run(&f, (const void *[]){x, y}, (void *[]){got});
            char what[64];
            snprintf(what, sizeof what, "%s %s", astitch_op_name(op), astitch_dtype_name(t));
            expect_16(what, n, got, want, cases[c].steps, bf);
            fx_close(&f);
        }
}

/* (a + b) * c in f16 rounds the sum to f16 before the product. */
static void test_16bit_rounds_every_op(void **state)
{
    for (int bf = 0; bf < 2; bf++) {
        astitch_dtype t = bf ? ASTITCH_BF16 : ASTITCH_F16;
        double (*value)(uint16_t) = bf ? bf16_value : f16_value;
        uint16_t (*to16)(double) = bf ? to_bf16 : to_f16;
        Fx f;
        fx_open(&f);
        int64_t n = 256;
        astitch_node a = param(&f, t, 1, &n), b = param(&f, t, 1, &n), c = param(&f, t, 1, &n);
        output(&f, astitch_binary(f.g, ASTITCH_OP_MUL, astitch_binary(f.g, ASTITCH_OP_ADD, a, b),
                                  c));
        uint16_t x[256], y[256], z[256], got[256], want[256];
        int differs = 0;
        for (int64_t k = 0; k < n; k++) {
            x[k] = bf ? rand_bf16() : rand_f16();
            y[k] = bf ? rand_bf16() : rand_f16();
            z[k] = bf ? rand_bf16() : rand_f16();
            double s = value(to16(value(x[k]) + value(y[k])));
            want[k] = to16(s * value(z[k]));
            differs += want[k] != to16((value(x[k]) + value(y[k])) * value(z[k]));
        }
        assert_true(differs > 0); /* the inputs do tell rounding once from rounding twice */
        run(&f, (const void *[]){x, y, z}, (void *[]){got});
        expect_16(bf ? "(a+b)*c bf16" : "(a+b)*c f16", n, got, want, 0, bf);
        fx_close(&f);
    }
}

const struct CMUnitTest interp_elem_tests[] = {
    cmocka_unit_test(test_unary_float),
    cmocka_unit_test(test_unary_int),
    cmocka_unit_test(test_binary_float),
    cmocka_unit_test(test_binary_int),
    cmocka_unit_test(test_int_wrap_feeds_later_ops),
    cmocka_unit_test(test_int_division_edges),
    cmocka_unit_test(test_select),
    cmocka_unit_test(test_convert_float_to_int),
    cmocka_unit_test(test_convert_int),
    cmocka_unit_test(test_convert_16bit),
    cmocka_unit_test(test_16bit_arithmetic),
    cmocka_unit_test(test_16bit_rounds_every_op),
};
const size_t interp_elem_ntests = sizeof interp_elem_tests / sizeof interp_elem_tests[0];
