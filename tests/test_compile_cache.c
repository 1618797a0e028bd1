/* test_compile_cache.c: the compile cache of the CUDA target's PTX (lib/runtime/compile_cache.h),
 * without a GPU: compile_ptx needs only LLVM's NVPTX backend. Each test gets a fresh memory layer
 * and its own disk directory (mkdtemp, removed after). The graph: out = sum over axis 1 of
 * x[32, cols] * c, planned for the h100 model. */
#include <dirent.h>
#include <ftw.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "codegen/compile.h"
#include "runtime/compile_cache.h"

typedef struct Made {
    astitch_context *ctx;
    astitch_graph *g;
    astitch_plan *p;
} Made;

static char dir[512];

static Made make(double c, int64_t cols)
{
    Made m;
    int64_t shape[2] = {32, cols}, none[1] = {0}, ax1[1] = {1};
    astitch_device dev;
    assert_int_equal(astitch_context_create(&m.ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(m.ctx, &m.g), ASTITCH_OK);
    astitch_node x = astitch_parameter(m.g, "x", ASTITCH_F32, 2, shape);
    astitch_node k = astitch_constant(m.g, ASTITCH_F32, 0, none, &c, 1);
    astitch_node kb = astitch_broadcast_in_dim(m.g, k, 2, shape, none);
    astitch_node y = astitch_binary(m.g, ASTITCH_OP_MUL, x, kb);
    assert_int_equal(astitch_add_output(m.g, astitch_reduce(m.g, ASTITCH_REDUCE_SUM, y, 1, ax1)),
                     ASTITCH_OK);
    assert_int_equal(astitch_device_builtin("h100", &dev), ASTITCH_OK);
    if (astitch_plan_create(m.g, &dev, NULL, &m.p) != ASTITCH_OK)
        fail_msg("plan: %s", astitch_last_error(m.ctx));
    return m;
}

static void unmake(Made m)
{
    astitch_plan_destroy(m.p);
    astitch_graph_destroy(m.g);
    astitch_context_destroy(m.ctx);
}

static char *compile(Made m, int sm, bool split)
{
    char *ptx = NULL;
    if (cached_compile_ptx(m.ctx, m.p, sm, split, &ptx) != ASTITCH_OK)
        fail_msg("cached_compile_ptx: %s", astitch_last_error(m.ctx));
    assert_non_null(ptx);
    return ptx;
}

static CompileCacheStats stats(void)
{
    CompileCacheStats s;
    compile_cache_stats(&s);
    return s;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

static int setup(void **state)
{
    (void)state;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/astitch-cache-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return -1;
    setenv("ASTITCH_CACHE_DIR", dir, 1);
    unsetenv("ASTITCH_CACHE");
    compile_cache_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    compile_cache_reset();
    return nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Entry files in d (a leftover temp file fails the test); the last one's path in *path. */
static int entries(const char *d, char path[1024])
{
    DIR *dh = opendir(d);
    struct dirent *e;
    int n = 0;
    while (dh && (e = readdir(dh))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (e->d_name[0] == '.')
            fail_msg("temp file left in the cache directory: %s", e->d_name);
        snprintf(path, 1024, "%s/%s", d, e->d_name);
        n++;
    }
    if (dh)
        closedir(dh);
    return n;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *b = malloc(1 << 20);
    assert_non_null(b);
    *len = fread(b, 1, 1 << 20, f);
    fclose(f);
    return b;
}

static void spill(const char *path, const char *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

/* (1) The second compile in a process is a memory hit with the text compile_ptx makes. */
static void test_memory_hit(void **state)
{
    (void)state;
    Made m = make(2.0, 256);
    char *direct = NULL, *a = compile(m, 90, false), *b = compile(m, 90, false), path[1024];
    assert_int_equal(compile_ptx(m.ctx, m.p, 90, false, &direct), ASTITCH_OK);
    assert_string_equal(a, direct);
    assert_string_equal(b, direct);
    CompileCacheStats s = stats();
    assert_int_equal(s.misses, 1);
    assert_int_equal(s.memory_hits, 1);
    assert_int_equal(s.disk_hits, 0);
    assert_int_equal(s.disk_writes, 1);
    assert_int_equal(entries(dir, path), 1);
    free(a), free(b), free(direct);
    unmake(m);
}

/* (2) A fresh memory layer (a later process) reads the entry from disk, then keeps it. */
static void test_disk_hit(void **state)
{
    (void)state;
    Made m = make(2.0, 256);
    char *a = compile(m, 90, false);
    compile_cache_reset();
    char *b = compile(m, 90, false), *c = compile(m, 90, false);
    assert_string_equal(a, b);
    assert_string_equal(a, c);
    CompileCacheStats s = stats();
    assert_int_equal(s.misses, 0);
    assert_int_equal(s.disk_hits, 1);
    assert_int_equal(s.memory_hits, 1);
    free(a), free(b), free(c);
    unmake(m);
}

/* Damage number `kind` done to the entry bytes[0..len) (or the foreign entry instead); the
 * damaged file's bytes, malloc'd, with their count in *n. */
static char *damage(int kind, const char *bytes, size_t len, const char *foreign, size_t flen,
                    size_t *n)
{
    static const size_t flip_at[] = {3, 9, 20, 30, 34, 42, 50, 70}; /* header fields, key */
    char *b = malloc(len + flen + 1);
    assert_non_null(b);
    memcpy(b, bytes, len);
    *n = len;
    if (kind < 8)
        b[flip_at[kind]] ^= 0x5a;
    else if (kind == 8)
        b[len - 2] ^= 0x01; /* inside the PTX: only the checksum sees it */
    else if (kind == 9)
        *n = len - 1; /* truncated */
    else if (kind == 10)
        *n = 0;
    else if (kind == 11)
        memset(b, '#', *n = 100); /* garbage */
    else if (kind == 12)
        b[(*n)++] = '\n'; /* a byte too many */
    else
        memcpy(b, foreign, *n = flen); /* another key's valid entry */
    return b;
}

/* (3) Damaged or foreign entries are misses, the PTX is rebuilt equal and the entry rewritten
 * byte for byte. */
static void test_corrupt(void **state)
{
    (void)state;
    Made m = make(2.0, 256), other = make(3.0, 256);
    char path[1024], opath[1024], odir[600];
    char *good = compile(m, 90, false);
    assert_int_equal(entries(dir, path), 1);
    snprintf(odir, sizeof odir, "%s/other", dir);
    assert_int_equal(astitch_context_set_option(other.ctx, "cache_dir", odir), ASTITCH_OK);
    free(compile(other, 90, false));
    assert_int_equal(entries(odir, opath), 1);
    size_t len, flen;
    char *bytes = slurp(path, &len), *foreign = slurp(opath, &flen);
    assert_true(len > 100);
    for (int kind = 0; kind < 14; kind++) {
        size_t n, rlen;
        char *b = damage(kind, bytes, len, foreign, flen, &n);
        spill(path, b, n);
        free(b);
        compile_cache_reset();
        char *again = compile(m, 90, false);
        assert_string_equal(again, good);
        CompileCacheStats s = stats();
        if (s.disk_rejects != 1 || s.misses != 1 || s.disk_writes != 1)
            fail_msg("damage %d: rejects %ld misses %ld writes %ld", kind, s.disk_rejects,
                     s.misses, s.disk_writes);
        char *rewritten = slurp(path, &rlen);
        assert_int_equal(rlen, len);
        assert_memory_equal(rewritten, bytes, len);
        free(rewritten), free(again);
    }
    free(foreign), free(bytes), free(good);
    unmake(m), unmake(other);
}

/* (4) Whatever the PTX depends on changes the key: a constant, a shape, sm, split. */
static void test_key(void **state)
{
    (void)state;
    Made base = make(2.0, 256), konst = make(2.5, 256), shape = make(2.0, 512);
    char path[1024];
    for (int round = 0; round < 2; round++) {
        char *a = compile(base, 90, false), *b = compile(konst, 90, false);
        char *c = compile(shape, 90, false), *d = compile(base, 80, false);
        char *e = compile(base, 90, true);
        assert_string_not_equal(a, b);
        assert_string_not_equal(a, c);
        assert_string_not_equal(a, d);
        assert_non_null(strstr(d, "sm_80"));
        CompileCacheStats s = stats();
        assert_int_equal(s.misses, 5);
        assert_int_equal(s.memory_hits, round ? 5 : 0);
        free(a), free(b), free(c), free(d), free(e);
    }
    assert_int_equal(entries(dir, path), 5);
    unmake(base), unmake(konst), unmake(shape);
}

/* (5) A cache directory that cannot be made or is off never fails a compile; missing parents
 * are made 0700; without ASTITCH_CACHE_DIR the XDG and HOME places are used. */
static void test_dirs(void **state)
{
    (void)state;
    Made m = make(2.0, 256);
    char d[700], path[1024];
    struct stat st;
    snprintf(d, sizeof d, "%s/file", dir);
    spill(d, "x", 1);
    snprintf(d, sizeof d, "%s/file/sub", dir); /* its parent is a file: even root cannot */
    assert_int_equal(astitch_context_set_option(m.ctx, "cache_dir", d), ASTITCH_OK);
    for (int off = 0; off < 2; off++) {
        compile_cache_reset();
        free(compile(m, 90, false));
        free(compile(m, 90, false));
        CompileCacheStats s = stats();
        assert_int_equal(s.misses, 1);
        assert_int_equal(s.memory_hits, 1);
        assert_int_equal(s.disk_writes, 0);
        /* the disk cache off */
        assert_int_equal(astitch_context_set_option(m.ctx, "cache_dir", ""), ASTITCH_OK);
    }
    const char *home = getenv("HOME");
    char *saved = home ? strdup(home) : NULL;
    for (int place = 0; place < 3; place++) {
        const char *where[] = {"made/a/b", "xdg", "home"};
        const char *tail[] = {"made/a/b", "xdg/astitch", "home/.cache/astitch"};
        snprintf(d, sizeof d, "%s/%s", dir, where[place]);
        unsetenv("ASTITCH_CACHE_DIR");
        unsetenv("XDG_CACHE_HOME");
        setenv(place == 0 ? "ASTITCH_CACHE_DIR" : place == 1 ? "XDG_CACHE_HOME" : "HOME", d, 1);
        Made here = make(2.0, 256); /* a context reads the environment when it is made */
        compile_cache_reset();
        free(compile(here, 90, false));
        unmake(here);
        snprintf(d, sizeof d, "%s/%s", dir, tail[place]);
        assert_int_equal(entries(d, path), 1);
        assert_int_equal(stat(d, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0700);
    }
    if (saved)
        setenv("HOME", saved, 1);
    free(saved);
    setenv("ASTITCH_CACHE_DIR", dir, 1); /* as setup left it, for the contexts of later tests */
    unmake(m);
}

/* (6) ASTITCH_CACHE=0 or off: no layer is used, nothing is counted or written. */
static void test_disabled(void **state)
{
    (void)state;
    Made m = make(2.0, 256);
    char path[1024];
    const char *values[] = {"0", "off"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(astitch_context_set_option(m.ctx, "cache", values[i]), ASTITCH_OK);
        char *a = compile(m, 90, false), *b = compile(m, 90, false);
        assert_string_equal(a, b);
        free(a), free(b);
    }
    CompileCacheStats s = stats();
    assert_int_equal(s.misses + s.memory_hits + s.disk_hits + s.disk_writes, 0);
    assert_int_equal(entries(dir, path), 0);
    assert_int_equal(astitch_context_set_option(m.ctx, "cache", NULL), ASTITCH_OK);
    free(compile(m, 90, false));
    assert_int_equal(stats().misses, 1);
    unmake(m);
}

static void *compile_thread(void *arg)
{
    Made m = make(2.0, 256);
    char *ptx = NULL;
    *(astitch_status *)arg = cached_compile_ptx(m.ctx, m.p, 90, false, &ptx);
    unmake(m);
    return ptx;
}

/* Several threads (each its own graph, same key) get the same text; every call is counted. */
static void test_threads(void **state)
{
    (void)state;
    pthread_t t[4];
    astitch_status st[4];
    char *ptx[4], path[1024];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, compile_thread, &st[i]), 0);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(t[i], (void **)&ptx[i]), 0);
        assert_int_equal(st[i], ASTITCH_OK);
        assert_string_equal(ptx[i], ptx[0]);
    }
    CompileCacheStats s = stats();
    assert_int_equal(s.misses + s.memory_hits + s.disk_hits, 4);
    assert_true(s.misses >= 1);
    assert_int_equal(entries(dir, path), 1);
    for (int i = 0; i < 4; i++)
        free(ptx[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_memory_hit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disk_hit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dirs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_disabled, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
