/*
 * cuda_driver.h: the CUDA side of lib/runtime, private to libastitch. A map:
 *
 *   cuda_driver.c  dlopen of libcuda.so.1, the function table, CUresult -> astitch_status
 *   cuda_device.c  device open/close on the primary context, the device model from the driver
 *   cuda_memory.c  device buffers, copies, memsets, streams, events
 *   cuda_module.c  PTX modules (the driver's JIT, or nvJitLink's cubins) with the compiler's
 *                  logs, kernels (dynamic shared memory, occupancy),
 *                  plain and cooperative launches, the workspace (scratch + barrier counters)
 *
 * libcuda is never linked: the driver is opened at run time and every function is reached
 * through a CudaDriver table, so libastitch loads and runs (host target) where no driver is
 * installed. cuda.h gives the types when the toolkit is present (ASTITCH_HAVE_CUDA_H);
 * cuda_min.h otherwise.
 *
 * Contexts: everything runs in the device's primary context (cuDevicePrimaryCtxRetain), the one
 * the CUDA runtime and frameworks use, so their device pointers and streams are valid in our
 * launches. Each call below makes it current for its own duration (push/pop) and leaves the
 * caller's current context as it found it.
 *
 * Errors: a driver failure becomes ASTITCH_ERR_DEVICE with the call and the driver's error name
 * and text; CUDA_ERROR_OUT_OF_MEMORY becomes ASTITCH_ERR_MEMORY naming the bytes asked for;
 * a missing driver, a failed cuInit or zero devices ASTITCH_ERR_NO_DEVICE.
 *
 * Threads: a CudaDevice and the modules and kernels made from it are read-only after creation
 * and may be used by several threads at once (the driver is thread-safe); a CudaWorkspace
 * belongs to one user at a time. There is no process-wide state: each CudaDevice holds its own
 * dlopen reference (the library is opened with RTLD_NODELETE, so it stays mapped for the
 * driver's own threads after the last close).
 */
#ifndef ASTITCH_CUDA_DRIVER_H
#define ASTITCH_CUDA_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "astitch_config.h"
#ifdef ASTITCH_HAVE_CUDA_H
#include ASTITCH_CUDA_H /* the toolkit's cuda.h, by its full path */
#else
#include "cuda_min.h"
#endif

#include "astitch/astitch.h"
#include "astitch/plan.h"
#include "nvjitlink.h"

/* The driver functions astitch calls, X(field, symbol, version, dlsym name, parameters).
 * symbol and version go to cuGetProcAddress_v2; the version fixes the ABI, so each is asked
 * for at a version whose signature is the one written here (cuCtxSynchronize, for instance,
 * takes a context from 13000 on). The dlsym name serves drivers before 12.0, which lack
 * cuGetProcAddress_v2. BOOT is resolved and called before the rest. The runtime itself only
 * asks whether a stream is capturing (exec_cuda.c); beginning a capture and the graph functions
 * serve the tests, which capture runs the way a framework does. */
#define CUDA_DRIVER_BOOT(X)                                                                       \
    X(Init, "cuInit", 12000, "cuInit", (unsigned int flags))                                      \
    X(DriverGetVersion, "cuDriverGetVersion", 12000, "cuDriverGetVersion", (int *version))        \
    X(DeviceGetCount, "cuDeviceGetCount", 12000, "cuDeviceGetCount", (int *count))                \
    X(GetErrorName, "cuGetErrorName", 12000, "cuGetErrorName", (CUresult r, const char **s))      \
    X(GetErrorString, "cuGetErrorString", 12000, "cuGetErrorString", (CUresult r, const char **s))

