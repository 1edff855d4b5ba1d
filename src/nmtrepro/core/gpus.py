"""`nmtrepro with-gpus N -- CMD ...`: run CMD on N GPUs of this machine that no other job holds.

Snakemake's local scheduler only counts GPUs (`--resources gpu=4`): it never says which ones a job may
use, so two 4-GPU trainings on an 8-GPU machine would both start on devices 0-3 and every decode on
device 0. This command gives each job its own devices: it claims N slots by a non-blocking `flock` on
one lock file per device (waiting while fewer than N are free), sets CUDA_VISIBLE_DEVICES to the
claimed ones and execs CMD. The lock files stay open across the exec, so the devices are held until
CMD exits, however it ends (a killed job frees them too); torchrun then numbers them 0..N-1.

A device may hold several jobs at once (`--slots S`, the scale's `jobs_per_gpu`): small models cannot
fill a GPU alone, so the `gpu` scale runs eight trainings and decodes on one card. Each device then has
S lock files and a job takes one of them on each of its N devices; slot 0 is the device's whole-card
lock, so a job that claims whole devices (S = 1) and the first job of a shared device exclude each other.
With `--free-mb M` a slot counts as free only while the device has M MB of memory free (nvidia-smi's
reading), so a job that would not fit waits for one to end instead of crashing on out-of-memory.

Under SLURM (SLURM_JOB_ID set) the allocation already pins the job's GPUs, a job with N = 0 uses
none, and where no GPU is visible at all (a CPU machine: the `smoke` scale's trainings run N CPU
processes) there is nothing to pin: the command then only runs CMD.
"""
from __future__ import annotations

import argparse
import fcntl
import logging
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from .files import InputError

log = logging.getLogger("nmtrepro.core.gpus")


def default_lock_dir() -> Path:
    """One folder per user and machine, shared by every workflow run of that user there: /tmp, not
    $TMPDIR, which Snakemake may set per job (its `tmpdir` resource)."""
    return Path("/tmp") / f"nmtrepro-gpus-{os.getuid()}"


def visible_devices() -> list[str]:
    """The devices this process may use: CUDA_VISIBLE_DEVICES's list when set (ids or UUIDs), else all."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [d.strip() for d in listed.split(",") if d.strip()]
    import torch  # only when no list is given: the light path needs no torch

    return [str(i) for i in range(torch.cuda.device_count())]


def lock_path(lock_dir: Path, device: str, slot: int) -> Path:
    """Slot 0 is the whole device's lock (`gpu-<id>.lock`), slot k > 0 `gpu-<id>.slot<k>.lock`."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", device)
    return lock_dir / (f"gpu-{name}.lock" if slot == 0 else f"gpu-{name}.slot{slot}.lock")


def free_memory_mb(device: str) -> int | None:
    """The device's free memory in MB as nvidia-smi reads it (`device` an index or UUID as in
    CUDA_VISIBLE_DEVICES); None where nvidia-smi is missing or does not list the device."""
    if shutil.which("nvidia-smi") is None:
        return None
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,memory.free", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        index, uuid, free = (field.strip() for field in line.split(","))
        if device in (index, uuid):
            return int(free)
    return None


def _lock_slot(device: str, slots: int, lock_dir: Path) -> int | None:
    """An open fd holding one free slot of `device`, or None when all `slots` are held."""
    for slot in range(slots):
        fd = os.open(lock_path(lock_dir, device, slot), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return fd
    return None


def count_visible() -> int:
    """How many GPUs this machine shows, without importing torch (the workflow asks at every start):
    CUDA_VISIBLE_DEVICES's list where set, else nvidia-smi's, else 0."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return len([d for d in listed.split(",") if d.strip()])
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return sum(line.startswith("GPU ") for line in out.splitlines())


def try_claim(n: int, devices: list[str], lock_dir: Path, slots: int = 1, free_mb: int = 0,
              free_of: Callable[[str], int | None] = free_memory_mb) -> tuple[list[str], list[int]] | None:
    """Lock a slot on each of n of `devices` without waiting: (claimed ids, open lock fds), or None
    with nothing held. A device whose memory free (`free_of`; None: unknown, taken as enough) is below
    `free_mb` is passed over.

    A partial claim is released at once, so two jobs that each find half of what they need never
    hold it while waiting for the other half.
    """
    lock_dir.mkdir(parents=True, exist_ok=True)
    claimed, fds = [], []
    for device in devices:
        fd = _lock_slot(device, slots, lock_dir)
        if fd is None:
            continue
        free = free_of(device) if free_mb else None
        if free is not None and free < free_mb:
            os.close(fd)
            continue
        claimed.append(device)
        fds.append(fd)
        if len(claimed) == n:
            return claimed, fds
    for fd in fds:
        os.close(fd)
    return None


def claim(n: int, devices: list[str], lock_dir: Path, poll_seconds: float = 10.0, slots: int = 1,
          free_mb: int = 0, free_of: Callable[[str], int | None] = free_memory_mb) -> tuple[list[str], list[int]]:
    """Block until a slot on each of n of `devices` is free (and, with `free_mb`, their memory is),
    then hold them (see `try_claim`)."""
    if n > len(devices):
        raise InputError(f"{n} GPUs asked for, but only {len(devices)} visible "
                         f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}); "
                         "lower the job's `gpu` resource or the --resources gpu limit")
    if slots < 1:
        raise InputError(f"--slots {slots}: a device has at least one slot")
    waited = False
    while (got := try_claim(n, devices, lock_dir, slots, free_mb, free_of)) is None:
        if not waited:
            log.info("waiting for %d GPUs of %s with a free slot of %d%s (locks in %s)", n, ",".join(devices),
                     slots, f" and {free_mb} MB free" if free_mb else "", lock_dir)
            waited = True
        time.sleep(poll_seconds)
    return got


def add_arguments_with_gpus(parser: argparse.ArgumentParser) -> None:
    # Options go before N: everything after it is the command's.
    parser.add_argument("--lock-dir", type=Path, default=default_lock_dir(),
                        help="folder of the per-device lock files, shared by all jobs on this machine")
    parser.add_argument("--poll-seconds", type=float, default=10.0, help="how often a waiting claim retries")
    parser.add_argument("--slots", type=int, default=1,
                        help="jobs one device holds at once (the scale's jobs_per_gpu); the job takes one slot a device")
    parser.add_argument("--free-mb", type=int, default=0,
                        help="start only on devices with this much memory free (nvidia-smi), else wait")
    parser.add_argument("gpus", type=int, help="GPUs the command needs (0: run it as is)")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARG ...: the command to run on them")


def run_with_gpus(args: argparse.Namespace) -> None:
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        raise InputError("no command given (nmtrepro with-gpus N -- CMD ...)")
    if args.gpus < 0:
        raise InputError(f"GPU count {args.gpus} is negative")
    devices = visible_devices() if args.gpus and "SLURM_JOB_ID" not in os.environ else []
    if devices:
        claimed, fds = claim(args.gpus, devices, args.lock_dir, args.poll_seconds, args.slots, args.free_mb)
        for fd in fds:
            os.set_inheritable(fd, True)  # held by CMD after the exec
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(claimed)
        log.info("running on GPUs %s", os.environ["CUDA_VISIBLE_DEVICES"])
    elif args.gpus and "SLURM_JOB_ID" not in os.environ:
        log.warning("%s asks for %d GPUs, but none is visible: it runs on the CPU, with nothing pinned",
                    command[0], args.gpus)
    try:
        os.execvp(command[0], command)
    except FileNotFoundError:
        raise InputError(f"command not found: {command[0]}") from None
