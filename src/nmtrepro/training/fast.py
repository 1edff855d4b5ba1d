"""The fast path of a training step (issue 38, setting `fast`): the same mathematics as the eager
step, with fewer kernels and no Python between them.

On an H100 the eager Transformer Base issues ~3,400 kernels a step and the GPU waits on Python; a
step compiled by `torch.compile` (inductor) fuses the elementwise work (layer norms, dropout, the
residuals, the label-smoothed loss) and launches each graph once. A compiled graph is specialised to
its shapes, so the fast path needs the bucketed batches (`buckets: true`, batching.bucket_length):
every length dimension is static, one graph per bucket, and the batch dimension (sentences, which
the planner varies with the bucket) is marked dynamic, so it costs no recompile. The loss projects
every position and masks the padding (criterion.model_loss static=True) rather than pick the real
positions, whose count would be a data-dependent shape. Adam is fused (one kernel over all the
parameters) on either path.

`fast` is a setting a rerun may change (train.RERUN_FREE): it changes how a step runs, not what it
computes, so a checkpoint of either path resumes on the other. Like a change of device, it draws
other dropout masks (inductor generates its own random numbers), and the float sums run in another
order; with dropout off the two paths agree to fp32 rounding (tests/test_fast.py).

A family whose step cannot be compiled to static shapes stays eager and says why in the log.
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
# Graphs a compiled step may build: one per length bucket (16 up to 256 tokens, 24 up to 1,024) and
# fp16's or bf16's variants; torch's default of 8 would fall back to eager after the eighth bucket.
RECOMPILE_LIMIT = 64


def check_setting(mode: str, buckets: bool) -> None:
    """Fail clearly on a `fast` setting that cannot run."""
    if mode not in MODES:
        raise InputError(f"train setting fast = {mode!r}; known: {list(MODES)}")
    if mode == "compile" and not buckets:
        raise InputError("train setting fast = 'compile' needs buckets: true (a compiled step is specialised "
                         "to its shapes: unbucketed batches would recompile for every new padded length)")


class CompiledLoss(torch.nn.Module):
    """A LossOf module (train.py) compiled over the bucketed shapes: the lengths static, the batch
    dimension dynamic. Called as the LossOf is: (net_input, prev, target) -> (loss, nll) sums."""

    def __init__(self, loss: torch.nn.Module):
        super().__init__()
        loss.static = True
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
        self.compiled = torch.compile(loss, dynamic=False)

    def forward(self, net_input: dict, prev: torch.Tensor, target: torch.Tensor):
        for tensor in (*net_input.values(), prev, target):  # (B, ...): B varies within a bucket
            torch._dynamo.maybe_mark_dynamic(tensor, 0)
        return self.compiled(net_input, prev, target)


def fast_loss(loss: torch.nn.Module, family: str, mode: str) -> torch.nn.Module:
    """The loss module the trainer runs: `loss` itself (off, or a family that stays eager), or it
    compiled. Wrap it in DistributedDataParallel after this, so that DDP's no_sync still applies."""
    if mode == "off":
        return loss
    if family in EAGER_FAMILIES:
        log.info("fast path: the %s family stays eager: %s", family, EAGER_FAMILIES[family])
        return loss
    log.info("fast path: the loss compiled over the bucketed shapes (one graph per length bucket, "
             "the batch dimension dynamic), fused Adam")
    return CompiledLoss(loss)
