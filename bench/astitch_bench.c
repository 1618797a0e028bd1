/*
 * astitch_bench.c: astitch-bench, the benchmark of fusion modes on a suite of graphs.
 *
 *   astitch-bench [--suite=NAME|FILE] [--filter=SUBSTR] [--modes=LIST] [--runs=N]
 *                 [--max-time=SEC] [--target=cuda|host] [--csv=FILE] [--json=FILE] [GRAPH...]
 *
 * Exit status: 0 every case ran and matched the reference; 1 some case failed or differed;
 * 2 bad usage or an unreadable suite; 77 no CUDA driver or device (nothing was measured).
 * bench/RESULTS.md describes the method.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "bench_cuda.h"
#include "diff_check.h"
#include "warm_up.h"

#include <unistd.h>

#ifndef ASTITCH_BENCH_DIR         /* bench/ of the source tree */
#define ASTITCH_BENCH_DIR "bench"
#endif
#ifndef ASTITCH_BENCH_INSTALL_DIR /* where the suites are installed */
#define ASTITCH_BENCH_INSTALL_DIR "/usr/local/share/astitch/bench"
#endif

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    if (n < 1)
        return 0;
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: astitch-bench [OPTION]... [GRAPH.json]...\n"
            "Compiles each graph of a suite under every fusion mode, checks the outputs against\n"
            "the reference interpreter, and times the runs on the GPU.\n\n"
            "  --suite=NAME|FILE  graphs listed in FILE, or in $ASTITCH_BENCH_DIR/suites/NAME.txt\n"
            "                     (default suite: full; GRAPH arguments replace the suite)\n"
            "  --filter=SUBSTR    only graphs whose name contains SUBSTR\n"
            "  --modes=LIST       comma-separated modes (default: all); --list-modes names them\n"
            "  --runs=N           most timed runs per case (default 200)\n"
            "  --min-runs=N       fewest timed runs per case (default 20)\n"
            "  --max-time=SEC     time a case for about SEC of device time (default 0.5)\n"
            "  --target=T         cuda (default) or host (a smoke run: no timing claims)\n"
            "  --seed=N           seed of the random inputs (default: fresh, printed)\n"
            "  --perturbed        verify with the conditioning slack (two reference runs)\n"
            "  --csv=FILE, --json=FILE   also write the results there\n"
            "  --commit=TEXT      commit recorded in the JSON (default $ASTITCH_COMMIT)\n"
            "  --list             print the suite's graph files and exit\n");
}

/* Appends the graph files listed in suite file `path` (one per line, relative to the file's
 * folder; '#' starts a comment) to *files. Returns -1 when it cannot be read. */
static int read_suite(const char *path, char ***files, int *n)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    const char *slash = strrchr(path, '/');
    int dirlen = slash ? (int)(slash - path) : 1;
    const char *dir = slash ? path : ".";
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "#\r\n")] = 0;
        char *s = line + strspn(line, " \t");
        for (char *e = s + strlen(s); e > s && (e[-1] == ' ' || e[-1] == '\t');)
            *--e = 0;
        if (!*s)
            continue;
        char **grown = realloc(*files, (size_t)(*n + 1) * sizeof **files);
        size_t len = strlen(s) + (size_t)dirlen + 2;
        if (!grown || !(grown[*n] = malloc(len))) {
            *files = grown ? grown : *files;
            fclose(f);
            return -1;
        }
        *files = grown;
        if (*s == '/')
            snprintf(grown[*n], len, "%s", s);
        else
            snprintf(grown[*n], len, "%.*s/%s", dirlen, dir, s);
        ++*n;
    }
    fclose(f);
    return 0;
}

static int free_files(char **files, int n)
{
    for (int i = 0; i < n; i++)
        free(files[i]);
    free(files);
    return 0;
}

