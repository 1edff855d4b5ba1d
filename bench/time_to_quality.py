"""Time to quality: BLEU of the tiny recipe against minutes of training, on 2 CPU threads.

Trains the `tiny` scale's base model with the `tiny` training recipe from config.yaml, for a wall-clock
budget instead of the default run's fixed update budget, saving a checkpoint every --save-every updates.
Then decodes Multi30k test_2016_flickr with every checkpoint (and the average of the last few) and prints
sacreBLEU against training minutes. Run from the repo root:

    python bench/time_to_quality.py --minutes 20 --save-every 300
"""
from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import yaml

from nmtrepro.evaluation.bleu import score
from nmtrepro.training import checkpoint

DATASET, SPLIT = "multi30k_en_de", "test_2016_flickr"


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=20.0, help="training budget in wall-clock minutes")
    ap.add_argument("--save-every", type=int, default=250, help="updates between checkpoints")
    ap.add_argument("--average", type=int, default=3, help="also score the average of the last N")
    ap.add_argument("--out", default="bench/out/time_to_quality")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", action="append", default=[], metavar="KEY=JSON",
                    help="override a model option, e.g. --model d_model=192")
    ap.add_argument("--train", action="append", default=[], metavar="KEY=JSON",
                    help="override a training setting, e.g. --train lr=0.003")
    args = ap.parse_args()

    config = yaml.safe_load(open("config.yaml"))
    tiny = config["scales"]["tiny"]
    model = {"family": config["models"]["transformer_base"]["family"], **tiny["sizes"]["base"]}
    # The tiny model with the measured time-to-quality recipe: one 4096-token batch an update and a
    # longer warmup (the default run's smaller updates and short warmup suit its short fixed budget),
    # bf16 autocast (the CPUs this targets have AVX-512 bf16; it falls back to fp32 elsewhere).
    train = {**tiny["train"], "max_tokens": 4096, "update_tokens": 1, "warmup": 500, "lr": 0.002,
             "precision": "bf16", "max_updates": 10**9,
             "max_minutes": args.minutes, "threads": args.threads, "save_every": args.save_every,
             "keep_last": 10**6}
    for overrides, target in ((args.model, model), (args.train, train)):
        for item in overrides:
            key, value = item.split("=", 1)
            target[key] = json.loads(value)

    prepared, test = f"results/tiny/prepare/{DATASET}", f"results/tiny/prepare/{DATASET}/test/{SPLIT}"
    sh("snakemake", "--cores", str(args.threads), f"{prepared}/stats.json", f"{test}.src.bpe")
    out = Path(args.out)
    ckpt_dir = out / "checkpoints"
    print(f"recipe: model {model}\n        train {train}", flush=True)
    sh("nmtrepro", "train", "--prepared", prepared, "--model", json.dumps(model), "--settings", json.dumps(train),
       "--checkpoint-dir", str(ckpt_dir), "--out", str(out / "final.pt"), "--curve", str(out / "curve.tsv"))

    found = checkpoint.checkpoints(ckpt_dir)
    averaged = out / "averaged.pt"
    checkpoint.save(checkpoint.average([p for _, p in found[-args.average:]]), averaged)
    rows = []
    for label, path in [(f"step {s}", p) for s, p in found] + [(f"avg last {args.average}", averaged)]:
        minutes = checkpoint.load(found[-1][1] if path == averaged else path)["wall_s"] / 60
        hyp = out / f"{path.stem}.hyp"
        sh("nmtrepro", "decode", "--model", str(path), "--prepared", prepared, "--src-bpe", f"{test}.src.bpe",
           "--tgt-lang", "de", "--beam", "4", "--threads", str(args.threads), "--out", str(hyp),
           "--out-tok", f"{hyp}.tok")
        bleu = score(hyp, f"{test}.ref", f"{hyp}.tok", f"{test}.ref.tok")
        rows.append((label, minutes, bleu["sacrebleu"]["score"], bleu["tok_bleu"]["score"]))
        print(f"{label:>14}  {minutes:6.1f} min  sacreBLEU {rows[-1][2]:5.2f}  tok BLEU {rows[-1][3]:5.2f}", flush=True)

    print("\nBLEU vs minutes of training (Multi30k test_2016_flickr En-De, sacreBLEU):")
    for label, minutes, sacre, _ in rows:
        print(f"{label:>14} {minutes:6.1f} min |{'#' * int(sacre)} {sacre:.2f}")
    best = max(rows, key=lambda r: r[2])
    first30 = next((r for r in rows if r[2] >= 30), None)
    print(f"best: {best[0]} at {best[1]:.1f} min, sacreBLEU {best[2]:.2f}; "
          + (f"first >= 30 at {first30[1]:.1f} min ({first30[0]})" if first30 else "never reached 30"))
    (out / "bleu_vs_minutes.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
