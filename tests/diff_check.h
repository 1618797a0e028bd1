/* diff_check.h: running a graph on a target and comparing every output with the reference
 * interpreter, in the manner of ggml's test-backend-ops. Shared by the host and gpu suites. */
#ifndef ASTITCH_TESTS_DIFF_CHECK_H
#define ASTITCH_TESTS_DIFF_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "astitch/astitch.h"
#include "astitch/plan.h"
#include "astitch/runtime.h"

/* Tolerances (tools/check_tolerance.h): on the normalized error |out - ref| / max(1, max|ref|),
 * the least precise float dtype on the output's path decides: f32 1e-4 (at least K x 2^-23
 * after a dot of contraction K), f16 1e-2, bf16 4e-2; integers and bool exact; NaN must match
 * NaN. Each element also gets slack for its conditioning: 8 x the reference's own change when
 * the float inputs move by a few ulps (check_perturb; elements whose reference flips between
 * finite and not, or whose integer value changes, are not compared). */

typedef struct DiffResult {
    bool ok;
    double worst;         /* the largest normalized error over all outputs */
    int worst_output;
    char message[512];    /* why it failed */
} DiffResult;

/* Fills random inputs from seed, runs the reference, then compiles g for `target` under
 * `fusion` and runs it with outputs poisoned beforehand; compares every output. Returns the
 * status of the first failing library call (ASTITCH_OK if all calls succeeded; r->ok tells
 * whether the numbers matched). */
astitch_status diff_run(astitch_graph *g, astitch_target target, astitch_fusion fusion,
                        uint64_t seed, DiffResult *r);
/* diff_run with every compile option given (a device model other than the target's own, plan
 * options). */
astitch_status diff_run_with(astitch_graph *g, const astitch_compile_options *o, uint64_t seed,
                             DiffResult *r);

/* Options for the host target running the plans of device model `name` (*model, which o then
 * points to), and the first phase of kernel 0 of g's plan under them (*first). Returns the
 * status of the first failing library call. */
astitch_status diff_host_as(astitch_graph *g, const char *name, astitch_device *model,
                            astitch_compile_options *o, astitch_phase_info *first);

/* The reference side of a check, computed once and compared against many executables (the
 * benchmark verifies every fusion mode of a graph against one reference run). */
typedef struct DiffRef DiffRef;

/* Fills random inputs from seed and runs the reference on them; with `perturbed`, also on
 * inputs moved by a few ulps (check_perturb: the conditioning slack of the comparison). Without
 * it a comparison that fails runs the perturbed reference then and compares once more, as
 * astitch-run --check does. On failure *out is NULL and the graph's context holds the
 * message. */
astitch_status diff_ref_create(astitch_graph *g, uint64_t seed, bool perturbed, DiffRef **out);
void diff_ref_destroy(DiffRef *d); /* accepts NULL */
/* The random inputs, one host buffer per parameter, owned by d. */
const void *const *diff_ref_inputs(const DiffRef *d);
/* Compares host outputs (one per graph output) with the reference; false explains in r. */
bool diff_ref_compare(const DiffRef *d, const void *const *outputs, DiffResult *r);
/* Runs x on d's inputs (astitch_execute) with outputs poisoned beforehand and compares. Returns
 * the status of the run; r->ok tells whether the numbers matched. */
astitch_status diff_ref_check(const DiffRef *d, astitch_executable *x, DiffResult *r);

/* Row reductions of every kind split across blocks (gen_split_kinds over [rows, cols]) on
 * target, with atomic and with in-order combines, against the reference; the in-order
 * executable also runs `repeats` times and must give the same bits each time. Prints what it
 * checked; returns the number of failures. */
int diff_split_combines(astitch_target target, int64_t rows, int64_t cols, int repeats);

/* The largest split factor of any phase of x's plan (1: no reduction split across blocks). */
int diff_max_split(const astitch_executable *x);

/* A seed that differs between runs (time and pid), for one fresh case per run. */
uint64_t diff_fresh_seed(void);

#endif
