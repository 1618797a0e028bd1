/*
 * test_view_outputs.c: outputs left to the caller as views of an input
 * (astitch_compile_options.view_outputs, lib/runtime/view_outputs.c) through the public API:
 * which outputs are views and with which offset and strides (GPT-2's v split into heads and
 * transposed, strided slices, a parameter returned as it is), which are not (a reshape that
 * would merge axes apart in memory, a broadcast, anything computed), the option off, every
 * output a view, the plan without the view's ops, astitch_execute filling the views on the
 * reference and host targets against the reference interpreter on fresh random inputs, random
 * chains of reshapes, transposes and slices against the interpreter, and the errors.
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
#include "graph_fixture.h"

/* GPT-2's attention inputs at a small size: qkv [b * t, 3 * h * d] split into q, k and v,
 * each [b, t, h, d] transposed to [b, h, t, d]. Outputs "v.t" (a view), "probs" (a softmax of
 * scores [b * h, t, t], computed) and "k.t" (a view). */
static void build_attention(astitch_graph *g, int64_t b, int64_t t, int64_t h, int64_t d)
{
    int64_t c = h * d;
    astitch_node qkv = astitch_parameter(g, "qkv", ASTITCH_F32, 2, (int64_t[]){b * t, 3 * c});
    astitch_node scores = astitch_parameter(g, "scores", ASTITCH_F32, 3,
                                            (int64_t[]){b * h, t, t});
    astitch_node q3 = astitch_reshape(g, qkv, 3, (int64_t[]){b, t, 3 * c});
    const char *names[2] = {"v.t", "k.t"};
    astitch_node heads[2];
    for (int i = 0; i < 2; i++) {
        int64_t at = i == 0 ? 2 * c : c;
        astitch_node part = astitch_slice(g, q3, (int64_t[]){0, 0, at},
                                          (int64_t[]){b, t, at + c}, NULL);
        astitch_node split = astitch_reshape(g, part, 4, (int64_t[]){b, t, h, d});
        heads[i] = named(g, astitch_transpose(g, split, (int64_t[]){0, 2, 1, 3}), names[i]);
    }
    astitch_node m = astitch_reduce(g, ASTITCH_REDUCE_MAX, scores, 1, (int64_t[]){2});
    int64_t sd[3] = {b * h, t, t};
    astitch_node mb = astitch_broadcast_in_dim(g, m, 3, sd, (int64_t[]){0, 1});
    astitch_node shifted = astitch_binary(g, ASTITCH_OP_SUB, scores, mb);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, shifted);
    astitch_node s = astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, (int64_t[]){2});
    astitch_node sb = astitch_broadcast_in_dim(g, s, 3, sd, (int64_t[]){0, 1});
    astitch_node probs = named(g, astitch_binary(g, ASTITCH_OP_DIV, e, sb), "probs");
    assert_int_equal(astitch_add_output(g, heads[0]), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, probs), ASTITCH_OK);
    assert_int_equal(astitch_add_output(g, heads[1]), ASTITCH_OK);
}

static astitch_executable *compile_views(Fixture *f, astitch_target target, bool views)
{
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = target;
    o.view_outputs = views;
    astitch_executable *x = NULL;
    if (astitch_compile(f->g, &o, &x) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(f->ctx));
    return x;
}

/* Asserts output i of x: a view of input `input` at `offset` with `rank` strides, or not a view
 * (input < 0). */
static void expect_view(const astitch_executable *x, int i, int input, int64_t offset, int rank,
                        const int64_t *strides)
{
    bool is_view = !(input < 0);
    astitch_output_view v;
    assert_int_equal(astitch_executable_output_view(x, i, &is_view, &v), ASTITCH_OK);
    assert_int_equal(is_view, input >= 0);
    if (input < 0)
        return;
    assert_int_equal(v.input, input);
    assert_int_equal(v.offset, offset);
    assert_int_equal(v.rank, rank);
    for (int k = 0; k < rank; k++)
        assert_int_equal(v.strides[k], strides[k]);
}

/* Runs x with astitch_execute on fresh random inputs against the reference; returns whether
 * every output matched. */
