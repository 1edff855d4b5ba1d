"""Building blocks shared by every model family: attention with an incremental cache, FFN, positions.

Layers follow the Neutron Transformer that paper A builds on: no bias on the attention projections
or on the FFN output, pre-norm residual blocks by default. That choice is what makes the parameter
count of Transformer Base come out at the paper's 44.10M non-embedding parameters.
"""
from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    """The sizes every family shares, held once (as nanoGPT's GPTConfig) and handed to every layer.

    Field names are the config.yaml model options; defaults are Transformer Base. A family with more
    options subclasses this and names the subclass as its `config_class`; `models.build_model` checks
    a spec's option names against that class's fields.
    """
    d_model: int = 512
    ffn: int = 2048                   # FFN inner width
    heads: int = 8
    encoder_layers: int = 6
    decoder_layers: int = 6
    dropout: float = 0.1              # on embeddings and every residual branch
    attention_dropout: float = 0.0    # on attention weights
    activation_dropout: float = 0.0   # inside the FFN (fairseq's name)
    pre_norm: bool = True             # layer norm before each sublayer (False: after the sum, Vaswani)
    output_bias: bool = False         # a target-vocabulary bias on the tied output layer (Neutron)
    # Baselines of papers B and D, on the encoder self-attention only (the papers' subject is the
    # source side; decoder and cross-attention stay plain). Both keep the sinusoidal absolute
    # positions and every weight of the plain model, so a variant warm-starts from a trained baseline.
    rel_pos_clip: int = 0             # > 0: Shaw et al. 2018 relative positions clipped at k (paper B: 16)
    rel_pos_shared: bool = False      # one table for all heads, as Shaw et al. (paper D's Rel_PE); off: per head (B)
    directional: bool = False         # DiSAN masks (Shen et al. 2018): half the heads forward, half backward
    # Paper D's DisReg baseline (Li et al. 2018): lambda of the output-disagreement term that the
    # training loss adds for the encoder self-attention heads (training/criterion.py); no weights.
    disagreement: float = 0.0

    def __post_init__(self):
        """Subclasses that define their own __post_init__ call this one first."""
        if self.rel_pos_clip < 0:
            raise ValueError(f"rel_pos_clip must be 0 (off) or a positive clipping distance, "
                             f"not {self.rel_pos_clip}")
        if self.rel_pos_shared and not self.rel_pos_clip:
            raise ValueError("rel_pos_shared shares the relative-position tables across heads: it needs "
                             "rel_pos_clip > 0")
        if self.disagreement < 0:
            raise ValueError(f"disagreement is a loss weight (lambda >= 0), not {self.disagreement}")
        if self.directional and self.heads % 2:
            raise ValueError(f"directional needs an even number of heads (half forward, half backward), "
                             f"not heads={self.heads}")

    @property
    def extra_inputs(self) -> tuple[str, ...]:
        """What `encode` takes besides `src`, each a key of the batch's net_input (none here)."""
        return ()


# A decoding cache: one dict per attention module, keyed by module, holding (batch, heads, time, d_head) tensors.
Cache = dict


