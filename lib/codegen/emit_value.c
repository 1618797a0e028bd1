/* emit_value.c: the value of an op at one element, by index propagation (the paper's
 * observation A): element-wise ops evaluate their operands at the same element, data movement
 * maps the element to its source element, and materialized ops are loaded from the buffer or
 * tensor an earlier phase wrote. */
#define ASTITCH_EMIT_INTERNAL
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

/* Records the first failure of e's emission (with its node, or ASTITCH_NO_NODE). */
static void fail_first(Emit *e, int32_t node, astitch_status s, const char *fmt, va_list ap)
{
    if (e->status != ASTITCH_OK)
        return;
    ctx_failv(e->ctx, s, fmt, ap);
    ctx_error_at_node(e->ctx, node);
    e->status = s;
}

LLVMValueRef ev_fail(Emit *e, LLVMTypeRef ty, astitch_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_first(e, ASTITCH_NO_NODE, s, fmt, ap);
    va_end(ap);
    return LLVMGetUndef(ty);
}

LLVMValueRef ev_fail_node(Emit *e, int32_t node, LLVMTypeRef ty, astitch_status s,
                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_first(e, node, s, fmt, ap);
    va_end(ap);
    return LLVMGetUndef(ty);
}

LLVMValueRef ev_int(Emit *e, int64_t v) { return LLVMConstInt(e->ix, (unsigned long long)v, 1); }

LLVMTypeRef ev_type(Emit *e, astitch_dtype t)
{
    switch (t) {
    case ASTITCH_I32: return LLVMInt32TypeInContext(e->c);
    case ASTITCH_I64: return LLVMInt64TypeInContext(e->c);
    case ASTITCH_BOOL: return LLVMInt1TypeInContext(e->c);
    default: return LLVMFloatTypeInContext(e->c);
    }
}

static LLVMValueRef fconst(Emit *e, double v) { return LLVMConstReal(LLVMFloatTypeInContext(e->c), v); }

/* A constant of dtype t holding v, in register type. */
static LLVMValueRef tconst(Emit *e, astitch_dtype t, double v)
{
    if (dtype_is_float(t))
        return fconst(e, v);
    return LLVMConstInt(ev_type(e, t), (unsigned long long)(int64_t)v, 1);
}

void ev_begin_element(Emit *e, const Index *ix)
{
    for (int32_t i = 0; i < e->g->nnode; i++)
        e->cache[i] = NULL;
    e->cache_ix = ix;
}

LLVMValueRef ev_lin(Emit *e, Index *ix)
{
    if (ix->lin)
        return ix->lin;
    LLVMValueRef lin = ev_int(e, 0);
    int64_t stride = 1;
    for (int i = ix->shape->rank - 1; i >= 0; i--) {
        if (ix->shape->dim[i] != 1) {
            LLVMValueRef term = stride == 1 ? ix->axis[i]
                                            : LLVMBuildMul(e->b, ix->axis[i], ev_int(e, stride), "");
            lin = LLVMBuildAdd(e->b, lin, term, "lin");
        }
        stride *= ix->shape->dim[i];
    }
    return ix->lin = lin;
}

void ev_axes(Emit *e, Index *ix)
{
    if (ix->has_axes)
        return;
    LLVMValueRef rest = ix->lin;
    for (int i = ix->shape->rank - 1; i >= 0; i--) {
        int64_t d = ix->shape->dim[i];
        if (d == 1) {
            ix->axis[i] = ev_int(e, 0);
        } else if (i == 0) {
            ix->axis[i] = rest;
        } else {
            ix->axis[i] = LLVMBuildURem(e->b, rest, ev_int(e, d), "ax");
            rest = LLVMBuildUDiv(e->b, rest, ev_int(e, d), "");
        }
    }
    ix->has_axes = true;
}

/* Element type in memory. */
static LLVMTypeRef mem_type(Emit *e, astitch_dtype t)
{
    switch (t) {
    case ASTITCH_F32: return LLVMFloatTypeInContext(e->c);
    case ASTITCH_F16:
    case ASTITCH_BF16: return LLVMInt16TypeInContext(e->c);
    case ASTITCH_I32: return LLVMInt32TypeInContext(e->c);
    case ASTITCH_I64: return LLVMInt64TypeInContext(e->c);
    default: return LLVMInt8TypeInContext(e->c);
    }
}

static LLVMValueRef bf16_to_f32(Emit *e, LLVMValueRef bits16)
{
    if (e->opt.native_bf16) /* lets LLVM fold a rounding followed by a store */
        return LLVMBuildFPExt(e->b, LLVMBuildBitCast(e->b, bits16, LLVMBFloatTypeInContext(e->c), ""),
                              LLVMFloatTypeInContext(e->c), "");
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->c);
    LLVMValueRef w = LLVMBuildShl(e->b, LLVMBuildZExt(e->b, bits16, i32, ""),
                                  LLVMConstInt(i32, 16, 0), "");
    return LLVMBuildBitCast(e->b, w, LLVMFloatTypeInContext(e->c), "");
}

