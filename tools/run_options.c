/*
 * run_options.c: the options of astitch-run. One table lists them; getopt_long's tables and the
 * --help text are made from it. A new flag is a row here, a field of Options (run.h), and a case
 * in parse_options.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

enum {
    OPT_TARGET = 256, OPT_CHECK, OPT_SEED, OPT_INPUTS, OPT_OUTPUTS, OPT_FUSION, OPT_DEVICE,
    OPT_PLAN, OPT_DOT, OPT_EMIT, OPT_EMIT_FILE, OPT_NO_REMOTE, OPT_NO_MERGE, OPT_NO_PACKING,
    OPT_NO_ONE_PASS_VARIANCE,
    OPT_NO_RECOMPUTE_OUTPUTS,
    OPT_DETERMINISTIC,
    OPT_PERSISTENT, OPT_WIDE_ROWS, OPT_LONG_ROWS, OPT_NO_VARIANT_SEARCH, OPT_NO_COLUMN_VECTORS, OPT_NO_ROW_VECTORS,
    OPT_COLUMN_SUMS_IN_ROWS, OPT_VIEW_OUTPUTS, OPT_NO_ONLINE_SOFTMAX, OPT_NO_CARRY,
    OPT_NO_TRANSPOSE_TILES, OPT_NO_HOIST, OPT_SPLIT_BARRIERS
};

typedef struct OptionSpec {
    const char *name;
    int has_arg;
    int id;          /* getopt_long's val; a printable character is also the short option */
    const char *arg; /* argument name in --help, NULL for none */
    const char *help;
} OptionSpec;

