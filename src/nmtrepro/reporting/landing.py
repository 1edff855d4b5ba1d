"""What the run found, for the report's first screen: a claims page in brief, as reStructuredText.

Snakemake renders the report's landing page (workflow/report/workflow.rst) from RST, and that page
includes each claims page's brief (`{page}.brief.rst`, written beside it): the page's one-line reading
and, for the central page, each claim with the paper's difference, ours and the verdict's words. So the
verdicts are on the report's first screen, not three clicks in. The brief is read from the page's own
Markdown (`nmtrepro claims` wrote it: the reading under the title, then the table), so that it shows
what the page shows and judges nothing again.
"""
from __future__ import annotations

import re
from pathlib import Path

from ..core.files import InputError, atomic_open
from ..evaluation.verdicts import verdict_word

# The columns a brief reads from the page's table (evaluation/verdicts.py's names).
COLUMNS = ("claim", "paper Δ", "ours Δ", "verdict")
_CELL = re.compile(r"(?<!\\)\|")   # a cell's end; write_table escapes a '|' inside a cell as '\|'
_RST_SPECIAL = re.compile(r"([\\*`_|])")


def rst_text(text: str) -> str:
    """`text` as RST reads it literally inside a paragraph (its markup characters escaped)."""
    return _RST_SPECIAL.sub(r"\\\1", text)


def read_page(path: str | Path) -> tuple[str, list[dict[str, str]]]:
    """(reading, rows of the first table) of a claims page's Markdown."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    body = [line for line in lines[1:] if line.strip()]
    if not lines or not lines[0].startswith("# ") or not body or body[0].startswith(("|", "![")):
        raise InputError(f"{path}: not a claims page (a '# ' title, then its one-line reading)")
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if start is None:
        raise InputError(f"{path}: no table of claims")
    table = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        table.append([cell.strip().replace("\\|", "|") for cell in _CELL.split(line.strip())[1:-1]])
    header, rows = table[0], table[2:]   # table[1]: the alignment row
    missing = [column for column in COLUMNS if column not in header]
    if missing:
        raise InputError(f"{path}: its table lacks the column(s) {', '.join(missing)}")
    return body[0], [dict(zip(header, row)) for row in rows]


def brief(label: str, reading: str, rows: list[dict[str, str]], verdicts: bool) -> str:
    """The page's label and reading as one paragraph and, with `verdicts`, a line for each claim."""
    text = f"**{rst_text(label)}**: {rst_text(reading)}\n"
    if verdicts:
        text += "\n" + "".join(f"- {rst_text(row['claim'])} (paper {row['paper Δ']}, ours {row['ours Δ']}): "
                               f"**{rst_text(verdict_word(row['verdict']))}**\n" for row in rows)
    return text


def add_arguments_landing(parser) -> None:
    parser.add_argument("--page", required=True, help="a claims page's Markdown (nmtrepro claims --out-md)")
    parser.add_argument("--label", required=True, help="the page's name in the report (its Claims label)")
    parser.add_argument("--verdicts", action="store_true", help="a line for each claim, not the reading alone")
    parser.add_argument("--out", required=True, help="the brief (.rst)")


def run_landing(args) -> None:
    reading, rows = read_page(args.page)
    with atomic_open(args.out) as handle:
        handle.write(brief(args.label, reading, rows, args.verdicts))