/* Round to nearest even; NaN stays a NaN (its payload is not kept by the native form). */
static LLVMValueRef f32_to_bf16(Emit *e, LLVMValueRef f)
{
    if (e->opt.native_bf16)
        return LLVMBuildBitCast(e->b, LLVMBuildFPTrunc(e->b, f, LLVMBFloatTypeInContext(e->c), ""),
                                LLVMInt16TypeInContext(e->c), "");
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->c);
    LLVMValueRef u = LLVMBuildBitCast(e->b, f, i32, "");
    LLVMValueRef lsb = LLVMBuildAnd(e->b, LLVMBuildLShr(e->b, u, LLVMConstInt(i32, 16, 0), ""),
                                    LLVMConstInt(i32, 1, 0), "");
    LLVMValueRef r = LLVMBuildAdd(e->b, u, LLVMBuildAdd(e->b, lsb, LLVMConstInt(i32, 0x7fff, 0), ""), "");
    LLVMValueRef nan = LLVMBuildFCmp(e->b, LLVMRealUNO, f, f, "");
    LLVMValueRef q = LLVMBuildOr(e->b, u, LLVMConstInt(i32, 0x400000, 0), "");
    r = LLVMBuildSelect(e->b, nan, q, r, "");
    return LLVMBuildTrunc(e->b, LLVMBuildLShr(e->b, r, LLVMConstInt(i32, 16, 0), ""),
                          LLVMInt16TypeInContext(e->c), "");
}

static LLVMValueRef half_to_f32(Emit *e, LLVMValueRef bits16)
{
    LLVMValueRef h = LLVMBuildBitCast(e->b, bits16, LLVMHalfTypeInContext(e->c), "");
    return LLVMBuildFPExt(e->b, h, LLVMFloatTypeInContext(e->c), "");
}

static LLVMValueRef f32_to_half(Emit *e, LLVMValueRef f)
{
    LLVMValueRef h = LLVMBuildFPTrunc(e->b, f, LLVMHalfTypeInContext(e->c), "");
    return LLVMBuildBitCast(e->b, h, LLVMInt16TypeInContext(e->c), "");
}

/* Rounds an f32 register value to the precision of t (f16/bf16); other types unchanged. */
static LLVMValueRef round_to(Emit *e, astitch_dtype t, LLVMValueRef v)
{
    if (t == ASTITCH_F16)
        return half_to_f32(e, f32_to_half(e, v));
    if (t == ASTITCH_BF16)
        return bf16_to_f32(e, f32_to_bf16(e, v));
    return v;
}

/* v, loaded as the memory type of t, in t's register type. */
static LLVMValueRef from_memory(Emit *e, astitch_dtype t, LLVMValueRef v)
{
    LLVMTypeRef mt = mem_type(e, t);
    switch (t) {
    case ASTITCH_F16: return half_to_f32(e, v);
    case ASTITCH_BF16: return bf16_to_f32(e, v);
    case ASTITCH_BOOL: return LLVMBuildICmp(e->b, LLVMIntNE, v, LLVMConstInt(mt, 0, 0), "");
    default: return v;
    }
}

LLVMValueRef ev_load(Emit *e, LLVMValueRef base, astitch_dtype t, LLVMValueRef lin)
{
    LLVMTypeRef mt = mem_type(e, t);
    LLVMValueRef p = LLVMBuildGEP2(e->b, mt, base, &lin, 1, "");
    return from_memory(e, t, LLVMBuildLoad2(e->b, mt, p, ""));
}

/* The alignment of a vector of `whole` bytes of elements of `size` bytes that starts at an
 * element index that is a multiple of its length: the whole vector, at most the tensors'
 * alignment (a vector wider than that is split by the lowering into aligned parts). */
static unsigned vector_align(const Emit *e, unsigned size, unsigned whole)
{
    unsigned a = e->opt.tensor_align > size ? e->opt.tensor_align : size;
    return whole < a ? whole : a;
}

void ev_load_vector(Emit *e, LLVMValueRef base, astitch_dtype t, LLVMValueRef lin, int n,
                    LLVMValueRef *out)
{
    LLVMTypeRef mt = mem_type(e, t), vt = LLVMVectorType(mt, (unsigned)n);
    unsigned size = (unsigned)astitch_dtype_size(t), whole = size * (unsigned)n;
    LLVMValueRef p = LLVMBuildGEP2(e->b, mt, base, &lin, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(e->b, vt, p, "");
    LLVMSetAlignment(v, vector_align(e, size, whole));
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->c);
    for (int j = 0; j < n; j++)
        out[j] = from_memory(e, t, LLVMBuildExtractElement(e->b, v, LLVMConstInt(i32, (unsigned)j, 0), ""));
}

