"""The claims pages: each claim's test with the run's pooled seed noise, the page's procedure (a primary
claim gating Holm over the others), the verdicts worded for their cause, and the pages across scales."""
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import norm, t as student_t

from conftest import assert_balanced_html, claim
from nmtrepro import cli
from nmtrepro.evaluation.metrics import METRICS
from nmtrepro.evaluation.multiplicity import holm
from nmtrepro.evaluation.seed_noise import SeedNoise
from nmtrepro.evaluation.significance import MeanDifference
from nmtrepro.evaluation import pooled as pooled_module
from nmtrepro.reporting.claims_prose import reading


def write_significance(path, score, baseline, sd=0.25, seed_deltas=None, own=0.0, seed_scores=None, recipe="",
                       families=None, **metrics):
    """A significance JSON of seed pairs with these differences (default: one, `score - baseline`) whose
    bootstrap puts `sd`² on the mean difference (the test-set part) and `own` on each pair's own
    test-set noise σe²; `seed_scores`: each pair's (system, baseline) BLEU where they matter; `recipe`: the
    kind of comparison it is, or `families` (system, baseline) name it and, with several seeds, its sides'
    spreads are their seeds' scores' (each side's own test-set part 0). Every metric holds the same entry,
    unless `metrics` gives one ({"chrf": entry}: `entry_of`'s)."""
    deltas = seed_deltas or [score - baseline]
    k = len(deltas)
    scores = seed_scores or [(baseline + d, baseline) for d in deltas]
    test = MeanDifference(float(np.mean(deltas)), sd ** 2, None)
    entry = {"score": score, "baseline": baseline, "delta": float(np.mean(deltas)), "var": sd ** 2, "df": None,
             "var_seeds": float(np.var(deltas, ddof=1)) / k if k > 1 else None, "var_shared": sd ** 2,
             "var_bootstrap_mean": sd ** 2, "var_bootstrap_each": sd ** 2 + own * (k - 1) / k,
             "p_greater": test.p(+1), "p_less": test.p(-1), "samples": 10000, "bootstrap_seed": 12345,
             "seeds": [{"seed": i + 1, "score": s, "baseline": b, "delta": d}
                       for i, (d, (s, b)) in enumerate(zip(deltas, scores))], "recipe": recipe}
    if families:
        entry.update(recipe="/".join(sorted(families)), families=list(families))
        if k > 1:
            entry["sides"] = [{"spread": float(np.var(side, ddof=1)), "test_own": 0.0} for side in zip(*scores)]
    path.write_text(json.dumps({**{name: entry for name in METRICS}, **metrics}))
    return str(path)


def entry_of(path, metric="tok_bleu"):
    """A `write_significance` file's entry, to give another metric of another file."""
    return json.loads(open(path).read())[metric]


@pytest.fixture
def quiet(tmp_path):
    """A pool of one three-seed comparison whose seeds do not vary: seed noise 0 on 2 df, so a claim's
    test is its bootstrap's alone, on a normal reference."""
    return [f"quiet={write_significance(tmp_path / 'quiet.json', 30.0, 29.0, 0.2, [1.0, 1.0, 1.0])}"]


def document(*claims, primary=(), pool=(), **parts) -> str:
    """A claims page's inputs (reporting/claims_inputs.py): these claims (`conftest.claim`'s JSON) by the
    ids c0, c1, ..., those whose sentence `primary` names primary, the pool of NAME=JSON specs, and
    `parts` (curves, budgets, others, notes) as given, by those ids."""
    given = {f"c{i}": json.loads(spec) for i, spec in enumerate(claims)}
    return json.dumps({"claims": given, "primary": [i for i, c in given.items() if c["text"] in primary],
                       "pool": dict(spec.split("=", 1) for spec in pool), **parts})


def scaled_document(scaled, primary=(), pool=(), **parts) -> str:
    """A page across scales' inputs (reporting/claims_inputs.py): `scaled` [(scale, claim JSON)], each
    claim by the id of its sentence (c0, c1, ... in their first order), those whose sentence `primary`
    names primary, the pools of SCALE=NAME=JSON specs, and `parts` (gaps, notes) as given."""
    ids, claims, pools = {}, {}, {}
    for scale, spec in scaled:
        given = json.loads(spec)
        claims.setdefault(scale, {})[ids.setdefault(given["text"], f"c{len(ids)}")] = given
    for spec in pool:
        scale, name, path = spec.split("=", 2)
        pools.setdefault(scale, {})[name] = path
    return json.dumps({"claims": claims, "primary": [ids[text] for text in primary], "pool": pools, **parts})


def page(tmp_path, *claims, primary=(), pool=()):
    """The markdown claims page of these claims, its primaries and its pool (`document`)."""
    out = tmp_path / "claims.md"
    argv = ["claims", "--title", "Paper X: claims", "--out-md", str(out), "--out-html", str(tmp_path / "claims.html"),
            "--out-svg", str(tmp_path / "claims.svg"), "--inputs", document(*claims, primary=primary, pool=pool)]
    assert cli.main(argv) == 0
    return out.read_text()


def rows(text):
    """{claim: {column: cell}} of a page's table."""
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return {cells[0]: dict(zip(header, cells)) for cells in
            ([cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:])}


