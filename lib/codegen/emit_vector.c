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

static void broadcast(Emit *e, int32_t n, const Node *node, Index *ix, int v, LLVMValueRef *out)
{
    int32_t x0 = goperand(e->g, n, 0);
    const Shape *xs = &gnode(e->g, x0)->shape;
    int last = ix->shape->rank - 1, from = -1; /* the operand axis the run's axis feeds */
    for (int i = 0; i < xs->rank; i++)
        if (node->attr.dims[i] == last && xs->dim[i] != 1)
            from = i;
    if (from >= 0 && from != xs->rank - 1) {
        by_element(e, n, ix, v, out);
        return;
    }
    ev_axes(e, ix);
    Index sub = {.shape = xs, .has_axes = true};
    for (int i = 0; i < xs->rank; i++)
        sub.axis[i] = xs->dim[i] == 1 ? ev_int(e, 0) : ix->axis[node->attr.dims[i]];
    if (from < 0)
        uniform(e, x0, &sub, v, out);
    else
        ev_vector(e, x0, &sub, v, out);
}

static void slice(Emit *e, int32_t n, const Node *node, Index *ix, int v, LLVMValueRef *out)
{
    int32_t x0 = goperand(e->g, n, 0);
    const Shape *xs = &gnode(e->g, x0)->shape;
    int last = xs->rank - 1;
    if (node->attr.stride[last] != 1 || node->attr.dims[last] % v || !runs_in(xs->dim[last], v)) {
        by_element(e, n, ix, v, out);
        return;
    }
    Index sub;
    ev_slice_source(e, node, xs, ix, &sub);
    ev_vector(e, x0, &sub, v, out);
}

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

/* Concatenate, when every element of the run takes the same operand (the axis is not the
 * innermost, or every boundary along it is a multiple of v). Cheap operands are all evaluated,
 * each at its index clamped into its own shape, and the run's operand selected: no branch, so
 * every load of the run can be in flight at once (a rotary embedding's two halves). Otherwise
 * one branch per run evaluates only the operand taken. */
static void concat(Emit *e, int32_t n, const Node *node, Index *ix, int v, LLVMValueRef *out)
{
    int axis = node->attr.axis, last = ix->shape->rank - 1;
    bool whole = true;
    for (int k = 0; k < node->nin && axis == last; k++)
        whole = whole && gnode(e->g, goperand(e->g, n, k))->shape.dim[axis] % v == 0;
    if (!whole) {
        by_element(e, n, ix, v, out);
        return;
    }
    int budget = SPECULATE_NODES_MAX;
    bool speculate = true;
    for (int k = 0; k < node->nin && speculate; k++)
        speculate = cheap(e, goperand(e->g, n, k), &budget);
    ev_axes(e, ix);
    LLVMTypeRef ty = ev_type(e, node->dtype);
    LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(e->c, e->fn, "cat.done");
    LLVMBasicBlockRef *from = malloc((size_t)node->nin * sizeof *from);
    LLVMValueRef *vals = malloc((size_t)node->nin * (size_t)v * sizeof *vals);
    LLVMValueRef *in = malloc((size_t)node->nin * sizeof *in);
    if (!from || !vals || !in) {
        free(from);
        free(vals);
        free(in);
        ev_fail(e, ty, ASTITCH_ERR_MEMORY, "out of memory");
        for (int j = 0; j < v; j++)
            out[j] = LLVMGetUndef(ty);
        return;
    }
    int64_t start = 0;
    LLVMValueRef at = ix->axis[axis];
    if (!speculate)
        e->branch_depth++;
    for (int k = 0; k < node->nin; k++) {
        const Node *x = gnode(e->g, goperand(e->g, n, k));
        int64_t len = x->shape.dim[axis];
        bool final = k == node->nin - 1;
        LLVMValueRef before = LLVMBuildICmp(e->b, LLVMIntSLT, at, ev_int(e, start + len), "");
        LLVMBasicBlockRef next = NULL;
        if (!speculate) {
            LLVMBasicBlockRef take = LLVMAppendBasicBlockInContext(e->c, e->fn, "cat.take");
            next = final ? NULL : LLVMAppendBasicBlockInContext(e->c, e->fn, "cat.next");
            if (final)
                LLVMBuildBr(e->b, take);
            else
                LLVMBuildCondBr(e->b, before, take, next);
            LLVMPositionBuilderAtEnd(e->b, take);
        }
        Index sub = {.shape = &x->shape, .has_axes = true};
        for (int i = 0; i < x->shape.rank; i++)
            sub.axis[i] = i == axis ? LLVMBuildSub(e->b, at, ev_int(e, start), "") : ix->axis[i];
        if (speculate) { /* into [0, len - run]: the run's first element stays a multiple of v */
            LLVMValueRef a = sub.axis[axis], lo = ev_int(e, 0);
            LLVMValueRef hi = ev_int(e, len - (axis == last ? v : 1));
            a = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSLT, a, lo, ""), lo, a, "");
            a = LLVMBuildSelect(e->b, LLVMBuildICmp(e->b, LLVMIntSGT, a, hi, ""), hi, a, "");
            sub.axis[axis] = a;
        }
        ev_vector(e, goperand(e->g, n, k), &sub, v, &vals[k * v]);
        if (speculate) {
            /* the operands before k were chosen where `at` is below their end */
            for (int j = 0; j < v && k > 0; j++)
                vals[k * v + j] = LLVMBuildSelect(e->b, in[k - 1], vals[(k - 1) * v + j],
                                                  vals[k * v + j], "cat");
            in[k] = before; /* vals[k] now holds the choice among operands 0 .. k */
        } else {
            from[k] = LLVMGetInsertBlock(e->b);
            LLVMBuildBr(e->b, done);
            if (next)
                LLVMPositionBuilderAtEnd(e->b, next);
        }
        start += len;
    }
    if (speculate) {
        LLVMDeleteBasicBlock(done);
        for (int j = 0; j < v; j++)
            out[j] = vals[(node->nin - 1) * v + j];
    } else {
        e->branch_depth--;
        LLVMPositionBuilderAtEnd(e->b, done);
        for (int j = 0; j < v; j++) {
            out[j] = LLVMBuildPhi(e->b, ty, "cat");
            for (int k = 0; k < node->nin; k++)
                in[k] = vals[k * v + j];
            LLVMAddIncoming(out[j], in, from, (unsigned)node->nin);
        }
    }
    free(from);
    free(vals);
    free(in);
}

