#!/usr/bin/env python3
"""The benchmark suite through PyTorch eager, torch.compile (Inductor) and JAX jit (XLA), beside
astitch.

    peers.py [--astitch-json BENCH.json] [--suite full] [--filter S] [--peers eager,inductor,jax]
             [--inductor-mode MODE] [--astitch-run PATH] [--json FILE] [--csv FILE]
    peers.py --self-check [--device cpu] [--astitch-target reference]

Each graph.json is translated op by op (peers_ops.py) and run on fresh random inputs. Before
timing, every peer's outputs are compared with astitch's on the same inputs (astitch-run
--target=cuda --inputs DIR --outputs DIR, .npy files) by the normalized error of
tests/diff_check.c: |a - b| / max(1, max |b|) under 1e-4 (f32), 1e-2 (f16), 4e-2 (bf16), exact
for integers and bool, NaN where astitch has NaN; a float output takes the tolerance of the least
precise float dtype on any path into it (tools/check_tolerance.c).

Timing follows astitch-bench (bench/RESULTS.md, Method): inputs rotated among sets that together
exceed twice the L2 (each set its own inputs; consecutive runs on consecutive sets), a warm-up of
3 runs and about 50 ms, then 20 to 200 runs (about 0.5 s), the median. Each peer's result has:

  median_us     per call, Python included. torch: fn(*inputs) queued back to back on the
                current stream with a torch.cuda.Event between consecutive calls, each call's
                time the interval between its two events: the Python call path (dispatch, and
                Dynamo's guards for torch.compile) whenever the host is slower than the GPU, the
                kernels otherwise. jax: time.perf_counter around fn(*inputs) and
                jax.block_until_ready, so one dispatch and one host synchronization per run.
  graph_us      torch on CUDA: kernel time by CUDA-graph replay. For each input set, 3 calls on
                a side stream, then one call captured into its own torch.cuda.CUDAGraph (its
                outputs kept, so each set has its own outputs, as in astitch-bench); the graphs
                replayed back to back on the current stream, rotating sets, with an event
                between consecutive replays, timed as median_us, twice, the lower median
                kept (a slow window seen now and then is not the peer's). No Python; one graph launch per
                run (a few us, seen only when the graph's kernels take less). torch.compile is
                the same compiled function, its Inductor kernels inside the graph. Graphs are
                freed after timing. A capture or replay that fails leaves graph_note (why) and
                median_us. Not measured with --inductor-mode reduce-overhead or max-autotune,
                which replay CUDA graphs of their own inside median_us.
  pipelined_us  jax on CUDA: the timed runs split into 5 batches of consecutive runs, each
                batch dispatched back to back with one jax.block_until_ready on its last result
                (XLA runs them in order on one stream); batch time / runs in the batch, the
                median of the batches. Host dispatch counts where the host is slower than the
                GPU; one synchronization per batch, amortized over its runs.
  runs, sets, graph_runs, pipelined_runs   timed runs and input sets.
  compile_ms    torch.compile: its first call; jax: lower + compile.

torch.compile runs with mode="default" (--inductor-mode to change it). Ratios are peer time /
astitch time (above 1: astitch is faster), astitch's times from --astitch-json (astitch-bench's
JSON, mode --astitch-mode):

  ratio           the headline, like with like. graph_us against astitch's graph-replay time
                  (the first of graph_us, graph_median_us, graph_replay_us, replay_us,
                  cuda_graph_us in its case; the table's header says which) or, where none, against
                  its median_us, the harder comparison for astitch; pipelined_us against
                  astitch's median_us (both back to back, host launch cost counted when
                  host-bound, no synchronization per run). ratio_vs names astitch's key. None
                  where the peer has neither graph_us nor pipelined_us.
  ratio_per_call  median_us against astitch's median_us (astitch's launch path is C).

The summary gives, per peer, the geometric mean of each ratio over graphs of at least 10 MB
(inputs read once plus outputs written once) and over all graphs, and on how many astitch is
slower (ratio below 1). --json writes these keys per peer in each row; --csv a line per graph
and implementation with the same names (astitch's line: its median_us and graph-replay time). On
--device cpu nothing is timed (CUDA events, streams and graphs).

--self-check runs the small copies of the suite (suite selfcheck) on the CPU or GPU and
compares every available peer with astitch-run (--target=reference on a machine without GPU):
a check of the translation itself (on the GPU, a few timed runs exercise the timing code). A
missing torch or jax skips those peers, said once.
"""

