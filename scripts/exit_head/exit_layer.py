"""The exit layer (one LLaMA transformer layer, trainable) and the frozen final norm + LM head.

The math follows the EESD formats (section 3) and the engine: RMSNorm in f32, q/k/v/o with
optional biases, RoPE in HuggingFace's rotate-half convention on HF-layout weights with the
inverse frequencies of src/model/rope_frequencies.cpp (cos/sin from the double angle, rounded to
f32, as kernels/cpu/rope.cpp), causal GQA attention (query head h reads kv head
h // (num_heads / num_kv_heads)) scaled by 1/sqrt(head_dim), and a SwiGLU MLP. Parameter names are
the HF layer names, so state_dict() gives the exit head's tensors (less the "exit_layer." prefix).
Only torch 1.13 features (Debian 12's python3-torch).
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

from exit_head.safetensors_io import bf16_to_f32


def rope_inverse_frequencies(head_dim, theta, scaling):
    """float32 [head_dim / 2] inverse frequencies; `scaling` is HF's rope_scaling ({} for none;
    "linear" and "llama3" as the engine supports them)."""
    kind = scaling.get("rope_type", scaling.get("type", "default")) if scaling else "default"
    result = []
    for i in range(head_dim // 2):
        freq = 1.0 / math.pow(theta, (2 * i) / head_dim)
        if kind == "linear":
            freq /= float(scaling["factor"])
        elif kind == "llama3":
            freq = _llama3_scaled(freq, scaling)
        elif kind != "default":
            raise ValueError(f"rope_scaling type {kind!r} is not supported (linear, llama3)")
        result.append(freq)
    return torch.tensor(np.array(result, dtype=np.float32))


def _llama3_scaled(freq, scaling):
    factor = float(scaling["factor"])
    old_context = float(scaling["original_max_position_embeddings"])
    low, high = float(scaling["low_freq_factor"]), float(scaling["high_freq_factor"])
    wavelen = 2.0 * math.pi / freq
    if wavelen > old_context / low:
        return freq / factor
    if wavelen >= old_context / high:
        smooth = (old_context / wavelen - low) / (high - low)
        return (1.0 - smooth) * freq / factor + smooth * freq
    return freq


def rms_norm(x, weight, eps):
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps) * weight


def apply_rope(x, cos, sin):
    """Rotate-half RoPE of x [B, heads, T, d] with cos/sin [B, 1, T, d/2]."""
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    return torch.cat([first * cos - second * sin, second * cos + first * sin], dim=-1)


class RmsNorm(torch.nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


class Attention(torch.nn.Module):
    def __init__(self, spec):
        super().__init__()
        hidden, d = spec.hidden_size, spec.head_dim
        self.q_proj = torch.nn.Linear(hidden, spec.num_heads * d, bias=spec.attention_bias)
        self.k_proj = torch.nn.Linear(hidden, spec.num_kv_heads * d, bias=spec.attention_bias)
        self.v_proj = torch.nn.Linear(hidden, spec.num_kv_heads * d, bias=spec.attention_bias)
        self.o_proj = torch.nn.Linear(spec.num_heads * d, hidden, bias=spec.o_proj_bias)
        self.heads, self.kv_heads, self.head_dim = spec.num_heads, spec.num_kv_heads, d

    def forward(self, h, cos, sin, mask):
        """h [B, T, H]; mask [B, 1, T, T] (True: may attend)."""
        batch, length, _ = h.shape
        q = self._split(self.q_proj(h), self.heads)
        k = self._split(self.k_proj(h), self.kv_heads)
        v = self._split(self.v_proj(h), self.kv_heads)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        group = self.heads // self.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.o_proj(out.transpose(1, 2).reshape(batch, length, self.heads * self.head_dim))

    def _split(self, x, heads):
        batch, length, _ = x.shape
        return x.view(batch, length, heads, self.head_dim).transpose(1, 2)


class Mlp(torch.nn.Module):
    def __init__(self, spec):
        super().__init__()
        self.gate_proj = torch.nn.Linear(spec.hidden_size, spec.intermediate_size, bias=False)
        self.up_proj = torch.nn.Linear(spec.hidden_size, spec.intermediate_size, bias=False)
        self.down_proj = torch.nn.Linear(spec.intermediate_size, spec.hidden_size, bias=False)

    def forward(self, h):
        return self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class ExitLayer(torch.nn.Module):
    """One transformer layer; forward(x, positions, valid) -> the residual stream after it."""

    def __init__(self, spec):
        super().__init__()
        self.input_layernorm = RmsNorm(spec.hidden_size, spec.rms_norm_eps)
        self.self_attn = Attention(spec)
        self.post_attention_layernorm = RmsNorm(spec.hidden_size, spec.rms_norm_eps)
        self.mlp = Mlp(spec)
        self.register_buffer("inv_freq", rope_inverse_frequencies(
            spec.head_dim, spec.rope_theta, spec.rope_scaling), persistent=False)

    def forward(self, x, positions, valid):
        """x [B, T, H] f32; positions [B, T] int64 (RoPE positions); valid [B, T] bool (False:
        padding, never attended to). Causal within each row of the batch."""
        angle = positions.double().unsqueeze(-1) * self.inv_freq.double()
        cos, sin = angle.cos().float().unsqueeze(1), angle.sin().float().unsqueeze(1)
        length = x.shape[1]
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        mask = (causal.unsqueeze(0) & valid.unsqueeze(1)).unsqueeze(1)
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class FrozenHead:
    """The model's final RMSNorm and LM head (BF16 rows, converted to f32 when used)."""

    def __init__(self, norm_weight, lm_head_bits, eps):
        self.norm_weight = torch.from_numpy(np.array(norm_weight, dtype=np.float32))
        self.lm_head_bits = lm_head_bits  # uint16 [V, H]
        self.eps = eps
        self.vocab_size = lm_head_bits.shape[0]

    def normed(self, x):
        """The final norm of residual rows x [..., H]."""
        return rms_norm(x, self.norm_weight, self.eps)

    def rows(self, ids):
        """f32 [len(ids), H] LM head rows of token ids (a 1-D int64 tensor)."""
        return torch.from_numpy(bf16_to_f32(self.lm_head_bits[ids.numpy()]))

    def argmax(self, z, chunk=16384):
        """int64 [M]: argmax over the FULL vocabulary of z [M, H] @ lm_head^T, in vocab chunks (the
        first index wins ties, as torch.argmax)."""
        best = torch.full((z.shape[0],), float("-inf"))
        best_id = torch.zeros(z.shape[0], dtype=torch.int64)
        for begin in range(0, self.vocab_size, chunk):
            weight = torch.from_numpy(bf16_to_f32(self.lm_head_bits[begin:begin + chunk]))
            values, ids = torch.matmul(z, weight.t()).max(dim=1)
            better = values > best
            best = torch.where(better, values, best)
            best_id = torch.where(better, ids + begin, best_id)
        return best_id
