#!/usr/bin/env python3
"""Writes the example graphs of examples/ in graph.json format (docs/graph-format.md).

Usage:
    gen_examples.py [--out DIR]   write every example into DIR (default: this script's folder)
    gen_examples.py --check       write nothing; exit 1 if a file differs from what would be written

Every graph is built through a small builder that infers and checks each node's dtype and shape
with the same rules as the C builders (equal shapes for element-wise operands, XLA
broadcast_in_dim, reduce, reshape, transpose, dot), so the files are consistent by construction.
Output is deterministic: same script, same bytes. Uses only the Python standard library.
"""

import argparse
import json
import math
import os
import sys

FLOAT = ("f32", "f16", "bf16")
INT = ("i32", "i64")
UNARY_FLOAT = ("exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
               "sin", "cos", "floor", "ceil", "round")
UNARY_NUM = ("neg", "abs", "sign", "relu")
BINARY_NUM = ("add", "sub", "mul", "div", "max", "min", "rem")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")
MAX_RANK = 8
MAX_ELEMENTS = 1 << 40


def elements(shape):
    return math.prod(shape)


class Graph:
    """Nodes in the order they are added; each keeps its inferred dtype and shape."""

    def __init__(self, name, comment):
        self.name = name
        self.comment = comment
        self.nodes = []        # dicts in file order, keys in the order they are written
        self.type = {}         # name -> (dtype, shape)
        self.outputs = []

    # -- internals --------------------------------------------------------------------------

    def _fail(self, name, op, msg):
        raise ValueError(f"{self.name}: node '{name}' ({op}): {msg}")

    def _typeof(self, name, op, operand):
        if operand not in self.type:
            self._fail(name, op, f"unknown operand '{operand}'")
        return self.type[operand]

    def _add(self, name, op, dtype, shape, fields):
        if name in self.type:
            self._fail(name, op, "duplicate name")
        if len(shape) > MAX_RANK:
            self._fail(name, op, f"rank {len(shape)} > {MAX_RANK}")
        if any((not isinstance(d, int)) or d < 0 for d in shape):
            self._fail(name, op, f"bad dims {shape}")
        if elements(shape) > MAX_ELEMENTS:
            self._fail(name, op, f"too many elements {shape}")
        node = {"name": name, "op": op}
        node.update(fields)
        self.nodes.append(node)
        self.type[name] = (dtype, list(shape))
        return name

    # -- sources ----------------------------------------------------------------------------

    def parameter(self, name, shape, dtype="f32"):
        return self._add(name, "parameter", dtype, shape, {"dtype": dtype, "shape": list(shape)})

    def constant(self, name, value, shape=(), dtype="f32"):
        """A splat constant: every element is `value`."""
        if dtype in FLOAT and not math.isfinite(value):
            value = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
        return self._add(name, "constant", dtype, shape,
                         {"dtype": dtype, "shape": list(shape), "value": value})

    def scalar(self, name, value, shape, dtype="f32"):
        """A rank-0 constant `name` broadcast to `shape` as `name`.b, as frameworks emit it;
        returns the broadcast."""
        c = self.constant(name, value, (), dtype)
        return self.broadcast(name + ".b", c, shape, [])

    # -- element-wise -----------------------------------------------------------------------

    def unary(self, op, name, x):
        t, s = self._typeof(name, op, x)
        if op in UNARY_FLOAT and t not in FLOAT:
            self._fail(name, op, f"needs a float operand, got {t}")
        if op in UNARY_NUM and t not in FLOAT + INT:
            self._fail(name, op, f"needs a numeric operand, got {t}")
        if op not in UNARY_FLOAT + UNARY_NUM:
            self._fail(name, op, "not a unary op")
        return self._add(name, op, t, s, {"inputs": [x]})

    def binary(self, op, name, a, b):
        ta, sa = self._typeof(name, op, a)
        tb, sb = self._typeof(name, op, b)
        if sa != sb:
            self._fail(name, op, f"operand shapes differ: {ta}{sa} vs {tb}{sb}")
        if ta != tb:
            self._fail(name, op, f"operand dtypes differ: {ta} vs {tb}")
        if op == "pow" and ta not in FLOAT:
            self._fail(name, op, "pow needs float operands")
        elif op in BINARY_NUM and ta not in FLOAT + INT:
            self._fail(name, op, "needs numeric operands")
        elif op not in BINARY_NUM + COMPARE + ("pow",):
            self._fail(name, op, "not a binary op")
        return self._add(name, op, "bool" if op in COMPARE else ta, sa, {"inputs": [a, b]})

    def add(self, name, a, b):
        return self.binary("add", name, a, b)

    def sub(self, name, a, b):
        return self.binary("sub", name, a, b)

    def mul(self, name, a, b):
        return self.binary("mul", name, a, b)

    def div(self, name, a, b):
        return self.binary("div", name, a, b)

    def convert(self, name, x, dtype):
        t, s = self._typeof(name, "convert", x)
        if dtype not in FLOAT + INT + ("bool",):
            self._fail(name, "convert", f"unknown dtype {dtype}")
        return self._add(name, "convert", dtype, s, {"inputs": [x], "dtype": dtype})

    # -- data movement ----------------------------------------------------------------------

    def broadcast(self, name, x, shape, dims):
        """XLA broadcast_in_dim: operand dim i becomes output dim dims[i]."""
        t, s = self._typeof(name, "broadcast_in_dim", x)
        op = "broadcast_in_dim"
        if len(dims) != len(s):
            self._fail(name, op, f"{len(dims)} broadcast_dimensions for rank {len(s)}")
        if len(set(dims)) != len(dims) or any(d < 0 or d >= len(shape) for d in dims):
            self._fail(name, op, f"bad broadcast_dimensions {dims} for rank {len(shape)}")
        if list(dims) != sorted(dims):
            self._fail(name, op, f"broadcast_dimensions {dims} not increasing")
        for i, d in enumerate(dims):
            if s[i] != 1 and s[i] != shape[d]:
                self._fail(name, op, f"operand dim {i} = {s[i]} cannot become {shape[d]}")
        return self._add(name, op, t, shape, {"inputs": [x], "shape": list(shape),
                                              "broadcast_dimensions": list(dims)})

    def reshape(self, name, x, shape):
        t, s = self._typeof(name, "reshape", x)
        if elements(s) != elements(shape):
            self._fail(name, "reshape", f"{s} and {list(shape)} differ in element count")
        return self._add(name, "reshape", t, shape, {"inputs": [x], "shape": list(shape)})

    def transpose(self, name, x, perm):
        t, s = self._typeof(name, "transpose", x)
        if sorted(perm) != list(range(len(s))):
            self._fail(name, "transpose", f"{perm} is not a permutation of rank {len(s)}")
        return self._add(name, "transpose", t, [s[p] for p in perm],
                         {"inputs": [x], "permutation": list(perm)})

    # -- reductions and compute-intensive ops -----------------------------------------------

    def reduce(self, kind, name, x, axes):
        t, s = self._typeof(name, "reduce", x)
        if len(set(axes)) != len(axes) or any(a < 0 or a >= len(s) for a in axes):
            self._fail(name, "reduce", f"bad axes {axes} for rank {len(s)}")
        if kind in ("sum", "prod", "max", "min") and t not in FLOAT + INT:
            self._fail(name, "reduce", f"{kind} needs a numeric operand")
        if kind in ("any", "all") and t != "bool":
            self._fail(name, "reduce", f"{kind} needs a bool operand")
        out = [d for i, d in enumerate(s) if i not in axes]
        return self._add(name, "reduce", t, out,
                         {"kind": kind, "inputs": [x], "axes": list(axes)})

    def dot(self, name, a, b, lhs_batch, rhs_batch, lhs_contract, rhs_contract):
        """XLA DotGeneral: output is batch dims, then lhs free dims, then rhs free dims."""
        ta, sa = self._typeof(name, "dot", a)
        tb, sb = self._typeof(name, "dot", b)
        if ta != tb or ta not in FLOAT + INT:
            self._fail(name, "dot", f"operand dtypes {ta}, {tb}")
        if len(lhs_batch) != len(rhs_batch) or len(lhs_contract) != len(rhs_contract):
            self._fail(name, "dot", "dimension lists of different lengths")
        for l, r in zip(lhs_batch + lhs_contract, rhs_batch + rhs_contract):
            if sa[l] != sb[r]:
                self._fail(name, "dot", f"lhs dim {l} = {sa[l]} vs rhs dim {r} = {sb[r]}")
        for used, rank in ((lhs_batch + lhs_contract, len(sa)), (rhs_batch + rhs_contract, len(sb))):
            if len(set(used)) != len(used) or any(d < 0 or d >= rank for d in used):
                self._fail(name, "dot", f"bad dimension numbers {used}")
        lfree = [d for i, d in enumerate(sa) if i not in lhs_batch + lhs_contract]
        rfree = [d for i, d in enumerate(sb) if i not in rhs_batch + rhs_contract]
        out = [sa[i] for i in lhs_batch] + lfree + rfree
        fields = {"inputs": [a, b]}
        if lhs_batch:  # batch dims are optional in the format: written only when present
            fields.update(lhs_batch_dims=list(lhs_batch), rhs_batch_dims=list(rhs_batch))
        fields.update(lhs_contracting_dims=list(lhs_contract),
                      rhs_contracting_dims=list(rhs_contract))
        return self._add(name, "dot", ta, out, fields)

    def matmul(self, name, a, b):
        """[m,k] x [k,n] -> [m,n]."""
        return self.dot(name, a, b, [], [], [1], [0])

    # -- outputs and writing ----------------------------------------------------------------

    def output(self, *names):
        for n in names:
            if n not in self.type or n in self.outputs:
                raise ValueError(f"{self.name}: bad output '{n}'")
            self.outputs.append(n)

    def shape(self, name):
        return list(self.type[name][1])

    def check(self):
        """Every node is an output or feeds one; the graph has outputs."""
        if not self.outputs:
            raise ValueError(f"{self.name}: no outputs")
        used = set(self.outputs)
        for node in self.nodes:
            used.update(node.get("inputs", []))
        dead = [n["name"] for n in self.nodes if n["name"] not in used]
        if dead:
            raise ValueError(f"{self.name}: nodes used by nothing: {dead}")

    def text(self):
        self.check()
        head = {"format": "astitch-graph", "version": 1, "name": self.name,
                "comment": self.comment}
        lines = ["{"]
        for k, v in head.items():
            lines.append(f"  {json.dumps(k)}: {json.dumps(v)},")
        lines.append('  "nodes": [')
        for i, node in enumerate(self.nodes):
            sep = "," if i + 1 < len(self.nodes) else ""
            lines.append("    " + json.dumps(node, allow_nan=False) + sep)
        lines.append("  ],")
        lines.append(f'  "outputs": {json.dumps(self.outputs)}')
        lines.append("}")
        return "\n".join(lines) + "\n"


