/*
 * carry.c: values carried across a barrier in shared memory (plan option carry;
 * docs/planner.md, *carry*; codegen: emit_carry.c).
 *
 * A later phase may walk the same elements as an earlier one, with the same mapping, and read
 * its inputs from global memory a second time, from DRAM where they outgrow the L2:
 *
 *   - across a global barrier, in a persistent kernel: a batch norm's normalization after its
 *     statistics, NCHW (a split row) or NHWC (a column walk). Its blocks stay resident, so the
 *     earlier walk can leave values in the shared memory the planned residency leaves free,
 *     for each thread's first iterations;
 *   - across a block barrier, in a kernel of a block per tile whose tile run streams a row
 *     twice: a long row's layer norm or softmax, its statistics then its output. The earlier
 *     walk leaves every value of the thread's part of the row in the shared memory the
 *     planned residency leaves free (a row's whole part or nothing: no split walks).
 *
 * Candidates are the nodes of the walk's shape that both walks compute at the walk's element:
 * kernel inputs, and element-wise ops reached from the roots through element-wise ops of that
 * shape. A set of candidates saves the bytes per element of the kernel inputs with the space's
 * elements that the later walk reads only through it, costs its bytes per element in shared
 * memory, and covers the share of each thread's iterations that fits. The set of one or two
 * candidates that saves the most (bytes saved times the share covered) wins, the fewest bytes
 * first. The step runs last, on the launched kernel (PLAN_STAGE_LAUNCH), and changes nothing
 * but the kernel's shared memory and its CARRY buffers.
 */
#include <stdlib.h>

#include "passes/passes.h"

/* Bytes the driver reserves in an SM's shared memory for each resident block (sm_80 on). */
enum { CARRY_SHARED_RESERVE = 1024, CARRY_SET_MAX = 2, CARRY_CANDIDATES_MAX = 32 };
/* A carry must save at least the device's L2 bytes over this in all: a smaller re-read comes
 * from the L2 (the later walk reads what the earlier read last first), and the shared memory
 * taken from the L1 then costs more than it saves. Measured on the H200: softmax_32k, 4 MB
 * saved, 12.4 -> 12.9 us; softmax_256k, 8 MB, 14.0-14.4 -> 14.4-14.6; resnet50_train_fwd_bn_relu,
 * 26 MB, 26.6-27.1 -> 24.9-25.1. Across a block barrier what counts is the re-read of the
 * rows one wave of blocks walks at once: the rows between a row's two walks. */
enum { CARRY_L2_SHARE = 4 };

static int64_t align16(int64_t x) { return (x + 15) / 16 * 16; }

/* True when phase ph streams a row or column reduce walk of one tile per block, alone in its
 * tile run. */
static bool walk_phase(const PlanKernel *k, int32_t ph)
{
    const PlanPhase *p = &k->phase[ph];
    const astitch_mapping *m = &p->map;
    bool alone = p->run_first == ph && (ph + 1 == k->nphase || k->phase[ph + 1].run_first != ph);
    return alone && !p->resident &&
           (m->kind == ASTITCH_MAP_ROW_REDUCE || m->kind == ASTITCH_MAP_COLUMN_REDUCE) &&
           (m->split > 1 || m->tasks_per_block == 1) && m->row_len > 0;
}

/* The elements of one iteration of phase ph's walk (its run), or 0 when the walk takes runs of
 * rows (a column's vector form), which carries nothing. */
static int walk_vector(const astitch_plan *p, const PlanKernel *k, int32_t ph)
{
    const PlanPhase *x = &k->phase[ph];
    if (x->map.kind == ASTITCH_MAP_COLUMN_REDUCE)
        return plan_column_vector(&x->map) == 1 ? 1 : 0;
    return plan_row_vector(p, k, x);
}

static bool barrier_between(const PlanKernel *k, int32_t a, int32_t b)
{
    for (int32_t ph = a + 1; ph <= b; ph++)
        if (k->phase[ph].barrier == ASTITCH_BARRIER_GLOBAL)
            return true;
    return false;
}

/* True when phase ph of a kernel of a block per tile streams a row walk of its own in a tile
 * run of several phases (not the sum an online pair takes with its max). */
static bool row_walk_in_run(const astitch_plan *p, const PlanKernel *k, int32_t ph)
{
    const PlanPhase *x = &k->phase[ph];
    const astitch_mapping *m = &x->map;
    bool in_run = (ph > x->run_first) || (ph + 1 < k->nphase && k->phase[ph + 1].run_first == ph);
    bool online_sum = ph > x->run_first && plan_online_pair(p, k, ph - 1);
    return in_run && !online_sum && !x->resident && m->kind == ASTITCH_MAP_ROW_REDUCE &&
           m->split <= 1 && m->row_len > 0;
}

