"""Holm's correction for the many claims of one page.

A paper page tests all of that paper's claims, up to 31 of them, each at 5%: with no correction a few
"reproduced" verdicts are what chance alone gives. Holm's step-down method (Holm 1979) keeps the chance
of any false rejection among a page's tests at the level, under any dependence between them (the claims
of a page share baselines and test sets), and rejects at least what Bonferroni rejects.
"""
from __future__ import annotations

import numpy as np


def holm(p_values: list[float]) -> list[float]:
    """Holm-adjusted p-values, in the order given: the i-th smallest of m (from 0) is multiplied by m - i,
    never below the adjusted p before it, at most 1; rejecting where the adjusted p < alpha is Holm's
    test at alpha."""
    adjusted = [0.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(np.argsort(p_values, kind="stable")):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted
