/*
 * The CUDA runtime on the fake driver's H100 (tests/fake_device.h; no GPU), outside captures:
 * per-step timing (astitch_execute_device_timed), where cuBLASLt is looked for and a missing
 * one, the register relaxation of a kernel that spills, and the variant search over several
 * forms, a form that still spills left out (docs/codegen.md, *Variant search*). Exits 77 (SKIP) where the fakes were not built.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_device.h"
#include "gen_graph.h"
#include "runtime/compile_cache.h"
#include "runtime/cublaslt.h"
#include "runtime/nvjitlink.h"

/* astitch_execute_device_timed: one time per plan step, from the events around it (the
 * fake's cuEventElapsedTime answers in order), refused with a wrong step count and under
 * capture. */
static void test_timed_run(void **state)
{
    const Fake *f = *state;
    astitch_graph *g = gen_dot_between(f->ctx, 64, 96, 32);
    assert_non_null(g);
    astitch_executable *x = compile_for_fake(f, g, false);
    int nstep = astitch_plan_num_steps(astitch_executable_plan(x));
    assert_true(nstep >= 3 && nstep <= 6); /* a kernel, the dot, a kernel */
    uint64_t in[2] = {0x200000000000ull, 0x200100000000ull}, out = 0x300000000000ull;
    double us[8] = {0};
    f->set_elapsed((const float[]){0.25f, 1.5f, 0.125f, 2.0f, 3.0f, 4.0f}, 6);
    expect_ok(f, astitch_execute_device_timed(x, in, &out, f->stream, us, nstep));
    assert_true(us[0] == 250.0 && us[1] == 1500.0 && us[2] == 125.0);
    assert_int_equal(astitch_execute_device_timed(x, in, &out, f->stream, us, nstep + 1),
                     ASTITCH_ERR_ARGUMENT);
    printf("# expected error: %s\n", astitch_last_error(f->ctx));
    assert_non_null(strstr(astitch_last_error(f->ctx), "one entry per step"));
    const CudaDriver *d = &f->dev->drv;
    assert_int_equal(d->StreamBeginCapture(f->stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    astitch_status s = astitch_execute_device_timed(x, in, &out, f->stream, us, nstep);
    CUgraph graph = NULL;
    assert_int_equal(d->StreamEndCapture(f->stream, &graph), CUDA_SUCCESS);
    if (graph)
        d->GraphDestroy(graph);
    assert_int_equal(s, ASTITCH_ERR_UNSUPPORTED);
    assert_non_null(strstr(astitch_last_error(f->ctx), "cannot be captured"));
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
}

/* Where cuBLASLt is looked for, and a missing one: an error naming every place tried, unless
 * host_compute asks for the dots on the host. */
static void test_cublaslt_missing(void **state)
{
    const Fake *f = *state;
    char places[CUBLASLT_MAX_PLACES][512], *fake = strdup(getenv("ASTITCH_CUBLASLT"));
    assert_int_equal(cublaslt_places(places, CUBLASLT_MAX_PLACES), 1);
    assert_string_equal(places[0], fake);
    unsetenv("ASTITCH_CUBLASLT");
    setenv("ASTITCH_CUDA_PATH", "/nonexistent/cuda", 1);
    int n = cublaslt_places(places, CUBLASLT_MAX_PLACES);
    assert_int_equal(n, 3);
    assert_string_equal(places[0], "/nonexistent/cuda/lib64/libcublasLt.so.13");
    assert_non_null(strstr(places[1], "/lib64/libcublasLt.so.13"));
    assert_string_equal(places[2], "libcublasLt.so.13");
    unsetenv("ASTITCH_CUDA_PATH");

    setenv("ASTITCH_CUBLASLT", "/nonexistent/libcublasLt-missing.so.13", 1);
    astitch_graph *g = gen_dot_between(f->ctx, 64, 96, 32);
    assert_non_null(g);
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    astitch_executable *x = NULL;
    assert_int_equal(astitch_compile(g, &o, &x), ASTITCH_ERR_NO_DEVICE);
    const char *msg = astitch_last_error(f->ctx);
    printf("# expected error: %s\n", msg);
    assert_non_null(strstr(msg, "cuBLASLt"));
    assert_non_null(strstr(msg, "/nonexistent/libcublasLt-missing.so.13 ("));
    assert_non_null(strstr(msg, "host_compute"));
    expect_ok(f, astitch_context_set_option(f->ctx, "host_compute", "1"));
    expect_ok(f, astitch_compile(g, &o, &x));
    assert_false(exec_cuda_compute_on_gpu(x, first_compute(x)));
    assert_int_equal(astitch_executable_host_compute_ops(x), 1);
    astitch_executable_destroy(x);
    expect_ok(f, astitch_context_set_option(f->ctx, "host_compute", NULL));
    setenv("ASTITCH_CUBLASLT", fake, 1);
    free(fake);
    astitch_graph_destroy(g);
}

/* A kernel of a block per tile that spills at its planned register bound is loaded again with
 * the bound of one block fewer per SM until it does not (the fake spills below 48: 32 -> 40 ->
 * 64, three loads), and the compile cache keeps the relaxed PTX, so compiling the same graph
 * again loads it at once; a persistent kernel keeps its bound and is loaded again in its lean
 * form (two loads; again at once from the cache, known lean by its mark); without spills one
 * load. No module of these comes from a job: a plan without other forms compiles nothing ahead
 * (test_lone_kernel_ahead), and the driver's JIT compiles in the caller's thread. */
static void test_relax_spills(void **state)
{
    const Fake *f = *state;
    static const struct {
        const char *below;
        bool persistent;
        int64_t rows;
        int loads, regs, compiles, guessed, guess_taken;
    } cases[] = {
        {"48", false, 1024, 3, 64, 0, 0, 0}, {"48", true, 1024, 2, 32, 0, 0, 0},
        {NULL, false, 2048, 1, 32, 0, 0, 0}, {"48", false, 1024, 1, 64, 0, 0, 0},
        {"48", true, 1024, 1, 32, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        astitch_graph *g;
        assert_int_equal(astitch_graph_create(f->ctx, &g), ASTITCH_OK);
        int64_t d[2] = {cases[i].rows, 1024};
        astitch_node a = astitch_parameter(g, "a", ASTITCH_F32, 2, d);
        astitch_node b = astitch_parameter(g, "b", ASTITCH_F32, 2, d);
        astitch_add_output(g, astitch_binary(g, ASTITCH_OP_ADD, a, b));
        if (cases[i].below)
            setenv("FAKE_CUDA_SPILL_BELOW", cases[i].below, 1);
        astitch_compile_options o;
        astitch_compile_options_default(&o);
        o.target = ASTITCH_TARGET_CUDA;
        o.plan.persistent = cases[i].persistent;
        int before = f->loads(), jit_before = f->jit_compiles() + ptxas_compiles(f);
        CubinJobStats jobs_before = cubin_job_stats();
        astitch_executable *x = NULL;
        expect_ok(f, astitch_compile(g, &o, &x));
        unsetenv("FAKE_CUDA_SPILL_BELOW");
        CubinJobStats jobs = cubin_job_stats();
        printf("# nvJitLink and ptxas: %d modules compiled, %ld jobs started, %ld taken, %ld "
               "not\n", f->jit_compiles() + ptxas_compiles(f) - jit_before, jobs.started - jobs_before.started,
               jobs.taken - jobs_before.taken, jobs.untaken - jobs_before.untaken);
        assert_int_equal(f->jit_compiles() + ptxas_compiles(f) - jit_before, cases[i].compiles);
        assert_int_equal(jobs.started - jobs_before.started, cases[i].guessed);
        assert_int_equal(jobs.taken - jobs_before.taken, cases[i].guess_taken);
        assert_int_equal(jobs.untaken - jobs_before.untaken,
                         cases[i].guessed - cases[i].guess_taken);
        astitch_kernel_info k;
        assert_int_equal(astitch_plan_kernel_info(astitch_executable_plan(x), 0, &k), ASTITCH_OK);
        printf("# spill below %s, persistent %d: planned %d registers, %d loads, bound %d\n",
               cases[i].below ? cases[i].below : "-", cases[i].persistent, k.regs,
               f->loads() - before, f->function_regs());
        assert_int_equal(k.regs, 32);
        assert_int_equal(f->loads() - before, cases[i].loads);
        assert_int_equal(f->function_regs(), cases[i].regs);
        /* what the executable says it loaded */
        astitch_loaded_kernel lk;
        expect_ok(f, astitch_executable_loaded_kernel(x, 0, &lk));
        assert_int_equal(lk.planned_bound, 32);
        assert_int_equal(lk.bound, cases[i].regs);
        assert_int_equal(lk.regs, cases[i].regs);
        assert_int_equal(lk.local_bytes, cases[i].below && cases[i].persistent ? 16 : 0);
        /* a persistent kernel keeps its bound and is loaded again in its lean form, once (the
         * fake spills below the bound whatever the code) */
        assert_int_equal(lk.lean, cases[i].below && cases[i].persistent);
        assert_int_equal(lk.blocks_per_sm, 65536 / (cases[i].regs * k.block));
        assert_int_equal(astitch_executable_loaded_kernel(x, 1, &lk), ASTITCH_ERR_ARGUMENT);
        assert_int_equal(astitch_executable_loaded_kernel(x, -1, &lk), ASTITCH_ERR_ARGUMENT);
        assert_int_equal(astitch_executable_loaded_kernel(x, 0, NULL), ASTITCH_ERR_ARGUMENT);
        astitch_executable_destroy(x);
        if (i == 0) { /* the host target loads no GPU kernels */
            o.target = ASTITCH_TARGET_HOST;
            expect_ok(f, astitch_compile(g, &o, &x));
            assert_int_equal(astitch_executable_loaded_kernel(x, 0, &lk), ASTITCH_ERR_UNSUPPORTED);
            printf("# expected error: %s\n", astitch_last_error(f->ctx));
            astitch_executable_destroy(x);
        }
        astitch_graph_destroy(g);
    }
}

/* softmax_rows_graph: a softmax over rows of 4096 f32, held in registers by a kernel of a
 * block per tile (planned at 40 registers, the next bound 48). */
static astitch_graph *softmax_rows_graph(const Fake *f)
{
    astitch_graph *g;
    expect_ok(f, astitch_graph_create(f->ctx, &g));
    int64_t d[2] = {4096, 4096}, axis = 1, keep = 0;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, x);
    astitch_node s = astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &axis);
    astitch_node sb = astitch_broadcast_in_dim(g, s, 2, d, &keep);
    expect_ok(f, astitch_add_output(g, astitch_binary(g, ASTITCH_OP_DIV, e, sb)));
    return g;
}

/* A kernel that holds rows in registers (a softmax over rows of 4096) and may be relaxed, in
 * a plan without other forms: nothing compiles ahead, whatever compiles the PTX (a module
 * compiled beside the caller's slows it on the host, and is wasted unless the kernel spills);
 * when the kernel spills, its reload at the next bound compiles where it is needed. Compiles
 * count nvJitLink's and ptxas's. */
/* x's compile times (astitch_compile_times): the parts within the total, `jit` modules by the
 * driver's JIT and `ahead` from cubins, and LLVM's time spent (llvm) or none (every plan from
 * the compile cache). */
static void expect_times(const astitch_executable *x, int jit, int ahead, bool llvm)
{
    astitch_compile_times t;
    assert_int_equal(astitch_executable_compile_times(x, &t), ASTITCH_OK);
    printf("# compile: %.2f ms, plan %.2f, llvm %.2f, load %.2f; %d by the JIT, %d ahead\n",
           t.total_ms, t.plan_ms, t.ptx_ms, t.load_ms, t.jit_modules, t.ahead_modules);
    assert_true(t.plan_ms > 0 && t.load_ms >= 0 && t.ptx_ms >= 0);
    assert_true(t.plan_ms + t.ptx_ms + t.load_ms <= t.total_ms);
    assert_true(llvm ? t.ptx_ms > 0 : t.ptx_ms == 0);
    assert_int_equal(t.jit_modules, jit);
    assert_int_equal(t.ahead_modules, ahead);
}

static void test_lone_kernel_ahead(void **state)
{
    const Fake *f = *state;
    astitch_graph *g = softmax_rows_graph(f);
    static const struct {
        const char *below, *ptx_jit;
        int loads, compiles;
    } cases[] = {
        {"48", NULL, 2, 0}, {NULL, NULL, 1, 0}, {"48", "nvjitlink", 2, 2}, {"48", "driver", 2, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        compile_cache_reset();
        expect_ok(f, astitch_context_set_option(f->ctx, "ptx_jit", cases[i].ptx_jit));
        if (cases[i].below)
            setenv("FAKE_CUDA_SPILL_BELOW", cases[i].below, 1);
        int loads = f->loads(), compiles = f->jit_compiles() + ptxas_compiles(f);
        CubinJobStats before = cubin_job_stats();
        astitch_executable *ex = compile_for_fake(f, g, false);
        unsetenv("FAKE_CUDA_SPILL_BELOW");
        CubinJobStats after = cubin_job_stats();
        int compiled = f->jit_compiles() + ptxas_compiles(f) - compiles;
        astitch_loaded_kernel lk;
        expect_ok(f, astitch_executable_loaded_kernel(ex, 0, &lk));
        printf("# spill below %s, ptx_jit %s: planned bound %d, loaded %d; %d loads, %d "
               "compiles by nvJitLink or ptxas, %ld jobs\n",
               cases[i].below ? cases[i].below : "-", cases[i].ptx_jit ? cases[i].ptx_jit : "-",
               lk.planned_bound, lk.bound, f->loads() - loads, compiled,
               after.started - before.started);
        assert_int_equal(lk.planned_bound, 40);
        assert_int_equal(lk.bound, cases[i].below ? 48 : 40);
        assert_int_equal(f->loads() - loads, cases[i].loads);
        assert_int_equal(compiled, cases[i].compiles);
        assert_int_equal(after.started - before.started, 0);
        bool by_nvjitlink = cases[i].ptx_jit && strcmp(cases[i].ptx_jit, "nvjitlink") == 0;
        expect_times(ex, by_nvjitlink ? 0 : cases[i].loads, by_nvjitlink ? cases[i].loads : 0,
                     true);
        astitch_executable_destroy(ex);
    }
    expect_ok(f, astitch_context_set_option(f->ctx, "ptx_jit", NULL));
    compile_cache_reset();
    /* the reference target compiles nothing: no times; NULL arguments refused */
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_REFERENCE;
    astitch_executable *ref = NULL;
    expect_ok(f, astitch_compile(g, &o, &ref));
    astitch_compile_times t = {.total_ms = -1};
    expect_ok(f, astitch_executable_compile_times(ref, &t));
    assert_true(t.total_ms == 0 && t.plan_ms == 0 && t.jit_modules == 0);
    assert_int_equal(astitch_executable_compile_times(ref, NULL), ASTITCH_ERR_ARGUMENT);
    assert_int_equal(astitch_executable_compile_times(NULL, &t), ASTITCH_ERR_ARGUMENT);
    astitch_executable_destroy(ref);
    astitch_graph_destroy(g);
}

/* A norm's backward in small: dx = dy - sum_row(dy * x) * x and dgamma = sum over the rows of
 * dy * x, rows of `cols` f32: the column sum can be taken in the row pass (forms 2 and 3 of the
 * variant search), which replaces the one-warp or wide choice of rows of 768. */
static astitch_graph *column_sums_graph(const Fake *f, int64_t cols)
{
    astitch_graph *g;
    expect_ok(f, astitch_graph_create(f->ctx, &g));
    int64_t d[2] = {1024, cols}, axis1 = 1, axis0 = 0, keep = 0;
    astitch_node dy = astitch_parameter(g, "dy", ASTITCH_F32, 2, d);
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d);
    astitch_node p = astitch_binary(g, ASTITCH_OP_MUL, dy, x);
    astitch_node s = astitch_broadcast_in_dim(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, p, 1, &axis1), 2, d, &keep);
    expect_ok(f, astitch_add_output(g, astitch_binary(g, ASTITCH_OP_SUB, dy,
                                                      astitch_binary(g, ASTITCH_OP_MUL, s, x))));
    expect_ok(f, astitch_add_output(g, astitch_reduce(g, ASTITCH_REDUCE_SUM, p, 1, &axis0)));
    return g;
}

