/* bench_run.c: one graph of the suite under every mode: compile (timed), verify against the
 * reference interpreter on fresh random inputs, then time on the device (or, for a smoke run,
 * on the host target). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_cuda.h"
#include "diff_check.h"

/* Every mode turns on what it names; a field left out is off (form: BENCH_FORM_SEARCH). */
#define STITCH .fusion = ASTITCH_FUSION_STITCH, .remote = true, .merge = true, .packing = true
static const BenchMode modes[] = {
    {"none", "one kernel per op: the unfused baseline", .fusion = ASTITCH_FUSION_NONE,
     .merge = true, .packing = true},
    {"xla", "register-only fusion, no packing or splitting: the paper's XLA",
     .fusion = ASTITCH_FUSION_XLA, .merge = true},
    {"atm", "xla with adaptive thread mapping (packing, splitting): Table 4 ATM",
     .fusion = ASTITCH_FUSION_XLA, .merge = true, .packing = true},
    {"hdm", "stitch without dominant merging: Table 4 HDM", .fusion = ASTITCH_FUSION_STITCH,
     .remote = true, .packing = true},
    {"stitch-noremote", "stitch without remote stitching", .fusion = ASTITCH_FUSION_STITCH,
     .merge = true, .packing = true},
    {"stitch-nopack", "stitch without packing and splitting", .fusion = ASTITCH_FUSION_STITCH,
     .remote = true, .merge = true},
    {"stitch-persistent", "stitch with every kernel one persistent wave (vertical packing)",
     STITCH, .persistent = true},
    {"stitch-default", "stitch, variant search off: the planner's default form", STITCH,
     .form = BENCH_FORM_DEFAULT},
    {"stitch-wide", "stitch, variant search off: wide resident rows", STITCH,
     .form = BENCH_FORM_WIDE},
    {"stitch-long", "stitch, variant search off: rows of 8193 to 32768 elements held in "
     "registers (the form \"long rows\")", STITCH, .form = BENCH_FORM_LONG},
    {"stitch-nocolvec", "stitch with one column per thread in column reductions, no runs",
     STITCH, .no_column_vectors = true},
    {"stitch-colsums", "stitch with column sums taken in the resident row pass of their elements",
     STITCH, .column_sums = true},
    {"stitch-norecompute", "stitch with readers of a generated output (a mask) waiting for it",
     STITCH, .no_recompute = true},
    {"stitch-norowvec", "stitch with one element per access in streamed row reductions", STITCH,
     .no_row_vectors = true},
    {"stitch-noonline", "stitch with a streamed row's max and sum of exponentials in two walks",
     STITCH, .no_online = true},
    {"stitch-nocarry", "stitch with a walk after a global barrier reading its inputs again, "
     "not values an earlier walk kept in shared memory", STITCH, .no_carry = true},
    {"stitch-notile", "stitch with a transpose's operand read element by element, not in square "
     "tiles through shared memory", STITCH, .no_transpose_tiles = true},
    {"stitch-nohoist", "stitch with a global barrier kept where it waits for values cheap to "
     "make, not their producers run as a kernel before it", STITCH, .no_hoist = true},
    {"stitch-split", "stitch, variant search off, with every kernel cut at its global "
     "barriers (the form \"barriers split\")", STITCH, .form = BENCH_FORM_DEFAULT,
     .split_barriers = true},
    {"stitch-dense", "stitch with every output written, views of an input too", STITCH,
     .dense_outputs = true},
    {"stitch", "AStitch: every switch on", STITCH},
};
#define NMODES ((int)(sizeof modes / sizeof modes[0]))

const BenchMode *bench_mode_at(int i) { return i >= 0 && i < NMODES ? &modes[i] : NULL; }

const BenchMode *bench_mode(const char *name)
{
    for (int i = 0; i < NMODES; i++)
        if (!strcmp(modes[i].name, name))
            return &modes[i];
    return NULL;
}

/* What one case needs while it is measured. */
typedef struct Case {
    astitch_graph *g;
    const DiffRef *ref;
    const BenchOptions *o;
    BenchCuda *cuda;
    const BenchDevice *dev;
    int nin, nout;
    size_t *bytes; /* per parameter, then per output */
    double first_compile_ms; /* a graph with compute ops: its first compile, under the first
                              * mode's options (compute_on_gpu), which the first mode's own
                              * compile then finds in the memory cache; 0: none */
} Case;

