/*
 * interp.c: the reference interpreter, the numerical oracle every target is checked against.
 *
 * Nodes run one at a time in id order, which is topological. Each value is held wide (Wide in
 * ir.h) from the node that makes it until its last consumer has run, then its storage is kept
 * for a later value of the same size (ValuePool) or freed; an output is written to its caller
 * buffer, in its dtype, as soon as it is computed. The semantics of each op live in
 * interp_elem.c (element-wise) and interp_shape.c (movement, reduce, dot); this file
 * reads inputs, makes sources, calls custom ops, manages memory, and runs single nodes for the
 * executors (interp_node).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ir.h"

#define TS(buf, node) type_str(buf, sizeof buf, (node)->dtype, &(node)->shape)

Wide *interp_alloc(const astitch_graph *g, int32_t id, int64_t n, const char *what)
{
    const Node *node = gnode(g, id);
    char ts[160];
    if (n < 0 || (uint64_t)n > SIZE_MAX / sizeof(Wide)) {
        node_fail(g, id, ASTITCH_ERR_MEMORY,
                  "cannot allocate %s for %s: %" PRId64 " elements exceed the address space", what,
                  TS(ts, node), n);
        return NULL;
    }
    Wide *p = malloc((n > 0 ? (size_t)n : 1) * sizeof *p);
    if (!p)
        node_fail(g, id, ASTITCH_ERR_MEMORY,
                  "out of memory allocating %s for %s (%" PRIu64 " bytes)", what, TS(ts, node),
                  (uint64_t)n * sizeof *p);
    return p;
}

/* Allocates the dense storage of node x (its dtype) for node id's `what`; NULL on failure. */
static void *alloc_storage(const astitch_graph *g, int32_t id, const Node *x, const char *what)
{
    char ts[160];
    int64_t n = shape_elements(&x->shape);
    size_t size = astitch_dtype_size(x->dtype);
    if (n < 0 || (uint64_t)n > SIZE_MAX / size) {
        node_fail(g, id, ASTITCH_ERR_MEMORY,
                  "cannot allocate %s %s: %" PRId64 " elements exceed the address space", what,
                  TS(ts, x), n);
        return NULL;
    }
    void *p = calloc(n > 0 ? (size_t)n : 1, size);
    if (!p)
        node_fail(g, id, ASTITCH_ERR_MEMORY, "out of memory allocating %s %s (%" PRIu64 " bytes)",
                  what, TS(ts, x), (uint64_t)n * size);
    return p;
}

/* Reads n elements of dtype t from dense storage. */
static void unpack(astitch_dtype t, const void *src, Wide *dst, int64_t n)
{
    switch (t) {
    case ASTITCH_F32:
        for (int64_t k = 0; k < n; k++)
            dst[k].f = ((const float *)src)[k];
        break;
    case ASTITCH_F16:
        for (int64_t k = 0; k < n; k++)
            dst[k].f = half_to_float(((const uint16_t *)src)[k]);
        break;
    case ASTITCH_BF16:
        for (int64_t k = 0; k < n; k++)
            dst[k].f = bf16_to_float(((const uint16_t *)src)[k]);
        break;
    case ASTITCH_I32:
        for (int64_t k = 0; k < n; k++)
            dst[k].i = ((const int32_t *)src)[k];
        break;
    case ASTITCH_I64:
        for (int64_t k = 0; k < n; k++)
            dst[k].i = ((const int64_t *)src)[k];
        break;
    case ASTITCH_BOOL:
        for (int64_t k = 0; k < n; k++)
            dst[k].i = ((const uint8_t *)src)[k] != 0;
        break;
    case ASTITCH_DTYPE_COUNT: break;
    }
}

