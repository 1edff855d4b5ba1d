"""Quality beside fairseq: fairseq's Transformer trained with our Base's recipe on our data, three seeds,
BLEU of both on the test set with the project's seed-pooled test (issue 58).

Every claim reads a difference over our Base; if our Base trained worse than the field's reference
implementation, those differences would mean less. bench/fairseq_compare.py compares speed and shows the
same weights decode the same in both; this compares what each tool's training reaches.

Ours: the study's own Base (config.yaml experiment `base_en_de`, each of its seeds) as the workflow
resolves, trains, averages and decodes it at `--scale` (built with snakemake when absent, else read as
it is); fairseq takes the same resolved model size and settings and the same seeds.
fairseq (fairseq-fixed 0.12.3.1 in bench/.venv-fairseq, made when absent as fairseq_compare does): the
same BPE'd Multi30k En-De sentences binarized with our dictionaries (checked token for token), the
scale's Base size (pre-norm, tied decoder embeddings) and train settings (updates, max_tokens, lr and
inverse-sqrt warmup, label smoothing, dropout, Adam betas and eps, clipping), `--seed` 1..3, the last
`average.last` interval checkpoints averaged (fairseq's rule, `AVERAGE`), then
fairseq-generate with the scale's beam, length penalty and length limits; its BPE-free tokenized output
is Moses-detokenized as ours is. Both are scored by `nmtrepro significance`'s test with ours as the
system and fairseq as the baseline, seed i of one paired with seed i of the other (independent runs:
the pairing only orders them). Run from the repo root:

    nice -n 19 python bench/fairseq_quality.py                     # tiny, CPU, 1 thread a training
    python bench/fairseq_quality.py --scale gpu --device cuda       # on the GPU machine (device/README.md)

It prints each seed's BLEU, the means, Δ (ours − fairseq) with its 95% CI and one-sided p's, each
training's wall time, and the settings that could not be matched; everything goes to quality.json too.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

from fairseq_compare import MALLOC, VENV, binarize, ensure_venv, fairseq_hypotheses, fairseq_train_args, sh

from nmtrepro.study.config import experiments, load, replicates, validate
from nmtrepro.core.text import detokenize
from nmtrepro.study.experiment import Experiment
from nmtrepro.evaluation.significance import compare

EXPERIMENT, TGT_LANG = "base_en_de", "de"
UNMATCHED = """\
Settings that could not be matched, or are not:
- precision: ours trains under the scale's `precision` (bf16 autocast at tiny and gpu); fairseq 0.12 on
  the CPU trains in fp32 only (its --bf16 means a TPU); on a GPU it trains --fp16, its standard recipe.
- batches: both fill batches to max_tokens, fairseq from length-sorted buckets shuffled each epoch,
  ours as the scale's `buckets` says; the same sentences, not the same batches or the same order.
- fairseq's attention and FFN-output projections have biases, ours none; fairseq smooths the labels
  over V-1 classes, ours over V; fairseq starts the decoder with EOS, ours with BOS.
- fairseq's search bans EOS at the first step and takes one length limit per batch (the longest
  source's), ours one per sentence.
