/* test_ptxas.c: the PTX of every example and of many random graphs, planned for the h100 model
 * under fusion none, xla and stitch, each with the plan option column_vectors off and on,
 * assembled with `ptxas -arch=sm_90 -v`: every kernel assembles, uses at most its PTX's
 * register bound (the plan's, or raised by ptx_raise_bounds), spills nothing and has no static
 * shared memory (the shared memory the plan sizes is dynamic, given at launch, and not in
 * ptxas's count). ASTITCH_PTXAS_GRAPHS sets the number of random graphs (default 120: fixed
 * seeds 1..N-1 and one fresh seed, printed; ASTITCH_FRESH_SEED replays one), and the fresh
 * seeds that once failed run too. Exit 77 (skip) when there is no ptxas. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "codegen/codegen.h"
#include "codegen/compile.h"
#include "gen_graph.h"
#include "passes/plan.h"
#include "runtime/exec_cuda_fill.h"

static const astitch_fusion fusions[] = {ASTITCH_FUSION_NONE, ASTITCH_FUSION_XLA,
                                         ASTITCH_FUSION_STITCH};

/* Plans g under fusion f, compiles it to PTX and checks what ptxas says about each kernel, in
 * the module the CUDA runtime loads (with the fill kernel appended where the plan may need it);
 * prints every failure and returns their number. *kernels counts the kernels checked. */
static int fill_modules; /* modules checked with the fill kernel appended */

static int check_fusion(astitch_graph *g, astitch_fusion f, bool column_vectors, const char *what,
                        int *kernels)
{
    astitch_context *ctx = astitch_graph_context(g);
    astitch_device dev;
    astitch_device_builtin("h100", &dev);
    astitch_plan_options po;
    astitch_plan_options_default(&po);
    po.fusion = f;
    po.column_vectors = column_vectors;
    astitch_plan *p = NULL;
    char *ptx = NULL;
    PtxasReport r = {0};
    char fname[64];
    snprintf(fname, sizeof fname, "%s%s", astitch_fusion_name(f),
             column_vectors ? " (column vectors)" : "");
    int failures = 0;
    bool fill = false;
    if (astitch_plan_create(g, &dev, &po, &p) != ASTITCH_OK ||
        compile_ptx(ctx, p, 90, false, &ptx) != ASTITCH_OK) {
        printf("FAIL %s fusion=%s: %s\n", what, fname, astitch_last_error(ctx));
        failures++;
    } else if ((fill = exec_cuda_fill_needed(p))) {
        char *loaded = exec_cuda_fill_append(ptx);
        assert_non_null(loaded);
        free(ptx);
        ptx = loaded;
    }
    if (!failures && p->nkernel > 0 && ptxas_run(ctx, ptx, 90, &r) != ASTITCH_OK) {
        printf("FAIL %s fusion=%s: %s\n", what, fname, astitch_last_error(ctx));
        failures++;
    }
    const PtxasKernel *fk = fill && !failures ? ptxas_kernel(&r, "astitch_fill") : NULL;
    if (fill && !failures && (!fk || fk->spill_store_bytes || fk->spill_load_bytes)) {
        printf("FAIL %s fusion=%s: the fill kernel %s\n", what, fname,
               fk ? "spills" : "is not in the ptxas report");
        failures++;
    }
    fill_modules += fill;
    for (int k = 0; !failures && k < p->nkernel; k++) {
        const PlanKernel *pk = &p->kernel[k];
        char name[64];
        compile_kernel_name(p, k, -1, name, sizeof name);
        const PtxasKernel *a = ptxas_kernel(&r, name);
        int bound = compile_ptx_maxnreg(ptx, name); /* the plan's, or raised (ptx_pressure.c) */
        (*kernels)++;
        if (!a) {
            printf("FAIL %s fusion=%s kernel %s: not in the ptxas report\n", what, fname, name);
            failures++;
        } else if (bound < pk->regs || a->registers > bound || a->spill_store_bytes ||
                   a->spill_load_bytes || a->shared_bytes) {
            printf("FAIL %s fusion=%s kernel %s (block %d, grid %d): registers %d vs bound %d "
                   "(planned %d), spill stores %d bytes, spill loads %d bytes, static shared %d "
                   "bytes (dynamic %lld planned)\n",
                   what, fname, name, pk->block, pk->grid, a->registers, bound, pk->regs,
                   a->spill_store_bytes, a->spill_load_bytes, a->shared_bytes,
                   (long long)pk->shared_bytes);
            failures++;
        }
    }
    ptxas_report_free(&r);
    free(ptx);
    astitch_plan_destroy(p);
    return failures;
}