static const OptionSpec option_table[] = {
    {"target", required_argument, OPT_TARGET, "T",
     "where to run: auto (the default: cuda when a CUDA driver and GPU are present, else host), "
     "reference (the op-by-op interpreter), host (the generated kernels on this CPU), cuda "
     "(the generated kernels on the GPU)"},
    {"check", no_argument, OPT_CHECK, NULL,
     "also run the reference interpreter on the same inputs and compare every output; exit 1 "
     "on a mismatch (tolerances in docs/astitch-run.md)"},
    {"seed", required_argument, OPT_SEED, "N",
     "seed of the random inputs, decimal or 0x hex (default 1)"},
    {"inputs", required_argument, OPT_INPUTS, "PATH",
     "read the inputs instead: a directory holding <parameter>.npy for every parameter, or one "
     ".npy file when the graph has one parameter"},
    {"outputs", required_argument, OPT_OUTPUTS, "DIR",
     "write each output to DIR/<output>.npy (DIR is created when missing)"},
    {"fusion", required_argument, OPT_FUSION, "F",
     "fusion mode of the plan: stitch (the default), xla, none"},
    {"no-remote", no_argument, OPT_NO_REMOTE, NULL,
     "plan without remote stitching (independent stitch ops stay separate kernels)"},
    {"no-merge", no_argument, OPT_NO_MERGE, NULL, "plan without dominant merging"},
    {"no-one-pass-variance", no_argument, OPT_NO_ONE_PASS_VARIANCE, NULL,
     "plan sums of squared deviations as written (a second read of their input)"},
    {"no-recompute-outputs", no_argument, OPT_NO_RECOMPUTE_OUTPUTS, NULL,
     "readers of an output made of positions and constants alone (a causal mask) wait for it "
     "instead of recomputing it"},
    {"no-packing", no_argument, OPT_NO_PACKING, NULL,
     "plan without horizontal packing and task splitting (the ablation of adaptive mapping)"},
    {"deterministic", no_argument, OPT_DETERMINISTIC, NULL,
     "reductions split across blocks combine in a fixed order instead of with atomics, so "
     "repeated runs give identical bits"},
    {"persistent", no_argument, OPT_PERSISTENT, NULL,
     "launch every kernel as one persistent wave of blocks walking chunks of tiles, as kernels "
     "with global barriers must be (by default the others take a block per tile)"},
    {"wide-rows", no_argument, OPT_WIDE_ROWS, NULL,
     "a row of 33 to 1024 elements held in registers spreads over several warps (about 16 "
     "elements per lane) instead of one; no variant search then"},
    {"long-rows", no_argument, OPT_LONG_ROWS, NULL,
     "a row of 8193 to 32768 elements reduced over its trailing axes is held in registers by a "
     "block of up to 1024 lanes (up to 32 elements each) instead of streamed; by default the "
     "cuda target times both forms"},
    {"no-row-vectors", no_argument, OPT_NO_ROW_VECTORS, NULL,
     "a lane of a row reduction that streams its row reads one element per access instead of "
     "16 bytes of consecutive elements (docs/codegen.md, *Reduce phase*)"},
    {"no-online-softmax", no_argument, OPT_NO_ONLINE_SOFTMAX, NULL,
     "a streamed row's max and its sum of exp(x - max) take two walks of the row instead of "
     "one (docs/codegen.md, *Online softmax*)"},
    {"no-carry", no_argument, OPT_NO_CARRY, NULL,
     "a walk after a global barrier over the same elements as an earlier one (a batch norm's "
     "normalization) reads its inputs from global memory again instead of values the earlier "
     "walk kept in shared memory (docs/planner.md, *carry*)"},
    {"no-transpose-tiles", no_argument, OPT_NO_TRANSPOSE_TILES, NULL,
     "an element-wise kernel reading through a transpose that moves the innermost axis reads "
     "its operand element by element instead of in square tiles through shared memory "
     "(docs/planner.md, *transpose*)"},
    {"no-hoist", no_argument, OPT_NO_HOIST, NULL,
     "a kernel whose global barrier waits for values cheap to make keeps the barrier instead "
     "of running their producers as a kernel of their own before it (docs/planner.md, "
     "*hoist*)"},
    {"split-barriers", no_argument, OPT_SPLIT_BARRIERS, NULL,
     "cut every kernel at its global barriers: what each waits for is made by a kernel of its "
     "own, whatever it costs, and the light element-wise values the later kernels read are "
     "recomputed there (docs/planner.md, *hoist*; a form of the variant search)"},
    {"no-column-vectors", no_argument, OPT_NO_COLUMN_VECTORS, NULL,
     "a column reduction alone in its kernel takes one column per thread instead of runs of "
     "16 bytes of adjacent columns (docs/planner.md, *mapping*)"},
    {"column-sums-in-rows", no_argument, OPT_COLUMN_SUMS_IN_ROWS, NULL,
     "a column reduction of the elements a resident row group walks is summed in the row pass "
     "(atomics across blocks) instead of its own pass (docs/planner.md, *across*)"},
    {"view-outputs", no_argument, OPT_VIEW_OUTPUTS, NULL,
     "outputs that are an input seen through reshapes, transposes and slices are left as views "
     "of it by the kernels (named on stderr; the values printed are filled from the input; "
     "docs/codegen.md, *View outputs*)"},
    {"no-variant-search", no_argument, OPT_NO_VARIANT_SEARCH, NULL,
     "cuda: run the planner's default where it leaves a launch shape to a measurement, "
     "instead of timing both at the first run (docs/codegen.md, *Variant search*)"},
    {"device", required_argument, OPT_DEVICE, "D",
     "device model to plan for: h100, a100, v100, host (default: the target's own for a run, "
     "h100 for --plan, --dot and --emit, host for --emit=llvm --target=host)"},
    {"plan", optional_argument, OPT_PLAN, "[=text|json]",
     "print the stitch plan (docs/planner.md) instead of running the graph"},
    {"dot", required_argument, OPT_DOT, "FILE",
     "write the plan as a Graphviz picture to FILE instead of running the graph"},
    {"emit", required_argument, OPT_EMIT, "ptx|llvm",
     "print the generated PTX or LLVM IR instead of running the graph"},
    {"emit-file", required_argument, OPT_EMIT_FILE, "FILE",
     "write what --emit generates to FILE instead of standard output"},
    {"help", no_argument, 'h', NULL, "print this help and exit"},
    {"version", no_argument, 'V', NULL, "print the version and exit"},
};
#define NUM_OPTIONS ((int)(sizeof option_table / sizeof option_table[0]))

