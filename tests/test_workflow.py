"""The Snakemake workflow end to end at `ci` scale, config validation, and resume after a kill."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from conftest import assert_balanced_html
from nmtrepro.study.config import (analysis_kinds, central_study, check_paper_cells, experiments, load, merge_papers,
                                   no_gain_margins, replicates, rule_files, seed_pairs, tables_at_scale, validate)
from nmtrepro.forks import server as forkserver
from nmtrepro.core.files import InputError
from nmtrepro.study.budgets import central_claims
from nmtrepro.study.config_checks import check_analysis_kinds, check_dataset_files, check_languages, dataset_files
from nmtrepro.reporting.claims_inputs import GIVEN
from nmtrepro.reporting.protocol import protocol_note
from nmtrepro.reporting.status import newest_log, trainings

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def repo_config() -> dict:
    """config.yaml with every paper's file merged in, as the Snakefile sees it."""
    return load(REPO / "config.yaml")[0]


def workdir(tmp_path: Path, config: dict) -> Path:
    """A copy of the workflow (data linked, not copied) with its own config.yaml and results/.
    `config` is already merged (repo_config), so the copy lists no paper files."""
    work = tmp_path / "wf"
    work.mkdir()
    shutil.copy(REPO / "Snakefile", work)
    for folder in ("workflow", "profiles", "envs"):
        shutil.copytree(REPO / folder, work / folder)
    (work / "data").symlink_to(REPO / "data")
    (work / "config.yaml").write_text(yaml.safe_dump({**config, "papers": []}, sort_keys=False))
    return work


