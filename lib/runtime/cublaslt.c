/* cublaslt.c: dlopen of cuBLASLt, its function table, and cuBLASLt errors. */
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cublaslt.h"
#include "ir/config.h"
#include "ir/ir.h"

#define SONAME "libcublasLt.so.13"

typedef struct Entry {
    const char *symbol;
    size_t offset;
} Entry;

#define CUBLASLT_ENTRY(ret, field, symbol, params) {symbol, offsetof(CublasLt, field)},
static const Entry entries[] = {CUBLASLT_FUNCTIONS(CUBLASLT_ENTRY)};
#undef CUBLASLT_ENTRY

int cublaslt_places(char places[][512], int max)
{
    int n = 0;
    const char *own = config_cublaslt();
    if (own) {
        snprintf(places[n++], sizeof *places, "%s", own);
        return n;
    }
    const char *roots[2] = {config_cuda_path(), ASTITCH_CUDA_PATH};
    for (int i = 0; i < 2 && n < max - 1; i++) {
        if (!roots[i] || (i == 1 && roots[0] && strcmp(roots[0], roots[1]) == 0))
            continue;
        snprintf(places[n++], sizeof *places, "%s/lib64/" SONAME, roots[i]);
    }
    snprintf(places[n++], sizeof *places, "%s", SONAME);
    return n;
}

astitch_status cublaslt_open(astitch_context *ctx, CublasLt *lt)
{
    memset(lt, 0, sizeof *lt);
    char places[CUBLASLT_MAX_PLACES][512], tried[4096] = "";
    int n = cublaslt_places(places, CUBLASLT_MAX_PLACES);
    size_t used = 0;
    for (int i = 0; i < n && !lt->lib; i++) {
        lt->lib = dlopen(places[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (lt->lib) {
            memcpy(lt->path, places[i], sizeof lt->path);
            break;
        }
        const char *why = dlerror();
        int w = snprintf(tried + used, sizeof tried - used, "%s%s (%s)", i ? "; " : "",
                         places[i], why ? why : "no reason given");
        if (w > 0 && used + (size_t)w < sizeof tried)
            used += (size_t)w;
    }
    if (!lt->lib)
        return ctx_fail(ctx, ASTITCH_ERR_NO_DEVICE,
                        "cuBLASLt (for dots on the GPU) not found; tried %s. Set ASTITCH_CUBLASLT "
                        "to the library, or the context option host_compute to 1 to run dots on "
                        "the host", tried);
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++) {
        void *p = dlsym(lt->lib, entries[i].symbol);
        if (!p) {
            astitch_status s = ctx_fail(ctx, ASTITCH_ERR_NO_DEVICE,
                                        "cuBLASLt %s does not provide %s (astitch needs CUDA 13's)",
                                        lt->path, entries[i].symbol);
            cublaslt_close(lt);
            return s;
        }
        /* POSIX guarantees that a data pointer from dlsym converts to a function pointer. */
        memcpy((char *)lt + entries[i].offset, &p, sizeof p);
    }
    return ASTITCH_OK;
}

void cublaslt_close(CublasLt *lt)
{
    if (lt && lt->lib)
        dlclose(lt->lib);
    if (lt)
        *lt = (CublasLt){0};
}

astitch_status cublaslt_fail(astitch_context *ctx, const CublasLt *lt, cublasStatus_t st,
                             const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    const char *name = lt && lt->GetStatusName ? lt->GetStatusName(st) : NULL;
    const char *text = lt && lt->GetStatusString ? lt->GetStatusString(st) : NULL;
    astitch_status s = st == CUBLAS_STATUS_ALLOC_FAILED  ? ASTITCH_ERR_MEMORY
                       : st == CUBLAS_STATUS_NOT_SUPPORTED ? ASTITCH_ERR_UNSUPPORTED
                                                           : ASTITCH_ERR_DEVICE;
    if (name && text)
        return ctx_fail(ctx, s, "%s: %s (%s)", what, name, text);
    if (name)
        return ctx_fail(ctx, s, "%s: %s", what, name);
    return ctx_fail(ctx, s, "%s: cuBLAS status %d", what, (int)st);
}
