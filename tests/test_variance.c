/*
 * test_variance.c: the one-pass variance rewrite (lib/passes/variance.c) through the public
 * API: which graphs it rewrites, what the plan gains (one read of the input, two global
 * barriers fewer), the caller's graph left alone, and the values on the host target against a
 * double-precision two-pass reference, on fresh random data far from zero (where the textbook
 * one-pass formula loses every digit).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "astitch/plan.h"
#include "astitch/runtime.h"

typedef struct Fixture {
    astitch_context *ctx;
    astitch_graph *g;
    astitch_plan *p;
    astitch_executable *x;
} Fixture;

static int setup(void **state)
{
    Fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(astitch_context_create(&f->ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(f->ctx, &f->g), ASTITCH_OK);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    Fixture *f = *state;
    astitch_executable_destroy(f->x);
    astitch_plan_destroy(f->p);
    astitch_graph_destroy(f->g);
    astitch_context_destroy(f->ctx);
    free(f);
    return 0;
}

/* Batch-norm statistics of x[dims] over `axes` (a mask): the mean, and the variance as the sum
 * of squared deviations from the broadcast mean, divided by the count. With keepdim the mean
 * is broadcast from a shape with 1 at the reduced axes (as PyTorch's keepdim=True gives).
 * Outputs: mean, var, and (x - mean) / var (a pass after the variance, as a normalization
 * makes). */
static void build_stats(astitch_graph *g, int rank, const int64_t *dims, uint32_t axes,
                        bool keepdim)
{
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, rank, dims);
    int64_t ax[8], kept[8], kdims[8], keep1[8], ident[8], n = 1;
    int nax = 0, nkept = 0;
    for (int i = 0; i < rank; i++) {
        ident[i] = i;
        keep1[i] = axes >> i & 1 ? 1 : dims[i];
        if (axes >> i & 1) {
            ax[nax++] = i;
            n *= dims[i];
        } else {
            kept[nkept] = i;
            kdims[nkept++] = dims[i];
        }
    }
    double count = (double)n;
    astitch_node c = astitch_constant(g, ASTITCH_F32, 0, NULL, &count, 1);
    astitch_node cb = astitch_broadcast_in_dim(g, c, nkept, kdims, NULL);
    astitch_node sum = astitch_reduce(g, ASTITCH_REDUCE_SUM, x, nax, ax);
    astitch_node mean = astitch_binary(g, ASTITCH_OP_DIV, sum, cb);
    astitch_node mb = keepdim ? astitch_broadcast_in_dim(
                                    g, astitch_reshape(g, mean, rank, keep1), rank, dims, ident)
                              : astitch_broadcast_in_dim(g, mean, rank, dims, kept);
    astitch_node centered = astitch_binary(g, ASTITCH_OP_SUB, x, mb);
    astitch_node sq = astitch_binary(g, ASTITCH_OP_MUL, centered, centered);
    astitch_node sqsum = astitch_reduce(g, ASTITCH_REDUCE_SUM, sq, nax, ax);
    astitch_set_name(g, sqsum, "sqsum");
    astitch_node var = astitch_binary(g, ASTITCH_OP_DIV, sqsum, cb);
    astitch_node vb = keepdim ? astitch_broadcast_in_dim(
                                    g, astitch_reshape(g, var, rank, keep1), rank, dims, ident)
                              : astitch_broadcast_in_dim(g, var, rank, dims, kept);
    astitch_add_output(g, mean);
    astitch_add_output(g, var);
    astitch_add_output(g, astitch_binary(g, ASTITCH_OP_DIV, centered, vb));
    assert_int_equal(astitch_graph_status(g), ASTITCH_OK);
}

static astitch_plan *plan_with(Fixture *f, astitch_fusion fusion, bool one_pass)
{
    astitch_device d;
    assert_int_equal(astitch_device_builtin("h100", &d), ASTITCH_OK);
    astitch_plan_options o;
    astitch_plan_options_default(&o);
    o.fusion = fusion;
    o.one_pass_variance = one_pass;
    astitch_plan *p = NULL;
    if (astitch_plan_create(f->g, &d, &o, &p) != ASTITCH_OK)
        fail_msg("plan: %s", astitch_last_error(f->ctx));
    return p;
}

