/*
 * transpose.c: square tiles for a transpose that moves the innermost axis.
 *
 * An element-wise kernel whose roots read a value through a transpose that moves its innermost
 * axis (a [B, S, H] value written as [B, H, S]) reads that value one element per thread a whole
 * row apart: each 32-byte sector of it is fetched for 4 bytes, and the lines come back from L2
 * or DRAM many times (H200, bench/RESULTS.md: a bias added to [32, 512, 1024] f32 and
 * transposed, 124.5 us against 35.5 for Inductor's tiled kernel). Such a kernel walks its space
 * in square tiles (TILE x TILE elements; TILE_NARROW for 2-byte values) over the space's
 * innermost axis and the axis where the transpose's operand has its innermost one: a block
 * first evaluates the operand over its tile in the operand's own order (consecutive threads,
 * consecutive addresses) into shared memory, then, after a block barrier, the roots over the
 * tile in the space's order (consecutive threads, consecutive output addresses), taking the
 * transpose's value from shared memory (emit_transpose.c). Each tiled axis takes with it the
 * axes before it that stay adjacent and in order in the operand, as one longer axis (NHWC to
 * NCHW tiles C and H x W: W alone, 56 of a 64-wide tile, wrote runs of 112 bytes with an eighth
 * of the threads idle). One transpose per kernel is tiled: the first whose operand is a float
 * or 32-bit integer and whose two runs both hold at least MIN_EDGE elements. The plan option
 * transpose_tiles (on by default) turns the step off.
 */
#include "passes/passes.h"

/* Tile edge: a warp's width of consecutive elements each way; for values of 2 bytes, twice
 * that, so that a thread moves as many bytes (H200, bench/RESULTS.md: a bf16 NHWC to NCHW
 * transpose 40.4 -> 32.5 us; f32 transposes within 2% or slower at 64: the ViT patch tokens
 * 26.0 -> 28.5). Block threads at most; the least extent of both tiled axes. */
enum { TILE = 32, TILE_NARROW = 64, TILE_THREADS = 256, MIN_EDGE = 16 };

static bool tile_dtype(astitch_dtype t)
{
    return t == ASTITCH_F32 || t == ASTITCH_F16 || t == ASTITCH_BF16 || t == ASTITCH_I32;
}

/* The first axis of the run of space axes ending at `to` that transpose t reads from adjacent
 * operand axes in the same order. */
static int32_t run_from(const Node *t, int32_t to)
{
    int32_t from = to;
    while (from > 0 && t->attr.dims[from - 1] + 1 == t->attr.dims[from])
        from--;
    return from;
}

/* The transpose of kernel k that a tile serves (its runs in *tile), or -1. */
static int32_t tiled_transpose(const astitch_graph *g, const PlanKernel *k, const Shape *space,
                               PlanTile *tile)
{
    int last = space->rank - 1;
    for (int32_t i = 0; i < k->nop; i++) {
        const Node *t = gnode(g, k->op[i].node);
        if (t->op != ASTITCH_OP_TRANSPOSE || !shape_equal(&t->shape, space) ||
            t->attr.dims[last] == last || !tile_dtype(t->dtype))
            continue;
        int p = 0;
        while (p < last && t->attr.dims[p] != last)
            p++;
        /* the runs are apart: A's ends at the operand's innermost axis, L's before it */
        *tile = (PlanTile){.on = true, .node = k->op[i].node, .axis_from = run_from(t, p),
                           .axis = p, .inner_from = run_from(t, last)};
        int64_t a = plan_tile_extent(tile, space, false), l = plan_tile_extent(tile, space, true);
        if (a >= MIN_EDGE && l >= MIN_EDGE && a <= INT32_MAX && l <= INT32_MAX)
            return k->op[i].node;
    }
    return -1;
}

int64_t plan_tile_extent(const PlanTile *t, const Shape *space, bool inner)
{
    int32_t from = inner ? t->inner_from : t->axis_from, to = inner ? space->rank - 1 : t->axis;
    int64_t n = 1;
    for (int32_t i = from; i <= to; i++)
        n *= space->dim[i];
    return n;
}

void pass_transpose_tile(Planner *pl, PlanKernel *k)
{
    const astitch_graph *g = pl->g;
    const astitch_device *d = &pl->p->dev;
    k->tile = (PlanTile){.on = false, .node = -1};
    if (!pl->p->opt.transpose_tiles || k->persistent || k->nphase != 1 || k->nbuf > 0 ||
        k->global_barriers > 0 || k->shared_bytes > 0 ||
        k->phase[0].map.kind != ASTITCH_MAP_ELEMENTWISE)
        return;
    PlanPhase *ph = &k->phase[0];
    Shape space = plan_mapping_space(&ph->map);
    if (space.rank < 2)
        return;
    for (int32_t r = 0; r < ph->nroot; r++)
        if (!shape_equal(&gnode(g, ph->root[r])->shape, &space))
            return;
    PlanTile tile;
    int32_t node = tiled_transpose(g, k, &space, &tile);
    if (node < 0)
        return;
    int64_t threads = TILE_THREADS;
    while (threads > d->max_threads_per_block)
        threads /= 2;
    int64_t size = astitch_dtype_size(gnode(g, node)->dtype) <= 2 ? TILE_NARROW : TILE;
    int64_t shared = size * (size + 1) * 4;
    if (threads < size || shared > d->shared_per_block)
        return;
    int64_t tiles = ceil_div(plan_tile_extent(&tile, &space, false), size) *
                    ceil_div(plan_tile_extent(&tile, &space, true), size);
    for (int i = 0; i < tile.inner_from; i++)
        if (i < tile.axis_from || i > tile.axis)
            tiles *= space.dim[i];
    if (tiles > INT32_MAX)
        return;
    int32_t cap = 0; /* memory.c left no buffer */
    if (!ARRAY_RESERVE(k->buf, k->nbuf, cap, 1))
        return; /* untiled: slower, as right */
    k->buf[k->nbuf++] = (PlanBuffer){
        .kind = ASTITCH_BUFFER_TILE, .node = node,
        .dtype = gnode(g, node)->dtype == ASTITCH_I32 ? ASTITCH_I32 : ASTITCH_F32,
        .elements = size * (size + 1), .offset = 0, .bytes = shared};
    tile.size = (int32_t)size;
    k->tile = tile;
    astitch_mapping *m = &ph->map;
    m->block = (int32_t)threads;
    m->grid = (int32_t)tiles;
    m->rows_per_block = (int32_t)threads;
    m->chunk = size * size;
    m->tasks_per_block = ceil_div(m->chunk, threads);
    k->group[ph->group].map = *m;
    k->block = m->block;
    k->grid = m->grid;
    k->shared_bytes = shared;
    k->block_barriers++;
    k->blocks_per_wave = (int32_t)(launch_blocks_per_sm(d, threads, 32, shared) * d->sm_count);
}