/* Times n executables of a search over four rounds (the first not read): the one at position
 * i takes base + i / 10, but `fast` (a position) takes 1 ms in round 2. */
static void time_runs(const Fake *f, int n, float base, int fast)
{
    float ms[4 * VARIANT_RUNS];
    for (int i = 0; i < 4 * n; i++)
        ms[i] = base + 0.1f * (float)(i % n);
    if (fast >= 0)
        ms[n + fast] = 1.0f;
    f->set_elapsed(ms, 4 * n);
}

/* Times a search over the default and one other form: `fast` 0 none faster, 1 the other
 * fastest in one round, 2 the other faster by the fraction `within` in every round. */
static void time_two_forms(const Fake *f, int fast, float within)
{
    if (fast < 2) {
        time_runs(f, 2, 2.0f, fast ? 1 : -1);
        return;
    }
    float ms[8];
    for (int i = 0; i < 8; i++)
        ms[i] = i % 2 ? 2.0f * (1.0f - within) : 2.0f;
    f->set_elapsed(ms, 8);
}

/* column_sums_graph's forms 0, 2 and 3 with the bound trial of form 0, in the order they are
 * timed: form 0's row pass holds its rows at 80 registers and may take 128; form 2's takes
 * 248 already (no next bound), form 3's is persistent. */
