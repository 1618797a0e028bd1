/*
 * test_plan_random.c: properties of plans for random graphs (tests/gen_graph.c), checked
 * independently of the planner's own checker:
 *
 *   - every memory-intensive op is owned by exactly one kernel (other kernels may only hold
 *     constants and iota, or under fusion=xla cheap recomputed copies);
 *   - the graph of kernels and compute ops has no cycle, and the steps are a topological order;
 *   - every value a phase reads from an earlier phase of its kernel is regional or global and
 *     a barrier of that strength separates the two phases (a block barrier for a global value
 *     read at elements the reading block made, by the planner's ownership checks over the
 *     index map this walk finds); reads inside a phase are only of non-reductions at the same
 *     element;
 *   - buffers that share bytes are never live at once without a barrier between them;
 *   - launch shapes fit the device and one wave; mappings cover their rows.
 *
 * Fixed seeds plus one fresh seed per run (printed), under every fusion mode, the ablation
 * switches and two device models.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gen_graph.h"
#include "passes/passes.h"

static bool memory_intensive(const astitch_graph *g, int32_t v)
{
    astitch_op_class c = astitch_op_class_of(gnode(g, v)->op);
    if (c == ASTITCH_CLASS_COMPUTE || gnode(g, v)->op == ASTITCH_OP_PARAMETER)
        return false;
    if (c != ASTITCH_CLASS_SOURCE)
        return true;
    for (int i = 0; i < g->noutput; i++)
        if (g->output[i] == v)
            return true;
    return false;
}

static void check_coverage(const astitch_plan *p)
{
    const astitch_graph *g = p->graph;
    for (int32_t v = 0; v < g->nnode; v++) {
        int owners = 0, copies = 0;
        for (int32_t k = 0; k < p->nkernel; k++) {
            const PlanOp *o = plan_kernel_op(&p->kernel[k], v);
            if (!o)
                continue;
            if (o->role == ASTITCH_ROLE_INLINED)
                copies++;
            else
                owners++;
        }
        if (owners != (memory_intensive(g, v) ? 1 : 0))
            fail_msg("node %d '%s' (%s) owned by %d kernels", (int)v, gnode(g, v)->name,
                     astitch_op_name(gnode(g, v)->op), owners);
        astitch_op op = gnode(g, v)->op;
        if (copies && p->opt.fusion != ASTITCH_FUSION_XLA && op != ASTITCH_OP_CONSTANT &&
            op != ASTITCH_OP_IOTA)
            fail_msg("node %d '%s' recomputed outside fusion=xla", (int)v, gnode(g, v)->name);
    }
}

/* Units: kernels 0..nk-1, compute node v as nk + v. Edges from the producer of every value a
 * unit reads from outside. Checks acyclicity (DFS) and the step order. */
