"""`nmtrepro significance`: paired bootstrap resampling (Koehn 2004) of a system against its baseline,
pooled over seeds.

A difference of two trainings mixes the systems' difference with the luck of one seed, which at small
scale is as large as the effects the papers report. So a comparison may hold several seed pairs (the
system and the baseline trained with the same seed), and the test sees both sources of variance: each
resample draws the test sentences with replacement (as Koehn's test) *and* the seed pairs with
replacement (a two-level bootstrap: sentences within the test set, replicates across trainings, as
Clark et al. 2011 ask of optimizer instability), and its statistic is the mean over the drawn seed
pairs of the corpus-BLEU differences on the drawn sentences. The observed statistic is the mean of the
seed pairs' differences. With one pair it is sacreBLEU's own paired bootstrap, resample for resample
(the same RNG draws, its sufficient statistics, its centred two-sided p-value and its 95% CI; tested).

The p-value is sacreBLEU's: how often the resampled |difference|, centred on its mean, exceeds the
observed |difference|, plus one, over resamples plus one. Identical systems (or two untrained ones at
BLEU 0 on every resample) would get its floor 1/(n+1), i.e. "significant"; we report p = 1.
"""
from __future__ import annotations

import logging
import os

import numpy as np
from sacrebleu.significance import _compute_p_value, estimate_ci

from ..core.files import InputError, read_lines, write_json
from .bleu import make_metric

log = logging.getLogger(__name__)

# How each paper marks a significant improvement over its baseline: (threshold, mark), strictest first.
MARK_STYLES = {
    "dagger": ((0.01, "†"),),                     # paper A: † p < 0.01
    "arrows": ((0.01, "⇑"), (0.05, "↑")),         # paper B: ↑ / ⇑ p < 0.05 / 0.01
    "plus": ((0.01, "++"), (0.05, "+")),          # paper D: + / ++ p < 0.05 / 0.01
}


def mark(score: float, baseline: float, p_value: float, style: str) -> str:
    """The paper's mark for a significant improvement; none for ties, losses or p above the levels."""
    if score <= baseline:
        return ""
    for threshold, symbol in MARK_STYLES[style]:
        if p_value < threshold:
            return symbol
    return ""


def bootstrap_seed() -> int:
    """sacreBLEU's resampling seed: SACREBLEU_SEED, default 12345 (recorded in the signature)."""
    return int(os.environ.get("SACREBLEU_SEED", "12345"))