static int check_graph(astitch_graph *g, const char *what, int *kernels)
{
    int failures = 0;
    for (size_t f = 0; f < sizeof fusions / sizeof fusions[0]; f++)
        for (int cv = 0; cv < 2; cv++)
            failures += check_fusion(g, fusions[f], cv, what, kernels);
    return failures;
}

/* Calls check on every graph of ASTITCH_SOURCE_ROOT/subdir (its .json files), each loaded in a
 * context of its own; returns the failures check counted and adds the graphs to *count. */
static int for_each_graph(const char *subdir,
                          int (*check)(astitch_graph *g, const char *file, void *user),
                          void *user, int *count)
{
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/%s", root ? root : ".", subdir);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int failures = 0;
    struct dirent *ent;
    while ((ent = readdir(d))) {
        size_t n = strlen(ent->d_name);
        if (n < 6 || strcmp(ent->d_name + n - 5, ".json") != 0)
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
        astitch_context *ctx;
        astitch_graph *g;
        assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
        if (astitch_graph_load_json(ctx, path, &g) != ASTITCH_OK)
            fail_msg("%s: %s", path, astitch_last_error(ctx));
        failures += check(g, ent->d_name, user);
        (*count)++;
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
    }
    closedir(d);
    return failures;
}

static int check_example(astitch_graph *g, const char *file, void *kernels)
{
    return check_graph(g, file, kernels);
}

static void test_examples(void **state)
{
    (void)state;
    int count = 0, kernels = 0;
    int failures = for_each_graph("examples", check_example, &kernels, &count);
    printf("examples: %d graphs x 3 fusions x 2, %d kernels, %d failures; %d modules with the "
           "fill kernel\n", count, kernels, failures, fill_modules);
    assert_true(count >= 10);
    assert_true(fill_modules > 0); /* batch norm's and fig7's plans need it */
    assert_int_equal(failures, 0);
}

static astitch_status gen_custom(void *user, int n, const astitch_tensor_view *in,
                                 astitch_tensor_view *out)
{
    (void)user, (void)n, (void)in, (void)out;
    return ASTITCH_ERR_UNSUPPORTED; /* planned and compiled here, never run */
}

/* Random graph `seed` (the generator's options a function of it) through check_graph; returns
 * its failures. */
static int check_seed(uint64_t seed, int *kernels)
{
    gen_options o;
    gen_options_cycled(&o, seed);
    o.discontinuous = true;
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_register_custom(ctx, "gen_custom", gen_custom, NULL);
    astitch_graph *g = gen_graph(ctx, seed, &o);
    if (!g)
        fail_msg("generator failed for seed %llu: %s", (unsigned long long)seed,
                 astitch_last_error(ctx));
    char what[64];
    snprintf(what, sizeof what, "random graph seed %llu", (unsigned long long)seed);
    int failures = check_graph(g, what, kernels);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
    return failures;
}

/* Fresh seeds that once failed, kept: 1795799850963740, a resident row whose element-wise roots
 * (sin, erf, a select of the sin) spilled 552 bytes at 128 registers (emit_resident.c,
 * reduce_phase). */
static const uint64_t failed_seeds[] = {1795799850963740ull};

static void test_random_graphs(void **state)
{
    (void)state;
    const char *env = getenv("ASTITCH_PTXAS_GRAPHS");
    int total = env ? atoi(env) : 120;
    uint64_t fresh = gen_fresh_seed();
    printf("random graphs: %d (seeds 1..%d and fresh seed %llu; rerun it with "
           "ASTITCH_FRESH_SEED=%llu), and %d that once failed\n", total, total - 1,
           (unsigned long long)fresh, (unsigned long long)fresh,
           (int)(sizeof failed_seeds / sizeof *failed_seeds));
    int failures = 0, kernels = 0;
    for (int i = 0; i < total; i++)
        failures += check_seed(i == total - 1 ? fresh : (uint64_t)i + 1, &kernels);
    for (size_t i = 0; i < sizeof failed_seeds / sizeof *failed_seeds; i++)
        failures += check_seed(failed_seeds[i], &kernels);
    printf("random graphs: %d x 3 fusions x 2, %d kernels, %d failures\n", total, kernels, failures);
    assert_int_equal(failures, 0);
}

/* libdevice pieces (lib/codegen/libdevice.c): a graph of one math function (the library parsed,
 * its math subset kept), then one of every math function (some pieces memoized, the rest from
 * the subset), then that graph
 * again (every piece memoized; sin and cos share helpers, linked once per piece): the PTX
 * assembles within bounds each time, and the two compiles of the same graph are identical. */
