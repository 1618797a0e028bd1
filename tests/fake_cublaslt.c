/*
 * fake_cublaslt.c: a stand-in for libcublasLt.so.13 (ASTITCH_CUBLASLT points at it), for
 * testing dots on the GPU without one. Descriptors keep what is set on them; the heuristic
 * offers one algorithm that remembers the alignment it was asked for and wants 1 MiB of
 * workspace (when allowed); cublasLtMatmul runs nothing and records its arguments
 * (fake_cublaslt_matmuls, FakeMatmul in fake_cublaslt.h). fake_cublaslt_handles counts the
 * handles alive. The constants of lib/runtime/cublaslt_min.h are checked against the toolkit's
 * cublasLt.h in check_cublaslt_min.c, where the build finds it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cublaslt.h"

#define EXPORT __attribute__((visibility("default")))

enum { OK = 0, INVALID_VALUE = 7, NOT_SUPPORTED = 15 };

typedef struct Desc {
    int compute, scale, transa, transb;
} Desc;
typedef struct Layout {
    int type;
    uint64_t rows, cols;
    int64_t ld, stride;
    int32_t batch;
} Layout;
typedef struct Pref {
    uint64_t max_ws;
    uint32_t align[4];
} Pref;
typedef struct Algo {
    uint64_t data[8];
} Algo;
typedef struct Heuristic {
    Algo algo;
    size_t ws;
    int state;
    float waves;
    int reserved[4];
} Heuristic;

static FakeMatmul calls[64];
static int ncalls, handles;
static char handle_token;

EXPORT int fake_cublaslt_matmuls(FakeMatmul *out, int max);
EXPORT void fake_cublaslt_reset(void);
EXPORT int fake_cublaslt_handles(void);

int fake_cublaslt_matmuls(FakeMatmul *out, int max)
{
    for (int i = 0; i < ncalls && i < max; i++)
        out[i] = calls[i];
    return ncalls;
}

void fake_cublaslt_reset(void) { ncalls = 0; }
int fake_cublaslt_handles(void) { return handles; }

EXPORT int cublasLtCreate(void **h);
EXPORT int cublasLtDestroy(void *h);
EXPORT const char *cublasLtGetStatusName(int s);
EXPORT const char *cublasLtGetStatusString(int s);
EXPORT int cublasLtMatmulDescCreate(Desc **d, int compute, int scale);
EXPORT int cublasLtMatmulDescSetAttribute(Desc *d, int attr, const void *buf, size_t bytes);
EXPORT int cublasLtMatmulDescDestroy(Desc *d);
EXPORT int cublasLtMatrixLayoutCreate(Layout **l, int type, uint64_t rows, uint64_t cols,
                                      int64_t ld);
EXPORT int cublasLtMatrixLayoutSetAttribute(Layout *l, int attr, const void *buf, size_t bytes);
EXPORT int cublasLtMatrixLayoutDestroy(Layout *l);
EXPORT int cublasLtMatmulPreferenceCreate(Pref **p);
EXPORT int cublasLtMatmulPreferenceSetAttribute(Pref *p, int attr, const void *buf, size_t bytes);
EXPORT int cublasLtMatmulPreferenceDestroy(Pref *p);
EXPORT int cublasLtMatmulAlgoGetHeuristic(void *h, Desc *op, Layout *a, Layout *b, Layout *c,
                                          Layout *d, Pref *pref, int requested, Heuristic *r,
                                          int *returned);
EXPORT int cublasLtMatmul(void *h, Desc *op, const float *alpha, const void *a, Layout *ad,
                          const void *b, Layout *bd, const float *beta, const void *c, Layout *cd,
                          void *d, Layout *dd, const Algo *algo, void *ws, size_t ws_bytes,
                          void *stream);

int cublasLtCreate(void **h)
{
    *h = &handle_token;
    handles++;
    return OK;
}

int cublasLtDestroy(void *h)
{
    handles--;
    return h == &handle_token ? OK : INVALID_VALUE;
}

const char *cublasLtGetStatusName(int s)
{
    return s == OK ? "CUBLAS_STATUS_SUCCESS"
           : s == INVALID_VALUE ? "CUBLAS_STATUS_INVALID_VALUE"
           : s == NOT_SUPPORTED ? "CUBLAS_STATUS_NOT_SUPPORTED"
                                : "CUBLAS_STATUS_UNKNOWN";
}

const char *cublasLtGetStatusString(int s) { return s == OK ? "success" : "fake failure"; }

int cublasLtMatmulDescCreate(Desc **d, int compute, int scale)
{
    *d = calloc(1, sizeof **d);
    (*d)->compute = compute;
    (*d)->scale = scale;
    return OK;
}

/* The value set, an int32 (the enums) */
static int int_of(const void *buf, size_t bytes, int *v)
{
    if (bytes != sizeof(int32_t))
        return INVALID_VALUE;
    memcpy(v, buf, sizeof *v);
    return OK;
}

