/* bench_report.c: the text table on stdout, the CSV and the JSON of astitch-bench. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

#define TABLE_HEAD "%-28s %-15s %4s %4s %9s %8s %11s %11s %9s %9s %9s %6s %6s %6s  %s\n"
#define TABLE_ROW "%-28.28s %-15s %4d %4d %9.3f %8.2f %11.2f %11s %9s %9s %9.1f %6.1f %6s %6s  %s\n"

void bench_print_header(FILE *f, const BenchOptions *o, const BenchDevice *dev)
{
    fprintf(f, "astitch-bench %s: %s", astitch_version(), dev->name);
    if (dev->copy_gbps > 0)
        fprintf(f, ", %d SMs, L2 %.1f MB, driver %d.%d; device-to-device copy %.0f GB/s "
                   "(read + write)", dev->sm_count, dev->l2_bytes / 1e6,
                dev->driver_version / 1000, dev->driver_version % 1000 / 10, dev->copy_gbps);
    fprintf(f, "\nset-up (the warm-up graph's compile, before any case) %.1f ms", dev->setup_ms);
    fprintf(f, "\nseed 0x%llx; per case %d to %d timed runs (about %.2f s), inputs rotated over "
               "sets larger than 2x L2 together; times are medians\n",
            (unsigned long long)o->seed, o->min_runs, o->runs, o->max_seconds);
    fprintf(f, TABLE_HEAD, "graph", "mode", "kern", "coop", "MB", "compile", "median us",
            "graph us", "batch us", "copy us", "GB/s", "%copy", "%cp-b", "vs xla", "check");
}

/* The row of the same graph under `mode`, or NULL. */
static const BenchRow *find(const BenchRow *r, const char *mode, const BenchRow *rows, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].file, r->file) && !strcmp(rows[i].mode, mode))
            return &rows[i];
    return NULL;
}

static bool timed(const BenchRow *r) { return r && !strcmp(r->status, "ok") && r->median_us > 0; }

void bench_print_row(FILE *f, const BenchRow *r, const BenchRow *rows, int nrows)
{
    char vs[16] = "-", graph[24] = "-", batch[24] = "-", copy[24] = "-", pct_b[16] = "-";
    const BenchRow *x = find(r, "xla", rows, nrows);
    if (timed(r) && timed(x))
        snprintf(vs, sizeof vs, "%.2fx", x->median_us / r->median_us);
    if (r->graph_us > 0)
        snprintf(graph, sizeof graph, "%.2f", r->graph_us);
    if (r->batch_us > 0)
        snprintf(batch, sizeof batch, "%.2f", r->batch_us);
    if (r->pct_copy_batch > 0)
        snprintf(pct_b, sizeof pct_b, "%.1f", r->pct_copy_batch);
    if (r->copy_us > 0)
        snprintf(copy, sizeof copy, "%.2f", r->copy_us);
    fprintf(f, TABLE_ROW, r->graph, r->mode, r->kernels, r->coop_kernels, r->bytes / 1e6,
            r->compile_ms, r->median_us, graph, batch, copy, r->gbps, r->pct_copy, pct_b, vs,
            r->status);
    if (r->note[0])
        fprintf(f, "    %s: %s\n", r->status, r->note);
    if (r->compute_us > 0)
        fprintf(f, "    steps: kernels %.2f us, compute ops (dot, custom) %.2f us (medians of "
                   "event-timed runs, one event after each step)\n",
                r->kernels_us, r->compute_us);
}

/* Geometric mean over graphs of median(base) / median(mode). */
static double geomean_speedup(const BenchRow *rows, int n, const char *mode, const char *base,
                              int *count)
{
    double logsum = 0;
    *count = 0;
    for (int i = 0; i < n; i++) {
        const BenchRow *b = find(&rows[i], base, rows, n);
        if (!strcmp(rows[i].mode, mode) && timed(&rows[i]) && timed(b)) {
            logsum += log(b->median_us / rows[i].median_us);
            ++*count;
        }
    }
    return *count ? exp(logsum / *count) : 0;
}

