"""`nmtrepro claims`: each paper's claims beside what this run measured, with a verdict.

A claim is config data (a paper file's `claims`): a sentence, the experiment and the baseline it
compares, and the difference the paper printed. Ours is the test of the same two experiments over the
seeds both trained (`nmtrepro significance`: the seeds' spread and the test set's shared noise, against
Satterthwaite's t); the verdict follows from it
alone, never from typing. Each claim is a one-sided hypothesis (its `tested` column): the paper's
direction (Δ > 0, or Δ < 0 for a negative paper Δ), or for a claim of no gain ("the reordering layer does
not help", a `margin`) non-superiority, Δ below the margin. The verdicts:

- reproduced: the one-sided p of that hypothesis < ALPHA (after Holm's correction over the page's one
  family, both directions of every claim, except on the page of primary claims), and our mean and more
  than half of the seed pairs on the claim's side, so that one lucky seed cannot carry a verdict;
- contradicted: the same the other way (significantly the opposite direction, or a gain beyond the
  margin), in the same family;
- not reproduced: neither; this run cannot tell, which is no evidence against the paper;
- not comparable at this scale: the claim names the scales where its comparison means something (e.g.
  a claim about a model that trains at paper scale only) and this is not one of them (unmeasured); or
  its baseline scores below MIN_BASELINE_BLEU, so neither system has learned to translate and their
  difference is that of two degenerate decoders (the `ci` and `smoke` runs' models): its numbers are
  shown, with no verdict, and it stays out of the page's family of tests.

Where the paper qualifies its claim ("the stack strategy marginally outperforms ..."), its word stands
beside the verdict: a small difference that is not reproduced is what such a claim leads one to expect.
Beside the direction, each row says whether the paper's difference lies inside our interval ("size").
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..core.files import InputError
from ..evaluation.multiplicity import holm
from ..evaluation.significance import MeanDifference
from .render import PALETTE, Label, figure, figure_svg, save_figure, write_table
from .report import format_p, read_significance, resampling

ALPHA = 0.05
CONFIDENCE = 1 - 2 * ALPHA  # the interval whose bounds are the one-sided tests at ALPHA: 90%
CI = f"{CONFIDENCE:.0%} CI of ours"
METRICS = {"tok_bleu": "tokenized BLEU", "sacrebleu": "sacreBLEU"}
COLUMNS = ["claim", "metric", "paper Δ", "tested", "ours Δ", "Δ per seed", CI, "p", "Holm p", "verdict", "size"]
CORRECTIONS = ("holm", "none")
NOT_MEASURED = "-"  # the significance path of a claim not comparable at this scale
# Below this baseline BLEU a claim is not judged: a model there writes a few frequent words, and two such
# models can "agree" on 0.00 (a claim of no gain reproduced) or differ by a lucky n-gram. Every trained
# baseline of `tiny` and above scores 19 or more; `ci` and `smoke` models score 0-2.
MIN_BASELINE_BLEU = 5.0


@dataclass(frozen=True)
class Claim:
    text: str
    paper_delta: float
    metric: str                # the BLEU of the significance JSON it reads: tok_bleu or sacrebleu
    significance: str          # pooled paired-bootstrap JSON of the claim's experiment vs its baseline
    comparable: bool = True
    paper_says: str = ""       # the word the paper qualifies the claim by ("marginally"), if any
    margin: float | None = None  # a claim of no gain: tested as Δ < margin (non-superiority)

    @property
    def direction(self) -> int:
        """+1 where the claim is that the experiment beats the baseline, -1 where it trails it or (a claim
        of no gain) falls short of the margin."""
        return -1 if self.margin is not None else int(np.sign(self.paper_delta))

    @property
    def threshold(self) -> float:
        return 0.0 if self.margin is None else self.margin


def translates(sig: dict) -> bool:
    """Whether a claim's test has a baseline that translates (its BLEU, the mean over the seed pairs, at
    least MIN_BASELINE_BLEU): only such a claim gets a verdict."""
    return sig["baseline"] >= MIN_BASELINE_BLEU


def hypothesis(direction: int, threshold: float) -> str:
    """The one-sided alternative as the page prints it: "Δ > 0", "Δ < +0.30"."""
    return f"Δ {'>' if direction > 0 else '<'} {f'{threshold:+.2f}' if threshold else '0'}"


def verdict(p_for: float, p_against: float, sides: list[int]) -> str:
    """The verdict of a measured claim (module docstring) from the p's of its hypothesis and of the
    opposite one (adjusted where the page corrects) and the side of the claim's threshold that our mean
    (sides[0]) and each seed pair (the rest) fall on: +1 the claim's, -1 the other."""
    ours, seeds = sides[0], sides[1:]
    if p_for < ALPHA and ours > 0 and 2 * seeds.count(1) > len(seeds):
        return "reproduced"
    if p_against < ALPHA and ours < 0 and 2 * seeds.count(-1) > len(seeds):
        return "contradicted"
    return "not reproduced"


