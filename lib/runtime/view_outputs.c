/*
 * view_outputs.c: outputs left to the caller as views of an input
 * (astitch_compile_options.view_outputs; docs/codegen.md, *View outputs*).
 *
 * The executable runs a copy of the caller's graph without those outputs, so the planner drops
 * the reshapes, transposes and slices only they read (prune). The public run calls speak of the
 * caller's outputs; views_* translate their output arrays to the copy's and back.
 */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

struct ViewOutputs {
    astitch_graph *g;     /* the caller's graph without the view outputs: what x runs */
    int32_t nout;         /* the caller's outputs */
    int32_t *index;       /* per caller output: its index among g's outputs, -1 for a view */
    int32_t *caller;      /* per output of g: the caller's index */
    int32_t *node;        /* per caller output: its node (g has every node of the caller's
                           * graph, at the same ids) */
    StridedView *view;    /* per caller output; meaningful where index is -1 */
    void **host;          /* a run's output pointers in g's order */
    uint64_t *dev;
};

void views_destroy(ViewOutputs *v)
{
    if (!v)
        return;
    astitch_graph_destroy(v->g);
    free(v->index);
    free(v->caller);
    free(v->node);
    free(v->view);
    free(v->host);
    free(v->dev);
    free(v);
}

/* g's nodes at their ids, and its outputs i where index[i] >= 0: the graph the executable
 * runs. */
static astitch_status copy_kept(const astitch_graph *g, const int32_t *index, astitch_graph **out)
{
    int32_t *map = malloc((size_t)g->nnode * sizeof *map);
    astitch_graph *d = NULL;
    astitch_status s = map ? astitch_graph_create(g->ctx, &d) : ASTITCH_ERR_MEMORY;
    for (int32_t v = 0; s == ASTITCH_OK && v < g->nnode && d->status == ASTITCH_OK; v++)
        map[v] = graph_copy_mapped(d, g, v, map);
    for (int32_t i = 0; s == ASTITCH_OK && i < g->noutput && d->status == ASTITCH_OK; i++)
        if (index[i] >= 0)
            astitch_add_output(d, map[g->output[i]]);
    if (s == ASTITCH_OK && d->status == ASTITCH_OK && g->name)
        astitch_graph_set_name(d, g->name);
    if (s == ASTITCH_OK && d->status == ASTITCH_OK && g->comment)
        astitch_graph_set_comment(d, g->comment);
    if (s == ASTITCH_OK)
        s = d->status != ASTITCH_OK ? d->status : astitch_graph_verify(d);
    free(map);
    if (s != ASTITCH_OK) {
        astitch_graph_destroy(d);
        return s == ASTITCH_ERR_MEMORY ? ctx_fail(g->ctx, s, "view outputs: out of memory") : s;
    }
    *out = d;
    return ASTITCH_OK;
}

astitch_status views_create(const astitch_graph *g, ViewOutputs **out)
{
    *out = NULL;
    int32_t n = g->noutput, kept = 0;
    ViewOutputs *v = calloc(1, sizeof *v);
    if (!v || !(v->index = malloc((size_t)n * sizeof *v->index)) ||
        !(v->caller = malloc((size_t)n * sizeof *v->caller)) ||
        !(v->node = malloc((size_t)n * sizeof *v->node)) ||
        !(v->view = calloc((size_t)n, sizeof *v->view)) ||
        !(v->host = calloc((size_t)n, sizeof *v->host)) ||
        !(v->dev = calloc((size_t)n, sizeof *v->dev))) {
        views_destroy(v);
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "view outputs: out of memory");
    }
    v->nout = n;
    for (int32_t i = 0; i < n; i++) {
        v->node[i] = g->output[i];
        bool view = graph_strided_view(g, g->output[i], &v->view[i]);
        v->index[i] = view ? -1 : kept++;
    }
    if (kept == n) { /* no view: the executable runs g itself */
        views_destroy(v);
        return ASTITCH_OK;
    }
    if (kept == 0) /* every output a view: output 0 is written, so that there is a plan */
        for (int32_t i = 0; i < n; i++)
            v->index[i] = i == 0 ? kept++ : -1;
    for (int32_t i = 0; i < n; i++)
        if (v->index[i] >= 0)
            v->caller[v->index[i]] = i;
    astitch_status s = copy_kept(g, v->index, &v->g);
    if (s != ASTITCH_OK) {
        views_destroy(v);
        return s;
    }
    *out = v;
    return ASTITCH_OK;
}

astitch_graph *views_graph(const ViewOutputs *v) { return v->g; }

int32_t views_caller_index(const ViewOutputs *v, int32_t j) { return v ? v->caller[j] : j; }

astitch_status astitch_executable_output_view(const astitch_executable *x, int i, bool *is_view,
                                              astitch_output_view *view)
{
    if (!x || !is_view || !view)
        return ASTITCH_ERR_ARGUMENT;
    const ViewOutputs *v = x->views;
    int32_t n = v ? v->nout : x->g->noutput;
    if (i < 0 || i >= n)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT,
                        "astitch_executable_output_view: output %d out of range 0..%d", i,
                        (int)n - 1);
    *is_view = v && v->index[i] < 0;
    memset(view, 0, sizeof *view);
    if (*is_view) {
        view->input = v->view[i].param;
        view->offset = v->view[i].offset;
        view->rank = v->view[i].rank;
        memcpy(view->strides, v->view[i].stride, sizeof view->strides);
    }
    return ASTITCH_OK;
}

/* View output i of v (index[i] < 0) from its input's memory at input into dst, dense. */
static void copy_view(const ViewOutputs *v, int32_t i, const void *input, void *dst)
{
    const Node *node = gnode(v->g, v->node[i]);
    strided_view_gather(&v->view[i], &node->shape, astitch_dtype_size(node->dtype), input, dst);
}

astitch_status astitch_executable_view_copy(const astitch_executable *x, int i,
                                            const void *input, void *dst)
{
    bool is_view = false;
    astitch_output_view unused;
    astitch_status s = x && input && dst ? astitch_executable_output_view(x, i, &is_view, &unused)
                                         : ASTITCH_ERR_ARGUMENT;
    if (s != ASTITCH_OK)
        return s;
    if (!is_view)
        return ctx_fail(x->ctx, ASTITCH_ERR_ARGUMENT,
                        "astitch_executable_view_copy: output %d is written by runs, not a view",
                        i);
    copy_view(x->views, i, input, dst);
    return ASTITCH_OK;
}

void *const *views_host_outputs(ViewOutputs *v, void *const *outputs)
{
    if (!v || !outputs)
        return outputs;
    for (int32_t i = 0; i < v->nout; i++)
        if (v->index[i] >= 0)
            v->host[v->index[i]] = outputs[i];
    return v->host;
}

const uint64_t *views_device_outputs(ViewOutputs *v, const uint64_t *outputs)
{
    if (!v || !outputs)
        return outputs;
    for (int32_t i = 0; i < v->nout; i++)
        if (v->index[i] >= 0)
            v->dev[v->index[i]] = outputs[i];
    return v->dev;
}

void views_fill_host(const ViewOutputs *v, const void *const *inputs, void *const *outputs)
{
    for (int32_t i = 0; v && i < v->nout; i++)
        if (v->index[i] < 0 && outputs[i])
            copy_view(v, i, inputs[v->view[i].param], outputs[i]);
}
