"""The one table writer (Markdown, HTML, LaTeX) and the one figure maker and saver (PNG, SVG) of every
table, analysis and plot: one stylesheet for every HTML page, one house style for every figure.

A caller turns its numbers into the cells a reader sees (`text_cells` for the analyses, the results
table its own `_display`) and hands them over with a title and the note under the table; the writer
only lays them out, so every table reaches the disk the same atomic way. A cell whose words carry
emphasis is a `Marked`, a verdict a `Label`: the writer spells each in each format's own markup. In
HTML the note folds away under the table (a reader wants the numbers first), a one-line `reading`
stands above it, and a page may carry a figure inline (an SVG, so that the page stays one file).
"""
from __future__ import annotations

import html
import re
import textwrap
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


# Every HTML page's stylesheet: the Snakemake report shows each page in a frame of its own.
STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #222;
       max-width: 80rem; margin: 1rem auto; padding: 0 1rem; line-height: 1.45; }
h1 { font-size: 1.35rem; margin: .5rem 0 .75rem; } h2 { font-size: 1.15rem; }
p.reading { font-size: 1.05rem; margin: .5rem 0 1rem; }
table { border-collapse: collapse; font-size: .84rem; margin: .5rem 0 1rem; }
th, td { border: 1px solid #c8c8c8; padding: .25rem .4rem; vertical-align: top; text-align: left; }
td.long { overflow-wrap: anywhere; min-width: 8rem; }
th { background: #f1f3f5; position: sticky; top: 0; z-index: 1; }
tbody tr:nth-child(even) td { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.label { display: inline-block; padding: .05rem .5rem; border-radius: .75rem; font-weight: 600;
         max-width: 24rem; border: 1px solid transparent; }
.label.good { background: #d8ecdb; color: #14532d; border-color: #8cc59a; }
.label.bad { background: #f9dcdc; color: #7f1d1d; border-color: #e19b9b; }
.label.warn { background: #fdf0d5; color: #78350f; border-color: #e5b766; }
.label.open { background: #eceff3; color: #374151; border-color: #c5cbd3; }
.label.none { background: #fff; color: #555; border: 1px dashed #999; }
figure { margin: .5rem 0 1rem; } figure svg { max-width: 100%; height: auto; }
details { margin: .5rem 0 1rem; max-width: 60rem; } summary { cursor: pointer; font-weight: 600; }
details p { font-size: .9rem; color: #333; }
"""

LONG_WORD = 20  # characters: a table cell with a longer word (a signature, a path) may break it anywhere

# The figures' colours, Okabe and Ito's colour-blind-safe eight (black last), in `C0`, `C1`, ... order.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]


def figure(title: str | None = None, scale: str | None = None, **options):
    """A matplotlib Figure in the house style (sizes, fonts, the palette above as `C0`..., a light
    grid), constrained layout; `title` is its suptitle, with the scale the numbers come from. matplotlib
    is imported here: the jobs that only read curves and tables skip its ~0.25 s."""
    import matplotlib
    from cycler import cycler
    from matplotlib.figure import Figure

    matplotlib.rcParams.update({"font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10,
                                "legend.fontsize": 8.5, "xtick.labelsize": 9, "ytick.labelsize": 9,
                                "axes.prop_cycle": cycler(color=PALETTE), "axes.grid": True, "grid.alpha": 0.3,
                                "axes.spines.top": False, "axes.spines.right": False, "svg.fonttype": "none"})
    fig = Figure(layout="constrained", **options)
    if title or scale:
        text = " ".join(filter(None, [title, f"(scale {scale})" if scale else None]))
        # ~11 characters of 11-point text an inch: a long title wraps instead of running off the figure.
        fig.suptitle(textwrap.fill(text, int(fig.get_figwidth() * 11)), fontsize=11)
    return fig


@dataclass(frozen=True)
class Label:
    """A short verdict shown as a coloured label that carries its word (never colour alone): `kind` is
    good, bad, warn, open or none (a class of STYLE); Markdown and LaTeX print the word."""
    text: str
    kind: str

    def markdown(self) -> str:  # as a plain text cell prints
        return self.text

    def html(self) -> str:
        return f'<span class="label {self.kind}">{html.escape(self.text, quote=False)}</span>'

    def tex(self) -> str:
        return "".join(_TEX_SPECIAL.get(c, c) for c in self.text)


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
                escape_tex: bool = True, fragment: bool = False, reading: str = "",
                figures: list[tuple[str, str | None]] = (),
                sections: list[tuple[str, pd.DataFrame, list[str]]] = ()) -> None:
    """One table three ways: Markdown for reading, HTML for the Snakemake report, LaTeX for a paper.

    `shown` is written as it is, without its index. `colalign` per column ('left'/'right': numbers,
    aligned on their digits in HTML too), and with `numparse` Markdown's number cells are printed and
    aligned on the decimal point by tabulate (else every cell is text). `escape_tex` escapes LaTeX's
    special characters in the cells. `Marked` and `Label` cells are spelled in each format's markup,
    their text escaped in all three. `reading`: one line above the table, what it says at a glance.
    `figures`: (SVG text, its file's name or None) each, drawn inline above the table in HTML (Markdown
    links the file, the same figure on disk, when named). `sections`: (heading, table, colalign) each,
    a further table after the note (Markdown and HTML). A `fragment` is a section to embed (second-level heading, no HTML
    page around it); otherwise each file is a whole document with the title as its heading.
    """
    def md_cell(value):  # a '|' inside a cell would end the Markdown cell
        value = value.markdown() if isinstance(value, (Marked, Label)) else value
        return value.replace("|", "\\|") if isinstance(value, str) else value

    def md_table(table, align):
        return table.map(md_cell).to_markdown(index=False, disable_numparse=not numparse, colalign=align)

    body = md_table(shown, colalign)
    level = 2 if fragment else 1
    lead = f"{reading}\n\n" if reading else ""
    picture = "".join(f"![{title}]({name})\n\n" for _, name in figures if name)
    more = "".join(f"\n{'#' * (level + 1)} {heading}\n\n{md_table(table, align)}\n" for heading, table, align in sections)
    with atomic_open(out_md) as handle:
        handle.write(f"{'#' * level} {title}\n\n{lead}{picture}{body}\n\n{note}\n{more}")
    parts = [f"<h{level}>{html.escape(title, quote=False)}</h{level}>"]
    if reading:
        parts.append(f'<p class="reading">{html.escape(reading, quote=False)}</p>')
    for svg, _ in figures:
        parts.append(f"<figure>{svg[svg.index('<svg'):]}</figure>")   # without the XML prologue
    parts.append(html_table(shown, colalign))
    if note:
        parts.append(f"<details><summary>How these numbers were made</summary><p>{html.escape(note, quote=False)}"
                     f"</p></details>")
    for heading, table, align in sections:
        parts += [f"<h{level + 1}>{html.escape(heading, quote=False)}</h{level + 1}>", html_table(table, align)]
    with atomic_open(out_html) as handle:
        handle.write(html_page(title, "\n".join(parts), fragment))
    if out_tex:
        with atomic_open(out_tex) as handle:
            # pandas escapes only text cells, before a formatter: a styled cell reaches its formatter whole.
            styled = {name: lambda v: v.tex() if isinstance(v, (Marked, Label)) else v
                      for name in shown.columns if shown[name].map(lambda v: isinstance(v, (Marked, Label))).any()}
            handle.write(shown.to_latex(index=False, caption=f"{title}. {note}", escape=escape_tex, formatters=styled))


def html_table(shown: pd.DataFrame, colalign: list[str] | None = None) -> str:
    """`shown` as an HTML table: text escaped, styled cells in their markup, right-aligned columns'
    cells of class `num` (STYLE aligns their digits), a cell with a word longer than LONG_WORD (a
    sacreBLEU signature, a test set's path) of class `long`, which may break anywhere so that the table
    fits a laptop's width."""
    def cell(value) -> str:
        if isinstance(value, (Marked, Label)):
            return value.html()
        return html.escape(value if isinstance(value, str) else str(value), quote=False)

    def td(value, numeric: bool) -> str:
        if numeric:
            return f'<td class="num">{cell(value)}</td>'
        long = isinstance(value, str) and max(map(len, value.split()), default=0) > LONG_WORD
        return f'<td class="long">{cell(value)}</td>' if long else f"<td>{cell(value)}</td>"

    numeric = [align == "right" for align in colalign] if colalign else [False] * len(shown.columns)
    head = "".join(f"<th>{html.escape(str(name), quote=False)}</th>" for name in shown.columns)
    rows = ["<tr>" + "".join(td(v, num) for v, num in zip(row, numeric)) + "</tr>"
            for row in shown.itertuples(index=False)]
    return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>"


def html_page(title: str, body: str, fragment: bool = False) -> str:
    """A whole HTML document with STYLE around `body`; a fragment is `body` after STYLE alone."""
    if fragment:
        return f"<style>{STYLE}</style>\n{body}\n"
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style></head>\n<body>\n{body}\n</body>\n</html>\n")


def figure_svg(fig) -> str:
    """The figure as SVG text, to draw inline in a page."""
    import io
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg")
    return buffer.getvalue()


def save_figure(fig, out_png: str | None, out_svg: str | None = None) -> None:
    """PNG for the report, SVG for print (either may be left out); the temporary names end in .tmp, so
    name the format."""
    if out_png:
        with atomic_path(out_png) as tmp:
            fig.savefig(tmp, format="png", dpi=120)
    if out_svg:
        with atomic_path(out_svg) as tmp:
            fig.savefig(tmp, format="svg")
