/*
 * pipeline.c: the stitching planner, start to end.
 *
 *   graph (verified)
 *     |
 *   dot_lower                          the plan's own copy with dots as the targets run them:
 *     |                                integer ones as a product and a row sum, K = 0 as zeros,
 *     |                                operands transposed where no GEMM reads them as they are,
 *     |                                read through a reshape of their free axes where it can
 *   prune                              ... without the nodes that feed no output, when there
 *     |                                are any
 *   concat_tree                        ... with each concatenate of more than 64 operands as a
 *     |                                tree of narrower ones
 *     +- fusion=stitch:      short_reduce ... with each reduce over at most 16 elements per
 *     |                                output, off the innermost axis, as element-wise slices
 *     +- fusion=stitch:      one_hot   ... with a one-hot sum over the last axis as a gather
 *     +- fusion=stitch:      variance  one-pass variance: the plan's own rewritten copy, when
 *     |                                a sum of squared deviations would read its input twice
 *     +- fusion=stitch:      recompute ... whose outputs made of positions and constants
 *     |                                alone are recomputed by their readers
 *     +- fusion=stitch|none: scope     clusters of memory-intensive ops, convex (4.1)
 *     +- fusion=xla:         xla       register-only fusion, cheap producers duplicated
 *     |  fusion=stitch:      remote    merge independent stitch ops (4.1)
 *   bound                              kernels of too many tensors cut into pieces
 *     |
 *   fill                               kernel ops, inlined sources, inputs, outputs, steps
 *     |
 *     | for every kernel:
 *     |   dominant                     candidates, merging, groups (4.3 step 1)
 *     |   +-> mapping                  thread mapping of each dominant (3.3, 4.3 step 2)
 *     |   |   across -> mapping        column sums moved into resident row groups
 *     |   |   propagate                roots, phases, reads (4.2 observation A)
 *     |   |   adapt -> propagate       proactive block-locality adaptation (4.3 step 3)
 *     |   |   schemes                  passive locality check, schemes (4.3 step 3)
 *     |   |   barriers                 block and global barriers from the schemes
 *     |   |   tiles                    tile runs: phases that run tile by tile
 *     |   |   memory                   shared/scratch buffers, regional->global fallback (4.4)
 *     |   |   transpose                square tiles for a transpose that moves the innermost
 *     |   |                            axis of a one-phase element-wise kernel
 *     |   +-- launch                   assume-relax-apply (4.5); if shared memory leaves too
 *     |                                few blocks resident: tiles and memory again under a
 *     |                                lower cap, else mapping again for the smaller wave
 *     |   carry                        values a walk keeps in free shared memory for a later
 *     |                                walk of its elements across a global barrier
 *     |   traffic                      bytes moved beside the minimal bytes
 *     |
 *   hoist                              fusion=stitch: the cheap producers of a kernel's one
 *     |                                global barrier cut off as a kernel before it; when any
 *     |                                is, fill and every kernel's steps again, then the cuts
 *     |                                whose rest kept a global barrier put back (and again);
 *     |                                with split_barriers, every global barrier's producers,
 *     |                                whatever they cost
 *   check                              coverage, order, launch limits
 *
 * Each line is a step. In builds with plan checks (ASTITCH_DEBUG_CHECKS: buildtype debug or
 * debugoptimized) the plan checker runs after every step on what that step leaves
 * (plan_check_kernel, PlanStage). ASTITCH_DUMP_PLAN=1 in the environment prints the finished
 * plan (text) to stderr; ASTITCH_DUMP_PLAN=after:<step> prints, after each run of that step,
 * the kernel it planned (whole-plan steps: every kernel; graph rewrites: the graph's size).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/config.h"
#include "passes/passes.h"

/* The steps as ASTITCH_DUMP_PLAN=after:<step> names them, in pipeline order. */
static const char *const step_names[] = {
    "dot_lower", "prune",     "concat_tree", "short_reduce", "one_hot",  "variance",
    "recompute", "keepdim",   "scope",       "xla",
    "remote",    "bound",     "fill",        "dominant", "mapping",   "across",
    "propagate", "adapt",     "schemes",     "barriers", "tiles",     "memory",
    "transpose", "launch",    "carry",     "traffic",   "hoist",     "check",
};

