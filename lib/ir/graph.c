/* graph.c: graph storage, names, outputs, inspection and shape helpers. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

astitch_status astitch_graph_create(astitch_context *ctx, astitch_graph **out)
{
    if (!out)
        return ASTITCH_ERR_ARGUMENT;
    *out = NULL;
    if (!ctx)
        return ASTITCH_ERR_ARGUMENT;
    astitch_graph *g = calloc(1, sizeof *g);
    if (!g)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "astitch_graph_create: out of memory");
    g->ctx = ctx;
    *out = g;
    return ASTITCH_OK;
}

void astitch_graph_destroy(astitch_graph *g)
{
    if (!g)
        return;
    for (int32_t i = 0; i < g->nnode; i++) {
        free(g->node[i].name);
        free(g->node[i].attr.target);
        free(g->node[i].attr.values);
    }
    free(g->node);
    free(g->operand);
    free(g->param);
    free(g->output);
    free(g->nameslot);
    free(g->name);
    free(g->comment);
    free(g);
}

astitch_status astitch_graph_status(const astitch_graph *g)
{
    return g ? g->status : ASTITCH_ERR_ARGUMENT;
}

astitch_context *astitch_graph_context(const astitch_graph *g) { return g ? g->ctx : NULL; }

bool array_reserve(void **items, int32_t need, int32_t *cap, size_t size, int32_t first)
{
    if (need <= *cap)
        return true;
    int32_t more = *cap ? *cap : first;
    while (more < need) {
        if (more > INT32_MAX / 2)
            return false;
        more *= 2;
    }
    void *grown = realloc(*items, (size_t)more * size);
    if (!grown)
        return false;
    *items = grown;
    *cap = more;
    return true;
}

char *graph_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    return p ? memcpy(p, s, n) : NULL;
}

astitch_status graph_fail(astitch_graph *g, astitch_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ctx_failv(g->ctx, s, fmt, ap);
    va_end(ap);
    if (g->status == ASTITCH_OK)
        g->status = s;
    return s;
}

astitch_status node_fail(const astitch_graph *g, int32_t id, astitch_status s, const char *fmt,
                         ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const Node *n = gnode(g, id);
    if (n->name)
        ctx_fail(g->ctx, s, "node %d '%s' (%s): %s", id, n->name, astitch_op_name(n->op), msg);
    else
        ctx_fail(g->ctx, s, "node %d (%s): %s", id, astitch_op_name(n->op), msg);
    ctx_error_at_node(g->ctx, id);
    return s;
}

void ctx_error_node_into(astitch_context *ctx, const astitch_graph *from, const astitch_graph *to)
{
    if (!ctx || from == to || ctx->error_node < 0)
        return;
    ctx->error_node = ctx->error_node < from->nnode && gnode(from, ctx->error_node)->name
                          ? astitch_graph_find(to, gnode(from, ctx->error_node)->name)
                          : ASTITCH_NO_NODE;
}

bool graph_valid_id(const astitch_graph *g, astitch_node n) { return n >= 0 && n < g->nnode; }

bool graph_readers(const astitch_graph *g, int32_t **start, int32_t **use)
{
    size_t n = (size_t)g->nnode;
    int32_t *at = calloc(n + 1, sizeof *at), *end = malloc((n ? n : 1) * sizeof *end);
    int32_t *who = malloc((g->noperand ? (size_t)g->noperand : 1) * sizeof *who);
    if (!at || !who || !end) {
        free(at);
        free(who);
        free(end);
        return false;
    }
    for (int32_t v = 0; v < g->nnode; v++)
        for (int j = 0; j < gnode(g, v)->nin; j++)
            at[goperand(g, v, j) + 1]++;
    for (size_t v = 0; v < n; v++)
        at[v + 1] += at[v];
    memcpy(end, at, n * sizeof *end);
    for (int32_t v = 0; v < g->nnode; v++) /* one entry per reader, even if it reads x twice */
        for (int j = 0; j < gnode(g, v)->nin; j++) {
            int32_t x = goperand(g, v, j);
            if (end[x] == at[x] || who[end[x] - 1] != v)
                who[end[x]++] = v;
        }
    int32_t w = 0; /* the lists compacted to their real lengths */
    for (size_t v = 0; v < n; v++) {
        int32_t lo = at[v], hi = end[v];
        at[v] = w;
        for (int32_t i = lo; i < hi; i++)
            who[w++] = who[i];
    }
    at[n] = w;
    free(end);
    *start = at;
    *use = who;
    return true;
}

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* Returns the slot for name: holding its node, or empty (-1) where it would go. */
static int32_t *name_slot(const astitch_graph *g, const char *name)
{
    uint32_t mask = (uint32_t)g->capname - 1;
    for (uint32_t i = hash_name(name) & mask;; i = (i + 1) & mask) {
        int32_t *slot = &g->nameslot[i];
        if (*slot < 0 || strcmp(g->node[*slot].name, name) == 0)
            return slot;
    }
}

