/* ptx_pressure.c: how many registers a PTX kernel keeps live, estimated from its text before
 * ptxas sees it, and the register bounds raised where that estimate says the planned bound
 * would spill (docs/codegen.md, *Targets*: the register feedback).
 *
 * The estimate walks the kernel's instructions in program order: each virtual register is live
 * from its first mention to its last, a register live into a loop (a branch back to an earlier
 * label) stays live to the loop's end, and a register counts its 32-bit units (predicates
 * none, 64-bit two). The most units live at once is the estimate. ptxas schedules again, so it
 * is near the registers ptxas needs, not equal to them: over the kernels of a block per tile
 * holding rows in registers of the suite and of 159 graphs of the suite's regions at other
 * shapes (bench/RESULTS.md), 43 of the 44 whose estimate passed their bound by the margin
 * below spilled at that bound, and 4 of the 152 others did. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"
#include "compile.h"
#include "passes/passes.h"
#include "passes/plan.h"

/* Registers by which a kernel's estimate must pass its bound before compile_ptx raises it:
 * RAISE_MARGIN, or an eighth of the bound where that is more. ptxas reorders more values in a
 * larger kernel, so the estimate errs by more there, and a needless raise costs more (one
 * block in three per SM at 80 registers, one in six at 40): the backward RMSNorm of 5120
 * columns estimates 89 at a bound of 80 and does not spill; vit_b16_fwd_embed_ln's 91 did
 * (its concatenate then computed element by element: emit_slot.c). */
enum { RAISE_MARGIN = 6, RAISE_MARGIN_SHARE = 8 };

/* An element-wise or streamed kernel's estimate counts the values of its loop coarsely (every
 * register mentioned in the loop stays live to its end), so it is raised only where the
 * estimate passes its bound by half: llama2_7b_fwd_rotary's 54 at 32 (44 bytes spilled there,
 * 4 at 40, none at 48); the suite's other such kernels that may relax estimate 41 or less at
 * 32 and do not spill. */
enum { LOOP_MARGIN_SHARE = 2 };

/* Registers by which kernel pk's estimate must pass its bound before it is raised. */
static int raise_margin(const PlanKernel *pk, int bound)
{
    if (!plan_kernel_holds_rows(pk))
        return bound / LOOP_MARGIN_SHARE;
    return bound / RAISE_MARGIN_SHARE > RAISE_MARGIN ? bound / RAISE_MARGIN_SHARE : RAISE_MARGIN;
}

enum { MAX_KINDS = 16 };

typedef struct RegKind {
    char prefix[8]; /* %r, %rd, %f, ... */
    int width;      /* 32-bit units per register: 0, 1 or 2 */
    int count;      /* registers declared: %r<count> */
    int *first;     /* per register: its first and last instruction, or -1 */
    int *last;
} RegKind;

typedef struct Kernel {
    RegKind kind[MAX_KINDS];
    int nkind;
} Kernel;

/* Units of a register of PTX type `type` (.pred, .b32, .f64, ...). */
static int type_width(const char *type, size_t len)
{
    if (len == 4 && strncmp(type, "pred", 4) == 0)
        return 0;
    return len >= 3 && strncmp(type + len - 2, "64", 2) == 0 ? 2 : 1;
}

/* The body of kernel `name` in ptx: from after its opening brace to its closing one (a brace
 * alone on a line), or NULL. */
static const char *kernel_body(const char *ptx, const char *name, const char **end)
{
    const char *at = ptx_entry(ptx, name);
    const char *open = at ? strstr(at, "\n{") : NULL, *close = open ? strstr(open, "\n}") : NULL;
    if (!close)
        return NULL;
    *end = close;
    return open + 2;
}

/* Reads the `.reg .type %prefix<count>;` lines of [at, end) into k; false when they do not
 * fit or memory runs out. */