static int parse_modes(const char *list, BenchOptions *o)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    o->nmode = 0;
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const BenchMode *m = bench_mode(t);
        if (!m) {
            fprintf(stderr, "astitch-bench: unknown mode '%s' (--list-modes)\n", t);
            return -1;
        }
        if (o->nmode == BENCH_MAX_MODES) {
            fprintf(stderr, "astitch-bench: --modes: at most %d modes\n", BENCH_MAX_MODES);
            return -1;
        }
        o->mode[o->nmode++] = m;
    }
    return o->nmode ? 0 : -1;
}

static int open_device(const BenchOptions *o, BenchCuda **cuda, BenchDevice *dev)
{
    memset(dev, 0, sizeof *dev);
    if (o->target == ASTITCH_TARGET_HOST) {
        snprintf(dev->name, sizeof dev->name, "host target (virtual device; no timing claims)");
        return 0;
    }
    char err[512];
    if (!(*cuda = bench_cuda_open(err, sizeof err))) {
        fprintf(stderr, "astitch-bench: %s; nothing to measure (--target=host runs a smoke "
                        "test without a GPU)\n", err);
        return 77;
    }
    const BenchCudaInfo *in = bench_cuda_info(*cuda);
    snprintf(dev->name, sizeof dev->name, "%.200s (sm_%d%d)", in->name, in->cc_major, in->cc_minor);
    dev->driver_version = in->driver_version;
    dev->sm_count = in->sm_count;
    dev->l2_bytes = (double)in->l2_bytes;
    size_t free_bytes = 0, bytes = (size_t)1 << 30;
    bench_cuda_mem_free(*cuda, &free_bytes);
    while (bytes > ((size_t)1 << 24) && bytes > free_bytes / 4)
        bytes /= 2;
    if (bench_cuda_copy_bandwidth(*cuda, bytes, 30, &dev->copy_gbps)) {
        fprintf(stderr, "astitch-bench: copy bandwidth: %s\n", bench_cuda_error(*cuda));
        return 1;
    }
    return 0;
}

