"""The cluster and local-GPU profiles: what the paper-scale dry run would submit."""
from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys

import pytest

from nmtrepro.config import experiments
from test_workflow import REPO, repo_config, workdir


def dry_run(tmp_path, *args: str) -> str:
    work = workdir(tmp_path, repo_config())
    shutil.copytree(REPO / "profiles", work / "profiles")
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", *args], cwd=work,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


@pytest.mark.skipif(not importlib.util.find_spec("snakemake_executor_plugin_slurm"),
                    reason="pip install -e '.[slurm]'")
def test_slurm_profile_dry_run_lists_paper_training_under_torchrun_with_its_gpus(tmp_path):
    """Each training job runs one process per GPU of its model size: the Transformers on the scale's 4
    under torchrun, paper C's GRU models on one, without it."""
    out = dry_run(tmp_path, "--profile", "profiles/slurm", "--config", "scale=paper")
    config = repo_config()
    trained = [e for e in experiments({**config, "scale": "paper"}).values() if e.same_as is None]
    on_one = [e for e in trained if e.resources["gpu"] == 1]
    assert {e.model["family"] for e in on_one} == {"npmt", "gru_attention"}
    trainings = re.findall(r"^Shell command: ((?:torchrun .*?--no-python )?nmtrepro train .*)$", out, re.M)
    plain = [line for line in trainings if line.startswith("nmtrepro train")]
    assert len(plain) == len(on_one) and len(trainings) == len(trained)
    prefix = "torchrun --standalone --nproc-per-node 4 --signals-to-handle SIGTERM,SIGINT,SIGUSR1 --no-python "
    assert all(line.startswith(prefix) for line in trainings if line not in plain)


def test_ci_scale_trains_without_torchrun(tmp_path):
    out = dry_run(tmp_path, "--cores", "2", "--config", "scale=ci")
    assert "torchrun" not in out and "Shell command: nmtrepro train --prepared" in out
