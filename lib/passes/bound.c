/*
 * bound.c: no kernel reads and writes more tensors than a kernel takes as arguments.
 *
 * A kernel's arguments are its input and output tensors and two more (scratch, barrier
 * counter); launchers bound their number (the host runtime at 256, CUDA's parameter space at
 * a few hundred pointers). A stitched scope can read hundreds of parameters (a sum of 300) or
 * write hundreds of outputs. Such a kernel is cut here, before anything else is planned for
 * it, into pieces of consecutive members in node order, each closed before it would pass
 * PLAN_KERNEL_MAX_TENSORS; a value one piece makes and a later one reads goes through global
 * memory. Pieces of a topological order keep the kernel graph acyclic: no path leads from a
 * later piece back to an earlier one (ids grow along every edge), and none leaves the kernel
 * and comes back into it, since scope and remote never build such a kernel. A single op takes
 * at most CONCAT_TREE_WIDTH + 1 tensors (concat_tree.c), so every piece holds at least one op.
 *
 * fusion=xla recomputes cheap ops in several kernels; a piece of such a kernel could read a
 * value from a kernel that reads its own piece's output, so a kernel over the bound that holds
 * a recomputed op is refused with a message instead (no example or traced graph comes near).
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

typedef struct Bound {
    Planner *pl;
    int32_t *piece;   /* node -> piece it was put in (pieces numbered over all kernels), -1 */
    int32_t *read;    /* node -> last piece that counted it as an input */
    int32_t *left;    /* node -> its consumers not yet in its piece */
    int32_t cur;      /* the piece being filled */
    int32_t ninput, noutput;
    PlanKernel *out;  /* the pieces, in the order they were cut */
    int32_t *from;    /* piece -> the kernel it was cut from */
    int32_t nout, cap;
} Bound;

static bool is_inlined_source(const astitch_graph *g, int32_t x)
{
    astitch_op op = gnode(g, x)->op;
    return op == ASTITCH_OP_CONSTANT || op == ASTITCH_OP_IOTA;
}

static bool first_read(const astitch_graph *g, int32_t w, int j)
{
    for (int i = 0; i < j; i++)
        if (goperand(g, w, i) == goperand(g, w, j))
            return false;
    return true;
}

/* The tensors of the current piece once w joins it; with `take`, w joins it. */
static int32_t join(Bound *b, int32_t w, bool take)
{
    const Planner *pl = b->pl;
    const astitch_graph *g = pl->g;
    int32_t in = b->ninput, out = b->noutput;
    for (int j = 0; j < gnode(g, w)->nin; j++) {
        int32_t x = goperand(g, w, j);
        if (!first_read(g, w, j))
            continue;
        if (b->piece[x] == b->cur) { /* w is one consumer of x less outside */
            if (b->left[x] == 1 && !pl->is_output[x])
                out--;
            if (take)
                b->left[x]--;
        } else if (!is_inlined_source(g, x) && b->read[x] != b->cur) {
            in++;
            if (take)
                b->read[x] = b->cur;
        }
    }
    int32_t uses = pl->ustart[w + 1] - pl->ustart[w];
    if (pl->is_output[w] || uses > 0)
        out++;
    if (take) {
        b->piece[w] = b->cur;
        b->left[w] = uses;
        b->ninput = in;
        b->noutput = out;
    }
    return in + out;
}

