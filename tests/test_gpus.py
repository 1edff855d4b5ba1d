"""`nmtrepro with-gpus`: each local job gets GPUs of its own; under SLURM the allocation decides."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from nmtrepro.core.files import InputError
from nmtrepro.core.gpus import claim, visible_devices


def with_gpus(tmp_path, n: int, name: str, env: dict) -> subprocess.Popen:
    """`nmtrepro with-gpus n` running a shell that writes the devices it sees to <name>.seen and then
    holds them until <name>.done exists."""
    script = f'echo "$CUDA_VISIBLE_DEVICES" > {name}.seen; while [ ! -e {name}.done ]; do sleep 0.05; done'
    return subprocess.Popen([sys.executable, "-m", "nmtrepro.cli", "with-gpus", "--lock-dir", str(tmp_path / "locks"),
                             "--poll-seconds", "0.05", str(n), "--", "sh", "-c", script],
                            cwd=tmp_path, env={**os.environ, **env}, stderr=subprocess.PIPE, text=True)


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
    finish(tmp_path, "job", proc)
    assert not (tmp_path / "locks").exists()
