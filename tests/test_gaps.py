"""The gap over training (reporting/gaps.py) and the claims page that draws it."""

import numpy as np
import pytest

from conftest import claim
from nmtrepro import cli
from nmtrepro.core.files import InputError
from nmtrepro.reporting import gaps
from test_claims import document, rows, scaled_document, write_significance

STEPS = range(100, 1001, 100)


def write_curve(path, nll_at):
    """A training curve TSV as train.py writes it: a log row (no valid NLL) and a validation row a step."""
    lines = ["step\tepoch\twall_s\tlr\ttrain_loss\ttrain_nll\tvalid_loss\tvalid_nll\ttgt_tok_s\tsrc_tok_s"]
    for step in STEPS:
        lines.append(f"{step}\t0\t1.0\t0.001\t5.0\t4.9\t\t\t7000\t7000")
        lines.append(f"{step}\t0\t1.0\t\t\t\t{nll_at(step) + 0.1}\t{nll_at(step)}\t\t")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def pair_curves(tmp_path, gap_at, pairs=3, noise=0.0):
    """System and baseline curves of `pairs` seeds whose validation NLL differs by gap_at(step, pair)."""
    rng = np.random.default_rng(0)
    system, baseline = [], []
    for pair in range(1, pairs + 1):
        base = {step: 6.0 - step / 500 for step in STEPS}
        jitter = {step: noise * rng.standard_normal() for step in STEPS}
        baseline.append(write_curve(tmp_path / f"base{pair}.tsv", base.get))
        system.append(write_curve(tmp_path / f"sys{pair}.tsv",
                                  lambda s, p=pair: base[s] + gap_at(s, p) + jitter[s]))
    return system, baseline


def test_the_gap_is_system_minus_baseline_at_each_validation_step_per_seed_pair(tmp_path):
    system, baseline = pair_curves(tmp_path, lambda step, pair: -0.1 * pair)
    table = gaps.gaps(system, baseline)
    assert len(table) == 3 * len(STEPS)
    assert np.allclose(table.groupby("pair")["delta"].mean(), [-0.1, -0.2, -0.3])


@pytest.mark.parametrize("gap_at, closing", [
    (lambda step, pair: -0.5 + step / 2500, True),       # a gain shrinking toward zero
    (lambda step, pair: -0.3, False),                    # a steady gain
    (lambda step, pair: -0.1 - step / 5000, False),      # a gain still widening
    (lambda step, pair: 0.5 - step / 2500, True),        # a loss shrinking toward zero
])
def test_a_gap_moving_toward_zero_over_the_last_half_is_closing(tmp_path, gap_at, closing):
    found = gaps.trend(gaps.gaps(*pair_curves(tmp_path, gap_at, noise=0.01)))
    assert found.pairs == 3 and found.low <= found.slope <= found.high
    assert found.closing is closing
    assert bool(gaps.qualifier(found)) is closing


def test_the_slope_is_per_thousand_updates_and_its_interval_spans_the_seed_pairs(tmp_path):
    found = gaps.trend(gaps.gaps(*pair_curves(tmp_path, lambda step, pair: step * pair / 10000)))
    assert np.isclose(found.slope, 0.2)                  # 0.1, 0.2, 0.3 per 1,000 updates
    assert found.low < 0.1 and found.high > 0.3


def test_curves_of_unequal_seed_counts_are_refused(tmp_path):
    system, baseline = pair_curves(tmp_path, lambda step, pair: 0.0)
    with pytest.raises(InputError, match="pairs seeds"):
        gaps.gaps(system, baseline[:2])


def test_a_claims_verdict_carries_the_closing_gap_in_words_and_the_page_draws_it(tmp_path):
    system, baseline = pair_curves(tmp_path, lambda step, pair: -0.5 + step / 2500, noise=0.01)
    sig = write_significance(tmp_path / "sig.json", 31.0, 30.0, 0.2, [1.0, 1.1, 0.9])
    text = "X improves on Base"
    out = tmp_path / "claims.md"
    argv = ["claims", "--title", "Paper X: claims", "--out-md", str(out), "--out-html", str(tmp_path / "c.html"),
            "--out-svg", str(tmp_path / "c.svg"), "--out-gap-svg", str(tmp_path / "c.gap.svg"),
            "--inputs", document(claim(text, 1.0, sig), pool=[f"x={sig}"],
                                 curves={"c0": {"system": system, "baseline": baseline}})]
    assert cli.main(argv) == 0
    page = out.read_text()
    assert rows(page)[text]["verdict"].startswith("reproduced; the gap was closing when training stopped")
    assert "closing when training stopped for 1 of them" in page.split("\n\n")[1]       # the reading line
    assert "c.gap.svg" in page and "<svg" in (tmp_path / "c.html").read_text()
    assert (tmp_path / "c.gap.svg").read_text().count("<svg") == 1


