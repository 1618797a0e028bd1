/*
 * test_cli.c: astitch-run as a user sees it: exit statuses, messages, printed outputs, the
 * documented random inputs, .npy round trips, the malformed-graph corpus, targets and --check,
 * --emit, and the README's C API example. The programs come from the environment: ASTITCH_RUN,
 * ASTITCH_API_EXAMPLE and ASTITCH_SOURCE_ROOT. The --check comparison (tools/run_check.c) is
 * also tested directly, since the targets agree too well to make it fail from outside.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <math.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "astitch/astitch.h"
#include "run.h"

extern char **environ;

typedef struct Fixture {
    char dir[64]; /* scratch directory, removed at the end */
    const char *run;
} Fixture;

typedef struct Result {
    int status; /* exit status, or 1000 + signal number */
    char *out, *err;
} Result;

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap + 1);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = realloc(buf, (cap *= 2) + 1);
    }
    fclose(f);
    if (buf)
        buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
}

static const char *path_in(const Fixture *fx, const char *name)
{
    static char buf[8][512]; /* a few paths may be alive at once in one test */
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, 512, "%s/%s", fx->dir, name);
    return p;
}

/* Runs `program args...` (NULL-terminated) with stdin from stdin_path (or /dev/null), stdout
 * and stderr captured. */
static Result run_program(const Fixture *fx, const char *program, const char *stdin_path,
                          const char *const *args)
{
    const char *argv[32] = {program};
    int n = 1;
    while (args[n - 1]) {
        assert_true(n < 31);
        argv[n] = args[n - 1];
        n++;
    }
    argv[n] = NULL;
    char out[512], err[512];
    snprintf(out, sizeof out, "%s/stdout.txt", fx->dir);
    snprintf(err, sizeof err, "%s/stderr.txt", fx->dir);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, stdin_path ? stdin_path : "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_t pid;
    int rc = posix_spawn(&pid, program, &fa, NULL, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0)
        fail_msg("cannot start %s: %s", program, strerror(rc));
    int ws;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    Result r = {.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 1000 + WTERMSIG(ws)};
    r.out = read_all(out, NULL);
    r.err = read_all(err, NULL);
    assert_non_null(r.out);
    assert_non_null(r.err);
    if (r.status >= 1000)
        fail_msg("%s died of signal %d; stderr:\n%s", program, r.status - 1000, r.err);
    return r;
}

#define RUN(fx, ...) run_program((fx), (fx)->run, NULL, (const char *const[]){__VA_ARGS__, NULL})

static void result_free(Result *r)
{
    free(r->out);
    free(r->err);
}

/* Checks the exit status, that stderr holds `needle` (when given), and that every stderr line
 * carries the program prefix. */
static void expect(const Result *r, int status, const char *needle)
{
    if (r->status != status)
        fail_msg("exit status %d, expected %d; stderr:\n%s", r->status, status, r->err);
    if (needle && !strstr(r->err, needle))
        fail_msg("stderr does not contain '%s':\n%s", needle, r->err);
    for (const char *line = r->err; *line;) {
        if (strncmp(line, "astitch-run: ", 13) != 0)
            fail_msg("stderr line without the prefix: %s", line);
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : line + strlen(line);
    }
}

/* The fnv1a line of output `name` in a run's stdout, as text. */
static void output_field(const Result *r, const char *name, const char *field, char *buf,
                         size_t len)
{
    char head[128];
    snprintf(head, sizeof head, "'%s' ", name);
    const char *o = strstr(r->out, head);
    if (!o)
        fail_msg("no output '%s' in:\n%s", name, r->out);
    char key[32];
    snprintf(key, sizeof key, "\n  %s ", field);
    const char *f = strstr(o, key);
    assert_non_null(f);
    f += strlen(key);
    while (*f == ' ')
        f++;
    size_t n = strcspn(f, "\n");
    assert_true(n < len);
    memcpy(buf, f, n);
    buf[n] = '\0';
}

/* ---- .npy files, written and read independently of the tool ----------------------------- */

