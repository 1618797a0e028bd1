"""The one op table of the bridge: ATen (and prims) overload -> translation rule.

A rule translates one FX node of an AOTAutograd graph into astitch graph nodes. Every node is
first checked generically (`unsupported_reason`: dtypes, shapes, devices); a rule's own
`supports(node)` adds what is particular to the op. Both return None when the node can be
translated, else the reason, which the log and explain() report verbatim.

Contracts of the translation (docs/pytorch.md, *What is compiled*):
- broadcasting is explicit: every operand of an element-wise op is broadcast to the node's
  output shape, PyTorch's right-aligned rule;
- dtypes come from the FX node's meta["val"]: arithmetic runs in the result's dtype (f16 and
  bf16 round after each op, as eager rounds each ATen op's result); comparisons run in the
  operands' promoted dtype; ops whose eager kernel keeps an f32 intermediate (layer norm,
  softmax, gelu, mean and var of f16/bf16) compute in f32 and convert once.
"""

import math
import operator

import torch

aten = torch.ops.aten
prims = torch.ops.prims

TORCH_TO_ASTITCH = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.bool: "bool",
}
MAX_RANK = 8


def meta(x):
    """The example value (a FakeTensor or a Python number) of an FX node, or x itself."""
    return x.meta.get("val") if isinstance(x, torch.fx.Node) else x


def _tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for x in v for t in _tensors(x)]
    return []


def _node_tensors(node):
    vals = [meta(node)]
    for a in list(node.args) + list(node.kwargs.values()):
        if isinstance(a, (list, tuple)):
            vals.extend(meta(x) for x in a)
        else:
            vals.append(meta(a))
    return [t for v in vals for t in _tensors(v)]


def unsupported_reason(node):
    """None when node may be translated, else why not (never raises: a rule that fails on an
    unexpected form of its op declines the node)."""
    try:
        return _unsupported_reason(node)
    except Exception as e:  # noqa: BLE001
        return f"unexpected form of {node.target}: {type(e).__name__}: {e}"


def _unsupported_reason(node):
    if node.op != "call_function":
        return f"{node.op} nodes stay in PyTorch"
    rule = RULES.get(node.target)
    if rule is None:
        return f"no rule for {node.target}"
    if meta(node) is None:
        return "no example value (meta['val'])"
    for t in _node_tensors(node):
        if t.dtype not in TORCH_TO_ASTITCH:
            return f"dtype {t.dtype}"
        if any(not isinstance(d, int) for d in t.shape):
            return "symbolic shape"
        if t.dim() > MAX_RANK:
            return f"rank {t.dim()} (at most {MAX_RANK})"
        if t.device.type not in ("cpu", "cuda"):
            return f"device {t.device}"
        if t.is_sparse or t.layout != torch.strided:
            return f"layout {t.layout}"
    return rule.supports(node) if rule.supports else None


def dtype_of(x):
    return TORCH_TO_ASTITCH[meta(x).dtype]


def shape_of(x):
    return tuple(int(d) for d in meta(x).shape)


def _category(dtype):
    return {"bool": 0, "i32": 1, "i64": 1}.get(dtype, 2)


_PROMOTE = {("i32", "i64"): "i64", ("f16", "bf16"): "f32"}
_WIDTH = {"bool": 0, "i32": 1, "i64": 2, "f16": 3, "bf16": 3, "f32": 4}


def _promote_pair(a, b):
    if a == b:
        return a
    if _category(a) != _category(b):
        return a if _category(a) > _category(b) else b
    key = tuple(sorted((a, b)))
    return _PROMOTE.get(key) or (a if _WIDTH[a] > _WIDTH[b] else b)


def promoted_dtype(args):
    """PyTorch's result type of args (FX nodes and Python numbers): the highest category wins;
    within it, dimensioned tensors before zero-dim tensors before Python numbers."""
    groups = []
    for a in args:
        v = meta(a)
        if isinstance(v, torch.Tensor):
            groups.append((TORCH_TO_ASTITCH[v.dtype], 2 if v.dim() else 1))
        elif isinstance(v, bool):
            groups.append(("bool", 0))
        elif isinstance(v, int):
            groups.append(("i64", 0))
        elif isinstance(v, float):
            groups.append(("f32", 0))
    top = max(_category(d) for d, _ in groups)
    best = max(p for d, p in groups if _category(d) == top)
    result = None
    for d, p in groups:
        if _category(d) == top and p == best:
            result = d if result is None else _promote_pair(result, d)
    return result


