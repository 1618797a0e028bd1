/*
 * view.c: values that are strided views of a parameter.
 *
 * A chain of reshapes, transposes and slices that starts at a parameter reads no element but
 * where it lies in the parameter's memory: its value is that memory seen with other strides,
 * from an offset. Frameworks hand such values over as views and never copy them; the runtime
 * does the same for outputs under astitch_compile_options.view_outputs (docs/codegen.md, *View
 * outputs*).
 */
#include <string.h>

#include "ir/ir.h"

/* Strides of a reshape of (from, stride) to `to`, when the reshape is a view: every run of
 * `from`'s axes that is contiguous in memory splits or merges into `to`'s axes on its own.
 * Axes of extent 1 are free. False when elements of one `to` axis would come from two runs. */
static bool reshape_strides(const Shape *from, const int64_t *stride, const Shape *to,
                            int64_t *out)
{
    int t = to->rank - 1;
    int64_t run_stride = from->rank ? stride[from->rank - 1] : 1, run = 1, taken = 1;
    for (int f = from->rank - 1; f >= 0; f--) {
        run *= from->dim[f];
        bool run_ends = f == 0 || (from->dim[f - 1] != 1 &&
                                   stride[f - 1] != run * run_stride);
        if (!run_ends)
            continue;
        while (t >= 0 && (taken < run || to->dim[t] == 1)) {
            out[t] = taken * run_stride;
            taken *= to->dim[t];
            t--;
        }
        if (taken != run)
            return false;
        if (f > 0) {
            run_stride = stride[f - 1];
            run = taken = 1;
        }
    }
    for (; t >= 0; t--) { /* leading unit axes of a reshape of a scalar */
        if (to->dim[t] != 1)
            return false;
        out[t] = 1;
    }
    return true;
}

bool graph_strided_view(const astitch_graph *g, int32_t n, StridedView *v)
{
    const Node *node = gnode(g, n);
    if (shape_elements(&node->shape) == 0)
        return false;
    if (node->op == ASTITCH_OP_PARAMETER) {
        v->param = node->attr.param;
        v->offset = 0;
        v->rank = node->shape.rank;
        shape_strides(&node->shape, v->stride);
        return true;
    }
    if (node->op != ASTITCH_OP_RESHAPE && node->op != ASTITCH_OP_TRANSPOSE &&
        node->op != ASTITCH_OP_SLICE)
        return false;
    int32_t x = goperand(g, n, 0);
    StridedView in;
    if (!graph_strided_view(g, x, &in))
        return false;
    const Shape *from = &gnode(g, x)->shape;
    *v = in;
    v->rank = node->shape.rank;
    switch (node->op) {
    case ASTITCH_OP_RESHAPE:
        return reshape_strides(from, in.stride, &node->shape, v->stride);
    case ASTITCH_OP_TRANSPOSE:
        for (int i = 0; i < v->rank; i++)
            v->stride[i] = in.stride[node->attr.dims[i]];
        return true;
    default: /* slice */
        for (int i = 0; i < v->rank; i++) {
            v->offset += node->attr.dims[i] * in.stride[i];
            v->stride[i] = in.stride[i] * node->attr.stride[i];
        }
        return true;
    }
}

void strided_view_gather(const StridedView *v, const Shape *shape, size_t elem_size,
                         const void *base, void *dst)
{
    int64_t idx[MAX_RANK] = {0}, total = shape_elements(shape);
    const unsigned char *src = base;
    unsigned char *out = dst;
    for (int64_t e = 0; e < total; e++) {
        int64_t at = v->offset;
        for (int d = 0; d < shape->rank; d++)
            at += idx[d] * v->stride[d];
        memcpy(out + (size_t)e * elem_size, src + (size_t)at * elem_size, elem_size);
        for (int d = shape->rank - 1; d >= 0 && ++idx[d] == shape->dim[d]; d--)
            idx[d] = 0;
    }
}
