/* emit_ops.c: the arithmetic of one element: every element-wise op, convert and select
 * (ev_apply), as the reference interpreter computes them, and the reductions' identities and
 * combines. */
#define ASTITCH_EMIT_INTERNAL
#include <math.h>
#include <stdio.h>

#include "codegen.h"

static LLVMValueRef fconst(Emit *e, double v) { return LLVMConstReal(LLVMFloatTypeInContext(e->c), v); }

/* A constant of dtype t holding v, in register type. */
LLVMValueRef ev_const(Emit *e, astitch_dtype t, double v)
{
    if (dtype_is_float(t))
        return fconst(e, v);
    return LLVMConstInt(ev_type(e, t), (unsigned long long)(int64_t)v, 1);
}

static LLVMValueRef fmath(Emit *e, MathId id, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef args[2] = {a, b};
    return math_call(e->b, e->m, id, args);
}

/* e^x: f32 through the primitive astitch_exp_f32 (Triton's form on NVPTX, two instructions
 * where libdevice's expf takes about ten: the exp of a long softmax's second pass made its
 * kernel instruction-bound), f64 through libdevice. */
static LLVMValueRef exp_of(Emit *e, LLVMValueRef x)
{
    if (LLVMGetTypeKind(LLVMTypeOf(x)) != LLVMFloatTypeKind)
        return fmath(e, MATH_EXP, x, NULL);
    return prim_call(e->b, e->m, PRIM_EXP_F32, &x, 1);
}

/* max/min as the reference: NaN if either operand is NaN, -0 below +0 (llvm.maximum and
 * llvm.minimum: one max.NaN/min.NaN instruction on sm_80 and later). */
static LLVMValueRef maxmin(Emit *e, bool max, astitch_dtype t, LLVMValueRef a, LLVMValueRef b)
{
    if (!dtype_is_float(t)) {
        LLVMValueRef gt = LLVMBuildICmp(e->b, max ? LLVMIntSGT : LLVMIntSLT, a, b, "");
        return LLVMBuildSelect(e->b, gt, a, b, "");
    }
    const char *name = max ? "llvm.maximum.f32" : "llvm.minimum.f32";
    LLVMTypeRef f32 = LLVMFloatTypeInContext(e->c);
    LLVMTypeRef fty = LLVMFunctionType(f32, (LLVMTypeRef[]){f32, f32}, 2, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->m, name);
    if (!f)
        f = LLVMAddFunction(e->m, name, fty);
    return LLVMBuildCall2(e->b, fty, f, (LLVMValueRef[]){a, b}, 2, "");
}

/* |x| of an f32 as the reference: the sign bit cleared (llvm_fabs_f32; a select on x < 0
 * kept -0). */
static LLVMValueRef fabs_of(Emit *e, LLVMValueRef x) { return llvm_fabs_f32(e->b, e->m, x); }

/* Integer division and remainder: by zero gives 0, and MIN / -1 wraps (no trap). */
static LLVMValueRef int_divrem(Emit *e, bool rem, LLVMValueRef a, LLVMValueRef b)
{
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef zero = LLVMConstInt(t, 0, 0), one = LLVMConstInt(t, 1, 0);
    LLVMValueRef mone = LLVMConstAllOnes(t);
    LLVMValueRef bz = LLVMBuildICmp(e->b, LLVMIntEQ, b, zero, "");
    LLVMValueRef bm = LLVMBuildICmp(e->b, LLVMIntEQ, b, mone, "");
    LLVMValueRef safe = LLVMBuildSelect(e->b, LLVMBuildOr(e->b, bz, bm, ""), one, b, "");
    LLVMValueRef q = rem ? LLVMBuildSRem(e->b, a, safe, "") : LLVMBuildSDiv(e->b, a, safe, "");
    LLVMValueRef special = rem ? zero : LLVMBuildSub(e->b, zero, a, "");
    q = LLVMBuildSelect(e->b, bm, special, q, "");
    return LLVMBuildSelect(e->b, bz, zero, q, "");
}

