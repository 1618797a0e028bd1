"""Rules of reductions (sum, mean, extrema, any/all, var) and of the ops eager computes as one
kernel over rows in f32: softmax, log-softmax, layer norm."""

import math

import torch

from . import (RULES, TORCH_TO_ASTITCH, Rule, dtype_of, float_only, meta, opmath, rule,
               shape_of)

aten = torch.ops.aten
prims = torch.ops.prims


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



@rule(aten._softmax.default, aten._log_softmax.default, supports=float_only)
def _softmax(t, node):
    dtype = dtype_of(node)
    x = t.operand(node.args[0], opmath(dtype), None)
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




@rule(aten.native_layer_norm.default, supports=float_only)
def _layer_norm(t, node):
    out_meta, mean_meta, rstd_meta = meta(node)
    dtype = TORCH_TO_ASTITCH[out_meta.dtype]
    x = t.operand(node.args[0], opmath(dtype), None)
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


def _batch_norm(t, node, training, running_mean, running_var, momentum, eps):
    """The results of a batch norm over channel axis 1 of node.args[0], with weight and bias
    (node.args[1], [2]): (out, save_mean, save_rstd, new_running_mean, new_running_var), each
    as the op's output of that place has it, None where that output is empty (the CPU's
    inference save_mean). As torch._decomp computes it: in training the biased variance of
    the batch normalizes, the running variance takes the unbiased one; otherwise the running
    statistics normalize and come back unchanged."""
    outs = meta(node)
    dtype = TORCH_TO_ASTITCH[outs[0].dtype]
    x = t.operand(node.args[0], opmath(dtype), None)
    dims = [0] + list(range(2, x.rank))
    channel = [1]
    if training:
        var, mean = _var_parts(t, x, dims, 0)
    else:
        mean = t.operand(running_mean, x.dtype, None)
        var = t.operand(running_var, x.dtype, None)
    rstd = t.b.unary("rsqrt", t.b.binary("add", var, t.b.scalar(x.dtype, eps, var.shape)))
    y = t.b.binary("sub", x, t.b.broadcast_in_dim(mean, x.shape, channel))
    y = t.b.binary("mul", y, t.b.broadcast_in_dim(rstd, x.shape, channel))
    for arg, op in ((node.args[1], "mul"), (node.args[2], "add")):
        if arg is not None:
            y = t.b.binary(op, y, t.b.broadcast_in_dim(t.operand(arg, x.dtype, None), x.shape,
                                                       channel))
    results = [t.b.convert(y, dtype), mean, rstd]
    if len(outs) == 5:
        def updated(batch, running):   # momentum * batch + (1 - momentum) * running
            return t.b.binary("add", t.b.binary("mul", batch, t.b.scalar(x.dtype, momentum,
                                                                          batch.shape)),
                              t.b.binary("mul", t.operand(running, x.dtype, None),
                                         t.b.scalar(x.dtype, 1 - momentum, batch.shape)))

        if running_mean is None:
            results += [None, None]
        elif training:
            n = math.prod(x.shape[d] for d in dims)
            unbiased = t.b.binary("mul", var, t.b.scalar(x.dtype, n / (n - 1) if n > 1
                                                         else float("inf"), var.shape))
            results += [updated(mean, running_mean), updated(unbiased, running_var)]
        else:
            results += [t.value(running_mean), t.value(running_var)]
    return tuple(None if v is None or m.numel() == 0 else
                 t.b.reshape(t.b.convert(v, TORCH_TO_ASTITCH[m.dtype]), tuple(m.shape))
                 for v, m in zip(results, outs))


def _batch_norm_supported(node):
    x = meta(node.args[0])
    return float_only(node) or (f"batch norm of a rank-{x.dim()} input" if x.dim() < 2 else None)


@rule(aten._native_batch_norm_legit_functional.default, supports=_batch_norm_supported)
def _batch_norm_functional(t, node):
    # (input, weight, bias, running_mean, running_var, training, momentum, eps)
    a = node.args
    return _batch_norm(t, node, a[5], a[3], a[4], a[6], a[7])


@rule(aten._native_batch_norm_legit_no_training.default, supports=_batch_norm_supported)
def _batch_norm_inference(t, node):
    # (input, weight, bias, running_mean, running_var, momentum, eps)
    a = node.args
    return _batch_norm(t, node, False, a[3], a[4], a[5], a[6])


@rule(aten._native_batch_norm_legit.no_stats, supports=_batch_norm_supported)
def _batch_norm_no_stats(t, node):
    # (input, weight, bias, training, momentum, eps)
    a = node.args
    return _batch_norm(t, node, True, None, None, a[4], a[5])
