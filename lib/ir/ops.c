/* ops.c: tables generated from astitch/ops.h, and lookups by name. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ir.h"

/* ops.h's operands column. */
typedef enum OpOperands { OPERANDS_ANY, OPERANDS_LOGICAL, OPERANDS_NUMERIC, OPERANDS_FLOAT } OpOperands;

typedef struct OpInfo {
    const char *name;
    int arity;
    astitch_op_class cls;
    OpOperands operands;
} OpInfo;

#define OP_ROW(id, name, arity, cls, operands) {name, arity, ASTITCH_CLASS_##cls, OPERANDS_##operands},
static const OpInfo op_table[] = {ASTITCH_OP_LIST(OP_ROW)};
#undef OP_ROW

#define NAME_ROW(id, name, ...) name,
static const char *const reduce_names[] = {ASTITCH_REDUCE_LIST(NAME_ROW)};
static const char *const class_names[] = {ASTITCH_CLASS_LIST(NAME_ROW)};
static const char *const dtype_names[] = {ASTITCH_DTYPE_LIST(NAME_ROW)};
#undef NAME_ROW
#define SIZE_ROW(id, name, bytes) bytes,
static const size_t dtype_sizes[] = {ASTITCH_DTYPE_LIST(SIZE_ROW)};
#undef SIZE_ROW

static bool op_valid(astitch_op op) { return (unsigned)op < ASTITCH_OP_COUNT; }

const char *astitch_op_name(astitch_op op) { return op_valid(op) ? op_table[op].name : NULL; }

int astitch_op_arity(astitch_op op) { return op_valid(op) ? op_table[op].arity : -1; }

astitch_op_class astitch_op_class_of(astitch_op op)
{
    return op_valid(op) ? op_table[op].cls : ASTITCH_CLASS_COUNT;
}

bool op_defined_on(astitch_op op, astitch_dtype t)
{
    if (!op_valid(op) || !dtype_is_valid(t))
        return false;
    switch (op_table[op].operands) {
    case OPERANDS_LOGICAL: return t == ASTITCH_BOOL || dtype_is_int(t);
    case OPERANDS_NUMERIC: return dtype_is_float(t) || dtype_is_int(t);
    case OPERANDS_FLOAT: return dtype_is_float(t);
    default: return true;
    }
}

const char *op_operands_rule(astitch_op op)
{
    static const char *const rule[] = {NULL, "bool or integer", "a float or integer", "a float"};
    return op_valid(op) ? rule[op_table[op].operands] : NULL;
}

Wide reduce_identity(astitch_reduce_kind k, astitch_dtype t)
{
    bool flt = dtype_is_float(t), i32 = t == ASTITCH_I32;
    Wide w = {.i = 0};
    switch (k) {
    case ASTITCH_REDUCE_SUM:
        if (flt)
            w.f = -0.0;
        break;
    case ASTITCH_REDUCE_PROD:
        if (flt)
            w.f = 1.0;
        else
            w.i = 1;
        break;
    case ASTITCH_REDUCE_MAX:
        if (flt)
            w.f = -INFINITY;
        else
            w.i = i32 ? INT32_MIN : INT64_MIN;
        break;
    case ASTITCH_REDUCE_MIN:
        if (flt)
            w.f = INFINITY;
        else
            w.i = i32 ? INT32_MAX : INT64_MAX;
        break;
    case ASTITCH_REDUCE_ALL: w.i = 1; break;
    default: break; /* any: false */
    }
    return w;
}

Wide reduce_empty(astitch_reduce_kind k, astitch_dtype t)
{
    Wide w = reduce_identity(k, t);
    if (k == ASTITCH_REDUCE_SUM && dtype_is_float(t))
        w.f = 0.0;
    return w;
}

const char *astitch_op_class_name(astitch_op_class c)
{
    return (unsigned)c < ASTITCH_CLASS_COUNT ? class_names[c] : NULL;
}

const char *astitch_reduce_name(astitch_reduce_kind k)
{
    return (unsigned)k < ASTITCH_REDUCE_COUNT ? reduce_names[k] : NULL;
}

bool dtype_is_valid(astitch_dtype t) { return (unsigned)t < ASTITCH_DTYPE_COUNT; }

const char *astitch_dtype_name(astitch_dtype t) { return dtype_is_valid(t) ? dtype_names[t] : NULL; }

size_t astitch_dtype_size(astitch_dtype t) { return dtype_is_valid(t) ? dtype_sizes[t] : 0; }

astitch_status astitch_op_from_name(const char *name, astitch_op *op)
{
    for (int i = 0; name && i < ASTITCH_OP_COUNT; i++)
        if (strcmp(op_table[i].name, name) == 0) {
            *op = (astitch_op)i;
            return ASTITCH_OK;
        }
    return ASTITCH_ERR_ARGUMENT;
}

astitch_status astitch_dtype_from_name(const char *name, astitch_dtype *t)
{
    for (int i = 0; name && i < ASTITCH_DTYPE_COUNT; i++)
        if (strcmp(dtype_names[i], name) == 0) {
            *t = (astitch_dtype)i;
            return ASTITCH_OK;
        }
    return ASTITCH_ERR_ARGUMENT;
}

astitch_status astitch_reduce_from_name(const char *name, astitch_reduce_kind *k)
{
    for (int i = 0; name && i < ASTITCH_REDUCE_COUNT; i++)
        if (strcmp(reduce_names[i], name) == 0) {
            *k = (astitch_reduce_kind)i;
            return ASTITCH_OK;
        }
    return ASTITCH_ERR_ARGUMENT;
}

bool op_is_elementwise(astitch_op op)
{
    astitch_op_class c = astitch_op_class_of(op);
    return c == ASTITCH_CLASS_LIGHT || c == ASTITCH_CLASS_HEAVY;
}

bool op_heavy_few_instructions(astitch_op op)
{
    return op == ASTITCH_OP_EXP || op == ASTITCH_OP_LOG || op == ASTITCH_OP_SQRT ||
           op == ASTITCH_OP_RSQRT || op == ASTITCH_OP_SIGMOID;
}

bool op_is_compare(astitch_op op) { return op >= ASTITCH_OP_EQ && op <= ASTITCH_OP_GE; }

bool dtype_is_float(astitch_dtype t)
{
    return t == ASTITCH_F32 || t == ASTITCH_F16 || t == ASTITCH_BF16;
}

bool dtype_is_int(astitch_dtype t) { return t == ASTITCH_I32 || t == ASTITCH_I64; }
