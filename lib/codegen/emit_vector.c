/* emit_vector.c: the values of an op at a run of v consecutive elements, by index propagation
 * over whole runs. A run starts at an element whose innermost axis is a multiple of v, in a
 * shape whose innermost dimension v divides: its elements share every other axis, and its
 * linear index is a multiple of v. Index maps that keep such a run a run (element-wise ops,
 * broadcasts, slices and transposes that keep the innermost axis, reshapes to an innermost
 * dimension v divides) pass it on, so a kernel tensor at the end is read with one vector load
 * wherever the run lands in it (a rotary embedding's rotated half, a bias); a concatenate whose
 * operand is the same for the whole run selects or branches once per run, not per element; a value
 * the same at every element of the run (a row's mean through a broadcast) is computed once.
 * Anything else is evaluated element by element through ev_value. */
#define ASTITCH_EMIT_INTERNAL
#include <stdlib.h>

#include "codegen.h"

/* The index of element j of the run at *ix. */
static Index element(Emit *e, Index *ix, int j)
{
    ev_axes(e, ix);
    Index el = *ix;
    if (j == 0)
        return el;
    int last = ix->shape->rank - 1;
    el.axis[last] = LLVMBuildNSWAdd(e->b, ix->axis[last], ev_int(e, j), "");
    el.lin = ix->lin ? LLVMBuildNSWAdd(e->b, ix->lin, ev_int(e, j), "") : NULL;
    return el;
}

static void by_element(Emit *e, int32_t n, Index *ix, int v, LLVMValueRef *out)
{
    for (int j = 0; j < v; j++) {
        Index el = element(e, ix, j);
        out[j] = ev_value(e, n, &el);
    }
}

/* A value the same at every element of the run: computed once, at its first element. */
static void uniform(Emit *e, int32_t n, Index *sub, int v, LLVMValueRef *out)
{
    out[0] = ev_value(e, n, sub);
    for (int j = 1; j < v; j++)
        out[j] = out[0];
}

/* True when a run of v stays a run in a shape whose innermost dimension is d. */
static bool runs_in(int64_t d, int v) { return d % v == 0; }

/* Operands cheaper than a branch: SPECULATE_NODES_MAX nodes in all, every one of them a light
 * element-wise op, a broadcast, reshape, slice or transpose, or a read of a tensor (never of a
 * buffer, whose valid part a clamped index might leave). */
enum { SPECULATE_NODES_MAX = 16 };

static bool cheap(const Emit *e, int32_t n, int *budget)
{
    if (--*budget < 0)
        return false;
    const Node *node = gnode(e->g, n);
    const PlanOp *op = plan_kernel_op(e->k, n);
    if (!op || (op->phase >= 0 && op->phase < e->phase))
        return (!op || op->buf < 0) && e->tensor[n];
    if (op->phase > e->phase)
        return false;
    astitch_op_class c = astitch_op_class_of(node->op);
    if (c != ASTITCH_CLASS_LIGHT && c != ASTITCH_CLASS_BROADCAST &&
        (c != ASTITCH_CLASS_SHAPE || node->op == ASTITCH_OP_CONCATENATE || node->op == ASTITCH_OP_GATHER))
        return false;
    for (int k = 0; k < node->nin; k++)
        if (!cheap(e, goperand(e->g, n, k), budget))
            return false;
    return true;
}

/* ---- the walk over operands' runs ----------------------------------------------------------
 * As in emit_value.c: a stack of frames of its own, one per node being computed at a run, each
 * asking for its operands' runs one at a time in operand order, so the code comes out in the
 * order of a recursive walk and the depth of a chain of ops costs memory, not thread stack. */

/* A node being computed at a run: at the walk's index (ix_of -1) or at the sub of a frame
 * below it (an element-wise op passes its own on). */
