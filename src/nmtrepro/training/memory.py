"""Out of GPU memory in one micro-batch is not the end of a 20-hour job (issue 38).

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
"""
from __future__ import annotations

import torch


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
