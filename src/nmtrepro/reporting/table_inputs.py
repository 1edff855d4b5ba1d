"""A results table's inputs: one JSON document, read and checked by `read_table_inputs`.

The workflow builds it (workflow/rules/reporting_inputs.smk `table_document`) and passes it whole
(`nmtrepro table --inputs`); the table's scalars (title, paper numbers, metric, scale, marks) stay flags.
Each cell carries what its row shows, so nothing is keyed twice by an experiment's name:

    {"cells": [{"experiment": E, "row": ROW, "column": COLUMN,   # the paper's cell that E fills
                "scores": [JSON, ...],                          # its BLEU JSON of each seed, in seed order
                "test_set": NAME,                               # the test set shown in its row
                "significance": {"baseline": B, "path": JSON} | null}, ...],   # its paired bootstrap vs B
     "pool": {NAME: JSON, ...},                  # the comparisons the marks' seed noise pools over
     "paper_columns": [COLUMN, ...],             # only these columns of the paper's numbers (else all)
     "annotation_stats": {NAME: [JSON, ...]},    # the stats of the stage making an annotation cells read
     "notes": [PARAGRAPH, ...]}                  # under the table, after its own note

Every key, and a cell's `test_set` and `significance`, may be left out. A bad document is refused naming
its key (`--inputs cells[0].scores: wants a list of BLEU JSON paths, got 'a.json'`) before any file is read.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.files import InputError
from .documents import notes, paths, read_document, typed

KEYS = ("cells", "pool", "paper_columns", "annotation_stats", "notes")
CELL_KEYS = ("experiment", "row", "column", "scores", "test_set", "significance")


@dataclass(frozen=True)
class Cell:
    """One measured table cell: which experiment fills (row, column), the BLEU JSON of each of its seeds
    (one a seed replicate, in seed order; the cell shows their mean), the test set its row names, and its
    paired-bootstrap JSON against its baseline where it is compared with one."""
    experiment: str
    row: str
    column: str
    paths: tuple[str, ...]
    test_set: str = ""
    baseline: str | None = None
    significance: str | None = None


@dataclass(frozen=True)
class TableInputs:
    """What a table reads besides its paper numbers, every optional part filled in (empty where left out)."""
    cells: list[Cell]
    pool: dict[str, str]
    paper_columns: list[str]
    annotation_stats: dict[str, list[str]]
    notes: list[str]


def _text(value, key: str, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(f"--inputs {key}: wants {what}, got {value!r}")
    return value


def _strings(value, key: str, what: str) -> list[str]:
    """A list of non-empty strings of the document (a cell's scores, the paper columns, a stage's stats)."""
    for n, item in enumerate(typed(value, list, key, f"a list of {what}")):
        _text(item, f"{key}[{n}]", what)
    return value


def _cell(given, key: str) -> Cell:
    """A cell's object (module docstring) as a Cell."""
    typed(given, dict, key, "an object {experiment, row, column, scores[, test_set][, significance]}")
    missing = [k for k in CELL_KEYS[:4] if k not in given]
    unknown = sorted(set(given) - set(CELL_KEYS))
    problems = [f"missing {missing}"] if missing else []
    problems += [f"unknown {unknown} (it has {list(CELL_KEYS)})"] if unknown else []
    if problems:
        raise InputError(f"--inputs {key}: {'; '.join(problems)}")
    names = [_text(given[k], f"{key}.{k}", "a name") for k in ("experiment", "row", "column")]
    scores = _strings(given["scores"], f"{key}.scores", "BLEU JSON paths")
    if not scores:
        raise InputError(f"--inputs {key}.scores: no BLEU JSON (one a seed)")
    test_set = given.get("test_set", "")
    typed(test_set, str, f"{key}.test_set", "the test set's name")
    sig = given.get("significance")
    if sig is not None:
        typed(sig, dict, f"{key}.significance", "an object {baseline, path} or null")
        if set(sig) != {"baseline", "path"}:
            raise InputError(f"--inputs {key}.significance: wants {{\"baseline\": B, \"path\": JSON}}, got {sig!r}")
        sig = {k: _text(sig[k], f"{key}.significance.{k}", "a name" if k == "baseline" else "a JSON path")
               for k in ("baseline", "path")}
    return Cell(*names, tuple(scores), test_set, *((sig["baseline"], sig["path"]) if sig else (None, None)))


def read_table_inputs(text: str) -> TableInputs:
    """The table's inputs from the document (module docstring), each part checked by its key."""
    doc = read_document(text, KEYS)
    cells = [_cell(given, f"cells[{n}]") for n, given in enumerate(typed(doc.get("cells", []), list, "cells",
                                                                          "a list of cells"))]
    stats = typed(doc.get("annotation_stats", {}), dict, "annotation_stats", "an object {NAME: [JSON, ...]}")
    for name, files in stats.items():
        _strings(files, f"annotation_stats.{name}", "stats JSON paths")
    return TableInputs(cells, paths(doc.get("pool", {}), "pool"),
                       _strings(doc.get("paper_columns", []), "paper_columns", "column names"), stats, notes(doc))
