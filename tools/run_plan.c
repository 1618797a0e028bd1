/*
 * run_plan.c: astitch-run --plan, --dot and --emit: plan the graph for a device model and fusion
 * mode and print the plan (text or JSON), write its Graphviz picture, or write the code the
 * compiler generates for it, without running it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

int run_plan(astitch_context *ctx, astitch_graph *g, const Options *o)
{
    astitch_device dev;
    if (o->has_device)
        dev = o->device;
    else
        astitch_device_builtin("h100", &dev);
    astitch_plan_options po;
    plan_options(o, &po);
    astitch_plan *p;
    if (astitch_plan_create(g, &dev, &po, &p) != ASTITCH_OK) {
        run_fail("plan: %s", astitch_last_error(ctx));
        return EXIT_RUNTIME;
    }
    int rc = 0;
    if (o->plan) {
        astitch_status s = strcmp(o->plan, "json") == 0 ? astitch_plan_write_json(p, stdout)
                                                        : astitch_plan_write_text(p, stdout);
        if (s != ASTITCH_OK || fflush(stdout) != 0) {
            run_fail("cannot write the plan to standard output");
            rc = EXIT_RUNTIME;
        }
    }
    if (!rc && o->dot) {
        FILE *f = fopen(o->dot, "w");
        if (!f) {
            run_fail("--dot %s: %s", o->dot, strerror(errno));
            rc = EXIT_RUNTIME;
        } else {
            astitch_status s = astitch_plan_write_dot(p, f);
            if (fclose(f) != 0 || s != ASTITCH_OK) {
                run_fail("--dot %s: write failed", o->dot);
                rc = EXIT_RUNTIME;
            }
        }
    }
    astitch_plan_destroy(p);
    return rc;
}

int run_emit(astitch_context *ctx, astitch_graph *g, const Options *o)
{
    astitch_compile_options co;
    compile_options(o, &co);
    char *text = NULL;
    if (astitch_emit(g, &co, o->emit, &text) != ASTITCH_OK) {
        run_fail("--emit=%s: %s", o->emit, astitch_last_error(ctx));
        return EXIT_RUNTIME;
    }
    FILE *f = o->emit_file ? fopen(o->emit_file, "w") : stdout;
    if (!f) {
        run_fail("--emit-file %s: %s", o->emit_file, strerror(errno));
        astitch_free(text);
        return EXIT_USAGE;
    }
    size_t len = strlen(text);
    bool ok = fwrite(text, 1, len, f) == len;
    ok = (f == stdout ? fflush(f) : fclose(f)) == 0 && ok;
    astitch_free(text);
    if (!ok) {
        run_fail("cannot write the generated code to %s",
                 o->emit_file ? o->emit_file : "standard output");
        return EXIT_RUNTIME;
    }
    return 0;
}