/* Writes n wide elements, already exact in dtype t, to dense storage. */
static void pack(astitch_dtype t, const Wide *src, void *dst, int64_t n)
{
    switch (t) {
    case ASTITCH_F32:
        for (int64_t k = 0; k < n; k++)
            ((float *)dst)[k] = (float)src[k].f;
        break;
    case ASTITCH_F16:
        for (int64_t k = 0; k < n; k++)
            ((uint16_t *)dst)[k] = float_to_half((float)src[k].f);
        break;
    case ASTITCH_BF16:
        for (int64_t k = 0; k < n; k++)
            ((uint16_t *)dst)[k] = float_to_bf16((float)src[k].f);
        break;
    case ASTITCH_I32:
        for (int64_t k = 0; k < n; k++)
            ((int32_t *)dst)[k] = (int32_t)src[k].i;
        break;
    case ASTITCH_I64:
        for (int64_t k = 0; k < n; k++)
            ((int64_t *)dst)[k] = src[k].i;
        break;
    case ASTITCH_BOOL:
        for (int64_t k = 0; k < n; k++)
            ((uint8_t *)dst)[k] = src[k].i != 0;
        break;
    case ASTITCH_DTYPE_COUNT: break;
    }
}

static void constant(const Node *n, Wide *out)
{
    int64_t count = shape_elements(&n->shape);
    for (int64_t k = 0; k < count; k++)
        out[k] = wide_from_double(n->dtype, n->attr.values[n->attr.nvalues == 1 ? 0 : k]);
}

static void iota(const Node *n, Wide *out)
{
    int64_t st[MAX_RANK];
    shape_strides(&n->shape, st);
    int64_t count = shape_elements(&n->shape), step = st[n->attr.axis];
    int64_t len = n->shape.dim[n->attr.axis];
    for (int64_t k = 0; k < count; k++)
        out[k] = wide_from_double(n->dtype, (double)(k / step % len));
}

/* Runs a custom node through the host function registered for its target: operands are
 * passed dense in their dtypes, the output is read back from a buffer of the node's dtype. */
static astitch_status custom(const astitch_graph *g, int32_t id, Wide *const *val, Wide *out)
{
    const Node *n = gnode(g, id);
    const CustomFn *cf = ctx_custom(g->ctx, n->attr.target);
    if (!cf || !cf->fn)
        return node_fail(g, id, ASTITCH_ERR_UNSUPPORTED,
                         "no host implementation is registered for custom target '%s' "
                         "(see astitch_register_custom)",
                         n->attr.target);
    astitch_status s = ASTITCH_OK;
    astitch_tensor_view *views = calloc(n->nin > 0 ? (size_t)n->nin : 1, sizeof *views);
    void *data = alloc_storage(g, id, n, "the result");
    if (!views && data)
        s = node_fail(g, id, ASTITCH_ERR_MEMORY, "out of memory for %d operand views", n->nin);
    if (!data)
        s = ASTITCH_ERR_MEMORY;
    for (int k = 0; s == ASTITCH_OK && k < n->nin; k++) {
        const Node *x = gnode(g, goperand(g, id, k));
        views[k] = (astitch_tensor_view){.dtype = x->dtype, .rank = x->shape.rank};
        memcpy(views[k].dims, x->shape.dim, sizeof views[k].dims);
        if (!(views[k].data = alloc_storage(g, id, x, "an operand")))
            s = ASTITCH_ERR_MEMORY;
        else
            pack(x->dtype, val[goperand(g, id, k)], views[k].data, shape_elements(&x->shape));
    }
    if (s == ASTITCH_OK) {
        astitch_tensor_view ov = {.dtype = n->dtype, .rank = n->shape.rank, .data = data};
        memcpy(ov.dims, n->shape.dim, sizeof ov.dims);
        s = cf->fn(cf->user, n->nin, views, &ov);
        if (s != ASTITCH_OK)
            node_fail(g, id, s, "custom target '%s' failed: %s", n->attr.target,
                      astitch_status_name(s));
        else
            unpack(n->dtype, data, out, shape_elements(&n->shape));
    }
    for (int k = 0; views && k < n->nin; k++)
        free(views[k].data);
    free(views);
    free(data);
    return s;
}