class Rule:
    __slots__ = ("translate", "supports")

    def __init__(self, translate, supports=None):
        self.translate, self.supports = translate, supports


RULES = {}


def rule(*targets, supports=None):
    def register(fn):
        for t in targets:
            RULES[t] = Rule(fn, supports)
        return fn

    return register


# ---- element-wise ------------------------------------------------------------------------------

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
        work = _opmath(dtype)
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
    work = _opmath(dtype)
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
    work = _opmath(dtype)
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


# ---- data movement -----------------------------------------------------------------------------

@rule(aten.view.default, aten._unsafe_view.default, aten.reshape.default,
      aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default)
def _reshape(t, node):
    return t.b.reshape(t.value(node.args[0]), shape_of(node))


@rule(aten.expand.default)
def _expand(t, node):
    return t.b.broadcast_to(t.value(node.args[0]), shape_of(node))


@rule(prims.broadcast_in_dim.default)
def _prims_broadcast(t, node):
    return t.b.broadcast_in_dim(t.value(node.args[0]), shape_of(node), node.args[2])


@rule(aten.permute.default)
def _permute(t, node):
    x = t.value(node.args[0])
    return t.b.transpose(x, [d % max(x.rank, 1) for d in node.args[1]])


@rule(aten.transpose.int)
def _transpose(t, node):
    x = t.value(node.args[0])
    perm = list(range(x.rank))
    i, j = node.args[1] % x.rank, node.args[2] % x.rank
    perm[i], perm[j] = perm[j], perm[i]
    return t.b.transpose(x, perm)


@rule(aten.t.default)
def _t(t, node):
    x = t.value(node.args[0])
    return t.b.transpose(x, [1, 0]) if x.rank == 2 else x


def _slice_bounds(extent, start, end, step):
    start = 0 if start is None else start
    end = extent if end is None else end
    start = start + extent if start < 0 else start
    end = end + extent if end < 0 else end
    start = min(max(start, 0), extent)
    end = min(max(end, start), extent)
    return start, end, step


def _slice_supported(node):
    step = node.args[4] if len(node.args) > 4 else 1
    return None if isinstance(step, int) and step >= 1 else f"slice step {step}"


@rule(aten.slice.Tensor, supports=_slice_supported)
def _slice(t, node):
    x = t.value(node.args[0])
    args = list(node.args) + [None] * (5 - len(node.args))
    dim = (args[1] or 0) % x.rank
    s, e, st = _slice_bounds(x.shape[dim], args[2], args[3], args[4] or 1)
    start, limit, strides = [0] * x.rank, list(x.shape), [1] * x.rank
    start[dim], limit[dim], strides[dim] = s, e, st
    return t.b.slice(x, start, limit, strides)


@rule(aten.select.int)
def _select_int(t, node):
    x = t.value(node.args[0])
    dim = node.args[1] % x.rank
    i = node.args[2] % x.shape[dim]
    start, limit = [0] * x.rank, list(x.shape)
    start[dim], limit[dim] = i, i + 1
    return t.b.reshape(t.b.slice(x, start, limit, [1] * x.rank), shape_of(node))


@rule(aten.split_with_sizes.default, aten.split.Tensor)
def _split(t, node):
    x = t.value(node.args[0])
    dim = (node.args[2] if len(node.args) > 2 else 0) % x.rank
    parts, at = [], 0
    for out in meta(node):
        n = int(out.shape[dim])
        start, limit = [0] * x.rank, list(x.shape)
        start[dim], limit[dim] = at, at + n
        parts.append(t.b.slice(x, start, limit, [1] * x.rank))
        at += n
    return tuple(parts)


def _slice_scatter_supported(node):
    step = node.args[5] if len(node.args) > 5 else node.kwargs.get("step", 1)
    return None if step == 1 else f"slice_scatter step {step}"


