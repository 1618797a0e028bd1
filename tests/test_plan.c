/*
 * test_plan.c: the paper's cases as assertions on plans, through the public plan API.
 *
 * Figure 7 (one kernel under stitch with reduce.1 regional and power.1, reduce.2 global; four
 * kernels under xla), Figure 4 (a shared producer computed once), Figure 5 (power computed
 * once per element of its own output), the 750000x32 and 64x30000 row reductions of section
 * 2.3.2, the shared-memory fallback of section 4.4, assume-relax-apply (4.5), scope bounds at
 * compute ops, remote stitching, and the ablation switches.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

#include <cmocka.h>

#include "astitch/plan.h"
#include "astitch/runtime.h"
#include "graph_fixture.h"

static astitch_device device(const char *name)
{
    astitch_device d;
    assert_int_equal(astitch_device_builtin(name, &d), ASTITCH_OK);
    return d;
}

static astitch_plan_options opts(astitch_fusion fusion)
{
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    o.fusion = fusion;
    return o;
}

static astitch_scheme scheme_of(const astitch_plan *p, const astitch_graph *g, const char *name)
{
    return op_info(p, g, name).scheme;
}

/* Element evaluations of node `name` summed over every kernel that computes it. */
static int64_t evals_of(const astitch_plan *p, const astitch_graph *g, const char *name)
{
    astitch_node n = astitch_graph_find(g, name);
    int64_t total = 0;
    for (int k = 0; k < astitch_plan_num_kernels(p); k++) {
        astitch_kernel_info ki;
        assert_int_equal(astitch_plan_kernel_info(p, k, &ki), ASTITCH_OK);
        for (int i = 0; i < ki.num_ops; i++) {
            astitch_op_info x;
            assert_int_equal(astitch_plan_kernel_op(p, k, i, &x), ASTITCH_OK);
            if (x.node == n)
                total += x.evals;
        }
    }
    return total;
}

/* ---- Figure 7 ------------------------------------------------------------------------------ */

/* The graph of examples/fig7_subgraph.json (docs/examples.md gives the reconstruction). */
static void build_fig7(astitch_graph *g, int64_t rows, int64_t cols)
{
    int64_t rc[2] = {rows, cols}, bd0[1] = {0}, ax1[1] = {1}, ax0[1] = {0};
    double two = 2.0;
    astitch_node p1 = named(g, astitch_parameter(g, "parameter.1", ASTITCH_F32, 2, rc), "parameter.1");
    astitch_node p2 = named(g, astitch_parameter(g, "parameter.2", ASTITCH_F32, 1, rc), "parameter.2");
    astitch_node b1 = named(g, astitch_broadcast_in_dim(g, p2, 2, rc, bd0), "broadcast.1");
    astitch_node a1 = named(g, astitch_binary(g, ASTITCH_OP_ADD, p1, b1), "add.1");
    astitch_node r1 = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, a1, 1, ax1), "reduce.1");
    astitch_node d1 = named(g, astitch_binary(g, ASTITCH_OP_DIV, r1, p2), "divide.1");
    astitch_node c1 = named(g, astitch_constant(g, ASTITCH_F32, 1, rc, &two, 1), "constant.1");
    astitch_node w1 = named(g, astitch_binary(g, ASTITCH_OP_POW, d1, c1), "power.1");
    astitch_node b2 = named(g, astitch_broadcast_in_dim(g, w1, 2, rc, bd0), "broadcast.2");
    astitch_node r2 = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, b2, 1, ax0), "reduce.2");
    astitch_node m1 = named(g, astitch_binary(g, ASTITCH_OP_MUL, b2, p1), "multiply.1");
    assert_int_equal(astitch_add_output(g, r2), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, m1), ASTITCH_OK);
    assert_int_equal(astitch_graph_status(g), ASTITCH_OK);
}

static void check_fig7_stitch(const astitch_plan *p, const astitch_graph *g)
{
    assert_int_equal(astitch_plan_num_kernels(p), 1);
    assert_int_equal(scheme_of(p, g, "reduce.1"), ASTITCH_SCHEME_REGIONAL);
    assert_int_equal(scheme_of(p, g, "power.1"), ASTITCH_SCHEME_GLOBAL);
    /* reduce.2 is a column reduce split across blocks: combined in global memory */
    assert_int_equal(scheme_of(p, g, "reduce.2"), ASTITCH_SCHEME_GLOBAL);
    assert_int_equal(scheme_of(p, g, "multiply.1"), ASTITCH_SCHEME_INDEPENDENT);
    static const char *const local[] = {"broadcast.1", "add.1", "divide.1", "broadcast.2"};
    for (size_t i = 0; i < sizeof local / sizeof local[0]; i++)
        assert_int_equal(scheme_of(p, g, local[i]), ASTITCH_SCHEME_LOCAL);
    /* Figure 9: reduce.1 and reduce.2 dominate; power.1 and multiply.1 are sub-dominants */
    assert_int_equal(op_info(p, g, "reduce.1").role, ASTITCH_ROLE_DOMINANT);
    assert_int_equal(op_info(p, g, "reduce.2").role, ASTITCH_ROLE_DOMINANT);
    assert_int_equal(op_info(p, g, "power.1").role, ASTITCH_ROLE_SUB_DOMINANT);
    assert_int_equal(op_info(p, g, "multiply.1").role, ASTITCH_ROLE_SUB_DOMINANT);
    assert_int_equal(op_info(p, g, "power.1").group, op_info(p, g, "reduce.1").group);
    assert_int_equal(op_info(p, g, "multiply.1").group, op_info(p, g, "reduce.2").group);
    assert_int_equal(op_info(p, g, "broadcast.2").group, op_info(p, g, "reduce.2").group);
    astitch_kernel_info k;
    assert_int_equal(astitch_plan_kernel_info(p, 0, &k), ASTITCH_OK);
    assert_int_equal(k.num_groups, 2);
    assert_true(k.global_barriers >= 1);
    assert_true(k.block_barriers >= 1);
    assert_true(k.grid <= k.blocks_per_wave);
}

static void fig7_stitch(void **state)
{
    Fixture *f = *state;
    build_fig7(f->g, 1024, 512);
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    static const char *const gpus[] = {"v100", "a100", "h100"};
    for (int i = 0; i < 3; i++) {
        astitch_device d = device(gpus[i]);
        check_fig7_stitch(fixture_plan(f, &d, &o), f->g);
    }
    /* The host's 8-block wave has more column tiles than blocks, so reduce.2 is not split:
     * each block owns whole columns and nothing in the kernel reads it. */
    astitch_device h = device("host");
    astitch_plan *p = fixture_plan(f, &h, &o);
    assert_int_equal(astitch_plan_num_kernels(p), 1);
    assert_int_equal(scheme_of(p, f->g, "reduce.1"), ASTITCH_SCHEME_REGIONAL);
    assert_int_equal(scheme_of(p, f->g, "power.1"), ASTITCH_SCHEME_GLOBAL);
    assert_int_equal(scheme_of(p, f->g, "reduce.2"), ASTITCH_SCHEME_INDEPENDENT);
}

