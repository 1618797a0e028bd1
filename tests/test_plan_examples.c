/*
 * test_plan_examples.c: every examples/NAME.json plans under every fusion mode, ablation
 * switch and built-in device model, and the three printed forms of each plan agree with the
 * plan read through the accessors: the JSON (parsed back with jansson) has the documented
 * fields and values, the text names every kernel, the dot picture has one cluster per kernel.
 */
#include <dirent.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "astitch/plan.h"

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static const char *str(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_string(v))
        fail_msg("JSON: \"%s\" is not a string", key);
    return json_string_value(v);
}

static json_int_t num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v))
        fail_msg("JSON: \"%s\" is not an integer", key);
    return json_integer_value(v);
}

static void check_mapping_json(json_t *m, const astitch_mapping *want)
{
    assert_true(json_is_object(m));
    assert_string_equal(str(m, "kind"), astitch_mapping_kind_name(want->kind));
    assert_int_equal(json_array_size(json_object_get(m, "space")), want->rank);
    assert_int_equal(num(m, "rows"), want->rows);
    assert_int_equal(num(m, "row_len"), want->row_len);
    assert_int_equal(num(m, "grid"), want->grid);
    assert_int_equal(num(m, "block"), want->block);
    assert_int_equal(num(m, "threads_per_row"), want->threads_per_row);
    assert_int_equal(num(m, "rows_per_block"), want->rows_per_block);
    assert_int_equal(num(m, "chunk"), want->chunk);
    assert_int_equal(num(m, "tasks_per_block"), want->tasks_per_block);
    assert_int_equal(num(m, "elements_per_thread"), astitch_mapping_elements_per_thread(want));
    assert_int_equal(num(m, "split"), want->split);
}

/* The JSON form against the accessors. */
static void check_json(const astitch_plan *p, const astitch_graph *g, const char *text)
{
    json_error_t err;
    json_t *root = json_loads(text, 0, &err);
    if (!root)
        fail_msg("plan JSON does not parse: %s at %d:%d", err.text, err.line, err.column);
    assert_string_equal(str(root, "format"), "astitch-plan");
    assert_int_equal(num(root, "version"), 1);
    const astitch_plan_options *o = astitch_plan_get_options(p);
    json_t *opt = json_object_get(root, "options");
    assert_string_equal(str(opt, "fusion"), astitch_fusion_name(o->fusion));
    assert_int_equal(json_is_true(json_object_get(opt, "merge")), o->merge);
    assert_string_equal(str(json_object_get(root, "device"), "name"), astitch_plan_device(p)->name);
    assert_int_equal(num(root, "scratch_bytes"), astitch_plan_scratch_bytes(p));
    json_t *rewritten = json_object_get(root, "one_pass_variance");
    assert_true(json_is_array(rewritten));
    for (size_t i = 0; i < json_array_size(rewritten); i++)
        assert_true(astitch_graph_find(g, json_string_value(json_array_get(rewritten, i))) >= 0);
    json_t *kernels = json_object_get(root, "kernels");
    assert_int_equal(json_array_size(kernels), astitch_plan_num_kernels(p));
    assert_int_equal(json_array_size(json_object_get(root, "steps")), astitch_plan_num_steps(p));
    for (int k = 0; k < astitch_plan_num_kernels(p); k++) {
        astitch_kernel_info ki;
        assert_int_equal(astitch_plan_kernel_info(p, k, &ki), ASTITCH_OK);
        json_t *jk = json_array_get(kernels, (size_t)k);
        assert_string_equal(str(jk, "name"), ki.name);
        assert_int_equal(num(jk, "grid"), ki.grid);
        assert_int_equal(num(jk, "block"), ki.block);
        assert_int_equal(num(jk, "shared_bytes"), ki.shared_bytes);
        assert_int_equal(num(jk, "regs"), ki.regs);
        assert_int_equal(num(jk, "global_barriers"), ki.global_barriers);
        assert_int_equal(num(jk, "min_bytes"), ki.min_bytes);
        assert_int_equal(num(jk, "moved_bytes"), ki.moved_bytes);
        assert_true(ki.min_bytes > 0 && ki.moved_bytes >= ki.min_bytes); /* nothing moves less */
        json_t *ops = json_object_get(jk, "ops");
        assert_int_equal(json_array_size(ops), ki.num_ops);
        for (int i = 0; i < ki.num_ops; i++) {
            astitch_op_info x;
            assert_int_equal(astitch_plan_kernel_op(p, k, i, &x), ASTITCH_OK);
            json_t *jo = json_array_get(ops, (size_t)i);
            astitch_tensor_info ti;
            assert_int_equal(astitch_node_info(g, x.node, &ti), ASTITCH_OK);
            assert_string_equal(str(jo, "node"), ti.name);
            assert_string_equal(str(jo, "scheme"), astitch_scheme_name(x.scheme));
            assert_string_equal(str(jo, "role"), astitch_role_name(x.role));
            assert_int_equal(num(jo, "phase"), x.phase);
            assert_int_equal(num(jo, "evals"), x.evals);
        }
        json_t *groups = json_object_get(jk, "groups"), *phases = json_object_get(jk, "phases");
        assert_int_equal(json_array_size(groups), ki.num_groups);
        assert_int_equal(json_array_size(phases), ki.num_phases);
        for (int i = 0; i < ki.num_groups; i++) {
            astitch_group_info gi;
            assert_int_equal(astitch_plan_group_info(p, k, i, &gi), ASTITCH_OK);
            json_t *jg = json_array_get(groups, (size_t)i);
            check_mapping_json(json_object_get(jg, "mapping"), &gi.mapping);
            assert_int_equal(json_array_size(json_object_get(jg, "sub_dominants")),
                             gi.num_sub_dominants);
        }
        for (int i = 0; i < ki.num_phases; i++) {
            astitch_phase_info pi;
            assert_int_equal(astitch_plan_phase_info(p, k, i, &pi), ASTITCH_OK);
            json_t *jp = json_array_get(phases, (size_t)i);
            assert_string_equal(str(jp, "barrier"), astitch_barrier_name(pi.barrier));
            assert_int_equal(json_array_size(json_object_get(jp, "roots")), pi.num_roots);
            check_mapping_json(json_object_get(jp, "mapping"), &pi.mapping);
        }
        assert_int_equal(json_array_size(json_object_get(jk, "buffers")), ki.num_buffers);
    }
    json_decref(root);
}

