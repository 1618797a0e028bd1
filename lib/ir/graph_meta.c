/* graph_meta.c: the graph's optional name and comment. astitch_graph_destroy frees both. */
#include <stdlib.h>

#include "ir.h"

/* Replaces *slot by a copy of text (NULL clears). */
static astitch_status set_text(astitch_graph *g, char **slot, const char *text, const char *what)
{
    char *copy = NULL;
    if (text && !(copy = graph_strdup(text)))
        return ctx_fail(g->ctx, ASTITCH_ERR_MEMORY, "out of memory setting the graph %s", what);
    free(*slot);
    *slot = copy;
    return ASTITCH_OK;
}

astitch_status astitch_graph_set_name(astitch_graph *g, const char *name)
{
    return g ? set_text(g, &g->name, name, "name") : ASTITCH_ERR_ARGUMENT;
}

astitch_status astitch_graph_set_comment(astitch_graph *g, const char *comment)
{
    return g ? set_text(g, &g->comment, comment, "comment") : ASTITCH_ERR_ARGUMENT;
}

const char *astitch_graph_name(const astitch_graph *g) { return g ? g->name : NULL; }

const char *astitch_graph_comment(const astitch_graph *g) { return g ? g->comment : NULL; }
