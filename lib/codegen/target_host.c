/*
 * target_host.c: kernel module -> machine code for this CPU in an ORC LLJIT.
 *
 *   verify       the module as emitted; every function it calls is one host_symbols.c binds
 *   move         into the JIT's own context (through bitcode: the module's context is the
 *                caller's, and LLVM 19's C API cannot wrap a foreign one)
 *   target       the JIT's triple and data layout; O2 for the host CPU
 *   bind         host_symbols.c's table as absolute symbols: primitives -> the functions the
 *                runtime gives (HostPrimitives), math -> libm
 *   materialize  every external function is looked up at once, so compile and link errors
 *                show here, not at the first launch
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>

#include "codegen.h"
#include "ir/ir.h"

typedef struct HostFn {
    char *name;
    void *addr;
} HostFn;

struct HostModule {
    LLVMOrcLLJITRef jit;
    HostFn *fn; /* the module's external functions: its kernels */
    int nfn;
    char report[512]; /* the first error the JIT's session reported */
};

/* LLVM's target registry is process-wide; registering it once is the one piece of global
 * state here. */
static pthread_once_t host_once = PTHREAD_ONCE_INIT;

static void host_init(void)
{
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
}

static LLVMOrcCSymbolMapPair symbol(LLVMOrcLLJITRef jit, const HostSymbol *s)
{
    LLVMOrcCSymbolMapPair p;
    p.Name = LLVMOrcLLJITMangleAndIntern(jit, s->name);
    p.Sym.Address = (LLVMOrcExecutorAddress)(uintptr_t)s->fn;
    p.Sym.Flags.GenericFlags =
        LLVMJITSymbolGenericFlagsExported | LLVMJITSymbolGenericFlagsCallable;
    p.Sym.Flags.TargetFlags = 0;
    return p;
}

static astitch_status bind_symbols(astitch_context *ctx, LLVMOrcLLJITRef jit,
                                   const HostPrimitives *rt)
{
    HostSymbol s[HOST_SYMBOLS_MAX];
    int n = host_symbols(rt, s);
    LLVMOrcCSymbolMapPair *sym = malloc(sizeof *sym * (size_t)n);
    if (!sym)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "host: out of memory");
    for (int i = 0; i < n; i++)
        sym[i] = symbol(jit, &s[i]);
    LLVMOrcMaterializationUnitRef mu = LLVMOrcAbsoluteSymbols(sym, (size_t)n);
    free(sym);
    LLVMErrorRef err = LLVMOrcJITDylibDefine(LLVMOrcLLJITGetMainJITDylib(jit), mu);
    if (err) {
        LLVMOrcDisposeMaterializationUnit(mu);
        return llvm_fail_error(ctx, "host: binding the runtime", err);
    }
    return ASTITCH_OK;
}

/* Every function m calls is an intrinsic, defined in m, or one of host_symbols. */
static astitch_status check_calls(astitch_context *ctx, LLVMModuleRef m, const HostPrimitives *rt)
{
    HostSymbol s[HOST_SYMBOLS_MAX];
    int n = host_symbols(rt, s);
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
        const char *name = LLVMGetValueName(f);
        if (!LLVMIsDeclaration(f) || !LLVMGetFirstUse(f) || strncmp(name, "llvm.", 5) == 0)
            continue;
        int i = 0;
        while (i < n && strcmp(s[i].name, name) != 0)
            i++;
        if (i < n)
            continue;
        for (int id = 0; id < PRIM_COUNT; id++)
            if (strcmp(prim_name((PrimId)id), name) == 0)
                return ctx_fail(ctx, ASTITCH_ERR_COMPILE,
                                "host: call to primitive '%s', which the runtime does not give",
                                name);
        return ctx_fail(ctx, ASTITCH_ERR_COMPILE,
                        "host: call to '%s', which is neither a primitive nor a math function",
                        name);
    }
    return ASTITCH_OK;
}