#define COLUMN_SUMS_CHAIN "0 0+ 2 3"
enum { COLUMN_SUMS_RUNS = 4 };

/* The search over several forms: every form that applies is built and timed in turn, the
 * fastest runs with its switches in its plan, and its index is what the cache keeps; a
 * recorded index that no form of the graph has is ignored. */
static void test_variant_forms(void **state)
{
    const Fake *f = *state;
    astitch_variant_info v;
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "0"));
    astitch_graph *g = column_sums_graph(f, 768);
    astitch_executable *x = compile_for_fake(f, g, false);
    char chain[64];
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_PENDING);
    assert_int_equal(v.nforms, 3);
    assert_int_equal(v.ntrials, 1);
    assert_int_equal(v.form, 0);
    assert_string_equal(chain_text(x, chain, sizeof chain), COLUMN_SUMS_CHAIN);
    time_runs(f, COLUMN_SUMS_RUNS, 2.0f, 3); /* form 3 fastest in one round of three */
    run_plain(f, x);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_TIMED);
    assert_int_equal(v.form, 3);
    assert_false(v.raised_bound);
    assert_true(v.column_sums_in_rows && v.persistent && !v.wide_rows);
    assert_true(v.us[0] == 2.0f * 1e3 && v.us[1] == 0 && v.us[2] == (2.0f + 0.2f) * 1e3 &&
                v.us[3] == 1.0f * 1e3);
    assert_true(v.us_raised[0] == (2.0f + 0.1f) * 1e3 && v.us_raised[1] == 0 &&
                v.us_raised[2] == 0 && v.us_raised[3] == 0);
    assert_int_equal(v.nforms, 3);
    assert_int_equal(v.ntrials, 1);
    const astitch_plan *p = astitch_executable_plan(x);
    assert_true(p->opt.column_sums_in_rows && p->opt.persistent && !p->opt.wide_rows);
    assert_null(x->alt);
    astitch_executable_destroy(x);
    /* the same times but none faster: the default stays */
    x = compile_for_fake(f, g, false);
    time_runs(f, COLUMN_SUMS_RUNS, 2.0f, -1);
    run_plain(f, x);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.form, 0);
    assert_false(astitch_executable_plan(x)->opt.column_sums_in_rows);
    astitch_executable_destroy(x);
    /* recorded: the index; a later compile builds only that form */
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "1"));
    compile_cache_reset();
    x = compile_for_fake(f, g, false);
    time_runs(f, COLUMN_SUMS_RUNS, 2.0f, 2); /* form 2 at its planned bound */
    run_plain(f, x);
    astitch_executable_destroy(x);
    x = compile_for_fake(f, g, false);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_CACHED);
    assert_int_equal(v.form, 2);
    assert_int_equal(v.nforms, 1);
    assert_int_equal(v.ntrials, 0);
    assert_true(v.column_sums_in_rows && !v.persistent && !v.wide_rows);
    assert_true(astitch_executable_plan(x)->opt.column_sums_in_rows);
    assert_null(x->alt);
    astitch_executable_destroy(x);
    /* an index out of range, as a foreign or damaged entry could hold, or of a form the graph
     * does not have (1: wide rows): searched again (the choice is kept under the default
     * form's plan, which the search off compiles) */
    for (int bad = 0; bad < 2; bad++) {
        x = compile_unsearched(f, g);
        assert_int_equal(compile_cache_choice(x->plan, exec_cuda_sm(x)), bad ? 9 : 2);
        compile_cache_set_choice(x->plan, exec_cuda_sm(x), bad ? 1 : 9);
        astitch_executable_destroy(x);
        x = compile_for_fake(f, g, false);
        expect_ok(f, astitch_executable_variant(x, &v));
        assert_int_equal(v.state, ASTITCH_VARIANT_PENDING);
        assert_int_equal(v.nforms, 3);
        assert_string_equal(chain_text(x, chain, sizeof chain), COLUMN_SUMS_CHAIN);
        astitch_executable_destroy(x);
    }
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "1")); /* as the tests after expect */
    compile_cache_reset();
    astitch_graph_destroy(g);
}

