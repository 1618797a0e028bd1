/*
 * target_nvptx.c: kernel module -> PTX.
 *
 *   verify          the module as emitted
 *   kernels         every listed kernel defined, returning void
 *   target          nvptx64-nvidia-cuda, sm_<N>, +ptx80; data layout from the target machine
 *   primitives      prims_nvptx.c's IR, parsed and linked (alwaysinline definitions)
 *   libdevice       only the __nv_* functions the module calls (and what they call), linked
 *                   (libdevice.c); nvvm-reflect-ftz = 0 (no flush to zero, as on the host)
 *   kernels         PTX kernel calling convention; nvvm.annotations: kernel, maxntidx,
 *                   maxnreg, minctasm
 *   internalize     everything but the kernels, so O3 inlines and drops the rest
 *   O3              default<O3> with the NVPTX callbacks (NVVMReflect among them)
 *   resolved        no call left to an undefined function
 *   emit            PTX text through LLVMTargetMachineEmitToMemoryBuffer
 *
 * LLVM's diagnostics on the module's context are captured for the duration (LlvmDiag), so a
 * linker or bitcode error is a status with LLVM's message, never an exit.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>

#include "astitch_config.h"
#include "codegen.h"
#include "ir/config.h"
#include "ir/ir.h"

#define NVPTX_TRIPLE "nvptx64-nvidia-cuda"
#define NVPTX_FEATURES "+ptx80"

/* LLVM's target registry is process-wide; registering it once is the one piece of global
 * state here. */
static pthread_once_t nvptx_once = PTHREAD_ONCE_INIT;

static void nvptx_init(void)
{
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
}

const char *cuda_toolkit_path(void)
{
    const char *env = config_cuda_path();
    return env ? env : ASTITCH_CUDA_PATH;
}

/* The architectures LLVM 19 and PTX 8.0 both know. */
static bool sm_known(int sm)
{
    static const int known[] = {50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i] == sm)
            return true;
    return false;
}

static astitch_status check_kernels(astitch_context *ctx, LLVMModuleRef m, const NvptxOptions *o)
{
    for (int i = 0; i < o->nkernel; i++) {
        const NvptxKernel *k = &o->kernel[i];
        LLVMValueRef f = k->name ? LLVMGetNamedFunction(m, k->name) : NULL;
        if (!f || LLVMIsDeclaration(f))
            return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "nvptx: kernel '%s' is not defined",
                            k->name ? k->name : "(null)");
        LLVMTypeRef ret = LLVMGetReturnType(LLVMGlobalGetValueType(f));
        if (LLVMGetTypeKind(ret) != LLVMVoidTypeKind)
            return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "nvptx: kernel '%s' does not return void",
                            k->name);
        if (k->maxntid < 0 || k->maxntid > 1024 || k->maxnreg < 0 || k->maxnreg > 255 ||
            k->minctasm < 0)
            return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT,
                            "nvptx: kernel '%s': bad bounds maxntid %d maxnreg %d minctasm %d",
                            k->name, k->maxntid, k->maxnreg, k->minctasm);
    }
    return ASTITCH_OK;
}

static astitch_status create_tm(astitch_context *ctx, int sm, LLVMTargetMachineRef *tm)
{
    LLVMTargetRef t;
    char *msg = NULL, cpu[16];
    if (LLVMGetTargetFromTriple(NVPTX_TRIPLE, &t, &msg))
        return llvm_fail_msg(ctx, "nvptx target", msg);
    snprintf(cpu, sizeof cpu, "sm_%d", sm);
    *tm = LLVMCreateTargetMachine(t, NVPTX_TRIPLE, cpu, NVPTX_FEATURES, LLVMCodeGenLevelAggressive,
                                  LLVMRelocDefault, LLVMCodeModelDefault);
    return *tm ? ASTITCH_OK
               : ctx_fail(ctx, ASTITCH_ERR_COMPILE, "nvptx: no target machine for %s", cpu);
}

static astitch_status link_prims(astitch_context *ctx, LLVMModuleRef m, LLVMTargetMachineRef tm,
                                 const LlvmDiag *d)
{
    LLVMModuleRef p;
    astitch_status st = llvm_parse_ir(ctx, LLVMGetModuleContext(m), prims_nvptx_ir(),
                                      "prims_nvptx", &p);
    if (st)
        return st;
    llvm_set_target(p, tm);
    if (LLVMLinkModules2(m, p))
        return llvm_diag_fail(ctx, d, "nvptx: linking the primitives", "link failed");
    return ASTITCH_OK;
}