def snakemake(work: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """`snakemake ARGS` at ci scale in `work` (targets go in ARGS: --config last, as it takes many values)."""
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", *args, "--config", "scale=ci"]
    return subprocess.run(cmd, cwd=work, capture_output=True, text=True, **kwargs)


def test_validate_names_every_bad_key_and_fills_defaults():
    config = repo_config()
    config["scales"]["tiny"]["train"]["warmpu"] = 4000
    config["scales"]["ci"]["decode"]["beam"] = 0
    with pytest.raises(InputError) as err:
        validate(config, SCHEMA)
    assert "scales.ci.decode.beam: 0 is less than the minimum of 1" in str(err.value)
    assert "scales.tiny.train: Additional properties are not allowed ('warmpu' was unexpected)" in str(err.value)

    config = repo_config()
    validate(config, SCHEMA)
    assert config["scales"]["tiny"]["train"]["max_minutes"] == 0  # a schema default, filled in


def test_paper_d_trains_its_own_regime_at_paper_scale_and_shares_tiny_trainings():
    """Paper D (Sec. V-A): 200k updates of ~4096x4 tokens, validated every 1,000, the best dev checkpoint
    (of the 20 kept), beam 4 and length penalty 0.6, Big included (over its size's 300k); paper A's
    baselines keep theirs."""
    config = repo_config()
    validate(config, SCHEMA)
    paper = experiments({**config, "scale": "paper"})
    for name in ("d_base_en_de", "rec_en_de", "d_big_en_de", "big_fusing_zh_en_nist03"):
        e = paper[name]
        assert (e.train["max_updates"], e.train["update_tokens"], e.train["save_every"], e.average) == \
            (200_000, 16_384, 1000, {"last": 20, "by_dev_bleu": True}), name
        assert (e.decode["beam"], e.decode["lenpen"]) == (4, 0.6)
    assert paper["d_big_en_de"].train["lr"] == paper["big_en_de"].train["lr"] and paper["base_en_de"].average == {"last": 5}
    tiny = experiments({**config, "scale": "tiny"})                    # no regime of its own: paper A's trainings
    assert tiny["d_base_en_de"].same_as == "base_en_de" and tiny["d_big_en_de"].same_as == "big_en_de"
    config["experiments"]["rec_en_de"]["regime"] = "chen2002"
    with pytest.raises(InputError, match=r"experiments.rec_en_de.regime = 'chen2002' is not defined"):
        experiments({**config, "scale": "tiny"})


def test_a_model_sizes_regime_applies_at_its_scale_only():
    config = repo_config()
    validate(config, SCHEMA)
    config["scale"] = "paper"
    resolved = experiments(config)  # paper A: Big trains 300k updates and averages the last 20
    assert resolved["big_en_de"].train["max_updates"] == 300_000 and resolved["big_en_de"].average["last"] == 20
    assert resolved["base_en_de"].train["max_updates"] == 100_000 and resolved["base_en_de"].average["last"] == 5
    assert resolved["big_en_de"].model["dropout"] == 0.3 and resolved["big_en_fr"].model["dropout"] == 0.1
    transformers = [e for e in resolved.values() if e.model["family"] not in ("gru_attention", "npmt")]
    assert all(e.model["pre_norm"] is False for e in transformers)  # post-norm, as paper A trains
    assert resolved["npmt_greedy_de_en"].train["lr"] == 0.001      # paper C's GRU models: Adam at 0.001
    paper_b = set(load(REPO / "config.yaml")[1]["B"]["experiments"])
    for e in transformers:  # Vaswani et al.'s peak, d^-0.5 * warmup^-0.5: paper A's 8k warmup, paper B's 4k
        warmup = 4000 if e.replicate_of in paper_b else 8000
        assert e.train["warmup"] == warmup, e.name
        assert e.train["lr"] == pytest.approx(e.model["d_model"] ** -0.5 * warmup ** -0.5, rel=1e-3), e.name
    config["analyses"]["A_table2_cost"]["paper_size"]["scale"] = "papr"
    with pytest.raises(InputError, match=r"analyses.A_table2_cost.paper_size.scale = 'papr' is not defined"):
        experiments(config)
    config["analyses"]["A_table2_cost"]["paper_size"]["scale"] = "paper"
    config["scales"]["paper"]["by_size"]["big"]["train"]["max_update"] = 1
    with pytest.raises(InputError, match=r"scales.paper.by_size.big.train key = 'max_update' is not defined"):
        experiments(config)


def test_papers_a_c_d_train_from_scratch_and_paper_b_continues_from_its_baseline():
    """Every model trains as its paper trains it: A, C and D from scratch; paper B's from the trained
    baseline (`init_from`), the scale's `continuation` more (tiny: 300 updates), the full recipe again at
    paper scale."""
    config = repo_config()
    validate(config, SCHEMA)
    resolved = experiments(config)
    tiny = config["scales"]["tiny"]
    for name in ("base_en_de", "pr_en_de", "fusing_en_de", "ll_greedy_de_en", "big_pr_en_fr"):
        assert resolved[name].init is None and resolved[name].train["max_updates"] in (1000, 1500), name
    for name in ("biarn_en_de", "hao_base_en_de_continued"):  # the variant and its control alike
        assert resolved[name].init == "hao_base_en_de"
        # the central claim's pair keeps the window of its budget at 0.6 (budgets.py)
        assert resolved[name].train == {**tiny["train"], **tiny["continuation"], "seed": 1, "keep_steps": [100, 150, 200]}
    assert resolved["biarn_en_de_seed3"].init == "hao_base_en_de_seed3"  # each seed from its own Base
    config["scale"] = "paper"
    resolved = experiments(config)
    # paper scale: one seed under the plain names, and three of the central claims' systems (central_seeds);
    # paper C's central claim there is NPMT over the seq2seq, not the reordering layer's (C.yaml)
    central = {"base_en_de", "pr_en_de", "hao_base_en_de", "hao_base_en_de_continued", "biarn_en_de",
               "ll_beam_de_en", "npmt_beam_de_en", "d_base_en_de", "fusing_en_de"}
    assert set(resolved) == set(config["experiments"]) | {f"{n}_seed{s}" for n in central for s in (2, 3)}
    for name, exp in config["experiments"].items():
        assert resolved[name].init == exp.get("init_from"), name
    assert resolved["biarn_en_de"].train == resolved["hao_base_en_de"].train  # the full recipe again


def test_paper_b_trains_as_vaswani_and_scores_zh_en_by_nist_bleu():
    """Paper B "followed the configurations in Vaswani et al.": 4,000 warmup updates at paper scale for all
    its models, its En-De baselines included (paper A's warm up over 8,000), which at tiny are paper A's
    trainings; its Zh-En is scored by case-sensitive NIST BLEU, which sacreBLEU computes."""
    config, owned = load(REPO / "config.yaml")
    validate(config, SCHEMA)
    paper, tiny = (experiments({**config, "scale": scale}) for scale in ("paper", "tiny"))
    for name in owned["B"]["experiments"]:
        d = paper[name].model["d_model"]
        assert paper[name].train["warmup"] == 4000, name
        assert paper[name].train["lr"] == pytest.approx(d ** -0.5 * 4000 ** -0.5, rel=1e-3), name
    assert paper["base_en_de"].train["warmup"] == 8000 and paper["hao_base_en_de"].same_as is None
    assert tiny["hao_base_en_de"].same_as == "base_en_de" and tiny["hao_big_en_de"].same_as == "big_en_de"
    zh_en = {name for name, e in paper.items() if e.dataset == "wmt17_zh_en"}
    metrics = {config["tables"][t]["metric"] for t in owned["B"]["tables"]
               if any(c["experiment"] in zh_en for c in config["tables"][t]["cells"])}
    metrics |= {config["claims"][c]["metric"] for c in owned["B"]["claims"] if config["claims"][c]["experiment"] in zh_en}
    assert metrics == {"sacrebleu"}


def recipe(e) -> dict:
    """An experiment's training settings but the checkpoints it keeps for the central claims' budgets."""
    return {key: value for key, value in e.train.items() if key != "keep_steps"}


def test_paper_b_reads_each_claim_against_a_baseline_continued_as_long():
    """At paper scale a paper B variant starts from its trained baseline and trains the full recipe again;
    each claim against a baseline has a twin against that baseline continued as long (same model, start
    and recipe), at tiny too, where both continue the scale's 300 updates."""
    config, owned = load(REPO / "config.yaml")
    validate(config, SCHEMA)
    paper, tiny = (experiments({**config, "scale": scale}) for scale in ("paper", "tiny"))
    claims = {name: config["claims"][name] for name in owned["B"]["claims"]}
    against_baseline = {n: c for n, c in claims.items() if paper[c["baseline"]].init is None}
    assert len(against_baseline) == 8
    for name, claim in against_baseline.items():
        twin = claims[f"{name}_continued"]
        assert (twin["experiment"], twin["paper_delta"]) == (claim["experiment"], claim["paper_delta"])
        control, baseline, variant = paper[twin["baseline"]], paper[claim["baseline"]], paper[claim["experiment"]]
        assert control.init == baseline.name == variant.init and control.model == baseline.model
        assert control.train == baseline.train == variant.train
        control, variant = tiny[twin["baseline"]], tiny[claim["experiment"]]
        assert control.init == variant.init == claim["baseline"] and recipe(control) == recipe(variant)
    note = protocol_note(config, paper, ["biarn_en_de", "hao_base_en_de_continued", "hao_base_en_de"])
    assert "started from the trained hao_base_en_de, then 100,000 updates" in note and "`init_from`" in note
    assert "trained from scratch, 100,000 updates of at least 25,000 target tokens: hao_base_en_de" in note
    assert "init_from" not in protocol_note(config, paper, ["base_en_de"])


def test_a_model_size_may_set_its_own_training_resources_and_schedule():
    """Paper C's GRU models train on one GPU with a constant learning rate at paper scale, the
    Transformers on the scale's four with the inverse-sqrt decay; a size's unknown resource fails."""
    config = repo_config()
    validate(config, SCHEMA)
    paper = experiments({**config, "scale": "paper"})
    assert paper["npmt_greedy_de_en"].resources["gpu"] == paper["ll_greedy_de_en"].resources["gpu"] == 1
    assert paper["npmt_greedy_de_en"].train["schedule"] == "constant"
    assert paper["base_en_de"].resources["gpu"] == 4 and paper["base_en_de"].train["schedule"] == "inverse_sqrt"
    assert paper["npmt_greedy_de_en"].resources["mem_mb"] == paper["base_en_de"].resources["mem_mb"]
    config["scales"]["paper"]["by_size"]["npmt"]["resources"]["gpus"] = 1
    with pytest.raises(Exception, match="gpus"):
        validate(config, SCHEMA)


def test_seed_replicates_resolve_to_distinct_trainings_each_from_its_own_seeds_start():
    config = repo_config()
    validate(config, SCHEMA)
    tiny = experiments(config)
    assert replicates(tiny)["pr_en_de"] == ["pr_en_de", "pr_en_de_seed2", "pr_en_de_seed3"]
    assert [tiny[name].train["seed"] for name in replicates(tiny)["pr_en_de"]] == [1, 2, 3]
    assert len({tiny[name].same_as or name for name in replicates(tiny)["pr_en_de"]}) == 3  # three trainings
    assert tiny["d_base_en_de_seed2"].same_as == "base_en_de_seed2"   # paper D's Base seeds are paper A's
    assert tiny["ll_beam_de_en_seed3"].same_as == "ll_greedy_de_en_seed3"  # one model decoded twice, per seed
    assert seed_pairs(tiny, "pr_en_de", "base_en_de") == [("pr_en_de", "base_en_de"),
                                                           ("pr_en_de_seed2", "base_en_de_seed2"),
                                                           ("pr_en_de_seed3", "base_en_de_seed3")]
    assert seed_pairs(tiny, "mean_en_de", "base_en_de") == [("mean_en_de", "base_en_de")]  # the seed they share
    assert set(replicates(experiments({**config, "scale": "ci"}))["base_en_de"]) == {"base_en_de", "base_en_de_seed2"}
    config["experiments"]["biarn_en_de"]["seeds"] = [1, 4]
    with pytest.raises(InputError, match="experiments.biarn_en_de: its seed 4 starts from 'hao_base_en_de', "
                                         "which trains no seed 4"):
        experiments(config)
    config["experiments"]["biarn_en_de"]["seeds"] = [1, 2]
    config["experiments"]["mean_en_de"]["seeds"] = [5]
    with pytest.raises(InputError, match=r"baseline = 'base_en_de' trains seeds \[1, 2, 3\], but 'mean_en_de' seeds \[5\]"):
        experiments(config)


def test_a_models_options_may_differ_by_scale():
    config = repo_config()
    config["models"]["rec_at_scale"] = {"family": "diverse", "size": "base", "rec_heads": 1,
                                        "by_scale": {"paper": {"rec_heads": 2}}}
    config["experiments"]["rec_at_scale_en_de"] = {"model": "rec_at_scale", "task": "en-de"}
    validate(config, SCHEMA)
    assert experiments(config)["rec_at_scale_en_de"].model["rec_heads"] == 1
    config["scale"] = "paper"
    assert experiments(config)["rec_at_scale_en_de"].model["rec_heads"] == 2
    config["models"]["rec_at_scale"]["by_scale"]["papr"] = {}
    with pytest.raises(InputError, match=r"models.rec_at_scale.by_scale = 'papr' is not defined"):
        experiments(config)


def test_experiments_with_the_same_training_train_once(tmp_path):
    """A second experiment that resolves to base_en_de's training (same data, model, regime and start)
    is `same_as` it at both scales, and the workflow links base_en_de's translations (and models, when
    something reads them) instead of training and decoding again."""
    config = repo_config()
    config["experiments"]["again_en_de"] = {"model": "transformer_base", "task": "en-de"}
    validate(config, SCHEMA)
    for scale in ("tiny", "paper"):
        resolved = experiments({**config, "scale": scale})
        assert resolved["again_en_de"].same_as == "base_en_de" and resolved["base_en_de"].same_as is None
        assert resolved["pr_en_de"].same_as is None
    out = snakemake(workdir(tmp_path, config), "-n", "results/ci/evaluate/again_en_de/test_2016_flickr.bleu.json",
                    "results/ci/analyse/speed/again_en_de.json")  # speed reads the model too
    assert out.returncode == 0, out.stderr[-3000:]
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", out.stdout, re.M))
    assert jobs["train"] == "1" and jobs["decode"] == "1"  # base_en_de's
    assert jobs["shared_training"] == "1" and jobs["shared_decode"] == "1"


def test_paper_d_shares_the_trainings_that_coincide_at_each_scale():
    config = repo_config()
    validate(config, SCHEMA)
    tiny = experiments(config)        # D's Table I sizes are 1 of tiny's 4 heads; Zh-En is Tatoeba for all
    assert tiny["rec_1_head_en_de"].same_as == "rec_en_de" and tiny["rec_2_heads_en_de"].same_as is None
    assert tiny["rel_pe_en_de"].same_as is None                   # Shaw et al.'s shared tables, not paper B's per head
    assert tiny["d_base_en_de"].same_as == "base_en_de"             # no regime of D's own at tiny: paper A's training
    assert tiny["base_zh_en_nist03"].same_as == "base_zh_en" and tiny["fusing_zh_en_nist05"].same_as == "fusing_zh_en_nist03"
    assert tiny["fusing_en_de"].model["rec_heads"] == 1
    paper = experiments({**config, "scale": "paper"})
    assert paper["rec_2_heads_en_de"].same_as == "rec_en_de" and paper["syn_3_heads_en_de"].same_as == "syn_en_de"
    assert paper["rel_pe_en_de"].same_as is None                  # from scratch; paper B's starts from Base
    assert paper["fusing_zh_en_nist05"].same_as == "fusing_zh_en_nist03"
    assert paper["fusing_zh_en_nist03"].dataset == "nist_zh_en" and paper["fusing_zh_en_nist05"].test == "nist05"
    assert paper["fusing_en_de"].model["rec_heads"] == 2 and paper["big_fusing_en_de"].model["rec_heads"] == 4


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["experiments"]["mean_en_de"].update(init_from="base_en_fr"), "trains on multi30k_en_fr"),
    (lambda c: c["experiments"]["mean_en_de"].update(init_from="big_en_de"), "lacks or shapes differently"),
    (lambda c: c["experiments"]["mean_en_de"].update(init_from="biarn_en_de"), "itself starts from another"),
    (lambda c: c["experiments"].update(pr_en_de_seed2={"model": "transformer_base", "task": "en-de"}),
     "the name is taken by seed 2 of experiments.pr_en_de.seeds"),
    (lambda c: c["scales"]["tiny"]["continuation"].update(max_update=3), "tiny.continuation key = 'max_update'"),
    (lambda c: c["claims"]["mean"].update(baseline="base_en_fr"), "claims.mean.baseline"),
    (lambda c: c["claims"]["mean"].update(paper_delta=0), "claims.mean.paper_delta: 0 gives"),
    (lambda c: c["claims"]["fusing_heads_diverse"].update(analysis="D_table7"), "an analysis of kind 'head_similarity'"),
    (lambda c: c["claims"]["npmt_phrases"].pop("scales"), r"its analysis C_table2 is not built at \['ci', 'tiny'\]"),
    (lambda c: c["claims"]["mean"].update(analysis="D_table4"), "claims.mean.analysis: only a claim on a quantity"),
    (lambda c: c["claims"]["mean"].update(metric="comet"), "claims.mean.metric = 'comet' is not defined"),
    (lambda c: c["tables"]["A_tiny_gap"].update(scales=["tinny"]), "tables.A_tiny_gap.scales"),
    (lambda c: c["tables"]["C_table1"]["cells"][2].update(scales=["papr"]), r"tables.C_table1.cells\[2\].scales"),
    (lambda c: c["scales"]["tiny"].update(leave_out=["D_figure9"]), "scales.tiny.leave_out = 'D_figure9'"),
])
def test_bad_starts_seeds_and_claims_are_named(edit, message):
    config = repo_config()
    validate(config, SCHEMA)
    edit(config)
    with pytest.raises(InputError, match=message):
        experiments(config)