# ---- shared pieces ---------------------------------------------------------------------------

def layernorm(g, p, x, gamma, beta, eps):
    """Layer normalization of x over its last axis, names prefixed by p; returns the result."""
    s = g.shape(x)
    rows, r = s[:-1], len(s) - 1
    keep = list(range(r))
    n = g.scalar(p + "n", float(s[-1]), rows)
    mean = g.div(p + "mean", g.reduce("sum", p + "sum", x, [r]), n)
    cen = g.sub(p + "centered", x, g.broadcast(p + "mean.b", mean, s, keep))
    sq = g.mul(p + "squared", cen, cen)
    var = g.div(p + "var", g.reduce("sum", p + "sqsum", sq, [r]), n)
    ve = g.add(p + "var_eps", var, g.scalar(p + "eps", eps, rows))
    rstd = g.unary("rsqrt", p + "rstd", ve)
    norm = g.mul(p + "normalized", cen, g.broadcast(p + "rstd.b", rstd, s, keep))
    scaled = g.mul(p + "scaled", norm, g.broadcast(p + "gamma.b", gamma, s, [r]))
    return g.add(p + "out", scaled, g.broadcast(p + "beta.b", beta, s, [r]))


def bias_add(g, name, x, bias):
    """x + bias broadcast along the last axis of x."""
    s = g.shape(x)
    return g.add(name, x, g.broadcast(bias + ".b", bias, s, [len(s) - 1]))


