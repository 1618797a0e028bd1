"""graph.json (docs/graph-format.md) to PyTorch and to jax.numpy: one function per graph.

build_torch(graph, device) and build_jax(graph) return (fn, param_names, output_names), where
fn(*params) returns the outputs as a tuple, each op translated with the reference
interpreter's semantics (XLA broadcast_in_dim, integer division by zero gives 0, round halves
away from zero, float-to-int conversion truncates and saturates with NaN to 0, gather clamps,
reduce over no axes copies). Splat constants and iotas are broadcast views (torch) or fused
broadcasts (XLA), as a framework would write them; they are built once, outside the timed
function, for torch.
"""

import math

FLOAT = ("f32", "f16", "bf16")
INT = ("i32", "i64")
UNARY = ("neg", "abs", "sign", "relu", "not", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt",
         "tanh", "sigmoid", "erf", "sin", "cos", "floor", "ceil", "round")
BINARY = ("add", "sub", "mul", "div", "rem", "pow", "max", "min", "and", "or",
          "eq", "ne", "lt", "le", "gt", "ge")
COMPARE = ("eq", "ne", "lt", "le", "gt", "ge")


class Unsupported(Exception):
    pass


def _num(v):
    if isinstance(v, str):
        return {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v]
    return float(v) if not isinstance(v, bool) else float(v)


def topo_nodes(graph):
    """The nodes with every operand before its users (the file may list them in any order)."""
    by_name = {n["name"]: n for n in graph["nodes"]}
    done, order = set(), []

    def visit(name, stack=()):
        if name in done:
            return
        if name in stack:
            raise ValueError(f"cycle through '{name}'")
        for i in by_name[name].get("inputs", []):
            visit(i, stack + (name,))
        done.add(name)
        order.append(by_name[name])
    for n in graph["nodes"]:
        visit(n["name"])
    return order


