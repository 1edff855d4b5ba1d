"""The fast path trains as the eager step does, on the device it will run on (issue 38).

tests/test_fast.py checks it on the CPU in fp32; this runs each family's experiment through `nmtrepro
train` (bench/gpu_train.py's runner, bench/synthetic.py's dataset) twice from the same seed and batches,
`fast: off` and `--fast` (`compile`, or `graphs`: CUDA graphs, then both runs with `buckets: true`, so
that their batches are the same), with every dropout of the model off, and compares the losses of every
update and the final weights. `--update-tokens` above a micro-batch's tokens makes each update
accumulate several micro-batches' gradients, which CUDA graphs must not overwrite (training/fast.py).
It prints the largest relative difference of the update losses and that of all the weights together
(nmtrepro.training.equality, which says why those two decide), and fails beyond the tolerance of the
precision. The trainer's own words on the fast path (compiled, or eager and why) are printed beside
each family.

The model sizes are the scale's (default `ci`: small graphs, which compile in seconds; the mathematics
does not depend on the width), the precision and device those given here:

    python bench/fast_equality.py --device cuda --precision bf16           # the GPU check (~2 min)
    python bench/fast_equality.py --device cpu --variant transformer_base   # fp32 on the CPU
    python bench/fast_equality.py --fast graphs --update-tokens 2000 --variant transformer_base
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

import torch
from gpu_train import REPO, arguments, experiment_of_each_variant, train
from synthetic import write_datasets

from nmtrepro.training.equality import compare

# NPMT stays eager on the fast path (training/fast.py), so it is not here.
VARIANTS = ["transformer_base", "phrase_max_attn_ta", "biarn", "fusing_diverse", "transformer_disan"]
# Relative differences allowed after the updates (update losses, all the weights together), by precision.
TOLERANCE = {"fp32": (1e-4, 1e-4), "bf16": (3e-2, 3e-2)}
FAST_LINE = re.compile(r"fast path: .*$", re.M)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="ci", help="config.yaml scale whose experiments (and sizes) to train")
    ap.add_argument("--variant", action="append", help=f"model variant; repeatable (default: {', '.join(VARIANTS)})")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--precision", default="bf16", choices=sorted(TOLERANCE))
    ap.add_argument("--updates", type=int, default=8)
    ap.add_argument("--pairs", type=int, default=2000, help="synthetic training pairs")
    ap.add_argument("--max-tokens", type=int, help="micro-batch tokens (default: the experiment's setting)")
    ap.add_argument("--fast", default="compile", choices=["compile", "graphs"], help="the fast path to compare")
    ap.add_argument("--update-tokens", type=int, default=1,
                    help="target tokens an update accumulates (default 1: one micro-batch an update)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds before a run counts as hung")
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "fast_equality"))
    args = ap.parse_args()

    by_variant = experiment_of_each_variant(args.scale)
    out = Path(args.out)
    data = write_datasets(out, args.pairs, 8000, 8000)
    # A warmup of one update and a constant rate that moves the weights: the updates compare something.
    common = [("precision", args.precision), ("warmup", 1), ("schedule", "constant"), ("lr", 1e-3),
              ("update_tokens", args.update_tokens)] + [("buckets", True)] * (args.fast == "graphs")
    runs = {"eager": out / "eager", "fast": out / "fast"}
    # gpu_train's defaults (one process) for whatever its `train` reads, and ours
    run = {**vars(arguments().parse_args([])), "minutes": 0, "device": args.device, "log_every": 1,
           "timeout": args.timeout, "max_tokens": args.max_tokens, "updates": args.updates}
    run.pop("setting")
    rows, failed = [], False
    loss_tol, weight_tol = TOLERANCE[args.precision]
    for variant in args.variant or VARIANTS:
        if variant not in by_variant:
            sys.exit(f"fast_equality: no {args.scale} experiment trains {variant!r}")
        exp = by_variant[variant]
        exp = dataclasses.replace(exp, model={k: 0.0 if k.endswith("dropout") else v for k, v in exp.model.items()})
        said = ""
        try:
            for path, folder in runs.items():
                folder.mkdir(parents=True, exist_ok=True)
                run_args = argparse.Namespace(**run, setting=common + [("fast", "off" if path == "eager" else args.fast)])
                log, _ = train(exp, data[exp.dataset.startswith("iwslt")], folder, run_args, args.updates, path)
                if path == "fast":
                    said = "; ".join(FAST_LINE.findall(log))
            row = {"variant": variant, "family": exp.model["family"], "fast_path": said,
                   **compare(runs["eager"] / variant, runs["fast"] / variant)}
            row["ok"] = row["loss_rel"] <= loss_tol and row["weight_rel"] <= weight_tol
        except RuntimeError as err:
            row = {"variant": variant, "family": exp.model["family"], "ok": False, "error": str(err)[-1500:]}
        failed |= not row["ok"]
        rows.append(row)
        print(json.dumps(row), flush=True)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") and torch.cuda.is_available() else args.device
    print(f"\n# eager vs fast (`fast: {args.fast}`) on {name}, {args.precision}, {args.scale} sizes, dropout off, "
          f"{args.updates} updates of {args.update_tokens} target tokens or more; tolerance: losses {loss_tol:g}, weights {weight_tol:g} (relative)")
    print("variant\tfamily\tloss rel diff\tweights rel diff (most different tensor)\tverdict\tthe trainer on the fast path")
    for r in rows:
        if "error" in r:
            print(f"{r['variant']}\t{r['family']}\tFAILED to run (see its log under {out})")
        else:
            print(f"{r['variant']}\t{r['family']}\t{r['loss_rel']:.2e}\t{r['weight_rel']:.2e} ({r['worst_tensor']})\t"
                  f"{'same' if r['ok'] else 'DIFFERENT'}\t{r['fast_path']}")
    (out / "fast_equality.json").write_text(json.dumps(rows, indent=1) + "\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