/* Computes node id into val[id], storage of its elements already there. */
static astitch_status run_node(const astitch_graph *g, int32_t id, Wide **val,
                               const void *const *inputs)
{
    const Node *n = gnode(g, id);
    int64_t count = shape_elements(&n->shape);
    Wide *out = val[id];
    switch (n->op) {
    case ASTITCH_OP_PARAMETER: unpack(n->dtype, inputs[n->attr.param], out, count); break;
    case ASTITCH_OP_CONSTANT: constant(n, out); break;
    case ASTITCH_OP_IOTA: iota(n, out); break;
    case ASTITCH_OP_CUSTOM: return custom(g, id, val, out);
    default:
        if (op_is_elementwise(n->op))
            return interp_elementwise(g, id, val, out);
        return interp_structural(g, id, val, out);
    }
    return ASTITCH_OK;
}

/* Freed values kept for the next values of their size, within one run. A value of hundreds of
 * MB freed to the system and allocated again costs the faults and zeroing of all its pages
 * each time, most of the reference's time on the large graphs (a GPT-2 causal softmax of 805
 * MB: 10 of 24 s in the kernel). A block serves only a value of exactly its size, and blocks
 * are freed before the run would hold more than the peak check_peak() measured, so the run
 * never holds more than that peak. */
enum { POOL_BLOCKS = 8 };
typedef struct ValuePool {
    Wide *block[POOL_BLOCKS];
    int64_t n[POOL_BLOCKS]; /* elements of each block */
    int count;
    uint64_t live, pooled, peak; /* bytes of values live, of blocks kept, the most allowed */
} ValuePool;

static uint64_t wide_bytes(int64_t n) { return (uint64_t)(n > 0 ? n : 1) * sizeof(Wide); }

/* Takes kept block i out of the pool and returns it. */
static Wide *pool_remove(ValuePool *pool, int i)
{
    Wide *p = pool->block[i];
    pool->pooled -= wide_bytes(pool->n[i]);
    pool->block[i] = pool->block[--pool->count];
    pool->n[i] = pool->n[pool->count];
    return p;
}

/* Storage for n elements of node id's value: a kept block of n elements, or a new one after
 * freeing kept blocks (the largest first) until the run stays within the peak. */
static Wide *pool_take(ValuePool *pool, const astitch_graph *g, int32_t id, int64_t n)
{
    for (int i = 0; i < pool->count; i++)
        if (pool->n[i] == n) {
            pool->live += wide_bytes(n);
            return pool_remove(pool, i);
        }
    while (pool->count > 0 && pool->live + pool->pooled + wide_bytes(n) > pool->peak) {
        int big = 0;
        for (int i = 1; i < pool->count; i++)
            big = pool->n[i] > pool->n[big] ? i : big;
        free(pool_remove(pool, big));
    }
    Wide *p = interp_alloc(g, id, n, "the value");
    if (p)
        pool->live += wide_bytes(n);
    return p;
}

/* Returns the storage of a value of n elements (NULL: none) to the pool, or to the system
 * when the pool is full. */
static void pool_give(ValuePool *pool, Wide *p, int64_t n)
{
    if (!p)
        return;
    pool->live -= wide_bytes(n);
    if (pool->count == POOL_BLOCKS) {
        free(p);
        return;
    }
    pool->block[pool->count] = p;
    pool->n[pool->count++] = n;
    pool->pooled += wide_bytes(n);
}

static void pool_free(ValuePool *pool)
{
    for (int i = 0; i < pool->count; i++)
        free(pool->block[i]);
    pool->count = 0;
    pool->pooled = 0;
}

/* Rejects a NULL array of buffers, and a NULL buffer in it, naming the first: the
 * parameters' (params) or the outputs'. */