typedef struct Frame {
    int32_t n;
    int32_t ix_of;
    uint32_t gen;                     /* the generation of sub (EvMemo in codegen.h) */
    bool cacheable;                   /* the run goes into the run cache when done */
    int k;                            /* operands asked for so far */
    LLVMValueRef arg[3][VECTOR_MAX];  /* element-wise: the operands' runs */
    LLVMValueRef out[VECTOR_MAX];     /* the node's run when done */
    Index sub;                        /* where the operand asked for last is evaluated */
    bool speculate;                   /* concatenate: every operand evaluated, one selected */
    int64_t start;                    /* concatenate: the first element of operand k - 1 */
    LLVMValueRef at, before;
    LLVMBasicBlockRef done, next;
    LLVMBasicBlockRef *from;
    LLVMValueRef *vals, *in;
} Frame;

enum { WALK_LOCAL = 4 };

typedef struct Walk {
    Index *ix;
    int v;
    Frame *f;                         /* local, or on the heap when deeper */
    int32_t n, cap;
    LLVMValueRef leaf[VECTOR_MAX];    /* the run of a node entered without a frame */
    uint32_t gens;                    /* generations of indices handed out (0: the walk's) */
    EvMemo memo;                      /* runs not in the run cache, by node and generation */
    LLVMValueRef (*val)[VECTOR_MAX];  /* the memo's slots */
    int32_t nval, capval;
    Frame local[WALK_LOCAL];
} Walk;

static uint32_t walk_gen(const Walk *w, int32_t of) { return of < 0 ? 0 : w->f[of].gen; }

/* Remembers run as node n's at the index of frame `of`; on no memory it is only not
 * remembered. */
static void walk_remember(Walk *w, int32_t n, int32_t of, const LLVMValueRef *run)
{
    if (!ARRAY_RESERVE(w->val, w->nval, w->capval, 32))
        return;
    if (!ev_memo_add(&w->memo, n, walk_gen(w, of), w->nval))
        return;
    for (int j = 0; j < w->v; j++)
        w->val[w->nval][j] = run[j];
    w->nval++;
}

static Index *walk_ix(Walk *w, int32_t of) { return of < 0 ? w->ix : &w->f[of].sub; }

/* A new frame on top of w (NULL when out of memory; ev_frames_push). */
static Frame *walk_push(Walk *w)
{
    return ev_frames_push((void **)&w->f, w->local, &w->n, &w->cap, sizeof *w->f);
}

/* Asks for operand x's run at the index of frame `of`: false (not done). */
static bool ask(int32_t x, int32_t of, int32_t *child, int32_t *child_ix)
{
    *child = x;
    *child_ix = of;
    return false;
}

static bool broadcast(Emit *e, Frame *f, int32_t fi, Index *ix, int v, int32_t *child,
                      int32_t *child_ix)
{
    const Node *node = gnode(e->g, f->n);
    int32_t x0 = goperand(e->g, f->n, 0);
    const Shape *xs = &gnode(e->g, x0)->shape;
    int last = ix->shape->rank - 1, from = -1; /* the operand axis the run's axis feeds */
    for (int i = 0; i < xs->rank; i++)
        if (node->attr.dims[i] == last && xs->dim[i] != 1)
            from = i;
    if (from >= 0 && from != xs->rank - 1) {
        by_element(e, f->n, ix, v, f->out);
        return true;
    }
    ev_broadcast_source(e, node, xs, ix, &f->sub);
    if (from >= 0)
        return ask(x0, fi, child, child_ix);
    uniform(e, x0, &f->sub, v, f->out);
    return true;
}

/* Concatenate: starts operand f->k (a branch of its own unless speculating) and asks for its
 * run. */
