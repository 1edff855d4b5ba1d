"""NPMT (Huang et al. 2018, paper C): SWAN's segment likelihood, the segment decoder and the `npmt`
family (source encoder of `rnn_encoder.py` + SWAN): the model and its loss.

SWAN (Sec. 2.1) lets source position t emit one segment a_t of 0..L target tokens closed by `$`;
p(y|x) sums prod_t p(a_t | h_t) over every segmentation of y into |x| such segments. The sum is the
forward dynamic program alpha[t, j] = logsumexp_k alpha[t-1, j-k] + log p(y_{j-k+1..j} $ | h_t),
run here in log space for a whole batch at once. Segments are independent given h_t (no RNN
carries information across segments, as in the paper's experiments), so the segment decoder scores
every (t, start j, length k) that a segmentation of y can use (`segment_rows`) in L+1 GRU steps run on
all start states together, each step's softmax over the vocabulary in chunks (`LinearLogProbs`).

The family trains by `sequence_loss` (SWAN's -log p(y|x), which the trainer calls instead of the token
cross-entropy); its outputs are segments (`searches`), which evaluation/segment_search.py decodes greedily
or by the authors' beam search beside generate.py's token search. The target vocabulary's EOS is `$`:
SWAN's outputs end when the source does, so EOS is free. With `clean_posteriors` it trains as the
authors' npmt.lua does: the segmentation posteriors come from a pass of the segment decoder with its
dropout off, the gradient from a pass with it on.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..core.runtime import to_device
from ..core.vocab import Vocab
from . import register
from .layers import dropout
from .rnn_encoder import RnnConfig, SourceEncoder

# Stands in for log 0 inside the DP: with -inf, logsumexp over all -inf entries has a NaN gradient
# (exp(-inf - -inf)), which a `where` cannot mask afterwards. A large finite value keeps every
# gradient finite; the result is set to -inf only where the pair is infeasible. float32/64 only.
_NEG = -1e30


def ending_view(x: torch.Tensor) -> torch.Tensor:
    """x (B, L+T+1, L+1), row L+s holding what starts after s target tokens, column k a segment of k
    tokens -> the view (B, T+1, L+1) whose [j, i] is x[L + j - k, k] for k = L - i: slot i of position j
    is the segment of k tokens that ends at j (rows 0..L-1 stand for starts before the target's first
    token). Strides (L+1, L): no copy, no gather, and writes through it land where they came from."""
    B, rows, L1 = x.shape
    assert x.stride(1) == L1 and x.stride(2) == 1, "the last two dimensions must be contiguous"
    return x.as_strided((B, rows - (L1 - 1), L1), (x.stride(0), L1, L1 - 1), x.storage_offset() + L1 - 1)


class ForwardAlgorithm(torch.autograd.Function):
    """SWAN's forward DP as one autograd node: seg (B, S, T+1, L+1) with entry [b, t, s, k] the score of
    the segment of k tokens that position t+1 writes after s tokens (finite: log 0 is _NEG), active
    (B, S) whether position t+1 emits -> alpha after the last position, (B, T+1).

    Step t adds alpha_t[s] to seg[t, s, k] and takes the logsumexp over the (s, k) with s + k = j
    (`ending_view`), keeping each segment's share of it, exp(alpha_t[s] + seg[t, s, k] - alpha_{t+1}[j]):
    backward runs the steps in reverse with these weights alone. As plain autograd ops the loop left
    ~12 graph nodes and ~35 kernels per source position, which on a GPU the host launches one by one
    while the GPU waits; here it is one node and 11 kernels per position."""

    @staticmethod
    def forward(ctx, seg: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
        B, S, T1, L1 = seg.shape
        work = seg.new_full((B, L1 - 1 + T1, L1), _NEG)       # rows 0..L-1: starts before the target's
        ending = ending_view(work)                            # (B, T+1, L+1)
        alphas = seg.new_full((S + 1, B, T1), _NEG)
        alphas[0, :, 0] = 0.0                                 # nothing emitted yet
        weights, totals = seg.new_empty((S, B, T1, L1)), seg.new_empty((S, B, T1))
        for t in range(S):
            torch.add(alphas[t, :, :, None], seg[:, t], out=work[:, L1 - 1:])
            top = ending.amax(-1)                             # a finite max: _NEG stands for log 0
            torch.sub(ending, top[:, :, None], out=weights[t]).exp_()
            torch.sum(weights[t], -1, out=totals[t])
            new = totals[t].log().add_(top)
            torch.where(active[:, t, None], new, alphas[t], out=alphas[t + 1])   # padded positions: keep
        ctx.save_for_backward(weights.div_(totals[..., None]), active)
        return alphas[S].clone()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor):
        weights, active = ctx.saved_tensors
        S, B, T1, L1 = weights.shape
        dseg = weights.new_zeros((B, S, L1 - 1 + T1, L1))     # seg's gradient in `ending_view`'s layout
        for t in reversed(range(S)):                           # grad: d loss / d alpha_{t+1}
            torch.mul(weights[t], grad[:, :, None], out=ending_view(dseg[:, t]))
            grad = torch.where(active[:, t, None], dseg[:, t, L1 - 1:].sum(-1), grad)
        return dseg[:, :, L1 - 1:].mul_(active[:, :, None, None]), None               # padded positions: 0


def swan_log_likelihood(seg_logprobs: torch.Tensor, src_lengths: torch.Tensor, tgt_lengths: torch.Tensor,
                        max_seg: int) -> tuple[torch.Tensor, torch.Tensor]:
    """log p(y|x) of SWAN for each sentence, and whether any segmentation exists.

    seg_logprobs: (B, S, T+1, L+1), entry [b, t-1, j, k] = log p(y_{j+1..j+k} $ | h_t) for source
    position t = 1..S; entries past a sentence's lengths are never read. Returns (log_lik (B,),
    feasible (B,) bool); log_lik is -inf where |y| > |x| * L (no segmentation covers y).
    """
    B, S, T1, L1 = seg_logprobs.shape
    assert L1 == max_seg + 1, f"last dimension {L1} != max_seg + 1 = {max_seg + 1}"
    active = torch.arange(S, device=seg_logprobs.device)[None] < src_lengths[:, None]
    alpha = ForwardAlgorithm.apply(seg_logprobs.clamp_min(_NEG), active)
    log_lik = alpha.gather(1, tgt_lengths[:, None]).squeeze(1)
    feasible = tgt_lengths <= src_lengths * max_seg
    return torch.where(feasible, log_lik, torch.full_like(log_lik, float("-inf"))), feasible


def swan_posteriors(seg_logprobs: torch.Tensor, src_lengths: torch.Tensor, tgt_lengths: torch.Tensor,
                    max_seg: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`swan_log_likelihood`'s (log_lik, feasible), and each entry's posterior (B, S, T+1, L+1): the
    probability, given x and y, that the segmentation uses that segment, which is the gradient of
    log p(y|x) with respect to the entry (0 for infeasible pairs and unused entries). Computed without
    a graph back to the scores (they come detached)."""
    with torch.enable_grad():
        seg = seg_logprobs.detach().requires_grad_()
        log_lik, feasible = swan_log_likelihood(seg, src_lengths, tgt_lengths, max_seg)
        posteriors, = torch.autograd.grad(torch.where(feasible, log_lik, 0.0).sum(), seg)
    return log_lik.detach(), feasible, posteriors