def build_claims(claims: list[Claim], correction: str = "holm") -> pd.DataFrame:
    """The claims page's rows. `correction` "holm" adjusts each direction's p's over the page's judged
    claims (a paper's page); "none" tests each claim on its own (the primary claims, one a paper). A claim
    measured against a baseline that does not translate shows its numbers and no verdict."""
    sigs = {i: read_significance(claim.significance, claim.metric) for i, claim in enumerate(claims) if claim.comparable}
    tests = {i: MeanDifference.of(sig) for i, sig in sigs.items()}
    raw = {i: [tests[i].p(side * claims[i].direction, claims[i].threshold) for side in (1, -1)]
           for i in sigs}                                  # [the claim's hypothesis, the opposite one]
    family = [i for i, sig in sigs.items() if translates(sig)]
    # One family: both directions of every judged claim on the page, so that the chance of any wrong
    # decisive verdict on it (a false "reproduced" or a false "contradicted") stays at ALPHA.
    flat = [p for i in family for p in raw[i]]
    adjusted = holm(flat) if correction == "holm" else flat
    adjusted_for = dict(zip(family, adjusted[0::2]))
    adjusted_against = dict(zip(family, adjusted[1::2]))
    rows = []
    for i, claim in enumerate(claims):
        says = f" (the paper: {claim.paper_says})" if claim.paper_says else ""
        row = {"claim": claim.text, "metric": METRICS[claim.metric], "paper Δ": claim.paper_delta,
               "tested": hypothesis(claim.direction, claim.threshold)}
        if i not in sigs:
            rows.append({**row, "ours Δ": float("nan"), "Δ per seed": "", CI: "", "p": float("nan"),
                         "Holm p": float("nan"), "verdict": "not comparable at this scale" + says, "size": ""})
            continue
        seeds, ours = sigs[i]["seeds"], tests[i].delta
        low, high = tests[i].bounds(CONFIDENCE)
        row.update({"ours Δ": ours, "Δ per seed": " / ".join(f"{e['delta']:+.2f} (seed {e['seed']})" for e in seeds),
                    CI: f"{low:+.2f} to {high:+.2f}", "p": raw[i][0]})
        if i not in adjusted_for:
            rows.append({**row, "Holm p": float("nan"), "size": "", "verdict": "not comparable at this scale (its "
                         f"baseline scores {sigs[i]['baseline']:.2f}, below {MIN_BASELINE_BLEU:g} BLEU)" + says})
            continue
        sides = [int(np.sign(claim.direction * (delta - claim.threshold)))
                 for delta in [ours] + [entry["delta"] for entry in seeds]]
        found = verdict(adjusted_for[i], adjusted_against[i], sides)
        if found == "contradicted":
            holm_p = f", Holm {format_p(adjusted_against[i])}" if correction == "holm" else ""
            found += f" ({hypothesis(-claim.direction, claim.threshold)}: p {format_p(raw[i][1])}{holm_p})"
        rows.append({**row, "Holm p": adjusted_for[i], "verdict": found + says,
                     "size": "consistent" if low <= claim.paper_delta <= high else "paper Δ outside"})
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table if correction == "holm" else table.drop(columns="Holm p")