static void check_acyclic(const astitch_plan *p)
{
    const astitch_graph *g = p->graph;
    int32_t nk = p->nkernel, nu = nk + g->nnode;
    int32_t *owner = malloc((size_t)g->nnode * sizeof *owner);
    int32_t *pos = malloc((size_t)nu * sizeof *pos);
    assert_non_null(owner);
    assert_non_null(pos);
    for (int32_t v = 0; v < g->nnode; v++) {
        owner[v] = -1;
        for (int32_t k = 0; k < nk; k++) {
            const PlanOp *o = plan_kernel_op(&p->kernel[k], v);
            if (o && o->role != ASTITCH_ROLE_INLINED)
                owner[v] = k;
        }
    }
    for (int32_t u = 0; u < nu; u++)
        pos[u] = -1;
    for (int32_t s = 0; s < p->nstep; s++)
        pos[p->step[s].kind == ASTITCH_STEP_KERNEL ? p->step[s].index : nk + p->step[s].index] = s;
    /* every edge goes forward in the step order, so the step order is topological and the
     * unit graph is acyclic */
    for (int32_t k = 0; k < nk; k++) {
        assert_true(pos[k] >= 0);
        const PlanKernel *kk = &p->kernel[k];
        for (int32_t i = 0; i < kk->nop; i++) {
            int32_t v = kk->op[i].node;
            for (int j = 0; j < gnode(g, v)->nin; j++) {
                int32_t x = goperand(g, v, j);
                if (plan_kernel_op(kk, x))
                    continue;
                int32_t from = owner[x] >= 0 ? owner[x]
                               : astitch_op_class_of(gnode(g, x)->op) == ASTITCH_CLASS_COMPUTE
                                   ? nk + x
                                   : -1;
                if (from < 0) {
                    assert_int_equal(gnode(g, x)->op, ASTITCH_OP_PARAMETER);
                    continue;
                }
                if (pos[from] >= pos[k])
                    fail_msg("kernel %s reads '%s' produced at step %d, not before step %d",
                             kk->name, gnode(g, x)->name, pos[from], pos[k]);
                if (owner[x] >= 0)
                    assert_true(plan_kernel_op(&p->kernel[owner[x]], x)->output);
            }
        }
    }
    for (int32_t v = 0; v < g->nnode; v++) {
        if (astitch_op_class_of(gnode(g, v)->op) != ASTITCH_CLASS_COMPUTE)
            continue;
        assert_true(pos[nk + v] >= 0);
        for (int j = 0; j < gnode(g, v)->nin; j++) {
            int32_t x = goperand(g, v, j);
            int32_t from = owner[x] >= 0 ? owner[x]
                           : astitch_op_class_of(gnode(g, x)->op) == ASTITCH_CLASS_COMPUTE
                               ? nk + x
                               : -1;
            if (from >= 0 && pos[from] >= pos[nk + v])
                fail_msg("compute op '%s' runs before its operand '%s'", gnode(g, v)->name,
                         gnode(g, x)->name);
            if (owner[x] >= 0)
                assert_true(plan_kernel_op(&p->kernel[owner[x]], x)->output);
        }
    }
    for (int i = 0; i < g->noutput; i++) {
        int32_t v = g->output[i];
        if (owner[v] >= 0)
            assert_true(plan_kernel_op(&p->kernel[owner[v]], v)->output);
    }
    free(owner);
    free(pos);
}

static bool is_root(const PlanOp *o) { return o && o->phase >= 0; }

/* A barrier of at least strength `need` starts one of the phases (a, b]. */
static bool barrier_between(const PlanKernel *k, int32_t a, int32_t b, astitch_barrier need)
{
    for (int32_t i = a + 1; i <= b; i++)
        if (k->phase[i].barrier >= need)
            return true;
    return false;
}

/* Whether root r (phase pr of k) reads src (phase ps) through index map f only at elements
 * its own block made (schemes.c, Read.own_block): the planner's two block-ownership checks,
 * over the map this walk found. */
static bool read_own_block(const astitch_graph *g, const PlanKernel *k, int32_t r, int32_t src,
                           IndexMap f)
{
    const PlanOp *so = plan_kernel_op(k, src), *ro = plan_kernel_op(k, r);
    const PlanPhase *sp = &k->phase[so->phase];
    if (sp->map.split > 1 && gnode(g, src)->op == ASTITCH_OP_REDUCE)
        return false;
    if (sched_regional(g, &k->phase[ro->phase], r, sp, src, f))
        return true;
    bool *reaches = calloc((size_t)g->nnode, sizeof *reaches);
    signed char *memo = calloc((size_t)g->nnode * 2, sizeof *memo);
    assert_true(reaches && memo);
    bool own = tiles_read_at_row(g, k, ro->phase, r, so->phase, src, reaches, memo);
    free(reaches);
    free(memo);
    return own;
}

/* Every root the phase of root r reads (found by walking back through non-root kernel ops)
 * is available: produced earlier with a barrier that covers its scheme (a global root read at
 * its own block's elements: a block barrier), or produced in the same phase and not a
 * reduction. */
