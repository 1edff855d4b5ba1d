"""Three kernels of a paper-scale training step on their own (issue 38), each a subcommand; every time is
the median of forward + backward, microseconds, with how far each way's results are from a reference.

`attention`: SDPA's kernels (flash, efficient, cudnn, math) on both kinds of attention call the model
makes (`CASES`) at each bucketed length and micro-batch size: which should the fast path take? On an
H200 more than half of attention's 17 % of the Base's GPU time went to the memory-efficient kernels,
which SDPA takes wherever a padding mask is given (docs/measurements.md, 2026-11-27); cuDNN's, off in
the trainer (`runtime.cuda_defaults`: it plans every new shape), could serve the CUDA-graph step.
Error: against math in fp32 on rows with a real key; a row with none must stay finite. n/a: cannot run.

`loss`: the label-smoothed loss on a micro-batch's (rows, V) logits as torch's ops write it and as the
trainer computes it (criterion.SmoothedCrossEntropy), eager and compiled as fast.CompiledLoss compiles
(dynamic shapes), and the bytes each keeps for backward. On an H200 the compiled step spent 10 % of its
GPU time in inductor's kernels of log_softmax, gather and mean (480 and 319 us a 4,096-token
micro-batch) where a pass over the bf16 logits takes ~65.

`gru`: one paper-size BiGRU layer (the BiRNN's: d 512) packed, as the BiRNN families ran it before
2026-11-28 (its lengths read on the host, which made the host wait for the GPU every step), and as
`layers.run_bidirectional` runs it (over the padding, the directions in turn); on a GPU also with the
backward direction on a second CUDA stream (`streams`, what the trainer would take if it pays).

    python bench/gpu_kernels.py attention --device cuda    # bf16, 4,096- and 12,288-token micro-batches
                                                           # (device/gpu_fast_check.sh: CPU rehearsals)
    python bench/gpu_kernels.py loss --device cuda         # bf16, 4,096 and 12,288 rows, V 37,000
    python bench/gpu_kernels.py gru --device cuda          # bf16 autocast, 4,096-token micro-batches
"""
from __future__ import annotations

import argparse
import contextlib
import re
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmtrepro.models.layers import gru_direction, masked_mean, reversed_real, run_bidirectional
from nmtrepro.training.criterion import label_smoothed_loss
from nmtrepro.training.profiling import median_microseconds


def relative_error(got, reference) -> float:
    """The largest |got - reference| over the largest |reference|, over paired tensors."""
    return max(float((g.float() - r.float()).abs().max() / r.float().abs().max().clamp_min(1e-6))
               for g, r in zip(got, reference))


# -- attention ---------------------------------------------------------------------------------------

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
# (attention, padding mask, causal), as layers.py calls SDPA: masked for encoder self-attention and
# cross-attention (12 calls a Base micro-batch), causal without a mask for decoder self-attention (6)
CASES = (("masked", True, False), ("causal", False, True))


def attention_inputs(case: tuple, rows: int, length: int, heads: int, d_head: int, dtype, device) -> tuple:
    """q, k, v (rows, heads, length, d_head) that need gradients, and the keep-mask (rows, 1, 1, length) or
    None: real keys are 3/4 to all of a row's length (a bucket pads its longest by an eighth at most),
    and every 16th row has none (a fixed row without a sentence)."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(rows, heads, length, d_head, generator=gen).to(device, dtype).requires_grad_()
               for _ in range(3))
    if not case[1]:
        return q, k, v, None
    real = torch.randint((3 * length + 3) // 4, length + 1, (rows,), generator=gen)
    real[::16] = 0
    return q, k, v, (torch.arange(length)[None, :] < real[:, None])[:, None, None, :].to(device)


def attention_step(case: tuple, tensors: tuple, dropout: float) -> tuple:
    """Forward and backward of one attention call; returns the output and q, k, v's gradients."""
    q, k, v, mask = tensors
    q.grad = k.grad = v.grad = None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=case[2], dropout_p=dropout)
    out.backward(torch.ones_like(out))
    return out.detach(), q.grad, k.grad, v.grad