static int cmp_node(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* True when kernel k surely stays within the bound: its ops' operands and results together. */
static bool surely_within(const astitch_graph *g, const PlanKernel *k)
{
    int64_t most = 0;
    for (int32_t i = 0; i < k->nop && most <= PLAN_KERNEL_MAX_TENSORS; i++)
        most += gnode(g, k->op[i].node)->nin + 1;
    return most <= PLAN_KERNEL_MAX_TENSORS;
}

/* Appends to b->out a piece of kernel `from`: a new kernel holding m[0 .. n). */
static bool emit_piece(Bound *b, int32_t from, const int32_t *m, int32_t n)
{
    if (b->nout == b->cap) {
        int32_t cap = b->cap ? b->cap * 2 : 16;
        PlanKernel *k = realloc(b->out, (size_t)cap * sizeof *k);
        int32_t *f = realloc(b->from, (size_t)cap * sizeof *f);
        if (k)
            b->out = k;
        if (f)
            b->from = f;
        if (!k || !f)
            return false;
        b->cap = cap;
    }
    PlanKernel *k = &b->out[b->nout];
    memset(k, 0, sizeof *k);
    b->from[b->nout++] = from;
    for (int32_t i = 0; i < n; i++)
        if (!plan_kernel_add(k, m[i]))
            return false;
    return true;
}

/* Cuts kernel ki into pieces appended to b->out; *pieces says how many. Fails on memory, or
 * for an xla kernel that would need more than one (the context says why). */
static astitch_status cut(Bound *b, int32_t ki, int32_t *m, int32_t *pieces)
{
    Planner *pl = b->pl;
    const PlanKernel *k = &pl->p->kernel[ki];
    for (int32_t i = 0; i < k->nop; i++)
        m[i] = k->op[i].node;
    qsort(m, (size_t)k->nop, sizeof *m, cmp_node);
    int32_t start = 0, n = surely_within(pl->g, k) ? 0 : k->nop;
    *pieces = 1;
    b->ninput = b->noutput = 0;
    b->cur++;
    for (int32_t i = 0; i < n; i++) {
        if (i > start && join(b, m[i], false) > PLAN_KERNEL_MAX_TENSORS) {
            if (!emit_piece(b, ki, m + start, i - start))
                return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
            start = i;
            (*pieces)++;
            b->cur++;
            b->ninput = b->noutput = 0;
        }
        join(b, m[i], true);
    }
    for (int32_t i = 0; *pieces > 1 && i < k->nop; i++)
        if (pl->p->owner[m[i]] != ki) {
            ctx_fail(pl->g->ctx, ASTITCH_ERR_UNSUPPORTED,
                     "planner: a kernel of fusion=xla (from node %d '%s' on) reads and writes "
                     "more than the %d tensors a kernel takes, and recomputes node %d '%s' of "
                     "another; plan it with fusion=stitch",
                     (int)m[0], gnode(pl->g, m[0])->name, PLAN_KERNEL_MAX_TENSORS, (int)m[i],
                     gnode(pl->g, m[i])->name);
            ctx_error_at_node(pl->g->ctx, m[i]);
            return ASTITCH_ERR_UNSUPPORTED;
        }
    if (!emit_piece(b, ki, m + start, k->nop - start))
        return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    return ASTITCH_OK;
}

static int cmp_first(const void *a, const void *b, void *ctx)
{
    const PlanKernel *k = ctx;
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    int32_t fi = k[i].op[0].node, fj = k[j].op[0].node;
    return fi != fj ? (fi > fj) - (fi < fj) : (i > j) - (i < j);
}

/* Replaces the plan's kernels by the pieces, ordered by their first node; an owned node's
 * owner becomes the piece that holds it. */
static astitch_status adopt(Bound *b)
{
    astitch_plan *p = b->pl->p;
    int32_t n = b->nout, *order = malloc((size_t)n * sizeof *order);
    PlanKernel *nk = calloc((size_t)n, sizeof *nk);
    if (!order || !nk) {
        free(order);
        free(nk);
        return ctx_fail(b->pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    }
    for (int32_t i = 0; i < n; i++)
        order[i] = i;
    qsort_r(order, (size_t)n, sizeof *order, cmp_first, b->out);
    for (int32_t k = 0; k < n; k++) {
        nk[k] = b->out[order[k]];
        int32_t from = b->from[order[k]];
        for (int32_t i = 0; i < nk[k].nop; i++)
            if (p->owner[nk[k].op[i].node] == from)
                b->piece[nk[k].op[i].node] = k;
    }
    for (int32_t v = 0; v < b->pl->n; v++) /* owners first: a recomputed op names its owner */
        if (p->owner[v] >= 0)
            p->owner[v] = b->piece[v];
    for (int32_t k = 0; k < p->nkernel; k++)
        plan_kernel_clear(&p->kernel[k]);
    free(p->kernel);
    p->kernel = nk;
    p->nkernel = n;
    b->nout = 0;
    free(order);
    return ASTITCH_OK;
}

astitch_status pass_bound(Planner *pl)
{
    astitch_plan *p = pl->p;
    int32_t most = 0, over = 0;
    for (int32_t k = 0; k < p->nkernel; k++) {
        most = p->kernel[k].nop > most ? p->kernel[k].nop : most;
        over += !surely_within(pl->g, &p->kernel[k]);
    }
    if (!over)
        return ASTITCH_OK;
    size_t n = (size_t)pl->n + 1;
    Bound b = {.pl = pl, .piece = malloc(n * sizeof(int32_t)), .read = malloc(n * sizeof(int32_t)),
               .left = calloc(n, sizeof(int32_t)), .cur = -1};
    int32_t *m = malloc((size_t)most * sizeof *m);
    astitch_status st = ASTITCH_OK;
    if (!b.piece || !b.read || !b.left || !m) {
        st = ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
        goto done;
    }
    for (size_t v = 0; v < n; v++)
        b.piece[v] = b.read[v] = -1;
    int32_t pieces = 0, more = 0;
    for (int32_t k = 0; !st && k < p->nkernel; k++) {
        st = cut(&b, k, m, &pieces);
        more += pieces - 1;
    }
    if (!st && more > 0)
        st = adopt(&b);
done:
    for (int32_t k = 0; k < b.nout; k++)
        plan_kernel_clear(&b.out[k]);
    free(b.out);
    free(b.from);
    free(b.piece);
    free(b.read);
    free(b.left);
    free(m);
    return st;
}
