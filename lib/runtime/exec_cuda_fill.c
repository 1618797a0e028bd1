/*
 * exec_cuda_fill.c: the fills before a kernel (exec_kernel_fills) in one launch.
 *
 * On the GPU each cuMemsetD32Async is a node of its own in the stream or the captured graph,
 * and costs about as much as a kernel launch (1 to 2 us on an H100, bench/RESULTS.md), however
 * few words it sets. A kernel with several split reductions needs several fills; this file's
 * kernel takes up to FILL_MAX of them as parameters and sets them all in one launch. One fill
 * stays a memset. The kernel is PTX written here, appended to the PTX of the executable's own
 * kernels where a kernel may need several fills, so that it costs no JIT call of its own (each
 * call of the driver's JIT costs about 10 ms however small its module); where a fill is too
 * long for its 32-bit indices, memsets serve.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_cuda_fill.h"

#define FILL_MAX 8
#define FILL_BLOCK 256
#define FILL_MAX_GRID 1024

/* ptx followed by the entry astitch_fill(d0, b0, w0, ..., d7, b7, w7): words [0, w_i) of the
 * u32 array at d_i set to b_i, by a grid-stride loop per fill. Only instructions of the first
 * PTX versions, so it fits under any module header. NULL when out of memory. */
char *exec_cuda_fill_append(const char *ptx)
{
    size_t cap = strlen(ptx) + 8192, len = 0;
    char *p = malloc(cap);
    if (!p)
        return NULL;
#define EMIT(...) (len += (size_t)snprintf(p + len, len < cap ? cap - len : 0, __VA_ARGS__))
    EMIT("%s\n.visible .entry astitch_fill(", ptx);
    for (int i = 0; i < FILL_MAX; i++)
        EMIT("%s\n    .param .u64 d%d, .param .u32 b%d, .param .u32 w%d", i ? "," : "", i, i, i);
    EMIT(")\n{\n    .reg .pred %%p;\n    .reg .b32 %%id, %%stride, %%i, %%bits, %%words, %%t;\n"
         "    .reg .b64 %%dst, %%off, %%at;\n"
         "    mov.u32 %%id, %%ctaid.x;\n    mov.u32 %%t, %%ntid.x;\n"
         "    mov.u32 %%stride, %%tid.x;\n    mad.lo.u32 %%id, %%id, %%t, %%stride;\n"
         "    mov.u32 %%stride, %%nctaid.x;\n    mul.lo.u32 %%stride, %%stride, %%t;\n");
    for (int i = 0; i < FILL_MAX; i++)
        EMIT("    ld.param.u64 %%dst, [d%d];\n    ld.param.u32 %%bits, [b%d];\n"
             "    ld.param.u32 %%words, [w%d];\n    cvta.to.global.u64 %%dst, %%dst;\n"
             "    mov.u32 %%i, %%id;\nFILL_LOOP%d:\n    setp.ge.u32 %%p, %%i, %%words;\n"
             "    @%%p bra FILL_DONE%d;\n    mul.wide.u32 %%off, %%i, 4;\n"
             "    add.s64 %%at, %%dst, %%off;\n    st.global.u32 [%%at], %%bits;\n"
             "    add.u32 %%i, %%i, %%stride;\n    bra.uni FILL_LOOP%d;\nFILL_DONE%d:\n",
             i, i, i, i, i, i, i);
    EMIT("    ret;\n}\n");
#undef EMIT
    if (len >= cap) {
        free(p);
        return NULL;
    }
    return p;
}

bool exec_cuda_fill_needed(const astitch_plan *p)
{
    for (int k = 0; k < p->nkernel; k++) {
        SplitInit init[2];
        if (exec_split_inits(p, k, init, 2) + (p->kernel[k].global_barriers > 0) > 1)
            return true;
    }
    return false;
}

bool exec_cuda_fill_get(astitch_context *ctx, CudaModule *mod, CudaKernel *kernel)
{
    return cuda_kernel_get(ctx, mod, "astitch_fill", FILL_BLOCK, 0, kernel) == ASTITCH_OK;
}

/* Queues fills [0, n) (n <= FILL_MAX, each under 2^31 words) as one launch of the fill kernel. */
static astitch_status fill_launch(astitch_context *ctx, const CudaDevice *dev,
                                  const CudaKernel *kernel, const ExecFill *f, int n, CUstream st)
{
    uint64_t dst[FILL_MAX] = {0};
    uint32_t bits[FILL_MAX] = {0}, words[FILL_MAX] = {0}, most = 0;
    void *args[3 * FILL_MAX];
    for (int i = 0; i < FILL_MAX; i++) {
        if (i < n) {
            dst[i] = f[i].dst;
            bits[i] = f[i].bits;
            words[i] = (uint32_t)f[i].words;
            most = words[i] > most ? words[i] : most;
        }
        args[3 * i] = &dst[i];
        args[3 * i + 1] = &bits[i];
        args[3 * i + 2] = &words[i];
    }
    uint32_t grid = (most + FILL_BLOCK - 1) / FILL_BLOCK;
    CudaLaunch l = {.kernel = kernel,
                    .grid = grid < 1 ? 1 : grid > FILL_MAX_GRID ? FILL_MAX_GRID : grid,
                    .args = args,
                    .stream = st};
    return cuda_launch(ctx, dev, &l);
}

astitch_status exec_cuda_fill(astitch_context *ctx, const CudaDevice *dev,
                              const CudaKernel *kernel, const ExecFill *fills, int n, CUstream st)
{
    ExecFill batch[FILL_MAX];
    int nbatch = 0;
    astitch_status s = ASTITCH_OK;
    for (int i = 0; s == ASTITCH_OK && i < n; i++) {
        if (!kernel || fills[i].words >= ((int64_t)1 << 31))
            s = cuda_memset_u32(ctx, dev, (CUdeviceptr)fills[i].dst, fills[i].bits,
                                (size_t)fills[i].words, st);
        else
            batch[nbatch++] = fills[i];
        if (s == ASTITCH_OK && (nbatch == FILL_MAX || (nbatch > 0 && i == n - 1))) {
            s = nbatch == 1 ? cuda_memset_u32(ctx, dev, (CUdeviceptr)batch[0].dst, batch[0].bits,
                                              (size_t)batch[0].words, st)
                            : fill_launch(ctx, dev, kernel, batch, nbatch, st);
            nbatch = 0;
        }
    }
    return s;
}
