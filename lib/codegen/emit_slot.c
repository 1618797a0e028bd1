/* emit_slot.c: a resident lane's slot computed as one run (emit_vector.c) where element by
 * element would cost a branch, index arithmetic or a scalar load per element.
 *
 * A resident run (emit_resident.c) computes its values element by element through ev_value,
 * and LLVM's load-store vectorizer merges the scalar loads of a slot back into vector loads
 * where it can prove them adjacent. Through a concatenate it cannot: each element selects its
 * operand by its own index (divisions by the shape's dimensions, a branch per element), so the
 * embedded tokens of a ViT ([CLS] concatenated in front of the patches) were read with 96
 * scalar loads and 83 divisions per lane. Here such a node is computed once per slot, by the
 * vector walk at the slot's first element, and its values go into the caches of the slot's
 * elements, where ev_value finds them.
 *
 * Only nodes whose whole cone the vector walk computes exactly as ev_value would, without the
 * run's registers, qualify: constants; kernel inputs that the run does not load itself (their
 * element count differs from the space's); ops of the phase being emitted, not materialized in
 * a buffer, that are element-wise or move data (broadcast, reshape, slice, transpose,
 * concatenate); and only those with a concatenate in the cone, or a broadcast of a kernel input
 * (an attention mask over the heads, a norm's weight over the rows): element by element, LLVM
 * often cannot prove a broadcast's reads adjacent and keeps them scalar, where the walk reads
 * each run of a slot with one vector load. A row's reduction, a value of an earlier phase of
 * the run or anything read from a buffer keeps the element walk. */
#define ASTITCH_EMIT_INTERNAL
#include <stdlib.h>

#include "codegen.h"
#include "resident.h"

/* Ordered: a node's kind is the largest of its operands' and its own. SLOT_INPUT: the cone
 * reads a kernel input; SLOT_WALK: the cone has a concatenate or a broadcast of such an input,
 * which the slot computes as a run. 0: not yet known. */
enum { SLOT_NO = 1, SLOT_PLAIN = 2, SLOT_INPUT = 3, SLOT_WALK = 4 };

static bool moves_data(astitch_op op)
{
    return op == ASTITCH_OP_BROADCAST_IN_DIM || op == ASTITCH_OP_RESHAPE ||
           op == ASTITCH_OP_SLICE || op == ASTITCH_OP_TRANSPOSE || op == ASTITCH_OP_CONCATENATE;
}

/* r->slot_kind for phase e->phase, every node in id order (operands come first). */
static void classify(Emit *e, Resident *r)
{
    int64_t space = shape_elements(&r->space);
    for (int32_t n = 0; n < e->g->nnode; n++) {
        const Node *node = gnode(e->g, n);
        const PlanOp *op = plan_kernel_op(e->k, n);
        signed char kind = SLOT_NO;
        if (node->op == ASTITCH_OP_CONSTANT) {
            kind = SLOT_PLAIN;
        } else if (!op) {
            if (e->tensor[n] && shape_elements(&node->shape) != space)
                kind = SLOT_INPUT;
        } else if ((op->phase < 0 || op->phase == e->phase) && op->buf < 0 &&
                   ((op_is_elementwise(node->op) && node->nin <= 3) || moves_data(node->op))) {
            kind = node->op == ASTITCH_OP_CONCATENATE ? SLOT_WALK : SLOT_PLAIN;
            for (int i = 0; i < node->nin && kind != SLOT_NO; i++) {
                signed char x = r->slot_kind[goperand(e->g, n, i)];
                kind = x == SLOT_NO ? SLOT_NO : (x > kind ? x : kind);
            }
            if (kind == SLOT_INPUT && node->op == ASTITCH_OP_BROADCAST_IN_DIM)
                kind = SLOT_WALK;
        }
        r->slot_kind[n] = kind;
    }
    r->slot_phase = e->phase;
}

LLVMValueRef resident_slot_value(Emit *e, int32_t n)
{
    Resident *r = e->resident;
    if (!r || r->in_slot || r->vector < 2 || e->branch_depth > 0 || e->cache_ix != &r->ix[r->at])
        return NULL;
    if (r->slot_phase != e->phase)
        classify(e, r);
    const Node *node = gnode(e->g, n);
    int v = r->vector, last = node->shape.rank - 1;
    if (r->slot_kind[n] != SLOT_WALK || last < 0 || node->shape.dim[last] % v)
        return NULL;
    int s = r->at / v;
    Index run = shape_equal(&node->shape, &r->space)
                    ? r->ix[s * v]
                    : (Index){.shape = &node->shape, .lin = r->ix[s * v].lin};
    LLVMValueRef *rowval = e->rowval;
    const Index *cache_ix = e->cache_ix; /* ev_vector_begin clears it */
    int32_t run_end = e->run_end;
    r->in_slot = true;
    ev_vector_begin(e, &run);
    /* what the slot's elements already hold is the walk's too (x before x * x) */
    size_t nnode = (size_t)e->g->nnode;
    LLVMValueRef *slot = &r->cache[(size_t)(s * v) * nnode];
    for (size_t m = 0; m < nnode; m++) {
        bool all = true;
        for (int u = 0; u < v && all; u++)
            all = slot[(size_t)u * nnode + m] != NULL;
        for (int u = 0; u < v && all; u++)
            e->vcache[m * VECTOR_MAX + (size_t)u] = slot[(size_t)u * nnode + m];
    }
    e->rowval = NULL; /* the cone reads no row value: classify */
    e->run_end = 0;   /* its tensors are kernel inputs, which the walk may load as vectors */
    LLVMValueRef vals[VECTOR_MAX];
    ev_vector(e, n, &run, v, vals);
    /* the walk's runs at the slot's own elements (its run cache) are theirs too: the operands
     * through a reshape of the space (a ViT's embedded tokens under their flattened output) */
    for (size_t m = 0; m < nnode; m++)
        for (int u = 0; u < v && e->vcache[m * VECTOR_MAX]; u++)
            slot[(size_t)u * nnode + m] = e->vcache[m * VECTOR_MAX + (size_t)u];
    e->vcache_ix = NULL;
    e->run_end = run_end;
    e->rowval = rowval;
    e->cache_ix = cache_ix;
    r->in_slot = false;
    for (int u = 0; u < v; u++)
        slot[(size_t)u * nnode + (size_t)n] = vals[u];
    return vals[r->at % v];
}
