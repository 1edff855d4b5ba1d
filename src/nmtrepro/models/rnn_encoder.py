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

from .layers import ModelConfig, run_bidirectional


@dataclass(frozen=True)
class RnnConfig(ModelConfig):
    """d_model is the embedding width and each GRU's units (paper C: 256); encoder_layers counts the
    BiGRU layers, decoder_layers the GRU layers of the decoder (paper: 2 and 2 for NPMT, 1 and 1 for
    the seq2seq baseline); dropout (paper: 0.35) applies to the embeddings and between GRU layers.
    reorder_window: tau of the reordering layer (paper: 6), 0 for none. The Transformer's ffn and
    heads are unused."""
    reorder_window: int = 0

    def __post_init__(self):
        super().__post_init__()
        if self.reorder_window < 0:
            raise ValueError(f"reorder_window must be 0 (no reordering layer) or a window size, not {self.reorder_window}")
        if self.encoder_layers < 1 or self.decoder_layers < 1:
            raise ValueError("a GRU encoder and decoder need at least one layer each")


class SoftReordering(nn.Module):
    """Soft local reordering (Sec. 2.2): h_t = tanh(sum_{i=1..tau} sigmoid(w_i^T [e_{t-tau+1}; ...; e_t])
    e_{t-tau+i}). The window ends at t, as the paper's equation says (the authors' code centres a window
    of 7 instead); positions before the sentence start are zero vectors. Gates are not normalised, so
    the layer can pick one element of the window or shut all of them off. w_i has no bias, as in the
    equation."""

    def __init__(self, d: int, window: int):
        super().__init__()
        self.window = window
        self.gates = nn.Linear(window * d, window, bias=False)            # row i is w_i

    def forward(self, e: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """e: (B, S, d), mask: (B, S) True at real tokens -> (B, S, d), zero at pads."""
        e = e * mask[..., None]
        padded = F.pad(e, (0, 0, self.window - 1, 0))                      # tau-1 zeros before position 0
        windows = padded.unfold(1, self.window, 1).transpose(-1, -2)       # (B, S, tau, d): e_{t-tau+1..t}
        gates = torch.sigmoid(self.gates(windows.flatten(-2)))             # (B, S, tau)
        h = torch.tanh((gates[..., None] * windows).sum(-2))
        return h * mask[..., None]


class SourceEncoder(nn.Module):
    """Embeddings -> [reordering] -> BiGRU: src (B, S) -> states (B, S, 2d), zero at pads."""

    def __init__(self, vocab_size: int, pad: int, c: RnnConfig):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, c.d_model, padding_idx=pad)
        self.reorder = SoftReordering(c.d_model, c.reorder_window) if c.reorder_window else None
        self.gru = nn.GRU(c.d_model, c.d_model, num_layers=c.encoder_layers, batch_first=True,
                          bidirectional=True, dropout=c.dropout if c.encoder_layers > 1 else 0.0)
        self.dropout = c.dropout

    def forward(self, src: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        x = F.dropout(self.embed(src), self.dropout, self.training)
        if self.reorder is not None:
            x = self.reorder(x, ~pad)
        return F.dropout(run_bidirectional(self.gru, x, pad), self.dropout, self.training)
