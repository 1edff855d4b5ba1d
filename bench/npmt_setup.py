"""NPMT trained as the project trained it at `gpu` before issue 60 against NPMT as its authors train it
(posenhuang/NPMT), from the same seed on the same batches, on CPU: the valid NLL curve of each side by
side, and the diagnostics the training log carries (the reordering layer's pre-tanh std and mean
tanh', the valid set's average segment length) at the first and last log.

The two setups differ in three things only (issue 60; docs/papers.md, paper C):
- before:  inverse-sqrt decay from a peak of 0.002, source embeddings N(0, 1), dropout at five places,
           the segmentation posteriors from the pass with dropout;
- authors: a constant 0.001 (the paper's Adam "with initial learning rate as 0.001"), source embeddings
           U(±0.05) (fairseq-lua's -init_range), dropout on the embeddings and the decoder's layers only
           (-dropout_hid 0), the posteriors from a pass without the decoder's dropout.
Both: the `gpu` scale's NPMT sizes (config.yaml) and its clipping, one warmup, smaller batches than
`gpu`'s 2,048 tokens so that a few hundred updates fit a CPU. The two trainings run side by side, one
thread each. Run from the repo root, after tiny's prepare stage (snakemake prepare --config scale=tiny):

    python bench/npmt_setup.py                          # 300 updates of 512 tokens, valid every 50
    python bench/npmt_setup.py --updates 600 --max-tokens 1024 --d-model 128
"""
from __future__ import annotations

import argparse
import csv
import json
import re
import subprocess
from pathlib import Path

import yaml

SETUPS = {
    "before": ({}, {"lr": 0.002, "schedule": "inverse_sqrt"}),
    "authors": ({"hidden_dropout": 0.0, "embed_init_range": 0.05, "clean_posteriors": True},
                {"lr": 0.001, "schedule": "constant"}),
}
DIAGNOSTIC = re.compile(r"\| (pre tanh std|tanh grad|segment length) ([0-9.e+-]+)")


def gpu_size() -> dict:
    """The `gpu` scale's NPMT sizes without the options the setups set."""
    size = yaml.safe_load(Path("config.yaml").read_text())["scales"]["gpu"]["sizes"]["npmt"]
    return {key: value for key, value in size.items() if key not in SETUPS["authors"][0]}


def train(name: str, args, out: Path) -> subprocess.Popen:
    model, settings = SETUPS[name]
    model = {"family": "npmt", **gpu_size(), **({"d_model": args.d_model} if args.d_model else {}), **model}
    settings = {"max_updates": args.updates, "max_tokens": args.max_tokens, "update_tokens": 1, "warmup": args.warmup,
                "save_every": args.every, "keep_last": 2, "log_every": args.every, "threads": 1,
                "precision": "fp32", "clip_norm": 10.0, "seed": args.seed, **settings}
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    command = ["nmtrepro", "train", "--prepared", args.prepared, "--model", json.dumps(model),
               "--settings", json.dumps(settings), "--checkpoint-dir", str(folder / "checkpoints"),
               "--out", str(folder / "final.pt"), "--curve", str(folder / "curve.tsv")]
    print(f"{name}: {' '.join(command[:4])} --model '{json.dumps(model)}' --settings '{json.dumps(settings)}'")
    return subprocess.Popen(command, stderr=(folder / "train.log").open("w"))


def valid_nll(folder: Path) -> dict[int, float]:
    with (folder / "curve.tsv").open() as handle:
        return {int(row["step"]): float(row["valid_nll"]) for row in csv.DictReader(handle, delimiter="\t")
                if row["valid_nll"]}


def diagnostics(folder: Path) -> list[tuple[int, dict]]:
    """(step, {name: value}) of every log line with diagnostics, in order."""
    found = []
    for line in (folder / "train.log").read_text().splitlines():
        if (figures := dict(DIAGNOSTIC.findall(line))) and (step := re.search(r"step (\d+)", line)):
            found.append((int(step.group(1)), figures))
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prepared", default="results/tiny/prepare/multi30k_de_en")
    ap.add_argument("--updates", type=int, default=300)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--every", type=int, default=50, help="updates between validations and log lines")
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--d-model", type=int, help="width instead of gpu's (256)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="bench/out/npmt_setup")
    args = ap.parse_args()
    if not Path(args.prepared, "stats.json").exists():
        raise SystemExit(f"{args.prepared} is not prepared: run snakemake prepare --config scale=tiny first")
    out = Path(args.out)
    jobs = {name: train(name, args, out) for name in SETUPS}
    failed = [name for name, job in jobs.items() if job.wait()]
    if failed:
        raise SystemExit(f"training failed for {failed}: see {out}/<setup>/train.log")
    curves = {name: valid_nll(out / name) for name in SETUPS}
    print("\nvalid NLL (bits a target token)")
    print("step   " + "".join(f"{name:>10}" for name in SETUPS))
    for step in sorted(set().union(*curves.values())):
        print(f"{step:<7}" + "".join(f"{curves[name].get(step, float('nan')):>10.3f}" for name in SETUPS))
    print("\ndiagnostics (the first and last training and validation lines)")
    for name in SETUPS:
        found = diagnostics(out / name)
        for kind in ("tanh grad", "segment length"):
            lines = [line for line in found if kind in line[1]]
            for step, figures in lines[:1] + lines[-1:]:
                print(f"{name:<8} step {step:<5} " + " | ".join(f"{k} {v}" for k, v in figures.items()))


if __name__ == "__main__":
    main()
