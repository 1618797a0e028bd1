/*
 * packing.c: the adaptive parts of thread mapping (paper 3.3; its Table 4 ATM): vertical packing
 * (a block walks a chunk of tiles: packing_finish) and task splitting (a row's reduction shared
 * by several blocks: packing_split_most, packing_split). Horizontal packing, several rows per
 * tile, is the rows_per_block that map_row (map_row.c) and map_column (map_column.c) choose.
 */
#include "passes/passes.h"

/* Elements a split row's parts start at a multiple of (16 bytes of f16 or bf16). */
enum { SPLIT_ROW_ALIGN = 8 };

/* Grids of a block per tile stay below this many blocks (the blocks then walk chunks). */
#define TILE_GRID_MAX ((int64_t)1 << 30)

/* Grid and chunks of m for `tiles` tiles of tile_rows rows each: a block per tile, or, when
 * the kernel is persistent, at most a wave of blocks each walking a contiguous chunk of tiles. */
void packing_finish(astitch_mapping *m, const MapCtx *c, int64_t tiles, int64_t tile_rows,
                    int64_t quantum)
{
    m->block = c->block;
    if (m->split > 1) {
        m->grid = (int32_t)(tiles * m->split);
        m->chunk = m->rows_per_block;
        m->tasks_per_block = 1;
        m->split_len = ceil_div(m->row_len, m->split);
        /* a row's parts start at multiples of SPLIT_ROW_ALIGN where every part keeps some of
         * the row, so that 16-byte runs of the row stay whole in them (docs/codegen.md, *Reduce
         * phase*, row vectors) */
        int64_t aligned = ceil_div(m->split_len, SPLIT_ROW_ALIGN) * SPLIT_ROW_ALIGN;
        if (m->kind == ASTITCH_MAP_ROW_REDUCE && aligned * (m->split - 1) < m->row_len)
            m->split_len = aligned;
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
    int64_t most = c->persistent ? c->wave : TILE_GRID_MAX;
    int64_t grid = tiles < most ? tiles : most;
    int64_t per = ceil_div(tiles, grid);
    int64_t chunk = per * tile_rows;
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

/* The most parts a row of reduce mapping m (threads_per_row and vector set) may be split
 * into across blocks: 1 when it is not split at all. A streamed row longer than a block
 * keeps at least 4 elements per thread in each part, a column at least 8 per lane. */
int64_t packing_split_most(const astitch_mapping *m, const MapCtx *c)
{
    if (!c->packing)
        return 1;
    if (m->kind == ASTITCH_MAP_ROW_REDUCE)
        return !m->vector && m->threads_per_row == c->block && m->row_len > c->block
                   ? ceil_div(m->row_len, (int64_t)c->block * 4)
                   : 1;
    if (m->kind == ASTITCH_MAP_COLUMN_REDUCE)
        return m->row_len > m->threads_per_row * 8 ? ceil_div(m->row_len, m->threads_per_row * 8)
                                                   : 1;
    return 1;
}

/* Parts (at most `most`) to split each of `tiles` tiles into when there are fewer tiles than
 * blocks per wave. A column group alone in a kernel of a block per tile (`balance`): the count
 * whose blocks fill their waves best, that is the least waves per unit of work, ceil(tiles x
 * s / wave) / s, taking the smallest s within SPLIT_SLACK of the best (measured on the H100:
 * gpt2_bwd_mlp_gelu, 96 column tiles on a wave of 264, 129.5 us in 2 parts, which fill 192 of
 * the 264 places, 120-123 us in 8 to 11). Otherwise as many as one wave holds (the paper's
 * rule): in a persistent kernel no more fit; beside other groups (layernorm backward: the
 * column sums next to the rows) no count measured better than noise; rows are unmeasured. */
#define SPLIT_SLACK 1.02
enum { SPLIT_WAVES_MAX = 8 };
int64_t packing_split(const MapCtx *c, int64_t tiles, int64_t most, bool balance)
{
    if (tiles < 1 || tiles >= c->wave || most <= 1)
        return 1;
    if (c->persistent || !balance)
        return c->wave / tiles < most ? c->wave / tiles : most;
    double best = 0;
    for (int64_t s = 1; s <= most && tiles * s <= SPLIT_WAVES_MAX * (int64_t)c->wave; s++) {
        double cost = (double)ceil_div(tiles * s, c->wave) / (double)s;
        if (best == 0 || cost < best)
            best = cost;
    }
    for (int64_t s = 1;; s++)
        if ((double)ceil_div(tiles * s, c->wave) / (double)s <= best * SPLIT_SLACK)
            return s;
}