@contextlib.contextmanager
def evaluating(module: nn.Module):
    """`module` in eval mode (dropout off) inside the block, as it was after."""
    was = module.training
    module.eval()
    try:
        yield module
    finally:
        module.train(was)


def swan_loss(log_lik: torch.Tensor, feasible: torch.Tensor) -> torch.Tensor:
    """Negative log-likelihood summed over the feasible sentences (0 if none; the trainer divides by
    target tokens): an infeasible pair has no segmentation, so it carries no training signal and must
    not turn the batch's loss into inf/NaN."""
    return torch.where(feasible, -log_lik, torch.zeros_like(log_lik)).sum()


def at_least_fp32(x: torch.Tensor) -> torch.Tensor:
    """x in fp32 when it is in a narrower float type (bf16 autocast), else as it is (fp64 stays)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype a Linear on x computes in here: autocast's (bf16) where it is on, else x's own."""
    device = x.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype


def normaliser_chunk_bytes(device: torch.device) -> int:
    """The fp32 logits a chunk of SWAN's normaliser holds: on a GPU, rows enough for full-speed matmuls
    and few launches (11k at paper C's 22,822 words); on a CPU, whose speed the chunk size left unchanged
    from 16 MiB to 1 GiB (docs/measurements.md), little memory."""
    return 1 << 30 if device.type == "cuda" else 16 << 20


