#!/usr/bin/env python3
"""Kernel for kernel: astitch and torch.compile on the same graph, inputs and GPU.

    kernel_table.py GRAPH.json... [--replays N] [--json FILE]

Each graph runs twice in one process on the same input tensors (peers.make_inputs, seed 1):
astitch through its Python package (astitch.compile(json, target="cuda"), run_device on the
current stream, its variant search settled by three runs first) and the graph translated to
PyTorch (peers_ops.build_torch) under torch.compile in its default mode. Each side is captured
into one CUDA graph (one call) and measured two ways:

  graph us      the replay of the captured call: 5 batches of 20 replays back to back between
                two CUDA events, the lowest batch's time per replay (launch gaps included).
  kernels       torch.profiler over N replays (default 10): every kernel's device time from
                CUPTI, no gaps, per replay, grouped by kernel name and launch shape (grid,
                block, registers, shared memory). A name that says GEMM (cuBLAS, cuBLASLt,
                CUTLASS, nvjet: peers.GEMM_KERNEL) counts as a matmul, every other kernel and
                memset as the rest.

One input set on both sides, not rotated: a graph whose bytes fit in the L2 (50 MB on an H100)
may find its inputs there on both sides. Needs CUDA, torch, numpy, and astitch's Python package
(PYTHONPATH=<build>/python) with its library.
"""

import argparse
import collections
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import peers  # noqa: E402
import peers_ops  # noqa: E402


def replay_us(torch, graph):
    """The lowest of 5 batches of 20 back-to-back replays, per replay, in us."""
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = None
    for _ in range(5):
        e0.record()
        for _ in range(20):
            graph.replay()
        e1.record()
        e1.synchronize()
        us = e0.elapsed_time(e1) * 1e3 / 20
        best = us if best is None else min(best, us)
    return best


def kernels(torch, graph, replays):
    """[(us per replay, launches per replay, name, grid, block, registers, shared bytes)] of
    the kernels of `replays` replays under torch.profiler, longest first."""
    prof = torch.profiler
    with prof.profile(activities=[prof.ProfilerActivity.CUDA]) as p:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        p.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            events = json.load(f)["traceEvents"]
    launch = collections.defaultdict(list)
    for ev in events:
        if ev.get("cat") not in ("kernel", "gpu_memset"):
            continue
        a = ev.get("args", {})
        key = (ev["name"], str(a.get("grid", "")), str(a.get("block", "")),
               a.get("registers per thread", ""), a.get("shared memory", ""))
        launch[key].append(float(ev["dur"]))
    rows = [(sum(ds) / replays, len(ds) / replays) + key for key, ds in launch.items()]
    return sorted(rows, key=lambda r: -r[0])


def capture(torch, fn):
    """fn called 3 times on a side stream, then once captured; the graph."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def measure(torch, label, fn, replays):
    g = capture(torch, fn)
    rows = kernels(torch, g, replays)
    gemm = sum(r[0] for r in rows if peers.GEMM_KERNEL.search(r[2]))
    total = sum(r[0] for r in rows)
    res = {"side": label, "graph_us": replay_us(torch, g), "kernels_us": total,
           "gemm_us": gemm, "other_us": total - gemm,
           "kernels": [dict(zip(("us", "launches", "name", "grid", "block", "registers",
                                 "shared_bytes"), r)) for r in rows]}
    del g
    return res


def run_graph(torch, np, astitch, path, replays):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    graph = json.loads(text)
    types = peers_ops.infer_types(graph)
    params, outs = peers_ops.params_and_outputs(graph)
    inputs = peers.make_inputs(np, graph, np.random.default_rng(1))
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "i32": torch.int32, "i64": torch.int64, "bool": torch.bool}

    def tensor(p):
        a, d = inputs[p], types[p][0]
        t = torch.from_numpy(a.view("int16") if d == "bf16" else a)
        return (t.view(torch.bfloat16) if d == "bf16" else t).cuda()

    args = [tensor(p) for p in params]
    results = [torch.empty(types[o][1], dtype=dt[types[o][0]], device="cuda") for o in outs]
    exe = astitch.compile(text, target="cuda")
    in_ptrs, out_ptrs = [t.data_ptr() for t in args], [t.data_ptr() for t in results]
    for _ in range(3):  # the variant search times its forms at the first run outside a capture
        exe.run_device(in_ptrs, out_ptrs, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    sides = [measure(torch, "astitch", lambda: exe.run_device(
        in_ptrs, out_ptrs, torch.cuda.current_stream().cuda_stream), replays)]
    fn, _, _ = peers_ops.build_torch(graph, "cuda")
    torch._dynamo.reset()
    compiled = torch.compile(fn, dynamic=False)
    sides.append(measure(torch, "torch.compile", lambda: compiled(*args), replays))
    state, form, _ = exe.variant()
    return {"graph": os.path.basename(path), "astitch_variant": f"{state}, {form}",
            "sides": sides}


def print_graph(r):
    print(f"## {r['graph']} (astitch variant: {r['astitch_variant']})")
    for s in r["sides"]:
        print(f"{s['side']}: graph {s['graph_us']:.1f} us; kernels {s['kernels_us']:.1f} us "
              f"(matmuls {s['gemm_us']:.1f}, the rest {s['other_us']:.1f})")
        for k in s["kernels"]:
            print(f"  {k['us']:8.2f} us  x{k['launches']:<4g} grid {k['grid']:<14} block "
                  f"{k['block']:<14} regs {str(k['registers']):<4} {k['name'][:70]}")
    a, t = r["sides"]
    print(f"ratio torch.compile / astitch: graph {t['graph_us'] / a['graph_us']:.3f}, the rest "
          f"{t['other_us'] / a['other_us']:.3f}" if a["other_us"] else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graphs", nargs="+")
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args()
    try:
        import numpy as np
        import torch
        import astitch
    except ImportError as e:
        sys.exit(f"kernel_table.py: {e} (needs numpy, torch and astitch's Python package)")
    if not torch.cuda.is_available():
        sys.exit("kernel_table.py: no CUDA device")
    if args.replays < 1:
        sys.exit("kernel_table.py: --replays must be at least 1")
    results = []
    for path in args.graphs:
        try:
            r = run_graph(torch, np, astitch, path, args.replays)
        except (OSError, ValueError, KeyError, RuntimeError, astitch.Error) as e:
            sys.exit(f"kernel_table.py: {path}: {e}")
        print_graph(r)
        results.append(r)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
