"""Length-bucketed token batches, as fairseq makes them.

Sentences are sorted by length so that a batch wastes little on padding, then cut into batches whose
padded size (sentences x longest sentence) stays under a token budget. The order of batches is
shuffled per epoch from (seed, epoch) alone, so a resumed run sees exactly the batches it would have.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from ..core.vocab import IndexedData, Vocab


@dataclass
class Batch:
    net_input: dict        # what `model.encode(**net_input)` takes: "src" (B, S) source ids, right-padded,
                           # each ending in EOS, plus the extra inputs the model's family declares
    prev: torch.Tensor     # (B, T) decoder input: BOS + target[:-1]
    target: torch.Tensor   # (B, T) target ids ending in EOS, right-padded
    ids: torch.Tensor      # (B,) sentence indices in the corpus
    tgt_tokens: int        # number of real target tokens

    def to(self, device) -> "Batch":
        return Batch({name: value.to(device) for name, value in self.net_input.items()},
                     self.prev.to(device), self.target.to(device), self.ids, self.tgt_tokens)


def token_batches(src_sizes: list[int], tgt_sizes: list[int] | None, max_tokens: int,
                  seed: int | None = None, epoch: int = 0) -> list[list[int]]:
    """Group sentence indices into batches of at most `max_tokens` padded tokens on either side.

    With a seed, ties in length are broken randomly and the batch order is shuffled (training);
    without, batches keep sorted order (decoding, validation).
    """
    n = len(src_sizes)
    tgt_sizes = tgt_sizes if tgt_sizes is not None else src_sizes
    if seed is not None:
        gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
        tiebreak = torch.randperm(n, generator=gen).tolist()
    else:
        tiebreak = list(range(n))
    order = sorted(range(n), key=lambda i: (tgt_sizes[i], src_sizes[i], tiebreak[i]))
    batches, current, longest = [], [], 0
    for i in order:
        size = max(src_sizes[i], tgt_sizes[i])
        if current and max(longest, size) * (len(current) + 1) > max_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, size)
    if current:
        batches.append(current)
    if seed is not None:
        perm = torch.randperm(len(batches), generator=gen).tolist()
        batches = [batches[j] for j in perm]
    return batches


def pad_sequences(seqs: list[torch.Tensor], pad: int = Vocab.pad) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=pad)


def pad_spans(spans: list[list[tuple[int, int]]]) -> torch.Tensor:
    """Ragged per-sentence [start, end) spans -> (B, P, 2) LongTensor; missing phrases are (0, 0)."""
    out = torch.zeros(len(spans), max(len(s) for s in spans), 2, dtype=torch.long)
    for i, sentence in enumerate(spans):
        out[i, :len(sentence)] = torch.tensor(sentence, dtype=torch.long).view(-1, 2)
    return out


# How each extra model input is batched, by its name in `model.config.extra_inputs`: parser phrases
# (B, P, 2); POS tag ids (B, S) aligned with "src", padded with the same pad id (`core.pos`).
PAD_INPUT = {"spans": pad_spans, "pos": pad_sequences}


def net_input(src: Sequence, extras: dict[str, Sequence], indices: list[int]) -> dict:
    """The encoder's inputs for sentences `indices`: their padded source ids (1-D tensors in `src`)
    and, per extra input, the sentences' values (`extras[name][i]`) batched by PAD_INPUT[name]."""
    return {"src": pad_sequences([src[i] for i in indices]),
            **{name: PAD_INPUT[name]([values[i] for i in indices]) for name, values in extras.items()}}


def collate(src: IndexedData, tgt: IndexedData, indices: list[int], extras: dict | None = None) -> Batch:
    """Build padded tensors for one batch; the decoder input is the target shifted right behind BOS.

    `extras`: per extra model input, each corpus sentence's value (parser phrases for paper A, POS tag
    ids for paper D).
    """
    tgt_seqs = [tgt[i] for i in indices]
    prev_seqs = [torch.cat([torch.tensor([Vocab.bos]), t[:-1]]) for t in tgt_seqs]
    return Batch(net_input=net_input(src, extras or {}, indices), prev=pad_sequences(prev_seqs),
                 target=pad_sequences(tgt_seqs), ids=torch.tensor(indices),
                 tgt_tokens=sum(len(t) for t in tgt_seqs))
