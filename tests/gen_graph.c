/* gen_graph.c: random valid graphs (see gen_graph.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen_graph.h"

typedef struct GNode {
    astitch_node id;
    astitch_dtype dtype;
    int rank;
    int64_t dims[ASTITCH_MAX_RANK];
    int mask; /* family shape: bit i set when family dim i is present; -1 for other shapes */
} GNode;

typedef struct Gen {
    astitch_graph *g;
    const gen_options *o;
    uint64_t rng;
    int64_t fam[3];
    GNode *pool;
    int npool, cap;
    bool *used;
    int nused;
} Gen;

static uint64_t next(Gen *s)
{
    /* xorshift64* */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * 0x2545F4914F6CDD1Dull;
}

static int pick_int(Gen *s, int n) { return n > 0 ? (int)(next(s) % (uint64_t)n) : 0; }

static void family_shape(const Gen *s, int mask, int *rank, int64_t *dims)
{
    *rank = 0;
    for (int i = 0; i < 3; i++)
        if (mask >> i & 1)
            dims[(*rank)++] = s->fam[i];
}

static bool record(Gen *s, astitch_node id, int mask)
{
    if (id == ASTITCH_NO_NODE)
        return false;
    if (s->npool == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->pool = realloc(s->pool, (size_t)s->cap * sizeof *s->pool);
    }
    astitch_tensor_info info;
    astitch_node_info(s->g, id, &info);
    GNode *n = &s->pool[s->npool++];
    n->id = id;
    n->dtype = info.dtype;
    n->rank = info.rank;
    memcpy(n->dims, info.dims, sizeof n->dims);
    n->mask = mask;
    return true;
}

static void use(Gen *s, astitch_node id)
{
    if (id >= 0 && id < s->nused)
        s->used[id] = true;
}

/* A random f32 node, preferring recent ones (deeper graphs); -1 if none. */
static int pick_f32(Gen *s, bool (*ok)(const GNode *))
{
    for (int tries = 0; tries < 24; tries++) {
        int span = s->npool < 12 ? s->npool : 12;
        int i = tries < 12 ? s->npool - 1 - pick_int(s, span) : pick_int(s, s->npool);
        if (i >= 0 && s->pool[i].dtype == ASTITCH_F32 && (!ok || ok(&s->pool[i])))
            return i;
    }
    return -1;
}

static bool is_family(const GNode *n) { return n->mask >= 0; }
static bool has_rank(const GNode *n) { return n->rank >= 1; }
static bool is_matrix(const GNode *n) { return n->rank == 2; }

static astitch_node param(Gen *s, int mask)
{
    int rank;
    int64_t dims[3];
    family_shape(s, mask, &rank, dims);
    astitch_node id = astitch_parameter(s->g, NULL, ASTITCH_F32, rank, dims);
    record(s, id, mask);
    return id;
}

/* x itself, or a broadcast of x to family shape `mask` (x's family dims must be a subset). */
static astitch_node to_family(Gen *s, const GNode *xp, int mask)
{
    GNode xc = *xp; /* xp may point into the pool, which record() can move */
    const GNode *x = &xc;
    if (x->mask == mask)
        return x->id;
    int rank;
    int64_t dims[3], bdims[3];
    family_shape(s, mask, &rank, dims);
    int k = 0, pos = 0;
    for (int i = 0; i < 3; i++) {
        if (!(mask >> i & 1))
            continue;
        if (x->mask >> i & 1)
            bdims[k++] = pos;
        pos++;
    }
    astitch_node id = astitch_broadcast_in_dim(s->g, x->id, rank, dims, bdims);
    record(s, id, mask);
    use(s, x->id);
    return id;
}

/* A partner of x's shape: an existing node of that shape, a broadcast of a smaller family node,
 * or a new parameter. */
