"""Whole-layer checks: each tiny model from models.py, compiled with the backend
under test, must match an eager deep copy in outputs and in every gradient."""
import copy

import pytest
import torch

from conftest import DEVICE, GRAD_TOL, assert_close, compile_fn
from models import BertLayer, GPT2Block, LlamaDecoderLayer, ResNetBottleneck, ViTBlock

B, S, H = 2, 8, 32


def padding_mask():
    lengths = torch.randint(1, S + 1, (B,), device=DEVICE)
    lengths[0] = S
    return (torch.arange(S, device=DEVICE) < lengths[:, None]).long()


# name -> (factory, builder of the extra non-differentiable inputs, input shape)
MODELS = {
    "bert": (BertLayer, lambda: (padding_mask(),), (B, S, H)),
    "gpt2": (GPT2Block, lambda: (), (B, S, H)),
    "llama": (LlamaDecoderLayer, lambda: (), (B, S, H)),
    "vit": (ViTBlock, lambda: (), (B, S, H)),
    "resnet": (ResNetBottleneck, lambda: (), (B, H, 6, 5)),
}


def build(name):
    factory, extra, shape = MODELS[name]
    model = factory().to(DEVICE)
    with torch.no_grad():
        # Norm weights start at 1 and biases at 0; move them so a backend that
        # drops an affine term or a bias cannot pass.
        for p in model.parameters():
            if p.ndim == 1:
                p.add_(0.2 * torch.randn_like(p))
    return model, copy.deepcopy(model), torch.randn(shape, device=DEVICE), extra()


@pytest.mark.parametrize("name", MODELS)
def test_forward_backward(name):
    eager, compiled_model, x, extra = build(name)
    compiled = compile_fn(compiled_model, fullgraph=True)
    x_e, x_c = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected = eager(x_e, *extra)
    actual = compiled(x_c, *extra)
    assert_close(actual, expected, torch.float32, f"{name} output")

    g = torch.randn_like(expected)
    expected.backward(g)
    actual.backward(g)
    assert_close(x_c.grad, x_e.grad, torch.float32, f"{name} input grad", tol=GRAD_TOL)
    buffers_c = dict(compiled_model.named_buffers())   # BatchNorm's running statistics
    for bname, b in eager.named_buffers():
        assert_close(buffers_c[bname], b, None, f"{name} buffer {bname}")
    params_c = dict(compiled_model.named_parameters())
    for pname, p in eager.named_parameters():
        assert p.grad is not None, pname
        assert_close(params_c[pname].grad, p.grad, torch.float32, f"{name} grad {pname}", tol=GRAD_TOL)


@pytest.mark.parametrize("name", MODELS)
def test_inference(name):
    eager, compiled_model, x, extra = build(name)
    eager.eval(), compiled_model.eval()
    compiled = compile_fn(compiled_model, fullgraph=True)
    with torch.no_grad():
        expected = eager(x, *extra)
        actual = compiled(x, *extra)
        actual2 = compiled(x * 2, *extra)
        expected2 = eager(x * 2, *extra)
    assert_close(actual, expected, torch.float32, f"{name} inference")
    assert_close(actual2, expected2, torch.float32, f"{name} inference, second call")
