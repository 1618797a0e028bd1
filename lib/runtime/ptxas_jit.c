/* ptxas_jit.c: modules compiled ahead by the toolkit's ptxas program (nvjitlink.h), each in a
 * process of its own, as the whole program the driver's JIT compiles (nvJitLink compiles PTX
 * as relocatable code, which ran up to 11% slower on the suite: docs/codegen.md, *Compile
 * time*). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"
#include "ir/config.h"
#include "nvjitlink.h"

static pthread_once_t path_once = PTHREAD_ONCE_INIT;
static char *path; /* for the life of the process */

static void path_find(void)
{
    const char *set = config_ptxas();
    path = set ? strdup(set) : ptxas_find();
}

const char *ptxas_jit_path(void)
{
    pthread_once(&path_once, path_find);
    return path;
}

bool ptxas_jit_compile(const char *ptx, int sm, Cubin *out, char *why, size_t len)
{
    *out = (Cubin){0};
    if (!ptxas_jit_path()) {
        snprintf(why, len, "ptxas not found");
        return false;
    }
    return ptxas_assemble(path, ptx, sm, &out->image, &out->size, &out->log, why, len);
}