static astitch_node partner(Gen *s, const GNode *x)
{
    for (int tries = 0; tries < 16; tries++) {
        const GNode *y = &s->pool[pick_int(s, s->npool)];
        if (y->dtype != ASTITCH_F32 || y->id == x->id)
            continue;
        if (y->rank == x->rank && memcmp(y->dims, x->dims, (size_t)x->rank * sizeof x->dims[0]) == 0)
            return y->id;
        if (x->mask >= 0 && y->mask >= 0 && (y->mask & ~x->mask) == 0)
            return to_family(s, y, x->mask);
    }
    if (x->mask >= 0)
        return param(s, x->mask);
    astitch_node id = astitch_parameter(s->g, NULL, ASTITCH_F32, x->rank, x->dims);
    record(s, id, -1);
    return id;
}

static void op_unary(Gen *s)
{
    static const astitch_op light[] = {ASTITCH_OP_NEG, ASTITCH_OP_ABS, ASTITCH_OP_RELU,
                                       ASTITCH_OP_FLOOR};
    static const astitch_op heavy[] = {ASTITCH_OP_TANH, ASTITCH_OP_SIGMOID, ASTITCH_OP_SIN,
                                       ASTITCH_OP_COS, ASTITCH_OP_ERF};
    int i = pick_f32(s, NULL);
    if (i < 0)
        return;
    GNode x = s->pool[i];
    int nlight = s->o->discontinuous ? 4 : 3; /* floor last */
    astitch_op op = pick_int(s, 2) ? light[pick_int(s, nlight)] : heavy[pick_int(s, 5)];
    astitch_node arg = x.id;
    if (op == ASTITCH_OP_SIN || op == ASTITCH_OP_COS) {
        /* periodic functions see a bounded argument: of a large one (a long sum) f32 keeps
         * no correct digits, and no two correct summation orders agree */
        arg = astitch_unary(s->g, ASTITCH_OP_TANH, x.id);
        use(s, x.id);
    }
    record(s, astitch_unary(s->g, op, arg), x.mask);
    use(s, arg);
    use(s, x.id);
}

static void op_binary(Gen *s)
{
    static const astitch_op ops[] = {ASTITCH_OP_ADD, ASTITCH_OP_SUB, ASTITCH_OP_MUL,
                                     ASTITCH_OP_MAX, ASTITCH_OP_MIN};
    int i = pick_f32(s, NULL);
    if (i < 0)
        return;
    GNode x = s->pool[i];
    astitch_node y = partner(s, &x);
    astitch_node r;
    if (pick_int(s, 6) == 0) {
        /* a heavy binary op with a denominator kept away from zero: x / (|y| + 1) */
        double one = 1.0;
        astitch_node c = astitch_constant(s->g, ASTITCH_F32, x.rank, x.dims, &one, 1);
        record(s, c, x.mask);
        astitch_node a = astitch_unary(s->g, ASTITCH_OP_ABS, y);
        record(s, a, x.mask);
        astitch_node d = astitch_binary(s->g, ASTITCH_OP_ADD, a, c);
        record(s, d, x.mask);
        r = astitch_binary(s->g, ASTITCH_OP_DIV, x.id, d);
        use(s, y);
        use(s, a);
        use(s, c);
        use(s, d);
    } else {
        r = astitch_binary(s->g, ops[pick_int(s, 5)], x.id, y);
        use(s, y);
    }
    record(s, r, x.mask);
    use(s, x.id);
}

static void op_select(Gen *s)
{
    int i = pick_f32(s, NULL);
    if (i < 0)
        return;
    GNode x = s->pool[i];
    astitch_node y = partner(s, &x);
    astitch_node p = astitch_binary(s->g, ASTITCH_OP_LT, x.id, y);
    record(s, p, x.mask);
    record(s, astitch_select(s->g, p, x.id, y), x.mask);
    use(s, x.id);
    use(s, y);
    use(s, p);
}

