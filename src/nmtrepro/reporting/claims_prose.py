"""A claims page's words: the note under its table (what ours, p and MDE are, the pooled seed noise, the
page's procedure, what its verdicts mean), its one-line reading, its verdicts as labels and its cells as
text. They say what evaluation/verdicts.py decided, and judge nothing again.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..evaluation.pooled import MIN_BASELINE_BLEU
from ..evaluation.quantities import QUANTITIES
from ..evaluation.verdicts import (ALPHA, CI, MDE, METRIC_LABELS, NOT_JUDGED, POWER, PRIMARY_WEIGHT, SECOND,
                                   SECOND_COLUMNS, UNJUDGED, Claim, format_p, verdict_word)
from .render import Label
from .report import resampling

if TYPE_CHECKING:
    from ..evaluation.seed_noise import SeedNoise

SECOND_NOTE = (f"{SECOND} Δ and verdict: each claim judged in {SECOND} as well (sacreBLEU's chrF2 on detokenized "
               f"output: character n-grams, recall weighted twice), by the same test and procedure, the page's claims "
               f"in it a family of their own and its seed noise pooled over the same comparisons; tested on the "
               f"claim's side without a paper Δ (the papers print BLEU), so no 'paper's Δ excluded'; a claim not "
               f"judged in its own metric is not judged in it either. Where its verdict is another word than the "
               f"claim's own metric's, the cell says so. Δ in other metrics: the same difference in each other metric "
               f"of the significance JSON (sacreBLEU's, with their signatures there; TER is lower-is-better, a gain "
               f"shows as a fall), not tested.")


def disagreements(claims: list[Claim], table: pd.DataFrame) -> str:
    """The reading's clause on the claims whose verdict in SECOND is another word than in their own
    (`in_second_metric`'s flag), or that none is."""
    second = table[SECOND_COLUMNS[1]]
    both = int((~second.str.startswith(("not tested", NOT_JUDGED))).sum())
    if not both:
        return ""
    differing = [f"{claim.text} ({verdict_word(own)} in {METRIC_LABELS[claim.metric]}, {verdict_word(other)} in {SECOND})"
                 for claim, own, other in zip(claims, table["verdict"], second) if "; differs from " in other]
    if not differing:
        return f" In {SECOND}, each of the {both} claims judged in both gets the same verdict."
    return (f" In {SECOND}, {len(differing)} of the {both} claims judged in both get another verdict: "
            f"{'; '.join(differing)}.")


def noise_sentence(noise: SeedNoise | None, metric: str) -> str:
    """The pooled seed noise in words, per recipe (seed_noise.py), each comparison's spread beside it."""
    if noise is None or not noise.df:
        return (f"Seed noise ({METRIC_LABELS[metric]}): no multi-seed comparison at this scale whose every seed scores "
                f"{MIN_BASELINE_BLEU:g} BLEU or more to pool it from; a claim of one seed pair gets no verdict, one of "
                f"more is tested with its own seeds' spread.")
    recipes = sorted({c.recipe for c in noise.comparisons})
    quantity = metric in QUANTITIES    # in its own units to 3 figures; a metric in points to 2 decimals
    sd = (lambda var: f"{np.sqrt(var):.3g}") if quantity else (lambda var: f"{np.sqrt(var):.2f}")
    pools = "; ".join(
        f"{recipe + ': ' if recipe else ''}{sd(pool.var)}{'' if quantity else ' points'} on {pool.df} "
        f"degrees of freedom, from "
        + ", ".join(f"{c.name} {sd(c.spread)} (own test-set part {sd(c.test_own)}, k = {c.k})"
                    for c in pool.comparisons)
        for recipe, pool in ((recipe, noise.within(recipe)) for recipe in recipes))
    homogeneity = noise.homogeneity()
    same = ("" if homogeneity is None else f" Bartlett's test that the comparisons' spreads share one variance: p "
            f"{format_p(homogeneity)}" + (" (they differ)." if homogeneity < ALPHA else "."))
    systems = noise.systems()
    families = "; ".join(f"{family} {sd(systems.within(family).var)} on {systems.within(family).df}"
                         for family in sorted({c.recipe for c in systems.comparisons}))
    one_seed = (f"with one seed pair, the seed noise of its two model families' systems, the SD of a system's seeds' "
                f"scores less its own test-set part pooled within each family over the comparisons' systems ({families}"
                f" degrees of freedom; a difference of two systems taken as varying by the sum of theirs), and no "
                f"verdict where the run measures either family in no system" if families else
                "and gets no verdict with one seed pair")
    return (f"Seed noise ({METRIC_LABELS[metric]}): the SD of a seed pair's offset, pooled within each recipe (the "
            f"model families a comparison sets against each other) from the spreads (SD) of its comparisons' seed "
            f"pairs' differences less each one's own test-set part: {pools}.{same} Each claim takes its own "
            f"recipe's; a claim of a recipe the run does not measure is tested with its own seeds' spread, "
            f"{one_seed}.")


def claims_note(claims: list[Claim], sigs: list[dict], noises: dict[str, SeedNoise | None]) -> str:
    """The note under a claims page: what ours, p and MDE are, the pooled seed noise, the page's
    procedure, and what its verdicts mean."""
    runs = resampling(sigs) or "none run"
    ours = (f"Ours: the difference of the claim's system and baseline on this run's test set, the mean over the "
            f"seeds both were trained with (each seed pair's own difference beside it). Its variance: the seed "
            f"noise pooled over this run's multi-seed comparisons of the claim's recipe, divided by the claim's "
            f"seed pairs, plus the "
            f"claim's own test-set part (a paired bootstrap of the sentences, {runs}), against a t distribution "
            f"whose degrees of freedom grow from the pool's with the test-set part's share, a p below 0.045 no "
            f"smaller than the fiducial mixture of the two parts gives (docs/statistics.md). "
            f"p: one-sided, of the hypothesis in 'tested' (the paper's "
            f"direction; for a claim of no gain, a difference below the stated margin); {CI}: the interval whose "
            f"bounds are two-sided tests at {ALPHA}. Size: whether the paper's Δ lies inside it. MDE: the "
            f"distance from the threshold that the claim's test detects with {POWER:.0%} power at the level it "
            f"is tested at ({PRIMARY_WEIGHT * ALPHA / 2:g} one-sided for a primary claim"
            + (", Holm's first step at the secondary claims' share for a secondary one)."
               if any(not c.primary for c in claims) else ")."))
    noise = " ".join(noise_sentence(noises[metric], metric) for metric in sorted(noises))
    quantities = sorted({claim.metric for claim in claims if claim.metric in QUANTITIES})
    if quantities:
        noise += (" A claim on a quantity the analyses measure (" + "; ".join(
            f"{QUANTITIES[q].label}: {QUANTITIES[q].definition}" for q in quantities) + ") is tested by the same "
            "test on that quantity's per-sentence statistics, its seed noise pooled as a metric's over the same "
            "quantity measured by the claim's analysis on its paper's central comparisons, its models held to the "
            "floor by their BLEU; its Δ and seed noise are in the quantity's units.")
    primaries = [claim.text for claim in claims if claim.primary]
    secondary = any(not claim.primary for claim in claims)
    level = PRIMARY_WEIGHT * ALPHA
    procedure = (f"Procedure: the primary claim{'s' * (len(primaries) > 1)} ({'; '.join(primaries)}) "
                 f"{'are' if len(primaries) > 1 else 'is'} tested two-sided at {level:g}, {PRIMARY_WEIGHT:g} of "
                 f"{ALPHA} (page p: its p over {PRIMARY_WEIGHT:g})" if primaries else "No primary claim on this page")
    if secondary:
        procedure += (f"; the secondary claims with Holm's correction over their two-sided p's, at "
                      f"{(1 - PRIMARY_WEIGHT) * ALPHA:g}, and at {ALPHA} once the primary is rejected" if primaries else
                      f"; the claims with Holm's correction over their two-sided p's at {ALPHA}")
        procedure += (f" ('page p': the p's adjusted so that each compares with {ALPHA}). The chance of any wrong "
                      f"decisive verdict on the page (a false 'reproduced' or 'contradicted') stays at {ALPHA}.")
    elif primaries:
        procedure += (f". A primary claim is its paper's central one, which holds most of that paper's family's level, "
                      f"with the verdict its paper's page gives it: with no true difference it reads 'reproduced' or "
                      f"'contradicted' with chance {level:g} in all.")
        if len(primaries) > 1:
            procedure += (f" Each paper is its own family, not corrected over the others (each is its own "
                          f"question): among {len(primaries)} claims of no true difference one reads decisive with "
                          f"chance up to {1 - (1 - level) ** len(primaries):.0%}.")
    else:
        procedure += "."
    meaning = ("Reproduced: this run shows what the claim says at the page's level, our mean and most seed pairs on "
               "that side; contradicted: it shows the opposite as firmly. Paper's Δ excluded: not significant, but "
               "our interval rules out a difference as large as the paper's. Inconclusive: neither, for the cause "
               "it names. Not comparable: the claim was not measured at this scale, or a seed of either system "
               f"scores below {MIN_BASELINE_BLEU:g} BLEU (a model that has not learned to translate); seed noise "
               "unmeasured: one seed pair, with nothing at this scale to pool its recipe's or its families' seed "
               "noise from. Those two are shown with their numbers and stay out of the page's family, as does a claim "
               "not judged: its part of the test set (a length bucket) holds no sentence at this scale.")
    return " ".join([ours, noise, procedure, meaning])


# A verdict's label class (render.STYLE) by its first words.
LABEL_KINDS = {"reproduced": "good", "contradicted": "bad", "paper's Δ excluded": "warn", "inconclusive": "open",
               "not comparable": "none", "seed noise unmeasured": "none", "not tested": "none", NOT_JUDGED: "none"}
# The causes of an inconclusive verdict, by its words after "inconclusive: ", as the reading counts them.
CAUSES = {"the seed pairs split": "the seed pairs split", "significant before": "significant before the page's "
          "correction only", "this run detects only": "the run could not detect a difference of the paper's size",
          "our interval holds both": "our interval holds both the threshold and the paper's Δ",
          "our interval holds the threshold": "our interval holds the threshold"}


def verdict_label(text: str) -> Label:
    return Label(text, next(kind for start, kind in LABEL_KINDS.items() if text.startswith(start)))


def reading(table: pd.DataFrame) -> str:
    """The page in one line: how many of its judged claims each verdict got, inconclusive ones by cause;
    every clause true of the rows it counts."""
    verdicts = table["verdict"]
    judged = ~verdicts.str.startswith(UNJUDGED)
    counts = {word: int(verdicts.str.startswith(word).sum()) for word in LABEL_KINDS}
    left = [f"{counts['seed noise unmeasured']} with seed noise unmeasured"] * bool(counts["seed noise unmeasured"])
    left += [f"{counts['not comparable']} not comparable at this scale"] * bool(counts["not comparable"])
    left += [f"{counts[NOT_JUDGED]} not judged (its part of the test set is empty)"] * bool(counts[NOT_JUDGED])
    if not judged.any():
        return f"No claim judged at this scale: {'; '.join(left)}."
    parts = [f"{counts['reproduced']} of {int(judged.sum())} judged claims reproduced",
             f"{counts['contradicted']} contradicted"]
    if counts["paper's Δ excluded"]:
        excluded = counts["paper's Δ excluded"]
        parts.append(f"{excluded} with the paper's Δ excluded (our interval "
                     f"rules out its size)")
    if counts["inconclusive"]:
        causes = [f"{int(verdicts.str.startswith('inconclusive: ' + start).sum())}: {words}"
                  for start, words in CAUSES.items() if verdicts.str.startswith("inconclusive: " + start).any()]
        parts.append(f"{counts['inconclusive']} inconclusive ({'; '.join(causes)})")
    return ", ".join(parts) + (f"; {'; '.join(left)}." if left else ".")


def shown_table(table: pd.DataFrame) -> pd.DataFrame:
    """The page's cells as text: signed differences, p's with three decimals, the MDE with two, the
    verdicts as labels; the plot's columns dropped."""
    table = table.drop(columns=[column for column in table if column.startswith("_")])
    signed = {column: table[column].map(lambda v: "" if pd.isna(v) else f"{v:+.2f}")
              for column in ("paper Δ", "ours Δ", SECOND_COLUMNS[0]) if column in table}
    labels = {column: table[column].map(verdict_label) for column in ("verdict", SECOND_COLUMNS[1]) if column in table}
    return table.assign(**signed, **{column: table[column].map(format_p) for column in ("p", "page p")},
                        **{MDE: table[MDE].map(lambda v: "" if pd.isna(v) else f"{v:.2f}")}, **labels)


NUMERIC = ("baseline BLEU", "paper Δ", "ours Δ", CI, MDE, "p", "page p", SECOND_COLUMNS[0])
