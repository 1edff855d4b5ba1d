"""Process-level settings for training and decoding: device, threads, precision, allocator."""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import logging
import os
import sys
from dataclasses import dataclass

import torch

from .files import InputError

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


def setup(threads: int | None, device: str = "auto", cudnn_attention: bool = False) -> torch.device:
    """Fix the thread count and pick the device (`auto`: CUDA when present, else CPU).

    Under torchrun each process takes the GPU of its LOCAL_RANK. On CUDA, `cuda_defaults`.
    """
    if threads:
        torch.set_num_threads(threads)
    tune_malloc()
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        device = f"cuda:{os.environ['LOCAL_RANK']}"
        torch.cuda.set_device(device)
    if device.startswith("cuda"):
        cuda_defaults(cudnn_attention)
    return torch.device(device)


def cpu_training_defaults() -> None:
    """A CPU training's attention through SDPA's math kernels (batched matmuls and a softmax), not its
    CPU flash kernel: in bf16 that kernel's backward took 46 ms a call where the whole math path takes
    14, on the `tiny` Base's shapes (160 sentences, 4 heads of 32, ~26 tokens), 40 % of an update on one
    thread (docs/measurements.md, "Where a tiny training step goes"). Decoding keeps flash: its one-query
    steps ran 141-157 sentences/s with it, 130-133 without. torch's switch is named for CUDA and is
    global: a CPU training process sets it, and no GPU one."""
    torch.backends.cuda.enable_flash_sdp(False)


def cuda_defaults(cudnn_attention: bool = False) -> None:
    """TF32 for fp32 matmuls and convolutions (Ampere and newer; a no-op before): the papers' fp32
    numbers came from GPUs without it, and at 10 bits of mantissa it changes no result that a BLEU
    point can see. Attention through the flash or memory-efficient kernels, not cuDNN's, which torch
    prefers on Hopper: cuDNN builds an execution plan for every new shape, and token batches bring
    new padded lengths all the time (measured on an H100: docs/measurements.md).
    `cudnn_attention` lets SDPA take cuDNN's kernels too: a CUDA-graph step meets a few dozen shapes,
    each planned once (the train setting of that name)."""
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.backends.cuda.enable_cudnn_sdp(cudnn_attention)


@dataclass(frozen=True)
class Distributed:
    """This process's place in a torchrun job and the process groups its collectives use.

    NCCL reduces CUDA tensors only: a CPU tensor sent through an NCCL group fails with "No backend
    type associated with device type cpu". So every collective names its group: `device` for
    tensors on the training device (gradients, the update's totals), `host` for CPU-side bookkeeping
    (step times, stop signals, RNG states for a checkpoint). None is the default group, which carries
    both where it has a backend for each (`cpu:gloo,cuda:nccl` on GPUs, gloo on CPU).
    """
    rank: int = 0
    world: int = 1
    device: object = None
    host: object = None


def distributed(device: torch.device) -> Distributed:
    """The torchrun environment's rank and world size, joining the process group when world > 1.

    The default group is `cpu:gloo,cuda:nccl` on GPUs and gloo on CPU (the tests run two CPU
    processes). A group joined before, that carries no CPU tensors (a test's simulation of an
    NCCL-only group), is kept: the host's collectives then get a gloo group of their own, and so does
    the device's when it is the CPU.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Distributed()
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group("cpu:gloo,cuda:nccl" if device.type == "cuda" else "gloo")
    carried = {part.split(":")[0] for part in torch.distributed.get_backend_config().split(",")}
    host = None if "cpu" in carried else torch.distributed.new_group(backend="gloo")
    return Distributed(torch.distributed.get_rank(), world, None if device.type in carried else host, host)


def to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor on `device`. To a GPU it goes through pinned (page-locked) memory without blocking:
    the copy waits its turn on the stream and the host goes on, where a copy from pageable memory first
    waits for every kernel queued before it."""
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def bf16_is_fast(device: torch.device) -> bool:
    """bf16 pays on Ampere and newer GPUs and on CPUs with AVX-512; on AVX2-only CPUs its matmuls run
    ~20x slower, and the papers' P100s and V100s have no bf16 units at all."""
    if device.type == "cuda":
        return torch.cuda.get_device_capability(device) >= (8, 0)
    return torch.backends.cpu.get_cpu_capability().startswith("AVX512")


PRECISIONS = ("fp32", "bf16", "fp16")


def resolve_precision(device: torch.device, precision: str) -> str:
    """The precision to run: bf16 where it is fast; where it is not, fp16 with a gradient scaler on
    a GPU (P100, V100: fast fp16, no bf16) and fp32 on a CPU. fp16 asked for by name is kept."""
    if precision not in PRECISIONS:
        raise InputError(f"precision {precision!r}; known: {list(PRECISIONS)}")
    if precision == "bf16" and not bf16_is_fast(device):
        fallback = "fp16" if device.type == "cuda" else "fp32"
        log.warning("bf16 asked for, but %s has no fast bf16: using %s", _device_name(device), fallback)
        return fallback
    return precision


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)} (compute capability {torch.cuda.get_device_capability(device)})"
    return f"this CPU ({torch.backends.cpu.get_cpu_capability()})"


def autocast(device: torch.device, precision: str):
    """bf16 or fp16 autocast as `precision` says (pass it through resolve_precision first); else fp32."""
    if precision in ("bf16", "fp16"):
        return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)
    return contextlib.nullcontext()


def grad_scaler(device: torch.device, precision: str) -> torch.amp.GradScaler:
    """fp16's loss scaler (a pass-through for fp32 and bf16, whose range needs none).

    It starts at fairseq's 2^7, not torch's 2^16: the loss is summed over an update's tokens, so at
    2^16 the first updates of every run overflow until the scale has backed off."""
    return torch.amp.GradScaler(device.type, init_scale=2.0 ** 7, enabled=precision == "fp16")
