/* fake_device.h: the fake CUDA driver's H100 for the runtime tests (tests/fake_cuda.c, its path
 * in ASTITCH_FAKE_CUDA, "device" mode; a fake cuBLASLt, tests/fake_cublaslt.c, in
 * ASTITCH_FAKE_CUBLASLT; a fake nvJitLink, tests/fake_nvjitlink.c, in
 * ASTITCH_FAKE_NVJITLINK): the fixture (a context, the device and a stream, the fakes' own
 * entry points) and compiling and running for it. Include after <cmocka.h>. */
#ifndef ASTITCH_TESTS_FAKE_DEVICE_H
#define ASTITCH_TESTS_FAKE_DEVICE_H

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cublaslt.h"
#include "runtime/cuda_driver.h"
#include "runtime/runtime.h"

typedef struct Fake {
    astitch_context *ctx;
    CudaDevice *dev; /* its driver table begins and ends the captures */
    CUstream stream;
    const char *(*log)(void);
    void (*log_reset)(void);
    int (*loads)(void);          /* modules the fake has loaded */
    int (*function_regs)(void);  /* .maxnreg of the function it handed out last */
    void (*set_elapsed)(const float *ms, int n); /* what cuEventElapsedTime gives next */
    int (*matmuls)(FakeMatmul *out, int max);    /* cublasLtMatmul calls since the reset */
    void (*matmuls_reset)(void);
    int (*lt_handles)(void);                     /* cuBLASLt handles alive */
    int (*jit_compiles)(void);                   /* modules the fake nvJitLink compiled */
    char ptxas_count[64]; /* the file the fake ptxas adds a line to per compile */
} Fake;

/* Modules the fake ptxas (tests/fake_ptxas.c) compiled since the fixture began. */
static inline int ptxas_compiles(const Fake *f)
{
    FILE *c = fopen(f->ptxas_count, "r");
    int n = 0;
    for (int ch; c && (ch = fgetc(c)) != EOF;)
        n += ch == '\n';
    if (c)
        fclose(c);
    return n;
}


static inline void expect_ok(const Fake *f, astitch_status st)
{
    if (st != ASTITCH_OK)
        print_error("%s: %s\n", astitch_status_name(st), astitch_last_error(f->ctx));
    assert_int_equal(st, ASTITCH_OK);
}

static inline astitch_executable *compile_for_fake(const Fake *f, astitch_graph *g, bool as_parts)
{
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    astitch_context *ctx = astitch_graph_context(g);
    expect_ok(f, astitch_context_set_option(ctx, "force_parts", as_parts ? "1" : NULL));
    astitch_executable *x = NULL;
    astitch_status s = astitch_compile(g, &o, &x);
    expect_ok(f, astitch_context_set_option(ctx, "force_parts", NULL));
    expect_ok(f, s);
    return x;
}

/* g compiled for the fake device with the variant search off: the planner's default form. */
static inline astitch_executable *compile_unsearched(const Fake *f, astitch_graph *g)
{
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    o.variant_search = false;
    astitch_executable *x = NULL;
    expect_ok(f, astitch_compile(g, &o, &x));
    return x;
}

/* The search's executables of x in the order they are timed, as text: each form's index, a
 * trial of the bound search (x->bound_trial) marked "+": "0 0+ 2 2+ 3". */
static inline const char *chain_text(const astitch_executable *x, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (const astitch_executable *y = x; y && at < len; y = y->alt)
        at += (size_t)snprintf(buf + at, len - at, "%s%d%s", y == x ? "" : " ", y->variant.form,
                               y->bound_trial ? "+" : "");
    return buf;
}

/* Runs x (of up to two inputs and outputs) once outside any capture on made-up addresses. */
static inline void run_plain(const Fake *f, astitch_executable *x)
{
    uint64_t in[2] = {0x200000000000ull, 0x240000000000ull};
    uint64_t out[2] = {0x300000000000ull, 0x340000000000ull};
    expect_ok(f, astitch_execute_device(x, in, out, f->stream));
}

/* The node of the first compute op of x's plan. */
static inline int32_t first_compute(const astitch_executable *x)
{
    const astitch_plan *p = astitch_executable_plan(x);
    for (int32_t i = 0; i < p->nstep; i++)
        if (p->step[i].kind == ASTITCH_STEP_COMPUTE)
            return p->step[i].index;
    fail_msg("no compute op in the plan");
    return -1;
}

