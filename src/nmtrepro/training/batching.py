"""Length-bucketed token batches, as fairseq makes them.

Sentences are sorted by length so that a batch wastes little on padding, then cut into batches whose
padded size (sentences x longest sentence) stays under a token budget. The order of batches is
shuffled per epoch from (seed, epoch) alone, so a resumed run sees exactly the batches it would have.

With buckets (the `buckets` training setting), each side of a batch is padded to one of a few lengths
(`bucket_length`), so that a training step meets a few shapes rather than one per padded length (the
paper Base ran 1.22x faster so on an H200: docs/measurements.md); the planner then budgets the bucket of the
longer side, so a padded batch still holds at most max_tokens, and sorts by that bucket first, so that
a batch's sentences share it and fill its rows. Padding is masked everywhere, so the loss does not
change.

A CUDA graph (the trainer's `fast: graphs`) replays fixed shapes, so there a bucketed batch is also
padded to a fixed number of sentences (`fixed_rows`): rows without a sentence, which hold no target
token and so add nothing to the loss or the gradients.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..core.runtime import to_device
from ..core.vocab import IndexedData, Vocab
from ..data.annotations import annotation, registry


@dataclass
class Batch:
    net_input: dict        # what `model.encode(**net_input)` takes: "src" (B, S) source ids, right-padded,
                           # each ending in EOS, plus the extra inputs the model's family declares
    prev: torch.Tensor     # (B, T) decoder input: BOS + target[:-1]
    target: torch.Tensor   # (B, T) target ids ending in EOS, right-padded
    ids: torch.Tensor      # (B',) sentence indices in the corpus; B' < B where rows without a sentence pad the batch
    tgt_tokens: int        # number of real target tokens
    src_tokens: int        # number of real source tokens

    def to(self, device) -> "Batch":
        """The batch on `device`. To a GPU the tensors copy without blocking (`runtime.to_device`), so
        the host collates the next batch while this one is in flight."""
        device = torch.device(device)
        return Batch({name: to_device(value, device) for name, value in self.net_input.items()},
                     to_device(self.prev, device), to_device(self.target, device), self.ids, self.tgt_tokens,
                     self.src_tokens)


class TokenBatches(Sequence):
    """One epoch's batches, held as arrays rather than lists of lists (a WMT14 En-Fr epoch is ~36M
    indices): batch j is `order[start[j]:end[j]]`, read as a list of sentence indices."""

    def __init__(self, order: np.ndarray, start: np.ndarray, end: np.ndarray, tgt_tokens: np.ndarray):
        self.order = order            # (sentences,) indices sorted by length
        self.start, self.end = start, end   # (batches,) each batch's span of `order`, in epoch order
        self.tgt_tokens = tgt_tokens  # (batches,) real target tokens of each batch (source without targets)

    def __len__(self) -> int:
        return len(self.start)

    def __getitem__(self, j: int) -> list[int]:
        return self.order[self.start[j]:self.end[j]].tolist()


def stable_by(keys: np.ndarray, items: np.ndarray) -> np.ndarray:
    """`items` reordered by `keys[items]`, ties kept in order; 16-bit keys sort in linear time (numpy
    radix-sorts them), which is why lengths are sorted one at a time rather than as one combined key."""
    k = keys[items]
    if len(k) and k.max() < 2 ** 16:
        k = k.astype(np.uint16)
    return items[np.argsort(k, kind="stable")]


def bucket_length(length):
    """The bucket a (B, length) batch is padded to: a multiple of 4 up to 64, above that a multiple of
    an eighth of the power of two below (72, 80, ..., 128, 144, ...), so padding adds at most an eighth
    and lengths up to 256 make 32 buckets. Works on ints and numpy arrays alike.

    Buckets twice as coarse (multiples of 8, then of a quarter) left 11 % of the padded target
    positions of the paper scale's 4,096-token micro-batches empty on WMT-like lengths, these leave
    5 %, and the step's kernels run on padded positions. They cost shapes: 172 where the coarser made
    62 on 300k synthetic pairs (docs/measurements.md, "Padding"), each warmed up once and recorded once as
    a CUDA graph: a few hundred slower micro-batches in a paper run's 700,000."""
    above = np.frexp(np.maximum(np.asarray(length) - 1, 1))[1]      # ceil(log2(length)) for length >= 2
    step = 2 ** np.maximum(2, above - 4)
    bucket = -(-np.asarray(length) // step) * step
    return int(bucket) if np.ndim(bucket) == 0 else bucket


def fixed_rows(sentences: int, length: int, max_tokens: int) -> int:
    """The sentences a bucketed (sentences, length) batch is padded to for a CUDA graph: the most that
    `length` allows within max_tokens, halved as long as the batch still fits. The planner fills nearly
    every batch to the first; the halves of an out-of-memory retry (training/memory.py) and the few
    batches at a length's edge take the others. So a bucketed length meets at most
    log2(max_tokens / length) + 1 shapes, and a padded batch still holds at most max_tokens."""
    rows = max(1, max_tokens // length)
    while rows // 2 >= sentences:
        rows //= 2
    return rows


def fixed_shapes(max_tokens: int, longest: int) -> set[tuple[int, int, int]]:
    """Every (sentences, source length, target length) shape `collate(..., fixed=max_tokens)` gives
    bucketed batches of sentences up to `longest` tokens: what a CUDA-graph step records, each once."""
    buckets = sorted(set(bucket_length(np.arange(1, longest + 1)).tolist()))
    return {(fixed_rows(sentences, max(source, target), max_tokens), source, target)
            for source in buckets for target in buckets
            for sentences in range(1, max(1, max_tokens // max(source, target)) + 1)}


def token_batches(src_sizes: Sequence[int], tgt_sizes: Sequence[int] | None, max_tokens: int,
                  seed: int | None = None, epoch: int = 0, buckets: bool = False) -> TokenBatches:
    """Group sentence indices into batches of at most `max_tokens` padded tokens on either side.

    Sentences are sorted by (target length, source length), and a batch takes sentences in that order
    while (its longest sentence) x (its sentences) stays within `max_tokens` (a longer sentence makes a
    batch of its own). With a seed, ties in length are broken randomly and the batch order is shuffled
    (training); without, batches keep sorted order (decoding, validation). The work is in numpy, one
    Python step per batch, not per sentence. With `buckets`, a sentence counts as long as the
    `bucket_length` of its longer side, collate(..., bucketed=True) pads each side to its bucket, and
    that bucket is the first sort key: sorted by target length first, a batch's longest source, often
    a bucket above its targets', cut its rows, and 37 % of its padded target positions were padding on
    WMT newstest lengths at 4,096 tokens, 16 % now (docs/measurements.md, "Padding").
    """
    src = np.asarray(src_sizes)    # IndexedData.sizes stay int32, no copy
    tgt = src if tgt_sizes is None else np.asarray(tgt_sizes)
    n = len(src)
    int32 = n < 2 ** 31  # indices in half the memory; randperm draws the same permutation in either type
    if seed is not None:
        gen = torch.Generator().manual_seed(seed * 100_003 + epoch)
        tiebreak = torch.randperm(n, generator=gen, dtype=torch.int32 if int32 else torch.int64).numpy()
        order = np.empty_like(tiebreak)
        order[tiebreak] = np.arange(n, dtype=tiebreak.dtype)  # sentences in tiebreak order (tiebreak[i]: i's rank)
        del tiebreak
    else:
        order = np.arange(n, dtype=np.int32 if int32 else np.int64)
    order = stable_by(tgt, stable_by(src, order))                          # by (tgt, src, tiebreak)
    longest = np.maximum(src, tgt)
    if buckets:
        longest = bucket_length(longest)
        order = stable_by(longest, order)                                  # by (bucket, tgt, src, tiebreak)
    longest = longest[order]                                               # (n,) in batching order
    steps = np.arange(1, max_tokens + 2)
    starts, p = [], 0
    while p < n:
        # A batch holds at most max_tokens // longest[p] sentences; among those, it takes the prefix
        # whose running maximum x count fits (that product only grows along the prefix).
        running = np.maximum.accumulate(longest[p: p + max_tokens // max(int(longest[p]), 1) + 1])
        starts.append(p)
        p += max(1, int(np.searchsorted(running * steps[:len(running)], max_tokens, side="right")))
    del longest
    start = np.array(starts, dtype=np.int64)
    end = np.append(start[1:], n)
    tokens = np.add.reduceat(tgt[order], start, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
    if seed is not None:
        perm = torch.randperm(len(start), generator=gen).numpy()
        start, end, tokens = start[perm], end[perm], tokens[perm]
    return TokenBatches(order, start, end, tokens)


def pad_sequences(seqs: list[torch.Tensor], pad: int = Vocab.pad) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=pad)


def padded(sentences: Sequence, indices: list[int]) -> torch.Tensor:
    """(B, n) ids of sentences `indices` of a binarized corpus or a list of 1-D tensors, right-padded."""
    if isinstance(sentences, IndexedData):
        return sentences.padded(indices, Vocab.pad)
    return pad_sequences([sentences[i] for i in indices])


# What a row without a sentence (collate's fixed shapes) holds first, by input: a lone EOS (and an
# annotation's `blank_first`, e.g. EOS's POS tag), so that its attention has a key to attend to (a row of
# padding alone would make its softmax NaN, and NaN times a zero gradient is NaN).
BLANK_FIRST = {"src": Vocab.eos, "prev": Vocab.bos}


def blank_first(name: str) -> int | None:
    found = registry().get(name)
    return BLANK_FIRST.get(name) if found is None else found.blank_first


def net_input(src: Sequence, extras: dict[str, Sequence], indices: list[int]) -> dict:
    """The encoder's inputs for sentences `indices`: their padded source ids (`src`: a binarized
    corpus or 1-D tensors) and, per source annotation, the sentences' values (`extras[name][i]`)
    batched by its `pad` (parser phrases (B, P, 2)), else as the source is (POS tag ids (B, S))."""
    return {"src": padded(src, indices),
            **{name: (annotation(name).pad or padded)(values, indices) for name, values in extras.items()}}


def pad_to(tensor: torch.Tensor, length: int, pad: int = Vocab.pad) -> torch.Tensor:
    """(B, n, ...) -> (B, length, ...), filled with `pad` (a missing parser phrase is (0, 0), pad's id)."""
    return torch.nn.functional.pad(tensor, (0, 0) * (tensor.dim() - 2) + (0, length - tensor.size(1)), value=pad)


def pad_rows(tensor: torch.Tensor, rows: int, first: int | None = None) -> torch.Tensor:
    """(B, n, ...) -> (rows, n, ...): the added rows padding, holding `first` at position 0 if given."""
    blank = tensor.new_full((rows - tensor.size(0), *tensor.shape[1:]), Vocab.pad)
    if first is not None:
        blank[:, 0] = first
    return torch.cat([tensor, blank])


def collate(src: IndexedData, tgt: IndexedData, indices: list[int], extras: dict | None = None,
            bucketed: bool = False, fixed: int | None = None) -> Batch:
    """Build padded tensors for one batch; the decoder input is the target shifted right behind BOS.

    `extras`: per source annotation, each corpus sentence's value (parser phrases for paper A, POS tag
    ids for paper D: data.annotations). `bucketed`: every (B, n, ...) tensor padded to n = the `bucket_length` of the
    batch's longest sentence on its side (the source's for its phrases: a sentence has at most as many
    as tokens). `fixed` (bucketed only): the max_tokens whose `fixed_rows` (for the longer side's
    bucket) the batch is padded to, with rows that hold no sentence (BLANK_FIRST) and no target
    token. A bucketed batch also gets the shapes its annotations add (`shapes`: parser phrases'
    "span_width", data.parse).
    """
    target = padded(tgt, indices)                                            # (B, T)
    prev = torch.where(target == Vocab.pad, Vocab.pad, target.roll(1, dims=1))  # (B, T): its EOS dropped
    prev[:, 0] = Vocab.bos
    batch = Batch(net_input=net_input(src, extras or {}, indices), prev=prev, target=target,
                  ids=torch.tensor(indices), tgt_tokens=int(tgt.sizes[indices].sum()),
                  src_tokens=int(src.sizes[indices].sum()))
    if not bucketed:
        return batch
    src_length, tgt_length = bucket_length(batch.net_input["src"].size(1)), bucket_length(batch.target.size(1))
    inputs = {"prev": pad_to(batch.prev, tgt_length), "target": pad_to(batch.target, tgt_length),
              **{name: pad_to(value, src_length) for name, value in batch.net_input.items()}}
    if fixed is not None:
        rows = fixed_rows(len(indices), max(src_length, tgt_length), fixed)
        inputs = {name: pad_rows(value, rows, blank_first(name)) for name, value in inputs.items()}
    prev, target = inputs.pop("prev"), inputs.pop("target")
    for name in extras or {}:
        if shapes := annotation(name).shapes:
            inputs.update(shapes(batch.net_input[name], prev.size(0), bucket_length))
    return Batch(inputs, prev, target, batch.ids, batch.tgt_tokens, batch.src_tokens)
