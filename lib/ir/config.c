/* config.c: the one reader of the environment in libastitch (config.h lists the variables). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

/* True for a value that switches a flag off: empty, "0" or "off". */
static bool off(const char *v) { return !*v || strcmp(v, "0") == 0 || strcmp(v, "off") == 0; }

const char *config_dump_plan(void)
{
    const char *v = getenv("ASTITCH_DUMP_PLAN");
    return v && *v && strcmp(v, "0") != 0 ? v : NULL;
}

bool config_force_parts(void)
{
    const char *v = getenv("ASTITCH_FORCE_PARTS");
    return v && *v && strcmp(v, "0") != 0;
}

const char *config_libcuda(void)
{
    const char *v = getenv("ASTITCH_LIBCUDA");
    return v && *v ? v : "libcuda.so.1";
}

const char *config_cuda_path(void)
{
    const char *v = getenv("ASTITCH_CUDA_PATH");
    return v && *v ? v : NULL;
}

bool config_cache_on(void)
{
    const char *v = getenv("ASTITCH_CACHE");
    return !v || (strcmp(v, "0") != 0 && strcmp(v, "off") != 0);
}

bool config_cache_dir(char *dir, size_t len)
{
    const char *d = getenv("ASTITCH_CACHE_DIR"), *base = getenv("XDG_CACHE_HOME");
    int n;
    if (d && off(d))
        return false;
    if (d)
        n = snprintf(dir, len, "%s", d);
    else if (base && base[0] == '/')
        n = snprintf(dir, len, "%s/astitch", base);
    else if ((base = getenv("HOME")) && *base)
        n = snprintf(dir, len, "%s/.cache/astitch", base);
    else
        return false;
    return n >= 0 && (size_t)n < len;
}

const char *config_search_path(void) { return getenv("PATH"); }

const char *config_tmpdir(void)
{
    const char *v = getenv("TMPDIR");
    return v && *v ? v : "/tmp";
}
