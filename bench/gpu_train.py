"""Paper-size training of each model family through `nmtrepro train` under torchrun, on a GPU.

This runs what a paper-scale Snakemake job runs (torchrun, process groups, bf16 autocast, the data
path, validation, checkpoints, a resume) with each family's paper-scale experiment as `config.yaml`
resolves it, on bench/synthetic.py's prepared datasets (the paper's vocabulary, WMT-like lengths or
paper C's IWSLT-like ones, parser phrases and POS tags). Only
the update count, a time limit per variant and the checkpoint and log intervals are the bench's own.
Per variant it prints the rates of the trainer's log (nmtrepro.training.rates.log_rates: over the
windows after the first, and the steady rate over those without new shapes) and the peak GPU memory;
every log and `gpu_train.json` go to --out. With --resume the first variant trains 10 updates further
from its last checkpoint, which must say that it resumed. `--setting KEY=VALUE` overrides a train
setting of every variant (`fast=compile`, `buckets=true`); `--profile FIRST:COUNT` trains in one
process under `timed_steps.py` and profiles updates FIRST+1..FIRST+COUNT (`<variant>.steps.profile.txt`).

    python bench/gpu_train.py                              # one GPU; the default variants, ~5 min on an H100
    python bench/gpu_train.py --device cpu --scale ci --updates 4 --pairs 400 --variant transformer_base
    python bench/gpu_train.py --setting fast=compile --max-tokens 12500 --minutes 4 --timeout 400
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml
from synthetic import write_datasets

from nmtrepro.study.config import experiments, load, validate
from nmtrepro.core.files import InputError
from nmtrepro.training.profiling import head
from nmtrepro.training.rates import log_rates

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ["transformer_base", "transformer_big", "phrase_max_attn_ta_parse", "biarn", "rnn_encoder",
            "transformer_disan", "gru_attention_ll", "npmt", "fusing_diverse", "linguistic_features"]


def experiment_of_each_variant(scale: str) -> dict:
    """Model variant -> the first experiment of `scale` that trains it (config.yaml, validated, so its
    defaults filled in)."""
    config, _ = load(REPO / "config.yaml", [f"scale={scale}"])
    validate(config, REPO / "workflow" / "schemas" / "config.schema.yaml")
    by_variant = {}
    for exp in experiments(config).values():
        by_variant.setdefault(exp.variant, exp)
    return by_variant


def key_value(item: str) -> tuple[str, object]:
    """--setting KEY=VALUE -> (KEY, VALUE read as YAML)."""
    if "=" not in item:
        raise argparse.ArgumentTypeError(f"{item!r}: takes KEY=VALUE")
    key, value = item.split("=", 1)
    return key, yaml.safe_load(value)


def train(exp, data: Path, out: Path, args, updates: int, tag: str) -> tuple[str, float]:
    settings = {**exp.train, "max_updates": updates, "max_minutes": args.minutes, "save_every": args.updates,
                "log_every": args.log_every, "device": args.device, "keep_last": 2,
                "max_tokens": args.max_tokens or exp.train["max_tokens"], **dict(args.setting)}
    annotations = [a for name in exp.annotations for a in ("--annotation", f"{name}={data}")]
    run = out / exp.variant
    if tag != "resume":  # a measurement starts afresh, not from an earlier run's checkpoints in `out`
        shutil.rmtree(run, ignore_errors=True)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(args.nproc),
                "-m", "nmtrepro.cli", "train"]
    if args.profile and tag != "resume":  # one process, its updates timed and some profiled (timed_steps.py)
        for stale in out.glob(f"{exp.variant}.steps.*"):
            stale.unlink()
        launcher = [sys.executable, str(Path(__file__).with_name("timed_steps.py")), "ours",
                    str(out / f"{exp.variant}.steps.json"), "--profile", args.profile, "--"]
    command = [*launcher, "--prepared", str(data), "--model", json.dumps(exp.model), "--settings", json.dumps(settings),
               "--checkpoint-dir", str(run / "checkpoints"), *annotations, "--out", str(run / "final.pt"),
               "--curve", str(run / "curve.tsv")]
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    except subprocess.TimeoutExpired as err:
        raise RuntimeError(f"{exp.variant} ({tag}) still running after {args.timeout} s: {err.stderr}") from None
    seconds = time.perf_counter() - start
    (out / f"{exp.variant}.{tag}.log").write_text(done.stdout + done.stderr)
    if done.returncode:
        raise RuntimeError(f"{exp.variant} ({tag}) exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done.stderr, seconds


def summary(exp, log: str, seconds: float, max_tokens: int) -> dict:
    rates = log_rates(log)
    return {"variant": exp.variant, "family": exp.model["family"], "experiment": exp.name,
            "params": rates["params"], "precision": rates["precision"],
            "max_tokens": rates["auto_max_tokens"] or max_tokens,  # auto: what it found
            "update_tokens": exp.train["update_tokens"],
            **{key: rates[key] for key in ("tgt_tok_s", "steady_tgt_tok_s", "steady_windows", "peak_gib")},
            "wall_s": round(seconds, 1)}


def arguments() -> argparse.ArgumentParser:
    """The command line; fast_equality.py takes its defaults for the runs it hands to `train`."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="paper", help="config.yaml scale whose experiments to train")
    ap.add_argument("--variant", action="append", help="model variant (config `models` key); repeatable")
    ap.add_argument("--device", default="cuda", help="train setting `device` (cpu for a smoke test)")
    ap.add_argument("--nproc", type=int, default=1, help="torchrun processes (one per GPU)")
    ap.add_argument("--updates", type=int, default=30)
    ap.add_argument("--minutes", type=float, default=0.75, help="stop a variant after this much training")
    ap.add_argument("--timeout", type=float, default=240, help="seconds before a variant's run counts as hung")
    ap.add_argument("--log-every", type=int, default=5)
    ap.add_argument("--max-tokens", type=int, help="micro-batch tokens (default: the experiment's setting)")
    ap.add_argument("--pairs", type=int, default=60000, help="synthetic training pairs per dataset")
    ap.add_argument("--vocab", type=int, default=37000, help="joint BPE vocabulary (WMT14 En-De: ~37k)")
    ap.add_argument("--iwslt-vocab", type=int, default=22822,
                    help="word vocabulary of paper C's IWSLT14 experiments (its English side: 22,822)")
    ap.add_argument("--resume", action="store_true", help="then resume the first variant for 10 updates")
    ap.add_argument("--setting", action="append", default=[], type=key_value, metavar="KEY=VALUE",
                    help="a train setting for every variant, e.g. fast=compile; repeatable")
    ap.add_argument("--profile", metavar="FIRST:COUNT",
                    help="one process (no torchrun), updates FIRST+1..FIRST+COUNT under torch's profiler: "
                         "<variant>.steps.profile.txt (timed_steps.py)")
    ap.add_argument("--out", default=str(REPO / "bench" / "out" / "gpu_train"))
    return ap


