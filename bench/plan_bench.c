/*
 * plan_bench.c: planning time of the stitching planner on random graphs of 1,000 and 10,000
 * nodes (tests/gen_graph.c), for each fusion mode on the H100 model. A benchmark, not a test:
 * it prints times and asserts nothing about them.
 *
 *   plan_bench [REPEATS]     (default 5; the median of the repeats is reported)
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "astitch/plan.h"
#include "gen_graph.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int repeats = argc > 1 ? atoi(argv[1]) : 5;
    if (repeats < 1 || repeats > 1000)
        repeats = 5;
    astitch_context *ctx;
    if (astitch_context_create(&ctx) != ASTITCH_OK)
        return 1;
    astitch_device dev;
    astitch_device_builtin("h100", &dev);
    static const int sizes[] = {1000, 10000};
    printf("%-7s %-7s %8s %8s %10s %10s\n", "nodes", "fusion", "graph", "kernels", "median ms",
           "min ms");
    for (int si = 0; si < 2; si++) {
        gen_options go;
        gen_options_default(&go);
        go.nodes = sizes[si];
        go.max_dim = 64;
        go.outputs = sizes[si] / 100;
        astitch_graph *g = gen_graph(ctx, 12345u + (unsigned)si, &go);
        if (!g) {
            fprintf(stderr, "generator: %s\n", astitch_last_error(ctx));
            return 1;
        }
        for (int f = ASTITCH_FUSION_NONE; f <= ASTITCH_FUSION_STITCH; f++) {
            astitch_plan_options o;
            astitch_plan_options_default(&o);
            o.fusion = (astitch_fusion)f;
            double *t = malloc((size_t)repeats * sizeof *t);
            int kernels = 0;
            for (int r = 0; r < repeats; r++) {
                astitch_plan *p;
                double t0 = now();
                if (astitch_plan_create(g, &dev, &o, &p) != ASTITCH_OK) {
                    fprintf(stderr, "plan: %s\n", astitch_last_error(ctx));
                    return 1;
                }
                t[r] = now() - t0;
                kernels = astitch_plan_num_kernels(p);
                astitch_plan_destroy(p);
            }
            qsort(t, (size_t)repeats, sizeof *t, cmp_double);
            printf("%-7d %-7s %8d %8d %10.2f %10.2f\n", sizes[si],
                   astitch_fusion_name(o.fusion), astitch_graph_num_nodes(g), kernels,
                   1e3 * t[repeats / 2], 1e3 * t[0]);
            free(t);
        }
        astitch_graph_destroy(g);
    }
    astitch_context_destroy(ctx);
    return 0;
}
