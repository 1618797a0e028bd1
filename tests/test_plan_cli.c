/*
 * test_plan_cli.c: astitch-run --plan, --dot, --device, --fusion and the planner switches
 * (--no-remote, --no-merge, --no-packing, --deterministic) from the outside, on the paper's
 * Figure 7 (examples/fig7_subgraph.json) and the 64x30000 row reduce
 * (examples/transformer_row_reduce.json).
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* Runs astitch-run with args on examples/<example>; returns its exit status and its standard
 * output in *out (malloc'd). */
static int run_on(const char *example, const char *args, char **out)
{
    const char *prog = getenv("ASTITCH_RUN"), *root = getenv("ASTITCH_SOURCE_ROOT");
    if (!prog || !root)
        fail_msg("ASTITCH_RUN and ASTITCH_SOURCE_ROOT must be set");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s '%s/examples/%s' 2>/dev/null", prog, args, root, example);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap + 1);
    assert_non_null(buf);
    size_t n;
    while ((n = fread(buf + len, 1, cap - len, p)) > 0) {
        len += n;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            assert_non_null(buf);
        }
    }
    buf[len] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* run_on examples/fig7_subgraph.json. */
static int run(const char *args, char **out) { return run_on("fig7_subgraph.json", args, out); }

/* The plan astitch-run --plan=json prints for examples/<example> with args; it must succeed. */
static json_t *plan_json(const char *example, const char *args)
{
    char cmd[1024], *out;
    snprintf(cmd, sizeof cmd, "--plan=json %s", args);
    assert_int_equal(run_on(example, cmd, &out), 0);
    json_error_t err;
    json_t *j = json_loads(out, 0, &err);
    if (!j)
        fail_msg("astitch-run %s: not JSON: %s", cmd, err.text);
    free(out);
    return j;
}

/* The largest mapping.split of any group or phase of any kernel of plan j. */
static int64_t max_split(const json_t *j)
{
    int64_t most = 0;
    size_t i, q;
    json_t *k, *e;
    json_array_foreach(json_object_get(j, "kernels"), i, k) {
        const char *lists[] = {"groups", "phases"};
        for (int l = 0; l < 2; l++)
            json_array_foreach(json_object_get(k, lists[l]), q, e) {
                json_t *split = json_object_get(json_object_get(e, "mapping"), "split");
                assert_true(json_is_integer(split));
                if (json_integer_value(split) > most)
                    most = json_integer_value(split);
            }
    }
    return most;
}

/* The planner switches of astitch-run, alone and together, and what the plan says of them: the
 * text plan's first line and the JSON "options" object. */
static const struct {
    const char *args;
    bool remote, merge, packing, deterministic;
    const char *line; /* the end of the text plan's first line */
} switch_cases[] = {
    {"", true, true, true, false, "fusion stitch, remote on, merge on, packing on\n"},
    {"--no-remote", false, true, true, false, "fusion stitch, remote off, merge on, packing on\n"},
    {"--no-merge", true, false, true, false, "fusion stitch, remote on, merge off, packing on\n"},
    {"--no-packing", true, true, false, false, "fusion stitch, remote on, merge on, packing off\n"},
    {"--deterministic", true, true, true, true,
     "fusion stitch, remote on, merge on, packing on, deterministic\n"},
    {"--no-remote --no-merge --no-packing --deterministic", false, false, false, true,
     "fusion stitch, remote off, merge off, packing off, deterministic\n"},
    {"--no-transpose-tiles", true, true, true, false,
     "fusion stitch, remote on, merge on, packing on, transpose tiles off\n"},
};

static void plan_switches_text(void **state)
{
    for (size_t c = 0; c < sizeof switch_cases / sizeof *switch_cases; c++) {
        char args[256], *out;
        snprintf(args, sizeof args, "--plan %s", switch_cases[c].args);
        assert_int_equal(run(args, &out), 0);
        char *nl = strchr(out, '\n');
        assert_non_null(nl);
        size_t len = (size_t)(nl + 1 - out), want = strlen(switch_cases[c].line);
        if (len < want || strncmp(nl + 1 - want, switch_cases[c].line, want) != 0)
            fail_msg("astitch-run %s: first line %.*s", args, (int)len, out);
        free(out);
    }
}

