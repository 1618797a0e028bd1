/* cuda_module.c: PTX modules (compiled by nvJitLink or the driver's JIT), kernels, launches and
 * the workspace. */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile_clock.h"
#include "cuda_driver.h"
#include "ir/config.h"
#include "ir/ir.h"
#include "nvjitlink.h"

#define JIT_LOG_BYTES 16384

struct CudaModule {
    const CudaDevice *dev;
    CUmodule mod;
    char *log;      /* the JIT's info log, "" if none */
    char what[128]; /* the module's name for messages */
};

/* Drops trailing white space of s in place; returns s. */
static char *trim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* The module's machine code from the driver's JIT of ptx into m (m->mod, m->log). */
static astitch_status load_by_driver(astitch_context *ctx, const CudaDevice *dev, const char *ptx,
                                     CudaModule *m)
{
    char *info = calloc(1, JIT_LOG_BYTES), *err = calloc(1, JIT_LOG_BYTES);
    if (!info || !err) {
        free(info);
        free(err);
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "cuda_module_load: out of memory");
    }
    CUjit_option opt[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                          CU_JIT_LOG_VERBOSE};
    void *val[] = {info, (void *)(uintptr_t)(JIT_LOG_BYTES - 1), err,
                   (void *)(uintptr_t)(JIT_LOG_BYTES - 1), (void *)(uintptr_t)1};
    astitch_status s = cuda_enter(ctx, dev);
    if (s != ASTITCH_OK)
        goto out;
    CUresult r = dev->drv.ModuleLoadDataEx(&m->mod, ptx, sizeof opt / sizeof *opt, opt, val);
    cuda_leave(dev);
    info[JIT_LOG_BYTES - 1] = err[JIT_LOG_BYTES - 1] = '\0';
    if (r != CUDA_SUCCESS) {
        char name[256];
        cuda_error_text(&dev->drv, r, name, sizeof name);
        trim(err);
        trim(info);
        s = ctx_fail(ctx, cuda_status_of(r),
                     "module '%s': cuModuleLoadDataEx for %s (sm_%d%d): %s%s%s%s%s", m->what,
                     dev->info.name, dev->info.cc_major, dev->info.cc_minor, name,
                     *err ? "\nJIT error log:\n" : "", err, *info ? "\nJIT info log:\n" : "",
                     info);
        m->mod = NULL;
        goto out;
    }
    m->log = trim(info);
    info = NULL;
out:
    free(info);
    free(err);
    return s;
}

/* Set once the driver refused a cubin of ptxas under ptx_jit unset (a toolkit newer than the
 * driver, say): from then on the process compiles nothing ahead. */
static atomic_bool ptxas_refused;

/* Loads cubin c (freed here; its compiler named `who` in messages) into m; its log becomes
 * m's. *refused: cuModuleLoadDataEx failed on the image. */
static astitch_status load_cubin(astitch_context *ctx, const CudaDevice *dev, Cubin *c,
                                 const char *who, CudaModule *m, bool *refused)
{
    astitch_status s = cuda_enter(ctx, dev);
    CUresult r = CUDA_SUCCESS;
    if (s == ASTITCH_OK) {
        r = dev->drv.ModuleLoadDataEx(&m->mod, c->image, 0, NULL, NULL);
        cuda_leave(dev);
    }
    if (s == ASTITCH_OK && r != CUDA_SUCCESS) {
        m->mod = NULL;
        *refused = true;
        char name[256];
        cuda_error_text(&dev->drv, r, name, sizeof name);
        s = ctx_fail(ctx, cuda_status_of(r),
                     "module '%s': cuModuleLoadDataEx of %s's cubin for %s: %s%s", m->what, who,
                     dev->info.name, name,
                     r == CUDA_ERROR_INVALID_IMAGE || r == CUDA_ERROR_NO_BINARY_FOR_GPU ||
                             r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION
                         ? " (a toolkit newer than the driver? the switch ptx_jit "
                           "\"driver\" uses the driver's JIT)"
                         : "");
    }
    if (s == ASTITCH_OK) {
        m->log = c->log;
        c->log = NULL;
    }
    cubin_free(c);
    return s;
}

/* The module's machine code from nvJitLink into m: a job's cubin (nvjitlink.h), else compiled
 * in this thread. */