class MultiheadAttention(nn.Module):
    """Scaled dot-product attention over `heads` heads, using torch's fused SDPA kernel.

    With `cache`, self-attention appends this step's keys/values to those of earlier steps, and
    cross-attention (`static_kv=True`) projects the encoder output once and reuses it every step.
    What needs each head's output (the head-similarity analysis of paper D Table IV, the disagreement
    term of the DisReg baseline) records it with `recording_heads`: forward then appends (B, heads, T,
    d_head) to `head_outputs`, in the graph when gradients are on. It is None otherwise, costing one test.

    Two options, built only for the encoder's self-attention (`ModelConfig.rel_pos_clip` and
    `directional`; self-attention without cache, positions counted from 0 in query and key):
    `rel_clip` k > 0 adds Shaw et al. (2018) relative positions, learned key and value tables of 2k+1
    rows of d_head per head (paper B: "unique edge representations per layer and head", k = 16), or
    with `rel_shared` one pair of tables for all heads, as Shaw et al. share them ("across attention
    heads", paper D's Rel_PE);
    SDPA has no value-side term, so that path computes attention explicitly. `directional` gives the
    first half of the heads DiSAN's forward mask (position i sees only j < i) and the second half the
    backward one (j > i) (Shen et al. 2018); a row left with no key (the first token of a forward
    head, the last real token of a backward one, padding) attends to itself instead of producing NaN.
    Without either option forward is the plain SDPA call (one flag, tested twice).
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0, bias: bool = False,
                 rel_clip: int = 0, directional: bool = False, rel_shared: bool = False):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model={d_model} is not divisible by heads={heads}")
        if rel_clip < 0:
            raise ValueError(f"rel_clip must be 0 (off) or a positive clipping distance, not {rel_clip}")
        if directional and heads % 2:
            raise ValueError(f"directional masks need an even number of heads, not {heads}")
        self.heads, self.d_head, self.dropout = heads, d_model // heads, dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.kv_proj = nn.Linear(d_model, 2 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.head_outputs: list[torch.Tensor] | None = None
        self.rel_clip, self.directional = rel_clip, directional
        self.encoder_options = rel_clip > 0 or directional
        self.rel_k = self.rel_v = None
        if rel_clip:
            # a^K, a^V (heads or 1 shared, 2k+1, d_head), broadcast over the heads: nn.Parameter, not
            # nn.Embedding, so that models.size counts them as model parameters. Xavier-uniform per table.
            bound, tables = math.sqrt(6.0 / (2 * rel_clip + 1 + self.d_head)), 1 if rel_shared else heads
            self.rel_k = nn.Parameter(torch.empty(tables, 2 * rel_clip + 1, self.d_head).uniform_(-bound, bound))
            self.rel_v = nn.Parameter(torch.empty(tables, 2 * rel_clip + 1, self.d_head).uniform_(-bound, bound))

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape  # (batch, time, d) -> (batch, heads, time, d_head)
        return x.view(b, t, self.heads, self.d_head).transpose(1, 2)

    def forward(self, query, memory, key_padding_mask=None, causal=False,
                cache: Cache | None = None, static_kv=False):
        """query (B, T, d), memory (B, S, d) or None for self-attention; key_padding_mask (B, S) True at padding."""
        if self.encoder_options and (memory is not None or cache is not None or causal):
            raise ValueError("relative positions and directional masks are for encoder self-attention "
                             "(no memory, cache or causal mask)")
        memory = query if memory is None else memory
        q = self._split(self.q_proj(query))
        if cache is not None and static_kv and "k" in cache:
            k, v = cache["k"], cache["v"]
        else:
            k, v = (self._split(x) for x in self.kv_proj(memory).chunk(2, dim=-1))
            if cache is not None and not static_kv and "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
        if cache is not None:
            cache["k"], cache["v"] = k, v
        mask = None
        if key_padding_mask is not None:
            mask = ~key_padding_mask[:, None, None, :]  # (B, 1, 1, S): True where attending is allowed
        if self.encoder_options:
            out = self._encoder_attention(q, k, v, mask)
        else:
            # A single query (incremental decoding) sees every cached key; a full pass (cache None: the
            # training step, compiled with symbolic lengths too) masks the future, a lone query included.
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=causal and (cache is None or q.size(2) > 1),
                dropout_p=self.dropout if self.training else 0.0)
        if self.head_outputs is not None:
            self.head_outputs.append(out)
        b, _, t, _ = out.shape
        return self.out_proj(out.transpose(1, 2).reshape(b, t, -1))

    def _encoder_attention(self, q, k, v, mask):
        """q, k, v (B, H, S, d_head), mask (B, 1, 1, S) or None -> (B, H, S, d_head) with the options."""
        if self.directional:
            mask = directional_mask(self.heads, q.size(2), mask, q.device)          # (B or 1, H, S, S)
        p = self.dropout if self.training else 0.0
        if self.rel_k is None:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        # Shaw et al. 2018, Eq. 4: e_ij = q_i . (k_j + a^K_clip(j-i)) / sqrt(d_head). q_i . a^K is taken
        # against the 2k+1 table rows once, then each (i, j) picks its row: no (B, H, S, S, d_head) tensor.
        index = relative_positions(q.size(2), k.size(2), self.rel_clip, q.device)  # (S, S) in [0, 2k]
        scores = q @ k.transpose(-1, -2)                                            # (B, H, S, S)
        by_distance = q @ self.rel_k.transpose(-1, -2)                              # (B, H, S, 2k+1)
        scores = (scores + by_distance.gather(-1, index.expand_as(scores))) * self.d_head ** -0.5
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = dropout(scores.softmax(-1), p, self.training)                   # alpha (B, H, S, S)
        # Eq. 3: z_i = sum_j alpha_ij (v_j + a^V_clip(j-i)); the weights are summed per distance first.
        per_distance = weights.new_zeros(*weights.shape[:-1], self.rel_v.size(1)).scatter_add(
            -1, index.expand_as(weights), weights)                                  # (B, H, S, 2k+1)
        return weights @ v + per_distance @ self.rel_v


def relative_positions(query_len: int, key_len: int, clip: int, device=None) -> torch.Tensor:
    """(query_len, key_len) table row of each pair: clip(j - i, -k, k) + k, in [0, 2k] (Shaw et al. 2018)."""
    pos_q = torch.arange(query_len, device=device)
    pos_k = torch.arange(key_len, device=device)
    return (pos_k[None, :] - pos_q[:, None]).clamp(-clip, clip) + clip



def encoder_attentions(model) -> list[MultiheadAttention]:
    """The attention modules of a model's encoder (every family keeps its layers in `model.encoder`)."""
    encoder = getattr(model, "encoder", None)
    found = [m for m in encoder.modules() if isinstance(m, MultiheadAttention)] if encoder is not None else []
    if not found:
        raise ValueError(f"{type(model).__name__} has no attention in `model.encoder`")
    return found


