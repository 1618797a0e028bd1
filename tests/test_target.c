/* test_target.c: see test_target.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "runtime/cuda_driver.h"
#include "test_target.h"

int test_target_from_args(int argc, char **argv, const char *prog, astitch_target *target)
{
    *target = ASTITCH_TARGET_HOST;
    if (argc > 1 && strcmp(argv[1], "cuda") == 0)
        *target = ASTITCH_TARGET_CUDA;
    else if (argc > 1 && strcmp(argv[1], "host") != 0) {
        fprintf(stderr, "usage: %s [host|cuda]\n", prog);
        return 2;
    }
    if (*target != ASTITCH_TARGET_CUDA)
        return -1;
    astitch_context *ctx = NULL;
    CudaDevice *dev = NULL;
    if (astitch_context_create(&ctx) != ASTITCH_OK)
        return 1;
    int status = -1;
    if (cuda_device_open(ctx, 0, &dev) != ASTITCH_OK) {
        printf("%s: skipping: %s\n", prog, astitch_last_error(ctx));
        status = 77;
    }
    cuda_device_close(dev);
    astitch_context_destroy(ctx);
    return status;
}

char *test_emit_ptx(astitch_graph *g)
{
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_CUDA;
    char *ptx = NULL;
    if (astitch_emit(g, &o, "ptx", &ptx) != ASTITCH_OK)
        fail_msg("emit ptx: %s", astitch_last_error(astitch_graph_context(g)));
    return ptx;
}

void test_run_on(astitch_graph *g, astitch_target target, const void *const *in,
                 void *const *out)
{
    astitch_context *ctx = astitch_graph_context(g);
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = target;
    astitch_executable *e = NULL;
    if (astitch_compile(g, &o, &e) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(ctx));
    astitch_status s = astitch_execute(e, in, out);
    astitch_executable_destroy(e);
    if (s != ASTITCH_OK)
        fail_msg("execute: %s", astitch_last_error(ctx));
}
