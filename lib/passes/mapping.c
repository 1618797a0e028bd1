/*
 * mapping.c: adaptive thread mapping of every dominant (paper 3.3 and 4.3 step 2).
 *
 * The kernel's block size is the largest block any dominant can use (the device maximum for
 * all but tiny kernels, as section 4.5 prefers); the blocks per wave follow from it with the
 * assumed register bound (or from k->wave_limit when launch lowered it): 32, or for a kernel
 * with resident rows map_row_resident_regs() of its longest lane part, the block then shrunk
 * so that RESIDENT_BLOCKS_PER_SM blocks (two when persistent) fit on an SM at that bound, and for a
 * kernel of a block per tile whose reductions are all resident rows to the fewest rows that
 * move RESIDENT_BLOCK_BYTES (resident_block()). Then, per dominant:
 *
 *   row reduce     (map_row.c) a row of at most 256 x 32 elements reduced over trailing axes
 *                  (1024 x 32 with the long_rows option) is *resident*: each lane keeps its
 *                  part of the row in registers across the kernel's phases, 16-byte accesses
 *                  of the row's widest tensor; longer rows are streamed. Short rows are packed
 *                  several per block (horizontal packing); when there are fewer row tiles than
 *                  blocks per wave and streamed rows are longer than a block, a row is split
 *                  across blocks (task splitting) whose partial results are combined.
 *   column reduce  threads walk adjacent columns (coalesced) and lanes walk down the rows;
 *                  few columns with long columns split the rows across blocks likewise. A
 *                  group alone in its kernel takes runs of 16 bytes of adjacent columns per
 *                  thread where *Column runs* (below) allow.
 *   element-wise   one element per thread per tile (a block per tile: one 16-byte vector per
 *                  thread, blocks of TILE_BLOCK_ELEMENTWISE when every group is element-wise).
 *
 * Vertical packing and task splitting are in packing.c. A persistent kernel (k->persistent: it
 * has global barriers, or the persistent option) packs tiles beyond one wave vertically: a
 * block walks a contiguous chunk of tiles, so the grid never exceeds one wave and global
 * barriers stay legal. Any other kernel takes a block per tile and
 * the hardware schedules the grid in waves. With packing off, a row or column takes one tile and
 * nothing is split (the XLA baseline); vertical packing remains where the kernel is persistent.
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

/* A kernel of element-wise groups launched a block per tile: threads per block (measured on the
 * H100 against one wave of 1024: eltwise_16m 53.1 -> 48.2 us, docs/planner.md), and
 * TILE_BLOCK_ELEMENTWISE_LONG where its 16-byte tasks of f32 fill MANY_WAVES waves of the
 * device's threads: a block's registers and threads are freed only when its last warp ends, and
 * over many waves smaller blocks keep the SMs fuller (H200, bench/RESULTS.md: gelu_bias 160.2 ->
 * 154.9 us, the rotary embedding 38.9 -> 36.4; a graph of one wave, eltwise_1m, 6.4 -> 6.6). */
enum { TILE_BLOCK_ELEMENTWISE = 512, TILE_BLOCK_ELEMENTWISE_LONG = 128, MANY_WAVES = 4 };
/* Blocks of a kernel with resident rows launched a block per tile: small enough that this
 * many fit on an SM at the resident register bound (measured on the H100 against two:
 * rmsnorm_bf16, 256 lanes per row at 64 registers, 38.7 -> 32.0 us with a row per block
 * instead of two; other resident graphs within 1%). */
enum { RESIDENT_BLOCKS_PER_SM = 4 };
/* A kernel of a block per tile whose reductions are all resident rows then takes the fewest
 * rows per block that move RESIDENT_BLOCK_BYTES of row-shaped inputs and outputs, at least
 * RESIDENT_BLOCK_MIN threads: a block's registers are freed only when its slowest warp ends
 * (H200, bench/RESULTS.md: layernorm 42.7 -> 41.7 us, a causal softmax of 805 MB 195.8 ->
 * 192.6). Below about 4 KB a block the SMs cannot take new blocks fast enough (row sums of a
 * product of two [750000, 32] in blocks of 64: 48.9 -> 60.4 us, some 85 ns per block per SM),
 * and blocks of 32 cap an SM at half its threads. */