def verdict(tmp_path, spec, quiet, **kw):
    text = json.loads(spec)["text"]
    return rows(page(tmp_path, spec, pool=quiet, **kw))[text]["verdict"]


@pytest.mark.parametrize("ours, sd, expected", [
    (30.0, 0.25, "reproduced"),
    (28.0, 0.25, "contradicted (Δ < 0: p <0.001)"),   # significantly the other way
])
def test_a_claims_verdict_follows_from_the_measured_difference(tmp_path, quiet, ours, sd, expected):
    sig = write_significance(tmp_path / "sig.json", ours, 29.0, sd)
    row = rows(page(tmp_path, claim("+PR helps (a=b)", 1.29, sig), pool=quiet))["+PR helps (a=b)"]
    assert row["verdict"] == expected and row["ours Δ"] == f"{ours - 29.0:+.2f}" and row["tested"] == "Δ > 0"


@pytest.mark.parametrize("ours, expected", [(28.0, "reproduced"), (30.0, "contradicted (Δ > 0: p <0.001)")])
def test_a_claim_of_a_negative_difference_is_tested_in_its_own_direction(tmp_path, quiet, ours, expected):
    sig = write_significance(tmp_path / "sig.json", ours, 29.0)
    assert verdict(tmp_path, claim("the layer hurts", -0.65, sig), quiet) == expected


@pytest.mark.parametrize("ours, sd, expected", [
    (29.02, 0.08, "reproduced"),           # Δ ≈ 0 and its upper bound below the margin: no gain, as claimed
    (29.9, 0.1, "contradicted (Δ > +0.30: p <0.001)"),   # a gain well beyond the margin
    # a significant +0.25 is a gain the margin allows, not "no gain", and rules out the paper's -0.65
    (29.25, 0.05, "paper's Δ excluded (our interval ends at +0.15, short of the paper's -0.65)"),
    (29.02, 0.5, "inconclusive"),         # Δ ≈ 0 but too uncertain to rule out a gain of 0.3
])
def test_a_claim_of_no_gain_is_tested_for_non_superiority_within_its_margin(tmp_path, quiet, ours, sd, expected):
    sig = write_significance(tmp_path / "sig.json", ours, 29.0, sd)
    text = page(tmp_path, claim("the layer does not help", -0.65, sig, margin=0.3), pool=quiet)
    row = rows(text)["the layer does not help"]
    assert row["verdict"].startswith(expected) and row["tested"] == "Δ < +0.30" and "below the stated margin" in text


def test_the_primary_claim_takes_most_of_the_pages_alpha_and_reads_the_same_on_the_central_page(tmp_path, quiet):
    """Secondaries at raw one-sided p 0.002, 0.008 and 0.040 (two-sided 0.004, 0.016, 0.080): Holm over
    the three makes them 0.012, 0.032 and 0.080. Once the primary is rejected they are tested at 0.05, so
    two are reproduced; beside an undecided primary (page p 0.397) at the secondaries' share, 0.01, their
    page p's are those over 0.2 (0.060, 0.160; the third's 0.400 is above the level at which the primary,
    and then it, would be rejected: 0.397) and none is. The primary's verdict, page p (its two-sided p over
    0.8) and MDE are the same on the central page, where it stands with another paper's primary."""
    claims = [claim(f"claim {i}", 1.0, write_significance(tmp_path / f'{i}.json', 29.0 + norm.isf(p), 29.0, 1.0))
              for i, p in enumerate((0.002, 0.008, 0.040))]
    strong = claim("primary", 1.0, write_significance(tmp_path / 'p.json', 30.0, 29.0, 0.3))
    weak = claim("primary", 0.5, write_significance(tmp_path / 'w.json', 29.3, 29.0, 0.3))
    passed = rows(page(tmp_path, strong, *claims, primary=["primary"], pool=quiet))
    assert [passed[f"claim {i}"]["page p"] for i in range(3)] == ["0.012", "0.032", "0.080"]
    assert [passed[f"claim {i}"]["verdict"].split(":")[0] for i in range(3)] == ["reproduced", "reproduced", "inconclusive"]
    assert passed["primary"]["page p"] == "0.001" and passed["primary"]["verdict"] == "reproduced"
    kept = page(tmp_path, weak, *claims, primary=["primary"], pool=quiet)
    assert rows(kept)["primary"]["verdict"].startswith("inconclusive")
    assert [rows(kept)[f"claim {i}"]["page p"] for i in range(3)] == ["0.060", "0.160", "0.397"]
    assert rows(kept)["claim 0"]["verdict"].startswith("inconclusive: significant before the page's correction only")
    assert "at 0.01, and at 0.05 once the primary is rejected" in kept
    other = claim("other paper's primary", -0.5, write_significance(tmp_path / 'o.json', 28.2, 29.0, 0.3))
    central = rows(page(tmp_path, strong, other, primary=["primary", "other paper's primary"], pool=quiet))
    assert {k: central["primary"][k] for k in ("verdict", "page p", "MDE")} == {
        k: passed["primary"][k] for k in ("verdict", "page p", "MDE")}


