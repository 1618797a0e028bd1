/* emit_resident.c: a resident tile run (PlanPhase.resident): the rows of a row-reduce mapping
 * kept in registers across the run's phases.
 *
 * Lane l of a row holds the row elements [(s * lanes + l) * vector, ... + vector) for the slots
 * s = 0 .. slots - 1, so that a warp's accesses of one slot are adjacent vectors. Each element
 * has its own value cache (Emit.cache), kept for the whole run, so a value computed in one phase
 * (a kernel input loaded once per slot with one vector load, the exp of a softmax) is a register
 * in every later phase. Every lane of a row ends a reduction with the row's result, which later
 * phases read from Emit.rowval instead of from shared memory; so the run's phases need no block
 * barrier between them. Invalid lanes (rows past the block's chunk or the tensor, slots past the
 * row) compute on the block's first row (its own part of any regional value read from shared
 * memory) or slot 0 and store nothing, so that every lane reaches every shuffle and barrier,
 * and loads stay in bounds.
 *
 * A reduce summed across the rows (plan_reduce_across) is taken first in its phase, by
 * emit_across.c. */
#define ASTITCH_EMIT_INTERNAL
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "resident.h"

/* The axes of element (row, j) of a space reduced over its trailing axes. */
static void element_axes(Emit *e, const Resident *r, LLVMValueRef row, LLVMValueRef j, Index *ix)
{
    LLVMValueRef rest = j;
    int nkept = r->kept.rank;
    for (int i = r->space.rank - 1; i >= nkept; i--) {
        int64_t d = r->space.dim[i];
        ix->axis[i] = i == nkept ? rest : LLVMBuildURem(e->b, rest, ev_int(e, d), "");
        if (i > nkept)
            rest = LLVMBuildUDiv(e->b, rest, ev_int(e, d), "");
    }
    Index kept = {.shape = &r->kept, .lin = row};
    ev_axes(e, &kept);
    for (int i = 0; i < nkept; i++)
        ix->axis[i] = kept.axis[i];
    ix->has_axes = true;
}

/* Slot s of kernel input `in`, which matters only where select `sel` takes its arm `when`
 * (emit_load_guard), into vals: loaded when some element of the slot takes that arm, else
 * zeros, which the select discards. The condition's values stay in the elements' caches. */
static void load_guarded(Emit *e, Resident *r, int32_t in, int s, int32_t sel, bool when,
                         LLVMValueRef *vals)
{
    const Node *x = gnode(e->g, in);
    const Shape *at = &gnode(e->g, sel)->shape;
    bool space = at->rank == r->space.rank &&
                 !memcmp(at->dim, r->space.dim, (size_t)at->rank * sizeof at->dim[0]);
    LLVMValueRef any = NULL;
    for (int u = 0; u < r->vector; u++) {
        int k = s * r->vector + u;
        resident_at_element(e, r, k);
        Index ix = {.shape = at, .lin = r->ix[k].lin};
        LLVMValueRef c = ev_value(e, goperand(e->g, sel, 0), space ? &r->ix[k] : &ix);
        if (!when)
            c = LLVMBuildNot(e->b, c, "");
        any = any ? LLVMBuildOr(e->b, any, c, "") : c;
    }
    LLVMBasicBlockRef before = LLVMGetInsertBlock(e->b);
    LLVMBasicBlockRef merge = if_begin(e, any);
    LLVMValueRef got[VECTOR_MAX];
    ev_load_vector(e, e->tensor[in], x->dtype, r->ix[s * r->vector].lin, r->vector, got);
    LLVMBasicBlockRef loaded = LLVMGetInsertBlock(e->b);
    if_end(e, merge);
    for (int u = 0; u < r->vector; u++) {
        LLVMValueRef in_v[2] = {got[u], LLVMConstNull(LLVMTypeOf(got[u]))};
        LLVMBasicBlockRef from[2] = {loaded, before};
        vals[u] = LLVMBuildPhi(e->b, LLVMTypeOf(got[u]), "guarded");
        LLVMAddIncoming(vals[u], in_v, from, 2);
    }
}

