/*
 * exec_cuda_compute.c: the compute ops of a plan on the cuda target, between its kernels.
 *
 *   a dot                      cuBLASLt (exec_dot.c), queued on the run's stream
 *   a custom op                its device form (astitch_register_custom_device), called with
 *                              the run's stream and the device addresses of its tensors
 *   under host_compute, or a   the host: operands copied down, the reference interpreter,
 *   dot cuBLASLt cannot take   the result copied up, the stream synchronized around it
 *
 * Without the context switch host_compute, loading refuses a plan with a compute op that has
 * no GPU form (a custom op without a device form, a dot no GEMM takes), naming it: a run must
 * not move tensors through the host unasked. The registry is read when the executable is
 * loaded and at each run, so a device form registered in between (or replaced) is the one
 * called.
 */
#include <stdlib.h>
#include <string.h>

#include "cublaslt.h"
#include "ir/config.h"
#include "runtime.h"

/* The device form of custom op n, or NULL (none registered, or host_compute). */
static const CustomFn *device_form(const astitch_executable *x, int32_t n)
{
    const Node *node = gnode(x->g, n);
    if (node->op != ASTITCH_OP_CUSTOM || config_host_compute(&x->ctx->config))
        return NULL;
    const CustomFn *cf = ctx_custom(x->ctx, node->attr.target);
    return cf && cf->cuda_fn ? cf : NULL;
}

bool cuda_compute_on_gpu(const astitch_executable *x, const ExecDots *dots, int32_t n)
{
    return exec_dots_on_gpu(dots, n) || device_form(x, n) != NULL;
}

astitch_status cuda_compute_check(astitch_executable *x, const ExecDots *dots)
{
    const astitch_plan *p = x->plan;
    if (config_host_compute(&x->ctx->config))
        return ASTITCH_OK;
    for (int32_t i = 0; i < p->nstep; i++) {
        int32_t n = p->step[i].index;
        if (p->step[i].kind != ASTITCH_STEP_COMPUTE || cuda_compute_on_gpu(x, dots, n))
            continue;
        const Node *node = gnode(x->g, n);
        if (node->op == ASTITCH_OP_CUSTOM)
            return ctx_fail(x->ctx, ASTITCH_ERR_UNSUPPORTED,
                            "custom op node %d '%s' (target '%s') has no device implementation "
                            "for the cuda target: register one with "
                            "astitch_register_custom_device, or set the context option "
                            "host_compute to 1 to run it on the host (its tensors copied through "
                            "host memory, not capturable)",
                            (int)n, node->name, node->attr.target);
        return ctx_fail(x->ctx, ASTITCH_ERR_UNSUPPORTED,
                        "dot node %d '%s' (%s) has no form on the GPU (cuBLASLt takes f32, f16 "
                        "and bf16 products of sizes below 2^31): set the context option "
                        "host_compute to 1 to run it on the host",
                        (int)n, node->name, astitch_dtype_name(node->dtype));
    }
    return ASTITCH_OK;
}

/* A view of node id of x at device address ptr. */
static astitch_tensor_view view_of(const astitch_executable *x, int32_t id, CUdeviceptr ptr)
{
    const Node *node = gnode(x->g, id);
    astitch_tensor_view v = {.dtype = node->dtype, .rank = node->shape.rank,
                             .data = (void *)(uintptr_t)ptr};
    memcpy(v.dims, node->shape.dim, sizeof v.dims);
    return v;
}

/* Calls custom op n's device form cf on stream st. */
static astitch_status run_custom(astitch_executable *x, const CustomFn *cf, int32_t n,
                                 const CUdeviceptr *ptr, CUstream st)
{
    const Node *node = gnode(x->g, n);
    astitch_tensor_view *in = calloc(node->nin > 0 ? (size_t)node->nin : 1, sizeof *in);
    if (!in)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    for (int k = 0; k < node->nin; k++)
        in[k] = view_of(x, goperand(x->g, n, k), ptr[k]);
    astitch_tensor_view out = view_of(x, n, ptr[node->nin]);
    astitch_status s = cf->cuda_fn(cf->cuda_user, st, node->nin, in, &out);
    free(in);
    if (s == ASTITCH_OK)
        return ASTITCH_OK;
    return ctx_fail(x->ctx, s == ASTITCH_ERR_MEMORY ? s : ASTITCH_ERR_DEVICE,
                    "custom op node %d '%s' (target '%s'): its device implementation returned "
                    "%s",
                    (int)n, node->name, node->attr.target, astitch_status_name(s));
}

/* Runs compute op n on the host: operands down, the interpreter, the result up. */
static astitch_status run_on_host(astitch_executable *x, const CudaDevice *dev, int32_t n,
                                  const CUdeviceptr *ptr, CUstream st)
{
    const Node *node = gnode(x->g, n);
    void **host = calloc((size_t)node->nin + 1, sizeof *host);
    astitch_status s = host ? cuda_stream_sync(x->ctx, dev, st)
                            : ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    for (int k = 0; s == ASTITCH_OK && k <= node->nin; k++) {
        int32_t id = k < node->nin ? goperand(x->g, n, k) : n;
        size_t bytes = x->slot[id].bytes;
        if (!(host[k] = malloc(bytes + 1))) {
            s = ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory for %zu bytes", bytes);
            break;
        }
        if (k < node->nin && bytes)
            s = cuda_copy_to_host(x->ctx, dev, host[k], ptr[k], bytes, st);
    }
    if (s == ASTITCH_OK)
        s = cuda_stream_sync(x->ctx, dev, st);
    if (s == ASTITCH_OK)
        s = interp_node(x->g, n, (const void *const *)host, host[node->nin]);
    if (s == ASTITCH_OK && x->slot[n].bytes)
        s = cuda_copy_to_device(x->ctx, dev, ptr[node->nin], host[node->nin], x->slot[n].bytes,
                                st);
    if (s == ASTITCH_OK)
        s = cuda_stream_sync(x->ctx, dev, st);
    for (int k = 0; host && k <= node->nin; k++)
        free(host[k]);
    free(host);
    return s;
}

astitch_status cuda_compute_run(astitch_executable *x, const CudaDevice *dev,
                                ExecDots *dots, int32_t n, const CUdeviceptr *ptr,
                                CUdeviceptr dot_ws, CUstream st)
{
    if (exec_dots_on_gpu(dots, n))
        return exec_dots_run(x, dots, n, ptr[0], ptr[1], ptr[2], dot_ws, st);
    const CustomFn *cf = device_form(x, n);
    return cf ? run_custom(x, cf, n, ptr, st) : run_on_host(x, dev, n, ptr, st);
}