static astitch_status load_by_nvjitlink(astitch_context *ctx, const CudaDevice *dev,
                                        const char *ptx, CudaModule *m)
{
    int sm = dev->info.cc_major * 10 + dev->info.cc_minor;
    Cubin c;
    char why[JIT_LOG_BYTES], who[512];
    if (!cubin_job_take(ptx, sm, CUBIN_BY_NVJITLINK, &c) &&
        !nvjitlink_compile(ptx, sm, &c, why, sizeof why))
        return ctx_fail(ctx, ASTITCH_ERR_COMPILE, "module '%s': nvJitLink (%s) for %s: %s",
                        m->what, nvjitlink_path(), dev->info.name, why);
    snprintf(who, sizeof who, "nvJitLink (%s)", nvjitlink_path());
    bool refused = false;
    return load_cubin(ctx, dev, &c, who, m, &refused);
}

bool cuda_module_compiles_ahead(astitch_context *ctx, CubinCompiler *by)
{
    int mode = config_ptx_jit(&ctx->config);
    if (mode == CONFIG_PTX_JIT_NVJITLINK && nvjitlink_path()) {
        *by = CUBIN_BY_NVJITLINK;
        return true;
    }
    *by = CUBIN_BY_PTXAS;
    return mode == CONFIG_PTX_JIT_AUTO && ptxas_jit_path() && !atomic_load(&ptxas_refused);
}

void cuda_module_reset_refusal(void) { atomic_store(&ptxas_refused, false); }

astitch_status cuda_module_load(astitch_context *ctx, const CudaDevice *dev, const char *ptx,
                                const char *what, CudaModule **out)
{
    *out = NULL;
    if (!ptx)
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "cuda_module_load: no PTX text");
    int mode = config_ptx_jit(&ctx->config);
    if (mode < 0)
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT,
                        "switch ptx_jit (ASTITCH_PTX_JIT) is '%s'; it takes driver, nvjitlink, "
                        "or unset (the driver's JIT, with modules compiled ahead by ptxas)",
                        ctx->config.value[CONFIG_PTX_JIT]);
    if (mode == CONFIG_PTX_JIT_NVJITLINK && !nvjitlink_path())
        return ctx_fail(ctx, ASTITCH_ERR_UNSUPPORTED,
                        "switch ptx_jit is nvjitlink, but nvJitLink is not found; tried %s. Set "
                        "ASTITCH_NVJITLINK to the library, or unset ptx_jit for the driver's JIT",
                        nvjitlink_missing());
    CudaModule *m = calloc(1, sizeof *m);
    if (!m)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "cuda_module_load: out of memory");
    m->dev = dev;
    snprintf(m->what, sizeof m->what, "%s", what ? what : "ptx");
    astitch_status s = ASTITCH_ERR_COMPILE;
    Cubin c;
    CubinCompiler by;
    int sm = dev->info.cc_major * 10 + dev->info.cc_minor;
    double t = compile_clock_now();
    bool jit = false;
    if (mode == CONFIG_PTX_JIT_NVJITLINK) {
        s = load_by_nvjitlink(ctx, dev, ptx, m);
    } else {
        bool refused = false;
        if (cuda_module_compiles_ahead(ctx, &by) && cubin_job_take(ptx, sm, by, &c)) {
            char who[512];
            snprintf(who, sizeof who, "ptxas (%s)", ptxas_jit_path());
            s = load_cubin(ctx, dev, &c, who, m, &refused);
        }
        if (refused) /* the driver's JIT from now on, for this module too */
            atomic_store(&ptxas_refused, true);
        if (s != ASTITCH_OK) {
            s = load_by_driver(ctx, dev, ptx, m);
            jit = true;
        }
    }
    compile_clock_add(CLOCK_LOAD, t);
    if (s == ASTITCH_OK)
        compile_clock_module(jit);
    if (s != ASTITCH_OK) {
        free(m);
        return s;
    }
    *out = m;
    return ASTITCH_OK;
}

void cuda_module_unload(CudaModule *m)
{
    if (!m)
        return;
    if (m->mod && cuda_enter(NULL, m->dev) == ASTITCH_OK) {
        m->dev->drv.ModuleUnload(m->mod);
        cuda_leave(m->dev);
    }
    free(m->log);
    free(m);
}

const char *cuda_module_log(const CudaModule *m) { return m && m->log ? m->log : ""; }

