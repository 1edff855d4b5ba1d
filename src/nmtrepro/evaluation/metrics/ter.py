"""TER (Snover et al. 2006): edits (insertions, deletions, substitutions and shifts of word sequences)
per reference word, lower is better. sacreBLEU's defaults (tercom's: case-insensitive, no normalization)
on detokenized text."""
from __future__ import annotations

import numpy as np
from sacrebleu.metrics import TER

from . import Metric, register


class Ter(Metric):
    def score(self, sums: np.ndarray) -> np.ndarray:
        """sacreBLEU's `_compute_score_from_stats` on every row of [edits, reference words (averaged over
        the references)]: 100 * edits / words; an empty reference scores 100 against any edit, 0 without."""
        sums = np.asarray(sums, dtype=np.float64)
        edits, words = sums[..., 0], sums[..., 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            return 100 * np.where(words > 0, edits / words, (edits > 0).astype(np.float64))


register(Ter("ter", "TER", TER(), higher_is_better=False))
