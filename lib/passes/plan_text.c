/* plan_text.c: the plan as readable text and as a Graphviz picture. */
#include <stdio.h>
#include <stdlib.h>

#include "passes/passes.h"

static const char *nm(const astitch_plan *p, int32_t v) { return gnode(p->graph, v)->name; }

static void list(FILE *f, const astitch_plan *p, const int32_t *v, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        fprintf(f, "%s%s", i ? ", " : "", nm(p, v[i]));
    if (n == 0)
        fputs("-", f);
}

/* Axes from..to: "2", or "2-3" for a run taken as one axis. */
static void axis_run(FILE *f, int from, int to)
{
    if (from == to)
        fprintf(f, "%d", to);
    else
        fprintf(f, "%d-%d", from, to);
}

/* The mapping of a group or phase, on a line of its own after the line before. */
static void mapping(FILE *f, const astitch_mapping *m)
{
    fputs("\n    mapping ", f);
    fprintf(f, "%s [", astitch_mapping_kind_name(m->kind));
    for (int i = 0; i < m->rank; i++)
        fprintf(f, "%s%lld%s", i ? "," : "", (long long)m->dims[i],
                m->reduce_axes >> i & 1 ? "r" : "");
    fprintf(f, "] rows %lld x %lld, grid %d x %d, %d lanes/row, %d rows/tile, %lld tiles/block, "
               "chunk %lld",
            (long long)m->rows, (long long)m->row_len, (int)m->grid, (int)m->block,
            (int)m->threads_per_row, (int)m->rows_per_block, (long long)m->tasks_per_block,
            (long long)m->chunk);
    if (m->split > 1)
        fprintf(f, ", split %d x %lld", (int)m->split, (long long)m->split_len);
    if (m->kind == ASTITCH_MAP_COLUMN_REDUCE && m->vector > 1)
        fprintf(f, ", runs of %d rows", (int)m->vector);
    else if (m->vector > 0)
        fprintf(f, ", resident rows, vector %d", (int)m->vector);
    fprintf(f, ", %lld elements/thread\n", (long long)astitch_mapping_elements_per_thread(m));
}

