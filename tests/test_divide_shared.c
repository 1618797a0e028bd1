/*
 * test_divide_shared.c: float divisions that share a divisor (a softmax's row sum, a row's
 * broadcast value) take its reciprocal once and multiply (lib/codegen/emit_divisor.c), and the
 * quotients stay within 1.5 ulp of x / d over the whole range: divisors above 2^126 and below
 * 2^-126 (subnormal), zeros, infinities and NaN, with IEEE division's signs, zeros, infinities
 * and NaN. The PTX for the h100 model has no f32 division left in a resident softmax, a
 * streamed one (the division in a loop) or x / broadcast(d), and one reciprocal; the values run
 * on a target.
 *
 * Usage: test_divide_shared [host|cuda] (default host, whose reciprocal is IEEE 1 / x; the gpu
 * suite runs cuda, whose reciprocal is the hardware's and a Newton step, and it exits 77, a
 * skip, without a usable device). Inputs: special values, and random bit patterns (every
 * exponent) fresh each run. Also divisions by quotients that are themselves divisions sharing a
 * divisor, against the reference interpreter.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <llvm-c/Analysis.h>

#include "astitch/runtime.h"
#define ASTITCH_EMIT_INTERNAL
#include "codegen/codegen.h"
#include "diff_check.h"
#include "test_target.h"

enum { ROWS = 512, COLS = 256 };

static astitch_target target = ASTITCH_TARGET_HOST;

/* q = x / broadcast(d) for x [ROWS, COLS] and d [ROWS]: its only output. */
static astitch_graph *divide_rows(astitch_context *ctx)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t shape[2] = {ROWS, COLS}, rows = ROWS, dim0 = 0;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, shape);
    astitch_node d = astitch_parameter(g, "d", ASTITCH_F32, 1, &rows);
    astitch_node q = astitch_binary(g, ASTITCH_OP_DIV, x,
                                    astitch_broadcast_in_dim(g, d, 2, shape, &dim0));
    assert_int_equal(astitch_add_output(g, q), ASTITCH_OK);
    assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
    return g;
}

/* softmax over the last axis of x [rows, cols]. */
static astitch_graph *softmax(astitch_context *ctx, int64_t rows, int64_t cols)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t shape[2] = {rows, cols}, axis = 1, dim0 = 0;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, shape);
    astitch_node m = astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, &axis);
    astitch_node ex = astitch_unary(
        g, ASTITCH_OP_EXP,
        astitch_binary(g, ASTITCH_OP_SUB, x, astitch_broadcast_in_dim(g, m, 2, shape, &dim0)));
    astitch_node s = astitch_reduce(g, ASTITCH_REDUCE_SUM, ex, 1, &axis);
    astitch_node p = astitch_binary(g, ASTITCH_OP_DIV, ex,
                                    astitch_broadcast_in_dim(g, s, 2, shape, &dim0));
    assert_int_equal(astitch_add_output(g, p), ASTITCH_OK);
    assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
    return g;
}

static int count(const char *text, const char *what)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
        n++;
    return n;
}

/* g's PTX for the h100 model: no f32 division, and 1 to most reciprocals. */
static void check_ptx(astitch_graph *g, const char *name, int most)
{
    char *ptx = test_emit_ptx(g);
    int divisions = count(ptx, "div.full.f32") + count(ptx, "div.rn.f32") +
                    count(ptx, "div.approx.f32");
    int reciprocals = count(ptx, "rcp.approx.ftz.f32");
    astitch_free(ptx);
    printf("%s: %d f32 divisions, %d reciprocals\n", name, divisions, reciprocals);
    assert_int_equal(divisions, 0);
    assert_true(reciprocals >= 1 && reciprocals <= most);
}

