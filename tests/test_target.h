/* test_target.h: what the test programs that run on a target named on their command line
 * share (test_exp_range, test_divide_shared), and the PTX of a graph for the h100 model. */
#ifndef ASTITCH_TESTS_TEST_TARGET_H
#define ASTITCH_TESTS_TEST_TARGET_H

#include "astitch/astitch.h"
#include "astitch/runtime.h"

/* The target argv names ([host|cuda], host when absent) in *target. Returns -1 when the
 * program can go on, else its exit status: 2 for another argument (usage on stderr), 77 (a
 * skip) for cuda without a usable device, 1 when no context could be made. */
int test_target_from_args(int argc, char **argv, const char *prog, astitch_target *target);

/* g's PTX for the h100 model (the cuda target's default options), which the caller frees with
 * astitch_free; fails the running test when it cannot be emitted. */
char *test_emit_ptx(astitch_graph *g);

/* Compiles g for target with the default options and runs it once on host buffers in (one per
 * parameter) into out (one per output); fails the running test on any error. */
void test_run_on(astitch_graph *g, astitch_target target, const void *const *in,
                 void *const *out);

#endif