static void op_reduce(Gen *s)
{
    static const astitch_reduce_kind kinds[] = {ASTITCH_REDUCE_SUM, ASTITCH_REDUCE_MAX,
                                                ASTITCH_REDUCE_MIN};
    int i = pick_f32(s, has_rank);
    if (i < 0)
        return;
    GNode x = s->pool[i];
    int64_t axes[ASTITCH_MAX_RANK];
    int n = 0, mask = x.mask >= 0 ? x.mask : -1, pos = 0, keep = 0;
    uint32_t pick = (uint32_t)(next(s) % ((1u << x.rank) - 1)) + 1; /* non-empty subset */
    for (int a = 0; a < x.rank; a++)
        if (pick >> a & 1)
            axes[n++] = a;
    if (mask >= 0) { /* drop the reduced family dims */
        for (int b = 0; b < 3; b++) {
            if (!(x.mask >> b & 1))
                continue;
            if (!(pick >> pos & 1))
                keep |= 1 << b;
            pos++;
        }
        mask = keep;
    }
    astitch_reduce_kind kind = kinds[pick_int(s, 3)];
    astitch_node r = astitch_reduce(s->g, kind, x.id, n, axes);
    int64_t count = 1;
    for (int a = 0; a < n; a++)
        count *= x.dims[axes[a]];
    if (kind == ASTITCH_REDUCE_SUM && count > 64 && r >= 0) {
        /* long sums become means: a sum of thousands of values fed to sin or pow is so
         * ill-conditioned in f32 that no two correct summation orders agree on it */
        astitch_tensor_info ri;
        astitch_node_info(s->g, r, &ri);
        double inv = 1.0 / (double)count;
        astitch_node c = astitch_constant(s->g, ASTITCH_F32, ri.rank, ri.dims, &inv, 1);
        use(s, r);
        r = astitch_binary(s->g, ASTITCH_OP_MUL, r, c);
        use(s, c);
    }
    record(s, r, mask);
    use(s, x.id);
}

static void op_broadcast(Gen *s)
{
    int i = pick_f32(s, is_family);
    if (i < 0 || s->pool[i].mask == 7)
        return;
    GNode x = s->pool[i];
    int mask = x.mask | (1 << pick_int(s, 3));
    if (mask == x.mask)
        mask = 7;
    to_family(s, &x, mask);
}

static void op_shape(Gen *s)
{
    int i = pick_f32(s, has_rank);
    if (i < 0)
        return;
    GNode x = s->pool[i];
    int kind = pick_int(s, 4);
    astitch_node r = ASTITCH_NO_NODE;
    if (kind == 0) { /* flatten */
        int64_t n = 1;
        for (int a = 0; a < x.rank; a++)
            n *= x.dims[a];
        r = astitch_reshape(s->g, x.id, 1, &n);
        record(s, r, x.rank == 1 ? x.mask : -1);
    } else if (kind == 1 && x.rank == 2) {
        int64_t perm[2] = {1, 0};
        r = astitch_transpose(s->g, x.id, perm);
        record(s, r, x.dims[0] == x.dims[1] ? x.mask : -1);
    } else if (kind == 2 && x.dims[x.rank - 1] >= 2) {
        int64_t start[ASTITCH_MAX_RANK] = {0}, limit[ASTITCH_MAX_RANK], stride[ASTITCH_MAX_RANK];
        for (int a = 0; a < x.rank; a++) {
            limit[a] = x.dims[a];
            stride[a] = 1;
        }
        start[x.rank - 1] = 1;
        stride[x.rank - 1] = 1 + pick_int(s, 2);
        r = astitch_slice(s->g, x.id, start, limit, stride);
        record(s, r, -1);
    } else {
        astitch_node y = partner(s, &x);
        astitch_node xs[2] = {x.id, y};
        r = astitch_concatenate(s->g, 2, xs, 0);
        record(s, r, -1);
        use(s, y);
    }
    use(s, x.id);
}

static void op_gather(Gen *s)
{
    int i = pick_f32(s, is_matrix);
    if (i < 0)
        return;
    GNode t = s->pool[i];
    int64_t k = s->fam[pick_int(s, 3)];
    astitch_node idx = astitch_iota(s->g, ASTITCH_I32, 1, &k, 0);
    record(s, idx, -1);
    record(s, astitch_gather(s->g, t.id, idx), -1);
    use(s, t.id);
    use(s, idx);
}

