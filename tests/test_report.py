"""Results tables beside the paper's numbers, claims pages with their verdicts, and training-curve plots."""
import json
import math
from pathlib import Path

import pytest
from scipy.stats import norm

from conftest import assert_balanced_html
from nmtrepro import cli
from nmtrepro.core.files import InputError
from nmtrepro.evaluation.multiplicity import holm
from nmtrepro.evaluation.significance import MeanDifference
from nmtrepro.reporting.papers import read_paper_numbers
from nmtrepro.reporting.report import Cell, build_table, parse_cell

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


def bleu_json(tmp_path, name, tok_bleu, sacrebleu=None):
    path = tmp_path / f"{name}.bleu.json"
    entry = {"score": tok_bleu, "signature": SIGNATURE, "precisions": [0, 0, 0, 0], "bp": 1.0,
             "sys_len": 1, "ref_len": 1}
    scores = {"n": 1, "tok_bleu": entry}
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
    cells = [Cell("base_en_de", "Base", "En-De", (str(bleu_json(tmp_path, "de", 30.123)),))]
    table = build_table(paper_numbers, cells, "tok_bleu", {"base_en_de": "multi30k test_2016_flickr"})
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


def test_cell_spec_splits_into_four_fields_keeping_equals_in_the_path():
    assert parse_cell("base_en_de=Transformer Base=En-De=results/a=b.json") == \
        Cell("base_en_de", "Transformer Base", "En-De", ("results/a=b.json",))
    assert parse_cell("pr=+PR=En-De=a.json,b.json").paths == ("a.json", "b.json")  # one a seed
    with pytest.raises(InputError, match="EXPERIMENT=ROW=COLUMN=PATH"):
        parse_cell("base_en_de=Transformer Base=results/x.json")


def test_table_command_writes_markdown_and_html(tmp_path, paper_numbers):
    path = bleu_json(tmp_path, "de", 29.5)
    md, page = tmp_path / "out" / "T.md", tmp_path / "out" / "T.html"
    argv = ["table", "--title", "Paper A, Table 1", "--paper-numbers", str(paper_numbers), "--metric", "tok_bleu",
            "--cell", f"base_en_de=Base=En-De={path}", "--test-set", "base_en_de=test_2016_flickr",
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
                     "--cell", f"ll=Base=En-De={bleu_json(tmp_path, 'de', 20.0)}", "--lowercased",
                     "--out-md", str(md), "--out-html", str(tmp_path / "T.html")]) == 0
    note = md.read_text(encoding="utf-8").splitlines()[-1]
    assert "of lowercased output against lowercased references" in note and "case-sensitive" not in note


