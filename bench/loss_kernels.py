"""The label-smoothed loss on a paper-scale micro-batch's logits, as torch's ops write it and as the
trainer computes it (criterion.SmoothedCrossEntropy), eager and compiled: what it costs and what it
keeps for backward (issue 38).

On an H200 the compiled step of the paper Base spent 10 % of its GPU time in the two kernels inductor
made of log_softmax, gather and mean and their backward (480 and 319 microseconds a 4,096-token
micro-batch, docs/measurements.md, 2026-11-27), where a pass over the micro-batch's bf16 logits takes ~65:
its graphs reduce the logits a third time for the mean and, in backward, scatter the gold tokens'
gradient into a (rows, V) buffer of its own. This times forward + backward of both forms on (rows, V)
logits with a padding mask, as the fast path gives them (every position projected, the padding masked:
criterion.model_loss static=True), compiled as fast.CompiledLoss compiles (dynamic shapes), and
prints the bytes each keeps for backward and how far its loss and gradient are from the ops' eager
ones.

    python bench/loss_kernels.py --device cuda                     # bf16, 4,096 and 12,288 rows, V 37,000
    python bench/loss_kernels.py --device cpu --rows 512 --vocab 8000 --repeats 3      # a rehearsal
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from nmtrepro.training.criterion import label_smoothed_loss
from nmtrepro.training.profiling import median_microseconds


def by_ops(logits: torch.Tensor, target: torch.Tensor, epsilon: float, real: torch.Tensor):
    """The loss as torch's ops write it (the trainer's before cb63f9c), differentiated by autograd; in
    fp32 at least (tests/test_training_parts.py reads it in fp64)."""
    lprobs = F.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    nll = -lprobs.gather(-1, target[..., None]).squeeze(-1)
    loss = (1.0 - epsilon) * nll - epsilon * lprobs.mean(dim=-1)
    return loss.where(real, 0.0).sum(), nll.where(real, 0.0).sum()


FORMS = {"ops": by_ops, "ours": label_smoothed_loss}


def inputs(rows: int, vocab: int, dtype, device, seed: int = 0) -> tuple:
    """Logits (rows, V) that need a gradient, gold tokens, and the real positions (a tenth are padding)."""
    gen = torch.Generator().manual_seed(seed)
    logits = (torch.randn(rows, vocab, generator=gen) * 4).to(device, dtype).requires_grad_()
    target = torch.randint(0, vocab, (rows,), generator=gen).to(device)
    return logits, target, (torch.rand(rows, generator=gen) > 0.1).to(device)


def step(loss_fn, tensors: tuple, epsilon: float) -> tuple:
    """Forward and backward of the loss + NLL (the trainer back-propagates the loss; the NLL's gradient
    is free here); returns the two sums and the logits' gradient."""
    logits, target, real = tensors
    logits.grad = None
    loss, nll = loss_fn(logits, target, epsilon, real)
    (loss + nll).backward()
    return loss.detach(), nll.detach(), logits.grad


def microseconds(loss_fn, tensors: tuple, epsilon: float, repeats: int) -> float:
    """Median time of forward + backward, after three warm-ups (a compile, an allocation)."""
    return median_microseconds(lambda: step(loss_fn, tensors, epsilon), repeats, 3, tensors[0].is_cuda)


def saved_bytes(loss_fn, tensors: tuple, epsilon: float) -> int:
    """Bytes autograd keeps from the forward for the backward (the logits themselves included)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss_fn(tensors[0], tensors[1], epsilon, tensors[2])
    return sum(seen.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--rows", type=int, nargs="+", default=[4096, 12288], help="target positions a micro-batch")
    parser.add_argument("--vocab", type=int, default=37000, help="joint BPE vocabulary (WMT14 En-De: ~37k)")
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if device.type == "cuda":
        print(torch.cuda.get_device_name(), f"torch {torch.__version__}")
    print(f"label-smoothed loss, forward + backward, (rows, {args.vocab:,}) {dtype} logits, epsilon {args.epsilon}, "
          f"median of {args.repeats}: microseconds; MiB kept for backward; largest error of the loss and the "
          "gradient against the ops' eager ones")
    compiled = {name: torch.compile(form, dynamic=True) for name, form in FORMS.items()}
    print(f"{'rows':>6} {'form':>5} {'eager us':>10} {'compiled us':>12} {'eager MiB':>10} {'compiled MiB':>13} "
          f"{'loss err':>9} {'grad err':>9}")
    for rows in args.rows:
        tensors = inputs(rows, args.vocab, dtype, device)
        reference = step(by_ops, tensors, args.epsilon)
        reference = [t.float().clone() for t in reference]
        timed = {}
        for name, form in FORMS.items():
            cells = [microseconds(fn, tensors, args.epsilon, args.repeats) for fn in (form, compiled[name])]
            memory = [saved_bytes(fn, tensors, args.epsilon) / 2 ** 20 for fn in (form, compiled[name])]
            loss, _, grad = (t.float() for t in step(compiled[name], tensors, args.epsilon))
            loss_err = (loss - reference[0]).abs().item() / reference[0].abs().item()
            grad_err = (grad - reference[2]).abs().max().item() / reference[2].abs().max().item()
            timed[name] = cells
            print(f"{rows:>6} {name:>5} {cells[0]:>10,.0f} {cells[1]:>12,.0f} {memory[0]:>10,.0f} {memory[1]:>13,.0f} "
                  f"{loss_err:>9.1e} {grad_err:>9.1e}", flush=True)
        print(f"{rows:>6} ops / ours: eager {timed['ops'][0] / timed['ours'][0]:.2f}x, "
              f"compiled {timed['ops'][1] / timed['ours'][1]:.2f}x")


if __name__ == "__main__":
    main()
