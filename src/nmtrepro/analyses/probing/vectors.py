"""Sentence vectors from a frozen NMT encoder: mean of the top encoder layer over real tokens.

The sentence is preprocessed exactly as the experiment's source side (Moses tokenization, the
experiment's BPE codes, its source vocabulary). Hook for models with more than one encoder (paper B):
if `encode` returns a "probe" tensor (B, S, d), e.g. the gated combination of both encoders, it is
pooled instead of "out"; its padding mask is still "pad" (B, S), True at padding.
"""
from __future__ import annotations

import torch

from ...training.batching import pad_sequences
from ...core.text import BPE, tokenize
from ...core.vocab import Vocab


def encode_sentences(model, sentences: list[str], vocab: Vocab, bpe: BPE, lang: str,
                     batch_size: int = 128) -> torch.Tensor:
    """(N, d) mean-pooled encoder states, in input order."""
    pieces = bpe(tokenize(sentences, lang))
    ids = [torch.tensor(vocab.encode(p), dtype=torch.long) for p in pieces]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out = [None] * len(ids)
    model.eval()
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            enc = model.encode(pad_sequences([ids[i] for i in chunk]))
            states = enc.get("probe", enc["out"])                       # (B, S, d)
            real = (~enc["pad"]).unsqueeze(-1).to(states.dtype)         # (B, S, 1)
            pooled = (states * real).sum(1) / real.sum(1).clamp(min=1)  # (B, d)
            for row, i in enumerate(chunk):
                out[i] = pooled[row]
    return torch.stack(out) if out else torch.zeros(0)
