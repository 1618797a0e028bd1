/* exec.c: executables: compile a graph for a target, lay out where values live, run. */
#include <stdlib.h>
#include <string.h>

#include "compile_clock.h"
#include "nvjitlink.h"
#include "runtime.h"

/* The runtime guarantees what compiled kernels assume of their tensor arguments. */
_Static_assert(ASTITCH_TENSOR_ALIGN % COMPILE_TENSOR_ALIGN == 0,
               "tensor alignment below what the kernels assume");

const char *astitch_target_name(astitch_target t)
{
    switch (t) {
    case ASTITCH_TARGET_AUTO: return "auto";
    case ASTITCH_TARGET_REFERENCE: return "reference";
    case ASTITCH_TARGET_HOST: return "host";
    case ASTITCH_TARGET_CUDA: return "cuda";
    }
    return NULL;
}

astitch_status astitch_target_from_name(const char *name, astitch_target *t)
{
    for (int i = 0; name && i <= ASTITCH_TARGET_CUDA; i++)
        if (strcmp(astitch_target_name((astitch_target)i), name) == 0) {
            *t = (astitch_target)i;
            return ASTITCH_OK;
        }
    return ASTITCH_ERR_ARGUMENT;
}

void astitch_compile_options_default(astitch_compile_options *o)
{
    memset(o, 0, sizeof *o);
    o->target = ASTITCH_TARGET_AUTO;
    astitch_plan_options_default(&o->plan);
    o->variant_search = true;
}

/* Bytes of node n's value, dense (every target lays values out so; the reference target has
 * no slots). */
static size_t value_bytes(const astitch_graph *g, int32_t n)
{
    return (size_t)shape_elements(&g->node[n].shape) * astitch_dtype_size(g->node[n].dtype);
}

/* Values that cross a step boundary get a slot: parameters are the caller's inputs, graph
 * outputs the caller's outputs, everything else a range of the temporary arena. */
static astitch_status layout(astitch_executable *x)
{
    astitch_graph *g = x->g;
    const astitch_plan *p = x->plan;
    x->slot = calloc((size_t)g->nnode + 1, sizeof *x->slot);
    if (!x->slot)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory laying out values");
    bool *crosses = calloc((size_t)g->nnode + 1, sizeof *crosses);
    if (!crosses)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory laying out values");
    for (int32_t k = 0; k < p->nkernel; k++) {
        for (int32_t i = 0; i < p->kernel[k].ninput; i++)
            crosses[p->kernel[k].input[i]] = true;
        for (int32_t i = 0; i < p->kernel[k].noutput; i++)
            crosses[p->kernel[k].output[i]] = true;
    }
    for (int32_t s = 0; s < p->nstep; s++)
        if (p->step[s].kind == ASTITCH_STEP_COMPUTE) {
            int32_t n = p->step[s].index;
            crosses[n] = true;
            for (int k = 0; k < g->node[n].nin; k++)
                crosses[goperand(g, n, k)] = true;
        }
    for (int32_t i = 0; i < g->nparam; i++)
        x->slot[g->param[i]] = (Slot){SLOT_INPUT, i, 0, 0};
    for (int32_t i = 0; i < g->noutput; i++)
        if (g->node[g->output[i]].op != ASTITCH_OP_PARAMETER)
            x->slot[g->output[i]] = (Slot){SLOT_OUTPUT, i, 0, 0};
    size_t at = 0;
    for (int32_t n = 0; n < g->nnode; n++) {
        Slot *sl = &x->slot[n];
        sl->bytes = value_bytes(g, n);
        if (sl->kind == SLOT_NONE && crosses[n]) {
            sl->kind = SLOT_TEMP;
            sl->offset = at;
            at += (sl->bytes + 255) & ~(size_t)255;
        }
    }
    x->temp_bytes = at;
    free(crosses);
    /* constants and iota are inlined into kernels; a compute op reading one needs its value */
    x->const_data = calloc((size_t)g->nnode + 1, sizeof *x->const_data);
    if (!x->const_data)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory laying out values");
    for (int32_t n = 0; n < g->nnode; n++) {
        const Node *node = &g->node[n];
        if (x->slot[n].kind != SLOT_TEMP || astitch_plan_kernel_of(p, n) >= 0 ||
            (node->op != ASTITCH_OP_CONSTANT && node->op != ASTITCH_OP_IOTA))
            continue;
        if (!(x->const_data[n] = malloc(x->slot[n].bytes + 1)))
            return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory for constant '%s'",
                            node->name);
        astitch_status s = interp_node(g, n, NULL, x->const_data[n]);
        if (s != ASTITCH_OK)
            return s;
    }
    return ASTITCH_OK;
}

