/* emit.c: a plan's kernels as LLVM functions: arguments, the entry block with the thread and
 * block indices, then every phase in order (emit_phase.c). */
#define ASTITCH_EMIT_INTERNAL
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

int emit_kernel_num_args(const astitch_plan *p, int k)
{
    return p->kernel[k].ninput + p->kernel[k].noutput + 2;
}

int emit_kernel_num_parts(const astitch_plan *p, int k)
{
    const PlanKernel *pk = &p->kernel[k];
    int n = 1;
    for (int32_t i = 1; i < pk->nphase; i++)
        n += pk->phase[i].barrier == ASTITCH_BARRIER_GLOBAL;
    return n;
}

char *emit_kernel_name(const astitch_plan *p, int k, int part, char *buf, size_t len)
{
    if (part < 0)
        snprintf(buf, len, "%s", p->kernel[k].name);
    else
        snprintf(buf, len, "%s_s%d", p->kernel[k].name, part);
    for (char *c = buf; *c; c++)
        if (!(*c >= 'a' && *c <= 'z') && !(*c >= 'A' && *c <= 'Z') && !(*c >= '0' && *c <= '9'))
            *c = '_';
    return buf;
}

/* In the parts form, SHARED buffer b of kernel k lives at spill[b] in scratch (whole tensor),
 * each after `gap` free bytes, 256-byte aligned; returns the scratch bytes the form needs. */
static int64_t spill_layout(const astitch_plan *p, const PlanKernel *k, int64_t gap,
                            int64_t *spill)
{
    int64_t at = p->scratch_bytes;
    for (int32_t b = 0; b < k->nbuf; b++) {
        if (spill)
            spill[b] = -1;
        if (k->buf[b].kind != ASTITCH_BUFFER_SHARED)
            continue;
        const Node *n = gnode(p->graph, k->buf[b].node);
        at = (at + gap + 255) & ~(int64_t)255;
        if (spill)
            spill[b] = at;
        at += shape_elements(&n->shape) * (int64_t)astitch_dtype_size(n->dtype);
    }
    return (at + 255) & ~(int64_t)255;
}

int64_t emit_parts_scratch_bytes(const astitch_plan *p, int64_t gap)
{
    int64_t most = p->scratch_bytes;
    for (int32_t k = 0; k < p->nkernel; k++) {
        int64_t need = spill_layout(p, &p->kernel[k], gap, NULL);
        if (need > most)
            most = need;
    }
    return most;
}

void emit_parts_spill(const astitch_plan *p, int k, int64_t gap, int64_t *spill)
{
    spill_layout(p, &p->kernel[k], gap, spill);
}

/* i32 indices when every index the kernel computes stays far below 2^31. */
static bool needs_i64(const astitch_graph *g, const PlanKernel *k)
{
    const int64_t limit = (int64_t)1 << 30;
    for (int32_t i = 0; i < k->nop; i++)
        if (shape_elements(&gnode(g, k->op[i].node)->shape) >= limit)
            return true;
    for (int32_t i = 0; i < k->ninput; i++)
        if (shape_elements(&gnode(g, k->input[i])->shape) >= limit)
            return true;
    for (int32_t i = 0; i < k->nphase; i++) {
        const astitch_mapping *m = &k->phase[i].map;
        if (m->rows * m->row_len >= limit || (int64_t)k->grid * m->chunk * m->row_len >= limit)
            return true;
    }
    return false;
}

static LLVMValueRef index_of(Emit *e, PrimId id)
{
    LLVMValueRef v = prim_call(e->b, e->m, id, NULL, 0);
    return LLVMBuildZExt(e->b, v, e->ix, "");
}

