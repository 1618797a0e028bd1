/*
 * ir.h: the graph IR, private to libastitch. A map of lib/ir:
 *
 *   ops.c        the op, dtype and class tables (from astitch/ops.h), names, lookups
 *   context.c    context, error messages, custom-op registry, status names, version
 *   graph.c      graph storage, names, outputs, inspection
 *   build.c      builders: checks, the node appended and named; node copies for rewrites
 *   infer.c      the type rules: dtype and shape of every op from its operands
 *   verify.c     whole-graph verifier
 *   graph_meta.c graph name and comment (carried by graph.json)
 *   json_read.c  graph.json -> graph (jansson): top level, names, topological order, errors
 *   json_node.c  graph.json: one node's keys and attributes -> a builder call
 *   json_pos.c   graph.json: line:column of the top-level keys and of each node, for messages
 *   json_write.c graph -> graph.json
 *   interp.c     reference interpreter (the numerical oracle)
 *   half.c       f16/bf16 conversions
 *   view.c       values that are strided views of a parameter
 *
 * A graph is an array of nodes in topological order: a node's operands always have smaller ids.
 * Operand lists live in one shared array (g->operand), indexed by Node.in.
 */
#ifndef ASTITCH_IR_H
#define ASTITCH_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "astitch/astitch.h"
#include "ir/config.h"

#define MAX_RANK ASTITCH_MAX_RANK
/* Largest element count of one tensor; bigger shapes are rejected as absurd. */
#define MAX_ELEMENTS ((int64_t)1 << 40)

typedef struct Shape {
    int rank;
    int64_t dim[MAX_RANK];
} Shape;

typedef struct NodeAttr {
    /* broadcast_in_dim: operand dim i -> output dim dims[i]; transpose: permutation;
     * slice: start indices */
    int64_t dims[MAX_RANK];
    int64_t limit[MAX_RANK];  /* slice */
    int64_t stride[MAX_RANK]; /* slice */
    int axis;                 /* concatenate, iota */
    astitch_reduce_kind reduce;
    uint32_t axes;            /* reduce: bit i set when input axis i is reduced */
    astitch_dot_dims dot;
    char *target;             /* custom: owned by the graph */
    int param;                /* parameter: index among parameters */
    double *values;           /* constant: owned by the graph */
    int64_t nvalues;          /* constant: 1 (splat) or the element count */
} NodeAttr;

typedef struct Node {
    astitch_op op;
    astitch_dtype dtype;
    Shape shape;
    int32_t nin;
    int32_t in; /* first operand in g->operand */
    char *name; /* owned by the graph, never NULL once built */
    NodeAttr attr;
} Node;

typedef struct CustomFn {
    char *target;
    astitch_custom_fn fn;              /* host form, or NULL */
    void *user;
    astitch_custom_device_fn cuda_fn;  /* device form on the cuda target, or NULL */
    void *cuda_user;
} CustomFn;

struct astitch_context {
    char error[1024];
    int32_t error_node;        /* astitch_last_error_node, in the graph the failing call got */
    int error_line, error_col; /* astitch_last_error_position; 0 when none */
    CustomFn *custom;
    int ncustom;
    Config config;             /* its switches (config.h) */
};

struct astitch_graph {
    astitch_context *ctx;
    Node *node;
    int32_t nnode, capnode;
    int32_t *operand;
    int32_t noperand, capoperand;
    int32_t *param;
    int32_t nparam, capparam;
    int32_t *output;
    int32_t noutput, capoutput;
    /* name -> node id, open addressing; size a power of two, -1 empty */
    int32_t *nameslot;
    int32_t capname;
    astitch_status status; /* sticky first builder failure */
    char *name;            /* graph name, or NULL (graph_meta.c); freed by destroy */
    char *comment;         /* free text, or NULL (graph_meta.c); freed by destroy */
};

/* ops.c */
bool op_is_elementwise(astitch_op op); /* LIGHT or HEAVY class */
/* A HEAVY op whose value takes a few hardware instructions (exp, log, sqrt, rsqrt, sigmoid:
 * ex2, lg2, sqrt or rsqrt and a reciprocal), against the library sequences of tanh, erf, sin,
 * cos, pow or a remainder: the planner recomputes it across a broadcast where its value is
 * made from a kernel's inputs alone (docs/planner.md, *dominant*). */
bool op_heavy_few_instructions(astitch_op op);
/* Whether op is defined on operand dtype t (ops.h's operands column: for an element-wise op its
 * first operand, for select its values; always for ops whose rules are their own). */
