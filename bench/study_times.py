"""Where a workflow run's time went: each training's updates, seconds and target tokens/s (from its
curve.tsv), and each experiment's test BLEU, read from results/ after any run at any scale.

    python bench/study_times.py                    # results/ of the checkout
    python bench/study_times.py --results path/to/results
"""
from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def trainings(results: Path) -> list[dict]:
    """One row per training that ran here (a shared training's link is skipped)."""
    rows = []
    for curve in sorted(results.glob("train/*/curve.tsv")):
        if curve.is_symlink():
            continue
        with open(curve, encoding="utf-8") as f:
            lines = list(csv.DictReader(f, delimiter="\t"))
        if not lines:
            continue
        last = lines[-1]
        speeds = [float(line["tgt_tok_s"]) for line in lines if line.get("tgt_tok_s")]
        rows.append({"training": curve.parent.name, "updates": int(last["step"]), "seconds": float(last["wall_s"]),
                     "tgt_tok_s": sum(speeds) / len(speeds) if speeds else float("nan"),
                     "valid_nll": float(last["valid_nll"]) if last.get("valid_nll") else float("nan")})
    return rows


def scores(results: Path) -> dict[str, float]:
    return {path.parent.name: json.loads(path.read_text())["tok_bleu"]["score"]
            for path in sorted(results.glob("evaluate/*/*.bleu.json"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=Path("results"))
    args = parser.parse_args()
    rows = trainings(args.results)
    print(f"{'training':36} {'updates':>7} {'seconds':>8} {'tgt tok/s':>10} {'valid nll':>9}")
    for row in rows:
        print(f"{row['training']:36} {row['updates']:7d} {row['seconds']:8.0f} {row['tgt_tok_s']:10.0f} {row['valid_nll']:9.3f}")
    print(f"{len(rows)} trainings, {sum(row['seconds'] for row in rows):.0f} training-seconds in all")
    print("test BLEU (tokenized): " + ", ".join(f"{name} {score:.2f}" for name, score in scores(args.results).items()))


if __name__ == "__main__":
    main()