/* Reads the compiled function's resources into k. Runs inside cuda_enter. */
static astitch_status read_function(astitch_context *ctx, const CudaModule *m, CudaKernel *k)
{
    const CudaDriver *d = &m->dev->drv;
    static const struct {
        CUfunction_attribute attr;
        const char *name;
    } want[] = {
        {CU_FUNC_ATTRIBUTE_NUM_REGS, "registers"},
        {CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "static shared memory"},
        {CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "local memory"},
        {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block"},
    };
    int v[4];
    for (int i = 0; i < 4; i++) {
        CUresult r = d->FuncGetAttribute(&v[i], want[i].attr, k->fn);
        if (r != CUDA_SUCCESS)
            return cuda_fail(ctx, d, r, "cuFuncGetAttribute(%s) of kernel '%s' in module '%s'",
                             want[i].name, k->name, m->what);
    }
    k->regs = v[0];
    k->static_shared = (size_t)v[1];
    k->local_bytes = (size_t)v[2];
    k->max_block = v[3];
    return ASTITCH_OK;
}

/* The body of cuda_kernel_get, inside cuda_enter. */
static astitch_status prepare(astitch_context *ctx, const CudaModule *m, CudaKernel *k)
{
    const CudaDevice *dev = m->dev;
    const CudaDriver *d = &dev->drv;
    CUresult r = d->ModuleGetFunction(&k->fn, m->mod, k->name);
    if (r != CUDA_SUCCESS)
        return cuda_fail(ctx, d, r, "cuModuleGetFunction('%s') in module '%s'", k->name,
                         m->what);
    astitch_status s = read_function(ctx, m, k);
    if (s != ASTITCH_OK)
        return s;
    if (k->block > k->max_block)
        return ctx_fail(ctx, ASTITCH_ERR_UNSUPPORTED,
                        "kernel '%s': blocks of %d threads requested, but with %d registers per "
                        "thread it allows at most %d",
                        k->name, k->block, k->regs, k->max_block);
    size_t shared = k->static_shared + k->dynamic_shared;
    if (shared > dev->info.shared_per_block_optin)
        return ctx_fail(ctx, ASTITCH_ERR_UNSUPPORTED,
                        "kernel '%s': %zu bytes of shared memory per block (%zu static + %zu "
                        "dynamic) exceed the %zu bytes %s allows",
                        k->name, shared, k->static_shared, k->dynamic_shared,
                        dev->info.shared_per_block_optin, dev->info.name);
    if (shared > dev->info.shared_per_block) {
        r = d->FuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                (int)k->dynamic_shared);
        if (r != CUDA_SUCCESS)
            return cuda_fail(ctx, d, r,
                             "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, %zu) of kernel "
                             "'%s'",
                             k->dynamic_shared, k->name);
    }
    int n = 0;
    r = d->OccupancyMaxActiveBlocksPerMultiprocessor(&n, k->fn, k->block, k->dynamic_shared);
    if (r != CUDA_SUCCESS)
        return cuda_fail(ctx, d, r,
                         "cuOccupancyMaxActiveBlocksPerMultiprocessor of kernel '%s' (%d threads, "
                         "%zu bytes dynamic shared)",
                         k->name, k->block, k->dynamic_shared);
    if (n < 1)
        return ctx_fail(ctx, ASTITCH_ERR_UNSUPPORTED,
                        "kernel '%s': no block of %d threads (%d registers each, %zu bytes of "
                        "shared memory) fits on an SM of %s",
                        k->name, k->block, k->regs, shared, dev->info.name);
    k->blocks_per_sm = n;
    k->max_coresident = n * dev->info.sm_count;
    return ASTITCH_OK;
}

astitch_status cuda_kernel_get(astitch_context *ctx, const CudaModule *m, const char *name,
                               int block, size_t dynamic_shared, CudaKernel *out)
{
    memset(out, 0, sizeof *out);
    const CudaDevice *dev = m->dev;
    if (!name || strlen(name) >= sizeof out->name)
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "cuda_kernel_get: kernel name %s",
                        name ? "too long" : "missing");
    snprintf(out->name, sizeof out->name, "%s", name);
    if (block < 1 || block > dev->info.max_threads_per_block)
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT,
                        "kernel '%s': blocks of %d threads; %s allows 1 to %d", name, block,
                        dev->info.name, dev->info.max_threads_per_block);
    out->block = block;
    out->dynamic_shared = dynamic_shared;
    astitch_status s = cuda_enter(ctx, dev);
    if (s != ASTITCH_OK)
        return s;
    s = prepare(ctx, m, out);
    cuda_leave(dev);
    if (s != ASTITCH_OK)
        out->fn = NULL;
    return s;
}