/* x [16, 2048, 256] f32 minus its sum over axis 1, broadcast back: 32 MB, one global barrier
 * in the default plan, which the form "barriers split" cuts into two kernels. */
static astitch_graph *centered_graph(const Fake *f)
{
    astitch_graph *g;
    expect_ok(f, astitch_graph_create(f->ctx, &g));
    int64_t d[3] = {16, 2048, 256}, axis = 1, keep[2] = {0, 2};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 3, d);
    astitch_node s = astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, &axis);
    expect_ok(f, astitch_add_output(g, astitch_binary(g, ASTITCH_OP_SUB, x,
                                                      astitch_broadcast_in_dim(g, s, 3, d, keep))));
    return g;
}

/* Form 4 (barriers split) is built beside the default where it cuts a global barrier, and
 * runs when timed faster by more than its margin (3%), its switch in its plan; 1% faster, the
 * default stays. */
static void test_variant_split_form(void **state)
{
    const Fake *f = *state;
    astitch_variant_info v;
    char chain[64];
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "0"));
    astitch_graph *g = centered_graph(f);
    for (int fast = 0; fast < 3; fast++) {
        astitch_executable *x = compile_for_fake(f, g, false);
        expect_ok(f, astitch_executable_variant(x, &v));
        assert_int_equal(v.state, ASTITCH_VARIANT_PENDING);
        assert_int_equal(v.nforms, 2);
        assert_string_equal(chain_text(x, chain, sizeof chain), "0 4");
        assert_int_equal(astitch_plan_num_kernels(x->alt->plan), 2);
        time_two_forms(f, fast, 0.01f);
        run_plain(f, x);
        expect_ok(f, astitch_executable_variant(x, &v));
        assert_int_equal(v.state, ASTITCH_VARIANT_TIMED);
        assert_int_equal(v.form, fast == 1 ? 4 : 0);
        assert_true(v.split_barriers == (fast == 1));
        assert_true(astitch_executable_plan(x)->opt.split_barriers == (fast == 1));
        assert_string_equal(astitch_variant_form_name(4), "barriers split");
        astitch_executable_destroy(x);
    }
    astitch_graph_destroy(g);
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "1")); /* as the tests after expect */
    compile_cache_reset();
}

/* A softmax over [256, 32768] f32: rows past 8192 elements, streamed by default, held in
 * registers by the form "long rows". */
static astitch_graph *long_softmax_graph(const Fake *f)
{
    astitch_graph *g;
    expect_ok(f, astitch_graph_create(f->ctx, &g));
    int64_t d[2] = {256, 32768}, axis = 1, keep = 0;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d);
    astitch_node m = astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, &axis);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, astitch_binary(g, ASTITCH_OP_SUB, x,
                                   astitch_broadcast_in_dim(g, m, 2, d, &keep)));
    astitch_node s = astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &axis);
    expect_ok(f, astitch_add_output(g, astitch_binary(g, ASTITCH_OP_DIV, e,
                                                      astitch_broadcast_in_dim(g, s, 2, d, &keep))));
    return g;
}