static void check_printers(const astitch_plan *p, const astitch_graph *g)
{
    char *json = NULL, *text = NULL, *dot = NULL;
    assert_int_equal(astitch_plan_json(p, &json), ASTITCH_OK);
    assert_int_equal(astitch_plan_text(p, &text), ASTITCH_OK);
    assert_int_equal(astitch_plan_dot(p, &dot), ASTITCH_OK);
    check_json(p, g, json);
    int nk = astitch_plan_num_kernels(p);
    for (int k = 0; k < nk; k++) {
        astitch_kernel_info ki;
        astitch_plan_kernel_info(p, k, &ki);
        char line[64];
        snprintf(line, sizeof line, "kernel %s:", ki.name);
        assert_int_equal(count(text, line), 1);
    }
    assert_int_equal(strncmp(dot, "digraph plan {", 14), 0);
    assert_int_equal(count(dot, "subgraph cluster_"), nk);
    /* the FILE writer prints the same text */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(astitch_plan_write_json(p, f), ASTITCH_OK);
    fclose(f);
    assert_int_equal(strncmp(buf, json, strlen(json)), 0);
    free(buf);
    astitch_free(json);
    astitch_free(text);
    astitch_free(dot);
}

static int plans;

static void plan_example(const char *path)
{
    astitch_context *ctx;
    astitch_graph *g;
    assert_int_equal(astitch_context_create(&ctx), ASTITCH_OK);
    if (astitch_graph_load_json(ctx, path, &g) != ASTITCH_OK)
        fail_msg("%s: %s", path, astitch_last_error(ctx));
    bool has_dot = false;
    for (int i = 0; i < astitch_graph_num_nodes(g); i++)
        has_dot |= astitch_node_op(g, i) == ASTITCH_OP_DOT;
    for (int d = 0; astitch_device_builtin_name(d); d++) {
        astitch_device dev;
        assert_int_equal(astitch_device_builtin(astitch_device_builtin_name(d), &dev), ASTITCH_OK);
        for (int variant = 0; variant < 7; variant++) {
            astitch_plan_options o;
            astitch_plan_options_default(&o);
            o.fusion = variant == 0 ? ASTITCH_FUSION_NONE
                       : variant == 1 ? ASTITCH_FUSION_XLA
                                      : ASTITCH_FUSION_STITCH;
            o.remote = variant != 3;
            o.merge = variant != 4;
            o.packing = variant != 5;
            o.one_pass_variance = variant != 6;
            astitch_plan *p = NULL;
            if (astitch_plan_create(g, &dev, &o, &p) != ASTITCH_OK)
                fail_msg("%s on %s, fusion %s, variant %d: %s", path, dev.name,
                         astitch_fusion_name(o.fusion), variant, astitch_last_error(ctx));
            assert_true(astitch_plan_num_kernels(p) >= 1);
            /* the plan's graph: the caller's, its one-pass variance rewrite, or its dots
             * lowered (bert_layer's projections read through a reshape) */
            const astitch_graph *pg = astitch_plan_graph(p);
            assert_true(pg == g || (o.fusion == ASTITCH_FUSION_STITCH && o.one_pass_variance) ||
                        has_dot);
            assert_int_equal(astitch_graph_num_parameters(pg), astitch_graph_num_parameters(g));
            assert_int_equal(astitch_graph_num_outputs(pg), astitch_graph_num_outputs(g));
            check_printers(p, pg);
            plans++;
            astitch_plan_destroy(p);
        }
    }
    astitch_graph_destroy(g);
    astitch_context_destroy(ctx);
}

static void every_example(void **state)
{
    const char *root = getenv("ASTITCH_SOURCE_ROOT");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/examples", root ? root : ".");
    DIR *d = opendir(dir);
    if (!d)
        fail_msg("cannot open %s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        plan_example(path);
        n++;
    }
    closedir(d);
    assert_true(n >= 1);
    printf("# %d examples, %d plans\n", n, plans);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_example),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