def gelu_erf(g, p, h):
    """GELU in its exact form, 0.5 * h * (1 + erf(h / sqrt(2))), as in BERT."""
    s = g.shape(h)
    t = g.mul(p + "scaled", h, g.scalar(p + "rsqrt2", 1.0 / math.sqrt(2.0), s))
    e = g.unary("erf", p + "erf", t)
    onep = g.add(p + "one_plus", e, g.scalar(p + "one", 1.0, s))
    half = g.mul(p + "half_x", h, g.scalar(p + "half", 0.5, s))
    return g.mul(p + "out", half, onep)


def softmax_last(g, p, x):
    """Numerically stable softmax over the last axis of x."""
    s = g.shape(x)
    r = len(s) - 1
    keep = list(range(r))
    mx = g.reduce("max", p + "max", x, [r])
    sh = g.sub(p + "shifted", x, g.broadcast(p + "max.b", mx, s, keep))
    e = g.unary("exp", p + "exp", sh)
    sm = g.reduce("sum", p + "sum", e, [r])
    return g.div(p + "probs", e, g.broadcast(p + "sum.b", sm, s, keep))


def additive_mask(g, p, mask):
    """BERT's mask adder from a bool mask (true for a token): (1 - float(mask)) * -10000, on
    the mask's own shape."""
    s = g.shape(mask)
    m = g.convert(p + "float", mask, "f32")
    inv = g.sub(p + "inverted", g.scalar(p + "one", 1.0, s), m)
    return g.mul(p + "adder", inv, g.scalar(p + "neg_big", -10000.0, s))


