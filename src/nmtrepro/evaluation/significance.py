"""`nmtrepro significance`: a system against its baseline over the seed pairs both trained, with a
test whose error rate holds whatever mixes the noise, and the papers' significance marks.

A difference of two trainings mixes the systems' difference with the luck of each seed, which at small
scale is as large as the effects the papers report, and with the luck of the test set. Over k seed pairs
(system and baseline trained with the same seed) on one test set, each pair's difference is
d_i = Δ + c + u_i + e_i: c the test set's sampling error that every pair shares (which sentences happen
to favour which system), u_i the seed pair's own offset, e_i the test set's sampling error of that pair
alone. The mean difference has variance σc² + (σu² + σe²)/k. Two estimates make it up
(`mean_difference`):
- the spread of the k full-test-set differences, s²/k, which holds (σu² + σe²)/k and no c (it cancels);
- the shared part σc², from a paired bootstrap of the sentences (Koehn 2004), the same resamples for
  every pair: the variance of the pairs' mean difference over the resamples is σc² + σe²/k, the pairs'
  own variances average σc² + σe², and the two give σc² = (k V_mean − V_each) / (k − 1).
The mean over (s²/k + σc²)^½ is compared against the fiducial mixture of the two (`Reference`: s² on
k − 1 degrees of freedom, the bootstrap's σc² taken as known): where the seeds dominate it is Student's t
on k − 1, as wide as three seeds leave it, where the test set dominates the normal. Resampling the seeds
as well, as this test did before, counts each pair's own sentence noise twice and keeps a normal tail
with two degrees of freedom (docs/statistics.md: bench/verdict_calibration.py measures both). With one
seed pair the seed variance is unmeasured: the test is the paired bootstrap's, and a page says so (Clark
et al. 2011).

Tests are one-sided (`MeanDifference.p`): a claim has a direction, and a p toward whichever sign happened
to be observed (sacreBLEU's |difference| rule) rejects a true null twice as often as it says. The
intervals (`MeanDifference.bounds`) are the ones these p's invert, one rule for both. The JSON keeps the
estimate's parts, so a claims page tests any direction or margin without resampling again.

Every metric of evaluation/metrics is tested so, each resample's score its corpus score of the summed
sentence statistics that `nmtrepro bleu` kept for each output; its entry is in the metric's own units and
sign (TER: lower is better, a system that beats its baseline has Δ < 0 and a small p_less).
"""
from __future__ import annotations

import functools
import logging
import os
import secrets
from dataclasses import dataclass

import numpy as np
from sacrebleu.significance import estimate_ci
from scipy import special

from ..core.files import InputError, read_lines, write_json
from ..core.text import strip_bpe
from .metrics import METRICS, Metric, read_statistics

log = logging.getLogger(__name__)

RESAMPLES = 10_000  # the shared variance then carries ±1.4% of simulation error (one standard error), 1,000 ±4.5%

# How each paper marks a significant improvement over its baseline: (threshold, mark), strictest first.
MARK_STYLES = {
    "dagger": ((0.01, "†"),),                     # paper A: † p < 0.01
    "arrows": ((0.01, "⇑"), (0.05, "↑")),         # paper B: ↑ / ⇑ p < 0.05 / 0.01
    "plus": ((0.01, "++"), (0.05, "+")),          # paper D: + / ++ p < 0.05 / 0.01
}


def mark_confidence(style: str) -> float:
    """The two-sided interval whose bounds are one-sided tests at the style's loosest mark: 90% beside
    marks at p < 0.05, 98% beside paper A's † at p < 0.01. Its lower bound is above zero exactly where
    the row earns a mark."""
    return 1 - 2 * max(threshold for threshold, _ in MARK_STYLES[style])


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


NODES = 256  # Gauss-Legendre nodes of the fiducial mixture's integral over W: its p within ~1e-7 (quad)
LINEAR_FROM = 0.045  # p's from here up are the linear rule's (its 0.05 is ~exact); below, the mixture's bound


