/* check_tolerance.c: see check_tolerance.h. */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check_tolerance.h"

double check_tolerance(astitch_dtype t)
{
    switch (t) {
    case ASTITCH_F32: return 1e-4;
    case ASTITCH_F16: return 1e-2;
    case ASTITCH_BF16: return 4e-2;
    default: return 0;
    }
}

bool check_zero_sign_counts(astitch_dtype t) { return t != ASTITCH_F16; }

double check_output_tolerance(const astitch_graph *g, int output)
{
    astitch_node out = astitch_graph_output(g, output);
    astitch_tensor_info info;
    if (astitch_node_info(g, out, &info) != ASTITCH_OK || check_tolerance(info.dtype) == 0)
        return 0;
    double tol = check_tolerance(info.dtype);
    bool *upstream = calloc((size_t)astitch_graph_num_nodes(g), sizeof *upstream);
    if (!upstream)
        return tol;
    upstream[out] = true;
    for (astitch_node id = out; id >= 0; id--) { /* operands precede their users */
        if (!upstream[id])
            continue;
        if (astitch_node_info(g, id, &info) == ASTITCH_OK && check_tolerance(info.dtype) > tol)
            tol = check_tolerance(info.dtype);
        astitch_dot_dims dd;
        if (astitch_node_op(g, id) == ASTITCH_OP_DOT && check_tolerance(info.dtype) > 0 &&
            astitch_node_dot_dims(g, id, &dd) == ASTITCH_OK) {
            astitch_tensor_info lhs;
            double k = 1;
            astitch_node_info(g, astitch_node_operand(g, id, 0), &lhs);
            for (int i = 0; i < dd.ncontract; i++)
                k *= (double)lhs.dims[dd.lhs_contract[i]];
            if (k * 0x1.0p-23 > tol)
                tol = k * 0x1.0p-23;
        }
        for (int k = 0; k < astitch_node_num_operands(g, id); k++)
            upstream[astitch_node_operand(g, id, k)] = true;
    }
    free(upstream);
    return tol;
}

/* What n is a layout of: the node reached from n through single-operand layout ops. */
static astitch_node layout_source(const astitch_graph *g, astitch_node n)
{
    for (;;) {
        switch (astitch_node_op(g, n)) {
        case ASTITCH_OP_RESHAPE:
        case ASTITCH_OP_TRANSPOSE:
        case ASTITCH_OP_BROADCAST_IN_DIM:
        case ASTITCH_OP_SLICE:
        case ASTITCH_OP_CONVERT:
            n = astitch_node_operand(g, n, 0);
            break;
        default:
            return n;
        }
    }
}

int check_input_scale_exponent(const astitch_graph *g, int i)
{
    astitch_node p = i >= 0 && i < astitch_graph_num_parameters(g) ? astitch_graph_parameter(g, i)
                                                                    : -1;
    astitch_tensor_info info;
    if (p < 0 || astitch_node_info(g, p, &info) != ASTITCH_OK || check_tolerance(info.dtype) == 0)
        return 0;
    double longest = 1;
    for (astitch_node id = 0; id < astitch_graph_num_nodes(g); id++) {
        astitch_dot_dims dd;
        astitch_tensor_info out, rhs;
        if (astitch_node_op(g, id) != ASTITCH_OP_DOT ||
            astitch_node_dot_dims(g, id, &dd) != ASTITCH_OK ||
            astitch_node_info(g, id, &out) != ASTITCH_OK || check_tolerance(out.dtype) == 0 ||
            layout_source(g, astitch_node_operand(g, id, 1)) != p ||
            astitch_node_info(g, astitch_node_operand(g, id, 1), &rhs) != ASTITCH_OK)
            continue;
        double k = 1;
        for (int c = 0; c < dd.ncontract; c++)
            k *= (double)rhs.dims[dd.rhs_contract[c]];
        if (k > longest)
            longest = k;
    }
    int e = 0;
    while (ldexp(1.0, 2 * e) < longest) /* the least e with 4^e >= K */
        e++;
    return e;
}

void check_perturb(const astitch_tensor_info *t, void *data, uint64_t seed, int index)
{
    /* the largest finite magnitude of the 16-bit float formats: one ulp more is an infinity */
    uint16_t top = t->dtype == ASTITCH_F16 ? 0x7bff : 0x7f7f;
    if (t->dtype != ASTITCH_F32 && t->dtype != ASTITCH_F16 && t->dtype != ASTITCH_BF16)
        return;
    uint64_t state = seed ^ (0x9e3779b97f4a7c15ull * (uint64_t)(index + 1));
    for (int64_t i = 0; i < t->elements; i++) {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        bool up = z & 1;
        if (t->dtype == ASTITCH_F32) {
            float v;
            memcpy(&v, (char *)data + 4 * i, 4);
            v *= (float)(1.0 + (up ? CHECK_PERTURB : -CHECK_PERTURB));
            memcpy((char *)data + 4 * i, &v, 4);
            continue;
        }
        uint16_t u;
        memcpy(&u, (char *)data + 2 * i, 2);
        uint16_t mag = u & 0x7fff;
        if (mag == 0 || mag > top || (up && mag == top))
            continue; /* zeros, infinities and NaNs stay; the largest moves down only */
        u = (uint16_t)((u & 0x8000) | (up ? mag + 1 : mag - 1));
        memcpy((char *)data + 2 * i, &u, 2);
    }
}
