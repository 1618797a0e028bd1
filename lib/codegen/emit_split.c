/* emit_split.c: the cross-block combine of a reduction whose rows are split across blocks
 * (mapping.split > 1). Either every split block adds its partial result into the destination
 * with an atomic (f32 sum/max/min, i32 sum: the destination was set to the identity before the
 * launch), or, deterministically, every block stores its partial into the PARTIAL buffer,
 * counts itself in on the row's arrival counter, and the last block to arrive folds the row's
 * partials in split order and stores the result (the threadfence-reduction pattern; the
 * counters were zeroed before the launch). */
#define ASTITCH_EMIT_INTERNAL
#include "codegen.h"

void emit_atomic_combine(Emit *e, int32_t root, LLVMValueRef at, LLVMValueRef v)
{
    const Node *node = gnode(e->g, root);
    astitch_reduce_kind kind = node->attr.reduce;
    PrimId prim = PRIM_COUNT;
    if (node->dtype == ASTITCH_F32)
        prim = kind == ASTITCH_REDUCE_SUM ? PRIM_ATOMIC_ADD_F32
             : kind == ASTITCH_REDUCE_MAX ? PRIM_ATOMIC_MAX_F32
             : kind == ASTITCH_REDUCE_MIN ? PRIM_ATOMIC_MIN_F32 : PRIM_COUNT;
    else if (node->dtype == ASTITCH_I32 && kind == ASTITCH_REDUCE_SUM)
        prim = PRIM_ATOMIC_ADD_I32;
    if (prim == PRIM_COUNT) {
        ev_fail_node(e, root, LLVMTypeOf(v), ASTITCH_ERR_INTERNAL,
                     "%s: reduce node %d '%s' (%s of %s) is planned with an atomic combine, which it "
                     "has not", e->k->name, root, node->name, astitch_reduce_name(kind),
                     astitch_dtype_name(node->dtype));
        return;
    }
    prim_call(e->b, e->m, prim, (LLVMValueRef[]){at, v}, 2);
}

/* Adds acc into element `row` of every destination of root (its scratch buffer, its output). */
static void store_atomic(Emit *e, int32_t root, LLVMValueRef row, LLVMValueRef acc)
{
    const Node *node = gnode(e->g, root);
    const PlanOp *op = plan_kernel_op(e->k, root);
    LLVMTypeRef mt = node->dtype == ASTITCH_F32 ? LLVMFloatTypeInContext(e->c)
                                                 : LLVMInt32TypeInContext(e->c);
    LLVMValueRef dests[2];
    int nd = 0;
    if (op->buf >= 0)
        dests[nd++] = ev_buffer_base(e, &e->k->buf[op->buf]);
    if (op->output && e->tensor[root])
        dests[nd++] = e->tensor[root];
    for (int d = 0; d < nd && e->status == ASTITCH_OK; d++)
        emit_atomic_combine(e, root, LLVMBuildGEP2(e->b, mt, dests[d], &row, 1, ""), acc);
}

/* Loads partial `slot` of buffer pb (volatile: other blocks wrote it) in the register type of
 * the reduce's dtype t. */
static LLVMValueRef load_partial(Emit *e, const PlanBuffer *pb, LLVMValueRef base,
                                 LLVMValueRef slot, astitch_dtype t)
{
    LLVMTypeRef mt = ev_type(e, pb->dtype);
    LLVMValueRef p = LLVMBuildGEP2(e->b, mt, base, &slot, 1, "");
    LLVMValueRef v = LLVMBuildLoad2(e->b, mt, p, "partial");
    LLVMSetVolatile(v, 1);
    if (t == ASTITCH_BOOL)
        return LLVMBuildICmp(e->b, LLVMIntNE, v, LLVMConstInt(mt, 0, 0), "");
    return v;
}

static void store_ordered(Emit *e, const astitch_mapping *m, int32_t root, LLVMValueRef row,
                          LLVMValueRef acc)
{
    const Node *node = gnode(e->g, root);
    const PlanBuffer *pb = plan_kernel_buffer(e->k, ASTITCH_BUFFER_PARTIAL, root);
    if (!pb) {
        ev_fail_node(e, root, LLVMTypeOf(acc), ASTITCH_ERR_INTERNAL,
                     "%s: split reduce node %d '%s' has no PARTIAL buffer", e->k->name, root,
                     node->name);
        return;
    }
    LLVMValueRef base = ev_buffer_base(e, pb);
    LLVMValueRef first = LLVMBuildMul(e->b, row, ev_int(e, m->split), "");
    LLVMValueRef part = LLVMBuildURem(e->b, e->ctaid, ev_int(e, m->split), "");
    LLVMValueRef mine = node->dtype == ASTITCH_BOOL
                            ? LLVMBuildZExt(e->b, acc, ev_type(e, pb->dtype), "") : acc;
    LLVMTypeRef mt = ev_type(e, pb->dtype), i32 = LLVMInt32TypeInContext(e->c);
    LLVMValueRef at = LLVMBuildAdd(e->b, first, part, "");
    LLVMBuildStore(e->b, mine, LLVMBuildGEP2(e->b, mt, base, &at, 1, ""));
    prim_call(e->b, e->m, PRIM_FENCE_GPU, NULL, 0); /* the partial before the arrival */
    LLVMValueRef off = LLVMConstInt(LLVMInt64TypeInContext(e->c),
                                    (unsigned long long)plan_partial_counters(pb), 0);
    LLVMValueRef counters = LLVMBuildGEP2(e->b, LLVMInt8TypeInContext(e->c), base, &off, 1, "");
    LLVMValueRef counter = LLVMBuildGEP2(e->b, i32, counters, &row, 1, "");
    LLVMValueRef before = prim_call(e->b, e->m, PRIM_ATOMIC_ADD_I32,
                                    (LLVMValueRef[]){counter, LLVMConstInt(i32, 1, 0)}, 2);
    LLVMBasicBlockRef merge = if_begin(e, LLVMBuildICmp(e->b, LLVMIntEQ, before,
                                                        LLVMConstInt(i32, (unsigned)(m->split - 1), 0), ""));
    prim_call(e->b, e->m, PRIM_FENCE_GPU, NULL, 0); /* the others' partials after their arrival */
    Loop fold;
    LLVMValueRef init[1] = {ev_reduce_identity(e, node->attr.reduce, node->dtype)}, cur[1], next[1];
    loop_begin(e, &fold, ev_int(e, 0), ev_int(e, m->split), init, 1, cur);
    LLVMValueRef v = load_partial(e, pb, base, LLVMBuildAdd(e->b, first, fold.iv, ""), node->dtype);
    next[0] = ev_reduce_combine(e, node->attr.reduce, node->dtype, cur[0], v);
    loop_end(e, &fold, ev_int(e, 1), next);
    Index out = {.shape = &node->shape, .lin = row};
    ev_store_root(e, root, &out, fold.carried[0]);
    if_end(e, merge);
}

void emit_split_store(Emit *e, const astitch_mapping *m, int32_t root, LLVMValueRef row,
                      LLVMValueRef acc)
{
    if (plan_kernel_op(e->k, root)->zero_init)
        store_atomic(e, root, row, acc);
    else
        store_ordered(e, m, root, row, acc);
}
