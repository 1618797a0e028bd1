/*
 * json_write.c: graph -> graph.json text (docs/graph-format.md), one node per line in id order
 * (a topological order), so that astitch_graph_read_json gives the same graph back: names,
 * attributes and constant values exact (shortest decimal that reads back to the same double;
 * non-finite values as "nan", "inf", "-inf").
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct Buf {
    char *p;
    size_t len, cap;
    bool oom;
} Buf;

static void put(Buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (b->len + n + 1 > cap)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void puts_(Buf *b, const char *s) { put(b, s, strlen(s)); }

static void printf_(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void printf_(Buf *b, const char *fmt, ...)
{
    char tmp[64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof tmp)
        put(b, tmp, (size_t)n);
    else
        b->oom = true; /* only short numbers are printed this way */
}

/* Writes s as a JSON string. */
static void put_string(Buf *b, const char *s)
{
    puts_(b, "\"");
    for (const char *run = s;; s++) {
        unsigned char c = (unsigned char)*s;
        if (c && c >= 0x20 && c != '"' && c != '\\')
            continue;
        put(b, run, (size_t)(s - run));
        if (!c)
            break;
        switch (c) {
        case '"': puts_(b, "\\\""); break;
        case '\\': puts_(b, "\\\\"); break;
        case '\n': puts_(b, "\\n"); break;
        case '\t': puts_(b, "\\t"); break;
        case '\r': puts_(b, "\\r"); break;
        default: printf_(b, "\\u%04x", c); break;
        }
        run = s + 1;
    }
    puts_(b, "\"");
}

static void put_ints(Buf *b, const int64_t *v, int n)
{
    puts_(b, "[");
    for (int i = 0; i < n; i++)
        printf_(b, i ? ", %lld" : "%lld", (long long)v[i]);
    puts_(b, "]");
}

static void put_key_ints(Buf *b, const char *key, const int64_t *v, int n)
{
    printf_(b, ", \"%s\": ", key);
    put_ints(b, v, n);
}

