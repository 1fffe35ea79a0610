"""The feature-level draft head (EAGLE, arXiv 2401.15077 §3) of scripts/train_feature_head.py.

Notation: n(.) is the model's frozen final RMSNorm, E(id) a token's embedding row, h_i the final
residual stream at row i of a sequence (the recorded `hidden` of data collected with exit layer =
num_layers) and x_{i+1} = next_token[i] the token that follows row i.

* Input of row i: u_i = fc(concat(n(h_i), E(x_{i+1}))), fc a Linear(2H -> H) with a bias.
* One transformer layer (exit_layer.ExitLayer, started from the model's last layer), causal over
  the window at the rows' positions: o = Layer(u). o_i estimates h_{i+1}; its draft distribution
  is the frozen LM head on n(o_i), to be compared with the full model's distribution at row i+1.
* Depth 2 (drafting feeds the head its own prediction): at row p = i + 1 the drafted input is
  û_p = fc(concat(n(o_{p-1}), E(x_{p+1}))). Its query attends to the TRUE inputs' keys/values at
  rows < p and to its own key/value at p, which is what the drafter's KV cache holds when the
  first draft of a round was accepted (depth2_attention). ô_p estimates h_{p+1}.

A FeatureBatch holds windows of rows padded to one length with the row masks the loss and the
evaluation use: depth1 (row i whose target row i + 1 is one of the window's loss rows) and depth2
(row p >= 1 of the window whose target p + 1 is a loss row). Each row of a sequence but its first
is thereby the target of exactly one depth-1 row over the windows of windows_of(). The head's
tensors are "feature_head.fc.weight" [H, 2H], "feature_head.fc.bias" [H] and
"feature_head.layer.<HF layer suffix>" (ExitLayer's state_dict names), all F32. Only torch 1.13
features.
"""

import math

import numpy as np
import torch
import torch.nn.functional as F

from exit_head.dataset import DataError
from exit_head.exit_layer import ExitLayer, apply_rope
from exit_head.safetensors_io import bf16_to_f32, dtype_of, read_safetensors

kFormat = "selfspec-feature-head"
kVersion = "1"
kPrefix = "feature_head."
kEmbeddingTensor = "model.embed_tokens.weight"
# The spread of fc's random embedding half relative to PyTorch's default Linear initialisation.
kEmbeddingInitScale = 0.1


class TokenEmbedding:
    """E(id): f32 rows of a BF16 [V, H] table (uint16 bits), the model's token embedding or, when
    frozen.safetensors has none (the collector writes the LM head only), the LM head rows."""

    def __init__(self, bits, source):
        self.bits = bits
        self.source = source

    def rows(self, ids):
        """f32 [..., H] rows of the int64 array `ids` [...]."""
        return torch.from_numpy(bf16_to_f32(self.bits[np.asarray(ids)]))


def load_embedding(path, spec, head):
    """The TokenEmbedding of frozen.safetensors `path`: its model.embed_tokens.weight (BF16 [V, H])
    when it holds one, else the LM head rows (head: exit_layer.FrozenHead), which Qwen2.5 ties to
    the embedding (for an untied model they are still a fixed, distinct code per token that fc
    learns to read)."""
    tensors, _ = read_safetensors(path)
    if kEmbeddingTensor not in tensors:
        return TokenEmbedding(head.lm_head_bits, "lm_head.weight (tied embedding)")
    value, dtype = tensors[kEmbeddingTensor], dtype_of(path)[kEmbeddingTensor]
    if dtype != "BF16" or value.shape != (spec.vocab_size, spec.hidden_size):
        raise DataError(f"{path}: {kEmbeddingTensor} is {dtype} {list(value.shape)}, expected "
                        f"BF16 [{spec.vocab_size}, {spec.hidden_size}]")
    return TokenEmbedding(np.array(value), kEmbeddingTensor)


def rope_tables(layer, positions):
    """(cos, sin) [B, 1, T, d/2] of int64 positions [B, T], exactly as ExitLayer.forward makes
    them."""
    angle = positions.double().unsqueeze(-1) * layer.inv_freq.double()
    return angle.cos().float().unsqueeze(1), angle.sin().float().unsqueeze(1)


