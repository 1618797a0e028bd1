/* emit_value.c: the value of an op at one element, by index propagation (the paper's
 * observation A): element-wise ops evaluate their operands at the same element, data movement
 * maps the element to its source element, and materialized ops are loaded from the buffer or
 * tensor an earlier phase wrote. */
#define ASTITCH_EMIT_INTERNAL
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "resident.h"

/* Records the first failure of e's emission (with its node, or ASTITCH_NO_NODE). */
static void fail_first(Emit *e, int32_t node, astitch_status s, const char *fmt, va_list ap)
{
    if (e->status != ASTITCH_OK)
        return;
    ctx_failv(e->ctx, s, fmt, ap);
    ctx_error_at_node(e->ctx, node);
    e->status = s;
}

LLVMValueRef ev_fail(Emit *e, LLVMTypeRef ty, astitch_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_first(e, ASTITCH_NO_NODE, s, fmt, ap);
    va_end(ap);
    return LLVMGetUndef(ty);
}

LLVMValueRef ev_fail_node(Emit *e, int32_t node, LLVMTypeRef ty, astitch_status s,
                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_first(e, node, s, fmt, ap);
    va_end(ap);
    return LLVMGetUndef(ty);
}

LLVMValueRef ev_int(Emit *e, int64_t v) { return LLVMConstInt(e->ix, (unsigned long long)v, 1); }

LLVMTypeRef ev_type(Emit *e, astitch_dtype t)
{
    switch (t) {
    case ASTITCH_I32: return LLVMInt32TypeInContext(e->c);
    case ASTITCH_I64: return LLVMInt64TypeInContext(e->c);
    case ASTITCH_BOOL: return LLVMInt1TypeInContext(e->c);
    default: return LLVMFloatTypeInContext(e->c);
    }
}


void ev_begin_element(Emit *e, const Index *ix)
{
    for (int32_t i = 0; i < e->g->nnode; i++)
        e->cache[i] = NULL;
    e->cache_ix = ix;
}

LLVMValueRef ev_lin(Emit *e, Index *ix)
{
    if (ix->lin)
        return ix->lin;
    LLVMValueRef lin = ev_int(e, 0);
    int64_t stride = 1;
    for (int i = ix->shape->rank - 1; i >= 0; i--) {
        if (ix->shape->dim[i] != 1) {
            LLVMValueRef term = stride == 1 ? ix->axis[i]
                                            : LLVMBuildMul(e->b, ix->axis[i], ev_int(e, stride), "");
            lin = LLVMBuildAdd(e->b, lin, term, "lin");
        }
        stride *= ix->shape->dim[i];
    }
    return ix->lin = lin;
}

void ev_axes(Emit *e, Index *ix)
{
    if (ix->has_axes)
        return;
    LLVMValueRef rest = ix->lin;
    for (int i = ix->shape->rank - 1; i >= 0; i--) {
        int64_t d = ix->shape->dim[i];
        if (d == 1) {
            ix->axis[i] = ev_int(e, 0);
        } else if (i == 0) {
            ix->axis[i] = rest;
        } else {
            ix->axis[i] = LLVMBuildURem(e->b, rest, ev_int(e, d), "ax");
            rest = LLVMBuildUDiv(e->b, rest, ev_int(e, d), "");
        }
    }
    ix->has_axes = true;
}

void ev_broadcast_source(Emit *e, const Node *bcast, const Shape *source, Index *ix,
                         Index *sub)
{
    ev_axes(e, ix);
    *sub = (Index){.shape = source, .has_axes = true};
    for (int i = 0; i < source->rank; i++)
        sub->axis[i] = source->dim[i] == 1 ? ev_int(e, 0) : ix->axis[bcast->attr.dims[i]];
}

void ev_transpose_source(Emit *e, const Node *transpose, const Shape *source, Index *ix,
                         Index *sub)
{
    ev_axes(e, ix);
    *sub = (Index){.shape = source, .has_axes = true};
    for (int i = 0; i < source->rank; i++)
        sub->axis[transpose->attr.dims[i]] = ix->axis[i];
}

