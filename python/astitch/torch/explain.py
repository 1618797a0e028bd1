"""explain(): what the backend made of a model, as data and as text."""

import collections

import torch

from . import capture


class Explanation:
    """graphs: one dict per compiled graph (kind, name, nodes, regions, in_pytorch); each
    region: name, ops, kernels, target, compile_ms, first_call_ms (it may time launch-shape
    variants), host_us_per_call (the later calls), fallback reason, plan text."""

    def __init__(self, graphs):
        self.graphs = graphs

    def __str__(self):
        lines = []
        for g in self.graphs:
            lines.append(f"{g['kind']} graph {g['name']}: {g['nodes']} nodes, "
                         f"{len(g['regions'])} astitch regions, {len(g['in_pytorch'])} nodes "
                         f"left in PyTorch")
            for r in g["regions"]:
                if r["fallback"]:
                    lines.append(f"  region {r['name']}: {r['ops']} ops, runs in PyTorch: "
                                 f"{r['fallback']}")
                    continue
                host = (f", host {r['host_us_per_call']:.1f} us per call"
                        if r["host_us_per_call"] is not None else "")
                lines.append(f"  region {r['name']}: {r['ops']} ops -> {r['kernels']} kernels "
                             f"on {r['target']}, compiled in {r['compile_ms']:.1f} ms{host}")
            counts = collections.Counter(g["in_pytorch"].values())
            for (op, reason), n in sorted(counts.items()):
                lines.append(f"  in PyTorch: {op} x{n}: {reason}")
        return "\n".join(lines)


def _region_info(r):
    ops = sum(n.op == "call_function" for n in r.fallback.graph.nodes)
    return {
        "name": r.name, "ops": ops, "kernels": r.exe.num_kernels if r.exe else 0,
        "target": r.exe.target if r.exe else None, "compile_ms": r.compile_ms,
        "host_us_per_call": r.host_ns / (r.calls - 1) / 1e3 if r.calls > 1 else None,
        "first_call_ms": r.first_ns / 1e6 if r.calls else None,
        "fallback": r.reason, "plan": r.exe.plan_text() if r.exe else None,
    }


def explain(model, *inputs, backward=None, runs=2, **kwargs):
    """Compiles model (a module or a function) with the backend "astitch", runs it `runs`
    times on inputs (the first run compiles; the later ones measure the host cost of a region
    call), each with its backward by default when an output requires grad (gradients then
    accumulate into .grad as any backward's do), and returns an Explanation of every graph
    compiled on the way. kwargs go to torch.compile."""
    torch._dynamo.reset()
    first = len(capture.RECORDS)
    compiled = torch.compile(model, backend="astitch", **kwargs)
    for _ in range(max(runs, 1)):
        out = compiled(*inputs)
        outs = [o for o in (out if isinstance(out, (tuple, list)) else [out])
                if isinstance(o, torch.Tensor) and o.requires_grad]
        if (backward is None and outs) or backward:
            sum(o.float().sum() for o in outs).backward()
    graphs = [{"kind": kind, "name": name, "nodes": nodes,
               "regions": [_region_info(r) for r in regions], "in_pytorch": reasons}
              for kind, name, nodes, regions, reasons in capture.RECORDS[first:]]
    return Explanation(graphs)
