"""Simulated comparisons that the verdicts' test is calibrated on (bench/verdict_calibration.py,
tests/test_significance.py): k seed pairs (system, baseline) on one test set of BLEU-like sentences
(BLEU about 38) with a known true difference and known noise.

Each model matches each n-gram slot of each sentence with a probability whose logit is the order's,
plus the sentence's difficulty (every model's), plus half of the true effect, of a per-sentence
interaction that every seed pair shares (the test set's shared noise) and of pair i's seed offset u_i
(BLEU units), added to the system and taken from the baseline: a zero-mean shift of one side alone would
move its expected BLEU (the logistic is not linear), a difference the null must not have. Or, where
`sides` gives each side's seed SD, each side's seed offset is its own (two families of systems whose
seeds vary apart, each measured on its own: evaluation/seed_noise.py); sides of one SD keep the null's
expected BLEUs equal. Models draw their matches from uniforms shared by all of them except for a
fraction `own` of the slots, drawn anew per model, and may shift each sentence's logit by noise of their
own (`own_sd`): each pair's own test-set noise.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


LOGITS = np.log(np.array([0.70, 0.47, 0.32, 0.22]) / (1 - np.array([0.70, 0.47, 0.32, 0.22])))  # BLEU ~38


@dataclass(frozen=True)
class Mix:
    """A setting of the simulation: its noise, seed pairs and true difference."""
    name: str
    shared: float = 0.5       # SD (logit) of the per-sentence system interaction every pair shares
    own: float = 1.0          # fraction of each model's n-gram slots drawn anew (its own test-set noise)
    own_sd: float = 0.0       # SD (logit) of each model's own per-sentence shift (more of that noise)
    seed_sd: float = 0.5      # SD of each pair's offset, in BLEU
    k: int = 3
    effect: float = 0.0       # the true difference, in BLEU
    sides: tuple[float, float] | None = None  # each side's own seed offset SD (BLEU), in place of seed_sd's


def corpus(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Each sentence's length (hypothesis = reference) and difficulty (logit, every model's)."""
    return 8 + rng.poisson(6, n), rng.normal(0.0, 0.8, n)


def slope(lengths: np.ndarray, difficulty: np.ndarray, metric) -> float:
    """BLEU points a unit of logit shift buys on this corpus (expected counts): turns BLEU-unit offsets
    and effects into logits."""
    def expected(shift):
        p = 1 / (1 + np.exp(-(LOGITS[None] + difficulty[:, None] + shift)))
        totals = np.maximum(lengths[:, None] - np.arange(4)[None], 0)
        stats = np.concatenate([np.stack([lengths, lengths], 1), p * totals, totals], 1).sum(0)
        return metric.score(stats)
    return float((expected(0.05) - expected(-0.05)) / 0.1)


def sentence_stats(rng, mix: Mix, lengths, difficulty, per_logit: float) -> np.ndarray:
    """[k, 2, n, 10] sufficient statistics of k seed pairs (system, baseline) under `mix`."""
    n, slots = len(lengths), int(lengths.max())
    totals = np.maximum(lengths[:, None] - np.arange(4)[None], 0)                    # [n, 4]
    real = np.arange(slots)[None, None] < totals[..., None]                           # [n, 4, slots]
    common = rng.random((n, 4, slots))
    interaction = rng.normal(0.0, mix.shared, n)[:, None, None]
    out = np.empty((mix.k, 2, n, 10), dtype=np.float32)
    for i in range(mix.k):
        offset = rng.normal(0.0, mix.seed_sd) / per_logit
        apart = rng.normal(0.0, mix.sides) / per_logit if mix.sides else np.zeros(2)              # [2]
        for side in range(2):
            # the system and the baseline moved apart symmetrically: a zero-mean shift of one side alone
            # would move its expected BLEU (the logistic is not linear), a difference the null must not have
            split = 0.0 if mix.sides else offset
            shift = (1 if side == 0 else -1) * (mix.effect / per_logit + split + interaction) / 2 + apart[side]
            shift = shift + rng.normal(0.0, mix.own_sd, n)[:, None, None] if mix.own_sd else shift
            logit = LOGITS[None, :, None] + difficulty[:, None, None] + shift
            own = rng.random((n, 4, slots)) < mix.own
            draws = np.where(own, rng.random((n, 4, slots)), common)
            correct = ((draws < 1 / (1 + np.exp(-logit))) & real).sum(-1)
            out[i, side] = np.concatenate([np.stack([lengths, lengths], 1), correct, totals], 1)
    return out
