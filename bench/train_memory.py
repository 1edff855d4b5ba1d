"""Resident memory (RSS) of a long tiny training run: does it stay flat?

Runs `nmtrepro train` on the prepared Multi30k En-De with the tiny base model and the tiny scale's
training settings (what a default-study training job runs: one thread, validation and a checkpoint every
save_every updates) for --updates updates, under bench/timed_steps.py, which reads the process's RSS
after every update. Prints RSS after update 200 and every 1,000th, each over the first (the speed issue's
goal: within 1.2x of update 200 through 5,000 updates), and writes memory.json. Run from the repo root:

    python bench/train_memory.py                   # 5,000 updates, ~65 min on one core
    python bench/train_memory.py --updates 400     # quick check
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from nmtrepro.config import load, model_options

DATASET = "multi30k_en_de"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=5000)
    ap.add_argument("--first", type=int, default=200, help="the update whose RSS the others are compared with")
    ap.add_argument("--out", default="bench/out/train_memory")
    args = ap.parse_args()
    if args.updates < args.first:
        sys.exit(f"--updates ({args.updates}) must reach --first ({args.first})")
    config, _ = load("config.yaml", ["scale=tiny"])
    model = model_options(config, "transformer_base", "models.transformer_base")
    settings = {**config["scales"]["tiny"]["train"], "max_updates": args.updates}
    out, prepared = Path(args.out).resolve(), Path(f"results/tiny/prepare/{DATASET}")
    subprocess.run(["snakemake", "--cores", "1", f"{prepared}/stats.json"], check=True)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    timer = Path(__file__).with_name("timed_steps.py").resolve()
    with open(out / "train.log", "w") as log:
        subprocess.run([sys.executable, timer, "ours", out / "steps.json", "--", "--prepared", prepared,
                        "--model", json.dumps(model), "--settings", json.dumps(settings),
                        "--checkpoint-dir", out / "checkpoints", "--out", out / "final.pt",
                        "--curve", out / "curve.tsv"], check=True, stdout=log, stderr=subprocess.STDOUT)
    rss = [step[2] for step in json.loads((out / "steps.json").read_text())]
    marks = sorted({args.first, *range(1000, args.updates + 1, 1000), args.updates})
    rows = {update: {"rss_mib": rss[update - 1], "over_first": rss[update - 1] / rss[args.first - 1]}
            for update in marks}
    print(f"tiny base, {settings['threads']} thread(s), {args.updates} updates (settings {settings})")
    print(f"{'after update':>14}{'RSS MiB':>10}{f'/ update {args.first}':>16}")
    for update, row in rows.items():
        print(f"{update:>14}{row['rss_mib']:>10.0f}{row['over_first']:>16.2f}")
    print(f"peak over the run: {max(rss):.0f} MiB (after update {rss.index(max(rss)) + 1})")
    (out / "memory.json").write_text(json.dumps({"settings": settings, "model": model, "after_update": rows,
                                                 "peak_mib": max(rss)}, indent=1))


if __name__ == "__main__":
    main()
