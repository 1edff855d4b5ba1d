"""Out of GPU memory in one micro-batch is not the end of a 20-hour job, and a micro-batch as large as
the card holds (issue 38).

A micro-batch whose forward or backward runs out of memory is retried as its two halves (by sentences),
recursively down to one sentence; a sentence that still does not fit is skipped with a warning. Both
are counted in the training log, as fairseq counts its OOMs. The trainer (train.py) decides what the
failed attempt leaves behind:

- in a forward, nothing: no gradient was touched, so the halves run next and the update goes on;
- in a backward, perhaps part of the micro-batch's gradient, already added into the sums of the
  micro-batches before it, and nothing can take it out again (keeping a copy of every gradient
  before each backward would cost the memory that just ran out). So the update's gradients are
  thrown away and all its micro-batches run again, the failed one as its halves. fairseq throws the
  whole update away instead; running it again keeps the update's token count as the settings print
  it, at the price of recomputing the micro-batches before the failure, which is rare.

Under DistributedDataParallel (several GPUs) the last micro-batch of a rank's update is the one whose
backward all-reduces the gradients, bucket by bucket as they become ready: a rank that runs out of
memory there has sent some buckets and not others, and no rank can retry it in lock-step with the
others. Only the micro-batches before it (DDP's no_sync ones, whose backward calls are local) are
split or skipped; their count may differ between ranks, which is safe because the models register no
buffers (DDP would broadcast them at every forward) and the update's tokens are summed over the
ranks. Out of memory in the all-reducing micro-batch stops the job with an error; run again, it
resumes from its newest checkpoint. (fairseq's answer is its legacy_ddp backend: every backward
local, one all-reduce after them, losing the overlap of communication with the last backward.)

`max_tokens: auto` sizes the micro-batch from the card's memory (`fit_tokens`). The papers' 4,096
tokens fill a 16 GB card; an 80 GB one runs a Base step launch-bound at that size (2.0x faster at
12,500 tokens on an H100: bench/README.md). The trainer probes the peak memory of one forward and
backward over the corpus's longest sentences at two sizes, fits the peak as a line in the tokens,
takes the size that fills the card's free memory less Adam's state and a margin, and checks it
with a third probe, shrinking while it does not fit. The update keeps its token count through
accumulation; the size is at most half a rank's update, so that an update (which ends at the first
micro-batch past update_tokens) still overshoots it by less than one micro-batch of a few. A run keeps
the size it found in its checkpoints and a resume reuses it: the batches of an epoch, and the
position in them, depend on it.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .batching import bucket_length
from .settings import AUTO_START

AUTO_ROUND = 256    # sizes are a multiple of this
AUTO_MARGIN = 0.9   # of the free memory: what allocator fragmentation and other kernels' workspaces take


def is_out_of_memory(err: BaseException) -> bool:
    """Whether `err` is the accelerator running out of memory: torch.OutOfMemoryError, or a
    RuntimeError saying so (what cuDNN, cuBLAS and older torch versions raise)."""
    return isinstance(err, torch.OutOfMemoryError) or (isinstance(err, RuntimeError) and "out of memory" in str(err))


def release(device: torch.device) -> None:
    """Give the failed attempt's cached blocks back, so that its halves start from an emptier card."""
    if device.type == "cuda":
        torch.cuda.empty_cache()


def halves(indices: list[int]) -> list[list[int]]:
    """A micro-batch's sentence indices as two halves, or none when it is a single sentence (skipped)."""
    if len(indices) < 2:
        return []
    middle = len(indices) // 2
    return [indices[:middle], indices[middle:]]


class UnrecoverableOutOfMemory(RuntimeError):
    """Out of memory where the ranks of a data-parallel job cannot retry in lock-step."""


def fit_tokens(peak: Callable[[int], int | None], budget: float, cap: int, start: int = AUTO_START,
               tries: int = 4) -> int:
    """The largest micro-batch (padded tokens, a multiple of AUTO_ROUND within [start, cap]) whose
    peak memory stays within `budget` bytes; `peak(tokens)` runs one forward and backward of that
    size and returns its peak bytes, or None when it ran out of memory. Two probes (start and twice
    it) fit the peak as a line; the size the line gives is probed, and shrunk by a fifth while it does
    not fit, `tries` times at most. start itself is never probed away: the OOM split handles a card
    too small for it."""
    cap = max(start, cap // AUTO_ROUND * AUTO_ROUND)
    low, high = start, min(2 * start, cap)
    p_low = peak(low)
    if p_low is None or p_low > budget or high == low:
        return start
    p_high = peak(high)
    if p_high is None or p_high > budget:
        return low
    per_token = max(p_high - p_low, 1) / (high - low)
    tokens = high + (budget - p_high) / per_token
    for _ in range(tries):
        tokens = min(cap, int(tokens) // AUTO_ROUND * AUTO_ROUND)
        if tokens <= high:
            return high
        used = peak(tokens)
        if used is not None and used <= budget:
            return tokens
        tokens *= 0.8
    return high


def probe_sentences(lengths: np.ndarray, tokens: int, buckets: bool) -> list[int]:
    """The sentences of a probe micro-batch of `tokens` padded tokens (`lengths`: each sentence's longer
    side): the corpus's longest, the worst case of that size (attention's memory grows with the length
    at equal tokens), but at most tokens / 8 long, so that the probe holds about `tokens`. A rarer,
    longer sentence makes a smaller batch of its own, which the OOM split covers if it must. Repeated
    where the corpus has too few. Each side is padded to its own bucket (batching.collate); the longest
    sentences' other sides are long too in a real corpus, and the OOM split covers a batch beyond."""
    length = min(int(lengths.max()), max(1, tokens // 8))
    fitting = np.flatnonzero(lengths <= length)
    fitting = fitting[np.argsort(-lengths[fitting], kind="stable")]               # the longest first
    rows = max(1, tokens // (bucket_length(length) if buckets else length))
    return np.resize(fitting, rows).tolist()
