"""Quantities a paper states a number for that are not a translation metric: paper C's average segment
length, paper D's head similarity (Table IV) and its probing accuracies (Table VII). A claim on one ("+Fusing_Diverse's heads are less alike than
Base's") is tested as a claim on BLEU is: each quantity is a ratio of sums over the test sentences, so
`significance.statistics_test` takes it as it takes a metric (the seed pairs' mean, a paired bootstrap of
the sentences shared by every pair), and a claims page judges it in its paper's family (verdicts.py).

The registry is the one list: a claim's `metric` may name a quantity here, and the page labels it so.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Quantity:
    """A ratio of summed per-sentence statistics (numerator, denominator), as a metric's `score` reads
    summed sentence statistics."""
    name: str
    label: str        # as a claims page names it beside the metrics' labels
    kind: str         # the analysis kind whose per-seed files measure it (a claim's `analysis`)
    definition: str   # what the ratio is, for the page's note

    @staticmethod
    def score(sums: np.ndarray) -> np.ndarray:
        """(..., 2) summed statistics -> (...) the quantity; 0 where nothing was counted."""
        sums = np.asarray(sums, dtype="float64")
        return np.divide(sums[..., 0], sums[..., 1], out=np.zeros(sums.shape[:-1]), where=sums[..., 1] > 0)


# SentEval's probing tasks, by its file names (analyses/probing/tasks.py derives or fetches each): a claim on
# a task's accuracy is on quantity `probe_<task>`.
PROBING_TASKS = ("sentence_length", "word_content", "tree_depth", "top_constituents", "bigram_shift", "past_present",
                 "subj_number", "obj_number", "odd_man_out", "coordination_inversion")

QUANTITIES = {q.name: q for q in (
    Quantity("segment_length", "avg. segment length", "segments",
             "output words over non-empty segments (paper C, footnote 4); a word-level decoder's segments are its "
             "words (1)"),
    Quantity("head_similarity", "head similarity", "head_similarity",
             "the mean cosine of the encoder's self-attention heads' outputs at a token over every pair of heads, "
             "a head with itself included (paper D's Table IV average: Eq. 14 averaged over its pairs of groups of "
             "equal size), over the test set's tokens and the encoder's layers"),
    *(Quantity(f"probe_{task}", f"probing accuracy, {task} (%)", "probing",
               f"the share of {task}'s test examples that the probing classifier on the frozen encoder gets right, "
               "in %") for task in PROBING_TASKS),
)}
