/* exec_cuda.c: an executable on an NVIDIA GPU: PTX from the plan, loaded into the primary
 * context (exec_cuda_load.c); each kernel checked for co-residency after load (occupancy x
 * SMs) and launched cooperatively when it has grid barriers. A kernel whose grid cannot be
 * co-resident runs as its parts cut at the grid barriers instead (a second module), never as a
 * hang. Compute ops run between kernels through exec_cuda_compute.c: dots on cuBLASLt
 * (exec_dot.c, prepared at load), custom ops through their device forms, or, under the
 * host_compute switch, every one on the host through the reference interpreter.
 *
 * A run on device pointers queues only asynchronous work on the caller's stream (identity
 * fills and counter resets, one memset or one launch of exec_cuda_fill.c's kernel before a
 * kernel, launches, cublasLtMatmul, parameter copies device to device) into memory allocated
 * at compile time, so it can be captured into a CUDA graph. A compute op's host round trip
 * cannot: a run that has one on the host refuses a capturing stream up front. */
#include <stdlib.h>
#include <string.h>

#include "compile_cache.h"
#include "cublaslt.h"
#include "cuda_driver.h"
#include "exec_cuda.h"
#include "exec_cuda_fill.h"
#include "ir/config.h"
#include "runtime.h"
#include "passes/passes.h"


astitch_status exec_cuda_open(astitch_context *ctx, ExecCuda **out, astitch_device *model)
{
    *out = NULL;
    ExecCuda *c = calloc(1, sizeof *c);
    if (!c)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "out of memory");
    astitch_status s = cuda_device_open(ctx, 0, &c->dev);
    if (s != ASTITCH_OK) {
        free(c);
        return s;
    }
    cuda_device_model(c->dev, model);
    cuda_workspace_init(&c->ws, c->dev);
    c->force_parts = config_force_parts(&ctx->config);
    *out = c;
    return ASTITCH_OK;
}

void exec_cuda_close(ExecCuda *c)
{
    if (!c)
        return;
    if (c->dev && cuda_enter(NULL, c->dev) == ASTITCH_OK) {
        for (int i = 0; c->io && i < c->nio; i++)
            cuda_free(c->dev, c->io[i]);
        cuda_free(c->dev, c->temps);
        cuda_free(c->dev, c->dot_ws);
        exec_dots_destroy(c->dots);
        cuda_workspace_release(&c->ws);
        cuda_module_unload(c->mod);
        cuda_module_unload(c->parts_mod);
        cuda_leave(c->dev);
    }
    for (int i = 0; c->part && i < c->nkernel; i++)
        free(c->part[i]);
    free(c->part);
    free(c->io);
    free(c->kern);
    free(c->bound);
    free(c->lean);
    free(c->as_parts);
    free(c->trial_ptx);
    cuda_device_close(c->dev);
    free(c);
}

astitch_status exec_cuda_prepare(astitch_executable *x)
{
    ExecCuda *c = x->cuda;
    const astitch_plan *p = x->plan;
    astitch_status s = cuda_enter(x->ctx, c->dev);
    if (s != ASTITCH_OK)
        return s;
    c->kern = calloc((size_t)p->nkernel + 1, sizeof *c->kern);
    c->as_parts = calloc((size_t)p->nkernel + 1, sizeof *c->as_parts);
    c->part = calloc((size_t)p->nkernel + 1, sizeof *c->part);
    c->bound = calloc((size_t)p->nkernel + 1, sizeof *c->bound);
    c->lean = calloc((size_t)p->nkernel + 1, sizeof *c->lean);
    if (!c->kern || !c->as_parts || !c->part || !c->bound || !c->lean) {
        s = ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
        goto out;
    }
    c->nkernel = p->nkernel;
    s = exec_cuda_load(x, c);
    if (s != ASTITCH_OK)
        goto out;
    if (s == ASTITCH_OK)
        s = exec_dots_prepare(x, c->dev, &c->dots, &c->dot_ws_bytes);
    if (s == ASTITCH_OK)
        s = cuda_compute_check(x, c->dots);
    if (s == ASTITCH_OK && x->caller_workspace) {
        exec_cuda_use_workspace(x, 0);
        goto out;
    }
    if (s == ASTITCH_OK)
        s = cuda_alloc(x->ctx, c->dev, x->temp_bytes, &c->temps);
    if (s == ASTITCH_OK)
        s = cuda_alloc(x->ctx, c->dev, c->dot_ws_bytes, &c->dot_ws);
    for (int32_t n = 0; s == ASTITCH_OK && n < x->g->nnode; n++)
        if (x->const_data[n] && x->slot[n].bytes)
            s = cuda_copy_to_device(x->ctx, c->dev, c->temps + x->slot[n].offset,
                                    x->const_data[n], x->slot[n].bytes, NULL);
    if (s == ASTITCH_OK)
        s = cuda_stream_sync(x->ctx, c->dev, NULL);
    if (s == ASTITCH_OK)
        s = cuda_workspace_reserve(x->ctx, &c->ws, EXEC_COUNTER_BYTES + c->scratch_need, 0);
    if (s == ASTITCH_OK)
        exec_cuda_use_workspace(x, 0);
out:
    cuda_leave(c->dev);
    return s;
}