import argparse
import csv
import functools
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import peers_ops

HERE = os.path.dirname(os.path.abspath(__file__))
TOL = {"f32": 1e-4, "f16": 1e-2, "bf16": 4e-2}
PEERS = ("eager", "inductor", "jax")
SIZE = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "i64": 8, "bool": 1}
WARM = 3                # first warm-up runs of every timing, as astitch-bench
CAPTURE_WARM = 3        # calls on a side stream before each CUDA-graph capture
PIPE_BATCHES = 5        # batches of a pipelined timing
LARGE_BYTES = 10e6      # the summary's "graphs >= 10 MB"
ASTITCH_GRAPH_KEYS = ("graph_us", "graph_median_us", "graph_replay_us", "replay_us",
                      "cuda_graph_us")
GEMM_KERNEL = re.compile(r"gemm|cutlass|xmma|nvjet|cublas|sm\d+_.*tensorop", re.I)
OWN_GRAPH_MODES = ("reduce-overhead", "max-autotune")  # Inductor modes that capture graphs


def load_suite(spec):
    path = spec if ("/" in spec or spec.endswith(".txt")) else \
        os.path.join(HERE, "suites", spec + ".txt")
    base = os.path.dirname(os.path.abspath(path))
    with open(path, encoding="utf-8") as f:
        lines = [ln.split("#", 1)[0].strip() for ln in f]
    return [os.path.normpath(os.path.join(base, ln)) for ln in lines if ln]


# ---- inputs, .npy exchange with astitch-run, comparison ---------------------------------------

def make_inputs(np, graph, rng):
    """{param: numpy array} drawn like tests/diff_check.c: floats in [-2, 2) (a dot's weights
    times 2^-e, peers_ops.input_scale_exponents), integers in [-3, 17), bools; bf16 held as its
    16 bits (uint16)."""
    types = peers_ops.infer_types(graph)
    scale = peers_ops.input_scale_exponents(graph)
    out = {}
    for p in peers_ops.params_and_outputs(graph)[0]:
        d, s = types[p]
        if d in peers_ops.FLOAT:
            a = np.ldexp(rng.uniform(-2, 2, size=s), -scale.get(p, 0)).astype(np.float32)
            out[p] = a.astype(np.float16) if d == "f16" else (f32_to_bf16(np, a) if d == "bf16" else a)
        elif d in peers_ops.INT:
            out[p] = rng.integers(-3, 17, size=s).astype(np.int32 if d == "i32" else np.int64)
        else:
            out[p] = rng.integers(0, 2, size=s).astype(np.bool_)
        out[p] = np.asarray(out[p])  # a scalar parameter (shape []) as a 0-d array, not a numpy scalar
    return out


