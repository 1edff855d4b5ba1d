"""The Transformer (Vaswani et al. 2017) as paper A's baseline: separate source and target
vocabularies, target embedding tied to the output layer, Neutron-style bias-free projections."""
from __future__ import annotations

import torch
from torch import nn

from .layers import Embedding, FeedForward, MultiheadAttention, Residual, reorder_cache, xavier_init
from ..core.vocab import Vocab
from . import register


class EncoderLayer(nn.Module):
    def __init__(self, d_model, ffn, heads, dropout, attention_dropout, activation_dropout, pre_norm):
        super().__init__()
        self.self_attn = Residual(MultiheadAttention(d_model, heads, attention_dropout), d_model, dropout, pre_norm)
        self.ffn = Residual(FeedForward(d_model, ffn, activation_dropout), d_model, dropout, pre_norm)

    def forward(self, x, pad):
        return self.ffn(self.self_attn(x, None, key_padding_mask=pad))


class DecoderLayer(nn.Module):
    def __init__(self, d_model, ffn, heads, dropout, attention_dropout, activation_dropout, pre_norm):
        super().__init__()
        self.self_attn = Residual(MultiheadAttention(d_model, heads, attention_dropout), d_model, dropout, pre_norm)
        self.cross_attn = Residual(MultiheadAttention(d_model, heads, attention_dropout), d_model, dropout, pre_norm)
        self.ffn = Residual(FeedForward(d_model, ffn, activation_dropout), d_model, dropout, pre_norm)

    def forward(self, x, memory, memory_pad, cache=None):
        self_cache = cross_cache = None
        if cache is not None:
            self_cache, cross_cache = cache.setdefault("self", {}), cache.setdefault("cross", {})
        x = self.self_attn(x, None, causal=True, cache=self_cache)
        x = self.cross_attn(x, memory, key_padding_mask=memory_pad, cache=cross_cache, static_kv=True)
        return self.ffn(x)


@register("transformer")
class Transformer(nn.Module):
    """Encoder-decoder Transformer. Sizes: Base d=512/2048/8 heads, Big 1024/4096/16, 6+6 layers.

    `output_bias` adds a bias of target-vocabulary size to the tied output layer, as Neutron's
    classifier has: with it, one vocabulary reproduces both of paper A's totals (88.1M and 264.1M).
    Subclasses swap the layer types (`encoder_layer`, `decoder_layer`) and what each decoder layer
    reads from the encoder state (`decoder_memory`).
    """
    encoder_layer = EncoderLayer
    decoder_layer = DecoderLayer

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 512, ffn: int = 2048,
                 heads: int = 8, encoder_layers: int = 6, decoder_layers: int = 6,
                 dropout: float = 0.1, attention_dropout: float = 0.0, activation_dropout: float = 0.0,
                 pre_norm: bool = True, output_bias: bool = False):
        super().__init__()
        self.pad = Vocab.pad
        args = (d_model, ffn, heads, dropout, attention_dropout, activation_dropout, pre_norm)
        self.src_embed = Embedding(src_vocab, d_model, self.pad, dropout)
        self.tgt_embed = Embedding(tgt_vocab, d_model, self.pad, dropout)
        self.encoder = nn.ModuleList(self.encoder_layer(*args) for _ in range(encoder_layers))
        self.decoder = nn.ModuleList(self.decoder_layer(*args) for _ in range(decoder_layers))
        # Pre-norm stacks end in a layer norm; post-norm layers already normalise their output.
        self.encoder_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.output_bias = nn.Parameter(torch.zeros(tgt_vocab)) if output_bias else None
        xavier_init(self)

    def encode(self, src: torch.Tensor) -> dict:
        pad = src.eq(self.pad)  # (B, S)
        x = self.src_embed(src)
        for layer in self.encoder:
            x = layer(x, pad)
        return {"out": self.encoder_norm(x), "pad": pad}

    def decode(self, prev: torch.Tensor, enc: dict, cache: dict | None = None) -> torch.Tensor:
        step = cache.get("step", 0) if cache is not None else 0
        x = self.tgt_embed(prev, offset=step)
        for i, layer in enumerate(self.decoder):
            x = layer(x, *self.decoder_memory(enc, i), cache=None if cache is None else cache.setdefault(i, {}))
        if cache is not None:
            cache["step"] = step + prev.size(1)
        return self.decoder_norm(x)

    def decoder_memory(self, enc: dict, layer: int) -> tuple:
        """What decoder layer `layer` attends to besides its own prefix: the source tokens."""
        return enc["out"], enc["pad"]

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        out = hidden @ self.tgt_embed.table.weight.t()  # tied output layer
        return out if self.output_bias is None else out + self.output_bias

    def forward(self, src: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        return self.logits(self.decode(prev, self.encode(src)))

    @staticmethod
    def reorder_encoder(enc: dict, order: torch.Tensor) -> dict:
        return {k: v.index_select(0, order) for k, v in enc.items()}

    @staticmethod
    def reorder_cache(cache: dict, order: torch.Tensor) -> None:
        reorder_cache(cache, order)
