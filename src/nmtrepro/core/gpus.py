"""`nmtrepro with-gpus N -- CMD ...`: run CMD on N GPUs of this machine that no other job holds.

Snakemake's local scheduler only counts GPUs (`--resources gpu=4`): it never says which ones a job may
use, so two 4-GPU trainings on an 8-GPU machine would both start on devices 0-3 and every decode on
device 0. This command gives each job its own devices: it claims N slots by a non-blocking `flock` on
one lock file per device (waiting while fewer than N are free), sets CUDA_VISIBLE_DEVICES to the
claimed ones and execs CMD. The lock files stay open across the exec, so the devices are held until
CMD exits, however it ends (a killed job frees them too); torchrun then numbers them 0..N-1.

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
import time
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


def try_claim(n: int, devices: list[str], lock_dir: Path) -> tuple[list[str], list[int]] | None:
    """Lock n of `devices` without waiting: (claimed ids, open lock fds), or None with nothing held.

    A partial claim is released at once, so two jobs that each find half of what they need never
    hold it while waiting for the other half.
    """
    lock_dir.mkdir(parents=True, exist_ok=True)
    claimed, fds = [], []
    for device in devices:
        path = lock_dir / f"gpu-{re.sub(r'[^A-Za-z0-9_.-]', '_', device)}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        claimed.append(device)
        fds.append(fd)
        if len(claimed) == n:
            return claimed, fds
    for fd in fds:
        os.close(fd)
    return None


def claim(n: int, devices: list[str], lock_dir: Path, poll_seconds: float = 10.0) -> tuple[list[str], list[int]]:
    """Block until n of `devices` are free, then hold them (see `try_claim`)."""
    if n > len(devices):
        raise InputError(f"{n} GPUs asked for, but only {len(devices)} visible "
                         f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')}); "
                         "lower the job's `gpu` resource or the --resources gpu limit")
    waited = False
    while (got := try_claim(n, devices, lock_dir)) is None:
        if not waited:
            log.info("waiting for %d free GPUs of %s (locks in %s)", n, ",".join(devices), lock_dir)
            waited = True
        time.sleep(poll_seconds)
    return got


def add_arguments_with_gpus(parser: argparse.ArgumentParser) -> None:
    # Options go before N: everything after it is the command's.
    parser.add_argument("--lock-dir", type=Path, default=default_lock_dir(),
                        help="folder of the per-device lock files, shared by all jobs on this machine")
    parser.add_argument("--poll-seconds", type=float, default=10.0, help="how often a waiting claim retries")
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
        claimed, fds = claim(args.gpus, devices, args.lock_dir, args.poll_seconds)
        for fd in fds:
            os.set_inheritable(fd, True)  # held by CMD after the exec
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(claimed)
        log.info("running on GPUs %s", os.environ["CUDA_VISIBLE_DEVICES"])
    try:
        os.execvp(command[0], command)
    except FileNotFoundError:
        raise InputError(f"command not found: {command[0]}") from None
