"""Tiny transformer layers and a ResNet block, written after their published definitions.

Attention is explicit matmul + softmax (not F.scaled_dot_product_attention) so
the mask/scale/softmax chain is a memory-intensive region. Dropout modules are
kept where the references have them, with p=0.0, so no RNG runs.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def split_heads(x, n_heads):
    b, s, h = x.shape
    return x.view(b, s, n_heads, h // n_heads).transpose(1, 2)


def merge_heads(x):
    b, n, s, d = x.shape
    return x.transpose(1, 2).contiguous().view(b, s, n * d)


class BertLayer(nn.Module):
    """BERT encoder layer (Devlin et al. 2018; HF transformers BertLayer, post-LN).

    Deviations: dropout p=0.0; the 0/1 padding mask is turned into the additive
    mask (1 - m) * -10000.0 inside forward, as BertModel.get_extended_attention_mask
    does in the original release.
    """

    def __init__(self, hidden=32, heads=4, intermediate=64, eps=1e-12):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.attn_dropout = nn.Dropout(0.0)
        self.attn_out = nn.Linear(hidden, hidden)
        self.attn_out_dropout = nn.Dropout(0.0)
        self.attn_norm = nn.LayerNorm(hidden, eps=eps)
        self.intermediate = nn.Linear(hidden, intermediate)
        self.output = nn.Linear(intermediate, hidden)
        self.out_dropout = nn.Dropout(0.0)
        self.out_norm = nn.LayerNorm(hidden, eps=eps)

    def forward(self, x, mask):
        q = split_heads(self.query(x), self.heads)
        k = split_heads(self.key(x), self.heads)
        v = split_heads(self.value(x), self.heads)
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        scores = scores + (1.0 - mask[:, None, None, :].to(x.dtype)) * -10000.0
        probs = self.attn_dropout(scores.softmax(-1))
        ctx = merge_heads(probs @ v)
        a = self.attn_norm(self.attn_out_dropout(self.attn_out(ctx)) + x)
        h = F.gelu(self.intermediate(a))  # erf form, as BERT's "gelu"
        return self.out_norm(self.out_dropout(self.output(h)) + a)


def gelu_new(x):
    """GPT-2's tanh GELU (openai/gpt-2 model.py `gelu`, HF NewGELUActivation)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Block(nn.Module):
    """GPT-2 block (Radford et al. 2019; openai/gpt-2 model.py, HF GPT2Block, pre-LN).

    Deviations: c_attn/c_fc/c_proj are nn.Linear (GPT-2's Conv1D is a Linear
    with transposed weight); dropout p=0.0; the causal mask comes from
    torch.tril in forward instead of a registered buffer.
    """

    def __init__(self, hidden=32, heads=4, eps=1e-5):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden, eps=eps)
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.attn_c_proj = nn.Linear(hidden, hidden)
        self.attn_dropout = nn.Dropout(0.0)
        self.resid_dropout = nn.Dropout(0.0)
        self.ln_2 = nn.LayerNorm(hidden, eps=eps)
        self.c_fc = nn.Linear(hidden, 4 * hidden)
        self.mlp_c_proj = nn.Linear(4 * hidden, hidden)
        self.mlp_dropout = nn.Dropout(0.0)

    def attn(self, x):
        q, k, v = self.c_attn(x).split(x.shape[-1], dim=2)
        q, k, v = (split_heads(t, self.heads) for t in (q, k, v))
        w = q @ k.transpose(-1, -2) / math.sqrt(v.shape[-1])
        s = x.shape[1]
        causal = torch.tril(torch.ones(s, s, dtype=torch.bool, device=x.device))
        w = w.masked_fill(~causal, torch.finfo(w.dtype).min)
        w = self.attn_dropout(w.softmax(-1))
        return self.resid_dropout(self.attn_c_proj(merge_heads(w @ v)))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_dropout(self.mlp_c_proj(gelu_new(self.c_fc(self.ln_2(x)))))