static void write_npy(const char *path, const char *descr, const char *shape, const void *data,
                      size_t bytes)
{
    char header[512];
    int n = snprintf(header, sizeof header,
                     "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    assert_true(n > 0 && (size_t)n + 64 < sizeof header);
    while ((10 + n + 1) % 64)
        header[n++] = ' ';
    header[n++] = '\n';
    size_t len = 10 + (size_t)n + bytes;
    unsigned char *buf = malloc(len);
    assert_non_null(buf);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(n & 0xff);
    buf[9] = (unsigned char)(n >> 8);
    memcpy(buf + 10, header, (size_t)n);
    if (bytes)
        memcpy(buf + 10 + n, data, bytes);
    write_file(path, buf, len);
    free(buf);
}

typedef struct Npy {
    char *file;
    char header[256];
    const unsigned char *data;
    size_t bytes;
} Npy;

static Npy read_npy(const char *path)
{
    Npy a = {0};
    size_t len;
    a.file = read_all(path, &len);
    if (!a.file)
        fail_msg("cannot read %s", path);
    assert_true(len >= 10);
    assert_memory_equal(a.file, "\x93NUMPY\x01\x00", 8);
    size_t hlen = (unsigned char)a.file[8] | (size_t)(unsigned char)a.file[9] << 8;
    assert_true(10 + hlen <= len && hlen < sizeof a.header);
    assert_int_equal((10 + hlen) % 64, 0);
    memcpy(a.header, a.file + 10, hlen);
    a.header[hlen] = '\0';
    a.data = (const unsigned char *)a.file + 10 + hlen;
    a.bytes = len - 10 - hlen;
    return a;
}

/* ---- the documented random inputs (docs/astitch-run.md), computed here from the text ------ */

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* The r-th 64-bit draw (r from 0) for parameter `index` under `seed`. */
static uint64_t draw(uint64_t seed, int index, int64_t r)
{
    uint64_t state = mix(seed ^ mix((uint64_t)index + 1));
    return mix(state + (uint64_t)(r + 1) * UINT64_C(0x9E3779B97F4A7C15));
}

static double f16_value(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    assert_true(e != 31);
    double v = e ? ldexp(1024 + m, e - 25) : ldexp(m, -24);
    return h & 0x8000 ? -v : v;
}

static double bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- fixture ---------------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static int setup(void **state)
{
    static Fixture fx;
    fx.run = getenv("ASTITCH_RUN");
    if (!fx.run) {
        fprintf(stderr, "ASTITCH_RUN is not set\n");
        return -1;
    }
    strcpy(fx.dir, "/tmp/astitch-cli-XXXXXX");
    if (!mkdtemp(fx.dir))
        return -1;
    *state = &fx;
    return 0;
}

static int teardown(void **state)
{
    Fixture *fx = *state;
    return nftw(fx->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static const char small_graph[] =
    "{\"format\": \"astitch-graph\", \"version\": 1, \"name\": \"small\",\n"
    " \"nodes\": [\n"
    "  {\"name\": \"a\", \"op\": \"parameter\", \"dtype\": \"f32\", \"shape\": [3, 5]},\n"
    "  {\"name\": \"b\", \"op\": \"parameter\", \"dtype\": \"f32\", \"shape\": [3, 5]},\n"
    "  {\"name\": \"s\", \"op\": \"add\", \"inputs\": [\"a\", \"b\"]},\n"
    "  {\"name\": \"r\", \"op\": \"reduce\", \"kind\": \"sum\", \"inputs\": [\"s\"], "
    "\"axes\": [1]}\n"
    " ],\n"
    " \"outputs\": [\"s\", \"r\"]}\n";

static const char *write_small_graph(const Fixture *fx)
{
    const char *g = path_in(fx, "small.json");
    write_file(g, small_graph, strlen(small_graph));
    return g;
}

/* ---- tests ------------------------------------------------------------------------------ */

static void test_usage_errors_exit_2(void **state)
{
    Fixture *fx = *state;
    const char *g = write_small_graph(fx);
    Result r;
    r = run_program(fx, fx->run, NULL, (const char *const[]){NULL});
    expect(&r, 2, "no graph given"), result_free(&r);
    r = RUN(fx, "--bogus", g);
    expect(&r, 2, "unknown option '--bogus'"), result_free(&r);
    r = RUN(fx, "-q", g);
    expect(&r, 2, "unknown option '-q'"), result_free(&r);
    r = RUN(fx, "--seed=abc", g);
    expect(&r, 2, "--seed"), result_free(&r);
    r = RUN(fx, "--seed=-3", g);
    expect(&r, 2, "--seed"), result_free(&r);
    r = RUN(fx, g, "--seed");
    expect(&r, 2, "needs an argument"), result_free(&r);
    r = RUN(fx, "--target=gpu", g);
    expect(&r, 2, "unknown target 'gpu'"), result_free(&r);
    r = RUN(fx, g, g);
    expect(&r, 2, "one graph at a time"), result_free(&r);
    r = RUN(fx, path_in(fx, "no-such-graph.json"));
    expect(&r, 2, "no-such-graph.json"), result_free(&r);
    r = RUN(fx, "--outputs", g, g); /* a file, not a directory */
    expect(&r, 2, "not a directory"), result_free(&r);
    struct stat st;
    if (stat("/proc/self", &st) == 0 && S_ISDIR(st.st_mode)) { /* no file can be made there */
        r = RUN(fx, "--outputs", "/proc/self", g);
        expect(&r, 2, "--outputs /proc/self: cannot create files in the directory"), result_free(&r);
    }
    r = RUN(fx, "--emit=sass", g);
    expect(&r, 2, "--emit takes ptx or llvm"), result_free(&r);
    r = RUN(fx, "--emit-file", path_in(fx, "x.ptx"), g);
    expect(&r, 2, "--emit-file needs --emit"), result_free(&r);
    r = RUN(fx, "--check", "--plan", g);
    expect(&r, 2, "cannot be combined"), result_free(&r);
    r = RUN(fx, "--emit=ptx", "--dot", path_in(fx, "x.dot"), g);
    expect(&r, 2, "cannot be combined"), result_free(&r);
    r = RUN(fx, "--device=tpu", g);
    expect(&r, 2, "unknown device model 'tpu'"), result_free(&r);
    r = RUN(fx, "--fusion=all", g);
    expect(&r, 2, "unknown fusion mode 'all'"), result_free(&r);
}

static void test_help_and_version(void **state)
{
    Fixture *fx = *state;
    Result r = RUN(fx, "--help");
    expect(&r, 0, NULL);
    const char *documented[] = {"--target", "--check", "--seed", "--inputs", "--outputs",
                                "--fusion", "--no-remote", "--no-merge", "--no-packing",
                                "--deterministic", "--device", "--plan", "--dot", "--emit=ptx|llvm",
                                "--emit-file", "--split-barriers", "--help", "--version",
                                "Exit status",
                                "splitmix64", "<u2"};
    for (size_t i = 0; i < sizeof documented / sizeof *documented; i++)
        if (!strstr(r.out, documented[i]))
            fail_msg("--help does not mention %s:\n%s", documented[i], r.out);
    result_free(&r);
    r = RUN(fx, "--version");
    expect(&r, 0, NULL);
    assert_non_null(strstr(r.out, ASTITCH_VERSION_STRING));
    result_free(&r);
}

/* Every target computes the exact sum s alike; the header names the target that ran. */
static void test_targets(void **state)
{
    Fixture *fx = *state;
    const char *g = write_small_graph(fx);
    Result ref = RUN(fx, "--target=reference", g), aut = RUN(fx, "--target", "auto", g);
    Result host = RUN(fx, "--target=host", g);
    expect(&ref, 0, NULL), expect(&aut, 0, NULL), expect(&host, 0, NULL);
    assert_non_null(strstr(ref.out, "target reference, "));
    assert_non_null(strstr(host.out, "target host (device 'host', fusion stitch), "));
    if (!strstr(aut.out, "target host (auto; ") && !strstr(aut.out, "target cuda (auto; "))
        fail_msg("auto does not say which target ran:\n%s", aut.out);
    char a[64], b[64], c[64];
    output_field(&ref, "s", "fnv1a", a, sizeof a);
    output_field(&aut, "s", "fnv1a", b, sizeof b);
    output_field(&host, "s", "fnv1a", c, sizeof c);
    assert_string_equal(a, b);
    assert_string_equal(a, c);
    result_free(&ref), result_free(&aut), result_free(&host);
}

/* The --check line of every output says PASS with an error within its tolerance; returns how
 * many outputs were checked. */
static int expect_checks_pass(const Result *r)
{
    int n = 0;
    for (const char *p = r->out; (p = strstr(p, "\n  check  error ")); n++) {
        p += strlen("\n  check  error ");
        char *end;
        double err = strtod(p, &end), tol;
        if (end == p || sscanf(end, ", tolerance %lf", &tol) != 1)
            fail_msg("malformed check line in:\n%s", r->out);
        if (!(err >= 0 && err <= tol) || strncmp(strchr(end, ':'), ": PASS\n", 7) != 0)
            fail_msg("check failed (%g vs %g):\n%s", err, tol, r->out);
    }
    return n;
}

/* The host target agrees with the reference on a small graph and two of the paper's examples,
 * under every fusion mode and for another device model. */
static void test_check_host(void **state)
{
    Fixture *fx = *state;
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    assert_non_null(root);
    char fig5[1024], fig7[1024];
    snprintf(fig5, sizeof fig5, "%s/examples/fig5_power_broadcast_add.json", root);
    snprintf(fig7, sizeof fig7, "%s/examples/fig7_subgraph.json", root);
    const char *graphs[] = {write_small_graph(fx), fig5, fig7};
    const int outputs[] = {2, 1, 2};
    const char *fusion[] = {"--fusion=stitch", "--fusion=xla", "--fusion=none"};
    for (int i = 0; i < 3; i++) {
        for (int f = 0; f < 3; f++) {
            Result r = RUN(fx, "--target=host", "--check", fusion[f], graphs[i]);
            expect(&r, 0, NULL);
            assert_non_null(strstr(r.out, "checked against the reference\n"));
            char want[64];
            snprintf(want, sizeof want, "fusion %s)", fusion[f] + 9);
            assert_non_null(strstr(r.out, want));
            assert_int_equal(expect_checks_pass(&r), outputs[i]);
            result_free(&r);
        }
    }
    Result r = RUN(fx, "--target=host", "--device=a100", "--check", fig7);
    expect(&r, 0, NULL);
    assert_non_null(strstr(r.out, "target host (device 'a100', fusion stitch)"));
    assert_int_equal(expect_checks_pass(&r), 2);
    result_free(&r);
    r = RUN(fx, "--target=reference", "--check", fig5);
    expect(&r, 0, NULL);
    assert_int_equal(expect_checks_pass(&r), 1);
    result_free(&r);
}

/* Without a driver (ASTITCH_LIBCUDA names none, so also on a GPU machine) cuda is refused with
 * the library's message and auto falls back to host. */
static void test_cuda_without_driver(void **state)
{
    Fixture *fx = *state;
    const char *g = write_small_graph(fx);
    assert_int_equal(setenv("ASTITCH_LIBCUDA", "/nonexistent/libcuda.so.1", 1), 0);
    Result r = RUN(fx, "--target=cuda", g);
    Result c = RUN(fx, "--target=cuda", "--check", g);
    Result a = RUN(fx, g);
    unsetenv("ASTITCH_LIBCUDA");
    expect(&r, 1, "cuda target: no CUDA driver: /nonexistent/libcuda.so.1 not found");
    expect(&c, 1, "no CUDA driver");
    assert_string_equal(r.out, "");
    expect(&a, 0, NULL);
    assert_non_null(strstr(a.out, "target host (auto; device 'host', fusion stitch)"));
    result_free(&r), result_free(&c), result_free(&a);
}

/* --emit prints the generated code instead of running: LLVM IR with the kernel's definition,
 * PTX with its entry (PTX needs LLVM and libdevice, not a GPU). */
static void test_emit(void **state)
{
    Fixture *fx = *state;
    const char *g = write_small_graph(fx);
    Result r = RUN(fx, "--emit=llvm", g);
    expect(&r, 0, NULL);
    assert_non_null(strstr(r.out, "define void @stitch_0("));
    assert_null(strstr(r.out, "output 0")); /* not run */
    result_free(&r);
    r = RUN(fx, "--emit=llvm", "--fusion=none", g);
    expect(&r, 0, NULL);
    assert_non_null(strstr(r.out, "define void @kernel_1("));
    result_free(&r);
    const char *file = path_in(fx, "small.ptx");
    r = RUN(fx, "--emit=ptx", "--emit-file", file, g);
    if (r.status == 1 && strstr(r.err, "libdevice")) {
        print_message("no libdevice, PTX not checked: %s", r.err);
        result_free(&r);
        return;
    }
    expect(&r, 0, NULL);
    assert_string_equal(r.out, "");
    char *ptx = read_all(file, NULL);
    assert_non_null(ptx);
    assert_non_null(strstr(ptx, ".entry stitch_0("));
    assert_non_null(strstr(ptx, ".target sm_90"));
    free(ptx);
    result_free(&r);
    r = RUN(fx, "--emit=ptx", "--device=v100", g);
    expect(&r, 0, NULL);
    assert_non_null(strstr(r.out, ".target sm_70"));
    assert_non_null(strstr(r.out, ".entry stitch_0("));
    result_free(&r);
}

/* An output's tolerance is that of the least precise float dtype upstream of it: an f32 mean
 * rounded through f16 is held to the f16 tolerance, a branch that does not reach the output
 * does not count, integer outputs stay exact. */
static void test_check_output_tolerance(void **state)
{
    (void)state;
    astitch_context *ctx;
    astitch_graph *g;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t d[] = {4, 8}, ax = 1;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d);
    astitch_node b = astitch_parameter(g, "b", ASTITCH_BF16, 2, d);
    astitch_node mean = astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, &ax);
    astitch_node through_f16 =
        astitch_convert(g, astitch_convert(g, mean, ASTITCH_F16), ASTITCH_F32);
    astitch_node through_bf16 = astitch_binary(
        g, ASTITCH_OP_ADD, astitch_unary(g, ASTITCH_OP_EXP, x), astitch_convert(g, b, ASTITCH_F32));
    astitch_node plain = astitch_unary(g, ASTITCH_OP_NEG, mean);
    astitch_node lt = astitch_binary(g, ASTITCH_OP_LT, through_bf16, x);
    astitch_node half = astitch_convert(g, x, ASTITCH_F16);
    astitch_node outs[] = {through_f16, through_bf16, plain, lt, half};
    for (int i = 0; i < 5; i++)
        assert_int_equal(astitch_add_output(g, outs[i]), ASTITCH_OK);
    assert_true(check_output_tolerance(g, 0) == 1e-2);
    assert_true(check_output_tolerance(g, 1) == 4e-2);
    assert_true(check_output_tolerance(g, 2) == 1e-4);
    assert_true(check_output_tolerance(g, 3) == 0);
    assert_true(check_output_tolerance(g, 4) == 1e-2);
    assert_true(check_output_tolerance(g, 5) == 0); /* no such output */
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

/* A weight's random scale: the right operand of a float dot through layout ops, by the
 * longest contraction it takes part in; left operands, values computed before the dot and
 * integer dots keep the plain draw. */
static void test_check_input_scale_exponent(void **state)
{
    (void)state;
    astitch_context *ctx;
    astitch_graph *g;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t dx[] = {4, 40}, dw[] = {6, 40}, dv[] = {300, 5}, dn[] = {4, 300}, di[] = {4, 4};
    int64_t perm[] = {1, 0};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, dx);        /* lhs only */
    astitch_node w = astitch_parameter(g, "w", ASTITCH_BF16, 2, dw);       /* K = 40 and 300 */
    astitch_node v = astitch_parameter(g, "v", ASTITCH_F32, 2, dv);        /* K = 300, computed */
    astitch_node n = astitch_parameter(g, "n", ASTITCH_F32, 2, dn);
    astitch_node ia = astitch_parameter(g, "ia", ASTITCH_I32, 2, di);      /* integer dot */
    astitch_node ib = astitch_parameter(g, "ib", ASTITCH_I32, 2, di);
    astitch_dot_dims by_rows = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {1}};
    astitch_dot_dims plain = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
    astitch_node wf = astitch_convert(g, w, ASTITCH_F32);
    astitch_node d1 = astitch_dot(g, x, wf, &by_rows);                              /* [4, 6] */
    int64_t d300[] = {6, 300}, bd[] = {0, 1};
    astitch_node wide = astitch_broadcast_in_dim(g, astitch_slice(g, wf, (int64_t[]){0, 0},
                                                                  (int64_t[]){6, 1}, NULL),
                                                 2, d300, bd);
    astitch_node d2 = astitch_dot(g, n, astitch_transpose(g, wide, perm), &plain);  /* [4, 6] */
    astitch_node d3 = astitch_dot(g, n, astitch_unary(g, ASTITCH_OP_NEG, v), &plain);
    astitch_node d4 = astitch_dot(g, ia, ib, &plain);
    astitch_node outs[] = {d1, d2, d3, d4};
    for (int i = 0; i < 4; i++)
        assert_int_equal(astitch_add_output(g, outs[i]), ASTITCH_OK);
    assert_int_equal(check_input_scale_exponent(g, 0), 0);
    assert_int_equal(check_input_scale_exponent(g, 1), 5); /* 4^4 < 300 <= 4^5 */
    assert_int_equal(check_input_scale_exponent(g, 2), 0);
    assert_int_equal(check_input_scale_exponent(g, 3), 0);
    assert_int_equal(check_input_scale_exponent(g, 4), 0);
    assert_int_equal(check_input_scale_exponent(g, 5), 0);
    assert_int_equal(check_input_scale_exponent(g, 6), 0); /* no such parameter */
    assert_int_equal(check_input_scale_exponent(g, -1), 0);
    astitch_graph_destroy(g);

    assert_int_equal(astitch_graph_create(ctx, &g), ASTITCH_OK);
    int64_t k_of[] = {1, 2, 4, 5, 16, 17, 4096, 4097};
    int want[] = {0, 1, 1, 2, 2, 3, 6, 7};
    astitch_node lhs[8], rhs[8];
    for (int i = 0; i < 8; i++) {
        int64_t dl[] = {2, k_of[i]}, dr[] = {k_of[i], 3};
        char ln[16], rn[16];
        snprintf(ln, sizeof ln, "l%d", i);
        snprintf(rn, sizeof rn, "r%d", i);
        lhs[i] = astitch_parameter(g, ln, ASTITCH_F32, 2, dl);
        rhs[i] = astitch_parameter(g, rn, ASTITCH_F32, 2, dr);
        assert_int_equal(astitch_add_output(g, astitch_dot(g, lhs[i], rhs[i], &plain)),
                         ASTITCH_OK);
    }
    for (int i = 0; i < 8; i++) {
        assert_int_equal(check_input_scale_exponent(g, 2 * i), 0);
        if (check_input_scale_exponent(g, 2 * i + 1) != want[i])
            fail_msg("K = %lld: exponent %d, want %d", (long long)k_of[i],
                     check_input_scale_exponent(g, 2 * i + 1), want[i]);
    }
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

/* The --check comparison itself: normalization, tolerances, NaN and infinities, signed zeros,
 * exact integers. */
static void test_check_error(void **state)
{
    (void)state;
    assert_true(check_tolerance(ASTITCH_F32) == 1e-4);
    assert_true(check_tolerance(ASTITCH_F16) == 1e-2);
    assert_true(check_tolerance(ASTITCH_BF16) == 4e-2);
    assert_true(check_tolerance(ASTITCH_I32) == 0 && check_tolerance(ASTITCH_BOOL) == 0);
    astitch_tensor_info t = {.name = "t", .dtype = ASTITCH_F32, .elements = 3};
    float ref[3] = {0.25f, -0.5f, 0.125f}, out[3] = {0.25f, -0.5f, 0.125f};
    assert_true(check_error(&t, out, ref) == 0);
    out[1] = -0.5f + 0x1p-12f; /* scale 1: error 2^-12, above the f32 tolerance */
    assert_true(check_error(&t, out, ref) == 0x1p-12);
    ref[2] = out[2] = -1000; /* scale 1000: the same difference is within it */
    assert_true(check_error(&t, out, ref) == 0x1p-12 / 1000);
    out[1] = ref[1] = NAN;
    assert_true(check_error(&t, out, ref) == 0);
    out[1] = 1;
    assert_true(isinf(check_error(&t, out, ref)));
    out[1] = NAN, ref[1] = 1;
    assert_true(isinf(check_error(&t, out, ref)));
    out[1] = ref[1] = -INFINITY; /* infinities do not scale the error */
    assert_true(check_error(&t, out, ref) == 0);
    out[1] = INFINITY;
    assert_true(isinf(check_error(&t, out, ref)));
    out[1] = 7;
    assert_true(isinf(check_error(&t, out, ref)));
    out[1] = ref[1] = 0.0f; /* a zero of the other sign is wrong (max(-0, +0) is +0) */
    assert_true(check_error(&t, out, ref) == 0);
    out[1] = -0.0f;
    assert_true(isinf(check_error(&t, out, ref)));
    float pert[3] = {ref[0], -0.0f, ref[2]}; /* unless the reference's own sign flips */
    assert_true(check_error_conditioned(&t, out, ref, pert) == 0);
    pert[1] = 0.0f;
    assert_true(isinf(check_error_conditioned(&t, out, ref, pert)));

    uint16_t h_ref[2] = {0x3c00, 0x4000}, h_out[2] = {0x3c01, 0x4000}; /* f16 1, 2; 1 + 2^-10 */
    astitch_tensor_info th = {.name = "h", .dtype = ASTITCH_F16, .elements = 2};
    assert_float_equal(check_error(&th, h_out, h_ref), 0x1p-10 / 2, 1e-12);
    h_ref[1] = 0x0000, h_out[1] = 0x8000; /* an f16 zero's sign is below its rounding */
    assert_float_equal(check_error(&th, h_out, h_ref), 0x1p-10, 1e-12); /* scale 1 now */
    th.dtype = ASTITCH_BF16; /* bf16 1.0 is 0x3f80; 0x4000 is 2 */
    assert_true(isinf(check_error(&th, h_out, h_ref))); /* not so in bf16 */
    h_ref[1] = h_out[1] = 0x4000;
    h_ref[0] = 0x3f80, h_out[0] = 0x3f81;
    assert_float_equal(check_error(&th, h_out, h_ref), 0x1p-7 / 2, 1e-12);

    int64_t l_ref[2] = {INT64_C(1) << 62, -3}, l_out[2] = {(INT64_C(1) << 62) + 1, -3};
    astitch_tensor_info tl = {.name = "l", .dtype = ASTITCH_I64, .elements = 2};
    assert_true(check_error(&tl, l_out, l_ref) > 0); /* beyond double precision, still seen */
    l_out[0] = l_ref[0];
    assert_true(check_error(&tl, l_out, l_ref) == 0);
    int32_t i_ref[2] = {INT32_MIN, 5}, i_out[2] = {INT32_MAX, 5};
    astitch_tensor_info ti = {.name = "i", .dtype = ASTITCH_I32, .elements = 2};
    assert_float_equal(check_error(&ti, i_out, i_ref), 4294967295.0 / 2147483648.0, 1e-12);
    unsigned char b_ref[3] = {1, 0, 1}, b_out[3] = {1, 0, 0};
    astitch_tensor_info tb = {.name = "b", .dtype = ASTITCH_BOOL, .elements = 3};
    assert_true(check_error(&tb, b_out, b_ref) == 1);
    b_out[2] = 1;
    assert_true(check_error(&tb, b_out, b_ref) == 0);
    astitch_tensor_info te = {.name = "e", .dtype = ASTITCH_F32, .elements = 0};
    assert_true(check_error(&te, NULL, NULL) == 0);
}

/* The conditioned comparison: an element's error less CHECK_SLACK times the reference's own
 * change under perturbation; elements where the reference changes class are not held. */
static void test_check_conditioned(void **state)
{
    (void)state;
    astitch_tensor_info t = {.name = "t", .dtype = ASTITCH_F32, .elements = 3};
    float ref[3] = {0.5f, -0.25f, 0.75f}, out[3] = {0.5f, -0.25f + 0x1p-10f, 0.75f};
    float pert[3] = {0.5f, -0.25f, 0.75f};
    assert_true(check_error(&t, out, ref) == 0x1p-10);
    assert_true(check_error_conditioned(&t, out, ref, pert) == 0x1p-10); /* well conditioned */
    pert[1] = -0.25f + 0x1p-14f; /* slack 8 * 2^-14 = 2^-11 */
    assert_true(check_error_conditioned(&t, out, ref, pert) == 0x1p-11);
    pert[1] = -0.25f - 0x1p-13f; /* slack 2^-10: the whole error */
    assert_true(check_error_conditioned(&t, out, ref, pert) == 0);
    out[2] = 7, pert[2] = NAN; /* the reference itself turns NaN there: no expectation */
    assert_true(check_error_conditioned(&t, out, ref, pert) == 0);
    pert[2] = 0.75f; /* ... but a stable element is held to its tolerance */
    assert_true(check_error_conditioned(&t, out, ref, pert) == 6.25);
    ref[2] = pert[2] = INFINITY, out[2] = -INFINITY;
    assert_true(isinf(check_error_conditioned(&t, out, ref, pert)));

    int32_t i_ref[2] = {3, 4}, i_out[2] = {3, 5}, i_pert[2] = {3, 9};
    astitch_tensor_info ti = {.name = "i", .dtype = ASTITCH_I32, .elements = 2};
    assert_true(check_error_conditioned(&ti, i_out, i_ref, i_pert) == 0.25); /* exact: 1 / 4 */

    float v[64], w[64];
    for (int i = 0; i < 64; i++)
        v[i] = w[i] = ldexpf(i % 2 ? -1.0f : 1.0f, i % 20 - 10); /* moved exactly */
    astitch_tensor_info tv = {.name = "v", .dtype = ASTITCH_F32, .elements = 64};
    check_perturb(&tv, v, 5, 0);
    int up = 0;
    for (int i = 0; i < 64; i++) {
        double rel = ((double)v[i] - w[i]) / w[i];
        assert_true(fabs(fabs(rel) - CHECK_PERTURB) < 1e-3 * CHECK_PERTURB);
        up += rel > 0;
    }
    assert_true(up > 8 && up < 56); /* both directions */
    memcpy(w, v, sizeof v);
    check_perturb(&tv, v, 5, 1); /* another parameter: another stream */
    assert_memory_not_equal(v, w, sizeof v);
    int32_t n[4] = {1, 2, 3, 4};
    ti.elements = 4;
    check_perturb(&ti, n, 5, 0); /* integers stay */
    assert_true(n[0] == 1 && n[3] == 4);
    /* bf16 and f16 move by one ulp of magnitude; zeros, infinities, NaNs stay, and the largest
     * finite value never becomes an infinity */
    uint16_t b[64], c[64];
    for (int i = 0; i < 64; i++)
        b[i] = c[i] = (uint16_t)((i % 2 ? 0x8000 : 0) | (0x3f80 + 3 * i));
    b[0] = c[0] = 0x0000, b[1] = c[1] = 0x7f80, b[2] = c[2] = 0x7fc1, b[3] = c[3] = 0x7f7f;
    astitch_tensor_info tb = {.name = "b", .dtype = ASTITCH_BF16, .elements = 64};
    check_perturb(&tb, b, 5, 0);
    assert_true(b[0] == 0 && b[1] == 0x7f80 && b[2] == 0x7fc1);
    assert_true(b[3] == 0x7f7f || b[3] == 0x7f7e);
    int moved_up = 0;
    for (int i = 4; i < 64; i++) {
        int d = (int)(b[i] & 0x7fff) - (int)(c[i] & 0x7fff);
        assert_true((d == 1 || d == -1) && (b[i] & 0x8000) == (c[i] & 0x8000));
        moved_up += d > 0;
    }
    assert_true(moved_up > 8 && moved_up < 52);
    tb.dtype = ASTITCH_F16;
    b[5] = 0x7bff;
    check_perturb(&tb, b, 7, 0);
    assert_true(b[5] == 0x7bff || b[5] == 0x7bfe);
}

/* astitch-run --check on an ill-conditioned output (sin of a long sum times 3e4: the host's
 * summation order moves it far beyond 1e-4, more than perturbing the inputs moves the
 * reference): the report gives the error beyond the conditioning slack, and the run fails. */
static void test_check_conditioned_run(void **state)
{
    Fixture *fx = *state;
    static const char graph[] =
        "{\"format\": \"astitch-graph\", \"version\": 1, \"nodes\": [\n"
        " {\"name\": \"x\", \"op\": \"parameter\", \"dtype\": \"f32\", \"shape\": [64, 4096]},\n"
        " {\"name\": \"s\", \"op\": \"reduce\", \"kind\": \"sum\", \"inputs\": [\"x\"], \"axes\": [1]},\n"
        " {\"name\": \"k\", \"op\": \"constant\", \"dtype\": \"f32\", \"shape\": [64], \"value\": 30000.0},\n"
        " {\"name\": \"sk\", \"op\": \"mul\", \"inputs\": [\"s\", \"k\"]},\n"
        " {\"name\": \"y\", \"op\": \"sin\", \"inputs\": [\"sk\"]}],\n"
        " \"outputs\": [\"y\"]}\n";
    const char *g = path_in(fx, "ill_conditioned.json");
    write_file(g, graph, sizeof graph - 1);
    Result r = RUN(fx, "--target=host", "--check", g);
    expect(&r, 1, "--check: 1 of 1 outputs differ from the reference beyond the tolerance");
    const char *line = strstr(r.out, "\n  check  error ");
    double err, beyond, tol;
    if (!line || sscanf(line, "\n  check  error %lf, %lf beyond the reference's conditioning "
                              "slack, tolerance %lf: FAIL", &err, &beyond, &tol) != 3)
        fail_msg("no conditioned check line in:\n%s", r.out);
    assert_true(err > 1e-3 && beyond > 1e-4 && beyond <= err && tol == 1e-4);
    result_free(&r);
}

/* The small graph at seed 7: printed outputs and --outputs files agree with each other and
 * with the documented generator. */
static void test_small_graph_outputs(void **state)
{
    Fixture *fx = *state;
    const char *g = write_small_graph(fx);
    const char *dir = path_in(fx, "out7");
    Result r = RUN(fx, "--seed=7", "--outputs", dir, g);
    expect(&r, 0, NULL);
    assert_string_equal(r.err, "");
    assert_non_null(strstr(r.out, "output 0 's' f32[3,5]\n"));
    assert_non_null(strstr(r.out, "output 1 'r' f32[3]\n"));
    assert_non_null(strstr(r.out, "(8 of 15)"));
    assert_non_null(strstr(r.out, "(3 of 3)"));

    float a[15], b[15], s[15];
    for (int i = 0; i < 15; i++) {
        a[i] = (float)(draw(7, 0, i) >> 40) * 0x1p-23f - 1.0f;
        b[i] = (float)(draw(7, 1, i) >> 40) * 0x1p-23f - 1.0f;
        s[i] = a[i] + b[i];
    }
    Npy so = read_npy(path_in(fx, "out7/s.npy")), ro = read_npy(path_in(fx, "out7/r.npy"));
    assert_non_null(strstr(so.header, "'descr': '<f4'"));
    assert_non_null(strstr(so.header, "'shape': (3, 5)"));
    assert_non_null(strstr(ro.header, "'shape': (3,)"));
    assert_int_equal(so.bytes, sizeof s);
    assert_int_equal(ro.bytes, 3 * sizeof(float));
    assert_memory_equal(so.data, s, sizeof s);
    float rv[3];
    memcpy(rv, ro.data, sizeof rv);
    for (int i = 0; i < 3; i++) {
        double want = 0;
        for (int j = 0; j < 5; j++)
            want += s[i * 5 + j];
        assert_float_equal(rv[i], want, 1e-5);
    }

    char text[64];
    output_field(&r, "s", "fnv1a", text, sizeof text);
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < so.bytes; i++)
        h = (h ^ so.data[i]) * UINT64_C(0x100000001b3);
    assert_int_equal(strtoull(text, NULL, 16), h);
    assert_string_equal(text, "3f141e83722767aa"); /* the run shown in docs/astitch-run.md */
    output_field(&r, "r", "sum", text, sizeof text);
    assert_float_equal(strtod(text, NULL), (double)rv[0] + rv[1] + rv[2], 1e-12);
    output_field(&r, "r", "first", text, sizeof text);
    char *end = text;
    for (int i = 0; i < 3; i++)
        assert_float_equal(strtod(end, &end), rv[i], 1e-6 * (1 + fabs(rv[i])));
    free(so.file), free(ro.file);
    result_free(&r);
}

