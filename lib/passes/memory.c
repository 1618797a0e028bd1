/*
 * memory.c: memory planning (paper 4.4).
 *
 * Shared memory holds each regional root's part owned by one block (SHARED) and the
 * block-reduction workspace of reduce roots whose lanes span several warps (REDUCE). Global
 * scratch holds the global roots that are not kernel outputs (outputs are read back from their
 * own tensors) and the per-split partial results and arrival counters of split reductions
 * that combine in a fixed order (PARTIAL; see plan_partial_counters).
 *
 * Reuse: a kernel is straight-line code, so a phase dominates every later one; a buffer's range
 * can be reused by a buffer first written in a later phase once a barrier that covers the
 * memory (any barrier for shared memory, a global barrier for scratch) separates the last read
 * of the one from the first write of the other. Phases of one tile run (tiles.c, the step
 * before this one) count as one: they interleave tile by tile, so their buffers are all live
 * across the run. Offsets are assigned first-fit in order of first write, skipping only ranges
 * of buffers that are still live.
 *
 * A regional root of a resident tile run (PlanPhase.resident) that only phases of its own run
 * read has no buffer: every lane of the row holds it in registers (emit_resident.c).
 *
 * If the shared memory of a block exceeds the limit (the device's, or a lower one from launch
 * feedback), the regional root with the largest shared buffer turns global, one at a time, until
 * it fits (barriers are recomputed and tile runs cut each time: this pass's own feedback).
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

static int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

static astitch_dtype acc_dtype(astitch_dtype t)
{
    switch (t) {
    case ASTITCH_I64:
        return ASTITCH_I64;
    case ASTITCH_I32:
    case ASTITCH_BOOL:
        return ASTITCH_I32;
    default:
        return ASTITCH_F32;
    }
}

static bool add_buf(PlanKernel *k, int32_t *cap, PlanBuffer b)
{
    if (!ARRAY_RESERVE(k->buf, k->nbuf, *cap, 8))
        return false;
    k->buf[k->nbuf++] = b;
    return true;
}

/* Elements of root o that one block owns in its phase. */
static int64_t block_elements(const astitch_graph *g, const PlanPhase *ph, const PlanOp *o)
{
    const astitch_mapping *m = &ph->map;
    bool red = gnode(g, o->node)->op == ASTITCH_OP_REDUCE && m->kind != ASTITCH_MAP_ELEMENTWISE;
    int64_t e = red || m->kind == ASTITCH_MAP_ELEMENTWISE ? m->chunk : m->chunk * m->row_len;
    int64_t all = sched_elements(g, o->node);
    return e < all ? e : all;
}

/* last[i] = the last phase reading op i of k (at least its own phase). */
static void last_readers(const Planner *pl, const PlanKernel *k, int32_t *last)
{
    for (int32_t i = 0; i < k->nop; i++)
        last[i] = k->op[i].phase;
    for (int32_t r = 0; r < pl->nread; r++) {
        int32_t s = pl->kidx[pl->read[r].src];
        int32_t p = k->op[pl->kidx[pl->read[r].root]].phase;
        if (p > last[s])
            last[s] = p;
    }
}

/* The last phase of the tile run that phase p belongs to. */
static int32_t run_last(const PlanKernel *k, int32_t p)
{
    int32_t first = k->phase[p].run_first;
    while (p + 1 < k->nphase && k->phase[p + 1].run_first == first)
        p++;
    return p;
}

