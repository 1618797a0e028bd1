/*
 * fake_cuda.c: a stand-in for libcuda.so.1, for testing the driver layer on machines without a
 * GPU (ASTITCH_LIBCUDA points at it). FAKE_CUDA_MODE, read at each call, picks what it fakes:
 *   "noinit" (default)  cuInit returns CUDA_ERROR_NO_DEVICE
 *   "noproc"            cuGetProcAddress_v2 fails for every symbol too (the loader falls back to
 *                       dlsym), and cuInit returns CUDA_ERROR_NO_DEVICE
 *   "zero"              cuInit succeeds, cuDeviceGetCount reports 0 devices
 *   "old"               one device, but cuLaunchKernelEx is missing (an 11.x-era driver)
 *   "device"            one H100-like device that runs nothing: modules load any text, launches,
 *                       copies and memsets are accepted and do nothing (copies to the host write
 *                       zeros), allocations hand out addresses that must not be dereferenced.
 *                       Streams can capture (cuStreamBeginCapture ... cuStreamEndCapture) as the
 *                       real driver does in global mode: while a capture is open, a call that
 *                       allocates, frees or synchronizes fails with
 *                       CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture.
 *                       With FAKE_CUDA_SPILL_BELOW=N, a function whose .maxnreg in the loaded
 *                       PTX is below N reports 16 bytes of local memory (a spill), and every
 *                       function reports its .maxnreg (else 32) as its registers, which bound
 *                       its occupancy; fake_cuda_loads counts the modules loaded;
 *                       cuEventElapsedTime gives the times fake_cuda_set_elapsed set, in
 *                       order, then 0.
 * In the other modes no function beyond the boot set is ever called; the others resolve to a
 * stub. While a capture is open, every call is recorded in a log that fake_cuda_log returns
 * (one line per call: the function's name, "@capture" when it queued on the capturing stream,
 * "@other" or "@legacy" when it queued elsewhere, "!" when it was refused);
 * fake_cuda_log_reset empties it.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum {
    SUCCESS = 0,
    ERROR_INVALID_VALUE = 1,
    ERROR_NO_DEVICE = 100,
    ERROR_NOT_FOUND = 500,
    ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    ERROR_STREAM_CAPTURE_UNMATCHED = 903,
};
enum { PROC_SUCCESS = 0, PROC_SYMBOL_NOT_FOUND = 1 };

static int mode_is(const char *m)
{
    const char *mode = getenv("FAKE_CUDA_MODE");
    return strcmp(mode && *mode ? mode : "noinit", m) == 0;
}

EXPORT int cuInit(unsigned int flags);
EXPORT int cuDriverGetVersion(int *v);
EXPORT int cuDeviceGetCount(int *n);
EXPORT int cuGetErrorName(int r, const char **s);
EXPORT int cuGetErrorString(int r, const char **s);
EXPORT int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags,
                               int *status);

int cuInit(unsigned int flags)
{
    (void)flags;
    return mode_is("noinit") || mode_is("noproc") ? ERROR_NO_DEVICE : SUCCESS;
}

int cuDriverGetVersion(int *v)
{
    *v = mode_is("old") ? 11080 : 13000;
    return SUCCESS;
}

int cuDeviceGetCount(int *n)
{
    *n = mode_is("zero") ? 0 : 1;
    return SUCCESS;
}

int cuGetErrorName(int r, const char **s)
{
    switch (r) {
    case SUCCESS: *s = "CUDA_SUCCESS"; break;
    case ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; break;
    case ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; break;
    case ERROR_STREAM_CAPTURE_UNSUPPORTED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; break;
    case ERROR_STREAM_CAPTURE_INVALIDATED: *s = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; break;
    case ERROR_STREAM_CAPTURE_UNMATCHED: *s = "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED"; break;
    default: *s = NULL; return ERROR_INVALID_VALUE;
    }
    return SUCCESS;
}

int cuGetErrorString(int r, const char **s)
{
    *s = r == ERROR_NO_DEVICE ? "no CUDA-capable device is detected" : NULL;
    return *s ? SUCCESS : ERROR_INVALID_VALUE;
}

/* The "device" mode. Handles are addresses of the tokens below or of Stream objects; state is
 * process-wide, as the real driver's is. */
