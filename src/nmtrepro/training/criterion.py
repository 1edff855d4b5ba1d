"""Label-smoothed cross-entropy (Szegedy et al. 2016), computed at real target positions only.

Only non-pad positions are projected to the vocabulary: the output layer and softmax are most of a
small model's step, and padding is often a fifth of a batch.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, epsilon: float):
    """Summed smoothed loss and summed NLL over (N, V) logits and (N,) targets.

    The smoothed target puts 1 - eps on the gold token and eps spread uniformly over the whole
    vocabulary, which is torch's `label_smoothing` definition (fairseq spreads eps over V - 1).
    """
    lprobs = F.log_softmax(logits.float(), dim=-1)
    nll = -lprobs.gather(-1, target[:, None]).squeeze(-1)
    smooth = -lprobs.mean(dim=-1)
    loss = (1.0 - epsilon) * nll + epsilon * smooth
    return loss.sum(), nll.sum()


def model_loss(model, src, prev, target, epsilon: float, spans=None):
    """Run (B, S) sources and (B, T) decoder inputs/targets through an encoder-decoder and return
    (summed loss, summed NLL); `spans` (B, P, 2) only for models that read source phrases."""
    enc = model.encode(src) if spans is None else model.encode(src, spans=spans)
    hidden = model.decode(prev, enc)
    real = target.ne(model.pad)
    return label_smoothed_loss(model.logits(hidden[real]), target[real], epsilon)
