"""What the benchmarks and GPU checks measure with: a profiled window (training/profiling.py) and the
rates read back from a timed run, a profile and a trainer's log (training/rates.py)."""
from __future__ import annotations

import json

import pytest

from nmtrepro.training import profiling
from nmtrepro.training.rates import kernel_bound, log_rates, training_speed


def test_the_steady_rate_leaves_out_the_updates_that_met_new_shapes(tmp_path):
    """Over the timed window's updates in which the count of micro-batches on new shapes (a record's
    fifth field) did not grow; the whole window's rate keeps them. A record of before the count (four
    fields) is all steady."""
    # (end time, target tokens, RSS, GPU peak, warm calls so far): update 1 warms up, 3 records a shape
    steps = [(1.0, 100, 0, 0, 2), (2.0, 100, 0, 0, 2), (5.0, 100, 0, 0, 3), (6.0, 100, 0, 0, 3), (7.0, 100, 0, 0, 3)]
    (tmp_path / "steps.json").write_text(json.dumps(steps))
    speed = training_speed(tmp_path / "steps.json", warmup=1, updates=4)
    assert speed["train_tok_s"] == pytest.approx(400 / 6.0)
    assert speed["steady_tok_s"] == pytest.approx(300 / 3.0) and speed["steady_updates"] == 3
    (tmp_path / "steps.json").write_text(json.dumps([step[:4] for step in steps]))
    assert training_speed(tmp_path / "steps.json", warmup=1, updates=4)["steady_updates"] == 4


def test_a_profiled_window_that_met_a_new_shape_is_profiled_again(tmp_path):
    """The profile of updates 3..4 is dropped when a micro-batch in them warmed up a shape (its warm count
    grew), and updates 5..6 profiled instead; after TRIES windows the last is kept, saying how many of its
    micro-batches were warm. The numbers go to .json beside the summary."""
    profile = profiling.Profile(2, 2, str(tmp_path / "steady"))
    for update, warm in enumerate([1, 1, 2, 2, 2, 2, 2], 1):  # update 3 met a new shape
        profile.after(update, warm, 100 * update)
    numbers = json.loads((tmp_path / "steady.json").read_text())
    assert (numbers["first"], numbers["last"], numbers["tries"], numbers["warm"]) == (5, 6, 2, 0)
    assert numbers["tokens"] == 500 + 600
    assert (tmp_path / "steady.txt").read_text().startswith("updates 5..6: ")

    profile = profiling.Profile(1, 1, str(tmp_path / "never"))
    for update in range(1, 2 * profiling.TRIES + 1):  # every update warms a shape up
        profile.after(update, update, 10)
    numbers = json.loads((tmp_path / "never.json").read_text())
    assert (numbers["first"], numbers["tries"], numbers["warm"]) == (profiling.TRIES + 1, profiling.TRIES, 1)
    assert "1 of their micro-batches on new shapes" in (tmp_path / "never.txt").read_text()


def test_kernels_are_sorted_by_kind_and_the_rate_they_bound(tmp_path):
    """kernel_kind names the libraries' kernels (cuBLAS, SDPA's three kernels, inductor's fused loss, fused
    Adam); kernel_bound turns a profile's numbers into the rate if the GPU never waited, and the share of
    it the steady rate reaches."""
    kinds = {name: profiling.kernel_kind(name) for name in [
        "nvjet_sm90_tst_128x128_64x6_2x1_v_bz_NNT", "fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMem",
        "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_par", "cudnn_generated_fort_native_sdpa_sm90_flash_fprop",
        "triton_red_fused__log_softmax__log_softmax_backward_0", "void at::native::(anonymous namespace)::multi_tensor",
        "Memcpy HtoD (Pinned -> Device)", "triton_per_fused__to_copy__unsafe_view_add_native_dropout_0"]}
    assert list(kinds.values()) == ["matmul", "attention", "attention", "attention", "loss", "optimizer, gradient sums",
                                    "copies, fills", "other (elementwise, norms, reductions)"]
    numbers = {"first": 41, "last": 42, "tokens": 50_000, "busy_s": 0.1, "warm": 0,
               "kinds_s": {"matmul": 0.06, "attention": 0.04}}
    (tmp_path / "profile.json").write_text(json.dumps(numbers))
    bound = kernel_bound(tmp_path / "profile.json", 250_000)
    assert bound["kernel_ms"] == pytest.approx(50) and bound["kernel_bound_tok_s"] == pytest.approx(500_000)
    assert bound["steady_share"] == pytest.approx(0.5)
    assert bound["kinds_ms"] == pytest.approx({"matmul": 30, "attention": 20})
    assert kernel_bound(tmp_path / "profile.json", None)["steady_share"] is None


def test_the_gpus_idle_time_is_put_down_to_what_the_host_was_doing():
    """Each gap between the GPU's kernels (overlapping ones merged, gaps under 10 us left out) goes to the
    top-level host op running at its middle, the latest to start across threads (backward's thread inside
    the main thread's call), or to Python between ops."""
    ms = 1e-3
    device = [(0, 4 * ms), (3 * ms, 6 * ms), (8 * ms, 9 * ms), (9.0005 * ms, 12 * ms), (25 * ms, 26 * ms),
              (30 * ms, 31 * ms)]
    host = [("CompiledFunction", 1, 0, 10 * ms), ("backward", 2, 5 * ms, 7.5 * ms),
            ("Optimizer.step#Adam.step", 1, 18 * ms, 19 * ms)]
    idle = profiling.idle_by_host_op(host, device)
    assert list(idle) == ["Optimizer.step#Adam.step", profiling.PYTHON, "backward"]
    assert list(idle.values()) == pytest.approx([13 * ms, 4 * ms, 2 * ms])
    assert profiling.idle_by_host_op(host, []) == {}


def test_a_logs_steady_rate_leaves_out_the_windows_with_new_shapes():
    """The trainer's log lines that say micro-batches met new shapes (and the first window) are left out
    of the steady rate."""
    line = "step {}/4 | epoch 1 | loss 9.0 | nll 9.0 | ppl 512.00 | lr 1.00e-04 | {} tgt tok/s | 1 s trained, ~1 s left{}\n"
    log = "".join(line.format(step, rate, note) for step, rate, note in (
        (1, 10, " | 4 micro-batches on new shapes (4 shapes so far)"), (2, 200, ""),
        (3, 50, " | 1 micro-batches on new shapes (5 shapes so far)"), (4, 400, "")))
    rates = log_rates("1,000 parameters on cuda, bf16\n" + log)
    assert rates["tgt_tok_s"] == round((200 + 50 + 400) / 3)
    assert rates["steady_tgt_tok_s"] == 300 and rates["steady_windows"] == "2/3"
    assert (rates["params"], rates["precision"], rates["auto_max_tokens"]) == ("1,000", "bf16", None)