static void test_ptx(void **state)
{
    (void)state;
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = divide_rows(ctx);
    check_ptx(g, "x / broadcast(d)", 1);
    astitch_graph_destroy(g);
    g = softmax(ctx, 4096, 1024); /* rows held in registers */
    check_ptx(g, "softmax of rows of 1024", 1);
    astitch_graph_destroy(g);
    /* rows split over blocks and streamed: the sum read from scratch again for each run of
     * elements, one reciprocal per run, in each of the loop's forms */
    g = softmax(ctx, 64, 65536);
    check_ptx(g, "softmax of rows of 65536", 4);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

static uint64_t next(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 32;
}

static float from_bits(uint32_t u)
{
    float v;
    memcpy(&v, &u, 4);
    return v;
}

/* The spacing of f32 values at |v|, subnormals' below 2^-126. */
static double f32_ulp(double v)
{
    int e;
    frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
    return ldexp(1.0, (e - 1 < -126 ? -126 : e - 1) - 23);
}

/* Whether q is within the bound of x / d; explains in why when not. */
static bool quotient_ok(float x, float d, float q, char *why, size_t len)
{
    volatile float ieee = x / d; /* one IEEE division: NaN, sign, zero and infinity cases */
    snprintf(why, len, "%a out, IEEE gives %a", (double)q, (double)ieee);
    if (isnan(ieee))
        return isnan(q);
    if (isnan(q) || signbit(q) != signbit(ieee))
        return false;
    double exact = (double)x / (double)d; /* within 2^-53 of the quotient; 0 or inf exact */
    if (isinf(exact) || fabs(exact) >= 0x1p128 - 0x1p103) /* rounds to infinity */
        return isinf(q);
    if (exact == 0)
        return q == 0;
    double qd = isinf(q) ? copysign(0x1p128, q) : (double)q;
    double bound = 1.5 * f32_ulp(exact);
    snprintf(why, len, "%a out, x / d is %a: off by %.3g ulp", (double)q, exact,
             fabs(qd - exact) / f32_ulp(exact));
    return fabs(qd - exact) <= bound;
}

static void test_values(void **state)
{
    (void)state;
    static const float special_d[] = {
        0.0f,      -0.0f,       INFINITY,   -INFINITY,   NAN,         FLT_MAX,
        -FLT_MAX,  0x1p126f,    0x1.8p126f, 0x1p127f,    -0x1.5p127f, FLT_MIN,
        -FLT_MIN,  0x1p-149f,   -0x1p-149f, 0x1.8p-130f, 0x1.fffffcp-127f, 1.0f,
        -1.0f,     3.0f,        0.1f,       12345.678f,  0x1.000002p-126f, 0x1.fffffep125f};
    static const float special_x[] = {0.0f,      -0.0f,     INFINITY,  -INFINITY, NAN,
                                      FLT_MAX,   -FLT_MAX,  FLT_MIN,   0x1p-149f, 1.0f,
                                      -3.0f,     0x1p-140f, 0x1p100f,  1e-30f,    7.0f};
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = divide_rows(ctx);
    uint64_t seed = diff_fresh_seed(), s = seed;
    printf("target %s, seed %llu\n", target == ASTITCH_TARGET_CUDA ? "cuda" : "host",
           (unsigned long long)seed);
    float *x = malloc(sizeof(float) * ROWS * COLS), *q = malloc(sizeof(float) * ROWS * COLS);
    float d[ROWS];
    assert_non_null(x);
    assert_non_null(q);
    size_t nd = sizeof special_d / sizeof *special_d, nx = sizeof special_x / sizeof *special_x;
    for (int r = 0; r < ROWS; r++) {
        /* the special divisors, random bit patterns, and divisors at the edges of the range */
        d[r] = (size_t)r < nd ? special_d[r] : from_bits((uint32_t)next(&s));
        if (r % 8 == 1 && (size_t)r >= nd) { /* |d| below 2^-126 or from 2^126 on */
            uint32_t exponent = r % 16 == 1 ? 0u : 253u + (uint32_t)(next(&s) % 2);
            d[r] = from_bits((uint32_t)(next(&s) & 0x807fffff) | exponent << 23);
        }
        for (int c = 0; c < COLS; c++) {
            size_t i = (size_t)r * COLS + (size_t)c;
            x[i] = (size_t)c < nx ? special_x[c] : from_bits((uint32_t)next(&s));
            q[i] = NAN;
        }
    }
    test_run_on(g, target, (const void *[]){x, d}, (void *[]){q});
    int bad = 0, edge = 0;
    for (int r = 0; r < ROWS; r++) {
        edge += fabsf(d[r]) > 0x1p126f || fabsf(d[r]) < 0x1p-126f;
        for (int c = 0; c < COLS; c++) {
            size_t i = (size_t)r * COLS + (size_t)c;
            char why[160];
            if (!quotient_ok(x[i], d[r], q[i], why, sizeof why) && bad++ < 8)
                printf("%a / %a (row %d, column %d): %s\n", (double)x[i], (double)d[r], r, c,
                       why);
        }
    }
    printf("%d of %d outside the bound; %d divisors beyond 2^+-126\n", bad, ROWS * COLS, edge);
    free(x);
    free(q);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
    assert_int_equal(bad, 0);
    assert_true(edge > ROWS / 16);
}

/* x / broadcast(d / e) + x / broadcast(f / e): divisions whose divisor is itself a shared
 * divisor's quotient, rewritten in turn; against the reference interpreter on random inputs. */
static void test_quotient_divisors(void **state)
{
    (void)state;
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t shape[2] = {ROWS, COLS}, rows = ROWS, dim0 = 0;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, shape);
    astitch_node d = astitch_parameter(g, "d", ASTITCH_F32, 1, &rows);
    astitch_node e = astitch_parameter(g, "e", ASTITCH_F32, 1, &rows);
    astitch_node f = astitch_parameter(g, "f", ASTITCH_F32, 1, &rows);
    astitch_node q[2];
    for (int i = 0; i < 2; i++) {
        astitch_node ratio = astitch_binary(g, ASTITCH_OP_DIV, i ? f : d, e);
        q[i] = astitch_binary(g, ASTITCH_OP_DIV, x,
                              astitch_broadcast_in_dim(g, ratio, 2, shape, &dim0));
    }
    assert_int_equal(astitch_add_output(g, astitch_binary(g, ASTITCH_OP_ADD, q[0], q[1])),
                     ASTITCH_OK);
    assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
    DiffResult r;
    uint64_t seed = diff_fresh_seed();
    astitch_status st = diff_run(g, target, ASTITCH_FUSION_STITCH, seed, &r);
    printf("quotient divisors (seed %llu): %s, worst error %.3g%s%s\n", (unsigned long long)seed,
           astitch_status_name(st), r.worst, r.ok ? "" : ": ", r.ok ? "" : r.message);
    assert_int_equal(st, ASTITCH_OK);
    assert_true(r.ok);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

static int calls_of(LLVMValueRef fn, const char *name)
{
    int n = 0;
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(fn); bb; bb = LLVMGetNextBasicBlock(bb))
        for (LLVMValueRef i = LLVMGetFirstInstruction(bb); i; i = LLVMGetNextInstruction(i))
            if (LLVMIsACallInst(i) &&
                strcmp(LLVMGetValueName(LLVMGetCalledValue(i)), name) == 0)
                n++;
    return n;
}

