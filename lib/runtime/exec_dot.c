/*
 * exec_dot.c: the dots of a plan that run on the GPU through cuBLASLt (cublaslt.h).
 *
 * At load, for each f32/f16/bf16 dot step that dot_gemm_layout makes one strided-batched GEMM:
 * a matmul descriptor (compute CUBLAS_COMPUTE_32F, never TF32; scale f32, alpha 1, beta 0),
 * the layouts of its three matrices, and algorithms from cublasLtMatmulAlgoGetHeuristic: up to
 * DOT_CANDIDATES for operands 16-byte aligned (the first runs until exec_dot_search.c times
 * them), one for element-aligned ones, with at most DOT_WORKSPACE_MAX bytes of workspace. A
 * run queues one cublasLtMatmul on the caller's stream and nothing else: no allocation, no
 * synchronization, so it can be captured (the search's run aside).
 *
 * Row-major onto cuBLASLt's column-major. cuBLASLt computes D = op(A) op(B), D of m x n,
 * column-major. Our product is row-major C[M, N] = A[M, K] Bm[K, N] (per batch). A row-major
 * matrix read as column-major is its transpose, so C read column-major is C^T [N, M], and
 *
 *     C^T = Bm^T A^T    (N x M = (N x K)(K x M))
 *
 * so cuBLASLt's A is our rhs, its B our lhs, and m = N, n = M, k = K; D is C^T, an N x M
 * column-major matrix with ld N (row-major C[i, j] at i*N + j is (j, i) at j + i*N).
 * Each operand, per dot_gemm.h's row-major description:
 *
 *   rhs not trans, Bm[k, j] at k*ld + j: column-major (j, k) at j + k*ld is an N x K matrix,
 *       which is Bm^T itself: transa N, layout N rows, K cols, ld.
 *   rhs trans, Bm[k, j] at j*ld + k: column-major (k, j) at k + j*ld is a K x N matrix, Bm;
 *       we want Bm^T: transa T, layout K rows, N cols, ld.
 *   lhs not trans, A[i, k] at i*ld + k: column-major (k, i) at k + i*ld is K x M, A^T itself:
 *       transb N, layout K rows, M cols, ld.
 *   lhs trans, A[i, k] at k*ld + i: column-major (i, k) at i + k*ld is M x K, A; we want A^T:
 *       transb T, layout M rows, K cols, ld.
 *
 * Every layout gets the batch count and its batch stride (C's is M*N).
 */
#include <stdlib.h>
#include <string.h>

#include "exec_dot.h"
#include "passes/dot_gemm.h"
#include "ir/config.h"
#include "runtime.h"

static cudaDataType_t data_type(astitch_dtype t)
{
    return t == ASTITCH_F32 ? CUDA_R_32F : t == ASTITCH_F16 ? CUDA_R_16F : CUDA_R_16BF;
}

/* Whether dot node n can run on the GPU, its layout into *gm. */
static bool takes(const astitch_executable *x, int32_t n, DotGemm *gm)
{
    const Node *node = gnode(x->g, n);
    if (node->op != ASTITCH_OP_DOT ||
        (node->dtype != ASTITCH_F32 && node->dtype != ASTITCH_F16 && node->dtype != ASTITCH_BF16))
        return false;
    dot_gemm_layout(x->g, n, gm); /* no ZEROS: the planner's dot_lower made those zeros */
    return gm->kind == DOT_GEMM_GEMM || gm->kind == DOT_GEMM_EMPTY;
}

/* Fails naming dot node n and what cuBLASLt call returned st. */
astitch_status dot_fail(astitch_executable *x, const ExecDots *d, int32_t n,
                        cublasStatus_t st, const char *call)
{
    astitch_status s = cublaslt_fail(x->ctx, &d->lt, st, "dot node %d '%s': %s", (int)n,
                                     gnode(x->g, n)->name, call);
    ctx_error_at_node(x->ctx, n);
    return s;
}

static astitch_status layout(astitch_executable *x, const ExecDots *d, const GpuDot *g,
                             cublasLtMatrixLayout_t *out, uint64_t rows, uint64_t cols,
                             int64_t ld, int64_t batch_stride)
{
    const CublasLt *lt = &d->lt;
    int32_t batch = (int32_t)g->gm.batch;
    cublasStatus_t st = lt->MatrixLayoutCreate(out, data_type(g->gm.dtype), rows, cols, ld);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = lt->MatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                          sizeof batch);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = lt->MatrixLayoutSetAttribute(*out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                          &batch_stride, sizeof batch_stride);
    return st == CUBLAS_STATUS_SUCCESS ? ASTITCH_OK
                                       : dot_fail(x, d, g->node, st, "a matrix layout");
}

/* The heuristic's best algorithms for g with operands aligned to `align` bytes, at most max:
 * algo[i] and ws[i] (the workspace each needs) for i < *found (0 when it has none). */
