"""Kill and resume: a `ci` run killed at a random training step and run again ends where an
uninterrupted run does.

In a copy of the workflow (bench/out/kill_resume/wf, the repository's data linked), trains, averages,
decodes and scores one experiment uninterrupted; then, --kills times, deletes that experiment's
training and evaluation outputs, starts `snakemake` again, sends a signal to its whole process group
(SIGTERM, SIGKILL and SIGINT in turn, as a scheduler, the OOM killer or Ctrl-C would) at a random
update of the training (the copy's config logs every update, so any step can be picked), and runs
`snakemake` once more to finish. Each time the averaged model must equal the uninterrupted one weight
for weight, and the decoded test set and its BLEU must be the same. Run from the repository root:

    python bench/kill_resume.py               # 10 kills, ~5 min on 2 cores
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from hashlib import sha256
from pathlib import Path

import torch
import yaml

EXPERIMENT, SPLIT = "base_en_de", "test_2016_flickr"
SIGNALS = (signal.SIGTERM, signal.SIGKILL, signal.SIGINT)
TARGET = f"results/ci/evaluate/{EXPERIMENT}/{SPLIT}.bleu.json"
TRAIN_LOG = f"results/ci/logs/train/{EXPERIMENT}.log"


def snakemake_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "snakemake", "--cores", "2", *args, "--config", "scale=ci"]


def finish(work: Path) -> None:
    """Run the workflow to the target, past whatever a kill left (a lock, incomplete outputs)."""
    subprocess.run(snakemake_cmd("--unlock"), cwd=work, capture_output=True, check=True)
    run = subprocess.run(snakemake_cmd("--rerun-incomplete", TARGET), cwd=work, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"snakemake failed:\n{run.stderr[-3000:]}")


def clean(work: Path) -> None:
    for folder in (f"results/ci/train/{EXPERIMENT}", f"results/ci/checkpoints/{EXPERIMENT}",
                   f"results/ci/evaluate/{EXPERIMENT}"):
        shutil.rmtree(work / folder, ignore_errors=True)
    (work / TRAIN_LOG).unlink(missing_ok=True)


def outcome(work: Path) -> tuple[dict, float, str]:
    """The averaged weights, sacreBLEU and the decoded test set's sha256 (at `ci` scale BLEU is near 0,
    so the hypotheses themselves are compared too)."""
    averaged = torch.load(work / f"results/ci/train/{EXPERIMENT}/averaged.pt", map_location="cpu", weights_only=False)
    hyp = (work / f"results/ci/evaluate/{EXPERIMENT}/{SPLIT}.hyp").read_bytes()
    return averaged["model"], json.loads((work / TARGET).read_text())["sacrebleu"]["score"], sha256(hyp).hexdigest()


def training_reached(work: Path, step: int) -> bool:
    """Whether the training log shows update `step` done (0: training has started)."""
    log = work / TRAIN_LOG
    text = log.read_text(errors="replace") if log.is_file() else ""
    return f"step {step}/" in text if step else " parameters on " in text


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill moments")
    ap.add_argument("--out", default="bench/out/kill_resume")
    args = ap.parse_args()
    repo, rng = Path.cwd(), random.Random(args.seed)
    work = Path(args.out) / "wf"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copy(repo / "Snakefile", work)
    config = yaml.safe_load((repo / "config.yaml").read_text())
    config["scales"]["ci"]["train"]["log_every"] = 1  # a log line per update: the kill can pick any step
    (work / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for folder in ("workflow", "config"):
        shutil.copytree(repo / folder, work / folder)
    (work / "data").symlink_to(repo / "data")

    start = time.monotonic()
    finish(work)
    reference, reference_bleu, reference_hyp = outcome(work)
    print(f"uninterrupted: sacreBLEU {reference_bleu:.4f}, hypotheses sha256 {reference_hyp[:12]} "
          f"({time.monotonic() - start:.0f} s with data preparation)", flush=True)

    same = 0
    for kill in range(args.kills):
        sig = SIGNALS[kill % len(SIGNALS)]
        clean(work)
        proc = subprocess.Popen(snakemake_cmd(TARGET), cwd=work, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        step = rng.randrange(config["scales"]["ci"]["train"]["max_updates"])
        while not training_reached(work, step):
            time.sleep(0.01)
        os.killpg(proc.pid, sig)
        proc.wait()
        left = sorted(p.name for p in (work / f"results/ci/checkpoints/{EXPERIMENT}").glob("*.pt"))
        finish(work)
        resumed = re.search(r"resuming from \S+ \(step (\d+)", (work / TRAIN_LOG).read_text())
        weights, bleu, hyp = outcome(work)
        equal = weights.keys() == reference.keys() and all(torch.equal(weights[k], reference[k]) for k in weights)
        same += equal and bleu == reference_bleu and hyp == reference_hyp
        print(f"kill {kill + 1:2d}: {signal.Signals(sig).name} once step {step} was logged; left {left or 'nothing'}; "
              f"resumed from step {resumed.group(1) if resumed else '-'}; averaged model "
              f"{'identical' if equal else 'DIFFERENT'}, "
              f"sacreBLEU {bleu:.4f}, hypotheses {'identical' if hyp == reference_hyp else 'DIFFERENT'}", flush=True)
    print(f"{same}/{args.kills} killed runs ended with the uninterrupted averaged model, hypotheses and BLEU")
    if same != args.kills:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
