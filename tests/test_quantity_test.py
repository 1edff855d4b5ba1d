"""Claims on a quantity an analysis measures (paper C's segment length, paper D's head similarity): each
seed's per-sentence statistics, the test over seed pairs, and the claims page that judges it beside the
BLEU claims, in the same family."""
import json

import numpy as np
import pytest

from conftest import claim
from nmtrepro import cli
from nmtrepro.analyses.probing.tasks import TASKS
from nmtrepro.analyses.quantity_test import STATISTICS, quantity_test, segment_statistics
from nmtrepro.core.files import InputError
from nmtrepro.evaluation.quantities import PROBING_TASKS, QUANTITIES
from test_claims import page, rows, write_significance


def decode_stats(path, segmented):
    path.write_text(json.dumps({"segmented": segmented}))
    return str(path)


def heads(path, sentences):
    path.write_text(json.dumps({"average": 0.0, "sentences": sentences}))
    return str(path)


def test_a_segment_models_lines_count_words_over_non_empty_segments_and_a_word_level_ones_words_alone(tmp_path):
    npmt = segment_statistics(decode_stats(tmp_path / "npmt.json", ["a b • c", "d e f", ""]))
    assert npmt.tolist() == [[3, 2], [3, 1], [0, 0]]
    (tmp_path / "ll.tok").write_text("a b c\n\nd\n")
    assert segment_statistics(str(tmp_path / "ll.tok")).tolist() == [[3, 3], [0, 0], [1, 1]]
    (tmp_path / "ll.json").write_text(json.dumps({"sentences": 3}))
    with pytest.raises(InputError, match="not a segment model's"):
        segment_statistics(str(tmp_path / "ll.json"))


def test_the_quantity_is_the_ratio_of_summed_statistics_and_its_test_pairs_the_seeds(tmp_path):
    """Seed 1: 6 words in 4 segments (1.5), seed 2: 6 in 3 (2.0), against one word a segment: Δ 0.5 and
    1.0, mean 0.75; each resample's ratio is of the resampled sums, so a sentence weighs by its words."""
    systems = [decode_stats(tmp_path / "s1.json", ["a b • c", "d e • f"]),
               decode_stats(tmp_path / "s2.json", ["a b c", "d • e f"])]
    (tmp_path / "ll.tok").write_text("x y\nz\n")
    entry = quantity_test("segment_length", systems, [str(tmp_path / "ll.tok")] * 2, [1, 2], samples=200)
    assert [e["delta"] for e in entry["seeds"]] == pytest.approx([0.5, 1.0]) and entry["delta"] == pytest.approx(0.75)
    assert entry["baseline"] == pytest.approx(1.0) and entry["var"] > 0 and entry["samples"] == 200
    assert QUANTITIES["segment_length"].score(np.array([[6.0, 4.0], [0.0, 0.0]])).tolist() == [1.5, 0.0]
    with pytest.raises(InputError, match="different numbers of sentences"):
        quantity_test("segment_length", systems[:1], [decode_stats(tmp_path / "b.json", ["a"])])


