"""Op-level checks: each small function, compiled with the backend under test,
must match eager PyTorch on fresh random inputs (values, dtypes, shapes)."""
import math

import pytest
import torch
import torch.nn.functional as F

from conftest import DEVICE, GRAD_TOL, assert_close, astitch_regions, compile_fn

f16, bf16, f32 = torch.float16, torch.bfloat16, torch.float32


def rn(*shape, dtype=f32):
    return torch.randn(shape, device=DEVICE, dtype=dtype)


def pos(*shape, dtype=f32):
    """Strictly positive, away from 0 (log, sqrt, rsqrt, pow 0.5, divisors)."""
    return (torch.rand(shape, device=DEVICE) + 0.1).to(dtype)


def ri(lo, hi, *shape, dtype=torch.int64):
    return torch.randint(lo, hi, shape, device=DEVICE, dtype=dtype)


def small_ints(*shape):
    """Floats holding small integers, so comparisons see ties and zeros."""
    return ri(-2, 3, *shape).float()


def bools(*shape):
    return torch.rand(shape, device=DEVICE) > 0.5


def unused_node(x):
    y = x.exp()  # noqa: F841  (feeds no output)
    return x + 1


def intermediate_also_output(x):
    y = x * 2
    return y, y.exp() + y


def aliased_outputs(x):
    y = x + 1
    return y, y.view(-1), y.t()


def local_inplace(x):
    y = x.clone()
    y.mul_(2).add_(1)
    return y.relu()


def causal_softmax(x):
    s = torch.arange(x.shape[-1], device=x.device)
    keep = s[None, :] <= s[:, None]
    return x.masked_fill(~keep, float("-inf")).softmax(-1)


def causal_tril(x):
    n = x.shape[-1]
    keep = torch.tril(torch.ones(n, n, dtype=torch.bool, device=x.device))
    return torch.where(keep, x, torch.finfo(x.dtype).min).softmax(-1)


def matmul_region(x, w, b):
    h = F.gelu((x * 0.5 + 1.0) @ w) + b
    return h.softmax(-1) * x.sum(-1, keepdim=True)


def max_dim(x):
    v, i = x.max(dim=-1)
    return v, i