- seeds: the same numbers, different random streams; seed i of each is an independent training."""


def base_replicates(scale: str) -> list[Experiment]:
    """Our Base at `scale` as the workflow resolves it (its model, train, average and decode settings,
    by_size regime included), one record a seed."""
    config, _ = load("config.yaml", [f"scale={scale}"])
    validate(config, "workflow/schemas/config.schema.yaml")
    resolved = experiments(config)
    return [resolved[name] for name in replicates(resolved)[EXPERIMENT]]


def our_runs(base: list[Experiment], scale: str, threads: int) -> list[dict]:
    """Our Base's decoded test set per seed (the workflow's files; snakemake builds any missing) and the
    training seconds its log reports (summed over sittings, as the trainer counts them)."""
    root = Path(f"results/{scale}")
    hyps = [root / f"evaluate/{e.name}/{e.test}.hyp" for e in base]
    missing = [str(path) for path in hyps if not (path.exists() and Path(f"{path}.tok").exists())]
    if missing:
        sh("snakemake", "--cores", threads, "--config", f"scale={scale}", *missing)
    runs = []
    for e, hyp in zip(base, hyps):
        trained = re.findall(r"\| (\d+) s trained", (root / f"logs/train/{e.name}.log").read_text())
        runs.append({"name": e.name, "hyp": str(hyp), "hyp_tok": f"{hyp}.tok",
                     "train_s": float(trained[-1]) if trained else None,
                     "decode_s": json.loads((root / f"evaluate/{e.name}/{e.test}.decode.json").read_text())["seconds"]})
    return runs


# fairseq's scripts/average_checkpoints.py is not in its wheel; this is its rule, run in fairseq's Python
# (the checkpoints pickle its classes): the mean of the last N interval checkpoints' weights, the newest
# one's other fields kept.
AVERAGE = """
import re, sys, torch
folder, last, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
from pathlib import Path
paths = sorted(Path(folder).glob("checkpoint_*_*.pt"), key=lambda p: int(re.findall(r"_(\\d+)\\.pt$", p.name)[0]))[-last:]
states = [torch.load(p, map_location="cpu", weights_only=False) for p in paths]
averaged = states[-1]
averaged["model"] = {k: sum(s["model"][k].double() for s in states).div(len(states)).to(v.dtype)
                     for k, v in states[-1]["model"].items()}