/* The lane's rows and elements on tile tile_iv; every element's cache empty. */
static void begin_tile(Emit *e, Resident *r, LLVMValueRef tile_iv)
{
    const astitch_mapping *m = r->m;
    LLVMValueRef in_chunk = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, tile_iv,
                                         ev_int(e, m->rows_per_block), ""), r->row_in_tile, "");
    LLVMValueRef first = LLVMBuildMul(e->b, e->ctaid, ev_int(e, m->chunk), "");
    LLVMValueRef row = LLVMBuildAdd(e->b, first, in_chunk, "row");
    if (e->interleave) { /* tile T of block b is tile T * grid + b of the tensor */
        row = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, LLVMBuildAdd(e->b, LLVMBuildMul(e->b, tile_iv,
                           ev_int(e, m->grid), ""), e->ctaid, ""), ev_int(e, m->rows_per_block), ""),
                           r->row_in_tile, "row");
        in_chunk = ev_int(e, 0);
        first = ev_int(e, 0); /* no shared memory in the kernel: any row will do */
    }
    r->valid = LLVMBuildAnd(e->b,
        LLVMBuildAnd(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, r->row_in_tile, ev_int(e, m->rows_per_block), ""),
                     LLVMBuildICmp(e->b, LLVMIntSLT, in_chunk, ev_int(e, m->chunk), ""), ""),
        LLVMBuildAnd(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, row, ev_int(e, m->rows), ""),
                     e->interleave ? LLVMConstInt(LLVMInt1TypeInContext(e->c), 1, 0)
                                   : LLVMBuildICmp(e->b, LLVMIntSLT, tile_iv, ev_int(e, m->tasks_per_block), ""), ""),
        "valid");
    r->row = LLVMBuildSelect(e->b, r->valid, row, first, "row.safe");
    int32_t nnode = e->g->nnode;
    int64_t stride = (int64_t)m->threads_per_row * r->vector;
    bool ragged = m->row_len % stride != 0;
    for (int s = 0; s < r->slots; s++) {
        LLVMValueRef j0 = LLVMBuildAdd(e->b, LLVMBuildMul(e->b, r->lane, ev_int(e, r->vector), ""),
                                       ev_int(e, s * stride), "");
        r->slot_ok[s] = NULL;
        if (ragged && s == r->slots - 1) {
            r->slot_ok[s] = LLVMBuildICmp(e->b, LLVMIntSLT, j0, ev_int(e, m->row_len), "");
            j0 = LLVMBuildSelect(e->b, r->slot_ok[s], j0, ev_int(e, 0), "");
        }
        LLVMValueRef base = LLVMBuildMul(e->b, r->row, ev_int(e, m->row_len), "");
        for (int u = 0; u < r->vector; u++) {
            Index *ix = &r->ix[s * r->vector + u];
            LLVMValueRef j = u ? LLVMBuildAdd(e->b, j0, ev_int(e, u), "") : j0;
            r->col[s * r->vector + u] = j;
            *ix = (Index){.shape = &r->space, .lin = LLVMBuildAdd(e->b, base, j, "")};
            element_axes(e, r, r->row, j, ix);
        }
    }
    for (int i = 0; i < r->n * nnode; i++)
        r->cache[i] = NULL;
    for (int i = 0; i < nnode; i++)
        r->rowcache[i] = r->rowval[i] = NULL;
    e->rowval = r->rowval;
    r->rowix = (Index){.shape = &r->kept, .lin = r->row};
    /* the kernel inputs with the space's elements (its shape, or a reshape of it): one vector
     * load per slot, skipped where a select discards the slot (emit_guard.c) */
    LLVMValueRef vals[VECTOR_MAX];
    for (int32_t i = 0; i < e->k->ninput; i++) {
        int32_t in = e->k->input[i], sel;
        const Node *x = gnode(e->g, in);
        if (shape_elements(&x->shape) != shape_elements(&r->space))
            continue;
        bool when, guarded = emit_load_guard(e, in, &sel, &when);
        for (int s = 0; s < r->slots; s++) {
            if (guarded)
                load_guarded(e, r, in, s, sel, when, vals);
            else
                ev_load_vector(e, e->tensor[in], x->dtype, r->ix[s * r->vector].lin, r->vector,
                               vals);
            for (int u = 0; u < r->vector; u++)
                r->cache[(size_t)(s * r->vector + u) * (size_t)nnode + (size_t)in] = vals[u];
        }
    }
}

void resident_at_element(Emit *e, Resident *r, int k)
{
    e->cache = &r->cache[(size_t)k * (size_t)e->g->nnode];
    e->cache_ix = &r->ix[k];
    e->resident = r;
    r->at = k;
}

