#!/usr/bin/env python3
"""Checks peers.py's timing without a GPU: per-call timing, CUDA-graph capture and replay, JAX's
pipelined timing and the ratios, against fake torch.cuda and jax objects on a simulated clock.

    python3 bench/test_peers_timing.py

The fake device: a call costs HOST us of host time and queues a kernel of KERNEL us; a graph
replay costs LAUNCH us of host time and queues the captured kernels; an event's time is when the
device reaches it. So per call is host-bound (HOST us) and a replay device-bound (KERNEL us).
"""

import argparse
import contextlib
import csv
import io
import json
import math
import os
import sys
import tempfile
import weakref

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402

HOST, KERNEL, LAUNCH = 50.0, 10.0, 2.0


class Device:
    """Host clock, device-busy-until clock (both us) and a log of what ran."""

    def __init__(self):
        self.host = self.busy = 0.0
        self.log, self.stream, self.capturing = [], "default", None

    def queue(self, us):
        self.busy = max(self.busy, self.host) + us


class FakeTensor:
    serial = 0

    def __init__(self):
        self.id, FakeTensor.serial = FakeTensor.serial, FakeTensor.serial + 1

    def clone(self):
        return FakeTensor()


def fake_torch(dev):
    """A torch with the parts of torch.cuda that peers.py's timing uses."""
    graphs = weakref.WeakSet()

    class Event:
        def __init__(self, enable_timing=False):
            self.t = None

        def record(self):
            self.t = max(dev.host, dev.busy)

        def elapsed_time(self, other):
            return (other.t - self.t) / 1e3

    class Stream:
        def wait_stream(self, other):
            pass

    class CUDAGraph:
        def __init__(self):
            self.work = []
            graphs.add(self)

        def replay(self):
            dev.host += LAUNCH
            for set_id in self.work:
                dev.queue(KERNEL)
                dev.log.append(("replay", set_id))

    @contextlib.contextmanager
    def graph(g, pool=None):
        dev.capturing = g
        try:
            yield
        finally:
            dev.capturing = None

    @contextlib.contextmanager
    def stream(s):
        dev.stream = "side"
        try:
            yield
        finally:
            dev.stream = "default"

    def synchronize():
        dev.host = max(dev.host, dev.busy)

    def empty_cache():
        dev.log.append(("empty_cache", len(graphs)))

    cuda = argparse.Namespace(Event=Event, Stream=Stream, CUDAGraph=CUDAGraph, graph=graph,
                              stream=stream, current_stream=Stream, synchronize=synchronize,
                              empty_cache=empty_cache)
    return argparse.Namespace(cuda=cuda)


def fake_fn(dev, fail_capture_of=None):
    def fn(x):
        if dev.capturing is not None:
            if x.id == fail_capture_of:
                raise RuntimeError("operation not permitted when stream is capturing")
            dev.capturing.work.append(x.id)
            dev.log.append(("capture", x.id))
            return ("out", x.id)
        dev.host += HOST
        dev.queue(KERNEL)
        dev.log.append(("call", x.id, dev.stream))
        return ("out", x.id)
    return fn


def options(**kw):
    base = dict(runs=200, min_runs=20, max_time=0.5, self_check=False, inductor_mode="default",
                device="cuda")
    return argparse.Namespace(**{**base, **kw})


def torch_peer(name, args, fail_capture_of=None):
    dev = Device()
    peer = peers.TorchPeer(name, args, torch=fake_torch(dev))
    FakeTensor.serial = 0
    peer.fn, peer.args0 = fake_fn(dev, fail_capture_of), [FakeTensor()]
    return peer, dev


def rotates(ids, nsets):
    """Whether ids run through the sets in order, from set 0, wrapping around."""
    return ids == [i % nsets for i in range(len(ids))]


def test_torch_timing():
    args = options()
    peer, dev = torch_peer("inductor", args)
    nsets = peers.set_count(args, 1e6, 50e6)
    res = {}
    peers.time_peer(peer, args, 1e6, 50e6, res)
    assert res["sets"] == nsets == 101, res
    assert math.isclose(res["median_us"], HOST), res
    assert math.isclose(res["graph_us"], KERNEL), res
    assert res["runs"] == res["graph_runs"] == 200 and "graph_note" not in res, res
    timed = [e[1] for e in dev.log if e[0] == "call" and e[2] == "default"]
    assert rotates(timed, nsets), timed[:10]
    capture = [e for e in dev.log if e[0] == "capture" or e[0] == "call" and e[2] == "side"]
    want = [e for s in range(nsets) for e in [("call", s, "side")] * peers.CAPTURE_WARM
            + [("capture", s)]]
    assert capture == want, capture[:8]
    replays = [e[1] for e in dev.log if e[0] == "replay"]
    assert rotates(replays, nsets) and len(replays) > 200, replays[:10]
    assert dev.log[-1] == ("empty_cache", 0), "graphs alive when the cache is emptied"


def test_capture_failure():
    args = options()
    peer, dev = torch_peer("eager", args, fail_capture_of=2)
    res = {}
    peers.time_peer(peer, args, 1e6, 50e6, res)
    assert math.isclose(res["median_us"], HOST) and "graph_us" not in res, res
    assert res["graph_note"].startswith("CUDA graph capture failed: RuntimeError: operation"), res
    assert dev.log[-1] == ("empty_cache", 0), "graphs alive after a failure"


def test_inductor_own_graphs():
    args = options(inductor_mode="reduce-overhead")
    peer, dev = torch_peer("inductor", args)
    res = {}
    peers.time_peer(peer, args, 1e6, 50e6, res)
    assert "graph_us" not in res and "reduce-overhead" in res["graph_note"], res
    assert not any(e[0] == "capture" for e in dev.log)