enum { RESIDENT_BLOCK_BYTES = 4096, RESIDENT_BLOCK_MIN = 64 };
/* A kernel of a block per tile at the 32-register assumption whose rows are streamed in single
 * elements (no 16-byte run divides the row) takes blocks of at most STREAM_SINGLE_BLOCK: such a
 * walk's code needs up to 64 registers, which leaves one block of 1024 per SM, idle through its
 * every block barrier. Measured on an H200 (bench/RESULTS.md, *rows streamed in single elements
 * in blocks of 512*), 1024 -> 512 threads: wav2vec 2.0's GroupNorm + GELU over rows of 15999
 * f32 375 -> 263 us, a layer norm over 12289 bf16 144 -> 114, an instance norm over 9999 f32 136
 * -> 119, a softmax over 20001 f16 199 -> 169; blocks of 256 were slower on two of the four
 * (the layer and instance norms) and at most 3% faster on the others. Rows that
 * runs divide were slower in smaller blocks (a layer norm over 16384 f32 81 -> 93), and keep
 * theirs. */
enum { STREAM_SINGLE_BLOCK = 512 };


int64_t mapping_access_elements(int64_t access_bytes)
{
    return 16 / (access_bytes < 2 ? 2 : access_bytes > 8 ? 8 : access_bytes);
}

/* Persistent, a tile is one element per thread; a block per tile, a 16-byte vector per thread
 * (elements of the widest tensor, of access_bytes; at most 8, halved until it divides the
 * space), which is what codegen loads at once. */
