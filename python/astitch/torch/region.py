"""CompiledRegion: one partition of an FX graph, translated to astitch and run in its place.

The region is translated and compiled when the backend is called (dynamo's compile phase), for
the target of its example inputs' device (cuda, or host for CPU tensors); executables are
cached in the process by (graph.json text, target). A region that cannot be translated or
compiled runs its original FX code (a fallback, logged once; an exception under strict mode).

Every call: inputs that are not contiguous or not 16-byte aligned are copied, outputs and the
run's workspace (astitch's temporaries, scratch and counters) are allocated by PyTorch's
allocator, and the launches go to the current CUDA stream; nothing synchronizes the host. A
workspace of up to WORKSPACE_KEPT bytes is allocated once per stream and kept by the region
(stream order keeps one stream's runs apart), except under CUDA-graph capture, where each call
takes its own from the graph's pool. An output whose example value is not contiguous is copied
into a tensor of the example's strides. An output that is an input seen through reshapes,
transposes and slices (astitch's view outputs) is returned as a view of that input, as the FX
code returns it, and no kernel writes it.
"""

import logging
import time

import torch

from .. import _native
from ..graph import GraphBuilder
from . import config
from .ops import RULES, TORCH_TO_ASTITCH, TranslationError, meta

log = logging.getLogger("astitch.torch")
_EXECUTABLES = {}
# Workspaces up to this size are kept per region and stream rather than allocated per call
# (an allocation costs 2-3 us of host time; bench/torch_overhead.py).
WORKSPACE_KEPT = 64 << 10

# The allocators Inductor's generated code calls: (size, stride, dtype) on the current device,
# through PyTorch's caching allocator as torch.empty is, without its argument parsing (about a
# third of its host cost). Private to PyTorch: where they are missing, torch.empty serves.
_GUARDS = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
_EMPTY_CUDA = getattr(_GUARDS, "_empty_strided_cuda", None)
_EMPTY_CPU = getattr(_GUARDS, "_empty_strided_cpu", None)


def _contiguous_strides(shape):
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


class Translator:
    """Maps the FX nodes of one region to values of a GraphBuilder."""

    def __init__(self, builder):
        self.b = builder
        self.values = {}

    def value(self, node):
        if node not in self.values:
            raise TranslationError(f"node '{node.name}' is used before it is translated")
        return self.values[node]

    def operand(self, arg, dtype, shape):
        """arg (an FX node or a Python number) as a value of dtype (None: its own) broadcast to
        shape (None: its own)."""
        if isinstance(arg, torch.fx.Node):
            v = self.value(arg)
            if dtype is not None:
                v = self.b.convert(v, dtype)
            return self.b.broadcast_to(v, shape) if shape is not None else v
        if isinstance(arg, (bool, int, float)):
            return self.b.scalar(dtype, arg, shape or ())
        raise TranslationError(f"operand {arg!r} of type {type(arg).__name__}")


def _check_value(node, v, val):
    want = (TORCH_TO_ASTITCH[val.dtype], tuple(int(d) for d in val.shape))
    if (v.dtype, v.shape) != want:
        raise TranslationError(f"node '{node.name}' ({node.target}) translated to "
                               f"{v.dtype}{list(v.shape)}, eager gives {want[0]}{list(want[1])}")


def translate(gm, input_vals, name):
    """graph.json text of gm (a region's GraphModule), with the region's outputs: a list of
    ("out", index) for an output astitch writes, ("input", i) for one that repeats input i,
    ("same", j) for one whose FX node is output j's (the FX code returns the one tensor twice)
    and ("alias", j) for another node of output j's value (a free view: the FX code returns a
    view of the same memory)."""
    b = GraphBuilder(name)
    t = Translator(b)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, val in zip(placeholders, input_vals):
        t.values[node] = b.parameter(TORCH_TO_ASTITCH[val.dtype], tuple(val.shape))
    params = {t.values[n].name: i for i, n in enumerate(placeholders)}
    outputs, written, nodes = [], {}, {}
    for node in gm.graph.nodes:
        if node.op == "call_function":
            v = RULES[node.target].translate(t, node)
            if not isinstance(v, tuple):
                _check_value(node, v, meta(node))
            t.values[node] = v
        elif node.op == "output":
            results = node.args[0]
            for r in results if isinstance(results, (tuple, list)) else [results]:
                v = t.value(r)
                if v.name in params:
                    outputs.append(("input", params[v.name]))
                elif r in nodes:
                    outputs.append(("same", nodes[r]))
                elif v.name in written:
                    outputs.append(("alias", written[v.name]))
                else:
                    nodes[r] = len(outputs)
                    written[v.name] = len(outputs)
                    outputs.append(("out", b.outputs.__len__()))
                    b.output(v)
    if not b.outputs:
        raise TranslationError("the region writes no output of its own")
    return b.to_json(), outputs