/* Whether the build made the fakes (ASTITCH_FAKE_CUDA set); says so when not. */
static inline bool fake_device_built(void)
{
    const char *fake = getenv("ASTITCH_FAKE_CUDA");
    if (!fake || !*fake)
        printf("# SKIP: ASTITCH_FAKE_CUDA is not set\n");
    return fake && *fake;
}

/* The fixture: the fakes opened (the instances the library opens too), a context, the device
 * and a stream; -1 where the fakes are missing. */
static inline int fake_setup(void **state)
{
    const char *fake = getenv("ASTITCH_FAKE_CUDA");
    setenv("ASTITCH_LIBCUDA", fake, 1);
    setenv("FAKE_CUDA_MODE", "device", 1);
    const char *fake_lt = getenv("ASTITCH_FAKE_CUBLASLT");
    const char *fake_jit = getenv("ASTITCH_FAKE_NVJITLINK");
    const char *fake_ptxas = getenv("ASTITCH_FAKE_PTXAS");
    if (!fake_lt || !fake_jit || !fake_ptxas)
        return -1;
    setenv("ASTITCH_CUBLASLT", fake_lt, 1);
    setenv("ASTITCH_NVJITLINK", fake_jit, 1);
    setenv("ASTITCH_PTXAS", fake_ptxas, 1);
    unsetenv("ASTITCH_PTX_JIT");
    setenv("ASTITCH_CACHE_DIR", "", 1); /* no PTX files for a device that does not exist */
    Fake *f = calloc(1, sizeof *f);
    void *lib = dlopen(fake, RTLD_NOW | RTLD_LOCAL); /* the instance the library opens too */
    *state = f;
    int count_fd = -1;
    if (f) {
        snprintf(f->ptxas_count, sizeof f->ptxas_count, "/tmp/astitch-fake-ptxas-XXXXXX");
        count_fd = mkstemp(f->ptxas_count);
    }
    if (count_fd < 0)
        return -1;
    close(count_fd);
    setenv("FAKE_PTXAS_COUNT", f->ptxas_count, 1);
    if (!f || !lib || astitch_context_create(&f->ctx) != ASTITCH_OK)
        return -1;
    void *log = dlsym(lib, "fake_cuda_log"), *reset = dlsym(lib, "fake_cuda_log_reset");
    void *loads = dlsym(lib, "fake_cuda_loads"), *regs = dlsym(lib, "fake_cuda_function_regs");
    memcpy(&f->log, &log, sizeof log); /* POSIX: dlsym's pointer converts to a function's */
    memcpy(&f->log_reset, &reset, sizeof reset);
    memcpy(&f->loads, &loads, sizeof loads);
    memcpy(&f->function_regs, &regs, sizeof regs);
    void *elapsed = dlsym(lib, "fake_cuda_set_elapsed");
    memcpy(&f->set_elapsed, &elapsed, sizeof elapsed);
    void *lt = dlopen(fake_lt, RTLD_NOW | RTLD_LOCAL); /* the instance the library opens */
    void *mm = lt ? dlsym(lt, "fake_cublaslt_matmuls") : NULL;
    void *mr = lt ? dlsym(lt, "fake_cublaslt_reset") : NULL;
    void *lh = lt ? dlsym(lt, "fake_cublaslt_handles") : NULL;
    if (!mm || !mr || !lh)
        return -1;
    memcpy(&f->matmuls, &mm, sizeof mm);
    memcpy(&f->matmuls_reset, &mr, sizeof mr);
    memcpy(&f->lt_handles, &lh, sizeof lh);
    void *jit = dlopen(fake_jit, RTLD_NOW | RTLD_LOCAL); /* the instance the library opens */
    void *jc = jit ? dlsym(jit, "fake_nvjitlink_compiles") : NULL;
    if (!jc)
        return -1;
    memcpy(&f->jit_compiles, &jc, sizeof jc);
    if (!f->log || !f->log_reset || !f->loads || !f->function_regs || !f->set_elapsed || cuda_device_open(f->ctx, 0, &f->dev) != ASTITCH_OK ||
        cuda_stream_create(f->ctx, f->dev, &f->stream) != ASTITCH_OK) {
        fprintf(stderr, "setup: %s\n", astitch_last_error(f->ctx));
        return -1;
    }
    return 0;
}

static inline int fake_teardown(void **state)
{
    Fake *f = *state;
    if (!f)
        return 0;
    cuda_stream_destroy(f->dev, f->stream);
    cuda_device_close(f->dev);
    astitch_context_destroy(f->ctx);
    cubin_jobs_wait_running(); /* no fake ptxas still writing to the count */
    unlink(f->ptxas_count);
    free(f);
    return 0;
}

#endif
