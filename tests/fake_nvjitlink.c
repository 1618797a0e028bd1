/*
 * fake_nvjitlink.c: a stand-in for the toolkit's libnvJitLink for the runtime tests on the fake
 * driver (ASTITCH_NVJITLINK points at it). Its "cubin" is the PTX it was given, NUL included,
 * so the fake driver (tests/fake_cuda.c), which reads PTX, loads it as before. It asks for
 * "-arch=sm_NN" as nvJitLink does; with FAKE_NVJITLINK_FAIL=text (read at each compile) a
 * module whose PTX holds `text` fails to compile with an error log naming it.
 * fake_nvjitlink_compiles counts the modules compiled, from any thread.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

enum { SUCCESS = 0, MISSING_ARCH = 2, INVALID_INPUT = 3, PTX_COMPILE = 4 };

typedef struct Handle {
    char *data, *error, *info;
    size_t size;
    int arch;
} Handle;

static atomic_int compiles;

EXPORT int fake_nvjitlink_compiles(void);
int fake_nvjitlink_compiles(void) { return atomic_load(&compiles); }

EXPORT int nvJitLinkCreate(Handle **h, unsigned n, const char **options);
int nvJitLinkCreate(Handle **h, unsigned n, const char **options)
{
    int arch = 0;
    for (unsigned i = 0; i < n; i++)
        if (strncmp(options[i], "-arch=sm_", 9) == 0)
            arch = atoi(options[i] + 9);
    if (!arch)
        return MISSING_ARCH;
    *h = calloc(1, sizeof **h);
    if (!*h)
        return INVALID_INPUT;
    (*h)->arch = arch;
    return SUCCESS;
}

EXPORT int nvJitLinkDestroy(Handle **h);
int nvJitLinkDestroy(Handle **h)
{
    if (!h || !*h)
        return INVALID_INPUT;
    free((*h)->data);
    free((*h)->error);
    free((*h)->info);
    free(*h);
    *h = NULL;
    return SUCCESS;
}

EXPORT int nvJitLinkAddData(Handle *h, int type, const void *data, size_t size, const char *name);
int nvJitLinkAddData(Handle *h, int type, const void *data, size_t size, const char *name)
{
    (void)name;
    if (!h || type != 2 /* PTX */ || !data || !size || h->data)
        return INVALID_INPUT;
    if (!(h->data = malloc(size)))
        return INVALID_INPUT;
    memcpy(h->data, data, size);
    h->size = size;
    return SUCCESS;
}

EXPORT int nvJitLinkComplete(Handle *h);
int nvJitLinkComplete(Handle *h)
{
    if (!h || !h->data)
        return INVALID_INPUT;
    atomic_fetch_add(&compiles, 1);
    const char *bad = getenv("FAKE_NVJITLINK_FAIL");
    if (bad && *bad && strstr(h->data, bad)) {
        size_t n = strlen(bad) + 64;
        h->error = malloc(n);
        if (h->error)
            snprintf(h->error, n, "fake ptxas error: '%s' is refused\n", bad);
        return PTX_COMPILE;
    }
    h->info = malloc(64);
    if (h->info)
        snprintf(h->info, 64, "fake ptxas info: compiled for sm_%d\n", h->arch);
    return SUCCESS;
}

EXPORT int nvJitLinkGetLinkedCubinSize(Handle *h, size_t *size);
int nvJitLinkGetLinkedCubinSize(Handle *h, size_t *size)
{
    if (!h || !h->data)
        return INVALID_INPUT;
    *size = h->size;
    return SUCCESS;
}

EXPORT int nvJitLinkGetLinkedCubin(Handle *h, void *cubin);
int nvJitLinkGetLinkedCubin(Handle *h, void *cubin)
{
    if (!h || !h->data)
        return INVALID_INPUT;
    memcpy(cubin, h->data, h->size);
    return SUCCESS;
}

/* A log's size with its NUL, and the log. */
static int log_size(const char *log, size_t *size)
{
    *size = log ? strlen(log) + 1 : 0;
    return SUCCESS;
}

static int log_copy(const char *log, char *out)
{
    if (log)
        memcpy(out, log, strlen(log) + 1);
    return SUCCESS;
}

EXPORT int nvJitLinkGetErrorLogSize(Handle *h, size_t *size);
int nvJitLinkGetErrorLogSize(Handle *h, size_t *size) { return log_size(h->error, size); }
EXPORT int nvJitLinkGetErrorLog(Handle *h, char *log);
int nvJitLinkGetErrorLog(Handle *h, char *log) { return log_copy(h->error, log); }
EXPORT int nvJitLinkGetInfoLogSize(Handle *h, size_t *size);
int nvJitLinkGetInfoLogSize(Handle *h, size_t *size) { return log_size(h->info, size); }
EXPORT int nvJitLinkGetInfoLog(Handle *h, char *log);
int nvJitLinkGetInfoLog(Handle *h, char *log) { return log_copy(h->info, log); }
