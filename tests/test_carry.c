/*
 * test_carry.c: values carried across a global barrier in shared memory (plan option carry:
 * lib/passes/carry.c, lib/codegen/emit_carry.c). On the H100 model the batch norms of the suite
 * carry what the plan says (the activation, or the masked gradient of a relu's backward),
 * within the shared memory their residency leaves free and never at the cost of a resident
 * block, and count the bytes they no longer read; a re-read the L2 holds is left alone, and
 * the public view shows the CARRY buffers where the text plan says so. On the host target, which runs the same
 * kernels, graphs whose host plans carry every iteration or only the first ones (a streamed
 * row in 16-byte runs, a column walk, NCHW and NHWC, f32 and bf16) match the reference on
 * fresh random inputs, and their outputs are bit for bit those of the plan without the option.
 * Across a block barrier (a long row's two walks in one tile run): the H100 model keeps a
 * softmax's or a layer norm's row whole within the shared memory its residency leaves free,
 * and nothing where the row would take a resident block's place or the L2 holds a wave's
 * rows; on the host target, the online walk in runs and in single elements and a bf16 row in
 * runs of 8.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "astitch/plan.h"
#include "astitch/runtime.h"
#include "diff_check.h"
#include "gen_graph.h"
#include "graph_fixture.h"

/* Loads <source root>/path into f's graph (replacing the empty one). */
static void load(Fixture *f, const char *path)
{
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    char full[1024];
    snprintf(full, sizeof full, "%s/%s", root ? root : ".", path);
    astitch_graph_destroy(f->g);
    f->g = NULL;
    if (astitch_graph_load_json(f->ctx, full, &f->g) != ASTITCH_OK)
        fail_msg("%s: %s", full, astitch_last_error(f->ctx));
}

/* load, with every occurrence of `from` in the file's text replaced by `to` (a small graph at
 * other dims), through a temporary file. */
static void load_resized(Fixture *f, const char *path, const char *from, const char *to)
{
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    char full[1024], tmp[] = "/tmp/astitch-test-carry-XXXXXX";
    snprintf(full, sizeof full, "%s/%s", root ? root : ".", path);
    FILE *in = fopen(full, "rb");
    if (!in)
        fail_msg("%s: cannot open", full);
    int fd = mkstemp(tmp);
    FILE *out = fd >= 0 ? fdopen(fd, "wb") : NULL;
    assert_non_null(out);
    char line[4096];
    size_t nf = strlen(from);
    while (fgets(line, sizeof line, in)) {
        for (const char *at = line, *hit; *at; at = hit + nf) {
            if (!(hit = strstr(at, from))) {
                fputs(at, out);
                break;
            }
            fwrite(at, 1, (size_t)(hit - at), out);
            fputs(to, out);
        }
    }
    fclose(in);
    fclose(out);
    astitch_graph_destroy(f->g);
    f->g = NULL;
    astitch_status s = astitch_graph_load_json(f->ctx, tmp, &f->g);
    remove(tmp);
    if (s != ASTITCH_OK)
        fail_msg("%s resized: %s", full, astitch_last_error(f->ctx));
}

/* Batch norm's training forward over every axis but `channel` of x [dims] (dtype xt, computed
 * in f32), then relu: the statistics' walk and the normalization's walk of the same elements,
 * a global barrier between them. */
static void build_norm(astitch_graph *g, const int64_t *dims, int64_t channel, astitch_dtype xt)
{
    int64_t axes[3], nax = 0, n = 1;
    for (int64_t i = 0; i < 4; i++)
        if (i != channel) {
            axes[nax++] = i;
            n *= dims[i];
        }
    int64_t cdim[1] = {dims[channel]}, bd[1] = {channel};
    astitch_node x = astitch_parameter(g, "x", xt, 4, dims);
    astitch_node xf = xt == ASTITCH_F32 ? x : named(g, astitch_convert(g, x, ASTITCH_F32), "xf");
    double count = (double)n, eps = 1e-5, zero = 0;
    astitch_node cnt = astitch_constant(g, ASTITCH_F32, 1, cdim, &count, 1);
    astitch_node mean = named(g, astitch_binary(g, ASTITCH_OP_DIV,
                              astitch_reduce(g, ASTITCH_REDUCE_SUM, xf, 3, axes), cnt), "mean");
    astitch_node centered = named(g, astitch_binary(g, ASTITCH_OP_SUB, xf,
                                  astitch_broadcast_in_dim(g, mean, 4, dims, bd)), "centered");
    astitch_node var = named(g, astitch_binary(g, ASTITCH_OP_DIV, astitch_reduce(g,
                             ASTITCH_REDUCE_SUM, astitch_binary(g, ASTITCH_OP_MUL, centered, centered),
                             3, axes), cnt), "var");
    astitch_node rstd = named(g, astitch_unary(g, ASTITCH_OP_RSQRT, astitch_binary(g, ASTITCH_OP_ADD,
                              var, astitch_constant(g, ASTITCH_F32, 1, cdim, &eps, 1))), "rstd");
    astitch_node normed = astitch_binary(g, ASTITCH_OP_MUL, centered,
                                         astitch_broadcast_in_dim(g, rstd, 4, dims, bd));
    astitch_node relu = astitch_binary(g, ASTITCH_OP_MAX, normed,
                                       astitch_constant(g, ASTITCH_F32, 4, dims, &zero, 1));
    astitch_node out = named(g, xt == ASTITCH_F32 ? relu : astitch_convert(g, relu, xt), "out");
    assert_int_equal(astitch_add_output(g, mean), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, rstd), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, out), ASTITCH_OK);
}