static CUdeviceptr dev_ptr(const astitch_executable *x, int32_t n, const uint64_t *in,
                           const uint64_t *outp)
{
    const Slot *s = &x->slot[n];
    switch (s->kind) {
    case SLOT_INPUT: return (CUdeviceptr)in[s->index];
    case SLOT_OUTPUT: return (CUdeviceptr)outp[s->index];
    case SLOT_TEMP: return x->cuda->run.temps + s->offset;
    default: return 0;
    }
}

/* A run on the device: its inputs' and outputs' pointers and the stream. */
typedef struct CudaRun {
    ExecRun base;
    const uint64_t *in, *outp;
    CUstream st;
} CudaRun;

static uint64_t cuda_value(ExecRun *r, int32_t n)
{
    CudaRun *c = (CudaRun *)r;
    return (uint64_t)dev_ptr(r->x, n, c->in, c->outp);
}

static astitch_status cuda_fill(ExecRun *r, const ExecFill *fills, int n)
{
    ExecCuda *c = r->x->cuda;
    return exec_cuda_fill(r->x->ctx, c->dev, c->has_fill ? &c->fill : NULL, fills, n,
                          ((CudaRun *)r)->st);
}

/* Kernel k queued on the run's stream: whole (cooperatively when it has grid barriers; its
 * counters were zeroed with its fills) or as its parts. */
static astitch_status cuda_launch_kernel(ExecRun *r, int k, const uint64_t *args, int nargs)
{
    astitch_executable *x = r->x;
    ExecCuda *c = x->cuda;
    CUstream st = ((CudaRun *)r)->st;
    const PlanKernel *pk = &x->plan->kernel[k];
    CUdeviceptr *vals = calloc((size_t)nargs, sizeof *vals);
    void **argp = calloc((size_t)nargs, sizeof *argp);
    astitch_status s = ASTITCH_OK;
    if (!vals || !argp) {
        s = ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
        goto out;
    }
    for (int i = 0; i < nargs; i++) {
        vals[i] = (CUdeviceptr)args[i];
        argp[i] = &vals[i];
    }
    if (c->as_parts[k]) {
        int parts = compile_kernel_num_parts(x->plan, k);
        for (int i = 0; s == ASTITCH_OK && i < parts; i++) {
            CudaLaunch l = {.kernel = &c->part[k][i], .grid = (unsigned)pk->grid, .args = argp,
                            .stream = st};
            s = cuda_launch(x->ctx, c->dev, &l);
        }
    } else {
        CudaLaunch l = {.kernel = &c->kern[k], .grid = (unsigned)pk->grid, .args = argp,
                        .cooperative = pk->global_barriers > 0, .stream = st};
        s = cuda_launch(x->ctx, c->dev, &l);
    }
out:
    free(vals);
    free(argp);
    return s;
}

/* Compute op n through exec_cuda_compute.c, given its tensors' device addresses. */
static astitch_status cuda_compute(ExecRun *r, int32_t n)
{
    CudaRun *c = (CudaRun *)r;
    astitch_executable *x = r->x;
    const Node *node = gnode(x->g, n);
    CUdeviceptr local[8];
    CUdeviceptr *ptr = node->nin < 8 ? local : calloc((size_t)node->nin + 1, sizeof *ptr);
    if (!ptr)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    for (int k = 0; k < node->nin; k++)
        ptr[k] = dev_ptr(x, goperand(x->g, n, k), c->in, c->outp);
    ptr[node->nin] = dev_ptr(x, n, c->in, c->outp);
    astitch_status s = cuda_compute_run(x, x->cuda->dev, x->cuda->dots, n, ptr,
                                        x->cuda->run.dot_ws, c->st);
    if (ptr != local)
        free(ptr);
    return s;
}