static int fill_order(const void *a, const void *b)
{
    uint64_t x = ((const ExecFill *)a)->dst, y = ((const ExecFill *)b)->dst;
    return (x > y) - (x < y);
}

int exec_kernel_fills(ExecRun *r, int k, ExecFill *out)
{
    const PlanKernel *pk = &r->x->plan->kernel[k];
    SplitInit *init = calloc((size_t)pk->nop * 2 + 1, sizeof *init);
    if (!init)
        return -1;
    int ninit = exec_split_inits(r->x->plan, k, init, pk->nop * 2), n = 0;
    for (int i = 0; i < ninit; i++)
        out[n++] = (ExecFill){init[i].scratch ? r->scratch + init[i].offset
                                              : r->t->value(r, init[i].node),
                              init[i].bits, init[i].elements, init[i].scratch};
    if (pk->global_barriers > 0) { /* a barrier needs the low 31 bits zero, the top bit free */
        uint32_t bits = 0;
        for (int i = 0; i < n; i++)
            if (out[i].own && out[i].dst == r->counters + EXEC_COUNTER_BYTES &&
                !(out[i].bits & 0x7fffffffu))
                bits = out[i].bits; /* the same as the fill after it: the two merge */
        out[n++] = (ExecFill){r->counters, bits, EXEC_COUNTER_BYTES / 4, true};
    }
    free(init);
    qsort(out, (size_t)n, sizeof *out, fill_order);
    int merged = 0;
    for (int i = 0; i < n; i++) {
        ExecFill *last = merged ? &out[merged - 1] : NULL;
        if (last && last->own && out[i].own && last->bits == out[i].bits &&
            last->dst + 4 * (uint64_t)last->words == out[i].dst)
            last->words += out[i].words;
        else
            out[merged++] = out[i];
    }
    return merged;
}

/* Kernel k of r's plan: its arguments in the order of its signature (inputs, outputs, scratch,
 * counters), its fills (exec_kernel_fills), the launch. */
static astitch_status run_kernel(ExecRun *r, int k)
{
    astitch_executable *x = r->x;
    const PlanKernel *pk = &x->plan->kernel[k];
    if (pk->grid < 1)
        return ASTITCH_OK;
    int nargs = compile_kernel_num_args(x->plan, k);
    uint64_t *args = calloc((size_t)nargs + 1, sizeof *args);
    ExecFill *fills = calloc((size_t)pk->nop * 2 + 2, sizeof *fills);
    astitch_status s = ASTITCH_OK;
    int nfill = fills ? exec_kernel_fills(r, k, fills) : -1;
    if (!args || nfill < 0) {
        s = ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory launching %s", pk->name);
        goto out;
    }
    int a = 0;
    for (int32_t i = 0; i < pk->ninput; i++)
        args[a++] = r->t->value(r, pk->input[i]);
    for (int32_t i = 0; i < pk->noutput; i++)
        args[a++] = r->t->value(r, pk->output[i]);
    args[a++] = r->scratch;
    args[a++] = r->counters;
    ASTITCH_ASSERT(a == nargs);
    if (nfill > 0)
        s = r->t->fill(r, fills, nfill);
    if (s == ASTITCH_OK)
        s = r->t->launch(r, k, args, nargs);
out:
    free(args);
    free(fills);
    return s;
}

