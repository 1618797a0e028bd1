/*
 * bench_case.h: one graph of astitch-bench being measured, shared by bench_run.c (the modes:
 * compile, verify) and bench_time.c (the timing of a verified executable).
 */
#ifndef ASTITCH_BENCH_CASE_H
#define ASTITCH_BENCH_CASE_H

#include <stddef.h>

#include "bench.h"
#include "diff_check.h"

/* What one case needs while it is measured. */
typedef struct BenchCase {
    astitch_graph *g;
    const DiffRef *ref;
    const BenchOptions *o;
    BenchCuda *cuda;
    const BenchDevice *dev;
    int nin, nout;
    size_t *bytes; /* per parameter, then per output */
    double first_compile_ms; /* a graph with compute ops: its first compile, under the first
                              * mode's options (compute_on_gpu), which the first mode's own
                              * compile then finds in the memory cache; 0: none */
} BenchCase;

/* Marks row r as failed with status ("error", "WRONG", "skipped") and the note fmt % msg. */
void bench_fail(BenchRow *r, const char *status, const char *fmt, const char *msg);

/* Times executable x (verified) on the device: runs back to back over rotating sets of inputs
 * and outputs, CUDA-graph replays, batched replays, the kernel and compute steps, a device copy
 * of the same bytes; the outputs are checked again after each. Fills r, or marks it failed. */
void bench_time_cuda(BenchCase *c, astitch_executable *x, BenchRow *r);
/* The host target: a smoke run, host clock around astitch_execute; the outputs checked. */
void bench_time_host(BenchCase *c, astitch_executable *x, BenchRow *r);

#endif
