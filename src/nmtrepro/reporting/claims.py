"""`nmtrepro claims`: each paper's claims beside what this run measured, with a verdict.

A claim is config data (a paper file's `claims`): a sentence, the experiment and the baseline it
compares, and the difference the paper printed. Ours is the seed-pooled paired bootstrap of the same two
experiments (`nmtrepro significance`: sentences and seed pairs resampled); the verdict follows from it
alone, never from typing:

- reproduced: our mean difference has the paper's sign, p < ALPHA, and most seed pairs (more than half)
  have the paper's sign too, so that one lucky seed cannot carry a verdict;
- not reproduced: the other sign, p >= ALPHA (no evidence of the paper's effect here), or the seeds split
  against it;
- not comparable at this scale: the claim names the scales where its comparison means something
  (e.g. a claim about a model that trains at paper scale only) and this is not one of them; nothing is
  measured for it.

Where the paper qualifies its claim ("the stack strategy marginally outperforms ..."), its word stands
beside the verdict: a small difference that is not reproduced is what such a claim leads one to expect.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from ..core.files import InputError
from .render import write_table
from .report import read_significance

ALPHA = 0.05
METRICS = {"tok_bleu": "tokenized BLEU", "sacrebleu": "sacreBLEU"}
COLUMNS = ["claim", "metric", "paper Δ", "ours Δ", "Δ per seed", "95% CI of ours", "p", "verdict"]
NOT_MEASURED = "-"  # the significance path of a claim not comparable at this scale


@dataclass(frozen=True)
class Claim:
    text: str
    paper_delta: float
    metric: str                # the BLEU of the significance JSON it reads: tok_bleu or sacrebleu
    significance: str          # pooled paired-bootstrap JSON of the claim's experiment vs its baseline
    comparable: bool = True
    paper_says: str = ""       # the word the paper qualifies the claim by ("marginally"), if any


def verdict(paper_delta: float, ours_delta: float, p_value: float, comparable: bool,
            seed_deltas: list[float] = ()) -> str:
    """The verdict (module docstring); `seed_deltas` are the differences of each seed pair."""
    if not comparable:
        return "not comparable at this scale"
    agreeing = sum(delta * paper_delta > 0 for delta in seed_deltas)
    if ours_delta * paper_delta > 0 and p_value < ALPHA and 2 * agreeing > len(seed_deltas):
        return "reproduced"
    return "not reproduced"


def build_claims(claims: list[Claim]) -> pd.DataFrame:
    rows = []
    for claim in claims:
        says = f" (the paper: {claim.paper_says})" if claim.paper_says else ""
        if not claim.comparable:
            rows.append({"claim": claim.text, "metric": METRICS[claim.metric], "paper Δ": claim.paper_delta,
                         "ours Δ": float("nan"), "Δ per seed": "", "95% CI of ours": "", "p": float("nan"),
                         "verdict": verdict(claim.paper_delta, 0.0, 1.0, False) + says})
            continue
        sig = read_significance(claim.significance, claim.metric)
        ours = sig["score"] - sig["baseline"]
        deltas = [entry["delta"] for entry in sig["seeds"]]
        rows.append({"claim": claim.text, "metric": METRICS[claim.metric], "paper Δ": claim.paper_delta, "ours Δ": ours,
                     "Δ per seed": " / ".join(f"{e['delta']:+.2f} (seed {e['seed']})" for e in sig["seeds"]),
                     "95% CI of ours": f"{sig['delta_low']:+.2f} to {sig['delta_high']:+.2f}",
                     "p": sig["p_value"],
                     "verdict": verdict(claim.paper_delta, ours, sig["p_value"], True, deltas) + says})
    return pd.DataFrame(rows, columns=COLUMNS)


FORMAT = "PAPER_DELTA[:WORD]=METRIC=yes|no=SIGNIFICANCE_JSON=TEXT"


def parse_claim(spec: str) -> Claim:
    """FORMAT: the paper's difference (with the word it qualifies it by: "0.09:marginally"), the metric,
    whether comparable at this scale, the paired bootstrap JSON (NOT_MEASURED where not comparable) and
    the sentence (which may contain '=')."""
    parts = spec.split("=", 4)
    if len(parts) != 5 or parts[1] not in METRICS or parts[2] not in ("yes", "no") or not parts[4]:
        raise InputError(f"--claim wants {FORMAT} (METRIC one of {sorted(METRICS)}), got {spec!r}")
    number, _, says = parts[0].partition(":")
    try:
        delta = float(number)
    except ValueError:
        raise InputError(f"--claim {spec!r}: the paper's difference {number!r} is not a number") from None
    if (parts[2] == "yes") == (parts[3] == NOT_MEASURED):
        raise InputError(f"--claim {spec!r}: a comparable claim needs its significance JSON, and one not "
                         f"comparable at this scale names none ({NOT_MEASURED!r})")
    return Claim(text=parts[4], paper_delta=delta, metric=parts[1], significance=parts[3],
                 comparable=parts[2] == "yes", paper_says=says)


def add_arguments_claims(parser) -> None:
    parser.add_argument("--title", required=True)
    parser.add_argument("--claim", action="append", required=True, metavar=FORMAT,
                        help="a claim: the paper's difference, the BLEU it is in, whether it is comparable "
                             "at this scale, the paired bootstrap of its two experiments, its sentence (repeat)")
    parser.add_argument("--note", action="append", default=[], help="a paragraph under the table (repeat)")
    parser.add_argument("--out-md", required=True)
    parser.add_argument("--out-html", required=True)


def run_claims(args) -> None:
    table = build_claims([parse_claim(spec) for spec in args.claim])
    shown = table.assign(**{"paper Δ": table["paper Δ"].map("{:+.2f}".format),
                            "ours Δ": table["ours Δ"].map(lambda v: "" if pd.isna(v) else f"{v:+.2f}"),
                            "p": table["p"].map(lambda v: "" if pd.isna(v) else f"{v:.3f}")})
    note = " ".join([f"Ours: the difference of the claim's system and baseline on this run's test set, the mean "
                     f"over the seeds both were trained with (each seed pair's own difference beside it). p: a "
                     f"paired bootstrap that resamples both the test sentences and the seed pairs (1000 "
                     f"resamples; sacreBLEU's statistics and p-value, and with one seed exactly sacreBLEU's "
                     f"paired bootstrap), so that it sees the test-set sample and the seed variance; 95% CI of "
                     f"ours over those resamples. Reproduced: the paper's sign, p < {ALPHA}, and more than "
                     f"half of the seed pairs with the paper's sign; not reproduced: otherwise.", *args.note])
    write_table(shown, args.title, note, args.out_md, args.out_html,
                colalign=["left", "left", "right", "right", "left", "right", "right", "left"])
