/*
 * json_read.c: graph.json text -> graph (docs/graph-format.md).
 *
 *   jansson parse (duplicate keys rejected)   syntax errors carry jansson's line:column
 *   -> json_pos_scan                          line:column of top-level keys and of each node
 *   -> top level: format, version, keys
 *   -> nodes: name, op, keys (json_node.c), unique names
 *   -> inputs resolved by name, topological order (any order in the file; cycles reported)
 *   -> one builder call per node in that order (json_node.c), then names, outputs, verify
 *
 * A file already in topological order keeps its order, so read(write(g)) is g.
 */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* The largest file astitch_graph_load_json reads. */
#define MAX_FILE_BYTES ((size_t)1 << 30)

typedef struct Reader {
    astitch_context *ctx;
    const char *src;
    JsonPosMap pos;
    const json_t *nodes;
    size_t n;
    const char **name;   /* node i's name; NULL until known to be a string */
    astitch_op *op;      /* node i's op; ASTITCH_OP_COUNT until known */
    int32_t *slot;       /* name table: node index or -1; capslot a power of two */
    size_t capslot;
    size_t *first;       /* node i's inputs are input[first[i] .. first[i + 1]) */
    int32_t *input;      /* node indices */
    int32_t *order;      /* topological order of node indices */
    astitch_node *id;    /* node i's id in the graph */
} Reader;

/* Writes s into buf for a message: at most 64 bytes, control characters as '?'. */
static const char *show(char *buf, size_t len, const char *s)
{
    size_t i = 0;
    for (; s[i] && i + 4 < len && i < 64; i++)
        buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    if (s[i])
        memcpy(buf + i, "...", 3), i += 3;
    buf[i] = '\0';
    return buf;
}