void plan_kernel_text(FILE *f, const astitch_plan *p, const PlanKernel *k)
{
    const astitch_graph *g = p->graph;
    fprintf(f, "kernel %s: block %d, grid %d (%s), shared %lld B, scratch %lld B, regs %d, "
               "%d blocks/SM, wave %d, barriers %d block / %d global\n",
            k->name, (int)k->block, (int)k->grid,
            k->persistent ? "persistent" : "a block per tile", (long long)k->shared_bytes,
            (long long)k->scratch_bytes, (int)k->regs, (int)k->blocks_per_sm,
            (int)k->blocks_per_wave, (int)k->block_barriers, (int)k->global_barriers);
    fprintf(f, "  bytes: %lld moved, %lld minimal (inputs read once, outputs written once)\n",
            (long long)k->moved_bytes, (long long)k->min_bytes);
    if (k->hoisted)
        fprintf(f, "  hoisted: makes what a later kernel's global barrier waited for; that "
                   "kernel runs without the barrier\n");
    if (k->carry.slots > 0) {
        fprintf(f, "  carry: phase %d keeps for phase %d, across the %s barrier, ",
                (int)k->carry.from, (int)k->carry.to,
                k->carry.barrier == ASTITCH_BARRIER_BLOCK ? "block" : "global");
        for (int32_t i = 0, n = 0; i < k->nbuf; i++)
            if (k->buf[i].kind == ASTITCH_BUFFER_CARRY)
                fprintf(f, "%s%s", n++ ? ", " : "", nm(p, k->buf[i].node));
        fprintf(f, " at its first %lld of %lld iterations per thread (%d element%s each)\n",
                (long long)k->carry.slots, (long long)k->carry.iterations, (int)k->carry.vector,
                k->carry.vector == 1 ? "" : "s");
    }
    if (k->tile.on) {
        fprintf(f, "  tile: %s's operand staged in shared memory, %d x %d elements over axes ",
                nm(p, k->tile.node), (int)k->tile.size, (int)k->tile.size);
        axis_run(f, k->tile.axis_from, k->tile.axis);
        fputs(" and ", f);
        axis_run(f, k->tile.inner_from, (int)k->phase[0].map.rank - 1);
        fputc('\n', f);
    }
    if (k->stream_by_block)
        fputs("  streamed rows: a block's lanes each; a warp each would walk them again beyond "
              "half the L2\n", f);
    fputs("  inputs: ", f);
    list(f, p, k->input, k->ninput);
    fputs("\n  outputs: ", f);
    list(f, p, k->output, k->noutput);
    fputc('\n', f);
    for (int32_t i = 0; i < k->ngroup; i++) {
        const PlanGroup *gr = &k->group[i];
        fprintf(f, "  group %d: dominant %s; sub-dominants ", (int)i, nm(p, gr->dominant));
        list(f, p, gr->sub, gr->nsub);
        fputs("; members ", f);
        list(f, p, gr->member, gr->nmember);
        mapping(f, &gr->map);
    }
    for (int32_t i = 0; i < k->nphase; i++) {
        const PlanPhase *ph = &k->phase[i];
        fprintf(f, "  phase %d: group %d, after %s barrier", (int)i, (int)ph->group,
                astitch_barrier_name(ph->barrier));
        if (ph->run_first != i)
            fprintf(f, ", tile run from phase %d", (int)ph->run_first);
        if (ph->resident)
            fputs(", rows in registers", f);
        if (k->carry.slots > 0 && i == k->carry.from)
            fprintf(f, ", keeps values for phase %d", (int)k->carry.to);
        else if (k->carry.slots > 0 && i == k->carry.to)
            fprintf(f, ", reads values phase %d kept", (int)k->carry.from);
        if (plan_online_pair(p, k, i))
            fprintf(f, ", with phase %d in one walk (online softmax)", (int)i + 1);
        else if (plan_online_pair(p, k, i - 1))
            fprintf(f, ", walked with phase %d", (int)i - 1);
        fputs(": ", f);
        list(f, p, ph->root, ph->nroot);
        mapping(f, &ph->map);
    }
    for (int32_t i = 0; i < k->nop; i++) {
        const PlanOp *o = &k->op[i];
        char type[160];
        const Node *n = gnode(g, o->node);
        fprintf(f, "  op %-16s %-16s %-20s %-12s %-11s", n->name, astitch_op_name(n->op),
                type_str(type, sizeof type, n->dtype, &n->shape), astitch_role_name(o->role),
                astitch_scheme_name(o->scheme));
        if (o->group >= 0)
            fprintf(f, " group %d", (int)o->group);
        if (o->phase >= 0)
            fprintf(f, " phase %d", (int)o->phase);
        if (o->buf >= 0)
            fprintf(f, " buffer %d", (int)o->buf);
        if (o->output)
            fputs(" output", f);
        if (o->zero_init)
            fputs(" zero-init", f);
        fprintf(f, " evals %lld\n", (long long)o->evals);
    }
    for (int32_t i = 0; i < k->nbuf; i++) {
        const PlanBuffer *b = &k->buf[i];
        fprintf(f, "  buffer %d: %s %s, %lld x %s at %lld, %lld B, phases %d-%d%s\n", (int)i,
                astitch_buffer_kind_name(b->kind), nm(p, b->node), (long long)b->elements,
                astitch_dtype_name(b->dtype), (long long)b->offset, (long long)b->bytes,
                (int)b->first_phase, (int)b->last_phase, b->zero_init ? ", zero-init" : "");
    }
}