def pooled_bootstrap(pairs: list[tuple[list[str], list[str]]], refs: list[list[str]], metric_name: str,
                     samples: int = 1000, seeds: list[int] | None = None) -> dict:
    """The seed-pooled paired bootstrap of `pairs` (system hypotheses, baseline hypotheses), one pair a
    seed, against the reference streams `refs` (one list of lines a reference).

    Returns the mean system and baseline scores over the pairs, the p-value, the 95% CIs of the
    system's score and of the difference over the resamples, and each pair's own scores."""
    n = len(refs[0]) if refs else 0
    if not pairs or not n or any(len(r) != n for r in refs) or any(
            len(hyps) != n or len(base) != n for hyps, base in pairs):
        sizes = [(len(hyps), len(base)) for hyps, base in pairs]
        raise InputError(f"paired bootstrap needs equally long non-empty inputs, got (system, baseline) lines "
                         f"{sizes} and {[len(r) for r in refs]} reference lines")
    seeds = seeds or list(range(1, len(pairs) + 1))
    if len(seeds) != len(pairs):
        raise InputError(f"{len(seeds)} seeds named for {len(pairs)} seed pairs")
    metric = make_metric(metric_name)
    rng = np.random.default_rng(bootstrap_seed())
    idxs = rng.choice(n, size=(samples, n), replace=True)   # sacreBLEU's draw: [samples, n]
    drawn = rng.choice(len(pairs), size=(samples, len(pairs)), replace=True) if len(pairs) > 1 else \
        np.zeros((samples, 1), dtype=int)                    # seed pairs drawn per resample
    observed, resampled = [], []                              # per pair: (system, baseline) scores
    for hyps, base in pairs:
        stats = [np.array(metric._extract_corpus_statistics(h, refs), dtype="float32") for h in (hyps, base)]
        observed.append([metric._compute_score_from_stats(s.sum(0)).score for s in stats])
        resampled.append([[metric._compute_score_from_stats(row).score for row in s[idxs].sum(1)] for s in stats])
    observed, resampled = np.array(observed), np.array(resampled)      # [k, 2], [k, 2, samples]
    picked = resampled[drawn, :, np.arange(samples)[:, None]]         # [samples, k drawn, 2]
    sys_scores, base_scores = picked[..., 0].mean(1), picked[..., 1].mean(1)
    score, baseline = observed[:, 0].mean(), observed[:, 1].mean()
    diffs = sys_scores - base_scores
    sample_diffs = np.abs(diffs)
    p_value = 1.0 if np.array_equal(observed[:, 0], observed[:, 1]) else \
        _compute_p_value(sample_diffs - sample_diffs.mean(), abs(score - baseline))
    mean, ci = estimate_ci(sys_scores)
    base_mean, base_ci = estimate_ci(base_scores)
    low, high = np.sort(diffs)[[samples // 40, samples - samples // 40 - 1]]
    signature = metric.get_signature()
    signature.update("bs", samples)
    signature.update("seed", bootstrap_seed())
    return {
        "score": float(score), "baseline": float(baseline), "p_value": float(p_value),
        "mean": float(mean), "ci": float(ci),                   # 95% CI of the system's score: mean ± ci
        "ci_low": float(mean - ci), "ci_high": float(mean + ci),
        "baseline_mean": float(base_mean), "baseline_ci": float(base_ci),
        "delta_low": float(low), "delta_high": float(high),      # 95% CI of the difference
        "seeds": [{"seed": seed, "score": float(s), "baseline": float(b), "delta": float(s - b)}
                  for seed, (s, b) in zip(seeds, observed)],
        "signature": f"{signature}|seed_pairs:{len(pairs)}",
    }


def compare(systems: list[dict[str, str]], baselines: list[dict[str, str]], refs: list[str],
            refs_tok: list[str], samples: int, seeds: list[int] | None = None) -> dict:
    """Both BLEUs, pooled over the seed pairs (systems[i], baselines[i]): sacreBLEU on the detokenized
    `hyp` files against `refs`, tokenized BLEU on the Moses-tokenized `hyp_tok` files against `refs_tok`."""
    if len(systems) != len(baselines):
        raise InputError(f"{len(systems)} system hypotheses but {len(baselines)} baseline ones: one pair a seed")
    streams = {"sacrebleu": [read_lines(r) for r in refs], "tok_bleu": [read_lines(r) for r in refs_tok]}
    files = {"sacrebleu": "hyp", "tok_bleu": "hyp_tok"}
    return {metric: pooled_bootstrap([(read_lines(s[kind]), read_lines(b[kind])) for s, b in zip(systems, baselines)],
                                     streams[metric], metric, samples, seeds)
            for metric, kind in files.items()}


def add_arguments_significance(parser) -> None:
    parser.add_argument("--hyp", action="append", required=True, help="system: detokenized hypothesis (one a seed)")
    parser.add_argument("--hyp-tok", action="append", required=True, help="system: Moses-tokenized hypothesis (one a seed)")
    parser.add_argument("--base-hyp", action="append", required=True,
                        help="baseline: detokenized hypothesis of the same seed, in the order of --hyp")
    parser.add_argument("--base-hyp-tok", action="append", required=True,
                        help="baseline: Moses-tokenized hypothesis, in the order of --hyp")
    parser.add_argument("--seed", action="append", type=int, default=[], help="each pair's seed, in order (labels)")
    parser.add_argument("--ref", action="append", required=True, help="raw reference (repeat: several references)")
    parser.add_argument("--ref-tok", action="append", required=True, help="Moses-tokenized reference (repeat)")
    parser.add_argument("--samples", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--out", required=True, help="JSON: per metric score, baseline, p_value, 95%% CI, seeds")


def run_significance(args) -> None:
    if not (len(args.hyp) == len(args.hyp_tok) == len(args.base_hyp) == len(args.base_hyp_tok)):
        raise InputError("--hyp, --hyp-tok, --base-hyp and --base-hyp-tok need one file a seed each")
    systems = [{"hyp": h, "hyp_tok": t} for h, t in zip(args.hyp, args.hyp_tok)]
    baselines = [{"hyp": h, "hyp_tok": t} for h, t in zip(args.base_hyp, args.base_hyp_tok)]
    result = compare(systems, baselines, args.ref, args.ref_tok, args.samples, args.seed or None)
    write_json(args.out, result)
    for metric, entry in result.items():
        log.info("%s: %.2f vs baseline %.2f over %d seed pair(s), p = %.4f, 95%% CI of the difference %+.2f to %+.2f",
                 metric, entry["score"], entry["baseline"], len(entry["seeds"]), entry["p_value"],
                 entry["delta_low"], entry["delta_high"])