static astitch_status fail_at(Reader *r, astitch_status s, JsonPos p, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static astitch_status fail_at(Reader *r, astitch_status s, JsonPos p, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx_fail(r->ctx, s, "%s:%d:%d: %s", r->src, p.line, p.col, msg);
    ctx_error_at_position(r->ctx, p.line, p.col);
    return s;
}

static JsonPos node_pos(const Reader *r, size_t i)
{
    return i < r->pos.nnode ? r->pos.node[i] : json_pos_key(&r->pos, "nodes");
}

/* Fails about node i: "FILE:L:C: node I 'name' (op): ..." with what is known of it. */
static astitch_status fail_node(Reader *r, size_t i, astitch_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static astitch_status fail_node(Reader *r, size_t i, astitch_status s, const char *fmt, ...)
{
    char msg[800], name[72], head[120];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int at = snprintf(head, sizeof head, "node %zu", i);
    if (r->name[i])
        at += snprintf(head + at, sizeof head - (size_t)at, " '%s'",
                       show(name, sizeof name, r->name[i]));
    if (r->op[i] != ASTITCH_OP_COUNT)
        snprintf(head + at, sizeof head - (size_t)at, " (%s)", astitch_op_name(r->op[i]));
    return fail_at(r, s, node_pos(r, i), "%s: %s", head, msg);
}

static const char *jtype(const json_t *v)
{
    static const char *const names[] = {"an object", "an array", "a string", "an integer",
                                        "a real number", "true", "false", "null"};
    return names[json_typeof(v)];
}

static uint32_t hash_name(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* The slot of name: holding its node index, or -1 where it would go. */
static int32_t *find_slot(const Reader *r, const char *name)
{
    size_t mask = r->capslot - 1;
    for (size_t i = hash_name(name) & mask;; i = (i + 1) & mask)
        if (r->slot[i] < 0 || strcmp(r->name[r->slot[i]], name) == 0)
            return &r->slot[i];
}

/* Checks that top-level key is present and an array (of what). */
static astitch_status top_array(Reader *r, const json_t *root, const char *key, const char *of)
{
    const json_t *v = json_object_get(root, key);
    if (!v)
        return fail_at(r, ASTITCH_ERR_PARSE, r->pos.root, "missing \"%s\"", key);
    if (!json_is_array(v))
        return fail_at(r, ASTITCH_ERR_PARSE, json_pos_key(&r->pos, key),
                       "\"%s\" must be an array of %s, not %s", key, of, jtype(v));
    return ASTITCH_OK;
}

static astitch_status check_top(Reader *r, const json_t *root)
{
    static const char *const keys[] = {"format", "version", "name", "comment", "nodes",
                                       "outputs"};
    char buf[72];
    if (!json_is_object(root))
        return fail_at(r, ASTITCH_ERR_PARSE, r->pos.root,
                       "the top level must be an object, not %s", jtype(root));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)root, key, v) {
        size_t k = 0;
        while (k < sizeof keys / sizeof *keys && strcmp(keys[k], key) != 0)
            k++;
        if (k == sizeof keys / sizeof *keys)
            return fail_at(r, ASTITCH_ERR_PARSE, json_pos_key(&r->pos, key),
                           "unknown top-level key \"%s\"", show(buf, sizeof buf, key));
    }
    const json_t *format = json_object_get(root, "format");
    if (!format)
        return fail_at(r, ASTITCH_ERR_PARSE, r->pos.root,
                       "missing \"format\": \"astitch-graph\"");
    if (!json_is_string(format) || strcmp(json_string_value(format), "astitch-graph") != 0)
        return fail_at(r, ASTITCH_ERR_PARSE, json_pos_key(&r->pos, "format"),
                       "\"format\" must be \"astitch-graph\"");
    const json_t *version = json_object_get(root, "version");
    if (!version)
        return fail_at(r, ASTITCH_ERR_PARSE, r->pos.root, "missing \"version\": 1");
    if (!json_is_integer(version))
        return fail_at(r, ASTITCH_ERR_PARSE, json_pos_key(&r->pos, "version"),
                       "\"version\" must be the integer 1, not %s", jtype(version));
    if (json_integer_value(version) != 1)
        return fail_at(r, ASTITCH_ERR_UNSUPPORTED, json_pos_key(&r->pos, "version"),
                       "unsupported version %lld; this reader knows version 1",
                       (long long)json_integer_value(version));
    for (int k = 0; k < 2; k++) {
        const char *text_key = k ? "comment" : "name";
        const json_t *t = json_object_get(root, text_key);
        if (t && !json_is_string(t))
            return fail_at(r, ASTITCH_ERR_PARSE, json_pos_key(&r->pos, text_key),
                           "\"%s\" must be a string, not %s", text_key, jtype(t));
    }
    astitch_status s = top_array(r, root, "nodes", "node objects");
    if (s != ASTITCH_OK || (s = top_array(r, root, "outputs", "node names")) != ASTITCH_OK)
        return s;
    if (json_array_size(json_object_get(root, "outputs")) == 0)
        return fail_at(r, ASTITCH_ERR_GRAPH, json_pos_key(&r->pos, "outputs"),
                       "\"outputs\" is empty; a graph needs at least one output");
    return ASTITCH_OK;
}

/* Checks each node's name, op and keys; fills r->name, r->op and the name table. */
static astitch_status check_nodes(Reader *r)
{
    char buf[72];
    for (size_t i = 0; i < r->n; i++) {
        const json_t *obj = json_array_get(r->nodes, i);
        if (!json_is_object(obj))
            return fail_node(r, i, ASTITCH_ERR_PARSE, "must be an object, not %s", jtype(obj));
        const json_t *name = json_object_get(obj, "name");
        const json_t *op = json_object_get(obj, "op");
        if (!name)
            return fail_node(r, i, ASTITCH_ERR_PARSE, "missing \"name\"");
        if (!json_is_string(name))
            return fail_node(r, i, ASTITCH_ERR_PARSE, "\"name\" must be a string, not %s",
                             jtype(name));
        if (!*json_string_value(name))
            return fail_node(r, i, ASTITCH_ERR_PARSE, "\"name\" is empty");
        r->name[i] = json_string_value(name);
        if (!op)
            return fail_node(r, i, ASTITCH_ERR_PARSE, "missing \"op\"");
        if (!json_is_string(op))
            return fail_node(r, i, ASTITCH_ERR_PARSE, "\"op\" must be a string, not %s",
                             jtype(op));
        if (astitch_op_from_name(json_string_value(op), &r->op[i]) != ASTITCH_OK) {
            r->op[i] = ASTITCH_OP_COUNT;
            return fail_node(r, i, ASTITCH_ERR_PARSE, "unknown op \"%s\"",
                             show(buf, sizeof buf, json_string_value(op)));
        }
        char why[600];
        if (!json_node_check(obj, r->op[i], why, sizeof why))
            return fail_node(r, i, ASTITCH_ERR_PARSE, "%s", why);
        int32_t *slot = find_slot(r, r->name[i]);
        if (*slot >= 0) {
            JsonPos p = node_pos(r, (size_t)*slot);
            return fail_node(r, i, ASTITCH_ERR_GRAPH, "duplicate name '%s' (also node %d at %d:%d)",
                             show(buf, sizeof buf, r->name[i]), *slot, p.line, p.col);
        }
        *slot = (int32_t)i;
    }
    return ASTITCH_OK;
}

/* Resolves every node's "inputs" to node indices. */
static astitch_status resolve_inputs(Reader *r)
{
    size_t total = 0;
    for (size_t i = 0; i < r->n; i++)
        total += json_array_size(json_object_get(json_array_get(r->nodes, i), "inputs"));
    r->input = malloc((total ? total : 1) * sizeof *r->input);
    if (!r->input)
        return ctx_fail(r->ctx, ASTITCH_ERR_MEMORY, "%s: out of memory", r->src);
    size_t at = 0;
    char buf[2][72];
    for (size_t i = 0; i < r->n; i++) {
        const json_t *in = json_object_get(json_array_get(r->nodes, i), "inputs");
        r->first[i] = at;
        for (size_t k = 0; k < json_array_size(in); k++) {
            const char *name = json_string_value(json_array_get(in, k));
            int32_t j = *find_slot(r, name);
            if (j < 0)
                return fail_node(r, i, ASTITCH_ERR_GRAPH, "node '%s' refers to unknown node '%s'",
                                 show(buf[0], sizeof buf[0], r->name[i]),
                                 show(buf[1], sizeof buf[1], name));
            r->input[at++] = j;
        }
    }
    r->first[r->n] = at;
    return ASTITCH_OK;
}

/* Reports the cycle closed by an edge to u, which sits at stack[p]; the stack holds consumers
 * above their inputs, so data flows from the top of the stack down to p. */
static astitch_status fail_cycle(Reader *r, const int32_t *stack, size_t p, size_t sp)
{
    char msg[700], buf[72];
    size_t at = (size_t)snprintf(msg, sizeof msg, "cycle: %s",
                                 show(buf, sizeof buf, r->name[stack[p]]));
    for (size_t k = sp; k-- > p && at < sizeof msg;) {
        if (at + 80 >= sizeof msg) {
            snprintf(msg + at, sizeof msg - at, " -> ...");
            break;
        }
        at += (size_t)snprintf(msg + at, sizeof msg - at, " -> %s",
                               show(buf, sizeof buf, r->name[stack[k]]));
    }
    return fail_node(r, (size_t)stack[p], ASTITCH_ERR_GRAPH, "%s", msg);
}

/* Orders the nodes so that inputs come first: depth-first, visiting nodes and inputs in file
 * order, so that a file already in order keeps it. */
static astitch_status sort_nodes(Reader *r)
{
    size_t n = r->n ? r->n : 1;
    uint8_t *state = calloc(n, 1); /* 0 unseen, 1 on the stack, 2 done */
    int32_t *stack = malloc(n * sizeof *stack);
    size_t *next = malloc(n * sizeof *next);
    astitch_status s = ASTITCH_OK;
    if (!state || !stack || !next) {
        s = ctx_fail(r->ctx, ASTITCH_ERR_MEMORY, "%s: out of memory", r->src);
        goto out;
    }
    size_t done = 0;
    for (size_t root = 0; root < r->n; root++) {
        if (state[root])
            continue;
        size_t sp = 0;
        stack[sp] = (int32_t)root, next[sp++] = r->first[root], state[root] = 1;
        while (sp > 0) {
            int32_t v = stack[sp - 1];
            if (next[sp - 1] == r->first[v + 1]) {
                state[v] = 2;
                r->order[done++] = v;
                sp--;
                continue;
            }
            int32_t u = r->input[next[sp - 1]++];
            if (state[u] == 0) {
                stack[sp] = u, next[sp++] = r->first[u], state[u] = 1;
            } else if (state[u] == 1) {
                size_t p = sp;
                while (stack[--p] != u)
                    ;
                s = fail_cycle(r, stack, p, sp);
                goto out;
            }
        }
    }
out:
    free(state);
    free(stack);
    free(next);
    return s;
}

static astitch_status build_nodes(Reader *r, astitch_graph *g)
{
    astitch_node *in = NULL;
    size_t capin = 0;
    astitch_status s = ASTITCH_OK;
    for (size_t k = 0; k < r->n && s == ASTITCH_OK; k++) {
        int32_t i = r->order[k];
        size_t nin = r->first[i + 1] - r->first[i];
        if (nin > capin) {
            astitch_node *grown = realloc(in, nin * sizeof *in);
            if (!grown) {
                s = ctx_fail(r->ctx, ASTITCH_ERR_MEMORY, "%s: out of memory", r->src);
                break;
            }
            in = grown, capin = nin;
        }
        for (size_t j = 0; j < nin; j++)
            in[j] = r->id[r->input[r->first[i] + j]];
        char why[700];
        astitch_status bs;
        r->id[i] = json_node_build(g, json_array_get(r->nodes, (size_t)i), r->op[i], in,
                                   (int)nin, why, sizeof why, &bs);
        if (r->id[i] == ASTITCH_NO_NODE)
            s = fail_node(r, (size_t)i, bs, "%s", why);
        else if ((bs = astitch_set_name(g, r->id[i], r->name[i])) != ASTITCH_OK)
            s = fail_node(r, (size_t)i, bs, "%s", astitch_last_error(r->ctx));
    }
    free(in);
    return s;
}

static astitch_status add_outputs(Reader *r, astitch_graph *g, const json_t *outputs)
{
    char buf[72];
    for (size_t k = 0; k < json_array_size(outputs); k++) {
        JsonPos p = k < r->pos.noutput ? r->pos.output[k] : json_pos_key(&r->pos, "outputs");
        const json_t *v = json_array_get(outputs, k);
        if (!json_is_string(v))
            return fail_at(r, ASTITCH_ERR_PARSE, p,
                           "\"outputs\"[%zu] must be a node name (a string), not %s", k, jtype(v));
        const char *name = json_string_value(v);
        int32_t i = *find_slot(r, name);
        if (i < 0)
            return fail_at(r, ASTITCH_ERR_GRAPH, p, "output '%s' is not a node",
                           show(buf, sizeof buf, name));
        for (size_t j = 0; j < k; j++)
            if (strcmp(json_string_value(json_array_get(outputs, j)), name) == 0)
                return fail_at(r, ASTITCH_ERR_GRAPH, p, "output '%s' is listed twice",
                               show(buf, sizeof buf, name));
        if (astitch_add_output(g, r->id[i]) != ASTITCH_OK)
            return fail_at(r, astitch_graph_status(g), p, "%s", astitch_last_error(r->ctx));
    }
    return ASTITCH_OK;
}

static astitch_status read_graph(Reader *r, const json_t *root, astitch_graph **out)
{
    astitch_status s = check_top(r, root);
    if (s != ASTITCH_OK)
        return s;
    r->nodes = json_object_get(root, "nodes");
    r->n = json_array_size(r->nodes);
    if (r->n > INT32_MAX / 4)
        return fail_at(r, ASTITCH_ERR_MEMORY, json_pos_key(&r->pos, "nodes"), "too many nodes");
    size_t n = r->n ? r->n : 1;
    for (r->capslot = 16; r->capslot < 2 * n;)
        r->capslot *= 2;
    r->name = calloc(n, sizeof *r->name);
    r->op = malloc(n * sizeof *r->op);
    r->slot = malloc(r->capslot * sizeof *r->slot);
    r->first = malloc((n + 1) * sizeof *r->first);
    r->order = malloc(n * sizeof *r->order);
    r->id = malloc(n * sizeof *r->id);
    if (!r->name || !r->op || !r->slot || !r->first || !r->order || !r->id)
        return ctx_fail(r->ctx, ASTITCH_ERR_MEMORY, "%s: out of memory", r->src);
    for (size_t i = 0; i < n; i++)
        r->op[i] = ASTITCH_OP_COUNT;
    memset(r->slot, 0xff, r->capslot * sizeof *r->slot);
    if ((s = check_nodes(r)) != ASTITCH_OK || (s = resolve_inputs(r)) != ASTITCH_OK ||
        (s = sort_nodes(r)) != ASTITCH_OK)
        return s;
    astitch_graph *g;
    if ((s = astitch_graph_create(r->ctx, &g)) != ASTITCH_OK)
        return s;
    const json_t *name = json_object_get(root, "name");
    const json_t *comment = json_object_get(root, "comment");
    if ((s = build_nodes(r, g)) == ASTITCH_OK &&
        (s = add_outputs(r, g, json_object_get(root, "outputs"))) == ASTITCH_OK &&
        (s = astitch_graph_set_name(g, json_string_value(name))) == ASTITCH_OK &&
        (s = astitch_graph_set_comment(g, json_string_value(comment))) == ASTITCH_OK &&
        (s = astitch_graph_verify(g)) != ASTITCH_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", astitch_last_error(r->ctx));
        fail_at(r, s, r->pos.root, "%s", msg);
    }
    if (s != ASTITCH_OK) {
        astitch_graph_destroy(g);
        return s;
    }
    *out = g;
    return ASTITCH_OK;
}

/* Copies jansson's message, which quotes the offending bytes, with bytes outside printable
 * ASCII written as \xNN: input may be binary. */
static void printable(char *out, size_t len, const char *text)
{
    size_t at = 0;
    for (const unsigned char *c = (const unsigned char *)text; *c && at + 5 < len; c++) {
        if (*c >= 0x20 && *c < 0x7f)
            out[at++] = (char)*c;
        else
            at += (size_t)snprintf(out + at, len - at, "\\x%02x", *c);
    }
    out[at] = '\0';
}

/* Reports jansson's error e, or the NUL byte where jansson stopped, calling it the end. */
static astitch_status syntax_error(astitch_context *ctx, const char *src, const char *text,
                                   size_t len, const json_error_t *e)
{
    const char *nul = len ? memchr(text, '\0', len) : NULL;
    if (nul && e->position >= 0 && (size_t)e->position >= (size_t)(nul - text)) {
        JsonPos at = {1, 0};
        for (const char *c = text; c <= nul; c++)
            if (*c == '\n')
                at.line++, at.col = 0;
            else if ((*c & 0xC0) != 0x80)
                at.col++;
        ctx_fail(ctx, ASTITCH_ERR_PARSE, "%s:%d:%d: NUL byte in the text", src, at.line, at.col);
        ctx_error_at_position(ctx, at.line, at.col);
        return ASTITCH_ERR_PARSE;
    }
    char msg[4 * JSON_ERROR_TEXT_LENGTH + 8];
    printable(msg, sizeof msg, e->text);
    int line = e->line > 0 ? e->line : 1, col = e->column > 0 ? e->column : 1;
    astitch_status s = ASTITCH_ERR_PARSE;
    if (len == 0)
        ctx_fail(ctx, s, "%s:%d:%d: empty input: no graph", src, line = 1, col = 1);
    else if (json_error_code(e) == json_error_stack_overflow)
        ctx_fail(ctx, s, "%s:%d:%d: arrays and objects nested too deeply (more than %d levels)",
                 src, line, col, JSON_PARSER_MAX_DEPTH);
    else if (json_error_code(e) == json_error_out_of_memory)
        ctx_fail(ctx, s = ASTITCH_ERR_MEMORY, "%s:%d:%d: out of memory", src, line, col);
    else
        ctx_fail(ctx, s, "%s:%d:%d: %s", src, line, col, msg);
    ctx_error_at_position(ctx, line, col);
    return s;
}

astitch_status astitch_graph_read_json(astitch_context *ctx, const char *text, size_t len,
                                       const char *source, astitch_graph **out)
{
    if (out)
        *out = NULL;
    if (!ctx)
        return ASTITCH_ERR_ARGUMENT;
    if (!out || (!text && len))
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "astitch_graph_read_json: no text or no out");
    const char *src = source ? source : "<graph>";
    json_error_t err;
    json_t *root = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return syntax_error(ctx, src, text, len, &err);
    Reader r = {.ctx = ctx, .src = src};
    astitch_status s;
    if (!json_pos_scan(text, len, &r.pos))
        s = ctx_fail(ctx, ASTITCH_ERR_MEMORY, "%s: out of memory", src);
    else
        s = read_graph(&r, root, out);
    json_pos_free(&r.pos);
    free(r.name);
    free(r.op);
    free(r.slot);
    free(r.first);
    free(r.input);
    free(r.order);
    free(r.id);
    json_decref(root);
    return s;
}

astitch_status astitch_graph_load_json(astitch_context *ctx, const char *path,
                                       astitch_graph **out)
{
    if (out)
        *out = NULL;
    if (!ctx)
        return ASTITCH_ERR_ARGUMENT;
    if (!path || !out)
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "astitch_graph_load_json: no path or no out");
    FILE *f = fopen(path, "rb");
    if (!f)
        return ctx_fail(ctx, ASTITCH_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    astitch_status s = ASTITCH_OK;
    for (;;) {
        if (len == cap) {
            if (cap >= MAX_FILE_BYTES) {
                s = ctx_fail(ctx, ASTITCH_ERR_PARSE, "%s: larger than %zu bytes; not a graph",
                             path, MAX_FILE_BYTES);
                break;
            }
            cap = cap ? cap * 2 : 65536;
            char *grown = realloc(buf, cap);
            if (!grown) {
                s = ctx_fail(ctx, ASTITCH_ERR_MEMORY, "%s: out of memory", path);
                break;
            }
            buf = grown;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                s = ctx_fail(ctx, ASTITCH_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (s == ASTITCH_OK)
        s = astitch_graph_read_json(ctx, buf, len, path, out);
    free(buf);
    return s;
}
