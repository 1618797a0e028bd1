/*
 * test_interp.c: the reference interpreter, the numerical oracle, against values computed in
 * the tests with plain loops, on fresh random inputs. This file holds whole graphs, custom ops,
 * errors and main; test_interp_elem.c and test_interp_shape.c hold the per-op tests, and
 * interp_check.c their shared helpers. The seed is printed first; ASTITCH_TEST_SEED=N repeats
 * a run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "interp_check.h"

/* The out-of-memory test asks for 8 TiB: under AddressSanitizer malloc must return NULL. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

/* ---- whole graphs -------------------------------------------------------------------------- */

/* y = (x - mean) * rsqrt(var + eps) * gamma + beta over rows of x, with mean as a second output. */
static void test_layernorm_graph(void **state)
{
    Fx f;
    fx_open(&f);
    astitch_graph *g = f.g;
    enum { R = 6, C = 32 };
    int64_t xd[] = {R, C}, rows = R, cols = C, ax1[] = {1}, b0[] = {0}, b1[] = {1};
    astitch_node x = param(&f, ASTITCH_F32, 2, xd), gamma = param(&f, ASTITCH_F32, 1, &cols);
    astitch_node beta = param(&f, ASTITCH_F32, 1, &cols);
    astitch_node n = astitch_constant(g, ASTITCH_F32, 1, &rows, (const double[]){C}, 1);
    astitch_node eps = astitch_constant(g, ASTITCH_F32, 1, &rows, (const double[]){1e-5}, 1);
    astitch_node mean = astitch_binary(g, ASTITCH_OP_DIV,
                                       astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, ax1), n);
    astitch_node d = astitch_binary(g, ASTITCH_OP_SUB, x,
                                    astitch_broadcast_in_dim(g, mean, 2, xd, b0));
    astitch_node var = astitch_binary(
        g, ASTITCH_OP_DIV,
        astitch_reduce(g, ASTITCH_REDUCE_SUM, astitch_binary(g, ASTITCH_OP_MUL, d, d), 1, ax1), n);
    astitch_node rstd = astitch_unary(g, ASTITCH_OP_RSQRT, astitch_binary(g, ASTITCH_OP_ADD, var, eps));
    astitch_node y = astitch_binary(g, ASTITCH_OP_MUL, d, astitch_broadcast_in_dim(g, rstd, 2, xd, b0));
    y = astitch_binary(g, ASTITCH_OP_MUL, y, astitch_broadcast_in_dim(g, gamma, 2, xd, b1));
    y = astitch_binary(g, ASTITCH_OP_ADD, y, astitch_broadcast_in_dim(g, beta, 2, xd, b1));
    output(&f, y);
    output(&f, mean);
    float *xv = rand_floats(R * C, -3, 5), *gv = rand_floats(C, 0.5, 2), *bv = rand_floats(C, -1, 1);
    float gy[R * C], gm[R];
    run(&f, (const void *[]){xv, gv, bv}, (void *[]){gy, gm});
    double wy[R * C], wm[R];
    for (int i = 0; i < R; i++) {
        double s = 0, ss = 0;
        for (int j = 0; j < C; j++)
            s += xv[i * C + j];
        wm[i] = s / C;
        for (int j = 0; j < C; j++)
            ss += (xv[i * C + j] - wm[i]) * (xv[i * C + j] - wm[i]);
        double r = 1 / sqrt(ss / C + 1e-5);
        for (int j = 0; j < C; j++)
            wy[i * C + j] = (xv[i * C + j] - wm[i]) * r * gv[j] + bv[j];
    }
    expect_f32("layernorm mean", R, gm, wm, 1e-6);
    for (int k = 0; k < R * C; k++)
        if (fabs(gy[k] - wy[k]) > 1e-5 * (1 + fabs(wy[k])))
            fail_msg("layernorm: element %d: got %.9g, want %.9g", k, gy[k], wy[k]);
    free(xv);
    free(gv);
    free(bv);
    fx_close(&f);
}

/* A long chain in which x and an early node are read again at the very end, with a parameter
 * and an inner node among the outputs: values must live exactly until their last reader. */
