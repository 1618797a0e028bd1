"""Rules of data movement (views, permutes, slices, concatenation, repeats, gathers) and of
sources (full, arange)."""

import torch

from . import dtype_of, meta, rule, shape_of

aten = torch.ops.aten
prims = torch.ops.prims


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
