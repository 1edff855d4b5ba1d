"""Where a scale's Base recipe stands on its BLEU curve: the curve behind the gpu scale's choice of
updates, batch, lr and dropout.

Trains an experiment (default `base_en_de`) with its scale's model and training settings as
config.yaml resolves them, for `--factor` times its updates (the schedule does not depend on
max_updates, so the first part of the run is the recipe itself), keeping a checkpoint every
`--every` updates. Then, for each kept step, averages the checkpoints the workflow would average
there (`average.last`, the newest ones at that step) and decodes the test set with the scale's
decoding options, scoring tokenized BLEU as the workflow's `bleu` rule does. Prints one line per
step and where the recipe's end sits against the best of the curve; writes `curve.json` to --out.

It reads the prepared data of the workflow's run (results/<scale>/prepare/<dataset>), so run it after (or
beside) `snakemake --config scale=<scale>`; `--wait` polls until that data exists.

    python bench/gpu_convergence.py --scale gpu --factor 2 --every 250 --wait
    python bench/gpu_convergence.py --scale ci --factor 1 --every 10 --device cpu   # a quick check
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml
from snakemake.utils import update_config

from nmtrepro.config import experiments, load, validate
from nmtrepro.training.checkpoint import average, checkpoints, save

REPO = Path(__file__).resolve().parents[1]


def nmtrepro(*args: str, log: Path) -> None:
    with open(log, "a") as err:
        subprocess.run([sys.executable, "-m", "nmtrepro.cli", *args], check=True, stderr=err, cwd=REPO)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="gpu")
    parser.add_argument("--experiment", default="base_en_de")
    parser.add_argument("--factor", type=float, default=2.0, help="train this many times the recipe's updates")
    parser.add_argument("--every", type=int, default=250, help="a checkpoint (and a point of the curve) every N updates")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--wait", action="store_true", help="wait for the workflow's prepared data")
    parser.add_argument("--configfile", type=Path, help="a YAML file merged over config.yaml, as snakemake's --configfile")
    parser.add_argument("--out", type=Path, default=REPO / "bench/out/gpu_convergence")
    args = parser.parse_args()

    config = load(REPO / "config.yaml", [f"scale={args.scale}"])[0]
    if args.configfile:
        update_config(config, yaml.safe_load(args.configfile.read_text()))
    validate(config, REPO / "workflow/schemas/config.schema.yaml")
    exp = experiments(config)[args.experiment]
    data = REPO / "results" / args.scale / "prepare" / exp.dataset
    test = data / "test" / exp.test
    while args.wait and not (Path(f"{test}.ref.tok").exists() and (data / "stats.json").exists()):
        time.sleep(5)
    recipe = exp.train["max_updates"]
    updates = int(recipe * args.factor)
    settings = {**exp.train, "max_updates": updates, "save_every": args.every, "keep_last": updates // args.every + 1,
                "device": args.device}
    shutil.rmtree(args.out, ignore_errors=True)
    ckpt, log = args.out / "checkpoints", args.out / "log.txt"
    ckpt.mkdir(parents=True)
    started = time.time()
    nmtrepro("train", "--prepared", str(data), "--model", json.dumps(exp.model), "--settings", json.dumps(settings),
             "--checkpoint-dir", str(ckpt), "--threads", "1", "--out", str(args.out / "final.pt"),
             "--curve", str(args.out / "curve.tsv"), log=log)
    trained = time.time() - started
    kept = checkpoints(ckpt)
    last, dec = exp.average["last"], exp.decode
    curve = []
    for i, (step, _) in enumerate(kept):
        if i + 1 < last:
            continue
        model = args.out / f"averaged_{step}.pt"
        save(average([path for _, path in kept[i + 1 - last:i + 1]]), model)
        hyp = args.out / f"{step}.hyp"
        nmtrepro("decode", "--model", str(model), "--prepared", str(data), "--src-bpe", f"{test}.src.bpe",
                 "--tgt-lang", exp.tgt_lang, "--beam", str(dec["beam"]), "--lenpen", str(dec["lenpen"]),
                 "--max-len-a", str(dec["max_len_a"]), "--max-len-b", str(dec["max_len_b"]),
                 "--max-tokens", str(dec["max_tokens"]), "--precision", dec["precision"], "--threads", "1",
                 "--out", str(hyp), "--out-tok", f"{hyp}.tok", "--stats", f"{hyp}.json", log=log)
        nmtrepro("bleu", "--hyp", str(hyp), "--hyp-tok", f"{hyp}.tok", "--ref", f"{test}.ref", "--ref-tok",
                 f"{test}.ref.tok", "--out", f"{hyp}.bleu.json", log=log)
        bleu = json.loads(Path(f"{hyp}.bleu.json").read_text())
        curve.append({"step": step, "tok_bleu": bleu["tok_bleu"]["score"], "sacrebleu": bleu["sacrebleu"]["score"]})
        model.unlink()
    best = max(curve, key=lambda point: point["tok_bleu"])
    at_recipe = next((point for point in curve if point["step"] == recipe), None)
    summary = {"scale": args.scale, "experiment": args.experiment, "recipe_updates": recipe, "trained_updates": updates,
               "train_seconds": round(trained, 1), "averaged_last": last, "curve": curve, "best": best,
               "at_recipe": at_recipe}
    (args.out / "curve.json").write_text(json.dumps(summary, indent=1))
    print(f"{args.experiment} at scale {args.scale}: {updates} updates in {trained:.0f} s; test BLEU of the "
          f"average of the last {last} checkpoints at each step (tokenized / sacreBLEU):")
    for point in curve:
        mark = " <- the recipe's end" if point["step"] == recipe else ""
        print(f"  {point['step']:>7}  {point['tok_bleu']:6.2f}  {point['sacrebleu']:6.2f}{mark}")
    if at_recipe:
        print(f"recipe's end {at_recipe['tok_bleu']:.2f}, best {best['tok_bleu']:.2f} at {best['step']}: "
              f"{best['tok_bleu'] - at_recipe['tok_bleu']:+.2f} BLEU short of the curve's best")


if __name__ == "__main__":
    main()
