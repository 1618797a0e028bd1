/*
 * interp_shape.c: data movement, reductions and dot in the reference interpreter.
 *
 * Each op walks its output (or input) in row-major order with an odometer that carries linear
 * offsets into the other tensors, so every op is one loop whatever the rank. Sums and products
 * accumulate in double (floats) or wrap in 64 bits (integers) and are rounded once at the end.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* An odometer over a shape; a and b are linear offsets advanced by strides sa and sb. */
typedef struct Walk {
    int rank;
    int64_t dim[MAX_RANK], idx[MAX_RANK];
    int64_t sa[MAX_RANK], sb[MAX_RANK];
    int64_t a, b;
} Walk;

static void walk_init(Walk *w, const Shape *s)
{
    memset(w, 0, sizeof *w);
    w->rank = s->rank;
    memcpy(w->dim, s->dim, sizeof w->dim);
}

/* Steps to the next index in row-major order. */
static void walk_next(Walk *w)
{
    for (int d = w->rank - 1; d >= 0; d--) {
        w->a += w->sa[d];
        w->b += w->sb[d];
        if (++w->idx[d] < w->dim[d])
            return;
        w->a -= w->sa[d] * w->dim[d];
        w->b -= w->sb[d] * w->dim[d];
        w->idx[d] = 0;
    }
}

static void broadcast(const Node *n, const Node *x, const Wide *in, Wide *out)
{
    int64_t xs[MAX_RANK];
    shape_strides(&x->shape, xs);
    Walk w;
    walk_init(&w, &n->shape);
    for (int i = 0; i < x->shape.rank; i++)
        if (x->shape.dim[i] != 1)
            w.sa[n->attr.dims[i]] = xs[i];
    int64_t count = shape_elements(&n->shape);
    for (int64_t k = 0; k < count; k++, walk_next(&w))
        out[k] = in[w.a];
}

/* transpose and slice: output dim i advances the operand by sa[i], starting at offset a. */
static void gather_strided(const Node *n, const Node *x, const Wide *in, Wide *out)
{
    int64_t xs[MAX_RANK];
    shape_strides(&x->shape, xs);
    Walk w;
    walk_init(&w, &n->shape);
    for (int i = 0; i < n->shape.rank; i++) {
        if (n->op == ASTITCH_OP_TRANSPOSE) {
            w.sa[i] = xs[n->attr.dims[i]];
        } else { /* an axis of one element never advances: its stride may be any size */
            w.sa[i] = n->shape.dim[i] > 1 ? xs[i] * n->attr.stride[i] : 0;
            w.a += xs[i] * n->attr.dims[i];
        }
    }
    int64_t count = shape_elements(&n->shape);
    for (int64_t k = 0; k < count; k++, walk_next(&w))
        out[k] = in[w.a];
}

static void concatenate(const astitch_graph *g, int32_t id, Wide *const *val, Wide *out)
{
    const Node *n = gnode(g, id);
    int axis = n->attr.axis;
    int64_t os[MAX_RANK], base = 0;
    shape_strides(&n->shape, os);
    for (int k = 0; k < n->nin; k++) {
        const Node *x = gnode(g, goperand(g, id, k));
        const Wide *in = val[goperand(g, id, k)];
        Walk w;
        walk_init(&w, &x->shape);
        memcpy(w.sa, os, sizeof w.sa);
        w.a = base * os[axis];
        int64_t count = shape_elements(&x->shape);
        for (int64_t j = 0; j < count; j++, walk_next(&w))
            out[w.a] = in[j];
        base += x->shape.dim[axis];
    }
}

static void gather(const Node *n, const Node *table, const Wide *tab, const Wide *ix, Wide *out)
{
    int64_t rows = table->shape.dim[0];
    int64_t row = shape_elements(&table->shape) / rows;
    int64_t count = row ? shape_elements(&n->shape) / row : 0;
    for (int64_t k = 0; k < count; k++) {
        int64_t r = ix[k].i < 0 ? 0 : ix[k].i >= rows ? rows - 1 : ix[k].i;
        memcpy(out + k * row, tab + r * row, (size_t)row * sizeof *out);
    }
}

