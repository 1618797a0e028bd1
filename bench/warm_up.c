/* warm_up.c: the one-time set-up of a benchmark's process (warm_up.h). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "warm_up.h"

/* A layer norm over [4, 48], named so that no suite graph shares its compile-cache key. */
static const char graph_json[] =
    "{\"format\": \"astitch-graph\", \"version\": 1, \"name\": \"bench_warm_up\", \"nodes\": ["
    "{\"name\": \"x\", \"op\": \"parameter\", \"dtype\": \"f32\", \"shape\": [4, 48]},"
    "{\"name\": \"n\", \"op\": \"constant\", \"dtype\": \"f32\", \"shape\": [], \"value\": 48.0},"
    "{\"name\": \"n.b\", \"op\": \"broadcast_in_dim\", \"inputs\": [\"n\"], \"shape\": [4],"
    " \"broadcast_dimensions\": []},"
    "{\"name\": \"sum\", \"op\": \"reduce\", \"kind\": \"sum\", \"inputs\": [\"x\"],"
    " \"axes\": [1]},"
    "{\"name\": \"mean\", \"op\": \"div\", \"inputs\": [\"sum\", \"n.b\"]},"
    "{\"name\": \"mean.b\", \"op\": \"broadcast_in_dim\", \"inputs\": [\"mean\"],"
    " \"shape\": [4, 48], \"broadcast_dimensions\": [0]},"
    "{\"name\": \"c\", \"op\": \"sub\", \"inputs\": [\"x\", \"mean.b\"]},"
    "{\"name\": \"sq\", \"op\": \"mul\", \"inputs\": [\"c\", \"c\"]},"
    "{\"name\": \"sqsum\", \"op\": \"reduce\", \"kind\": \"sum\", \"inputs\": [\"sq\"],"
    " \"axes\": [1]},"
    "{\"name\": \"var\", \"op\": \"div\", \"inputs\": [\"sqsum\", \"n.b\"]},"
    "{\"name\": \"rstd\", \"op\": \"rsqrt\", \"inputs\": [\"var\"]},"
    "{\"name\": \"rstd.b\", \"op\": \"broadcast_in_dim\", \"inputs\": [\"rstd\"],"
    " \"shape\": [4, 48], \"broadcast_dimensions\": [0]},"
    "{\"name\": \"y\", \"op\": \"mul\", \"inputs\": [\"c\", \"rstd.b\"]}"
    "], \"outputs\": [\"y\"]}";

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int bench_warm_up(astitch_target t, BenchWarmUp *w, char *err, size_t len)
{
    memset(w, 0, sizeof *w);
    if (astitch_context_create(&w->ctx) != ASTITCH_OK) {
        snprintf(err, len, "warm-up: cannot create a context");
        return -1;
    }
    astitch_compile_options co;
    astitch_compile_options_default(&co);
    co.target = t;
    double t0 = now_ms();
    if (astitch_graph_read_json(w->ctx, graph_json, sizeof graph_json - 1, "bench warm-up",
                                &w->g) != ASTITCH_OK ||
        astitch_compile(w->g, &co, &w->x) != ASTITCH_OK) {
        snprintf(err, len, "warm-up: %s", astitch_last_error(w->ctx));
        bench_warm_up_end(w);
        return -1;
    }
    w->ms = now_ms() - t0;
    return 0;
}

void bench_warm_up_end(BenchWarmUp *w)
{
    astitch_executable_destroy(w->x);
    astitch_graph_destroy(w->g);
    astitch_context_destroy(w->ctx);
    memset(w, 0, sizeof *w);
}