void bench_print_summary(FILE *f, const BenchDevice *dev, const BenchRow *rows, int n)
{
    int ok = 0, wrong = 0, err = 0, skipped = 0, kernels = 0, nk = 0;
    double *per_kernel = calloc((size_t)n + 1, sizeof *per_kernel);
    for (int i = 0; i < n; i++) {
        const char *s = rows[i].status;
        ok += !strcmp(s, "ok");
        wrong += !strcmp(s, "WRONG");
        err += !strcmp(s, "error");
        skipped += !strcmp(s, "skipped");
        if (per_kernel && rows[i].kernels > 0 && rows[i].compile_ms > 0) {
            per_kernel[nk++] = rows[i].compile_ms / rows[i].kernels;
            kernels += rows[i].kernels;
        }
    }
    fprintf(f, "\ncases: %d ok, %d WRONG, %d error, %d skipped\n", ok, wrong, err, skipped);
    static const char *const pairs[][2] = {{"stitch", "xla"}, {"stitch", "none"},
                                           {"atm", "xla"}, {"hdm", "xla"}};
    if (dev->copy_gbps <= 0)
        fprintf(f, "host target: the times above are a smoke test, not measurements\n");
    for (size_t i = 0; dev->copy_gbps > 0 && i < sizeof pairs / sizeof pairs[0]; i++) {
        int c;
        double g = geomean_speedup(rows, n, pairs[i][0], pairs[i][1], &c);
        if (c)
            fprintf(f, "speedup %s over %s: geometric mean %.2fx over %d graphs\n", pairs[i][0],
                    pairs[i][1], g, c);
    }
    if (nk) /* each case's milliseconds over its kernels, the median over the cases */
        fprintf(f, "compile (graph -> loaded module): median %.1f ms per kernel over %d cases "
                   "(%d kernels); the process's set-up before them (warm-up graph) %.1f ms\n",
                bench_median(per_kernel, nk), nk, kernels, dev->setup_ms);
    int relaxed = 0, spilling = 0, copied = 0;
    for (int i = 0; i < n; i++) {
        relaxed += rows[i].relaxed;
        spilling += rows[i].spilling;
        if (per_kernel && rows[i].copy_us > 0 && rows[i].median_us > 0)
            per_kernel[copied++] = 100.0 * rows[i].copy_us / rows[i].median_us;
    }
    if (dev->copy_gbps > 0)
        fprintf(f, "loaded kernels: %d with a relaxed register bound, %d still spilling\n",
                relaxed, spilling);
    if (copied)
        fprintf(f, "runs against a copy of the same bytes queued alike: median %.0f%% of its "
                   "speed over %d cases\n", bench_median(per_kernel, copied), copied);
    int batched = 0;
    for (int i = 0; per_kernel && i < n; i++)
        if (rows[i].pct_copy_batch > 0)
            per_kernel[batched++] = rows[i].pct_copy_batch;
    if (batched)
        fprintf(f, "runs replayed back to back from one graph: median %.0f%% of the 1 GiB copy "
                   "rate over %d cases\n", bench_median(per_kernel, batched), batched);
    free(per_kernel);
}

