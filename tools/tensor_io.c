/*
 * tensor_io.c: seeded random inputs, checksums and printing for astitch-run.
 *
 * The random inputs are part of the tool's interface (a seed names a set of inputs, and
 * docs/astitch-run.md tells how to reproduce them elsewhere), so the generator is spelled out:
 * splitmix64, one stream per parameter, every value exactly representable in its dtype.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ir/ir.h" /* f16/bf16 conversions, linked from the library's objects */
#include "run.h"

#define GOLDEN_GAMMA UINT64_C(0x9E3779B97F4A7C15)

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

static uint64_t splitmix64_next(uint64_t *state)
{
    *state += GOLDEN_GAMMA;
    return mix64(*state);
}

/* Parameter `index` starts from mix64(seed ^ mix64(index + 1)), so that streams of different
 * parameters are unrelated even for seed 0. Floats are k / 2^(p-1) - 1 with k drawn from the top
 * p bits (p = 24, 11, 8 significand bits for f32, f16, bf16): uniform on a grid in [-1, 1) and
 * exact in the dtype, then multiplied by 2^-scale_exponent. Integers are the top 4 bits,
 * [0, 16), usable as gather indices. */
void tio_fill_random(const astitch_tensor_info *t, void *data, uint64_t seed, int index,
                     int scale_exponent)
{
    float scale = ldexpf(1.0f, -scale_exponent);
    uint64_t state = mix64(seed ^ mix64((uint64_t)index + 1));
    for (int64_t i = 0; i < t->elements; i++) {
        uint64_t r = splitmix64_next(&state);
        switch (t->dtype) {
        case ASTITCH_F32:
            ((float *)data)[i] = ((float)(r >> 40) * 0x1p-23f - 1.0f) * scale;
            break;
        case ASTITCH_F16:
            ((uint16_t *)data)[i] = float_to_half(((float)(r >> 53) * 0x1p-10f - 1.0f) * scale);
            break;
        case ASTITCH_BF16:
            ((uint16_t *)data)[i] = float_to_bf16(((float)(r >> 56) * 0x1p-7f - 1.0f) * scale);
            break;
        case ASTITCH_I32:
            ((int32_t *)data)[i] = (int32_t)(r >> 60);
            break;
        case ASTITCH_I64:
            ((int64_t *)data)[i] = (int64_t)(r >> 60);
            break;
        case ASTITCH_BOOL:
            ((uint8_t *)data)[i] = (uint8_t)(r >> 63);
            break;
        default:
            return;
        }
    }
}

double tio_element(astitch_dtype t, const void *data, int64_t i)
{
    switch (t) {
    case ASTITCH_F32: return ((const float *)data)[i];
    case ASTITCH_F16: return half_to_float(((const uint16_t *)data)[i]);
    case ASTITCH_BF16: return bf16_to_float(((const uint16_t *)data)[i]);
    case ASTITCH_I32: return ((const int32_t *)data)[i];
    case ASTITCH_I64: return (double)((const int64_t *)data)[i];
    case ASTITCH_BOOL: return ((const uint8_t *)data)[i] != 0;
    default: return 0;
    }
}

double tio_sum(const astitch_tensor_info *t, const void *data)
{
    double s = 0;
    for (int64_t i = 0; i < t->elements; i++)
        s += tio_element(t->dtype, data, i);
    return s;
}

uint64_t tio_fnv1a64(const void *bytes, size_t n)
{
    const unsigned char *p = bytes;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= UINT64_C(0x100000001b3);
    }
    return h;
}

void tio_print_values(FILE *f, const astitch_tensor_info *t, const void *data, int64_t n)
{
    /* enough significant digits to tell any two values of the dtype apart */
    int digits = t->dtype == ASTITCH_F32 ? 9 : t->dtype == ASTITCH_F16 ? 5 : 4;
    for (int64_t i = 0; i < n && i < t->elements; i++) {
        if (i > 0)
            fputc(' ', f);
        switch (t->dtype) {
        case ASTITCH_F32:
        case ASTITCH_F16:
        case ASTITCH_BF16:
            fprintf(f, "%.*g", digits, tio_element(t->dtype, data, i));
            break;
        case ASTITCH_I32:
            fprintf(f, "%" PRId32, ((const int32_t *)data)[i]);
            break;
        case ASTITCH_I64:
            fprintf(f, "%" PRId64, ((const int64_t *)data)[i]);
            break;
        case ASTITCH_BOOL:
            fputs(((const uint8_t *)data)[i] ? "true" : "false", f);
            break;
        default:
            break;
        }
    }
}

const char *tio_type_str(char *buf, size_t len, const astitch_tensor_info *t)
{
    const char *name = astitch_dtype_name(t->dtype);
    size_t at = (size_t)snprintf(buf, len, "%s[", name ? name : "?");
    for (int d = 0; d < t->rank && at < len; d++)
        at += (size_t)snprintf(buf + at, len - at, "%s%" PRId64, d ? "," : "", t->dims[d]);
    if (at < len)
        snprintf(buf + at, len - at, "]");
    return buf;
}