/* A dot's weight is drawn at the documented scale: w (the right operand, K = 8) is the plain
 * draw times 2^-2, x (the left operand) the plain draw. */
static void test_weight_inputs_scaled(void **state)
{
    Fixture *fx = *state;
    static const char graph[] =
        "{\"format\": \"astitch-graph\", \"version\": 1, \"nodes\": [\n"
        "  {\"name\": \"x\", \"op\": \"parameter\", \"dtype\": \"f32\", \"shape\": [2, 8]},\n"
        "  {\"name\": \"w\", \"op\": \"parameter\", \"dtype\": \"f32\", \"shape\": [8, 3]},\n"
        "  {\"name\": \"y\", \"op\": \"dot\", \"inputs\": [\"x\", \"w\"], "
        "\"lhs_contracting_dims\": [1], \"rhs_contracting_dims\": [0]},\n"
        "  {\"name\": \"xo\", \"op\": \"neg\", \"inputs\": [\"x\"]},\n"
        "  {\"name\": \"wo\", \"op\": \"neg\", \"inputs\": [\"w\"]}],\n"
        " \"outputs\": [\"y\", \"xo\", \"wo\"]}\n";
    const char *g = path_in(fx, "weights.json");
    write_file(g, graph, strlen(graph));
    const char *dir = path_in(fx, "weights-out");
    Result r = RUN(fx, "--seed=11", "--outputs", dir, g);
    expect(&r, 0, NULL);
    Npy xo = read_npy(path_in(fx, "weights-out/xo.npy"));
    Npy wo = read_npy(path_in(fx, "weights-out/wo.npy"));
    assert_int_equal(xo.bytes, 16 * sizeof(float));
    assert_int_equal(wo.bytes, 24 * sizeof(float));
    for (int i = 0; i < 24; i++) {
        float got, want = -((float)(draw(11, 1, i) >> 40) * 0x1p-23f - 1.0f) * 0x1p-2f;
        memcpy(&got, wo.data + 4 * i, 4);
        if (got != want)
            fail_msg("w element %d: %.9g, the documented draw gives %.9g", i, -got, -want);
        if (i < 16) {
            want = -((float)(draw(11, 0, i) >> 40) * 0x1p-23f - 1.0f);
            memcpy(&got, xo.data + 4 * i, 4);
            assert_true(got == want);
        }
    }
    free(xo.file), free(wo.file);
    result_free(&r);
}

