"""BLEU, two ways: the papers' tokenized BLEU (multi-bleu.perl on Moses tokens, which depends on the
tokenizer and so is not comparable across setups) and sacreBLEU on detokenized text, which is.

Several references (NIST's four) count an n-gram up to its largest count in any reference, and the
brevity penalty takes the closest reference length, as sacreBLEU and multi-bleu.perl do.
"""
from __future__ import annotations

import numpy as np
from sacrebleu.metrics import BLEU

from ...core.files import InputError
from . import Metric, register


def make_metric(name: str) -> BLEU:
    """The sacreBLEU BLEU behind each BLEU we report, so every analysis scores the same way."""
    if name == "tok_bleu":
        # multi-bleu.perl scores 0 when any n-gram order has no match, hence no smoothing.
        return BLEU(tokenize="none", smooth_method="none")
    if name == "sacrebleu":
        return BLEU()
    if name == "sentence_tok_bleu":
        # sacrebleu.sentence_bleu's settings (exp smoothing, effective order) on Moses tokens: one
        # sentence rarely has a 4-gram match, and unsmoothed it would score 0.
        return BLEU(tokenize="none", effective_order=True)
    if name == "sentence_sacrebleu":
        return BLEU(effective_order=True)
    raise InputError(f"unknown BLEU metric {name!r}; known: sacrebleu, tok_bleu, sentence_tok_bleu, "
                     "sentence_sacrebleu")


def bleu_from_statistics(sums: np.ndarray, metric: BLEU) -> np.ndarray:
    """`metric`'s corpus BLEU of each row of summed sentence statistics ([..., 2 + 2N]: system length,
    reference length, correct and total n-grams for n = 1..N), as sacreBLEU's `compute_bleu` gives it
    (its "exp" smoothing, effective order) one row at a time, here all rows at once."""
    if metric.smooth_method not in ("none", "exp"):
        raise InputError(f"BLEU smoothing {metric.smooth_method!r}: only 'none' and 'exp' are computed here")
    sums, order = np.asarray(sums, dtype=np.float64), metric.max_ngram_order
    sys_len, ref_len = sums[..., 0], sums[..., 1]
    correct, total = sums[..., 2:2 + order], sums[..., 2 + order:2 + 2 * order]
    counted = np.cumprod(total > 0, axis=-1).astype(bool)           # the orders before sacreBLEU's break
    used = counted.sum(-1) if metric.effective_order else np.full(sys_len.shape, order)
    with np.errstate(divide="ignore", invalid="ignore"):
        if metric.smooth_method == "exp":  # mteval's: the j-th order without a match counts 1 / (2^j total)
            misses = np.cumsum((correct == 0) & counted, axis=-1)
            precision = np.where(correct > 0, correct / total, 1.0 / (2.0 ** misses * total))
        else:
            precision = correct / total
        logs = np.where(np.arange(order) < used[..., None], np.log(np.where(counted, precision, 0.0)), 0.0)
        bp = np.where(sys_len < ref_len, np.exp(1 - ref_len / sys_len), 1.0)
        score = 100 * bp * np.exp(logs.sum(-1) / np.maximum(used, 1))
    return np.where((correct.sum(-1) == 0) | (used == 0) | ~np.isfinite(score), 0.0, score)


class Bleu(Metric):
    """A BLEU; its sentences are scored as sacrebleu.sentence_bleu scores one (`sentence`: exp smoothing
    and effective order on the same tokens), since unsmoothed one sentence rarely has a 4-gram match."""

    def __init__(self, name: str, label: str, scorer: BLEU, sentence: BLEU, reads: str = "hyp"):
        super().__init__(name, label, scorer, reads)
        self.sentence = sentence

    def score(self, sums: np.ndarray) -> np.ndarray:
        return bleu_from_statistics(sums, self.scorer)

    def sentence_scores(self, stats: np.ndarray) -> np.ndarray:
        return bleu_from_statistics(stats, self.sentence)

    def details(self, result) -> dict:
        return {
            "precisions": list(result.precisions),  # n = 1..4, in percent as sacreBLEU prints them
            "bp": result.bp,
            "sys_len": result.sys_len,
            "ref_len": result.ref_len,
        }


register(Bleu("sacrebleu", "sacreBLEU", make_metric("sacrebleu"), make_metric("sentence_sacrebleu")))
register(Bleu("tok_bleu", "tokenized BLEU", make_metric("tok_bleu"), make_metric("sentence_tok_bleu"), reads="hyp_tok"))
