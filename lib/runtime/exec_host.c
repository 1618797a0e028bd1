/* exec_host.c: an executable's steps on the host: kernels through the SIMT runtime (one fiber
 * per GPU thread, cooperative launches for kernels with grid barriers), compute ops (dot,
 * custom) through the reference interpreter.
 *
 * Redzones (simt_redzone.c): every launch runs with guards in each block's shared memory and
 * in the scratch arena, wherever the kernel's buffers leave bytes free (the padding after each
 * buffer's elements, the gaps the parts form leaves before the SHARED buffers it keeps in
 * scratch) and SIMT_REDZONE bytes before and after each region; a guard found overwritten after
 * a launch fails the run (ASTITCH_ERR_DEVICE) naming the kernel, the buffer and the byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ffi.h>

#include "ir/config.h"
#include "runtime.h"
#include "simt.h"

/* A kernel with grid barriers needs all its threads live at once; past the SIMT runtime's
 * limit (or when forced) it runs as its parts cut at the barriers. */
astitch_status exec_host_prepare(astitch_executable *x)
{
    const astitch_plan *p = x->plan;
    x->as_parts = calloc((size_t)p->nkernel + 1, sizeof *x->as_parts);
    if (!x->as_parts)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    bool any = false, force = config_force_parts(&x->ctx->config);
    for (int k = 0; k < p->nkernel; k++) {
        const PlanKernel *pk = &p->kernel[k];
        x->as_parts[k] = pk->global_barriers > 0 &&
                      (force || (int64_t)pk->grid * pk->block > SIMT_MAX_LIVE_THREADS);
        any |= x->as_parts[k];
    }
    astitch_status s = compile_host(x->ctx, p, false, simt_host_primitives(), &x->hk);
    if (s == ASTITCH_OK && any)
        s = compile_host(x->ctx, p, true, simt_host_primitives(), &x->hk_parts);
    return s;
}

/* The address of node n's value in this run. */
static void *value_ptr(const astitch_executable *x, int32_t n, const void *const *inputs,
                       void *const *outputs, char *temps)
{
    const Slot *s = &x->slot[n];
    switch (s->kind) {
    case SLOT_INPUT: return (void *)inputs[s->index];
    case SLOT_OUTPUT: return outputs[s->index];
    case SLOT_TEMP: return temps + s->offset;
    default: return NULL;
    }
}

static void fill32(void *dst, uint32_t bits, int64_t n)
{
    uint32_t *p = dst;
    for (int64_t i = 0; i < n; i++)
        p[i] = bits;
}

/* What kernel k may touch of shared memory and of the scratch arena, for its redzones. */
typedef struct Guards {
    SimtRange *range;    /* shared ranges first, then scratch ranges, each ascending */
    int nshared, nscratch;
    char (*name)[160];   /* two per buffer of the kernel: the buffer's, its counters' */
} Guards;

static int cmp_range(const void *a, const void *b)
{
    const SimtRange *x = a, *y = b;
    return (x->offset > y->offset) - (x->offset < y->offset);
}

/* The ranges of kernel k's buffers, each its elements alone (not the padding the plan rounds it
 * to): SHARED and REDUCE in shared memory, SCRATCH and PARTIAL (accumulators, then counters)
 * in the arena; in the parts form (as_parts), SHARED buffers where the parts keep them in the
 * arena instead. */
