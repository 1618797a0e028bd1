/*
 * recompute.c: generated outputs recomputed where they are read, a graph rewrite ahead of the
 * stitch pipeline.
 *
 * An output X whose value is a function of positions and constants alone (its cone holds iota,
 * constants and cheap ops: light element-wise, broadcast, shape ops but gather; no parameter)
 * costs nothing but arithmetic to compute again. When X is also read inside the graph, its
 * readers would otherwise wait for it: X is a candidate (an output), and a reader whose mapping
 * cannot derive X's (a causal mask [S, S] broadcast into the softmax over [B, H, S, S]) reads
 * it from global memory behind a global barrier, which makes the kernel persistent (measured in
 * a GPT-2 training step on an H100: the attention region at 1.5 TB/s in one wave, against 2.9
 * for the same softmax with the mask recomputed).
 *
 * The rewritten graph is a copy (the caller's graph is never changed): X keeps its name and
 * place in the outputs, and its readers read a copy of X's node, "<X>.recompute", over the same
 * operands, which is no output and so recomputed in registers like any local op. Parameters and
 * outputs keep their order. Cones of more than RECOMPUTE_MAX_CONE nodes are left alone.
 */
#include <stdlib.h>

#include "passes/passes.h"

enum { RECOMPUTE_MAX_CONE = 32 };

/* Whether op may be part of a recomputed cone. */
static bool cheap(astitch_op op)
{
    if (astitch_op_class_of(op) == ASTITCH_CLASS_SOURCE)
        return op != ASTITCH_OP_PARAMETER;
    return plan_op_recomputable(op);
}

/* True when the cone of v (v and every node it depends on) is cheap and at most
 * RECOMPUTE_MAX_CONE nodes. seen[] (all zero on entry, nnode entries) marks the visited nodes
 * with `mark`; stack holds nnode entries. */
static bool generated(const astitch_graph *g, int32_t v, int32_t *seen, int32_t mark,
                      int32_t *stack)
{
    int32_t top = 0, count = 0;
    stack[top++] = v;
    seen[v] = mark;
    while (top > 0) {
        int32_t u = stack[--top];
        if (!cheap(gnode(g, u)->op) || ++count > RECOMPUTE_MAX_CONE)
            return false;
        for (int j = 0; j < gnode(g, u)->nin; j++) {
            int32_t w = goperand(g, u, j);
            if (seen[w] != mark) {
                seen[w] = mark;
                stack[top++] = w;
            }
        }
    }
    return true;
}

/* Marks in chosen[] the outputs of g that are generated and read inside g; returns how many. */
static int32_t choose(const astitch_graph *g, bool *chosen, int32_t *seen, int32_t *stack)
{
    bool *read = calloc((size_t)g->nnode, sizeof *read);
    if (!read)
        return -1;
    for (int32_t v = 0; v < g->nnode; v++)
        for (int j = 0; j < gnode(g, v)->nin; j++)
            read[goperand(g, v, j)] = true;
    int32_t found = 0;
    for (int32_t i = 0; i < g->noutput; i++) {
        int32_t x = g->output[i];
        if (chosen[x] || !read[x] || !generated(g, x, seen, i + 1, stack))
            continue;
        chosen[x] = true;
        found++;
    }
    free(read);
    return found;
}

/* Copies g into d; a chosen node is copied twice, its readers taking the second copy.
 * out_map[] ends as the map of the outputs (the first copies). */
static astitch_status copy_with_recomputes(const astitch_graph *g, astitch_graph *d,
                                           const bool *chosen, int32_t *map, int32_t *out_map,
                                           int32_t *recomputed, int32_t *nrecomputed)
{
    for (int32_t v = 0; v < g->nnode; v++) {
        map[v] = out_map[v] = graph_copy_mapped(d, g, v, map);
        if (map[v] == ASTITCH_NO_NODE)
            break;
        if (!chosen[v])
            continue;
        recomputed[(*nrecomputed)++] = out_map[v];
        map[v] = graph_copy_mapped_derived(d, g, v, map, "recompute");
        if (map[v] == ASTITCH_NO_NODE)
            break;
    }
    return graph_copy_finish(d, g, out_map, "recomputing generated outputs");
}

astitch_status pass_recompute(const astitch_graph *g, astitch_graph **out, int32_t **recomputed,
                              int32_t *nrecomputed, int32_t *ids, int32_t nids)
{
    *out = NULL;
    *recomputed = NULL;
    *nrecomputed = 0;
    size_t n = (size_t)(g->nnode ? g->nnode : 1);
    bool *chosen = calloc(n, sizeof *chosen);
    int32_t *seen = calloc(n, sizeof *seen), *stack = malloc(n * sizeof *stack);
    int32_t *map = malloc(n * sizeof *map), *out_map = malloc(n * sizeof *out_map);
    int32_t *list = malloc((size_t)(g->noutput ? g->noutput : 1) * sizeof *list);
    astitch_status st = ASTITCH_OK;
    int32_t found = chosen && seen && stack ? choose(g, chosen, seen, stack) : -1;
    if (found < 0 || !map || !out_map || !list) {
        st = ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "recomputing generated outputs: out of memory");
        goto done;
    }
    if (!found)
        goto done;
    astitch_graph *d = NULL;
    if ((st = astitch_graph_create(g->ctx, &d)) != ASTITCH_OK)
        goto done;
    st = copy_with_recomputes(g, d, chosen, map, out_map, list, nrecomputed);
    if (st) {
        astitch_graph_destroy(d);
        *nrecomputed = 0;
        goto done;
    }
    for (int32_t i = 0; i < nids; i++)
        ids[i] = out_map[ids[i]];
    *out = d;
    *recomputed = list;
    list = NULL;
done:
    free(chosen);
    free(seen);
    free(stack);
    free(map);
    free(out_map);
    free(list);
    return st;
}
