"""Where a stretch of training time goes, from torch's profiler: the share of the wall the GPU was busy,
its time by kind of kernel, its idle time by what the host ran meanwhile, and the ops that took the most
host and GPU time; a profiled window of updates that is dropped and profiled again while it holds a
micro-batch on a new shape; the median time of a call.

The trainer does not profile itself: the benchmarks and the GPU checks do (bench/timed_steps.py wraps
our trainer's or fairseq's update with `Profile`, bench/swan_loss.py summarises NPMT's pass), and what
they conclude rests on these numbers, so they live here, tested (tests/test_profiling.py). It imports
nothing of the package but torch: bench/timed_steps.py runs it under fairseq's Python as well.

Under the profiler (CUPTI) a CUDA graph's launch traces every kernel in it: the host times of a graph
replay are inflated, and so the busy share of the wall. The kernels' own times are not:
`rates.kernel_bound` divides them by the unprofiled steady time of an update instead.
"""
from __future__ import annotations

import bisect
import json
import re
import statistics
import time

import torch


def busy_seconds(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals: time during which at least one ran."""
    busy, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            busy += end - max(start, reach)
            reach = end
    return busy


PYTHON = "Python, between ops"
IDLE_SHOWN = 8  # the host ops a summary names for the GPU's idle time


def idle_by_host_op(host: list[tuple], device: list[tuple[float, float]], shortest: float = 10e-6) -> dict[str, float]:
    """The GPU's idle time between its first and last kernel, by what the host was doing meanwhile.

    `host`: (name, thread, start, end) of the host's top-level ops (each thread's do not overlap);
    `device`: (start, end) of the kernels and copies. Each gap of at least `shortest` seconds between
    them is put down to the top-level op that was running at its middle (the latest to start, on any
    thread: the autograd engine runs backward on a thread of its own), or to `PYTHON` when none was
    (the tool's own Python between ops: collating a batch, its bookkeeping between updates). A step
    that is host-bound says here where its host time is not hidden behind the GPU's: an update's end
    (the sync before the optimizer, then the next update's first launch), a compiled graph's call."""
    threads: dict = {}
    for name, thread, start, end in sorted(host, key=lambda op: op[2]):
        threads.setdefault(thread, ([], []))
        threads[thread][0].append(start)
        threads[thread][1].append((end, name))
    idle: dict[str, float] = {}
    reach = None
    for start, end in sorted(device):
        if reach is not None and start - reach >= shortest:
            middle, running = (start + reach) / 2, (float("-inf"), PYTHON)
            for starts, ops in threads.values():
                i = bisect.bisect_right(starts, middle) - 1
                if i >= 0 and ops[i][0] > middle and starts[i] > running[0]:
                    running = (starts[i], ops[i][1])
            idle[running[1]] = idle.get(running[1], 0.0) + start - reach
        reach = end if reach is None else max(reach, end)
    return dict(sorted(idle.items(), key=lambda item: -item[1]))


TRIES = 5  # profiled windows at most, until one holds no micro-batch on a new shape
# (kind, pattern of a kernel's name): the first that matches names it. Kernel names by library: cuBLAS's
# nvjet/gemm, cutlass's; SDPA's flash, memory-efficient (fmha_cutlass) and cuDNN (cudnn..., sdpa);
# inductor's triton_* named for the ops they fuse (the label-smoothed loss: log_softmax).
KERNEL_KINDS = (
    ("attention", r"flash|fmha|attention|sdpa|mha"),
    ("loss", r"log_softmax|nll_loss|cross_entropy"),
    ("optimizer, gradient sums", r"adam|multi_tensor|foreach"),
    ("matmul", r"gemm|nvjet|cutlass|xmma|cublas|splitk"),
    ("copies, fills", r"^memcpy|^memset"),
    ("other (elementwise, norms, reductions)", r""),
)


def kernel_kind(name: str) -> str:
    """The kind (KERNEL_KINDS) of a kernel or copy named `name`."""
    return next(kind for kind, pattern in KERNEL_KINDS if re.search(pattern, name, re.IGNORECASE))


class Profile:
    """torch's profiler over the updates after update `first`, `count` of them, its summary written to
    `path` (.txt and .json) when they end; a window that met a new shape is profiled again (TRIES)."""

    def __init__(self, first: int, count: int, path: str):
        self.first, self.count, self.path, self.profiler = first, count, path, None
        self.began, self.warm, self.tokens, self.tries = 0.0, 0, 0, 0

    def after(self, update: int, warm: int, tokens: int) -> None:
        """Called at the end of each update (1-based), with the warm calls so far and its target tokens."""
        if self.profiler is not None and update <= self.first + self.count:
            self.tokens += tokens
        if update == self.first + self.count and self.profiler is not None:
            if torch.cuda.is_initialized():
                torch.cuda.synchronize()
            wall = time.perf_counter() - self.began
            self.profiler.stop()
            if warm == self.warm or self.tries == TRIES:
                self.write(wall, warm - self.warm)
                return
            self.first = update  # not the steady pace: the next window instead
        if update == self.first:
            self.warm, self.tokens, self.tries = warm, 0, self.tries + 1
            self.profiler = profiler(torch.cuda.is_available() and torch.cuda.is_initialized())
            self.profiler.start()
            self.began = time.perf_counter()

    def write(self, wall: float, warm: int) -> None:
        what = f"updates {self.first + 1}..{self.first + self.count}"
        note = (f" ({self.tries} windows profiled: each before held micro-batches on new shapes)" * (self.tries > 1)
                + f"; {warm} of their micro-batches on new shapes (compiled, warmed up or recorded)" * bool(warm))
        text, numbers = summarise(self.profiler, wall, what, note, (self.count, "an update"))
        numbers.update(first=self.first + 1, last=self.first + self.count, warm=warm, tries=self.tries,
                       tokens=self.tokens)
        with open(self.path + ".txt", "w") as handle:
            handle.write(text + "\n")
        with open(self.path + ".json", "w") as handle:
            json.dump(numbers, handle, indent=1)


def profiler(cuda: bool):
    """torch's profiler of the host's ops, and of the GPU's kernels and copies where `cuda`."""
    activities = [torch.profiler.ProfilerActivity.CPU] + [torch.profiler.ProfilerActivity.CUDA] * cuda
    return torch.profiler.profile(activities=activities)


def median_microseconds(run, repeats: int, warmups: int, cuda: bool) -> float:
    """The median time of `run()` over `repeats` calls after `warmups` untimed ones, each call's GPU work
    waited for where `cuda`: a kernel bench's figure (bench/gpu_kernels.py)."""
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    for _ in range(warmups):
        run()
    times = []
    for _ in range(repeats):
        sync()
        began = time.perf_counter()
        run()
        sync()
        times.append(time.perf_counter() - began)
    return 1e6 * statistics.median(times)


def summarise(profiler, wall: float, what: str, note: str = "", per: tuple[int, str] = (1, ""),
              detail: str = "") -> tuple[str, dict]:
    """A stopped profiler's account of `wall` seconds of `what` (`note` ends its first line, `detail` is
    the line after it): the share of it the GPU was busy, the GPU's time by kind of kernel (divided by
    `per`'s count of things, "an update" say), and the ops that took the most host and GPU time; and
    those numbers (seconds) as a dict."""
    device = [e for e in profiler.events() if e.device_type.name == "CUDA" and not e.is_user_annotation]
    busy = busy_seconds([(e.time_range.start / 1e6, e.time_range.end / 1e6) for e in device])
    kinds = {kind: 0.0 for kind, _ in KERNEL_KINDS}
    for event in device:
        kinds[kernel_kind(event.name)] += (event.time_range.end - event.time_range.start) / 1e6
    table = profiler.key_averages()
    head = f"{what}: {wall:.3f} s wall" + (
        f", the GPU busy {busy:.3f} s ({100 * busy / wall:.0f} %) over {len(device)} kernels and copies"
        if device else " (no GPU activity recorded)") + note
    total = sum(kinds.values())
    by_kind = (f"the GPU's time by kind {per[1]}".rstrip() + ": " + ", ".join(
        f"{kind} {1000 * seconds / per[0]:.1f} ms ({100 * seconds / total:.0f} %)"
        for kind, seconds in sorted(kinds.items(), key=lambda item: -item[1]) if seconds)) if total else ""
    # top-level host ops; a compiled graph's call is named by its hash, left out so that its calls add up
    host = [(re.sub(r" f[0-9a-z]{20,}.*", "", e.name), e.thread, e.time_range.start / 1e6, e.time_range.end / 1e6)
            for e in profiler.events() if e.device_type.name == "CPU" and e.cpu_parent is None]
    idle = idle_by_host_op(host, [(e.time_range.start / 1e6, e.time_range.end / 1e6) for e in device])
    waits = (f"the GPU idle between kernels {1000 * sum(idle.values()) / per[0]:.1f} ms {per[1]}".rstrip()
             + ", while the host ran: " + ", ".join(f"{name} {1000 * seconds / per[0]:.1f} ms"
                                                    for name, seconds in list(idle.items())[:IDLE_SHOWN])) if idle else ""
    text = "\n\n".join(["\n".join(line for line in (head, detail, by_kind, waits) if line),
                        table.table(sort_by="self_cpu_time_total", row_limit=20)]
                       + [table.table(sort_by="self_device_time_total", row_limit=15)] * bool(device))
    return text, {"wall_s": wall, "busy_s": busy, "kinds_s": {kind: s for kind, s in kinds.items() if s},
                  "idle_s": idle}


def head(summary_file) -> str:
    """A written summary's first paragraph (`summarise`): the wall and busy share, the GPU's time by
    kind and its idle time by host op, the lines a bench prints of it."""
    with open(summary_file) as handle:
        return handle.read().split("\n\n")[0]
