/* emit_guard.c: loads a select discards. A kernel input whose every use reaches one arm of a
 * select, through element-wise ops and reshapes that keep its linear index, matters only at the
 * elements where that select takes the arm. When the select's condition reads no tensor (a
 * causal mask from iotas), the condition can be computed before the load, and a vector whose
 * elements all take the other arm need not be read (emit_resident.c): an attention softmax's
 * masked half of the scores stays in memory.
 *
 * The rule is exact: the select's result at those elements is the other arm's value, and the
 * skipped value reaches nothing else (every node on the way has one use, and none is a graph
 * output). */
#define ASTITCH_EMIT_INTERNAL
#include "codegen.h"

/* Nodes of a condition looked at, at most: conditions are a few compares of iotas. */
enum { GUARD_COND_NODES_MAX = 32 };

/* The single use of node x: true with its user and operand position, false when x has none or
 * several (two operands of one node count as two uses), or is a graph output. */
static bool single_use(const astitch_graph *g, int32_t x, int32_t *user, int *pos)
{
    for (int32_t i = 0; i < g->noutput; i++)
        if (g->output[i] == x)
            return false;
    int uses = 0;
    for (int32_t n = x + 1; n < g->nnode && uses < 2; n++)
        for (int k = 0; k < gnode(g, n)->nin; k++)
            if (goperand(g, n, k) == x) {
                *user = n;
                *pos = k;
                uses++;
            }
    return uses == 1;
}

/* True when node n of the kernel is computed from indices and constants alone: no tensor read,
 * no buffer of the plan, no reduction. */
static bool index_only(const Emit *e, int32_t n, int *budget)
{
    if (--*budget < 0 || e->tensor[n])
        return false;
    const PlanOp *op = plan_kernel_op(e->k, n);
    if (!op || op->buf >= 0)
        return false;
    const Node *node = gnode(e->g, n);
    switch (node->op) {
    case ASTITCH_OP_IOTA:
    case ASTITCH_OP_CONSTANT:
        return true;
    case ASTITCH_OP_BROADCAST_IN_DIM:
    case ASTITCH_OP_RESHAPE:
    case ASTITCH_OP_TRANSPOSE:
    case ASTITCH_OP_SLICE:
        break;
    default:
        if (!op_is_elementwise(node->op))
            return false;
    }
    for (int k = 0; k < node->nin; k++)
        if (!index_only(e, goperand(e->g, n, k), budget))
            return false;
    return true;
}

bool emit_load_guard(const Emit *e, int32_t in, int32_t *select, bool *when)
{
    const astitch_graph *g = e->g;
    int64_t count = shape_elements(&gnode(g, in)->shape);
    int32_t x = in, user = -1;
    int pos = -1;
    while (single_use(g, x, &user, &pos)) {
        const Node *u = gnode(g, user);
        if (!plan_kernel_op(e->k, user) || shape_elements(&u->shape) != count)
            return false;
        if (u->op == ASTITCH_OP_SELECT) {
            int budget = GUARD_COND_NODES_MAX;
            if (pos == 0 || !index_only(e, goperand(g, user, 0), &budget))
                return false;
            *select = user;
            *when = pos == 1;
            return true;
        }
        if (u->op != ASTITCH_OP_RESHAPE && !op_is_elementwise(u->op))
            return false;
        x = user;
    }
    return false;
}