def test_table_note_names_the_parser_only_when_given_parse_stats(tmp_path, paper_numbers):
    path = bleu_json(tmp_path, "de", 29.5)
    stats = tmp_path / "train.stats.json"
    stats.write_text(json.dumps({"requested_backend": "auto", "backend": "spacy", "sentences": 3}))
    argv = ["table", "--title", "T", "--paper-numbers", str(paper_numbers), "--metric", "tok_bleu",
            "--cell", f"pr_en_de=+PR=En-De={path}"]
    plain = [tmp_path / "plain.md", tmp_path / "plain.html"]
    parsed = [tmp_path / "parsed.md", tmp_path / "parsed.html"]
    assert cli.main(argv + ["--out-md", str(plain[0]), "--out-html", str(plain[1])]) == 0
    assert cli.main(argv + ["--parser-stats", str(stats), "--parser-stats", str(stats),
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
            "--parser-stats", str(stats), "--out-md", str(tmp_path / "T.md"), "--out-html", str(tmp_path / "T.html")]
    assert cli.main(argv) == 2
    assert "old.stats.json: no parse backend recorded" in capsys.readouterr().err


def test_table_command_reports_missing_json_without_traceback(tmp_path, paper_numbers, capsys):
    argv = ["table", "--title", "T", "--paper-numbers", str(paper_numbers), "--metric", "tok_bleu",
            "--cell", f"x=Base=En-De={tmp_path / 'gone.json'}", "--out-md", str(tmp_path / "T.md"),
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


def write_significance(path, score, baseline, sd=0.25, seed_deltas=None, df=None):
    """A significance JSON whose mean difference `score - baseline` has standard error `sd` against a
    normal (`df` None) or t reference: the one-sided p of 'beats' is then norm.sf(Δ / sd) (Δ = 2.33 sd:
    p = 0.010); `seed_deltas`: the seed pairs' differences (default: one, the mean's)."""
    deltas = seed_deltas or [score - baseline]
    test = MeanDifference(score - baseline, sd ** 2, df)
    low, high = test.bounds(0.95)
    entry = {"score": score, "baseline": baseline, "delta": score - baseline, "var": sd ** 2, "df": df,
             "var_seeds": None, "var_shared": sd ** 2, "p_greater": test.p(+1), "p_less": test.p(-1),
             "ci_low": score - 0.5, "ci_high": score + 0.5, "delta_low": low, "delta_high": high,
             "samples": 10000, "bootstrap_seed": 12345,
             "seeds": [{"seed": i + 1, "score": baseline + d, "baseline": baseline, "delta": d} for i, d in enumerate(deltas)]}
    path.write_text(json.dumps({"tok_bleu": entry, "sacrebleu": entry}))
    return str(path)


def claims_page(tmp_path, *claims, correction=None):
    """The markdown claims page of these --claim specs."""
    out = tmp_path / "claims.md"
    argv = ["claims", "--title", "Paper X: claims", "--note", "Protocol: test.", "--out-md", str(out),
            "--out-html", str(tmp_path / "claims.html"), "--out-svg", str(tmp_path / "claims.svg")]
    argv += [arg for claim in claims for arg in ("--claim", claim)]
    assert cli.main(argv + (["--correction", correction] if correction else [])) == 0
    assert "Protocol: test." in out.read_text() and "![Paper X: claims](claims.svg)" in out.read_text()
    return out.read_text()


def claim_row(tmp_path, claim, text):
    """The claims page's row of one --claim."""
    return next(line for line in claims_page(tmp_path, claim).splitlines() if line.startswith(f"| {text}"))


def verdict_of(row):
    """The verdict cell: the page's last column but one (the last says whether the paper's Δ lies inside our CI)."""
    return row.split("|")[-3].strip()


@pytest.mark.parametrize("ours, sd, expected", [
    (30.0, 0.25, "reproduced"),
    (30.0, 2.0, "not reproduced"),                         # the paper's sign, but no evidence
    (28.0, 0.25, "contradicted (Δ < 0: p <0.001, Holm <0.001)"),  # significantly the other way
])
def test_a_claims_verdict_follows_from_the_measured_difference(tmp_path, ours, sd, expected):
    sig = write_significance(tmp_path / "sig.json", ours, 29.0, sd)
    row = claim_row(tmp_path, f"1.29=tok_bleu=yes={sig}=+PR helps (a=b)", "+PR helps (a=b)")
    assert verdict_of(row) == expected and f"{ours - 29.0:+.2f}" in row and "+1.29" in row and "| Δ > 0 " in row


@pytest.mark.parametrize("ours, expected", [(28.0, "reproduced"), (30.0, "contradicted (Δ > 0: p <0.001, Holm <0.001)")])
def test_a_claim_of_a_negative_difference_is_tested_in_its_own_direction(tmp_path, ours, expected):
    sig = write_significance(tmp_path / "sig.json", ours, 29.0)
    row = claim_row(tmp_path, f"-0.65=tok_bleu=yes={sig}=the layer hurts", "the layer hurts")
    assert verdict_of(row) == expected and "| Δ < 0 " in row and "-0.65" in row


@pytest.mark.parametrize("ours, sd, expected", [
    (29.02, 0.08, "reproduced"),           # Δ ≈ 0 and its upper bound below the margin: no gain, as claimed
    (29.02, 0.5, "not reproduced"),        # Δ ≈ 0 but too uncertain to rule out a gain of 0.3
    (29.9, 0.1, "contradicted (Δ > +0.30: p <0.001, Holm <0.001)"),  # a gain well beyond the margin
    (29.25, 0.05, "not reproduced"),       # a significant +0.25 is a gain the margin allows, not "no gain"
])
def test_a_claim_of_no_gain_is_tested_for_non_superiority_within_its_margin(tmp_path, ours, sd, expected):
    sig = write_significance(tmp_path / "sig.json", ours, 29.0, sd)
    page = claims_page(tmp_path, f"-0.65<0.3=tok_bleu=yes={sig}=the layer does not help")
    row = next(line for line in page.splitlines() if line.startswith("| the layer does not help"))
    assert verdict_of(row) == expected and "| Δ < +0.30 " in row and "below the stated margin" in page


def test_holm_adjusts_a_pages_p_values_over_both_directions_and_the_primary_page_does_not(tmp_path):
    """Three claims at raw one-sided p 0.002, 0.008 and 0.040 (the opposite directions' 0.998, 0.992 and
    0.960): Holm over the one family of all six makes them 0.012, 0.040 and 0.160, so two are reproduced
    on a paper's page; on the primary claims' page, uncorrected, all three are."""
    claims = [f"1.0=tok_bleu=yes={write_significance(tmp_path / f'{i}.json', 29.0 + norm.isf(p), 29.0, 1.0)}=claim {i}"
              for i, p in enumerate((0.002, 0.008, 0.040))]
    page = claims_page(tmp_path, *claims)
    rows = [line for line in page.splitlines() if line.startswith(("| claim 0", "| claim 1", "| claim 2"))]
    assert [[cell.strip() for cell in row.split("|")[8:10]] for row in rows] == [["0.002", "0.012"], ["0.008", "0.040"],
                                                                                ["0.040", "0.160"]]
    assert [verdict_of(row) for row in rows] == ["reproduced", "reproduced", "not reproduced"]
    assert "over one family, both directions of this page's 3 judged claims" in page
    assert "10,000 resamples, seed 12345" in page
    primary = claims_page(tmp_path, *claims, correction="none")
    assert [verdict_of(line) for line in primary.splitlines() if line.startswith("| claim ")][1:] == ["reproduced"] * 3
    assert "Holm p" not in primary and "no correction for multiplicity" in primary


def test_a_paper_difference_outside_our_interval_is_flagged_beside_the_verdict(tmp_path):
    """A reproduced direction may still be a different size: the row says whether the paper's Δ lies in
    our 90% interval."""
    sig = write_significance(tmp_path / "sig.json", 29.2, 29.0, 0.05)    # 90% CI +0.12 to +0.28
    far = claim_row(tmp_path, f"1.29=tok_bleu=yes={sig}=+PR helps", "+PR helps")
    near = claim_row(tmp_path, f"0.25=tok_bleu=yes={sig}=+PR helps", "+PR helps")
    assert verdict_of(far) == verdict_of(near) == "reproduced"
    assert far.split("|")[-2].strip() == "paper Δ outside" and near.split("|")[-2].strip() == "consistent"


def test_holm_multiplies_the_ith_smallest_of_m_by_m_minus_i_and_keeps_the_order():
    assert holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0]) and holm([]) == []