def depth2_attention(attn, h_true, h_draft, cos, sin, valid):
    """The attention output (after o_proj) [B, T, H] of the drafted rows: row p's query (from
    h_draft[:, p]) attends to the keys/values of h_true at the valid rows j < p and to the key/value
    of h_draft[:, p] itself. attn: exit_layer.Attention; h_true, h_draft [B, T, H] already through
    input_layernorm; cos/sin from rope_tables (the draft at p has position p's); valid [B, T]."""
    batch, length, _ = h_true.shape
    group = attn.heads // attn.kv_heads
    q = apply_rope(attn._split(attn.q_proj(h_draft), attn.heads), cos, sin)
    k = apply_rope(attn._split(attn.k_proj(h_true), attn.kv_heads), cos, sin)
    v = attn._split(attn.v_proj(h_true), attn.kv_heads)
    k_own = apply_rope(attn._split(attn.k_proj(h_draft), attn.kv_heads), cos, sin)
    v_own = attn._split(attn.v_proj(h_draft), attn.kv_heads)
    k, v, k_own, v_own = (t.repeat_interleave(group, dim=1) for t in (k, v, k_own, v_own))
    scale = 1.0 / math.sqrt(attn.head_dim)
    earlier = torch.ones(length, length, dtype=torch.bool).tril(-1)  # key j < query p
    mask = (earlier.unsqueeze(0) & valid.unsqueeze(1)).unsqueeze(1)
    scores = (torch.matmul(q, k.transpose(-1, -2)) * scale).masked_fill(~mask, float("-inf"))
    own = (q * k_own).sum(dim=-1, keepdim=True) * scale  # [B, heads, T, 1]: the diagonal
    probs = torch.softmax(torch.cat([scores, own], dim=-1), dim=-1)
    out = torch.matmul(probs[..., :length], v) + probs[..., length:] * v_own
    return attn.o_proj(out.transpose(1, 2).reshape(batch, length, attn.heads * attn.head_dim))


class FeatureHead(torch.nn.Module):
    """fc (Linear 2H -> H) and one transformer layer; state_dict() names "fc.*" and "layer.*"."""

    def __init__(self, spec):
        super().__init__()
        self.hidden_size = spec.hidden_size
        self.fc = torch.nn.Linear(2 * spec.hidden_size, spec.hidden_size, bias=True)
        self.layer = ExitLayer(spec)

    def initialise_fc(self, generator):
        """fc = [I | small random], bias 0: u_i starts as n(h_i) plus a little of E(x_{i+1}).

        The identity on the feature half hands the pretrained last layer a state in the space
        the final norm and LM head read (n(h_i) itself), so the head starts from a working layer
        on the model's own features rather than from noise. The embedding half starts small
        (kEmbeddingInitScale of PyTorch's default Linear spread) so that the token does not swamp
        the feature at first; random rather than zero (zero would train too: its gradient
        g E(x)^T is not zero) so that the token already reaches the layer at the first step."""
        h = self.hidden_size
        bound = kEmbeddingInitScale / math.sqrt(2 * h)
        with torch.no_grad():
            self.fc.weight.zero_()
            self.fc.weight[:, :h] = torch.eye(h)
            self.fc.weight[:, h:] = (torch.rand(h, h, generator=generator) * 2 - 1) * bound
            self.fc.bias.zero_()

    def inputs(self, features, embeddings):
        """fc(concat(features, embeddings)) of normed features and token rows [..., H]."""
        return self.fc(torch.cat([features, embeddings], dim=-1))

    def depth2(self, u_true, features, embeddings, positions, valid):
        """ô [B, T, H]: the layer on the drafted inputs fc(concat(features, embeddings)) (features
        at row p: n(o_{p-1})), attending as depth2_attention does to the true inputs u_true."""
        u_draft = self.inputs(features, embeddings)
        cos, sin = rope_tables(self.layer, positions)
        norm = self.layer.input_layernorm
        x = u_draft + depth2_attention(self.layer.self_attn, norm(u_true), norm(u_draft), cos, sin,
                                       valid)
        return x + self.layer.mlp(self.layer.post_attention_layernorm(x))


