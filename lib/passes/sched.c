/*
 * sched.c: helpers shared by the scheduling passes: element index maps between ops, block
 * ownership of a phase's elements, derivation of a root's mapping from its dominant, and the
 * barrier fill.
 *
 * Index maps are kept in the form e -> (e / div) % mod over row-major linear indices. That form
 * is closed under the maps that preserve block locality (element-wise ops, reshapes, broadcasts
 * that expand leading or trailing dimensions, a gather's indices) and under composition when
 * the divisions line up; anything else is "unknown", which makes a dependency global.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

int64_t ceil_div(int64_t a, int64_t b) { return b > 0 ? (a + b - 1) / b : 0; }

int64_t pow2_ceil(int64_t x)
{
    int64_t p = 1;
    while (p < x)
        p <<= 1;
    return p;
}

int64_t pow2_floor(int64_t x)
{
    int64_t p = 1;
    while (p * 2 <= x)
        p <<= 1;
    return p;
}

int64_t sched_elements(const astitch_graph *g, int32_t n)
{
    return shape_elements(&gnode(g, n)->shape);
}

IndexMap index_identity(void) { return (IndexMap){true, 1, 0}; }

static IndexMap index_unknown(void) { return (IndexMap){false, 1, 0}; }

static bool shape_is_identity_slice(const Node *c, const Node *x)
{
    for (int i = 0; i < x->shape.rank; i++)
        if (c->attr.dims[i] != 0 || c->attr.limit[i] != x->shape.dim[i] || c->attr.stride[i] != 1)
            return false;
    return true;
}

/* broadcast_in_dim: the operand's non-unit dims must land on a contiguous, increasing run of
 * output dims [a, b); then operand index = (e / inner) % mid. */
static IndexMap index_broadcast(const Node *c, const Node *x)
{
    int a = -1, b = -1;
    for (int i = 0; i < x->shape.rank; i++) {
        if (x->shape.dim[i] == 1)
            continue;
        int d = (int)c->attr.dims[i];
        if (a < 0)
            a = d;
        else if (d != b)
            return index_unknown();
        b = d + 1;
    }
    int64_t n = shape_elements(&c->shape);
    if (a < 0) /* one element read by all */
        return (IndexMap){true, n > 1 ? n : 1, 0};
    int64_t inner = 1, mid = 1;
    for (int i = b; i < c->shape.rank; i++)
        inner *= c->shape.dim[i];
    for (int i = a; i < b; i++)
        mid *= c->shape.dim[i];
    return (IndexMap){true, inner, a == 0 ? 0 : mid};
}

IndexMap index_operand(const astitch_graph *g, int32_t c, int k)
{
    const Node *cn = gnode(g, c);
    const Node *xn = gnode(g, goperand(g, c, k));
    switch (astitch_op_class_of(cn->op)) {
    case ASTITCH_CLASS_LIGHT:
    case ASTITCH_CLASS_HEAVY:
        return index_identity();
    case ASTITCH_CLASS_BROADCAST:
        return index_broadcast(cn, xn);
    case ASTITCH_CLASS_SHAPE:
        break;
    default:
        return index_unknown();
    }
    switch (cn->op) {
    case ASTITCH_OP_RESHAPE:
        return index_identity();
    case ASTITCH_OP_TRANSPOSE:
        for (int i = 0; i < cn->shape.rank; i++)
            if (cn->attr.dims[i] != i)
                return index_unknown();
        return index_identity();
    case ASTITCH_OP_SLICE:
        return shape_is_identity_slice(cn, xn) ? index_identity() : index_unknown();
    case ASTITCH_OP_CONCATENATE:
        return cn->nin == 1 ? index_identity() : index_unknown();
    case ASTITCH_OP_GATHER: {
        if (k == 0)
            return index_unknown(); /* the table is read indirectly */
        const Node *table = gnode(g, goperand(g, c, 0));
        int64_t inner = 1;
        for (int i = 1; i < table->shape.rank; i++)
            inner *= table->shape.dim[i];
        return (IndexMap){true, inner > 0 ? inner : 1, 0};
    }
    default:
        return index_unknown();
    }
}

IndexMap index_compose(IndexMap f, IndexMap h)
{
    if (!f.known || !h.known)
        return index_unknown();
    /* h(f(e)) = (((e / f.div) % f.mod) / h.div) % h.mod */
    IndexMap r = {true, f.div * h.div, 0};
    int64_t m;
    if (f.mod == 0) {
        m = 0;
    } else if (f.mod % h.div == 0) {
        m = f.mod / h.div;
    } else {
        return index_unknown();
    }
    if (m == 0)
        r.mod = h.mod;
    else if (h.mod == 0 || h.mod % m == 0)
        r.mod = m;
    else if (m % h.mod == 0)
        r.mod = h.mod;
    else
        return index_unknown();
    return r;
}