astitch_status exec_run_steps(ExecRun *r)
{
    astitch_executable *x = r->x;
    const astitch_plan *p = x->plan;
    astitch_status s = ASTITCH_OK;
    for (int32_t i = 0; s == ASTITCH_OK && i < p->nstep; i++) {
        s = p->step[i].kind == ASTITCH_STEP_KERNEL ? run_kernel(r, p->step[i].index)
                                                   : r->t->compute(r, p->step[i].index);
        if (s == ASTITCH_OK && r->after_step)
            s = r->after_step(r, i);
    }
    for (int32_t i = 0; s == ASTITCH_OK && i < x->g->noutput; i++) {
        int32_t n = x->g->output[i];
        if (x->g->node[n].op == ASTITCH_OP_PARAMETER && x->slot[n].bytes)
            s = r->t->copy_param(r, i, n);
    }
    return s;
}

int exec_split_inits(const astitch_plan *p, int k, SplitInit *out, int n)
{
    const PlanKernel *pk = &p->kernel[k];
    const astitch_graph *g = p->graph;
    int count = 0;
    for (int32_t ph = 0; ph < pk->nphase; ph++) {
        const PlanPhase *phase = &pk->phase[ph];
        for (int32_t r = 0; r < phase->nroot; r++) {
            const Node *node = gnode(g, phase->root[r]);
            const PlanOp *op = plan_kernel_op(pk, phase->root[r]);
            /* split reduces, and reduces summed across rows (zero_init, never split) */
            if (node->op != ASTITCH_OP_REDUCE || (phase->map.split <= 1 && !op->zero_init))
                continue;
            if (!op->zero_init) { /* combined in order: zero the PARTIAL buffer's counters */
                const PlanBuffer *b = plan_kernel_buffer(pk, ASTITCH_BUFFER_PARTIAL, phase->root[r]);
                if (b && count < n)
                    out[count++] = (SplitInit){phase->root[r], true,
                                               (size_t)(b->offset + plan_partial_counters(b)),
                                               phase->map.rows, 0};
                continue;
            }
            /* the destination starts at the identity (f32 sum: -0, +0 would turn a sum of -0
             * to +0); the atomic combines are f32 sum, max, min and i32 sum */
            Wide id = reduce_identity(node->attr.reduce, node->dtype);
            uint32_t bits = node->dtype == ASTITCH_F32 ? f32_bits((float)id.f) : (uint32_t)id.i;
            int64_t elements = shape_elements(&node->shape);
            if (op->buf >= 0 && count < n)
                out[count++] = (SplitInit){phase->root[r], true, (size_t)pk->buf[op->buf].offset,
                                           elements, bits};
            if (op->output && count < n)
                out[count++] = (SplitInit){phase->root[r], false, 0, elements, bits};
        }
    }
    return count;
}

/* exec_build's first half: x->plan and the layout of its buffers. */
static astitch_status plan_and_layout(astitch_executable *x, const astitch_device *dev,
                                      const astitch_plan_options *po)
{
    astitch_status s = clocked_plan_create(x->g, dev, po, &x->plan);
    if (s != ASTITCH_OK)
        return s;
    x->g = x->plan->graph; /* the plan's own rewritten copy, when it made one */
    return layout(x);
}

/* exec_build's second half: the kernels compiled and loaded, the buffers made. */
static astitch_status prepare(astitch_executable *x)
{
    return x->target == ASTITCH_TARGET_CUDA ? exec_cuda_prepare(x) : exec_host_prepare(x);
}

astitch_status exec_build(astitch_executable *x, const astitch_device *dev,
                          const astitch_plan_options *po)
{
    astitch_status s = plan_and_layout(x, dev, po);
    return s == ASTITCH_OK ? prepare(x) : s;
}

/* The entry points' start: *o the defaults (in *def) when NULL, and g verified. */
static astitch_status options_and_verify(astitch_graph *g, const astitch_compile_options **o,
                                         astitch_compile_options *def)
{
    if (!*o) {
        astitch_compile_options_default(def);
        *o = def;
    }
    return astitch_graph_verify(g);
}

