/* compile_clock.c: the calling thread's compile clock (compile_clock.h). */
#include <string.h>
#include <time.h>

#include "compile_clock.h"

static _Thread_local astitch_compile_times *running;
static _Thread_local double started;

double compile_clock_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

void compile_clock_start(astitch_compile_times *t)
{
    memset(t, 0, sizeof *t);
    running = t;
    started = compile_clock_now();
}

void compile_clock_stop(astitch_compile_times *t)
{
    if (running == t) {
        t->total_ms = compile_clock_now() - started;
        running = NULL;
    }
}

void compile_clock_add(ClockPart part, double since)
{
    if (!running)
        return;
    double ms = compile_clock_now() - since;
    if (part == CLOCK_PLAN)
        running->plan_ms += ms;
    else if (part == CLOCK_PTX)
        running->ptx_ms += ms;
    else
        running->load_ms += ms;
}

void compile_clock_module(bool jit)
{
    if (running && jit)
        running->jit_modules++;
    else if (running)
        running->ahead_modules++;
}

astitch_status clocked_plan_create(astitch_graph *g, const astitch_device *dev,
                                   const astitch_plan_options *po, astitch_plan **out)
{
    double t = compile_clock_now();
    astitch_status s = astitch_plan_create(g, dev, po, out);
    compile_clock_add(CLOCK_PLAN, t);
    return s;
}
