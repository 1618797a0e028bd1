/* half.c: IEEE binary16 and bfloat16 conversions, round to nearest even. */
#include <string.h>

#include "ir.h"

uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = h >> 10 & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f)
        return bits_f32(sign | 0x7f800000u | man << 13);
    if (exp == 0) {
        float v = (float)man * (1.0f / 16777216.0f); /* man * 2^-24 */
        return sign ? -v : v;
    }
    return bits_f32(sign | (exp + 112) << 23 | man << 13);
}

uint16_t float_to_half(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)(u >> 16 & 0x8000);
    uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 : 0));
    if (abs >= 0x477ff000u) /* rounds to >= 65520: overflow */
        return sign | 0x7c00;
    if (abs < 0x38800000u) { /* below the smallest normal: subnormal or zero */
        float v = bits_f32(abs) * 16777216.0f; /* in units of 2^-24, exact */
        uint32_t m = (uint32_t)v;
        float rest = v - (float)m;
        if (rest > 0.5f || (rest == 0.5f && (m & 1)))
            m++;
        return (uint16_t)(sign | m);
    }
    uint32_t r = abs - 0x38000000u; /* rebias exponent 127 -> 15 */
    uint32_t keep = r >> 13, drop = r & 0x1fff;
    if (drop > 0x1000 || (drop == 0x1000 && (keep & 1)))
        keep++;
    return (uint16_t)(sign | keep);
}

float bf16_to_float(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t float_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)(u >> 16 | 0x40); /* quiet nan */
    u += 0x7fff + (u >> 16 & 1);
    return (uint16_t)(u >> 16);
}
