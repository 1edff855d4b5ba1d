"""The metrics every evaluation reports (evaluation/metrics): each corpus score from summed sentence
statistics is sacreBLEU's own corpus_score, every row at once; the paired bootstrap runs in each, and
TER's direction (lower is better) carries through the test."""
from pathlib import Path

import numpy as np
import pytest
import yaml
from sacrebleu.metrics import CHRF, TER

from nmtrepro.study.config_checks import check_quantity_claim
from nmtrepro.core.files import InputError
from nmtrepro.evaluation.metrics import METRICS, get
from nmtrepro.evaluation.metrics.bleu import make_metric
from nmtrepro.evaluation.significance import pooled_bootstrap

REFS = [f"Sentence number {i} says the {w} sat on a mat, near house {i % 7}."
        for i, w in enumerate(["cat", "dog", "bird", "cow", "fox"] * 8)]
SACREBLEU = {"sacrebleu": make_metric("sacrebleu"), "tok_bleu": make_metric("tok_bleu"), "chrf": CHRF(),
             "chrf_pp": CHRF(word_order=2), "ter": TER()}


def degraded(refs, every, seed=0):
    return [" ".join("xx" if (j + seed) % every == 0 else w for j, w in enumerate(r.split())) for r in refs]


def test_the_registry_holds_both_bleus_chrf_chrfpp_and_ter_in_the_jsons_order():
    assert list(METRICS) == ["sacrebleu", "tok_bleu", "chrf", "chrf_pp", "ter"]
    names = {key: METRICS[key].corpus(METRICS[key].statistics(REFS[:2], [REFS[:2], REFS[1:3]])) for key in METRICS}
    assert {key: entry["name"] for key, entry in names.items()} == {
        "sacrebleu": "BLEU", "tok_bleu": "BLEU", "chrf": "chrF2", "chrf_pp": "chrF2++", "ter": "TER"}
    assert all(entry["signature"].startswith("nrefs:2|") for entry in names.values())
    with pytest.raises(Exception, match="unknown metric 'comet'"):
        get("comet")


@pytest.mark.parametrize("name", list(SACREBLEU))
def test_summed_sentence_statistics_give_sacrebleus_corpus_score(name):
    """Whole corpora, empty and short outputs, two references, and random subsets summed (a bootstrap's
    rows), all rows at once."""
    metric, theirs = METRICS[name], SACREBLEU[name]
    rng = np.random.default_rng(0)
    second = degraded(REFS, 6, 1)
    for hyps in (REFS, degraded(REFS, 3), degraded(REFS, 2), ["x y"] * 40, [r.split()[0] for r in REFS], [""] * 40):
        for refs in ([REFS], [REFS, second]):
            stats = metric.statistics(hyps, refs)                                        # [n, S]
            assert metric.corpus(stats)["score"] == pytest.approx(theirs.corpus_score(hyps, refs).score, abs=1e-9)
            picks = [rng.integers(0, 40, size) for size in (1, 3, 40) for _ in range(4)]
            rows = np.array([stats[p].sum(0) for p in picks])
            expected = [theirs.corpus_score([hyps[i] for i in p], [[r[i] for i in p] for r in refs]).score
                        for p in picks]
            assert metric.score(rows) == pytest.approx(expected, abs=1e-9), (name, hyps[0])


def test_sentence_scores_are_sacrebleus_sentence_scores():
    hyps = degraded(REFS, 3)[:5]
    for name, metric in METRICS.items():
        scorer = metric.sentence if name in ("sacrebleu", "tok_bleu") else SACREBLEU[name]
        ours = metric.sentence_scores(metric.statistics(hyps, [REFS[:5]]))
        assert ours == pytest.approx([scorer.sentence_score(h, [r]).score for h, r in zip(hyps, REFS)], abs=1e-9)


@pytest.mark.parametrize("name", list(SACREBLEU))
def test_the_paired_bootstrap_runs_in_every_metric_in_its_own_direction(name):
    """A system better than its baseline scores higher in BLEU and chrF and lower in TER: its p_greater is
    small for the former and its p_less for TER, and the orientation says which is better."""
    metric = METRICS[name]
    result = pooled_bootstrap([(degraded(REFS, 6), degraded(REFS, 2)), (degraded(REFS, 6, 1), degraded(REFS, 2, 1))],
                              [REFS], metric, samples=500)
    assert metric.orientation * result["delta"] > 0
    better, worse = (result["p_greater"], result["p_less"])[::metric.orientation]
    assert better < 0.05 < 0.95 < worse  # two seed pairs: a t tail of few degrees of freedom
    assert set(metric.signature.split("|")) | {"bs:500"} <= set(result["signature"].split("|"))
    assert result["ci_low"] <= result["mean"] <= result["ci_high"]


def test_a_claim_may_name_every_registered_metric_and_an_unknown_one_names_its_key():
    """The workflow's check follows the registry (the schema names the metrics in prose only: a quantity's
    `probe_<task>` is open), so that a new metric module is a claim's metric at once."""
    config = {"analyses": {}, "scales": {}}
    for name in METRICS:
        check_quantity_claim(config, {"metric": name}, "claims.x")
    with pytest.raises(InputError, match=r"claims\.x\.metric = 'meteor' is not defined"):
        check_quantity_claim(config, {"metric": "meteor"}, "claims.x")
    schema = yaml.safe_load((Path(__file__).resolve().parents[1] / "workflow/schemas/config.schema.yaml").read_text())
    described = schema["properties"]["claims"]["additionalProperties"]["properties"]["metric"]["description"]
    assert all(name in described for name in METRICS)