#define CUDA_DRIVER_FUNCTIONS(X)                                                                  \
    X(DeviceGet, "cuDeviceGet", 12000, "cuDeviceGet", (CUdevice *dev, int ordinal))               \
    X(DeviceGetName, "cuDeviceGetName", 12000, "cuDeviceGetName", (char *s, int len, CUdevice d)) \
    X(DeviceTotalMem, "cuDeviceTotalMem", 12000, "cuDeviceTotalMem_v2",                           \
      (size_t *bytes, CUdevice d))                                                                \
    X(DeviceGetAttribute, "cuDeviceGetAttribute", 12000, "cuDeviceGetAttribute",                  \
      (int *v, CUdevice_attribute a, CUdevice d))                                                 \
    X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", 12000, "cuDevicePrimaryCtxRetain",      \
      (CUcontext *c, CUdevice d))                                                                 \
    X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease", 12000,                                \
      "cuDevicePrimaryCtxRelease_v2", (CUdevice d))                                               \
    X(CtxPushCurrent, "cuCtxPushCurrent", 12000, "cuCtxPushCurrent_v2", (CUcontext c))            \
    X(CtxPopCurrent, "cuCtxPopCurrent", 12000, "cuCtxPopCurrent_v2", (CUcontext * c))             \
    X(CtxSynchronize, "cuCtxSynchronize", 12000, "cuCtxSynchronize", (void))                      \
    X(MemGetInfo, "cuMemGetInfo", 12000, "cuMemGetInfo_v2", (size_t *free, size_t *total))        \
    X(MemAlloc, "cuMemAlloc", 12000, "cuMemAlloc_v2", (CUdeviceptr *p, size_t bytes))             \
    X(MemFree, "cuMemFree", 12000, "cuMemFree_v2", (CUdeviceptr p))                               \
    X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync", 12000, "cuMemcpyDtoDAsync_v2",                        \
      (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s))                               \
    X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync", 12000, "cuMemcpyHtoDAsync_v2",                        \
      (CUdeviceptr dst, const void *src, size_t bytes, CUstream s))                               \
    X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync", 12000, "cuMemcpyDtoHAsync_v2",                        \
      (void *dst, CUdeviceptr src, size_t bytes, CUstream s))                                     \
    X(MemsetD32Async, "cuMemsetD32Async", 12000, "cuMemsetD32Async",                              \
      (CUdeviceptr dst, unsigned int value, size_t count, CUstream s))                            \
    X(ModuleLoadDataEx, "cuModuleLoadDataEx", 12000, "cuModuleLoadDataEx",                        \
      (CUmodule * m, const void *image, unsigned int n, CUjit_option *opt, void **val))           \
    X(ModuleUnload, "cuModuleUnload", 12000, "cuModuleUnload", (CUmodule m))                      \
    X(ModuleGetFunction, "cuModuleGetFunction", 12000, "cuModuleGetFunction",                     \
      (CUfunction * f, CUmodule m, const char *name))                                             \
    X(FuncGetAttribute, "cuFuncGetAttribute", 12000, "cuFuncGetAttribute",                        \
      (int *v, CUfunction_attribute a, CUfunction f))                                             \
    X(FuncSetAttribute, "cuFuncSetAttribute", 12000, "cuFuncSetAttribute",                        \
      (CUfunction f, CUfunction_attribute a, int v))                                              \
    X(OccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor",   \
      12000, "cuOccupancyMaxActiveBlocksPerMultiprocessor",                                       \
      (int *blocks, CUfunction f, int block, size_t dynamic_shared))                              \
    X(LaunchKernelEx, "cuLaunchKernelEx", 12000, "cuLaunchKernelEx",                              \
      (const CUlaunchConfig *config, CUfunction f, void **params, void **extra))                  \
    X(StreamCreate, "cuStreamCreate", 12000, "cuStreamCreate", (CUstream * s, unsigned int flags))\
    X(StreamDestroy, "cuStreamDestroy", 12000, "cuStreamDestroy_v2", (CUstream s))                \
    X(StreamSynchronize, "cuStreamSynchronize", 12000, "cuStreamSynchronize", (CUstream s))       \
    X(StreamIsCapturing, "cuStreamIsCapturing", 12000, "cuStreamIsCapturing",                     \
      (CUstream s, CUstreamCaptureStatus *status))                                                \
    X(StreamBeginCapture, "cuStreamBeginCapture", 12000, "cuStreamBeginCapture_v2",               \
      (CUstream s, CUstreamCaptureMode mode))                                                     \
    X(StreamEndCapture, "cuStreamEndCapture", 12000, "cuStreamEndCapture",                        \
      (CUstream s, CUgraph *graph))                                                               \
    X(GraphInstantiate, "cuGraphInstantiateWithFlags", 12000, "cuGraphInstantiateWithFlags",      \
      (CUgraphExec * exec, CUgraph graph, unsigned long long flags))                              \
    X(GraphLaunch, "cuGraphLaunch", 12000, "cuGraphLaunch", (CUgraphExec exec, CUstream s))       \
    X(GraphExecDestroy, "cuGraphExecDestroy", 12000, "cuGraphExecDestroy", (CUgraphExec exec))    \
    X(GraphDestroy, "cuGraphDestroy", 12000, "cuGraphDestroy", (CUgraph graph))                   \
    X(EventCreate, "cuEventCreate", 12000, "cuEventCreate", (CUevent * e, unsigned int flags))    \
    X(EventRecord, "cuEventRecord", 12000, "cuEventRecord", (CUevent e, CUstream s))              \
    X(EventSynchronize, "cuEventSynchronize", 12000, "cuEventSynchronize", (CUevent e))           \
    X(EventElapsedTime, "cuEventElapsedTime", 12080, "cuEventElapsedTime",                        \
      (float *ms, CUevent start, CUevent end))                                                    \
    X(EventDestroy, "cuEventDestroy", 12000, "cuEventDestroy_v2", (CUevent e))

