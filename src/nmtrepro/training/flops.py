"""Training FLOPs: the analytic count of a Transformer update, the count torch makes of any family's
forward and backward, and the peak they are a fraction of (model FLOP utilisation, MFU).

The analytic count (training = 3 x forward, i.e. 6 per weight per token):
  linear layers: 6 * (encoder weights * real source tokens + decoder weights * real target tokens),
                 the cross-attention's key and value weights at the source tokens, which they project
  attention:     12 * d_model * sum over sentences of (L_enc * S^2 + L_dec * (T^2 + T * S))
                 (QK^T and AV, full square for causal self-attention: that is what the kernels compute)
  output layer:  6 * d_model * V * real target tokens (the loss projects real positions only)
Embedding lookups, layer norms, softmax and the optimizer are not counted. The counted FLOPs are torch's
FlopCounterMode over a forward and backward on the meta device (no memory, no arithmetic), so a family's
extra parts (phrase builders, GRUs, convolutions) count as the kernels compute them; a sentence pair's
FLOPs are a quadratic in its two lengths (attention's are), fitted over a few probes. For the
Transformer the two agree (tests/test_flops.py).

The benchmarks' MFU (bench/fairseq_compare.py, bench/gpu_train.py) and the plan at a given MFU
(bench/plan_flops.py) divide by these.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from ..data.annotations import annotation
from ..models import build_model
from .criterion import model_loss

# Dense bf16 peak TFLOP/s by GPU name (an H200 has the H100's).
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10": 125.0, "V100": 125.0}
PROBES = ((8, 8), (16, 32), (32, 16), (32, 32), (48, 24), (24, 64))   # (source, target) lengths
PROBE_SENTENCES = 4


def peak_tflops(device: torch.device, given: float | None = None) -> float | None:
    """`given`, else the table's peak of the CUDA device's name (None off CUDA or for an unknown card)."""
    if given:
        return given
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def update_flops(model, spec: dict, src_lens: list[int], tgt_lens: list[int]) -> float:
    """Analytic training FLOPs of an update of sentences of these lengths (the module docstring)."""
    d, vocab = spec["d_model"], spec["tgt_vocab"]
    weights = {"source": 0, "target": 0}  # the tokens a weight multiplies
    for name, p in model.named_parameters():
        part = name.split(".")[0]
        if p.dim() == 2 and part in ("encoder", "decoder"):  # matmul weights only (no biases, norms, embeddings)
            # the cross-attention's keys and values project the encoder's output
            weights["source" if part == "encoder" or "cross_attn.sublayer.kv_proj" in name else "target"] += p.numel()
    linear = 6 * (weights["source"] * sum(src_lens) + weights["target"] * sum(tgt_lens))
    attention = 12 * d * sum(spec["encoder_layers"] * s * s + spec["decoder_layers"] * (t * t + t * s)
                             for s, t in zip(src_lens, tgt_lens))
    output = 6 * d * vocab * sum(tgt_lens)
    return linear + attention + output


def probe_batch(model, src_length: int, tgt_length: int) -> tuple[dict, torch.Tensor, torch.Tensor]:
    """PROBE_SENTENCES unpadded sentence pairs of those lengths on the meta device, with the stand-ins
    of the annotations the family reads (`stand_in`: parser phrases of three tokens, POS tags)."""
    def tokens(length: int):
        return torch.full((PROBE_SENTENCES, length), 5, dtype=torch.long, device="meta")
    net_input = {"src": tokens(src_length)}
    for name in model.config.extra_inputs:
        net_input.update(annotation(name).stand_in(PROBE_SENTENCES, src_length, "meta"))
    return net_input, tokens(tgt_length), tokens(tgt_length)


def terms(src, tgt) -> np.ndarray:
    """The terms a sentence pair's training FLOPs are a sum of: 1, S, T, S^2, T^2, S T (attention's)."""
    src, tgt = np.asarray(src, dtype=float), np.asarray(tgt, dtype=float)
    return np.stack([np.ones_like(src), src, tgt, src * src, tgt * tgt, src * tgt], -1)


def sentence_flops(spec: dict) -> np.ndarray:
    """The coefficients of `terms` that give a sentence pair's training FLOPs under `spec`, fitted to
    counts of a forward and backward at PROBES (exact where the model's FLOPs are of that form, as the
    Transformer's are)."""
    with torch.device("meta"):
        model = build_model(spec).train()
    counted = []
    for src_length, tgt_length in PROBES:
        net_input, prev, target = probe_batch(model, src_length, tgt_length)
        with FlopCounterMode(display=False) as counter:
            loss, _ = model_loss(model, net_input, prev, target, 0.1, static=True)  # no padding: the same count
            loss.backward()
        counted.append(counter.get_total_flops() / PROBE_SENTENCES)
    return np.linalg.lstsq(terms(*zip(*PROBES)), np.array(counted), rcond=None)[0]


def per_target_token(coefficients: np.ndarray, src: np.ndarray, tgt: np.ndarray) -> float:
    """FLOPs a target token over the sentence pairs of lengths (src, tgt)."""
    return float((terms(src, tgt) @ coefficients).sum() / tgt.sum())