static void check_reads(const astitch_plan *p, const PlanKernel *k, int32_t r, int32_t *stack,
                        uint8_t *seen)
{
    const astitch_graph *g = p->graph;
    const PlanOp *ro = plan_kernel_op(k, r);
    IndexMap *map = malloc((size_t)(g->noperand + 1) * sizeof *map);
    assert_non_null(map);
    int32_t sp = 0;
    memset(seen, 0, (size_t)g->nnode);
    for (int j = 0; j < gnode(g, r)->nin; j++) {
        map[sp] = gnode(g, r)->op == ASTITCH_OP_REDUCE ? index_identity() : index_operand(g, r, j);
        stack[sp++] = goperand(g, r, j);
    }
    while (sp > 0) {
        int32_t x = stack[--sp];
        IndexMap f = map[sp];
        const PlanOp *o = plan_kernel_op(k, x);
        if (!o || seen[x])
            continue;
        seen[x] = 1;
        if (is_root(o)) {
            if (o->phase == ro->phase) {
                if (gnode(g, x)->op == ASTITCH_OP_REDUCE)
                    fail_msg("%s: '%s' reads reduce '%s' in its own phase", k->name,
                             gnode(g, r)->name, gnode(g, x)->name);
                continue;
            }
            if (o->phase > ro->phase)
                fail_msg("%s: '%s' (phase %d) reads '%s' of a later phase %d", k->name,
                         gnode(g, r)->name, ro->phase, gnode(g, x)->name, o->phase);
            astitch_barrier need = o->scheme == ASTITCH_SCHEME_REGIONAL ? ASTITCH_BARRIER_BLOCK
                                   : o->scheme == ASTITCH_SCHEME_GLOBAL ? ASTITCH_BARRIER_GLOBAL
                                                                        : ASTITCH_BARRIER_NONE;
            if (need == ASTITCH_BARRIER_NONE)
                fail_msg("%s: '%s' is read by a later phase but is %s", k->name,
                         gnode(g, x)->name, astitch_scheme_name(o->scheme));
            if (need == ASTITCH_BARRIER_GLOBAL &&
                !barrier_between(k, o->phase, ro->phase, ASTITCH_BARRIER_GLOBAL) &&
                read_own_block(g, k, r, x, f))
                need = ASTITCH_BARRIER_BLOCK;
            if (!barrier_between(k, o->phase, ro->phase, need))
                fail_msg("%s: no %s barrier between '%s' and its reader '%s'", k->name,
                         astitch_barrier_name(need), gnode(g, x)->name, gnode(g, r)->name);
            /* a regional root read only inside its resident run lives in registers */
            bool in_run = k->phase[o->phase].resident &&
                          k->phase[ro->phase].run_first == k->phase[o->phase].run_first;
            if (o->scheme == ASTITCH_SCHEME_REGIONAL && !in_run)
                assert_int_equal(k->buf[o->buf].kind, ASTITCH_BUFFER_SHARED);
            continue;
        }
        for (int j = 0; j < gnode(g, x)->nin; j++) {
            map[sp] = index_compose(f, index_operand(g, x, j));
            stack[sp++] = goperand(g, x, j);
        }
    }
    free(map);
}

static void check_buffers(const PlanKernel *k)
{
    for (int32_t i = 0; i < k->nbuf; i++) {
        const PlanBuffer *a = &k->buf[i];
        bool sa = plan_buffer_shared(a->kind);
        assert_true(a->first_phase <= a->last_phase);
        assert_true(a->bytes > 0 || a->elements == 0);
        if (sa)
            assert_true(a->offset + a->bytes <= k->shared_bytes);
        else
            assert_true(a->offset + a->bytes <= k->scratch_bytes);
        for (int32_t j = i + 1; j < k->nbuf; j++) {
            const PlanBuffer *b = &k->buf[j];
            bool sb = plan_buffer_shared(b->kind);
            if (sa != sb || a->offset >= b->offset + b->bytes || b->offset >= a->offset + a->bytes)
                continue;
            astitch_barrier need = sa ? ASTITCH_BARRIER_BLOCK : ASTITCH_BARRIER_GLOBAL;
            bool ok = (a->last_phase < b->first_phase &&
                       barrier_between(k, a->last_phase, b->first_phase, need)) ||
                      (b->last_phase < a->first_phase &&
                       barrier_between(k, b->last_phase, a->first_phase, need));
            if (!ok)
                fail_msg("%s: buffers %d and %d share bytes while both live", k->name, (int)i,
                         (int)j);
        }
    }
}