astitch_status cuda_launch(astitch_context *ctx, const CudaDevice *dev, const CudaLaunch *l)
{
    const CudaKernel *k = l->kernel;
    if (!k || !k->fn || l->grid < 1)
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "cuda_launch: %s",
                        !k || !k->fn ? "no kernel" : "empty grid");
    if (l->cooperative && !dev->info.cooperative_launch)
        return ctx_fail(ctx, ASTITCH_ERR_UNSUPPORTED,
                        "kernel '%s': device %d (%s) has no cooperative launch for grid barriers",
                        k->name, dev->ordinal, dev->info.name);
    if (l->cooperative && l->grid > (unsigned)k->max_coresident)
        return ctx_fail(ctx, ASTITCH_ERR_UNSUPPORTED,
                        "kernel '%s': a grid barrier needs all %u blocks co-resident, but at most "
                        "%d are (%d per SM x %d SMs at %d threads and %zu bytes of dynamic "
                        "shared memory)",
                        k->name, l->grid, k->max_coresident, k->blocks_per_sm,
                        dev->info.sm_count, k->block, k->dynamic_shared);
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr.value.cooperative = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = l->grid;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = (unsigned)k->block;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.sharedMemBytes = (unsigned)k->dynamic_shared;
    cfg.hStream = l->stream;
    cfg.attrs = l->cooperative ? &attr : NULL;
    cfg.numAttrs = l->cooperative ? 1 : 0;

    astitch_status s = cuda_enter(ctx, dev);
    if (s != ASTITCH_OK)
        return s;
    CUresult r = dev->drv.LaunchKernelEx(&cfg, k->fn, l->args, NULL);
    cuda_leave(dev);
    if (r == CUDA_SUCCESS)
        return ASTITCH_OK;
    return cuda_fail(ctx, &dev->drv, r,
                     "cuLaunchKernelEx of kernel '%s' (%s%u blocks x %d threads, %zu bytes "
                     "dynamic shared; %d blocks co-resident)",
                     k->name, l->cooperative ? "cooperative, " : "", l->grid, k->block,
                     k->dynamic_shared, k->max_coresident);
}

void cuda_workspace_init(CudaWorkspace *ws, const CudaDevice *dev)
{
    memset(ws, 0, sizeof *ws);
    ws->dev = dev;
}

/* Makes *p hold at least want bytes (*have now). The old buffer goes only after the device's
 * queued work has finished; on failure *p is 0 and *have 0, or unchanged if the wait failed. */
static astitch_status grow(astitch_context *ctx, const CudaDevice *dev, CUdeviceptr *p,
                           size_t *have, size_t want)
{
    if (want <= *have)
        return ASTITCH_OK;
    if (*p) {
        astitch_status s = cuda_enter(ctx, dev);
        if (s != ASTITCH_OK)
            return s;
        CUresult r = dev->drv.CtxSynchronize();
        cuda_leave(dev);
        if (r != CUDA_SUCCESS)
            return cuda_fail(ctx, &dev->drv, r, "cuCtxSynchronize before growing the workspace");
        cuda_free(dev, *p);
        *p = 0;
        *have = 0;
    }
    astitch_status s = cuda_alloc(ctx, dev, want, p);
    if (s == ASTITCH_OK)
        *have = want;
    return s;
}

astitch_status cuda_workspace_reserve(astitch_context *ctx, CudaWorkspace *ws,
                                      size_t scratch_bytes, int ncounters)
{
    if (ncounters < 0)
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "cuda_workspace_reserve: %d counters",
                        ncounters);
    astitch_status s = grow(ctx, ws->dev, &ws->scratch, &ws->scratch_bytes, scratch_bytes);
    if (s != ASTITCH_OK)
        return s;
    size_t have = (size_t)ws->ncounters * sizeof(uint32_t);
    s = grow(ctx, ws->dev, &ws->counters, &have, (size_t)ncounters * sizeof(uint32_t));
    ws->ncounters = (int)(have / sizeof(uint32_t));
    return s;
}

astitch_status cuda_workspace_clear_counters(astitch_context *ctx, CudaWorkspace *ws, int n,
                                             CUstream s)
{
    if (n < 0 || n > ws->ncounters)
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT,
                        "cuda_workspace_clear_counters: %d counters asked, %d reserved", n,
                        ws->ncounters);
    return cuda_memset_u32(ctx, ws->dev, ws->counters, 0, (size_t)n, s);
}

void cuda_workspace_release(CudaWorkspace *ws)
{
    cuda_free(ws->dev, ws->scratch);
    cuda_free(ws->dev, ws->counters);
    cuda_workspace_init(ws, ws->dev);
}