static astitch_status cuda_copy_param(ExecRun *r, int i, int32_t n)
{
    CudaRun *c = (CudaRun *)r;
    const astitch_graph *g = r->x->g;
    const CudaDriver *d = &r->x->cuda->dev->drv;
    CUresult res = d->MemcpyDtoDAsync((CUdeviceptr)c->outp[i],
                                      (CUdeviceptr)c->in[g->node[n].attr.param],
                                      r->x->slot[n].bytes, c->st);
    return res == CUDA_SUCCESS ? ASTITCH_OK
                               : cuda_fail(r->x->ctx, d, res, "copying parameter output '%s'",
                                           g->node[n].name);
}

static const ExecTarget cuda_target = {cuda_value, cuda_fill, cuda_launch_kernel, cuda_compute,
                                       cuda_copy_param};

/* x's run on st: every step, through exec_run_steps. */
static astitch_status run_steps(astitch_executable *x, const uint64_t *in, const uint64_t *outp,
                                CUstream st)
{
    CudaRun r = {{x, &cuda_target, x->cuda->run.scratch, x->cuda->run.counters, NULL}, in,
                 outp, st};
    return exec_run_steps(&r.base);
}

bool exec_cuda_compute_on_gpu(const astitch_executable *x, int32_t n)
{
    return cuda_compute_on_gpu(x, x->cuda->dots, n);
}

/* ASTITCH_ERR_UNSUPPORTED, naming the plan's first compute op on the host, when st is
 * capturing a CUDA graph (or was, and the capture broke); ASTITCH_OK otherwise. Asks the
 * driver only when the plan has a compute op on the host, so other runs pay nothing. Runs
 * inside cuda_enter. */
static astitch_status check_capturable(astitch_executable *x, CUstream st)
{
    const astitch_plan *p = x->plan;
    int32_t i = 0;
    while (i < p->nstep && (p->step[i].kind != ASTITCH_STEP_COMPUTE ||
                            exec_cuda_compute_on_gpu(x, p->step[i].index)))
        i++;
    if (i == p->nstep)
        return ASTITCH_OK;
    bool capturing;
    astitch_status s = exec_cuda_capturing(x, st, &capturing);
    if (s != ASTITCH_OK || !capturing)
        return s;
    int32_t n = p->step[i].index;
    return ctx_fail(x->ctx, ASTITCH_ERR_UNSUPPORTED,
                    "astitch_execute_device: the stream is capturing a CUDA graph, but node %d "
                    "'%s' (%s) is a compute op, which runs on the host between kernels (copies "
                    "to and from the host, stream synchronizations) and cannot be captured; "
                    "nothing was queued",
                    (int)n, gnode(x->g, n)->name, astitch_op_name(gnode(x->g, n)->op));
}

static size_t round256(size_t n)
{
    return (n + 255) & ~(size_t)255;
}

/* The cuBLASLt workspace's share of a caller's workspace: room to round its start up to 256
 * bytes (the caller's is only 16-byte aligned). */
static size_t dot_ws_share(const ExecCuda *c)
{
    return c->dot_ws_bytes ? round256(c->dot_ws_bytes) + 256 : 0;
}

size_t exec_cuda_workspace_bytes(const astitch_executable *x)
{
    return round256(x->temp_bytes) + EXEC_COUNTER_BYTES + round256(x->cuda->scratch_need) +
           dot_ws_share(x->cuda);
}

void exec_cuda_use_workspace(astitch_executable *x, uint64_t base)
{
    ExecCuda *c = x->cuda;
    if (!base) { /* the counters, then the scratch, in one allocation */
        c->run.temps = c->temps;
        c->run.counters = c->ws.scratch;
        c->run.scratch = c->ws.scratch ? c->ws.scratch + EXEC_COUNTER_BYTES : 0;
        c->run.dot_ws = c->dot_ws;
        return;
    }
    c->run.temps = (CUdeviceptr)base;
    c->run.counters = c->run.temps + round256(x->temp_bytes);
    c->run.scratch = c->run.counters + EXEC_COUNTER_BYTES;
    c->run.dot_ws = c->dot_ws_bytes
                        ? (c->run.scratch + round256(c->scratch_need) + 255) & ~(CUdeviceptr)255
                        : 0;
}

