/*
 * dot_gemm.h: whether a dot is one strided-batched GEMM over its operands as they lie in
 * memory (dense, row-major), and its sizes, transposes, leading dimensions and batch strides
 * if so. Pure: no CUDA, no allocation. dot_lower.c transposes the operands of a float dot
 * that is none; the runtime's exec_dot.c maps the answer onto cuBLASLt.
 *
 * The dot's output is [batch dims, lhs free dims, rhs free dims] (each in operand order),
 * row-major, so it is C[B, M, N] with C[b, i, j] at b*M*N + i*N + j. The GEMM is
 *
 *   C[b, i, j] = sum over k of A[b, i, k] * Bm[b, k, j]
 *
 * where A is the lhs seen as [B, M, K] and Bm the rhs seen as [B, K, N]: each operand's batch
 * axes (in listed order) collapse to one dim, its free axes (ascending) to M or N, its contract
 * axes (in the order of the lhs's contract axes, the pairs moved together) to K. A group of
 * axes collapses when, leaving out axes of extent 1, each axis's stride is the next one's
 * stride times its extent; the group's stride is then its last axis's.
 */
#ifndef ASTITCH_DOT_GEMM_H
#define ASTITCH_DOT_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"

typedef enum DotGemmKind {
    DOT_GEMM_NONE,  /* not one strided-batched GEMM: `why` says what breaks it */
    DOT_GEMM_EMPTY, /* B, M or N is 0: the output has no elements, nothing to do */
    DOT_GEMM_ZEROS, /* K is 0 (B, M, N not): the output is all zeros */
    DOT_GEMM_GEMM   /* the GEMM below */
} DotGemmKind;

/* One operand in row-major terms. lhs A[b, i, k]: at b*batch_stride + i*ld + k when not
 * trans (K is contiguous), at b*batch_stride + k*ld + i when trans (M is contiguous). rhs
 * Bm[b, k, j]: at b*batch_stride + k*ld + j when not trans (N contiguous), at
 * b*batch_stride + j*ld + k when trans (K contiguous). ld is at least the contiguous extent
 * and at least 1; batch_stride is 0 when B is 1. Strides and lds count elements. */
typedef struct DotGemmOperand {
    bool trans;
    int64_t ld;
    int64_t batch_stride;
} DotGemmOperand;

typedef struct DotGemm {
    DotGemmKind kind;
    astitch_dtype dtype;    /* operands' and output's */
    int64_t batch, m, n, k; /* every one fits an int32 for DOT_GEMM_GEMM */
    DotGemmOperand lhs, rhs;
    char why[160];          /* DOT_GEMM_NONE: the reason, for messages */
} DotGemm;

/* dot_gemm.c */
/* Fills *out for dot node `id` of g (its operands and output dense, row-major). */
void dot_gemm_layout(const astitch_graph *g, int32_t id, DotGemm *out);

#endif
