/*
 * variant.c: the variant search of the cuda target (docs/codegen.md, *Variant search*).
 *
 * Where the planner leaves a launch shape to a measurement, astitch_compile builds each form
 * that applies (forms[] below: plan switches over the caller's options); the first execution
 * that is not being captured times them on the caller's data and stream, keeps the fastest in
 * the executable (the others are destroyed) and records its index in the compile cache, so
 * that a later compile of the same graph builds only the chosen form. The forms other than
 * the default wait in a chain (x->alt, each form's own alt the next). A first execution under
 * capture keeps the planner's default (the captured graph refers to its kernels); the others
 * are freed at the next execution outside a capture (freeing device memory would end a
 * capture). The search never fails a compile or a run of its own: a form that cannot be built
 * is left out, and a timing that fails leaves the default form alone (state NONE).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "compile_cache.h"
#include "compile_clock.h"
#include "cublaslt.h"
#include "exec_cuda.h"
#include "ir/config.h"
#include "passes/passes.h"
#include "runtime.h"

/* A form: the plan switches it turns on over the caller's options. */
typedef struct Form {
    const char *name;
    bool wide_rows, column_sums_in_rows, persistent, split_barriers, long_rows;
} Form;

/* By index, which the compile cache records: append, never reorder. Measured on the H100
 * (bench/RESULTS.md, 2026-11-27): of the four backward norms of the suite, two ran fastest in
 * form 2 and two in form 3, each 10-35% faster than forms 0 and 1; their combinations with
 * wide rows never won by more than 3%. Form 4 cuts every global barrier (docs/planner.md,
 * *hoist*): a batch norm's backward under channels_last ran 9-15% faster split on the H200
 * (bench/RESULTS.md, 2026-11-30), other kernels with barriers slower. Form 5 holds rows of
 * 8193 to 32768 elements in registers (docs/planner.md, *mapping*): on the H200 a softmax over
 * 32768 f32 and wav2vec 2.0's GroupNorm ran 12-19% faster so, five other long rows 2-14%
 * slower (bench/RESULTS.md, 2026-12-02). */
static const Form forms[ASTITCH_VARIANT_FORMS] = {
    {"default", false, false, false, false, false},
    {"wide rows", true, false, false, false, false},
    {"column sums in rows", false, true, false, false, false},
    {"column sums in rows, persistent", false, true, true, false, false},
    {"barriers split", false, false, false, true, false},
    {"long rows", false, false, false, false, true},
};

/* Forms 2 and 3, where they apply, replace form 1: each form costs a compile (up to 220 ms
 * for gpt2_bwd_layernorm's kernel on an H100 machine), and the column sums in the row pass
 * beat both row shapes where measured. */
enum { FORM_WIDE = 1, FORM_COLUMN_SUMS = 2, FORM_COLUMN_SUMS_PERSISTENT = 3 };

const char *astitch_variant_form_name(int i)
{
    return i >= 0 && i < ASTITCH_VARIANT_FORMS ? forms[i].name : NULL;
}

static astitch_plan_options form_options(const astitch_plan_options *po, int f)
{
    astitch_plan_options o = *po;
    o.wide_rows |= forms[f].wide_rows;
    o.column_sums_in_rows |= forms[f].column_sums_in_rows;
    o.persistent |= forms[f].persistent;
    o.split_barriers |= forms[f].split_barriers;
    o.long_rows |= forms[f].long_rows;
    return o;
}

/* True when some phase of p takes a column reduction in its row pass (plan_reduce_across). */
static bool plan_has_across(const astitch_plan *p)
{
    for (int32_t k = 0; k < p->nkernel; k++)
        for (int32_t ph = 0; ph < p->kernel[k].nphase; ph++) {
            const PlanPhase *q = &p->kernel[k].phase[ph];
            for (int32_t i = 0; i < q->nroot; i++)
                if (plan_reduce_across(p->graph, &q->map, q->root[i]))
                    return true;
        }
    return false;
}

/* True when some kernel of p has a global barrier: without one, form 4 plans as the default. */
static bool plan_has_global_barrier(const astitch_plan *p)
{
    for (int32_t k = 0; k < p->nkernel; k++)
        if (p->kernel[k].global_barriers > 0)
            return true;
    return false;
}

/* p's text past its first line (which names the options): equal texts, equal kernels.
 * Malloc'd, NULL on failure. */
