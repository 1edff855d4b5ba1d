"""Where a paper-size Base training step goes: torch's profiler over one update of repeated batches.

The batches repeat (unlike gpu_throughput.py's, fresh every update), so shape-dependent setup such as
cuDNN's per-shape attention plans is out of the timed step: compare the two to see what it costs.
Prints the step's time, then the profiler's tables by CPU time and (on CUDA) by GPU time.

    python bench/gpu_profile.py                     # CUDA, paper sizes
    python bench/gpu_profile.py --device cpu --scale ci
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_throughput import REPO, synthetic_update  # noqa: E402  (bench helper beside this file)

from nmtrepro.core import runtime  # noqa: E402
from nmtrepro.models import build_model  # noqa: E402
from nmtrepro.training.criterion import model_loss  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--scale", default="paper")
    ap.add_argument("--tokens", type=int, default=8000, help="target tokens in the update")
    ap.add_argument("--vocab", type=int, default=37000)
    args = ap.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda":
        runtime.cuda_defaults()
    size = yaml.safe_load((REPO / "config.yaml").read_text())["scales"][args.scale]["sizes"]["base"]
    model = build_model({"family": "transformer", "src_vocab": args.vocab, "tgt_vocab": args.vocab, **size})
    model = model.to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, fused=True)
    batches, _, _ = synthetic_update(args.tokens, 4096, args.vocab, 256, torch.Generator().manual_seed(0))
    batches = [(s.to(device), p.to(device), t.to(device)) for s, p, t in batches]
    precision = runtime.resolve_precision(device, "bf16")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def step():
        optimizer.zero_grad(set_to_none=True)
        for src, prev, tgt in batches:
            with runtime.autocast(device, precision):
                loss, _ = model_loss(model, {"src": src}, prev, tgt, 0.1)
            loss.backward()
        optimizer.step()
        sync()

    step(), step()
    start = time.perf_counter()
    step()
    print(f"one update: {time.perf_counter() - start:.3f} s, {len(batches)} batches, {precision}")
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        step()
    table = prof.key_averages()
    print(table.table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=60))
    if device.type == "cuda":
        print(table.table(sort_by="self_cuda_time_total", row_limit=15, max_name_column_width=60))


if __name__ == "__main__":
    main()
