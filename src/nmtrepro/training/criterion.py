"""Label-smoothed cross-entropy (Szegedy et al. 2016), computed at real target positions only, plus
the disagreement term of models that ask for it (paper D's DisReg baseline); or a family's own
sequence loss (paper C's NPMT). `LossOf` is the module the trainer runs it as; `valid_loss` its
value over a corpus's valid split, per target token.

Only non-pad positions are projected to the vocabulary: the output layer and softmax are most of a
small model's step, and padding is often a fifth of a batch.
"""
from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from ..core import runtime
from ..models.layers import encoder_attentions, recording_heads
from .corpus import Corpus


def smoothed_sums(logits: torch.Tensor, target: torch.Tensor, real: torch.Tensor | None, epsilon: float):
    """(summed smoothed loss, summed NLL, lse (...)) of (..., V) logits at (...) targets where `real`.

    A row's NLL is lse - logit[gold], with lse its log-normaliser, and its smoothing term, minus the
    mean log-probability, lse - mean(logits): the mean of the logits themselves, which a compiler reads
    in the same pass as their max."""
    wide = logits.to(torch.promote_types(logits.dtype, torch.float32))
    lprobs = F.log_softmax(wide, dim=-1)              # eager: one kernel; compiled: read where used
    nll = -lprobs.gather(-1, target[..., None]).squeeze(-1)
    lse = wide.gather(-1, target[..., None]).squeeze(-1) + nll   # to the rounding of a log p near 0, mostly
    loss = (1.0 - epsilon) * nll + epsilon * (lse - wide.mean(dim=-1))
    if real is not None:
        loss, nll = loss.where(real, 0.0), nll.where(real, 0.0)
    return loss.sum(), nll.sum(), lse


def logit_gradient(logits: torch.Tensor, target: torch.Tensor, lse: torch.Tensor, real: torch.Tensor | None,
                   epsilon: float, grad_loss: torch.Tensor, grad_nll: torch.Tensor) -> torch.Tensor:
    """The gradient of `smoothed_sums`' two sums (weighted `grad_loss`, `grad_nll`) at the logits, in
    one pass and no reduction: softmax * (g_loss + g_nll) - g_loss * eps / V, less (1 - eps) g_loss +
    g_nll at the gold token."""
    vocab = logits.size(-1)
    keep = 1.0 if real is None else real[..., None].to(lse.dtype)                    # (..., 1)
    scale, floor, gold = (keep * g for g in (grad_loss + grad_nll, grad_loss * (epsilon / vocab),
                                             (1.0 - epsilon) * grad_loss + grad_nll))
    grad = torch.sub(logits, lse[..., None]).exp_().mul_(scale).sub_(floor)          # (..., V) fp32
    if torch.compiler.is_compiling():   # fused into the pass above, where a scatter is a buffer of its own
        grad = grad - torch.where(torch.arange(vocab, device=grad.device) == target[..., None], gold, 0.0)
    else:                               # eager: in place, one write a row
        grad.scatter_add_(-1, target[..., None], (-gold).expand(target[..., None].shape))
    return grad.to(logits.dtype)


@functools.cache
def compiled(function):
    """`function` compiled by inductor, every dimension dynamic: one compile for every batch shape."""
    return torch.compile(function, dynamic=True)


class SmoothedCrossEntropy(torch.autograd.Function):
    """Summed label-smoothed loss and summed NLL of (..., V) logits at (...) targets, only where `real`
    (...) is True (None: everywhere); the sums in fp32 at least, whatever the logits' dtype.

    Backward keeps only the logits (in their own dtype, bf16 under autocast) and lse, and writes the
    gradient in one pass (`logit_gradient`). As log_softmax, gather and mean, inductor's graphs took a
    third reduction in forward and, in backward, another and a (rows, V) fp32 buffer to scatter the
    gold tokens' gradient into; on an H200 their two kernels took 10 % of the Base's GPU time, 480 + 319
    us a 4,096-row micro-batch, where a pass over its bf16 logits takes ~65 (bench/gpu_kernels.py loss).

    `kernels`: run the two passes over the logits compiled (`fast: loss`, an eager step's only compiled
    part): on one CPU thread 17 + 19 ms for a (3,700, 5,781) bf16 batch against 91 eagerly, whose
    elementwise ops each read and write the whole (rows, V) tensor (docs/measurements.md)."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, target: torch.Tensor, real: torch.Tensor | None, epsilon: float,
                kernels: bool = False):
        loss, nll, lse = (compiled(smoothed_sums) if kernels else smoothed_sums)(logits, target, real, epsilon)
        ctx.save_for_backward(logits, target, lse, real)
        ctx.epsilon, ctx.kernels = epsilon, kernels
        return loss, nll

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss: torch.Tensor, grad_nll: torch.Tensor):
        gradient = compiled(logit_gradient) if ctx.kernels else logit_gradient
        return gradient(*ctx.saved_tensors, ctx.epsilon, grad_loss, grad_nll), None, None, None, None


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, epsilon: float,
                        real: torch.Tensor | None = None, kernels: bool = False):
    """Summed smoothed loss and summed NLL over (..., V) logits and (...) targets; `real` (...) bool:
    the positions that count, the others (padding) add nothing; `kernels`: its passes compiled
    (`SmoothedCrossEntropy`).

    The smoothed target puts 1 - eps on the gold token and eps spread uniformly over the whole
    vocabulary, which is torch's `label_smoothing` definition (fairseq spreads eps over V - 1).
    """
    return SmoothedCrossEntropy.apply(logits, target, real, epsilon, kernels)


def output_agreement(outputs: torch.Tensor, pad: torch.Tensor, sentences: torch.Tensor) -> torch.Tensor:
    """Li et al. (2018) Eq. 8 negated and summed over sentences: sum_b 1/H^2 sum_ij cos(O_b^i, O_b^j).

    outputs (B, H, S, d_head) of one attention layer; pad (B, S) True at padding; sentences (B,) False
    at the rows without a sentence that pad a batch to a fixed shape (batching.collate), which add
    nothing. O^i is head i's output over the whole sentence (its real tokens' rows, flattened), so a
    pair of heads agrees as much as their outputs point the same way across the sentence; i = j counts
    (1), as in the paper's sum."""
    heads = outputs.masked_fill(pad[:, None, :, None], 0.0).flatten(2).float()     # (B, H, S*d_head)
    unit = F.normalize(heads, dim=-1)
    return (unit @ unit.transpose(1, 2)).mean(dim=(1, 2)).where(sentences, 0.0).sum()  # (B, H, H) -> ()


