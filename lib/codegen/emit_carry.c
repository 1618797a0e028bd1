/* emit_carry.c: values carried across a global barrier in shared memory (plan option carry;
 * docs/codegen.md, *Carried values*; the planner's choice: lib/passes/carry.c). Phase
 * carry.from stores, at each of a thread's first `slots` iterations of its walk, the values of
 * the carried nodes (those with a CARRY buffer) at the iteration's elements; phase carry.to,
 * whose thread walks the same elements (the same mapping, the same blocks: the kernel is
 * persistent), puts them into the element or run cache before computing its roots, so that
 * nothing below them is read again. The walk (emit_reduce.c) emits the iterations kept and the
 * others as loops of their own, so the choice costs no branch per iteration. */
#define ASTITCH_EMIT_INTERNAL
#include "codegen.h"

int emit_carry_role(const Emit *e)
{
    const PlanCarry *c = &e->k->carry;
    if (c->slots < 1 || e->opt.as_parts)
        return CARRY_NONE;
    return e->phase == c->from ? CARRY_STORE : e->phase == c->to ? CARRY_LOAD : CARRY_NONE;
}

/* Element index, in a CARRY buffer, of the first of the v elements of this thread's slot for
 * the iteration at reduced index j. */
static LLVMValueRef slot_element(Emit *e, LLVMValueRef j, int v)
{
    LLVMValueRef s = LLVMBuildExactUDiv(e->b, LLVMBuildSub(e->b, j, e->carry_start, ""),
                                        ev_int(e, e->carry_step), "slot");
    LLVMValueRef t = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, s, ev_int(e, e->k->block), ""),
                                  e->tid, "");
    return LLVMBuildMul(e->b, t, ev_int(e, v), "");
}

/* False (after recording the failure) when the walk's run differs from the plan's. */
static bool run_planned(Emit *e, int v)
{
    if (v == e->k->carry.vector)
        return true;
    ev_fail(e, e->ix, ASTITCH_ERR_INTERNAL,
            "%s: phase %d walks runs of %d elements, its carried values were planned for %d",
            e->k->name, e->phase, v, (int)e->k->carry.vector);
    return false;
}

/* The carried values at the iteration at reduced index j: stored from the caches (ix: the
 * element or run) or, without ix, loaded into them. */
static void carry_values(Emit *e, LLVMValueRef j, Index *ix, int v)
{
    if (!run_planned(e, v))
        return;
    LLVMValueRef at = slot_element(e, j, v), val[VECTOR_MAX];
    for (int32_t b = 0; b < e->k->nbuf; b++) {
        const PlanBuffer *buf = &e->k->buf[b];
        if (buf->kind != ASTITCH_BUFFER_CARRY)
            continue;
        ev_check_shared(e, buf, LLVMBuildAdd(e->b, at, ev_int(e, v - 1), ""));
        LLVMValueRef base = ev_buffer_base(e, buf);
        if (ix && v == 1) {
            ev_store(e, base, buf->dtype, at, ev_value(e, buf->node, ix));
        } else if (ix) {
            ev_vector(e, buf->node, ix, v, val);
            ev_store_vector(e, base, buf->dtype, at, v, val);
        } else if (v == 1) {
            e->cache[buf->node] = ev_load(e, base, buf->dtype, at);
        } else {
            ev_load_vector(e, base, buf->dtype, at, v, val);
            for (int u = 0; u < v; u++)
                e->vcache[(size_t)buf->node * VECTOR_MAX + (size_t)u] = val[u];
        }
    }
}

void emit_carry_store(Emit *e, LLVMValueRef j, Index *ix, int v) { carry_values(e, j, ix, v); }

void emit_carry_seed(Emit *e, LLVMValueRef j, int v) { carry_values(e, j, NULL, v); }
