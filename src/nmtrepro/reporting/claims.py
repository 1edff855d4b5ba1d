"""`nmtrepro claims`: each paper's claims beside what this run measured, with a verdict.

The command: the page's inputs, one JSON document (`--inputs`; claims_inputs.py says what it holds and
reads it), and the page built from them: the verdicts (evaluation/verdicts.py, whose docstring says how a
claim is judged), their words (claims_prose.py), the claims at other budgets and scales and over
training (claims_elsewhere.py), the forest plot (forest.py).
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..evaluation.pooled import seed_noises
from ..evaluation.verdicts import assess, empty_subsets, in_second_metric, load
from . import gaps as budget
from .claims_elsewhere import BUDGET_COLUMNS, at_budgets, elsewhere, over_training
from .claims_inputs import read_inputs
from .claims_prose import NUMERIC, SECOND_NOTE, claims_note, disagreements, reading, shown_table
from .forest import forest_plot
from .render import figure_svg, save_figure, write_table


def add_arguments_claims(parser) -> None:
    parser.add_argument("--title", required=True)
    parser.add_argument("--inputs", required=True, metavar="JSON",
                        help="the page's inputs as one document: its claims by id, their primaries, the seed "
                             "noise's pool, the curves, shorter budgets and other scales' tests, the notes "
                             "(nmtrepro.reporting.claims_inputs)")
    parser.add_argument("--scale", help="the configured scale, named on the plots")
    parser.add_argument("--out-md", required=True)
    parser.add_argument("--out-html", required=True, help="the page, its forest plot inline")
    parser.add_argument("--out-svg", required=True, help="the forest plot, which the Markdown page links")
    parser.add_argument("--out-gap-svg", help="the gap over training (the inputs' curves), which the Markdown page "
                                              "links")
    parser.add_argument("--out-gap-tsv", help="the same gaps as a table (claim, step, pair, delta), for the page "
                                              "across scales and export-claims")


def run_claims(args) -> None:
    inputs = read_inputs(args.inputs)
    claims, pool = empty_subsets(inputs.claims), inputs.pool
    sigs = load(claims)
    noises = seed_noises(pool, [claims[i].metric for i in sigs])
    judged = assess(claims, sigs, noises)
    second, second_noise = in_second_metric(claims, judged, pool)
    table, closing, panels = over_training(claims, inputs.curves, judged, args.scale)
    table = pd.concat([table, second], axis=1)
    by_budget, points, changing = at_budgets(claims, inputs.budgets, sigs, table)
    changing += elsewhere(claims, table, inputs.others, args.scale)
    note = " ".join([claims_note(claims, list(sigs.values()), {**noises, **second_noise}), SECOND_NOTE, *inputs.notes])
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