static void plan_switches_json(void **state)
{
    for (size_t c = 0; c < sizeof switch_cases / sizeof *switch_cases; c++) {
        json_t *j = plan_json("fig7_subgraph.json", switch_cases[c].args);
        json_t *o = json_object_get(j, "options");
        assert_string_equal(json_string_value(json_object_get(o, "fusion")), "stitch");
        const char *keys[] = {"remote", "merge", "packing", "deterministic"};
        bool want[] = {switch_cases[c].remote, switch_cases[c].merge, switch_cases[c].packing,
                       switch_cases[c].deterministic};
        for (int i = 0; i < 4; i++) {
            json_t *v = json_object_get(o, keys[i]);
            if (!json_is_boolean(v) || json_is_true(v) != want[i])
                fail_msg("astitch-run --plan=json %s: options.%s is not %s", switch_cases[c].args,
                         keys[i], want[i] ? "true" : "false");
        }
        json_decref(j);
    }
}

/* --no-packing reaches the planner: 64 rows of 30000 are split across blocks by default (fewer
 * rows than blocks per wave), never without packing. */
static void no_packing_no_split(void **state)
{
    json_t *packed = plan_json("transformer_row_reduce.json", "");
    json_t *plain = plan_json("transformer_row_reduce.json", "--no-packing");
    assert_true(max_split(packed) > 1);
    assert_int_equal(max_split(plain), 1);
    json_decref(packed);
    json_decref(plain);
}

/* --deterministic reaches the planner: Figure 7's split reduce.2 combines with atomics into its
 * zero-initialized output by default, in order through a PARTIAL buffer with the switch. */
static void deterministic_partial(void **state)
{
    const char *args[] = {"", "--deterministic"};
    for (int d = 0; d < 2; d++) {
        json_t *j = plan_json("fig7_subgraph.json", args[d]);
        json_t *k = json_array_get(json_object_get(j, "kernels"), 0), *e;
        size_t i;
        int zero_init = -1, partial = 0;
        json_array_foreach(json_object_get(k, "ops"), i, e)
            if (strcmp(json_string_value(json_object_get(e, "node")), "reduce.2") == 0)
                zero_init = json_is_true(json_object_get(e, "zero_init"));
        json_array_foreach(json_object_get(k, "buffers"), i, e)
            partial += strcmp(json_string_value(json_object_get(e, "kind")), "partial") == 0;
        assert_int_equal(zero_init, !d);
        assert_int_equal(partial, d);
        json_decref(j);
    }
}

static void plan_text(void **state)
{
    char *out;
    assert_int_equal(run("--plan --device=v100", &out), 0);
    assert_non_null(strstr(out, "device v100"));
    assert_non_null(strstr(out, "kernel stitch.0:"));
    assert_null(strstr(out, "kernel stitch.1:"));
    assert_null(strstr(out, "output 0")); /* planned, not run */
    free(out);
}

static void plan_json_xla(void **state)
{
    char *out;
    assert_int_equal(run("--plan=json --fusion=xla --device=a100", &out), 0);
    json_error_t err;
    json_t *j = json_loads(out, 0, &err);
    if (!j)
        fail_msg("not JSON: %s", err.text);
    assert_int_equal(json_array_size(json_object_get(j, "kernels")), 4);
    assert_string_equal(json_string_value(json_object_get(json_object_get(j, "options"), "fusion")),
                        "xla");
    json_decref(j);
    free(out);
}

static void dot_file(void **state)
{
    char path[] = "/tmp/astitch-plan-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    char args[256], *out;
    snprintf(args, sizeof args, "--dot='%s' --fusion=none", path);
    assert_int_equal(run(args, &out), 0);
    free(out);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char text[1 << 14];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(path);
    assert_int_equal(strncmp(text, "digraph plan {", 14), 0);
    assert_non_null(strstr(text, "subgraph cluster_7")); /* eight kernels under none */
    assert_null(strstr(text, "subgraph cluster_8"));
}

static void bad_flags(void **state)
{
    char *out;
    assert_int_equal(run("--plan --device=tpu", &out), 2);
    free(out);
    assert_int_equal(run("--plan=xml", &out), 2);
    free(out);
    assert_int_equal(run("--plan --fusion=tvm", &out), 2);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_text),
        cmocka_unit_test(plan_json_xla),
        cmocka_unit_test(dot_file),
        cmocka_unit_test(bad_flags),
        cmocka_unit_test(plan_switches_text),
        cmocka_unit_test(plan_switches_json),
        cmocka_unit_test(no_packing_no_split),
        cmocka_unit_test(deterministic_partial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
