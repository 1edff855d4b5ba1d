"""The seed-pooled paired bootstrap (`nmtrepro significance`), its one-sided tests and the papers'
significance marks: with one seed pair its resamples are sacreBLEU's own; with several it agrees with a
brute-force enumeration of every resample on a toy case; on null pairs its one-sided p rejects 5% of the
time."""
import itertools
import json

import numpy as np
import pytest
from sacrebleu.significance import PairedTest

from nmtrepro import cli
from nmtrepro.core.files import InputError
from nmtrepro.evaluation.bleu import make_metric
from nmtrepro.evaluation.significance import (confidence_bounds, inflate_seed_deviations, mark, one_sided_p, pool,
                                              pooled_bootstrap)

REFS = [f"sentence number {i} says the {w} sat on a mat near house {i % 7}"
        for i, w in enumerate(["cat", "dog", "bird", "cow", "fox"] * 8)]


def degraded(refs, every, seed=0):
    """Each sentence with every `every`-th word replaced (shifted by `seed`): a system of known quality."""
    return [" ".join("xx" if (j + seed) % every == 0 else w for j, w in enumerate(r.split())) for r in refs]


def test_identical_systems_are_not_significantly_different():
    result = pooled_bootstrap([(REFS[:20] + ["x"] * 20, REFS[:20] + ["x"] * 20)], [REFS], "tok_bleu")
    assert result["p_greater"] == result["p_less"] == 1.0
    assert result["score"] == result["baseline"]
    assert mark(result["score"], result["baseline"], result["p_greater"], "dagger") == ""


def test_two_different_systems_with_the_same_score_are_not_significantly_different():
    """Two different outputs that both score BLEU 0 on every resample (as two untrained models can)."""
    result = pooled_bootstrap([(["x y"] * 40, ["z"] * 40)], [REFS], "tok_bleu")
    assert result["score"] == result["baseline"] == 0.0 and result["p_greater"] == result["p_less"] == 1.0


def test_reference_beats_garbage_at_p_below_001_with_its_ci():
    garbage = [" ".join(reversed(r.split()))[:20] for r in REFS]
    result = pooled_bootstrap([(REFS, garbage)], [REFS], "tok_bleu")
    assert result["score"] == pytest.approx(100.0)
    assert result["p_greater"] < 0.01 and result["p_less"] == 1.0  # one-sided: only the observed way is significant
    assert result["ci_low"] <= result["mean"] <= result["ci_high"] and result["delta_low"] > 0
    assert "bs:10000" in result["signature"] and "seed:12345" in result["signature"]
    assert (result["samples"], result["bootstrap_seed"], len(result["resampled_deltas"])) == (10000, 12345, 10000)
    assert mark(result["score"], result["baseline"], result["p_greater"], "dagger") == "†"


@pytest.mark.parametrize("metric", ["sacrebleu", "tok_bleu"])
def test_one_seed_pair_is_sacrebleus_own_paired_bootstrap(metric):
    system, baseline = degraded(REFS, 7), degraded(REFS, 5)  # 4-grams left to match: tok_bleu is unsmoothed
    test = PairedTest([("baseline", baseline), ("system", system)], {"BLEU": make_metric(metric)}, [REFS],
                      test_type="bs", n_samples=1000)
    theirs = test()[1]["BLEU"][1]
    ours = pooled_bootstrap([(system, baseline)], [REFS], metric, samples=1000)
    assert (ours["score"], ours["mean"], ours["ci"]) == pytest.approx((theirs.score, theirs.mean, theirs.ci), abs=1e-4)
    # sacreBLEU's p centres |difference|, a one-sided test toward the observed sign: where every resample
    # has that sign it is exactly our one-sided p that way (no seed level, so nothing inflated)
    assert min(ours["resampled_deltas"]) > 0 and ours["p_greater"] == theirs.p_value


def brute_force(pairs, refs, metric_name):
    """The exact two-level bootstrap: every draw of n sentences and k seed pairs (n^n k^k equally likely
    resamples), each pair's difference scored with sacreBLEU's corpus BLEU from scratch and its deviation
    from the draw's mean over all k pairs inflated by sqrt(k/(k-1)). Returns the one-sided p of the system
    beating the baseline (centred, without the +1 smoothing), the variance of the resampled difference
    and the observed difference."""
    metric = make_metric(metric_name)
    n, k = len(refs), len(pairs)
    observed = np.mean([metric.corpus_score(s, [refs]).score - metric.corpus_score(b, [refs]).score for s, b in pairs])
    diffs = []
    for idx in itertools.product(range(n), repeat=n):
        drawn_refs = [[refs[i] for i in idx]]
        deltas = np.array([metric.corpus_score([s[i] for i in idx], drawn_refs).score
                           - metric.corpus_score([b[i] for i in idx], drawn_refs).score for s, b in pairs])
        inflated = deltas.mean() + np.sqrt(k / (k - 1)) * (deltas - deltas.mean())
        diffs += [np.mean(inflated[list(seeds)]) for seeds in itertools.product(range(k), repeat=k)]
    diffs = np.array(diffs)
    return float(np.mean(diffs - diffs.mean() > observed)), float(np.var(diffs)), observed


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
    exact_p, exact_var, observed = brute_force(pairs, refs, "sentence_tok_bleu")
    monkeypatch.setenv("SACREBLEU_SEED", "7")
    result = pooled_bootstrap(pairs, [refs], "sentence_tok_bleu", samples=20000)
    assert result["score"] - result["baseline"] == pytest.approx(observed, abs=1e-3)
    assert result["p_greater"] == pytest.approx(exact_p, abs=0.015)
    assert np.var(result["resampled_deltas"]) == pytest.approx(exact_var, rel=0.05)
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
    assert alone["p_greater"] < 0.01 < split["p_greater"]
    assert [entry["delta"] > 0 for entry in split["seeds"]] == [True, True, False]