/* Copies m into context c through bitcode. */
static astitch_status move_module(astitch_context *ctx, LLVMModuleRef m, LLVMContextRef c,
                                  LLVMModuleRef *out)
{
    LlvmDiag d;
    LLVMMemoryBufferRef buf = LLVMWriteBitcodeToMemoryBuffer(m);
    llvm_diag_begin(&d, c);
    LLVMBool bad = LLVMParseBitcodeInContext2(c, buf, out);
    llvm_diag_end(&d);
    LLVMDisposeMemoryBuffer(buf);
    return bad ? llvm_diag_fail(ctx, &d, "host: moving the module", "bitcode error") : ASTITCH_OK;
}

/* The SLP vectorizer pairs the compares of a block against each other: its time grows with
 * the square of a block's size (a chain of 15,000 element-wise ops: 14.5 of 16 s at O2). A
 * block of more than SLP_BLOCK_MAX instructions (no example comes near) is left unvectorized
 * in the host's own code. */
enum { SLP_BLOCK_MAX = 16384 };

static bool has_huge_block(LLVMModuleRef m)
{
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
        for (LLVMBasicBlockRef b = LLVMGetFirstBasicBlock(f); b; b = LLVMGetNextBasicBlock(b)) {
            int n = 0;
            for (LLVMValueRef i = LLVMGetFirstInstruction(b); i; i = LLVMGetNextInstruction(i))
                if (++n > SLP_BLOCK_MAX)
                    return true;
        }
    return false;
}

static astitch_status optimize(astitch_context *ctx, LLVMModuleRef m, LLVMOrcLLJITRef jit)
{
    LLVMTargetRef t;
    char *msg = NULL;
    const char *triple = LLVMOrcLLJITGetTripleString(jit);
    LLVMSetTarget(m, triple);
    LLVMSetDataLayout(m, LLVMOrcLLJITGetDataLayoutStr(jit));
    if (LLVMGetTargetFromTriple(triple, &t, &msg))
        return llvm_fail_msg(ctx, "host target", msg);
    char *cpu = LLVMGetHostCPUName(), *features = LLVMGetHostCPUFeatures();
    LLVMTargetMachineRef tm = LLVMCreateTargetMachine(t, triple, cpu, features,
                                                      LLVMCodeGenLevelDefault, LLVMRelocDefault,
                                                      LLVMCodeModelJITDefault);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(features);
    astitch_status st = llvm_run_passes(ctx, m, has_huge_block(m) ? "default<O1>" : "default<O2>", tm);
    LLVMDisposeTargetMachine(tm);
    return st;
}

/* Records the names of m's external functions in hm->fn. */
static astitch_status list_functions(astitch_context *ctx, LLVMModuleRef m, HostModule *hm)
{
    int n = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
        n++;
    hm->fn = calloc((size_t)(n ? n : 1), sizeof *hm->fn);
    if (!hm->fn)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "host: out of memory");
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
        LLVMLinkage l = LLVMGetLinkage(f);
        if (LLVMIsDeclaration(f) || (l != LLVMExternalLinkage && l != LLVMWeakODRLinkage))
            continue;
        if (!(hm->fn[hm->nfn++].name = graph_strdup(LLVMGetValueName(f))))
            return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "host: out of memory");
    }
    return ASTITCH_OK;
}

static astitch_status materialize(astitch_context *ctx, HostModule *hm)
{
    for (int i = 0; i < hm->nfn; i++) {
        LLVMOrcExecutorAddress a;
        LLVMErrorRef err = LLVMOrcLLJITLookup(hm->jit, &a, hm->fn[i].name);
        if (err && hm->report[0]) {
            LLVMConsumeError(err);
            return ctx_fail(ctx, ASTITCH_ERR_COMPILE, "host: compiling '%s': %s", hm->fn[i].name,
                            hm->report);
        }
        if (err)
            return llvm_fail_error(ctx, "host: compiling the kernels", err);
        hm->fn[i].addr = (void *)(uintptr_t)a;
    }
    return ASTITCH_OK;
}

/* Keeps the first error the session reports (such as "Symbols not found: [ f ]"), which says
 * more than the error the failed lookup returns, instead of letting LLVM print it. */