static void test_seed_determinism(void **state)
{
    Fixture *fx = *state;
    const char *g = write_small_graph(fx);
    Result r1 = RUN(fx, "--seed", "7", g), r2 = RUN(fx, "--seed=0x7", g);
    Result r3 = RUN(fx, "--seed=8", g), d = RUN(fx, g), one = RUN(fx, "--seed=1", g);
    expect(&r1, 0, NULL), expect(&r2, 0, NULL), expect(&r3, 0, NULL);
    expect(&d, 0, NULL), expect(&one, 0, NULL);
    char h1[64], h2[64], h3[64], hd[64], h1s[64];
    output_field(&r1, "s", "fnv1a", h1, sizeof h1);
    output_field(&r2, "s", "fnv1a", h2, sizeof h2);
    output_field(&r3, "s", "fnv1a", h3, sizeof h3);
    output_field(&d, "s", "fnv1a", hd, sizeof hd);
    output_field(&one, "s", "fnv1a", h1s, sizeof h1s);
    assert_string_equal(h1, h2);
    assert_string_not_equal(h1, h3);
    assert_string_equal(hd, h1s);
    assert_string_not_equal(hd, h1);
    result_free(&r1), result_free(&r2), result_free(&r3), result_free(&d), result_free(&one);
}

static const char *const dtypes[] = {"f32", "f16", "bf16", "i32", "i64", "bool"};
#define NDT 6

