/* emit_transpose.c: the one element-wise phase of a kernel whose transpose is walked in square
 * tiles (PlanTile, lib/passes/transpose.c; docs/codegen.md, *Transposed tiles*).
 *
 * Block b takes tile b: size x size elements of the space over A, the run of axes
 * tile.axis_from..tile.axis taken as one axis, and L, the run tile.inner_from..rank - 1, at one
 * index of every other axis; an element's axes in a run come from its index in the run by
 * division. A thread takes `pair` adjacent elements at a time (2 for 2-byte values when the
 * operand's innermost axis and L have an even length, so that each access moves 4 bytes; else
 * 1), and is (x, y) = (t % w, t / w) in rows of w = size / pair threads.
 * Stage: for each k, the thread evaluates the transpose's operand at the tile elements (A = a0
 * + pair * x + j, L = l0 + y + k * rows), consecutive threads at consecutive addresses of the
 * operand (whose innermost axis is A), and stores them at slots (y + k * rows) * (size + 1) +
 * pair * x + j of shared memory. After a block barrier, for each k, the thread takes the
 * elements (A = a0 + y + k * rows, L = l0 + pair * x + j): the transpose's value there is slot
 * (pair * x + j) * (size + 1) + y + k * rows (rows of size + 1 slots spread consecutive threads
 * over the banks), set as the transpose's cached value at that element, and the roots are
 * evaluated there and stored, pair elements at once, consecutive threads at consecutive output
 * addresses. Elements past the space's edge are computed at the edge (in bounds; a pair's
 * start is clamped to an even index, so both its elements stay adjacent) and not stored. */
#define ASTITCH_EMIT_INTERNAL
#include <stdlib.h>

#include "codegen.h"

static LLVMValueRef clamp(Emit *e, LLVMValueRef v, int64_t most)
{
    LLVMValueRef m = ev_int(e, most);
    return LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, v, m, ""), m, v, "");
}

/* Sets the axes from..to of ix from v, an index of their run taken as one axis. */
static void set_run(Emit *e, Index *ix, int from, int to, LLVMValueRef v)
{
    for (int i = to; i > from; i--) {
        LLVMValueRef d = ev_int(e, ix->shape->dim[i]);
        ix->axis[i] = LLVMBuildURem(e->b, v, d, "");
        v = LLVMBuildUDiv(e->b, v, d, "");
    }
    ix->axis[from] = v;
}

/* The tile's element (A = a, L = l), both in bounds, at the other axes `other`. */
static Index tile_element(Emit *e, const Shape *space, const PlanTile *t,
                          const LLVMValueRef *other, LLVMValueRef a, LLVMValueRef l)
{
    Index ix = {.shape = space, .has_axes = true};
    for (int i = 0; i < space->rank; i++)
        ix.axis[i] = other[i];
    set_run(e, &ix, t->axis_from, t->axis, a);
    set_run(e, &ix, t->inner_from, space->rank - 1, l);
    return ix;
}

/* Adjacent elements a thread takes at a time: 2 for 2-byte values when the operand's innermost
 * axis and the run L both have an even length (a pair never straddles either, and starts at an
 * even element), else 1. */
static int tile_pair(const Emit *e, const Node *tr, const Shape *space, int64_t dl)
{
    return astitch_dtype_size(tr->dtype) == 2 && space->dim[e->k->tile.axis] % 2 == 0 &&
                   dl % 2 == 0 && e->k->tile.size % 2 == 0
               ? 2
               : 1;
}

static LLVMValueRef slot_ptr(Emit *e, LLVMTypeRef ty, LLVMValueRef slot)
{
    return LLVMBuildGEP2(e->b, ty, e->shared, &slot, 1, "tile");
}

