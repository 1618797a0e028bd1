/*
 * test_dots.c: dots of random layouts (batch, free and contracting axes in any order on
 * either operand, several of each or none, an empty contraction), in every dtype, between
 * memory-intensive ops, on a target against the reference interpreter; fresh random inputs on
 * each run. The plan must hold what lib/passes/dot_lower.c makes of it: an integer dot and an
 * empty contraction (K = 0) as astitch's own ops (no compute step left), a float dot as a
 * compute step that is one strided-batched GEMM (passes/dot_gemm.h) over its operands as the
 * plan's graph holds them.
 *
 * Usage: test_dots [host|cuda] (default host; the gpu suite runs cuda, and it exits 77, a
 * skip, where no GPU is usable).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "astitch/plan.h"
#include "diff_check.h"
#include "passes/dot_gemm.h"
#include "runtime/cuda_driver.h"
#include "../tools/check_tolerance.h"

typedef struct Rng {
    uint64_t s;
} Rng;

static uint32_t next(Rng *r)
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(r->s >> 33);
}

static int below(Rng *r, int n) { return (int)(next(r) % (uint32_t)n); }

/* One dot's layout: nb batch, nc contracting, nl and nr free axes; each operand's axes in a
 * random order. */
typedef struct Layout {
    int nb, nc, nl, nr;
    int64_t bdim[4], kdim[4], ldim[4], rdim[4];
    int lrank, rrank;
    int64_t lshape[8], rshape[8];
    astitch_dot_dims dd;
} Layout;

/* Places roles (0: batch i, 1: contracting i, 2: free i) of one operand at random positions. */
static void place(Rng *r, const Layout *l, int nfree, const int64_t *fdim, int64_t *shape,
                  int64_t *batch, int64_t *contract, int *rank)
{
    int n = l->nb + l->nc + nfree, role[8], idx[8];
    for (int i = 0; i < n; i++) {
        role[i] = i < l->nb ? 0 : i < l->nb + l->nc ? 1 : 2;
        idx[i] = i < l->nb ? i : i < l->nb + l->nc ? i - l->nb : i - l->nb - l->nc;
    }
    for (int i = n - 1; i > 0; i--) {
        int j = below(r, i + 1), t = role[i], u = idx[i];
        role[i] = role[j], idx[i] = idx[j], role[j] = t, idx[j] = u;
    }
    for (int p = 0; p < n; p++) {
        if (role[p] == 0) {
            batch[idx[p]] = p;
            shape[p] = l->bdim[idx[p]];
        } else if (role[p] == 1) {
            contract[idx[p]] = p;
            shape[p] = l->kdim[idx[p]];
        } else {
            shape[p] = fdim[idx[p]];
        }
    }
    *rank = n;
}

static void random_layout(Rng *r, Layout *l)
{
    memset(l, 0, sizeof *l);
    l->nb = below(r, 3);
    l->nc = below(r, 3);
    l->nl = below(r, 3);
    l->nr = below(r, 3);
    for (int i = 0; i < l->nb; i++)
        l->bdim[i] = 1 + below(r, 3);
    for (int i = 0; i < l->nc; i++)
        l->kdim[i] = below(r, 12) == 0 ? 0 : 1 + below(r, 9);
    for (int i = 0; i < l->nl; i++)
        l->ldim[i] = 1 + below(r, 6);
    for (int i = 0; i < l->nr; i++)
        l->rdim[i] = 1 + below(r, 6);
    l->dd.nbatch = l->nb;
    l->dd.ncontract = l->nc;
    place(r, l, l->nl, l->ldim, l->lshape, l->dd.lhs_batch, l->dd.lhs_contract, &l->lrank);
    place(r, l, l->nr, l->rdim, l->rshape, l->dd.rhs_batch, l->dd.rhs_contract, &l->rrank);
}

/* exp(x) and x + 1 around the dot, so that it sits between kernels: the graph a framework
 * hands over. The dot's result is an output too. */
static astitch_graph *build(astitch_context *ctx, const Layout *l, astitch_dtype t)
{
    astitch_graph *g = NULL;
    if (astitch_graph_create(ctx, &g) != ASTITCH_OK)
        return NULL;
    bool flt = t == ASTITCH_F32 || t == ASTITCH_F16 || t == ASTITCH_BF16;
    astitch_node a = astitch_parameter(g, "a", t, l->lrank, l->lshape);
    astitch_node b = astitch_parameter(g, "b", t, l->rrank, l->rshape);
    if (flt)
        a = astitch_unary(g, ASTITCH_OP_TANH, a);
    astitch_node d = astitch_dot(g, a, b, &l->dd);
    astitch_node e = astitch_binary(g, ASTITCH_OP_ADD, d, d);
    astitch_set_name(g, d, "d");
    astitch_set_name(g, e, "e");
    astitch_add_output(g, d);
    astitch_add_output(g, e);
    if (astitch_graph_verify(g) != ASTITCH_OK) {
        fprintf(stderr, "test_dots: %s\n", astitch_last_error(ctx));
        astitch_graph_destroy(g);
        return NULL;
    }
    return g;
}

