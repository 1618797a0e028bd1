/*
 * propagate.c: schedule propagation (paper 4.2 observation A, 4.3 step 2).
 *
 * Every dominant and sub-dominant is a root: the kernel materializes it. A root's mapping is
 * derived from its group's dominant: the same mapping when it walks the same space (a reduce of
 * the same operand and axes, or an element-wise op of the dominant's space, which the dominant's
 * threads walk element by element), an element-wise mapping over the dominant reduce's result
 * with the same rows per block, or an element-wise mapping over a leading part of an
 * element-wise dominant's space with its chunk divided accordingly.
 *
 * Local ops get their elements from the root being computed by index propagation: from each
 * root, the walk goes back through local and inlined ops, composing the index map of each
 * (identity for element-wise ops and reshapes; projections for broadcasts; the indices of a
 * gather; general maps for transposes, slices and concatenations, which are exact but do not
 * preserve block locality) until it meets another root (a Read) or a kernel input.
 *
 * Phases: roots in node order, but a group that reads another group's roots after all of that
 * group's (root_order), each into the first phase at or after the phases of what it reads that
 * has its group and mapping; a read of a reduce, or any read not at the same element in the same
 * mapping, needs a later phase.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

typedef struct Visit {
    int32_t node;
    IndexMap f;
} Visit;

typedef struct Walk {
    Visit *stack;
    int32_t n, cap;
    IndexMap *seen;   /* node -> first map it was reached with under the current epoch */
    int32_t *phase_seen; /* node -> 1 + the last phase whose evaluations counted it */
    int32_t *visited; /* local ops the current root computes */
    int32_t nvisited, capvisited;
} Walk;

static bool walk_visit(Walk *w, int32_t node)
{
    if (!ARRAY_RESERVE(w->visited, w->nvisited, w->capvisited, 64))
        return false;
    w->visited[w->nvisited++] = node;
    return true;
}

static bool walk_push(Walk *w, int32_t node, IndexMap f)
{
    if (!ARRAY_RESERVE(w->stack, w->n, w->cap, 64))
        return false;
    w->stack[w->n++] = (Visit){node, f};
    return true;
}

static bool add_read(Planner *pl, int32_t root, int32_t src, IndexMap f)
{
    for (int32_t i = pl->nread - 1; i >= 0 && pl->read[i].root == root; i--)
        if (pl->read[i].src == src && pl->read[i].f.known == f.known &&
            pl->read[i].f.div == f.div && pl->read[i].f.mod == f.mod)
            return true;
    if (!ARRAY_RESERVE(pl->read, pl->nread, pl->capread, 64))
        return false;
    pl->read[pl->nread++] = (Read){root, src, f, false};
    return true;
}

static bool is_root(const PlanOp *o)
{
    return o->role == ASTITCH_ROLE_DOMINANT || o->role == ASTITCH_ROLE_SUB_DOMINANT;
}

static void space_elements(const astitch_graph *g, int32_t r, int64_t *n)
{
    Shape s;
    uint32_t axes;
    sched_space(g, r, &s, &axes);
    *n = shape_elements(&s);
}

/* Walks back from root r, recording what it reads and the local ops it computes. */
static bool walk_root(Planner *pl, PlanKernel *k, Walk *w, int32_t r, int32_t budget)
{
    const astitch_graph *g = pl->g;
    pl->epoch++;
    w->n = 0;
    w->nvisited = 0;
    const Node *rn = gnode(g, r);
    for (int j = 0; j < rn->nin; j++) {
        IndexMap f = rn->op == ASTITCH_OP_REDUCE ? index_identity() : index_operand(g, r, j);
        if (!walk_push(w, goperand(g, r, j), f))
            return false;
    }
    while (w->n > 0) {
        Visit v = w->stack[--w->n];
        int32_t x = v.node;
        if (pl->kidx[x] < 0)
            continue; /* a kernel input */
        PlanOp *o = &k->op[pl->kidx[x]];
        if (is_root(o)) {
            if (!add_read(pl, r, x, v.f))
                return false;
            continue;
        }
        if (pl->stamp[x] == pl->epoch) {
            IndexMap s = w->seen[x];
            if (s.known == v.f.known && s.div == v.f.div && s.mod == v.f.mod)
                continue;
            if (--budget < 0)
                v.f.known = false; /* too many distinct paths: stay conservative */
            if (!s.known && !v.f.known)
                continue;
        } else {
            pl->stamp[x] = pl->epoch;
            w->seen[x] = v.f;
            if (!walk_visit(w, x))
                return false;
        }
        const Node *xn = gnode(g, x);
        for (int j = 0; j < xn->nin; j++)
            if (!walk_push(w, goperand(g, x, j), index_compose(v.f, index_operand(g, x, j))))
                return false;
    }
    return true;
}