static astitch_status check_list(const astitch_graph *g, bool params, const void *const *buf)
{
    const char *list = params ? "inputs" : "outputs";
    const int32_t *ids = params ? g->param : g->output;
    int32_t count = params ? g->nparam : g->noutput;
    char ts[160];
    if (count > 0 && !buf)
        return ctx_fail(g->ctx, ASTITCH_ERR_ARGUMENT,
                        "astitch_run_reference: %s is NULL, but the graph has %d %s", list,
                        count, params ? "parameters" : "outputs");
    for (int32_t i = 0; i < count; i++)
        if (!buf[i])
            return ctx_fail(g->ctx, ASTITCH_ERR_ARGUMENT,
                            "astitch_run_reference: %s[%d] is NULL (%snode %d '%s' %s)", list, i,
                            params ? "parameter " : "", ids[i],
                            gnode(g, ids[i])->name, TS(ts, gnode(g, ids[i])));
    return ASTITCH_OK;
}

static astitch_status check_buffers(const astitch_graph *g, const void *const *inputs,
                                    void *const *outputs)
{
    astitch_status s = check_list(g, true, inputs);
    return s == ASTITCH_OK ? check_list(g, false, (const void *const *)outputs) : s;
}

/* The bytes the reference may hold at once: three quarters of the smallest of the machine's
 * memory, a cgroup's limit (v2 memory.max) and the process's address-space and data limits.
 * Past it a run would be killed by the system rather than fail: allocations succeed (memory is
 * overcommitted) and the kill comes when the pages are touched. */