def f32_to_bf16(np, a):
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def to_f64(np, a, dtype):
    if dtype == "bf16":
        return (np.asarray(a).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.asarray(a).astype(np.float64)


def output_tolerance(graph, types, output):
    """The tolerance output is held to (tools/check_tolerance.c): that of the least precise
    float dtype on any path into it, at least K x 2^-23 after a float dot of contraction K on
    such a path; None (exact) when the output is not a float."""
    if types[output][0] not in TOL:
        return None
    nodes = {n["name"]: n for n in graph["nodes"]}
    seen, todo, tol = set(), [output], TOL[types[output][0]]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        node = nodes.get(name, {})
        tol = max(tol, TOL.get(types[name][0], 0))
        if node.get("op") == "dot" and types[name][0] in TOL:
            lhs = types[node["inputs"][0]][1]
            tol = max(tol, math.prod(lhs[d] for d in node["lhs_contracting_dims"]) * 2.0 ** -23)
        todo.extend(node.get("inputs", []))
    return tol


def compare(np, got, want, tol):
    """(ok, normalized error) of got against want, both float64 arrays; tol None: exact."""
    if got.shape != want.shape:
        return False, math.inf
    if tol is None:
        return bool(np.array_equal(got, want)), 0.0 if np.array_equal(got, want) else math.inf
    nan_w, nan_g = np.isnan(want), np.isnan(got)
    if np.any(nan_w != nan_g):
        return False, math.inf
    fin = np.isfinite(want)
    if np.any(got[~fin & ~nan_w] != want[~fin & ~nan_w]):
        return False, math.inf
    scale = max(1.0, float(np.max(np.abs(want[fin]))) if np.any(fin) else 1.0)
    err = float(np.max(np.abs(got[fin] - want[fin]))) / scale if np.any(fin) else 0.0
    return err <= tol, err


def astitch_outputs(np, args, path, graph, inputs, work):
    """Runs astitch-run on the inputs; {output: float64 array}, or raises RuntimeError."""
    d_in, d_out = os.path.join(work, "in"), os.path.join(work, "out")
    for d in (d_in, d_out):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    for name, a in inputs.items():
        np.save(os.path.join(d_in, name + ".npy"), a)
    cmd = [args.astitch_run, "--target=" + args.astitch_target, "--inputs", d_in,
           "--outputs", d_out, path]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"astitch-run failed ({r.returncode}): {r.stderr.strip()[-300:]}")
    types = peers_ops.infer_types(graph)
    return {o: to_f64(np, np.load(os.path.join(d_out, o + ".npy")), types[o][0])
            for o in graph["outputs"]}


# ---- timing ------------------------------------------------------------------------------------

def reason(e, width=200):
    """One line saying what exception e was."""
    text = str(e).splitlines()[0][:width] if str(e) else ""
    return f"{type(e).__name__}: {text}"


def event_times(torch, calls, first, n):
    """Device time in us of each of n runs of calls[(first + i) % len(calls)](), queued back to
    back on the current stream with a CUDA event between consecutive runs."""
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    torch.cuda.synchronize()
    ev[0].record()
    for i in range(n):
        calls[(first + i) % len(calls)]()
        ev[i + 1].record()
    torch.cuda.synchronize()
    return [ev[i].elapsed_time(ev[i + 1]) * 1e3 for i in range(n)]