/* An element-wise mapping over the elements of node r with the given chunk (rows per block). */
static void elementwise_map(const astitch_graph *g, int32_t r, const PlanKernel *k, int64_t chunk,
                            astitch_mapping *m)
{
    const Shape *s = &gnode(g, r)->shape;
    memset(m, 0, sizeof *m);
    m->kind = ASTITCH_MAP_ELEMENTWISE;
    m->rank = s->rank;
    memcpy(m->dims, s->dim, sizeof m->dims);
    m->rows = shape_elements(s);
    m->row_len = 1;
    m->block = k->block;
    m->threads_per_row = 1;
    m->split = 1;
    m->split_len = 1;
    if (chunk < 1) { /* a fresh mapping: one tile per block, packed into one wave */
        int64_t tiles = ceil_div(m->rows, k->block);
        int64_t grid = tiles < k->blocks_per_wave ? tiles : k->blocks_per_wave;
        chunk = grid > 0 ? ceil_div(tiles, grid) * k->block : k->block;
    }
    m->grid = (int32_t)ceil_div(m->rows, chunk);
    if (m->grid <= 1) {
        m->grid = 1;
        chunk = m->rows > 0 ? m->rows : 1;
    }
    m->chunk = chunk;
    m->rows_per_block = (int32_t)(chunk < k->block ? chunk : k->block);
    m->tasks_per_block = ceil_div(chunk, m->rows_per_block);
}

static void derive_map(const astitch_graph *g, const PlanKernel *k, const PlanGroup *gr,
                       int32_t r, astitch_mapping *m)
{
    const astitch_mapping *dm = &gr->map;
    int64_t q = 1;
    Derive d = r == gr->dominant ? DERIVE_SAME : sched_derive(g, gr->dominant, r, &q);
    if (d == DERIVE_SAME || d == DERIVE_ACROSS) { /* across: the rows' own walk (across.c) */
        *m = *dm;
    } else if (d == DERIVE_OUTPUT && dm->split == 1) {
        elementwise_map(g, r, k, dm->chunk, m);
    } else if (d == DERIVE_QUOTIENT && dm->chunk % q == 0) {
        elementwise_map(g, r, k, dm->chunk / q, m);
    } else {
        elementwise_map(g, r, k, 0, m);
    }
}

static bool reads_in_register(const astitch_graph *g, const PlanKernel *k, const PlanOp *src,
                              const astitch_mapping *m, IndexMap f, int64_t nspace)
{
    if (gnode(g, src->node)->op == ASTITCH_OP_REDUCE)
        return false;
    return sched_map_equal(&k->phase[src->phase].map, m) && index_equal(f, index_identity(), nspace);
}

/* Group levels from what the groups read of each other: a group that reads another group's
 * roots (through local ops) gets a higher level than that group. Returns false, leaving node
 * order, for a kernel of one group, or when the groups read each other in a cycle
 * or are more than 64. */
static bool group_levels(const Planner *pl, const PlanKernel *k, int32_t *level)
{
    const astitch_graph *g = pl->g;
    if (k->ngroup < 2 || k->ngroup > 64)
        return false;
    uint64_t *made = calloc((size_t)k->nop, sizeof *made); /* op -> groups whose roots it reads,
                                                             * or its own group's bit */
    uint64_t needs[64] = {0};                               /* group -> groups it reads */
    if (!made)
        return false;
    for (int32_t i = 0; i < k->nop; i++) { /* ops by node id: operands first */
        const PlanOp *o = &k->op[i];
        const Node *n = gnode(g, o->node);
        uint64_t in = 0;
        for (int j = 0; j < n->nin; j++) {
            int32_t x = pl->kidx[goperand(g, o->node, j)];
            if (x >= 0)
                in |= made[x];
        }
        if (is_root(o)) {
            needs[o->group] |= in & ~(1ull << o->group);
            made[i] = 1ull << o->group;
        } else {
            made[i] = in;
        }
    }
    free(made);
    uint64_t placed = 0;
    for (int lv = 0; lv < k->ngroup; lv++) {
        uint64_t now = 0;
        for (int32_t gi = 0; gi < k->ngroup; gi++)
            if (!(placed >> gi & 1) && !(needs[gi] & ~placed)) {
                level[gi] = lv;
                now |= 1ull << gi;
            }
        if (!now)
            return false; /* a cycle */
        placed |= now;
        if (placed == (k->ngroup == 64 ? ~0ull : (1ull << k->ngroup) - 1))
            return true;
    }
    return false;
}

/* The order roots are placed in: node order (the kernel's ops are sorted by node id), except
 * that every root of a group that reads another group's results comes after all of that
 * group's roots. A normalization whose scale needs another tensor's statistics (AdaIN) then
 * runs its statistics and its output in consecutive phases, one tile run, instead of around
 * the other group's phases. */