static void op_convert(Gen *s)
{
    int i = pick_f32(s, NULL);
    if (i < 0)
        return;
    GNode x = s->pool[i];
    astitch_dtype half = pick_int(s, 2) ? ASTITCH_F16 : ASTITCH_BF16;
    astitch_node h = astitch_convert(s->g, x.id, half);
    record(s, h, x.mask);
    record(s, astitch_convert(s->g, h, ASTITCH_F32), x.mask);
    use(s, x.id);
    use(s, h);
}

static void op_dot(Gen *s)
{
    int i = pick_f32(s, is_matrix);
    if (i < 0)
        return;
    GNode x = s->pool[i];
    int64_t rdims[2] = {x.dims[1], x.dims[1]};
    astitch_node w = astitch_parameter(s->g, NULL, ASTITCH_F32, 2, rdims);
    record(s, w, -1);
    astitch_dot_dims d = {0};
    d.ncontract = 1;
    d.lhs_contract[0] = 1;
    d.rhs_contract[0] = 0;
    record(s, astitch_dot(s->g, x.id, w, &d), x.mask);
    use(s, x.id);
    use(s, w);
}

static void op_custom(Gen *s)
{
    int i = pick_f32(s, NULL);
    if (i < 0)
        return;
    GNode x = s->pool[i];
    record(s, astitch_custom(s->g, "gen_custom", 1, &x.id, ASTITCH_F32, x.rank, x.dims), x.mask);
    use(s, x.id);
}

static void op_source(Gen *s)
{
    int mask = pick_int(s, 8), rank;
    int64_t dims[3];
    family_shape(s, mask, &rank, dims);
    if (pick_int(s, 3) == 0) {
        param(s, mask);
    } else if (pick_int(s, 2) == 0 || rank == 0) {
        double v = 0.25 + pick_int(s, 8) * 0.5;
        record(s, astitch_constant(s->g, ASTITCH_F32, rank, dims, &v, 1), mask);
    } else {
        record(s, astitch_iota(s->g, ASTITCH_F32, rank, dims, pick_int(s, rank)), mask);
    }
}

void gen_options_default(gen_options *o)
{
    o->nodes = 40;
    o->max_dim = 8;
    o->percent_compute = 5;
    o->percent_custom = 0;
    o->percent_reduce = 15;
    o->outputs = 2;
    o->half = false;
    o->discontinuous = false;
}

void gen_options_cycled(gen_options *o, uint64_t seed)
{
    gen_options_default(o);
    o->half = seed % 3 == 0;
    o->max_dim = seed % 4 == 0 ? 64 : 8;
    o->nodes = 10 + (int)(seed % 40);
    o->percent_custom = seed % 5 == 0 ? 5 : 0;
}