static void fig7_xla(void **state)
{
    Fixture *f = *state;
    build_fig7(f->g, 1024, 512);
    astitch_device d = device("v100");
    astitch_plan_options o = opts(ASTITCH_FUSION_XLA);
    astitch_plan *p = fixture_plan(f, &d, &o);
    assert_int_equal(astitch_plan_num_kernels(p), 4);
    /* the kernels end at reduce.1, power.1, reduce.2 and multiply.1 */
    static const char *const ends[] = {"reduce.1", "power.1", "reduce.2", "multiply.1"};
    bool seen[4] = {false};
    for (int i = 0; i < 4; i++) {
        astitch_op_info x = op_info(p, f->g, ends[i]);
        assert_false(seen[x.kernel]);
        seen[x.kernel] = true;
        assert_true(x.output);
        assert_int_equal(x.role, ASTITCH_ROLE_DOMINANT);
    }
    /* broadcast.2 (cheap) is recomputed by reduce.2's and multiply.1's kernels */
    int copies = 0;
    for (int k = 0; k < 4; k++) {
        astitch_kernel_info ki;
        assert_int_equal(astitch_plan_kernel_info(p, k, &ki), ASTITCH_OK);
        for (int i = 0; i < ki.num_ops; i++) {
            astitch_op_info x;
            assert_int_equal(astitch_plan_kernel_op(p, k, i, &x), ASTITCH_OK);
            copies += x.node == astitch_graph_find(f->g, "broadcast.2");
        }
    }
    assert_int_equal(copies, 2);
}

static void fig7_example_file(void **state)
{
    Fixture *f = *state;
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/examples/fig7_subgraph.json", root ? root : ".");
    FILE *probe = fopen(path, "r");
    if (!probe)
        skip();
    fclose(probe);
    astitch_graph_destroy(f->g);
    f->g = NULL;
    if (astitch_graph_load_json(f->ctx, path, &f->g) != ASTITCH_OK)
        fail_msg("%s", astitch_last_error(f->ctx));
    astitch_device d = device("h100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    check_fig7_stitch(fixture_plan(f, &d, &o), f->g);
    o.fusion = ASTITCH_FUSION_XLA;
    assert_int_equal(astitch_plan_num_kernels(fixture_plan(f, &d, &o)), 4);
}

static void fig7_no_merging(void **state)
{
    Fixture *f = *state;
    build_fig7(f->g, 1024, 512);
    astitch_device d = device("h100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    o.merge = false;
    astitch_plan *p = fixture_plan(f, &d, &o);
    astitch_kernel_info k;
    assert_int_equal(astitch_plan_kernel_info(p, 0, &k), ASTITCH_OK);
    assert_int_equal(k.num_groups, 4);
    assert_int_equal(op_info(p, f->g, "power.1").role, ASTITCH_ROLE_DOMINANT);
    assert_int_equal(op_info(p, f->g, "multiply.1").role, ASTITCH_ROLE_DOMINANT);
}

/* ---- an expensive op broadcast after a rounding ---------------------------------------------- */

/* Llama's rotary table as AOTAutograd hands it over: cos of the angles, rounded to bf16 and
 * widened again, broadcast over batch and heads. cos is computed once per table element
 * (a sub-dominant or dominant, materialized), not once per element of the broadcast; with a
 * neg in the chain too, and with no broadcast after the chain (then it stays local). */
static void heavy_op_broadcast_through_converts(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    int64_t table[2] = {64, 32}, big[3] = {8, 64, 32}, bd[2] = {1, 2};
    astitch_node t = named(g, astitch_parameter(g, "angles", ASTITCH_F32, 2, table), "angles");
    astitch_node x = named(g, astitch_parameter(g, "x", ASTITCH_F32, 3, big), "x");
    astitch_node c = named(g, astitch_unary(g, ASTITCH_OP_COS, t), "cos");
    astitch_node r = astitch_convert(g, astitch_convert(g, c, ASTITCH_BF16), ASTITCH_F32);
    astitch_node b = astitch_broadcast_in_dim(g, r, 3, big, bd);
    astitch_node sn = named(g, astitch_unary(g, ASTITCH_OP_SIN, t), "sin");
    astitch_node nb = astitch_broadcast_in_dim(g, astitch_unary(g, ASTITCH_OP_NEG, sn), 3, big, bd);
    astitch_node e = named(g, astitch_unary(g, ASTITCH_OP_EXP, t), "exp");
    astitch_node local = astitch_binary(g, ASTITCH_OP_MUL, astitch_unary(g, ASTITCH_OP_NEG, e), t);
    astitch_node out = astitch_binary(g, ASTITCH_OP_ADD, astitch_binary(g, ASTITCH_OP_MUL, x, b),
                                      nb);
    assert_int_equal(astitch_add_output(g, out), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, local), ASTITCH_OK);
    astitch_device d = device("h100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    astitch_plan *p = fixture_plan(f, &d, &o);
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "sin" : "cos";
        astitch_role role = op_info(p, g, name).role;
        if (role != ASTITCH_ROLE_DOMINANT && role != ASTITCH_ROLE_SUB_DOMINANT)
            fail_msg("%s is %s, recomputed per element of the broadcast", name,
                     astitch_role_name(role));
        assert_int_equal(evals_of(p, g, name), 64 * 32);
    }
    assert_int_equal(op_info(p, g, "exp").role, ASTITCH_ROLE_MEMBER);
}

/* ---- Figure 4: a producer shared by two consumers -------------------------------------------- */

static void fig4_shared_producer(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    int64_t rc[2] = {4096, 768}, bd1[1] = {1}, ax1[1] = {1};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, rc);
    astitch_node bias = astitch_parameter(g, "bias", ASTITCH_F32, 1, &rc[1]);
    astitch_node bb = named(g, astitch_broadcast_in_dim(g, bias, 2, rc, bd1), "bias.b");
    astitch_node a = named(g, astitch_binary(g, ASTITCH_OP_ADD, x, bb), "A");
    astitch_node b = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, a, 1, ax1), "B");
    astitch_node c = named(g, astitch_reduce(g, ASTITCH_REDUCE_MAX, a, 1, ax1), "C");
    astitch_add_output(g, b);
    astitch_add_output(g, c);
    int64_t elements = rc[0] * rc[1];
    astitch_device d = device("h100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    astitch_plan *p = fixture_plan(f, &d, &o);
    assert_int_equal(astitch_plan_num_kernels(p), 1);
    assert_int_equal(op_info(p, g, "A").scheme, ASTITCH_SCHEME_LOCAL);
    assert_int_equal(op_info(p, g, "B").phase, op_info(p, g, "C").phase);
    assert_int_equal(evals_of(p, g, "A"), elements);
    /* XLA separates B and C and recomputes A in both kernels */
    o.fusion = ASTITCH_FUSION_XLA;
    p = fixture_plan(f, &d, &o);
    assert_int_equal(astitch_plan_num_kernels(p), 2);
    assert_int_equal(evals_of(p, g, "A"), 2 * elements);
}

/* ---- Figure 5: power<2> - broadcast<2,128> - add<2,128> ------------------------------------ */

static void build_fig5(astitch_graph *g)
{
    int64_t s2[1] = {2}, s2x128[2] = {2, 128}, bd0[1] = {0};
    double two = 2.0;
    astitch_node p1 = astitch_parameter(g, "parameter.1", ASTITCH_F32, 1, s2);
    astitch_node c1 = astitch_constant(g, ASTITCH_F32, 1, s2, &two, 1);
    astitch_node w = named(g, astitch_binary(g, ASTITCH_OP_POW, p1, c1), "power.1");
    astitch_node b = named(g, astitch_broadcast_in_dim(g, w, 2, s2x128, bd0), "broadcast.1");
    astitch_node p2 = astitch_parameter(g, "parameter.2", ASTITCH_F32, 2, s2x128);
    astitch_node a = named(g, astitch_binary(g, ASTITCH_OP_ADD, b, p2), "add.1");
    astitch_add_output(g, a);
}