static char *kernels_text(const astitch_plan *p)
{
    char *t = NULL;
    if (astitch_plan_text(p, &t) != ASTITCH_OK)
        return NULL;
    const char *nl = strchr(t, '\n');
    memmove(t, nl ? nl + 1 : t + strlen(t), strlen(nl ? nl + 1 : "") + 1);
    return t;
}

/* The forms of g that apply beside the default (whose plan is def): want[f] for each form whose
 * switches change the plan where they ask for it (the column-sum forms only where a column
 * reduction moves into a row pass) and whose kernels differ from every form before it; the
 * wide form only where no column-sum form applies. */
static void applicable_forms(astitch_graph *g, const astitch_device *dev,
                             const astitch_plan_options *po, const astitch_plan *def,
                             bool want[ASTITCH_VARIANT_FORMS])
{
    char *text[ASTITCH_VARIANT_FORMS] = {kernels_text(def)};
    want[0] = true;
    for (int f = 1; f < ASTITCH_VARIANT_FORMS; f++) {
        want[f] = false;
        if (!text[0] || (forms[f].split_barriers && !plan_has_global_barrier(def)))
            continue; /* no plan to make: the same as the default's */
        astitch_plan_options o = form_options(po, f);
        astitch_plan *p = NULL;
        if (clocked_plan_create(g, dev, &o, &p) != ASTITCH_OK)
            continue; /* a form that cannot be planned is left out */
        if ((!forms[f].column_sums_in_rows || plan_has_across(p)) && (text[f] = kernels_text(p))) {
            want[f] = true;
            for (int e = 0; e < f && want[f]; e++)
                want[f] = !want[e] || strcmp(text[e], text[f]) != 0;
        }
        astitch_plan_destroy(p);
    }
    if (want[FORM_COLUMN_SUMS] || want[FORM_COLUMN_SUMS_PERSISTENT])
        want[FORM_WIDE] = false;
    for (int f = 0; f < ASTITCH_VARIANT_FORMS; f++)
        free(text[f]);
}

/* Whether a kernel of y, loaded, still spills (after the runtime's relaxing or lean forms). */
static bool form_spills(const astitch_executable *y)
{
    for (int k = 0; k < y->plan->nkernel; k++) {
        astitch_loaded_kernel lk;
        exec_cuda_loaded_kernel(y, k, &lk);
        if (lk.local_bytes > 0)
            return true;
    }
    return false;
}

/* A new executable of g under form f of po, for the device of x; a trial of the bound search
 * where `trial`. A form other than the default whose kernels still spill once loaded is left
 * out (ASTITCH_ERR_UNSUPPORTED, no message): the default, which runs without the search,
 * stands for the graph (a long row's block of 1024 lanes has no higher bound to take). */
static astitch_status build_form(astitch_executable *x, astitch_graph *g, const astitch_device *dev,
                                 const astitch_plan_options *po, int f, bool trial,
                                 astitch_executable **out)
{
    astitch_device model;
    astitch_plan_options o = form_options(po, f);
    astitch_executable *y = calloc(1, sizeof *y);
    if (!y)
        return ctx_fail(x->ctx, ASTITCH_ERR_MEMORY, "out of memory");
    y->ctx = x->ctx;
    y->g = g;
    y->target = ASTITCH_TARGET_CUDA;
    y->caller_workspace = x->caller_workspace;
    y->variant.form = f;
    y->bound_trial = trial;
    astitch_status s = exec_cuda_open(x->ctx, &y->cuda, &model);
    if (s == ASTITCH_OK)
        s = exec_build(y, dev, &o);
    if (s == ASTITCH_OK && f != 0 && form_spills(y))
        s = ASTITCH_ERR_UNSUPPORTED;
    if (s != ASTITCH_OK) {
        astitch_executable_destroy(y);
        return s;
    }
    *out = y;
    return ASTITCH_OK;
}

/* The LLVM steps of exec_variant_ahead: the plans to compile, x's first (the calling thread's,
 * whose module loads first), the others taken in order by the calling thread when done with
 * it and by up to AHEAD_HELPERS helper threads, each with a shadow of the context. Two
 * helpers: on an H200 machine's host (16 cores), the driver's JIT of one module ran as fast
 * beside one or two ptxas processes and 1.6 times slower beside four (bench/RESULTS.md). */