void run_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs(PROG ": ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void plan_options(const Options *o, astitch_plan_options *po)
{
    astitch_plan_options_default(po);
    po->fusion = o->fusion;
    po->remote = !o->no_remote;
    po->merge = !o->no_merge;
    po->one_pass_variance = !o->no_one_pass_variance;
    po->recompute_outputs = !o->no_recompute_outputs;
    po->packing = !o->no_packing;
    po->deterministic = o->deterministic;
    po->persistent = o->persistent;
    po->wide_rows = o->wide_rows;
    po->long_rows = o->long_rows;
    po->column_vectors = !o->no_column_vectors;
    po->row_vectors = !o->no_row_vectors;
    po->online_softmax = !o->no_online_softmax;
    po->carry = !o->no_carry;
    po->transpose_tiles = !o->no_transpose_tiles;
    po->hoist = !o->no_hoist;
    po->split_barriers = o->split_barriers;
    po->column_sums_in_rows = o->column_sums_in_rows;
}

void compile_options(const Options *o, astitch_compile_options *co)
{
    astitch_compile_options_default(co);
    co->target = o->target;
    plan_options(o, &co->plan);
    co->device = o->has_device ? &o->device : NULL;
    co->variant_search = !o->no_variant_search;
    co->view_outputs = o->view_outputs;
}

void print_usage(FILE *f)
{
    fprintf(f,
            "Usage: " PROG " [OPTION]... GRAPH.json\n"
            "Run an astitch graph (graph.json, or - for standard input) and print, for each\n"
            "output, its name, dtype and shape, the sum of its values, an FNV-1a hash of its\n"
            "bytes and its first %d values.\n\nOptions:\n", NUM_SHOWN);
    for (int i = 0; i < NUM_OPTIONS; i++) {
        const OptionSpec *o = &option_table[i];
        char shortname[8] = "    ", left[64];
        if (o->id < 128)
            snprintf(shortname, sizeof shortname, "-%c, ", o->id);
        int n = snprintf(left, sizeof left, "%s--%s%s%s", shortname, o->name,
                         o->arg && o->has_arg == required_argument ? "=" : "",
                         o->arg ? o->arg : "");
        fprintf(f, "  %s%*s", left, n < 22 ? 22 - n : 1, "");
        /* wrap the help text at 78 columns, continuing under itself */
        const char *h = o->help;
        int col = 24;
        while (*h) {
            const char *sp = strchr(h, ' ');
            int w = sp ? (int)(sp - h) : (int)strlen(h);
            if (col > 24 && col + 1 + w > 78) {
                fprintf(f, "\n%24s", "");
                col = 24;
            } else if (col > 24) {
                fputc(' ', f);
                col++;
            }
            fprintf(f, "%.*s", w, h);
            col += w;
            h += w;
            while (*h == ' ')
                h++;
        }
        fputc('\n', f);
    }
    fprintf(f,
            "\nRandom inputs: floats uniform in [-1, 1) (a dot's weights scaled within\n"
            "+-1/sqrt(K)), integers in [0, 16), bools 0 or 1, from splitmix64 with one stream\n"
            "per parameter (docs/astitch-run.md).\n"
            ".npy files: little-endian, C order; dtypes <f4 <f2 <i4 <i8 |b1, and <u2 holding\n"
            "the bits of bf16.\n\n"
            "Exit status: 0 success, 1 runtime failure, 2 bad input or usage.\n");
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!*s || *s == '-' || *s == '+' || *s == ' ')
        return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return false;
    *out = v;
    return true;
}

/* getopt_long's tables from option_table: longopts of NUM_OPTIONS + 1 entries, shortopts of
 * 2 * NUM_OPTIONS + 2 characters (a leading ':', so that a missing argument reads as ':'). */
static void getopt_tables(struct option *longopts, char *shortopts)
{
    size_t ns = 0;
    shortopts[ns++] = ':';
    for (int i = 0; i < NUM_OPTIONS; i++) {
        const OptionSpec *s = &option_table[i];
        longopts[i] = (struct option){s->name, s->has_arg, NULL, s->id};
        if (s->id < 128) {
            shortopts[ns++] = (char)s->id;
            if (s->has_arg == required_argument)
                shortopts[ns++] = ':';
        }
    }
    longopts[NUM_OPTIONS] = (struct option){0};
    shortopts[ns] = '\0';
}

/* Option c of getopt_long (its argument in optarg) into o: 0, or EXIT_USAGE with the message
 * printed. */
