"""The seed-pooled paired bootstrap (`nmtrepro significance`) and the papers' significance marks: with
one seed pair it is sacreBLEU's own test; with several it agrees with a brute-force enumeration of every
resample on a toy case."""
import itertools
import json

import numpy as np
import pytest
from sacrebleu.significance import PairedTest

from nmtrepro import cli
from nmtrepro.core.files import InputError
from nmtrepro.evaluation.bleu import make_metric
from nmtrepro.evaluation.significance import mark, pooled_bootstrap

REFS = [f"sentence number {i} says the {w} sat on a mat near house {i % 7}"
        for i, w in enumerate(["cat", "dog", "bird", "cow", "fox"] * 8)]


def degraded(refs, every, seed=0):
    """Each sentence with every `every`-th word replaced (shifted by `seed`): a system of known quality."""
    return [" ".join("xx" if (j + seed) % every == 0 else w for j, w in enumerate(r.split())) for r in refs]


def test_identical_systems_are_not_significantly_different():
    result = pooled_bootstrap([(REFS[:20] + ["x"] * 20, REFS[:20] + ["x"] * 20)], [REFS], "tok_bleu")
    assert result["p_value"] == 1.0
    assert result["score"] == result["baseline"]
    assert mark(result["score"], result["baseline"], result["p_value"], "dagger") == ""


def test_two_different_systems_with_the_same_score_are_not_significantly_different():
    """Two different outputs that both score BLEU 0 on every resample (as two untrained models can)."""
    result = pooled_bootstrap([(["x y"] * 40, ["z"] * 40)], [REFS], "tok_bleu")
    assert result["score"] == result["baseline"] == 0.0 and result["p_value"] == 1.0


def test_reference_beats_garbage_at_p_below_001_with_its_ci():
    garbage = [" ".join(reversed(r.split()))[:20] for r in REFS]
    result = pooled_bootstrap([(REFS, garbage)], [REFS], "tok_bleu")
    assert result["score"] == pytest.approx(100.0)
    assert result["p_value"] < 0.01
    assert result["ci_low"] <= result["mean"] <= result["ci_high"] and result["delta_low"] > 0
    assert "bs:1000" in result["signature"] and "seed:12345" in result["signature"]
    assert mark(result["score"], result["baseline"], result["p_value"], "dagger") == "†"


@pytest.mark.parametrize("metric", ["sacrebleu", "tok_bleu"])
def test_one_seed_pair_is_sacrebleus_own_paired_bootstrap(metric):
    system, baseline = degraded(REFS, 7), degraded(REFS, 5)  # 4-grams left to match: tok_bleu is unsmoothed
    test = PairedTest([("baseline", baseline), ("system", system)], {"BLEU": make_metric(metric)}, [REFS],
                      test_type="bs", n_samples=1000)
    theirs = test()[1]["BLEU"][1]
    ours = pooled_bootstrap([(system, baseline)], [REFS], metric)
    assert ours["p_value"] == theirs.p_value
    assert (ours["score"], ours["mean"], ours["ci"]) == pytest.approx((theirs.score, theirs.mean, theirs.ci), abs=1e-4)


def brute_force(pairs, refs, metric_name):
    """The exact two-level bootstrap: every draw of k seed pairs and n sentences (k^k n^n equally likely
    resamples), each scored with sacreBLEU's corpus BLEU from scratch. Returns the p-value (sacreBLEU's
    centred two-sided rule, without its +1 smoothing) and the mean resampled difference."""
    metric = make_metric(metric_name)
    n, k = len(refs), len(pairs)
    observed = np.mean([metric.corpus_score(s, [refs]).score - metric.corpus_score(b, [refs]).score for s, b in pairs])
    diffs = []
    for seeds in itertools.product(range(k), repeat=k):
        for idx in itertools.product(range(n), repeat=n):
            diffs.append(np.mean([metric.corpus_score([pairs[j][0][i] for i in idx], [[refs[i] for i in idx]]).score
                                  - metric.corpus_score([pairs[j][1][i] for i in idx], [[refs[i] for i in idx]]).score
                                  for j in seeds]))
    diffs = np.abs(np.array(diffs))
    return float(np.mean(diffs - diffs.mean() > abs(observed))), float(np.mean(diffs)), observed


