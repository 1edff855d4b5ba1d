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


def model_loss(model, net_input: dict, prev, target, epsilon: float):
    """Run a batch's encoder inputs (`net_input`: "src" (B, S) and the family's extra inputs) and
    (B, T) decoder inputs/targets through an encoder-decoder; return (summed loss, summed NLL)."""
    enc = model.encode(**net_input)
    hidden = model.decode(prev, enc)
    real = target.ne(model.pad)
    return label_smoothed_loss(model.logits(hidden[real]), target[real], epsilon)