/* A graph with one [2,3] parameter of every dtype, each reshaped to [3,2] into an output. */
static const char *write_all_dtypes(const Fixture *fx, const char *file, const char *in,
                                    const char *out, const char *in_shape,
                                    const char *out_shape)
{
    char text[4096];
    size_t n = (size_t)snprintf(text, sizeof text,
                                "{\"format\": \"astitch-graph\", \"version\": 1, \"nodes\": [\n");
    for (int i = 0; i < NDT; i++)
        n += (size_t)snprintf(text + n, sizeof text - n,
                              " {\"name\": \"%s_%s\", \"op\": \"parameter\", \"dtype\": \"%s\", "
                              "\"shape\": %s},\n {\"name\": \"%s_%s\", \"op\": \"reshape\", "
                              "\"inputs\": [\"%s_%s\"], \"shape\": %s},\n",
                              in, dtypes[i], dtypes[i], in_shape, out, dtypes[i], in, dtypes[i],
                              out_shape);
    n -= 2; /* the last ",\n" */
    n += (size_t)snprintf(text + n, sizeof text - n, "\n], \"outputs\": [");
    for (int i = 0; i < NDT; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s\"%s_%s\"", i ? ", " : "", out,
                              dtypes[i]);
    snprintf(text + n, sizeof text - n, "]}\n");
    const char *path = path_in(fx, file);
    write_file(path, text, strlen(text));
    return path;
}

