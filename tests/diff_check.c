/* diff_check.c: see diff_check.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_tolerance.h"
#include "diff_check.h"
#include "ir/ir.h"

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

/* Random values: floats in [-2, 2) times 2^-scale_exponent (a weight's scale,
 * check_input_scale_exponent), integers in [-3, 17) (usable as gather indices after clamping),
 * bools. */
static void fill(const astitch_tensor_info *t, void *data, uint64_t *s, int scale_exponent)
{
    for (int64_t i = 0; i < t->elements; i++) {
        double u = (double)(next(s) >> 11) * 0x1.0p-53;
        float f = (float)ldexp(u * 4 - 2, -scale_exponent);
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
 * largest magnitude) plus CHECK_SLACK times |ref - perturbed|, the reference's own change when
 * its float inputs move by a few ulps: an ill-conditioned element (sin of a long sum, a compare
 * of near equal values) is held only to what its conditioning allows (the rule of astitch-run
 * --check, tools/check_tolerance.h). Returns false and explains in r->message on a mismatch. */
static bool compare(const astitch_tensor_info *t, int index, double tol, const void *out,
                    const void *ref, const void *perturbed, DiffResult *r)
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
                      (isfinite(b) || b == c) && (b != 0 || c != 0 || signbit(b) == signbit(c));
        if (!stable)
            continue; /* the reference itself flips here: no meaningful expectation */
        double slack = isfinite(b) ? CHECK_SLACK * fabs(b - c) / scale : 0;
        if (check_tolerance(t->dtype) == 0 && b != c) /* integers and bool */
            continue;
        bool other_zero = a == 0 && b == 0 && signbit(a) != signbit(b) &&
                          check_zero_sign_counts(t->dtype); /* max(-0, +0) is +0 */
        double e = (isnan(a) || isnan(b) || isinf(a) || isinf(b) || other_zero) ? INFINITY
                                                                                : fabs(a - b) / scale;
        if (e - slack > err)
            err = e - slack;
        if (e > tol + slack) {
            snprintf(r->message, sizeof r->message,
                     "output %d '%s': element %lld is %.9g, reference %.9g (normalized error "
                     "%.3g > %.3g + conditioning slack %.3g)",
                     index, t->name, (long long)i, a, b, e, tol, slack);
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

struct DiffRef {
    astitch_graph *g;
    uint64_t seed;
    bool perturbed;           /* pert holds the reference on perturbed inputs */
    int nin, nout;
    void **in;                /* random inputs */
    void **ref;               /* reference outputs */
    void **pert;              /* reference outputs on perturbed inputs (= ref when not asked) */
    astitch_tensor_info *oi;  /* per output */
};

void diff_ref_destroy(DiffRef *d)
{
    if (!d)
        return;
    for (int i = 0; d->in && i < d->nin; i++)
        free(d->in[i]);
    for (int i = 0; d->ref && d->pert && i < d->nout; i++) {
        if (d->pert[i] != d->ref[i])
            free(d->pert[i]);
        free(d->ref[i]);
    }
    free(d->in);
    free(d->ref);
    free(d->pert);
    free(d->oi);
    free(d);
}

astitch_status diff_ref_create(astitch_graph *g, uint64_t seed, bool perturbed, DiffRef **out)
{
    *out = NULL;
    DiffRef *d = calloc(1, sizeof *d);
    if (!d)
        return ASTITCH_ERR_MEMORY;
    d->g = g;
    d->seed = seed;
    d->perturbed = perturbed;
    d->nin = astitch_graph_num_parameters(g);
    d->nout = astitch_graph_num_outputs(g);
    d->in = calloc((size_t)d->nin + 1, sizeof *d->in);
    d->ref = calloc((size_t)d->nout + 1, sizeof *d->ref);
    d->pert = calloc((size_t)d->nout + 1, sizeof *d->pert);
    d->oi = calloc((size_t)d->nout + 1, sizeof *d->oi);
    void **pin = calloc((size_t)d->nin + 1, sizeof *pin);
    astitch_status s =
        (d->in && d->ref && d->pert && d->oi && pin) ? ASTITCH_OK : ASTITCH_ERR_MEMORY;
    uint64_t st = seed;
    for (int i = 0; s == ASTITCH_OK && i < d->nin; i++) {
        astitch_tensor_info t;
        astitch_node_info(g, astitch_graph_parameter(g, i), &t);
        if (!(d->in[i] = malloc(t.bytes + 1)) || (perturbed && !(pin[i] = malloc(t.bytes + 1)))) {
            s = ASTITCH_ERR_MEMORY;
        } else {
            fill(&t, d->in[i], &st, check_input_scale_exponent(g, i));
            if (perturbed) {
                memcpy(pin[i], d->in[i], t.bytes);
                check_perturb(&t, pin[i], seed, i);
            }
        }
    }
    for (int i = 0; s == ASTITCH_OK && i < d->nout; i++) {
        astitch_node_info(g, astitch_graph_output(g, i), &d->oi[i]);
        if (!(d->ref[i] = malloc(d->oi[i].bytes + 1)))
            s = ASTITCH_ERR_MEMORY;
        else if (!(d->pert[i] = perturbed ? malloc(d->oi[i].bytes + 1) : d->ref[i]))
            s = ASTITCH_ERR_MEMORY;
    }
    if (s == ASTITCH_OK)
        s = astitch_run_reference(g, (const void *const *)d->in, d->ref);
    if (s == ASTITCH_OK && perturbed)
        s = astitch_run_reference(g, (const void *const *)pin, d->pert);
    for (int i = 0; pin && i < d->nin; i++)
        free(pin[i]);
    free(pin);
    if (s != ASTITCH_OK) {
        diff_ref_destroy(d);
        return s;
    }
    *out = d;
    return ASTITCH_OK;
}

const void *const *diff_ref_inputs(const DiffRef *d)
{
    return (const void *const *)d->in;
}

/* Every output against the reference, each element allowed its conditioning slack against
 * pert (the reference itself where there is none). */
static bool compare_all(const DiffRef *d, void *const *pert, const void *const *outputs,
                        DiffResult *r)
{
    memset(r, 0, sizeof *r);
    r->ok = true;
    for (int i = 0; r->ok && i < d->nout; i++)
        r->ok = compare(&d->oi[i], i, check_output_tolerance(d->g, i), outputs[i], d->ref[i],
                        pert[i], r);
    return r->ok;
}

/* The reference's outputs on d's inputs perturbed (check_perturb), malloc'd in out[]; false
 * when it cannot run (out then holds what was allocated, NULLs after). */
static bool perturbed_reference(const DiffRef *d, void **out)
{
    void **pin = calloc((size_t)d->nin + 1, sizeof *pin);
    bool ok = pin != NULL;
    for (int i = 0; ok && i < d->nin; i++) {
        astitch_tensor_info t;
        astitch_node_info(d->g, astitch_graph_parameter(d->g, i), &t);
        if ((ok = (pin[i] = malloc(t.bytes + 1)) != NULL)) {
            memcpy(pin[i], d->in[i], t.bytes);
            check_perturb(&t, pin[i], d->seed, i);
        }
    }
    for (int i = 0; ok && i < d->nout; i++)
        ok = (out[i] = malloc(d->oi[i].bytes + 1)) != NULL;
    ok = ok && astitch_run_reference(d->g, (const void *const *)pin, out) == ASTITCH_OK;
    for (int i = 0; pin && i < d->nin; i++)
        free(pin[i]);
    free(pin);
    return ok;
}

bool diff_ref_compare(const DiffRef *d, const void *const *outputs, DiffResult *r)
{
    if (compare_all(d, d->pert, outputs, r) || d->perturbed)
        return r->ok;
    /* beyond a tolerance: the reference once more on perturbed inputs, as astitch-run --check
     * does, so an ill-conditioned element is held only to what its conditioning allows */
    void **pert = calloc((size_t)d->nout + 1, sizeof *pert);
    if (pert && perturbed_reference(d, pert))
        compare_all(d, pert, outputs, r);
    for (int i = 0; pert && i < d->nout; i++)
        free(pert[i]);
    free(pert);
    return r->ok;
}

astitch_status diff_ref_check(const DiffRef *d, astitch_executable *x, DiffResult *r)
{
    memset(r, 0, sizeof *r);
    void **out = calloc((size_t)d->nout + 1, sizeof *out);
    astitch_status s = out ? ASTITCH_OK : ASTITCH_ERR_MEMORY;
    for (int i = 0; s == ASTITCH_OK && i < d->nout; i++) {
        if (!(out[i] = malloc(d->oi[i].bytes + 1)))
            s = ASTITCH_ERR_MEMORY;
        else
            memset(out[i], 0xff, d->oi[i].bytes); /* poison: NaN, -1, true */
    }
    if (s == ASTITCH_OK)
        s = astitch_execute(x, (const void *const *)d->in, out);
    if (s == ASTITCH_OK)
        diff_ref_compare(d, (const void *const *)out, r);
    else
        snprintf(r->message, sizeof r->message, "%s: %s", astitch_status_name(s),
                 astitch_last_error(astitch_graph_context(d->g)));
    for (int i = 0; out && i < d->nout; i++)
        free(out[i]);
    free(out);
    return s;
}

astitch_status diff_run(astitch_graph *g, astitch_target target, astitch_fusion fusion,
                        uint64_t seed, DiffResult *r)
{
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = target;
    o.plan.fusion = fusion;
    return diff_run_with(g, &o, seed, r);
}

astitch_status diff_host_as(astitch_graph *g, const char *name, astitch_device *model,
                            astitch_compile_options *o, astitch_phase_info *first)
{
    astitch_compile_options_default(o);
    o->target = ASTITCH_TARGET_HOST;
    astitch_status s = astitch_device_builtin(name, model);
    if (s != ASTITCH_OK)
        return s;
    o->device = model;
    astitch_plan *p = NULL;
    if ((s = astitch_plan_create(g, model, &o->plan, &p)) == ASTITCH_OK)
        s = astitch_plan_phase_info(p, 0, 0, first);
    astitch_plan_destroy(p);
    return s;
}

astitch_status diff_run_with(astitch_graph *g, const astitch_compile_options *o, uint64_t seed,
                             DiffResult *r)
{
    memset(r, 0, sizeof *r);
    DiffRef *d = NULL;
    astitch_executable *x = NULL;
    astitch_status s = diff_ref_create(g, seed, true, &d);
    if (s == ASTITCH_OK)
        s = astitch_compile(g, o, &x);
    if (s == ASTITCH_OK)
        s = diff_ref_check(d, x, r);
    else
        snprintf(r->message, sizeof r->message, "%s: %s", astitch_status_name(s),
                 astitch_last_error(astitch_graph_context(g)));
    astitch_executable_destroy(x);
    diff_ref_destroy(d);
    return s;
}
