"""Training rates read back from what a timed or logged run recorded: target tokens/s over a window of
updates and its steady part, the rate a profile's kernels bound, and the rates of a trainer's log.

A shape's first micro-batches compile, warm up or record a CUDA graph (fast.CompiledLoss.warm_calls)
and run far below the step's pace; with a few dozen shapes the rare ones still arrive tens of updates
in. So each rate comes with a steady one, over the updates (or log windows) in which no micro-batch met
a new shape: the pace of a long run once its shapes are all recorded. The benchmarks and the GPU checks
report these (bench/fairseq_compare.py, bench/gpu_train.py); tests/test_profiling.py pins them.
"""
from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from ..core.files import InputError

# The trainer's log lines (train.Trainer): a window's rate, its note on new shapes, the peak GPU memory,
# and the micro-batch `max_tokens: auto` found.
STEP = re.compile(r"step \d+/\d+ .*?\| ([\d.]+) tgt tok/s .*$", re.M)
WARM = re.compile(r"\| \d+ micro-batches on new shapes")
PEAK = re.compile(r"\| peak ([\d.]+) GiB")
AUTO = re.compile(r"max_tokens auto: (\d+) tokens")


def training_speed(steps_file: Path, warmup: int, updates: int, chunk: int = 10) -> dict:
    """From a timed run's records (bench/timed_steps.py: per update its end time, target tokens, RSS, GPU
    peak and warm calls so far): target tokens/s over updates warmup+1 .. warmup+updates, the median and
    best of its runs of `chunk` updates, and the steady rate over the window's updates in which no
    micro-batch met a new shape. On a machine shared with other jobs the load changes within a run; the
    median and the fastest chunk are less disturbed estimates of a tool's own speed than the whole window.
    """
    steps = json.loads(Path(steps_file).read_text())
    if len(steps) < warmup + updates:
        raise InputError(f"{steps_file}: only {len(steps)} updates recorded, expected {warmup + updates}")

    def speed(first: int, last: int) -> tuple[float, int, float]:  # updates first..last, 0-based, inclusive
        tokens, seconds = sum(step[1] for step in steps[first: last + 1]), steps[last][0] - steps[first - 1][0]
        return tokens / seconds, tokens, seconds

    tok_s, tokens, seconds = speed(warmup, warmup + updates - 1)
    chunks = [speed(i, min(i + chunk, warmup + updates) - 1)[0] for i in range(warmup, warmup + updates, chunk)]
    warm = [step[4] if len(step) > 4 else 0 for step in steps]  # records of before the count: none
    steady = [speed(i, i) for i in range(warmup, warmup + updates) if warm[i] == warm[i - 1]]
    return {"train_tok_s": tok_s, "train_tokens": tokens, "train_s": seconds, "train_tok_s_median": statistics.median(chunks),
            "steady_tok_s": sum(t for _, t, _ in steady) / sum(s for _, _, s in steady) if steady else None,
            "steady_updates": len(steady),
            "train_tok_s_best": max(chunks), "train_tok_s_chunks": chunks, "rss_mib_last": steps[warmup + updates - 1][2],
            "tokens_per_update": tokens / updates, "gpu_peak_gib": steps[warmup + updates - 1][3]}


def kernel_bound(profile_file: Path, steady_tok_s: float | None) -> dict:
    """From a profile's numbers (profiling.Profile): its updates' GPU kernel time an update, the target
    tok/s the step would reach if the GPU never waited on the host (tokens over kernel time), the share of
    that the unprofiled steady rate reaches, and the GPU's time an update by kind of kernel. The busy share
    under the profiler understates the GPU: tracing a CUDA graph's kernels slows its launch on the host."""
    numbers = json.loads(Path(profile_file).read_text())
    count = numbers["last"] - numbers["first"] + 1
    bound = numbers["tokens"] / numbers["busy_s"] if numbers["busy_s"] else None
    kinds = sorted(numbers["kinds_s"].items(), key=lambda item: -item[1])
    return {"updates": f"{numbers['first']}..{numbers['last']}", "kernel_ms": 1000 * numbers["busy_s"] / count,
            "kernel_bound_tok_s": bound or 0.0,
            "steady_share": steady_tok_s / bound if bound and steady_tok_s else None,
            "kinds_ms": {kind: 1000 * seconds / count for kind, seconds in kinds}, "warm": numbers["warm"]}


def log_rates(log: str) -> dict:
    """From a trainer's log: target tok/s over its windows after the first (which holds the warm-up), the
    steady rate over those whose line names no new shapes, the peak GPU memory, the parameters and
    precision, and the micro-batch that `max_tokens: auto` found (None without it)."""
    steps = list(STEP.finditer(log))
    if not steps:
        raise InputError("no step lines in the log")
    speeds = [float(m.group(1)) for m in steps[1:] or steps]
    steady = [float(m.group(1)) for m in steps[1:] if not WARM.search(m.group(0))]
    peaks = [float(p) for m in steps for p in PEAK.findall(m.group(0))]
    params = re.search(r"([\d,]+) parameters", log)
    precision = re.search(r"parameters on \S+, (\w+)", log)
    return {"params": params.group(1) if params else "?", "precision": precision.group(1) if precision else "?",
            "auto_max_tokens": int(auto.group(1)) if (auto := AUTO.search(log)) else None,
            "tgt_tok_s": round(sum(speeds) / len(speeds)),
            "steady_tgt_tok_s": round(sum(steady) / len(steady)) if steady else None,
            "steady_windows": f"{len(steady)}/{len(steps) - 1}",
            "peak_gib": max(peaks) if peaks else None}
