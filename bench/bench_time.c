/* bench_time.c: the timing of one verified case of astitch-bench (bench_case.h): on the device,
 * runs queued back to back, CUDA-graph replays one per run and batched, the plan's steps, and a
 * device copy of the same bytes for the copy rate; on the host target, a smoke run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_case.h"
#include "bench_cuda.h"

static void finish_times(BenchRow *r, double *us, int n, const BenchDevice *dev)
{
    r->runs = n;
    r->median_us = bench_median(us, n); /* sorts */
    r->min_us = us[0];
    r->p90_us = us[(n * 9) / 10 < n ? (n * 9) / 10 : n - 1];
    r->gbps = r->median_us > 0 ? r->bytes / (r->median_us * 1e-6) / 1e9 : 0;
    r->pct_copy = dev->copy_gbps > 0 ? 100.0 * r->gbps / dev->copy_gbps : 0;
}

/* Output i of a run on set io (inputs, then outputs) into host: what the run wrote, or for a
 * view output (view_outputs) the view taken of the input on the device. False on failure. */
static bool download_output(BenchCase *c, const astitch_executable *x, const uint64_t *io, int i,
                            void *host)
{
    bool is_view = false;
    astitch_output_view v;
    if (astitch_executable_output_view(x, i, &is_view, &v) != ASTITCH_OK)
        return false;
    if (!is_view)
        return !bench_cuda_download(c->cuda, host, io[c->nin + i], c->bytes[c->nin + i]);
    void *in = malloc(c->bytes[v.input] + 1);
    bool ok = in && !bench_cuda_download(c->cuda, in, io[v.input], c->bytes[v.input]) &&
              astitch_executable_view_copy(x, i, in, host) == ASTITCH_OK;
    free(in);
    return ok;
}

/* Compares the outputs that runs left in set io (inputs, then outputs) with the reference;
 * `when` says which runs in the note. */
static void check_after(BenchCase *c, const astitch_executable *x, BenchRow *r, const uint64_t *io,
                        const char *when)
{
    void **host = calloc((size_t)c->nout + 1, sizeof *host);
    bool ok = host != NULL;
    for (int i = 0; ok && i < c->nout; i++)
        ok = (host[i] = malloc(c->bytes[c->nin + i] + 1)) && download_output(c, x, io, i, host[i]);
    DiffResult d;
    if (!ok) {
        r->status = "error";
        snprintf(r->note, sizeof r->note, "%s: %.280s", when, bench_cuda_error(c->cuda));
    } else if (!diff_ref_compare(c->ref, (const void *const *)host, &d)) {
        r->status = "WRONG";
        snprintf(r->note, sizeof r->note, "%s: %.280s", when, d.message);
    }
    for (int i = 0; host && i < c->nout; i++)
        free(host[i]);
    free(host);
}

/* Queues runs [first, first + n) on the device, rotating sets: astitch_execute_device, or with
 * graphs, a replay of the set's graph; event i + 1 after run i (event 0 before the first);
 * per-run microseconds into us. */
static int timed_runs(BenchCase *c, astitch_executable *x, void *const *graphs, uint64_t **set,
                      int nsets, int first, int n, double *us, BenchRow *r)
{
    if (bench_cuda_events(c->cuda, n + 1) || bench_cuda_sync(c->cuda) ||
        bench_cuda_record(c->cuda, 0)) {
        bench_fail(r, "error", "%s", bench_cuda_error(c->cuda));
        return -1;
    }
    for (int i = 0; i < n; i++) {
        int k = (first + i) % nsets;
        bool ran = graphs ? bench_cuda_graph_launch(c->cuda, graphs[k]) == 0
                          : astitch_execute_device(x, set[k], set[k] + c->nin,
                                                   bench_cuda_stream(c->cuda)) == ASTITCH_OK;
        if (!ran) {
            const char *why = graphs ? bench_cuda_error(c->cuda)
                                     : astitch_last_error(astitch_graph_context(c->g));
            bench_fail(r, "error", "run: %.280s", why);
            bench_cuda_sync(c->cuda);
            return -1;
        }
        if (bench_cuda_record(c->cuda, i + 1)) {
            bench_fail(r, "error", "%s", bench_cuda_error(c->cuda));
            return -1;
        }
    }
    for (int i = 0; i < n; i++) {
        double ms;
        if (bench_cuda_elapsed(c->cuda, i, i + 1, &ms)) {
            bench_fail(r, "error", "%s", bench_cuda_error(c->cuda));
            return -1;
        }
        us[i] = ms * 1e3;
    }
    return 0;
}