def set_count(args, set_bytes, l2):
    """Input sets that together exceed twice the L2 (one when a set alone does), at most as many
    as the runs."""
    return min(int(2 * l2 // max(set_bytes, 1)) + 1, args.runs + WARM)


def median_time(timer, args):
    """(median us, runs) of timer(first, n) -> [us per run], after astitch-bench's warm-up: WARM
    runs, then about 50 ms (not in a self-check); each call continues the rotation."""
    warm = WARM
    est = statistics.median(timer(0, warm))
    extra = min(args.runs, int(50e3 / max(est, 0.1)))
    if extra >= warm and not args.self_check:
        est = statistics.median(timer(warm, extra))
        warm += extra
    n = int(min(args.runs, max(args.min_runs, args.max_time * 1e6 / max(est, 0.1))))
    return statistics.median(timer(warm, n)), n


def time_peer(peer, args, set_bytes, l2, res):
    """Fills res with the peer's times on rotated input sets: per call (median_us, runs, sets),
    then whatever more the peer measures (graph_us, pipelined_us)."""
    sets = peer.sets(set_count(args, set_bytes, l2))
    res["sets"] = len(sets)
    res["median_us"], res["runs"] = median_time(lambda f, n: peer.time_runs(sets, f, n), args)
    peer.time_more(sets, args, res)


# ---- the peers ---------------------------------------------------------------------------------

class TorchPeer:
    headline = "graph_us"

    def __init__(self, name, args, torch=None):
        if torch is None:
            import torch
        self.torch, self.name, self.args = torch, name, args
        self.device = "cuda" if args.device == "cuda" else "cpu"
        self.has_dots = False  # prepare() reads it from the graph

    def prepare(self, graph, inputs):
        torch = self.torch
        fn, params, outs = peers_ops.build_torch(graph, self.device)
        self.types = peers_ops.infer_types(graph)
        self.outs = outs
        self.args0 = [self.tensor(inputs[p], self.types[p][0]) for p in params]
        self.compile_ms = 0.0
        self.has_dots = any(n["op"] == "dot" for n in graph["nodes"])
        if self.name == "inductor":
            torch._dynamo.reset()
            fn = torch.compile(fn, mode=self.args.inductor_mode, dynamic=False)
            t0 = time.perf_counter()
            fn(*self.args0)
            self.sync()
            self.compile_ms = (time.perf_counter() - t0) * 1e3
        self.fn = fn

    def tensor(self, a, dtype):
        t = self.torch.from_numpy(a.view("int16") if dtype == "bf16" else a)
        t = t.view(self.torch.bfloat16) if dtype == "bf16" else t
        return t.to(self.device)

    def sync(self):
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def outputs(self, np):
        res = self.fn(*self.args0)
        return {o: (r.float() if r.dtype == self.torch.bfloat16 else r).detach().cpu().numpy()
                .astype(np.float64) for o, r in zip(self.outs, res)}

    def sets(self, n):
        return [self.args0] + [[a.clone() for a in self.args0] for _ in range(n - 1)]

    def release(self):
        self.fn = self.args0 = None
        if self.device == "cuda":
            self.torch.cuda.empty_cache()

    def time_runs(self, sets, first, n):
        """Per-call times: fn(*inputs) between events."""
        return event_times(self.torch, [functools.partial(self.fn, *s) for s in sets], first, n)

    def time_more(self, sets, args, res):
        """res gains graph_us and graph_runs (CUDA-graph replay), or graph_note saying why not.
        The graphs and their memory are freed before returning."""
        if self.name == "inductor" and args.inductor_mode in OWN_GRAPH_MODES:
            res["graph_note"] = f"mode {args.inductor_mode} replays its own CUDA graphs"
            return
        graphs, stage = [], "capture"
        try:
            self.capture(sets, graphs)
            stage = "replay"
            res["graph_us"], res["graph_runs"] = self.time_replays(graphs, args)
            if self.has_dots:
                stage = "profile"
                res["matmul_us"], res["other_us"] = self.split_replays(graphs)
        except Exception as e:  # a peer whose graph fails keeps its per-call time
            res["graph_note"] = f"CUDA graph {stage} failed: {reason(e)}"
        finally:
            graphs.clear()
            self.free_graph_memory()

    def capture(self, sets, graphs):
        """Appends (graph, outputs) to graphs for each input set: CAPTURE_WARM calls on a side
        stream, then one call captured into a CUDAGraph with its own memory pool."""
        cuda = self.torch.cuda
        for s in sets:
            side = cuda.Stream()
            side.wait_stream(cuda.current_stream())
            with cuda.stream(side):
                for _ in range(CAPTURE_WARM):
                    self.fn(*s)
            cuda.current_stream().wait_stream(side)
            g = cuda.CUDAGraph()
            with cuda.graph(g):
                out = self.fn(*s)
            graphs.append((g, out))

    def time_replays(self, graphs, args):
        """(median us, runs) of the graphs replayed in rotation, timed as per call, twice: the
        lower median is kept, so a transient slow window does not count against the peer (two
        full-suite runs on one H100 lease, 2026-11-26, each put a few graphs 20-60% above the
        other's time for them, a different few each run)."""
        calls, done = [g.replay for g, _ in graphs], [0]

        def timer(first, n):  # the rotation goes on across both timings
            times = event_times(self.torch, calls, done[0], n)
            done[0] += n
            return times
        return min(median_time(timer, args), median_time(timer, args), key=lambda t: t[0])

    def split_replays(self, graphs, n=10):
        """(matmul us, other us) per replay: the device time of the kernels of n replays under
        torch.profiler, those whose names say GEMM (cuBLAS, CUTLASS, nvjet) apart from the
        others (Triton's), divided by n."""
        torch = self.torch
        prof = torch.profiler
        with prof.profile(activities=[prof.ProfilerActivity.CUDA]) as p:
            for i in range(n):
                graphs[i % len(graphs)][0].replay()
            torch.cuda.synchronize()
        matmul = other = 0.0
        for e in p.key_averages():
            t = getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0)
            if GEMM_KERNEL.search(e.key):
                matmul += t
            elif not e.key.startswith(("cudaGraph", "Memcpy", "Memset")):
                other += t
        return matmul / n, other / n

    def free_graph_memory(self):
        try:
            self.torch.cuda.synchronize()
            self.torch.cuda.empty_cache()
        except Exception:  # a failed capture may leave an error here; the next call reports it
            pass


class JaxPeer:
    headline = "pipelined_us"

    def __init__(self, name, args, jax=None):
        if jax is None:
            import jax
        self.jax, self.name = jax, name

    def prepare(self, graph, inputs):
        jax = self.jax
        import jax.numpy as jnp
        fn, params, outs = peers_ops.build_jax(graph)
        types = peers_ops.infer_types(graph)
        self.outs = outs
        self.args0 = [jax.device_put(inputs[p].view(jnp.bfloat16) if types[p][0] == "bf16"
                                     else inputs[p]) for p in params]
        t0 = time.perf_counter()
        self.fn = jax.jit(fn).lower(*self.args0).compile()
        self.compile_ms = (time.perf_counter() - t0) * 1e3

    def outputs(self, np):
        res = self.jax.block_until_ready(self.fn(*self.args0))
        return {o: np.asarray(r.astype("float32") if str(r.dtype) == "bfloat16" else r)
                .astype(np.float64) for o, r in zip(self.outs, res)}

    def sets(self, n):
        import jax.numpy as jnp
        return [self.args0] + [[jnp.array(a, copy=True) for a in self.args0] for _ in range(n - 1)]

    def release(self):
        self.fn = self.args0 = None

    def time_runs(self, sets, first, n):
        """Per-call times: perf_counter around the call and block_until_ready."""
        jax, us = self.jax, []
        for i in range(n):
            t0 = time.perf_counter()
            jax.block_until_ready(self.fn(*sets[(first + i) % len(sets)]))
            us.append((time.perf_counter() - t0) * 1e6)
        return us

    def time_more(self, sets, args, res):
        """res gains pipelined_us and pipelined_runs."""
        res["pipelined_us"], res["pipelined_runs"] = median_time(
            lambda f, n: self.time_pipelined(sets, f, n), args)

    def time_pipelined(self, sets, first, n):
        """n runs in up to PIPE_BATCHES batches of consecutive runs, each dispatched back to
        back and blocked on once at its end; us per run of each batch."""
        batches = min(PIPE_BATCHES, n)
        ends, us = [first + n * b // batches for b in range(batches + 1)], []
        for lo, hi in zip(ends, ends[1:]):
            t0 = time.perf_counter()
            for i in range(lo, hi):
                r = self.fn(*sets[i % len(sets)])
            self.jax.block_until_ready(r)
            us.append((time.perf_counter() - t0) * 1e6 / (hi - lo))
        return us


def available_peers(args):
    peers, skipped = [], []
    for name in args.peers.split(","):
        try:
            if name in ("eager", "inductor"):
                import torch
                if args.device == "cuda" and not torch.cuda.is_available():
                    raise RuntimeError("torch sees no GPU")
                peers.append(TorchPeer(name, args))
            elif name == "jax":
                import jax
                if args.device == "cuda" and not any(d.platform == "gpu" for d in jax.devices()):
                    raise RuntimeError("jax sees no GPU")
                peers.append(JaxPeer(name, args))
            else:
                raise RuntimeError("unknown peer")
        except Exception as e:  # a peer that cannot run is reported, never fatal
            skipped.append(f"{name} ({reason(e, 120)})")
    return peers, skipped


def l2_bytes(args):
    try:
        import torch
        return float(torch.cuda.get_device_properties(0).L2_cache_size)
    except Exception:
        return 50e6


# ---- astitch's side and the ratios -------------------------------------------------------------

def astitch_time(case, key):
    """case[key] (us) where the case is timed and the value positive, else None."""
    if not case or case.get("status") != "ok":
        return None
    v = case.get(key)
    return float(v) if isinstance(v, (int, float)) and v > 0 else None


def astitch_graph_key(case):
    """The key of the case's CUDA-graph replay time (one of ASTITCH_GRAPH_KEYS), or None."""
    return next((k for k in ASTITCH_GRAPH_KEYS if astitch_time(case, k)), None)


def add_ratios(row, res, headline):
    """res gains ratio (the headline time against astitch's like time, ratio_vs naming its key)
    and ratio_per_call (median_us against astitch's median_us); None where a side is missing."""
    a = row["astitch"]
    ref = (astitch_graph_key(a) if headline == "graph_us" else None) or "median_us"
    res["ratio"] = divide(res.get(headline), astitch_time(a, ref))
    res["ratio_vs"] = ref if res["ratio"] else None
    res["ratio_per_call"] = divide(res.get("median_us"), astitch_time(a, "median_us"))


def divide(a, b):
    return a / b if a and b else None


def ratio_stats(rows, name, key, min_bytes=0):
    """(geometric mean, graphs, graphs where astitch is slower) of the peer's ratio `key` over
    rows of at least min_bytes; the mean is None without graphs."""
    xs = [r["peers"][name][key] for r in rows if r.get("bytes", 0) >= min_bytes
          and r["peers"].get(name, {}).get(key)]
    if not xs:
        return None, 0, 0
    return math.exp(sum(map(math.log, xs)) / len(xs)), len(xs), sum(x < 1 for x in xs)


# ---- main --------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="full")
    ap.add_argument("--astitch-json", help="astitch-bench --json output: its graphs and times")
    ap.add_argument("--astitch-mode", default="stitch", help="astitch mode to compare (stitch)")
    ap.add_argument("--filter")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--inductor-mode", default="default")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--min-runs", type=int, default=20)
    ap.add_argument("--max-time", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--astitch-run", default=os.environ.get("ASTITCH_RUN", "astitch-run"))
    ap.add_argument("--astitch-target", default="cuda")
    ap.add_argument("--no-check", action="store_true", help="skip the comparison with astitch")
    ap.add_argument("--self-check", action="store_true",
                    help="small graphs, few timed runs: every peer against astitch-run")
    ap.add_argument("--work", help="folder for .npy exchange files (default: a temporary one)")
    ap.add_argument("--json")
    ap.add_argument("--csv")
    args = ap.parse_args()
    if args.self_check:
        args.suite = "selfcheck" if args.suite == "full" else args.suite
        args.runs, args.min_runs, args.max_time = 5, 2, 0.01
    if args.device == "cpu":
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # share the GPU with torch
    try:
        import numpy as np
    except ImportError:
        print("peers.py needs numpy", file=sys.stderr)
        return 2
    return run(np, args)


def load_astitch(args):
    """({file: astitch case of --astitch-mode}, files in order) from --astitch-json, or ({}, the
    suite's files) without it."""
    if not args.astitch_json:
        return {}, load_suite(args.suite)
    with open(args.astitch_json, encoding="utf-8") as f:
        bench = json.load(f)
    cases, files = {}, []
    for c in bench["cases"]:
        if c["file"] not in files:
            files.append(c["file"])
        if c["mode"] == args.astitch_mode:
            cases[c["file"]] = c
    return cases, files


def run(np, args):
    astitch, files = load_astitch(args)
    peers, skipped = available_peers(args)
    if skipped:
        print("skipped peers: " + "; ".join(skipped), file=sys.stderr)
    if args.self_check and not peers:
        print("peers.py: no peer to check", file=sys.stderr)
        return 1
    seed = args.seed if args.seed is not None else int(time.time() * 1e6) % (1 << 32)
    rng = np.random.default_rng(seed)
    print(f"peers.py: seed {seed}; peers {', '.join(p.name for p in peers) or 'none'}; "
          f"inductor mode {args.inductor_mode}; device {args.device}", file=sys.stderr)
    work = args.work or tempfile.mkdtemp(prefix="astitch-peers-")
    l2 = l2_bytes(args) if args.device == "cuda" else 0
    graph_key = next(filter(None, map(astitch_graph_key, astitch.values())), None)
    print_header(args, peers, graph_key)
    rows, failures = [], 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            graph = json.load(f)
        name = graph.get("name") or os.path.splitext(os.path.basename(path))[0]
        if args.filter and args.filter not in name:
            continue
        row = {"graph": name, "file": path, "peers": {}, "astitch": astitch.get(path)}
        rows.append(row)
        if any(n["op"] == "custom" for n in graph["nodes"]) and not args.self_check:
            row["note"] = "custom ops: not timed (no peer form)"
        else:
            failures += run_graph(np, args, path, graph, row, peers, work, rng, l2)
        print_row(row, peers, graph_key)
    summary(rows, peers)
    write_outputs(args, rows, seed, peers, skipped, graph_key)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


def run_graph(np, args, path, graph, row, peers, work, rng, l2):
    """Checks and times every peer on one graph, filling row; the number of failed peers."""
    types = peers_ops.infer_types(graph)
    inputs = make_inputs(np, graph, rng)
    row["bytes"] = sum(a.nbytes for a in inputs.values()) + sum(
        math.prod(types[o][1]) * SIZE[types[o][0]] for o in graph["outputs"])
    want, failures, unchecked = None, 0, False
    if not args.no_check:
        try:
            want = astitch_outputs(np, args, path, graph, inputs, work)
        except Exception as e:
            row["note"] = f"astitch-run: {e}"
            unchecked = True  # a check was asked for and could not run: a failure, said so
    for peer in peers:
        res = row["peers"][peer.name] = {}
        if unchecked:
            res["check"] = "unchecked"
            failures += 1
        try:
            peer.prepare(graph, inputs)
            res["compile_ms"] = peer.compile_ms
            if want is not None:
                got = peer.outputs(np)
                checks = [compare(np, got[o], want[o], output_tolerance(graph, types, o))
                          for o in graph["outputs"]]
                res["check"] = "ok" if all(c[0] for c in checks) else "WRONG"
                res["max_error"] = max(c[1] for c in checks)
                failures += res["check"] != "ok"
            if args.device == "cuda":  # a self-check times a few runs: the code path
                time_peer(peer, args, row["bytes"], l2, res)
        except Exception as e:
            res["check"] = "error"
            res["note"] = reason(e)
            failures += 1
        peer.release()
        add_ratios(row, res, peer.headline)
    return failures


# ---- report ------------------------------------------------------------------------------------

KIND = {"graph_us": "graph", "pipelined_us": "pipe"}
LABEL = {"eager": "eager", "inductor": "compile", "jax": "jax"}


def print_header(args, peers, graph_key):
    """What the columns are, then the column names."""
    if args.device != "cuda":
        print("device cpu: nothing timed (per-call, CUDA-graph replay and pipelined timings "
              "need CUDA)")
    a_graph = f"astitch-bench's {graph_key}" if graph_key else \
        "astitch's median_us (astitch-bench's JSON has no graph-replay time)"
    print("ratio = peer time / astitch time (above 1: astitch is faster); astitch mode "
          f"{args.astitch_mode}, astitch us = its event-timed median_us")
    print(f"  graph: torch CUDA-graph replay (kernels only), ratio against {a_graph}"
          + ("; * where the case has none: against its median_us" if graph_key else ""))
    print("  pipe: jax runs dispatched back to back, one block per batch, ratio against "
          "astitch's median_us")
    print("  call: per call with Python dispatch (jax: and a host sync per run), ratio against "
          "astitch's median_us")
    head = f"{'graph':<30} {'astitch us':>10}" + (f" {'astitch graph':>13}" if graph_key else "")
    for p in peers:
        kind = KIND[p.headline]
        head += f" {LABEL[p.name] + ' ' + kind:>13} {'ratio':>7} {LABEL[p.name] + ' call':>13}" \
                f" {'ratio':>7} {'check':>6}"
    print(head)


def fmt(v, width, digits=1):
    return f"{v:{width}.{digits}f}" if v else f"{'-':>{width}}"


def print_row(row, peers, graph_key):
    a = row["astitch"]
    line = f"{row['graph'][:30]:<30} {fmt(astitch_time(a, 'median_us'), 10)}"
    if graph_key:
        line += f" {fmt(astitch_time(a, astitch_graph_key(a)), 13)}"
    for p in peers:
        r = row["peers"].get(p.name, {})
        fallback = graph_key and p.headline == "graph_us" and r.get("ratio_vs") == "median_us"
        mark = "*" if fallback and r.get("ratio") else " "
        line += f" {fmt(r.get(p.headline), 13)} {fmt(r.get('ratio'), 6, 2)}{mark}" \
                f" {fmt(r.get('median_us'), 13)} {fmt(r.get('ratio_per_call'), 6, 2)} " \
                f"{r.get('check', '-'):>6}"
    print(line, flush=True)
    for n, r in row["peers"].items():
        for key in ("note", "graph_note"):
            if r.get(key):
                print(f"    {n}: {r[key]}")
        if r.get("matmul_us") is not None:
            print(f"    {n} replay kernels: matmuls {r['matmul_us']:.1f} us, other kernels "
                  f"{r['other_us']:.1f} us (torch.profiler, device time per replay)")
    if a and a.get("compute_us"):
        print(f"    astitch steps: kernels {a['kernels_us']:.1f} us, compute ops "
              f"{a['compute_us']:.1f} us (event-timed, medians per step)")
    if row.get("note"):
        print(f"    {row['note']}")


def summary(rows, peers):
    print("\nratio = peer time / astitch time (above 1: astitch is faster), geometric means")
    for p in peers:
        checks = [r["peers"][p.name].get("check") for r in rows if p.name in r["peers"]]
        bad = sum(c in ("WRONG", "error") for c in checks)
        unchecked = sum(c in ("unchecked", None) for c in checks)
        print(f"{p.name}: {len(checks)} graphs, {len(checks) - unchecked} checked against astitch, "
              f"{bad} not matching" + (f", {unchecked} not checked" if unchecked else ""))
        for key, what in (("ratio", KIND[p.headline]), ("ratio_per_call", "call")):
            parts = []
            for min_bytes, graphs in ((LARGE_BYTES, f">= {LARGE_BYTES / 1e6:.0f} MB"),
                                      (0, "all")):
                g, n, slower = ratio_stats(rows, p.name, key, min_bytes)
                parts.append(f"{graphs}: {g:.2f} over {n} graphs, astitch slower on {slower}"
                             if n else f"{graphs}: no ratio")
            print(f"  {what:<5} " + "; ".join(parts))
        missing = sum(bool(r["peers"][p.name].get("graph_note")) for r in rows
                      if p.name in r["peers"])
        if missing:
            print(f"  no CUDA-graph replay on {missing} graphs (see the notes)")


CSV_KEYS = ("median_us", "graph_us", "pipelined_us", "ratio", "ratio_vs", "ratio_per_call",
            "compile_ms", "check", "max_error", "runs", "sets")


def write_outputs(args, rows, seed, peers, skipped, graph_key):
    names = [p.name for p in peers]
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"tool": "peers.py", "seed": seed, "peers": names, "skipped": skipped,
                       "inductor_mode": args.inductor_mode, "astitch_mode": args.astitch_mode,
                       "astitch_graph_key": graph_key, "device": args.device,
                       "headline": {p.name: p.headline for p in peers}, "rows": rows}, f,
                      indent=1)
    if args.csv:
        with open(args.csv, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(("graph", "impl", "bytes") + CSV_KEYS + ("note",))
            for r in rows:
                a = r["astitch"] or {}
                mine = {"median_us": a.get("median_us"), "check": a.get("status"),
                        "graph_us": astitch_time(a, astitch_graph_key(a)),
                        **{k: a.get(k) for k in ("compile_ms", "max_error", "runs", "sets")}}
                w.writerow([r["graph"], "astitch-" + args.astitch_mode, r.get("bytes", "")]
                           + [fmt_csv(mine.get(k)) for k in CSV_KEYS] + [a.get("note", "")])
                for n, p in r["peers"].items():
                    note = "; ".join(p[k] for k in ("note", "graph_note") if p.get(k))
                    w.writerow([r["graph"], n, r.get("bytes", "")]
                               + [fmt_csv(p.get(k)) for k in CSV_KEYS] + [note])


def fmt_csv(v):
    return "" if v is None else v


if __name__ == "__main__":
    sys.exit(main())