static bool values_match(Fixture *f, astitch_executable *x)
{
    DiffRef *d = NULL;
    uint64_t seed = diff_fresh_seed();
    assert_int_equal(diff_ref_create(f->g, seed, true, &d), ASTITCH_OK);
    DiffResult r;
    astitch_status s = diff_ref_check(d, x, &r);
    if (s != ASTITCH_OK || !r.ok)
        printf("seed %llu: %s\n", (unsigned long long)seed, r.message);
    diff_ref_destroy(d);
    return s == ASTITCH_OK && r.ok;
}

/* Whether the plan of x holds an op of this name (in any kernel). */
static bool plan_has_op(const astitch_executable *x, const char *name)
{
    const astitch_plan *p = astitch_executable_plan(x);
    const astitch_graph *pg = astitch_plan_graph(p);
    for (int k = 0; k < astitch_plan_num_kernels(p); k++) {
        astitch_kernel_info ki;
        assert_int_equal(astitch_plan_kernel_info(p, k, &ki), ASTITCH_OK);
        for (int i = 0; i < ki.num_ops; i++) {
            astitch_op_info oi;
            assert_int_equal(astitch_plan_kernel_op(p, k, i, &oi), ASTITCH_OK);
            astitch_tensor_info ti;
            assert_int_equal(astitch_node_info(pg, oi.node, &ti), ASTITCH_OK);
            if (!strcmp(ti.name, name))
                return true;
        }
    }
    return false;
}

static void test_attention_views(void **state)
{
    Fixture *f = *state;
    int64_t b = 2, t = 16, h = 3, d = 8, c = h * d;
    build_attention(f->g, b, t, h, d);
    astitch_executable *x = compile_views(f, ASTITCH_TARGET_HOST, true);
    int64_t vt[4] = {t * 3 * c, d, 3 * c, 1};
    expect_view(x, 0, 0, 2 * c, 4, vt);
    expect_view(x, 1, -1, 0, 0, NULL);
    expect_view(x, 2, 0, c, 4, vt);
    assert_false(plan_has_op(x, "v.t"));
    assert_false(plan_has_op(x, "k.t"));
    assert_true(plan_has_op(x, "probs"));
    assert_true(values_match(f, x));
    astitch_executable_destroy(x);

    /* off (the default): every output written, the transposes planned */
    x = compile_views(f, ASTITCH_TARGET_HOST, false);
    for (int i = 0; i < 3; i++)
        expect_view(x, i, -1, 0, 0, NULL);
    assert_true(plan_has_op(x, "v.t"));
    assert_true(values_match(f, x));
    astitch_executable_destroy(x);
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    assert_false(o.view_outputs);

    /* the reference target fills the views too */
    x = compile_views(f, ASTITCH_TARGET_REFERENCE, true);
    expect_view(x, 0, 0, 2 * c, 4, vt);
    assert_true(values_match(f, x));
    astitch_executable_destroy(x);
}

/* Views through strided slices and a parameter returned as it is; not views: a reshape that
 * merges axes apart in memory, a broadcast, an element-wise op. */