/* Warm-up, then the timed runs (as timed_runs, from set 0 on): 3 runs estimate one run's time;
 * more follow until about 50 ms of device time has passed (clocks ramp up after the idle
 * host-side work between cases). The last estimate sizes the timed loop (about max_seconds,
 * min_runs to runs) unless n > 0 fixes it. Returns the number of timed runs, their
 * microseconds in us, and in *last the set the last one used; -1 on failure (in r). */
static int warm_and_time(BenchCase *c, astitch_executable *x, void *const *graphs, uint64_t **set,
                         int nsets, int n, double *us, BenchRow *r, int *last)
{
    const BenchOptions *o = c->o;
    int warm = 3;
    if (timed_runs(c, x, graphs, set, nsets, 0, warm, us, r))
        return -1;
    double est = bench_median(us, warm), more = 50e3 / (est > 0.1 ? est : 0.1);
    int extra = more > o->runs ? o->runs : (int)more;
    if (extra >= warm) {
        if (timed_runs(c, x, graphs, set, nsets, warm, extra, us, r))
            return -1;
        est = bench_median(us, extra);
        warm += extra;
    }
    if (n < 1) {
        double fit = o->max_seconds * 1e6 / (est > 0.1 ? est : 0.1);
        n = fit < o->min_runs ? o->min_runs : fit > o->runs ? o->runs : (int)fit;
    }
    if (timed_runs(c, x, graphs, set, nsets, warm, n, us, r))
        return -1;
    *last = (warm + n - 1) % nsets;
    return n;
}

/* Fills every set's outputs with 0xff bytes, so that a check finds what the runs did not
 * write: NULL, or the error. */
static const char *poison_outputs(BenchCase *c, uint64_t **set, int nsets)
{
    for (int k = 0; k < nsets; k++)
        for (int i = c->nin; i < c->nin + c->nout; i++)
            if (bench_cuda_fill(c->cuda, set[k][i], 0xff, c->bytes[i]))
                return bench_cuda_error(c->cuda);
    return NULL;
}

/* Captures one run per set into a CUDA graph, poisons every set's outputs, and times n replays
 * of the graphs as the runs were timed; r->graph_us gets their median, and the outputs of the
 * last replay are checked. */
static void time_graphs(BenchCase *c, astitch_executable *x, uint64_t **set, int nsets, int n,
                        double *us, BenchRow *r)
{
    void **graph = calloc((size_t)nsets, sizeof *graph);
    const char *why = graph ? NULL : "out of memory";
    for (int k = 0; !why && k < nsets; k++) {
        if (bench_cuda_capture_begin(c->cuda)) {
            why = bench_cuda_error(c->cuda);
            break;
        }
        astitch_status s = astitch_execute_device(x, set[k], set[k] + c->nin,
                                                  bench_cuda_stream(c->cuda));
        int ended = bench_cuda_capture_end(c->cuda, &graph[k]);
        if (s != ASTITCH_OK)
            why = astitch_last_error(astitch_graph_context(c->g));
        else if (ended)
            why = bench_cuda_error(c->cuda);
    }
    if (!why)
        why = poison_outputs(c, set, nsets);
    int last = 0;
    if (why)
        bench_fail(r, "error", "graph capture: %.280s", why);
    else if (warm_and_time(c, x, graph, set, nsets, n, us, r, &last) == n) {
        r->graph_us = bench_median(us, n);
        check_after(c, x, r, set[last], "after the graph replays");
    }
    bench_cuda_sync(c->cuda);
    for (int k = 0; graph && k < nsets; k++)
        bench_cuda_graph_destroy(c->cuda, graph[k]);
    free(graph);
}

