"""`nmtrepro with-gpus`: each local job gets GPUs of its own; under SLURM the allocation decides."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from nmtrepro.core.files import InputError
from nmtrepro.core.gpus import claim, try_claim, visible_devices


def with_gpus(tmp_path, n: int, name: str, env: dict, slots: int = 1) -> subprocess.Popen:
    """`nmtrepro with-gpus n` running a shell that writes the devices it sees to <name>.seen and then
    holds them until <name>.done exists."""
    script = f'echo "$CUDA_VISIBLE_DEVICES" > {name}.seen; while [ ! -e {name}.done ]; do sleep 0.05; done'
    return subprocess.Popen([sys.executable, "-m", "nmtrepro.cli", "with-gpus", "--lock-dir", str(tmp_path / "locks"),
                             "--poll-seconds", "0.05", "--slots", str(slots), str(n), "--", "sh", "-c", script],
                            cwd=tmp_path, env={**os.environ, **env}, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def seen(tmp_path, name: str, timeout: float = 30.0) -> list[str]:
    path = tmp_path / f"{name}.seen"
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text().endswith("\n")):
        assert time.monotonic() < deadline, f"{name} never started"
        time.sleep(0.05)
    return path.read_text().strip().split(",")


def finish(tmp_path, name: str, proc: subprocess.Popen) -> None:
    (tmp_path / f"{name}.done").touch()
    assert proc.wait(timeout=30) == 0, proc.stderr.read()


@pytest.fixture
def four_gpus(monkeypatch):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    return {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}


def test_concurrent_claims_get_disjoint_devices_and_a_third_waits_for_a_release(tmp_path, four_gpus):
    first, second = with_gpus(tmp_path, 2, "first", four_gpus), with_gpus(tmp_path, 2, "second", four_gpus)
    a, b = seen(tmp_path, "first"), seen(tmp_path, "second")
    assert len(a) == len(b) == 2 and set(a) | set(b) == {"0", "1", "2", "3"}

    third = with_gpus(tmp_path, 1, "third", four_gpus)
    time.sleep(1.0)
    assert not (tmp_path / "third.seen").exists(), "a third job started while all four GPUs were held"
    finish(tmp_path, "first", first)
    assert set(seen(tmp_path, "third")) < set(a)
    finish(tmp_path, "second", second)
    finish(tmp_path, "third", third)


def test_a_shared_device_runs_as_many_jobs_as_it_has_slots_and_the_next_waits(tmp_path, four_gpus):
    one_gpu = {"CUDA_VISIBLE_DEVICES": "0"}
    jobs = {f"job{i}": with_gpus(tmp_path, 1, f"job{i}", one_gpu, slots=3) for i in range(3)}
    assert all(seen(tmp_path, name) == ["0"] for name in jobs)
    waiting = with_gpus(tmp_path, 1, "fourth", one_gpu, slots=3)
    time.sleep(1.0)
    assert not (tmp_path / "fourth.seen").exists(), "a fourth job started on a device of three slots"
    finish(tmp_path, "job1", jobs.pop("job1"))
    assert seen(tmp_path, "fourth") == ["0"]
    for name, proc in {**jobs, "fourth": waiting}.items():
        finish(tmp_path, name, proc)


def test_a_killed_job_frees_its_slot(tmp_path, four_gpus):
    one_gpu = {"CUDA_VISIBLE_DEVICES": "0"}
    holders = [with_gpus(tmp_path, 1, f"holder{i}", one_gpu, slots=2) for i in range(2)]
    for i in range(2):
        seen(tmp_path, f"holder{i}")
    waiting = with_gpus(tmp_path, 1, "next", one_gpu, slots=2)
    time.sleep(0.5)
    assert not (tmp_path / "next.seen").exists()
    os.killpg(holders[0].pid, signal.SIGKILL)  # the job and its shell's children, as a killed Snakemake job
    holders[0].wait(timeout=30)
    assert seen(tmp_path, "next") == ["0"]
    finish(tmp_path, "holder1", holders[1])
    finish(tmp_path, "next", waiting)


def test_a_slot_counts_as_free_only_while_its_device_has_the_memory(tmp_path):
    free = {"0": 0, "1": 30000}
    devices, fds = claim(1, ["0", "1"], tmp_path, slots=8, free_mb=20000, free_of=free.get)
    assert devices == ["1"], "the job went to the device without the memory it needs"
    assert try_claim(1, ["0"], tmp_path, slots=8, free_mb=20000, free_of=free.get) is None
    free["0"] = 25000  # another job ended
    again, more = claim(1, ["0"], tmp_path, slots=8, free_mb=20000, free_of=free.get)
    assert again == ["0"]
    for fd in fds + more:
        os.close(fd)


def test_claims_pick_from_the_visible_devices_only(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    devices, fds = claim(2, visible_devices(), tmp_path)
    assert devices == ["5", "7"]
    for fd in fds:
        os.close(fd)


def test_asking_for_more_gpus_than_visible_is_an_input_error(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    with pytest.raises(InputError, match="5 GPUs asked for, but only 4 visible"):
        claim(5, visible_devices(), tmp_path)


@pytest.mark.parametrize("env, n, visible", [
    ({"SLURM_JOB_ID": "42"}, 4, ["0", "1", "2", "3"]),
    ({}, 0, ["0", "1", "2", "3"]),
    ({"CUDA_VISIBLE_DEVICES": ""}, 2, [""]),
], ids=["under-slurm", "asks-for-none", "none-visible"])
def test_under_slurm_or_without_gpus_the_command_runs_as_is(tmp_path, four_gpus, env, n, visible):
    proc = with_gpus(tmp_path, n, "job", {**four_gpus, **env})
    assert seen(tmp_path, "job") == visible
    (tmp_path / "job.done").touch()
    assert proc.wait(timeout=30) == 0
    warned = "asks for 2 GPUs, but none is visible: it runs on the CPU" in proc.stderr.read()
    assert warned == (env == {"CUDA_VISIBLE_DEVICES": ""})  # pinning nothing is said, once it matters
    assert not (tmp_path / "locks").exists()
