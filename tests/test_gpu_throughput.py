"""bench/gpu_throughput.py: its analytic FLOP count (and bench/plan_flops.py's counted one), a CPU smoke
run, and its refusal without CUDA; bench/gpu_train.py: a CPU smoke run through torchrun with its resume
check."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
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
    encoder, decoder = 4 * 8 * 8 + 2 * 8 * 16, 6 * 8 * 8 + 2 * 8 * 16  # attention(s) + FFN weights
    cross_kv = 2 * 8 * 8                                               # the decoder's, over the source
    expected = 6 * ((encoder + cross_kv) * 2 + decoder * 3) + 12 * 8 * (2 * 2 + 3 * 3 + 3 * 2) + 6 * 8 * 10 * 3
    assert bench.update_flops(model, model_spec, [2], [3]) == expected


def test_plan_flops_counts_the_transformer_as_the_analytic_count_and_a_familys_extra_parts():
    """bench/plan_flops.py: the counted FLOPs, fitted over its six probes, are the analytic count of any
    lengths for the Transformer (whose FLOPs are of the fitted form), and +PR with parser phrases and
    the BiRNN count their phrase layers and GRUs on top of the same Transformer's."""
    sys.path.insert(0, str(SCRIPT.parent))
    import plan_flops

    base = {"family": "transformer", "src_vocab": 50, "tgt_vocab": 40, "d_model": 16, "ffn": 32, "heads": 2,
            "encoder_layers": 2, "decoder_layers": 1, "dropout": 0.0}
    src, tgt = [5, 17, 40, 3], [7, 13, 51, 3]
    fitted = plan_flops.per_target_token(plan_flops.sentence_flops(base), np.array(src), np.array(tgt))
    assert fitted * sum(tgt) == pytest.approx(bench.update_flops(build_model(base), base, src, tgt), rel=1e-9)
    phrases = plan_flops.sentence_flops({**base, "family": "phrase", "phrases": "parse"})
    recurrence = plan_flops.sentence_flops({**base, "family": "recurrence", "recurrence": "rnn"})
    for extra in (phrases, recurrence):
        assert plan_flops.per_target_token(extra, np.array(src), np.array(tgt)) > 1.1 * fitted


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
    """Each variant trains in one process with update 2 profiled (timed_steps.py); the resume goes
    through torchrun, as the benches' runs without --profile do."""
    script = SCRIPT.parent / "gpu_train.py"
    variants = [arg for v in ("transformer_base", "phrase_max_attn_ta_parse", "syn_diverse") for arg in ("--variant", v)]
    result = subprocess.run([sys.executable, str(script), "--device", "cpu", "--scale", "ci", "--updates", "4",
                             "--log-every", "2", "--pairs", "300", "--vocab", "500", "--iwslt-vocab", "400",
                             *variants, "--resume", "--profile", "1:1", "--out", str(tmp_path)],
                            capture_output=True, text=True, timeout=600,
                            env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(SCRIPT.parents[1] / "src")})
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = json.loads((tmp_path / "gpu_train.json").read_text())
    assert [r["variant"] for r in rows] == ["transformer_base", "phrase_max_attn_ta_parse", "syn_diverse",
                                            "transformer_base"]
    assert all(r["tgt_tok_s"] > 0 and r["precision"] in ("fp32", "bf16") for r in rows[:3])
    assert rows[3] == {"variant": "transformer_base", "resume": "ok"}
    profiled = (tmp_path / "syn_diverse.steps.profile.txt").read_text()
    assert profiled.startswith("updates 2..2: ") and profiled.split("\n\n")[0] in result.stdout


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


