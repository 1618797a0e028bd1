/* test_codegen_pieces.c: one small graph for each piece of the kernel generator, planned under
 * fusion=stitch for the host's virtual device. Each test first asserts that the plan really
 * contains the piece (a regional op, a global barrier, a split row, a packed row, a column
 * reduction, a transpose read, a row and a column reduction in one kernel), then runs the
 * generated kernels on the host target with fresh random inputs (the seed is printed) and
 * compares every output with the reference interpreter (tolerances in diff_check.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "diff_check.h"
#include "gen_graph.h"
#include "passes/passes.h"
#include "piece.h"
#include "runtime/runtime.h"

static astitch_op_info op_info(const Piece *t, astitch_node n)
{
    astitch_op_info info;
    assert_int_equal(astitch_plan_node_info(t->plan, n, &info), ASTITCH_OK);
    return info;
}

static astitch_kernel_info kernel_info(const Piece *t, int k)
{
    astitch_kernel_info info;
    assert_int_equal(astitch_plan_kernel_info(t->plan, k, &info), ASTITCH_OK);
    return info;
}

/* The mapping of the phase that materializes node n. */
static astitch_mapping phase_mapping(const Piece *t, astitch_node n)
{
    astitch_op_info op = op_info(t, n);
    assert_true(op.kernel >= 0 && op.phase >= 0);
    astitch_phase_info ph;
    assert_int_equal(astitch_plan_phase_info(t->plan, op.kernel, op.phase, &ph), ASTITCH_OK);
    return ph.mapping;
}

/* Softmax over short rows: the row max is read by every element of its row in the same block,
 * so it stays in shared memory (regional) behind a block barrier. */
/* A softmax over rows of 50: with streamed rows (packing off) its max and sum are regional
 * values in shared memory; with resident rows, in the registers of every lane of the row. */
static void regional_softmax(bool resident)
{
    Piece t;
    piece_begin(&t);
    int64_t d[2] = {96, 50}, axis = 1;
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
    astitch_node max = astitch_reduce(t.g, ASTITCH_REDUCE_MAX, x, 1, &axis);
    astitch_node e = astitch_unary(t.g, ASTITCH_OP_EXP,
                                   astitch_binary(t.g, ASTITCH_OP_SUB, x, broadcast_rows(t.g, max, d)));
    astitch_node sum = astitch_reduce(t.g, ASTITCH_REDUCE_SUM, e, 1, &axis);
    astitch_node y = astitch_binary(t.g, ASTITCH_OP_DIV, e, broadcast_rows(t.g, sum, d));
    astitch_add_output(t.g, y);
    piece_compile_packing(&t, resident);
    assert_int_equal(astitch_plan_num_kernels(t.plan), 1);
    assert_int_equal(op_info(&t, max).scheme, ASTITCH_SCHEME_REGIONAL);
    astitch_kernel_info k = kernel_info(&t, 0);
    astitch_phase_info ph;
    assert_int_equal(astitch_plan_phase_info(t.plan, 0, 0, &ph), ASTITCH_OK);
    assert_int_equal(ph.resident, resident);
    assert_true(k.block_barriers > 0);
    assert_int_equal(k.global_barriers, 0);
    if (resident)
        assert_int_equal(k.shared_bytes, 0); /* 50 = 2 x 25: a vector of 2, no reduce buffer */
    else
        assert_true(k.shared_bytes > 0);
    piece_check_and_end(&t, resident ? "regional, resident rows" : "regional, shared memory");
}

static void test_regional(void **state)
{
    (void)state;
    regional_softmax(false);
    regional_softmax(true);
}

/* Scaling columns by exp(mean): every element reads its column's mean, to which blocks across
 * all rows contributed, so it goes through global memory and a global barrier. */
static void test_global(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    int64_t d[2] = {512, 24}, axis = 0, cols[1] = {1};
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
    astitch_node sum = astitch_reduce(t.g, ASTITCH_REDUCE_SUM, x, 1, &axis);
    double inv = 1.0 / 512;
    astitch_node mean = astitch_binary(t.g, ASTITCH_OP_MUL, sum,
                                       astitch_constant(t.g, ASTITCH_F32, 1, &d[1], &inv, 1));
    mean = astitch_unary(t.g, ASTITCH_OP_EXP, mean); /* heavy: computed once per column */
    astitch_node y = astitch_binary(t.g, ASTITCH_OP_MUL, x,
                                    astitch_broadcast_in_dim(t.g, mean, 2, d, cols));
    astitch_add_output(t.g, y);
    piece_compile(&t);
    assert_int_equal(astitch_plan_num_kernels(t.plan), 1);
    astitch_scheme s = op_info(&t, sum).scheme;
    assert_true(s == ASTITCH_SCHEME_GLOBAL || op_info(&t, mean).scheme == ASTITCH_SCHEME_GLOBAL);
    assert_true(kernel_info(&t, 0).global_barriers > 0);
    piece_check_and_end(&t, "global");
}

/* Two long rows: each is split across blocks and the partial sums meet across blocks. */
static void test_split_row(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    int64_t d[2] = {2, 30000}, axis = 1;
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
    astitch_node sum = astitch_reduce(t.g, ASTITCH_REDUCE_SUM, x, 1, &axis);
    astitch_add_output(t.g, sum);
    piece_compile(&t);
    astitch_mapping m = phase_mapping(&t, sum);
    assert_int_equal(m.kind, ASTITCH_MAP_ROW_REDUCE);
    assert_true(m.split > 1);
    assert_true(m.split_len * m.split >= m.row_len);
    piece_check_and_end(&t, "split row");
}

