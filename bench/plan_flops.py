"""What GPU-hours the paper scale's plan comes to at a given MFU, from each job's counted FLOPs (issue 38).

`nmtrepro plan` costs a job from a measured rate of its size and family; where the fast path is not
measured yet it keeps the eager one. This script asks the question the other way round: every
Transformer-family job of the plan (paper A's phrases, paper B's recurrences, paper D's groups,
their baselines) trained at the same model FLOP utilisation m, what do the four papers cost, and
what m do the issue's 150 H100-hours need?

The jobs are `nmtrepro plan --config scale=paper`'s (its JSON: each job's `target_tokens`, `max_updates`
x the update's tokens, and the papers' jobs). A job's FLOPs are those tokens times its model's training
FLOPs a target token, counted, not derived (nmtrepro.training.flops: torch's count of a forward and
backward at paper size on the meta device, so a family's extra parts count as the kernels compute
them), fitted over a few probes and summed over bench/synthetic.py's WMT-like lengths. MFU here is
those FLOPs over the card's dense bf16 peak; for the Transformer the fit is `flops.update_flops`'
analytic count (printed beside it).

Paper C's jobs (NPMT, the GRU seq2seq: sequential decoders, not FLOP-bound) keep the plan's measured
rate (`--measured`, a column of config.yaml's `plan.speedup`).

    python bench/plan_flops.py --mfu 0.16 0.30 0.37     # ~4 min: Snakemake's dry runs, then the counts
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from synthetic import wmt_lengths

from nmtrepro.study.config import experiments, load
from nmtrepro.models import build_model
from nmtrepro.training.flops import PEAK_BF16_TFLOPS, per_target_token, sentence_flops, update_flops

REPO = Path(__file__).resolve().parents[1]
MEASURED_ONLY = {"npmt", "gru_attention"}   # paper C: costed at the plan's measured rate


def paper_plan() -> dict:
    """`nmtrepro plan --config scale=paper`'s JSON, costed from the config's rates (no measured file)."""
    with tempfile.TemporaryDirectory() as work:
        subprocess.run([sys.executable, "-m", "nmtrepro.cli", "plan", "--config", "scale=paper", "--bench", "",
                        "--out", f"{work}/plan.json"], check=True, cwd=REPO, stdout=subprocess.DEVNULL)
        return json.loads(Path(work, "plan.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mfu", type=float, nargs="+", default=[0.16, 0.30],
                    help="model FLOP utilisations to cost every Transformer-family job at")
    ap.add_argument("--target-hours", type=float, default=150.0, help="the budget whose MFU to solve for")
    ap.add_argument("--measured", default="H200 (bf16, fast path)",
                    help="plan.speedup column whose rates paper C's jobs keep")
    ap.add_argument("--peak", type=float, default=PEAK_BF16_TFLOPS["H100"] * 1e12, help="the card's dense FLOP/s")
    ap.add_argument("--base", default="base_en_de", help="the experiment the others are compared with")
    ap.add_argument("--pairs", type=int, default=200_000, help="synthetic sentence pairs for the lengths")
    ap.add_argument("--out", help="JSON file for every job's count and hours")
    args = ap.parse_args()

    config, _ = load(REPO / "config.yaml", ["scale=paper"])
    if args.measured not in config["plan"].get("speedup", {}):
        sys.exit(f"plan_flops: --measured {args.measured!r} is not a column of config.yaml's plan.speedup "
                 f"({', '.join(config['plan'].get('speedup', {}))})")
    costed = paper_plan()
    resolved = experiments(config)
    vocab = config["scales"]["paper"]["prepare"]["bpe_merges"]
    src, tgt = wmt_lengths(args.pairs, np.random.default_rng(0))

    counts, jobs = {}, {}
    for name, job in sorted(costed["jobs"].items()):
        spec = {**resolved[name].model, "src_vocab": vocab, "tgt_vocab": vocab}
        tokens = job["target_tokens"]
        if job["family"] in MEASURED_ONLY:
            jobs[name] = {"variant": resolved[name].variant, "tokens": tokens, "flops_per_token": None,
                          "measured_hours": job["gpu_hours_on"][args.measured]}
            continue
        key = json.dumps(spec, sort_keys=True)
        if key not in counts:
            counts[key] = per_target_token(sentence_flops(spec), src, tgt)
        jobs[name] = {"variant": resolved[name].variant, "tokens": tokens, "flops_per_token": counts[key]}

    def hours(names, mfu: float) -> float:
        return sum(jobs[n]["measured_hours"] if jobs[n]["flops_per_token"] is None
                   else jobs[n]["tokens"] * jobs[n]["flops_per_token"] / (mfu * args.peak) / 3600 for n in names)

    base = jobs[args.base]["flops_per_token"]
    base_spec = {**resolved[args.base].model, "src_vocab": vocab, "tgt_vocab": vocab}
    with torch.device("meta"):
        analytic = update_flops(build_model(base_spec), base_spec, src.tolist(), tgt.tolist()) / tgt.sum()
    print(f"# paper scale, {len(jobs)} training jobs; FLOPs counted on the meta device over {args.pairs:,} "
          f"synthetic WMT-like pairs, vocabulary {vocab:,}; Base {base / 1e6:.0f} MFLOP a target token "
          f"(the analytic count: {analytic / 1e6:.0f}); peak {args.peak / 1e12:.0f} TFLOP/s")
    print("variant\tMFLOP/target token\tx Base\tBase's tok/s share at equal MFU")
    by_variant = {j["variant"]: j["flops_per_token"] for j in jobs.values() if j["flops_per_token"]}
    for variant, f in sorted(by_variant.items(), key=lambda item: item[1]):
        print(f"{variant}\t{f / 1e6:.0f}\t{f / base:.2f}\t{base / f:.0%}")
    papers = {paper: entry["experiments"] for paper, entry in costed["papers"].items()}
    print("\nMFU\t" + "\t".join(papers) + f"\ttotal H100-hours\t{args.base} hours")
    for mfu in args.mfu:
        print(f"{mfu:.0%}\t" + "\t".join(f"{hours(n, mfu):.1f}" for n in papers.values())
              + f"\t{hours(jobs, mfu):.1f}\t{hours([args.base], mfu):.2f}")
    fixed = sum(j["measured_hours"] for j in jobs.values() if j["flops_per_token"] is None)
    flops = sum(j["tokens"] * j["flops_per_token"] for j in jobs.values() if j["flops_per_token"])
    need = flops / ((args.target_hours - fixed) * 3600 * args.peak)
    print(f"\n{args.target_hours:g} H100-hours in all need {need:.1%} MFU on every Transformer-family job "
          f"(paper C's {fixed:.1f} hours at its measured rate: `{args.measured}`)")
    if args.out:
        Path(args.out).write_text(json.dumps({"mfu_needed": need, "jobs": jobs}, indent=1))


if __name__ == "__main__":
    main()
