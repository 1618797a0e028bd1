/*
 * exec_dot.h: the dots of a plan on cuBLASLt, between exec_dot.c (descriptors and algorithms
 * at load, the product of each run) and exec_dot_search.c (the timed choice among the
 * heuristic's algorithms); private to those two. The interface is cublaslt.h's.
 */
#ifndef ASTITCH_EXEC_DOT_H
#define ASTITCH_EXEC_DOT_H

#include "cublaslt.h"
#include "passes/dot_gemm.h"

/* The most workspace the heuristic may ask for, per dot; the executable allocates the largest
 * its algorithms (and candidates) need. */
#define DOT_WORKSPACE_MAX ((uint64_t)32 << 20)
/* The heuristic's first algorithms for 16-byte-aligned operands that the search times
 * (exec_dots_settle); beyond the first, only those needing at most DOT_CANDIDATE_WS bytes of
 * workspace, so that the search does not grow the executable's workspace much. */
enum { DOT_CANDIDATES = 8, DOT_CANDIDATE_WS = 8 << 20, DOT_ROUNDS = 4 };

typedef struct GpuDot {
    int32_t node;
    DotGemm gm;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c; /* cuBLASLt's A (our rhs), B (our lhs), C and D (output) */
    cublasLtMatmulAlgo_t algo[2];   /* [0]: operands 16-byte aligned; [1]: element-aligned */
    bool aligned16;                 /* algo[0] exists and every ld and batch stride keeps
                                     * 16-byte alignment */
    cublasLtMatmulAlgo_t cand[DOT_CANDIDATES]; /* for algo[0], in the heuristic's order */
    int ncand;                      /* 0 where not aligned16 */
    int chosen;                     /* the candidate algo[0] is */
    bool timed;                     /* chosen by timing, or from the compile cache */
} GpuDot;

struct ExecDots {
    const CudaDevice *dev;
    CublasLt lt;
    cublasLtHandle_t handle;
    GpuDot *dot;
    int ndot;
    size_t ws_bytes;
    bool timing;          /* exec_dots_settle's run: dots with candidates time them */
    CUdeviceptr flush;    /* during that run: twice the L2, filled before each timing */
    size_t flush_bytes;
};

/* Fails naming dot node n and what cuBLASLt call returned st. */
astitch_status dot_fail(struct astitch_executable *x, const ExecDots *d, int32_t n,
                        cublasStatus_t st, const char *call);
/* Dot node n of d (NULL when cuBLASLt does not run it). */
GpuDot *dot_find(const ExecDots *d, int32_t n);
/* Queues g's product with algorithm algo. */
astitch_status dot_matmul(struct astitch_executable *x, const ExecDots *d, const GpuDot *g,
                          const cublasLtMatmulAlgo_t *algo, CUdeviceptr lhs, CUdeviceptr rhs,
                          CUdeviceptr out, CUdeviceptr ws, CUstream stream);
/* exec_dot_search.c: times g's candidates on the run's operands and makes the fastest
 * algo[0] (g->timed); inside exec_dots_begin_timing and end. */
astitch_status dot_choose(struct astitch_executable *x, ExecDots *d, GpuDot *g, CUdeviceptr lhs,
                          CUdeviceptr rhs, CUdeviceptr out, CUdeviceptr ws, CUstream stream);

#endif
