"""What the default run (the central study at `tiny`) costs in training, from the models' own speed here.

Each training the central claims need (config `claims.<name>.central`; one seed each: the seeds train
alike) runs a few real updates of `nmtrepro train` on the prepared tiny data, two jobs side by side at
one thread each as the default run schedules them, with the experiment's own checkpoint interval (so
validation and saving are counted in their share). Its seconds an update times its `max_updates` and
its number of seeds give core-minutes; the sum over two cores is the floor of the run's training wall
time (decoding, data and scoring come on top). Run from the repo root (it prepares the data first):

    python bench/central_study_cost.py --updates 100
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nmtrepro.study.config import central_study, experiments, load, replicates, training_of, validate
from nmtrepro.study.experiment import Experiment


def trainings(config: dict, resolved: dict[str, Experiment]) -> dict[str, int]:
    """The central study's distinct trainings (one seed each) -> how many seeds each trains."""
    seeds = replicates(resolved)
    names = {config["claims"][claim][key] for claim in central_study(config, resolved)["claims"]
             for key in ("experiment", "baseline")}
    out = {}
    for name in sorted(names):
        first = training_of(resolved, name)
        out[first] = max(out.get(first, 0), len(seeds[name]))
    return out


def inputs(resolved: dict[str, Experiment], names) -> list[str]:
    """The prepared data and annotations these trainings read (Snakemake makes them)."""
    files = set()
    for name in names:
        e = resolved[name]
        files.add(f"results/tiny/prepare/{e.dataset}/stats.json")
        files |= {f"results/tiny/{stage}/{e.dataset}/{part}.{kind}.bin" for kind, stage in e.annotations.items()
                  for part in ("train", "valid")}
    return sorted(files)


def time_pair(resolved: dict[str, Experiment], pair, updates: int, work: Path) -> dict[str, float]:
    """Seconds an update of each experiment of `pair`, trained side by side."""
    running = {}
    for name in pair:
        e = resolved[name]
        settings = {**e.train, "max_updates": updates, "threads": 1}
        args = ["nmtrepro", "train", "--prepared", f"results/tiny/prepare/{e.dataset}", "--model", json.dumps(e.model),
                "--settings", json.dumps(settings), "--checkpoint-dir", str(work / name), "--threads", "1",
                "--out", str(work / f"{name}.pt"), "--curve", str(work / f"{name}.tsv")]
        for kind, stage in e.annotations.items():
            args += ["--annotation", f"{kind}=results/tiny/{stage}/{e.dataset}"]
        running[name] = (time.monotonic(), subprocess.Popen(args, stderr=subprocess.DEVNULL))
    out = {}
    for name, (start, proc) in running.items():
        if proc.wait():
            sys.exit(f"training {name} failed (exit {proc.returncode})")
        out[name] = (time.monotonic() - start) / updates
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=100, help="updates timed per training")
    args = parser.parse_args()
    config, _ = load("config.yaml", ["scale=tiny"])
    validate(config, "workflow/schemas/config.schema.yaml")
    resolved = experiments(config)
    seeds = trainings(config, resolved)
    subprocess.run([sys.executable, "-m", "snakemake", *inputs(resolved, seeds), "--cores", "2", "--quiet", "all"],
                   check=True)
    names = list(seeds)
    per_update = {}
    with tempfile.TemporaryDirectory() as work:
        for i in range(0, len(names), 2):
            per_update.update(time_pair(resolved, names[i:i + 2], args.updates, Path(work)))
    total = 0.0
    print(f"{'training':32} {'s/update':>8} {'updates':>8} {'seeds':>5} {'core-min':>8}")
    for name in names:
        minutes = per_update[name] * resolved[name].train["max_updates"] * seeds[name] / 60
        total += minutes
        print(f"{name:32} {per_update[name]:8.3f} {resolved[name].train['max_updates']:8,} {seeds[name]:5} {minutes:8.1f}")
    print(f"training: {total:.0f} core-minutes, {total / 2:.0f} minutes on 2 cores at best "
          "(decoding, data and scoring come on top)")


if __name__ == "__main__":
    main()