static void test_value_lifetimes(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t n = 4096;
    astitch_node x = param(&f, ASTITCH_F32, 1, &n);
    astitch_node early = astitch_unary(f.g, ASTITCH_OP_NEG, x);
    astitch_node acc = x;
    for (int i = 0; i < 60; i++)
        acc = astitch_binary(f.g, ASTITCH_OP_ADD, acc, x);
    astitch_node late = param(&f, ASTITCH_F32, 1, &n);
    astitch_node out = astitch_binary(f.g, ASTITCH_OP_ADD, astitch_binary(f.g, ASTITCH_OP_ADD, acc, early), late);
    output(&f, out);
    output(&f, x);
    output(&f, early);
    float *xv = malloc((size_t)n * sizeof *xv), *lv = malloc((size_t)n * sizeof *lv);
    float *g1 = malloc((size_t)n * sizeof *g1), *g2 = malloc((size_t)n * sizeof *g2);
    float *g3 = malloc((size_t)n * sizeof *g3);
    double *w1 = malloc((size_t)n * sizeof *w1), *w2 = malloc((size_t)n * sizeof *w2);
    double *w3 = malloc((size_t)n * sizeof *w3);
    for (int64_t k = 0; k < n; k++) {
        xv[k] = (float)rand_int(-1000, 1000);
        lv[k] = (float)rand_int(-1000, 1000);
        w1[k] = 61.0 * xv[k] - xv[k] + lv[k];
        w2[k] = xv[k];
        w3[k] = -(double)xv[k];
    }
    run(&f, (const void *[]){xv, lv}, (void *[]){g1, g2, g3});
    expect_f32("chain", n, g1, w1, 0);
    expect_f32("parameter as output", n, g2, w2, 0);
    expect_f32("early node as output", n, g3, w3, 0);
    free(xv);
    free(lv);
    free(g1);
    free(g2);
    free(g3);
    free(w1);
    free(w2);
    free(w3);
    fx_close(&f);
}

/* ---- custom ops ---------------------------------------------------------------------------- */

typedef struct Axpy {
    float alpha;
    int calls;
    int bad_views;
} Axpy;

/* out = alpha * x + y, x f32 and y f16 of the output's shape [2,3]. */
static astitch_status axpy(void *user, int n, const astitch_tensor_view *in,
                           astitch_tensor_view *out)
{
    Axpy *a = user;
    a->calls++;
    if (n != 2 || in[0].dtype != ASTITCH_F32 || in[1].dtype != ASTITCH_F16 ||
        out->dtype != ASTITCH_F32 || out->rank != 2 || out->dims[0] != 2 || out->dims[1] != 3 ||
        in[1].rank != 2 || in[1].dims[1] != 3) {
        a->bad_views++;
        return ASTITCH_ERR_ARGUMENT;
    }
    const float *x = in[0].data;
    const uint16_t *y = in[1].data;
    float *o = out->data;
    for (int k = 0; k < 6; k++)
        o[k] = (float)(a->alpha * x[k] + f16_value(y[k]));
    return ASTITCH_OK;
}

static astitch_status refuse(void *user, int n, const astitch_tensor_view *in,
                             astitch_tensor_view *out)
{
    return ASTITCH_ERR_DEVICE;
}

static void test_custom_op(void **state)
{
    Fx f;
    fx_open(&f);
    Axpy a = {.alpha = (float)uniform(-2, 2)};
    assert_int_equal(astitch_register_custom(f.ctx, "axpy", axpy, &a), ASTITCH_OK);
    int64_t d[] = {2, 3};
    astitch_node x = param(&f, ASTITCH_F32, 2, d), y = param(&f, ASTITCH_F16, 2, d);
    astitch_node c = astitch_custom(f.g, "axpy", 2, (const astitch_node[]){x, y}, ASTITCH_F32, 2, d);
    output(&f, astitch_binary(f.g, ASTITCH_OP_MUL, c, x)); /* the result feeds later ops */
    float *xv = rand_floats(6, -10, 10), got[6];
    uint16_t yv[6];
    double want[6];
    for (int k = 0; k < 6; k++) {
        yv[k] = rand_f16();
        want[k] = (double)(float)(a.alpha * xv[k] + f16_value(yv[k])) * xv[k];
    }
    run(&f, (const void *[]){xv, yv}, (void *[]){got});
    assert_int_equal(a.calls, 1);
    assert_int_equal(a.bad_views, 0);
    expect_f32("custom axpy * x", 6, got, want, 0);
    /* a failing implementation: its status comes back, with the node and target named */
    assert_int_equal(astitch_register_custom(f.ctx, "axpy", refuse, NULL), ASTITCH_OK);
    assert_int_equal(astitch_run_reference(f.g, (const void *[]){xv, yv}, (void *[]){got}),
                     ASTITCH_ERR_DEVICE);
    assert_error_contains(&f, "(custom)");
    assert_error_contains(&f, "'axpy'");
    free(xv);
    fx_close(&f);
}

/* ---- errors -------------------------------------------------------------------------------- */

static void test_unregistered_custom_op(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t d = 4;
    astitch_node x = param(&f, ASTITCH_F32, 1, &d);
    astitch_node c = astitch_custom(f.g, "my_conv", 1, &x, ASTITCH_F32, 1, &d);
    assert_int_equal(astitch_set_name(f.g, c, "conv1"), ASTITCH_OK);
    output(&f, c);
    float in[4] = {1, 2, 3, 4}, out[4];
    assert_int_equal(astitch_run_reference(f.g, (const void *[]){in}, (void *[]){out}),
                     ASTITCH_ERR_UNSUPPORTED);
    assert_error_contains(&f, "'conv1' (custom)");
    assert_error_contains(&f, "'my_conv'");
    fx_close(&f);
}

