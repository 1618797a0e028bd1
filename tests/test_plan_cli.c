/*
 * test_plan_cli.c: astitch-run --plan, --dot, --device and --fusion from the outside, on the
 * paper's Figure 7 (examples/fig7_subgraph.json).
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

/* Runs astitch-run with args on examples/fig7_subgraph.json; returns its exit status and its
 * standard output in *out (malloc'd). */
static int run(const char *args, char **out)
{
    const char *prog = getenv("ASTITCH_RUN"), *root = getenv("ASTITCH_SOURCE_ROOT");
    if (!prog || !root)
        fail_msg("ASTITCH_RUN and ASTITCH_SOURCE_ROOT must be set");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s' %s '%s/examples/fig7_subgraph.json' 2>/dev/null", prog, args,
             root);
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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