astitch_status astitch_compile(astitch_graph *g, const astitch_compile_options *o,
                               astitch_executable **out)
{
    if (!out)
        return ASTITCH_ERR_ARGUMENT;
    *out = NULL;
    if (!g)
        return ASTITCH_ERR_ARGUMENT;
    astitch_compile_options def;
    astitch_status s = options_and_verify(g, &o, &def);
    if (s != ASTITCH_OK)
        return s;
    astitch_executable *x = calloc(1, sizeof *x);
    if (!x)
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    compile_clock_start(&x->times);
    x->ctx = g->ctx;
    x->g = g;
    x->target = o->target;
    if (o->view_outputs && (s = views_create(g, &x->views)) != ASTITCH_OK)
        goto fail;
    astitch_graph *run_g = x->views ? views_graph(x->views) : g; /* the graph x runs */
    x->g = run_g;
    if (x->target == ASTITCH_TARGET_REFERENCE) {
        compile_clock_stop(&x->times);
        x->times = (astitch_compile_times){0};
        *out = x;
        return ASTITCH_OK;
    }
    astitch_device dev;
    if (x->target == ASTITCH_TARGET_AUTO || x->target == ASTITCH_TARGET_CUDA) {
        s = exec_cuda_open(x->ctx, &x->cuda, &dev);
        if (s == ASTITCH_OK)
            x->target = ASTITCH_TARGET_CUDA;
        else if (x->target == ASTITCH_TARGET_CUDA)
            goto fail;
        else
            x->target = ASTITCH_TARGET_HOST;
    }
    if (x->target == ASTITCH_TARGET_HOST)
        astitch_device_builtin("host", &dev);
    if (o->device)
        dev = *o->device;
    x->caller_workspace = o->caller_workspace && x->target == ASTITCH_TARGET_CUDA;
    if ((s = plan_and_layout(x, &dev, &o->plan)) != ASTITCH_OK)
        goto fail;
    bool search = x->target == ASTITCH_TARGET_CUDA && o->variant_search;
    if (search) /* the forms' modules compile on worker threads while this one goes on */
        exec_variant_ahead(x, run_g, &dev, &o->plan);
    if ((s = prepare(x)) != ASTITCH_OK)
        goto fail;
    for (int i = 0; x->caller_workspace && i < x->plan->nstep; i++)
        if (x->plan->step[i].kind == ASTITCH_STEP_COMPUTE &&
            !exec_cuda_compute_on_gpu(x, x->plan->step[i].index)) {
            s = ctx_fail(x->ctx, ASTITCH_ERR_UNSUPPORTED,
                         "caller_workspace: the graph's compute op '%s' runs on the host "
                         "through memory the executable holds",
                         x->g->node[x->plan->step[i].index].name);
            ctx_error_at_node(x->ctx, x->plan->step[i].index);
            goto fail;
        }
    x->variant = (astitch_variant_info){.state = ASTITCH_VARIANT_NONE, .nforms = 1,
                                        .wide_rows = o->plan.wide_rows,
                                        .long_rows = o->plan.long_rows,
                                        .column_sums_in_rows = o->plan.column_sums_in_rows,
                                        .persistent = o->plan.persistent};
    if (search && (s = exec_variant_prepare(x, run_g, &dev, &o->plan)) != ASTITCH_OK)
        goto fail;
    x->dot_search = search;
    cubin_jobs_end_mine();
    compile_clock_stop(&x->times);
    *out = x;
    return ASTITCH_OK;
fail:
    cubin_jobs_end_mine();
    compile_clock_stop(&x->times);
    if (x->plan) /* a failure naming a node of the plan's own copy names it in g */
        ctx_error_node_into(g->ctx, x->plan->graph, g);
    astitch_executable_destroy(x);
    return s;
}

void astitch_executable_destroy(astitch_executable *x)
{
    if (!x)
        return;
    astitch_executable_destroy(x->alt);
    host_kernels_destroy(x->hk);
    host_kernels_destroy(x->hk_parts);
    free(x->as_parts);
    exec_cuda_close(x->cuda);
    for (int32_t n = 0; x->const_data && n < x->g->nnode; n++)
        free(x->const_data[n]);
    free(x->const_data);
    astitch_plan_destroy(x->plan); /* x->g may be the plan's graph */
    views_destroy(x->views);       /* after the plan, which may refer to its graph */
    free(x->slot);
    free(x);
}

int astitch_executable_host_compute_ops(const astitch_executable *x)
{
    if (!x)
        return 0;
    int n = 0;
    if (!x->plan) { /* reference: the whole graph on the host */
        for (int32_t i = 0; i < x->g->nnode; i++)
            n += x->g->node[i].op == ASTITCH_OP_DOT || x->g->node[i].op == ASTITCH_OP_CUSTOM;
        return n;
    }
    for (int32_t i = 0; i < x->plan->nstep; i++)
        n += x->plan->step[i].kind == ASTITCH_STEP_COMPUTE &&
             !(x->target == ASTITCH_TARGET_CUDA &&
               exec_cuda_compute_on_gpu(x, x->plan->step[i].index));
    return n;
}

