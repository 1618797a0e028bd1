/*
 * run_main.c: astitch-run, which loads a graph.json, gives it inputs, runs it and reports its
 * outputs (docs/astitch-run.md).
 *
 *   parse_options   the command line -> Options (run_options.c; usage errors exit 2)
 *   load_graph      graph.json -> verified graph (bad files exit 2)
 *   prepare_inputs  random (--seed) or .npy (--inputs) parameter buffers
 *   run_on_target   compile for the target (the executable API) and run
 *   check           --check: the reference interpreter on the same inputs, every output compared
 *   report          name, type, checksums and first values of each output; --outputs files
 *
 * Exit status: 0 success, 1 runtime failure, 2 bad input or usage. Every message goes to stderr
 * and starts with "astitch-run: ".
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_tolerance.h"
#include "run.h"

/* Everything a run owns; run_free releases it all. */
typedef struct Run {
    astitch_context *ctx;
    astitch_graph *g;
    int nin, nout;
    astitch_tensor_info *in_info, *out_info;
    void **in, **out;
    void **ref;          /* --check: the reference interpreter's outputs */
    double *error;       /* --check: per output, the worst normalized error */
    double *conditioned; /* --check: the error less its conditioning slack, or -1 where the
                          * error was within the tolerance and no slack was asked for */
    char device[40];     /* the device model the run was planned for; empty for reference */
} Run;

static void run_free(Run *r)
{
    for (int i = 0; r->in && i < r->nin; i++)
        free(r->in[i]);
    for (int i = 0; r->out && i < r->nout; i++)
        free(r->out[i]);
    for (int i = 0; r->ref && i < r->nout; i++)
        free(r->ref[i]);
    free(r->in);
    free(r->out);
    free(r->ref);
    free(r->error);
    free(r->conditioned);
    free(r->in_info);
    free(r->out_info);
    astitch_graph_destroy(r->g);
    astitch_context_destroy(r->ctx);
}

/* The most bytes of a graph read from standard input: astitch_graph_load_json's limit for files
 * (docs/graph-format.md). */
#define STDIN_MAX_BYTES ((size_t)1 << 30)

static int load_graph(Run *r, const char *path)
{
    astitch_status s;
    if (strcmp(path, "-") == 0) {
        size_t len = 0, cap = 1 << 16;
        char *text = malloc(cap);
        size_t got;
        while (text && (got = fread(text + len, 1, cap - len, stdin)) > 0) {
            len += got;
            if (len == cap && cap >= STDIN_MAX_BYTES) {
                free(text);
                run_fail("standard input: larger than %zu bytes; not a graph", STDIN_MAX_BYTES);
                return EXIT_USAGE;
            }
            if (len == cap) {
                char *bigger = realloc(text, cap *= 2);
                if (!bigger)
                    free(text);
                text = bigger;
            }
        }
        if (!text) {
            run_fail("out of memory reading standard input");
            return EXIT_RUNTIME;
        }
        s = astitch_graph_read_json(r->ctx, text, len, "<stdin>", &r->g);
        free(text);
    } else {
        s = astitch_graph_load_json(r->ctx, path, &r->g);
    }
    if (s == ASTITCH_OK)
        s = astitch_graph_verify(r->g);
    if (s != ASTITCH_OK) {
        run_fail("%s", astitch_last_error(r->ctx));
        return EXIT_USAGE; /* an unreadable or invalid graph is bad input, whatever the cause */
    }
    return 0;
}

/* Node names become file names in --inputs and --outputs directories. */
static bool usable_file_name(const char *name)
{
    return *name && strcmp(name, ".") != 0 && strcmp(name, "..") != 0 && !strchr(name, '/');
}

static char *join_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 6;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s.npy", dir, name);
    return p;
}

/* Collects the tensor infos of parameters and outputs and allocates their buffers (twice for
 * the outputs under --check). */
