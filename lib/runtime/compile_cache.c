/*
 * compile_cache.c: the compile cache of the CUDA target's PTX (compile_cache.h).
 *
 *   key      the text "astitch ptx cache key" + version, build, cuda path, sm, parts, then the
 *            graph's and the plan's JSON, each after its length; hashed with FNV-1a 128
 *   memory   a fixed table under one mutex: the one process-wide state here, since an
 *            executable may be compiled on any context by any thread
 *   lookup   memory, then disk (compile_cache_disk.c; a disk hit is kept in memory too),
 *            else compile_ptx, whose PTX goes to both
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "codegen/compile.h"
#include "compile_cache.h"
#include "compile_clock.h"
#include "ir/config.h"
#include "ir/ir.h"

#define MEM_ENTRIES 64
#define MEM_BYTES ((size_t)64 << 20)

typedef struct MemEntry {
    CacheKey key;       /* key.text NULL: a free slot */
    char *ptx;
    size_t ptxlen;
    unsigned long born; /* insertion order: the smallest goes first */
} MemEntry;

static struct {
    pthread_mutex_t lock;
    MemEntry e[MEM_ENTRIES];
    size_t bytes; /* keys and PTX held */
    unsigned long clock;
    CompileCacheStats stats;
} mem = {.lock = PTHREAD_MUTEX_INITIALIZER};

static pthread_once_t build_once = PTHREAD_ONCE_INIT;
static char build_id[96];

/* The FNV-1a 128 offset basis and prime, 2^88 + 0x13b, multiplied through 32-bit halves. */
void cache_hash(const void *s, size_t n, uint64_t h[2])
{
    const unsigned char *b = s;
    uint64_t hi = 0x6c62272e07bb0142u, lo = 0x62b821756295c58du;
    for (size_t i = 0; i < n; i++) {
        lo ^= b[i];
        uint64_t p0 = (lo & 0xffffffffu) * 0x13bu;
        uint64_t p1 = (lo >> 32) * 0x13bu + (p0 >> 32);
        hi = hi * 0x13bu + (p1 >> 32) + (lo << 24);
        lo = (p1 << 32) | (p0 & 0xffffffffu);
    }
    h[0] = hi;
    h[1] = lo;
}

/* The size and modification time of the file holding this code (libastitch, or a program that
 * links it statically): a rebuilt library never reads its predecessor's PTX, even where the
 * version string has not moved. */
static void build_id_init(void)
{
    Dl_info info;
    struct stat st;
    if (dladdr((void *)(uintptr_t)compile_ptx, &info) && info.dli_fname &&
        stat(info.dli_fname, &st) == 0)
        snprintf(build_id, sizeof build_id, "%lld %lld.%09ld", (long long)st.st_size,
                 (long long)st.st_mtim.tv_sec, (long)st.st_mtim.tv_nsec);
    else
        snprintf(build_id, sizeof build_id, "unknown");
}

/* Fills k with the key of `kind` ("ptx": compiling p for sm, whole or as parts; "variant": the variant
 * search's choice for p on sm; "bound": whether its planned register bound was kept; "dots": its
 * dots' algorithms); false (k empty) when it cannot be made. */
static bool key_make(const char *kind, const astitch_plan *p, int sm, bool as_parts, CacheKey *k)
{
    *k = (CacheKey){.config = &astitch_plan_graph(p)->ctx->config};
    char *graph = NULL, *plan = NULL;
    const char *cuda = config_cuda_path();
    pthread_once(&build_once, build_id_init);
    FILE *f = NULL;
    bool ok = astitch_graph_write_json(astitch_plan_graph(p), &graph) == ASTITCH_OK &&
              astitch_plan_json(p, &plan) == ASTITCH_OK &&
              (f = open_memstream(&k->text, &k->len));
    if (ok)
        ok = fprintf(f, "astitch %s cache key\nversion %s\nbuild %s\ncuda %zu %s\nsm %d\n"
                        "parts %d\ngraph %zu\n%s\nplan %zu\n%s\n",
                     kind, astitch_version(), build_id, cuda ? strlen(cuda) : 0, cuda ? cuda : "",
                     sm, (int)as_parts, strlen(graph), graph, strlen(plan), plan) > 0;
    if (f)
        ok = fclose(f) == 0 && ok;
    astitch_free(graph);
    astitch_free(plan);
    if (!ok) {
        free(k->text);
        *k = (CacheKey){0};
        return false;
    }
    cache_hash(k->text, k->len, k->hash);
    k->kind = kind;
    return true;
}

static bool key_equal(const CacheKey *a, const CacheKey *b)
{
    return a->hash[0] == b->hash[0] && a->hash[1] == b->hash[1] && a->len == b->len &&
           memcmp(a->text, b->text, a->len) == 0;
}

