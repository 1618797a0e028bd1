/* test_codegen_redzones.c: plans whose buffers do not hold what their kernels write, changed
 * by the test after planning, so that the host target's checks must catch the overrun: the
 * scratch arena's redzones, shared-memory bounds, and partial results of split rows. Each run
 * must fail with a kernel error that names the buffer and the first byte overwritten; the
 * unchanged plan runs clean against the reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "piece.h"

/* ---- redzones: a plan whose buffers do not hold what its kernels write ------------------- */

/* Compiles t's host kernels again from its plan as it now stands (the test changed it). */
static void piece_recompile(Piece *t)
{
    astitch_executable *x = t->x;
    host_kernels_destroy(x->hk);
    host_kernels_destroy(x->hk_parts);
    free(x->as_parts);
    x->hk = x->hk_parts = NULL;
    x->as_parts = NULL;
    if (exec_host_prepare(x) != ASTITCH_OK)
        fail_msg("recompile: %s", astitch_last_error(t->ctx));
}

/* Runs t's kernels on d's inputs: they must succeed and match the reference. */
static void piece_run_ok(Piece *t, const DiffRef *d, const char *what)
{
    DiffResult r;
    if (diff_ref_check(d, t->x, &r) != ASTITCH_OK)
        fail_msg("%s: run: %s", what, astitch_last_error(t->ctx));
    if (!r.ok)
        fail_msg("%s: %s", what, r.message);
}

/* Runs t's kernels on d's inputs: the run must fail with a kernel error whose message holds
 * every string of want (NULL-terminated). */
static void piece_run_fails(Piece *t, const DiffRef *d, const char *what, const char **want)
{
    DiffResult r;
    astitch_status s = diff_ref_check(d, t->x, &r);
    const char *msg = astitch_last_error(t->ctx);
    printf("%s: %s\n", what, s == ASTITCH_OK ? "(ran)" : msg);
    if (s != ASTITCH_ERR_DEVICE)
        fail_msg("%s: status %d, not a kernel error", what, (int)s);
    for (int i = 0; want[i]; i++)
        if (!strstr(msg, want[i]))
            fail_msg("%s: '%s' not in the message", what, want[i]);
}

/* The message must name the first overwritten byte, "at byte N ", with lo <= N < hi. A guard
 * byte the kernel overwrites with the guard's own value is invisible, so the first byte seen
 * may lie past the first byte written, by chance of the random inputs; never before it. */
static void message_byte_within(Piece *t, const char *what, int64_t lo, int64_t hi)
{
    const char *msg = astitch_last_error(t->ctx);
    const char *at = strstr(msg, "at byte ");
    if (!at)
        fail_msg("%s: no 'at byte' in the message", what);
    long long n = strtoll(at + strlen("at byte "), NULL, 10);
    if (n < lo || n >= hi)
        fail_msg("%s: byte %lld named, the first overwritten byte lies in [%lld, %lld)", what, n,
                 (long long)lo, (long long)hi);
}

/* The buffer of kind `kind` of kernel 0 of t's plan ending last, which the test may change. */
static PlanBuffer *top_buffer(Piece *t, astitch_buffer_kind kind)
{
    PlanKernel *k = &t->x->plan->kernel[0];
    PlanBuffer *top = NULL;
    for (int32_t b = 0; b < k->nbuf; b++)
        if (k->buf[b].kind == kind &&
            (!top || k->buf[b].offset + k->buf[b].bytes > top->offset + top->bytes))
            top = &k->buf[b];
    if (!top)
        fail_msg("kernel 0 has no %s buffer", astitch_buffer_kind_name(kind));
    return top;
}

static int64_t buffer_used(const PlanBuffer *b)
{
    return b->elements * (int64_t)astitch_dtype_size(b->dtype);
}

/* The column-mean graph of test_global: its mean lives in a scratch buffer. */
static void global_mean(Piece *t)
{
    piece_begin(t);
    int64_t d[2] = {512, 24}, axis = 0, cols[1] = {1};
    astitch_node x = astitch_parameter(t->g, "x", ASTITCH_F32, 2, d);
    double inv = 1.0 / 512;
    astitch_node mean = astitch_binary(t->g, ASTITCH_OP_MUL,
                                       astitch_reduce(t->g, ASTITCH_REDUCE_SUM, x, 1, &axis),
                                       astitch_constant(t->g, ASTITCH_F32, 1, &d[1], &inv, 1));
    mean = astitch_unary(t->g, ASTITCH_OP_EXP, mean);
    astitch_add_output(t->g, astitch_binary(t->g, ASTITCH_OP_MUL, x,
                                            astitch_broadcast_in_dim(t->g, mean, 2, d, cols)));
    piece_compile(t);
}

/* A scratch buffer planned smaller than the value its kernel stores (half its elements), and
 * one placed past the end of the arena: the kernel writes the guard bytes after the buffer's
 * elements or after the arena, which no check in the kernel sees; the run must fail naming the
 * kernel, the buffer's node and the byte. The same kernels on the plan as made run clean, as
 * whole kernels and as their parts (parts form, SHARED values in scratch). */