/* Canonical form over a domain of n elements: a modulus that never wraps is dropped, a
 * division past the end becomes n. */
static IndexMap index_canon(IndexMap a, int64_t n)
{
    if (n < 1)
        n = 1;
    if (a.div >= n)
        return (IndexMap){true, n, 0};
    if (a.mod && a.mod >= ceil_div(n, a.div))
        a.mod = 0;
    return a;
}

bool index_equal(IndexMap a, IndexMap b, int64_t n)
{
    if (!a.known || !b.known)
        return false;
    a = index_canon(a, n);
    b = index_canon(b, n);
    return a.div == b.div && a.mod == b.mod;
}

void sched_space(const astitch_graph *g, int32_t r, Shape *s, uint32_t *axes)
{
    const Node *n = gnode(g, r);
    if (n->op == ASTITCH_OP_REDUCE) {
        *s = gnode(g, goperand(g, r, 0))->shape;
        *axes = n->attr.axes;
    } else {
        *s = n->shape;
        *axes = 0;
    }
}

static bool axes_trailing(int rank, uint32_t axes)
{
    int k = 0;
    while (k < rank && (axes >> (rank - 1 - k) & 1))
        k++;
    return axes == (k ? (((1u << k) - 1) << (rank - k)) : 0u);
}

static bool axes_leading(int rank, uint32_t axes)
{
    int k = 0;
    while (k < rank && (axes >> k & 1))
        k++;
    return axes == ((1u << k) - 1);
}

/* Which block owns element e of root r: of its value elements (value) or of the space it walks
 * (a reduce walks its operand). */
static IndexMap owner(const astitch_graph *g, const PlanPhase *ph, int32_t r, bool value)
{
    const astitch_mapping *m = &ph->map;
    if (m->split > 1 || m->chunk < 1)
        return index_unknown();
    if (value && plan_reduce_across(g, m, r))
        return index_unknown(); /* every block adds to every element */
    bool is_reduce = gnode(g, r)->op == ASTITCH_OP_REDUCE && m->kind != ASTITCH_MAP_ELEMENTWISE;
    if (m->kind == ASTITCH_MAP_ELEMENTWISE || (is_reduce && value))
        return (IndexMap){true, m->chunk, 0};
    if (axes_trailing(m->rank, m->reduce_axes))
        return (IndexMap){true, m->row_len * m->chunk, 0};
    if (!value && axes_leading(m->rank, m->reduce_axes) && m->rows % m->chunk == 0)
        return (IndexMap){true, m->chunk, m->rows / m->chunk};
    return index_unknown();
}

IndexMap sched_owner(const astitch_graph *g, const PlanPhase *ph, int32_t r)
{
    return owner(g, ph, r, true);
}

/* Exported through sched_regional below. */
static IndexMap space_owner(const astitch_graph *g, const PlanPhase *ph, int32_t r)
{
    return owner(g, ph, r, false);
}

/* True when reader root r (in phase pr) reading src (materialized in phase ps) through f finds
 * every element it needs in its own block. */
bool sched_regional(const astitch_graph *g, const PlanPhase *pr, int32_t r, const PlanPhase *ps,
                    int32_t src, IndexMap f)
{
    IndexMap want = space_owner(g, pr, r);
    IndexMap have = index_compose(f, sched_owner(g, ps, src));
    Shape s;
    uint32_t axes;
    sched_space(g, r, &s, &axes);
    return want.known && have.known && index_equal(want, have, shape_elements(&s));
}

