/* piece.h: what the codegen piece tests share (test_codegen_pieces.c, test_codegen_redzones.c):
 * a small graph under construction, compiled for the host target under fusion=stitch, and run
 * against the reference interpreter on fresh random inputs. */
#ifndef ASTITCH_TESTS_PIECE_H
#define ASTITCH_TESTS_PIECE_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "diff_check.h"
#include "passes/passes.h"
#include "runtime/runtime.h"

/* One test: the graph under construction and its plan. */
typedef struct Piece {
    astitch_context *ctx;
    astitch_graph *g;
    astitch_executable *x;
    const astitch_plan *plan;
} Piece;

static inline void piece_begin(Piece *t)
{
    *t = (Piece){0};
    assert_int_equal(astitch_context_create(&t->ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(t->ctx, &t->g), ASTITCH_OK);
}

/* Verifies and compiles the graph for the host target under fusion=stitch, with packing (and
 * so resident rows) on or off, every kernel persistent or not, planned for the device model
 * `device` (NULL: the host's). */
static inline void piece_compile_with(Piece *t, bool packing, bool persistent, const char *device)
{
    if (astitch_graph_verify(t->g) != ASTITCH_OK)
        fail_msg("verify: %s", astitch_last_error(t->ctx));
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_HOST;
    o.plan.packing = packing;
    o.plan.persistent = persistent;
    astitch_device model;
    if (device) {
        assert_int_equal(astitch_device_builtin(device, &model), ASTITCH_OK);
        o.device = &model;
    }
    if (astitch_compile(t->g, &o, &t->x) != ASTITCH_OK)
        fail_msg("compile: %s", astitch_last_error(t->ctx));
    t->plan = astitch_executable_plan(t->x);
    assert_non_null(t->plan);
}

static inline void piece_compile_packing(Piece *t, bool packing)
{
    piece_compile_with(t, packing, false, NULL);
}
static inline void piece_compile(Piece *t) { piece_compile_packing(t, true); }

/* Frees t's executable, graph and context. */
static inline void piece_end(Piece *t)
{
    astitch_executable_destroy(t->x);
    astitch_graph_destroy(t->g);
    astitch_context_destroy(t->ctx);
}

/* Runs the kernels on fresh random inputs against the reference, then frees everything. */
static inline void piece_check_and_end(Piece *t, const char *what)
{
    uint64_t seed = diff_fresh_seed();
    DiffRef *d = NULL;
    if (diff_ref_create(t->g, seed, true, &d) != ASTITCH_OK)
        fail_msg("%s: reference: %s", what, astitch_last_error(t->ctx));
    DiffResult r;
    astitch_status s = diff_ref_check(d, t->x, &r);
    printf("%s: seed %llu, worst normalized error %.3g\n", what, (unsigned long long)seed,
           r.worst);
    if (s != ASTITCH_OK)
        fail_msg("%s: run: %s", what, astitch_last_error(t->ctx));
    if (!r.ok)
        fail_msg("%s (seed %llu): %s", what, (unsigned long long)seed, r.message);
    diff_ref_destroy(d);
    piece_end(t);
}


/* x [rows] broadcast along the columns of a matrix of shape dims. */
static inline astitch_node broadcast_rows(astitch_graph *g, astitch_node v, const int64_t *dims)
{
    int64_t keep[1] = {0};
    return astitch_broadcast_in_dim(g, v, 2, dims, keep);
}

#endif