def test_a_claims_page_says_in_two_sentences_what_its_verdicts_mean(tmp_path):
    sig = write_significance(tmp_path / "sig.json", 30.0, 29.0)
    page = claims_page(tmp_path, f"1.29=tok_bleu=yes={sig}=+PR helps")
    assert "Reproduced means this run shows what the claim says at 0.05 after that correction" in page
    assert "Not reproduced means this run cannot tell either way at its size" in page


def test_a_claim_not_comparable_at_this_scale_is_listed_unmeasured(tmp_path, capsys):
    row = claim_row(tmp_path, "2.01=tok_bleu=no=-=NPMT beats LL", "NPMT beats LL")
    assert verdict_of(row) == "not comparable at this scale" and "+2.01" in row
    sig = write_significance(tmp_path / "sig.json", 30.0, 29.0)
    assert cli.main(["claims", "--title", "t", "--claim", f"2.01=tok_bleu=no={sig}=x", "--out-md",
                     str(tmp_path / "a.md"), "--out-html", str(tmp_path / "a.html"), "--out-svg", str(tmp_path / "a.svg")]) == 2
    assert "names none" in capsys.readouterr().err


def test_a_claim_against_a_baseline_that_does_not_translate_is_not_judged(tmp_path):
    """Two models at ~0 BLEU "agree" on a claim of no gain; against a baseline below MIN_BASELINE_BLEU
    the claim is shown, not judged, and leaves the page's family of tests."""
    weak = write_significance(tmp_path / "weak.json", 0.0, 0.0, 0.01)
    strong = write_significance(tmp_path / "strong.json", 30.0, 29.0, 0.25)
    page = claims_page(tmp_path, f"-0.29<0.1=tok_bleu=yes={weak}=16 steps do not beat 8",
                       f"1.29=tok_bleu=yes={strong}=+PR helps")
    row = next(line for line in page.splitlines() if line.startswith("| 16 steps"))
    assert verdict_of(row) == "not comparable at this scale (its baseline scores 0.00, below 5 BLEU)"
    assert "| +0.00 (seed 1) " in row and "Holm" not in verdict_of(row)      # its numbers, shown
    assert "1 of 1 measured claims reproduced" in page and "1 not comparable at this scale" in page
    assert "both directions of this page's 1 judged claims" in page and "below 5 BLEU: a model" in page
    alone = claims_page(tmp_path, f"-0.29<0.1=tok_bleu=yes={weak}=16 steps do not beat 8")
    assert "No claim judged at this scale: 1 not comparable." in alone