static void reduce(const Node *n, const Node *x, const Wide *in, Wide *out)
{
    astitch_reduce_kind kind = n->attr.reduce;
    astitch_dtype t = n->dtype;
    bool flt = dtype_is_float(t);
    int64_t os[MAX_RANK];
    shape_strides(&n->shape, os);
    Walk w;
    walk_init(&w, &x->shape);
    for (int i = 0, o = 0; i < x->shape.rank; i++)
        if (!(n->attr.axes >> i & 1))
            w.sa[i] = os[o++];
    int64_t nout = shape_elements(&n->shape), nin = shape_elements(&x->shape);
    Wide init = nin > 0 ? reduce_identity(kind, t) : reduce_empty(kind, t);
    for (int64_t k = 0; k < nout; k++)
        out[k] = init;
    for (int64_t k = 0; k < nin; k++, walk_next(&w)) {
        Wide *acc = &out[w.a];
        double f = in[k].f;
        int64_t v = in[k].i;
        switch (kind) {
        case ASTITCH_REDUCE_SUM:
            if (flt)
                acc->f += f;
            else
                acc->i = (int64_t)((uint64_t)acc->i + (uint64_t)v);
            break;
        case ASTITCH_REDUCE_PROD:
            if (flt)
                acc->f *= f;
            else
                acc->i = (int64_t)((uint64_t)acc->i * (uint64_t)v);
            break;
        case ASTITCH_REDUCE_MAX:
            if (flt)
                acc->f = wide_max(acc->f, f);
            else if (v > acc->i)
                acc->i = v;
            break;
        case ASTITCH_REDUCE_MIN:
            if (flt)
                acc->f = wide_min(acc->f, f);
            else if (v < acc->i)
                acc->i = v;
            break;
        case ASTITCH_REDUCE_ANY: acc->i |= v; break;
        case ASTITCH_REDUCE_ALL: acc->i &= v; break;
        case ASTITCH_REDUCE_COUNT: break;
        }
    }
    for (int64_t k = 0; k < nout; k++) {
        if (flt)
            out[k].f = wide_round(t, out[k].f);
        else
            out[k].i = wide_wrap(t, (uint64_t)out[k].i);
    }
}

/* Copies operand x of a dot into dense [batch, free, contract] order (lhs, contract_last) or
 * [batch, contract, free] order (rhs) so the product loop below runs over contiguous rows. */
static void dot_pack(const Shape *s, const int64_t *batch, const int64_t *contract,
                     const astitch_dot_dims *dd, bool contract_last, const Wide *in, Wide *out)
{
    int64_t xs[MAX_RANK];
    shape_strides(s, xs);
    uint32_t used = 0;
    Shape order = {0};
    int64_t stride[MAX_RANK] = {0};
    for (int i = 0; i < dd->nbatch; i++) {
        used |= 1u << batch[i];
        stride[order.rank] = xs[batch[i]];
        order.dim[order.rank++] = s->dim[batch[i]];
    }
    for (int i = 0; i < dd->ncontract; i++)
        used |= 1u << contract[i];
    for (int pass = 0; pass < 2; pass++) {
        bool free_now = (pass == 0) == contract_last;
        if (free_now) {
            for (int i = 0; i < s->rank; i++)
                if (!(used >> i & 1)) {
                    stride[order.rank] = xs[i];
                    order.dim[order.rank++] = s->dim[i];
                }
        } else {
            for (int i = 0; i < dd->ncontract; i++) {
                stride[order.rank] = xs[contract[i]];
                order.dim[order.rank++] = s->dim[contract[i]];
            }
        }
    }
    Walk w;
    walk_init(&w, &order);
    memcpy(w.sa, stride, sizeof stride);
    int64_t count = shape_elements(s);
    for (int64_t k = 0; k < count; k++, walk_next(&w))
        out[k] = in[w.a];
}