static int allocate(Run *r, bool check)
{
    r->nin = astitch_graph_num_parameters(r->g);
    r->nout = astitch_graph_num_outputs(r->g);
    r->in_info = calloc((size_t)r->nin + 1, sizeof *r->in_info);
    r->out_info = calloc((size_t)r->nout + 1, sizeof *r->out_info);
    r->in = calloc((size_t)r->nin + 1, sizeof *r->in);
    r->out = calloc((size_t)r->nout + 1, sizeof *r->out);
    if (check) {
        r->ref = calloc((size_t)r->nout + 1, sizeof *r->ref);
        r->error = calloc((size_t)r->nout + 1, sizeof *r->error);
        r->conditioned = calloc((size_t)r->nout + 1, sizeof *r->conditioned);
    }
    if (!r->in_info || !r->out_info || !r->in || !r->out ||
        (check && (!r->ref || !r->error || !r->conditioned))) {
        run_fail("out of memory");
        return EXIT_RUNTIME;
    }
    double total = 0;
    for (int i = 0; i < r->nin + r->nout; i++) {
        bool is_in = i < r->nin;
        astitch_node n = is_in ? astitch_graph_parameter(r->g, i)
                               : astitch_graph_output(r->g, i - r->nin);
        astitch_tensor_info *t = is_in ? &r->in_info[i] : &r->out_info[i - r->nin];
        if (astitch_node_info(r->g, n, t) != ASTITCH_OK) {
            run_fail("%s", astitch_last_error(r->ctx));
            return EXIT_RUNTIME;
        }
        total += (double)t->bytes * (!is_in && check ? 2 : 1);
    }
    /* refuse at once what cannot fit rather than be killed half way */
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && total > (double)pages * (double)page) {
        run_fail("the inputs and outputs need %.0f bytes, more than this machine's %.0f bytes of "
             "memory", total, (double)pages * (double)page);
        return EXIT_RUNTIME;
    }
    for (int i = 0; i < r->nin + r->nout * (check ? 2 : 1); i++) {
        bool is_in = i < r->nin, is_ref = i >= r->nin + r->nout;
        int o = is_ref ? i - r->nin - r->nout : i - r->nin;
        const astitch_tensor_info *t = is_in ? &r->in_info[i] : &r->out_info[o];
        void *p = malloc(t->bytes ? t->bytes : 1);
        if (!p) {
            run_fail("out of memory: %zu bytes for %s '%s'", t->bytes,
                 is_in ? "parameter" : "output", t->name);
            return EXIT_RUNTIME;
        }
        *(is_in ? &r->in[i] : is_ref ? &r->ref[o] : &r->out[o]) = p;
    }
    return 0;
}

static int prepare_inputs(Run *r, const Options *o)
{
    if (!o->inputs) {
        for (int i = 0; i < r->nin; i++)
            tio_fill_random(&r->in_info[i], r->in[i], o->seed, i,
                            check_input_scale_exponent(r->g, i));
        return 0;
    }
    struct stat st;
    if (stat(o->inputs, &st) != 0) {
        run_fail("--inputs %s: %s", o->inputs, strerror(errno));
        return EXIT_USAGE;
    }
    char err[TIO_ERRLEN];
    if (!S_ISDIR(st.st_mode)) {
        if (r->nin != 1) {
            run_fail("--inputs %s: a single .npy file needs a graph with one parameter, and this "
                 "one has %d; give a directory of <parameter>.npy files", o->inputs, r->nin);
            return EXIT_USAGE;
        }
        tio_status s = tio_npy_read(o->inputs, &r->in_info[0], r->in[0], err, sizeof err);
        if (s != TIO_OK)
            run_fail("%s", err);
        return (int)s;
    }
    for (int i = 0; i < r->nin; i++) {
        if (!usable_file_name(r->in_info[i].name)) {
            run_fail("--inputs %s: parameter '%s' cannot name a file", o->inputs,
                 r->in_info[i].name);
            return EXIT_USAGE;
        }
        char *path = join_path(o->inputs, r->in_info[i].name);
        if (!path) {
            run_fail("out of memory");
            return EXIT_RUNTIME;
        }
        tio_status s = tio_npy_read(path, &r->in_info[i], r->in[i], err, sizeof err);
        free(path);
        if (s != TIO_OK) {
            size_t n = strlen(o->inputs);
            if (n > 4 && strcmp(o->inputs + n - 4, ".npy") == 0) /* meant as a file? */
                run_fail("--inputs %s is a directory, read as one holding <parameter>.npy files: "
                         "%s", o->inputs, err);
            else
                run_fail("%s", err);
            return (int)s;
        }
    }
    return 0;
}

