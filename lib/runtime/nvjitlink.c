/* nvjitlink.c: dlopen of libnvJitLink and one PTX module to one cubin (nvjitlink.h). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "astitch_config.h"
#include "ir/config.h"
#include "nvjitlink.h"

#define SONAME "libnvJitLink.so.13"

/* nvJitLink's C interface as astitch uses it: a handle, results (0 is success), and the input
 * type of PTX (NVJITLINK_INPUT_PTX in nvJitLink.h). */
typedef void *JitHandle;
typedef int JitResult;
enum { JIT_SUCCESS = 0, JIT_INPUT_PTX = 2 };

#define JIT_FUNCTIONS(X)                                                                         \
    X(Create, "nvJitLinkCreate", (JitHandle * h, unsigned n, const char **options))              \
    X(Destroy, "nvJitLinkDestroy", (JitHandle * h))                                              \
    X(AddData, "nvJitLinkAddData",                                                               \
      (JitHandle h, int type, const void *data, size_t size, const char *name))                  \
    X(Complete, "nvJitLinkComplete", (JitHandle h))                                              \
    X(GetLinkedCubinSize, "nvJitLinkGetLinkedCubinSize", (JitHandle h, size_t *size))            \
    X(GetLinkedCubin, "nvJitLinkGetLinkedCubin", (JitHandle h, void *cubin))                     \
    X(GetErrorLogSize, "nvJitLinkGetErrorLogSize", (JitHandle h, size_t *size))                  \
    X(GetErrorLog, "nvJitLinkGetErrorLog", (JitHandle h, char *log))                             \
    X(GetInfoLogSize, "nvJitLinkGetInfoLogSize", (JitHandle h, size_t *size))                    \
    X(GetInfoLog, "nvJitLinkGetInfoLog", (JitHandle h, char *log))

#define JIT_FIELD(field, symbol, params) JitResult(*field) params;
static struct {
    void *lib;
    char path[512];
    char missing[2048];
    JIT_FUNCTIONS(JIT_FIELD)
} jit;
#undef JIT_FIELD

static pthread_once_t jit_once = PTHREAD_ONCE_INIT;

/* Appends "place (why)" to jit.missing. */
static void note_missing(const char *place, const char *why)
{
    size_t used = strlen(jit.missing);
    snprintf(jit.missing + used, sizeof jit.missing - used, "%s%s (%s)", used ? "; " : "", place,
             why ? why : "no reason given");
}

/* The symbols, or false (the library closed, jit.missing says which was missing). */
static bool bind(void)
{
#define JIT_BIND(field, symbol, params)                                                          \
    {                                                                                            \
        void *p = dlsym(jit.lib, symbol);                                                        \
        if (!p) {                                                                                \
            note_missing(jit.path, "no " symbol "; astitch needs CUDA 13's nvJitLink");          \
            return false;                                                                        \
        }                                                                                        \
        memcpy(&jit.field, &p, sizeof p);                                                        \
    }
    JIT_FUNCTIONS(JIT_BIND)
#undef JIT_BIND
    return true;
}

static void jit_open(void)
{
    char places[4][512];
    int n = 0;
    const char *own = config_nvjitlink();
    if (own)
        snprintf(places[n++], sizeof *places, "%.511s", own);
    else {
        const char *roots[2] = {config_cuda_path(), ASTITCH_CUDA_PATH};
        for (int i = 0; i < 2; i++)
            if (roots[i] && !(i == 1 && roots[0] && strcmp(roots[0], roots[1]) == 0))
                snprintf(places[n++], sizeof *places, "%.480s/lib64/" SONAME, roots[i]);
        snprintf(places[n++], sizeof *places, "%s", SONAME);
    }
    for (int i = 0; i < n && !jit.lib; i++) {
        jit.lib = dlopen(places[i], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (!jit.lib) {
            note_missing(places[i], dlerror());
            continue;
        }
        memcpy(jit.path, places[i], sizeof jit.path);
        if (!bind()) {
            dlclose(jit.lib);
            jit.lib = NULL;
        }
    }
}

const char *nvjitlink_path(void)
{
    pthread_once(&jit_once, jit_open);
    return jit.lib ? jit.path : NULL;
}

const char *nvjitlink_missing(void)
{
    pthread_once(&jit_once, jit_open);
    return jit.lib ? "" : jit.missing;
}

void cubin_free(Cubin *c)
{
    if (!c)
        return;
    free(c->image);
    free(c->log);
    *c = (Cubin){0};
}

/* One of h's logs, malloc'd and without trailing white space ("" when empty), or NULL. */
static char *read_log(JitHandle h, JitResult (*size_of)(JitHandle, size_t *),
                      JitResult (*get)(JitHandle, char *))
{
    size_t n = 0;
    if (size_of(h, &n) != JIT_SUCCESS)
        n = 0;
    char *s = calloc(n + 1, 1);
    if (s && n && get(h, s) != JIT_SUCCESS)
        s[0] = '\0';
    for (size_t k = s ? strlen(s) : 0; k > 0 && (s[k - 1] == '\n' || s[k - 1] == ' '); k--)
        s[k - 1] = '\0';
    return s;
}

bool nvjitlink_compile(const char *ptx, int sm, Cubin *out, char *why, size_t len)
{
    *out = (Cubin){0};
    if (!nvjitlink_path()) {
        snprintf(why, len, "nvJitLink not found; tried %s", jit.missing);
        return false;
    }
    if (sm < 10 || sm > 9999) { /* nvJitLink 13 crashes on "-arch=sm_7" */
        snprintf(why, len, "no architecture sm_%d", sm);
        return false;
    }
    char arch[32];
    snprintf(arch, sizeof arch, "-arch=sm_%d", sm);
    const char *opt[] = {arch, "-verbose"};
    JitHandle h = NULL;
    const char *step = "nvJitLinkCreate";
    JitResult r = jit.Create(&h, 2, opt);
    if (r == JIT_SUCCESS) {
        step = "nvJitLinkAddData (PTX)";
        r = jit.AddData(h, JIT_INPUT_PTX, ptx, strlen(ptx) + 1, "astitch.ptx");
    }
    if (r == JIT_SUCCESS) {
        step = "nvJitLinkComplete";
        r = jit.Complete(h);
    }
    if (r == JIT_SUCCESS) {
        step = "nvJitLinkGetLinkedCubin";
        r = jit.GetLinkedCubinSize(h, &out->size);
        if (r == JIT_SUCCESS && !(out->image = malloc(out->size ? out->size : 1)))
            r = -1;
        if (r == JIT_SUCCESS)
            r = jit.GetLinkedCubin(h, out->image);
    }
    char *log = h ? read_log(h, jit.GetErrorLogSize, jit.GetErrorLog) : NULL;
    if (r == JIT_SUCCESS && !(out->log = h ? read_log(h, jit.GetInfoLogSize, jit.GetInfoLog)
                                           : NULL))
        r = -1;
    if (r != JIT_SUCCESS) {
        if (r == -1)
            snprintf(why, len, "out of memory taking nvJitLink's cubin");
        else
            snprintf(why, len, "%s for sm_%d: nvJitLink result %d%s%s", step, sm, r,
                     log && *log ? "\nnvJitLink error log:\n" : "", log ? log : "");
        cubin_free(out);
    }
    free(log);
    if (h)
        jit.Destroy(&h);
    return r == JIT_SUCCESS;
}