torch.save(averaged, out)
print("averaged", *[p.name for p in paths])
"""


def fairseq_run(seed: int, size: dict, train: dict, decode: dict, last: int, sentences: int, data_bin: Path,
                out: Path, python: str, env: dict, device: list[str]) -> dict:
    """Train, average and decode fairseq's Transformer with `seed`; skipped where its hypotheses exist,
    resumed (fairseq reads its checkpoint_last.pt) where a run stopped."""
    run = out / f"fairseq_seed{seed}"
    hyp, hyp_tok, timing = run / "hyp", run / "hyp.tok", run / "timing.json"
    if hyp.exists() and timing.exists():
        return {"name": run.name, "hyp": str(hyp), "hyp_tok": str(hyp_tok), **json.loads(timing.read_text())}
    resumed = (run / "checkpoints/checkpoint_last.pt").exists()
    run.mkdir(parents=True, exist_ok=True)
    args = fairseq_train_args(size, train)
    args[args.index("--seed") + 1] = seed
    start = time.time()
    sh(python, "-m", "fairseq_cli.train", data_bin, *args, *device, "--num-workers", "0",
       "--save-interval-updates", train["save_every"], "--keep-interval-updates", last,
       "--save-dir", run / "checkpoints", env=env, log=run / "train.log")
    train_s = time.time() - start
    # fairseq 0.12 checkpoints pickle an argparse.Namespace, which torch>=2.6 refuses by default.
    fairseq_env = {**env, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}
    (run / "average.py").write_text(AVERAGE)
    sh(python, run / "average.py", run / "checkpoints", last, run / "averaged.pt", env=fairseq_env, log=run / "average.log")
    search = ["--beam", decode["beam"], "--lenpen", decode["lenpen"], "--max-len-a", decode["max_len_a"],
              "--max-len-b", decode["max_len_b"], "--max-tokens", decode["max_tokens"]]
    start = time.time()
    sh(python, "-m", "fairseq_cli.generate", data_bin, "--path", run / "averaged.pt", "--gen-subset", "test",
       *search, *device, "--num-workers", "0", "--required-batch-size-multiple", "1", "--remove-bpe",
       env=fairseq_env, log=run / "generate.log")
    decode_s = time.time() - start
    tokenized = fairseq_hypotheses((run / "generate.log").read_text(), sentences)
    hyp_tok.write_text("".join(line + "\n" for line in tokenized), encoding="utf-8")
    hyp.write_text("".join(line + "\n" for line in detokenize(tokenized, TGT_LANG)), encoding="utf-8")
    times = {"train_s": train_s, "decode_s": decode_s, "resumed": resumed}
    timing.write_text(json.dumps(times))
    return {"name": run.name, "hyp": str(hyp), "hyp_tok": str(hyp_tok), **times}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", default="tiny", help="config.yaml scale whose Base, recipe and results to use")
    ap.add_argument("--threads", type=int, default=1, help="threads a training (the scale's `threads`: 1 at tiny)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--samples", type=int, default=10_000, help="bootstrap resamples")
    ap.add_argument("--out", help="default bench/out/fairseq_quality_<scale>")
    ap.add_argument("--fairseq-python", help="a Python that imports fairseq (default: bench/.venv-fairseq's, made "
                    "when absent; on the GPU machine python3 with device/pack_fairseq.sh's folder on PYTHONPATH)")
    args = ap.parse_args()
    base = base_replicates(args.scale)
    e, seeds = base[0], [r.seed for r in base]
    size, train, decode, last = e.model, e.train, e.decode, e.average["last"]
    if train["update_tokens"] != 1:
        sys.exit(f"{args.scale}: this bench assumes one batch an update (update_tokens: 1), as fairseq's --update-freq 1")
    out = Path(args.out or f"bench/out/fairseq_quality_{args.scale}").resolve()
    prepared = Path(f"results/{args.scale}/prepare/{e.dataset}")
    test = prepared / "test" / e.test

    ours = our_runs(base, args.scale, args.threads)
    if not args.fairseq_python:
        ensure_venv()
    python = args.fairseq_python or str(VENV.resolve() / "bin/python")
    threads = str(args.threads)
    env = {**os.environ, **MALLOC, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    data_bin = binarize(prepared, out, python, args.threads, env)
    device = ["--cpu"] if args.device == "cpu" else ["--fp16"]
    sentences = len(Path(f"{test}.src.bpe").read_text(encoding="utf-8").splitlines())
    theirs = [fairseq_run(seed, size, train, decode, last, sentences, data_bin, out, python, env, device)
              for seed in seeds]

    result = compare(ours, theirs, [f"{test}.ref"], [f"{test}.ref.tok"], args.samples, seeds)
    print(f"\n{args.scale} Base ({e.model}), {train['max_updates']} updates of {train['max_tokens']} tokens, lr "
          f"{train['lr']} warmup {train['warmup']}, last {last} averaged, beam {decode['beam']}: ours (system) "
          f"vs fairseq-fixed 0.12.3.1 (baseline) on {e.dataset} {e.test}")
    for metric, entry in result.items():
        print(f"\n{metric}{'':14}{'ours':>8}{'fairseq':>9}{'Δ':>8}")
        for row in entry["seeds"]:
            print(f"  seed {row['seed']}{'':14}{row['score']:8.2f}{row['baseline']:9.2f}{row['delta']:+8.2f}")
        print(f"  mean{'':16}{entry['score']:8.2f}{entry['baseline']:9.2f}{entry['delta']:+8.2f}   95% CI "
              f"{entry['delta_low']:+.2f} to {entry['delta_high']:+.2f}; one-sided p ours better {entry['p_greater']:.3f}, "
              f"worse {entry['p_less']:.3f}")
    print(f"\n{'wall time (s)':20}{'train':>8}{'decode':>8}")
    for run in ours + theirs:
        train_s = f"{run['train_s']:8.0f}" if run["train_s"] is not None else f"{'?':>8}"
        print(f"  {run['name']:18}{train_s}{run['decode_s']:8.1f}" + ("  (resumed: this sitting's time)" if run.get("resumed") else ""))
    print("(ours: the workflow's jobs, `threads` each, beside whatever else ran; fairseq: this bench's, "
          f"{threads} thread(s) each)\n{UNMATCHED}")
    (out / "quality.json").write_text(json.dumps({"ours": ours, "fairseq": theirs, "test": result}, indent=1))


if __name__ == "__main__":
    main()
