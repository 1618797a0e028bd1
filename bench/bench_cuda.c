/* bench_cuda.c: see bench_cuda.h. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_cuda.h"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef void *CUhandle; /* CUcontext, CUstream, CUevent, CUgraph, CUgraphExec */

enum {
    ATTR_CC_MAJOR = 75,
    ATTR_CC_MINOR = 76,
    ATTR_SM_COUNT = 16,
    ATTR_L2_BYTES = 38,
    STREAM_NON_BLOCKING = 1,
    CAPTURE_MODE_GLOBAL = 0
};

/* X(field, parameters, dlsym names tried in order): the old names stay exported by newer
 * drivers with the signatures written here. */
#define BENCH_CUDA_FUNCTIONS(X)                                                                \
    X(Init, (unsigned flags), "cuInit", NULL)                                                  \
    X(DriverGetVersion, (int *v), "cuDriverGetVersion", NULL)                                  \
    X(DeviceGetCount, (int *n), "cuDeviceGetCount", NULL)                                      \
    X(GetErrorName, (CUresult r, const char **s), "cuGetErrorName", NULL)                      \
    X(DeviceGet, (int *d, int ordinal), "cuDeviceGet", NULL)                                   \
    X(DeviceGetName, (char *name, int len, int d), "cuDeviceGetName", NULL)                    \
    X(DeviceGetAttribute, (int *v, int attr, int d), "cuDeviceGetAttribute", NULL)             \
    X(DeviceTotalMem, (size_t *b, int d), "cuDeviceTotalMem_v2", "cuDeviceTotalMem")           \
    X(PrimaryCtxRetain, (CUhandle *c, int d), "cuDevicePrimaryCtxRetain", NULL)                \
    X(PrimaryCtxRelease, (int d), "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease") \
    X(CtxSetCurrent, (CUhandle c), "cuCtxSetCurrent", NULL)                                    \
    X(MemGetInfo, (size_t *f, size_t *t), "cuMemGetInfo_v2", "cuMemGetInfo")                   \
    X(MemAlloc, (CUdeviceptr *p, size_t b), "cuMemAlloc_v2", "cuMemAlloc")                     \
    X(MemFree, (CUdeviceptr p), "cuMemFree_v2", "cuMemFree")                                   \
    X(MemcpyHtoDAsync, (CUdeviceptr d, const void *s, size_t b, CUhandle st),                  \
      "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync")                                             \
    X(MemcpyDtoHAsync, (void *d, CUdeviceptr s, size_t b, CUhandle st),                        \
      "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync")                                             \
    X(MemcpyDtoDAsync, (CUdeviceptr d, CUdeviceptr s, size_t b, CUhandle st),                  \
      "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync")                                             \
    X(MemsetD8Async, (CUdeviceptr d, unsigned char v, size_t n, CUhandle st),                  \
      "cuMemsetD8Async", NULL)                                                                 \
    X(StreamCreate, (CUhandle *s, unsigned flags), "cuStreamCreate", NULL)                     \
    X(StreamDestroy, (CUhandle s), "cuStreamDestroy_v2", "cuStreamDestroy")                    \
    X(StreamSynchronize, (CUhandle s), "cuStreamSynchronize", NULL)                            \
    X(EventCreate, (CUhandle *e, unsigned flags), "cuEventCreate", NULL)                       \
    X(EventRecord, (CUhandle e, CUhandle s), "cuEventRecord", NULL)                            \
    X(EventSynchronize, (CUhandle e), "cuEventSynchronize", NULL)                              \
    X(EventElapsedTime, (float *ms, CUhandle a, CUhandle b), "cuEventElapsedTime_v2",          \
      "cuEventElapsedTime")                                                                    \
    X(EventDestroy, (CUhandle e), "cuEventDestroy_v2", "cuEventDestroy")                      \
    X(StreamBeginCapture, (CUhandle s, int mode), "cuStreamBeginCapture_v2", NULL)             \
    X(StreamEndCapture, (CUhandle s, CUhandle *graph), "cuStreamEndCapture", NULL)             \
    X(GraphInstantiate, (CUhandle *exec, CUhandle graph, unsigned long long flags),            \
      "cuGraphInstantiateWithFlags", NULL)                                                     \
    X(GraphLaunch, (CUhandle exec, CUhandle s), "cuGraphLaunch", NULL)                         \
    X(GraphExecDestroy, (CUhandle exec), "cuGraphExecDestroy", NULL)                           \
    X(GraphDestroy, (CUhandle graph), "cuGraphDestroy", NULL)

struct BenchCuda {
    void *lib;
#define FIELD(f, params, ...) CUresult(*f) params;
    BENCH_CUDA_FUNCTIONS(FIELD)
#undef FIELD
    int device;
    CUhandle ctx, stream;
    CUhandle *event;
    int nevent;
    BenchCudaInfo info;
    char error[256];
};