def test_a_head_similarity_claim_is_judged_on_the_page_in_the_familys_holm_correction(tmp_path):
    """+Fusing's heads 0.60 a token against Base's 0.80 over three seed pairs: the command writes the test
    with the seeds' BLEU from their significance JSON, and the page judges it (Δ < 0) beside a BLEU claim,
    Holm over both; it is not judged again in chrF, and its floor reads the BLEU it carries."""
    rng = np.random.default_rng(0)
    files = {}
    for side, level in (("fusing", 0.6), ("base", 0.8)):
        for seed in (1, 2, 3):
            tokens = rng.integers(5, 20, 200)
            files[side, seed] = heads(tmp_path / f"{side}{seed}.json",
                                      [[float(n * (level + rng.normal(0, 0.05))), float(n)] for n in tokens])
    floor = write_significance(tmp_path / "bleu.json", 30.0, 29.0, 0.2, [1.0, 1.1, 0.9])
    out = tmp_path / "heads.json"
    argv = ["quantity-test", "--quantity", "head_similarity", "--floor", floor, "--samples", "500", "--out", str(out)]
    argv += [a for seed in (1, 2, 3) for a in ("--stats", files["fusing", seed], "--base-stats", files["base", seed],
                                                "--seed", str(seed))]
    assert cli.main(argv) == 0
    entry = json.loads(out.read_text())["head_similarity"]
    assert entry["delta"] == pytest.approx(-0.2, abs=0.02) and [e["seed"] for e in entry["floor"]["seeds"]] == [1, 2, 3]
    bleu = write_significance(tmp_path / "other.json", 29.5, 29.0, 0.25)
    text = page(tmp_path, claim("heads less alike", -0.185, out, metric="head_similarity"),
                claim("a BLEU gain", 1.0, bleu),
                pool=[f"quiet={write_significance(tmp_path / 'q.json', 30.0, 29.0, 0.2, [1.0, 1.0, 1.0])}"])
    row = rows(text)["heads less alike"]
    assert row["metric"] == "head similarity" and row["verdict"] == "reproduced" and row["tested"] == "Δ < 0"
    assert row["chrF verdict"].startswith("not tested (a quantity") and row["Δ in other metrics"] == ""
    assert "Holm's correction" in text and "head similarity: the mean cosine" in text


def test_a_quantity_claim_on_models_below_the_bleu_floor_is_shown_and_not_judged(tmp_path):
    floor = write_significance(tmp_path / "bleu.json", 1.0, 0.5, 0.2, [0.5, 0.5], seed_scores=[(1.0, 0.5)] * 2)
    systems = [heads(tmp_path / f"s{i}.json", [[0.5, 1.0], [1.2, 2.0]]) for i in (1, 2)]
    bases = [heads(tmp_path / f"b{i}.json", [[0.8, 1.0], [1.6, 2.0]]) for i in (1, 2)]
    out = tmp_path / "q.json"
    argv = ["quantity-test", "--quantity", "head_similarity", "--floor", floor, "--samples", "100", "--out", str(out),
            "--recipe", "diverse/transformer"]   # the workflow passes significance's flags, the recipe with them
    argv += [a for s, b, seed in zip(systems, bases, "12") for a in ("--stats", s, "--base-stats", b, "--seed", seed)]
    assert cli.main(argv) == 0
    assert json.loads(out.read_text())["head_similarity"]["recipe"] == "diverse/transformer"
    row = rows(page(tmp_path, claim("heads less alike", -0.185, out, metric="head_similarity")))["heads less alike"]
    assert row["verdict"].startswith("not comparable at this scale (seed 1's system scores 1.00") and row["ours Δ"] == "-0.23"  # 1.7 / 3 - 2.4 / 3


def test_a_probing_claim_pairs_the_same_test_examples_of_two_encoders_in_points_of_accuracy(tmp_path):
    """Every SentEval task has its quantity (the registry's names are the probing suite's), read from a
    probe JSON's per-example outcomes: 3 of 4 right against 2 of 4 is +25 points."""
    assert set(PROBING_TASKS) == set(TASKS) and set(STATISTICS) == set(QUANTITIES)
    for name, right in (("rec", [1, 1, 0, 1]), ("base", [1, 0, 0, 1])):
        (tmp_path / f"{name}.json").write_text(json.dumps({"tree_depth": {"test": sum(right) / 4, "correct": right}}))
    entry = quantity_test("probe_tree_depth", [str(tmp_path / "rec.json")], [str(tmp_path / "base.json")], samples=100)
    assert entry["score"] == 75 and entry["baseline"] == 50 and entry["delta"] == 25
    with pytest.raises(InputError, match="no per-example outcomes of bigram_shift"):
        quantity_test("probe_bigram_shift", [str(tmp_path / "rec.json")], [str(tmp_path / "base.json")])