/* What ASTITCH_DUMP_PLAN asks of one planning: the finished plan, or the plan after a step. */
typedef struct Dump {
    bool final;
    const char *after; /* a step name, or NULL */
} Dump;

/* step_names' entry for name, or NULL. */
static const char *step_named(const char *name)
{
    for (size_t i = 0; i < sizeof step_names / sizeof step_names[0]; i++)
        if (strcmp(name, step_names[i]) == 0)
            return step_names[i];
    return NULL;
}

static Dump dump_request(const astitch_context *ctx)
{
    Dump d = {0};
    const char *v = config_dump_plan(&ctx->config);
    if (!v)
        return d;
    if (strncmp(v, "after:", 6) != 0) {
        d.final = true;
        return d;
    }
    d.after = step_named(v + 6);
    if (!d.after) {
        fprintf(stderr, "astitch: ASTITCH_DUMP_PLAN=%s: no such step; the steps are", v);
        for (size_t i = 0; i < sizeof step_names / sizeof step_names[0]; i++)
            fprintf(stderr, " %s", step_names[i]);
        fputc('\n', stderr);
    }
    return d;
}

static void planner_free(Planner *pl)
{
    free(pl->ustart);
    free(pl->use);
    free(pl->is_output);
    free(pl->kidx);
    free(pl->stamp);
    free(pl->tmp);
    free(pl->tmp2);
    free(pl->read);
}

static astitch_status planner_init(Planner *pl, astitch_plan *p)
{
    const astitch_graph *g = p->graph;
    int32_t n = g->nnode;
    memset(pl, 0, sizeof *pl);
    pl->p = p;
    pl->g = p->graph;
    pl->n = n;
    size_t sz = (size_t)(n ? n : 1);
    bool readers = graph_readers(g, &pl->ustart, &pl->use);
    pl->is_output = calloc(sz, sizeof *pl->is_output);
    pl->kidx = malloc(sz * sizeof *pl->kidx);
    pl->stamp = calloc(sz, sizeof *pl->stamp);
    pl->tmp = malloc(sz * sizeof *pl->tmp);
    pl->tmp2 = malloc(sz * sizeof *pl->tmp2);
    p->owner = malloc(sz * sizeof *p->owner);
    if (!readers || !pl->is_output || !pl->kidx || !pl->stamp || !pl->tmp ||
        !pl->tmp2 || !p->owner)
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    for (int32_t v = 0; v < n; v++) {
        pl->kidx[v] = -1;
        p->owner[v] = -1;
    }
    for (int32_t i = 0; i < g->noutput; i++)
        pl->is_output[g->output[i]] = true;
    return ASTITCH_OK;
}

/* Ends step `name` on kernel k (NULL: on every kernel), which returned st: checks what the
 * step leaves against the invariants of `stage` (builds with plan checks; stage < 0: nothing
 * to check yet) and prints the kernels when ASTITCH_DUMP_PLAN=after:<name>. */
static astitch_status step(Planner *pl, PlanKernel *k, const char *name, int stage,
                           astitch_status st)
{
    ASTITCH_ASSERT(step_named(name)); /* a step ASTITCH_DUMP_PLAN can name */
    astitch_plan *p = pl->p;
    int32_t lo = k ? (int32_t)(k - p->kernel) : 0, hi = k ? lo + 1 : p->nkernel;
#ifdef ASTITCH_DEBUG_CHECKS
    for (int32_t i = lo; !st && stage >= 0 && i < hi; i++)
        st = plan_check_kernel(pl, &p->kernel[i], (PlanStage)stage);
#else
    (void)stage;
#endif
    if (pl->dump_after && strcmp(pl->dump_after, name) == 0) {
        fprintf(stderr, "astitch: plan after %s%s%s:\n", name, k ? " of kernel " : "",
                k ? k->name : "");
        for (int32_t i = lo; i < hi; i++)
            plan_kernel_text(stderr, p, &p->kernel[i]);
    }
    return st;
}

/* A graph rewrite ahead of planning: prints the graph's size after it when asked. */
static void rewrite_done(const Dump *d, const char *name, const astitch_graph *g)
{
    ASTITCH_ASSERT(step_named(name));
    if (d->after && strcmp(d->after, name) == 0)
        fprintf(stderr, "astitch: graph after %s: %d nodes, %d outputs\n", name, (int)g->nnode,
                (int)g->noutput);
}