/* The softmax over the rows of x [rows, cols] (values of t, computed in f32, output in t): its
 * max and sum in one walk (an online pair), then its output in a second walk. */
static void build_softmax(astitch_graph *g, int64_t rows, int64_t cols, astitch_dtype t)
{
    int64_t dims[2] = {rows, cols};
    astitch_node x = astitch_parameter(g, "x", t, 2, dims);
    astitch_node xf = t == ASTITCH_F32 ? x : named(g, astitch_convert(g, x, ASTITCH_F32), "xf");
    astitch_node p = gen_softmax_rows(g, xf, rows, cols);
    assert_int_equal(astitch_add_output(g, t == ASTITCH_F32 ? p : astitch_convert(g, p, t)),
                     ASTITCH_OK);
}

/* The layer norm of the rows of x [rows, cols] (values of t, statistics in f32, output in t):
 * its sums in one walk, its output in a second. */
static void build_row_norm(astitch_graph *g, int64_t rows, int64_t cols, astitch_dtype t)
{
    int64_t dims[2] = {rows, cols};
    astitch_node x = astitch_parameter(g, "x", t, 2, dims), mean;
    astitch_node xf = t == ASTITCH_F32 ? x : named(g, astitch_convert(g, x, ASTITCH_F32), "xf");
    astitch_node out = gen_layer_norm(g, xf, rows, cols, 1e-5, &mean);
    assert_int_equal(astitch_add_output(g, t == ASTITCH_F32 ? out : astitch_convert(g, out, t)),
                     ASTITCH_OK);
}

static astitch_device device(const char *name)
{
    astitch_device d;
    assert_int_equal(astitch_device_builtin(name, &d), ASTITCH_OK);
    return d;
}

/* f->g planned for device `dev` with the option carry as given and column runs off (a column
 * walk in runs carries nothing: docs/planner.md, *carry*; the carry is tested on single
 * columns); kernel 0's info in *k. */
static astitch_plan *plan(Fixture *f, const char *dev, bool carry, astitch_kernel_info *k)
{
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    o.carry = carry;
    o.column_vectors = false;
    astitch_device d = device(dev);
    astitch_plan *p = fixture_plan(f, &d, &o);
    assert_int_equal(astitch_plan_kernel_info(p, 0, k), ASTITCH_OK);
    return p;
}

/* The suite's batch norm at `path` on the H100 model: its plan carries `what` (the text's
 * words), its blocks per SM and grid are those without the option, the shared memory stays
 * within an SM's share per block (less the driver's 1 KB), and it moves fewer bytes. */
static void check_h100_plan(Fixture *f, const char *path, const char *what)
{
    load(f, path);
    astitch_kernel_info off, on;
    plan(f, "h100", false, &off);
    assert_false(plan_text_has(f->p, "carry:"));
    astitch_plan *p = plan(f, "h100", true, &on);
    if (!plan_text_has(p, what)) {
        char *text = NULL;
        astitch_plan_text(p, &text);
        fail_msg("%s: no '%s' in\n%s", path, what, text);
    }
    char *json = NULL;
    assert_int_equal(astitch_plan_json(p, &json), ASTITCH_OK);
    assert_non_null(strstr(json, "\"carry\": {"));
    astitch_free(json);
    astitch_device d = device("h100");
    assert_int_equal(on.blocks_per_sm, off.blocks_per_sm);
    assert_int_equal(on.grid, off.grid);
    assert_true(on.shared_bytes > off.shared_bytes);
    assert_true(on.shared_bytes <= d.shared_per_sm / on.blocks_per_sm - 1024);
    assert_true(on.moved_bytes < off.moved_bytes);
    assert_true(on.moved_bytes >= on.min_bytes);
}

