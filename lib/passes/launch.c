/*
 * launch.c: resource-aware launch configuration by assume-relax-apply (paper 4.5).
 *
 * Assume a bound of 32 registers per thread; with the kernel's block size and planned shared
 * memory that gives the resident blocks per SM (the least of the device's block, thread,
 * register and shared-memory limits) and so the blocks per wave. Relax: the register bound
 * becomes the most registers per thread at which the residency the grid needs still holds,
 * rounded down to the allocation unit: that many blocks per SM, or only ceil(grid / SMs) when
 * the grid is smaller than the wave (a one-block kernel may use every register of its SM).
 * Apply: codegen emits the bound (maxnreg) so the compiled kernel keeps the residency the plan
 * relies on.
 *
 * A persistent kernel's grid must fit in one wave (global barriers need every block resident).
 * The mapping assumed a wave without shared memory; if the planned shared memory lowers
 * residency below the grid, the kernel's wave limit is lowered, *smaller_wave says so, and the
 * caller plans the kernel again. A kernel of a block per tile keeps the residency its mapping assumed (the blocks per
 * wave mapping recorded, at most what the shared memory allows) and may run in many waves.
 */
#include "passes/passes.h"

int64_t launch_blocks_per_sm(const astitch_device *d, int64_t block, int64_t regs, int64_t shared)
{
    int64_t unit = d->reg_alloc_unit > 0 ? d->reg_alloc_unit : 1;
    int64_t r = (regs + unit - 1) / unit * unit;
    int64_t b = d->max_blocks_per_sm;
    if (d->max_threads_per_sm / block < b)
        b = d->max_threads_per_sm / block;
    if (d->regs_per_sm / (r * block) < b)
        b = d->regs_per_sm / (r * block);
    if (shared > 0 && d->shared_per_sm / shared < b)
        b = d->shared_per_sm / shared;
    return b;
}

/* The fewest registers per thread kernel k's resident rows need (mapping_resident_min_regs):
 * 0 when it has none. A kernel with shared memory (column sums, exchanges across warps) keeps
 * more live than its rows: it is never tightened below its mapping's bound
 * (bert_base_bwd_layernorm spills 8 bytes at 64). */
static int64_t resident_floor(const PlanKernel *k)
{
    int64_t floor = 0;
    for (int32_t i = 0; i < k->nphase; i++)
        if (k->phase[i].resident) {
            int64_t r = mapping_resident_min_regs(plan_lane_elements(&k->phase[i].map));
            floor = r > floor ? r : floor;
        }
    return floor;
}

int64_t launch_regs_for(const astitch_device *d, int64_t block, int64_t blocks)
{
    int64_t unit = d->reg_alloc_unit > 0 ? d->reg_alloc_unit : 1;
    int64_t regs = d->regs_per_sm / (blocks * block) / unit * unit;
    if (regs > d->max_regs_per_thread)
        regs = d->max_regs_per_thread / unit * unit;
    return regs;
}

int64_t launch_next_regs(const astitch_device *d, int64_t block, int64_t regs,
                         int64_t blocks_per_sm)
{
    for (int64_t bps = blocks_per_sm - 1; bps >= 1; bps--) {
        int64_t r = launch_regs_for(d, block, bps);
        if (r > regs)
            return r;
    }
    return 0;
}

bool launch_bound_may_change(const PlanKernel *k)
{
    return !k->persistent && k->global_barriers == 0;
}

int64_t launch_next_bound(const astitch_device *d, const PlanKernel *k, int64_t bound)
{
    int64_t bps = bound > 0 ? launch_blocks_per_sm(d, k->block, bound, k->shared_bytes) : 0;
    return bps > 0 ? launch_next_regs(d, k->block, bound, bps) : 0;
}

astitch_status pass_launch(Planner *pl, PlanKernel *k, bool *smaller_wave)
{
    const astitch_device *d = &pl->p->dev;
    *smaller_wave = false;
    int64_t bps = launch_blocks_per_sm(d, k->block, 32, k->shared_bytes);
    if (bps < 1)
        return ctx_fail(pl->g->ctx, ASTITCH_ERR_UNSUPPORTED,
                        "planner: kernel %s: a block of %d threads with %lld bytes of shared "
                        "memory does not fit on an SM of device '%s'",
                        k->name, (int)k->block, (long long)k->shared_bytes, d->name);
    int64_t wave = bps * d->sm_count;
    if (k->persistent && k->grid > wave) {
        k->wave_limit = (int32_t)wave;
        *smaller_wave = true;
        return ASTITCH_OK;
    }
    int64_t needed = (k->grid + d->sm_count - 1) / d->sm_count;
    int64_t assumed = k->blocks_per_wave / d->sm_count, floor = resident_floor(k);
    /* a resident grid of at most two waves at the bound its mapping assumed: one wave, where the
     * bound that fits it still holds the rows (one wave of bert_base_fwd_attn_out_ln's 512
     * blocks at 64 registers: 14.3 us against 15.1 in 1.3 waves at 80, hand-written kernels on
     * the H100, bench/RESULTS.md) */
    int64_t tight = launch_regs_for(d, k->block, needed);
    bool one_wave = !k->persistent && floor > 0 && k->shared_bytes == 0 && needed > assumed &&
                    needed <= 2 * assumed && tight >= floor &&
                    launch_blocks_per_sm(d, k->block, tight, k->shared_bytes) >= needed;
    if (!k->persistent && needed > assumed && !one_wave) /* as mapping assumed */
        needed = assumed;
    int64_t tile = k->persistent ? 0 : mapping_column_rewalk_bytes(pl, k);
    if (tile > 0 && d->l2_bytes > 0 && needed * d->sm_count * tile > d->l2_bytes)
        needed = d->l2_bytes / (d->sm_count * tile); /* the walked-again tiles in the L2 */
    if (needed < 1)
        needed = 1;
    if (needed > bps)
        needed = bps;
    int64_t regs = launch_regs_for(d, k->block, needed);
    if (regs < 32)
        regs = 32;
    k->regs = (int32_t)regs;
    k->blocks_per_sm = (int32_t)launch_blocks_per_sm(d, k->block, regs, k->shared_bytes);
    k->blocks_per_wave = k->blocks_per_sm * d->sm_count;
    return ASTITCH_OK;
}
