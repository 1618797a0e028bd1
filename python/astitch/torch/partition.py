"""Regions of an FX graph that astitch compiles: maximal sets of supported nodes whose
merging creates no cycle through a PyTorch op (torch.fx's CapabilityBasedPartitioner), each
replaced by a CompiledRegion."""

import operator

import torch
from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
from torch.fx.passes.operator_support import OperatorSupportBase

from . import config
from .ops import meta, unsupported_reason
from .region import CompiledRegion

aten = torch.ops.aten

# Free in PyTorch (a view or an alias): a region of only these would add a copy. A clone is
# not among them: PyTorch copies (a kernel, or a memcpy where the source is contiguous), so it
# counts as a computing op and joins the region that feeds it (AOTAutograd's matmul
# decomposition writes expand + clone before each bmm).
VIEW_OPS = {aten.view.default, aten._unsafe_view.default, aten.reshape.default,
            aten.squeeze.default, aten.squeeze.dim, aten.squeeze.dims, aten.unsqueeze.default,
            aten.expand.default, aten.permute.default, aten.transpose.int, aten.t.default,
            aten.slice.Tensor, aten.select.int, aten.alias.default, aten.detach.default,
            aten.split.Tensor, aten.split_with_sizes.default}
# Several kernels in eager: worth a region on their own.
MULTI_KERNEL_OPS = {aten._softmax.default, aten._log_softmax.default,
                    aten.native_layer_norm.default, aten.var.correction,
                    aten.var_mean.correction, aten.gelu.default,
                    aten._native_batch_norm_legit_functional.default,
                    aten._native_batch_norm_legit_no_training.default,
                    aten._native_batch_norm_legit.no_stats}


class _Support(OperatorSupportBase):
    def __init__(self, reasons):
        super().__init__()
        self.reasons = reasons

    def is_node_supported(self, submodules, node):
        reason = unsupported_reason(node)
        if reason is None and node.target in VIEW_OPS and \
                any(u.op == "output" for u in node.users):
            reason = "a view returned from the graph stays in PyTorch (it may alias an input)"
        if reason is not None and node.op == "call_function":
            self.reasons[node.name] = (str(node.target), reason)
        return reason is None


def _trim_views(partition):
    """Leaves out of the partition each view whose users are all outside it: PyTorch applies
    it to the region's output for free, where a region would write a copy (and a reshaped
    output would keep a row out of the registers it was computed in)."""
    changed = True
    while changed:
        changed = False
        for n in list(partition.nodes):
            if n.target in VIEW_OPS and not any(u in partition.nodes for u in n.users):
                partition.remove_node(n)
                changed = True
    return partition


def _split_shared_views(gm):
    """Gives each user of a view its own copy of the view (and of the views it is taken
    from), so that a region takes a view from the tensor it views, not from another
    region: a view shared by two regions would otherwise be an output of the first, which
    writes it out in full (the permuted q, k and v of an attention, where the second region
    needs only v). Views cost nothing in PyTorch either. Users are visited last first, so that
    a chain of views is copied whole."""
    graph = gm.graph
    for node in reversed(list(graph.nodes)):
        if node.op != "call_function" or node.target not in VIEW_OPS or len(node.users) < 2:
            continue
        for user in list(node.users)[1:]:
            with graph.inserting_after(node):
                twin = graph.node_copy(node)
            twin.meta = dict(node.meta)
            user.replace_input_with(node, twin)
    graph.lint()
    gm.recompile()


def _worthwhile(nodes):
    computing = [n for n in nodes if n.target not in VIEW_OPS and n.target is not operator.getitem]
    if any(n.target in MULTI_KERNEL_OPS for n in computing):
        return True
    return len(computing) >= max(config.min_region_ops, 1)


def _output_vals(sub, node):
    out = [n for n in sub.graph.nodes if n.op == "output"][0].args[0]
    outs = out if isinstance(out, (tuple, list)) else [out]
    vals = [meta(o) for o in outs]
    if all(isinstance(v, torch.Tensor) for v in vals):
        return vals
    # the fused module's nodes lack example values: take them from the users in the parent
    if not isinstance(out, (tuple, list)):
        return [meta(node)]
    by_index = {u.args[1]: meta(u) for u in node.users}
    return [by_index.get(i) for i in range(len(outs))]


def partition(gm, name):
    """Fuses gm's supported regions into CompiledRegions. Returns (the new GraphModule, its
    regions, {node name: (op, reason)} for each node left in PyTorch with a reason)."""
    reasons = {}
    _split_shared_views(gm)
    partitioner = CapabilityBasedPartitioner(gm, _Support(reasons),
                                             allows_single_node_partition=True)
    parts = [_trim_views(p) for p in partitioner.propose_partitions()]
    parts = [p for p in parts if p.nodes and _worthwhile(p.nodes)]
    fused = partitioner.fuse_partitions(parts) if parts else gm
    regions = []
    for node in list(fused.graph.nodes):
        if node.op != "call_module" or not str(node.target).startswith("fused_"):
            continue
        sub = getattr(fused, node.target)
        input_vals = [meta(a) for a in node.args]
        region = CompiledRegion(sub, input_vals, _output_vals(sub, node),
                                f"{name}.{node.target}")
        delattr(fused, node.target)           # the submodule's place takes a plain callable
        fused.__dict__[node.target] = region
        regions.append(region)
    fused.recompile()
    return fused, regions, reasons
