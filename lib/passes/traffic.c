/*
 * traffic.c: the global-memory bytes a planned kernel moves, beside the fewest it must move.
 *
 * Minimal: every kernel input read once and every kernel output written once. Moved, as the
 * plan's phases do it: each phase reads every kernel input its roots reach through the ops it
 * computes (the whole tensor, once per phase), and every value of an earlier phase that lives
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

/* Marks in `read` what phase ph reads from global memory, walking from its roots through the
 * ops it computes; stack holds nnode entries. */
static void phase_reads(const astitch_graph *g, const PlanKernel *k, int32_t ph, bool *seen,
                        bool *read, int32_t *stack)
{
    int32_t sp = 0;
    for (int32_t i = 0; i < k->phase[ph].nroot; i++) {
        int32_t r = k->phase[ph].root[i];
        for (int j = 0; j < gnode(g, r)->nin; j++)
            stack[sp++] = goperand(g, r, j);
    }
    while (sp > 0) {
        int32_t x = stack[--sp];
        if (seen[x])
            continue;
        seen[x] = true;
        const PlanOp *o = plan_kernel_op(k, x);
        if (!o || (o->phase >= 0 && o->phase < ph)) { /* a kernel input, or made earlier */
            bool in_run = o && k->phase[ph].resident && o->phase >= k->phase[ph].run_first;
            bool in_memory = !o || (!in_run && (o->buf >= 0 ? k->buf[o->buf].kind == ASTITCH_BUFFER_SCRATCH
                                                            : o->output));
            read[x] = read[x] || in_memory;
            continue;
        }
        for (int j = 0; j < gnode(g, x)->nin; j++)
            stack[sp++] = goperand(g, x, j);
    }
}

/* Adds the bytes of every node marked in read to *sum and clears the marks. */
static void count_reads(const astitch_graph *g, bool *read, int64_t *sum)
{
    for (int32_t n = 0; n < g->nnode; n++)
        if (read[n]) {
            *sum += tensor_bytes(g, n);
            read[n] = false;
        }
}

bool plan_kernel_traffic(const astitch_graph *g, PlanKernel *k)
{
    bool *seen = calloc((size_t)g->nnode + 1, sizeof *seen);
    bool *read = calloc((size_t)g->nnode + 1, sizeof *read);
    size_t edges = 0; /* a node is expanded once: the stack never holds more than every edge */
    for (int32_t n = 0; n < g->nnode; n++)
        edges += (size_t)gnode(g, n)->nin;
    int32_t *stack = malloc((2 * edges + 1) * sizeof *stack);
    if (!seen || !read || !stack) {
        free(seen);
        free(read);
        free(stack);
        return false;
    }
    k->min_bytes = 0;
    for (int32_t i = 0; i < k->ninput; i++)
        k->min_bytes += tensor_bytes(g, k->input[i]);
    for (int32_t i = 0; i < k->noutput; i++)
        k->min_bytes += tensor_bytes(g, k->output[i]);
    k->moved_bytes = 0;
    for (int32_t ph = 0; ph < k->nphase; ph++) {
        memset(seen, 0, (size_t)g->nnode * sizeof *seen);
        phase_reads(g, k, ph, seen, read, stack);
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
    free(seen);
    free(read);
    free(stack);
    return true;
}
