/*
 * simt.c: SIMT launches on the host (the model is described in simt.h).
 *
 *   simt_launch   check the launch, prepare the libffi call, allocate a wave's state
 *   run_wave      start every thread of a wave as a fiber and run the ready queue until it is
 *                 empty; a thread leaves the queue at a barrier and is queued again when the
 *                 barrier completes
 *   deadlock      the queue is empty but threads still wait: say which barrier and how many
 *   check_shared_redzones  after a wave: did a block write a guard of its shared memory
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"
#include "simt.h"

_Thread_local SimtExec *simt_current;

static void queue_push(SimtExec *x, int32_t slot)
{
    int32_t at = x->qhead + x->qlen;
    if (at >= x->nthreads)
        at -= x->nthreads;
    x->queue[at] = slot;
    x->qlen++;
}

static int32_t queue_pop(SimtExec *x)
{
    int32_t slot = x->queue[x->qhead];
    if (++x->qhead == x->nthreads)
        x->qhead = 0;
    x->qlen--;
    return slot;
}

void simt_arrive(SimtExec *x, SimtBarrier *b, SimtWaitKind kind)
{
    SimtThread *t = x->cur;
    if (b->arrived + 1 >= b->expected) {
        /* The last one: release the others and go on without a switch. */
        for (int32_t i = 0; i < b->arrived; i++) {
            SimtThread *w = &x->thread[b->waiter[i]];
            w->state = SIMT_READY;
            w->wait = SIMT_WAIT_NONE;
            queue_push(x, w->slot);
        }
        b->arrived = 0;
        return;
    }
    b->waiter[b->arrived++] = t->slot;
    t->state = SIMT_WAIT;
    t->wait = (uint8_t)kind;
    simt_fiber_switch(t->fiber, x->sched);
}

void simt_fail(SimtExec *x, const char *fmt, ...)
{
    SimtThread *t = x->cur;
    int n = snprintf(x->error, sizeof x->error, "kernel '%s' block %d thread %d: ", x->name,
                     t->block, t->tid);
    if (n < 0 || (size_t)n >= sizeof x->error)
        n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->error + n, sizeof x->error - (size_t)n, fmt, ap);
    va_end(ap);
    x->failed = true;
    x->status = ASTITCH_ERR_DEVICE;
    simt_fiber_exit(t->fiber, x->sched);
}

/* The body of every GPU thread: the kernel with the launch's arguments. */
static void thread_main(void *arg)
{
    SimtExec *x = arg;
    ffi_call(&x->cif, x->l->fn, NULL, x->l->arg_values);
    x->cur->state = SIMT_DONE;
}

/* Appends " (3 exited, 2 at the grid barrier)" for the nonzero counts. */
static void explain(char *buf, size_t len, int exited, int at_block, int at_warp, int at_grid)
{
    const char *what[4] = {"exited", "at a block barrier", "in a warp shuffle",
                           "at the grid barrier"};
    int count[4] = {exited, at_block, at_warp, at_grid};
    size_t used = strlen(buf);
    bool first = true;
    for (int i = 0; i < 4; i++) {
        if (count[i] == 0 || used + 1 >= len)
            continue;
        int n = snprintf(buf + used, len - used, "%s%d %s", first ? " (" : ", ", count[i],
                         what[i]);
        used = n < 0 ? len : used + (size_t)n;
        first = false;
    }
    if (!first && used + 1 < len)
        snprintf(buf + used, len - used, ")");
}

/* Reports why the threads still waiting in a wave can never run again. */
static astitch_status deadlock(SimtExec *x)
{
    int32_t block = x->l->block;
    /* Thread counts indexed by SimtWaitKind; the unused SIMT_WAIT_NONE slot counts those that
     * exited (nothing else is left when the queue is empty). */
    enum { EXITED = SIMT_WAIT_NONE };
    int total[4] = {0};
    for (int32_t b = 0; b < x->wave_blocks; b++) {
        int count[4] = {0};
        for (int32_t i = 0; i < block; i++) {
            const SimtThread *t = &x->thread[b * block + i];
            count[t->state == SIMT_DONE ? EXITED : t->wait]++;
        }
        for (int k = 0; k < 4; k++)
            total[k] += count[k];
        if (count[SIMT_WAIT_BLOCK] > 0) {
            snprintf(x->error, sizeof x->error,
                     "kernel '%s' block %d: block barrier reached by %d of %d threads", x->name,
                     x->first_block + b, count[SIMT_WAIT_BLOCK], block);
            explain(x->error, sizeof x->error, count[EXITED], 0, count[SIMT_WAIT_WARP],
                    count[SIMT_WAIT_GRID]);
            return ASTITCH_ERR_DEVICE;
        }
        for (int32_t w = 0; w < x->warps; w++) {
            const SimtWarp *wp = &x->warp[b * x->warps + w];
            if (wp->bar.arrived == 0)
                continue;
            int exited = 0;
            for (int32_t i = 0; i < wp->bar.expected; i++)
                exited += x->thread[b * block + w * SIMT_WARP_SIZE + i].state == SIMT_DONE;
            snprintf(x->error, sizeof x->error,
                     "kernel '%s' block %d warp %d: warp shuffle reached by %d of %d lanes",
                     x->name, x->first_block + b, w, wp->bar.arrived, wp->bar.expected);
            explain(x->error, sizeof x->error, exited, 0, 0,
                    wp->bar.expected - wp->bar.arrived - exited);
            return ASTITCH_ERR_DEVICE;
        }
    }
    snprintf(x->error, sizeof x->error, "kernel '%s': grid barrier reached by %d of %d threads",
             x->name, total[SIMT_WAIT_GRID], x->nthreads);
    explain(x->error, sizeof x->error, total[EXITED], 0, 0, 0);
    return ASTITCH_ERR_DEVICE;
}

