"""Rules of element-wise ops: arithmetic, math functions, comparisons, logical ops, selection,
clamps, conversions, and gelu and silu (computed in f32 for f16/bf16, as eager does)."""

import math

import torch

from . import RULES, Rule, dtype_of, float_only, meta, opmath, promoted_dtype, rule, shape_of

aten = torch.ops.aten
prims = torch.ops.prims


def _unary(op, float_only=False):
    def translate(t, node):
        x = t.operand(node.args[0], dtype_of(node), shape_of(node))
        return t.b.unary(op, x)

    supports = (lambda n: None if dtype_of(n) in ("f32", "f16", "bf16") else
                f"{op} of {dtype_of(n)}") if float_only else None
    return translate, supports


for _op, _targets, _float in [
    ("exp", [aten.exp.default], True), ("log", [aten.log.default], True),
    ("log1p", [aten.log1p.default], True), ("expm1", [aten.expm1.default], True),
    ("sqrt", [aten.sqrt.default], True), ("rsqrt", [aten.rsqrt.default], True),
    ("tanh", [aten.tanh.default], True), ("sigmoid", [aten.sigmoid.default], True),
    ("erf", [aten.erf.default], True), ("sin", [aten.sin.default], True),
    ("cos", [aten.cos.default], True), ("floor", [aten.floor.default], False),
    ("ceil", [aten.ceil.default], False), ("neg", [aten.neg.default], False),
    ("abs", [aten.abs.default], False), ("sign", [aten.sign.default], False),
    ("relu", [aten.relu.default], False), ("not", [aten.bitwise_not.default], False),
]:
    _fn, _sup = _unary(_op, _float)
    for _t in _targets:
        RULES[_t] = Rule(_fn, _sup)


@rule(aten.reciprocal.default)
def _reciprocal(t, node):
    x = t.operand(node.args[0], dtype_of(node), shape_of(node))
    return t.b.binary("div", t.b.scalar(x.dtype, 1.0, x.shape), x)


@rule(aten.logical_not.default)
def _logical_not(t, node):
    return t.b.unary("not", t.operand(node.args[0], "bool", shape_of(node)))


def _arith(op):
    def translate(t, node):
        dtype, shape = dtype_of(node), shape_of(node)
        work = opmath(dtype)
        a = t.operand(node.args[0], work, shape)
        b = t.operand(node.args[1], work, shape)
        alpha = node.kwargs.get("alpha", 1)
        if alpha != 1:
            b = t.b.binary("mul", b, t.b.scalar(work, alpha, shape))
        return t.b.convert(t.b.binary(op, a, b), dtype)

    return translate


def _pow_supported(node):
    return None if dtype_of(node) in ("f32", "f16", "bf16") else f"pow of {dtype_of(node)}"


for _op, _targets in [
    ("add", [aten.add.Tensor, aten.add.Scalar]), ("sub", [aten.sub.Tensor, aten.sub.Scalar]),
    ("mul", [aten.mul.Tensor, aten.mul.Scalar]), ("div", [aten.div.Tensor, aten.div.Scalar]),
    ("max", [aten.maximum.default]), ("min", [aten.minimum.default]),
    ("rem", [aten.fmod.Tensor, aten.fmod.Scalar]),
    ("and", [aten.bitwise_and.Tensor, aten.bitwise_and.Scalar]),
    ("or", [aten.bitwise_or.Tensor, aten.bitwise_or.Scalar]),
]:
    for _t in _targets:
        RULES[_t] = Rule(_arith(_op))
for _t in (aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor, aten.pow.Scalar):
    RULES[_t] = Rule(_arith("pow"), _pow_supported)


