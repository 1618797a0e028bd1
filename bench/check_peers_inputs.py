#!/usr/bin/env python3
"""Checks that peers.py draws a dot's weights at the scale astitch's checks draw them
(docs/astitch-run.md, *Random inputs*): for each graph, peers_ops.input_scale_exponents against
the values astitch-run makes from --seed, which the C rule (tools/check_tolerance.c) scales.

A weight with exponent e must lie in [-2^-e, 2^-e) and, with 64 or more elements, reach beyond
half of that; every other float parameter spans [-1, 1) alike.

    ASTITCH_RUN=build/tools/astitch-run python3 bench/check_peers_inputs.py [graph.json ...]
"""

import json
import os
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_ops  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
GRAPHS = [os.path.join(HERE, "graphs", "small", name) for name in
          ("bert_layer_small.json", "gpt2_block_fwd_small.json",
           "llama_layer_bf16_fwd_small.json")]


def read_npy(path):
    """The values of an f32, f16 or bf16 (<u2) .npy file as floats."""
    with open(path, "rb") as f:
        data = f.read()
    header_len = struct.unpack_from("<H", data, 8)[0]
    header = data[10:10 + header_len].decode("latin1")
    body = data[10 + header_len:]
    if "'<f4'" in header:
        return list(struct.unpack(f"<{len(body) // 4}f", body))
    if "'<f2'" in header:
        return list(struct.unpack(f"<{len(body) // 2}e", body))
    if "'<u2'" in header:  # bf16: the high half of an f32
        bits = struct.unpack(f"<{len(body) // 2}H", body)
        return [struct.unpack("<f", struct.pack("<I", b << 16))[0] for b in bits]
    raise ValueError(f"{path}: unexpected header {header}")


def check(path, run, tmp):
    graph = json.load(open(path))
    exps = peers_ops.input_scale_exponents(graph)
    types = peers_ops.infer_types(graph)
    floats = [n["name"] for n in graph["nodes"]
              if n["op"] == "parameter" and n["dtype"] in peers_ops.FLOAT]
    if not any(exps.get(p, 0) for p in floats):
        return [f"{path}: no weight found (the check would test nothing)"]
    for p in floats:  # each float parameter becomes an output, through a neg
        graph["nodes"].append({"name": f"seen.{p}", "op": "neg", "inputs": [p]})
        graph["outputs"].append(f"seen.{p}")
    derived = os.path.join(tmp, os.path.basename(path))
    json.dump(graph, open(derived, "w"))
    out = os.path.join(tmp, "out-" + os.path.basename(path))
    subprocess.run([run, "--target=reference", "--seed=5", "--outputs", out, derived],
                   check=True, stdout=subprocess.DEVNULL)
    errors = []
    for p in floats:
        values = read_npy(os.path.join(out, f"seen.{p}.npy"))
        e, top = exps.get(p, 0), max(abs(v) for v in values)
        n = 1
        for d in types[p][1]:
            n *= d
        if not top <= 2.0 ** -e or (n >= 64 and top < 2.0 ** -(e + 1)):
            errors.append(f"{path}: parameter '{p}' ({n} values): max |value| {top}, "
                          f"peers.py draws it within 2^-{e}")
    return errors


def main():
    run = os.environ.get("ASTITCH_RUN")
    if not run:
        sys.exit("ASTITCH_RUN is not set")
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in sys.argv[1:] or GRAPHS:
            errors += check(path, run, tmp)
    for e in errors:
        print(e)
    print(f"{'FAIL' if errors else 'ok'}: {len(sys.argv[1:] or GRAPHS)} graphs")
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
