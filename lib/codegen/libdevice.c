/* libdevice.c: the math functions of NVPTX kernels, from the CUDA toolkit's libdevice.
 *
 * A module needs the few __nv_* functions it declares and what they call. Parsing all of
 * libdevice (hundreds of functions, about 25 ms) for that was the largest single cost of a
 * compile, so each function is kept trimmed, itself and its callees alone after internalize and
 * globaldce, as bitcode in a process-wide memo keyed by the libdevice path and its name (at most
 * MEMO_ENTRIES functions). A module parses and links the pieces of the functions it wants; a
 * function no earlier module wanted is cut from the math subset (every f32 function of
 * MATH_LIST), itself kept in the memo, so a process parses the whole library once. The memo
 * holds no LLVM object, only bytes, so it serves every LLVM context. Helpers that two pieces
 * share are linked once per piece (internal, renamed). */
#include <pthread.h>
#include <stdbool.h>
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
    char *key;     /* path '\n' name */
    char *code;    /* the function and its callees as bitcode */
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

static char *memo_key(const char *path, const char *name)
{
    size_t len = strlen(path) + strlen(name) + 2;
    char *key = malloc(len);
    if (key)
        snprintf(key, len, "%s\n%s", path, name);
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

/* Keeps lib's bitcode under key (takes key) while there is room, unless another thread kept
 * it first; a failure only loses the memo. */
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
    for (int i = 0; i < memo.n && code; i++)
        if (strcmp(memo.entry[i].key, key) == 0) {
            free(code);
            code = NULL;
        }
    if (code && memo.n < MEMO_ENTRIES) {
        memo.entry[memo.n++] = (MemoEntry){key, code, len};
        key = NULL;
        code = NULL;
    }
    pthread_mutex_unlock(&memo.lock);
    free(key);
    free(code);
}

/* The memo's entry `name` (a piece, or the math subset) of the library at path parsed into c;
 * *out NULL when the memo lacks it. */
static astitch_status memo_parse(astitch_context *ctx, LLVMContextRef c, const char *path,
                                 const char *name, const LlvmDiag *d, LLVMModuleRef *out)
{
    *out = NULL;
    char *key = memo_key(path, name);
    if (!key)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "nvptx: out of memory");
    LLVMMemoryBufferRef buf = memo_find(key);
    free(key);
    if (!buf)
        return ASTITCH_OK;
    LLVMBool bad = LLVMParseBitcodeInContext2(c, buf, out);
    LLVMDisposeMemoryBuffer(buf);
    return bad ? llvm_diag_fail(ctx, d, "nvptx: reading the trimmed libdevice", path) : ASTITCH_OK;
}

/* The whole libdevice at path, parsed into c, for the target of tm. */
static astitch_status parse_library(astitch_context *ctx, LLVMContextRef c, const char *path,
                                    LLVMTargetMachineRef tm, const LlvmDiag *d, LLVMModuleRef *out)
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
    llvm_set_target(*out, tm);
    return ASTITCH_OK;
}

/* Trims lib to the n names and what they call (the rest would cost O3 in every module). */
static astitch_status trim(astitch_context *ctx, LLVMModuleRef lib, const char *const *names,
                           int n, LLVMTargetMachineRef tm)
{
    llvm_internalize(lib, names, n);
    return llvm_run_passes(ctx, lib, "globaldce", tm);
}

/* Whether name is the libdevice name of an f32 math function the emitters call (MATH_LIST;
 * they compute in f32). */
static bool is_math_name(const char *name)
{
    char buf[32];
    for (int id = 0; id < MATH_COUNT; id++)
        if (!strcmp(name, math_name(buf, (MathId)id, false)))
            return true;
    return false;
}

#define MATH_SUBSET "*math subset*" /* its memo name: no libdevice function's */

/* The math subset of libdevice (every f32 function of MATH_LIST and their callees) parsed into
 * c. The first call of a process parses the whole library (about 15 ms), trims it and keeps
 * the subset's bitcode in the memo, so a later module that wants a function no module wanted
 * before parses the subset (about 2 ms) instead of the library. */
static astitch_status parse_math_subset(astitch_context *ctx, LLVMContextRef c, const char *path,
                                        LLVMTargetMachineRef tm, const LlvmDiag *d,
                                        LLVMModuleRef *out)
{
    astitch_status st = memo_parse(ctx, c, path, MATH_SUBSET, d, out);
    if (st != ASTITCH_OK || *out)
        return st;
    char *key = memo_key(path, MATH_SUBSET);
    if (!key)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "nvptx: out of memory");
    st = parse_library(ctx, c, path, tm, d, out);
    char math[MATH_COUNT][32];
    const char *names[MATH_COUNT];
    for (int i = 0; i < MATH_COUNT; i++)
        names[i] = math_name(math[i], (MathId)i, false);
    if (st == ASTITCH_OK)
        st = trim(ctx, *out, names, MATH_COUNT, tm);
    if (st == ASTITCH_OK)
        memo_keep(key, *out);
    else
        free(key);
    return st;
}