int bench_write_csv(const char *path, const BenchRow *rows, int n)
{
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "astitch-bench: cannot write %s\n", path);
        return -1;
    }
    fprintf(f, "graph,mode,status,kernels,coop_kernels,bytes,plan_ms,compile_ms,median_us,"
               "min_us,p90_us,graph_us,copy_us,runs,sets,gbps,pct_copy,max_error,relaxed,spilling,"
               "kernels_us,compute_us,batch_us,batch_runs,pct_copy_batch,file,note\n");
    for (int i = 0; i < n; i++) {
        const BenchRow *r = &rows[i];
        char note[sizeof r->note];
        snprintf(note, sizeof note, "%s", r->note);
        for (char *p = note; *p; p++)
            if (*p == '"' || *p == ',' || *p == '\n')
                *p = ' ';
        fprintf(f,
                "%s,%s,%s,%d,%d,%.0f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%d,%.2f,%.2f,%.3g,%d,%d,"
                "%.3f,%.3f,%.3f,%d,%.2f,%s,%s\n",
                r->graph, r->mode, r->status, r->kernels, r->coop_kernels, r->bytes, r->plan_ms,
                r->compile_ms, r->median_us, r->min_us, r->p90_us, r->graph_us, r->copy_us,
                r->runs, r->sets, r->gbps, r->pct_copy, r->max_error, r->relaxed, r->spilling,
                r->kernels_us, r->compute_us, r->batch_us, r->batch_runs, r->pct_copy_batch,
                r->file, note);
    }
    return fclose(f) ? -1 : 0;
}

int bench_write_json(const char *path, const BenchOptions *o, const BenchDevice *dev,
                     const BenchRow *rows, int n)
{
    char date[32], seed[24];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    snprintf(seed, sizeof seed, "0x%llx", (unsigned long long)o->seed);
    json_t *cases = json_array();
    for (int i = 0; i < n; i++) {
        const BenchRow *r = &rows[i];
        json_array_append_new(
            cases, json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f,"
                             " s:f, s:f, s:i, s:i, s:f, s:f, s:f, s:i, s:i, s:f, s:f, s:f, s:i, s:f}",
                             "graph", r->graph, "mode", r->mode, "status", r->status, "note",
                             r->note, "variant", r->variant, "file", r->file, "kernels", r->kernels,
                             "coop_kernels", r->coop_kernels, "bytes", r->bytes, "plan_ms",
                             r->plan_ms, "compile_ms", r->compile_ms, "median_us", r->median_us,
                             "min_us", r->min_us, "p90_us", r->p90_us, "graph_us", r->graph_us,
                             "copy_us", r->copy_us, "runs", r->runs, "sets",
                             r->sets, "gbps", r->gbps, "pct_copy", r->pct_copy, "max_error",
                             isfinite(r->max_error) ? r->max_error : -1.0, "relaxed_kernels",
                             r->relaxed, "spilling_kernels", r->spilling, "kernels_us",
                             r->kernels_us, "compute_us", r->compute_us, "batch_us",
                             r->batch_us, "batch_runs", r->batch_runs, "pct_copy_batch",
                             r->pct_copy_batch));
    }
    json_t *modes = json_array();
    for (int i = 0; i < o->nmode; i++)
        json_array_append_new(modes, json_pack("{s:s, s:s}", "name", o->mode[i]->name, "what",
                                               o->mode[i]->what));
    json_t *root = json_pack(
        "{s:s, s:s, s:s, s:s?, s:s, s:s, s:{s:s, s:i, s:i, s:f, s:f, s:f}, s:{s:i, s:i, s:f, s:s, "
        "s:b}, s:o, s:o}",
        "tool", "astitch-bench", "version", astitch_version(), "date", date, "commit", o->commit,
        "command", o->command, "target", astitch_target_name(o->target), "device", "name",
        dev->name, "driver_version", dev->driver_version, "sm_count", dev->sm_count, "l2_bytes",
        dev->l2_bytes, "copy_gbps", dev->copy_gbps, "setup_ms", dev->setup_ms, "method", "runs",
        o->runs, "min_runs", o->min_runs, "max_seconds", o->max_seconds, "seed", seed,
        "perturbed", o->perturbed, "modes", modes, "cases", cases);
    int rc = root ? json_dump_file(root, path, JSON_INDENT(1)) : -1;
    if (rc)
        fprintf(stderr, "astitch-bench: cannot write %s\n", path);
    json_decref(root);
    return rc ? -1 : 0;
}
