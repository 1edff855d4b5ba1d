"""`nmtrepro claims`: each paper's claims beside what this run measured, with a verdict.

A claim is config data (a paper file's `claims`): a sentence, the experiment and the baseline it
compares, and the difference the paper printed. Ours is the test of the same two experiments over the
seeds both trained, with the seed noise of its recipe (its two model families) pooled over the run's
multi-seed comparisons of it (the central claims', `--pool`; evaluation/seed_noise.py, which says what a
claim of an unmeasured recipe takes) and the claim's own test-set noise from its paired
bootstrap; the verdict follows from it alone, never from typing. Each claim is a one-sided hypothesis
(its `tested` column): the paper's direction (Δ > 0, or Δ < 0 for a negative paper Δ), or for a claim of
no gain ("the reordering layer does not help", a `margin`) non-superiority, Δ below the margin.

A page is one family under the fallback procedure (a graphical procedure, Bretz et al. 2009): its
primary claim (the paper's central one, `--primary`) is tested two-sided (both a false "reproduced" and
a false "contradicted" count as errors) at PRIMARY_WEIGHT of ALPHA; the secondary claims, with Holm's
correction over their two-sided p's, at the rest of ALPHA, and at all of it once the primary is
rejected. The chance of any wrong decisive verdict on the page stays at ALPHA, a secondary claim is
tested whatever its primary's fate, and a primary's verdict is the same on its paper's page and on the
central page (each paper its own family).

The verdicts of a judged claim:
- reproduced: the page's p < ALPHA, our mean and more than half of the seed pairs on the claim's side;
- contradicted: the same on the other side (the opposite direction, or a gain beyond the margin);
- paper's Δ excluded: not significant, but our CONFIDENCE interval lies on the threshold's side of the
  paper's Δ: evidence against the paper's size without a significant sign;
- inconclusive, with its cause: the seed pairs split; significant before the page's correction only; the
  run could detect (80% power at the claim's level) only differences larger than the paper's; or our
  interval holds both the threshold and the paper's Δ;
And of a claim not judged, with its numbers shown and out of the family: not comparable at this scale
(the claim names other scales; or a seed of either system scores below MIN_BASELINE_BLEU, a model that
has not learned to translate), or seed noise unmeasured (one seed pair, and no multi-seed comparison of
its recipe at this scale to pool the seed noise from);
or not judged, where the claim's subset of the test set is empty (a length bucket without sentences at
this scale: `empty_subsets`).

Where the paper qualifies its claim ("the stack strategy marginally outperforms ..."), its word stands
beside the verdict. Each row also says whether the paper's Δ lies inside our interval.

A claim may be on a quantity an analysis measures instead of a metric (evaluation/quantities.py: paper C's
segment length, paper D's head similarity and probing accuracies; `nmtrepro quantity-test` writes its JSON
in the significance JSON's shape): the same test, verdicts and family, its models held to the BLEU floor by the BLEU of the
same seeds that its JSON carries (`floor`); its seed noise is its own seed pairs' spread (the pooled seed
noise is BLEU's), and it is not judged again in chrF.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.files import InputError, read_json
from ..evaluation.metrics import METRICS, SECOND_METRIC
from ..evaluation.multiplicity import holm
from ..evaluation.quantities import QUANTITIES
from ..evaluation.seed_noise import SeedNoise
from ..evaluation.significance import MeanDifference
from . import gaps as budget
from .pooled import BLEUS, MIN_BASELINE_BLEU, collapsed, floor_metric, parse_pool, read_entry, seed_noises
from .render import PALETTE, Label, figure, figure_svg, save_figure, write_table
from .report import format_p, resampling

ALPHA = 0.05
CONFIDENCE = 1 - ALPHA  # the interval whose bounds are two-sided tests at ALPHA: 95%, as the JSON's
POWER = 0.8  # the power at which a row's minimal detectable effect is computed
# The primary claim's share of a page's ALPHA (the rest is the secondary claims', and passes to them once
# the primary is rejected): the fallback procedure, a graphical procedure of Bretz et al. (2009).
PRIMARY_WEIGHT = 0.8
CI = f"{CONFIDENCE:.0%} CI of ours"
MDE = "MDE"
METRIC_LABELS = {name: metric.label for name, metric in METRICS.items()} | {
    name: quantity.label for name, quantity in QUANTITIES.items()}
COLUMNS = ["claim", "metric", "paper Δ", "tested", "ours Δ", "Δ per seed", CI, MDE, "p", "page p", "verdict", "size"]
# The numbers behind a row that the page does not print: the interval's bounds and each seed pair's Δ (the
# forest plot draws them), the baseline's BLEU as the test wrote it (the page across scales prints it).
HIDDEN = ["_low", "_high", "_seeds", "_baseline"]
NOT_MEASURED = "-"  # the significance path of a claim not comparable at this scale



@dataclass(frozen=True)
class Claim:
    text: str
    paper_delta: float | None  # None: the paper printed no difference in this metric (`seen_in`)
    metric: str                # the metric of the significance JSON it reads (evaluation/metrics)
    significance: str          # pooled paired-bootstrap JSON of the claim's experiment vs its baseline
    comparable: bool = True
    paper_says: str = ""       # the word the paper qualifies the claim by ("marginally"), if any
    margin: float | None = None  # a claim of no gain: tested as Δ < margin (non-superiority)
    primary: bool = False      # its paper's central claim: the larger share of the page's ALPHA
    expects: int = 0           # the claimed sign of the difference where paper_delta is None
    unjudged: str = ""         # why a claim measured at this scale is not judged (an empty length bucket)

    @property
    def direction(self) -> int:
        """+1 where the claim is that the experiment scores above the baseline, -1 where it scores below
        or (a claim of no gain) falls short of the margin."""
        if self.margin is not None:
            return -1
        return self.expects if self.paper_delta is None else int(np.sign(self.paper_delta))

    @property
    def threshold(self) -> float:
        return 0.0 if self.margin is None else self.margin

    @property
    def paper_distance(self) -> float:
        """How far the paper's Δ lies from the threshold on the claim's side: the size a run must detect."""
        return self.direction * (self.paper_delta - self.threshold)


def seen_in(claim: Claim, metric: str) -> Claim | None:
    """The claim as a test in another metric: the same two experiments, the side it claims (a gain is a
    higher BLEU and a lower TER), no paper Δ (the paper printed its own metric's). None for a claim of no
    gain, whose margin is in its own metric's points, or for a claim on a quantity (no translations compared)."""
    if claim.metric == metric:
        return claim
    if claim.margin is not None or claim.metric in QUANTITIES:
        return None
    sign = claim.direction * METRICS[claim.metric].orientation * METRICS[metric].orientation
    return replace(claim, metric=metric, paper_delta=None, expects=sign)


def floor_entry(claim: Claim, sig: dict) -> dict:
    """The entry whose seeds' BLEU the floor holds a claim's models to: its own in a BLEU, the BLEU its
    JSON carries for a quantity (`floor`), else sacreBLEU's of the same JSON."""
    if claim.metric in BLEUS:
        return sig
    if claim.metric in QUANTITIES:
        return sig["floor"]
    return read_entry(claim.significance, floor_metric(claim.metric))


def hypothesis(direction: int, threshold: float) -> str:
    """The one-sided alternative as the page prints it: "Δ > 0", "Δ < +0.30"."""
    return f"Δ {'>' if direction > 0 else '<'} {f'{threshold:+.2f}' if threshold else '0'}"


def detectable(test: MeanDifference, level: float) -> float:
    """The minimal detectable effect: the distance from the threshold that a one-sided test at `level`
    detects with probability POWER, on the test's variance and reference."""
    return float((test.reference.isf(level) + test.reference.ppf(POWER)) * np.sqrt(max(test.var, 0.0)))


@dataclass(frozen=True)
class Judged:
    """A judged claim's test (its recipe's pooled seed noise, or the basis `SeedNoise.basis` words), the
    one-sided p's of its hypothesis and of the opposite, the sides of the threshold our mean and each
    seed pair fall on (+1: the claim's)."""
    test: MeanDifference
    p_for: float
    p_against: float
    sides: list[int]
    basis: str = ""

    @property
    def two_sided(self) -> float:
        return min(1.0, 2 * min(self.p_for, self.p_against))


def judge(claim: Claim, sig: dict, test: MeanDifference, basis: str = "") -> Judged:
    sides = [int(np.sign(claim.direction * (delta - claim.threshold)))
             for delta in [test.delta] + [entry["delta"] for entry in sig["seeds"]]]
    return Judged(test, test.p(claim.direction, claim.threshold), test.p(-claim.direction, claim.threshold), sides,
                  basis)


def decide(claim: Claim, judged: Judged, page_p: float, low: float, high: float, mde: float) -> str:
    """The verdict of a tested claim (module docstring), each not-decisive one worded for its cause."""
    ours, seeds = judged.sides[0], judged.sides[1:]
    if page_p < ALPHA:
        side = 1 if ours > 0 else -1
        if 2 * seeds.count(side) > len(seeds):
            if side > 0:
                return "reproduced"
            return f"contradicted ({hypothesis(-claim.direction, claim.threshold)}: p {format_p(judged.p_against)})"
        return (f"inconclusive: the seed pairs split ({seeds.count(side)} of {len(seeds)} on the side of our "
                f"mean)")
    far = high if claim.direction > 0 else low                  # our bound on the paper's side
    if claim.paper_delta is not None and claim.direction * (claim.paper_delta - far) > 0:
        return f"paper's Δ excluded (our interval ends at {far:+.2f}, short of the paper's {claim.paper_delta:+.2f})"
    if judged.two_sided < ALPHA:
        return (f"inconclusive: significant before the page's correction only (p {format_p(judged.two_sided)} "
                f"two-sided, {format_p(page_p)} on the page)")
    if claim.paper_delta is None:
        return "inconclusive: our interval holds the threshold (no paper Δ in this metric)"
    if mde > claim.paper_distance:
        return (f"inconclusive: this run detects only {mde:.2f} or more from {claim.threshold:g}, the paper's "
                f"Δ lies {claim.paper_distance:.2f} from it")
    return "inconclusive: our interval holds both the threshold and the paper's Δ"


def empty_subsets(claims: list[Claim]) -> list[Claim]:
    """`claims` with each whose significance JSON tested an empty subset of the test set (`nmtrepro
    significance --longer-than` where no source is that long: {"empty": WHY}) made unjudged, WHY its cause."""
    def marked(claim):
        why = empty_cause(claim.significance) if claim.comparable else None
        return claim if why is None else replace(claim, comparable=False, significance=NOT_MEASURED, unjudged=why)
    return [marked(claim) for claim in claims]


def empty_cause(path: str) -> str | None:
    """The cause a significance JSON gives for an empty subset; None where it gives none, or is no JSON
    object at all (its reader names the file, or a page across scales names it not read)."""
    try:
        data = read_json(path)
    except json.JSONDecodeError:
        return None
    return data.get("empty") if isinstance(data, dict) else None


def load(claims: list[Claim]) -> dict[int, dict]:
    """The significance entries of the comparable claims, by index, each file read once."""
    return {i: read_entry(claim.significance, claim.metric) for i, claim in enumerate(claims) if claim.comparable}


def build_claims(claims: list[Claim], pool: dict[str, str] | None = None) -> pd.DataFrame:
    """The claims page's rows under the page's procedure (module docstring), the seed noise pooled over
    `pool` ({name: significance JSON}); the columns after COLUMNS are HIDDEN's."""
    claims = empty_subsets(claims)
    sigs = load(claims)
    return assess(claims, sigs, seed_noises(pool or {}, [claims[i].metric for i in sigs]))


def assess(claims: list[Claim], sigs: dict[int, dict], noises: dict[str, SeedNoise | None]) -> pd.DataFrame:
    """`build_claims` on loaded entries and pooled noises."""
    unjudged = {i: collapsed(floor_entry(claims[i], sig)) for i, sig in sigs.items()}
    bases = {i: (noises[claims[i].metric] or SeedNoise(())).basis(sig) for i, sig in sigs.items()}
    for i in sigs:
        if not unjudged[i] and bases[i].test is None:
            unjudged[i] = None                             # seed noise unmeasured
    judged = {i: judge(claims[i], sig, bases[i].test, bases[i].words) for i, sig in sigs.items() if unjudged[i] == []}
    primaries = [i for i in judged if claims[i].primary]
    secondaries = [i for i in judged if not claims[i].primary]
    page_p = {i: min(1.0, judged[i].two_sided / PRIMARY_WEIGHT) for i in primaries}
    levels = {i: PRIMARY_WEIGHT * ALPHA / 2 for i in primaries}
    # The secondaries' share of ALPHA: all of it on a page without a primary, else 1 - PRIMARY_WEIGHT of
    # it, and all once every primary is rejected (its share passes on).
    named = sum(claim.primary for claim in claims)
    # the smallest level at which every primary is rejected (1: one was not judged)
    gate = max(page_p.values(), default=0.0) if len(primaries) == named else 1.0
    passed = not named or gate < ALPHA
    for i, adjusted in zip(secondaries, holm([judged[i].two_sided for i in secondaries])):
        page_p[i] = min(adjusted / (1 - PRIMARY_WEIGHT), max(gate, adjusted)) if named else adjusted
        levels[i] = (ALPHA if passed else (1 - PRIMARY_WEIGHT) * ALPHA) / (2 * len(secondaries))
    rows = []
    for i, claim in enumerate(claims):
        says = f" (the paper: {claim.paper_says})" if claim.paper_says else ""
        row = {"claim": claim.text, "metric": METRIC_LABELS[claim.metric], "paper Δ": claim.paper_delta,
               "tested": hypothesis(claim.direction, claim.threshold), "ours Δ": float("nan"), "Δ per seed": "",
               CI: "", MDE: float("nan"), "p": float("nan"), "page p": float("nan"), "size": "",
               "_low": float("nan"), "_high": float("nan"), "_seeds": [], "_baseline": float("nan")}
        if i not in sigs:
            why = f"{NOT_JUDGED}: {claim.unjudged}" if claim.unjudged else "not comparable at this scale"
            rows.append({**row, "verdict": why + says})
            continue
        row["Δ per seed"] = " / ".join(f"{e['delta']:+.2f} (seed {e['seed']})" for e in sigs[i]["seeds"])
        row["_seeds"], row["_baseline"] = [e["delta"] for e in sigs[i]["seeds"]], sigs[i]["baseline"]
        if i not in judged:
            test = MeanDifference.of(sigs[i])
            why = (f"not comparable at this scale ({'; '.join(unjudged[i])}, below {MIN_BASELINE_BLEU:g} BLEU)"
                   if unjudged[i] else f"seed noise unmeasured ({bases[i].words})")
            rows.append({**row, "ours Δ": test.delta, "verdict": why + says})
            continue
        test = judged[i].test
        low, high = test.bounds(CONFIDENCE)
        mde = detectable(test, levels[i])
        row.update({"ours Δ": test.delta, CI: f"{low:+.2f} to {high:+.2f}", MDE: mde, "p": judged[i].p_for,
                    "_low": low, "_high": high,
                    "size": "" if claim.paper_delta is None else
                    "consistent" if low <= claim.paper_delta <= high else "paper Δ outside"})
        found = decide(claim, judged[i], page_p[i], low, high, mde)
        basis = f"; {judged[i].basis}" if judged[i].basis else ""
        rows.append({**row, "page p": page_p[i], "verdict": found + says + basis})
    return pd.DataFrame(rows, columns=COLUMNS + HIDDEN)


SECOND = METRIC_LABELS[SECOND_METRIC]
# After them, each measured claim's difference in every other registered metric, unjudged (a new metric
# module shows here at once).
SECOND_COLUMNS = [f"{SECOND} Δ", f"{SECOND} verdict", "Δ in other metrics"]
NOT_JUDGED = "not judged"  # in SECOND_METRIC, a claim not judged in its own metric


def in_second_metric(claims: list[Claim], table: pd.DataFrame, pool: dict[str, str]
                     ) -> tuple[pd.DataFrame, dict[str, SeedNoise | None]]:
    """Each claim judged in SECOND_METRIC beside its verdict in its own (`table`, `assess`'s): the same test
    and procedure, the page's claims in that metric their own family, its seed noise pooled over the same
    comparisons, the claim's side without the paper's Δ (`seen_in`). Only claims judged in their own
    metric are judged in it (a model below the floor is one in any metric); a claim of no gain is not (its
    margin is in its own metric). The columns SECOND_COLUMNS (each measured claim's Δ in SECOND_METRIC and
    the other metrics, judged or not), a verdict whose word differs from its own metric's flagged; and that
    metric's pooled seed noise ({SECOND_METRIC: noise}, {} where no claim is judged in it), for the note."""
    own = table["verdict"].map(verdict_word)
    views = [seen_in(claim, SECOND_METRIC) if claim.comparable and not word.startswith(UNJUDGED) else None
             for claim, word in zip(claims, own)]
    here = [view or replace(claim, metric=SECOND_METRIC, comparable=False, significance=NOT_MEASURED)
            for claim, view in zip(claims, views)]
    sigs = load(here)
    noise = seed_noises(pool, [SECOND_METRIC] if sigs else [])
    seen = assess(here, sigs, noise)
    verdicts, deltas, others = [], [], []
    for claim, view, word, verdict in zip(claims, views, own, seen["verdict"]):
        if view is None:
            verdicts.append(NOT_JUDGED if word.startswith(UNJUDGED) else
                            "not tested (a quantity of the models, not of their translations)"
                            if claim.metric in QUANTITIES else
                            f"not tested (a claim of no gain: its margin is in {METRIC_LABELS[claim.metric]})")
        elif verdict_word(verdict) != word:
            verdicts.append(f"{verdict}; differs from {METRIC_LABELS[claim.metric]} ({word})")
        else:
            verdicts.append(verdict)
        measured = ({name: read_entry(claim.significance, name)["delta"] for name in METRICS}
                    if claim.comparable and claim.metric not in QUANTITIES else {})
        deltas.append(measured.get(SECOND_METRIC, float("nan")))
        others.append(" · ".join(f"{METRIC_LABELS[name]} {delta:+.2f}" for name, delta in measured.items()
                                 if name not in (claim.metric, SECOND_METRIC)))
    return pd.DataFrame(dict(zip(SECOND_COLUMNS, (deltas, verdicts, others)))), noise


SECOND_NOTE = (f"{SECOND} Δ and verdict: each claim judged in {SECOND} as well (sacreBLEU's chrF2 on detokenized "
               f"output: character n-grams, recall weighted twice), by the same test and procedure, the page's claims "
               f"in it a family of their own and its seed noise pooled over the same comparisons; tested on the "
               f"claim's side without a paper Δ (the papers print BLEU), so no 'paper's Δ excluded'; a claim not "
               f"judged in its own metric is not judged in it either. Where its verdict is another word than the "
               f"claim's own metric's, the cell says so. Δ in other metrics: the same difference in each other metric "
               f"of the significance JSON (sacreBLEU's, with their signatures there; TER is lower-is-better, a gain "
               f"shows as a fall), not tested.")


def disagreements(claims: list[Claim], table: pd.DataFrame) -> str:
    """The reading's clause on the claims whose verdict in SECOND_METRIC is another word than in their own
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
    pools = "; ".join(
        f"{recipe + ': ' if recipe else ''}{np.sqrt(pool.var):.2f} points on {pool.df} degrees of freedom, from "
        + ", ".join(f"{c.name} {np.sqrt(c.spread):.2f} (own test-set part {np.sqrt(c.test_own):.2f}, k = {c.k})"
                    for c in pool.comparisons)
        for recipe, pool in ((recipe, noise.within(recipe)) for recipe in recipes))
    homogeneity = noise.homogeneity()
    same = ("" if homogeneity is None else f" Bartlett's test that the comparisons' spreads share one variance: p "
            f"{format_p(homogeneity)}" + (" (they differ)." if homogeneity < ALPHA else "."))
    return (f"Seed noise ({METRIC_LABELS[metric]}): the SD of a seed pair's offset, pooled within each recipe (the "
            f"model families a comparison sets against each other) from the spreads (SD) of its comparisons' seed "
            f"pairs' differences less each one's own test-set part: {pools}.{same} Each claim takes its own "
            f"recipe's; a claim of a recipe the run does not measure is tested with its own seeds' spread, and gets "
            f"no verdict with one seed pair.")


def claims_note(claims: list[Claim], sigs: list[dict], noises: dict[str, SeedNoise | None]) -> str:
    """The note under a claims page: what ours, p and MDE are, the pooled seed noise, the page's
    procedure, and what its verdicts mean."""
    runs = resampling(sigs) or "none run"
    ours = (f"Ours: the difference of the claim's system and baseline on this run's test set, the mean over the "
            f"seeds both were trained with (each seed pair's own difference beside it). Its variance: the seed "
            f"noise pooled over this run's multi-seed comparisons of the claim's recipe, divided by the claim's "
            f"seed pairs, plus the "
            f"claim's own test-set part (a paired bootstrap of the sentences, {runs}), against a t distribution "
            f"whose degrees of freedom grow from the pool's with the test-set part's share (docs/statistics.md). "
            f"p: one-sided, of the hypothesis in 'tested' (the paper's "
            f"direction; for a claim of no gain, a difference below the stated margin); {CI}: the interval whose "
            f"bounds are two-sided tests at {ALPHA}. Size: whether the paper's Δ lies inside it. MDE: the "
            f"distance from the threshold that the claim's test detects with {POWER:.0%} power at the level it "
            f"is tested at ({PRIMARY_WEIGHT * ALPHA / 2:g} one-sided for a primary claim"
            + (", Holm's first step at the secondary claims' share for a secondary one)."
               if any(not c.primary for c in claims) else ")."))
    noise = " ".join(noise_sentence(noises[metric], metric) for metric in sorted(noises) if metric not in QUANTITIES)
    quantities = sorted({claim.metric for claim in claims if claim.metric in QUANTITIES})
    if quantities:
        noise += (" A claim on a quantity the analyses measure (" + "; ".join(
            f"{QUANTITIES[q].label}: {QUANTITIES[q].definition}" for q in quantities) + ") is tested by the same "
            "test on that quantity's per-sentence statistics, its seed noise its own seed pairs' spread (the pooled "
            "seed noise is BLEU's), its models held to the floor by their BLEU; its Δ is in the quantity's units.")
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
               "unmeasured: one seed pair, with nothing at this scale to pool its recipe's seed noise from. Those two "
               "are shown with their numbers and stay out of the page's family, as does a claim not judged: its part "
               "of the test set (a length bucket) holds no sentence at this scale.")
    return " ".join([ours, noise, procedure, meaning])


# A verdict's label class (render.STYLE) by its first words.
LABEL_KINDS = {"reproduced": "good", "contradicted": "bad", "paper's Δ excluded": "warn", "inconclusive": "open",
               "not comparable": "none", "seed noise unmeasured": "none", "not tested": "none", NOT_JUDGED: "none"}
UNJUDGED = ("not comparable", "seed noise unmeasured", NOT_JUDGED)
# The causes of an inconclusive verdict, by its words after "inconclusive: ", as the reading counts them.
CAUSES = {"the seed pairs split": "the seed pairs split", "significant before": "significant before the page's "
          "correction only", "this run detects only": "the run could not detect a difference of the paper's size",
          "our interval holds both": "our interval holds both the threshold and the paper's Δ",
          "our interval holds the threshold": "our interval holds the threshold"}


def verdict_label(text: str) -> Label:
    return Label(text, next(kind for start, kind in LABEL_KINDS.items() if text.startswith(start)))


def verdict_word(text: str) -> str:
    """A verdict's first words, before its cause, numbers or qualifier: what the forest plot prints."""
    return re.split(r" \(|:|;", text)[0]


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


def forest_plot(claims: list[Claim], table: pd.DataFrame, scale: str | None = None):
    """One row a claim, top to bottom in the page's order: our mean difference (dot) with its interval
    (line) and each seed pair's difference (small grey dots), the paper's (diamond), zero, for a claim
    of no gain its margin (dashed), and the minimal detectable effect (a bar: the run detects a true
    difference beyond it with POWER); the verdict's word at the right. A claim unmeasured at this scale
    shows the paper's difference alone."""
    import textwrap

    n = len(claims)
    fig = figure(f"Δ BLEU: ours ({CONFIDENCE:.0%} CI, seed pairs) beside the paper's", scale,
                 figsize=(9.5, 0.9 + 0.62 * n))
    ax = fig.subplots()
    ax.axvline(0, color="#444", linewidth=0.9, zorder=1)
    for row, (claim, (_, line)) in enumerate(zip(claims, table.iterrows())):
        y = n - 1 - row
        if claim.margin is not None:
            ax.plot([claim.margin] * 2, [y - 0.35, y + 0.35], "--", color="#777", linewidth=1, zorder=1)
        if not pd.isna(line["_low"]):
            ax.plot([line["_low"], line["_high"]], [y, y], color=PALETTE[0], linewidth=2.2, solid_capstyle="butt",
                    zorder=2)
        if line["_seeds"]:
            ax.scatter(line["_seeds"], [y - 0.18] * len(line["_seeds"]), s=14, color="#8a8a8a", zorder=3)
            ax.scatter([line["ours Δ"]], [y], s=42, color=PALETTE[0], zorder=4)
        if not pd.isna(line[MDE]):
            ax.scatter([claim.threshold + claim.direction * line[MDE]], [y], marker="|", s=160, color=PALETTE[1],
                       zorder=3)
        ax.scatter([claim.paper_delta], [y], marker="D", s=40, color=PALETTE[3], zorder=5)
        kind = verdict_label(line["verdict"]).kind
        ax.annotate(verdict_word(line["verdict"]), (1.01, y), xycoords=("axes fraction", "data"), va="center",
                    fontsize=8.5, color={"good": "#14532d", "bad": "#7f1d1d", "warn": "#78350f"}.get(kind, "#444"))
    named = [c.text + (f" [Δ {METRIC_LABELS[c.metric]}]" if c.metric in QUANTITIES else "") for c in reversed(claims)]
    ax.set_yticks(range(n), ["\n".join(textwrap.wrap(text, 48)) for text in named], fontsize=8.5)
    ax.set_ylim(-0.7, n - 0.3)
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("Δ BLEU (system − baseline)" + ("; a quantity's Δ in its units" * any(
        c.metric in QUANTITIES for c in claims)))
    handles = [ax.scatter([], [], s=42, color=PALETTE[0], label=f"ours: mean, {CONFIDENCE:.0%} CI"),
               ax.scatter([], [], s=14, color="#8a8a8a", label="ours: each seed pair"),
               ax.scatter([], [], marker="|", s=160, color=PALETTE[1], label=f"detectable at {POWER:.0%} power"),
               ax.scatter([], [], marker="D", s=40, color=PALETTE[3], label="paper")]
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=4, frameon=False)
    return fig


