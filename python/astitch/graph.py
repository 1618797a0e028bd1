"""GraphBuilder: builds an astitch graph in Python and writes it as graph.json text.

The builder knows shapes and dtypes (so that translators can ask a value for them) and checks
only what it needs for that; the C reader and verifier check the rest when the text is
compiled, with messages that name the node. Dtypes are the format's names: f32, f16, bf16,
i32, i64, bool. See docs/graph-format.md.
"""

import json
import math

FLOAT_DTYPES = ("f32", "f16", "bf16")
INT_DTYPES = ("i32", "i64")
DTYPES = FLOAT_DTYPES + INT_DTYPES + ("bool",)
_FLOAT_MAX = {"f32": 3.4028234663852886e38, "f16": 65504.0, "bf16": 3.3895313892515355e38}


class Value:
    """A node of the graph being built: its name, dtype and shape (a tuple of ints)."""

    __slots__ = ("name", "dtype", "shape", "op")

    def __init__(self, name, dtype, shape, op):
        self.name, self.dtype, self.shape, self.op = name, dtype, tuple(shape), op

    @property
    def rank(self):
        return len(self.shape)

    def __repr__(self):
        return f"{self.name}:{self.dtype}{list(self.shape)}"


def _json_number(dtype, v):
    """A constant element in the format's spelling for dtype (out-of-range floats become
    infinities, as rounding to the dtype would make them)."""
    if dtype == "bool":
        return bool(v)
    if dtype in INT_DTYPES:
        return int(v)
    v = float(v)
    if math.isnan(v):
        return "nan"
    if abs(v) > _FLOAT_MAX[dtype]:
        return "inf" if v > 0 else "-inf"
    return v


class GraphBuilder:
    def __init__(self, name="graph", comment=None):
        self.name, self.comment = name, comment
        self.nodes, self.outputs = [], []
        self._count = 0

    def _add(self, op, vdtype, vshape, inputs=(), **attrs):
        """Appends a node (attributes as the format spells them); returns its Value, whose
        dtype and shape are vdtype and vshape."""
        self._count += 1
        name = f"{op}.{self._count}"
        node = {"name": name, "op": op}
        if inputs:
            node["inputs"] = [v.name for v in inputs]
        node.update(attrs)
        self.nodes.append(node)
        return Value(name, vdtype, vshape, op)

    # sources
    def parameter(self, dtype, shape, name=None):
        v = self._add("parameter", dtype, shape, dtype=dtype, shape=list(shape))
        if name:
            self.nodes[-1]["name"] = v.name = f"{name}.{self._count}"
        return v

    def constant(self, dtype, shape, value):
        """A splat constant: every element is value."""
        return self._add("constant", dtype, shape, dtype=dtype, shape=list(shape),
                         value=_json_number(dtype, value))

    def scalar(self, dtype, value, shape=()):
        """value broadcast to shape (a scalar constant, then broadcast_in_dim)."""
        c = self.constant(dtype, (), value)
        return self.broadcast_in_dim(c, shape, ()) if shape else c

    def iota(self, dtype, shape, axis):
        return self._add("iota", dtype, shape, dtype=dtype, shape=list(shape), axis=axis)

    # element-wise
    def unary(self, op, x):
        return self._add(op, x.dtype, x.shape, (x,))

    def binary(self, op, a, b):
        dtype = "bool" if op in ("eq", "ne", "lt", "le", "gt", "ge") else a.dtype
        return self._add(op, dtype, a.shape, (a, b))

    def select(self, pred, on_true, on_false):
        return self._add("select", on_true.dtype, on_true.shape, (pred, on_true, on_false))

    def convert(self, x, dtype):
        if x.dtype == dtype:
            return x
        return self._add("convert", dtype, x.shape, (x,), dtype=dtype)

    # data movement
    def broadcast_in_dim(self, x, shape, dims):
        shape = tuple(shape)
        if x.shape == shape and tuple(dims) == tuple(range(len(shape))):
            return x
        return self._add("broadcast_in_dim", x.dtype, shape, (x,), shape=list(shape),
                         broadcast_dimensions=list(dims))

    def broadcast_to(self, x, shape):
        """PyTorch's broadcasting: x's dimensions align with the last ones of shape."""
        shape = tuple(shape)
        off = len(shape) - x.rank
        return self.broadcast_in_dim(x, shape, range(off, len(shape)))

    def reshape(self, x, shape):
        shape = tuple(shape)
        if x.shape == shape:
            return x
        return self._add("reshape", x.dtype, shape, (x,), shape=list(shape))

    def transpose(self, x, perm):
        perm = list(perm)
        if perm == list(range(x.rank)):
            return x
        return self._add("transpose", x.dtype, [x.shape[p] for p in perm], (x,), permutation=perm)

    def slice(self, x, start, limit, strides):
        shape = [max(0, -(-(l - s) // st)) for s, l, st in zip(start, limit, strides)]
        if (list(start) == [0] * x.rank and list(limit) == list(x.shape)
                and list(strides) == [1] * x.rank):
            return x
        return self._add("slice", x.dtype, shape, (x,), start=list(start), limit=list(limit),
                         strides=list(strides))

    def concatenate(self, xs, axis):
        if len(xs) == 1:
            return xs[0]
        shape = list(xs[0].shape)
        shape[axis] = sum(x.shape[axis] for x in xs)
        return self._add("concatenate", xs[0].dtype, shape, tuple(xs), axis=axis)

    def gather(self, table, indices):
        shape = tuple(indices.shape) + tuple(table.shape[1:])
        return self._add("gather", table.dtype, shape, (table, indices))

    def reduce(self, kind, x, axes):
        axes = sorted(a % x.rank for a in axes) if x.rank else []
        shape = [d for i, d in enumerate(x.shape) if i not in axes]
        return self._add("reduce", x.dtype, shape, (x,), kind=kind, axes=axes)

    # outputs and text
    def output(self, v):
        self.outputs.append(v.name)

    def to_json(self):
        doc = {"format": "astitch-graph", "version": 1, "name": self.name}
        if self.comment:
            doc["comment"] = self.comment
        doc["nodes"] = self.nodes
        doc["outputs"] = self.outputs
        return json.dumps(doc, separators=(",", ":"))