/* Node n (an op of the phase) at the run, from its operands' runs. */
static void compute(Emit *e, int32_t n, const Node *node, Index *ix, int v, LLVMValueRef *out)
{
    int32_t x0 = node->nin > 0 ? goperand(e->g, n, 0) : -1;
    switch (node->op) {
    case ASTITCH_OP_CONSTANT:
        if (node->attr.nvalues == 1)
            uniform(e, n, ix, v, out);
        else
            by_element(e, n, ix, v, out);
        return;
    case ASTITCH_OP_BROADCAST_IN_DIM: broadcast(e, n, node, ix, v, out); return;
    case ASTITCH_OP_SLICE: slice(e, n, node, ix, v, out); return;
    case ASTITCH_OP_CONCATENATE: concat(e, n, node, ix, v, out); return;
    case ASTITCH_OP_RESHAPE: {
        const Shape *xs = &gnode(e->g, x0)->shape;
        if (xs->rank == 0 || !runs_in(xs->dim[xs->rank - 1], v))
            break;
        Index sub = {.shape = xs, .lin = ev_lin(e, ix)};
        ev_vector(e, x0, &sub, v, out);
        return;
    }
    case ASTITCH_OP_TRANSPOSE: {
        int last = ix->shape->rank - 1;
        if (node->attr.dims[last] != last)
            break;
        ev_axes(e, ix);
        Index sub = {.shape = &gnode(e->g, x0)->shape, .has_axes = true};
        for (int i = 0; i <= last; i++)
            sub.axis[node->attr.dims[i]] = ix->axis[i];
        ev_vector(e, x0, &sub, v, out);
        return;
    }
    default:
        if (!op_is_elementwise(node->op) || node->nin > 3)
            break;
        LLVMValueRef arg[3][VECTOR_MAX];
        for (int k = 0; k < node->nin; k++)
            ev_vector(e, goperand(e->g, n, k), ix, v, arg[k]);
        for (int j = 0; j < v; j++) {
            LLVMValueRef at[3] = {arg[0][j], node->nin > 1 ? arg[1][j] : NULL,
                                  node->nin > 2 ? arg[2][j] : NULL};
            out[j] = ev_apply(e, n, at);
        }
        return;
    }
    by_element(e, n, ix, v, out);
}

void ev_vector(Emit *e, int32_t n, Index *ix, int v, LLVMValueRef *out)
{
    if (v == 1 || e->rowval || ix->shape->rank == 0) {
        by_element(e, n, ix, v, out);
        return;
    }
    bool cacheable = e->vcache_ix && (ix == e->vcache_ix || (ix->lin && ix->lin == e->vcache_ix->lin));
    LLVMValueRef *cached = &e->vcache[(size_t)n * VECTOR_MAX];
    if (cacheable && cached[0]) {
        for (int j = 0; j < v; j++)
            out[j] = cached[j];
        return;
    }
    const Node *node = gnode(e->g, n);
    const PlanOp *op = plan_kernel_op(e->k, n);
    bool earlier = op && op->phase >= 0 && op->phase < e->phase;
    if ((!op || (earlier && op->buf < 0)) && e->tensor[n] && e->run_end == 0)
        ev_load_vector(e, e->tensor[n], node->dtype, ev_lin(e, ix), v, out);
    else if (op && !earlier && op->phase <= e->phase)
        compute(e, n, node, ix, v, out);
    else /* a buffer of an earlier phase, or a failure that ev_value names */
        by_element(e, n, ix, v, out);
    if (cacheable && e->branch_depth == 0)
        for (int j = 0; j < v; j++)
            cached[j] = out[j];
}

void ev_vector_begin(Emit *e, const Index *ix)
{
    for (size_t i = 0; i < (size_t)e->g->nnode * VECTOR_MAX; i++)
        e->vcache[i] = NULL;
    e->vcache_ix = ix;
    e->cache_ix = NULL; /* element by element inside a run: no element cache */
}
