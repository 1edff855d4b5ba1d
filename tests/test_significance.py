"""The test of a system against its baseline over seed pairs (`nmtrepro significance`), its one-sided
p's and bounds, and the papers' significance marks: BLEU from sentence statistics as sacreBLEU computes
it; with one seed pair the bootstrap is sacreBLEU's own; the shared part of the test set's noise agrees
with an enumeration of every resample; on simulated null comparisons the test rejects about 5% whatever
the mix of noise."""
import itertools
import json

import numpy as np
import pytest
from sacrebleu.significance import PairedTest

from nmtrepro import cli
from nmtrepro.core.files import InputError
from nmtrepro.evaluation.metrics import METRICS
from nmtrepro.evaluation.metrics.bleu import Bleu, bleu_from_statistics, make_metric
from nmtrepro.evaluation.calibration import Mix, corpus, sentence_stats, slope
from nmtrepro.evaluation.seed_noise import Comparison, SeedNoise
from nmtrepro.evaluation.significance import (LINEAR_FROM, MeanDifference, Reference, mark, mean_difference, mixture_sf,
                                              pooled_bootstrap, side_parts, statistics_test)

REFS = [f"sentence number {i} says the {w} sat on a mat near house {i % 7}"
        for i, w in enumerate(["cat", "dog", "bird", "cow", "fox"] * 8)]


def degraded(refs, every, seed=0):
    """Each sentence with every `every`-th word replaced (shifted by `seed`): a system of known quality."""
    return [" ".join("xx" if (j + seed) % every == 0 else w for j, w in enumerate(r.split())) for r in refs]


def test_identical_systems_are_not_significantly_different():
    result = pooled_bootstrap([(REFS[:20] + ["x"] * 20, REFS[:20] + ["x"] * 20)], [REFS], METRICS["tok_bleu"])
    assert result["p_greater"] == result["p_less"] == 1.0
    assert result["score"] == result["baseline"]
    assert mark(result["score"], result["baseline"], result["p_greater"], "dagger") == ""


def test_two_different_systems_with_the_same_score_are_not_significantly_different():
    """Two different outputs that both score BLEU 0 on every resample (as two untrained models can)."""
    result = pooled_bootstrap([(["x y"] * 40, ["z"] * 40)], [REFS], METRICS["tok_bleu"])
    assert result["score"] == result["baseline"] == 0.0 and result["p_greater"] == result["p_less"] == 1.0


def test_reference_beats_garbage_at_p_below_001_with_its_ci():
    garbage = [" ".join(reversed(r.split()))[:20] for r in REFS]
    result = pooled_bootstrap([(REFS, garbage)], [REFS], METRICS["tok_bleu"])
    assert result["score"] == pytest.approx(100.0)
    assert result["p_greater"] < 0.01 and result["p_less"] == 1.0  # one-sided: only the observed way is significant
    assert result["ci_low"] <= result["mean"] <= result["ci_high"] and result["delta_low"] > 0
    assert "bs:10000" in result["signature"] and "seed:12345" in result["signature"]
    assert (result["samples"], result["bootstrap_seed"], result["df"]) == (10000, 12345, None)  # one pair: normal
    assert mark(result["score"], result["baseline"], result["p_greater"], "dagger") == "†"


@pytest.mark.parametrize("metric", ["sacrebleu", "tok_bleu"])
def test_one_seed_pair_is_sacrebleus_own_paired_bootstrap(metric):
    system, baseline = degraded(REFS, 7), degraded(REFS, 5)  # 4-grams left to match: tok_bleu is unsmoothed
    test = PairedTest([("baseline", baseline), ("system", system)], {"BLEU": make_metric(metric)}, [REFS],
                      test_type="bs", n_samples=1000)
    theirs = test()[1]["BLEU"][1]
    ours = pooled_bootstrap([(system, baseline)], [REFS], METRICS[metric], samples=1000)
    assert (ours["score"], ours["mean"], ours["ci"]) == pytest.approx((theirs.score, theirs.mean, theirs.ci), abs=1e-4)
    # with one pair the seed variance is unmeasured: the test's variance is that of sacreBLEU's resamples
    assert ours["var_seeds"] is None and ours["var"] == pytest.approx(np.var(theirs_deltas(system, baseline, metric)),
                                                                      rel=0.02)


