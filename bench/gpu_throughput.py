"""GPU throughput: target tokens/s and model FLOP utilisation of paper-size training steps.

The training step of nmtrepro.training.train (forward, label-smoothed loss, backward, Adam) on updates of
~25k target tokens of WMT-like sentence pairs (bench/synthetic.py), cut into max_tokens batches as the
trainer cuts them; the baseline Transformer and, when the `phrase` family is registered, the same size
with it (+PR). MFU: the analytic FLOPs (nmtrepro.training.flops) over the GPU's dense bf16 peak.
`--paths` runs the step several ways in one run, each tok/s a ratio to the first: `eager`, `buckets`
(batches planned and padded as the trainer's `buckets: true`), `compile` (buckets, the loss compiled as
`fast: compile`, fused Adam). A bucketed path runs every timed update once untimed first, so that no
bucket's graph compiles on the clock; the compile time is printed apart.

    python bench/gpu_throughput.py                               # paper base, CUDA, bf16
    python bench/gpu_throughput.py --paths eager,buckets,compile # the fast path against the eager step
    python bench/gpu_throughput.py --device cpu --scale ci --steps 2 --precision fp32   # smoke test
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from synthetic import sentences, wmt_lengths

from nmtrepro.core import runtime
from nmtrepro.models import build_model
from nmtrepro.training.batching import collate, token_batches
from nmtrepro.training.fast import CompiledLoss
from nmtrepro.training.flops import peak_tflops, update_flops
from nmtrepro.training.train import LossOf

REPO = Path(__file__).resolve().parents[1]
PATHS = ("eager", "buckets", "compile")


def synthetic_update(update_tokens: int, max_tokens: int, vocab: int, rng: np.random.Generator,
                     buckets: bool = False) -> tuple[list, list[int], list[int]]:
    """WMT-like sentence pairs (synthetic.wmt_lengths) totalling ~update_tokens target tokens, cut into the
    trainer's batches (`token_batches`, `collate`; `buckets`: planned and padded as `buckets: true`):
    the batches, and the pairs' source and target lengths."""
    src_len, tgt_len = wmt_lengths(update_tokens, rng)  # each target has 2 tokens or more: enough pairs
    pairs = int(np.searchsorted(np.cumsum(tgt_len), update_tokens)) + 1
    src, tgt = (sentences(lengths[:pairs], vocab, rng) for lengths in (src_len, tgt_len))
    batches = [collate(src, tgt, indices, bucketed=buckets)
               for indices in token_batches(src.sizes, tgt.sizes, max_tokens, seed=1, buckets=buckets)]
    return batches, src.sizes.tolist(), tgt.sizes.tolist()


