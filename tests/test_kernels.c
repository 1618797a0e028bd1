/* test_kernels.c: the hand-built kernels of test_kernels.h. */
#include <stdint.h>

#include "codegen/codegen.h"
#include "test_kernels.h"

typedef struct Kb {
    LLVMContextRef c;
    LLVMModuleRef m;
    LLVMBuilderRef b;
    LLVMValueRef fn;
    LLVMTypeRef i32, f32, f64, ptr;
} Kb;

/* Starts kernel `void name(ptr x nargs)` in a new module; the builder is at its entry. */
static void kb_begin(Kb *k, LLVMContextRef c, const char *name, int nargs)
{
    k->c = c;
    k->m = LLVMModuleCreateWithNameInContext(name, c);
    k->b = LLVMCreateBuilderInContext(c);
    k->i32 = LLVMInt32TypeInContext(c);
    k->f32 = LLVMFloatTypeInContext(c);
    k->f64 = LLVMDoubleTypeInContext(c);
    k->ptr = LLVMPointerTypeInContext(c, 0);
    LLVMTypeRef params[16];
    for (int i = 0; i < nargs; i++)
        params[i] = k->ptr;
    k->fn = LLVMAddFunction(k->m, name,
                            LLVMFunctionType(LLVMVoidTypeInContext(c), params, (unsigned)nargs, 0));
    LLVMPositionBuilderAtEnd(k->b, LLVMAppendBasicBlockInContext(c, k->fn, "entry"));
}

static LLVMModuleRef kb_end(Kb *k)
{
    LLVMBuildRetVoid(k->b);
    LLVMDisposeBuilder(k->b);
    return k->m;
}

static LLVMValueRef arg(Kb *k, int i) { return LLVMGetParam(k->fn, (unsigned)i); }
static LLVMValueRef int32(Kb *k, int v) { return LLVMConstInt(k->i32, (uint64_t)(int64_t)v, 1); }
static LLVMValueRef real(Kb *k, double v) { return LLVMConstReal(k->f32, v); }

static LLVMValueRef prim0(Kb *k, PrimId id) { return prim_call(k->b, k->m, id, NULL, 0); }

static LLVMValueRef prim2(Kb *k, PrimId id, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef args[2] = {a, b};
    return prim_call(k->b, k->m, id, args, 2);
}

static LLVMValueRef at(Kb *k, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef i)
{
    return LLVMBuildGEP2(k->b, t, base, &i, 1, "");
}

static LLVMValueRef load(Kb *k, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef i)
{
    return LLVMBuildLoad2(k->b, t, at(k, t, base, i), "");
}

static void store(Kb *k, LLVMTypeRef t, LLVMValueRef base, LLVMValueRef i, LLVMValueRef v)
{
    LLVMBuildStore(k->b, v, at(k, t, base, i));
}

/* ctaid * ntid + tid */
static LLVMValueRef global_id(Kb *k)
{
    LLVMValueRef blk = LLVMBuildMul(k->b, prim0(k, PRIM_CTAID_X), prim0(k, PRIM_NTID_X), "");
    return LLVMBuildAdd(k->b, blk, prim0(k, PRIM_TID_X), "gid");
}

/* for (i = start; i < end; i += step) with up to 2 loop-carried values: kb_for leaves the
 * builder in the body with l->i and l->acc[] current; kb_next closes the loop with the new
 * values of acc and leaves the builder after it, where l->acc[] are the final values. */
typedef struct Loop {
    LLVMBasicBlockRef head, exit;
    LLVMValueRef i, step, acc[2];
    int nacc;
} Loop;

