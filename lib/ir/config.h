/*
 * config.h: what libastitch takes from the environment, read in config.c and nowhere else.
 *
 * The switches are a context's (Config, astitch_context.config): read once from the
 * environment when the context is created, changed after through astitch_context_set_option
 * (the name in parentheses), so that a program or a test sets them through the API:
 *
 *   ASTITCH_DUMP_PLAN    (dump_plan) planner: "1" prints the finished plan, "after:<step>" the
 *                        plan after each run of a step (docs/planner.md); unset, empty or
 *                        "0": nothing
 *   ASTITCH_FORCE_PARTS  (force_parts) runtime: every kernel with global barriers runs as its
 *                        parts, as when its blocks cannot all be resident; unset, empty or
 *                        "0": off
 *   ASTITCH_FORCE_LEAN   (force_lean) runtime: every kernel whose grid must be resident runs
 *                        in its lean form, as when it spills (docs/codegen.md, *Targets*);
 *                        unset, empty or "0": off
 *   ASTITCH_CACHE        (cache) "0" or "off": no compile cache (memory or disk)
 *   ASTITCH_CACHE_DIR    (cache_dir) the disk cache's directory; empty, "0" or "off": no disk
 *                        cache; unset: $XDG_CACHE_HOME/astitch (an absolute XDG_CACHE_HOME),
 *                        else $HOME/.cache/astitch (read when the context is created)
 *   ASTITCH_HOST_COMPUTE (host_compute) runtime, cuda target: "1" runs every compute op (dot,
 *                        custom) on the host through the reference interpreter and never
 *                        opens cuBLASLt; unset, empty or "0": dots run on cuBLASLt and custom
 *                        ops through their device forms, and a compute op without a GPU form
 *                        (or a missing cuBLASLt) is an error at compile time
 *   ASTITCH_PTX_JIT      (ptx_jit) runtime, cuda target: what compiles the PTX to machine
 *                        code. Unset or empty: the driver's JIT in the compiling thread, and
 *                        the toolkit's ptxas program ahead, in processes of its own, where it
 *                        is found and the driver loads its cubins; "driver": the driver's JIT
 *                        alone, one module at a time; "nvjitlink": the toolkit's nvJitLink, in
 *                        the compiling thread and ahead on worker threads (an error where it is
 *                        missing)
 *
 * The places of things are the process's, read when consulted:
 *
 *   ASTITCH_LIBCUDA      runtime: the CUDA driver library to open (default libcuda.so.1; the
 *                        driver is opened once per process)
 *   ASTITCH_CUDA_PATH    codegen, the compile cache and the runtime: the CUDA toolkit root
 *                        (libdevice, ptxas, lib64/libcublasLt.so.13); unset or empty: the
 *                        configured one
 *   ASTITCH_NVJITLINK    runtime: the nvJitLink library to open, the only place tried when set
 *                        and not empty; else libnvJitLink.so.13 in $ASTITCH_CUDA_PATH/lib64,
 *                        the configured toolkit's lib64, then the dynamic loader's search
 *   ASTITCH_CUBLASLT     runtime: the cuBLASLt library to open, the only place tried when set
 *                        and not empty; else libcublasLt.so.13 in $ASTITCH_CUDA_PATH/lib64,
 *                        the configured toolkit's lib64, then the dynamic loader's search
 *   ASTITCH_PTXAS        runtime: the ptxas program that compiles modules ahead (ptx_jit
 *                        unset), the only place tried when set and not empty; else
 *                        $ASTITCH_CUDA_PATH/bin/ptxas, the configured toolkit's, then PATH
 *   PATH, TMPDIR         ptxas: where else to find it, where its files go (default /tmp)
 */
#ifndef ASTITCH_CONFIG_ENV_H
#define ASTITCH_CONFIG_ENV_H

#include <stdbool.h>
#include <stddef.h>

typedef enum ConfigSwitch {
    CONFIG_DUMP_PLAN,
    CONFIG_FORCE_PARTS,
    CONFIG_CACHE,
    CONFIG_CACHE_DIR,
    CONFIG_HOST_COMPUTE,
    CONFIG_FORCE_LEAN,
    CONFIG_PTX_JIT,
    CONFIG_SWITCHES
} ConfigSwitch;

/* A context's switches: each value malloc'd, NULL when unset. cache_home is the disk cache's
 * default directory, from XDG_CACHE_HOME or HOME at creation (NULL: none). */
typedef struct Config {
    char *value[CONFIG_SWITCHES];
    char *cache_home;
} Config;

/* Reads every switch from the environment into c (zeroed first); false on memory. */
bool config_from_env(Config *c);
void config_free(Config *c);
/* The switch named name ("dump_plan", ...), or -1. */
int config_switch_named(const char *name);
/* The name of switch i (0 .. CONFIG_SWITCHES - 1), or NULL. */
const char *config_switch_name(int i);
/* Sets switch sw to a copy of value (NULL: unset); false on memory (c unchanged). */
bool config_set(Config *c, ConfigSwitch sw, const char *value);

/* dump_plan's value when it asks for a dump, else NULL. */
const char *config_dump_plan(const Config *c);
bool config_force_parts(const Config *c);
bool config_force_lean(const Config *c);
bool config_host_compute(const Config *c);
/* ptx_jit's value: one of these (AUTO: unset or empty), or -1 for a value it does not take. */
enum { CONFIG_PTX_JIT_AUTO, CONFIG_PTX_JIT_DRIVER, CONFIG_PTX_JIT_NVJITLINK };
int config_ptx_jit(const Config *c);
bool config_cache_on(const Config *c);
/* Writes the disk cache's directory into dir (len bytes); false when the disk cache is off, no
 * directory can be named, or the name does not fit. */
bool config_cache_dir(const Config *c, char *dir, size_t len);

/* The driver library to dlopen. */
const char *config_libcuda(void);
/* ASTITCH_CUBLASLT when set and not empty, else NULL. */
const char *config_cublaslt(void);
/* ASTITCH_NVJITLINK when set and not empty, else NULL. */
const char *config_nvjitlink(void);
/* ASTITCH_PTXAS when set and not empty, else NULL. */
const char *config_ptxas(void);
/* ASTITCH_CUDA_PATH when set and not empty, else NULL (the caller's default). */
const char *config_cuda_path(void);
/* PATH, or NULL. */
const char *config_search_path(void);
/* The directory for temporary files: TMPDIR when set and not empty, else /tmp. */
const char *config_tmpdir(void);

#endif
