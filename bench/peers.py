#!/usr/bin/env python3
"""The benchmark suite through PyTorch eager, torch.compile (Inductor) and JAX jit (XLA), beside
astitch.

    peers.py [--astitch-json BENCH.json] [--suite full] [--filter S] [--peers eager,inductor,jax]
             [--astitch-run PATH] [--json FILE] [--csv FILE]
    peers.py --self-check [--device cpu] [--astitch-target reference]

Each graph.json is translated op by op (peers_ops.py) and run on fresh random inputs. Before
timing, every peer's outputs are compared with astitch's on the same inputs (astitch-run
--target=cuda --inputs DIR --outputs DIR, .npy files) by the normalized error of
tests/diff_check.c: |a - b| / max(1, max |b|) under 1e-4 (f32), 1e-2 (f16), 4e-2 (bf16), exact
for integers and bool, NaN where astitch has NaN; a float output takes the tolerance of the least
precise float dtype on any path into it (tools/check_tolerance.c).

Timing, as astitch-bench does it (bench/RESULTS.md): after a warm-up, runs queued back to back
with a CUDA event between consecutive runs (torch.cuda.Event), the median; inputs rotated among
sets that together exceed twice the L2. JAX has no events: each run is timed with
time.perf_counter around the call and jax.block_until_ready, so its times include one dispatch
and one host synchronization per run (some microseconds; it matters only for launch-bound
graphs). torch.compile runs with mode="default" unless --inductor-mode says otherwise; its
compile time (first call) and JAX's (lower + compile) are reported.

--self-check runs the small copies of the suite (suite selfcheck) on the CPU or GPU and
compares every available peer with astitch-run (--target=reference on a machine without GPU):
a check of the translation itself. A missing torch or jax skips those peers, said once.
"""

import argparse
import json
import math
import os
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


def load_suite(spec):
    path = spec if ("/" in spec or spec.endswith(".txt")) else \
        os.path.join(HERE, "suites", spec + ".txt")
    base = os.path.dirname(os.path.abspath(path))
    with open(path, encoding="utf-8") as f:
        lines = [ln.split("#", 1)[0].strip() for ln in f]
    return [os.path.normpath(os.path.join(base, ln)) for ln in lines if ln]


# ---- inputs, .npy exchange with astitch-run, comparison ---------------------------------------

def make_inputs(np, graph, rng):
    """{param: numpy array} drawn like tests/diff_check.c: floats in [-2, 2), integers in
    [-3, 17), bools; bf16 held as its 16 bits (uint16)."""
    types = peers_ops.infer_types(graph)
    out = {}
    for p in peers_ops.params_and_outputs(graph)[0]:
        d, s = types[p]
        if d in peers_ops.FLOAT:
            a = rng.uniform(-2, 2, size=s).astype(np.float32)
            out[p] = a.astype(np.float16) if d == "f16" else (f32_to_bf16(np, a) if d == "bf16" else a)
        elif d in peers_ops.INT:
            out[p] = rng.integers(-3, 17, size=s).astype(np.int32 if d == "i32" else np.int64)
        else:
            out[p] = rng.integers(0, 2, size=s).astype(np.bool_)
    return out


