/* compile.c: plans to runnable code: emission (emit.c) followed by a lowering (host or NVPTX).
 * Each call uses its own LLVM context, so separate graphs compile independently. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Core.h>

#include "codegen.h"
#include "compile.h"
#include "passes/plan.h"

struct HostKernels {
    LLVMContextRef c;
    HostModule *hm;
    bool as_parts;
    int n;
    int *first;        /* per kernel: its first function in fn */
    void (**fn)(void); /* whole kernels, or every part of every kernel */
};

char *compile_kernel_name(const astitch_plan *p, int k, int part, char *buf, size_t len)
{
    return emit_kernel_name(p, k, part, buf, len);
}

int compile_kernel_num_args(const astitch_plan *p, int k) { return emit_kernel_num_args(p, k); }

int compile_kernel_num_parts(const astitch_plan *p, int k) { return emit_kernel_num_parts(p, k); }

int64_t compile_parts_scratch_bytes(const astitch_plan *p, bool host)
{
    return emit_parts_scratch_bytes(p, host ? COMPILE_HOST_SPILL_GAP : 0);
}

void compile_parts_spill(const astitch_plan *p, int k, bool host, int64_t *spill)
{
    emit_parts_spill(p, k, host ? COMPILE_HOST_SPILL_GAP : 0, spill);
}

astitch_status compile_host(astitch_context *ctx, const astitch_plan *p, bool as_parts,
                            const HostPrimitives *rt, HostKernels **out)
{
    *out = NULL;
    int nfn = 0;
    for (int k = 0; k < p->nkernel; k++)
        nfn += as_parts ? emit_kernel_num_parts(p, k) : 1;
    HostKernels *hk = calloc(1, sizeof *hk);
    if (!hk || !(hk->fn = calloc((size_t)nfn + 1, sizeof *hk->fn)) ||
        !(hk->first = calloc((size_t)p->nkernel + 1, sizeof *hk->first))) {
        host_kernels_destroy(hk);
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "out of memory compiling for the host");
    }
    hk->n = p->nkernel;
    hk->as_parts = as_parts;
    hk->c = LLVMContextCreate();
    EmitOptions o = {.const_addrspace = 0, .as_parts = as_parts, .check_shared = true,
                     .spill_gap = COMPILE_HOST_SPILL_GAP};
    LLVMModuleRef m;
    astitch_status s = emit_plan(ctx, p, hk->c, &o, &m);
    if (s == ASTITCH_OK)
        s = host_compile(ctx, m, rt, &hk->hm);
    for (int k = 0, f = 0; s == ASTITCH_OK && k < p->nkernel; k++) {
        hk->first[k] = f;
        int parts = as_parts ? emit_kernel_num_parts(p, k) : 1;
        for (int part = 0; s == ASTITCH_OK && part < parts; part++, f++) {
            char name[64];
            emit_kernel_name(p, k, as_parts ? part : -1, name, sizeof name);
            if (!(hk->fn[f] = (void (*)(void))host_lookup(hk->hm, ctx, name)))
                s = ASTITCH_ERR_COMPILE;
        }
    }
    if (s != ASTITCH_OK) {
        host_kernels_destroy(hk);
        return s;
    }
    *out = hk;
    return ASTITCH_OK;
}

void (*host_kernel(const HostKernels *hk, int k, int part))(void)
{
    if (k < 0 || k >= hk->n || (part >= 0) != hk->as_parts)
        return NULL;
    return hk->fn[hk->first[k] + (part < 0 ? 0 : part)];
}

void host_kernels_destroy(HostKernels *hk)
{
    if (!hk)
        return;
    host_module_destroy(hk->hm);
    if (hk->c)
        LLVMContextDispose(hk->c);
    free(hk->fn);
    free(hk->first);
    free(hk);
}

/* The line that marks kernel `name` lean in PTX text (a comment to ptxas). */
static int lean_mark(char *buf, size_t len, const char *name)
{
    return snprintf(buf, len, "\n// astitch lean %s\n", name);
}

/* ptx with a mark appended for every kernel k with lean[k] (ptx is consumed). */
static astitch_status mark_lean(astitch_context *ctx, const astitch_plan *p, const bool *lean,
                                char **ptx)
{
    size_t len = strlen(*ptx), more = 0;
    char name[64], line[128];
    for (int k = 0; k < p->nkernel; k++)
        if (lean[k])
            more += (size_t)lean_mark(line, sizeof line,
                                      emit_kernel_name(p, k, -1, name, sizeof name));
    char *out = realloc(*ptx, len + more + 1);
    if (!out) {
        free(*ptx);
        *ptx = NULL;
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "out of memory");
    }
    for (int k = 0; k < p->nkernel; k++)
        if (lean[k])
            len += (size_t)lean_mark(out + len, sizeof line,
                                     emit_kernel_name(p, k, -1, name, sizeof name));
    *ptx = out;
    return ASTITCH_OK;
}

