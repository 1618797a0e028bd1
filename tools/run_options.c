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

static const char *const target_names[TARGET_COUNT] = {"auto", "reference", "host", "cuda"};

enum { OPT_TARGET = 256, OPT_SEED, OPT_INPUTS, OPT_OUTPUTS, OPT_PLAN, OPT_DOT, OPT_DEVICE, OPT_FUSION };

typedef struct OptionSpec {
    const char *name;
    int has_arg;
    int id;          /* getopt_long's val; a printable character is also the short option */
    const char *arg; /* argument name in --help, NULL for none */
    const char *help;
} OptionSpec;

static const OptionSpec option_table[] = {
    {"target", required_argument, OPT_TARGET, "T",
     "where to run: auto (the best available target; the default), reference (the op-by-op "
     "interpreter), host, cuda"},
    {"seed", required_argument, OPT_SEED, "N",
     "seed of the random inputs, decimal or 0x hex (default 1)"},
    {"inputs", required_argument, OPT_INPUTS, "PATH",
     "read the inputs instead: a directory holding <parameter>.npy for every parameter, or one "
     ".npy file when the graph has one parameter"},
    {"outputs", required_argument, OPT_OUTPUTS, "DIR",
     "write each output to DIR/<output>.npy (DIR is created when missing)"},
    {"plan", optional_argument, OPT_PLAN, "[=text|json]",
     "print the stitch plan (docs/planner.md) instead of running the graph"},
    {"dot", required_argument, OPT_DOT, "FILE",
     "write the plan as a Graphviz picture to FILE instead of running the graph"},
    {"device", required_argument, OPT_DEVICE, "D",
     "device model of --plan and --dot: h100 (the default), a100, v100, host"},
    {"fusion", required_argument, OPT_FUSION, "F",
     "fusion mode of --plan and --dot: stitch (the default), xla, none"},
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

const char *target_name(Target t)
{
    return (unsigned)t < TARGET_COUNT ? target_names[t] : "?";
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
            "\nRandom inputs: floats uniform in [-1, 1), integers in [0, 16), bools 0 or 1,\n"
            "from splitmix64 with one stream per parameter (docs/astitch-run.md).\n"
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

int parse_options(int argc, char **argv, Options *o)
{
    struct option longopts[NUM_OPTIONS + 1];
    char shortopts[2 * NUM_OPTIONS + 2] = ":";
    size_t ns = 1;
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

    *o = (Options){.target = TARGET_AUTO, .seed = 1, .device = "h100", .fusion = "stitch"};
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1) {
        switch (c) {
        case OPT_TARGET: {
            int t = 0;
            while (t < TARGET_COUNT && strcmp(optarg, target_names[t]) != 0)
                t++;
            if (t == TARGET_COUNT) {
                run_fail("unknown target '%s' (expected auto, reference, host or cuda)", optarg);
                return EXIT_USAGE;
            }
            o->target = (Target)t;
            break;
        }
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
        case OPT_DEVICE: o->device = optarg; break;
        case OPT_FUSION: o->fusion = optarg; break;
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
    }
    if (o->help || o->version)
        return 0;
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
