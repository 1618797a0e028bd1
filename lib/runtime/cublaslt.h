/*
 * cublaslt.h: compute ops on the GPU (dots through cuBLASLt, custom ops through their device
 * forms), private to libastitch. A map:
 *
 *   cublaslt.c   dlopen of libcublasLt (never linked), its function table, status text
 *   exec_dot.c   the dots of a plan cuBLASLt takes (dot_gemm.h decides which): descriptors and
 *                candidate algorithms at load, one cublasLtMatmul queued per run
 *   exec_dot_search.c  the timed choice among a dot's candidates at the first run outside a
 *                capture (exec_dot.h between the two)
 *   exec_cuda_compute.c  each compute step of a run on the cuda target: on cuBLASLt, through
 *                a custom op's device form, or (host_compute) on the host
 *
 * Threads: a CublasLt table is read-only once open. An ExecDots belongs to its executable and
 * is used as the executable is (one run at a time per workspace).
 */
#ifndef ASTITCH_CUBLASLT_H
#define ASTITCH_CUBLASLT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cublaslt_min.h"
#include "cuda_driver.h"

/* The functions astitch calls, X(return type, field, symbol, parameters). */
#define CUBLASLT_FUNCTIONS(X)                                                                      \
    X(cublasStatus_t, Create, "cublasLtCreate", (cublasLtHandle_t * h))                            \
    X(cublasStatus_t, Destroy, "cublasLtDestroy", (cublasLtHandle_t h))                            \
    X(const char *, GetStatusName, "cublasLtGetStatusName", (cublasStatus_t s))                    \
    X(const char *, GetStatusString, "cublasLtGetStatusString", (cublasStatus_t s))                \
    X(cublasStatus_t, MatmulDescCreate, "cublasLtMatmulDescCreate",                                \
      (cublasLtMatmulDesc_t * d, cublasComputeType_t compute, cudaDataType_t scale))               \
    X(cublasStatus_t, MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute",                    \
      (cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *buf, size_t bytes))   \
    X(cublasStatus_t, MatmulDescDestroy, "cublasLtMatmulDescDestroy", (cublasLtMatmulDesc_t d))    \
    X(cublasStatus_t, MatrixLayoutCreate, "cublasLtMatrixLayoutCreate",                            \
      (cublasLtMatrixLayout_t * l, cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld)) \
    X(cublasStatus_t, MatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute",                \
      (cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a, const void *buf,               \
       size_t bytes))                                                                              \
    X(cublasStatus_t, MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy", (cublasLtMatrixLayout_t l)) \
    X(cublasStatus_t, MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate",                    \
      (cublasLtMatmulPreference_t * p))                                                            \
    X(cublasStatus_t, MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute",        \
      (cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const void *buf,      \
       size_t bytes))                                                                              \
    X(cublasStatus_t, MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy", (cublasLtMatmulPreference_t p)) \
    X(cublasStatus_t, MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic",                    \
      (cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,                      \
       cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,               \
       cublasLtMatmulPreference_t pref, int requested, cublasLtMatmulHeuristicResult_t *results,   \
       int *returned))                                                                             \
    X(cublasStatus_t, Matmul, "cublasLtMatmul",                                                    \
      (cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *a,              \
       cublasLtMatrixLayout_t adesc, const void *b, cublasLtMatrixLayout_t bdesc,                  \
       const void *beta, const void *c, cublasLtMatrixLayout_t cdesc, void *d,                     \
       cublasLtMatrixLayout_t ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace,            \
       size_t workspace_bytes, CUstream stream))

typedef struct CublasLt {
    void *lib;
    char path[512]; /* the file opened */
#define CUBLASLT_FIELD(ret, field, symbol, params) ret(*field) params;
    CUBLASLT_FUNCTIONS(CUBLASLT_FIELD)
#undef CUBLASLT_FIELD
} CublasLt;

/* cublaslt.c */
enum { CUBLASLT_MAX_PLACES = 4 };
/* The files cublaslt_open tries, in order, into places (each of len bytes); returns their
 * count. $ASTITCH_CUBLASLT when set and not empty, alone; else libcublasLt.so.13 in
 * $ASTITCH_CUDA_PATH/lib64 (when set), in the configured toolkit's lib64, then the bare soname
 * through the dynamic loader's own search. */
int cublaslt_places(char places[][512], int max);
/* Opens cuBLASLt into *lt: the first of cublaslt_places that dlopen takes, then every function
 * of the table. ASTITCH_ERR_NO_DEVICE naming every place tried and dlerror's text for each
 * (or the missing function); *lt is then left closed. The library is opened with RTLD_NODELETE:
 * each open after the first in a process only counts a reference. */
astitch_status cublaslt_open(astitch_context *ctx, CublasLt *lt);
/* Drops lt's reference and zeroes it; accepts a closed or zeroed lt. */
void cublaslt_close(CublasLt *lt);
/* Records "<what>: CUBLAS_STATUS_NAME (text)" on ctx, where <what> is formatted from fmt;
 * returns ASTITCH_ERR_MEMORY for CUBLAS_STATUS_ALLOC_FAILED, ASTITCH_ERR_UNSUPPORTED for
 * CUBLAS_STATUS_NOT_SUPPORTED, else ASTITCH_ERR_DEVICE. */
astitch_status cublaslt_fail(astitch_context *ctx, const CublasLt *lt, cublasStatus_t st,
                             const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* exec_dot.c */
typedef struct ExecDots ExecDots;
struct astitch_executable;
/* The dots of x's plan that run through cuBLASLt, prepared on dev (inside cuda_enter): for
 * each f32/f16/bf16 dot step that dot_gemm_layout makes one GEMM, its descriptors, the
 * heuristic's first algorithms for 16-byte-aligned operands (the first runs until the search
 * chooses) and one for element-aligned operands; *ws_bytes: the cuBLASLt
 * workspace a run needs (0 when none). *out stays NULL when the plan has no such dot or the
 * context's host_compute switch is on (cuBLASLt is then never opened). Fails, naming the dot,
 * when cuBLASLt cannot be opened or finds no algorithm for it. */
astitch_status exec_dots_prepare(struct astitch_executable *x, const CudaDevice *dev,
                                 ExecDots **out, size_t *ws_bytes);
void exec_dots_destroy(ExecDots *d); /* accepts NULL; inside cuda_enter */
/* Whether dot step node n runs on the GPU (d may be NULL: none does). */
bool exec_dots_on_gpu(const ExecDots *d, int32_t n);
/* Queues node n's product (exec_dots_on_gpu) on stream: A, B, C are the device addresses of
 * its lhs, rhs and output; ws the cuBLASLt workspace (*ws_bytes of exec_dots_prepare). A dot
 * with an empty output queues nothing. */
astitch_status exec_dots_run(struct astitch_executable *x, ExecDots *d, int32_t n,
                             CUdeviceptr lhs, CUdeviceptr rhs, CUdeviceptr out, CUdeviceptr ws,
                             CUstream stream);
/* The algorithm search over each dot's candidates (docs/codegen.md, *Variant search*): the
 * heuristic's first algorithms for 16-byte-aligned operands. Whether some dot has several
 * candidates and none chosen yet. */
bool exec_dots_searchable(const ExecDots *d);
/* Between begin and end (inside cuda_enter; not under a capture), each run's dot with several
 * candidates and aligned operands times them on its operands before its product, keeps the
 * fastest, and is chosen from then on. begin allocates a fill of twice the L2 (where it
 * cannot, the timings start from the L2 as they find it). */
void exec_dots_begin_timing(struct astitch_executable *x, ExecDots *d);
void exec_dots_end_timing(ExecDots *d);
/* Each dot's chosen candidate, in plan order, -1 where none was chosen: up to max into
 * choice; returns how many dots there are (d may be NULL: none). apply makes choice[i] dot
 * i's algorithm where it is one of its candidates (a foreign or stale record is ignored). */
int exec_dots_choices(const ExecDots *d, int *choice, int max);
void exec_dots_apply(ExecDots *d, const int *choice, int n);
/* The dots with a chosen algorithm, and of those the ones not the heuristic's first. */
void exec_dots_count_chosen(const ExecDots *d, int *chosen, int *not_first);

/* exec_cuda_compute.c */
/* Whether compute op n of x's plan runs on the GPU: a dot on cuBLASLt (dots, from
 * exec_dots_prepare), or a custom op with a device form (host_compute off). */
bool cuda_compute_on_gpu(const struct astitch_executable *x, const ExecDots *dots, int32_t n);
/* At load: ASTITCH_ERR_UNSUPPORTED, naming the first compute op of x's plan that would run on
 * the host, unless the context's host_compute switch asks for that. */
astitch_status cuda_compute_check(struct astitch_executable *x, const ExecDots *dots);
/* Runs compute op n on stream st: ptr holds the device addresses of its operands, then of its
 * output; dot_ws the cuBLASLt workspace. On the GPU it only queues work; on the host it copies
 * and synchronizes. */
astitch_status cuda_compute_run(struct astitch_executable *x, const CudaDevice *dev,
                                ExecDots *dots, int32_t n, const CUdeviceptr *ptr,
                                CUdeviceptr dot_ws, CUstream st);

#endif