def _compile(text, target, name):
    """The executable of text for target, from the process's cache or compiled; on cuda its
    runs take their workspace from PyTorch's allocator (caller_workspace); outputs that are
    views of an input are left as views (view_outputs) unless config.view_outputs is off."""
    key = (text, target, config.fusion, config.variant_search, config.view_outputs)
    exe = _EXECUTABLES.get(key)
    if exe is None:
        exe = _native.compile(text, target, fusion=config.fusion,
                              variant_search=config.variant_search,
                              caller_workspace=target == "cuda",
                              view_outputs=config.view_outputs, source=name)
        _EXECUTABLES[key] = exe
    return exe


class CompiledRegion:
    """Runs a region through astitch; falls back to `fallback` (its FX code) when it must.

    A plain callable, not an nn.Module: a module's call and attribute writes would cost more
    host time than the rest of a call (bench/torch_overhead.py)."""

    def __init__(self, fallback, input_vals, output_vals, name):
        self.fallback = fallback
        self.name = name
        self.exe = None
        self.reason = None
        self.compile_ms = 0.0
        self.calls = 0      # calls run by astitch, the first one included
        self.host_ns = 0    # their host time, the first one (which may time variants) excluded
        self.first_ns = 0
        self.text = None
        self._in_sig = [(v.dtype, v.shape) for v in input_vals]
        self._out = [(tuple(v.shape), v.dtype, v.stride(), v.is_contiguous())
                     for v in output_vals]
        devices = {v.device for v in input_vals} | {v.device for v in output_vals}
        if len(devices) != 1:
            self._give_up(f"tensors on several devices ({sorted(map(str, devices))})")
            return
        self.device = devices.pop()
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        # the device as Tensor.get_device() gives it: the cuda index, -1 for the CPU
        self._device_index = self.device.index if self.device.type == "cuda" else -1
        target = "cuda" if self.device.type == "cuda" else "host"
        try:
            start = time.perf_counter()
            self.text, self._outputs = translate(fallback, input_vals, name)
            self.exe = _compile(self.text, target, name)
            # per output of the executable: None, or (input, offset, strides) when astitch
            # leaves it as a view of an input
            views = [self.exe.output_view(i) for i in range(self.exe.num_outputs)]
            self.compile_ms = (time.perf_counter() - start) * 1e3
        except Exception as e:  # noqa: BLE001 -- any failure here is a fallback, never a crash
            if config.strict and not isinstance(e, (TranslationError, _native.Error)):
                raise
            self._give_up(str(e) if isinstance(e, (TranslationError, _native.Error))
                          else f"{type(e).__name__}: {e}")
            return
        # {raw stream: (workspace tensor, its address)} for a small workspace, None for one
        # allocated per call; a run's need never grows (it shrinks once a variant search settles)
        self._kept = {} if target == "cuda" and self.exe.workspace_bytes <= WORKSPACE_KEPT \
            else None
        # per output of the executable, in its order: (shape, strides, dtype) to allocate, or
        # None for a view output (its pointer is 0)
        self._alloc = [None if views[i] else (shape, _contiguous_strides(shape), dtype)
                       for (kind, i), (shape, dtype, _, _) in zip(self._outputs, self._out)
                       if kind == "out"]
        self._has_views = any(views)
        self._outputs = [("view", views[i]) if kind == "out" and views[i] else (kind, i)
                         for kind, i in self._outputs]
        # every output written by astitch, in order and contiguous: the results are the buffers
        self._direct = all(kind == "out" and i == j and contiguous for j, ((kind, i), (
            _, _, _, contiguous)) in enumerate(zip(self._outputs, self._out)))
        results = [n for n in fallback.graph.nodes if n.op == "output"][0].args[0]
        self._tuple_out = isinstance(results, (tuple, list))
        log.info("region %s: %d ops -> %d kernels on %s, compiled in %.1f ms", name,
                 sum(n.op == "call_function" for n in fallback.graph.nodes),
                 self.exe.num_kernels, target, self.compile_ms)

    def _give_up(self, reason):
        self.exe, self.reason = None, reason
        first = next((n for n in self.fallback.graph.nodes if n.op == "call_function"), None)
        msg = (f"astitch: region {self.name} (first node {first.name if first else '?'}) runs "
               f"in PyTorch: {reason}")
        if config.strict:
            raise RuntimeError(msg)
        log.warning(msg)

    def _inputs(self, args):
        """(the inputs as astitch takes them: contiguous, 16-byte aligned; their addresses);
        raises TranslationError for one that differs from what the region was compiled for."""
        ins, ptrs = args, []
        index = self._device_index
        for i, (a, (dtype, shape)) in enumerate(zip(args, self._in_sig)):
            if a.dtype is not dtype or a.shape != shape or a.get_device() != index:
                raise TranslationError(f"input {i} is {a.dtype}{list(a.shape)} on {a.device}, "
                                       f"compiled for {dtype}{list(shape)} on {self.device}")
            p = a.data_ptr()
            if p % 16 or not a.is_contiguous():
                if not a.is_contiguous():
                    a = a.contiguous()
                if a.data_ptr() % 16:
                    a = a.clone()
                ins = list(ins) if ins is args else ins
                ins[i] = a
                p = a.data_ptr()
            ptrs.append(p)
        return ins, ptrs

    def _torch_empty(self, shape, stride, dtype):
        """A contiguous tensor on the region's device, where the fast allocators do not serve."""
        return torch.empty(shape, dtype=dtype, device=self.device)

    def _results(self, ins, outs):
        """The region's results as its FX code returns them: a repeated output is the same
        tensor again, or an alias of its memory; a returned input is a copy; a view output is
        a view of its input (copied only where the FX code's strides differ)."""
        results = []
        for (kind, i), (shape, dtype, stride, contiguous) in zip(self._outputs, self._out):
            if kind == "same":
                results.append(results[i])
                continue
            if kind == "alias":
                results.append(torch.ops.aten.alias.default(results[i]))
                continue
            if kind == "view":
                base, offset, strides = ins[i[0]], i[1], i[2]
                r = torch.as_strided(base, shape, strides, base.storage_offset() + offset)
                if not _same_layout(shape, strides, stride):
                    r = torch.empty_strided(shape, stride, dtype=dtype,
                                            device=self.device).copy_(r)
                results.append(r)
                continue
            r = outs[i] if kind == "out" else ins[i].clone()
            if not contiguous:
                r = torch.empty_strided(shape, stride, dtype=dtype, device=self.device).copy_(r)
            results.append(r)
        return results

    def __call__(self, *args):
        exe = self.exe
        if exe is None:
            return self.fallback(*args)
        start = time.perf_counter_ns()
        try:
            ins, in_ptrs = self._inputs(args)
        except TranslationError as e:
            self._give_up(str(e))
            return self.fallback(*args)
        index = self._device_index
        empty = _EMPTY_CUDA if index >= 0 else _EMPTY_CPU  # on the current device
        if empty is None or (index >= 0 and torch._C._cuda_getDevice() != index):
            empty = self._torch_empty
        try:
            if self._has_views:
                outs = [empty(*a) if a else None for a in self._alloc]
                out_ptrs = [o.data_ptr() if o is not None else 0 for o in outs]
            else:
                outs = [empty(shape, stride, dtype) for shape, stride, dtype in self._alloc]
                out_ptrs = [o.data_ptr() for o in outs]
            if index >= 0:
                stream = _raw_stream(index)
                # under capture, never a kept one: graphs captured on one stream would share it
                kept = None if torch.cuda.is_current_stream_capturing() else self._kept
                ws = kept.get(stream) if kept is not None else None
                if ws is None:
                    # one per call goes back to the allocator after the call (stream order
                    # keeps it for the launches queued here); under capture, to the graph's pool
                    t = empty((exe.workspace_bytes,), (1,), torch.uint8)
                    ws = (t, t.data_ptr())
                    if kept is not None:
                        kept[stream] = ws
                exe.run_device(in_ptrs, out_ptrs, stream, ws[1])
            else:
                exe.run_host(in_ptrs, out_ptrs)
        except _native.Error as e:
            self._give_up(str(e))
            return self.fallback(*args)
        results = outs if self._direct else self._results(ins, outs)
        if self.calls:
            self.host_ns += time.perf_counter_ns() - start
        else:
            self.first_ns = time.perf_counter_ns() - start
        self.calls += 1
        return tuple(results) if self._tuple_out else results[0]


def _same_layout(shape, a, b):
    """Whether strides a and b lay out a tensor of shape alike (axes of extent 1 aside)."""
    return all(n == 1 or x == y for n, x, y in zip(shape, a, b))


def _raw_stream(device_index):
    """The current CUDA stream of the device as a CUstream address."""
    return torch._C._cuda_getCurrentRawStream(device_index)
