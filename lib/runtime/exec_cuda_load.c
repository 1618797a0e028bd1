/* exec_cuda_load.c: a CUDA executable's kernels from its plan to loaded modules. The PTX
 * (through the compile cache) is loaded whole; the register feedback follows (a kernel that
 * spills at its planned bound: a higher bound, or where its grid must stay resident its lean
 * form; docs/codegen.md, *Targets*), and the kernels whose grids cannot all be resident load
 * again as their parts. Where the variant search builds forms and modules compile ahead
 * (nvjitlink.h: by ptxas, or by nvJitLink), each form's module and its kernel's module at the
 * next register bound start compiling at once (exec_cuda_compile_ahead; docs/codegen.md,
 * *Compile time*), and the loads here take them. */
#include <stdlib.h>
#include <string.h>

#include "compile_cache.h"
#include "exec_cuda.h"
#include "exec_cuda_fill.h"
#include "ir/config.h"
#include "nvjitlink.h"
#include "passes/passes.h"
#include "runtime.h"

static astitch_status load_parts(astitch_executable *x, ExecCuda *c)
{
    const astitch_plan *p = x->plan;
    char *ptx;
    astitch_status s = cached_compile_ptx(x->ctx, p,
                                          c->dev->info.cc_major * 10 + c->dev->info.cc_minor,
                                          true, &ptx);
    if (s != ASTITCH_OK)
        return s;
    s = cuda_module_load(x->ctx, c->dev, ptx, "kernel parts", &c->parts_mod);
    free(ptx);
    for (int k = 0; s == ASTITCH_OK && k < p->nkernel; k++) {
        if (!c->as_parts[k])
            continue;
        int parts = compile_kernel_num_parts(p, k);
        if (!(c->part[k] = calloc((size_t)parts, sizeof **c->part)))
            return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
        for (int i = 0; s == ASTITCH_OK && i < parts; i++) {
            char name[64];
            compile_kernel_name(p, k, i, name, sizeof name);
            s = cuda_kernel_get(x->ctx, c->parts_mod, name, p->kernel[k].block,
                                (size_t)p->kernel[k].shared_bytes, &c->part[k][i]);
        }
    }
    return s;
}

/* The text of plan p's whole module for ptx: ptx, with the fill kernel appended where a
 * kernel may need several fills. *text is NULL when that is ptx itself; false on memory. */
static bool module_text(const astitch_plan *p, const char *ptx, char **text)
{
    *text = exec_cuda_fill_needed(p) ? exec_cuda_fill_append(ptx) : NULL;
    return *text || !exec_cuda_fill_needed(p);
}

/* Loads the whole kernels from ptx (replacing a module loaded before) and prepares each,
 * noting the register bound its PTX gives it (a relaxed one from the compile cache, say); the
 * fill kernel joins the module where a kernel may need several fills. */
static astitch_status load_whole(astitch_executable *x, ExecCuda *c, const char *ptx)
{
    const astitch_plan *p = x->plan;
    cuda_module_unload(c->mod);
    c->mod = NULL;
    c->has_fill = false;
    bool fill = exec_cuda_fill_needed(p);
    char *text;
    if (!module_text(p, ptx, &text))
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    astitch_status s =
        cuda_module_load(x->ctx, c->dev, text ? text : ptx, "stitch kernels", &c->mod);
    free(text);
    if (s == ASTITCH_OK && fill && !(c->has_fill = exec_cuda_fill_get(x->ctx, c->mod, &c->fill)))
        s = ASTITCH_ERR_COMPILE;
    for (int k = 0; s == ASTITCH_OK && k < p->nkernel; k++) {
        char name[64];
        compile_kernel_name(p, k, -1, name, sizeof name);
        s = cuda_kernel_get(x->ctx, c->mod, name, p->kernel[k].block,
                            (size_t)p->kernel[k].shared_bytes, &c->kern[k]);
        c->bound[k] = compile_ptx_maxnreg(ptx, name);
        c->lean[k] = compile_ptx_is_lean(ptx, name);
    }
    return s;
}

/* launch_next_regs of compiled kernel k. */
static int relaxed_bound(const astitch_device *d, const CudaKernel *k)
{
    return (int)launch_next_regs(d, k->block, k->regs, k->blocks_per_sm);
}

