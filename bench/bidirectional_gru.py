"""A bidirectional GRU over a bucketed micro-batch, packed or as `layers.run_bidirectional` runs it: what
does leaving out packing cost or save (issue 38)?

Packing read the sentences' lengths on the host, so the BiRNN families, +Fusing_Diverse's recurrence
group and paper C's encoders made the host wait for the GPU in every step. `run_bidirectional` runs
each direction over the padded batch instead (the backward one on each sentence reversed within its
length), which also runs the GRU over the padding, and runs the two directions one after the other
where cuDNN's bidirectional call may overlap them. This prints forward + backward of one paper-size
BiGRU layer (the BiRNN's: d 512, both directions started from the mean) for each bucketed length:
packed, padded, and on a GPU padded with the backward direction on a second CUDA stream (`streams`,
what the trainer would take if it pays); each against padded, and how far apart outputs and
gradients are. Each call's time includes the wait: packed, the host's copy of the lengths; the
others, none.

    python bench/bidirectional_gru.py --device cuda          # bf16 autocast, 4,096-token micro-batches
    python bench/bidirectional_gru.py --device cpu --tokens 1024 --lengths 16 32 --repeats 3   # a rehearsal
"""
from __future__ import annotations

import argparse
import contextlib

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nmtrepro.models.layers import gru_direction, masked_mean, reversed_real, run_bidirectional
from nmtrepro.training.profiling import median_microseconds


def packed(gru: nn.GRU, x: torch.Tensor, pad: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
    """What the BiRNN ran before: nn.GRU over the packed real positions, its lengths read on the host."""
    lengths = (~pad).sum(1).clamp(min=1).cpu()
    out, _ = gru(pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False), h0)
    return pad_packed_sequence(out, batch_first=True, total_length=x.size(1))[0]


SIDE: dict = {}  # a device's second stream, made once


def streams(gru: nn.GRU, x: torch.Tensor, pad: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
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


def batch(tokens: int, length: int, d: int, device, seed: int = 0) -> tuple:
    """x (rows, length, d) that needs a gradient, and its padding mask: each sentence 7/8 to all of the
    bucket's length (a bucket pads the longest by an eighth at most, and sentences near in length
    share a batch)."""
    gen = torch.Generator().manual_seed(seed)
    rows = max(1, tokens // length)
    real = torch.randint((7 * length + 7) // 8, length + 1, (rows,), generator=gen)
    x = torch.randn(rows, length, d, generator=gen).to(device).requires_grad_()
    return x, (torch.arange(length)[None] >= real[:, None]).to(device)


def step(run, gru, x, pad, precision) -> list[torch.Tensor]:
    """Forward and backward of one BiGRU layer; the output and the gradients of x and the weights."""
    for t in (x, *gru.parameters()):
        t.grad = None
    with precision():
        h0 = masked_mean(x, pad)[None].expand(2, -1, -1).contiguous()
        out = run(gru, x, pad, h0)
    out.float().pow(2).sum().backward()
    return [out.detach().float(), x.grad, *(p.grad for p in gru.parameters())]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tokens", type=int, default=4096, help="padded tokens a micro-batch")
    parser.add_argument("--lengths", type=int, nargs="+", default=[8, 16, 24, 32, 48, 64, 96, 128],
                        help="bucketed lengths; rows = tokens // length")
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    device = torch.device(args.device)
    cuda = device.type == "cuda"
    precision = (lambda: torch.autocast("cuda", torch.bfloat16)) if cuda else contextlib.nullcontext
    torch.manual_seed(0)
    gru = nn.GRU(args.d_model, args.d_model, batch_first=True, bidirectional=True).to(device)
    if cuda:
        print(torch.cuda.get_device_name(), f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print(f"forward + backward of one BiGRU layer, d {args.d_model}, {args.tokens} padded tokens, "
          f"{'bf16 autocast' if cuda else 'fp32'}, median of {args.repeats}: microseconds")
    ways = {"packed": packed, "padded": run_bidirectional}
    if cuda:  # untried on a GPU when written: a failure costs its column, not the others
        try:
            step(streams, gru, *batch(args.tokens, args.lengths[0], args.d_model, device), precision)
            ways["streams"] = streams
        except RuntimeError as failed:
            print(f"streams: cannot run ({str(failed).splitlines()[0][:200]})")
    print(f"{'length':>7}{'rows':>6}" + "".join(f"{name:>10}" for name in ways)
          + "".join(f"{name + '/padded':>16}" for name in ways if name != "padded") + f"{'max diff':>10}")
    totals = dict.fromkeys(ways, 0.0)
    for length in args.lengths:
        x, pad = batch(args.tokens, length, args.d_model, device)
        times = {name: median_microseconds(lambda run=run: step(run, gru, x, pad, precision), args.repeats, 2, cuda)
                 for name, run in ways.items()}
        got = {name: step(run, gru, x, pad, precision) for name, run in ways.items()}
        diff = max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-6))
                   for name in ways if name != "padded" for a, b in zip(got[name], got["padded"]))
        totals = {name: totals[name] + times[name] for name in ways}
        print(f"{length:>7}{x.size(0):>6}" + "".join(f"{times[name]:>10.0f}" for name in ways)
              + "".join(f"{times[name] / times['padded']:>16.2f}" for name in ways if name != "padded")
              + f"{diff:>10.1e}", flush=True)
    print(f"{'all':>13}" + "".join(f"{totals[name]:>10.0f}" for name in ways)
          + "".join(f"{totals[name] / totals['padded']:>16.2f}" for name in ways if name != "padded"))


if __name__ == "__main__":
    main()