LLVMValueRef resident_slot_valid(Emit *e, const Resident *r, int s)
{
    return r->slot_ok[s] ? LLVMBuildAnd(e->b, r->valid, r->slot_ok[s], "") : r->valid;
}

/* Combines each lane's acc over the row's lanes; every lane of the row ends with the result.
 * Lanes of one warp by a shfl_xor butterfly; a row of several warps then exchanges the warps'
 * results through the root's REDUCE buffer between two block barriers: every lane loads all of
 * them up to COMBINE_LOADS_MAX warps, and past that one each, folded by shuffles (ptxas 13.0 on
 * a softmax over 32768 f32 in 32 warps: the 32 loads issued together took 32 registers beside
 * the row's 32 and spilled 24 bytes at 64; one load and five shuffles, 56 registers). */
enum { COMBINE_LOADS_MAX = 8 };
static LLVMValueRef combine_row(Emit *e, const Resident *r, int32_t root, LLVMValueRef acc)
{
    const Node *node = gnode(e->g, root);
    astitch_reduce_kind kind = node->attr.reduce;
    int tpr = r->m->threads_per_row;
    for (int off = (tpr < 32 ? tpr : 32) / 2; off >= 1; off /= 2)
        acc = ev_reduce_combine(e, kind, node->dtype, acc, emit_shfl_xor(e, acc, off));
    if (tpr <= 32)
        return acc;
    astitch_dtype at = emit_acc_dtype(node->dtype);
    const PlanBuffer *buf = plan_kernel_buffer(e->k, ASTITCH_BUFFER_REDUCE, root);
    int64_t need = (int64_t)(r->m->block / 32) * (int64_t)astitch_dtype_size(at);
    int warps = tpr / 32;
    if (tpr % 32 || (warps > COMBINE_LOADS_MAX && (warps & (warps - 1))))
        return ev_fail_node(e, root, LLVMTypeOf(acc), ASTITCH_ERR_UNSUPPORTED,
                            "%s: reduce node %d '%s': %d lanes per row: a row of several warps "
                            "takes whole warps, a power of two of them past %d", e->k->name, root,
                            node->name, tpr, COMBINE_LOADS_MAX);
    if (!buf || buf->bytes < need)
        return ev_fail_node(e, root, LLVMTypeOf(acc), ASTITCH_ERR_UNSUPPORTED,
                            "%s: reduce node %d '%s': %d lanes per row need a %lld-byte reduction "
                            "buffer, the plan gives %lld", e->k->name, root, node->name, tpr,
                            (long long)need, (long long)(buf ? buf->bytes : 0));
    LLVMValueRef base = ev_buffer_base(e, buf);
    LLVMBasicBlockRef merge = if_begin(e, LLVMBuildICmp(e->b, LLVMIntEQ,
                              LLVMBuildURem(e->b, e->tid, ev_int(e, 32), ""), ev_int(e, 0), ""));
    LLVMValueRef slot = LLVMBuildUDiv(e->b, e->tid, ev_int(e, 32), "");
    ev_check_shared(e, buf, slot);
    ev_store(e, base, at, slot, acc);
    if_end(e, merge);
    prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
    LLVMValueRef first = LLVMBuildMul(e->b, r->row_in_tile, ev_int(e, warps), "");
    ev_check_shared(e, buf, first);
    ev_check_shared(e, buf, LLVMBuildAdd(e->b, first, ev_int(e, warps - 1), ""));
    if (warps > COMBINE_LOADS_MAX) { /* lane l loads warp l % warps's partial; shuffles fold */
        LLVMValueRef lane = LLVMBuildAnd(e->b, e->tid, ev_int(e, warps - 1), "");
        acc = ev_load(e, base, at, LLVMBuildAdd(e->b, first, lane, ""));
        for (int off = warps / 2; off >= 1; off /= 2)
            acc = ev_reduce_combine(e, kind, node->dtype, acc, emit_shfl_xor(e, acc, off));
    } else {
        acc = ev_load(e, base, at, first);
        for (int w = 1; w < warps; w++)
            acc = ev_reduce_combine(e, kind, node->dtype, acc,
                                    ev_load(e, base, at, LLVMBuildAdd(e->b, first, ev_int(e, w), "")));
    }
    prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
    return acc;
}

