"""The claims at several training budgets (nmtrepro.study.budgets): which windows each training keeps, the
experiments of its shorter budgets, and a longer budget's own results tree."""
from pathlib import Path

import pytest

from nmtrepro.study import budgets
from nmtrepro.study.config import central_study, experiments, load, seed_pairs, validate
from nmtrepro.core.files import InputError, results_tree

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def resolved(*overrides):
    config = load(REPO / "config.yaml", list(overrides))[0]
    validate(config, SCHEMA)
    return config, experiments(config)


def test_each_budget_ends_on_a_checkpoint_with_room_for_its_window():
    train = {"max_updates": 1000, "save_every": 100}
    assert budgets.window_ends(train, 3, [0.3, 0.6]) == {0.3: 300, 0.6: 600}
    assert budgets.kept_steps(train, 3, [0.3, 0.6]) == [100, 200, 300, 400, 500, 600]
    # paper B's 300-update continuation saves every 50: no window of three ends at 90
    assert budgets.window_ends({"max_updates": 300, "save_every": 50}, 3, [0.3, 0.6]) == {0.6: 200}


def test_the_central_claims_trainings_keep_their_budgets_windows_and_each_budget_is_an_experiment():
    config, found = resolved("scale=tiny")
    assert found["base_en_de"].train["keep_steps"] == found["pr_en_de_seed3"].train["keep_steps"] == [
        100, 200, 300, 400, 500, 600]
    assert found["base_en_fr"].train["keep_steps"] == []              # no central claim compares it
    stopped = found["pr_en_de_seed2_at300"]
    assert (stopped.same_as, stopped.stops_at, stopped.replicate_of) == ("pr_en_de_seed2", 300, "pr_en_de_at300")
    # paper D's Base is paper A's training below paper scale: its budgets are that one's
    assert "d_base_en_de_at300" not in found
    pairs = budgets.budget_pairs(config, found, "fusing_en_de", "d_base_en_de")
    assert pairs == [(0.3, "fusing_en_de_at300", "base_en_de_at300"), (0.6, "fusing_en_de_at600", "base_en_de_at600")]
    assert seed_pairs(found, "fusing_en_de_at300", "base_en_de_at300")[2] == ("fusing_en_de_seed3_at300",
                                                                           "base_en_de_seed3_at300")
    assert results_tree(config["scale"], config["budget"]) == "results/tiny"


def test_a_longer_budget_trains_the_sweeps_claims_in_a_tree_of_its_own_judged_at_1x_2x_4x():
    config, found = resolved("scale=tiny", "budget=4")
    assert results_tree(config["scale"], config["budget"]) == "results/tiny-budget4"
    assert central_study(config, found)["claims"] == ["pr_base_en_de", "fusing_en_de"]
    assert found["base_en_de"].train["max_updates"] == 4000
    assert found["hao_base_en_de_continued"].train["max_updates"] == 1200   # the continuation too
    assert [share for share, *_ in budgets.budget_pairs(config, found, "pr_en_de", "base_en_de")] == [0.25, 0.5]
    assert {found[f"pr_en_de_at{n}"].stops_at for n in (1000, 2000)} == {1000, 2000}


def test_a_sweep_naming_a_claim_that_is_not_central_is_refused():
    with pytest.raises(InputError, match=r"budget_sweep.claims: \['pr_base_en_fr'\] are not central claims"):
        resolved("scale=tiny", "budget=2", "budget_sweep={claims: [pr_base_en_fr]}")


def test_a_claim_central_at_some_scales_is_central_there_and_trains_its_seeds_there_only():
    """Paper C's central claim is the reordering layer on the seq2seq where NPMT does not converge, and
    NPMT over the seq2seq at `paper` (and `smoke`, which stands for it): there NPMT trains three seeds,
    and the reordering layer's systems one. A scale it names that the config lacks is refused by key."""
    for scale, central in (("tiny", "reorder_hurts_ll_beam"), ("smoke", "npmt_vs_ll_beam"),
                           ("paper", "npmt_vs_ll_beam")):
        config, found = resolved(f"scale={scale}")
        claims = budgets.central_claims(config)
        assert central in claims and {"reorder_hurts_ll_beam", "npmt_vs_ll_beam"} - {central} - set(claims)
    seeds = {prefix: [name for name in found if name.startswith(prefix)]   # paper's
             for prefix in ("npmt_beam_de_en", "ll_beam_de_en", "ll_reorder_greedy_de_en", "ll_reorder_beam_de_en")}
    assert seeds == {"npmt_beam_de_en": ["npmt_beam_de_en", "npmt_beam_de_en_seed2", "npmt_beam_de_en_seed3"],
                     "ll_beam_de_en": ["ll_beam_de_en", "ll_beam_de_en_seed2", "ll_beam_de_en_seed3"],
                     "ll_reorder_greedy_de_en": ["ll_reorder_greedy_de_en"], "ll_reorder_beam_de_en": ["ll_reorder_beam_de_en"]}
    config, _ = resolved("scale=tiny")
    config["claims"]["npmt_vs_ll_beam"]["central"] = ["paper", "tpu"]
    with pytest.raises(InputError, match=r"claims.npmt_vs_ll_beam.central = 'tpu' is not defined"):
        budgets.central_claims(config)
