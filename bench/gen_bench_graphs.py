#!/usr/bin/env python3
"""Writes the benchmark suite: bench/graphs/*.json, small copies in bench/graphs/small/, and the
suite lists bench/suites/{full,smoke,selfcheck,layers,wholelayers}.txt.

Usage:
    gen_bench_graphs.py           write everything
    gen_bench_graphs.py --check   write nothing; exit 1 if a file differs from what would be written

The graphs are the memory-intensive subgraphs of the AStitch paper's five workloads at their
production shapes (Table 2 batch sizes), training backward graphs, RMSNorm, softmax with long
rows and an element-wise chain from tiny (launch-bound) to 1 GiB (bandwidth-bound); and (suite
layers, also in full) the memory-intensive regions of BERT-base, GPT-2, Llama-2-7B and ViT-B/16
layers and of a ResNet-50 block at production shapes, one region between two matmuls (or
convolutions) per file, forward and backward (bench/check_layer_graphs.py checks some of them
against numpy); and (suite wholelayers, also
in full) whole GPT-2 small and Llama-2-7B (bf16) layers with their matmuls as dot ops, next to
examples/bert_layer.json, at token counts the reference interpreter runs in seconds. Every
examples/*.json is in the full suite by path. Each graph is built by the builder of
examples/gen_examples.py (shapes and dtypes checked as the C builders check them); its "comment"
says where the shapes come from. The small copies (same structure, tiny shapes) are what
peers.py --self-check runs on a CPU. Deterministic; standard library only.
"""

import argparse
import glob
import math
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")
sys.path.insert(0, EXAMPLES)
import gen_examples as gx  # noqa: E402  (the builder and the examples' own generators)
from gen_examples import Graph, layernorm, softmax_last  # noqa: E402

BERT_B, BERT_S, BERT_H = 200, 128, 768          # Table 2 BERT inference batch; BERT-base
TOKENS, D_BIG, HEADS_BIG, SEQ_T = 4096, 1024, 16, 128  # Table 2 Transformer training batch
DIEN_B, DIEN_H, DIEN_T = 256, 36, 100           # Table 2 DIEN batch; DIEN's GRU size, history


# ---- ops the examples' builder lacks, checked the same way ------------------------------------

def iota(g, name, shape, axis, dtype="i32"):
    if not 0 <= axis < len(shape):
        g._fail(name, "iota", f"axis {axis} out of range for rank {len(shape)}")
    return g._add(name, "iota", dtype, shape, {"dtype": dtype, "shape": list(shape), "axis": axis})


def select(g, name, pred, a, b):
    (tp, sp), (ta, sa), (tb, sb) = (g._typeof(name, "select", x) for x in (pred, a, b))
    if tp != "bool" or ta != tb or not sp == sa == sb:
        g._fail(name, "select", f"bad operands {tp}{sp}, {ta}{sa}, {tb}{sb}")
    return g._add(name, "select", ta, sa, {"inputs": [pred, a, b]})


def logical(g, op, name, *xs):
    """and / or of two operands, not of one: bool or integer, of one type."""
    types = [g._typeof(name, op, x) for x in xs]
    if len(xs) != (1 if op == "not" else 2) or op not in ("and", "or", "not"):
        g._fail(name, op, "not a logical op of this arity")
    if any(t != types[0] for t in types) or types[0][0] not in ("bool", "i32", "i64"):
        g._fail(name, op, f"bad operands {types}")
    return g._add(name, op, types[0][0], types[0][1], {"inputs": list(xs)})


def slice_last(g, name, x, start, limit):
    """x[..., start:limit]."""
    t, s = g._typeof(name, "slice", x)
    if not 0 <= start <= limit <= s[-1]:
        g._fail(name, "slice", f"bad range {start}:{limit} of {s[-1]}")
    return g._add(name, "slice", t, s[:-1] + [limit - start],
                  {"inputs": [x], "start": [0] * (len(s) - 1) + [start],
                   "limit": s[:-1] + [limit]})


# ---- the workload subgraphs -------------------------------------------------------------------

def bert_residual_layernorm(B=BERT_B, S=BERT_S, H=BERT_H):
    g = Graph("bert_residual_layernorm",
              "BERT-base attention output: bias add, residual add and layer normalization over "
              "[200, 128, 768]: batch 200 is the BERT inference batch of the AStitch paper's "
              "Table 2, sequence 128, hidden 768; eps 1e-12 as in BERT.")
    s = [B, S, H]
    h, res = g.parameter("dense_out", s), g.parameter("residual", s)
    bias, gamma, beta = g.parameter("bias", [H]), g.parameter("gamma", [H]), g.parameter("beta", [H])
    biased = gx.bias_add(g, "biased", h, bias)
    g.output(layernorm(g, "ln_", g.add("summed", biased, res), gamma, beta, 1e-12))
    return g


def transformer_residual_layernorm(T=TOKENS, H=D_BIG):
    g = Graph("transformer_residual_layernorm",
              "Transformer training, residual add (dropout-free) and layer normalization over "
              "[tokens, hidden] = [4096, 1024]: 4096 tokens is the Transformer training batch "
              "of the paper's Table 2, 1024 the hidden size of Transformer-big; eps 1e-6. "
              "Outputs the result and the saved mean and rstd for the backward pass.")
    s = [T, H]
    x, res = g.parameter("x", s), g.parameter("residual", s)
    gamma, beta = g.parameter("gamma", [H]), g.parameter("beta", [H])
    h = g.add("summed", x, res)
    n = g.scalar("n", float(H), [T])
    mean = g.div("mean", g.reduce("sum", "sum", h, [1]), n)
    cen = g.sub("centered", h, g.broadcast("mean.b", mean, s, [0]))
    var = g.div("var", g.reduce("sum", "sqsum", g.mul("sq", cen, cen), [1]), n)
    rstd = g.unary("rsqrt", "rstd", g.add("var_eps", var, g.scalar("eps", 1e-6, [T])))
    y = g.mul("normalized", cen, g.broadcast("rstd.b", rstd, s, [0]))
    y = g.mul("scaled", y, g.broadcast("gamma.b", gamma, s, [1]))
    g.output(g.add("out", y, g.broadcast("beta.b", beta, s, [1])), mean, rstd)
    return g