/* The walk of mark_at_element: marks x and pushes it when phase ph computes it at the walk's
 * element (its shape is the space's; a kernel input, or an op of ph or of no phase, not
 * inlined), so that each node is pushed once. */
typedef struct Marks {
    const astitch_graph *g;
    const PlanKernel *k;
    int32_t ph;
    const Shape *space;
    bool *mark;
    int32_t *stack, n;
} Marks;

static void mark_push(Marks *w, int32_t x)
{
    if (w->mark[x] || !shape_equal(&gnode(w->g, x)->shape, w->space))
        return;
    const PlanOp *o = plan_kernel_op(w->k, x);
    if (o && (o->role == ASTITCH_ROLE_INLINED || (o->phase >= 0 && o->phase != w->ph)))
        return;
    w->mark[x] = true;
    w->stack[w->n++] = x;
}

/* Marks in mark[] the nodes phase ph computes at its walk's element (space): from the roots
 * (a reduce over the walk's axes through its operand), through element-wise ops of the space's
 * shape, down to kernel inputs of that shape; values materialized in another phase stop it. */
static void mark_at_element(const astitch_graph *g, const PlanKernel *k, int32_t ph,
                            const Shape *space, bool *mark, int32_t *stack)
{
    const PlanPhase *p = &k->phase[ph];
    Marks w = {g, k, ph, space, mark, stack, 0};
    for (int32_t r = 0; r < p->nroot; r++) {
        int32_t x = p->root[r];
        const Node *root = gnode(g, x);
        mark_push(&w, root->op == ASTITCH_OP_REDUCE && root->attr.axes == p->map.reduce_axes
                          ? goperand(g, x, 0) : x);
    }
    while (w.n > 0) {
        int32_t x = stack[--w.n];
        const Node *node = gnode(g, x);
        astitch_op_class c = astitch_op_class_of(node->op);
        if (!plan_kernel_op(k, x) || (c != ASTITCH_CLASS_LIGHT && c != ASTITCH_CLASS_HEAVY))
            continue;
        for (int i = 0; i < node->nin; i++)
            mark_push(&w, goperand(g, x, i));
    }
}

/* Bytes per element of the space that phase ph reads from kernel inputs with the space's
 * elements, not looking below the nodes in blocked (nblocked of them). seen[] is clear on entry
 * and on return. */
static int64_t input_bytes(const astitch_graph *g, const PlanKernel *k, int32_t ph,
                           int64_t elements, const int32_t *blocked, int nblocked, bool *seen,
                           int32_t *stack, int32_t *visited)
{
    const PlanPhase *p = &k->phase[ph];
    int32_t n = 0, nv = 0;
    int64_t bytes = 0;
    for (int32_t r = 0; r < p->nroot; r++)
        if (!seen[p->root[r]]) {
            seen[p->root[r]] = true;
            visited[nv++] = stack[n++] = p->root[r];
        }
    while (n > 0) {
        int32_t x = stack[--n];
        bool stop = false;
        for (int i = 0; i < nblocked; i++)
            stop = stop || blocked[i] == x;
        const PlanOp *o = plan_kernel_op(k, x);
        const Node *node = gnode(g, x);
        if (stop || (o && o->phase >= 0 && o->phase < ph))
            continue;
        if (!o) {
            if (shape_elements(&node->shape) == elements)
                bytes += (int64_t)astitch_dtype_size(node->dtype);
            continue;
        }
        for (int i = 0; i < node->nin; i++) {
            int32_t y = goperand(g, x, i);
            if (!seen[y]) {
                seen[y] = true;
                visited[nv++] = stack[n++] = y;
            }
        }
    }
    for (int32_t i = 0; i < nv; i++)
        seen[visited[i]] = false;
    return bytes;
}

/* The set chosen, and what the walk offers it. */
typedef struct Choice {
    int32_t node[CARRY_SET_MAX];
    int n;
    int64_t slots, bytes;  /* iterations kept per thread; shared bytes per element of the set */
    double saved;          /* bytes per element saved, times the share of iterations kept */
} Choice;

