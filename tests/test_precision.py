"""Precision by device (bf16 where it is fast, else fp16 with a loss scaler on GPUs, fp32 on CPUs) and
fp16's loss scaler in the trainer, run on CPU: the papers' P100s and V100s have fp16 but no bf16."""
from __future__ import annotations

import math

import pytest
import torch

from conftest import TINY
from nmtrepro.core import runtime
from nmtrepro.core.files import InputError
from nmtrepro.training import checkpoint
from nmtrepro.training.train import Corpus, Settings, Trainer

SETTINGS = dict(max_tokens=64, update_tokens=100, lr=0.01, warmup=10, save_every=5, keep_last=3,
                log_every=5, threads=1, device="cpu", precision="fp16")


@pytest.fixture
def gpu_of(monkeypatch):
    """A fake CUDA device of the given compute capability (no GPU needed)."""
    def make(capability):
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: f"GPU {capability}")
        return torch.device("cuda", 0)
    return make


@pytest.mark.parametrize("capability, expected", [((6, 0), "fp16"), ((7, 0), "fp16"), ((8, 0), "bf16"),
                                                  ((9, 0), "bf16")])
def test_bf16_falls_back_to_fp16_on_gpus_without_bf16(gpu_of, capability, expected):
    assert runtime.resolve_precision(gpu_of(capability), "bf16") == expected  # P100, V100, A100, H100


def test_bf16_falls_back_to_fp32_on_a_cpu_without_avx512(monkeypatch):
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: "AVX2")
    assert runtime.resolve_precision(torch.device("cpu"), "bf16") == "fp32"


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_a_precision_asked_for_by_name_is_kept(gpu_of, precision):
    assert runtime.resolve_precision(gpu_of((7, 0)), precision) == precision
    assert runtime.resolve_precision(torch.device("cpu"), precision) == precision


def test_an_unknown_precision_is_named():
    with pytest.raises(InputError, match="fp8"):
        runtime.resolve_precision(torch.device("cpu"), "fp8")


def test_only_fp16_scales_the_loss():
    cpu = torch.device("cpu")
    assert runtime.grad_scaler(cpu, "fp16").is_enabled()
    assert not runtime.grad_scaler(cpu, "bf16").is_enabled() and not runtime.grad_scaler(cpu, "fp32").is_enabled()


def test_fp16_training_learns_like_fp32(copy_corpus, tmp_path):
    losses = {}
    for precision in ("fp32", "fp16"):
        trainer = Trainer(Corpus(copy_corpus), TINY, Settings.from_dict({**SETTINGS, "precision": precision,
                                                                         "max_updates": 20}), tmp_path / precision)
        trainer.train()
        losses[precision] = [r["train_loss"] for r in trainer.curve if "train_loss" in r]
    assert losses["fp16"][-1] < losses["fp16"][0] - 0.5  # it learns
    assert losses["fp16"] == pytest.approx(losses["fp32"], rel=0.05)  # and as fp32 does


def test_an_fp16_overflow_lowers_the_loss_scale_and_is_not_divergence(copy_corpus, tmp_path):
    trainer = Trainer(Corpus(copy_corpus), TINY, Settings.from_dict({**SETTINGS, "max_updates": 5}), tmp_path / "a")
    # 2^40 times the loss overflows fp16's gradients (max 65504) until the scaler has halved it enough.
    trainer.scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 40)
    trainer.train()
    assert trainer.step == 5 and trainer.skipped == 0 and trainer.bad_in_row == 0
    assert trainer.overflows >= 10 and trainer.scaler.get_scale() < 2.0 ** 30
    for _, path in checkpoint.checkpoints(tmp_path / "a"):
        assert all(torch.isfinite(v).all() for v in checkpoint.load(path)["model"].values())


def test_a_non_finite_fp16_loss_still_counts_as_a_bad_update(copy_corpus, tmp_path):
    trainer = Trainer(Corpus(copy_corpus), TINY, Settings.from_dict({**SETTINGS, "max_updates": 5}), tmp_path / "b")
    loss_of, calls = trainer.loss, [0]

    def nan_once(*args):
        calls[0] += 1
        loss, nll = loss_of(*args)
        return (loss * math.nan if calls[0] == 1 else loss), nll

    trainer.loss = nan_once
    trainer.train()
    assert trainer.skipped == 1 and trainer.step == 5  # a NaN loss is no overflow


def test_the_loss_scale_resumes_with_the_run(copy_corpus, tmp_path):
    settings = Settings.from_dict({**SETTINGS, "max_updates": 5})
    first = Trainer(Corpus(copy_corpus), TINY, settings, tmp_path / "c")
    first.scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 40)
    first.train()
    resumed = Trainer(Corpus(copy_corpus), TINY, Settings.from_dict({**SETTINGS, "max_updates": 6}), tmp_path / "c")
    assert resumed.resume()
    assert resumed.scaler.get_scale() == first.scaler.get_scale() != 2.0 ** 7


def test_gpu_defaults_turn_cudnn_attention_off_and_tf32_on():
    """cuDNN's attention plans every new padded length anew: 9k instead of 53k target tokens/s for
    Base on an H100 (docs/measurements.md). Flags are global: restored afterwards."""
    saved = (torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.matmul.allow_tf32,
             torch.backends.cudnn.allow_tf32)
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        runtime.cuda_defaults()
        assert not torch.backends.cuda.cudnn_sdp_enabled()
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.enable_cudnn_sdp(saved[0])
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[1:]
