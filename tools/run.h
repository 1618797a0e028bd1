/*
 * run.h: the private header of astitch-run, and a map of its files:
 *
 *   run_main.c     the run: load the graph, make or read inputs, run on a target, report
 *   run_options.c  the option table: parsing and --help
 *   run_plan.c     --plan, --dot and --emit: show the plan or the generated code instead of
 *                  running
 *   run_check.c    --check: comparing an output with the reference interpreter's
 *   tensor_io.c    seeded random inputs, checksums, printing of values
 *   npy.c          reading and writing .npy files (the input and output format)
 *
 * Functions that can fail return a tio_status whose values are the exit statuses of
 * astitch-run, and write a one-line message (without the program prefix) into err.
 */
#ifndef ASTITCH_TOOLS_RUN_H
#define ASTITCH_TOOLS_RUN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "astitch/astitch.h"
#include "astitch/plan.h"
#include "astitch/runtime.h"
#include "check_tolerance.h"

typedef enum tio_status {
    TIO_OK = 0,
    TIO_RUNTIME = 1, /* the run failed: memory, a write, the library */
    TIO_BAD_INPUT = 2 /* the user gave something unusable: flags, files, shapes */
} tio_status;

/* Size of the message buffers passed as err. */
#define TIO_ERRLEN 512

#define PROG "astitch-run"
/* How many leading values of each output are printed. */
#define NUM_SHOWN 8
#define EXIT_RUNTIME TIO_RUNTIME
#define EXIT_USAGE TIO_BAD_INPUT

typedef struct Options {
    const char *graph;   /* path, or "-" for standard input */
    astitch_target target;
    uint64_t seed;
    const char *inputs;  /* NULL: random inputs from seed */
    const char *outputs; /* NULL: no files */
    const char *plan;    /* --plan: "text" or "json"; NULL: run the graph */
    const char *dot;     /* --dot: Graphviz file of the plan; NULL: none */
    const char *emit;    /* --emit: "ptx" or "llvm"; NULL: run the graph */
    const char *emit_file; /* --emit-file: where --emit writes; NULL: standard output */
    bool has_device;     /* --device given: plan for `device`, else the target's own model
                          * (--plan and --dot: h100) */
    astitch_device device;
    astitch_fusion fusion; /* default stitch */
    bool no_remote, no_merge, no_packing, no_one_pass_variance, no_recompute_outputs,
        deterministic,
        persistent, wide_rows, long_rows, no_column_vectors, column_sums_in_rows,
        no_row_vectors, no_online_softmax, no_carry, no_transpose_tiles, no_hoist,
        split_barriers; /* planner switches */
    bool no_variant_search; /* cuda: the planner's default launch shapes only */
    bool view_outputs;   /* outputs that are views of an input left as views */
    bool check;          /* also run the reference and compare every output */
    bool help, version;
} Options;

/* run_options.c */
/* Prints "astitch-run: MESSAGE" and a newline on stderr. */
void run_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Fills o from the command line; returns 0, or EXIT_USAGE after a message. */
int parse_options(int argc, char **argv, Options *o);
/* Prints --help text. */
void print_usage(FILE *f);
/* The planner options of o: fusion and switches. */
void plan_options(const Options *o, astitch_plan_options *po);
/* The library's compile options for o's target, plan options and device (the device points
 * into o). */
void compile_options(const Options *o, astitch_compile_options *co);

/* run_plan.c */
/* Plans g for o's device and fusion and prints it (o->plan) and/or writes its picture
 * (o->dot); returns 0 or an exit status after a message. */
int run_plan(astitch_context *ctx, astitch_graph *g, const Options *o);
/* Writes what the compiler generates for g under o (o->emit: "ptx" or "llvm") to o->emit_file
 * or standard output; returns 0 or an exit status after a message. */
int run_emit(astitch_context *ctx, astitch_graph *g, const Options *o);

/* run_check.c */
/* The worst normalized error of out against ref, both t->elements elements of t->dtype:
 * max |out - ref| / max(1, max |ref| over finite ref); 0 where both are NaN or the same
 * infinity, infinite where only one is NaN or they differ in an infinity. Integers are
 * compared exactly (any difference gives an error above 0). */
double check_error(const astitch_tensor_info *t, const void *out, const void *ref);
/* As check_error for a float output, each element's error less its conditioning slack
 * CHECK_SLACK * |ref - pert| / scale (check_tolerance.h), pert being the reference's output on
 * perturbed inputs; an element where the reference itself changes class (finite, NaN,
 * infinity) is not held to anything. At most check_error. */
double check_error_conditioned(const astitch_tensor_info *t, const void *out, const void *ref,
                               const void *pert);

/* tensor_io.c */
/* Fills data (t->bytes bytes) with the deterministic random values of parameter number
 * `index` under `seed`, floats multiplied by 2^-scale_exponent (a weight's scale,
 * check_input_scale_exponent); the generator is described in docs/astitch-run.md. */
void tio_fill_random(const astitch_tensor_info *t, void *data, uint64_t seed, int index,
                     int scale_exponent);
/* Element i of data as a double (f16/bf16 widened, bool as 0 or 1). */
double tio_element(astitch_dtype t, const void *data, int64_t i);
/* The sum of all elements as doubles, in row-major order. */
double tio_sum(const astitch_tensor_info *t, const void *data);
/* 64-bit FNV-1a hash of n bytes. */
uint64_t tio_fnv1a64(const void *bytes, size_t n);
/* Prints the first n elements of data, separated by spaces, without a newline. */
void tio_print_values(FILE *f, const astitch_tensor_info *t, const void *data, int64_t n);
/* Writes "f32[4,3]" into buf. */
const char *tio_type_str(char *buf, size_t len, const astitch_tensor_info *t);

/* npy.c */
/* Reads the .npy file at path into data, which holds want->bytes bytes; the file's dtype and
 * shape must equal want's (bf16 is stored as '<u2'). */
tio_status tio_npy_read(const char *path, const astitch_tensor_info *want, void *data,
                        char *err, size_t errlen);
/* Writes t's data as a version 1.0 .npy file at path. */
tio_status tio_npy_write(const char *path, const astitch_tensor_info *t, const void *data,
                         char *err, size_t errlen);

#endif