/* Adds one to a counter of mem.stats. */
static void bump(long *counter)
{
    pthread_mutex_lock(&mem.lock);
    (*counter)++;
    pthread_mutex_unlock(&mem.lock);
}

/* Frees entry e (mem.lock held). */
static void mem_drop(MemEntry *e)
{
    mem.bytes -= e->key.len + e->ptxlen;
    free(e->key.text);
    free(e->ptx);
    *e = (MemEntry){0};
}

/* A malloc'd copy of the PTX kept for k, or NULL. Counts a memory hit. */
static char *mem_lookup(const CacheKey *k)
{
    char *ptx = NULL;
    pthread_mutex_lock(&mem.lock);
    for (int i = 0; i < MEM_ENTRIES; i++) {
        MemEntry *e = &mem.e[i];
        if (e->key.text && key_equal(&e->key, k)) {
            if ((ptx = malloc(e->ptxlen + 1))) {
                memcpy(ptx, e->ptx, e->ptxlen + 1);
                mem.stats.memory_hits++;
            }
            break;
        }
    }
    pthread_mutex_unlock(&mem.lock);
    return ptx;
}

/* A free slot with room for `need` more bytes, made by dropping the oldest entries (mem.lock
 * held; need <= MEM_BYTES). */
static MemEntry *mem_slot(size_t need)
{
    for (;;) {
        MemEntry *free_slot = NULL, *oldest = NULL;
        for (int i = 0; i < MEM_ENTRIES; i++) {
            MemEntry *e = &mem.e[i];
            if (!e->key.text)
                free_slot = free_slot ? free_slot : e;
            else if (!oldest || e->born < oldest->born)
                oldest = e;
        }
        if (free_slot && mem.bytes + need <= MEM_BYTES)
            return free_slot;
        mem_drop(oldest);
    }
}

/* Keeps a copy of k and ptx[0..n) in memory, unless too large, already there or out of memory. */
static void mem_store(const CacheKey *k, const char *ptx, size_t n)
{
    if (k->len + n > MEM_BYTES)
        return;
    MemEntry e = {.key = *k, .ptxlen = n};
    e.key.text = malloc(k->len);
    e.ptx = malloc(n + 1);
    if (e.key.text && e.ptx) {
        memcpy(e.key.text, k->text, k->len);
        memcpy(e.ptx, ptx, n); /* ptx need not be terminated: the copy is */
        e.ptx[n] = '\0';
        pthread_mutex_lock(&mem.lock);
        bool present = false;
        for (int i = 0; i < MEM_ENTRIES && !present; i++)
            present = mem.e[i].key.text && key_equal(&mem.e[i].key, k);
        if (!present) {
            e.born = mem.clock++;
            *mem_slot(k->len + n) = e;
            mem.bytes += k->len + n;
            e = (MemEntry){0};
        }
        pthread_mutex_unlock(&mem.lock);
    }
    free(e.key.text);
    free(e.ptx);
}

/* Drops k's entry from memory, if there is one. */
static void mem_forget(const CacheKey *k)
{
    pthread_mutex_lock(&mem.lock);
    for (int i = 0; i < MEM_ENTRIES; i++)
        if (mem.e[i].key.text && key_equal(&mem.e[i].key, k))
            mem_drop(&mem.e[i]);
    pthread_mutex_unlock(&mem.lock);
}

/* The PTX of k's entry on disk (then kept in memory too), or NULL. Counts a hit or a reject. */
static char *disk_lookup(const char *path, const CacheKey *k)
{
    bool invalid;
    char *ptx = cache_disk_read(path, k, &invalid);
    if (ptx) {
        mem_store(k, ptx, strlen(ptx));
        bump(&mem.stats.disk_hits);
    } else if (invalid) {
        bump(&mem.stats.disk_rejects);
    }
    return ptx;
}

/* The text kept for k in memory, else on disk (then kept in memory too), or NULL. */
static char *lookup(const CacheKey *k)
{
    char dir[CACHE_PATH_BYTES], path[CACHE_PATH_BYTES];
    char *text = mem_lookup(k);
    if (!text && cache_disk_paths(k, dir, path))
        text = disk_lookup(path, k);
    return text;
}

/* Keeps text[0..n) for k in both layers, replacing what they held. */
static void store(const CacheKey *k, const char *text, size_t n)
{
    mem_forget(k);
    mem_store(k, text, n);
    char dir[CACHE_PATH_BYTES], path[CACHE_PATH_BYTES];
    if (cache_disk_paths(k, dir, path) && cache_disk_write(dir, path, k, text, n))
        bump(&mem.stats.disk_writes);
}

/* ---- entry points -------------------------------------------------------------------------- */