def test_a_one_seed_claim_takes_the_pooled_seed_noise_of_the_runs_multi_seed_comparisons(tmp_path):
    """Two three-seed comparisons (spreads s² 0.1033 and 0.09, each pair's own test-set part 0.04) pool
    σu² = (2 · 0.1033 + 2 · 0.09) / 4 − 0.04 = 0.0567 on 4 df; a one-seed claim whose bootstrap puts 0.09 on
    its difference gets 0.0567 + 0.09 = 0.1467, the spread's 0.0967 of it estimated on 4 df, and a
    three-seed claim 0.0567 / 3 + its own 0.0225."""
    pool = [f"a={write_significance(tmp_path / 'a.json', 30, 29, 0.2, [0.6, 1.2, 1.1], own=0.04)}",
            f"b={write_significance(tmp_path / 'b.json', 30, 29, 0.2, [0.2, 0.5, -0.1], own=0.04)}"]
    noise = SeedNoise.of({name: json.loads(open(path).read())["tok_bleu"]
                          for name, path in (spec.split("=") for spec in pool)})
    spread = (2 * np.var([0.6, 1.2, 1.1], ddof=1) + 2 * np.var([0.2, 0.5, -0.1], ddof=1)) / 4
    assert noise.df == 4 and noise.var == pytest.approx(spread - 0.04) and noise.var == pytest.approx(0.0567, abs=1e-4)
    one = json.loads(open(write_significance(tmp_path / "one.json", 30.5, 29.0, 0.3)).read())["tok_bleu"]
    test = noise.test(one)
    assert test.var == pytest.approx(spread - 0.04 + 0.09) and (test.df, test.share) == (4, pytest.approx(spread / test.var))
    three = json.loads(open(write_significance(tmp_path / "3.json", 30, 29, 0.15, [1.0, 1.3, 0.7])).read())["tok_bleu"]
    assert noise.test(three).var == pytest.approx((spread - 0.04) / 3 + 0.0225)
    row = rows(page(tmp_path, claim("one seed", 0.5, tmp_path / 'one.json'), pool=pool))["one seed"]
    low, high = test.bounds(0.95)
    assert row["95% CI of ours"] == f"{low:+.2f} to {high:+.2f}" == "+0.54 to +2.46"
    assert row["MDE"] == f"{(test.reference.isf(0.025) + test.reference.ppf(0.8)) * np.sqrt(test.var):.2f}"


def test_a_claim_whose_recipes_seeds_vary_more_takes_its_recipes_seed_noise_not_the_runs_pool(tmp_path):
    """Three quiet Transformer comparisons (seed pairs' SD 0.1) and a GRU-against-Transformer one whose seeds
    vary fifteen times as much: pooled over all four (σu² 0.59 on 8 df), a one-seed GRU claim of +2.0 (test
    set SD 0.3) reads reproduced (two-sided p 0.04); with the seed noise of its own recipe (σu² 2.33 on 2 df)
    it is inconclusive, in BLEU and in chrF alike."""
    quiet = [f"t{i}={write_significance(tmp_path / f't{i}.json', 30, 29, 0.2, [1.0, 1.1, 0.9], recipe=r)}"
             for i, r in enumerate(["transformer/transformer"] * 3)]
    loud = [f"g={write_significance(tmp_path / 'g.json', 30, 29, 0.2, [0.0, 2.0, -1.0], recipe='gru/transformer')}"]
    for recipe, word in (("", "reproduced"), ("gru/transformer", "inconclusive")):
        pool = [spec.replace(".json", f"{recipe == ''}.json") for spec in quiet + loud]
        for spec, original in zip(pool, quiet + loud):   # the same comparisons, recipes dropped where recipe == ""
            entry = json.loads(Path(original.split("=")[1]).read_text())
            Path(spec.split("=")[1]).write_text(json.dumps({m: {**e, "recipe": e["recipe"] if recipe else ""}
                                                            for m, e in entry.items()}))
        one = write_significance(tmp_path / "one.json", 31.0, 29.0, 0.3, recipe=recipe)
        row = rows(page(tmp_path, claim("GRU beats Transformer", 2.0, one), pool=pool))["GRU beats Transformer"]
        assert row["verdict"].startswith(word) and row["chrF verdict"].startswith(word), row


def test_a_one_seed_claim_of_a_recipe_the_run_does_not_measure_gets_no_verdict_even_where_others_are_alike(
        tmp_path):
    """A one-seed claim of a recipe no pooled comparison has: no verdict, even where the run's other recipes
    vary alike (their pool says nothing of its recipe). A three-seed one: its own seeds' spread."""
    def pool(spreads):
        return [f"c{i}={write_significance(tmp_path / f'c{i}.json', 30, 29, 0.2, deltas, recipe=f'r{i}/r{i}')}"
                for i, deltas in enumerate(spreads)]
    one = write_significance(tmp_path / "one.json", 31.0, 29.0, 0.3, recipe="phrase/phrase")
    three = write_significance(tmp_path / "three.json", 30.0, 29.0, 0.1, [1.0, 1.2, 0.8], recipe="phrase/phrase")
    claims = (claim("one seed", 1.0, one), claim("three seeds", 1.0, three))
    unmeasured = ("seed noise unmeasured (one seed pair, and no multi-seed comparison of its recipe, "
                  "phrase/phrase, nor of a system of each of its families at this scale)")
    for spreads in ([[1.0, 1.2, 0.8], [0.9, 1.2, 1.0]], [[1.0, 1.01, 0.99], [0.0, 3.0, -2.0]]):  # alike, differ
        text = page(tmp_path, *claims, pool=pool(spreads))
        found = rows(text)
        assert found["one seed"]["verdict"] == unmeasured
        assert found["three seeds"]["verdict"].endswith(
            "; seed noise from its own seed pairs (no other comparison of its recipe, phrase/phrase, at this scale)")
    assert "r0/r0: 0.01 points on 2 degrees of freedom" in text and "Each claim takes its own recipe's" in text