def theirs_deltas(system, baseline, metric):
    """The differences of sacreBLEU's own 1,000 paired resamples (SACREBLEU_SEED's draws)."""
    m = make_metric(metric)
    stats = [np.array(m._extract_corpus_statistics(h, [REFS])) for h in (system, baseline)]
    idxs = np.random.default_rng(12345).choice(len(REFS), size=(1000, len(REFS)), replace=True)
    return [m._compute_score_from_stats(stats[0][i].sum(0)).score - m._compute_score_from_stats(stats[1][i].sum(0)).score
            for i in idxs]


def test_bleu_from_statistics_is_sacrebleus_corpus_bleu():
    """Every row at once, as sacreBLEU's `compute_bleu` gives each: unsmoothed (tokenized BLEU), its "exp"
    smoothing (an order without a match) and effective order, short and empty outputs included."""
    rng = np.random.default_rng(0)
    for name in ("tok_bleu", "sacrebleu", "sentence_tok_bleu"):
        metric = make_metric(name)
        for hyps in (degraded(REFS, 3), degraded(REFS, 2), ["x y"] * 40, [r.split()[0] for r in REFS], [""] * 40):
            stats = np.array(metric._extract_corpus_statistics(hyps, [REFS]), dtype=float)
            rows = np.array([stats[rng.integers(0, 40, size)].sum(0) for size in (1, 3, 40) for _ in range(5)])
            theirs = [metric._compute_score_from_stats(list(row.astype(int))).score for row in rows]
            assert bleu_from_statistics(rows, metric) == pytest.approx(theirs, abs=1e-9), (name, hyps[0])


def test_the_shared_part_of_the_test_set_noise_agrees_with_every_resample_enumerated(monkeypatch):
    """Two seed pairs on five sentences: the variance of the pairs' mean difference over the sentence
    resamples and each pair's own, from 20,000 draws, against all 5^5 equally likely draws enumerated
    with sacreBLEU's corpus BLEU; the test's variance is then s^2/k plus the shared part they give."""
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
    metric = make_metric("sentence_tok_bleu")
    sides = np.array([[[metric.corpus_score([hyps[i] for i in idx], [[refs[i] for i in idx]]).score for hyps in pair]
                       for pair in pairs] for idx in itertools.product(range(5), repeat=5)]).T  # [2, k, 5^5]
    observed = np.array([[metric.corpus_score(hyps, [refs]).score for hyps in pair] for pair in pairs]).T  # [2, k]
    deltas = observed[0] - observed[1]
    exact, parts = mean_difference(deltas, sides[0] - sides[1])
    monkeypatch.setenv("SACREBLEU_SEED", "7")
    result = pooled_bootstrap(pairs, [refs], Bleu("sentence_tok_bleu", "", metric, metric, "hyp_tok"), samples=20000)
    assert result["delta"] == pytest.approx(deltas.mean(), abs=1e-9)
    assert result["var"] == pytest.approx(exact.var, rel=0.05)
    assert result["var_seeds"] == pytest.approx(np.var(deltas, ddof=1) / 2)
    assert result["var_shared"] == pytest.approx(parts["var_shared"], abs=0.05 * exact.var)
    for side, enumerated, scores in zip(result["sides"], sides, observed):  # the system's and the baseline's own
        own = side_parts(scores, enumerated)
        assert side["spread"] == pytest.approx(own["spread"]) == pytest.approx(np.var(scores, ddof=1))
        assert side["test_own"] == pytest.approx(own["test_own"], abs=0.05 * exact.var)


def test_seed_variance_widens_the_test():
    """Three seed pairs of which one flips the sign: the pooled p sees the disagreement that one pair's
    sentence resampling alone cannot."""
    better, worse = degraded(REFS, 4), degraded(REFS, 2)
    alone = pooled_bootstrap([(better, worse)], [REFS], METRICS["sacrebleu"])
    split = pooled_bootstrap([(better, worse), (degraded(REFS, 4, 1), degraded(REFS, 2, 1)), (worse, better)],
                             [REFS], METRICS["sacrebleu"])
    assert alone["p_greater"] < 0.01 < split["p_greater"]
    assert [entry["delta"] > 0 for entry in split["seeds"]] == [True, True, False]


def test_a_loss_is_significant_only_in_its_own_direction():
    """The tails: a system clearly worse than its baseline has a small p for 'trails' and none for 'beats',
    and its CI lies below zero."""
    worse = [a if i % 3 else b for i, (a, b) in enumerate(zip(degraded(REFS, 7), degraded(REFS, 2)))]
    result = pooled_bootstrap([(worse, degraded(REFS, 7))], [REFS], METRICS["tok_bleu"], samples=2000)
    assert result["delta"] < 0 and result["p_less"] < 0.01 and result["p_greater"] > 0.99
    assert result["delta_low"] < result["delta"] < result["delta_high"] < 0