def attention_error(case, tensors, backend) -> str:
    """Output's and gradients' error against math in fp32 (rows with a real key), without dropout, and
    whether the rows without one stayed finite."""
    fp32 = tuple(t.detach().float().requires_grad_() if t is not None and t.is_floating_point() else t
                 for t in tensors)
    with sdpa_kernel([SDPBackend.MATH]):
        reference = attention_step(case, fp32, 0.0)
    with sdpa_kernel([backend]):
        got = attention_step(case, tensors, 0.0)
    mask, q = tensors[3], tensors[0]
    rows = torch.ones(q.size(0), dtype=torch.bool, device=q.device) if mask is None else mask.flatten(1).any(1)
    finite = all(bool(torch.isfinite(g[~rows]).all()) for g in got)
    return f"{relative_error([g[rows] for g in got], [r[rows] for r in reference]):.1e}" + ("" if finite else " NaN rows")


def attention(args, device, dtype) -> None:
    warnings.filterwarnings("ignore", category=UserWarning)  # SDPA says why each backend it skips cannot run
    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(True)  # off by default in the trainer (runtime.cuda_defaults)
    print(f"attention, {args.heads} heads of {args.d_head}, {dtype}, dropout {args.dropout}, median of "
          f"{args.repeats}: microseconds (relative error against math in fp32, without dropout)")
    print(f"{'attention':10}{'tokens':>7}{'length':>7}{'rows':>6}" + "".join(f"{name:>22}" for name in BACKENDS))
    totals = {(case[0], name): 0.0 for case in CASES for name in BACKENDS}
    for tokens in args.tokens:
        for case in CASES:
            for length in args.lengths:
                rows = max(1, tokens // length)
                tensors = attention_inputs(case, rows, length, args.heads, args.d_head, dtype, device)
                cells = []
                for name, backend in BACKENDS.items():
                    try:
                        with sdpa_kernel([backend]):  # two warm-ups: a plan, an allocation
                            us = median_microseconds(lambda: attention_step(case, tensors, args.dropout),
                                                     args.repeats, 2, device.type == "cuda")
                        cells.append(f"{us:9.0f} ({attention_error(case, tensors, backend)})")
                        totals[case[0], name] += us
                    except RuntimeError as failed:  # "No available kernel": this backend cannot run it
                        cells.append("n/a")
                        totals[case[0], name] = float("nan")
                        if not re.search("No available kernel|No viable backend", str(failed)):
                            print(f"  {name}: {str(failed).splitlines()[0][:150]}")
                print(f"{case[0]:10}{tokens:>7}{length:>7}{rows:>6}" + "".join(f"{c:>22}" for c in cells), flush=True)
    print("\nall of the lengths and micro-batches, microseconds (nan: a backend could not run every case)")
    for case in CASES:
        print(f"{case[0]:10}" + "".join(f"{name} {totals[case[0], name]:,.0f}  " for name in BACKENDS))


# -- loss --------------------------------------------------------------------------------------------

def loss_by_ops(logits: torch.Tensor, target: torch.Tensor, epsilon: float, real: torch.Tensor):
    """The loss as torch's ops write it (the trainer's before cb63f9c), differentiated by autograd; in
    fp32 at least (tests/test_training_parts.py reads it in fp64)."""
    lprobs = F.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)
    nll = -lprobs.gather(-1, target[..., None]).squeeze(-1)
    loss = (1.0 - epsilon) * nll - epsilon * lprobs.mean(dim=-1)
    return loss.where(real, 0.0).sum(), nll.where(real, 0.0).sum()


def loss_step(loss_fn, tensors: tuple, epsilon: float) -> tuple:
    """Forward and backward of loss + NLL; returns the two sums and the logits' gradient."""
    logits, target, real = tensors
    logits.grad = None
    loss, nll = loss_fn(logits, target, epsilon, real)
    (loss + nll).backward()
    return loss.detach(), nll.detach(), logits.grad