BERT_BATCH = 200  # the paper's Table 2: BERT inference batch size
BERT_SEQ = 128
BERT_HIDDEN = 768
BERT_HEADS = 12
BERT_HEAD_DIM = 64
BERT_FFN = 3072
BERT_EPS = 1e-12  # layer_norm_eps of the released BERT models


# ---- the examples ----------------------------------------------------------------------------
# Each takes its dimensions as keyword arguments (defaults: the shapes of the committed file) so
# that small copies of the same graph can be checked numerically.

def ex_layernorm(B=BERT_BATCH, S=BERT_SEQ, H=BERT_HIDDEN):
    g = Graph("layernorm",
              "BERT layer normalization over the hidden axis. Batch 200 is the BERT inference "
              "batch of the AStitch paper's Table 2; sequence length 128 and hidden size 768 are "
              "BERT-base's. eps 1e-12 as in BERT. Two row reductions (mean, variance) each "
              "followed by a broadcast back to the activation shape.")
    x = g.parameter("x", [B, S, H])
    gamma = g.parameter("gamma", [H])
    beta = g.parameter("beta", [H])
    g.output(layernorm(g, "", x, gamma, beta, BERT_EPS))
    return g


def ex_softmax(B=BERT_BATCH, N=BERT_HEADS, S=BERT_SEQ, D=BERT_HEAD_DIM):
    g = Graph("softmax",
              "Masked attention softmax of BERT-base: scores [batch, heads, query, key] = "
              "[200, 12, 128, 128] (batch 200 from the paper's Table 2 BERT inference, 12 heads, "
              "sequence 128), scaled by 1/sqrt(64), plus the additive mask (1 - mask) * -10000 "
              "computed on the bool padding mask [200, 1, 1, 128] (true for a token) converted "
              "to f32, broadcast over heads and queries, then a "
              "max-subtracted softmax over the key axis.")
    full = [B, N, S, S]
    scores = g.parameter("scores", full)
    mask = g.parameter("mask", [B, 1, 1, S], "bool")
    scaled = g.mul("scaled", scores, g.scalar("scale", 1.0 / math.sqrt(D), full))
    adder = additive_mask(g, "mask_", mask)
    masked = g.add("masked", scaled, g.broadcast("mask_adder.b", adder, full, [0, 1, 2, 3]))
    g.output(softmax_last(g, "softmax_", masked))
    return g


def ex_gelu_bias(B=BERT_BATCH, S=BERT_SEQ, F=BERT_FFN):
    g = Graph("gelu_bias",
              "Bias add and GELU (erf form) after BERT-base's FFN up-projection: "
              "[200, 128, 3072], batch 200 from the paper's Table 2 BERT inference, sequence 128, "
              "intermediate size 3072. Pure element-wise chain with one broadcast of the bias.")
    x = g.parameter("x", [B, S, F])
    bias = g.parameter("bias", [F])
    h = bias_add(g, "biased", x, bias)
    g.output(gelu_erf(g, "gelu_", h))
    return g