/* Records "<what>: <error name>" and returns -1; returns 0 for CUDA_SUCCESS. */
static int check(BenchCuda *c, CUresult r, const char *fmt, ...)
{
    if (r == 0)
        return 0;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *name = NULL;
    if (!c->GetErrorName || c->GetErrorName(r, &name) != 0 || !name)
        name = "unknown CUDA error";
    snprintf(c->error, sizeof c->error, "%s: %s (%d)", what, name, r);
    return -1;
}

static void *lookup(void *lib, const char *a, const char *b)
{
    void *f = dlsym(lib, a);
    return f || !b ? f : dlsym(lib, b);
}

static int query(BenchCuda *c)
{
    BenchCudaInfo *in = &c->info;
    int v = 0;
    if (check(c, c->DriverGetVersion(&in->driver_version), "cuDriverGetVersion") ||
        check(c, c->DeviceGetName(in->name, (int)sizeof in->name, c->device), "cuDeviceGetName") ||
        check(c, c->DeviceGetAttribute(&in->cc_major, ATTR_CC_MAJOR, c->device), "attribute") ||
        check(c, c->DeviceGetAttribute(&in->cc_minor, ATTR_CC_MINOR, c->device), "attribute") ||
        check(c, c->DeviceGetAttribute(&in->sm_count, ATTR_SM_COUNT, c->device), "attribute") ||
        check(c, c->DeviceGetAttribute(&v, ATTR_L2_BYTES, c->device), "attribute") ||
        check(c, c->DeviceTotalMem(&in->total_memory, c->device), "cuDeviceTotalMem"))
        return -1;
    in->l2_bytes = (size_t)v;
    return 0;
}

BenchCuda *bench_cuda_open(char *err, size_t errlen)
{
    BenchCuda *c = calloc(1, sizeof *c);
    const char *path = getenv("ASTITCH_LIBCUDA");
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->lib = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!c->lib) {
        snprintf(err, errlen, "no CUDA driver: %s", dlerror());
        free(c);
        return NULL;
    }
    const char *missing = NULL;
#define LOAD(f, params, a, b)                                                                   \
    if (!(*(void **)&c->f = lookup(c->lib, a, b)) && !missing)                                  \
        missing = a;
    BENCH_CUDA_FUNCTIONS(LOAD)
#undef LOAD
    int n = 0;
    if (!c->Init || !c->DeviceGetCount)
        snprintf(c->error, sizeof c->error, "the driver lacks %s", missing);
    else if (check(c, c->Init(0), "cuInit") || check(c, c->DeviceGetCount(&n), "cuDeviceGetCount"))
        ;
    else if (n < 1)
        snprintf(c->error, sizeof c->error, "no CUDA device");
    else if (missing)
        snprintf(c->error, sizeof c->error, "the driver lacks %s", missing);
    else if (!check(c, c->DeviceGet(&c->device, 0), "cuDeviceGet") &&
             !check(c, c->PrimaryCtxRetain(&c->ctx, c->device), "cuDevicePrimaryCtxRetain") &&
             !check(c, c->CtxSetCurrent(c->ctx), "cuCtxSetCurrent") &&
             !check(c, c->StreamCreate(&c->stream, STREAM_NON_BLOCKING), "cuStreamCreate") &&
             !query(c))
        return c;
    snprintf(err, errlen, "no CUDA driver: %s", c->error);
    bench_cuda_close(c);
    return NULL;
}

void bench_cuda_close(BenchCuda *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->nevent; i++)
        c->EventDestroy(c->event[i]);
    free(c->event);
    if (c->stream)
        c->StreamDestroy(c->stream);
    if (c->ctx) {
        c->CtxSetCurrent(NULL);
        c->PrimaryCtxRelease(c->device);
    }
    /* The library stays loaded: the driver's own threads may still run in it. */
    free(c);
}

const BenchCudaInfo *bench_cuda_info(const BenchCuda *c) { return &c->info; }
void *bench_cuda_stream(const BenchCuda *c) { return c->stream; }
const char *bench_cuda_error(const BenchCuda *c) { return c->error; }

int bench_cuda_alloc(BenchCuda *c, size_t bytes, uint64_t *out)
{
    CUdeviceptr p = 0;
    if (check(c, c->MemAlloc(&p, bytes ? bytes : 256), "cuMemAlloc(%zu bytes)", bytes))
        return -1;
    *out = p;
    return 0;
}

void bench_cuda_free(BenchCuda *c, uint64_t p)
{
    if (p)
        c->MemFree(p);
}

int bench_cuda_mem_free(BenchCuda *c, size_t *free_bytes)
{
    size_t total;
    return check(c, c->MemGetInfo(free_bytes, &total), "cuMemGetInfo");
}