void ev_slice_source(Emit *e, const Node *slice, const Shape *source, Index *ix, Index *sub)
{
    ev_axes(e, ix);
    *sub = (Index){.shape = source, .has_axes = true};
    for (int i = 0; i < source->rank; i++) {
        LLVMValueRef a = ix->axis[i];
        if (slice->attr.stride[i] != 1)
            a = LLVMBuildMul(e->b, a, ev_int(e, slice->attr.stride[i]), "");
        if (slice->attr.dims[i] != 0)
            a = LLVMBuildAdd(e->b, a, ev_int(e, slice->attr.dims[i]), "");
        sub->axis[i] = a;
    }
}

/* ---- the walk over operands ----------------------------------------------------------------
 * A value is computed from its operands' values, and they from theirs: a walk as deep as the
 * longest chain of ops computed in the phase (tens of thousands in a long element-wise chain).
 * It runs on a stack of frames of its own, one per node being computed, so its depth is
 * bounded by memory rather than by the thread's stack. Each frame asks for its operands one at
 * a time, in operand order, and each operand is finished before its consumer goes on: the code
 * comes out in the order of a recursive walk. */

/* A node being computed at an index. The index is the caller's (ix_of -1) or the `sub` of a
 * frame below (an element-wise op passes its own on), so the lazily derived linear index and
 * axes of one index are shared by every node evaluated at it. */
typedef struct Frame {
    int32_t n;
    int32_t ix_of;         /* -1: the walk's index; else the frame whose sub is n's index */
    uint32_t gen;          /* the generation of sub (EvMemo) */
    bool cacheable;        /* n's value goes into the element cache when done */
    int k;                 /* operands asked for so far */
    LLVMValueRef arg[3];   /* element-wise: the operands' values */
    Index sub;             /* the index the operand asked for last is evaluated at */
    int64_t start;         /* concatenate: the first element, along the axis, of operand k */
    LLVMBasicBlockRef done, next;
    LLVMBasicBlockRef *from;
    LLVMValueRef *vals;
} Frame;

enum { WALK_LOCAL = 8 };

typedef struct Walk {
    Index *ix;             /* the index of the value asked for */
    Frame *f;              /* frames, the innermost last: local, or on the heap when deeper */
    int32_t n, cap;
    uint32_t gens;         /* generations of indices handed out (0: the walk's own) */
    EvMemo memo;           /* values not in the element cache, by node and generation */
    LLVMValueRef *val;     /* the memo's slots */
    int32_t nval, capval;
    Frame local[WALK_LOCAL];
} Walk;

static uint32_t walk_gen(const Walk *w, int32_t of) { return of < 0 ? 0 : w->f[of].gen; }

/* Remembers v as node n's value at the index of frame `of`; on no memory it is only not
 * remembered. */
static void walk_remember(Walk *w, int32_t n, int32_t of, LLVMValueRef v)
{
    if (!ARRAY_RESERVE(w->val, w->nval, w->capval, 64))
        return;
    if (ev_memo_add(&w->memo, n, walk_gen(w, of), w->nval))
        w->val[w->nval++] = v;
}

static Index *walk_ix(Walk *w, int32_t of) { return of < 0 ? w->ix : &w->f[of].sub; }

void *ev_frames_push(void **frames, const void *local, int32_t *n, int32_t *cap, size_t size)
{
    ASTITCH_ASSERT(*n >= 0 && *n <= *cap);
    if (*n == *cap) {
        size_t bytes = (size_t)*cap * size;
        void *f = *frames == local ? malloc(2 * bytes) : realloc(*frames, 2 * bytes);
        if (!f)
            return NULL;
        if (*frames == local)
            memcpy(f, local, bytes);
        *frames = f;
        *cap *= 2;
    }
    return (char *)*frames + (size_t)(*n)++ * size;
}

static uint64_t memo_key(int32_t node, uint32_t gen) { return ((uint64_t)gen << 32 | (uint32_t)node) + 1; }

static int32_t memo_at(const EvMemo *m, uint64_t key)
{
    uint64_t h = key * 0x9e3779b97f4a7c15ull;
    int32_t i = (int32_t)(h >> 33) & (m->cap - 1);
    while (m->key[i] && m->key[i] != key)
        i = (i + 1) & (m->cap - 1);
    return i;
}

int32_t ev_memo_find(const EvMemo *m, int32_t node, uint32_t gen)
{
    if (m->cap == 0)
        return -1;
    int32_t i = memo_at(m, memo_key(node, gen));
    return m->key[i] ? m->slot[i] : -1;
}