/* Many rows of 8: several rows share a block, a few lanes each (horizontal packing). */
static void test_packed_row(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    int64_t d[2] = {1000, 8}, axis = 1;
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
    astitch_node sum = astitch_reduce(t.g, ASTITCH_REDUCE_MAX, x, 1, &axis);
    astitch_add_output(t.g, sum);
    piece_compile(&t);
    astitch_mapping m = phase_mapping(&t, sum);
    assert_int_equal(m.kind, ASTITCH_MAP_ROW_REDUCE);
    assert_true(m.rows_per_block > 1);
    assert_true(m.threads_per_row < 32);
    assert_int_equal(m.split, 1);
    piece_check_and_end(&t, "packed row");
}

/* A reduction over the leading axis: threads across the kept columns. */
static void test_column_reduce(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    int64_t d[2] = {300, 40}, axis = 0;
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
    astitch_node sum = astitch_reduce(t.g, ASTITCH_REDUCE_SUM, x, 1, &axis);
    astitch_add_output(t.g, sum);
    piece_compile(&t);
    astitch_mapping m = phase_mapping(&t, sum);
    assert_int_equal(m.kind, ASTITCH_MAP_COLUMN_REDUCE);
    assert_int_equal(m.rows, 40);
    assert_int_equal(m.row_len, 300);
    piece_check_and_end(&t, "column reduce");
}

/* An element-wise op reading a transposed operand: the read's index is permuted in the
 * kernel, nothing is materialized for the transpose. */
static void test_transpose(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    int64_t dx[3] = {6, 40, 9}, dy[3] = {9, 6, 40}, perm[3] = {2, 0, 1};
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 3, dx);
    astitch_node z = astitch_parameter(t.g, "z", ASTITCH_F32, 3, dy);
    astitch_node tr = astitch_transpose(t.g, x, perm);
    astitch_node y = astitch_binary(t.g, ASTITCH_OP_ADD, astitch_unary(t.g, ASTITCH_OP_TANH, tr), z);
    astitch_add_output(t.g, y);
    piece_compile(&t);
    assert_int_equal(astitch_plan_num_kernels(t.plan), 1);
    astitch_op_info ti = op_info(&t, tr);
    assert_int_equal(ti.kernel, 0);
    assert_int_equal(ti.scheme, ASTITCH_SCHEME_LOCAL);
    assert_int_equal(ti.evals, 6 * 40 * 9);
    piece_check_and_end(&t, "transpose");
}

/* Layer-norm backward's shape: a row reduction and a column reduction of the same product in
 * one kernel, each with its own mapping. */
static void test_row_and_column(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    int64_t d[2] = {128, 48}, rows = 1, cols = 0;
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
    astitch_node dy = astitch_parameter(t.g, "dy", ASTITCH_F32, 2, d);
    astitch_node p = astitch_binary(t.g, ASTITCH_OP_MUL, x, dy);
    astitch_node row_sum = astitch_reduce(t.g, ASTITCH_REDUCE_SUM, p, 1, &rows);
    astitch_node col_sum = astitch_reduce(t.g, ASTITCH_REDUCE_SUM, p, 1, &cols);
    astitch_add_output(t.g, row_sum);
    astitch_add_output(t.g, col_sum);
    piece_compile(&t);
    assert_int_equal(astitch_plan_num_kernels(t.plan), 1);
    assert_int_equal(phase_mapping(&t, row_sum).kind, ASTITCH_MAP_ROW_REDUCE);
    assert_int_equal(phase_mapping(&t, col_sum).kind, ASTITCH_MAP_COLUMN_REDUCE);
    assert_int_equal(op_info(&t, row_sum).kernel, op_info(&t, col_sum).kernel);
    piece_check_and_end(&t, "row and column");
}

/* The PTX of g's kernels for the h100 model (no ptxas needed). */
static char *h100_ptx(Piece *t)
{
    astitch_device h100;
    assert_int_equal(astitch_device_builtin("h100", &h100), ASTITCH_OK);
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    o.device = &h100;
    char *ptx = NULL;
    if (astitch_emit(t->g, &o, "ptx", &ptx) != ASTITCH_OK)
        fail_msg("emit: %s", astitch_last_error(t->ctx));
    return ptx;
}

/* The PTX of y = x * z + x over [rows, cols] f32 for the h100 model. */
static char *axpy_ptx(Piece *t, int64_t rows, int64_t cols)
{
    int64_t d[2] = {rows, cols};
    astitch_node x = astitch_parameter(t->g, "x", ASTITCH_F32, 2, d);
    astitch_node z = astitch_parameter(t->g, "z", ASTITCH_F32, 2, d);
    astitch_add_output(t->g, astitch_binary(t->g, ASTITCH_OP_ADD,
                                            astitch_binary(t->g, ASTITCH_OP_MUL, x, z), x));
    return h100_ptx(t);
}

/* x ** e for a splat constant e of 2, 3 and 4 is a product of x (no libdevice powf: its
 * polynomials' fma never appear in the PTX); 2.5 stays a powf, so the check can fail. On
 * the host target every form agrees with C's pow on signed zeros, infinities, NaN, overflow,
 * underflow and negative bases, and with the reference on random inputs. */
