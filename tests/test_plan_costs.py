"""`nmtrepro plan`'s costs: the preprocessing jobs' CPU-hours, each variant's own size, paper C's GRU
jobs, and the GPUs costed beside the throughput table's (no dry run: the jobs are given)."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from nmtrepro.study.config import experiments, load, training_of, validate
from nmtrepro.core.files import InputError
from nmtrepro.study.experiment import AUTO_MAX_TOKENS
from nmtrepro.data.costs import part_lines
from nmtrepro.planning.plan import plan, preprocessing, preprocessing_jobs, render, throughput, update_tokens
from nmtrepro.training import memory

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = """output_file\tdate\trule\tlog-file(s)\tinput-file(s)\tshellcmd\tstatus\tplan
results/paper/prepare/wmt14_en_de/stats.json\t-\tprepare\t-\t-\t-\tmissing\tupdate pending
results/paper/prepare/wmt14_en_de/bpe.codes\t-\tprepare\t-\t-\t-\tmissing\tupdate pending
results/paper/prepare/multi30k_en_de/stats.json\tMon\tprepare\t-\t-\t-\tok\tno update
results/paper/parse/wmt14_en_de/shards/train.2-of-32.spans\t-\tparse\t-\t-\t-\tmissing\tupdate pending
results/paper/parse/wmt14_en_de/shards/train.2-of-32.stats.json\t-\tparse\t-\t-\t-\tmissing\tupdate pending
results/paper/parse/wmt14_en_de/train.spans\t-\tgather_parse\t-\t-\t-\tmissing\tupdate pending
results/paper/pos/nist_zh_en/shards/test/nist03.1-of-1.pos\t-\tpos\t-\t-\t-\tmissing\tupdate pending
"""


@pytest.fixture(scope="module")
def paper():
    config, _ = load(str(ROOT / "config.yaml"), ["scale=paper"])
    validate(config, ROOT / "workflow/schemas/config.schema.yaml")
    return config


def test_summary_gives_one_job_per_prepare_and_per_shard_and_skips_done_ones():
    assert preprocessing_jobs(SUMMARY) == [
        {"stage": "prepare", "dataset": "wmt14_en_de", "part": "train", "shard": 1, "shards": 1},
        {"stage": "parse", "dataset": "wmt14_en_de", "part": "train", "shard": 2, "shards": 32},
        {"stage": "pos", "dataset": "nist_zh_en", "part": "test/nist03", "shard": 1, "shards": 1}]


def test_cpu_hours_are_lines_times_the_stages_rate_split_over_shards(paper, monkeypatch):
    monkeypatch.chdir(ROOT)
    shards = [{"stage": "parse", "dataset": "wmt14_en_de", "part": "train", "shard": k, "shards": 32}
              for k in range(1, 33)]
    prepare = [{"stage": "prepare", "dataset": "wmt14_en_fr", "part": "train", "shard": 1, "shards": 1}]
    result = preprocessing(paper, shards + prepare)["stages"]
    lines, rates = paper["plan"]["lines"], paper["plan"]["cpu_seconds_per_line"]
    assert result["parse"]["lines"] == lines["wmt14_en_de"]  # the shards cover every line once
    assert result["parse"]["cpu_hours"] == pytest.approx(lines["wmt14_en_de"] * rates["parse"]["stanza"] / 3600)
    assert result["parse"]["longest_job_hours"] == pytest.approx(result["parse"]["cpu_hours"] / 32, rel=1e-4)
    prep = rates["prepare"]
    assert result["prepare"]["cpu_hours"] == pytest.approx(lines["wmt14_en_fr"] * (prep["parallel"] + prep["serial"]) / 3600)
    # prepare's one-process steps are priced whole, its tokenization and BPE over its 16 cores
    assert result["prepare"]["longest_job_hours"] == pytest.approx(
        lines["wmt14_en_fr"] * (prep["parallel"] / 16 + prep["serial"]) / 3600)
    assert result["prepare"]["longest_serial_hours"] == pytest.approx(lines["wmt14_en_fr"] * prep["serial"] / 3600)
    assert result["parse"]["cpus"] == paper["scales"]["paper"]["preprocess"]["parse"]["cpus"]
    assert not result["parse"]["overrunning_jobs"] and not result["parse"]["rates"]["wmt14_en_de"]["measured"]


def test_a_chinese_source_is_tagged_at_jiebas_rate_and_unknown_lines_are_listed(paper, monkeypatch):
    monkeypatch.chdir(ROOT)
    jobs = [{"stage": "pos", "dataset": "nist_zh_en", "part": part, "shard": 1, "shards": 1}
            for part in ("train", "test/nist03")]
    row = preprocessing(paper, jobs)["stages"]["pos"]
    rate = paper["plan"]["cpu_seconds_per_line"]["pos"]["jieba"]
    assert row["cpu_hours"] == pytest.approx(paper["plan"]["lines"]["nist_zh_en"] * rate / 3600)
    assert row["jobs_of_unknown_cost"] == ["nist_zh_en/test/nist03"]  # licensed data: no file to count


def test_embedded_data_is_counted_from_its_files_capped_by_max_lines(monkeypatch):
    monkeypatch.chdir(ROOT)
    config, _ = load("config.yaml", ["scale=ci"])
    assert part_lines(config, "multi30k_en_de", "train") == config["scales"]["ci"]["prepare"]["max_lines"]
    config, _ = load("config.yaml", ["scale=tiny"])
    assert part_lines(config, "multi30k_en_de", "test/test_2016_flickr") == 1000


def test_each_experiment_is_sized_by_its_own_model_and_gru_jobs_are_costed_on_one_gpu(paper, monkeypatch):
    monkeypatch.chdir(ROOT)
    rates, _, speedup = throughput(paper, None)
    result = plan(paper, {"big_en_de", "big_pr_en_de", "npmt_greedy_de_en", "ll_greedy_de_en"}, set(), rates,
                  {}, speedup, [])
    jobs = result["jobs"]
    assert jobs["big_pr_en_de"]["parameters"] > 1.8 * jobs["big_en_de"]["parameters"]  # +PR's phrase layers
    for name, size in (("npmt_greedy_de_en", "npmt"), ("ll_greedy_de_en", "gru")):
        train = paper["scales"]["paper"]["by_size"][size]["train"]
        assert jobs[name]["gpus"] == 1 and jobs[name]["hours"] == jobs[name]["gpu_hours"]
        assert jobs[name]["gpu_hours"] == pytest.approx(train["max_updates"] * train["max_tokens"] / rates[size] / 3600)
    assert jobs["big_en_de"]["hours"] == jobs["big_en_de"]["gpu_hours"] / paper["scales"]["paper"]["resources"]["gpu"]
    total = result["total"]
    assert total["gpu_hours_on"]["A100 (bf16)"] == pytest.approx(total["gpu_hours"] / speedup["A100 (bf16)"])
    h100 = speedup["H100 (bf16, measured)"]  # one multiple per size (these jobs' families have none of their own)
    assert total["gpu_hours_on"]["H100 (bf16, measured)"] == pytest.approx(
        sum(job["gpu_hours"] / h100[job["size"]] for job in jobs.values()))
    text = render(result, "assumed", "P100 (fp32)")
    assert "H100 (bf16, measured)" in text and "CPU-hours of preprocessing" in text.splitlines()[-1]


def test_a_per_size_speedup_must_name_every_size_of_the_table(paper):
    config = copy.deepcopy(paper)
    config["plan"]["speedup"]["H100 (bf16, measured)"].pop("npmt")
    with pytest.raises(InputError, match="plan.speedup.H100 .bf16, measured. names sizes"):
        throughput(config, None)


def test_a_family_measured_apart_is_costed_at_its_own_rate_and_others_at_their_sizes(paper, monkeypatch):
    """+PR and BiARN at Base size have their own H100 figures; the Base and a DiSAN Base (a Transformer
    option, not a family) take the size's. Each paper sums its tables' jobs once."""
    monkeypatch.chdir(ROOT)
    rates, _, speedup = throughput(paper, None)
    h100 = speedup["H100 (bf16, measured)"]
    jobs = {"base_en_de": "base", "pr_en_de": "base/phrase", "biarn_en_de": "base/recurrence", "disan_en_de": "base"}
    result = plan(paper, set(jobs), set(), rates, {}, speedup, [],
                  {"A": {"tables": ["A_table1", "A_code_forms"]}, "B": {"tables": ["B_table1"]}})
    for name, key in jobs.items():
        job = result["jobs"][name]
        assert job["gpu_hours_on"]["H100 (bf16, measured)"] == pytest.approx(job["gpu_hours"] / h100[key])
    assert h100["base/phrase"] < h100["base"]
    assert result["papers"]["A"]["training_jobs"] == 2                  # base_en_de and pr_en_de, once each
    assert set(result["papers"]) == {"A", "B"}
    text = render(result, "assumed", "P100 (fp32)")
    base = result["jobs"]["base_en_de"]["gpu_hours_on"]["H100 (bf16, measured)"]
    assert "base_en_de to its recipe's end: " in text and f"{base:.1f} h on one H100 (bf16, measured)" in text
    assert "\npaper A " in text


def test_every_paper_scale_job_is_costed_in_the_paper_that_needs_it(monkeypatch):
    """Paper B's claims compare against Transformers continued as long as the BiARN, jobs that no
    table holds: the paper's line must count them (it missed 4 jobs, 65 H100-hours)."""
    monkeypatch.chdir(ROOT)
    config, owned = load(str(ROOT / "config.yaml"), ["scale=paper"])
    validate(config, ROOT / "workflow/schemas/config.schema.yaml")
    resolved = experiments(config)
    every = {training_of(resolved, name) for name in resolved}
    rates, _, speedup = throughput(config, None)
    result = plan(config, every, set(), rates, {}, speedup, [], owned)
    assert set().union(*(row["experiments"] for row in result["papers"].values())) == every
    assert "hao_base_en_de_continued" in result["papers"]["B"]["experiments"]
    assert "hao_base_en_de_continued" not in result["papers"]["A"]["experiments"]
    assert all(set(table["experiments"]) <= set(result["papers"][name[0]]["experiments"])
               for name, table in result["tables"].items())  # a table's jobs count in its paper