static LLVMValueRef fp_to_int_sat(Emit *e, LLVMValueRef v, LLVMTypeRef to)
{
    char name[48];
    snprintf(name, sizeof name, "llvm.fptosi.sat.i%u.f32", LLVMGetIntTypeWidth(to));
    LLVMTypeRef fty = LLVMFunctionType(to, (LLVMTypeRef[]){LLVMFloatTypeInContext(e->c)}, 1, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->m, name);
    if (!f)
        f = LLVMAddFunction(e->m, name, fty);
    return LLVMBuildCall2(e->b, fty, f, &v, 1, "");
}

static LLVMValueRef convert(Emit *e, astitch_dtype from, astitch_dtype to, LLVMValueRef v)
{
    LLVMTypeRef tt = ev_type(e, to);
    if (dtype_is_float(from)) {
        if (dtype_is_float(to))
            return ev_round_to(e, to, v);
        if (to == ASTITCH_BOOL)
            return LLVMBuildFCmp(e->b, LLVMRealUNE, v, fconst(e, 0), "");
        return fp_to_int_sat(e, v, tt);
    }
    if (from == ASTITCH_BOOL) {
        if (dtype_is_float(to))
            return LLVMBuildUIToFP(e->b, v, tt, "");
        return LLVMBuildZExt(e->b, v, tt, "");
    }
    if (dtype_is_float(to))
        return ev_round_to(e, to, LLVMBuildSIToFP(e->b, v, tt, ""));
    if (to == ASTITCH_BOOL)
        return LLVMBuildICmp(e->b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
    return LLVMBuildIntCast2(e->b, v, tt, 1, "");
}

static LLVMValueRef unary(Emit *e, const Node *n, astitch_dtype t, LLVMValueRef x)
{
    bool fl = dtype_is_float(t);
    LLVMTypeRef ty = LLVMTypeOf(x);
    LLVMValueRef zero = fl ? fconst(e, 0) : LLVMConstInt(ty, 0, 0);
    switch (n->op) {
    case ASTITCH_OP_NEG: return fl ? LLVMBuildFNeg(e->b, x, "") : LLVMBuildSub(e->b, zero, x, "");
    case ASTITCH_OP_ABS:
        if (fl)
            return fabs_of(e, x);
        return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, x, zero, ""),
                               LLVMBuildSub(e->b, zero, x, ""), x, "");
    case ASTITCH_OP_EXP: return exp_of(e, x);
    case ASTITCH_OP_LOG: return fmath(e, MATH_LOG, x, NULL);
    case ASTITCH_OP_LOG1P: return fmath(e, MATH_LOG1P, x, NULL);
    case ASTITCH_OP_EXPM1: return fmath(e, MATH_EXPM1, x, NULL);
    case ASTITCH_OP_SQRT: return fmath(e, MATH_SQRT, x, NULL);
    case ASTITCH_OP_RSQRT: return fmath(e, MATH_RSQRT, x, NULL);
    case ASTITCH_OP_TANH: return fmath(e, MATH_TANH, x, NULL);
    case ASTITCH_OP_ERF: return fmath(e, MATH_ERF, x, NULL);
    case ASTITCH_OP_SIN: return fmath(e, MATH_SIN, x, NULL);
    case ASTITCH_OP_COS: return fmath(e, MATH_COS, x, NULL);
    case ASTITCH_OP_FLOOR: return fmath(e, MATH_FLOOR, x, NULL);
    case ASTITCH_OP_CEIL: return fmath(e, MATH_CEIL, x, NULL);
    case ASTITCH_OP_ROUND: return fmath(e, MATH_ROUND, x, NULL);
    case ASTITCH_OP_SIGMOID: { /* 1 / (1 + exp(-x)), divided as every f32 division is */
        LLVMValueRef den = LLVMBuildFAdd(e->b, fconst(e, 1), exp_of(e, LLVMBuildFNeg(e->b, x, "")), "");
        return prim_call(e->b, e->m, PRIM_FDIV_F32, (LLVMValueRef[]){fconst(e, 1), den}, 2);
    }
    case ASTITCH_OP_SIGN:
        if (fl) {
            LLVMValueRef r = LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOLT, x, zero, ""),
                                             fconst(e, -1), x, "");
            return LLVMBuildSelect(e->b, LLVMBuildFCmp(e->b, LLVMRealOGT, x, zero, ""),
                                   fconst(e, 1), r, "");
        }
        return LLVMBuildSub(e->b,
                            LLVMBuildZExt(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, x, zero, ""), ty, ""),
                            LLVMBuildZExt(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, x, zero, ""), ty, ""),
                            "");
    case ASTITCH_OP_NOT: return LLVMBuildNot(e->b, x, "");
    case ASTITCH_OP_RELU: /* max(x, +0): relu(-0) is +0 and NaN stays NaN, as the reference */
        if (fl)
            return maxmin(e, true, t, x, zero);
        return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, x, zero, ""), zero, x, "");
    default: return ev_fail(e, ty, ASTITCH_ERR_INTERNAL, "no unary emission for %s", astitch_op_name(n->op));
    }
}