static void annotate(LLVMModuleRef m, LLVMValueRef f, const char *key, int value)
{
    LLVMContextRef c = LLVMGetModuleContext(m);
    LLVMMetadataRef md[3] = {
        LLVMValueAsMetadata(f),
        LLVMMDStringInContext2(c, key, strlen(key)),
        LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(c), (unsigned)value, 0)),
    };
    LLVMAddNamedMetadataOperand(m, "nvvm.annotations",
                                LLVMMetadataAsValue(c, LLVMMDNodeInContext2(c, md, 3)));
}

static void mark_kernels(LLVMModuleRef m, const NvptxOptions *o)
{
    for (int i = 0; i < o->nkernel; i++) {
        const NvptxKernel *k = &o->kernel[i];
        LLVMValueRef f = LLVMGetNamedFunction(m, k->name);
        LLVMSetFunctionCallConv(f, LLVMPTXKernelCallConv);
        annotate(m, f, "kernel", 1);
        if (k->maxntid)
            annotate(m, f, "maxntidx", k->maxntid);
        if (k->maxnreg)
            annotate(m, f, "maxnreg", k->maxnreg);
        if (k->minctasm)
            annotate(m, f, "minctasm", k->minctasm);
    }
}

static astitch_status check_resolved(astitch_context *ctx, LLVMModuleRef m)
{
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
        const char *name = LLVMGetValueName(f);
        if (LLVMIsDeclaration(f) && LLVMGetFirstUse(f) && strncmp(name, "llvm.", 5) != 0)
            return ctx_fail(ctx, ASTITCH_ERR_COMPILE,
                            "nvptx: call to '%s', which is neither a primitive nor in libdevice",
                            name);
    }
    return ASTITCH_OK;
}

static astitch_status emit_ptx(astitch_context *ctx, LLVMTargetMachineRef tm, LLVMModuleRef m,
                               char **ptx)
{
    LLVMMemoryBufferRef buf;
    char *msg = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMAssemblyFile, &msg, &buf))
        return llvm_fail_msg(ctx, "nvptx: emitting PTX", msg);
    size_t n = LLVMGetBufferSize(buf);
    *ptx = malloc(n + 1);
    if (*ptx) {
        memcpy(*ptx, LLVMGetBufferStart(buf), n);
        (*ptx)[n] = 0;
    }
    LLVMDisposeMemoryBuffer(buf);
    return *ptx ? ASTITCH_OK : ctx_fail(ctx, ASTITCH_ERR_MEMORY, "nvptx: out of memory");
}

static astitch_status lower(astitch_context *ctx, LLVMModuleRef m, const NvptxOptions *o,
                            LLVMTargetMachineRef tm, const LlvmDiag *d, char **ptx)
{
    astitch_status st;
    if ((st = llvm_verify(ctx, m, "nvptx: invalid kernel module")) ||
        (st = check_kernels(ctx, m, o)))
        return st;
    llvm_set_target(m, tm);
    if ((st = link_prims(ctx, m, tm, d)) ||
        (st = libdevice_link(ctx, m, tm, o->cuda_path ? o->cuda_path : cuda_toolkit_path(), d)))
        return st;
    mark_kernels(m, o);
    const char **keep = malloc(sizeof *keep * (size_t)(o->nkernel ? o->nkernel : 1));
    if (!keep)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "nvptx: out of memory");
    for (int i = 0; i < o->nkernel; i++)
        keep[i] = o->kernel[i].name;
    llvm_internalize(m, keep, o->nkernel);
    free(keep);
    if ((st = llvm_run_passes(ctx, m, "default<O3>", tm)) || (st = check_resolved(ctx, m)))
        return st;
    st = emit_ptx(ctx, tm, m, ptx);
    if (!st && d->error) {
        free(*ptx);
        *ptx = NULL;
        return llvm_diag_fail(ctx, d, "nvptx: code generation", "");
    }
    return st;
}

astitch_status nvptx_compile(astitch_context *ctx, LLVMModuleRef m, const NvptxOptions *o,
                             char **ptx)
{
    if (ptx)
        *ptx = NULL;
    if (!m)
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "nvptx: no module");
    int sm = o && o->sm ? o->sm : 90;
    if (!o || !ptx || o->nkernel < 0 || (o->nkernel > 0 && !o->kernel) || !sm_known(sm)) {
        LLVMDisposeModule(m);
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "nvptx: bad options (sm_%d, %d kernels)", sm,
                        o ? o->nkernel : 0);
    }
    pthread_once(&nvptx_once, nvptx_init);
    LlvmDiag d;
    llvm_diag_begin(&d, LLVMGetModuleContext(m));
    LLVMTargetMachineRef tm = NULL;
    astitch_status st = create_tm(ctx, sm, &tm);
    if (!st)
        st = lower(ctx, m, o, tm, &d, ptx);
    LLVMDisposeModule(m);
    if (tm)
        LLVMDisposeTargetMachine(tm);
    llvm_diag_end(&d);
    return st;
}
