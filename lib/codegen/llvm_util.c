/* llvm_util.c: primitives and math functions declared into modules, LLVM errors as astitch
 * errors, and the small module chores both targets share. */
#include <stdio.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/IRReader.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen.h"
#include "ir/ir.h"

/* How the targets may treat a primitive. */
enum {
    PRIM_PURE = 1,       /* no memory effects: the value depends only on the calling thread */
    PRIM_CONVERGENT = 2, /* synchronizes threads: must not be made control-dependent on more */
};

typedef enum PrimSig {
    SIG_I32,        /* i32 () */
    SIG_VOID,       /* void () */
    SIG_VOID_PTR,   /* void (ptr) */
    SIG_F32_F32_I32, /* float (float, i32) */
    SIG_F32_F32,    /* float (float) */
    SIG_F32_F32_F32, /* float (float, float) */
    SIG_I32_I32_I32, /* i32 (i32, i32) */
    SIG_F32_PTR_F32, /* float (ptr, float) */
    SIG_I32_PTR_I32, /* i32 (ptr, i32) */
    SIG_I32_PTR_I32_I32, /* i32 (ptr, i32, i32) */
    SIG_PTR,        /* ptr () */
} PrimSig;

typedef struct PrimInfo {
    PrimSig sig;
    int flags;
} PrimInfo;

static const char *const prim_names[PRIM_COUNT] = {
#define PRIM_NAME(id, name) [PRIM_##id] = name,
    PRIM_LIST(PRIM_NAME)
#undef PRIM_NAME
};

static const PrimInfo prim_info[PRIM_COUNT] = {
    [PRIM_TID_X] = {SIG_I32, PRIM_PURE},
    [PRIM_NTID_X] = {SIG_I32, PRIM_PURE},
    [PRIM_CTAID_X] = {SIG_I32, PRIM_PURE},
    [PRIM_NCTAID_X] = {SIG_I32, PRIM_PURE},
    [PRIM_BARRIER_BLOCK] = {SIG_VOID, PRIM_CONVERGENT},
    [PRIM_BARRIER_GRID] = {SIG_VOID_PTR, PRIM_CONVERGENT},
    [PRIM_SHFL_DOWN_F32] = {SIG_F32_F32_I32, PRIM_CONVERGENT},
    [PRIM_SHFL_XOR_F32] = {SIG_F32_F32_I32, PRIM_CONVERGENT},
    [PRIM_SHFL_DOWN_I32] = {SIG_I32_I32_I32, PRIM_CONVERGENT},
    [PRIM_SHFL_XOR_I32] = {SIG_I32_I32_I32, PRIM_CONVERGENT},
    [PRIM_SHFL_XOR_FULL_F32] = {SIG_F32_F32_I32, PRIM_CONVERGENT},
    [PRIM_SHFL_XOR_FULL_I32] = {SIG_I32_I32_I32, PRIM_CONVERGENT},
    [PRIM_ATOMIC_ADD_F32] = {SIG_F32_PTR_F32, 0},
    [PRIM_ATOMIC_ADD_I32] = {SIG_I32_PTR_I32, 0},
    [PRIM_ATOMIC_CAS_I32] = {SIG_I32_PTR_I32_I32, 0},
    [PRIM_ATOMIC_MAX_F32] = {SIG_F32_PTR_F32, 0},
    [PRIM_ATOMIC_MIN_F32] = {SIG_F32_PTR_F32, 0},
    [PRIM_SHARED_BASE] = {SIG_PTR, PRIM_PURE},
    [PRIM_FENCE_GPU] = {SIG_VOID, 0},
    [PRIM_FDIV_F32] = {SIG_F32_F32_F32, PRIM_PURE},
    [PRIM_RCP_F32] = {SIG_F32_F32, PRIM_PURE},
    [PRIM_EXP_F32] = {SIG_F32_F32, PRIM_PURE},
    [PRIM_TRAP] = {SIG_VOID_PTR, 0},
};

static const struct {
    const char *stem;
    int arity;
} math_info[MATH_COUNT] = {
#define MATH_INFO(id, stem, arity) [MATH_##id] = {#stem, arity},
    MATH_LIST(MATH_INFO)
#undef MATH_INFO
};

const char *prim_name(PrimId id) { return prim_names[id]; }

