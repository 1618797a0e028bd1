/* emit_transpose.c: the one element-wise phase of a kernel whose transpose is walked in square
 * tiles (PlanTile, lib/passes/transpose.c; docs/codegen.md, *Transposed tiles*).
 *
 * Block b takes tile b: size x size elements of the space over axis A = tile.axis and the
 * innermost axis L, at one index of every other axis. Thread t is (x, y) = (t % size,
 * t / size) in rows of `size` threads. Stage: for each k, the thread evaluates the transpose's
 * operand at the tile element (A = a0 + x, L = l0 + y + k * rows), consecutive threads at
 * consecutive addresses of the operand (whose innermost axis is A), and stores it at slot
 * (y + k * rows) * (size + 1) + x of shared memory. After a block barrier, for each k, the
 * thread takes the element (A = a0 + y + k * rows, L = l0 + x): the transpose's value there is
 * slot x * (size + 1) + y + k * rows (consecutive threads in consecutive banks: the row of
 * size + 1 slots), set as the transpose's cached value at that element, and the roots are
 * evaluated and stored there, consecutive threads at consecutive output addresses. Elements
 * past the space's edge are computed at the edge (in bounds) and not stored. */
#define ASTITCH_EMIT_INTERNAL
#include <stdlib.h>

#include "codegen.h"

/* The tile's element (A = a, L = l) at the other axes `other`, clamped into the space: its
 * index with axes set. */
static Index tile_element(Emit *e, const Shape *space, int axis, const LLVMValueRef *other,
                          LLVMValueRef a, LLVMValueRef l)
{
    int last = space->rank - 1;
    Index ix = {.shape = space, .has_axes = true};
    for (int i = 0; i < space->rank; i++)
        ix.axis[i] = other[i];
    LLVMValueRef amax = ev_int(e, space->dim[axis] - 1), lmax = ev_int(e, space->dim[last] - 1);
    ix.axis[axis] = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, a, amax, ""), amax, a,
                                    "");
    ix.axis[last] = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, l, lmax, ""), lmax, l,
                                    "");
    return ix;
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
    int last = space.rank - 1, axis = t->axis;
    int64_t size = t->size, rows = p->map.block / size, per = size / rows;
    int64_t ta = (space.dim[axis] + size - 1) / size, tl = (space.dim[last] + size - 1) / size;
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
    for (int i = last; i >= 0; i--) {
        if (i == axis || i == last) {
            other[i] = ev_int(e, 0);
            continue;
        }
        other[i] = LLVMBuildURem(e->b, b, ev_int(e, space.dim[i]), "");
        b = LLVMBuildUDiv(e->b, b, ev_int(e, space.dim[i]), "");
    }
    LLVMValueRef x = LLVMBuildURem(e->b, e->tid, ev_int(e, size), "x");
    LLVMValueRef y = LLVMBuildUDiv(e->b, e->tid, ev_int(e, size), "y");
    LLVMValueRef pitch = ev_int(e, size + 1);
    for (int64_t k = 0; k < per; k++) { /* stage: the operand in its own order */
        LLVMValueRef yk = LLVMBuildAdd(e->b, y, ev_int(e, k * rows), "");
        Index ix = tile_element(e, &space, axis, other, LLVMBuildAdd(e->b, a0, x, ""),
                                LLVMBuildAdd(e->b, l0, yk, ""));
        Index six;
        ev_transpose_source(e, tr, &src->shape, &ix, &six);
        ev_begin_element(e, &six);
        LLVMValueRef v = ev_value(e, goperand(e->g, t->node, 0), &six);
        LLVMValueRef slot = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, yk, pitch, ""), x, "");
        LLVMBuildStore(e->b, v, slot_ptr(e, ty, slot));
    }
    prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
    LLVMValueRef *val = malloc(((size_t)p->nroot + 1) * sizeof *val);
    if (!val) {
        ev_fail(e, e->ix, ASTITCH_ERR_MEMORY, "out of memory");
        return;
    }
    for (int64_t k = 0; k < per; k++) { /* the roots in the space's order */
        LLVMValueRef yk = LLVMBuildAdd(e->b, y, ev_int(e, k * rows), "");
        LLVMValueRef a = LLVMBuildAdd(e->b, a0, yk, ""), l = LLVMBuildAdd(e->b, l0, x, "");
        LLVMValueRef ok = LLVMBuildAnd(
            e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, ev_int(e, space.dim[axis]), ""),
            LLVMBuildICmp(e->b, LLVMIntSLT, l, ev_int(e, space.dim[last]), ""), "");
        Index ix = tile_element(e, &space, axis, other, a, l);
        LLVMValueRef lin = ev_lin(e, &ix);
        ev_begin_element(e, &ix);
        LLVMValueRef slot = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, x, pitch, ""), yk, "");
        e->cache[t->node] = LLVMBuildLoad2(e->b, ty, slot_ptr(e, ty, slot), "");
        for (int r = 0; r < p->nroot; r++)
            val[r] = ev_value(e, p->root[r], &ix);
        LLVMBasicBlockRef merge = if_begin(e, ok);
        for (int r = 0; r < p->nroot; r++)
            emit_run_store(e, p->root[r], &space, &lin, 1, &val[r]);
        if_end(e, merge);
    }
    free(val);
}
