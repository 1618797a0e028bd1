/*
 * fake_cuda.c: a stand-in for libcuda.so.1 that has no device, for testing the driver loader
 * on machines without a GPU (ASTITCH_LIBCUDA points at it). FAKE_CUDA_MODE, read at each call,
 * picks the failure:
 *   "noinit" (default)  cuInit returns CUDA_ERROR_NO_DEVICE
 *   "noproc"            cuGetProcAddress_v2 fails for every symbol too (the loader falls back to
 *                       dlsym), and cuInit returns CUDA_ERROR_NO_DEVICE
 *   "zero"              cuInit succeeds, cuDeviceGetCount reports 0 devices
 *   "old"               one device, but cuLaunchKernelEx is missing (an 11.x-era driver)
 * No function beyond the boot set is ever called; the others resolve to a stub.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum {
    SUCCESS = 0,
    ERROR_INVALID_VALUE = 1,
    ERROR_NO_DEVICE = 100,
    ERROR_NOT_FOUND = 500,
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
    case SUCCESS: *s = "CUDA_SUCCESS"; return SUCCESS;
    case ERROR_NO_DEVICE: *s = "CUDA_ERROR_NO_DEVICE"; return SUCCESS;
    case ERROR_NOT_FOUND: *s = "CUDA_ERROR_NOT_FOUND"; return SUCCESS;
    default: *s = NULL; return ERROR_INVALID_VALUE;
    }
}

int cuGetErrorString(int r, const char **s)
{
    *s = r == ERROR_NO_DEVICE ? "no CUDA-capable device is detected" : NULL;
    return *s ? SUCCESS : ERROR_INVALID_VALUE;
}

static int stub(void) { return ERROR_NO_DEVICE; }

int cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status)
{
    (void)version;
    (void)flags;
    *pfn = NULL;
    *status = PROC_SYMBOL_NOT_FOUND;
    if (mode_is("noproc"))
        return ERROR_NO_DEVICE;
    static const struct {
        const char *name;
        void *fn;
    } boot[] = {
        {"cuInit", (void *)cuInit},
        {"cuDriverGetVersion", (void *)cuDriverGetVersion},
        {"cuDeviceGetCount", (void *)cuDeviceGetCount},
        {"cuGetErrorName", (void *)cuGetErrorName},
        {"cuGetErrorString", (void *)cuGetErrorString},
    };
    for (size_t i = 0; i < sizeof boot / sizeof *boot; i++)
        if (strcmp(symbol, boot[i].name) == 0) {
            *pfn = boot[i].fn;
            *status = PROC_SUCCESS;
            return SUCCESS;
        }
    if (strcmp(symbol, "cuLaunchKernelEx") == 0 && mode_is("old"))
        return ERROR_NOT_FOUND;
    *pfn = (void *)stub;
    *status = PROC_SUCCESS;
    return SUCCESS;
}
