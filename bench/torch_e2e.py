"""End to end through the PyTorch bridge: one transformer layer per model (and a ResNet-50
bottleneck block), at production shapes,
inference forward and one training step (the gradients set to None, as optimizer.zero_grad()
sets them, then forward and backward), on a CUDA GPU.

Modes, each on the same module weights and the same inputs:
  eager              PyTorch without compilation
  inductor           torch.compile(model) (default mode)
  inductor-ro        torch.compile(model, mode="reduce-overhead") (Inductor's CUDA graphs)
  astitch            torch.compile(model, backend="astitch")
  astitch-graph      the astitch-compiled step captured once into a torch.cuda.CUDAGraph and
                     replayed (inputs copied into the captured buffers are not timed)

Columns: ms per step (median of --iters steps timed one by one between CUDA events after
--warmup steps, host work included, as a training loop sees it), CUDA kernels per step (from
torch.profiler over one step), compile s (the first call's wall time: tracing, compiling,
autotuning), peak MiB (torch.cuda.max_memory_allocated over the timed steps), max error
against eager (relative to the largest eager value; gradients: the worst parameter, relative to
the largest gradient), and for astitch the mean host time of a region call in us (calls after
the first, which may time launch-shape variants).

    PYTHONPATH=<build>/python python3 bench/torch_e2e.py [--models bert32x128,...] [--json F]
"""

import argparse
import copy
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
from models import (BertLayer, GPT2Block, LlamaDecoderLayer, ResNetBottleneck,  # noqa: E402
                    ViTBlock)

import astitch.torch  # noqa: E402  (registers the backend)
from astitch.torch import capture  # noqa: E402


def bert_mask(shape):
    return torch.ones(shape[:2], dtype=torch.long, device="cuda")


MODELS = {
    # name: (factory, input shape, dtype, extra inputs from the input shape)
    "bert32x128": (lambda: BertLayer(768, 12, 3072), (32, 128, 768), torch.float32, bert_mask),
    "bert8x512": (lambda: BertLayer(768, 12, 3072), (8, 512, 768), torch.float32, bert_mask),
    "gpt2_8x1024": (lambda: GPT2Block(768, 12), (8, 1024, 768), torch.float32, None),
    "llama4096_bf16": (lambda: LlamaDecoderLayer(4096, 32, 8, 11008), (2, 1024, 4096),
                       torch.bfloat16, None),
    "vit_b16_64": (lambda: ViTBlock(768, 12, 3072), (64, 197, 768), torch.float32, None),
    # ResNet-50's first-stage block (256 channels, width 64, 56 x 56) at batch 32
    "resnet50_b32": (lambda: ResNetBottleneck(256, 64), (32, 256, 56, 56), torch.float32, None),
}
MODES = ["eager", "inductor", "inductor-ro", "astitch", "astitch-graph"]


def make_step(model, train, params=(), mark_step=False):
    """One step: a forward, or (train) the gradients set to None as optimizer.zero_grad() sets
    them, then a forward and a backward."""
    def step(x, *extra):
        if mark_step:   # reduce-overhead: a new iteration may overwrite the last one's outputs
            torch.compiler.cudagraph_mark_step_begin()
        if not train:
            with torch.no_grad():
                return model(x, *extra)
        for p in params:
            p.grad = None
        out = model(x, *extra)
        out.float().square().mean().backward()
        return out.detach()
    return step


def count_kernels(fn):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def time_steps(fn, warmup, iters):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def max_error(a, b, scale=None):
    scale = scale or b.float().abs().max().item() or 1.0
    return (a.float() - b.float()).abs().max().item() / scale