@functools.lru_cache(maxsize=64)
def _chi2_nodes(df: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes W of χ²_df and their weights for E_W[f(W)]: Gauss-Legendre in t on (0, 1), the quantile at
    u = t³ (nodes packed where W is small, the far tail's part)."""
    t, w = np.polynomial.legendre.leggauss(NODES)
    t, w = (t + 1) / 2, w / 2
    return special.chdtri(df, 1 - t ** 3), w * 3 * t ** 2


def mixture_sf(x: float, df: float, share: float) -> float:
    """Fiducial tail of a difference over √v, v = e + b, e (`share` of v) estimated on `df` degrees of
    freedom and b known: E_W[Φ̄(x / √(share · df / W + 1 − share))], W ~ χ²_df. The spread's uncertainty is
    integrated rather than plugged in (Fisher's, as Behrens-Fisher's for two spreads): it never exceeds its
    level, and is conservative where both parts count (docs/statistics.md)."""
    w, weights = _chi2_nodes(float(df))
    return float(special.ndtr(-x / np.sqrt(share * df / w + 1 - share)) @ weights)


@dataclass(frozen=True)
class Reference:
    """A test's upper tail for a difference over the square root of its estimated variance v = e + b: e
    estimated on `df` degrees of freedom (a seed spread s²/k), b taken as known (the bootstrap's test-set
    part), `share` = e / v. With share 1 it is Student's t on df, with no df (or share 0) the normal. In
    between no test is exact at every share (the Behrens-Fisher problem), and two fail apart: the linear
    rule, a t on df / share degrees of freedom, is within its errors of the level at 0.05 but puts a spread
    that fell small by chance on many degrees of freedom, 3-5 times the level at 0.001 at df 2 (Holm's
    levels on a page); the fiducial mixture (`mixture_sf`) holds every level but is conservative, 0.6 times
    it at 0.05 where both parts count. So a p is the linear rule's where it is at least `LINEAR_FROM`, and
    below it at least the mixture's: max(linear, min(mixture, LINEAR_FROM)), a valid p whose 0.05 is the
    linear rule's and whose smaller levels hold (docs/statistics.md, "The reference's far tail"). Its tails
    are scipy.special's, without scipy.stats' import (~1 s, which every significance, table and claims job
    paid)."""
    df: float | None = None
    share: float = 1.0

    @property
    def _mixed(self) -> bool:
        return self.df is not None and 0 < self.share < 1

    def sf(self, x: float) -> float:
        if not self._mixed:
            return float(special.ndtr(-x) if self.df is None or self.share <= 0 else special.stdtr(self.df, -x))
        linear = float(special.stdtr(self.df / self.share, -x))
        return max(linear, min(mixture_sf(x, self.df, self.share), LINEAR_FROM))

    def ppf(self, q: float) -> float:
        if not self._mixed:
            return float(special.ndtri(q) if self.df is None or self.share <= 0 else special.stdtrit(self.df, q))
        return self.isf(1 - q)

    def isf(self, q: float) -> float:
        """The x whose tail `sf` is q: the linear rule's from LINEAR_FROM up, below it the larger of its and
        the mixture's (found by bisection; the mixture's scale factor is below df / W + 1, so its quantile
        lies within twice t's and the normal's together)."""
        if not self._mixed:
            return -self.ppf(q)
        linear = -float(special.stdtrit(self.df / self.share, q))
        if q >= LINEAR_FROM:
            return linear
        low, high = 0.0, 2 * (abs(float(special.stdtrit(self.df, q))) + abs(float(special.ndtri(q)))) + 1
        for _ in range(60):
            middle = (low + high) / 2
            low, high = (middle, high) if mixture_sf(middle, self.df, self.share) > q else (low, middle)
        return max(linear, (low + high) / 2)


@dataclass(frozen=True)
class MeanDifference:
    """The mean difference over the seed pairs and its estimated variance, tested against the `Reference` of
    its estimated part's `df` degrees of freedom (None: normal) and `share` of `var` (module docstring)."""
    delta: float
    var: float
    df: float | None
    share: float = 1.0

    @classmethod
    def of(cls, entry: dict) -> "MeanDifference":
        """From a significance JSON's entry (`pooled_bootstrap`)."""
        return cls(entry["delta"], entry["var"], entry["df"], entry.get("estimated_share", 1.0))

    @property
    def reference(self) -> Reference:
        return Reference(self.df, self.share)

    def p(self, direction: int, margin: float = 0.0) -> float:
        """The one-sided p of direction * (Δ - margin) > 0 (+1: the system beats the baseline by more than
        `margin`; -1: it falls short of the margin, e.g. no gain). A difference that does not vary (identical
        outputs) shows nothing that way unless it already lies there."""
        gap = direction * (self.delta - margin)
        if self.var <= 0:
            return 0.0 if gap > 0 else 1.0
        return self.reference.sf(gap / np.sqrt(self.var))

    def bounds(self, confidence: float) -> tuple[float, float]:
        """The two-sided `confidence` interval that the one-sided p's invert: each bound is a one-sided test
        at (1 - confidence) / 2 (the bounds of a 90% interval are one-sided 5% tests)."""
        half = self.reference.ppf(1 - (1 - confidence) / 2) * np.sqrt(max(self.var, 0.0))
        return float(self.delta - half), float(self.delta + half)


def mean_difference(deltas: np.ndarray, resampled: np.ndarray) -> tuple[MeanDifference, dict]:
    """The test of the mean of k seed pairs' differences (`deltas` [k], on the whole test set) from the
    same pairs' differences on shared sentence resamples (`resampled` [k, samples]); with it, the parts of
    its variance: the seeds' s^2/k and the test set's shared part (module docstring)."""
    k = len(deltas)
    mean_var = float(resampled.mean(0).var(ddof=1))          # sigma_c^2 + sigma_e^2 / k
    each_var = float(resampled.var(1, ddof=1).mean())       # sigma_c^2 + sigma_e^2
    # the bootstrap's two variances, which a claims page pools seed noise with (evaluation/seed_noise.py)
    bootstrap = {"var_bootstrap_mean": mean_var, "var_bootstrap_each": each_var}
    if k == 1:                                              # the seed variance is unmeasured
        return MeanDifference(float(deltas[0]), mean_var, None), {"var_seeds": None, "var_shared": mean_var, **bootstrap}
    shared = max(0.0, (k * mean_var - each_var) / (k - 1))
    seeds = float(np.var(deltas, ddof=1)) / k               # (sigma_u^2 + sigma_e^2) / k
    var = seeds + shared
    test = MeanDifference(float(np.mean(deltas)), var, None if seeds == 0 else k - 1, seeds / var if var else 1.0)
    return test, {"var_seeds": seeds, "var_shared": shared, **bootstrap}


def side_parts(observed: np.ndarray, resampled: np.ndarray) -> dict:
    """One side's (the system's or the baseline's) seed spread and its own test-set part, from its k >= 2
    seeds' scores on the whole test set (`observed` [k]) and on the shared resamples (`resampled` [k, B]):
    the spread s² of its seeds' scores holds its seed variance and its seeds' own test-set noise, which the
    resamples give as a difference's (`mean_difference`). A claims page pools them per model family
    (evaluation/seed_noise.py) for the claims whose recipe no comparison measures."""
    k = len(observed)
    mean_var, each_var = float(resampled.mean(0).var(ddof=1)), float(resampled.var(1, ddof=1).mean())
    return {"spread": float(np.var(observed, ddof=1)), "test_own": max(0.0, (each_var - mean_var) * k / (k - 1))}


def recipe_of(families: str) -> dict:
    """The entry's recipe keys from `--recipe SYSTEM/BASELINE` (the two model families, system first):
    `recipe`, the two sorted (the kind of comparison, whichever side is the system), and `families` in order
    (whose the sides' seed spreads are)."""
    if not families:
        return {"recipe": ""}
    parts = families.split("/")
    if len(parts) != 2 or not all(parts):
        raise InputError(f"--recipe {families!r}: expected the system's and the baseline's model families, "
                         f"'SYSTEM/BASELINE' (e.g. 'phrase/transformer')")
    return {"recipe": "/".join(sorted(parts)), "families": parts}


def pooled_bootstrap(pairs: list[tuple[list[str], list[str]]], refs: list[list[str]], metric: Metric,
                     samples: int = RESAMPLES, seeds: list[int] | None = None) -> dict:
    """The test of `pairs` (system hypotheses, baseline hypotheses), one pair a seed, against the
    reference streams `refs` (one list of lines a reference) in `metric`: the sentences' statistics, then
    `statistics_test`."""
    n = len(refs[0]) if refs else 0
    if not pairs or not n or any(len(r) != n for r in refs) or any(
            len(hyps) != n or len(base) != n for hyps, base in pairs):
        sizes = [(len(hyps), len(base)) for hyps, base in pairs]
        raise InputError(f"paired bootstrap needs equally long non-empty inputs, got (system, baseline) lines "
                         f"{sizes} and {[len(r) for r in refs]} reference lines")
    seeds = seeds or list(range(1, len(pairs) + 1))
    if len(seeds) != len(pairs):
        raise InputError(f"{len(seeds)} seeds named for {len(pairs)} seed pairs")
    sentence_stats = np.array([[metric.statistics(h, refs) for h in pair] for pair in pairs],
                              dtype="float32")                                  # [k, 2, n, S]
    result = statistics_test(sentence_stats, metric, samples, seeds)
    return {**result, "signature": bootstrap_signature(metric.signature, result)}


def bootstrap_signature(signature: str, result: dict) -> str:
    """The metric's sacreBLEU signature with the test's resamples, their seed and the seed pairs."""
    return f"{signature}|bs:{result['samples']}|seed:{result['bootstrap_seed']}|seed_pairs:{len(result['seeds'])}"


def statistics_test(sentence_stats: np.ndarray, metric: Metric, samples: int = RESAMPLES,
                    seeds: list[int] | None = None) -> dict:
    """The test from each seed pair's system and baseline sentence statistics in `metric` ([k, 2, n, S]): the
    mean system and baseline scores and their difference, the one-sided p's of the system beating and
    of it trailing the baseline (in the metric's units and sign: for TER, lower is better, p_less is
    the p of the system beating its baseline), the 95% CIs of the system's score and of the difference,
    the parts of the difference's variance, each pair's own scores and, with several seeds, each side's
    own seed spread (`side_parts`). The sentence resamples are sacreBLEU's draws (`SACREBLEU_SEED`),
    shared by every pair."""
    k, n = sentence_stats.shape[0], sentence_stats.shape[2]
    seeds = seeds or list(range(1, k + 1))
    seed = bootstrap_seed()
    counts = sentence_counts(np.random.default_rng(seed).choice(n, size=(samples, n), replace=True), n)
    observed = metric.score(sentence_stats.sum(2))                                         # [k, 2]
    resampled = metric.score(np.matmul(counts, sentence_stats))                            # [k, 2, B]
    test, parts = mean_difference(observed[:, 0] - observed[:, 1], resampled[:, 0] - resampled[:, 1])
    score, baseline = observed.mean(0)
    mean, ci = estimate_ci(resampled[:, 0].mean(0))
    base_mean, base_ci = estimate_ci(resampled[:, 1].mean(0))
    low, high = test.bounds(0.95)
    return {
        "score": float(score), "baseline": float(baseline), "delta": test.delta,  # the seeds' mean scores
        "p_greater": test.p(+1),                                 # one-sided: the system scores above the baseline
        "p_less": test.p(-1),                                    # one-sided: it scores below
        # Over the sentence resamples, as sacreBLEU's paired bootstrap names them: the system's score,
        # mean ± ci its 95% CI, and the baseline's, baseline_mean ± baseline_ci
        "mean": float(mean), "ci": float(ci), "ci_low": float(mean - ci), "ci_high": float(mean + ci),
        "baseline_mean": float(base_mean), "baseline_ci": float(base_ci),
        "delta_low": low, "delta_high": high,                    # 95% CI of the difference
        "var": test.var, "df": test.df, "estimated_share": test.share, **parts,  # the test's variance, its
                                                                 # estimated part's df and share, its parts
        "samples": samples, "bootstrap_seed": seed,
        "seeds": [{"seed": label, "score": float(s), "baseline": float(b), "delta": float(s - b)}
                  for label, (s, b) in zip(seeds, observed)],
        **({"sides": [side_parts(observed[:, side], resampled[:, side]) for side in range(2)]} if k > 1 else {}),
    }


def compare(systems: list[str], baselines: list[str], samples: int, seeds: list[int] | None = None,
            keep: list[int] | None = None, recipe: str = "") -> dict:
    """Every metric's test (evaluation/metrics), pooled over the seed pairs (systems[i], baselines[i]):
    each a sentence statistics file of `nmtrepro bleu` (`read_statistics`), scored against the same
    references (the same sentences, the same signatures). `keep`: only these sentences (their indices),
    e.g. the sources longer than a paper's length bucket (`longer_than`). `recipe`: the system's and the
    baseline's model families, 'SYSTEM/BASELINE' (`recipe_of`), whose seed noise it shares
    (evaluation/seed_noise.py)."""
    if len(systems) != len(baselines) or not systems:
        raise InputError(f"{len(systems)} system statistics but {len(baselines)} baseline ones: one pair a seed")
    kind = recipe_of(recipe)
    paths = [path for pair in zip(systems, baselines) for path in pair]
    saved = [read_statistics(path) for path in paths]
    if keep is not None:
        saved = [({name: stats[name][keep] for name in stats}, signature) for stats, signature in saved]
    out = {}
    for name, metric in METRICS.items():
        shapes = {stats[name].shape[0] for stats, _ in saved}
        signatures = {signature[name] for _, signature in saved}
        if len(shapes) != 1 or len(signatures) != 1:
            raise InputError(f"paired bootstrap ({metric.label}) needs statistics of the same sentences scored the "
                             f"same way: {', '.join(f'{p} ({s[name].shape[0]} sentences, {g[name]})' for p, (s, g) in zip(paths, saved))}")
        stacked = np.array([stats[name] for stats, _ in saved], dtype="float32")         # [2k, n, S]
        result = statistics_test(stacked.reshape(len(systems), 2, *stacked.shape[1:]), metric, samples, seeds)
        out[name] = {**result, "signature": bootstrap_signature(signatures.pop(), result), **kind}
    return out


def longer_than(src_bpe: list[str], length: int) -> list[int]:
    """The sentences whose source, BPE removed, has more than `length` tokens, as paper A's "> 45" bucket
    counts them (analyses/buckets.py: Moses tokens, upper bounds inclusive)."""
    return [i for i, line in enumerate(src_bpe) if len(strip_bpe(line).split()) > length]


def add_arguments_significance(parser) -> None:
    parser.add_argument("--stats", action="append", required=True,
                        help="system: its sentence statistics (nmtrepro bleu --out-statistics), one a seed")
    parser.add_argument("--base-stats", action="append", required=True,
                        help="baseline: its sentence statistics of the same seed, in the order of --stats")
    parser.add_argument("--seed", action="append", type=int, default=[], help="each pair's seed, in order (labels)")
    parser.add_argument("--samples", type=int, default=RESAMPLES, help="bootstrap resamples (seed: SACREBLEU_SEED)")
    parser.add_argument("--src-bpe", help="the BPE'd test source the statistics are of (with --longer-than)")
    parser.add_argument("--longer-than", type=int, metavar="N",
                        help="test only the sentences whose source has more than N tokens (a length bucket's claim)")
    parser.add_argument("--recipe", default="", metavar="SYSTEM/BASELINE",
                        help="the system's and the baseline's model families, 'phrase/transformer': the claims pages "
                             "pool seed noise within the kind of comparison (the two, sorted) and within each family")
    parser.add_argument("--out", required=True,
                        help="JSON: per metric score, baseline, one-sided p's, 95%% CI, seeds, resampled differences; "
                             'with --longer-than and no such sentence, {"empty": WHY} (a claims page: not judged)')


def run_significance(args) -> None:
    keep = None
    if args.longer_than is not None:
        if not args.src_bpe:
            raise InputError("--longer-than needs --src-bpe, the source whose lengths it counts")
        source = read_lines(args.src_bpe)
        sentences = next(iter(read_statistics(args.stats[0])[0].values())).shape[0]
        if sentences != len(source):
            raise InputError(f"{args.src_bpe}: {len(source)} lines, but {args.stats[0]} holds {sentences} sentences")
        keep = longer_than(source, args.longer_than)
        if not keep:  # nothing to test: the claims page says so instead of a verdict
            why = f"empty bucket: no test source is longer than {args.longer_than} tokens (of {len(source):,})"
            log.info("%s", why)
            write_json(args.out, {"empty": why})
            return
    result = compare(args.stats, args.base_stats, args.samples, args.seed or None, keep, args.recipe)
    write_json(args.out, result)
    for metric, entry in result.items():
        log.info("%s: %.2f vs baseline %.2f over %d seed pair(s), one-sided p = %.4f (higher) / %.4f (lower), "
                 "95%% CI of the difference %+.2f to %+.2f (%d resamples, seed %d)", metric, entry["score"],
                 entry["baseline"], len(entry["seeds"]), entry["p_greater"], entry["p_less"], entry["delta_low"],
                 entry["delta_high"], entry["samples"], entry["bootstrap_seed"])
