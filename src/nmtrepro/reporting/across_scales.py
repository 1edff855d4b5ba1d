"""`nmtrepro across-scales`: claims beside the same claims measured at other scales, one row a scale.

A run's claims pages know only its own scale; a researcher who has run two (`tiny` on a laptop, `gpu`
converged) wants to see how each answer moves with baseline strength and training. This page reads every
scale whose results tree holds a claim's significance JSON (the rule finds them) and, per claim, sets
one row a scale: the baseline's BLEU, ours Δ per seed and pooled with its interval, the verdict by that
scale's procedure over the page's claims it holds, with that scale's seed noise (its own claims page's
verdict where it built that page whole), and whether the paper's Δ lies inside the interval; the forest
plot draws a line a (claim, scale), and the gap in validation NLL over training draws each scale's
curves of a claim in one panel (the inputs' `gaps`: each scale's claims page wrote them; a scale
measured elsewhere keeps them beside its JSONs). Its inputs are one document (claims_inputs.py). A JSON
written by an earlier version of the test is named in the reading, not read (and not pooled).
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from ..core.files import InputError
from ..evaluation.pooled import read_entry
from ..evaluation.quantities import QUANTITIES
from ..evaluation.verdicts import CI, HIDDEN, METRIC_LABELS, Claim, build_claims, empty_subsets
from .claims_inputs import read_scaled_inputs
from .claims_prose import NUMERIC, shown_table
from .forest import forest_plot
from .gaps import no_curves, read_gaps, scales_gap_figure
from .render import figure_svg, save_figure, write_table

COLUMNS = ["claim", "scale", "baseline BLEU", "paper Δ", "ours Δ", "Δ per seed", CI, "MDE", "p", "page p", "verdict",
           "size", *HIDDEN]


def readable(path: str, metrics) -> bool:
    """Whether a significance JSON is of the current test in each of `metrics` (one of another scale may
    predate it)."""
    try:
        for metric in metrics:
            read_entry(path, metric)
    except InputError:
        return False
    return True


def build_across(scaled: list[tuple[str, Claim]], pools: dict[str, dict[str, str]]
                 ) -> tuple[pd.DataFrame, list[Claim], list[str]]:
    """The page's rows (claims in their first order, then scales in theirs), the claims behind them (for
    the plot; each text names its scale) and the (scale, claim) pairs whose JSON predates the test.
    Each scale's verdicts come from `build_claims` over that scale's readable claims, with the seed noise
    pooled over that scale's `pools` ({scale: {name: JSON}}): its own page's test and procedure."""
    scaled = list(zip([scale for scale, _ in scaled], empty_subsets([claim for _, claim in scaled])))
    scales = list(dict.fromkeys(scale for scale, _ in scaled))
    texts = list(dict.fromkeys(claim.text for _, claim in scaled))
    fresh = [not claim.comparable or readable(claim.significance, [claim.metric]) for _, claim in scaled]
    stale = [f"{scale}: {claim.text}" for (scale, claim), ok in zip(scaled, fresh) if not ok]
    found = {}
    for scale in scales:
        claims = [claim for (s, claim), ok in zip(scaled, fresh) if s == scale and ok]
        if claims:
            rows = build_claims(claims, pools.get(scale, {}))
            found.update({(claim.text, scale): (claim, row) for claim, (_, row) in zip(claims, rows.iterrows())})
    rows, shown = [], []
    for text in texts:
        for scale in scales:
            if (text, scale) not in found:
                continue
            claim, row = found[text, scale]
            # baseline BLEU: the mean over the seed pairs of the claim's test, as the test wrote it
            rows.append({"claim": text, "scale": scale, "baseline BLEU": row["_baseline"],
                         **{column: row[column] for column in COLUMNS if column in row.index}})
            shown.append(replace(claim, text=f"{text} [{scale}]"))
    return pd.DataFrame(rows, columns=COLUMNS), shown, stale


def add_arguments_across_scales(parser) -> None:
    parser.add_argument("--title", required=True)
    parser.add_argument("--inputs", required=True, metavar="JSON",
                        help="the page's inputs as one document: each scale's claims by id, the primaries, each "
                             "scale's pool and gaps over training, the notes (nmtrepro.reporting.claims_inputs)")
    parser.add_argument("--out-md", required=True)
    parser.add_argument("--out-html", required=True)
    parser.add_argument("--out-svg", required=True)
    parser.add_argument("--out-gap-svg", help="each claim's gap over training at every scale the inputs' gaps name")


def gap_panels(tables: dict[str, str], texts: list[str]):
    """The small multiples of the claims `texts` at every scale `tables` ({scale: TSV}) names; None where
    none holds a gap of them."""
    gaps = {}
    for scale, path in tables.items():
        for text, table in read_gaps(path).items():
            if text in texts:
                gaps.setdefault(text, {})[scale] = table
    ordered = {text: gaps[text] for text in texts if text in gaps}
    return scales_gap_figure(ordered) if ordered else None


def run_across_scales(args) -> None:
    inputs = read_scaled_inputs(args.inputs)
    # the pools are BLEU comparisons, read in the claims' metrics (a quantity's claims pool none); a scale's
    # pool: those of its JSONs the current test wrote, as for its claims
    metrics = {claim.metric for _, claim in inputs.claims if claim.metric not in QUANTITIES}
    pools = {scale: {name: path for name, path in pool.items() if readable(path, metrics)}
             for scale, pool in inputs.pools.items()}
    table, claims, stale = build_across(inputs.claims, pools)
    scales = list(dict.fromkeys(table["scale"]))
    reading = (f"{len(dict.fromkeys(table['claim']))} claims at {len(scales)} scales ({', '.join(scales)}); "
               + "; ".join(f"{scale}: {int(table[table['scale'] == scale]['verdict'].str.startswith('reproduced').sum())} "
                           f"reproduced" for scale in scales) + ".")
    if stale:
        reading += (f" Not read, written by an earlier version of the test (snakemake --forcerun significance "
                    f"--config scale=<scale>): {'; '.join(stale)}.")
    shown = shown_table(table).assign(
        **{"baseline BLEU": table["baseline BLEU"].map(lambda v: "" if pd.isna(v) else f"{v:.2f}")})
    note = " ".join(["Each scale's verdicts: the claims pages' test and procedure over the claims that scale "
                     "holds, with that scale's pooled seed noise (its own page's verdicts where it built that page "
                     "whole); the "
                     f"interval is {CI}; baseline BLEU: the mean over the seed pairs of the claim's test, in "
                     f"the claim's metric ({', '.join(sorted(set(METRIC_LABELS[c.metric] for c in claims)))}).",
                     *inputs.notes])
    plot = forest_plot(claims, table, None)
    save_figure(plot, None, args.out_svg)
    figures = [(figure_svg(plot), Path(args.out_svg).name)]
    if args.out_gap_svg:
        gaps = gap_panels(inputs.gaps, list(dict.fromkeys(table["claim"]))) or no_curves()
        save_figure(gaps, None, args.out_gap_svg)
        figures.append((figure_svg(gaps), Path(args.out_gap_svg).name))
    write_table(shown, args.title, note, args.out_md, args.out_html, reading=reading, figures=figures,
                colalign=["right" if c in NUMERIC else "left" for c in shown.columns])
