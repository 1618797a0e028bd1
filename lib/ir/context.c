/* context.c: contexts, error messages, the custom-op registry, status names, version. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

const char *astitch_version(void) { return ASTITCH_VERSION_STRING; }

const char *astitch_status_name(astitch_status s)
{
    switch (s) {
    case ASTITCH_OK: return "ok";
    case ASTITCH_ERR_ARGUMENT: return "invalid argument";
    case ASTITCH_ERR_PARSE: return "parse error";
    case ASTITCH_ERR_GRAPH: return "invalid graph";
    case ASTITCH_ERR_UNSUPPORTED: return "unsupported";
    case ASTITCH_ERR_MEMORY: return "out of memory";
    case ASTITCH_ERR_IO: return "i/o error";
    case ASTITCH_ERR_NO_DEVICE: return "no device";
    case ASTITCH_ERR_DEVICE: return "device error";
    case ASTITCH_ERR_COMPILE: return "compile error";
    case ASTITCH_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

astitch_status astitch_context_create(astitch_context **out)
{
    if (!out)
        return ASTITCH_ERR_ARGUMENT;
    *out = calloc(1, sizeof **out);
    if (!*out)
        return ASTITCH_ERR_MEMORY;
    (*out)->error_node = ASTITCH_NO_NODE;
    if (!config_from_env(&(*out)->config)) {
        astitch_context_destroy(*out);
        *out = NULL;
        return ASTITCH_ERR_MEMORY;
    }
    return ASTITCH_OK;
}

astitch_status astitch_context_set_option(astitch_context *ctx, const char *name,
                                          const char *value)
{
    if (!ctx)
        return ASTITCH_ERR_ARGUMENT;
    int sw = config_switch_named(name);
    if (sw < 0) {
        char list[128] = "";
        for (int i = 0; config_switch_name(i); i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     config_switch_name(i));
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT,
                        "astitch_context_set_option: no switch named '%s' (the switches: %s)",
                        name ? name : "(null)", list);
    }
    if (!config_set(&ctx->config, (ConfigSwitch)sw, value))
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "out of memory");
    return ASTITCH_OK;
}

const char *astitch_context_option(const astitch_context *ctx, const char *name)
{
    int sw = config_switch_named(name);
    return ctx && sw >= 0 ? ctx->config.value[sw] : NULL;
}

void astitch_context_destroy(astitch_context *ctx)
{
    if (!ctx)
        return;
    for (int i = 0; i < ctx->ncustom; i++)
        free(ctx->custom[i].target);
    free(ctx->custom);
    config_free(&ctx->config);
    free(ctx);
}

const char *astitch_last_error(const astitch_context *ctx) { return ctx ? ctx->error : ""; }

astitch_node astitch_last_error_node(const astitch_context *ctx)
{
    return ctx ? ctx->error_node : ASTITCH_NO_NODE;
}

int astitch_last_error_position(const astitch_context *ctx, int *line, int *column)
{
    if (!ctx || ctx->error_line <= 0)
        return 0;
    if (line)
        *line = ctx->error_line;
    if (column)
        *column = ctx->error_col;
    return 1;
}

void ctx_error_at_node(astitch_context *ctx, int32_t node)
{
    if (ctx)
        ctx->error_node = node;
}

void ctx_error_at_position(astitch_context *ctx, int line, int column)
{
    if (ctx) {
        ctx->error_line = line;
        ctx->error_col = column;
    }
}

void astitch_free(void *p) { free(p); }

void astitch_assert_fail(const char *cond, const char *file, int line)
{
    fprintf(stderr, "astitch: internal invariant broken at %s:%d: %s\n", file, line, cond);
    abort();
}

astitch_status ctx_failv(astitch_context *ctx, astitch_status s, const char *fmt, va_list ap)
{
    if (ctx) {
        vsnprintf(ctx->error, sizeof ctx->error, fmt, ap);
        ctx->error_node = ASTITCH_NO_NODE;
        ctx->error_line = ctx->error_col = 0;
    }
    return s;
}

void ctx_shadow(const astitch_context *ctx, astitch_context *out)
{
    memset(out, 0, sizeof *out);
    out->error_node = ASTITCH_NO_NODE;
    out->custom = ctx->custom;
    out->ncustom = ctx->ncustom;
    out->config = ctx->config;
}

astitch_status ctx_fail(astitch_context *ctx, astitch_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ctx_failv(ctx, s, fmt, ap);
    va_end(ap);
    return s;
}

const CustomFn *ctx_custom(const astitch_context *ctx, const char *target)
{
    for (int i = 0; ctx && target && i < ctx->ncustom; i++)
        if (strcmp(ctx->custom[i].target, target) == 0)
            return &ctx->custom[i];
    return NULL;
}

/* The registry entry of target for registration call `who`, made (with no forms) when there
 * is none, in *out; fails naming `who` when target or the function (has_fn) is missing. */
static astitch_status custom_entry(astitch_context *ctx, const char *target, bool has_fn,
                                   const char *who, CustomFn **out)
{
    if (!target || !*target || !has_fn)
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT, "%s: target and function must be given", who);
    for (int i = 0; i < ctx->ncustom; i++)
        if (strcmp(ctx->custom[i].target, target) == 0) {
            *out = &ctx->custom[i];
            return ASTITCH_OK;
        }
    CustomFn *grown = realloc(ctx->custom, (size_t)(ctx->ncustom + 1) * sizeof *grown);
    char *copy = grown ? strdup(target) : NULL;
    if (grown)
        ctx->custom = grown;
    if (!copy)
        return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "%s: out of memory", who);
    ctx->custom[ctx->ncustom] = (CustomFn){.target = copy};
    *out = &ctx->custom[ctx->ncustom++];
    return ASTITCH_OK;
}

astitch_status astitch_register_custom(astitch_context *ctx, const char *target,
                                       astitch_custom_fn fn, void *user)
{
    CustomFn *c = NULL;
    astitch_status s = ctx ? custom_entry(ctx, target, fn != NULL, "astitch_register_custom", &c)
                           : ASTITCH_ERR_ARGUMENT;
    if (s == ASTITCH_OK) {
        c->fn = fn;
        c->user = user;
    }
    return s;
}

astitch_status astitch_register_custom_device(astitch_context *ctx, const char *target,
                                              const char *device, astitch_custom_device_fn fn,
                                              void *user)
{
    if (!ctx)
        return ASTITCH_ERR_ARGUMENT;
    if (!device || strcmp(device, "cuda") != 0)
        return ctx_fail(ctx, ASTITCH_ERR_ARGUMENT,
                        "astitch_register_custom_device: device '%.64s' is not one astitch runs "
                        "custom ops on (\"cuda\")",
                        device ? device : "(null)");
    CustomFn *c = NULL;
    astitch_status s = custom_entry(ctx, target, fn != NULL, "astitch_register_custom_device", &c);
    if (s == ASTITCH_OK) {
        c->cuda_fn = fn;
        c->cuda_user = user;
    }
    return s;
}