/* --view-outputs on a graph whose outputs are all reshapes of its parameters: every output
 * but the first (which is written, so that there is a plan) is named on stderr as a view of its
 * parameter, and every printed value is that of a run without the option. */
static void test_view_outputs(void **state)
{
    Fixture *fx = *state;
    const char *g = write_all_dtypes(fx, "views.json", "p", "v", "[2, 3]", "[3, 2]");
    Result dense = RUN(fx, "--target=host", g);
    Result views = RUN(fx, "--target=host", "--view-outputs", g);
    expect(&dense, 0, NULL), expect(&views, 0, NULL);
    assert_null(strstr(dense.err, "is a view"));
    assert_null(strstr(views.err, "output 0 "));
    for (int i = 0; i < NDT; i++) {
        char name[32], a[64], b[64], note[160];
        snprintf(name, sizeof name, "v_%s", dtypes[i]);
        snprintf(note, sizeof note,
                 "output %d '%s' is a view of input %d 'p_%s' (offset 0, strides 2 1)", i, name,
                 i, dtypes[i]);
        if (i > 0 && !strstr(views.err, note))
            fail_msg("no '%s' in:\n%s", note, views.err);
        output_field(&dense, name, "fnv1a", a, sizeof a);
        output_field(&views, name, "fnv1a", b, sizeof b);
        assert_string_equal(a, b);
    }
    result_free(&dense), result_free(&views);
}

/* Random inputs of every dtype follow the documented generator; --outputs then --inputs
 * carries them through a second graph unchanged. */
