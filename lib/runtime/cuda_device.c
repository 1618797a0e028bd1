/* cuda_device.c: a CUDA device on its primary context, and its model from the driver. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_driver.h"
#include "ir/ir.h"

/* Registers are granted per warp in units of 256 on every architecture since Maxwell: 8 per
 * thread. A thread may hold at most 255 registers (compute capability 3.5 and later); the
 * driver reports neither figure. */
#define REG_ALLOC_UNIT_PER_THREAD 8
#define MAX_REGS_PER_THREAD 255

/* Reads the attributes of dev->device into dev->info. */
static astitch_status read_info(astitch_context *ctx, CudaDevice *dev)
{
    const CudaDriver *d = &dev->drv;
    CudaDeviceInfo *in = &dev->info;
    static const struct {
        CUdevice_attribute attr;
        const char *name;
    } want[] = {
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major"},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor"},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count"},
        {CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size"},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block"},
        {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, "max threads per multiprocessor"},
        {CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, "max blocks per multiprocessor"},
        {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, "registers per multiprocessor"},
        {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, "registers per block"},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "shared memory per block"},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "opt-in shared memory per block"},
        {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, "shared memory per SM"},
        {CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, "reserved shared memory per block"},
        {CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "L2 cache size"},
        {CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, "cooperative launch"},
    };
    int v[sizeof want / sizeof *want];
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        CUresult r = d->DeviceGetAttribute(&v[i], want[i].attr, dev->device);
        if (r != CUDA_SUCCESS)
            return cuda_fail(ctx, d, r, "cuDeviceGetAttribute(%s) of device %d", want[i].name,
                             dev->ordinal);
    }
    int k = 0;
    in->cc_major = v[k++];
    in->cc_minor = v[k++];
    in->sm_count = v[k++];
    in->warp_size = v[k++];
    in->max_threads_per_block = v[k++];
    in->max_threads_per_sm = v[k++];
    in->max_blocks_per_sm = v[k++];
    in->regs_per_sm = v[k++];
    in->regs_per_block = v[k++];
    in->shared_per_block = (size_t)v[k++];
    in->shared_per_block_optin = (size_t)v[k++];
    in->shared_per_sm = (size_t)v[k++];
    in->shared_reserved = (size_t)v[k++];
    in->l2_bytes = (size_t)v[k++];
    in->cooperative_launch = v[k++] != 0;

    CUresult r = d->DeviceGetName(in->name, (int)sizeof in->name, dev->device);
    if (r != CUDA_SUCCESS)
        return cuda_fail(ctx, d, r, "cuDeviceGetName of device %d", dev->ordinal);
    in->name[sizeof in->name - 1] = '\0';
    r = d->DeviceTotalMem(&in->total_memory, dev->device);
    if (r != CUDA_SUCCESS)
        return cuda_fail(ctx, d, r, "cuDeviceTotalMem of device %d", dev->ordinal);
    return ASTITCH_OK;
}

astitch_status cuda_device_open(astitch_context *ctx, int ordinal, CudaDevice **out)
{
    *out = NULL;
    CUresult r;
    CudaDevice *dev = calloc(1, sizeof *dev);
    if (!dev)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "cuda_device_open: out of memory");
    astitch_status s = cuda_driver_open(ctx, &dev->drv);
    if (s != ASTITCH_OK) {
        free(dev);
        return s;
    }
    const CudaDriver *d = &dev->drv;
    dev->ordinal = ordinal;
    if (ordinal < 0 || ordinal >= d->device_count) {
        s = ctx_fail(ctx, ASTITCH_ERR_NO_DEVICE, "no CUDA device %d: the driver has %d device%s",
                     ordinal, d->device_count, d->device_count == 1 ? "" : "s");
        goto fail;
    }
    r = d->DeviceGet(&dev->device, ordinal);
    if (r != CUDA_SUCCESS) {
        s = cuda_fail(ctx, d, r, "cuDeviceGet(%d)", ordinal);
        goto fail;
    }
    s = read_info(ctx, dev);
    if (s != ASTITCH_OK)
        goto fail;
    r = d->DevicePrimaryCtxRetain(&dev->primary, dev->device);
    if (r != CUDA_SUCCESS) {
        s = cuda_fail(ctx, d, r, "cuDevicePrimaryCtxRetain of device %d (%s)", ordinal,
                      dev->info.name);
        dev->primary = NULL;
        goto fail;
    }
    *out = dev;
    return ASTITCH_OK;
fail:
    cuda_device_close(dev);
    return s;
}

void cuda_device_close(CudaDevice *dev)
{
    if (!dev)
        return;
    if (dev->primary)
        dev->drv.DevicePrimaryCtxRelease(dev->device);
    cuda_driver_close(&dev->drv);
    free(dev);
}

size_t cuda_l2_flush_bytes(const CudaDevice *dev)
{
    return 2 * (dev->info.l2_bytes ? dev->info.l2_bytes : ((size_t)64 << 20));
}

void cuda_device_model(const CudaDevice *dev, astitch_device *out)
{
    const CudaDeviceInfo *in = &dev->info;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%.*s", (int)sizeof out->name - 1, in->name);
    out->sm_version = in->cc_major * 10 + in->cc_minor;
    out->sm_count = in->sm_count;
    out->warp_size = in->warp_size;
    out->max_threads_per_block = in->max_threads_per_block;
    out->max_threads_per_sm = in->max_threads_per_sm;
    out->max_blocks_per_sm = in->max_blocks_per_sm;
    out->regs_per_sm = in->regs_per_sm;
    out->max_regs_per_thread = MAX_REGS_PER_THREAD;
    out->reg_alloc_unit = REG_ALLOC_UNIT_PER_THREAD;
    out->shared_per_block = (int64_t)in->shared_per_block_optin;
    out->shared_per_sm = (int64_t)in->shared_per_sm;
    out->l2_bytes = (int64_t)in->l2_bytes;
}

astitch_status cuda_enter(astitch_context *ctx, const CudaDevice *dev)
{
    CUresult r = dev->drv.CtxPushCurrent(dev->primary);
    if (r != CUDA_SUCCESS)
        return cuda_fail(ctx, &dev->drv, r, "cuCtxPushCurrent (primary context of device %d)",
                         dev->ordinal);
    return ASTITCH_OK;
}

void cuda_leave(const CudaDevice *dev)
{
    CUcontext popped;
    dev->drv.CtxPopCurrent(&popped);
}