/* 0 when the plan keeps the dot as a compute step exactly when want_compute, and that step
 * is one GEMM over its operands in the plan's graph. */
static int check_plan(astitch_graph *g, bool want_compute, const char *what)
{
    astitch_device dev;
    astitch_plan *p = NULL;
    if (astitch_device_builtin("h100", &dev) != ASTITCH_OK ||
        astitch_plan_create(g, &dev, NULL, &p) != ASTITCH_OK) {
        printf("FAIL %s: planning\n", what);
        return 1;
    }
    int compute = 0, failures = 0;
    for (int i = 0; i < astitch_plan_num_steps(p); i++) {
        int index;
        if (astitch_plan_step(p, i, &index) != ASTITCH_STEP_COMPUTE)
            continue;
        compute++;
        DotGemm gm;
        dot_gemm_layout(astitch_plan_graph(p), index, &gm);
        if (gm.kind != DOT_GEMM_GEMM) {
            printf("FAIL %s: the planned dot is no GEMM (%s)\n", what, gm.why);
            failures++;
        }
    }
    astitch_plan_destroy(p);
    if ((compute > 0) != want_compute) {
        printf("FAIL %s: %d compute steps, expected %s\n", what, compute,
               want_compute ? "the dot" : "none");
        failures++;
    }
    return failures;
}

/* 0 when the check's f32 tolerance grows with a dot's contraction length K on the output's
 * path (K x 2^-23 from K = 839 on) and only there. */
static int check_tolerances(astitch_context *ctx)
{
    astitch_graph *g = NULL;
    if (astitch_graph_create(ctx, &g) != ASTITCH_OK)
        return 1;
    int64_t da[2] = {2, 4096}, db[2] = {4096, 3}, dc[2] = {2, 8}, dd[2] = {8, 3};
    astitch_dot_dims dims = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
    astitch_node a = astitch_parameter(g, "a", ASTITCH_F32, 2, da);
    astitch_node b = astitch_parameter(g, "b", ASTITCH_F32, 2, db);
    astitch_node c = astitch_parameter(g, "c", ASTITCH_F32, 2, dc);
    astitch_node d = astitch_parameter(g, "d", ASTITCH_F32, 2, dd);
    astitch_node long_k = astitch_dot(g, astitch_unary(g, ASTITCH_OP_EXP, a), b, &dims);
    astitch_add_output(g, astitch_unary(g, ASTITCH_OP_TANH, long_k));
    astitch_add_output(g, astitch_dot(g, c, d, &dims));
    astitch_add_output(g, astitch_unary(g, ASTITCH_OP_EXP, a));
    int failures = astitch_graph_verify(g) != ASTITCH_OK;
    double want[3] = {4096 * 0x1.0p-23, 1e-4, 1e-4};
    for (int i = 0; !failures && i < 3; i++)
        if (check_output_tolerance(g, i) != want[i]) {
            printf("FAIL tolerance of output %d: %g, expected %g\n", i,
                   check_output_tolerance(g, i), want[i]);
            failures++;
        }
    astitch_graph_destroy(g);
    return failures;
}

/* y = dot(reshape(x), reshape(w)) contracting the trailing axis, x [2, 3, 5, 8] read as
 * [30, 8] and w [2, 3, 8] as [6, 8], the reshaped x also read by an element-wise output. With
 * `dot_out` the dot is an output too, so the GEMM must write it as [30, 6]; with `k_split` x is
 * [30, 4, 2], its two trailing axes merged into the contracted one. 0 when the plan's first
 * step is the GEMM, over the parameters themselves, exactly when neither (lib/passes/dot_lower.c,
 * reshape_source), and the outputs match the reference under every fusion mode. */
