"""The fast path of a training step (setting `fast`): the same mathematics as the eager
step, with fewer kernels and no Python between them.

On an H100 the eager Transformer Base issues ~3,400 kernels a step and the GPU waits on Python; a
step compiled by `torch.compile` (inductor) fuses the elementwise work (layer norms, dropout, the
residuals, the label-smoothed loss) and launches each graph once. Every dimension of the step's inputs
is marked dynamic (sentences and lengths both vary between batches), so the whole step is one graph
compiled once. A first form compiled a graph per length bucket and another per bucket once the batch
size changed: on an H200 the paper Base's graphs had not all compiled after 200 s (bench/README.md).
A traced length broke the graph where the models branched on it; they no longer do (layers.py). The
loss projects every position and masks the padding (criterion.model_loss static=True) rather than
pick the real positions, whose count would be a data-dependent shape. Adam is fused (one kernel over
all the parameters) on either path. `buckets: true` (fewer distinct lengths, less padding) goes well
with it; parser phrases need it to compile whole (their batches then carry the longest phrase's
bucket as a shape: batching.collate).

`fast` is a setting a rerun may change (settings.RERUN_FREE): it changes how a step runs, not what it
computes, so a checkpoint of either path resumes on the other. Like a change of device, it draws
other dropout masks (inductor generates its own random numbers), and the float sums run in another
order; with dropout off the two paths agree to fp32 rounding (tests/test_fast.py).

`fast: graphs` compiles the same way and then replays each shape's step as a CUDA graph (inductor's
reduce-overhead mode, CUDA graph trees): one launch for a forward or a backward instead of a kernel at a
time, which is where the compiled Base still waits on the host. A graph replays one shape, so a batch
is padded to one of a few (`buckets: true` is required, and batching.fixed_rows adds rows without a
sentence, which change no sum); the dynamic graph is compiled once and each shape recorded once. Two
things keep the replays correct under gradient accumulation. A graph's outputs live in its memory
pool and are overwritten by the next replay, while autograd would keep the first micro-batch's
gradient itself as a parameter's .grad (pytorch/pytorch#169545): so the gradients are summed in
buffers of the trainer's own (`GradientSums`), one foreach add a micro-batch. And each micro-batch
opens a new step of the graph trees (cudagraph_mark_step_begin): what the trainer keeps of one
micro-batch (its loss in the update's totals, its gradients in the sums) it has already copied out.
On a CPU `graphs` compiles and pads as on a GPU, without graphs, so the CPU tests see the same
batches.

`fast: loss` compiles only the label-smoothed loss's two passes over the logits (criterion.py) and runs
the rest of the step eagerly: a CPU's fastest step. There the whole step compiled ran slower than eager
(inductor's CPU code for dropout, layer norms and residuals lost to torch's own kernels), while the loss,
a handful of elementwise passes over a (rows, V) tensor each, ran 2.5x as fast compiled
(docs/measurements.md, "Where a tiny training step goes").

A family whose step cannot be compiled stays eager and says why in the log. Where dynamo cannot trace
a part of a step, the step breaks there into graphs with that part run eagerly between them, and the
log names each break once: the GRUs (which dynamo leaves to eager code: traced, they would unroll over
the length) of the BiRNN families, +Fusing_Diverse's recurrence group and the GRU baselines break
their steps this way. They read nothing on the host (`layers.run_bidirectional`), so the GPU's queue
stays full across the break.
"""
from __future__ import annotations

import logging
from collections import Counter

import torch
from torch._dynamo.utils import counters

from .criterion import LossOf

log = logging.getLogger("nmtrepro.training.fast")