static void test_h100_plans(void **state)
{
    Fixture *f = *state;
    /* NCHW over N, H and W: a split row in runs of 4; x, every iteration */
    check_h100_plan(f, "bench/graphs/resnet50_train_fwd_bn_relu.json",
                    "carry: phase 0 keeps for phase 2, across the global barrier, x at its first "
                    "7 of 7 iterations per thread (4 elements each)");
    /* the relu's masked gradient saves two reads (dy and relu_out) for one value */
    check_h100_plan(f, "bench/graphs/resnet50_train_bwd_relu_bn.json",
                    "carry: phase 0 keeps for phase 1, across the global barrier, d at its first "
                    "7 of 7 iterations per thread (4 elements each)");
    /* NHWC: a column walk; x outgrows the shared memory, its first iterations are kept */
    check_h100_plan(f, "examples/batchnorm_train.json",
                    "carry: phase 0 keeps for phase 2, across the global barrier, x at its first "
                    "25 of 96 iterations per thread (1 element each)");
}

/* Nothing to carry: a kernel without a global barrier (a layer norm's resident rows). */
static void test_nothing_to_carry(void **state)
{
    Fixture *f = *state;
    load(f, "examples/layernorm.json");
    astitch_kernel_info k;
    plan(f, "h100", true, &k);
    assert_false(plan_text_has(f->p, "carry:"));
}

/* CARRY buffers of kernel 0 of p through the public view: their count, each in the shared
 * memory after the kernel's other buffers, alive from the keeping phase to the reading one. */
static int carry_buffers(const astitch_plan *p, int from, int to)
{
    astitch_kernel_info k;
    assert_int_equal(astitch_plan_kernel_info(p, 0, &k), ASTITCH_OK);
    int n = 0;
    for (int b = 0; b < k.num_buffers; b++) {
        astitch_buffer_info bi;
        assert_int_equal(astitch_plan_buffer_info(p, 0, b, &bi), ASTITCH_OK);
        if (bi.kind != ASTITCH_BUFFER_CARRY)
            continue;
        n++;
        assert_int_equal(bi.first_phase, from);
        assert_int_equal(bi.last_phase, to);
        assert_true(bi.offset % 16 == 0 && bi.offset + bi.bytes <= k.shared_bytes);
        assert_false(bi.zero_init);
    }
    assert_string_equal(astitch_buffer_kind_name(ASTITCH_BUFFER_CARRY), "carry");
    return n;
}

/* A re-read the L2 holds is left alone: softmax_32k's 4 MB of logits carry on a model that
 * does not know its L2 (the host's, l2_bytes 0) and not on the H100's (50 MB); the buffers
 * are what the plan text says. */
static void test_small_rereads_left_alone(void **state)
{
    Fixture *f = *state;
    load(f, "bench/graphs/softmax_32k.json");
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    astitch_device d = device("h100");
    astitch_plan *p = fixture_plan(f, &d, &o);
    assert_false(plan_text_has(p, "carry:"));
    assert_int_equal(carry_buffers(p, 0, 1), 0);
    d.l2_bytes = 0;
    p = fixture_plan(f, &d, &o);
    assert_true(plan_text_has(p, "carry: phase 0 keeps for phase 1, across the global barrier, "
                                 "logits at its first 1 of 1 iterations per thread"));
    assert_int_equal(carry_buffers(p, 0, 1), 1);
    o.carry = false;
    p = fixture_plan(f, &d, &o);
    assert_int_equal(carry_buffers(p, 0, 1), 0);
    assert_true(plan_text_has(p, ", carry off"));
}

/* Kernel 0 of f->g on the H100 model, with and without the option: its plan carries `what`
 * across the block barrier, moves fewer bytes (`minimal`: only its minimal bytes), keeps its
 * grid and its blocks per SM; an L2 of 4 GiB, which holds a wave's rows, leaves the re-read
 * alone. */