typedef struct CudaDriver {
    void *lib;        /* dlopen handle */
    int version;      /* cuDriverGetVersion: 13000 for CUDA 13.0 */
    int device_count; /* >= 1 once open */
#define CUDA_FIELD(field, symbol, version, dlname, params) CUresult (*field) params;
    CUDA_DRIVER_BOOT(CUDA_FIELD)
    CUDA_DRIVER_FUNCTIONS(CUDA_FIELD)
#undef CUDA_FIELD
} CudaDriver;

/* What the driver tells about a device, beyond astitch_device (cuda_device_model). */
typedef struct CudaDeviceInfo {
    char name[256];
    int cc_major, cc_minor;         /* compute capability */
    int sm_count;
    int warp_size;
    int max_threads_per_block;
    int max_threads_per_sm;
    int max_blocks_per_sm;
    int regs_per_sm;                /* 32-bit registers */
    int regs_per_block;
    size_t shared_per_block;        /* bytes a block gets without the opt-in: 48 KiB */
    size_t shared_per_block_optin;  /* bytes a block may have with the opt-in attribute */
    size_t shared_per_sm;
    size_t shared_reserved;         /* bytes the system takes from each block's share on an SM */
    size_t l2_bytes;
    size_t total_memory;            /* bytes of device memory */
    bool cooperative_launch;        /* supports cooperative launches (grid barriers) */
} CudaDeviceInfo;

typedef struct CudaDevice {
    CudaDriver drv;
    int ordinal;
    CUdevice device;
    CUcontext primary; /* retained primary context */
    CudaDeviceInfo info;
} CudaDevice;

/* cuda_driver.c */
/* Opens the driver into *d: dlopen of $ASTITCH_LIBCUDA or "libcuda.so.1", cuInit, a device
 * count of at least 1, then every function of the table. Returns ASTITCH_ERR_NO_DEVICE (no
 * library, cuInit failed, no device, a driver too old for a function we need) with the reason
 * recorded on ctx; *d is then left closed. */
astitch_status cuda_driver_open(astitch_context *ctx, CudaDriver *d);
/* Drops d's library reference and zeroes d; accepts a closed or zeroed d. */
void cuda_driver_close(CudaDriver *d);
/* The status a driver result maps to: OUT_OF_MEMORY -> ERR_MEMORY, PTX and JIT failures ->
 * ERR_COMPILE, COOPERATIVE_LAUNCH_TOO_LARGE -> ERR_UNSUPPORTED (the caller splits its plan),
 * no usable device (none, unavailable, the stub library) -> ERR_NO_DEVICE, anything else ->
 * ERR_DEVICE; CUDA_SUCCESS -> ASTITCH_OK. */
astitch_status cuda_status_of(CUresult r);
/* Records "<what>: CUDA_ERROR_NAME (driver's text)" on ctx, where <what> is formatted from fmt,
 * and returns cuda_status_of(r). d may be NULL or lack the error functions: the name is then
 * "CUDA error N". */
/* True for the errors that leave the context unusable (a kernel faulted): cuda_fail says so. */
bool cuda_error_is_sticky(CUresult r);
astitch_status cuda_fail(astitch_context *ctx, const CudaDriver *d, CUresult r, const char *fmt,
                         ...) __attribute__((format(printf, 4, 5)));
/* Writes "CUDA_ERROR_NAME (driver's text)" for r into buf, as cuda_fail does. */
void cuda_error_text(const CudaDriver *d, CUresult r, char *buf, size_t len);

/* cuda_device.c */
/* Opens device `ordinal`: the driver, the retained primary context, CudaDeviceInfo. Returns
 * ASTITCH_ERR_NO_DEVICE as cuda_driver_open does, or for an ordinal the driver does not have. */
