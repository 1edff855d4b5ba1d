"""`nmtrepro claims`: each paper's claims beside what this run measured, with a verdict.

A claim is config data (a paper file's `claims`): a sentence, the experiment and the baseline it
compares, and the difference the paper printed. Ours is the paired bootstrap of the same two
experiments (`nmtrepro significance`); the verdict follows from it alone, never from typing:

- reproduced: our difference has the paper's sign and p < ALPHA;
- not reproduced: it has the other sign, or p >= ALPHA (no evidence of the paper's effect here);
- not comparable at this scale: the claim names the scales where its comparison means something
  (e.g. a claim about models trained to the paper's budget) and this is not one of them.

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
COLUMNS = ["claim", "metric", "paper Δ", "ours Δ", "95% CI of ours", "p", "verdict"]


@dataclass(frozen=True)
class Claim:
    text: str
    paper_delta: float
    metric: str                # the BLEU of the significance JSON it reads: tok_bleu or sacrebleu
    significance: str          # paired-bootstrap JSON of the claim's experiment vs its baseline
    comparable: bool = True
    paper_says: str = ""       # the word the paper qualifies the claim by ("marginally"), if any


def verdict(paper_delta: float, ours_delta: float, p_value: float, comparable: bool) -> str:
    if not comparable:
        return "not comparable at this scale"
    if ours_delta * paper_delta > 0 and p_value < ALPHA:
        return "reproduced"
    return "not reproduced"


def build_claims(claims: list[Claim]) -> pd.DataFrame:
    rows = []
    for claim in claims:
        sig = read_significance(claim.significance, claim.metric)
        ours = sig["score"] - sig["baseline"]
        rows.append({"claim": claim.text, "metric": METRICS[claim.metric], "paper Δ": claim.paper_delta, "ours Δ": ours,
                     "95% CI of ours": (f"{sig['ci_low'] - sig['baseline']:+.2f} to "
                                        f"{sig['ci_high'] - sig['baseline']:+.2f}"),
                     "p": sig["p_value"], "verdict": verdict(claim.paper_delta, ours, sig["p_value"], claim.comparable)
                     + (f" (the paper: {claim.paper_says})" if claim.paper_says else "")})
    return pd.DataFrame(rows, columns=COLUMNS)


FORMAT = "PAPER_DELTA[:WORD]=METRIC=yes|no=SIGNIFICANCE_JSON=TEXT"


def parse_claim(spec: str) -> Claim:
    """FORMAT: the paper's difference (with the word it qualifies it by: "0.09:marginally"), the metric,
    whether comparable at this scale, the paired bootstrap JSON and the sentence (which may contain '=')."""
    parts = spec.split("=", 4)
    if len(parts) != 5 or parts[1] not in METRICS or parts[2] not in ("yes", "no") or not parts[4]:
        raise InputError(f"--claim wants {FORMAT} (METRIC one of {sorted(METRICS)}), got {spec!r}")
    number, _, says = parts[0].partition(":")
    try:
        delta = float(number)
    except ValueError:
        raise InputError(f"--claim {spec!r}: the paper's difference {number!r} is not a number") from None
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
                            "ours Δ": table["ours Δ"].map("{:+.2f}".format),
                            "p": table["p"].map("{:.3f}".format)})
    note = " ".join([f"Ours: the difference of the claim's system and baseline on this run's test set, "
                     f"paired bootstrap (sacreBLEU, 1000 resamples). Reproduced: the paper's sign and "
                     f"p < {ALPHA}; not reproduced: the other sign or p ≥ {ALPHA}.", *args.note])
    write_table(shown, args.title, note, args.out_md, args.out_html,
                colalign=["left", "left", "right", "right", "right", "right", "left"])