# (id, fn, builder returning the input tuple)
CASES = [
    # arithmetic, tensor-tensor / tensor-scalar / broadcast / 0-dim
    ("add", lambda x, y: x + y, lambda: (rn(4, 8), rn(4, 8))),
    ("sub", lambda x, y: x - y, lambda: (rn(4, 8), rn(4, 8))),
    ("mul", lambda x, y: x * y, lambda: (rn(4, 8), rn(4, 8))),
    ("div", lambda x, y: x / y, lambda: (rn(4, 8), pos(4, 8))),
    ("add_scalar", lambda x: x + 2.5, lambda: (rn(4, 8),)),
    ("rsub_scalar", lambda x: 3.0 - x, lambda: (rn(4, 8),)),
    ("mul_scalar", lambda x: x * 0.5, lambda: (rn(4, 8),)),
    ("div_scalar", lambda x: x / 3.0, lambda: (rn(4, 8),)),
    ("rdiv_scalar", lambda x: 2.0 / x, lambda: (pos(4, 8),)),
    ("add_alpha", lambda x, y: torch.add(x, y, alpha=-0.5), lambda: (rn(4, 8), rn(4, 8))),
    ("bcast_3d", lambda x, y: x + y, lambda: (rn(4, 1, 8), rn(3, 1))),
    ("bcast_row", lambda x, y: x * y, lambda: (rn(5, 7), rn(7))),
    ("bcast_col", lambda x, y: x - y, lambda: (rn(5, 7), rn(5, 1))),
    ("bcast_both", lambda x, y: x / y, lambda: (rn(1, 6), pos(5, 1))),
    ("zero_dim_mul", lambda x, s: x * s, lambda: (rn(4, 8), rn())),
    ("zero_dim_rsub", lambda x, s: s - x, lambda: (rn(4, 8), rn())),
    ("zero_dim_only", lambda s, t: (s * t).exp(), lambda: (rn(), rn())),
    # dtype promotion
    ("int32_plus_f32", lambda i, x: i + x, lambda: (ri(-9, 9, 4, 8, dtype=torch.int32), rn(4, 8))),
    ("int64_times_2_5", lambda i: i * 2.5, lambda: (ri(-9, 9, 4, 8),)),
    ("int32_plus_int", lambda i: i + 3, lambda: (ri(-9, 9, 4, 8, dtype=torch.int32),)),
    ("int32_plus_0dim_int64", lambda i, s: i + s, lambda: (ri(-9, 9, 4, 8, dtype=torch.int32), ri(-9, 9))),
    ("f16_plus_0dim_f32", lambda x, s: x + s, lambda: (rn(4, 8, dtype=f16), rn())),
    ("f16_plus_f32", lambda x, y: x + y, lambda: (rn(4, 8, dtype=f16), rn(4, 8))),
    ("int_truediv", lambda i, j: i / j, lambda: (ri(-9, 9, 4, 8, dtype=torch.int32), ri(1, 5, 4, 8, dtype=torch.int32))),
    ("int_floordiv_neg", lambda i: i // 3, lambda: (ri(-9, 9, 4, 8),)),
    ("int_remainder_neg", lambda i: i % 3, lambda: (ri(-9, 9, 4, 8),)),
    ("float_floordiv", lambda x: x // 0.7, lambda: (rn(4, 8),)),
    ("float_remainder", lambda x: torch.remainder(x, 0.7), lambda: (rn(4, 8),)),
    # exact multiples: eager // and % are fmod-based, not floor(x / y) (-7.0 // 0.7 == -11)
    ("float_floordiv_multiples", lambda x: x // 0.7, lambda: (ri(-10, 10, 4, 8).float() * 0.7,)),
    ("float_remainder_multiples", lambda x: x % 0.7, lambda: (ri(-10, 10, 4, 8).float() * 0.7,)),
    ("div_trunc", lambda x, y: torch.div(x, y, rounding_mode="trunc"), lambda: (rn(4, 8) * 5, pos(4, 8))),
    ("bool_times_float", lambda x: x * (x > 0), lambda: (rn(4, 8),)),
    ("bool_sum_int64", lambda x: (x > 0).sum(-1), lambda: (rn(4, 8),)),
    # bool masks
    ("gt_zero", lambda x: x > 0, lambda: (rn(4, 8),)),
    ("where", lambda x, y: torch.where(x > 0, x, y), lambda: (rn(4, 8), rn(4, 8))),
    ("where_scalar", lambda x: torch.where(x > 0, x, 0.0), lambda: (rn(4, 8),)),
    ("where_bcast", lambda m, x, y: torch.where(m, x, y), lambda: (bools(4, 1), rn(1, 8), rn(4, 8))),
    ("masked_fill", lambda x: x.masked_fill(x < 0, -1.5), lambda: (rn(4, 8),)),
    ("masked_fill_bcast", lambda x, m: x.masked_fill(m, 0.0), lambda: (rn(4, 8), bools(8))),
    # unary
    ("neg", torch.neg, lambda: (rn(4, 8),)),
    ("abs", torch.abs, lambda: (rn(4, 8),)),
    ("exp", torch.exp, lambda: (rn(4, 8),)),
    ("log", torch.log, lambda: (pos(4, 8),)),
    ("log1p", torch.log1p, lambda: (pos(4, 8),)),
    ("expm1", torch.expm1, lambda: (rn(4, 8),)),
    ("sqrt", torch.sqrt, lambda: (pos(4, 8),)),
    ("rsqrt", torch.rsqrt, lambda: (pos(4, 8),)),
    ("reciprocal", torch.reciprocal, lambda: (pos(4, 8),)),
    ("tanh", torch.tanh, lambda: (rn(4, 8) * 3,)),
    ("sigmoid", torch.sigmoid, lambda: (rn(4, 8) * 3,)),
    ("erf", torch.erf, lambda: (rn(4, 8),)),
    ("sin", torch.sin, lambda: (rn(4, 8) * 3,)),
    ("cos", torch.cos, lambda: (rn(4, 8) * 3,)),
    ("floor", torch.floor, lambda: (rn(4, 8) * 5,)),
    ("ceil", torch.ceil, lambda: (rn(4, 8) * 5,)),
    ("round", torch.round, lambda: (rn(4, 8) * 5,)),
    ("round_half_even", torch.round, lambda: (ri(-8, 8, 4, 8).float() + 0.5,)),
    ("sign", torch.sign, lambda: (small_ints(4, 8),)),
    ("relu", torch.relu, lambda: (rn(4, 8),)),
    ("gelu_erf", lambda x: F.gelu(x), lambda: (rn(4, 8) * 2,)),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), lambda: (rn(4, 8) * 2,)),
    ("silu", F.silu, lambda: (rn(4, 8) * 2,)),
    ("pow2", lambda x: x ** 2, lambda: (rn(4, 8),)),
    ("pow3", lambda x: torch.pow(x, 3), lambda: (rn(4, 8),)),
    ("pow_half", lambda x: x ** 0.5, lambda: (pos(4, 8),)),
    ("pow_tensor", lambda x, y: x ** y, lambda: (pos(4, 8), rn(4, 8))),
    ("clamp", lambda x: x.clamp(min=-0.5, max=0.5), lambda: (rn(4, 8),)),
    ("clamp_min", lambda x: x.clamp_min(0.1), lambda: (rn(4, 8),)),
    ("clamp_max", lambda x: torch.clamp(x, max=0.3), lambda: (rn(4, 8),)),
    ("maximum", torch.maximum, lambda: (rn(4, 8), rn(4, 8))),
    ("minimum", torch.minimum, lambda: (rn(4, 8), rn(1, 8))),
    # comparisons / logic
    ("eq", torch.eq, lambda: (small_ints(4, 8), small_ints(4, 8))),
    ("ne", torch.ne, lambda: (small_ints(4, 8), small_ints(4, 8))),
    ("lt", torch.lt, lambda: (small_ints(4, 8), small_ints(4, 8))),
    ("le", torch.le, lambda: (small_ints(4, 8), small_ints(8))),
    ("gt", torch.gt, lambda: (small_ints(4, 8), small_ints(4, 8))),
    ("ge", torch.ge, lambda: (small_ints(4, 8), small_ints(4, 8))),
    ("eq_scalar", lambda x: x == 1.0, lambda: (small_ints(4, 8),)),
    ("lt_int_float", lambda i, x: i < x, lambda: (ri(-2, 3, 4, 8), small_ints(4, 8))),
    ("logical_and", torch.logical_and, lambda: (bools(4, 8), bools(4, 8))),
    ("logical_or", torch.logical_or, lambda: (bools(4, 8), bools(4, 8))),
    ("logical_not", torch.logical_not, lambda: (bools(4, 8),)),
    ("logical_and_float", torch.logical_and, lambda: (small_ints(4, 8), small_ints(4, 8))),
    ("bool_ops", lambda a, b: (a & ~b) | (a ^ b), lambda: (bools(4, 8), bools(4, 8))),
    # type conversions
    ("to_f16", lambda x: x.to(f16), lambda: (rn(4, 8),)),
    ("to_bf16", lambda x: x.to(bf16), lambda: (rn(4, 8),)),
    ("f16_float", lambda x: x.float(), lambda: (rn(4, 8, dtype=f16),)),
    ("bf16_float", lambda x: x.float() * 2, lambda: (rn(4, 8, dtype=bf16),)),
    ("float_int_trunc", lambda x: x.int(), lambda: (rn(4, 8) * 10,)),
    ("float_long", lambda x: x.long() + 1, lambda: (rn(4, 8) * 10,)),
    ("float_bool", lambda x: x.bool(), lambda: (small_ints(4, 8),)),
    ("int_float", lambda i: i.float() / 3, lambda: (ri(-9, 9, 4, 8, dtype=torch.int32),)),
    ("bool_float", lambda m: m.float() * 2 - 1, lambda: (bools(4, 8),)),
    ("f16_to_bf16", lambda x: x.to(bf16), lambda: (rn(4, 8, dtype=f16),)),
    # shapes and layout
    ("view", lambda x: x.view(6, 8) * 2, lambda: (rn(2, 3, 8),)),
    ("reshape", lambda x: x.reshape(-1, 4) + 1, lambda: (rn(2, 3, 8),)),
    ("flatten", lambda x: x.flatten(1).exp(), lambda: (rn(2, 3, 8),)),
    ("flatten_all", lambda x: x.flatten() - 1, lambda: (rn(2, 3, 8),)),
    ("permute", lambda x: x.permute(2, 0, 1) * 3, lambda: (rn(2, 3, 8),)),
    ("permute_add", lambda x, y: x.permute(1, 0, 2) + y, lambda: (rn(2, 3, 8), rn(3, 2, 8))),
    ("transpose", lambda x: x.transpose(0, 2).sin(), lambda: (rn(2, 3, 8),)),
    ("t", lambda x, y: x.t() + y, lambda: (rn(5, 7), rn(7, 5))),
    ("permute_contiguous_view", lambda x: x.permute(0, 2, 1).contiguous().view(2, -1) + 1, lambda: (rn(2, 3, 8),)),
    ("transpose_reshape", lambda x: x.transpose(1, 2).reshape(2, 8, 3).relu(), lambda: (rn(2, 3, 8),)),
    ("slice_step", lambda x: x[:, 1:7:2] * 2, lambda: (rn(4, 9),)),
    ("slice_mixed", lambda x: x[1:, ::3] + x[:-1, 1::3], lambda: (rn(4, 9),)),
    ("slice_neg", lambda x: x[..., -2:].exp(), lambda: (rn(3, 4, 5),)),
    ("select", lambda x: x[:, 3] - x[:, 0], lambda: (rn(4, 9),)),
    ("narrow", lambda x: x.narrow(1, 2, 3) + 1, lambda: (rn(4, 9),)),
    ("chunk", lambda x: (lambda a, b: a * b.sigmoid())(*x.chunk(2, -1)), lambda: (rn(4, 8),)),
    ("cat0", lambda x, y: torch.cat([x, y], 0) * 2, lambda: (rn(2, 5), rn(3, 5))),
    ("cat1", lambda x, y, z: torch.cat([x, y.exp(), z], 1), lambda: (rn(3, 2), rn(3, 4), rn(3, 1))),
    ("cat_neg_dim", lambda x, y: torch.cat([x, -y], -1).relu(), lambda: (rn(2, 3, 4), rn(2, 3, 2))),
    ("stack0", lambda x, y: torch.stack([x, y]) + 1, lambda: (rn(3, 4), rn(3, 4))),
    ("stack1", lambda x, y: torch.stack([x, y * 2], 1), lambda: (rn(3, 4), rn(3, 4))),
    ("squeeze", lambda x: x.squeeze(1) * 2, lambda: (rn(4, 1, 8),)),
    ("squeeze_all", lambda x: x.squeeze() + 1, lambda: (rn(1, 4, 1, 8),)),
    ("unsqueeze", lambda x, y: x.unsqueeze(1) + y.unsqueeze(0), lambda: (rn(4, 8), rn(3, 8))),
    ("expand", lambda x, y: x.expand(3, 5) + y, lambda: (rn(3, 1), rn(3, 5))),
    ("expand_new_dim", lambda x: x.expand(2, 4, 8).exp(), lambda: (rn(4, 8),)),
    ("repeat", lambda x: x.repeat(2, 3) * 2, lambda: (rn(2, 3),)),
    # reductions
    ("sum_last", lambda x: x.sum(-1), lambda: (rn(4, 5, 6),)),
    ("sum_first", lambda x: x.sum(0), lambda: (rn(4, 5, 6),)),
    ("sum_multi", lambda x: x.sum((0, 2)), lambda: (rn(4, 5, 6),)),
    ("sum_keepdim", lambda x: x - x.sum(1, keepdim=True), lambda: (rn(4, 5, 6),)),
    ("sum_all", lambda x: x.sum(), lambda: (rn(4, 5, 6),)),
    ("sum_int", lambda i: i.sum(-1), lambda: (ri(-9, 9, 4, 8, dtype=torch.int32),)),
    ("mean_last", lambda x: x.mean(-1), lambda: (rn(4, 5, 6),)),
    ("mean_multi_keepdim", lambda x: x.mean((1, 2), keepdim=True) * x, lambda: (rn(4, 5, 6),)),
    ("mean_all", lambda x: x.mean(), lambda: (rn(4, 5, 6),)),
    ("amax", lambda x: x.amax(-1), lambda: (rn(4, 5, 6),)),
    ("amax_multi", lambda x: x.amax((0, 1), keepdim=True), lambda: (rn(4, 5, 6),)),
    ("amin", lambda x: x.amin(0), lambda: (rn(4, 5, 6),)),
    ("amin_multi", lambda x: x.amin((0, 2)), lambda: (rn(4, 5, 6),)),
    ("max_dim", max_dim, lambda: (rn(4, 9),)),
    ("argmax", lambda x: x.argmax(-1), lambda: (rn(4, 9),)),
    ("var", lambda x: x.var(-1), lambda: (rn(4, 9),)),
    ("var_corr0", lambda x: x.var(-1, correction=0, keepdim=True), lambda: (rn(4, 9),)),
    ("std", lambda x: x.std(0), lambda: (rn(4, 9),)),
    ("std_corr0_multi", lambda x: torch.std(x, (0, 2), correction=0), lambda: (rn(3, 4, 5),)),
    ("var_mean", lambda x: torch.var_mean(x, -1, correction=0), lambda: (rn(4, 9),)),
    ("softmax_last", lambda x: x.softmax(-1), lambda: (rn(4, 9) * 3,)),
    ("softmax_dim0", lambda x: F.softmax(x, dim=0), lambda: (rn(4, 9) * 3,)),
    ("log_softmax_last", lambda x: F.log_softmax(x, -1), lambda: (rn(4, 9) * 3,)),
    ("log_softmax_dim0", lambda x: x.log_softmax(0), lambda: (rn(4, 9) * 3,)),
    ("softmax_f16_to_f32", lambda x: x.softmax(-1, dtype=f32), lambda: (rn(4, 9, dtype=f16),)),
    ("layer_norm_affine", lambda x, w, b: F.layer_norm(x, (16,), w, b, 1e-5), lambda: (rn(2, 3, 16), rn(16), rn(16))),
    ("layer_norm_plain", lambda x: F.layer_norm(x, (16,)), lambda: (rn(2, 3, 16) * 2 + 1,)),
    ("layer_norm_2d_shape", lambda x: F.layer_norm(x, (3, 8), eps=1e-6), lambda: (rn(2, 3, 8),)),
    ("slice_grad", lambda x: x[:, 2:6].exp() * x[:, :4], lambda: (rn(3, 8),)),
    ("rms_norm", lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, lambda: (rn(2, 3, 16), rn(16))),
    # gathers
    ("embedding", lambda i, t: F.embedding(i, t), lambda: (ri(0, 10, 2, 5), rn(10, 8))),
    ("embedding_plus_pos", lambda i, t, p: F.embedding(i, t) + p, lambda: (ri(0, 10, 2, 5), rn(10, 8), rn(5, 8))),
    ("index_select", lambda x, i: torch.index_select(x, 0, i) * 2, lambda: (rn(6, 4), ri(0, 6, 5))),
    ("index_select_dim1", lambda x, i: x.index_select(1, i), lambda: (rn(3, 7), ri(0, 7, 4))),
    ("gather", lambda x, i: torch.gather(x, 1, i), lambda: (rn(4, 6), ri(0, 6, 4, 3))),
    ("index_tensor", lambda x, i: x[i] + 1, lambda: (rn(6, 4), ri(0, 6, 3))),
    # factories inside the function
    ("causal_arange_mask", causal_softmax, lambda: (rn(2, 8, 8),)),
    ("causal_tril_mask", causal_tril, lambda: (rn(2, 8, 8),)),
    ("arange_plus", lambda x: x + torch.arange(x.shape[-1], device=x.device), lambda: (rn(3, 8),)),
    ("arange_float_step", lambda x: x * torch.arange(0, 4, 0.5, device=x.device), lambda: (rn(3, 8),)),
    ("full", lambda x: x * torch.full((4, 8), 2.0, device=x.device) - 1, lambda: (rn(4, 8),)),
    ("zeros_ones_like", lambda x: torch.where(x > 0, torch.zeros_like(x), torch.ones_like(x) * x), lambda: (rn(4, 8),)),
    ("full_like", lambda x: torch.maximum(x, torch.full_like(x, -0.25)), lambda: (rn(4, 8),)),
    # f16 / bf16
    ("f16_add_mul", lambda x, y: x * y + x, lambda: (rn(4, 8, dtype=f16), rn(4, 8, dtype=f16))),
    ("bf16_add_mul", lambda x, y: x * y + x, lambda: (rn(4, 8, dtype=bf16), rn(4, 8, dtype=bf16))),
    ("f16_exp_scalar", lambda x: (x * 0.5).exp(), lambda: (rn(4, 8, dtype=f16),)),
    ("bf16_gelu", F.gelu, lambda: (rn(4, 8, dtype=bf16),)),
    ("f16_silu", F.silu, lambda: (rn(4, 8, dtype=f16),)),
    ("f16_softmax", lambda x: x.softmax(-1), lambda: (rn(4, 9, dtype=f16) * 3,)),
    ("bf16_softmax", lambda x: x.softmax(-1), lambda: (rn(4, 9, dtype=bf16) * 3,)),
    ("f16_layer_norm", lambda x, w, b: F.layer_norm(x, (16,), w, b), lambda: (rn(2, 3, 16, dtype=f16), rn(16, dtype=f16), rn(16, dtype=f16))),
    ("bf16_layer_norm", lambda x, w, b: F.layer_norm(x, (16,), w, b), lambda: (rn(2, 3, 16, dtype=bf16), rn(16, dtype=bf16), rn(16, dtype=bf16))),
    ("bf16_sum", lambda x: x.sum(-1), lambda: (rn(4, 16, dtype=bf16),)),
    # region boundaries and graph structure
    ("matmul_region", matmul_region, lambda: (rn(4, 8), rn(8, 6) / math.sqrt(8), rn(6))),
    ("linear_gelu_bias", lambda x, w, b: F.gelu(F.linear(x, w)) + b, lambda: (rn(2, 3, 8), rn(6, 8), rn(6))),
    ("bmm_softmax", lambda q, k: (q @ k.transpose(-1, -2) / 2).softmax(-1), lambda: (rn(2, 4, 8), rn(2, 5, 8))),
    ("unused_node", unused_node, lambda: (rn(4, 8),)),
    ("intermediate_also_output", intermediate_also_output, lambda: (rn(4, 8),)),
    ("aliased_outputs", aliased_outputs, lambda: (rn(4, 8),)),
    ("slice_scatter", lambda x, y: torch.slice_scatter(x, y.exp(), dim=1, start=2, end=5) * 2,
     lambda: (rn(4, 8), rn(4, 3))),
    ("slice_scatter_edge", lambda x, y: torch.slice_scatter(x * 3, y, dim=0, start=2),
     lambda: (rn(4, 8), rn(2, 8))),
    ("input_passthrough", lambda x, y: (x, x.sin() + y), lambda: (rn(4, 8), rn(4, 8))),
    ("local_inplace", local_inplace, lambda: (rn(4, 8),)),
]


# Cases whose ops stay in PyTorch (no rule, or a view returned from the graph): they check that
# the backend leaves them alone. Every other case must compile at least one astitch region.
STAYS_IN_PYTORCH = {"max_dim", "argmax", "gather", "aliased_outputs", "view", "reshape",
                    "flatten", "flatten_all", "permute", "transpose", "t", "slice_step",
                    "slice_mixed", "slice_neg", "select", "narrow", "squeeze", "squeeze_all",
                    "unsqueeze", "expand", "expand_new_dim", "input_passthrough"}


@pytest.mark.parametrize("fn,build", [pytest.param(f, b, id=i) for i, f, b in CASES])
def test_op(fn, build, request):
    case = request.node.callspec.id
    inputs = build()
    expected = fn(*inputs)
    out = []
    regions = astitch_regions(lambda: out.append(compile_fn(fn, fullgraph=True)(*inputs)))
    assert_close(out[0], expected, None, case)
    if regions is not None and case not in STAYS_IN_PYTORCH:
        assert regions, f"{case}: no astitch region was compiled"


def _layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


GRAD_CASES = [
    ("gelu", F.gelu, lambda: (rn(4, 8) * 2,)),
    ("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), lambda: (rn(4, 8) * 2,)),
    ("layer_norm", _layer_norm, lambda: (rn(2, 3, 16), rn(16), rn(16))),
    ("softmax", lambda x: x.softmax(-1), lambda: (rn(4, 9) * 2,)),
    ("log_softmax_dim0", lambda x: x.log_softmax(0), lambda: (rn(4, 9) * 2,)),
    ("bcast_mul_bias", lambda x, w, b: x * w + b, lambda: (rn(2, 4, 8), rn(8), rn(4, 1))),
    ("sum_mean", lambda x: x.sum(-1) * x.mean((0, 1)).sum(), lambda: (rn(3, 4, 5),)),
    ("silu_mul", lambda g, u: F.silu(g) * u, lambda: (rn(4, 8), rn(4, 8))),
    ("slice_grad", lambda x: x[:, 2:6].exp() * x[:, :4], lambda: (rn(3, 8),)),
    ("rms_norm", lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w, lambda: (rn(2, 3, 16), rn(16))),
    ("batch_norm", lambda x, w, b: F.relu(F.batch_norm(x, None, None, w, b, training=True)),
     lambda: (rn(4, 6, 5, 3) * 2 + 1, rn(6), rn(6))),
]


@pytest.mark.parametrize("fn,build", [pytest.param(f, b, id=i) for i, f, b in GRAD_CASES])
def test_grad(fn, build, request):
    what = request.node.callspec.id
    inputs = build()
    eager_in = [t.clone().requires_grad_() for t in inputs]
    comp_in = [t.clone().requires_grad_() for t in inputs]
    expected = fn(*eager_in)
    actual = compile_fn(fn, fullgraph=True)(*comp_in)
    assert_close(actual, expected, f32, what)
    g = torch.randn_like(expected)
    expected.backward(g)
    actual.backward(g)
    for k, (a, e) in enumerate(zip(comp_in, eager_in)):
        assert_close(a.grad, e.grad, f32, f"{what} grad of input {k}", tol=GRAD_TOL)


class _SmallMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.norm = torch.nn.LayerNorm(32)
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x)))).softmax(-1)


