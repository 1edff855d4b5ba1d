"""Paper C's baseline: an attention GRU encoder-decoder trained by log-likelihood (the "LL" rows of
Table 1, Bahdanau et al. 2017: one-layer GRU encoder and decoder), with or without the soft local
reordering layer under its encoder (the first source-of-gain experiment of Sec. 3).

The decoder is Luong et al.'s (2015) global attention without input feeding: a GRU over the
previous target words, dot-product attention from its output to the encoder states, and
tanh(W [output; context]) fed to the softmax. Luong's form rather than Bahdanau's keeps the GRU's
input free of the context, so one nn.GRU call runs a whole teacher-forced sequence and the same
call, given the cached state, runs one beam-search step (incremental and full decoding agree).
"""
from __future__ import annotations

import torch
from torch import nn

from ..core.vocab import Vocab
from . import register
from .layers import dropout, masked_mean, reorder_cache, reorder_encoder
from .rnn_encoder import RnnConfig, SourceEncoder


@register("gru_attention")
class AttentionGRU(nn.Module):
    config_class = RnnConfig

    def __init__(self, src_vocab: int, tgt_vocab: int, config: RnnConfig):
        super().__init__()
        self.config, self.pad, d = config, Vocab.pad, config.d_model
        self.encoder = SourceEncoder(src_vocab, self.pad, config)
        self.memory = nn.Linear(2 * d, d)                 # encoder states -> attention keys and values
        self.bridge = nn.Linear(2 * d, d)                 # mean encoder state -> the decoder's first state
        self.tgt_embed = nn.Embedding(tgt_vocab, d, padding_idx=self.pad)
        self.rnn = nn.GRU(d, d, num_layers=config.decoder_layers, batch_first=True,
                          dropout=config.dropout if config.decoder_layers > 1 else 0.0)
        self.combine = nn.Linear(2 * d, d)
        self.out = nn.Linear(d, tgt_vocab)

    def encode(self, src: torch.Tensor) -> dict:
        pad = src.eq(self.pad)                                            # (B, S)
        states = self.encoder(src, pad)                                   # (B, S, 2d)
        start = torch.tanh(self.bridge(masked_mean(states, pad)))        # (B, d)
        return {"out": self.memory(states), "pad": pad, "start": start}

    def decode(self, prev: torch.Tensor, enc: dict, cache: dict | None = None) -> torch.Tensor:
        """prev (B, T) -> (B, T, d); with a cache, the GRU goes on from the state it left there."""
        x = dropout(self.tgt_embed(prev), self.config.dropout, self.training)
        if cache is not None and "state" in cache:
            state = cache["state"].transpose(0, 1).contiguous()          # cached batch first: (L, B, d)
        else:
            state = enc["start"][None].expand(self.config.decoder_layers, -1, -1).contiguous()
        out, state = self.rnn(x, state)                                   # (B, T, d)
        if cache is not None:
            cache["state"] = state.transpose(0, 1)                        # (B, L, d): reorders on dim 0
        scores = (out @ enc["out"].transpose(1, 2)).masked_fill(enc["pad"][:, None], float("-inf"))
        context = torch.softmax(scores.float(), dim=-1).to(out.dtype) @ enc["out"]   # (B, T, d)
        hidden = torch.tanh(self.combine(torch.cat([out, context], dim=-1)))
        return dropout(hidden, self.config.dropout, self.training)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.out(hidden)

    reorder_encoder = staticmethod(reorder_encoder)
    reorder_cache = staticmethod(reorder_cache)                          # the cached state is batch first