def test_a_one_seed_claim_of_an_unmeasured_recipe_takes_its_two_families_seed_noise_from_the_runs_systems(
        tmp_path):
    """Two three-seed comparisons, phrase/transformer (phrase seeds 30, 31, 32: s² 1; Transformer 29, 29.5, 29:
    1/12) and gru/transformer (GRU 20, 20.2, 20.4: 0.04; the same Transformer: pooled once): a one-seed
    phrase/phrase claim (test set SD 0.3) gets 2 · 1 + 0.09, its 2 estimated on 2 df (one estimate counted
    twice), and a phrase/transformer-like claim of an unmeasured recipe, phrase/gru, 1 + 0.04 + 0.09, its
    1.04 estimated on Satterthwaite's 1.04² / (1² / 2 + 0.04² / 2) = 2.16 df; a phrase/rnn claim has a
    family no system measures: no verdict."""
    a = write_significance(tmp_path / "a.json", 31, 29.17, 0.2, [1.0, 1.5, 3.0],
                           seed_scores=[(30.0, 29.0), (31.0, 29.5), (32.0, 29.0)], families=("phrase", "transformer"))
    c = write_significance(tmp_path / "c.json", 20.2, 29.17, 0.2, [-9.0, -9.3, -8.6],
                           seed_scores=[(20.0, 29.0), (20.2, 29.5), (20.4, 29.0)], families=("gru", "transformer"))
    noise = SeedNoise.of({name: json.loads(open(path).read())["tok_bleu"] for name, path in (("a", a), ("c", c))})
    systems = noise.systems()
    assert len(systems.comparisons) == 3 and systems.within("transformer").df == 2
    assert systems.within("phrase").estimate == pytest.approx(1.0) and systems.within("gru").var == pytest.approx(0.04)

    def basis(families):
        return noise.basis(json.loads(open(write_significance(
            tmp_path / "one.json", 31.0, 30.0, 0.3, families=families)).read())["tok_bleu"])
    same, mixed, unknown = basis(("phrase", "phrase")), basis(("phrase", "gru")), basis(("phrase", "rnn"))
    assert (same.test.var, same.test.df, same.test.share) == (pytest.approx(2.09), 2, pytest.approx(2.0 / 2.09))
    assert same.words == ("seed noise of two phrase systems, from the systems of the run's multi-seed comparisons "
                          "(none of its recipe, phrase/phrase, at this scale)")
    satterthwaite = 1.04 ** 2 / (1 / 2 + 0.04 ** 2 / 2)
    assert (mixed.test.var, mixed.test.df, mixed.test.share) == (pytest.approx(1.13), pytest.approx(satterthwaite),
                                                                 pytest.approx(1.04 / 1.13))
    assert "a gru and a phrase system" in mixed.words and unknown.test is None
    one = write_significance(tmp_path / "one.json", 31.0, 30.0, 0.3, families=("phrase", "phrase"))
    row = rows(page(tmp_path, claim("one seed", 1.0, one), pool=[f"a={a}", f"c={c}"]))["one seed"]
    assert row["verdict"].endswith("; " + same.words) and row["page p"] != "", row


def test_a_run_with_nothing_to_pool_leaves_one_seed_claims_without_a_verdict(tmp_path):
    """No multi-seed comparison (paper scale with central_seeds 1): a one-seed claim shows its numbers,
    no verdict, and leaves the family; a three-seed claim is tested with its own seeds' spread."""
    one = write_significance(tmp_path / "one.json", 31.0, 29.0, 0.25)
    three = write_significance(tmp_path / "three.json", 30.0, 29.0, 0.1, [1.0, 1.2, 0.8])
    single = [f"single={write_significance(tmp_path / 's.json', 30.0, 29.0, 0.2)}"]
    for pool in ((), single):
        text = page(tmp_path, claim("one seed", 1.0, one), claim("three seeds", 1.0, three), pool=pool)
        table = rows(text)
        assert table["one seed"]["verdict"].startswith("seed noise unmeasured") and table["one seed"]["ours Δ"] == "+2.00"
        assert table["one seed"]["page p"] == "" and table["three seeds"]["verdict"] == "reproduced"
        assert "1 of 1 judged claims reproduced, 0 contradicted; 1 with seed noise unmeasured." in text


def test_a_collapsed_seed_of_either_system_trips_the_floor_by_name(tmp_path, quiet):
    """The baseline's mean passes 5 BLEU, but seed 2's system scores 0.31: not judged, that seed named."""
    sig = write_significance(tmp_path / "sig.json", 20.0, 29.0, 0.25, [1.0, -28.69, 1.0],
                             seed_scores=[(30.0, 29.0), (0.31, 29.0), (30.0, 29.0)])
    row = rows(page(tmp_path, claim("+PR helps", 1.29, sig), pool=quiet))["+PR helps"]
    assert row["verdict"] == "not comparable at this scale (seed 2's system scores 0.31, below 5 BLEU)"
    weak = write_significance(tmp_path / "weak.json", 0.0, 0.0, 0.01)
    text = page(tmp_path, claim("16 steps do not beat 8", -0.29, weak, margin=0.1), pool=quiet)
    assert rows(text)["16 steps do not beat 8"]["Δ per seed"] == "+0.00 (seed 1)"
    assert "No claim judged at this scale: 1 not comparable at this scale." in text


