"""Results tables beside the paper's numbers, claims pages with their verdicts, and training-curve plots."""
import json
import math
import re
from pathlib import Path

import pytest

from conftest import assert_balanced_html
from nmtrepro import cli
from nmtrepro.core.files import InputError
from nmtrepro.evaluation.significance import MeanDifference
from nmtrepro.reporting.papers import read_paper_numbers
from nmtrepro.reporting.report import build_table
from nmtrepro.reporting.table_inputs import Cell, read_table_inputs

PAPER_A_TABLE1 = Path(__file__).resolve().parents[1] / "workflow" / "papers" / "A_table1.tsv"
SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:none|smooth:none|version:2.6.0"


@pytest.fixture
def paper_numbers(tmp_path):
    path = tmp_path / "paper.tsv"
    path.write_text("row\tcolumn\tvalue\tnote\n"
                    "Base\tEn-De\t27.38\tWMT14 newstest2014\n"
                    "Base\tEn-Fr\t39.34\tWMT14 newstest2014\n"
                    "+PR\tEn-De\t28.67\tWMT14 newstest2014; † p < 0.01\n", encoding="utf-8")
    return path


def table_inputs(cells=(), **parts) -> str:
    """A table's inputs document (reporting/table_inputs.py) of cells (experiment, row, column, BLEU JSONs)."""
    return json.dumps({"cells": [{"experiment": e, "row": r, "column": c, "scores": [str(p) for p in paths]}
                                 for e, r, c, *paths in cells], **parts})


def bleu_json(tmp_path, name, tok_bleu, sacrebleu=None):
    path = tmp_path / f"{name}.bleu.json"
    entry = {"score": tok_bleu, "signature": SIGNATURE, "precisions": [0, 0, 0, 0], "bp": 1.0,
             "sys_len": 1, "ref_len": 1}
    scores = {"n": 1, "tok_bleu": entry, "chrf": dict(entry, score=tok_bleu + 20)}
    if sacrebleu is not None:
        scores["sacrebleu"] = dict(entry, score=sacrebleu)
    path.write_text(json.dumps(scores), encoding="utf-8")
    return path


def test_paper_a_table1_holds_all_eight_numbers():
    paper = read_paper_numbers(PAPER_A_TABLE1)
    values = {(r, c): v for r, c, v in zip(paper["row"], paper["column"], paper["value"])}
    assert values == {
        ("Transformer Base", "En-De"): 27.38, ("Transformer Base", "En-Fr"): 39.34,
        ("Transformer Base +PR", "En-De"): 28.67, ("Transformer Base +PR", "En-Fr"): 40.71,
        ("Transformer Big", "En-De"): 28.49, ("Transformer Big", "En-Fr"): 41.36,
        ("Transformer Big +PR", "En-De"): 29.60, ("Transformer Big +PR", "En-Fr"): 42.45,
    }
    assert all("†" in note for row, note in zip(paper["row"], paper["note"]) if row.endswith("+PR"))


def test_table_puts_paper_number_beside_ours_with_delta(tmp_path, paper_numbers):
    cells = [Cell("base_en_de", "Base", "En-De", (str(bleu_json(tmp_path, "de", 30.123)),), "multi30k test_2016_flickr")]
    table = build_table(paper_numbers, cells, "tok_bleu")
    row = table[(table["row"] == "Base") & (table["column"] == "En-De")].iloc[0]
    assert row["experiment"] == "base_en_de"
    assert row["paper BLEU"] == pytest.approx(27.38)
    assert row["ours"] == pytest.approx(30.12)
    assert row["Δ"] == pytest.approx(2.74)
    assert row["our test set"] == "multi30k test_2016_flickr"
    assert row["signature"] == SIGNATURE


def test_a_cell_of_several_seeds_shows_their_mean_and_each_seed(tmp_path, paper_numbers):
    paths = tuple(str(bleu_json(tmp_path, f"de{seed}", score)) for seed, score in ((1, 30.0), (2, 31.0), (3, 32.5)))
    table = build_table(paper_numbers, [Cell("base_en_de", "Base", "En-De", paths)], "tok_bleu")
    row = table[(table["row"] == "Base") & (table["column"] == "En-De")].iloc[0]
    assert row["ours"] == pytest.approx(31.17) and row["per seed"] == "30.00 / 31.00 / 32.50"
    assert table[table["row"] == "+PR"]["per seed"].eq("").all()


def test_table_reads_the_chosen_metric(tmp_path, paper_numbers):
    cells = [Cell("base_en_de", "Base", "En-De", (str(bleu_json(tmp_path, "de", 30.0, sacrebleu=25.0)),))]
    table = build_table(paper_numbers, cells, "sacrebleu")
    assert table.iloc[0]["ours"] == pytest.approx(25.0)
    assert table.iloc[0]["Δ"] == pytest.approx(25.0 - 27.38)