def test_module_no_grad():
    model = _SmallMLP().to(DEVICE).eval()
    x = rn(2, 5, 16)
    compiled = compile_fn(model)
    with torch.no_grad():
        expected = model(x)
        actual = compiled(x)
    assert not actual.requires_grad
    assert_close(actual, expected, f32, "no_grad module")


def test_static_shapes_recompile():
    fn = compile_fn(lambda x, b: F.layer_norm(x * 2 + b, (x.shape[-1],)).relu(), dynamic=False)
    for shape in [(3, 8), (5, 8), (5, 12)]:
        x, b = rn(*shape), rn(shape[-1])
        assert_close(fn(x, b), F.layer_norm(x * 2 + b, (shape[-1],)).relu(), f32, f"dynamic=False {shape}")


def test_shape_change_default_dynamic():
    """A second shape makes dynamo retrace with symbolic sizes: the backend
    must either handle them or fall back, but stay correct."""
    fn = compile_fn(lambda x: x.softmax(-1) * x.sum(0))
    for shape in [(3, 8), (5, 8), (7, 8)]:
        x = rn(*shape)
        assert_close(fn(x), x.softmax(-1) * x.sum(0), f32, f"shape {shape}")


def test_harness_detects_wrong_result():
    """The comparison must catch a backend that is slightly wrong."""
    def off_by_a_bit(gm, example_inputs):
        return lambda *args: [o + 1e-3 for o in gm(*args)]

    x = rn(4, 8)
    actual = torch.compile(lambda t: (t.exp(),), backend=off_by_a_bit)(x)
    with pytest.raises(AssertionError):
        assert_close(actual, (x.exp(),), f32, "perturbed")