static void test_roundtrip_every_dtype(void **state)
{
    Fixture *fx = *state;
    const char *g1 = write_all_dtypes(fx, "dt1.json", "p", "o", "[2, 3]", "[3, 2]");
    const char *g2 = write_all_dtypes(fx, "dt2.json", "o", "q", "[3, 2]", "[2, 3]");
    char d1[512], d2[512];
    snprintf(d1, sizeof d1, "%s", path_in(fx, "dt-out1"));
    snprintf(d2, sizeof d2, "%s", path_in(fx, "dt-out2"));
    uint64_t seed = (uint64_t)time(NULL);
    char seedarg[64];
    snprintf(seedarg, sizeof seedarg, "--seed=%" PRIu64, seed);
    print_message("seed %" PRIu64 "\n", seed);
    Result r1 = RUN(fx, seedarg, "--outputs", d1, g1);
    expect(&r1, 0, NULL);
    Result r2 = RUN(fx, "--inputs", d1, "--outputs", d2, g2);
    expect(&r2, 0, NULL);

    static const char *const descr[NDT] = {"<f4", "<f2", "<u2", "<i4", "<i8", "|b1"};
    static const size_t size[NDT] = {4, 2, 2, 4, 8, 1};
    for (int t = 0; t < NDT; t++) {
        char f1[600], f2[600], want[80];
        snprintf(f1, sizeof f1, "%s/o_%s.npy", d1, dtypes[t]);
        snprintf(f2, sizeof f2, "%s/q_%s.npy", d2, dtypes[t]);
        Npy a = read_npy(f1), b = read_npy(f2);
        snprintf(want, sizeof want, "'descr': '%s'", descr[t]);
        assert_non_null(strstr(a.header, want));
        assert_non_null(strstr(a.header, "(3, 2)"));
        assert_non_null(strstr(b.header, "(2, 3)"));
        assert_int_equal(a.bytes, 6 * size[t]);
        assert_int_equal(b.bytes, a.bytes);
        assert_memory_equal(a.data, b.data, a.bytes);
        int distinct = 0;
        for (int i = 0; i < 6; i++) {
            uint64_t d = draw(seed, t, i);
            double got, expected;
            switch (t) {
            case 0: { float v; memcpy(&v, a.data + 4 * i, 4); got = v;
                      expected = (double)(d >> 40) * 0x1p-23 - 1; break; }
            case 1: { uint16_t v; memcpy(&v, a.data + 2 * i, 2); got = f16_value(v);
                      expected = (double)(d >> 53) * 0x1p-10 - 1; break; }
            case 2: { uint16_t v; memcpy(&v, a.data + 2 * i, 2); got = bf16_value(v);
                      expected = (double)(d >> 56) * 0x1p-7 - 1; break; }
            case 3: { int32_t v; memcpy(&v, a.data + 4 * i, 4); got = v;
                      expected = (double)(d >> 60); break; }
            case 4: { int64_t v; memcpy(&v, a.data + 8 * i, 8); got = (double)v;
                      expected = (double)(d >> 60); break; }
            default: got = a.data[i]; expected = (double)(d >> 63); break;
            }
            if (got != expected)
                fail_msg("%s element %d: %.9g, the generator gives %.9g", dtypes[t], i, got,
                         expected);
            assert_true(got >= (t < 3 ? -1 : 0) && got < (t < 3 ? 1 : t < 5 ? 16 : 2));
            distinct += memcmp(a.data, a.data + i * size[t], size[t]) != 0;
        }
        if (t != 5)
            assert_true(distinct > 0); /* six equal draws would mean a broken generator */
        char h1[64], h2[64], name1[16], name2[16];
        snprintf(name1, sizeof name1, "o_%s", dtypes[t]);
        snprintf(name2, sizeof name2, "q_%s", dtypes[t]);
        output_field(&r1, name1, "fnv1a", h1, sizeof h1);
        output_field(&r2, name2, "fnv1a", h2, sizeof h2);
        assert_string_equal(h1, h2);
        free(a.file), free(b.file);
    }
    result_free(&r1), result_free(&r2);
}

static const char neg_graph[] =
    "{\"format\": \"astitch-graph\", \"version\": 1, \"nodes\": [\n"
    "  {\"name\": \"x\", \"op\": \"parameter\", \"dtype\": \"f32\", \"shape\": [2, 2]},\n"
    "  {\"name\": \"y\", \"op\": \"neg\", \"inputs\": [\"x\"]}], \"outputs\": [\"y\"]}\n";

static void test_single_file_inputs_and_stdin(void **state)
{
    Fixture *fx = *state;
    const char *g = path_in(fx, "neg.json");
    write_file(g, neg_graph, strlen(neg_graph));
    const char *x = path_in(fx, "x.npy");
    float v[4] = {0.5f, -2.25f, 3.0f, 0.125f};
    write_npy(x, "<f4", "(2, 2)", v, sizeof v);
    Result r = RUN(fx, "--inputs", x, g);
    expect(&r, 0, NULL);
    assert_non_null(strstr(r.out, "first  -0.5 2.25 -3 -0.125 (4 of 4)"));
    result_free(&r);
    r = run_program(fx, fx->run, g, (const char *const[]){"--inputs", x, "-", NULL});
    expect(&r, 0, NULL);
    assert_non_null(strstr(r.out, "first  -0.5 2.25 -3 -0.125 (4 of 4)"));
    result_free(&r);
    /* standard input without end: refused at the size files are refused at */
    r = run_program(fx, fx->run, "/dev/zero", (const char *const[]){"-", NULL});
    expect(&r, 2, "standard input: larger than 1073741824 bytes; not a graph");
    result_free(&r);
    /* one file for a graph of two parameters */
    r = RUN(fx, "--inputs", x, write_small_graph(fx));
    expect(&r, 2, "one parameter"), result_free(&r);
}