def test_a_claim_of_no_gain_takes_half_the_smallest_gain_its_paper_calls_a_help():
    """The margins are fixed by one rule before any result (docs/statistics.md): paper C calls the LM's
    +0.20 a help, so its claims of no gain take 0.10; paper B's smallest gain is the stack's +0.09."""
    config, owned = load(REPO / "config.yaml")
    margins = no_gain_margins(config, owned)
    assert margins == {"reorder_hurts_ll_greedy": 0.1, "reorder_hurts_ll_beam": 0.1, "steps_16_vs_8": 0.045}
    with pytest.raises(InputError, match="claims.reorder_hurts_ll_beam: a claim of no gain takes half"):
        no_gain_margins(config, {"C": {"claims": ["reorder_hurts_ll_beam"]}})


def test_unknown_model_family_and_option_are_named():
    config = repo_config()
    config["models"]["transformer_base"]["family"] = "transfomer"
    validate(config, SCHEMA)  # the schema holds no list of families: the registry is the one list
    with pytest.raises(InputError, match=r"models.transformer_base.family = 'transfomer' is not defined"):
        experiments(config)
    config["models"]["transformer_base"].update(family="transformer", dropuot=0.3)
    with pytest.raises(InputError, match=r"models.transformer_base.dropuot: family 'transformer' has no such"):
        experiments(config)


def test_each_paper_file_is_merged_once_and_owns_its_tables(tmp_path):
    config, owned = load(REPO / "config.yaml")
    assert owned["A"]["tables"] == ["A_table1", "A_table2", "A_tiny_gap", "A_code_forms"]
    assert {"A_figure3", "A_length_forms"} <= set(owned["A"]["analyses"])
    assert owned["B"]["tables"] == ["B_table1", "B_table2", "B_table3", "B_table3_zh_en", "B_table4", "B_figure5"]
    assert "B_table5" in owned["B"]["analyses"] and "pr_en_de" in config["experiments"]
    assert "base_en_de" not in owned["A"]["experiments"]  # the shared baseline lives in config.yaml

    (tmp_path / "X.yaml").write_text("experiments:\n  base_en_de: {model: transformer_base, task: en-fr}\n")
    with pytest.raises(InputError, match=r"X.yaml: experiments.base_en_de is already defined"):
        merge_papers({"papers": ["X.yaml"], "experiments": {"base_en_de": {}}}, tmp_path)
    (tmp_path / "Y.yaml").write_text("scales: {}\n")
    with pytest.raises(InputError, match=r"Y.yaml: unknown section 'scales'"):
        merge_papers({"papers": ["Y.yaml"]}, tmp_path)


def test_an_analysis_kind_needs_a_rule_file_and_its_languages():
    config = repo_config()
    validate(config, SCHEMA)
    kinds = analysis_kinds(rule_files(REPO, "analyses"))
    check_analysis_kinds(config, kinds)
    config["analyses"]["D_figure4"]["kind"] = "length_bucket"
    with pytest.raises(InputError, match=r"analyses.D_figure4.kind = 'length_bucket' is not defined"):
        check_analysis_kinds(config, kinds)

    config = repo_config()
    validate(config, SCHEMA)
    assert {kind: own["languages"] for kind, own in kinds.items() if "languages" in own} == {
        "agreement": {"src": "en", "tgt": "de"}, "probing": {"src": "en"}}  # each in its own <kind>.schema.yaml
    config["analyses"]["B_table5"]["systems"][0]["experiment"] = "base_en_fr"
    check_languages(config, experiments(config), kinds)  # probing needs an English source only
    config["analyses"]["A_figure4"]["systems"][0]["experiment"] = "base_en_fr"
    with pytest.raises(InputError, match=r"analyses.A_figure4.systems\[0\].experiment = 'base_en_fr' translates "
                                         r"en->fr; the agreement analysis needs en->de"):
        check_languages(config, experiments(config), kinds)


def test_a_systems_keys_beyond_the_common_ones_are_its_kinds():
    """head_similarity's `groups` (its <kind>.schema.yaml `system_properties`) on its own systems, refused on
    another kind's, by key."""
    config = repo_config()
    config["analyses"]["D_table4"]["systems"][0]["groups"] = ["Global"] * 4
    validate(config, SCHEMA)
    config["analyses"]["A_figure3"]["systems"][0]["groups"] = ["Global"]
    with pytest.raises(InputError, match=r"analyses.A_figure3.systems.0: Additional properties are not allowed "
                                         r"\('groups' was unexpected\)"):
        validate(config, SCHEMA)


TOY_KIND = """ANALYSIS_OUTPUTS["toy_counts"] = TABLE


rule toy_counts:
    input:
        unpack(system_inputs(lambda a, s: evaluated(s["experiment"], "decode.json"))),
    output:
        **report_outputs("Toy counts", "../../report/toy_counts.rst", ANALYSIS_OUTPUTS["toy_counts"]),
    log:
        results("logs/report/{analysis}.log"),
    wildcard_constraints:
        analysis=analyses_of("toy_counts"),
    conda:
        CONDA_ENV
    params:
        systems=system_args(lambda s, input, i: input[f"sys{i}"]),
        top=lambda w: ANALYSES[w.analysis]["top"],
        lines=SCALE["toy_lines"],
    shell:
        "nmtrepro toy-counts {params.systems} --top {params.top} --lines {params.lines} --out-md {output.md} "
        "--out-html {output.html} 2> {log}"
"""
TOY_OPTIONS = """description: the commonest output words of each system (table)
languages: {src: en, tgt: de}
properties:
  top: {type: integer, minimum: 1, default: 5, description: words shown per system}
scale_properties:
  toy_lines: {type: integer, minimum: 1, default: 2, description: sentences each system's words come from}
"""


def test_a_new_analysis_kind_is_its_rule_file_and_a_config_entry_on_the_workflow_side(tmp_path):
    """The walkthrough of docs/organisation.md: a kind's rule file under workflow/rules/analyses/, its
    languages, options and scale key beside it and an analysis naming it are all the workflow needs (its
    module, whose COMMANDS the CLI reads, and its caption are the package's side): the `tables` target then
    builds it, its option's and scale key's defaults filled in, with no other rule file, schema or check
    edited; another kind's option is refused, and so is a system translating other languages than the kind
    declares."""
    work = repo_copy(tmp_path)
    (work / "workflow/rules/analyses/toy_counts.smk").write_text(TOY_KIND)
    (work / "workflow/rules/analyses/toy_counts.schema.yaml").write_text(TOY_OPTIONS)
    paper = work / "config/papers/A.yaml"
    spec = yaml.safe_load(paper.read_text())
    spec["analyses"]["A_toy"] = {"kind": "toy_counts", "title": "Toy",
                                 "systems": [{"label": "Base", "experiment": "base_en_de"}]}
    paper.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    run = snakemake(work, "-n", "-p", "tables")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "nmtrepro toy-counts --system Base=results/ci/evaluate/base_en_de/" in run.stdout
    assert "--top 5 --lines 2 --out-md results/ci/report/A_toy.md" in run.stdout
    spec["analyses"]["A_toy"]["edges"] = [15]  # length_buckets' option
    paper.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    refused = snakemake(work, "-n", "tables")
    assert refused.returncode != 0 and "analyses.A_toy: Additional properties are not allowed ('edges'" in refused.stdout + refused.stderr
    del spec["analyses"]["A_toy"]["edges"]
    spec["analyses"]["A_toy"]["systems"][0]["experiment"] = "base_en_fr"
    paper.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    refused = snakemake(work, "-n", "tables")
    assert refused.returncode != 0 and ("analyses.A_toy.systems[0].experiment = 'base_en_fr' translates en->fr; "
                                        "the toy_counts analysis needs en->de") in refused.stdout + refused.stderr


def repo_copy(tmp_path: Path) -> Path:
    """A copy of the workflow with the repository's own config.yaml and paper files (data linked)."""
    work = tmp_path / "wf"
    work.mkdir()
    for name in ("Snakefile", "config.yaml"):
        shutil.copy(REPO / name, work)
    for folder in ("workflow", "config", "profiles", "envs"):
        shutil.copytree(REPO / folder, work / folder)
    (work / "data").symlink_to(REPO / "data")
    return work