astitch_status astitch_executable_compile_times(const astitch_executable *x,
                                                astitch_compile_times *out)
{
    if (!x || !out)
        return ASTITCH_ERR_ARGUMENT;
    *out = x->times;
    return ASTITCH_OK;
}

astitch_target astitch_executable_target(const astitch_executable *x)
{
    return x ? x->target : ASTITCH_TARGET_AUTO;
}

const astitch_plan *astitch_executable_plan(const astitch_executable *x)
{
    return x ? x->plan : NULL;
}

astitch_status astitch_executable_loaded_kernel(const astitch_executable *x, int k,
                                                astitch_loaded_kernel *out)
{
    if (!x || !out)
        return ASTITCH_ERR_ARGUMENT;
    if (x->target != ASTITCH_TARGET_CUDA || !x->cuda || !x->plan)
        return ctx_fail(x->ctx, ASTITCH_ERR_UNSUPPORTED,
                        "astitch_executable_loaded_kernel: the %s target loads no GPU kernels",
                        astitch_target_name(x->target));
    if (k < 0 || k >= x->plan->nkernel)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT,
                        "astitch_executable_loaded_kernel: kernel %d out of range 0..%d", k,
                        x->plan->nkernel - 1);
    exec_cuda_loaded_kernel(x, k, out);
    return ASTITCH_OK;
}

/* The address of tensor i of a run: host[i] where host is given, else dev[i]. */
static uint64_t run_address(const void *const *host, const uint64_t *dev, int32_t i)
{
    return host ? (uint64_t)(uintptr_t)host[i] : dev[i];
}

/* Refuses an output whose memory overlaps an input's or another output's (host addresses in
 * hin/hout, else device ones in din/dout): kernels read their inputs while they write their
 * outputs, so an overlap would give wrong values, not an error. Empty tensors take no memory.
 * fn names the API call in the message. */
static astitch_status check_disjoint(astitch_executable *x, const void *const *hin,
                                     const void *const *hout, const uint64_t *din,
                                     const uint64_t *dout, const char *fn)
{
    const astitch_graph *g = x->g;
    for (int32_t o = 0; o < g->noutput; o++) {
        uint64_t a = run_address(hout, dout, o);
        size_t an = value_bytes(g, g->output[o]);
        for (int32_t i = 0; an && i < g->nparam + o; i++) {
            bool input = i < g->nparam;
            int32_t j = input ? i : i - g->nparam, n = input ? g->param[j] : g->output[j];
            uint64_t b = input ? run_address(hin, din, j) : run_address(hout, dout, j);
            size_t bn = value_bytes(g, n);
            if (bn && a < b + bn && b < a + an)
                return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT,
                                "%s: output %d ('%s') overlaps %s %d ('%s'); every output needs "
                                "memory of its own",
                                fn, views_caller_index(x->views, o), g->node[g->output[o]].name,
                                input ? "input" : "output",
                                input ? (int)j : views_caller_index(x->views, j), g->node[n].name);
        }
    }
    return ASTITCH_OK;
}

