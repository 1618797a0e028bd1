/* test_plan_check.c: the planner's checks between its steps (lib/passes/plan.c, plan_check_kernel)
 * and ASTITCH_DUMP_PLAN=after:<step> (lib/passes/pipeline.c). Each check is shown to catch a plan
 * broken in the one way it guards against, at its own stage and not before it (a shared buffer
 * whose block's part is strided among them); the dump names the step and prints the kernel, and a
 * step name that does not exist is refused with the list of steps. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "passes/passes.h"

/* examples/<name>.json planned for the h100 model. */
static astitch_plan *example_plan(astitch_context *ctx, const char *name, astitch_graph **g)
{
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/examples/%s.json", root ? root : ".", name);
    if (astitch_graph_load_json(ctx, path, g) != ASTITCH_OK)
        fail_msg("%s: %s", path, astitch_last_error(ctx));
    astitch_device dev;
    assert_int_equal(astitch_device_builtin("h100", &dev), ASTITCH_OK);
    astitch_plan *p = NULL;
    if (astitch_plan_create(*g, &dev, NULL, &p) != ASTITCH_OK)
        fail_msg("plan: %s", astitch_last_error(ctx));
    return p;
}

/* k must pass the checks of every stage before `broken` and fail those from it on with a
 * message holding `want`. */
static void fails_from(Planner *pl, const PlanKernel *k, PlanStage broken, const char *want)
{
    for (int s = PLAN_STAGE_FILLED; s <= PLAN_STAGE_DONE; s++) {
        astitch_status st = plan_check_kernel(pl, k, (PlanStage)s);
        const char *msg = astitch_last_error(pl->g->ctx);
        if (s < (int)broken && st != ASTITCH_OK)
            fail_msg("stage %d: failed before stage %d: %s", s, (int)broken, msg);
        if (s >= (int)broken && st != ASTITCH_ERR_INTERNAL)
            fail_msg("stage %d: '%s' not caught (status %d)", s, want, (int)st);
        if (s >= (int)broken && !strstr(msg, want))
            fail_msg("stage %d: '%s' not in '%s'", s, want, msg);
    }
    printf("caught from stage %d: %s\n", (int)broken, astitch_last_error(pl->g->ctx));
}