/* Combines vals[0 .. n) pairwise (a balanced tree: short dependency chains). */
static LLVMValueRef tree(Emit *e, const Node *red, LLVMValueRef *vals, int n)
{
    for (; n > 1; n = (n + 1) / 2) {
        for (int i = 0; i < n / 2; i++)
            vals[i] = ev_reduce_combine(e, red->attr.reduce, red->dtype, vals[2 * i],
                                        vals[2 * i + 1]);
        if (n % 2)
            vals[n / 2] = vals[n - 1];
    }
    return vals[0];
}

/* Stores vals (one per element of slot s of the lane) of root n, a root of the space's
 * elements (space_root): the output tensor with one vector, a buffer element by element. */
static void store_space_slot(Emit *e, Resident *r, int32_t n, int s, LLVMValueRef *vals)
{
    const PlanOp *op = plan_kernel_op(e->k, n);
    astitch_dtype t = gnode(e->g, n)->dtype;
    LLVMBasicBlockRef merge = if_begin(e, resident_slot_valid(e, r, s));
    for (int u = 0; u < r->vector; u++)
        ev_store_root_buffer(e, n, &r->ix[s * r->vector + u], vals[u]);
    if (op->output && e->tensor[n])
        ev_store_vector(e, e->tensor[n], t, r->ix[s * r->vector].lin, r->vector, vals);
    if_end(e, merge);
}

/* Stores v, the value of root n (row-shaped) at the lane's row, where it is needed beyond the
 * run: once per row, by its lane 0. */
static void store_row_root(Emit *e, Resident *r, int32_t n, LLVMValueRef v)
{
    LLVMBasicBlockRef merge = if_begin(e, LLVMBuildAnd(e->b, r->valid,
                              LLVMBuildICmp(e->b, LLVMIntEQ, r->lane, ev_int(e, 0), ""), ""));
    Index at = {.shape = &r->kept, .lin = r->row};
    ev_store_root(e, n, &at, v);
    if_end(e, merge);
}

/* An element-wise phase over the run's rows: every lane computes the roots at its row. */
static void row_phase(Emit *e, Resident *r, const PlanPhase *p)
{
    e->cache = r->rowcache;
    e->cache_ix = &r->rowix;
    for (int i = 0; i < p->nroot; i++) {
        int32_t n = p->root[i];
        const Node *node = gnode(e->g, n);
        if (!shape_equal(&node->shape, &r->kept)) { /* computed at its own index, nothing of the run on the way */
            Index own = {.shape = &node->shape, .lin = r->row};
            store_row_root(e, r, n, ev_value(e, n, &own));
            continue;
        }
        LLVMValueRef v = ev_value(e, n, &r->rowix);
        store_row_root(e, r, n, v);
        e->rowval[n] = v;
    }
}

/* Whether root n has the space's elements: the space's shape, or another of as many elements
 * (a reshape of it), whose element at the space element's linear index it computes and
 * stores there. */
static bool space_root(Emit *e, const Resident *r, int32_t n)
{
    return shape_elements(&gnode(e->g, n)->shape) == shape_elements(&r->space);
}

/* Root n of a reduce phase, of the space's elements (space_root), at element k = s * vector +
 * u of the lane, into vals[k]. */
static void element_root(Emit *e, Resident *r, int32_t n, int s, int u, LLVMValueRef *vals)
{
    int k = s * r->vector + u;
    const Node *node = gnode(e->g, n);
    if (!space_root(e, r, n)) {
        vals[k] = ev_fail_node(e, n, ev_type(e, node->dtype), ASTITCH_ERR_INTERNAL,
                               "%s: root %d '%s' of resident phase %d has %lld elements, its "
                               "space %lld", e->k->name, n, node->name, e->phase,
                               (long long)shape_elements(&node->shape),
                               (long long)shape_elements(&r->space));
        return;
    }
    resident_at_element(e, r, k);
    Index own = {.shape = &node->shape, .lin = r->ix[k].lin};
    vals[k] = ev_value(e, n, shape_equal(&node->shape, &r->space) ? &r->ix[k] : &own);
}

/* Whether root n of a reduce phase is the row reduction of the run's mapping. */
static bool row_reduce_root(Emit *e, const Resident *r, int32_t n)
{
    const Node *node = gnode(e->g, n);
    return node->op == ASTITCH_OP_REDUCE && node->attr.axes == r->m->reduce_axes &&
           shape_equal(&gnode(e->g, goperand(e->g, n, 0))->shape, &r->space);
}