static char context_token, module_token, function_token, event_token, graph_token, exec_token;
static char fill_function_token; /* the runtime's fill kernel (astitch_fill) */
static uint64_t next_address = 0x100000000000ull;

typedef struct Stream {
    int capturing;
} Stream;

static int open_captures, captures_broken;
static char log_text[1 << 16];
static size_t log_len;

EXPORT const char *fake_cuda_log(void);
EXPORT void fake_cuda_log_reset(void);

const char *fake_cuda_log(void)
{
    log_text[log_len] = '\0';
    return log_text;
}

void fake_cuda_log_reset(void) { log_len = 0; }

static void record(const char *name, const char *suffix)
{
    if (!open_captures)
        return;
    int n = snprintf(log_text + log_len, sizeof log_text - log_len, "%s%s\n", name, suffix);
    if (n > 0 && log_len + (size_t)n < sizeof log_text)
        log_len += (size_t)n;
}

/* Work queued on s (NULL: the legacy stream); fails once a capture it joins is broken. */
static int queued(const char *name, void *s)
{
    Stream *st = s;
    record(name, !st ? "@legacy" : st->capturing ? "@capture" : "@other");
    return st && st->capturing && captures_broken ? ERROR_STREAM_CAPTURE_INVALIDATED : SUCCESS;
}