def saved_mib(loss_fn, tensors: tuple, epsilon: float) -> float:
    """MiB autograd keeps from the forward for the backward (the logits themselves included)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss_fn(*tensors[:2], epsilon, tensors[2])
    return sum(seen.values()) / 2**20


def loss(args, device, dtype) -> None:
    print(f"label-smoothed loss, (rows, {args.vocab:,}) {dtype} logits (a tenth padding), epsilon {args.epsilon}, "
          f"median of {args.repeats}: microseconds; MiB kept for backward; error of the loss and the gradient "
          "against the ops' eager ones")
    forms = {"ops": loss_by_ops, "ours": label_smoothed_loss}
    compiled = {name: torch.compile(form, dynamic=True) for name, form in forms.items()}
    print(f"{'rows':>6} {'form':>5} {'eager us':>10} {'compiled us':>12} {'eager MiB':>10} {'compiled MiB':>13} "
          f"{'loss err':>9} {'grad err':>9}")
    for rows in args.rows:
        gen = torch.Generator().manual_seed(0)
        tensors = ((torch.randn(rows, args.vocab, generator=gen) * 4).to(device, dtype).requires_grad_(),
                   torch.randint(0, args.vocab, (rows,), generator=gen).to(device),
                   (torch.rand(rows, generator=gen) > 0.1).to(device))
        reference = [t.float().clone() for t in loss_step(loss_by_ops, tensors, args.epsilon)]
        timed = {}
        for name, form in forms.items():
            ways = (form, compiled[name])  # three warm-ups: a compile, an allocation
            timed[name] = [median_microseconds(lambda fn=fn: loss_step(fn, tensors, args.epsilon), args.repeats, 3,
                                               device.type == "cuda") for fn in ways]
            memory = [saved_mib(fn, tensors, args.epsilon) for fn in ways]
            got = loss_step(compiled[name], tensors, args.epsilon)
            print(f"{rows:>6} {name:>5} {timed[name][0]:>10,.0f} {timed[name][1]:>12,.0f} {memory[0]:>10,.0f} "
                  f"{memory[1]:>13,.0f} {relative_error(got[:1], reference[:1]):>9.1e} "
                  f"{relative_error(got[2:], reference[2:]):>9.1e}", flush=True)
        print(f"{rows:>6} ops / ours: eager {timed['ops'][0] / timed['ours'][0]:.2f}x, "
              f"compiled {timed['ops'][1] / timed['ours'][1]:.2f}x")


# -- gru ---------------------------------------------------------------------------------------------

def gru_packed(gru: nn.GRU, x: torch.Tensor, pad: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    """What the BiRNN ran before: nn.GRU over the packed real positions, its lengths read on the host."""
    lengths = (~pad).sum(1).clamp(min=1).cpu()
    out, _ = gru(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False), h0)
    return pad_packed_sequence(out, batch_first=True, total_length=x.size(1))[0]


SIDE: dict = {}  # a device's second stream, made once


def gru_streams(gru: nn.GRU, x: torch.Tensor, pad: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    """`run_bidirectional` (one layer) with the backward direction on a second CUDA stream, so that the
    two recurrences may overlap as in cuDNN's bidirectional call; autograd runs each backward on its
    forward's stream."""
    order = reversed_real(pad)[..., None]
    main, side = torch.cuda.current_stream(), SIDE.setdefault(x.device, torch.cuda.Stream(x.device))
    side.wait_stream(main)
    with torch.cuda.stream(side):
        backward = gru_direction(x.gather(1, order.expand_as(x)), h0[1:], gru.all_weights[1], gru.bias, gru.training)
        backward = backward.gather(1, order.expand_as(backward))
    forward = gru_direction(x, h0[:1], gru.all_weights[0], gru.bias, gru.training)
    main.wait_stream(side)
    for tensor in (x, h0, order):  # made on the main stream, read on the side one
        tensor.record_stream(side)
    backward.record_stream(main)
    return torch.cat([forward, backward], dim=-1) * (~pad)[..., None].to(forward.dtype)