enum { AHEAD_HELPERS = 2 };

typedef struct Ahead {
    const astitch_context *ctx;
    int sm;
    pthread_t owner;
    const astitch_plan *plan[ASTITCH_VARIANT_FORMS];
    int nplan;
    atomic_int next; /* the next plan to take */
} Ahead;

/* Takes plans from a until none is left, each to PTX and its modules started. */
static void *ahead_work(void *arg)
{
    Ahead *a = arg;
    astitch_context shadow;
    ctx_shadow(a->ctx, &shadow);
    for (int i; (i = atomic_fetch_add(&a->next, 1)) < a->nplan;)
        exec_cuda_compile_ahead(&shadow, a->sm, a->plan[i], a->owner);
    return NULL;
}

void exec_variant_ahead(astitch_executable *x, astitch_graph *g, const astitch_device *dev,
                        const astitch_plan_options *po)
{
    CubinCompiler by;
    if (!cuda_module_compiles_ahead(x->ctx, &by) || !config_cache_on(&x->ctx->config))
        return;
    bool want[ASTITCH_VARIANT_FORMS];
    applicable_forms(g, dev, po, x->plan, want);
    int n = 0, choice = compile_cache_choice(x->plan, exec_cuda_sm(x));
    for (int f = 1; f < ASTITCH_VARIANT_FORMS; f++)
        n += want[f];
    if (n == 0 || choice == 0)
        return; /* x's module alone: it compiles where it loads */
    bool one = choice > 0 && choice < ASTITCH_VARIANT_FORMS && want[choice];
    Ahead a = {.ctx = x->ctx, .sm = exec_cuda_sm(x), .owner = pthread_self(),
               .plan = {x->plan}, .nplan = 1};
    astitch_plan *made[ASTITCH_VARIANT_FORMS] = {NULL};
    for (int f = 1; f < ASTITCH_VARIANT_FORMS; f++) {
        if (!want[f] || (one && f != choice))
            continue; /* as exec_variant_prepare: the recorded choice alone, else every form */
        astitch_plan_options o = form_options(po, f);
        if (clocked_plan_create(g, dev, &o, &made[f]) == ASTITCH_OK)
            a.plan[a.nplan++] = made[f];
    }
    atomic_init(&a.next, 1);
    pthread_t helper[AHEAD_HELPERS];
    int helpers = 0;
    while (helpers < AHEAD_HELPERS && helpers < a.nplan - 1 &&
           pthread_create(&helper[helpers], NULL, ahead_work, &a) == 0)
        helpers++;
    exec_cuda_compile_ahead(x->ctx, a.sm, x->plan, a.owner);
    ahead_work(&a);
    double t = compile_clock_now();
    for (int i = 0; i < helpers; i++)
        pthread_join(helper[i], NULL);
    compile_clock_add(CLOCK_PTX, t); /* the caller waits for LLVM */
    for (int f = 0; f < ASTITCH_VARIANT_FORMS; f++)
        astitch_plan_destroy(made[f]);
}

/* The variant state of x running its own plan as form f. */
static astitch_variant_info info_of(const astitch_executable *x, astitch_variant_state st, int f)
{
    astitch_variant_info v = {.state = st, .form = f, .nforms = 1};
    v.wide_rows = x->plan->opt.wide_rows;
    v.column_sums_in_rows = x->plan->opt.column_sums_in_rows;
    v.persistent = x->plan->opt.persistent;
    v.split_barriers = x->plan->opt.split_barriers;
    v.long_rows = x->plan->opt.long_rows;
    return v;
}

/* Makes y (a form of the chain, built) the form x runs: swaps the two and destroys every
 * other form. */
static void adopt(astitch_executable *x, astitch_executable *y)
{
    astitch_executable *chain = x->alt;
    x->alt = NULL;
    for (astitch_executable **at = &chain; *at; at = &(*at)->alt)
        if (*at == y) { /* unlink y */
            *at = y->alt;
            y->alt = NULL;
            break;
        }
    astitch_executable t = *x;
    *x = *y;
    *y = t;
    x->views = y->views; /* x's outputs as the caller sees them stay x's */
    y->views = NULL;
    x->dot_search = y->dot_search; /* so does its dots' search */
    astitch_executable_destroy(y);
    astitch_executable_destroy(chain);
}