/* A call that global-mode capture forbids: refused, and every open capture is broken. */
static int unsafe(const char *name)
{
    if (!open_captures)
        return SUCCESS;
    record(name, "!");
    captures_broken = 1;
    return ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* The attributes of an H100 SXM, the device lib/passes/device.c models as "h100". */
static int fake_attribute(int *v, int attr, int dev)
{
    static const int table[][2] = {
        {1, 1024},       {8, 48 << 10},  {10, 32},        {12, 65536}, {16, 132},
        {38, 50 << 20},  {39, 2048},     {75, 9},         {76, 0},     {81, 228 << 10},
        {82, 65536},     {95, 1},        {97, 227 << 10}, {106, 32},   {111, 1 << 10},
    };
    record("cuDeviceGetAttribute", "");
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (table[i][0] == attr) {
            *v = table[i][1];
            return SUCCESS;
        }
    return ERROR_INVALID_VALUE;
}

static int fake_device_get(int *d, int ordinal)
{
    record("cuDeviceGet", "");
    *d = ordinal;
    return ordinal == 0 ? SUCCESS : ERROR_INVALID_VALUE;
}

static int fake_device_name(char *s, int len, int dev)
{
    record("cuDeviceGetName", "");
    snprintf(s, (size_t)len, "%s", "fake H100 (tests/fake_cuda.c)");
    return SUCCESS;
}

static int fake_total_mem(size_t *bytes, int dev)
{
    record("cuDeviceTotalMem", "");
    *bytes = (size_t)80 << 30;
    return SUCCESS;
}

static int fake_ctx_retain(void **c, int dev)
{
    record("cuDevicePrimaryCtxRetain", "");
    *c = &context_token;
    return SUCCESS;
}

static int fake_ctx_release(int dev)
{
    record("cuDevicePrimaryCtxRelease", "");
    return SUCCESS;
}

static int fake_ctx_push(void *c)
{
    record("cuCtxPushCurrent", "");
    return SUCCESS;
}

static int fake_ctx_pop(void **c)
{
    record("cuCtxPopCurrent", "");
    *c = &context_token;
    return SUCCESS;
}

static int fake_ctx_sync(void) { return unsafe("cuCtxSynchronize"); }

static int fake_mem_info(size_t *free_bytes, size_t *total)
{
    record("cuMemGetInfo", "");
    *total = (size_t)80 << 30;
    *free_bytes = *total - (size_t)(next_address - 0x100000000000ull);
    return SUCCESS;
}

static int fake_alloc(uint64_t *p, size_t bytes)
{
    int r = unsafe("cuMemAlloc");
    if (r == SUCCESS) {
        *p = next_address;
        next_address += ((bytes + 255) & ~(size_t)255) + 256;
    }
    return r;
}

static int fake_free(uint64_t p) { return unsafe("cuMemFree"); }

static int fake_copy_dtod(uint64_t dst, uint64_t src, size_t bytes, void *s)
{
    return queued("cuMemcpyDtoDAsync", s);
}

static int fake_copy_htod(uint64_t dst, const void *src, size_t bytes, void *s)
{
    return queued("cuMemcpyHtoDAsync", s);
}

static int fake_copy_dtoh(void *dst, uint64_t src, size_t bytes, void *s)
{
    int r = queued("cuMemcpyDtoHAsync", s);
    if (r == SUCCESS && !(s && ((Stream *)s)->capturing))
        memset(dst, 0, bytes);
    return r;
}

static int fake_memset32(uint64_t dst, unsigned value, size_t count, void *s)
{
    return queued("cuMemsetD32Async", s);
}

static char *loaded_image;  /* the last module's PTX */
static int loads;           /* modules loaded */
static int function_regs = 32; /* .maxnreg of the function got last */

EXPORT int fake_cuda_loads(void);
int fake_cuda_loads(void) { return loads; }
EXPORT int fake_cuda_function_regs(void);
int fake_cuda_function_regs(void) { return function_regs; }

/* The .maxnreg of kernel `name` in the last loaded PTX, else 32. */
static int maxnreg_of(const char *name)
{
    const char *at = loaded_image;
    size_t n = strlen(name);
    while (at && (at = strstr(at, ".entry ")) != NULL) {
        at += 7;
        if (strncmp(at, name, n) == 0 && at[n] == '(') {
            const char *r = strstr(at, ".maxnreg "), *body = strchr(at, '{');
            return r && (!body || r < body) ? atoi(r + 9) : 32;
        }
    }
    return 32;
}

/* Writes "" into the JIT's log buffers (options 3 and 5). */
static int fake_module_load(void **m, const void *image, unsigned n, int *opt, void **val)
{
    record("cuModuleLoadDataEx", "");
    const char *refuse = getenv("FAKE_CUDA_REFUSE_CUBIN");
    if (refuse && *refuse == '1' && n == 0) /* a cubin: loaded without JIT options */
        return 200; /* CUDA_ERROR_INVALID_IMAGE */
    free(loaded_image);
    loaded_image = strdup((const char *)image);
    loads++;
    for (unsigned i = 0; i < n; i++)
        if (opt[i] == 3 || opt[i] == 5)
            *(char *)val[i] = '\0';
    *m = &module_token;
    return SUCCESS;
}

static int fake_module_unload(void *m)
{
    record("cuModuleUnload", "");
    return SUCCESS;
}

static int fake_get_function(void **f, void *m, const char *name)
{
    record("cuModuleGetFunction", "");
    function_regs = maxnreg_of(name);
    *f = strcmp(name, "astitch_fill") == 0 ? &fill_function_token : &function_token;
    return SUCCESS;
}

/* Registers as above, no static shared memory, local memory as above, blocks of up to 1024
 * threads. */
static int fake_func_attribute(int *v, int attr, void *f)
{
    record("cuFuncGetAttribute", "");
    const char *below = getenv("FAKE_CUDA_SPILL_BELOW");
    bool spills = below && function_regs < atoi(below);
    *v = attr == 0 ? 1024 : attr == 4 ? function_regs : attr == 3 && spills ? 16 : 0;
    return SUCCESS;
}

static int fake_func_set_attribute(void *f, int attr, int v)
{
    record("cuFuncSetAttribute", "");
    return SUCCESS;
}

static int fake_occupancy(int *blocks, void *f, int block, size_t dynamic_shared)
{
    record("cuOccupancyMaxActiveBlocksPerMultiprocessor", "");
    int n = 2048 / (block > 0 ? block : 1), by_regs = 65536 / (function_regs * (block > 0 ? block : 1));
    n = n < by_regs ? n : by_regs;
    int by_shared = (int)((228u << 10) / (dynamic_shared + (1u << 10)));
    n = n < by_shared ? n : by_shared;
    *blocks = n > 32 ? 32 : n;
    return SUCCESS;
}

/* The leading fields of CUlaunchConfig and CUlaunchAttribute (cuda.h, 64-bit). */
typedef struct LaunchAttribute {
    int id;
    char pad[4];
    union {
        char bytes[64];
        int cooperative;
    } value;
} LaunchAttribute;
typedef struct LaunchConfig {
    unsigned grid[3], block[3], shared;
    void *stream;
    LaunchAttribute *attrs;
    unsigned nattrs;
} LaunchConfig;

static int fake_launch(const LaunchConfig *cfg, void *f, void **params, void **extra)
{
    int coop = 0;
    for (unsigned i = 0; i < cfg->nattrs; i++)
        coop |= cfg->attrs[i].id == 2 && cfg->attrs[i].value.cooperative;
    return queued(coop                        ? "cuLaunchKernelEx(cooperative)"
                  : f == &fill_function_token ? "cuLaunchKernelEx(fill)"
                                              : "cuLaunchKernelEx",
                  cfg->stream);
}

static int fake_stream_create(void **s, unsigned flags)
{
    record("cuStreamCreate", "");
    *s = calloc(1, sizeof(Stream));
    return *s ? SUCCESS : ERROR_INVALID_VALUE;
}

static int fake_stream_destroy(void *s)
{
    record("cuStreamDestroy", "");
    free(s);
    return SUCCESS;
}

static int fake_stream_sync(void *s) { return unsafe("cuStreamSynchronize"); }

/* status: 0 none, 1 active, 2 invalidated. */
static int fake_is_capturing(void *s, int *status)
{
    Stream *st = s;
    record("cuStreamIsCapturing", "");
    *status = !st || !st->capturing ? 0 : captures_broken ? 2 : 1;
    return SUCCESS;
}

static int fake_begin_capture(void *s, int mode)
{
    Stream *st = s;
    if (!st || st->capturing)
        return ERROR_STREAM_CAPTURE_UNSUPPORTED;
    st->capturing = 1;
    open_captures++;
    return SUCCESS;
}

static int fake_end_capture(void *s, void **graph)
{
    Stream *st = s;
    *graph = NULL;
    if (!st || !st->capturing)
        return ERROR_STREAM_CAPTURE_UNMATCHED;
    st->capturing = 0;
    int broken = captures_broken;
    if (--open_captures == 0)
        captures_broken = 0;
    if (broken)
        return ERROR_STREAM_CAPTURE_INVALIDATED;
    *graph = &graph_token;
    return SUCCESS;
}

static int fake_instantiate(void **exec, void *graph, unsigned long long flags)
{
    record("cuGraphInstantiate", "");
    *exec = &exec_token;
    return graph ? SUCCESS : ERROR_INVALID_VALUE;
}

static int fake_graph_launch(void *exec, void *s) { return queued("cuGraphLaunch", s); }

static int fake_exec_destroy(void *exec)
{
    record("cuGraphExecDestroy", "");
    return SUCCESS;
}

static int fake_graph_destroy(void *graph)
{
    record("cuGraphDestroy", "");
    return SUCCESS;
}

static int fake_event_create(void **e, unsigned flags)
{
    record("cuEventCreate", "");
    *e = &event_token;
    return SUCCESS;
}

static int fake_event_record(void *e, void *s) { return queued("cuEventRecord", s); }

static int fake_event_sync(void *e) { return unsafe("cuEventSynchronize"); }

/* Times cuEventElapsedTime gives, in order (fake_cuda_set_elapsed); 0 past the last. */
static float elapsed_ms[64];
static int elapsed_n, elapsed_next;
EXPORT void fake_cuda_set_elapsed(const float *ms, int n);
void fake_cuda_set_elapsed(const float *ms, int n)
{
    elapsed_n = n < 0 ? 0 : n > 64 ? 64 : n;
    for (int i = 0; i < elapsed_n; i++)
        elapsed_ms[i] = ms[i];
    elapsed_next = 0;
}

static int fake_event_elapsed(float *ms, void *a, void *b)
{
    record("cuEventElapsedTime", "");
    *ms = elapsed_next < elapsed_n ? elapsed_ms[elapsed_next++] : 0;
    return SUCCESS;
}

static int fake_event_destroy(void *e)
{
    record("cuEventDestroy", "");
    return SUCCESS;
}

typedef struct Proc {
    const char *name;
    void *fn;
} Proc;

/* The functions of the "device" mode, by the names lib/runtime asks cuGetProcAddress_v2 for. */
static const Proc device_procs[] = {
    {"cuDeviceGet", (void *)fake_device_get},
    {"cuDeviceGetName", (void *)fake_device_name},
    {"cuDeviceTotalMem", (void *)fake_total_mem},
    {"cuDeviceGetAttribute", (void *)fake_attribute},
    {"cuDevicePrimaryCtxRetain", (void *)fake_ctx_retain},
    {"cuDevicePrimaryCtxRelease", (void *)fake_ctx_release},
    {"cuCtxPushCurrent", (void *)fake_ctx_push},
    {"cuCtxPopCurrent", (void *)fake_ctx_pop},
    {"cuCtxSynchronize", (void *)fake_ctx_sync},
    {"cuMemGetInfo", (void *)fake_mem_info},
    {"cuMemAlloc", (void *)fake_alloc},
    {"cuMemFree", (void *)fake_free},
    {"cuMemcpyDtoDAsync", (void *)fake_copy_dtod},
    {"cuMemcpyHtoDAsync", (void *)fake_copy_htod},
    {"cuMemcpyDtoHAsync", (void *)fake_copy_dtoh},
    {"cuMemsetD32Async", (void *)fake_memset32},
    {"cuModuleLoadDataEx", (void *)fake_module_load},
    {"cuModuleUnload", (void *)fake_module_unload},
    {"cuModuleGetFunction", (void *)fake_get_function},
    {"cuFuncGetAttribute", (void *)fake_func_attribute},
    {"cuFuncSetAttribute", (void *)fake_func_set_attribute},
    {"cuOccupancyMaxActiveBlocksPerMultiprocessor", (void *)fake_occupancy},
    {"cuLaunchKernelEx", (void *)fake_launch},
    {"cuStreamCreate", (void *)fake_stream_create},
    {"cuStreamDestroy", (void *)fake_stream_destroy},
    {"cuStreamSynchronize", (void *)fake_stream_sync},
    {"cuStreamIsCapturing", (void *)fake_is_capturing},
    {"cuStreamBeginCapture", (void *)fake_begin_capture},
    {"cuStreamEndCapture", (void *)fake_end_capture},
    {"cuGraphInstantiateWithFlags", (void *)fake_instantiate},
    {"cuGraphLaunch", (void *)fake_graph_launch},
    {"cuGraphExecDestroy", (void *)fake_exec_destroy},
    {"cuGraphDestroy", (void *)fake_graph_destroy},
    {"cuEventCreate", (void *)fake_event_create},
    {"cuEventRecord", (void *)fake_event_record},
    {"cuEventSynchronize", (void *)fake_event_sync},
    {"cuEventElapsedTime", (void *)fake_event_elapsed},
    {"cuEventDestroy", (void *)fake_event_destroy},
};

static int stub(void) { return ERROR_NO_DEVICE; }

/* Points *pfn at the function of t[0..n) named symbol; 0 when there is none. */
static int find(const Proc *t, size_t n, const char *symbol, void **pfn, int *status)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(symbol, t[i].name) == 0) {
            *pfn = t[i].fn;
            *status = PROC_SUCCESS;
            return 1;
        }
    return 0;
}

int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status)
{
    (void)version;
    (void)flags;
    *pfn = NULL;
    *status = PROC_SYMBOL_NOT_FOUND;
    if (mode_is("noproc"))
        return ERROR_NO_DEVICE;
    static const Proc boot[] = {
        {"cuInit", (void *)cuInit},
        {"cuDriverGetVersion", (void *)cuDriverGetVersion},
        {"cuDeviceGetCount", (void *)cuDeviceGetCount},
        {"cuGetErrorName", (void *)cuGetErrorName},
        {"cuGetErrorString", (void *)cuGetErrorString},
    };
    if (find(boot, sizeof boot / sizeof *boot, symbol, pfn, status))
        return SUCCESS;
    if (strcmp(symbol, "cuLaunchKernelEx") == 0 && mode_is("old"))
        return ERROR_NOT_FOUND;
    if (mode_is("device"))
        return find(device_procs, sizeof device_procs / sizeof *device_procs, symbol, pfn, status)
                   ? SUCCESS
                   : ERROR_NOT_FOUND;
    *pfn = (void *)stub;
    *status = PROC_SUCCESS;
    return SUCCESS;
}