static bool guards_build(const astitch_plan *p, int32_t k, bool as_parts, Guards *gd)
{
    const PlanKernel *pk = &p->kernel[k];
    size_t n = (size_t)pk->nbuf * 2 + 1;
    SimtRange *shared = calloc(n, sizeof *shared), *scratch = calloc(n, sizeof *scratch);
    int64_t *spill = calloc(n, sizeof *spill);
    *gd = (Guards){.range = calloc(n, sizeof *gd->range), .name = calloc(n, sizeof *gd->name)};
    bool ok = shared && scratch && spill && gd->range && gd->name;
    if (ok && as_parts)
        compile_parts_spill(p, k, true, spill);
    for (int32_t b = 0; ok && b < pk->nbuf; b++) {
        const PlanBuffer *pb = &pk->buf[b];
        const Node *node = gnode(p->graph, pb->node);
        int64_t used = pb->elements * (int64_t)astitch_dtype_size(pb->dtype);
        bool spilled = as_parts && pb->kind == ASTITCH_BUFFER_SHARED;
        char *name = gd->name[2 * b], *counters = gd->name[2 * b + 1];
        snprintf(name, sizeof gd->name[0], "%s buffer of node %d '%s'%s",
                 astitch_buffer_kind_name(pb->kind), pb->node, node->name,
                 spilled ? " (in scratch: parts form)" : "");
        snprintf(counters, sizeof gd->name[0], "the arrival counters of %s", name);
        switch (pb->kind) {
        case ASTITCH_BUFFER_SHARED:
            if (spilled) {
                used = shape_elements(&node->shape) * (int64_t)astitch_dtype_size(node->dtype);
                scratch[gd->nscratch++] = (SimtRange){spill[b], used, name};
                break;
            }
            /* fall through */
        case ASTITCH_BUFFER_REDUCE:
        case ASTITCH_BUFFER_CARRY:
        case ASTITCH_BUFFER_TILE:
            shared[gd->nshared++] = (SimtRange){pb->offset, used, name};
            break;
        case ASTITCH_BUFFER_SCRATCH:
            scratch[gd->nscratch++] = (SimtRange){pb->offset, used, name};
            break;
        case ASTITCH_BUFFER_PARTIAL: {
            const PlanOp *op = plan_kernel_op(pk, pb->node);
            int64_t rows = op && op->phase >= 0 ? pk->phase[op->phase].map.rows : 0;
            scratch[gd->nscratch++] = (SimtRange){pb->offset, used, name};
            scratch[gd->nscratch++] = (SimtRange){pb->offset + plan_partial_counters(pb),
                                                  rows * 4, counters};
            break;
        }
        }
    }
    if (ok) {
        qsort(shared, (size_t)gd->nshared, sizeof *shared, cmp_range);
        qsort(scratch, (size_t)gd->nscratch, sizeof *scratch, cmp_range);
        memcpy(gd->range, shared, (size_t)gd->nshared * sizeof *shared);
        memcpy(gd->range + gd->nshared, scratch, (size_t)gd->nscratch * sizeof *scratch);
    }
    free(shared);
    free(scratch);
    free(spill);
    return ok;
}

static void guards_free(Guards *gd)
{
    free(gd->range);
    free(gd->name);
}

/* After a launch of kernel k (part `part`, or -1 for the whole kernel): fails it when it
 * overwrote a guard of the scratch arena. */
static astitch_status check_scratch(astitch_executable *x, const PlanKernel *pk, int part,
                                    const char *scratch, const SimtRedzones *z)
{
    int64_t bad;
    if (!simt_redzone_check(scratch, z, &bad))
        return ASTITCH_OK;
    char where[384], what[32] = "";
    simt_redzone_explain(z, bad, where, sizeof where);
    if (part >= 0)
        snprintf(what, sizeof what, " part %d", part);
    return ctx_fail(x->ctx, ASTITCH_ERR_DEVICE,
                    "kernel '%s'%s: scratch redzone overwritten at byte %lld of the %lld-byte "
                    "arena (%s)", pk->name, what, (long long)bad, (long long)z->bytes, where);
}

/* A run on the host: the run's buffers. */
typedef struct HostRun {
    ExecRun base;
    const void *const *inputs;
    void *const *outputs;
    char *temps;
    int64_t scratch_bytes;
    uint32_t *counter;
} HostRun;

static uint64_t host_value(ExecRun *r, int32_t n)
{
    HostRun *h = (HostRun *)r;
    return (uint64_t)(uintptr_t)value_ptr(r->x, n, h->inputs, h->outputs, h->temps);
}

static astitch_status host_fill(ExecRun *r, const ExecFill *fills, int n)
{
    (void)r;
    for (int i = 0; i < n; i++)
        fill32((void *)(uintptr_t)fills[i].dst, fills[i].bits, fills[i].words);
    return ASTITCH_OK;
}

/* Kernel k through the SIMT runtime, whole or as its parts, inside redzones: guard bytes around
 * each block's shared buffers and the scratch arena's, checked after each wave and launch. */