/* a ** b. A constant exponent of 2, 3 or 4 (a cube in a tanh GELU, a square in a variance)
 * is a product of a: within two ulps of pow, agreeing with it on signed zeros, infinities and
 * NaN, and an order of magnitude fewer instructions than libdevice's powf. */
static LLVMValueRef power(Emit *e, LLVMValueRef a, LLVMValueRef b)
{
    if (LLVMIsAConstantFP(b)) {
        LLVMBool lossy;
        double y = LLVMConstRealGetDouble(b, &lossy);
        if (y == 2 || y == 3 || y == 4) {
            LLVMValueRef sq = LLVMBuildFMul(e->b, a, a, "");
            return y == 2 ? sq : LLVMBuildFMul(e->b, sq, y == 3 ? a : sq, "");
        }
    }
    return fmath(e, MATH_POW, a, b);
}

/* a / b for floats. By a constant power of two within the normal range (an attention's scale
 * of 1/8 written as a division) it is a product by the exact reciprocal: the same real, rounded
 * once, so IEEE division's result on every input, in one instruction where the division takes
 * several. */
static LLVMValueRef fdivide(Emit *e, LLVMValueRef a, LLVMValueRef b)
{
    if (LLVMIsAConstantFP(b)) {
        LLVMBool lossy;
        int k;
        double y = LLVMConstRealGetDouble(b, &lossy);
        if (isfinite(y) && fabs(frexp(y, &k)) == 0.5 && k - 1 >= -126 && k - 1 <= 126)
            return LLVMBuildFMul(e->b, a, fconst(e, 1 / y), "");
    }
    return prim_call(e->b, e->m, PRIM_FDIV_F32, (LLVMValueRef[]){a, b}, 2);
}