static bool plan_text_has(const astitch_plan *p, const char *needle)
{
    char *text = NULL;
    assert_int_equal(astitch_plan_text(p, &text), ASTITCH_OK);
    bool has = strstr(text, needle) != NULL;
    astitch_free(text);
    return has;
}

static void kernel0(const astitch_plan *p, astitch_kernel_info *ki)
{
    assert_int_equal(astitch_plan_num_kernels(p), 1);
    assert_int_equal(astitch_plan_kernel_info(p, 0, ki), ASTITCH_OK);
}

/* A column reduction (NHWC batch norm): rewritten, X read once by the statistics, two global
 * barriers fewer, the caller's graph untouched; off, planned as written. */
static void test_column_stats_rewritten(void **state)
{
    Fixture *f = *state;
    build_stats(f->g, 3, (int64_t[]){64, 48, 96}, 0x3, false);
    int before = astitch_graph_num_nodes(f->g);
    astitch_plan *on = plan_with(f, ASTITCH_FUSION_STITCH, true);
    astitch_plan *off = plan_with(f, ASTITCH_FUSION_STITCH, false);
    assert_int_equal(astitch_graph_num_nodes(f->g), before);
    assert_ptr_equal(astitch_plan_graph(off), f->g);
    const astitch_graph *rg = astitch_plan_graph(on);
    assert_ptr_not_equal(rg, f->g);
    assert_true(astitch_graph_find(rg, "sqsum") >= 0);
    assert_true(astitch_graph_find(rg, "sqsum.s1") >= 0);
    assert_true(astitch_graph_find(rg, "sqsum.s2") >= 0);
    assert_int_equal(astitch_graph_num_parameters(rg), 1);
    assert_int_equal(astitch_graph_num_outputs(rg), 3);
    assert_true(plan_text_has(on, "rewritten (one-pass variance, one read of the input): sqsum"));
    assert_false(plan_text_has(off, "rewritten"));
    assert_true(plan_text_has(off, "one-pass variance off"));
    astitch_kernel_info a, b;
    kernel0(on, &a);
    kernel0(off, &b);
    assert_int_equal(a.global_barriers + 2, b.global_barriers);
    int64_t x_bytes = 64 * 48 * 96 * 4;
    assert_true(b.moved_bytes - a.moved_bytes > x_bytes - 4096); /* less the shifts' reads */
    assert_true(b.moved_bytes - a.moved_bytes <= x_bytes);
    astitch_plan_destroy(on);
    astitch_plan_destroy(off);
}

/* Rows that stay in registers (a layer norm over 768) read X once already: not rewritten;
 * neither is the xla baseline, nor a variance of an f16 tensor. */
static void test_not_rewritten(void **state)
{
    Fixture *f = *state;
    build_stats(f->g, 2, (int64_t[]){512, 768}, 0x2, false);
    astitch_plan *p = plan_with(f, ASTITCH_FUSION_STITCH, true);
    assert_ptr_equal(astitch_plan_graph(p), f->g);
    astitch_plan_destroy(p);
    astitch_graph_destroy(f->g);
    assert_int_equal(astitch_graph_create(f->ctx, &f->g), ASTITCH_OK);
    build_stats(f->g, 2, (int64_t[]){512, 768}, 0x1, false);
    p = plan_with(f, ASTITCH_FUSION_XLA, true);
    assert_ptr_equal(astitch_plan_graph(p), f->g);
    astitch_plan_destroy(p);
    p = plan_with(f, ASTITCH_FUSION_STITCH, true);
    assert_ptr_not_equal(astitch_plan_graph(p), f->g); /* the column form is */
    astitch_plan_destroy(p);

    astitch_graph_destroy(f->g);
    assert_int_equal(astitch_graph_create(f->ctx, &f->g), ASTITCH_OK);
    astitch_graph *g = f->g;
    int64_t dims[2] = {256, 64};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F16, 2, dims);
    astitch_node m = astitch_parameter(g, "m", ASTITCH_F16, 1, (int64_t[]){64});
    astitch_node c = astitch_binary(g, ASTITCH_OP_SUB, x,
                                    astitch_broadcast_in_dim(g, m, 2, dims, (int64_t[]){1}));
    astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM,
                                         astitch_binary(g, ASTITCH_OP_MUL, c, c), 1,
                                         (int64_t[]){0}));
    p = plan_with(f, ASTITCH_FUSION_STITCH, true);
    assert_ptr_equal(astitch_plan_graph(p), f->g);
    astitch_plan_destroy(p);
}