astitch_status astitch_plan_write_text(const astitch_plan *p, FILE *f)
{
    if (!p || !f)
        return ASTITCH_ERR_ARGUMENT;
    const astitch_device *d = &p->dev;
    fprintf(f, "plan: device %s (%d SMs, %d threads/block, %lld B shared/block), fusion %s, "
               "remote %s, merge %s, packing %s%s%s%s%s%s%s%s%s%s%s%s%s%s%s\n",
            d->name, d->sm_count, d->max_threads_per_block, (long long)d->shared_per_block,
            astitch_fusion_name(p->opt.fusion), p->opt.remote ? "on" : "off",
            p->opt.merge ? "on" : "off", p->opt.packing ? "on" : "off",
            p->opt.deterministic ? ", deterministic" : "", p->opt.persistent ? ", persistent" : "",
            p->opt.fusion == ASTITCH_FUSION_STITCH && !p->opt.one_pass_variance
                ? ", one-pass variance off"
                : "",
            p->opt.fusion == ASTITCH_FUSION_STITCH && !p->opt.recompute_outputs
                ? ", output recompute off"
                : "",
            p->opt.wide_rows ? ", wide rows" : "",
            p->opt.long_rows ? ", long rows" : "",
            p->opt.column_vectors ? "" : ", column runs off",
            p->opt.row_vectors ? "" : ", row vectors off",
            p->opt.online_softmax ? "" : ", online softmax off",
            p->opt.column_sums_in_rows ? ", column sums in rows" : "",
            p->opt.carry ? "" : ", carry off",
            p->opt.transpose_tiles ? "" : ", transpose tiles off",
            p->opt.fusion == ASTITCH_FUSION_STITCH && !p->opt.hoist ? ", hoist off" : "",
            p->opt.fusion == ASTITCH_FUSION_STITCH && p->opt.split_barriers ? ", barriers split"
                                                                              : "");
    if (p->ndropped > 0) {
        fprintf(f, "dropped (feed no output, not planned):");
        for (int32_t i = 0; i < p->ndropped; i++)
            fprintf(f, "%s %s", i ? "," : "", p->dropped[i]);
        fputc('\n', f);
    }
    if (p->ngathered > 0) {
        fprintf(f, "rewritten (a one-hot sum as a gather, one element per row):");
        for (int32_t i = 0; i < p->ngathered; i++)
            fprintf(f, "%s %s", i ? "," : "", p->gathered[i]);
        fputc('\n', f);
    }
    if (p->nshortened > 0) {
        fprintf(f, "rewritten (a reduce over a few elements per output as element-wise slices):");
        for (int32_t i = 0; i < p->nshortened; i++)
            fprintf(f, "%s %s", i ? "," : "", p->shortened[i]);
        fputc('\n', f);
    }
    if (p->nrewritten > 0) {
        fprintf(f, "rewritten (one-pass variance, one read of the input): ");
        list(f, p, p->rewritten, p->nrewritten);
        fputc('\n', f);
    }
    if (p->nrecomputed > 0) {
        fprintf(f, "recomputed where read (outputs of positions and constants alone): ");
        list(f, p, p->recomputed, p->nrecomputed);
        fputc('\n', f);
    }
    fprintf(f, "kernels %d, scratch %lld B\nsteps:", (int)p->nkernel, (long long)p->scratch_bytes);
    for (int32_t s = 0; s < p->nstep; s++) {
        const PlanStep *st = &p->step[s];
        if (st->kind == ASTITCH_STEP_KERNEL)
            fprintf(f, " %s", p->kernel[st->index].name);
        else
            fprintf(f, " %s(%s)", astitch_op_name(gnode(p->graph, st->index)->op),
                    nm(p, st->index));
    }
    fputc('\n', f);
    for (int32_t k = 0; k < p->nkernel; k++)
        plan_kernel_text(f, p, &p->kernel[k]);
    return ferror(f) ? ASTITCH_ERR_IO : ASTITCH_OK;
}

static const char *scheme_color(astitch_scheme s)
{
    static const char *const c[] = {"#d9d9d9", "#7fc97f", "#fdae61", "#80b1d3"};
    return (unsigned)s < 4 ? c[s] : "white";
}

/* The dot name of node v as seen from kernel k: its copy in k if k holds it, else its home. */
static void dot_id(FILE *f, const astitch_plan *p, int32_t k, int32_t v)
{
    if (k >= 0 && plan_kernel_op(&p->kernel[k], v) && p->owner[v] != k)
        fprintf(f, "k%d_n%d", (int)k, (int)v);
    else
        fprintf(f, "n%d", (int)v);
}