static void check_h100_block(Fixture *f, const char *what, bool minimal)
{
    astitch_kernel_info off, on;
    plan(f, "h100", false, &off);
    astitch_plan *p = plan(f, "h100", true, &on);
    if (!plan_text_has(p, what)) {
        char *text = NULL;
        astitch_plan_text(p, &text);
        fail_msg("no '%s' in\n%s", what, text);
    }
    char *json = NULL;
    assert_int_equal(astitch_plan_json(p, &json), ASTITCH_OK);
    assert_non_null(strstr(json, "\"barrier\": \"block\""));
    astitch_free(json);
    assert_int_equal(carry_buffers(p, 0, 2), 1);
    assert_int_equal(on.blocks_per_sm, off.blocks_per_sm);
    assert_int_equal(on.grid, off.grid);
    assert_true(on.moved_bytes < off.moved_bytes);
    assert_true(minimal ? on.moved_bytes == on.min_bytes : on.moved_bytes >= on.min_bytes);
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    astitch_device d = device("h100");
    d.l2_bytes = (int64_t)4 << 30;
    assert_false(plan_text_has(fixture_plan(f, &d, &o), "carry:"));
}

/* A softmax over rows of 32768 bf16 (blocks of 1024, two per SM) keeps each row whole, 64 KB
 * a block, and moves only its minimal bytes. */
static void test_h100_block_softmax(void **state)
{
    Fixture *f = *state;
    build_softmax(f->g, 4096, 32768, ASTITCH_BF16);
    check_h100_block(f, "carry: phase 0 keeps for phase 2, across the block barrier, x at its "
                        "first 4 of 4 iterations per thread (8 elements each)", true);
}

/* A layer norm over rows of 16384 f32 keeps x, 64 KB a block. */
static void test_h100_block_layer_norm(void **state)
{
    Fixture *f = *state;
    build_row_norm(f->g, 2048, 16384, ASTITCH_F32);
    check_h100_block(f, "across the block barrier, x at its first 4 of 4 iterations per thread "
                        "(4 elements each)", false);
}

/* Nothing is carried where a row would take a resident block's place (32768 f32: 128 KB, two
 * blocks per SM leave 113 KB each) or outgrows a block's shared memory (65536 f32). */
static void test_h100_block_too_long(void **state)
{
    Fixture *f = *state;
    build_softmax(f->g, 2048, 32768, ASTITCH_F32);
    astitch_kernel_info k;
    plan(f, "h100", true, &k);
    assert_int_equal(k.blocks_per_sm, 2);
    assert_false(plan_text_has(f->p, "carry:"));
    astitch_graph_destroy(f->g);
    assert_int_equal(astitch_graph_create(f->ctx, &f->g), ASTITCH_OK);
    build_softmax(f->g, 1024, 65536, ASTITCH_F32);
    plan(f, "h100", true, &k);
    assert_false(plan_text_has(f->p, "carry:"));
}

/* Runs x on `inputs` into freshly allocated outputs (one per graph output, *sizes their
 * bytes); the caller frees them. */
static void **run_outputs(astitch_graph *g, astitch_executable *x, const void *const *inputs,
                          size_t *sizes)
{
    int n = astitch_graph_num_outputs(g);
    void **out = calloc((size_t)n, sizeof *out);
    assert_non_null(out);
    for (int i = 0; i < n; i++) {
        astitch_tensor_info t;
        assert_int_equal(astitch_node_info(g, astitch_graph_output(g, i), &t), ASTITCH_OK);
        sizes[i] = t.bytes;
        out[i] = calloc(1, t.bytes ? t.bytes : 1);
        assert_non_null(out[i]);
    }
    assert_int_equal(astitch_execute(x, inputs, out), ASTITCH_OK);
    return out;
}

static astitch_executable *compile_host(astitch_graph *g, bool carry)
{
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_HOST;
    o.plan.carry = carry;
    o.plan.column_vectors = false; /* as plan() */
    astitch_executable *x = NULL;
    if (astitch_compile(g, &o, &x) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(astitch_graph_context(g)));
    return x;
}

/* f->g's host plan carries `what`; on the host target, with the option, it matches the
 * reference on fresh random inputs, and its outputs are bit for bit those without it. */
static void check_host(Fixture *f, const char *what)
{
    astitch_kernel_info k;
    astitch_plan *p = plan(f, "host", true, &k);
    if (!plan_text_has(p, what)) {
        char *text = NULL;
        astitch_plan_text(p, &text);
        fail_msg("no '%s' in\n%s", what, text);
    }
    uint64_t seed = diff_fresh_seed();
    DiffRef *ref = NULL;
    if (diff_ref_create(f->g, seed, false, &ref) != ASTITCH_OK)
        fail_msg("seed %llu: %s", (unsigned long long)seed, astitch_last_error(f->ctx));
    astitch_executable *on = compile_host(f->g, true), *off = compile_host(f->g, false);
    DiffResult r;
    assert_int_equal(diff_ref_check(ref, on, &r), ASTITCH_OK);
    if (!r.ok)
        fail_msg("seed %llu, carried: %s", (unsigned long long)seed, r.message);
    int n = astitch_graph_num_outputs(f->g);
    size_t *sizes = calloc((size_t)n, sizeof *sizes);
    assert_non_null(sizes);
    void **a = run_outputs(f->g, on, diff_ref_inputs(ref), sizes);
    void **b = run_outputs(f->g, off, diff_ref_inputs(ref), sizes);
    for (int i = 0; i < n; i++) {
        if (memcmp(a[i], b[i], sizes[i]) != 0)
            fail_msg("seed %llu: output %d differs with and without the carry",
                     (unsigned long long)seed, i);
        free(a[i]);
        free(b[i]);
    }
    free(a);
    free(b);
    free(sizes);
    astitch_executable_destroy(on);
    astitch_executable_destroy(off);
    diff_ref_destroy(ref);
}

