/*
 * traffic.c: the global-memory bytes a planned kernel moves, beside the fewest it must move.
 *
 * Minimal: every kernel input read once and every kernel output written once. Moved, as the
 * plan's phases do it: each phase reads every kernel input its roots reach through the ops it
 * computes (the whole tensor once per phase, or the part a slice or gather of it takes), and
 * every value of an earlier phase that lives
 * in global memory (scratch or an output tensor); it writes its outputs and global values. A
 * resident run (PlanPhase.resident) reads each input once for all of its phases, since its rows
 * stay in registers; a streamed tile run reads again in every phase (those re-reads may hit the
 * L1 or L2, which this count does not model), except the sum of an online pair
 * (plan_online_pair), taken in its max's walk. A walk that reads values carried across a global
 * barrier (carry.c) reads what lies below them only for the share of its iterations not kept.
 * Values in shared memory or registers cost nothing. So moved == minimal means no re-read, and
 * moved > minimal shows one (--plan).
 */
#include <stdlib.h>

#include "passes/passes.h"

static int64_t tensor_bytes(const astitch_graph *g, int32_t n)
{
    const Node *x = gnode(g, n);
    return shape_elements(&x->shape) * (int64_t)astitch_dtype_size(x->dtype);
}

/* True when consumer c of operand x takes only some of x's elements (a slice, a gather's
 * table), about as many as it makes. */
static bool takes_part(const astitch_graph *g, int32_t c, int32_t x)
{
    astitch_op op = gnode(g, c)->op;
    return op == ASTITCH_OP_SLICE || (op == ASTITCH_OP_GATHER && goperand(g, c, 0) == x);
}

/* The nodes a kernel's phases can read or compute: its ops and its inputs (every operand of
 * an op is one or the other), ascending in node[0 .. n). part[], sliced[] and read[] below are
 * indexed by a node's place here, so a kernel's count costs its own size, not the graph's. */
typedef struct Slots {
    int32_t *node;
    int32_t n;
} Slots;

static int32_t slot_of(const Slots *sl, int32_t x)
{
    int32_t lo = 0, hi = sl->n;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (sl->node[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sl->n && sl->node[lo] == x ? lo : -1;
}

/* Sets read[] to the part of each global-memory value that phase ph reads (0 for none), from
 * its roots through the ops it computes, in one sweep down the topological order. A value needs
 * the largest part any consumer takes whole, or the parts its slices take together (at most all
 * of it). part[] and sliced[] hold zeros on entry and on return. */
static void phase_reads(const astitch_graph *g, const PlanKernel *k, const Slots *sl, int32_t ph,
                        double *part, double *sliced, double *read)
{
    double uncarried = 1.0; /* the share of phase ph's iterations whose carried values it reads
                             * from memory below them */
    if (k->carry.slots > 0 && ph == k->carry.to && k->carry.iterations > 0)
        uncarried = 1.0 - (double)k->carry.slots / (double)k->carry.iterations;
    int32_t top = -1;
    for (int32_t i = 0; i < k->phase[ph].nroot; i++) {
        int32_t r = slot_of(sl, k->phase[ph].root[i]);
        part[r] = 1.0;
        top = r > top ? r : top;
    }
    for (int32_t i = top; i >= 0; i--) { /* leaves part[i] and sliced[i] zero behind it */
        int32_t x = sl->node[i];
        double mine = part[i];
        if (sliced[i] > mine)
            mine = sliced[i] < 1.0 ? sliced[i] : 1.0;
        part[i] = sliced[i] = 0;
        if (uncarried < 1.0 && plan_kernel_buffer(k, ASTITCH_BUFFER_CARRY, x))
            mine *= uncarried;
        if (mine <= 0)
            continue;
        const PlanOp *o = plan_kernel_op(k, x);
        if (!o || (o->phase >= 0 && o->phase < ph)) { /* a kernel input, or made earlier */
            bool in_run = o && k->phase[ph].resident && o->phase >= k->phase[ph].run_first;
            bool in_memory = !o || (!in_run && (o->buf >= 0 ? k->buf[o->buf].kind == ASTITCH_BUFFER_SCRATCH
                                                            : o->output));
            if (in_memory && mine > read[i])
                read[i] = mine;
            continue;
        }
        for (int j = 0; j < gnode(g, x)->nin; j++) {
            int32_t y = goperand(g, x, j), sy = slot_of(sl, y);
            if (takes_part(g, x, y)) {
                double theirs = (double)shape_elements(&gnode(g, y)->shape);
                if (theirs > 0)
                    sliced[sy] += mine * (double)shape_elements(&gnode(g, x)->shape) / theirs;
            } else if (mine > part[sy]) {
                part[sy] = mine;
            }
        }
    }
}

/* Adds the bytes read[] marks (each node's part of its tensor) to *sum and clears the marks. */
static void count_reads(const astitch_graph *g, const Slots *sl, double *read, int64_t *sum)
{
    for (int32_t i = 0; i < sl->n; i++)
        if (read[i] > 0) {
            *sum += (int64_t)(read[i] * (double)tensor_bytes(g, sl->node[i]) + 0.5);
            read[i] = 0;
        }
}

bool plan_kernel_traffic(const astitch_plan *p, PlanKernel *k)
{
    const astitch_graph *g = p->graph;
    size_t m = (size_t)k->nop + (size_t)k->ninput + 1;
    Slots sl = {malloc(m * sizeof *sl.node), 0};
    double *part = calloc(m, sizeof *part);
    double *sliced = calloc(m, sizeof *sliced);
    double *read = calloc(m, sizeof *read);
    if (!sl.node || !part || !sliced || !read) {
        free(sl.node);
        free(part);
        free(sliced);
        free(read);
        return false;
    }
    for (int32_t a = 0, b = 0; a < k->nop || b < k->ninput;) /* both ascending */
        sl.node[sl.n++] = b == k->ninput || (a < k->nop && k->op[a].node < k->input[b])
                              ? k->op[a++].node : k->input[b++];
    k->min_bytes = 0;
    for (int32_t i = 0; i < k->ninput; i++)
        k->min_bytes += tensor_bytes(g, k->input[i]);
    for (int32_t i = 0; i < k->noutput; i++)
        k->min_bytes += tensor_bytes(g, k->output[i]);
    k->moved_bytes = 0;
    for (int32_t ph = 0; ph < k->nphase; ph++) {
        if (ph > 0 && plan_online_pair(p, k, ph - 1))
            continue; /* walked with the phase before (its roots live in shared memory) */
        phase_reads(g, k, &sl, ph, part, sliced, read);
        bool run_goes_on = ph + 1 < k->nphase && k->phase[ph].resident &&
                           k->phase[ph + 1].run_first == k->phase[ph].run_first;
        if (!run_goes_on) /* a resident run reads its inputs once, at its end here */
            count_reads(g, &sl, read, &k->moved_bytes);
        for (int32_t i = 0; i < k->phase[ph].nroot; i++) {
            const PlanOp *o = plan_kernel_op(k, k->phase[ph].root[i]);
            if (o->output || (o->buf >= 0 && k->buf[o->buf].kind == ASTITCH_BUFFER_SCRATCH))
                k->moved_bytes += tensor_bytes(g, o->node);
        }
    }
    free(sl.node);
    free(part);
    free(sliced);
    free(read);
    return true;
}