def test_table_keeps_unmeasured_paper_rows_in_paper_order(tmp_path, paper_numbers):
    cells = [Cell("base_en_fr", "Base", "En-Fr", (str(bleu_json(tmp_path, "fr", 40.0)),))]
    table = build_table(paper_numbers, cells, "tok_bleu")
    assert list(zip(table["row"], table["column"])) == [("Base", "En-De"), ("Base", "En-Fr"), ("+PR", "En-De")]
    unmeasured = table[table["row"] == "+PR"].iloc[0]
    assert unmeasured["paper BLEU"] == pytest.approx(28.67)
    assert math.isnan(unmeasured["ours"]) and math.isnan(unmeasured["Δ"])
    assert unmeasured["experiment"] == "" and unmeasured["signature"] == ""


def test_missing_bleu_json_names_the_file(tmp_path, paper_numbers):
    missing = tmp_path / "nowhere.bleu.json"
    with pytest.raises(InputError, match="nowhere.bleu.json"):
        build_table(paper_numbers, [Cell("x", "Base", "En-De", (str(missing),))], "tok_bleu")


def test_bleu_json_without_the_metric_names_file_and_metric(tmp_path, paper_numbers):
    path = bleu_json(tmp_path, "de", 30.0)
    with pytest.raises(InputError, match="sacrebleu") as err:
        build_table(paper_numbers, [Cell("x", "Base", "En-De", (str(path),))], "sacrebleu")
    assert str(path) in str(err.value)


def test_missing_paper_numbers_file_names_the_file(tmp_path):
    with pytest.raises(InputError, match="A_missing.tsv"):
        build_table(tmp_path / "A_missing.tsv", [], "tok_bleu")


