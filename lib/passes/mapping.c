/*
 * mapping.c: adaptive thread mapping of every dominant (paper 3.3 and 4.3 step 2).
 *
 * The kernel's block size is the largest block any dominant can use (the device maximum for
 * all but tiny kernels, as section 4.5 prefers); the blocks per wave follow from it with the
 * assumed register bound of 32 (or from k->wave_limit when launch lowered it). Then, per
 * dominant:
 *
 *   row reduce     lanes per row grow with the row (a warp for rows up to 32, about four
 *                  elements per lane beyond, up to the block); short rows are packed several
 *                  per block (horizontal packing). When there are fewer row tiles than blocks
 *                  per wave and rows are longer than a block, a row is split across blocks
 *                  (task splitting) whose partial results are combined.
 *   column reduce  threads walk adjacent columns (coalesced) and lanes walk down the rows;
 *                  few columns with long columns split the rows across blocks likewise.
 *   element-wise   one element per thread per tile.
 *
 * Tiles beyond one wave are packed vertically: a block walks a contiguous chunk of tiles, so the
 * grid never exceeds one wave and global barriers stay legal. With packing off, a row or column
 * takes one tile and nothing is split (the XLA baseline); vertical packing remains.
 */
#include <string.h>

#include "passes/passes.h"

static int64_t gcd(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

typedef struct Ctx {
    const astitch_device *dev;
    int32_t block;
    int32_t wave;
    bool packing;
} Ctx;

static void finish(astitch_mapping *m, const Ctx *c, int64_t tiles, int64_t quantum)
{
    m->block = c->block;
    if (m->split > 1) {
        m->grid = (int32_t)(tiles * m->split);
        m->chunk = m->rows_per_block;
        m->tasks_per_block = 1;
        m->split_len = ceil_div(m->row_len, m->split);
        return;
    }
    m->split = 1;
    m->split_len = m->row_len;
    if (tiles < 1) {
        m->grid = 1;
        m->chunk = m->rows_per_block;
        m->tasks_per_block = 0;
        return;
    }
    int64_t grid = tiles < c->wave ? tiles : c->wave;
    int64_t per = ceil_div(tiles, grid);
    int64_t chunk = per * m->rows_per_block;
    if (quantum > 1 && chunk % quantum) /* element-wise groups with quotient sub-dominants */
        chunk = ceil_div(chunk, quantum) * quantum;
    m->grid = (int32_t)ceil_div(m->rows, chunk);
    if (m->grid <= 1) { /* one block owns everything: say so exactly */
        m->grid = 1;
        chunk = m->rows > 0 ? m->rows : 1;
    }
    m->chunk = chunk;
    m->tasks_per_block = ceil_div(chunk, m->rows_per_block);
}

static void map_row(astitch_mapping *m, const Ctx *c)
{
    int64_t warp = c->dev->warp_size, k = m->row_len, t;
    if (!c->packing)
        t = pow2_ceil(k > 1 ? k : 1);
    else if (k <= warp)
        t = pow2_ceil(k > 1 ? k : 1);
    else
        t = pow2_floor(ceil_div(k, 4)) > warp ? pow2_floor(ceil_div(k, 4)) : warp;
    if (t > c->block)
        t = c->block;
    int64_t p = c->packing ? c->block / t : 1;
    if (p > pow2_ceil(m->rows > 1 ? m->rows : 1))
        p = pow2_ceil(m->rows > 1 ? m->rows : 1);
    m->threads_per_row = (int32_t)t;
    m->rows_per_block = (int32_t)p;
    int64_t tiles = ceil_div(m->rows, p);
    m->split = 1;
    if (c->packing && t == c->block && k > c->block && tiles > 0 && tiles < c->wave) {
        int64_t s = c->wave / tiles, by_len = ceil_div(k, (int64_t)c->block * 4);
        m->split = (int32_t)(s < by_len ? s : by_len);
    }
    finish(m, c, tiles, 1);
}

static void map_column(astitch_mapping *m, const Ctx *c)
{
    int64_t warp = c->dev->warp_size, cols = m->rows > 1 ? m->rows : 1, p, t;
    if (!c->packing) {
        p = pow2_ceil(cols) < c->block ? pow2_ceil(cols) : c->block;
        t = 1;
    } else if (cols >= (int64_t)c->block * c->wave) {
        p = c->block;
        t = 1;
    } else {
        p = pow2_ceil(cols) < warp ? pow2_ceil(cols) : warp;
        t = c->block / p;
    }
    m->rows_per_block = (int32_t)p;
    m->threads_per_row = (int32_t)t;
    int64_t tiles = ceil_div(m->rows, p);
    m->split = 1;
    if (c->packing && tiles > 0 && tiles < c->wave && m->row_len > t * 8) {
        int64_t s = c->wave / tiles, by_len = ceil_div(m->row_len, t * 8);
        m->split = (int32_t)(s < by_len ? s : by_len);
    }
    finish(m, c, tiles, 1);
}

static void map_elementwise(astitch_mapping *m, const Ctx *c, int64_t quantum)
{
    m->threads_per_row = 1;
    m->rows_per_block = c->block;
    m->split = 1;
    finish(m, c, ceil_div(m->rows, c->block), quantum);
}

/* The iteration space of dominant d as rows x row_len, and the mapping kind. */
static void space_of(const astitch_graph *g, int32_t d, astitch_mapping *m)
{
    Shape s;
    memset(m, 0, sizeof *m);
    sched_space(g, d, &s, &m->reduce_axes);
    m->rank = s.rank;
    memcpy(m->dims, s.dim, sizeof m->dims);
    m->rows = 1;
    m->row_len = 1;
    for (int i = 0; i < s.rank; i++) {
        if (m->reduce_axes >> i & 1)
            m->row_len *= s.dim[i];
        else
            m->rows *= s.dim[i];
    }
    if (gnode(g, d)->op != ASTITCH_OP_REDUCE)
        m->kind = ASTITCH_MAP_ELEMENTWISE;
    else if (s.rank == 0 || (m->reduce_axes >> (s.rank - 1) & 1) || m->rows == 1)
        m->kind = ASTITCH_MAP_ROW_REDUCE;
    else
        m->kind = ASTITCH_MAP_COLUMN_REDUCE;
}

/* Threads one dominant can use in a block. */
static int64_t useful_threads(const astitch_mapping *m, bool packing, int64_t warp)
{
    if (!packing && m->kind == ASTITCH_MAP_ROW_REDUCE)
        return m->row_len;
    if (!packing && m->kind == ASTITCH_MAP_COLUMN_REDUCE)
        return m->rows;
    return m->rows * m->row_len > warp ? m->rows * m->row_len : warp;
}

astitch_status pass_mapping(Planner *pl, PlanKernel *k)
{
    const astitch_graph *g = pl->g;
    const astitch_device *dev = &pl->p->dev;
    Ctx c = {dev, dev->warp_size, 0, pl->p->opt.packing};
    for (int32_t i = 0; i < k->ngroup; i++) {
        astitch_mapping m;
        space_of(g, k->group[i].dominant, &m);
        int64_t want = pow2_ceil(useful_threads(&m, c.packing, dev->warp_size));
        if (want > dev->max_threads_per_block)
            want = dev->max_threads_per_block;
        if (want > c.block)
            c.block = (int32_t)want;
    }
    int64_t bps = dev->max_blocks_per_sm;
    if (dev->max_threads_per_sm / c.block < bps)
        bps = dev->max_threads_per_sm / c.block;
    if (dev->regs_per_sm / (32 * c.block) < bps)
        bps = dev->regs_per_sm / (32 * c.block);
    if (bps < 1)
        return ctx_fail(g->ctx, ASTITCH_ERR_UNSUPPORTED,
                        "planner: kernel %s: device '%s' cannot hold one block of %d threads",
                        k->name, dev->name, (int)c.block);
    c.wave = (int32_t)(bps * dev->sm_count);
    if (k->wave_limit > 0 && k->wave_limit < c.wave)
        c.wave = k->wave_limit;
    k->block = c.block;
    k->blocks_per_wave = c.wave;
    for (int32_t i = 0; i < k->ngroup; i++) {
        PlanGroup *gr = &k->group[i];
        astitch_mapping *m = &gr->map;
        space_of(g, gr->dominant, m);
        if (m->kind == ASTITCH_MAP_ROW_REDUCE) {
            map_row(m, &c);
        } else if (m->kind == ASTITCH_MAP_COLUMN_REDUCE) {
            map_column(m, &c);
        } else {
            int64_t quantum = 1;
            for (int32_t s = 0; s < gr->nsub; s++) {
                int64_t q;
                if (sched_derive(g, gr->dominant, gr->sub[s], &q) != DERIVE_QUOTIENT)
                    continue;
                int64_t l = quantum / gcd(quantum, q) * q;
                if (l <= m->rows)
                    quantum = l;
            }
            map_elementwise(m, &c, quantum);
        }
    }
    return ASTITCH_OK;
}
