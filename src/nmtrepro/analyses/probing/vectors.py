"""Sentence vectors from a frozen NMT encoder: mean of the top encoder layer over real tokens.

The sentence is preprocessed exactly as the experiment's source side (Moses tokenization, the
experiment's BPE codes, its source vocabulary), and gets the extra inputs the model's family reads
(parser phrases are parsed on the fly: see `evaluation.sources`). A model with a second encoder
(paper B's recurrence encoder) returns its states as "rec" (B, T, d) with padding mask "rec_pad":
it is pooled the same way, giving two vectors per sentence that the probe combines by a gate.
"""
from __future__ import annotations

import torch

from ...core.text import BPE, tokenize
from ...core.vocab import Vocab
from ...evaluation.sources import Sources
from ...models.layers import masked_mean


def encode_sentences(model, sentences: list[str], vocab: Vocab, bpe: BPE, lang: str,
                     batch_size: int = 128, **source_options) -> torch.Tensor:
    """(N, d) mean-pooled encoder states, or (N, 2, d) for a model with a second encoder, in input
    order; `source_options` go to `Sources.of_lines`."""
    sources = Sources.of_lines(model, bpe(tokenize(sentences, lang)), vocab, **source_options)
    sizes = sources.sizes
    order = sorted(range(len(sizes)), key=sizes.__getitem__)
    out = [None] * len(sizes)
    model.eval()
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            enc = model.encode(**sources.net_input(chunk))
            encoders = [("out", "pad")] + ([("rec", "rec_pad")] if "rec" in enc else [])
            pooled = torch.stack([masked_mean(enc[states], enc[pad]) for states, pad in encoders], dim=1)
            pooled = pooled.squeeze(1)                                  # (B, d) or (B, 2, d)
            for row, i in enumerate(chunk):
                out[i] = pooled[row]
    return torch.stack(out) if out else torch.zeros(0)