def test_without_sentence_noise_the_test_is_the_seeds_t_test():
    """Three seed pairs whose differences do not vary over the sentence resamples: the variance is the
    seeds' s^2/k and the reference a t with k - 1 degrees of freedom, the one-sample t-test."""
    test, parts = mean_difference(np.array([1.0, 2.0, 4.0]), np.repeat([[1.0], [2.0], [4.0]], 1000, axis=1))
    assert parts["var_shared"] == 0 and test.var == pytest.approx(np.var([1.0, 2.0, 4.0], ddof=1) / 3)
    assert test.df == pytest.approx(2)
    assert test.p(+1) == pytest.approx(0.0590, abs=1e-3)   # t = (7/3) / sqrt(2.333/3) = 2.65 on 2 df


@pytest.mark.parametrize("mix", [Mix("seed noise only", shared=0.0, own=0.0),
                                 Mix("heavy per-pair test-set noise", own_sd=1.0, seed_sd=0.0),
                                 Mix("realistic")], ids=lambda mix: mix.name)
def test_the_test_rejects_about_five_percent_of_null_comparisons_whatever_the_noise(mix):
    """A bounded, seeded version of bench/verdict_calibration.py: 300 null comparisons of 3 seed pairs on
    200 sentences a mix; the one-sided p < 0.05 in 5% of them within the simulation's error (the
    seed-only mix drew 16.8% under the rule before, the heavy one 1-2%)."""
    rng, metric = np.random.default_rng(2026), METRICS["tok_bleu"]
    lengths, difficulty = corpus(rng, 200)
    per_logit = slope(lengths, difficulty, metric)
    rejected = sum(statistics_test(sentence_stats(rng, mix, lengths, difficulty, per_logit), metric, 500)["p_greater"]
                   < 0.05 for _ in range(300))
    assert 0.02 <= rejected / 300 <= 0.09


@pytest.mark.parametrize("df", [None, 2.0, 7.5])
def test_the_bounds_are_the_ones_the_one_sided_p_inverts(df):
    """A 90% interval's lower bound is above zero exactly where the one-sided p of 'beats' is below 0.05,
    and its upper bound below a margin where the p of 'falls short of the margin' is: one rule for both."""
    for observed in np.linspace(-3, 3, 61):
        test = MeanDifference(observed, 1.0, df)
        low, high = test.bounds(0.90)
        assert (low > 0) == (test.p(+1) < 0.05) and (high < 0.3) == (test.p(-1, margin=0.3) < 0.05)


def test_sacrebleu_seed_none_draws_a_seed_and_records_it(monkeypatch):
    pairs = [(degraded(REFS, 3), degraded(REFS, 2))]
    monkeypatch.setenv("SACREBLEU_SEED", "none")
    fresh = pooled_bootstrap(pairs, [REFS], METRICS["tok_bleu"], samples=200)
    monkeypatch.setenv("SACREBLEU_SEED", str(fresh["bootstrap_seed"]))
    again = pooled_bootstrap(pairs, [REFS], METRICS["tok_bleu"], samples=200)
    assert again["var"] == fresh["var"] and again["bootstrap_seed"] == fresh["bootstrap_seed"]
    assert f"seed:{fresh['bootstrap_seed']}" in fresh["signature"]
    monkeypatch.setenv("SACREBLEU_SEED", "twelve")
    with pytest.raises(InputError, match="SACREBLEU_SEED='twelve'"):
        pooled_bootstrap(pairs, [REFS], METRICS["tok_bleu"], samples=200)


def test_several_references_are_scored_together():
    one = pooled_bootstrap([(degraded(REFS, 3), degraded(REFS, 2))], [REFS], METRICS["sacrebleu"])
    two = pooled_bootstrap([(degraded(REFS, 3), degraded(REFS, 2))], [REFS, degraded(REFS, 3)], METRICS["sacrebleu"])
    assert two["score"] == pytest.approx(100.0) and one["score"] < 100.0 and "nrefs:2" in two["signature"]


def test_unequal_inputs_are_refused():
    with pytest.raises(InputError, match="equally long"):
        pooled_bootstrap([(REFS, REFS[:-1])], [REFS], METRICS["tok_bleu"])


