/* test_malformed.c: every file of tests/malformed/ is refused with a message naming the problem.
 *
 * tests/malformed/EXPECT has one line per file: NAME<TAB>text the message must contain. Each
 * file must fail to load, leave no graph, and give "PATH:LINE:COL: ..." with that text; the
 * same bytes read from memory without a source name give "<graph>:LINE:COL: ...". Every file
 * of the folder must be listed, and the corpus holds at least 45 files. */
#include <ctype.h>
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "astitch/astitch.h"

typedef struct Case {
    char path[1280];
    char name[512];
    char want[512];
} Case;

/* True when msg starts with prefix, then ":LINE:COL: " with positive numbers. */
static bool has_position(const char *msg, const char *prefix)
{
    size_t n = strlen(prefix);
    if (strncmp(msg, prefix, n) != 0)
        return false;
    const char *p = msg + n;
    for (int field = 0; field < 2; field++) {
        if (*p++ != ':' || !isdigit((unsigned char)*p) || *p == '0')
            return false;
        while (isdigit((unsigned char)*p))
            p++;
    }
    return p[0] == ':' && p[1] == ' ';
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    *len = n;
    return buf;
}

static void test_file(void **state)
{
    const Case *c = *state;
    astitch_context *ctx;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    astitch_graph *g = (astitch_graph *)ctx; /* must be reset to NULL */
    astitch_status s = astitch_graph_load_json(ctx, c->path, &g);
    const char *msg = astitch_last_error(ctx);
    if (s == ASTITCH_OK)
        fail_msg("%s: loaded, but must be refused", c->name);
    assert_null(g);
    if (s == ASTITCH_ERR_INTERNAL || s == ASTITCH_ERR_IO)
        fail_msg("%s: status %s: %s", c->name, astitch_status_name(s), msg);
    if (!strstr(msg, c->want))
        fail_msg("%s: message '%s' does not contain '%s'", c->name, msg, c->want);
    if (!has_position(msg, c->path))
        fail_msg("%s: message '%s' lacks 'PATH:LINE:COL: '", c->name, msg);

    size_t len = 0;
    char *text = slurp(c->path, &len);
    assert_non_null(text);
    assert_int_equal(astitch_graph_read_json(ctx, text, len, NULL, &g), s);
    assert_null(g);
    msg = astitch_last_error(ctx);
    if (!strstr(msg, c->want) || !has_position(msg, "<graph>"))
        fail_msg("%s: from memory, message '%s' lacks '<graph>:LINE:COL: ' or '%s'", c->name,
                 msg, c->want);
    free(text);
    astitch_context_destroy(ctx);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Fails unless the folder's files (besides EXPECT) are exactly those listed. */
static void test_all_listed(void **state)
{
    const Case *cases = *state;
    int ncase = 0;
    while (cases[ncase].name[0])
        ncase++;
    assert_true(ncase >= 45);
    const char *dir = cases[ncase].path; /* the sentinel holds the folder */
    DIR *d = opendir(dir);
    assert_non_null(d);
    int nfile = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "EXPECT") == 0)
            continue;
        bool found = false;
        for (int i = 0; i < ncase && !found; i++)
            found = strcmp(cases[i].name, e->d_name) == 0;
        if (!found)
            fail_msg("%s/%s is not listed in EXPECT", dir, e->d_name);
        nfile++;
    }
    closedir(d);
    assert_int_equal(nfile, ncase);
    /* no name listed twice */
    assert_true(ncase <= 1024);
    char *names[1024];
    for (int i = 0; i < ncase; i++)
        names[i] = (char *)cases[i].name;
    qsort(names, (size_t)ncase, sizeof *names, by_name);
    for (int i = 1; i < ncase; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            fail_msg("%s is listed twice in EXPECT", names[i]);
}

int main(void)
{
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    if (!root) {
        fprintf(stderr, "ASTITCH_SOURCE_ROOT is not set\n");
        return 1;
    }
    char dir[700], expect[800], line[512];
    snprintf(dir, sizeof dir, "%s/tests/malformed", root);
    snprintf(expect, sizeof expect, "%s/EXPECT", dir);
    FILE *f = fopen(expect, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", expect);
        return 1;
    }
    int n = 0, cap = 64;
    Case *cases = calloc((size_t)cap + 1, sizeof *cases);
    struct CMUnitTest *tests = calloc((size_t)cap + 1, sizeof *tests);
    while (cases && tests && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        char *tab = strchr(line, '\t');
        if (!tab || tab == line || !tab[1]) {
            fprintf(stderr, "%s: bad line '%s'\n", expect, line);
            return 1;
        }
        *tab = '\0';
        if (n == cap) {
            cap *= 2;
            cases = realloc(cases, ((size_t)cap + 1) * sizeof *cases);
            tests = realloc(tests, ((size_t)cap + 1) * sizeof *tests);
            if (!cases || !tests)
                break;
        }
        Case *c = &cases[n];
        snprintf(c->name, sizeof c->name, "%s", line);
        snprintf(c->path, sizeof c->path, "%s/%s", dir, line);
        snprintf(c->want, sizeof c->want, "%s", tab + 1);
        n++;
    }
    fclose(f);
    if (!cases || !tests) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    memset(&cases[n], 0, sizeof cases[n]);
    snprintf(cases[n].path, sizeof cases[n].path, "%s", dir);
    for (int i = 0; i < n; i++) /* cases moved while growing: point at them only now */
        tests[i] = (struct CMUnitTest){.name = cases[i].name, .test_func = test_file,
                                       .initial_state = &cases[i]};
    tests[n] = (struct CMUnitTest){.name = "every file is listed", .test_func = test_all_listed,
                                   .initial_state = cases};
    int failed = _cmocka_run_group_tests("malformed", tests, (size_t)n + 1, NULL, NULL);
    free(cases);
    free(tests);
    return failed;
}
