/*
 * json_pos.c: where things start in graph.json text, for error messages.
 *
 * jansson reports line:column for syntax errors only; once a document parsed, node errors need
 * the place of the node in the text. This scan finds it. It is not a parser: it runs only on
 * text jansson accepted, and tracks strings, escapes and bracket depth, nothing else.
 * Lines and columns count as jansson counts them: both 1-based, a column per UTF-8 character.
 */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* Appends one element to the array *p of n elements; the capacity is 8, then each power of two
 * that n reaches doubles it. */
static bool push(void **p, size_t *n, size_t size, const void *elem)
{
    if (*n == 0 || (*n >= 8 && (*n & (*n - 1)) == 0)) {
        size_t cap = *n ? *n * 2 : 8;
        void *q = realloc(*p, cap * size);
        if (!q)
            return false;
        *p = q;
    }
    memcpy((char *)*p + *n * size, elem, size);
    (*n)++;
    return true;
}

static void advance(JsonPos *at, unsigned char c)
{
    if (c == '\n') {
        at->line++;
        at->col = 0;
    } else if ((c & 0xC0) != 0x80) {
        at->col++;
    }
}

static bool is_key(const JsonKeyPos *k, const char *key)
{
    return k && k->len == strlen(key) && memcmp(k->key, key, k->len) == 0;
}

bool json_pos_scan(const char *text, size_t len, JsonPosMap *m)
{
    memset(m, 0, sizeof *m);
    m->root = (JsonPos){1, 1};
    JsonPos at = {1, 0};
    int depth = 0;
    JsonPos **track = NULL; /* the depth-2 array whose elements are recorded */
    size_t *ntrack = NULL;
    bool want_key = false, want_elem = false;
    const JsonKeyPos *last = NULL; /* the latest top-level key */
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        advance(&at, c);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
            continue;
        if (want_elem && depth == 2 && c != ']') {
            if (!push((void **)track, ntrack, sizeof **track, &at))
                return false;
            want_elem = false;
        }
        switch (c) {
        case '"': {
            JsonKeyPos k = {text + i + 1, 0, at};
            for (i++; i < len && text[i] != '"'; i++) {
                advance(&at, (unsigned char)text[i]);
                if (text[i] == '\\' && i + 1 < len)
                    advance(&at, (unsigned char)text[++i]);
            }
            if (i < len)
                advance(&at, '"');
            if (depth == 1 && want_key) {
                k.len = (size_t)(text + i - k.key);
                if (!push((void **)&m->key, &m->nkey, sizeof k, &k))
                    return false;
                last = &m->key[m->nkey - 1];
                want_key = false;
            }
            break;
        }
        case '{':
        case '[':
            depth++;
            if (depth == 1) {
                m->root = at;
                want_key = c == '{';
            } else if (depth == 2 && c == '[' && is_key(last, "nodes")) {
                track = &m->node, ntrack = &m->nnode, want_elem = true;
            } else if (depth == 2 && c == '[' && is_key(last, "outputs")) {
                track = &m->output, ntrack = &m->noutput, want_elem = true;
            }
            break;
        case '}':
        case ']':
            depth--;
            if (depth == 1)
                track = NULL, want_elem = false;
            break;
        case ',':
            if (depth == 1)
                want_key = true;
            else if (depth == 2 && track)
                want_elem = true;
            break;
        default:
            break;
        }
    }
    return true;
}

void json_pos_free(JsonPosMap *m)
{
    free(m->key);
    free(m->node);
    free(m->output);
    memset(m, 0, sizeof *m);
}

JsonPos json_pos_key(const JsonPosMap *m, const char *key)
{
    for (size_t i = 0; i < m->nkey; i++)
        if (is_key(&m->key[i], key))
            return m->key[i].pos;
    return m->root;
}