def test_a_loss_is_significant_only_in_its_own_direction():
    """The tails: a system clearly worse than its baseline has a small p for 'trails' and none for 'beats',
    and its CI lies below zero."""
    worse = [a if i % 3 else b for i, (a, b) in enumerate(zip(degraded(REFS, 7), degraded(REFS, 2)))]
    result = pooled_bootstrap([(worse, degraded(REFS, 7))], [REFS], "tok_bleu", samples=2000)
    assert result["delta"] < 0 and result["p_less"] < 0.01 and result["p_greater"] > 0.99
    assert result["delta_low"] < result["delta"] < result["delta_high"] < 0


def test_inflating_the_seed_deviations_gives_the_unbiased_variance_of_the_mean():
    """Three seed pairs without sentence noise: drawing 3 of 3 alone has variance (k-1)/k * s^2/k and never
    leaves [min, max]; inflated, it has s^2/k and its tails go beyond the seeds' range."""
    deltas = np.repeat([[1.0], [2.0], [4.0]], 20000, axis=1)
    drawn = np.random.default_rng(1).choice(3, size=(20000, 3))
    plain, inflated = pool(deltas, drawn), pool(inflate_seed_deviations(deltas), drawn)
    s2 = np.var([1.0, 2.0, 4.0], ddof=1)
    assert np.var(plain) == pytest.approx(s2 / 3 * 2 / 3, rel=0.03) and plain.max() == 4.0
    assert np.var(inflated) == pytest.approx(s2 / 3, rel=0.03) and inflated.max() > 4.0 and inflated.min() < 1.0
    assert np.array_equal(inflate_seed_deviations(deltas[:1]), deltas[:1])  # one pair: no seed level


def test_the_one_sided_p_rejects_five_percent_of_null_pairs():
    """A bounded, seeded simulation of 600 null comparisons of 3 seed pairs on 100 sentences, bootstrapped
    as `pooled_bootstrap` does (with an additive score for speed): the systems differ by zero on average,
    by a per-sentence difference all seeds share, each pair's own per-sentence noise and a per-seed shift.
    The one-sided p < 0.05 about 5% of the time (5.3%), where sacreBLEU's rule (centred |difference|:
    toward whichever sign came up) rejects about twice as often (10.7%)."""
    rng = np.random.default_rng(2024)
    sims, n, k, samples = 600, 100, 3, 1000
    ours = sacrebleus = 0
    for _ in range(sims):
        per_sentence = rng.normal(0, 1, n) + rng.normal(0, 0.5, (k, n)) + rng.normal(0, 0.05, (k, 1))
        counts = rng.multinomial(n, np.full(n, 1 / n), size=samples)     # each sentence's draws a resample
        diffs = pool(inflate_seed_deviations(per_sentence @ counts.T / n), rng.integers(0, k, (samples, k)))
        observed = per_sentence.mean()
        ours += one_sided_p(diffs, observed, +1) < 0.05
        folded = np.abs(diffs)
        sacrebleus += (np.sum(folded - folded.mean() > abs(observed)) + 1) / (samples + 1) < 0.05
    assert 0.03 < ours / sims < 0.07 and sacrebleus / sims > 0.08


def test_the_bounds_are_the_ones_the_one_sided_p_inverts():
    """A 90% interval's lower bound is above zero exactly where the one-sided p of 'beats' is below 0.05,
    and its upper bound below a margin where the p of 'falls short of the margin' is."""
    resampled = np.random.default_rng(3).normal(0.0, 1.0, 10000)
    for observed in np.linspace(-3, 3, 25):
        low, high = confidence_bounds(resampled, observed, 0.90)
        assert (low > 0) == (one_sided_p(resampled, observed, +1) < 0.05)
        assert (high < 0.3) == (one_sided_p(resampled, observed, -1, margin=0.3) < 0.05)


def test_sacrebleu_seed_none_draws_a_seed_and_records_it(monkeypatch):
    pairs = [(degraded(REFS, 3), degraded(REFS, 2))]
    monkeypatch.setenv("SACREBLEU_SEED", "none")
    fresh = pooled_bootstrap(pairs, [REFS], "tok_bleu", samples=200)
    monkeypatch.setenv("SACREBLEU_SEED", str(fresh["bootstrap_seed"]))
    again = pooled_bootstrap(pairs, [REFS], "tok_bleu", samples=200)
    assert again["resampled_deltas"] == fresh["resampled_deltas"]
    assert f"seed:{fresh['bootstrap_seed']}" in fresh["signature"]
    monkeypatch.setenv("SACREBLEU_SEED", "twelve")
    with pytest.raises(InputError, match="SACREBLEU_SEED='twelve'"):
        pooled_bootstrap(pairs, [REFS], "tok_bleu", samples=200)


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