@rule(aten.slice_scatter.default, supports=_slice_scatter_supported)
def _slice_scatter(t, node):
    """base with [start:end] along dim replaced by src: the pieces of base around src,
    concatenated."""
    dtype = dtype_of(node)
    base = t.operand(node.args[0], dtype, None)
    src = t.operand(node.args[1], dtype, None)
    args = list(node.args) + [None] * (6 - len(node.args))
    dim = (args[2] if args[2] is not None else node.kwargs.get("dim", 0)) % base.rank
    start = args[3] if args[3] is not None else node.kwargs.get("start")
    end = args[4] if args[4] is not None else node.kwargs.get("end")
    s, e, _ = _slice_bounds(base.shape[dim], start, end, 1)
    pieces = []
    lo_start, lo_limit = [0] * base.rank, list(base.shape)
    lo_limit[dim] = s
    hi_start, hi_limit = [0] * base.rank, list(base.shape)
    hi_start[dim] = e
    if s > 0:
        pieces.append(t.b.slice(base, lo_start, lo_limit, [1] * base.rank))
    pieces.append(src)
    if e < base.shape[dim]:
        pieces.append(t.b.slice(base, hi_start, hi_limit, [1] * base.rank))
    return t.b.concatenate(pieces, dim)


@rule(aten.repeat.default)
def _repeat(t, node):
    x = t.value(node.args[0])
    reps = list(node.args[1])
    lead = len(reps) - x.rank
    dims = [1] * lead + list(x.shape)
    # [r0, d0, r1, d1, ...] with x's extents in the odd places, then merged pairwise
    wide = [e for r, d in zip(reps, dims) for e in (r, d)]
    xs = t.b.reshape(x, dims)
    return t.b.reshape(t.b.broadcast_in_dim(xs, wide, range(1, 2 * len(dims), 2)),
                       shape_of(node))


@rule(aten.cat.default)
def _cat(t, node):
    dtype, shape = dtype_of(node), shape_of(node)
    dim = (node.args[1] if len(node.args) > 1 else 0) % len(shape)
    xs = [t.operand(x, dtype, None) for x in node.args[0] if meta(x).shape != (0,) or
          len(shape) == 1]
    return t.b.concatenate(xs, dim)


def _gather_supported(node):
    return None if dtype_of(node.args[1]) in ("i32", "i64") else "index dtype"


@rule(aten.embedding.default, supports=_gather_supported)
def _embedding(t, node):
    return t.b.gather(t.value(node.args[0]), t.value(node.args[1]))


def _index_select_supported(node):
    if dtype_of(node.args[2]) not in ("i32", "i64"):
        return "index dtype"
    return None


@rule(aten.index_select.default, supports=_index_select_supported)
def _index_select(t, node):
    x = t.value(node.args[0])
    dim = node.args[1] % max(x.rank, 1)
    idx = t.b.reshape(t.value(node.args[2]), (shape_of(node.args[2]) or (1,)))
    perm = [dim] + [d for d in range(x.rank) if d != dim]
    g = t.b.gather(t.b.transpose(x, perm), idx)
    back = list(range(1, dim + 1)) + [0] + list(range(dim + 1, x.rank))
    return t.b.reshape(t.b.transpose(g, back), shape_of(node))


def _index_supported(node):
    idx = node.args[1]
    if len(idx) != 1 or idx[0] is None:
        return "indexing other than one index tensor on the first dimension"
    if dtype_of(idx[0]) not in ("i32", "i64"):
        return "index dtype (boolean masks stay in PyTorch)"
    return None


@rule(aten.index.Tensor, supports=_index_supported)
def _index(t, node):
    return t.b.gather(t.value(node.args[0]), t.value(node.args[1][0]))


# ---- sources -------------------------------------------------------------------------------------

@rule(aten.full.default, aten.scalar_tensor.default, aten.full_like.default,
      aten.zeros_like.default, aten.ones_like.default)
def _full(t, node):
    value = {aten.scalar_tensor.default: node.args[0], aten.zeros_like.default: 0,
             aten.ones_like.default: 1}.get(node.target)
    if value is None:
        value = node.args[1]
    return t.b.scalar(dtype_of(node), value, shape_of(node))


def _arange_args(node):
    if node.target == aten.arange.default:
        return 0, node.args[0], 1
    if node.target == aten.arange.start:
        return node.args[0], node.args[1], 1
    if node.target == prims.iota.default:
        return node.kwargs["start"], None, node.kwargs["step"]
    return node.args[0], node.args[1], node.args[2] if len(node.args) > 2 else 1