/* Root n, a row reduction: over the lane's elements, then across the row's lanes. */
static void row_reduce(Emit *e, Resident *r, int32_t n, LLVMValueRef *vals)
{
    const Node *node = gnode(e->g, n);
    for (int k = 0; k < r->n; k++) {
        resident_at_element(e, r, k);
        LLVMValueRef v = ev_value(e, goperand(e->g, n, 0), &r->ix[k]);
        LLVMValueRef ok = r->slot_ok[k / r->vector];
        vals[k] = ok ? LLVMBuildSelect(e->b, ok, v,
                                       ev_reduce_identity(e, node->attr.reduce, node->dtype), "")
                     : v;
    }
    LLVMValueRef total = combine_row(e, r, n, tree(e, node, vals, r->n));
    store_row_root(e, r, n, total);
    e->rowval[n] = total;
}

/* A reduce phase: its row reductions, and its other roots at every element of the lane. One
 * such root is computed at all the elements before it is stored a slot at a time: its loads
 * (a layer norm's weight and bias) then issue together. A slot at a time takes fewer registers
 * (a layer norm's 80 -> 53) but made the backward layer norms spill and ran up to 8.7% slower
 * on the suite's norms, faster on one (bench/RESULTS.md, *The last phase's one root a slot at
 * a time*). Several go a slot at a time after the row reductions, every root at the slot's
 * elements before the next slot, so a slot's values die once stored; all the elements of one
 * root after another kept every element of every root live (a graph whose roots were sin, erf
 * and a select of the sin spilled 552 bytes at 128 registers; a slot at a time, 84 registers
 * and no spill). */
static void reduce_phase(Emit *e, Resident *r, const PlanPhase *p, LLVMValueRef *vals)
{
    /* the column sums first, while little else is live (ptxas on bert_base_bwd_layernorm: 80
     * registers, against 128 with them after the row sums) */
    int elementwise = 0;
    for (int i = 0; i < p->nroot; i++) {
        int32_t n = p->root[i];
        if (plan_reduce_across(e->g, r->m, n))
            emit_across_tile(e, r, n, vals);
        else
            elementwise += !row_reduce_root(e, r, n);
    }
    bool by_slot = elementwise > 1;
    for (int i = 0; i < p->nroot; i++) {
        int32_t n = p->root[i];
        if (plan_reduce_across(e->g, r->m, n))
            continue;
        if (row_reduce_root(e, r, n)) {
            row_reduce(e, r, n, vals);
            continue;
        }
        if (by_slot)
            continue;
        for (int k = 0; k < r->n; k++)
            element_root(e, r, n, k / r->vector, k % r->vector, vals);
        for (int s = 0; s < r->slots; s++)
            store_space_slot(e, r, n, s, &vals[s * r->vector]);
    }
    for (int s = 0; by_slot && s < r->slots; s++)
        for (int i = 0; i < p->nroot; i++) {
            int32_t n = p->root[i];
            if (plan_reduce_across(e->g, r->m, n) || row_reduce_root(e, r, n))
                continue;
            for (int u = 0; u < r->vector; u++)
                element_root(e, r, n, s, u, vals);
            store_space_slot(e, r, n, s, &vals[s * r->vector]);
        }
}

/* Allocates r's arrays for n elements per lane; false when out of memory. */
static bool resident_alloc(Resident *r, size_t nnode)
{
    r->slot_ok = malloc((size_t)r->slots * sizeof *r->slot_ok);
    r->ix = malloc((size_t)r->n * sizeof *r->ix);
    r->col = malloc((size_t)r->n * sizeof *r->col);
    r->cache = malloc((size_t)r->n * nnode * sizeof *r->cache);
    r->rowcache = malloc(nnode * sizeof *r->rowcache);
    r->rowval = malloc(nnode * sizeof *r->rowval);
    r->slot_kind = malloc(nnode);
    r->slot_phase = -1;
    return r->slot_ok && r->ix && r->col && r->cache && r->rowcache && r->rowval && r->slot_kind;
}

static void resident_free(Resident *r)
{
    free(r->slot_ok);
    free(r->ix);
    free(r->col);
    free(r->cache);
    free(r->rowcache);
    free(r->rowval);
    free(r->slot_kind);
}

