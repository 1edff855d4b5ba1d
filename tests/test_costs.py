"""The CPU stages' costs: shard counts and runtimes from lines and rates (data.costs), and a calibration
whose measured rates the plan then uses and names (nmtrepro calibrate)."""
from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest

from nmtrepro import cli
from nmtrepro.study.config import load, validate
from nmtrepro.core.files import InputError, read_json
from nmtrepro.data.costs import MIN_RUNTIME, job_runtime, load_rates, shard_count, stage_rate
from nmtrepro.planning.plan import preprocessing, render

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


@pytest.fixture(scope="module")
def paper():
    config, _ = load(str(ROOT / "config.yaml"), ["scale=paper"])
    validate(config, SCHEMA)
    return config


def measured(tool: str, seconds: float, stage: str = "parse", dataset: str = "wmt14_en_de") -> dict:
    return {"scale": "paper", "date": "2026-12-05T13:00:00+00:00", "machine": {"host": "node7"},
            "datasets": {dataset: {stage: {"tool": tool, "seconds_per_line": seconds, "setup_seconds": 0.0}}}}


def test_auto_shards_follow_the_sources_lines_and_rate_within_the_bound(paper):
    lines, preprocess = paper["plan"]["lines"]["wmt14_en_de"], paper["scales"]["paper"]["preprocess"]
    assumed = paper["plan"]["cpu_seconds_per_line"]["parse"]["stanza"]
    expected = math.ceil(lines * assumed / 3600 / preprocess["shard_hours"])
    assert shard_count(paper, {}, "parse", "wmt14_en_de", "train") == expected == 32
    assert shard_count(paper, measured("stanza", 2 * assumed), "parse", "wmt14_en_de", "train") == 63
    assert shard_count(paper, {}, "parse", "wmt14_en_de", "valid") == 1  # a valid or test set: one job
    bounded = copy.deepcopy(paper)
    bounded["scales"]["paper"]["preprocess"]["max_shards"] = 8
    assert shard_count(bounded, {}, "parse", "wmt14_en_de", "train") == 8
    ci, _ = load(str(ROOT / "config.yaml"), ["scale=smoke"])
    validate(ci, SCHEMA)
    assert shard_count(ci, {}, "parse", "wmt14_en_de", "train") == 2  # a scale's own count stands


def test_a_rate_measured_with_another_tool_never_prices_the_scales_one(paper):
    """spaCy's stand-in parses ~25x faster than stanza: its rate leaves stanza's assumed one in place."""
    rate = stage_rate(paper, measured("spacy", 0.002), "parse", "wmt14_en_de")
    assert rate.tool == "stanza" and rate.measured is None
    rate = stage_rate(paper, measured("stanza", 0.2), "parse", "wmt14_en_de")
    assert rate.seconds == 0.2 and rate.measured == "node7, 2026-12-05"


def test_auto_runtime_is_the_largest_shards_time_times_the_margin(paper):
    lines, rate = paper["plan"]["lines"]["wmt14_en_de"], 0.2
    shards = shard_count(paper, measured("stanza", rate), "parse", "wmt14_en_de", "train")
    minutes = job_runtime(paper, measured("stanza", rate), "parse", "wmt14_en_de", "train", shards)
    assert minutes == math.ceil(2 * math.ceil(lines / shards) * rate / 60)
    assert minutes <= 2 * 6 * 60  # a shard near shard_hours asks for about twice that
    assert job_runtime(paper, {}, "parse", "nist_zh_en", "test/nist03") == MIN_RUNTIME  # licensed: lines unknown


def test_auto_settings_on_a_source_of_unknown_lines_fail_naming_the_key(paper):
    config = copy.deepcopy(paper)
    del config["plan"]["lines"]["wmt14_en_de"]
    with pytest.raises(InputError, match=r"give plan\.lines\.wmt14_en_de"):
        shard_count(config, {}, "parse", "wmt14_en_de", "train")


def test_rates_measured_at_another_scale_are_refused(paper, tmp_path):
    (tmp_path / "rates.json").write_text('{"scale": "smoke", "datasets": {}}')
    with pytest.raises(InputError, match="measured at scale 'smoke', not 'paper'"):
        load_rates({**paper, "cpu_rates": str(tmp_path / "rates.json")})


def test_a_calibration_on_a_sample_writes_rates_that_the_plan_uses_and_names_measured(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "rates.json"
    assert cli.main(["calibrate", "--config", "scale=ci", "--lines", "12", "--datasets", "multi30k_en_de",
                     "--out", str(out)]) == 0
    rates = read_json(out)
    en_de = rates["datasets"]["multi30k_en_de"]
    assert en_de["sample"]["lines"] == 12 and en_de["parse"]["tool"] == "spacy" and en_de["pos"]["tool"] == "spacy"
    assert all(en_de[stage]["seconds_per_line"] > 0 for stage in ("prepare", "parse", "pos"))
    config, _ = load("config.yaml", ["scale=ci", f"cpu_rates={out}"])
    validate(config, SCHEMA)
    jobs = [{"stage": "parse", "dataset": "multi30k_en_de", "part": "train", "shard": 1, "shards": 1},
            {"stage": "prepare", "dataset": "multi30k_en_de", "part": "train", "shard": 1, "shards": 1}]
    result = preprocessing(config, jobs, load_rates(config))
    parse = result["stages"]["parse"]
    assert parse["rates"]["multi30k_en_de"]["seconds"] == en_de["parse"]["seconds_per_line"]
    assert parse["cpu_hours"] == pytest.approx(300 * en_de["parse"]["seconds_per_line"] / 3600)  # ci: 300 lines
    text = render({"scale": "ci", "tables": {}, "papers": {}, "jobs": {}, "preprocessing": result,
                   "total": {"training_jobs": 0, "gpu_hours": 0, "gpu_hours_on": {}, "cpu_hours": result["cpu_hours"],
                             "checkpoint_bytes": 0, "download_bytes": 0}}, "assumed")
    assert f"seconds a line, measured on {rates['machine']['host']}, {rates['date'][:10]}: multi30k_en_de spacy" in text
    assert "CPU-hours of preprocessing (measured rates)" in text