uint64_t gen_fresh_seed(void)
{
    const char *replay = getenv("ASTITCH_FRESH_SEED");
    if (replay && *replay) {
        char *end;
        unsigned long long v = strtoull(replay, &end, 10);
        if (*end == '\0')
            return v;
        fprintf(stderr, "ASTITCH_FRESH_SEED=%s is not a number; using the clock\n", replay);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
}

astitch_graph *gen_graph(astitch_context *ctx, uint64_t seed, const gen_options *o)
{
    Gen s = {0};
    s.o = o;
    s.rng = seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    if (s.rng == 0)
        s.rng = 1;
    if (astitch_graph_create(ctx, &s.g) != ASTITCH_OK)
        return NULL;
    for (int i = 0; i < 3; i++)
        s.fam[i] = 1 + pick_int(&s, o->max_dim > 1 ? o->max_dim : 1);
    int target = o->nodes > 4 ? o->nodes : 4;
    s.nused = target + 64;
    s.used = calloc((size_t)s.nused, sizeof *s.used);
    param(&s, 7);
    param(&s, pick_int(&s, 8));
    while (astitch_graph_num_nodes(s.g) < target && astitch_graph_status(s.g) == ASTITCH_OK) {
        int r = pick_int(&s, 100);
        if (r < o->percent_compute)
            op_dot(&s);
        else if ((r -= o->percent_compute) < o->percent_custom)
            op_custom(&s);
        else if ((r -= o->percent_custom) < o->percent_reduce)
            op_reduce(&s);
        else {
            switch (pick_int(&s, o->half ? 10 : 9)) {
            case 0:
            case 1:
                op_unary(&s);
                break;
            case 2:
            case 3:
                op_binary(&s);
                break;
            case 4:
                op_broadcast(&s);
                break;
            case 5:
                op_shape(&s);
                break;
            case 6:
                op_select(&s);
                break;
            case 7:
                pick_int(&s, 3) ? op_source(&s) : op_gather(&s);
                break;
            case 8:
                op_broadcast(&s);
                break;
            default:
                op_convert(&s);
                break;
            }
        }
    }
    int n = astitch_graph_num_nodes(s.g);
    bool *is_out = calloc((size_t)(n ? n : 1), sizeof *is_out);
    for (int i = 0; i < o->outputs && s.npool > 0; i++) {
        const GNode *x = &s.pool[pick_int(&s, s.npool)];
        if (astitch_node_op(s.g, x->id) != ASTITCH_OP_PARAMETER && !is_out[x->id]) {
            is_out[x->id] = true;
            astitch_add_output(s.g, x->id);
        }
    }
    for (int i = 0; i < s.npool; i++) {
        astitch_node id = s.pool[i].id;
        bool sink = id >= s.nused || !s.used[id];
        astitch_op op = astitch_node_op(s.g, id);
        if (sink && !is_out[id] && op != ASTITCH_OP_PARAMETER && op != ASTITCH_OP_CONSTANT &&
            op != ASTITCH_OP_IOTA) {
            is_out[id] = true;
            astitch_add_output(s.g, id);
        }
    }
    if (astitch_graph_num_outputs(s.g) == 0)
        astitch_add_output(s.g, s.pool[s.npool - 1].id);
    free(is_out);
    free(s.used);
    free(s.pool);
    if (astitch_graph_status(s.g) != ASTITCH_OK || astitch_graph_verify(s.g) != ASTITCH_OK) {
        astitch_graph_destroy(s.g);
        return NULL;
    }
    return s.g;
}

astitch_node gen_layer_norm(astitch_graph *g, astitch_node x, int64_t rows, int64_t cols,
                            double eps, astitch_node *mean)
{
    int64_t dims[2] = {rows, cols}, axis = 1, keep = 0;
    double inv = 1.0 / (double)cols;
    astitch_node n = astitch_constant(g, ASTITCH_F32, 1, &rows, &inv, 1);
    astitch_node mu = astitch_binary(g, ASTITCH_OP_MUL,
                                     astitch_reduce(g, ASTITCH_REDUCE_SUM, x, 1, &axis), n);
    astitch_node d = astitch_binary(g, ASTITCH_OP_SUB, x,
                                    astitch_broadcast_in_dim(g, mu, 2, dims, &keep));
    astitch_node var = astitch_binary(
        g, ASTITCH_OP_MUL,
        astitch_reduce(g, ASTITCH_REDUCE_SUM, astitch_binary(g, ASTITCH_OP_MUL, d, d), 1, &axis),
        n);
    astitch_node rstd = astitch_unary(
        g, ASTITCH_OP_RSQRT,
        astitch_binary(g, ASTITCH_OP_ADD, var, astitch_constant(g, ASTITCH_F32, 1, &rows, &eps, 1)));
    if (mean)
        *mean = mu;
    return astitch_binary(g, ASTITCH_OP_MUL, d, astitch_broadcast_in_dim(g, rstd, 2, dims, &keep));
}

astitch_node gen_rms_norm(astitch_graph *g, astitch_node x, int64_t rows, int64_t cols,
                          double eps)
{
    int64_t dims[2] = {rows, cols}, axis = 1, keep = 0;
    double inv = 1.0 / (double)cols;
    astitch_node ms = astitch_binary(g, ASTITCH_OP_MUL,
                                     astitch_reduce(g, ASTITCH_REDUCE_SUM,
                                                    astitch_binary(g, ASTITCH_OP_MUL, x, x), 1,
                                                    &axis),
                                     astitch_constant(g, ASTITCH_F32, 1, &rows, &inv, 1));
    astitch_node rstd = astitch_unary(
        g, ASTITCH_OP_RSQRT,
        astitch_binary(g, ASTITCH_OP_ADD, ms, astitch_constant(g, ASTITCH_F32, 1, &rows, &eps, 1)));
    return astitch_binary(g, ASTITCH_OP_MUL, x, astitch_broadcast_in_dim(g, rstd, 2, dims, &keep));
}

astitch_node gen_softmax_rows(astitch_graph *g, astitch_node x, int64_t rows, int64_t cols)
{
    int64_t dims[2] = {rows, cols}, axis = 1, keep = 0;
    astitch_node max = astitch_reduce(g, ASTITCH_REDUCE_MAX, x, 1, &axis);
    astitch_node e = astitch_unary(g, ASTITCH_OP_EXP, astitch_binary(g, ASTITCH_OP_SUB, x,
                                   astitch_broadcast_in_dim(g, max, 2, dims, &keep)));
    astitch_node sum = astitch_reduce(g, ASTITCH_REDUCE_SUM, e, 1, &axis);
    return astitch_binary(g, ASTITCH_OP_DIV, e, astitch_broadcast_in_dim(g, sum, 2, dims, &keep));
}

astitch_graph *gen_split_kinds(astitch_context *ctx, int64_t rows, int64_t cols)
{
    astitch_graph *g;
    if (astitch_graph_create(ctx, &g) != ASTITCH_OK)
        return NULL;
    int64_t d[2] = {rows, cols}, axis = 1;
    double half = 0.5;
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, d);
    astitch_node h = astitch_convert(g, x, ASTITCH_BF16);
    astitch_node i = astitch_convert(g, astitch_binary(g, ASTITCH_OP_MUL, x,
                                         astitch_constant(g, ASTITCH_F32, 2, d, (double[]){100}, 1)),
                                     ASTITCH_I64);
    astitch_node b = astitch_binary(g, ASTITCH_OP_GT, x, astitch_constant(g, ASTITCH_F32, 2, d, &half, 1));
    const struct { astitch_reduce_kind k; astitch_node in; } r[] = {
        {ASTITCH_REDUCE_SUM, x}, {ASTITCH_REDUCE_MAX, x}, {ASTITCH_REDUCE_MIN, x},
        {ASTITCH_REDUCE_SUM, h}, {ASTITCH_REDUCE_SUM, i}, {ASTITCH_REDUCE_MAX, i},
        {ASTITCH_REDUCE_ANY, b}, {ASTITCH_REDUCE_ALL, b},
    };
    for (size_t k = 0; k < sizeof r / sizeof r[0]; k++)
        astitch_add_output(g, astitch_reduce(g, r[k].k, r[k].in, 1, &axis));
    if (astitch_graph_verify(g) != ASTITCH_OK) {
        astitch_graph_destroy(g);
        return NULL;
    }
    return g;
}

astitch_graph *gen_dot_between(astitch_context *ctx, int64_t m, int64_t k, int64_t n)
{
    astitch_graph *g;
    if (astitch_graph_create(ctx, &g) != ASTITCH_OK)
        return NULL;
    int64_t dx[2] = {m, k}, dw[2] = {k, n};
    astitch_dot_dims dims = {.ncontract = 1, .lhs_contract = {1}, .rhs_contract = {0}};
    astitch_node x = astitch_parameter(g, "x", ASTITCH_F32, 2, dx);
    astitch_node w = astitch_parameter(g, "w", ASTITCH_F32, 2, dw);
    astitch_node x2 = astitch_binary(g, ASTITCH_OP_ADD, x, x);
    astitch_node y = astitch_dot(g, x2, w, &dims);
    astitch_set_name(g, y, "between");
    astitch_add_output(g, astitch_unary(g, ASTITCH_OP_EXP, y));
    if (astitch_graph_verify(g) != ASTITCH_OK) {
        astitch_graph_destroy(g);
        return NULL;
    }
    return g;
}