static astitch_node power_of(Piece *t, astitch_node x, const int64_t *d, double e)
{
    return astitch_binary(t->g, ASTITCH_OP_POW, x, astitch_constant(t->g, ASTITCH_F32, 1, d, &e, 1));
}

static void test_power_products(void **state)
{
    (void)state;
    static const double exps[] = {2, 3, 4, 2.5};
    enum { N = 12 };
    for (int general = 0; general < 2; general++) {
        Piece t;
        piece_begin(&t);
        int64_t d[1] = {N};
        astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 1, d);
        for (int i = 0; i < 3 + general; i++)
            astitch_add_output(t.g, power_of(&t, x, d, exps[i]));
        char *ptx = h100_ptx(&t);
        assert_true((strstr(ptx, "fma.rn.f32") != NULL) == (general != 0));
        astitch_free(ptx);
        piece_compile(&t);
        static const float in[N] = {-0.0f, 0.0f, INFINITY, -INFINITY, NAN, -2.0f, 3.0f, 1e20f,
                                    -1e20f, 1e-20f, -1.5f, 0.3f};
        float out[4][N];
        const void *ins[1] = {in};
        void *outs[4] = {out[0], out[1], out[2], out[3]};
        assert_int_equal(astitch_execute(t.x, ins, outs), ASTITCH_OK);
        for (int i = 0; i < 3 + general; i++)
            for (int j = 0; j < N; j++) {
                float want = (float)pow((double)in[j], exps[i]), got = out[i][j];
                bool same = isnan(want) ? isnan(got)
                                        : signbit(want) == signbit(got) &&
                                              (want == got || fabsf(got - want) <= 2e-7f * fabsf(want));
                if (!same)
                    fail_msg("pow(%g, %g): %g, want %g", (double)in[j], exps[i], (double)got,
                             (double)want);
            }
        piece_check_and_end(&t, general ? "pow, general exponent" : "pow, integer exponents");
    }
}

/* Element-wise phases whose element count allows it move 4 elements per thread with 16-byte
 * vector loads and stores; an odd count keeps scalar accesses. Both run correctly. */
static void test_vector_access(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    char *ptx = axpy_ptx(&t, 64, 1024);
    assert_non_null(strstr(ptx, "ld.global.v4.f32"));
    assert_non_null(strstr(ptx, "st.global.v4.f32"));
    astitch_free(ptx);
    piece_compile(&t);
    piece_check_and_end(&t, "vector access");

    piece_begin(&t);
    ptx = axpy_ptx(&t, 33, 7);
    assert_null(strstr(ptx, ".v4."));
    assert_null(strstr(ptx, ".v2."));
    assert_non_null(strstr(ptx, "st.global.f32"));
    astitch_free(ptx);
    piece_compile(&t);
    piece_check_and_end(&t, "scalar access");
}

/* A rotary embedding over [6, 4, 32] bf16 (tokens, heads, head dim) with cos and sin tables
 * [6, 32] broadcast over heads: x * cos + cat(f(x[..., half:]), x[..., :half]) * sin, f = neg
 * (cheap operands: the concatenate selects between both, no branch) or exp (a branch per run),
 * half = 16 (runs of 8 stay whole) or 12 (a run straddles the boundary: element by element). */
static astitch_node rotary(astitch_graph *g, int64_t half, astitch_op f)
{
    int64_t d[3] = {6, 4, 32}, dt[2] = {6, 32}, bd[2] = {0, 2};
    int64_t lo[3] = {0, 0, 0}, mid_hi[3] = {6, 4, half}, mid_lo[3] = {0, 0, half};
    astitch_node x = astitch_convert(g, astitch_parameter(g, "x", ASTITCH_BF16, 3, d), ASTITCH_F32);
    astitch_node cs = astitch_broadcast_in_dim(
        g, astitch_convert(g, astitch_parameter(g, "cos", ASTITCH_BF16, 2, dt), ASTITCH_F32), 3, d, bd);
    astitch_node sn = astitch_broadcast_in_dim(
        g, astitch_convert(g, astitch_parameter(g, "sin", ASTITCH_BF16, 2, dt), ASTITCH_F32), 3, d, bd);
    astitch_node parts[2] = {astitch_unary(g, f, astitch_slice(g, x, mid_lo, d, NULL)),
                             astitch_slice(g, x, lo, mid_hi, NULL)};
    astitch_node rot = astitch_concatenate(g, 2, parts, 2);
    astitch_node y = astitch_binary(g, ASTITCH_OP_ADD, astitch_binary(g, ASTITCH_OP_MUL, x, cs),
                                    astitch_binary(g, ASTITCH_OP_MUL, rot, sn));
    return astitch_convert(g, y, ASTITCH_BF16);
}

/* Element-wise phases evaluate runs of 8 bf16 elements through slices, broadcasts and
 * concatenates (emit_vector.c): every tensor read stays one 16-byte load, and a run that
 * crosses a concatenate boundary falls back to elements; the bf16 result is rounded by
 * cvt.rn.bf16.f32. Each form runs against the reference
 * under the h100 model and the host's. */
/* Whether ptx loads a 2-byte element alone (typed u16, or b16 when LLVM sees a bfloat). */
static bool scalar_2byte_load(const char *ptx)
{
    return strstr(ptx, "ld.global.u16") || strstr(ptx, "ld.global.b16");
}

