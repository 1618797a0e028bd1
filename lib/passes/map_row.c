/*
 * map_row.c: the thread mapping of a row reduce group (docs/planner.md, *mapping*): a row held
 * in registers (*resident*: its lanes, 16-byte vectors and the register bound it is planned
 * with) or streamed (lanes growing with the row, a warp per row where the rows fill a wave),
 * rows packed several per block, and the split of long rows across blocks (packing.c).
 *
 * A row of at most RESIDENT_LANES_MAX x LANE_ELEMENTS_MAX elements reduced over trailing axes
 * is resident: each lane keeps its part of the row in registers across the kernel's phases,
 * about LANE_ELEMENTS_GOAL elements taken `vector` at a time (16-byte accesses of the row's
 * widest tensor), a warp per row for rows up to a warp's LANE_ELEMENTS_MAX (no block barrier in
 * its combines; with the wide_rows option such rows take the lanes of the goal instead: a
 * choice the variant search times), and at least the lanes whose vectors fill a 128-byte line,
 * or whose single elements fill a 32-byte sector (short rows: a thread then takes several tiles
 * at once, see plan_resident_tiles), at most RESIDENT_LANES_MAX (rows past 4096 elements: up
 * to LANE_ELEMENTS_MAX each; RESIDENT_LANES_LONG with the long_rows option), a power of two
 * unless the kernel's block follows its rows and a power of two would leave many of its vector
 * slots idle (balanced_lanes). Longer rows are streamed: lanes grow with the row (about four
 * elements per lane, up to the block).
 */
#include "passes/passes.h"

/* Resident rows: row elements a lane keeps in registers at most (LANE_ELEMENTS_GOAL is
 * PLAN_LANE_ELEMENTS_GOAL), lanes per row at most, and the bytes a warp's access of one row
 * should cover: a whole 128-byte line with 16-byte vectors; a 32-byte sector with single
 * elements (a row whose length no vector divides: 49, 77, 197, 257), whose lanes would
 * otherwise hold one or two elements each. Measured on an H200 (2026-11-30, bench/RESULTS.md,
 * *Four planner rules*), a line -> a sector: the mean over 7 x 7 of [256, 2048, 49] f32 53.5 ->
 * 29.2 us (32 -> 8 lanes), f16 99.6 -> 29.6 (64 -> 16), softmaxes over 77 and 257 f16 keys
 * 27.2 -> 12.7 and 59.0 -> 42.8; slower: ViT-B/16's over 197 f32 keys, 61.6 -> 63.4. */
enum { LANE_ELEMENTS_MAX = 32, LANE_ELEMENTS_GOAL = PLAN_LANE_ELEMENTS_GOAL,
       RESIDENT_LANES_MAX = MAP_ROW_LANES_MAX, ROW_LINE_BYTES = 128, ROW_SECTOR_BYTES = 32 };
/* With the long_rows option, a row longer than RESIDENT_LANES_MAX x LANE_ELEMENTS_MAX takes up
 * to RESIDENT_LANES_LONG lanes (a block of its own at the register bound its threads leave: 64
 * of an SM's 65536 at 1024). Measured on an H200 (bench/RESULTS.md, *Long rows held in
 * registers*): a softmax over [2048, 32768] f32 173.4 -> 135.1 us, over [8192, 16384] bf16
 * 213.2 -> 139.1, wav2vec 2.0's GroupNorm + GELU over rows of 15999 f32 262.9 -> 219.5; Llama's
 * cross entropy over 32000 bf16 74.0 -> 108.1, layer norms over 9999 f32 and 12289 bf16 5-6%
 * slower: a form the variant search times. */
enum { RESIDENT_LANES_LONG = 1024 };

/* The most lanes a resident row of k elements may take under c. */
static int64_t resident_lanes_most(const MapCtx *c, int64_t k)
{
    return c->long_rows && k > (int64_t)RESIDENT_LANES_MAX * LANE_ELEMENTS_MAX ? RESIDENT_LANES_LONG
                                                                             : RESIDENT_LANES_MAX;
}