/* Checks the --outputs directory before the run, creating it when missing. */
static int prepare_outputs(const Run *r, const char *dir)
{
    for (int i = 0; i < r->nout; i++) {
        if (!usable_file_name(r->out_info[i].name)) {
            run_fail("--outputs %s: output '%s' cannot name a file", dir, r->out_info[i].name);
            return EXIT_USAGE;
        }
    }
    struct stat st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        run_fail("--outputs %s: cannot create the directory: %s", dir, strerror(errno));
        return EXIT_USAGE;
    }
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        run_fail("--outputs %s: not a directory", dir);
        return EXIT_USAGE;
    }
    /* a file made and removed again, so that a directory no file can be made in (permissions,
     * a read-only file system) is refused now rather than after the run */
    char name[64];
    snprintf(name, sizeof name, ".astitch-run-probe-%ld", (long)getpid());
    char *probe = join_path(dir, name);
    int fd = probe ? open(probe, O_WRONLY | O_CREAT | O_EXCL, 0600) : -1;
    int err = errno;
    if (fd >= 0) {
        close(fd);
        unlink(probe);
    }
    free(probe);
    if (fd < 0) {
        run_fail("--outputs %s: cannot create files in the directory: %s", dir, strerror(err));
        return EXIT_USAGE;
    }
    return 0;
}

/* Notes on standard error each GPU kernel that does not run with its planned register bound
 * (the runtime relaxed it after a spill, or the bound search found it faster) or that spills
 * still. */
static void note_loaded_kernels(const astitch_executable *x)
{
    const astitch_plan *p = astitch_executable_plan(x);
    for (int k = 0; p && astitch_executable_target(x) == ASTITCH_TARGET_CUDA &&
                    k < astitch_plan_num_kernels(p); k++) {
        astitch_loaded_kernel lk;
        astitch_kernel_info info;
        if (astitch_executable_loaded_kernel(x, k, &lk) != ASTITCH_OK ||
            astitch_plan_kernel_info(p, k, &info) != ASTITCH_OK)
            continue;
        if (lk.bound != lk.planned_bound)
            fprintf(stderr, "astitch-run: note: kernel %s runs with a bound of %d registers "
                            "instead of the planned %d (its code needs more registers, "
                            "it spilled there, or it ran slower: variant search) (%d used, "
                            "%d blocks per SM)\n",
                    info.name, lk.bound, lk.planned_bound, lk.regs, lk.blocks_per_sm);
        if (lk.lean)
            fprintf(stderr, "astitch-run: note: kernel %s spilled at its %d registers, which "
                            "its resident grid needs; runs in its lean form (one element per "
                            "iteration)\n", info.name, lk.bound);
        if (lk.local_bytes > 0)
            fprintf(stderr, "astitch-run: note: kernel %s spills %ld bytes per thread at %d "
                            "registers\n", info.name, lk.local_bytes, lk.regs);
    }
}

/* Notes on standard error how the variant search chose the form that ran (cuda). */
static void note_variant(const astitch_executable *x)
{
    astitch_variant_info v;
    if (astitch_executable_variant(x, &v) != ASTITCH_OK)
        return;
    const char *form = astitch_variant_form_name(v.form);
    if (v.state == ASTITCH_VARIANT_TIMED) {
        fprintf(stderr, "astitch-run: note: variant search:");
        for (int i = 0, first = 1; i < 2 * ASTITCH_VARIANT_FORMS; i++) {
            int f = i / 2;
            double us = i % 2 ? v.us_raised[f] : v.us[f];
            if (us > 0) {
                fprintf(stderr, "%s %s%s %.1f us", first ? "" : ",",
                        astitch_variant_form_name(f), i % 2 ? " at the next register bound" : "",
                        us);
                first = 0;
            }
        }
        fprintf(stderr, "; runs %s%s\n", form,
                v.raised_bound ? " at the next register bound" : "");
    } else if (v.state == ASTITCH_VARIANT_CACHED) {
        fprintf(stderr, "astitch-run: note: variant search: runs %s, as timed before (compile "
                        "cache)\n", form);
    }
    if (v.dots_chosen > 0)
        fprintf(stderr, "astitch-run: note: dot algorithm search: %d dots chosen, %d of them "
                        "run another algorithm than cuBLASLt's first\n", v.dots_chosen,
                v.dots_not_first);
}