def main() -> None:
    args = arguments().parse_args()
    if args.profile and args.nproc != 1:
        sys.exit("gpu_train: --profile runs one process, not --nproc " + str(args.nproc))

    by_variant = experiment_of_each_variant(args.scale)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    data = write_datasets(out, args.pairs, args.vocab, args.iwslt_vocab)
    rows = []
    for variant in args.variant or VARIANTS:
        if variant not in by_variant:
            sys.exit(f"gpu_train: no {args.scale} experiment trains {variant!r}")
        exp = by_variant[variant]
        try:
            log, seconds = train(exp, data[exp.dataset.startswith("iwslt")], out, args, args.updates, "train")
            rows.append({**dict(args.setting), **summary(exp, log, seconds, args.max_tokens or exp.train["max_tokens"])})
        except (RuntimeError, InputError) as err:  # a run that failed, or logged no step
            rows.append({"variant": variant, "family": exp.model["family"], "error": str(err)[-2000:]})
        print(json.dumps(rows[-1]), flush=True)
        if (profiled := out / f"{variant}.steps.profile.txt").exists():
            print(head(profiled), flush=True)
    if args.resume:
        exp = by_variant[(args.variant or VARIANTS)[0]]
        log, _ = train(exp, data[exp.dataset.startswith("iwslt")], out, args, args.updates + 10, "resume")
        resumed = f"step {args.updates}," in log and "resuming from" in log
        rows.append({"variant": exp.variant, "resume": "ok" if resumed else "FAILED: no resume line"})
        print(json.dumps(rows[-1]))
    (out / "gpu_train.json").write_text(json.dumps(rows, indent=1) + "\n")
    print("variant\tfamily\tparams\tprecision\tmax_tokens\ttgt_tok/s\tsteady (windows)\tpeak GiB\twall s")
    for r in rows:
        if "tgt_tok_s" in r:
            steady = f"{r['steady_tgt_tok_s']:,}" if r["steady_tgt_tok_s"] else "none"
            print(f"{r['variant']}\t{r['family']}\t{r['params']}\t{r['precision']}\t{r['max_tokens']}\t{r['tgt_tok_s']:,}\t"
                  f"{steady} ({r['steady_windows']})\t{r['peak_gib']}\t{r['wall_s']}")
        elif "error" in r:
            print(f"{r['variant']}\t{r['family']}\tFAILED (see its log)")
    if any("error" in r or str(r.get("resume", "ok")) != "ok" for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