static void test_null_buffers(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t d = 4;
    astitch_node x = param(&f, ASTITCH_F32, 1, &d), y = param(&f, ASTITCH_F32, 1, &d);
    output(&f, astitch_binary(f.g, ASTITCH_OP_ADD, x, y));
    output(&f, y);
    float a[4] = {0}, b[4] = {0}, o1[4], o2[4];
    assert_int_equal(astitch_run_reference(NULL, (const void *[]){a, b}, (void *[]){o1, o2}),
                     ASTITCH_ERR_ARGUMENT);
    assert_int_equal(astitch_run_reference(f.g, NULL, (void *[]){o1, o2}), ASTITCH_ERR_ARGUMENT);
    assert_error_contains(&f, "inputs is NULL");
    assert_int_equal(astitch_run_reference(f.g, (const void *[]){a, NULL}, (void *[]){o1, o2}),
                     ASTITCH_ERR_ARGUMENT);
    assert_error_contains(&f, "inputs[1]");
    assert_error_contains(&f, "'p1'");
    assert_int_equal(astitch_run_reference(f.g, (const void *[]){a, b}, NULL), ASTITCH_ERR_ARGUMENT);
    assert_error_contains(&f, "outputs is NULL");
    assert_int_equal(astitch_run_reference(f.g, (const void *[]){a, b}, (void *[]){o1, NULL}),
                     ASTITCH_ERR_ARGUMENT);
    assert_error_contains(&f, "outputs[1]");
    fx_close(&f);
}

static void test_invalid_graph_is_refused(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t d3 = 3, d4 = 4;
    astitch_node x = param(&f, ASTITCH_F32, 1, &d3), y = param(&f, ASTITCH_F32, 1, &d4);
    assert_int_equal(astitch_binary(f.g, ASTITCH_OP_ADD, x, y), ASTITCH_NO_NODE);
    float a[3], b[4], o[3];
    assert_int_equal(astitch_run_reference(f.g, (const void *[]){a, b}, (void *[]){o}),
                     ASTITCH_ERR_GRAPH);
    fx_close(&f);
}

/* 2^40 elements is a legal shape, but its 8 TiB of wide values cannot be had: refused before
 * anything is allocated (so also where memory is overcommitted). */
static void test_out_of_memory(void **state)
{
    Fx f;
    fx_open(&f);
    int64_t d[] = {(int64_t)1 << 20, (int64_t)1 << 20};
    astitch_node big = astitch_iota(f.g, ASTITCH_F32, 2, d, 1);
    assert_int_equal(astitch_set_name(f.g, big, "huge"), ASTITCH_OK);
    output(&f, big);
    float dummy;
    assert_int_equal(astitch_run_reference(f.g, NULL, (void *[]){&dummy}), ASTITCH_ERR_MEMORY);
    assert_error_contains(&f, "'huge' (iota)");
    assert_error_contains(&f, "f32[1048576,1048576]");
    assert_error_contains(&f, "8796093022208 bytes at once");
    fx_close(&f);
}

/* Runs body on a fresh graph in a child process whose data limit is `limit` bytes (or the
 * hard limit already there, when lower). Returns body's result (the child's exit status), or 2
 * when the child could not be set up or did not exit. */
typedef int LimitedBody(astitch_context *ctx, astitch_graph *g, int64_t a, int64_t b);
static int in_limited_child(rlim_t limit, LimitedBody *body, int64_t a, int64_t b)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {limit, limit}, old;
        if (getrlimit(RLIMIT_DATA, &old) == 0 && old.rlim_max != RLIM_INFINITY &&
            old.rlim_max < rl.rlim_max)
            rl.rlim_cur = rl.rlim_max = old.rlim_max;
        astitch_context *ctx;
        astitch_graph *g;
        if (setrlimit(RLIMIT_DATA, &rl) != 0 || astitch_context_create(&ctx) != ASTITCH_OK ||
            astitch_graph_create(ctx, &g) != ASTITCH_OK)
            _exit(2);
        int r = body(ctx, g, a, b);
        fflush(stdout);
        _exit(r);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
        return 2;
    return WEXITSTATUS(status);
}

/* x broadcast to n elements, its exp, and their sum live at once (three values of 8 n bytes).
 * Returns 0 when the run succeeded, 1 when it was refused as too large before running, naming
 * the node and "at once", 2 otherwise. */