/* Runs in one CUDA graph (BATCH_MIN to BATCH_MAX of them, a whole number of rotations over the
 * sets), replayed BATCH_REPLAYS times with an event between replays: r->batch_us gets the
 * median replay over its runs, the kernels' time without a graph launch per run (about 2.5 us
 * each on the H100, bench/RESULTS.md, *Method*); r->pct_copy_batch compares it with the 1 GiB
 * copy rate. The outputs, poisoned first, are checked after the replays. */
enum { BATCH_MIN = 16, BATCH_MAX = 64, BATCH_REPLAYS = 7 };
static void time_batched(BenchCase *c, astitch_executable *x, uint64_t **set, int nsets,
                         BenchRow *r)
{
    int rotations = (BATCH_MIN + nsets - 1) / nsets;
    if (rotations * nsets > BATCH_MAX)
        rotations = BATCH_MAX / nsets > 0 ? BATCH_MAX / nsets : 1;
    int runs = rotations * nsets;
    void *graph = NULL;
    const char *why = NULL;
    if (bench_cuda_capture_begin(c->cuda)) {
        why = bench_cuda_error(c->cuda);
    } else {
        astitch_status s = ASTITCH_OK;
        for (int i = 0; s == ASTITCH_OK && i < runs; i++)
            s = astitch_execute_device(x, set[i % nsets], set[i % nsets] + c->nin,
                                       bench_cuda_stream(c->cuda));
        int ended = bench_cuda_capture_end(c->cuda, &graph);
        why = s != ASTITCH_OK ? astitch_last_error(astitch_graph_context(c->g))
              : ended         ? bench_cuda_error(c->cuda)
                              : NULL;
    }
    if (!why)
        why = poison_outputs(c, set, nsets);
    double us[BATCH_REPLAYS];
    int rc = why != NULL || bench_cuda_graph_launch(c->cuda, graph) ||
             bench_cuda_events(c->cuda, BATCH_REPLAYS + 1) || bench_cuda_sync(c->cuda) ||
             bench_cuda_record(c->cuda, 0);
    for (int i = 0; !rc && i < BATCH_REPLAYS; i++)
        rc = bench_cuda_graph_launch(c->cuda, graph) || bench_cuda_record(c->cuda, i + 1);
    for (int i = 0; !rc && i < BATCH_REPLAYS; i++) {
        double ms;
        rc = bench_cuda_elapsed(c->cuda, i, i + 1, &ms);
        us[i] = ms * 1e3 / runs;
    }
    if (why)
        bench_fail(r, "error", "batched graph: %.280s", why);
    else if (rc)
        bench_fail(r, "error", "batched replays: %.280s", bench_cuda_error(c->cuda));
    else {
        r->batch_us = bench_median(us, BATCH_REPLAYS);
        r->batch_runs = runs;
        r->pct_copy_batch = c->dev->copy_gbps > 0 && r->batch_us > 0
                                ? 100.0 * r->bytes / (r->batch_us * 1e-6) / 1e9 / c->dev->copy_gbps
                                : 0;
        check_after(c, x, r, set[(runs - 1) % nsets], "after the batched replays");
    }
    bench_cuda_sync(c->cuda);
    bench_cuda_graph_destroy(c->cuda, graph);
}

static size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

/* The bound at this graph's size: cuMemcpyDtoDAsync of r->bytes / 2 within each set (its first
 * half onto its second), queued back to back as time_cuda queues the runs (same rotation, a
 * warm-up of about 50 ms, n timed copies, an event between consecutive ones); r->copy_us gets
 * the median. Not captured into a graph: a copy node of a CUDA graph may run on a copy engine,
 * slower than the copy the driver queues on a stream. Run after the outputs were checked,
 * since it overwrites the sets. */
