/* plan_json.c: the plan as JSON (docs/planner.md, "The plan as JSON"), built with jansson. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"

/* obj when every part of it was put (ok), else NULL with obj released. */
static json_t *built(json_t *obj, bool ok)
{
    if (ok)
        return obj;
    json_decref(obj);
    return NULL;
}

/* Sets obj[key] = val, taking val in every case (jansson returns NULL when out of memory). */
static bool put(json_t *obj, const char *key, json_t *val)
{
    if (!obj || !val) {
        json_decref(val);
        return false;
    }
    return json_object_set_new(obj, key, val) == 0;
}

static json_t *names(const astitch_plan *p, const int32_t *v, int32_t n)
{
    json_t *a = json_array();
    for (int32_t i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_string(gnode(p->graph, v[i])->name)) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *mapping(const astitch_mapping *m)
{
    json_t *o = json_object(), *space = json_array(), *axes = json_array();
    bool ok = o && space && axes;
    for (int i = 0; ok && i < m->rank; i++) {
        ok = json_array_append_new(space, json_integer(m->dims[i])) == 0;
        if (ok && (m->reduce_axes >> i & 1))
            ok = json_array_append_new(axes, json_integer(i)) == 0;
    }
    ok = put(o, "kind", json_string(astitch_mapping_kind_name(m->kind))) && ok;
    ok = put(o, "space", space) && ok;
    ok = put(o, "reduce_axes", axes) && ok;
    ok = ok && put(o, "rows", json_integer(m->rows)) && put(o, "row_len", json_integer(m->row_len)) &&
         put(o, "block", json_integer(m->block)) && put(o, "grid", json_integer(m->grid)) &&
         put(o, "threads_per_row", json_integer(m->threads_per_row)) &&
         put(o, "rows_per_block", json_integer(m->rows_per_block)) &&
         put(o, "chunk", json_integer(m->chunk)) &&
         put(o, "tasks_per_block", json_integer(m->tasks_per_block)) &&
         put(o, "split", json_integer(m->split)) &&
         put(o, "split_len", json_integer(m->split_len)) &&
         put(o, "vector", json_integer(m->vector)) &&
         put(o, "elements_per_thread", json_integer(astitch_mapping_elements_per_thread(m)));
    return built(o, ok);
}

static json_t *op_json(const astitch_plan *p, const PlanOp *o)
{
    const Node *n = gnode(p->graph, o->node);
    json_t *j = json_object();
    bool ok = j && put(j, "node", json_string(n->name)) && put(j, "id", json_integer(o->node)) &&
              put(j, "op", json_string(astitch_op_name(n->op))) &&
              put(j, "role", json_string(astitch_role_name(o->role))) &&
              put(j, "scheme", json_string(astitch_scheme_name(o->scheme))) &&
              put(j, "group", json_integer(o->group)) && put(j, "phase", json_integer(o->phase)) &&
              put(j, "buffer", json_integer(o->buf)) && put(j, "output", json_boolean(o->output)) &&
              put(j, "zero_init", json_boolean(o->zero_init)) &&
              put(j, "evals", json_integer(o->evals));
    return built(j, ok);
}

static json_t *kernel_json(const astitch_plan *p, const PlanKernel *k)
{
    json_t *j = json_object(), *ops = json_array(), *groups = json_array(),
           *phases = json_array(), *bufs = json_array();
    bool ok = j && ops && groups && phases && bufs;
    for (int32_t i = 0; ok && i < k->nop; i++)
        ok = json_array_append_new(ops, op_json(p, &k->op[i])) == 0;
    for (int32_t i = 0; ok && i < k->ngroup; i++) {
        const PlanGroup *gr = &k->group[i];
        json_t *x = json_object();
        ok = x && put(x, "dominant", json_string(gnode(p->graph, gr->dominant)->name)) &&
             put(x, "sub_dominants", names(p, gr->sub, gr->nsub)) &&
             put(x, "members", names(p, gr->member, gr->nmember)) &&
             put(x, "mapping", mapping(&gr->map)) && json_array_append(groups, x) == 0;
        json_decref(x);
    }
    for (int32_t i = 0; ok && i < k->nphase; i++) {
        const PlanPhase *ph = &k->phase[i];
        json_t *x = json_object();
        ok = x && put(x, "group", json_integer(ph->group)) &&
             put(x, "barrier", json_string(astitch_barrier_name(ph->barrier))) &&
             put(x, "tile_run_first", json_integer(ph->run_first)) &&
             put(x, "resident", json_boolean(ph->resident)) &&
             put(x, "online_with_next", json_boolean(plan_online_pair(p, k, i))) &&
             put(x, "roots", names(p, ph->root, ph->nroot)) && put(x, "mapping", mapping(&ph->map)) &&
             json_array_append(phases, x) == 0;
        json_decref(x);
    }
    for (int32_t i = 0; ok && i < k->nbuf; i++) {
        const PlanBuffer *b = &k->buf[i];
        json_t *x = json_object();
        ok = x && put(x, "kind", json_string(astitch_buffer_kind_name(b->kind))) &&
             put(x, "node", json_string(gnode(p->graph, b->node)->name)) &&
             put(x, "dtype", json_string(astitch_dtype_name(b->dtype))) &&
             put(x, "elements", json_integer(b->elements)) &&
             put(x, "offset", json_integer(b->offset)) && put(x, "bytes", json_integer(b->bytes)) &&
             put(x, "first_phase", json_integer(b->first_phase)) &&
             put(x, "last_phase", json_integer(b->last_phase)) &&
             put(x, "zero_init", json_boolean(b->zero_init)) && json_array_append(bufs, x) == 0;
        json_decref(x);
    }
    json_t *carry = json_null(); /* values kept across a barrier (carry.c), or null */
    if (ok && k->carry.slots > 0) {
        json_t *nodes = json_array();
        for (int32_t i = 0; nodes && i < k->nbuf; i++)
            if (k->buf[i].kind == ASTITCH_BUFFER_CARRY &&
                json_array_append_new(nodes, json_string(gnode(p->graph, k->buf[i].node)->name)))
                ok = false;
        carry = json_object();
        ok = put(carry, "nodes", nodes) && ok &&
             put(carry, "from_phase", json_integer(k->carry.from)) &&
             put(carry, "to_phase", json_integer(k->carry.to)) &&
             put(carry, "barrier", json_string(astitch_barrier_name(k->carry.barrier))) &&
             put(carry, "vector", json_integer(k->carry.vector)) &&
             put(carry, "slots", json_integer(k->carry.slots)) &&
             put(carry, "iterations", json_integer(k->carry.iterations));
    }
    ok = ok && put(j, "name", json_string(k->name)) && put(j, "block", json_integer(k->block)) &&
         put(j, "grid", json_integer(k->grid)) &&
         put(j, "shared_bytes", json_integer(k->shared_bytes)) &&
         put(j, "scratch_bytes", json_integer(k->scratch_bytes)) &&
         put(j, "regs", json_integer(k->regs)) &&
         put(j, "blocks_per_sm", json_integer(k->blocks_per_sm)) &&
         put(j, "blocks_per_wave", json_integer(k->blocks_per_wave)) &&
         put(j, "block_barriers", json_integer(k->block_barriers)) &&
         put(j, "global_barriers", json_integer(k->global_barriers)) &&
         put(j, "persistent", json_boolean(k->persistent)) &&
         put(j, "hoisted", json_boolean(k->hoisted)) &&
         put(j, "stream_by_block", json_boolean(k->stream_by_block)) &&
         put(j, "min_bytes", json_integer(k->min_bytes)) &&
         put(j, "moved_bytes", json_integer(k->moved_bytes)) &&
         put(j, "inputs", names(p, k->input, k->ninput)) &&
         put(j, "outputs", names(p, k->output, k->noutput));
    ok = put(j, "ops", ops) && ok;
    ok = put(j, "groups", groups) && ok;
    ok = put(j, "phases", phases) && ok;
    ok = put(j, "buffers", bufs) && ok;
    ok = put(j, "carry", carry) && ok;
    json_t *tile = json_null(); /* a transpose walked in square tiles (transpose.c), or null */
    if (ok && k->tile.on) {
        tile = json_object();
        ok = put(tile, "transpose", json_string(gnode(p->graph, k->tile.node)->name)) &&
             put(tile, "axis_from", json_integer(k->tile.axis_from)) &&
             put(tile, "axis", json_integer(k->tile.axis)) &&
             put(tile, "inner_from", json_integer(k->tile.inner_from)) &&
             put(tile, "size", json_integer(k->tile.size));
    }
    ok = put(j, "tile", tile) && ok;
    return built(j, ok);
}

static json_t *plan_json(const astitch_plan *p)
{
    const astitch_device *d = &p->dev;
    json_t *root = json_object(), *dev = json_object(), *opt = json_object(),
           *steps = json_array(), *kernels = json_array();
    bool ok = root && dev && opt && steps && kernels;
    ok = ok && put(dev, "name", json_string(d->name)) &&
         put(dev, "sm_version", json_integer(d->sm_version)) &&
         put(dev, "sm_count", json_integer(d->sm_count)) &&
         put(dev, "warp_size", json_integer(d->warp_size)) &&
         put(dev, "max_threads_per_block", json_integer(d->max_threads_per_block)) &&
         put(dev, "max_threads_per_sm", json_integer(d->max_threads_per_sm)) &&
         put(dev, "max_blocks_per_sm", json_integer(d->max_blocks_per_sm)) &&
         put(dev, "regs_per_sm", json_integer(d->regs_per_sm)) &&
         put(dev, "max_regs_per_thread", json_integer(d->max_regs_per_thread)) &&
         put(dev, "reg_alloc_unit", json_integer(d->reg_alloc_unit)) &&
         put(dev, "shared_per_block", json_integer(d->shared_per_block)) &&
         put(dev, "shared_per_sm", json_integer(d->shared_per_sm)) &&
         put(dev, "l2_bytes", json_integer(d->l2_bytes));
    ok = ok && put(opt, "fusion", json_string(astitch_fusion_name(p->opt.fusion))) &&
         put(opt, "remote", json_boolean(p->opt.remote)) &&
         put(opt, "merge", json_boolean(p->opt.merge)) &&
         put(opt, "packing", json_boolean(p->opt.packing)) &&
         put(opt, "deterministic", json_boolean(p->opt.deterministic)) &&
         put(opt, "persistent", json_boolean(p->opt.persistent)) &&
         put(opt, "one_pass_variance", json_boolean(p->opt.one_pass_variance)) &&
         put(opt, "recompute_outputs", json_boolean(p->opt.recompute_outputs)) &&
         put(opt, "wide_rows", json_boolean(p->opt.wide_rows)) &&
         put(opt, "long_rows", json_boolean(p->opt.long_rows)) &&
         put(opt, "column_vectors", json_boolean(p->opt.column_vectors)) &&
         put(opt, "row_vectors", json_boolean(p->opt.row_vectors)) &&
         put(opt, "online_softmax", json_boolean(p->opt.online_softmax)) &&
         put(opt, "column_sums_in_rows", json_boolean(p->opt.column_sums_in_rows)) &&
         put(opt, "carry", json_boolean(p->opt.carry)) &&
         put(opt, "transpose_tiles", json_boolean(p->opt.transpose_tiles)) &&
         put(opt, "hoist", json_boolean(p->opt.hoist)) &&
         put(opt, "split_barriers", json_boolean(p->opt.split_barriers));
    json_t *rewritten = json_array();
    ok = ok && rewritten;
    for (int32_t i = 0; ok && i < p->nrewritten; i++)
        ok = json_array_append_new(rewritten,
                                   json_string(gnode(p->graph, p->rewritten[i])->name)) == 0;
    json_t *recomputed = json_array();
    ok = ok && recomputed;
    for (int32_t i = 0; ok && i < p->nrecomputed; i++)
        ok = json_array_append_new(recomputed,
                                   json_string(gnode(p->graph, p->recomputed[i])->name)) == 0;
    json_t *dropped = json_array();
    ok = ok && dropped;
    for (int32_t i = 0; ok && i < p->ndropped; i++)
        ok = json_array_append_new(dropped, json_string(p->dropped[i])) == 0;
    json_t *gathered = json_array();
    ok = ok && gathered;
    for (int32_t i = 0; ok && i < p->ngathered; i++)
        ok = json_array_append_new(gathered, json_string(p->gathered[i])) == 0;
    json_t *shortened = json_array();
    ok = ok && shortened;
    for (int32_t i = 0; ok && i < p->nshortened; i++)
        ok = json_array_append_new(shortened, json_string(p->shortened[i])) == 0;
    for (int32_t s = 0; ok && s < p->nstep; s++) {
        const PlanStep *st = &p->step[s];
        json_t *x = json_object();
        if (st->kind == ASTITCH_STEP_KERNEL)
            ok = x && put(x, "kernel", json_string(p->kernel[st->index].name));
        else
            ok = x && put(x, "compute", json_string(gnode(p->graph, st->index)->name));
        ok = ok && json_array_append(steps, x) == 0;
        json_decref(x);
    }
    for (int32_t k = 0; ok && k < p->nkernel; k++)
        ok = json_array_append_new(kernels, kernel_json(p, &p->kernel[k])) == 0;
    ok = put(root, "format", json_string("astitch-plan")) && ok;
    ok = put(root, "version", json_integer(1)) && ok;
    ok = put(root, "device", dev) && ok;
    ok = put(root, "options", opt) && ok;
    ok = put(root, "dropped", dropped) && ok;
    ok = put(root, "one_hot_gathers", gathered) && ok;
    ok = put(root, "short_reduces", shortened) && ok;
    ok = put(root, "one_pass_variance", rewritten) && ok;
    ok = put(root, "recomputed", recomputed) && ok;
    ok = put(root, "scratch_bytes", json_integer(p->scratch_bytes)) && ok;
    ok = put(root, "steps", steps) && ok;
    ok = put(root, "kernels", kernels) && ok;
    return built(root, ok);
}

astitch_status astitch_plan_write_json(const astitch_plan *p, FILE *f)
{
    if (!p || !f)
        return ASTITCH_ERR_ARGUMENT;
    json_t *j = plan_json(p);
    if (!j)
        return ASTITCH_ERR_MEMORY;
    int rc = json_dumpf(j, f, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (rc == 0)
        fputc('\n', f);
    return rc == 0 && !ferror(f) ? ASTITCH_OK : ASTITCH_ERR_IO;
}

astitch_status astitch_plan_json(const astitch_plan *p, char **text)
{
    if (!text)
        return ASTITCH_ERR_ARGUMENT;
    *text = NULL;
    if (!p)
        return ASTITCH_ERR_ARGUMENT;
    json_t *j = plan_json(p);
    if (!j)
        return ASTITCH_ERR_MEMORY;
    char *s = json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    json_decref(j);
    if (!s)
        return ASTITCH_ERR_MEMORY;
    /* jansson allocates with malloc by default; copy so astitch_free always matches */
    *text = strdup(s);
    free(s);
    return *text ? ASTITCH_OK : ASTITCH_ERR_MEMORY;
}
