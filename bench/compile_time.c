/*
 * astitch-compile-time: the compile time of each graph named on the command line, graph to
 * loaded module, with the options of astitch-bench's stitch mode (cuda target, variant search
 * and view outputs on), all in one process and one context, as a framework compiles its
 * regions. The process's one-time set-up (CUDA context, LLVM's target, libdevice) goes to a
 * built-in warm-up graph first (warm_up.h), printed apart and not counted. Prints, per graph,
 * its kernels and milliseconds, with where they went (astitch_compile_times: planning, LLVM,
 * loading modules, the rest; modules compiled by the driver's JIT in the caller's thread and
 * taken from compiles ahead), then the median per kernel and the sums of the parts; exit 1 when
 * a graph fails to load or compile.
 *
 * The caches set by the environment apply: for cold times, ASTITCH_CACHE_DIR=off (astitch's
 * disk cache; its memory cache never sees a graph twice here, unless it is named twice) and
 * CUDA_CACHE_DISABLE=1 (the driver's JIT cache).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <astitch/astitch.h>
#include <astitch/plan.h>
#include <astitch/runtime.h>

#include "warm_up.h"

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Compiles the graph at path; *ms and *kernels on success, else prints why and returns false. */
static bool compile_one(astitch_context *ctx, const char *path, double *ms, int *kernels,
                        astitch_compile_times *times)
{
    astitch_graph *g = NULL;
    if (astitch_graph_load_json(ctx, path, &g) != ASTITCH_OK) {
        fprintf(stderr, "astitch-compile-time: %s: %s\n", path, astitch_last_error(ctx));
        return false;
    }
    astitch_compile_options co;
    astitch_compile_options_default(&co);
    co.target = ASTITCH_TARGET_CUDA;
    co.variant_search = true;
    co.view_outputs = true;
    astitch_executable *x = NULL;
    double t0 = now_ms();
    astitch_status s = astitch_compile(g, &co, &x);
    *ms = now_ms() - t0;
    if (s != ASTITCH_OK) {
        fprintf(stderr, "astitch-compile-time: %s: %s\n", path, astitch_last_error(ctx));
        astitch_graph_destroy(g);
        return false;
    }
    *kernels = astitch_plan_num_kernels(astitch_executable_plan(x));
    astitch_executable_compile_times(x, times);
    astitch_executable_destroy(x);
    astitch_graph_destroy(g);
    return true;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: astitch-compile-time GRAPH.json...\n");
        return 2;
    }
    char err[512];
    BenchWarmUp warm;
    if (bench_warm_up(ASTITCH_TARGET_CUDA, &warm, err, sizeof err)) {
        fprintf(stderr, "astitch-compile-time: %s\n", err);
        return 1;
    }
    printf("set-up (the built-in warm-up graph, not counted): %.2f ms\n", warm.ms);
    astitch_context *ctx = NULL;
    double ms, *per_kernel = calloc((size_t)argc, sizeof *per_kernel);
    if (!per_kernel || astitch_context_create(&ctx) != ASTITCH_OK) {
        fprintf(stderr, "astitch-compile-time: out of memory\n");
        free(per_kernel);
        bench_warm_up_end(&warm);
        return 1;
    }
    int kernels, n = 0, failed = 0;
    astitch_compile_times t, sum = {0};
    printf("%-40s %7s %9s %8s %8s %8s %8s %4s %5s\n", "graph", "kernels", "ms", "plan",
           "llvm", "load", "rest", "jit", "ahead");
    for (int i = 1; i < argc; i++) {
        if (!compile_one(ctx, argv[i], &ms, &kernels, &t)) {
            failed++;
            continue;
        }
        const char *base = strrchr(argv[i], '/');
        double rest = t.total_ms - t.plan_ms - t.ptx_ms - t.load_ms;
        printf("%-40s %7d %9.2f %8.2f %8.2f %8.2f %8.2f %4d %5d\n", base ? base + 1 : argv[i],
               kernels, ms, t.plan_ms, t.ptx_ms, t.load_ms, rest, t.jit_modules,
               t.ahead_modules);
        sum.total_ms += t.total_ms;
        sum.plan_ms += t.plan_ms;
        sum.ptx_ms += t.ptx_ms;
        sum.load_ms += t.load_ms;
        if (kernels > 0)
            per_kernel[n++] = ms / kernels;
    }
    if (n > 0) {
        printf("sum: %.1f ms; planning %.1f, llvm %.1f, loading modules %.1f, the rest %.1f\n",
               sum.total_ms, sum.plan_ms, sum.ptx_ms, sum.load_ms,
               sum.total_ms - sum.plan_ms - sum.ptx_ms - sum.load_ms);
        qsort(per_kernel, (size_t)n, sizeof *per_kernel, by_value);
        double median = n % 2 ? per_kernel[n / 2] : (per_kernel[n / 2 - 1] + per_kernel[n / 2]) / 2;
        printf("median %.2f ms per kernel over %d graphs\n", median, n);
    }
    free(per_kernel);
    astitch_context_destroy(ctx);
    bench_warm_up_end(&warm);
    return failed ? 1 : 0;
}