static bool name_table_insert(astitch_graph *g, int32_t id)
{
    if ((int64_t)(g->nnode + 1) * 2 > g->capname) {
        int32_t ncap = g->capname ? g->capname * 2 : 64;
        int32_t *slots = malloc((size_t)ncap * sizeof *slots);
        if (!slots)
            return false;
        for (int32_t i = 0; i < ncap; i++)
            slots[i] = -1;
        int32_t *old = g->nameslot, oldcap = g->capname;
        g->nameslot = slots;
        g->capname = ncap;
        for (int32_t i = 0; i < oldcap; i++)
            if (old[i] >= 0)
                *name_slot(g, g->node[old[i]].name) = old[i];
        free(old);
    }
    *name_slot(g, g->node[id].name) = id;
    return true;
}

/* Removes name by backward-shift deletion, which keeps every probe chain intact. */
static void name_table_remove(astitch_graph *g, const char *name)
{
    int32_t *slot = name_slot(g, name);
    if (*slot < 0)
        return;
    uint32_t mask = (uint32_t)g->capname - 1;
    uint32_t hole = (uint32_t)(slot - g->nameslot);
    for (uint32_t i = (hole + 1) & mask; g->nameslot[i] >= 0; i = (i + 1) & mask) {
        uint32_t home = hash_name(g->node[g->nameslot[i]].name) & mask;
        /* move the entry into the hole unless its home lies cyclically in (hole, i] */
        bool stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
        if (!stays) {
            g->nameslot[hole] = g->nameslot[i];
            hole = i;
        }
    }
    g->nameslot[hole] = -1;
}

astitch_node astitch_graph_find(const astitch_graph *g, const char *name)
{
    if (!g || !name || !g->capname)
        return ASTITCH_NO_NODE;
    return *name_slot(g, name);
}

int32_t graph_add_node(astitch_graph *g, const Node *n, const int32_t *in, int nin)
{
    if (!array_reserve((void **)&g->node, g->nnode + 1, &g->capnode, sizeof *g->node, 16) ||
        !array_reserve((void **)&g->operand, g->noperand + nin, &g->capoperand,
                       sizeof *g->operand, 16)) {
        graph_fail(g, ASTITCH_ERR_MEMORY, "out of memory adding a %s node", astitch_op_name(n->op));
        return -1;
    }
    int32_t id = g->nnode++;
    Node *dst = &g->node[id];
    *dst = *n;
    dst->in = g->noperand;
    dst->nin = nin;
    if (nin)
        memcpy(&g->operand[g->noperand], in, (size_t)nin * sizeof *in);
    g->noperand += nin;
    return id;
}

astitch_status astitch_set_name(astitch_graph *g, astitch_node n, const char *name)
{
    if (!g)
        return ASTITCH_ERR_ARGUMENT;
    if (!graph_valid_id(g, n))
        return graph_fail(g, ASTITCH_ERR_ARGUMENT, "astitch_set_name: no node %d", n);
    if (!name || !*name)
        return graph_fail(g, ASTITCH_ERR_ARGUMENT, "astitch_set_name: node %d: empty name", n);
    astitch_node other = astitch_graph_find(g, name);
    if (other == n)
        return ASTITCH_OK;
    if (other >= 0)
        return graph_fail(g, ASTITCH_ERR_GRAPH,
                          "node %d: duplicate name '%s' (already node %d '%s' (%s))", n, name,
                          other, name, astitch_op_name(g->node[other].op));
    char *copy = graph_strdup(name);
    if (!copy)
        return graph_fail(g, ASTITCH_ERR_MEMORY, "out of memory naming node %d", n);
    Node *node = &g->node[n];
    if (node->name)
        name_table_remove(g, node->name);
    free(node->name);
    node->name = copy;
    if (!name_table_insert(g, n))
        return graph_fail(g, ASTITCH_ERR_MEMORY, "out of memory naming node %d", n);
    return ASTITCH_OK;
}

/* The "_k" suffix keeps default names unique when a user took "<op>.<id>" already. */
astitch_status graph_default_name(astitch_graph *g, int32_t id)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%s.%d", astitch_op_name(g->node[id].op), id);
    for (int k = 1; astitch_graph_find(g, buf) >= 0; k++)
        snprintf(buf, sizeof buf, "%s.%d_%d", astitch_op_name(g->node[id].op), id, k);
    return astitch_set_name(g, id, buf);
}