static int take_option(int c, char **argv, Options *o)
{
    switch (c) {
    case OPT_TARGET:
        if (astitch_target_from_name(optarg, &o->target) != ASTITCH_OK) {
            run_fail("unknown target '%s' (expected auto, reference, host or cuda)", optarg);
            return EXIT_USAGE;
        }
        break;
    case OPT_CHECK: o->check = true; break;
    case OPT_SEED:
        if (!parse_u64(optarg, &o->seed)) {
            run_fail("--seed wants a non-negative 64-bit integer, not '%s'", optarg);
            return EXIT_USAGE;
        }
        break;
    case OPT_INPUTS: o->inputs = optarg; break;
    case OPT_OUTPUTS: o->outputs = optarg; break;
    case OPT_PLAN:
        o->plan = optarg ? optarg : "text";
        if (strcmp(o->plan, "text") != 0 && strcmp(o->plan, "json") != 0) {
            run_fail("--plan takes text or json, not '%s'", o->plan);
            return EXIT_USAGE;
        }
        break;
    case OPT_DOT: o->dot = optarg; break;
    case OPT_EMIT:
        if (strcmp(optarg, "ptx") != 0 && strcmp(optarg, "llvm") != 0) {
            run_fail("--emit takes ptx or llvm, not '%s'", optarg);
            return EXIT_USAGE;
        }
        o->emit = optarg;
        break;
    case OPT_EMIT_FILE: o->emit_file = optarg; break;
    case OPT_DEVICE:
        if (astitch_device_builtin(optarg, &o->device) != ASTITCH_OK) {
            run_fail("unknown device model '%s' (expected h100, a100, v100 or host)", optarg);
            return EXIT_USAGE;
        }
        o->has_device = true;
        break;
    case OPT_FUSION:
        if (astitch_fusion_from_name(optarg, &o->fusion) != ASTITCH_OK) {
            run_fail("unknown fusion mode '%s' (expected none, xla or stitch)", optarg);
            return EXIT_USAGE;
        }
        break;
    case OPT_NO_REMOTE: o->no_remote = true; break;
    case OPT_NO_MERGE: o->no_merge = true; break;
    case OPT_NO_ONE_PASS_VARIANCE: o->no_one_pass_variance = true; break;
    case OPT_NO_RECOMPUTE_OUTPUTS: o->no_recompute_outputs = true; break;
    case OPT_WIDE_ROWS: o->wide_rows = true; break;
    case OPT_LONG_ROWS: o->long_rows = true; break;
    case OPT_NO_COLUMN_VECTORS: o->no_column_vectors = true; break;
    case OPT_NO_ROW_VECTORS: o->no_row_vectors = true; break;
    case OPT_NO_ONLINE_SOFTMAX: o->no_online_softmax = true; break;
    case OPT_NO_CARRY: o->no_carry = true; break;
    case OPT_NO_TRANSPOSE_TILES: o->no_transpose_tiles = true; break;
    case OPT_NO_HOIST: o->no_hoist = true; break;
    case OPT_SPLIT_BARRIERS: o->split_barriers = true; break;
    case OPT_COLUMN_SUMS_IN_ROWS: o->column_sums_in_rows = true; break;
    case OPT_NO_VARIANT_SEARCH: o->no_variant_search = true; break;
    case OPT_VIEW_OUTPUTS: o->view_outputs = true; break;
    case OPT_NO_PACKING: o->no_packing = true; break;
    case OPT_DETERMINISTIC: o->deterministic = true; break;
    case OPT_PERSISTENT: o->persistent = true; break;
    case 'h': o->help = true; break;
    case 'V': o->version = true; break;
    case ':':
        run_fail("option '%s' needs an argument", argv[optind - 1]);
        return EXIT_USAGE;
    default:
        if (optopt && optopt < 128)
            run_fail("unknown option '-%c' (see --help)", optopt);
        else
            run_fail("unknown option '%s' (see --help)", argv[optind - 1]);
        return EXIT_USAGE;
    }
    return 0;
}

/* The options' combinations and the one graph they leave (argv[optind] on): 0, or EXIT_USAGE
 * with the message printed. */
static int check_options(int argc, char **argv, Options *o)
{
    if (o->emit_file && !o->emit) {
        run_fail("--emit-file needs --emit=ptx or --emit=llvm");
        return EXIT_USAGE;
    }
    if (o->emit && (o->plan || o->dot)) {
        run_fail("--emit cannot be combined with --plan or --dot");
        return EXIT_USAGE;
    }
    if (o->check && (o->emit || o->plan || o->dot)) {
        run_fail("--check runs the graph; it cannot be combined with --plan, --dot or --emit");
        return EXIT_USAGE;
    }
    if (optind >= argc) {
        run_fail("no graph given (usage: " PROG " [OPTION]... GRAPH.json; see --help)");
        return EXIT_USAGE;
    }
    if (argc - optind > 1) {
        run_fail("one graph at a time: unexpected '%s'", argv[optind + 1]);
        return EXIT_USAGE;
    }
    o->graph = argv[optind];
    return 0;
}

int parse_options(int argc, char **argv, Options *o)
{
    struct option longopts[NUM_OPTIONS + 1];
    char shortopts[2 * NUM_OPTIONS + 2];
    getopt_tables(longopts, shortopts);
    *o = (Options){.target = ASTITCH_TARGET_AUTO, .seed = 1, .fusion = ASTITCH_FUSION_STITCH};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        int rc = take_option(c, argv, o);
        if (rc != 0)
            return rc;
    }
    return o->help || o->version ? 0 : check_options(argc, argv, o);
}