static void fig5_power_once(void **state)
{
    Fixture *f = *state;
    build_fig5(f->g);
    for (int i = 0; astitch_device_builtin_name(i); i++) {
        astitch_device d = device(astitch_device_builtin_name(i));
        for (int merge = 0; merge < 2; merge++) {
            astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
            o.merge = merge;
            astitch_plan *p = fixture_plan(f, &d, &o);
            assert_int_equal(astitch_plan_num_kernels(p), 1);
            assert_int_equal(evals_of(p, f->g, "power.1"), 2);
            assert_int_equal(evals_of(p, f->g, "add.1"), 256);
            /* the block that reads a power value is the block that made it */
            assert_int_equal(scheme_of(p, f->g, "power.1"), ASTITCH_SCHEME_REGIONAL);
            astitch_op_info w = op_info(p, f->g, "power.1");
            astitch_phase_info ph;
            assert_int_equal(astitch_plan_phase_info(p, 0, w.phase, &ph), ASTITCH_OK);
            assert_int_equal(ph.mapping.rows, 2);
        }
    }
}

/* ---- section 2.3.2: irregular row reductions ----------------------------------------------- */

static void build_row_reduce(astitch_graph *g, int64_t rows, int64_t cols)
{
    int64_t rc[2] = {rows, cols}, ax1[1] = {1};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, rc);
    astitch_node r = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, ax1), "row_sum");
    astitch_add_output(g, r);
}

static astitch_mapping phase_mapping_of(const astitch_plan *p, const astitch_graph *g,
                                        const char *name)
{
    astitch_op_info x = op_info(p, g, name);
    astitch_phase_info ph;
    assert_int_equal(astitch_plan_phase_info(p, x.kernel, x.phase, &ph), ASTITCH_OK);
    return ph.mapping;
}

static void row_reduce_750000x32(void **state)
{
    Fixture *f = *state;
    build_row_reduce(f->g, 750000, 32);
    static const char *const devs[] = {"v100", "a100", "h100"};
    for (int i = 0; i < 3; i++) {
        astitch_device d = device(devs[i]);
        astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
        astitch_plan *p = fixture_plan(f, &d, &o);
        astitch_mapping m = phase_mapping_of(p, f->g, "row_sum");
        astitch_kernel_info k;
        assert_int_equal(astitch_plan_kernel_info(p, 0, &k), ASTITCH_OK);
        assert_int_equal(m.kind, ASTITCH_MAP_ROW_REDUCE);
        /* resident rows: 8 lanes of 4 adjacent elements cover a row's 128-byte line, so 32
         * rows share a block of 256 (four per SM at the resident register bound, 32 + 2 x 4
         * rounded to 40: one tile per block, so a thread takes one tile at once) */
        assert_int_equal(m.vector, 4);
        assert_int_equal(m.threads_per_row, 8);
        assert_int_equal(m.rows_per_block, 32);
        assert_int_equal(k.block, 256);
        assert_int_equal(m.split, 1);
        /* no global barrier: a block per tile of 32 rows, in many waves; 40 registers leave
         * room for six blocks per SM */
        assert_false(k.persistent);
        assert_int_equal(m.tasks_per_block, 1);
        assert_int_equal(k.grid, (750000 + 31) / 32);
        assert_int_equal(k.regs, 40);
        assert_int_equal(k.blocks_per_wave, 6 * d.sm_count);
        assert_int_equal(astitch_mapping_elements_per_thread(&m), 4);
        astitch_phase_info ph;
        assert_int_equal(astitch_plan_phase_info(p, 0, 0, &ph), ASTITCH_OK);
        assert_true(ph.resident);
        /* persistent: vertical packing keeps one wave */
        o.persistent = true;
        p = fixture_plan(f, &d, &o);
        m = phase_mapping_of(p, f->g, "row_sum");
        assert_int_equal(astitch_plan_kernel_info(p, 0, &k), ASTITCH_OK);
        assert_true(k.persistent);
        assert_true(m.tasks_per_block > 1);
        assert_true(k.grid <= k.blocks_per_wave);
        assert_int_equal(k.blocks_per_wave, 2 * d.sm_count);
        assert_true(m.chunk * (int64_t)m.grid >= 750000);
        /* one vector of each of its tiles' rows per thread */
        assert_int_equal(astitch_mapping_elements_per_thread(&m), 4 * m.tasks_per_block);
        o.persistent = false;
        /* without packing: one row per block (the XLA mapping of Figure 6-(a)) */
        o.packing = false;
        p = fixture_plan(f, &d, &o);
        m = phase_mapping_of(p, f->g, "row_sum");
        assert_int_equal(m.rows_per_block, 1);
        assert_int_equal(m.threads_per_row, 32);
    }
}

/* wide_rows: a resident row of 768 f32 is one warp's at 24 elements per lane (80 registers
 * assumed, three blocks of 256 per SM), or two warps' at 12 (40 registers, six blocks); a row
 * of 512 takes 16 per lane in one warp either way. The plan text says which. */
static void wide_rows_option(void **state)
{
    Fixture *f = *state;
    static const struct { int64_t cols; int lanes, wide_lanes; } rows[] = {{768, 32, 64}, {512, 32, 32}};
    astitch_device d = device("h100");
    for (int r = 0; r < 2; r++) {
        astitch_graph_destroy(f->g);
        assert_int_equal(astitch_graph_create(f->ctx, &f->g), ASTITCH_OK);
        build_row_reduce(f->g, 4096, rows[r].cols);
        for (int wide = 0; wide < 2; wide++) {
            astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
            o.wide_rows = wide;
            astitch_plan *p = fixture_plan(f, &d, &o);
            astitch_mapping m = phase_mapping_of(p, f->g, "row_sum");
            astitch_kernel_info k;
            assert_int_equal(astitch_plan_kernel_info(p, 0, &k), ASTITCH_OK);
            int lanes = wide ? rows[r].wide_lanes : rows[r].lanes;
            assert_int_equal(m.threads_per_row, lanes);
            assert_int_equal(m.vector, 4);
            assert_int_equal(astitch_mapping_elements_per_thread(&m), rows[r].cols / lanes);
            if (rows[r].cols == 768) /* a warp's row: 80, tightened to 64 for one wave */
                assert_int_equal(k.regs, wide ? 40 : 64);
            char *text;
            assert_int_equal(astitch_plan_text(p, &text), ASTITCH_OK);
            assert_true((strstr(text, ", wide rows\n") != NULL) == wide);
            astitch_free(text);
        }
    }
}

