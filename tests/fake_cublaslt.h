/* fake_cublaslt.h: what tests/fake_cublaslt.c records of each cublasLtMatmul, in cuBLASLt's
 * (column-major) terms: D (m x n) = op(A) (m x k) op(B) (k x n), per batch. */
#ifndef ASTITCH_FAKE_CUBLASLT_H
#define ASTITCH_FAKE_CUBLASLT_H

#include <stdint.h>

typedef struct FakeMatmul {
    void *stream;
    int transa, transb;          /* 0 N, 1 T */
    int compute, scale;          /* compute and scale types of the descriptor */
    int type;                    /* A's data type (B, C and D must match: else -1) */
    uint64_t m, n, k;
    int64_t lda, ldb, ldc, ldd;
    int32_t batch;               /* A's batch count (B, C and D must match: else -1) */
    int64_t stride_a, stride_b, stride_c;
    uint64_t a, b, c, d;         /* the pointers */
    float alpha, beta;
    uint32_t algo_align;         /* the operands' alignment the algorithm was chosen for */
    int algo_index;              /* its place in the heuristic's answer (FAKE_LT_CANDIDATES) */
    uint64_t workspace;
    size_t workspace_bytes;
} FakeMatmul;

#endif
