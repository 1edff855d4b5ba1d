"""The Transformer (Vaswani et al. 2017) as paper A's baseline: separate source and target
vocabularies, target embedding tied to the output layer, Neutron-style bias-free projections."""
from __future__ import annotations

import torch
from torch import nn

from ..layers import Embedding, FeedForward, MultiheadAttention, Residual, reorder_cache
from ..vocab import Vocab
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
    """Encoder-decoder Transformer. Sizes: Base d=512/2048/8 heads, Big 1024/4096/16, 6+6 layers."""

    def __init__(self, src_vocab: int, tgt_vocab: int, d_model: int = 512, ffn: int = 2048,
                 heads: int = 8, encoder_layers: int = 6, decoder_layers: int = 6,
                 dropout: float = 0.1, attention_dropout: float = 0.0, activation_dropout: float = 0.0,
                 pre_norm: bool = True):
        super().__init__()
        self.pad = Vocab.pad
        args = (d_model, ffn, heads, dropout, attention_dropout, activation_dropout, pre_norm)
        self.src_embed = Embedding(src_vocab, d_model, self.pad, dropout)
        self.tgt_embed = Embedding(tgt_vocab, d_model, self.pad, dropout)
        self.encoder = nn.ModuleList(EncoderLayer(*args) for _ in range(encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(*args) for _ in range(decoder_layers))
        # Pre-norm stacks end in a layer norm; post-norm layers already normalise their output.
        self.encoder_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d_model) if pre_norm else nn.Identity()
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

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
            x = layer(x, enc["out"], enc["pad"], None if cache is None else cache.setdefault(i, {}))
        if cache is not None:
            cache["step"] = step + prev.size(1)
        return self.decoder_norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden @ self.tgt_embed.table.weight.t()  # tied output layer

    def forward(self, src: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        return self.logits(self.decode(prev, self.encode(src)))

    @staticmethod
    def reorder_encoder(enc: dict, order: torch.Tensor) -> dict:
        return {k: v.index_select(0, order) for k, v in enc.items()}

    @staticmethod
    def reorder_cache(cache: dict, order: torch.Tensor) -> None:
        reorder_cache(cache, order)