/* After a wave: fails it when a block overwrote a guard of its shared memory. */
static astitch_status check_shared_redzones(SimtExec *x)
{
    const SimtRedzones *z = x->l->shared_redzones;
    int64_t bad;
    for (int32_t b = 0; z && b < x->wave_blocks; b++) {
        if (!simt_redzone_check(x->shared + (size_t)b * x->shared_stride, z, &bad))
            continue;
        char where[384];
        simt_redzone_explain(z, bad, where, sizeof where);
        snprintf(x->error, sizeof x->error,
                 "kernel '%s' block %d: shared-memory redzone overwritten at byte %lld (%s)",
                 x->name, x->first_block + b, (long long)bad, where);
        return ASTITCH_ERR_DEVICE;
    }
    return ASTITCH_OK;
}

/* Runs the blocks first .. first + wave_blocks - 1 to completion. */
static astitch_status run_wave(SimtExec *x, int32_t first)
{
    int32_t block = x->l->block;
    x->first_block = first;
    x->done = 0;
    x->qhead = x->qlen = 0;
    for (int32_t s = 0; s < x->nthreads; s++) {
        x->thread[s] = (SimtThread){.tid = s % block, .block = first + s / block, .slot = s};
        queue_push(x, s);
    }
    for (int32_t b = 0; b < x->wave_blocks; b++) {
        x->bar_block[b] = (SimtBarrier){0, block, x->waiters + (size_t)b * block};
        for (int32_t w = 0; w < x->warps; w++) {
            SimtWarp *wp = &x->warp[b * x->warps + w];
            int32_t lanes = block - w * SIMT_WARP_SIZE;
            wp->bar = (SimtBarrier){0, lanes < SIMT_WARP_SIZE ? lanes : SIMT_WARP_SIZE,
                                    wp->waiter};
        }
    }
    x->bar_grid = (SimtBarrier){0, x->nthreads, x->waiters + x->nthreads};
    memset(x->shared, 0xff, (size_t)x->wave_blocks * x->shared_stride);
    for (int32_t b = 0; x->l->shared_redzones && b < x->wave_blocks; b++)
        simt_redzone_fill(x->shared + (size_t)b * x->shared_stride, x->l->shared_redzones);

    while (x->qlen > 0) {
        SimtThread *t = &x->thread[queue_pop(x)];
        if (t->state == SIMT_NEW) {
            size_t size;
            t->stack = simt_stack_get(x->stacks, &size);
            if (!t->stack) {
                snprintf(x->error, sizeof x->error,
                         "kernel '%s': out of memory for the fiber stacks of %d threads",
                         x->name, x->nthreads - x->done);
                return ASTITCH_ERR_MEMORY;
            }
            t->fiber = simt_fiber_make(t->stack, size, thread_main, x, x->sched);
            t->state = SIMT_READY;
        }
        x->cur = t;
        simt_fiber_switch(x->sched, t->fiber);
        x->cur = NULL;
        if (x->failed)
            return x->status;
        if (t->state == SIMT_DONE) {
            simt_stack_put(x->stacks, t->stack);
            t->stack = NULL;
            t->fiber = NULL;
            x->done++;
        }
    }
    if (x->done != x->nthreads)
        return deadlock(x);
    return check_shared_redzones(x);
}