@rule(aten.arange.default, aten.arange.start, aten.arange.start_step, prims.iota.default)
def _arange(t, node):
    dtype, shape = dtype_of(node), shape_of(node)
    start, _, step = _arange_args(node)
    work = "f32" if dtype in ("f16", "bf16") or isinstance(start + step, float) else dtype
    x = t.b.iota(work, shape, 0)
    if step != 1:
        x = t.b.binary("mul", x, t.b.scalar(work, step, shape))
    if start != 0:
        x = t.b.binary("add", x, t.b.scalar(work, start, shape))
    return t.b.convert(x, dtype)


# ---- reductions ----------------------------------------------------------------------------------

def _dims(x, dims):
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(x.rank))
    if isinstance(dims, int):
        dims = [dims]
    return sorted(d % x.rank for d in dims) if x.rank else []


def _keepdim(t, node, v):
    return t.b.reshape(v, shape_of(node))


def _sum_dims(node):
    if node.target == aten.sum.default:
        return None
    return node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")


@rule(aten.sum.dim_IntList, aten.sum.default)
def _sum(t, node):
    dtype = dtype_of(node)
    work = "f32" if dtype in ("f16", "bf16") else dtype
    x = t.operand(node.args[0], work, None)
    r = t.b.reduce("sum", x, _dims(x, _sum_dims(node)))
    return _keepdim(t, node, t.b.convert(r, dtype))


@rule(aten.mean.dim, aten.mean.default)
def _mean(t, node):
    dtype = dtype_of(node)
    work = "f32" if dtype in ("f16", "bf16") else dtype
    x = t.operand(node.args[0], work, None)
    dims = _dims(x, node.args[1] if len(node.args) > 1 else None)
    r = t.b.reduce("sum", x, dims)
    n = math.prod(x.shape[d] for d in dims)
    r = t.b.binary("div", r, t.b.scalar(work, n if n else float("nan"), r.shape))
    return _keepdim(t, node, t.b.convert(r, dtype))


def _minmax(kind):
    def translate(t, node):
        x = t.value(node.args[0])
        dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
        return _keepdim(t, node, t.b.reduce(kind, x, _dims(x, dims)))

    return translate


RULES[aten.amax.default] = Rule(_minmax("max"))
RULES[aten.amin.default] = Rule(_minmax("min"))


def _any_all(kind):
    def translate(t, node):
        x = t.operand(node.args[0], "bool", None)
        dims = node.args[1] if len(node.args) > 1 else None
        return _keepdim(t, node, t.b.convert(t.b.reduce(kind, x, _dims(x, dims)),
                                             dtype_of(node)))

    return translate


for _t in (aten.any.default, aten.any.dim, aten.any.dims):
    RULES[_t] = Rule(_any_all("any"))
for _t in (aten.all.default, aten.all.dim, aten.all.dims):
    RULES[_t] = Rule(_any_all("all"))


def _var_parts(t, x, dims, correction):
    """(variance, mean) of x over dims, both reduced (without kept dimensions), in x's dtype."""
    n = math.prod(x.shape[d] for d in dims)
    s = t.b.reduce("sum", x, dims)
    mean = t.b.binary("div", s, t.b.scalar(x.dtype, n if n else float("nan"), s.shape))
    kept = [d for d in range(x.rank) if d not in dims]
    c = t.b.binary("sub", x, t.b.broadcast_in_dim(mean, x.shape, kept))
    ss = t.b.reduce("sum", t.b.binary("mul", c, c), dims)
    denom = max(n - correction, 0)
    var = t.b.binary("div", ss, t.b.scalar(x.dtype, denom if denom else float("nan"), ss.shape))
    return var, mean


def _correction(node):
    c = node.kwargs.get("correction")
    return 1 if c is None else c


@rule(aten.var.correction)
def _var(t, node):
    dtype = dtype_of(node)
    x = t.operand(node.args[0], "f32" if dtype in ("f16", "bf16") else dtype, None)
    dims = _dims(x, node.args[1] if len(node.args) > 1 else node.kwargs.get("dim"))
    var, _ = _var_parts(t, x, dims, _correction(node))
    return _keepdim(t, node, t.b.convert(var, dtype))