/* --view-outputs: names each output the kernels leave as a view of an input. */
static void note_views(const astitch_executable *x, const Run *r)
{
    for (int i = 0; i < r->nout; i++) {
        bool is_view = false;
        astitch_output_view v;
        if (astitch_executable_output_view(x, i, &is_view, &v) != ASTITCH_OK || !is_view)
            continue;
        fprintf(stderr,
                "astitch-run: note: output %d '%s' is a view of input %d '%s' (offset %lld, "
                "strides",
                i, r->out_info[i].name, v.input, r->in_info[v.input].name, (long long)v.offset);
        for (int d = 0; d < v.rank; d++)
            fprintf(stderr, " %lld", (long long)v.strides[d]);
        fprintf(stderr, "), not written by the kernels\n");
    }
}

/* Compiles the graph for o's target (auto resolved by the library) and runs it; *used
 * receives the target that ran. */
static int run_on_target(Run *r, const Options *o, astitch_target *used)
{
    astitch_compile_options co;
    compile_options(o, &co);
    astitch_executable *x = NULL;
    astitch_status s = astitch_compile(r->g, &co, &x);
    *used = s == ASTITCH_OK ? astitch_executable_target(x) : o->target;
    const astitch_plan *p = s == ASTITCH_OK ? astitch_executable_plan(x) : NULL;
    if (p)
        snprintf(r->device, sizeof r->device, "%s", astitch_plan_device(p)->name);
    if (s == ASTITCH_OK)
        s = astitch_execute(x, (const void *const *)r->in, r->out);
    if (s == ASTITCH_OK) { /* after the run: the variant search settles at the first one */
        note_variant(x);
        note_loaded_kernels(x);
        note_views(x, r);
    }
    astitch_executable_destroy(x);
    if (s != ASTITCH_OK) {
        run_fail("%s target: %s", astitch_target_name(*used), astitch_last_error(r->ctx));
        return EXIT_RUNTIME;
    }
    return 0;
}

/* --check, for outputs beyond their tolerance: runs the reference again on perturbed inputs
 * (check_perturb) and measures their errors less the conditioning slack. Passing outputs need
 * no second run, since the slack only ever lowers an error. */
static int check_conditioned(Run *r, uint64_t seed)
{
    void **in = calloc((size_t)r->nin + 1, sizeof *in), **pert = calloc((size_t)r->nout + 1, sizeof *pert);
    int rc = in && pert ? 0 : (run_fail("out of memory"), EXIT_RUNTIME);
    for (int i = 0; !rc && i < r->nin; i++) {
        if (!(in[i] = malloc(r->in_info[i].bytes + 1))) {
            rc = (run_fail("out of memory"), EXIT_RUNTIME);
            break;
        }
        memcpy(in[i], r->in[i], r->in_info[i].bytes);
        check_perturb(&r->in_info[i], in[i], seed, i);
    }
    for (int i = 0; !rc && i < r->nout; i++)
        if (!(pert[i] = malloc(r->out_info[i].bytes + 1)))
            rc = (run_fail("out of memory"), EXIT_RUNTIME);
    if (!rc && astitch_run_reference(r->g, (const void *const *)in, pert) != ASTITCH_OK)
        rc = (run_fail("--check: reference on perturbed inputs: %s", astitch_last_error(r->ctx)),
              EXIT_RUNTIME);
    for (int i = 0; !rc && i < r->nout; i++)
        if (r->error[i] > check_output_tolerance(r->g, i))
            r->conditioned[i] = check_error_conditioned(&r->out_info[i], r->out[i], r->ref[i], pert[i]);
    for (int i = 0; in && i < r->nin; i++)
        free(in[i]);
    for (int i = 0; pert && i < r->nout; i++)
        free(pert[i]);
    free(in);
    free(pert);
    return rc;
}

/* --check: runs the reference interpreter on the same inputs and measures every output's
 * error, conditioned where it exceeds the tolerance; the verdicts are printed by report. */
static int check(Run *r, uint64_t seed)
{
    if (astitch_run_reference(r->g, (const void *const *)r->in, r->ref) != ASTITCH_OK) {
        run_fail("--check: reference: %s", astitch_last_error(r->ctx));
        return EXIT_RUNTIME;
    }
    bool beyond = false;
    for (int i = 0; i < r->nout; i++) {
        r->error[i] = check_error(&r->out_info[i], r->out[i], r->ref[i]);
        r->conditioned[i] = -1;
        beyond = beyond || r->error[i] > check_output_tolerance(r->g, i);
    }
    return beyond ? check_conditioned(r, seed) : 0;
}