LLVMTypeRef prim_type(LLVMContextRef c, PrimId id)
{
    LLVMTypeRef i32 = LLVMInt32TypeInContext(c), f32 = LLVMFloatTypeInContext(c);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0), vd = LLVMVoidTypeInContext(c);
    switch (prim_info[id].sig) {
    case SIG_I32: return LLVMFunctionType(i32, NULL, 0, 0);
    case SIG_VOID: return LLVMFunctionType(vd, NULL, 0, 0);
    case SIG_VOID_PTR: return LLVMFunctionType(vd, (LLVMTypeRef[]){ptr}, 1, 0);
    case SIG_F32_F32_I32: return LLVMFunctionType(f32, (LLVMTypeRef[]){f32, i32}, 2, 0);
    case SIG_F32_F32: return LLVMFunctionType(f32, (LLVMTypeRef[]){f32}, 1, 0);
    case SIG_F32_F32_F32: return LLVMFunctionType(f32, (LLVMTypeRef[]){f32, f32}, 2, 0);
    case SIG_I32_I32_I32: return LLVMFunctionType(i32, (LLVMTypeRef[]){i32, i32}, 2, 0);
    case SIG_F32_PTR_F32: return LLVMFunctionType(f32, (LLVMTypeRef[]){ptr, f32}, 2, 0);
    case SIG_I32_PTR_I32: return LLVMFunctionType(i32, (LLVMTypeRef[]){ptr, i32}, 2, 0);
    case SIG_I32_PTR_I32_I32:
        return LLVMFunctionType(i32, (LLVMTypeRef[]){ptr, i32, i32}, 3, 0);
    case SIG_PTR: return LLVMFunctionType(ptr, NULL, 0, 0);
    }
    return NULL;
}

static void add_fn_attr(LLVMValueRef f, const char *name, uint64_t value)
{
    LLVMContextRef c = LLVMGetModuleContext(LLVMGetGlobalParent(f));
    unsigned kind = LLVMGetEnumAttributeKindForName(name, strlen(name));
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c, kind, value));
}

/* Returns function name of type ty in m, declaring it when absent. */
static LLVMValueRef get_fn(LLVMModuleRef m, const char *name, LLVMTypeRef ty, bool *fresh)
{
    LLVMValueRef f = LLVMGetNamedFunction(m, name);
    *fresh = !f;
    return f ? f : LLVMAddFunction(m, name, ty);
}

LLVMValueRef prim_get(LLVMModuleRef m, PrimId id)
{
    bool fresh;
    LLVMValueRef f = get_fn(m, prim_names[id], prim_type(LLVMGetModuleContext(m), id), &fresh);
    if (fresh) {
        add_fn_attr(f, "nounwind", 0);
        if (prim_info[id].flags & PRIM_PURE)
            add_fn_attr(f, "memory", 0); /* memory(none) */
        if (prim_info[id].flags & PRIM_CONVERGENT)
            add_fn_attr(f, "convergent", 0);
    }
    return f;
}

LLVMValueRef prim_call(LLVMBuilderRef b, LLVMModuleRef m, PrimId id, LLVMValueRef *args,
                       unsigned n)
{
    LLVMValueRef f = prim_get(m, id);
    return LLVMBuildCall2(b, prim_type(LLVMGetModuleContext(m), id), f, args, n, "");
}

LLVMValueRef llvm_fabs_f32(LLVMBuilderRef b, LLVMModuleRef m, LLVMValueRef x)
{
    LLVMTypeRef f32 = LLVMFloatTypeInContext(LLVMGetModuleContext(m));
    LLVMTypeRef fty = LLVMFunctionType(f32, (LLVMTypeRef[]){f32}, 1, 0);
    LLVMValueRef f = LLVMGetNamedFunction(m, "llvm.fabs.f32");
    if (!f)
        f = LLVMAddFunction(m, "llvm.fabs.f32", fty);
    return LLVMBuildCall2(b, fty, f, (LLVMValueRef[]){x}, 1, "");
}

char *math_name(char *buf, MathId id, bool f64)
{
    snprintf(buf, 32, "__nv_%s%s", math_info[id].stem, f64 ? "" : "f");
    return buf;
}

int math_arity(MathId id) { return math_info[id].arity; }

static LLVMTypeRef math_type(LLVMContextRef c, MathId id, bool f64)
{
    LLVMTypeRef t = f64 ? LLVMDoubleTypeInContext(c) : LLVMFloatTypeInContext(c);
    LLVMTypeRef params[2] = {t, t};
    return LLVMFunctionType(t, params, (unsigned)math_info[id].arity, 0);
}

LLVMValueRef math_get(LLVMModuleRef m, MathId id, bool f64)
{
    char name[32];
    bool fresh;
    LLVMValueRef f = get_fn(m, math_name(name, id, f64),
                            math_type(LLVMGetModuleContext(m), id, f64), &fresh);
    if (fresh) {
        add_fn_attr(f, "nounwind", 0);
        add_fn_attr(f, "memory", 0);
        add_fn_attr(f, "willreturn", 0);
    }
    return f;
}

LLVMValueRef math_call(LLVMBuilderRef b, LLVMModuleRef m, MathId id, LLVMValueRef *args)
{
    bool f64 = LLVMGetTypeKind(LLVMTypeOf(args[0])) == LLVMDoubleTypeKind;
    LLVMValueRef f = math_get(m, id, f64);
    return LLVMBuildCall2(b, math_type(LLVMGetModuleContext(m), id, f64), f, args,
                          (unsigned)math_info[id].arity, "");
}

