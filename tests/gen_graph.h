/*
 * gen_graph.h: random valid graphs for property and differential tests.
 *
 * gen_graph builds a DAG through the public builder API from a seed (same seed, same graph):
 * parameters, constants and iota; light and heavy element-wise ops, compares and selects,
 * converts; broadcasts, reshapes, transposes, slices, concatenations and gathers; row, column
 * and mixed reductions; and (optionally) dots and custom ops that bound stitch scopes. Shapes
 * are drawn from one small family of dimensions so that ops combine often, which makes the
 * graphs dense in the one-to-many dependencies the planner cares about.
 */
#ifndef ASTITCH_TESTS_GEN_GRAPH_H
#define ASTITCH_TESTS_GEN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "astitch/astitch.h"

typedef struct gen_options {
    int nodes;           /* about this many nodes (at least 4) */
    int max_dim;         /* each dimension of the family is in [1, max_dim] */
    int percent_compute; /* share of dot ops, in percent */
    int percent_custom;  /* share of custom ops (target "gen_custom", one input, same shape) */
    int percent_reduce;  /* share of reductions */
    int outputs;         /* extra random outputs besides every node without consumers */
    bool half;           /* also produce f16/bf16 values through converts (their rounding makes
                          * results differ by up to 2^-8 relative between summation orders) */
    bool discontinuous;  /* also use floor, whose result can jump when its input differs in the
                          * last bit (off for differential tests) */
} gen_options;

/* Defaults: 40 nodes, dims up to 8, 5% dots, no custom ops, 15% reductions, 2 outputs, no
 * half types, only continuous ops. */
void gen_options_default(gen_options *o);

/* A fresh random graph on ctx, or NULL with the reason in astitch_last_error (a bug in the
 * generator, since every graph it builds must be valid). Free with astitch_graph_destroy. */
astitch_graph *gen_graph(astitch_context *ctx, uint64_t seed, const gen_options *o);

/* Row reductions of [rows, cols] of every kind whose cross-block combine differs: f32 sum, max
 * and min (atomics), bf16 sum, i64 sum and max, bool any and all (combined in order). With few
 * long rows the planner splits them across blocks. NULL on failure (message in ctx). */
astitch_graph *gen_split_kinds(astitch_context *ctx, int64_t rows, int64_t cols);

/* (x - mean) * rsqrt(var + eps) over the rows of x [rows, cols] (f32), the variance the mean of
 * the squared deviations; *mean (when not NULL) the rows' means. */
astitch_node gen_layer_norm(astitch_graph *g, astitch_node x, int64_t rows, int64_t cols,
                            double eps, astitch_node *mean);

/* x * rsqrt(mean(x * x) + eps) over the rows of x [rows, cols] (f32): RMSNorm before its
 * weight. */
astitch_node gen_rms_norm(astitch_graph *g, astitch_node x, int64_t rows, int64_t cols,
                          double eps);

/* The softmax over the rows of x [rows, cols] (f32): exp(x - max) over its sum. */
astitch_node gen_softmax_rows(astitch_graph *g, astitch_node x, int64_t rows, int64_t cols);

/* exp(dot(x + x, w)) for x [m, k] and w [k, n]: the dot, named "between", is a compute op
 * between two kernels. NULL on failure (message in ctx). */
astitch_graph *gen_dot_between(astitch_context *ctx, int64_t m, int64_t k, int64_t n);

/* The defaults, with what cycles with the seed: f16/bf16 every third seed, dimensions up to 64
 * every fourth (else 8), 10 to 49 nodes, custom ops every fifth. */
void gen_options_cycled(gen_options *o, uint64_t seed);

/* A seed from the clock, for tests that also run a fresh graph each time (print it); the
 * environment variable ASTITCH_FRESH_SEED, when set to a number, replaces it, to replay a
 * failure. */
uint64_t gen_fresh_seed(void);

#endif