def ex_fig5():
    g = Graph("fig5_power_broadcast_add",
              "The AStitch paper's Figure 5: power<2> - broadcast<2,128> - add<2,128>, where "
              "op<m,n> is an op on a tensor of shape [m,n]. Each power result is needed by 128 "
              "add elements: the one-to-many dependency that the regional scheme serves from "
              "shared memory. The exponent is a constant 2 of power's shape; the add's second "
              "operand is a parameter [2,128] (the figure shows only one operand).")
    p1 = g.parameter("parameter.1", [2])
    c1 = g.constant("constant.1", 2.0, [2])
    pw = g.binary("pow", "power.1", p1, c1)
    b1 = g.broadcast("broadcast.1", pw, [2, 128], [0])
    p2 = g.parameter("parameter.2", [2, 128])
    g.output(g.add("add.1", b1, p2))
    return g


def ex_fig7(R=1024, C=512):
    g = Graph("fig7_subgraph",
              "The AStitch paper's Figure 7(a), reconstructed from sections 3.2.2 and 4.3 (the "
              "figure itself is not in the text). Facts used: XLA forms 4 kernels ending at "
              "reduce.1, power.1, reduce.2, multiply.1, so reduce.1 and power.1 feed other ops "
              "and power.1 feeds a broadcast; the path between reduce.1 and power.1 is add.1 - "
              "broadcast.1 - parameter.2 - divide.1, read as the undirected chain reduce.1 <- "
              "add.1 <- broadcast.1 <- parameter.2 -> divide.1 -> power.1; parameter.2 is loaded "
              "by two XLA kernels (through broadcast.1 for reduce.1, directly by divide.1), and "
              "so is broadcast.2 (by reduce.2 and multiply.1), which lies in both their groups "
              "unless they are merged; multiply.1 is a stitch-op output. reduce.1 is a row "
              "reduce whose [rows] result is consumed row-aligned in its own group (regional); "
              "reduce.2 is a column reduce of power.1's broadcast, so power.1 and reduce.2 fail "
              "block locality (global). The exponent constant.1 and the shapes are ours: 1024 "
              "rows (8 sequences x 128 tokens) of 512 (Transformer-base d_model).")
    p1 = g.parameter("parameter.1", [R, C])
    p2 = g.parameter("parameter.2", [R])
    b1 = g.broadcast("broadcast.1", p2, [R, C], [0])
    a1 = g.add("add.1", p1, b1)
    r1 = g.reduce("sum", "reduce.1", a1, [1])
    d1 = g.div("divide.1", r1, p2)
    c1 = g.constant("constant.1", 2.0, [R])
    pw = g.binary("pow", "power.1", d1, c1)
    b2 = g.broadcast("broadcast.2", pw, [R, C], [0])
    r2 = g.reduce("sum", "reduce.2", b2, [0])
    m1 = g.mul("multiply.1", b2, p1)
    g.output(r2, m1)
    return g


def ex_dien_row_reduce(R=750000, C=32):
    g = Graph("dien_row_reduce",
              "Row reduce <750000, 32> -> <750000> from the DIEN model, the paper's Figure 6(a) "
              "(section 2.3.2): 750000 rows of only 32 elements give XLA 750000 blocks of 32 "
              "threads; AStitch packs 32 rows into one 1024-thread block. The element-wise "
              "product before the sum (an inner product of two 32-wide embeddings per row) is "
              "our addition, so the reduce has a fused producer.")
    a = g.parameter("a", [R, C])
    b = g.parameter("b", [R, C])
    p = g.mul("product", a, b)
    g.output(g.reduce("sum", "row_sum", p, [1]))
    return g