static void kb_for(Kb *k, Loop *l, LLVMValueRef start, LLVMValueRef end, LLVMValueRef step,
                   const LLVMValueRef *acc0, int nacc)
{
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(k->b);
    l->head = LLVMAppendBasicBlockInContext(k->c, k->fn, "head");
    LLVMBasicBlockRef body = LLVMAppendBasicBlockInContext(k->c, k->fn, "body");
    l->exit = LLVMAppendBasicBlockInContext(k->c, k->fn, "exit");
    l->step = step;
    l->nacc = nacc;
    LLVMBuildBr(k->b, l->head);
    LLVMPositionBuilderAtEnd(k->b, l->head);
    l->i = LLVMBuildPhi(k->b, k->i32, "i");
    LLVMAddIncoming(l->i, &start, &pre, 1);
    for (int a = 0; a < nacc; a++) {
        l->acc[a] = LLVMBuildPhi(k->b, LLVMTypeOf(acc0[a]), "acc");
        LLVMAddIncoming(l->acc[a], (LLVMValueRef *)&acc0[a], &pre, 1);
    }
    LLVMBuildCondBr(k->b, LLVMBuildICmp(k->b, LLVMIntSLT, l->i, end, ""), body, l->exit);
    LLVMPositionBuilderAtEnd(k->b, body);
}

static void kb_next(Kb *k, Loop *l, const LLVMValueRef *acc)
{
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(k->b);
    LLVMValueRef next = LLVMBuildAdd(k->b, l->i, l->step, "");
    LLVMAddIncoming(l->i, &next, &latch, 1);
    for (int a = 0; a < l->nacc; a++)
        LLVMAddIncoming(l->acc[a], (LLVMValueRef *)&acc[a], &latch, 1);
    LLVMBuildBr(k->b, l->head);
    LLVMPositionBuilderAtEnd(k->b, l->exit);
}

/* if (cond) { ... }: returns the join block for kb_endif. */
static LLVMBasicBlockRef kb_if(Kb *k, LLVMValueRef cond)
{
    LLVMBasicBlockRef then = LLVMAppendBasicBlockInContext(k->c, k->fn, "then");
    LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(k->c, k->fn, "join");
    LLVMBuildCondBr(k->b, cond, then, join);
    LLVMPositionBuilderAtEnd(k->b, then);
    return join;
}

static void kb_endif(Kb *k, LLVMBasicBlockRef join)
{
    LLVMBuildBr(k->b, join);
    LLVMPositionBuilderAtEnd(k->b, join);
}

LLVMModuleRef build_vector_add(LLVMContextRef c, int n)
{
    Kb k;
    kb_begin(&k, c, "vadd", 3);
    LLVMValueRef step = LLVMBuildMul(k.b, prim0(&k, PRIM_NTID_X), prim0(&k, PRIM_NCTAID_X), "");
    Loop l;
    kb_for(&k, &l, global_id(&k), int32(&k, n), step, NULL, 0);
    LLVMValueRef s = LLVMBuildFAdd(k.b, load(&k, k.f32, arg(&k, 0), l.i),
                                   load(&k, k.f32, arg(&k, 1), l.i), "");
    store(&k, k.f32, arg(&k, 2), l.i, s);
    kb_next(&k, &l, NULL);
    return kb_end(&k);
}

/* Reduces (f32 sum, i32 count) across a warp with shuffles of the given kinds. */
static void warp_reduce(Kb *k, LLVMValueRef *s, LLVMValueRef *n, PrimId f, PrimId i)
{
    for (int off = 16; off > 0; off /= 2) {
        *s = LLVMBuildFAdd(k->b, *s, prim2(k, f, *s, int32(k, off)), "");
        *n = LLVMBuildAdd(k->b, *n, prim2(k, i, *n, int32(k, off)), "");
    }
}

