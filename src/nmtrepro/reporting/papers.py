"""The papers' numbers: read from a TSV in workflow/papers/ (row, column, value, note), set beside ours.

Every table and analysis reads its paper numbers here. `beside` joins them on the row label to a
DataFrame of ours (one row per system, one column per quantity), and wherever our column has the
paper's column name it adds the difference, so a reader sees the gap without opening the paper.
"""
from __future__ import annotations

import pandas as pd

from ..core.files import InputError, require_file

PAPER_COLUMNS = ["row", "column", "value", "note"]


def read_paper_numbers(path) -> pd.DataFrame:
    """The paper's numbers: TSV with header row, column, value, note; one line per table cell. A value
    `n/a` is a cell the paper shows only as a plot (NaN here: the table still has the cell to fill)."""
    try:
        table = pd.read_csv(require_file(path), sep="\t", dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise InputError(f"{path}: not a readable TSV ({err})") from err
    if list(table.columns) != PAPER_COLUMNS:
        raise InputError(f"{path}: header must be {' '.join(PAPER_COLUMNS)} (tab-separated), "
                         f"got {' '.join(map(str, table.columns))}")
    values = pd.to_numeric(table["value"].replace("n/a", "nan"), errors="coerce")
    bad = values.isna() & table["value"].ne("n/a")
    if bad.any():
        raise InputError(f"{path}: value must be a number, got {table.loc[bad, 'value'].tolist()}")
    repeated = table[table.duplicated(["row", "column"])]
    if len(repeated):
        raise InputError(f"{path}: cell ({repeated.iloc[0]['row']}, {repeated.iloc[0]['column']}) appears twice")
    return table.assign(value=values)


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