/* Runs every graph, prints the table and the summary, writes the files; the exit status. */
static int run_suite(const BenchOptions *o, BenchCuda *cuda, const BenchDevice *dev,
                     char **files, int nfiles)
{
    BenchRow *rows = NULL;
    int nrows = 0, status = 0;
    bench_print_header(stdout, o, dev);
    for (int i = 0; i < nfiles && status == 0; i++) {
        int first = nrows;
        if (bench_graph(files[i], o, cuda, dev, &rows, &nrows) < 0) {
            fprintf(stderr, "astitch-bench: no CUDA device for the library; nothing measured\n");
            status = 77;
        }
        for (int k = first; k < nrows; k++)
            bench_print_row(stdout, &rows[k], rows, nrows);
        fflush(stdout);
    }
    bench_print_summary(stdout, dev, rows, nrows);
    if ((o->csv && bench_write_csv(o->csv, rows, nrows)) ||
        (o->json && bench_write_json(o->json, o, dev, rows, nrows)))
        status = status ? status : 1;
    for (int k = 0; k < nrows && !status; k++)
        if (strcmp(rows[k].status, "ok") && strcmp(rows[k].status, "skipped"))
            status = 1;
    free(rows);
    return status;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"suite", 1, 0, 's'}, {"filter", 1, 0, 'f'}, {"modes", 1, 0, 'm'}, {"runs", 1, 0, 'r'},
        {"min-runs", 1, 0, 'n'}, {"max-time", 1, 0, 't'}, {"target", 1, 0, 'T'},
        {"seed", 1, 0, 'S'}, {"perturbed", 0, 0, 'p'}, {"csv", 1, 0, 'c'}, {"json", 1, 0, 'j'},
        {"commit", 1, 0, 'C'}, {"list", 0, 0, 'l'}, {"list-modes", 0, 0, 'M'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    BenchOptions o = {.target = ASTITCH_TARGET_CUDA, .runs = 200, .min_runs = 20,
                      .max_seconds = 0.5, .commit = getenv("ASTITCH_COMMIT")};
    o.seed = diff_fresh_seed();
    const char *suite = "full", *modes = NULL;
    bool list = false;
    char cmd[1024] = "";
    for (int i = 0, at = 0; i < argc && at < (int)sizeof cmd - 2; i++)
        at += snprintf(cmd + at, sizeof cmd - (size_t)at, "%s%s", i ? " " : "", argv[i]);
    o.command = cmd;
    for (int c; (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1;) {
        switch (c) {
        case 's': suite = optarg; break;
        case 'f': o.filter = optarg; break;
        case 'm': modes = optarg; break;
        case 'r': o.runs = atoi(optarg); break;
        case 'n': o.min_runs = atoi(optarg); break;
        case 't': o.max_seconds = atof(optarg); break;
        case 'S': o.seed = strtoull(optarg, NULL, 0); break;
        case 'p': o.perturbed = true; break;
        case 'c': o.csv = optarg; break;
        case 'j': o.json = optarg; break;
        case 'C': o.commit = optarg; break;
        case 'l': list = true; break;
        case 'M':
            for (int k = 0; bench_mode_at(k); k++)
                printf("%-16s %s\n", bench_mode_at(k)->name, bench_mode_at(k)->what);
            return 0;
        case 'T':
            if (astitch_target_from_name(optarg, &o.target) != ASTITCH_OK ||
                (o.target != ASTITCH_TARGET_CUDA && o.target != ASTITCH_TARGET_HOST)) {
                fprintf(stderr, "astitch-bench: --target must be cuda or host\n");
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (o.runs < 1 || o.runs > 100000)
        o.runs = 200;
    if (o.min_runs < 1 || o.min_runs > o.runs)
        o.min_runs = o.runs < 20 ? o.runs : 20;
    for (int k = 0; !modes && bench_mode_at(k) && k < BENCH_MAX_MODES; k++)
        o.mode[o.nmode++] = bench_mode_at(k);
    if (modes && parse_modes(modes, &o))
        return 2;

    char **files = NULL;
    int nfiles = 0;
    for (int i = optind; i < argc; i++) {
        files = realloc(files, (size_t)(nfiles + 1) * sizeof *files);
        files[nfiles++] = strdup(argv[i]);
    }
    if (!nfiles) {
        char path[1024];
        const char *dir = getenv("ASTITCH_BENCH_DIR");
        if (strchr(suite, '/') || strstr(suite, ".txt"))
            snprintf(path, sizeof path, "%s", suite);
        else if (dir && *dir)
            snprintf(path, sizeof path, "%s/suites/%s.txt", dir, suite);
        else if (snprintf(path, sizeof path, "%s/suites/%s.txt", ASTITCH_BENCH_DIR, suite),
                 access(path, R_OK) != 0)
            snprintf(path, sizeof path, "%s/suites/%s.txt", ASTITCH_BENCH_INSTALL_DIR, suite);
        if (read_suite(path, &files, &nfiles) || !nfiles) {
            fprintf(stderr, "astitch-bench: cannot read suite %s (set ASTITCH_BENCH_DIR to the "
                            "bench folder of the source tree)\n", path);
            return 2;
        }
    }
    BenchCuda *cuda = NULL;
    BenchDevice dev;
    int status = 0;
    for (int i = 0; list && i < nfiles; i++)
        printf("%s\n", files[i]);
    BenchWarmUp warm = {0};
    char err[512];
    if (!list && (status = open_device(&o, &cuda, &dev)) == 0) {
        if (bench_warm_up(o.target, &warm, err, sizeof err)) {
            fprintf(stderr, "astitch-bench: %s\n", err);
            status = 1;
        } else {
            dev.setup_ms = warm.ms;
            status = run_suite(&o, cuda, &dev, files, nfiles);
        }
    }
    bench_warm_up_end(&warm);
    bench_cuda_close(cuda);
    free_files(files, nfiles);
    return status;
}
