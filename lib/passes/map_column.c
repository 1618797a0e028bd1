/*
 * map_column.c: the thread mapping of a column reduce group (docs/planner.md, *mapping*):
 * threads across adjacent columns and lanes down the rows, single columns or runs of them
 * (*Column runs*), and the split of the rows across blocks (packing.c).
 */
#include "passes/passes.h"

/* Columns per block of a column group alone in its kernel (else a warp's): a block's lanes then
 * read fewer, longer runs of each row (512 bytes of f32 instead of 128). Measured on the H100
 * (2026-11-25, with the element loop of two per iteration): bert_base_bwd_ffn_gelu 67.6 ->
 * 63.5 us, batchnorm_train 128.6 -> 125.6, gpt2_bwd_mlp_gelu 118.2 -> 119.7; 64 and 256 within
 * 2% of 128. Beside rows (the layer-norm backward graphs, blocks of 256) a warp's measured better
 * (bert_base_bwd_layernorm 23.8 us against 24.6 at 128 and 26.2 at 256). */
enum { COLUMNS_ALONE = 128 };

/* Column runs (plan option column_vectors): where a column group is alone in its kernel, a
 * thread takes runs of v adjacent columns, 16 bytes of the space's widest tensor per access
 * (a warp's runs across the tile's columns, the block's warps down the rows). Measured on an
 * H200 (2026-11-29, bench/RESULTS.md, *Column runs*) against single columns: bf16 means over a
 * sequence or a leading axis 17-18% faster, f32 ones 4-6%, batchnorm_train's three sums in
 * runs of 2 f32 7%. Slower or equal, with the first combine: a lane with few runs (the ViT
 * token mean, 197 rows over 32 lanes: +2%; asr_feature_norm, 8 runs: +9%) and walks reading
 * two tensors of the space (gpt2_bwd_mlp_gelu +1%, bert_base_bwd_ffn_gelu +0.5%). So: at most
 * COLUMN_RUN_ACCUMULATORS accumulators across the group's reduces (v per reduce), the kernel
 * reads one tensor of the space's size, and each lane takes at least COLUMN_RUN_MIN_RUNS runs
 * of its rows (or of its part of them when split). */
enum { COLUMN_RUN_ACCUMULATORS = 8, COLUMN_RUN_MIN_RUNS = 12 };
/* Where a lane would take too few runs at the kernel's block, the block shrinks to fewer warps
 * down the rows, down to COLUMN_RUN_MIN_WARPS warps (map_column_block): pooling over a 7 x 7
 * map or 49 tokens takes runs in blocks of 128, the ViT token mean (197 rows) in blocks of 512,
 * a pooling over 32 tokens in blocks of 64 (2 lanes of 16 runs of 2 f32; at 4 warps a lane had
 * 8 runs, so single columns: [512, 32, 256] 14.6 -> 10.2 us on an H200, 2026-11-30).
 * Measured on an H200 (2026-11-29, bench/RESULTS.md, *Column runs in smaller blocks*) against
 * single columns in blocks of 1024: NHWC global average pool [128, 7, 7, 2048] f32 26.2 ->
 * 16.5 us, bf16 24.3 -> 11.3; the ViT token mean f32 24.2 -> 21.9, bf16 18.0 -> 13.8.
 * Where the smaller block's wider wave would split the rows across blocks (which loses the
 * runs, or needs a grid barrier), the rows stay whole instead (MapCtx.whole_columns) on a grid
 * under that wave, if it gives every SM a block. Measured on an H200 (2026-11-30,
 * *Rows kept whole*) against single columns in blocks of 1024: a bf16 mean over 100 steps
 * [64, 100, 1024] 10.2 -> 8.0 us, an f16 mean over 14 x 14 15.3 -> 12.7, masked mean poolings
 * over 64 and 128 tokens 0.86-0.90 of their time. */
enum { COLUMN_RUN_MIN_WARPS = 2 };
/* Rows kept whole need this many warps per SM over the grid: a pooling over 128 tokens of
 * [64, 128, 256] f32 kept whole in 256 blocks of 2 warps (4 warps an SM, 64 runs a lane) took
 * 11.5 us on an H200 against 9.9 with its column sums split behind a grid barrier (2026-11-30). */
enum { COLUMN_WHOLE_WARPS_PER_SM = 8 };

/* Rows per block p and lanes t of column group m: runs of v columns (v > 1), or single ones. */
static void column_shape(const astitch_mapping *m, const MapCtx *c, int64_t v, int64_t *p,
                         int64_t *t)
{
    int64_t warp = c->dev->warp_size, cols = m->rows > 1 ? m->rows : 1;
    if (v > 1) { /* a warp's runs across the columns, the block's warps down the rows */
        *p = warp * v;
        *t = c->block / warp;
    } else if (!c->packing) {
        *p = pow2_ceil(cols) < c->block ? pow2_ceil(cols) : c->block;
        *t = 1;
    } else if (cols >= (int64_t)c->block * c->wave) {
        *p = c->block;
        *t = 1;
    } else {
        int64_t most = c->alone && COLUMNS_ALONE < c->block ? COLUMNS_ALONE : warp;
        *p = pow2_ceil(cols) < most ? pow2_ceil(cols) : most;
        *t = c->block / *p;
    }
}