/* A streamed row takes one warp when the rows give at least 1/STREAM_WARP_SHARE of a wave's
 * warps one each: its lanes combine by shuffles alone, with no block barrier between rows
 * (measured on the H100: llama2_7b_fwd_cross_entropy, 4096 rows of 32000 bf16, 118.1 -> 99.8
 * us). Unless its tile run walks the row again (mapping_stream_rewalks): the rows of a wave's
 * warps outgrow the L2 where those of a wave's blocks fit (the same loss with two walks,
 * 122.0 -> 184.6). */
enum { STREAM_WARP_SHARE = 2 };

/* The register bound a resident row of e elements per lane, u tiles at once, is planned with:
 * the e x u values of about two live row-shaped values in f32 registers, plus indices and
 * addresses. A kernel of a block per tile with at most RESIDENT_TIGHT_ELEMENTS per lane is
 * planned tighter, at RESIDENT_TIGHT_REGS (measured on the H100: rmsnorm_bf16, 16 per lane,
 * compiles to 40 registers without spilling, and six blocks per SM run it in 30.2 us against
 * 32.1 at 64): the CUDA runtime relaxes the bound of a kernel that spills anyway (docs/
 * codegen.md, *Targets*), which a persistent kernel could not afford. Planning the others with
 * 16 spare registers instead of 32 was slower or equal on all 18 plans it changed (H200,
 * bench/RESULTS.md, *Resident rows at a tighter register bound*: llama2_70b_bwd_rmsnorm 57.3 ->
 * 84.9 us at 80 registers instead of 128). */
enum { RESIDENT_TIGHT_ELEMENTS = 16, RESIDENT_TIGHT_REGS = 40 };
int64_t map_row_resident_regs(int64_t e, int64_t u, bool persistent)
{
    if (!persistent && e * u <= RESIDENT_TIGHT_ELEMENTS)
        return RESIDENT_TIGHT_REGS;
    return (32 + 2 * e * u + 7) / 8 * 8;
}

/* The fewest registers a resident row of e elements per lane may be bounded to: its values plus
 * RESIDENT_SPARE_REGS for indices and addresses (ptxas 13.0: bert_base_fwd_attn_out_ln, 24
 * elements per lane, compiles to 64 registers without spilling and spills 16 bytes at 56).
 * Below map_row_resident_regs(), which plans with room for about two live row-shaped values:
 * launch tightens to it only to fit a grid in one wave. */
enum { RESIDENT_SPARE_REGS = 16 };
int64_t mapping_resident_min_regs(int64_t e) { return 2 * e + RESIDENT_SPARE_REGS; }

bool mapping_rows_may_reside(const Shape *s, uint32_t axes, bool long_rows)
{
    uint32_t trailing = 0;
    int64_t k = 1;
    for (int i = s->rank - 1; i >= 0 && (axes >> i & 1); i--) {
        trailing |= 1u << i;
        k *= s->dim[i];
    }
    int64_t lanes = long_rows ? RESIDENT_LANES_LONG : RESIDENT_LANES_MAX;
    return axes != 0 && axes == trailing && k <= lanes * LANE_ELEMENTS_MAX;
}

/* Lanes of a resident row of n vectors of v elements in place of a power of two t, where the
 * kernel's block follows the lanes (MapCtx.balance_lanes): when t's lanes leave at least
 * 1/BALANCE_IDLE_SHARE of their vector slots idle, the multiple of a warp from t/2 to 2t (at
 * most `most`) that holds the row in the fewest registers (lanes x map_row_resident_regs),
 * the most lanes among equals. Idle slots still hold registers, and fewer registers a row let
 * an SM hold more rows. Measured on an H200 (bench/RESULTS.md, *Resident lanes balanced over
 * the row*), graph us: a layer norm over [8192, 4544] bf16 (Falcon-7B) 55.8 -> 50.0 (192 lanes
 * of 3 vectors instead of 256 of which only 56 held a third), over [8192, 2560] bf16
 * 33.5 -> 27.2 (160 lanes instead of 256); with fewer idle slots it gained at most 2% (RMSNorm
 * over [4096, 5120] bf16, 17% idle) or lost up to 0.8% (Falcon's f32 layer norm, 11%). */