static void test_stages(void **state)
{
    (void)state;
    astitch_context *ctx = NULL;
    astitch_graph *g = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_plan *p = example_plan(ctx, "fig7_subgraph", &g); /* Fig. 7 */
    Planner pl = {.p = p, .g = p->graph, .n = p->graph->nnode};
    PlanKernel *k = &p->kernel[0];
    for (int s = PLAN_STAGE_FILLED; s <= PLAN_STAGE_DONE; s++)
        assert_int_equal(plan_check_kernel(&pl, k, (PlanStage)s), ASTITCH_OK);

    PlanOp *owned = NULL;
    for (int32_t i = 0; i < k->nop && !owned; i++)
        if (k->op[i].role == ASTITCH_ROLE_MEMBER)
            owned = &k->op[i];
    assert_non_null(owned);
    int32_t group = owned->group;
    owned->group = k->ngroup;
    fails_from(&pl, k, PLAN_STAGE_GROUPS, "owned op outside every group");
    owned->group = group;

    PlanPhase *ph = &k->phase[0];
    int32_t root = ph->root[0];
    ph->root[0] = k->phase[1].root[0];
    fails_from(&pl, k, PLAN_STAGE_PHASES, "root listed in another phase");
    ph->root[0] = root;

    assert_true(k->nbuf > 0);
    int64_t offset = k->buf[0].offset;
    k->buf[0].offset = (k->buf[0].kind == ASTITCH_BUFFER_SHARED ||
                        k->buf[0].kind == ASTITCH_BUFFER_REDUCE ? k->shared_bytes
                                                                : k->scratch_bytes) + 4;
    fails_from(&pl, k, PLAN_STAGE_MEMORY, "buffer outside the");
    k->buf[0].offset = offset;

    int32_t block = k->block;
    k->block = p->dev.max_threads_per_block * 2;
    fails_from(&pl, k, PLAN_STAGE_LAUNCH, "launch shape outside the device limits");
    k->block = block;

    assert_true(k->global_barriers > 0 && k->persistent);
    k->persistent = false;
    fails_from(&pl, k, PLAN_STAGE_DONE, "global barriers in a kernel that is not persistent");
    k->persistent = true;

    for (int s = PLAN_STAGE_FILLED; s <= PLAN_STAGE_DONE; s++)
        assert_int_equal(plan_check_kernel(&pl, k, (PlanStage)s), ASTITCH_OK);
    astitch_plan_destroy(p);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

/* An op's shared buffer holds its block's part as one run of its elements: Fig. 5's power,
 * made once per block and read through a broadcast, passes; the same value under a column
 * mapping whose rows are split across blocks (each block's part strided) is caught from the
 * memory stage on. */
static void test_shared_part(void **state)
{
    (void)state;
    astitch_context *ctx = NULL;
    astitch_graph *g = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_plan *p = example_plan(ctx, "fig5_power_broadcast_add", &g);
    Planner pl = {.p = p, .g = p->graph, .n = p->graph->nnode};
    PlanKernel *k = &p->kernel[0];
    assert_true(k->nbuf > 0 && k->buf[0].kind == ASTITCH_BUFFER_SHARED);
    const PlanOp *o = plan_kernel_op(k, k->buf[0].node);
    assert_true(o && o->phase >= 0 && sched_elements(pl.g, o->node) == 2);
    for (int s = PLAN_STAGE_FILLED; s <= PLAN_STAGE_DONE; s++)
        assert_int_equal(plan_check_kernel(&pl, k, (PlanStage)s), ASTITCH_OK);
    astitch_mapping *m = &k->phase[o->phase].map, saved = *m;
    m->kind = ASTITCH_MAP_COLUMN_REDUCE; /* the 2 elements as a column [2, 1] over axis 0 */
    m->rank = 2;
    m->dims[0] = 2;
    m->dims[1] = 1;
    m->reduce_axes = 1u;
    m->rows = 1;
    m->row_len = 2;
    m->split = 2;
    m->split_len = 1;
    fails_from(&pl, k, PLAN_STAGE_MEMORY, "block's part is not one run of its elements");
    m->split = 1; /* one block owning every row holds the whole value: one run */
    m->split_len = 2;
    for (int s = PLAN_STAGE_FILLED; s <= PLAN_STAGE_LAUNCH; s++)
        assert_int_equal(plan_check_kernel(&pl, k, (PlanStage)s), ASTITCH_OK);
    *m = saved;
    astitch_plan_destroy(p);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

/* A failure naming a node of the planner's own copy of the graph (here: without a dead node
 * that came first, so every id is one less) reports the id of the caller's graph; a node the
 * copy alone has reports none. */
static void test_error_node_into(void **state)
{
    (void)state;
    astitch_context *ctx = NULL;
    astitch_graph *g = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t d[2] = {64, 32}, axis = 1;
    astitch_node dead = astitch_parameter(g, "dead", ASTITCH_F32, 2, d);
    astitch_unary(g, ASTITCH_OP_EXP, dead);
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, x);
    astitch_node s = astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &axis);
    assert_int_equal(astitch_add_output(g, s), ASTITCH_OK);
    astitch_device dev;
    assert_int_equal(astitch_device_builtin("h100", &dev), ASTITCH_OK);
    astitch_plan *p = NULL;
    assert_int_equal(astitch_plan_create(g, &dev, NULL, &p), ASTITCH_OK);
    assert_true(p->graph != g);
    astitch_node in_copy = astitch_graph_find(p->graph, "exp.3");
    assert_true(in_copy >= 0 && in_copy != e);
    ctx_fail(ctx, ASTITCH_ERR_INTERNAL, "a failure in the copy");
    ctx_error_at_node(ctx, in_copy);
    ctx_error_node_into(ctx, p->graph, g);
    assert_int_equal(astitch_last_error_node(ctx), e);
    ctx_fail(ctx, ASTITCH_ERR_INTERNAL, "a failure in the copy");
    ctx_error_at_node(ctx, in_copy);
    astitch_set_name(p->graph, in_copy, "only.in.the.copy");
    ctx_error_node_into(ctx, p->graph, g);
    assert_int_equal(astitch_last_error_node(ctx), ASTITCH_NO_NODE);
    astitch_plan_destroy(p);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

/* What planning fig7 under the switch dump_plan=value (ASTITCH_DUMP_PLAN) writes to stderr
 * (malloc'd). */
static char *dump_of(const char *value)
{
    char path[] = "/tmp/astitch_dump_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0 && dup2(fd, STDERR_FILENO) >= 0);
    astitch_context *ctx = NULL;
    astitch_graph *g = NULL;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    assert_int_equal(astitch_context_set_option(ctx, "dump_plan", value), ASTITCH_OK);
    astitch_plan *p = example_plan(ctx, "fig7_subgraph", &g); /* Fig. 7 */
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    astitch_plan_destroy(p);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
    FILE *f = fdopen(fd, "r");
    assert_non_null(f);
    rewind(f);
    char *text = calloc(1, 1 << 20);
    assert_non_null(text);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    text[n] = 0;
    fclose(f);
    unlink(path);
    return text;
}

static void test_dump_after(void **state)
{
    (void)state;
    char *t = dump_of("after:memory");
    assert_non_null(strstr(t, "astitch: plan after memory of kernel stitch.0:"));
    assert_non_null(strstr(t, "buffer 0:"));
    free(t);
    t = dump_of("after:scope");
    assert_non_null(strstr(t, "astitch: plan after scope:"));
    free(t);
    t = dump_of("after:prune");
    assert_non_null(strstr(t, "astitch: graph after prune:"));
    free(t);
    t = dump_of("after:nosuchstep");
    assert_non_null(strstr(t, "ASTITCH_DUMP_PLAN=after:nosuchstep: no such step"));
    assert_non_null(strstr(t, " tiles "));
    free(t);
    t = dump_of("1");
    assert_non_null(strstr(t, "plan: device h100"));
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stages),
        cmocka_unit_test(test_shared_part),
        cmocka_unit_test(test_dump_after),
        cmocka_unit_test(test_error_node_into),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