astitch_status exec_cuda_run_device(astitch_executable *x, const uint64_t *inputs,
                                    const uint64_t *outputs, void *stream)
{
    astitch_status s = cuda_enter(x->ctx, x->cuda->dev);
    if (s != ASTITCH_OK)
        return s;
    s = check_capturable(x, (CUstream)stream);
    if (s == ASTITCH_OK)
        s = run_steps(x, inputs, outputs, (CUstream)stream);
    cuda_leave(x->cuda->dev);
    return s;
}

/* A run whose steps are timed: event 0 before the first step, event i + 1 after step i. */
typedef struct TimedRun {
    CudaRun run;
    CUevent *ev;
} TimedRun;

static astitch_status record_after(ExecRun *r, int32_t i)
{
    TimedRun *t = (TimedRun *)r;
    return cuda_event_record(r->x->ctx, r->x->cuda->dev, t->ev[i + 1], t->run.st);
}

/* exec_cuda_run_timed inside cuda_enter, on events ev (nstep + 1 of them, made). */
static astitch_status run_timed(astitch_executable *x, const uint64_t *in, const uint64_t *outp,
                                CUstream st, CUevent *ev, double *us)
{
    ExecCuda *c = x->cuda;
    TimedRun t = {{{x, &cuda_target, c->run.scratch, c->run.counters, record_after}, in, outp,
                   st},
                  ev};
    astitch_status s = cuda_event_record(x->ctx, c->dev, ev[0], st);
    if (s == ASTITCH_OK)
        s = exec_run_steps(&t.run.base);
    for (int32_t i = 0; s == ASTITCH_OK && i < x->plan->nstep; i++) {
        float ms = 0;
        s = cuda_event_elapsed(x->ctx, c->dev, ev[i], ev[i + 1], &ms);
        us[i] = (double)ms * 1e3;
    }
    return s;
}

astitch_status exec_cuda_run_timed(astitch_executable *x, const uint64_t *inputs,
                                   const uint64_t *outputs, void *stream, double *us)
{
    ExecCuda *c = x->cuda;
    int32_t nev = x->plan->nstep + 1;
    CUevent *ev = calloc((size_t)nev, sizeof *ev);
    if (!ev)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    astitch_status s = cuda_enter(x->ctx, c->dev);
    if (s != ASTITCH_OK) {
        free(ev);
        return s;
    }
    bool capturing = false;
    if ((s = exec_cuda_capturing(x, stream, &capturing)) == ASTITCH_OK && capturing)
        s = ctx_fail(x->ctx, ASTITCH_ERR_UNSUPPORTED,
                     "astitch_execute_device_timed: the stream is capturing a CUDA graph; a timed "
                     "run waits for its events and cannot be captured");
    int32_t made = 0;
    for (; s == ASTITCH_OK && made < nev; made++)
        s = cuda_event_create(x->ctx, c->dev, &ev[made]);
    if (s == ASTITCH_OK)
        s = run_timed(x, inputs, outputs, (CUstream)stream, ev, us);
    for (int32_t i = 0; i < made; i++)
        cuda_event_destroy(c->dev, ev[i]);
    cuda_leave(c->dev);
    free(ev);
    return s;
}

/* exec_cuda_stage_host inside cuda_enter. */
static astitch_status stage_host(astitch_executable *x, const void *const *inputs, uint64_t **io)
{
    ExecCuda *c = x->cuda;
    astitch_graph *g = x->g;
    astitch_status s = ASTITCH_OK;
    int nio = g->nparam + g->noutput;
    *io = NULL;
    if (!c->io) {
        if (!(c->io = calloc((size_t)nio + 1, sizeof *c->io)))
            return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
        c->nio = nio;
        for (int i = 0; s == ASTITCH_OK && i < nio; i++) {
            int32_t n = i < g->nparam ? g->param[i] : g->output[i - g->nparam];
            s = cuda_alloc(x->ctx, c->dev, x->slot[n].bytes, &c->io[i]);
        }
    }
    uint64_t *in = calloc((size_t)nio + 1, sizeof *in);
    if (!in && s == ASTITCH_OK)
        s = ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    for (int i = 0; s == ASTITCH_OK && i < nio; i++)
        in[i] = c->io[i];
    for (int i = 0; s == ASTITCH_OK && i < g->nparam; i++)
        if (x->slot[g->param[i]].bytes)
            s = cuda_copy_to_device(x->ctx, c->dev, c->io[i], inputs[i], x->slot[g->param[i]].bytes,
                                    NULL);
    if (s != ASTITCH_OK) {
        free(in);
        return s;
    }
    *io = in;
    return ASTITCH_OK;
}

