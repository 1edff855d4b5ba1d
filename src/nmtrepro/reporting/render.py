"""The one table writer (Markdown, HTML, LaTeX) and the one figure saver (PNG, SVG) of every table,
analysis and plot.

A caller turns its numbers into the cells a reader sees (`text_cells` for the analyses, the results
table its own `_display`) and hands them over with a title and the note under the table; the writer
only lays them out, so every table reaches the disk the same atomic way.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from ..core.files import atomic_open, atomic_path


def text_cells(table: pd.DataFrame, digits: int = 2) -> pd.DataFrame:
    """The index as a `system` column, numbers with `digits` decimals (counts as integers), empty where
    missing; text cells as they are."""
    def fmt(value):
        if isinstance(value, str):
            return value
        if pd.isna(value):
            return ""
        return str(value) if isinstance(value, (int, np.integer)) else f"{value:.{digits}f}"
    return table.rename_axis("system").reset_index().map(fmt)


def write_table(shown: pd.DataFrame, title: str, note: str, out_md: str, out_html: str,
                out_tex: str | None = None, *, colalign: list[str] | None = None, numparse: bool = False,
                escape_tex: bool = True, fragment: bool = False) -> None:
    """One table three ways: Markdown for reading, HTML for the Snakemake report, LaTeX for a paper.

    `shown` is written as it is, without its index. Markdown: `colalign` per column ('left'/'right'),
    and with `numparse` number cells are printed and aligned on the decimal point by tabulate (else
    every cell is text, aligned left). `escape_tex` escapes LaTeX's special characters in the cells.
    A `fragment` is a section to embed (second-level heading, no HTML page around it); otherwise
    each file is a whole document with the title as its heading.
    """
    def pipes(value):  # a '|' inside a cell would end the Markdown cell
        return value.replace("|", "\\|") if isinstance(value, str) else value

    body = shown.map(pipes).to_markdown(index=False, disable_numparse=not numparse, colalign=colalign)
    heading = "##" if fragment else "#"
    with atomic_open(out_md) as handle:
        handle.write(f"{heading} {title}\n\n{body}\n\n{note}\n")
    table = shown.to_html(index=False, border=0)
    with atomic_open(out_html) as handle:
        if fragment:  # text content: quotes need no escaping
            title_, note_ = html.escape(title, quote=False), html.escape(note, quote=False)
            handle.write(f"<h2>{title_}</h2>\n{table}\n<p>{note_}</p>\n")
        else:
            handle.write(f"<!DOCTYPE html>\n<html>\n<head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
                         f"</head>\n<body>\n<h1>{html.escape(title)}</h1>\n{table}\n"
                         f"<p>{html.escape(note)}</p>\n</body>\n</html>\n")
    if out_tex:
        with atomic_open(out_tex) as handle:
            handle.write(shown.to_latex(index=False, caption=f"{title}. {note}", escape=escape_tex))


def save_figure(fig, out_png: str, out_svg: str | None = None) -> None:
    """PNG for the report, SVG for print; the temporary names end in .tmp, so name the format."""
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    if out_svg:
        with atomic_path(out_svg) as tmp:
            fig.savefig(tmp, format="svg")