static int check_through_reshape(astitch_context *ctx, astitch_target target, uint64_t seed,
                                 bool dot_out, bool k_split)
{
    astitch_graph *g = NULL;
    if (astitch_graph_create(ctx, &g) != ASTITCH_OK)
        return 1;
    int64_t dx[4] = {2, 3, 5, 8}, dxk[3] = {30, 4, 2}, dw[3] = {2, 3, 8}, d2[2] = {30, 8},
            dw2[2] = {6, 8};
    astitch_dot_dims dims = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {1}};
    astitch_node x = k_split ? astitch_parameter(g, "x", ASTITCH_BF16, 3, dxk)
                             : astitch_parameter(g, "x", ASTITCH_BF16, 4, dx);
    astitch_node w = astitch_parameter(g, "w", ASTITCH_BF16, 3, dw);
    astitch_node x2 = astitch_reshape(g, x, 2, d2);
    astitch_node y = astitch_dot(g, x2, astitch_reshape(g, w, 2, dw2), &dims);
    astitch_add_output(g, astitch_unary(g, ASTITCH_OP_TANH, y));
    astitch_add_output(g, astitch_binary(g, ASTITCH_OP_ADD, x2, x2));
    if (dot_out)
        astitch_add_output(g, y);
    char what[80];
    snprintf(what, sizeof what, "dot through a reshape%s%s", dot_out ? ", the dot an output" : "",
             k_split ? ", contracted axes merged" : "");
    astitch_device dev;
    astitch_plan *p = NULL;
    int failures = 0;
    if (astitch_graph_verify(g) != ASTITCH_OK || astitch_device_builtin("h100", &dev) != ASTITCH_OK ||
        astitch_plan_create(g, &dev, NULL, &p) != ASTITCH_OK) {
        printf("FAIL %s: planning: %s\n", what, astitch_last_error(ctx));
        astitch_graph_destroy(g);
        return 1;
    }
    int index;
    bool gemm_first = astitch_plan_step(p, 0, &index) == ASTITCH_STEP_COMPUTE;
    const astitch_graph *pg = astitch_plan_graph(p);
    bool on_params = gemm_first && astitch_node_op(pg, astitch_node_operand(pg, index, 0)) ==
                     ASTITCH_OP_PARAMETER && astitch_node_op(pg, astitch_node_operand(pg, index, 1)) ==
                     ASTITCH_OP_PARAMETER;
    if (on_params != (!dot_out && !k_split)) {
        printf("FAIL %s: the GEMM %s over the parameters\n", what,
               on_params ? "runs first" : "does not run first");
        failures++;
    }
    astitch_plan_destroy(p);
    static const astitch_fusion fusions[] = {ASTITCH_FUSION_STITCH, ASTITCH_FUSION_XLA,
                                             ASTITCH_FUSION_NONE};
    for (int f = 0; f < 3; f++) {
        DiffResult r;
        astitch_status s = diff_run(g, target, fusions[f], seed + 1000u + (uint64_t)f, &r);
        if (s != ASTITCH_OK || !r.ok) {
            printf("FAIL %s under %s: %s\n", what, astitch_fusion_name(fusions[f]),
                   s != ASTITCH_OK ? astitch_last_error(ctx) : r.message);
            failures++;
        }
    }
    printf("%s: %s\n", what, failures ? "failed" : "ok");
    astitch_graph_destroy(g);
    return failures;
}

int main(int argc, char **argv)
{
    astitch_target target = ASTITCH_TARGET_HOST;
    if (argc > 1 && strcmp(argv[1], "cuda") == 0)
        target = ASTITCH_TARGET_CUDA;
    else if (argc > 1 && strcmp(argv[1], "host") != 0) {
        fprintf(stderr, "usage: test_dots [host|cuda]\n");
        return 2;
    }
    static const astitch_dtype types[] = {ASTITCH_F32, ASTITCH_F16, ASTITCH_BF16, ASTITCH_I32,
                                          ASTITCH_I64};
    static const astitch_fusion fusions[] = {ASTITCH_FUSION_STITCH, ASTITCH_FUSION_XLA,
                                             ASTITCH_FUSION_NONE};
    uint64_t seed = diff_fresh_seed();
    Rng rng = {seed};
    printf("test_dots: target %s, seed %llu\n", target == ASTITCH_TARGET_CUDA ? "cuda" : "host",
           (unsigned long long)seed);
    astitch_context *ctx = NULL;
    if (astitch_context_create(&ctx) != ASTITCH_OK)
        return 1;
    CudaDevice *dev = NULL;
    if (target == ASTITCH_TARGET_CUDA && cuda_device_open(ctx, 0, &dev) != ASTITCH_OK) {
        printf("skipping: %s\n", astitch_last_error(ctx));
        astitch_context_destroy(ctx);
        return 77;
    }
    cuda_device_close(dev);
    int failures = check_tolerances(ctx), cases = 0;
    for (int i = 0; i < 3; i++)
        failures += check_through_reshape(ctx, target, seed, i == 1, i == 2);
    for (int c = 0; c < 60; c++) {
        Layout l;
        random_layout(&rng, &l);
        astitch_dtype t = types[c % 5];
        char what[96];
        snprintf(what, sizeof what, "case %d (%s, batch %d, contracting %d, free %d+%d)", c,
                 astitch_dtype_name(t), l.nb, l.nc, l.nl, l.nr);
        astitch_graph *g = build(ctx, &l, t);
        if (!g) {
            failures++;
            continue;
        }
        bool flt = t == ASTITCH_F32 || t == ASTITCH_F16 || t == ASTITCH_BF16;
        int64_t k = 1;
        for (int i = 0; i < l.nc; i++)
            k *= l.kdim[i];
        failures += check_plan(g, flt && k > 0, what);
        for (int f = 0; f < 3; f++) {
            DiffResult r;
            astitch_status s = diff_run(g, target, fusions[f], seed + (uint64_t)c, &r);
            cases++;
            if (s != ASTITCH_OK || !r.ok) {
                printf("FAIL %s under %s: %s\n", what, astitch_fusion_name(fusions[f]),
                       s != ASTITCH_OK ? astitch_last_error(ctx) : r.message);
                failures++;
            }
        }
        astitch_graph_destroy(g);
    }
    printf("test_dots: %d runs, %d failures\n", cases, failures);
    astitch_context_destroy(ctx);
    return failures ? 1 : 0;
}
