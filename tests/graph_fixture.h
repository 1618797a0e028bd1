/* graph_fixture.h: the CMocka fixture of the tests that build a graph through the public API
 * (include after <cmocka.h> and astitch's headers): a context, an empty graph in it and a plan
 * slot (NULL until a test makes one; the teardown destroys what is there), naming nodes,
 * planning and what a plan does with a named node. */
#ifndef ASTITCH_TESTS_GRAPH_FIXTURE_H
#define ASTITCH_TESTS_GRAPH_FIXTURE_H

#include <stdlib.h>
#include <string.h>

typedef struct Fixture {
    astitch_context *ctx;
    astitch_graph *g;
    astitch_plan *p;
} Fixture;

static inline int fixture_setup(void **state)
{
    Fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(astitch_context_create(&f->ctx), ASTITCH_OK);
    assert_int_equal(astitch_graph_create(f->ctx, &f->g), ASTITCH_OK);
    *state = f;
    return 0;
}

static inline int fixture_teardown(void **state)
{
    Fixture *f = *state;
    astitch_plan_destroy(f->p);
    astitch_graph_destroy(f->g);
    astitch_context_destroy(f->ctx);
    free(f);
    return 0;
}

/* n, named `name` (a node the builder failed to make fails the test). */
static inline astitch_node named(astitch_graph *g, astitch_node n, const char *name)
{
    assert_int_not_equal(n, ASTITCH_NO_NODE);
    assert_int_equal(astitch_set_name(g, n, name), ASTITCH_OK);
    return n;
}

/* Plans f->g for device d under o (replacing an earlier plan); fails the test with the
 * context's message. */
static inline astitch_plan *fixture_plan(Fixture *f, const astitch_device *d,
                                         const astitch_plan_options *o)
{
    astitch_plan_destroy(f->p);
    f->p = NULL;
    if (astitch_plan_create(f->g, d, o, &f->p) != ASTITCH_OK)
        fail_msg("plan: %s", astitch_last_error(f->ctx));
    return f->p;
}

/* Verifies f->g and plans it for the h100 model with the default options (replacing an earlier
 * plan); fails the test with the context's message. */
static inline astitch_plan *fixture_plan_h100(Fixture *f)
{
    if (astitch_graph_verify(f->g) != ASTITCH_OK)
        fail_msg("verify: %s", astitch_last_error(f->ctx));
    astitch_device d;
    assert_int_equal(astitch_device_builtin("h100", &d), ASTITCH_OK);
    return fixture_plan(f, &d, NULL);
}

/* What plan p of graph g does with the node called `name` (a node in no kernel fails the
 * test). Found by name in the plan's graph: a rewrite keeps the names of g's nodes, not their
 * ids. */
static inline astitch_op_info op_info(const astitch_plan *p, const astitch_graph *g,
                                      const char *name)
{
    astitch_op_info i;
    assert_int_not_equal(astitch_graph_find(g, name), ASTITCH_NO_NODE);
    astitch_node n = astitch_graph_find(astitch_plan_graph(p), name);
    assert_int_not_equal(n, ASTITCH_NO_NODE);
    if (astitch_plan_node_info(p, n, &i) != ASTITCH_OK)
        fail_msg("%s has no kernel", name);
    return i;
}

/* Whether the text plan p contains `needle`. */
static inline bool plan_text_has(const astitch_plan *p, const char *needle)
{
    char *text = NULL;
    assert_int_equal(astitch_plan_text(p, &text), ASTITCH_OK);
    bool has = strstr(text, needle) != NULL;
    astitch_free(text);
    return has;
}

/* Whether g's text plan (H100, options o or the defaults for NULL) contains `needle`. */
static inline bool graph_plan_has(astitch_graph *g, const astitch_plan_options *o,
                                  const char *needle)
{
    astitch_device d;
    assert_int_equal(astitch_device_builtin("h100", &d), ASTITCH_OK);
    astitch_plan *p = NULL;
    if (astitch_plan_create(g, &d, o, &p) != ASTITCH_OK)
        fail_msg("plan: %s", astitch_last_error(astitch_graph_context(g)));
    bool has = plan_text_has(p, needle);
    astitch_plan_destroy(p);
    return has;
}

/* A test run with the fixture. */
#define FIXTURE_TEST(t) cmocka_unit_test_setup_teardown(t, fixture_setup, fixture_teardown)

#ifdef ASTITCH_TESTS_DIFF_CHECK_H /* diff_check.h included before: */
/* g's outputs on the host target (stitch) against the reference interpreter, fresh random
 * inputs; a failure names the seed. */
static inline void check_host_values(astitch_graph *g)
{
    uint64_t seed = diff_fresh_seed();
    DiffResult r;
    if (diff_run(g, ASTITCH_TARGET_HOST, ASTITCH_FUSION_STITCH, seed, &r) != ASTITCH_OK)
        fail_msg("seed %llu: %s", (unsigned long long)seed,
                 astitch_last_error(astitch_graph_context(g)));
    if (!r.ok)
        fail_msg("seed %llu: %s", (unsigned long long)seed, r.message);
}

/* g's outputs on the host target running the plans of the h100 model (stitch) against the
 * reference interpreter, fresh random inputs; prints the seed and the worst error, and a
 * failure names `what` and the seed. */
static inline void check_h100_values(astitch_graph *g, const char *what)
{
    astitch_device model;
    astitch_compile_options o;
    astitch_phase_info first;
    assert_int_equal(diff_host_as(g, "h100", &model, &o, &first), ASTITCH_OK);
    uint64_t seed = diff_fresh_seed();
    DiffResult r;
    if (diff_run_with(g, &o, seed, &r) != ASTITCH_OK)
        fail_msg("%s: %s", what, astitch_last_error(astitch_graph_context(g)));
    printf("  seed %llu, worst normalized error %.3g\n", (unsigned long long)seed, r.worst);
    if (!r.ok)
        fail_msg("%s (seed %llu): %s", what, (unsigned long long)seed, r.message);
}
#endif

#endif
