/*
 * run_plan.c: astitch-run --plan and --dot: plan the graph for a device model and fusion mode
 * and print the plan (text or JSON) and/or write its Graphviz picture, without running it.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "astitch/plan.h"
#include "run.h"

int run_plan(astitch_context *ctx, astitch_graph *g, const Options *o)
{
    astitch_device dev;
    if (astitch_device_builtin(o->device, &dev) != ASTITCH_OK) {
        run_fail("unknown device model '%s' (expected h100, a100, v100 or host)", o->device);
        return EXIT_USAGE;
    }
    astitch_plan_options po;
    astitch_plan_options_default(&po);
    if (astitch_fusion_from_name(o->fusion, &po.fusion) != ASTITCH_OK) {
        run_fail("unknown fusion mode '%s' (expected none, xla or stitch)", o->fusion);
        return EXIT_USAGE;
    }
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