def test_a_claims_verdict_flips_when_one_seeds_sign_flips(tmp_path):
    """Reproduced needs most seed pairs on the paper's side, besides the pooled p: the same mean and p
    with two of three seeds against the paper is not reproduced."""
    agree = write_significance(tmp_path / "agree.json", 30.0, 29.0, 0.25, [1.6, 1.2, -0.1])
    split = write_significance(tmp_path / "split.json", 30.0, 29.0, 0.25, [3.2, -0.1, -0.1])
    row = claim_row(tmp_path, f"1.29=tok_bleu=yes={agree}=+PR helps", "+PR helps")
    assert verdict_of(row) == "reproduced" and "+1.60 (seed 1) / +1.20 (seed 2) / -0.10 (seed 3)" in row
    row = claim_row(tmp_path, f"1.29=tok_bleu=yes={split}=+PR helps", "+PR helps")
    assert verdict_of(row) == "not reproduced"


def test_a_claim_the_paper_calls_marginal_says_so_beside_its_verdict(tmp_path):
    sig = write_significance(tmp_path / "sig.json", 29.1, 29.0, 0.6)
    row = claim_row(tmp_path, f"0.09:marginally=tok_bleu=yes={sig}=stack beats gated", "stack beats gated")
    assert verdict_of(row) == "not reproduced (the paper: marginally)" and "+0.09" in row


@pytest.mark.parametrize("spec, message", [
    ("big=tok_bleu=yes=x.json=a text", "'big' is not a number"),
    ("0=tok_bleu=yes=x.json=a text", "needs a non-zero paper difference"),
    ("-0.2<0=tok_bleu=yes=x.json=a text", "needs a positive margin"),
])
def test_a_malformed_claim_is_named(tmp_path, capsys, spec, message):
    assert cli.main(["claims", "--title", "t", "--claim", spec,
                     "--out-md", str(tmp_path / "a.md"), "--out-html", str(tmp_path / "a.html"),
                     "--out-svg", str(tmp_path / "a.svg")]) == 2
    assert message in capsys.readouterr().err