static void test_bad_input_files_exit_2(void **state)
{
    Fixture *fx = *state;
    const char *g = path_in(fx, "neg.json");
    write_file(g, neg_graph, strlen(neg_graph));
    const char *x = path_in(fx, "bad.npy");
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    struct {
        const char *descr, *shape;
        size_t bytes;
        const char *needle;
    } cases[] = {
        {"<f4", "(2, 3)", 24, "shape (2, 3) does not match parameter 'x' f32[2,2]"},
        {"<f4", "(4,)", 16, "shape (4,) does not match"},
        {"<f8", "(2, 2)", 16, "dtype '<f8' does not match parameter 'x'"},
        {"<f4", "(2, 2)", 12, "truncated: 12 of 16 data bytes"},
        {"<f4", "(2, 2)", 20, "bytes follow"},
        {"<f4", "(2, 2", 16, "malformed .npy header"},
        {"<f4", "(2, -2)", 16, "malformed .npy header"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        write_npy(x, cases[i].descr, cases[i].shape, v, cases[i].bytes);
        Result r = RUN(fx, "--inputs", x, g);
        expect(&r, 2, cases[i].needle);
        result_free(&r);
    }
    write_file(x, "garbage, not numpy", 18);
    Result r = RUN(fx, "--inputs", x, g);
    expect(&r, 2, "not a .npy file"), result_free(&r);
    write_file(x, "", 0);
    r = RUN(fx, "--inputs", x, g);
    expect(&r, 2, "not a .npy file"), result_free(&r);
    write_file(x, "\x93NUMPY", 6); /* the magic and nothing after it */
    r = RUN(fx, "--inputs", x, g);
    expect(&r, 2, "bad.npy: truncated .npy header"), result_free(&r);
    char shape65[256] = "(";
    for (int d = 0; d < 65; d++)
        strcat(shape65, "1, ");
    strcat(shape65, ")");
    write_npy(x, "<f4", shape65, v, 4);
    r = RUN(fx, "--inputs", x, g);
    expect(&r, 2, "'shape' has more than 64 dimensions"), result_free(&r);
    /* a directory without x.npy, one whose name says a file was meant, and a bool that is
     * neither 0 nor 1 */
    const char *dir = path_in(fx, "empty-inputs");
    assert_int_equal(mkdir(dir, 0755), 0);
    r = RUN(fx, "--inputs", dir, g);
    expect(&r, 2, "x.npy: cannot open"), result_free(&r);
    const char *npydir = path_in(fx, "dir.npy");
    assert_int_equal(mkdir(npydir, 0755), 0);
    r = RUN(fx, "--inputs", npydir, g);
    expect(&r, 2, "dir.npy is a directory, read as one holding <parameter>.npy files"),
        result_free(&r);
    const char *bg = path_in(fx, "bool.json");
    const char bool_graph[] =
        "{\"format\": \"astitch-graph\", \"version\": 1, \"nodes\": [\n"
        " {\"name\": \"p\", \"op\": \"parameter\", \"dtype\": \"bool\", \"shape\": [3]},\n"
        " {\"name\": \"n\", \"op\": \"not\", \"inputs\": [\"p\"]}], \"outputs\": [\"n\"]}\n";
    write_file(bg, bool_graph, strlen(bool_graph));
    unsigned char bits[3] = {1, 7, 0};
    write_npy(x, "|b1", "(3,)", bits, 3);
    r = RUN(fx, "--inputs", x, bg);
    expect(&r, 2, "element 1 is 7, not a bool"), result_free(&r);
    bits[1] = 0;
    write_npy(x, "|b1", "(3,)", bits, 3);
    r = RUN(fx, "--inputs", x, bg);
    expect(&r, 0, NULL);
    assert_non_null(strstr(r.out, "first  false true true (3 of 3)"));
    result_free(&r);
}

static void test_empty_tensors(void **state)
{
    Fixture *fx = *state;
    const char text[] =
        "{\"format\": \"astitch-graph\", \"version\": 1, \"nodes\": [\n"
        " {\"name\": \"x\", \"op\": \"parameter\", \"dtype\": \"f32\", \"shape\": [0, 4]},\n"
        " {\"name\": \"s\", \"op\": \"reduce\", \"kind\": \"sum\", \"inputs\": [\"x\"], "
        "\"axes\": [0]},\n"
        " {\"name\": \"t\", \"op\": \"neg\", \"inputs\": [\"x\"]}], \"outputs\": [\"s\", "
        "\"t\"]}\n";
    const char *g = path_in(fx, "empty.json");
    write_file(g, text, strlen(text));
    const char *dir = path_in(fx, "empty-out");
    Result r = RUN(fx, "--outputs", dir, g);
    expect(&r, 0, NULL);
    assert_non_null(strstr(r.out, "output 0 's' f32[4]\n  sum    0\n"));
    assert_non_null(strstr(r.out, "first  0 0 0 0 (4 of 4)"));
    assert_non_null(strstr(r.out, "output 1 't' f32[0,4]\n"));
    assert_non_null(strstr(r.out, "first  (none)"));
    Npy t = read_npy(path_in(fx, "empty-out/t.npy"));
    assert_non_null(strstr(t.header, "'shape': (0, 4)"));
    assert_int_equal(t.bytes, 0);
    free(t.file);
    result_free(&r);
}

/* Every file of tests/malformed/ listed in its EXPECT file (FILENAME<TAB>substring) exits 2
 * with a message holding the substring. */
static void test_malformed_corpus(void **state)
{
    Fixture *fx = *state;
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    assert_non_null(root);
    char dir[1024], path[2048];
    snprintf(dir, sizeof dir, "%s/tests/malformed", root);
    snprintf(path, sizeof path, "%s/EXPECT", dir);
    char *list = read_all(path, NULL);
    if (!list) {
        print_message("no %s: corpus not checked\n", path);
        skip();
    }
    int checked = 0, failed = 0;
    for (char *line = strtok(list, "\n"); line; line = strtok(NULL, "\n")) {
        char *tab = strchr(line, '\t');
        if (!*line || *line == '#')
            continue;
        if (!tab)
            fail_msg("EXPECT line without a tab: %s", line);
        *tab = '\0';
        snprintf(path, sizeof path, "%s/%s", dir, line);
        Result r = RUN(fx, path);
        if (r.status != 2 || !strstr(r.err, tab + 1) || strncmp(r.err, "astitch-run: ", 13)) {
            print_error("%s: exit %d, expected 2 and '%s'; stderr: %s\n", line, r.status,
                        tab + 1, r.err);
            failed++;
        }
        checked++;
        result_free(&r);
    }
    free(list);
    print_message("%d malformed graphs checked\n", checked);
    assert_int_equal(failed, 0);
    assert_true(checked >= 40);
}

/* The README's example prints the row softmax of {1, 2, 3} and {-1, 0, 1}. */
static void test_api_example(void **state)
{
    Fixture *fx = *state;
    const char *prog = getenv("ASTITCH_API_EXAMPLE");
    assert_non_null(prog);
    Result r = run_program(fx, prog, NULL, (const char *const[]){NULL});
    if (r.status != 0)
        fail_msg("api_example exit %d: %s", r.status, r.err);
    const double rows[2][3] = {{1, 2, 3}, {-1, 0, 1}};
    char *p = r.out;
    for (int i = 0; i < 2; i++) {
        double m = fmax(rows[i][0], fmax(rows[i][1], rows[i][2])), s = 0;
        for (int j = 0; j < 3; j++)
            s += exp(rows[i][j] - m);
        for (int j = 0; j < 3; j++) {
            char *end;
            double got = strtod(p, &end);
            assert_true(end != p);
            p = end;
            assert_float_equal(got, exp(rows[i][j] - m) / s, 2e-6);
        }
    }
    result_free(&r);
}

/* README.md shows examples/api_example.c without its first (comment) line, and both commands
 * of its "Getting started" name files that exist. */
static void test_readme_matches_example(void **state)
{
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    assert_non_null(root);
    char path[1024];
    snprintf(path, sizeof path, "%s/README.md", root);
    char *readme = read_all(path, NULL);
    snprintf(path, sizeof path, "%s/examples/api_example.c", root);
    char *example = read_all(path, NULL);
    assert_non_null(readme);
    assert_non_null(example);
    char *block = strstr(readme, "```c\n");
    assert_non_null(block);
    block += 5;
    char *end = strstr(block, "```");
    assert_non_null(end);
    *end = '\0';
    const char *body = strchr(example, '\n');
    assert_non_null(body);
    assert_string_equal(block, body + 1);
    const char *named[] = {"tools/install-deps.sh", "tools/run-tests.sh", "examples/layernorm.json",
                           ".ci/run", "docs/astitch-run.md"};
    for (size_t i = 0; i < sizeof named / sizeof *named; i++) {
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", root, named[i]);
        if (stat(path, &st) != 0)
            fail_msg("README names %s, which does not exist", named[i]);
        if (strstr(named[i], ".sh") || strstr(named[i], "/run"))
            assert_true(st.st_mode & S_IXUSR);
    }
    free(readme);
    free(example);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_usage_errors_exit_2),
        cmocka_unit_test(test_help_and_version),
        cmocka_unit_test(test_targets),
        cmocka_unit_test(test_check_host),
        cmocka_unit_test(test_cuda_without_driver),
        cmocka_unit_test(test_emit),
        cmocka_unit_test(test_check_error),
        cmocka_unit_test(test_check_conditioned),
        cmocka_unit_test(test_check_conditioned_run),
        cmocka_unit_test(test_check_output_tolerance),
        cmocka_unit_test(test_check_input_scale_exponent),
        cmocka_unit_test(test_small_graph_outputs),
        cmocka_unit_test(test_weight_inputs_scaled),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_view_outputs),
        cmocka_unit_test(test_roundtrip_every_dtype),
        cmocka_unit_test(test_single_file_inputs_and_stdin),
        cmocka_unit_test(test_bad_input_files_exit_2),
        cmocka_unit_test(test_empty_tensors),
        cmocka_unit_test(test_malformed_corpus),
        cmocka_unit_test(test_api_example),
        cmocka_unit_test(test_readme_matches_example),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
