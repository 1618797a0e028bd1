/* exec_host.c: an executable's steps on the host: kernels through the SIMT runtime (one fiber
 * per GPU thread, cooperative launches for kernels with grid barriers), compute ops (dot,
 * custom) through the reference interpreter. */
#include <stdlib.h>
#include <string.h>

#include <ffi.h>

#include "runtime.h"
#include "simt.h"

/* A kernel with grid barriers needs all its threads live at once; past the SIMT runtime's
 * limit (or when forced) it runs as its parts cut at the barriers. */
astitch_status exec_host_prepare(astitch_executable *x)
{
    const astitch_plan *p = x->plan;
    x->split = calloc((size_t)p->nkernel + 1, sizeof *x->split);
    if (!x->split)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    bool any = false, force = exec_force_split();
    for (int k = 0; k < p->nkernel; k++) {
        const PlanKernel *pk = &p->kernel[k];
        x->split[k] = pk->global_barriers > 0 &&
                      (force || (int64_t)pk->grid * pk->block > SIMT_MAX_LIVE_THREADS);
        any |= x->split[k];
    }
    astitch_status s = compile_host(x->ctx, p, false, &x->hk);
    if (s == ASTITCH_OK && any)
        s = compile_host(x->ctx, p, true, &x->hk_split);
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

static astitch_status run_kernel(astitch_executable *x, int32_t k, const void *const *inputs,
                                 void *const *outputs, char *temps, char *scratch,
                                 uint32_t *counter)
{
    const PlanKernel *pk = &x->plan->kernel[k];
    if (pk->grid < 1)
        return ASTITCH_OK;
    int nargs = compile_kernel_num_args(x->plan, k);
    void **vals = calloc((size_t)nargs, sizeof *vals);
    void **ptrs = calloc((size_t)nargs, sizeof *ptrs);
    ffi_type **types = calloc((size_t)nargs, sizeof *types);
    SplitInit *init = calloc((size_t)pk->nop * 2 + 1, sizeof *init);
    astitch_status s = ASTITCH_OK;
    if (!vals || !ptrs || !types || !init) {
        s = ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory launching %s", pk->name);
        goto out;
    }
    int a = 0;
    for (int32_t i = 0; i < pk->ninput; i++)
        vals[a++] = value_ptr(x, pk->input[i], inputs, outputs, temps);
    for (int32_t i = 0; i < pk->noutput; i++)
        vals[a++] = value_ptr(x, pk->output[i], inputs, outputs, temps);
    vals[a++] = scratch;
    vals[a++] = counter;
    for (int i = 0; i < nargs; i++) {
        ptrs[i] = &vals[i];
        types[i] = &ffi_type_pointer;
    }
    int ninit = exec_split_inits(x->plan, k, init, pk->nop * 2);
    for (int i = 0; i < ninit; i++)
        fill32(init[i].scratch ? scratch + init[i].offset
                               : value_ptr(x, init[i].node, inputs, outputs, temps),
               init[i].bits, init[i].elements);
    *counter = 0;
    SimtLaunch l = {.arg_types = types, .arg_values = ptrs, .nargs = nargs, .grid = pk->grid,
                    .block = pk->block, .shared_bytes = (size_t)pk->shared_bytes,
                    .name = pk->name};
    if (!x->split[k]) {
        l.fn = host_kernel(x->hk, k, -1);
        l.cooperative = pk->global_barriers > 0;
        s = simt_launch(x->ctx, &l);
    }
    for (int part = 0; x->split[k] && s == ASTITCH_OK && part < compile_kernel_num_parts(x->plan, k); part++) {
        l.fn = host_kernel(x->hk_split, k, part);
        s = simt_launch(x->ctx, &l);
    }
out:
    free(vals);
    free(ptrs);
    free(types);
    free(init);
    return s;
}

static astitch_status run_compute(astitch_executable *x, int32_t n, const void *const *inputs,
                                  void *const *outputs, char *temps)
{
    const Node *node = gnode(x->g, n);
    const void *ops[ASTITCH_MAX_RANK * 4];
    const void **opv = node->nin <= (int)(sizeof ops / sizeof ops[0]) ? ops
                       : calloc((size_t)node->nin, sizeof *opv);
    if (!opv)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    for (int k = 0; k < node->nin; k++)
        opv[k] = value_ptr(x, goperand(x->g, n, k), inputs, outputs, temps);
    astitch_status s = interp_node(x->g, n, opv, value_ptr(x, n, inputs, outputs, temps));
    if (opv != ops)
        free(opv);
    return s;
}

astitch_status exec_host_run(astitch_executable *x, const void *const *inputs,
                             void *const *outputs)
{
    const astitch_plan *p = x->plan;
    char *temps = malloc(x->temp_bytes + 64);
    int64_t scratch_bytes = x->hk_split ? compile_split_scratch_bytes(p) : p->scratch_bytes;
    char *scratch = calloc(1, (size_t)scratch_bytes + 64);
    uint32_t *counter = calloc(16, sizeof *counter);
    astitch_status s = ASTITCH_OK;
    if (!temps || !scratch || !counter)
        s = ctx_fail(x->ctx, ASTITCH_ERR_MEMORY,
                     "out of memory for %zu bytes of temporaries and %lld of scratch",
                     x->temp_bytes, (long long)p->scratch_bytes);
    for (int32_t n = 0; s == ASTITCH_OK && n < x->g->nnode; n++)
        if (x->const_data[n])
            memcpy(temps + x->slot[n].offset, x->const_data[n], x->slot[n].bytes);
    for (int32_t i = 0; s == ASTITCH_OK && i < p->nstep; i++)
        s = p->step[i].kind == ASTITCH_STEP_KERNEL
                ? run_kernel(x, p->step[i].index, inputs, outputs, temps, scratch, counter)
                : run_compute(x, p->step[i].index, inputs, outputs, temps);
    for (int32_t i = 0; s == ASTITCH_OK && i < x->g->noutput; i++) {
        int32_t n = x->g->output[i];
        if (x->g->node[n].op == ASTITCH_OP_PARAMETER)
            memcpy(outputs[i], inputs[x->g->node[n].attr.param], x->slot[n].bytes);
    }
    free(temps);
    free(scratch);
    free(counter);
    return s;
}