def claims_note(claims: list[Claim], correction: str) -> str:
    """The note under a claims page: what ours and p are, how the page treats multiplicity, and in two
    sentences what its verdicts mean."""
    measured = [claim for claim in claims if claim.comparable]
    sigs = [read_significance(claim.significance, claim.metric) for claim in measured]
    runs = resampling(sigs) or "none run"
    one_seed = [claim.text for claim, sig in zip(measured, sigs) if len(sig["seeds"]) == 1]
    ours = (f"Ours: the difference of the claim's system and baseline on this run's test set, the mean over the "
            f"seeds both were trained with (each seed pair's own difference beside it). p: one-sided, of the "
            f"hypothesis in 'tested' (the paper's direction; for a claim of no gain, a difference below the "
            f"stated margin), from the mean difference over the estimate of its standard error: the seed "
            f"pairs' spread plus the test set's part that all pairs share (a paired bootstrap of the sentences, "
            f"{runs}), against a t distribution with Satterthwaite's degrees of freedom; {CI}: the interval "
            f"these p's invert, each bound a one-sided test at {ALPHA}. Size: whether the paper's Δ lies inside "
            f"that interval.")
    if one_seed:
        ours += (f" {len(one_seed)} of the {len(measured)} measured claims rest on one seed pair, whose seed "
                 f"variance is unmeasured: their p's count the test set's noise only, and reject a true null "
                 f"more often than {ALPHA} where seeds vary (Clark et al. 2011).")
    if correction == "holm":
        multiplicity = (f"Holm p: each p adjusted by Holm's method over one family, both directions of this "
                        f"page's {sum(map(translates, sigs))} judged claims, so that the chance of any wrong "
                        f"decisive verdict on the page (a false 'reproduced' or 'contradicted') stays at {ALPHA}; the "
                        f"verdicts read the adjusted p's, the CI is unadjusted.")
        level = f"at {ALPHA} after that correction"
    else:
        multiplicity = (f"These are the primary claims, one a paper, each tested on its own (no correction for "
                        f"multiplicity): a claim with no true difference reads 'reproduced' with chance {ALPHA} "
                        f"and 'contradicted' with chance {ALPHA}; each paper's page tests it again among that "
                        f"paper's other claims, with Holm's correction.")
        level = f"at {ALPHA}"
    meaning = (f"Reproduced means this run shows what the claim says {level} (the paper's direction, or for a "
               f"claim of no gain a difference below its margin), with our mean and most seed pairs on that "
               f"side; contradicted means it shows the opposite as firmly (the other direction, or a gain "
               f"beyond the margin). Not reproduced means this run cannot tell either way at its size, which is "
               f"no evidence against the paper, and 'not comparable' that its comparison was not made at this "
               f"scale, or that its baseline scores below {MIN_BASELINE_BLEU:g} BLEU: a model that has not learned "
               f"to translate, beside which a difference tests nothing.")
    return " ".join([ours, multiplicity, meaning])


# A verdict's label class (render.STYLE) by its first words.
LABEL_KINDS = {"reproduced": "good", "contradicted": "bad", "not reproduced": "open", "not comparable": "none"}


def verdict_label(text: str) -> Label:
    return Label(text, next(kind for start, kind in LABEL_KINDS.items() if text.startswith(start)))


def reading(table: pd.DataFrame) -> str:
    """The page in one line: how many of its measured claims each verdict got."""
    verdicts = table["verdict"]
    measured = ~verdicts.str.startswith("not comparable")
    unmeasured = int((~measured).sum())
    if not measured.any():
        return f"No claim judged at this scale: {unmeasured} not comparable."
    counts = {word: int(verdicts[measured].str.startswith(word).sum())
              for word in ("reproduced", "contradicted", "not reproduced")}
    line = (f"{counts['reproduced']} of {int(measured.sum())} measured claims reproduced, "
            f"{counts['contradicted']} contradicted, {counts['not reproduced']} not reproduced "
            f"(this run cannot tell: our interval holds the claim's threshold)")
    return line + (f"; {unmeasured} not comparable at this scale." if unmeasured else ".")


def forest_plot(claims: list[Claim], table: pd.DataFrame, scale: str | None = None):
    """One row a claim, top to bottom in the page's order: our mean difference (dot) with its interval
    (line) and each seed pair's difference (small grey dots), the paper's (diamond), zero and, for a
    claim of no gain, its margin (dashed); the verdict's word at the right. A claim unmeasured at this
    scale shows the paper's difference alone."""
    import textwrap

    n = len(claims)
    fig = figure(f"Δ BLEU: ours ({CONFIDENCE:.0%} CI, seed pairs) beside the paper's", scale,
                 figsize=(9.5, 0.9 + 0.62 * n))
    ax = fig.subplots()
    ax.axvline(0, color="#444", linewidth=0.9, zorder=1)
    for row, (claim, verdict_text) in enumerate(zip(claims, table["verdict"])):
        y = n - 1 - row
        if claim.margin is not None:
            ax.plot([claim.margin] * 2, [y - 0.35, y + 0.35], "--", color="#777", linewidth=1, zorder=1)
        if claim.comparable:
            sig = read_significance(claim.significance, claim.metric)
            test = MeanDifference.of(sig)
            low, high = test.bounds(CONFIDENCE)
            ax.plot([low, high], [y, y], color=PALETTE[0], linewidth=2.2, solid_capstyle="butt", zorder=2)
            seeds = [entry["delta"] for entry in sig["seeds"]]
            ax.scatter(seeds, [y - 0.18] * len(seeds), s=14, color="#8a8a8a", zorder=3)
            ax.scatter([test.delta], [y], s=42, color=PALETTE[0], zorder=4)
        ax.scatter([claim.paper_delta], [y], marker="D", s=40, color=PALETTE[3], zorder=5)
        ax.annotate(verdict_text.split(" (")[0], (1.01, y), xycoords=("axes fraction", "data"), va="center",
                    fontsize=8.5, color={"good": "#14532d", "bad": "#7f1d1d"}.get(verdict_label(verdict_text).kind, "#444"))
    ax.set_yticks(range(n), ["\n".join(textwrap.wrap(c.text, 48)) for c in reversed(claims)], fontsize=8.5)
    ax.set_ylim(-0.7, n - 0.3)
    ax.grid(axis="y", visible=False)
    ax.set_xlabel("Δ BLEU (system − baseline)")
    handles = [ax.scatter([], [], s=42, color=PALETTE[0], label=f"ours: mean, {CONFIDENCE:.0%} CI"),
               ax.scatter([], [], s=14, color="#8a8a8a", label="ours: each seed pair"),
               ax.scatter([], [], marker="D", s=40, color=PALETTE[3], label="paper")]
    ax.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=3, frameon=False)
    return fig


