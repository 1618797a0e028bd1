/*
 * compile_clock.h: where the calling thread's compile time goes (astitch_compile_times).
 * astitch_compile starts a clock on its thread; the steps below add their wall time to it
 * while it runs, and do nothing otherwise (a run's loads, another thread's compiles).
 */
#ifndef ASTITCH_COMPILE_CLOCK_H
#define ASTITCH_COMPILE_CLOCK_H

#include "astitch/plan.h"
#include "astitch/runtime.h"

typedef enum ClockPart {
    CLOCK_PLAN, /* astitch_plan_create */
    CLOCK_PTX,  /* a plan to PTX (LLVM), a compile-cache miss; the wait for helpers doing so */
    CLOCK_LOAD  /* PTX to a loaded module: the driver's JIT, or waiting for a cubin ahead */
} ClockPart;

/* Milliseconds of a monotonic clock. */
double compile_clock_now(void);
/* Zeroes *t and makes it this thread's clock until compile_clock_stop. */
void compile_clock_start(astitch_compile_times *t);
/* Sets t->total_ms from the start and ends this thread's clock. */
void compile_clock_stop(astitch_compile_times *t);
/* Adds the time since `since` (compile_clock_now) to part of this thread's clock, if any. */
void compile_clock_add(ClockPart part, double since);
/* Counts a module loaded in this thread: compiled by the driver's JIT here (jit), else a
 * cubin compiled ahead or by nvJitLink. */
void compile_clock_module(bool jit);

/* astitch_plan_create, its time added to CLOCK_PLAN. */
astitch_status clocked_plan_create(astitch_graph *g, const astitch_device *dev,
                                   const astitch_plan_options *po, astitch_plan **out);

#endif