static void row_reduce_64x30000(void **state)
{
    Fixture *f = *state;
    build_row_reduce(f->g, 64, 30000);
    static const char *const devs[] = {"v100", "a100", "h100"};
    for (int i = 0; i < 3; i++) {
        astitch_device d = device(devs[i]);
        astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
        astitch_plan *p = fixture_plan(f, &d, &o);
        astitch_mapping m = phase_mapping_of(p, f->g, "row_sum");
        astitch_kernel_info k;
        assert_int_equal(astitch_plan_kernel_info(p, 0, &k), ASTITCH_OK);
        assert_int_equal(m.kind, ASTITCH_MAP_ROW_REDUCE);
        assert_int_equal(m.threads_per_row, 1024);
        assert_true(m.split >= 2); /* more blocks than the 64 rows */
        assert_int_equal(m.grid, 64 * m.split);
        assert_true(m.grid <= k.blocks_per_wave);
        assert_true((int64_t)m.split * m.split_len >= 30000);
        assert_int_equal(astitch_mapping_elements_per_thread(&m), (m.split_len + 1023) / 1024);
        assert_int_equal(scheme_of(p, f->g, "row_sum"), ASTITCH_SCHEME_GLOBAL);
        o.packing = false;
        p = fixture_plan(f, &d, &o);
        assert_int_equal(phase_mapping_of(p, f->g, "row_sum").split, 1);
    }
    /* the paper's V100 case: 160 blocks per wave, so two blocks per row */
    astitch_device v = device("v100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    assert_int_equal(phase_mapping_of(fixture_plan(f, &v, &o), f->g, "row_sum").split, 2);
}

/* A column sum alone in its kernel, [8192, 3072] f32 (gpt2_bwd_mlp_gelu's bias gradient): 96
 * column tiles on the H100's 264 blocks per wave. Split to fill one wave it would take 2
 * parts (192 blocks, 27% of the places idle); split to fill its waves it takes parts whose
 * blocks make whole waves. Beside a row group the split stays within one wave. */
static void build_sums(astitch_graph *g, bool with_row_sum)
{
    int64_t rc[2] = {8192, 3072}, ax0[1] = {0}, ax1[1] = {1};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, rc);
    astitch_add_output(g, named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, ax0), "col_sum"));
    if (with_row_sum)
        astitch_add_output(g, named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, ax1), "row_sum"));
}

static void column_split_fills_waves(void **state)
{
    Fixture *f = *state;
    build_sums(f->g, false);
    astitch_device d = device("h100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    astitch_plan *p = fixture_plan(f, &d, &o);
    astitch_mapping m = phase_mapping_of(p, f->g, "col_sum");
    astitch_kernel_info k;
    assert_int_equal(astitch_plan_kernel_info(p, 0, &k), ASTITCH_OK);
    assert_int_equal(m.kind, ASTITCH_MAP_COLUMN_REDUCE);
    int64_t tiles = (3072 + m.rows_per_block - 1) / m.rows_per_block;
    assert_true(m.split > 2);
    assert_int_equal(m.grid, tiles * m.split);
    assert_int_equal(m.grid % k.blocks_per_wave, 0); /* whole waves */
    assert_true((int64_t)m.split * m.split_len >= 8192);
    int64_t rows_per_thread = m.split_len / m.threads_per_row;
    assert_true(rows_per_thread >= 8);

    /* the same column sum beside a row sum of the same input: one wave at most */
    astitch_plan_destroy(f->p);
    f->p = NULL;
    astitch_graph_destroy(f->g);
    assert_int_equal(astitch_graph_create(f->ctx, &f->g), ASTITCH_OK);
    build_sums(f->g, true);
    p = fixture_plan(f, &d, &o);
    m = phase_mapping_of(p, f->g, "col_sum");
    int col_kernel = op_info(p, f->g, "col_sum").kernel;
    assert_int_equal(astitch_plan_kernel_info(p, col_kernel, &k), ASTITCH_OK);
    assert_int_equal(k.num_groups, 2);
    assert_true(m.split > 1);
    assert_true(m.grid <= k.blocks_per_wave);
}

/* ---- section 4.4: shared memory over the limit ------------------------------------------- */

/* Layer normalization: four regional statistics per row. */
static void build_layernorm(astitch_graph *g, int64_t rows, int64_t cols)
{
    int64_t rc[2] = {rows, cols}, bd0[1] = {0}, ax1[1] = {1};
    double inv = 1.0 / (double)cols, eps = 1e-5;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, rc);
    astitch_node n = astitch_constant(g, ASTITCH_F32, 1, rc, &inv, 1);
    astitch_node e = astitch_constant(g, ASTITCH_F32, 1, rc, &eps, 1);
    astitch_node s = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, ax1), "sum");
    astitch_node mean = named(g, astitch_binary(g, ASTITCH_OP_MUL, s, n), "mean");
    astitch_node mb = astitch_broadcast_in_dim(g, mean, 2, rc, bd0);
    astitch_node c = named(g, astitch_binary(g, ASTITCH_OP_SUB, x, mb), "centered");
    astitch_node sq = astitch_binary(g, ASTITCH_OP_MUL, c, c);
    astitch_node v = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, sq, 1, ax1), "sqsum");
    astitch_node var = astitch_binary(g, ASTITCH_OP_MUL, v, n);
    astitch_node ve = astitch_binary(g, ASTITCH_OP_ADD, var, e);
    astitch_node r = named(g, astitch_unary(g, ASTITCH_OP_RSQRT, ve), "rstd");
    astitch_node rb = astitch_broadcast_in_dim(g, r, 2, rc, bd0);
    astitch_node out = named(g, astitch_binary(g, ASTITCH_OP_MUL, c, rb), "out");
    astitch_add_output(g, out);
}

static int count_regional(const astitch_plan *p)
{
    int n = 0;
    for (int k = 0; k < astitch_plan_num_kernels(p); k++) {
        astitch_kernel_info ki;
        astitch_plan_kernel_info(p, k, &ki);
        for (int i = 0; i < ki.num_ops; i++) {
            astitch_op_info x;
            astitch_plan_kernel_op(p, k, i, &x);
            n += x.scheme == ASTITCH_SCHEME_REGIONAL;
        }
    }
    return n;
}

