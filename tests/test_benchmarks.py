"""The benchmarks that the GPU checks call (device/README.md) run on a CPU, at sizes a CPU runs in seconds
to minutes, as the scripts they are: the tests run bench/, never import it. What a benchmark computes
with is the package's, tested beside its module (test_flops.py, test_profiling.py, test_equality.py)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def run(script: str, *args, **kwargs) -> subprocess.CompletedProcess:
    """bench/`script` with `args` on this checkout's package, one thread, its output captured."""
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, env=env,
                          **{"timeout": 300, **kwargs})


def test_gpu_train_smoke_run_on_cpu_trains_each_family_and_resumes(tmp_path):
    """Each variant trains in one process with update 2 profiled (timed_steps.py); the resume goes
    through torchrun, as the benches' runs without --profile do."""
    variants = [arg for v in ("transformer_base", "phrase_max_attn_ta_parse", "syn_diverse") for arg in ("--variant", v)]
    result = run("gpu_train.py", "--device", "cpu", "--scale", "ci", "--updates", "4", "--log-every", "2",
                 "--pairs", "300", "--vocab", "500", "--iwslt-vocab", "400", *variants, "--resume",
                 "--profile", "1:1", "--out", str(tmp_path), timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rows = json.loads((tmp_path / "gpu_train.json").read_text())
    assert [r["variant"] for r in rows] == ["transformer_base", "phrase_max_attn_ta_parse", "syn_diverse",
                                            "transformer_base"]
    assert all(r["tgt_tok_s"] > 0 and r["precision"] in ("fp32", "bf16") for r in rows[:3])
    assert rows[3] == {"variant": "transformer_base", "resume": "ok"}
    profiled = (tmp_path / "syn_diverse.steps.profile.txt").read_text()
    assert profiled.startswith("updates 2..2: ") and profiled.split("\n\n")[0] in result.stdout


def test_fast_equality_hands_gpu_train_every_option_it_reads(tmp_path):
    """fast_equality.py runs its trainings through gpu_train.train, which reads gpu_train's options: a
    run that misses one (`--profile` did, and the GPU check's `graphs` step died on it before training)
    must instead reach the trainer. Here the trainer's process fails at once (no such device), which is
    the eager run's row error, and the fast run never starts."""
    result = run("fast_equality.py", "--device", "nosuch", "--variant", "transformer_base", "--pairs", "40",
                 "--out", str(tmp_path))
    assert result.returncode == 1, result.stderr[-2000:]
    assert "nmtrepro.cli FAILED" in json.loads((tmp_path / "fast_equality.json").read_text())[0]["error"]
    assert "nosuch" in (tmp_path / "eager/transformer_base.eager.log").read_text()
    assert not list(tmp_path.glob("fast/*.log"))


def test_attention_kernels_rehearses_on_cpu_where_only_math_runs():
    """bench/gpu_kernels.py attention on a CPU: the fused backends say n/a, math runs every case and agrees
    with itself."""
    done = run("gpu_kernels.py", "attention", "--device", "cpu", "--tokens", "64", "--lengths", "8", "--repeats", "1",
               "--heads", "2", "--d-head", "8", check=True)
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith(("masked ", "causal "))]
    assert [row[:4] for row in rows[:2]] == [["masked", "64", "8", "8"], ["causal", "64", "8", "8"]]
    assert all(row[4:7] == ["n/a"] * 3 and row[8] == "(0.0e+00)" for row in rows[:2])


def test_loss_kernels_rehearse_on_cpu_both_forms_agree_and_fp32_logits_keep_the_same_bytes():
    """bench/gpu_kernels.py loss on a CPU: both forms of the loss, eager and compiled, on one size; each
    agrees with the ops' eager loss and gradient to fp32's rounding; with fp32 logits both keep one
    (rows, V) tensor for backward (bf16 logits on a GPU: ours keeps them, the ops an fp32 copy)."""
    done = run("gpu_kernels.py", "loss", "--device", "cpu", "--rows", "64", "--vocab", "4096", "--repeats", "1", check=True)
    rows = {row[1]: row for row in map(str.split, done.stdout.splitlines()) if row[:1] == ["64"] and row[2] != "/"}
    assert set(rows) == {"ops", "ours"}
    for row in rows.values():
        assert row[4] == row[5] == "1" and float(row[6]) < 1e-5 and float(row[7]) < 1e-4   # 64 x 4096 x 4 B
    assert re.search(r"64 ops / ours: eager [\d.]+x, compiled [\d.]+x", done.stdout)


def test_swan_loss_profile_names_the_host_time_of_each_part_of_npmt(tmp_path):
    """bench/swan_loss.py --profile: the host's time in NPMT's encoder, segment decoder and dynamic
    program (ranges put around them while it profiles)."""
    run("swan_loss.py", "--d-model", "8", "--vocab", "50", "--tokens", "60", "--lengths", "6", "--max-segments", "2",
        "--repeats", "1", "--profile", str(tmp_path / "npmt.txt"), check=True, cwd=BENCH)
    line = (tmp_path / "npmt.txt").read_text().splitlines()[1]
    assert line.startswith("the host's time a batch: encoder ") and "segment decoder" in line
    assert "dynamic program" in line and "the rest of the pass" in line
    backward = re.search(r"\(forward\); dynamic program ([\d.]+) ms, normaliser ([\d.]+) ms \(backward\)", line)
    assert backward and all(float(ms) > 0 for ms in backward.groups())   # their autograd nodes were found
    assert int(re.search(r"; (\d+) autograd nodes a batch$", line).group(1)) > 0