astitch_status astitch_execute(astitch_executable *x, const void *const *inputs,
                               void *const *outputs)
{
    if (!x)
        return ASTITCH_ERR_ARGUMENT;
    if ((x->g->nparam > 0 && !inputs) || !outputs)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT, "astitch_execute: %s array is NULL",
                        outputs ? "inputs" : "outputs");
    astitch_status s;
    void *const *caller_outputs = outputs;
    outputs = views_host_outputs(x->views, outputs);
    for (int32_t i = 0; i < x->g->nparam; i++)
        if (!inputs[i] && value_bytes(x->g, x->g->param[i]))
            return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT, "astitch_execute: input %d ('%s') is NULL",
                            i, x->g->node[x->g->param[i]].name);
    for (int32_t i = 0; i < x->g->noutput; i++)
        if (!outputs[i] && value_bytes(x->g, x->g->output[i]))
            return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT,
                            "astitch_execute: output %d ('%s') is NULL",
                            views_caller_index(x->views, i), x->g->node[x->g->output[i]].name);
    if (x->caller_workspace)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT,
                        "astitch_execute: the executable was compiled with caller_workspace: "
                        "run it with astitch_execute_device_workspace");
    if ((s = check_disjoint(x, inputs, (const void *const *)outputs, NULL, NULL,
                            "astitch_execute")) != ASTITCH_OK)
        return s;
    if ((s = exec_variant_settle_host(x, inputs)) != ASTITCH_OK)
        return s;
    switch (x->target) {
    case ASTITCH_TARGET_REFERENCE: s = astitch_run_reference(x->g, inputs, outputs); break;
    case ASTITCH_TARGET_HOST: s = exec_host_run(x, inputs, outputs); break;
    case ASTITCH_TARGET_CUDA: s = exec_cuda_run_host(x, inputs, outputs); break;
    default: return ctx_fail(x->ctx, ASTITCH_ERR_INTERNAL, "executable has no target");
    }
    if (s == ASTITCH_OK)
        views_fill_host(x->views, inputs, caller_outputs);
    return s;
}

/* The checks of a run on device pointers: x runs on cuda, every non-empty tensor is given and
 * aligned, no output overlaps another tensor. fn names the API call in messages. */
static astitch_status check_device_run(astitch_executable *x, const uint64_t *inputs,
                                       const uint64_t *outputs, const char *fn)
{
    if (x->target != ASTITCH_TARGET_CUDA)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT, "%s: the executable's target is %s, not cuda",
                        fn, astitch_target_name(x->target));
    if ((x->g->nparam > 0 && !inputs) || !outputs)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT, "%s: NULL pointer array", fn);
    for (int32_t i = 0; i < x->g->nparam + x->g->noutput; i++) {
        bool in = i < x->g->nparam;
        int32_t j = in ? i : i - x->g->nparam, n = in ? x->g->param[j] : x->g->output[j];
        uint64_t ptr = in ? inputs[j] : outputs[j];
        if (!x->slot[n].bytes)
            continue;
        const char *what = in ? "input" : "output", *name = x->g->node[n].name;
        int index = in ? (int)j : views_caller_index(x->views, j); /* as the caller counts */
        if (!ptr)
            return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT, "%s: %s %d ('%s') is NULL", fn, what,
                            index, name);
        if (ptr % ASTITCH_TENSOR_ALIGN)
            return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT,
                            "%s: %s %d ('%s') at 0x%llx is not %d-byte aligned (kernels access "
                            "tensors with vector loads and stores)",
                            fn, what, index, name, (unsigned long long)ptr, ASTITCH_TENSOR_ALIGN);
    }
    return check_disjoint(x, NULL, NULL, inputs, outputs, fn);
}

astitch_status astitch_execute_device(astitch_executable *x, const uint64_t *inputs,
                                      const uint64_t *outputs, void *stream)
{
    if (!x)
        return ASTITCH_ERR_ARGUMENT;
    outputs = views_device_outputs(x->views, outputs);
    astitch_status s = check_device_run(x, inputs, outputs, "astitch_execute_device");
    if (s != ASTITCH_OK)
        return s;
    if (x->caller_workspace)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT,
                        "astitch_execute_device: the executable was compiled with "
                        "caller_workspace: run it with astitch_execute_device_workspace");
    s = exec_variant_settle(x, inputs, outputs, stream);
    return s == ASTITCH_OK ? exec_cuda_run_device(x, inputs, outputs, stream) : s;
}

astitch_status astitch_execute_device_timed(astitch_executable *x, const uint64_t *inputs,
                                            const uint64_t *outputs, void *stream,
                                            double *step_us, int nstep)
{
    if (!x)
        return ASTITCH_ERR_ARGUMENT;
    const char *fn = "astitch_execute_device_timed";
    outputs = views_device_outputs(x->views, outputs);
    astitch_status s = check_device_run(x, inputs, outputs, fn);
    if (s != ASTITCH_OK)
        return s;
    if (x->caller_workspace)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT,
                        "%s: the executable was compiled with caller_workspace, which this call "
                        "does not take",
                        fn);
    if (!step_us || nstep != x->plan->nstep)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT,
                        "%s: step_us must have one entry per step of the plan (%d), not %d", fn,
                        (int)x->plan->nstep, step_us ? nstep : 0);
    s = exec_variant_settle(x, inputs, outputs, stream);
    return s == ASTITCH_OK ? exec_cuda_run_timed(x, inputs, outputs, stream, step_us) : s;
}

