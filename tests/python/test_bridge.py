"""The bridge's own behaviour: the binding, fallbacks and their reasons, strict mode, explain,
inputs that need copying, autocast and (on CUDA) CUDA-graph capture."""

import logging
import math
import os
import subprocess
import sys

import pytest
import torch

from conftest import BACKEND, DEVICE, TOL, assert_close, astitch_regions, compile_fn

astitch_only = pytest.mark.skipif(BACKEND != "astitch", reason="tests the astitch bridge itself")

if BACKEND == "astitch":
    import astitch
    import astitch.torch
    from astitch import _native
    from astitch.torch import config, region


# ---- the binding -------------------------------------------------------------------------------

@astitch_only
def test_graph_builder_round_trip():
    b = astitch.GraphBuilder("axpy")
    x = b.parameter("f32", (3, 5))
    y = b.parameter("f32", (5,))
    out = b.binary("add", b.binary("mul", x, b.scalar("f32", 2.5, (3, 5))), b.broadcast_to(y, (3, 5)))
    b.output(b.reduce("sum", out, [1]))
    exe = astitch.compile(b.to_json(), "host")
    assert (exe.num_inputs, exe.num_outputs, exe.target) == (2, 1, "host")
    xs, ys = torch.randn(3, 5), torch.randn(5)
    r = torch.empty(3)
    exe.run_host([xs.data_ptr(), ys.data_ptr()], [r.data_ptr()])
    assert_close(r, (xs * 2.5 + ys).sum(1), torch.float32, "axpy row sums")
    assert "kernel" in exe.plan_text()
    assert exe.variant() == ("none", "default", {})   # the host target searches no forms


@astitch_only
def test_binding_errors_name_the_place():
    with pytest.raises(astitch.Error) as e:
        astitch.compile('{"format": "astitch-graph", "version": 1, "nodes": [', "host",
                        source="broken.json")
    assert e.value.status == "parse error"
    assert "broken.json" in str(e.value)
    with pytest.raises(astitch.Error) as e:
        astitch.compile('{"format": "astitch-graph", "version": 1, "nodes": ['
                        '{"name": "x", "op": "parameter", "dtype": "f32", "shape": [2]},'
                        '{"name": "y", "op": "frobnicate", "inputs": ["x"]}],'
                        '"outputs": ["y"]}', "host")
    assert e.value.status == "parse error" and "frobnicate" in str(e.value)
    with pytest.raises(ValueError, match="target"):
        astitch.compile("{}", "tpu")
    b = astitch.GraphBuilder()
    b.output(b.unary("neg", b.parameter("f32", (4,))))
    exe = astitch.compile(b.to_json(), "host")
    with pytest.raises(ValueError, match="inputs: 2 addresses given, the graph has 1"):
        exe.run_host([1, 2], [3])
    with pytest.raises(TypeError):
        exe.run_host(["a"], [0])