astitch_status cuda_device_open(astitch_context *ctx, int ordinal, CudaDevice **out);
/* Releases the primary context and the driver; accepts NULL. Every module, buffer, stream and
 * event made from dev must be gone. */
void cuda_device_close(CudaDevice *dev);
/* The planner's model of dev (name, SMs, registers, shared memory with opt-in, ...). */
void cuda_device_model(const CudaDevice *dev, astitch_device *out);
/* The bytes of a fill that evicts dev's L2 before a timed run: twice the L2 (an L2 of 64 MiB
 * assumed where the driver gives no size). */
size_t cuda_l2_flush_bytes(const CudaDevice *dev);
/* Makes dev's primary context current on this thread (push); pair with cuda_leave. */
astitch_status cuda_enter(astitch_context *ctx, const CudaDevice *dev);
/* Restores the context that was current before cuda_enter (pop). */
void cuda_leave(const CudaDevice *dev);

/* cuda_memory.c. A stream argument may be NULL: the legacy default stream. Copies and memsets
 * are asynchronous on the stream (copies from pageable host memory may return only once the
 * source has been read); cuda_stream_sync waits for them. */
/* Allocates bytes of device memory (256-byte aligned) into *out; 0 bytes gives *out = 0. */
astitch_status cuda_alloc(astitch_context *ctx, const CudaDevice *dev, size_t bytes,
                          CUdeviceptr *out);
/* Frees p (0 is ignored). Driver errors, which only earlier asynchronous failures can cause, are
 * dropped, as free() would. */
void cuda_free(const CudaDevice *dev, CUdeviceptr p);
/* Free and total bytes of device memory, as the driver counts them now. */
astitch_status cuda_mem_info(astitch_context *ctx, const CudaDevice *dev, size_t *free_bytes,
                             size_t *total_bytes);
astitch_status cuda_copy_to_device(astitch_context *ctx, const CudaDevice *dev, CUdeviceptr dst,
                                   const void *src, size_t bytes, CUstream s);
astitch_status cuda_copy_to_host(astitch_context *ctx, const CudaDevice *dev, void *dst,
                                 CUdeviceptr src, size_t bytes, CUstream s);
/* Sets count 32-bit words at dst (4-byte aligned) to value. */
astitch_status cuda_memset_u32(astitch_context *ctx, const CudaDevice *dev, CUdeviceptr dst,
                               uint32_t value, size_t count, CUstream s);
/* A non-blocking stream (it does not wait for the legacy default stream). */
astitch_status cuda_stream_create(astitch_context *ctx, const CudaDevice *dev, CUstream *out);
void cuda_stream_destroy(const CudaDevice *dev, CUstream s); /* accepts NULL */
/* Waits for everything queued on s; an earlier asynchronous failure is reported here. */
astitch_status cuda_stream_sync(astitch_context *ctx, const CudaDevice *dev, CUstream s);
astitch_status cuda_event_create(astitch_context *ctx, const CudaDevice *dev, CUevent *out);
void cuda_event_destroy(const CudaDevice *dev, CUevent e); /* accepts NULL */
astitch_status cuda_event_record(astitch_context *ctx, const CudaDevice *dev, CUevent e,
                                 CUstream s);
/* Waits for `end` and gives the milliseconds between the two recorded events. */
astitch_status cuda_event_elapsed(astitch_context *ctx, const CudaDevice *dev, CUevent start,
                                  CUevent end, float *ms);

/* cuda_module.c */
typedef struct CudaModule CudaModule;

/* Loads NUL-terminated PTX text as a module of dev. Its machine code comes, per the context's
 * switch ptx_jit (config.h): unset, from the cubin of a job that ptxas compiled ahead for this
 * text (nvjitlink.h) where there is one and the driver loads it, else from the driver's JIT
 * (cuModuleLoadDataEx of the PTX); "driver", from the driver's JIT; "nvjitlink", from
 * nvJitLink, a job's cubin or compiled in this thread. `what` names the module in messages.
 * A failed
 * compile returns ASTITCH_ERR_COMPILE with the compiler's error log (and the driver's info
 * log) in the message; a bad ptx_jit ASTITCH_ERR_ARGUMENT; ptx_jit "nvjitlink" without
 * nvJitLink ASTITCH_ERR_UNSUPPORTED. The module refers to dev, which must outlive it. */
