/*
 * nvJitLink (lib/runtime/nvjitlink.h) without a GPU: the toolkit's library compiles PTX to a
 * cubin in the calling thread and on several threads at once, reports PTX errors with its log,
 * and the jobs compiled ahead are found again by their text. Exits 77 (SKIP) where nvJitLink
 * is not found. With ASTITCH_NVJITLINK naming a missing file (the meson test
 * nvjitlink-missing), checks what is said instead: where it was looked for, and the switch
 * ptx_jit's errors.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ir/ir.h"
#include "runtime/cuda_driver.h"
#include "runtime/nvjitlink.h"

/* A kernel storing its thread index through its argument, `k` a number in its name. */
static char *kernel_ptx(int k)
{
    static const char fmt[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                              ".visible .entry store_tid_%d(.param .u64 pa)\n{\n"
                              "    .reg .b32 %%r<4>;\n    .reg .b64 %%rd<3>;\n"
                              "    ld.param.u64 %%rd1, [pa];\n"
                              "    cvta.to.global.u64 %%rd2, %%rd1;\n"
                              "    mov.u32 %%r1, %%tid.x;\n    add.u32 %%r2, %%r1, %d;\n"
                              "    st.global.u32 [%%rd2], %%r2;\n    ret;\n}\n";
    char *s = malloc(sizeof fmt + 32);
    assert_non_null(s);
    snprintf(s, sizeof fmt + 32, fmt, k, k);
    return s;
}

static const char broken_ptx[] = ".version 8.0\n.target sm_90\n.address_size 64\n"
                                 ".visible .entry broken(.param .u64 pa)\n{\n"
                                 "    .reg .b32 %r<4>;\n    mov.u32 %r1, %tid.x;\n"
                                 "    add.u32 %r2, %r1, %r77;\n    ret;\n}\n";

/* An ELF image of some size, and a log that tells the registers of the kernel. */
static void expect_cubin(const Cubin *c, const char *kernel)
{
    assert_true(c->size > 64);
    assert_memory_equal(c->image, "\x7f" "ELF", 4);
    assert_non_null(c->log);
    assert_non_null(strstr(c->log, kernel));
    assert_non_null(strstr(c->log, "registers"));
}

static void test_compile(void **state)
{
    (void)state;
    char *ptx = kernel_ptx(1), why[4096];
    Cubin c;
    assert_true(nvjitlink_compile(ptx, 90, &c, why, sizeof why));
    expect_cubin(&c, "store_tid_1");
    printf("# %s: %zu bytes of cubin\n", nvjitlink_path(), c.size);
    Cubin again;
    assert_true(nvjitlink_compile(ptx, 90, &again, why, sizeof why));
    assert_int_equal(again.size, c.size);
    assert_memory_equal(again.image, c.image, c.size); /* the same text, the same cubin */
    cubin_free(&again);
    cubin_free(&c);
    assert_false(nvjitlink_compile(broken_ptx, 90, &c, why, sizeof why));
    assert_null(c.image);
    printf("# expected error: %s\n", why);
    assert_non_null(strstr(why, "for sm_90: nvJitLink result"));
    assert_non_null(strstr(why, "nvJitLink error log:"));
    assert_non_null(strstr(why, "%r77"));
    assert_false(nvjitlink_compile(ptx, 7, &c, why, sizeof why));
    assert_non_null(strstr(why, "no architecture sm_7"));
    assert_false(nvjitlink_compile(ptx, 999, &c, why, sizeof why));
    printf("# expected error: %s\n", why);
    assert_non_null(strstr(why, "sm_999"));
    free(ptx);
}

typedef struct Compile {
    char *ptx;
    Cubin c;
    bool ok;
} Compile;

static void *compile_one(void *arg)
{
    Compile *t = arg;
    char why[4096];
    t->ok = nvjitlink_compile(t->ptx, 90, &t->c, why, sizeof why);
    return NULL;
}

/* Eight threads compile at once, each its own kernel, as one thread would. */
static void test_threads(void **state)
{
    (void)state;
    enum { N = 8 };
    Compile t[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        t[i] = (Compile){.ptx = kernel_ptx(i)};
        assert_int_equal(pthread_create(&th[i], NULL, compile_one, &t[i]), 0);
    }
    for (int i = 0; i < N; i++)
        assert_int_equal(pthread_join(th[i], NULL), 0);
    for (int i = 0; i < N; i++) {
        assert_true(t[i].ok);
        char name[32], why[4096];
        snprintf(name, sizeof name, "store_tid_%d", i);
        expect_cubin(&t[i].c, name);
        Cubin one;
        assert_true(nvjitlink_compile(t[i].ptx, 90, &one, why, sizeof why));
        assert_int_equal(one.size, t[i].c.size);
        assert_memory_equal(one.image, t[i].c.image, one.size);
        cubin_free(&one);
        cubin_free(&t[i].c);
        free(t[i].ptx);
    }
}

static void *take_one(void *arg)
{
    Compile *t = arg;
    t->ok = cubin_job_take(t->ptx, 90, CUBIN_BY_NVJITLINK, &t->c);
    return NULL;
}

/* Jobs: one per text and sm, taken as often as asked (from any thread) until the thread that
 * started them ends them; a job's cubin is the one compiled in place; a failed job, a text
 * never started and an ended job give nothing. */
static void test_jobs(void **state)
{
    (void)state;
    char *a = kernel_ptx(10), *b = kernel_ptx(11), why[4096];
    CubinJobStats s0 = cubin_job_stats();
    cubin_job_start(a, 90, CUBIN_BY_NVJITLINK);
    cubin_job_start(a, 90, CUBIN_BY_NVJITLINK); /* the same: not started again */
    cubin_job_start(a, 89, CUBIN_BY_NVJITLINK); /* another architecture: a job of its own */
    cubin_job_start(broken_ptx, 90, CUBIN_BY_NVJITLINK);
    cubin_job_start(b, 90, CUBIN_BY_NVJITLINK);
    CubinJobStats s1 = cubin_job_stats();
    assert_int_equal(s1.started - s0.started, 4);
    Cubin c, here;
    assert_true(cubin_job_take(a, 90, CUBIN_BY_NVJITLINK, &c));
    assert_true(nvjitlink_compile(a, 90, &here, why, sizeof why));
    assert_int_equal(c.size, here.size);
    assert_memory_equal(c.image, here.image, c.size);
    expect_cubin(&c, "store_tid_10");
    cubin_free(&c);
    cubin_free(&here);
    /* taken again, by another thread */
    Compile t = {.ptx = a};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, take_one, &t), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(t.ok);
    expect_cubin(&t.c, "store_tid_10");
    cubin_free(&t.c);
    assert_false(cubin_job_take(broken_ptx, 90, CUBIN_BY_NVJITLINK, &c));
    assert_null(c.image);
    char *never = kernel_ptx(12);
    assert_false(cubin_job_take(never, 90, CUBIN_BY_NVJITLINK, &c));
    CubinJobStats s2 = cubin_job_stats();
    assert_int_equal(s2.taken - s1.taken, 2);
    cubin_jobs_end_mine(); /* a@89, b and the broken one were never taken */
    CubinJobStats s3 = cubin_job_stats();
    assert_int_equal(s3.untaken - s2.untaken, 3);
    assert_false(cubin_job_take(a, 90, CUBIN_BY_NVJITLINK, &c));
    assert_false(cubin_job_take(b, 90, CUBIN_BY_NVJITLINK, &c));
    /* more than 16 at once: the rest are not started, and compile where they are needed */
    char *many[20];
    for (int i = 0; i < 20; i++) {
        many[i] = kernel_ptx(100 + i);
        cubin_job_start(many[i], 90, CUBIN_BY_NVJITLINK);
    }
    assert_int_equal(cubin_job_stats().started - s3.started, 16);
    cubin_jobs_end_mine();
    for (int i = 0; i < 20; i++)
        free(many[i]);
    free(never);
    free(a);
    free(b);
}

