/*
 * xla.c: kernel scopes of fusion=xla, the register-only fusion the paper compares with
 * (section 2.3.1).
 *
 * Ops are visited consumers first. An op is fused into the kernels of its consumers unless a
 * one-to-many element dependency forbids it: a reduce is never fused into its consumers, and an
 * expensive element-wise op is never fused into a broadcast. An op whose consumers lie in
 * several kernels is recomputed in each if it is cheap (light element-wise, broadcast, shape
 * op) and gets its own kernel otherwise. Graph outputs and values read by compute ops are
 * kernel roots. The kernel that owns a recomputed op is the first one listed; the others hold
 * it as inlined.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

typedef struct KSet {
    int32_t *k;
    int32_t n;
} KSet;

static bool kset_add(KSet *s, int32_t k)
{
    for (int32_t i = 0; i < s->n; i++)
        if (s->k[i] == k)
            return true;
    int32_t *a = realloc(s->k, (size_t)(s->n + 1) * sizeof *a);
    if (!a)
        return false;
    a[s->n++] = k;
    s->k = a;
    return true;
}

static bool is_cheap(astitch_op op)
{
    astitch_op_class c = astitch_op_class_of(op);
    return c == ASTITCH_CLASS_LIGHT || c == ASTITCH_CLASS_BROADCAST || c == ASTITCH_CLASS_SHAPE;
}

static bool fusible(astitch_op producer, astitch_op consumer)
{
    if (producer == ASTITCH_OP_REDUCE)
        return false;
    if (astitch_op_class_of(producer) == ASTITCH_CLASS_HEAVY &&
        consumer == ASTITCH_OP_BROADCAST_IN_DIM)
        return false;
    return astitch_op_class_of(consumer) != ASTITCH_CLASS_COMPUTE;
}

static int cmp_by_first(const void *a, const void *b, void *first)
{
    const int32_t *f = first;
    int32_t x = f[*(const int32_t *)a], y = f[*(const int32_t *)b];
    return (x > y) - (x < y);
}

/* Renumbers kernels by their smallest node, the order the other modes produce. */
static astitch_status renumber(Planner *pl)
{
    astitch_plan *p = pl->p;
    int32_t nk = p->nkernel;
    int32_t *first = malloc((size_t)(nk ? nk : 1) * sizeof *first);
    int32_t *order = malloc((size_t)(nk ? nk : 1) * sizeof *order);
    int32_t *newid = malloc((size_t)(nk ? nk : 1) * sizeof *newid);
    PlanKernel *kk = malloc((size_t)(nk ? nk : 1) * sizeof *kk);
    if (!first || !order || !newid || !kk) {
        free(first);
        free(order);
        free(newid);
        free(kk);
        return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    }
    for (int32_t k = 0; k < nk; k++) {
        first[k] = INT32_MAX;
        for (int32_t i = 0; i < p->kernel[k].nop; i++)
            if (p->kernel[k].op[i].node < first[k])
                first[k] = p->kernel[k].op[i].node;
        order[k] = k;
    }
    qsort_r(order, (size_t)nk, sizeof *order, cmp_by_first, first);
    for (int32_t i = 0; i < nk; i++) {
        kk[i] = p->kernel[order[i]];
        newid[order[i]] = i;
    }
    memcpy(p->kernel, kk, (size_t)nk * sizeof *kk);
    for (int32_t v = 0; v < pl->n; v++)
        if (p->owner[v] >= 0)
            p->owner[v] = newid[p->owner[v]];
    free(first);
    free(order);
    free(newid);
    free(kk);
    return ASTITCH_OK;
}

astitch_status pass_xla(Planner *pl)
{
    astitch_plan *p = pl->p;
    const astitch_graph *g = pl->g;
    int32_t n = pl->n;
    KSet *in = calloc((size_t)(n ? n : 1), sizeof *in);
    int32_t cap = 16;
    p->kernel = calloc((size_t)cap, sizeof *p->kernel);
    p->nkernel = 0;
    if (!in || !p->kernel)
        goto oom;
    for (int32_t v = n - 1; v >= 0; v--) {
        p->owner[v] = -1;
        if (!plan_is_owned_class(g, v, pl->is_output))
            continue;
        astitch_op op = gnode(g, v)->op;
        bool root = pl->is_output[v] || astitch_op_class_of(op) == ASTITCH_CLASS_SOURCE ||
                    pl->ustart[v] == pl->ustart[v + 1];
        KSet ks = {NULL, 0};
        for (int32_t e = pl->ustart[v]; !root && e < pl->ustart[v + 1]; e++) {
            int32_t c = pl->use[e];
            if (!fusible(op, gnode(g, c)->op) || in[c].n == 0) {
                root = true;
                break;
            }
            for (int32_t i = 0; i < in[c].n; i++)
                if (!kset_add(&ks, in[c].k[i])) {
                    free(ks.k);
                    goto oom;
                }
        }
        if (!root && ks.n > 1 && !is_cheap(op))
            root = true;
        if (root) {
            if (p->nkernel == cap) {
                PlanKernel *nk = realloc(p->kernel, (size_t)cap * 2 * sizeof *nk);
                if (!nk) {
                    free(ks.k);
                    goto oom;
                }
                memset(nk + cap, 0, (size_t)cap * sizeof *nk);
                p->kernel = nk;
                cap *= 2;
            }
            ks.n = 0;
            if (!kset_add(&ks, p->nkernel++)) {
                free(ks.k);
                goto oom;
            }
        }
        p->owner[v] = ks.k[0];
        for (int32_t i = 0; i < ks.n; i++)
            if (!plan_kernel_add(&p->kernel[ks.k[i]], v)) {
                free(ks.k);
                goto oom;
            }
        in[v] = ks;
    }
    for (int32_t v = 0; v < n; v++)
        free(in[v].k);
    free(in);
    return renumber(pl);
oom:
    for (int32_t v = 0; in && v < n; v++)
        free(in[v].k);
    free(in);
    return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
}
