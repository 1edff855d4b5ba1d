"""The core of NPMT (Huang et al. 2018, paper C): SWAN's segment likelihood, the segment decoder, soft
local reordering and greedy decoding over segments.

SWAN (Sec. 2.1) lets source position t emit one segment a_t of 0..L target tokens closed by `$`;
p(y|x) sums prod_t p(a_t | h_t) over every segmentation of y into |x| such segments. The sum is the
forward dynamic program alpha[t, j] = logsumexp_k alpha[t-1, j-k] + log p(y_{j-k+1..j} $ | h_t),
run here in log space for a whole batch at once. Segments are independent given h_t (no RNN
carries information across segments, as in the paper's experiments), so the segment decoder scores
every (t, start j, length k) in L+1 GRU steps run on all start states together.

Not here yet: this module is not registered as a model family. Wiring it into training (the loss is
`swan_loss`, not the token cross-entropy the trainer knows) and into generation (beam search with
the per-word bonus) is the next step; so are the BiGRU encoder and the config dataclass.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

# Stands in for log 0 inside the DP: with -inf, logsumexp over all -inf entries has a NaN gradient
# (exp(-inf - -inf)), which a `where` cannot mask afterwards. A large finite value keeps every
# gradient finite; the result is set to -inf only where the pair is infeasible. float32/64 only.
_NEG = -1e30


def swan_log_likelihood(seg_logprobs: torch.Tensor, src_lengths: torch.Tensor, tgt_lengths: torch.Tensor,
                        max_seg: int) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(y|x) of SWAN for each sentence, and whether any segmentation exists.

    seg_logprobs: (B, S, T+1, L+1), entry [b, t-1, j, k] = log p(y_{j+1..j+k} $ | h_t) for source
    position t = 1..S; entries past a sentence's lengths are never read. Returns (log_lik (B,),
    feasible (B,) bool); log_lik is -inf where |y| > |x| * L (no segmentation covers y).
    """
    B, S, T1, L1 = seg_logprobs.shape
    assert L1 == max_seg + 1, f"last dimension {L1} != max_seg + 1 = {max_seg + 1}"
    seg = seg_logprobs.clamp_min(_NEG)
    j = torch.arange(T1, device=seg.device)
    k = torch.arange(L1, device=seg.device)
    start = j[:, None] - k[None, :]                       # (T+1, L+1): segment j-k..j ends at j
    valid = start >= 0
    start = start.clamp_min(0)
    alpha = torch.full((B, T1), _NEG, dtype=seg.dtype, device=seg.device)
    alpha[:, 0] = 0.0                                      # alpha[0, 0] = 0: nothing emitted yet
    for t in range(S):
        # (B, T+1, L+1): alpha[t-1, j-k] + seg[t, j-k, k]
        scores = alpha[:, start] + seg[:, t, start, k[None, :]]
        scores = scores.masked_fill(~valid, _NEG)
        new = torch.logsumexp(scores, dim=-1)
        alpha = torch.where((t < src_lengths)[:, None], new, alpha)   # padded source positions: keep
    log_lik = alpha.gather(1, tgt_lengths[:, None]).squeeze(1)
    feasible = tgt_lengths <= src_lengths * max_seg
    return torch.where(feasible, log_lik, torch.full_like(log_lik, float("-inf"))), feasible


