/*
 * astitch.h: the public C API of astitch, a just-in-time compiler that stitches the
 * memory-intensive parts of ML graphs into few GPU kernels.
 *
 * Conventions
 * - Every object is opaque and created by a *_create (or *_load/_read) call paired with a
 *   *_destroy that accepts NULL.
 * - Fallible calls return astitch_status; the message of the last failure is kept by the
 *   context (astitch_last_error). Messages name the place: file:line:column for input files,
 *   node id, name, op, dtypes and shapes for graphs; a program gets the place itself from
 *   astitch_last_error_node and astitch_last_error_position.
 * - Graph builder calls return a node id, or ASTITCH_NO_NODE on failure. A failure is sticky:
 *   the graph remembers the first one (astitch_graph_status) and later builder calls that
 *   receive ASTITCH_NO_NODE as an operand fail quietly, so a builder sequence may be checked once
 *   at its end.
 * - Thread safety: a context and everything made from it may be used by one thread at a time.
 *   Distinct contexts are independent.
 * - The library never exits the process; abort() is reserved for broken internal invariants.
 */
#ifndef ASTITCH_H
#define ASTITCH_H

#include <stddef.h>
#include <stdint.h>

#include "astitch/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(ASTITCH_BUILDING) && defined(__GNUC__)
#define ASTITCH_API __attribute__((visibility("default")))
#else
#define ASTITCH_API
#endif

#define ASTITCH_VERSION_MAJOR 0
#define ASTITCH_VERSION_MINOR 1
#define ASTITCH_VERSION_PATCH 0
#define ASTITCH_VERSION_STRING "0.1.0"

/* The most dimensions a tensor may have. */
#define ASTITCH_MAX_RANK 8
/* The returned id of a failed builder call. */
#define ASTITCH_NO_NODE (-1)

/* Returns ASTITCH_VERSION_STRING of the library actually loaded. */
ASTITCH_API const char *astitch_version(void);

typedef enum astitch_status {
    ASTITCH_OK = 0,
    ASTITCH_ERR_ARGUMENT,     /* a call was given an invalid argument */
    ASTITCH_ERR_PARSE,        /* an input file is not well-formed */
    ASTITCH_ERR_GRAPH,        /* the graph is invalid: shapes, dtypes, references */
    ASTITCH_ERR_UNSUPPORTED,  /* valid, but not supported by this build or target */
    ASTITCH_ERR_MEMORY,       /* host or device memory exhausted, or a size too large */
    ASTITCH_ERR_IO,           /* a file could not be read or written */
    ASTITCH_ERR_NO_DEVICE,    /* no GPU driver or device */
    ASTITCH_ERR_DEVICE,       /* the GPU driver reported a failure */
    ASTITCH_ERR_COMPILE,      /* code generation or assembly failed */
    ASTITCH_ERR_INTERNAL      /* a bug in astitch */
} astitch_status;

/* Returns a constant English name for a status, "ok" for ASTITCH_OK. */
ASTITCH_API const char *astitch_status_name(astitch_status s);

#define ASTITCH_ENUM_ITEM(id, ...) ASTITCH_OP_##id,
typedef enum astitch_op { ASTITCH_OP_LIST(ASTITCH_ENUM_ITEM) ASTITCH_OP_COUNT } astitch_op;
#undef ASTITCH_ENUM_ITEM
#define ASTITCH_ENUM_ITEM(id, ...) ASTITCH_REDUCE_##id,
typedef enum astitch_reduce_kind {
    ASTITCH_REDUCE_LIST(ASTITCH_ENUM_ITEM) ASTITCH_REDUCE_COUNT
} astitch_reduce_kind;
#undef ASTITCH_ENUM_ITEM
#define ASTITCH_ENUM_ITEM(id, ...) ASTITCH_##id,
typedef enum astitch_dtype { ASTITCH_DTYPE_LIST(ASTITCH_ENUM_ITEM) ASTITCH_DTYPE_COUNT } astitch_dtype;
#undef ASTITCH_ENUM_ITEM
#define ASTITCH_ENUM_ITEM(id, ...) ASTITCH_CLASS_##id,
typedef enum astitch_op_class {
    ASTITCH_CLASS_LIST(ASTITCH_ENUM_ITEM) ASTITCH_CLASS_COUNT
} astitch_op_class;
#undef ASTITCH_ENUM_ITEM