/* The bound search, where forms are to be timed (x->alt): after each executable of the
 * search that is a candidate (exec_cuda_bound_searchable: x, then each form of its chain), a
 * trial of its form joins the chain. A plan without other forms gets none: its compile would
 * wait for one more module (15-25 ms on the suite's softmaxes, an H200 machine) for at most
 * 2% of kernel time (docs/codegen.md, *Variant search*). */
static void add_trials(astitch_executable *x, astitch_graph *g, const astitch_device *dev,
                       const astitch_plan_options *po)
{
    for (astitch_executable *e = x; e; e = e->alt) {
        astitch_executable *t = NULL;
        if (!exec_cuda_bound_searchable(e) ||
            build_form(x, g, dev, po, e->variant.form, true, &t) != ASTITCH_OK)
            continue; /* a trial that cannot be built is left out */
        t->alt = e->alt;
        e->alt = t;
        e = t;
        x->variant.ntrials++;
    }
}

astitch_status exec_variant_prepare(astitch_executable *x, astitch_graph *g,
                                    const astitch_device *dev, const astitch_plan_options *po)
{
    x->variant = info_of(x, ASTITCH_VARIANT_NONE, 0);
    bool want[ASTITCH_VARIANT_FORMS];
    applicable_forms(g, dev, po, x->plan, want);
    int n = 0;
    for (int f = 1; f < ASTITCH_VARIANT_FORMS; f++)
        n += want[f];
    int choice = n > 0 ? compile_cache_choice(x->plan, exec_cuda_sm(x)) : -1;
    astitch_executable *y = NULL;
    if (choice == 0) {
        x->variant.state = ASTITCH_VARIANT_CACHED;
    } else if (choice > 0 && choice < ASTITCH_VARIANT_FORMS && want[choice] &&
               build_form(x, g, dev, po, choice, false, &y) == ASTITCH_OK) {
        adopt(x, y);
        x->variant = info_of(x, ASTITCH_VARIANT_CACHED, choice);
    } else if (n > 0) { /* all forms, as if nothing were recorded */
        astitch_executable **tail = &x->alt;
        for (int f = 1; f < ASTITCH_VARIANT_FORMS; f++) {
            if (!want[f] || build_form(x, g, dev, po, f, false, tail) != ASTITCH_OK)
                continue; /* a form that cannot be built is left out */
            tail = &(*tail)->alt;
            x->variant.nforms++;
        }
    }
    if (x->alt) {
        add_trials(x, g, dev, po);
        x->variant.state = ASTITCH_VARIANT_PENDING;
    }
    return ASTITCH_OK;
}

/* Destroys x's other forms: x runs its own from now on. */
static void drop_forms(astitch_executable *x)
{
    astitch_executable_destroy(x->alt);
    x->alt = NULL;
}

/* A form's time as the search compares it: the split form's weighed up by SPLIT_MARGIN, as its
 * timing (each run after the L2 is emptied) leaves out part of what its extra launches cost
 * back to back. On the H200 (bench/RESULTS.md, *Barriers split*) batchnorm_train timed its
 * split form faster at the search and ran it 3% slower in graph replay; where the split pays,
 * it was 8-15% faster. The long-row form's by LONG_MARGIN, as the fill of the L2 before each
 * timed run slows the streamed form it replaces more than in steady use: on the H200
 * (bench/RESULTS.md, *Long rows held in registers*) a layer norm over 9999 f32 timed its
 * streamed form at 125.5 and 127.6 us at two searches, 115.2 back to back, and its long-row
 * form at 122.1 and 123.6, 122.3 back to back (3% let it win the search and run 7% slower);
 * the long rows that pay timed 5.9-38% faster at the search, but for a softmax over 32768 bf16
 * (3.5% faster at the search, 4% back to back), which the margin gives up. */
#define SPLIT_MARGIN 1.03
#define LONG_MARGIN 1.05
static double weighed(const astitch_executable *y, double us)
{
    return us * (y->plan->opt.split_barriers ? SPLIT_MARGIN : 1) *
           (y->plan->opt.long_rows ? LONG_MARGIN : 1);
}