typedef struct Walks {
    int32_t from, to;      /* phases; -1 when the kernel has no such pair */
    astitch_barrier barrier; /* between them: GLOBAL, or BLOCK (every iteration kept) */
    int v;                 /* elements per iteration */
    int64_t iterations;    /* the most one thread takes */
    int64_t free_bytes;    /* shared bytes per block left for the carried values */
    int64_t per_slot;      /* elements of one iteration of every thread of the block */
    int64_t flight;        /* elements re-read at stake: all, or one wave's rows (BLOCK) */
} Walks;

/* Shared bytes per block that kernel k's planned residency leaves free beyond its own: a carry
 * never costs a block per SM (measured on the H200, bench/RESULTS.md, *Long rows through shared
 * memory*: a softmax over rows of 32768 f32 keeping each row whole at one block of 1024 per SM
 * instead of two ran 173.4 -> 180.5 us, wav2vec 2.0's GroupNorm + GELU at three blocks of 512
 * instead of four 264.0 -> 287.4). */
static int64_t free_shared(const astitch_device *d, const PlanKernel *k)
{
    int64_t per_block = d->shared_per_sm / k->blocks_per_sm - CARRY_SHARED_RESERVE;
    if (per_block > d->shared_per_block)
        per_block = d->shared_per_block;
    return per_block - align16(k->shared_bytes);
}

/* The slots and walk geometry of w's phases (from, to and barrier set) in kernel k. */
static void walk_geometry(const astitch_plan *p, const PlanKernel *k, Walks *w)
{
    const astitch_mapping *m = &k->phase[w->from].map;
    w->v = walk_vector(p, k, w->from);
    int64_t len = m->split > 1 ? m->split_len : m->row_len;
    int64_t step = (int64_t)m->threads_per_row * w->v;
    w->iterations = (len + step - 1) / step;
    w->per_slot = (int64_t)m->block * w->v;
}

/* The first pair of walks of k that can carry (phase from, the first later phase to with the
 * same walk after a global barrier), with the shared memory its residency leaves free. */
static Walks find_walks(const astitch_plan *p, const PlanKernel *k)
{
    Walks w = {.from = -1, .to = -1};
    for (int32_t i = 0; i < k->nphase && w.to < 0; i++) {
        if (!walk_phase(k, i) || walk_vector(p, k, i) < 1)
            continue;
        for (int32_t j = i + 1; j < k->nphase && w.to < 0; j++)
            if (walk_phase(k, j) && sched_map_equal(&k->phase[i].map, &k->phase[j].map) &&
                barrier_between(k, i, j) && walk_vector(p, k, j) == walk_vector(p, k, i)) {
                w.from = i;
                w.to = j;
            }
    }
    if (w.to < 0)
        return w;
    const astitch_device *d = &p->dev;
    w.barrier = ASTITCH_BARRIER_GLOBAL;
    walk_geometry(p, k, &w);
    w.free_bytes = free_shared(d, k);
    Shape space = plan_mapping_space(&k->phase[w.from].map);
    w.flight = shape_elements(&space);
    return w;
}

/* The first pair of row walks of one tile run of k, a kernel of a block per tile, that can
 * carry across the block barrier between them, with the shared memory its residency leaves
 * free. */
static Walks find_block_walks(const astitch_plan *p, const PlanKernel *k)
{
    Walks w = {.from = -1, .to = -1};
    for (int32_t i = 0; i < k->nphase && w.to < 0; i++) {
        if (!row_walk_in_run(p, k, i) || walk_vector(p, k, i) < 1)
            continue;
        for (int32_t j = i + 1; j < k->nphase && k->phase[j].run_first == k->phase[i].run_first &&
                                w.to < 0; j++)
            if (row_walk_in_run(p, k, j) &&
                sched_map_equal(&k->phase[i].map, &k->phase[j].map) &&
                walk_vector(p, k, j) == walk_vector(p, k, i)) {
                w.from = i;
                w.to = j;
            }
    }
    if (w.to < 0)
        return w;
    const astitch_device *d = &p->dev;
    const astitch_mapping *m = &k->phase[w.from].map;
    w.barrier = ASTITCH_BARRIER_BLOCK;
    walk_geometry(p, k, &w);
    w.free_bytes = free_shared(d, k);
    int64_t rows = (int64_t)k->blocks_per_wave * m->rows_per_block;
    w.flight = (rows < m->rows ? rows : m->rows) * m->row_len;
    return w;
}

/* The set of one or two of the candidates (nc of them) that saves walk w.to the most bytes,
 * into *best (n 0: none saves enough). */
