/*
 * prune.c: nodes that feed no output are not planned.
 *
 * Traced models hand over such nodes (a shape computation whose use was optimized away, a
 * branch not taken); the format keeps them, and the reference interpreter evaluates them, but
 * no output depends on them. When the graph has any (parameters excepted: they stay, as the
 * caller passes every input), the plan works on a copy without them, made here, and names them
 * (plan text `dropped`, JSON "dropped"); a custom op among them is not called. Graphs without
 * such nodes are planned as given.
 */
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

/* Marks in live[] the nodes the outputs need, and every parameter; returns how many are not. */
static int32_t mark_live(const astitch_graph *g, bool *live)
{
    for (int32_t i = 0; i < g->noutput; i++)
        live[g->output[i]] = true;
    int32_t dead = 0;
    for (int32_t v = g->nnode - 1; v >= 0; v--) {
        if (gnode(g, v)->op == ASTITCH_OP_PARAMETER)
            live[v] = true;
        if (!live[v]) {
            dead++;
            continue;
        }
        for (int j = 0; j < gnode(g, v)->nin; j++)
            live[goperand(g, v, j)] = true;
    }
    return dead;
}

/* Copies the live nodes of g into d; map[] gets their new ids. */
static astitch_status copy_live(const astitch_graph *g, astitch_graph *d, const bool *live,
                                int32_t *map)
{
    for (int32_t v = 0; v < g->nnode && d->status == ASTITCH_OK; v++)
        map[v] = live[v] ? graph_copy_mapped(d, g, v, map) : ASTITCH_NO_NODE;
    return graph_copy_finish(d, g, map, "planner: dropping the nodes that feed no output");
}

/* Copies of the names of g's nodes that are not live, in node order. */
static char **dead_names(const astitch_graph *g, const bool *live, int32_t dead)
{
    char **names = calloc((size_t)dead, sizeof *names);
    for (int32_t v = 0, k = 0; names && v < g->nnode; v++) {
        if (live[v])
            continue;
        const char *s = gnode(g, v)->name ? gnode(g, v)->name : "";
        if (!(names[k++] = strdup(s))) {
            prune_free_names(names, k);
            return NULL;
        }
    }
    return names;
}

void prune_free_names(char **names, int32_t n)
{
    for (int32_t i = 0; names && i < n; i++)
        free(names[i]);
    free(names);
}

astitch_status pass_prune(const astitch_graph *g, astitch_graph **out, char ***dropped,
                          int32_t *ndropped)
{
    *out = NULL;
    *dropped = NULL;
    *ndropped = 0;
    size_t n = (size_t)(g->nnode ? g->nnode : 1);
    bool *live = calloc(n, sizeof *live);
    int32_t *map = malloc(n * sizeof *map);
    astitch_status st = ASTITCH_OK;
    astitch_graph *d = NULL;
    int32_t dead = live && map ? mark_live(g, live) : 0;
    if (!live || !map)
        st = ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    else if (dead > 0 && (st = astitch_graph_create(g->ctx, &d)) == ASTITCH_OK)
        st = copy_live(g, d, live, map);
    char **names = st == ASTITCH_OK && dead > 0 ? dead_names(g, live, dead) : NULL;
    if (st == ASTITCH_OK && dead > 0 && !names)
        st = ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "planner: out of memory");
    if (st == ASTITCH_OK && dead > 0) {
        *out = d;
        *dropped = names;
        *ndropped = dead;
    } else {
        astitch_graph_destroy(d);
    }
    free(live);
    free(map);
    return st;
}
