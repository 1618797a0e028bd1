/*
 * test_hoist.c: the cheap producers of a kernel's one global barrier run as a kernel of their
 * own before it (lib/passes/hoist.c). For the h100 model: a masked mean pooling (a column sum
 * of x * mask over the tokens divided by the mask's row sum) of 8 MB or more plans the row sum
 * as a hoisted kernel first and the rest without a global barrier; with the plan option hoist
 * off, one kernel with the barrier. Kept, with the plan hoist off gives: the same graph under
 * 8 MB (a launch costs what the barrier does), one whose rest would split its column sums
 * across blocks on the wider grid (a global barrier again: the cut is undone), and a barrier
 * whose producers read the whole tensor (a column sum subtracted from every row). A value the
 * producers make and the rest reads too (the mask scaled) goes from one kernel to the other.
 * With the plan option split_barriers, every global barrier is cut whatever its producers
 * cost: a batch norm's backward under channels_last becomes its channel sums, the two means
 * and dx, with no barrier, and dx recomputes the normalized input rather than read it; a
 * column sum of all of x and its subtraction become two kernels; under 8 MB nothing is cut.
 * Every plan runs on the host target against the reference on fresh random inputs.
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

typedef enum Form {
    POOL,        /* sum_t(x * mask) / sum_t(mask) */
    POOL_SHARED, /* the same with m = mask * 2 read by both sums */
    CENTERED     /* x - mean over the rows, broadcast back: producers read all of x */
} Form;

typedef struct Case {
    const char *what;
    Form form;
    int64_t b, t, h;
    bool hoisted; /* the plan cuts the producers off */
} Case;

static astitch_graph *build(astitch_context *ctx, const Case *c)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t xd[3] = {c->b, c->t, c->h}, md[2] = {c->b, c->t}, on_bt[2] = {0, 1}, on_b = 0,
            axis_t = 1;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 3, xd);
    if (c->form == CENTERED) {
        astitch_node mean = astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, &axis_t);
        int64_t on_bh[2] = {0, 2};
        astitch_node y = astitch_binary(g, ASTITCH_OP_SUB, x,
                                        astitch_broadcast_in_dim(g, mean, 3, xd, on_bh));
        assert_int_equal(astitch_add_output(g, y), ASTITCH_OK);
        assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
        return g;
    }
    astitch_node m = astitch_parameter(g, "mask", ASTITCH_F32, 2, md);
    if (c->form == POOL_SHARED) {
        double two = 2.0;
        m = astitch_binary(g, ASTITCH_OP_MUL, m, astitch_constant(g, ASTITCH_F32, 2, md, &two, 1));
    }
    astitch_node num = astitch_reduce(
        g, ASTITCH_REDUCE_SUM,
        astitch_binary(g, ASTITCH_OP_MUL, x, astitch_broadcast_in_dim(g, m, 3, xd, on_bt)), 1,
        &axis_t);
    astitch_node den = astitch_reduce(g, ASTITCH_REDUCE_SUM, m, 1, &axis_t);
    int64_t od[2] = {c->b, c->h};
    astitch_node pooled = astitch_binary(g, ASTITCH_OP_DIV, num,
                                         astitch_broadcast_in_dim(g, den, 2, od, &on_b));
    assert_int_equal(astitch_add_output(g, pooled), ASTITCH_OK);
    assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
    return g;
}

/* g's plan for the h100 model with the options hoist and split_barriers as given, and its
 * text (*text, to be freed with astitch_free). */
static astitch_plan *make_plan(astitch_graph *g, bool hoist, bool split, char **text)
{
    astitch_device dev;
    astitch_device_builtin("h100", &dev);
    astitch_plan_options po;
    astitch_plan_options_default(&po);
    po.hoist = hoist;
    po.split_barriers = split;
    astitch_plan *p = NULL;
    if (astitch_plan_create(g, &dev, &po, &p) != ASTITCH_OK)
        fail_msg("plan: %s", astitch_last_error(astitch_graph_context(g)));
    assert_int_equal(astitch_plan_text(p, text), ASTITCH_OK);
    return p;
}

/* Checks g's plan for the h100 model with the option hoist as given: hoisted, a first kernel
 * marked hoisted and no global barrier anywhere; else one kernel with one global barrier, and
 * with hoist on the plan of hoist off but for its first line. */
