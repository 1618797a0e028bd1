/*
 * across.c: column sums taken in the row pass that already holds the rows.
 *
 * A layer norm's backward reduces the same [rows, n] elements two ways: along each row (the
 * statistics of dx) and down each column (dgamma, dbeta). Planned as two groups, the column
 * group walks the tensor once and the row group again, so the kernel reads its inputs twice
 * (moved bytes 1.7x the minimal in layernorm_backward). A resident row group already holds
 * every element of its rows in registers, and each lane of a row holds the same columns in
 * every row (docs/planner.md, *mapping*): it can add its elements into per-column sums as it
 * goes. With the plan option column_sums_in_rows, this step moves a column group into a
 * resident row group of the same space when:
 *
 *   - every root of the column group is a reduce of that space over the axes the row group
 *     keeps (sched_derive: DERIVE_ACROSS), f32 sum, max or min, so that the blocks' partial
 *     results can meet in the destination by atomics (zero_init), and the deterministic
 *     option is off;
 *   - nothing in the kernel reads those roots (their sums are complete only at the kernel's
 *     end), and the row group's mapping keeps its rows in registers (vector > 0, not split);
 *   - the blocks' column sums fit in ACROSS_SHARED_MAX bytes of shared memory.
 *
 * The moved roots become sub-dominants of the row group and its members join it; the
 * mapping step then runs again over the groups left. Code generation: emit_across.c.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

/* True when root r (a node of kernel k) is read by an op of k. */
static bool read_in_kernel(const Planner *pl, int32_t r)
{
    for (int32_t e = pl->ustart[r]; e < pl->ustart[r + 1]; e++)
        if (pl->kidx[pl->use[e]] >= 0)
            return true;
    return false;
}

/* True when root r can be summed across the rows of group row's resident mapping. */
static bool summable_across(const Planner *pl, const PlanGroup *row, int32_t r)
{
    const astitch_graph *g = pl->g;
    const Node *n = gnode(g, r);
    int64_t q;
    return n->op == ASTITCH_OP_REDUCE && n->dtype == ASTITCH_F32 && plan_split_atomic(n) &&
           sched_derive(g, row->dominant, r, &q) == DERIVE_ACROSS && !read_in_kernel(pl, r);
}

static bool resident_rows(const PlanGroup *gr)
{
    const astitch_mapping *m = &gr->map;
    return m->kind == ASTITCH_MAP_ROW_REDUCE && m->vector > 0 && m->split <= 1;
}

/* Shared memory the across roots of a row group may take together: each has a row of column
 * sums per writer slot (plan_across_slots). layernorm_backward's two sums of 1024 columns at
 * eight rows per block take all of it. */
enum { ACROSS_SHARED_MAX = 64 * 1024 };

/* Bytes of the column sums of n roots in row group `row`'s blocks. */
static int64_t across_bytes(const PlanGroup *row, int64_t n)
{
    return n * plan_across_slots(&row->map) * row->map.row_len * 4; /* f32 */
}

/* Roots of group gr summed across its rows already. */
static int32_t across_roots(const Planner *pl, const PlanGroup *gr)
{
    int32_t n = 0;
    for (int32_t s = 0; s < gr->nsub; s++)
        n += plan_reduce_across(pl->g, &gr->map, gr->sub[s]);
    return n;
}

/* The group of k whose resident rows can take every root of group c, or -1. */
static int32_t host_group(const Planner *pl, const PlanKernel *k, int32_t c)
{
    const PlanGroup *col = &k->group[c];
    for (int32_t r = 0; r < k->ngroup; r++) {
        const PlanGroup *row = &k->group[r];
        if (r == c || !resident_rows(row) || !summable_across(pl, row, col->dominant) ||
            across_bytes(row, across_roots(pl, row) + 1 + col->nsub) > ACROSS_SHARED_MAX)
            continue;
        bool all = true;
        for (int32_t s = 0; all && s < col->nsub; s++)
            all = summable_across(pl, row, col->sub[s]);
        if (all)
            return r;
    }
    return -1;
}

static int cmp_node(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Appends src[0 .. ns) to *dst (length *nd), sorted ascending; false on memory. */
static bool append_sorted(int32_t **dst, int32_t *nd, const int32_t *src, int32_t ns)
{
    if (ns == 0)
        return true;
    int32_t *a = realloc(*dst, (size_t)(*nd + ns) * sizeof *a);
    if (!a)
        return false;
    memcpy(a + *nd, src, (size_t)ns * sizeof *a);
    *nd += ns;
    qsort(a, (size_t)*nd, sizeof *a, cmp_node);
    *dst = a;
    return true;
}

/* Moves group c into group r and closes the gap c leaves in k->group. */
static bool move_group(PlanKernel *k, int32_t c, int32_t r)
{
    PlanGroup *col = &k->group[c], *row = &k->group[r];
    if (!append_sorted(&row->sub, &row->nsub, &col->dominant, 1) ||
        !append_sorted(&row->sub, &row->nsub, col->sub, col->nsub) ||
        !append_sorted(&row->member, &row->nmember, col->member, col->nmember))
        return false;
    for (int32_t i = 0; i < k->nop; i++) {
        PlanOp *o = &k->op[i];
        if (o->group == c) {
            o->group = r;
            if (o->role == ASTITCH_ROLE_DOMINANT)
                o->role = ASTITCH_ROLE_SUB_DOMINANT;
        }
        if (o->group > c)
            o->group--;
    }
    free(col->sub);
    free(col->member);
    memmove(&k->group[c], &k->group[c + 1], (size_t)(k->ngroup - c - 1) * sizeof *k->group);
    k->ngroup--;
    return true;
}

astitch_status pass_across(Planner *pl, PlanKernel *k, bool *moved)
{
    const astitch_plan_options *o = &pl->p->opt;
    *moved = false;
    if (!o->column_sums_in_rows || o->fusion != ASTITCH_FUSION_STITCH || !o->merge ||
        !o->packing || o->deterministic)
        return ASTITCH_OK;
    for (int32_t c = 0; c < k->ngroup;) {
        int32_t r = host_group(pl, k, c);
        if (r < 0) {
            c++;
            continue;
        }
        if (!move_group(k, c, r))
            return ctx_fail(pl->g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
        *moved = true; /* group c is now the next one */
    }
    return ASTITCH_OK;
}