astitch_status astitch_add_output(astitch_graph *g, astitch_node n)
{
    if (!g)
        return ASTITCH_ERR_ARGUMENT;
    if (g->status != ASTITCH_OK)
        return g->status;
    if (!graph_valid_id(g, n))
        return graph_fail(g, ASTITCH_ERR_ARGUMENT, "astitch_add_output: no node %d", n);
    for (int32_t i = 0; i < g->noutput; i++)
        if (g->output[i] == n)
            return graph_fail(g, ASTITCH_ERR_GRAPH, "node %d '%s' is already output %d", n,
                              g->node[n].name, i);
    if (!ARRAY_RESERVE(g->output, g->noutput, g->capoutput, 16))
        return graph_fail(g, ASTITCH_ERR_MEMORY, "out of memory adding an output");
    g->output[g->noutput++] = n;
    return ASTITCH_OK;
}

bool graph_add_param(astitch_graph *g, int32_t id)
{
    if (!ARRAY_RESERVE(g->param, g->nparam, g->capparam, 16))
        return false;
    g->node[id].attr.param = g->nparam;
    g->param[g->nparam++] = id;
    return true;
}

int astitch_graph_num_nodes(const astitch_graph *g) { return g ? g->nnode : 0; }
int astitch_graph_num_parameters(const astitch_graph *g) { return g ? g->nparam : 0; }
int astitch_graph_num_outputs(const astitch_graph *g) { return g ? g->noutput : 0; }

astitch_node astitch_graph_parameter(const astitch_graph *g, int i)
{
    return g && i >= 0 && i < g->nparam ? g->param[i] : ASTITCH_NO_NODE;
}

astitch_node astitch_graph_output(const astitch_graph *g, int i)
{
    return g && i >= 0 && i < g->noutput ? g->output[i] : ASTITCH_NO_NODE;
}

astitch_op astitch_node_op(const astitch_graph *g, astitch_node n)
{
    return g && graph_valid_id(g, n) ? g->node[n].op : ASTITCH_OP_COUNT;
}

int astitch_node_num_operands(const astitch_graph *g, astitch_node n)
{
    return g && graph_valid_id(g, n) ? g->node[n].nin : -1;
}

astitch_node astitch_node_operand(const astitch_graph *g, astitch_node n, int i)
{
    if (!g || !graph_valid_id(g, n) || i < 0 || i >= g->node[n].nin)
        return ASTITCH_NO_NODE;
    return goperand(g, n, i);
}

astitch_status astitch_node_info(const astitch_graph *g, astitch_node n, astitch_tensor_info *info)
{
    if (!g || !info)
        return ASTITCH_ERR_ARGUMENT;
    if (!graph_valid_id(g, n))
        return ctx_fail(g->ctx, ASTITCH_ERR_ARGUMENT, "astitch_node_info: no node %d", n);
    const Node *node = &g->node[n];
    memset(info, 0, sizeof *info);
    info->name = node->name;
    info->dtype = node->dtype;
    info->rank = node->shape.rank;
    memcpy(info->dims, node->shape.dim, sizeof info->dims);
    info->elements = shape_elements(&node->shape);
    info->bytes = (size_t)info->elements * astitch_dtype_size(node->dtype);
    return ASTITCH_OK;
}

astitch_status astitch_node_dot_dims(const astitch_graph *g, astitch_node n,
                                     astitch_dot_dims *dims)
{
    if (!g || !dims)
        return ASTITCH_ERR_ARGUMENT;
    if (!graph_valid_id(g, n) || g->node[n].op != ASTITCH_OP_DOT)
        return ctx_fail(g->ctx, ASTITCH_ERR_ARGUMENT, "astitch_node_dot_dims: node %d is no dot",
                        n);
    *dims = g->node[n].attr.dot;
    return ASTITCH_OK;
}

int64_t shape_elements(const Shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++)
        n *= s->dim[i];
    return n;
}

bool shape_equal(const Shape *a, const Shape *b)
{
    if (a->rank != b->rank)
        return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i])
            return false;
    return true;
}

void shape_strides(const Shape *s, int64_t *stride)
{
    int64_t st = 1;
    for (int i = s->rank - 1; i >= 0; i--) {
        stride[i] = st;
        st *= s->dim[i];
    }
}

char *type_str(char *buf, size_t len, astitch_dtype t, const Shape *s)
{
    const char *tn = astitch_dtype_name(t);
    size_t at = (size_t)snprintf(buf, len, "%s[", tn ? tn : "?");
    for (int i = 0; i < s->rank && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, i ? ",%" PRId64 : "%" PRId64, s->dim[i]);
    if (at < len)
        snprintf(buf + at, len - at, "]");
    return buf;
}