def test_the_pooled_test_agrees_with_a_brute_force_enumeration_of_every_resample(monkeypatch):
    refs = ["the cat sat on the mat today", "a dog ran in the big park", "we ate red apples at noon",
            "she reads old books every night", "birds sing in the tall trees"]
    pairs = [(["the cat sat on the mat today", "a dog ran in a big park", "we ate apples at noon",
               "she reads books every night", "birds sing in tall trees"],
              ["the cat sat on a mat", "a dog ran in the park", "we ate red apples", "she reads old books",
               "birds sing in the trees"]),
             (["the cat sat on the mat", "a dog ran in the big park", "we ate red apples at noon today",
               "she read old books", "birds sing in the tall trees"],
              ["the cat is on the mat today", "a dog ran in the big park", "we ate apples", "she reads books",
               "the birds sing"])]
    exact_p, exact_mean, observed = brute_force(pairs, refs, "sentence_tok_bleu")
    monkeypatch.setenv("SACREBLEU_SEED", "7")
    result = pooled_bootstrap(pairs, [refs], "sentence_tok_bleu", samples=20000)
    assert result["score"] - result["baseline"] == pytest.approx(observed, abs=1e-3)
    assert result["p_value"] == pytest.approx(exact_p, abs=0.015)
    assert 0.05 < exact_p < 0.95  # a case where the test has something to decide
    assert result["seeds"][1]["delta"] == pytest.approx(
        make_metric("sentence_tok_bleu").corpus_score(pairs[1][0], [refs]).score
        - make_metric("sentence_tok_bleu").corpus_score(pairs[1][1], [refs]).score, abs=1e-3)


def test_seed_variance_widens_the_test():
    """Three seed pairs of which one flips the sign: the pooled p sees the disagreement that one pair's
    sentence resampling alone cannot."""
    better, worse = degraded(REFS, 4), degraded(REFS, 2)
    alone = pooled_bootstrap([(better, worse)], [REFS], "sacrebleu")
    split = pooled_bootstrap([(better, worse), (degraded(REFS, 4, 1), degraded(REFS, 2, 1)), (worse, better)],
                             [REFS], "sacrebleu")
    assert alone["p_value"] < 0.01 < split["p_value"]
    assert [entry["delta"] > 0 for entry in split["seeds"]] == [True, True, False]


def test_several_references_are_scored_together():
    one = pooled_bootstrap([(degraded(REFS, 3), degraded(REFS, 2))], [REFS], "sacrebleu")
    two = pooled_bootstrap([(degraded(REFS, 3), degraded(REFS, 2))], [REFS, degraded(REFS, 3)], "sacrebleu")
    assert two["score"] == pytest.approx(100.0) and one["score"] < 100.0 and "nrefs:2" in two["signature"]


def test_unequal_inputs_are_refused():
    with pytest.raises(InputError, match="equally long"):
        pooled_bootstrap([(REFS, REFS[:-1])], [REFS], "tok_bleu")


def test_the_command_pools_the_seed_pairs_it_is_given(tmp_path):
    files = {}
    for name, lines in {"ref": REFS, "a1": degraded(REFS, 3), "b1": degraded(REFS, 2), "a2": degraded(REFS, 3, 1),
                        "b2": degraded(REFS, 2, 1)}.items():
        files[name] = tmp_path / name
        files[name].write_text("\n".join(lines) + "\n")
    out = tmp_path / "sig.json"
    argv = ["significance", "--ref", str(files["ref"]), "--ref-tok", str(files["ref"]), "--out", str(out)]
    for seed in (1, 2):
        argv += ["--hyp", str(files[f"a{seed}"]), "--hyp-tok", str(files[f"a{seed}"]), "--seed", str(seed),
                 "--base-hyp", str(files[f"b{seed}"]), "--base-hyp-tok", str(files[f"b{seed}"])]
    assert cli.main(argv) == 0
    result = json.loads(out.read_text())["tok_bleu"]
    assert [entry["seed"] for entry in result["seeds"]] == [1, 2]
    assert result["score"] - result["baseline"] == pytest.approx(np.mean([e["delta"] for e in result["seeds"]]))
    assert cli.main(argv[:-2]) == 2  # a system hypothesis without its baseline's


@pytest.mark.parametrize("style,p,expected", [
    ("dagger", 0.005, "†"), ("dagger", 0.03, ""), ("arrows", 0.005, "⇑"), ("arrows", 0.03, "↑"),
    ("plus", 0.005, "++"), ("plus", 0.03, "+"), ("plus", 0.2, "")])
def test_marks_follow_each_papers_levels(style, p, expected):
    assert mark(30.0, 29.0, p, style) == expected
    assert mark(29.0, 30.0, p, style) == ""  # a significant loss is not marked as an improvement
