/*
 * exec_dot_search.c: the dots' algorithm search (docs/codegen.md, *Variant search*). cuBLASLt's
 * heuristic orders its algorithms by a model, not by a measurement: on the H100 the fourth of
 * seven ran GPT-2's attention scores (48 batches of 512 x 512 x 64, f32, K contiguous in both
 * operands) in 55.7 us against the first's 61.7 (bench/RESULTS.md). The first run outside a
 * capture times each dot's candidates on its own operands and keeps the fastest.
 */
#include <stdlib.h>

#include "exec_dot.h"
#include "runtime.h"

/* Times g's candidates on the run's operands, in turn for DOT_ROUNDS rounds (the first warms
 * up; each keeps its fastest of the rest), each after a fill of twice the L2 so that it starts
 * from DRAM, and makes the fastest algo[0]. The output is left as the last candidate wrote it;
 * the run's own product follows. */
astitch_status dot_choose(astitch_executable *x, ExecDots *d, GpuDot *g, CUdeviceptr lhs,
                          CUdeviceptr rhs, CUdeviceptr out, CUdeviceptr ws, CUstream stream)
{
    const CudaDevice *dev = d->dev;
    int n = g->ncand, runs = n * DOT_ROUNDS;
    CUevent ev[2 * DOT_CANDIDATES * DOT_ROUNDS] = {0};
    astitch_status s = ASTITCH_OK;
    for (int i = 0; s == ASTITCH_OK && i < 2 * runs; i++)
        s = cuda_event_create(x->ctx, dev, &ev[i]);
    for (int i = 0; s == ASTITCH_OK && i < runs; i++) {
        if (d->flush)
            s = cuda_memset_u32(x->ctx, dev, d->flush, (uint32_t)i, d->flush_bytes / 4, stream);
        if (s == ASTITCH_OK)
            s = cuda_event_record(x->ctx, dev, ev[2 * i], stream);
        if (s == ASTITCH_OK)
            s = dot_matmul(x, d, g, &g->cand[i % n], lhs, rhs, out, ws, stream);
        if (s == ASTITCH_OK)
            s = cuda_event_record(x->ctx, dev, ev[2 * i + 1], stream);
    }
    float best[DOT_CANDIDATES];
    for (int i = n; s == ASTITCH_OK && i < runs; i++) {
        float t;
        s = cuda_event_elapsed(x->ctx, dev, ev[2 * i], ev[2 * i + 1], &t);
        if (s == ASTITCH_OK && (i < 2 * n || t < best[i % n]))
            best[i % n] = t;
    }
    for (int i = 0; i < 2 * runs; i++)
        cuda_event_destroy(dev, ev[i]);
    if (s != ASTITCH_OK)
        return s;
    g->chosen = 0;
    for (int c = 1; c < n; c++)
        if (best[c] < best[g->chosen])
            g->chosen = c;
    g->algo[0] = g->cand[g->chosen];
    g->timed = true;
    return ASTITCH_OK;
}

bool exec_dots_searchable(const ExecDots *d)
{
    for (int i = 0; d && i < d->ndot; i++)
        if (d->dot[i].ncand > 1 && !d->dot[i].timed)
            return true;
    return false;
}

void exec_dots_count_chosen(const ExecDots *d, int *chosen, int *not_first)
{
    *chosen = *not_first = 0;
    for (int i = 0; d && i < d->ndot; i++) {
        *chosen += d->dot[i].timed;
        *not_first += d->dot[i].timed && d->dot[i].chosen > 0;
    }
}

int exec_dots_choices(const ExecDots *d, int *choice, int max)
{
    for (int i = 0; d && i < d->ndot && i < max; i++)
        choice[i] = d->dot[i].timed ? d->dot[i].chosen : -1;
    return d ? d->ndot : 0;
}

void exec_dots_apply(ExecDots *d, const int *choice, int n)
{
    for (int i = 0; d && i < d->ndot && i < n; i++) {
        GpuDot *g = &d->dot[i];
        if (choice[i] >= 0 && choice[i] < g->ncand) {
            g->chosen = choice[i];
            g->algo[0] = g->cand[choice[i]];
            g->timed = true;
        }
    }
}

void exec_dots_begin_timing(astitch_executable *x, ExecDots *d)
{
    d->flush_bytes = cuda_l2_flush_bytes(d->dev);
    if (cuda_alloc(x->ctx, d->dev, d->flush_bytes, &d->flush) != ASTITCH_OK)
        d->flush = 0; /* short of memory: timed without the fill */
    d->timing = true;
}

void exec_dots_end_timing(ExecDots *d)
{
    if (d->flush)
        cuda_free(d->dev, d->flush);
    d->flush = 0;
    d->timing = false;
}