static astitch_status host_launch(ExecRun *r, int k, const uint64_t *args, int nargs)
{
    HostRun *h = (HostRun *)r;
    astitch_executable *x = r->x;
    const PlanKernel *pk = &x->plan->kernel[k];
    char *scratch = (char *)(uintptr_t)r->scratch;
    void **vals = calloc((size_t)nargs, sizeof *vals);
    void **ptrs = calloc((size_t)nargs, sizeof *ptrs);
    ffi_type **types = calloc((size_t)nargs, sizeof *types);
    Guards gd = {0};
    astitch_status s = ASTITCH_OK;
    if (!vals || !ptrs || !types || !guards_build(x->plan, k, x->as_parts[k], &gd)) {
        s = ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory launching %s", pk->name);
        goto out;
    }
    SimtRedzones shared_z = {gd.range, gd.nshared, pk->shared_bytes};
    SimtRedzones scratch_z = {gd.range + gd.nshared, gd.nscratch, h->scratch_bytes};
    simt_redzone_fill(scratch, &scratch_z);
    for (int i = 0; i < nargs; i++) {
        vals[i] = (void *)(uintptr_t)args[i];
        ptrs[i] = &vals[i];
        types[i] = &ffi_type_pointer;
    }
    *h->counter = 0;
    SimtLaunch l = {.arg_types = types, .arg_values = ptrs, .nargs = nargs, .grid = pk->grid,
                    .block = pk->block, .shared_bytes = (size_t)pk->shared_bytes,
                    .name = pk->name, .shared_redzones = &shared_z};
    if (!x->as_parts[k]) {
        l.fn = host_kernel(x->hk, k, -1);
        l.cooperative = pk->global_barriers > 0;
        s = simt_launch(x->ctx, &l);
        if (s == ASTITCH_OK)
            s = check_scratch(x, pk, -1, scratch, &scratch_z);
    }
    int parts = x->as_parts[k] ? compile_kernel_num_parts(x->plan, k) : 0;
    for (int part = 0; s == ASTITCH_OK && part < parts; part++) {
        l.fn = host_kernel(x->hk_parts, k, part);
        s = simt_launch(x->ctx, &l);
        if (s == ASTITCH_OK)
            s = check_scratch(x, pk, part, scratch, &scratch_z);
    }
out:
    free(vals);
    free(ptrs);
    free(types);
    guards_free(&gd);
    return s;
}

/* A compute op through the reference interpreter, on the run's buffers. */
static astitch_status host_compute(ExecRun *r, int32_t n)
{
    const astitch_executable *x = r->x;
    const Node *node = gnode(x->g, n);
    const void *ops[ASTITCH_MAX_RANK * 4] = {0};
    const void **opv = node->nin <= (int)(sizeof ops / sizeof ops[0]) ? ops
                       : calloc((size_t)node->nin, sizeof *opv);
    if (!opv)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    for (int k = 0; k < node->nin; k++)
        opv[k] = (const void *)(uintptr_t)host_value(r, goperand(x->g, n, k));
    astitch_status s = interp_node(x->g, n, opv, (void *)(uintptr_t)host_value(r, n));
    if (opv != ops)
        free(opv);
    return s;
}

static astitch_status host_copy_param(ExecRun *r, int i, int32_t n)
{
    HostRun *h = (HostRun *)r;
    memcpy(h->outputs[i], h->inputs[r->x->g->node[n].attr.param], r->x->slot[n].bytes);
    return ASTITCH_OK;
}

static const ExecTarget host_target = {host_value, host_fill, host_launch, host_compute,
                                       host_copy_param};

astitch_status exec_host_run(astitch_executable *x, const void *const *inputs,
                             void *const *outputs)
{
    const astitch_plan *p = x->plan;
    char *temps = malloc(x->temp_bytes + 64);
    int64_t scratch_bytes = x->hk_parts ? compile_parts_scratch_bytes(p, true) : p->scratch_bytes;
    char *arena = calloc(1, (size_t)scratch_bytes + 2 * SIMT_REDZONE); /* redzones either side */
    char *scratch = arena ? arena + SIMT_REDZONE : NULL;
    uint32_t *counter = calloc(EXEC_COUNTER_BYTES / 4, sizeof *counter);
    astitch_status s = ASTITCH_OK;
    if (!temps || !scratch || !counter)
        s = ctx_fail(x->ctx, ASTITCH_ERR_MEMORY,
                     "out of memory for %zu bytes of temporaries and %lld of scratch",
                     x->temp_bytes, (long long)p->scratch_bytes);
    for (int32_t n = 0; s == ASTITCH_OK && n < x->g->nnode; n++)
        if (x->const_data[n])
            memcpy(temps + x->slot[n].offset, x->const_data[n], x->slot[n].bytes);
    HostRun h = {{x, &host_target, (uint64_t)(uintptr_t)scratch, (uint64_t)(uintptr_t)counter,
                  NULL},
                 inputs, outputs, temps, scratch_bytes, counter};
    if (s == ASTITCH_OK)
        s = exec_run_steps(&h.base);
    free(temps);
    free(arena);
    free(counter);
    return s;
}