/* Names and properties from the op table; NULL or -1 for out-of-range values. */
ASTITCH_API const char *astitch_op_name(astitch_op op);
ASTITCH_API int astitch_op_arity(astitch_op op);
ASTITCH_API astitch_op_class astitch_op_class_of(astitch_op op);
ASTITCH_API const char *astitch_op_class_name(astitch_op_class c);
ASTITCH_API const char *astitch_reduce_name(astitch_reduce_kind k);
ASTITCH_API const char *astitch_dtype_name(astitch_dtype t);
ASTITCH_API size_t astitch_dtype_size(astitch_dtype t);
/* Look up by name; return ASTITCH_OK or ASTITCH_ERR_ARGUMENT. */
ASTITCH_API astitch_status astitch_op_from_name(const char *name, astitch_op *op);
ASTITCH_API astitch_status astitch_dtype_from_name(const char *name, astitch_dtype *t);
ASTITCH_API astitch_status astitch_reduce_from_name(const char *name, astitch_reduce_kind *k);

/* ---- context ------------------------------------------------------------------------------ */

typedef struct astitch_context astitch_context;

/* Makes a context. Its switches (below) start from the environment as it is now: ASTITCH_ and
 * the switch's name in capitals (ASTITCH_FORCE_PARTS=1); later changes of the environment do
 * not reach it. */
ASTITCH_API astitch_status astitch_context_create(astitch_context **out);
ASTITCH_API void astitch_context_destroy(astitch_context *ctx);
/* Sets switch `name` of ctx to a copy of value, or back to unset (its default) for NULL; for
 * everything made from ctx from then on. The switches (README, *Environment*):
 *   "dump_plan"    "1": the planner prints each finished plan to stderr; "after:<step>": the
 *                  plan after each run of that step
 *   "force_parts"  "1": kernels with global barriers run as their parts
 *   "cache"        "0" or "off": no compile cache
 *   "cache_dir"    the disk cache's directory; "", "0" or "off": no disk cache
 *   "host_compute" "1": on the cuda target every compute op (dot, custom) runs on the host
 *                  through the reference interpreter and cuBLASLt is never opened; else the
 *                  dots cuBLASLt can take run on the GPU (docs/codegen.md, *Compute ops*)
 *   "force_lean"   "1": on the cuda target every kernel whose grid must be resident runs in
 *                  its lean form, as one that spills does (docs/codegen.md, *Targets*)
 *   "ptx_jit"      what compiles the cuda target's PTX: unset: the driver's JIT, with the
 *                  variant search's forms and a kernel's next register bound compiled at once
 *                  ahead by the toolkit's ptxas program where it is found (ASTITCH_PTXAS, else
 *                  the toolkit's bin, else PATH); "driver": the driver's JIT alone, one module
 *                  at a time; "nvjitlink": the toolkit's nvJitLink for every module, ahead on
 *                  worker threads too (relocatable code, slower on some kernels; an error
 *                  where it is missing); docs/codegen.md, *Compile time*
 * ASTITCH_ERR_ARGUMENT (naming the switches) for another name, ASTITCH_ERR_MEMORY. */
ASTITCH_API astitch_status astitch_context_set_option(astitch_context *ctx, const char *name,
                                                      const char *value);
/* The value of switch `name` of ctx, NULL when unset or not a switch. Valid until it is set
 * again or ctx is destroyed. */
ASTITCH_API const char *astitch_context_option(const astitch_context *ctx, const char *name);
/* The message of the last failed call made with ctx (or an object made from it); "" if none.
 * Valid until the next call on ctx. */