/* v in t's memory type. */
static LLVMValueRef to_memory(Emit *e, astitch_dtype t, LLVMValueRef v)
{
    switch (t) {
    case ASTITCH_F16: return f32_to_half(e, v);
    case ASTITCH_BF16: return f32_to_bf16(e, v);
    case ASTITCH_BOOL: return LLVMBuildZExt(e->b, v, mem_type(e, t), "");
    default: return v;
    }
}

void ev_store_vector(Emit *e, LLVMValueRef base, astitch_dtype t, LLVMValueRef lin, int n,
                     LLVMValueRef *vals)
{
    LLVMTypeRef mt = mem_type(e, t), vt = LLVMVectorType(mt, (unsigned)n);
    unsigned size = (unsigned)astitch_dtype_size(t), whole = size * (unsigned)n;
    LLVMTypeRef i32 = LLVMInt32TypeInContext(e->c);
    LLVMValueRef v = LLVMGetUndef(vt);
    for (int j = 0; j < n; j++)
        v = LLVMBuildInsertElement(e->b, v, to_memory(e, t, vals[j]),
                                   LLVMConstInt(i32, (unsigned)j, 0), "");
    LLVMValueRef p = LLVMBuildGEP2(e->b, mt, base, &lin, 1, "");
    LLVMSetAlignment(LLVMBuildStore(e->b, v, p), vector_align(e, size, whole));
}

void ev_store(Emit *e, LLVMValueRef base, astitch_dtype t, LLVMValueRef lin, LLVMValueRef v)
{
    LLVMTypeRef mt = mem_type(e, t);
    LLVMValueRef p = LLVMBuildGEP2(e->b, mt, base, &lin, 1, "");
    LLVMBuildStore(e->b, to_memory(e, t, v), p);
}

/* True when buf holds a regional value in global memory (the parts form). */
static bool spilled(const Emit *e, const PlanBuffer *buf)
{
    return e->opt.as_parts && buf->kind == ASTITCH_BUFFER_SHARED;
}

void ev_check_shared(Emit *e, const PlanBuffer *buf, LLVMValueRef lin)
{
    bool shared = plan_buffer_shared(buf->kind);
    if (!e->opt.check_shared || !shared || spilled(e, buf))
        return;
    LLVMValueRef outside = LLVMBuildICmp(e->b, LLVMIntUGE, lin, ev_int(e, buf->elements), "");
    LLVMBasicBlockRef merge = if_begin(e, outside);
    char msg[160];
    snprintf(msg, sizeof msg, "%s: shared-memory %s buffer of node %d '%s' accessed outside it",
             e->k->name, astitch_buffer_kind_name(buf->kind), buf->node,
             gnode(e->g, buf->node)->name);
    LLVMValueRef text = LLVMBuildGlobalStringPtr(e->b, msg, "trap.msg");
    prim_call(e->b, e->m, PRIM_TRAP, &text, 1);
    if_end(e, merge);
}

LLVMValueRef ev_buffer_base(Emit *e, const PlanBuffer *buf)
{
    LLVMTypeRef i8 = LLVMInt8TypeInContext(e->c);
    bool shared = plan_buffer_shared(buf->kind) && !spilled(e, buf);
    int64_t at = spilled(e, buf) ? e->spill[buf - e->k->buf] : buf->offset;
    LLVMValueRef off = LLVMConstInt(LLVMInt64TypeInContext(e->c), (unsigned long long)at, 0);
    return LLVMBuildGEP2(e->b, i8, shared ? e->shared : e->scratch, &off, 1, "buf");
}

/* The first element of node n that this block holds in shared buffer buf: blocks own
 * contiguous chunks of rows of the producing phase's mapping. */
static LLVMValueRef shared_first(Emit *e, const PlanBuffer *buf, int32_t n)
{
    const PlanOp *op = plan_kernel_op(e->k, n);
    const astitch_mapping *m = &e->k->phase[op->phase].map;
    const Node *node = gnode(e->g, n);
    int64_t per_row = node->op == ASTITCH_OP_REDUCE ? 1 : m->row_len;
    (void)buf;
    return LLVMBuildMul(e->b, e->ctaid, ev_int(e, m->chunk * per_row), "first");
}

