"""The metrics every evaluation reports, one module each, found by name.

sacreBLEU computes each of its metrics (BLEU, chrF, TER) from statistics summed over sentences and names
each by a signature that says how it was computed. A `Metric` here is that and no more: its name (the key
of the evaluation and significance JSONs, a claim's `metric`), the label a page prints, the hypothesis it
reads (detokenized `hyp`, or Moses-tokenized `hyp_tok`), its direction, its signature, each sentence's
statistics, and the corpus score of summed statistics for many rows at once (a bootstrap's 10,000
resamples). `nmtrepro bleu`, the paired bootstrap, the tables and the claims pages read metrics only
through it, and every module of this package is imported below, so a new metric is one module here that
calls `register`.
"""
from __future__ import annotations

import importlib
import json
import pkgutil

import numpy as np

from ...core.files import InputError, atomic_open, require_file


class Metric:
    """A sacreBLEU metric (`scorer`) as the workflow uses it. Subclasses give `score`, the corpus score of
    summed statistics computed on every row at once, and may add to `corpus`'s details."""

    def __init__(self, name: str, label: str, scorer, reads: str = "hyp", higher_is_better: bool = True):
        self.name, self.label, self.scorer = name, label, scorer
        self.reads = reads                      # "hyp": detokenized against raw references; "hyp_tok": Moses tokens
        self.higher_is_better = higher_is_better

    @property
    def orientation(self) -> int:
        """+1 where a higher score is better, -1 where lower is (TER): a system better than its baseline
        has orientation * (score - baseline) > 0."""
        return 1 if self.higher_is_better else -1

    @property
    def signature(self) -> str:
        """sacreBLEU's signature of the last `statistics` (its nrefs: their references)."""
        return str(self.scorer.get_signature())

    def statistics(self, hyps: list[str], refs: list[list[str]]) -> np.ndarray:
        """Each sentence's summable statistics, [n, S], against the reference streams `refs` (one list
        of lines a reference)."""
        return np.array(self.scorer._extract_corpus_statistics(hyps, refs), dtype=np.float64).reshape(len(hyps), -1)

    def score(self, sums: np.ndarray) -> np.ndarray:
        """The corpus score of each row of summed statistics, [..., S] -> [...], as sacreBLEU's
        `_compute_score_from_stats` gives it row by row."""
        raise NotImplementedError

    def sentence_scores(self, stats: np.ndarray) -> np.ndarray:
        """Each sentence's own score from its statistics [n, S] -> [n] (sacreBLEU's sentence-level score)."""
        return self.score(stats)

    def details(self, result) -> dict:
        """What the evaluation JSON keeps of sacreBLEU's corpus result besides the score."""
        return {}

    def corpus(self, stats: np.ndarray) -> dict:
        """sacreBLEU's corpus score of sentences' statistics [n, S] (`statistics`), as plain data for
        JSON: as sacreBLEU's own JSON names it ("BLEU", "chrF2++", "TER"), the score `corpus_score` gives
        the same lines, its signature, and details."""
        result = self.scorer._compute_score_from_stats(stats.sum(0).tolist())
        return {"name": result.name, "score": result.score, "signature": self.signature, **self.details(result)}


METRICS: dict[str, Metric] = {}
# The metric that every table and claims page shows beside the paper's BLEU: WMT has reported chrF beside
# BLEU for years, and a verdict that holds in one and fails in the other is worth a reader's eye.
SECOND_METRIC = "chrf"


def register(metric: Metric) -> Metric:
    METRICS[metric.name] = metric
    return metric


def write_statistics(path, statistics: dict[str, np.ndarray], signatures: dict[str, str]) -> None:
    """Each metric's sentence statistics of one hypothesis file ({name: [n, S]}) with its signatures, as
    `nmtrepro bleu` writes them once for every paired bootstrap that reads that hypothesis."""
    with atomic_open(path, "wb") as out:
        np.savez_compressed(out, signatures=np.array(json.dumps(signatures)),
                            **{name: stats.astype(np.float32) for name, stats in statistics.items()})  # counts: exact


def read_statistics(path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """`write_statistics`' file: every registered metric's statistics and signatures."""
    try:
        with np.load(require_file(path)) as saved:
            signatures = json.loads(str(saved["signatures"]))
            missing = [name for name in METRICS if name not in saved.files]
            if missing:
                raise InputError(f"{path}: no sentence statistics of {missing}; written before those metrics, "
                                 f"compute it again: snakemake --forcerun bleu")
            return {name: saved[name] for name in METRICS}, {name: signatures[name] for name in METRICS}
    except (OSError, ValueError, KeyError) as err:
        raise InputError(f"{path}: not a sentence statistics file of nmtrepro bleu ({err})") from None


def get(name: str) -> Metric:
    if name not in METRICS:
        raise InputError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    return METRICS[name]


for _module in pkgutil.iter_modules(__path__):      # alphabetical: bleu, chrf, ter, the JSONs' order
    importlib.import_module(f"{__name__}.{_module.name}")
