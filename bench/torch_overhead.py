"""Host cost of the PyTorch bridge per call, on a CUDA GPU, for a small region (so that the
host, not the GPU, sets the pace): layer norm of an [8, 256] f32 tensor times a sigmoid.

Rows (us per call: each row is timed in --rounds rounds of --iters calls, the rows taking
turns, so that a drift of the host's speed reaches every row alike; the median and the least
round are printed; the GPU is synchronized every 100 calls so the launch queue never fills):
  run_device     Executable.run_device alone (the C binding and astitch's launches), on a
                 workspace allocated once
  region         a CompiledRegion call (the bridge's per-call Python around run_device: the
                 checks, the outputs' and the workspace's allocation)
  - inputs       its pieces alone: checking and addressing the inputs,
  - empty out    allocating one output as the region does (Inductor's allocator, where
                 PyTorch has it),
  - torch.empty  the same through torch.empty,
  - empty ws     allocating a workspace (torch.empty of workspace_bytes; a region keeps a
                 small one per stream instead, region.WORKSPACE_KEPT),
  - stream       reading the current stream,
  - capturing    asking whether the stream is capturing a CUDA graph
  compiled fn    the torch.compile'd function (dynamo guards, AOTAutograd wrappers, region)
  inductor fn    the same function through torch.compile's default backend, for comparison
  eager fn       the same function in eager PyTorch (its own launches)
With --profile, cProfile's view of the region calls.

    PYTHONPATH=<build>/python python3 bench/torch_overhead.py [--iters N] [--rounds R]
                                                             [--profile]
"""

import argparse
import cProfile
import pstats
import statistics
import time

import torch

import astitch.torch  # noqa: F401  (registers the backend)
from astitch.torch import capture, region as region_module


def per_call_us(fn, iters):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for i in range(iters):
        fn()
        if i % 100 == 99:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / iters * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    def fn(x, w):
        return torch.nn.functional.layer_norm(x, (256,), w) * torch.sigmoid(x)

    x = torch.randn(8, 256, device="cuda")
    w = torch.randn(256, device="cuda")
    torch._dynamo.reset()
    first = len(capture.RECORDS)
    compiled = torch.compile(fn, backend="astitch")
    compiled(x, w)
    regions = [r for rec in capture.RECORDS[first:] for r in rec[3]]
    assert len(regions) == 1 and regions[0].exe is not None, "expected one compiled region"
    region = regions[0]
    inductor = torch.compile(fn)
    inductor(x, w)
    out = torch.empty(8, 256, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    ins, outs = [x.data_ptr(), w.data_ptr()], [out.data_ptr()]
    ws = torch.empty(region.exe.workspace_bytes, dtype=torch.uint8, device="cuda")
    device = x.device
    empty = region_module._EMPTY_CUDA or (
        lambda shape, stride, dtype: torch.empty(shape, dtype=dtype, device=device))
    rows = {
        "run_device": lambda: region.exe.run_device(ins, outs, stream, ws.data_ptr()),
        "region": lambda: region(x, w),
        "- inputs": lambda: region._inputs((x, w)),
        "- empty out": lambda: empty((8, 256), (256, 1), torch.float32),
        "- torch.empty": lambda: torch.empty((8, 256), dtype=torch.float32, device=device),
        "- empty ws": lambda: torch.empty(region.exe.workspace_bytes, dtype=torch.uint8,
                                          device=device),
        "- stream": lambda: region_module._raw_stream(device.index),
        "- capturing": torch.cuda.is_current_stream_capturing,
        "compiled fn": lambda: compiled(x, w),
        "inductor fn": lambda: inductor(x, w),
        "eager fn": lambda: fn(x, w),
    }
    times = {name: [] for name in rows}
    for _ in range(args.rounds):
        for name, call in rows.items():
            times[name].append(per_call_us(call, args.iters))
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{region.exe.num_kernels} astitch kernel(s), workspace "
          f"{region.exe.workspace_bytes} bytes; {args.rounds} rounds of {args.iters} calls")
    print(f"{'':12} {'median us':>10} {'least us':>10}")
    for name, t in times.items():
        print(f"{name:12} {statistics.median(t):10.2f} {min(t):10.2f}")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(2000):
            region(x, w)
        prof.disable()
        torch.cuda.synchronize()
        pstats.Stats(prof).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