astitch_status exec_cuda_stage_host(astitch_executable *x, const void *const *inputs, uint64_t **io)
{
    astitch_status s = cuda_enter(x->ctx, x->cuda->dev);
    if (s != ASTITCH_OK)
        return s;
    s = stage_host(x, inputs, io);
    cuda_leave(x->cuda->dev);
    return s;
}

int exec_cuda_sm(const astitch_executable *x)
{
    const CudaDevice *d = x->cuda->dev;
    return d->info.cc_major * 10 + d->info.cc_minor;
}

astitch_status exec_cuda_capturing(astitch_executable *x, void *stream, bool *capturing)
{
    const CudaDriver *d = &x->cuda->dev->drv;
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    astitch_status s = cuda_enter(x->ctx, x->cuda->dev);
    if (s != ASTITCH_OK)
        return s;
    CUresult r = d->StreamIsCapturing((CUstream)stream, &st);
    cuda_leave(x->cuda->dev);
    *capturing = st != CU_STREAM_CAPTURE_STATUS_NONE;
    return r == CUDA_SUCCESS ? ASTITCH_OK : cuda_fail(x->ctx, d, r, "cuStreamIsCapturing");
}

/* Whether x's plan has a compute step (a dot, a custom op). */
static bool has_compute_step(const astitch_executable *x)
{
    for (int32_t i = 0; i < x->plan->nstep; i++)
        if (x->plan->step[i].kind == ASTITCH_STEP_COMPUTE)
            return true;
    return false;
}

/* One timed run of x (exec_cuda_run_timed): its kernel steps' times, summed, into *ms. */
static astitch_status kernel_steps_ms(astitch_executable *x, const uint64_t *in,
                                      const uint64_t *out, void *stream, float *ms)
{
    double *us = calloc((size_t)x->plan->nstep, sizeof *us);
    if (!us)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    astitch_status s = exec_cuda_run_timed(x, in, out, stream, us);
    double sum = 0;
    for (int32_t i = 0; s == ASTITCH_OK && i < x->plan->nstep; i++)
        if (x->plan->step[i].kind == ASTITCH_STEP_KERNEL)
            sum += us[i];
    free(us);
    *ms = (float)(sum * 1e-3);
    return s;
}

