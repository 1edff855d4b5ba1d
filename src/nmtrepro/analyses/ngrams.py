"""`nmtrepro plot-ngrams`: n-gram precision gaps of systems against their baselines (paper D, Fig. 5).

The precisions are sacreBLEU's modified n-gram precisions (matches / hypothesis n-grams, n = 1..4) that
`nmtrepro bleu` already stores; the gap is system minus baseline, in percentage points.
"""
from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from ..core.files import InputError
from ..reporting.papers import beside, read_paper_numbers
from ..reporting.render import figure, save_figure, text_cells, write_table
from ..reporting.report import parse_system_pairs, read_score

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "plot-ngrams": "figure and table of n-gram precision gaps vs baselines",
}

ORDERS = (1, 2, 3, 4)


def precision_gaps(system: dict, baseline: dict) -> dict[str, float]:
    """Precisions of both and their gaps, from two BLEU-JSON metric entries."""
    for name, entry in (("system", system), ("baseline", baseline)):
        if len(entry.get("precisions", [])) != len(ORDERS):
            raise InputError(f"{name} BLEU entry lacks its {len(ORDERS)} n-gram precisions")
    row = {}
    for n, ours, base in zip(ORDERS, system["precisions"], baseline["precisions"]):
        row[f"{n}-gram"] = ours
        row[f"baseline {n}-gram"] = base
        row[f"Δ {n}-gram"] = ours - base
    return row


def plot_gaps(table: pd.DataFrame, title: str | None = None) -> Figure:
    """Gap per n-gram order, one bar group per system (paper D, Fig. 5)."""
    fig = figure(title, figsize=(6, 4))
    ax = fig.subplots()
    width = 0.8 / max(len(table), 1)
    for k, (label, row) in enumerate(table.iterrows()):
        xs = [n - 1 + (k - (len(table) - 1) / 2) * width for n in ORDERS]
        ax.bar(xs, [row[f"Δ {n}-gram"] for n in ORDERS], width, label=label, color=f"C{k}")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(ORDERS)), [f"{n}-gram" for n in ORDERS])
    ax.set_ylabel("precision gap vs baseline (points)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def add_arguments_plot_ngrams(parser) -> None:
    parser.add_argument("--system", action="append", required=True, metavar="LABEL=BLEU_JSON=BASELINE_BLEU_JSON",
                        help="a system's and its baseline's BLEU JSON (repeat)")
    parser.add_argument("--metric", default="tok_bleu", choices=["tok_bleu", "sacrebleu"])
    parser.add_argument("--paper-numbers", help="TSV of the paper's numbers (row, column, value, note)")
    parser.add_argument("--title", required=True)
    parser.add_argument("--note", default="")
    for name in ("png", "svg", "md", "html", "tex"):
        parser.add_argument(f"--out-{name}", required=True)


def run_plot_ngrams(args) -> None:
    rows = {}
    for label, (system, base) in parse_system_pairs(args.system, "--system").items():
        rows[label] = precision_gaps(read_score(system, args.metric), read_score(base, args.metric))
    table = pd.DataFrame.from_dict(rows, orient="index")
    save_figure(plot_gaps(table, args.title), args.out_png, args.out_svg)
    paper = read_paper_numbers(args.paper_numbers) if args.paper_numbers else None
    write_table(text_cells(beside(table, paper)), args.title, args.note, args.out_md, args.out_html, args.out_tex)