/* The ptxas program (the toolkit's, found as codegen finds it): a cubin and ptxas's report per
 * module, compiled in place and by a job; a module it refuses gives its error. */
static void test_ptxas(void **state)
{
    (void)state;
    if (!ptxas_jit_path()) {
        printf("# no ptxas: skipped\n");
        skip();
    }
    char *a = kernel_ptx(20), why[4096];
    Cubin c, job;
    assert_true(ptxas_jit_compile(a, 90, &c, why, sizeof why));
    expect_cubin(&c, "store_tid_20");
    printf("# %s: %zu bytes of cubin\n", ptxas_jit_path(), c.size);
    CubinJobStats s0 = cubin_job_stats();
    cubin_job_start(a, 90, CUBIN_BY_PTXAS);
    assert_false(cubin_job_take(a, 90, CUBIN_BY_NVJITLINK, &job)); /* another compiler's */
    assert_true(cubin_job_take(a, 90, CUBIN_BY_PTXAS, &job));
    assert_int_equal(cubin_job_stats().started - s0.started, 1);
    assert_int_equal(job.size, c.size);
    expect_cubin(&job, "store_tid_20");
    cubin_free(&job);
    cubin_free(&c);
    assert_false(ptxas_jit_compile(broken_ptx, 90, &c, why, sizeof why));
    printf("# expected error: %s\n", why);
    assert_null(c.image);
    assert_non_null(strstr(why, "failed (exit"));
    assert_non_null(strstr(why, "%r77"));
    cubin_jobs_end_mine();
    free(a);
}