static void test_vector_runs(void **state)
{
    (void)state;
    static const struct { int64_t half; astitch_op f; bool vector; const char *what; } form[] = {
        {16, ASTITCH_OP_NEG, true, "rotary, selected halves"},
        {16, ASTITCH_OP_EXP, true, "rotary, branch per run"},
        {12, ASTITCH_OP_NEG, false, "rotary, runs across the boundary"},
    };
    for (size_t i = 0; i < sizeof form / sizeof form[0]; i++) {
        Piece t;
        piece_begin(&t);
        astitch_add_output(t.g, rotary(t.g, form[i].half, form[i].f));
        char *ptx = h100_ptx(&t);
        assert_non_null(strstr(ptx, "ld.global.v4.b32"));
        assert_true(scalar_2byte_load(ptx) == !form[i].vector);
        /* f32 -> bf16 is the sm_90 conversion instruction, not integer rounding */
        assert_non_null(strstr(ptx, "cvt.rn.bf16.f32"));
        assert_null(strstr(ptx, "setp.nan"));
        if (form[i].f == ASTITCH_OP_NEG && form[i].vector)
            assert_null(strstr(ptx, "bra.uni"));
        astitch_free(ptx);
        piece_compile_with(&t, true, false, "h100");
        piece_check_and_end(&t, form[i].what);
    }
    /* a concatenate along a middle axis of a transpose that keeps the innermost axis and a
     * broadcast over the middle axis, plus a per-row value broadcast along the run (uniform) */
    Piece t;
    piece_begin(&t);
    int64_t dp[3] = {2, 6, 32}, dc[2] = {6, 32}, dr[1] = {6}, dy[3] = {6, 3, 32};
    int64_t perm[3] = {1, 0, 2}, bc[2] = {0, 2}, br[1] = {0};
    int64_t db[3] = {6, 1, 32};
    astitch_node a = astitch_transpose(t.g, astitch_parameter(t.g, "p", ASTITCH_F16, 3, dp), perm);
    astitch_node b = astitch_broadcast_in_dim(t.g, astitch_parameter(t.g, "c", ASTITCH_F16, 2, dc),
                                              3, db, bc);
    astitch_node parts[2] = {a, b};
    astitch_node cat = astitch_concatenate(t.g, 2, parts, 1);
    astitch_node r = astitch_broadcast_in_dim(t.g, astitch_parameter(t.g, "r", ASTITCH_F16, 1, dr),
                                              3, dy, br);
    astitch_add_output(t.g, astitch_binary(t.g, ASTITCH_OP_MUL, cat, r));
    piece_compile_with(&t, true, false, "h100");
    piece_check_and_end(&t, "middle-axis concatenate");
    piece_begin(&t);
    astitch_add_output(t.g, rotary(t.g, 16, ASTITCH_OP_NEG));
    piece_compile(&t);
    piece_check_and_end(&t, "rotary, host device model");
}

/* Layer normalization: sum, mean (a phase over the rows), centered square sum, rstd (over the
 * rows), output. Every phase reads the earlier ones at its own rows, so the whole kernel runs
 * as one walk over each block's tiles (emit_phase.c): several tiles per block when it is
 * persistent, one otherwise. With `reshaped` the output is reshaped to [3, 100, 96] (a layer's
 * [batch, seq, hidden]), which is read at the same linear index and so stays in the run. With
 * device "h100" the rows are resident: the run keeps them in registers and the kernel moves
 * its minimal bytes (once, the reshaped output's phase read x from memory again). */
static void tile_run_with(bool persistent, bool reshaped, const char *device)
{
    Piece t;
    piece_begin(&t);
    int64_t d[2] = {300, 96}, axis = 1;
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
    astitch_node inv_n = astitch_constant(t.g, ASTITCH_F32, 1, d, (double[]){1.0 / 96}, 1);
    astitch_node mean = astitch_binary(t.g, ASTITCH_OP_MUL,
                                       astitch_reduce(t.g, ASTITCH_REDUCE_SUM, x, 1, &axis), inv_n);
    astitch_node c = astitch_binary(t.g, ASTITCH_OP_SUB, x, broadcast_rows(t.g, mean, d));
    astitch_node var = astitch_binary(t.g, ASTITCH_OP_MUL, inv_n,
        astitch_reduce(t.g, ASTITCH_REDUCE_SUM, astitch_binary(t.g, ASTITCH_OP_MUL, c, c), 1, &axis));
    astitch_node rstd = astitch_unary(t.g, ASTITCH_OP_RSQRT, var);
    astitch_node y = astitch_binary(t.g, ASTITCH_OP_MUL, c, broadcast_rows(t.g, rstd, d));
    astitch_add_output(t.g, reshaped ? astitch_reshape(t.g, y, 3, (int64_t[]){3, 100, 96}) : y);
    piece_compile_with(&t, true, persistent, device);
    assert_int_equal(astitch_plan_num_kernels(t.plan), 1);
    const PlanKernel *k = &t.plan->kernel[0];
    assert_true(k->nphase >= 3);
    if (device) /* 10 tiles of 32 resident rows: one per block */
        assert_int_equal(k->phase[0].map.tasks_per_block, 1);
    else if (persistent)
        assert_true(k->phase[0].map.tasks_per_block > 1); /* several tiles per block */
    else
        assert_true(k->grid > k->blocks_per_wave);
    for (int32_t ph = 0; ph < k->nphase; ph++) {
        assert_int_equal(k->phase[ph].run_first, 0);
        assert_true(k->phase[ph].resident || !device);
    }
    if (device)
        assert_int_equal(k->moved_bytes, k->min_bytes);
    char what[64];
    snprintf(what, sizeof what, "tile run%s%s%s", persistent ? ", persistent" : "",
             reshaped ? ", reshaped output" : "", device ? ", h100 model" : "");
    piece_check_and_end(&t, what);
}