def model_loss(model, net_input: dict, prev, target, epsilon: float, static: bool = False, kernels: bool = False):
    """Run a batch's encoder inputs (`net_input`: "src" (B, S) and the family's extra inputs) and
    (B, T) decoder inputs/targets through an encoder-decoder; return (summed loss, summed NLL).

    With `disagreement` lambda > 0 (DisReg) the loss also gets lambda times the heads' agreement,
    `output_agreement` averaged over the encoder's self-attention layers: J = L - lambda * D_output
    per sentence, Li et al.'s objective, with L the sentence's summed token loss as here.

    A family whose likelihood is not a product over target tokens (NPMT sums over segmentations)
    computes its own (loss, NLL) as `sequence_loss`, with the same arguments.

    `static`: project every position to the vocabulary and mask the padding out of the sums, rather than
    pick the real positions first, whose count depends on the data; a compiled step (fast.py) then sees
    one shape per bucket. It costs the padding's share of the output layer. `kernels`: the loss's passes
    over the logits compiled (`SmoothedCrossEntropy`)."""
    if hasattr(model, "sequence_loss"):
        return model.sequence_loss(net_input, prev, target, epsilon)
    weight = getattr(model.config, "disagreement", 0.0)
    if weight:
        with recording_heads(encoder_attentions(model)) as recorded:
            enc = model.encode(**net_input)
    else:  # no block: a compiled step cannot break inside one, and an RNN breaks it (fast.py)
        enc = model.encode(**net_input)
    hidden = model.decode(prev, enc)
    real = target.ne(model.pad)                                                    # (B, T)
    if static:
        loss, nll = label_smoothed_loss(model.logits(hidden), target, epsilon, real, kernels)  # (B, T, V) logits
    else:
        loss, nll = label_smoothed_loss(model.logits(hidden[real]), target[real], epsilon, None, kernels)  # (N, V)
    if weight:
        pad = net_input["src"].eq(model.pad)
        sentences = real.any(dim=1)                                                # (B,)
        agreement = torch.stack([output_agreement(out, pad, sentences) for calls in recorded for out in calls]).mean()
        loss = loss + weight * agreement
    return loss, nll


class LossOf(torch.nn.Module):
    """The training loss of `model` as a module's forward, (net_input, prev, target) -> (summed loss,
    summed NLL), so that DistributedDataParallel sees (and syncs) it and torch.compile compiles it whole
    (fast.py)."""

    def __init__(self, model: torch.nn.Module, label_smoothing: float):
        super().__init__()
        self.model, self.label_smoothing = model, label_smoothing
        self.static = False   # the compiled step's loss (fast.py, `model_loss`)
        self.kernels = False  # `fast: loss`: the loss's passes over the logits compiled (`model_loss`)

    def forward(self, net_input, prev, target):
        return model_loss(self.model, net_input, prev, target, self.label_smoothing, self.static, self.kernels)


def valid_loss(model: torch.nn.Module, corpus: Corpus, max_tokens: int, label_smoothing: float, device,
               precision: str = "fp32") -> tuple[float, float]:
    """(loss, NLL) in bits a target token of `model` as it is (eval mode for the numbers a training
    logs) over the corpus's valid split."""
    sums, tokens = torch.zeros(2, dtype=torch.float64, device=device), 0  # loss, nll
    with torch.no_grad(), runtime.autocast(device, precision):
        for indices in corpus.batches("valid", max_tokens):
            batch = corpus.collate("valid", indices).to(device)
            sums += torch.stack(model_loss(model, batch.net_input, batch.prev, batch.target, label_smoothing)).double()
            tokens += batch.tgt_tokens
    loss, nll = sums.tolist()
    return loss / tokens / math.log(2), nll / tokens / math.log(2)
