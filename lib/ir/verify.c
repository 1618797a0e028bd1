/* verify.c: the whole-graph verifier. Builders already check each node as it is made; this
 * re-checks everything, so graphs changed by passes (and bugs) are caught too. */
#include <string.h>

#include "ir.h"

astitch_status astitch_graph_verify(astitch_graph *g)
{
    if (!g)
        return ASTITCH_ERR_ARGUMENT;
    if (g->status != ASTITCH_OK)
        return ctx_fail(g->ctx, g->status,
                        "graph is unusable: an earlier builder call failed (%s)",
                        astitch_status_name(g->status));
    char a[160], b[160];
    int32_t nparam = 0;
    for (int32_t id = 0; id < g->nnode; id++) {
        const Node *n = gnode(g, id);
        if (!n->name || !*n->name || astitch_graph_find(g, n->name) != id)
            return node_fail(g, id, ASTITCH_ERR_GRAPH, "name is missing or not unique");
        astitch_dtype t;
        Shape s;
        astitch_status st = infer_node(g, id, &t, &s);
        if (st != ASTITCH_OK)
            return st;
        if (t != n->dtype || !shape_equal(&s, &n->shape))
            return node_fail(g, id, ASTITCH_ERR_GRAPH, "recorded type %s, but its operands give %s",
                             type_str(a, sizeof a, n->dtype, &n->shape),
                             type_str(b, sizeof b, t, &s));
        if (n->op == ASTITCH_OP_PARAMETER) {
            if (n->attr.param != nparam || nparam >= g->nparam || g->param[nparam] != id)
                return node_fail(g, id, ASTITCH_ERR_GRAPH, "parameter list is inconsistent");
            nparam++;
        }
    }
    if (nparam != g->nparam)
        return ctx_fail(g->ctx, ASTITCH_ERR_GRAPH, "graph lists %d parameters but has %d",
                        g->nparam, nparam);
    if (g->noutput == 0)
        return ctx_fail(g->ctx, ASTITCH_ERR_GRAPH, "graph has no outputs");
    for (int32_t i = 0; i < g->noutput; i++) {
        if (!graph_valid_id(g, g->output[i]))
            return ctx_fail(g->ctx, ASTITCH_ERR_GRAPH, "output %d refers to no node (%d)", i,
                            g->output[i]);
        for (int32_t j = 0; j < i; j++)
            if (g->output[j] == g->output[i])
                return node_fail(g, g->output[i], ASTITCH_ERR_GRAPH, "is output %d and %d", j, i);
    }
    return ASTITCH_OK;
}
