#!/usr/bin/env python3
"""Writes the benchmark suite: bench/graphs/*.json, small copies in bench/graphs/small/, and the
suite lists bench/suites/{full,smoke,selfcheck}.txt.

Usage:
    gen_bench_graphs.py           write everything
    gen_bench_graphs.py --check   write nothing; exit 1 if a file differs from what would be written

The graphs are the memory-intensive subgraphs of the AStitch paper's five workloads at their
production shapes (Table 2 batch sizes), training backward graphs, RMSNorm, softmax with long
rows and an element-wise chain from tiny (launch-bound) to 1 GiB (bandwidth-bound). Every
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
    for make in FULL:
        g = make()
        files[f"graphs/{g.name}.json"] = g.text()
        full.append(f"graphs/{g.name}.json")
    small = []
    for make in SMALL:
        g = make()
        g.name += "_small"
        files[f"graphs/small/{g.name}.json"] = g.text()
        small.append(f"graphs/small/{g.name}.json")
    head = "# Generated by bench/gen_bench_graphs.py; paths are relative to this folder.\n"
    for name, paths, what in (("full", full, "every example and the workload subgraphs"),
                              ("smoke", SMOKE, "tiny graphs for a host-target smoke run"),
                              ("selfcheck", small, "small copies for peers.py --self-check")):
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
