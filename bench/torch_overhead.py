"""Host cost of the PyTorch bridge per call, on a CUDA GPU, for a small region (so that the
host, not the GPU, sets the pace): layer norm of an [8, 256] f32 tensor times a sigmoid.

Rows (us per call, mean over --iters calls after a warm-up, the GPU synchronized every 100
calls so the launch queue never fills):
  run_device     Executable.run_device alone (the C binding and astitch's launches), on a
                 workspace allocated once
  region         a CompiledRegion call (the bridge's per-call Python around run_device: the
                 checks, the outputs' and the workspace's allocation)
  compiled fn    the torch.compile'd function (dynamo guards, AOTAutograd wrappers, region)
  inductor fn    the same function through torch.compile's default backend, for comparison
  eager fn       the same function in eager PyTorch (its own launches)
With --profile, cProfile's view of the region calls.

    PYTHONPATH=<build>/python python3 bench/torch_overhead.py [--iters N] [--profile]
"""

import argparse
import cProfile
import pstats
import time

import torch

import astitch.torch  # noqa: F401  (registers the backend)
from astitch.torch import capture


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
    ap.add_argument("--iters", type=int, default=5000)
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
    rows = {
        "run_device": per_call_us(lambda: region.exe.run_device(ins, outs, stream, ws.data_ptr()),
                                  args.iters),
        "region": per_call_us(lambda: region(x, w), args.iters),
        "compiled fn": per_call_us(lambda: compiled(x, w), args.iters),
        "inductor fn": per_call_us(lambda: inductor(x, w), args.iters),
        "eager fn": per_call_us(lambda: fn(x, w), args.iters),
    }
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{region.exe.num_kernels} astitch kernel(s)")
    for name, us in rows.items():
        print(f"{name:12} {us:8.2f} us per call")
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
