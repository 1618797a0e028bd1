/* graph_fixture.h: the CMocka fixture of the tests that build a graph through the public API
 * (include after <cmocka.h> and astitch's headers): a context, an empty graph in it and a plan
 * slot (NULL until a test makes one; the teardown destroys what is there), naming nodes,
 * planning and what a plan does with a named node. */
#ifndef ASTITCH_TESTS_GRAPH_FIXTURE_H
#define ASTITCH_TESTS_GRAPH_FIXTURE_H

#include <stdlib.h>

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

/* A test run with the fixture. */
#define FIXTURE_TEST(t) cmocka_unit_test_setup_teardown(t, fixture_setup, fixture_teardown)

#endif