def rule_edges(work: Path, scale: str) -> set[tuple[str, str]]:
    """(upstream rule, downstream rule) pairs of the rule graph at `scale` (no job runs, no network)."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "--rulegraph", "--config", f"scale={scale}"],
                         cwd=work, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    names = dict(re.findall(r'^\s*(\d+)\[label = "(\w+)"', out.stdout, re.M))
    return {(names[a], names[b]) for a, b in re.findall(r"^\s*(\d+) -> (\d+)$", out.stdout, re.M)}


def test_paper_scale_fetches_stanza_models_before_parsing_and_ci_does_not(tmp_path):
    work = repo_copy(tmp_path)
    paper = rule_edges(work, "paper")
    assert ("stanza_models", "parse") in paper                       # parse takes the models' record
    assert {b for a, b in paper if a == "stanza_models"} <= {"parse", "pos", "probe", "contrastive"}
    assert not any("stanza_models" in edge for edge in rule_edges(work, "ci"))  # spaCy at ci: nothing to fetch


def test_only_tables_with_parser_phrase_cells_name_the_parser(tmp_path):
    out = snakemake(repo_copy(tmp_path), "-n", "-p", "paper_A")
    assert out.returncode == 0, out.stderr[-3000:]
    tables = {m.group(1): m.group(0) for m in re.finditer(r"nmtrepro table .*--out-md results/ci/report/(\w+)\.md.*",
                                                          out.stdout)}
    assert {"A_table1", "A_table2"} <= tables.keys()
    stats = {name: page_inputs(tables[name])["annotation_stats"] for name in ("A_table1", "A_table2")}
    assert "results/ci/parse/multi30k_en_de/train.stats.json" in stats["A_table2"]["spans"]  # +PR_parse's trees
    assert stats["A_table1"] == {}


def test_a_paper_target_builds_only_that_papers_outputs(tmp_path):
    work = repo_copy(tmp_path)
    out = snakemake(work, "-n", "paper_B")
    assert out.returncode == 0, out.stderr[-3000:]
    text = out.stdout + out.stderr
    assert "results/ci/report/B_table5.md" in text and "A_table1" not in text and "D_table7" not in text


def test_the_default_run_at_tiny_is_the_central_study_and_tables_builds_every_table(tmp_path):
    """`snakemake` alone at tiny trains each paper's central claim over three seeds and builds what those
    models fill, nothing else; `tables` builds every table, with no NPMT (it trains at paper scale only)."""
    config = repo_config()
    validate(config, SCHEMA)
    central = central_study(config, experiments(config))
    assert central == {"claims": ["pr_base_en_de", "biarn_base_en_de_continued", "reorder_hurts_ll_beam", "fusing_en_de"],
                       "tables": ["C_table1", "C_gain"], "analyses": ["B_warm_start", "D_table4"]}
    work = repo_copy(tmp_path)
    texts = {}
    for target in ([], ["tables"]):
        out = subprocess.run([sys.executable, "-m", "snakemake", "-n", *target, "--config", "scale=tiny"], cwd=work,
                             capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-3000:]
        texts[bool(target)] = out.stdout + out.stderr
    jobs = dict(re.findall(r"^(\w+)\s+(\d+)$", texts[False], re.M))
    trained = set(re.findall(r"Training (\S+) \(", texts[False]))  # rule train's message
    assert jobs["train"] == "21" and trained == {f"{name}{seed}" for seed in ("", "_seed2", "_seed3") for name in (
        "base_en_de", "pr_en_de", "fusing_en_de", "biarn_en_de", "hao_base_en_de_continued", "ll_greedy_de_en",
        "ll_reorder_greedy_de_en")}
    assert "results/tiny/report/central_claims.md" in texts[False] and "A_table1" not in texts[False]
    assert "results/tiny/report/A_table1.md" in texts[True] and "results/tiny/train/npmt" not in texts[True]
    tests = set(re.findall(r"analyse/significance/(\w+)\.vs\.(\w+)\.json", texts[True]))
    assert tests and all(system != baseline for system, baseline in tests)  # a baseline's own row is not tested


def test_smoke_leaves_out_the_heads_sweep_that_paper_scale_builds():
    """smoke runs the paper scale's study but leaves out paper D's Fig. 3 sweep (15 more trainings of one
    family through rules the other tables run); NPMT's rows exist at both, not below."""
    config = repo_config()
    validate(config, SCHEMA)
    smoke, paper, tiny = (tables_at_scale({**config, "scale": scale}) for scale in ("smoke", "paper", "tiny"))
    assert "D_figure3_paper" in paper and "D_figure3_paper" not in smoke and set(paper) - set(smoke) == {"D_figure3_paper"}
    npmt = lambda tables: [c["experiment"] for c in tables["C_table1"]["cells"] if c["experiment"].startswith("npmt")]
    assert npmt(smoke) == npmt(paper) == ["npmt_greedy_de_en", "npmt_beam_de_en", "npmt_lm_beam_de_en"] and not npmt(tiny)


def test_a_diagnostic_table_is_built_by_its_own_target_at_its_scales_only(tmp_path):
    # A_tiny_gap is a diagnostic of tiny scale: ci, not among its scales, builds nothing of it.
    work = repo_copy(tmp_path)
    out = snakemake(work, "-n", "diagnostics_A")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "A_tiny_gap" not in out.stdout + out.stderr
    paper = work / "config/papers/A.yaml"
    paper.write_text(paper.read_text().replace("scales: [tiny]\n    diagnostic: true", "scales: [ci]\n    diagnostic: true"))
    texts = {}
    for target in ("paper_A", "diagnostics_A"):
        out = snakemake(work, "-n", target)
        assert out.returncode == 0, out.stderr[-3000:]
        texts[target] = out.stdout + out.stderr
    assert "results/ci/report/A_tiny_gap.md" in texts["diagnostics_A"] and "pr_token_en_de" in texts["diagnostics_A"]
    # paper_A's own jobs only (the default profile prints shell commands, and A_table2's note names the table)
    assert "report/A_tiny_gap" not in texts["paper_A"] and "train/pr_token_en_de" not in texts["paper_A"]


def test_an_unknown_model_name_is_named():
    config = repo_config()
    validate(config, SCHEMA)
    config["experiments"]["base_en_de"]["model"] = "transformer_bsae"
    with pytest.raises(InputError, match=r"experiments.base_en_de.model = 'transformer_bsae' is not defined"):
        experiments(config)


@pytest.mark.parametrize("model, change, message", [
    ("phrase_max", {"glance": "median"}, r"models.phrase_max: glance must be 'mean' or 'max'"),
    ("transformer_base", {"d_model": 30, "heads": 4}, r"models.transformer_base: d_model=30 is not divisible"),
])
def test_option_values_the_family_rejects_are_named(model, change, message):
    config = repo_config()
    validate(config, SCHEMA)
    config["models"][model].update(change)
    with pytest.raises(InputError, match=message):
        experiments(config)


def test_keeping_fewer_checkpoints_than_averaged_is_named():
    config = repo_config()
    validate(config, SCHEMA)
    config["scale"] = "ci"
    config["scales"]["ci"]["train"]["keep_last"] = 1
    with pytest.raises(InputError, match=r"scales.ci.train.keep_last = 1 .* average.last = 2"):
        experiments(config)


def test_a_missing_dataset_file_is_named():
    config = repo_config()
    validate(config, SCHEMA)
    check_dataset_files(config, experiments(config), REPO)
    assert REPO / "data/multi30k/train.en.gz" in dataset_files(config, "multi30k_en_de", REPO)
    config["datasets"]["multi30k_en_de"]["splits"]["valid"]["tgt"] = "data/multi30k/vall.de.gz"
    with pytest.raises(InputError, match=r"datasets.multi30k_en_de.splits.valid.tgt: .*vall.de.gz does not exist"):
        check_dataset_files(config, experiments(config), REPO)


@pytest.mark.parametrize("scale", ["ci", "tiny", "gpu", "smoke", "paper"])
def test_every_table_cell_has_its_line_in_the_papers_numbers_and_a_missing_one_is_named(scale):
    config = repo_config()
    config["scale"] = scale
    validate(config, SCHEMA)
    check_paper_cells(config, REPO)  # the repository's tables, each at every scale it is built at
    cell = config["tables"]["A_code_forms"]["cells"][2]
    cell["row"] = "+PR as printed, a row the paper file lacks"
    with pytest.raises(InputError, match=r"tables.A_code_forms.cells\[2\]: \(\+PR as printed, a row .*A_code_forms.tsv"):
        check_paper_cells(config, REPO)


def test_local_corpus_files_count_as_dataset_files(tmp_path):
    config = repo_config()
    validate(config, SCHEMA)
    spec = {"kind": "download", "src": "zh", "tgt": "en", "local": ["ldc"], "downloads": ["wmt17_dev"],
            "splits": {"train": {"src": ["ldc:a.zh", "wmt17_dev:dev/x.zh"], "tgt": ["ldc:a.en", "data/wmt/y.en"]}}}
    config["datasets"]["toy"], config["local_data"] = spec, {"ldc": str(tmp_path)}
    assert dataset_files(config, "toy", REPO) == [tmp_path / "a.zh", tmp_path / "a.en", REPO / "data/wmt/y.en"]


@pytest.mark.parametrize("edit, message", [
    (lambda c: c["models"]["phrase_max"].update(glance="median"), "models.phrase_max: glance must be"),
    (lambda c: c["datasets"]["multi30k_en_de"]["splits"]["valid"].update(tgt="data/multi30k/vall.de.gz"),
     "datasets.multi30k_en_de.splits.valid.tgt"),
    (lambda c: c["scales"]["ci"]["train"].update(fast="graphs"), "scales.ci.train.fast = 'graphs': replays a few"),
])
def test_bad_values_fail_the_dry_run_naming_the_key(tmp_path, edit, message):
    config = repo_config()
    edit(config)
    result = snakemake(workdir(tmp_path, config), "-n")
    assert result.returncode != 0
    assert message in result.stdout + result.stderr


