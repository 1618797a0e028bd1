/*
 * warm_up.h: the process's one-time set-up, paid before any graph of a benchmark is timed.
 *
 * The first compile of a process also pays for what every later one shares: the CUDA driver and
 * context, LLVM's target, the parse of libdevice (its math subset is kept for the process). A
 * benchmark that timed it as its first graph's compile would charge one graph for the process.
 * bench_warm_up compiles a small built-in layer norm (a row reduction and a libdevice rsqrt),
 * which is in no suite, and keeps its executable loaded so that the driver's context lives;
 * the benchmarks report its time apart from the graphs'.
 */
#ifndef ASTITCH_BENCH_WARM_UP_H
#define ASTITCH_BENCH_WARM_UP_H

#include <stddef.h>

#include "astitch/runtime.h"

typedef struct BenchWarmUp {
    astitch_context *ctx;
    astitch_graph *g;
    astitch_executable *x;
    double ms; /* the warm-up's compile, wall milliseconds */
} BenchWarmUp;

/* Compiles the warm-up graph for target t with the default options; 0, or -1 with why in err
 * (len bytes) and nothing to end. */
int bench_warm_up(astitch_target t, BenchWarmUp *w, char *err, size_t len);
/* Frees what bench_warm_up kept; accepts a zeroed w. */
void bench_warm_up_end(BenchWarmUp *w);

#endif