static void time_copy(BenchCase *c, uint64_t **set, int nsets, size_t set_bytes, int n, double *us,
                      BenchRow *r)
{
    size_t half = (size_t)(r->bytes / 2) & ~(size_t)255;
    if (half < 256 || 2 * half > set_bytes)
        return;
    int warm = 0, rc = bench_cuda_sync(c->cuda);
    for (double t0 = bench_now(); !rc && (warm < 3 || bench_now() - t0 < 0.05); warm++) {
        uint64_t src = set[warm % nsets][0];
        rc = bench_cuda_copy(c->cuda, src + set_bytes - half, src, half) ||
             (warm % 16 == 15 && bench_cuda_sync(c->cuda));
    }
    rc = rc || bench_cuda_events(c->cuda, n + 1) || bench_cuda_sync(c->cuda) ||
         bench_cuda_record(c->cuda, 0);
    for (int i = 0; !rc && i < n; i++) {
        uint64_t src = set[(warm + i) % nsets][0];
        rc = bench_cuda_copy(c->cuda, src + set_bytes - half, src, half) ||
             bench_cuda_record(c->cuda, i + 1);
    }
    for (int i = 0; !rc && i < n; i++) {
        double ms;
        rc = bench_cuda_elapsed(c->cuda, i, i + 1, &ms);
        us[i] = ms * 1e3;
    }
    if (!rc)
        r->copy_us = bench_median(us, n);
    bench_cuda_sync(c->cuda);
}

/* A plan with compute ops: the time of its kernels apart from that of its compute ops, from
 * n runs with an event after each step (astitch_execute_device_timed, sets rotated): the
 * median of each step, summed over the kernel steps into r->kernels_us, over the compute
 * steps into r->compute_us. */
static void time_steps(BenchCase *c, astitch_executable *x, uint64_t **set, int nsets, int n,
                       BenchRow *r)
{
    const astitch_plan *p = astitch_executable_plan(x);
    int nstep = astitch_plan_num_steps(p), computes = 0;
    for (int i = 0; i < nstep; i++) {
        int index;
        computes += astitch_plan_step(p, i, &index) == ASTITCH_STEP_COMPUTE;
    }
    n = n > 20 ? 20 : n;
    double *us = computes ? calloc((size_t)nstep * (size_t)n, sizeof *us) : NULL;
    double *col = us ? calloc((size_t)n, sizeof *col) : NULL;
    for (int k = 0; col && k < n; k++)
        if (astitch_execute_device_timed(x, set[k % nsets], set[k % nsets] + c->nin,
                                         bench_cuda_stream(c->cuda), us + (size_t)k * nstep,
                                         nstep) != ASTITCH_OK) {
            snprintf(r->note, sizeof r->note, "timed steps: %.280s",
                     astitch_last_error(astitch_graph_context(c->g)));
            n = 0;
        }
    for (int i = 0; col && n > 0 && i < nstep; i++) {
        for (int k = 0; k < n; k++)
            col[k] = us[(size_t)k * nstep + i];
        int index;
        double m = bench_median(col, n);
        if (astitch_plan_step(p, i, &index) == ASTITCH_STEP_COMPUTE)
            r->compute_us += m;
        else
            r->kernels_us += m;
    }
    free(col);
    free(us);
}