def _floor_parts(t, a, b):
    """(floor(a / b), a - floor(a / b) * b) as eager computes them: from the truncated remainder,
    so that exact multiples do not round the wrong way."""
    bl = t.b
    zero = bl.scalar(a.dtype, 0, a.shape)
    r = bl.binary("rem", a, b)
    # r != 0 and sign(r) != sign(b): the floor is one below the truncated quotient
    fix = bl.binary("and", bl.binary("ne", r, zero),
                    bl.binary("ne", bl.binary("lt", r, zero), bl.binary("lt", b, zero)))
    mod = bl.select(fix, bl.binary("add", r, b), r)
    if a.dtype in ("i32", "i64"):
        q = bl.binary("div", a, b)
        return bl.select(fix, bl.binary("sub", q, bl.scalar(a.dtype, 1, a.shape)), q), mod
    q = bl.binary("div", bl.binary("sub", a, r), b)
    q = bl.select(fix, bl.binary("sub", q, bl.scalar(a.dtype, 1.0, a.shape)), q)
    f = bl.unary("floor", q)
    up = bl.binary("gt", bl.binary("sub", q, f), bl.scalar(a.dtype, 0.5, a.shape))
    f = bl.select(up, bl.binary("add", f, bl.scalar(a.dtype, 1.0, a.shape)), f)
    return f, mod  # (eager gives a zero quotient the sign of a / b; this one may be +0)


def _div_mode_supported(node):
    mode = node.kwargs.get("rounding_mode")
    return None if mode in ("trunc", "floor", None) else f"rounding mode {mode}"


@rule(aten.div.Tensor_mode, aten.div.Scalar_mode, supports=_div_mode_supported)
def _div_mode(t, node):
    dtype, shape = dtype_of(node), shape_of(node)
    work = opmath(dtype)
    a = t.operand(node.args[0], work, shape)
    b = t.operand(node.args[1], work, shape)
    mode = node.kwargs.get("rounding_mode")
    if mode == "floor":
        q, _ = _floor_parts(t, a, b)
    elif mode == "trunc" and work not in ("i32", "i64"):
        q = t.b.binary("div", a, b)
        neg = t.b.binary("lt", q, t.b.scalar(work, 0.0, shape))
        q = t.b.select(neg, t.b.unary("ceil", q), t.b.unary("floor", q))
    else:
        q = t.b.binary("div", a, b)
    return t.b.convert(q, dtype)


@rule(aten.remainder.Tensor, aten.remainder.Scalar)
def _remainder(t, node):
    dtype, shape = dtype_of(node), shape_of(node)
    work = opmath(dtype)
    a = t.operand(node.args[0], work, shape)
    b = t.operand(node.args[1], work, shape)
    return t.b.convert(_floor_parts(t, a, b)[1], dtype)


@rule(aten.round.default, supports=lambda n: None if dtype_of(n) in ("f32", "f16", "bf16")
      else f"round of {dtype_of(n)}")
def _round(t, node):
    """Halves to even, as eager rounds."""
    x = t.operand(node.args[0], dtype_of(node), shape_of(node))
    b, shape = t.b, x.shape
    f = b.unary("floor", x)
    d = b.binary("sub", x, f)
    half = b.scalar(x.dtype, 0.5, shape)
    odd = b.binary("ne", b.binary("rem", f, b.scalar(x.dtype, 2.0, shape)),
                   b.scalar(x.dtype, 0.0, shape))
    up = b.binary("or", b.binary("gt", d, half), b.binary("and", b.binary("eq", d, half), odd))
    return b.select(up, b.binary("add", f, b.scalar(x.dtype, 1.0, shape)), f)


def _logical(op):
    def translate(t, node):
        shape = shape_of(node)
        a = t.operand(node.args[0], "bool", shape)
        b = t.operand(node.args[1], "bool", shape)
        r = t.b.binary(op, a, b)
        return t.b.convert(r, dtype_of(node))

    return translate


RULES[aten.logical_and.default] = Rule(_logical("and"))
RULES[aten.logical_or.default] = Rule(_logical("or"))
RULES[aten.logical_xor.default] = Rule(_logical("ne"))


def _compare(op):
    def translate(t, node):
        dtype, shape = promoted_dtype(node.args[:2]), shape_of(node)
        a = t.operand(node.args[0], dtype, shape)
        b = t.operand(node.args[1], dtype, shape)
        return t.b.binary(op, a, b)

    return translate


