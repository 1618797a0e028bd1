/* libdevice.c: the math functions of NVPTX kernels, from the CUDA toolkit's libdevice.
 *
 * A module needs the few __nv_* functions it declares and what they call. Parsing all of
 * libdevice (hundreds of functions) for that was the largest single cost of a compile, so the
 * trimmed library, those functions alone after internalize and globaldce, is kept as bitcode
 * in a process-wide memo keyed by the libdevice path and the sorted set of names (at most
 * MEMO_ENTRIES sets); a later module wanting the same set parses only that. The memo holds no
 * LLVM object, only bytes, so it serves every LLVM context. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Linker.h>

#include "codegen.h"
#include "ir/ir.h"

enum { MEMO_ENTRIES = 64 };

typedef struct MemoEntry {
    char *key;     /* path, then each name, '\n'-separated */
    char *code;    /* the trimmed library's bitcode */
    size_t len;
} MemoEntry;

static struct {
    pthread_mutex_t lock;
    MemoEntry entry[MEMO_ENTRIES];
    int n;
} memo = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int by_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Names of the __nv_* functions m declares, sorted, in a malloc'd array (*n of them). */
static const char **wanted_names(LLVMModuleRef m, int *n)
{
    int cap = 0;
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
        cap++;
    const char **names = malloc(sizeof *names * (size_t)(cap ? cap : 1));
    *n = 0;
    if (!names)
        return NULL;
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
        if (LLVMIsDeclaration(f) && strncmp(LLVMGetValueName(f), "__nv_", 5) == 0)
            names[(*n)++] = LLVMGetValueName(f);
    qsort(names, (size_t)*n, sizeof *names, by_name);
    return names;
}

static char *memo_key(const char *path, const char **names, int n)
{
    size_t len = strlen(path) + 1;
    for (int i = 0; i < n; i++)
        len += strlen(names[i]) + 1;
    char *key = malloc(len);
    if (!key)
        return NULL;
    char *at = key + strlen(strcpy(key, path));
    for (int i = 0; i < n; i++) {
        *at++ = '\n';
        at = strcpy(at, names[i]) + strlen(names[i]);
    }
    return key;
}

/* The memo's bitcode for key, copied into a memory buffer, or NULL. */
static LLVMMemoryBufferRef memo_find(const char *key)
{
    LLVMMemoryBufferRef buf = NULL;
    pthread_mutex_lock(&memo.lock);
    for (int i = 0; i < memo.n && !buf; i++)
        if (strcmp(memo.entry[i].key, key) == 0)
            buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(memo.entry[i].code, memo.entry[i].len,
                                                            "libdevice-trimmed");
    pthread_mutex_unlock(&memo.lock);
    return buf;
}

/* Keeps lib's bitcode under key (takes key) while there is room; a failure only loses the
 * memo. */
static void memo_keep(char *key, LLVMModuleRef lib)
{
    LLVMMemoryBufferRef buf = LLVMWriteBitcodeToMemoryBuffer(lib);
    size_t len = buf ? LLVMGetBufferSize(buf) : 0;
    char *code = len ? malloc(len) : NULL;
    if (code)
        memcpy(code, LLVMGetBufferStart(buf), len);
    if (buf)
        LLVMDisposeMemoryBuffer(buf);
    pthread_mutex_lock(&memo.lock);
    if (code && memo.n < MEMO_ENTRIES) {
        memo.entry[memo.n++] = (MemoEntry){key, code, len};
        key = NULL;
        code = NULL;
    }
    pthread_mutex_unlock(&memo.lock);
    free(key);
    free(code);
}

/* Parses the whole libdevice at path into c and trims it to the names. */
static astitch_status parse_trimmed(astitch_context *ctx, LLVMContextRef c, const char *path,
                                    const char **names, int n, LLVMTargetMachineRef tm,
                                    const LlvmDiag *d, LLVMModuleRef *out)
{
    char *msg = NULL;
    LLVMMemoryBufferRef buf;
    if (LLVMCreateMemoryBufferWithContentsOfFile(path, &buf, &msg)) {
        ctx_fail(ctx, ASTITCH_ERR_IO, "nvptx: cannot read libdevice '%s': %s", path, msg);
        LLVMDisposeMessage(msg);
        return ASTITCH_ERR_IO;
    }
    LLVMBool bad = LLVMParseBitcodeInContext2(c, buf, out);
    LLVMDisposeMemoryBuffer(buf);
    if (bad)
        return llvm_diag_fail(ctx, d, "nvptx: reading libdevice", path);
    /* keep only what the module calls: the rest of libdevice would cost O3 */
    llvm_internalize(*out, names, n);
    llvm_set_target(*out, tm);
    astitch_status st = llvm_run_passes(ctx, *out, "globaldce", tm);
    if (st) {
        LLVMDisposeModule(*out);
        *out = NULL;
    }
    return st;
}

astitch_status libdevice_link(astitch_context *ctx, LLVMModuleRef m, LLVMTargetMachineRef tm,
                              const char *cuda, const LlvmDiag *d)
{
    int n;
    const char **names = wanted_names(m, &n);
    if (!names)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "nvptx: out of memory");
    if (n == 0) {
        free(names);
        return ASTITCH_OK;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/nvvm/libdevice/libdevice.10.bc", cuda);
    LLVMContextRef c = LLVMGetModuleContext(m);
    char *key = memo_key(path, names, n);
    LLVMMemoryBufferRef buf = key ? memo_find(key) : NULL;
    LLVMModuleRef lib = NULL;
    astitch_status st = ASTITCH_OK;
    if (buf) {
        LLVMBool bad = LLVMParseBitcodeInContext2(c, buf, &lib);
        LLVMDisposeMemoryBuffer(buf);
        if (bad)
            st = llvm_diag_fail(ctx, d, "nvptx: reading the trimmed libdevice", path);
        free(key);
    } else {
        st = parse_trimmed(ctx, c, path, names, n, tm, d, &lib);
        if (st == ASTITCH_OK && key)
            memo_keep(key, lib);
        else
            free(key);
    }
    free(names);
    if (st)
        return st;
    if (LLVMLinkModules2(m, lib))
        return llvm_diag_fail(ctx, d, "nvptx: linking libdevice", "link failed");
    LLVMAddModuleFlag(m, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz", 16,
                      LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(c), 0, 0)));
    return ASTITCH_OK;
}
