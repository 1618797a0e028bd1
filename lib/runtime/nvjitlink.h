/*
 * nvjitlink.h: PTX to cubin outside the driver, private to libastitch (docs/codegen.md,
 * *Compile time*). A map:
 *
 *   nvjitlink.c   dlopen of the toolkit's libnvJitLink (never linked), one PTX module to one
 *                 cubin for one architecture, the compiler's logs, in the calling thread
 *   ptxas_jit.c   the toolkit's ptxas program, one module in a process of its own
 *   cubin_jobs.c  compiles started ahead on worker threads, each found again by its PTX text
 *
 * Why: the driver's JIT (cuModuleLoadDataEx of PTX) compiles one module at a time per
 * process, whichever threads call it; nvJitLink and ptxas processes compile at once. ptxas
 * compiles the whole program, as the driver's JIT does; nvJitLink compiles PTX as relocatable
 * code, which runs slower on some kernels. By default (ptx_jit unset) cuda_module_load takes
 * the cubin of a job compiled ahead by ptxas where there is one and else the driver's JIT;
 * under "nvjitlink" nvJitLink compiles every module (docs/codegen.md, *Compile time*).
 *
 * Threads: everything here may be called from any thread at once; nvJitLink is opened once
 * per process (RTLD_NODELETE) and each compile has its own nvJitLink handle or process.
 */
#ifndef ASTITCH_NVJITLINK_H
#define ASTITCH_NVJITLINK_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

/* A compiled module: the cubin's bytes and the compiler's info log ("" if none), malloc'd. */
typedef struct Cubin {
    void *image;
    size_t size;
    char *log;
} Cubin;

void cubin_free(Cubin *c);

/* The path nvJitLink was opened from, or NULL when it cannot be (why: nvjitlink_missing).
 * Opens it at the first call. */
const char *nvjitlink_path(void);
/* Why nvJitLink is not open: the places tried and the loader's reasons ("" when open). */
const char *nvjitlink_missing(void);

/* Compiles ptx for sm_<sm> into *out. On failure returns false, *out empty, and writes the
 * reason (nvJitLink's result and its error log) into why (len bytes). */
bool nvjitlink_compile(const char *ptx, int sm, Cubin *out, char *why, size_t len);

/* The ptxas program modules are compiled ahead with: ASTITCH_PTXAS when set (the only place
 * tried), else codegen's ptxas_find; NULL when there is none. Looked up once per process. */
const char *ptxas_jit_path(void);
/* Compiles ptx for sm_<sm> into *out with it, as nvjitlink_compile (the reason: ptxas's
 * output). */
bool ptxas_jit_compile(const char *ptx, int sm, Cubin *out, char *why, size_t len);

/* What compiles a job. */
typedef enum CubinCompiler { CUBIN_BY_NVJITLINK, CUBIN_BY_PTXAS } CubinCompiler;

/* Compiles ahead: a job starts compiling a copy of ptx for sm_<sm> with `by` on a thread of
 * its own, for whoever next needs that text's cubin (cuda_module_load). Nothing starts where
 * that compiler is missing, a thread cannot be made, 16 jobs live already, or a job of the
 * same text, sm and compiler lives. A job can be taken until its owner (the thread that
 * started it, or the one named to cubin_job_start_for) calls cubin_jobs_end_mine. */
void cubin_job_start(const char *ptx, int sm, CubinCompiler by);
/* cubin_job_start for a job that thread `owner` ends (its cubin_jobs_end_mine), started from
 * another thread working on its behalf. */
void cubin_job_start_for(const char *ptx, int sm, CubinCompiler by, pthread_t owner);
/* A copy of the cubin of a living job of this text, sm and compiler, waiting for its compile
 * to end. False (*out empty) when there is no such job, its compile failed, or memory ran
 * out; the caller then compiles itself, for the error's sake too. */
bool cubin_job_take(const char *ptx, int sm, CubinCompiler by, Cubin *out);
/* Ends every job this thread started: none is found by a take from then on. A job whose
 * compile is over is freed here; one still compiling is not waited for, and its thread frees
 * it when done (an exit handler waits for such compiles). */
void cubin_jobs_end_mine(void);
/* Waits until no job's compile runs, ended jobs' included (at exit; for tests). */
void cubin_jobs_wait_running(void);
/* Since the process began: jobs started, cubins taken, and jobs ended that nobody took; and
 * the jobs in the list now, not yet ended (for tests). */
typedef struct CubinJobStats {
    long started, taken, untaken;
    int live;
} CubinJobStats;
CubinJobStats cubin_job_stats(void);

#endif