/* Form 5 (long rows) is built beside the default where a row of 8193 to 32768 elements can be
 * held in registers, without a bound trial (a block of 1024 at 64 registers has no higher
 * bound), and runs when timed faster by more than its margin (5%), its switch in its plan; 4%
 * faster, the default stays. A form whose kernel still
 * spills once loaded (the fake's below 65 registers) is left out, and the default runs
 * without a search. */
static void test_variant_long_form(void **state)
{
    const Fake *f = *state;
    astitch_variant_info v;
    char chain[64];
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "0"));
    astitch_graph *g = long_softmax_graph(f);
    for (int fast = 0; fast < 3; fast++) {
        astitch_executable *x = compile_for_fake(f, g, false);
        expect_ok(f, astitch_executable_variant(x, &v));
        assert_int_equal(v.state, ASTITCH_VARIANT_PENDING);
        assert_int_equal(v.nforms, 2);
        assert_int_equal(v.ntrials, 0);
        assert_string_equal(chain_text(x, chain, sizeof chain), "0 5");
        assert_true(x->alt->plan->opt.long_rows);
        assert_int_equal(x->alt->plan->kernel[0].block, 1024);
        time_two_forms(f, fast, 0.04f); /* 4%: within its margin (5%) */
        run_plain(f, x);
        expect_ok(f, astitch_executable_variant(x, &v));
        assert_int_equal(v.state, ASTITCH_VARIANT_TIMED);
        assert_int_equal(v.form, fast == 1 ? 5 : 0);
        assert_true(v.long_rows == (fast == 1));
        assert_true(astitch_executable_plan(x)->opt.long_rows == (fast == 1));
        astitch_executable_destroy(x);
    }
    assert_string_equal(astitch_variant_form_name(5), "long rows");
    setenv("FAKE_CUDA_SPILL_BELOW", "65", 1);
    astitch_executable *x = compile_for_fake(f, g, false);
    unsetenv("FAKE_CUDA_SPILL_BELOW");
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_NONE);
    assert_int_equal(v.nforms, 1);
    assert_null(x->alt);
    assert_false(astitch_executable_plan(x)->opt.long_rows);
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "1")); /* as the tests after expect */
    compile_cache_reset();
}

/* The bound search (docs/codegen.md, *Variant search*): column_sums_graph's search times its
 * forms 0, 2 and 3 and form 0's trial, its row pass (which does not spill at the planned 80
 * registers) at 128. The faster of form 0 and its trial runs: the trial's PTX replaces the
 * form's in the compile cache, so the next compile (the form recorded) loads the raised bound
 * at once, one module and nothing timed; or the planned bound is recorded as kept, and the
 * next compile builds no trial. Unset, every module of the search (the trial's too) compiles
 * ahead by ptxas (the fake); under "driver" none does. A form that spills at its planned bound
 * is relaxed as before, and gets no trial; a plan without other forms (softmax_rows_graph)
 * gets none either. */
static void test_bound_search(void **state)
{
    const Fake *f = *state;
    astitch_graph *g = column_sums_graph(f, 768);
    static const struct {
        const char *ptx_jit;
        bool trial_wins;
    } cases[] = {{NULL, true}, {NULL, false}, {"driver", true}};
    char chain[64];
    astitch_variant_info v;
    astitch_loaded_kernel lk;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        compile_cache_reset();
        expect_ok(f, astitch_context_set_option(f->ctx, "ptx_jit", cases[i].ptx_jit));
        int ptxas = ptxas_compiles(f);
        CubinJobStats before = cubin_job_stats();
        astitch_executable *x = compile_for_fake(f, g, false);
        CubinJobStats after = cubin_job_stats();
        expect_ok(f, astitch_executable_variant(x, &v));
        assert_int_equal(v.state, ASTITCH_VARIANT_PENDING);
        assert_int_equal(v.nforms, 3);
        assert_int_equal(v.ntrials, 1);
        assert_string_equal(chain_text(x, chain, sizeof chain), COLUMN_SUMS_CHAIN);
        if (cases[i].ptx_jit) { /* the driver: every module by its JIT */
            assert_int_equal(ptxas_compiles(f) - ptxas, 0);
            assert_int_equal(after.started - before.started, 0);
        } else { /* every module taken from a job of ptxas, the trial's too; the jobs that
                  * helper threads started for the forms ended with the compile */
            assert_int_equal(ptxas_compiles(f) - ptxas, after.started - before.started);
            assert_int_equal(after.taken - before.taken, COLUMN_SUMS_RUNS);
            assert_int_equal(after.live, 0);
        }
        expect_times(x, cases[i].ptx_jit ? COLUMN_SUMS_RUNS : 0,
                     cases[i].ptx_jit ? 0 : COLUMN_SUMS_RUNS, true);
        time_runs(f, COLUMN_SUMS_RUNS, 2.0f, cases[i].trial_wins ? 1 : 0);
        run_plain(f, x);
        expect_ok(f, astitch_executable_variant(x, &v));
        expect_ok(f, astitch_executable_loaded_kernel(x, 0, &lk));
        printf("# ptx_jit %s, trial %s: state %d, form %d, raised %d, %.0f us planned, %.0f us "
               "at the next bound; runs at %d of planned %d\n",
               cases[i].ptx_jit ? cases[i].ptx_jit : "(unset)",
               cases[i].trial_wins ? "faster" : "slower", v.state, v.form, v.raised_bound,
               v.us[0], v.us_raised[0], lk.bound, lk.planned_bound);
        assert_int_equal(v.state, ASTITCH_VARIANT_TIMED);
        assert_int_equal(v.form, 0);
        assert_int_equal(v.raised_bound, cases[i].trial_wins);
        assert_true(fabs(v.us[0] - (cases[i].trial_wins ? 2000.0 : 1000.0)) < 0.01 &&
                    fabs(v.us_raised[0] - (cases[i].trial_wins ? 1000.0 : 2100.0)) < 0.01);
        assert_int_equal(lk.planned_bound, 80);
        assert_int_equal(lk.bound, cases[i].trial_wins ? 128 : 80);
        assert_null(x->alt);
        astitch_executable_destroy(x);
        /* compiled again: the form and the bound from the compile cache, one module */
        int loads = f->loads();
        x = compile_for_fake(f, g, false);
        expect_ok(f, astitch_executable_variant(x, &v));
        expect_ok(f, astitch_executable_loaded_kernel(x, 0, &lk));
        assert_int_equal(v.state, ASTITCH_VARIANT_CACHED);
        assert_int_equal(v.ntrials, 0);
        assert_null(x->alt);
        assert_int_equal(f->loads() - loads, 1);
        expect_times(x, 1, 0, false);
        assert_int_equal(lk.bound, cases[i].trial_wins ? 128 : 80);
        astitch_executable_destroy(x);
        cubin_jobs_wait_running();
    }
    expect_ok(f, astitch_context_set_option(f->ctx, "ptx_jit", NULL));
    /* form 0 spilling at its planned bound: relaxed, no trial */
    compile_cache_reset();
    setenv("FAKE_CUDA_SPILL_BELOW", "81", 1);
    astitch_executable *x = compile_for_fake(f, g, false);
    unsetenv("FAKE_CUDA_SPILL_BELOW");
    expect_ok(f, astitch_executable_variant(x, &v));
    expect_ok(f, astitch_executable_loaded_kernel(x, 0, &lk));
    assert_int_equal(v.ntrials, 0);
    assert_string_equal(chain_text(x, chain, sizeof chain), "0 2 3");
    assert_int_equal(lk.bound, 128);
    astitch_executable_destroy(x);
    /* no other form: no trial */
    astitch_graph *sg = softmax_rows_graph(f);
    compile_cache_reset();
    x = compile_for_fake(f, sg, false);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_NONE);
    assert_int_equal(v.ntrials, 0);
    assert_null(x->alt);
    astitch_executable_destroy(x);
    astitch_graph_destroy(sg);
    cubin_jobs_wait_running();
    compile_cache_reset();
    astitch_graph_destroy(g);
}