static astitch_status heuristic(astitch_executable *x, const ExecDots *d, const GpuDot *g,
                                uint32_t align, int max, cublasLtMatmulAlgo_t *algo, int *found,
                                size_t *ws)
{
    const CublasLt *lt = &d->lt;
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t max_ws = DOT_WORKSPACE_MAX;
    cublasStatus_t st = lt->MatmulPreferenceCreate(&pref);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &max_ws, sizeof max_ws);
    static const cublasLtMatmulPreferenceAttributes_t aligns[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4 && st == CUBLAS_STATUS_SUCCESS; i++)
        st = lt->MatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof align);
    cublasLtMatmulHeuristicResult_t r[DOT_CANDIDATES];
    int got = 0;
    memset(r, 0, sizeof r);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = lt->MatmulAlgoGetHeuristic(d->handle, g->op, g->a, g->b, g->c, g->c, pref, max, r,
                                        &got);
    if (pref)
        lt->MatmulPreferenceDestroy(pref);
    /* NOT_SUPPORTED: no algorithm for this case, which the caller decides about */
    *found = 0;
    if (st != CUBLAS_STATUS_SUCCESS && st != CUBLAS_STATUS_NOT_SUPPORTED)
        return dot_fail(x, d, g->node, st, "cublasLtMatmulAlgoGetHeuristic");
    for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < got && i < max; i++) {
        if (r[i].state != CUBLAS_STATUS_SUCCESS ||
            (*found > 0 && r[i].workspaceSize > DOT_CANDIDATE_WS))
            continue;
        algo[*found] = r[i].algo;
        ws[(*found)++] = r[i].workspaceSize;
    }
    return ASTITCH_OK;
}

/* Makes g's descriptors and picks its algorithms; raises d->ws_bytes to what they need. */
static astitch_status prepare_gemm(astitch_executable *x, ExecDots *d, GpuDot *g)
{
    const CublasLt *lt = &d->lt;
    const DotGemm *gm = &g->gm;
    cublasOperation_t transa = gm->rhs.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t transb = gm->lhs.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t st = lt->MatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = lt->MatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &transa,
                                        sizeof transa);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = lt->MatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &transb,
                                        sizeof transb);
    if (st != CUBLAS_STATUS_SUCCESS)
        return dot_fail(x, d, g->node, st, "the matmul descriptor");
    uint64_t m = (uint64_t)gm->m, n = (uint64_t)gm->n, k = (uint64_t)gm->k;
    /* cuBLASLt's A: our rhs (see the head of this file) */
    astitch_status s = layout(x, d, g, &g->a, gm->rhs.trans ? k : n, gm->rhs.trans ? n : k,
                              gm->rhs.ld, gm->rhs.batch_stride);
    /* cuBLASLt's B: our lhs */
    if (s == ASTITCH_OK)
        s = layout(x, d, g, &g->b, gm->lhs.trans ? m : k, gm->lhs.trans ? k : m, gm->lhs.ld,
                   gm->lhs.batch_stride);
    /* C and D: the output, N x M column-major */
    if (s == ASTITCH_OK)
        s = layout(x, d, g, &g->c, n, m, (int64_t)n, gm->batch > 1 ? (int64_t)(m * n) : 0);
    if (s != ASTITCH_OK)
        return s;

    int64_t esize = (int64_t)astitch_dtype_size(gm->dtype);
    g->aligned16 = (gm->lhs.ld * esize) % 16 == 0 && (gm->rhs.ld * esize) % 16 == 0 &&
                   (gm->n * esize) % 16 == 0 && (gm->lhs.batch_stride * esize) % 16 == 0 &&
                   (gm->rhs.batch_stride * esize) % 16 == 0 && (gm->m * gm->n * esize) % 16 == 0;
    int found = 0, found1 = 0;
    size_t ws[DOT_CANDIDATES] = {0}, ws1 = 0;
    if (g->aligned16)
        s = heuristic(x, d, g, 16, DOT_CANDIDATES, g->cand, &found, ws);
    if (s == ASTITCH_OK)
        s = heuristic(x, d, g, (uint32_t)esize, 1, &g->algo[1], &found1, &ws1);
    if (s != ASTITCH_OK)
        return s;
    if (!found1)
        return dot_fail(x, d, g->node, CUBLAS_STATUS_NOT_SUPPORTED,
                        "cublasLtMatmulAlgoGetHeuristic found no algorithm");
    g->aligned16 = found > 0;
    g->ncand = found;
    if (found)
        g->algo[0] = g->cand[0];
    for (int i = 0; i < found; i++)
        if (ws[i] > d->ws_bytes)
            d->ws_bytes = ws[i];
    if (ws1 > d->ws_bytes)
        d->ws_bytes = ws1;
    return ASTITCH_OK;
}