static astitch_graph *math_graph(astitch_context *ctx, bool all)
{
    static const astitch_op unary[] = {ASTITCH_OP_SIN, ASTITCH_OP_EXP, ASTITCH_OP_LOG,
                                       ASTITCH_OP_LOG1P, ASTITCH_OP_EXPM1, ASTITCH_OP_SQRT,
                                       ASTITCH_OP_RSQRT, ASTITCH_OP_TANH, ASTITCH_OP_ERF,
                                       ASTITCH_OP_COS, ASTITCH_OP_FLOOR, ASTITCH_OP_CEIL,
                                       ASTITCH_OP_ROUND};
    astitch_graph *g;
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t d[1] = {1000};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 1, d);
    astitch_node acc = astitch_unary(g, unary[0], x);
    for (size_t i = 1; all && i < sizeof unary / sizeof unary[0]; i++)
        acc = astitch_binary(g, ASTITCH_OP_ADD, acc, astitch_unary(g, unary[i], x));
    if (all) {
        acc = astitch_binary(g, ASTITCH_OP_ADD, acc, astitch_binary(g, ASTITCH_OP_POW, x, x));
        acc = astitch_binary(g, ASTITCH_OP_ADD, acc, astitch_binary(g, ASTITCH_OP_REM, x, acc));
    }
    assert_int_equal(astitch_add_output(g, acc), ASTITCH_OK);
    assert_int_equal(astitch_graph_verify(g), ASTITCH_OK);
    return g;
}

static void test_libdevice_pieces(void **state)
{
    (void)state;
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_device dev;
    astitch_device_builtin("h100", &dev);
    astitch_plan_options po;
    astitch_plan_options_default(&po);
    char *ptx[3] = {0};
    int kernels = 0;
    for (int i = 0; i < 3; i++) {
        astitch_graph *g = math_graph(ctx, i > 0);
        astitch_plan *p = NULL;
        assert_int_equal(astitch_plan_create(g, &dev, &po, &p), ASTITCH_OK);
        if (compile_ptx(ctx, p, 90, false, &ptx[i]) != ASTITCH_OK)
            fail_msg("%s", astitch_last_error(ctx));
        astitch_plan_destroy(p);
        assert_int_equal(check_graph(g, i ? "every math function" : "sin", &kernels), 0);
        astitch_graph_destroy(g);
    }
    assert_string_equal(ptx[1], ptx[2]);
    for (int i = 0; i < 3; i++)
        free(ptx[i]);
    astitch_context_destroy(ctx);
}

/* The spills of kernel `name` in ptx, by ptxas (-1 when it fails or misses the kernel). */
static int spill_bytes(astitch_context *ctx, const char *ptx, const char *name)
{
    PtxasReport r = {0};
    int bytes = -1;
    if (ptxas_run(ctx, ptx, 90, &r) == ASTITCH_OK) {
        const PtxasKernel *a = ptxas_kernel(&r, name);
        bytes = a ? a->spill_store_bytes + a->spill_load_bytes : -1;
    }
    ptxas_report_free(&r);
    return bytes;
}

/* The PTX of graph g (file) under the default plan options for the h100 model, whose plan is
 * *p; fails the test when either fails. */
static char *default_ptx(astitch_graph *g, const char *file, astitch_plan **p)
{
    astitch_context *ctx = astitch_graph_context(g);
    astitch_device dev;
    astitch_device_builtin("h100", &dev);
    astitch_plan_options po;
    astitch_plan_options_default(&po);
    char *ptx = NULL;
    *p = NULL;
    if (astitch_plan_create(g, &dev, &po, p) != ASTITCH_OK ||
        compile_ptx(ctx, *p, 90, false, &ptx) != ASTITCH_OK)
        fail_msg("%s: %s", file, astitch_last_error(ctx));
    return ptx;
}

typedef struct LeanCount {
    int resident, lean;
} LeanCount;

/* check of test_resident_lean for graph g (file): its resident kernels that spill, compiled
 * again lean, spill nothing; returns the failures. */
static int check_resident_lean(astitch_graph *g, const char *file, void *user)
{
    LeanCount *c = user;
    astitch_context *ctx = astitch_graph_context(g);
    astitch_plan *p;
    char *ptx = default_ptx(g, file, &p);
    bool *want = calloc((size_t)p->nkernel + 1, sizeof *want), any = false;
    assert_non_null(want);
    for (int k = 0; k < p->nkernel; k++) {
        char name[64];
        compile_kernel_name(p, k, -1, name, sizeof name);
        assert_false(compile_ptx_is_lean(ptx, name));
        if (!p->kernel[k].persistent && p->kernel[k].global_barriers == 0)
            continue;
        c->resident++;
        any |= want[k] = spill_bytes(ctx, ptx, name) != 0;
    }
    char *leaner = NULL;
    if (any && compile_ptx_lean(ctx, p, 90, want, &leaner) != ASTITCH_OK)
        fail_msg("%s: lean: %s", file, astitch_last_error(ctx));
    int failures = 0;
    for (int k = 0; any && k < p->nkernel; k++) {
        char name[64];
        compile_kernel_name(p, k, -1, name, sizeof name);
        assert_true(compile_ptx_is_lean(leaner, name) == want[k]);
        if (!want[k])
            continue;
        c->lean++;
        int bytes = spill_bytes(ctx, leaner, name);
        if (bytes != 0) {
            printf("FAIL %s kernel %s: lean form spills %d bytes\n", file, name, bytes);
            failures++;
        }
    }
    free(leaner);
    free(want);
    free(ptx);
    astitch_plan_destroy(p);
    return failures;
}

