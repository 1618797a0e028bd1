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
 * L1 or L2, which this count does not model). Values in shared memory or registers cost
 * nothing. So moved == minimal means no re-read, and moved > minimal shows one (--plan).
 */
#include <stdlib.h>
#include <string.h>

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

/* Sets read[x] to the part of global-memory value x that phase ph reads (0 for none), from its
 * roots through the ops it computes, in one sweep down the topological order. A value needs the
 * largest part any consumer takes whole, or the parts its slices take together (at most all of
 * it). part[] and sliced[] hold nnode zeros on entry. */
static void phase_reads(const astitch_graph *g, const PlanKernel *k, int32_t ph, double *part,
                        double *sliced, double *read)
{
    int32_t top = -1;
    for (int32_t i = 0; i < k->phase[ph].nroot; i++) {
        int32_t r = k->phase[ph].root[i];
        part[r] = 1.0;
        top = r > top ? r : top;
    }
    for (int32_t x = top; x >= 0; x--) {
        if (sliced[x] > part[x])
            part[x] = sliced[x] < 1.0 ? sliced[x] : 1.0;
        if (part[x] <= 0)
            continue;
        const PlanOp *o = plan_kernel_op(k, x);
        if (!o || (o->phase >= 0 && o->phase < ph)) { /* a kernel input, or made earlier */
            bool in_run = o && k->phase[ph].resident && o->phase >= k->phase[ph].run_first;
            bool in_memory = !o || (!in_run && (o->buf >= 0 ? k->buf[o->buf].kind == ASTITCH_BUFFER_SCRATCH
                                                            : o->output));
            if (in_memory && part[x] > read[x])
                read[x] = part[x];
            continue;
        }
        for (int j = 0; j < gnode(g, x)->nin; j++) {
            int32_t y = goperand(g, x, j);
            if (takes_part(g, x, y)) {
                double theirs = (double)shape_elements(&gnode(g, y)->shape);
                if (theirs > 0)
                    sliced[y] += part[x] * (double)shape_elements(&gnode(g, x)->shape) / theirs;
            } else if (part[x] > part[y]) {
                part[y] = part[x];
            }
        }
    }
}

/* Adds the bytes read[] marks (each node's part of its tensor) to *sum and clears the marks. */
static void count_reads(const astitch_graph *g, double *read, int64_t *sum)
{
    for (int32_t n = 0; n < g->nnode; n++)
        if (read[n] > 0) {
            *sum += (int64_t)(read[n] * (double)tensor_bytes(g, n) + 0.5);
            read[n] = 0;
        }
}

bool plan_kernel_traffic(const astitch_graph *g, PlanKernel *k)
{
    double *part = calloc((size_t)g->nnode + 1, sizeof *part);
    double *sliced = calloc((size_t)g->nnode + 1, sizeof *sliced);
    double *read = calloc((size_t)g->nnode + 1, sizeof *read);
    if (!part || !sliced || !read) {
        free(part);
        free(sliced);
        free(read);
        return false;
    }
    k->min_bytes = 0;
    for (int32_t i = 0; i < k->ninput; i++)
        k->min_bytes += tensor_bytes(g, k->input[i]);
    for (int32_t i = 0; i < k->noutput; i++)
        k->min_bytes += tensor_bytes(g, k->output[i]);
    k->moved_bytes = 0;
    for (int32_t ph = 0; ph < k->nphase; ph++) {
        memset(part, 0, (size_t)g->nnode * sizeof *part);
        memset(sliced, 0, (size_t)g->nnode * sizeof *sliced);
        phase_reads(g, k, ph, part, sliced, read);
        bool run_goes_on = ph + 1 < k->nphase && k->phase[ph].resident &&
                           k->phase[ph + 1].run_first == k->phase[ph].run_first;
        if (!run_goes_on) /* a resident run reads its inputs once, at its end here */
            count_reads(g, read, &k->moved_bytes);
        for (int32_t i = 0; i < k->phase[ph].nroot; i++) {
            const PlanOp *o = plan_kernel_op(k, k->phase[ph].root[i]);
            if (o->output || (o->buf >= 0 && k->buf[o->buf].kind == ASTITCH_BUFFER_SCRATCH))
                k->moved_bytes += tensor_bytes(g, o->node);
        }
    }
    free(part);
    free(sliced);
    free(read);
    return true;
}