static void test_tile_run(void **state)
{
    (void)state;
    for (int i = 0; i < 8; i++)
        tile_run_with(i & 1, i & 2, i & 4 ? "h100" : NULL);
}

/* The second reduction reads the first one's result of the next row (a rotation by slice and
 * concatenate), which another block may own: a global barrier separates the phases, and they
 * must not run tile by tile. */
static void test_tile_run_refused(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    int64_t d[2] = {300, 96}, axis = 1, r[1] = {300}, one[1] = {1};
    int64_t zero[1] = {0}, step[1] = {1};
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
    astitch_node s = astitch_reduce(t.g, ASTITCH_REDUCE_SUM, x, 1, &axis);
    astitch_node parts[2] = {astitch_slice(t.g, s, one, r, step),
                             astitch_slice(t.g, s, zero, one, step)};
    astitch_node next = astitch_concatenate(t.g, 2, parts, 0);
    astitch_node y = astitch_binary(t.g, ASTITCH_OP_SUB, x, broadcast_rows(t.g, next, d));
    astitch_add_output(t.g, astitch_reduce(t.g, ASTITCH_REDUCE_MAX, y, 1, &axis));
    piece_compile(&t);
    const PlanKernel *k = &t.plan->kernel[t.plan->nkernel - 1];
    assert_true(k->nphase >= 2);
    for (int32_t ph = 0; ph < k->nphase; ph++)
        assert_int_equal(k->phase[ph].run_first, ph);
    piece_check_and_end(&t, "tile run refused");
}

/* RMSNorm without dominant merging on the H100 model: the square-sum phase and the rstd phase
 * over its rows form a tile run. The reduction workspace of the one and the rstd buffer of the
 * other have disjoint phase ranges, yet a run keeps both live across its tiles, so no two
 * shared-memory buffers that a run uses may share bytes (they did once: the next tile's
 * workspace overwrote the rstd of the tile before). */
static void test_tile_run_buffers(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    int64_t d[2] = {4096, 4096}, axis = 1, rows[1] = {4096}, b0 = 0;
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
    astitch_node ms = astitch_binary(t.g, ASTITCH_OP_MUL,
                                     astitch_reduce(t.g, ASTITCH_REDUCE_SUM,
                                                    astitch_binary(t.g, ASTITCH_OP_MUL, x, x), 1, &axis),
                                     astitch_constant(t.g, ASTITCH_F32, 1, rows, (double[]){1.0 / 4096}, 1));
    astitch_node rstd = astitch_unary(t.g, ASTITCH_OP_RSQRT, ms);
    astitch_add_output(t.g, astitch_binary(t.g, ASTITCH_OP_MUL, x,
                                           astitch_broadcast_in_dim(t.g, rstd, 2, d, &b0)));
    astitch_device dev;
    assert_int_equal(astitch_device_builtin("h100", &dev), ASTITCH_OK);
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    o.merge = false;
    astitch_plan *plan;
    assert_int_equal(astitch_plan_create(t.g, &dev, &o, &plan), ASTITCH_OK);
    const PlanKernel *k = &plan->kernel[0];
    int runs = 0;
    for (int32_t ph = 1; ph < k->nphase; ph++)
        runs += k->phase[ph].run_first != ph;
    assert_true(runs > 0);
    for (int32_t a = 0; a < k->nbuf; a++)
        for (int32_t b = a + 1; b < k->nbuf; b++) {
            const PlanBuffer *x1 = &k->buf[a], *y1 = &k->buf[b];
            if (x1->kind == ASTITCH_BUFFER_SCRATCH || x1->kind == ASTITCH_BUFFER_PARTIAL ||
                y1->kind == ASTITCH_BUFFER_SCRATCH || y1->kind == ASTITCH_BUFFER_PARTIAL)
                continue;
            /* their phase ranges, taken as whole runs, meet (run_first never decreases) */
            bool same_run = k->phase[x1->first_phase].run_first <= k->phase[y1->last_phase].run_first &&
                            k->phase[y1->first_phase].run_first <= k->phase[x1->last_phase].run_first;
            bool overlap = x1->offset < y1->offset + y1->bytes && y1->offset < x1->offset + x1->bytes;
            if (same_run && overlap)
                fail_msg("buffers %d and %d of one tile run share bytes", (int)a, (int)b);
        }
    astitch_plan_destroy(plan);
    astitch_graph_destroy(t.g);
    astitch_context_destroy(t.ctx);
}

/* A run whose phase now waits for a global barrier (its regional input turned global under a
 * shared-memory limit) ends before that phase; the run's later phases run alone. */
static void test_tile_run_cut(void **state)
{
    (void)state;
    PlanPhase ph[5] = {
        {.barrier = ASTITCH_BARRIER_NONE, .run_first = 0},
        {.barrier = ASTITCH_BARRIER_BLOCK, .run_first = 0},
        {.barrier = ASTITCH_BARRIER_GLOBAL, .run_first = 0},
        {.barrier = ASTITCH_BARRIER_BLOCK, .run_first = 0},
        {.barrier = ASTITCH_BARRIER_BLOCK, .run_first = 4},
    };
    PlanKernel k = {.phase = ph, .nphase = 5};
    pass_tiles_cut(&k);
    const int32_t want[5] = {0, 0, 2, 3, 4};
    for (int i = 0; i < 5; i++)
        assert_int_equal(ph[i].run_first, want[i]);
}

