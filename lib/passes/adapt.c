/*
 * adapt.c: proactive block-locality adaptation (paper 4.3 step 3).
 *
 * A group whose dominant is element-wise prefers locality: element-wise work is cheap, so its
 * thread mapping bends to match the blocks of the groups it reads. If every value its dominant
 * reads from another group's root is produced in contiguous per-block runs, and the reads map
 * the dominant's elements onto those runs by an identity or a broadcast of trailing dimensions,
 * the dominant's chunk (elements per block) becomes run length x expansion, on the producer's
 * grid. Reduce-dominated groups keep their mapping (they prefer parallelism) and are only
 * checked passively (schemes.c).
 */
#include "passes/passes.h"

/* The chunk that makes read rd of root r block-local, or 0. */
static int64_t chunk_for(Planner *pl, PlanKernel *k, const Read *rd)
{
    const PlanOp *src = &k->op[pl->kidx[rd->src]];
    IndexMap own = sched_owner(pl->g, &k->phase[src->phase], rd->src);
    IndexMap have = index_compose(rd->f, own);
    if (!have.known || have.mod != 0 || have.div < 1)
        return 0;
    return have.div;
}

bool pass_adapt(Planner *pl, PlanKernel *k)
{
    const astitch_graph *g = pl->g;
    bool changed = false;
    for (int32_t gi = 0; gi < k->ngroup; gi++) {
        PlanGroup *gr = &k->group[gi];
        int32_t d = gr->dominant;
        if (gnode(g, d)->op == ASTITCH_OP_REDUCE)
            continue;
        int64_t chunk = 0;
        bool ok = true;
        for (int32_t r = 0; r < pl->nread && ok; r++) {
            const Read *rd = &pl->read[r];
            if (rd->root != d || k->op[pl->kidx[rd->src]].group == gi)
                continue;
            int64_t c = chunk_for(pl, k, rd);
            if (c == 0 || (chunk && c != chunk))
                ok = false;
            chunk = c;
        }
        if (!ok || chunk == 0)
            continue;
        /* sub-dominants over a leading part of the space need whole runs of it */
        for (int32_t s = 0; s < gr->nsub && ok; s++) {
            int64_t q;
            if (sched_derive(g, d, gr->sub[s], &q) == DERIVE_QUOTIENT && chunk % q)
                ok = false;
        }
        int64_t grid = ceil_div(gr->map.rows, chunk);
        if (!ok || grid > k->blocks_per_wave)
            continue;
        if ((grid <= 1 && gr->map.grid == 1) || chunk == gr->map.chunk)
            continue; /* already aligned */
        astitch_mapping *m = &gr->map;
        if (grid <= 1)
            chunk = m->rows > 0 ? m->rows : 1;
        m->chunk = chunk;
        m->rows_per_block = (int32_t)(chunk < k->block ? chunk : k->block);
        m->tasks_per_block = ceil_div(chunk, m->rows_per_block);
        m->grid = (int32_t)(grid > 0 ? grid : 1);
        changed = true;
    }
    return changed;
}