/* ASTITCH_NVJITLINK names a missing file: nothing compiles, the places tried are said, and
 * cuda_module_load refuses ptx_jit "nvjitlink" and a value the switch does not take before
 * it needs a device. */
static void test_missing(void **state)
{
    (void)state;
    const char *own = getenv("ASTITCH_NVJITLINK");
    assert_null(nvjitlink_path());
    printf("# nvJitLink missing: %s\n", nvjitlink_missing());
    assert_non_null(strstr(nvjitlink_missing(), own));
    char *ptx = kernel_ptx(1), why[4096];
    Cubin c;
    assert_false(nvjitlink_compile(ptx, 90, &c, why, sizeof why));
    assert_non_null(strstr(why, "nvJitLink not found; tried "));
    assert_non_null(strstr(why, own));
    CubinJobStats s0 = cubin_job_stats();
    cubin_job_start(ptx, 90, CUBIN_BY_NVJITLINK);
    assert_int_equal(cubin_job_stats().started, s0.started);
    assert_false(cubin_job_take(ptx, 90, CUBIN_BY_NVJITLINK, &c));
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    CudaModule *m = (CudaModule *)1;
    CubinCompiler by;
    assert_int_equal(astitch_context_set_option(ctx, "ptx_jit", "nvjitlink"), ASTITCH_OK);
    assert_false(cuda_module_compiles_ahead(ctx, &by));
    assert_int_equal(cuda_module_load(ctx, NULL, ptx, "k", &m), ASTITCH_ERR_UNSUPPORTED);
    assert_null(m);
    printf("# expected error: %s\n", astitch_last_error(ctx));
    assert_non_null(strstr(astitch_last_error(ctx), "switch ptx_jit is nvjitlink, but nvJitLink "
                                                    "is not found; tried "));
    assert_non_null(strstr(astitch_last_error(ctx), own));
    assert_int_equal(astitch_context_set_option(ctx, "ptx_jit", "fast"), ASTITCH_OK);
    assert_int_equal(cuda_module_load(ctx, NULL, ptx, "k", &m), ASTITCH_ERR_ARGUMENT);
    assert_non_null(strstr(astitch_last_error(ctx), "switch ptx_jit (ASTITCH_PTX_JIT) is 'fast'"));
    astitch_context_destroy(ctx);
    free(ptx);
}

int main(void)
{
    const char *own = getenv("ASTITCH_NVJITLINK");
    if (own && strstr(own, "/nonexistent/")) {
        const struct CMUnitTest missing[] = {cmocka_unit_test(test_missing)};
        return cmocka_run_group_tests(missing, NULL, NULL);
    }
    if (!nvjitlink_path()) {
        printf("# SKIP: nvJitLink not found; tried %s\n", nvjitlink_missing());
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_jobs),
        cmocka_unit_test(test_ptxas),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