@pytest.mark.parametrize("mode", ["train", "eval", "no_stats", "bf16_train", "1d"])
def test_batch_norm_module(mode):
    """BatchNorm's forward is an astitch region in training (the batch's statistics, the
    running statistics updated with the unbiased variance) and in inference (the running
    statistics), with and without running statistics, in f32 and bf16: the same outputs and
    the same running statistics as eager."""
    import copy
    dtype = bf16 if mode.startswith("bf16") else f32
    if mode == "1d":
        model, x = torch.nn.BatchNorm1d(12), rn(32, 12, dtype=dtype) * 3 + 2
    else:
        model = torch.nn.BatchNorm2d(8, track_running_stats=mode != "no_stats", momentum=0.2)
        x = rn(4, 8, 6, 5, dtype=dtype) * 3 + 2
    model = model.to(DEVICE, dtype).train(mode != "eval")
    with torch.no_grad():
        model.weight.uniform_(0.5, 1.5)
        model.bias.uniform_(-1, 1)
        if model.running_mean is not None:
            model.running_mean.uniform_(-1, 1)
            model.running_var.uniform_(0.5, 2)
    ref = copy.deepcopy(model)
    compiled = compile_fn(model)
    out = []
    regions = astitch_regions(lambda: out.append(compiled(x)))
    with torch.no_grad():
        assert_close(out[0], ref(x), None, f"batch norm {mode}")
    for name, buf in ref.named_buffers():
        mine = dict(model.named_buffers())[name]
        assert_close(mine, buf, None if buf.is_floating_point() else None, f"{mode} {name}")
    if regions is not None:
        targets = {n.target for r in regions for n in r.fallback.graph.nodes}
        assert any("batch_norm" in str(t) for t in targets), targets
        assert all(r.exe is not None for r in regions), [r.reason for r in regions]