def infer_types(graph):
    """{name: (dtype, shape)} for every node (the subset of the C builders' rules peers need)."""
    t = {}
    for n in topo_nodes(graph):
        op, ins = n["op"], [t[i] for i in n.get("inputs", [])]
        if op in ("parameter", "constant", "iota", "custom"):
            t[n["name"]] = (n["dtype"], list(n["shape"]))
        elif op in COMPARE:
            t[n["name"]] = ("bool", ins[0][1])
        elif op == "convert":
            t[n["name"]] = (n["dtype"], ins[0][1])
        elif op == "select":
            t[n["name"]] = ins[1]
        elif op in ("broadcast_in_dim", "reshape"):
            t[n["name"]] = (ins[0][0], list(n["shape"]))
        elif op == "transpose":
            t[n["name"]] = (ins[0][0], [ins[0][1][p] for p in n["permutation"]])
        elif op == "slice":
            st = n.get("strides", [1] * len(n["start"]))
            t[n["name"]] = (ins[0][0], [-(-(l - s) // k) for s, l, k in
                                        zip(n["start"], n["limit"], st)])
        elif op == "concatenate":
            s = list(ins[0][1])
            s[n["axis"]] = sum(x[1][n["axis"]] for x in ins)
            t[n["name"]] = (ins[0][0], s)
        elif op == "gather":
            t[n["name"]] = (ins[0][0], ins[1][1] + ins[0][1][1:])
        elif op == "reduce":
            t[n["name"]] = (ins[0][0], [d for i, d in enumerate(ins[0][1]) if i not in n["axes"]])
        elif op == "dot":
            (ta, sa), (_, sb) = ins
            lb, rb = n.get("lhs_batch_dims", []), n.get("rhs_batch_dims", [])
            lc, rc = n["lhs_contracting_dims"], n["rhs_contracting_dims"]
            t[n["name"]] = (ta, [sa[i] for i in lb] +
                            [d for i, d in enumerate(sa) if i not in lb + lc] +
                            [d for i, d in enumerate(sb) if i not in rb + rc])
        else:
            t[n["name"]] = ins[0]
    return t


def params_and_outputs(graph):
    return ([n["name"] for n in topo_nodes(graph) if n["op"] == "parameter"],
            list(graph["outputs"]))


LAYOUT = ("reshape", "transpose", "broadcast_in_dim", "slice", "convert")


def input_scale_exponents(graph):
    """{parameter: e}: a float parameter that is the right operand of a float dot (directly or
    through layout ops) is a weight, drawn times 2^-e with e = ceil(log2(K) / 2) for its
    longest contraction K (tools/check_tolerance.h, check_input_scale_exponent)."""
    types, by_name = infer_types(graph), {n["name"]: n for n in graph["nodes"]}
    out = {}
    for n in graph["nodes"]:
        if n["op"] != "dot" or types[n["name"]][0] not in FLOAT:
            continue
        rhs = src = n["inputs"][1]
        while by_name[src]["op"] in LAYOUT:
            src = by_name[src]["inputs"][0]
        if by_name[src]["op"] != "parameter" or types[src][0] not in FLOAT:
            continue
        k = math.prod(types[rhs][1][c] for c in n["rhs_contracting_dims"])
        e = 0
        while 4 ** e < k:
            e += 1
        out[src] = max(out.get(src, 0), e)
    return out


def uses_compute_ops(graph):
    return any(n["op"] in ("dot", "custom") for n in graph["nodes"])


def _dot_letters(n, ra, rb):
    """einsum subscripts of a dot: shared letters for batch and contracting pairs."""
    letters = iter("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    lb, rbd = n.get("lhs_batch_dims", []), n.get("rhs_batch_dims", [])
    lc, rc = n["lhs_contracting_dims"], n["rhs_contracting_dims"]
    la, lbs = [None] * ra, [None] * rb
    for i, j in zip(lb + lc, rbd + rc):
        la[i] = lbs[j] = next(letters)
    la = [c or next(letters) for c in la]
    lbs = [c or next(letters) for c in lbs]
    out = [la[i] for i in lb] + [la[i] for i in range(ra) if i not in lb + lc] + \
          [lbs[j] for j in range(rb) if j not in rbd + rc]
    return "".join(la) + "," + "".join(lbs) + "->" + "".join(out)


def splat_scalar(graph, name):
    """The value of node `name` when it is one number everywhere (a splat constant, or a
    broadcast or reshape of one), as a Python int when it is integral; else None. A framework
    passes such an exponent as a scalar (torch.pow(x, 3.0) in GPT-2's GELU), which lets the
    peers rewrite pow into products."""
    by_name = {n["name"]: n for n in graph["nodes"]}
    n = by_name[name]
    while n["op"] in ("broadcast_in_dim", "reshape"):
        n = by_name[n["inputs"][0]]
    if n["op"] != "constant" or "values" in n or n["dtype"] not in FLOAT:
        return None
    v = _num(n["value"])
    return int(v) if math.isfinite(v) and v == int(v) else v


# ---- PyTorch ----------------------------------------------------------------------------------

def build_torch(graph, device):
    import torch
    dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16,
          "i32": torch.int32, "i64": torch.int64, "bool": torch.bool}
    types = infer_types(graph)
    nodes = topo_nodes(graph)
    params, outs = params_and_outputs(graph)
    consts = {}
    for n in nodes:  # built once: views of tiny tensors, as a model's buffers would be
        if n["op"] == "constant":
            d, s = dt[n["dtype"]], n["shape"]
            if "values" in n:
                vals = [_num(v) for v in n["values"]]
                consts[n["name"]] = torch.tensor(vals, dtype=torch.float64).to(d).reshape(s).to(device)
            else:
                consts[n["name"]] = torch.tensor(_num(n["value"]), dtype=torch.float64) \
                    .to(d).to(device).expand(s)
        elif n["op"] == "iota":
            s, ax = n["shape"], n["axis"]
            view = [1] * len(s)
            view[ax] = s[ax]
            consts[n["name"]] = torch.arange(s[ax], device=device).to(dt[n["dtype"]]) \
                .reshape(view).expand(s)

    def int_div(a, b, rem):
        zero = b == 0
        safe = torch.where(zero, torch.ones_like(b), b)
        r = torch.fmod(a, safe) if rem else torch.div(a, safe, rounding_mode="trunc")
        return torch.where(zero, torch.zeros_like(r), r)

    def convert(x, src, to):
        if to == "bool":
            return x != 0
        if src in FLOAT and to in INT:
            info = torch.iinfo(dt[to])
            x = torch.nan_to_num(x.double(), nan=0.0).clamp(info.min, info.max).trunc()
        return x.to(dt[to])

    def rnd(x):
        t = torch.trunc(x)
        return torch.where(torch.abs(x - t) >= 0.5, t + torch.sign(x), t)

    un = {"neg": torch.neg, "abs": torch.abs, "sign": torch.sign, "relu": torch.relu,
          "exp": torch.exp, "log": torch.log, "log1p": torch.log1p, "expm1": torch.expm1,
          "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
          "erf": torch.erf, "sin": torch.sin, "cos": torch.cos, "floor": torch.floor,
          "ceil": torch.ceil, "round": rnd}
    cmp = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
           "ge": torch.ge}

    def node(n, v):
        op, x = n["op"], [v[i] for i in n.get("inputs", [])]
        ty = [types[i][0] for i in n.get("inputs", [])]
        if op in un:
            return un[op](x[0])
        if op == "not":
            return torch.logical_not(x[0]) if ty[0] == "bool" else torch.bitwise_not(x[0])
        if op in cmp:
            return cmp[op](x[0], x[1])
        if op in ("add", "sub", "mul"):
            return {"add": torch.add, "sub": torch.sub, "mul": torch.mul}[op](x[0], x[1])
        if op in ("div", "rem"):
            if ty[0] in INT:
                return int_div(x[0], x[1], op == "rem")
            return x[0] / x[1] if op == "div" else torch.fmod(x[0], x[1])
        if op == "pow":
            e = splat_scalar(graph, n["inputs"][1])
            return torch.pow(x[0], x[1] if e is None else e)
        if op in ("max", "min"):
            return (torch.maximum if op == "max" else torch.minimum)(x[0], x[1])
        if op in ("and", "or"):
            if ty[0] == "bool":
                return (torch.logical_and if op == "and" else torch.logical_or)(x[0], x[1])
            return (torch.bitwise_and if op == "and" else torch.bitwise_or)(x[0], x[1])
        if op == "select":
            return torch.where(x[0], x[1], x[2])
        if op == "convert":
            return convert(x[0], ty[0], n["dtype"])
        if op == "broadcast_in_dim":
            bd, s = n["broadcast_dimensions"], n["shape"]
            order = sorted(range(len(bd)), key=lambda i: bd[i])
            y = x[0].permute(order) if order != list(range(len(bd))) else x[0]
            view = [1] * len(s)
            for i in order:
                view[bd[i]] = x[0].shape[i]
            return y.reshape(view).expand(s)
        if op == "reshape":
            return x[0].reshape(n["shape"])
        if op == "transpose":
            return x[0].permute(n["permutation"])
        if op == "slice":
            st = n.get("strides", [1] * len(n["start"]))
            return x[0][tuple(slice(a, b, c) for a, b, c in zip(n["start"], n["limit"], st))]
        if op == "concatenate":
            return torch.cat(x, dim=n["axis"])
        if op == "gather":
            idx = x[1].clamp(0, x[0].shape[0] - 1).long()
            return x[0][idx]
        if op == "reduce":
            axes, k = tuple(n["axes"]), n["kind"]
            if not axes:
                return x[0].clone()
            if k == "sum":
                return torch.sum(x[0], dim=axes, dtype=x[0].dtype)
            if k in ("max", "min"):
                return (torch.amax if k == "max" else torch.amin)(x[0], dim=axes)
            if k in ("any", "all"):
                return (torch.any if k == "any" else torch.all)(x[0], dim=axes)
            y = x[0]
            for a in sorted(axes, reverse=True):
                y = torch.prod(y, dim=a, dtype=x[0].dtype)
            return y
        if op == "dot":
            return torch.einsum(_dot_letters(n, x[0].dim(), x[1].dim()), x[0], x[1])
        raise Unsupported(f"op {op} of node '{n['name']}'")

    body = [n for n in nodes if n["op"] not in ("parameter", "constant", "iota")]
    if any(n["op"] == "custom" for n in body):
        raise Unsupported("custom ops")

    def fn(*args):
        v = dict(consts)
        v.update(zip(params, args))
        for n in body:
            v[n["name"]] = node(n, v)
        return tuple(v[o] for o in outs)
    return fn, params, outs


