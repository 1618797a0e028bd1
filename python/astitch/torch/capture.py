"""Graph capture: AOTAutograd with core ATen decompositions hands forward, backward and
inference graphs to the compilers here, which partition them (partition.py)."""

import itertools
import logging

from functorch.compile import make_boxed_func, min_cut_rematerialization_partition
from torch._decomp import core_aten_decompositions
from torch._dynamo.backends.common import aot_autograd

from . import config
from .partition import partition

log = logging.getLogger("astitch.torch")
# What each compile made, newest last: (kind, name, graph nodes, regions, reasons); read by
# explain(). Bounded, so that a long-running program does not grow it without end.
RECORDS = []
MAX_RECORDS = 256
_names = itertools.count()


def _compiler(kind):
    def compile_graph(gm, example_inputs):
        name = f"{kind}{next(_names)}"
        nodes = sum(n.op == "call_function" for n in gm.graph.nodes)
        try:
            fused, regions, reasons = partition(gm, name)
        except Exception as e:  # noqa: BLE001 -- the graph runs in PyTorch instead
            if config.strict:
                raise
            log.warning("astitch: graph %s runs in PyTorch: partition failed: %s: %s", name,
                        type(e).__name__, e)
            fused, regions, reasons = gm, [], {}
        RECORDS.append((kind, name, nodes, regions, reasons))
        del RECORDS[:-MAX_RECORDS]
        log.info("graph %s: %d nodes, %d regions, %d nodes left in PyTorch", name, nodes,
                 len(regions), len(reasons))
        return make_boxed_func(fused.forward)

    return compile_graph


def backend(gm, example_inputs):
    """The torch.compile backend "astitch". The forward and backward graphs are split by the
    min-cut partitioner (as Inductor splits them): the backward recomputes cheap element-wise
    values instead of the forward saving them, which a stitched backward region reads anyway."""
    return aot_autograd(fw_compiler=_compiler("forward"), bw_compiler=_compiler("backward"),
                        inference_compiler=_compiler("inference"),
                        partition_fn=min_cut_rematerialization_partition,
                        decompositions=core_aten_decompositions())(gm, example_inputs)
