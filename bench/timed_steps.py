"""Run a training CLI (ours or fairseq's) and record when each update ends, how many target tokens it had,
the process's resident memory (RSS) after it and, on a GPU, the peak GPU memory allocated so far.

Used by bench/fairseq_compare.py so that both tools' training speed has the same definition: target
tokens (non-pad, EOS included) of updates W+1..W+N divided by the wall time from the end of update W to
the end of update W+N. That window includes everything a tool does between updates (batching, collation,
logging), not just forward/backward. Runs under either venv: it imports only the tool it times.

    python bench/timed_steps.py {ours|fairseq} STEPS.json -- ARGS...
"""
from __future__ import annotations

import json
import os
import sys
import time


def rss_mb() -> float:
    """This process's resident set size now, in MiB (Linux: /proc/self/statm counts pages)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def gpu_peak_gib() -> float:
    """The peak GPU memory torch has allocated in this process so far, in GiB (0 without CUDA); no sync."""
    import torch
    return torch.cuda.max_memory_allocated() / 2**30 if torch.cuda.is_initialized() else 0.0


def patch(cls, name: str, tokens_of, steps: list) -> None:
    """Wrap cls.name so that every call appends (end time, target tokens, RSS in MiB, GPU peak in GiB)
    to `steps`."""
    original = getattr(cls, name)

    def timed(self, *args, **kwargs):
        result = original(self, *args, **kwargs)
        steps.append((time.perf_counter(), tokens_of(args, result), rss_mb(), gpu_peak_gib()))
        return result

    setattr(cls, name, timed)


def main() -> int:
    tool, out, sep, *argv = sys.argv[1:]
    assert sep == "--", __doc__
    steps: list[tuple[float, int, float]] = []
    if tool == "ours":
        from nmtrepro import cli
        from nmtrepro.training import train
        patch(train.Trainer, "update", lambda args, result: result[2], steps)  # update() -> (loss, nll, tokens)
        run = lambda: cli.main(["train", *argv])  # noqa: E731
    else:
        from fairseq import trainer
        from fairseq_cli import train as fairseq_train

        # train_step(samples): a list of collated samples; "ntokens" counts non-pad target tokens.
        patch(trainer.Trainer, "train_step",
              lambda args, result: sum(s.get("ntokens", 0) for s in args[0] if s), steps)
        sys.argv = ["fairseq-train", *argv]
        run = fairseq_train.cli_main
    try:
        code = run()
    finally:
        with open(out, "w") as handle:
            json.dump(steps, handle)
    return code or 0


if __name__ == "__main__":
    sys.exit(main())
