/*
 * dominant.c: dominant identification, dominant merging and op grouping (paper 4.3 step 1).
 *
 * Candidates are the ops that cannot be local (observation B): reductions, expensive
 * element-wise ops that feed a broadcast (directly or through a few single-operand element-wise
 * ops and reshapes), and the kernel's outputs. Every other owned op is
 * local. Two candidates are connected when a path between them (in either direction) runs
 * through local ops, inlined ops and kernel inputs only, as the paper's path reduce.1 - add.1 -
 * broadcast.1 - parameter.2 - divide.1 - power.1 does, and through element-wise candidates
 * (never through another reduction): a layer norm whose input is also an output then keeps its
 * reductions, statistics and output in one group, one mapping and one resident run.
 *
 * Merging: reductions are visited first (in node order), then the other candidates from the
 * largest to the smallest. A candidate becomes a sub-dominant of the nearest connected dominant
 * (fewest ops on the path, then the smaller node id) whose mapping it can share (sched_derive);
 * otherwise it becomes a dominant itself. So reductions are preferred as dominants, and every
 * group has exactly one. Without merging, every candidate is a dominant.
 *
 * Grouping: every local op joins the group of the nearest dominant or sub-dominant that consumes
 * it through local ops (breadth-first back through operands from all of them at once).
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

enum { NOT_CANDIDATE = 0, CANDIDATE = 1, DOMINANT = 2, SUB = 3 };

static bool in_kernel(const Planner *pl, int32_t v) { return pl->kidx[v] >= 0; }

static bool is_local(const Planner *pl, const PlanKernel *k, const int8_t *cand, int32_t v)
{
    return in_kernel(pl, v) && cand[pl->kidx[v]] == NOT_CANDIDATE;
}

/* The most elements of a broadcast_in_dim of the kernel that v's value reaches directly or
 * through up to `depth` single-operand element-wise ops and reshapes, 0 if none: an expensive
 * op broadcast after a rounding (Llama's rotary table: cos, convert to bf16 and back, broadcast
 * over batch and heads) would otherwise be recomputed for every element of the broadcast, as
 * one broadcast directly. */
static int64_t broadcast_reached(const Planner *pl, int32_t v, int depth)
{
    const astitch_graph *g = pl->g;
    int64_t most = 0;
    for (int32_t e = pl->ustart[v]; e < pl->ustart[v + 1]; e++) {
        int32_t u = pl->use[e];
        if (!in_kernel(pl, u))
            continue;
        const Node *n = gnode(g, u);
        astitch_op_class c = astitch_op_class_of(n->op);
        bool passes = n->nin == 1 && (c == ASTITCH_CLASS_LIGHT || c == ASTITCH_CLASS_HEAVY ||
                                      n->op == ASTITCH_OP_RESHAPE);
        int64_t got = n->op == ASTITCH_OP_BROADCAST_IN_DIM ? shape_elements(&n->shape)
                      : passes && depth > 0 ? broadcast_reached(pl, u, depth - 1) : 0;
        if (got > most)
            most = got;
    }
    return most;
}

/* Whether v's value depends on a reduction of the kernel (through the kernel's own ops). */
static bool after_reduce(Planner *pl, int32_t v)
{
    if (!in_kernel(pl, v) || pl->stamp[v] == pl->epoch)
        return false;
    pl->stamp[v] = pl->epoch;
    const Node *n = gnode(pl->g, v);
    if (n->op == ASTITCH_OP_REDUCE)
        return true;
    for (int k = 0; k < n->nin; k++)
        if (after_reduce(pl, goperand(pl->g, v, k)))
            return true;
    return false;
}

/* Elements of a broadcast per element of its operand from which a small expensive value made
 * of the kernel's inputs alone is recomputed where it is read (replicable, below). */
enum { REPLICATE_RUN = 4096 };

/* Whether v, an expensive op whose value reaches broadcasts of at most `reach` elements, has
 * fewer elements than the device has SMs, each broadcast to at least REPLICATE_RUN elements,
 * and is made from the kernel's inputs alone. Such a value stays local, recomputed where it is
 * read (a few operations per element, hoisted out of the element loop where its operands
 * allow): as a sub-dominant its readers would need whole runs of it in one block, which for a
 * scalar (the loss scale a cross-entropy backward broadcasts over its logits) is the whole
 * space on one block. A value broadcast less (the paper's Figure 5: power<2> over 2 x 128) is
 * made once, and one made from a reduction stays a candidate: its readers wait for it anyway. */
static bool replicable(Planner *pl, int32_t v, int64_t reach)
{
    int64_t n = shape_elements(&gnode(pl->g, v)->shape);
    if (n >= pl->p->dev.sm_count || reach / (n > 0 ? n : 1) < REPLICATE_RUN)
        return false;
    pl->epoch++;
    return !after_reduce(pl, v);
}

