/*
 * bench.h: astitch-bench, a map of its files.
 *
 *   astitch_bench.c  options, the suite (a list of graph.json files), the loop over graphs
 *   bench_run.c      one graph: every mode compiled, verified against the reference, timed
 *   bench_time.c     the timing of one verified case (bench_case.h: what the two share)
 *   bench_report.c   the text table, CSV and JSON
 *   bench_cuda.c     the driver calls of the benchmark itself (bench_cuda.h)
 *   warm_up.c        the process's one-time set-up, compiled before any case (warm_up.h)
 *   ../tests/diff_check.c  random inputs, the reference run and the comparison (shared with the
 *                    differential tests)
 *
 * What is timed (docs in bench/RESULTS.md): astitch_execute_device on device buffers, queued
 * back to back on one stream after a warm-up, one CUDA event between consecutive runs; the
 * median of the runs. Inputs and outputs rotate among several sets so that the sets together
 * exceed twice the L2 cache. Then the same with one run per set captured into a CUDA graph
 * and the graphs replayed instead (graph_us); then many runs captured into one CUDA graph and
 * replayed (batch_us: the kernels without a graph launch per run); then a device copy of the
 * same bytes queued like the runs (copy_us: the copy rate at this size).
 */
#ifndef ASTITCH_BENCH_H
#define ASTITCH_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "astitch/runtime.h"

#define BENCH_MAX_MODES 16

/* A fusion mode and its ablation switches. */
typedef struct BenchMode {
    const char *name;
    const char *what;
    astitch_fusion fusion;
    bool remote, merge, packing;
    bool persistent; /* every kernel one persistent wave */
    int form;        /* BenchForm: how a graph with a variant choice runs */
    bool no_column_vectors; /* plan option column_vectors off */
    bool column_sums;    /* plan option column_sums_in_rows on */
    bool no_recompute;   /* plan option recompute_outputs off */
    bool no_row_vectors; /* plan option row_vectors off */
    bool no_online;      /* plan option online_softmax off */
    bool no_carry;       /* plan option carry off */
    bool no_transpose_tiles; /* plan option transpose_tiles off */
    bool no_hoist;       /* plan option hoist off */
    bool split_barriers; /* plan option split_barriers on */
    bool dense_outputs;  /* compile option view_outputs off: outputs that are views of an input
                          * are written too (every other mode leaves them as views) */
} BenchMode;

/* The form a graph with a variant choice (docs/codegen.md, *Variant search*) runs in. */
typedef enum { BENCH_FORM_SEARCH, BENCH_FORM_DEFAULT, BENCH_FORM_WIDE, BENCH_FORM_LONG } BenchForm;

typedef struct BenchOptions {
    astitch_target target;           /* cuda or host */
    const BenchMode *mode[BENCH_MAX_MODES];
    int nmode;
    int runs;                        /* most timed runs per case */
    int min_runs;
    double max_seconds;              /* stop timing a case after about this much device time */
    uint64_t seed;                   /* random inputs; printed */
    bool perturbed;                  /* verify with the conditioning slack (2 reference runs) */
    const char *filter;              /* substring of graph names, or NULL */
    const char *csv, *json;          /* output files, or NULL */
    const char *commit;              /* recorded in the JSON */
    const char *command;             /* the command line, recorded in the JSON */
} BenchOptions;

/* What the benchmark knows of the device: from the driver, or the host's virtual device. */
typedef struct BenchDevice {
    char name[256];
    int driver_version;
    int sm_count;
    double l2_bytes;
    double copy_gbps;                /* device-to-device copy, read + write; 0 on host */
    double setup_ms;                 /* the process's one-time set-up: the compile of the
                                      * built-in warm-up graph (warm_up.h), before any case */
} BenchDevice;

/* One graph under one mode. */
typedef struct BenchRow {
    char graph[96];
    char file[512];
    char mode[24];
    const char *status;              /* "ok", "WRONG" (outputs differ), "error", "skipped" */
    char note[320];                  /* why not ok, or "" */
    char variant[320];               /* the variant search's outcome (cuda), or "" */
    int kernels;                     /* launched per run (plan kernels with blocks) */
    int coop_kernels;                /* of which with grid barriers (cooperative) */
    double bytes;                    /* each parameter read once + each output written once */
    double plan_ms, compile_ms;      /* planning alone; graph -> loaded module (plan included) */
    double median_us, min_us, p90_us;
    double graph_us;                 /* median of CUDA-graph replays of the runs; 0: not timed */
    double batch_us;                 /* per run, batch_runs runs replayed from one CUDA graph:
                                      * no graph launch between runs; 0: not timed */
    int batch_runs;
    double pct_copy_batch;           /* batch_us's rate against the 1 GiB copy rate */
    double copy_us;                  /* median of device copies of bytes / 2 (read and written)
                                      * queued back to back over the same sets: the copy rate at
                                      * this size, timed as median_us is; 0: not timed */
    double kernels_us, compute_us;   /* a plan with compute ops: the medians of its kernel steps
                                      * and of its compute steps (dot, custom), summed, over
                                      * event-timed runs (astitch_execute_device_timed); 0: none */
    int relaxed, spilling;           /* loaded kernels whose register bound the runtime relaxed;
                                      * loaded kernels still using local memory (spills) */
    int runs, sets;
    double gbps, pct_copy;
    double max_error;                /* normalized, as tests/diff_check.c measures it */
} BenchRow;

typedef struct BenchCuda BenchCuda;

/* astitch_bench.c */
double bench_now(void);                       /* monotonic seconds */
double bench_median(double *v, int n);        /* sorts v */

/* bench_run.c */
/* Loads `path` and appends one row per mode to *rows (grown with realloc). Returns 0, or -1
 * when no GPU is there after all (the caller stops with exit status 77). */
int bench_graph(const char *path, const BenchOptions *o, BenchCuda *cuda, const BenchDevice *dev,
                BenchRow **rows, int *nrows);
/* The modes by name ("none", "xla", "atm", "hdm", "stitch-noremote", "stitch-nopack",
 * "stitch-persistent", "stitch-default", "stitch-wide", "stitch"); NULL for an unknown
 * name. */
const BenchMode *bench_mode(const char *name);
const BenchMode *bench_mode_at(int i);        /* NULL after the last */

/* bench_report.c */
void bench_print_header(FILE *f, const BenchOptions *o, const BenchDevice *dev);
void bench_print_row(FILE *f, const BenchRow *r, const BenchRow *rows, int nrows);
void bench_print_summary(FILE *f, const BenchDevice *dev, const BenchRow *rows, int n);
int bench_write_csv(const char *path, const BenchRow *rows, int n);
int bench_write_json(const char *path, const BenchOptions *o, const BenchDevice *dev,
                     const BenchRow *rows, int n);

#endif