static bool collect(Planner *pl, PlanKernel *k)
{
    const astitch_graph *g = pl->g;
    int32_t cap = 0;
    int32_t *last = pl->tmp;
    last_readers(pl, k, last);
    free(k->buf);
    k->buf = NULL;
    k->nbuf = 0;
    k->carry = (PlanCarry){.from = -1, .to = -1}; /* carry.c adds its buffers after these */
    for (int32_t i = 0; i < k->nop; i++) {
        PlanOp *o = &k->op[i];
        o->buf = -1;
        if (o->phase < 0)
            continue;
        const PlanPhase *ph = &k->phase[o->phase];
        const Node *n = gnode(g, o->node);
        bool red = n->op == ASTITCH_OP_REDUCE && ph->map.kind != ASTITCH_MAP_ELEMENTWISE;
        PlanBuffer b = {0};
        b.node = o->node;
        b.first_phase = b.last_phase = o->phase;
        if (red) {
            int64_t lanes = ph->map.threads_per_row, warp = pl->p->dev.warp_size;
            int64_t acc = ph->map.kind == ASTITCH_MAP_ROW_REDUCE
                              ? (lanes > warp ? k->block / warp : 0)
                              : (lanes > 1 ? plan_column_slots(&ph->map) : 0);
            if (plan_reduce_across(g, &ph->map, o->node)) /* each slot's column sums */
                acc = plan_across_slots(&ph->map) * ph->map.row_len;
            if (acc > 0) {
                b.kind = ASTITCH_BUFFER_REDUCE;
                b.dtype = acc_dtype(n->dtype);
                b.elements = acc;
                b.bytes = align_up(acc * (int64_t)astitch_dtype_size(b.dtype), 16);
                if (!add_buf(k, &cap, b))
                    return false;
            }
            if (ph->map.split > 1 && !o->zero_init) { /* combined in order, not by atomics */
                PlanBuffer pb = b;
                pb.kind = ASTITCH_BUFFER_PARTIAL;
                pb.dtype = acc_dtype(n->dtype);
                pb.elements = ph->map.rows * ph->map.split;
                pb.bytes = align_up(plan_partial_counters(&pb) + ph->map.rows * 4, 256);
                pb.zero_init = true; /* its counters */
                pb.first_phase = 0;  /* zeroed before the launch */
                if (!add_buf(k, &cap, pb))
                    return false;
            }
        }
        b.dtype = n->dtype;
        b.last_phase = last[i];
        if (o->scheme == ASTITCH_SCHEME_REGIONAL && ph->resident &&
            last[i] <= run_last(k, o->phase)) {
            continue; /* read only inside its resident run, from registers */
        } else if (o->scheme == ASTITCH_SCHEME_REGIONAL) {
            b.kind = ASTITCH_BUFFER_SHARED;
            b.elements = block_elements(g, ph, o);
        } else if (o->scheme == ASTITCH_SCHEME_GLOBAL && !o->output) {
            b.kind = ASTITCH_BUFFER_SCRATCH;
            b.elements = sched_elements(g, o->node);
            b.zero_init = o->zero_init;
            if (b.zero_init)
                b.first_phase = 0; /* its initial contents come from before the launch */
        } else {
            continue;
        }
        b.bytes = align_up(b.elements * (int64_t)astitch_dtype_size(b.dtype),
                           b.kind == ASTITCH_BUFFER_SHARED ? 16 : 256);
        o->buf = k->nbuf;
        if (!add_buf(k, &cap, b))
            return false;
    }
    return true;
}

/* True if a barrier strong enough for buffers of this space starts a phase in (a, b]. */
static bool separated(const PlanKernel *k, int32_t a, int32_t b, bool shared)
{
    for (int32_t p = a + 1; p <= b; p++) {
        astitch_barrier bar = k->phase[p].barrier;
        if (bar == ASTITCH_BARRIER_GLOBAL || (shared && bar == ASTITCH_BARRIER_BLOCK))
            return true;
    }
    return false;
}

/* Whether x and y may be live at once: their phase ranges, widened to whole tile runs (a run
 * interleaves its phases tile by tile), overlap or no barrier separates them. */
static bool conflict(const PlanKernel *k, const PlanBuffer *x, const PlanBuffer *y, bool shared)
{
    int32_t xf = k->phase[x->first_phase].run_first, xl = run_last(k, x->last_phase);
    int32_t yf = k->phase[y->first_phase].run_first, yl = run_last(k, y->last_phase);
    if (xl < yf && separated(k, xl, yf, shared))
        return false;
    if (yl < xf && separated(k, yl, xf, shared))
        return false;
    return true;
}

