/*
 * tiles.c: tile runs, which consecutive phases of a kernel run tile by tile.
 *
 * The plan's phases run one after the other, each over all of a block's rows. When several
 * reduce phases share one mapping (with, between them, element-wise phases over their rows: a
 * mean from a sum) and only block barriers separate them, the block may instead walk its tiles
 * once and run every phase on each tile, with a block barrier between the phases of a tile. A
 * tile's rows are then still in the L1 or L2 cache when the next phase reads them again,
 * instead of being read from device memory once per phase. That is only right when each phase
 * reads what the earlier phases of the run made at its own rows: checked here, per value read.
 * All buffers a run uses are live across the whole run; memory planning (memory.c) places them
 * so. A run whose first phase is a resident row reduce (map.vector > 0) is marked resident:
 * codegen keeps its rows in registers across its phases (emit_resident.c).
 */
#include <stdlib.h>

#include "passes/passes.h"

/* How an element of the phase's space reaches a node: at the same element (SPACE, the node
 * has the space's shape) or at the element's row (ROW, the node has the kept axes' shape). */
enum { SPACE, ROW, MODES };

typedef struct Check {
    const astitch_graph *g;
    const PlanKernel *k;
    int32_t first, ph;   /* the run so far: phases [first, ph), and the phase checked */
    int32_t target;      /* the one value checked (tiles_read_at_row), or -1: the run's */
    Shape space, kept;   /* the mapping's iteration space and its kept axes */
    uint32_t kept_axes;  /* bit i: space axis i is kept */
    bool *reaches;       /* per node: a value of the run is read on the way down from it */
    signed char *memo;   /* per node and mode: 0 unknown, 1 row-local, -1 not */
} Check;

/* Node n is a value checked: made by a phase of the run before ph (op: the node's kernel op or
 * NULL), so read from where that phase put it; or the one target. */
static bool made_in_run(const Check *c, int32_t n, const PlanOp *op)
{
    if (c->target >= 0)
        return n == c->target;
    return op && op->phase >= c->first && op->phase < c->ph;
}

/* Computed where it is used in phase ph (not loaded). */
static bool computed_here(const Check *c, const PlanOp *op)
{
    return op && (op->phase < 0 || op->phase == c->ph);
}

/* Broadcasts the kept-axes shape to the space, axis for axis: element (row, j) reads row. */
static bool broadcasts_row(const Check *c, int32_t n)
{
    const Node *node = gnode(c->g, n);
    if (node->op != ASTITCH_OP_BROADCAST_IN_DIM || !shape_equal(&node->shape, &c->space) ||
        !shape_equal(&gnode(c->g, goperand(c->g, n, 0))->shape, &c->kept))
        return false;
    for (int i = 0, d = 0; i < c->space.rank; i++)
        if (c->kept_axes >> i & 1 && node->attr.dims[d++] != i)
            return false;
    return true;
}

/* Whether reading node n at an element in mode `mode` touches values of the run only at the
 * element's own row (or own element). In SPACE mode n has the space's element count and is
 * read at the element's linear index: the space's shape, or a reshape of it (a layer's output
 * reshaped back to [batch, seq, hidden]) on the way. */
static bool row_local(Check *c, int32_t n, int mode)
{
    if (!c->reaches[n])
        return true;
    signed char *memo = &c->memo[n * MODES + mode];
    if (*memo)
        return *memo > 0;
    const Node *node = gnode(c->g, n);
    bool ok;
    const PlanOp *op = plan_kernel_op(c->k, n);
    if (made_in_run(c, n, op)) {
        /* a root of the space's shape is stored at its element; a reduce, or a root of a
         * row phase, at its row */
        bool by_row = node->op == ASTITCH_OP_REDUCE ||
                      c->k->phase[op->phase].map.kind == ASTITCH_MAP_ELEMENTWISE;
        ok = mode == SPACE ? shape_equal(&node->shape, &c->space)
                           : by_row && shape_equal(&node->shape, &c->kept);
    } else if (op_is_elementwise(node->op)) {
        ok = true;
        for (int i = 0; ok && i < node->nin; i++)
            ok = row_local(c, goperand(c->g, n, i), mode);
    } else if (mode == SPACE && broadcasts_row(c, n)) {
        ok = row_local(c, goperand(c->g, n, 0), ROW);
    } else if (mode == SPACE && node->op == ASTITCH_OP_RESHAPE) {
        ok = row_local(c, goperand(c->g, n, 0), SPACE); /* the same linear index */
    } else {
        ok = false; /* another index map on the way to a value of the run */
    }
    *memo = ok ? 1 : -1;
    return ok;
}