astitch_status astitch_plan_write_dot(const astitch_plan *p, FILE *f)
{
    if (!p || !f)
        return ASTITCH_ERR_ARGUMENT;
    const astitch_graph *g = p->graph;
    fputs("digraph plan {\n  rankdir=TB;\n  node [shape=box, style=filled, fontname=\"Helvetica\"];\n",
          f);
    fputs("  legend [shape=plaintext, style=\"\", label=\"local: grey, regional: green, "
          "global: orange, independent: blue, inlined: dashed\"];\n",
          f);
    for (int32_t ki = 0; ki < p->nkernel; ki++) {
        const PlanKernel *k = &p->kernel[ki];
        fprintf(f, "  subgraph cluster_%d {\n    label=\"%s  block %d grid %d  shared %lld B  "
                   "regs %d\";\n    style=rounded;\n",
                (int)ki, k->name, (int)k->block, (int)k->grid, (long long)k->shared_bytes,
                (int)k->regs);
        for (int32_t i = 0; i < k->nop; i++) {
            const PlanOp *o = &k->op[i];
            fputs("    ", f);
            dot_id(f, p, ki, o->node);
            fprintf(f, " [label=\"%s\\n%s%s\", fillcolor=\"%s\"%s%s];\n", nm(p, o->node),
                    astitch_scheme_name(o->scheme),
                    o->role == ASTITCH_ROLE_DOMINANT       ? " (dominant)"
                    : o->role == ASTITCH_ROLE_SUB_DOMINANT ? " (sub-dominant)"
                                                           : "",
                    o->role == ASTITCH_ROLE_INLINED ? "white" : scheme_color(o->scheme),
                    o->role == ASTITCH_ROLE_INLINED ? ", style=\"filled,dashed\"" : "",
                    o->role == ASTITCH_ROLE_DOMINANT ? ", penwidth=2" : "");
        }
        fputs("  }\n", f);
    }
    for (int32_t v = 0; v < g->nnode; v++) {
        if (p->owner[v] >= 0)
            continue;
        astitch_op op = gnode(g, v)->op;
        bool compute = astitch_op_class_of(op) == ASTITCH_CLASS_COMPUTE;
        bool used = compute || op == ASTITCH_OP_PARAMETER;
        if (!used)
            continue;
        fprintf(f, "  n%d [label=\"%s\\n%s\", shape=%s, fillcolor=white];\n", (int)v, nm(p, v),
                astitch_op_name(op), compute ? "box3d" : "ellipse");
    }
    /* edges into every copy of each consumer */
    for (int32_t ki = -1; ki < p->nkernel; ki++) {
        int32_t nop = ki < 0 ? g->nnode : p->kernel[ki].nop;
        for (int32_t i = 0; i < nop; i++) {
            int32_t v = ki < 0 ? i : p->kernel[ki].op[i].node;
            if (ki < 0 && astitch_op_class_of(gnode(g, v)->op) != ASTITCH_CLASS_COMPUTE)
                continue;
            for (int j = 0; j < gnode(g, v)->nin; j++) {
                int32_t x = goperand(g, v, j);
                if (p->owner[x] < 0 && astitch_op_class_of(gnode(g, x)->op) == ASTITCH_CLASS_SOURCE &&
                    gnode(g, x)->op != ASTITCH_OP_PARAMETER && (ki < 0 || !plan_kernel_op(&p->kernel[ki], x)))
                    continue;
                fputs("  ", f);
                dot_id(f, p, ki, x);
                fputs(" -> ", f);
                dot_id(f, p, ki, v);
                fputs(";\n", f);
            }
        }
    }
    fputs("}\n", f);
    return ferror(f) ? ASTITCH_ERR_IO : ASTITCH_OK;
}

typedef astitch_status (*writer_fn)(const astitch_plan *, FILE *);

static astitch_status to_string(const astitch_plan *p, char **text, writer_fn fn)
{
    if (!text)
        return ASTITCH_ERR_ARGUMENT;
    *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    if (!f)
        return ASTITCH_ERR_MEMORY;
    astitch_status st = fn(p, f);
    if (fclose(f) != 0 && !st)
        st = ASTITCH_ERR_MEMORY;
    if (st) {
        free(*text);
        *text = NULL;
    }
    return st;
}

astitch_status astitch_plan_text(const astitch_plan *p, char **text)
{
    return to_string(p, text, astitch_plan_write_text);
}

astitch_status astitch_plan_dot(const astitch_plan *p, char **text)
{
    return to_string(p, text, astitch_plan_write_dot);
}