ASTITCH_API const char *astitch_last_error(const astitch_context *ctx);
/* Frees memory the library handed to the caller (text from astitch_graph_write_json). */
ASTITCH_API void astitch_free(void *p);

/* A tensor as a custom-op implementation sees it: dense, row-major; data is a host address
 * (astitch_custom_fn) or a device address (astitch_custom_device_fn). */
typedef struct astitch_tensor_view {
    astitch_dtype dtype;
    int rank;
    int64_t dims[ASTITCH_MAX_RANK];
    void *data;
} astitch_tensor_view;

/* Host implementation of a custom op, used by the reference interpreter: fill output from
 * inputs and return ASTITCH_OK. */
typedef astitch_status (*astitch_custom_fn)(void *user, int n_inputs,
                                            const astitch_tensor_view *inputs,
                                            astitch_tensor_view *output);
/* Registers (or replaces) the host implementation of custom ops whose target is `target`. */
ASTITCH_API astitch_status astitch_register_custom(astitch_context *ctx, const char *target,
                                                   astitch_custom_fn fn, void *user);

/* Device implementation of a custom op, used on the cuda target: queue on `stream` (a
 * CUstream of the device's primary context, current when the function is called) the work
 * that fills output from inputs, whose `data` are device addresses (CUdeviceptr), and return
 * ASTITCH_OK without synchronizing: the run may be under CUDA-graph capture. The memory of
 * every view is astitch's and lives until the work queued on the stream after it is done. */
typedef astitch_status (*astitch_custom_device_fn)(void *user, void *stream, int n_inputs,
                                                   const astitch_tensor_view *inputs,
                                                   astitch_tensor_view *output);
/* Registers (or replaces) the device implementation of custom ops whose target is `target`;
 * `device` names the target kind it runs on ("cuda", the only one). The host implementation
 * (astitch_register_custom) is separate: the reference interpreter and the host target use
 * that one. */
ASTITCH_API astitch_status astitch_register_custom_device(astitch_context *ctx,
                                                          const char *target,
                                                          const char *device,
                                                          astitch_custom_device_fn fn,
                                                          void *user);

/* ---- graph -------------------------------------------------------------------------------- */

typedef struct astitch_graph astitch_graph;
typedef int32_t astitch_node;

/* The node that failure concerns, as an id of the graph the failing call was given (the graph
 * being built, verified, loaded, planned, compiled or run), or ASTITCH_NO_NODE when it concerns
 * no node of that graph: none at all, or one that only the planner's own rewritten copy has (a
 * one-pass variance's shifted sums, say). ASTITCH_NO_NODE for a NULL ctx. */
ASTITCH_API astitch_node astitch_last_error_node(const astitch_context *ctx);
/* Where in a graph.json text that failure lies: 1-based line and column (characters from the
 * line's start), as the message's file:line:column says: returns 1. Returns 0, leaving *line
 * and *column alone, when it concerns no place in a text (or ctx is NULL). */
ASTITCH_API int astitch_last_error_position(const astitch_context *ctx, int *line, int *column);

/* Creates an empty graph owned by the caller; it refers to ctx, which must outlive it. */
ASTITCH_API astitch_status astitch_graph_create(astitch_context *ctx, astitch_graph **out);
ASTITCH_API void astitch_graph_destroy(astitch_graph *g);
/* ASTITCH_OK, or the first failure of a builder call on g. */
ASTITCH_API astitch_status astitch_graph_status(const astitch_graph *g);
ASTITCH_API astitch_context *astitch_graph_context(const astitch_graph *g);

/* Builders. Shapes are inferred and checked at once; operands must be nodes of g.
 * Element-wise operands must have equal shapes and dtypes: broadcasting is explicit. */
ASTITCH_API astitch_node astitch_parameter(astitch_graph *g, const char *name, astitch_dtype t,
                                           int rank, const int64_t *dims);
/* A constant of the given shape: count == 1 splats values[0]; count == element count gives
 * every element in row-major order. */
ASTITCH_API astitch_node astitch_constant(astitch_graph *g, astitch_dtype t, int rank,
                                          const int64_t *dims, const double *values,
                                          int64_t count);
