"""Sentence vectors from a frozen NMT encoder: mean of the top encoder layer over real tokens.

The sentence is preprocessed exactly as the experiment's source side (Moses tokenization, the
experiment's BPE codes, its source vocabulary), and gets the extra inputs the model's family reads
(parser phrases are parsed on the fly: see `evaluation.sources`). Hook for models with more than one encoder (paper B):
if `encode` returns a "probe" tensor (B, S, d), e.g. the gated combination of both encoders, it is
pooled instead of "out"; its padding mask is still "pad" (B, S), True at padding.
"""
from __future__ import annotations

import torch

from ...core.text import BPE, tokenize
from ...core.vocab import Vocab
from ...evaluation.sources import Sources


def encode_sentences(model, sentences: list[str], vocab: Vocab, bpe: BPE, lang: str,
                     batch_size: int = 128, **source_options) -> torch.Tensor:
    """(N, d) mean-pooled encoder states, in input order; `source_options` go to `Sources.of_lines`."""
    sources = Sources.of_lines(model, bpe(tokenize(sentences, lang)), vocab, **source_options)
    sizes = sources.sizes
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    out = [None] * len(sizes)
    model.eval()
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            enc = model.encode(**sources.net_input(chunk))
            states = enc.get("probe", enc["out"])                       # (B, S, d)
            real = (~enc["pad"]).unsqueeze(-1).to(states.dtype)         # (B, S, 1)
            pooled = (states * real).sum(1) / real.sum(1).clamp(min=1)  # (B, d)
            for row, i in enumerate(chunk):
                out[i] = pooled[row]
    return torch.stack(out) if out else torch.zeros(0)