Derive sched_derive(const astitch_graph *g, int32_t dom, int32_t r, int64_t *q)
{
    const Node *d = gnode(g, dom), *n = gnode(g, r);
    *q = 1;
    if (d->op == ASTITCH_OP_REDUCE) {
        const Shape *ds = &gnode(g, goperand(g, dom, 0))->shape;
        if (n->op == ASTITCH_OP_REDUCE) {
            if (!shape_equal(&gnode(g, goperand(g, r, 0))->shape, ds))
                return DERIVE_NONE;
            if (n->attr.axes == d->attr.axes)
                return DERIVE_SAME;
            uint32_t all = (1u << ds->rank) - 1;
            return axes_trailing(ds->rank, d->attr.axes) && n->attr.axes == (all & ~d->attr.axes)
                       ? DERIVE_ACROSS
                       : DERIVE_NONE;
        }
        if (shape_elements(&n->shape) == shape_elements(ds))
            return DERIVE_SAME;
        if (shape_elements(&n->shape) == shape_elements(&d->shape))
            return DERIVE_OUTPUT;
        return DERIVE_NONE;
    }
    if (n->op == ASTITCH_OP_REDUCE)
        return DERIVE_NONE;
    if (shape_elements(&n->shape) == shape_elements(&d->shape))
        return DERIVE_SAME;
    if (n->shape.rank >= d->shape.rank)
        return DERIVE_NONE;
    for (int i = 0; i < n->shape.rank; i++)
        if (n->shape.dim[i] != d->shape.dim[i])
            return DERIVE_NONE;
    int64_t qq = 1;
    for (int i = n->shape.rank; i < d->shape.rank; i++)
        qq *= d->shape.dim[i];
    if (qq < 1)
        return DERIVE_NONE;
    *q = qq;
    return DERIVE_QUOTIENT;
}

bool sched_map_equal(const astitch_mapping *a, const astitch_mapping *b)
{
    if (a->kind != b->kind || a->rank != b->rank || a->reduce_axes != b->reduce_axes ||
        a->rows != b->rows || a->row_len != b->row_len || a->block != b->block ||
        a->grid != b->grid || a->threads_per_row != b->threads_per_row ||
        a->rows_per_block != b->rows_per_block || a->chunk != b->chunk ||
        a->tasks_per_block != b->tasks_per_block || a->split != b->split ||
        a->split_len != b->split_len || a->vector != b->vector)
        return false;
    return memcmp(a->dims, b->dims, (size_t)a->rank * sizeof a->dims[0]) == 0;
}

void edges_pass_end(int32_t *es, int32_t nu, int pass)
{
    if (pass == 0) {
        for (int32_t u = 0; u < nu; u++)
            es[u + 1] += es[u];
        return;
    }
    for (int32_t u = nu; u > 0; u--)
        es[u] = es[u - 1];
    es[0] = 0;
}

void sched_barriers(Planner *pl, PlanKernel *k)
{
    /* the reads of each phase, bucketed by reader phase (counting sort) */
    int32_t np = k->nphase;
    int32_t *start = calloc((size_t)np + 2, sizeof *start);
    int32_t *order = malloc((size_t)(pl->nread ? pl->nread : 1) * sizeof *order);
    k->block_barriers = k->global_barriers = 0;
    if (!start || !order) {
        /* out of memory: the strongest barriers are always safe */
        for (int32_t i = 1; i < np; i++)
            k->phase[i].barrier = ASTITCH_BARRIER_GLOBAL;
        k->global_barriers = np > 1 ? np - 1 : 0;
        free(start);
        free(order);
        return;
    }
    for (int32_t r = 0; r < pl->nread; r++)
        start[k->op[pl->kidx[pl->read[r].root]].phase + 1]++;
    for (int32_t i = 0; i < np; i++)
        start[i + 1] += start[i];
    for (int32_t r = 0; r < pl->nread; r++)
        order[start[k->op[pl->kidx[pl->read[r].root]].phase]++] = r;
    for (int32_t i = np; i > 0; i--)
        start[i] = start[i - 1];
    start[0] = 0;
    int32_t gsat = 0, bsat = 0;
    for (int32_t i = 0; i < np; i++) {
        astitch_barrier need = ASTITCH_BARRIER_NONE;
        for (int32_t j = start[i]; j < start[i + 1]; j++) {
            const Read *rd = &pl->read[order[j]];
            const PlanOp *src = &k->op[pl->kidx[rd->src]];
            if (src->phase >= i)
                continue;
            /* a global root read where the reading block made it (a row's max read by its own
             * row's sum, and by a mean over every row) needs only a block barrier there */
            bool global = src->scheme != ASTITCH_SCHEME_REGIONAL && !rd->own_block;
            if (global && gsat <= src->phase)
                need = ASTITCH_BARRIER_GLOBAL;
            else if (!global && bsat <= src->phase && need == ASTITCH_BARRIER_NONE)
                need = ASTITCH_BARRIER_BLOCK;
        }
        k->phase[i].barrier = need;
        if (need == ASTITCH_BARRIER_GLOBAL) {
            gsat = bsat = i;
            k->global_barriers++;
        } else if (need == ASTITCH_BARRIER_BLOCK) {
            bsat = i;
            k->block_barriers++;
        }
    }
    free(start);
    free(order);
}
