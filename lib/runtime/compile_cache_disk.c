/*
 * compile_cache_disk.c: the compile cache's files (compile_cache.h).
 *
 *   where    $ASTITCH_CACHE_DIR ("", "off", "0": no disk cache), else $XDG_CACHE_HOME/astitch
 *            (an absolute XDG_CACHE_HOME only, as the XDG spec says), else $HOME/.cache/astitch
 *   entry    <dir>/ptx-<key hash as 32 hex digits>: a 64-byte header, the key, the PTX
 *   header   integers little-endian: magic "ASTITCHC", format version (u64), key hash (u64
 *            high, u64 low), key length (u64), PTX length (u64), FNV-1a 128 of the PTX
 *   write    a temp file in the same directory renamed over the entry: readers see the old
 *            entry or the new one, never a part
 *   read     the whole entry checked (size, magic, format, key hash, exact key, checksum);
 *            anything else is invalid, a miss that the rebuilt entry then replaces
 *
 * Nothing here is an error to the caller: a failure is a miss or an entry not written.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compile_cache.h"
#include "ir/config.h"

#define ENTRY_MAGIC "ASTITCHC"
#define ENTRY_FORMAT 1
#define HEADER_BYTES 64

/* Writes the disk cache's directory and k's entry path; false when the disk cache is off. */
bool cache_disk_paths(const CacheKey *k, char *dir, char *path)
{
    if (!k->config || !config_cache_dir(k->config, dir, CACHE_PATH_BYTES))
        return false;
    int n = snprintf(path, CACHE_PATH_BYTES, "%s/%s-%016" PRIx64 "%016" PRIx64, dir,
                 k->kind ? k->kind : "ptx", k->hash[0], k->hash[1]);
    return n > 0 && n < CACHE_PATH_BYTES;
}

static void put64(unsigned char *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> 8 * i);
}

static uint64_t get64(const unsigned char *b)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | b[i];
    return v;
}

/* The entry header of k and ptx[0..n). */
static void header_make(unsigned char h[HEADER_BYTES], const CacheKey *k, const char *ptx,
                        size_t n)
{
    uint64_t sum[2];
    cache_hash(ptx, n, sum);
    memcpy(h, ENTRY_MAGIC, 8);
    put64(h + 8, ENTRY_FORMAT);
    put64(h + 16, k->hash[0]);
    put64(h + 24, k->hash[1]);
    put64(h + 32, k->len);
    put64(h + 40, n);
    put64(h + 48, sum[0]);
    put64(h + 56, sum[1]);
}

/* True when header h is of format ENTRY_FORMAT, for k, in a file of `size` bytes. */
static bool header_fits(const unsigned char *h, const CacheKey *k, uint64_t size)
{
    uint64_t keylen = get64(h + 32), ptxlen = get64(h + 40);
    return memcmp(h, ENTRY_MAGIC, 8) == 0 && get64(h + 8) == ENTRY_FORMAT &&
           get64(h + 16) == k->hash[0] && get64(h + 24) == k->hash[1] && keylen == k->len &&
           size - HEADER_BYTES - keylen == ptxlen;
}

/* The PTX of the entry file at path for k, malloc'd, or NULL when the file is absent
 * (*invalid false) or is not a whole valid entry for k (*invalid true). */
char *cache_disk_read(const char *path, const CacheKey *k, bool *invalid)
{
    FILE *f = fopen(path, "rb");
    *invalid = f != NULL;
    if (!f)
        return NULL;
    unsigned char h[HEADER_BYTES];
    struct stat st;
    char *key = NULL, *ptx = NULL;
    bool ok = fstat(fileno(f), &st) == 0 && st.st_size >= HEADER_BYTES + (off_t)k->len &&
              fread(h, 1, sizeof h, f) == sizeof h && header_fits(h, k, (uint64_t)st.st_size);
    size_t n = ok ? (size_t)get64(h + 40) : 0;
    if (ok) {
        key = malloc(k->len);
        ptx = malloc(n + 1);
        ok = key && ptx && fread(key, 1, k->len, f) == k->len &&
             memcmp(key, k->text, k->len) == 0 && fread(ptx, 1, n, f) == n;
    }
    if (ok) {
        uint64_t sum[2];
        ptx[n] = '\0';
        cache_hash(ptx, n, sum);
        ok = strlen(ptx) == n && sum[0] == get64(h + 48) && sum[1] == get64(h + 56);
    }
    fclose(f);
    free(key);
    if (!ok) {
        free(ptx);
        return NULL;
    }
    *invalid = false;
    return ptx;
}

/* Creates dir and its missing parents, each 0700; true when dir is then a directory. */
static bool make_dirs(const char *dir)
{
    char buf[CACHE_PATH_BYTES];
    struct stat st;
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(buf, 0700);
            *s = '/';
        }
    mkdir(buf, 0700);
    return stat(buf, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Writes the entry of k and ptx[0..n) to path in dir, whole or not at all (a temp file in dir
 * renamed over path); true when written. */
bool cache_disk_write(const char *dir, const char *path, const CacheKey *k, const char *ptx,
                      size_t n)
{
    char tmp[CACHE_PATH_BYTES + 16];
    snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", dir);
    int fd = make_dirs(dir) ? mkstemp(tmp) : -1;
    if (fd < 0)
        return false;
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        close(fd);
        unlink(tmp);
        return false;
    }
    unsigned char h[HEADER_BYTES];
    header_make(h, k, ptx, n);
    bool ok = fwrite(h, 1, sizeof h, f) == sizeof h && fwrite(k->text, 1, k->len, f) == k->len &&
              fwrite(ptx, 1, n, f) == n;
    ok = fclose(f) == 0 && ok;
    if (ok && rename(tmp, path) == 0)
        return true;
    unlink(tmp);
    return false;
}
