"""SDPA's kernels on the attention shapes of a paper-scale training step, one backend at a time: which
kernel should the fast path's attention take (issue 38)?

On an H200, attention took 17 % of the paper Base's GPU time an update, and more than half of that
went to the memory-efficient kernels (cutlass's, built for sm80), which SDPA takes wherever a padding
mask is given: encoder self-attention and cross-attention. Decoder self-attention is causal without a
mask and takes flash (docs/measurements.md, 2026-11-27). cuDNN's attention, which the trainer turns off
(`runtime.cuda_defaults`: it builds an execution plan for every new shape), could be had for the
CUDA-graph step, whose shapes are a few dozen, each recorded once. This prints, for both kinds of
attention call (`CASES`), each bucketed length and micro-batch size, what forward + backward costs a
call under each backend (SDPA's flash, efficient, cudnn, math), and how far each one's output and
gradients are from the math backend's in fp32 (rows with a real key; a row without any, as
batching.fixed_rows adds, must stay finite). A backend that cannot run a case says n/a.

    python bench/attention_kernels.py --device cuda          # bf16, 4,096- and 12,288-token micro-batches
    python bench/attention_kernels.py --device cpu --tokens 512 --lengths 16 32 --repeats 2   # a rehearsal
"""
from __future__ import annotations

import argparse
import re
import warnings

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from nmtrepro.training.profiling import median_microseconds

BACKENDS = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
            "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}
# (attention, padding mask, causal), as layers.py calls SDPA: masked for encoder self-attention and
# cross-attention (12 calls a Base micro-batch), causal without a mask for decoder self-attention (6)
CASES = (("masked", True, False), ("causal", False, True))


def inputs(case: tuple, rows: int, length: int, heads: int, d_head: int, dtype, device, seed: int = 0) -> tuple:
    """q, k, v (rows, heads, length, d_head) that need gradients, and the keep-mask (rows, 1, 1, length) or
    None: real keys are 3/4 to all of a row's length (a batch's sentences are at most its longest, and
    its bucket pads that by an eighth at most), and every 16th row has none (a fixed row without a
    sentence)."""
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(rows, heads, length, d_head, generator=gen).to(device, dtype).requires_grad_()
               for _ in range(3))
    if not case[1]:
        return q, k, v, None
    real = torch.randint((3 * length + 3) // 4, length + 1, (rows,), generator=gen)
    real[::16] = 0
    keep = torch.arange(length)[None, :] < real[:, None]
    return q, k, v, keep[:, None, None, :].to(device)


def step(case: tuple, tensors: tuple, dropout: float) -> tuple:
    """Forward and backward of one attention call; returns the output and q, k, v's gradients."""
    q, k, v, mask = tensors
    for t in (q, k, v):
        t.grad = None
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=case[2], dropout_p=dropout)
    out.backward(torch.ones_like(out))
    return out, q.grad, k.grad, v.grad


def microseconds(case, tensors, backend, repeats: int, dropout: float) -> float:
    """Median time of forward + backward under `backend` (raises when it cannot run the case)."""
    with sdpa_kernel([backend]):  # two warm-ups: a plan, an allocation
        return median_microseconds(lambda: step(case, tensors, dropout), repeats, 2, tensors[0].is_cuda)


def error(case, tensors, backend) -> str:
    """The largest relative difference of output and gradients from the math backend's in fp32, over the
    rows with a real key, and whether the rows without one stayed finite; without dropout."""
    ref_tensors = tuple(t.detach().float().requires_grad_() if t is not None and t.is_floating_point() else t
                        for t in tensors)
    detached = lambda results: [r.detach() for r in results]  # noqa: E731
    with sdpa_kernel([SDPBackend.MATH]):
        reference = detached(step(case, ref_tensors, 0.0))
    with sdpa_kernel([backend]):
        got = detached(step(case, tensors, 0.0))
    mask = tensors[3]
    rows = torch.ones(tensors[0].size(0), dtype=torch.bool, device=tensors[0].device) if mask is None \
        else mask.flatten(1).any(1)
    worst = max(float((g[rows].float() - r[rows]).abs().max() / r[rows].abs().max().clamp_min(1e-6))
                for g, r in zip(got, reference))
    finite = all(bool(torch.isfinite(g[~rows]).all()) for g in got)
    return f"{worst:.1e}" + ("" if finite else " NaN rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tokens", type=int, nargs="+", default=[4096, 12288], help="padded tokens a micro-batch")
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 48, 64, 96],
                        help="bucketed lengths (batching.bucket_length); rows = tokens // length")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--dropout", type=float, default=0.1, help="attention dropout while timed (the Base's)")
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=UserWarning)  # SDPA says why each backend it skips cannot run
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(True)  # off by default in the trainer (runtime.cuda_defaults)
        print(torch.cuda.get_device_name(), f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print(f"forward + backward of one attention call, {args.heads} heads of {args.d_head}, {dtype}, dropout "
          f"{args.dropout}, median of {args.repeats}: microseconds (relative error against math in fp32, "
          "without dropout)")
    names = list(BACKENDS)
    print(f"{'attention':10}{'tokens':>7}{'length':>7}{'rows':>6}" + "".join(f"{name:>22}" for name in names))
    totals = {(case[0], name): 0.0 for case in CASES for name in names}
    runs = {(case[0], name): True for case in CASES for name in names}
    for tokens in args.tokens:
        for case in CASES:
            for length in args.lengths:
                rows = max(1, tokens // length)
                tensors = inputs(case, rows, length, args.heads, args.d_head, dtype, device)
                cells = []
                for name in names:
                    try:
                        us = microseconds(case, tensors, BACKENDS[name], args.repeats, args.dropout)
                        cells.append(f"{us:9.0f} ({error(case, tensors, BACKENDS[name])})")
                        totals[case[0], name] += us
                    except RuntimeError as failed:  # "No available kernel": this backend cannot run it
                        cells.append("n/a")
                        runs[case[0], name] = False
                        if not re.search("No available kernel|No viable backend", str(failed)):
                            print(f"  {name}: {str(failed).splitlines()[0][:150]}")
                print(f"{case[0]:10}{tokens:>7}{length:>7}{rows:>6}" + "".join(f"{c:>22}" for c in cells), flush=True)
    print("\nall of the lengths and micro-batches, microseconds (a backend that could not run every case: n/a)")
    for case in CASES:
        print(f"{case[0]:10}" + "".join(f"{name} {totals[case[0], name]:,.0f}  " if runs[case[0], name]
                                        else f"{name} n/a  " for name in names))


if __name__ == "__main__":
    main()