/* Ends graph rewrite `name`: its result rw (NULL: nothing to rewrite) becomes the plan's own
 * graph, in place of an earlier rewrite's. */
static void adopt(astitch_plan *p, astitch_graph *rw, const Dump *d, const char *name)
{
    if (rw) {
        astitch_graph_destroy(p->own_graph);
        p->own_graph = p->graph = rw;
    }
    rewrite_done(d, name, p->graph);
}

/* Mapping to memory for kernel k (the part that launch feedback repeats). */
static astitch_status schedule(Planner *pl, PlanKernel *k)
{
    astitch_status st = step(pl, k, "mapping", PLAN_STAGE_GROUPS, pass_mapping(pl, k));
    bool moved = false;
    if (!st)
        st = step(pl, k, "across", PLAN_STAGE_GROUPS, pass_across(pl, k, &moved));
    if (!st && moved)
        st = step(pl, k, "mapping", PLAN_STAGE_GROUPS, pass_mapping(pl, k));
    if (!st)
        st = step(pl, k, "propagate", PLAN_STAGE_PHASES, pass_propagate(pl, k));
    for (int round = 0; !st && round < 3; round++) {
        bool changed = pass_adapt(pl, k);
        st = step(pl, k, "adapt", PLAN_STAGE_GROUPS, ASTITCH_OK);
        if (st || !changed)
            break;
        st = step(pl, k, "propagate", PLAN_STAGE_PHASES, pass_propagate(pl, k));
    }
    if (!st)
        st = step(pl, k, "schemes", PLAN_STAGE_PHASES, pass_schemes(pl, k));
    if (!st) {
        sched_barriers(pl, k);
        st = step(pl, k, "barriers", PLAN_STAGE_PHASES, ASTITCH_OK);
    }
    if (!st) {
        pass_tiles(pl->g, k);
        st = step(pl, k, "tiles", PLAN_STAGE_PHASES, ASTITCH_OK);
    }
    if (!st && !k->stream_by_block && mapping_stream_rewalks(pl, k)) {
        k->stream_by_block = true; /* once: the mapping below takes no warp rows */
        return schedule(pl, k);
    }
    if (!st)
        st = step(pl, k, "memory", PLAN_STAGE_MEMORY, pass_memory(pl, k));
    if (!st) {
        pass_transpose_tile(pl, k);
        st = step(pl, k, "transpose", PLAN_STAGE_MEMORY, ASTITCH_OK);
    }
    return st;
}

/* launch on kernel k: sets *smaller_wave (the kernel is not finished then: no check). */
static astitch_status launch(Planner *pl, PlanKernel *k, bool *smaller_wave)
{
    astitch_status st = pass_launch(pl, k, smaller_wave);
    return step(pl, k, "launch", *smaller_wave ? -1 : PLAN_STAGE_LAUNCH, st);
}

/* Plans kernel k (its groups made) from mapping to launch shape. For a persistent kernel, when
 * the planned shared memory leaves fewer resident blocks than the grid, parallelism wins:
 * regional ops turn global until the grid's residency fits (memory, with a lower cap); failing
 * that, the mapping is made again for the smaller wave. */
static astitch_status plan_shape(Planner *pl, PlanKernel *k)
{
    const astitch_device *d = &pl->p->dev;
    astitch_status st = ASTITCH_OK;
    k->wave_limit = 0;
    k->stream_by_block = false;
    for (int attempt = 0;; attempt++) {
        bool smaller_wave = false;
        pl->shared_cap = d->shared_per_block;
        st = schedule(pl, k);
        if (!st)
            st = launch(pl, k, &smaller_wave);
        if (!st && smaller_wave) {
            int64_t per_sm = ceil_div(k->grid, d->sm_count);
            int64_t cap = per_sm > 0 ? d->shared_per_sm / per_sm : d->shared_per_block;
            pl->shared_cap = cap < d->shared_per_block ? cap : d->shared_per_block;
            pass_tiles(pl->g, k);
            st = step(pl, k, "tiles", PLAN_STAGE_PHASES, ASTITCH_OK);
            if (!st)
                st = step(pl, k, "memory", PLAN_STAGE_MEMORY, pass_memory(pl, k));
            if (!st)
                st = launch(pl, k, &smaller_wave);
        }
        if (st || !smaller_wave)
            break;
        if (attempt == 3) {
            st = ctx_fail(pl->g->ctx, ASTITCH_ERR_UNSUPPORTED,
                          "planner: kernel %s does not fit in one wave of device '%s'",
                          k->name, d->name);
            break;
        } /* again, for the wave launch found */
    }
    return st;
}

