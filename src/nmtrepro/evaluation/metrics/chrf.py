"""chrF and chrF++ (Popović 2015, 2017): the F-score of character n-grams (1-6; chrF++ adds word 1-2
grams), recall weighted twice (beta 2). sacreBLEU's defaults on detokenized text, as WMT reports them."""
from __future__ import annotations

import numpy as np
from sacrebleu.metrics import CHRF

from . import Metric, register


class ChrF(Metric):
    def score(self, sums: np.ndarray) -> np.ndarray:
        """sacreBLEU's `_compute_f_score` (without its eps smoothing) on every row: per order n
        [hyp n-grams, ref n-grams, matches]; precision and recall averaged over the orders both sides
        have, then the F-beta of the averages."""
        sums = np.asarray(sums, dtype=np.float64)
        stats = sums.reshape(*sums.shape[:-1], self.scorer.order, 3)                 # [..., order, 3]
        hyp, ref, match = stats[..., 0], stats[..., 1], stats[..., 2]
        both = (hyp > 0) & (ref > 0)
        count = both.sum(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            precision = np.where(both, match / np.where(hyp > 0, hyp, 1), 0.0).sum(-1) / np.maximum(count, 1)
            recall = np.where(both, match / np.where(ref > 0, ref, 1), 0.0).sum(-1) / np.maximum(count, 1)
            factor = self.scorer.beta ** 2
            score = 100 * (1 + factor) * precision * recall / (factor * precision + recall)
        return np.where(precision + recall > 0, score, 0.0)


register(ChrF("chrf", "chrF", CHRF()))
register(ChrF("chrf_pp", "chrF++", CHRF(word_order=2)))