static void check_plan(astitch_graph *g, const Case *c, bool hoist)
{
    char *text = NULL;
    astitch_plan *p = make_plan(g, hoist, false, &text);
    assert_true((strstr(text, ", hoist off") != NULL) == !hoist);
    bool said = strstr(text, "  hoisted: ") != NULL;
    astitch_free(text);
    bool cut = hoist && c->hoisted;
    int n = astitch_plan_num_kernels(p), global = 0, marked = 0, first = -1;
    for (int k = 0; k < n; k++) {
        astitch_kernel_info ki;
        assert_int_equal(astitch_plan_kernel_info(p, k, &ki), ASTITCH_OK);
        global += ki.global_barriers;
        marked += ki.hoisted;
        if (ki.global_barriers == 0)
            assert_false(ki.persistent);
    }
    int index = -1;
    for (int s = 0; first < 0 && s < astitch_plan_num_steps(p); s++)
        if (astitch_plan_step(p, s, &index) == ASTITCH_STEP_KERNEL)
            first = index;
    astitch_kernel_info fi;
    assert_int_equal(astitch_plan_kernel_info(p, first, &fi), ASTITCH_OK);
    if (n != (cut ? 2 : 1) || global != (cut ? 0 : 1) || marked != cut || said != cut ||
        (cut && !fi.hoisted))
        fail_msg("%s, hoist %s: %d kernels, %d global barriers, %d hoisted (the first step's "
                 "%s), the text %s it", c->what, hoist ? "on" : "off", n, global, marked,
                 fi.hoisted ? "one" : "not", said ? "says" : "does not say");
    astitch_plan_destroy(p);
    if (hoist && !c->hoisted) {
        char *on = NULL, *off = NULL;
        astitch_plan_destroy(make_plan(g, true, false, &on));
        astitch_plan_destroy(make_plan(g, false, false, &off));
        const char *a = strchr(on, '\n'), *b = strchr(off, '\n');
        if (!a || !b || strcmp(a, b) != 0)
            fail_msg("%s: the plan with hoist on differs from the plan with it off", c->what);
        astitch_free(on);
        astitch_free(off);
    }
}

/* Runs g's plan for the h100 model, with hoist and split_barriers as given, on the host target
 * against the reference on inputs of the given seed. */
static void run_host(astitch_graph *g, const char *what, bool hoist, bool split, uint64_t seed)
{
    astitch_device model;
    astitch_compile_options o;
    astitch_phase_info first;
    assert_int_equal(diff_host_as(g, "h100", &model, &o, &first), ASTITCH_OK);
    o.plan.hoist = hoist;
    o.plan.split_barriers = split;
    DiffResult r;
    if (diff_run_with(g, &o, seed, &r) != ASTITCH_OK)
        fail_msg("%s: %s", what, astitch_last_error(astitch_graph_context(g)));
    if (!r.ok)
        fail_msg("%s, hoist %d, split %d (seed %llu): %s", what, hoist, split,
                 (unsigned long long)seed, r.message);
}

static void test_hoist(void **state)
{
    (void)state;
    static const Case cases[] = {
        {"masked mean pooling, 25 MB", POOL, 128, 128, 384, true},
        {"masked mean pooling, odd shape", POOL, 37, 100, 600, true},
        {"the scaled mask read by both sums", POOL_SHARED, 128, 128, 384, true},
        {"masked mean pooling under 8 MB", POOL, 4, 128, 256, false},
        {"the rest's column sums split (undone)", POOL, 64, 128, 256, false},
        {"the rest's column sums split, fewer columns (undone)", POOL, 32, 256, 256, false},
        {"a column sum of all of x", CENTERED, 16, 2048, 256, false},
    };
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    uint64_t seed = diff_fresh_seed();
    printf("seed %llu\n", (unsigned long long)seed);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const Case *c = &cases[i];
        astitch_graph *g = build(ctx, c);
        for (int hoist = 0; hoist < 2; hoist++) {
            check_plan(g, c, hoist);
            run_host(g, c->what, hoist, false, seed + i);
        }
        astitch_graph_destroy(g);
    }
    astitch_context_destroy(ctx);
}

/* A batch norm's backward over NHWC dy and x [n, h, w, c] f16, with f32 mean, rstd, gamma
 * [c]: dx (f16), dgamma and dbeta, as autograd writes it. */