static bool read_decls(Kernel *k, const char *at, const char *end)
{
    for (const char *line = at; line < end;) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        eol = eol ? eol : end;
        const char *s = line + strspn(line, " \t");
        line = eol + 1;
        if (strncmp(s, ".reg .", strlen(".reg .")) != 0)
            continue;
        const char *type = s + strlen(".reg .");
        size_t tlen = strcspn(type, " \t");
        const char *pct = memchr(s, '%', (size_t)(eol - s));
        const char *lt = pct ? memchr(pct, '<', (size_t)(eol - pct)) : NULL;
        if (!lt)
            continue; /* a single register, not a numbered kind */
        if ((size_t)(lt - pct - 1) >= sizeof k->kind[0].prefix || k->nkind == MAX_KINDS)
            return false;
        RegKind *r = &k->kind[k->nkind++];
        memcpy(r->prefix, pct + 1, (size_t)(lt - pct - 1));
        r->prefix[lt - pct - 1] = 0;
        r->width = type_width(type, tlen);
        r->count = atoi(lt + 1);
        if (r->count < 0)
            return false;
        r->first = malloc(sizeof *r->first * (size_t)(r->count + 1));
        r->last = malloc(sizeof *r->last * (size_t)(r->count + 1));
        if (!r->first || !r->last)
            return false;
        memset(r->first, -1, sizeof *r->first * (size_t)(r->count + 1));
        memset(r->last, -1, sizeof *r->last * (size_t)(r->count + 1));
    }
    return true;
}

static void kernel_free(Kernel *k)
{
    for (int i = 0; i < k->nkind; i++) {
        free(k->kind[i].first);
        free(k->kind[i].last);
    }
}

/* The register kind whose prefix is s[0, len), or NULL. */
static RegKind *kind_of(Kernel *k, const char *s, size_t len)
{
    for (int i = 0; i < k->nkind; i++)
        if (strlen(k->kind[i].prefix) == len && strncmp(k->kind[i].prefix, s, len) == 0)
            return &k->kind[i];
    return NULL;
}