/* Keeps each of the n names, trimmed to itself and its callees, in the memo (a name already
 * there is skipped), from the math subset when all are in it, else from the whole library
 * parsed into c. */
static astitch_status memo_fill(astitch_context *ctx, LLVMContextRef c, const char *path,
                                const char **names, int n, LLVMTargetMachineRef tm,
                                const LlvmDiag *d)
{
    bool math = true;
    for (int i = 0; i < n && math; i++)
        math = is_math_name(names[i]);
    LLVMModuleRef all = NULL;
    astitch_status st = math ? parse_math_subset(ctx, c, path, tm, d, &all)
                             : parse_library(ctx, c, path, tm, d, &all);
    if (st != ASTITCH_OK)
        return st;
    /* trimmed to all n first, so that each piece below clones a small module */
    st = trim(ctx, all, names, n, tm);
    for (int i = 0; i < n && st == ASTITCH_OK; i++) {
        char *key = memo_key(path, names[i]);
        LLVMMemoryBufferRef hit = key ? memo_find(key) : NULL;
        if (!key || hit) {
            if (hit)
                LLVMDisposeMemoryBuffer(hit);
            free(key);
            continue;
        }
        LLVMModuleRef one = LLVMCloneModule(all);
        st = trim(ctx, one, &names[i], 1, tm);
        if (st == ASTITCH_OK)
            memo_keep(key, one);
        else
            free(key);
        LLVMDisposeModule(one);
    }
    LLVMDisposeModule(all);
    return st;
}

/* The memo's piece of `name` parsed into m's context and linked into m; *missing when the memo
 * lacks it. */
static astitch_status link_piece(astitch_context *ctx, LLVMModuleRef m, const char *path,
                                 const char *name, const LlvmDiag *d, bool *missing)
{
    LLVMModuleRef lib = NULL;
    astitch_status st = memo_parse(ctx, LLVMGetModuleContext(m), path, name, d, &lib);
    *missing = !lib;
    if (st != ASTITCH_OK || !lib)
        return st;
    if (LLVMLinkModules2(m, lib))
        return llvm_diag_fail(ctx, d, "nvptx: linking libdevice", "link failed");
    return ASTITCH_OK;
}

/* Without the memo (it is full): the whole library parsed into m's context, trimmed to name,
 * and linked into m. */
static astitch_status link_unmemoized(astitch_context *ctx, LLVMModuleRef m, const char *path,
                                      const char *name, LLVMTargetMachineRef tm, const LlvmDiag *d)
{
    LLVMModuleRef lib = NULL;
    astitch_status st = parse_library(ctx, LLVMGetModuleContext(m), path, tm, d, &lib);
    if (st != ASTITCH_OK)
        return st;
    st = trim(ctx, lib, &name, 1, tm);
    if (st != ASTITCH_OK) {
        LLVMDisposeModule(lib);
        return st;
    }
    if (LLVMLinkModules2(m, lib))
        return llvm_diag_fail(ctx, d, "nvptx: linking libdevice", "link failed");
    return ASTITCH_OK;
}

astitch_status libdevice_link(astitch_context *ctx, LLVMModuleRef m, LLVMTargetMachineRef tm,
                              const char *cuda, const LlvmDiag *d)
{
    int n;
    const char **names = wanted_names(m, &n);
    if (!names)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "nvptx: out of memory");
    char path[4096];
    snprintf(path, sizeof path, "%s/nvvm/libdevice/libdevice.10.bc", cuda);
    /* names[] point into m's declarations, which linking replaces: copy them first */
    LLVMContextRef c = LLVMGetModuleContext(m);
    char **own = calloc((size_t)(n ? n : 1), sizeof *own);
    astitch_status st = ASTITCH_OK;
    if (!own)
        st = ctx_fail(ctx, ASTITCH_ERR_MEMORY, "nvptx: out of memory");
    for (int i = 0; i < n && st == ASTITCH_OK; i++)
        if (!(own[i] = strdup(names[i])))
            st = ctx_fail(ctx, ASTITCH_ERR_MEMORY, "nvptx: out of memory");
    free(names);
    bool filled = false;
    for (int i = 0; i < n && st == ASTITCH_OK; i++) {
        bool missing;
        st = link_piece(ctx, m, path, own[i], d, &missing);
        if (st == ASTITCH_OK && missing && !filled) {
            filled = true;
            st = memo_fill(ctx, c, path, (const char **)own + i, n - i, tm, d);
            if (st == ASTITCH_OK)
                st = link_piece(ctx, m, path, own[i], d, &missing);
        }
        if (st == ASTITCH_OK && missing) /* the memo is full: the whole library, trimmed here */
            st = link_unmemoized(ctx, m, path, own[i], tm, d);
    }
    for (int i = 0; own && i < n; i++)
        free(own[i]);
    free(own);
    if (st == ASTITCH_OK && n > 0)
        LLVMAddModuleFlag(m, LLVMModuleFlagBehaviorOverride, "nvvm-reflect-ftz", 16,
                          LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(c), 0, 0)));
    return st;
}