/* The kernel of plan p whose register bound the bound search may raise, and whose module at
 * the next bound compiles ahead: the only kernel of p that may relax, where it holds rows in
 * registers (the kernels whose bound decides their speed; an element-wise kernel is left to
 * the relaxation); -1 when there is none. */
static int bound_kernel(const astitch_plan *p)
{
    int only = -1;
    for (int k = 0; k < p->nkernel; k++)
        if (launch_bound_may_change(&p->kernel[k])) {
            if (only >= 0)
                return -1;
            only = k;
        }
    return only >= 0 && plan_kernel_holds_rows(&p->kernel[only]) ? only : -1;
}

/* ptx with p's bound_kernel at its next bound, where ptx holds it at the planned bound (not a
 * relaxed PTX from the compile cache) and there is a next bound; malloc'd, or NULL. The module
 * the bound search times beside the planned one, and the one relax_spills loads when that
 * kernel spills: compiled ahead where forms are (a guess). */
static char *raised_ptx(const astitch_plan *p, const char *ptx)
{
    int k = bound_kernel(p);
    if (k < 0)
        return NULL;
    char name[64];
    compile_kernel_name(p, k, -1, name, sizeof name);
    int bound = compile_ptx_maxnreg(ptx, name);
    int next = bound == p->kernel[k].regs ? (int)launch_next_bound(&p->dev, &p->kernel[k], bound)
                                          : 0;
    return next > 0 ? compile_ptx_with_maxnreg(ptx, name, next) : NULL;
}

void exec_cuda_compile_ahead(astitch_context *ctx, int sm, const astitch_plan *p,
                             pthread_t owner)
{
    char *ptx;
    CubinCompiler by;
    if (!cuda_module_compiles_ahead(ctx, &by) || cached_compile_ptx(ctx, p, sm, false, &ptx))
        return;
    /* p's module, and the module of raised_ptx where there is one */
    char *guess = raised_ptx(p, ptx), *text = NULL;
    const char *want[2] = {ptx, guess};
    for (int i = 0; i < 2; i++)
        if (want[i] && module_text(p, want[i], &text)) {
            cubin_job_start_for(text ? text : want[i], sm, by, owner);
            free(text);
        }
    free(guess);
    free(ptx);
}

/* Assume-relax-apply, checked: a kernel of a block per tile that spills at the register bound
 * the plan assumed (the plan cannot see how many values the code keeps live) gets the bound of
 * one block fewer per SM, and the module is loaded again, RELAX_ROUNDS times at most. A kernel
 * with grid barriers keeps its bound: its grid counts on the planned residency. *ptx becomes
 * the PTX finally loaded; *relaxed says whether it differs. */
enum { RELAX_ROUNDS = 3 };

static astitch_status relax_spills(astitch_executable *x, ExecCuda *c, char **ptx, bool *relaxed)
{
    const astitch_plan *p = x->plan;
    for (int round = 0; round < RELAX_ROUNDS; round++) {
        bool again = false;
        for (int k = 0; k < p->nkernel; k++) {
            const PlanKernel *pk = &p->kernel[k];
            int regs = relaxed_bound(&p->dev, &c->kern[k]);
            if (!launch_bound_may_change(pk) || c->kern[k].local_bytes == 0 || !regs)
                continue;
            char name[64];
            char *next = compile_ptx_with_maxnreg(*ptx, compile_kernel_name(p, k, -1, name, sizeof name),
                                                  regs);
            if (!next)
                continue;
            free(*ptx);
            *ptx = next;
            again = true;
        }
        if (!again)
            return ASTITCH_OK;
        *relaxed = true;
        astitch_status s = load_whole(x, c, *ptx);
        if (s != ASTITCH_OK)
            return s;
    }
    return ASTITCH_OK;
}

/* A kernel that spills at a bound it cannot leave (persistent, or with grid barriers: its grid
 * counts on the planned residency), or with `force` any such kernel, is emitted again in its
 * lean form, and the module loaded again, once. *ptx becomes the PTX loaded; *changed says
 * whether it differs. */