def test_an_edited_data_file_is_fetched_again(tmp_path):
    work = workdir(tmp_path, repo_config())
    (work / "data").unlink()  # multi30k copied, to be edited; the other data the experiments read linked
    (work / "data").mkdir()
    for entry in (REPO / "data").iterdir():
        if entry.name == "multi30k":
            shutil.copytree(entry, work / "data" / entry.name)
        else:
            (work / "data" / entry.name).symlink_to(entry)
    target = "results/ci/data/multi30k_en_de/manifest.json"
    assert snakemake(work, target).returncode == 0
    assert "Nothing to be done" in snakemake(work, "-n", target).stdout
    time.sleep(0.05)
    with open(work / "data/multi30k/val.de.gz", "ab") as handle:
        handle.write(b"edited")
    assert re.search(r"^fetch\s+1$", snakemake(work, "-n", target).stdout, re.M)  # the job stats list it


def test_a_parser_phrase_system_runs_in_head_similarity_probing_and_contrastive(tmp_path):
    config = repo_config()
    for analysis in ("D_table4", "B_table5", "A_figure4"):
        config["analyses"][analysis]["systems"].append({"label": "parser phrases", "experiment": "parse_en_de"})
    out = snakemake(workdir(tmp_path, config), "-n", "-p")
    assert out.returncode == 0, out.stderr[-3000:]
    commands = [line for line in out.stdout.splitlines() if "parse_en_de" in line and "nmtrepro" in line]
    heads = next(c for c in commands if "head-similarity" in c)  # the test set's spans from the parse stage
    assert "--annotation spans=results/ci/parse/multi30k_en_de/test/test_2016_flickr.spans" in heads
    for command in ("nmtrepro probe", "nmtrepro contrastive"):  # their sentences are parsed on the fly
        assert "--parse-backend" in next(c for c in commands if command in c)


def test_bad_config_fails_the_dry_run_naming_the_key(tmp_path):
    config = repo_config()
    config["scales"]["ci"]["train"]["lr"] = "fast"
    result = snakemake(workdir(tmp_path, config), "-n")
    assert result.returncode != 0
    assert "scales.ci.train.lr: 'fast' is not of type 'number'" in result.stdout + result.stderr