bool op_defined_on(astitch_op op, astitch_dtype t);
/* The operands column in words for a message ("a float", "bool or integer", "a float or
 * integer"); NULL for ANY. */
const char *op_operands_rule(astitch_op op);
bool op_is_compare(astitch_op op);
bool dtype_is_float(astitch_dtype t);
bool dtype_is_int(astitch_dtype t); /* i32, i64 */
bool dtype_is_valid(astitch_dtype t);

/* context.c */
/* Records a message on ctx and returns s. */
astitch_status ctx_fail(astitch_context *ctx, astitch_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
astitch_status ctx_failv(astitch_context *ctx, astitch_status s, const char *fmt, va_list ap);
/* *out: a context for work another thread does on ctx's behalf: an error of its own, ctx's
 * switches and custom ops borrowed (ctx must outlive it, unchanged). Never passed to
 * astitch_context_destroy: it owns nothing. */
void ctx_shadow(const astitch_context *ctx, astitch_context *out);
/* After ctx_fail: the failure concerns node `node` (of the graph the failing call was given;
 * ctx_error_node_into translates from a copy) or place line:column of a graph.json text. */
void ctx_error_at_node(astitch_context *ctx, int32_t node);
void ctx_error_at_position(astitch_context *ctx, int line, int column);
/* The last failure's node, an id of graph `from` (the planner's own copy of `to`), as the id of
 * the node of the same name in `to`, or ASTITCH_NO_NODE when `to` has none. */
void ctx_error_node_into(astitch_context *ctx, const astitch_graph *from, const astitch_graph *to);
const CustomFn *ctx_custom(const astitch_context *ctx, const char *target);

/* Internal invariants, checked in debug builds (ASTITCH_DEBUG_CHECKS: buildtype debug or
 * debugoptimized, the default and the tests'), where a broken one is a bug in libastitch: it
 * prints the condition and its place to stderr and aborts. Never for bad input, which gets a
 * status and a message. Release builds compile them away. */
#ifdef ASTITCH_DEBUG_CHECKS
#define ASTITCH_ASSERT(cond) ((cond) ? (void)0 : astitch_assert_fail(#cond, __FILE__, __LINE__))
#else
#define ASTITCH_ASSERT(cond) ((void)0)
#endif
_Noreturn void astitch_assert_fail(const char *cond, const char *file, int line);

/* graph.c */
static inline const Node *gnode(const astitch_graph *g, int32_t id)
{
    ASTITCH_ASSERT(id >= 0 && id < g->nnode);
    return &g->node[id];
}
static inline int32_t goperand(const astitch_graph *g, int32_t id, int k)
{
    ASTITCH_ASSERT(id >= 0 && id < g->nnode && k >= 0 && k < g->node[id].nin);
    return g->operand[g->node[id].in + k];
}
/* Appends a node with the given operands; returns its id or -1 (out of memory, recorded). */
int32_t graph_add_node(astitch_graph *g, const Node *n, const int32_t *in, int nin);
/* Records a builder failure on g (sticky) and its context; returns s. */
astitch_status graph_fail(astitch_graph *g, astitch_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Records a failure about node id: the message starts "node ID 'name' (op): ". */
astitch_status node_fail(const astitch_graph *g, int32_t id, astitch_status s, const char *fmt,
                         ...) __attribute__((format(printf, 4, 5)));
bool graph_valid_id(const astitch_graph *g, astitch_node n);
/* The readers of every node of g: node v's are use[start[v] .. start[v + 1]), one entry per
 * reader even where it reads v twice, in node order (*start: nnode + 1 entries; both malloc'd,
 * the caller frees them). False when out of memory. */
bool graph_readers(const astitch_graph *g, int32_t **start, int32_t **use);
/* Gives node id its default name "<op>.<id>". */
astitch_status graph_default_name(astitch_graph *g, int32_t id);
/* Records parameter node id as the next parameter; false when out of memory. */
bool graph_add_param(astitch_graph *g, int32_t id);
char *graph_strdup(const char *s); /* malloc'd copy, NULL on failure */
/* Room for `need` elements in the array *items (elements of `size` bytes, *cap allocated):
 * grows it, doubling from `first`, when need > *cap. False when out of memory or past INT32_MAX
 * elements (the array as it was). ARRAY_RESERVE: room for element n. */
bool array_reserve(void **items, int32_t need, int32_t *cap, size_t size, int32_t first);
#define ARRAY_RESERVE(arr, n, cap, first) \
    array_reserve((void **)&(arr), (n) + 1, &(cap), sizeof *(arr), (first))

/* shape helpers (graph.c) */
int64_t shape_elements(const Shape *s);
bool shape_equal(const Shape *a, const Shape *b);
/* Writes "f32[4,3]" into buf (at least 160 bytes); returns buf. */
char *type_str(char *buf, size_t len, astitch_dtype t, const Shape *s);
/* Row-major strides in elements. */
void shape_strides(const Shape *s, int64_t *stride);

/* view.c */
/* Where a value lies in a parameter's memory: element (i0, i1, ...) of the value is element
 * offset + sum(i_d * stride[d]) of parameter `param` (dense, row-major). */
typedef struct StridedView {
    int param;
    int64_t offset;
    int rank;
    int64_t stride[MAX_RANK];
} StridedView;
/* Whether node n of g is a parameter seen through reshapes, transposes and slices that move no
 * element (a reshape merging axes that are not contiguous is not); fills *v when it is. Values
 * of no elements are not views. */
bool graph_strided_view(const astitch_graph *g, int32_t n, StridedView *v);
/* Copies the value v describes, of `shape`, from the parameter's memory at base into dst,
 * dense and row-major; elem_size bytes per element. */
void strided_view_gather(const StridedView *v, const Shape *shape, size_t elem_size,
                         const void *base, void *dst);

/* build.c */
/* Appends to g a copy of node v of src (op, attributes, name) whose operands are in[] (ids of
 * g, src's operand count of them); its type is inferred again. ASTITCH_NO_NODE on failure
 * (recorded on g). */
astitch_node graph_copy_node(astitch_graph *g, const astitch_graph *src, int32_t v,
                             const int32_t *in);
/* graph_copy_node with operands map[operand of v in src]. */
astitch_node graph_copy_mapped(astitch_graph *g, const astitch_graph *src, int32_t v,
                               const int32_t *map);
/* graph_copy_mapped under the name "<v's name>.<what>" (graph_name_derived's rule). */
astitch_node graph_copy_mapped_derived(astitch_graph *g, const astitch_graph *src, int32_t v,
                                       const int32_t *map, const char *what);
/* A graph rewrite's two functions: whether src's node v is rewritten, and what replaces it:
 * the nodes emit appends to g (v's operands already mapped by map[]), returning the node that
 * stands for v (ASTITCH_NO_NODE on failure, recorded on g). */
typedef bool (*GraphRewriteChosen)(const astitch_graph *src, int32_t v);
typedef astitch_node (*GraphRewriteEmit)(const astitch_graph *src, astitch_graph *g, int32_t v,
                                         const int32_t *map);
/* When g has a chosen node, *out is a new graph (g's context, owned by the caller): g's nodes
 * in order, each chosen one replaced by what emit appends, the others copied; g's outputs
 * (mapped), name and comment; verified. Else *out is NULL. A failure is reported on g's
 * context as "<what> of graph '<name>': <message>". */
astitch_status graph_rewrite(const astitch_graph *g, GraphRewriteChosen chosen,
                             GraphRewriteEmit emit, const char *what, astitch_graph **out);
/* Names node v of g, a rewrite of src, "<base>.<what>", with a "_<k>" suffix while src or g
 * already has that name; v, or ASTITCH_NO_NODE when v is none or naming fails. */
astitch_node graph_name_derived(astitch_graph *g, const astitch_graph *src, astitch_node v,
                                const char *base, const char *what);
/* Ends a copy of src into g whose nodes map[] gives: src's outputs, name and comment, then the
 * verifier. A failure recorded on g is reported on src's context as "<what> of graph '<name>':
 * <the builder's message>". */
astitch_status graph_copy_finish(astitch_graph *g, const astitch_graph *src, const int32_t *map,
                                 const char *what);
/* infer.c */
/* Checks a declared shape: rank 0..8, dims >= 0, element count <= MAX_ELEMENTS. On failure
 * writes a reason into why (at least 128 bytes) and returns false. */
bool shape_check(const Shape *s, char *why, size_t len);
/* Infers dtype and shape of node n from its op, attributes and operands (already set in
 * g->node[id]), writing them into *out. On failure records a node error (not sticky) and
 * returns its status. Used by the builders and by the verifier. */
astitch_status infer_node(const astitch_graph *g, int32_t id, astitch_dtype *dtype, Shape *shape);

/* interp.c, interp_elem.c, interp_shape.c: the reference interpreter. It keeps every value
 * wide, one Wide per element: .f for float dtypes (already rounded to the dtype), .i for i32,
 * i64 and bool (already wrapped to the dtype's width; bool is 0 or 1). */
typedef union Wide {
    double f;
    int64_t i;
} Wide;

/* ops.c: the identity of reduction k over elements of dtype t, as a Wide (the one definition:
 * the reference, code generation and the runtime's split-reduction fills use it): sum -0 for
 * floats (-0 + x is x for every x, so a sum of -0 alone stays -0) and 0 for integers; prod 1;
 * max -inf or the least integer of t; min +inf or the greatest; any 0; all 1. */
Wide reduce_identity(astitch_reduce_kind k, astitch_dtype t);
/* The result of reduction k over no elements: its identity, except that an empty float sum is
 * +0. */
Wide reduce_empty(astitch_reduce_kind k, astitch_dtype t);
/* interp.c */
/* Computes one node (any op but parameter) from its operands' values, each dense row-major in
 * its dtype, into out (the node's dtype). Used to run compute ops between kernels. */
astitch_status interp_node(const astitch_graph *g, int32_t id, const void *const *operands,
                           void *out);
/* Allocates n Wide elements used by node id for `what`; on failure records an
 * ASTITCH_ERR_MEMORY message naming the node and the bytes, and returns NULL. */
Wide *interp_alloc(const astitch_graph *g, int32_t id, int64_t n, const char *what);
/* interp_elem.c */
double wide_round(astitch_dtype t, double x); /* nearest value of float dtype t */
int64_t wide_wrap(astitch_dtype t, uint64_t x); /* x modulo the width of integer dtype t */
/* x as dtype t: rounded (floats), truncated and saturated with NaN -> 0 (ints), x != 0 (bool). */
Wide wide_from_double(astitch_dtype t, double x);
/* IEEE 754-2019 maximum and minimum: NaN if either operand is NaN; -0 orders below +0. */
double wide_max(double a, double b);
double wide_min(double a, double b);
/* Computes node id, an element-wise op (unary, binary, select, convert), into out from the
 * operand values val[operand id]. */
astitch_status interp_elementwise(const astitch_graph *g, int32_t id, Wide *const *val, Wide *out);
/* interp_shape.c */
/* Computes node id (broadcast_in_dim, reshape, transpose, slice, concatenate, gather, reduce or
 * dot) into out from the operand values val[operand id]. */
astitch_status interp_structural(const astitch_graph *g, int32_t id, Wide *const *val, Wide *out);

/* json_pos.c */
typedef struct JsonPos {
    int line, col; /* 1-based; col counts UTF-8 characters, as jansson does */
} JsonPos;
typedef struct JsonKeyPos {
    const char *key; /* points into the scanned text, not NUL-terminated */
    size_t len;
    JsonPos pos;
} JsonKeyPos;
typedef struct JsonPosMap {
    JsonPos root;    /* the top-level '{' (or '[') */
    JsonKeyPos *key; /* keys of the top-level object, in text order */
    size_t nkey;
    JsonPos *node;   /* start of each element of the top-level "nodes" array */
    size_t nnode;
    JsonPos *output; /* start of each element of the top-level "outputs" array */
    size_t noutput;
} JsonPosMap;
/* Fills *m from text that jansson accepted. Not a parser: tracks strings, escapes and bracket
 * depth only. Returns false when out of memory (*m then holds what was found). */
bool json_pos_scan(const char *text, size_t len, JsonPosMap *m);
void json_pos_free(JsonPosMap *m);
/* Where top-level key `key` starts; m->root when absent. */
JsonPos json_pos_key(const JsonPosMap *m, const char *key);

/* json_node.c */
struct json_t;
/* Checks the keys of node object obj against op: every key known and meaningful for op, every
 * required key present; "inputs" count against the arity. On failure writes the problem into
 * why and returns false. */
bool json_node_check(const struct json_t *obj, astitch_op op, char *why, size_t len);
/* Builds the node obj describes, its operands being in[0..nin) (already built), with the
 * builder of op; does not name it (the caller does). Returns the node, or ASTITCH_NO_NODE with
 * the problem in why (no position, no node prefix) and its status in *status. */
astitch_node json_node_build(astitch_graph *g, const struct json_t *obj, astitch_op op,
                             const astitch_node *in, int nin, char *why, size_t len,
                             astitch_status *status);

/* half.c */
/* The bits of an f32 and back (memcpy, no aliasing). */
uint32_t f32_bits(float f);
float bits_f32(uint32_t u);
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);

#endif