static void test_redzone_scratch(void **state)
{
    (void)state;
    for (int c = 0; c < 2; c++) {
        Piece t;
        global_mean(&t);
        DiffRef *d = NULL;
        assert_int_equal(diff_ref_create(t.g, diff_fresh_seed(), false, &d), ASTITCH_OK);
        piece_run_ok(&t, d, "scratch, plan as made");
        assert_int_equal(astitch_context_set_option(t.ctx, "force_parts", "1"), ASTITCH_OK);
        piece_recompile(&t);
        piece_run_ok(&t, d, "scratch, plan as made, parts form");
        assert_int_equal(astitch_context_set_option(t.ctx, "force_parts", NULL), ASTITCH_OK);
        PlanKernel *k = &t.x->plan->kernel[0];
        PlanBuffer *b = top_buffer(&t, ASTITCH_BUFFER_SCRATCH);
        char node[96];
        snprintf(node, sizeof node, "scratch buffer of node %d '%s'", b->node,
                 gnode(t.x->g, b->node)->name);
        const char *want[] = {"kernel 'stitch.0'", "scratch redzone", node, NULL};
        int64_t used = buffer_used(b), first, last;
        if (c == 0) { /* elements [n/2, n) land in the padding after the buffer */
            b->elements /= 2;
            first = b->offset + buffer_used(b);
            last = b->offset + used;
        } else { /* the last 32 bytes land past the arena */
            b->offset = t.x->plan->scratch_bytes - used + 32;
            first = t.x->plan->scratch_bytes;
            last = first + 32;
        }
        assert_true(k->scratch_bytes <= t.x->plan->scratch_bytes);
        piece_recompile(&t);
        const char *what = c == 0 ? "scratch buffer too small" : "scratch buffer past the arena";
        piece_run_fails(&t, d, what, want);
        message_byte_within(&t, what, first, last);
        diff_ref_destroy(d);
        piece_end(&t);
    }
}

/* A shared-memory buffer placed 16 bytes past the end of its block's shared memory: every index
 * the kernel uses lies inside the buffer, so check_shared passes, yet the block's last 16 bytes
 * land beyond its memory (on a GPU, in another block's or on nothing). The run must fail naming
 * the block, the buffer's node and the byte; on the plan as made it runs clean. */
static void test_redzone_shared(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    int64_t d[2] = {96, 50}, axis = 1;
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
    astitch_node max = astitch_reduce(t.g, ASTITCH_REDUCE_MAX, x, 1, &axis);
    astitch_node e = astitch_unary(t.g, ASTITCH_OP_EXP,
                                   astitch_binary(t.g, ASTITCH_OP_SUB, x, broadcast_rows(t.g, max, d)));
    astitch_node sum = astitch_reduce(t.g, ASTITCH_REDUCE_SUM, e, 1, &axis);
    astitch_add_output(t.g, astitch_binary(t.g, ASTITCH_OP_DIV, e, broadcast_rows(t.g, sum, d)));
    piece_compile_packing(&t, false);
    DiffRef *ref = NULL;
    assert_int_equal(diff_ref_create(t.g, diff_fresh_seed(), false, &ref), ASTITCH_OK);
    piece_run_ok(&t, ref, "shared, plan as made");
    PlanKernel *k = &t.x->plan->kernel[0];
    PlanBuffer *b = top_buffer(&t, ASTITCH_BUFFER_SHARED);
    b->offset = k->shared_bytes + 16 - buffer_used(b);
    char node[96];
    snprintf(node, sizeof node, "shared buffer of node %d '%s'", b->node,
             gnode(t.x->g, b->node)->name);
    const char *want[] = {"kernel 'stitch.0' block 0", "shared-memory redzone", node, NULL};
    piece_recompile(&t);
    const char *what = "shared buffer past the block's memory";
    piece_run_fails(&t, ref, what, want);
    /* the first byte the block writes past its memory, up to the buffer's end */
    message_byte_within(&t, what, b->offset > k->shared_bytes ? b->offset : k->shared_bytes,
                        b->offset + buffer_used(b));
    diff_ref_destroy(ref);
    piece_end(&t);
}

/* The partial results of a split row combined in order (deterministic), with the buffer placed
 * so that its arrival counters lie just past the scratch arena. */
static void test_redzone_partial(void **state)
{
    (void)state;
    Piece t;
    piece_begin(&t);
    int64_t d[2] = {2, 30000}, axis = 1;
    astitch_node x = astitch_parameter(t.g, "x", ASTITCH_F32, 2, d);
    astitch_add_output(t.g, astitch_reduce(t.g, ASTITCH_REDUCE_SUM, x, 1, &axis));
    astitch_compile_options o;
    astitch_compile_options_default(&o);
    o.target = ASTITCH_TARGET_HOST;
    o.plan.deterministic = true;
    assert_int_equal(astitch_compile(t.g, &o, &t.x), ASTITCH_OK);
    DiffRef *ref = NULL;
    assert_int_equal(diff_ref_create(t.g, diff_fresh_seed(), false, &ref), ASTITCH_OK);
    piece_run_ok(&t, ref, "partial, plan as made");
    PlanBuffer *b = top_buffer(&t, ASTITCH_BUFFER_PARTIAL);
    assert_true(t.x->plan->kernel[0].phase[0].map.rows * 4 <= 64); /* within the redzone */
    b->offset = t.x->plan->scratch_bytes - plan_partial_counters(b);
    char node[96];
    snprintf(node, sizeof node, "partial buffer of node %d '%s'", b->node,
             gnode(t.x->g, b->node)->name);
    const char *want[] = {"kernel 'stitch.0'", "scratch redzone", "arrival counters", node, NULL};
    piece_recompile(&t);
    piece_run_fails(&t, ref, "partial counters past the arena", want);
    diff_ref_destroy(ref);
    piece_end(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redzone_scratch),
        cmocka_unit_test(test_redzone_shared),
        cmocka_unit_test(test_redzone_partial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