class FakeClock:
    """time.perf_counter for JaxPeer: seconds of the fake device's host clock."""

    def __init__(self, dev):
        self.dev = dev

    def perf_counter(self):
        return self.dev.host / 1e6


def test_jax_pipelined():
    dev, dispatch = Device(), 5.0
    real_time = peers.time
    peers.time = FakeClock(dev)

    def fn(x):
        dev.host += dispatch
        dev.queue(KERNEL * 2)
        dev.log.append(("call", x))
        return dev.busy

    def block_until_ready(done):
        dev.host = max(dev.host, done)
    try:
        peer = peers.JaxPeer("jax", options(), jax=argparse.Namespace(
            block_until_ready=block_until_ready))
        peer.fn = fn
        sets = [[i] for i in range(7)]
        res = {}
        res["median_us"], _ = peers.median_time(lambda f, n: peer.time_runs(sets, f, n), options())
        dev.log.clear()
        peer.time_more(sets, options(), res)
    finally:
        peers.time = real_time
    assert math.isclose(res["median_us"], dispatch + 2 * KERNEL), res
    per = res["pipelined_runs"] // peers.PIPE_BATCHES
    assert math.isclose(res["pipelined_us"], 2 * KERNEL + dispatch / per), res
    assert rotates([e[1] for e in dev.log], len(sets))


def test_ratios():
    row = {"astitch": {"status": "ok", "median_us": 20.0, "graph_median_us": 10.0}, "peers": {}}
    graph_res = {"median_us": 80.0, "graph_us": 5.0}
    peers.add_ratios(row, graph_res, "graph_us")
    assert graph_res["ratio_vs"] == "graph_median_us" and graph_res["ratio"] == 0.5
    assert graph_res["ratio_per_call"] == 4.0
    pipe_res = {"median_us": 80.0, "pipelined_us": 30.0}
    peers.add_ratios(row, pipe_res, "pipelined_us")
    assert pipe_res["ratio_vs"] == "median_us" and pipe_res["ratio"] == 1.5
    no_graph = {"status": "ok", "median_us": 20.0, "graph_us": 0}
    res = {"median_us": 80.0, "graph_us": 40.0}
    peers.add_ratios({"astitch": no_graph}, res, "graph_us")
    assert res["ratio_vs"] == "median_us" and res["ratio"] == 2.0
    res = {"median_us": 80.0}
    peers.add_ratios({"astitch": {"status": "WRONG", "median_us": 20.0}}, res, "graph_us")
    assert res["ratio"] is None and res["ratio_per_call"] is None
    rows = [{"bytes": b, "peers": {"eager": {"ratio": x}}}
            for b, x in ((20e6, 0.5), (30e6, 2.0), (1e3, 8.0), (2e3, None))]
    g, n, slower = peers.ratio_stats(rows, "eager", "ratio", peers.LARGE_BYTES)
    assert (round(g, 9), n, slower) == (1.0, 2, 1)
    g, n, slower = peers.ratio_stats(rows, "eager", "ratio")
    assert (round(g, 9), n, slower) == (2.0, 3, 1)
    assert peers.ratio_stats(rows, "jax", "ratio") == (None, 0, 0)


def test_report(tmp):
    """The table, summary and CSV of two timed graphs, astitch with a graph-replay time on one."""
    args = options(astitch_mode="stitch", csv=os.path.join(tmp, "p.csv"),
                   json=os.path.join(tmp, "p.json"))
    eager, jax = argparse.Namespace(name="eager", headline="graph_us"), \
        argparse.Namespace(name="jax", headline="pipelined_us")
    cases = [{"status": "ok", "median_us": 100.0, "graph_us": 90.0},
             {"status": "ok", "median_us": 10.0}]
    rows = []
    for name, case, size in (("big", cases[0], 64e6), ("small", cases[1], 1e4)):
        row = {"graph": name, "bytes": size, "astitch": case, "peers": {
            "eager": {"median_us": 120.0, "graph_us": 45.0, "check": "ok"},
            "jax": {"median_us": 150.0, "pipelined_us": 110.0, "check": "ok"}}}
        for p in (eager, jax):
            peers.add_ratios(row, row["peers"][p.name], p.headline)
        rows.append(row)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        peers.print_header(args, [eager, jax], "graph_us")
        for r in rows:
            peers.print_row(r, [eager, jax], "graph_us")
        peers.summary(rows, [eager, jax])
    text = out.getvalue()
    assert "ratio against astitch-bench's graph_us" in text, text
    big, small = (line.split() for line in text.splitlines() if line.startswith(("big", "small")))
    assert big[1:5] == ["100.0", "90.0", "45.0", "0.50"], big
    assert small[3:5] == ["45.0", "4.50*"], small
    assert "graph >= 10 MB: 0.50 over 1 graphs, astitch slower on 1; all: 1.50 over 2" in text
    assert "pipe  >= 10 MB: 1.10 over 1 graphs, astitch slower on 0" in text, text
    peers.write_outputs(args, rows, 1, [eager, jax], [], "graph_us")
    with open(args.csv, encoding="utf-8") as f:
        table = list(csv.DictReader(f))
    assert [(r["impl"], r["graph_us"], r["ratio_vs"]) for r in table[:3]] == [
        ("astitch-stitch", "90.0", ""), ("eager", "45.0", "graph_us"), ("jax", "", "median_us")]
    with open(args.json, encoding="utf-8") as f:
        assert json.load(f)["astitch_graph_key"] == "graph_us"


def main():
    tests = [test_torch_timing, test_capture_failure, test_inductor_own_graphs,
             test_jax_pipelined, test_ratios]
    with tempfile.TemporaryDirectory() as tmp:
        test_report(tmp)
        print("ok test_report")
    for t in tests:
        t()
        print(f"ok {t.__name__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
