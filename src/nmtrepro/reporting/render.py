"""The one table writer (Markdown, HTML, LaTeX) and the one figure saver (PNG, SVG) of every table,
analysis and plot.

A caller turns its numbers into the cells a reader sees (`text_cells` for the analyses, the results
table its own `_display`) and hands them over with a title and the note under the table; the writer
only lays them out, so every table reaches the disk the same atomic way. A cell whose words carry
emphasis is a `Marked`, which the writer spells in each format's own markup.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..core.files import atomic_open, atomic_path


# Markdown's and LaTeX's special characters in a cell's text, escaped so they print as themselves.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>&~#])")
_TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


# Paper D's Fig. 6 colours for an n-gram that k references hold (its red, for none, is left plain here).
REFERENCE_COLOURS = {1: "#ffcc80", 2: "#fff59d", 3: "#90caf9", 4: "#a5d6a7"}  # orange, yellow, blue, green
_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


@dataclass(frozen=True)
class Marked:
    """Text whose spans may be bold, e.g. the words of a translation found in its references.

    `spans` are (text, level) pairs in reading order, joined by single spaces: level 0 is plain, k >= 1
    bold (a bool works: True is 1). `counted` (several references): a bold span also shows k, how many
    references hold it, as a superscript, and in HTML the background of paper D's Fig. 6 colour for k.
    Each format escapes the text itself, so a cell prints its words as they are whatever characters they hold.
    """
    spans: tuple[tuple[str, int], ...]
    counted: bool = False

    def _spell(self, escape, bold, count) -> str:
        return " ".join(bold(escape(text), int(level)) + (count(int(level)) if self.counted else "")
                        if level else escape(text) for text, level in self.spans)

    def markdown(self) -> str:
        return self._spell(lambda text: _MARKDOWN_SPECIAL.sub(r"\\\1", text), lambda text, k: f"**{text}**",
                           lambda k: str(k).translate(_SUPERSCRIPT))

    def html(self) -> str:
        def bold(text, k):
            colour = REFERENCE_COLOURS[min(k, max(REFERENCE_COLOURS))]
            return f'<b style="background-color:{colour}">{text}</b>' if self.counted else f"<b>{text}</b>"
        return self._spell(lambda text: html.escape(text, quote=False), bold, lambda k: f"<sup>{k}</sup>")

    def tex(self) -> str:
        return self._spell(lambda text: "".join(_TEX_SPECIAL.get(c, c) for c in text),
                           lambda text, k: rf"\textbf{{{text}}}", lambda k: rf"\textsuperscript{{{k}}}")


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


def add_table_arguments(parser, note_help: str = "line under the table") -> None:
    """The flags of a command that writes one table three ways (`write_table`): its title, the note
    under it and the Markdown, HTML and LaTeX files."""
    parser.add_argument("--title", required=True)
    parser.add_argument("--note", default="", help=note_help)
    for name in ("md", "html", "tex"):
        parser.add_argument(f"--out-{name}", required=True)


def write_table(shown: pd.DataFrame, title: str, note: str, out_md: str, out_html: str,
                out_tex: str | None = None, *, colalign: list[str] | None = None, numparse: bool = False,
                escape_tex: bool = True, fragment: bool = False) -> None:
    """One table three ways: Markdown for reading, HTML for the Snakemake report, LaTeX for a paper.

    `shown` is written as it is, without its index. Markdown: `colalign` per column ('left'/'right'),
    and with `numparse` number cells are printed and aligned on the decimal point by tabulate (else
    every cell is text, aligned left). `escape_tex` escapes LaTeX's special characters in the cells.
    `Marked` cells are spelled in each format's markup, their text escaped in all three.
    A `fragment` is a section to embed (second-level heading, no HTML page around it); otherwise
    each file is a whole document with the title as its heading.
    """
    def md_cell(value):  # a '|' inside a cell would end the Markdown cell
        value = value.markdown() if isinstance(value, Marked) else value
        return value.replace("|", "\\|") if isinstance(value, str) else value

    def html_cell(value):  # escaped here rather than by pandas, which would escape a Marked cell's tags
        if isinstance(value, Marked):
            return value.html()
        return html.escape(value, quote=False) if isinstance(value, str) else value

    body = shown.map(md_cell).to_markdown(index=False, disable_numparse=not numparse, colalign=colalign)
    heading = "##" if fragment else "#"
    with atomic_open(out_md) as handle:
        handle.write(f"{heading} {title}\n\n{body}\n\n{note}\n")
    table = (shown.map(html_cell).rename(columns=lambda name: html.escape(str(name), quote=False))
             .to_html(index=False, border=0, escape=False))
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
            # pandas escapes only text cells, before a formatter: a Marked cell reaches its formatter whole.
            marked = {name: lambda v: v.tex() if isinstance(v, Marked) else v
                      for name in shown.columns if shown[name].map(lambda v: isinstance(v, Marked)).any()}
            handle.write(shown.to_latex(index=False, caption=f"{title}. {note}", escape=escape_tex, formatters=marked))


def save_figure(fig, out_png: str, out_svg: str | None = None) -> None:
    """PNG for the report, SVG for print; the temporary names end in .tmp, so name the format."""
    with atomic_path(out_png) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    if out_svg:
        with atomic_path(out_svg) as tmp:
            fig.savefig(tmp, format="svg")