# A claim as the workflow passes it (claims_inputs.smk `claim_args`): one JSON object, its fields named
# as Claim's; `significance` null where it is not comparable at this scale. A new claim field is a Claim
# field with its default and the schema's key of the same name (`GIVEN`), read where the page uses it.
FORMAT = ('{"text": SENTENCE, "paper_delta": D, "metric": ' + "|".join(f'"{name}"' for name in METRICS)
          + ', "significance": JSON|null[, "margin": M][, "paper_says": WORD]}')
REQUIRED = ("text", "paper_delta", "metric", "significance")
OPTIONAL = {field.name for field in fields(Claim)} - set(REQUIRED) - {"comparable", "primary", "expects", "unjudged"}
# What a paper's claim entry gives as it is (the config schema's keys of the same names); a claim of no
# gain's margin is the workflow's (one rule: half the smallest gain its paper calls a help).
GIVEN = sorted(OPTIONAL - {"margin"})


def parse_claim(spec: str, extra: tuple[str, ...] = ()) -> tuple[Claim, dict]:
    """A --claim's JSON (FORMAT) as a Claim, and the values of its `extra` keys (across-scales: its
    scale). The paper's difference is non-zero for a claim of a difference; a claim of no gain (tested
    Δ < margin) names its positive margin; a comparable claim names its paired bootstrap JSON."""
    try:
        given = json.loads(spec)
    except json.JSONDecodeError as err:
        raise InputError(f"--claim is not valid JSON ({err}): {spec!r}") from None
    if not isinstance(given, dict):
        raise InputError(f"--claim wants an object {FORMAT}, got {spec!r}")
    missing = [key for key in (*REQUIRED, *extra) if key not in given]
    unknown = sorted(set(given) - set(REQUIRED) - OPTIONAL - set(extra))
    problems = [f"missing {missing}"] if missing else []
    problems += [f"unknown {unknown} (fields: {FORMAT})"] if unknown else []
    if problems:
        raise InputError(f"--claim {spec!r}: {'; '.join(problems)}")
    values = {key: given.pop(key) for key in extra}
    delta, margin = given["paper_delta"], given.get("margin")
    if given["metric"] not in METRIC_LABELS:
        raise InputError(f"--claim {spec!r}: metric must be one of {sorted(METRIC_LABELS)}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (delta, margin) if v is not None):
        raise InputError(f"--claim {spec!r}: paper_delta and margin are numbers")
    if margin is not None and margin <= 0:
        raise InputError(f"--claim {spec!r}: a claim of no gain needs a positive margin, got {margin}")
    if margin is None and delta == 0:
        raise InputError(f"--claim {spec!r}: a claim of a difference needs a non-zero paper difference "
                         f"(a claim of no gain names its margin)")
    if not given["text"]:
        raise InputError(f"--claim {spec!r}: its text is empty")
    measured = given["significance"] is not None
    claim = Claim(**{**given, "paper_delta": float(delta), "margin": None if margin is None else float(margin),
                     "significance": given["significance"] if measured else NOT_MEASURED, "comparable": measured})
    return claim, values


def add_arguments_claims(parser) -> None:
    parser.add_argument("--title", required=True)
    parser.add_argument("--claim", action="append", required=True, metavar="JSON",
                        help=f"a claim, {FORMAT}: its sentence, the paper's difference (and a claim of no gain's "
                             "margin), the BLEU it is in, the paired bootstrap of its two experiments (null: not "
                             "comparable at this scale) (repeat)")
    add_procedure_arguments(parser)
    parser.add_argument("--curves", default="{}", metavar="JSON",
                        help='{"SENTENCE": {"system": [CURVE_TSV...], "baseline": [CURVE_TSV...]}}: the claims\' '
                             "trainings, seed k against seed k, whose validation NLL gap over training the page draws")
    parser.add_argument("--budgets", default="{}", metavar="JSON",
                        help='{"levels": [{"label": L, "claims": {"SENTENCE": {"significance": JSON, "updates": N'
                             '[, "label": L]}}, "pool": {"NAME": JSON}}], "final": L, "updates": {"SENTENCE": N}}: the '
                             "claims at shorter budgets of the same trainings (nmtrepro.study.budgets), judged at each")
    parser.add_argument("--others", default="{}", metavar="JSON",
                        help='{"SCALE": {"claims": {"SENTENCE": JSON}, "pool": {"NAME": JSON}}}: other scales\' tests of '
                             "these claims; the reading names each whose verdict there differs from this run's")
    parser.add_argument("--note", action="append", default=[], help="a paragraph under the table (repeat)")
    parser.add_argument("--scale", help="the configured scale, named on the plots")
    parser.add_argument("--out-md", required=True)
    parser.add_argument("--out-html", required=True, help="the page, its forest plot inline")
    parser.add_argument("--out-svg", required=True, help="the forest plot, which the Markdown page links")
    parser.add_argument("--out-gap-svg", help="the gap over training (--curves), which the Markdown page links")
    parser.add_argument("--out-gap-tsv", help="the same gaps as a table (claim, step, pair, delta), for the page "
                                              "across scales and export-claims")


def add_procedure_arguments(parser) -> None:
    """The options that set a page's procedure: its primary claims and the comparisons its seed noise
    pools over (the claims and across-scales commands)."""
    parser.add_argument("--primary", action="append", default=[], metavar="TEXT",
                        help="the sentence of a primary claim (its paper's central one): tested two-sided at "
                             "0.8 of 0.05, the page's others by Holm at the rest, and at all once it is rejected (repeat)")
    parser.add_argument("--pool", action="append", default=[], metavar="NAME=JSON",
                        help="a significance JSON whose seed pairs' spread the seed noise pools over, under "
                             "its name on the page (repeat: the central claims')")


def mark_primaries(claims: list[Claim], primaries: list[str]) -> list[Claim]:
    """`claims` with those whose sentence `primaries` names marked primary; a name that matches none is
    refused."""
    unknown = set(primaries) - {claim.text for claim in claims}
    if unknown:
        raise InputError(f"--primary {sorted(unknown)}: no --claim has that sentence")
    return [replace(claim, primary=claim.text in primaries) for claim in claims]


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


def read_json_arg(flag: str, text: str, claims: list[Claim], sentences) -> dict:
    """A JSON argument of claims (`flag`: --curves, --budgets, --others): parsed, and each sentence that
    `sentences(parsed)` names checked against the --claim sentences."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{flag} is not valid JSON: {err}") from None
    unknown = set(sentences(parsed)) - {claim.text for claim in claims}
    if unknown:
        raise InputError(f"{flag} {sorted(unknown)}: no --claim has that sentence")
    return parsed


def parse_curves(text: str, claims: list[Claim]) -> dict[str, dict[str, list[str]]]:
    """--curves' JSON, each entry a claim's sentence with its system's and baseline's curves."""
    return read_json_arg("--curves", text, claims, lambda curves: curves)


BUDGET_COLUMNS = ["claim", "budget", "updates", "ours Δ", "Δ per seed", CI, "p", "page p", "verdict"]


def parse_budgets(text: str, claims: list[Claim]) -> dict:
    """--budgets' JSON: {"levels": [{"label": LABEL, "claims": {SENTENCE: {"significance": JSON,
    "updates": N[, "label": its own LABEL]}}, "pool": {NAME: JSON}}], "final": the page's own budget's
    label, "updates": {SENTENCE: the page's own updates}}."""
    budgets = read_json_arg("--budgets", text, claims, lambda parsed: [
        sentence for level in parsed.get("levels", []) for sentence in level["claims"]]
        + list(parsed.get("updates", {})))
    return {"levels": [], "final": "100%", "updates": {}, **budgets}


def at_budgets(claims: list[Claim], budgets: dict, sigs: dict[int, dict], table: pd.DataFrame):
    """Each claim at each shorter budget (`parse_budgets`), judged as the page judges it (each budget a
    family of its own under the page's procedure, its seed noise pooled over the central claims at that
    budget), then at the page's own: the rows (BUDGET_COLUMNS), each claim's Δ BLEU per seed pair at
    each budget ({sentence: budget.bleu_at_budgets}) and the reading's clause on verdicts that change
    with the budget."""
    rows, points = [], {}
    for level in budgets["levels"]:
        here = [replace(claim, significance=level["claims"][claim.text]["significance"])
                if claim.text in level["claims"] else replace(claim, comparable=False, significance=NOT_MEASURED)
                for claim in claims]
        entries = load(here)
        judged = assess(here, entries, seed_noises(level["pool"], [here[i].metric for i in entries]))
        for i in entries:
            updates = level["claims"][claims[i].text]["updates"]
            label = level["claims"][claims[i].text].get("label", level["label"])  # the share its window reaches
            rows.append({"budget": label, "updates": updates, **judged.iloc[i].to_dict()})
            points.setdefault(claims[i].text, []).append((updates, entries[i]))
    for i, claim in enumerate(claims):
        if claim.text in points and i in sigs:
            rows.append({"budget": budgets["final"], "updates": budgets["updates"][claim.text], **table.iloc[i].to_dict()})
            points[claim.text].append((budgets["updates"][claim.text], sigs[i]))
    found = pd.DataFrame(rows, columns=COLUMNS + HIDDEN + ["budget", "updates"])
    order = {claim.text: i for i, claim in enumerate(claims)}
    found = found.sort_values(["claim", "updates"], key=lambda c: c.map(order) if c.name == "claim" else c, kind="stable")
    changing = [text for text, rows in found.groupby("claim", sort=False)
                if rows["verdict"].map(verdict_word).nunique() > 1]
    clause = ""
    if changing:
        each = "; ".join(f"{text} (" + ", ".join(
            f"{verdict_word(v)} at {u:,}" for u, v in zip(rows["updates"], rows["verdict"])) + " updates)"
            for text, rows in found[found["claim"].isin(changing)].groupby("claim", sort=False))
        clause = f" The verdict changes with the training budget for {len(changing)} of them: {each}."
    return found, {text: budget.bleu_at_budgets(p) for text, p in points.items()}, clause


def parse_others(text: str, claims: list[Claim]) -> dict:
    """--others' JSON: {SCALE: {"claims": {SENTENCE: JSON}, "pool": {NAME: JSON}}}, other scales' tests of
    these claims (a results tree in this checkout, or measured elsewhere and kept as data)."""
    return read_json_arg("--others", text, claims,
                         lambda others: [sentence for spec in others.values() for sentence in spec["claims"]])


def elsewhere(claims: list[Claim], table: pd.DataFrame, others: dict, scale: str | None) -> str:
    """The reading's clause on each claim whose verdict at another scale (`parse_others`; judged by this
    page's procedure over the claims that scale holds, with that scale's pooled seed noise) is another
    word than this run's: a converged run that finds no gain where the laptop's does says so here."""
    ours = dict(zip(table["claim"], table["verdict"].map(verdict_word)))
    clauses = []
    for other, spec in others.items():
        held = [replace(claim, significance=spec["claims"][claim.text]) for claim in claims if claim.text in spec["claims"]]
        held = [claim for claim in held if not ours[claim.text].startswith(UNJUDGED)]
        if not held:
            continue
        theirs = build_claims(held, spec["pool"])
        differing = [f"{text} ({ours[text]} here, {verdict_word(v)} there)"
                     for text, v in zip(theirs["claim"], theirs["verdict"])
                     if not v.startswith(UNJUDGED) and verdict_word(v) != ours[text]]
        if differing:
            clauses.append(f" At {other} the verdict differs from this run's ({scale or 'this scale'}) for "
                           f"{len(differing)}: {'; '.join(differing)}.")
    return "".join(clauses)


def over_training(claims: list[Claim], curves: dict, table: pd.DataFrame, scale: str | None):
    """The gap over training of each claim `curves` names (gaps.py): the table with the qualifier of a
    closing gap added to its verdict, the reading's clause on them, and the small multiples' panels
    (empty where `curves` names none)."""
    panels, closing = {}, []
    verdicts = table["verdict"].copy()
    for row, claim in enumerate(claims):
        if claim.text not in curves:
            continue
        found = budget.gaps(curves[claim.text]["system"], curves[claim.text]["baseline"])
        trend = budget.trend(found)
        panels[claim.text] = (found, trend, claim.direction if claim.margin is None else 1)
        words = budget.qualifier(trend)
        if words:
            verdicts.iloc[row] = f"{verdicts.iloc[row]}; {words}"
            closing.append(claim.text)
    clause = (f" The gap in validation NLL was closing when training stopped for {len(closing)} of them: "
              f"{'; '.join(closing)}." if closing else "")
    return table.assign(verdict=verdicts), clause, panels


def run_claims(args) -> None:
    claims = empty_subsets(mark_primaries([parse_claim(spec)[0] for spec in args.claim], args.primary))
    curves, budgets = parse_curves(args.curves, claims), parse_budgets(args.budgets, claims)
    sigs, pool = load(claims), parse_pool(args.pool)
    noises = seed_noises(pool, [claims[i].metric for i in sigs])
    judged = assess(claims, sigs, noises)
    second, second_noise = in_second_metric(claims, judged, pool)
    table, closing, panels = over_training(claims, curves, judged, args.scale)
    table = pd.concat([table, second], axis=1)
    by_budget, points, changing = at_budgets(claims, budgets, sigs, table)
    changing += elsewhere(claims, table, parse_others(args.others, claims), args.scale)
    note = " ".join([claims_note(claims, list(sigs.values()), {**noises, **second_noise}), SECOND_NOTE, *args.note])
    plot = forest_plot(claims, table, args.scale)
    save_figure(plot, None, args.out_svg)
    figures = [(figure_svg(plot), Path(args.out_svg).name)]
    if args.out_gap_svg:   # a page without curves (no claim trained at this scale) says so in the figure
        gap_plot = budget.gap_figure(panels, args.scale, points) if panels else budget.no_curves(args.scale)
        save_figure(gap_plot, None, args.out_gap_svg)
        figures.append((figure_svg(gap_plot), Path(args.out_gap_svg).name))
    if args.out_gap_tsv:
        budget.write_gaps(args.out_gap_tsv, panels)
    shown = shown_table(table)
    sections = []
    if not by_budget.empty:
        budgets_shown = shown_table(by_budget)[BUDGET_COLUMNS]
        sections.append(("The claims at each training budget", budgets_shown,
                         ["right" if column in NUMERIC + ("budget", "updates") else "left" for column in BUDGET_COLUMNS]))
    write_table(shown, args.title, note, args.out_md, args.out_html,
                colalign=["right" if column in NUMERIC else "left" for column in shown.columns],
                reading=reading(table) + disagreements(claims, table) + closing + changing, figures=figures,
                sections=sections)