static void check_mapping(const astitch_device *d, const PlanKernel *k, const astitch_mapping *m)
{
    assert_int_equal(m->block, k->block);
    assert_true(m->grid >= 1 && m->grid <= k->grid);
    assert_true(m->threads_per_row >= 1 && m->rows_per_block >= 1);
    /* column runs of v rows: a tile's rows_per_block / v groups of threads_per_row lanes */
    int64_t v = plan_column_vector(m);
    assert_true(m->rows_per_block % v == 0);
    assert_true((int64_t)m->threads_per_row * (m->rows_per_block / v) <= k->block);
    if (m->split > 1) {
        assert_int_equal(m->tasks_per_block, 1);
        assert_int_equal((int64_t)m->grid, ceil_div(m->rows, m->rows_per_block) * m->split);
        assert_true((int64_t)m->split * m->split_len >= m->row_len);
    } else {
        assert_true(m->chunk * (int64_t)m->grid >= m->rows);
        assert_true(m->tasks_per_block * m->rows_per_block >= m->chunk || m->rows == 0);
    }
    (void)d;
}

static void check_kernels(const astitch_plan *p)
{
    const astitch_graph *g = p->graph;
    const astitch_device *d = &p->dev;
    int32_t *stack = malloc((size_t)(g->noperand + 1) * sizeof *stack);
    uint8_t *seen = malloc((size_t)g->nnode + 1);
    assert_non_null(stack);
    assert_non_null(seen);
    for (int32_t ki = 0; ki < p->nkernel; ki++) {
        const PlanKernel *k = &p->kernel[ki];
        assert_true(k->block >= 1 && k->block <= d->max_threads_per_block);
        assert_true(k->grid >= 1);
        assert_true(k->persistent ? k->grid <= k->blocks_per_wave : k->global_barriers == 0);
        assert_true(k->blocks_per_wave <= d->sm_count * d->max_blocks_per_sm);
        assert_true(k->shared_bytes <= d->shared_per_block);
        assert_true(k->regs >= 32 && k->regs <= d->max_regs_per_thread);
        assert_true((int64_t)k->regs * k->block * k->blocks_per_sm <= d->regs_per_sm);
        for (int32_t i = 0; i < k->ngroup; i++)
            check_mapping(d, k, &k->group[i].map);
        for (int32_t i = 0; i < k->nphase; i++) {
            check_mapping(d, k, &k->phase[i].map);
            for (int32_t r = 0; r < k->phase[i].nroot; r++)
                check_reads(p, k, k->phase[i].root[r], stack, seen);
        }
        for (int32_t i = 0; i < k->nop; i++) {
            const PlanOp *o = &k->op[i];
            if (o->role == ASTITCH_ROLE_INLINED)
                continue;
            assert_true(o->group >= 0 && o->group < k->ngroup);
            if (o->output)
                assert_true(o->phase >= 0);
        }
        check_buffers(k);
    }
    free(stack);
    free(seen);
}

static int planned;

