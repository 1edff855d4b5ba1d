"""The cluster and local-GPU profiles: what the paper-scale dry run would submit."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import pytest

from nmtrepro.study.config import experiments
from test_workflow import repo_config, workdir


def dry_run(tmp_path, *args: str) -> str:
    work = workdir(tmp_path, repo_config())
    result = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", *args], cwd=work,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout + result.stderr


SLURM_PLUGIN = importlib.util.find_spec("snakemake_executor_plugin_slurm") is not None


@pytest.mark.parametrize("profile", [
    pytest.param("slurm", marks=pytest.mark.skipif(not SLURM_PLUGIN, reason="pip install -e '.[slurm]'")),
    "local-gpu",
])
def test_profile_trains_each_paper_model_on_its_own_gpu_count(tmp_path, profile):
    """Whatever the profile, a training job claims the GPUs its model size asks for (the Transformers
    the scale's 4, under torchrun with one process each; paper C's GRU models one, without it) and
    every decode, and paper D's choice of checkpoint by dev BLEU, one of its own."""
    out = dry_run(tmp_path, "--profile", f"profiles/{profile}", "--config", "scale=paper",
                  "local_data={ldc_zh_en: data/smoke/ldc_zh_en}")  # NIST's folder: smoke's stand-in
    trained = {name: e for name, e in experiments({**repo_config(), "scale": "paper"}).items()
               if e.same_as is None and name != "pr_token_en_de"}  # that one: a tiny-scale diagnostic's
    assert {e.model["family"] for e in trained.values() if e.resources["gpu"] == 1} == {"npmt", "gru_attention"}
    trainings = re.findall(r"^Shell command: exec nmtrepro with-gpus (\d+) -- ((?:torchrun .*?--no-python )?)"
                           r"nmtrepro train .*--checkpoint-dir results/paper/checkpoints/(\S+) ", out, re.M)
    assert sorted(name for _, _, name in trainings) == sorted(trained)
    for gpus, launcher, name in trainings:
        assert int(gpus) == trained[name].resources["gpu"], name
        torchrun = (f"torchrun --standalone --nproc-per-node {gpus} "
                    "--signals-to-handle SIGTERM,SIGINT,SIGUSR1 --shutdown-timeout 240 --no-python ")
        assert launcher == (torchrun if int(gpus) > 1 else ""), name
    for command in ("decode", "select-checkpoint"):  # select-checkpoint decodes paper D's dev set 20 times
        decodes = re.findall(rf"^Shell command: (.*?)nmtrepro {command} ", out, re.M)
        assert decodes and set(decodes) == {"nmtrepro with-gpus 1 -- "}, command


def test_ci_scale_trains_without_torchrun(tmp_path):
    out = dry_run(tmp_path, "--cores", "2", "--config", "scale=ci")
    assert "torchrun" not in out and "with-gpus" not in out and "Shell command: exec nmtrepro train --prepared" in out
