"""Where a workflow run's time went: each training's updates, seconds and target tokens/s (from its
curve.tsv), and each experiment's test BLEU, read from results/<scale>/ after a run at that scale.

    python device/study_times.py                    # results/tiny/ of the checkout
    python device/study_times.py --results path/to/results
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from nmtrepro.study.config import seed_replica
from nmtrepro.reporting.report import read_curve


def trainings(results: Path) -> list[dict]:
    """One row per training that ran here (a shared training's link is skipped)."""
    rows = []
    for path in sorted(results.glob("train/*/curve.tsv")):
        if path.is_symlink():
            continue
        curve = read_curve(path)
        if curve.empty:
            continue
        valid = curve["valid_nll"].dropna()
        rows.append({"training": path.parent.name, "updates": int(curve["step"].iloc[-1]),
                     "seconds": float(curve["wall_s"].iloc[-1]), "tgt_tok_s": float(curve["tgt_tok_s"].mean()),
                     "valid_nll": float(valid.iloc[-1]) if len(valid) else float("nan")})
    return rows


def scores(results: Path) -> dict[str, float]:
    """Each system's tokenized test BLEU: from its score file, else (a seed-pooled run scores no system
    alone) from the per-seed rows of the significance tests it took part in."""
    found = {path.parent.name: json.loads(path.read_text())["tok_bleu"]["score"]
             for path in sorted(results.glob("evaluate/*/*.bleu.json"))}
    for path in sorted(results.glob("analyse/significance/*.vs.*.json")):
        system, baseline = path.stem.split(".vs.")
        for i, row in enumerate(json.loads(path.read_text())["tok_bleu"].get("seeds", [])):  # in seed order
            found.setdefault(seed_replica(system, i, row["seed"]), row["score"])
            found.setdefault(seed_replica(baseline, i, row["seed"]), row["baseline"])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=Path("results/tiny"))
    args = parser.parse_args()
    rows = trainings(args.results)
    print(f"{'training':36} {'updates':>7} {'seconds':>8} {'tgt tok/s':>10} {'valid nll':>9}")
    for row in rows:
        print(f"{row['training']:36} {row['updates']:7d} {row['seconds']:8.0f} {row['tgt_tok_s']:10.0f} {row['valid_nll']:9.3f}")
    print(f"{len(rows)} trainings, {sum(row['seconds'] for row in rows):.0f} training-seconds in all")
    print("test BLEU (tokenized): " + ", ".join(f"{name} {score:.2f}" for name, score in scores(args.results).items()))


if __name__ == "__main__":
    main()
