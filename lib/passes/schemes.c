/*
 * schemes.c: scheme finalization (paper 4.3 step 3): the passive block-locality check.
 *
 * A root read by no other phase is independent (it is only written for outside readers) or,
 * when a root of its own phase reads it at the same element, local. A root read by later
 * phases is regional when every such read finds its elements in the reading block's own part
 * of the root (sched_regional: the reader's block ownership equals the producer's through the
 * read's index map; or tiles_read_at_row: both phases own the rows of one reduce mapping and
 * the read is at the reader's own row or element, which also covers reduces over middle axes),
 * and global otherwise. A split reduce is always global: its split blocks
 * combine their results across blocks in global memory, read or not. A reduce summed across
 * the rows of a row mapping (across.c) is read by nothing in its kernel; its blocks add theirs
 * into the destination by atomics (zero_init) unless the mapping has one block. Each read
 * that these checks place in the reading block is marked (Read.own_block), also when its root
 * is global because of another read. Barriers follow from the schemes and those marks: the
 * pipeline's next step (sched_barriers).
 */
#include <stdlib.h>

#include "passes/passes.h"

enum { READ_SAME = 1, READ_LATER = 2, NOT_LOCAL = 4 };

/* Whether node n of phase ph is a reduce whose rows are split across blocks (always global). */
static bool split_reduce(const astitch_graph *g, const PlanPhase *ph, int32_t n)
{
    return ph->map.split > 1 && gnode(g, n)->op == ASTITCH_OP_REDUCE;
}

bool plan_split_atomic(const Node *reduce)
{
    astitch_reduce_kind k = reduce->attr.reduce;
    if (reduce->dtype == ASTITCH_F32)
        return k == ASTITCH_REDUCE_SUM || k == ASTITCH_REDUCE_MAX || k == ASTITCH_REDUCE_MIN;
    return reduce->dtype == ASTITCH_I32 && k == ASTITCH_REDUCE_SUM;
}

astitch_status pass_schemes(Planner *pl, PlanKernel *k)
{
    const astitch_graph *g = pl->g;
    uint8_t *flags = calloc((size_t)(k->nop ? k->nop : 1), 1);
    bool *reaches = calloc((size_t)g->nnode, sizeof *reaches);
    signed char *memo = calloc((size_t)g->nnode * 2, sizeof *memo);
    if (!flags || !reaches || !memo) {
        free(flags);
        free(reaches);
        free(memo);
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    }
    for (int32_t r = 0; r < pl->nread; r++) {
        Read *rd = &pl->read[r];
        int32_t si = pl->kidx[rd->src];
        const PlanOp *src = &k->op[si], *dst = &k->op[pl->kidx[rd->root]];
        rd->own_block = false;
        if (dst->phase == src->phase) {
            flags[si] |= READ_SAME;
            continue;
        }
        flags[si] |= READ_LATER;
        const PlanPhase *sp = &k->phase[src->phase];
        rd->own_block =
            dst->phase > src->phase &&
            !split_reduce(g, sp, rd->src) &&
            (sched_regional(g, &k->phase[dst->phase], rd->root, sp, rd->src, rd->f) ||
             tiles_read_at_row(g, k, dst->phase, rd->root, src->phase, rd->src, reaches, memo));
        if (!rd->own_block)
            flags[si] |= NOT_LOCAL;
    }
    for (int32_t i = 0; i < k->nop; i++) {
        PlanOp *o = &k->op[i];
        if (o->phase < 0)
            continue;
        const PlanPhase *ph = &k->phase[o->phase];
        bool split = split_reduce(g, ph, o->node);
        bool regional = !split && !(flags[i] & NOT_LOCAL);
        /* a reduce summed across rows is read by nothing in its kernel (across.c); its blocks
         * add up by atomics, unless there is one block */
        bool across = plan_reduce_across(g, &ph->map, o->node) && ph->map.grid > 1;
        o->zero_init = across || (split && !pl->p->opt.deterministic &&
                                  plan_split_atomic(gnode(g, o->node)));
        if (split)
            o->scheme = ASTITCH_SCHEME_GLOBAL;
        else if (flags[i] & READ_LATER)
            o->scheme = regional ? ASTITCH_SCHEME_REGIONAL : ASTITCH_SCHEME_GLOBAL;
        else
            o->scheme = flags[i] & READ_SAME ? ASTITCH_SCHEME_LOCAL : ASTITCH_SCHEME_INDEPENDENT;
    }
    free(flags);
    free(reaches);
    free(memo);
    return ASTITCH_OK;
}