/* A plan with a compute step times its forms by their kernel steps alone: column_sums_graph's
 * dx through a dot, where each form's dot takes far longer than its kernels and varies more
 * between forms than they do. Form 2's kernels are the fastest, its dot the slowest: the
 * search keeps form 2, which timing the whole runs would not. */
static void test_variant_forms_steps(void **state)
{
    const Fake *f = *state;
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "0"));
    astitch_graph *g = column_sums_graph(f, 768);
    int64_t dw[2] = {768, 64};
    astitch_dot_dims dims = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
    astitch_node w = astitch_parameter(g, "w", ASTITCH_F32, 2, dw);
    expect_ok(f, astitch_add_output(g, astitch_dot(g, astitch_graph_output(g, 0), w, &dims)));
    expect_ok(f, astitch_graph_verify(g));
    astitch_executable *x = compile_for_fake(f, g, false);
    char chain[64];
    assert_string_equal(chain_text(x, chain, sizeof chain), COLUMN_SUMS_CHAIN);
    const astitch_executable *form[COLUMN_SUMS_RUNS];
    int nform = 0;
    for (const astitch_executable *y = x; y; y = y->alt)
        form[nform++] = y;
    /* per run, in turn over the forms and trials for four rounds: every step's time, a kernel
     * 2.0, 1.5 or 2.5 ms by form (a trial 0.25 ms more), a compute step 0.1 ms but 50 ms in
     * form 2 */
    float ms[128];
    int n = 0;
    for (int run = 0; run < 4 * nform; run++) {
        const astitch_executable *y = form[run % nform];
        const astitch_plan *p = y->plan;
        int fi = y->variant.form;
        for (int32_t i = 0; i < p->nstep; i++) {
            assert_true(n < 128);
            bool kernel = p->step[i].kind == ASTITCH_STEP_KERNEL;
            float k_ms = (fi == 2 ? 1.5f : fi == 3 ? 2.5f : 2.0f) + (y->bound_trial ? 0.25f : 0);
            ms[n++] = kernel ? k_ms / (float)p->nkernel : (fi == 2 ? 50.0f : 0.1f);
        }
    }
    f->set_elapsed(ms, n);
    uint64_t in[3] = {0x200000000000ull, 0x240000000000ull, 0x280000000000ull};
    uint64_t out[3] = {0x300000000000ull, 0x340000000000ull, 0x380000000000ull};
    expect_ok(f, astitch_execute_device(x, in, out, f->stream));
    astitch_variant_info v;
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.state, ASTITCH_VARIANT_TIMED);
    assert_int_equal(v.form, 2);
    assert_true(v.us[0] > 1990 && v.us[0] < 2010 && v.us[2] > 1490 && v.us[2] < 1510);
    astitch_executable_destroy(x);
    /* from host memory, with two candidates for the dot: the forms settle, form 2 is adopted
     * (its own device buffers), and the dots' search runs on those buffers, as the run after
     * it does (once, it ran on the buffers the adoption had freed: an illegal address on the
     * GPU) */
    setenv("FAKE_LT_CANDIDATES", "2", 1);
    x = compile_for_fake(f, g, false);
    nform = 0;
    for (const astitch_executable *y = x; y; y = y->alt)
        form[nform++] = y;
    n = 0;
    for (int run = 0; run < 4 * nform; run++) {
        const astitch_executable *y = form[run % nform];
        const astitch_plan *p = y->plan;
        for (int32_t i = 0; i < p->nstep; i++)
            ms[n++] = p->step[i].kind == ASTITCH_STEP_KERNEL
                          ? (y->variant.form == 2 && !y->bound_trial ? 1.5f : 2.0f)
                          : 0.1f;
    }
    for (int i = 0; i < 6; i++) /* the dot's two candidates, rounds 2 to 4 */
        ms[n++] = 1.0f;
    f->set_elapsed(ms, n);
    f->matmuls_reset();
    float *hin[3], *hout[3]; /* none larger than dy's [1024, 768] */
    for (int i = 0; i < 3; i++) {
        hin[i] = calloc(1024 * 768, sizeof(float));
        hout[i] = calloc(1024 * 768, sizeof(float));
        assert_true(hin[i] && hout[i]);
    }
    expect_ok(f, astitch_execute(x, (const void *const *)hin, (void *const *)hout));
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.form, 2);
    FakeMatmul mm[64];
    int calls = f->matmuls(mm, 64);
    /* the forms' and trials' 4 * nform runs, then the dot's timings, the search's run and the
     * run */
    assert_int_equal(calls, 4 * nform + 2 * 4 + 2);
    for (int i = 4 * nform; i < calls; i++)
        assert_true(mm[i].d == mm[calls - 1].d && mm[i].a == mm[calls - 1].a);
    for (int i = 0; i < 3; i++) {
        free(hin[i]);
        free(hout[i]);
    }
    astitch_executable_destroy(x);
    unsetenv("FAKE_LT_CANDIDATES");
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "1")); /* as the tests after expect */
    compile_cache_reset();
    astitch_graph_destroy(g);
}