/* An element-wise phase over the rows of reduce mapping r: its space is r's kept axes, and
 * blocks own the same rows. */
static bool row_phase(const astitch_mapping *m, const astitch_mapping *r, const Shape *kept)
{
    if (m->kind != ASTITCH_MAP_ELEMENTWISE || m->rank != kept->rank || m->rows != r->rows ||
        m->chunk != r->chunk || m->grid != r->grid)
        return false;
    for (int i = 0; i < m->rank; i++)
        if (m->dims[i] != kept->dim[i])
            return false;
    return true;
}

/* The reduce roots of phase p. */
static int reduce_roots(const astitch_graph *g, const PlanPhase *p)
{
    int n = 0;
    for (int i = 0; i < p->nroot; i++)
        n += gnode(g, p->root[i])->op == ASTITCH_OP_REDUCE;
    return n;
}

/* Sets c's space and kept axes from reduce mapping r. */
static void check_space(Check *c, const astitch_mapping *r)
{
    c->space = (Shape){.rank = r->rank};
    c->kept = (Shape){0};
    c->kept_axes = 0;
    for (int i = 0; i < r->rank; i++) {
        c->space.dim[i] = r->dims[i];
        if (!(r->reduce_axes >> i & 1)) {
            c->kept.dim[c->kept.rank++] = r->dims[i];
            c->kept_axes |= 1u << i;
        }
    }
}

/* Marks which of k's ops reach a checked value on the way down from them in phase c->ph (only
 * the kernel's ops can: operands first, ascending ids), and clears their memo. */
static void check_reaches(Check *c)
{
    const astitch_graph *g = c->g;
    const PlanKernel *k = c->k;
    for (int32_t i = 0; i < k->nop; i++) {
        int32_t n = k->op[i].node;
        c->reaches[n] = made_in_run(c, n, &k->op[i]);
        for (int j = 0; computed_here(c, &k->op[i]) && !c->reaches[n] && j < gnode(g, n)->nin; j++)
            c->reaches[n] = c->reaches[goperand(g, n, j)];
        c->memo[n * MODES + SPACE] = c->memo[n * MODES + ROW] = 0;
    }
}

/* Whether root n of phase c->ph reads the checked values at its own rows alone: a reduce root
 * reads its operand at each element of the space; any other root with the space's element
 * count is evaluated at the element's linear index (its own shape's element there); a root of
 * another count, at its own index: no checked value may be on that way. rows: the phase is
 * element-wise over the rows. */
static bool root_local(Check *c, int32_t n, bool rows)
{
    const Node *node = gnode(c->g, n);
    if (rows)
        return shape_equal(&node->shape, &c->kept) ? row_local(c, n, ROW) : !c->reaches[n];
    if (node->op == ASTITCH_OP_REDUCE)
        return row_local(c, goperand(c->g, n, 0), SPACE);
    if (shape_elements(&node->shape) == shape_elements(&c->space))
        return row_local(c, n, SPACE);
    return !c->reaches[n];
}

/* Whether phase ph can join the run [first, ph); the run's first phase is a reduce phase.
 * Unless the run is resident or its rows are at least LONG_ROW long, phases with several
 * reduce roots stay out: with them in one streamed tile loop, layernorm_backward's kernel
 * spilled under its 32-register bound (ptxas), while every run of one reduce per phase among
 * the examples and 120 random graphs fitted. A resident run holds its rows in registers anyway
 * and is planned with the registers for it; a long row left out is read again from device
 * memory by the next phase (a cross-entropy's logits: max and target logit, then sum). */
