/* diff_check.c: see diff_check.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "diff_check.h"
#include "ir/ir.h"

double diff_tolerance(astitch_dtype t)
{
    switch (t) {
    case ASTITCH_F32: return 1e-4;
    case ASTITCH_F16: return 1e-2;
    case ASTITCH_BF16: return 4e-2;
    default: return 0;
    }
}

uint64_t diff_fresh_seed(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
}

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Random values: floats in [-2, 2), integers in [-3, 17) (usable as gather indices after
 * clamping), bools. */
static void fill(const astitch_tensor_info *t, void *data, uint64_t *s)
{
    for (int64_t i = 0; i < t->elements; i++) {
        double u = (double)(next(s) >> 11) * 0x1.0p-53;
        float f = (float)(u * 4 - 2);
        switch (t->dtype) {
        case ASTITCH_F32: ((float *)data)[i] = f; break;
        case ASTITCH_F16: ((uint16_t *)data)[i] = float_to_half(f); break;
        case ASTITCH_BF16: ((uint16_t *)data)[i] = float_to_bf16(f); break;
        case ASTITCH_I32: ((int32_t *)data)[i] = (int32_t)(u * 20) - 3; break;
        case ASTITCH_I64: ((int64_t *)data)[i] = (int64_t)(u * 20) - 3; break;
        default: ((uint8_t *)data)[i] = u < 0.5; break;
        }
    }
}

static double element(astitch_dtype t, const void *d, int64_t i)
{
    switch (t) {
    case ASTITCH_F32: return ((const float *)d)[i];
    case ASTITCH_F16: return half_to_float(((const uint16_t *)d)[i]);
    case ASTITCH_BF16: return bf16_to_float(((const uint16_t *)d)[i]);
    case ASTITCH_I32: return ((const int32_t *)d)[i];
    case ASTITCH_I64: return (double)((const int64_t *)d)[i];
    default: return ((const uint8_t *)d)[i];
    }
}

/* Compares out with ref. Element i may differ by the dtype's tolerance (relative to the output's
 * largest magnitude) plus 8 times |ref - perturbed|, the reference's own change when its float
 * inputs move by a few ulps: an ill-conditioned element (sin of a long sum, a compare of near
 * equal values) is held only to what its conditioning allows. Returns false and explains in
 * r->message on a mismatch. */
static bool compare(const astitch_tensor_info *t, int index, const void *out, const void *ref,
                    const void *perturbed, DiffResult *r)
{
    double scale = 1, err = 0;
    for (int64_t i = 0; i < t->elements; i++) {
        double b = element(t->dtype, ref, i);
        if (isfinite(b) && fabs(b) > scale)
            scale = fabs(b);
    }
    for (int64_t i = 0; i < t->elements; i++) {
        double a = element(t->dtype, out, i), b = element(t->dtype, ref, i);
        double c = element(t->dtype, perturbed, i);
        bool same_special = (isnan(a) && isnan(b)) || (isinf(a) && isinf(b) && (a > 0) == (b > 0));
        if (same_special)
            continue;
        bool stable = isfinite(b) == isfinite(c) && isnan(b) == isnan(c) &&
                      (isfinite(b) || b == c);
        if (!stable)
            continue; /* the reference itself flips here: no meaningful expectation */
        double slack = isfinite(b) ? 8 * fabs(b - c) / scale : 0;
        if (!dtype_is_float(t->dtype) && b != c)
            continue;
        double e = (isnan(a) || isnan(b) || isinf(a) || isinf(b)) ? INFINITY : fabs(a - b) / scale;
        if (e - slack > err)
            err = e - slack;
        if (e > diff_tolerance(t->dtype) + slack) {
            snprintf(r->message, sizeof r->message,
                     "output %d '%s': element %lld is %.9g, reference %.9g (normalized error "
                     "%.3g > %.3g + conditioning slack %.3g)",
                     index, t->name, (long long)i, a, b, e, diff_tolerance(t->dtype), slack);
            if (err > r->worst) {
                r->worst = err;
                r->worst_output = index;
            }
            return false;
        }
    }
    if (err > r->worst) {
        r->worst = err;
        r->worst_output = index;
    }
    return true;
}