typedef struct Range {
    int64_t lo, hi;
} Range;

static int cmp_range(const void *a, const void *b)
{
    const Range *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static int cmp_first(const void *a, const void *b, void *kp)
{
    const PlanKernel *k = kp;
    const PlanBuffer *x = &k->buf[*(const int32_t *)a], *y = &k->buf[*(const int32_t *)b];
    if (x->first_phase != y->first_phase)
        return (x->first_phase > y->first_phase) - (x->first_phase < y->first_phase);
    return (*(const int32_t *)a > *(const int32_t *)b) - (*(const int32_t *)a < *(const int32_t *)b);
}

/* First-fit offsets for the buffers of one space; returns the bytes used or -1 on memory. */
static int64_t place(PlanKernel *k, bool shared)
{
    int32_t n = k->nbuf, m = 0, placed = 0;
    int32_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    int32_t *done = malloc((size_t)(n ? n : 1) * sizeof *done);
    Range *busy = malloc((size_t)(n ? n : 1) * sizeof *busy);
    if (!order || !done || !busy) {
        free(order);
        free(done);
        free(busy);
        return -1;
    }
    for (int32_t i = 0; i < n; i++)
        if (plan_buffer_shared(k->buf[i].kind) == shared)
            order[m++] = i;
    qsort_r(order, (size_t)m, sizeof *order, cmp_first, k);
    int64_t top = 0;
    for (int32_t i = 0; i < m; i++) {
        PlanBuffer *b = &k->buf[order[i]];
        int32_t nb = 0;
        for (int32_t j = 0; j < placed; j++) {
            const PlanBuffer *o = &k->buf[done[j]];
            if (conflict(k, o, b, shared))
                busy[nb++] = (Range){o->offset, o->offset + o->bytes};
        }
        if (nb > 1)
            qsort(busy, (size_t)nb, sizeof *busy, cmp_range);
        int64_t off = 0;
        for (int32_t j = 0; j < nb; j++) {
            if (busy[j].lo >= off + b->bytes)
                break;
            if (busy[j].hi > off)
                off = busy[j].hi;
        }
        b->offset = off;
        if (off + b->bytes > top)
            top = off + b->bytes;
        done[placed++] = order[i];
    }
    free(order);
    free(done);
    free(busy);
    return top;
}

astitch_status pass_memory(Planner *pl, PlanKernel *k)
{
    const astitch_graph *g = pl->g;
    for (;;) {
        if (!collect(pl, k))
            return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
        int64_t shared = place(k, true), scratch = place(k, false);
        if (shared < 0 || scratch < 0)
            return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
        k->shared_bytes = shared;
        k->scratch_bytes = scratch;
        int64_t cap = pl->shared_cap > 0 ? pl->shared_cap : pl->p->dev.shared_per_block;
        if (shared <= cap)
            return ASTITCH_OK;
        /* regional -> global, the largest shared buffer first */
        int32_t victim = -1;
        for (int32_t i = 0; i < k->nbuf; i++)
            if (k->buf[i].kind == ASTITCH_BUFFER_SHARED &&
                (victim < 0 || k->buf[i].bytes > k->buf[victim].bytes))
                victim = i;
        if (victim < 0)
            return ctx_fail(g->ctx, ASTITCH_ERR_UNSUPPORTED,
                            "planner: kernel %s needs %lld bytes of shared memory for its "
                            "reductions; device '%s' allows %lld per block here",
                            k->name, (long long)shared, pl->p->dev.name, (long long)cap);
        k->op[pl->kidx[k->buf[victim].node]].scheme = ASTITCH_SCHEME_GLOBAL;
        sched_barriers(pl, k);
        pass_tiles_cut(k);
    }
}
