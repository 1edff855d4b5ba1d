"""The Transformer (Vaswani et al. 2017) as paper A's baseline: separate source and target
vocabularies, target embedding tied to the output layer, Neutron-style bias-free projections."""
from __future__ import annotations

import torch
from torch import nn

from ..core.vocab import Vocab
from . import register
from .layers import (Embedding, FeedForward, ModelConfig, MultiheadAttention, Residual, reorder_cache,
                     reorder_encoder, xavier_init)


def attention(c: ModelConfig) -> Residual:
    """Multi-head attention in a residual block; the caller's memory makes it self- or cross-attention."""
    return Residual(MultiheadAttention(c.d_model, c.heads, c.attention_dropout), c)


def encoder_self_attention(c: ModelConfig) -> Residual:
    """The encoder's self-attention with papers B and D's baselines when the config asks for them:
    relative positions (`rel_pos_clip`) and DiSAN's directional masks (`directional`)."""
    return Residual(MultiheadAttention(c.d_model, c.heads, c.attention_dropout,
                                       rel_clip=c.rel_pos_clip, directional=c.directional,
                                       rel_shared=c.rel_pos_shared), c)


def feed_forward(c: ModelConfig) -> Residual:
    """The position-wise FFN in a residual block."""
    return Residual(FeedForward(c.d_model, c.ffn, c.activation_dropout), c)


class EncoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attn = encoder_self_attention(config)
        self.ffn = feed_forward(config)

    def forward(self, x, pad):
        return self.ffn(self.self_attn(x, None, key_padding_mask=pad))


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.self_attn = attention(config)
        self.cross_attn = attention(config)
        self.ffn = feed_forward(config)

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
    `rel_pos_clip` and `directional` (papers B and D's baselines) change the encoder self-attention
    only, in every family; they keep the sinusoidal positions and every weight of the plain model, so
    such a variant warm-starts from a trained baseline (see `layers.MultiheadAttention`).
    Subclasses swap the options (`config_class`), the layer types (`encoder_layer`, `decoder_layer`,
    or `make_decoder_layer` where they differ by depth) and what each decoder layer reads from the
    encoder state (`decoder_memory`).
    """
    config_class = ModelConfig
    encoder_layer = EncoderLayer
    decoder_layer = DecoderLayer

    def __init__(self, src_vocab: int, tgt_vocab: int, config: ModelConfig):
        super().__init__()
        self.config, self.pad, d = config, Vocab.pad, config.d_model
        self.src_embed = Embedding(src_vocab, d, self.pad, config.dropout)
        self.tgt_embed = Embedding(tgt_vocab, d, self.pad, config.dropout)
        self.encoder = nn.ModuleList(self.encoder_layer(config) for _ in range(config.encoder_layers))
        self.decoder = nn.ModuleList(self.make_decoder_layer(i) for i in range(config.decoder_layers))
        # Pre-norm stacks end in a layer norm; post-norm layers already normalise their output.
        self.encoder_norm = nn.LayerNorm(d) if config.pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d) if config.pre_norm else nn.Identity()
        self.output_bias = nn.Parameter(torch.zeros(tgt_vocab)) if config.output_bias else None
        xavier_init(self)

    def make_decoder_layer(self, index: int) -> nn.Module:
        """Decoder layer `index` (0 = bottom); a family whose layers differ by depth overrides it."""
        return self.decoder_layer(self.config)

    def encode(self, src: torch.Tensor) -> dict:
        pad = src.eq(self.pad)  # (B, S)
        return {"out": self.encoder_stack(self.src_embed(src), pad), "pad": pad}

    def encoder_stack(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        """The encoder layers and final norm over an input representation x (B, S, d); a family that
        changes only the encoder's input (paper D) or adds a second encoder (paper B) reuses it."""
        for layer in self.encoder:
            x = layer(x, pad)
        return self.encoder_norm(x)

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

    def forward(self, src: torch.Tensor, prev: torch.Tensor, **extra) -> torch.Tensor:
        """Logits (B, T, V) for decoder inputs `prev` (B, T) given the source and the family's extra inputs."""
        return self.logits(self.decode(prev, self.encode(src, **extra)))

    reorder_encoder = staticmethod(reorder_encoder)
    reorder_cache = staticmethod(reorder_cache)