/* A row split across blocks, two carried values (x and the relu's gradient): the small
 * ResNet batch norm backward at [4, 4, 16, 16] (at its own [2, 4, 3, 3] one block takes each
 * row whole, and reads its statistics in its own block: no global barrier, nothing to carry). */
static void test_host_split_rows(void **state)
{
    Fixture *f = *state;
    load_resized(f, "bench/graphs/small/resnet50_train_bwd_relu_bn_small.json", "[2, 4, 3, 3]",
                 "[4, 4, 16, 16]");
    check_host(f, "x, d at its first 1 of 1 iterations per thread (4 elements each)");
}

/* Long rows split across blocks in runs of 4, only the first iterations kept: the walk that
 * reads them goes backwards over the others first. */
static void test_host_row_runs_partial(void **state)
{
    Fixture *f = *state;
    load(f, "bench/graphs/softmax_256k.json");
    check_host(f, "logits at its first 31 of 256 iterations per thread (4 elements each)");
}

/* A column walk (NHWC), every iteration kept. */
static void test_host_columns(void **state)
{
    Fixture *f = *state;
    load(f, "bench/graphs/asr_feature_norm.json");
    check_host(f, "fbank at its first 64 of 64 iterations per thread (1 element each)");
}

/* A column walk whose columns outgrow the shared memory: the first iterations kept. */
static void test_host_columns_partial(void **state)
{
    Fixture *f = *state;
    const int64_t dims[4] = {64, 32, 32, 16};
    build_norm(f->g, dims, 3, ASTITCH_F32);
    check_host(f, "carry: phase 0 keeps for phase 2, across the global barrier, x at its first");
}

/* bf16 activations NCHW: the carried x is kept as bf16, in runs of 8. */
static void test_host_bf16_rows(void **state)
{
    Fixture *f = *state;
    const int64_t dims[4] = {16, 4, 32, 32};
    build_norm(f->g, dims, 1, ASTITCH_BF16);
    check_host(f, "(8 elements each)");
}

/* Across a block barrier on the host target: the online walk in runs of 4 (f32 rows of 10000),
 * in single elements (f16 rows of 9999, which no run divides), and a bf16 layer norm's walk in
 * runs of 8. */
static void test_host_block_online_runs(void **state)
{
    Fixture *f = *state;
    build_softmax(f->g, 64, 10000, ASTITCH_F32);
    check_host(f, "across the block barrier, x at its first 20 of 20 iterations per thread "
                  "(4 elements each)");
}

static void test_host_block_online_single(void **state)
{
    Fixture *f = *state;
    build_softmax(f->g, 40, 9999, ASTITCH_F16);
    check_host(f, "across the block barrier, x at its first 79 of 79 iterations per thread "
                  "(1 element each)");
}

static void test_host_block_rows_bf16(void **state)
{
    Fixture *f = *state;
    build_row_norm(f->g, 40, 12000, ASTITCH_BF16);
    check_host(f, "across the block barrier, x at its first 12 of 12 iterations per thread "
                  "(8 elements each)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_h100_plans),
        FIXTURE_TEST(test_nothing_to_carry),
        FIXTURE_TEST(test_small_rereads_left_alone),
        FIXTURE_TEST(test_host_split_rows),
        FIXTURE_TEST(test_host_row_runs_partial),
        FIXTURE_TEST(test_host_columns),
        FIXTURE_TEST(test_host_columns_partial),
        FIXTURE_TEST(test_host_bf16_rows),
        FIXTURE_TEST(test_h100_block_softmax),
        FIXTURE_TEST(test_h100_block_layer_norm),
        FIXTURE_TEST(test_h100_block_too_long),
        FIXTURE_TEST(test_host_block_online_runs),
        FIXTURE_TEST(test_host_block_online_single),
        FIXTURE_TEST(test_host_block_rows_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