class FeatureBatch:
    """Windows padded to one length. hidden [B, T, H] f32 (h, unnormed), embedded [B, T, H]
    (E(next_token)), positions [B, T], valid [B, T]; depth1 / depth2 [B, T] bool (rows with a
    depth-1 / depth-2 target among the window's loss rows, see the module docstring);
    target [B, T] int64 (the data row after each row; -1 where there is none)."""

    def __init__(self, data, windows, embedding):
        length = max(w.end - w.start for w in windows)
        shape = (len(windows), length)
        hidden = np.zeros(shape + (data.hidden.shape[1],), dtype=np.float32)
        rows = np.zeros(shape, dtype=np.int64)
        positions = np.zeros(shape, dtype=np.int64)
        valid = np.zeros(shape, dtype=bool)
        target = np.full(shape, -1, dtype=np.int64)
        depth1 = np.zeros(shape, dtype=bool)
        depth2 = np.zeros(shape, dtype=bool)
        for b, w in enumerate(windows):
            n = w.end - w.start
            hidden[b, :n] = bf16_to_f32(data.hidden[w.start:w.end])
            rows[b, :n] = np.arange(w.start, w.end)
            positions[b, :n] = data.position[w.start:w.end]
            valid[b, :n] = True
            target[b, :n - 1] = np.arange(w.start + 1, w.end)
            first = max(w.loss_from - w.start - 1, 0)  # the first row whose target is a loss row
            depth1[b, first:n - 1] = True
            depth2[b, max(first, 1):n - 1] = True
        self.hidden, self.positions = torch.from_numpy(hidden), torch.from_numpy(positions)
        self.valid = torch.from_numpy(valid)
        self.embedded = embedding.rows(np.where(valid, data.next_token[rows], 0))
        self.target = target
        self.depth1, self.depth2 = torch.from_numpy(depth1), torch.from_numpy(depth2)

    @property
    def depth1_targets(self):
        """int64 [M1]: the target data rows of the depth-1 rows, in the order of z[depth1]."""
        return self.target[self.depth1.numpy()]

    @property
    def depth2_targets(self):
        """int64 [M2]: the target data rows of the depth-2 rows, in the order of z[depth2]."""
        return self.target[self.depth2.numpy()]


def forward(model, head, batch, depth2):
    """(n(h) [B, T, H], z1 = n(o) [B, T, H], z2 = n(ô) [B, T, H] or None without depth2).
    head: exit_layer.FrozenHead (its final norm); model: FeatureHead."""
    normed = head.normed(batch.hidden)
    u = model.inputs(normed, batch.embedded)
    z1 = head.normed(model.layer(u, batch.positions, batch.valid))
    if not depth2:
        return normed, z1, None
    previous = torch.cat([torch.zeros_like(z1[:, :1]), z1[:, :-1]], dim=1)  # n(o_{p-1}) at p
    return normed, z1, head.normed(model.depth2(u, previous, batch.embedded, batch.positions,
                                                batch.valid))


def next_rows(x):
    """x [B, T, ...] shifted one row back: result[:, i] = x[:, i + 1] (zeros at the end), the
    targets of rows i."""
    return torch.cat([x[:, 1:], torch.zeros_like(x[:, :1])], dim=1)


def feature_loss(z, target):
    """SmoothL1 (beta 1, EAGLE's) between normed predictions and normed targets [M, H], the mean
    over H and the M rows."""
    return F.smooth_l1_loss(z, target)


