/*
 * compile_cache.h: the compile cache of the CUDA target's PTX, private to libastitch.
 * compile_cache.c implements it (key, memory, entry points), compile_cache_disk.c its files.
 * It also keeps the variant search's choices (exec's variant.c), as short texts by a key of
 * their own kind.
 *
 * LLVM code generation is the expensive part of compiling a plan for a GPU; the PTX it makes
 * depends only on the key: the graph's JSON, the plan's JSON (device model, options, mapping),
 * sm, whole or as parts, the library's version and build, and ASTITCH_CUDA_PATH (libdevice). The cache
 * keeps PTX by that key in two layers, looked up in order:
 *
 *   memory   process-wide, bounded (64 entries, 64 MiB; the oldest goes first), mutex-guarded
 *   disk     one file per key in $ASTITCH_CACHE_DIR, else $XDG_CACHE_HOME/astitch, else
 *            $HOME/.cache/astitch; written whole (temp file + rename), checked whole on read
 *            (magic, format, key hash, exact key, PTX checksum); anything invalid is a miss
 *
 * A hit compares the whole key text, so a hash collision never returns foreign PTX. No cache
 * failure (a directory that cannot be made, a full disk, a corrupt file) is an error: the PTX
 * is compiled instead. ASTITCH_CACHE=0 (or "off") turns both layers off; ASTITCH_CACHE_DIR=""
 * (or "off" or "0") only the disk. All functions are safe to call from several threads.
 */
#ifndef ASTITCH_COMPILE_CACHE_H
#define ASTITCH_COMPILE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "astitch/astitch.h"
#include "astitch/plan.h"
#include "ir/config.h"

/* compile_ptx (codegen/compile.h) through the cache: the same contract and the same text.
 * *ptx is malloc'd; errors are compile_ptx's, on ctx. */
astitch_status cached_compile_ptx(astitch_context *ctx, const astitch_plan *p, int sm,
                                  bool as_parts, char **ptx);

/* Replaces the entry of (p, sm, as_parts) in both layers with ptx: the PTX the CUDA runtime
 * settled on after relaxing a spilling kernel's register bound (exec_cuda.c), so that a later
 * compile loads it at once. A no-op when the cache is off; failures only lose the entry. */
void compile_cache_replace(const astitch_plan *p, int sm, bool as_parts, const char *ptx);

/* The variant search's choice for plan p (the planner's default form) on sm, as recorded by
 * compile_cache_set_choice in either layer: the index of the chosen form, 0 (the default) to 9
 * (one digit; the caller checks it against its forms); -1 when none is recorded, the entry is
 * not one digit, or the cache is off. Entries live beside the PTX (same key, kind "variant"). */
int compile_cache_choice(const astitch_plan *p, int sm);
void compile_cache_set_choice(const astitch_plan *p, int sm, int choice);

/* The bound search's verdict for plan p (a form's) on sm, kind "bound" beside the PTX: true
 * when compile_cache_set_bound_kept recorded that its kernel ran faster at the planned register
 * bound than at the next one. (A raised bound that won is recorded as the PTX itself, through
 * compile_cache_replace.) False when nothing is recorded or the cache is off. */
bool compile_cache_bound_kept(const astitch_plan *p, int sm);
void compile_cache_set_bound_kept(const astitch_plan *p, int sm);

/* The dot algorithm search's choices for plan p on sm (exec_dot.c: per dot in plan order, the
 * index of its chosen candidate, -1 for none), kind "dots" beside the PTX: true when an entry
 * of exactly n indices, each -1 to 99, is recorded (into choice); false when none is, it is
 * malformed, or the cache is off. */
bool compile_cache_dot_choices(const astitch_plan *p, int sm, int *choice, int n);
void compile_cache_set_dot_choices(const astitch_plan *p, int sm, const int *choice, int n);

/* What the cache did since the process started or the last compile_cache_reset. */
typedef struct CompileCacheStats {
    long memory_hits;  /* found in memory */
    long disk_hits;    /* found on disk (then kept in memory too) */
    long misses;       /* compiled (caches on, key made) */
    long disk_writes;  /* entries written to disk */
    long disk_rejects; /* entry files present but invalid: corrupt, truncated, foreign */
} CompileCacheStats;

void compile_cache_stats(CompileCacheStats *out);
/* Empties the memory layer and zeroes the counters (for tests); the disk is left alone. */
void compile_cache_reset(void);

/* ---- between compile_cache.c and compile_cache_disk.c ---------------------------------------- */

#define CACHE_PATH_BYTES 4096

typedef struct CacheKey {
    char *text;       /* malloc'd; len > 0 bytes */
    size_t len;
    uint64_t hash[2]; /* cache_hash of text: high, low */
    const char *kind; /* "ptx", "variant", "bound" or "dots": the disk file's name prefix */
    const Config *config; /* the switches of the plan's context: the disk cache's directory */
} CacheKey;

/* compile_cache.c */
/* FNV-1a 128 of s[0..n) into h (high, low). */
void cache_hash(const void *s, size_t n, uint64_t h[2]);

/* compile_cache_disk.c */
/* Writes the disk cache's directory and k's entry path (each CACHE_PATH_BYTES); false when
 * the disk cache is off or the paths do not fit. */
bool cache_disk_paths(const CacheKey *k, char *dir, char *path);
/* The PTX of the entry file at path for k, malloc'd, or NULL when the file is absent
 * (*invalid false) or is not a whole valid entry for k (*invalid true). */
char *cache_disk_read(const char *path, const CacheKey *k, bool *invalid);
/* Writes the entry of k and ptx[0..n) to path, whole or not at all (a temp file in dir,
 * which is created 0700 with its missing parents, renamed over path); true when written. */
bool cache_disk_write(const char *dir, const char *path, const CacheKey *k, const char *ptx,
                      size_t n);

#endif
