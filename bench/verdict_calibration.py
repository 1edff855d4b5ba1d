"""How often a claim's verdict is wrong: the false-positive rate and power of the seed-pooled test under
several mixes of noise, the current rule beside the one before 2026-11-28, in one run.

Each setting simulates comparisons of k seed pairs (`nmtrepro.evaluation.calibration`: BLEU-like
sentences with a known true difference, test-set noise that all pairs share, each pair's own and seed
offsets) and runs the project's own test on their sentence statistics (`significance.statistics_test`)
beside the old rule (seed pairs resampled with the sentences, their deviations inflated by sqrt(k/(k-1)),
the count rule's p), written out here since the package no longer holds it.

    python bench/verdict_calibration.py                 # 1,000 comparisons a setting, ~10 min on 2 cores
    python bench/verdict_calibration.py --runs 200      # a quick look

Each rate is printed with its binomial standard error; "var ratio" is the mean estimated variance of the
mean difference over its empirical variance across the runs (1 is calibrated).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
os.environ.setdefault("SACREBLEU_SEED", "12345")

from nmtrepro.evaluation.bleu import make_metric  # noqa: E402
from nmtrepro.evaluation.calibration import Mix, corpus, sentence_stats, slope  # noqa: E402
from nmtrepro.evaluation.significance import bleu_from_statistics, sentence_counts, statistics_test  # noqa: E402

ALPHA = 0.05
MIXES = [
    Mix("realistic: test set + seed offsets N(0, 0.5)"),
    Mix("no seed variation", seed_sd=0.0),
    Mix("heavy per-pair test-set noise", own_sd=1.0, seed_sd=0.0),
    Mix("seed noise only", shared=0.0, own=0.0),
    Mix("one seed (k = 1), seed SD 0.5", k=1),
    Mix("power: realistic, true +0.5", effect=0.5),
    Mix("power: realistic, true +1.0", effect=1.0),
]


def old_p(stats: np.ndarray, metric, samples: int, rng) -> tuple[float, float]:
    """The rule before 2026-11-28: sentences and seed pairs resampled, the pairs' deviations from each
    resample's mean inflated by sqrt(k/(k-1)); the count rule's one-sided p of 'beats'; the variance of
    the resampled mean differences."""
    k, n = stats.shape[0], stats.shape[2]
    counts = sentence_counts(rng.choice(n, size=(samples, n)), n)
    resampled = bleu_from_statistics(np.matmul(counts, stats), metric)               # [k, 2, B]
    deltas = resampled[:, 0] - resampled[:, 1]
    if k > 1:
        centre = deltas.mean(0)
        deltas = centre + math.sqrt(k / (k - 1)) * (deltas - centre)
        deltas = deltas[rng.integers(0, k, (samples, k)).T, np.arange(samples)].mean(0)
    else:
        deltas = deltas[0]
    observed = bleu_from_statistics(stats.sum(2), metric)
    observed = float((observed[:, 0] - observed[:, 1]).mean())
    null = deltas - deltas.mean()
    return (np.sum(null >= observed) + 1) / (samples + 1), float(deltas.var())


def run(mix: Mix, runs: int, n: int, samples: int, seed: int) -> dict:
    rng, metric = np.random.default_rng(seed), make_metric("tok_bleu")
    lengths, difficulty = corpus(rng, n)
    per_logit = slope(lengths, difficulty, metric)
    means, rejected, var = [], {"new": 0, "old": 0}, {"new": [], "old": []}
    for _ in range(runs):
        stats = sentence_stats(rng, mix, lengths, difficulty, per_logit)
        new = statistics_test(stats, metric, samples)
        old, old_var = old_p(stats, metric, samples, rng)
        means.append(new["delta"])
        rejected["new"] += new["p_greater"] < ALPHA
        rejected["old"] += old < ALPHA
        var["new"].append(new["var"])
        var["old"].append(old_var)
    spread = float(np.var(means, ddof=1))
    return {rule: {"rate": rejected[rule] / runs, "var_ratio": float(np.mean(var[rule])) / spread}
            for rule in ("old", "new")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=1000, help="comparisons a setting")
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=1000, help="sentence resamples a comparison")
    ap.add_argument("--seed", type=int, default=2026)
    args = ap.parse_args()
    print(f"{args.runs} comparisons a setting, {args.sentences} sentences, {args.samples} resamples, "
          f"one-sided alpha {ALPHA} (rate of p < alpha toward 'beats')")
    print(f"{'mix':<46} {'k':>2} {'old rate':>15} {'new rate':>15} {'old var ratio':>14} {'new var ratio':>14}")
    for i, mix in enumerate(MIXES):
        start = time.perf_counter()
        result = run(mix, args.runs, args.sentences, args.samples, args.seed + i)
        cells = [f"{100 * r['rate']:5.1f} ± {100 * math.sqrt(r['rate'] * (1 - r['rate']) / args.runs):3.1f} %"
                 for r in (result["old"], result["new"])]
        print(f"{mix.name:<46} {mix.k:>2} {cells[0]:>15} {cells[1]:>15} {result['old']['var_ratio']:>14.2f} "
              f"{result['new']['var_ratio']:>14.2f}   ({time.perf_counter() - start:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
