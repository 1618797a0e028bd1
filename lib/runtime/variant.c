/*
 * variant.c: the variant search of the cuda target (docs/codegen.md, *Variant search*).
 *
 * Where the planner leaves a launch shape to a measurement (mapping_wide_alternative: a
 * resident row that one warp holds at more than the goal of elements per lane could spread
 * over several warps instead), astitch_compile builds both forms; the first execution that is
 * not being captured times each on the caller's data and stream, keeps the faster in the
 * executable (the other is destroyed) and records the choice in the compile cache, so that a
 * later compile of the same graph builds only the chosen form. A first execution under capture
 * keeps the planner's default (the captured graph refers to its kernels); the alternative is
 * freed at the next execution outside a capture (freeing device memory would end a capture).
 * The search never fails a compile or a run of its own: an alternative that cannot be built,
 * or a timing that fails, leaves the default form alone (state NONE).
 */
#include <stdlib.h>

#include "compile_cache.h"
#include "passes/passes.h"
#include "runtime.h"

/* Makes y (the alternative, built) the form x runs: swaps the two and destroys the other. */
static void adopt(astitch_executable *x, astitch_executable *y)
{
    astitch_executable t = *x;
    *x = *y;
    *y = t;
    x->alt = y->alt = NULL;
    x->views = y->views; /* x's outputs as the caller sees them stay x's */
    y->views = NULL;
    astitch_executable_destroy(y);
}

/* A new executable of g under po with wide_rows on, for the device of x. */
static astitch_status build_wide(astitch_executable *x, astitch_graph *g, const astitch_device *dev,
                                 const astitch_plan_options *po, astitch_executable **out)
{
    astitch_device model;
    astitch_plan_options wide = *po;
    wide.wide_rows = true;
    astitch_executable *y = calloc(1, sizeof *y);
    if (!y)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    y->ctx = x->ctx;
    y->g = g;
    y->target = ASTITCH_TARGET_CUDA;
    y->caller_workspace = x->caller_workspace;
    astitch_status s = exec_cuda_open(x->ctx, &y->cuda, &model);
    if (s == ASTITCH_OK)
        s = exec_build(y, dev, &wide);
    if (s != ASTITCH_OK) {
        astitch_executable_destroy(y);
        return s;
    }
    *out = y;
    return ASTITCH_OK;
}

astitch_status exec_variant_prepare(astitch_executable *x, astitch_graph *g,
                                    const astitch_device *dev, const astitch_plan_options *po)
{
    x->variant = (astitch_variant_info){ASTITCH_VARIANT_NONE, po->wide_rows, {0, 0}};
    if (!mapping_wide_alternative(x->plan))
        return ASTITCH_OK;
    int choice = compile_cache_choice(x->plan, exec_cuda_sm(x));
    if (choice == 0) {
        x->variant.state = ASTITCH_VARIANT_CACHED;
        return ASTITCH_OK;
    }
    astitch_executable *y = NULL;
    if (build_wide(x, g, dev, po, &y) != ASTITCH_OK)
        return ASTITCH_OK; /* the default form alone, as without the search */
    if (choice == 1) {
        adopt(x, y);
        x->variant = (astitch_variant_info){ASTITCH_VARIANT_CACHED, true, {0, 0}};
    } else {
        x->alt = y;
        x->variant.state = ASTITCH_VARIANT_PENDING;
    }
    return ASTITCH_OK;
}

astitch_status exec_variant_settle(astitch_executable *x, const uint64_t *inputs,
                                   const uint64_t *outputs, void *stream)
{
    if (!x->alt) /* not PENDING, or CAPTURED and the alternative freed */
        return ASTITCH_OK;
    bool capturing;
    astitch_status s = exec_cuda_capturing(x, stream, &capturing);
    if (s != ASTITCH_OK)
        return s;
    if (capturing) { /* freeing device memory now would invalidate the capture */
        x->variant.state = ASTITCH_VARIANT_CAPTURED;
        return ASTITCH_OK;
    }
    if (x->variant.state == ASTITCH_VARIANT_CAPTURED) {
        astitch_executable_destroy(x->alt);
        x->alt = NULL;
        return ASTITCH_OK;
    }
    double us[2];
    if (exec_cuda_time_pair(x, x->alt, inputs, outputs, stream, us) != ASTITCH_OK) {
        /* the default form alone, as without the search; a fault of the device shows again
         * in the run that follows */
        astitch_executable_destroy(x->alt);
        x->alt = NULL;
        x->variant.state = ASTITCH_VARIANT_NONE;
        return ASTITCH_OK;
    }
    int choice = us[1] < us[0];
    compile_cache_set_choice(x->plan, exec_cuda_sm(x), choice);
    if (choice) {
        adopt(x, x->alt);
    } else {
        astitch_executable_destroy(x->alt);
        x->alt = NULL;
    }
    x->variant = (astitch_variant_info){ASTITCH_VARIANT_TIMED, choice != 0, {us[0], us[1]}};
    return ASTITCH_OK;
}

astitch_status exec_variant_settle_host(astitch_executable *x, const void *const *inputs)
{
    if (!x->alt || x->target != ASTITCH_TARGET_CUDA)
        return ASTITCH_OK;
    uint64_t *io = NULL;
    astitch_status s = exec_cuda_stage_host(x, inputs, &io);
    if (s == ASTITCH_OK)
        s = exec_variant_settle(x, io, io + x->g->nparam, NULL);
    free(io);
    return s;
}

astitch_status astitch_executable_variant(const astitch_executable *x, astitch_variant_info *out)
{
    if (!x || !out)
        return ASTITCH_ERR_ARGUMENT;
    *out = x->variant;
    return ASTITCH_OK;
}