static void check_graph(astitch_context *ctx, astitch_graph *g, uint64_t seed)
{
    static const char *const devs[] = {"h100", "host"};
    for (int di = 0; di < 2; di++) {
        astitch_device d;
        assert_int_equal(astitch_device_builtin(devs[di], &d), ASTITCH_OK);
        for (int variant = 0; variant < 6; variant++) {
            astitch_plan_options o;
            astitch_plan_options_default(&o);
            o.fusion = variant == 4 ? ASTITCH_FUSION_XLA
                       : variant == 5 ? ASTITCH_FUSION_NONE
                                      : ASTITCH_FUSION_STITCH;
            o.remote = variant != 1;
            o.merge = variant != 2;
            o.packing = variant != 3;
            astitch_plan *p = NULL;
            if (astitch_plan_create(g, &d, &o, &p) != ASTITCH_OK)
                fail_msg("seed %llu, %s, variant %d: %s", (unsigned long long)seed, devs[di],
                         variant, astitch_last_error(ctx));
            check_coverage(p);
            check_acyclic(p);
            check_kernels(p);
            planned++;
            astitch_plan_destroy(p);
        }
    }
}

/* ASTITCH_PLAN_RANDOM_SCALE=N multiplies the number of seeds (for long local runs). */
static int scaled(int count)
{
    const char *e = getenv("ASTITCH_PLAN_RANDOM_SCALE");
    int k = e ? atoi(e) : 1;
    return count * (k > 0 ? k : 1);
}

static void run_seeds(uint64_t first, int count, const gen_options *go)
{
    count = scaled(count);
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    for (int i = 0; i < count; i++) {
        uint64_t seed = first + (uint64_t)i;
        astitch_graph *g = gen_graph(ctx, seed, go);
        if (!g)
            fail_msg("generator, seed %llu: %s", (unsigned long long)seed, astitch_last_error(ctx));
        check_graph(ctx, g, seed);
        astitch_graph_destroy(g);
    }
    astitch_context_destroy(ctx);
}

static void small_graphs(void **state)
{
    gen_options go;
    gen_options_default(&go);
    run_seeds(1, 200, &go);
}

static void dense_compute_graphs(void **state)
{
    gen_options go;
    gen_options_default(&go);
    go.nodes = 60;
    go.percent_compute = 20;
    go.percent_custom = 5;
    go.half = true;
    go.discontinuous = true;
    run_seeds(1000, 100, &go);
}

static void large_graphs(void **state)
{
    gen_options go;
    gen_options_default(&go);
    go.nodes = 400;
    go.max_dim = 64;
    go.outputs = 6;
    run_seeds(5000, 10, &go);
}

static void fresh_seed(void **state)
{
    uint64_t seed = gen_fresh_seed();
    printf("# test_plan_random fresh seed %llu\n", (unsigned long long)seed);
    gen_options go;
    gen_options_default(&go);
    go.nodes = 80;
    go.percent_custom = 3;
    run_seeds(seed, 5, &go);
}

/* The generator is deterministic in its seed and makes different graphs for different seeds. */
static void generator_seeds(void **state)
{
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    gen_options go;
    gen_options_default(&go);
    astitch_graph *a = gen_graph(ctx, 42, &go), *b = gen_graph(ctx, 42, &go),
                  *c = gen_graph(ctx, 43, &go);
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(c);
    char *ta, *tb, *tc;
    assert_int_equal(astitch_graph_write_json(a, &ta), ASTITCH_OK);
    assert_int_equal(astitch_graph_write_json(b, &tb), ASTITCH_OK);
    assert_int_equal(astitch_graph_write_json(c, &tc), ASTITCH_OK);
    assert_string_equal(ta, tb);
    assert_string_not_equal(ta, tc);
    assert_true(astitch_graph_num_nodes(a) >= go.nodes);
    astitch_free(ta);
    astitch_free(tb);
    astitch_free(tc);
    astitch_graph_destroy(a);
    astitch_graph_destroy(b);
    astitch_graph_destroy(c);
    astitch_context_destroy(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(generator_seeds),
        cmocka_unit_test(small_graphs),
        cmocka_unit_test(dense_compute_graphs),
        cmocka_unit_test(large_graphs),
        cmocka_unit_test(fresh_seed),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    printf("# %d plans checked\n", planned);
    return rc;
}