/* Whether v is an expensive op of a few instructions (op_heavy_few_instructions) made from the
 * kernel's inputs alone: it stays local, recomputed per element of its broadcasts. As a
 * sub-dominant its readers' blocks must take whole rows of the broadcast, which breaks their
 * 16-byte accesses where a row is not a multiple of the block's vectors: EfficientNet's
 * squeeze-and-excitation gate, x * sigmoid(s) broadcast over 7 x 7 to 56 x 56 positions, ran
 * 4-76% slower made once than recomputed (H200, bench/RESULTS.md, *Four planner rules*). One
 * made from a reduction stays a candidate: its readers wait for it anyway. */
static bool few_instructions(Planner *pl, int32_t v)
{
    if (!op_heavy_few_instructions(gnode(pl->g, v)->op))
        return false;
    pl->epoch++;
    return !after_reduce(pl, v);
}

static void find_candidates(Planner *pl, PlanKernel *k, int8_t *cand)
{
    const astitch_graph *g = pl->g;
    for (int32_t i = 0; i < k->nop; i++) {
        const PlanOp *o = &k->op[i];
        cand[i] = NOT_CANDIDATE;
        if (o->role == ASTITCH_ROLE_INLINED)
            continue;
        astitch_op op = gnode(g, o->node)->op;
        bool c = o->output || op == ASTITCH_OP_REDUCE;
        if (!c && astitch_op_class_of(op) == ASTITCH_CLASS_HEAVY) {
            int64_t reach = broadcast_reached(pl, o->node, 4);
            c = reach > 0 && !replicable(pl, o->node, reach) && !few_instructions(pl, o->node);
        }
        cand[i] = c ? CANDIDATE : NOT_CANDIDATE;
    }
}

/* Breadth-first from candidate s through connectors; returns the nearest dominant d with
 * sched_derive(d, s) != NONE, or -1. */
static int32_t nearest_dominant(Planner *pl, PlanKernel *k, const int8_t *cand, int32_t s)
{
    const astitch_graph *g = pl->g;
    int32_t *queue = pl->tmp, *dist = pl->tmp2;
    int32_t qh = 0, qt = 0, best = -1, bestd = INT32_MAX;
    pl->epoch++;
    queue[qt++] = s;
    dist[s] = 0;
    pl->stamp[s] = pl->epoch;
    while (qh < qt) {
        int32_t x = queue[qh++];
        if (dist[x] >= bestd)
            break;
        bool inside = in_kernel(pl, x);
        int32_t nin = inside ? gnode(g, x)->nin : 0;
        int32_t nuse = pl->ustart[x + 1] - pl->ustart[x];
        for (int32_t i = 0; i < nin + nuse; i++) {
            int32_t y = i < nin ? goperand(g, x, (int)i) : pl->use[pl->ustart[x] + i - nin];
            if (pl->stamp[y] == pl->epoch)
                continue;
            bool y_in = in_kernel(pl, y);
            if (i >= nin && !y_in)
                continue; /* consumers outside the kernel do not connect */
            pl->stamp[y] = pl->epoch;
            dist[y] = dist[x] + 1;
            if (y_in && cand[pl->kidx[y]] != NOT_CANDIDATE) {
                int64_t q;
                Derive how = cand[pl->kidx[y]] == DOMINANT ? sched_derive(g, y, s, &q) : DERIVE_NONE;
                if (how != DERIVE_NONE && how != DERIVE_ACROSS && /* across: after mapping */
                    (dist[y] < bestd || (dist[y] == bestd && y < best))) {
                    best = y;
                    bestd = dist[y];
                }
                /* no path runs through another reduction; it may run through element-wise
                 * candidates (an output on the way, as the residual sum a layer norm reads
                 * in its two reductions and its output), which are materialized anyway */
                if (gnode(g, y)->op == ASTITCH_OP_REDUCE)
                    continue;
            }
            if (!y_in && astitch_op_class_of(gnode(g, y)->op) == ASTITCH_CLASS_COMPUTE)
                continue; /* a compute op's result is an input, but does not connect further */
            queue[qt++] = y;
        }
    }
    return best;
}

typedef struct Order {
    int32_t node;
    int64_t key;
} Order;

static int cmp_order(const void *a, const void *b)
{
    const Order *x = a, *y = b;
    if (x->key != y->key)
        return x->key > y->key ? -1 : 1;
    return (x->node > y->node) - (x->node < y->node);
}

