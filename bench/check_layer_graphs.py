#!/usr/bin/env python3
"""Checks with numpy that graphs of the layers and wholelayers suites compute the function they
are named for.

    check_layer_graphs.py [--astitch-run PATH] [--target reference|host] [--seed N]

For each checked graph it runs the small copy (bench/graphs/small/) through astitch-run with
inputs made here (--inputs DIR --outputs DIR, .npy files) and compares every output with a
float64 numpy version written from the math, not from the graph: the softmax and LayerNorm
gradients against central finite differences of their forward functions, rotary embedding
against the rotation of (x1 + i x2) by the position's angle, GELU, SiLU, RMSNorm, cross-entropy
and batch-norm gradients against finite differences of their forwards, the whole GPT-2 block and
Llama layer against their models' forward passes. Inputs are consistent where the math needs
it: probabilities are a softmax, mean and rstd are x's statistics, cos and sin are Llama's RoPE
tables. Config values (eps, the attention scale) are checked on the full-size graphs and read
from them for the small copies.
Error: max |out - ref| / max(1, max |ref|), at most 1e-4 for f32 outputs and 1e-2 for bf16
(an inner product of a bf16 gradient with a direction: over the sum of its terms' magnitudes).
Needs numpy and astitch-run (ASTITCH_RUN or --astitch-run), no GPU. Exit 0 when all pass,
1 when one fails, 77 without numpy.
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:
    print("check_layer_graphs.py: numpy is missing; nothing checked", file=sys.stderr)
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = {"f32": 1e-4, "bf16": 1e-2}
INT_TYPES = {"i32": np.int32, "i64": np.int64}
erf = np.vectorize(math.erf)


def load(name, small=True):
    path = os.path.join(HERE, "graphs", "small" if small else "", name +
                        ("_small" if small else "") + ".json")
    with open(path, encoding="utf-8") as f:
        return path, json.load(f)


def const(graph, name):
    return next(n["value"] for n in graph["nodes"] if n["name"] == name)


def to_bf16_bits(a):
    """Round to nearest even bf16; returns the uint16 bits."""
    b = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(u):
    return (u.astype(np.uint32) << 16).view(np.float32)


def run(args, path, graph, inputs):
    """Writes inputs (arrays, stored in each parameter's dtype), runs the graph, returns
    ({output: float64 array}, {output: dtype}, the inputs as stored, in float64)."""
    params = {n["name"]: n["dtype"] for n in graph["nodes"] if n["op"] == "parameter"}
    with tempfile.TemporaryDirectory() as d:
        stored = {}
        for name, dtype in params.items():
            if dtype == "bf16":
                bits = to_bf16_bits(inputs[name])
                np.save(os.path.join(d, name + ".npy"), bits)
                stored[name] = from_bf16_bits(bits).astype(np.float64)
            else:
                a = np.asarray(inputs[name], INT_TYPES.get(dtype, np.float32))
                np.save(os.path.join(d, name + ".npy"), a)
                stored[name] = a.astype(np.float64)
        out = os.path.join(d, "out")
        r = subprocess.run([args.astitch_run, "--target=" + args.target, "--inputs", d,
                            "--outputs", out, path], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"astitch-run failed ({r.returncode}): {r.stderr.strip()[-300:]}")
        res, dtypes = {}, {}
        for o in graph["outputs"]:
            a = np.load(os.path.join(out, o + ".npy"))
            dtypes[o] = "bf16" if a.dtype == np.uint16 else "f32"
            res[o] = (from_bf16_bits(a) if a.dtype == np.uint16 else a).astype(np.float64)
        return res, dtypes, stored


def error(out, ref):
    return float(np.max(np.abs(out - ref)) / max(1.0, float(np.max(np.abs(ref)))))


def directional(f, x, v, eps=1e-6):
    """(f(x + eps v) - f(x - eps v)) / 2 eps: the derivative of f at x along v."""
    return (f(x + eps * v) - f(x - eps * v)) / (2 * eps)


def softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# ---- the checks: each returns [(what, error, dtype)] -------------------------------------------

def check_softmax_backward(args, rng):
    path, g = load("bert_base_bwd_attn_softmax")
    sqrt_d = const(g, "sqrt_d")
    s = next(n["shape"] for n in g["nodes"] if n["name"] == "probs")
    z, mask = rng.standard_normal(s) * 3, rng.standard_normal([s[0], 1, 1, s[3]])

    def fwd(z):  # the forward whose gradient the graph computes
        return softmax(z / sqrt_d + mask)
    dy = rng.standard_normal(s)
    out, dt, inp = run(args, path, g, {"probs": fwd(z), "dprobs": dy})
    y, dy = inp["probs"], inp["dprobs"]
    closed = y * (dy - (dy * y).sum(-1, keepdims=True)) / sqrt_d
    v = rng.standard_normal(s)
    fd = np.sum(dy * directional(fwd, z, v))      # <dy, J v> = <J^T dy, v>
    return [("dscores vs y*(dy - sum(dy*y))/sqrt(d)", error(out["dscores"], closed), dt["dscores"]),
            ("<dscores, v> vs finite difference", error(np.sum(out["dscores"] * v), fd), "f32")]


def check_layernorm_backward(args, rng, name, eps):
    path, g = load(name)
    T, H = next(n["shape"] for n in g["nodes"] if n["name"] == "x")
    residual = any(n["name"] == "dresidual" for n in g["nodes"])
    gamma, beta = rng.standard_normal(H), rng.standard_normal(H)

    def fwd(x):
        m, v = x.mean(1, keepdims=True), x.var(1, keepdims=True)
        return (x - m) / np.sqrt(v + eps) * gamma + beta
    x = rng.standard_normal([T, H]) * 2 + 0.5
    x = x.astype(np.float32).astype(np.float64)
    inputs = {"dy": rng.standard_normal([T, H]), "x": x, "mean": x.mean(1),
              "rstd": 1 / np.sqrt(x.var(1) + eps), "gamma": gamma}
    if residual:
        inputs["dresidual"] = rng.standard_normal([T, H])
    out, dt, inp = run(args, path, g, inputs)
    dy, gamma = inp["dy"], inp["gamma"]
    xhat = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + eps)
    gx = dy * gamma
    dx = (gx - gx.mean(1, keepdims=True) - xhat * (gx * xhat).mean(1, keepdims=True)) \
        / np.sqrt(x.var(1, keepdims=True) + eps)
    dx_name = "dx_total" if residual else "dx"
    if residual:
        dx = dx + inp["dresidual"]
    v = rng.standard_normal([T, H])
    fd = np.sum(dy * directional(fwd, x, v)) + (np.sum(inp["dresidual"] * v) if residual else 0)
    return [(f"{name}: {dx_name} vs the LayerNorm gradient", error(out[dx_name], dx), dt[dx_name]),
            (f"{name}: <{dx_name}, v> vs finite difference",
             error(np.sum(out[dx_name] * v), fd), "f32"),
            (f"{name}: dgamma vs sum(dy * xhat)", error(out["dgamma"], (dy * xhat).sum(0)), "f32"),
            (f"{name}: dbeta vs sum(dy)", error(out["dbeta"], dy.sum(0)), "f32")]


def check_rotary(args, rng):
    path, g = load("llama2_7b_fwd_rotary")
    T, D = next(n["shape"] for n in g["nodes"] if n["name"] == "cos")
    N = next(n["shape"] for n in g["nodes"] if n["name"] == "q_proj_out")[1] // D
    inv_freq = 1.0 / 10000.0 ** (np.arange(0, D, 2) / D)          # Llama's RoPE, theta 10000
    freqs = np.outer(np.arange(T), inv_freq)                        # [T, D/2]
    emb = np.concatenate([freqs, freqs], 1)                         # HF: cat(freqs, freqs)
    inputs = {"q_proj_out": rng.standard_normal([T, N * D]),
              "k_proj_out": rng.standard_normal([T, N * D]),
              "cos": np.cos(emb), "sin": np.sin(emb)}
    out, dt, inp = run(args, path, g, inputs)
    c, s = inp["cos"][:, None, :D // 2], inp["sin"][:, None, :D // 2]  # the tables as stored
    checks = []
    for p in ("q", "k"):
        x = inp[p + "_proj_out"].reshape(T, N, D)
        z = (x[..., :D // 2] + 1j * x[..., D // 2:]) * (c + 1j * s)  # rotate each pair
        ref = np.concatenate([z.real, z.imag], -1)
        checks.append((f"{p}_rot vs (x1 + i x2) e^(i pos theta)", error(out[p + "_rot"], ref),
                       dt[p + "_rot"]))
    return checks


def check_gelu_backward(args, rng, name, approximate):
    path, g = load(name)
    T, F = next(n["shape"] for n in g["nodes"] if n["name"] == "x")
    if approximate:
        def gelu(h):
            return 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
    else:
        def gelu(h):
            return 0.5 * h * (1 + erf(h / math.sqrt(2)))
    inputs = {"dy": rng.standard_normal([T, F]), "x": rng.standard_normal([T, F]) * 2,
              "bias": rng.standard_normal(F)}
    out, dt, inp = run(args, path, g, inputs)
    h = inp["x"] + inp["bias"]
    dh = inp["dy"] * directional(gelu, h, np.ones_like(h))
    return [(f"{name}: dh vs dy * gelu'(x + bias) by finite difference", error(out["dh"], dh),
             dt["dh"]),
            (f"{name}: dbias vs sum(dh)", error(out["dbias"], dh.sum(0)), "f32")]


def check_causal_softmax(args, rng):
    path, g = load("gpt2_fwd_causal_softmax")
    B, N, S, _ = next(n["shape"] for n in g["nodes"] if n["name"] == "scores")
    scale = const(g, "rsqrt_d")
    w = rng.standard_normal([B, N, S, S]) * 4
    out, dt, inp = run(args, path, g, {"scores": w})
    z = np.where(np.tril(np.ones([S, S], bool)), inp["scores"] * scale, -np.inf)
    return [("probs vs softmax over keys j <= i", error(out["softmax_probs"], softmax(z)),
             dt["softmax_probs"])]


def check_bias_grads(args, rng):
    """The bias gradients as sums over tokens, kept as [1, N]; the layer norms' weight and bias
    gradients as sums over batch and sequence, ln_1's xhat from x, mean and rstd."""
    path, g = load("gpt2_train_bwd_bias_grads")
    B, S, H = shape_of(g, "ln_1.x")
    inputs = {n["name"]: rng.standard_normal(n["shape"]) for n in g["nodes"]
              if n["op"] == "parameter"}
    inputs["ln_1.rstd"] = np.abs(inputs["ln_1.rstd"]) + 0.5
    out, dt, inp = run(args, path, g, inputs)
    res = []
    for name, n in (("mlp_c_proj", H), ("c_fc", 4 * H), ("attn_c_proj", H), ("c_attn", 3 * H)):
        want = inp[name + ".dy"].reshape(B * S, n).sum(0, keepdims=True)
        got = out[name + ".dbias"]
        res.append((f"{name}.dbias [1, {n}] vs sum over tokens, keepdim",
                    error(got, want) if got.shape == want.shape else math.inf, "f32"))
    xhat1 = (inp["ln_1.x"] - inp["ln_1.mean"]) * inp["ln_1.rstd"]
    for ln, xhat in (("ln_2", inp["ln_2.xhat"]), ("ln_1", xhat1)):
        dy = inp[ln + ".dy"].reshape(B, S, H)
        res.append((f"{ln}.dweight vs sum(dy * xhat)", error(out[ln + ".dweight"],
                                                              (dy * xhat).sum((0, 1))), "f32"))
        res.append((f"{ln}.dbias vs sum(dy)", error(out[ln + ".dbias"], dy.sum((0, 1))), "f32"))
    return res


def check_rmsnorm_backward(args, rng):
    """dh against the finite-difference gradient of LlamaRMSNorm (the bf16 rounding of the
    normalized value left out, as autograd leaves it), dweight against sum(dy * normalized);
    for Llama-2-7B, -13B and -70B (hidden 4096, 5120, 8192)."""
    res = []
    for name in ("llama2_7b_bwd_rmsnorm", "llama2_13b_bwd_rmsnorm", "llama2_70b_bwd_rmsnorm"):
        path, g = load(name)
        T, H = shape_of(g, "h")
        eps = 1e-6
        h = from_bf16_bits(to_bf16_bits(rng.standard_normal([T, H]) * 2)).astype(np.float64)
        w = from_bf16_bits(to_bf16_bits(rng.standard_normal(H))).astype(np.float64)
        inputs = {"dy": rng.standard_normal([T, H]), "h": h, "weight": w,
                  "rstd": 1 / np.sqrt((h * h).mean(1) + eps)}
        out, dt, inp = run(args, path, g, inputs)
        dy, rstd = inp["dy"], inp["rstd"]

        def fwd(x):
            return w * x / np.sqrt((x * x).mean(1, keepdims=True) + eps)
        v = rng.standard_normal([T, H])
        fd = np.sum(dy * directional(fwd, h, v))
        normed = from_bf16_bits(to_bf16_bits(h * rstd[:, None])).astype(np.float64)
        # normalized by the terms' magnitudes: each bf16 dh errs by a share of its own size,
        # and the inner product's errors add up to at most that share of sum |dh v|, however
        # much its terms cancel (by the sum alone, 4 of 25 seeds failed)
        terms = out["dh"] * v
        res += [(f"{name}: <dh, v> vs finite difference",
                 abs(float(np.sum(terms)) - fd) / max(1.0, float(np.sum(np.abs(terms)))),
                 "bf16"),
                (f"{name}: dweight vs sum(dy * normalized)",
                 error(out["dweight"], (dy * normed).sum(0)), "bf16")]
    return res


def check_silu_backward(args, rng):
    path, g = load("llama2_7b_bwd_silu_gate")
    T, F = shape_of(g, "dy")
    inputs = {n: rng.standard_normal([T, F]) * 2 for n in ("dy", "gate_proj_out", "up_proj_out")}
    out, dt, inp = run(args, path, g, inputs)
    dy, gate, up = inp["dy"], inp["gate_proj_out"], inp["up_proj_out"]

    def silu(x):
        return x / (1 + np.exp(-x))
    return [("llama2_7b_bwd_silu_gate: d_gate vs dy * up * silu'(gate) by finite difference",
             error(out["d_gate"], dy * up * directional(silu, gate, np.ones_like(gate))),
             dt["d_gate"]),
            ("llama2_7b_bwd_silu_gate: d_up vs dy * silu(gate)",
             error(out["d_up"], dy * silu(gate)), dt["d_up"])]


def cross_entropy(x, target):
    """Mean over rows of logsumexp(x) - x[target] (a target outside [0, V) picks nothing)."""
    m = x.max(1, keepdims=True)
    lse = np.log(np.exp(x - m).sum(1)) + m[:, 0]
    hit = np.arange(x.shape[1])[None, :] == target[:, None]
    return (lse - (x * hit).sum(1)).mean(), lse


def check_cross_entropy(args, rng):
    """The forward's loss and log-sum-exp; the backward's dlogits against the finite-difference
    gradient of the forward's loss times the loss gradient."""
    path, g = load("llama2_7b_fwd_cross_entropy")
    T, V = shape_of(g, "logits")
    x = from_bf16_bits(to_bf16_bits(rng.standard_normal([T, V]) * 3)).astype(np.float64)
    target = rng.integers(0, V, T)
    out, dt, inp = run(args, path, g, {"logits": x, "target": target})
    loss, lse = cross_entropy(x, target)
    res = [("llama2_7b_fwd_cross_entropy: loss vs mean(lse - x[target])",
            error(out["loss"], loss), dt["loss"]),
           ("llama2_7b_fwd_cross_entropy: lse vs log(sum(exp(x)))", error(out["lse"], lse),
            dt["lse"])]
    path, g = load("llama2_7b_bwd_cross_entropy")
    grad_loss = 1.7
    out, dt, inp = run(args, path, g, {"logits": x, "target": target, "lse": lse,
                                       "grad_loss": np.float64(grad_loss)})
    v = rng.standard_normal([T, V])
    fd = grad_loss * directional(lambda z: cross_entropy(z, target)[0], x, v)
    res.append(("llama2_7b_bwd_cross_entropy: <dlogits, v> vs finite difference",
                error(np.sum(out["dlogits"] * v), fd), dt["dlogits"]))
    return res


def check_batchnorm_backward(args, rng):
    """dx against the finite-difference gradient of relu(batch norm) in training (the batch's
    statistics), dweight and dbias against their sums."""
    path, g = load("resnet50_train_bwd_relu_bn")
    N, C, Hh, W = shape_of(g, "x")
    eps, axes = 1e-5, (0, 2, 3)
    x = rng.standard_normal([N, C, Hh, W]) * 2 + 0.5
    x = x.astype(np.float32).astype(np.float64)
    w, b = rng.standard_normal(C), rng.standard_normal(C)

    def bn(z):
        m, var = z.mean(axes, keepdims=True), z.var(axes, keepdims=True)
        return (z - m) / np.sqrt(var + eps) * w[None, :, None, None] + b[None, :, None, None]
    y = np.maximum(bn(x), 0)
    inputs = {"dy": rng.standard_normal(x.shape), "x": x, "relu_out": y, "weight": w,
              "mean": x.mean(axes), "rstd": 1 / np.sqrt(x.var(axes) + eps)}
    out, dt, inp = run(args, path, g, inputs)
    d = np.where(inp["relu_out"] > 0, inp["dy"], 0.0)
    v = rng.standard_normal(x.shape)
    fd = np.sum(d * directional(bn, x, v))
    xhat = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    return [("resnet50_train_bwd_relu_bn: <dx, v> vs finite difference",
             error(np.sum(out["dx"] * v), fd), "f32"),
            ("resnet50_train_bwd_relu_bn: dweight vs sum(d * xhat)",
             error(out["dweight"], (d * xhat).sum(axes)), "f32"),
            ("resnet50_train_bwd_relu_bn: dbias vs sum(d)", error(out["dbias"], d.sum(axes)),
             "f32")]


def shape_of(graph, name):
    return next(n["shape"] for n in graph["nodes"] if n["name"] == name)


def check_gpt2_block(args, rng):
    """The whole block against OpenAI's block() in numpy, with GPT-2's init scales (weights
    N(0, 0.02), LayerNorm gains near 1) so that no softmax saturates."""
    path, g = load("gpt2_block_fwd")
    B, S, H = shape_of(g, "x")
    F = shape_of(g, "mlp_c_fc_w")[1]
    N = shape_of(g, "q_split")[2]
    eps = const(g, "ln_1_eps")

    def w(*s):
        return rng.standard_normal(s) * 0.02
    inputs = {"x": rng.standard_normal([B, S, H]), "attn_c_attn_w": w(H, 3 * H),
              "attn_c_attn_b": w(3 * H), "attn_c_proj_w": w(H, H), "attn_c_proj_b": w(H),
              "mlp_c_fc_w": w(H, F), "mlp_c_fc_b": w(F), "mlp_c_proj_w": w(F, H),
              "mlp_c_proj_b": w(H)}
    for ln in ("ln_1", "ln_2"):
        inputs[ln + "_g"], inputs[ln + "_b"] = 1 + w(H) * 5, w(H) * 5
    out, dt, p = run(args, path, g, inputs)

    def norm(x, ln):
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps) \
            * p[ln + "_g"] + p[ln + "_b"]

    def heads(t):
        return t.reshape(B, S, N, H // N).transpose(0, 2, 1, 3)
    x = p["x"]
    q, k, v = np.split(norm(x, "ln_1") @ p["attn_c_attn_w"] + p["attn_c_attn_b"], 3, -1)
    z = heads(q) @ heads(k).transpose(0, 1, 3, 2) / math.sqrt(H // N)
    z = np.where(np.tril(np.ones([S, S], bool)), z, -np.inf)
    a = (softmax(z) @ heads(v)).transpose(0, 2, 1, 3).reshape(B, S, H)
    x = x + a @ p["attn_c_proj_w"] + p["attn_c_proj_b"]
    h = norm(x, "ln_2") @ p["mlp_c_fc_w"] + p["mlp_c_fc_b"]
    h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
    y = x + h @ p["mlp_c_proj_w"] + p["mlp_c_proj_b"]
    return [("gpt2_block_fwd: y vs OpenAI's block()", error(out["y"], y), dt["y"])]


def check_llama_layer(args, rng):
    """The whole bf16 layer against LlamaDecoderLayer in float64 numpy (rotary as the rotation
    of (x1 + i x2), cos and sin Llama's RoPE tables), weights N(0, 1/sqrt(fan_in)); the graph
    rounds to bf16 after every op, so the bf16 tolerance."""
    path, g = load("llama_layer_bf16_fwd")
    B, S, H = shape_of(g, "hidden_states")
    D = shape_of(g, "cos")[2]
    F = shape_of(g, "gate_proj_weight")[0]
    N = H // D
    eps = const(g, "input_layernorm_eps")

    def w(out_features, in_features):
        return rng.standard_normal([out_features, in_features]) / math.sqrt(in_features)
    inv_freq = 1.0 / 10000.0 ** (np.arange(0, D, 2) / D)
    emb = np.concatenate([np.outer(np.arange(S), inv_freq)] * 2, 1)
    inputs = {"hidden_states": rng.standard_normal([B, S, H]),
              "cos": np.broadcast_to(np.cos(emb), [B, S, D]),
              "sin": np.broadcast_to(np.sin(emb), [B, S, D]),
              "input_layernorm_weight": 1 + rng.standard_normal(H) * 0.1,
              "post_attention_layernorm_weight": 1 + rng.standard_normal(H) * 0.1,
              "gate_proj_weight": w(F, H), "up_proj_weight": w(F, H),
              "down_proj_weight": w(H, F)}
    for n in ("q", "k", "v", "o"):
        inputs[n + "_proj_weight"] = w(H, H)
    out, dt, p = run(args, path, g, inputs)

    def rmsnorm(h, weight):
        return weight * h / np.sqrt((h * h).mean(-1, keepdims=True) + eps)

    def heads(t):
        return t.reshape(B, S, N, D).transpose(0, 2, 1, 3)

    def rope(t):
        c, s = p["cos"][:, None, :, :D // 2], p["sin"][:, None, :, :D // 2]
        z = (t[..., :D // 2] + 1j * t[..., D // 2:]) * (c + 1j * s)
        return np.concatenate([z.real, z.imag], -1)
    x = p["hidden_states"]
    n = rmsnorm(x, p["input_layernorm_weight"])
    q, k, v = (heads(n @ p[c + "_proj_weight"].T) for c in "qkv")
    z = rope(q) @ rope(k).transpose(0, 1, 3, 2) / math.sqrt(D)
    z = np.where(np.tril(np.ones([S, S], bool)), z, -np.inf)
    a = (softmax(z) @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
    h = x + a @ p["o_proj_weight"].T
    n = rmsnorm(h, p["post_attention_layernorm_weight"])
    gate = n @ p["gate_proj_weight"].T
    y = h + (gate / (1 + np.exp(-gate)) * (n @ p["up_proj_weight"].T)) @ p["down_proj_weight"].T
    return [("llama_layer_bf16_fwd: out vs LlamaDecoderLayer", error(out["out"], y), dt["out"])]


def check_config():
    """Config values in the full-size graphs."""
    want = [("bert_base_fwd_attn_out_ln", "ln_eps", 1e-12), ("bert_base_fwd_attn_softmax",
            "sqrt_d", 8.0), ("gpt2_fwd_attn_out_ln", "ln_2_eps", 1e-5),
            ("gpt2_fwd_causal_softmax", "rsqrt_d", 0.125), ("llama2_7b_fwd_residual_rmsnorm",
            "eps", 1e-6), ("llama2_13b_fwd_residual_rmsnorm", "eps", 1e-6),
            ("llama2_70b_fwd_residual_rmsnorm", "eps", 1e-6), ("vit_b16_fwd_embed_ln", "ln_eps", 1e-6),
            ("vit_b16_fwd_attn_softmax", "sqrt_d", 8.0),
            ("bert_base_bwd_attn_softmax", "sqrt_d", 8.0), ("gpt2_block_fwd", "ln_1_eps", 1e-5),
            ("gpt2_block_fwd", "ln_2_eps", 1e-5), ("gpt2_block_fwd", "rsqrt_d", 0.125),
            ("llama_layer_bf16_fwd", "input_layernorm_eps", 1e-5),
            ("llama_layer_bf16_fwd", "post_attention_layernorm_eps", 1e-5),
            ("llama_layer_bf16_fwd", "scaling", 128 ** -0.5)]
    return [(f"{n}: {c} = {v}", 0.0 if const(load(n, False)[1], c) == v else math.inf, "f32")
            for n, c, v in want]


def main():
    ap = argparse.ArgumentParser(description="Check layers-suite graphs against numpy.")
    ap.add_argument("--astitch-run", default=os.environ.get("ASTITCH_RUN", "astitch-run"))
    ap.add_argument("--target", default="reference", choices=["reference", "host"])
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    results = check_config()
    results += check_softmax_backward(args, rng)
    results += check_layernorm_backward(args, rng, "bert_base_bwd_layernorm", 1e-12)
    results += check_layernorm_backward(args, rng, "gpt2_bwd_layernorm", 1e-5)
    results += check_rotary(args, rng)
    results += check_gelu_backward(args, rng, "bert_base_bwd_ffn_gelu", False)
    results += check_gelu_backward(args, rng, "gpt2_bwd_mlp_gelu", True)
    results += check_causal_softmax(args, rng)
    results += check_bias_grads(args, rng)
    results += check_gpt2_block(args, rng)
    results += check_llama_layer(args, rng)
    results += check_rmsnorm_backward(args, rng)
    results += check_silu_backward(args, rng)
    results += check_cross_entropy(args, rng)
    results += check_batchnorm_backward(args, rng)
    failed = 0
    for what, err, dtype in results:
        ok = err <= TOL[dtype]
        failed += not ok
        print(f"{'PASS' if ok else 'FAIL'}  error {err:.2e} (tolerance {TOL[dtype]:g})  {what}")
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