class LlamaRMSNorm(nn.Module):
    """RMSNorm (Zhang & Sennrich 2019) as HF LlamaRMSNorm: computed in float32."""

    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


class LlamaDecoderLayer(nn.Module):
    """Llama decoder layer (Touvron et al. 2023; HF transformers LlamaDecoderLayer).

    RoPE (Su et al. 2021) with inv_freq = 1/10000^(arange(0,d,2)/d) and
    rotate_half; grouped-query attention (kv_heads < heads, repeat_kv) as in
    Llama 2; additive causal mask of finfo.min; softmax in float32; SwiGLU MLP
    down(silu(gate(x)) * up(x)); no biases. Deviations: cos/sin are computed in
    forward from positions 0..S-1 (no cache, no position_ids input).
    """

    def __init__(self, hidden=32, heads=4, kv_heads=2, intermediate=64, eps=1e-6, base=10000.0):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.input_layernorm = LlamaRMSNorm(hidden, eps)
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)
        self.post_attention_layernorm = LlamaRMSNorm(hidden, eps)
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)
        d = self.head_dim
        inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def rotary(self, s, device, dtype):
        t = torch.arange(s, device=device, dtype=torch.float32)
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def repeat_kv(self, x):
        b, n, s, d = x.shape
        r = self.heads // n
        return x[:, :, None].expand(b, n, r, s, d).reshape(b, n * r, s, d)

    def attn(self, x):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = self.rotary(s, x.device, x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k, v = self.repeat_kv(k), self.repeat_kv(v)
        w = q @ k.transpose(2, 3) / math.sqrt(self.head_dim)
        mask = torch.full((s, s), torch.finfo(w.dtype).min, device=x.device, dtype=w.dtype).triu(1)
        w = F.softmax(w + mask, dim=-1, dtype=torch.float32).to(q.dtype)
        o = (w @ v).transpose(1, 2).reshape(b, s, -1)
        return self.o_proj(o)

    def forward(self, x):
        x = x + self.attn(self.input_layernorm(x))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class ViTBlock(nn.Module):
    """ViT encoder block (Dosovitskiy et al. 2020; google-research vision_transformer
    Encoder1DBlock, timm Block): pre-LN, LayerNorm eps=1e-6, fused qkv, GELU (erf).

    Deviations: dropout p=0.0; no drop-path / layer-scale.
    """

    def __init__(self, hidden=32, heads=4, mlp=64, eps=1e-6):
        super().__init__()
        self.heads = heads
        self.scale = (hidden // heads) ** -0.5
        self.norm1 = nn.LayerNorm(hidden, eps=eps)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.attn_drop = nn.Dropout(0.0)
        self.proj = nn.Linear(hidden, hidden)
        self.proj_drop = nn.Dropout(0.0)
        self.norm2 = nn.LayerNorm(hidden, eps=eps)
        self.fc1 = nn.Linear(hidden, mlp)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(mlp, hidden)
        self.mlp_drop = nn.Dropout(0.0)

    def attn(self, x):
        b, n, c = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        a = self.attn_drop(((q * self.scale) @ k.transpose(-2, -1)).softmax(dim=-1))
        return self.proj_drop(self.proj((a @ v).transpose(1, 2).reshape(b, n, c)))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp_drop(self.fc2(self.mlp_drop(self.act(self.fc1(self.norm2(x))))))


class ResNetBottleneck(nn.Module):
    """ResNet-50's bottleneck block (He et al. 2016; torchvision's Bottleneck, v1.5: the stride
    on the 3x3 convolution): 1x1 conv, BatchNorm, ReLU; 3x3 conv, BatchNorm, ReLU; 1x1 conv,
    BatchNorm; the identity added; ReLU. Convolutions without bias, as torchvision's.

    Deviations: no downsample branch (stride 1, channels in = channels out).
    """

    def __init__(self, channels=32, width=8):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.relu(self.bn2(self.conv2(y)))
        return F.relu(self.bn3(self.conv3(y)) + x)