static astitch_graph *bn_backward(astitch_context *ctx, int64_t n, int64_t hw, int64_t c)
{
    astitch_graph *g = NULL;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t d[4] = {n, hw, hw, c}, on_c = 3, axes[3] = {0, 1, 2};
    double count = (double)(n * hw * hw);
    astitch_node dy =
        astitch_convert(g, astitch_parameter(g, "dy", ASTITCH_F16, 4, d), ASTITCH_F32);
    astitch_node x = astitch_convert(g, astitch_parameter(g, "x", ASTITCH_F16, 4, d), ASTITCH_F32);
    astitch_node mean = astitch_parameter(g, "mean", ASTITCH_F32, 1, &c);
    astitch_node rstd = astitch_parameter(g, "rstd", ASTITCH_F32, 1, &c);
    astitch_node gamma = astitch_parameter(g, "gamma", ASTITCH_F32, 1, &c);
    astitch_node xhat = astitch_binary(
        g, ASTITCH_OP_MUL,
        astitch_binary(g, ASTITCH_OP_SUB, x, astitch_broadcast_in_dim(g, mean, 4, d, &on_c)),
        astitch_broadcast_in_dim(g, rstd, 4, d, &on_c));
    astitch_node dbeta = astitch_reduce(g, ASTITCH_REDUCE_SUM, dy, 3, axes);
    astitch_node dgamma =
        astitch_reduce(g, ASTITCH_REDUCE_SUM, astitch_binary(g, ASTITCH_OP_MUL, dy, xhat), 3, axes);
    astitch_node cnt = astitch_constant(g, ASTITCH_F32, 1, &c, &count, 1);
    astitch_node mdy = astitch_binary(g, ASTITCH_OP_DIV, dbeta, cnt);
    astitch_node mdx = astitch_binary(g, ASTITCH_OP_DIV, dgamma, cnt);
    astitch_node t = astitch_binary(
        g, ASTITCH_OP_SUB,
        astitch_binary(g, ASTITCH_OP_SUB, dy, astitch_broadcast_in_dim(g, mdy, 4, d, &on_c)),
        astitch_binary(g, ASTITCH_OP_MUL, xhat, astitch_broadcast_in_dim(g, mdx, 4, d, &on_c)));
    astitch_node k = astitch_binary(g, ASTITCH_OP_MUL, gamma, rstd);
    astitch_node dx =
        astitch_binary(g, ASTITCH_OP_MUL, t, astitch_broadcast_in_dim(g, k, 4, d, &on_c));
    assert_int_equal(astitch_add_output(g, astitch_convert(g, dx, ASTITCH_F16)), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, dgamma), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, dbeta), ASTITCH_OK);
    assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
    return g;
}

/* g's plan for the h100 model with split_barriers as given: its kernels, global barriers,
 * hoisted kernels and outputs written, and whether it moves only its minimal bytes. */
typedef struct Shape {
    int kernels, global, hoisted, outputs;
    bool minimal;
} Shape;

static Shape plan_shape(astitch_graph *g, bool split)
{
    char *text = NULL;
    astitch_plan *p = make_plan(g, true, split, &text);
    assert_true((strstr(text, ", barriers split") != NULL) == split);
    astitch_free(text);
    Shape s = {astitch_plan_num_kernels(p), 0, 0, 0, true};
    for (int k = 0; k < s.kernels; k++) {
        astitch_kernel_info ki;
        assert_int_equal(astitch_plan_kernel_info(p, k, &ki), ASTITCH_OK);
        s.global += ki.global_barriers;
        s.hoisted += ki.hoisted;
        s.outputs += ki.num_outputs;
        s.minimal = s.minimal && ki.moved_bytes == ki.min_bytes;
    }
    astitch_plan_destroy(p);
    return s;
}

static void test_split_barriers(void **state)
{
    (void)state;
    static const struct {
        const char *what;
        int which; /* 0: batch norm backward [n, hw, hw, c]; 1: CENTERED [n, hw, c] */
        int64_t n, hw, c;
        Shape split, whole;
    } cases[] = {
        /* the sums, the means, dx: no f32 value of [n, h, w, c] written */
        {"NHWC batch-norm backward, 12 MB", 0, 16, 16, 512, {3, 0, 2, 5, true},
         {1, 2, 0, 3, false}},
        {"NHWC batch-norm backward, odd channels", 0, 16, 25, 200, {3, 0, 2, 5, true},
         {1, 2, 0, 3, false}},
        {"a column sum of all of x, then x minus it", 1, 16, 2048, 256, {2, 0, 1, 2, true},
         {1, 1, 0, 1, false}},
        {"NHWC batch-norm backward under 8 MB", 0, 4, 16, 256, {1, 2, 0, 3, false},
         {1, 2, 0, 3, false}},
    };
    astitch_context *ctx = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    uint64_t seed = diff_fresh_seed();
    printf("seed %llu\n", (unsigned long long)seed);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        Case centered = {cases[i].what, CENTERED, cases[i].n, cases[i].hw, cases[i].c, false};
        astitch_graph *g = cases[i].which ? build(ctx, &centered)
                                          : bn_backward(ctx, cases[i].n, cases[i].hw, cases[i].c);
        for (int split = 0; split < 2; split++) {
            Shape s = plan_shape(g, split), w = split ? cases[i].split : cases[i].whole;
            printf("%s, split %d: %d kernels, %d global barriers, %d hoisted, %d outputs%s\n",
                   cases[i].what, split, s.kernels, s.global, s.hoisted, s.outputs,
                   s.minimal ? ", minimal bytes" : "");
            if (s.kernels != w.kernels || s.global != w.global || s.hoisted != w.hoisted ||
                s.outputs != w.outputs || s.minimal != w.minimal)
                fail_msg("%s, split %d: wanted %d kernels, %d global barriers, %d hoisted, %d "
                         "outputs, %s bytes", cases[i].what, split, w.kernels, w.global,
                         w.hoisted, w.outputs, w.minimal ? "minimal" : "more than the minimal");
            run_host(g, cases[i].what, true, split, seed + i);
        }
        astitch_graph_destroy(g);
    }
    astitch_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hoist),
        cmocka_unit_test(test_split_barriers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