/* Column group m mapped in runs of v columns (single ones at v = 1): its shape, split and
 * packing. */
static void shape_with(astitch_mapping *m, const MapCtx *c, int64_t v)
{
    int64_t p, t;
    column_shape(m, c, v, &p, &t);
    m->rows_per_block = (int32_t)p;
    m->threads_per_row = (int32_t)t;
    m->vector = v > 1 ? (int32_t)v : 0;
    int64_t tiles = ceil_div(m->rows, p);
    m->split = c->whole_columns ? 1
                                : (int32_t)packing_split(c, tiles, packing_split_most(m, c), c->alone);
    packing_finish(m, c, tiles, p, 1);
}

/* Whether group m holds an online pair (w) that single columns would take unsplit: the pair
 * then reads the columns once (plan_online_pair), where runs, or a split, take two walks.
 * Measured on an H200 (bench/RESULTS.md, *Survey 7*): torch.logsumexp(x, 0) of [2048, 32768]
 * f32 126.1 -> 66.5 us, of [300, 40000] 26.5 -> 20.3. */
static bool online_whole(const astitch_mapping *m, const MapCtx *c, const ColumnWalk *w)
{
    if (!c->online || !w->online_pair)
        return false;
    astitch_mapping t = *m;
    shape_with(&t, c, 1);
    return t.split <= 1;
}

/* The columns of one run for column group m (see *Column runs* above): 16 bytes of the
 * widest tensor (4 with an f32, 8 when all are f16/bf16), halved until the reduces'
 * accumulators fit, runs tile the innermost axis (kept: v adjacent rows are v adjacent
 * elements at every reduced index) and a tile's rows (a warp's runs) fit the block (a later
 * element-wise phase of the tile takes a row per thread); 1 (no runs) where the option is off,
 * the group is not alone or reduces other than floats (the combine exchanges f32
 * accumulators), the kernel reads other than one tensor of the space, there are fewer rows
 * than a warp's runs, the block is not whole warps, or the group's online pair takes single
 * columns whole (online_whole). The least runs per lane is checked once the split is known. */
static int64_t column_run(const astitch_mapping *m, const MapCtx *c, const ColumnWalk *w)
{
    int64_t warp = c->dev->warp_size;
    if (!c->column_runs || !c->alone || !c->packing || w->inputs != 1 || w->not_float ||
        online_whole(m, c, w) ||
        m->rank < 1 || (m->reduce_axes >> (m->rank - 1) & 1) || c->block % warp)
        return 1;
    int64_t v = mapping_access_elements(w->access_bytes);
    while (v > 1 && (v * w->reduces > COLUMN_RUN_ACCUMULATORS || m->dims[m->rank - 1] % v ||
                     warp * v > c->block))
        v /= 2;
    return v > 1 && m->rows >= warp * v ? v : 1;
}

void map_column(astitch_mapping *m, const MapCtx *c, const ColumnWalk *w)
{
    for (int64_t v = column_run(m, c, w);; v = 1) {
        shape_with(m, c, v);
        if (v == 1 || ceil_div(m->split_len, m->threads_per_row) >= COLUMN_RUN_MIN_RUNS)
            return;
    }
}

int32_t map_column_block(const astitch_mapping *m, const MapCtx *c, const ColumnWalk *w,
                         int64_t regs, int64_t wave_limit, bool *whole)
{
    int64_t warp = c->dev->warp_size;
    *whole = false;
    if (column_run(m, c, w) == 1)
        return c->block;
    for (MapCtx s = *c; s.block >= COLUMN_RUN_MIN_WARPS * warp; s.block /= 2) {
        s.wave = (int32_t)mapping_wave(c->dev, s.block, regs, wave_limit);
        if (s.wave < 1)
            return c->block;
        astitch_mapping t = *m;
        map_column(&t, &s, w);
        if (t.vector > 1 && (s.block == c->block || t.split <= 1))
            return s.block;
        if (s.block < c->block) { /* the rows whole, on a grid under this block's wave */
            MapCtx u = s;
            u.whole_columns = true;
            t = *m;
            map_column(&t, &u, w);
            if (t.vector > 1 && t.grid >= c->dev->sm_count &&
                t.grid * (s.block / warp) >= (int64_t)COLUMN_WHOLE_WARPS_PER_SM * c->dev->sm_count) {
                *whole = true;
                return s.block;
            }
        }
    }
    return c->block;
}