def test_paper_numbers_with_wrong_header_is_refused(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("model\tEn-De\nBase\t27.38\n", encoding="utf-8")
    with pytest.raises(InputError, match="bad.tsv.*header"):
        read_paper_numbers(path)


def test_cell_not_in_paper_file_is_refused(tmp_path, paper_numbers):
    cells = [Cell("x", "Transformer base", "En-De", (str(bleu_json(tmp_path, "de", 30.0)),))]
    with pytest.raises(InputError, match="not in"):
        build_table(paper_numbers, cells, "tok_bleu")


def test_table_inputs_are_one_document_whose_bad_parts_are_refused_by_key():
    inputs = read_table_inputs(json.dumps({"cells": [
        {"experiment": "pr", "row": "+PR", "column": "En-De", "scores": ["a=b.json", "c.json"], "test_set": "t",
         "significance": {"baseline": "base", "path": "s.json"}},
        {"experiment": "base", "row": "Base", "column": "En-De", "scores": ["d.json"]}],
        "pool": {"central": "c.json"}, "annotation_stats": {"spans": ["x.json"]}}))
    assert inputs.cells == [Cell("pr", "+PR", "En-De", ("a=b.json", "c.json"), "t", "base", "s.json"),
                            Cell("base", "Base", "En-De", ("d.json",))]  # one JSON a seed; no test, no baseline
    assert inputs.pool == {"central": "c.json"} and inputs.paper_columns == [] and inputs.notes == []
    for bad, key in (({"cells": [{"experiment": "x", "row": "Base", "column": "En-De", "scores": "a.json"}]},
                      "cells[0].scores: wants a list"),
                     ({"cells": [{"experiment": "x", "row": "Base", "scores": ["a.json"]}]}, "cells[0]: missing ['column']"),
                     ({"cells": [{"experiment": "x", "row": "B", "column": "C", "scores": ["a.json"],
                                  "significance": {"baseline": "b"}}]}, "cells[0].significance: wants"),
                     ({"annotation_stats": {"spans": "x.json"}}, "annotation_stats.spans: wants a list"),
                     ({"paper_column": ["BLEU"]}, "unknown key(s) ['paper_column']")):
        with pytest.raises(InputError, match=re.escape(key)):
            read_table_inputs(json.dumps(bad))


def test_table_command_writes_markdown_and_html(tmp_path, paper_numbers):
    path = bleu_json(tmp_path, "de", 29.5)
    md, page = tmp_path / "out" / "T.md", tmp_path / "out" / "T.html"
    argv = ["table", "--title", "Paper A, Table 1", "--paper-numbers", str(paper_numbers), "--metric", "tok_bleu",
            "--inputs", json.dumps({"cells": [{"experiment": "base_en_de", "row": "Base", "column": "En-De",
                                               "scores": [str(path)], "test_set": "test_2016_flickr"}]}),
            "--scale", "tiny", "--out-md", str(md), "--out-html", str(page)]
    assert cli.main(argv) == 0
    text = md.read_text(encoding="utf-8")
    assert text.startswith("# Paper A, Table 1\n")
    measured = next(line for line in text.splitlines() if "base_en_de" in line)
    assert "27.38" in measured and "29.50" in measured and "+2.12" in measured
    assert "tok:none\\|smooth:none" in measured  # '|' escaped so the Markdown table keeps its columns
    assert "scale `tiny`" in text and "not comparable" in text and "case-sensitive" in text
    assert any("| +PR" in line and "28.67" in line for line in text.splitlines())  # unmeasured, still shown
    rows = sum(line.startswith("| ") for line in text.splitlines()) - 1
    assert f"\n1 of {rows} rows measured at this scale.\n" in text
    document = page.read_text(encoding="utf-8")
    assert "<table" in document and "29.50" in document and "+2.12" in document and "not comparable" in document
    assert '<td class="num">29.50</td>' in document and "<details><summary>" in document and "<style>" in document
    assert_balanced_html(document)
    assert not list((tmp_path / "out").glob(".*.tmp"))


def test_table_note_on_lowercased_data_does_not_call_the_scorer_case_sensitive(tmp_path, paper_numbers):
    md = tmp_path / "T.md"
    assert cli.main(["table", "--title", "T", "--paper-numbers", str(paper_numbers), "--metric", "tok_bleu",
                     "--inputs", table_inputs([("ll", "Base", "En-De", bleu_json(tmp_path, 'de', 20.0))]), "--lowercased",
                     "--out-md", str(md), "--out-html", str(tmp_path / "T.html")]) == 0
    note = md.read_text(encoding="utf-8").splitlines()[-1]
    assert "of lowercased output against lowercased references" in note and "case-sensitive" not in note


def test_table_note_names_the_parser_only_when_given_parse_stats(tmp_path, paper_numbers):
    path = bleu_json(tmp_path, "de", 29.5)
    stats = tmp_path / "train.stats.json"
    stats.write_text(json.dumps({"requested_backend": "auto", "backend": "spacy", "sentences": 3}))
    argv = ["table", "--title", "T", "--paper-numbers", str(paper_numbers), "--metric", "tok_bleu",
            "--inputs"]
    cells = [("pr_en_de", "+PR", "En-De", path)]
    plain = [tmp_path / "plain.md", tmp_path / "plain.html"]
    parsed = [tmp_path / "parsed.md", tmp_path / "parsed.html"]
    assert cli.main(argv + [table_inputs(cells), "--out-md", str(plain[0]), "--out-html", str(plain[1])]) == 0
    assert cli.main(argv + [table_inputs(cells, annotation_stats={"spans": [str(stats), str(stats)]}),
                            "--out-md", str(parsed[0]), "--out-html", str(parsed[1])]) == 0
    assert "Parser phrases" not in plain[0].read_text(encoding="utf-8")
    note = parsed[0].read_text(encoding="utf-8").splitlines()[-1]
    assert note.startswith(plain[0].read_text(encoding="utf-8").splitlines()[-1])  # the same note, then the parser
    assert note.count("spacy (stand-in)") == 1 and "dependency parse" in note
    assert "spacy (stand-in)" in parsed[1].read_text(encoding="utf-8")


def test_table_refuses_parse_stats_without_a_backend(tmp_path, paper_numbers, capsys):
    stats = tmp_path / "old.stats.json"
    stats.write_text(json.dumps({"sentences": 3}))
    argv = ["table", "--title", "T", "--paper-numbers", str(paper_numbers), "--metric", "tok_bleu",
            "--inputs", table_inputs(annotation_stats={"spans": [str(stats)]}), "--out-md", str(tmp_path / "T.md"), "--out-html", str(tmp_path / "T.html")]
    assert cli.main(argv) == 2
    assert "old.stats.json: no backend recorded" in capsys.readouterr().err


def test_table_command_reports_missing_json_without_traceback(tmp_path, paper_numbers, capsys):
    argv = ["table", "--title", "T", "--paper-numbers", str(paper_numbers), "--metric", "tok_bleu",
            "--inputs", table_inputs([("x", "Base", "En-De", tmp_path / "gone.json")]), "--out-md", str(tmp_path / "T.md"),
            "--out-html", str(tmp_path / "T.html")]
    assert cli.main(argv) == 2
    assert "gone.json" in capsys.readouterr().err
    assert not (tmp_path / "T.md").exists()


def test_plot_curves_writes_png_from_curve_with_empty_cells(tmp_path):
    header = "step\tepoch\twall_s\tlr\ttrain_loss\ttrain_nll\tvalid_loss\tvalid_nll\ttgt_tok_s\n"
    rows = ("5\t0\t1.0\t0.001\t9.1\t8.9\t\t\t1000\n"
            "10\t0\t2.0\t0.002\t8.2\t8.0\t\t\t1100\n"
            "10\t0\t2.1\t\t\t\t8.5\t8.3\t\n"
            "15\t1\t3.0\t0.002\t7.4\t7.1\t\t\t1050\n"
            "20\t1\t4.0\t0.002\t6.9\t6.5\t\t\t1070\n"
            "20\t1\t4.1\t\t\t\t7.6\t7.2\t\n")
    curves = []
    for name in ("base_en_de", "base_en_fr"):
        path = tmp_path / f"{name}.tsv"
        path.write_text(header + rows, encoding="utf-8")
        curves += ["--curve", f"{name}={path}"]
    out = tmp_path / "plots" / "curves.png"
    assert cli.main(["plot-curves", *curves, "--out", str(out)]) == 0
    assert out.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert out.stat().st_size > 1000


def test_a_long_figure_title_wraps_within_the_figure():
    from nmtrepro.reporting.render import figure
    title = "Paper D, Fig. 5: n-gram precision gaps vs Transformer (Base) (tokenized BLEU counts)"
    lines = figure(title, "tiny", figsize=(6, 4))._suptitle.get_text().split("\n")
    assert len(lines) == 2 and max(map(len, lines)) <= 66
    assert " ".join(lines) == f"{title} (scale tiny)"


def test_plot_curves_refuses_a_tsv_without_loss_columns(tmp_path, capsys):
    path = tmp_path / "odd.tsv"
    path.write_text("step\tloss\n1\t2.0\n", encoding="utf-8")
    assert cli.main(["plot-curves", "--curve", f"x={path}", "--out", str(tmp_path / "c.png")]) == 2
    assert "odd.tsv" in capsys.readouterr().err
    assert not (tmp_path / "c.png").exists()


def test_table_can_keep_only_some_paper_columns(tmp_path):
    path = tmp_path / "table2.tsv"
    path.write_text("row\tcolumn\tvalue\tnote\nBase\tBLEU\t27.38\t\nBase\tPara. (M)\t88.1\t\n", encoding="utf-8")
    cells = [Cell("base", "Base", "BLEU", (str(bleu_json(tmp_path, "base", 20.0)),))]
    table = build_table(path, cells, "tok_bleu", columns=["BLEU"])
    assert table["column"].tolist() == ["BLEU"] and table["ours"].tolist() == [20.0]
    with pytest.raises(InputError, match="no column"):
        build_table(path, cells, "tok_bleu", columns=["BLEU", "Time"])


def test_paper_a_table2_parameter_cells_span_the_rows_the_paper_prints_them_for():
    """Table 2 prints 129.0 once for +Mean/+Max and 173.0 once for +Max+Attn/+Max+Attn+TA (footnote 4)."""
    paper = read_paper_numbers(PAPER_A_TABLE1.with_name("A_table2.tsv"))
    para = dict(paper.loc[paper["column"] == "Para. (M)", ["row", "value"]].itertuples(index=False))
    assert para == {"Transformer Base": 88.1, "+Mean": 129.0, "+Max": 129.0, "+Max+Attn": 173.0,
                    "+Max+Attn+TA": 173.0, "Transformer Big": 264.1}


def write_significance(path, score, baseline, sd=0.25):
    """A significance JSON of one seed pair whose difference `score - baseline` has standard error `sd`."""
    test = MeanDifference(score - baseline, sd ** 2, None)
    entry = {"score": score, "baseline": baseline, "delta": score - baseline, "var": sd ** 2, "df": None,
             "var_bootstrap_mean": sd ** 2, "var_bootstrap_each": sd ** 2, "p_greater": test.p(+1), "p_less": test.p(-1),
             "seeds": [{"seed": 1, "score": score, "baseline": baseline, "delta": score - baseline}]}
    path.write_text(json.dumps({"tok_bleu": entry, "sacrebleu": entry, "chrf": dict(entry, delta=2 * entry["delta"])}))
    return str(path)


def test_a_tables_comparison_over_fewer_seeds_than_its_cell_names_them(tmp_path, paper_numbers):
    """'ours' is the mean over the cell's three seeds; 'vs baseline' pools only the seed its baseline shares."""
    paths = tuple(str(bleu_json(tmp_path, f"pr{seed}", score)) for seed, score in ((1, 30.0), (2, 31.0), (3, 32.5)))
    sig = write_significance(tmp_path / "sig.json", 30.0, 29.0, 0.5)
    table = build_table(paper_numbers, [Cell("pr_en_de", "+PR", "En-De", paths, "", "base_en_de", sig)], "tok_bleu")
    row = table[table["row"] == "+PR"].iloc[0]
    assert row["baseline"] == "base_en_de (seed 1)" and row["vs baseline"] == 1.0 and row["ours"] == pytest.approx(31.17)
    assert row["ours chrF"] == pytest.approx(51.17) and row["chrF vs baseline"] == 2.0  # the chrF JSON entries'

