/* host_check.h: the two steps of a test that plans a graph for a device model and runs that
 * plan on the host target against the reference (cmocka tests only: they fail the test). */
#ifndef ASTITCH_TESTS_HOST_CHECK_H
#define ASTITCH_TESTS_HOST_CHECK_H

#include <stdio.h>

#include "astitch/plan.h"
#include "diff_check.h"

/* Verifies g and sets o (pointing to *model) to run the plans of the h100 model on the host
 * target; *first: the first phase of kernel 0. Fails the test with `what` otherwise. */
static inline void host_check_plan(astitch_graph *g, const char *what, astitch_device *model,
                                   astitch_compile_options *o, astitch_phase_info *first)
{
    astitch_context *ctx = astitch_graph_context(g);
    if (astitch_graph_verify(g) != ASTITCH_OK)
        fail_msg("%s: verify: %s", what, astitch_last_error(ctx));
    if (diff_host_as(g, "h100", model, o, first) != ASTITCH_OK)
        fail_msg("%s: plan: %s", what, astitch_last_error(ctx));
}

/* Plans g again under o's plan options (after host_check_plan changed some): the first phase
 * of kernel 0 in *first and that kernel's info in *kernel. */
static inline void host_check_replan(astitch_graph *g, const char *what,
                                     const astitch_compile_options *o,
                                     astitch_phase_info *first, astitch_kernel_info *kernel)
{
    astitch_plan *p = NULL;
    if (astitch_plan_create(g, o->device, &o->plan, &p) != ASTITCH_OK)
        fail_msg("%s: plan: %s", what, astitch_last_error(astitch_graph_context(g)));
    assert_int_equal(astitch_plan_phase_info(p, 0, 0, first), ASTITCH_OK);
    assert_int_equal(astitch_plan_kernel_info(p, 0, kernel), ASTITCH_OK);
    astitch_plan_destroy(p);
}

/* Runs g under o on fresh random inputs against the reference; prints the seed and the worst
 * error, and fails the test with `what` on a mismatch. */
static inline void host_check_run(astitch_graph *g, const astitch_compile_options *o,
                                  const char *what)
{
    uint64_t seed = diff_fresh_seed();
    DiffResult r;
    if (diff_run_with(g, o, seed, &r) != ASTITCH_OK)
        fail_msg("%s: run: %s", what, astitch_last_error(astitch_graph_context(g)));
    printf("  host against the reference: seed %llu, worst normalized error %.3g\n",
           (unsigned long long)seed, r.worst);
    if (!r.ok)
        fail_msg("%s (seed %llu): %s", what, (unsigned long long)seed, r.message);
}

#endif