bool ev_memo_add(EvMemo *m, int32_t node, uint32_t gen, int32_t slot)
{
    if (2 * (m->n + 1) > m->cap) {
        EvMemo g = {calloc((size_t)(m->cap ? 2 * m->cap : 64), sizeof *g.key),
                    malloc((size_t)(m->cap ? 2 * m->cap : 64) * sizeof *g.slot),
                    m->cap ? 2 * m->cap : 64, m->n};
        if (!g.key || !g.slot) {
            free(g.key);
            free(g.slot);
            return false;
        }
        for (int32_t i = 0; i < m->cap; i++)
            if (m->key[i]) {
                int32_t at = memo_at(&g, m->key[i]);
                g.key[at] = m->key[i];
                g.slot[at] = m->slot[i];
            }
        ev_memo_free(m);
        *m = g;
    }
    int32_t at = memo_at(m, memo_key(node, gen));
    if (!m->key[at])
        m->n++;
    m->key[at] = memo_key(node, gen);
    m->slot[at] = slot;
    return true;
}

void ev_memo_free(EvMemo *m)
{
    free(m->key);
    free(m->slot);
    *m = (EvMemo){0};
}

/* A new frame on top of w (NULL when out of memory; ev_frames_push). */
static Frame *walk_push(Walk *w)
{
    return ev_frames_push((void **)&w->f, w->local, &w->n, &w->cap, sizeof *w->f);
}

/* Frame f asks for operand x at the index of frame `of` (-1 the walk's). */
static LLVMValueRef ask(int32_t x, int32_t of, int32_t *child, int32_t *child_ix)
{
    *child = x;
    *child_ix = of;
    return NULL;
}

/* Concatenate: the operand holding the element along the axis, chosen by branches so that only
 * that operand is evaluated. Starts the branch of operand f->k and asks for its value. */
static LLVMValueRef concat_take(Emit *e, Frame *f, int32_t fi, Index *ix, int32_t *child,
                                int32_t *child_ix)
{
    const Node *node = gnode(e->g, f->n);
    int axis = node->attr.axis, k = f->k;
    const Node *x = gnode(e->g, goperand(e->g, f->n, k));
    int64_t len = x->shape.dim[axis];
    bool last = k == node->nin - 1;
    LLVMBasicBlockRef take = LLVMAppendBasicBlockInContext(e->c, e->fn, "cat.take");
    f->next = last ? NULL : LLVMAppendBasicBlockInContext(e->c, e->fn, "cat.next");
    if (last)
        LLVMBuildBr(e->b, take);
    else
        LLVMBuildCondBr(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, ix->axis[axis], ev_int(e, f->start + len), ""),
                        take, f->next);
    LLVMPositionBuilderAtEnd(e->b, take);
    f->sub = (Index){.shape = &x->shape, .has_axes = true};
    for (int i = 0; i < x->shape.rank; i++)
        f->sub.axis[i] = i == axis ? LLVMBuildSub(e->b, ix->axis[i], ev_int(e, f->start), "") : ix->axis[i];
    f->k++;
    return ask(goperand(e->g, f->n, k), fi, child, child_ix);
}

/* Concatenate, as a frame: got is the value of operand f->k - 1 (NULL at the start). */
static LLVMValueRef concat_step(Emit *e, Frame *f, int32_t fi, Index *ix, LLVMValueRef got,
                                int32_t *child, int32_t *child_ix)
{
    const Node *node = gnode(e->g, f->n);
    LLVMTypeRef ty = ev_type(e, node->dtype);
    if (!got) {
        ev_axes(e, ix);
        f->done = LLVMAppendBasicBlockInContext(e->c, e->fn, "cat.done");
        f->from = malloc((size_t)node->nin * sizeof *f->from);
        f->vals = malloc((size_t)node->nin * sizeof *f->vals);
        if (!f->from || !f->vals) {
            free(f->from);
            free(f->vals);
            return ev_fail(e, ty, ASTITCH_ERR_MEMORY, "out of memory");
        }
        f->start = 0;
        e->branch_depth++;
        return concat_take(e, f, fi, ix, child, child_ix);
    }
    int k = f->k - 1;
    f->vals[k] = got;
    f->from[k] = LLVMGetInsertBlock(e->b);
    LLVMBuildBr(e->b, f->done);
    if (f->next)
        LLVMPositionBuilderAtEnd(e->b, f->next);
    f->start += gnode(e->g, goperand(e->g, f->n, k))->shape.dim[node->attr.axis];
    if (f->k < node->nin)
        return concat_take(e, f, fi, ix, child, child_ix);
    e->branch_depth--;
    LLVMPositionBuilderAtEnd(e->b, f->done);
    LLVMValueRef phi = LLVMBuildPhi(e->b, ty, "cat");
    LLVMAddIncoming(phi, f->vals, f->from, (unsigned)node->nin);
    free(f->from);
    free(f->vals);
    return phi;
}