def test_the_command_pools_the_seed_pairs_it_is_given(tmp_path):
    files = {}
    for name, lines in {"ref": REFS, "a1": degraded(REFS, 3), "b1": degraded(REFS, 2), "a2": degraded(REFS, 3, 1),
                        "b2": degraded(REFS, 2, 1)}.items():
        files[name] = tmp_path / name
        files[name].write_text("\n".join(lines) + "\n")
    for name in ("a1", "b1", "a2", "b2"):  # each output's statistics, as the workflow's rule bleu writes them
        assert cli.main(["bleu", "--hyp", str(files[name]), "--hyp-tok", str(files[name]), "--ref", str(files["ref"]),
                         "--ref-tok", str(files["ref"]), "--out", str(tmp_path / f"{name}.json"),
                         "--out-statistics", str(tmp_path / f"{name}.npz")]) == 0
    out = tmp_path / "sig.json"
    argv = ["significance", "--out", str(out)]
    for seed in (1, 2):
        argv += ["--stats", str(tmp_path / f"a{seed}.npz"), "--seed", str(seed), "--base-stats", str(tmp_path / f"b{seed}.npz")]
    assert cli.main(argv + ["--recipe", "transformer/phrase"]) == 0
    written = json.loads(out.read_text())
    result = written["tok_bleu"]
    assert result["recipe"] == "phrase/transformer" and result["families"] == ["transformer", "phrase"]
    assert [entry["seed"] for entry in result["seeds"]] == [1, 2]
    assert result["score"] - result["baseline"] == pytest.approx(np.mean([e["delta"] for e in result["seeds"]]))
    # the statistics give what the hypotheses' own test gives, in every metric
    pairs = [(degraded(REFS, 3), degraded(REFS, 2)), (degraded(REFS, 3, 1), degraded(REFS, 2, 1))]
    for name, metric in METRICS.items():
        assert written[name] == {**pooled_bootstrap(pairs, [REFS], metric, seeds=[1, 2]), "recipe": "phrase/transformer",
                                 "families": ["transformer", "phrase"]}, name
    assert cli.main(argv + ["--recipe", "phrase"]) == 2  # not SYSTEM/BASELINE
    assert cli.main(argv[:-2]) == 2  # a system's statistics without its baseline's
    assert cli.main(argv[:-1] + [str(files["ref"])]) == 2  # not a statistics file


def test_a_length_buckets_claim_is_tested_on_its_long_sources_alone_or_written_empty(tmp_path):
    """`--longer-than N` tests the sentences whose source (BPE removed) has more than N tokens, as the
    whole-set test would on those sentences alone; where no source is that long, the JSON says so."""
    system, baseline = degraded(REFS, 3), degraded(REFS, 2)
    for name, lines in {"ref": REFS, "a": system, "b": baseline}.items():
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    for name in ("a", "b"):
        assert cli.main(["bleu", "--hyp", str(tmp_path / name), "--hyp-tok", str(tmp_path / name), "--ref",
                         str(tmp_path / "ref"), "--ref-tok", str(tmp_path / "ref"), "--out", str(tmp_path / f"{name}.json"),
                         "--out-statistics", str(tmp_path / f"{name}.npz")]) == 0
    # every third source is long: 3 BPE pieces that join into 2 tokens plus 45 more
    src = ["lo@@ ng " + " ".join(["w"] * 45) if i % 3 == 0 else "short one" for i in range(len(REFS))]
    (tmp_path / "src.bpe").write_text("\n".join(src) + "\n")
    out = tmp_path / "long.json"
    argv = ["significance", "--stats", str(tmp_path / "a.npz"), "--base-stats", str(tmp_path / "b.npz"),
            "--src-bpe", str(tmp_path / "src.bpe"), "--out", str(out)]
    assert cli.main([*argv, "--longer-than", "45"]) == 0
    long = [i for i in range(len(REFS)) if i % 3 == 0]
    expected = pooled_bootstrap([([system[i] for i in long], [baseline[i] for i in long])], [[REFS[i] for i in long]],
                                METRICS["tok_bleu"])
    assert json.loads(out.read_text())["tok_bleu"] == {**expected, "recipe": ""}
    assert cli.main([*argv, "--longer-than", "46"]) == 0
    assert json.loads(out.read_text()) == {
        "empty": f"empty bucket: no test source is longer than 46 tokens (of {len(REFS):,})"}
    (tmp_path / "src.bpe").write_text("\n".join(src[:-1]) + "\n")
    assert cli.main([*argv, "--longer-than", "45"]) == 2  # a source of other sentences than the statistics


@pytest.mark.parametrize("style,p,expected", [
    ("dagger", 0.005, "†"), ("dagger", 0.03, ""), ("arrows", 0.005, "⇑"), ("arrows", 0.03, "↑"),
    ("plus", 0.005, "++"), ("plus", 0.03, "+"), ("plus", 0.2, "")])
