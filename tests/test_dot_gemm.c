/*
 * test_dot_gemm.c: dot_gemm_layout (lib/passes/dot_gemm.c), the strided-batched GEMM a dot is
 * over its operands in memory. For each layout, a one-dot graph runs on the reference
 * interpreter with fresh random inputs, and a plain triple loop reads the same inputs only
 * through the layout's sizes, transposes, leading dimensions and batch strides: a wrong stride
 * or transpose gives other values (or an index out of the operand, checked). Layouts no single
 * stride describes are reported as such.
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

#include "passes/dot_gemm.h"

typedef struct Case {
    const char *name;
    int lrank;
    int64_t ldim[4];
    int rrank;
    int64_t rdim[4];
    astitch_dot_dims dims;
    DotGemmKind kind;
    int ltrans, rtrans; /* expected transposes (GEMM only) */
} Case;

static const Case cases[] = {
    {"plain [M,K]x[K,N]", 2, {5, 7}, 2, {7, 3},
     {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}}, DOT_GEMM_GEMM, 0, 0},
    {"lhs transposed", 2, {7, 5}, 2, {7, 3},
     {.ncontract = 1, .lhs_contract = {0}, .rhs_contract = {0}}, DOT_GEMM_GEMM, 1, 0},
    {"rhs transposed", 2, {5, 7}, 2, {3, 7},
     {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {1}}, DOT_GEMM_GEMM, 0, 1},
    {"both transposed", 2, {7, 5}, 2, {3, 7},
     {.ncontract = 1, .lhs_contract = {0}, .rhs_contract = {1}}, DOT_GEMM_GEMM, 1, 1},
    {"batch leading", 3, {4, 5, 7}, 3, {4, 7, 3},
     {.nbatch = 1, .lhs_batch = {0}, .rhs_batch = {0}, .ncontract = 1, .lhs_contract = {2},
      .rhs_contract = {1}}, DOT_GEMM_GEMM, 0, 0},
    {"batch in the middle (ld above the extent)", 3, {5, 4, 7}, 3, {7, 4, 3},
     {.nbatch = 1, .lhs_batch = {1}, .rhs_batch = {1}, .ncontract = 1, .lhs_contract = {2},
      .rhs_contract = {0}}, DOT_GEMM_GEMM, 0, 0},
    {"batch in the middle, transposed", 3, {7, 4, 5}, 3, {3, 4, 7},
     {.nbatch = 1, .lhs_batch = {1}, .rhs_batch = {1}, .ncontract = 1, .lhs_contract = {0},
      .rhs_contract = {2}}, DOT_GEMM_GEMM, 1, 1},
    {"two batch dims", 4, {2, 3, 5, 7}, 4, {2, 3, 7, 4},
     {.nbatch = 2, .lhs_batch = {0, 1}, .rhs_batch = {0, 1}, .ncontract = 1,
      .lhs_contract = {3}, .rhs_contract = {2}}, DOT_GEMM_GEMM, 0, 0},
    {"several free dims", 3, {2, 3, 6}, 3, {6, 4, 5},
     {.ncontract = 1, .lhs_contract = {2}, .rhs_contract = {0}}, DOT_GEMM_GEMM, 0, 0},
    {"several contract dims", 3, {5, 2, 3}, 3, {2, 3, 4},
     {.ncontract = 2, .lhs_contract = {1, 2}, .rhs_contract = {0, 1}}, DOT_GEMM_GEMM, 0, 0},
    {"several contract dims, pairs listed swapped", 3, {5, 2, 3}, 3, {2, 3, 4},
     {.ncontract = 2, .lhs_contract = {2, 1}, .rhs_contract = {1, 0}}, DOT_GEMM_GEMM, 0, 0},
    {"several contract dims leading, lhs transposed", 3, {2, 3, 5}, 3, {4, 2, 3},
     {.ncontract = 2, .lhs_contract = {0, 1}, .rhs_contract = {1, 2}}, DOT_GEMM_GEMM, 1, 1},
    {"K = 0", 2, {5, 0}, 2, {0, 3},
     {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}}, DOT_GEMM_ZEROS, 0, 0},
    {"M = 0", 2, {0, 7}, 2, {7, 3},
     {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}}, DOT_GEMM_EMPTY, 0, 0},
    {"B = 0", 3, {0, 5, 7}, 3, {0, 7, 3},
     {.nbatch = 1, .lhs_batch = {0}, .rhs_batch = {0}, .ncontract = 1, .lhs_contract = {2},
      .rhs_contract = {1}}, DOT_GEMM_EMPTY, 0, 0},
    {"vector . vector (rank-0 output)", 1, {7}, 1, {7},
     {.ncontract = 1, .lhs_contract = {0}, .rhs_contract = {0}}, DOT_GEMM_GEMM, 0, -1},
    {"outer product (K = 1)", 1, {5}, 1, {3}, {.ncontract = 0}, DOT_GEMM_GEMM, 0, 0},
    {"matrix . vector", 2, {5, 7}, 1, {7},
     {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}}, DOT_GEMM_GEMM, 0, -1},
    {"vector . matrix", 1, {7}, 2, {7, 3},
     {.ncontract = 1, .lhs_contract = {0}, .rhs_contract = {0}}, DOT_GEMM_GEMM, -1, 0},
    {"extent-1 axes among the groups", 4, {1, 4, 7, 5}, 4, {7, 1, 4, 3},
     {.nbatch = 1, .lhs_batch = {1}, .rhs_batch = {2}, .ncontract = 1, .lhs_contract = {2},
      .rhs_contract = {0}}, DOT_GEMM_GEMM, 1, 0},
    {"bert [B*S,H]x[H,H]", 2, {12, 16}, 2, {16, 16},
     {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}}, DOT_GEMM_GEMM, 0, 0},
    {"bert scores [b,h,s,d]x[b,h,s,d]", 4, {2, 3, 6, 8}, 4, {2, 3, 6, 8},
     {.nbatch = 2, .lhs_batch = {0, 1}, .rhs_batch = {0, 1}, .ncontract = 1,
      .lhs_contract = {3}, .rhs_contract = {3}}, DOT_GEMM_GEMM, 0, 1},
    {"bert context [b,h,s,s]x[b,h,s,d]", 4, {2, 3, 6, 6}, 4, {2, 3, 6, 8},
     {.nbatch = 2, .lhs_batch = {0, 1}, .rhs_batch = {0, 1}, .ncontract = 1,
      .lhs_contract = {3}, .rhs_contract = {2}}, DOT_GEMM_GEMM, 0, 0},
    /* no single stride works */
    {"lhs contract axes around a free axis", 3, {3, 4, 5}, 2, {3, 5},
     {.ncontract = 2, .lhs_contract = {0, 2}, .rhs_contract = {0, 1}}, DOT_GEMM_NONE, 0, 0},
    {"lhs free axes around a contract axis", 3, {3, 4, 5}, 2, {4, 6},
     {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}}, DOT_GEMM_NONE, 0, 0},
    {"rhs contract axes in the other order", 3, {5, 2, 3}, 3, {3, 2, 4},
     {.ncontract = 2, .lhs_contract = {2, 1}, .rhs_contract = {0, 1}}, DOT_GEMM_NONE, 0, 0},
    {"batch innermost: neither M nor K contiguous", 3, {4, 5, 7}, 3, {7, 5, 3},
     {.nbatch = 1, .lhs_batch = {2}, .rhs_batch = {0}, .ncontract = 1, .lhs_contract = {1},
      .rhs_contract = {1}}, DOT_GEMM_NONE, 0, 0},
    {"batch axes listed against their order", 4, {2, 3, 5, 7}, 4, {2, 3, 7, 4},
     {.nbatch = 2, .lhs_batch = {1, 0}, .rhs_batch = {1, 0}, .ncontract = 1,
      .lhs_contract = {3}, .rhs_contract = {2}}, DOT_GEMM_NONE, 0, 0},
};

