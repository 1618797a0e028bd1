/*
 * simt_redzone.c: redzones on the host target. A region (a block's shared memory, the scratch
 * arena) lists the byte ranges a kernel may touch; every other byte of it, and SIMT_REDZONE
 * bytes either side, is a guard set to SIMT_REDZONE_BYTE before the kernel runs and compared
 * after. A guard that changed is a write that landed outside every range: past a buffer's
 * elements into the padding before the next, or past the region's ends. Writes that land in
 * another range (two ranges sharing bytes) are invisible here.
 */
#include <stdio.h>
#include <string.h>

#include "simt.h"

/* Walks the guards of z in ascending order. Start with *pos = -SIMT_REDZONE and *i = 0; each
 * call gives the next guard [*lo, *hi) and returns false when none is left. */
static bool next_guard(const SimtRedzones *z, int64_t *pos, int *i, int64_t *lo, int64_t *hi)
{
    int64_t end = z->bytes + SIMT_REDZONE, stop = end;
    if (*pos >= end)
        return false;
    for (; *i < z->nused; (*i)++) {
        const SimtRange *r = &z->used[*i];
        int64_t a = r->offset > 0 ? r->offset : 0;
        int64_t b = r->offset + r->bytes < z->bytes ? r->offset + r->bytes : z->bytes;
        if (b <= a || b <= *pos)
            continue;
        if (a > *pos) {
            stop = a;
            break;
        }
        *pos = b; /* covered up to b; b < end, so a guard follows */
    }
    *lo = *pos;
    *hi = stop;
    *pos = stop;
    return true;
}

void simt_redzone_fill(char *base, const SimtRedzones *z)
{
    int64_t pos = -SIMT_REDZONE, lo, hi;
    int i = 0;
    while (next_guard(z, &pos, &i, &lo, &hi))
        memset(base + lo, SIMT_REDZONE_BYTE, (size_t)(hi - lo));
}

bool simt_redzone_check(const char *base, const SimtRedzones *z, int64_t *bad)
{
    static const unsigned char pattern[256] = {
#define P8 SIMT_REDZONE_BYTE, SIMT_REDZONE_BYTE, SIMT_REDZONE_BYTE, SIMT_REDZONE_BYTE, \
           SIMT_REDZONE_BYTE, SIMT_REDZONE_BYTE, SIMT_REDZONE_BYTE, SIMT_REDZONE_BYTE
#define P64 P8, P8, P8, P8, P8, P8, P8, P8
        P64, P64, P64, P64
#undef P64
#undef P8
    };
    int64_t pos = -SIMT_REDZONE, lo, hi;
    int i = 0;
    while (next_guard(z, &pos, &i, &lo, &hi))
        for (int64_t at = lo; at < hi; at += (int64_t)sizeof pattern) {
            size_t n = hi - at < (int64_t)sizeof pattern ? (size_t)(hi - at) : sizeof pattern;
            if (memcmp(base + at, pattern, n) == 0)
                continue;
            while ((unsigned char)base[at] == SIMT_REDZONE_BYTE)
                at++;
            *bad = at;
            return true;
        }
    return false;
}

void simt_redzone_explain(const SimtRedzones *z, int64_t bad, char *buf, size_t len)
{
    const SimtRange *below = NULL, *above = NULL; /* the range reaching furthest from below
                                                   * bad, the first one after it */
    for (int i = 0; i < z->nused; i++) {
        const SimtRange *r = &z->used[i];
        if (r->bytes <= 0)
            continue;
        if (r->offset <= bad && (!below || r->offset + r->bytes > below->offset + below->bytes))
            below = r;
        if (r->offset > bad && (!above || r->offset < above->offset))
            above = r;
    }
    if (below && below->offset + below->bytes > bad)
        snprintf(buf, len, "inside %s (bytes [%lld, %lld)), past the region's %lld bytes",
                 below->name, (long long)below->offset, (long long)(below->offset + below->bytes),
                 (long long)z->bytes);
    else if (below && bad == below->offset + below->bytes)
        snprintf(buf, len, "just past the end of %s (bytes [%lld, %lld))", below->name,
                 (long long)below->offset, (long long)(below->offset + below->bytes));
    else if (below)
        snprintf(buf, len, "%lld bytes past the end of %s (bytes [%lld, %lld))",
                 (long long)(bad - below->offset - below->bytes), below->name,
                 (long long)below->offset, (long long)(below->offset + below->bytes));
    else if (above)
        snprintf(buf, len, "%lld bytes before %s (bytes [%lld, %lld))",
                 (long long)(above->offset - bad), above->name, (long long)above->offset,
                 (long long)(above->offset + above->bytes));
    else
        snprintf(buf, len, "where no buffer lies");
}
