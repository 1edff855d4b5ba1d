"""Out of GPU memory in one micro-batch is not the end of a 20-hour job, and a micro-batch as large as
the card holds.

A micro-batch whose forward or backward runs out of memory is retried as its two halves (by sentences),
recursively down to one sentence; a sentence that still does not fit is skipped with a warning. Both
are counted in the training log, as fairseq counts its OOMs (`give_way`, which the trainer calls). What
the failed attempt leaves behind decides what follows:

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

import logging
from collections.abc import Callable

import numpy as np
import torch

from ..core.runtime import Distributed
from .batching import bucket_length
from .settings import AUTO_START

log = logging.getLogger("nmtrepro.training.memory")
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


def give_way(plan: list[list[int]], i: int, oom: list[int], phase: str, step: int, device: torch.device,
             rank: int = 0, world: int = 1) -> bool:
    """The policy for the micro-batch `plan[i]` (sentence indices), whose `phase` ("forward" or
    "backward") ran out of memory after update `step`: its halves take its place in `plan`, or nothing
    when it is one sentence, counted in `oom` (micro-batches split, sentences skipped) and logged.
    Returns whether the update must run its plan again from zero gradients: after a backward (the
    module docstring says why). Under DDP (`world` ranks) the last micro-batch of a rank's update is
    the one whose backward all-reduces: UnrecoverableOutOfMemory."""
    if world > 1 and i == len(plan) - 1:
        raise UnrecoverableOutOfMemory(
            f"rank {rank}: out of memory in the {phase} of the micro-batch that all-reduces the "
            f"gradients after step {step}: the {world} ranks cannot retry it in lock-step. Run "
            "again to resume from the newest checkpoint (lower max_tokens if it recurs)")
    release(device)
    failing = plan[i]
    plan[i:i + 1] = halves(failing)
    if len(failing) > 1:
        oom[0] += 1
        log.warning("after step %d: out of memory in the %s of a micro-batch of %d sentences: retrying it "
                    "as two halves", step, phase, len(failing))
    else:
        oom[1] += 1
        log.warning("after step %d: out of memory in the %s of a single sentence (#%d): skipped",
                    step, phase, failing[0])
    return phase == "backward"


def auto_max_tokens(probe: Callable[[list[int], int], None], lengths: np.ndarray, buckets: bool,
                    model: torch.nn.Module, device: torch.device, cap: int, dist: Distributed) -> int:
    """max_tokens auto: the micro-batch (padded tokens, at most `cap`) whose peak memory fits the GPU's
    free memory beside Adam's state (`fit_tokens`), the smallest any rank of `dist` found, so that every
    rank plans the same batches; AUTO_START off a GPU. `probe(sentences, tokens)` runs one forward and
    backward of `model` over those sentences as a training micro-batch of `tokens` padded tokens, and
    leaves the gradients and the random state as they were; the sentences are `probe_sentences` of
    `lengths` (each sentence's longer side)."""
    if device.type != "cuda":
        log.info("max_tokens auto: %d tokens a micro-batch (no GPU memory to size from on %s)", AUTO_START,
                 device.type)
        return AUTO_START
    release(device)
    free, total = torch.cuda.mem_get_info(device)
    adam = 2 * sum(p.numel() * 4 for p in model.parameters())  # its two fp32 moments, made at step 1
    budget = AUTO_MARGIN * free - adam
    tokens = fit_tokens(lambda size: _peak_bytes(probe, probe_sentences(lengths, size, buckets), size, device),
                        budget, cap)
    if dist.world > 1:
        found = torch.tensor([tokens], device=device)
        torch.distributed.all_reduce(found, op=torch.distributed.ReduceOp.MIN, group=dist.device)
        tokens = int(found.item())
    log.info("max_tokens auto: %d tokens a micro-batch, within %.1f of the %.1f GiB free on %s (of %.1f GiB)",
             tokens, budget / 2 ** 30, free / 2 ** 30, torch.cuda.get_device_name(device), total / 2 ** 30)
    return tokens


def _peak_bytes(probe: Callable[[list[int], int], None], sentences: list[int], tokens: int,
                device: torch.device) -> int | None:
    """The peak memory of `probe(sentences, tokens)`, in bytes above what is allocated now; None when it
    ran out of memory."""
    release(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    try:
        probe(sentences, tokens)
    except RuntimeError as err:
        if not is_out_of_memory(err):
            raise
        return None
    return torch.cuda.max_memory_allocated(device) - before


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