def ex_transformer_row_reduce(R=64, C=30000):
    g = Graph("transformer_row_reduce",
              "Row reduce <64, 30000> -> <64> from a Transformer model, the paper's Figure 6(b) "
              "(section 2.3.2): only 64 rows give XLA 64 blocks of 1024 threads while a V100 can "
              "run 160; AStitch splits each row over several blocks with a cross-block atomic "
              "(section 3.3). 30000 is of the order of a Transformer vocabulary.")
    x = g.parameter("x", [R, C])
    g.output(g.reduce("sum", "row_sum", x, [1]))
    return g


def ex_layernorm_backward(T=4096, H=1024):
    g = Graph("layernorm_backward",
              "Layer normalization backward over [tokens, hidden] = [4096, 1024]: 4096 is the "
              "Transformer training batch (tokens) of the paper's Table 2, 1024 the hidden size "
              "of Transformer-big. mean and rstd = 1/sqrt(var + eps) are the values saved by the "
              "forward pass. dx needs two row reductions (over hidden); dgamma and dbeta are "
              "column reductions (over tokens) of the same operands, so row and column reduces "
              "meet in one subgraph.")
    dy = g.parameter("dy", [T, H])
    x = g.parameter("x", [T, H])
    mean = g.parameter("mean", [T])
    rstd = g.parameter("rstd", [T])
    gamma = g.parameter("gamma", [H])
    s = [T, H]
    xc = g.sub("centered", x, g.broadcast("mean.b", mean, s, [0]))
    rstd_b = g.broadcast("rstd.b", rstd, s, [0])
    xhat = g.mul("xhat", xc, rstd_b)
    dbeta = g.reduce("sum", "dbeta", dy, [0])
    dgamma = g.reduce("sum", "dgamma", g.mul("dy_xhat", dy, xhat), [0])
    gy = g.mul("g", dy, g.broadcast("gamma.b", gamma, s, [1]))
    inv_n = g.scalar("inv_n", 1.0 / H, [T])
    mean_g = g.mul("mean_g", g.reduce("sum", "sum_g", gy, [1]), inv_n)
    mean_gx = g.mul("mean_gx", g.reduce("sum", "sum_gx", g.mul("g_xhat", gy, xhat), [1]), inv_n)
    t1 = g.sub("g_centered", gy, g.broadcast("mean_g.b", mean_g, s, [0]))
    t2 = g.mul("xhat_mean_gx", xhat, g.broadcast("mean_gx.b", mean_gx, s, [0]))
    dx = g.mul("dx", g.sub("dxhat", t1, t2), rstd_b)
    g.output(dx, dgamma, dbeta)
    return g


def ex_batchnorm_train(N=32, Hh=56, W=56, C=256):
    g = Graph("batchnorm_train",
              "Batch normalization, training forward, NHWC [32, 56, 56, 256]: the output of "
              "ResNet-50's first bottleneck stage (56x56, 256 channels) at batch 32. Batch "
              "statistics are column reductions over N, H and W (the channel axis is innermost "
              "in memory); eps 0.001 as in TensorFlow. Outputs the normalized tensor and the "
              "batch mean and (biased) variance.")
    s = [N, Hh, W, C]
    x = g.parameter("x", s)
    gamma = g.parameter("gamma", [C])
    beta = g.parameter("beta", [C])
    count = g.scalar("count", float(N * Hh * W), [C])
    mean = g.div("mean", g.reduce("sum", "sum", x, [0, 1, 2]), count)
    xc = g.sub("centered", x, g.broadcast("mean.b", mean, s, [3]))
    var = g.div("var", g.reduce("sum", "sqsum", g.mul("squared", xc, xc), [0, 1, 2]), count)
    rstd = g.unary("rsqrt", "rstd", g.add("var_eps", var, g.scalar("eps", 1e-3, [C])))
    xhat = g.mul("normalized", xc, g.broadcast("rstd.b", rstd, s, [3]))
    y = g.mul("scaled", xhat, g.broadcast("gamma.b", gamma, s, [3]))
    y = g.add("out", y, g.broadcast("beta.b", beta, s, [3]))
    g.output(y, mean, var)
    return g


