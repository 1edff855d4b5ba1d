"""What a `fast: graphs` training step still runs outside its compiled graph, per micro-batch.

Under CUDA graphs a forward or a backward is one launch; every op the trainer runs outside them is a
launch of its own, which the GPU may wait for (the host issues them one by one). This bench trains
`nmtrepro`'s Trainer on the given path for a few updates (the first compiles), then profiles one
update and counts the ops that ran outside the compiled region, per micro-batch, by name and by the
op that called them (AccumulateGrad: autograd adding a backward's gradient into .grad). On a GPU it
also counts the kernel and graph launches. The model has the paper Base's layers and parameter
tensors at `--d-model` (small on a CPU, where the count, not the arithmetic, is the point), on
gpu_train.py's synthetic WMT-like data.

    python bench/host_ops.py                            # CPU, d 32, 4,096-token updates of 1,024-token batches
    python bench/host_ops.py --device cuda --d-model 512 --max-tokens 4096 --update-tokens 25000
"""
from __future__ import annotations

import argparse
import collections
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_train import write_dataset  # noqa: E402  (bench helper beside this file)

from nmtrepro.training.train import Corpus, Settings, Trainer  # noqa: E402

COMPILED = ("Torch-Compiled Region", "CompiledFunction", "## Call CompiledFxGraph")


def compiled(event) -> bool:
    """Whether a profiler event ran inside a compiled graph (or is one)."""
    while event is not None:
        if event.name.startswith(COMPILED):
            return True
        event = event.cpu_parent
    return False


def outside_ops(events) -> list:
    """The aten ops called from Python or autograd (not from another aten op) outside compiled graphs."""
    return [e for e in events if e.name.startswith("aten::") and not compiled(e)
            and not (e.cpu_parent is not None and e.cpu_parent.name.startswith("aten::"))]


def print_counts(events, micro: int) -> None:
    """The profiled update's ops outside compiled graphs (by caller, with their host time, and by name)
    and its launches, each per micro-batch."""
    ops = outside_ops(events)
    by_name = collections.Counter(e.name for e in ops)
    by_caller, host_us = collections.Counter(), collections.Counter()
    for e in ops:
        caller = e.cpu_parent.name if e.cpu_parent else "(Python)"
        by_caller[caller] += 1
        host_us[caller] += e.cpu_time_total
    accumulate = sum(e.cpu_time_total for e in events if e.name == "torch::autograd::AccumulateGrad")
    launches = collections.Counter(e.name for e in events  # the CUDA runtime's and driver's calls
                                   if e.name.startswith("cu") and ("Launch" in e.name or "Memcpy" in e.name))
    print(f"ops outside the compiled graph: {len(ops)}, {len(ops) / micro:.1f} a micro-batch")
    print("  by caller (ops, host us): " + ", ".join(f"{name} {n / micro:.1f}, {host_us[name] / micro:.0f} us"
                                                    for name, n in by_caller.most_common(4)))
    print(f"  AccumulateGrad nodes: {accumulate / micro:.0f} us a micro-batch")
    print("  by op: " + ", ".join(f"{name} {n / micro:.1f}" for name, n in by_name.most_common(8)))
    if launches:
        print("  launches a micro-batch: " + ", ".join(f"{k} {n / micro:.1f}" for k, n in launches.most_common()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--fast", default="graphs", choices=["off", "compile", "graphs"])
    ap.add_argument("--d-model", type=int, default=32, help="the Base's width (ffn 4x, 8 heads)")
    ap.add_argument("--max-tokens", type=int, default=1024)
    ap.add_argument("--update-tokens", type=int, default=4096)
    ap.add_argument("--updates", type=int, default=5, help="timed updates after the first (compiling) one")
    ap.add_argument("--pairs", type=int, default=3000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="host_ops."))
    try:
        write_dataset(work / "data", args.pairs, 8000, short=False)
        model = {"family": "transformer", "d_model": args.d_model, "ffn": 4 * args.d_model, "heads": 8,
                 "encoder_layers": 6, "decoder_layers": 6, "dropout": 0.1, "pre_norm": False}
        settings = Settings.from_dict({
            "max_tokens": args.max_tokens, "update_tokens": args.update_tokens, "fast": args.fast,
            "buckets": args.fast == "graphs", "max_updates": 10**6, "save_every": 10**6, "device": args.device,
            "precision": "bf16" if args.device == "cuda" else "fp32", "threads": torch.get_num_threads()})
        trainer = Trainer(Corpus(work / "data"), model, settings, work / "checkpoints")
        trainer.model.train()
        updates, times = trainer.updates(), []
        for i in range(1 + args.updates):
            group, _ = next(updates)
            start = time.perf_counter()
            trainer.update(group)  # syncs once (its totals), so the clock holds the update's GPU work
            if i:
                times.append(time.perf_counter() - start)
        group, _ = next(updates)
        activities = [torch.profiler.ProfilerActivity.CPU] + [torch.profiler.ProfilerActivity.CUDA] * (
            args.device == "cuda")
        with torch.profiler.profile(activities=activities) as profile:
            trainer.update(group)
        params = sum(1 for p in trainer.model.parameters() if p.requires_grad)
        print(f"fast: {args.fast} on {args.device}, {params} parameter tensors, d {args.d_model}; "
              f"update {statistics.median(times) * 1e3:.1f} ms (median of {len(times)}), profiled one of "
              f"{len(group)} micro-batches")
        print_counts(profile.events(), len(group))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