def transformer_causal_softmax(N=TOKENS // SEQ_T, Hd=HEADS_BIG, S=SEQ_T):
    g = Graph("transformer_causal_softmax",
              "Transformer-big decoder self-attention in training: scores [sequences, heads, "
              "query, key] = [32, 16, 128, 128], i.e. the 4096-token training batch of the "
              "paper's Table 2 as 32 sequences of 128 tokens, 16 heads; scaled by 1/sqrt(64), "
              "causal mask from two iotas (key <= query), masked to -1e9, softmax over keys.")
    s = [N, Hd, S, S]
    x = g.parameter("scores", s)
    scaled = g.mul("scaled", x, g.scalar("scale", 0.125, s))
    keep = g.binary("le", "causal", iota(g, "key_pos", s, 3), iota(g, "query_pos", s, 2))
    masked = select(g, "masked", keep, scaled, g.scalar("neg_big", -1e9, s))
    g.output(softmax_last(g, "softmax_", masked))
    return g


def softmax_backward(N=TOKENS // SEQ_T, Hd=HEADS_BIG, S=SEQ_T):
    g = Graph("softmax_backward",
              "Softmax backward of Transformer-big attention in training, [32, 16, 128, 128] "
              "(the 4096-token batch of the paper's Table 2 as 32 sequences of 128): "
              "dx = y * (dy - sum(dy * y over keys)), y the saved probabilities.")
    s = [N, Hd, S, S]
    y, dy = g.parameter("probs", s), g.parameter("dprobs", s)
    dot = g.reduce("sum", "row_dot", g.mul("dy_y", dy, y), [3])
    diff = g.sub("diff", dy, g.broadcast("row_dot.b", dot, s, [0, 1, 2]))
    g.output(g.mul("dscores", y, diff))
    return g


def dien_augru_gates(B=DIEN_B, H=DIEN_H):
    g = Graph("dien_augru_gates",
              "DIEN's AUGRU cell, the element-wise part of one time step at batch 256 (the DIEN "
              "batch of the paper's Table 2), GRU size 36 (DIEN's hidden units): gate inputs "
              "x W and h U [256, 108] from the two matmuls, sliced into reset, update and new "
              "gates; the update gate is scaled by the attention score; launch-bound.")
    xw, hu = g.parameter("x_gates", [B, 3 * H]), g.parameter("h_gates", [B, 3 * H])
    h, att = g.parameter("h", [B, H]), g.parameter("attention", [B])

    def part(name, x, i):
        return slice_last(g, name, x, i * H, (i + 1) * H)
    r = g.unary("sigmoid", "reset", g.add("r_in", part("xr", xw, 0), part("hr", hu, 0)))
    u = g.unary("sigmoid", "update", g.add("u_in", part("xu", xw, 1), part("hu", hu, 1)))
    u = g.mul("update_att", u, g.broadcast("attention.b", att, [B, H], [0]))
    n = g.unary("tanh", "new", g.add("n_in", part("xn", xw, 2), g.mul("rh", r, part("hn", hu, 2))))
    keep = g.mul("keep", g.sub("one_minus_u", g.scalar("one", 1.0, [B, H]), u), h)
    g.output(g.add("h_next", keep, g.mul("take", u, n)))
    return g


def dien_attention_softmax(B=DIEN_B, T=DIEN_T):
    g = Graph("dien_attention_softmax",
              "DIEN's attention over the user's behavior history: scores [256, 100] (batch 256 "
              "of the paper's Table 2, history length 100 as in DIEN's public code), padded "
              "positions set to -2^32 + 1 as DIEN does, softmax over the history.")
    x, mask = g.parameter("scores", [B, T]), g.parameter("valid", [B, T], "bool")
    pad = g.scalar("padding", -4294967295.0, [B, T])
    masked = select(g, "masked", mask, x, pad)
    g.output(softmax_last(g, "softmax_", masked))
    return g


def asr_feature_norm(T=512, F=80):
    g = Graph("asr_feature_norm",
              "ASR input features, batch 1 (the ASR inference batch of the paper's Table 2): "
              "[1, 512, 80] log-mel filterbanks (80 mel bins, 512 frames: about 5 s at a 10 ms "
              "hop), per-utterance mean and variance normalization over time (column "
              "reductions over frames); launch-bound.")
    s = [1, T, F]
    x = g.parameter("fbank", s)
    n = g.scalar("frames", float(T), [1, F])
    mean = g.div("mean", g.reduce("sum", "sum", x, [1]), n)
    cen = g.sub("centered", x, g.broadcast("mean.b", mean, s, [0, 2]))
    var = g.div("var", g.reduce("sum", "sqsum", g.mul("sq", cen, cen), [1]), n)
    rstd = g.unary("rsqrt", "rstd", g.add("var_eps", var, g.scalar("eps", 1e-5, [1, F])))
    g.output(g.mul("normalized", cen, g.broadcast("rstd.b", rstd, s, [0, 2])))
    return g


def crnn_lstm_cell(H=256):
    g = Graph("crnn_lstm_cell",
              "CRNN's bidirectional LSTM, the element-wise part of one cell step at batch 1 "
              "(the CRNN inference batch of the paper's Table 2), 256 hidden units as in CRNN: "
              "the gate pre-activations [1, 1024] sliced into i, f, g, o; outputs h and c; "
              "launch-bound.")
    z, c = g.parameter("gates", [1, 4 * H]), g.parameter("c", [1, H])

    def gate(name, i, op):
        return g.unary(op, name, slice_last(g, name + "_in", z, i * H, (i + 1) * H))
    i, f = gate("input", 0, "sigmoid"), gate("forget", 1, "sigmoid")
    cand, o = gate("cell", 2, "tanh"), gate("output", 3, "sigmoid")
    c2 = g.add("c_next", g.mul("keep", f, c), g.mul("write", i, cand))
    g.output(g.mul("h_next", o, g.unary("tanh", "c_tanh", c2)), c2)
    return g


def crnn_ctc_log_softmax(T=26, C=37):
    g = Graph("crnn_ctc_log_softmax",
              "CRNN's per-frame class scores before CTC, batch 1 (paper's Table 2): 26 frames "
              "(a 100-pixel-wide text line) x 37 classes (36 alphanumerics + blank), as in "
              "CRNN; log-softmax over classes; launch-bound.")
    s = [T, 1, C]
    x = g.parameter("logits", s)
    mx = g.reduce("max", "max", x, [2])
    sh = g.sub("shifted", x, g.broadcast("max.b", mx, s, [0, 1]))
    lse = g.unary("log", "log_sum", g.reduce("sum", "sum", g.unary("exp", "exp", sh), [2]))
    g.output(g.sub("log_probs", sh, g.broadcast("log_sum.b", lse, s, [0, 1])))
    return g


def rmsnorm(dtype, R=4096, H=4096):
    g = Graph(f"rmsnorm_{dtype}",
              f"RMSNorm as in LLaMA over [4096, 4096] {dtype} (4096 tokens, hidden 4096 of "
              "LLaMA-7B): x converted to f32, x * rsqrt(mean(x^2) + 1e-6), converted back, "
              "times the weight in the input dtype.")
    s = [R, H]
    x, w = g.parameter("x", s, dtype), g.parameter("weight", [H], dtype)
    xf = g.convert("x_f32", x, "f32") if dtype != "f32" else x
    ms = g.div("mean_sq", g.reduce("sum", "sqsum", g.mul("sq", xf, xf), [1]),
               g.scalar("n", float(H), [R]))
    rstd = g.unary("rsqrt", "rstd", g.add("ms_eps", ms, g.scalar("eps", 1e-6, [R])))
    y = g.mul("normalized", xf, g.broadcast("rstd.b", rstd, s, [0]))
    y = g.convert("normalized_in", y, dtype) if dtype != "f32" else y
    g.output(g.mul("out", y, g.broadcast("weight.b", w, s, [1])))
    return g


def long_softmax(rows, cols, source):
    g = Graph(f"softmax_{cols // 1024}k",
              f"Softmax with long rows: [{rows}, {cols}], {source}; few rows, so one block per "
              "row leaves most of the GPU idle unless rows are split across blocks.")
    g.output(softmax_last(g, "softmax_", g.parameter("logits", [rows, cols])))
    return g


def eltwise_chain(name, shape, what):
    g = Graph(name,
              f"Element-wise chain x * sigmoid(1.702 x) (the QuickGELU of GPT-2 and CLIP) on "
              f"f32{list(shape)}: {what}.")
    x = g.parameter("x", list(shape))
    t = g.mul("scaled", x, g.scalar("k", 1.702, list(shape)))
    g.output(g.mul("out", x, g.unary("sigmoid", "gate", t)))
    return g


def tiny_layernorm(R=8, H=64):
    g = Graph("layernorm_8x64",
              "Layer normalization over [8, 64]: a tiny, launch-bound shape (eps 1e-5).")
    x, gamma, beta = g.parameter("x", [R, H]), g.parameter("gamma", [H]), g.parameter("beta", [H])
    g.output(layernorm(g, "", x, gamma, beta, 1e-5))
    return g


# ---- transformer layers at production shapes (suite layers) ----------------------------------
# One graph per memory-intensive region of a layer, as a framework hands it to a fusion compiler:
# what lies between two matmuls is one region, the outputs of the matmuls around it (attention's
# batched matmuls included) are parameters, and what it passes on (to the next matmul, the
# residual stream or the backward pass) are outputs. Named <model>_<pass>_<region>. Dropout is
# left out (eval mode, or p = 0: the format has no random op).

BERT_TRAIN_B = 32          # BERT fine-tuning batch 32 x max sequence 128 (the BERT paper's GLUE)
GPT2_B, GPT2_S = 8, 1024   # GPT-2 small at its full 1024-token context, batch 8
LLAMA_T = 4096             # Llama-2-7B prefill of one 4096-token sequence (its context length)
VIT_B, VIT_GRID = 64, 14   # ViT-B/16 at 224x224: 14x14 patches + [CLS] = 197 tokens, batch 64

M_SQRT1_2 = 0.70710678118654752440   # the constants of torch._decomp's gelu_backward
M_2_SQRTPI = 1.12837916709551257390
M_SQRT2 = 1.41421356237309504880
GELU_KAPPA = 0.044715


def concatenate(g, name, xs, axis):
    types = [g._typeof(name, "concatenate", x) for x in xs]
    t0, s0 = types[0]
    for t, s in types[1:]:
        if t != t0 or len(s) != len(s0) or \
                any(a != b for i, (a, b) in enumerate(zip(s, s0)) if i != axis):
            g._fail(name, "concatenate", f"operands {t0}{s0} and {t}{s} do not fit on axis {axis}")
    out = list(s0)
    out[axis] = sum(s[axis] for _, s in types)
    return g._add(name, "concatenate", t0, out, {"inputs": list(xs), "axis": axis})


def layernorm_stats(g, p, x, gamma, beta, eps):
    """torch.native_layer_norm as torch._refs decomposes it (var_mean without correction,
    rstd = rsqrt(var + eps), (x - mean) * rstd * weight + bias); the same op sequence as
    gen_examples.layernorm, which it calls. Returns (out, mean, rstd): what autograd saves."""
    return layernorm(g, p, x, gamma, beta, eps), p + "mean", p + "rstd"


def layernorm_flax(g, p, x, scale, bias, eps):
    """flax.linen.LayerNorm (use_fast_variance): mean and mean of squares from two sibling
    reductions of x, var = max(0, mean2 - mean^2), mul = rsqrt(var + eps) * scale,
    out = (x - mean) * mul + bias."""
    s = g.shape(x)
    rows, r = s[:-1], len(s) - 1
    keep = list(range(r))
    n = g.scalar(p + "n", float(s[-1]), rows)
    mean = g.div(p + "mean", g.reduce("sum", p + "sum", x, [r]), n)
    mean2 = g.div(p + "mean2", g.reduce("sum", p + "sqsum", g.mul(p + "sq", x, x), [r]), n)
    var = g.sub(p + "var_fast", mean2, g.mul(p + "mean_sq", mean, mean))
    var = g.binary("max", p + "var", var, g.scalar(p + "zero", 0.0, rows))
    rstd = g.unary("rsqrt", p + "rstd", g.add(p + "var_eps", var, g.scalar(p + "eps", eps, rows)))
    mul = g.mul(p + "mul", g.broadcast(p + "rstd.b", rstd, s, keep),
                g.broadcast(p + "scale.b", scale, s, [r]))
    y = g.mul(p + "normalized", g.sub(p + "centered", x, g.broadcast(p + "mean.b", mean, s, keep)),
              mul)
    return g.add(p + "out", y, g.broadcast(p + "bias.b", bias, s, [r]))


def gelu_tanh_tf(g, p, h):
    """GELU, tanh form, as OpenAI's GPT-2 code writes it:
    0.5*x*(1+tf.tanh(np.sqrt(2/np.pi)*(x+0.044715*tf.pow(x, 3))))."""
    s = g.shape(h)
    half = g.mul(p + "half_x", g.scalar(p + "half", 0.5, s), h)
    cube = g.binary("pow", p + "cube", h, g.scalar(p + "three", 3.0, s))
    kappa = g.scalar(p + "kappa", GELU_KAPPA, s)
    inner = g.add(p + "inner", h, g.mul(p + "kappa_cube", kappa, cube))
    k = g.scalar(p + "k", math.sqrt(2 / math.pi), s)
    t = g.unary("tanh", p + "tanh", g.mul(p + "scaled", k, inner))
    return g.mul(p + "out", half, g.add(p + "one_plus", g.scalar(p + "one", 1.0, s), t))


def gelu_tanh_jax(g, p, h):
    """jax.nn.gelu(approximate=True): cdf = 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x**3)));
    x * cdf, x**3 being lax.integer_pow, which XLA expands to two multiplies."""
    s = g.shape(h)
    cube = g.mul(p + "cube", g.mul(p + "square", h, h), h)
    kappa = g.scalar(p + "kappa", GELU_KAPPA, s)
    inner = g.add(p + "inner", h, g.mul(p + "kappa_cube", kappa, cube))
    k = g.scalar(p + "k", math.sqrt(2 / math.pi), s)
    t = g.unary("tanh", p + "tanh", g.mul(p + "scaled", k, inner))
    cdf = g.mul(p + "cdf", g.scalar(p + "half", 0.5, s),
                g.add(p + "one_plus", g.scalar(p + "one", 1.0, s), t))
    return g.mul(p + "out", h, cdf)


def region_bias_residual_ln(name, comment, T, H, eps):
    """dense output + bias + residual, then LayerNorm (torch); outputs out, mean and rstd."""
    g = Graph(name, comment)
    s = [T, H]
    dense, res = g.parameter("dense_out", s), g.parameter("residual", s)
    bias = g.parameter("bias", [H])
    gamma, beta = g.parameter("gamma", [H]), g.parameter("beta", [H])
    summed = g.add("summed", gx.bias_add(g, "biased", dense, bias), res)
    g.output(*layernorm_stats(g, "ln_", summed, gamma, beta, eps))
    return g


def region_layernorm_backward(name, comment, T, H, residual_grad=False):
    """torch._decomp's native_layer_norm_backward on [T, H]: xhat = (x - mean) * rstd,
    gxhat = dy * gamma, dx = rstd / H * (H * gxhat - sum(gxhat) - xhat * sum(gxhat * xhat)),
    dgamma = sum(dy * xhat over tokens), dbeta = sum(dy over tokens). With residual_grad the
    gradient arriving through the residual branch is added to dx (pre-LN blocks)."""
    g = Graph(name, comment)
    s = [T, H]
    dy, x = g.parameter("dy", s), g.parameter("x", s)
    mean, rstd = g.parameter("mean", [T]), g.parameter("rstd", [T])
    gamma = g.parameter("gamma", [H])
    dres = g.parameter("dresidual", s) if residual_grad else None
    xhat = g.mul("xhat", g.sub("centered", x, g.broadcast("mean.b", mean, s, [0])),
                 g.broadcast("rstd.b", rstd, s, [0]))
    gxhat = g.mul("grad_xhat", dy, g.broadcast("gamma.b", gamma, s, [1]))
    a = g.mul("a", gxhat, g.scalar("n", float(H), s))
    b = g.reduce("sum", "b", gxhat, [1])
    c2 = g.reduce("sum", "c2", g.mul("c1", gxhat, xhat), [1])
    c3 = g.mul("c3", xhat, g.broadcast("c2.b", c2, s, [0]))
    inner = g.sub("inner", g.sub("a_b", a, g.broadcast("b.b", b, s, [0])), c3)
    rstd_n = g.div("rstd_n", rstd, g.scalar("n_rows", float(H), [T]))
    dx = g.mul("dx", g.broadcast("rstd_n.b", rstd_n, s, [0]), inner)
    if residual_grad:
        dx = g.add("dx_total", dres, dx)
    dgamma = g.reduce("sum", "dgamma", g.mul("dy_xhat", dy, xhat), [0])
    g.output(dx, dgamma, g.reduce("sum", "dbeta", dy, [0]))
    return g


def region_gelu_backward(name, comment, T, F, approximate):
    """dh = dy * gelu'(x + bias) as torch._decomp's gelu_backward computes it (approximate
    'none' or 'tanh'), with the bias gradient sum(dh over tokens); x + bias is recomputed from
    the saved matmul output rather than stored (what a min-cut partitioner does)."""
    g = Graph(name, comment)
    s = [T, F]
    dy, x, bias = g.parameter("dy", s), g.parameter("x", s), g.parameter("bias", [F])
    h = gx.bias_add(g, "h", x, bias)
    if approximate == "none":
        cdf = g.mul("cdf", g.scalar("half", 0.5, s), g.add(
            "one_plus_erf", g.scalar("one", 1.0, s),
            g.unary("erf", "erf", g.mul("h_alpha", h, g.scalar("alpha", M_SQRT1_2, s)))))
        e = g.unary("exp", "gauss", g.mul("h_sq_half", g.mul("h_sq", h, h),
                                          g.scalar("minus_half", -0.5, s)))
        pdf = g.mul("pdf", g.scalar("beta", M_2_SQRTPI * M_SQRT1_2 * 0.5, s), e)
        deriv = g.add("deriv", cdf, g.mul("h_pdf", h, pdf))
    else:
        k_beta = g.scalar("k_beta", M_SQRT2 * M_2_SQRTPI * 0.5, s)
        half, one = g.scalar("half", 0.5, s), g.scalar("one", 1.0, s)
        x_sq = g.mul("h_sq", h, h)
        x_cube = g.mul("h_cube", x_sq, h)
        inner = g.mul("inner", k_beta, g.add(
            "h_plus", h, g.mul("kappa_cube", g.scalar("kappa", GELU_KAPPA, s), x_cube)))
        t = g.unary("tanh", "tanh_inner", inner)
        left = g.mul("left", half, h)
        right = g.add("right", one, t)
        left_d = g.mul("left_derivative", half, right)
        one_m = g.sub("sech_sq", one, g.mul("tanh_sq", t, t))
        r = g.mul("right_derivative_beta", g.mul("right_derivative_sech", left, one_m), k_beta)
        poly = g.add("poly", one, g.mul("kappa3_sq", g.scalar("kappa3", 3 * GELU_KAPPA, s), x_sq))
        deriv = g.add("deriv", left_d, g.mul("right_derivative", r, poly))
    dh = g.mul("dh", dy, deriv)
    g.output(dh, g.reduce("sum", "dbias", dh, [0]))
    return g


def region_bias_gelu(name, comment, T, F, gelu):
    g = Graph(name, comment)
    x, bias = g.parameter("x", [T, F]), g.parameter("bias", [F])
    g.output(gelu(g, "gelu_", gx.bias_add(g, "h", x, bias)))
    return g


def region_scaled_softmax(name, comment, B, N, S, D, mask=False):
    """scores / sqrt(D) (+ an additive mask [B, 1, 1, S]), softmax over keys (torch._decomp's
    _softmax: amax, exp of the difference, divide by the sum)."""
    g = Graph(name, comment)
    s = [B, N, S, S]
    x = g.parameter("scores", s)
    m = g.parameter("attention_mask", [B, 1, 1, S]) if mask else None
    scaled = g.div("scaled", x, g.scalar("sqrt_d", math.sqrt(D), s))
    if mask:
        scaled = g.add("masked", scaled, g.broadcast("attention_mask.b", m, s, [0, 1, 2, 3]))
    g.output(softmax_last(g, "softmax_", scaled))
    return g


BERT_BASE = ("BERT-base (hidden 768, 12 heads x 64, FFN 3072, LayerNorm eps 1e-12, f32) at "
             "batch 32 x sequence 128 (the BERT paper's fine-tuning batch and length); ops as "
             "Hugging Face transformers' PyTorch BertLayer lowers them (torch._decomp "
             "decompositions, the Linear bias add left out of the matmul as Inductor unfuses it "
             "before a pointwise consumer and as TF/Flax Dense emit it)")


def bert_fwd_attn_softmax(B=BERT_TRAIN_B, N=12, S=128, D=64):
    return region_scaled_softmax(
        "bert_base_fwd_attn_softmax",
        BERT_BASE + ". Forward, between the Q K^T and probs V batched matmuls (BertSelfAttention):"
        " scores [32, 12, 128, 128] / sqrt(64) + attention_mask, then softmax over keys. "
        "attention_mask [32, 1, 1, 128] is the extended additive padding mask, (1 - mask) * "
        "finfo.min (-10000 in older releases), computed once per model and shared by the layers.",
        B, N, S, D, mask=True)


def bert_fwd_attn_out_ln(T=BERT_TRAIN_B * 128, H=768):
    return region_bias_residual_ln(
        "bert_base_fwd_attn_out_ln",
        BERT_BASE + ". Forward, between the attention output projection and the FFN "
        "up-projection (BertSelfOutput): LayerNorm(dense_out + bias + residual) over [4096, 768] "
        "tokens x hidden, eps 1e-12; outputs the result and the mean and rstd that "
        "native_layer_norm saves for the backward pass.", T, H, 1e-12)


def bert_fwd_ffn_gelu(T=BERT_TRAIN_B * 128, F=3072):
    return region_bias_gelu(
        "bert_base_fwd_ffn_gelu",
        BERT_BASE + ". Forward, between the FFN up- and down-projections (BertIntermediate): "
        "x [4096, 3072] + bias, then GELU in its erf form (hidden_act 'gelu'), as torch._decomp "
        "writes it: h * 0.5 * (1 + erf(h * M_SQRT1_2)).", T, F, gx.gelu_erf)


def bert_fwd_ffn_out_ln(T=BERT_TRAIN_B * 128, H=768):
    return region_bias_residual_ln(
        "bert_base_fwd_ffn_out_ln",
        BERT_BASE + ". Forward, between the FFN down-projection and the next layer's Q/K/V "
        "projections (BertOutput): LayerNorm(dense_out + bias + residual) over [4096, 768], "
        "the residual being the attention block's LayerNorm output, eps 1e-12; outputs the "
        "result and the saved mean and rstd.", T, H, 1e-12)


def bert_bwd_layernorm(T=BERT_TRAIN_B * 128, H=768):
    return region_layernorm_backward(
        "bert_base_bwd_layernorm",
        BERT_BASE + ". Training backward of a LayerNorm over [4096, 768] (either of the "
        "layer's two), as torch._decomp's native_layer_norm_backward computes it: dy arrives "
        "from the next matmul's input gradient; x is the saved LayerNorm input, mean and rstd "
        "the saved statistics [4096], gamma [768]; outputs dx (row reductions over hidden), "
        "dgamma and dbeta (column reductions over tokens).", T, H)


def bert_bwd_ffn_gelu(T=BERT_TRAIN_B * 128, F=3072):
    return region_gelu_backward(
        "bert_base_bwd_ffn_gelu",
        BERT_BASE + ". Training backward between the FFN down-projection's input gradient "
        "dy [4096, 3072] and the up-projection's weight/input gradient matmuls: "
        "dh = dy * gelu'(x + bias) with gelu_backward(approximate='none') of torch._decomp "
        "(cdf = 0.5 * (1 + erf(h / sqrt 2)), pdf = exp(-h^2 / 2) / sqrt(2 pi), dy * (cdf + h * "
        "pdf)), x the saved up-projection output, plus the bias gradient sum(dh over the 4096 "
        "tokens) [3072].", T, F, "none")


def bert_bwd_attn_softmax(B=BERT_TRAIN_B, N=12, S=128, D=64):
    g = Graph("bert_base_bwd_attn_softmax",
              BERT_BASE + ". Training backward between the probs V matmul's gradient dprobs "
              "[32, 12, 128, 128] and the Q K^T matmul's gradients: softmax backward "
              "dx = y * (dy - sum(dy * y over keys)) (PyTorch's and TensorFlow's softmax "
              "gradient kernels), y the saved probabilities, then the gradient of the "
              "division by sqrt(64). The additive mask has no gradient.")
    s = [B, N, S, S]
    y, dy = g.parameter("probs", s), g.parameter("dprobs", s)
    dot = g.reduce("sum", "row_dot", g.mul("dy_y", dy, y), [3])
    diff = g.sub("diff", dy, g.broadcast("row_dot.b", dot, s, [0, 1, 2]))
    dx = g.mul("dsoftmax", y, diff)
    g.output(g.div("dscores", dx, g.scalar("sqrt_d", math.sqrt(D), s)))
    return g


GPT2 = ("GPT-2 small (hidden 768, 12 heads x 64, FFN 3072, LayerNorm eps 1e-5, f32) at batch 8 x "
        "its 1024-token context")
GPT2_FWD = GPT2 + ("; forward ops as OpenAI's gpt-2 src/model.py (TensorFlow) writes them, "
                   "conv1d being tf.matmul + b")
GPT2_BWD = GPT2 + ("; training backward as torch._decomp computes it for Hugging Face's "
                   "GPT2Block (LayerNorm eps 1e-5, gelu_new = the tanh form)")


def gpt2_fwd_causal_softmax(B=GPT2_B, N=12, S=GPT2_S, D=64):
    g = Graph("gpt2_fwd_causal_softmax",
              GPT2_FWD + ". Forward, between the Q K^T and probs V batched matmuls: "
              "w [8, 12, 1024, 1024] * rsqrt(64); attention_mask(nd, ns): b = float(i >= j) from "
              "two iotas [1024, 1024] (query i, key j; nd = ns), mask_attn_weights: "
              "w * b - 1e10 * (1 - b), the mask broadcast over batch and heads; softmax over keys "
              "(x - max, exp, divide by the sum).")
    s, plane = [B, N, S, S], [S, S]
    w = g.parameter("scores", s)
    scaled = g.mul("scaled", w, g.scalar("rsqrt_d", 1.0 / math.sqrt(D), s))
    keep = g.binary("ge", "causal", iota(g, "query_pos", plane, 0), iota(g, "key_pos", plane, 1))
    b = g.convert("keep", keep, "f32")
    fill = g.mul("fill", g.scalar("big", 1e10, plane),
                 g.sub("dropped", g.scalar("one", 1.0, plane), b))
    kept = g.mul("kept", scaled, g.broadcast("keep.b", b, s, [2, 3]))
    masked = g.sub("masked", kept, g.broadcast("fill.b", fill, s, [2, 3]))
    g.output(softmax_last(g, "softmax_", masked))
    return g


def gpt2_train_fwd_attn(B=GPT2_B, N=12, S=GPT2_S, D=64):
    g = Graph("gpt2_train_fwd_attn",
              GPT2 + "; the forward attention region of a training step as the PyTorch bridge "
              "receives it from AOTAutograd (torch 2.11, Hugging Face's GPT2Attention, eager "
              "attention), between the Q K^T and probs V batched matmuls: scores [96, 1024, "
              "1024] / sqrt(64); the causal mask from two i64 iotas (key - query <= 0, and-ed "
              "with a broadcast true, as tril of ones traces) and negated, an output saved for "
              "the backward; where(mask, finfo(f32).min, scores) with the mask broadcast over "
              "batch and heads; softmax over keys; v, the last third of c_attn's output [8192, "
              "2304], split into heads and transposed for the probs V matmul, an output.")
    s, plane = [B, N, S, S], [S, S]
    qkv = g.parameter("qkv", [B * S, 3 * N * D])
    scores = g.reshape("scores.4d", g.parameter("scores", [B * N, S, S]), s)
    scaled = g.div("scaled", scores, g.scalar("sqrt_d", math.sqrt(D), s))
    pos = iota(g, "pos", [S], 0, "i64")
    query = g.broadcast("query.b", g.reshape("query", pos, [S, 1]), plane, [0, 1])
    key = g.broadcast("key.b", g.reshape("key", pos, [1, S]), plane, [0, 1])
    ahead = g.binary("le", "causal", g.sub("offset", key, query), g.scalar("zero", 0, plane, "i64"))
    allowed = logical(g, "and", "allowed", ahead, g.scalar("all", True, plane, "bool"))
    mask = logical(g, "not", "mask", allowed)
    masked = select(g, "masked", g.broadcast("mask.b", mask, s, [2, 3]),
                    g.scalar("min_f32", -3.4028234663852886e38, s), scaled)
    v = slice_last(g, "v", g.reshape("qkv.3d", qkv, [B, S, 3 * N * D]), 2 * N * D, 3 * N * D)
    v_heads = g.transpose("v.t", g.reshape("v.heads", v, [B, S, N, D]), [0, 2, 1, 3])
    g.output(mask)
    g.output(v_heads)
    g.output(softmax_last(g, "softmax_", masked))
    return g


def gpt2_train_bwd_bias_grads(B=GPT2_B, S=GPT2_S, H=768):
    g = Graph("gpt2_train_bwd_bias_grads",
              GPT2 + "; a backward region of a training step as the PyTorch bridge receives it "
              "from AOTAutograd (torch 2.11, the GPT2Block of tests/python/models.py), node for "
              "node: the bias gradients of the four linears, each sum(dy, 0, keepdim=True) of "
              "the output gradient viewed as [8192, N] (mlp c_proj 768, c_fc 3072, attn c_proj "
              "768, c_attn 2304), then reshaped to [1, N]; and both layer norms' weight and "
              "bias gradients over batch and sequence: sum(dy * xhat) and sum(dy), ln_2's xhat "
              "saved, ln_1's recomputed from the saved mean and rstd [8, 1024, 1].")
    T, s3 = B * S, [B, S, H]

    def bias_grad(name, dy, n):
        flat = g.reshape(name + ".flat", dy, [T, n])
        return g.reshape(name, g.reduce("sum", name + ".sum", flat, [0]), [1, n])

    def ln_grads(prefix, dy, xhat):
        dy3 = g.reshape(prefix + "dy.a", dy, s3)
        return (g.reduce("sum", prefix + "dweight", g.mul(prefix + "dy_xhat", dy3, xhat), [0, 1]),
                g.reduce("sum", prefix + "dbias", g.reshape(prefix + "dy.b", dy, s3), [0, 1]))

    mlp_proj = bias_grad("mlp_c_proj.dbias", g.parameter("mlp_c_proj.dy", s3), H)
    fc = bias_grad("c_fc.dbias", g.parameter("c_fc.dy", [B, S, 4 * H]), 4 * H)
    ln2 = ln_grads("ln_2.", g.parameter("ln_2.dy", [T, H]), g.parameter("ln_2.xhat", s3))
    attn_proj = bias_grad("attn_c_proj.dbias", g.parameter("attn_c_proj.dy", s3), H)
    attn = bias_grad("c_attn.dbias", g.parameter("c_attn.dy", [B, S, 3 * H]), 3 * H)
    dy1, x1 = g.parameter("ln_1.dy", [T, H]), g.parameter("ln_1.x", s3)
    mean, rstd = g.parameter("ln_1.mean", [B, S, 1]), g.parameter("ln_1.rstd", [B, S, 1])
    centered = g.sub("ln_1.centered", x1, g.broadcast("ln_1.mean.b", mean, s3, [0, 1, 2]))
    xhat1 = g.mul("ln_1.xhat", centered, g.broadcast("ln_1.rstd.b", rstd, s3, [0, 1, 2]))
    ln1 = ln_grads("ln_1.", dy1, xhat1)
    g.output(mlp_proj, fc, *ln2, attn_proj, attn, *ln1)
    return g


def gpt2_fwd_attn_out_ln(T=GPT2_B * GPT2_S, H=768):
    g = Graph("gpt2_fwd_attn_out_ln",
              GPT2_FWD + ". Forward, between the attention's c_proj and the MLP's c_fc matmuls "
              "(pre-LN block): a = c_proj output [8192, 768] + b; x = x + a (the residual "
              "stream, an output); ln_2 = norm(x): u = mean(x), s = mean(square(x - u)), "
              "(x - u) * rsqrt(s + 1e-5) * g + b, over hidden.")
    s = [T, H]
    a, x = g.parameter("c_proj_out", s), g.parameter("x", s)
    bias, gamma, beta = g.parameter("bias", [H]), g.parameter("g", [H]), g.parameter("b", [H])
    h = g.add("residual_out", x, gx.bias_add(g, "a", a, bias))
    g.output(h, layernorm(g, "ln_2_", h, gamma, beta, 1e-5))
    return g


def gpt2_fwd_mlp_gelu(T=GPT2_B * GPT2_S, F=3072):
    return region_bias_gelu(
        "gpt2_fwd_mlp_gelu",
        GPT2_FWD + ". Forward, between the MLP's c_fc and c_proj matmuls: c_fc output "
        "[8192, 3072] + b, then gelu(x) = 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*pow(x, 3)))).",
        T, F, gelu_tanh_tf)


def gpt2_bwd_layernorm(T=GPT2_B * GPT2_S, H=768):
    return region_layernorm_backward(
        "gpt2_bwd_layernorm",
        GPT2_BWD + ". Training backward of ln_2 over [8192, 768], between the c_fc input "
        "gradient dy and the attention c_proj's gradient matmuls: native_layer_norm_backward "
        "(x the saved input, mean and rstd [8192], gamma [768]), and, the block being pre-LN, "
        "x's gradient through the residual branch added to dx; outputs dx, dgamma, dbeta.",
        T, H, residual_grad=True)


def gpt2_bwd_mlp_gelu(T=GPT2_B * GPT2_S, F=3072):
    return region_gelu_backward(
        "gpt2_bwd_mlp_gelu",
        GPT2_BWD + ". Training backward between the MLP c_proj's input gradient dy [8192, 3072] "
        "and c_fc's gradient matmuls: dh = dy * gelu'(x + b) with gelu_backward("
        "approximate='tanh') of torch._decomp (kBeta = sqrt(2/pi), kKappa = 0.044715: "
        "0.5 * (1 + tanh(inner)) + 0.5 h (1 - tanh^2) kBeta (1 + 3 kKappa h^2)), x the saved "
        "c_fc output, and the bias gradient sum(dh over the 8192 tokens) [3072].",
        T, F, "tanh")


LLAMA = ("Llama-2-7B (hidden 4096, 32 heads x 128, intermediate 11008, RMSNorm eps 1e-6, bf16 "
         "weights and activations) on one 4096-token sequence (prefill at its full context); ops "
         "as Hugging Face's LlamaDecoderLayer, bf16 storage with the arithmetic in f32 between "
         "converts, rounded once to bf16 (as Inductor upcasts bf16 pointwise math)")


def llama_rmsnorm(g, p, h, weight, eps):
    """LlamaRMSNorm of bf16 h over its last axis: h.to(float32), variance = mean(h^2),
    h * rsqrt(variance + eps), .to(bf16), then weight * that (a bf16 multiply)."""
    s = g.shape(h)
    rows, r = s[:-1], len(s) - 1
    keep = list(range(r))
    hf = g.convert(p + "h_f32", h, "f32")
    var = g.div(p + "variance", g.reduce("sum", p + "sqsum", g.mul(p + "sq", hf, hf), [r]),
                g.scalar(p + "n", float(s[-1]), rows))
    rstd = g.unary("rsqrt", p + "rstd", g.add(p + "var_eps", var, g.scalar(p + "eps", eps, rows)))
    normed = g.mul(p + "normalized", hf, g.broadcast(p + "rstd.b", rstd, s, keep))
    normed = g.convert(p + "normalized_bf16", normed, "bf16")
    return g.mul(p + "out", g.broadcast(weight + ".b", weight, s, [r]), normed)


def llama_fwd_residual_rmsnorm(T=LLAMA_T, H=4096, name="llama2_7b_fwd_residual_rmsnorm",
                               model=LLAMA):
    g = Graph(name,
              model + ". Forward, between the attention o_proj and the MLP's gate/up "
              f"projections: h = residual + o_proj output [{T}, {H}] (bf16 add; the residual "
              "stream, an output), then LlamaRMSNorm: h.to(float32), variance = mean(h^2), "
              "h * rsqrt(variance + 1e-6), .to(bf16), weight * that.")
    s = [T, H]
    res, attn = g.parameter("residual", s, "bf16"), g.parameter("o_proj_out", s, "bf16")
    w = g.parameter("weight", [H], "bf16")
    h = g.add("residual_out", res, attn)
    g.output(h, llama_rmsnorm(g, "", h, w, 1e-6))
    return g


def llama_fwd_rotary(T=LLAMA_T, N=32, D=128):
    g = Graph("llama2_7b_fwd_rotary",
              LLAMA + ". Forward, between the q_proj/k_proj matmuls and attention: the outputs "
              "[4096, 4096] viewed as [tokens, heads, head_dim] = [4096, 32, 128] (the layout of "
              "vLLM's and FlashAttention's rotary kernels; HF applies the same element-wise math "
              "after a transpose to heads first), apply_rotary_pos_emb in its rotate-half form: "
              "rotate_half(x) = cat(-x[..., 64:], x[..., :64]), x * cos + rotate_half(x) * sin, "
              "for q and k (32 KV heads: no grouped-query attention in the 7B model), with the "
              "cos and sin tables [4096, 128] (bf16, theta 10000, halves repeated) of the "
              "sequence's positions broadcast over heads.")
    hs = [T, N * D]
    s = [T, N, D]
    q, k = g.parameter("q_proj_out", hs, "bf16"), g.parameter("k_proj_out", hs, "bf16")
    cos, sin = g.parameter("cos", [T, D], "bf16"), g.parameter("sin", [T, D], "bf16")
    cos_b = g.broadcast("cos.b", g.convert("cos_f32", cos, "f32"), s, [0, 2])
    sin_b = g.broadcast("sin.b", g.convert("sin_f32", sin, "f32"), s, [0, 2])
    outs = []
    for p, x in (("q", q), ("k", k)):
        xf = g.convert(p + "_f32", g.reshape(p + "_heads", x, s), "f32")
        x1 = slice_last(g, p + "_x1", xf, 0, D // 2)
        x2 = slice_last(g, p + "_x2", xf, D // 2, D)
        rot = concatenate(g, p + "_rotated", [g.unary("neg", p + "_neg_x2", x2), x1], 2)
        emb = g.add(p + "_embed", g.mul(p + "_cos", xf, cos_b), g.mul(p + "_sin", rot, sin_b))
        outs.append(g.convert(p + "_rot", emb, "bf16"))
    g.output(*outs)
    return g


def llama_fwd_silu_gate(T=LLAMA_T, F=11008):
    g = Graph("llama2_7b_fwd_silu_gate",
              LLAMA + ". Forward, between the MLP's gate/up projections and down_proj "
              "(LlamaMLP): act_fn(gate_proj(x)) * up_proj(x) with act_fn SiLU, x * sigmoid(x) "
              "(torch._decomp's silu), on [4096, 11008].")
    s = [T, F]
    gate, up = g.parameter("gate_proj_out", s, "bf16"), g.parameter("up_proj_out", s, "bf16")
    gf, uf = g.convert("gate_f32", gate, "f32"), g.convert("up_f32", up, "f32")
    silu = g.mul("silu", gf, g.unary("sigmoid", "sigmoid", gf))
    g.output(g.convert("out", g.mul("gated", silu, uf), "bf16"))
    return g


def llama_bwd_rmsnorm(T=LLAMA_T, H=4096, name="llama2_7b_bwd_rmsnorm", model=LLAMA):
    g = Graph(name,
              model + ". Training backward of LlamaRMSNorm (llama_rmsnorm above) as autograd "
              "differentiates its ops, between the gradients of the next matmuls and of the "
              f"residual: dy [{T}, {H}] (bf16), the saved input h (bf16) and rstd [{T}] (f32); "
              "dweight = sum over tokens of dy * normalized (the bf16 product, summed in f32), "
              "dn = (dy * weight).to(float32), drstd = sum(dn * h) per token, dvar = -0.5 * "
              f"drstd * rstd^3, dh = dn * rstd + h * 2 * dvar / {H}, .to(bf16).")
    s = [T, H]
    dy, h = g.parameter("dy", s, "bf16"), g.parameter("h", s, "bf16")
    rstd, w = g.parameter("rstd", [T]), g.parameter("weight", [H], "bf16")
    hf = g.convert("h_f32", h, "f32")
    normed = g.convert("normalized_bf16",
                       g.mul("normalized", hf, g.broadcast("rstd.b", rstd, s, [0])), "bf16")
    dweight = g.reduce("sum", "dweight",
                       g.convert("dy_normed_f32", g.mul("dy_normed", dy, normed), "f32"), [0])
    dn = g.convert("dn", g.mul("dy_weight", dy, g.broadcast("weight.b", w, s, [1])), "f32")
    drstd = g.reduce("sum", "drstd", g.mul("dn_h", dn, hf), [1])
    r3 = g.mul("rstd3", g.mul("rstd2", rstd, rstd), rstd)
    dvar = g.mul("dvar", g.mul("drstd_r3", drstd, r3), g.scalar("minus_half", -0.5, [T]))
    coef = g.div("coef", g.mul("dvar2", dvar, g.scalar("two", 2.0, [T])),
                 g.scalar("n", float(H), [T]))
    dh = g.add("dh_f32", g.mul("dn_rstd", dn, g.broadcast("rstd.b2", rstd, s, [0])),
               g.mul("h_coef", hf, g.broadcast("coef.b", coef, s, [0])))
    g.output(g.convert("dh", dh, "bf16"), dweight)
    return g


# Llama-2-13B and -70B: the same decoder layer at a wider hidden size, whose norms' rows (5120
# and 8192 elements) are longer than any other region's here; their RMSNorm regions, forward and
# backward, as above. Both models share Llama-2-7B's 4096-token context.
LLAMA_13B = ("Llama-2-13B (hidden 5120, 40 heads x 128, intermediate 13824, RMSNorm eps 1e-6, "
             "bf16 weights and activations) on one 4096-token sequence (prefill at its full "
             "context); ops as Hugging Face's LlamaDecoderLayer, as for Llama-2-7B")
LLAMA_70B = ("Llama-2-70B (hidden 8192, 64 query heads and 8 key/value heads x 128, intermediate "
             "28672, RMSNorm eps 1e-6, bf16 weights and activations) on one 4096-token sequence "
             "(prefill at its full context); ops as Hugging Face's LlamaDecoderLayer, as for "
             "Llama-2-7B")


def llama13b_fwd_residual_rmsnorm(T=LLAMA_T, H=5120):
    return llama_fwd_residual_rmsnorm(T, H, "llama2_13b_fwd_residual_rmsnorm", LLAMA_13B)


def llama13b_bwd_rmsnorm(T=LLAMA_T, H=5120):
    return llama_bwd_rmsnorm(T, H, "llama2_13b_bwd_rmsnorm", LLAMA_13B)


def llama70b_fwd_residual_rmsnorm(T=LLAMA_T, H=8192):
    return llama_fwd_residual_rmsnorm(T, H, "llama2_70b_fwd_residual_rmsnorm", LLAMA_70B)


def llama70b_bwd_rmsnorm(T=LLAMA_T, H=8192):
    return llama_bwd_rmsnorm(T, H, "llama2_70b_bwd_rmsnorm", LLAMA_70B)


def llama_bwd_silu_gate(T=LLAMA_T, F=11008):
    g = Graph("llama2_7b_bwd_silu_gate",
              LLAMA + ". Training backward of the MLP's act_fn(gate) * up (llama_fwd_silu_gate), "
              "between down_proj's input gradient and the gate/up projections' backward: from "
              "dy, gate and up [4096, 11008] (bf16), d_up = dy * silu(gate) and d_gate = dy * up "
              "* sigmoid(gate) * (1 + gate * (1 - sigmoid(gate))) (torch._decomp's "
              "silu_backward), both .to(bf16).")
    s = [T, F]
    dy, gate, up = (g.parameter(n, s, "bf16") for n in ("dy", "gate_proj_out", "up_proj_out"))
    gf, uf, df = (g.convert(n + "_f32", x, "f32") for n, x in (("gate", gate), ("up", up),
                                                                  ("dy", dy)))
    sig = g.unary("sigmoid", "sigmoid", gf)
    silu = g.mul("silu", gf, sig)
    d_up = g.convert("d_up", g.mul("d_up_f32", df, silu), "bf16")
    one = g.scalar("one", 1.0, s)
    dsilu = g.mul("dsilu", sig, g.add("one_plus", one, g.mul("g_1ms", gf,
                                                               g.sub("one_minus_sig", one, sig))))
    d_gate = g.convert("d_gate", g.mul("d_gate_f32", g.mul("dy_up", df, uf), dsilu), "bf16")
    g.output(d_gate, d_up)
    return g


LLAMA_VOCAB = 32000


def target_hit(g, target, s):
    """Where a row's class (the iota along axis 1 of s) is its token's target: the one-hot of
    nll_loss's gather, as a bool [T, V]."""
    return g.binary("eq", "hit", iota(g, "class", s, 1), g.broadcast("target.b", target, s, [0]))


def llama_fwd_cross_entropy(T=LLAMA_T, V=LLAMA_VOCAB):
    g = Graph("llama2_7b_fwd_cross_entropy",
              LLAMA + "; the language-model loss of LlamaForCausalLM over its 32000-token "
              "vocabulary. Forward, after the lm_head matmul: logits [4096, 32000] (bf16) "
              ".float(), log-softmax per token (max, exp of the difference, sum, log) and the "
              "target's logit picked by an iota compare (nll_loss's gather; no ignored index), "
              "the mean loss over the tokens; outputs the loss and the log-sum-exp per token "
              "(saved for the backward).")
    s = [T, V]
    x = g.convert("x", g.parameter("logits", s, "bf16"), "f32")
    target = g.parameter("target", [T], "i32")
    mx = g.reduce("max", "max", x, [1])
    e = g.unary("exp", "exp", g.sub("shifted", x, g.broadcast("max.b", mx, s, [0])))
    lse = g.add("lse", g.unary("log", "log_sum", g.reduce("sum", "sum_exp", e, [1])), mx)
    hit = target_hit(g, target, s)
    picked = g.reduce("sum", "picked", select(g, "target_logit", hit, x, g.scalar("zero", 0.0, s)),
                      [1])
    loss = g.div("loss", g.reduce("sum", "nll_sum", g.sub("nll", lse, picked), [0]),
                 g.constant("tokens", float(T)))
    g.output(loss, lse)
    return g


def llama_bwd_cross_entropy(T=LLAMA_T, V=LLAMA_VOCAB):
    g = Graph("llama2_7b_bwd_cross_entropy",
              LLAMA + "; the language-model loss of LlamaForCausalLM over its 32000-token "
              "vocabulary. Training backward of llama2_7b_fwd_cross_entropy, before the lm_head "
              "matmul's backward: dlogits = (exp(x - lse) - one_hot(target)) * grad_loss / 4096 "
              "from the logits [4096, 32000] (bf16, .float()), the saved lse [4096] and the "
              "loss gradient (a scalar), .to(bf16).")
    s = [T, V]
    x = g.convert("x", g.parameter("logits", s, "bf16"), "f32")
    lse, target = g.parameter("lse", [T]), g.parameter("target", [T], "i32")
    grad_loss = g.parameter("grad_loss", [])
    p = g.unary("exp", "probs", g.sub("x_lse", x, g.broadcast("lse.b", lse, s, [0])))
    hit = target_hit(g, target, s)
    d = g.sub("d", p, select(g, "one_hot", hit, g.scalar("one", 1.0, s), g.scalar("zero", 0.0, s)))
    scale = g.div("scale", grad_loss, g.constant("tokens", float(T)))
    g.output(g.convert("dlogits", g.mul("dlogits_f32", d, g.broadcast("scale.b", scale, s, [])),
                       "bf16"))
    return g


VIT = ("ViT-B/16 (hidden 768, 12 heads x 64, MLP 3072, LayerNorm eps 1e-6, f32) on 224x224 "
       "images at batch 64: 14x14 patches + [CLS] = 197 tokens, 64 x 197 = 12608 rows; ops as "
       "the reference Flax code (google-research/vision_transformer: nn.Dense = dot + bias, "
       "flax.linen.LayerNorm, jax.nn.gelu), lowered by XLA")


def vit_fwd_embed_ln(B=VIT_B, G=VIT_GRID, H=768):
    P = G * G
    g = Graph("vit_b16_fwd_embed_ln",
              VIT + ". Forward, between the patch embedding (a 16x16 stride-16 convolution, a "
              "matmul over patches) and the first block's Q/K/V projections: the conv output "
              "[64, 14, 14, 768] + bias, reshaped to [64, 196, 768], the [CLS] token [1, 1, 768] "
              "tiled over the batch and concatenated in front, + the position embedding "
              "[1, 197, 768] (the embedded tokens, an output, flattened to [12608, 768]), then "
              "the pre-norm LayerNorm of block 0 (Flax: mean and mean of squares, "
              "var = max(0, mean2 - mean^2), (x - mean) * rsqrt(var + 1e-6) * scale + bias).")
    conv, bias = g.parameter("conv_out", [B, G, G, H]), g.parameter("conv_bias", [H])
    cls, pos = g.parameter("cls", [1, 1, H]), g.parameter("pos_embedding", [1, P + 1, H])
    scale, beta = g.parameter("ln_scale", [H]), g.parameter("ln_bias", [H])
    x = g.reshape("patches", gx.bias_add(g, "conv_biased", conv, bias), [B, P, H])
    tokens = concatenate(g, "tokens", [g.broadcast("cls.b", cls, [B, 1, H], [0, 1, 2]), x], 1)
    emb = g.add("embedded", tokens, g.broadcast("pos_embedding.b", pos, [B, P + 1, H], [0, 1, 2]))
    emb = g.reshape("x", emb, [B * (P + 1), H])
    g.output(emb, layernorm_flax(g, "ln_", emb, scale, beta, 1e-6))
    return g


def vit_fwd_attn_softmax(B=VIT_B, N=12, S=VIT_GRID * VIT_GRID + 1, D=64):
    return region_scaled_softmax(
        "vit_b16_fwd_attn_softmax",
        VIT + ". Forward, between the Q K^T and probs V batched matmuls: scores "
        "[64, 12, 197, 197] / sqrt(64), softmax over keys, no mask (the division after the "
        "matmul as transformers' ViTSelfAttention does it; Flax and timm scale q before it).",
        B, N, S, D)


def vit_fwd_mlp_gelu(T=VIT_B * (VIT_GRID * VIT_GRID + 1), F=3072):
    return region_bias_gelu(
        "vit_b16_fwd_mlp_gelu",
        VIT + ". Forward, between the MlpBlock's two Dense matmuls: [12608, 3072] + bias, "
        "then nn.gelu, i.e. jax.nn.gelu(approximate=True): x * 0.5 * (1 + tanh(sqrt(2/pi) * "
        "(x + 0.044715 * x^3))), x^3 as XLA expands lax.integer_pow (x * x * x).",
        T, F, gelu_tanh_jax)


def vit_fwd_mlp_out_ln(T=VIT_B * (VIT_GRID * VIT_GRID + 1), H=768):
    g = Graph("vit_b16_fwd_mlp_out_ln",
              VIT + ". Forward, between the MlpBlock's second Dense and the next block's Q/K/V "
              "projections: [12608, 768] + bias + the residual x (Encoder1DBlock's x + y, the "
              "residual stream, an output), then the next block's pre-norm LayerNorm (Flax, "
              "as in vit_b16_fwd_embed_ln; after the last block, encoder_norm: the same ops).")
    s = [T, H]
    y, x = g.parameter("dense_out", s), g.parameter("residual", s)
    bias = g.parameter("bias", [H])
    scale, beta = g.parameter("ln_scale", [H]), g.parameter("ln_bias", [H])
    h = g.add("residual_out", x, gx.bias_add(g, "y", y, bias))
    g.output(h, layernorm_flax(g, "ln_", h, scale, beta, 1e-6))
    return g


RESNET = ("ResNet-50 (He et al. 2016; torchvision's Bottleneck, BatchNorm2d momentum 0.1, eps "
          "1e-5, f32, NCHW) at batch 32 on 224x224 images")


def resnet50_train_fwd_bn_relu(N=32, C=64, HW=56):
    g = Graph("resnet50_train_fwd_bn_relu",
              RESNET + "; the first stage's 64-channel 56 x 56 activations. Forward, between two "
              "convolutions of a bottleneck block in a training step, as the PyTorch bridge "
              "receives it from AOTAutograd (torch 2.11, _native_batch_norm_legit_functional as "
              "torch._decomp computes it, then relu): the batch's mean and biased variance per "
              "channel over N, H and W, rstd = rsqrt(var + eps), relu((x - mean) * rstd * weight "
              "+ bias); outputs: the saved mean and rstd (for the backward), the running mean "
              "and variance updated as 0.1 * batch + 0.9 * running (the variance unbiased, "
              "times n / (n - 1)), and the activation.")
    s, dims, n = [N, C, HW, HW], [0, 2, 3], N * HW * HW
    x = g.parameter("x", s)
    weight, bias = g.parameter("weight", [C]), g.parameter("bias", [C])
    running_mean, running_var = g.parameter("running_mean", [C]), g.parameter("running_var", [C])
    mean = g.div("mean", g.reduce("sum", "sum", x, dims), g.scalar("n", n, [C]))
    centered = g.sub("centered", x, g.broadcast("mean.b", mean, s, [1]))
    var = g.div("var", g.reduce("sum", "sqsum", g.mul("sq", centered, centered), dims),
                g.scalar("n_var", n, [C]))
    rstd = g.unary("rsqrt", "rstd", g.add("var_eps", var, g.scalar("eps", 1e-5, [C])))
    y = g.mul("normed", centered, g.broadcast("rstd.b", rstd, s, [1]))
    y = g.add("shifted", g.mul("scaled", y, g.broadcast("weight.b", weight, s, [1])),
              g.broadcast("bias.b", bias, s, [1]))
    new_mean = g.add("new_running_mean", g.mul("mean_part", mean, g.scalar("momentum", 0.1, [C])),
                     g.mul("mean_kept", running_mean, g.scalar("keep", 0.9, [C])))
    unbiased = g.mul("unbiased", var, g.scalar("bessel", n / (n - 1), [C]))
    new_var = g.add("new_running_var",
                    g.mul("var_part", unbiased, g.scalar("momentum_v", 0.1, [C])),
                    g.mul("var_kept", running_var, g.scalar("keep_v", 0.9, [C])))
    g.output(mean, rstd, new_mean, new_var, g.unary("relu", "relu", y))
    return g


def resnet50_train_bwd_relu_bn(N=32, C=64, HW=56):
    g = Graph("resnet50_train_bwd_relu_bn",
              RESNET + "; the first stage's 64-channel 56 x 56 activations. Training backward of "
              "resnet50_train_fwd_bn_relu, between two convolutions' backward: relu's backward "
              "(threshold_backward: dy where the saved output is positive, else 0), then "
              "torch._decomp's native_batch_norm_backward with the saved mean and rstd: xhat = "
              "(x - mean) * rstd, dbias = sum(d over N, H, W), dweight = sum(d * xhat), dx = "
              "weight * rstd / n * (n * d - dbias - xhat * dweight).")
    s, dims, n = [N, C, HW, HW], [0, 2, 3], float(N * HW * HW)
    dy, x, y = g.parameter("dy", s), g.parameter("x", s), g.parameter("relu_out", s)
    mean, rstd, w = g.parameter("mean", [C]), g.parameter("rstd", [C]), g.parameter("weight", [C])
    d = select(g, "d", g.binary("gt", "positive", y, g.scalar("zero", 0.0, s)), dy,
               g.scalar("zero_d", 0.0, s))
    xhat = g.mul("xhat", g.sub("centered", x, g.broadcast("mean.b", mean, s, [1])),
                 g.broadcast("rstd.b", rstd, s, [1]))
    dbias = g.reduce("sum", "dbias", d, dims)
    dweight = g.reduce("sum", "dweight", g.mul("d_xhat", d, xhat), dims)
    k = g.div("k", g.mul("weight_rstd", w, rstd), g.scalar("n", n, [C]))
    inner = g.sub("inner", g.sub("nd_db", g.mul("nd", d, g.scalar("n_b", n, s)),
                                 g.broadcast("dbias.b", dbias, s, [1])),
                  g.mul("xhat_dw", xhat, g.broadcast("dweight.b", dweight, s, [1])))
    g.output(g.mul("dx", g.broadcast("k.b", k, s, [1]), inner), dweight, dbias)
    return g


def e5_fwd_average_pool(B=32, S=512, H=768):
    g = Graph("e5_base_fwd_average_pool",
              "E5-base (intfloat/e5-base-v2: a BERT-base encoder, hidden 768, f32) embedding "
              "passages of 512 tokens at batch 32. Forward, after the last encoder layer: the "
              "model card's average_pool, last_hidden_state.masked_fill(~attention_mask[..., "
              "None].bool(), 0.0).sum(dim=1) / attention_mask.sum(dim=1)[..., None]: the int64 "
              "mask as bool, the padded tokens' states zeroed (select), summed over the tokens, "
              "divided by the mask's own sum over the tokens (int64, promoted to f32 by the "
              "division).")
    s = [B, S, H]
    x = g.parameter("last_hidden_state", s)
    mask = g.parameter("attention_mask", [B, S], "i64")
    keep = g.broadcast("keep.b", g.convert("keep", mask, "bool"), s, [0, 1])
    total = g.reduce("sum", "total", select(g, "filled", keep, x, g.scalar("zero", 0.0, s)), [1])
    count = g.convert("count_f32", g.reduce("sum", "count", mask, [1]), "f32")
    g.output(g.div("pooled", total, g.broadcast("count.b", count, [B, H], [0])))
    return g


# ---- whole layers (suites wholelayers and full) --------------------------------------------------
# Every op of one layer, matmuls included as dot ops (run through cuBLASLt on the GPU), weights
# and biases as parameters, like examples/bert_layer.json. The token counts are smaller than the
# regions' production shapes so that the reference interpreter (double precision, one thread)
# runs each graph in seconds.

GPT2_BLOCK_B, GPT2_BLOCK_S = 4, 512   # 2048 tokens: about 9 s on the reference
LLAMA_BLOCK_S = 128                   # one 128-token prompt: about 22 s on the reference


def gpt2_block_fwd(B=GPT2_BLOCK_B, S=GPT2_BLOCK_S, N=12, D=64, F=3072):
    H, T = N * D, B * S
    g = Graph("gpt2_block_fwd",
              f"One GPT-2 small block (hidden 768, 12 heads x 64, MLP 3072, LayerNorm eps 1e-5, "
              f"f32), inference forward at batch {B} x sequence {S} ({T} tokens: the reference "
              "interpreter runs it in about 9 s; GPT-2's full 1024-token context at batch 8 "
              "would take four times as long). Every op of block() in OpenAI's gpt-2 src/model.py "
              "(TensorFlow) in its order: x + attn(norm(x, 'ln_1')), then + mlp(norm(x, "
              "'ln_2')) (pre-LN). conv1d is tf.matmul of the flattened [tokens, nx] activations "
              "with w [nx, nf] (Conv1D layout, x @ w) + b: c_attn [768, 2304], its output split "
              "into q, k, v (slices), split_heads to [batch, heads, seq, 64] (reshape, "
              "transpose); w = q k^T (a batched dot) * rsqrt(64); mask_attn_weights with "
              "b = float(i >= j) from two iotas: w * b - 1e10 * (1 - b); softmax (x - max, exp, "
              "divide by the sum); a = w v, merge_heads, attention c_proj [768, 768]; mlp: c_fc "
              "[768, 3072], gelu(x) = 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*pow(x, 3)))), "
              "c_proj [3072, 768]; norm: u = mean(x), s = mean(square(x - u)), "
              "(x - u) * rsqrt(s + 1e-5) * g + b. Weights and biases are parameters, named "
              "after the checkpoint's variables. The block's present (the stacked k and v, a "
              "KV cache) is not an output.")
    x = g.parameter("x", [B, S, H])
    ln_1_g, ln_1_b = g.parameter("ln_1_g", [H]), g.parameter("ln_1_b", [H])
    c_attn_w = g.parameter("attn_c_attn_w", [H, 3 * H])
    c_attn_b = g.parameter("attn_c_attn_b", [3 * H])
    a_proj_w, a_proj_b = g.parameter("attn_c_proj_w", [H, H]), g.parameter("attn_c_proj_b", [H])
    ln_2_g, ln_2_b = g.parameter("ln_2_g", [H]), g.parameter("ln_2_b", [H])
    c_fc_w, c_fc_b = g.parameter("mlp_c_fc_w", [H, F]), g.parameter("mlp_c_fc_b", [F])
    m_proj_w, m_proj_b = g.parameter("mlp_c_proj_w", [F, H]), g.parameter("mlp_c_proj_b", [H])

    x2 = g.reshape("x2d", x, [T, H])
    c = gx.bias_add(g, "c_attn", g.matmul("c_attn_mm", layernorm(g, "ln_1_", x2, ln_1_g, ln_1_b,
                                                                   1e-5), c_attn_w), c_attn_b)
    heads = {}
    for i, n in enumerate("qkv"):
        split = g.reshape(n + "_split", slice_last(g, n, c, i * H, (i + 1) * H), [B, S, N, D])
        heads[n] = g.transpose(n + "_heads", split, [0, 2, 1, 3])   # [B, N, S, D]

    full, plane = [B, N, S, S], [S, S]
    w = g.dot("w", heads["q"], heads["k"], [0, 1], [0, 1], [3], [3])
    w = g.mul("w_scaled", w, g.scalar("rsqrt_d", 1.0 / math.sqrt(D), full))
    keep = g.binary("ge", "causal", iota(g, "query_pos", plane, 0), iota(g, "key_pos", plane, 1))
    b = g.convert("keep", keep, "f32")
    fill = g.mul("fill", g.scalar("big", 1e10, plane),
                 g.sub("dropped", g.scalar("one", 1.0, plane), b))
    kept = g.mul("kept", w, g.broadcast("keep.b", b, full, [2, 3]))
    masked = g.sub("masked", kept, g.broadcast("fill.b", fill, full, [2, 3]))
    probs = softmax_last(g, "softmax_", masked)
    a = g.dot("a", probs, heads["v"], [0, 1], [0, 1], [3], [2])          # [B, N, S, D]
    a = g.reshape("a_merged", g.transpose("a_heads_last", a, [0, 2, 1, 3]), [T, H])
    a = gx.bias_add(g, "attn_out", g.matmul("attn_c_proj", a, a_proj_w), a_proj_b)
    h = g.add("x_attn", x2, a)

    m = gx.bias_add(g, "c_fc", g.matmul("c_fc_mm", layernorm(g, "ln_2_", h, ln_2_g, ln_2_b, 1e-5),
                                        c_fc_w), c_fc_b)
    m = gelu_tanh_tf(g, "gelu_", m)
    m = gx.bias_add(g, "mlp_out", g.matmul("mlp_c_proj", m, m_proj_w), m_proj_b)
    g.output(g.reshape("y", g.add("x_mlp", h, m), [B, S, H]))
    return g


def llama_layer_bf16_fwd(B=1, S=LLAMA_BLOCK_S, N=32, D=128, F=11008):
    H, T = N * D, B * S
    g = Graph("llama_layer_bf16_fwd",
              f"One Llama-2-7B decoder layer (hidden 4096, 32 heads x 128, no grouped-query "
              f"attention, intermediate 11008, RMSNorm eps 1e-5 as in Llama-2's config, bf16 "
              f"weights and activations), inference forward of batch {B} x {S} tokens (a "
              "short prompt: the reference interpreter, whose dots cost 0.2 G multiply-adds per "
              "token in double, runs it in about 22 s). Every op of Hugging Face transformers' "
              "LlamaDecoderLayer as it runs eagerly in bf16, each torch op rounding to bf16 as "
              "the graph's bf16 ops do: residual + self_attn(input_layernorm(x)), then residual + "
              "mlp(post_attention_layernorm(.)). LlamaRMSNorm: h.to(float32), variance = "
              "mean(h^2), h * rsqrt(variance + 1e-5), .to(bf16), weight * that. nn.Linear "
              "without bias: a dot of the flattened [tokens, 4096] activations with the weight "
              "in its [out, in] layout (x @ W^T). q, k, v viewed as [batch, seq, 32, 128] and "
              "transposed to [batch, heads, seq, 128]; apply_rotary_pos_emb: q * cos + "
              "rotate_half(q) * sin (rotate_half = cat(-x[..., 64:], x[..., :64])) with cos, "
              "sin [batch, seq, 128] the bf16 tables of LlamaRotaryEmbedding (inputs) "
              "unsqueezed over heads; eager_attention_forward: q k^T (a batched bf16 dot) * "
              "128^-0.5 (computed in f32, rounded once, as torch multiplies bf16 by a Python "
              "float), + the causal mask (0 where key <= query, else bf16's finfo.min, built "
              "from two iotas, a compare and a select as _update_causal_mask's triu does), "
              "softmax(dtype=float32) .to(bf16), probs v, transposed back, o_proj; LlamaMLP: "
              "down_proj(act_fn(gate_proj(x)) * up_proj(x)), SiLU x * sigmoid(x) computed in f32 "
              "and rounded once (torch's silu kernel on bf16), the product in bf16.")
    bf = "bf16"
    x = g.parameter("hidden_states", [B, S, H], bf)
    cos, sin = g.parameter("cos", [B, S, D], bf), g.parameter("sin", [B, S, D], bf)
    in_w = g.parameter("input_layernorm_weight", [H], bf)
    proj = {n: g.parameter(n + "_proj_weight", [H, H], bf) for n in ("q", "k", "v", "o")}
    post_w = g.parameter("post_attention_layernorm_weight", [H], bf)
    gate_w = g.parameter("gate_proj_weight", [F, H], bf)
    up_w = g.parameter("up_proj_weight", [F, H], bf)
    down_w = g.parameter("down_proj_weight", [H, F], bf)

    def linear(name, h, weight):
        return g.dot(name, h, weight, [], [], [1], [1])

    x2 = g.reshape("residual", x, [T, H])
    normed = llama_rmsnorm(g, "input_layernorm_", x2, in_w, 1e-5)
    hs = [B, N, S, D]
    cos_b = g.broadcast("cos.b", cos, hs, [0, 2, 3])
    sin_b = g.broadcast("sin.b", sin, hs, [0, 2, 3])
    heads = {}
    for n in ("q", "k", "v"):
        split = g.reshape(n + "_split", linear(n + "_proj", normed, proj[n]), [B, S, N, D])
        heads[n] = g.transpose(n + "_heads", split, [0, 2, 1, 3])
    for n in ("q", "k"):
        x1 = slice_last(g, n + "_x1", heads[n], 0, D // 2)
        x2_half = slice_last(g, n + "_x2", heads[n], D // 2, D)
        rot = concatenate(g, n + "_rotate_half", [g.unary("neg", n + "_neg_x2", x2_half), x1], 3)
        heads[n] = g.add(n + "_embed", g.mul(n + "_cos", heads[n], cos_b),
                         g.mul(n + "_sin", rot, sin_b))

    full, plane = [B, N, S, S], [S, S]
    w = g.dot("attn_weights", heads["q"], heads["k"], [0, 1], [0, 1], [3], [3])
    w = g.mul("scaled_f32", g.convert("attn_weights_f32", w, "f32"),
              g.scalar("scaling", D ** -0.5, full))
    w = g.convert("scaled", w, bf)
    above = g.binary("gt", "above_diagonal", iota(g, "key_pos", plane, 1),
                     iota(g, "query_pos", plane, 0))
    mask = select(g, "causal_mask", above, g.scalar("finfo_min", -3.3895313892515355e38, plane, bf),
                  g.scalar("zero", 0.0, plane, bf))
    w = g.add("masked", w, g.broadcast("causal_mask.b", mask, full, [2, 3]))
    probs = softmax_last(g, "softmax_", g.convert("masked_f32", w, "f32"))
    probs = g.convert("probs", probs, bf)
    a = g.dot("attn_output", probs, heads["v"], [0, 1], [0, 1], [3], [2])   # [B, N, S, D]
    a = g.reshape("attn_merged", g.transpose("attn_heads_last", a, [0, 2, 1, 3]), [T, H])
    h = g.add("attn_residual", x2, linear("o_proj", a, proj["o"]))

    normed = llama_rmsnorm(g, "post_attention_layernorm_", h, post_w, 1e-5)
    gate = g.convert("gate_f32", linear("gate_proj", normed, gate_w), "f32")
    silu = g.convert("silu", g.mul("silu_f32", gate, g.unary("sigmoid", "sigmoid", gate)), bf)
    m = g.mul("gated", silu, linear("up_proj", normed, up_w))
    h = g.add("mlp_residual", h, linear("down_proj", m, down_w))
    g.output(g.reshape("out", h, [B, S, H]))
    return g


# The layers suite; each entry is (full-size graph, small copy with the same ops).
LAYERS = [
    (bert_fwd_attn_softmax, lambda: bert_fwd_attn_softmax(2, 2, 8, 4)),
    (bert_fwd_attn_out_ln, lambda: bert_fwd_attn_out_ln(16, 32)),
    (bert_fwd_ffn_gelu, lambda: bert_fwd_ffn_gelu(16, 64)),
    (bert_fwd_ffn_out_ln, lambda: bert_fwd_ffn_out_ln(16, 32)),
    (bert_bwd_layernorm, lambda: bert_bwd_layernorm(16, 32)),
    (bert_bwd_ffn_gelu, lambda: bert_bwd_ffn_gelu(16, 64)),
    (bert_bwd_attn_softmax, lambda: bert_bwd_attn_softmax(2, 2, 8, 4)),
    (gpt2_fwd_causal_softmax, lambda: gpt2_fwd_causal_softmax(2, 2, 16, 4)),
    (gpt2_train_fwd_attn, lambda: gpt2_train_fwd_attn(2, 2, 16, 4)),
    (gpt2_train_bwd_bias_grads, lambda: gpt2_train_bwd_bias_grads(2, 8, 16)),
    (gpt2_fwd_attn_out_ln, lambda: gpt2_fwd_attn_out_ln(16, 32)),
    (gpt2_fwd_mlp_gelu, lambda: gpt2_fwd_mlp_gelu(16, 64)),
    (gpt2_bwd_layernorm, lambda: gpt2_bwd_layernorm(16, 32)),
    (gpt2_bwd_mlp_gelu, lambda: gpt2_bwd_mlp_gelu(16, 64)),
    (llama_fwd_residual_rmsnorm, lambda: llama_fwd_residual_rmsnorm(8, 32)),
    (llama_fwd_rotary, lambda: llama_fwd_rotary(8, 4, 16)),
    (llama_fwd_silu_gate, lambda: llama_fwd_silu_gate(8, 48)),
    (vit_fwd_embed_ln, lambda: vit_fwd_embed_ln(2, 3, 32)),
    (vit_fwd_attn_softmax, lambda: vit_fwd_attn_softmax(2, 2, 10, 4)),
    (vit_fwd_mlp_gelu, lambda: vit_fwd_mlp_gelu(20, 64)),
    (vit_fwd_mlp_out_ln, lambda: vit_fwd_mlp_out_ln(20, 32)),
    (resnet50_train_fwd_bn_relu, lambda: resnet50_train_fwd_bn_relu(2, 4, 3)),
    (llama_bwd_rmsnorm, lambda: llama_bwd_rmsnorm(8, 32)),
    (llama_bwd_silu_gate, lambda: llama_bwd_silu_gate(8, 48)),
    (llama_fwd_cross_entropy, lambda: llama_fwd_cross_entropy(8, 64)),
    (llama_bwd_cross_entropy, lambda: llama_bwd_cross_entropy(8, 64)),
    (resnet50_train_bwd_relu_bn, lambda: resnet50_train_bwd_relu_bn(2, 4, 3)),
    (llama13b_fwd_residual_rmsnorm, lambda: llama13b_fwd_residual_rmsnorm(8, 40)),
    (llama13b_bwd_rmsnorm, lambda: llama13b_bwd_rmsnorm(8, 40)),
    (llama70b_fwd_residual_rmsnorm, lambda: llama70b_fwd_residual_rmsnorm(8, 64)),
    (llama70b_bwd_rmsnorm, lambda: llama70b_bwd_rmsnorm(8, 64)),
    (e5_fwd_average_pool, lambda: e5_fwd_average_pool(2, 8, 16)),
]

# The wholelayers suite (with examples/bert_layer.json); (full-size graph, small copy).
WHOLE_LAYERS = [
    (gpt2_block_fwd, lambda: gpt2_block_fwd(2, 8, 2, 4, 16)),
    (llama_layer_bf16_fwd, lambda: llama_layer_bf16_fwd(2, 8, 4, 8, 48)),
]


FULL = [
    lambda: bert_residual_layernorm(),
    lambda: transformer_residual_layernorm(),
    lambda: transformer_causal_softmax(),
    lambda: softmax_backward(),
    lambda: dien_augru_gates(),
    lambda: dien_attention_softmax(),
    lambda: asr_feature_norm(),
    lambda: crnn_lstm_cell(),
    lambda: crnn_ctc_log_softmax(),
    lambda: rmsnorm("f32"),
    lambda: rmsnorm("bf16"),
    lambda: long_softmax(16, 32768, "16 rows of a 32k vocabulary (LLaMA-2) at decode"),
    lambda: long_softmax(8, 131072, "8 rows of a 128k vocabulary (LLaMA-3) at decode"),
    lambda: long_softmax(4, 262144, "4 rows of a 256k vocabulary (Gemma) at decode"),
    lambda: eltwise_chain("eltwise_8x64", [8, 64], "tiny, launch-bound"),
    lambda: eltwise_chain("eltwise_1m", [1024, 1024], "4 MiB, fits in L2"),
    lambda: eltwise_chain("eltwise_16m", [4096, 4096], "64 MiB, just over L2"),
    lambda: eltwise_chain("eltwise_256m", [65536, 4096], "1 GiB in, 1 GiB out: bandwidth-bound"),
    lambda: tiny_layernorm(),
]

# Small copies: the same structure at shapes a CPU runs at once (peers.py --self-check).
SMALL = [
    lambda: bert_residual_layernorm(2, 4, 16),
    lambda: transformer_residual_layernorm(8, 32),
    lambda: transformer_causal_softmax(2, 2, 8),
    lambda: softmax_backward(2, 2, 8),
    lambda: dien_augru_gates(4, 6),
    lambda: dien_attention_softmax(4, 10),
    lambda: asr_feature_norm(16, 8),
    lambda: crnn_lstm_cell(8),
    lambda: crnn_ctc_log_softmax(5, 7),
    lambda: rmsnorm("f32", 8, 32),
    lambda: rmsnorm("bf16", 8, 32),
    lambda: long_softmax(2, 2048, "small copy"),
    lambda: eltwise_chain("eltwise_8x64", [8, 64], "tiny"),
    lambda: tiny_layernorm(4, 16),
    lambda: gx.ex_layernorm(2, 4, 16),
    lambda: gx.ex_softmax(2, 2, 8, 4),
    lambda: gx.ex_gelu_bias(2, 4, 32),
    lambda: gx.ex_fig5(),
    lambda: gx.ex_fig7(16, 8),
    lambda: gx.ex_dien_row_reduce(64, 32),
    lambda: gx.ex_transformer_row_reduce(4, 300),
    lambda: gx.ex_layernorm_backward(16, 32),
    lambda: gx.ex_batchnorm_train(2, 3, 3, 8),
    lambda: gx.ex_bert_layer(2, 8, 2, 4, 16),
]

SMOKE = ["graphs/eltwise_8x64.json", "graphs/layernorm_8x64.json",
         "../examples/fig5_power_broadcast_add.json", "graphs/small/softmax_2k_small.json"]


def outputs():
    """{relative path: text} of every generated file."""
    files = {}
    full = []
    for path in sorted(glob.glob(os.path.join(EXAMPLES, "*.json"))):
        full.append("../examples/" + os.path.basename(path))
    layers, whole = [], ["../examples/bert_layer.json"]
    for make in FULL + [full_size for full_size, _ in LAYERS + WHOLE_LAYERS]:
        g = make()
        files[f"graphs/{g.name}.json"] = g.text()
        full.append(f"graphs/{g.name}.json")
        if make in (full_size for full_size, _ in LAYERS):
            layers.append(f"graphs/{g.name}.json")
        elif make not in FULL:
            whole.append(f"graphs/{g.name}.json")
    small = []
    for make in SMALL + [small_copy for _, small_copy in LAYERS + WHOLE_LAYERS]:
        g = make()
        g.name += "_small"
        files[f"graphs/small/{g.name}.json"] = g.text()
        small.append(f"graphs/small/{g.name}.json")
    head = "# Generated by bench/gen_bench_graphs.py; paths are relative to this folder.\n"
    for name, paths, what in (("full", full, "every example and the workload subgraphs"),
                              ("smoke", SMOKE, "tiny graphs for a host-target smoke run"),
                              ("selfcheck", small, "small copies for peers.py --self-check"),
                              ("layers", layers, "the memory-intensive regions of transformer "
                               "layers (BERT-base, GPT-2, Llama-2-7B, ViT-B/16) and of a "
                               "ResNet-50 block, one per file"),
                              ("wholelayers", whole, "whole transformer layers, matmuls as dots "
                               "(BERT-base, GPT-2 small, Llama-2-7B in bf16)")):
        files[f"suites/{name}.txt"] = head + f"# {name}: {what}\n" + \
            "".join(f"../{p}\n" for p in paths)
    return files


def main():
    ap = argparse.ArgumentParser(description="Write the benchmark suite of bench/.")
    ap.add_argument("--check", action="store_true",
                    help="write nothing; exit 1 if a committed file differs")
    args = ap.parse_args()
    stale = []
    for rel, text in outputs().items():
        path = os.path.join(HERE, rel)
        if args.check:
            try:
                with open(path, encoding="utf-8") as f:
                    same = f.read() == text
            except OSError:
                same = False
            if not same:
                stale.append(rel)
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    if stale:
        print("out of date (run bench/gen_bench_graphs.py): " + " ".join(stale), file=sys.stderr)
        return 1
    if not args.check:
        print(f"wrote {len(outputs())} files under {HERE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
