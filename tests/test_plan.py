"""`nmtrepro plan`: jobs from the dry-run DAG, GPU-hours from throughput, per table."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from nmtrepro import cli
from nmtrepro.core.files import read_json
from nmtrepro.planning.plan import parse_summary

ROOT = Path(__file__).resolve().parents[1]
SUMMARY = """Building DAG of jobs...
output_file\tdate\trule\tlog-file(s)\tinput-file(s)\tshellcmd\tstatus\tplan
results/ci/train/done/final.pt\tMon\ttrain\t-\t-\t-\tok\tno update
results/ci/train/todo/final.pt\t-\ttrain\t-\t-\t-\tmissing\tupdate pending
results/ci/train/todo/curve.tsv\t-\ttrain\t-\t-\t-\tmissing\tupdate pending
results/ci/downloads/wmt13_un.json\t-\tdownload\t-\t-\t-\tmissing\tupdate pending
"""


def test_summary_parsing_keeps_only_pending_training_and_download_jobs():
    assert parse_summary(SUMMARY) == ({"todo"}, {"wmt13_un"})


@pytest.mark.parametrize("measured", [False, True])
def test_plan_on_the_ci_config_counts_jobs_and_gpu_hours_per_table(tmp_path, monkeypatch, measured):
    monkeypatch.chdir(ROOT)
    bench = tmp_path / "throughput.json"
    if measured:
        bench.write_text(json.dumps({"gpu": "test GPU", "tokens_per_s": {"base": 1024 * 30 / 3600, "big": 1024 * 30 / 3600}}))
    assert cli.main(["plan", "--config", "scale=ci", "--bench", str(bench), "--out", str(tmp_path / "plan.json")]) == 0
    result = read_json(tmp_path / "plan.json")
    table = result["tables"]["A_table1"]
    # the 8 cells' trainings, and the second seeds of base_en_de and pr_en_de (ci trains two of their three)
    assert table["training_jobs"] == 10 and {"base_en_de_seed2", "pr_en_de_seed2", "pr_en_fr"} <= set(table["experiments"])
    assert table["download_bytes"] == 0  # the ci scale uses embedded data only
    if measured:  # 1024 tokens an update at 1024*30/3600 tokens/s: 30 updates from scratch a GPU-hour
        assert table["gpu_hours"] == pytest.approx(10)
        assert result["throughput_source"].startswith("measured")
    else:
        assert result["throughput_source"].startswith("assumed")