@rule(aten.var_mean.correction)
def _var_mean(t, node):
    outs = meta(node)
    dtype = TORCH_TO_ASTITCH[outs[0].dtype]
    x = t.operand(node.args[0], "f32" if dtype in ("f16", "bf16") else dtype, None)
    dims = _dims(x, node.args[1] if len(node.args) > 1 else node.kwargs.get("dim"))
    var, mean = _var_parts(t, x, dims, _correction(node))
    return tuple(t.b.reshape(t.b.convert(v, dtype), tuple(o.shape))
                 for v, o in zip((var, mean), outs))


# ---- composite ops that eager computes in f32 ----------------------------------------------------

def _opmath(dtype):
    return "f32" if dtype in ("f16", "bf16") else dtype


def _float_only(node):
    d = dtype_of(node.args[0])
    return None if d in ("f32", "f16", "bf16") else f"{d} input"


@rule(aten._softmax.default, aten._log_softmax.default, supports=_float_only)
def _softmax(t, node):
    dtype, shape = dtype_of(node), shape_of(node)
    x = t.operand(node.args[0], _opmath(dtype), None)
    dim = node.args[1] % max(x.rank, 1)
    if x.rank == 0:
        r = t.b.scalar(x.dtype, 0.0 if node.target == aten._log_softmax.default else 1.0)
        return t.b.convert(r, dtype)
    kept = [d for d in range(x.rank) if d != dim]
    m = t.b.broadcast_in_dim(t.b.reduce("max", x, [dim]), x.shape, kept)
    # a row of -inf keeps NaN as eager does
    shifted = t.b.binary("sub", x, m)
    e = t.b.unary("exp", shifted)
    s = t.b.broadcast_in_dim(t.b.reduce("sum", e, [dim]), x.shape, kept)
    if node.target == aten._log_softmax.default:
        r = t.b.binary("sub", shifted, t.b.unary("log", s))
    else:
        r = t.b.binary("div", e, s)
    return t.b.convert(r, dtype)


@rule(aten.gelu.default, supports=_float_only)
def _gelu(t, node):
    dtype, shape = dtype_of(node), shape_of(node)
    x = t.operand(node.args[0], _opmath(dtype), shape)
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


@rule(aten.silu.default, supports=_float_only)
def _silu(t, node):
    dtype, shape = dtype_of(node), shape_of(node)
    x = t.operand(node.args[0], _opmath(dtype), shape)
    return t.b.convert(t.b.binary("mul", x, t.b.unary("sigmoid", x)), dtype)


@rule(aten.native_layer_norm.default, supports=_float_only)
def _layer_norm(t, node):
    out_meta, mean_meta, rstd_meta = meta(node)
    dtype = TORCH_TO_ASTITCH[out_meta.dtype]
    x = t.operand(node.args[0], _opmath(dtype), None)
    k = len(node.args[1])
    dims = list(range(x.rank - k, x.rank))
    lead = list(range(x.rank - k))
    var, mean = _var_parts(t, x, dims, 0)
    eps = t.b.scalar(x.dtype, node.args[4], var.shape)
    rstd = t.b.unary("rsqrt", t.b.binary("add", var, eps))
    c = t.b.binary("sub", x, t.b.broadcast_in_dim(mean, x.shape, lead))
    y = t.b.binary("mul", c, t.b.broadcast_in_dim(rstd, x.shape, lead))
    for arg, op in ((node.args[2], "mul"), (node.args[3], "add")):
        if arg is not None:
            y = t.b.binary(op, y, t.operand(arg, x.dtype, x.shape))
    stats = [t.b.reshape(t.b.convert(v, TORCH_TO_ASTITCH[m.dtype]), tuple(m.shape))
             for v, m in ((mean, mean_meta), (rstd, rstd_meta))]
    return (t.b.convert(y, dtype), *stats)


def _getitem_supported(node):
    src = node.args[0]
    if not isinstance(src, torch.fx.Node) or not isinstance(meta(src), (tuple, list)):
        return "getitem of a value that is not a tuple of tensors"
    return unsupported_reason(src)


@rule(operator.getitem, supports=_getitem_supported)
def _getitem(t, node):
    return t.value(node.args[0])[node.args[1]]
