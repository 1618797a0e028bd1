/*
 * schemes.c: scheme finalization (paper 4.3 step 3): the passive block-locality check.
 *
 * A root read by no other phase is independent (it is only written for outside readers) or,
 * when a root of its own phase reads it at the same element, local. A root read by later
 * phases is regional when every such read finds its elements in the reading block's own part
 * of the root (sched_regional: the reader's block ownership equals the producer's through the
 * read's index map), and global otherwise. A split reduce is always global: its split blocks
 * combine their results across blocks in global memory, read or not. Barriers follow from the schemes (sched_barriers).
 */
#include "passes/passes.h"

astitch_status pass_schemes(Planner *pl, PlanKernel *k)
{
    const astitch_graph *g = pl->g;
    for (int32_t i = 0; i < k->nop; i++) {
        PlanOp *o = &k->op[i];
        if (o->phase < 0)
            continue;
        const PlanPhase *ph = &k->phase[o->phase];
        bool split_reduce = ph->map.split > 1 && gnode(g, o->node)->op == ASTITCH_OP_REDUCE;
        bool read_same = false, read_later = false, regional = !split_reduce && !pl->no_regional;
        for (int32_t r = 0; r < pl->nread; r++) {
            const Read *rd = &pl->read[r];
            if (rd->src != o->node)
                continue;
            const PlanOp *dst = plan_kernel_op(k, rd->root);
            if (dst->phase == o->phase) {
                read_same = true;
                continue;
            }
            read_later = true;
            if (regional && !(dst->phase > o->phase &&
                              sched_regional(g, &k->phase[dst->phase], rd->root, ph, o->node,
                                             rd->f)))
                regional = false;
        }
        o->zero_init = split_reduce;
        if (split_reduce)
            o->scheme = ASTITCH_SCHEME_GLOBAL;
        else if (read_later)
            o->scheme = regional ? ASTITCH_SCHEME_REGIONAL : ASTITCH_SCHEME_GLOBAL;
        else
            o->scheme = read_same ? ASTITCH_SCHEME_LOCAL : ASTITCH_SCHEME_INDEPENDENT;
    }
    sched_barriers(pl, k);
    return ASTITCH_OK;
}
