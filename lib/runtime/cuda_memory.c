/* cuda_memory.c: device buffers, copies, memsets, streams and events on the primary context. */
#include <stdio.h>

#include "cuda_driver.h"
#include "ir/ir.h"

/* Each call below is one driver call between cuda_enter and cuda_leave. */
#define ENTER(ctx, dev)                                                                         \
    do {                                                                                        \
        astitch_status entered_ = cuda_enter(ctx, dev);                                         \
        if (entered_ != ASTITCH_OK)                                                             \
            return entered_;                                                                    \
    } while (0)

/* "1.5 GiB" style size for messages. */
static const char *human_bytes(size_t n, char *buf, size_t len)
{
    static const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)n;
    int u = 0;
    while (v >= 1024.0 && u < 6) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%zu bytes", n);
    else
        snprintf(buf, len, "%.1f %s", v, unit[u]);
    return buf;
}

astitch_status cuda_alloc(astitch_context *ctx, const CudaDevice *dev, size_t bytes,
                          CUdeviceptr *out)
{
    *out = 0;
    if (bytes == 0)
        return ASTITCH_OK;
    ENTER(ctx, dev);
    CUdeviceptr p = 0;
    CUresult r = dev->drv.MemAlloc(&p, bytes);
    cuda_leave(dev);
    if (r != CUDA_SUCCESS) {
        char want[32], total[32];
        return cuda_fail(ctx, &dev->drv, r,
                         "cuMemAlloc of %zu bytes (%s) on device %d (%s, %s in all)", bytes,
                         human_bytes(bytes, want, sizeof want), dev->ordinal, dev->info.name,
                         human_bytes(dev->info.total_memory, total, sizeof total));
    }
    *out = p;
    return ASTITCH_OK;
}

void cuda_free(const CudaDevice *dev, CUdeviceptr p)
{
    if (!p || cuda_enter(NULL, dev) != ASTITCH_OK)
        return;
    dev->drv.MemFree(p);
    cuda_leave(dev);
}

astitch_status cuda_mem_info(astitch_context *ctx, const CudaDevice *dev, size_t *free_bytes,
                             size_t *total_bytes)
{
    ENTER(ctx, dev);
    CUresult r = dev->drv.MemGetInfo(free_bytes, total_bytes);
    cuda_leave(dev);
    return r == CUDA_SUCCESS ? ASTITCH_OK : cuda_fail(ctx, &dev->drv, r, "cuMemGetInfo");
}

astitch_status cuda_copy_to_device(astitch_context *ctx, const CudaDevice *dev, CUdeviceptr dst,
                                   const void *src, size_t bytes, CUstream s)
{
    if (bytes == 0)
        return ASTITCH_OK;
    ENTER(ctx, dev);
    CUresult r = dev->drv.MemcpyHtoDAsync(dst, src, bytes, s);
    cuda_leave(dev);
    return r == CUDA_SUCCESS ? ASTITCH_OK
                             : cuda_fail(ctx, &dev->drv, r,
                                         "cuMemcpyHtoDAsync of %zu bytes to device address 0x%llx",
                                         bytes, (unsigned long long)dst);
}

astitch_status cuda_copy_to_host(astitch_context *ctx, const CudaDevice *dev, void *dst,
                                 CUdeviceptr src, size_t bytes, CUstream s)
{
    if (bytes == 0)
        return ASTITCH_OK;
    ENTER(ctx, dev);
    CUresult r = dev->drv.MemcpyDtoHAsync(dst, src, bytes, s);
    cuda_leave(dev);
    return r == CUDA_SUCCESS
               ? ASTITCH_OK
               : cuda_fail(ctx, &dev->drv, r,
                           "cuMemcpyDtoHAsync of %zu bytes from device address 0x%llx", bytes,
                           (unsigned long long)src);
}

astitch_status cuda_memset_u32(astitch_context *ctx, const CudaDevice *dev, CUdeviceptr dst,
                               uint32_t value, size_t count, CUstream s)
{
    if (count == 0)
        return ASTITCH_OK;
    ENTER(ctx, dev);
    CUresult r = dev->drv.MemsetD32Async(dst, value, count, s);
    cuda_leave(dev);
    return r == CUDA_SUCCESS ? ASTITCH_OK
                             : cuda_fail(ctx, &dev->drv, r,
                                         "cuMemsetD32Async of %zu words at device address 0x%llx",
                                         count, (unsigned long long)dst);
}

astitch_status cuda_stream_create(astitch_context *ctx, const CudaDevice *dev, CUstream *out)
{
    *out = NULL;
    ENTER(ctx, dev);
    CUresult r = dev->drv.StreamCreate(out, CU_STREAM_NON_BLOCKING);
    cuda_leave(dev);
    if (r != CUDA_SUCCESS) {
        *out = NULL;
        return cuda_fail(ctx, &dev->drv, r, "cuStreamCreate");
    }
    return ASTITCH_OK;
}

void cuda_stream_destroy(const CudaDevice *dev, CUstream s)
{
    if (!s || cuda_enter(NULL, dev) != ASTITCH_OK)
        return;
    dev->drv.StreamDestroy(s);
    cuda_leave(dev);
}

astitch_status cuda_stream_sync(astitch_context *ctx, const CudaDevice *dev, CUstream s)
{
    ENTER(ctx, dev);
    CUresult r = dev->drv.StreamSynchronize(s);
    cuda_leave(dev);
    return r == CUDA_SUCCESS ? ASTITCH_OK
                             : cuda_fail(ctx, &dev->drv, r, "cuStreamSynchronize on device %d",
                                         dev->ordinal);
}

astitch_status cuda_event_create(astitch_context *ctx, const CudaDevice *dev, CUevent *out)
{
    *out = NULL;
    ENTER(ctx, dev);
    CUresult r = dev->drv.EventCreate(out, CU_EVENT_DEFAULT);
    cuda_leave(dev);
    if (r != CUDA_SUCCESS) {
        *out = NULL;
        return cuda_fail(ctx, &dev->drv, r, "cuEventCreate");
    }
    return ASTITCH_OK;
}

void cuda_event_destroy(const CudaDevice *dev, CUevent e)
{
    if (!e || cuda_enter(NULL, dev) != ASTITCH_OK)
        return;
    dev->drv.EventDestroy(e);
    cuda_leave(dev);
}

astitch_status cuda_event_record(astitch_context *ctx, const CudaDevice *dev, CUevent e,
                                 CUstream s)
{
    ENTER(ctx, dev);
    CUresult r = dev->drv.EventRecord(e, s);
    cuda_leave(dev);
    return r == CUDA_SUCCESS ? ASTITCH_OK : cuda_fail(ctx, &dev->drv, r, "cuEventRecord");
}

astitch_status cuda_event_elapsed(astitch_context *ctx, const CudaDevice *dev, CUevent start,
                                  CUevent end, float *ms)
{
    ENTER(ctx, dev);
    CUresult r = dev->drv.EventSynchronize(end);
    if (r == CUDA_SUCCESS)
        r = dev->drv.EventElapsedTime(ms, start, end);
    cuda_leave(dev);
    return r == CUDA_SUCCESS
               ? ASTITCH_OK
               : cuda_fail(ctx, &dev->drv, r, "cuEventSynchronize/cuEventElapsedTime");
}