def f32_to_bf16(np, a):
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def to_f64(np, a, dtype):
    if dtype == "bf16":
        return (np.asarray(a).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    return np.asarray(a).astype(np.float64)


def output_tolerance_dtype(graph, types, output):
    """The dtype whose tolerance output is held to: the least precise float dtype on any path
    into it (tools/check_tolerance.c); the output's own dtype when it is not a float."""
    if types[output][0] not in TOL:
        return types[output][0]
    inputs = {n["name"]: n.get("inputs", []) for n in graph["nodes"]}
    seen, todo, loosest = set(), [output], types[output][0]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if TOL.get(types[name][0], 0) > TOL[loosest]:
            loosest = types[name][0]
        todo.extend(inputs.get(name, []))
    return loosest


def compare(np, got, want, dtype):
    """(ok, normalized error) of got against want, both float64 arrays."""
    if got.shape != want.shape:
        return False, math.inf
    if dtype not in TOL:
        return bool(np.array_equal(got, want)), 0.0 if np.array_equal(got, want) else math.inf
    nan_w, nan_g = np.isnan(want), np.isnan(got)
    if np.any(nan_w != nan_g):
        return False, math.inf
    fin = np.isfinite(want)
    if np.any(got[~fin & ~nan_w] != want[~fin & ~nan_w]):
        return False, math.inf
    scale = max(1.0, float(np.max(np.abs(want[fin]))) if np.any(fin) else 1.0)
    err = float(np.max(np.abs(got[fin] - want[fin]))) / scale if np.any(fin) else 0.0
    return err <= TOL[dtype], err


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


# ---- the peers ---------------------------------------------------------------------------------

class TorchPeer:
    def __init__(self, name, args):
        import torch
        self.torch, self.name, self.args = torch, name, args
        self.device = "cuda" if args.device == "cuda" else "cpu"

    def prepare(self, graph, inputs):
        torch = self.torch
        fn, params, outs = peers_ops.build_torch(graph, self.device)
        self.types = peers_ops.infer_types(graph)
        self.outs = outs
        self.args0 = [self.tensor(inputs[p], self.types[p][0]) for p in params]
        self.compile_ms = 0.0
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
        torch = self.torch
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        torch.cuda.synchronize()
        ev[0].record()
        for i in range(n):
            self.fn(*sets[(first + i) % len(sets)])
            ev[i + 1].record()
        torch.cuda.synchronize()
        return [ev[i].elapsed_time(ev[i + 1]) * 1e3 for i in range(n)]


class JaxPeer:
    def __init__(self, name, args):
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
        jax, us = self.jax, []
        for i in range(n):
            t0 = time.perf_counter()
            jax.block_until_ready(self.fn(*sets[(first + i) % len(sets)]))
            us.append((time.perf_counter() - t0) * 1e6)
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
            skipped.append(f"{name} ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
    return peers, skipped


def l2_bytes(args):
    try:
        import torch
        return float(torch.cuda.get_device_properties(0).L2_cache_size)
    except Exception:
        return 50e6


def time_peer(peer, args, set_bytes, l2):
    warm = 3
    nsets = min(int(2 * l2 // max(set_bytes, 1)) + 1, args.runs + warm)
    sets = peer.sets(nsets)
    est = statistics.median(peer.time_runs(sets, 0, warm))
    extra = min(args.runs, int(50e3 / max(est, 0.1)))  # warm up for about 50 ms, as astitch-bench
    if extra >= warm and not args.self_check:
        est = statistics.median(peer.time_runs(sets, warm, extra))
        warm += extra
    n = int(min(args.runs, max(args.min_runs, args.max_time * 1e6 / max(est, 0.1))))
    us = peer.time_runs(sets, warm, n)
    del sets
    return statistics.median(us), n, nsets


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
                    help="small graphs, no timing: every peer against astitch-run")
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


def run(np, args):
    astitch = {}
    if args.astitch_json:
        with open(args.astitch_json, encoding="utf-8") as f:
            bench = json.load(f)
        for c in bench["cases"]:
            astitch.setdefault(c["file"], {})[c["mode"]] = c
        files = list(astitch)
    else:
        files = load_suite(args.suite)
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
    rows, failures = [], 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            graph = json.load(f)
        name = graph.get("name") or os.path.splitext(os.path.basename(path))[0]
        if args.filter and args.filter not in name:
            continue
        row = {"graph": name, "file": path, "peers": {},
               "astitch": astitch.get(path, {}).get(args.astitch_mode)}
        rows.append(row)
        if peers_ops.uses_compute_ops(graph) and not args.self_check:
            row["note"] = "compute ops: not timed (as in astitch-bench)"
            continue
        types = peers_ops.infer_types(graph)
        inputs = make_inputs(np, graph, rng)
        set_bytes = sum(a.nbytes for a in inputs.values()) + sum(
            math.prod(types[o][1]) * SIZE[types[o][0]] for o in graph["outputs"])
        want = None
        if not args.no_check:
            try:
                want = astitch_outputs(np, args, path, graph, inputs, work)
            except Exception as e:
                row["note"] = f"astitch-run: {e}"
        for peer in peers:
            res = {}
            row["peers"][peer.name] = res
            try:
                peer.prepare(graph, inputs)
                res["compile_ms"] = peer.compile_ms
                if want is not None:
                    got = peer.outputs(np)
                    checks = [compare(np, got[o], want[o], output_tolerance_dtype(graph, types, o))
                              for o in graph["outputs"]]
                    res["check"] = "ok" if all(c[0] for c in checks) else "WRONG"
                    res["max_error"] = max(c[1] for c in checks)
                    failures += res["check"] != "ok"
                if args.device == "cuda":  # a self-check times a few runs: the code path
                    res["median_us"], res["runs"], res["sets"] = time_peer(peer, args, set_bytes, l2)
            except Exception as e:
                res["check"] = "error"
                res["note"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                failures += 1
            peer.release()
        print_row(row, [p.name for p in peers], first=len(rows) == 1)
    summary(rows, [p.name for p in peers])
    write_outputs(args, rows, seed, [p.name for p in peers], skipped)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failures else 0


def fmt_us(v):
    return f"{v:10.1f}" if v else f"{'-':>10}"


def print_row(row, names, first):
    if first:
        head = f"{'graph':<30} {'astitch us':>10}"
        for n in names:
            head += f" {n + ' us':>12} {'ratio':>6} {'check':>6}"
        print(head)
    a = row["astitch"]
    a_us = a["median_us"] if a and a.get("status") == "ok" else None
    line = f"{row['graph'][:30]:<30} {fmt_us(a_us)}"
    for n in names:
        r = row["peers"].get(n, {})
        us = r.get("median_us")
        ratio = f"{us / a_us:6.2f}" if us and a_us else f"{'-':>6}"
        line += f" {fmt_us(us):>12} {ratio} {r.get('check', '-'):>6}"
    print(line, flush=True)
    for n, r in row["peers"].items():
        if r.get("note"):
            print(f"    {n}: {r['note']}")
    if row.get("note"):
        print(f"    {row['note']}")


def summary(rows, names):
    print("\nratio = peer time / astitch time (above 1: astitch is faster)")
    for n in names:
        logs = [math.log(r["peers"][n]["median_us"] / r["astitch"]["median_us"]) for r in rows
                if r["peers"].get(n, {}).get("median_us") and r["astitch"]
                and r["astitch"].get("status") == "ok" and r["astitch"].get("median_us")]
        checks = [r["peers"][n].get("check") for r in rows if n in r["peers"]]
        bad = sum(c not in ("ok", None) for c in checks)
        line = f"{n}: {len(checks)} graphs, {bad} not matching astitch"
        if logs:
            line += f"; geometric mean ratio {math.exp(sum(logs) / len(logs)):.2f} over {len(logs)}"
        print(line)


def write_outputs(args, rows, seed, names, skipped):
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"tool": "peers.py", "seed": seed, "peers": names, "skipped": skipped,
                       "inductor_mode": args.inductor_mode, "astitch_mode": args.astitch_mode,
                       "rows": rows}, f, indent=1)
    if args.csv:
        with open(args.csv, "w", encoding="utf-8") as f:
            f.write("graph,impl,median_us,compile_ms,check,max_error\n")
            for r in rows:
                a = r["astitch"] or {}
                f.write(f"{r['graph']},astitch-{args.astitch_mode},{a.get('median_us', '')},"
                        f"{a.get('compile_ms', '')},{a.get('status', '')},\n")
                for n, p in r["peers"].items():
                    f.write(f"{r['graph']},{n},{p.get('median_us', '')},{p.get('compile_ms', '')},"
                            f"{p.get('check', '')},{p.get('max_error', '')}\n")


if __name__ == "__main__":
    sys.exit(main())