FORMAT = "PAPER_DELTA[<MARGIN][:WORD]=METRIC=yes|no=SIGNIFICANCE_JSON=TEXT"


def parse_claim(spec: str) -> Claim:
    """FORMAT: the paper's difference (a claim of no gain adds its margin, "-0.65<0.3"; the word the
    paper qualifies the claim by follows a colon, "0.09:marginally"), the metric, whether comparable at
    this scale, the paired bootstrap JSON (NOT_MEASURED where not comparable) and the sentence (which may
    contain '=')."""
    parts = spec.split("=", 4)
    if len(parts) != 5 or parts[1] not in METRICS or parts[2] not in ("yes", "no") or not parts[4]:
        raise InputError(f"--claim wants {FORMAT} (METRIC one of {sorted(METRICS)}), got {spec!r}")
    numbers, _, says = parts[0].partition(":")
    number, has_margin, margin = numbers.partition("<")
    try:
        delta, margin = float(number), float(margin) if has_margin else None
    except ValueError:
        raise InputError(f"--claim {spec!r}: {numbers!r} is not a number (PAPER_DELTA[<MARGIN])") from None
    if margin is not None and margin <= 0:
        raise InputError(f"--claim {spec!r}: a claim of no gain needs a positive margin, got {margin}")
    if margin is None and delta == 0:
        raise InputError(f"--claim {spec!r}: a claim of a difference needs a non-zero paper difference "
                         f"(a claim of no gain names its margin: PAPER_DELTA<MARGIN)")
    if (parts[2] == "yes") == (parts[3] == NOT_MEASURED):
        raise InputError(f"--claim {spec!r}: a comparable claim needs its significance JSON, and one not "
                         f"comparable at this scale names none ({NOT_MEASURED!r})")
    return Claim(text=parts[4], paper_delta=delta, metric=parts[1], significance=parts[3],
                 comparable=parts[2] == "yes", paper_says=says, margin=margin)


def add_arguments_claims(parser) -> None:
    parser.add_argument("--title", required=True)
    parser.add_argument("--claim", action="append", required=True, metavar=FORMAT,
                        help="a claim: the paper's difference (and a claim of no gain's margin), the BLEU it "
                             "is in, whether it is comparable at this scale, the paired bootstrap of its two "
                             "experiments, its sentence (repeat)")
    parser.add_argument("--correction", choices=CORRECTIONS, default="holm",
                        help="holm: Holm's correction over the page's claims (a paper's page); none: each "
                             "claim on its own (the primary claims, one a paper)")
    parser.add_argument("--note", action="append", default=[], help="a paragraph under the table (repeat)")
    parser.add_argument("--scale", help="the configured scale, named on the plot")
    parser.add_argument("--out-md", required=True)
    parser.add_argument("--out-html", required=True, help="the page, its forest plot inline")
    parser.add_argument("--out-svg", required=True, help="the forest plot, which the Markdown page links")


def run_claims(args) -> None:
    claims = [parse_claim(spec) for spec in args.claim]
    table = build_claims(claims, args.correction)
    shown = table.assign(**{"paper Δ": table["paper Δ"].map("{:+.2f}".format),
                            "ours Δ": table["ours Δ"].map(lambda v: "" if pd.isna(v) else f"{v:+.2f}")},
                         **{column: table[column].map(format_p) for column in ("p", "Holm p") if column in table})
    note = " ".join([claims_note(claims, args.correction), *args.note])
    plot = forest_plot(claims, table, args.scale)
    save_figure(plot, None, args.out_svg)
    write_table(shown.assign(verdict=shown["verdict"].map(verdict_label)), args.title, note, args.out_md,
                args.out_html, colalign=["right" if column in ("paper Δ", "ours Δ", CI, "p", "Holm p") else "left"
                                         for column in shown.columns],
                reading=reading(table), svg=figure_svg(plot), svg_file=Path(args.out_svg).name)