static void test_which_outputs(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    astitch_node p = astitch_parameter(g, "p", ASTITCH_F32, 3, (int64_t[]){4, 6, 10});
    astitch_node y = astitch_parameter(g, "y", ASTITCH_F32, 2, (int64_t[]){5, 7});
    /* 0: every other row of p's middle axis, the last 5 of the innermost, from row 1 */
    astitch_node s = astitch_slice(g, p, (int64_t[]){1, 0, 5}, (int64_t[]){4, 6, 10},
                                   (int64_t[]){1, 2, 1});
    assert_int_equal(astitch_add_output(g, named(g, s, "strided")), ASTITCH_OK);
    /* 1: the transpose of p merged with its innermost axis: not contiguous, not a view */
    astitch_node tr = astitch_transpose(g, p, (int64_t[]){0, 2, 1});
    astitch_node merged = astitch_reshape(g, tr, 2, (int64_t[]){40, 6});
    assert_int_equal(astitch_add_output(g, named(g, merged, "merged")), ASTITCH_OK);
    /* 2: y as it is */
    assert_int_equal(astitch_add_output(g, y), ASTITCH_OK);
    /* 3: a broadcast of y */
    astitch_node bc = astitch_broadcast_in_dim(g, y, 3, (int64_t[]){2, 5, 7}, (int64_t[]){1, 2});
    assert_int_equal(astitch_add_output(g, named(g, bc, "bc")), ASTITCH_OK);
    /* 4: split of p's innermost axis and a merge of its leading two: a view */
    astitch_node split = astitch_reshape(g, p, 4, (int64_t[]){24, 1, 2, 5});
    assert_int_equal(astitch_add_output(g, named(g, split, "split")), ASTITCH_OK);
    /* 5: computed */
    astitch_node neg = named(g, astitch_unary(g, ASTITCH_OP_NEG, s), "neg");
    assert_int_equal(astitch_add_output(g, neg), ASTITCH_OK);
    astitch_executable *x = compile_views(f, ASTITCH_TARGET_HOST, true);
    expect_view(x, 0, 0, 60 + 5, 3, (int64_t[]){60, 20, 1});
    expect_view(x, 1, -1, 0, 0, NULL);
    expect_view(x, 2, 1, 0, 2, (int64_t[]){7, 1});
    expect_view(x, 3, -1, 0, 0, NULL);
    expect_view(x, 4, 0, 0, 4, (int64_t[]){10, 10, 5, 1});
    expect_view(x, 5, -1, 0, 0, NULL);
    assert_true(values_match(f, x));
    bool is_view;
    astitch_output_view v;
    assert_int_equal(astitch_executable_output_view(x, 6, &is_view, &v), ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(f->ctx), "output 6 out of range 0..5"));
    assert_int_equal(astitch_executable_output_view(x, -1, &is_view, &v), ASTITCH_ERR_ARGUMENT);
    assert_int_equal(astitch_executable_output_view(NULL, 0, &is_view, &v), ASTITCH_ERR_ARGUMENT);
    assert_int_equal(astitch_executable_output_view(x, 0, NULL, &v), ASTITCH_ERR_ARGUMENT);
    astitch_executable_destroy(x);
}

/* When every output is a view, output 0 is written and the others left as views. */
static void test_every_output_a_view(void **state)
{
    Fixture *f = *state;
    astitch_graph *g = f->g;
    astitch_node p = astitch_parameter(g, "p", ASTITCH_F32, 2, (int64_t[]){12, 8});
    astitch_node t = astitch_transpose(g, p, (int64_t[]){1, 0});
    assert_int_equal(astitch_add_output(g, named(g, t, "t")), ASTITCH_OK);
    astitch_node r = astitch_reshape(g, p, 3, (int64_t[]){3, 4, 8});
    assert_int_equal(astitch_add_output(g, named(g, r, "r")), ASTITCH_OK);
    astitch_executable *x = compile_views(f, ASTITCH_TARGET_HOST, true);
    expect_view(x, 0, -1, 0, 0, NULL);
    expect_view(x, 1, 0, 0, 3, (int64_t[]){32, 8, 1});
    assert_true(plan_has_op(x, "t"));
    assert_true(values_match(f, x));
    astitch_executable_destroy(x);
}

/* astitch_execute fills a view output that is given and leaves a NULL one alone; a written
 * output must be given, and the message names it as the caller counts outputs. Runs on device
 * pointers are refused off the cuda target as before. */
static void test_errors(void **state)
{
    Fixture *f = *state;
    build_attention(f->g, 1, 8, 2, 4);
    astitch_executable *x = compile_views(f, ASTITCH_TARGET_HOST, true);
    float *buf[5];
    for (int i = 0; i < 5; i++)
        assert_non_null(buf[i] = calloc(1024, sizeof(float)));
    for (int i = 0; i < 1024; i++)
        buf[0][i] = (float)i;
    const void *in[2] = {buf[0], buf[1]};
    void *out[3] = {buf[2], buf[3], NULL};
    assert_int_equal(astitch_execute(x, in, out), ASTITCH_OK);
    assert_true(buf[2][1] == 2 * 8 + 1); /* v.t: qkv's row 0 from column 2 * h * d */
    out[2] = buf[4];
    out[1] = NULL;
    assert_int_equal(astitch_execute(x, in, out), ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(f->ctx), "output 1 ('probs') is NULL"));
    uint64_t din[2] = {64, 128}, dout[3] = {0, 256, 0};
    assert_int_equal(astitch_execute_device(x, din, dout, NULL), ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(f->ctx), "not cuda"));
    for (int i = 0; i < 5; i++)
        free(buf[i]);
    astitch_executable_destroy(x);
}