def test_marks_follow_each_papers_levels(style, p, expected):
    assert mark(30.0, 29.0, p, style) == expected
    assert mark(29.0, 30.0, p, style) == ""  # a significant loss is not marked as an improvement


@pytest.mark.parametrize("df,share", [(2.0, 0.5), (2.0, 0.05), (3.4, 0.9), (16.0, 0.3)])
def test_a_partly_estimated_variance_takes_the_linear_rules_p_from_0045_up_and_the_fiducial_bound_below(df, share):
    """A variance partly estimated on df degrees of freedom (its `share`), partly known: the fiducial tail
    E_W[Φ̄(x / √(share · df / W + 1 − share))], W ~ χ²_df, is scipy's quad of it; the test's p is the linear
    rule's t (df / share degrees of freedom) from 0.045 up and below it the larger of the two, and its
    quantiles invert it; share 1 is Student's t, share 0 the normal."""
    from scipy import integrate, stats

    ours, linear = Reference(df, share), stats.t(df / share)
    for x in (-4.0, -0.5, 0.0, 1.2, 3.0, 9.0):
        fiducial = integrate.quad(lambda w: stats.norm.sf(x / np.sqrt(share * df / w + 1 - share)) * stats.chi2.pdf(w, df),
                                  0, np.inf, limit=200)[0]
        assert mixture_sf(x, df, share) == pytest.approx(fiducial, rel=1e-6, abs=1e-12)
        assert ours.sf(x) == pytest.approx(max(linear.sf(x), min(fiducial, LINEAR_FROM)), rel=1e-6, abs=1e-12)
    for q in (0.001, 0.01, 0.045, 0.05, 0.5, 0.8, 0.999):
        assert ours.sf(ours.isf(q)) == pytest.approx(q, rel=1e-6) and ours.ppf(1 - q) == pytest.approx(ours.isf(q))
    assert ours.isf(0.05) == pytest.approx(linear.isf(0.05))
    assert Reference(df, 1.0).sf(2.5) == stats.t(df).sf(2.5) and Reference(df, 0.0).sf(2.5) == stats.norm.sf(2.5)


def test_a_spread_on_two_degrees_of_freedom_beside_a_known_part_holds_the_level_in_the_far_tail():
    """50,000 nulls whose variance is a spread s² on 2 degrees of freedom (σ² 1) plus a known part 0.25:
    the test rejects at most its level at 0.01 and 0.001 (Holm's levels on a page), where the linear rule
    alone rejected 3.1 times its level at 0.001, and at 0.05 keeps the linear rule's ~exact rate."""
    rng, known = np.random.default_rng(2026), 0.25
    spreads = rng.chisquare(2, 50_000) / 2
    ps = np.array([MeanDifference(d, s + known, 2.0, s / (s + known)).p(+1)
                   for d, s in zip(rng.normal(0, np.sqrt(1 + known), 50_000), spreads)])
    assert [(ps < level).mean() / level <= 1.05 for level in (0.01, 0.005, 0.001)] == [True] * 3
    assert 0.9 <= (ps < 0.05).mean() / 0.05 <= 1.1


def test_the_reference_distributions_and_bartletts_p_are_scipy_stats_own_numbers():
    """Tails and quantiles come from scipy.special (scipy.stats costs a job ~1 s to import): the same
    numbers as scipy.stats' t, norm and Bartlett's test, to the last bit."""
    from scipy import stats

    for df in (None, 1, 2.7, 14.3, 400.0):
        ours, theirs = Reference(df), (stats.norm if df is None else stats.t(df))
        assert [ours.sf(x) for x in (-3.1, -0.4, 0.0, 0.9, 2.5, 7.0)] == [theirs.sf(x) for x in (-3.1, -0.4, 0.0, 0.9, 2.5, 7.0)]
        for q in (0.001, 0.05, 0.5, 0.8, 0.975):
            assert (ours.ppf(q), ours.isf(q)) == (theirs.ppf(q), theirs.isf(q))
    groups = [[0.3, -0.2, 1.1], [0.9, 2.4, -1.0, 0.2], [0.1, 0.15]]
    noise = SeedNoise(tuple(Comparison(str(i), len(g), float(np.var(g, ddof=1)), 0.0) for i, g in enumerate(groups)))
    assert noise.homogeneity() == pytest.approx(stats.bartlett(*groups).pvalue, rel=1e-12)