static void keep_report(void *arg, LLVMErrorRef err)
{
    HostModule *hm = arg;
    char *msg = LLVMGetErrorMessage(err);
    if (!hm->report[0])
        snprintf(hm->report, sizeof hm->report, "%s", msg);
    LLVMDisposeErrorMessage(msg);
}

static astitch_status compile(astitch_context *ctx, LLVMModuleRef m, const HostPrimitives *rt,
                              HostModule *hm)
{
    astitch_status st;
    if ((st = llvm_verify(ctx, m, "host: invalid kernel module")) ||
        (st = check_calls(ctx, m, rt)))
        return st;
    LLVMErrorRef err = LLVMOrcCreateLLJIT(&hm->jit, NULL);
    if (err)
        return llvm_fail_error(ctx, "host: creating the JIT", err);
    LLVMOrcExecutionSessionSetErrorReporter(LLVMOrcLLJITGetExecutionSession(hm->jit), keep_report,
                                            hm);
    LLVMOrcThreadSafeContextRef tsc = LLVMOrcCreateNewThreadSafeContext();
    LLVMContextRef c = LLVMOrcThreadSafeContextGetContext(tsc);
    LLVMModuleRef jm = NULL;
    LlvmDiag d;
    st = move_module(ctx, m, c, &jm);
    if (!st)
        st = optimize(ctx, jm, hm->jit);
    if (!st)
        st = list_functions(ctx, jm, hm);
    if (!st)
        st = bind_symbols(ctx, hm->jit, rt);
    if (st) {
        if (jm)
            LLVMDisposeModule(jm);
        LLVMOrcDisposeThreadSafeContext(tsc);
        return st;
    }
    /* tsc stays held until the diagnostics are off c: the JIT drops the module (and with it
     * its reference to c) once it is compiled. */
    LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(jm, tsc);
    llvm_diag_begin(&d, c);
    err = LLVMOrcLLJITAddLLVMIRModule(hm->jit, LLVMOrcLLJITGetMainJITDylib(hm->jit), tsm);
    st = err ? llvm_fail_error(ctx, "host: adding the module", err) : materialize(ctx, hm);
    llvm_diag_end(&d);
    LLVMOrcDisposeThreadSafeContext(tsc);
    if (!st && d.error)
        st = llvm_diag_fail(ctx, &d, "host: code generation", "");
    return st;
}

astitch_status host_compile(astitch_context *ctx, LLVMModuleRef m, const HostPrimitives *rt,
                            HostModule **out)
{
    if (out)
        *out = NULL;
    if (!m || !rt) {
        if (m)
            LLVMDisposeModule(m);
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "host: no %s", m ? "runtime primitives" : "module");
    }
    HostModule *hm = out ? calloc(1, sizeof *hm) : NULL;
    if (!hm) {
        LLVMDisposeModule(m);
        return out ? ctx_fail(ctx, ASTITCH_ERR_MEMORY, "host: out of memory")
                   : ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "host: no output");
    }
    pthread_once(&host_once, host_init);
    astitch_status st = compile(ctx, m, rt, hm);
    LLVMDisposeModule(m);
    if (st) {
        host_module_destroy(hm);
        return st;
    }
    *out = hm;
    return ASTITCH_OK;
}

void *host_lookup(HostModule *hm, astitch_context *ctx, const char *name)
{
    for (int i = 0; hm && name && i < hm->nfn; i++)
        if (strcmp(hm->fn[i].name, name) == 0)
            return hm->fn[i].addr;
    ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "host: no kernel '%s' in the module",
             name ? name : "(null)");
    return NULL;
}

void host_module_destroy(HostModule *hm)
{
    if (!hm)
        return;
    if (hm->jit) {
        LLVMErrorRef err = LLVMOrcDisposeLLJIT(hm->jit);
        if (err)
            LLVMConsumeError(err);
    }
    for (int i = 0; i < hm->nfn; i++)
        free(hm->fn[i].name);
    free(hm->fn);
    free(hm);
}