/* Element i holds its index along `axis`. */
ASTITCH_API astitch_node astitch_iota(astitch_graph *g, astitch_dtype t, int rank,
                                      const int64_t *dims, int axis);
ASTITCH_API astitch_node astitch_unary(astitch_graph *g, astitch_op op, astitch_node x);
/* Arithmetic, logical and compare ops; compares yield bool. */
ASTITCH_API astitch_node astitch_binary(astitch_graph *g, astitch_op op, astitch_node a,
                                        astitch_node b);
ASTITCH_API astitch_node astitch_select(astitch_graph *g, astitch_node pred, astitch_node on_true,
                                        astitch_node on_false);
ASTITCH_API astitch_node astitch_convert(astitch_graph *g, astitch_node x, astitch_dtype to);
/* XLA semantics: operand dimension i becomes output dimension broadcast_dims[i]; the operand's
 * extent there must be 1 or equal to the output's. */
ASTITCH_API astitch_node astitch_broadcast_in_dim(astitch_graph *g, astitch_node x, int rank,
                                                  const int64_t *dims,
                                                  const int64_t *broadcast_dims);
ASTITCH_API astitch_node astitch_reshape(astitch_graph *g, astitch_node x, int rank,
                                         const int64_t *dims);
/* Output dimension i is operand dimension perm[i]. */
ASTITCH_API astitch_node astitch_transpose(astitch_graph *g, astitch_node x,
                                           const int64_t *perm);
/* strides may be NULL (all 1). Output extent = ceil((limit - start) / stride). */
ASTITCH_API astitch_node astitch_slice(astitch_graph *g, astitch_node x, const int64_t *start,
                                       const int64_t *limit, const int64_t *strides);
ASTITCH_API astitch_node astitch_concatenate(astitch_graph *g, int n, const astitch_node *xs,
                                             int axis);
/* Rows of `table` picked by the integer `indices`: output shape is indices' shape followed by
 * table's shape without its first dimension. Indices are clamped to [0, rows - 1]. */
ASTITCH_API astitch_node astitch_gather(astitch_graph *g, astitch_node table,
                                        astitch_node indices);
/* Reduces the listed axes (each at most once) and drops them from the shape. */
ASTITCH_API astitch_node astitch_reduce(astitch_graph *g, astitch_reduce_kind kind,
                                        astitch_node x, int naxes, const int64_t *axes);

/* Dimension numbers of a dot (XLA DotGeneral): output shape is the batch dims, then lhs free
 * dims, then rhs free dims, each in operand order. */
typedef struct astitch_dot_dims {
    int nbatch;
    int64_t lhs_batch[ASTITCH_MAX_RANK];
    int64_t rhs_batch[ASTITCH_MAX_RANK];
    int ncontract;
    int64_t lhs_contract[ASTITCH_MAX_RANK];
    int64_t rhs_contract[ASTITCH_MAX_RANK];
} astitch_dot_dims;
ASTITCH_API astitch_node astitch_dot(astitch_graph *g, astitch_node lhs, astitch_node rhs,
                                     const astitch_dot_dims *dims);
/* An opaque compute-intensive op with a declared output; it is never stitched. The reference
 * interpreter runs it through the function registered for `target` on the context. */
ASTITCH_API astitch_node astitch_custom(astitch_graph *g, const char *target, int n,
                                        const astitch_node *inputs, astitch_dtype t, int rank,
                                        const int64_t *dims);

/* Names a node (unique within the graph). Unnamed nodes get "<op>.<id>". */
ASTITCH_API astitch_status astitch_set_name(astitch_graph *g, astitch_node n, const char *name);
/* Marks n as the next graph output. A node may be an output once. */
ASTITCH_API astitch_status astitch_add_output(astitch_graph *g, astitch_node n);

/* Names the graph and attaches free text to it (both optional, carried by graph.json as "name"
 * and "comment"). NULL clears. The graph keeps copies. */
