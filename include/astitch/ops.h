/*
 * astitch/ops.h: the one table of operations.
 *
 * Every property of an op is listed here once. X(ID, name, arity, class, operands):
 *   ID        suffix of the enumerator ASTITCH_OP_<ID>
 *   name      the spelling in graph.json and in messages
 *   arity     number of operands, or -1 for a variable number (at least one)
 *   class     ASTITCH_CLASS_<class>, how the stitching passes treat the op
 *   operands  the dtypes an element-wise op is defined on (its first operand; select: its
 *             values): ANY, LOGICAL (bool or integer), NUMERIC (float or integer), FLOAT;
 *             ANY for the others, whose rules are their own (docs/graph-format.md)
 *
 * Classes:
 *   SOURCE     produces values without operands (parameter, constant, iota)
 *   LIGHT      cheap element-wise op: recomputing it per consumer element is fine
 *   HEAVY      expensive element-wise op: not recomputed across a broadcast, but for the few
 *              of a few instructions (exp, log, sqrt, rsqrt, sigmoid) where a kernel's
 *              inputs alone make them (docs/planner.md, *dominant*)
 *   BROADCAST  one-to-many element-wise dependency (broadcast_in_dim)
 *   SHAPE      moves elements without arithmetic (reshape, transpose, slice, ...)
 *   REDUCE     many-to-one dependency
 *   COMPUTE    compute-intensive op that bounds stitch scopes (dot, custom)
 */
#ifndef ASTITCH_OPS_H
#define ASTITCH_OPS_H

#define ASTITCH_OP_LIST(X)                              \
    X(PARAMETER, "parameter", 0, SOURCE, ANY)           \
    X(CONSTANT, "constant", 0, SOURCE, ANY)             \
    X(IOTA, "iota", 0, SOURCE, ANY)                     \
    /* unary element-wise */                            \
    X(NEG, "neg", 1, LIGHT, NUMERIC)                    \
    X(ABS, "abs", 1, LIGHT, NUMERIC)                    \
    X(EXP, "exp", 1, HEAVY, FLOAT)                      \
    X(LOG, "log", 1, HEAVY, FLOAT)                      \
    X(LOG1P, "log1p", 1, HEAVY, FLOAT)                  \
    X(EXPM1, "expm1", 1, HEAVY, FLOAT)                  \
    X(SQRT, "sqrt", 1, HEAVY, FLOAT)                    \
    X(RSQRT, "rsqrt", 1, HEAVY, FLOAT)                  \
    X(TANH, "tanh", 1, HEAVY, FLOAT)                    \
    X(SIGMOID, "sigmoid", 1, HEAVY, FLOAT)              \
    X(ERF, "erf", 1, HEAVY, FLOAT)                      \
    X(SIN, "sin", 1, HEAVY, FLOAT)                      \
    X(COS, "cos", 1, HEAVY, FLOAT)                      \
    X(FLOOR, "floor", 1, LIGHT, FLOAT)                  \
    X(CEIL, "ceil", 1, LIGHT, FLOAT)                    \
    X(ROUND, "round", 1, LIGHT, FLOAT)                  \
    X(SIGN, "sign", 1, LIGHT, NUMERIC)                  \
    X(NOT, "not", 1, LIGHT, LOGICAL)                    \
    X(RELU, "relu", 1, LIGHT, NUMERIC)                  \
    X(CONVERT, "convert", 1, LIGHT, ANY)                \
    /* binary element-wise */                           \
    X(ADD, "add", 2, LIGHT, NUMERIC)                    \
    X(SUB, "sub", 2, LIGHT, NUMERIC)                    \
    X(MUL, "mul", 2, LIGHT, NUMERIC)                    \
    X(DIV, "div", 2, HEAVY, NUMERIC)                    \
    X(POW, "pow", 2, HEAVY, FLOAT)                      \
    X(MAX, "max", 2, LIGHT, NUMERIC)                    \
    X(MIN, "min", 2, LIGHT, NUMERIC)                    \
    X(REM, "rem", 2, HEAVY, NUMERIC)                    \
    X(AND, "and", 2, LIGHT, LOGICAL)                    \
    X(OR, "or", 2, LIGHT, LOGICAL)                      \
    X(EQ, "eq", 2, LIGHT, ANY)                          \
    X(NE, "ne", 2, LIGHT, ANY)                          \
    X(LT, "lt", 2, LIGHT, NUMERIC)                      \
    X(LE, "le", 2, LIGHT, NUMERIC)                      \
    X(GT, "gt", 2, LIGHT, NUMERIC)                      \
    X(GE, "ge", 2, LIGHT, NUMERIC)                      \
    X(SELECT, "select", 3, LIGHT, ANY)                  \
    /* data movement */                                 \
    X(BROADCAST_IN_DIM, "broadcast_in_dim", 1, BROADCAST, ANY) \
    X(RESHAPE, "reshape", 1, SHAPE, ANY)                \
    X(TRANSPOSE, "transpose", 1, SHAPE, ANY)            \
    X(SLICE, "slice", 1, SHAPE, ANY)                    \
    X(CONCATENATE, "concatenate", -1, SHAPE, ANY)       \
    X(GATHER, "gather", 2, SHAPE, ANY)                  \
    /* reductions */                                    \
    X(REDUCE, "reduce", 1, REDUCE, ANY)                 \
    /* compute-intensive: bound stitch scopes */        \
    X(DOT, "dot", 2, COMPUTE, ANY)                      \
    X(CUSTOM, "custom", -1, COMPUTE, ANY)

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
