/* emit_memory.c: elements in memory: a dtype's memory type and the f16/bf16 conversions, scalar
 * and vector loads and stores, the kernel's buffers, the values of ops an earlier phase
 * materialized or a dense constant holds, and the stores of a phase's roots. */
#define ASTITCH_EMIT_INTERNAL
#include <stdio.h>
#include <stdlib.h>

#include "codegen.h"

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
LLVMValueRef ev_round_to(Emit *e, astitch_dtype t, LLVMValueRef v)
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
LLVMValueRef ev_load_materialized(Emit *e, int32_t n, const PlanOp *op, Index *ix)
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

/* A dense constant's table as a module global (in the options' address space). */
LLVMValueRef ev_constant_table(Emit *e, int32_t n)
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
