"""Paper C's phrase analysis: average segment length and the segments table."""
import pytest

import pandas as pd

from nmtrepro.analyses.segments import sample_lines, segments_table
from nmtrepro.core.files import InputError
from nmtrepro.evaluation.generate import segment_stats


def test_average_segment_length_counts_words_over_non_empty_segments():
    stats = segment_stats([["a b", "", "c"], ["d e f"], [""]])
    assert stats["avg_segment_length"] == pytest.approx(6 / 3) and stats["segments"] == 3
    assert stats["segmented"] == ["a b • c", "d e f", ""]
    assert segment_stats([[""]])["avg_segment_length"] is None


def test_segments_table_samples_the_same_short_lines_for_every_system():
    src = ["w " * n for n in (3, 50, 4, 5, 2)]
    lines = sample_lines([len(s.split()) for s in src], count=2, max_len=10, seed=1)
    assert len(lines) == 2 and 1 not in lines and lines == sorted(lines)
    systems = {name: {"avg_segment_length": 1.5, "segmented": [f"{name} • {i}" for i in range(5)]} for name in "AB"}
    table = segments_table(src, [f"ref {i}" for i in range(5)], systems, count=2, max_len=10, seed=1)
    outputs = table[table[""] == "Output"]["text"].tolist()
    assert outputs == [f"A • {i}" for i in lines] + [f"B • {i}" for i in lines]
    assert table.iloc[0]["text"] == "1.50"
    with pytest.raises(InputError, match="kept no segments"):
        segments_table(src, src, {"T": {"avg_segment_length": None}}, count=1, max_len=10, seed=1)


def test_the_papers_segment_length_stands_under_the_systems_own():
    paper = pd.DataFrame({"row": ["A"], "column": ["average segment length"], "value": [1.35], "note": ["around 1.3-1.4"]})
    systems = {name: {"avg_segment_length": 1.2, "segmented": ["x • y"]} for name in "AB"}
    table = segments_table(["s"], ["r"], systems, count=1, max_len=10, seed=1, paper=paper)
    assert table.iloc[:2]["text"].tolist() == ["1.20", "1.35 (around 1.3-1.4)"] and table.iloc[1][""] == "paper: average segment length"
    assert len(table) == 2 + 3 + 1 + 3  # B, which the paper does not print, has no paper row
