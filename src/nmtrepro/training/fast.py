"""The fast path of a training step (issue 38, setting `fast`): the same mathematics as the eager
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
with it but is not needed.

`fast` is a setting a rerun may change (train.RERUN_FREE): it changes how a step runs, not what it
computes, so a checkpoint of either path resumes on the other. Like a change of device, it draws
other dropout masks (inductor generates its own random numbers), and the float sums run in another
order; with dropout off the two paths agree to fp32 rounding (tests/test_fast.py).

A family whose step cannot be compiled stays eager and says why in the log.
"""
from __future__ import annotations

import logging

import torch

from ..core.files import InputError

log = logging.getLogger("nmtrepro.training.fast")
MODES = ("off", "compile")
# Families whose step stays eager, and why.
EAGER_FAMILIES = {
    "npmt": "SWAN's dynamic program over segmentations loops in Python over data-dependent spans and "
            "segment lengths; compiling it would recompile for nearly every batch",
}


def check_setting(mode: str) -> None:
    """Fail clearly on a `fast` setting that cannot run."""
    if mode not in MODES:
        raise InputError(f"train setting fast = {mode!r}; known: {list(MODES)}")


class CompiledLoss(torch.nn.Module):
    """A LossOf module (train.py) compiled once for every shape: each dimension of its inputs dynamic.
    Called as the LossOf is: (net_input, prev, target) -> (loss, nll) sums. `backend`: inductor, the
    trainer's; a test of the graph alone (its breaks, its dynamic shapes) may take "aot_eager", which
    traces forward and backward as inductor does but generates no code (seconds, not minutes, on a CPU)."""

    def __init__(self, loss: torch.nn.Module, backend: str = "inductor"):
        super().__init__()
        loss.static = True
        self.compiled = torch.compile(loss, backend=backend)

    def forward(self, net_input: dict, prev: torch.Tensor, target: torch.Tensor):
        for tensor in (*net_input.values(), prev, target):  # (B, S or T, ...): sentences and lengths vary
            for dim in range(tensor.dim()):
                torch._dynamo.maybe_mark_dynamic(tensor, dim)
        return self.compiled(net_input, prev, target)


def fast_loss(loss: torch.nn.Module, family: str, mode: str) -> torch.nn.Module:
    """The loss module the trainer runs: `loss` itself (off, or a family that stays eager), or it
    compiled. Wrap it in DistributedDataParallel after this, so that DDP's no_sync still applies."""
    if mode == "off":
        return loss
    if family in EAGER_FAMILIES:
        log.info("fast path: the %s family stays eager: %s", family, EAGER_FAMILIES[family])
        return loss
    log.info("fast path: the loss compiled once with dynamic shapes (batch and lengths), fused Adam")
    return CompiledLoss(loss)