int bench_cuda_upload(BenchCuda *c, uint64_t dst, const void *src, size_t bytes)
{
    return bytes ? check(c, c->MemcpyHtoDAsync(dst, src, bytes, c->stream),
                         "cuMemcpyHtoDAsync(%zu bytes)", bytes)
                 : 0;
}

int bench_cuda_download(BenchCuda *c, void *dst, uint64_t src, size_t bytes)
{
    if (bytes && check(c, c->MemcpyDtoHAsync(dst, src, bytes, c->stream),
                       "cuMemcpyDtoHAsync(%zu bytes)", bytes))
        return -1;
    return bench_cuda_sync(c);
}

int bench_cuda_copy(BenchCuda *c, uint64_t dst, uint64_t src, size_t bytes)
{
    return bytes ? check(c, c->MemcpyDtoDAsync(dst, src, bytes, c->stream),
                         "cuMemcpyDtoDAsync(%zu bytes)", bytes)
                 : 0;
}

int bench_cuda_fill(BenchCuda *c, uint64_t dst, uint8_t byte, size_t bytes)
{
    return bytes ? check(c, c->MemsetD8Async(dst, byte, bytes, c->stream), "cuMemsetD8Async")
                 : 0;
}

int bench_cuda_sync(BenchCuda *c)
{
    return check(c, c->StreamSynchronize(c->stream), "cuStreamSynchronize");
}

int bench_cuda_events(BenchCuda *c, int n)
{
    if (n <= c->nevent)
        return 0;
    CUhandle *e = realloc(c->event, (size_t)n * sizeof *e);
    if (!e) {
        snprintf(c->error, sizeof c->error, "out of memory for %d events", n);
        return -1;
    }
    c->event = e;
    for (; c->nevent < n; c->nevent++)
        if (check(c, c->EventCreate(&c->event[c->nevent], 0), "cuEventCreate"))
            return -1;
    return 0;
}

int bench_cuda_record(BenchCuda *c, int i)
{
    return check(c, c->EventRecord(c->event[i], c->stream), "cuEventRecord");
}

int bench_cuda_elapsed(BenchCuda *c, int i, int j, double *ms)
{
    float f = 0;
    if (check(c, c->EventSynchronize(c->event[j]), "cuEventSynchronize") ||
        check(c, c->EventElapsedTime(&f, c->event[i], c->event[j]), "cuEventElapsedTime"))
        return -1;
    *ms = f;
    return 0;
}

int bench_cuda_capture_begin(BenchCuda *c)
{
    return check(c, c->StreamBeginCapture(c->stream, CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
}

int bench_cuda_capture_end(BenchCuda *c, void **graph)
{
    CUhandle g = NULL, exec = NULL;
    int rc = check(c, c->StreamEndCapture(c->stream, &g), "cuStreamEndCapture") ||
             check(c, c->GraphInstantiate(&exec, g, 0), "cuGraphInstantiate");
    if (g)
        c->GraphDestroy(g);
    *graph = rc ? NULL : exec;
    return rc ? -1 : 0;
}

int bench_cuda_graph_launch(BenchCuda *c, void *graph)
{
    return check(c, c->GraphLaunch(graph, c->stream), "cuGraphLaunch");
}

void bench_cuda_graph_destroy(BenchCuda *c, void *graph)
{
    if (graph)
        c->GraphExecDestroy(graph);
}

int bench_cuda_copy_bandwidth(BenchCuda *c, size_t bytes, int reps, double *gbps)
{
    uint64_t a = 0, b = 0;
    double *t = calloc((size_t)reps, sizeof *t);
    int rc = !t || bench_cuda_alloc(c, bytes, &a) || bench_cuda_alloc(c, bytes, &b) ||
             bench_cuda_fill(c, a, 0x5a, bytes) || bench_cuda_events(c, reps + 1);
    for (int i = 0; !rc && i < 3; i++) /* warm-up */
        rc = bench_cuda_copy(c, b, a, bytes);
    rc = rc || bench_cuda_sync(c) || bench_cuda_record(c, 0);
    for (int i = 0; !rc && i < reps; i++)
        rc = bench_cuda_copy(c, i % 2 ? a : b, i % 2 ? b : a, bytes) || bench_cuda_record(c, i + 1);
    for (int i = 0; !rc && i < reps; i++)
        rc = bench_cuda_elapsed(c, i, i + 1, &t[i]);
    if (!rc)
        *gbps = 2.0 * (double)bytes / (bench_median(t, reps) * 1e-3) / 1e9;
    bench_cuda_sync(c);
    bench_cuda_free(c, a);
    bench_cuda_free(c, b);
    free(t);
    return rc ? -1 : 0;
}