@astitch_only
@pytest.mark.skipif(DEVICE != "cuda", reason="the workspace is device memory")
def test_caller_workspace_binding():
    b = astitch.GraphBuilder("colsum")
    x = b.parameter("f32", (4096, 256))
    b.output(b.reduce("sum", b.unary("exp", x), [0]))   # a column sum: split, scratch
    exe = astitch.compile(b.to_json(), "cuda", caller_workspace=True)
    assert exe.workspace_bytes >= 256
    xs, out = torch.randn(4096, 256, device="cuda"), torch.empty(256, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    with pytest.raises(astitch.Error, match="astitch_execute_device_workspace"):
        exe.run_device([xs.data_ptr()], [out.data_ptr()], stream)
    for _ in range(2):
        ws = torch.full((exe.workspace_bytes,), 255, dtype=torch.uint8, device="cuda")
        exe.run_device([xs.data_ptr()], [out.data_ptr()], stream, ws.data_ptr())
        assert_close(out, xs.exp().sum(0), torch.float32, "column sums on a caller workspace",
                     tol=(1e-4, 1e-3))


@astitch_only
@pytest.mark.parametrize("var,value,message", [
    ("ASTITCH_TORCH_MIN_REGION_OPS", "two", "a whole number expected"),
    ("ASTITCH_TORCH_FUSION", "fast", "stitch, xla or none expected"),
])
def test_bad_switch_names_the_variable(var, value, message):
    env = dict(os.environ, **{var: value})
    r = subprocess.run([sys.executable, "-c", "import astitch.torch"], env=env,
                       capture_output=True, text=True)
    assert r.returncode != 0
    assert f"{var}={value!r}: {message}" in r.stderr


# ---- partition and fallbacks ---------------------------------------------------------------------

def _explain(fn, *args):
    return astitch.torch.explain(fn, *args)


@astitch_only
def test_unsupported_ops_stay_in_pytorch_with_reason():
    def fn(x):
        a = (x * 2).exp()
        b = torch.cumsum(a, 0)       # no rule: a path out of the region and back in
        return torch.tanh(a * b + 1) - a

    x = torch.randn(6, 5, device=DEVICE)
    assert_close(compile_fn(fn)(x), fn(x), torch.float32, "cumsum between regions")
    report = _explain(fn, x)
    text = str(report)
    assert "cumsum" in text and "no rule" in text, text
    assert sum(len(g["regions"]) for g in report.graphs) >= 2, text


@astitch_only
def test_f64_stays_in_pytorch():
    def fn(x, y):
        return (x * 3).sin() + y.float().cos()

    x = torch.randn(4, 4, device=DEVICE)
    y = torch.randn(4, 4, device=DEVICE, dtype=torch.float64)
    assert_close(compile_fn(fn)(x, y), fn(x, y), torch.float32, "f64 operand")
    assert "torch.float64" in str(_explain(fn, x, y))


@astitch_only
def test_compile_failure_falls_back_with_a_warning(monkeypatch, caplog):
    def refuse(*args, **kwargs):
        raise _native.Error("astitch_compile: compile error: refused for the test")

    monkeypatch.setattr(_native, "compile", refuse)
    monkeypatch.setattr(region, "_EXECUTABLES", {})
    monkeypatch.setattr(config, "strict", False)

    def fn(x):
        return torch.softmax(x * 2, -1)

    x = torch.randn(3, 7, device=DEVICE)
    with caplog.at_level(logging.WARNING, logger="astitch.torch"):
        assert_close(compile_fn(fn)(x), fn(x), torch.float32, "fallback result")
    assert "refused for the test" in caplog.text and "runs in PyTorch" in caplog.text

    torch._dynamo.reset()
    monkeypatch.setattr(config, "strict", True)
    with pytest.raises(Exception, match="refused for the test"):
        compile_fn(fn)(x)


@astitch_only
def test_run_failure_falls_back(monkeypatch, caplog):
    class Failing:
        num_kernels, num_outputs, target, workspace_bytes = 1, 1, "host", 256

        def output_view(self, i):
            return None

        def run_host(self, *args):
            raise _native.Error("astitch_execute: device error: injected")

        run_device = run_host

    monkeypatch.setattr(_native, "compile", lambda *a, **k: Failing())
    monkeypatch.setattr(region, "_EXECUTABLES", {})
    monkeypatch.setattr(config, "strict", False)

    def fn(x):
        return (x.exp() + 1).log()

    x = torch.randn(5, 3, device=DEVICE)
    f = compile_fn(fn)
    with caplog.at_level(logging.WARNING, logger="astitch.torch"):
        assert_close(f(x), fn(x), torch.float32, "first call after a run failure")
        assert_close(f(x), fn(x), torch.float32, "later call")
    assert caplog.text.count("injected") == 1


@astitch_only
def test_explain_reports_regions_kernels_and_host_cost():
    def fn(x, w):
        return torch.nn.functional.layer_norm(x, (8,), w) * torch.sigmoid(x)

    x, w = torch.randn(4, 8, device=DEVICE), torch.randn(8, device=DEVICE)
    report = _explain(fn, x, w)
    regions = [r for g in report.graphs for r in g["regions"]]
    assert regions and all(r["fallback"] is None for r in regions), str(report)
    assert all(r["kernels"] >= 1 and r["compile_ms"] > 0 for r in regions)
    assert all(r["host_us_per_call"] is not None for r in regions)
    assert "kernel" in regions[0]["plan"]


# ---- inputs and modes ------------------------------------------------------------------------------

def test_noncontiguous_and_misaligned_inputs():
    def fn(a, b):
        return torch.relu(a * 2 + b) - b

    base = torch.randn(65, device=DEVICE)
    b = base[1:].view(8, 8)                        # 4 bytes past the allocation: misaligned
    a = torch.randn(8, 8, device=DEVICE).t()       # not contiguous
    assert_close(compile_fn(fn)(a, b), fn(a, b), torch.float32, "copied inputs")


def test_autocast_forward_and_backward():
    dtype = torch.bfloat16
    lin = torch.nn.Linear(16, 16).to(DEVICE)

    def fn(x):
        h = lin(x)
        return torch.nn.functional.gelu(h) * torch.softmax(h, -1)

    x = torch.randn(4, 16, device=DEVICE)
    with torch.autocast(DEVICE, dtype=dtype):
        expected = fn(x)
        actual = compile_fn(fn)(x)
    assert actual.dtype == expected.dtype
    assert_close(actual.float(), expected.float(), dtype, "autocast output")
    g = torch.randn_like(expected)
    ge = torch.autograd.grad(expected, lin.weight, g)[0]
    ga = torch.autograd.grad(actual, lin.weight, g)[0]
    rtol, atol = TOL[dtype]
    assert_close(ga, ge, None, "autocast weight grad", tol=(rtol, atol * 10))


@pytest.mark.skipif(DEVICE != "cuda", reason="CUDA graphs need a GPU")
def test_cuda_graph_capture_replays():
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(),
                                torch.nn.LayerNorm(64)).to(DEVICE)
    compiled = compile_fn(model)
    static_x = torch.randn(8, 32, device=DEVICE)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):           # compile, time the variants and warm up outside capture
            compiled(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_y = compiled(static_x)
    for _ in range(3):
        x = torch.randn(8, 32, device=DEVICE)
        static_x.copy_(x)
        graph.replay()
        with torch.no_grad():
            assert_close(static_y, model(x), torch.float32, "CUDA graph replay")


@astitch_only
@pytest.mark.skipif(DEVICE != "cuda", reason="workspaces are device memory")
def test_kept_workspaces_per_stream_and_none_under_capture(monkeypatch):
    """A region keeps one workspace per stream: runs on two streams at once stay apart, and a
    capture takes its workspace from the graph's pool, not from those kept."""
    monkeypatch.setattr(region, "WORKSPACE_KEPT", 1 << 30)  # keep whatever the size

    def fn(x):
        return (x * x).sum(0) + torch.tanh(x).mean(0)  # column sums: partials in the workspace

    compiled = compile_fn(fn)
    warm = torch.randn(4096, 512, device=DEVICE)
    regions = astitch_regions(lambda: compiled(warm))
    assert len(regions) == 1 and regions[0]._kept is not None
    kept = regions[0]._kept
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    xs = [torch.randn(4096, 512, device=DEVICE) for _ in range(6)]
    outs = []
    for s in streams:
        s.wait_stream(torch.cuda.current_stream())
    for i, x in enumerate(xs):              # nothing orders the two streams' runs
        with torch.cuda.stream(streams[i % 2]):
            outs.append(compiled(x))
    torch.cuda.synchronize()
    for x, y in zip(xs, outs):
        assert_close(y, fn(x), torch.float32, "runs on two streams")
    assert len(kept) == 3                   # the warm-up's stream and the two
    held = dict(kept)

    static_x = torch.randn(4096, 512, device=DEVICE)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = compiled(static_x)
    assert len(kept) == 3 and all(kept[k] is v for k, v in held.items())
    for i in range(3):
        x = torch.randn(4096, 512, device=DEVICE)
        static_x.copy_(x)
        graph.replay()
        other = compiled(xs[i])             # a kept workspace, beside the replay's
        assert_close(static_y, fn(x), torch.float32, "replay beside eager runs")
        assert_close(other, fn(xs[i]), torch.float32, "eager run beside a replay")


@astitch_only
@pytest.mark.parametrize("fast", [True, False], ids=["inductor-allocators", "torch.empty"])
def test_outputs_allocated_either_way(monkeypatch, fast):
    """Outputs come from PyTorch's private fast allocators where it has them, from torch.empty
    otherwise; the results are the same."""
    if not fast:
        monkeypatch.setattr(region, "_EMPTY_CUDA", None)
        monkeypatch.setattr(region, "_EMPTY_CPU", None)
    elif (region._EMPTY_CUDA if DEVICE == "cuda" else region._EMPTY_CPU) is None:
        pytest.skip("this PyTorch has no fast allocator")

    def fn(x, w):
        h = torch.nn.functional.layer_norm(x, (24,), w)
        return h * torch.sigmoid(x), h.sum(0), (x * w).amax(-1)

    compiled = compile_fn(fn)
    for _ in range(2):
        x, w = torch.randn(6, 24, device=DEVICE), torch.randn(24, device=DEVICE)
        got = compiled(x, w)
        assert [tuple(t.shape) for t in got] == [(6, 24), (24,), (6,)]
        assert all(t.is_contiguous() and t.device == x.device for t in got)
        assert_close(got, fn(x, w), torch.float32, "outputs")


@astitch_only
def test_clones_join_regions_and_shared_views_stay_views():
    """An attention's q * scale and the copies AOTAutograd's matmul writes before each bmm are
    one region, and no region writes out the permuted qkv that q, k and v are views of."""
    def fn(qkv):
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        p = torch.softmax(torch.matmul(q * 0.25, k.transpose(-2, -1)), -1)
        return torch.matmul(p, v)

    qkv = torch.randn(2, 8, 3, 4, 16, device=DEVICE)
    compiled = compile_fn(fn)
    regions = astitch_regions(lambda: compiled(qkv))
    targets = [{n.target for n in r.fallback.graph.nodes} for r in regions]
    assert any(torch.ops.aten.mul.Tensor in t and torch.ops.aten.clone.default in t
               for t in targets), targets
    largest = max(math.prod(shape) for r in regions for shape, *_ in r._out)
    assert largest <= qkv.numel() // 3, f"a region writes {largest} elements"
    x = torch.randn_like(qkv)
    assert_close(compiled(x), fn(x), torch.float32, "attention")


@astitch_only
@pytest.mark.parametrize("views", [True, False])
def test_view_outputs_are_views_of_inputs(monkeypatch, views):
    """GPT-2's v, split into heads and transposed, and a slice of the scores are returned as
    views of the region's inputs with the FX code's strides, and no kernel writes them
    (config.view_outputs, on by default); off, astitch writes them. Values as in the FX code."""
    from torch.fx.experimental.proxy_tensor import make_fx

    monkeypatch.setattr(config, "view_outputs", views)

    def fn(qkv, scores):
        v = qkv.view(2, 8, 3 * 32)[:, :, 64:].view(2, 8, 4, 8).transpose(1, 2)
        return torch.softmax(scores, -1), v, scores[:, 1:]

    qkv, scores = torch.randn(16, 96, device=DEVICE), torch.randn(8, 8, 8, device=DEVICE)
    gm = make_fx(fn)(qkv, scores)
    r = region.CompiledRegion(gm, [qkv, scores], list(gm(qkv, scores)), "views")
    assert r.exe is not None, r.reason
    assert [kind for kind, _ in r._outputs] == (["out", "view", "view"] if views
                                                 else ["out", "out", "out"])
    for _ in range(2):
        qkv, scores = torch.randn_like(qkv), torch.randn_like(scores)
        got, want = r(qkv, scores), fn(qkv, scores)
        for i, base in ((1, qkv), (2, scores)):
            shares = got[i].untyped_storage().data_ptr() == base.untyped_storage().data_ptr()
            assert shares == views, i
            assert got[i].stride() == want[i].stride(), (i, got[i].stride(), want[i].stride())
        assert_close(list(got), list(want), torch.float32, "view outputs")


@astitch_only
def test_repeated_outputs_are_not_copied():
    """A region whose FX code returns one node twice gives the same tensor twice, and another
    node of the same value (a free view) an alias of its memory: nothing is copied, as in the
    FX code itself (AOTAutograd returns the attention probabilities both as a result and as a
    value saved for the backward)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def fn(x):
        y = torch.exp(x) * 2
        return y, y, y.view(y.shape), x * 3

    x = torch.randn(8, 16, device=DEVICE)
    gm = make_fx(fn)(x)
    r = region.CompiledRegion(gm, [x], list(gm(x)), "repeated")
    assert r.exe is not None, r.reason
    assert [kind for kind, _ in r._outputs] == ["out", "same", "alias", "out"]
    for _ in range(2):
        x = torch.randn(8, 16, device=DEVICE)
        got = r(x)
        assert got[1] is got[0]
        assert got[2] is not got[0] and got[2].data_ptr() == got[0].data_ptr()
        assert_close(list(got), list(fn(x)), torch.float32, "repeated outputs")