class FastPath:
    """The training step as the trainer runs it (setting `fast`), one object whatever the path: `loss`,
    the loss module it calls, eager or compiled (`fast_loss`); `gradients`, where an update's
    micro-batches sum their gradients (`Gradients`, or `GradientSums` under CUDA graphs); the shape a
    batch is padded to (`fixed`); and the log's note on micro-batches at new shapes (`warm_note`)."""

    def __init__(self, loss: LossOf, family: str | None, mode: str, buckets: bool, device: torch.device):
        self.loss = fast_loss(loss, family, mode, device, buckets)
        self.compiled = self.loss if isinstance(self.loss, CompiledLoss) else None
        self.graphs = mode == "graphs" and self.compiled is not None  # batches padded to fixed shapes
        self.gradients = GradientSums(loss.model) if self.graphs else Gradients(loss.model)
        self.warm_logged = 0  # the compiled loss's warm_calls at the last log line

    def fixed(self, max_tokens: int) -> int | None:
        """The padded tokens a training micro-batch of at most `max_tokens` is padded to (batching.collate's
        `fixed`): all of them under `graphs`, whose replays take fixed shapes (a CPU pads alike), else
        None (its own lengths)."""
        return max_tokens if self.graphs else None

    def warm_note(self) -> str:
        """For the log line: the micro-batches since the last one that compiled, warmed up or recorded a
        new shape (CompiledLoss.warm_calls), when there were any: the tok/s of such a window is below the
        run's pace."""
        if self.compiled is None or self.compiled.warm_calls == self.warm_logged:
            return ""
        warm, self.warm_logged = self.compiled.warm_calls - self.warm_logged, self.compiled.warm_calls
        return f" | {warm} micro-batches on new shapes ({len(self.compiled.shapes)} shapes so far)"


class CompiledLoss(torch.nn.Module):
    """A LossOf module (criterion.py) compiled once for every shape: each dimension of its inputs dynamic.
    Called as the LossOf is: (net_input, prev, target) -> (loss, nll) sums. `backend`: inductor, the
    trainer's; a test of the graph alone (its breaks, its dynamic shapes) may take "aot_eager", which
    traces forward and backward as inductor does but generates no code (seconds, not minutes, on a CPU).

    `warm_calls` counts the calls that did not run at the step's steady pace: a shape's first call
    (a dimension of size 1, say, may recompile), and with CUDA graphs its second too (graph trees
    warm a shape up eagerly, then record it, and only replay it from its third call). With a few dozen
    shapes of very different frequency, the rare ones still arrive tens of updates in, so a rate
    measured over the first hundred updates is not the run's (bench/README.md)."""

    def __init__(self, loss: torch.nn.Module, backend: str = "inductor", cuda_graphs: bool = False):
        """`cuda_graphs`: replay each shape's step as a CUDA graph (the module docstring says how)."""
        super().__init__()
        loss.static = True
        self.cuda_graphs = cuda_graphs
        if cuda_graphs:  # inductor warns past 8 shapes; ours are bounded by design (batching.fixed_shapes)
            from torch._inductor import config
            config.triton.cudagraph_dynamic_shape_warn_limit = None
        self.compiled = torch.compile(loss, backend=backend, mode="reduce-overhead" if cuda_graphs else None)
        self.shapes, self.warm_calls, self.breaks = Counter(), 0, set()

    def forward(self, net_input: dict, prev: torch.Tensor, target: torch.Tensor):
        tensors = (*net_input.values(), prev, target)
        shape = tuple(tuple(tensor.shape) for tensor in tensors)
        new = shape not in self.shapes
        self.warm_calls += self.shapes[shape] < (2 if self.cuda_graphs else 1)
        self.shapes[shape] += 1
        for tensor in tensors:  # (B, S or T, ...): sentences and lengths vary
            for dim in range(tensor.dim()):
                torch._dynamo.maybe_mark_dynamic(tensor, dim)
        if self.cuda_graphs:
            torch.compiler.cudagraph_mark_step_begin()
        if not new:
            return self.compiled(net_input, prev, target)
        before = Counter(counters["graph_break"])  # dynamo's count of each break's reason, process-wide
        out = self.compiled(net_input, prev, target)
        self._note_breaks(before)
        return out

    def _note_breaks(self, before: Counter) -> None:
        """Log each reason the compile of a new shape broke the step for, once: the code there runs
        eagerly between graphs (between CUDA graphs under `graphs`), and a host sync there stalls them."""
        for reason, count in counters["graph_break"].items():
            lines = [line.strip().removeprefix("Explanation: ") for line in reason.strip().splitlines()]
            summary = ": ".join(lines[:2])[:300]   # the rest differs between places that break alike
            if count > before[reason] and summary not in self.breaks:
                self.breaks.add(summary)
                log.info("fast path: the compiled step breaks (%s): that part runs eagerly between "
                         "compiled graphs", summary)


