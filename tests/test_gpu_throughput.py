"""bench/gpu_throughput.py: its analytic FLOP count, a CPU smoke run, and its refusal without CUDA;
bench/gpu_train.py: a CPU smoke run through torchrun with its resume check."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from nmtrepro.models import build_model

SCRIPT = Path(__file__).resolve().parents[1] / "bench/gpu_throughput.py"
spec = importlib.util.spec_from_file_location("gpu_throughput", SCRIPT)
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_flops_are_six_per_weight_and_token_plus_attention_and_output():
    model_spec = {"family": "transformer", "src_vocab": 10, "tgt_vocab": 10, "d_model": 8, "ffn": 16,
                  "heads": 2, "encoder_layers": 1, "decoder_layers": 1, "dropout": 0.0}
    model = build_model(model_spec)
    encoder, decoder = 4 * 8 * 8 + 2 * 8 * 16, 8 * 8 * 8 + 2 * 8 * 16  # attention(s) + FFN weights
    expected = 6 * (encoder * 2 + decoder * 3) + 12 * 8 * (2 * 2 + 3 * 3 + 3 * 2) + 6 * 8 * 10 * 3
    assert bench.update_flops(model, model_spec, [2], [3]) == expected


def run(*args):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_smoke_run_on_cpu_prints_throughput():
    result = run("--device", "cpu", "--scale", "ci", "--steps", "1", "--warmup-steps", "0", "--vocab", "500",
                 "--update-tokens", "1000", "--precision", "fp32", "--peak-tflops", "1")
    assert result.returncode == 0, result.stderr[-2000:]
    row = next(line for line in result.stdout.splitlines() if line.startswith("baseline"))
    cells = row.split("\t")
    assert float(cells[4].replace(",", "")) > 0 and cells[6].endswith("%") and cells[7] == "nan"  # no GPU memory


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_cuda_device_without_a_gpu_fails_clearly():
    result = run("--device", "cuda")
    assert result.returncode != 0 and "sees no CUDA GPU" in result.stderr


def test_gpu_train_smoke_run_on_cpu_trains_each_family_and_resumes(tmp_path):
    script = SCRIPT.parent / "gpu_train.py"
    variants = [arg for v in ("transformer_base", "phrase_max_attn_ta_parse", "syn_diverse") for arg in ("--variant", v)]
    result = subprocess.run([sys.executable, str(script), "--device", "cpu", "--scale", "ci", "--updates", "4",
                             "--log-every", "2", "--pairs", "300", "--vocab", "500", "--iwslt-vocab", "400",
                             *variants, "--resume", "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SCRIPT.parents[1] / "src")})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = json.loads((tmp_path / "gpu_train.json").read_text())
    assert [r["variant"] for r in rows] == ["transformer_base", "phrase_max_attn_ta_parse", "syn_diverse",
                                            "transformer_base"]
    assert all(r["tgt_tok_s"] > 0 and r["precision"] in ("fp32", "bf16") for r in rows[:3])
    assert rows[3] == {"variant": "transformer_base", "resume": "ok"}


def test_smoke_run_compares_paths_with_ratios_to_the_first():
    result = run("--device", "cpu", "--scale", "ci", "--steps", "1", "--warmup-steps", "0", "--vocab", "500",
                 "--update-tokens", "1000", "--precision", "fp32", "--peak-tflops", "1", "--paths", "eager,buckets")
    assert result.returncode == 0, result.stderr[-2000:]
    rows = [line.split("\t") for line in result.stdout.splitlines() if line.startswith("baseline")]
    assert [(r[8], r[9]) for r in rows] == [("eager", "1.00x"), ("buckets", rows[1][9])]
    assert float(rows[1][9].rstrip("x")) > 0
    assert "known paths" in run("--device", "cpu", "--paths", "eager,jit").stderr


def test_fast_equality_compares_every_update_loss_and_all_the_weights(tmp_path):
    """bench/fast_equality.py's verdict: the largest relative loss difference over the updates, and the
    difference of all the weights together (a tensor apart only in rounding noise names itself, but does
    not decide); runs that logged other updates are an error, not a pass."""
    sys.path.insert(0, str(SCRIPT.parent))
    import fast_equality

    runs = {path: tmp_path / path for path in ("eager", "fast")}
    weights = {"eager": {"big": torch.ones(100), "noise": torch.full((2,), 1e-3)},
               "fast": {"big": torch.ones(100) * 1.001, "noise": torch.full((2,), -1e-3)}}
    for path, folder in runs.items():
        (folder / "base").mkdir(parents=True)
        loss = {"eager": (2.0, 1.5), "fast": (2.0, 1.503)}[path]
        (folder / "base/curve.tsv").write_text("step\ttrain_loss\n1\t%s\n2\t%s\n3\t\n" % loss)
        torch.save({"model": weights[path]}, folder / "base/final.pt")
    row = fast_equality.compare("base", runs)
    assert row["updates"] == 2 and row["loss_rel"] == pytest.approx(0.002)
    assert row["weight_rel"] == pytest.approx((0.01 ** 2 + 2 * 0.002 ** 2) ** 0.5 / (100 + 2e-6) ** 0.5, rel=1e-4)
    assert row["worst_tensor"].startswith("noise 2.0e+00")
    (runs["fast"] / "base/curve.tsv").write_text("step\ttrain_loss\n1\t2.0\n")
    with pytest.raises(RuntimeError, match=r"updates logged eager \[1, 2\], fast \[1\]"):
        fast_equality.compare("base", runs)


def test_the_steady_rate_leaves_out_the_updates_that_met_new_shapes(tmp_path):
    """bench/fairseq_compare.py's `steady` rate: over the timed window's updates in which the count of
    micro-batches on new shapes (timed_steps.py's fifth field) did not grow; the whole window's rate
    keeps them. A record of before the count (four fields) is all steady."""
    sys.path.insert(0, str(SCRIPT.parent))
    import fairseq_compare

    # (end time, target tokens, RSS, GPU peak, warm calls so far): update 1 warms up, 3 records a shape
    steps = [(1.0, 100, 0, 0, 2), (2.0, 100, 0, 0, 2), (5.0, 100, 0, 0, 3), (6.0, 100, 0, 0, 3), (7.0, 100, 0, 0, 3)]
    (tmp_path / "steps.json").write_text(json.dumps(steps))
    speed = fairseq_compare.training_speed(tmp_path / "steps.json", warmup=1, updates=4)
    assert speed["train_tok_s"] == pytest.approx(400 / 6.0)
    assert speed["steady_tok_s"] == pytest.approx(300 / 3.0) and speed["steady_updates"] == 3
    (tmp_path / "steps.json").write_text(json.dumps([step[:4] for step in steps]))
    assert fairseq_compare.training_speed(tmp_path / "steps.json", warmup=1, updates=4)["steady_updates"] == 4


def test_gpu_train_reads_the_steady_rate_from_the_windows_without_new_shapes():
    """bench/gpu_train.py: the trainer's log lines that say micro-batches met new shapes (and the first
    window) are left out of the steady rate."""
    from types import SimpleNamespace
    sys.path.insert(0, str(SCRIPT.parent))
    import gpu_train

    line = "step {}/4 | epoch 1 | loss 9.0 | nll 9.0 | ppl 512.00 | lr 1.00e-04 | {} tgt tok/s | 1 s trained, ~1 s left{}\n"
    log = "".join(line.format(step, rate, note) for step, rate, note in (
        (1, 10, " | 4 micro-batches on new shapes (4 shapes so far)"), (2, 200, ""),
        (3, 50, " | 1 micro-batches on new shapes (5 shapes so far)"), (4, 400, "")))
    exp = SimpleNamespace(variant="base", name="base_en_de", model={"family": "transformer"}, train={"update_tokens": 1})
    row = gpu_train.summary(exp, "1,000 parameters on cuda, bf16\n" + log, 1.0, 4096)
    assert row["tgt_tok_s"] == round((200 + 50 + 400) / 3)
    assert row["steady_tgt_tok_s"] == 300 and row["steady_windows"] == "2/3"