static void shared_memory_fallback(void **state)
{
    Fixture *f = *state;
    build_layernorm(f->g, 65536, 256);
    astitch_device d = device("h100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    o.packing = false; /* streamed rows: resident ones keep their statistics in registers */
    o.persistent = true; /* chunks of many rows per block: large regional parts */
    astitch_plan *p = fixture_plan(f, &d, &o);
    int full = count_regional(p);
    astitch_kernel_info k;
    astitch_plan_kernel_info(p, 0, &k);
    assert_true(full >= 2);
    assert_true(k.shared_bytes > 0);
    /* shrink the limit step by step: regional ops turn global one at a time */
    int64_t limit = k.shared_bytes;
    int prev = full, steps = 0;
    while (prev > 0 && steps < 16) {
        astitch_device small = d;
        small.shared_per_block = limit - 1;
        p = fixture_plan(f, &small, &o);
        astitch_plan_kernel_info(p, 0, &k);
        int now = count_regional(p);
        assert_true(k.shared_bytes <= small.shared_per_block);
        assert_true(now < prev);
        assert_true(now >= prev - 2); /* buffer reuse may need two to free a byte */
        assert_int_equal(astitch_plan_num_kernels(p), 1);
        prev = now;
        limit = k.shared_bytes;
        steps++;
    }
    assert_int_equal(prev, 0);
    assert_true(steps >= full / 2);
    assert_int_equal(scheme_of(p, f->g, "sum"), ASTITCH_SCHEME_GLOBAL);
}

/* ---- section 4.5: assume-relax-apply -------------------------------------------------------- */

static void register_bound_relaxed(void **state)
{
    Fixture *f = *state;
    build_layernorm(f->g, 25600, 768);
    astitch_device d = device("h100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    o.packing = false;            /* streamed rows */
    o.one_pass_variance = false;  /* as written: the squared sum reads x again */
    astitch_plan *p = fixture_plan(f, &d, &o);
    astitch_kernel_info k;
    astitch_plan_kernel_info(p, 0, &k);
    assert_int_equal(k.block, 1024);
    assert_true(k.grid > d.sm_count); /* a full wave of two blocks per SM */
    assert_int_equal(k.regs, 32); /* two blocks of 1024 per SM leave 32 registers */
    assert_int_equal(k.blocks_per_sm, 2);
    /* streamed, the sum, the squared sum and the output each read x: three times, one write */
    int64_t x_bytes = 25600 * 768 * 4;
    assert_int_equal(k.min_bytes, 2 * x_bytes);
    assert_int_equal(k.moved_bytes, 4 * x_bytes);
    /* rewritten (variance.c), the squared sum joins the sum's pass: one read of x fewer */
    o.one_pass_variance = true;
    p = fixture_plan(f, &d, &o);
    astitch_plan_kernel_info(p, 0, &k);
    assert_int_equal(k.moved_bytes, 3 * x_bytes + 25600 * 4); /* and the rows' shifts */
    o.one_pass_variance = false;
    /* resident rows of 768: a warp per row, 24 elements per lane, planned with 32 + 2 * 24 = 80
     * registers: blocks of 64 (two rows of 6 KB moved, resident_block), twelve per SM */
    o.packing = true;
    p = fixture_plan(f, &d, &o);
    astitch_plan_kernel_info(p, 0, &k);
    assert_int_equal(k.block, 64);
    assert_int_equal(k.regs, 80);
    assert_int_equal(k.blocks_per_sm, 12);
    assert_false(k.persistent);
    assert_int_equal(k.grid, 25600 / 2); /* a block per tile of 2 rows */
    assert_int_equal(k.shared_bytes, 0); /* the statistics stay in registers */
    assert_int_equal(k.moved_bytes, k.min_bytes); /* and x is read once */
}

/* The block of a kernel of element-wise groups (a block per tile): 512 threads, or 128 where
 * its tasks of four elements fill four waves of the device's threads; a persistent kernel keeps
 * the device's largest block. */
static void elementwise_block(void **state)
{
    Fixture *f = *state;
    astitch_device d = device("h100");
    int64_t many = 4 * (int64_t)d.sm_count * d.max_threads_per_sm * 4;
    struct {
        int64_t elements;
        bool persistent;
        int block;
    } cases[] = {{many, false, 128}, {many - 4, false, 512}, {1 << 20, false, 512},
                 {many, true, 1024}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        astitch_graph *g = NULL;
        assert_int_equal(astitch_graph_create(f->ctx, &g), ASTITCH_OK);
        int64_t n = cases[i].elements;
        astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 1, &n);
        astitch_add_output(g, astitch_unary(g, ASTITCH_OP_EXP, x));
        astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
        o.persistent = cases[i].persistent;
        astitch_plan *p = NULL;
        if (astitch_plan_create(g, &d, &o, &p) != ASTITCH_OK)
            fail_msg("plan: %s", astitch_last_error(f->ctx));
        astitch_kernel_info k;
        assert_int_equal(astitch_plan_kernel_info(p, 0, &k), ASTITCH_OK);
        printf("# %lld elements, persistent %d: block %d, grid %d\n", (long long)n,
               cases[i].persistent, (int)k.block, (int)k.grid);
        assert_int_equal(k.block, cases[i].block);
        astitch_plan_destroy(p);
        astitch_graph_destroy(g);
    }
}

/* The block of a kernel of a block per tile whose reductions are all resident rows: the fewest
 * rows that move 4 KB, at least 64 threads. Row sums of [rows, cols] f32 (x read, the sums
 * not row-shaped): 32 floats over 8 lanes take 32 rows (256 threads, as before), 64 floats
 * 16 rows of 8 lanes, 1024 floats a warp per row (64 threads, the floor); 4096 floats take
 * 256 lanes. A column sum of the same x in the kernel, in its own group or summed across the
 * row group's rows (column_sums_in_rows), keeps the block of four per SM at the resident bound,
 * a persistent kernel that of two. */
static void resident_block(void **state)
{
    Fixture *f = *state;
    astitch_device d = device("h100");
    struct {
        int64_t rows, cols;
        bool column, across, persistent;
        int block;
    } cases[] = {{65536, 32, false, false, false, 256},  {65536, 64, false, false, false, 128},
                 {65536, 1024, false, false, false, 64}, {4096, 4096, false, false, false, 256},
                 {65536, 1024, true, false, false, 256}, {65536, 1024, true, true, false, 256},
                 {65536, 1024, false, false, true, 256}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        astitch_graph *g = NULL;
        assert_int_equal(astitch_graph_create(f->ctx, &g), ASTITCH_OK);
        int64_t rc[2] = {cases[i].rows, cases[i].cols}, ax0 = 0, ax1 = 1;
        astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, rc);
        astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, &ax1));
        if (cases[i].column)
            astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, &ax0));
        astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
        o.persistent = cases[i].persistent;
        o.column_sums_in_rows = cases[i].across;
        astitch_plan *p = NULL;
        if (astitch_plan_create(g, &d, &o, &p) != ASTITCH_OK)
            fail_msg("plan: %s", astitch_last_error(f->ctx));
        assert_int_equal(astitch_plan_num_kernels(p), 1);
        astitch_kernel_info k;
        assert_int_equal(astitch_plan_kernel_info(p, 0, &k), ASTITCH_OK);
        if (cases[i].across) /* the column sum taken in the row pass: one group */
            assert_int_equal(k.num_groups, 1);
        printf("# [%lld, %lld] column %d persistent %d: block %d, grid %d, regs %d\n",
               (long long)cases[i].rows, (long long)cases[i].cols, cases[i].column,
               cases[i].persistent, (int)k.block, (int)k.grid, (int)k.regs);
        assert_int_equal(k.block, cases[i].block);
        assert_int_equal(k.persistent, cases[i].persistent);
        astitch_plan_destroy(p);
        astitch_graph_destroy(g);
    }
}

