/* cuda_driver.c: dlopen of the CUDA driver, its function table, and driver errors. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "ir/config.h"
#include "ir/ir.h"

typedef CUresult (*GetProcAddressFn)(const char *symbol, void **pfn, int version,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult *status);

typedef struct Entry {
    const char *symbol;
    int version;
    const char *dlname;
    size_t offset;
} Entry;

#define CUDA_ENTRY(field, symbol, version, dlname, params)                                      \
    {symbol, version, dlname, offsetof(CudaDriver, field)},
static const Entry boot_entries[] = {CUDA_DRIVER_BOOT(CUDA_ENTRY)};
static const Entry entries[] = {CUDA_DRIVER_FUNCTIONS(CUDA_ENTRY)};
#undef CUDA_ENTRY

astitch_status cuda_status_of(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS:
        return ASTITCH_OK;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return ASTITCH_ERR_MEMORY;
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_INVALID_SOURCE:
        return ASTITCH_ERR_COMPILE;
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
        return ASTITCH_ERR_UNSUPPORTED;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_STUB_LIBRARY:
        return ASTITCH_ERR_NO_DEVICE;
    default:
        return ASTITCH_ERR_DEVICE;
    }
}

void cuda_error_text(const CudaDriver *d, CUresult r, char *buf, size_t len)
{
    const char *name = NULL, *text = NULL;
    if (d && d->GetErrorName && d->GetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (d && d->GetErrorString && d->GetErrorString(r, &text) != CUDA_SUCCESS)
        text = NULL;
    if (name && text)
        snprintf(buf, len, "%s (%s)", name, text);
    else if (name)
        snprintf(buf, len, "%s", name);
    else
        snprintf(buf, len, "CUDA error %d", (int)r);
}

astitch_status cuda_fail(astitch_context *ctx, const CudaDriver *d, CUresult r, const char *fmt,
                         ...)
{
    char what[768], err[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    cuda_error_text(d, r, err, sizeof err);
    astitch_status s = cuda_status_of(r);
    return ctx_fail(ctx, s == ASTITCH_OK ? ASTITCH_ERR_INTERNAL : s, "%s: %s%s", what, err,
                    cuda_error_is_sticky(r) ? "; the CUDA context is now unusable: every later GPU "
                                              "call in this process fails, restart it"
                                            : "");
}

bool cuda_error_is_sticky(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
        return true;
    default:
        return false;
    }
}

/* Resolves e into d: through cuGetProcAddress_v2 when the driver has it, else by dlsym of the
 * versioned name. Returns false when the driver has no such function. */
static bool resolve(CudaDriver *d, GetProcAddressFn gpa, const Entry *e)
{
    void *p = NULL;
    if (gpa) {
        CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        if (gpa(e->symbol, &p, e->version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found) !=
                CUDA_SUCCESS ||
            found != CU_GET_PROC_ADDRESS_SUCCESS)
            p = NULL;
    }
    if (!p)
        p = dlsym(d->lib, e->dlname);
    if (!p)
        return false;
    /* POSIX guarantees that a data pointer from dlsym converts to a function pointer. */
    memcpy((char *)d + e->offset, &p, sizeof p);
    return true;
}

/* Records ASTITCH_ERR_NO_DEVICE with the message from fmt (and the driver's error for r unless
 * r is CUDA_SUCCESS), closes d, and returns the status. */
static astitch_status open_fail(astitch_context *ctx, CudaDriver *d, CUresult r, const char *fmt,
                                ...) __attribute__((format(printf, 4, 5)));
static astitch_status open_fail(astitch_context *ctx, CudaDriver *d, CUresult r, const char *fmt,
                                ...)
{
    char what[768], err[256] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (r != CUDA_SUCCESS)
        cuda_error_text(d, r, err, sizeof err);
    ctx_fail(ctx, ASTITCH_ERR_NO_DEVICE, "%s%s%s", what, *err ? ": " : "", err);
    cuda_driver_close(d);
    return ASTITCH_ERR_NO_DEVICE;
}

astitch_status cuda_driver_open(astitch_context *ctx, CudaDriver *d)
{
    memset(d, 0, sizeof *d);
    const char *path = config_libcuda();
    d->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!d->lib) {
        const char *why = dlerror();
        return ctx_fail(ctx, ASTITCH_ERR_NO_DEVICE, "no CUDA driver: %s not found (%s)", path,
                        why ? why : "no reason given");
    }
    GetProcAddressFn gpa = NULL;
    void *p = dlsym(d->lib, "cuGetProcAddress_v2");
    memcpy(&gpa, &p, sizeof p);

    for (size_t i = 0; i < sizeof boot_entries / sizeof *boot_entries; i++)
        if (!resolve(d, gpa, &boot_entries[i]))
            return open_fail(ctx, d, CUDA_SUCCESS,
                             "no CUDA driver: %s does not provide %s", path,
                             boot_entries[i].symbol);
    CUresult r = d->Init(0);
    if (r != CUDA_SUCCESS)
        return open_fail(ctx, d, r, "no CUDA device: cuInit failed (driver %s)", path);
    if (d->DriverGetVersion(&d->version) != CUDA_SUCCESS)
        d->version = 0;
    r = d->DeviceGetCount(&d->device_count);
    if (r != CUDA_SUCCESS)
        return open_fail(ctx, d, r, "no CUDA device: cuDeviceGetCount failed (driver %s)", path);
    if (d->device_count < 1)
        return open_fail(ctx, d, CUDA_SUCCESS, "no CUDA device: the driver (%s) reports 0 devices",
                         path);
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++)
        if (!resolve(d, gpa, &entries[i]))
            return open_fail(ctx, d, CUDA_SUCCESS,
                             "CUDA driver %d.%d (%s) too old: it lacks %s at version %d; astitch "
                             "needs a CUDA 12 or newer driver",
                             d->version / 1000, d->version % 1000 / 10, path, entries[i].symbol,
                             entries[i].version);
    return ASTITCH_OK;
}

void cuda_driver_close(CudaDriver *d)
{
    if (!d)
        return;
    if (d->lib)
        dlclose(d->lib);
    memset(d, 0, sizeof *d);
}
