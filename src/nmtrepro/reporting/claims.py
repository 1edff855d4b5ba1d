"""`nmtrepro claims`: each paper's claims beside what this run measured, with a verdict.

The command: what crosses from the workflow (each claim as one JSON object, its primaries, the seed
noise's pool, the curves, budgets and other scales' tests, all keyed by the claim's sentence), read and
checked against the claims, and the page built from them: the verdicts (evaluation/verdicts.py, whose
docstring says how a claim is judged), their words (claims_prose.py), the claims at other budgets and
scales and over training (claims_elsewhere.py), the forest plot (forest.py).
"""
from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import pandas as pd

from ..core.files import InputError
from ..evaluation.metrics import METRICS
from ..evaluation.pooled import parse_pool, seed_noises
from ..evaluation.verdicts import (METRIC_LABELS, NOT_MEASURED, Claim, assess, empty_subsets, in_second_metric,
                                   load)
from . import gaps as budget
from .claims_elsewhere import BUDGET_COLUMNS, at_budgets, elsewhere, over_training
from .claims_prose import NUMERIC, SECOND_NOTE, claims_note, disagreements, reading, shown_table
from .forest import forest_plot
from .render import figure_svg, save_figure, write_table

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


def parse_budgets(text: str, claims: list[Claim]) -> dict:
    """--budgets' JSON: {"levels": [{"label": LABEL, "claims": {SENTENCE: {"significance": JSON,
    "updates": N[, "label": its own LABEL]}}, "pool": {NAME: JSON}}], "final": the page's own budget's
    label, "updates": {SENTENCE: the page's own updates}}."""
    budgets = read_json_arg("--budgets", text, claims, lambda parsed: [
        sentence for level in parsed.get("levels", []) for sentence in level["claims"]]
        + list(parsed.get("updates", {})))
    return {"levels": [], "final": "100%", "updates": {}, **budgets}


def parse_others(text: str, claims: list[Claim]) -> dict:
    """--others' JSON: {SCALE: {"claims": {SENTENCE: JSON}, "pool": {NAME: JSON}}}, other scales' tests of
    these claims (a results tree in this checkout, or measured elsewhere and kept as data)."""
    return read_json_arg("--others", text, claims,
                         lambda others: [sentence for spec in others.values() for sentence in spec["claims"]])


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