astitch_status cuda_module_load(astitch_context *ctx, const CudaDevice *dev, const char *ptx,
                                const char *what, CudaModule **out);
/* Whether cuda_module_load under ctx's switches takes the cubins of jobs compiled ahead
 * (cubin_job_start), and by which compiler (*by): nvJitLink under "nvjitlink"; the ptxas
 * program unset, where it is found and the driver has not refused one of its cubins. */
bool cuda_module_compiles_ahead(astitch_context *ctx, CubinCompiler *by);
/* Forgets that the driver refused a cubin of ptxas (for tests). */
void cuda_module_reset_refusal(void);
/* Unloads m; accepts NULL. Kernels got from m become invalid. */
void cuda_module_unload(CudaModule *m);
/* The compiler's info log of the load (registers, spills per function); "" if none. */
const char *cuda_module_log(const CudaModule *m);

/* A kernel of a module, prepared for one block size and dynamic shared memory size. */
typedef struct CudaKernel {
    CUfunction fn;
    char name[128];
    int block;                 /* threads per block */
    size_t dynamic_shared;     /* bytes per block */
    int regs;                  /* registers per thread, as compiled */
    size_t static_shared;      /* bytes per block, declared in the kernel */
    size_t local_bytes;        /* local memory (spills, stack) per thread */
    int max_block;             /* most threads per block the compiled function allows */
    int blocks_per_sm;         /* occupancy at block and dynamic_shared, >= 1 */
    int max_coresident;        /* blocks_per_sm x SMs: the largest grid a grid barrier allows */
} CudaKernel;

/* Finds kernel `name` in m and prepares it for `block` threads and `dynamic_shared` bytes:
 * enables dynamic shared memory above 48 KiB (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
 * and measures occupancy. ASTITCH_ERR_UNSUPPORTED when the shared memory exceeds the device's
 * opt-in limit or no block of that shape fits on an SM; ASTITCH_ERR_DEVICE for a missing name. */
astitch_status cuda_kernel_get(astitch_context *ctx, const CudaModule *m, const char *name,
                               int block, size_t dynamic_shared, CudaKernel *out);

typedef struct CudaLaunch {
    const CudaKernel *kernel;
    unsigned int grid;     /* blocks, >= 1 */
    void **args;           /* a pointer to each argument's value, as cuLaunchKernelEx takes */
    bool cooperative;      /* the kernel has grid barriers: every block must be co-resident */
    CUstream stream;       /* NULL: the legacy default stream */
} CudaLaunch;

/* Queues the launch on l->stream. A cooperative launch is checked against
 * kernel->max_coresident first and launched with CU_LAUNCH_ATTRIBUTE_COOPERATIVE, so a grid
 * that cannot be co-resident fails at once instead of hanging: ASTITCH_ERR_UNSUPPORTED, after
 * which the caller runs its plan as parts cut at the grid barriers. Errors inside the kernel show at
 * the next synchronization. */
astitch_status cuda_launch(astitch_context *ctx, const CudaDevice *dev, const CudaLaunch *l);

/* Device scratch memory and grid-barrier counters (u32), allocated once and grown on demand. */
typedef struct CudaWorkspace {
    const CudaDevice *dev;
    CUdeviceptr scratch;
    size_t scratch_bytes;
    CUdeviceptr counters;
    int ncounters;
} CudaWorkspace;

/* An empty workspace on dev; nothing is allocated until cuda_workspace_reserve. */
void cuda_workspace_init(CudaWorkspace *ws, const CudaDevice *dev);
/* Makes ws hold at least scratch_bytes of scratch and ncounters counters. Growing waits for the
 * device's queued work (cuCtxSynchronize) before freeing the old buffer, since kernels still
 * queued may use it; the contents are not kept. On failure (ASTITCH_ERR_MEMORY naming the
 * bytes) the part that could not grow is left empty and nothing is leaked. */
astitch_status cuda_workspace_reserve(astitch_context *ctx, CudaWorkspace *ws,
                                      size_t scratch_bytes, int ncounters);
/* Zeroes the first n counters on s; call before each launch that uses grid barriers. */
astitch_status cuda_workspace_clear_counters(astitch_context *ctx, CudaWorkspace *ws, int n,
                                             CUstream s);
/* Frees what ws holds and empties it; ws may be reserved again. Call it once the work that
 * uses the workspace has finished. */
void cuda_workspace_release(CudaWorkspace *ws);

#endif