@pytest.mark.parametrize("spec, cause", [
    # 1: mean and p on the claim's side, two of three seed pairs not
    (dict(score=30.0, sd=0.25, seed_deltas=[3.2, -0.1, -0.1]), "inconclusive: the seed pairs split (1 of 3"),
    # 2: +0.20 ± 0.10: significant alone (p2 0.046), not among three claims at Holm's levels
    (dict(score=29.2, sd=0.1, paper=0.25), "inconclusive: significant before the page's correction only"),
    # 3: an SD of 1.0 detects only ~2.8 at 80% power; the paper claims 1.29
    (dict(score=29.5, sd=1.0), "inconclusive: this run detects only"),
    # 4: an MDE below the paper's, the interval holding 0 and 1.29 both
    (dict(score=29.5, sd=0.45, paper=1.29, alone=True), "inconclusive: our interval holds both"),
    # 5: +0.10 ± 0.20: the interval ends at +0.49, short of the paper's +1.29
    (dict(score=29.1, sd=0.2), "paper's Δ excluded (our interval ends at +0.49, short of the paper's +1.29)"),
])
def test_every_reading_sentence_matches_the_rows_under_it(tmp_path, quiet, spec, cause):
    """Each cause of a not-decisive verdict, alone on a page or beside two claims (Holm over three), and
    the reading line counting it in its own words."""
    sig = write_significance(tmp_path / "sig.json", spec["score"], 29.0, spec["sd"], spec.get("seed_deltas"))
    paper = spec.get("paper", 1.29)
    others = [] if spec.get("alone") else [
        claim(f"other {i}", 1.0, write_significance(tmp_path / f'{i}.json', 29.0, 29.0, 1.0)) for i in range(2)]
    text = page(tmp_path, claim("the claim", paper, sig), *others, pool=quiet)
    found = rows(text)["the claim"]["verdict"]
    assert found.startswith(cause), found
    line = text.splitlines()[2]
    kind = found.split(" (")[0] if found.startswith("paper's") else found.split(": ")[1].split(" (")[0]
    words = {"the seed pairs split": "1: the seed pairs split", "paper's Δ excluded": "1 with the paper's Δ excluded",
             "significant before the page's correction only": "1: significant before the page's correction only",
             "this run detects only": "the run could not detect a difference of the paper's size",
             "our interval holds both the threshold and the paper's Δ": "1: our interval holds both"}
    assert any(words[key] in line for key in words if kind.startswith(key)), line
    assert "cannot tell" not in text and "no evidence against the paper" not in text


def test_a_paper_difference_outside_our_interval_is_flagged_beside_the_verdict(tmp_path, quiet):
    sig = write_significance(tmp_path / "sig.json", 29.2, 29.0, 0.05)    # 95% CI +0.10 to +0.30
    far = rows(page(tmp_path, claim("+PR helps", 1.29, sig), pool=quiet))["+PR helps"]
    near = rows(page(tmp_path, claim("+PR helps", 0.25, sig), pool=quiet))["+PR helps"]
    assert far["verdict"] == near["verdict"] == "reproduced"
    assert far["size"] == "paper Δ outside" and near["size"] == "consistent"


def test_holm_multiplies_the_ith_smallest_of_m_by_m_minus_i_and_keeps_the_order():
    assert holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0]) and holm([]) == []


def test_a_claim_not_comparable_at_this_scale_is_listed_unmeasured(tmp_path, quiet):
    row = rows(page(tmp_path, claim("NPMT beats LL", 2.01, None), pool=quiet))["NPMT beats LL"]
    assert row["verdict"] == "not comparable at this scale" and row["paper Δ"] == "+2.01"


def test_a_claim_on_an_empty_length_bucket_is_shown_not_judged_and_stays_out_of_the_family(tmp_path, quiet):
    """A claim whose part of the test set holds no sentence at this scale (`significance --longer-than`'s
    {"empty": WHY}) keeps its row with the paper's Δ and says why it has no verdict; the page's other
    claims are corrected as if it were not there; across scales it reads the same."""
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"empty": "empty bucket: no test source is longer than 45 tokens (of 300)"}))
    helps = claim("+PR helps", 1.0, write_significance(tmp_path / "sig.json", 30.0, 29.0, 0.3))
    text = page(tmp_path, helps, claim("on long sources", 0.52, empty, paper_says="significantly (p < 0.01)"), pool=quiet)
    row = rows(text)["on long sources"]
    assert row["verdict"] == ("not judged: empty bucket: no test source is longer than 45 tokens (of 300) "
                              "(the paper: significantly (p < 0.01))")
    assert row["paper Δ"] == "+0.52" and row["ours Δ"] == "" and row["chrF verdict"] == "not judged"
    alone = rows(page(tmp_path, helps, pool=quiet))["+PR helps"]
    assert rows(text)["+PR helps"]["page p"] == alone["page p"]  # one claim in the family, as without it
    assert "1 of 1 judged claims reproduced" in text and "1 not judged (its part of the test set is empty)" in text
    out = {ext: tmp_path / f"x.{ext}" for ext in ("md", "html", "svg")}
    assert cli.main(["across-scales", "--title", "T",
                     "--inputs", scaled_document([("ci", claim("on long sources", 0.52, empty))]), *[a for ext, path in out.items() for a in (f"--out-{ext}", str(path))]]) == 0
    assert "not judged: empty bucket" in out["md"].read_text() and "Not read" not in out["md"].read_text()