class Gradients:
    """An update's gradient sums where autograd keeps them (the eager and the compiled step): every
    backward adds into each parameter's .grad, which DDP reduces in the update's last backward."""

    def __init__(self, model: torch.nn.Module):
        self.params = [p for p in model.parameters() if p.requires_grad]

    def start(self) -> None:
        """No .grad: an update (or its retry after running out of memory) begins."""
        for p in self.params:
            p.grad = None

    def backward(self, loss: torch.Tensor, reduced: bool) -> None:
        """Add the gradient of `loss` to the sums (`reduced`: DDP all-reduces them in this backward)."""
        loss.backward()

    def finish(self) -> None:
        """The optimizer's view of the summed gradients: .grad holds them already."""


class GradientSums(Gradients):
    """`fast: graphs`: the update's gradient sums, in buffers of their own.

    A replay overwrites its outputs, and autograd adopts a backward's gradient as a parameter's .grad
    when .grad is None (pytorch/pytorch#169545), so .grad must not keep the graph's output past its
    micro-batch. Buffers held as .grad, which autograd adds each backward into, would cost a kernel a
    parameter a micro-batch outside the graphs: 152 in the Base, two thirds of the ops a micro-batch
    ran outside its compiled graph (docs/measurements.md, "Host ops"). Instead a micro-batch's backward hands its
    gradients back (`torch.autograd.grad`: no .grad written, no AccumulateGrad node run, 152 of them in
    the Base) and one foreach add (a kernel or two on a GPU) sums them into the buffers before the next
    replay can overwrite them. Under DDP the backward that all-reduces (the update's last) adds into
    the buffers held as .grad through autograd, because DDP reduces what .grad holds after a
    `.backward()`: it must be the sum. After the update's last backward every .grad is its buffer."""

    def __init__(self, model: torch.nn.Module):
        super().__init__(model)
        self.sums = [torch.zeros_like(p) for p in self.params]

    def start(self) -> None:
        """Zero sums, no .grad: an update (or its retry after running out of memory) begins."""
        torch._foreach_zero_(self.sums)
        super().start()

    def backward(self, loss: torch.Tensor, reduced: bool) -> None:
        """Add the gradient of `loss` to the sums. `reduced`: DDP all-reduces this backward's .grad,
        which must then hold the sums."""
        if reduced:
            self.finish()
            loss.backward()
            return
        grads = torch.autograd.grad(loss, self.params, allow_unused=True)
        pairs = [(s, g) for s, g in zip(self.sums, grads) if g is not None]
        if pairs:
            torch._foreach_add_([s for s, _ in pairs], [g for _, g in pairs])

    def finish(self) -> None:
        """Every .grad its buffer: the optimizer's view of the summed gradients."""
        for p, s in zip(self.params, self.sums):
            p.grad = s


def stays_eager(family) -> str:
    """Why a family's step stays eager (its model class's `stays_eager`; a model or its class), or "" for
    one the fast path compiles."""
    return getattr(family, "stays_eager", "")


def fast_loss(loss: torch.nn.Module, family: str, mode: str, device: torch.device, buckets: bool) -> torch.nn.Module:
    """The loss module the trainer runs: `loss` itself (off, or a family that stays eager), or it
    compiled, with CUDA graphs for `graphs` on a GPU. Wrap it in DistributedDataParallel after this, so
    that DDP's no_sync still applies."""
    if mode == "off":
        return loss
    if mode == "loss":
        log.info("fast path: the loss's passes over the logits compiled once with dynamic shapes, the rest eager")
        loss.kernels = True
        return loss
    if stays_eager(loss.model):
        log.info("fast path: the %s family stays eager: %s", family, stays_eager(loss.model))
        return loss
    log.info("fast path: the loss compiled once with dynamic shapes (batch and lengths), fused Adam")
    if getattr(loss.model.config, "phrases", None) == "parse" and not buckets:
        log.info("fast path: parser phrases without buckets: true read their longest phrase from the data, "
                 "which breaks the compiled graph in two (a bucketed batch carries it as a shape)")
    if mode == "compile":
        return CompiledLoss(loss)
    if device.type != "cuda":
        log.info("fast path: CUDA graphs need a CUDA device; on %s the batches are padded to fixed shapes "
                 "as for them, and the step only compiled", device.type)
        return CompiledLoss(loss)
    log.info("fast path: each fixed batch shape's step replayed as a CUDA graph")
    return CompiledLoss(loss, cuda_graphs=True)