static int three_at_once(astitch_context *ctx, astitch_graph *g, int64_t n, int64_t unused)
{
    (void)unused;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 0, NULL);
    astitch_node b = astitch_broadcast_in_dim(g, x, 1, &n, NULL);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, b);
    astitch_node sum = astitch_binary(g, ASTITCH_OP_ADD, b, e);
    int64_t axis = 0;
    astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_MAX, sum, 1, &axis));
    float xv = 0.5f, out = 0;
    astitch_status s = astitch_run_reference(g, (const void *[]){&xv}, (void *[]){&out});
    const char *msg = astitch_last_error(ctx);
    printf("# limited to 2 GiB, %lld elements: %s\n", (long long)n, s ? msg : "ran");
    if (s == ASTITCH_OK)
        return fabsf(out - (0.5f + expf(0.5f))) < 1e-5f ? 0 : 2;
    return s == ASTITCH_ERR_MEMORY && strstr(msg, "at once") && strstr(msg, "(add)") ? 1 : 2;
}

static int run_limited(int64_t n) { return in_limited_child((rlim_t)2 << 30, three_at_once, n, 0); }

/* Values that fit one at a time but not together (three of 1.9 GiB under a 2 GiB limit) are
 * refused with a message, where they would otherwise be allocated (memory overcommitted) and
 * the process killed when their pages are touched; a graph within the limit runs. */
static void test_peak_over_memory(void **state)
{
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* AddressSanitizer's shadow memory counts against the data limit */
#endif
    assert_int_equal(run_limited((int64_t)80 << 20), 1); /* 3 x 640 MiB */
    assert_int_equal(run_limited((int64_t)4 << 20), 0);  /* 3 x 32 MiB */
}

/* A scalar broadcast to n1 elements, their max, that max broadcast to n2 elements, their max.
 * Returns 0 when the run succeeded with the right value, else 1. */
static int two_sizes(astitch_context *ctx, astitch_graph *g, int64_t n1, int64_t n2)
{
    int64_t axis = 0;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 0, NULL);
    astitch_node m1 = astitch_reduce(g, ASTITCH_REDUCE_MAX,
                                     astitch_broadcast_in_dim(g, x, 1, &n1, NULL), 1, &axis);
    astitch_node m2 = astitch_reduce(g, ASTITCH_REDUCE_MAX,
                                     astitch_broadcast_in_dim(g, m1, 1, &n2, NULL), 1, &axis);
    astitch_add_output(g, m2);
    float xv = 0.25f, out = 0;
    astitch_status s = astitch_run_reference(g, (const void *[]){&xv}, (void *[]){&out});
    printf("# limited to 1 GiB, values of %lld then %lld elements: %s\n", (long long)n1,
           (long long)n2, s ? astitch_last_error(ctx) : "ran");
    return s == ASTITCH_OK && out == 0.25f ? 0 : 1;
}

/* The interpreter keeps freed values for later ones of the same size, but never holds more
 * than the peak it checked: a value of 550 MiB freed before one of 600 MiB is made (each
 * alone within the 768 MiB budget of a 1 GiB limit, the two together not) runs. */
static void test_kept_values_within_peak(void **state)
{
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* AddressSanitizer's shadow memory counts against the data limit */
#endif
    int64_t n1 = (int64_t)550 << 17, n2 = (int64_t)600 << 17; /* 550 and 600 MiB of Wide */
    assert_int_equal(in_limited_child((rlim_t)1 << 30, two_sizes, n1, n2), 0);
}

int main(void)
{
    const char *env = getenv("ASTITCH_TEST_SEED");
    rng = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL) ^ (uint64_t)clock() << 32;
    printf("# test_interp: seed %llu (ASTITCH_TEST_SEED=%llu repeats this run)\n",
           (unsigned long long)rng, (unsigned long long)rng);
    const struct CMUnitTest own[] = {
        cmocka_unit_test(test_layernorm_graph),
        cmocka_unit_test(test_value_lifetimes),
        cmocka_unit_test(test_custom_op),
        cmocka_unit_test(test_unregistered_custom_op),
        cmocka_unit_test(test_null_buffers),
        cmocka_unit_test(test_invalid_graph_is_refused),
        cmocka_unit_test(test_out_of_memory),
        cmocka_unit_test(test_peak_over_memory),
        cmocka_unit_test(test_kept_values_within_peak),
    };
    size_t nown = sizeof own / sizeof own[0];
    size_t n = interp_elem_ntests + interp_shape_ntests + nown;
    struct CMUnitTest *all = malloc(n * sizeof *all);
    if (!all)
        return 1;
    memcpy(all, interp_elem_tests, interp_elem_ntests * sizeof *all);
    memcpy(all + interp_elem_ntests, interp_shape_tests, interp_shape_ntests * sizeof *all);
    memcpy(all + interp_elem_ntests + interp_shape_ntests, own, sizeof own);
    int failed = _cmocka_run_group_tests("interp", all, n, NULL, NULL);
    free(all);
    return failed;
}