static astitch_status dot(const astitch_graph *g, int32_t id, Wide *const *val, Wide *out)
{
    const Node *n = gnode(g, id);
    const Node *l = gnode(g, goperand(g, id, 0)), *r = gnode(g, goperand(g, id, 1));
    const astitch_dot_dims *dd = &n->attr.dot;
    int64_t nb = 1, kk = 1;
    for (int i = 0; i < dd->nbatch; i++)
        nb *= l->shape.dim[dd->lhs_batch[i]];
    for (int i = 0; i < dd->ncontract; i++)
        kk *= l->shape.dim[dd->lhs_contract[i]];
    int64_t nl = shape_elements(&l->shape), nr = shape_elements(&r->shape);
    int64_t nout = shape_elements(&n->shape);
    /* each element is +0 plus its products, as a GEMM computes it: no -0 result */
    Wide init = reduce_empty(ASTITCH_REDUCE_SUM, n->dtype);
    for (int64_t k = 0; k < nout; k++)
        out[k] = init;
    if (nout == 0 || kk == 0)
        return ASTITCH_OK;
    bool flt = dtype_is_float(n->dtype);
    int64_t m = nl / (nb * kk), nn = nr / (nb * kk);
    Wide *pl = interp_alloc(g, id, nl, "the packed lhs");
    Wide *pr = pl ? interp_alloc(g, id, nr, "the packed rhs") : NULL;
    if (!pr) {
        free(pl);
        return ASTITCH_ERR_MEMORY;
    }
    dot_pack(&l->shape, dd->lhs_batch, dd->lhs_contract, dd, true, val[goperand(g, id, 0)], pl);
    dot_pack(&r->shape, dd->rhs_batch, dd->rhs_contract, dd, false, val[goperand(g, id, 1)], pr);
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < m; i++) {
            Wide *o = out + (b * m + i) * nn;
            const Wide *lrow = pl + (b * m + i) * kk;
            for (int64_t k = 0; k < kk; k++) {
                const Wide *rrow = pr + (b * kk + k) * nn;
                if (flt) {
                    double a = lrow[k].f;
                    for (int64_t j = 0; j < nn; j++)
                        o[j].f += a * rrow[j].f;
                } else {
                    uint64_t a = (uint64_t)lrow[k].i;
                    for (int64_t j = 0; j < nn; j++)
                        o[j].i = (int64_t)((uint64_t)o[j].i + a * (uint64_t)rrow[j].i);
                }
            }
        }
    free(pl);
    free(pr);
    for (int64_t k = 0; k < nout; k++) {
        if (flt)
            out[k].f = wide_round(n->dtype, out[k].f);
        else
            out[k].i = wide_wrap(n->dtype, (uint64_t)out[k].i);
    }
    return ASTITCH_OK;
}

astitch_status interp_structural(const astitch_graph *g, int32_t id, Wide *const *val, Wide *out)
{
    const Node *n = gnode(g, id);
    const Node *x = gnode(g, goperand(g, id, 0));
    const Wide *in = val[goperand(g, id, 0)];
    switch (n->op) {
    case ASTITCH_OP_BROADCAST_IN_DIM: broadcast(n, x, in, out); return ASTITCH_OK;
    case ASTITCH_OP_RESHAPE:
        memcpy(out, in, (size_t)shape_elements(&n->shape) * sizeof *out);
        return ASTITCH_OK;
    case ASTITCH_OP_TRANSPOSE:
    case ASTITCH_OP_SLICE: gather_strided(n, x, in, out); return ASTITCH_OK;
    case ASTITCH_OP_CONCATENATE: concatenate(g, id, val, out); return ASTITCH_OK;
    case ASTITCH_OP_GATHER: gather(n, x, in, val[goperand(g, id, 1)], out); return ASTITCH_OK;
    case ASTITCH_OP_REDUCE: reduce(n, x, in, out); return ASTITCH_OK;
    case ASTITCH_OP_DOT: return dot(g, id, val, out);
    default:
        return node_fail(g, id, ASTITCH_ERR_INTERNAL, "not a structural op");
    }
}