static int32_t *root_order(const Planner *pl, const PlanKernel *k, int32_t *nroot)
{
    int32_t *order = malloc((size_t)(k->nop ? k->nop : 1) * sizeof *order);
    int32_t level[64];
    if (!order)
        return NULL;
    bool by_level = group_levels(pl, k, level);
    int32_t n = 0, top = by_level ? k->ngroup : 1;
    for (int32_t lv = 0; lv < top; lv++)
        for (int32_t i = 0; i < k->nop; i++)
            if (is_root(&k->op[i]) && (!by_level || level[k->op[i].group] == lv))
                order[n++] = i;
    *nroot = n;
    return order;
}

/* Places root o in the first phase its reads allow that has its group and mapping (a new
 * phase at the end if none), and counts the evaluations of the local ops it computes. */
static astitch_status place_root(Planner *pl, PlanKernel *k, Walk *w, PlanOp *o, int32_t *cap)
{
    const astitch_graph *g = pl->g;
    astitch_mapping m;
    derive_map(g, k, &k->group[o->group], o->node, &m);
    if (plan_reduce_across(g, &m, o->node) && (m.vector < 1 || m.split > 1))
        return ctx_fail(g->ctx, ASTITCH_ERR_INTERNAL,
                        "planner: kernel %s: node %d '%s' is summed across the rows of a "
                        "mapping that does not keep them in registers", k->name, o->node,
                        gnode(g, o->node)->name);
    /* reads are needed before placement: walk with no phase yet */
    int32_t first_read = pl->nread;
    o->phase = -1;
    if (!walk_root(pl, k, w, o->node, 4 * k->nop + 64))
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    int64_t nspace;
    space_elements(g, o->node, &nspace);
    int32_t lo = 0;
    for (int32_t r = first_read; r < pl->nread; r++) {
        const PlanOp *src = &k->op[pl->kidx[pl->read[r].src]];
        int32_t need = reads_in_register(g, k, src, &m, pl->read[r].f, nspace)
                           ? src->phase
                           : src->phase + 1;
        if (need > lo)
            lo = need;
    }
    int32_t p = lo;
    while (p < k->nphase &&
           !(k->phase[p].group == o->group && sched_map_equal(&k->phase[p].map, &m)))
        p++;
    if (p == k->nphase) {
        if (!ARRAY_RESERVE(k->phase, k->nphase, *cap, 8))
            return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
        memset(&k->phase[p], 0, sizeof k->phase[p]);
        k->phase[p].group = o->group;
        k->phase[p].run_first = p; /* alone until tiles.c says otherwise */
        k->phase[p].map = m;
        k->nphase++;
    }
    PlanPhase *ph = &k->phase[p];
    int32_t *a = realloc(ph->root, (size_t)(ph->nroot + 1) * sizeof *a);
    if (!a)
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    a[ph->nroot++] = o->node;
    ph->root = a;
    o->phase = p;
    o->evals = sched_elements(g, o->node);
    for (int32_t v = 0; v < w->nvisited; v++) {
        int32_t x = w->visited[v];
        if (w->phase_seen[x] != p + 1) {
            w->phase_seen[x] = p + 1;
            k->op[pl->kidx[x]].evals += nspace;
        }
    }
    return ASTITCH_OK;
}

static astitch_status place_roots(Planner *pl, PlanKernel *k, Walk *w)
{
    int32_t cap = 0, nroot;
    int32_t *order = root_order(pl, k, &nroot);
    if (!order)
        return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    astitch_status st = ASTITCH_OK;
    for (int32_t i = 0; i < nroot && st == ASTITCH_OK; i++)
        st = place_root(pl, k, w, &k->op[order[i]], &cap);
    free(order);
    return st;
}

astitch_status pass_propagate(Planner *pl, PlanKernel *k)
{
    for (int32_t i = 0; i < k->nphase; i++)
        free(k->phase[i].root);
    free(k->phase);
    k->phase = NULL;
    k->nphase = 0;
    pl->nread = 0;
    for (int32_t i = 0; i < k->nop; i++) {
        k->op[i].phase = -1;
        k->op[i].evals = 0;
    }
    Walk w = {NULL, 0, 0, malloc((size_t)pl->n * sizeof(IndexMap)),
              malloc((size_t)pl->n * sizeof(int32_t)), NULL, 0, 0};
    if (!w.seen || !w.phase_seen) {
        free(w.seen);
        free(w.phase_seen);
        return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    }
    for (int32_t i = 0; i < k->nop; i++)
        w.phase_seen[k->op[i].node] = -1;
    astitch_status st = place_roots(pl, k, &w);
    int32_t grid = 1;
    for (int32_t i = 0; i < k->nphase; i++)
        if (k->phase[i].map.grid > grid)
            grid = k->phase[i].map.grid;
    k->grid = grid;
    free(w.stack);
    free(w.visited);
    free(w.seen);
    free(w.phase_seen);
    return st;
}