enum { BALANCE_IDLE_SHARE = 5 };
static int64_t balanced_lanes(int64_t n, int64_t v, int64_t t, int64_t warp, int64_t most)
{
    int64_t slots = t * ceil_div(n, t);
    if ((slots - n) * BALANCE_IDLE_SHARE < slots)
        return t;
    int64_t best = t, regs = t * map_row_resident_regs(ceil_div(n, t) * v, 1, false);
    for (int64_t u = t / 2 > warp ? t / 2 : warp; u <= 2 * t && u <= most; u += warp) {
        if (ceil_div(n, u) * v > LANE_ELEMENTS_MAX)
            continue;
        int64_t r = u * map_row_resident_regs(ceil_div(n, u) * v, 1, false);
        if (r < regs || (r == regs && u > best))
            best = u, regs = r;
    }
    return best;
}

/* The resident lane layout of row mapping m whose row-shaped tensors have elements of b: lanes
 * per row and vector width (16 bytes of the widest; short rows take the lanes whose vectors
 * fill a line of the narrowest). False when the row is streamed instead (not
 * reduced over trailing axes, too long, or packing off). */
bool map_row_resident_layout(const astitch_mapping *m, const MapCtx *c, ElementSizes b,
                             int64_t *lanes, int32_t *vector)
{
    int64_t k = m->row_len, warp = c->dev->warp_size, most = resident_lanes_most(c, k);
    if (!c->packing || m->kind != ASTITCH_MAP_ROW_REDUCE || !plan_reduces_trailing(m) ||
        k < 1 || k > most * LANE_ELEMENTS_MAX)
        return false;
    int64_t v = 16 / b.most;
    while (v > 1 && k % v)
        v /= 2;
    int64_t t = pow2_ceil(ceil_div(k, LANE_ELEMENTS_GOAL));
    if (t > most) /* a long row: more than the goal per lane, up to the most */
        t = most;
    if (!c->wide_rows && t > warp && k <= warp * LANE_ELEMENTS_MAX)
        t = warp;
    int64_t line = (v > 1 ? ROW_LINE_BYTES : ROW_SECTOR_BYTES) /
                   (v * b.least); /* short rows */
    if (t < line)
        t = line < pow2_ceil(ceil_div(k, v)) ? line : pow2_ceil(ceil_div(k, v));
    while (t > 1 && t * v > pow2_ceil(k))
        t /= 2;
    if (c->balance_lanes && t >= 2 * warp && most == RESIDENT_LANES_MAX)
        t = balanced_lanes(ceil_div(k, v), v, t, warp, most);
    if (t > most || t > c->block || ceil_div(k, t * v) * v > LANE_ELEMENTS_MAX)
        return false;
    *lanes = t;
    *vector = (int32_t)v;
    return true;
}

void map_row(astitch_mapping *m, const MapCtx *c, ElementSizes b)
{
    int64_t warp = c->dev->warp_size, k = m->row_len, t;
    if (map_row_resident_layout(m, c, b, &t, &m->vector))
        ;
    else if (!c->packing)
        t = pow2_ceil(k > 1 ? k : 1);
    else if (k <= warp)
        t = pow2_ceil(k > 1 ? k : 1);
    else if (c->stream_warp && m->rows * warp * STREAM_WARP_SHARE >= (int64_t)c->wave * c->block)
        t = warp;
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
    m->split = (int32_t)packing_split(c, tiles, packing_split_most(m, c), false);
    packing_finish(m, c, tiles, p, 1);
}