def test_a_claim_the_paper_calls_marginal_says_so_beside_its_verdict(tmp_path, quiet):
    sig = write_significance(tmp_path / "sig.json", 29.1, 29.0, 0.6)
    found = verdict(tmp_path, claim("stack beats gated", 0.09, sig, paper_says="marginally"), quiet)
    assert found.startswith("inconclusive") and found.endswith("(the paper: marginally)")


@pytest.mark.parametrize("inputs, message", [
    (document(claim("a text", "big", "x.json")), "--inputs claims.c0: paper_delta and margin are numbers"),
    (document(claim("a text", 0, "x.json")), "needs a non-zero paper difference"),
    (document(claim("a text", -0.2, "x.json", margin=0)), "needs a positive margin"),
    (document(claim("a text", 1, "x.json", metric="comet")), "metric must be one of ['chrf', 'chrf_pp', 'head_similarity', 'probe_"),
    (document(claim("a text", 1, "x.json", sigma=2)), "unknown ['sigma']"),
    (document('{"text": "a text", "paper_delta": 1}'), "missing ['metric', 'significance']"),
    ("1.0=tok_bleu=yes=x.json=a text", "--inputs is not valid JSON"),
    (json.dumps({"claims": {"c0": json.loads(claim("a text", 1, None))}, "primary": ["c1"]}),
     "--inputs primary: unknown claim id(s) ['c1']"),
    (document(claim("a text", 1, None), claim("a text", 2, None)), "two claims share the sentence(s) ['a text']"),
    (document(claim("a text", 1, None), curves={"a text": {"system": [], "baseline": []}}),
     "--inputs curves: unknown claim id(s) ['a text']; the claims are ['c0']"),
    (json.dumps({"claims": {}}), "--inputs claims: no claim"),
    (document(claim("a text", 1, None), note="x"), "--inputs: unknown key(s) ['note']"),
])
def test_a_malformed_page_input_is_named_by_its_key(tmp_path, capsys, inputs, message):
    assert cli.main(["claims", "--title", "t", "--inputs", inputs, "--out-md", str(tmp_path / "a.md"),
                     "--out-html", str(tmp_path / "a.html"), "--out-svg", str(tmp_path / "a.svg")]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "a.md").exists()


@pytest.mark.parametrize("scaled, primary, message", [
    ([("ci", json.dumps({**json.loads(claim("a text", 1, None)), "scale": "ci"}))], (), "--inputs claims.ci.c0: unknown ['scale']"),
    ([("ci", claim("a text", 1, None))], ("another text",), "--inputs primary: unknown claim id(s)"),
])
def test_a_malformed_page_across_scales_input_is_named_by_its_key(tmp_path, capsys, scaled, primary, message):
    document = json.loads(scaled_document(scaled))
    document["primary"] += list(primary)
    assert cli.main(["across-scales", "--title", "t", "--inputs", json.dumps(document), "--out-md", str(tmp_path / "a.md"),
                     "--out-html", str(tmp_path / "a.html"), "--out-svg", str(tmp_path / "a.svg")]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "a.md").exists()


def test_a_claims_page_reads_in_one_line_draws_its_forest_plot_and_labels_its_verdicts(tmp_path, quiet):
    """The HTML page: the one-line reading first, the forest plot inline with each claim's MDE (the SVG on
    disk too), each verdict a label, the notes folded away; the page parses with every tag closed."""
    good = write_significance(tmp_path / "a.json", 30.0, 29.0, 0.25)
    flat = write_significance(tmp_path / "b.json", 29.0, 29.0, 2.0)
    text = page(tmp_path, claim("helps", 1.29, good), claim("also helps", 0.5, flat),
                claim("a claim made at paper scale", 2.0, None), pool=quiet)
    assert text.index("1 of 2 judged claims reproduced, 0 contradicted, 1 inconclusive") < text.index("| helps")
    assert "1 not comparable at this scale" in text
    html = (tmp_path / "claims.html").read_text()
    assert html.index('<p class="reading">') < html.index("<figure><svg") < html.index("<table>") < html.index("<details>")
    assert '<span class="label good">reproduced</span>' in html and '<span class="label open">inconclusive: ' in html
    assert '<span class="label none">not comparable at this scale</span>' in html
    svg = (tmp_path / "claims.svg").read_text()
    assert "helps" in svg and "a claim made at paper scale" in svg and "detectable at 80% power" in svg
    assert_balanced_html(html)


def test_the_reading_counts_what_each_verdict_says():
    import pandas as pd
    table = pd.DataFrame({"verdict": ["reproduced", "contradicted (Δ < 0: p 0.001)", "paper's Δ excluded (x)",
                                      "inconclusive: the seed pairs split (1 of 3 ...)", "not comparable",
                                      "seed noise unmeasured (one seed pair ...)"]})
    assert reading(table) == ("1 of 4 judged claims reproduced, 1 contradicted, 1 with the paper's Δ excluded (our "
                              "interval rules out its size), 1 inconclusive (1: the seed pairs split); 1 with seed "
                              "noise unmeasured; 1 not comparable at this scale.")