int cublasLtMatmulDescSetAttribute(Desc *d, int attr, const void *buf, size_t bytes)
{
    return attr == 3 ? int_of(buf, bytes, &d->transa)
           : attr == 4 ? int_of(buf, bytes, &d->transb)
                       : INVALID_VALUE;
}

int cublasLtMatmulDescDestroy(Desc *d)
{
    free(d);
    return OK;
}

int cublasLtMatrixLayoutCreate(Layout **l, int type, uint64_t rows, uint64_t cols, int64_t ld)
{
    *l = calloc(1, sizeof **l);
    **l = (Layout){type, rows, cols, ld, 0, 1};
    /* cuBLASLt: ld at least the rows of a column-major matrix */
    return ld >= (int64_t)rows || rows == 0 ? OK : INVALID_VALUE;
}

int cublasLtMatrixLayoutSetAttribute(Layout *l, int attr, const void *buf, size_t bytes)
{
    if (attr == 5)
        return int_of(buf, bytes, &l->batch);
    if (attr == 6 && bytes == sizeof(int64_t)) {
        memcpy(&l->stride, buf, bytes);
        return OK;
    }
    return INVALID_VALUE;
}

int cublasLtMatrixLayoutDestroy(Layout *l)
{
    free(l);
    return OK;
}

int cublasLtMatmulPreferenceCreate(Pref **p)
{
    *p = calloc(1, sizeof **p);
    for (int i = 0; i < 4; i++)
        (*p)->align[i] = 256;
    return OK;
}

int cublasLtMatmulPreferenceSetAttribute(Pref *p, int attr, const void *buf, size_t bytes)
{
    if (attr == 1 && bytes == sizeof(uint64_t)) {
        memcpy(&p->max_ws, buf, bytes);
        return OK;
    }
    if (attr >= 5 && attr <= 8 && bytes == sizeof(uint32_t)) {
        memcpy(&p->align[attr - 5], buf, bytes);
        return OK;
    }
    return INVALID_VALUE;
}

int cublasLtMatmulPreferenceDestroy(Pref *p)
{
    free(p);
    return OK;
}

int cublasLtMatmulAlgoGetHeuristic(void *h, Desc *op, Layout *a, Layout *b, Layout *c,
                                   Layout *d, Pref *pref, int requested, Heuristic *r,
                                   int *returned)
{
    if (requested < 1 || !op || !a || !b || !c || !d)
        return INVALID_VALUE;
    /* one algorithm, or FAKE_LT_CANDIDATES of them (at most 8) where asked for as many: algo
     * data[0] the alignment asked for, data[1] the algorithm's place in the answer */
    const char *many = getenv("FAKE_LT_CANDIDATES");
    int n = many ? atoi(many) : 1;
    n = n < 1 ? 1 : n > 8 ? 8 : n > requested ? requested : n;
    for (int i = 0; i < n; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].algo.data[0] = pref->align[0];
        r[i].algo.data[1] = (uint64_t)i;
        r[i].ws = pref->max_ws >= (1u << 20) ? 1u << 20 : 0;
    }
    *returned = n;
    return OK;
}

int cublasLtMatmul(void *h, Desc *op, const float *alpha, const void *a, Layout *ad,
                   const void *b, Layout *bd, const float *beta, const void *c, Layout *cd,
                   void *d, Layout *dd, const Algo *algo, void *ws, size_t ws_bytes, void *stream)
{
    if (ncalls >= 64)
        return INVALID_VALUE;
    FakeMatmul *m = &calls[ncalls++];
    int same_type = ad->type == bd->type && ad->type == cd->type && ad->type == dd->type;
    int same_batch = ad->batch == bd->batch && ad->batch == cd->batch && ad->batch == dd->batch;
    *m = (FakeMatmul){
        .stream = stream, .transa = op->transa, .transb = op->transb, .compute = op->compute,
        .scale = op->scale, .type = same_type ? ad->type : -1, .m = dd->rows, .n = dd->cols,
        .k = op->transa ? ad->rows : ad->cols, .lda = ad->ld, .ldb = bd->ld, .ldc = cd->ld,
        .ldd = dd->ld, .batch = same_batch ? ad->batch : -1, .stride_a = ad->stride,
        .stride_b = bd->stride, .stride_c = cd->stride, .a = (uint64_t)(uintptr_t)a,
        .b = (uint64_t)(uintptr_t)b, .c = (uint64_t)(uintptr_t)c, .d = (uint64_t)(uintptr_t)d,
        .alpha = *alpha, .beta = *beta, .algo_align = (uint32_t)algo->data[0],
        .algo_index = (int)algo->data[1],
        .workspace = (uint64_t)(uintptr_t)ws, .workspace_bytes = ws_bytes};
    return OK;
}
