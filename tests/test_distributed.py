"""Data-parallel training under torchrun (two CPU processes, gloo) and the stop signals of a cluster."""
from __future__ import annotations

import csv
import itertools
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import TINY, write_copy_corpus
from nmtrepro.training import checkpoint
from nmtrepro.training.train import Corpus, Settings, Trainer

SRC = Path(__file__).resolve().parents[1] / "src"
SETTINGS = dict(max_tokens=64, update_tokens=200, lr=0.01, warmup=4, save_every=4, keep_last=3,
                log_every=1, threads=1, device="cpu", max_updates=8)


def train_command(corpus: Path, out: Path, processes: int, entry: tuple = ("-m", "nmtrepro.cli"),
                  **settings) -> list[str]:
    """`nmtrepro train` in `processes` processes (torchrun when more than one); `entry`: what runs the
    CLI (a module, or a script that prepares the process first)."""
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
                "--signals-to-handle=SIGTERM,SIGINT,SIGUSR1"] if processes > 1 else [sys.executable]
    return launcher + [*entry, "train", "--prepared", str(corpus), "--model", json.dumps(TINY),
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


AOT_EAGER = """
import sys

import torch

compile_ = torch.compile
torch.compile = lambda model, backend, mode: compile_(model, backend="aot_eager")
from nmtrepro.cli import main

sys.exit(main(sys.argv[1:]))
"""


def test_two_processes_on_the_paper_scales_fast_path_follow_one_eager_process(tmp_path):
    """The paper scale's `fast: graphs` under DDP (on a CPU: batches padded to fixed shapes, the step
    compiled, here traced by aot_eager as inductor would, gradients in buffers of their own, no
    all-reduce until an update's last micro-batch): the updates of one eager process that computes
    both ranks' batch groups on the same bucketed batches."""
    script = tmp_path / "aot_eager.py"
    script.write_text(AOT_EAGER)
    corpus = write_copy_corpus(tmp_path / "data", n_train=96)
    fast = dict(buckets=True, fast="graphs", max_updates=4)
    run = subprocess.run(train_command(corpus, tmp_path / "ddp", 2, entry=(str(script),), **fast),
                         env=environment(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "padded to fixed shapes" in run.stderr

    single = Trainer(Corpus(corpus), TINY, Settings.from_dict({**SETTINGS, **fast, "fast": "off"}), tmp_path / "one",
                     shards=2)
    single.train()
    expected = [r["train_loss"] for r in single.curve if "train_loss" in r]
    assert len(expected) == 4 and train_losses(tmp_path / "ddp/curve.tsv") == pytest.approx(expected, rel=1e-5)
    ddp_weights = checkpoint.load(tmp_path / "ddp/final.pt")["model"]
    for name, value in single.model.state_dict().items():
        torch.testing.assert_close(ddp_weights[name], value, rtol=1e-4, atol=1e-6, msg=name)


def target_tokens(trainer: Trainer, batch: list[int]) -> int:
    return sum(trainer.corpus.splits["train"][1].sizes[i] for i in batch)


def test_groups_take_batches_until_they_hold_the_shards_part_of_the_budget(copy_corpus, tmp_path):
    settings = Settings.from_dict({**SETTINGS, "max_tokens": 16, "update_tokens": 120})
    halves = Trainer(Corpus(copy_corpus), TINY, settings, tmp_path / "a", shards=2)
    for group, _ in itertools.islice(halves.groups(), 20):
        tokens = [target_tokens(halves, b) for b in group]
        assert len(group) > 1 and sum(tokens[:-1]) < 60 <= sum(tokens)  # half of 120 per shard, at least
    batches, _ = next(halves.updates())
    first_two = [b for g, _ in zip(halves.groups(), range(2)) for b in g[0]]
    assert batches == first_two


@pytest.mark.parametrize("shards", [1, 2, 4, 8])
def test_every_update_holds_at_least_25k_target_tokens_at_paper_settings(tmp_path, shards):
    # Paper A: "each training batch contained at least 25k target tokens", whatever the GPU count.
    corpus = write_copy_corpus(tmp_path / "data", n_train=2000, lengths=(20, 40))  # ~60k tokens an epoch
    settings = Settings.from_dict({**SETTINGS, "max_tokens": 4096, "update_tokens": 25_000})
    trainer = Trainer(Corpus(corpus), TINY, settings, tmp_path / "ckpt", shards=shards)
    groups = trainer.groups()
    for _ in range(10):
        update = [group for group, _ in itertools.islice(groups, shards)]
        tokens = [[target_tokens(trainer, b) for b in group] for group in update]
        assert sum(map(sum, tokens)) >= 25_000
        # less than one batch per shard over: each group stops at the batch that fills its part
        assert all(sum(t[:-1]) < math.ceil(25_000 / shards) for t in tokens)
    assert trainer.epoch >= 3  # groups ran across epoch ends, where a short group carries on


@pytest.mark.parametrize("shards", [1, 2])
def test_updates_resume_exactly_from_the_epoch_and_position_after_any_update(copy_corpus, tmp_path, shards):
    settings = Settings.from_dict({**SETTINGS, "max_tokens": 16, "update_tokens": 120})
    run = Trainer(Corpus(copy_corpus), TINY, settings, tmp_path / "a", shards=shards)
    updates, after = run.updates(), []
    for _ in range(12):
        batches, position = next(updates)
        after.append((run.epoch, position, batches))
    assert after[-1][0] >= 2  # epoch ends were crossed
    for k in range(len(after) - 1):
        resumed = Trainer(Corpus(copy_corpus), TINY, settings, tmp_path / "b", shards=shards)
        resumed.epoch, resumed.position = after[k][:2]
        assert [batches for batches, _ in itertools.islice(resumed.updates(), len(after) - k - 1)] == \
            [batches for _, _, batches in after[k + 1:]]


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


# Each rank joins a default group that carries CUDA tensors only, as NCCL does, before the trainer
# starts: any CPU tensor sent through it fails with "No backend type associated with device type cpu".
# The trainer then runs on CPU, so its gradients (DDP) and totals go through a gloo group of their own
# (runtime.Distributed.device), as on GPUs they go through NCCL.
CUDA_ONLY_DEFAULT_GROUP = """
import sys

import torch.distributed

torch.distributed.init_process_group("cuda:gloo")
from nmtrepro.cli import main

sys.exit(main(sys.argv[1:]))
"""


def test_training_never_sends_a_cpu_tensor_through_a_cuda_only_default_group(tmp_path):
    script = tmp_path / "cuda_only_group.py"
    script.write_text(CUDA_ONLY_DEFAULT_GROUP)
    corpus = write_copy_corpus(tmp_path / "data", n_train=96)
    # checkpoints (RNG states gathered from every rank), validation, the stop vote and the totals all run
    run = subprocess.run(train_command(corpus, tmp_path / "run", 2, entry=(str(script),), max_updates=6,
                                       save_every=3),
                         env=environment(), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert checkpoint.load(tmp_path / "run/final.pt")["step"] == 6
    assert [step for step, _ in checkpoint.resumable(tmp_path / "run/ckpt")][-2:] == [3, 6]
