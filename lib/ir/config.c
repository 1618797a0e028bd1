/* config.c: the one reader of the environment in libastitch (config.h lists the variables). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* The switches' names: as astitch_context_set_option takes them, and in the environment. */
static const char *const names[CONFIG_SWITCHES][2] = {
    [CONFIG_DUMP_PLAN] = {"dump_plan", "ASTITCH_DUMP_PLAN"},
    [CONFIG_FORCE_PARTS] = {"force_parts", "ASTITCH_FORCE_PARTS"},
    [CONFIG_CACHE] = {"cache", "ASTITCH_CACHE"},
    [CONFIG_CACHE_DIR] = {"cache_dir", "ASTITCH_CACHE_DIR"},
    [CONFIG_HOST_COMPUTE] = {"host_compute", "ASTITCH_HOST_COMPUTE"},
    [CONFIG_FORCE_LEAN] = {"force_lean", "ASTITCH_FORCE_LEAN"},
    [CONFIG_PTX_JIT] = {"ptx_jit", "ASTITCH_PTX_JIT"},
};

/* True for a value that switches a flag off: empty, "0" or "off". */
static bool off(const char *v) { return !*v || strcmp(v, "0") == 0 || strcmp(v, "off") == 0; }

static char *copy(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

/* The disk cache's default directory, malloc'd, or NULL (none, or memory). */
static char *cache_home(void)
{
    const char *base = getenv("XDG_CACHE_HOME"), *suffix = "/astitch";
    if (!base || base[0] != '/') {
        base = getenv("HOME");
        suffix = "/.cache/astitch";
    }
    if (!base || !*base)
        return NULL;
    size_t n = strlen(base) + strlen(suffix) + 1;
    char *d = malloc(n);
    if (d)
        snprintf(d, n, "%s%s", base, suffix);
    return d;
}

bool config_from_env(Config *c)
{
    memset(c, 0, sizeof *c);
    bool ok = true;
    for (int i = 0; i < CONFIG_SWITCHES; i++) {
        const char *v = getenv(names[i][1]);
        if (v && !(c->value[i] = copy(v)))
            ok = false;
    }
    c->cache_home = cache_home();
    return ok;
}

void config_free(Config *c)
{
    for (int i = 0; i < CONFIG_SWITCHES; i++)
        free(c->value[i]);
    free(c->cache_home);
    memset(c, 0, sizeof *c);
}

int config_switch_named(const char *name)
{
    for (int i = 0; name && i < CONFIG_SWITCHES; i++)
        if (strcmp(name, names[i][0]) == 0)
            return i;
    return -1;
}

const char *config_switch_name(int i) { return i >= 0 && i < CONFIG_SWITCHES ? names[i][0] : NULL; }

bool config_set(Config *c, ConfigSwitch sw, const char *value)
{
    char *v = NULL;
    if (value && !(v = copy(value)))
        return false;
    free(c->value[sw]);
    c->value[sw] = v;
    return true;
}

/* Switch s's value when it is set and not "0", else NULL. */
static const char *switch_set(const Config *c, ConfigSwitch s)
{
    const char *v = c->value[s];
    return v && *v && strcmp(v, "0") != 0 ? v : NULL;
}

const char *config_dump_plan(const Config *c) { return switch_set(c, CONFIG_DUMP_PLAN); }

bool config_force_parts(const Config *c) { return switch_set(c, CONFIG_FORCE_PARTS) != NULL; }

bool config_force_lean(const Config *c) { return switch_set(c, CONFIG_FORCE_LEAN) != NULL; }

bool config_host_compute(const Config *c) { return switch_set(c, CONFIG_HOST_COMPUTE) != NULL; }

bool config_cache_on(const Config *c)
{
    const char *v = c->value[CONFIG_CACHE];
    return !v || (strcmp(v, "0") != 0 && strcmp(v, "off") != 0);
}

bool config_cache_dir(const Config *c, char *dir, size_t len)
{
    const char *d = c->value[CONFIG_CACHE_DIR];
    if (d && off(d))
        return false;
    if (!d && !(d = c->cache_home))
        return false;
    int n = snprintf(dir, len, "%s", d);
    return n >= 0 && (size_t)n < len;
}

const char *config_libcuda(void)
{
    const char *v = getenv("ASTITCH_LIBCUDA");
    return v && *v ? v : "libcuda.so.1";
}

const char *config_cublaslt(void)
{
    const char *v = getenv("ASTITCH_CUBLASLT");
    return v && *v ? v : NULL;
}

const char *config_nvjitlink(void)
{
    const char *v = getenv("ASTITCH_NVJITLINK");
    return v && *v ? v : NULL;
}

const char *config_ptxas(void)
{
    const char *v = getenv("ASTITCH_PTXAS");
    return v && *v ? v : NULL;
}

int config_ptx_jit(const Config *c)
{
    const char *v = c->value[CONFIG_PTX_JIT];
    if (!v || !*v)
        return CONFIG_PTX_JIT_AUTO;
    if (strcmp(v, "driver") == 0)
        return CONFIG_PTX_JIT_DRIVER;
    if (strcmp(v, "nvjitlink") == 0)
        return CONFIG_PTX_JIT_NVJITLINK;
    return -1;
}

const char *config_cuda_path(void)
{
    const char *v = getenv("ASTITCH_CUDA_PATH");
    return v && *v ? v : NULL;
}

const char *config_search_path(void) { return getenv("PATH"); }

const char *config_tmpdir(void)
{
    const char *v = getenv("TMPDIR");
    return v && *v ? v : "/tmp";
}