LLVMModuleRef build_block_reduce(LLVMContextRef c, int ncol)
{
    Kb k;
    kb_begin(&k, c, "reduce", 8);
    LLVMValueRef tid = prim0(&k, PRIM_TID_X), ntid = prim0(&k, PRIM_NTID_X);
    LLVMValueRef row = prim0(&k, PRIM_CTAID_X);
    LLVMValueRef base = at(&k, k.f32, arg(&k, 0), LLVMBuildMul(k.b, row, int32(&k, ncol), ""));
    Loop l;
    LLVMValueRef acc0[2] = {real(&k, 0), int32(&k, 0)};
    kb_for(&k, &l, tid, int32(&k, ncol), ntid, acc0, 2);
    LLVMValueRef x = load(&k, k.f32, base, l.i);
    LLVMValueRef pos = LLVMBuildZExt(k.b, LLVMBuildFCmp(k.b, LLVMRealOGT, x, real(&k, 0), ""),
                                     k.i32, "");
    LLVMValueRef acc[2] = {LLVMBuildFAdd(k.b, l.acc[0], x, ""),
                           LLVMBuildAdd(k.b, l.acc[1], pos, "")};
    kb_next(&k, &l, acc);
    LLVMValueRef s = l.acc[0], n = l.acc[1];
    warp_reduce(&k, &s, &n, PRIM_SHFL_DOWN_F32, PRIM_SHFL_DOWN_I32);

    LLVMValueRef smem = prim0(&k, PRIM_SHARED_BASE);
    LLVMValueRef smem_i = at(&k, LLVMInt8TypeInContext(c), smem, int32(&k, 128));
    LLVMValueRef lane = LLVMBuildAnd(k.b, tid, int32(&k, 31), "");
    LLVMValueRef warp = LLVMBuildLShr(k.b, tid, int32(&k, 5), "");
    LLVMBasicBlockRef join = kb_if(&k, LLVMBuildICmp(k.b, LLVMIntEQ, lane, int32(&k, 0), ""));
    store(&k, k.f32, smem, warp, s);
    store(&k, k.i32, smem_i, warp, n);
    kb_endif(&k, join);
    prim0(&k, PRIM_BARRIER_BLOCK);

    join = kb_if(&k, LLVMBuildICmp(k.b, LLVMIntEQ, warp, int32(&k, 0), ""));
    LLVMValueRef nwarp = LLVMBuildLShr(k.b, LLVMBuildAdd(k.b, ntid, int32(&k, 31), ""),
                                       int32(&k, 5), "");
    LLVMValueRef has = LLVMBuildICmp(k.b, LLVMIntULT, tid, nwarp, "");
    s = LLVMBuildSelect(k.b, has, load(&k, k.f32, smem, tid), real(&k, 0), "");
    n = LLVMBuildSelect(k.b, has, load(&k, k.i32, smem_i, tid), int32(&k, 0), "");
    /* whole warps: the tests launch blocks of a multiple of 32 threads */
    warp_reduce(&k, &s, &n, PRIM_SHFL_XOR_FULL_F32, PRIM_SHFL_XOR_FULL_I32);
    LLVMBasicBlockRef join0 = kb_if(&k, LLVMBuildICmp(k.b, LLVMIntEQ, tid, int32(&k, 0), ""));
    store(&k, k.f32, arg(&k, 1), row, s);
    prim2(&k, PRIM_ATOMIC_ADD_F32, arg(&k, 2), s);
    prim2(&k, PRIM_ATOMIC_MAX_F32, arg(&k, 3), s);
    prim2(&k, PRIM_ATOMIC_MIN_F32, arg(&k, 4), s);
    prim2(&k, PRIM_ATOMIC_ADD_I32, arg(&k, 5), n);
    LLVMValueRef cas[3] = {arg(&k, 6), int32(&k, 0), LLVMBuildAdd(k.b, row, int32(&k, 1), "")};
    LLVMValueRef old = prim_call(k.b, k.m, PRIM_ATOMIC_CAS_I32, cas, 3);
    store(&k, k.i32, arg(&k, 7), row, old);
    kb_endif(&k, join0);
    kb_endif(&k, join);
    return kb_end(&k);
}

