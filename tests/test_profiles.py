"""The cluster and local-GPU profiles: what the paper-scale dry run would submit."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys

import pytest

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
    out = dry_run(tmp_path, "--profile", "profiles/slurm", "--set-resources", "train:gpu=8",
                  "--config", "scale=paper")
    experiments = repo_config()["experiments"]
    assert out.count("torchrun --standalone --nproc-per-node 8 ") == len(experiments)  # the job's gpu resource
    assert "--signals-to-handle SIGTERM,SIGINT,SIGUSR1 --no-python nmtrepro train" in out


def test_ci_scale_trains_without_torchrun(tmp_path):
    out = dry_run(tmp_path, "--cores", "2", "--config", "scale=ci")
    assert "torchrun" not in out and "Shell command: nmtrepro train --prepared" in out