/* When shared memory allows one block of 1024 per SM, the bound relaxes to 64. */
static void register_bound_relaxed_by_shared(void **state)
{
    Fixture *f = *state;
    build_layernorm(f->g, 128, 768);
    astitch_device d = device("h100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    o.packing = false; /* streamed rows keep their statistics in shared memory */
    astitch_plan *p = fixture_plan(f, &d, &o);
    astitch_kernel_info k;
    astitch_plan_kernel_info(p, 0, &k);
    int64_t s = k.shared_bytes;
    assert_true(s > 0);
    d.shared_per_block = s;
    d.shared_per_sm = s + s / 2;
    p = fixture_plan(f, &d, &o);
    astitch_plan_kernel_info(p, 0, &k);
    assert_int_equal(k.blocks_per_sm, 1);
    assert_int_equal(k.blocks_per_wave, d.sm_count);
    assert_int_equal(k.regs, 64);
    assert_true(k.grid <= k.blocks_per_wave);
}

/* A grid smaller than the SM count needs one resident block per SM, whatever more would fit:
 * the bound relaxes to the registers of one block per SM. */
static void register_bound_small_grid(void **state)
{
    Fixture *f = *state;
    build_layernorm(f->g, 64, 768);
    astitch_device d = device("h100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    astitch_plan *p = fixture_plan(f, &d, &o);
    astitch_kernel_info k;
    astitch_plan_kernel_info(p, 0, &k);
    assert_true(k.grid <= d.sm_count);
    assert_int_equal(k.regs, (int)(d.regs_per_sm / k.block / 8 * 8 < 255 ? d.regs_per_sm / k.block / 8 * 8 : 248));
    assert_true(k.regs > 32);
    assert_true(k.grid <= k.blocks_per_wave);
}

/* A resident grid of at most two waves runs in one: a layer norm of 4096 x 768 (2048 blocks of
 * 2 rows, 1.3 waves at the 80 registers of its mapping) gets 64 registers, the fewest its 24
 * elements per lane allow (2 * 24 + 16), and 16 blocks per SM. With rows of 1024 (32 elements
 * per lane) one wave would need the same 64, below the 80 its rows need: it keeps two waves.
 * (25600 rows of 768, six waves, keep 80: register_bound_relaxed.) */
static void register_bound_one_wave(void **state)
{
    Fixture *f = *state;
    build_layernorm(f->g, 4096, 768);
    astitch_device d = device("h100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    astitch_plan *p = fixture_plan(f, &d, &o);
    astitch_kernel_info k;
    astitch_plan_kernel_info(p, 0, &k);
    assert_int_equal(k.block, 64);
    assert_int_equal(k.grid, 2048);
    assert_int_equal(k.regs, 64);
    assert_int_equal(k.blocks_per_sm, 16);
    assert_true(k.grid <= k.blocks_per_wave);
    assert_false(k.persistent);
    astitch_graph *g2;
    assert_int_equal(astitch_graph_create(f->ctx, &g2), ASTITCH_OK);
    build_layernorm(g2, 4096, 1024);
    astitch_plan *p2 = NULL;
    astitch_plan_options o2 = o;
    assert_int_equal(astitch_plan_create(g2, &d, &o2, &p2), ASTITCH_OK);
    astitch_plan_kernel_info(p2, 0, &k);
    assert_true(k.regs >= 2 * 32 + 16);
    assert_true(k.grid > k.blocks_per_wave);
    astitch_plan_destroy(p2);
    astitch_graph_destroy(g2);
}

/* A row sum [rows] and an element-wise output [rows, 32] that reads it back row-aligned. With
 * `through_reshape` the read goes through a reshape to [rows, 1] and a broadcast of its unit
 * axis, which keeps the output out of the sum's resident tile run: the sum then needs a
 * regional buffer in shared memory. */
static void build_sum_read_back(astitch_graph *g, int64_t rows, bool through_reshape)
{
    int64_t rc[2] = {rows, 32}, r1[2] = {rows, 1}, ax1[1] = {1}, bd0[1] = {0}, bd01[2] = {0, 1};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, rc);
    astitch_node sum = named(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, ax1), "s");
    astitch_node b = through_reshape
        ? astitch_broadcast_in_dim(g, astitch_reshape(g, sum, 2, r1), 2, rc, bd01)
        : astitch_broadcast_in_dim(g, sum, 2, rc, bd0);
    astitch_add_output(g, named(g, astitch_binary(g, ASTITCH_OP_SUB, x, b), "y"));
}

/* The sum read back outside its run, in a persistent kernel: regional while its per-block part
 * is small, global (keeping the full wave) once that part would leave one block per SM, read
 * back by the block that made it after a block barrier (no grid barrier). A block per tile
 * keeps only its tile's part. Read back inside its resident run, the sum needs no memory at
 * all. */
static void launch_prefers_parallelism(void **state)
{
    Fixture *f = *state;
    build_sum_read_back(f->g, 8000000, true);
    astitch_device d = device("h100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    astitch_plan *p = fixture_plan(f, &d, &o);
    astitch_kernel_info k;
    astitch_plan_kernel_info(p, 0, &k);
    /* a block per tile of 16 rows (the 4 KB of rows a resident block moves): 64 bytes of the
     * sum per block */
    assert_false(k.persistent);
    assert_int_equal(scheme_of(p, f->g, "s"), ASTITCH_SCHEME_REGIONAL);
    assert_int_equal(k.shared_bytes, 16 * 4);
    assert_int_equal(k.grid, 8000000 / 16);
    assert_int_equal(k.global_barriers, 0);
    o.persistent = true;
    p = fixture_plan(f, &d, &o);
    astitch_plan_kernel_info(p, 0, &k);
    /* 30000-odd rows of 4 bytes per block would allow one block per SM: turned global, its
     * rows read by their own block */
    assert_int_equal(scheme_of(p, f->g, "s"), ASTITCH_SCHEME_GLOBAL);
    assert_int_equal(k.grid, k.blocks_per_wave);
    assert_int_equal(k.blocks_per_sm, 2);
    assert_int_equal(k.global_barriers, 0);
    assert_int_equal(k.block_barriers, 1);
    /* a tenth of the rows: their part fits next to a second block */
    astitch_graph_destroy(f->g);
    assert_int_equal(astitch_graph_create(f->ctx, &f->g), ASTITCH_OK);
    build_sum_read_back(f->g, 800000, true);
    p = fixture_plan(f, &d, &o);
    astitch_plan_kernel_info(p, 0, &k);
    assert_int_equal(scheme_of(p, f->g, "s"), ASTITCH_SCHEME_REGIONAL);
    assert_int_equal(k.blocks_per_sm, 2);
    assert_int_equal(k.block_barriers, 1);
    assert_int_equal(k.global_barriers, 0);
    assert_true(k.shared_bytes > 0);
    /* read back inside the run: registers, whatever the size */
    astitch_graph_destroy(f->g);
    assert_int_equal(astitch_graph_create(f->ctx, &f->g), ASTITCH_OK);
    build_sum_read_back(f->g, 8000000, false);
    p = fixture_plan(f, &d, &o);
    astitch_plan_kernel_info(p, 0, &k);
    assert_int_equal(scheme_of(p, f->g, "s"), ASTITCH_SCHEME_REGIONAL);
    assert_int_equal(k.global_barriers, 0);
    assert_int_equal(k.shared_bytes, 0);
}

/* ---- scopes --------------------------------------------------------------------------------- */

static void compute_op_bounds_scope(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    int64_t s[2] = {64, 64};
    astitch_dot_dims dd = {0};
    dd.ncontract = 1;
    dd.lhs_contract[0] = 1;
    dd.rhs_contract[0] = 0;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, s);
    astitch_node w = astitch_parameter(g, "w", ASTITCH_F32, 2, s);
    astitch_node a = named(g, astitch_unary(g, ASTITCH_OP_EXP, x), "a");
    astitch_node m = named(g, astitch_dot(g, a, w, &dd), "mm");
    astitch_node b = named(g, astitch_binary(g, ASTITCH_OP_ADD, m, a), "b");
    astitch_add_output(g, b);
    astitch_device d = device("a100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    astitch_plan *p = fixture_plan(f, &d, &o);
    /* a and b in one kernel would wait for the dot that waits for a */
    assert_int_equal(astitch_plan_num_kernels(p), 2);
    assert_int_not_equal(astitch_plan_kernel_of(p, a), astitch_plan_kernel_of(p, b));
    assert_int_equal(astitch_plan_kernel_of(p, m), -1);
    assert_int_equal(astitch_plan_num_steps(p), 3);
    int idx;
    assert_int_equal(astitch_plan_step(p, 0, &idx), ASTITCH_STEP_KERNEL);
    assert_int_equal(idx, astitch_plan_kernel_of(p, a));
    assert_int_equal(astitch_plan_step(p, 1, &idx), ASTITCH_STEP_COMPUTE);
    assert_int_equal(idx, m);
    assert_int_equal(astitch_plan_step(p, 2, &idx), ASTITCH_STEP_KERNEL);
    assert_int_equal(idx, astitch_plan_kernel_of(p, b));
    assert_true(op_info(p, g, "a").output); /* read by the dot and the later kernel */
}

static void remote_stitching(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    int64_t s[2] = {32, 32};
    astitch_dot_dims dd = {0};
    dd.ncontract = 1;
    dd.lhs_contract[0] = 1;
    dd.rhs_contract[0] = 0;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, s);
    astitch_node y = astitch_parameter(g, "y", ASTITCH_F32, 2, s);
    astitch_node w = astitch_parameter(g, "w", ASTITCH_F32, 2, s);
    astitch_node a = named(g, astitch_unary(g, ASTITCH_OP_EXP, x), "a");   /* independent of c */
    astitch_node m = astitch_dot(g, y, w, &dd);
    astitch_node c = named(g, astitch_unary(g, ASTITCH_OP_TANH, m), "c");
    astitch_node m2 = astitch_dot(g, c, w, &dd);
    astitch_node e = named(g, astitch_unary(g, ASTITCH_OP_SIN, m2), "e");  /* depends on c */
    astitch_add_output(g, a);
    astitch_add_output(g, e);
    astitch_device d = device("h100");
    astitch_plan_options o = opts(ASTITCH_FUSION_STITCH);
    astitch_plan *p = fixture_plan(f, &d, &o);
    assert_int_equal(astitch_plan_num_kernels(p), 2);
    assert_int_equal(astitch_plan_kernel_of(p, a), astitch_plan_kernel_of(p, c));
    assert_int_not_equal(astitch_plan_kernel_of(p, c), astitch_plan_kernel_of(p, e));
    o.remote = false;
    p = fixture_plan(f, &d, &o);
    assert_int_equal(astitch_plan_num_kernels(p), 3);
}

static void fusion_none_one_kernel_per_op(void **state)
{
    Fixture *f = *state;
    build_fig7(f->g, 256, 128);
    astitch_device d = device("host");
    astitch_plan_options o = opts(ASTITCH_FUSION_NONE);
    astitch_plan *p = fixture_plan(f, &d, &o);
    /* 11 nodes: two parameters and one constant are not memory-intensive ops */
    assert_int_equal(astitch_plan_num_kernels(p), 8);
    for (int k = 0; k < 8; k++) {
        astitch_kernel_info ki;
        assert_int_equal(astitch_plan_kernel_info(p, k, &ki), ASTITCH_OK);
        assert_int_equal(ki.num_groups, 1);
        assert_true(ki.persistent ? ki.grid <= ki.blocks_per_wave : ki.global_barriers == 0);
        assert_true(ki.block <= 128);
    }
}

/* ---- API ------------------------------------------------------------------------------------- */

/* Nodes that feed no output (an unused broadcast and what reads it, a negation of a dot's
 * result) are dropped under every fusion mode, named by the plan, and the rest runs on the host
 * target as the reference runs the whole graph. */
static void dead_nodes_dropped(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    int64_t d[2] = {4, 8}, dw[2] = {8, 8}, d3[3] = {2, 4, 8}, bd[2] = {1, 2};
    astitch_node x = named(g, astitch_parameter(g, "x", ASTITCH_F32, 2, d), "x");
    astitch_node w = named(g, astitch_parameter(g, "w", ASTITCH_F32, 2, dw), "w");
    astitch_node b = named(g, astitch_broadcast_in_dim(g, x, 3, d3, bd), "unused_b");
    named(g, astitch_unary(g, ASTITCH_OP_EXP, b), "unused_exp");
    astitch_dot_dims dd = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
    astitch_node m = named(g, astitch_dot(g, x, w, &dd), "m");
    named(g, astitch_unary(g, ASTITCH_OP_NEG, m), "unused_neg");
    astitch_node y = named(g, astitch_binary(g, ASTITCH_OP_ADD, astitch_unary(g, ASTITCH_OP_TANH, m), x), "y");
    assert_int_equal(astitch_add_output(g, y), ASTITCH_OK);
    float xv[32], wv[64], got[32], want[32];
    uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&seed;
    printf("# dead nodes: seed %llu\n", (unsigned long long)seed);
    for (int i = 0; i < 64; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        float r = (float)(seed >> 40) / (float)(1 << 24) * 2 - 1;
        if (i < 32)
            xv[i] = r;
        wv[i] = -r;
    }
    const void *in[2] = {xv, wv};
    void *ref_out[1] = {want}, *out[1] = {got};
    assert_int_equal(astitch_run_reference(g, in, ref_out), ASTITCH_OK);
    static const astitch_fusion modes[] = {ASTITCH_FUSION_NONE, ASTITCH_FUSION_XLA, ASTITCH_FUSION_STITCH};
    astitch_device dev = device("h100");
    for (int i = 0; i < 3; i++) {
        astitch_plan_options o = opts(modes[i]);
        astitch_plan *p = fixture_plan(f, &dev, &o);
        assert_int_equal(astitch_graph_num_nodes(astitch_plan_graph(p)), 5); /* x w m tanh y */
        char *text;
        assert_int_equal(astitch_plan_text(p, &text), ASTITCH_OK);
        assert_non_null(strstr(text, "\ndropped (feed no output, not planned): unused_b, unused_exp, unused_neg\n"));
        astitch_free(text);
        char *json;
        assert_int_equal(astitch_plan_json(p, &json), ASTITCH_OK);
        const char *at = strstr(json, "\"dropped\": [");
        assert_non_null(at); /* the three names, in node order, before the array ends */
        const char *b1 = strstr(at, "\"unused_b\""), *b2 = b1 ? strstr(b1, "\"unused_exp\"") : NULL;
        const char *b3 = b2 ? strstr(b2, "\"unused_neg\"") : NULL;
        assert_non_null(b3);
        assert_true(strchr(at, ']') > b3);
        astitch_free(json);
        astitch_compile_options co;
        astitch_compile_options_default(&co);
        co.target = ASTITCH_TARGET_HOST;
        co.plan = o;
        astitch_executable *x_ = NULL;
        assert_int_equal(astitch_compile(g, &co, &x_), ASTITCH_OK);
        memset(got, 0xff, sizeof got);
        assert_int_equal(astitch_execute(x_, in, out), ASTITCH_OK);
        for (int k = 0; k < 32; k++)
            assert_true(fabsf(got[k] - want[k]) <= 1e-5f * (1 + fabsf(want[k])));
        astitch_executable_destroy(x_);
    }
}


/* A graph no one kernel can take: a sum of 300 parameters whose every other partial sum is an
 * output, and a concatenate of all 300 (a tree of concatenates of at most 64). Under every
 * fusion mode each kernel reads and writes at most 240 tensors (with the scratch arena and the
 * barrier counter within the 256 arguments a launcher takes), and the host target's run agrees
 * with the reference on fresh random inputs. */
static void wide_kernels_bounded(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    enum { N = 300, E = 6 };
    int64_t d[2] = {2, 3};
    astitch_node p[N], sum = ASTITCH_NO_NODE;
    int nout = 0;
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "p%d", i);
        p[i] = astitch_parameter(g, name, ASTITCH_F32, 2, d);
        sum = i == 0 ? p[0] : astitch_binary(g, ASTITCH_OP_ADD, sum, p[i]);
        if (i % 2 == 1) {
            assert_int_equal(astitch_add_output(g, sum), ASTITCH_OK);
            nout++;
        }
    }
    assert_int_equal(astitch_add_output(g, astitch_concatenate(g, N, p, 0)), ASTITCH_OK);
    nout++;
    float *in = malloc(sizeof(float) * N * E), *want = malloc(sizeof(float) * (nout - 1 + N) * E);
    float *got = malloc(sizeof(float) * (nout - 1 + N) * E);
    const void *ins[N];
    void *wants[N], *gots[N];
    assert_true(in && want && got);
    uint64_t seed = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)&seed;
    printf("# wide kernels: seed %llu\n", (unsigned long long)seed);
    for (int i = 0; i < N * E; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        in[i] = (float)(seed >> 40) / (float)(1 << 24) * 2 - 1;
    }
    for (int i = 0; i < N; i++)
        ins[i] = in + i * E;
    for (int i = 0; i < nout; i++) { /* the concatenate last, N times the size */
        wants[i] = want + i * E;
        gots[i] = got + i * E;
    }
    assert_int_equal(astitch_run_reference(g, ins, wants), ASTITCH_OK);
    static const astitch_fusion modes[] = {ASTITCH_FUSION_NONE, ASTITCH_FUSION_XLA, ASTITCH_FUSION_STITCH};
    astitch_device dev = device("h100");
    for (int m = 0; m < 3; m++) {
        astitch_plan_options o = opts(modes[m]);
        astitch_plan *pl = fixture_plan(f, &dev, &o);
        int most = 0;
        for (int k = 0; k < astitch_plan_num_kernels(pl); k++) {
            astitch_kernel_info ki;
            assert_int_equal(astitch_plan_kernel_info(pl, k, &ki), ASTITCH_OK);
            if (ki.num_inputs + ki.num_outputs > most)
                most = ki.num_inputs + ki.num_outputs;
        }
        printf("# wide kernels, %s: %d kernels, at most %d tensors in one\n",
               astitch_fusion_name(modes[m]), astitch_plan_num_kernels(pl), most);
        assert_true(most <= 240);
        astitch_compile_options co;
        astitch_compile_options_default(&co);
        co.target = ASTITCH_TARGET_HOST;
        co.plan = o;
        astitch_executable *x = NULL;
        if (astitch_compile(g, &co, &x) != ASTITCH_OK)
            fail_msg("compile: %s", astitch_last_error(f->ctx));
        memset(got, 0xff, sizeof(float) * (nout - 1 + N) * E);
        if (astitch_execute(x, ins, gots) != ASTITCH_OK)
            fail_msg("run: %s", astitch_last_error(f->ctx));
        for (int i = 0; i < (nout - 1 + N) * E; i++)
            if (!(fabsf(got[i] - want[i]) <= 1e-5f * (1 + fabsf(want[i]))))
                fail_msg("%s: element %d: %g, reference %g", astitch_fusion_name(modes[m]), i,
                         (double)got[i], (double)want[i]);
        astitch_executable_destroy(x);
    }
    free(in);
    free(want);
    free(got);
}