static uint64_t memory_budget(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t most = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : UINT64_MAX;
    FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
    unsigned long long cg;
    if (f && fscanf(f, "%llu", &cg) == 1 && cg < most) /* "max" reads as no number */
        most = cg;
    if (f)
        fclose(f);
    static const int limits[] = {RLIMIT_AS, RLIMIT_DATA};
    for (int i = 0; i < 2; i++) {
        struct rlimit rl;
        if (getrlimit(limits[i], &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < most)
            most = rl.rlim_cur;
    }
    return most / 4 * 3;
}

/* Refuses, before anything runs, a graph whose values live at once (each value from the node
 * that makes it to its last reader, a dot's packed operands too) would need more than the
 * memory budget, naming the node where they peak. */
static astitch_status check_peak(const astitch_graph *g, const int32_t *last, uint64_t *out)
{
    uint64_t live = 0, peak = 0;
    int32_t at = -1;
    for (int32_t id = 0; id < g->nnode; id++) {
        const Node *n = gnode(g, id);
        uint64_t here = (uint64_t)shape_elements(&n->shape) * sizeof(Wide);
        if (n->op == ASTITCH_OP_DOT)
            for (int k = 0; k < 2; k++)
                here += (uint64_t)shape_elements(&gnode(g, goperand(g, id, k))->shape) * sizeof(Wide);
        if (live + here > peak) {
            peak = live + here;
            at = id;
        }
        live += (uint64_t)shape_elements(&n->shape) * sizeof(Wide);
        for (int k = 0; k < n->nin; k++) {
            int32_t x = goperand(g, id, k);
            bool first = true; /* an operand read twice is freed once */
            for (int j = 0; j < k; j++)
                first &= goperand(g, id, j) != x;
            if (last[x] == id && first)
                live -= (uint64_t)shape_elements(&gnode(g, x)->shape) * sizeof(Wide);
        }
        if (last[id] == id)
            live -= (uint64_t)shape_elements(&n->shape) * sizeof(Wide);
    }
    uint64_t budget = memory_budget();
    *out = peak;
    if (peak <= budget)
        return ASTITCH_OK;
    char ts[160];
    return node_fail(g, at, ASTITCH_ERR_MEMORY,
                     "the reference would hold %" PRIu64 " bytes at once here (values of %s "
                     "and those still to be read, 8 bytes an element), more than the %" PRIu64
                     " bytes this process may use (three quarters of its memory limit); the "
                     "host target runs such a graph without holding whole intermediates",
                     peak, TS(ts, gnode(g, at)), budget);
}

/* Output buffers must not overlap input buffers: outputs are written while later nodes may
 * still read parameters. On failure the contents of the outputs are unspecified. */
astitch_status astitch_run_reference(astitch_graph *g, const void *const *inputs,
                                     void *const *outputs)
{
    if (!g)
        return ASTITCH_ERR_ARGUMENT;
    astitch_status s = astitch_graph_verify(g);
    if (s == ASTITCH_OK)
        s = check_buffers(g, inputs, outputs);
    if (s != ASTITCH_OK)
        return s;
    int32_t nn = g->nnode;
    size_t slots = nn > 0 ? (size_t)nn : 1;
    Wide **val = calloc(slots, sizeof *val);
    int32_t *last = malloc(slots * sizeof *last); /* id of the last node reading each value */
    int32_t *outof = malloc(slots * sizeof *outof); /* output index of each node, or -1 */
    if (!val || !last || !outof) {
        s = ctx_fail(g->ctx, ASTITCH_ERR_MEMORY,
                     "astitch_run_reference: out of memory for the tables of %d nodes", nn);
        nn = 0;
    }
    for (int32_t id = 0; id < nn; id++) {
        last[id] = id;
        outof[id] = -1;
        for (int k = 0; k < gnode(g, id)->nin; k++)
            last[goperand(g, id, k)] = id;
    }
    for (int32_t i = 0; i < g->noutput && nn > 0; i++)
        outof[g->output[i]] = i;
    ValuePool pool = {.count = 0};
    if (s == ASTITCH_OK && nn > 0)
        s = check_peak(g, last, &pool.peak);
    for (int32_t id = 0; id < nn && s == ASTITCH_OK; id++) {
        const Node *n = gnode(g, id);
        int64_t count = shape_elements(&n->shape);
        if (n->op == ASTITCH_OP_DOT || n->op == ASTITCH_OP_CUSTOM)
            pool_free(&pool); /* they allocate more of their own (packed or dense operands) */
        if (!(val[id] = pool_take(&pool, g, id, count))) {
            s = ASTITCH_ERR_MEMORY;
            break;
        }
        s = run_node(g, id, val, inputs);
        if (s == ASTITCH_OK && outof[id] >= 0)
            pack(n->dtype, val[id], outputs[outof[id]], count);
        for (int k = 0; k < n->nin; k++) {
            int32_t x = goperand(g, id, k);
            if (last[x] == id) {
                pool_give(&pool, val[x], shape_elements(&gnode(g, x)->shape));
                val[x] = NULL;
            }
        }
        if (last[id] == id) {
            pool_give(&pool, val[id], count);
            val[id] = NULL;
        }
    }
    for (int32_t id = 0; val && id < g->nnode; id++)
        free(val[id]);
    pool_free(&pool);
    free(val);
    free(last);
    free(outof);
    return s;
}

astitch_status interp_node(const astitch_graph *g, int32_t id, const void *const *operands,
                           void *out)
{
    const Node *n = gnode(g, id);
    if (n->op == ASTITCH_OP_PARAMETER)
        return node_fail(g, id, ASTITCH_ERR_INTERNAL, "interp_node: a parameter has no operands");
    Wide **val = calloc((size_t)g->nnode + 1, sizeof *val);
    if (!val)
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    astitch_status s = ASTITCH_OK;
    for (int k = 0; k < n->nin && s == ASTITCH_OK; k++) {
        int32_t x = goperand(g, id, k);
        if (val[x])
            continue;
        const Node *xn = gnode(g, x);
        int64_t count = shape_elements(&xn->shape);
        if (!(val[x] = interp_alloc(g, x, count, "an operand")))
            s = ASTITCH_ERR_MEMORY;
        else
            unpack(xn->dtype, operands[k], val[x], count);
    }
    if (s == ASTITCH_OK &&
        !(val[id] = interp_alloc(g, id, shape_elements(&n->shape), "the value")))
        s = ASTITCH_ERR_MEMORY;
    if (s == ASTITCH_OK)
        s = run_node(g, id, val, NULL);
    if (s == ASTITCH_OK)
        pack(n->dtype, val[id], out, shape_elements(&n->shape));
    for (int32_t i = 0; i < g->nnode; i++)
        free(val[i]);
    free(val);
    return s;
}