def ex_bert_layer(B=8, S=BERT_SEQ, N=BERT_HEADS, D=BERT_HEAD_DIM, F=BERT_FFN):
    H = N * D
    T = B * S
    g = Graph("bert_layer",
              "One BERT-base encoder layer (hidden 768, 12 heads x 64, FFN 3072, eps 1e-12) at "
              "batch 8 x sequence 128, inference (no dropout). Matmuls are dot ops on the "
              "flattened [1024, 768] activations, as TensorFlow's BERT computes them; the "
              "memory-intensive regions between the dots (bias adds, head reshapes/transposes, "
              "scale + mask + softmax, residual + layernorm, bias + GELU) are what stitching "
              "works on. attention_mask is a bool [batch, seq], true for tokens, false for padding.")
    x = g.parameter("x", [B, S, H])
    mask = g.parameter("attention_mask", [B, S], "bool")
    w = {}
    for n in ("q", "k", "v", "o"):
        w["w" + n] = g.parameter("w" + n, [H, H])
        w["b" + n] = g.parameter("b" + n, [H])
    ln1_gamma, ln1_beta = g.parameter("ln1_gamma", [H]), g.parameter("ln1_beta", [H])
    w1, b1 = g.parameter("w1", [H, F]), g.parameter("b1", [F])
    w2, b2 = g.parameter("w2", [F, H]), g.parameter("b2", [H])
    ln2_gamma, ln2_beta = g.parameter("ln2_gamma", [H]), g.parameter("ln2_beta", [H])

    x2 = g.reshape("x2d", x, [T, H])
    heads = {}
    for n in ("q", "k", "v"):
        proj = bias_add(g, n + "_biased", g.matmul(n + "_proj", x2, w["w" + n]), w["b" + n])
        split = g.reshape(n + "_split", proj, [B, S, N, D])
        heads[n] = g.transpose(n + "_heads", split, [0, 2, 1, 3])      # [B, N, S, D]

    full = [B, N, S, S]
    scores = g.dot("scores", heads["q"], heads["k"], [0, 1], [0, 1], [3], [3])  # Q K^T
    scaled = g.mul("scores_scaled", scores, g.scalar("scale", 1.0 / math.sqrt(D), full))
    adder = additive_mask(g, "mask_", mask)
    masked = g.add("scores_masked", scaled, g.broadcast("mask_adder.b", adder, full, [0, 3]))
    probs = softmax_last(g, "softmax_", masked)
    ctx = g.dot("context", probs, heads["v"], [0, 1], [0, 1], [3], [2])  # [B, N, S, D]
    merged = g.transpose("context_merged", ctx, [0, 2, 1, 3])            # [B, S, N, D]
    ctx2 = g.reshape("context2d", merged, [T, H])

    attn = bias_add(g, "attn_biased", g.matmul("attn_proj", ctx2, w["wo"]), w["bo"])
    ln1 = layernorm(g, "ln1_", g.add("attn_residual", attn, x2), ln1_gamma, ln1_beta, BERT_EPS)

    up = bias_add(g, "ffn_biased", g.matmul("ffn_up", ln1, w1), b1)
    act = gelu_erf(g, "gelu_", up)
    down = bias_add(g, "ffn_down_biased", g.matmul("ffn_down", act, w2), b2)
    ln2 = layernorm(g, "ln2_", g.add("ffn_residual", down, ln1), ln2_gamma, ln2_beta, BERT_EPS)
    g.output(g.reshape("y", ln2, [B, S, H]))
    return g


EXAMPLES = [ex_layernorm, ex_softmax, ex_gelu_bias, ex_fig5, ex_fig7, ex_dien_row_reduce,
            ex_transformer_row_reduce, ex_layernorm_backward, ex_batchnorm_train, ex_bert_layer]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="Write the example graphs of examples/.")
    ap.add_argument("--out", default=here, help="folder to write into (default: %(default)s)")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a file in --out differs from its generated text")
    args = ap.parse_args()
    stale = []
    for make in EXAMPLES:
        g = make()
        text = g.text()
        path = os.path.join(args.out, g.name + ".json")
        if args.check:
            try:
                with open(path, encoding="utf-8") as f:
                    same = f.read() == text
            except OSError:
                same = False
            if not same:
                stale.append(path)
        else:
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
            print(f"{path}: {len(g.nodes)} nodes, outputs " +
                  ", ".join(f"{o} {g.type[o][0]}{g.type[o][1]}" for o in g.outputs))
    if stale:
        print("out of date (run gen_examples.py): " + " ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
