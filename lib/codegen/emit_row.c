/* emit_row.c: the vector form of a streamed row reduction (docs/codegen.md, *Reduce phase*).
 * Where a row's innermost axis is reduced, the v elements of a row from reduced index j (a
 * multiple of v, which divides the innermost dimension) are v adjacent elements in memory: a
 * lane takes runs of v, reads each tensor with one access of v elements (16 bytes of f32 at
 * v = 4), folds a run into one accumulator per reduce and stores its other roots' runs with
 * one access. */
#define ASTITCH_EMIT_INTERNAL
#include <stdlib.h>

#include "codegen.h"

void emit_row_runs(Emit *e, const PlanPhase *p, const Shape *space, LLVMValueRef row,
                   LLVMValueRef j, int64_t step, int count, int v, int32_t nred,
                   const int32_t *red, const LLVMValueRef *acc, LLVMValueRef *next)
{
    size_t per_run = (size_t)p->nroot * (size_t)v;
    LLVMValueRef *val = malloc(per_run * ITERATION_ELEMENTS_MAX * sizeof *val);
    if (!val || count > ITERATION_ELEMENTS_MAX) {
        free(val);
        ev_fail(e, e->ix, ASTITCH_ERR_INTERNAL, "%s: %d runs per iteration", e->k->name, count);
        return;
    }
    LLVMValueRef lin[ITERATION_ELEMENTS_MAX][VECTOR_MAX];
    /* every run's values first (all loads in flight), then the folds and stores */
    for (int c = 0; c < count; c++) {
        LLVMValueRef jc = c ? LLVMBuildNSWAdd(e->b, j, ev_int(e, (int64_t)c * step), "") : j;
        Index run;
        emit_space_index(e, &p->map, space, row, jc, &run);
        lin[c][0] = ev_lin(e, &run);
        for (int u = 1; u < v; u++)
            lin[c][u] = LLVMBuildNSWAdd(e->b, lin[c][0], ev_int(e, u), "");
        emit_run_begin(e, space, &run, v);
        if (e->carry_mode == CARRY_LOAD)
            emit_carry_seed(e, jc, v);
        emit_run_values(e, p, space, &run, lin[c], v, nred, red, &val[per_run * c]);
        if (e->carry_mode == CARRY_STORE)
            emit_carry_store(e, jc, &run, v);
    }
    for (int r = 0, q = 0; r < p->nroot; r++) {
        const Node *node = gnode(e->g, p->root[r]);
        bool reduce = q < nred && red[q] == p->root[r];
        if (reduce)
            next[q] = acc[q];
        for (int c = 0; c < count; c++) {
            LLVMValueRef *x = &val[per_run * c + (size_t)r * v];
            if (!reduce) {
                emit_run_store(e, p->root[r], space, lin[c], v, x);
                continue;
            }
            for (int u = 0; u < v; u++)
                next[q] = ev_reduce_combine(e, node->attr.reduce, node->dtype, next[q], x[u]);
        }
        q += reduce;
    }
    free(val);
}