static astitch_status build_groups(Planner *pl, PlanKernel *k, int8_t *cand, int32_t *owner_dom)
{
    const astitch_graph *g = pl->g;
    int32_t ng = 0;
    for (int32_t i = 0; i < k->nop; i++)
        ng += cand[i] == DOMINANT;
    k->group = calloc((size_t)(ng ? ng : 1), sizeof *k->group);
    if (!k->group)
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    k->ngroup = ng;
    int32_t gi = 0;
    for (int32_t i = 0; i < k->nop; i++) {
        if (cand[i] != DOMINANT)
            continue;
        k->group[gi].dominant = k->op[i].node;
        k->op[i].group = gi++;
        k->op[i].role = ASTITCH_ROLE_DOMINANT;
    }
    for (int32_t i = 0; i < k->nop; i++) {
        if (cand[i] != SUB)
            continue;
        PlanOp *d = &k->op[pl->kidx[owner_dom[i]]];
        PlanGroup *gr = &k->group[d->group];
        int32_t *a = realloc(gr->sub, (size_t)(gr->nsub + 1) * sizeof *a);
        if (!a)
            return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
        a[gr->nsub++] = k->op[i].node;
        gr->sub = a;
        k->op[i].group = d->group;
        k->op[i].role = ASTITCH_ROLE_SUB_DOMINANT;
    }
    /* local ops: multi-source breadth-first search from the materialized ops back through
     * operands, so an op joins the group of the nearest root that computes it */
    int32_t *queue = pl->tmp, qh = 0, qt = 0;
    for (int32_t i = 0; i < k->nop; i++)
        if (cand[i] != NOT_CANDIDATE)
            queue[qt++] = k->op[i].node;
    while (qh < qt) {
        int32_t x = queue[qh++];
        int32_t grp = k->op[pl->kidx[x]].group;
        for (int32_t i = 0; i < gnode(g, x)->nin; i++) {
            int32_t y = goperand(g, x, (int)i);
            if (!is_local(pl, k, cand, y))
                continue;
            PlanOp *o = &k->op[pl->kidx[y]];
            if (o->role == ASTITCH_ROLE_INLINED || o->group >= 0)
                continue;
            o->group = grp;
            queue[qt++] = y;
        }
    }
    for (int32_t i = 0; i < k->nop; i++) {
        PlanOp *o = &k->op[i];
        if (o->role != ASTITCH_ROLE_MEMBER)
            continue;
        if (o->group < 0 && ng == 0)
            continue; /* no group to join: plan_check reports it (the placeholder is empty) */
        if (o->group < 0)
            o->group = 0;
        PlanGroup *gr = &k->group[o->group];
        int32_t *a = realloc(gr->member, (size_t)(gr->nmember + 1) * sizeof *a);
        if (!a)
            return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
        a[gr->nmember++] = o->node;
        gr->member = a;
    }
    return ASTITCH_OK;
}

astitch_status pass_dominant(Planner *pl, PlanKernel *k)
{
    const astitch_graph *g = pl->g;
    plan_kernel_clear_schedule(k);
    for (int32_t i = 0; i < k->nop; i++) {
        PlanOp *o = &k->op[i];
        o->group = -1;
        o->phase = o->buf = -1;
        o->scheme = ASTITCH_SCHEME_LOCAL;
        o->zero_init = false;
        o->evals = 0;
        if (o->role != ASTITCH_ROLE_INLINED)
            o->role = ASTITCH_ROLE_MEMBER;
    }
    int8_t *cand = malloc((size_t)(k->nop ? k->nop : 1));
    int32_t *owner_dom = malloc((size_t)(k->nop ? k->nop : 1) * sizeof *owner_dom);
    Order *ord = malloc((size_t)(k->nop ? k->nop : 1) * sizeof *ord);
    if (!cand || !owner_dom || !ord) {
        free(cand);
        free(owner_dom);
        free(ord);
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    }
    find_candidates(pl, k, cand);
    int32_t nord = 0;
    for (int32_t i = 0; i < k->nop; i++) {
        if (cand[i] == NOT_CANDIDATE)
            continue;
        int32_t v = k->op[i].node;
        bool red = gnode(g, v)->op == ASTITCH_OP_REDUCE;
        /* reductions first, in node order; then the largest candidates */
        ord[nord].node = v;
        ord[nord].key = red ? INT64_MAX - v : sched_elements(g, v);
        nord++;
    }
    if (nord > 1)
        qsort(ord, (size_t)nord, sizeof *ord, cmp_order);
    for (int32_t i = 0; i < nord; i++) {
        int32_t v = ord[i].node, ix = pl->kidx[v];
        int32_t d = pl->p->opt.merge ? nearest_dominant(pl, k, cand, v) : -1;
        if (d < 0) {
            cand[ix] = DOMINANT;
        } else {
            cand[ix] = SUB;
            owner_dom[ix] = d;
        }
    }
    astitch_status st = build_groups(pl, k, cand, owner_dom);
    free(cand);
    free(owner_dom);
    free(ord);
    return st;
}