/* A block outside a run's grid passes none of the block barriers between the run's phases, yet
 * a later phase may read shared memory that an earlier phase wrote with only those barriers in
 * between. Random graph seed 88 of the GPU suite, planned for the H100's model (its element-wise
 * group spans the wave of 264 blocks, its resident row runs 8 and 7 of them) and run on the
 * host, whose thread order exposes the race. */
static void test_sat_out_run(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    astitch_graph_destroy(t.g);
    gen_options go;
    gen_options_default(&go);
    go.max_dim = 256; /* as test_gpu_diff.c for seed 88 */
    go.nodes = 10 + 88 % 50;
    t.g = gen_graph(t.ctx, 88, &go);
    assert_non_null(t.g);
    piece_compile_with(&t, true, false, "h100");
    bool sat_out = false; /* a multi-phase run on fewer blocks than its kernel's grid */
    for (int32_t k = 0; k < t.plan->nkernel; k++) {
        const PlanKernel *pk = &t.plan->kernel[k];
        for (int32_t ph = 1; ph < pk->nphase; ph++)
            sat_out = sat_out || (pk->phase[ph].run_first < ph &&
                                  pk->phase[ph].barrier == ASTITCH_BARRIER_BLOCK &&
                                  pk->phase[ph].map.grid < pk->grid);
    }
    assert_true(sat_out);
    piece_check_and_end(&t, "sat-out run");
}


/* Signed zeros: max, min and relu element-wise, and max, min and sum as row reductions, follow
 * the documented rules (-0 orders below +0; relu is max(x, +0); a sum of -0 alone is -0) on the
 * host target bit for bit as in the reference, under every fusion mode; rows of all -0, all +0
 * and both. */
static void test_signed_zero(void **state)
{
    (void)state;
    enum { R = 4, C = 8, N = R * C };
    float x[N], y[N];
    for (int i = 0; i < N; i++) {
        int row = i / C;
        bool neg = row == 0 || (row != 2 && i % 2 == 0) || (row == 3 && i % 3 == 0);
        x[i] = neg ? -0.0f : 0.0f;
        y[i] = i % 5 == 0 ? x[i] : -x[i];
    }
    static const astitch_fusion modes[] = {ASTITCH_FUSION_NONE, ASTITCH_FUSION_XLA, ASTITCH_FUSION_STITCH};
    for (int m = 0; m < 3; m++) {
        Piece t;
        piece_begin(&t);
        int64_t d[2] = {R, C}, axis = 1;
        astitch_node xn = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
        astitch_node yn = astitch_parameter(t.g, "y", ASTITCH_F32, 2, d);
        astitch_add_output(t.g, astitch_binary(t.g, ASTITCH_OP_MAX, xn, yn));
        astitch_add_output(t.g, astitch_binary(t.g, ASTITCH_OP_MIN, xn, yn));
        astitch_add_output(t.g, astitch_reduce(t.g, ASTITCH_REDUCE_MAX, xn, 1, &axis));
        astitch_add_output(t.g, astitch_reduce(t.g, ASTITCH_REDUCE_MIN, xn, 1, &axis));
        astitch_add_output(t.g, astitch_unary(t.g, ASTITCH_OP_RELU, xn));
        astitch_add_output(t.g, astitch_reduce(t.g, ASTITCH_REDUCE_SUM, xn, 1, &axis));
        astitch_compile_options o;
        astitch_compile_options_default(&o);
        o.target = ASTITCH_TARGET_HOST;
        o.plan.fusion = modes[m];
        assert_int_equal(astitch_compile(t.g, &o, &t.x), ASTITCH_OK);
        enum { ALL = 3 * N + 3 * R };
        float got[ALL], want[ALL];
        const void *ins[2] = {x, y};
        void *gots[6] = {got, got + N, got + 2 * N, got + 2 * N + R, got + 2 * N + 2 * R,
                         got + 3 * N + 2 * R};
        void *wants[6] = {want, want + N, want + 2 * N, want + 2 * N + R, want + 2 * N + 2 * R,
                          want + 3 * N + 2 * R};
        memset(got, 0x7f, sizeof got);
        assert_int_equal(astitch_run_reference(t.g, ins, wants), ASTITCH_OK);
        assert_int_equal(astitch_execute(t.x, ins, gots), ASTITCH_OK);
        for (int i = 0; i < N; i++) { /* the reference follows the rule */
            assert_true(!!signbit(want[i]) == (signbit(x[i]) && signbit(y[i])));
            assert_true(!!signbit(want[N + i]) == (signbit(x[i]) || signbit(y[i])));
        }
        assert_true(signbit(want[2 * N]) && !signbit(want[2 * N + 2]));         /* max rows */
        assert_true(signbit(want[2 * N + R + 1]) && !signbit(want[2 * N + R + 2])); /* min rows */
        for (int i = 0; i < N; i++) /* relu(-0) is +0 */
            assert_true(want[2 * N + 2 * R + i] == 0 && !signbit(want[2 * N + 2 * R + i]));
        assert_true(signbit(want[3 * N + 2 * R]) && !signbit(want[3 * N + 2 * R + 2])); /* sums */
        for (int i = 0; i < ALL; i++)
            if (memcmp(&got[i], &want[i], sizeof got[i]) != 0)
                fail_msg("%s: element %d of the outputs: %g, reference %g",
                         astitch_fusion_name(modes[m]), i, (double)got[i], (double)want[i]);
        piece_end(&t);
    }
}

