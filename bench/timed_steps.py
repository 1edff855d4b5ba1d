"""Run a training CLI (ours or fairseq's) and record when each update ends, how many target tokens it had,
the process's resident memory (RSS) after it, on a GPU the peak GPU memory allocated so far, and (ours
on the fast path) how many micro-batches so far compiled, warmed up or recorded a new shape rather than
replayed one (fast.CompiledLoss.warm_calls; fairseq: 0), so that a rate can leave those updates out
(nmtrepro.training.rates).

Used by bench/fairseq_compare.py so that both tools' training speed has the same definition: target
tokens (non-pad, EOS included) of updates W+1..W+N divided by the wall time from the end of update W to
the end of update W+N. That window includes everything a tool does between updates (batching, collation,
logging), not just forward/backward. Runs under either tool's Python: of the package it imports only
nmtrepro.training.profiling, which needs nothing but torch.

`--profile FIRST:COUNT` also runs torch's profiler over updates FIRST+1..FIRST+COUNT (after the timed
window, whose rate it would slow) and writes STEPS.profile.txt and .json (profiling.Profile: the GPU's
busy share, its time by kind of kernel, its idle time by what the host ran, the ops that took the most
time); a window in which a micro-batch met a new shape is not the step's steady pace, so it is profiled
again, up to `profiling.TRIES` windows.

    python bench/timed_steps.py {ours|fairseq} STEPS.json [--profile FIRST:COUNT] -- ARGS...
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch

from nmtrepro.training.profiling import Profile


def rss_mb() -> float:
    """This process's resident set size now, in MiB (Linux: /proc/self/statm counts pages)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def gpu_peak_gib() -> float:
    """The peak GPU memory torch has allocated in this process so far, in GiB (0 without CUDA); no sync."""
    return torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_initialized() else 0.0


def patch(cls, name: str, tokens_of, warm_of, steps: list, profile: Profile | None) -> None:
    """Wrap cls.name so that every call appends (end time, target tokens, RSS in MiB, GPU peak in GiB,
    warm calls so far) to `steps`, and runs the profiler over the updates it names."""
    original = getattr(cls, name)

    def timed(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        steps.append((time.perf_counter(), tokens_of(args, result), rss_mb(), gpu_peak_gib(), warm_of(self)))
        if profile:
            profile.after(len(steps), steps[-1][4], steps[-1][1])
        return result

    setattr(cls, name, timed)


def main() -> int:
    tool, out, *rest = sys.argv[1:]
    profile = None
    if rest[:1] == ["--profile"]:
        first, count = map(int, rest[1].split(":"))
        profile, rest = Profile(first, count, out.removesuffix(".json") + ".profile"), rest[2:]
    assert rest[:1] == ["--"], __doc__
    argv = rest[1:]
    steps: list[tuple] = []
    if tool == "ours":
        from nmtrepro import cli
        from nmtrepro.training import train
        patch(train.Trainer, "update", lambda args, result: result[2],  # update() -> (loss, nll, tokens)
              lambda trainer: trainer.compiled.warm_calls if trainer.compiled else 0, steps, profile)
        run = lambda: cli.main(["train", *argv])  # noqa: E731
    else:
        from fairseq import trainer
        from fairseq_cli import train as fairseq_train

        # train_step(samples): a list of collated samples; "ntokens" counts non-pad target tokens.
        patch(trainer.Trainer, "train_step",
              lambda args, result: sum(s.get("ntokens", 0) for s in args[0] if s), lambda trainer: 0, steps, profile)
        sys.argv = ["fairseq-train", *argv]
        # Attention as ours runs it (runtime.cuda_defaults): torch >= 2.5 prefers cuDNN's on Hopper, which
        # builds an execution plan for every new padded length; fairseq's batches bring new lengths all
        # the time: on an H200, 2.4 of the 5.2 host seconds of two of its updates (docs/measurements.md).
        torch.backends.cuda.enable_cudnn_sdp(False)
        run = fairseq_train.cli_main
    try:
        code = run()
    finally:
        with open(out, "w") as handle:
            json.dump(steps, handle)
    return code or 0


if __name__ == "__main__":
    sys.exit(main())
