/* diff_split.c: cross-block combines of split reductions against the reference, and the
 * in-order combine's run-to-run reproducibility (host and gpu differential suites). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff_check.h"
#include "gen_graph.h"

int diff_max_split(const astitch_executable *x)
{
    const astitch_plan *p = astitch_executable_plan(x);
    int most = 1;
    for (int k = 0; p && k < astitch_plan_num_kernels(p); k++) {
        astitch_kernel_info ki;
        astitch_plan_kernel_info(p, k, &ki);
        for (int ph = 0; ph < ki.num_phases; ph++) {
            astitch_phase_info pi;
            astitch_plan_phase_info(p, k, ph, &pi);
            if (pi.mapping.split > most)
                most = pi.mapping.split;
        }
    }
    return most;
}

/* Runs x `repeats` times on d's inputs; false (printed) when any run's outputs differ in a
 * bit from the first run's. Outputs are [rows] of at most 8 bytes per element. */
static bool runs_identical(const DiffRef *d, astitch_executable *x, int nout, int64_t rows,
                           int repeats)
{
    size_t bytes = (size_t)rows * 8;
    char *first = calloc((size_t)nout, bytes), *again = calloc((size_t)nout, bytes);
    void *po[16], *pa[16];
    bool same = first && again && nout <= 16;
    for (int i = 0; same && i < nout; i++) {
        po[i] = first + (size_t)i * bytes;
        pa[i] = again + (size_t)i * bytes;
    }
    if (same)
        same = astitch_execute(x, diff_ref_inputs(d), (void *const *)po) == ASTITCH_OK;
    for (int r = 1; same && r < repeats; r++)
        same = astitch_execute(x, diff_ref_inputs(d), (void *const *)pa) == ASTITCH_OK &&
               memcmp(first, again, (size_t)nout * bytes) == 0;
    free(first);
    free(again);
    return same;
}

int diff_split_combines(astitch_target target, int64_t rows, int64_t cols, int repeats)
{
    astitch_context *ctx;
    if (astitch_context_create(&ctx) != ASTITCH_OK)
        return 1;
    astitch_graph *g = gen_split_kinds(ctx, rows, cols);
    DiffRef *d = NULL;
    int failures = 0;
    if (!g || diff_ref_create(g, diff_fresh_seed(), false, &d) != ASTITCH_OK) {
        printf("split combines: %s\n", astitch_last_error(ctx));
        failures++;
    }
    for (int det = 0; !failures && det < 2; det++) {
        astitch_compile_options o;
        astitch_compile_options_default(&o);
        o.target = target;
        o.plan.deterministic = det;
        astitch_executable *x = NULL;
        DiffResult r = {.ok = false};
        const char *what = det ? "in order" : "atomics where they exist";
        if (astitch_compile(g, &o, &x) != ASTITCH_OK || diff_ref_check(d, x, &r) != ASTITCH_OK) {
            printf("split combines (%s): %s\n", what, astitch_last_error(ctx));
            failures++;
        } else if (!r.ok || diff_max_split(x) < 2) {
            printf("split combines (%s): split %d: %s\n", what, diff_max_split(x),
                   r.ok ? "not split" : r.message);
            failures++;
        } else if (det && !runs_identical(d, x, astitch_graph_num_outputs(g), rows, repeats)) {
            printf("split combines (in order): %d runs are not bitwise identical\n", repeats);
            failures++;
        } else {
            printf("split combines [%lld, %lld] (%s): split %d, worst error %.3g\n",
                   (long long)rows, (long long)cols, what, diff_max_split(x), r.worst);
        }
        astitch_executable_destroy(x);
    }
    diff_ref_destroy(d);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
    return failures;
}