/* A float sum over no elements is +0 (graph-format.md), though a sum of elements starts from
 * -0: [4, 0] summed over its empty axis, alone and read by an add, under every fusion mode. */
static void test_empty_sum(void **state)
{
    (void)state;
    static const astitch_fusion modes[] = {ASTITCH_FUSION_NONE, ASTITCH_FUSION_XLA, ASTITCH_FUSION_STITCH};
    for (int m = 0; m < 3; m++) {
        Piece t;
        piece_begin(&t);
        int64_t d[2] = {4, 0}, r[1] = {4}, axis = 1;
        astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
        astitch_node y = astitch_parameter(t.g, "y", ASTITCH_F32, 1, r);
        astitch_node s = astitch_reduce(t.g, ASTITCH_REDUCE_SUM, x, 1, &axis);
        astitch_add_output(t.g, s);
        astitch_add_output(t.g, astitch_binary(t.g, ASTITCH_OP_ADD, s, y));
        astitch_compile_options o;
        astitch_compile_options_default(&o);
        o.target = ASTITCH_TARGET_HOST;
        o.plan.fusion = modes[m];
        assert_int_equal(astitch_compile(t.g, &o, &t.x), ASTITCH_OK);
        float xv[1] = {0}, yv[4] = {-0.0f, 1.5f, -2.0f, 0.0f}, got[8];
        memset(got, 0x7f, sizeof got);
        const void *ins[2] = {xv, yv};
        void *outs[2] = {got, got + 4};
        assert_int_equal(astitch_execute(t.x, ins, outs), ASTITCH_OK);
        for (int i = 0; i < 4; i++) {
            if (got[i] != 0 || signbit(got[i]))
                fail_msg("%s: empty sum %d is %g", astitch_fusion_name(modes[m]), i, (double)got[i]);
            float want = 0.0f + yv[i]; /* +0 + -0 is +0 */
            if (memcmp(&got[4 + i], &want, sizeof want) != 0)
                fail_msg("%s: sum + y %d is %g, want %g", astitch_fusion_name(modes[m]), i,
                         (double)got[4 + i], (double)want);
        }
        piece_end(&t);
    }
}

/* v = select(v > x, v, x) n times over a few ops, read through a slice and a concatenate:
 * every value is read twice at the index the slice derives, once through the compare. */
static void build_diamonds(Piece *t, int64_t cols, int n)
{
    int64_t d[2] = {4, cols}, lo[2] = {0, 0}, mid[2] = {0, 8}, half[2] = {4, cols - 8};
    astitch_node x = astitch_parameter(t->g, "x", ASTITCH_F32, 2, d);
    astitch_node v = x;
    static const astitch_op ops[] = {ASTITCH_OP_NEG, ASTITCH_OP_TANH, ASTITCH_OP_SIN};
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 3; k++)
            v = astitch_unary(t->g, ops[k], v);
        v = astitch_select(t->g, astitch_binary(t->g, ASTITCH_OP_GT, v, x), v, x);
    }
    astitch_node parts[2] = {astitch_slice(t->g, v, mid, d, NULL), astitch_slice(t->g, x, lo, half, NULL)};
    astitch_add_output(t->g, astitch_concatenate(t->g, 2, parts, 1));
}

/* The walks compute each value once per index (their memo): the code grows with the number
 * of selects, where computing a value once per path doubled it at every select (10 of them:
 * 32 times the code of 5, not 2). Element-wise (16 columns: runs of 4) and element by element
 * (15), checked against the reference. */
static void test_diamonds_behind_slice(void **state)
{
    (void)state;
    for (int64_t cols = 16; cols >= 15; cols--) {
        size_t len[2];
        Piece t;
        for (int i = 0; i < 2; i++) {
            piece_begin(&t);
            build_diamonds(&t, cols, 5 * (i + 1));
            char *ptx = h100_ptx(&t);
            len[i] = strlen(ptx);
            astitch_free(ptx);
            if (i == 1)
                break;
            astitch_graph_destroy(t.g);
            astitch_context_destroy(t.ctx);
        }
        printf("diamonds behind a slice, %lld columns: %zu bytes of PTX for 5, %zu for 10\n",
               (long long)cols, len[0], len[1]);
        assert_true(len[1] < 3 * len[0]);
        piece_compile(&t);
        piece_check_and_end(&t, cols == 16 ? "diamonds behind a slice, runs" : "diamonds behind a slice");
    }
}

/* A chain of 20,000 element-wise ops in one kernel (a broadcast at its start, a 3-operand
 * select every 2,000 ops): code generation walks it on a stack of its own (the recursive walk
 * overflowed the thread's stack at this depth), and the kernel computes what the reference
 * does. */