def chunk_log_probs(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                    columns: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(c, d), (V, d), (V,), (c, k) -> log softmax(x W^T + b) at the columns (c, k), and the log-normaliser
    (c,): logits in x's dtype, the rest in fp32 at least."""
    logits = at_least_fp32(torch.addmm(bias, x, weight.t()))
    lse = torch.logsumexp(logits, dim=-1)
    return logits.gather(1, columns) - lse[:, None], lse


def chunk_logits_grad(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, lse: torch.Tensor,
                      columns: torch.Tensor, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The gradient (c, V) of the logits, in x's dtype, that `chunk_log_probs`' outputs send back with
    grad (c, k), and its column sums (V,) in fp32 at least: what a chunk's dx, dW and db multiply out.
    d log p_col / d logit_v = [v = col] - softmax_v; the softmax comes from the recomputed logits. The
    chosen columns' share is added to the outputs, not to the fp32 (c, V) term, which a compiled chunk
    then never writes out: a scatter into it would make it a buffer of its own."""
    g = at_least_fp32(torch.addmm(bias, x, weight.t())).sub_(lse[:, None]).exp_().mul_(-grad.sum(-1)[:, None])
    wide = grad.to(g.dtype)
    sums = g.sum(0).index_add_(0, columns.flatten(), wide.flatten())
    return g.to(x.dtype).scatter_add_(1, columns, grad.to(x.dtype)), sums


@functools.cache
def chunk_functions(compiled: bool) -> tuple:
    """(chunk_log_probs, chunk_logits_grad), compiled or not. On a GPU they are compiled: inductor reads
    a chunk's bf16 logits once or twice where the eager ops cross them some ten times in fp32 (casts,
    max, exp, sums), and that memory traffic, not the matmuls, is most of SWAN's normaliser there. On a
    CPU they run eager: compiling costs a process tens of seconds, and the CPU's time is in the matmuls."""
    if not compiled:
        return chunk_log_probs, chunk_logits_grad
    return torch.compile(chunk_log_probs, dynamic=True), torch.compile(chunk_logits_grad, dynamic=True)


class LinearLogProbs(torch.autograd.Function):
    """log softmax(x W^T + b) at a few columns of each row: x (N, d), W (V, d), b (V,), columns (N, k) ->
    (N, k), computed `chunk` rows at a time, so that no (N, V) tensor is ever held.

    SWAN needs, for every (source position, target start, segment step), the log-probability of `$` and
    of the segment's next token: two columns of a softmax over the vocabulary. As a Linear then a
    log-softmax, autograd kept the (N, V) logits or softmax of all 7 steps for backward, the bulk of
    NPMT's 29.4 GiB on paper C's 800-token batches (docs/measurements.md), and each of them crossed memory
    some ten times in fp32; and scoring the two tokens apart from the normaliser took ~20 kernels and
    ~8 graph nodes each, a step. Here forward keeps x, the columns and the (N,) log-normaliser; backward
    recomputes each chunk's logits, turns them into their gradient and multiplies out the chunk's dx,
    dW and db: one more matmul for fewer passes over (N, V), and memory for one chunk. The matmuls run
    in the ambient autocast dtype (bf16), the exponentials and sums in fp32; dW and db accumulate in
    fp32. The chunk's pointwise work is compiled on a GPU (`chunk_functions`)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, columns: torch.Tensor,
                chunk: int) -> torch.Tensor:
        dtype = compute_dtype(x)
        wide = torch.promote_types(dtype, torch.float32)
        out = torch.empty(columns.shape, dtype=wide, device=x.device)
        lse = torch.empty(x.size(0), dtype=wide, device=x.device)
        log_probs, _ = chunk_functions(x.is_cuda)
        with torch.autocast(x.device.type, enabled=False):
            w, b = weight.to(dtype), bias.to(dtype)
            for start in range(0, x.size(0), chunk):
                part = slice(start, start + chunk)
                out[part], lse[part] = log_probs(x[part].to(dtype), w, b, columns[part])
        ctx.save_for_backward(x, weight, bias, columns, lse)
        ctx.dtype, ctx.chunk = dtype, chunk
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: torch.Tensor):
        x, weight, bias, columns, lse = ctx.saved_tensors
        need_x, need_w, need_b = ctx.needs_input_grad[:3]
        dx = torch.empty_like(x) if need_x else None
        dw = weight.new_zeros(weight.shape, dtype=lse.dtype) if need_w else None
        db = bias.new_zeros(bias.shape, dtype=lse.dtype) if need_b else None
        _, logits_grad = chunk_functions(x.is_cuda)
        with torch.autocast(x.device.type, enabled=False):
            w, b = weight.to(ctx.dtype), bias.to(ctx.dtype)
            for start in range(0, x.size(0), ctx.chunk):
                part = slice(start, start + ctx.chunk)
                xs = x[part].to(ctx.dtype)
                g, column_sums = logits_grad(xs, w, b, lse[part], columns[part], grad[part])   # (chunk, V), (V,)
                if need_b:
                    db += column_sums
                if need_x:
                    dx[part] = g @ w
                if need_w:
                    dw += g.t() @ xs
        return dx, None if dw is None else dw.to(weight.dtype), None if db is None else db.to(bias.dtype), None, None


def segment_rows(src_lengths: np.ndarray, tgt_lengths: np.ndarray, S: int, T: int,
                 max_seg: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """The (sentence b, source position t, target start j) whose segments of 1..L tokens some
    segmentation of the target can use, as index arrays sorted by the tokens left after j (most
    first), and for m = 1..L how many have at least m left: step m of the segment decoder runs on
    that prefix alone (trailing zeros dropped).

    A segment at position t (0-based) that starts after j tokens is on a segmentation iff t < |x|, the
    positions before it can have written j tokens (j <= t L), the positions from it on can write the
    rest (|y| - j <= (|x| - t) L) and it has a token to write (j < |y|). On IWSLT14's test set in
    800-token batches 62 % of the (b, t, j) of a padded batch are, 51 % in 3,000-token batches
    (docs/measurements.md): the rest was scored over the whole vocabulary for nothing.

    It runs on the host, from the lengths (B,) there: which rows exist sets the sizes of what the
    decoder computes next, and read from the GPU (`nonzero`, the counts) it made the host wait for the
    queue to drain twice a batch, then left the GPU waiting while the host launched the next kernels."""
    L = max_seg
    t = np.arange(S)[None, :, None]
    j = np.arange(T + 1)[None, None, :]
    n_src, left = src_lengths[:, None, None], tgt_lengths[:, None, None] - j                # left (B, 1, T+1)
    keep = (t < n_src) & (j <= t * L) & (left >= 1) & (left <= (n_src - t) * L)           # (B, S, T+1)
    b, t, j = keep.nonzero()
    left = tgt_lengths[b] - j
    order = np.argsort(-left, kind="stable")
    counts = (left[None] >= np.arange(1, L + 1)[:, None]).sum(1)
    return b[order], t[order], j[order], [int(n) for n in counts if n]


class SegmentDecoder(nn.Module):
    """A stack of GRU cells started afresh from each source state h_t that writes one segment and then
    `end_index` (`$`). Its first input is the embedding of `$` (a segment start, as fairseq starts
    from EOS). States carry a layer axis: (..., layers, d_hidden)."""

    def __init__(self, d_source: int, d_hidden: int, vocab_size: int, end_index: int, layers: int = 1,
                 dropout: float = 0.0):
        super().__init__()
        self.end_index, self.layers, self.d, self.dropout = end_index, layers, d_hidden, dropout
        self.init = nn.Linear(d_source, layers * d_hidden)
        self.embed = nn.Embedding(vocab_size, d_hidden)
        self.cells = nn.ModuleList(nn.GRUCell(d_hidden, d_hidden) for _ in range(layers))
        self.out = nn.Linear(d_hidden, vocab_size)

    def start_state(self, h: torch.Tensor) -> torch.Tensor:
        """(..., d_source) -> (..., layers, d_hidden), the GRU states before a segment's first token."""
        return torch.tanh(self.init(h)).unflatten(-1, (self.layers, self.d))

    def advance(self, inputs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One GRU step on any leading shape: tokens (...), state (..., layers, d) -> (new state, the top
        layer's output (..., d) after dropout, which the output layer reads)."""
        lead = inputs.shape
        x, state = self.embed(inputs).reshape(-1, self.d), state.reshape(-1, self.layers, self.d)
        new = []
        for i, cell in enumerate(self.cells):
            x = cell(x, state[:, i])
            new.append(x)
            x = dropout(x, self.dropout, self.training)
        return torch.stack(new, 1).reshape(*lead, self.layers, self.d), x.reshape(*lead, self.d)

    def step(self, inputs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`advance`, then log-probabilities over the vocabulary (..., V) (fp32 at least, under bf16 too)."""
        state, x = self.advance(inputs, state)
        logits = self.out(x)
        return state, F.log_softmax(at_least_fp32(logits), dim=-1)

    def log_probs(self, x: torch.Tensor, columns: torch.Tensor) -> torch.Tensor:
        """log softmax(out(x)) at the given columns: x (..., d), columns (..., k) -> (..., k), in fp32,
        `normaliser_chunk_bytes` of logits at a time (`LinearLogProbs`)."""
        chunk = max(1, normaliser_chunk_bytes(x.device) // (4 * self.out.out_features))
        flat = LinearLogProbs.apply(x.reshape(-1, self.d), self.out.weight, self.out.bias,
                                    columns.reshape(-1, columns.size(-1)), chunk)
        return flat.view(columns.shape)

    def segment_logprobs(self, h: torch.Tensor, y: torch.Tensor, src_lengths: torch.Tensor,
                         tgt_lengths: torch.Tensor, max_seg: int) -> torch.Tensor:
        """log p(y_{j+1..j+k} $ | h_t) for every source position t, start j and length k that a
        segmentation of y uses (`segment_rows`), teacher-forced; -inf for every other (t, j, k >= 1).

        h: (B, S, d_source) source states; y: (B, T) target tokens (padding after tgt_lengths);
        src_lengths: (B,) positions that emit; both lengths as host tensors (the rows are planned
        there). Returns (B, S, T+1, L+1): what `swan_log_likelihood` reads.
        """
        B, S, _ = h.shape
        T, L, device = y.size(1), max_seg, y.device
        n_src, n_tgt = src_lengths.numpy(), tgt_lengths.numpy()
        rows_b, rows_t, rows_j, counts = segment_rows(n_src, n_tgt, S, T, L)
        b, t, start = to_device(torch.from_numpy(np.stack([rows_b, rows_t, rows_j])), device)    # (3, rows)
        beyond = to_device(torch.from_numpy(np.arange(T + 1)[None] > n_tgt[:, None]), device)  # (B, T+1)
        end = torch.full((B, S, 1), self.end_index, dtype=torch.long, device=device)
        # The first step reads only h_t, so it runs once per (b, t) and is shared by every start j: it
        # scores `$` and the first token of every start, y_{j+1}.
        state, x = self.advance(end[..., 0], self.start_state(h))          # (B, S, layers, d), (B, S, d)
        first = self.log_probs(x, torch.cat([end, y[:, None].expand(B, S, T)], -1))           # (B, S, 1+T)
        seg = [torch.where(beyond[:, None, :, None], float("-inf"), first[:, :, :1, None])]   # k = 0
        state, following = state[b, t], first[b, t, 1 + start]           # (rows, ...); log p(y_{j+1} | h_t)
        rows, prefix, columns = len(rows_b), following.new_zeros(len(rows_b)), []
        end = end.new_full((rows, 1), self.end_index)
        for m, n in enumerate(counts, 1):                                  # the rows with >= m tokens left
            token = y[b[:n], start[:n] + m - 1]                            # the segment's m-th token
            prefix = prefix[:n] + following[:n]
            state, x = self.advance(token, state[:n])
            wanted = end[:n]                                               # `$`, then the (m+1)-th token:
            if m < L:                                                      # a stand-in, unread, past y's end
                wanted = torch.cat([wanted, y[b[:n], (start[:n] + m).clamp_max(T - 1), None]], -1)
            scores = self.log_probs(x, wanted)                             # (n, 1 or 2)
            columns.append(F.pad(prefix + scores[:, 0], (0, rows - n), value=float("-inf")))
            following = scores[:, -1]
        tail = torch.stack(columns, -1) if columns else first.new_empty((0, 0))                # (rows, <= L)
        tail = F.pad(tail, (0, L - tail.size(1)), value=float("-inf"))
        seg.append(first.new_full((B, S, T + 1, L), float("-inf")).index_put((b, t, start), tail))
        return torch.cat(seg, dim=-1)


@dataclass(frozen=True)
class NpmtConfig(RnnConfig):
    """RnnConfig's sizes (paper C: 256 units, 2 BiGRU layers, a 2-layer segment GRU, dropout 0.35)
    with the paper's reordering window (6; 0 is "NPMT without the reordering layer") and the
    maximum segment length L (6). clean_posteriors: weigh each segment's gradient by its posterior
    from a pass with the segment decoder's dropout off (the authors' npmt.lua: `compute_logpy` in
    evaluate mode, `compute_gradients` in training mode); off, the gradient is that of -log p(y|x)
    with the dropout in the sum over segmentations too. The paper is silent on it."""
    reorder_window: int = 6
    max_segment: int = 6
    clean_posteriors: bool = False

    def __post_init__(self):
        super().__post_init__()
        if self.max_segment < 1:
            raise ValueError(f"max_segment must be at least 1 token, not {self.max_segment}")


@register("npmt")
class NPMT(nn.Module):
    """Source encoder (+ reordering) and SWAN. `infeasible_pairs` counts the training pairs seen with
    |y| > |x| * L: they have no segmentation, so they add nothing to the loss (see `swan_loss`)."""
    config_class = NpmtConfig
    # the trainer's fast path asks a family whether its step stays eager, and why (training/fast.py)
    stays_eager = ("SWAN's dynamic program over segmentations loops in Python over data-dependent spans and "
                   "segment lengths; compiling it would recompile for nearly every batch")
    searches = "segments"  # decoded by evaluation/segment_search.py (generate.searches_segments)

    def __init__(self, src_vocab: int, tgt_vocab: int, config: NpmtConfig):
        super().__init__()
        self.config, self.pad, d = config, Vocab.pad, config.d_model
        self.encoder = SourceEncoder(src_vocab, self.pad, config)
        self.decoder = SegmentDecoder(2 * d, d, tgt_vocab, Vocab.eos, config.decoder_layers, config.dropout)
        self.infeasible_pairs = 0
        self.valid_segments = None      # on the device: target tokens, expected non-empty segments

    def encode(self, src: torch.Tensor) -> dict:
        """Source states (B, S, 2d) and the positions SWAN skips: padding and the source's EOS, which the
        authors' code strips, so that each source word, and only a word, emits a segment."""
        pad = src.eq(self.pad) | src.eq(Vocab.eos)
        return {"out": self.encoder(src, pad), "pad": pad}

    def sequence_loss(self, net_input: dict, prev: torch.Tensor, target: torch.Tensor, epsilon: float):
        """(summed -log p(y|x), the same) over a batch; `target` (B, T) ends in EOS, which SWAN does not
        emit. Label smoothing (`epsilon`) has no place in a sum over segmentations and is not applied.

        The lengths come to the host once, first, before the encoder's work is queued: the segment rows
        and the count of infeasible pairs read them there, and nothing after waits for the GPU (each such
        read drains its queue, and the GPU then waits while the host launches what follows)."""
        src, L = net_input["src"], self.config.max_segment
        lengths = torch.stack([(src.ne(self.pad) & src.ne(Vocab.eos)).sum(1), target.ne(self.pad).sum(1) - 1])
        src_lengths, tgt_lengths = lengths                                  # (B,) each, on the device
        host_src, host_tgt = lengths.cpu()                                  # the batch's one host sync
        enc = self.encode(src)
        y = target.masked_fill(target.eq(Vocab.eos), self.pad)
        rows = (enc["out"], y, host_src, host_tgt, L)
        self.infeasible_pairs += int((host_tgt.numpy() > host_src.numpy() * L).sum())
        if self.training and self.config.clean_posteriors:
            with torch.no_grad(), evaluating(self.decoder):
                clean = self.decoder.segment_logprobs(*rows)
            log_lik, feasible, weights = swan_posteriors(clean.float(), src_lengths, tgt_lengths, L)
            seg = self.decoder.segment_logprobs(*rows).float()                # dropout on: the gradient
            surrogate = -(seg.masked_fill(weights == 0, 0.0) * weights).sum()
            nll = swan_loss(log_lik, feasible)
            nll = surrogate + (nll - surrogate).detach()                     # the clean NLL's value
            return nll, nll
        seg = self.decoder.segment_logprobs(*rows).float()
        if not self.training and not torch.is_grad_enabled():              # validation: no graph to keep
            log_lik, feasible, posteriors = swan_posteriors(seg, src_lengths, tgt_lengths, L)
            self.count_segments(posteriors, tgt_lengths.masked_fill(~feasible, 0).sum())
        else:
            log_lik, feasible = swan_log_likelihood(seg, src_lengths, tgt_lengths, L)
        nll = swan_loss(log_lik, feasible)
        return nll, nll

    def count_segments(self, posteriors: torch.Tensor, tokens: torch.Tensor) -> None:
        """Adds a validation batch's target tokens (of its feasible pairs) and expected non-empty
        segments (the posteriors of the entries with k >= 1) to `valid_segments`, on the device."""
        sums = torch.stack([tokens.to(posteriors.dtype), posteriors[..., 1:].sum()]).double()
        if self.valid_segments is None or self.valid_segments.device != sums.device:
            self.valid_segments = torch.zeros_like(sums)
        self.valid_segments += sums

    def diagnostics(self, split: str) -> dict[str, float]:
        """What the training log adds for NPMT, since the last call for the split, then afresh: for
        "train", the reordering layer's saturation (`SoftReordering.diagnostics`) and the count of pairs
        with no segmentation so far (they add nothing to the loss); for "valid", the average segment
        length, target words over the expected non-empty segments under the model's posterior (paper
        C's 1.3-1.4 words on decoded outputs; about 1 when every word writes one)."""
        if split == "train":
            figures = self.encoder.reorder.diagnostics() if self.encoder.reorder is not None else {}
            return {**figures, "infeasible_pairs_so_far": self.infeasible_pairs} if self.infeasible_pairs else figures
        if self.valid_segments is None or not self.valid_segments[1]:
            return {}
        tokens, segments = self.valid_segments.tolist()
        self.valid_segments = None
        return {"segment_length": tokens / segments}
