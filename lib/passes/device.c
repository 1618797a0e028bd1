/* device.c: built-in device models and the plan option names. */
#include <string.h>

#include "passes/passes.h"

/* Figures from the vendors' tuning guides (compute capability tables); shared memory per block
 * is the opt-in maximum for dynamic shared memory. "host" is the virtual GPU the host SIMT
 * runtime emulates: small enough that a whole grid runs as fibers on a CPU. */
static const astitch_device builtin[] = {
    {"h100", 90, 132, 32, 1024, 2048, 32, 65536, 255, 8, 227 * 1024, 228 * 1024, 50 << 20},
    {"a100", 80, 108, 32, 1024, 2048, 32, 65536, 255, 8, 163 * 1024, 164 * 1024, 40 << 20},
    {"v100", 70, 80, 32, 1024, 2048, 32, 65536, 255, 8, 96 * 1024, 96 * 1024, 6 << 20},
    {"host", 0, 4, 32, 128, 256, 2, 65536, 255, 8, 64 * 1024, 128 * 1024, 0},
};

astitch_status astitch_device_builtin(const char *name, astitch_device *dev)
{
    if (!name || !dev)
        return ASTITCH_ERR_ARGUMENT;
    for (size_t i = 0; i < sizeof builtin / sizeof builtin[0]; i++) {
        if (strcmp(builtin[i].name, name) == 0) {
            *dev = builtin[i];
            return ASTITCH_OK;
        }
    }
    return ASTITCH_ERR_ARGUMENT;
}

const char *astitch_device_builtin_name(int i)
{
    if (i < 0 || (size_t)i >= sizeof builtin / sizeof builtin[0])
        return NULL;
    return builtin[i].name;
}

void astitch_plan_options_default(astitch_plan_options *o)
{
    o->fusion = ASTITCH_FUSION_STITCH;
    o->remote = true;
    o->merge = true;
    o->packing = true;
    o->deterministic = false;
    o->persistent = false;
    o->one_pass_variance = true;
    o->recompute_outputs = true;
    o->wide_rows = false;
    o->long_rows = false;
    o->column_vectors = true;
    o->row_vectors = true;
    o->online_softmax = true;
    o->column_sums_in_rows = false;
    o->carry = true;
    o->transpose_tiles = true;
    o->hoist = true;
    o->split_barriers = false;
}

static const char *const fusion_names[] = {"none", "xla", "stitch"};

const char *astitch_fusion_name(astitch_fusion f)
{
    return (unsigned)f < 3 ? fusion_names[f] : NULL;
}

astitch_status astitch_fusion_from_name(const char *name, astitch_fusion *f)
{
    for (int i = 0; name && i < 3; i++) {
        if (strcmp(name, fusion_names[i]) == 0) {
            *f = (astitch_fusion)i;
            return ASTITCH_OK;
        }
    }
    return ASTITCH_ERR_ARGUMENT;
}