/* Computes node n of frame fi (an op of this kernel, or inlined) at its index from its
 * operands: returns the value, or NULL having asked for an operand (*child at the index of
 * frame *child_ix), whose value comes back as got in the next call (NULL in the first). */
static LLVMValueRef compute_step(Emit *e, Walk *w, int32_t fi, LLVMValueRef got, int32_t *child,
                                 int32_t *child_ix)
{
    Frame *f = &w->f[fi];
    Index *ix = walk_ix(w, f->ix_of);
    int32_t n = f->n;
    const Node *node = gnode(e->g, n);
    const Node *x = node->nin > 0 ? gnode(e->g, goperand(e->g, n, 0)) : NULL;
    int32_t x0 = node->nin > 0 ? goperand(e->g, n, 0) : -1;
    bool moves = node->op == ASTITCH_OP_BROADCAST_IN_DIM || node->op == ASTITCH_OP_SLICE ||
                 node->op == ASTITCH_OP_RESHAPE || node->op == ASTITCH_OP_TRANSPOSE;
    if (got && moves) /* asked for its operand's value, which is the node's */
        return got;
    switch (node->op) {
    case ASTITCH_OP_CONSTANT:
        if (node->attr.nvalues == 1)
            return ev_round_to(e, node->dtype, ev_const(e, node->dtype, node->attr.values[0]));
        return ev_load(e, ev_constant_table(e, n), node->dtype, ev_lin(e, ix));
    case ASTITCH_OP_IOTA: {
        ev_axes(e, ix);
        LLVMValueRef i = ix->axis[node->attr.axis];
        if (dtype_is_float(node->dtype))
            return ev_round_to(e, node->dtype, LLVMBuildUIToFP(e->b, i, ev_type(e, node->dtype), ""));
        return LLVMBuildIntCast2(e->b, i, ev_type(e, node->dtype), 0, "");
    }
    case ASTITCH_OP_BROADCAST_IN_DIM:
        ev_broadcast_source(e, node, &x->shape, ix, &f->sub);
        return ask(x0, fi, child, child_ix);
    case ASTITCH_OP_RESHAPE:
        f->sub = (Index){.shape = &x->shape, .lin = ev_lin(e, ix)};
        return ask(x0, fi, child, child_ix);
    case ASTITCH_OP_TRANSPOSE:
        ev_transpose_source(e, node, &x->shape, ix, &f->sub);
        return ask(x0, fi, child, child_ix);
    case ASTITCH_OP_SLICE:
        ev_slice_source(e, node, &x->shape, ix, &f->sub);
        return ask(x0, fi, child, child_ix);
    case ASTITCH_OP_CONCATENATE:
        return concat_step(e, f, fi, ix, got, child, child_ix);
    case ASTITCH_OP_GATHER: {
        const Node *in = gnode(e->g, goperand(e->g, n, 1));
        if (f->k == 0) { /* the row from the indices, at the element's leading axes */
            ev_axes(e, ix);
            f->sub = (Index){.shape = &in->shape, .has_axes = true};
            for (int i = 0; i < in->shape.rank; i++)
                f->sub.axis[i] = ix->axis[i];
            f->k = 1;
            return ask(goperand(e->g, n, 1), fi, child, child_ix);
        }
        if (f->k == 2)
            return got;
        LLVMValueRef row = LLVMBuildIntCast2(e->b, got, LLVMInt64TypeInContext(e->c), 1, "");
        LLVMTypeRef i64 = LLVMInt64TypeInContext(e->c);
        LLVMValueRef lo = LLVMConstInt(i64, 0, 0), hi = LLVMConstInt(i64, (unsigned long long)(x->shape.dim[0] - 1), 0);
        row = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, row, lo, ""), lo, row, "");
        row = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, row, hi, ""), hi, row, "");
        f->sub = (Index){.shape = &x->shape, .has_axes = true};
        f->sub.axis[0] = LLVMBuildIntCast2(e->b, row, e->ix, 1, "");
        for (int i = 1; i < x->shape.rank; i++)
            f->sub.axis[i] = ix->axis[in->shape.rank + i - 1];
        f->k = 2;
        return ask(x0, fi, child, child_ix);
    }
    default:
        break;
    }
    if (!op_is_elementwise(node->op))
        return ev_fail_node(e, n, ev_type(e, node->dtype), ASTITCH_ERR_INTERNAL,
                            "%s: node %d '%s' (%s) is needed in phase %d but not materialized",
                            e->k->name, n, node->name, astitch_op_name(node->op), e->phase);
    if (got)
        f->arg[f->k - 1] = got;
    if (f->k < node->nin && f->k < 3) /* every operand at the element itself */
        return ask(goperand(e->g, n, f->k++), f->ix_of, child, child_ix);
    return ev_apply(e, n, f->arg);
}

