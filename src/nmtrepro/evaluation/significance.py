"""`nmtrepro significance`: paired bootstrap resampling (Koehn 2004) of a system against its baseline,
pooled over seeds, and the one-sided tests and bounds read off its resamples.

A difference of two trainings mixes the systems' difference with the luck of one seed, which at small
scale is as large as the effects the papers report. So a comparison may hold several seed pairs (the
system and the baseline trained with the same seed), and the test sees both sources of variance: each
resample draws the test sentences with replacement (as Koehn's test) *and* the seed pairs with
replacement (a two-level bootstrap: sentences within the test set, replicates across trainings, as
Clark et al. 2011 ask of optimizer instability), and its statistic is the mean over the drawn seed
pairs of the corpus-BLEU differences on the drawn sentences. The observed statistic is the mean of the
seed pairs' differences. With one pair the resamples are sacreBLEU's own paired bootstrap, resample for
resample (the same RNG draws and sufficient statistics; tested).

Drawing k of k seed pairs understates their variance by (k-1)/k and can never leave the range of the
k differences (with k = 3, a third of the variance and every tail are lost), so each resample's seed
deviations are inflated by sqrt(k/(k-1)) first (`inflate_seed_deviations`): the bootstrap variance of
the mean is then the unbiased s^2/k. It remains a normal-like reference: where the seed variance
dominates the sentence variance, three seeds would call for a t reference, wider still (docs/statistics.md).

Tests are one-sided (`one_sided_p`): a claim has a direction, and a p toward whichever sign happened to
be observed (sacreBLEU's |difference| rule) rejects a true null twice as often as it says. The p is
sacreBLEU's rule otherwise: how often the resampled differences, centred on their mean (the null), go
past the observed one, plus one, over resamples plus one; the bounds (`confidence_bounds`) are the ones
these p's invert. The resampled differences are kept in the JSON, so a claims page can test any
direction or margin (a "no gain" claim) without resampling again.
"""
from __future__ import annotations

import logging
import os
import secrets

import numpy as np
from sacrebleu.significance import _compute_p_value, estimate_ci

from ..core.files import InputError, read_lines, write_json
from .bleu import make_metric

log = logging.getLogger(__name__)

RESAMPLES = 10_000  # a p near 0.05 then carries ±0.002 of simulation error (one standard error), 1,000 ±0.007
DIGITS = 6          # decimals of the resampled differences kept in the JSON (every p and bound reads those)

# How each paper marks a significant improvement over its baseline: (threshold, mark), strictest first.
MARK_STYLES = {
    "dagger": ((0.01, "†"),),                     # paper A: † p < 0.01
    "arrows": ((0.01, "⇑"), (0.05, "↑")),         # paper B: ↑ / ⇑ p < 0.05 / 0.01
    "plus": ((0.01, "++"), (0.05, "+")),          # paper D: + / ++ p < 0.05 / 0.01
}


def mark(score: float, baseline: float, p_value: float, style: str) -> str:
    """The paper's mark for a significant improvement (`p_value`: one-sided, the system beats the
    baseline); none for ties, losses or p above the levels."""
    if score <= baseline:
        return ""
    for threshold, symbol in MARK_STYLES[style]:
        if p_value < threshold:
            return symbol
    return ""


def bootstrap_seed() -> int:
    """The resampling seed as sacreBLEU reads it, SACREBLEU_SEED (default 12345). Where sacreBLEU leaves
    'none' unseeded, a seed is drawn from the OS's entropy here: the result records it and can be redone."""
    value = os.environ.get("SACREBLEU_SEED", "12345")
    if value.lower() == "none":
        return secrets.randbits(32)
    try:
        return int(value)
    except ValueError:
        raise InputError(f"SACREBLEU_SEED={value!r}: want an integer seed, or 'none' for a fresh one") from None


def sentence_counts(idxs: np.ndarray, n: int) -> np.ndarray:
    """How often each resample (a row of sentence indices `idxs`) draws each of the n sentences: with it a
    resample's sufficient statistics are one matrix product, where sacreBLEU gathers a resamples x
    sentences x statistics array (400 MB at 10,000 resamples of 1,000 sentences). Counts and statistics
    are small integers, so the float32 sums are exact and equal sacreBLEU's."""
    cells = idxs + n * np.arange(len(idxs))[:, None]          # (resample, sentence) as one index
    return np.bincount(cells.ravel(), minlength=idxs.size).reshape(idxs.shape).astype("float32")


def inflate_seed_deviations(deltas: np.ndarray) -> np.ndarray:
    """Each seed pair's difference on each sentence resample (`deltas`: [k, samples]) with its deviation
    from that resample's mean over the k pairs scaled by sqrt(k/(k-1)), so that drawing k of them with
    replacement has the unbiased variance s^2/k of their mean rather than (k-1)/k of it (module
    docstring). One pair: unchanged."""
    k = len(deltas)
    if k == 1:
        return deltas
    centre = deltas.mean(0)
    return centre + np.sqrt(k / (k - 1)) * (deltas - centre)


def pool(values: np.ndarray, drawn: np.ndarray) -> np.ndarray:
    """Each resample's mean over the seed pairs it drew: `values` [k, samples], `drawn` [samples, k]."""
    return values[drawn, np.arange(len(drawn))[:, None]].mean(1)


