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


def test_a_one_seed_probing_claim_takes_its_recipes_seed_noise_from_the_pools_test_of_the_same_quantity(tmp_path):
    """+Rec against Base on one seed, a probing accuracy: with no test of that quantity in the pool (only
    BLEU's) its seed noise is unmeasured; with the pool's three-seed test of the same quantity and recipe
    (+Fusing against Base, the workflow's `quantity_pool`) it is judged with that seed noise, in points of
    accuracy, while a BLEU claim on the page pools over BLEU's tests alone."""
    rng = np.random.default_rng(1)

    def probe(name, accuracy):
        right = rng.permutation(np.arange(2000) < accuracy * 2000).astype(int).tolist()   # that share right
        (tmp_path / f"{name}.json").write_text(json.dumps({"tree_depth": {"test": float(np.mean(right)), "correct": right}}))
        return str(tmp_path / f"{name}.json")

    def test(name, systems, bases, floor):
        out = tmp_path / f"{name}.probe_tree_depth.json"
        argv = ["quantity-test", "--quantity", "probe_tree_depth", "--floor", floor, "--samples", "300",
                "--out", str(out), "--recipe", "diverse/transformer"]
        argv += [a for seed, (s, b) in enumerate(zip(systems, bases), 1)
                 for a in ("--stats", s, "--base-stats", b, "--seed", str(seed))]
        assert cli.main(argv) == 0
        return str(out)

    bleu3 = write_significance(tmp_path / "fusing.json", 30.0, 29.0, 0.2, [1.0, 1.3, 0.7],
                               families=("diverse", "transformer"))
    fusing = test("fusing", [probe(f"fusing{s}", a) for s, a in ((1, 0.40), (2, 0.44), (3, 0.42))],
                  [probe(f"base{s}", 0.30) for s in (1, 2, 3)], bleu3)
    rec = test("rec", [probe("rec1", 0.45)], [str(tmp_path / "base1.json")],
               write_significance(tmp_path / "rec.json", 30.0, 29.0, 0.2, families=("diverse", "transformer")))
    bleu1 = write_significance(tmp_path / "gain.json", 30.0, 29.0, 0.25, recipe="diverse/transformer")
    claims = (claim("rec probes better", 1.22, rec, metric="probe_tree_depth"), claim("a BLEU gain", 1.0, bleu1))
    alone = rows(page(tmp_path, *claims, pool=[f"fusing_en_de={bleu3}"]))
    assert alone["rec probes better"]["verdict"].startswith("seed noise unmeasured")
    text = page(tmp_path, *claims, pool=[f"fusing_en_de={bleu3}", f"fusing_en_de, probe_tree_depth={fusing}"])
    judged = rows(text)
    assert judged["rec probes better"]["verdict"] == "reproduced" and judged["rec probes better"]["ours Δ"] == "+15.00"
    assert judged["a BLEU gain"]["p"] == alone["a BLEU gain"]["p"]   # its test the same; Holm's family one larger
    assert "Seed noise (probing accuracy, tree_depth (%)): the SD of a seed pair's offset" in text
    bleu_noise = text.split("Seed noise (tokenized BLEU)")[1].split("Seed noise")[0]
    assert "from fusing_en_de, probe_tree_depth" in text and "probe_tree_depth" not in bleu_noise
