/*
 * config.h: the switches libastitch takes from the environment, read in config.c and nowhere
 * else. Each is read when it is consulted, so a program (or a test) may change one between
 * calls; what each value means is decided there too.
 *
 *   ASTITCH_DUMP_PLAN    planner: "1" prints the finished plan, "after:<step>" the plan after
 *                        each run of a step (docs/planner.md); unset, empty or "0": nothing
 *   ASTITCH_FORCE_PARTS  runtime: every kernel with global barriers runs as its parts, as when
 *                        its blocks cannot all be resident; unset, empty or "0": off
 *   ASTITCH_LIBCUDA      runtime: the CUDA driver library to open (default libcuda.so.1)
 *   ASTITCH_CUDA_PATH    codegen and the compile cache: the CUDA toolkit root (libdevice,
 *                        ptxas); unset or empty: the configured one
 *   ASTITCH_CACHE        "0" or "off": no compile cache (memory or disk)
 *   ASTITCH_CACHE_DIR    the disk cache's directory; empty, "0" or "off": no disk cache;
 *                        unset: $XDG_CACHE_HOME/astitch (an absolute XDG_CACHE_HOME), else
 *                        $HOME/.cache/astitch
 *   PATH, TMPDIR         ptxas: where else to find it, where its files go (default /tmp)
 */
#ifndef ASTITCH_CONFIG_ENV_H
#define ASTITCH_CONFIG_ENV_H

#include <stdbool.h>
#include <stddef.h>

/* ASTITCH_DUMP_PLAN's value when it asks for a dump, else NULL. */
const char *config_dump_plan(void);
bool config_force_parts(void);
/* The driver library to dlopen. */
const char *config_libcuda(void);
/* ASTITCH_CUDA_PATH when set and not empty, else NULL (the caller's default). */
const char *config_cuda_path(void);
bool config_cache_on(void);
/* Writes the disk cache's directory into dir (len bytes); false when the disk cache is off, no
 * directory can be named, or the name does not fit. */
bool config_cache_dir(char *dir, size_t len);
/* PATH, or NULL. */
const char *config_search_path(void);
/* The directory for temporary files: TMPDIR when set and not empty, else /tmp. */
const char *config_tmpdir(void);

#endif
