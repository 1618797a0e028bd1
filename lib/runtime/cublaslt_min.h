/*
 * cublaslt_min.h: the few cuBLASLt types and constants lib/runtime uses. libastitch never
 * includes the toolkit's cublasLt.h (it needs the toolkit's include directory and its C++-minded
 * fp16 headers) and never links libcublasLt: the library is opened at run time (cublaslt.c).
 * Values and layouts are those of CUDA 13's cublasLt.h, cublas_api.h and library_types.h on
 * 64-bit Linux. CUBLASLT_MIN_VALUES lists every constant with its value once; where the
 * toolkit's header is found at build time, tests/fake_cublaslt.c includes it and checks each
 * value against it (define CUBLASLT_MIN_VALUES_ONLY to get the list alone).
 */
#ifndef ASTITCH_CUBLASLT_MIN_H
#define ASTITCH_CUBLASLT_MIN_H

/* X(name, value, enum type) */
#define CUBLASLT_MIN_VALUES(X)                                                                    \
    X(CUBLAS_STATUS_SUCCESS, 0, cublasStatus_t)                                                   \
    X(CUBLAS_STATUS_NOT_INITIALIZED, 1, cublasStatus_t)                                           \
    X(CUBLAS_STATUS_ALLOC_FAILED, 3, cublasStatus_t)                                              \
    X(CUBLAS_STATUS_INVALID_VALUE, 7, cublasStatus_t)                                             \
    X(CUBLAS_STATUS_ARCH_MISMATCH, 8, cublasStatus_t)                                             \
    X(CUBLAS_STATUS_EXECUTION_FAILED, 13, cublasStatus_t)                                         \
    X(CUBLAS_STATUS_INTERNAL_ERROR, 14, cublasStatus_t)                                           \
    X(CUBLAS_STATUS_NOT_SUPPORTED, 15, cublasStatus_t)                                            \
    X(CUBLAS_OP_N, 0, cublasOperation_t)                                                          \
    X(CUBLAS_OP_T, 1, cublasOperation_t)                                                          \
    X(CUBLAS_COMPUTE_32F, 68, cublasComputeType_t)                                                \
    X(CUDA_R_32F, 0, cudaDataType_t)                                                              \
    X(CUDA_R_16F, 2, cudaDataType_t)                                                              \
    X(CUDA_R_16BF, 14, cudaDataType_t)                                                            \
    X(CUBLASLT_ORDER_COL, 0, cublasLtOrder_t)                                                     \
    X(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 5, cublasLtMatrixLayoutAttribute_t)                     \
    X(CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, 6, cublasLtMatrixLayoutAttribute_t)            \
    X(CUBLASLT_MATMUL_DESC_TRANSA, 3, cublasLtMatmulDescAttributes_t)                             \
    X(CUBLASLT_MATMUL_DESC_TRANSB, 4, cublasLtMatmulDescAttributes_t)                             \
    X(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, 1, cublasLtMatmulPreferenceAttributes_t)          \
    X(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 5, cublasLtMatmulPreferenceAttributes_t)        \
    X(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, 6, cublasLtMatmulPreferenceAttributes_t)        \
    X(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, 7, cublasLtMatmulPreferenceAttributes_t)        \
    X(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, 8, cublasLtMatmulPreferenceAttributes_t)

#ifndef CUBLASLT_MIN_VALUES_ONLY
#include <stddef.h>
#include <stdint.h>

/* Every enum of cuBLASLt is passed as a 32-bit int. */
typedef int cublasStatus_t;
typedef int cublasOperation_t;
typedef int cublasComputeType_t;
typedef int cudaDataType_t;
typedef int cublasLtOrder_t;
typedef int cublasLtMatrixLayoutAttribute_t;
typedef int cublasLtMatmulDescAttributes_t;
typedef int cublasLtMatmulPreferenceAttributes_t;

#define CUBLASLT_MIN_ENUM(name, value, type) name = value,
enum { CUBLASLT_MIN_VALUES(CUBLASLT_MIN_ENUM) };
#undef CUBLASLT_MIN_ENUM

typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque *cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque *cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque *cublasLtMatmulPreference_t;

/* Semi-opaque, copied by value: 64 bytes. */
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;
#endif

#endif
