/*
 * concat_tree.c: a concatenate of many operands becomes a tree of narrow ones.
 *
 * A kernel takes each tensor it reads as an argument, and a kernel's arguments are bounded
 * (PLAN_KERNEL_MAX_TENSORS); a concatenate of a thousand operands would need them all in one
 * kernel, even alone in it. Its operands are grouped, in order, into concatenates of at most
 * CONCAT_TREE_WIDTH operands, those again while there are more than CONCAT_TREE_WIDTH groups,
 * and the last level keeps the node's name and its place among the outputs. The element values
 * are the same; the argument bound (bound.c) may then give the groups kernels of their own.
 *
 * The rewritten graph is a copy (the caller's graph is never changed); parameters keep their
 * order. The new nodes are named after the concatenate ("<name>.part<L>_<i>").
 */
#include <stdio.h>
#include <stdlib.h>

#include "passes/passes.h"

/* Names node v of d "<base>.part<level>_<i>" (graph_name_derived). */
static astitch_node named(const astitch_graph *src, astitch_graph *d, astitch_node v,
                          const char *base, int level, int i)
{
    char what[64];
    snprintf(what, sizeof what, "part%d_%d", level, i);
    return graph_name_derived(d, src, v, base, what);
}

/* Appends to d the tree that concatenates src's node v (its operands mapped by map[]); returns
 * the node that replaces v, named as v. Works in place on a copy of the operand list. */
static astitch_node emit_tree(const astitch_graph *src, astitch_graph *d, int32_t v,
                              const int32_t *map)
{
    const Node *n = gnode(src, v);
    int32_t m = n->nin;
    astitch_node *xs = malloc((size_t)m * sizeof *xs);
    if (!xs) {
        graph_fail(d, ASTITCH_ERR_MEMORY, "out of memory splitting concatenate '%s'", n->name);
        return ASTITCH_NO_NODE;
    }
    for (int32_t j = 0; j < m; j++)
        xs[j] = map[goperand(src, v, j)];
    for (int level = 0; m > CONCAT_TREE_WIDTH; level++) {
        int32_t groups = 0;
        for (int32_t at = 0; at < m; at += CONCAT_TREE_WIDTH) {
            int w = m - at < CONCAT_TREE_WIDTH ? (int)(m - at) : CONCAT_TREE_WIDTH;
            astitch_node part = w == 1 ? xs[at]
                                       : named(src, d, astitch_concatenate(d, w, xs + at, n->attr.axis),
                                               n->name, level, (int)groups);
            if (part == ASTITCH_NO_NODE) {
                free(xs);
                return ASTITCH_NO_NODE;
            }
            xs[groups++] = part;
        }
        m = groups;
    }
    astitch_node out = astitch_concatenate(d, (int)m, xs, n->attr.axis);
    free(xs);
    if (out != ASTITCH_NO_NODE && astitch_set_name(d, out, n->name) != ASTITCH_OK)
        return ASTITCH_NO_NODE;
    return out;
}

static bool is_wide(const astitch_graph *g, int32_t v)
{
    return gnode(g, v)->op == ASTITCH_OP_CONCATENATE && gnode(g, v)->nin > CONCAT_TREE_WIDTH;
}

astitch_status pass_concat_tree(const astitch_graph *g, astitch_graph **out)
{
    return graph_rewrite(g, is_wide, emit_tree, "concatenate tree", out);
}
