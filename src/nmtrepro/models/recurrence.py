"""Transformer with an additional recurrence encoder (Hao et al. 2019, paper B), every variant an option.

A second encoder reads the source embeddings (the Transformer encoder's own input) through
`rec_layers` layers of C = LN(REC(H) + H), H' = LN(FFN(C) + C) (Eq. 7-8; the bottom layer has no
residual around REC, so its output may be shorter or longer than the source). REC is a
bidirectional GRU (`recurrence="rnn"`, Eq. 9-11) or the attentive recurrent network
(`recurrence="arn"`, Eq. 12-13): T steps h_t = GRU(h_{t-1}, c_t), c_t = ATT(h_{t-1}, H), in two
directions with their own weights, T = `steps` or "J" (as many steps as source tokens). Its output
reaches the decoder through one more attention sublayer, in the top decoder layer or in all of them
(`to_decoder`): stacked after the source attention (`integration="stack"`, Eq. 18-19, the paper's
default) or beside it and mixed by a gate (`"gated"`, Eq. 14-17). `integration="encoder"` is the
multi-column baseline of Table 4 (Chen et al. 2018): "six RNN layers" (paper B, Sec. 5.3), bidirectional
GRUs in residual blocks without Eq. 8's FFN, which the paper names for its own encoder only; the two
encoders' outputs are concatenated per position and projected back to d, so the decoder is the
Transformer's. The projection starts as [I; 0] with no norm after it (a new norm would rescale the
trained encoder's output), so the model starts as the trained Transformer it is initialised from.

Sizes the paper does not give, chosen here: each GRU direction has d units, started from the mean of
its input (Eq. 9-11's h_0), and [forward; backward] is projected back to d so that Eq. 7's residual
and the decoder's attention see width d; ATT is the model's multi-head attention with h_{t-1} as
query. The backward ARN direction is a second chain whose states are read in reverse order. With
pre-norm layers (the project's tiny default) every layer normalises its input instead, and the
stack ends in a layer norm, as the Transformer's encoder does.

The models are initialised from a trained Transformer (the paper's protocol; config `init_from`):
the Transformer's weights keep their names here, the recurrence encoder and the new decoder
sublayers start as initialised below.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from . import register
from .layers import BiRNN, ModelConfig, MultiheadAttention, dropout, masked_mean, reversed_real, xavier_init
from .transformer import DecoderLayer, Transformer, attention, feed_forward


@dataclass(frozen=True)
class RecurrenceConfig(ModelConfig):
    """The Transformer's sizes plus paper B's variants.

    recurrence: "rnn" (BiRNN) | "arn" (BiARN); rec_layers: N of the recurrence encoder (paper: 1, 3, 6);
    steps: ARN steps T (paper: 1, 4, 8, 16) or "J" (the source length); integration: "stack" |
    "gated" | "encoder" (multi-column, needs "rnn"); to_decoder: "top" | "all" decoder layers;
    zero_start: the new decoder sublayers' output projections start at zero, so that a stacked model
    warm-started from a Transformer starts computing what it computes (exactly with pre-norm; with
    post-norm up to the sublayer's fresh layer norm). The paper is silent; off unless a scale sets it.
    """
    recurrence: str = "arn"
    rec_layers: int = 1
    steps: int | str = 8
    integration: str = "stack"
    to_decoder: str = "top"
    zero_start: bool = False

    def __post_init__(self):
        super().__post_init__()
        for name, allowed in (("recurrence", ("rnn", "arn")), ("integration", ("stack", "gated", "encoder")),
                              ("to_decoder", ("top", "all"))):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, not {getattr(self, name)!r}")
        if self.rec_layers < 1:
            raise ValueError(f"rec_layers must be at least 1, not {self.rec_layers}")
        if self.steps != "J" and not (isinstance(self.steps, int) and self.steps >= 1):
            raise ValueError(f"steps must be a positive number of ARN steps or 'J', not {self.steps!r}")
        if self.integration == "encoder" and self.recurrence != "rnn":
            raise ValueError("integration='encoder' (multi-column) concatenates per source position: it needs "
                             "recurrence='rnn', whose output has the source's length")


class BiARN(nn.Module):
    """Eq. 12-13: T steps of h_t = GRU(h_{t-1}, ATT(h_{t-1}, H)) in two directions."""

    def __init__(self, c: RecurrenceConfig):
        super().__init__()
        self.steps = c.steps
        self.cells = nn.ModuleList(nn.GRUCell(c.d_model, c.d_model) for _ in range(2))
        self.attn = nn.ModuleList(MultiheadAttention(c.d_model, c.heads, c.attention_dropout) for _ in range(2))
        self.out = nn.Linear(2 * c.d_model, c.d_model)

    def chain(self, cell, attn, x, pad, steps: int) -> torch.Tensor:
        """One direction's states (B, T, d)."""
        h, states = masked_mean(x, pad), []
        for _ in range(steps):
            context = attn(h[:, None], x, key_padding_mask=pad)[:, 0]          # Eq. 13: (B, d)
            h = cell(context, h)                                                  # Eq. 12
            states.append(h)
        return torch.stack(states, dim=1)

    def forward(self, x: torch.Tensor, pad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, S, d) -> (B, T, d) and its padding mask: none for a fixed T; with T = "J", each
        sentence's own length (its states beyond it are padding)."""
        steps = x.size(1) if self.steps == "J" else self.steps
        forward, backward = (self.chain(cell, attn, x, pad, steps) for cell, attn in zip(self.cells, self.attn))
        if self.steps == "J":
            out_pad = pad
            order = reversed_real(pad)[..., None]                                   # (B, S, 1)
            backward = backward.gather(1, order.expand_as(backward))
        else:
            out_pad = pad.new_zeros(x.size(0), steps)
            backward = backward.flip(1)
        return self.out(torch.cat([forward, backward], dim=-1)), out_pad


class RecurrenceLayer(nn.Module):
    """Eq. 7-8: REC in a residual block (none around REC in the bottom layer), then the FFN; the
    multi-column baseline's RNN layers have no FFN."""

    def __init__(self, c: RecurrenceConfig, bottom: bool):
        super().__init__()
        self.rec = BiARN(c) if c.recurrence == "arn" else BiRNN(c.d_model)
        self.norm = nn.LayerNorm(c.d_model)
        self.ffn = feed_forward(c) if c.integration != "encoder" else None
        self.bottom, self.pre_norm, self.dropout = bottom, c.pre_norm, c.dropout

    def forward(self, x, pad):
        h, out_pad = self.rec(self.norm(x) if self.pre_norm else x, pad)
        h = dropout(h, self.dropout, self.training)
        c = h if self.bottom else x + h
        c = c if self.pre_norm else self.norm(c)
        return (c if self.ffn is None else self.ffn(c)), out_pad


class RecurrenceDecoderLayer(DecoderLayer):
    """A decoder layer that also attends the recurrence encoder's output H_r.

    stack (Eq. 18-19): self-attention -> source attention D -> R = LN(ATT(D, H_r) + D) -> FFN.
    gated (Eq. 14-17): D and R = LN(ATT(C, H_r) + C) both from the self-attention output C, then
    FFN(lambda D + (1 - lambda) R) with lambda = sigmoid(W[D; R] + b), one gate per dimension.
    """

    def __init__(self, config: RecurrenceConfig):
        super().__init__(config)
        self.rec_attn = attention(config)
        self.gate = nn.Linear(2 * config.d_model, config.d_model) if config.integration == "gated" else None

    def gate_values(self, d: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.gate(torch.cat([d, r], dim=-1)))                  # Eq. 17

    def forward(self, x, memory, memory_pad, rec, rec_pad, cache=None):
        def part(name):
            return None if cache is None else cache.setdefault(name, {})
        x = self.self_attn(x, None, causal=True, cache=part("self"))                # C
        d = self.cross_attn(x, memory, key_padding_mask=memory_pad, cache=part("cross"), static_kv=True)
        query = d if self.gate is None else x
        r = self.rec_attn(query, rec, key_padding_mask=rec_pad, cache=part("rec"), static_kv=True)
        if self.gate is None:
            return self.ffn(r)                                                      # Eq. 19
        lam = self.gate_values(d, r)
        return self.ffn(lam * d + (1 - lam) * r)                                    # Eq. 15-16


@register("recurrence")
class RecurrenceTransformer(Transformer):
    """Transformer + recurrence encoder; its options are `RecurrenceConfig`'s."""
    config_class = RecurrenceConfig

    def __init__(self, src_vocab: int, tgt_vocab: int, config: RecurrenceConfig):
        super().__init__(src_vocab, tgt_vocab, config)
        d = config.d_model
        self.recurrence = nn.ModuleList(RecurrenceLayer(config, bottom=i == 0) for i in range(config.rec_layers))
        self.recurrence_norm = nn.LayerNorm(d) if config.pre_norm else nn.Identity()
        # Multi-column (Chen et al. 2018): [H_e; H_r] per position -> d, starting as [I; 0] (H_e itself).
        self.columns = nn.Linear(2 * d, d) if config.integration == "encoder" else None
        xavier_init(self.recurrence)
        if config.zero_start:
            with torch.no_grad():
                for layer in self.decoder:
                    if isinstance(layer, RecurrenceDecoderLayer):
                        layer.rec_attn.sublayer.out_proj.weight.zero_()
        if self.columns is not None:
            with torch.no_grad():
                self.columns.weight.zero_()[:, :d].copy_(torch.eye(d))
                self.columns.bias.zero_()

    def make_decoder_layer(self, index: int) -> nn.Module:
        c = self.config
        fed = c.integration != "encoder" and (c.to_decoder == "all" or index == c.decoder_layers - 1)
        return RecurrenceDecoderLayer(c) if fed else DecoderLayer(c)

    def encode(self, src: torch.Tensor) -> dict:
        """The Transformer's encoder state plus "rec" (B, T, d) and "rec_pad" (B, T): the recurrence
        encoder's output, which the probing analysis pools as the second sentence vector."""
        pad = src.eq(self.pad)  # (B, S)
        embedded = self.src_embed(src)
        out = self.encoder_stack(embedded, pad)
        rec, rec_pad = embedded, pad
        for layer in self.recurrence:
            rec, rec_pad = layer(rec, rec_pad)
        rec = self.recurrence_norm(rec)
        if self.columns is not None:
            out = self.columns(torch.cat([out, rec], dim=-1))
        return {"out": out, "pad": pad, "rec": rec, "rec_pad": rec_pad}

    def decoder_memory(self, enc: dict, layer: int) -> tuple:
        if isinstance(self.decoder[layer], RecurrenceDecoderLayer):
            return enc["out"], enc["pad"], enc["rec"], enc["rec_pad"]
        return enc["out"], enc["pad"]