static astitch_status lower_ptx(astitch_context *ctx, const astitch_plan *p, int sm,
                                bool as_parts, const bool *lean, char **ptx)
{
    *ptx = NULL;
    int nfn = 0;
    for (int k = 0; k < p->nkernel; k++)
        nfn += as_parts ? emit_kernel_num_parts(p, k) : 1;
    LLVMContextRef c = LLVMContextCreate();
    EmitOptions o = {.const_addrspace = 1, .as_parts = as_parts, .tensor_align = COMPILE_TENSOR_ALIGN,
                     .native_bf16 = (sm ? sm : 90) >= 80, .lean = lean};
    LLVMModuleRef m;
    astitch_status s = emit_plan(ctx, p, c, &o, &m);
    NvptxKernel *ks = calloc((size_t)nfn + 1, sizeof *ks);
    char (*names)[64] = calloc((size_t)nfn + 1, sizeof *names);
    if (s == ASTITCH_OK && (!ks || !names)) {
        LLVMDisposeModule(m);
        s = ctx_fail(ctx, ASTITCH_ERR_MEMORY, "out of memory");
    }
    if (s == ASTITCH_OK) {
        int f = 0;
        for (int k = 0; k < p->nkernel; k++) {
            const PlanKernel *pk = &p->kernel[k];
            int parts = as_parts ? emit_kernel_num_parts(p, k) : 1;
            for (int part = 0; part < parts; part++, f++)
                ks[f] = (NvptxKernel){
                    .name = emit_kernel_name(p, k, as_parts ? part : -1, names[f], sizeof names[f]),
                    .maxntid = pk->block,
                    .maxnreg = pk->regs};
        }
        NvptxOptions no = {.sm = sm, .kernel = ks, .nkernel = nfn};
        s = nvptx_compile(ctx, m, &no, ptx);
        if (s == ASTITCH_OK && !as_parts)
            s = ptx_raise_bounds(ctx, p, ptx);
    }
    free(ks);
    free(names);
    LLVMContextDispose(c);
    if (s == ASTITCH_OK && lean)
        s = mark_lean(ctx, p, lean, ptx);
    return s;
}

astitch_status compile_ptx(astitch_context *ctx, const astitch_plan *p, int sm, bool as_parts,
                           char **ptx)
{
    return lower_ptx(ctx, p, sm, as_parts, NULL, ptx);
}

astitch_status compile_ptx_lean(astitch_context *ctx, const astitch_plan *p, int sm,
                                const bool *lean, char **ptx)
{
    return lower_ptx(ctx, p, sm, false, lean, ptx);
}

bool compile_ptx_is_lean(const char *ptx, const char *name)
{
    char line[128];
    lean_mark(line, sizeof line, name);
    return strstr(ptx, line) != NULL;
}

const char *ptx_entry(const char *ptx, const char *name)
{
    size_t nlen = strlen(name);
    for (const char *entry = ptx; (entry = strstr(entry, ".entry ")) != NULL;) {
        entry += strlen(".entry ");
        if (strncmp(entry, name, nlen) == 0 && entry[nlen] == '(')
            return entry;
    }
    return NULL;
}

/* Where the number of kernel name's .maxnreg directive starts in ptx, or NULL. */
static const char *maxnreg_at(const char *ptx, const char *name)
{
    const char *entry = ptx_entry(ptx, name);
    if (!entry)
        return NULL;
    const char *body = strchr(entry, '{'), *at = strstr(entry, "\n.maxnreg ");
    if (!at || (body && at > body))
        return NULL;
    return at + strlen("\n.maxnreg ");
}

int compile_ptx_maxnreg(const char *ptx, const char *name)
{
    const char *at = maxnreg_at(ptx, name);
    return at ? atoi(at) : 0;
}

char *compile_ptx_with_maxnreg(const char *ptx, const char *name, int regs)
{
    const char *at = maxnreg_at(ptx, name);
    if (!at)
        return NULL;
    const char *end = at + strspn(at, "0123456789");
    char num[16];
    int w = snprintf(num, sizeof num, "%d", regs);
    size_t head = (size_t)(at - ptx), tail = strlen(end);
    char *out = malloc(head + (size_t)w + tail + 1);
    if (!out)
        return NULL;
    memcpy(out, ptx, head);
    memcpy(out + head, num, (size_t)w);
    memcpy(out + head + (size_t)w, end, tail + 1);
    return out;
}

astitch_status compile_llvm_text(astitch_context *ctx, const astitch_plan *p, char **text)
{
    *text = NULL;
    LLVMContextRef c = LLVMContextCreate();
    EmitOptions o = {.const_addrspace = 0};
    LLVMModuleRef m;
    astitch_status s = emit_plan(ctx, p, c, &o, &m);
    if (s == ASTITCH_OK) {
        char *ir = LLVMPrintModuleToString(m);
        *text = ir ? strdup(ir) : NULL;
        LLVMDisposeMessage(ir);
        LLVMDisposeModule(m);
        if (!*text)
            s = ctx_fail(ctx, ASTITCH_ERR_MEMORY, "out of memory printing LLVM IR");
    }
    LLVMContextDispose(c);
    return s;
}
