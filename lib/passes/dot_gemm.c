/* dot_gemm.c: a dot as one strided-batched GEMM over its operands in memory (dot_gemm.h). */
#include <stdio.h>
#include <string.h>

#include "passes/dot_gemm.h"

/* A group of an operand's axes collapsed to one: its extent and stride (0 when the extent is
 * at most 1: any stride serves). */
typedef struct Group {
    int64_t extent, stride;
} Group;

/* Collapses axes ax[0..n) of s (strides st), in that order, into *gr; false when they do not
 * collapse (an axis's stride is not the next one's times its extent). */
static bool collapse(const Shape *s, const int64_t *st, const int64_t *ax, int n, Group *gr)
{
    gr->extent = 1;
    gr->stride = 0;
    int64_t prev = -1; /* the last axis of extent above 1 */
    for (int i = 0; i < n; i++) {
        int64_t a = ax[i];
        gr->extent *= s->dim[a];
        if (s->dim[a] <= 1)
            continue;
        if (prev >= 0 && st[prev] != st[a] * s->dim[a])
            return false;
        prev = a;
    }
    if (prev >= 0)
        gr->stride = st[prev];
    return true;
}

/* The free axes of an operand of rank `rank`: those in neither batch[0..nb) nor
 * contract[0..nc), ascending. Returns their count. */
static int free_axes(int rank, const int64_t *batch, int nb, const int64_t *contract, int nc,
                     int64_t *out)
{
    uint32_t used = 0;
    for (int i = 0; i < nb; i++)
        used |= 1u << batch[i];
    for (int i = 0; i < nc; i++)
        used |= 1u << contract[i];
    int n = 0;
    for (int i = 0; i < rank; i++)
        if (!(used >> i & 1))
            out[n++] = i;
    return n;
}

/* One operand's [B, X, K] groups (X is M or N) as a DotGemmOperand; `x_inner` says which
 * layout is the plain one: false for the lhs (K contiguous), true for the rhs (N contiguous).
 * False, with out->why, when neither X nor K is contiguous. */
static bool operand(const Group *b, const Group *x, const Group *k, bool x_inner,
                    const char *name, DotGemm *out, DotGemmOperand *op)
{
    /* plain: the inner group (K for the lhs, N for the rhs) contiguous, the outer one strided */
    const Group *inner = x_inner ? x : k, *outer = x_inner ? k : x;
    op->batch_stride = b->extent > 1 ? b->stride : 0;
    if (inner->extent <= 1 || inner->stride == 1) {
        op->trans = false;
        op->ld = outer->extent > 1 ? outer->stride : inner->extent;
    } else if (outer->extent <= 1 || outer->stride == 1) {
        op->trans = true;
        op->ld = inner->extent > 1 ? inner->stride : outer->extent;
    } else {
        snprintf(out->why, sizeof out->why,
                 "the %s's free axes (stride %lld) and contracted axes (stride %lld): neither is "
                 "contiguous", name, (long long)x->stride,
                 (long long)k->stride);
        return false;
    }
    if (op->ld < 1)
        op->ld = 1;
    return true;
}

void dot_gemm_layout(const astitch_graph *g, int32_t id, DotGemm *out)
{
    const Node *n = gnode(g, id);
    const Node *l = gnode(g, goperand(g, id, 0)), *r = gnode(g, goperand(g, id, 1));
    const astitch_dot_dims *dd = &n->attr.dot;
    memset(out, 0, sizeof *out);
    out->dtype = n->dtype;
    int64_t ls[MAX_RANK], rs[MAX_RANK];
    shape_strides(&l->shape, ls);
    shape_strides(&r->shape, rs);

    /* the contracted pairs in the order of the lhs's axes: K runs the same way in both */
    int nc = dd->ncontract;
    int64_t lc[MAX_RANK], rc[MAX_RANK];
    for (int i = 0; i < nc; i++) {
        int at = i;
        while (at > 0 && lc[at - 1] > dd->lhs_contract[i]) {
            lc[at] = lc[at - 1];
            rc[at] = rc[at - 1];
            at--;
        }
        lc[at] = dd->lhs_contract[i];
        rc[at] = dd->rhs_contract[i];
    }
    int64_t lf[MAX_RANK], rf[MAX_RANK];
    int nlf = free_axes(l->shape.rank, dd->lhs_batch, dd->nbatch, lc, nc, lf);
    int nrf = free_axes(r->shape.rank, dd->rhs_batch, dd->nbatch, rc, nc, rf);

    Group lb, lm, lk, rb, rn, rk;
    /* every group is collapsed (its extent is wanted even when its strides do not fit) */
    const char *bad = NULL;
    if (!collapse(&l->shape, ls, dd->lhs_batch, dd->nbatch, &lb))
        bad = "lhs's batch";
    if (!collapse(&r->shape, rs, dd->rhs_batch, dd->nbatch, &rb))
        bad = "rhs's batch";
    if (!collapse(&l->shape, ls, lf, nlf, &lm))
        bad = "lhs's free";
    if (!collapse(&r->shape, rs, rf, nrf, &rn))
        bad = "rhs's free";
    if (!collapse(&l->shape, ls, lc, nc, &lk))
        bad = "lhs's contracted";
    if (!collapse(&r->shape, rs, rc, nc, &rk))
        bad = "rhs's contracted";
    out->batch = lb.extent;
    out->m = lm.extent;
    out->n = rn.extent;
    out->k = lk.extent;
    if (out->batch == 0 || out->m == 0 || out->n == 0) {
        out->kind = DOT_GEMM_EMPTY;
        return;
    }
    if (out->k == 0) {
        out->kind = DOT_GEMM_ZEROS;
        return;
    }
    out->kind = DOT_GEMM_NONE;
    if (bad) {
        snprintf(out->why, sizeof out->why,
                 "the %s axes do not collapse to one strided dimension", bad);
        return;
    }
    if (out->batch > INT32_MAX || out->m > INT32_MAX || out->n > INT32_MAX ||
        out->k > INT32_MAX) {
        snprintf(out->why, sizeof out->why, "a size above 2^31-1 (B %lld, M %lld, N %lld, K %lld)",
                 (long long)out->batch, (long long)out->m, (long long)out->n,
                 (long long)out->k);
        return;
    }
    if (!operand(&lb, &lm, &lk, false, "lhs", out, &out->lhs) ||
        !operand(&rb, &rn, &rk, true, "rhs", out, &out->rhs))
        return;
    out->kind = DOT_GEMM_GEMM;
}