static bool concat_take(Emit *e, Frame *f, int32_t fi, Index *ix, int v, int32_t *child,
                        int32_t *child_ix)
{
    const Node *node = gnode(e->g, f->n);
    int axis = node->attr.axis, last = ix->shape->rank - 1, k = f->k;
    const Node *x = gnode(e->g, goperand(e->g, f->n, k));
    int64_t len = x->shape.dim[axis];
    bool final = k == node->nin - 1;
    f->before = LLVMBuildICmp(e->b, LLVMIntSLT, f->at, ev_int(e, f->start + len), "");
    f->next = NULL;
    if (!f->speculate) {
        LLVMBasicBlockRef take = LLVMAppendBasicBlockInContext(e->c, e->fn, "cat.take");
        f->next = final ? NULL : LLVMAppendBasicBlockInContext(e->c, e->fn, "cat.next");
        if (final)
            LLVMBuildBr(e->b, take);
        else
            LLVMBuildCondBr(e->b, f->before, take, f->next);
        LLVMPositionBuilderAtEnd(e->b, take);
    }
    f->sub = (Index){.shape = &x->shape, .has_axes = true};
    for (int i = 0; i < x->shape.rank; i++)
        f->sub.axis[i] = i == axis ? LLVMBuildSub(e->b, f->at, ev_int(e, f->start), "") : ix->axis[i];
    if (f->speculate) { /* into [0, len - run]: the run's first element stays a multiple of v */
        LLVMValueRef a = f->sub.axis[axis], lo = ev_int(e, 0);
        LLVMValueRef hi = ev_int(e, len - (axis == last ? v : 1));
        a = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, lo, ""), lo, a, "");
        a = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, a, hi, ""), hi, a, "");
        f->sub.axis[axis] = a;
    }
    f->k++;
    return ask(goperand(e->g, f->n, k), fi, child, child_ix);
}

/* Concatenate, when every element of the run takes the same operand (the axis is not the
 * innermost, or every boundary along it is a multiple of v). Cheap operands are all evaluated,
 * each at its index clamped into its own shape, and the run's operand selected: no branch, so
 * every load of the run can be in flight at once (a rotary embedding's two halves). Otherwise
 * one branch per run evaluates only the operand taken. got: the run of operand f->k - 1 (NULL
 * at the start). */
static bool concat(Emit *e, Frame *f, int32_t fi, Index *ix, int v, const LLVMValueRef *got,
                   int32_t *child, int32_t *child_ix)
{
    const Node *node = gnode(e->g, f->n);
    int axis = node->attr.axis, last = ix->shape->rank - 1, nin = node->nin;
    LLVMTypeRef ty = ev_type(e, node->dtype);
    if (!got) {
        bool whole = true;
        for (int k = 0; k < nin && axis == last; k++)
            whole = whole && gnode(e->g, goperand(e->g, f->n, k))->shape.dim[axis] % v == 0;
        if (!whole) {
            by_element(e, f->n, ix, v, f->out);
            return true;
        }
        int budget = SPECULATE_NODES_MAX;
        f->speculate = true;
        for (int k = 0; k < nin && f->speculate; k++)
            f->speculate = cheap(e, goperand(e->g, f->n, k), &budget);
        ev_axes(e, ix);
        f->done = LLVMAppendBasicBlockInContext(e->c, e->fn, "cat.done");
        f->from = malloc((size_t)nin * sizeof *f->from);
        f->vals = malloc((size_t)nin * (size_t)v * sizeof *f->vals);
        f->in = malloc((size_t)nin * sizeof *f->in);
        if (!f->from || !f->vals || !f->in) {
            free(f->from);
            free(f->vals);
            free(f->in);
            ev_fail(e, ty, ASTITCH_ERR_MEMORY, "out of memory");
            for (int j = 0; j < v; j++)
                f->out[j] = LLVMGetUndef(ty);
            return true;
        }
        f->start = 0;
        f->at = ix->axis[axis];
        if (!f->speculate)
            e->branch_depth++;
        return concat_take(e, f, fi, ix, v, child, child_ix);
    }
    int k = f->k - 1;
    LLVMValueRef *vals = f->vals;
    for (int j = 0; j < v; j++)
        vals[k * v + j] = got[j];
    if (f->speculate) {
        /* the operands before k were chosen where `at` is below their end */
        for (int j = 0; j < v && k > 0; j++)
            vals[k * v + j] = LLVMBuildSelect(e->b, f->in[k - 1], vals[(k - 1) * v + j],
                                              vals[k * v + j], "cat");
        f->in[k] = f->before; /* vals[k] now holds the choice among operands 0 .. k */
    } else {
        f->from[k] = LLVMGetInsertBlock(e->b);
        LLVMBuildBr(e->b, f->done);
        if (f->next)
            LLVMPositionBuilderAtEnd(e->b, f->next);
    }
    f->start += gnode(e->g, goperand(e->g, f->n, k))->shape.dim[axis];
    if (f->k < nin)
        return concat_take(e, f, fi, ix, v, child, child_ix);
    if (f->speculate) {
        LLVMDeleteBasicBlock(f->done);
        for (int j = 0; j < v; j++)
            f->out[j] = vals[(nin - 1) * v + j];
    } else {
        e->branch_depth--;
        LLVMPositionBuilderAtEnd(e->b, f->done);
        for (int j = 0; j < v; j++) {
            f->out[j] = LLVMBuildPhi(e->b, ty, "cat");
            for (int i = 0; i < nin; i++)
                f->in[i] = vals[i * v + j];
            LLVMAddIncoming(f->out[j], f->in, f->from, (unsigned)nin);
        }
    }
    free(f->from);
    free(f->vals);
    free(f->in);
    return true;
}