/* Times x on the device: runs queued back to back, then replays of CUDA graphs of them. */
void bench_time_cuda(BenchCase *c, astitch_executable *x, BenchRow *r)
{
    const BenchOptions *o = c->o;
    int nio = c->nin + c->nout, warm = 3;
    size_t set_bytes = 0, free_bytes = 0;
    for (int i = 0; i < nio; i++)
        set_bytes += align256(c->bytes[i]);
    set_bytes = set_bytes ? set_bytes : 256;
    /* Enough sets that together they exceed twice the L2; never more than runs use. */
    double want = floor(2.0 * c->dev->l2_bytes / (double)set_bytes) + 1;
    int nsets = want > o->runs + warm ? o->runs + warm : (int)want;
    bench_cuda_mem_free(c->cuda, &free_bytes);
    while (nsets > 1 && (double)nsets * (double)set_bytes > 0.5 * (double)free_bytes)
        nsets--;
    r->sets = nsets;
    uint64_t *base = calloc((size_t)nsets, sizeof *base);
    uint64_t **set = calloc((size_t)nsets, sizeof *set);
    double *us = calloc((size_t)(o->runs > warm ? o->runs : warm), sizeof *us);
    int rc = !base || !set || !us;
    for (int k = 0; !rc && k < nsets; k++) {
        if ((rc = !(set[k] = calloc((size_t)nio + 1, sizeof **set)) ||
                  bench_cuda_alloc(c->cuda, set_bytes, &base[k])))
            break;
        size_t off = 0;
        for (int i = 0; i < nio; i++) {
            set[k][i] = base[k] + off;
            off += align256(c->bytes[i]);
            if (i < c->nin)
                rc = rc || (k == 0 ? bench_cuda_upload(c->cuda, set[k][i],
                                                       diff_ref_inputs(c->ref)[i], c->bytes[i])
                                   : bench_cuda_copy(c->cuda, set[k][i], set[0][i], c->bytes[i]));
            else
                rc = rc || bench_cuda_fill(c->cuda, set[k][i], 0xff, c->bytes[i]);
        }
    }
    int n = 0, last = 0;
    if (rc)
        bench_fail(r, "error", "device buffers: %.280s", bench_cuda_error(c->cuda));
    else if ((n = warm_and_time(c, x, NULL, set, nsets, 0, us, r, &last)) > 0) {
        finish_times(r, us, n, c->dev);
        check_after(c, x, r, set[last], "after the timed runs");
    }
    if (n > 0 && !strcmp(r->status, "ok"))
        time_graphs(c, x, set, nsets, n, us, r);
    if (n > 0 && !strcmp(r->status, "ok") && r->graph_us > 0)
        time_batched(c, x, set, nsets, r);
    if (n > 0 && !strcmp(r->status, "ok"))
        time_steps(c, x, set, nsets, n, r);
    if (n > 0 && !strcmp(r->status, "ok") && r->graph_us > 0)
        time_copy(c, set, nsets, set_bytes, n, us, r);
    bench_cuda_sync(c->cuda);
    for (int k = 0; base && k < nsets; k++) {
        bench_cuda_free(c->cuda, base[k]);
        if (set)
            free(set[k]);
    }
    free(base);
    free(set);
    free(us);
}

void bench_time_host(BenchCase *c, astitch_executable *x, BenchRow *r)
{
    int n = c->o->runs;
    double *us = calloc((size_t)n, sizeof *us);
    void **out = calloc((size_t)c->nout + 1, sizeof *out);
    astitch_status s = us && out ? ASTITCH_OK : ASTITCH_ERR_MEMORY;
    for (int i = 0; s == ASTITCH_OK && i < c->nout; i++)
        if (!(out[i] = malloc(c->bytes[c->nin + i] + 1)))
            s = ASTITCH_ERR_MEMORY;
    for (int i = 0; s == ASTITCH_OK && i < n; i++) {
        double t0 = bench_now();
        s = astitch_execute(x, diff_ref_inputs(c->ref), out);
        us[i] = (bench_now() - t0) * 1e6;
    }
    DiffResult d;
    r->sets = 1;
    if (s != ASTITCH_OK) {
        bench_fail(r, "error", "run: %.280s", astitch_last_error(astitch_graph_context(c->g)));
    } else {
        finish_times(r, us, n, c->dev);
        if (!diff_ref_compare(c->ref, (const void *const *)out, &d))
            bench_fail(r, "WRONG", "after the timed runs: %.280s", d.message);
    }
    for (int i = 0; out && i < c->nout; i++)
        free(out[i]);
    free(out);
    free(us);
}
