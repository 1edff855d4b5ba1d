"""Each claim of a claims page judged against what this run measured: its test, its verdict, the page's
procedure. The page itself (its words, table and plots) is reporting's (reporting/claims.py).

A claim is config data (a paper file's `claims`): a sentence, the experiment and the baseline it
compares, and the difference the paper printed. Ours is the test of the same two experiments over the
seeds both trained, with the seed noise of its recipe (its two model families) pooled over the run's
multi-seed comparisons of it (the central claims', the page's pool; seed_noise.py, which says what a
claim of an unmeasured recipe takes) and the claim's own test-set noise from its paired
bootstrap; the verdict follows from it alone, never from typing. Each claim is a one-sided hypothesis
(its `tested` column): the paper's direction (Δ > 0, or Δ < 0 for a negative paper Δ), or for a claim of
no gain ("the reordering layer does not help", a `margin`) non-superiority, Δ below the margin.

A page is one family under the fallback procedure (a graphical procedure, Bretz et al. 2009): its
primary claim (the paper's central one, `Claim.primary`) is tested two-sided (both a false "reproduced" and
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
its recipe, nor a system of each of its families, at this scale to pool the seed noise from);
or not judged, where the claim's subset of the test set is empty (a length bucket without sentences at
this scale: `empty_subsets`).

Where the paper qualifies its claim ("the stack strategy marginally outperforms ..."), its word stands
beside the verdict. Each row also says whether the paper's Δ lies inside our interval.

A claim may be on a quantity an analysis measures instead of a metric (quantities.py: paper C's
segment length, paper D's head similarity and probing accuracies; `nmtrepro quantity-test` writes its JSON
in the significance JSON's shape): the same test, verdicts and family, its models held to the BLEU floor by the BLEU of the
same seeds that its JSON carries (`floor`); its seed noise pools as a metric's, over the pool's tests of the
same quantity (pooled.py), and it is not judged again in chrF.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .metrics import METRICS, SECOND_METRIC
from .multiplicity import holm
from .pooled import MIN_BASELINE_BLEU, collapsed, floor_of, read_entry, seed_noises, significance_json
from .quantities import QUANTITIES

if TYPE_CHECKING:
    from .seed_noise import SeedNoise
    from .significance import MeanDifference

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
    id: str = ""               # its key in the page's inputs: its name in the config (reporting/claims_inputs.py)

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
        data = significance_json(path)
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
    # scipy, only for the pages that judge: a results table reads its p's words here too (format_p)
    from .seed_noise import SeedNoise
    from .significance import MeanDifference

    unjudged = {i: collapsed(floor_of(claims[i].significance, claims[i].metric, sig)) for i, sig in sigs.items()}
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
UNJUDGED = ("not comparable", "seed noise unmeasured", NOT_JUDGED)  # a verdict's first words where none was given


def verdict_word(text: str) -> str:
    """A verdict's first words, before its cause, numbers or qualifier: what the forest plot prints."""
    return re.split(r" \(|:|;", text)[0]


def format_p(value: float) -> str:
    """A p-value with 3 decimals; below 0.001 (10,000 resamples reach 0.0001) "<0.001", not "0.000": in a
    verdict's words, and in a page's and a results table's cells."""
    if pd.isna(value):
        return ""
    return "<0.001" if value < 0.001 else f"{value:.3f}"


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