@contextlib.contextmanager
def recording_heads(attentions: list[MultiheadAttention]):
    """Within the block each module appends its per-head output (B, heads, T, d_head) of every call to
    its list of the yielded list of lists (one per module, in order); afterwards recording is off."""
    for module in attentions:
        module.head_outputs = []
    try:
        yield [module.head_outputs for module in attentions]
    finally:
        for module in attentions:
            module.head_outputs = None


def directional_mask(heads: int, length: int, allowed: torch.Tensor | None = None, device=None) -> torch.Tensor:
    """DiSAN masks (Shen et al. 2018), True where attending is allowed: (B or 1, heads, length, length).

    Heads [0, heads/2) are forward (query i sees keys j < i), the others backward (j > i); `allowed`
    (B, 1, 1, length) is the key padding mask. A query row left without any key attends to itself.
    """
    pos = torch.arange(length, device=device)
    forward = pos[None, :] < pos[:, None]                                           # (S, S): j < i
    mask = torch.stack([forward, forward.T]).repeat_interleave(heads // 2, dim=0)  # (H, S, S)
    mask = mask[None] if allowed is None else mask & allowed                        # (B or 1, H, S, S)
    empty = ~mask.any(-1, keepdim=True)                                             # (B or 1, H, S, 1)
    return mask | (empty & torch.eye(length, dtype=torch.bool, device=device))


class FeedForward(nn.Module):
    """Position-wise FFN: Linear -> ReLU -> dropout -> Linear (no output bias, as in Neutron).

    The inner dropout is fairseq's `activation_dropout` (0 by default there): on a CPU, drawing a mask
    over the wide inner layer costs more than the residual dropouts together.
    """

    def __init__(self, d_model: int, d_ffn: int, dropout: float = 0.0):
        super().__init__()
        self.inner = nn.Linear(d_model, d_ffn)
        self.outer = nn.Linear(d_ffn, d_model, bias=False)
        self.dropout = dropout

    def forward(self, x):
        return self.outer(dropout(F.relu(self.inner(x)), self.dropout, self.training))


class _MaskedDropout(torch.autograd.Function):
    """Dropout whose mask comes from 16 random bits an element: four from each 64-bit draw of torch's
    CPU generator, a unit dropped where its bits fall below round(p * 2^16) (p to within 2^-17).
    `bernoulli_`, which F.dropout uses, draws an element at a time: on the `tiny` Base's activations
    (4,096 x 128) 4.5 ms a call against 2.1 here, on one thread, 12 calls an update
    (docs/measurements.md, "Where a tiny training step goes")."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float):
        words = torch.empty((x.numel() + 3) // 4, dtype=torch.int64).random_(-2 ** 63, None)
        keep = (words.view(torch.int16)[:x.numel()] >= round(p * 2 ** 16) - 2 ** 15).view(x.shape)
        ctx.save_for_backward(keep)
        ctx.scale = 1.0 / (1.0 - p)
        return torch.where(keep, x * ctx.scale, 0.0)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        keep, = ctx.saved_tensors
        return torch.where(keep, grad * ctx.scale, 0.0), None


def dropout(x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
    """F.dropout, its mask drawn as `_MaskedDropout` draws it on a CPU outside a compiled graph; a GPU
    and a compiled step keep torch's own (inductor draws its masks in the graph)."""
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or torch.compiler.is_compiling() or p >= 1.0:
        return F.dropout(x, p, training)
    return _MaskedDropout.apply(x, p)


class Residual(nn.Module):
    """x + dropout(f(x)) with layer norm before f (pre-norm) or after the sum (post-norm, Vaswani)."""

    def __init__(self, sublayer: nn.Module, config: ModelConfig):
        super().__init__()
        self.sublayer, self.norm = sublayer, nn.LayerNorm(config.d_model)
        self.dropout, self.pre_norm = config.dropout, config.pre_norm

    def forward(self, x, *args, **kwargs):
        if self.pre_norm:
            return x + dropout(self.sublayer(self.norm(x), *args, **kwargs), self.dropout, self.training)
        return self.norm(x + dropout(self.sublayer(x, *args, **kwargs), self.dropout, self.training))


def _sinusoid_table(length: int, d_model: int, start: int = 0, device=None) -> torch.Tensor:
    """(length, d) sinusoidal position encodings of positions start .. start + length - 1, sin in the
    first half and cos in the second."""
    half = d_model // 2
    freqs = torch.exp(torch.arange(half, dtype=torch.float32, device=device) * -(math.log(10000.0) / max(half - 1, 1)))
    pos = torch.arange(start, start + length, dtype=torch.float32, device=device)[:, None] * freqs[None, :]
    enc = torch.cat([pos.sin(), pos.cos()], dim=1)
    return F.pad(enc, (0, d_model % 2))


_TABLES: dict[tuple[int, torch.device], torch.Tensor] = {}  # (d, device) -> the longest table built


def sinusoidal_positions(length: int, d_model: int, offset: int = 0, device=None) -> torch.Tensor:
    """(length, d) sinusoidal encodings of positions offset .. offset + length - 1, on `device`.

    A table per (width, device) is built once and grown by doubling, so a forward pass slices a
    tensor already on the GPU instead of computing the encodings on the host and copying them over
    (every layer of every step of incremental decoding asks). A row does not depend on the table's
    length, so the slice equals a fresh computation bit for bit. A compiled step (training/fast.py)
    computes its rows in the graph instead: the table's growth would guard the graph on each length.
    """
    if torch.compiler.is_compiling():
        return _sinusoid_table(length, d_model, offset, device)
    key, end = (d_model, torch.device(device or "cpu")), offset + length
    table = _TABLES.get(key)
    if table is None or len(table) < end:
        table = _sinusoid_table(max(end, 2 * len(table) if table is not None else 256), d_model).to(key[1])
        _TABLES[key] = table
    return table[offset:end]


class Embedding(nn.Module):
    """Token embedding scaled by sqrt(d) plus sinusoidal positions, then dropout.

    Initialised with std d^-0.5 so that, once scaled, token vectors have unit norm per dimension:
    N(0, 1) weights tied to the softmax start training at a loss near 120.
    """

    def __init__(self, vocab_size: int, d_model: int, pad: int, dropout: float):
        super().__init__()
        self.table = nn.Embedding(vocab_size, d_model, padding_idx=pad)
        nn.init.normal_(self.table.weight, std=d_model ** -0.5)
        with torch.no_grad():
            self.table.weight[pad].zero_()
        self.scale, self.dropout = math.sqrt(d_model), dropout

    def forward(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        x = self.table(tokens) * self.scale
        x = x + sinusoidal_positions(tokens.size(1), x.size(-1), offset, x.device).to(x)
        return dropout(x, self.dropout, self.training)


def xavier_init(module: nn.Module) -> None:
    """Xavier-uniform weights and zero biases for every Linear inside `module` (Vaswani et al.)."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            if m.bias is not None:
                nn.init.zeros_(m.bias)


def reorder_encoder(enc: dict, order: torch.Tensor) -> dict:
    """Select batch rows `order` of every tensor of an encoder state (beam search's expansion)."""
    return {k: v.index_select(0, order) for k, v in enc.items()}


def reorder_cache(cache: dict, order: torch.Tensor) -> None:
    """Select batch rows `order` in every tensor of a nested decoding cache, in place."""
    for key, value in cache.items():
        if isinstance(value, dict):
            reorder_cache(value, order)
        elif isinstance(value, torch.Tensor):
            cache[key] = value.index_select(0, order)


def masked_mean(x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
    """x (B, S, d), pad (B, S) True at padding -> mean over real positions (B, d)."""
    real = (~pad).unsqueeze(-1).to(x.dtype)
    return (x * real).sum(1) / real.sum(1).clamp(min=1)


class BiRNN(nn.Module):
    """A bidirectional GRU over the input, both directions started from its mean (paper B, Eq. 9-11),
    [forward; backward] projected back to the input width (paper D, Eq. 8-9)."""

    def __init__(self, d_model: int):
        super().__init__()
        self.gru = nn.GRU(d_model, d_model, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * d_model, d_model)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, S, d) -> (B, S, d) and the same padding mask; pads never reach a real state."""
        h0 = masked_mean(x, pad)[None].expand(2, -1, -1).contiguous()           # (2, B, d)
        return self.out(run_bidirectional(self.gru, x, pad, h0)), pad            # (B, S, 2d) -> (B, S, d)


def reversed_real(pad: torch.Tensor) -> torch.Tensor:
    """pad (B, S) True at padding after each sentence -> positions (B, S) that reverse each sentence's
    real part and leave its padding in place: gathering by them twice is the identity."""
    lengths = (~pad).sum(1, keepdim=True)                                        # (B, 1)
    t = torch.arange(pad.size(1), device=pad.device)
    return torch.where(t < lengths, lengths - 1 - t, t)


def run_bidirectional(rnn: nn.GRU, x: torch.Tensor, pad: torch.Tensor, h0: torch.Tensor | None = None) -> torch.Tensor:
    """A batch-first bidirectional GRU (its own weights, layers and dropout) over the real positions of
    x (B, S, d) only, pad (B, S) True at padding: (B, S, 2 hidden), zero at pads; h0 as nn.GRU's.

    What packing computes, without packing: packing reads the lengths on the host, and that read makes
    the host wait for the GPU in every step. Each direction is one call over the padded batch instead.
    The forward one reads each sentence from its start, so the pads after it never reach a real state;
    the backward one reads it reversed within its length (`reversed_real`), so it starts at the
    sentence's last word."""
    order = reversed_real(pad)[..., None]                                        # (B, S, 1)
    real = (~pad)[..., None].to(x.dtype)
    zeros = x.new_zeros(1, x.size(0), rnn.hidden_size)
    for layer in range(rnn.num_layers):
        if layer:
            x = dropout(x, rnn.dropout, rnn.training)
        k = 2 * layer                                                            # weights: k forward, k + 1 backward
        h_f, h_b = (zeros, zeros) if h0 is None else (h0[k:k + 1], h0[k + 1:k + 2])
        forward = gru_direction(x, h_f, rnn.all_weights[k], rnn.bias, rnn.training)
        backward = gru_direction(x.gather(1, order.expand_as(x)), h_b, rnn.all_weights[k + 1], rnn.bias, rnn.training)
        x = torch.cat([forward, backward.gather(1, order.expand_as(backward))], dim=-1) * real
    return x


@torch._disable_dynamo
def gru_direction(x: torch.Tensor, h0: torch.Tensor, weights: list[torch.Tensor], bias: bool,
                  training: bool) -> torch.Tensor:
    """One direction of one layer: x (B, S, d) -> (B, S, hidden), in one call (cuDNN's on a GPU). Left
    out of compiled graphs, as dynamo leaves nn.GRU: traced, it unrolls over the length and compiles
    again for every new length. (torch.compiler.disable would do the same, but imports dynamo with this
    module: a second of every process, decoding and the analyses included; torch's own lazy form
    imports it at the first call.) In fp32 cuDNN copies a direction's weights out of the module's one
    buffer each call (a few MB) and warns to flatten them, which cannot help a slice of that buffer."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="RNN module weights are not part of single contiguous chunk")
        return torch.gru(x, h0, weights, bias, 1, 0.0, training, False, True)[0]