astitch_status exec_cuda_time_forms(astitch_executable *const *x, int n, const uint64_t *in,
                                    const uint64_t *out, void *stream, double *us)
{
    const CudaDevice *dev = x[0]->cuda->dev;
    /* Each run starts with the inputs out of L2, as in steady use where other work runs
     * between (inputs just copied in would sit in L2 and favour neither form fairly): a fill
     * of twice the L2 before each run, outside the timed interval. */
    size_t flush = cuda_l2_flush_bytes(dev);
    /* The forms run in turn for TIME_ROUNDS rounds; the first round warms up, and each form
     * keeps its fastest of the rest (one timing each, as until 2026-11-25, flipped
     * transformer_residual_layernorm's choice between runs of astitch-bench: its forms differ
     * by 3%, about the spread of a single timing). A plan with compute steps times its
     * kernel steps alone (an event after each step), since the forms differ only in their
     * kernels: bert_layer's whole runs, 400 us of matrix products, timed its forms 445.7 and
     * 445.9 us and took the one whose two layer-norm kernels were 0.6 us slower. */
    enum { TIME_ROUNDS = 4, MOST = VARIANT_RUNS * TIME_ROUNDS };
    bool by_steps = has_compute_step(x[0]);
    float step_ms[MOST] = {0};
    if (n < 1 || n > VARIANT_RUNS)
        return ctx_fail(x[0]->ctx, ASTITCH_ERR_INTERNAL, "variant search: %d forms to time", n);
    int runs = n * TIME_ROUNDS;
    CUdeviceptr evict = 0;
    CUevent ev[2 * MOST] = {0};
    astitch_status s = ASTITCH_OK;
    if (cuda_alloc(x[0]->ctx, dev, flush, &evict) != ASTITCH_OK)
        evict = 0; /* short of memory: timed without the fill */
    for (int i = 0; s == ASTITCH_OK && i < 2 * runs; i++)
        s = cuda_event_create(x[0]->ctx, dev, &ev[i]);
    for (int i = 0; s == ASTITCH_OK && i < runs; i++) {
        if (evict)
            s = cuda_memset_u32(x[0]->ctx, dev, evict, (uint32_t)i, flush / 4, (CUstream)stream);
        if (by_steps) {
            if (s == ASTITCH_OK)
                s = kernel_steps_ms(x[i % n], in, out, stream, &step_ms[i]);
            continue;
        }
        if (s == ASTITCH_OK)
            s = cuda_event_record(x[0]->ctx, dev, ev[2 * i], (CUstream)stream);
        if (s == ASTITCH_OK)
            s = exec_cuda_run_device(x[i % n], in, out, stream);
        if (s == ASTITCH_OK)
            s = cuda_event_record(x[0]->ctx, dev, ev[2 * i + 1], (CUstream)stream);
    }
    float ms[VARIANT_RUNS] = {0};
    for (int i = n; s == ASTITCH_OK && i < runs; i++) {
        float t = step_ms[i];
        if (!by_steps)
            s = cuda_event_elapsed(x[0]->ctx, dev, ev[2 * i], ev[2 * i + 1], &t);
        if (s == ASTITCH_OK && (i < 2 * n || t < ms[i % n]))
            ms[i % n] = t;
    }
    for (int i = 0; i < 2 * runs; i++)
        if (ev[i])
            cuda_event_destroy(dev, ev[i]);
    if (s == ASTITCH_OK)
        s = cuda_stream_sync(x[0]->ctx, dev, (CUstream)stream);
    if (evict)
        cuda_free(dev, evict);
    for (int i = 0; i < n; i++)
        us[i] = ms[i] * 1e3;
    return s;
}

astitch_status exec_cuda_settle_dots(astitch_executable *x, const uint64_t *in,
                                     const uint64_t *out, void *stream)
{
    ExecCuda *c = x->cuda;
    if (!c || !exec_dots_searchable(c->dots))
        return ASTITCH_OK;
    int n = x->plan->nstep, sm = exec_cuda_sm(x);
    int *choice = malloc((size_t)n * sizeof *choice);
    if (!choice)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    int ndot = exec_dots_choices(c->dots, choice, n); /* ndot <= n: a dot is a step */
    if (compile_cache_dot_choices(x->plan, sm, choice, ndot))
        exec_dots_apply(c->dots, choice, ndot);
    astitch_status s = ASTITCH_OK;
    if (exec_dots_searchable(c->dots) && (s = cuda_enter(x->ctx, c->dev)) == ASTITCH_OK) {
        exec_dots_begin_timing(x, c->dots);
        s = run_steps(x, in, out, (CUstream)stream);
        if (s == ASTITCH_OK)
            s = cuda_stream_sync(x->ctx, c->dev, (CUstream)stream);
        exec_dots_end_timing(c->dots);
        cuda_leave(c->dev);
        if (s == ASTITCH_OK)
            compile_cache_set_dot_choices(x->plan, sm, choice,
                                          exec_dots_choices(c->dots, choice, n));
    }
    free(choice);
    return s;
}

astitch_status exec_cuda_run_host(astitch_executable *x, const void *const *inputs,
                                  void *const *outputs)
{
    ExecCuda *c = x->cuda;
    astitch_graph *g = x->g;
    astitch_status s = cuda_enter(x->ctx, c->dev);
    if (s != ASTITCH_OK)
        return s;
    uint64_t *in = NULL;
    s = stage_host(x, inputs, &in);
    if (s == ASTITCH_OK)
        s = run_steps(x, in, in + g->nparam, NULL);
    for (int i = 0; s == ASTITCH_OK && i < g->noutput; i++)
        if (x->slot[g->output[i]].bytes)
            s = cuda_copy_to_host(x->ctx, c->dev, outputs[i], c->io[g->nparam + i],
                                  x->slot[g->output[i]].bytes, NULL);
    if (s == ASTITCH_OK)
        s = cuda_stream_sync(x->ctx, c->dev, NULL);
    free(in);
    cuda_leave(c->dev);
    return s;
}