astitch_status llvm_fail_msg(astitch_context *ctx, const char *what, char *msg)
{
    size_t n = msg ? strlen(msg) : 0;
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == ' '))
        n--;
    ctx_fail(ctx, ASTITCH_ERR_COMPILE, "%s: %.*s", what, (int)n, msg ? msg : "");
    if (msg)
        LLVMDisposeMessage(msg);
    return ASTITCH_ERR_COMPILE;
}

astitch_status llvm_fail_error(astitch_context *ctx, const char *what, LLVMErrorRef err)
{
    char *msg = LLVMGetErrorMessage(err);
    ctx_fail(ctx, ASTITCH_ERR_COMPILE, "%s: %s", what, msg);
    LLVMDisposeErrorMessage(msg);
    return ASTITCH_ERR_COMPILE;
}

astitch_status llvm_verify(astitch_context *ctx, LLVMModuleRef m, const char *what)
{
    char *msg = NULL;
    if (!LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
        LLVMDisposeMessage(msg);
        return ASTITCH_OK;
    }
    return llvm_fail_msg(ctx, what, msg);
}

astitch_status llvm_run_passes(astitch_context *ctx, LLVMModuleRef m, const char *passes,
                               LLVMTargetMachineRef tm)
{
    LLVMPassBuilderOptionsRef o = LLVMCreatePassBuilderOptions();
    LLVMErrorRef err = LLVMRunPasses(m, passes, tm, o);
    LLVMDisposePassBuilderOptions(o);
    if (err) {
        char what[96];
        snprintf(what, sizeof what, "LLVM passes '%s'", passes);
        return llvm_fail_error(ctx, what, err);
    }
    return ASTITCH_OK;
}

astitch_status llvm_parse_ir(astitch_context *ctx, LLVMContextRef c, const char *text,
                             const char *name, LLVMModuleRef *out)
{
    LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(text, strlen(text), name);
    char *msg = NULL;
    /* LLVM 19's LLVMParseIRInContext takes the buffer. */
    if (LLVMParseIRInContext(c, buf, out, &msg)) {
        char what[96];
        snprintf(what, sizeof what, "parsing %s", name);
        return llvm_fail_msg(ctx, what, msg);
    }
    return ASTITCH_OK;
}

static void diag_record(LLVMDiagnosticInfoRef di, void *arg)
{
    LlvmDiag *d = arg;
    if (LLVMGetDiagInfoSeverity(di) != LLVMDSError || d->error)
        return;
    char *desc = LLVMGetDiagInfoDescription(di);
    snprintf(d->msg, sizeof d->msg, "%s", desc);
    LLVMDisposeMessage(desc);
    d->error = true;
}

void llvm_diag_begin(LlvmDiag *d, LLVMContextRef c)
{
    d->c = c;
    d->old_fn = LLVMContextGetDiagnosticHandler(c);
    d->old_arg = LLVMContextGetDiagnosticContext(c);
    d->error = false;
    d->msg[0] = 0;
    LLVMContextSetDiagnosticHandler(c, diag_record, d);
}

void llvm_diag_end(LlvmDiag *d) { LLVMContextSetDiagnosticHandler(d->c, d->old_fn, d->old_arg); }

astitch_status llvm_diag_fail(astitch_context *ctx, const LlvmDiag *d, const char *what,
                              const char *fallback)
{
    return ctx_fail(ctx, ASTITCH_ERR_COMPILE, "%s: %s", what, d->error ? d->msg : fallback);
}

static bool kept(const char *name, const char *const *keep, int nkeep)
{
    for (int i = 0; i < nkeep; i++)
        if (strcmp(name, keep[i]) == 0)
            return true;
    return false;
}

void llvm_internalize(LLVMModuleRef m, const char *const *keep, int nkeep)
{
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
        if (LLVMIsDeclaration(f) || kept(LLVMGetValueName(f), keep, nkeep))
            continue;
        LLVMSetLinkage(f, LLVMInternalLinkage);
        LLVMSetVisibility(f, LLVMDefaultVisibility);
    }
    for (LLVMValueRef g = LLVMGetFirstGlobal(m); g; g = LLVMGetNextGlobal(g)) {
        if (LLVMIsDeclaration(g) || LLVMGetLinkage(g) == LLVMAppendingLinkage)
            continue;
        LLVMSetLinkage(g, LLVMInternalLinkage);
        LLVMSetVisibility(g, LLVMDefaultVisibility);
    }
}

void llvm_set_target(LLVMModuleRef m, LLVMTargetMachineRef tm)
{
    char *triple = LLVMGetTargetMachineTriple(tm);
    LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
    char *layout = LLVMCopyStringRepOfTargetData(td);
    LLVMSetTarget(m, triple);
    LLVMSetDataLayout(m, layout);
    LLVMDisposeMessage(layout);
    LLVMDisposeTargetData(td);
    LLVMDisposeMessage(triple);
}