astitch_status astitch_executable_workspace_bytes(const astitch_executable *x, size_t *bytes)
{
    if (!x || !bytes)
        return ASTITCH_ERR_ARGUMENT;
    *bytes = 0;
    if (x->target != ASTITCH_TARGET_CUDA)
        return ctx_fail(x->ctx, ASTITCH_ERR_UNSUPPORTED,
                        "astitch_executable_workspace_bytes: the executable's target is %s, not "
                        "cuda", astitch_target_name(x->target));
    *bytes = exec_cuda_workspace_bytes(x);
    for (const astitch_executable *y = x->alt; y; y = y->alt) /* a PENDING search's forms */
        if (exec_cuda_workspace_bytes(y) > *bytes)
            *bytes = exec_cuda_workspace_bytes(y);
    return ASTITCH_OK;
}

astitch_status astitch_execute_device_workspace(astitch_executable *x, const uint64_t *inputs,
                                                const uint64_t *outputs, void *stream,
                                                uint64_t workspace, size_t workspace_bytes)
{
    if (!x)
        return ASTITCH_ERR_ARGUMENT;
    const char *fn = "astitch_execute_device_workspace";
    outputs = views_device_outputs(x->views, outputs);
    astitch_status s = check_device_run(x, inputs, outputs, fn);
    size_t need = 0;
    if (s == ASTITCH_OK)
        s = astitch_executable_workspace_bytes(x, &need);
    if (s != ASTITCH_OK)
        return s;
    if (!workspace)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT, "%s: the workspace is NULL", fn);
    if (workspace % ASTITCH_TENSOR_ALIGN)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT, "%s: the workspace at 0x%llx is not %d-byte "
                        "aligned", fn, (unsigned long long)workspace, ASTITCH_TENSOR_ALIGN);
    if (workspace_bytes < need)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT,
                        "%s: a workspace of %zu bytes given, the run needs %zu "
                        "(astitch_executable_workspace_bytes)", fn, workspace_bytes, need);
    for (astitch_executable *y = x; y; y = y->alt)
        exec_cuda_use_workspace(y, workspace);
    s = exec_variant_settle(x, inputs, outputs, stream); /* whichever form it keeps has it */
    if (s == ASTITCH_OK)
        s = exec_cuda_run_device(x, inputs, outputs, stream);
    for (astitch_executable *y = x; y; y = y->alt)
        exec_cuda_use_workspace(y, 0);
    return s;
}

astitch_status astitch_emit(astitch_graph *g, const astitch_compile_options *o, const char *what,
                            char **text)
{
    if (!g || !what || !text)
        return ASTITCH_ERR_ARGUMENT;
    *text = NULL;
    bool ptx = strcmp(what, "ptx") == 0;
    if (!ptx && strcmp(what, "llvm") != 0)
        return ctx_fail(g->ctx, ASTITCH_ERR_ARGUMENT, "astitch_emit: unknown form '%s' (ptx, llvm)",
                        what);
    astitch_compile_options def;
    astitch_status s = options_and_verify(g, &o, &def);
    if (s != ASTITCH_OK)
        return s;
    astitch_device dev;
    if (o->device)
        dev = *o->device;
    else
        astitch_device_builtin(ptx || o->target != ASTITCH_TARGET_HOST ? "h100" : "host", &dev);
    astitch_plan *p;
    if ((s = astitch_plan_create(g, &dev, &o->plan, &p)) != ASTITCH_OK)
        return s;
    s = ptx ? compile_ptx(g->ctx, p, dev.sm_version ? dev.sm_version : 90, false, text)
            : compile_llvm_text(g->ctx, p, text);
    if (s != ASTITCH_OK)
        ctx_error_node_into(g->ctx, p->graph, g);
    astitch_plan_destroy(p);
    return s;
}
