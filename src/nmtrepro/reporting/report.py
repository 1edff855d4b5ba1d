"""`nmtrepro table` and `nmtrepro plot-curves`: render measured results for the Snakemake report.

A table puts each paper number (from a TSV in workflow/papers/) beside the score we measured for the
experiment that fills that cell, so a reader sees the gap without opening the paper. Reading the numbers
(`build_table`, `read_curve`) is separate from showing them (`_display`, `plot_curves`; reporting.render
writes the files); the `run_*` functions only wire files to them.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Mapping

import pandas as pd

from ..core.files import InputError, read_json, require_file
from ..data.annotations import annotation, registry
from ..evaluation.metrics import METRICS, SECOND_METRIC
from ..evaluation.pooled import read_entry, read_significance, seed_noises
from ..evaluation.verdicts import format_p
from .papers import read_paper_numbers
from .render import figure, save_figure, write_table
from .table_inputs import Cell, read_table_inputs

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SECOND = METRICS[SECOND_METRIC].label
# The column of the mark that the papers' own kind of test gives a row: the comparison alone, which with one
# seed pair is the paired bootstrap of the test set, blind to seed noise (docs/statistics.md).
PAPERS_TEST = "paper's test"
# Beside ours and its difference from the baseline, the same in SECOND_METRIC (the papers print BLEU only).
TABLE_COLUMNS = ["experiment", "row", "column", "paper BLEU", "paper note", "ours", "per seed", f"ours {SECOND}", "Δ",
                 "our test set", "signature", "baseline", "vs baseline", f"{SECOND} vs baseline", "p (one-sided)",
                 "CI", "mark", PAPERS_TEST]
# How a table's note says each BLEU of the JSON was scored.
SCORED = {
    "tok_bleu": "tokenized case-sensitive BLEU (multi-bleu.perl style, Moses tokens)",
    "sacrebleu": "sacreBLEU on detokenized output",
}
# The same scorers on data lowercased when it was prepared (paper C): case-sensitive says nothing there.
SCORED_LOWERCASED = {
    "tok_bleu": ("tokenized BLEU (multi-bleu.perl style, Moses tokens) of lowercased output against lowercased "
                 "references"),
    "sacrebleu": "sacreBLEU on detokenized lowercased output",
}
# The training curve's columns that plot-curves draws (train.py writes more).
PLOTTED_COLUMNS = ["step", "train_loss", "train_nll", "valid_loss", "valid_nll"]


def parse_pairs(specs: list[str], option: str) -> dict[str, str]:
    """Parse repeated NAME=VALUE options into a dict, refusing repeats."""
    pairs: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not (name and sep and value):
            raise InputError(f"{option} wants EXPERIMENT=VALUE, got {spec!r}")
        if name in pairs:
            raise InputError(f"{option} names experiment {name!r} twice")
        pairs[name] = value
    return pairs


def parse_system_pairs(specs: list[str], option: str) -> dict[str, tuple[str, str]]:
    """Parse repeated LABEL=SYSTEM=BASELINE options (a system's file and its baseline's) by label."""
    pairs = {}
    for label, spec in parse_pairs(specs, option).items():
        system, sep, baseline = spec.partition("=")
        if not (system and sep and baseline):
            raise InputError(f"{option} wants LABEL=SYSTEM=BASELINE, got {label}={spec}")
        pairs[label] = system, baseline
    return pairs


def read_score(path, metric: str) -> dict:
    """The metric's entry of a BLEU JSON written by `nmtrepro bleu`."""
    try:
        scores = read_json(path)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: not valid JSON ({err})") from err
    if metric not in scores:
        raise InputError(f"{path} has no {metric!r} score (it has: {', '.join(scores)}); if it was written before "
                         f"that metric, compute it again: snakemake --forcerun bleu")
    entry = scores[metric]
    if not isinstance(entry, dict) or not {"score", "signature"} <= entry.keys():
        raise InputError(f"{path}: {metric!r} lacks its score or signature")
    return entry


def resampling(entries: list[dict]) -> str:
    """How the bootstraps behind these significance entries resampled ("10,000 resamples, seed 12345"),
    each count and seed once, so that a page says what redoes its p's."""
    runs = sorted({(entry["samples"], entry["bootstrap_seed"]) for entry in entries})
    return "; ".join(f"{samples:,} resamples, seed {seed}" for samples, seed in runs)


def shared_seeds(sig: dict, seeds: int) -> str:
    """' (seeds 1, 2)' where a comparison pools fewer seed pairs than the cell's `seeds` (its baseline
    trained fewer): its difference is then not 'ours' less the baseline's mean over all of them."""
    pooled = [str(entry["seed"]) for entry in sig["seeds"]]
    return f" (seed{'s' * (len(pooled) > 1)} {', '.join(pooled)})" if len(pooled) < seeds else ""