void emit_transposed(Emit *e, const PlanPhase *p)
{
    const PlanTile *t = &e->k->tile;
    const Node *tr = gnode(e->g, t->node);
    const Node *src = gnode(e->g, goperand(e->g, t->node, 0));
    Shape space = plan_mapping_space(&p->map);
    int64_t da = plan_tile_extent(t, &space, false), dl = plan_tile_extent(t, &space, true);
    int pair = tile_pair(e, tr, &space, dl);
    int64_t size = t->size, width = size / pair, rows = p->map.block / width, per = size / rows;
    int64_t ta = (da + size - 1) / size, tl = (dl + size - 1) / size;
    LLVMTypeRef ty = ev_type(e, tr->dtype);
    /* the block's tile: L's tiles fastest, then A's, then the other axes, row-major */
    LLVMValueRef b = e->ctaid;
    LLVMValueRef l0 = LLVMBuildMul(e->b, LLVMBuildURem(e->b, b, ev_int(e, tl), ""),
                                   ev_int(e, size), "l0");
    b = LLVMBuildUDiv(e->b, b, ev_int(e, tl), "");
    LLVMValueRef a0 = LLVMBuildMul(e->b, LLVMBuildURem(e->b, b, ev_int(e, ta), ""),
                                   ev_int(e, size), "a0");
    b = LLVMBuildUDiv(e->b, b, ev_int(e, ta), "");
    LLVMValueRef other[MAX_RANK];
    for (int i = space.rank - 1; i >= 0; i--) {
        if (i >= t->inner_from || (i >= t->axis_from && i <= t->axis)) {
            other[i] = ev_int(e, 0);
            continue;
        }
        other[i] = LLVMBuildURem(e->b, b, ev_int(e, space.dim[i]), "");
        b = LLVMBuildUDiv(e->b, b, ev_int(e, space.dim[i]), "");
    }
    LLVMValueRef x = LLVMBuildURem(e->b, e->tid, ev_int(e, width), "x");
    LLVMValueRef y = LLVMBuildUDiv(e->b, e->tid, ev_int(e, width), "y");
    LLVMValueRef px = LLVMBuildMul(e->b, x, ev_int(e, pair), "px");
    LLVMValueRef pitch = ev_int(e, size + 1);
    for (int64_t k = 0; k < per; k++) { /* stage: the operand in its own order */
        LLVMValueRef yk = LLVMBuildAdd(e->b, y, ev_int(e, k * rows), "");
        Index ix = tile_element(e, &space, t, other,
                                clamp(e, LLVMBuildAdd(e->b, a0, px, ""), da - pair),
                                clamp(e, LLVMBuildAdd(e->b, l0, yk, ""), dl - 1));
        Index six; /* A is the operand's innermost axis: a pair is a run there */
        ev_transpose_source(e, tr, &src->shape, &ix, &six);
        LLVMValueRef v[2];
        if (pair > 1) {
            ev_vector_begin(e, &six);
            ev_vector(e, goperand(e->g, t->node, 0), &six, pair, v);
        } else {
            ev_begin_element(e, &six);
            v[0] = ev_value(e, goperand(e->g, t->node, 0), &six);
        }
        for (int j = 0; j < pair; j++) {
            LLVMValueRef slot = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, yk, pitch, ""),
                                             LLVMBuildAdd(e->b, px, ev_int(e, j), ""), "");
            LLVMBuildStore(e->b, v[j], slot_ptr(e, ty, slot));
        }
    }
    prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
    LLVMValueRef *val = malloc((size_t)(p->nroot + 1) * (size_t)pair * sizeof *val);
    if (!val) {
        ev_fail(e, e->ix, ASTITCH_ERR_MEMORY, "out of memory");
        return;
    }
    for (int64_t k = 0; k < per; k++) { /* the roots in the space's order */
        LLVMValueRef yk = LLVMBuildAdd(e->b, y, ev_int(e, k * rows), "");
        LLVMValueRef a = LLVMBuildAdd(e->b, a0, yk, ""), l = LLVMBuildAdd(e->b, l0, px, "");
        LLVMValueRef ok = LLVMBuildAnd(
            e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, ev_int(e, da), ""),
            LLVMBuildICmp(e->b, LLVMIntSLT, l, ev_int(e, dl), ""), "");
        LLVMValueRef lin[2];
        for (int j = 0; j < pair; j++) { /* every value before any store */
            Index ix = tile_element(e, &space, t, other, clamp(e, a, da - 1),
                                    LLVMBuildAdd(e->b, clamp(e, l, dl - pair), ev_int(e, j), ""));
            lin[j] = ev_lin(e, &ix);
            ev_begin_element(e, &ix);
            LLVMValueRef slot = LLVMBuildAdd(
                e->b, LLVMBuildMul(e->b, LLVMBuildAdd(e->b, px, ev_int(e, j), ""), pitch, ""), yk,
                "");
            e->cache[t->node] = LLVMBuildLoad2(e->b, ty, slot_ptr(e, ty, slot), "");
            for (int r = 0; r < p->nroot; r++)
                val[r * pair + j] = ev_value(e, p->root[r], &ix);
        }
        LLVMBasicBlockRef merge = if_begin(e, ok);
        for (int r = 0; r < p->nroot; r++)
            emit_run_store(e, p->root[r], &space, lin, pair, &val[r * pair]);
        if_end(e, merge);
    }
    free(val);
}