/* Plans one kernel from its op list to its launch shape: a block per tile unless the kernel
 * needs global barriers (then, or with the persistent option, one persistent wave). */
static astitch_status plan_kernel(Planner *pl, PlanKernel *k)
{
    plan_index_kernel(pl, k);
    astitch_status st = step(pl, k, "dominant", PLAN_STAGE_GROUPS, pass_dominant(pl, k));
    k->persistent = pl->p->opt.persistent;
    if (!st)
        st = plan_shape(pl, k);
    if (!st && !k->persistent && k->global_barriers > 0) {
        k->persistent = true;
        st = plan_shape(pl, k);
    }
    if (!st)
        st = step(pl, k, "carry", PLAN_STAGE_LAUNCH, pass_carry(pl, k));
    if (!st && !plan_kernel_traffic(pl->p, k))
        st = ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    if (!st)
        st = step(pl, k, "traffic", PLAN_STAGE_DONE, ASTITCH_OK);
    plan_unindex_kernel(pl, k);
    return st;
}

static void name_kernels(astitch_plan *p);

/* Fill and every kernel's steps again, after hoist.c changed the kernels. */
static astitch_status replan(Planner *pl)
{
    name_kernels(pl->p);
    astitch_status st = step(pl, NULL, "fill", PLAN_STAGE_FILLED, plan_fill(pl));
    for (int32_t k = 0; !st && k < pl->p->nkernel; k++)
        st = plan_kernel(pl, &pl->p->kernel[k]);
    return st;
}

/* hoist.c's cuts, planned; the cuts whose rest kept a global barrier put back and planned
 * again (then as before the cut). */
static astitch_status hoist(Planner *pl)
{
    bool changed = false;
    astitch_status st = step(pl, NULL, "hoist", -1, pass_hoist(pl, &changed));
    if (!st && changed)
        st = replan(pl);
    if (!st && changed)
        st = step(pl, NULL, "hoist", -1, pass_hoist_undo(pl, &changed));
    if (!st && changed)
        st = replan(pl);
    return st;
}

static void name_kernels(astitch_plan *p)
{
    const char *stem = p->opt.fusion == ASTITCH_FUSION_STITCH ? "stitch"
                       : p->opt.fusion == ASTITCH_FUSION_XLA  ? "fusion"
                                                              : "kernel";
    for (int32_t k = 0; k < p->nkernel; k++)
        snprintf(p->kernel[k].name, sizeof p->kernel[k].name, "%s.%d", stem, (int)k);
}

static bool device_valid(const astitch_device *d)
{
    return d->sm_count > 0 && d->warp_size > 0 && d->max_threads_per_block >= d->warp_size &&
           d->max_threads_per_sm >= d->max_threads_per_block && d->max_blocks_per_sm > 0 &&
           d->regs_per_sm >= 32 * d->max_threads_per_block && d->max_regs_per_thread >= 32 &&
           d->shared_per_block > 0 && d->shared_per_sm >= d->shared_per_block;
}