/* The last cuBLASLt product's algorithm (its place among the candidates) and how many
 * products were queued since the reset. */
static int last_algo(const Fake *f, int *calls)
{
    FakeMatmul m[64];
    int n = f->matmuls(m, 64);
    *calls = n;
    return n > 0 && n <= 64 ? m[n - 1].algo_index : -1;
}

/* Times of 3 candidates over 4 rounds (the first round not read): `fast` takes 1 ms, the
 * others 2 and 3. */
static void time_three_candidates(const Fake *f, int fast)
{
    float ms[9];
    for (int i = 0; i < 9; i++)
        ms[i] = i % 3 == fast ? 1.0f : 2.0f + (float)(i % 3);
    f->set_elapsed(ms, 9);
}

/* The dots' algorithm search: with three candidates from the heuristic, the first run outside a
 * capture times them (four rounds of three products), runs once with the fastest and then
 * runs; later runs queue one product with it. Under a capture nothing is timed and the first
 * candidate runs; the search waits for the next run outside one. The choice is recorded:
 * a later compile of the graph runs it without timing. The search off: the first candidate,
 * never timed. */
static void test_dot_search(void **state)
{
    const Fake *f = *state;
    if (!f->matmuls)
        skip();
    setenv("FAKE_LT_CANDIDATES", "3", 1);
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "0"));
    astitch_graph *g = gen_dot_between(f->ctx, 64, 96, 32);
    assert_non_null(g);
    int calls;
    astitch_executable *x = compile_for_fake(f, g, false);
    f->matmuls_reset();
    time_three_candidates(f, 2);
    run_plain(f, x);
    assert_int_equal(last_algo(f, &calls), 2);
    assert_int_equal(calls, 12 + 2); /* the timings, the search's run, the run */
    astitch_variant_info v;
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_true(v.dots_chosen == 1 && v.dots_not_first == 1);
    f->matmuls_reset();
    run_plain(f, x);
    assert_int_equal(last_algo(f, &calls), 2);
    assert_int_equal(calls, 1);
    astitch_executable_destroy(x);
    /* under a capture: untimed, then timed at the next run */
    x = compile_for_fake(f, g, false);
    f->matmuls_reset();
    const CudaDriver *d = &f->dev->drv;
    uint64_t in[2] = {0x200000000000ull, 0x240000000000ull}, out[2] = {0x300000000000ull, 0};
    assert_int_equal(d->StreamBeginCapture(f->stream, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    astitch_status s = astitch_execute_device(x, in, out, f->stream);
    CUgraph graph = NULL;
    assert_int_equal(d->StreamEndCapture(f->stream, &graph), CUDA_SUCCESS);
    if (graph)
        d->GraphDestroy(graph);
    expect_ok(f, s);
    assert_int_equal(last_algo(f, &calls), 0);
    assert_int_equal(calls, 1);
    time_three_candidates(f, 1);
    run_plain(f, x);
    assert_int_equal(last_algo(f, &calls), 1);
    assert_int_equal(calls, 1 + 12 + 2);
    astitch_executable_destroy(x);
    /* recorded in the compile cache */
    expect_ok(f, astitch_context_set_option(f->ctx, "cache", "1"));
    compile_cache_reset();
    x = compile_for_fake(f, g, false);
    time_three_candidates(f, 1);
    run_plain(f, x);
    astitch_executable_destroy(x);
    x = compile_for_fake(f, g, false);
    f->matmuls_reset();
    run_plain(f, x);
    assert_int_equal(last_algo(f, &calls), 1);
    assert_int_equal(calls, 1);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_true(v.dots_chosen == 1 && v.dots_not_first == 1);
    astitch_executable_destroy(x);
    compile_cache_reset();
    /* the search off */
    x = compile_unsearched(f, g);
    f->matmuls_reset();
    time_three_candidates(f, 2);
    run_plain(f, x);
    assert_int_equal(last_algo(f, &calls), 0);
    assert_int_equal(calls, 1);
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_true(v.dots_chosen == 0 && v.dots_not_first == 0);
    astitch_executable_destroy(x);
    unsetenv("FAKE_LT_CANDIDATES");
    astitch_graph_destroy(g);
}

/* What compiles the PTX (the switch ptx_jit), with the search's three forms and bound trial
 * of column_sums_graph: unset, each form's module and its next bound start compiling ahead by
 * ptxas (the fake) as soon as the form's PTX is there, and under "nvjitlink" by nvJitLink, so
 * every module loaded comes from a job and none compiles in the caller's thread; under
 * "driver" nothing compiles ahead. Unset, a module whose job fails goes to the driver's JIT,
 * and once the driver refuses a cubin of ptxas the process compiles nothing ahead from then
 * on. A module nvJitLink refuses under "nvjitlink" fails the compile with nvJitLink's log; a
 * value the switch does not take is refused. */
static void test_ptx_jit(void **state)
{
    const Fake *f = *state;
    astitch_graph *g = column_sums_graph(f, 768);
    static const char *const modes[] = {NULL, "nvjitlink", "driver"};
    for (int m = 0; m < 3; m++) {
        compile_cache_reset();
        expect_ok(f, astitch_context_set_option(f->ctx, "ptx_jit", modes[m]));
        int loads = f->loads(), jit = f->jit_compiles(), ptxas = ptxas_compiles(f);
        CubinJobStats before = cubin_job_stats();
        astitch_executable *x = compile_for_fake(f, g, false);
        cubin_jobs_wait_running();
        CubinJobStats after = cubin_job_stats();
        astitch_variant_info v;
        expect_ok(f, astitch_executable_variant(x, &v));
        jit = f->jit_compiles() - jit;
        ptxas = ptxas_compiles(f) - ptxas;
        printf("# ptx_jit %s: %d forms, %d trials, %d loads, %d nvJitLink compiles, %d ptxas "
               "compiles, %ld jobs taken, %ld not\n", modes[m] ? modes[m] : "(unset)", v.nforms,
               v.ntrials, f->loads() - loads, jit, ptxas, after.taken - before.taken,
               after.untaken - before.untaken);
        assert_int_equal(v.nforms, 3);
        assert_int_equal(v.ntrials, 1);
        assert_int_equal(f->loads() - loads, COLUMN_SUMS_RUNS);
        if (m < 2) {
            /* every module loaded came from a job, none compiled in this thread */
            assert_int_equal(after.taken - before.taken, COLUMN_SUMS_RUNS);
            assert_int_equal(m == 0 ? ptxas : jit, after.started - before.started);
            assert_int_equal(m == 0 ? jit : ptxas, 0);
            assert_int_equal(after.untaken - before.untaken, 0);
        } else {
            assert_int_equal(jit + ptxas, 0);
            assert_int_equal(after.started - before.started, 0);
        }
        astitch_executable_destroy(x);
    }
    expect_ok(f, astitch_context_set_option(f->ctx, "ptx_jit", NULL));
    CubinCompiler ahead;
    assert_true(cuda_module_compiles_ahead(f->ctx, &ahead) && ahead == CUBIN_BY_PTXAS);
    /* unset: the guess of form 0's next bound fails in ptxas; the form spills, and its reload
     * at the next bound is compiled by the driver's JIT */
    setenv("FAKE_PTXAS_FAIL", ".maxnreg 128", 1);
    setenv("FAKE_CUDA_SPILL_BELOW", "81", 1);
    compile_cache_reset();
    astitch_executable *x = NULL;
    CubinJobStats before = cubin_job_stats();
    x = compile_for_fake(f, g, false);
    unsetenv("FAKE_CUDA_SPILL_BELOW");
    unsetenv("FAKE_PTXAS_FAIL");
    astitch_loaded_kernel lk;
    expect_ok(f, astitch_executable_loaded_kernel(x, 0, &lk));
    assert_int_equal(lk.bound, 128);
    CubinJobStats after = cubin_job_stats();
    printf("# a guess ptxas fails on: %ld jobs started, %ld taken\n",
           after.started - before.started, after.taken - before.taken);
    assert_true(after.started - before.started >= 2);
    astitch_executable_destroy(x);
    /* unset: cubins the driver refuses; the driver's JIT compiles those modules, and nothing
     * compiles ahead from then on */
    setenv("FAKE_CUDA_REFUSE_CUBIN", "1", 1);
    compile_cache_reset();
    x = compile_for_fake(f, g, false);
    astitch_variant_info v;
    expect_ok(f, astitch_executable_variant(x, &v));
    assert_int_equal(v.nforms, 3);
    astitch_executable_destroy(x);
    CubinCompiler by;
    assert_false(cuda_module_compiles_ahead(f->ctx, &by));
    cubin_jobs_wait_running();
    compile_cache_reset();
    before = cubin_job_stats();
    x = compile_for_fake(f, g, false);
    assert_int_equal(cubin_job_stats().started - before.started, 0);
    astitch_executable_destroy(x);
    unsetenv("FAKE_CUDA_REFUSE_CUBIN");
    cuda_module_reset_refusal();
    assert_true(cuda_module_compiles_ahead(f->ctx, &by));
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    o.variant_search = false;
    /* a module nvJitLink refuses under "nvjitlink": the compile fails with nvJitLink's log */
    setenv("FAKE_NVJITLINK_FAIL", ".entry", 1);
    compile_cache_reset();
    expect_ok(f, astitch_context_set_option(f->ctx, "ptx_jit", "nvjitlink"));
    x = (astitch_executable *)1;
    assert_int_equal(astitch_compile(g, &o, &x), ASTITCH_ERR_COMPILE);
    unsetenv("FAKE_NVJITLINK_FAIL");
    assert_null(x);
    const char *e = astitch_last_error(f->ctx);
    printf("# expected error: %s\n", e);
    assert_non_null(strstr(e, "module 'stitch kernels': nvJitLink ("));
    assert_non_null(strstr(e, "nvJitLinkComplete for sm_90: nvJitLink result 4"));
    assert_non_null(strstr(e, "fake ptxas error: '.entry' is refused"));
    /* a value the switch does not take */
    expect_ok(f, astitch_context_set_option(f->ctx, "ptx_jit", "ptxas"));
    assert_int_equal(astitch_compile(g, &o, &x), ASTITCH_ERR_ARGUMENT);
    e = astitch_last_error(f->ctx);
    printf("# expected error: %s\n", e);
    assert_non_null(strstr(e, "switch ptx_jit (ASTITCH_PTX_JIT) is 'ptxas'"));
    assert_non_null(strstr(e, "it takes driver, nvjitlink, or unset"));
    expect_ok(f, astitch_context_set_option(f->ctx, "ptx_jit", NULL));
    compile_cache_reset();
    astitch_graph_destroy(g);
}

int main(void)
{
    if (!fake_device_built())
        return 77; /* SKIP */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timed_run),
        cmocka_unit_test(test_cublaslt_missing),
        cmocka_unit_test(test_relax_spills),
        cmocka_unit_test(test_lone_kernel_ahead),
        cmocka_unit_test(test_bound_search),
        cmocka_unit_test(test_variant_forms),
        cmocka_unit_test(test_variant_forms_steps),
        cmocka_unit_test(test_variant_split_form),
        cmocka_unit_test(test_variant_long_form),
        cmocka_unit_test(test_dot_search),
        cmocka_unit_test(test_ptx_jit),
    };
    return cmocka_run_group_tests(tests, fake_setup, fake_teardown);
}