def test_config_values_given_on_the_command_line_are_typed_by_the_schema(tmp_path):
    """Snakemake reads a nested --config entry's values as strings: the schema's numbers and booleans
    are read from them, as docs/paper-scale.md's `max_tokens` override needs."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "results/ci/train/base_en_de/final.pt",
                          "--config", "scale=ci", "scales={ci: {train: {max_updates: 40, max_tokens: 8192}}}",
                          "offline=true"], cwd=workdir(tmp_path, repo_config()), capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]
    assert '"max_updates": 40,' in out.stdout and '"max_tokens": 8192,' in out.stdout


def test_what_only_a_user_provides_fails_the_dry_run_of_the_target_that_needs_it(tmp_path):
    """A paper-scale target needing NIST's licensed folder, or offline a download not in the cache,
    fails `snakemake -n` naming the key to set; a target needing neither runs."""
    work = repo_copy(tmp_path)

    def dry(*args) -> tuple[int, str]:
        out = subprocess.run([sys.executable, "-m", "snakemake", "-n", *args], cwd=work, capture_output=True, text=True)
        return out.returncode, out.stdout + out.stderr

    code, text = dry("paper_D", "--config", "scale=paper")
    assert code != 0 and "set local_data: {ldc_zh_en: /path/to/folder}" in text
    code, text = dry("paper_C", "--config", "scale=paper", "offline=true", f"download_cache={tmp_path}/cache")
    assert code != 0 and "config offline: true) and not in the cache" in text and "iwslt14_de_en" in text
    code, text = dry("paper_A", "--config", "scale=paper")
    assert code == 0, "paper A reads neither"
    # `shards: auto`: WMT14 En-De's 4.5M sources at stanza's assumed rate, ~6 h a job (data.costs)
    assert "Parsing shard 1 of 32 of the source of wmt14_en_de train" in text


def test_the_own_corpus_overlay_of_the_docs_dry_runs_and_a_file_without_its_checksum_fails_it(tmp_path):
    """docs/own-corpus.md's worked example as a reader follows it: the files and their SHA256SUMS (its
    command), its overlay, its dry run. A file missing from SHA256SUMS, or no SHA256SUMS at all, fails the
    dry run naming the file and the key that reads it, not the fetch job once the run has started."""
    doc = (REPO / "docs/own-corpus.md").read_text()
    work = repo_copy(tmp_path)
    corpus = work / "corpus/en-es"
    corpus.mkdir(parents=True)
    for split in ("train", "valid", "test"):
        for side in ("en", "es"):
            (corpus / f"{split}.{side}").write_text("".join(f"{split} sentence {i} ({side})\n" for i in range(20)))
    subprocess.run(re.search(r"^cd corpus/en-es && (.*)$", doc, re.M)[1], shell=True, cwd=corpus, check=True)
    (work / "my.yaml").write_text(re.search(r"```yaml\n(.*?)```", doc, re.S)[1])

    def dry() -> subprocess.CompletedProcess:
        args = re.search(r"^snakemake -n (.*)$", doc, re.M)[1].split()
        return subprocess.run([sys.executable, "-m", "snakemake", "-n", *args], cwd=work, capture_output=True, text=True)

    run = dry()
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert re.search(r"^fetch\s+1$", run.stdout, re.M) and re.search(r"^train\s+6$", run.stdout, re.M)
    assert "--tgt-lang es" in run.stdout
    sums = corpus / "SHA256SUMS"
    sums.write_text("".join(line + "\n" for line in sums.read_text().splitlines() if not line.endswith("valid.es")))
    run = dry()
    assert run.returncode != 0
    assert f"datasets.my_en_es.splits.valid.tgt: {corpus.resolve()}/valid.es is not listed in {sums.resolve()}" in run.stdout + run.stderr
    sums.unlink()
    run = dry()
    assert run.returncode != 0
    assert f"datasets.my_en_es.splits.train.src: no SHA256SUMS file above {corpus.resolve()}/train.en" in run.stdout + run.stderr


def finished_run_of(work: Path, scale: str) -> dict[Path, bytes]:
    """Stand-ins for a finished run of `scale` in `work`: a file (its own path as its bytes; a gap table
    empty) at every output the scale's default target lists (`snakemake --summary`), by path."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "--summary", "--nolock", "--config", f"scale={scale}"],
                         cwd=work, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    files = {}
    for line in out.stdout[out.stdout.index("output_file\t"):].splitlines()[1:]:
        path = work / line.split("\t")[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        # a claims page's gap table as one with no curve; any other file its own path
        stand_in = "claim\tstep\tpair\tdelta\n" if path.name.endswith(".gap.tsv") else f"{scale} run: {path.name}"
        path.write_bytes(files.setdefault(path, stand_in.encode()))
    return files


def page_inputs(command: str) -> dict:
    """The inputs document of a claims or table command as a dry run prints it (`--inputs`)."""
    words = shlex.split(command)
    return json.loads(words[words.index("--inputs") + 1])


def test_another_scales_results_bring_the_claims_pages_across_scales(tmp_path):
    """With another scale's tests in the checkout (a synthetic tiny tree of the central claims' JSONs),
    the ci run adds each claims page across scales, its claims at ci beside those at tiny; without
    them, none."""
    work = repo_copy(tmp_path)
    alone = snakemake(work, "-n", "tables")
    assert alone.returncode == 0 and "across_scales" not in alone.stdout
    config = repo_config()
    tree = work / "results/tiny/analyse/significance"
    tree.mkdir(parents=True)
    for claim in (config["claims"][name] for name in central_claims({**config, "scale": "tiny"})):
        (tree / f"{claim['experiment']}.vs.{claim['baseline']}.json").write_text("{}")
    run = snakemake(work, "-n", "-p", "tables")
    assert run.returncode == 0, run.stderr[-3000:]
    command = next(line for line in run.stdout.splitlines() if "--out-md results/ci/report/central_claims_across_scales.md" in line)
    across = page_inputs(command)
    assert [len(across["claims"][scale]) for scale in ("ci", "tiny")] == [4, 4]
    assert across["claims"]["tiny"]["pr_base_en_de"]["significance"] == (
        "results/tiny/analyse/significance/pr_en_de.vs.base_en_de.json")
    assert [len(across["pool"][scale]) for scale in ("ci", "tiny")] == [4, 4] and len(across["primary"]) == 4
    assert "results/ci/report/A_claims_across_scales.md" in run.stdout      # A's central claim is on its page
    # a claim field: the Claim field and the schema's key of the same name are all it takes (organisation.md)
    claims_page = next(line for line in run.stdout.splitlines() if "--out-md results/ci/report/B_claims.md" in line)
    assert '"text": "stack beats gated sum (top layer)", "paper_delta": 0.09' in claims_page
    assert '"paper_says": "marginally"' in claims_page
    # a claim on a length bucket reads its own test, on the sentences over 45 tokens, and draws no curve
    claims_a = next(line for line in run.stdout.splitlines() if "--out-md results/ci/report/A_claims.md" in line)
    assert '"significance": "results/ci/analyse/significance/pr_en_de.vs.big_en_de.longer_than_45.json"' in claims_a
    inputs = page_inputs(claims_a)
    curved = [inputs["claims"][name]["text"] for name in inputs["curves"]]
    assert "--longer-than 45" in run.stdout and any(text.startswith("+PR improves") for text in curved)
    assert not any(text.startswith("On sources over 45") for text in curved)
    # claims on a quantity pool their seed noise over the same quantity measured on their paper's central
    # comparison (paper D: the probing tasks and head similarity on +Fusing against Base); no other page asks
    claims_d = page_inputs(next(line for line in run.stdout.splitlines() if "--out-md results/ci/report/D_claims.md" in line))
    measured = {name: path for name, path in claims_d["pool"].items() if name not in across["pool"]["ci"]}
    assert set(measured) == {f"fusing_en_de, {quantity}" for quantity in (
        "head_similarity", "probe_tree_depth", "probe_top_constituents", "probe_bigram_shift", "probe_subj_number")}
    assert measured["fusing_en_de, probe_subj_number"] == (
        "results/ci/analyse/D_table7/fusing_en_de.vs.d_base_en_de.probe_subj_number.json")
    assert page_inputs(claims_a)["pool"] == across["pool"]["ci"]
    fields = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    assert set(GIVEN) <= set(fields["properties"]["claims"]["additionalProperties"]["properties"])


def test_ci_workflow_end_to_end_with_report(tmp_path):
    work = repo_copy(tmp_path)  # the paper files as they are: each paper's target and claims page
    tiny = finished_run_of(work, "tiny")  # a finished default run beside it: the ci run leaves it as it was
    run = snakemake(work)
    assert run.returncode == 0, run.stderr[-3000:]
    assert len(tiny) > 200 and {path: path.read_bytes() for path in tiny} == tiny
    results = work / "results/ci"
    for exp_name, lang in (("base_en_de", "de"), ("base_en_fr", "fr")):
        bleu = json.loads((results / f"evaluate/{exp_name}/test_2016_flickr.bleu.json").read_text())
        assert bleu["sacrebleu"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
        assert bleu["tok_bleu"]["signature"].startswith("nrefs:1|case:mixed|eff:no|tok:none")
        for key, name, signature in (("chrf", "chrF2", "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no"),
                                     ("chrf_pp", "chrF2++", "nrefs:1|case:mixed|eff:yes|nc:6|nw:2|space:no"),
                                     ("ter", "TER", "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no")):
            assert bleu[key]["name"] == name and bleu[key]["signature"].startswith(signature)  # sacreBLEU's own
        sentences = (results / f"evaluate/{exp_name}/test_2016_flickr.sentences.tsv").read_text().splitlines()
        assert sentences[0] == "sentence\tsacrebleu\ttok_bleu\tchrf\tchrf_pp\tter" and len(sentences) == 301
        assert bleu["n"] == 300  # ci scale keeps the first max_lines of every split
        hyps = (results / f"evaluate/{exp_name}/test_2016_flickr.hyp").read_text().splitlines()
        assert len(hyps) == 300 and not any("@@" in h for h in hyps)
    # a model leaves the run: its bundle alone translates the raw test source on stdin as the run decoded it
    raw = (results / "prepare/multi30k_en_de/test/test_2016_flickr.src").read_bytes()
    translated = subprocess.run([sys.executable, "-m", "nmtrepro.cli", "translate", "--model",
                                 str(results / "bundle/base_en_de"), "--threads", "2"], input=raw, capture_output=True)
    assert translated.returncode == 0, translated.stderr[-2000:]
    assert translated.stdout.decode() == (results / "evaluate/base_en_de/test_2016_flickr.hyp").read_text()
    assert json.loads((results / "bundle/pr_en_de_seed2/bundle.json").read_text())["provenance"]["scale"] == "ci"
    table = (results / "report/A_table1.md").read_text()
    assert "Transformer Base" in table and "27.38" in table  # the paper's En-De Base number beside ours
    assert (results / "report/A_table1.html").stat().st_size > 0
    assert (results / "report/training_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert "Protocol (scale `ci`): every row trained from scratch, 30 updates" in table
    assert "Seeds: base_en_de 1, 2" in table and "per seed" in table
    assert " ours chrF |" in table and " chrF vs baseline |" in table  # right-aligned, as numbers
    # every claim of paper A; ci's models do not translate, so each shows its numbers and no verdict
    claims, _, by_budget = (results / "report/A_claims.md").read_text().partition("The claims at each training budget")
    assert claims.count("| +PR improves") == 4 and "+Max+Attn beats +Max" in claims
    assert all("(seed 1)" in line and ", below 5 BLEU)" in line for line in claims.splitlines() if line.startswith("| +PR"))
    assert by_budget.count("| +PR improves") == 2  # the central claim at ci's one budget (0.5) and at the end
    assert "|      67% |        20 |" in by_budget  # 0.5 of 30 updates ends on the checkpoint at 20
    assert (results / "train/pr_en_de_seed2/curve.tsv").exists() and (results / "train/base_en_de_seed2/averaged.pt").exists()
    assert not (results / "analyse/significance/base_en_de.vs.base_en_de.json").exists()  # the baseline's own row
    tested = json.loads((results / "analyse/significance/pr_en_de.vs.base_en_de.json").read_text())
    sig = tested["tok_bleu"]
    assert [entry["seed"] for entry in sig["seeds"]] == [1, 2] and "bs:1000|" in sig["signature"]  # 2 seeds; ci: 1,000
    # its recipe, its families system first and each side's own seed spread (a family's seed noise)
    assert sig["recipe"] == "phrase/transformer" and sig["families"] == ["phrase", "transformer"]
    assert [sorted(side) for side in sig["sides"]] == [["spread", "test_own"]] * 2
    assert list(tested) == ["sacrebleu", "tok_bleu", "chrf", "chrf_pp", "ter"]  # each metric, its own test
    assert tested["ter"]["signature"].startswith("nrefs:1|case:lc|tok:tercom") and "|bs:1000|" in tested["ter"]["signature"]
    # each claim in chrF beside its BLEU, and its Δ in the other metrics; ci's models, below the BLEU
    # floor, are judged in neither
    header = next(line for line in claims.splitlines() if line.startswith("| claim "))
    assert " chrF Δ | chrF verdict " in header and "| Δ in other metrics " in header
    assert all("| not judged " in line and " · TER " in line and "chrF++ " in line
               for line in claims.splitlines() if line.startswith("| +PR"))
    assert "chrF Δ and verdict: each claim judged in chrF as well" in claims
    ours = [line for line in table.splitlines() if line.startswith("| base_en_")]
    assert "the 98% interval of the difference" in table and len(ours) == 2 and not any("†" in line for line in ours)
    for figure in ("A_figure3", "D_figure4", "D_figure5"):
        assert (results / f"report/{figure}.png").read_bytes()[:4] == b"\x89PNG"
        assert (results / f"report/{figure}.svg").read_text().lstrip().startswith("<?xml")
    buckets = json.loads((results / "analyse/A_figure3/base_en_de.vs.base_en_de.buckets.json").read_text())
    assert [b["bucket"] for b in buckets] == ["≤15", "(15,30]", "(30,45]", ">45"]
    assert sum(b["n"] for b in buckets) == 300 and {b["delta"] for b in buckets} == {None}  # no baseline, no Δ
    assert (results / "analyse/D_figure4/rec_en_de.vs.d_base_en_de.buckets.json").exists()
    assert "paper: Δ >45" in (results / "report/A_figure3.md").read_text()
    speed = (results / "report/A_table2_cost.md").read_text()
    assert "Para. (M)" in speed and "paper: Para. (M)" in speed and "Train time" in speed
    # paper A's Time is the whole training (Big's 3x steps in it): ours, a token's, is compared only with
    # the paper's total over its steps
    assert "paper: Train time (total)" in speed and "Train time / token: ours − paper" in speed
    assert "Train time: ours − paper" not in speed and "Train time (total): ours" not in speed
    # Figure 3 at ci: no test source over 45 tokens, said on the figure and its table, and its claim
    # (+PR's gain there above Big's) listed with the paper's Δ and not judged
    figure3 = (results / "report/A_figure3.md").read_text()
    assert "Buckets (30,45], >45: no test sentence at this scale" in figure3 and "| no test sentence " in figure3
    assert "no test sentence" in (results / "report/A_figure3.svg").read_text()
    assert json.loads((results / "analyse/significance/pr_en_de.vs.big_en_de.longer_than_45.json").read_text()) == {
        "empty": "empty bucket: no test source is longer than 45 tokens (of 300)"}
    long_claim = next(line for line in claims.splitlines() if line.startswith("| On sources over 45 tokens"))
    assert "  +0.52 | Δ > 0 " in long_claim and "not judged: empty bucket: no test source is longer than 45" in long_claim
    assert "1 not judged (its part of the test set is empty)" in claims
    # Figure 4: the stand-in pairs and our distance named on the figure and in its numbers table, "> 10" pooled
    figure4 = (results / "report/A_figure4.md").read_text()
    assert "DistilLingEval subj_verb_agreement.mt, its first 20 triples, a stand-in for LingEval97" in figure4
    assert "our distance: words from subject to finite verb" in figure4 and "| > 10 " in figure4
    assert "is not judged as a claim" in figure4 and "Subject-verb distance > 10" in figure4
    assert "a stand-in for LingEval97" in (results / "report/A_figure4.svg").read_text()
    # paper B, Table 3: the existing NMT systems it cites, beside ours
    cited = (results / "report/B_table3.md").read_text()
    assert "| Transformer Base (Vaswani et al. 2017) " in cited and "28.84" in cited and "not re-run" in cited
    assert "| Transformer Big (Hassan et al. 2018) " in (results / "report/B_table3_zh_en.md").read_text()
    assert "| Transformer Big (Vaswani et al. 2017) " in (results / "report/B_table3_params.md").read_text()
    heads = (results / "report/D_table4.md").read_text()
    assert "Transformer (Base) / Global" in heads and "0.826" in heads
    for name in ("A_table1", "A_table2", "A_figure3", "D_figure5", "A_table2_cost", "D_table5", "D_table4"):
        assert "\\begin{tabular}" in (results / f"report/{name}.tex").read_text()
    scored = json.loads((results / "analyse/base_en_de/contrastive.json").read_text())
    assert scored["total"]["total"] == 12 * 20  # ci: the first 20 triples of each DistilLingEval set
    assert not (results / "analyse/base_en_fr").exists()  # only En->De models can be scored
    assert (results / "report/A_figure4.svg").stat().st_size > 0
    ablations = (results / "report/A_table2.md").read_text()  # every row measured, the parser one on its spans
    assert "| parse_en_de " in ablations and "Para. (M)" not in ablations
    assert (results / "parse/multi30k_en_de/test/test_2016_flickr.spans").stat().st_size > 0
    paper_b = (results / "report/B_table3_zh_en.md").read_text()  # paper B: Zh-En, recurrence variants
    assert "| biarn_zh_en " in paper_b and "tatoeba_zh_en/test" in paper_b and "24.70" in paper_b
    claims_b = (results / "report/B_claims.md").read_text()
    assert claims_b.count(" | tokenized BLEU |") == 27 and claims_b.count(" | sacreBLEU      |") == 4
    warm = (results / "report/B_warm_start.md").read_text()  # paper B's warm start, a row a seed and the mean
    assert "1-Layer BiARN (seed 2)" in warm and "1-Layer BiARN (mean)" in warm and "memory shuffled" in warm
    probed = (results / "report/B_table5.md").read_text()  # two encoders' vectors under one gate
    assert "1-Layer BiARN (ours)" in probed and "6-Layer BiRNN (ours)" in probed
    paper_d = (results / "report/D_table2.md").read_text()  # paper D: every system beside the paper's
    assert "| fusing_en_de " in paper_d and "28.58" in paper_d and "| disreg_en_de " in paper_d
    assert "tatoeba_zh_en/test" in (results / "report/D_table3.md").read_text()
    assert "+Fusing_Diverse / Syn" in (results / "report/D_table4.md").read_text()  # heads named by group
    assert "**" in (results / "report/D_figure6.md").read_text()                     # matched n-grams in bold
    claims_d = (results / "report/D_claims.md").read_text()
    assert sum("| tokenized BLEU " in line for line in claims_d.splitlines()) == 18  # the metric column, padded
    # Table IV's average judged as a claim on head similarity over both seeds: shown, below ci's BLEU floor
    heads_claim = next(line for line in claims_d.splitlines() if line.startswith("| +Fusing_Diverse's encoder heads"))
    assert "| head similarity " in heads_claim and " -0.18 |" in heads_claim and ", below 5 BLEU)" in heads_claim
    measured = json.loads((results / "analyse/D_table4/fusing_en_de.vs.d_base_en_de.head_similarity.json").read_text())
    assert [e["seed"] for e in measured["head_similarity"]["seeds"]] == [1, 2] == [
        e["seed"] for e in measured["head_similarity"]["floor"]["seeds"]]
    assert len(json.loads((results / "analyse/D_table4/fusing_en_de_seed2.heads.json").read_text())["sentences"]) == 300
    # Table VII's observations, each a claim on a task's probing accuracy over the seeds both train
    probing = [line for line in claims_d.splitlines() if "| probing accuracy, " in line]
    assert len(probing) == 9 and all(", below 5 BLEU)" in line for line in probing)
    probed = json.loads((results / "analyse/D_table7/fusing_en_de.vs.d_base_en_de.probe_tree_depth.json").read_text())
    assert [e["seed"] for e in probed["probe_tree_depth"]["seeds"]] == [1, 2]
    sweep = (results / "report/D_figure3.md").read_text()  # Fig. 3's sweep of 1-3 heads, built at ci too
    assert "| rec_3_heads_en_de " in sweep and "| syn_2_heads_en_de " in sweep
    assert (results / "train/d_base_en_de/averaged.pt").is_symlink()  # paper A's Base at ci: trained once
    paper_c = (results / "report/C_table1.md").read_text()  # paper C: the LL rows; NPMT trains at paper scale only
    assert "| ll_beam_de_en " in paper_c and "29.16" in paper_c and "multi30k_de_en/test_2016_flickr" in paper_c
    assert "| npmt_" not in paper_c and not (results / "train/npmt_greedy_de_en").exists()
    assert "of lowercased output" in paper_c and "case-sensitive" not in paper_c  # data lowercased when prepared
    assert "tokenized case-sensitive BLEU" in paper_d
    assert not (results / "report/C_table2.md").exists()
    paper_c_claims = (results / "report/C_claims.md").read_text().partition("at each training budget")[0]  # NPMT's
    # seven unmeasured (its segment length too), the LL's two not judged
    assert paper_c_claims.count("| not comparable at this scale") == 9 and paper_c_claims.count(", below 5 BLEU)") == 2
    phrases = next(line for line in paper_c_claims.splitlines() if line.startswith("| NPMT decodes phrases"))
    assert "| avg. segment length " in phrases and "| not comparable at this scale" in phrases
    central, _, central_budgets = (results / "report/central_claims.md").read_text().partition("at each training budget")
    assert central.count("(seed 2)") == 4 and "+PR improves Transformer Base En-De" in central
    assert "started from the trained hao_base_en_de, then 20 updates" in central
    assert "| Δ < +0.10 " in central and "Each paper is its own family" in central and "Holm" not in central
    assert "page p" in central
    assert central_budgets.count("|      67% |") == 3  # A's, C's and D's; B's continuation is too short for one
    assert "No claim judged at this scale: 9 not comparable at this scale." in paper_c_claims
    assert "Procedure: the primary claim (the reordering layer does not help the attention seq2seq (beam))" in paper_c_claims
    # every page pools the seed noise of the central claims' two-seed comparisons, none of whose models
    # translate at ci: nothing to pool
    assert all("no multi-seed comparison at this scale whose every seed scores 5 BLEU" in
               (results / f"report/{page}.md").read_text() for page in ("central_claims", "A_claims", "D_claims"))
    assert (results / "evaluate/ll_beam_de_en/test_2016_flickr.decode.json").exists()        # decoded on its own
    assert (results / "train/ll_beam_de_en/averaged.pt").is_symlink()                        # ... from one training
    assert (results / "prepare/multi30k_de_en/test/test_2016_flickr.ref.tok").read_text().islower()
    assert "central_claims.gap.svg" in central and (results / "report/central_claims.gap.svg").exists()
    assert list((results / "tensorboard/pr_en_de_seed2").glob("events.out.tfevents.*"))   # every training's scalars
    continued = EventAccumulator(str(results / "tensorboard/biarn_en_de"))   # paper B's, from the trained Base:
    continued.Reload()                                                         # its curve goes on after its 30 updates
    assert [event.step for event in continued.Scalars("train/loss")] == [35, 40, 45, 50]
    planned, started = trainings(newest_log(work).read_text())   # the run's own log names every training it ran
    assert planned and len(started) == planned and set(started.values()) == {"done"}, (planned, started)
    if forkserver.available():  # every job ran as a fork of the run's one server
        served = (results / "logs/forkserver.log").read_text()
        assert served.count(": exit 0 in ") > 500 and served.count("train (pid ") == planned, served[-3000:]
        assert "declined" not in served and "is gone" not in served
    status = subprocess.run([sys.executable, "-m", "nmtrepro.cli", "status", "--config", "scale=ci"], cwd=work,
                            capture_output=True, text=True)
    assert status.returncode == 0 and re.search(r"trainings (\d+) done, 0 running, 0 failed, 0 waiting of \1",
                                                status.stdout), status.stdout + status.stderr
    assert "central_claims: +PR improves Transformer Base En-De" in status.stdout

    report = snakemake(work, "--report", "report.html")
    assert report.returncode == 0, report.stderr[-3000:]
    html = (work / "report.html").read_text(errors="replace")
    assert "training_curves.png" in html and "A_table1.html" in html
    for name in ("A_figure3.png", "D_figure5.png", "A_table2.html", "A_table2_cost.html", "D_table4.html"):
        assert name in html
    assert "A_figure4.png" in html and "A_claims.html" in html and "central_claims.html" in html
    # the first screen: the title, then what the run found (workflow.rst, each claims page's brief), top-aligned
    assert "+PR improves Transformer Base En-De (paper +1.29, ours +0.00): <strong>not comparable at this scale" in html
    assert "<strong>paper C</strong>: No claim judged at this scale: 9 not comparable at this scale." in html
    assert "align-items: safe center" in html
    # The Claims category lists its pages by label (the report sorts them as text): with the finished tiny
    # run beside this one, the central claims across both scales first, then the central page.
    labels = sorted(set(re.findall(r'"claims": ?"([^"]+)"', html)), key=str.lower)
    assert labels[0] == "across scales: central: one claim a paper" and "paper A" in labels
    assert [label for label in labels if not label.startswith("across")][0] == "central: one claim a paper"
    assert (results / "report/central_claims_across_scales.html").exists()
    for page in ("central_claims", "A_claims", "B_claims", "C_claims", "D_claims"):   # each with its forest plot
        text = (results / f"report/{page}.html").read_text()
        assert "<figure><svg" in text and '<p class="reading">' in text and '<span class="label' in text, page
        assert (results / f"report/{page}.svg").exists(), page
        assert_balanced_html(text)
    assert_balanced_html((results / "report/A_table1.html").read_text())

    again = snakemake(work, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr


def test_killed_training_resumes_from_its_last_checkpoint(tmp_path):
    """SIGKILL of Snakemake and its job (a machine's crash, an OOM killer) leaves Snakemake's lock and
    the job's output marked incomplete: `--unlock`, then the plain rerun README gives resumes (the
    default profile's rerun-incomplete in force)."""
    config = repo_config()
    config["scales"]["ci"]["train"].update(max_updates=400, save_every=5, keep_last=2)
    work = workdir(tmp_path, config)
    target = "results/ci/train/base_en_de/final.pt"
    checkpoints = work / "results/ci/checkpoints/base_en_de"
    proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", target, "--config", "scale=ci"],
                            cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while not any(checkpoints.glob("*.pt")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, "training finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=120)
    assert not (work / target).exists()
    assert any(checkpoints.glob("*.pt")), "the killed job's checkpoints must survive"

    locked = snakemake(work, target)
    assert locked.returncode != 0 and "--unlock" in locked.stderr
    assert snakemake(work, "--unlock").returncode == 0
    rerun = snakemake(work, target)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    log = (work / "results/ci/logs/train/base_en_de.log").read_text()
    assert "resuming from" in log and "starting from scratch" not in log
    assert (work / target).is_file()


def test_nist_sets_are_scored_and_shown_against_all_four_references(tmp_path):
    """Paper D's NIST sets name four references (config `refs`); at smoke scale the stand-in folder has
    them: each further one is prepared by its own job, and BLEU, Fig. 6 and the choice of the checkpoint
    by dev BLEU (NIST06) read all four, in order."""
    target = ["results/smoke/evaluate/base_zh_en_nist03/nist03.bleu.json", "results/smoke/report/D_figure6.md"]
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", *target, "--config", "scale=smoke"],
                         cwd=repo_copy(tmp_path), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    prefix = "results/smoke/prepare/nist_zh_en/test/nist03"
    refs = [f"{prefix}.ref", f"{prefix}.ref1", f"{prefix}.ref2", f"{prefix}.ref3"]
    bleu = next(line for line in out.stdout.splitlines() if "nmtrepro bleu" in line)
    assert re.findall(r"--ref (\S+)", bleu) == refs
    assert re.findall(r"--ref-tok (\S+)", bleu) == [f"{ref}.tok" for ref in refs]
    examples = next(line for line in out.stdout.splitlines() if "nmtrepro examples" in line)
    assert re.findall(r"--ref-tok (\S+)", examples) == [f"{ref}.tok" for ref in refs]
    select = next(line for line in out.stdout.splitlines() if "nmtrepro select-checkpoint" in line)
    assert len(re.findall(r"--ref-tok \S+/test/valid\.ref\d?\.tok", select)) == 4  # dev BLEU on NIST06's four
    assert re.search(r"^prepare_ref\s+6$", out.stdout, re.M)  # three further references of NIST03 and of NIST06


def test_a_test_splits_further_references_are_a_list_of_files():
    config = repo_config()
    validate(config, SCHEMA)
    assert len(config["datasets"]["nist_zh_en"]["splits"]["nist03"]["refs"]) == 3  # NIST's four with `tgt`
    config["datasets"]["nist_zh_en"]["splits"]["nist03"]["refs"] = "ldc_zh_en:nist03.en1"
    with pytest.raises(InputError, match=r"datasets.nist_zh_en.splits.nist03.refs: 'ldc_zh_en:nist03.en1' is not "
                                         r"of type 'array'"):
        validate(config, SCHEMA)


def test_claims_measured_elsewhere_bring_the_pages_across_scales_with_their_provenance(tmp_path):
    """A `gpu` run's exported paired bootstraps (workflow/measured/gpu, `nmtrepro export-claims`) set the
    converged answer beside a checkout that has no results/gpu: each row labelled with where, when and at
    which commit it was measured; a local results/gpu would take precedence."""
    from test_claims import write_significance
    work = repo_copy(tmp_path)
    gpu = work / "results/gpu/analyse/significance"
    gpu.mkdir(parents=True)
    config = repo_config()
    for claim in (config["claims"][name] for name in central_claims({**config, "scale": "gpu"})):
        write_significance(gpu / f"{claim['experiment']}.vs.{claim['baseline']}.json", 38.5, 38.3, 0.2, [0.1, 0.3, 0.2])
    (work / "results/gpu/report").mkdir()
    (work / "results/gpu/report/central_claims.gap.tsv").write_text("claim\tstep\tpair\tdelta\nX\t100\t1\t-0.1\n")
    (work / "results/gpu/analyse/D_table4").mkdir()   # a claim on a quantity's test, beside its analysis
    (work / "results/gpu/analyse/D_table4/fusing_en_de.vs.d_base_en_de.head_similarity.json").write_text("{}")
    exported = subprocess.run([sys.executable, "-m", "nmtrepro.cli", "export-claims", "--results", "results/gpu",
                               "--out", "workflow/measured/gpu", "--hardware", "1x NVIDIA H200"],
                              cwd=work, capture_output=True, text=True)
    assert exported.returncode == 0, exported.stderr
    provenance = json.loads((work / "workflow/measured/gpu/provenance.json").read_text())
    assert provenance["scale"] == "gpu" and provenance["hardware"] == "1x NVIDIA H200" and provenance["date"]
    shutil.rmtree(work / "results/gpu")
    run = snakemake(work, "-n", "-p")
    assert run.returncode == 0, run.stderr[-3000:]
    command = next(line for line in run.stdout.splitlines() if "--out-md results/ci/report/central_claims_across_scales.md" in line)
    across = page_inputs(command)
    gpu = next(scale for scale in across["claims"] if scale.startswith("gpu measured on 1x NVIDIA H200, "))
    assert len(across["claims"]["ci"]) == 4 and len(across["claims"][gpu]) == 4 and len(across["pool"][gpu]) == 4
    assert across["claims"][gpu]["pr_base_en_de"]["significance"] == "workflow/measured/gpu/pr_en_de.vs.base_en_de.json"
    assert across["gaps"][gpu] == "workflow/measured/gpu/central_claims.gap.tsv"
    # this run's claims page names where the gpu verdict differs: it reads the same JSONs
    claims = next(line for line in run.stdout.splitlines() if "--out-md results/ci/report/central_claims.md" in line)
    assert "workflow/measured/gpu/fusing_en_de.vs.d_base_en_de.json" in json.dumps(page_inputs(claims)["others"])
    claims_d = next(line for line in run.stdout.splitlines() if "--out-md results/ci/report/D_claims.md" in line)
    assert ("workflow/measured/gpu/fusing_en_de.vs.d_base_en_de.head_similarity.json"
            in json.dumps(page_inputs(claims_d)["others"]))


def test_a_scale_of_ones_own_comes_from_another_with_its_own_keys_over_it(tmp_path):
    """`scales.<name>: {from: tiny, ...}` (docs/organisation.md): tiny's data, models and study with the
    keys it names over them, its results in a tree of its own; an unknown or circular `from` is named."""
    config = repo_config()
    config["scales"]["laptop8"] = {"from": "tiny", "train": {"threads": 4}, "decode": {"beam": 5}}
    validate(config, SCHEMA)
    mine, tiny = config["scales"]["laptop8"], config["scales"]["tiny"]
    assert mine["train"] == {**tiny["train"], "threads": 4} and mine["decode"]["beam"] == 5
    assert mine["sizes"] == tiny["sizes"] and mine["stands_for"] == "tiny"
    resolved = experiments({**config, "scale": "laptop8"})
    assert resolved["base_en_de"].train["threads"] == 4 and resolved["base_en_de"].train["max_updates"] == 1000
    assert central_study({**config, "scale": "laptop8"}, resolved)["claims"] == central_study(
        {**config, "scale": "tiny"}, experiments({**config, "scale": "tiny"}))["claims"]
    work = repo_copy(tmp_path)
    text = yaml.safe_load((work / "config.yaml").read_text())
    text["scales"]["laptop8"] = {"from": "tiny", "train": {"threads": 4}}
    (work / "config.yaml").write_text(yaml.safe_dump(text, sort_keys=False))
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--config", "scale=laptop8"], cwd=work,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "--checkpoint-dir results/laptop8/checkpoints/base_en_de" in run.stdout and '"threads": 4' in run.stdout
    for spec, message in (({"from": "tinyy"}, "scales.bad.from: 'tinyy' is not a scale"),
                          ({"from": "bad"}, "scales.bad.from: bad -> bad comes back to itself")):
        broken = repo_config()
        broken["scales"]["bad"] = spec
        with pytest.raises(InputError, match=re.escape(message)):
            validate(broken, SCHEMA)
    with pytest.raises(InputError, match="scale = 'laptop9' is not a scale"):
        validate({**repo_config(), "scale": "laptop9"}, SCHEMA)