/* Node n of frame fi (an op of the phase) at its run, from its operands' runs: true when
 * f->out holds it; false having asked for an operand's run (*child at the index of frame
 * *child_ix), which comes back as got in the next call (NULL in the first). */
static bool compute_step(Emit *e, Walk *w, int32_t fi, const LLVMValueRef *got, int32_t *child,
                         int32_t *child_ix)
{
    Frame *f = &w->f[fi];
    Index *ix = walk_ix(w, f->ix_of);
    int v = w->v;
    int32_t n = f->n;
    const Node *node = gnode(e->g, n);
    int32_t x0 = node->nin > 0 ? goperand(e->g, n, 0) : -1;
    bool moves = node->op == ASTITCH_OP_BROADCAST_IN_DIM || node->op == ASTITCH_OP_SLICE ||
                 node->op == ASTITCH_OP_RESHAPE || node->op == ASTITCH_OP_TRANSPOSE;
    if (got && moves) { /* asked for its operand's run, which is the node's */
        for (int j = 0; j < v; j++)
            f->out[j] = got[j];
        return true;
    }
    switch (node->op) {
    case ASTITCH_OP_CONSTANT:
        if (node->attr.nvalues == 1)
            uniform(e, n, ix, v, f->out);
        else
            by_element(e, n, ix, v, f->out);
        return true;
    case ASTITCH_OP_BROADCAST_IN_DIM: return broadcast(e, f, fi, ix, v, child, child_ix);
    case ASTITCH_OP_CONCATENATE: return concat(e, f, fi, ix, v, got, child, child_ix);
    case ASTITCH_OP_RESHAPE: {
        const Shape *xs = &gnode(e->g, x0)->shape;
        if (xs->rank == 0 || !runs_in(xs->dim[xs->rank - 1], v))
            break;
        f->sub = (Index){.shape = xs, .lin = ev_lin(e, ix)};
        return ask(x0, fi, child, child_ix);
    }
    case ASTITCH_OP_SLICE: {
        const Shape *xs = &gnode(e->g, x0)->shape;
        int last = xs->rank - 1;
        if (node->attr.stride[last] != 1 || node->attr.dims[last] % v || !runs_in(xs->dim[last], v))
            break;
        ev_slice_source(e, node, xs, ix, &f->sub);
        return ask(x0, fi, child, child_ix);
    }
    case ASTITCH_OP_TRANSPOSE: {
        int last = ix->shape->rank - 1;
        if (node->attr.dims[last] != last)
            break;
        ev_transpose_source(e, node, &gnode(e->g, x0)->shape, ix, &f->sub);
        return ask(x0, fi, child, child_ix);
    }
    default:
        if (!op_is_elementwise(node->op) || node->nin > 3)
            break;
        if (got)
            for (int j = 0; j < v; j++)
                f->arg[f->k - 1][j] = got[j];
        if (f->k < node->nin) /* every operand at the run itself */
            return ask(goperand(e->g, n, f->k++), f->ix_of, child, child_ix);
        for (int j = 0; j < v; j++) {
            LLVMValueRef at[3] = {f->arg[0][j], node->nin > 1 ? f->arg[1][j] : NULL,
                                  node->nin > 2 ? f->arg[2][j] : NULL};
            f->out[j] = ev_apply(e, n, at);
        }
        return true;
    }
    by_element(e, n, ix, v, f->out);
    return true;
}