/* Writes one constant element of dtype t. */
static void put_value(Buf *b, double v, astitch_dtype t)
{
    if (t == ASTITCH_BOOL) {
        puts_(b, v != 0 ? "true" : "false");
        return;
    }
    if (isnan(v)) {
        puts_(b, "\"nan\"");
        return;
    }
    if (isinf(v)) {
        puts_(b, v > 0 ? "\"inf\"" : "\"-inf\"");
        return;
    }
    if (dtype_is_int(t) && v == floor(v) && fabs(v) < 0x1p63) {
        printf_(b, "%lld", (long long)v);
        return;
    }
    if (v == 0) {
        puts_(b, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    for (char *c = tmp; *c; c++) /* a locale with a decimal comma */
        if (*c == ',')
            *c = '.';
    puts_(b, tmp);
    if (!strpbrk(tmp, ".e")) /* say "float": 768.0, not 768 */
        puts_(b, ".0");
}

static void put_shape(Buf *b, const Shape *s) { put_key_ints(b, "shape", s->dim, s->rank); }

static void put_node(Buf *b, const astitch_graph *g, int32_t id)
{
    const Node *n = gnode(g, id);
    const NodeAttr *a = &n->attr;
    int in_rank = n->nin > 0 ? gnode(g, goperand(g, id, 0))->shape.rank : 0;
    puts_(b, "{\"name\": ");
    put_string(b, n->name);
    printf_(b, ", \"op\": \"%s\"", astitch_op_name(n->op));
    if (n->op == ASTITCH_OP_REDUCE)
        printf_(b, ", \"kind\": \"%s\"", astitch_reduce_name(a->reduce));
    if (n->op == ASTITCH_OP_CUSTOM) {
        puts_(b, ", \"target\": ");
        put_string(b, a->target);
    }
    if (n->nin > 0 || n->op == ASTITCH_OP_CUSTOM) {
        puts_(b, ", \"inputs\": [");
        for (int k = 0; k < n->nin; k++) {
            puts_(b, k ? ", " : "");
            put_string(b, gnode(g, goperand(g, id, k))->name);
        }
        puts_(b, "]");
    }
    switch (n->op) {
    case ASTITCH_OP_PARAMETER:
    case ASTITCH_OP_CONSTANT:
    case ASTITCH_OP_IOTA:
    case ASTITCH_OP_CUSTOM:
        printf_(b, ", \"dtype\": \"%s\"", astitch_dtype_name(n->dtype));
        put_shape(b, &n->shape);
        break;
    case ASTITCH_OP_CONVERT: printf_(b, ", \"dtype\": \"%s\"", astitch_dtype_name(n->dtype)); break;
    case ASTITCH_OP_RESHAPE: put_shape(b, &n->shape); break;
    case ASTITCH_OP_BROADCAST_IN_DIM:
        put_shape(b, &n->shape);
        put_key_ints(b, "broadcast_dimensions", a->dims, in_rank);
        break;
    case ASTITCH_OP_TRANSPOSE: put_key_ints(b, "permutation", a->dims, in_rank); break;
    case ASTITCH_OP_SLICE: {
        put_key_ints(b, "start", a->dims, in_rank);
        put_key_ints(b, "limit", a->limit, in_rank);
        bool unit = true;
        for (int i = 0; i < in_rank; i++)
            unit = unit && a->stride[i] == 1;
        if (!unit)
            put_key_ints(b, "strides", a->stride, in_rank);
        break;
    }
    case ASTITCH_OP_REDUCE: {
        int64_t axes[MAX_RANK];
        int na = 0;
        for (int i = 0; i < MAX_RANK; i++)
            if (a->axes & (1u << i))
                axes[na++] = i;
        put_key_ints(b, "axes", axes, na);
        break;
    }
    case ASTITCH_OP_DOT:
        if (a->dot.nbatch > 0) {
            put_key_ints(b, "lhs_batch_dims", a->dot.lhs_batch, a->dot.nbatch);
            put_key_ints(b, "rhs_batch_dims", a->dot.rhs_batch, a->dot.nbatch);
        }
        put_key_ints(b, "lhs_contracting_dims", a->dot.lhs_contract, a->dot.ncontract);
        put_key_ints(b, "rhs_contracting_dims", a->dot.rhs_contract, a->dot.ncontract);
        break;
    default:
        break;
    }
    if (n->op == ASTITCH_OP_IOTA || n->op == ASTITCH_OP_CONCATENATE)
        printf_(b, ", \"axis\": %d", a->axis);
    if (n->op == ASTITCH_OP_CONSTANT) {
        if (a->nvalues == 1) {
            puts_(b, ", \"value\": ");
            put_value(b, a->values[0], n->dtype);
        } else {
            puts_(b, ", \"values\": [");
            for (int64_t i = 0; i < a->nvalues; i++) {
                puts_(b, i ? ", " : "");
                put_value(b, a->values[i], n->dtype);
            }
            puts_(b, "]");
        }
    }
    puts_(b, "}");
}

astitch_status astitch_graph_write_json(const astitch_graph *g, char **text)
{
    if (text)
        *text = NULL;
    if (!g)
        return ASTITCH_ERR_ARGUMENT;
    if (!text)
        return ctx_fail(g->ctx, ASTITCH_ERR_ARGUMENT, "astitch_graph_write_json: no text");
    if (g->status != ASTITCH_OK)
        return ctx_fail(g->ctx, g->status,
                        "astitch_graph_write_json: the graph is incomplete (a builder failed)");
    Buf b = {0};
    puts_(&b, "{\n  \"format\": \"astitch-graph\",\n  \"version\": 1,\n");
    if (g->name) {
        puts_(&b, "  \"name\": ");
        put_string(&b, g->name);
        puts_(&b, ",\n");
    }
    if (g->comment) {
        puts_(&b, "  \"comment\": ");
        put_string(&b, g->comment);
        puts_(&b, ",\n");
    }
    puts_(&b, "  \"nodes\": [");
    for (int32_t i = 0; i < g->nnode; i++) {
        puts_(&b, i ? ",\n    " : "\n    ");
        put_node(&b, g, i);
    }
    puts_(&b, g->nnode ? "\n  ],\n  \"outputs\": [" : "],\n  \"outputs\": [");
    for (int32_t i = 0; i < g->noutput; i++) {
        puts_(&b, i ? ", " : "");
        put_string(&b, gnode(g, g->output[i])->name);
    }
    puts_(&b, "]\n}\n");
    if (b.oom) {
        free(b.p);
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "astitch_graph_write_json: out of memory");
    }
    *text = b.p;
    return ASTITCH_OK;
}

astitch_status astitch_graph_save_json(const astitch_graph *g, const char *path)
{
    if (!g)
        return ASTITCH_ERR_ARGUMENT;
    if (!path)
        return ctx_fail(g->ctx, ASTITCH_ERR_ARGUMENT, "astitch_graph_save_json: no path");
    char *text;
    astitch_status s = astitch_graph_write_json(g, &text);
    if (s != ASTITCH_OK)
        return s;
    FILE *f = fopen(path, "wb");
    if (!f) {
        s = ctx_fail(g->ctx, ASTITCH_ERR_IO, "%s: cannot open for writing: %s", path,
                     strerror(errno));
    } else {
        size_t len = strlen(text);
        bool ok = fwrite(text, 1, len, f) == len;
        ok = fclose(f) == 0 && ok;
        if (!ok)
            s = ctx_fail(g->ctx, ASTITCH_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    }
    free(text);
    return s;
}