/* The rewrite on a module written by hand, in the order that makes a rewritten division the
 * divisor of a group found after it: q = a / c, then x / q and y / q, then b / c. The group of
 * c is found first (its last site is the last call) and replaces q; the group of q must then
 * divide by q's replacement. The module verifies, and no division is left. */
static void test_rewrite_order(void **state)
{
    (void)state;
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    LLVMContextRef c = LLVMContextCreate();
    LLVMModuleRef m = LLVMModuleCreateWithNameInContext("order", c);
    LLVMTypeRef f32 = LLVMFloatTypeInContext(c);
    LLVMTypeRef params[5] = {f32, f32, f32, f32, f32};
    LLVMValueRef fn = LLVMAddFunction(m, "f", LLVMFunctionType(f32, params, 5, 0));
    LLVMBuilderRef b = LLVMCreateBuilderInContext(c);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(c, fn, "entry"));
    LLVMValueRef p[5];
    for (int i = 0; i < 5; i++)
        p[i] = LLVMGetParam(fn, (unsigned)i); /* a, b, c, x, y */
    LLVMValueRef q = prim_call(b, m, PRIM_FDIV_F32, (LLVMValueRef[]){p[0], p[2]}, 2);
    LLVMValueRef xq = prim_call(b, m, PRIM_FDIV_F32, (LLVMValueRef[]){p[3], q}, 2);
    LLVMValueRef yq = prim_call(b, m, PRIM_FDIV_F32, (LLVMValueRef[]){p[4], q}, 2);
    LLVMValueRef bc = prim_call(b, m, PRIM_FDIV_F32, (LLVMValueRef[]){p[1], p[2]}, 2);
    LLVMBuildRet(b, LLVMBuildFAdd(b, LLVMBuildFAdd(b, xq, yq, ""), bc, ""));
    LLVMDisposeBuilder(b);
    assert_int_equal(emit_share_divisors(ctx, m), ASTITCH_OK);
    char *msg = NULL;
    if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg))
        fail_msg("the rewritten module does not verify: %s", msg);
    LLVMDisposeMessage(msg);
    assert_int_equal(calls_of(fn, "astitch_fdiv_f32"), 0);
    assert_int_equal(calls_of(fn, "astitch_rcp_f32"), 2);
    LLVMDisposeModule(m);
    LLVMContextDispose(c);
    astitch_context_destroy(ctx);
}

int main(int argc, char **argv)
{
    int status = test_target_from_args(argc, argv, "test_divide_shared", &target);
    if (status >= 0)
        return status;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ptx),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_quotient_divisors),
        cmocka_unit_test(test_rewrite_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