static void choose(const astitch_graph *g, const astitch_device *d, const PlanKernel *k,
                   const Walks *w, const int32_t *cand, int nc, int64_t elements, bool *seen,
                   int32_t *stack, int32_t *visited, Choice *best)
{
    *best = (Choice){0};
    int64_t reads = input_bytes(g, k, w->to, elements, NULL, 0, seen, stack, visited);
    for (int i = 0; i < nc; i++)
        for (int j = i; j < nc; j++) { /* j == i: the one candidate alone */
            int32_t set[CARRY_SET_MAX] = {cand[i], cand[j]};
            int n = j == i ? 1 : 2;
            int64_t bytes = 0;
            for (int s = 0; s < n; s++)
                bytes += (int64_t)astitch_dtype_size(gnode(g, set[s])->dtype);
            int64_t slots = (w->free_bytes - 16 * n) / (w->per_slot * bytes);
            if (slots > w->iterations)
                slots = w->iterations;
            if (slots < 1 || (w->barrier == ASTITCH_BARRIER_BLOCK && slots < w->iterations))
                continue;
            int64_t left = input_bytes(g, k, w->to, elements, set, n, seen, stack, visited);
            double saved = (double)(reads - left) * (double)slots / (double)w->iterations;
            if ((double)w->flight * saved < (double)(d->l2_bytes / CARRY_L2_SHARE))
                continue;
            if (saved > best->saved || (saved == best->saved && saved > 0 && bytes < best->bytes)) {
                *best = (Choice){.n = n, .slots = slots, .bytes = bytes, .saved = saved};
                for (int s = 0; s < n; s++)
                    best->node[s] = set[s];
            }
        }
}

/* A CARRY buffer per node of c after k's shared buffers, and k->carry; false when out of
 * memory. */
static bool add_buffers(const astitch_graph *g, PlanKernel *k, const Walks *w, const Choice *c)
{
    int32_t cap = k->nbuf;
    int64_t at = align16(k->shared_bytes);
    for (int s = 0; s < c->n; s++) {
        const Node *node = gnode(g, c->node[s]);
        PlanBuffer buf = {.kind = ASTITCH_BUFFER_CARRY, .node = c->node[s],
                          .dtype = node->dtype, .elements = c->slots * w->per_slot,
                          .offset = at, .first_phase = w->from, .last_phase = w->to};
        buf.bytes = align16(buf.elements * (int64_t)astitch_dtype_size(node->dtype));
        if (!ARRAY_RESERVE(k->buf, k->nbuf, cap, 8))
            return false;
        k->buf[k->nbuf++] = buf;
        at += buf.bytes;
    }
    k->shared_bytes = at;
    k->carry = (PlanCarry){.from = w->from, .to = w->to, .barrier = w->barrier, .vector = w->v,
                           .slots = c->slots, .iterations = w->iterations};
    return true;
}

astitch_status pass_carry(Planner *pl, PlanKernel *k)
{
    const astitch_plan *p = pl->p;
    const astitch_graph *g = pl->g;
    k->carry = (PlanCarry){.from = -1, .to = -1};
    if (!p->opt.carry || k->blocks_per_sm < 1 || (k->persistent && k->global_barriers == 0))
        return ASTITCH_OK;
    Walks w = k->persistent ? find_walks(p, k) : find_block_walks(p, k);
    if (w.to < 0 || w.free_bytes < w.per_slot)
        return ASTITCH_OK;
    Shape space = plan_mapping_space(&k->phase[w.from].map);
    bool *in_a = calloc((size_t)g->nnode, sizeof *in_a);
    bool *in_b = calloc((size_t)g->nnode, sizeof *in_b);
    bool *seen = calloc((size_t)g->nnode, sizeof *seen);
    int32_t *stack = malloc(((size_t)g->nnode + 1) * sizeof *stack);
    int32_t *visited = malloc(((size_t)g->nnode + 1) * sizeof *visited);
    bool ok = in_a && in_b && seen && stack && visited;
    if (ok) {
        mark_at_element(g, k, w.from, &space, in_a, stack);
        mark_at_element(g, k, w.to, &space, in_b, stack);
        int32_t cand[CARRY_CANDIDATES_MAX];
        int nc = 0;
        for (int32_t x = 0; x < g->nnode && nc < CARRY_CANDIDATES_MAX; x++)
            if (in_a[x] && in_b[x])
                cand[nc++] = x;
        Choice best;
        choose(g, &p->dev, k, &w, cand, nc, shape_elements(&space), seen, stack, visited, &best);
        ok = best.n == 0 || add_buffers(g, k, &w, &best);
    }
    free(in_a);
    free(in_b);
    free(seen);
    free(stack);
    free(visited);
    return ok ? ASTITCH_OK : ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
}
