/*
 * astitch/ops.h: the one table of operations.
 *
 * Every property of an op is listed here once. X(ID, name, arity, class):
 *   ID     suffix of the enumerator ASTITCH_OP_<ID>
 *   name   the spelling in graph.json and in messages
 *   arity  number of operands, or -1 for a variable number (at least one)
 *   class  ASTITCH_CLASS_<class>, how the stitching passes treat the op
 *
 * Classes:
 *   SOURCE     produces values without operands (parameter, constant, iota)
 *   LIGHT      cheap element-wise op: recomputing it per consumer element is fine
 *   HEAVY      expensive element-wise op: never recomputed across a broadcast
 *   BROADCAST  one-to-many element-wise dependency (broadcast_in_dim)
 *   SHAPE      moves elements without arithmetic (reshape, transpose, slice, ...)
 *   REDUCE     many-to-one dependency
 *   COMPUTE    compute-intensive op that bounds stitch scopes (dot, custom)
 */
#ifndef ASTITCH_OPS_H
#define ASTITCH_OPS_H

#define ASTITCH_OP_LIST(X)                          \
    X(PARAMETER, "parameter", 0, SOURCE)            \
    X(CONSTANT, "constant", 0, SOURCE)              \
    X(IOTA, "iota", 0, SOURCE)                      \
    /* unary element-wise */                        \
    X(NEG, "neg", 1, LIGHT)                         \
    X(ABS, "abs", 1, LIGHT)                         \
    X(EXP, "exp", 1, HEAVY)                         \
    X(LOG, "log", 1, HEAVY)                         \
    X(LOG1P, "log1p", 1, HEAVY)                     \
    X(EXPM1, "expm1", 1, HEAVY)                     \
    X(SQRT, "sqrt", 1, HEAVY)                       \
    X(RSQRT, "rsqrt", 1, HEAVY)                     \
    X(TANH, "tanh", 1, HEAVY)                       \
    X(SIGMOID, "sigmoid", 1, HEAVY)                 \
    X(ERF, "erf", 1, HEAVY)                         \
    X(SIN, "sin", 1, HEAVY)                         \
    X(COS, "cos", 1, HEAVY)                         \
    X(FLOOR, "floor", 1, LIGHT)                     \
    X(CEIL, "ceil", 1, LIGHT)                       \
    X(ROUND, "round", 1, LIGHT)                     \
    X(SIGN, "sign", 1, LIGHT)                       \
    X(NOT, "not", 1, LIGHT)                         \
    X(RELU, "relu", 1, LIGHT)                       \
    X(CONVERT, "convert", 1, LIGHT)                 \
    /* binary element-wise */                       \
    X(ADD, "add", 2, LIGHT)                         \
    X(SUB, "sub", 2, LIGHT)                         \
    X(MUL, "mul", 2, LIGHT)                         \
    X(DIV, "div", 2, HEAVY)                         \
    X(POW, "pow", 2, HEAVY)                         \
    X(MAX, "max", 2, LIGHT)                         \
    X(MIN, "min", 2, LIGHT)                         \
    X(REM, "rem", 2, HEAVY)                         \
    X(AND, "and", 2, LIGHT)                         \
    X(OR, "or", 2, LIGHT)                           \
    X(EQ, "eq", 2, LIGHT)                           \
    X(NE, "ne", 2, LIGHT)                           \
    X(LT, "lt", 2, LIGHT)                           \
    X(LE, "le", 2, LIGHT)                           \
    X(GT, "gt", 2, LIGHT)                           \
    X(GE, "ge", 2, LIGHT)                           \
    X(SELECT, "select", 3, LIGHT)                   \
    /* data movement */                             \
    X(BROADCAST_IN_DIM, "broadcast_in_dim", 1, BROADCAST) \
    X(RESHAPE, "reshape", 1, SHAPE)                 \
    X(TRANSPOSE, "transpose", 1, SHAPE)             \
    X(SLICE, "slice", 1, SHAPE)                     \
    X(CONCATENATE, "concatenate", -1, SHAPE)        \
    X(GATHER, "gather", 2, SHAPE)                   \
    /* reductions */                                \
    X(REDUCE, "reduce", 1, REDUCE)                  \
    /* compute-intensive: bound stitch scopes */    \
    X(DOT, "dot", 2, COMPUTE)                       \
    X(CUSTOM, "custom", -1, COMPUTE)

/* Reduction kinds of ASTITCH_OP_REDUCE: X(ID, name). */
#define ASTITCH_REDUCE_LIST(X) \
    X(SUM, "sum")              \
    X(MAX, "max")              \
    X(MIN, "min")              \
    X(PROD, "prod")            \
    X(ANY, "any")              \
    X(ALL, "all")

/* Element types: X(ID, name, bytes). f16 and bf16 are stored in 2 bytes and computed in f32. */
#define ASTITCH_DTYPE_LIST(X) \
    X(F32, "f32", 4)          \
    X(F16, "f16", 2)          \
    X(BF16, "bf16", 2)        \
    X(I32, "i32", 4)          \
    X(I64, "i64", 8)          \
    X(BOOL, "bool", 1)

#define ASTITCH_CLASS_LIST(X) \
    X(SOURCE, "source")       \
    X(LIGHT, "light")         \
    X(HEAVY, "heavy")         \
    X(BROADCAST, "broadcast") \
    X(SHAPE, "shape")         \
    X(REDUCE, "reduce")       \
    X(COMPUTE, "compute")

#endif