/* Emits the function for phases [first, end) of kernel kk, named name. */
static astitch_status emit_function(Emit *e, int32_t kk, const char *name, int32_t first,
                                    int32_t end)
{
    const PlanKernel *k = &e->plan->kernel[kk];
    int nargs = emit_kernel_num_args(e->plan, kk);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(e->c, 0);
    LLVMTypeRef *params = malloc((size_t)nargs * sizeof *params);
    if (!params)
        return ctx_fail(e->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    for (int i = 0; i < nargs; i++)
        params[i] = ptr;
    LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(e->c), params, (unsigned)nargs, 0);
    free(params);
    e->fn = LLVMAddFunction(e->m, name, fty);
    memset(e->tensor, 0, (size_t)e->g->nnode * sizeof *e->tensor);
    for (int32_t i = 0; i < k->ninput; i++)
        e->tensor[k->input[i]] = LLVMGetParam(e->fn, (unsigned)i);
    for (int32_t i = 0; i < k->noutput; i++)
        e->tensor[k->output[i]] = LLVMGetParam(e->fn, (unsigned)(k->ninput + i));
    if (e->opt.tensor_align > 1) {
        unsigned kind = LLVMGetEnumAttributeKindForName("align", 5);
        LLVMAttributeRef align = LLVMCreateEnumAttribute(e->c, kind, e->opt.tensor_align);
        for (int i = 0; i <= k->ninput + k->noutput; i++) /* tensors and the scratch arena */
            LLVMAddAttributeAtIndex(e->fn, (unsigned)i + 1, align);
    }
    e->scratch = LLVMGetParam(e->fn, (unsigned)(k->ninput + k->noutput));
    e->counter = LLVMGetParam(e->fn, (unsigned)(k->ninput + k->noutput + 1));
    LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(e->c, e->fn, "entry");
    LLVMPositionBuilderAtEnd(e->b, entry);
    e->tid = index_of(e, PRIM_TID_X);
    e->ctaid = index_of(e, PRIM_CTAID_X);
    e->shared = prim_call(e->b, e->m, PRIM_SHARED_BASE, NULL, 0);
    e->part_first = first;
    for (int32_t ph = first, next; ph < end && e->status == ASTITCH_OK; ph = next) {
        for (next = ph + 1; next < end && k->phase[next].run_first == ph; next++)
            ;
        emit_phase_run(e, ph, next);
    }
    LLVMBuildRetVoid(e->b);
    return e->status;
}

static astitch_status emit_kernel(Emit *e, int32_t kk)
{
    const PlanKernel *k = &e->plan->kernel[kk];
    e->k = k;
    e->ix = needs_i64(e->g, k) ? LLVMInt64TypeInContext(e->c) : LLVMInt32TypeInContext(e->c);
    /* a block barrier before a run (not between the phases of one, which walk its tiles
     * together) means the run reads what its own block made in an earlier one (a regional
     * value, or a global one at its own elements: schemes.c): contiguous chunks only */
    e->interleave = true;
    for (int32_t b = 0; b < k->nbuf; b++)
        if (k->buf[b].kind == ASTITCH_BUFFER_SHARED)
            e->interleave = false;
    for (int32_t ph = 0; ph < k->nphase; ph++)
        if (k->phase[ph].barrier == ASTITCH_BARRIER_BLOCK && k->phase[ph].run_first == ph)
            e->interleave = false;
    char name[64];
    free(e->spill);
    if (!(e->spill = malloc(((size_t)k->nbuf + 1) * sizeof *e->spill)))
        return ctx_fail(e->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    spill_layout(e->plan, k, e->opt.spill_gap, e->spill);
    if (!e->opt.as_parts)
        return emit_function(e, kk, emit_kernel_name(e->plan, kk, -1, name, sizeof name), 0,
                             k->nphase);
    astitch_status s = ASTITCH_OK;
    for (int32_t first = 0, part = 0; s == ASTITCH_OK && first < k->nphase; part++) {
        int32_t end = first + 1;
        while (end < k->nphase && k->phase[end].barrier != ASTITCH_BARRIER_GLOBAL)
            end++;
        s = emit_function(e, kk, emit_kernel_name(e->plan, kk, part, name, sizeof name), first,
                          end);
        first = end;
    }
    return s;
}

astitch_status emit_plan(astitch_context *ctx, const astitch_plan *p, LLVMContextRef c,
                         const EmitOptions *o, LLVMModuleRef *out)
{
    *out = NULL;
    const astitch_graph *g = p->graph;
    Emit e = {.ctx = ctx, .plan = p, .g = g, .opt = *o, .c = c};
    e.m = LLVMModuleCreateWithNameInContext("astitch", c);
    e.b = LLVMCreateBuilderInContext(c);
    e.tensor = calloc((size_t)g->nnode + 1, sizeof *e.tensor);
    e.cache = calloc((size_t)g->nnode + 1, sizeof *e.cache);
    e.vcache = calloc(((size_t)g->nnode + 1) * VECTOR_MAX, sizeof *e.vcache);
    astitch_status s = ASTITCH_OK;
    if (!e.tensor || !e.cache || !e.vcache)
        s = ctx_fail(ctx, ASTITCH_ERR_MEMORY, "out of memory emitting kernels");
    for (int32_t k = 0; s == ASTITCH_OK && k < p->nkernel; k++)
        s = emit_kernel(&e, k);
    if (s == ASTITCH_OK)
        s = emit_share_divisors(ctx, e.m);
    if (s == ASTITCH_OK)
        s = llvm_verify(ctx, e.m, "emitted kernels");
    free(e.tensor);
    free(e.cache);
    free(e.vcache);
    free(e.spill);
    LLVMDisposeBuilder(e.b);
    if (s != ASTITCH_OK) {
        LLVMDisposeModule(e.m);
        return s;
    }
    *out = e.m;
    return ASTITCH_OK;
}