/* Checks l; on failure writes the message into x->error. */
static astitch_status check_launch(SimtExec *x, const SimtLaunch *l)
{
    const char *why = NULL;
    char buf[256];
    if (!l->fn)
        why = "no kernel function";
    else if (l->nargs < 0 || l->nargs > SIMT_MAX_ARGS)
        why = "argument count out of range 0..256";
    else if (l->nargs > 0 && (!l->arg_types || !l->arg_values))
        why = "argument types or values missing";
    else if (l->grid < 1)
        why = "grid of fewer than 1 block";
    else if (l->block < 1 || l->block > SIMT_MAX_BLOCK)
        why = "block size out of range 1..1024";
    else if (l->shared_bytes > SIMT_MAX_SHARED)
        why = "shared memory per block exceeds 256 KiB";
    else if (l->shared_redzones && l->shared_redzones->bytes != (int64_t)l->shared_bytes)
        why = "shared-memory redzones laid out for another size";
    else if (l->cooperative && (int64_t)l->grid * l->block > SIMT_MAX_LIVE_THREADS) {
        snprintf(buf, sizeof buf,
                 "cooperative launch of %lld threads exceeds the %d the host runtime keeps live",
                 (long long)l->grid * l->block, SIMT_MAX_LIVE_THREADS);
        why = buf;
    } else if (simt_current)
        why = "launch from inside a kernel";
    if (!why)
        return ASTITCH_OK;
    snprintf(x->error, sizeof x->error, "kernel '%s' (grid %d x block %d, %zu shared bytes): %s",
             x->name, l->grid, l->block, l->shared_bytes, why);
    return ASTITCH_ERR_ARGUMENT;
}

/* Allocates the state of one wave; on failure writes the message into x->error. */
static astitch_status alloc_wave(SimtExec *x, const SimtLaunch *l)
{
    x->wave_blocks = l->cooperative ? l->grid : 1;
    x->nthreads = x->wave_blocks * l->block;
    x->warps = (l->block + SIMT_WARP_SIZE - 1) / SIMT_WARP_SIZE;
    /* Under redzones each block's part is followed by at least SIMT_REDZONE guard bytes, and
     * the first block's is preceded by as many. */
    size_t guard = l->shared_redzones ? SIMT_REDZONE : 0;
    x->shared_stride = (l->shared_bytes + guard + SIMT_SHARED_ALIGN - 1) / SIMT_SHARED_ALIGN *
                       SIMT_SHARED_ALIGN;
    if (x->shared_stride == 0)
        x->shared_stride = SIMT_SHARED_ALIGN;
    size_t shared = (size_t)x->wave_blocks * x->shared_stride;
    if (shared > SIMT_MAX_SHARED_TOTAL) {
        snprintf(x->error, sizeof x->error,
                 "kernel '%s': %d live blocks need %zu bytes of shared memory, more than %zu",
                 x->name, x->wave_blocks, shared, SIMT_MAX_SHARED_TOTAL);
        return ASTITCH_ERR_MEMORY;
    }
    size_t n = (size_t)x->nthreads;
    x->thread = malloc(n * sizeof *x->thread);
    x->bar_block = malloc((size_t)x->wave_blocks * sizeof *x->bar_block);
    x->warp = malloc((size_t)x->wave_blocks * (size_t)x->warps * sizeof *x->warp);
    x->waiters = malloc(2 * n * sizeof *x->waiters);
    x->queue = malloc(n * sizeof *x->queue);
    x->shared_alloc = aligned_alloc(SIMT_SHARED_ALIGN, shared + guard);
    x->shared = x->shared_alloc ? x->shared_alloc + guard : NULL;
    x->sched = simt_fiber_alloc();
    x->stacks = simt_stacks_create(l->stack_bytes);
    if (!x->thread || !x->bar_block || !x->warp || !x->waiters || !x->queue || !x->shared ||
        !x->sched || !x->stacks) {
        snprintf(x->error, sizeof x->error,
                 "kernel '%s': out of memory for %d live threads and %zu shared bytes", x->name,
                 x->nthreads, shared);
        return ASTITCH_ERR_MEMORY;
    }
    return ASTITCH_OK;
}

static void free_wave(SimtExec *x)
{
    simt_stacks_destroy(x->stacks);
    simt_fiber_free(x->sched);
    free(x->shared_alloc);
    free(x->queue);
    free(x->waiters);
    free(x->warp);
    free(x->bar_block);
    free(x->thread);
}

astitch_status simt_launch(astitch_context *ctx, const SimtLaunch *l)
{
    if (!l)
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "simt launch: no launch description");
    SimtExec *x = calloc(1, sizeof *x);
    if (!x)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "simt launch: out of memory");
    x->l = l;
    x->name = l->name ? l->name : "(unnamed)";
    astitch_status st = check_launch(x, l);
    if (st == ASTITCH_OK) {
        ffi_status fs = ffi_prep_cif(&x->cif, FFI_DEFAULT_ABI, (unsigned)l->nargs,
                                     &ffi_type_void, l->arg_types);
        if (fs != FFI_OK) {
            snprintf(x->error, sizeof x->error,
                     "kernel '%s': libffi rejects the argument list (status %d)", x->name,
                     (int)fs);
            st = ASTITCH_ERR_ARGUMENT;
        }
    }
    if (st == ASTITCH_OK)
        st = alloc_wave(x, l);
    if (st == ASTITCH_OK) {
        simt_current = x;
        for (int32_t first = 0; first < l->grid && st == ASTITCH_OK; first += x->wave_blocks)
            st = run_wave(x, first);
        simt_current = NULL;
    }
    if (st != ASTITCH_OK)
        ctx_fail(ctx, st, "%s", x->error);
    free_wave(x);
    free(x);
    return st;
}