def test_a_tables_comparison_over_fewer_seeds_than_its_cell_names_them(tmp_path, paper_numbers):
    """'ours' is the mean over the cell's three seeds; 'vs baseline' pools only the seed its baseline shares."""
    paths = tuple(str(bleu_json(tmp_path, f"pr{seed}", score)) for seed, score in ((1, 30.0), (2, 31.0), (3, 32.5)))
    sig = write_significance(tmp_path / "sig.json", 30.0, 29.0, 0.5)
    table = build_table(paper_numbers, [Cell("pr_en_de", "+PR", "En-De", paths)], "tok_bleu",
                        significance={"pr_en_de": sig}, baselines={"pr_en_de": "base_en_de"})
    row = table[table["row"] == "+PR"].iloc[0]
    assert row["baseline"] == "base_en_de (seed 1)" and row["vs baseline"] == 1.0 and row["ours"] == pytest.approx(31.17)


def test_a_claims_page_reads_in_one_line_draws_its_forest_plot_and_labels_its_verdicts(tmp_path):
    """The HTML page: the one-line reading first, the forest plot inline (the SVG on disk too: the
    Markdown links it), each verdict a label that carries its word, the notes folded away; the page
    parses with every tag closed."""
    good, flat = write_significance(tmp_path / "a.json", 30.0, 29.0, 0.25), write_significance(tmp_path / "b.json", 29.0, 29.0, 2.0)
    page = claims_page(tmp_path, f"1.29=tok_bleu=yes={good}=helps", f"0.5=tok_bleu=yes={flat}=also helps",
                       "2.0=tok_bleu=no=-=a claim made at paper scale")
    assert page.index("1 of 2 measured claims reproduced, 0 contradicted, 1 not reproduced") < page.index("| helps")
    assert "1 not comparable at this scale" in page
    text = (tmp_path / "claims.html").read_text()
    assert text.index('<p class="reading">') < text.index("<figure><svg") < text.index("<table>") < text.index("<details>")
    assert '<span class="label good">reproduced</span>' in text and '<span class="label open">not reproduced</span>' in text
    assert '<span class="label none">not comparable at this scale</span>' in text
    svg = (tmp_path / "claims.svg").read_text()
    assert "helps" in svg and "a claim made at paper scale" in svg and "reproduced" in svg

    assert_balanced_html(text)


def test_the_across_scales_page_sets_each_claim_beside_itself_at_every_scale(tmp_path):
    """Two scales' JSONs of the same claims: one row a (claim, scale), claims first, each scale's verdict
    by its own test; a JSON of the old test at another scale is named in the reading, not read."""
    specs = []
    for scale, ours in (("ci", 29.2), ("tiny", 30.5)):
        path = write_significance(tmp_path / f"{scale}.json", ours, 29.0, 0.25)
        specs += ["--claim", f"{scale}=1.29=tok_bleu=yes={path}=+PR helps"]
    (tmp_path / "old.json").write_text(json.dumps({"tok_bleu": {"delta": 1.0, "seeds": []}}))
    specs += ["--claim", f"gpu=1.29=tok_bleu=yes={tmp_path / 'old.json'}=+PR helps",
              "--claim", "tiny=2.0=tok_bleu=no=-=NPMT helps"]
    out = {ext: tmp_path / f"x.{ext}" for ext in ("md", "html", "svg")}
    assert cli.main(["across-scales", "--title", "Claims at every scale", "--correction", "none", *specs,
                     *[a for ext, path in out.items() for a in (f"--out-{ext}", str(path))]]) == 0
    page = out["md"].read_text()
    rows = [line for line in page.splitlines() if line.startswith("| +PR") or line.startswith("| NPMT")]
    assert [row.split("|")[2].strip() for row in rows] == ["ci", "tiny", "tiny"]
    assert "not reproduced" in rows[0] and "| reproduced" in rows[1] and "not comparable" in rows[2]
    assert "29.00" in rows[0] and "+0.20" in rows[0] and "+1.50" in rows[1]
    assert "Not read, written by the test used before 2026-11-28" in page and "gpu: +PR helps" in page
    assert "<figure><svg" in out["html"].read_text() and "+PR helps [tiny]" in out["svg"].read_text()
    assert_balanced_html(out["html"].read_text())