LLVMModuleRef build_grid_phases(LLVMContextRef c)
{
    Kb k;
    kb_begin(&k, c, "phases", 4);
    LLVMValueRef g = global_id(&k), ntid = prim0(&k, PRIM_NTID_X);
    LLVMValueRef t = LLVMBuildMul(k.b, ntid, prim0(&k, PRIM_NCTAID_X), "");
    LLVMValueRef in = arg(&k, 0), tmp = arg(&k, 1), out = arg(&k, 2), counter = arg(&k, 3);
    LLVMValueRef x = load(&k, k.f32, in, g);
    store(&k, k.f32, tmp, g,
          LLVMBuildFAdd(k.b, LLVMBuildFMul(k.b, x, real(&k, 2), ""), real(&k, 1), ""));
    prim0(&k, PRIM_FENCE_GPU);
    prim_call(k.b, k.m, PRIM_BARRIER_GRID, &counter, 1);

    LLVMValueRef next = LLVMBuildURem(k.b, LLVMBuildAdd(k.b, g, int32(&k, 1), ""), t, "");
    LLVMValueRef mirror = LLVMBuildSub(k.b, LLVMBuildSub(k.b, t, int32(&k, 1), ""), g, "");
    LLVMValueRef half = LLVMBuildFMul(k.b, real(&k, 0.5), load(&k, k.f32, tmp, mirror), "");
    store(&k, k.f32, out, g, LLVMBuildFSub(k.b, load(&k, k.f32, tmp, next), half, ""));
    prim_call(k.b, k.m, PRIM_BARRIER_GRID, &counter, 1);

    LLVMValueRef shifted = LLVMBuildURem(k.b, LLVMBuildAdd(k.b, g, ntid, ""), t, "");
    store(&k, k.f32, tmp, g, load(&k, k.f32, out, shifted));
    return kb_end(&k);
}

LLVMModuleRef build_math(LLVMContextRef c, int n)
{
    Kb k;
    kb_begin(&k, c, "math", 4);
    LLVMValueRef step = LLVMBuildMul(k.b, prim0(&k, PRIM_NTID_X), prim0(&k, PRIM_NCTAID_X), "");
    Loop l;
    kb_for(&k, &l, global_id(&k), int32(&k, n), step, NULL, 0);
    LLVMValueRef x = load(&k, k.f32, arg(&k, 0), l.i), y = load(&k, k.f32, arg(&k, 1), l.i);
    LLVMValueRef e = math_call(k.b, k.m, MATH_EXP, &x), th = math_call(k.b, k.m, MATH_TANH, &y);
    store(&k, k.f32, arg(&k, 2), l.i, LLVMBuildFAdd(k.b, e, th, ""));
    LLVMValueRef base = LLVMBuildFAdd(k.b, LLVMBuildFMul(k.b, x, x, ""), real(&k, 0.5), "");
    LLVMValueRef pw[2] = {LLVMBuildFPExt(k.b, base, k.f64, ""), LLVMBuildFPExt(k.b, y, k.f64, "")};
    LLVMValueRef p = LLVMBuildFPTrunc(k.b, math_call(k.b, k.m, MATH_POW, pw), k.f32, "");
    store(&k, k.f32, arg(&k, 3), l.i, p);
    kb_next(&k, &l, NULL);
    return kb_end(&k);
}

LLVMModuleRef build_malformed(LLVMContextRef c)
{
    Kb k;
    kb_begin(&k, c, "bad", 1);
    store(&k, k.f32, arg(&k, 0), int32(&k, 0), real(&k, 1));
    LLVMDisposeBuilder(k.b); /* no ret: the entry block lacks a terminator */
    return k.m;
}

LLVMModuleRef build_unresolved(LLVMContextRef c)
{
    Kb k;
    kb_begin(&k, c, "calls", 1);
    LLVMTypeRef ty = LLVMFunctionType(k.f32, &k.f32, 1, 0);
    LLVMValueRef f = LLVMAddFunction(k.m, "__nv_nosuchf", ty), one = real(&k, 1);
    store(&k, k.f32, arg(&k, 0), int32(&k, 0), LLVMBuildCall2(k.b, ty, f, &one, 1, ""));
    return kb_end(&k);
}
