/* bench_run.c: one graph of the suite under every mode: compile (timed), verify against the
 * reference interpreter on fresh random inputs, then time on the device (or, for a smoke run,
 * on the host target). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "bench_case.h"
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


void bench_fail(BenchRow *r, const char *status, const char *fmt, const char *msg)
{
    r->status = status;
    snprintf(r->note, sizeof r->note, fmt, msg);
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
static int bench_mode_case(BenchCase *c, const BenchMode *m, BenchRow *r)
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
        bench_fail(r, "error", "compile: %.280s", msg);
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
        bench_fail(r, "error", "verify: %.280s", d.message);
    else if (!d.ok)
        bench_fail(r, "WRONG", "verify: %.280s", d.message);
    else if (co.target == ASTITCH_TARGET_CUDA)
        bench_time_cuda(c, x, r);
    else
        bench_time_host(c, x, r);
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
    bench_fail(r, "skipped", "%s", s == ASTITCH_OK
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
    BenchCase c = {.o = o, .cuda = cuda, .dev = dev};
    BenchRow proto = {.status = "ok"};
    char *real = realpath(path, NULL);
    snprintf(proto.file, sizeof proto.file, "%s", real ? real : path);
    free(real);
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(proto.graph, sizeof proto.graph, "%.*s", (int)strcspn(base, "."), base);
    if (astitch_context_create(&ctx) != ASTITCH_OK)
        return 0;
    if (astitch_graph_load_json(ctx, path, &g) != ASTITCH_OK) {
        bench_fail(&proto, "error", "%s", astitch_last_error(ctx));
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
            bench_fail(&proto, "error", "reference: %.280s", astitch_last_error(ctx));
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