static LLVMValueRef binary(Emit *e, const Node *n, astitch_dtype t, LLVMValueRef a, LLVMValueRef b)
{
    bool fl = dtype_is_float(t);
    switch (n->op) {
    case ASTITCH_OP_ADD: return fl ? LLVMBuildFAdd(e->b, a, b, "") : LLVMBuildAdd(e->b, a, b, "");
    case ASTITCH_OP_SUB: return fl ? LLVMBuildFSub(e->b, a, b, "") : LLVMBuildSub(e->b, a, b, "");
    case ASTITCH_OP_MUL: return fl ? LLVMBuildFMul(e->b, a, b, "") : LLVMBuildMul(e->b, a, b, "");
    case ASTITCH_OP_DIV:
        return fl ? fdivide(e, a, b) : int_divrem(e, false, a, b);
    case ASTITCH_OP_REM: return fl ? fmath(e, MATH_FMOD, a, b) : int_divrem(e, true, a, b);
    case ASTITCH_OP_POW: return power(e, a, b);
    case ASTITCH_OP_MAX: return maxmin(e, true, t, a, b);
    case ASTITCH_OP_MIN: return maxmin(e, false, t, a, b);
    case ASTITCH_OP_AND: return LLVMBuildAnd(e->b, a, b, "");
    case ASTITCH_OP_OR: return LLVMBuildOr(e->b, a, b, "");
    default: break;
    }
    static const LLVMRealPredicate fp[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                           LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
    static const LLVMIntPredicate ip[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT,
                                          LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
    int c = (int)n->op - (int)ASTITCH_OP_EQ;
    if (c >= 0 && c < 6)
        return fl ? LLVMBuildFCmp(e->b, fp[c], a, b, "") : LLVMBuildICmp(e->b, ip[c], a, b, "");
    return ev_fail(e, LLVMTypeOf(a), ASTITCH_ERR_INTERNAL, "no binary emission for %s",
                   astitch_op_name(n->op));
}

/* w (a Wide of dtype t) as a constant in t's register type. */
static LLVMValueRef wide_const(Emit *e, astitch_dtype t, Wide w)
{
    return dtype_is_float(t) ? fconst(e, w.f)
                             : LLVMConstInt(ev_type(e, t), (unsigned long long)w.i, 1);
}

LLVMValueRef ev_reduce_identity(Emit *e, astitch_reduce_kind k, astitch_dtype t)
{
    if ((unsigned)k >= ASTITCH_REDUCE_COUNT)
        return ev_fail(e, ev_type(e, t), ASTITCH_ERR_INTERNAL, "bad reduce kind");
    return wide_const(e, t, reduce_identity(k, t));
}

LLVMValueRef ev_reduce_start(Emit *e, astitch_reduce_kind k, astitch_dtype t, int64_t len)
{
    if (len > 0 || (unsigned)k >= ASTITCH_REDUCE_COUNT)
        return ev_reduce_identity(e, k, t);
    return wide_const(e, t, reduce_empty(k, t));
}

LLVMValueRef ev_reduce_combine(Emit *e, astitch_reduce_kind k, astitch_dtype t, LLVMValueRef a,
                               LLVMValueRef b)
{
    bool fl = dtype_is_float(t);
    switch (k) {
    case ASTITCH_REDUCE_SUM: return fl ? LLVMBuildFAdd(e->b, a, b, "") : LLVMBuildAdd(e->b, a, b, "");
    case ASTITCH_REDUCE_PROD: return fl ? LLVMBuildFMul(e->b, a, b, "") : LLVMBuildMul(e->b, a, b, "");
    case ASTITCH_REDUCE_MAX: return maxmin(e, true, t, a, b);
    case ASTITCH_REDUCE_MIN: return maxmin(e, false, t, a, b);
    case ASTITCH_REDUCE_ANY: return LLVMBuildOr(e->b, a, b, "");
    case ASTITCH_REDUCE_ALL: return LLVMBuildAnd(e->b, a, b, "");
    default: return ev_fail(e, LLVMTypeOf(a), ASTITCH_ERR_INTERNAL, "bad reduce kind");
    }
}

LLVMValueRef ev_apply(Emit *e, int32_t n, LLVMValueRef *arg)
{
    const Node *node = gnode(e->g, n);
    astitch_dtype from = gnode(e->g, goperand(e->g, n, 0))->dtype;
    if (node->op == ASTITCH_OP_CONVERT)
        return convert(e, from, node->dtype, arg[0]);
    if (node->op == ASTITCH_OP_SELECT)
        return LLVMBuildSelect(e->b, arg[0], arg[1], arg[2], "");
    LLVMValueRef r = node->nin == 1 ? unary(e, node, from, arg[0]) : binary(e, node, from, arg[0], arg[1]);
    return ev_round_to(e, node->dtype, r);
}