static void fail(BenchRow *r, const char *status, const char *fmt, const char *msg)
{
    r->status = status;
    snprintf(r->note, sizeof r->note, fmt, msg);
}

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
static bool download_output(Case *c, const astitch_executable *x, const uint64_t *io, int i,
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
static void check_after(Case *c, const astitch_executable *x, BenchRow *r, const uint64_t *io,
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
static int timed_runs(Case *c, astitch_executable *x, void *const *graphs, uint64_t **set,
                      int nsets, int first, int n, double *us, BenchRow *r)
{
    if (bench_cuda_events(c->cuda, n + 1) || bench_cuda_sync(c->cuda) ||
        bench_cuda_record(c->cuda, 0)) {
        fail(r, "error", "%s", bench_cuda_error(c->cuda));
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
            fail(r, "error", "run: %.280s", why);
            bench_cuda_sync(c->cuda);
            return -1;
        }
        if (bench_cuda_record(c->cuda, i + 1)) {
            fail(r, "error", "%s", bench_cuda_error(c->cuda));
            return -1;
        }
    }
    for (int i = 0; i < n; i++) {
        double ms;
        if (bench_cuda_elapsed(c->cuda, i, i + 1, &ms)) {
            fail(r, "error", "%s", bench_cuda_error(c->cuda));
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
static int warm_and_time(Case *c, astitch_executable *x, void *const *graphs, uint64_t **set,
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
static const char *poison_outputs(Case *c, uint64_t **set, int nsets)
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
static void time_graphs(Case *c, astitch_executable *x, uint64_t **set, int nsets, int n,
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
        fail(r, "error", "graph capture: %.280s", why);
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
static void time_batched(Case *c, astitch_executable *x, uint64_t **set, int nsets, BenchRow *r)
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
        fail(r, "error", "batched graph: %.280s", why);
    else if (rc)
        fail(r, "error", "batched replays: %.280s", bench_cuda_error(c->cuda));
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
static void time_copy(Case *c, uint64_t **set, int nsets, size_t set_bytes, int n, double *us,
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
static void time_steps(Case *c, astitch_executable *x, uint64_t **set, int nsets, int n,
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
static void time_cuda(Case *c, astitch_executable *x, BenchRow *r)
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
        fail(r, "error", "device buffers: %.280s", bench_cuda_error(c->cuda));
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

/* The host target: a smoke run, host clock around astitch_execute. */
static void time_host(Case *c, astitch_executable *x, BenchRow *r)
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
        fail(r, "error", "run: %.280s", astitch_last_error(astitch_graph_context(c->g)));
    } else {
        finish_times(r, us, n, c->dev);
        if (!diff_ref_compare(c->ref, (const void *const *)out, &d))
            fail(r, "WRONG", "after the timed runs: %.280s", d.message);
    }
    for (int i = 0; out && i < c->nout; i++)
        free(out[i]);
    free(out);
    free(us);
}

static void count_kernels(const astitch_plan *p, BenchRow *r)
{
    for (int k = 0; p && k < astitch_plan_num_kernels(p); k++) {
        astitch_kernel_info ki;
        if (astitch_plan_kernel_info(p, k, &ki) == ASTITCH_OK && ki.grid > 0) {
            r->kernels++;
            r->coop_kernels += ki.global_barriers > 0;
        }
    }
}

/* r->relaxed and r->spilling: what the cuda target loaded (docs/codegen.md, *Targets*). */
static void note_loaded(const astitch_executable *x, BenchRow *r)
{
    const astitch_plan *p = astitch_executable_plan(x);
    for (int k = 0; p && k < astitch_plan_num_kernels(p); k++) {
        astitch_loaded_kernel lk;
        if (astitch_executable_loaded_kernel(x, k, &lk) != ASTITCH_OK)
            continue;
        r->relaxed += lk.bound != lk.planned_bound;
        r->spilling += lk.local_bytes > 0;
    }
}

/* r->variant: how the variant search chose the form that runs. */
static void note_variant(const astitch_executable *x, BenchRow *r)
{
    astitch_variant_info v;
    if (astitch_executable_variant(x, &v) != ASTITCH_OK || v.state == ASTITCH_VARIANT_NONE)
        return;
    const char *form = astitch_variant_form_name(v.form);
    if (v.state != ASTITCH_VARIANT_TIMED) {
        snprintf(r->variant, sizeof r->variant, "%s (%s)", form,
                 v.state == ASTITCH_VARIANT_CACHED ? "compile cache" : "untimed");
        return;
    }
    size_t at = 0;
    at += (size_t)snprintf(r->variant, sizeof r->variant, "%s%s (timed:", form,
                           v.raised_bound ? " at the next register bound" : "");
    for (int i = 0, first = 1; i < 2 * ASTITCH_VARIANT_FORMS && at < sizeof r->variant; i++) {
        int f = i / 2;
        double us = i % 2 ? v.us_raised[f] : v.us[f];
        if (us > 0) {
            at += (size_t)snprintf(r->variant + at, sizeof r->variant - at, "%s %s%s %.1f us",
                                   first ? "" : ",", astitch_variant_form_name(f),
                                   i % 2 ? " at the next bound" : "", us);
            first = 0;
        }
    }
    if (at < sizeof r->variant)
        snprintf(r->variant + at, sizeof r->variant - at, ")");
}

/* The compile options of mode m under the bench options o. */
static void mode_options(const BenchOptions *o, const BenchMode *m, astitch_compile_options *co)
{
    astitch_compile_options_default(co);
    co->target = o->target;
    co->plan.fusion = m->fusion;
    co->plan.remote = m->remote;
    co->plan.merge = m->merge;
    co->plan.packing = m->packing;
    co->plan.persistent = m->persistent;
    co->variant_search = m->form == BENCH_FORM_SEARCH;
    co->plan.wide_rows = m->form == BENCH_FORM_WIDE;
    co->plan.long_rows = m->form == BENCH_FORM_LONG;
    co->plan.column_vectors = !m->no_column_vectors;
    co->plan.column_sums_in_rows = m->column_sums;
    co->plan.recompute_outputs = !m->no_recompute;
    co->plan.row_vectors = !m->no_row_vectors;
    co->plan.online_softmax = !m->no_online;
    co->plan.carry = !m->no_carry;
    co->plan.transpose_tiles = !m->no_transpose_tiles;
    co->plan.hoist = !m->no_hoist;
    co->plan.split_barriers = m->split_barriers;
    co->view_outputs = !m->dense_outputs;
}

/* Compiles, verifies and times c->g under mode m into r. Returns -1 for "no device". */
static int bench_mode_case(Case *c, const BenchMode *m, BenchRow *r)
{
    astitch_compile_options co;
    mode_options(c->o, m, &co);
    astitch_executable *x = NULL;
    double t0 = bench_now();
    astitch_status s = astitch_compile(c->g, &co, &x);
    r->compile_ms = (bench_now() - t0) * 1e3;
    if (c->first_compile_ms > 0 && m == c->o->mode[0])
        r->compile_ms = c->first_compile_ms; /* not the memory cache's answer */
    const char *msg = astitch_last_error(astitch_graph_context(c->g));
    if (s == ASTITCH_ERR_NO_DEVICE)
        return -1;
    if (s != ASTITCH_OK) {
        fail(r, "error", "compile: %.280s", msg);
        return 0;
    }
    const astitch_plan *p = astitch_executable_plan(x);
    astitch_plan *again = NULL;
    t0 = bench_now();
    if (p && astitch_plan_create(c->g, astitch_plan_device(p), &co.plan, &again) == ASTITCH_OK)
        r->plan_ms = (bench_now() - t0) * 1e3;
    astitch_plan_destroy(again);
    DiffResult d;
    s = diff_ref_check(c->ref, x, &d); /* the first run: a pending variant search settles */
    count_kernels(astitch_executable_plan(x), r);
    note_variant(x, r);
    note_loaded(x, r);
    r->max_error = d.worst;
    if (s != ASTITCH_OK)
        fail(r, "error", "verify: %.280s", d.message);
    else if (!d.ok)
        fail(r, "WRONG", "verify: %.280s", d.message);
    else if (co.target == ASTITCH_TARGET_CUDA)
        time_cuda(c, x, r);
    else
        time_host(c, x, r);
    astitch_executable_destroy(x);
    return 0;
}

static bool has_compute_ops(const astitch_graph *g)
{
    for (int n = 0; n < astitch_graph_num_nodes(g); n++)
        if (astitch_node_op(g, n) == ASTITCH_OP_DOT || astitch_node_op(g, n) == ASTITCH_OP_CUSTOM)
            return true;
    return false;
}

/* A graph with compute ops is compiled under the first mode; when all of them run on the GPU
 * (dots on cuBLASLt) it is measured as any other (returns true, that compile's milliseconds in
 * *first_ms); else it keeps the compile time and kernels in its row, but is neither verified
 * nor timed. */
static bool compute_on_gpu(astitch_graph *g, const BenchOptions *o, BenchRow *r, double *first_ms)
{
    astitch_compile_options co;
    mode_options(o, o->mode[0], &co);
    astitch_executable *x = NULL;
    double t0 = bench_now();
    astitch_status s = astitch_compile(g, &co, &x);
    int on_host = s == ASTITCH_OK ? astitch_executable_host_compute_ops(x) : -1;
    *first_ms = (bench_now() - t0) * 1e3;
    if (on_host == 0) {
        astitch_executable_destroy(x);
        return true;
    }
    if (s == ASTITCH_OK) {
        r->compile_ms = (bench_now() - t0) * 1e3;
        count_kernels(astitch_executable_plan(x), r);
    }
    astitch_executable_destroy(x);
    fail(r, "skipped", "%s", s == ASTITCH_OK
                                 ? "has compute ops (dot/custom) that run on the host between "
                                   "kernels: compiled (first mode), not verified or timed"
                                 : "has compute ops (dot/custom): not compiled, verified or timed");
    return false;
}

int bench_graph(const char *path, const BenchOptions *o, BenchCuda *cuda, const BenchDevice *dev,
                BenchRow **rows, int *nrows)
{
    astitch_context *ctx = NULL;
    astitch_graph *g = NULL;
    DiffRef *ref = NULL;
    Case c = {.o = o, .cuda = cuda, .dev = dev};
    BenchRow proto = {.status = "ok"};
    char *real = realpath(path, NULL);
    snprintf(proto.file, sizeof proto.file, "%s", real ? real : path);
    free(real);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(proto.graph, sizeof proto.graph, "%.*s", (int)strcspn(base, "."), base);
    if (astitch_context_create(&ctx) != ASTITCH_OK)
        return 0;
    if (astitch_graph_load_json(ctx, path, &g) != ASTITCH_OK) {
        fail(&proto, "error", "%s", astitch_last_error(ctx));
    } else {
        if (astitch_graph_name(g))
            snprintf(proto.graph, sizeof proto.graph, "%s", astitch_graph_name(g));
        c.g = g;
        c.nin = astitch_graph_num_parameters(g);
        c.nout = astitch_graph_num_outputs(g);
        c.bytes = calloc((size_t)(c.nin + c.nout) + 1, sizeof *c.bytes);
        for (int i = 0; c.bytes && i < c.nin + c.nout; i++) {
            astitch_tensor_info t;
            astitch_node_info(g, i < c.nin ? astitch_graph_parameter(g, i)
                                           : astitch_graph_output(g, i - c.nin), &t);
            c.bytes[i] = t.bytes;
            proto.bytes += (double)t.bytes;
        }
    }
    if (o->filter && !strstr(proto.graph, o->filter)) {
        astitch_graph_destroy(g);
        astitch_context_destroy(ctx);
        free(c.bytes);
        return 0;
    }
    if (g && has_compute_ops(g) && !compute_on_gpu(g, o, &proto, &c.first_compile_ms)) {
        /* one row, not measured */
    } else if (g) {
        double t0 = bench_now();
        fprintf(stderr, "%s: reference run...", proto.graph);
        fflush(stderr);
        if (diff_ref_create(g, o->seed, o->perturbed, &ref) != ASTITCH_OK)
            fail(&proto, "error", "reference: %.280s", astitch_last_error(ctx));
        fprintf(stderr, " %.1f s\n", bench_now() - t0);
        c.ref = ref;
    }
    /* A graph that is not measured gets one row, for every mode at once. */
    int rc = 0, n = ref ? o->nmode : 1;
    for (int i = 0; i < n; i++) {
        BenchRow *grown = realloc(*rows, (size_t)(*nrows + 1) * sizeof **rows);
        if (!grown)
            break;
        *rows = grown;
        BenchRow *r = &grown[*nrows];
        *r = proto;
        snprintf(r->mode, sizeof r->mode, "%s", ref ? o->mode[i]->name : "all");
        if (ref && (rc = bench_mode_case(&c, o->mode[i], r)) < 0)
            break;
        ++*nrows;
    }
    diff_ref_destroy(ref);
    free(c.bytes);
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
    return rc;
}