static void test_long_chain(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    int64_t d[2] = {4, 16}, row[1] = {16}, cols[1] = {1};
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
    astitch_node r = astitch_parameter(t.g, "r", ASTITCH_F32, 1, row);
    astitch_node v = astitch_binary(t.g, ASTITCH_OP_ADD, x, astitch_broadcast_in_dim(t.g, r, 2, d, cols));
    static const astitch_op ops[] = {ASTITCH_OP_NEG, ASTITCH_OP_TANH, ASTITCH_OP_ABS, ASTITCH_OP_SIN};
    for (int i = 0; i < 20000; i++) {
        v = astitch_unary(t.g, ops[i % 4], v);
        if (i % 2000 == 1999)
            v = astitch_select(t.g, astitch_binary(t.g, ASTITCH_OP_GT, v, x), v, x);
    }
    astitch_add_output(t.g, v);
    piece_compile(&t);
    assert_int_equal(astitch_plan_num_kernels(t.plan), 1);
    piece_check_and_end(&t, "long chain");
}

/* The LLVM IR of t's graph for the host target under `device` (NULL: the host's model). */
static char *piece_llvm(Piece *t, const char *device)
{
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_HOST;
    astitch_device model;
    if (device) {
        assert_int_equal(astitch_device_builtin(device, &model), ASTITCH_OK);
        o.device = &model;
    }
    char *text = NULL;
    if (astitch_emit(t->g, &o, "llvm", &text) != ASTITCH_OK)
        fail_msg("emit: %s", astitch_last_error(t->ctx));
    return text;
}

/* A causal softmax over [2, 3, 24, 24] scores (emit_guard.c): the scores matter only where the
 * key is at most the query, so a resident row's vector of masked scores is never loaded
 * (the phis "guarded"). Variants: the scores in the select's true arm, or in its false arm behind
 * a reshape from [6, 24, 24]; f32 or bf16; and, where the scores are also summed into a second
 * output, no guard (the masked scores matter there). */
static void load_guard_with(bool false_arm, astitch_dtype t, bool second_use, const char *device)
{
    Piece p;
    piece_begin(&p);
    int64_t d[4] = {2, 3, 24, 24}, flat[3] = {6, 24, 24}, axis = 3, keep3[3] = {0, 1, 2};
    astitch_node x = astitch_parameter(p.g, "scores", t, false_arm ? 3 : 4, false_arm ? flat : d);
    astitch_node s = false_arm ? astitch_reshape(p.g, x, 4, d) : x;
    astitch_node scaled = astitch_binary(p.g, ASTITCH_OP_MUL, s,
                                         astitch_constant(p.g, t, 4, d, (double[]){0.125}, 1));
    astitch_node causal = astitch_binary(p.g, ASTITCH_OP_LE, astitch_iota(p.g, ASTITCH_I32, 4, d, 3),
                                         astitch_iota(p.g, ASTITCH_I32, 4, d, 2));
    astitch_node big = astitch_constant(p.g, t, 4, d, (double[]){-1e4}, 1);
    astitch_node masked = false_arm
        ? astitch_select(p.g, astitch_unary(p.g, ASTITCH_OP_NOT, causal), big, scaled)
        : astitch_select(p.g, causal, scaled, big);
    astitch_node m = astitch_reduce(p.g, ASTITCH_REDUCE_MAX, masked, 1, &axis);
    astitch_node ex = astitch_unary(p.g, ASTITCH_OP_EXP, astitch_binary(p.g, ASTITCH_OP_SUB, masked,
                                    astitch_broadcast_in_dim(p.g, m, 4, d, keep3)));
    astitch_node sum = astitch_reduce(p.g, ASTITCH_REDUCE_SUM, ex, 1, &axis);
    astitch_add_output(p.g, astitch_binary(p.g, ASTITCH_OP_DIV, ex,
                                           astitch_broadcast_in_dim(p.g, sum, 4, d, keep3)));
    if (second_use)
        astitch_add_output(p.g, astitch_reduce(p.g, ASTITCH_REDUCE_SUM, s, 1, &axis));
    char *ir = piece_llvm(&p, device);
    bool guarded = strstr(ir, "%guarded") != NULL;
    astitch_free(ir);
    char what[96];
    snprintf(what, sizeof what, "load guard: %s arm, %s%s, %s model", false_arm ? "false" : "true",
             t == ASTITCH_BF16 ? "bf16" : "f32", second_use ? ", scores used twice" : "",
             device ? device : "host");
    if (guarded == second_use)
        fail_msg("%s: %s", what, guarded ? "a load guarded that matters everywhere"
                                         : "no load guarded");
    piece_compile_with(&p, true, false, device);
    piece_check_and_end(&p, what);
}

static void test_load_guard(void **state)
{
    (void)state;
    for (int i = 0; i < 16; i++)
        load_guard_with(i & 1, i & 2 ? ASTITCH_BF16 : ASTITCH_F32, i & 4, i & 8 ? "h100" : NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_regional),      cmocka_unit_test(test_global),
        cmocka_unit_test(test_split_row),     cmocka_unit_test(test_packed_row),
        cmocka_unit_test(test_column_reduce), cmocka_unit_test(test_transpose),
        cmocka_unit_test(test_row_and_column), cmocka_unit_test(test_vector_access),
        cmocka_unit_test(test_tile_run),      cmocka_unit_test(test_tile_run_refused),
        cmocka_unit_test(test_tile_run_buffers), cmocka_unit_test(test_tile_run_cut),
        cmocka_unit_test(test_sat_out_run),   cmocka_unit_test(test_vector_runs),
        cmocka_unit_test(test_power_products), cmocka_unit_test(test_signed_zero),
        cmocka_unit_test(test_long_chain),
        cmocka_unit_test(test_diamonds_behind_slice), cmocka_unit_test(test_empty_sum),
        cmocka_unit_test(test_load_guard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