for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    for _overload in ("Tensor", "Scalar"):
        RULES[getattr(getattr(aten, _op), _overload)] = Rule(_compare(_op))


@rule(aten.where.self)
def _where(t, node):
    dtype, shape = dtype_of(node), shape_of(node)
    pred = t.operand(node.args[0], "bool", shape)
    return t.b.select(pred, t.operand(node.args[1], dtype, shape),
                      t.operand(node.args[2], dtype, shape))


@rule(aten.masked_fill.Scalar, aten.masked_fill.Tensor)
def _masked_fill(t, node):
    dtype, shape = dtype_of(node), shape_of(node)
    pred = t.operand(node.args[1], "bool", shape)
    return t.b.select(pred, t.operand(node.args[2], dtype, shape),
                      t.operand(node.args[0], dtype, shape))


def _clamp_bounds(node):
    args = list(node.args[1:]) + [None] * 2
    lo = node.kwargs.get("min", args[0])
    hi = node.kwargs.get("max", args[1])
    if node.target in (aten.clamp_min.default, aten.clamp_min.Tensor):
        lo, hi = node.args[1], None
    if node.target in (aten.clamp_max.default, aten.clamp_max.Tensor):
        lo, hi = None, node.args[1]
    return lo, hi


@rule(aten.clamp.default, aten.clamp.Tensor, aten.clamp_min.default, aten.clamp_min.Tensor,
      aten.clamp_max.default, aten.clamp_max.Tensor)
def _clamp(t, node):
    dtype, shape = dtype_of(node), shape_of(node)
    x = t.operand(node.args[0], dtype, shape)
    lo, hi = _clamp_bounds(node)
    if lo is not None:
        x = t.b.binary("max", x, t.operand(lo, dtype, shape))
    if hi is not None:
        x = t.b.binary("min", x, t.operand(hi, dtype, shape))
    return x


def _to_copy_supported(node):
    dev = node.kwargs.get("device")
    if dev is not None and torch.device(dev) != meta(node.args[0]).device:
        return "copy to another device"
    return None


@rule(aten._to_copy.default, supports=_to_copy_supported)
def _to_copy(t, node):
    return t.operand(node.args[0], dtype_of(node), shape_of(node))


@rule(prims.convert_element_type.default)
def _convert(t, node):
    return t.operand(node.args[0], dtype_of(node), shape_of(node))


@rule(aten.clone.default, aten.alias.default, aten.detach.default, aten.lift_fresh_copy.default)
def _identity(t, node):
    return t.value(node.args[0])



@rule(aten.gelu.default, supports=float_only)
def _gelu(t, node):
    dtype, shape = dtype_of(node), shape_of(node)
    x = t.operand(node.args[0], opmath(dtype), shape)
    w = x.dtype
    half = t.b.binary("mul", x, t.b.scalar(w, 0.5, shape))
    if node.kwargs.get("approximate", "none") == "tanh":
        cube = t.b.binary("mul", t.b.binary("mul", x, x), x)
        inner = t.b.binary("add", x, t.b.binary("mul", cube, t.b.scalar(w, 0.044715, shape)))
        inner = t.b.binary("mul", inner, t.b.scalar(w, math.sqrt(2.0 / math.pi), shape))
        g = t.b.unary("tanh", inner)
    else:
        g = t.b.unary("erf", t.b.binary("mul", x, t.b.scalar(w, math.sqrt(0.5), shape)))
    r = t.b.binary("mul", half, t.b.binary("add", g, t.b.scalar(w, 1.0, shape)))
    return t.b.convert(r, dtype)


@rule(aten.silu.default, supports=float_only)
def _silu(t, node):
    dtype, shape = dtype_of(node), shape_of(node)
    x = t.operand(node.args[0], opmath(dtype), shape)
    return t.b.convert(t.b.binary("mul", x, t.b.unary("sigmoid", x)), dtype)