def test_a_claim_is_judged_at_each_shorter_budget_and_the_reading_says_where_its_verdict_changes(tmp_path):
    """The inputs' budgets: the claim at 300 and 600 updates from significance JSONs of the same trainings' earlier
    windows, each judged under the page's procedure with its own budget's pool; a gain that vanishes with
    training reads "reproduced at 300, ..., paper's Δ excluded at 1,000" and the figure adds its Δ BLEU panel."""
    system, baseline = pair_curves(tmp_path, lambda step, pair: -0.2, noise=0.01)
    text = "X improves on Base"
    final = write_significance(tmp_path / "sig.json", 30.1, 30.0, 0.2, [0.3, -0.2, 0.2])
    early = {updates: write_significance(tmp_path / f"sig{updates}.json", 30.0 + gain, 30.0, 0.2, [gain] * 3)
             for updates, gain in ((300, 2.0), (600, 1.5))}
    budgets = {"levels": [{"label": f"{share:.0%}", "claims": {"c0": {"significance": early[updates], "updates": updates}},
                           "pool": {"x": early[updates]}} for share, updates in ((0.3, 300), (0.6, 600))],
               "final": "100%", "updates": {"c0": 1000}}
    budgets["levels"][1]["claims"]["c0"]["label"] = "62%"  # its own share where its window passes the level's
    out = tmp_path / "claims.md"
    argv = ["claims", "--title", "Paper X: claims", "--out-md", str(out), "--out-html", str(tmp_path / "c.html"),
            "--out-svg", str(tmp_path / "c.svg"), "--out-gap-svg", str(tmp_path / "c.gap.svg"),
            "--inputs", document(claim(text, 1.0, final), primary=[text], pool=[f"x={final}"],
                                 curves={"c0": {"system": system, "baseline": baseline}}, budgets=budgets)]
    assert cli.main(argv) == 0
    page = out.read_text()
    main, by_budget = page.split("## The claims at each training budget")
    assert rows(main)[text]["verdict"].startswith("paper's Δ excluded")
    lines = [line for line in by_budget.splitlines() if line.startswith(f"| {text}")]
    assert [line.split("|")[2].strip() for line in lines] == ["30%", "62%", "100%"]
    assert [line.split("|")[3].strip() for line in lines] == ["300", "600", "1000"]
    assert "reproduced" in lines[0] and "reproduced" in lines[1] and "excluded" in lines[2]
    assert ("The verdict changes with the training budget for 1 of them: X improves on Base (reproduced at 300, "
            "reproduced at 600, paper's Δ excluded at 1,000 updates)") in page.split("\n\n")[1]
    assert "Δ BLEU at each budget" in (tmp_path / "c.gap.svg").read_text()
    assert "The claims at each training budget" in (tmp_path / "c.html").read_text()


def test_a_budget_naming_an_unknown_claim_is_refused(tmp_path, capsys):
    sig = write_significance(tmp_path / "sig.json", 31.0, 30.0)
    argv = ["claims", "--title", "t", "--out-md", str(tmp_path / "c.md"), "--out-html", str(tmp_path / "c.html"),
            "--out-svg", str(tmp_path / "c.svg"),
            "--inputs", document(claim("X", 1.0, sig), budgets={
                "levels": [{"label": "50%", "claims": {"c1": {"significance": sig, "updates": 5}}, "pool": {}}],
                "updates": {"c0": 10}})]
    assert cli.main(argv) == 2
    assert "--inputs budgets.levels[0].claims: unknown claim id(s) ['c1']" in capsys.readouterr().err


def test_the_page_across_scales_draws_each_scales_gap_from_the_table_its_claims_page_wrote(tmp_path):
    """--out-gap-tsv (claims) then the inputs' gaps (across-scales): each scale's curves of a claim in one panel,
    without that scale's trainings (a gpu run kept as data ships its table beside its JSONs)."""
    text, tables = "X improves on Base", {}
    for scale, gap in (("tiny", -0.3), ("gpu", -0.02)):
        folder = tmp_path / scale
        folder.mkdir()
        system, baseline = pair_curves(folder, lambda step, pair, g=gap: g, noise=0.01)
        sig = write_significance(folder / "sig.json", 31.0, 30.0, 0.2, [1.0, 1.1, 0.9])
        tables[scale] = (sig, folder / "claims.gap.tsv")
        assert cli.main(["claims", "--title", "t", "--out-md", str(folder / "c.md"), "--out-html", str(folder / "c.html"),
                         "--out-svg", str(folder / "c.svg"), "--out-gap-svg", str(folder / "c.gap.svg"),
                         "--out-gap-tsv", str(tables[scale][1]),
                         "--inputs", document(claim(text, 1.0, sig), pool=[f"x={sig}"],
                                              curves={"c0": {"system": system, "baseline": baseline}})]) == 0
    table = gaps.read_gaps(str(tables["gpu"][1]))[text]
    assert len(table) == 3 * len(STEPS) and abs(table["delta"].mean() + 0.02) < 0.01
    argv = ["across-scales", "--title", "t", "--out-md", str(tmp_path / "a.md"), "--out-html", str(tmp_path / "a.html"),
            "--out-svg", str(tmp_path / "a.svg"), "--out-gap-svg", str(tmp_path / "a.gap.svg")]
    argv += ["--inputs", scaled_document([(scale, claim(text, 1.0, sig)) for scale, (sig, _) in tables.items()],
                                         gaps={scale: str(gap_tsv) for scale, (_, gap_tsv) in tables.items()})]
    assert cli.main(argv) == 0
    drawn = (tmp_path / "a.gap.svg").read_text()
    assert "Δ valid NLL over training at each scale" in drawn and ">tiny</text>" in drawn and ">gpu</text>" in drawn
    assert "a.gap.svg" in (tmp_path / "a.md").read_text()