def test_the_across_scales_page_sets_each_claim_beside_itself_at_every_scale(tmp_path):
    """Two scales' JSONs of the same claims: one row a (claim, scale), claims first, each scale's verdict
    by its own test with its own pooled seed noise; a JSON of the old test at another scale, or a file
    there that is no JSON at all, is named in the reading, not read."""
    scaled, pools = [], []
    for scale, ours in (("ci", 29.2), ("tiny", 30.5)):
        path = write_significance(tmp_path / f"{scale}.json", ours, 29.0, 0.25)
        pool = write_significance(tmp_path / f"{scale}-pool.json", 30.0, 29.0, 0.2, [1.0, 1.0, 1.0])
        scaled.append((scale, claim("+PR helps", 1.29, path)))
        pools.append(f"{scale}=central={pool}")
    (tmp_path / "old.json").write_text(json.dumps({"tok_bleu": {"delta": 1.0, "seeds": []}}))
    (tmp_path / "torn.json").write_text("smoke run: torn.json")
    scaled += [("gpu", claim("+PR helps", 1.29, tmp_path / 'old.json')),
               ("smoke", claim("+PR helps", 1.29, tmp_path / 'torn.json')), ("tiny", claim("NPMT helps", 2.0, None))]
    out = {ext: tmp_path / f"x.{ext}" for ext in ("md", "html", "svg")}
    assert cli.main(["across-scales", "--title", "Claims at every scale",
                     "--inputs", scaled_document(scaled, primary=["+PR helps"], pool=pools),
                     *[a for ext, path in out.items() for a in (f"--out-{ext}", str(path))]]) == 0
    text = out["md"].read_text()
    lines = [line for line in text.splitlines() if line.startswith("| +PR") or line.startswith("| NPMT")]
    assert [line.split("|")[2].strip() for line in lines] == ["ci", "tiny", "tiny"]
    assert "paper's Δ excluded" in lines[0] and "| reproduced" in lines[1] and "not comparable" in lines[2]
    assert "29.00" in lines[0] and "+0.20" in lines[0] and "+1.50" in lines[1]
    assert "Not read, written by an earlier version of the test" in text and "gpu: +PR helps; smoke: +PR helps" in text
    assert "<figure><svg" in out["html"].read_text() and "+PR helps [tiny]" in out["svg"].read_text()
    assert_balanced_html(out["html"].read_text())


def test_a_claims_page_reads_where_another_scales_verdict_differs_from_its_own(tmp_path, quiet):
    """The inputs' others: the gpu run (converged, kept as data) finds no gain where this run reproduces one; the
    reading says so by name, and says nothing of a claim whose verdicts agree."""
    here = write_significance(tmp_path / "here.json", 31.0, 29.0, 0.25, [2.0, 2.0, 2.0])
    there = write_significance(tmp_path / "there.json", 38.3, 38.3, 0.2, [0.1, -0.1, 0.0])
    same = write_significance(tmp_path / "same.json", 31.0, 29.0, 0.25, [2.0, 2.0, 2.0])
    others = {"gpu measured on H200, 2026-11-26, commit abc": {"claims": {"c0": there, "c1": same},
                                                             "pool": {"quiet": there}}}
    out = tmp_path / "c.md"
    inputs = document(claim("D helps", 1.28, here), claim("A helps", 1.29, here), pool=quiet, others=others)
    assert cli.main(["claims", "--title", "t", "--out-md", str(out), "--out-html", str(tmp_path / "c.html"),
                     "--out-svg", str(tmp_path / "c.svg"), "--inputs", inputs, "--scale", "tiny"]) == 0
    reading = out.read_text().split("\n\n")[1]
    assert ("At gpu measured on H200, 2026-11-26, commit abc the verdict differs from this run's (tiny) for 1: "
            "D helps (reproduced here, paper's Δ excluded there).") in reading
    assert "A helps (" not in reading


def test_a_pooled_comparison_whose_seed_does_not_translate_is_left_out_of_the_pool(tmp_path):
    """A central comparison with a collapsed seed (ci's models, or one failed training) measures no seed
    noise: the pool holds the other one alone (2 df)."""
    good = write_significance(tmp_path / "good.json", 30, 29, 0.2, [0.6, 1.2, 1.1], own=0.04)
    bad = write_significance(tmp_path / "bad.json", 20, 29, 0.2, [1.0, -28.0, 1.0],
                             seed_scores=[(30.0, 29.0), (1.0, 29.0), (30.0, 29.0)])
    one = write_significance(tmp_path / "one.json", 30.5, 29.0, 0.3)
    text = page(tmp_path, claim("one seed", 1.0, one), pool=[f"good={good}", f"bad={bad}"])
    assert "on 2 degrees of freedom" in text and "good 0.32" in text and "bad " not in text