static astitch_status lean_spills(astitch_executable *x, ExecCuda *c, int sm, bool force,
                                  char **ptx, bool *changed)
{
    const astitch_plan *p = x->plan;
    bool *lean = calloc((size_t)p->nkernel + 1, sizeof *lean), any = false;
    if (!lean)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    for (int k = 0; k < p->nkernel; k++) {
        const PlanKernel *pk = &p->kernel[k];
        lean[k] = c->lean[k] || (!launch_bound_may_change(pk) &&
                                 (force || c->kern[k].local_bytes > 0));
        any |= lean[k] && !c->lean[k];
    }
    char *next = NULL;
    astitch_status s = any ? compile_ptx_lean(x->ctx, p, sm, lean, &next) : ASTITCH_OK;
    free(lean);
    if (s != ASTITCH_OK || !any)
        return s;
    free(*ptx);
    *ptx = next;
    *changed = true;
    return load_whole(x, c, *ptx);
}

void exec_cuda_loaded_kernel(const astitch_executable *x, int k, astitch_loaded_kernel *out)
{
    const ExecCuda *c = x->cuda;
    const CudaKernel *ck = &c->kern[k];
    *out = (astitch_loaded_kernel){.regs = ck->regs, .bound = c->bound[k],
                                   .planned_bound = x->plan->kernel[k].regs,
                                   .local_bytes = (long)ck->local_bytes,
                                   .blocks_per_sm = ck->blocks_per_sm, .lean = c->lean[k]};
}

bool exec_cuda_bound_searchable(const astitch_executable *x)
{
    const astitch_plan *p = x->plan;
    const ExecCuda *c = x->cuda;
    int k = c && !x->bound_trial ? bound_kernel(p) : -1;
    return k >= 0 && c->bound[k] == p->kernel[k].regs && !c->lean[k] &&
           c->kern[k].local_bytes == 0 &&
           launch_next_bound(&p->dev, &p->kernel[k], c->bound[k]) > 0 &&
           !compile_cache_bound_kept(p, exec_cuda_sm(x));
}

void exec_cuda_bound_record(const astitch_executable *winner)
{
    const ExecCuda *c = winner->cuda;
    if (winner->bound_trial && c->trial_ptx)
        compile_cache_replace(winner->plan, exec_cuda_sm(winner), false, c->trial_ptx);
    else if (!winner->bound_trial)
        compile_cache_set_bound_kept(winner->plan, exec_cuda_sm(winner));
}

astitch_status exec_cuda_load(astitch_executable *x, ExecCuda *c)
{
    const astitch_plan *p = x->plan;
    char *ptx;
    int sm = c->dev->info.cc_major * 10 + c->dev->info.cc_minor;
    astitch_status s = cached_compile_ptx(x->ctx, p, sm, false, &ptx);
    if (s != ASTITCH_OK)
        return s;
    if (x->bound_trial) { /* the bound search's other module: the kernel at its next bound */
        char *up = raised_ptx(p, ptx);
        free(ptx);
        if (!up)
            return ctx_fail(x->ctx, ASTITCH_ERR_INTERNAL,
                            "bound search: the plan has no kernel at a bound to raise");
        ptx = up;
    }
    s = load_whole(x, c, ptx);
    bool relaxed = false;
    bool force_lean = config_force_lean(&x->ctx->config);
    if (s == ASTITCH_OK)
        s = lean_spills(x, c, sm, force_lean, &ptx, &relaxed);
    if (s == ASTITCH_OK)
        s = relax_spills(x, c, &ptx, &relaxed);
    /* the next compile of this plan loads the relaxed or lean PTX (not a forced lean form, nor
     * a trial of the bound search, which is recorded only if it wins: exec_cuda_bound_record) */
    if (s == ASTITCH_OK && relaxed && !force_lean && !x->bound_trial)
        compile_cache_replace(p, sm, false, ptx);
    if (s == ASTITCH_OK && x->bound_trial) {
        c->trial_ptx = ptx;
        ptx = NULL;
    }
    free(ptx);
    bool any_parts = false;
    for (int k = 0; s == ASTITCH_OK && k < p->nkernel; k++) {
        const PlanKernel *pk = &p->kernel[k];
        if (pk->global_barriers > 0 && (c->force_parts || pk->grid > c->kern[k].max_coresident))
            c->as_parts[k] = any_parts = true;
    }
    if (s == ASTITCH_OK && any_parts)
        s = load_parts(x, c);
    c->scratch_need = (size_t)(any_parts ? compile_parts_scratch_bytes(p, false) : p->scratch_bytes) + 256;
    return s;
}
