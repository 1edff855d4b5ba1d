"""Process-level settings for training and decoding: device, threads, precision, allocator."""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import sys

import torch

log = logging.getLogger("nmtrepro.core.runtime")

# glibc mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_MAX = -1, -2, -4


def tune_malloc() -> None:
    """Stop glibc from mmapping and unmapping the large per-step tensors (the logits) every step.

    Measured on the 2-core CPU machines this project targets, that churn costs 25-60% of a small
    model's training step; keeping freed memory in the heap removes it. A no-op off glibc.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(_M_MMAP_MAX, 0)
        libc.mallopt(_M_TRIM_THRESHOLD, 2**30)
        libc.mallopt(_M_TOP_PAD, 2**28)
    except (OSError, AttributeError):
        pass


def setup(threads: int | None, device: str = "auto") -> torch.device:
    """Fix the thread count and pick the device (`auto`: CUDA when present, else CPU).

    Under torchrun each process takes the GPU of its LOCAL_RANK.
    """
    if threads:
        torch.set_num_threads(threads)
    tune_malloc()
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        device = f"cuda:{os.environ['LOCAL_RANK']}"
        torch.cuda.set_device(device)
    return torch.device(device)


def distributed(device: torch.device) -> tuple[int, int]:
    """(rank, world size) from torchrun's environment, joining the process group when world > 1.

    NCCL for GPUs, gloo on CPU (the tests run two CPU processes).
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return torch.distributed.get_rank(), world


def bf16_is_fast(device: torch.device) -> bool:
    """bf16 pays on CUDA and on CPUs with AVX-512; on AVX2-only CPUs its matmuls run ~20x slower."""
    return device.type == "cuda" or torch.backends.cpu.get_cpu_capability().startswith("AVX512")


def resolve_precision(device: torch.device, precision: str) -> str:
    if precision == "bf16" and not bf16_is_fast(device):
        log.warning("bf16 asked for, but this CPU (%s) has no fast bf16 matmul: using fp32",
                    torch.backends.cpu.get_cpu_capability())
        return "fp32"
    return precision


def autocast(device: torch.device, precision: str):
    """bf16 autocast when `precision` is bf16 (pass it through resolve_precision first); else fp32."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