def measure(spec: dict, args, device: torch.device, path: str = "eager") -> dict:
    """One variant's timed updates run as `path` (eager, buckets, compile: see the module docstring)."""
    torch.manual_seed(0)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    model = build_model(spec).to(device).train()
    loss_of = LossOf(model, 0.1)
    if path == "compile":
        loss_of = CompiledLoss(loss_of)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9,
                                 fused=True if path == "compile" else None)
    rng = np.random.default_rng(0)
    updates = [synthetic_update(args.update_tokens, args.max_tokens, spec["tgt_vocab"], rng, buckets=path != "eager")
               for _ in range(args.steps + args.warmup_steps)]
    precision = runtime.resolve_precision(device, args.precision)

    def step(batches):
        optimizer.zero_grad(set_to_none=True)
        for batch in batches:
            batch = batch.to(device)
            with runtime.autocast(device, precision):
                loss, _ = loss_of(batch.net_input, batch.prev, batch.target)
            loss.backward()
        optimizer.step()

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    start = time.perf_counter()
    # Bucketed paths meet every bucket of the timed updates before the clock starts (compiling each).
    for batches, _, _ in updates[:args.warmup_steps] + (updates[args.warmup_steps:] if path != "eager" else []):
        step(batches)
    sync()
    warmup_s = time.perf_counter() - start
    start = time.perf_counter()
    for batches, _, _ in updates[args.warmup_steps:]:
        step(batches)
    sync()
    seconds = time.perf_counter() - start
    timed = updates[args.warmup_steps:]
    tokens = sum(sum(t) for _, _, t in timed)
    flops = sum(update_flops(model, spec, s, t) for _, s, t in timed)
    peak = torch.cuda.max_memory_allocated(device) / 2 ** 30 if device.type == "cuda" else float("nan")
    return {"params": sum(p.numel() for p in model.parameters()), "tgt_tok_s": tokens / seconds, "peak_gib": peak,
            "tflops": flops / seconds / 1e12, "s_per_update": seconds / len(timed), "precision": precision,
            "warmup_s": warmup_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu (smoke test only)")
    ap.add_argument("--scale", default="paper", help="config.yaml scale whose model sizes to use")
    ap.add_argument("--size", default="base", help="model size name of that scale (base, big)")
    ap.add_argument("--precision", default="bf16", choices=["bf16", "fp32"])
    ap.add_argument("--vocab", type=int, default=37000, help="joint BPE vocabulary (WMT14 En-De: ~37k)")
    ap.add_argument("--update-tokens", type=int, default=25000, help="target tokens per update")
    ap.add_argument("--max-tokens", type=int, default=4096, help="padded tokens per forward/backward")
    ap.add_argument("--steps", type=int, default=20, help="timed updates")
    ap.add_argument("--warmup-steps", type=int, default=3, help="untimed updates first")
    ap.add_argument("--cudnn-attention", action="store_true",
                    help="leave torch's cuDNN attention on (the trainer turns it off: runtime.cuda_defaults)")
    ap.add_argument("--peak-tflops", type=float, help="the device's peak dense TFLOP/s (default: table)")
    ap.add_argument("--paths", default="eager",
                    help="comma-separated ways to run the step: eager, buckets, compile (ratios to the first)")
    args = ap.parse_args()
    paths = args.paths.split(",")
    if not set(paths) <= set(PATHS):
        sys.exit(f"gpu_throughput: --paths {args.paths}: known paths are {', '.join(PATHS)}")

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit(f"gpu_throughput: --device {args.device} but torch {torch.__version__} sees no CUDA GPU; "
                 "run on a GPU machine, or pass --device cpu --scale ci for a smoke test")
    device = torch.device(args.device)
    if device.type == "cuda":
        runtime.cuda_defaults(args.cudnn_attention)
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    size = config["scales"][args.scale]["sizes"][args.size]
    spec = {"family": "transformer", "src_vocab": args.vocab, "tgt_vocab": args.vocab, **size}
    variants = {"baseline": spec}
    if importlib.util.find_spec("nmtrepro.models.phrase"):
        importlib.import_module("nmtrepro.models.phrase")
        variants["+PR"] = {**spec, "family": "phrase"}
    peak = peak_tflops(device, args.peak_tflops)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"# {name}, {args.scale}/{args.size} {size}, ~{args.update_tokens} target tokens per update in "
          f"{args.max_tokens}-token batches, {args.steps} timed updates; peak {peak or '?'} TFLOP/s")
    print("variant\tparams\tprecision\ts/update\ttgt_tok/s\tmodel_TFLOP/s\tMFU\tpeak_GiB"
          + ("\tpath\tvs_first\twarmup_s" if len(paths) > 1 else ""))
    for label, variant in variants.items():
        first = None
        for path in paths:
            try:
                r = measure(variant, args, device, path)
            except (TypeError, ValueError) as err:  # a family that wants options this script does not know
                print(f"{label}\tskipped: {err}")
                break
            first = first or r
            mfu = f"{100 * r['tflops'] / peak:.1f}%" if peak else "n/a"
            print(f"{label}\t{r['params']:,}\t{r['precision']}\t{r['s_per_update']:.3f}\t{r['tgt_tok_s']:,.0f}\t"
                  f"{r['tflops']:.2f}\t{mfu}\t{r['peak_gib']:.1f}"
                  + (f"\t{path}\t{r['tgt_tok_s'] / first['tgt_tok_s']:.2f}x\t{r['warmup_s']:.0f}"
                     if len(paths) > 1 else ""))
    print("# FLOPs: 6 x matmul weights x tokens (encoder and cross-attention keys/values: source; decoder: target) + attention "
          "12 x d x (L_enc S^2 + L_dec (T^2 + T S)) + output layer 6 x d x V x target tokens; "
          "MFU against the dense bf16 peak" + ("" if variants.get("+PR") is None else
                                                "; +PR: weights outside its encoder/decoder layer lists are not counted"))


if __name__ == "__main__":
    main()