def gru_batch(tokens: int, length: int, d: int, device) -> tuple:
    """x (rows, length, d) that needs a gradient, and its padding mask: each sentence 7/8 to all of the
    bucket's length."""
    gen = torch.Generator().manual_seed(0)
    rows = max(1, tokens // length)
    real = torch.randint((7 * length + 7) // 8, length + 1, (rows,), generator=gen)
    x = torch.randn(rows, length, d, generator=gen).to(device).requires_grad_()
    return x, (torch.arange(length)[None] >= real[:, None]).to(device)


def gru_step(run, gru, x, pad, precision) -> list[torch.Tensor]:
    """Forward and backward of one BiGRU layer; the output and the gradients of x and the weights."""
    gru.zero_grad(set_to_none=True)
    x.grad = None
    with precision():
        h0 = masked_mean(x, pad)[None].expand(2, -1, -1).contiguous()
        out = run(gru, x, pad, h0)
    out.float().pow(2).sum().backward()
    return [out.detach().float(), x.grad, *(p.grad for p in gru.parameters())]


def gru(args, device, dtype) -> None:
    cuda = device.type == "cuda"
    precision = (lambda: torch.autocast("cuda", dtype)) if cuda else contextlib.nullcontext
    torch.manual_seed(0)
    layer = nn.GRU(args.d_model, args.d_model, batch_first=True, bidirectional=True).to(device)
    print(f"one BiGRU layer, d {args.d_model}, {args.tokens} padded tokens, {'bf16 autocast' if cuda else 'fp32'}, "
          f"median of {args.repeats}: microseconds (each time includes its wait: packed, the host's copy of the lengths)")
    ways = {"packed": gru_packed, "padded": run_bidirectional}
    if cuda:  # untried on a GPU when written: a failure costs its column, not the others
        try:
            gru_step(gru_streams, layer, *gru_batch(args.tokens, args.lengths[0], args.d_model, device), precision)
            ways["streams"] = gru_streams
        except RuntimeError as failed:
            print(f"streams: cannot run ({str(failed).splitlines()[0][:200]})")
    others = [name for name in ways if name != "padded"]
    print(f"{'length':>7}{'rows':>6}" + "".join(f"{name:>10}" for name in ways)
          + "".join(f"{name + '/padded':>16}" for name in others) + f"{'max diff':>10}")
    totals = dict.fromkeys(ways, 0.0)
    for length in args.lengths:
        x, pad = gru_batch(args.tokens, length, args.d_model, device)
        times = {name: median_microseconds(lambda run=run: gru_step(run, layer, x, pad, precision), args.repeats, 2, cuda)
                 for name, run in ways.items()}
        got = {name: gru_step(run, layer, x, pad, precision) for name, run in ways.items()}
        totals = {name: totals[name] + times[name] for name in ways}
        print(f"{length:>7}{x.size(0):>6}" + "".join(f"{times[name]:>10.0f}" for name in ways)
              + "".join(f"{times[name] / times['padded']:>16.2f}" for name in others)
              + f"{max(relative_error(got[name], got['padded']) for name in others):>10.1e}", flush=True)
    print(f"{'all':>13}" + "".join(f"{totals[name]:>10.0f}" for name in ways)
          + "".join(f"{totals[name] / totals['padded']:>16.2f}" for name in others))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    kinds = parser.add_subparsers(dest="kernel", required=True)
    sub = {name: kinds.add_parser(name) for name in ("attention", "loss", "gru")}
    for each in sub.values():
        each.add_argument("--device", default="cuda")
        each.add_argument("--repeats", type=int, default=20)
    sub["attention"].add_argument("--tokens", type=int, nargs="+", default=[4096, 12288], help="padded tokens a micro-batch")
    sub["attention"].add_argument("--lengths", type=int, nargs="+", default=[16, 32, 48, 64, 96],
                                  help="bucketed lengths (batching.bucket_length); rows = tokens // length")
    sub["attention"].add_argument("--heads", type=int, default=8)
    sub["attention"].add_argument("--d-head", type=int, default=64)
    sub["attention"].add_argument("--dropout", type=float, default=0.1, help="attention dropout while timed (the Base's)")
    sub["loss"].add_argument("--rows", type=int, nargs="+", default=[4096, 12288], help="target positions a micro-batch")
    sub["loss"].add_argument("--vocab", type=int, default=37000, help="joint BPE vocabulary (WMT14 En-De: ~37k)")
    sub["loss"].add_argument("--epsilon", type=float, default=0.1)
    sub["gru"].add_argument("--tokens", type=int, default=4096, help="padded tokens a micro-batch")
    sub["gru"].add_argument("--lengths", type=int, nargs="+", default=[8, 16, 24, 32, 48, 64, 96, 128],
                            help="bucketed lengths; rows = tokens // length")
    sub["gru"].add_argument("--d-model", type=int, default=512)
    args = parser.parse_args()
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if device.type == "cuda":
        print(torch.cuda.get_device_name(), f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    {"attention": attention, "loss": loss, "gru": gru}[args.kernel](args, device, dtype)


if __name__ == "__main__":
    main()