enum { LONG_ROW = 4096 };
static bool joins_run(Check *c, int32_t first, int32_t ph)
{
    const astitch_graph *g = c->g;
    const PlanKernel *k = c->k;
    const PlanPhase *p = &k->phase[ph];
    const astitch_mapping *r = &k->phase[first].map;
    bool several = reduce_roots(g, &k->phase[first]) > 1 || reduce_roots(g, p) > 1;
    if (r->kind == ASTITCH_MAP_ELEMENTWISE || r->split > 1 ||
        p->barrier != ASTITCH_BARRIER_BLOCK || (several && r->vector == 0 && r->row_len < LONG_ROW))
        return false;
    c->first = first;
    c->ph = ph;
    c->target = -1;
    check_space(c, r);
    bool rows = row_phase(&p->map, r, &c->kept);
    if (!rows && !sched_map_equal(&p->map, r))
        return false;
    check_reaches(c);
    bool ok = true;
    for (int i = 0; ok && i < p->nroot; i++)
        ok = root_local(c, p->root[i], rows);
    return ok;
}

bool tiles_read_at_row(const astitch_graph *g, const PlanKernel *k, int32_t pr, int32_t r,
                       int32_t ps, int32_t src, bool *reaches, signed char *memo)
{
    const astitch_mapping *mr = &k->phase[pr].map, *ms = &k->phase[ps].map;
    bool reader_reduces = mr->kind != ASTITCH_MAP_ELEMENTWISE;
    const astitch_mapping *red = reader_reduces ? mr : ms;
    if (red->kind == ASTITCH_MAP_ELEMENTWISE || red->split > 1 || ps >= pr)
        return false;
    Check c = {.g = g, .k = k, .first = ps, .ph = pr, .target = src, .reaches = reaches,
               .memo = memo};
    check_space(&c, red);
    /* a value of the rows alone: a block's part of a value of the space is not contiguous
     * under a column mapping, where its shared buffer would need it so */
    if (!shape_equal(&gnode(g, src)->shape, &c.kept) ||
        shape_elements(&c.kept) >= shape_elements(&c.space))
        return false;
    /* the other phase: the same mapping, or element-wise over its rows */
    const astitch_mapping *other = reader_reduces ? ms : mr;
    bool rows = row_phase(other, red, &c.kept);
    if (!rows && !sched_map_equal(other, red))
        return false;
    check_reaches(&c);
    return root_local(&c, r, rows && !reader_reduces);
}

/* Marks the phases of every run whose first phase is a resident row reduce (map.vector > 0,
 * not split): the run keeps its rows in registers. */
static void mark_resident(PlanKernel *k)
{
    for (int32_t ph = 0; ph < k->nphase; ph++) {
        const astitch_mapping *m = &k->phase[k->phase[ph].run_first].map;
        k->phase[ph].resident = m->kind == ASTITCH_MAP_ROW_REDUCE && m->vector > 0 && m->split <= 1;
    }
}

void pass_tiles(const astitch_graph *g, PlanKernel *k)
{
    /* per node, zero outside the kernel's ops throughout; reset per check for its ops */
    Check c = {.g = g, .k = k};
    c.reaches = calloc((size_t)g->nnode, sizeof *c.reaches);
    c.memo = calloc((size_t)g->nnode * MODES, sizeof *c.memo);
    bool can = c.reaches && c.memo; /* out of memory: every phase runs alone */
    for (int32_t first = 0, ph; first < k->nphase; first = ph) {
        k->phase[first].run_first = first;
        for (ph = first + 1; ph < k->nphase && can && joins_run(&c, first, ph); ph++)
            k->phase[ph].run_first = first;
    }
    free(c.reaches);
    free(c.memo);
    mark_resident(k);
}

void pass_tiles_cut(PlanKernel *k)
{
    int32_t cut = -1; /* a run cut at a phase before: its later phases run alone */
    for (int32_t ph = 0; ph < k->nphase; ph++) {
        PlanPhase *p = &k->phase[ph];
        if (p->run_first != ph && (p->run_first == cut || p->barrier != ASTITCH_BARRIER_BLOCK)) {
            cut = p->run_first;
            p->run_first = ph;
        }
    }
    mark_resident(k);
}