void emit_resident_run(Emit *e, int32_t first, int32_t end)
{
    const astitch_mapping *m = &e->k->phase[first].map;
    int64_t stride = (int64_t)m->threads_per_row * m->vector;
    int slots = m->vector > 0 ? (int)((m->row_len + stride - 1) / stride) : 0;
    int n = slots * m->vector;
    if (n < 1 || n > 32 || m->split > 1) {
        ev_fail(e, e->ix, ASTITCH_ERR_INTERNAL,
                "%s: phase %d is resident with %d elements per lane (1 to 32, not split)",
                e->k->name, first, n);
        return;
    }
    /* tiles taken at once: plan_resident_tiles, at most the block's tiles */
    int tiles = plan_resident_tiles(m);
    if (tiles > m->tasks_per_block)
        tiles = m->tasks_per_block > 0 ? (int)m->tasks_per_block : 1;
    Resident r[PLAN_RESIDENT_TILES_MAX] = {0};
    size_t nnode = (size_t)e->g->nnode;
    LLVMValueRef *element_cache = e->cache; /* the per-element cache of the other emitters */
    LLVMValueRef *vals = malloc((size_t)n * sizeof *vals);
    bool ok = vals != NULL;
    for (int u = 0; u < tiles; u++) {
        r[u] = (Resident){.m = m, .vector = m->vector, .slots = slots, .n = n};
        r[u].space.rank = m->rank;
        for (int i = 0; i < m->rank; i++) {
            r[u].space.dim[i] = m->dims[i];
            if (!(m->reduce_axes >> i & 1))
                r[u].kept.dim[r[u].kept.rank++] = m->dims[i];
        }
        ok = resident_alloc(&r[u], nnode) && ok;
    }
    if (!ok) {
        ev_fail(e, e->ix, ASTITCH_ERR_MEMORY, "out of memory");
        goto out;
    }
    int tpr = m->threads_per_row;
    LLVMValueRef row_in_tile = LLVMBuildUDiv(e->b, e->tid, ev_int(e, tpr), "");
    LLVMValueRef lane = LLVMBuildURem(e->b, e->tid, ev_int(e, tpr), "lane");
    e->run_first = first;
    e->run_end = end;
    bool across = emit_across_fold(e, first, end, true);
    if (across)
        prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
    Loop loop;
    int64_t steps = (m->tasks_per_block + tiles - 1) / tiles;
    if (e->interleave) { /* every block walks as many tiles; rows past the tensor idle */
        int64_t all = (m->rows + m->rows_per_block - 1) / m->rows_per_block;
        steps = ((all + m->grid - 1) / m->grid + tiles - 1) / tiles;
    }
    loop_begin(e, &loop, ev_int(e, 0), ev_int(e, steps), NULL, 0, NULL);
    for (int u = 0; u < tiles; u++) {
        r[u].row_in_tile = row_in_tile;
        r[u].lane = lane;
        begin_tile(e, &r[u], LLVMBuildAdd(e->b, LLVMBuildMul(e->b, loop.iv, ev_int(e, tiles), ""),
                                          ev_int(e, u), "tile"));
    }
    for (int32_t ph = first; ph < end && e->status == ASTITCH_OK; ph++) {
        e->phase = ph;
        const PlanPhase *p = &e->k->phase[ph];
        for (int u = 0; u < tiles; u++) {
            e->rowval = r[u].rowval;
            if (p->map.kind == ASTITCH_MAP_ELEMENTWISE)
                row_phase(e, &r[u], p);
            else
                reduce_phase(e, &r[u], p, vals);
        }
    }
    loop_end(e, &loop, ev_int(e, 1), NULL);
    if (across && e->status == ASTITCH_OK) { /* every tile of the block added in */
        prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
        emit_across_fold(e, first, end, false);
    }
    /* the block barriers the plan puts between the run's phases were not needed inside it;
     * a later phase may still count on them for what the run stored in shared memory */
    if (end - first > 1 && end < e->k->nphase && e->k->phase[end].barrier == ASTITCH_BARRIER_NONE)
        prim_call(e->b, e->m, PRIM_BARRIER_BLOCK, NULL, 0);
out:
    e->run_first = e->run_end = 0;
    e->cache = element_cache;
    e->cache_ix = NULL;
    e->rowval = NULL;
    e->resident = NULL;
    for (int u = 0; u < tiles; u++)
        resident_free(&r[u]);
    free(vals);
}