/* A name the rewrite would give is taken: the new node gets a suffix, nothing collides. */
static void test_names_kept_unique(void **state)
{
    Fixture *f = *state;
    build_stats(f->g, 2, (int64_t[]){4096, 32}, 0x1, false);
    astitch_node extra = astitch_unary(f->g, ASTITCH_OP_NEG,
                                       astitch_graph_find(f->g, "sqsum"));
    assert_int_equal(astitch_set_name(f->g, extra, "sqsum.s1"), ASTITCH_OK);
    astitch_add_output(f->g, extra);
    astitch_plan *p = plan_with(f, ASTITCH_FUSION_STITCH, true);
    const astitch_graph *rg = astitch_plan_graph(p);
    assert_ptr_not_equal(rg, f->g);
    assert_true(astitch_graph_find(rg, "sqsum.s1_1") >= 0);
    assert_int_equal(astitch_node_op(rg, astitch_graph_find(rg, "sqsum.s1")), ASTITCH_OP_NEG);
    astitch_plan_destroy(p);
}

static uint64_t rng_state;
static double uniform(void) /* [0, 1), splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

/* Runs the statistics graph of x[rows x cols] over axis 0 on the host target, x = offset +
 * spread * (uniform - 0.5) per column, and compares mean and var with a double two-pass
 * reference: var within rel_tol of it. */
static void check_values(Fixture *f, bool keepdim, double offset, double spread, double rel_tol)
{
    enum { ROWS = 3000, COLS = 40 };
    build_stats(f->g, 2, (int64_t[]){ROWS, COLS}, 0x1, keepdim);
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    rng_state = seed;
    float *x = malloc(sizeof(float) * ROWS * COLS), *scaled = malloc(sizeof(float) * ROWS * COLS);
    float mean[COLS], var[COLS];
    assert_non_null(x);
    assert_non_null(scaled);
    for (int i = 0; i < ROWS * COLS; i++)
        x[i] = (float)(offset * (1 + (i % COLS) * 0.01) + spread * (uniform() - 0.5));
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_HOST;
    if (astitch_compile(f->g, &o, &f->x) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(f->ctx));
    assert_ptr_not_equal(astitch_plan_graph(astitch_executable_plan(f->x)), f->g);
    const void *in[1] = {x};
    void *out[3] = {mean, var, scaled};
    assert_int_equal(astitch_execute(f->x, in, out), ASTITCH_OK);
    double worst = 0;
    for (int c = 0; c < COLS; c++) {
        double m = 0, v = 0;
        for (int r = 0; r < ROWS; r++)
            m += x[r * COLS + c];
        m /= ROWS;
        for (int r = 0; r < ROWS; r++)
            v += (x[r * COLS + c] - m) * (x[r * COLS + c] - m);
        v /= ROWS;
        assert_true(fabs(mean[c] - m) <= 1e-5 * fabs(m) + 1e-6 * spread);
        double rel = fabs(var[c] - v) / v;
        worst = rel > worst ? rel : worst;
    }
    printf("offset %g spread %g keepdim %d: seed %llu, worst relative error of var %.3g\n",
           offset, spread, (int)keepdim, (unsigned long long)seed, worst);
    assert_true(worst <= rel_tol);
    free(x);
    free(scaled);
}

static void test_values_near_zero(void **state) { check_values(*state, false, 0.0, 2.0, 1e-4); }

/* Data at 1000 +- 0.5, variance 1/12: sum(x^2) - sum(x)^2 / N would cancel every digit of
 * f32 here (sums of squares near 3e9, spaced 256 apart); the shifted sums keep it as close as
 * near zero. */
static void test_values_far_from_zero(void **state)
{
    check_values(*state, true, 1000.0, 1.0, 1e-4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_column_stats_rewritten, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_rewritten, setup, teardown),
        cmocka_unit_test_setup_teardown(test_names_kept_unique, setup, teardown),
        cmocka_unit_test_setup_teardown(test_values_near_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(test_values_far_from_zero, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