/* exec_variant_settle's forms: PENDING timed, CAPTURED freed. */
static astitch_status settle_forms(astitch_executable *x, const uint64_t *inputs,
                                   const uint64_t *outputs, void *stream)
{
    if (!x->alt) /* not PENDING, or CAPTURED and the other forms freed */
        return ASTITCH_OK;
    bool capturing;
    astitch_status s = exec_cuda_capturing(x, stream, &capturing);
    if (s != ASTITCH_OK)
        return s;
    if (capturing) { /* freeing device memory now would invalidate the capture */
        x->variant.state = ASTITCH_VARIANT_CAPTURED;
        return ASTITCH_OK;
    }
    if (x->variant.state == ASTITCH_VARIANT_CAPTURED) {
        drop_forms(x);
        x->variant.nforms = 1;
        return ASTITCH_OK;
    }
    astitch_executable *run[VARIANT_RUNS] = {x};
    int n = 1;
    for (astitch_executable *y = x->alt; y && n < VARIANT_RUNS; y = y->alt)
        run[n++] = y;
    double us[VARIANT_RUNS] = {0};
    if (exec_cuda_time_forms(run, n, inputs, outputs, stream, us) != ASTITCH_OK) {
        /* the default form alone, as without the search; a fault of the device shows again
         * in the run that follows */
        drop_forms(x);
        x->variant = info_of(x, ASTITCH_VARIANT_NONE, 0);
        return ASTITCH_OK;
    }
    int best = 0;
    for (int i = 1; i < n; i++)
        if (weighed(run[i], us[i]) < weighed(run[best], us[best]))
            best = i;
    int form = run[best]->variant.form, sm = exec_cuda_sm(x);
    astitch_variant_info v = info_of(run[best], ASTITCH_VARIANT_TIMED, form);
    v.nforms = 0;
    v.ntrials = x->variant.ntrials;
    v.raised_bound = run[best]->bound_trial;
    bool form_tried = false; /* the winner's form had a trial */
    for (int i = 0; i < n; i++) {
        int f = run[i]->variant.form;
        (run[i]->bound_trial ? v.us_raised : v.us)[f] = us[i];
        v.nforms += !run[i]->bound_trial;
        form_tried |= f == form && run[i]->bound_trial;
    }
    compile_cache_set_choice(x->plan, sm, form);
    if (form_tried)
        exec_cuda_bound_record(run[best]);
    if (best)
        adopt(x, run[best]);
    else
        drop_forms(x);
    x->variant = v;
    return ASTITCH_OK;
}

/* exec_variant_settle's dots: searched once, outside a capture. */
static astitch_status settle_dots(astitch_executable *x, const uint64_t *inputs,
                                  const uint64_t *outputs, void *stream)
{
    bool capturing;
    astitch_status s = exec_cuda_capturing(x, stream, &capturing);
    if (s != ASTITCH_OK || capturing)
        return s; /* searched at a later run */
    x->dot_search = false;
    return exec_cuda_settle_dots(x, inputs, outputs, stream);
}

astitch_status exec_variant_settle(astitch_executable *x, const uint64_t *inputs,
                                   const uint64_t *outputs, void *stream)
{
    astitch_status s = settle_forms(x, inputs, outputs, stream);
    return s == ASTITCH_OK && x->dot_search ? settle_dots(x, inputs, outputs, stream) : s;
}

astitch_status exec_variant_settle_host(astitch_executable *x, const void *const *inputs)
{
    if (x->target != ASTITCH_TARGET_CUDA)
        return ASTITCH_OK;
    /* each stage on the device buffers of the form x holds then: a form adopted by the first
     * frees the buffers it was staged on */
    astitch_status s = ASTITCH_OK;
    for (int stage = 0; stage < 2 && s == ASTITCH_OK; stage++) {
        if (stage == 0 ? !x->alt : !x->dot_search)
            continue;
        uint64_t *io = NULL;
        s = exec_cuda_stage_host(x, inputs, &io);
        if (s == ASTITCH_OK)
            s = (stage == 0 ? settle_forms : settle_dots)(x, io, io + x->g->nparam, NULL);
        free(io);
    }
    return s;
}

astitch_status astitch_executable_variant(const astitch_executable *x, astitch_variant_info *out)
{
    if (!x || !out)
        return ASTITCH_ERR_ARGUMENT;
    *out = x->variant;
    exec_dots_count_chosen(x->cuda ? x->cuda->dots : NULL, &out->dots_chosen,
                           &out->dots_not_first);
    return ASTITCH_OK;
}