typedef struct RaiseCount {
    int raised, kept;
} RaiseCount;

/* check of test_raised_bounds for graph g (file): each kernel compile_ptx gave a bound above
 * the plan's spills at the plan's, and less at its own (the runtime relaxes the rest); returns
 * the failures. */
static int check_raised(astitch_graph *g, const char *file, void *user)
{
    RaiseCount *c = user;
    astitch_context *ctx = astitch_graph_context(g);
    astitch_plan *p;
    char *ptx = default_ptx(g, file, &p);
    int failures = 0;
    for (int k = 0; k < p->nkernel; k++) {
        char name[64];
        compile_kernel_name(p, k, -1, name, sizeof name);
        int bound = compile_ptx_maxnreg(ptx, name), planned = p->kernel[k].regs;
        if (bound == planned) {
            c->kept++;
            continue;
        }
        c->raised++;
        char *at_plan = compile_ptx_with_maxnreg(ptx, name, planned);
        assert_non_null(at_plan);
        int before = spill_bytes(ctx, at_plan, name), after = spill_bytes(ctx, ptx, name);
        printf("%s kernel %s: %d live registers estimated, bound %d raised to %d: spills %d "
               "bytes at %d, %d at %d\n", file, name, ptx_live_registers(ptx, name), planned,
               bound, before, planned, after, bound);
        if (before <= 0 || after < 0 || after >= before || bound < planned) {
            printf("FAIL %s kernel %s: the raise is not needed, or spills no less\n", file,
                   name);
            failures++;
        }
        free(at_plan);
    }
    free(ptx);
    astitch_plan_destroy(p);
    return failures;
}

/* The suite's graphs and the examples: a kernel whose bound compile_ptx raised, where its
 * estimated live registers passed the plan's bound (ptx_raise_bounds), spills at the plan's
 * bound under ptxas and less at the raised one; and some are raised: softmax_backward and
 * bert_base_bwd_attn_softmax (8 bytes at 40 registers), llama2_7b_bwd_rmsnorm (56 at 40), and
 * the element-wise llama2_7b_fwd_rotary (44 at 32, the wider margin of kernels that stream). */
static void test_raised_bounds(void **state)
{
    (void)state;
    RaiseCount c = {0};
    int graphs = 0;
    int failures = for_each_graph("bench/graphs", check_raised, &c, &graphs) +
                   for_each_graph("examples", check_raised, &c, &graphs);
    printf("raised bounds: %d graphs, %d kernels raised, %d at the plan's bound, %d failures\n",
           graphs, c.raised, c.kept, failures);
    assert_true(graphs >= 50 && c.raised >= 4);
    assert_int_equal(failures, 0);
}

/* The suite's graphs and the examples as the cuda runtime loads them (exec_cuda_load.c,
 * lean_spills): a kernel whose grid must be resident and that spills at its bound is compiled
 * again in its lean form, which must not spill. A kernel of a block per tile that spills gets a
 * higher bound instead (not checked here). */
static void test_resident_lean(void **state)
{
    (void)state;
    LeanCount c = {0};
    int graphs = 0;
    int failures = for_each_graph("bench/graphs", check_resident_lean, &c, &graphs) +
                   for_each_graph("examples", check_resident_lean, &c, &graphs);
    printf("resident kernels: %d graphs, %d kernels with a resident grid, %d spilled and went "
           "lean, %d failures\n", graphs, c.resident, c.lean, failures);
    assert_true(graphs >= 50 && c.resident > 0);
    assert_int_equal(failures, 0);
}

int main(void)
{
    char *ptxas = ptxas_find();
    if (!ptxas) {
        printf("# no ptxas (CUDA toolkit) found: skipped\n");
        return 77;
    }
    printf("# %s\n", ptxas);
    free(ptxas);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_libdevice_pieces),
        cmocka_unit_test(test_examples),
        cmocka_unit_test(test_random_graphs),
        cmocka_unit_test(test_resident_lean),
        cmocka_unit_test(test_raised_bounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