/* Starts node n at the index of frame ix_of (-1: the walk's): its value when it needs no
 * operand (a row value of a resident run, the element cache, a load, a failure), else NULL
 * with a frame for it pushed. */
static LLVMValueRef enter(Emit *e, Walk *w, int32_t n, int32_t ix_of)
{
    if (e->rowval && e->rowval[n]) /* a resident run reads its rows' values only at the row */
        return e->rowval[n];
    Index *ix = walk_ix(w, ix_of);
    /* the cache holds values at the element cache_ix; any index with the same linear index
     * value is the same element of a node (a reshape passes its index on) */
    bool cacheable = ix == e->cache_ix || (e->cache_ix && ix->lin && ix->lin == e->cache_ix->lin);
    if (cacheable && e->cache[n])
        return e->cache[n];
    LLVMValueRef run = cacheable && e->resident ? resident_slot_value(e, n) : NULL;
    if (run) {
        e->cache[n] = run;
        return run;
    }
    int32_t slot = cacheable ? -1 : ev_memo_find(&w->memo, n, walk_gen(w, ix_of));
    if (slot >= 0)
        return w->val[slot];
    const Node *node = gnode(e->g, n);
    const PlanOp *op = plan_kernel_op(e->k, n);
    LLVMValueRef v;
    if (!op) {
        v = ev_load_materialized(e, n, NULL, ix);
    } else if (op->phase >= 0 && op->phase < e->phase) {
        v = ev_load_materialized(e, n, op, ix);
    } else if (op->phase > e->phase) {
        v = ev_fail_node(e, n, ev_type(e, node->dtype), ASTITCH_ERR_INTERNAL,
                         "%s: node %d '%s' is read in phase %d before phase %d makes it", e->k->name, n,
                         node->name, e->phase, op->phase);
    } else {
        Frame *f = walk_push(w);
        if (f) {
            *f = (Frame){.n = n, .ix_of = ix_of, .cacheable = cacheable};
            return NULL;
        }
        v = ev_fail_node(e, n, ev_type(e, node->dtype), ASTITCH_ERR_MEMORY,
                         "%s: out of memory computing node %d '%s'", e->k->name, n, node->name);
    }
    if (cacheable && e->branch_depth == 0)
        e->cache[n] = v;
    return v;
}

LLVMValueRef ev_value(Emit *e, int32_t n, Index *ix)
{
    Walk w = {.ix = ix, .cap = WALK_LOCAL};
    w.f = w.local;
    LLVMValueRef v = enter(e, &w, n, -1);
    while (w.n > 0) {
        int32_t child, child_ix;
        LLVMValueRef done = compute_step(e, &w, w.n - 1, v, &child, &child_ix);
        if (!done) {
            if (child_ix == w.n - 1) /* at an index the frame just derived */
                w.f[child_ix].gen = ++w.gens;
            v = enter(e, &w, child, child_ix);
            continue;
        }
        const Frame *f = &w.f[--w.n];
        if (f->cacheable && e->branch_depth == 0)
            e->cache[f->n] = done;
        else if (!f->cacheable)
            walk_remember(&w, f->n, f->ix_of, done);
        v = done;
    }
    if (w.f != w.local)
        free(w.f);
    ev_memo_free(&w.memo);
    free(w.val);
    return v;
}
