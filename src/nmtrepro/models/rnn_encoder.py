"""The source side that paper C's two families share: word embeddings, an optional soft local
reordering layer (Huang et al. 2018, Sec. 2.2) and a bidirectional GRU (Fig. 3, bottom to top).

NPMT (`npmt.py`) reads these states with SWAN; its baseline, the attention GRU seq2seq
(`gru_attention.py`), attends over them; "with and without the reordering layer" is
`reorder_window` > 0 or 0 in either family.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .layers import ModelConfig, dropout, run_bidirectional


@dataclass(frozen=True)
class RnnConfig(ModelConfig):
    """d_model is the embedding width and each GRU's units (paper C: 256); encoder_layers counts the
    BiGRU layers, decoder_layers the GRU layers of the decoder (paper: 2 and 2 for NPMT, 1 and 1 for
    the seq2seq baseline); dropout (paper: 0.35 "in the GRU layer") applies to the source embeddings
    and the decoder's layers, and, unless hidden_dropout says otherwise, between the BiGRU's layers
    and on its output (the authors' fairseq-lua: -dropout_hid, 0 in their IWSLT command).
    reorder_window: tau of the reordering layer (paper: 6), 0 for none. embed_init_range: the source
    embeddings start U(±range) (the authors' -init_range 0.05); 0 keeps PyTorch's N(0, 1), which
    through the reordering layer's tanh saturates a fifth of its units at the start. The
    Transformer's ffn and heads are unused."""
    reorder_window: int = 0
    hidden_dropout: float | None = None
    embed_init_range: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        if self.reorder_window < 0:
            raise ValueError(f"reorder_window must be 0 (no reordering layer) or a window size, not {self.reorder_window}")
        if self.hidden_dropout is not None and not 0 <= self.hidden_dropout < 1:
            raise ValueError(f"hidden_dropout must be null (as dropout) or a rate in [0, 1), not {self.hidden_dropout}")
        if self.embed_init_range < 0:
            raise ValueError(f"embed_init_range must be 0 (PyTorch's N(0, 1)) or a positive range, not {self.embed_init_range}")
        if self.encoder_layers < 1 or self.decoder_layers < 1:
            raise ValueError("a GRU encoder and decoder need at least one layer each")


class SoftReordering(nn.Module):
    """Soft local reordering (Sec. 2.2): h_t = tanh(sum_{i=1..tau} sigmoid(w_i^T [e_{t-tau+1}; ...; e_t])
    e_{t-tau+i}). The window ends at t, as the paper's equation says (the authors' code centres a window
    of 7 instead); positions before the sentence start are zero vectors. Gates are not normalised, so
    the layer can pick one element of the window or shut all of them off. w_i has no bias, as in the
    equation.

    In training it keeps, for the log (`diagnostics`), the standard deviation of the tanh's input and
    the mean of tanh' = 1 - tanh² over real tokens: how much of the gradient passes the tanh to the
    gates and embeddings (1 when nothing saturates)."""

    def __init__(self, d: int, window: int):
        super().__init__()
        self.window = window
        self.gates = nn.Linear(window * d, window, bias=False)            # row i is w_i
        self.saturation = None                  # on x's device: units, sum x, sum x², sum tanh'

    def forward(self, e: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """e: (B, S, d), mask: (B, S) True at real tokens -> (B, S, d), zero at pads."""
        e = e * mask[..., None]
        padded = F.pad(e, (0, 0, self.window - 1, 0))                      # tau-1 zeros before position 0
        windows = padded.unfold(1, self.window, 1).transpose(-1, -2)       # (B, S, tau, d): e_{t-tau+1..t}
        gates = torch.sigmoid(self.gates(windows.flatten(-2)))             # (B, S, tau)
        x = (gates[..., None] * windows).sum(-2)
        h = torch.tanh(x)
        if self.training:
            self.observe(x.detach(), h.detach(), mask)
        return h * mask[..., None]

    def observe(self, x: torch.Tensor, h: torch.Tensor, mask: torch.Tensor) -> None:
        """Adds the batch's real tokens to `saturation`, on the device: read back only by `diagnostics`,
        so that no batch waits for it."""
        keep = mask[..., None]
        x = x.float()
        sums = torch.stack([keep.sum() * x.size(-1), (x * keep).sum(), (x.square() * keep).sum(),
                            ((1 - h.float().square()) * keep).sum()])
        if self.saturation is None or self.saturation.device != sums.device:
            self.saturation = torch.zeros_like(sums)
        self.saturation += sums

    def diagnostics(self) -> dict[str, float]:
        """{pre_tanh_std, tanh_grad} over the units seen in training since the last call, then starts
        afresh; {} when there were none."""
        if self.saturation is None or not self.saturation[0]:
            return {}
        units, total, squares, grads = self.saturation.tolist()
        self.saturation = None
        mean = total / units
        return {"pre_tanh_std": max(squares / units - mean * mean, 0.0) ** 0.5, "tanh_grad": grads / units}


class SourceEncoder(nn.Module):
    """Embeddings -> [reordering] -> BiGRU: src (B, S) -> states (B, S, 2d), zero at pads."""

    def __init__(self, vocab_size: int, pad: int, c: RnnConfig):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, c.d_model, padding_idx=pad)
        if c.embed_init_range:
            with torch.no_grad():
                self.embed.weight.uniform_(-c.embed_init_range, c.embed_init_range)[pad].zero_()
        self.reorder = SoftReordering(c.d_model, c.reorder_window) if c.reorder_window else None
        self.dropout = c.dropout
        self.hidden_dropout = c.dropout if c.hidden_dropout is None else c.hidden_dropout
        self.gru = nn.GRU(c.d_model, c.d_model, num_layers=c.encoder_layers, batch_first=True,
                          bidirectional=True, dropout=self.hidden_dropout if c.encoder_layers > 1 else 0.0)

    def forward(self, src: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        x = dropout(self.embed(src), self.dropout, self.training)
        if self.reorder is not None:
            x = self.reorder(x, ~pad)
        return dropout(run_bidirectional(self.gru, x, pad), self.hidden_dropout, self.training)