def one_sided_p(resampled: np.ndarray, observed: float, direction: int, margin: float = 0.0) -> float:
    """The p of the one-sided alternative direction * (difference - margin) > 0 (direction +1: the system
    beats the baseline by more than `margin`; -1: it falls short of `margin`, e.g. no gain): how often the
    resampled differences, centred on their mean (the null), go further that way than the observed one
    goes past the margin; sacreBLEU's +1 over resamples +1. Resamples that never vary (identical systems,
    or two at BLEU 0 throughout) and do not go that way show nothing: p = 1, not the rule's floor 1/(n+1)."""
    if np.ptp(resampled) == 0 and direction * (observed - margin) <= 0:
        return 1.0
    null = direction * (resampled - resampled.mean())
    return float(_compute_p_value(null, direction * (observed - margin)))


def confidence_bounds(resampled: np.ndarray, observed: float, confidence: float) -> tuple[float, float]:
    """The two-sided `confidence` interval of the difference that the one-sided p's invert (the observed
    difference less the centred resamples' upper and lower quantiles): each bound is a one-sided test
    at (1 - confidence) / 2, e.g. the bounds of a 90% interval are one-sided 5% tests."""
    tail = (1 - confidence) / 2
    upper, lower = np.quantile(resampled - resampled.mean(), [1 - tail, tail])
    return float(observed - upper), float(observed - lower)


def pooled_bootstrap(pairs: list[tuple[list[str], list[str]]], refs: list[list[str]], metric_name: str,
                     samples: int = RESAMPLES, seeds: list[int] | None = None) -> dict:
    """The seed-pooled paired bootstrap of `pairs` (system hypotheses, baseline hypotheses), one pair a
    seed, against the reference streams `refs` (one list of lines a reference).

    Returns the mean system and baseline scores over the pairs and their difference, the one-sided p's of
    the system beating and of it trailing the baseline, the 95% CIs of the system's score and of the
    difference, the resampled differences themselves (for tests at other margins), and each pair's own
    scores."""
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
    seed = bootstrap_seed()
    rng = np.random.default_rng(seed)
    counts = sentence_counts(rng.choice(n, size=(samples, n), replace=True), n)  # sacreBLEU's draw
    drawn = rng.choice(len(pairs), size=(samples, len(pairs)), replace=True) if len(pairs) > 1 else \
        np.zeros((samples, 1), dtype=int)                    # seed pairs drawn per resample
    observed, resampled = [], []                              # per pair: (system, baseline) scores
    for hyps, base in pairs:
        stats = [np.array(metric._extract_corpus_statistics(h, refs), dtype="float32") for h in (hyps, base)]
        observed.append([metric._compute_score_from_stats(s.sum(0)).score for s in stats])
        resampled.append([[metric._compute_score_from_stats(row).score for row in counts @ s] for s in stats])
    observed, resampled = np.array(observed), np.array(resampled)      # [k, 2], [k, 2, samples]
    sys_scores, base_scores = pool(resampled[:, 0], drawn), pool(resampled[:, 1], drawn)
    diffs = np.round(pool(inflate_seed_deviations(resampled[:, 0] - resampled[:, 1]), drawn), DIGITS)
    score, baseline = observed.mean(0)
    mean, ci = estimate_ci(sys_scores)
    base_mean, base_ci = estimate_ci(base_scores)
    low, high = confidence_bounds(diffs, score - baseline, 0.95)
    signature = metric.get_signature()
    signature.update("bs", samples)
    signature.update("seed", seed)
    return {
        "score": float(score), "baseline": float(baseline), "delta": float(score - baseline),
        "p_greater": one_sided_p(diffs, score - baseline, +1),   # one-sided: the system beats the baseline
        "p_less": one_sided_p(diffs, score - baseline, -1),      # one-sided: the system trails it
        "mean": float(mean), "ci": float(ci),                   # 95% CI of the system's score: mean ± ci
        "ci_low": float(mean - ci), "ci_high": float(mean + ci),
        "baseline_mean": float(base_mean), "baseline_ci": float(base_ci),
        "delta_low": low, "delta_high": high,                    # 95% CI of the difference
        "samples": samples, "bootstrap_seed": seed,
        "seeds": [{"seed": label, "score": float(s), "baseline": float(b), "delta": float(s - b)}
                  for label, (s, b) in zip(seeds, observed)],
        "resampled_deltas": diffs.tolist(),
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
    parser.add_argument("--samples", type=int, default=RESAMPLES, help="bootstrap resamples (seed: SACREBLEU_SEED)")
    parser.add_argument("--out", required=True,
                        help="JSON: per metric score, baseline, one-sided p's, 95%% CI, seeds, resampled differences")


def run_significance(args) -> None:
    if not (len(args.hyp) == len(args.hyp_tok) == len(args.base_hyp) == len(args.base_hyp_tok)):
        raise InputError("--hyp, --hyp-tok, --base-hyp and --base-hyp-tok need one file a seed each")
    systems = [{"hyp": h, "hyp_tok": t} for h, t in zip(args.hyp, args.hyp_tok)]
    baselines = [{"hyp": h, "hyp_tok": t} for h, t in zip(args.base_hyp, args.base_hyp_tok)]
    result = compare(systems, baselines, args.ref, args.ref_tok, args.samples, args.seed or None)
    write_json(args.out, result)
    for metric, entry in result.items():
        log.info("%s: %.2f vs baseline %.2f over %d seed pair(s), one-sided p = %.4f (better) / %.4f (worse), "
                 "95%% CI of the difference %+.2f to %+.2f (%d resamples, seed %d)", metric, entry["score"],
                 entry["baseline"], len(entry["seeds"]), entry["p_greater"], entry["p_less"], entry["delta_low"],
                 entry["delta_high"], entry["samples"], entry["bootstrap_seed"])