static void map_elementwise(astitch_mapping *m, const MapCtx *c, int64_t quantum,
                            int64_t access_bytes)
{
    m->threads_per_row = 1;
    m->rows_per_block = c->block;
    m->split = 1;
    int64_t v = 1;
    if (!c->persistent) {
        v = mapping_access_elements(access_bytes);
        while (v > 1 && m->rows % v)
            v /= 2;
    }
    packing_finish(m, c, ceil_div(m->rows, c->block * v), c->block * v, quantum);
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

/* The smallest and the largest element size among the kernel's input and output tensors with
 * as many elements as mapping m's space (the row-shaped tensors a resident row loads and
 * stores); 4 and 4 when there is none. Accesses fill 16 bytes of the widest, not of the
 * narrowest: each warp access of every tensor is then one contiguous span (plan_access_elements,
 * plan.h). */
static ElementSizes space_element_sizes(const astitch_graph *g, const PlanKernel *k,
                                        const astitch_mapping *m)
{
    int64_t n = m->rows * m->row_len;
    ElementSizes b = {0, 0};
    for (int32_t i = 0; i < k->ninput + k->noutput; i++) {
        const Node *x = gnode(g, i < k->ninput ? k->input[i] : k->output[i - k->ninput]);
        int64_t size = astitch_dtype_size(x->dtype);
        if (shape_elements(&x->shape) != n)
            continue;
        if (b.least == 0 || size < b.least)
            b.least = size;
        if (size > b.most)
            b.most = size;
    }
    if (b.most == 0)
        b.least = b.most = 4;
    return b;
}

/* Group i of kernel k: its dominant's space in *m, and whether its rows are resident (then
 * their lanes and vector width, resident_layout). */
static bool group_resident(const astitch_graph *g, const PlanKernel *k, const MapCtx *c, int32_t i,
                           astitch_mapping *m, int64_t *lanes, int32_t *vector)
{
    space_of(g, k->group[i].dominant, m);
    return map_row_resident_layout(m, c, space_element_sizes(g, k, m), lanes, vector);
}

/* The register bound to assume for kernel k: 32, or map_row_resident_regs() of its longest
 * resident lane part (times the tiles a thread takes at once: one when a block takes one
 * tile); *lanes the most lanes of a resident row (0 when none). */
static int64_t assumed_regs(const astitch_graph *g, const PlanKernel *k, const MapCtx *c,
                            int64_t *lanes)
{
    int64_t regs = 32;
    *lanes = 0;
    for (int32_t i = 0; i < k->ngroup; i++) {
        astitch_mapping m;
        int64_t t;
        int32_t v;
        if (!group_resident(g, k, c, i, &m, &t, &v))
            continue;
        m.threads_per_row = (int32_t)t;
        m.vector = v;
        *lanes = t > *lanes ? t : *lanes;
        /* several tiles at once only where a block walks several (persistent) */
        int64_t r = map_row_resident_regs(plan_lane_elements(&m),
                                          c->persistent ? plan_resident_tiles(&m) : 1,
                                  c->persistent);
        if (r > regs)
            regs = r;
    }
    return regs;
}

/* Bytes of one element of mapping m's space that kernel k reads (its inputs of that many
 * elements), and with `outputs` writes too (its outputs of that many); 4 when none. */
static int64_t space_bytes(const astitch_graph *g, const PlanKernel *k, const astitch_mapping *m,
                           bool outputs)
{
    int64_t n = m->rows * m->row_len, bytes = 0;
    for (int32_t i = 0; i < k->ninput + (outputs ? k->noutput : 0); i++) {
        const Node *x = gnode(g, i < k->ninput ? k->input[i] : k->output[i - k->ninput]);
        if (shape_elements(&x->shape) == n)
            bytes += astitch_dtype_size(x->dtype);
    }
    return bytes ? bytes : 4;
}

/* Kernel k's inputs with as many elements as mapping m's space. */
static int64_t space_inputs(const astitch_graph *g, const PlanKernel *k, const astitch_mapping *m)
{
    int64_t n = m->rows * m->row_len, count = 0;
    for (int32_t i = 0; i < k->ninput; i++)
        count += shape_elements(&gnode(g, k->input[i])->shape) == n;
    return count;
}

/* What map_column needs to know of column group gr's walk over space m. */
static ColumnWalk column_walk(const astitch_graph *g, const PlanKernel *k, const PlanGroup *gr,
                              const astitch_mapping *m)
{
    ColumnWalk w = {space_element_sizes(g, k, m).most, 0, 0, space_inputs(g, k, m), false};
    for (int32_t s = -1; s < gr->nsub; s++) {
        const Node *r = gnode(g, s < 0 ? gr->dominant : gr->sub[s]);
        w.reduces += r->op == ASTITCH_OP_REDUCE;
        w.not_float += r->op == ASTITCH_OP_REDUCE && !dtype_is_float(r->dtype);
        w.online_pair =
            w.online_pair || (s >= 0 && plan_online_nodes(g, gr->dominant, gr->sub[s], m));
    }
    return w;
}

int64_t mapping_wave(const astitch_device *dev, int64_t block, int64_t regs, int64_t wave_limit)
{
    int64_t wave = launch_blocks_per_sm(dev, block, regs, 0) * dev->sm_count;
    return wave_limit > 0 && wave_limit < wave ? wave_limit : wave;
}

/* The block kernel k's resident rows ask for (not persistent, block c->block): the fewest
 * threads, the lanes of a row times a power of two, whose rows move RESIDENT_BLOCK_BYTES in
 * every row group; 0 when some row is streamed, the kernel has no reduction, or it sums
 * columns, in a column group or across a row group's rows: those sums meet across blocks, by a
 * split that follows the block or by atomics per block, and smaller blocks multiply them (a
 * GPT-2 layer norm backward's weight gradients, on the H200: 39.2 -> 44.5 us in blocks of 64
 * instead of 256). *one_row: every resident group has rows of one length and element sizes,
 * so of one lane layout (*lanes). */
static int64_t rows_block(const astitch_graph *g, const PlanKernel *k, const MapCtx *c,
                          bool *one_row, int64_t *lanes)
{
    int64_t block = 0, len = 0;
    ElementSizes sizes = {0, 0};
    *one_row = true;
    *lanes = 0;
    for (int32_t i = 0; i < k->ngroup; i++) {
        astitch_mapping m;
        int32_t v;
        if (!group_resident(g, k, c, i, &m, lanes, &v)) {
            if (m.kind == ASTITCH_MAP_ELEMENTWISE)
                continue;
            return 0;
        }
        for (int32_t s = 0; s < k->group[i].nsub; s++)
            if (plan_reduce_across(g, &m, k->group[i].sub[s]))
                return 0;
        ElementSizes b = space_element_sizes(g, k, &m);
        if (len && (m.row_len != len || b.least != sizes.least || b.most != sizes.most))
            *one_row = false;
        len = m.row_len;
        sizes = b;
        int64_t row = m.row_len * space_bytes(g, k, &m, true);
        int64_t want = *lanes * pow2_ceil(ceil_div(RESIDENT_BLOCK_BYTES, row));
        block = want > block ? want : block;
    }
    return block;
}

/* The block of kernel k: rows_block, at least RESIDENT_BLOCK_MIN and at most c->block (a
 * multiple of the lanes where they are balanced); c->block where the rows ask for none. */
static int32_t resident_block(const astitch_graph *g, const PlanKernel *k, const MapCtx *c)
{
    bool one_row;
    int64_t lanes, block = rows_block(g, k, c, &one_row, &lanes);
    if (block == 0)
        return c->block;
    if (block < RESIDENT_BLOCK_MIN)
        block = RESIDENT_BLOCK_MIN;
    if (block > c->block)
        block = c->balance_lanes ? c->block / lanes * lanes : c->block;
    return (int32_t)block;
}

/* Whether a group of kernel k streams its rows in single elements: a row reduce over trailing
 * axes, not resident, whose last axis no run of two or more of its widest tensor's 16-byte
 * access divides (plan_row_vector would be 1), or any such row with row vectors off. */
static bool streams_single(const astitch_graph *g, const PlanKernel *k, const MapCtx *c,
                           bool row_vectors)
{
    for (int32_t i = 0; i < k->ngroup; i++) {
        astitch_mapping m;
        int64_t lanes;
        int32_t v;
        if (group_resident(g, k, c, i, &m, &lanes, &v) || m.kind != ASTITCH_MAP_ROW_REDUCE ||
            !plan_reduces_trailing(&m) || m.rank < 1)
            continue;
        int64_t run =
            row_vectors ? mapping_access_elements(space_element_sizes(g, k, &m).most) : 1;
        while (run > 1 && m.dims[m.rank - 1] % run)
            run /= 2;
        if (run == 1)
            return true;
    }
    return false;
}

bool mapping_stream_rewalks(const Planner *pl, const PlanKernel *k)
{
    const astitch_device *dev = &pl->p->dev;
    int64_t warp = dev->warp_size;
    for (int32_t i = 0; i < k->nphase; i++) {
        const PlanPhase *ph = &k->phase[i];
        const astitch_mapping *m = &ph->map;
        if (m->kind != ASTITCH_MAP_ROW_REDUCE || ph->resident || m->threads_per_row != warp ||
            m->row_len <= warp || ph->run_first != i)
            continue;
        int walks = 0;
        for (int32_t j = i; j < k->nphase && k->phase[j].run_first == i; j++)
            walks += sched_map_equal(&k->phase[j].map, m) &&
                     !(j > i && plan_online_pair(pl->p, k, j - 1));
        int64_t wave = (int64_t)dev->sm_count * (dev->max_threads_per_sm / m->block);
        int64_t warps = (m->grid < wave ? m->grid : wave) * (m->block / warp);
        int64_t rows = m->rows < warps ? m->rows : warps;
        if (walks > 1 && (dev->l2_bytes <= 0 ||
                          rows * m->row_len * space_bytes(pl->g, k, m, false) > dev->l2_bytes / 2))
            return true;
    }
    return false;
}

int64_t mapping_column_rewalk_bytes(const Planner *pl, const PlanKernel *k)
{
    int64_t most = 0;
    for (int32_t i = 0; i < k->nphase; i++) {
        const astitch_mapping *m = &k->phase[i].map;
        if (m->kind != ASTITCH_MAP_COLUMN_REDUCE || k->phase[i].run_first != i)
            continue;
        bool again = false;
        for (int32_t j = i + 1; j < k->nphase && k->phase[j].run_first == i; j++)
            again = again || sched_map_equal(&k->phase[j].map, m);
        int64_t tile = m->rows_per_block * m->split_len * space_bytes(pl->g, k, m, false);
        if (again && tile > most)
            most = tile;
    }
    return most;
}

astitch_status pass_mapping(Planner *pl, PlanKernel *k)
{
    const astitch_graph *g = pl->g;
    const astitch_device *dev = &pl->p->dev;
    MapCtx c = {dev, dev->warp_size, 0, pl->p->opt.packing, k->persistent, pl->p->opt.wide_rows,
             pl->p->opt.long_rows,
             k->ngroup == 1, !k->stream_by_block, pl->p->opt.column_vectors, false,
             pl->p->opt.online_softmax, false};
    bool elementwise = true;
    int64_t elements = 0;
    for (int32_t i = 0; i < k->ngroup; i++) {
        astitch_mapping m;
        space_of(g, k->group[i].dominant, &m);
        elements = m.rows * m.row_len > elements ? m.rows * m.row_len : elements;
        int64_t want = pow2_ceil(useful_threads(&m, c.packing, dev->warp_size));
        if (want > dev->max_threads_per_block)
            want = dev->max_threads_per_block;
        if (want > c.block)
            c.block = (int32_t)want;
        elementwise = elementwise && m.kind == ASTITCH_MAP_ELEMENTWISE;
    }
    if (!c.persistent && elementwise && c.block > TILE_BLOCK_ELEMENTWISE)
        c.block = elements / 4 >= (int64_t)MANY_WAVES * dev->sm_count * dev->max_threads_per_sm
                      ? TILE_BLOCK_ELEMENTWISE_LONG
                      : TILE_BLOCK_ELEMENTWISE;
    bool one_row;
    int64_t lanes;
    c.balance_lanes = !c.persistent && rows_block(g, k, &c, &one_row, &lanes) > 0 && one_row;
    int64_t regs = assumed_regs(g, k, &c, &lanes);
    if (regs > 32) { /* blocks per SM at the resident bound, never below a resident row */
        int64_t cap = pow2_floor(dev->regs_per_sm /
                                 ((c.persistent ? 2 : RESIDENT_BLOCKS_PER_SM) * regs));
        if (cap < MAP_ROW_LANES_MAX)
            cap = MAP_ROW_LANES_MAX;
        if (cap < lanes)
            cap = lanes;
        if (c.block > cap)
            c.block = (int32_t)cap;
        if (!c.persistent)
            c.block = resident_block(g, k, &c);
        if (regs * c.block > dev->regs_per_sm) /* a long row's block: the bound it leaves */
            regs = launch_regs_for(dev, c.block, 1);
    }
    if (c.packing && !c.persistent && regs <= 32 && c.block > STREAM_SINGLE_BLOCK &&
        streams_single(g, k, &c, pl->p->opt.row_vectors))
        c.block = STREAM_SINGLE_BLOCK;
    if (c.alone && !c.persistent) {
        astitch_mapping m;
        space_of(g, k->group[0].dominant, &m);
        if (m.kind == ASTITCH_MAP_COLUMN_REDUCE) {
            ColumnWalk w = column_walk(g, k, &k->group[0], &m);
            bool whole = false;
            c.block = map_column_block(&m, &c, &w, regs, k->wave_limit, &whole);
            c.whole_columns = whole;
        }
    }
    c.wave = (int32_t)mapping_wave(dev, c.block, regs, k->wave_limit);
    if (c.wave < 1)
        return ctx_fail(g->ctx, ASTITCH_ERR_UNSUPPORTED,
                        "planner: kernel %s: device '%s' cannot hold one block of %d threads",
                        k->name, dev->name, (int)c.block);
    k->block = c.block;
    k->blocks_per_wave = c.wave;
    for (int32_t i = 0; i < k->ngroup; i++) {
        PlanGroup *gr = &k->group[i];
        astitch_mapping *m = &gr->map;
        space_of(g, gr->dominant, m);
        if (m->kind == ASTITCH_MAP_ROW_REDUCE) {
            map_row(m, &c, space_element_sizes(g, k, m));
        } else if (m->kind == ASTITCH_MAP_COLUMN_REDUCE) {
            ColumnWalk w = column_walk(g, k, gr, m);
            map_column(m, &c, &w);
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
            map_elementwise(m, &c, quantum, space_element_sizes(g, k, m).most);
        }
    }
    return ASTITCH_OK;
}