static void print_output(const astitch_tensor_info *t, const void *data, int i)
{
    char type[256];
    printf("output %d '%s' %s\n", i, t->name, tio_type_str(type, sizeof type, t));
    printf("  sum    %.17g\n", tio_sum(t, data));
    printf("  fnv1a  %016" PRIx64 "\n", tio_fnv1a64(data, t->bytes));
    printf("  first  ");
    if (t->elements == 0) {
        printf("(none)\n");
        return;
    }
    tio_print_values(stdout, t, data, NUM_SHOWN);
    printf(" (%" PRId64 " of %" PRId64 ")\n",
           t->elements < NUM_SHOWN ? t->elements : NUM_SHOWN, t->elements);
}

/* Prints the run and every output (with its --check verdict); writes --outputs files. Returns
 * EXIT_RUNTIME after everything is written when some output failed its check. */
static int report(const Run *r, const Options *o, astitch_target used)
{
    const char *name = astitch_graph_name(r->g);
    printf("graph %s%s%s%s: target %s", name ? "'" : "", name ? name : "",
           name ? "' from " : "", o->graph, astitch_target_name(used));
    const char *how = o->target == ASTITCH_TARGET_AUTO ? "auto" : NULL;
    if (r->device[0])
        printf(" (%s%sdevice '%s', fusion %s)", how ? how : "", how ? "; " : "", r->device,
               astitch_fusion_name(o->fusion));
    else if (how)
        printf(" (%s)", how);
    printf(", ");
    if (o->inputs)
        printf("inputs from %s", o->inputs);
    else
        printf("random inputs with seed %" PRIu64, o->seed);
    printf("%s\n", o->check ? ", checked against the reference" : "");
    int failed = 0;
    for (int i = 0; i < r->nout; i++) {
        print_output(&r->out_info[i], r->out[i], i);
        if (!o->check)
            continue;
        double tol = check_output_tolerance(r->g, i), c = r->conditioned[i];
        bool pass = c >= 0 ? c <= tol : r->error[i] <= tol;
        if (c >= 0)
            printf("  check  error %.3g, %.3g beyond the reference's conditioning slack, tolerance "
                   "%g: %s\n", r->error[i], c, tol, pass ? "PASS" : "FAIL");
        else
            printf("  check  error %.3g, tolerance %g: %s\n", r->error[i], tol, pass ? "PASS" : "FAIL");
        failed += !pass;
    }
    if (fflush(stdout) != 0) {
        run_fail("cannot write to standard output: %s", strerror(errno));
        return EXIT_RUNTIME;
    }
    char err[TIO_ERRLEN];
    for (int i = 0; o->outputs && i < r->nout; i++) {
        char *path = join_path(o->outputs, r->out_info[i].name);
        if (!path) {
            run_fail("out of memory");
            return EXIT_RUNTIME;
        }
        tio_status s = tio_npy_write(path, &r->out_info[i], r->out[i], err, sizeof err);
        free(path);
        if (s != TIO_OK) {
            run_fail("%s", err);
            return EXIT_RUNTIME;
        }
    }
    if (failed) {
        run_fail("--check: %d of %d outputs differ from the reference beyond the tolerance",
                 failed, r->nout);
        return EXIT_RUNTIME;
    }
    return 0;
}

int main(int argc, char **argv)
{
    Options o;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc;
    if (o.help) {
        print_usage(stdout);
        return 0;
    }
    if (o.version) {
        printf(PROG " %s (libastitch %s)\n", ASTITCH_VERSION_STRING, astitch_version());
        return 0;
    }

    Run r = {0};
    if (astitch_context_create(&r.ctx) != ASTITCH_OK) {
        run_fail("cannot create a context (out of memory)");
        return EXIT_RUNTIME;
    }
    astitch_target used = o.target;
    rc = load_graph(&r, o.graph);
    if (!rc && (o.plan || o.dot || o.emit)) {
        rc = o.emit ? run_emit(r.ctx, r.g, &o) : run_plan(r.ctx, r.g, &o);
        run_free(&r);
        return rc;
    }
    if (!rc)
        rc = allocate(&r, o.check);
    if (!rc)
        rc = prepare_inputs(&r, &o);
    if (!rc && o.outputs)
        rc = prepare_outputs(&r, o.outputs);
    if (!rc)
        rc = run_on_target(&r, &o, &used);
    if (!rc && o.check)
        rc = check(&r, o.seed);
    if (!rc)
        rc = report(&r, &o, used);
    run_free(&r);
    return rc;
}
