"""Render analysis tables (Markdown, HTML, LaTeX) and figures (PNG, SVG), the paper's numbers beside ours.

Every analysis builds a DataFrame with one row per system (its label) and one column per quantity;
`beside` joins the paper's numbers (a TSV in workflow/papers/: row, column, value, note) on the row
label, and wherever our column has the paper's column name it adds the difference, so a reader sees
the gap without opening the paper.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from ..core.files import atomic_open, atomic_path


def beside(ours: pd.DataFrame, paper: pd.DataFrame | None) -> pd.DataFrame:
    """`ours` (index: row label) with columns `paper: C` for each paper column C, and `C: ours − paper`
    where we measured C too; rows only the paper has come after ours, with our cells empty."""
    if paper is None or paper.empty:
        return ours
    wide = paper.pivot(index="row", columns="column", values="value")
    wide = wide.reindex(columns=list(dict.fromkeys(paper["column"])))      # the paper file's order
    rows = list(ours.index) + [r for r in dict.fromkeys(paper["row"]) if r not in ours.index]
    table = ours.reindex(rows)
    for column in wide.columns:
        table[f"paper: {column}"] = wide[column].reindex(rows)
        if column in ours.columns:
            table[f"{column}: ours − paper"] = table[column] - table[f"paper: {column}"]
    return table


def _text(table: pd.DataFrame, digits: int) -> pd.DataFrame:
    """Numbers with `digits` decimals (counts as integers), empty where missing; text cells as they are."""
    def fmt(value):
        if isinstance(value, str):
            return value
        if pd.isna(value):
            return ""
        return str(value) if isinstance(value, (int, np.integer)) else f"{value:.{digits}f}"
    return table.rename_axis("system").reset_index().map(fmt)


def write_table(table: pd.DataFrame, title: str, note: str, out_md: str, out_html: str,
                out_tex: str | None = None, digits: int = 2) -> None:
    """One table three ways: Markdown for reading, HTML for the Snakemake report, LaTeX for a paper."""
    shown = _text(table, digits)
    with atomic_open(out_md) as handle:
        body = shown.map(lambda s: s.replace("|", "\\|")).to_markdown(index=False, disable_numparse=True)
        handle.write(f"# {title}\n\n{body}\n\n{note}\n")
    with atomic_open(out_html) as handle:
        handle.write(f"<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
                     f"</head>\n<body>\n<h1>{html.escape(title)}</h1>\n{shown.to_html(index=False, border=0)}\n"
                     f"<p>{html.escape(note)}</p>\n</body>\n</html>\n")
    if out_tex:
        with atomic_open(out_tex) as handle:
            handle.write(shown.to_latex(index=False, caption=f"{title}. {note}", escape=True))


def save_figure(fig, out_png: str, out_svg: str | None = None) -> None:
    """PNG for the report, SVG for print; the temporary names end in .tmp, so name the format."""
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    if out_svg:
        with atomic_path(out_svg) as tmp:
            fig.savefig(tmp, format="svg")