def build_table(paper_numbers, cells: list[Cell], metric: str, marks: str = "dagger",
                columns: list[str] | None = None, pool: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per paper cell, in the paper file's order, with our score where an experiment fills it.

    A cell with its paired-bootstrap JSON against its baseline (`Cell.significance`) makes a row that
    carries p, the CI at the level of the paper's marks (style `marks`: `mark_confidence`) and
    the mark for a significant improvement, all by the claims pages' test: the seed noise of the row's
    recipe pooled over `pool` ({name: significance JSON}, the central claims'; evaluation/pooled.py), none
    where it is unmeasured. PAPERS_TEST keeps the mark of the comparison's own test beside it, the papers' kind.
    A cell of several seeds shows their mean, and each seed's score beside it.
    Numbers stay numeric (NaN where we measured nothing); rendering formats them. `columns` keeps only
    those paper columns (a paper table that mixes BLEU with sizes and times shares one numbers file).
    """
    # the significance module and the pooled seed noise (scipy), only for tables that mark
    from ..evaluation.seed_noise import SeedNoise
    from ..evaluation.significance import mark, mark_confidence

    paper = read_paper_numbers(paper_numbers)
    if columns:
        missing = sorted(set(columns) - set(paper["column"]))
        if missing:
            raise InputError(f"{paper_numbers}: no column(s) {missing}; it has {sorted(set(paper['column']))}")
        paper = paper[paper["column"].isin(columns)]
    known = set(zip(paper["row"], paper["column"]))
    by_cell: dict[tuple[str, str], Cell] = {}
    for cell in cells:
        key = (cell.row, cell.column)
        if key not in known:
            raise InputError(f"cell ({cell.row}, {cell.column}) of experiment {cell.experiment} is not in "
                             f"{paper_numbers}; its cells are: {sorted(known)}")
        if key in by_cell:
            raise InputError(f"cell ({cell.row}, {cell.column}) is filled by both "
                             f"{by_cell[key].experiment} and {cell.experiment}")
        by_cell[key] = cell

    marking = any(cell.significance for cell in cells)
    noise = seed_noises(pool or {}, [metric])[metric] or SeedNoise(()) if marking else None
    rows = []
    for entry in paper.itertuples(index=False):
        cell = by_cell.get((entry.row, entry.column))
        measured = [read_score(path, metric) for path in cell.paths] if cell else []
        ours = round(sum(m["score"] for m in measured) / len(measured), 2) if measured else float("nan")
        second = [read_score(path, SECOND_METRIC)["score"] for path in cell.paths] if cell else []
        sig = read_entry(cell.significance, metric) if cell and cell.significance else None
        second_sig = read_significance(cell.significance, SECOND_METRIC) if sig else None
        test = noise.basis(sig).test if sig else None   # None: the row's seed noise is unmeasured
        rows.append({
            "experiment": cell.experiment if cell else "",
            "row": entry.row,
            "column": entry.column,
            "paper BLEU": entry.value,
            "paper note": entry.note,
            "ours": ours,
            "per seed": " / ".join(f"{m['score']:.2f}" for m in measured) if len(measured) > 1 else "",
            f"ours {SECOND}": round(sum(second) / len(second), 2) if second else float("nan"),
            "Δ": round(ours - entry.value, 2),  # NaN when unmeasured
            "our test set": cell.test_set if cell else "",
            "signature": measured[0]["signature"] if measured else "",
            "baseline": cell.baseline + shared_seeds(sig, len(cell.paths)) if sig else "",
            "vs baseline": round(sig["score"] - sig["baseline"], 2) if sig else float("nan"),
            f"{SECOND} vs baseline": round(second_sig["delta"], 2) if sig else float("nan"),
            "p (one-sided)": test.p(+1) if test else float("nan"),
            "CI": "{:+.2f} to {:+.2f}".format(*test.bounds(mark_confidence(marks))) if test else
                  "seed noise unmeasured" if sig else "",
            "mark": mark(sig["score"], sig["baseline"], test.p(+1), marks) if test else "",
            PAPERS_TEST: mark(sig["score"], sig["baseline"], sig["p_greater"], marks) if sig else "",
        })
    return pd.DataFrame(rows, columns=TABLE_COLUMNS)


def comparability_note(metric: str, scale: str | None, lowercased: bool = False) -> str:
    """The line under every table: why 'ours' and 'paper' are not the same measurement."""
    where = f"the test set configured for scale `{scale}`" if scale else "our configured test set"
    scored = (SCORED_LOWERCASED if lowercased else SCORED)[metric]
    return (f"Ours: {scored} on {where}; Δ = ours − paper. Unless that is the paper's own test set "
            f"(see the paper note), ours is not comparable in absolute terms with the paper's number (e.g. "
            f"Multi30k at tiny scale vs WMT14 newstest2014): compare differences between rows instead.")


def made_by(stats_paths: list[str], key: str, names: Mapping[str, str]) -> str:
    """Who made a stage's annotations, read from its stats (`auto` may have fallen back to the spaCy
    stand-in): `names[stats[key]]` of each distinct value across the files, joined."""
    found = []
    for path in stats_paths:
        value = read_json(require_file(path)).get(key)
        if value not in names:
            raise InputError(f"{path}: no {key} recorded (expected one of {sorted(names)}, got {value!r})")
        if value not in found:
            found.append(value)
    return "; and by ".join(names[v] for v in found)


def annotation_note(name: str, stats_paths: list[str]) -> str:
    """The line under a table with cells whose models read a source annotation: who made it (the parser
    of the trees that parser phrases come from, the POS tagger), from its stage's stats."""
    kind = annotation(name)
    return f"{kind.note} {made_by(stats_paths, kind.stats_key, kind.makers)}."


def _display(table: pd.DataFrame) -> pd.DataFrame:
    """Numbers as text with 2 decimals (Δ signed), ours with its significance mark; empty where unmeasured."""
    def fmt(spec):
        return lambda value: "" if pd.isna(value) else format(value, spec)
    shown = table.assign(**{"paper BLEU": table["paper BLEU"].map(fmt(".2f")),
                            "ours": table["ours"].map(fmt(".2f")) + table["mark"],
                            "Δ": table["Δ"].map(fmt("+.2f")),
                            f"ours {SECOND}": table[f"ours {SECOND}"].map(fmt(".2f")),
                            "vs baseline": table["vs baseline"].map(fmt("+.2f")),
                            f"{SECOND} vs baseline": table[f"{SECOND} vs baseline"].map(fmt("+.2f")),
                            "p (one-sided)": table["p (one-sided)"].map(format_p)})
    return shown.drop(columns="mark")


def table_reading(table: pd.DataFrame) -> str:
    """A results table in one line: the rows measured at this scale, and of those compared with a
    baseline how many earn a significance mark (an improvement at the marks' level)."""
    measured = table["ours"].notna()
    compared = measured & table["vs baseline"].notna()
    line = f"{int(measured.sum())} of {len(table)} rows measured at this scale"
    if compared.any():
        marked = int((table["mark"][compared] != "").sum())
        papers = int((table[PAPERS_TEST][compared] != "").sum())
        line += (f"; {marked} of the {int(compared.sum())} compared with their baseline improve on it significantly "
                 f"({papers} by the paper's test alone)")
    return line + "."


def read_curve(path) -> pd.DataFrame:
    """A training curve TSV from `nmtrepro train`: log rows carry train_*, checkpoint rows valid_*."""
    curve = pd.read_csv(require_file(path), sep="\t")
    missing = [c for c in PLOTTED_COLUMNS if c not in curve.columns]
    if missing:
        raise InputError(f"{path}: curve lacks columns {missing}")
    return curve


def plot_curves(curves: dict[str, pd.DataFrame], scale: str | None = None) -> Figure:
    """Train (left) and valid (right) loss vs step; solid = label-smoothed loss, dashed = nll."""
    fig = figure("Training curves (solid: label-smoothed loss, dashed: NLL)", scale, figsize=(10, 4))
    panels = fig.subplots(1, 2, sharex=True, sharey=True)
    for colour, (experiment, curve) in enumerate(curves.items()):
        for ax, split in zip(panels, ("train", "valid")):
            for kind, style in (("loss", "-"), ("nll", "--")):
                points = curve[["step", f"{split}_{kind}"]].dropna()
                ax.plot(points["step"], points[f"{split}_{kind}"], style, color=f"C{colour}",
                        marker="o" if split == "valid" else None, markersize=3,
                        label=f"{experiment} {kind}")
    for ax, split in zip(panels, ("train", "valid")):
        ax.set_title(split)
        ax.set_xlabel("update step")
        ax.grid(alpha=0.3)
    panels[0].set_ylabel("bits per target token")
    panels[1].legend(fontsize="small")
    return fig


def add_arguments_table(parser) -> None:
    parser.add_argument("--title", required=True)
    parser.add_argument("--paper-numbers", required=True, help="TSV: row, column, value, note")
    parser.add_argument("--metric", required=True, choices=sorted(SCORED), help="key of the BLEU JSON")
    parser.add_argument("--inputs", required=True,
                        help="the table's cells, pool, paper columns, annotation stats and notes: one JSON document "
                             "(reporting/table_inputs.py)")
    parser.add_argument("--scale", help="the configured scale, named in the note under the table")
    parser.add_argument("--lowercased", action="store_true",
                        help="every cell's data were lowercased when prepared: the note says so, not 'case-sensitive'")
    parser.add_argument("--marks", default="dagger", choices=["dagger", "arrows", "plus"],
                        help="significance marks: † p<0.01 (paper A), ↑/⇑ (paper B), +/++ (paper D)")
    parser.add_argument("--out-md", required=True)
    parser.add_argument("--out-html", required=True)
    parser.add_argument("--out-tex", help="LaTeX table")


def run_table(args) -> None:
    inputs = read_table_inputs(args.inputs)
    table = build_table(args.paper_numbers, inputs.cells, args.metric, args.marks, inputs.paper_columns, inputs.pool)
    significance = [cell.significance for cell in inputs.cells if cell.significance]
    note = comparability_note(args.metric, args.scale, args.lowercased)
    note += (f" Ours {SECOND}: sacreBLEU's {SECOND} on the same detokenized output (character n-grams, "
             f"its signature in the JSON), the mean over the same seeds" + (f"; '{SECOND} vs baseline' its "
             f"difference from the baseline over the same seed pairs (marks and p are BLEU's)." if significance else "."))
    if significance:
        from ..evaluation.significance import MARK_STYLES, mark_confidence
        levels = ", ".join(f"{symbol} p < {threshold}" for threshold, symbol in MARK_STYLES[args.marks])
        runs = resampling([read_significance(path, args.metric) for path in significance])
        note += (f" Marks, p and CI: the claims pages' test, against the row's baseline over the seed pairs "
                 f"they share: the mean difference over its standard error, the seed noise of the row's recipe "
                 f"(its two model families) pooled over this run's central comparisons and divided by the row's "
                 f"seed pairs, plus the row's own test-set noise (a paired bootstrap of the sentences, "
                 f"sacreBLEU's statistics; {runs}), against a t distribution, a p below 0.045 no smaller than the "
                 f"fiducial mixture of the seed and test-set parts gives (docs/statistics.md); a row of several "
                 f"seed pairs whose recipe no central comparison measures is tested on its own seeds' spread, one "
                 f"of one seed pair with the seed noise of its two families' systems in those comparisons, and "
                 f"one whose seed noise the run cannot measure gets no p and no mark ('seed noise unmeasured'). "
                 f"So a mark means what a claims page's verdict means. 'vs baseline' = ours − baseline (means "
                 f"over those seeds, named beside the baseline where fewer than the row's); p one-sided, the chance of a difference at least this far above the baseline were the row no "
                 f"better; {levels} for an improvement, uncorrected for the table's many rows; CI: the "
                 f"{mark_confidence(args.marks):.0%} interval of the difference, whose lower bound is above 0 "
                 f"exactly where the row earns a mark. '{PAPERS_TEST}': the mark the papers' own kind of test "
                 f"gives, the comparison alone (with one seed pair, the paired bootstrap of the test set, blind to "
                 f"seed noise: where seeds vary as much as the test set it marks 14% of rows with no true difference at "
                 f"5%, docs/statistics.md), for comparison with the paper's marks, not a verdict. 'per seed': each seed's score where a row has several.")
    stats = inputs.annotation_stats  # annotation name -> its stats files
    for name in stats:
        annotation(name)  # a known one, else a clear error
    for name in (name for name in registry() if name in stats):
        note += " " + annotation_note(name, stats[name])
    note = " ".join([note, *inputs.notes])
    shown = _display(table)
    numeric = {"paper BLEU", "ours", f"ours {SECOND}", "Δ", "vs baseline", f"{SECOND} vs baseline", "p (one-sided)"}
    write_table(shown, args.title, note, args.out_md, args.out_html, args.out_tex,
                colalign=["right" if c in numeric else "left" for c in shown.columns], escape_tex=False,
                reading=table_reading(table))


def add_arguments_plot_curves(parser) -> None:
    parser.add_argument("--curve", action="append", required=True, metavar="EXPERIMENT=PATH",
                        help="an experiment's training curve TSV (repeat)")
    parser.add_argument("--scale", help="the configured scale, named in the title")
    parser.add_argument("--out", required=True, help="PNG")


def run_plot_curves(args) -> None:
    paths = parse_pairs(args.curve, "--curve")
    fig = plot_curves({experiment: read_curve(path) for experiment, path in paths.items()}, args.scale)
    save_figure(fig, args.out)