ASTITCH_API astitch_status astitch_graph_set_name(astitch_graph *g, const char *name);
ASTITCH_API astitch_status astitch_graph_set_comment(astitch_graph *g, const char *comment);
/* The graph's name or comment, owned by the graph; NULL when unset. */
ASTITCH_API const char *astitch_graph_name(const astitch_graph *g);
ASTITCH_API const char *astitch_graph_comment(const astitch_graph *g);

/* ---- inspection --------------------------------------------------------------------------- */

typedef struct astitch_tensor_info {
    const char *name; /* owned by the graph */
    astitch_dtype dtype;
    int rank;
    int64_t dims[ASTITCH_MAX_RANK];
    int64_t elements;
    size_t bytes;
} astitch_tensor_info;

/* Counts of g's nodes, parameters and outputs (0 for a NULL g). */
ASTITCH_API int astitch_graph_num_nodes(const astitch_graph *g);
ASTITCH_API int astitch_graph_num_parameters(const astitch_graph *g);
ASTITCH_API int astitch_graph_num_outputs(const astitch_graph *g);
/* Parameter i (in input order) and output i: ASTITCH_NO_NODE when i is out of range. */
ASTITCH_API astitch_node astitch_graph_parameter(const astitch_graph *g, int i);
ASTITCH_API astitch_node astitch_graph_output(const astitch_graph *g, int i);
/* ASTITCH_NO_NODE when no node has that name. */
ASTITCH_API astitch_node astitch_graph_find(const astitch_graph *g, const char *name);
/* The op of node n: ASTITCH_OP_COUNT when n is no node of g. */
ASTITCH_API astitch_op astitch_node_op(const astitch_graph *g, astitch_node n);
ASTITCH_API astitch_status astitch_node_info(const astitch_graph *g, astitch_node n,
                                             astitch_tensor_info *info);
/* The dimension numbers of dot node n into *dims; ASTITCH_ERR_ARGUMENT when n is no dot of g. */
ASTITCH_API astitch_status astitch_node_dot_dims(const astitch_graph *g, astitch_node n,
                                                 astitch_dot_dims *dims);
/* The operands of node n, in order: their count (-1 when n is no node of g) and operand i
 * (ASTITCH_NO_NODE when n or i is out of range). Operands always precede n: node ids are in
 * topological order. */
ASTITCH_API int astitch_node_num_operands(const astitch_graph *g, astitch_node n);
ASTITCH_API astitch_node astitch_node_operand(const astitch_graph *g, astitch_node n, int i);

/* Checks every invariant of g: operands, shapes, dtypes, attributes, names, outputs. */
ASTITCH_API astitch_status astitch_graph_verify(astitch_graph *g);

/* ---- graph.json (docs/graph-format.md) ---------------------------------------------------- */

/* Parses text (len bytes, need not be NUL-terminated). `source` names the text in messages
 * (a file name) and may be NULL. On failure *out is NULL and the message has line:column. */
ASTITCH_API astitch_status astitch_graph_read_json(astitch_context *ctx, const char *text,
                                                   size_t len, const char *source,
                                                   astitch_graph **out);
ASTITCH_API astitch_status astitch_graph_load_json(astitch_context *ctx, const char *path,
                                                   astitch_graph **out);
/* Writes g as graph.json text; free *text with astitch_free. */
ASTITCH_API astitch_status astitch_graph_write_json(const astitch_graph *g, char **text);
ASTITCH_API astitch_status astitch_graph_save_json(const astitch_graph *g, const char *path);

/* ---- reference execution ------------------------------------------------------------------ */

/* Runs g with the op-by-op interpreter on host buffers: inputs[i] holds parameter i and
 * outputs[i] receives output i, each dense row-major in its dtype. Output buffers must not
 * overlap input buffers; after a failure their contents are unspecified. */
ASTITCH_API astitch_status astitch_run_reference(astitch_graph *g, const void *const *inputs,
                                                 void *const *outputs);

#ifdef __cplusplus
}
#endif
#endif