/* Moves every f32 input element by +-2^-22 relative (a few ulps); other dtypes are kept. */
static void perturb(const astitch_tensor_info *t, void *data, uint64_t *s)
{
    if (t->dtype != ASTITCH_F32)
        return;
    float *f = data;
    for (int64_t i = 0; i < t->elements; i++)
        f[i] *= 1.0f + ((next(s) & 1) ? 0x1.0p-22f : -0x1.0p-22f);
}

astitch_status diff_run(astitch_graph *g, astitch_target target, astitch_fusion fusion,
                        uint64_t seed, DiffResult *r)
{
    memset(r, 0, sizeof *r);
    int nin = astitch_graph_num_parameters(g), nout = astitch_graph_num_outputs(g);
    void **in = calloc((size_t)nin + 1, sizeof *in);
    void **ref = calloc((size_t)nout + 1, sizeof *ref);
    void **pert = calloc((size_t)nout + 1, sizeof *pert);
    void **pin = calloc((size_t)nin + 1, sizeof *pin);
    void **out = calloc((size_t)nout + 1, sizeof *out);
    astitch_tensor_info *oi = calloc((size_t)nout + 1, sizeof *oi);
    astitch_executable *x = NULL;
    astitch_status s = (in && ref && out && oi && pert && pin) ? ASTITCH_OK : ASTITCH_ERR_MEMORY;
    uint64_t st = seed;
    for (int i = 0; s == ASTITCH_OK && i < nin; i++) {
        astitch_tensor_info t;
        astitch_node_info(g, astitch_graph_parameter(g, i), &t);
        if (!(in[i] = malloc(t.bytes + 1)) || !(pin[i] = malloc(t.bytes + 1))) {
            s = ASTITCH_ERR_MEMORY;
        } else {
            fill(&t, in[i], &st);
            memcpy(pin[i], in[i], t.bytes);
            perturb(&t, pin[i], &st);
        }
    }
    for (int i = 0; s == ASTITCH_OK && i < nout; i++) {
        astitch_node_info(g, astitch_graph_output(g, i), &oi[i]);
        if (!(ref[i] = malloc(oi[i].bytes + 1)) || !(out[i] = malloc(oi[i].bytes + 1)) ||
            !(pert[i] = malloc(oi[i].bytes + 1)))
            s = ASTITCH_ERR_MEMORY;
        else
            memset(out[i], 0xff, oi[i].bytes); /* poison: NaN, -1, true */
    }
    if (s == ASTITCH_OK)
        s = astitch_run_reference(g, (const void *const *)in, ref);
    if (s == ASTITCH_OK)
        s = astitch_run_reference(g, (const void *const *)pin, pert);
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = target;
    o.plan.fusion = fusion;
    if (s == ASTITCH_OK)
        s = astitch_compile(g, &o, &x);
    if (s == ASTITCH_OK)
        s = astitch_execute(x, (const void *const *)in, out);
    if (s != ASTITCH_OK)
        snprintf(r->message, sizeof r->message, "%s: %s", astitch_status_name(s),
                 astitch_last_error(astitch_graph_context(g)));
    r->ok = s == ASTITCH_OK;
    for (int i = 0; r->ok && i < nout; i++)
        r->ok = compare(&oi[i], i, out[i], ref[i], pert[i], r);
    astitch_executable_destroy(x);
    for (int i = 0; in && pin && i < nin; i++) {
        free(in[i]);
        free(pin[i]);
    }
    free(pin);
    for (int i = 0; i < nout; i++) {
        if (ref)
            free(ref[i]);
        if (out)
            free(out[i]);
        if (pert)
            free(pert[i]);
    }
    free(pert);
    free(in);
    free(ref);
    free(out);
    free(oi);
    return s;
}