/* Random chains of reshapes, transposes and slices from a parameter, each chain an output:
 * whatever the runtime takes as a view holds the values the interpreter computes. */
static void test_random_chains(void **state)
{
    (void)state;
    uint64_t seed = diff_fresh_seed();
    srand((unsigned)seed);
    int views = 0, outputs = 0;
    for (int round = 0; round < 40; round++) {
        Fixture *f;
        fixture_setup((void **)&f);
        astitch_graph *g = f->g;
        int64_t dims[3] = {1 + rand() % 4, 1 + rand() % 6, 1 + rand() % 8};
        astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 3, dims);
        for (int o = 0; o < 3; o++) {
            astitch_node v = x;
            astitch_tensor_info ti;
            for (int step = 0; step < 4; step++) {
                assert_int_equal(astitch_node_info(g, v, &ti), ASTITCH_OK);
                int rank = ti.rank, kind = rand() % 3;
                int64_t start[8], limit[8], stride[8], perm[8], shape[8];
                if (kind == 0) { /* transpose: a random permutation */
                    for (int i = 0; i < rank; i++)
                        perm[i] = i;
                    for (int i = rank - 1; i > 0; i--) {
                        int j = rand() % (i + 1);
                        int64_t tmp = perm[i];
                        perm[i] = perm[j];
                        perm[j] = tmp;
                    }
                    v = astitch_transpose(g, v, perm);
                } else if (kind == 1) { /* slice: a random window and step per axis */
                    for (int i = 0; i < rank; i++) {
                        start[i] = rand() % ti.dims[i];
                        limit[i] = start[i] + 1 + rand() % (ti.dims[i] - start[i]);
                        stride[i] = 1 + rand() % 2;
                    }
                    v = astitch_slice(g, v, start, limit, stride);
                } else { /* reshape: merge two neighbours, or split one in two */
                    int n = 0, at = rank > 1 ? rand() % (rank - 1) : 0;
                    bool merge = rank > 1 && rand() % 2;
                    for (int i = 0; i < rank; i++) {
                        if (merge && i == at) {
                            shape[n++] = ti.dims[i] * ti.dims[i + 1];
                            i++;
                        } else if (!merge && i == at && ti.dims[i] % 2 == 0 && rank < 8) {
                            shape[n++] = 2;
                            shape[n++] = ti.dims[i] / 2;
                        } else {
                            shape[n++] = ti.dims[i];
                        }
                    }
                    v = astitch_reshape(g, v, n, shape);
                }
                assert_int_not_equal(v, ASTITCH_NO_NODE);
            }
            if (astitch_add_output(g, v) != ASTITCH_OK) /* the same node twice */
                continue;
        }
        astitch_executable *ex = compile_views(f, ASTITCH_TARGET_REFERENCE, true);
        for (int i = 0; i < astitch_graph_num_outputs(g); i++) {
            bool is_view;
            astitch_output_view vw;
            assert_int_equal(astitch_executable_output_view(ex, i, &is_view, &vw), ASTITCH_OK);
            views += is_view;
            outputs++;
        }
        if (!values_match(f, ex))
            fail_msg("round %d (seed %llu) differs from the reference", round,
                     (unsigned long long)seed);
        astitch_executable_destroy(ex);
        fixture_teardown((void **)&f);
    }
    printf("random chains: %d outputs, %d views\n", outputs, views);
    assert_true(views > 0 && views < outputs);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        FIXTURE_TEST(test_attention_views),
        FIXTURE_TEST(test_which_outputs),
        FIXTURE_TEST(test_every_output_a_view),
        FIXTURE_TEST(test_errors),
        cmocka_unit_test(test_random_chains),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