astitch_status exec_dots_prepare(astitch_executable *x, const CudaDevice *dev, ExecDots **out,
                                 size_t *ws_bytes)
{
    const astitch_plan *p = x->plan;
    *out = NULL;
    *ws_bytes = 0;
    if (config_host_compute(&x->ctx->config))
        return ASTITCH_OK;
    int ndot = 0;
    DotGemm gm;
    for (int32_t i = 0; i < p->nstep; i++)
        ndot += p->step[i].kind == ASTITCH_STEP_COMPUTE && takes(x, p->step[i].index, &gm);
    if (!ndot)
        return ASTITCH_OK;
    ExecDots *d = calloc(1, sizeof *d);
    if (!d || !(d->dot = calloc((size_t)ndot, sizeof *d->dot))) {
        free(d);
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    }
    d->dev = dev;
    astitch_status s = cublaslt_open(x->ctx, &d->lt);
    if (s != ASTITCH_OK) {
        free(d->dot);
        free(d);
        return s;
    }
    cublasStatus_t st = d->lt.Create(&d->handle);
    if (st != CUBLAS_STATUS_SUCCESS) {
        s = cublaslt_fail(x->ctx, &d->lt, st, "cublasLtCreate (%s)", d->lt.path);
        d->handle = NULL;
    }
    for (int32_t i = 0; s == ASTITCH_OK && i < p->nstep; i++) {
        int32_t n = p->step[i].index;
        if (p->step[i].kind != ASTITCH_STEP_COMPUTE || !takes(x, n, &gm))
            continue;
        GpuDot *g = &d->dot[d->ndot++];
        g->node = n;
        g->gm = gm;
        if (gm.kind == DOT_GEMM_GEMM)
            s = prepare_gemm(x, d, g);
    }
    if (s != ASTITCH_OK) {
        exec_dots_destroy(d);
        return s;
    }
    *out = d;
    *ws_bytes = d->ws_bytes;
    return ASTITCH_OK;
}

void exec_dots_destroy(ExecDots *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->ndot; i++) {
        GpuDot *g = &d->dot[i];
        if (g->a)
            d->lt.MatrixLayoutDestroy(g->a);
        if (g->b)
            d->lt.MatrixLayoutDestroy(g->b);
        if (g->c)
            d->lt.MatrixLayoutDestroy(g->c);
        if (g->op)
            d->lt.MatmulDescDestroy(g->op);
    }
    if (d->handle)
        d->lt.Destroy(d->handle);
    cublaslt_close(&d->lt);
    free(d->dot);
    free(d);
}

/* Dot node n of d, or NULL. */
GpuDot *dot_find(const ExecDots *d, int32_t n)
{
    for (int i = 0; d && i < d->ndot; i++)
        if (d->dot[i].node == n)
            return &d->dot[i];
    return NULL;
}

bool exec_dots_on_gpu(const ExecDots *d, int32_t n) { return dot_find(d, n) != NULL; }

/* Queues g's product with algorithm algo. */
astitch_status dot_matmul(astitch_executable *x, const ExecDots *d, const GpuDot *g,
                          const cublasLtMatmulAlgo_t *algo, CUdeviceptr lhs, CUdeviceptr rhs,
                          CUdeviceptr out, CUdeviceptr ws, CUstream stream)
{
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = d->lt.Matmul(d->handle, g->op, &one, (const void *)(uintptr_t)rhs, g->a,
                                     (const void *)(uintptr_t)lhs, g->b, &zero,
                                     (const void *)(uintptr_t)out, g->c, (void *)(uintptr_t)out,
                                     g->c, algo, (void *)(uintptr_t)ws, d->ws_bytes, stream);
    return st == CUBLAS_STATUS_SUCCESS ? ASTITCH_OK
                                       : dot_fail(x, d, g->node, st, "cublasLtMatmul");
}

astitch_status exec_dots_run(astitch_executable *x, ExecDots *d, int32_t n, CUdeviceptr lhs,
                             CUdeviceptr rhs, CUdeviceptr out, CUdeviceptr ws, CUstream stream)
{
    GpuDot *g = dot_find(d, n);
    ASTITCH_ASSERT(g);
    if (g->gm.kind == DOT_GEMM_EMPTY)
        return ASTITCH_OK;
    /* a run may pass pointers less aligned than the 16 bytes algo[0] assumes */
    bool aligned = g->aligned16 && ((lhs | rhs | out) & 15) == 0;
    astitch_status s = ASTITCH_OK;
    if (d->timing && aligned && g->ncand > 1 && !g->timed)
        s = dot_choose(x, d, g, lhs, rhs, out, ws, stream);
    return s == ASTITCH_OK ? dot_matmul(x, d, g, &g->algo[aligned ? 0 : 1], lhs, rhs, out, ws, stream)
                           : s;
}