# ---- JAX --------------------------------------------------------------------------------------

def build_jax(graph):
    import jax
    import jax.numpy as jnp
    from jax import lax
    dt = {"f32": jnp.float32, "f16": jnp.float16, "bf16": jnp.bfloat16, "i32": jnp.int32,
          "i64": jnp.int64, "bool": jnp.bool_}
    types = infer_types(graph)
    nodes = topo_nodes(graph)
    params, outs = params_and_outputs(graph)

    def int_div(a, b, rem):
        zero = b == 0
        safe = jnp.where(zero, jnp.ones_like(b), b)
        return jnp.where(zero, jnp.zeros_like(a), lax.rem(a, safe) if rem else lax.div(a, safe))

    def convert(x, src, to):
        if to == "bool":
            return x != 0
        if src in FLOAT and to in INT:
            info = jnp.iinfo(dt[to])
            x = jnp.trunc(jnp.clip(jnp.nan_to_num(x.astype(jnp.float32), nan=0.0),
                                   float(info.min), float(info.max)))
            big = x >= float(info.max)  # f32 rounds the maximum up: saturate explicitly
            return jnp.where(big, info.max, x.astype(dt[to])).astype(dt[to])
        return x.astype(dt[to])

    def rnd(x):
        t = jnp.trunc(x)
        return jnp.where(jnp.abs(x - t) >= 0.5, t + jnp.sign(x), t)

    un = {"neg": jnp.negative, "abs": jnp.abs, "sign": jnp.sign,
          "relu": lambda x: jnp.maximum(x, jnp.zeros_like(x)),
          "exp": jnp.exp, "log": jnp.log, "log1p": jnp.log1p, "expm1": jnp.expm1,
          "sqrt": jnp.sqrt, "rsqrt": lax.rsqrt, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid,
          "erf": lax.erf, "sin": jnp.sin, "cos": jnp.cos, "floor": jnp.floor, "ceil": jnp.ceil,
          "round": rnd}
    cmp = {"eq": jnp.equal, "ne": jnp.not_equal, "lt": jnp.less, "le": jnp.less_equal,
           "gt": jnp.greater, "ge": jnp.greater_equal}
    red = {"sum": jnp.sum, "prod": jnp.prod, "max": jnp.max, "min": jnp.min, "any": jnp.any,
           "all": jnp.all}

    def node(n, v):
        op, x = n["op"], [v[i] for i in n.get("inputs", [])]
        ty = [types[i][0] for i in n.get("inputs", [])]
        if op == "constant":
            if "values" in n:
                return jnp.asarray([_num(a) for a in n["values"]], dtype=jnp.float32 if
                                   n["dtype"] in FLOAT else None).astype(dt[n["dtype"]]) \
                    .reshape(n["shape"])
            return jnp.full(n["shape"], _num(n["value"]), dtype=dt[n["dtype"]])
        if op == "iota":
            return lax.broadcasted_iota(dt[n["dtype"]], n["shape"], n["axis"])
        if op in un:
            return un[op](x[0])
        if op == "not":
            return jnp.logical_not(x[0]) if ty[0] == "bool" else jnp.invert(x[0])
        if op in cmp:
            return cmp[op](x[0], x[1])
        if op in ("add", "sub", "mul"):
            return {"add": jnp.add, "sub": jnp.subtract, "mul": jnp.multiply}[op](x[0], x[1])
        if op in ("div", "rem"):
            if ty[0] in INT:
                return int_div(x[0], x[1], op == "rem")
            return x[0] / x[1] if op == "div" else lax.rem(x[0], x[1])
        if op == "pow":
            e = splat_scalar(graph, n["inputs"][1])
            return jnp.power(x[0], x[1] if e is None else e)
        if op in ("max", "min"):
            return (jnp.maximum if op == "max" else jnp.minimum)(x[0], x[1])
        if op in ("and", "or"):
            if ty[0] == "bool":
                return (jnp.logical_and if op == "and" else jnp.logical_or)(x[0], x[1])
            return (jnp.bitwise_and if op == "and" else jnp.bitwise_or)(x[0], x[1])
        if op == "select":
            return jnp.where(x[0], x[1], x[2])
        if op == "convert":
            return convert(x[0], ty[0], n["dtype"])
        if op == "broadcast_in_dim":
            return lax.broadcast_in_dim(x[0], n["shape"], n["broadcast_dimensions"])
        if op == "reshape":
            return jnp.reshape(x[0], n["shape"])
        if op == "transpose":
            return jnp.transpose(x[0], n["permutation"])
        if op == "slice":
            return lax.slice(x[0], n["start"], n["limit"], n.get("strides"))
        if op == "concatenate":
            return jnp.concatenate(x, axis=n["axis"])
        if op == "gather":
            return jnp.take(x[0], jnp.clip(x[1], 0, x[0].shape[0] - 1), axis=0)
        if op == "reduce":
            k, axes = n["kind"], tuple(n["axes"])
            if k in ("sum", "prod"):
                return red[k](x[0], axis=axes, dtype=x[0].dtype)
            return red[k](x[0], axis=axes)
        if op == "dot":
            dims = ((n["lhs_contracting_dims"], n["rhs_contracting_dims"]),
                    (n.get("lhs_batch_dims", []), n.get("rhs_batch_dims", [])))
            return lax.dot_general(x[0], x[1], dims, precision=lax.Precision.HIGHEST)
        raise Unsupported(f"op {op} of node '{n['name']}'")

    body = [n for n in nodes if n["op"] != "parameter"]
    if any(n["op"] == "custom" for n in body):
        raise Unsupported("custom ops")

    def fn(*args):
        v = dict(zip(params, args))
        for n in body:
            v[n["name"]] = node(n, v)
        return tuple(v[o] for o in outs)
    return fn, params, outs
