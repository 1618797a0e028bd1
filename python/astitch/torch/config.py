"""Switches of the PyTorch bridge, read from the environment once, at import; a program may
change them afterwards (they are read again at each compile, not at each call).

  log             ASTITCH_TORCH_LOG=1: the "astitch.torch" logger at INFO (regions, kernels,
                  fallbacks with reasons, compile times)
  strict          ASTITCH_TORCH_STRICT=1: every fallback raises instead (tests, debugging)
  min_region_ops  ASTITCH_TORCH_MIN_REGION_OPS (default 2): a region of fewer computing ops
                  (views and conversions do not count) stays in PyTorch, unless it holds a
                  reduction or an op that eager computes in several kernels
  variant_search  ASTITCH_TORCH_VARIANT_SEARCH=0 turns astitch's launch-shape timing off
  fusion          ASTITCH_TORCH_FUSION: stitch (default), xla or none (for ablations)
  view_outputs    ASTITCH_TORCH_VIEW_OUTPUTS=0: a region's outputs that are views of its inputs
                  (reshapes, transposes, slices) are written by astitch's kernels instead of
                  returned as views, as the FX code returns them
"""

import os


def _flag(name, default):
    v = os.environ.get(name)
    return default if v is None or v == "" else v not in ("0", "false", "no", "off")


def _count(name, default):
    v = os.environ.get(name) or str(default)
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"{name}={v!r}: a whole number expected") from None


log = _flag("ASTITCH_TORCH_LOG", False)
strict = _flag("ASTITCH_TORCH_STRICT", False)
min_region_ops = _count("ASTITCH_TORCH_MIN_REGION_OPS", 2)
variant_search = _flag("ASTITCH_TORCH_VARIANT_SEARCH", True)
view_outputs = _flag("ASTITCH_TORCH_VIEW_OUTPUTS", True)
fusion = os.environ.get("ASTITCH_TORCH_FUSION") or "stitch"
if fusion not in ("stitch", "xla", "none"):
    raise ValueError(f"ASTITCH_TORCH_FUSION={fusion!r}: stitch, xla or none expected")