/* Starts node n at the index of frame ix_of (-1: the walk's): its run (in w->leaf) when it
 * needs no operand's run (the run cache, a vector load, element by element), else NULL with a
 * frame for it pushed. */
static const LLVMValueRef *enter(Emit *e, Walk *w, int32_t n, int32_t ix_of)
{
    Index *ix = walk_ix(w, ix_of);
    int v = w->v;
    LLVMValueRef *out = w->leaf;
    if (v == 1 || e->rowval || ix->shape->rank == 0) {
        by_element(e, n, ix, v, out);
        return out;
    }
    bool cacheable = e->vcache_ix && (ix == e->vcache_ix || (ix->lin && ix->lin == e->vcache_ix->lin));
    LLVMValueRef *cached = &e->vcache[(size_t)n * VECTOR_MAX];
    if (cacheable && cached[0]) {
        for (int j = 0; j < v; j++)
            out[j] = cached[j];
        return out;
    }
    int32_t slot = cacheable ? -1 : ev_memo_find(&w->memo, n, walk_gen(w, ix_of));
    if (slot >= 0)
        return w->val[slot];
    const Node *node = gnode(e->g, n);
    const PlanOp *op = plan_kernel_op(e->k, n);
    bool earlier = op && op->phase >= 0 && op->phase < e->phase;
    if ((!op || (earlier && op->buf < 0)) && e->tensor[n] && e->run_end == 0) {
        ev_load_vector(e, e->tensor[n], node->dtype, ev_lin(e, ix), v, out);
    } else if (op && !earlier && op->phase <= e->phase) {
        Frame *f = walk_push(w);
        if (f) {
            f->n = n;
            f->ix_of = ix_of;
            f->cacheable = cacheable;
            f->k = 0;
            return NULL;
        }
        ev_fail_node(e, n, ev_type(e, node->dtype), ASTITCH_ERR_MEMORY,
                     "%s: out of memory computing node %d '%s'", e->k->name, n, node->name);
        for (int j = 0; j < v; j++)
            out[j] = LLVMGetUndef(ev_type(e, node->dtype));
    } else { /* a buffer of an earlier phase, or a failure that ev_value names */
        by_element(e, n, ix, v, out);
    }
    if (cacheable && e->branch_depth == 0)
        for (int j = 0; j < v; j++)
            cached[j] = out[j];
    return out;
}

void ev_vector(Emit *e, int32_t n, Index *ix, int v, LLVMValueRef *out)
{
    Walk w = {.ix = ix, .v = v, .cap = WALK_LOCAL};
    w.f = w.local;
    const LLVMValueRef *got = enter(e, &w, n, -1);
    while (w.n > 0) {
        int32_t child, child_ix;
        if (!compute_step(e, &w, w.n - 1, got, &child, &child_ix)) {
            if (child_ix == w.n - 1) /* at an index the frame just derived */
                w.f[child_ix].gen = ++w.gens;
            got = enter(e, &w, child, child_ix);
            continue;
        }
        const Frame *f = &w.f[--w.n]; /* its run stays readable until the next push */
        if (f->cacheable && e->branch_depth == 0)
            for (int j = 0; j < v; j++)
                e->vcache[(size_t)f->n * VECTOR_MAX + (size_t)j] = f->out[j];
        else if (!f->cacheable)
            walk_remember(&w, f->n, f->ix_of, f->out);
        got = f->out;
    }
    for (int j = 0; j < v; j++)
        out[j] = got[j];
    if (w.f != w.local)
        free(w.f);
    ev_memo_free(&w.memo);
    free(w.val);
}

void ev_vector_begin(Emit *e, const Index *ix)
{
    for (size_t i = 0; i < (size_t)e->g->nnode * VECTOR_MAX; i++)
        e->vcache[i] = NULL;
    e->vcache_ix = ix;
    e->cache_ix = NULL; /* element by element inside a run: no element cache */
}