static void api_arguments(void **state)
{
    Fixture *f = *state;
    build_fig5(f->g);
    astitch_device d = device("h100");
    astitch_plan *p = (astitch_plan *)&d; /* poisoned: must become NULL on failure */
    astitch_device bad = d;
    bad.sm_count = 0;
    assert_int_equal(astitch_plan_create(f->g, &bad, NULL, &p), ASTITCH_ERR_ARGUMENT);
    assert_null(p);
    assert_non_null(strstr(astitch_last_error(f->ctx), "h100"));
    assert_int_equal(astitch_plan_create(f->g, NULL, NULL, &p), ASTITCH_ERR_ARGUMENT);
    assert_int_equal(astitch_device_builtin("tpu", &d), ASTITCH_ERR_ARGUMENT);
    astitch_fusion fu;
    assert_int_equal(astitch_fusion_from_name("xla", &fu), ASTITCH_OK);
    assert_int_equal(fu, ASTITCH_FUSION_XLA);
    assert_int_equal(astitch_fusion_from_name("XLA", &fu), ASTITCH_ERR_ARGUMENT);
    assert_string_equal(astitch_fusion_name(ASTITCH_FUSION_STITCH), "stitch");
    assert_string_equal(astitch_scheme_name(ASTITCH_SCHEME_REGIONAL), "regional");
    assert_null(astitch_scheme_name((astitch_scheme)9));
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    assert_true(o.remote && o.merge && o.packing);
    assert_int_equal(o.fusion, ASTITCH_FUSION_STITCH);
    p = fixture_plan(f, &d, NULL);
    astitch_kernel_info k;
    assert_int_equal(astitch_plan_kernel_info(p, 1, &k), ASTITCH_ERR_ARGUMENT);
    assert_int_equal(astitch_plan_kernel_input(p, 0, 99), ASTITCH_NO_NODE);
    assert_int_equal(astitch_plan_kernel_of(p, 999), -1);
    astitch_op_info x;
    assert_int_equal(astitch_plan_node_info(p, astitch_graph_find(f->g, "parameter.1"), &x),
                     ASTITCH_ERR_ARGUMENT);
    astitch_plan_destroy(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(fig7_stitch),
        FIXTURE_TEST(fig7_xla),
        FIXTURE_TEST(fig7_example_file),
        FIXTURE_TEST(fig7_no_merging),
        FIXTURE_TEST(fig4_shared_producer),
        FIXTURE_TEST(heavy_op_broadcast_through_converts),
        FIXTURE_TEST(fig5_power_once),
        FIXTURE_TEST(row_reduce_750000x32),
        FIXTURE_TEST(row_reduce_64x30000),
        FIXTURE_TEST(wide_rows_option),
        FIXTURE_TEST(column_split_fills_waves),
        FIXTURE_TEST(shared_memory_fallback),
        FIXTURE_TEST(register_bound_relaxed),
        FIXTURE_TEST(elementwise_block),
        FIXTURE_TEST(resident_block),
        FIXTURE_TEST(register_bound_relaxed_by_shared),
        FIXTURE_TEST(register_bound_small_grid),
        FIXTURE_TEST(register_bound_one_wave),
        FIXTURE_TEST(launch_prefers_parallelism),
        FIXTURE_TEST(compute_op_bounds_scope),
        FIXTURE_TEST(remote_stitching),
        FIXTURE_TEST(fusion_none_one_kernel_per_op),
        FIXTURE_TEST(dead_nodes_dropped),
        FIXTURE_TEST(wide_kernels_bounded),
        FIXTURE_TEST(api_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