/* The value of an op materialized by an earlier phase, or of a kernel input. */
static LLVMValueRef load_materialized(Emit *e, int32_t n, const PlanOp *op, Index *ix)
{
    const Node *node = gnode(e->g, n);
    LLVMValueRef lin = ev_lin(e, ix);
    if (op && e->run_end > 0 && op->phase >= e->run_first && op->phase < e->run_end)
        return ev_fail_node(e, n, ev_type(e, node->dtype), ASTITCH_ERR_INTERNAL,
                            "%s: node %d '%s' of a resident run is read from memory in phase %d",
                            e->k->name, n, node->name, e->phase);
    if (op && op->buf >= 0) {
        const PlanBuffer *buf = &e->k->buf[op->buf];
        if (buf->kind == ASTITCH_BUFFER_SHARED && !spilled(e, buf))
            lin = LLVMBuildSub(e->b, lin, shared_first(e, buf, n), "");
        ev_check_shared(e, buf, lin);
        return ev_load(e, ev_buffer_base(e, buf), node->dtype, lin);
    }
    if (!e->tensor[n])
        return ev_fail_node(e, n, ev_type(e, node->dtype), ASTITCH_ERR_INTERNAL,
                            "%s: node %d '%s' is read in phase %d but held nowhere", e->k->name, n,
                            node->name, e->phase);
    return ev_load(e, e->tensor[n], node->dtype, lin);
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

/* |x| of an f32 as the reference: the sign bit cleared, so abs(-0) is +0 and abs(-NaN) a NaN
 * (llvm.fabs: one abs.f32 on NVPTX; a select on x < 0 kept -0). */
static LLVMValueRef fabs_of(Emit *e, LLVMValueRef x)
{
    LLVMTypeRef f32 = LLVMFloatTypeInContext(e->c);
    LLVMTypeRef fty = LLVMFunctionType(f32, (LLVMTypeRef[]){f32}, 1, 0);
    LLVMValueRef f = LLVMGetNamedFunction(e->m, "llvm.fabs.f32");
    if (!f)
        f = LLVMAddFunction(e->m, "llvm.fabs.f32", fty);
    return LLVMBuildCall2(e->b, fty, f, (LLVMValueRef[]){x}, 1, "");
}

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
            return round_to(e, to, v);
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
        return round_to(e, to, LLVMBuildSIToFP(e->b, v, tt, ""));
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

static LLVMValueRef binary(Emit *e, const Node *n, astitch_dtype t, LLVMValueRef a, LLVMValueRef b)
{
    bool fl = dtype_is_float(t);
    switch (n->op) {
    case ASTITCH_OP_ADD: return fl ? LLVMBuildFAdd(e->b, a, b, "") : LLVMBuildAdd(e->b, a, b, "");
    case ASTITCH_OP_SUB: return fl ? LLVMBuildFSub(e->b, a, b, "") : LLVMBuildSub(e->b, a, b, "");
    case ASTITCH_OP_MUL: return fl ? LLVMBuildFMul(e->b, a, b, "") : LLVMBuildMul(e->b, a, b, "");
    case ASTITCH_OP_DIV:
        return fl ? prim_call(e->b, e->m, PRIM_FDIV_F32, (LLVMValueRef[]){a, b}, 2)
                  : int_divrem(e, false, a, b);
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

/* A dense constant's table as a module global (in the options' address space). */
static LLVMValueRef constant_table(Emit *e, int32_t n)
{
    const Node *node = gnode(e->g, n);
    char name[64];
    snprintf(name, sizeof name, "const.%d", n);
    LLVMValueRef gv = LLVMGetNamedGlobal(e->m, name);
    if (!gv) {
        LLVMTypeRef mt = mem_type(e, node->dtype);
        int64_t count = node->attr.nvalues;
        LLVMValueRef *vals = malloc((size_t)count * sizeof *vals);
        if (!vals)
            return ev_fail(e, LLVMPointerTypeInContext(e->c, 0), ASTITCH_ERR_MEMORY, "out of memory");
        for (int64_t i = 0; i < count; i++) {
            double v = node->attr.values[i];
            switch (node->dtype) {
            case ASTITCH_F32: vals[i] = LLVMConstReal(mt, v); break;
            case ASTITCH_F16: vals[i] = LLVMConstInt(mt, float_to_half((float)v), 0); break;
            case ASTITCH_BF16: vals[i] = LLVMConstInt(mt, float_to_bf16((float)v), 0); break;
            default: vals[i] = LLVMConstInt(mt, (unsigned long long)(int64_t)v, 1); break;
            }
        }
        LLVMTypeRef at = LLVMArrayType2(mt, (uint64_t)count);
        gv = LLVMAddGlobalInAddressSpace(e->m, at, name, e->opt.const_addrspace);
        LLVMSetInitializer(gv, LLVMConstArray2(mt, vals, (uint64_t)count));
        LLVMSetGlobalConstant(gv, 1);
        LLVMSetLinkage(gv, LLVMInternalLinkage);
        free(vals);
    }
    if (e->opt.const_addrspace == 0)
        return gv;
    return LLVMBuildAddrSpaceCast(e->b, gv, LLVMPointerTypeInContext(e->c, 0), "");
}

void ev_broadcast_source(Emit *e, const Node *bcast, const Shape *source, Index *ix,
                         Index *sub)
{
    ev_axes(e, ix);
    *sub = (Index){.shape = source, .has_axes = true};
    for (int i = 0; i < source->rank; i++)
        sub->axis[i] = source->dim[i] == 1 ? ev_int(e, 0) : ix->axis[bcast->attr.dims[i]];
}

void ev_transpose_source(Emit *e, const Node *transpose, const Shape *source, Index *ix,
                         Index *sub)
{
    ev_axes(e, ix);
    *sub = (Index){.shape = source, .has_axes = true};
    for (int i = 0; i < source->rank; i++)
        sub->axis[transpose->attr.dims[i]] = ix->axis[i];
}

void ev_slice_source(Emit *e, const Node *slice, const Shape *source, Index *ix, Index *sub)
{
    ev_axes(e, ix);
    *sub = (Index){.shape = source, .has_axes = true};
    for (int i = 0; i < source->rank; i++) {
        LLVMValueRef a = ix->axis[i];
        if (slice->attr.stride[i] != 1)
            a = LLVMBuildMul(e->b, a, ev_int(e, slice->attr.stride[i]), "");
        if (slice->attr.dims[i] != 0)
            a = LLVMBuildAdd(e->b, a, ev_int(e, slice->attr.dims[i]), "");
        sub->axis[i] = a;
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
    return round_to(e, node->dtype, r);
}

/* ---- the walk over operands ----------------------------------------------------------------
 * A value is computed from its operands' values, and they from theirs: a walk as deep as the
 * longest chain of ops computed in the phase (tens of thousands in a long element-wise chain).
 * It runs on a stack of frames of its own, one per node being computed, so its depth is
 * bounded by memory rather than by the thread's stack. Each frame asks for its operands one at
 * a time, in operand order, and each operand is finished before its consumer goes on: the code
 * comes out in the order of a recursive walk. */

/* A node being computed at an index. The index is the caller's (ix_of -1) or the `sub` of a
 * frame below (an element-wise op passes its own on), so the lazily derived linear index and
 * axes of one index are shared by every node evaluated at it. */
typedef struct Frame {
    int32_t n;
    int32_t ix_of;         /* -1: the walk's index; else the frame whose sub is n's index */
    uint32_t gen;          /* the generation of sub (EvMemo) */
    bool cacheable;        /* n's value goes into the element cache when done */
    int k;                 /* operands asked for so far */
    LLVMValueRef arg[3];   /* element-wise: the operands' values */
    Index sub;             /* the index the operand asked for last is evaluated at */
    int64_t start;         /* concatenate: the first element, along the axis, of operand k */
    LLVMBasicBlockRef done, next;
    LLVMBasicBlockRef *from;
    LLVMValueRef *vals;
} Frame;

enum { WALK_LOCAL = 8 };

typedef struct Walk {
    Index *ix;             /* the index of the value asked for */
    Frame *f;              /* frames, the innermost last: local, or on the heap when deeper */
    int32_t n, cap;
    uint32_t gens;         /* generations of indices handed out (0: the walk's own) */
    EvMemo memo;           /* values not in the element cache, by node and generation */
    LLVMValueRef *val;     /* the memo's slots */
    int32_t nval, capval;
    Frame local[WALK_LOCAL];
} Walk;

static uint32_t walk_gen(const Walk *w, int32_t of) { return of < 0 ? 0 : w->f[of].gen; }

/* Remembers v as node n's value at the index of frame `of`; on no memory it is only not
 * remembered. */
static void walk_remember(Walk *w, int32_t n, int32_t of, LLVMValueRef v)
{
    if (!ARRAY_RESERVE(w->val, w->nval, w->capval, 64))
        return;
    if (ev_memo_add(&w->memo, n, walk_gen(w, of), w->nval))
        w->val[w->nval++] = v;
}

static Index *walk_ix(Walk *w, int32_t of) { return of < 0 ? w->ix : &w->f[of].sub; }

void *ev_frames_push(void **frames, const void *local, int32_t *n, int32_t *cap, size_t size)
{
    ASTITCH_ASSERT(*n >= 0 && *n <= *cap);
    if (*n == *cap) {
        size_t bytes = (size_t)*cap * size;
        void *f = *frames == local ? malloc(2 * bytes) : realloc(*frames, 2 * bytes);
        if (!f)
            return NULL;
        if (*frames == local)
            memcpy(f, local, bytes);
        *frames = f;
        *cap *= 2;
    }
    return (char *)*frames + (size_t)(*n)++ * size;
}

static uint64_t memo_key(int32_t node, uint32_t gen) { return ((uint64_t)gen << 32 | (uint32_t)node) + 1; }

static int32_t memo_at(const EvMemo *m, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    int32_t i = (int32_t)(h >> 33) & (m->cap - 1);
    while (m->key[i] && m->key[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

int32_t ev_memo_find(const EvMemo *m, int32_t node, uint32_t gen)
{
    if (m->cap == 0)
        return -1;
    int32_t i = memo_at(m, memo_key(node, gen));
    return m->key[i] ? m->slot[i] : -1;
}

bool ev_memo_add(EvMemo *m, int32_t node, uint32_t gen, int32_t slot)
{
    if (2 * (m->n + 1) > m->cap) {
        EvMemo g = {calloc((size_t)(m->cap ? 2 * m->cap : 64), sizeof *g.key),
                    malloc((size_t)(m->cap ? 2 * m->cap : 64) * sizeof *g.slot),
                    m->cap ? 2 * m->cap : 64, m->n};
        if (!g.key || !g.slot) {
            free(g.key);
            free(g.slot);
            return false;
        }
        for (int32_t i = 0; i < m->cap; i++)
            if (m->key[i]) {
                int32_t at = memo_at(&g, m->key[i]);
                g.key[at] = m->key[i];
                g.slot[at] = m->slot[i];
            }
        ev_memo_free(m);
        *m = g;
    }
    int32_t at = memo_at(m, memo_key(node, gen));
    if (!m->key[at])
        m->n++;
    m->key[at] = memo_key(node, gen);
    m->slot[at] = slot;
    return true;
}

void ev_memo_free(EvMemo *m)
{
    free(m->key);
    free(m->slot);
    *m = (EvMemo){0};
}

/* A new frame on top of w (NULL when out of memory; ev_frames_push). */
static Frame *walk_push(Walk *w)
{
    return ev_frames_push((void **)&w->f, w->local, &w->n, &w->cap, sizeof *w->f);
}

/* Frame f asks for operand x at the index of frame `of` (-1 the walk's). */
static LLVMValueRef ask(int32_t x, int32_t of, int32_t *child, int32_t *child_ix)
{
    *child = x;
    *child_ix = of;
    return NULL;
}

/* Concatenate: the operand holding the element along the axis, chosen by branches so that only
 * that operand is evaluated. Starts the branch of operand f->k and asks for its value. */
static LLVMValueRef concat_take(Emit *e, Frame *f, int32_t fi, Index *ix, int32_t *child,
                                int32_t *child_ix)
{
    const Node *node = gnode(e->g, f->n);
    int axis = node->attr.axis, k = f->k;
    const Node *x = gnode(e->g, goperand(e->g, f->n, k));
    int64_t len = x->shape.dim[axis];
    bool last = k == node->nin - 1;
    LLVMBasicBlockRef take = LLVMAppendBasicBlockInContext(e->c, e->fn, "cat.take");
    f->next = last ? NULL : LLVMAppendBasicBlockInContext(e->c, e->fn, "cat.next");
    if (last)
        LLVMBuildBr(e->b, take);
    else
        LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, ix->axis[axis], ev_int(e, f->start + len), ""),
                        take, f->next);
    LLVMPositionBuilderAtEnd(e->b, take);
    f->sub = (Index){.shape = &x->shape, .has_axes = true};
    for (int i = 0; i < x->shape.rank; i++)
        f->sub.axis[i] = i == axis ? LLVMBuildSub(e->b, ix->axis[i], ev_int(e, f->start), "") : ix->axis[i];
    f->k++;
    return ask(goperand(e->g, f->n, k), fi, child, child_ix);
}

/* Concatenate, as a frame: got is the value of operand f->k - 1 (NULL at the start). */
static LLVMValueRef concat_step(Emit *e, Frame *f, int32_t fi, Index *ix, LLVMValueRef got,
                                int32_t *child, int32_t *child_ix)
{
    const Node *node = gnode(e->g, f->n);
    LLVMTypeRef ty = ev_type(e, node->dtype);
    if (!got) {
        ev_axes(e, ix);
        f->done = LLVMAppendBasicBlockInContext(e->c, e->fn, "cat.done");
        f->from = malloc((size_t)node->nin * sizeof *f->from);
        f->vals = malloc((size_t)node->nin * sizeof *f->vals);
        if (!f->from || !f->vals) {
            free(f->from);
            free(f->vals);
            return ev_fail(e, ty, ASTITCH_ERR_MEMORY, "out of memory");
        }
        f->start = 0;
        e->branch_depth++;
        return concat_take(e, f, fi, ix, child, child_ix);
    }
    int k = f->k - 1;
    f->vals[k] = got;
    f->from[k] = LLVMGetInsertBlock(e->b);
    LLVMBuildBr(e->b, f->done);
    if (f->next)
        LLVMPositionBuilderAtEnd(e->b, f->next);
    f->start += gnode(e->g, goperand(e->g, f->n, k))->shape.dim[node->attr.axis];
    if (f->k < node->nin)
        return concat_take(e, f, fi, ix, child, child_ix);
    e->branch_depth--;
    LLVMPositionBuilderAtEnd(e->b, f->done);
    LLVMValueRef phi = LLVMBuildPhi(e->b, ty, "cat");
    LLVMAddIncoming(phi, f->vals, f->from, (unsigned)node->nin);
    free(f->from);
    free(f->vals);
    return phi;
}

/* Computes node n of frame fi (an op of this kernel, or inlined) at its index from its
 * operands: returns the value, or NULL having asked for an operand (*child at the index of
 * frame *child_ix), whose value comes back as got in the next call (NULL in the first). */
static LLVMValueRef compute_step(Emit *e, Walk *w, int32_t fi, LLVMValueRef got, int32_t *child,
                                 int32_t *child_ix)
{
    Frame *f = &w->f[fi];
    Index *ix = walk_ix(w, f->ix_of);
    int32_t n = f->n;
    const Node *node = gnode(e->g, n);
    const Node *x = node->nin > 0 ? gnode(e->g, goperand(e->g, n, 0)) : NULL;
    int32_t x0 = node->nin > 0 ? goperand(e->g, n, 0) : -1;
    bool moves = node->op == ASTITCH_OP_BROADCAST_IN_DIM || node->op == ASTITCH_OP_SLICE ||
                 node->op == ASTITCH_OP_RESHAPE || node->op == ASTITCH_OP_TRANSPOSE;
    if (got && moves) /* asked for its operand's value, which is the node's */
        return got;
    switch (node->op) {
    case ASTITCH_OP_CONSTANT:
        if (node->attr.nvalues == 1)
            return round_to(e, node->dtype, tconst(e, node->dtype, node->attr.values[0]));
        return ev_load(e, constant_table(e, n), node->dtype, ev_lin(e, ix));
    case ASTITCH_OP_IOTA: {
        ev_axes(e, ix);
        LLVMValueRef i = ix->axis[node->attr.axis];
        if (dtype_is_float(node->dtype))
            return round_to(e, node->dtype, LLVMBuildUIToFP(e->b, i, ev_type(e, node->dtype), ""));
        return LLVMBuildIntCast2(e->b, i, ev_type(e, node->dtype), 0, "");
    }
    case ASTITCH_OP_BROADCAST_IN_DIM:
        ev_broadcast_source(e, node, &x->shape, ix, &f->sub);
        return ask(x0, fi, child, child_ix);
    case ASTITCH_OP_RESHAPE:
        f->sub = (Index){.shape = &x->shape, .lin = ev_lin(e, ix)};
        return ask(x0, fi, child, child_ix);
    case ASTITCH_OP_TRANSPOSE:
        ev_transpose_source(e, node, &x->shape, ix, &f->sub);
        return ask(x0, fi, child, child_ix);
    case ASTITCH_OP_SLICE:
        ev_slice_source(e, node, &x->shape, ix, &f->sub);
        return ask(x0, fi, child, child_ix);
    case ASTITCH_OP_CONCATENATE:
        return concat_step(e, f, fi, ix, got, child, child_ix);
    case ASTITCH_OP_GATHER: {
        const Node *in = gnode(e->g, goperand(e->g, n, 1));
        if (f->k == 0) { /* the row from the indices, at the element's leading axes */
            ev_axes(e, ix);
            f->sub = (Index){.shape = &in->shape, .has_axes = true};
            for (int i = 0; i < in->shape.rank; i++)
                f->sub.axis[i] = ix->axis[i];
            f->k = 1;
            return ask(goperand(e->g, n, 1), fi, child, child_ix);
        }
        if (f->k == 2)
            return got;
        LLVMValueRef row = LLVMBuildIntCast2(e->b, got, LLVMInt64TypeInContext(e->c), 1, "");
        LLVMTypeRef i64 = LLVMInt64TypeInContext(e->c);
        LLVMValueRef lo = LLVMConstInt(i64, 0, 0), hi = LLVMConstInt(i64, (unsigned long long)(x->shape.dim[0] - 1), 0);
        row = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, row, lo, ""), lo, row, "");
        row = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, row, hi, ""), hi, row, "");
        f->sub = (Index){.shape = &x->shape, .has_axes = true};
        f->sub.axis[0] = LLVMBuildIntCast2(e->b, row, e->ix, 1, "");
        for (int i = 1; i < x->shape.rank; i++)
            f->sub.axis[i] = ix->axis[in->shape.rank + i - 1];
        f->k = 2;
        return ask(x0, fi, child, child_ix);
    }
    default:
        break;
    }
    if (!op_is_elementwise(node->op))
        return ev_fail_node(e, n, ev_type(e, node->dtype), ASTITCH_ERR_INTERNAL,
                            "%s: node %d '%s' (%s) is needed in phase %d but not materialized",
                            e->k->name, n, node->name, astitch_op_name(node->op), e->phase);
    if (got)
        f->arg[f->k - 1] = got;
    if (f->k < node->nin && f->k < 3) /* every operand at the element itself */
        return ask(goperand(e->g, n, f->k++), f->ix_of, child, child_ix);
    return ev_apply(e, n, f->arg);
}

/* Starts node n at the index of frame ix_of (-1: the walk's): its value when it needs no
 * operand (a row value of a resident run, the element cache, a load, a failure), else NULL
 * with a frame for it pushed. */
static LLVMValueRef enter(Emit *e, Walk *w, int32_t n, int32_t ix_of)
{
    if (e->rowval && e->rowval[n]) /* a resident run reads its rows' values only at the row */
        return e->rowval[n];
    Index *ix = walk_ix(w, ix_of);
    /* the cache holds values at the element cache_ix; any index with the same linear index
     * value is the same element of a node (a reshape passes its index on) */
    bool cacheable = ix == e->cache_ix || (e->cache_ix && ix->lin && ix->lin == e->cache_ix->lin);
    if (cacheable && e->cache[n])
        return e->cache[n];
    int32_t slot = cacheable ? -1 : ev_memo_find(&w->memo, n, walk_gen(w, ix_of));
    if (slot >= 0)
        return w->val[slot];
    const Node *node = gnode(e->g, n);
    const PlanOp *op = plan_kernel_op(e->k, n);
    LLVMValueRef v;
    if (!op) {
        v = load_materialized(e, n, NULL, ix);
    } else if (op->phase >= 0 && op->phase < e->phase) {
        v = load_materialized(e, n, op, ix);
    } else if (op->phase > e->phase) {
        v = ev_fail_node(e, n, ev_type(e, node->dtype), ASTITCH_ERR_INTERNAL,
                         "%s: node %d '%s' is read in phase %d before phase %d makes it", e->k->name, n,
                         node->name, e->phase, op->phase);
    } else {
        Frame *f = walk_push(w);
        if (f) {
            *f = (Frame){.n = n, .ix_of = ix_of, .cacheable = cacheable};
            return NULL;
        }
        v = ev_fail_node(e, n, ev_type(e, node->dtype), ASTITCH_ERR_MEMORY,
                         "%s: out of memory computing node %d '%s'", e->k->name, n, node->name);
    }
    if (cacheable && e->branch_depth == 0)
        e->cache[n] = v;
    return v;
}

LLVMValueRef ev_value(Emit *e, int32_t n, Index *ix)
{
    Walk w = {.ix = ix, .cap = WALK_LOCAL};
    w.f = w.local;
    LLVMValueRef v = enter(e, &w, n, -1);
    while (w.n > 0) {
        int32_t child, child_ix;
        LLVMValueRef done = compute_step(e, &w, w.n - 1, v, &child, &child_ix);
        if (!done) {
            if (child_ix == w.n - 1) /* at an index the frame just derived */
                w.f[child_ix].gen = ++w.gens;
            v = enter(e, &w, child, child_ix);
            continue;
        }
        const Frame *f = &w.f[--w.n];
        if (f->cacheable && e->branch_depth == 0)
            e->cache[f->n] = done;
        else if (!f->cacheable)
            walk_remember(&w, f->n, f->ix_of, done);
        v = done;
    }
    if (w.f != w.local)
        free(w.f);
    ev_memo_free(&w.memo);
    free(w.val);
    return v;
}

void ev_store_root_buffer(Emit *e, int32_t n, Index *ix, LLVMValueRef v)
{
    const PlanOp *op = plan_kernel_op(e->k, n);
    if (op->buf < 0)
        return;
    const PlanBuffer *buf = &e->k->buf[op->buf];
    if (e->run_end > 0 && buf->kind == ASTITCH_BUFFER_SHARED && buf->last_phase < e->run_end)
        return;
    LLVMValueRef at = ev_lin(e, ix);
    if (buf->kind == ASTITCH_BUFFER_SHARED && !spilled(e, buf))
        at = LLVMBuildSub(e->b, at, shared_first(e, buf, n), "");
    ev_check_shared(e, buf, at);
    ev_store(e, ev_buffer_base(e, buf), gnode(e->g, n)->dtype, at, v);
}

void ev_store_root(Emit *e, int32_t n, Index *ix, LLVMValueRef v)
{
    const PlanOp *op = plan_kernel_op(e->k, n);
    ev_store_root_buffer(e, n, ix, v);
    if (op->output && e->tensor[n])
        ev_store(e, e->tensor[n], gnode(e->g, n)->dtype, ev_lin(e, ix), v);
}
