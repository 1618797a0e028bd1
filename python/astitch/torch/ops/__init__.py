"""The one op table of the bridge: ATen (and prims) overload -> translation rule.

RULES is filled by the rule modules of this package: elementwise (arithmetic, math functions,
comparisons, selection, conversions, gelu and silu), movement (views, slices, concatenation,
gathers, sources), reductions (sums, extrema, variance, softmax, layer norm, batch norm).

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


class TranslationError(Exception):
    """A node the rules cannot translate after all: its region runs in PyTorch."""


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


# ---- helpers of the rules ----------------------------------------------------------------------

def opmath(dtype):
    return "f32" if dtype in ("f16", "bf16") else dtype


def float_only(node):
    d = dtype_of(node.args[0])
    return None if d in ("f32", "f16", "bf16") else f"{d} input"


def _getitem_supported(node):
    src = node.args[0]
    if not isinstance(src, torch.fx.Node) or not isinstance(meta(src), (tuple, list)):
        return "getitem of a value that is not a tuple of tensors"
    return unsupported_reason(src)


@rule(operator.getitem, supports=_getitem_supported)
def _getitem(t, node):
    v = t.value(node.args[0])[node.args[1]]
    if v is None:
        raise TranslationError(f"output {node.args[1]} of '{node.args[0].name}' is empty")
    return v


# The rules, each module registering its own into RULES.
from . import elementwise, movement, reductions  # noqa: E402,F401
