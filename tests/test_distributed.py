"""Data-parallel training under torchrun (two CPU processes, gloo) and the stop signals of a cluster."""
from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from nmtrepro.training import checkpoint
from nmtrepro.training.train import Corpus, Settings, Trainer

from conftest import TINY, write_copy_corpus

SRC = Path(__file__).resolve().parents[1] / "src"
SETTINGS = dict(max_tokens=64, update_tokens=200, lr=0.01, warmup=4, save_every=4, keep_last=3,
                log_every=1, threads=1, device="cpu", max_updates=8)


def train_command(corpus: Path, out: Path, processes: int, **settings) -> list[str]:
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
                "--signals-to-handle=SIGTERM,SIGINT,SIGUSR1", "-m"] if processes > 1 else [sys.executable, "-m"]
    return launcher + ["nmtrepro.cli", "train", "--prepared", str(corpus), "--model", json.dumps(TINY),
                       "--settings", json.dumps({**SETTINGS, **settings}), "--checkpoint-dir", str(out / "ckpt"),
                       "--out", str(out / "final.pt"), "--curve", str(out / "curve.tsv")]


def environment() -> dict:
    return {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
            "OMP_NUM_THREADS": "1"}


def train_losses(curve: Path) -> list[float]:
    with curve.open() as handle:
        return [float(r["train_loss"]) for r in csv.DictReader(handle, delimiter="\t") if r["train_loss"]]


def test_two_processes_follow_one_process_computing_both_shards(tmp_path):
    corpus = write_copy_corpus(tmp_path / "data", n_train=96)
    run = subprocess.run(train_command(corpus, tmp_path / "ddp", 2), env=environment(), capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]

    # The exact relation: an update of the 2-process run is the update of one process that computes
    # both ranks' batch groups (Trainer(shards=2)); only the order of the float sums differs.
    single = Trainer(Corpus(corpus), TINY, Settings.from_dict(SETTINGS), tmp_path / "one", shards=2)
    single.train()
    expected = [r["train_loss"] for r in single.curve if "train_loss" in r]
    assert train_losses(tmp_path / "ddp/curve.tsv") == pytest.approx(expected, rel=1e-5)
    ddp_weights = checkpoint.load(tmp_path / "ddp/final.pt")["model"]
    for name, value in single.model.state_dict().items():
        torch.testing.assert_close(ddp_weights[name], value, rtol=1e-4, atol=1e-6, msg=name)


def test_groups_split_the_update_budget_between_shards(copy_corpus, tmp_path):
    settings = Settings.from_dict({**SETTINGS, "max_tokens": 16, "update_tokens": 120})
    halves = Trainer(Corpus(copy_corpus), TINY, settings, tmp_path / "a", shards=2)
    group, _ = next(halves.groups())
    sizes = halves.corpus.splits["train"][1].sizes
    assert len(group) > 1 and sum(sizes[i] for b in group for i in b) <= 60  # half of 120 per shard
    batches, _ = next(halves.updates())
    first_two = [b for g, _ in zip(halves.groups(), range(2)) for b in g[0]]
    assert batches == first_two


def wait_for_checkpoint(directory: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 240
    while not checkpoint.checkpoints(directory) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert proc.poll() is None, "training ended before the signal"


@pytest.mark.parametrize("processes", [1, 2])
def test_sigusr1_saves_a_checkpoint_and_the_next_run_resumes(tmp_path, processes):
    corpus = write_copy_corpus(tmp_path / "data", n_train=96)
    out = tmp_path / "run"
    command = train_command(corpus, out, processes, max_updates=100_000, save_every=5, log_every=50)
    proc = subprocess.Popen(command, env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        wait_for_checkpoint(out / "ckpt", proc)
        proc.send_signal(signal.SIGUSR1)  # what SLURM sends ahead of the time limit (--signal=USR1@...)
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode != 0
    assert f"stopped by signal {int(signal.SIGUSR1)}" in stderr
    step = int(re.search(r"at step (\d+)", stderr).group(1))
    saved_step, saved = checkpoint.resumable(out / "ckpt")[-1]
    assert saved_step == step  # saved on the signal, not only every 5

    again = subprocess.run(train_command(corpus, out, processes, max_updates=step + 2, save_every=5, log_every=50),
                           env=environment(), capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"resuming from {saved}" in again.stderr
    assert checkpoint.load(out / "final.pt")["step"] == step + 2