/* Notes every register the instruction [line, eol) mentions as used at instruction i. */
static void note_registers(Kernel *k, const char *line, const char *eol, int i)
{
    for (const char *p = line; (p = memchr(p, '%', (size_t)(eol - p))) != NULL;) {
        const char *s = ++p;
        while (p < eol && ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
            p++;
        RegKind *r = p < eol && *p >= '0' && *p <= '9' ? kind_of(k, s, (size_t)(p - s)) : NULL;
        int n = atoi(p);
        if (r && n <= r->count) {
            if (r->first[n] < 0)
                r->first[n] = i;
            r->last[n] = i;
        }
    }
}

/* The label a branch [line, eol) jumps to, as [*label, *label + *len); false for no branch. */
static bool branch_target(const char *line, const char *eol, const char **label, size_t *len)
{
    const char *b = line;
    while ((b = strstr(b, "bra")) != NULL && b < eol) {
        bool word = (b == line || b[-1] == ' ' || b[-1] == '\t') &&
                    (b[3] == ' ' || b[3] == '\t' || b[3] == '.');
        if (word) {
            const char *t = b + 3 + strcspn(b + 3, " \t");
            t += strspn(t, " \t");
            *label = t;
            *len = strcspn(t, "; \t\n");
            return t < eol && *len > 0;
        }
        b += 3;
    }
    return false;
}

/* A branch at instruction `to` back to instruction `from`: a register live into the loop
 * (mentioned before it and in it) stays live to its end. */
static void extend_into_loop(Kernel *k, int from, int to)
{
    for (int i = 0; i < k->nkind; i++) {
        RegKind *r = &k->kind[i];
        for (int j = 0; j <= r->count; j++)
            if (r->first[j] >= 0 && r->first[j] < from && r->last[j] >= from)
                r->last[j] = to;
    }
}

typedef struct Label {
    const char *name;
    size_t len;
    int at; /* the instruction it precedes */
} Label;

/* Walks the instructions of [body, end): registers' first and last uses, and every branch back
 * to an earlier label extending the registers live into its loop. The number of instructions,
 * or -1 when memory runs out. */
static int walk(Kernel *k, const char *body, const char *end)
{
    Label *label = NULL;
    int nlabel = 0, cap = 0, n = 0;
    const char *line = body;
    /* labels first, so that a branch forward or back finds its target */
    for (int pass = 0; pass < 2; pass++) {
        n = 0;
        for (line = body; line < end;) {
            const char *eol = memchr(line, '\n', (size_t)(end - line));
            eol = eol ? eol : end;
            const char *s = line + strspn(line, " \t");
            size_t len = (size_t)(eol - s);
            /* a brace alone opens or closes a scope; `{ .reg .b16 t; mov ... }` is an
             * instruction */
            bool brace = (*s == '{' || *s == '}') && len == 1;
            bool blank = len == 0 || *s == '.' || *s == '/' || brace;
            if (!blank && s[len - 1] == ':') {
                if (pass == 0) {
                    if (nlabel == cap) {
                        cap = cap ? 2 * cap : 16;
                        Label *grown = realloc(label, sizeof *label * (size_t)cap);
                        if (!grown) {
                            free(label);
                            return -1;
                        }
                        label = grown;
                    }
                    label[nlabel++] = (Label){s, len - 1, n};
                }
            } else if (!blank) {
                if (pass == 1) {
                    note_registers(k, s, eol, n);
                    const char *t;
                    size_t tlen;
                    bool branch = branch_target(s, eol, &t, &tlen);
                    for (int l = 0; branch && l < nlabel; l++)
                        if (label[l].len == tlen && strncmp(label[l].name, t, tlen) == 0 &&
                            label[l].at <= n)
                            extend_into_loop(k, label[l].at, n);
                }
                n++;
            }
            line = eol + 1;
        }
    }
    free(label);
    return n;
}

/* The most 32-bit units live at once over n instructions. */
static int most_live(const Kernel *k, int n)
{
    int *delta = calloc((size_t)n + 2, sizeof *delta);
    if (!delta)
        return -1;
    for (int i = 0; i < k->nkind; i++)
        for (int r = 0; r <= k->kind[i].count; r++)
            if (k->kind[i].first[r] >= 0) {
                delta[k->kind[i].first[r]] += k->kind[i].width;
                delta[k->kind[i].last[r] + 1] -= k->kind[i].width;
            }
    int live = 0, most = 0;
    for (int i = 0; i <= n; i++) {
        live += delta[i];
        most = live > most ? live : most;
    }
    free(delta);
    return most;
}

int ptx_live_registers(const char *ptx, const char *name)
{
    const char *end, *body = ptx && name ? kernel_body(ptx, name, &end) : NULL;
    if (!body)
        return -1;
    Kernel k = {.nkind = 0};
    int n = read_decls(&k, body, end) ? walk(&k, body, end) : -1;
    int most = n >= 0 ? most_live(&k, n) : -1;
    kernel_free(&k);
    return most;
}

astitch_status ptx_raise_bounds(astitch_context *ctx, const astitch_plan *p, char **ptx)
{
    for (int k = 0; k < p->nkernel; k++) {
        const PlanKernel *pk = &p->kernel[k];
        char name[64];
        compile_kernel_name(p, k, -1, name, sizeof name);
        int bound = compile_ptx_maxnreg(*ptx, name);
        /* a kernel whose grid counts on its residency keeps its bound */
        if (!launch_bound_may_change(pk) || bound <= 0 ||
            ptx_live_registers(*ptx, name) < bound + raise_margin(pk, bound))
            continue;
        int next = (int)launch_next_bound(&p->dev, pk, bound);
        if (next <= 0)
            continue;
        char *raised = compile_ptx_with_maxnreg(*ptx, name, next);
        if (!raised)
            return ctx_fail(ctx, ASTITCH_ERR_MEMORY, "out of memory");
        free(*ptx);
        *ptx = raised;
    }
    return ASTITCH_OK;
}
