"""astitch: a just-in-time stitching compiler for the memory-intensive parts of ML models.

    astitch.compile(json_text, target="auto")  -> Executable (see astitch._native)
    astitch.GraphBuilder                        builds graph.json text in Python
    import astitch.torch                        the PyTorch backend "astitch"
"""

from ._native import Error, Executable, compile, version
from .graph import GraphBuilder

__version__ = version()
__all__ = ["Error", "Executable", "GraphBuilder", "compile", "version"]
