/* api_example.c: the C API example of README.md: softmax over the rows of a 2x3 matrix. */
#include <stdio.h>

#include <astitch/astitch.h>

int main(void)
{
    astitch_context *ctx;
    astitch_graph *g;
    if (astitch_context_create(&ctx) != ASTITCH_OK || astitch_graph_create(ctx, &g) != ASTITCH_OK)
        return 1;
    int64_t dims[2] = {2, 3}, rows[1] = {0}, axis[1] = {1};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, dims);
    astitch_node max = astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, axis);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP,
        astitch_binary(g, ASTITCH_OP_SUB, x, astitch_broadcast_in_dim(g, max, 2, dims, rows)));
    astitch_node sum = astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, axis);
    astitch_node y = astitch_binary(g, ASTITCH_OP_DIV, e,
                                    astitch_broadcast_in_dim(g, sum, 2, dims, rows));
    float in[6] = {1, 2, 3, -1, 0, 1}, out[6];
    const void *inputs[] = {in};
    void *outputs[] = {out};
    if (astitch_add_output(g, y) != ASTITCH_OK ||
        astitch_run_reference(g, inputs, outputs) != ASTITCH_OK) {
        fprintf(stderr, "api_example: %s\n", astitch_last_error(ctx));
        return 1;
    }
    for (int i = 0; i < 6; i++)
        printf("%.6f%c", out[i], i % 3 == 2 ? '\n' : ' ');
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
    return 0;
}