astitch_status astitch_plan_create(astitch_graph *g, const astitch_device *dev,
                                   const astitch_plan_options *opts, astitch_plan **out)
{
    if (!out)
        return ASTITCH_ERR_ARGUMENT;
    *out = NULL;
    if (!g || !dev)
        return g ? ctx_fail(g->ctx, ASTITCH_ERR_ARGUMENT, "plan: no device model given")
                 : ASTITCH_ERR_ARGUMENT;
    if (!device_valid(dev))
        return ctx_fail(g->ctx, ASTITCH_ERR_ARGUMENT,
                        "plan: device model '%.32s' is inconsistent (SMs, threads, registers "
                        "or shared memory)",
                        dev->name);
    astitch_status st = astitch_graph_verify(g);
    if (st)
        return st;
    astitch_plan *p = calloc(1, sizeof *p);
    if (!p)
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    p->graph = g;
    p->dev = *dev;
    if (opts)
        p->opt = *opts;
    else
        astitch_plan_options_default(&p->opt);
    Dump dump = dump_request(g->ctx);
    astitch_graph *rw = NULL;
    if (!(st = pass_dot_lower(p->graph, &rw)))
        adopt(p, rw, &dump, "dot_lower");
    if (!st && !(st = pass_prune(p->graph, &rw, &p->dropped, &p->ndropped)))
        adopt(p, rw, &dump, "prune");
    if (!st && !(st = pass_concat_tree(p->graph, &rw)))
        adopt(p, rw, &dump, "concat_tree");
    if (!st && p->opt.fusion == ASTITCH_FUSION_STITCH &&
        !(st = pass_short_reduce(p->graph, &rw, &p->shortened, &p->nshortened)))
        adopt(p, rw, &dump, "short_reduce");
    if (!st && p->opt.fusion == ASTITCH_FUSION_STITCH &&
        !(st = pass_one_hot(p->graph, &rw, &p->gathered, &p->ngathered)))
        adopt(p, rw, &dump, "one_hot");
    if (!st && p->opt.fusion == ASTITCH_FUSION_STITCH && p->opt.one_pass_variance &&
        !(st = pass_variance(p->graph, p->opt.packing, p->opt.long_rows, &rw, &p->rewritten,
                             &p->nrewritten)))
        adopt(p, rw, &dump, "variance");
    if (!st && p->opt.fusion == ASTITCH_FUSION_STITCH && p->opt.recompute_outputs &&
        !(st = pass_recompute(p->graph, &rw, &p->recomputed, &p->nrecomputed, p->rewritten,
                              p->nrewritten)))
        adopt(p, rw, &dump, "recompute");
    if (!st && p->opt.fusion != ASTITCH_FUSION_NONE &&
        !(st = pass_keepdim(p->graph, &rw, p->rewritten, p->nrewritten, p->recomputed,
                            p->nrecomputed)))
        adopt(p, rw, &dump, "keepdim");
    if (st) {
        astitch_plan_destroy(p);
        return st;
    }
    Planner pl;
    st = planner_init(&pl, p);
    pl.dump_after = dump.after;
    if (!st && p->opt.fusion == ASTITCH_FUSION_XLA)
        st = step(&pl, NULL, "xla", -1, pass_xla(&pl));
    else if (!st)
        st = step(&pl, NULL, "scope", -1, pass_scope(&pl));
    if (!st && p->opt.fusion == ASTITCH_FUSION_STITCH && p->opt.remote)
        st = step(&pl, NULL, "remote", -1, pass_remote(&pl));
    if (!st)
        st = step(&pl, NULL, "bound", -1, pass_bound(&pl));
    if (!st) {
        name_kernels(p);
        st = step(&pl, NULL, "fill", PLAN_STAGE_FILLED, plan_fill(&pl));
    }
    for (int32_t k = 0; !st && k < p->nkernel; k++)
        st = plan_kernel(&pl, &p->kernel[k]);
    if (!st && p->opt.fusion == ASTITCH_FUSION_STITCH && (p->opt.hoist || p->opt.split_barriers))
        st = hoist(&pl);
    if (!st) {
        for (int32_t k = 0; k < p->nkernel; k++)
            if (p->kernel[k].scratch_bytes > p->scratch_bytes)
                p->scratch_bytes = p->kernel[k].scratch_bytes;
        st = step(&pl, NULL, "check", -1, plan_check(&pl));
    }
    planner_free(&pl);
    if (st) {
        ctx_error_node_into(g->ctx, p->graph, g); /* ids of the plan's own copy: of g */
        astitch_plan_destroy(p);
        return st;
    }
    if (dump.final)
        astitch_plan_write_text(p, stderr);
    *out = p;
    return ASTITCH_OK;
}

void astitch_plan_destroy(astitch_plan *p)
{
    if (!p)
        return;
    for (int32_t k = 0; k < p->nkernel; k++)
        plan_kernel_clear(&p->kernel[k]);
    free(p->kernel);
    free(p->owner);
    free(p->step);
    free(p->rewritten);
    free(p->recomputed);
    prune_free_names(p->dropped, p->ndropped);
    prune_free_names(p->gathered, p->ngathered);
    prune_free_names(p->shortened, p->nshortened);
    astitch_graph_destroy(p->own_graph);
    free(p);
}