def test_a_claims_page_refuses_a_json_without_the_bootstrap_variances_by_name(tmp_path, capsys):
    """A JSON written before the pooling (no var_bootstrap_mean) is named with the command that
    recomputes it; a table still reads it (tests/test_analyses.py)."""
    old = tmp_path / "old.json"
    entry = json.loads(open(write_significance(tmp_path / "s.json", 30.0, 29.0)).read())["tok_bleu"]
    del entry["var_bootstrap_mean"]
    old.write_text(json.dumps({"tok_bleu": entry}))
    assert cli.main(["claims", "--title", "t", "--inputs", document(claim("x", 1.0, old)), "--out-md", str(tmp_path / "a.md"),
                     "--out-html", str(tmp_path / "a.html"), "--out-svg", str(tmp_path / "a.svg")]) == 2
    assert "old.json: written by an earlier version" in capsys.readouterr().err and not (tmp_path / "a.md").exists()


def test_a_page_reads_each_significance_json_once(tmp_path, monkeypatch):
    """The claim's JSON is also the pool's (a central claim's page): parsed once, and again once changed."""
    reads = []
    read_json = pooled_module.read_json
    monkeypatch.setattr(pooled_module, "read_json", lambda path: reads.append(path) or read_json(path))
    sig = write_significance(tmp_path / "sig.json", 30.0, 29.0, 0.2, [1.0, 1.2, 0.8])
    page(tmp_path, claim("+PR helps", 1.29, sig), primary=["+PR helps"], pool=[f"central={sig}"])
    assert reads == [sig]
    write_significance(tmp_path / "sig.json", 31.0, 29.0, 0.2, [2.0, 2.2, 1.8, 2.0])
    again = rows(page(tmp_path, claim("+PR helps", 1.29, sig), pool=[f"central={sig}"]))["+PR helps"]
    assert again["ours Δ"] == "+2.00"
    assert reads == [sig, sig]


def test_each_claim_is_judged_in_chrf_beside_its_bleu_and_a_disagreement_is_flagged(tmp_path):
    """The same claims under chrF: one whose chrF difference is as clear as its BLEU one agrees; one whose
    chrF difference is nil reads inconclusive there, flagged in its cell and in the reading; a claim of
    no gain is not tested in chrF (its margin is in BLEU); a claim in TER (lower is better: the paper's
    Δ -2) is judged on the side of a fall, and in chrF on the side of a rise."""
    flat = entry_of(write_significance(tmp_path / "flat.json", 60.0, 60.0, 0.3, [0.0, 0.2, -0.2]))
    ter = entry_of(write_significance(tmp_path / "ter.json", 40.0, 43.0, 0.3, [-3.0, -2.8, -3.2]))
    agree = write_significance(tmp_path / "agree.json", 32.0, 29.0, 0.3, [3.0, 2.8, 3.2])
    differ = write_significance(tmp_path / "differ.json", 32.0, 29.0, 0.3, [3.0, 2.8, 3.2], chrf=flat)
    nogain = write_significance(tmp_path / "nogain.json", 29.0, 29.0, 0.2, [0.0, 0.1, -0.1])
    in_ter = write_significance(tmp_path / "in_ter.json", 32.0, 29.0, 0.3, [3.0, 2.8, 3.2], ter=ter)
    low = write_significance(tmp_path / "low.json", 3.0, 1.0, 0.3, [2.0, 2.0, 2.0])  # below the floor: not judged
    still = entry_of(write_significance(tmp_path / "still.json", 30.0, 29.0, 0.2, [1.0, 1.0, 1.0]))
    quiet = [f"quiet={write_significance(tmp_path / 'quiet.json', 30.0, 29.0, 0.2, [1.0, 1.0, 1.0], ter=still)}"]
    text = page(tmp_path, claim("A helps", 2.0, agree), claim("B helps", 2.0, differ),
                claim("C does not help", 0.0, nogain, margin=0.5), claim("D cuts TER", -2.0, in_ter, metric="ter"),
                claim("E helps", 1.0, low), pool=quiet)
    table = rows(text)
    assert table["A helps"]["verdict"].startswith("reproduced") and table["A helps"]["chrF verdict"] == "reproduced"
    assert table["A helps"]["chrF Δ"] == "+3.00"
    assert table["A helps"]["Δ in other metrics"] == "sacreBLEU +3.00 · chrF++ +3.00 · TER +3.00"
    assert table["B helps"]["verdict"].startswith("reproduced")
    assert table["B helps"]["chrF verdict"].startswith("inconclusive")
    assert "differs from tokenized BLEU (reproduced)" in table["B helps"]["chrF verdict"]
    assert table["C does not help"]["chrF verdict"].startswith("not tested")
    assert table["D cuts TER"]["metric"] == "TER" and table["D cuts TER"]["tested"] == "Δ < 0"
    assert table["D cuts TER"]["verdict"].startswith("reproduced") and table["D cuts TER"]["chrF verdict"] == "reproduced"
    assert table["D cuts TER"]["Δ in other metrics"] == "sacreBLEU +3.00 · tokenized BLEU +3.00 · chrF++ +3.00"
    assert table["E helps"]["verdict"].startswith("not comparable") and table["E helps"]["chrF verdict"] == "not judged"
    assert table["E helps"]["chrF Δ"] == "+2.00"
    assert ("In chrF, 1 of the 3 claims judged in both get another verdict: B helps (reproduced in tokenized "
            "BLEU, inconclusive in chrF)") in text
    assert "Seed noise (chrF)" in text