def test_a_per_family_speedup_names_a_size_of_the_table(paper):
    config = copy.deepcopy(paper)
    config["plan"]["speedup"]["H100 (bf16, measured)"]["huge/phrase"] = 3.0
    with pytest.raises(InputError, match="huge/phrase: a per-family figure is SIZE/FAMILY"):
        throughput(config, None)


def test_a_measured_benchmark_is_costed_alone(paper, tmp_path):
    bench = tmp_path / "throughput.json"
    bench.write_text('{"gpu": "H100", "tokens_per_s": {"base": 1.0}}')
    assert throughput(paper, bench)[2] == {}  # the speedups are multiples of the config's table only


def test_a_scale_without_preprocess_settings_gets_one_shard_and_the_profile_defaults(paper):
    config = copy.deepcopy(paper)
    del config["scales"]["tiny"]["preprocess"]
    validate(config, ROOT / "workflow/schemas/config.schema.yaml")
    assert config["scales"]["tiny"]["preprocess"] == {
        "shards": 1, "shard_hours": 6, "max_shards": 256, "runtime_margin": 2,
        **{stage: {"cpus": 1, "mem_mb": 4000, "runtime": 60} for stage in ("prepare", "parse", "pos")}}


def test_paper_a_code_forms_add_four_paper_scale_trainings(paper, monkeypatch):
    # Every paper-scale size is post-norm, so A_code_forms' post-norm Base and +PR rows are the Base and
    # +PR trainings: the table adds the code's +PR and the three other one-difference rows, each sized.
    monkeypatch.chdir(ROOT)
    rates, _, speedup = throughput(paper, None)
    pending = {"base_en_de", "pr_en_de", "pr_code_en_de", "pr_residue_ln_en_de", "pr_token_ta_en_de",
               "pr_sigmoid_pool_en_de"}
    table = plan(paper, pending, set(), rates, {}, speedup, [])["tables"]["A_code_forms"]
    assert table["training_jobs"] == 6 and set(table["experiments"]) == pending
    assert table["gpu_hours"] > 0 and not table["jobs_of_unknown_speed"]


def test_max_tokens_auto_is_a_valid_setting_and_an_update_stays_its_size(paper):
    config = copy.deepcopy(paper)
    config["scales"]["paper"]["train"]["max_tokens"] = "auto"
    validate(config, ROOT / "workflow/schemas/config.schema.yaml")
    config["scales"]["paper"]["train"]["max_tokens"] = "big"
    with pytest.raises(InputError, match="max_tokens"):
        validate(config, ROOT / "workflow/schemas/config.schema.yaml")
    assert update_tokens({"update_tokens": 25_000, "max_tokens": "auto"}) == 25_000
    assert update_tokens({"update_tokens": 1, "max_tokens": "auto"}) == 4096 == AUTO_MAX_TOKENS == memory.AUTO_START