def evaluate(model, head, data, windows, batch_size, embedding):
    """Held-out agreement of the full-vocabulary argmax of the LM head on the predictions with the
    full model's most likely token (topk_ids[target, 0]): depth 1 over the depth-1 rows; depth 2
    over the depth-2 rows, unconditionally and over those whose depth-1 row p - 1 agreed (as in
    drafting, where a second draft counts only after the first was accepted); and the expected
    tokens of a verification round of a greedy 2-token chain, 1 + a1 + a1 * a2|1. A rate with no
    rows to count is None (chain_expected_tokens then takes a2|1 as 0)."""
    counts = dict.fromkeys(("depth1", "depth1_agreed", "depth2", "depth2_agreed",
                            "conditioned", "conditioned_agreed"), 0)
    with torch.no_grad():
        for begin in range(0, len(windows), batch_size):
            batch = FeatureBatch(data, windows[begin:begin + batch_size], embedding)
            _, z1, z2 = forward(model, head, batch, True)
            depth1, depth2 = batch.depth1, batch.depth2
            before = torch.cat([depth2[:, 1:], torch.zeros_like(depth2[:, :1])], dim=1)
            scored = depth1 | before  # rows p - 1 of the depth-2 rows may lie before depth1's
            agreed = torch.zeros_like(depth1)
            agreed[scored] = head.argmax(z1[scored]) == _top1(data, batch.target[scored.numpy()])
            agreed2 = head.argmax(z2[depth2]) == _top1(data, batch.depth2_targets)
            first = torch.cat([torch.zeros_like(agreed[:, :1]), agreed[:, :-1]], dim=1)[depth2]
            counts["depth1"] += int(depth1.sum())
            counts["depth1_agreed"] += int(agreed[depth1].sum())
            counts["depth2"] += int(depth2.sum())
            counts["depth2_agreed"] += int(agreed2.sum())
            counts["conditioned"] += int(first.sum())
            counts["conditioned_agreed"] += int((agreed2 & first).sum())
    a1 = _rate(counts["depth1_agreed"], counts["depth1"])
    a2_given = _rate(counts["conditioned_agreed"], counts["conditioned"])
    chain = None if a1 is None else 1.0 + a1 + a1 * (a2_given or 0.0)
    return {"depth1_agreement": a1,
            "depth2_agreement": _rate(counts["depth2_agreed"], counts["depth2"]),
            "depth2_agreement_given_depth1": a2_given, "chain_expected_tokens": chain,
            "depth1_positions": counts["depth1"], "depth2_positions": counts["depth2"],
            "depth2_conditioned_positions": counts["conditioned"]}


def head_tensors(model):
    """{"feature_head.<name>": f32 array} of the head's weights, to write."""
    return {kPrefix + k: v.detach().contiguous().numpy().astype(np.float32)
            for k, v in model.state_dict().items()}


def load_feature_head(path, spec):
    """The FeatureHead written to `path` by the trainer (format, sizes and every tensor checked)."""
    tensors, metadata = read_safetensors(path)
    for key, expected in (("format", kFormat), ("version", kVersion),
                          ("model_identity", spec.identity),
                          ("hidden_size", str(spec.hidden_size))):
        if metadata.get(key) != expected:
            raise DataError(f"{path}: metadata {key} {metadata.get(key)!r}, expected "
                            f"{expected!r}")
    model = FeatureHead(spec)
    expected = model.state_dict()
    dtypes = dtype_of(path)
    state = {}
    for name, like in expected.items():
        key = kPrefix + name
        if key not in tensors:
            raise DataError(f"{path}: missing tensor {key}")
        if dtypes[key] != "F32" or tuple(tensors[key].shape) != tuple(like.shape):
            raise DataError(f"{path}: tensor {key} is {dtypes[key]} {list(tensors[key].shape)}, "
                            f"expected F32 {list(like.shape)}")
        state[name] = torch.from_numpy(np.array(tensors[key], dtype=np.float32))
    extra = sorted(set(tensors) - {kPrefix + n for n in expected})
    if extra:
        raise DataError(f"{path}: unexpected tensors {extra}")
    model.load_state_dict(state)
    model.eval()
    return model


def _top1(data, rows):
    return torch.from_numpy(data.topk_ids[rows, 0])


def _rate(agreed, count):
    return agreed / count if count else None
