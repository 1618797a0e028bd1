/*
 * check_tolerance.h: how close an output must be to the reference interpreter's, shared by
 * astitch-run --check, the differential tests and astitch-bench (docs/astitch-run.md).
 * Errors are normalized: |out - ref| / max(1, max |ref| over finite ref).
 */
#ifndef ASTITCH_TOOLS_CHECK_TOLERANCE_H
#define ASTITCH_TOOLS_CHECK_TOLERANCE_H

#include "astitch/astitch.h"

/* Conditioning: the reference also runs on its float inputs each moved by a few ulps of their
 * dtype (f32 by +-CHECK_PERTURB relative, f16 and bf16 by one ulp: a value's own rounding),
 * and an element may differ from the reference by its tolerance plus CHECK_SLACK times the
 * reference's own change there, normalized like the error: an ill-conditioned element (a
 * saturated tanh of a long sum, a bf16 softmax whose largest logits are a rounding apart) is
 * held only to what its conditioning allows. */
#define CHECK_PERTURB 0x1.0p-22
#define CHECK_SLACK 8

#include <stdbool.h>
#include <stdint.h>

/* Moves every element of a float tensor t as above (f32 by +-CHECK_PERTURB relative; a
 * finite nonzero f16 or bf16 by one ulp up or down in magnitude, never to an infinity), the
 * directions from a splitmix64 stream of seed and index; other dtypes are left as they are. */
void check_perturb(const astitch_tensor_info *t, void *data, uint64_t seed, int index);

/* The tolerance for dtype t: f32 1e-4, f16 1e-2, bf16 4e-2, 0 (exact) for integers and bool. */
double check_tolerance(astitch_dtype t);
/* Whether a zero of float dtype t must have the reference's sign (max(-0, +0) is +0): not in
 * f16, where every value under 2^-25 in magnitude rounds to a zero, so that the zero's sign is
 * that of a value far below the rounding of the ops that made it. */
bool check_zero_sign_counts(astitch_dtype t);
/* The tolerance of output i of g: that of the least precise float dtype on any path into it
 * (the output's own included), since an f32 output computed through f16 or bf16 carries their
 * rounding, and at least K x 2^-23 for the longest contraction K of a float dot on such a
 * path: a GEMM sums its K products in f32 (the reference in double), whose rounding grows
 * with K (about 1e-5 normalized, 1e-4 at worst seen, after BERT's K = 3072 and a layer norm);
 * 0 (exact) for an integer or bool output. */
double check_output_tolerance(const astitch_graph *g, int output);

/* Random inputs at a model's scale: a float parameter that is the right operand of a float dot
 * (directly or through reshape, transpose, broadcast_in_dim, slice and convert) is a weight,
 * and its random values are multiplied by 2^-e with e = ceil(log2(K) / 2) for the longest
 * contraction K it takes part in, so that a product of K terms stays of the order of its
 * operands, as with nn.Linear's U(-1/sqrt(K), 1/sqrt(K)); without it a chain of dots grows by
 * sqrt(K) each and a layer's attention scores reach thousands, where a rounding decides a
 * softmax. Returns e, 0 for every other parameter (and for i out of range). A power of two
 * keeps every drawn value exact in its dtype. */
int check_input_scale_exponent(const astitch_graph *g, int i);

#endif
