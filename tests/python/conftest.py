"""Shared settings for the astitch PyTorch-backend tests.

Environment:
  ASTITCH_TEST_BACKEND  torch.compile backend under test (default "astitch";
                        "aot_eager" or "inductor" to check the tests themselves).
  ASTITCH_TEST_DEVICE   "cpu" (default) or "cuda".
  ASTITCH_TEST_SEED     replay one failing test with the seed its message printed.

Every test compares a compiled run against eager PyTorch on fresh random
inputs: each test draws a new random seed (nothing fixed), and failure
messages name it.
"""
import os
import secrets

import pytest
import torch

BACKEND = os.environ.get("ASTITCH_TEST_BACKEND", "astitch")
DEVICE = os.environ.get("ASTITCH_TEST_DEVICE", "cpu")

if BACKEND == "astitch":
    import astitch.torch  # registers the "astitch" backend

    # A region that falls back to PyTorch fails the test (tests of fallbacks turn this off),
    # and a region of one op is compiled too, so that each translation rule is exercised.
    astitch.torch.config.strict = True
    astitch.torch.config.min_region_ops = 1


def astitch_regions(run):
    """Calls run() and returns the astitch regions compiled meanwhile (None for another
    backend, which has none)."""
    if BACKEND != "astitch":
        run()
        return None
    from astitch.torch import capture
    first = len(capture.RECORDS)
    run()
    return [r for rec in capture.RECORDS[first:] for r in rec[3]]

# (rtol, atol) by the dtype a result is computed in.
TOL = {
    torch.float64: (1e-7, 1e-9),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
}
# Gradients of whole layers in f32: fused reductions may sum in another order.
GRAD_TOL = (1e-3, 1e-4)


def pytest_collection_modifyitems(config, items):
    if DEVICE == "cuda" and not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="ASTITCH_TEST_DEVICE=cuda but CUDA is not available")
        for item in items:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def fresh_state():
    torch._dynamo.reset()
    seed = os.environ.get("ASTITCH_TEST_SEED")
    torch.manual_seed(int(seed) if seed else secrets.randbits(63))
    yield


def compile_fn(fn, **kw):
    return torch.compile(fn, backend=BACKEND, **kw)


def assert_close(actual, expected, dtype, what, tol=None):
    """Compare (nested tuples/lists of) tensors or Python numbers.

    Tolerance: `tol` if given, else TOL[dtype], else TOL of each expected
    tensor's own dtype (dtype=None). Integer and bool results must match
    exactly. Dtypes, shapes and devices must match too.
    """
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), \
            f"{what}: got {type(actual).__name__} of {len(actual) if isinstance(actual, (tuple, list)) else '-'}, expected {len(expected)} results"
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_close(a, e, dtype, f"{what}[{i}]", tol)
        return
    seed = torch.initial_seed()
    if isinstance(expected, torch.Tensor) and not (expected.is_floating_point() or expected.is_complex()):
        rtol, atol = 0.0, 0.0
    elif tol is not None:
        rtol, atol = tol
    else:
        key = dtype if dtype is not None else getattr(expected, "dtype", torch.float32)
        rtol, atol = TOL.get(key, TOL[torch.float32])
    torch.testing.assert_close(
        actual, expected, rtol=rtol, atol=atol, equal_nan=True,
        msg=lambda m: f"{what} [backend={BACKEND} device={DEVICE} ASTITCH_TEST_SEED={seed}]: {m}")