static float frand(void) { return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f; }

static int64_t count(int rank, const int64_t *d)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= d[i];
    return n;
}

/* Element (b, row, col) of an operand as dot_gemm.h defines it: `rows` runs over M (lhs) or K
 * (rhs); `contiguous_rows` is the layout in which the row index has unit stride. */
static float at(const float *v, int64_t n, const DotGemmOperand *op, bool contiguous_rows,
                int64_t b, int64_t row, int64_t col)
{
    int64_t i = b * op->batch_stride + (contiguous_rows ? col * op->ld + row : row * op->ld + col);
    if (i < 0 || i >= n)
        fail_msg("index %lld outside the operand's %lld elements", (long long)i, (long long)n);
    return v[i];
}

static void check_case(const Case *c)
{
    astitch_context *ctx;
    astitch_graph *g;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    astitch_node l = astitch_parameter(g, "l", ASTITCH_F32, c->lrank, c->ldim);
    astitch_node r = astitch_parameter(g, "r", ASTITCH_F32, c->rrank, c->rdim);
    astitch_node d = astitch_dot(g, l, r, &c->dims);
    assert_int_equal(astitch_add_output(g, d), ASTITCH_OK);
    if (astitch_graph_verify(g) != ASTITCH_OK)
        fail_msg("%s: %s", c->name, astitch_last_error(ctx));

    DotGemm gm;
    dot_gemm_layout(g, d, &gm);
    printf("# %s: kind %d, B %lld M %lld N %lld K %lld, lhs %s ld %lld bs %lld, rhs %s ld %lld "
           "bs %lld%s%s\n", c->name, gm.kind, (long long)gm.batch, (long long)gm.m,
           (long long)gm.n, (long long)gm.k, gm.lhs.trans ? "T" : "N", (long long)gm.lhs.ld,
           (long long)gm.lhs.batch_stride, gm.rhs.trans ? "T" : "N", (long long)gm.rhs.ld,
           (long long)gm.rhs.batch_stride, *gm.why ? ": " : "", gm.why);
    assert_int_equal(gm.kind, c->kind);
    assert_int_equal(gm.dtype, ASTITCH_F32);
    if (c->kind == DOT_GEMM_NONE)
        assert_true(*gm.why);
    if (c->kind == DOT_GEMM_GEMM) {
        if (c->ltrans >= 0)
            assert_int_equal(gm.lhs.trans, c->ltrans);
        if (c->rtrans >= 0)
            assert_int_equal(gm.rhs.trans, c->rtrans);
        /* cuBLASLt wants a leading dimension at least the contiguous extent */
        assert_true(gm.lhs.ld >= (gm.lhs.trans ? gm.m : gm.k));
        assert_true(gm.rhs.ld >= (gm.rhs.trans ? gm.k : gm.n));
    }

    int64_t nl = count(c->lrank, c->ldim), nr = count(c->rrank, c->rdim);
    const Node *out = gnode(g, d);
    int64_t no = shape_elements(&out->shape);
    float *lv = malloc((size_t)nl * 4 + 4), *rv = malloc((size_t)nr * 4 + 4);
    float *ref = malloc((size_t)no * 4 + 4);
    assert_true(lv && rv && ref);
    for (int64_t i = 0; i < nl; i++)
        lv[i] = frand();
    for (int64_t i = 0; i < nr; i++)
        rv[i] = frand();
    for (int64_t i = 0; i < no; i++)
        ref[i] = frand(); /* the reference overwrites every element */
    assert_int_equal(astitch_run_reference(g, (const void *[]){lv, rv}, (void *[]){ref}),
                     ASTITCH_OK);
    if (c->kind == DOT_GEMM_ZEROS)
        for (int64_t i = 0; i < no; i++)
            assert_true(ref[i] == 0.0f);
    if (c->kind == DOT_GEMM_EMPTY)
        assert_int_equal(no, 0);
    if (c->kind == DOT_GEMM_GEMM) {
        assert_int_equal(gm.batch * gm.m * gm.n, no);
        int64_t bad = 0;
        for (int64_t b = 0; b < gm.batch; b++)
            for (int64_t i = 0; i < gm.m; i++)
                for (int64_t j = 0; j < gm.n; j++) {
                    double s = 0;
                    for (int64_t k = 0; k < gm.k; k++)
                        s += (double)at(lv, nl, &gm.lhs, gm.lhs.trans, b, i, k) *
                             at(rv, nr, &gm.rhs, gm.rhs.trans, b, k, j);
                    float want = ref[(b * gm.m + i) * gm.n + j];
                    if (fabsf((float)s - want) > 1e-5f * (1.0f + fabsf(want)) && bad++ < 4)
                        print_error("%s: [%lld,%lld,%lld] %g, reference %g\n", c->name,
                                    (long long)b, (long long)i, (long long)j, s, want);
                }
        assert_int_equal(bad, 0);
    }
    free(lv);
    free(rv);
    free(ref);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

static void test_layouts(void **state)
{
    (void)state;
    int kinds[4] = {0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        check_case(&cases[i]);
        kinds[cases[i].kind]++;
    }
    for (int k = 0; k < 4; k++)
        assert_true(kinds[k] > 0);
}

int main(void)
{
    unsigned seed = (unsigned)time(NULL);
    printf("# seed %u\n", seed);
    srand(seed);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