def run_mode(name, mode, train, base, x, extra, reference, args):
    model = copy.deepcopy(base).train(train)   # inference in eval mode (BatchNorm)
    if mode in ("inductor", "inductor-ro", "astitch", "astitch-graph"):
        kw = {"backend": "astitch"} if mode.startswith("astitch") else (
            {"mode": "reduce-overhead"} if mode == "inductor-ro" else {})
        torch._dynamo.reset()
        model_c = torch.compile(model, **kw)
    else:
        model_c = model
    step = make_step(model_c, train, list(model.parameters()), mode == "inductor-ro")
    first = len(capture.RECORDS)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = step(x, *extra)
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    fn = lambda: step(x, *extra)  # noqa: E731
    if mode == "astitch-graph":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                step(x, *extra)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = step(x, *extra)
        fn = graph.replay
        fn()
    err_g = None
    if mode != "astitch-graph":
        out = fn()
    torch.cuda.synchronize()
    err = max_error(out, reference[0])     # graph mode: the captured buffers after a replay
    if train:
        grads = {n: p.grad for n, p in model.named_parameters()}
        # relative to the largest gradient of all: some (the key bias's) are zero in exact
        # arithmetic, so their own scale is rounding noise
        scale = max(g.float().abs().max().item() for g in reference[1].values())
        err_g = max(max_error(grads[n], g, scale) for n, g in reference[1].items())
    kernels = count_kernels(fn)
    if args.profile:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        print(f"--- {name} {'train' if train else 'infer'} {mode}: kernels by time, one step")
        print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.profile))
    torch.cuda.reset_peak_memory_stats()
    ms = time_steps(fn, args.warmup, args.iters)
    peak = torch.cuda.max_memory_allocated() / 2**20
    regions = [r for rec in capture.RECORDS[first:] for r in rec[3]]
    calls = sum(r.calls - 1 for r in regions if r.calls > 1)
    host_us = sum(r.host_ns for r in regions) / calls / 1e3 if calls else None
    fallbacks = sum(r.exe is None for r in regions)
    return {"model": name, "step": "train" if train else "infer", "mode": mode, "ms": ms,
            "kernels": kernels, "compile_s": compile_s, "peak_mib": peak, "err": err,
            "grad_err": err_g, "regions": len(regions), "fallbacks": fallbacks,
            "host_us_per_region_call": host_us}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--steps", default="infer,train")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="print the N kernels that take most time in one step of each mode")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    print(f"{'model':16} {'step':5} {'mode':14} {'ms':>8} {'kern':>5} {'compile s':>9} "
          f"{'peak MiB':>9} {'err':>8} {'grad err':>8} {'reg':>4} {'host us':>7}")
    for name in args.models.split(","):
        factory, shape, dtype, extra_fn = MODELS[name]
        torch.manual_seed(0)
        base = factory().to("cuda", dtype)
        x = torch.randn(shape, device="cuda", dtype=dtype)
        extra = (extra_fn(shape),) if extra_fn else ()
        for train in [st == "train" for st in args.steps.split(",")]:
            ref_model = copy.deepcopy(base).train(train)
            out = make_step(ref_model, train, list(ref_model.parameters()))(x, *extra)
            ref = (out, {n: p.grad for n, p in ref_model.named_parameters()})
            for mode in args.modes.split(","):
                try:
                    r = run_mode(name, mode, train, base, x, extra, ref, args)
                except Exception as e:  # noqa: BLE001 -- a failed mode is a row, not an abort
                    r = {"model": name, "step": "train" if train else "infer", "mode": mode,
                         "error": f"{type(e).__name__}: {e}"[:300]}
                    print(f"{name:16} {r['step']:5} {mode:14} FAILED {r['error']}")
                    rows.append(r)
                    continue
                rows.append(r)
                ge = f"{r['grad_err']:.1e}" if r["grad_err"] is not None else "-"
                hu = f"{r['host_us_per_region_call']:.1f}" if r["host_us_per_region_call"] else "-"
                print(f"{name:16} {r['step']:5} {mode:14} {r['ms']:8.3f} {r['kernels']:5d} "
                      f"{r['compile_s']:9.2f} {r['peak_mib']:9.0f} {r['err']:8.1e} {ge:>8} "
                      f"{r['regions']:4d} {hu:>7}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
