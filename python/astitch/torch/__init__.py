"""The PyTorch bridge: `torch.compile(model, backend="astitch")` (docs/pytorch.md).

Importing this module registers the backend "astitch" with torch._dynamo (the package also
declares it as a `torch_dynamo_backends` entry point)."""

import logging

import torch._dynamo

from . import config
from .capture import backend
from .explain import explain

__all__ = ["backend", "config", "explain"]

if "astitch" not in torch._dynamo.list_backends(exclude_tags=()):
    torch._dynamo.register_backend(backend, name="astitch")

if config.log:
    logging.getLogger("astitch.torch").setLevel(logging.INFO)
    if not logging.getLogger("astitch.torch").handlers:
        logging.getLogger("astitch.torch").addHandler(logging.StreamHandler())