/* compile_ptx, its time added to CLOCK_PTX. */
static astitch_status clocked_compile_ptx(astitch_context *ctx, const astitch_plan *p, int sm,
                                          bool as_parts, char **ptx)
{
    double t = compile_clock_now();
    astitch_status s = compile_ptx(ctx, p, sm, as_parts, ptx);
    compile_clock_add(CLOCK_PTX, t);
    return s;
}

/* The compile cache's switch in the context of p's graph. */
static bool cache_on(const astitch_plan *p)
{
    return config_cache_on(&astitch_plan_graph(p)->ctx->config);
}

astitch_status cached_compile_ptx(astitch_context *ctx, const astitch_plan *p, int sm,
                                  bool as_parts, char **ptx)
{
    *ptx = NULL;
    CacheKey k;
    if (!cache_on(p) || !key_make("ptx", p, sm, as_parts, &k))
        return clocked_compile_ptx(ctx, p, sm, as_parts, ptx);
    astitch_status s = ASTITCH_OK;
    if (!(*ptx = lookup(&k))) {
        bump(&mem.stats.misses);
        s = clocked_compile_ptx(ctx, p, sm, as_parts, ptx);
        if (s == ASTITCH_OK)
            store(&k, *ptx, strlen(*ptx));
    }
    free(k.text);
    return s;
}

void compile_cache_replace(const astitch_plan *p, int sm, bool as_parts, const char *ptx)
{
    CacheKey k;
    if (!cache_on(p) || !key_make("ptx", p, sm, as_parts, &k))
        return;
    store(&k, ptx, strlen(ptx));
    free(k.text);
}

/* The one digit recorded for p on sm under `kind`, or -1 (none, not one digit, cache off). */
static int digit_get(const char *kind, const astitch_plan *p, int sm)
{
    CacheKey k;
    if (!cache_on(p) || !key_make(kind, p, sm, false, &k))
        return -1;
    char *text = lookup(&k);
    int digit = text && text[0] >= '0' && text[0] <= '9' && text[1] == '\n' ? text[0] - '0' : -1;
    free(text);
    free(k.text);
    return digit;
}

static void digit_set(const char *kind, const astitch_plan *p, int sm, int digit)
{
    CacheKey k;
    if (!cache_on(p) || digit < 0 || digit > 9 || !key_make(kind, p, sm, false, &k))
        return;
    char text[2] = {(char)('0' + digit), '\n'};
    store(&k, text, 2);
    free(k.text);
}

int compile_cache_choice(const astitch_plan *p, int sm) { return digit_get("variant", p, sm); }

void compile_cache_set_choice(const astitch_plan *p, int sm, int choice)
{
    digit_set("variant", p, sm, choice);
}

bool compile_cache_bound_kept(const astitch_plan *p, int sm) { return digit_get("bound", p, sm) == 0; }

void compile_cache_set_bound_kept(const astitch_plan *p, int sm) { digit_set("bound", p, sm, 0); }

bool compile_cache_dot_choices(const astitch_plan *p, int sm, int *choice, int n)
{
    CacheKey k;
    if (!cache_on(p) || n < 1 || !key_make("dots", p, sm, false, &k))
        return false;
    char *text = lookup(&k);
    free(k.text);
    const char *at = text;
    int i = 0;
    for (; at && i < n; i++) {
        char *end;
        long v = strtol(at, &end, 10);
        if (end == at || v < -1 || v > 99 || (*end != ' ' && *end != '\n'))
            break;
        choice[i] = (int)v;
        at = end + 1;
    }
    bool ok = at && i == n && at[-1] == '\n' && *at == '\0';
    free(text);
    return ok;
}

void compile_cache_set_dot_choices(const astitch_plan *p, int sm, const int *choice, int n)
{
    CacheKey k;
    if (!cache_on(p) || n < 1 || !key_make("dots", p, sm, false, &k))
        return;
    size_t cap = (size_t)n * 4 + 1, len = 0;
    char *text = malloc(cap);
    for (int i = 0; text && i < n; i++)
        len += (size_t)snprintf(text + len, cap - len, "%d%c",
                                choice[i] < -1 || choice[i] > 99 ? -1 : choice[i],
                                i + 1 < n ? ' ' : '\n');
    if (text)
        store(&k, text, len);
    free(text);
    free(k.text);
}

void compile_cache_stats(CompileCacheStats *out)
{
    pthread_mutex_lock(&mem.lock);
    *out = mem.stats;
    pthread_mutex_unlock(&mem.lock);
}

void compile_cache_reset(void)
{
    pthread_mutex_lock(&mem.lock);
    for (int i = 0; i < MEM_ENTRIES; i++)
        if (mem.e[i].key.text)
            mem_drop(&mem.e[i]);
    mem.stats = (CompileCacheStats){0};
    pthread_mutex_unlock(&mem.lock);
}