def swan_loss(log_lik: torch.Tensor, feasible: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood over the feasible sentences (0 if none): an infeasible pair has
    no segmentation, so it carries no training signal and must not turn the batch's loss into inf/NaN."""
    nll = torch.where(feasible, -log_lik, torch.zeros_like(log_lik))
    return nll.sum() / feasible.sum().clamp_min(1)


class SegmentDecoder(nn.Module):
    """A GRU started afresh from each source state h_t that writes one segment and then `end_index`
    (`$`). Its first input is the embedding of `$` (a segment start, as fairseq starts from eos)."""

    def __init__(self, d_source: int, d_hidden: int, vocab_size: int, end_index: int):
        super().__init__()
        self.end_index = end_index
        self.init = nn.Linear(d_source, d_hidden)
        self.embed = nn.Embedding(vocab_size, d_hidden)
        self.cell = nn.GRUCell(d_hidden, d_hidden)
        self.out = nn.Linear(d_hidden, vocab_size)

    def start_state(self, h: torch.Tensor) -> torch.Tensor:
        """(..., d_source) -> (..., d_hidden), the GRU state before a segment's first token."""
        return torch.tanh(self.init(h))

    def step(self, inputs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One GRU step on any leading shape: tokens (...), state (..., d) -> (new state, log-probs (..., V))."""
        lead = inputs.shape
        state = self.cell(self.embed(inputs).reshape(-1, state.size(-1)), state.reshape(-1, state.size(-1)))
        state = state.reshape(*lead, -1)
        return state, F.log_softmax(self.out(state), dim=-1)

    def segment_logprobs(self, h: torch.Tensor, y: torch.Tensor, tgt_lengths: torch.Tensor,
                         max_seg: int) -> torch.Tensor:
        """log p(y_{j+1..j+k} $ | h_t) for every t, start j and length k, teacher-forced.

        h: (B, S, d_source) source states; y: (B, T) target tokens (padding after tgt_lengths).
        Returns (B, S, T+1, L+1), -inf where j + k > |y|: what `swan_log_likelihood` reads.
        """
        B, S, _ = h.shape
        T, L = y.size(1), max_seg
        # tokens[b, j, m] = y_{j+m+1}, the (m+1)-th token of a segment starting after j: (B, T+1, L)
        y_padded = F.pad(y, (0, L + 1), value=self.end_index)
        tokens = y_padded.unfold(1, L, 1)[:, :T + 1]
        state = self.start_state(h)[:, :, None].expand(B, S, T + 1, -1)   # (B, S, T+1, d)
        inputs = torch.full((B, S, T + 1), self.end_index, dtype=torch.long, device=y.device)
        token_lp, end_lp = [], []
        for m in range(L + 1):
            state, logp = self.step(inputs, state)                         # logp (B, S, T+1, V)
            end_lp.append(logp[..., self.end_index])
            if m < L:
                inputs = tokens[:, None, :, m].expand(B, S, T + 1)
                token_lp.append(logp.gather(-1, inputs[..., None]).squeeze(-1))
        # seg[..., k] = sum_{m<k} log p(token m) + log p($ after k tokens)
        prefix = torch.cumsum(torch.stack([torch.zeros_like(end_lp[0])] + token_lp, dim=-1), dim=-1)
        seg = prefix + torch.stack(end_lp, dim=-1)                         # (B, S, T+1, L+1)
        j = torch.arange(T + 1, device=y.device)
        k = torch.arange(L + 1, device=y.device)
        beyond = (j[:, None] + k[None, :])[None] > tgt_lengths[:, None, None]   # (B, T+1, L+1)
        return seg.masked_fill(beyond[:, None], float("-inf"))

    @torch.no_grad()
    def greedy(self, h: torch.Tensor, src_lengths: torch.Tensor, max_seg: int) -> list[list[list[int]]]:
        """Greedy decoding (Sec. 3): at each source position, the most likely token until `$` or
        max_seg tokens, whichever comes first. h: (B, S, d_source). Returns each sentence's
        segments (one per real source position, possibly empty); the translation is their concatenation."""
        B, S, _ = h.shape
        segments = [[] for _ in range(B)]
        for t in range(S):
            state = self.start_state(h[:, t])                              # (B, d)
            inputs = torch.full((B,), self.end_index, dtype=torch.long, device=h.device)
            open_ = torch.ones(B, dtype=torch.bool, device=h.device)
            emitted = []
            for _ in range(max_seg):                                       # at most L tokens, then `$`
                state, logp = self.step(inputs, state)
                inputs = logp.argmax(-1)
                open_ &= inputs != self.end_index
                emitted.append(torch.where(open_, inputs, -1))
                if not open_.any():
                    break
            rows = torch.stack(emitted, 1).tolist()                        # (B, <= L), -1 after `$`
            for b in range(B):
                if t < src_lengths[b]:
                    segments[b].append([v for v in rows[b] if v >= 0])
        return segments


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