def test_fast_equality_hands_gpu_train_every_option_it_reads(tmp_path, monkeypatch):
    """fast_equality.py runs its trainings through gpu_train.train, which reads gpu_train's options: a
    run that misses one (`--profile` did, and the GPU check's `graphs` step died on it before training)
    must instead reach the trainer. Here the trainer's process fails at once, which is a row's error."""
    sys.path.insert(0, str(SCRIPT.parent))
    import fast_equality
    import gpu_train

    commands = []
    monkeypatch.setattr(gpu_train.subprocess, "run", lambda command, **_: commands.append(command) or
                        subprocess.CompletedProcess(command, 3, "", "stubbed"))
    monkeypatch.setattr(sys, "argv", ["fast_equality.py", "--device", "cpu", "--variant", "transformer_base",
                                      "--pairs", "40", "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as ended:
        fast_equality.main()
    assert ended.value.code == 1 and len(commands) == 1
    assert "exited 3" in json.loads((tmp_path / "fast_equality.json").read_text())[0]["error"]


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


def test_a_profiled_window_that_met_a_new_shape_is_profiled_again(tmp_path):
    """bench/timed_steps.py: the profile of updates 3..4 is dropped when a micro-batch in them warmed up
    a shape (its warm count grew), and updates 5..6 profiled instead; after TRIES windows the last is
    kept, saying how many of its micro-batches were warm. The numbers go to .json beside the summary."""
    sys.path.insert(0, str(SCRIPT.parent))
    import timed_steps

    profile = timed_steps.Profile(2, 2, str(tmp_path / "steady"))
    for update, warm in enumerate([1, 1, 2, 2, 2, 2, 2], 1):  # update 3 met a new shape
        profile.after(update, warm, 100 * update)
    numbers = json.loads((tmp_path / "steady.json").read_text())
    assert (numbers["first"], numbers["last"], numbers["tries"], numbers["warm"]) == (5, 6, 2, 0)
    assert numbers["tokens"] == 500 + 600
    assert (tmp_path / "steady.txt").read_text().startswith("updates 5..6: ")

    profile = timed_steps.Profile(1, 1, str(tmp_path / "never"))
    for update in range(1, 2 * timed_steps.TRIES + 1):  # every update warms a shape up
        profile.after(update, update, 10)
    numbers = json.loads((tmp_path / "never.json").read_text())
    assert (numbers["first"], numbers["tries"], numbers["warm"]) == (timed_steps.TRIES + 1, timed_steps.TRIES, 1)
    assert "1 of their micro-batches on new shapes" in (tmp_path / "never.txt").read_text()


def test_kernels_are_sorted_by_kind_and_the_rate_they_bound(tmp_path):
    """timed_steps.kernel_kind names the libraries' kernels (cuBLAS, SDPA's three kernels, inductor's
    fused loss, fused Adam); fairseq_compare.kernel_bound turns a profile's numbers into the rate if
    the GPU never waited, and the share of it the steady rate reaches."""
    sys.path.insert(0, str(SCRIPT.parent))
    import fairseq_compare
    import timed_steps

    kinds = {name: timed_steps.kernel_kind(name) for name in [
        "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT", "fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMem",
        "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_par", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop",
        "triton_red_fused__log_softmax__log_softmax_backward_0", "void at::native::(anonymous namespace)::multi_tensor",
        "Memcpy HtoD (Pinned -> Device)", "triton_per_fused__to_copy__unsafe_view_add_native_dropout_0"]}
    assert list(kinds.values()) == ["matmul", "attention", "attention", "attention", "loss", "optimizer, gradient sums",
                                    "copies, fills", "other (elementwise, norms, reductions)"]
    numbers = {"first": 41, "last": 42, "tokens": 50_000, "busy_s": 0.1, "warm": 0,
               "kinds_s": {"matmul": 0.06, "attention": 0.04}}
    (tmp_path / "profile.json").write_text(json.dumps(numbers))
    bound = fairseq_compare.kernel_bound(tmp_path / "profile.json", 250_000)
    assert bound["kernel_ms"] == pytest.approx(50) and bound["kernel_bound_tok_s"] == pytest.approx(500_000)
    assert bound["steady_share"] == pytest.approx(0.5)
    assert bound["kinds_ms"] == pytest.approx({"matmul": 30, "attention": 20})
    assert fairseq_compare.kernel_bound(tmp_path / "profile.json", None)["steady_share"] is None


def test_the_gpus_idle_time_is_put_down_to_what_the_host_was_doing():
    """timed_steps.idle_by_host_op: each gap between the GPU's kernels (overlapping ones merged, gaps
    under 10 us left out) goes to the top-level host op running at its middle, the latest to start
    across threads (backward's thread inside the main thread's call), or to Python between ops."""
    sys.path.insert(0, str(SCRIPT.parent))
    import timed_steps

    ms = 1e-3
    device = [(0, 4 * ms), (3 * ms, 6 * ms), (8 * ms, 9 * ms), (9.0005 * ms, 12 * ms), (25 * ms, 26 * ms),
              (30 * ms, 31 * ms)]
    host = [("CompiledFunction", 1, 0, 10 * ms), ("backward", 2, 5 * ms, 7.5 * ms),
            ("Optimizer.step#Adam.step", 1, 18 * ms, 19 * ms)]
    idle = timed_steps.idle_by_host_op(host, device)
    assert list(idle) == ["Optimizer.step#Adam.step", timed_steps.PYTHON, "backward"]
    assert list(idle.values()) == pytest.approx([13 * ms, 4 * ms, 2 * ms])
    assert timed_steps.idle_by_host_op(host, []) == {}


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


def test_attention_kernels_rehearses_on_cpu_where_only_math_runs():
    """bench/attention_kernels.py on a CPU: the fused backends say n/a, math runs every case and agrees
    with itself; its masked inputs keep 3/4 of a row's keys or more, and none in every 16th row."""
    sys.path.insert(0, str(SCRIPT.parent))
    import attention_kernels

    q, k, v, keep = attention_kernels.inputs(("masked", True, False), 32, 16, 2, 8, torch.float32, torch.device("cpu"))
    real = keep.flatten(1).sum(1)
    assert q.shape == (32, 2, 16, 8) and (real[::16] == 0).all() and (real[1:16] >= 12).all()
    done = subprocess.run([sys.executable, str(SCRIPT.with_name("attention_kernels.py")), "--device", "cpu",
                           "--tokens", "64", "--lengths", "8", "--repeats", "1", "--heads", "2", "--d-head", "8"],
                          capture_output=True, text=True, check=True)
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith(("masked ", "causal "))]
    assert [row[:4] for row in rows[:2]] == [["masked", "64", "8", "8"], ["causal", "64", "8", "8"]]
    assert all(row[4:7] == ["n/a"] * 3 and row[8] == "(0.0e+00)" for row in rows[:2])


def test_loss_kernels_rehearse_on_cpu_both_forms_agree_and_fp32_logits_keep_the_same_bytes():
    """bench/loss_kernels.py on a CPU: both forms of the loss, eager and compiled, on one size; each
    agrees with the ops' eager loss and gradient to fp32's rounding; with fp32 logits both keep one
    (rows, V) tensor for backward (bf16 logits on a GPU: ours keeps them, the ops an fp32 copy)."""
    done = subprocess.run([sys.executable, str(SCRIPT.with_name("loss_kernels.py")), "--device", "cpu", "--rows", "64",
                           "--vocab", "4096", "--repeats", "1"], capture_output=True, text=True, check=True)
    rows = {row[1]: row for row in map(str.split, done.stdout.splitlines()) if row[:1] == ["64"] and row[2] != "/"}
    assert set(rows) == {"ops", "ours"}
    for row in rows.values():
        assert row[4] == row[5] == "1" and float(row[6]) < 1e-5 and float(row[7]) < 1e-4   # 64 x 4096 x 4 B
    assert re.search(r"64 ops / ours: eager [\d.]+x, compiled [\d.]+x", done.stdout)


def test_swan_loss_profile_names_the_host_time_of_each_part_of_npmt(tmp_path):
    """bench/swan_loss.py --profile: the host's time in NPMT's encoder, segment decoder and dynamic
    program (ranges put around them while it profiles, and taken off after)."""
    script = SCRIPT.with_name("swan_loss.py")
    subprocess.run([sys.executable, str(script), "--d-model", "8", "--vocab", "50", "--tokens", "60", "--lengths",
                    "6", "--max-segments", "2", "--repeats", "1", "--profile", str(tmp_path / "npmt.txt")],
                   check=True, capture_output=True, cwd=script.parent)
    line = (tmp_path / "npmt.txt").read_text().splitlines()[1]
    assert line.startswith("the host's time a batch: encoder ") and "segment decoder" in line
    assert "dynamic program" in line and "the rest of the pass" in line
    backward = re.search(r"\(forward\); dynamic program ([\d.]+) ms, normaliser ([\d.]+) ms \(backward\)", line)
    assert backward and all(float(ms) > 0 for ms in backward.groups())   # their autograd nodes were found
    assert int(re.search(r"; (\d+) autograd nodes a batch$", line).group(1)) > 0
    sys.path.insert(0, str(SCRIPT.parent))
    import swan_loss
    from nmtrepro.models import npmt

    before = npmt.swan_log_likelihood
    with swan_loss.labelled_parts():
        assert npmt.swan_log_likelihood is not before
    assert npmt.swan_log_likelihood is before
