"""Search over segments, for a family whose outputs are segments (paper C's NPMT: `searches =
"segments"`), beside generate.py's token beam search: greedy decoding (the paper's Sec. 3) and the
authors' beam search with its word bonus and target LM (their npmt.lua `beam_search`).

Both read the model's source states (`encode`) and its segment decoder's `start_state` and `step`
alone, so the model file holds the model and its loss, and the search lives with the others.
"""
from __future__ import annotations

import collections
import math
from typing import NamedTuple

import torch

from ..core.vocab import Vocab
from ..models.npmt import SegmentDecoder


@torch.no_grad()
def translate(model, src: torch.Tensor, beam: int = 1, word_bonus: float = 0.0, lm=None,
              lm_weight: float = 0.0) -> list[list[tuple[int, ...]]]:
    """Each sentence's best output as its non-empty segments of token ids: beam 1 is the paper's
    greedy decoding, a larger beam `segment_beam_search` (word bonus and LM, a `KneserNeyLM` over
    target ids, inside the search as the authors' code has them)."""
    enc = model.encode(src)
    h, lengths, L = enc["out"], (~enc["pad"]).sum(1), model.config.max_segment
    banned = (model.pad, Vocab.bos)
    if beam == 1:
        return [[s for s in segs if s] for segs in greedy(model.decoder, h, lengths, L, banned)]
    return segment_beam_search(model.decoder, h, lengths, L, beam, word_bonus, lm, lm_weight, banned)


@torch.no_grad()
def greedy(decoder: SegmentDecoder, h: torch.Tensor, src_lengths: torch.Tensor, max_seg: int,
           banned: tuple[int, ...] = ()) -> list[list[tuple[int, ...]]]:
    """Greedy decoding (Sec. 3): at each source position, the most likely token until `$` or
    max_seg tokens, whichever comes first; `banned` tokens (padding, BOS) are never emitted.
    h: (B, S, d_source). Returns each sentence's segments (one per real source position, possibly
    empty); the translation is their concatenation."""
    B, S, _ = h.shape
    segments = [[] for _ in range(B)]
    for t in range(S):
        state = decoder.start_state(h[:, t])                              # (B, layers, d)
        inputs = torch.full((B,), decoder.end_index, dtype=torch.long, device=h.device)
        open_ = torch.ones(B, dtype=torch.bool, device=h.device)
        emitted = []
        for _ in range(max_seg):                                          # at most L tokens, then `$`
            state, logp = decoder.step(inputs, state)
            logp[:, list(banned)] = float("-inf")
            inputs = logp.argmax(-1)
            open_ &= inputs != decoder.end_index
            emitted.append(torch.where(open_, inputs, -1))
            if not open_.any():
                break
        rows = torch.stack(emitted, 1).tolist()                           # (B, <= L), -1 after `$`
        for b in range(B):
            if t < src_lengths[b]:
                segments[b].append(tuple(v for v in rows[b] if v >= 0))
    return segments


class Hypothesis(NamedTuple):
    """A beam entry for one output string: log p(string | x) summed over the segmentations merged into
    it, its LM log10 probability, and its most likely segmentation (non-empty segments) with that
    segmentation's log-probability."""
    logp: float = 0.0
    lm_logp: float = 0.0
    best: float = 0.0
    segments: tuple = ()


class Open(NamedTuple):
    """A segment being written at the current source position: the sentence, the string before it and
    its Hypothesis, the segment's tokens so far, their log p under h_t, and the LM log10 p of all."""
    sentence: int
    tokens: tuple
    hyp: Hypothesis
    segment: tuple = ()
    seg_logp: float = 0.0
    lm_logp: float = 0.0


def merge(paths: list[tuple[tuple, Hypothesis]]) -> dict:
    """(string, Hypothesis) paths with equal strings merged, as the authors' beam merges them: their
    probabilities add up and the more likely segmentation is kept."""
    merged: dict = {}
    for tokens, path in paths:
        old = merged.get(tokens)
        if old is not None:
            total = max(old.logp, path.logp) + math.log1p(math.exp(-abs(old.logp - path.logp)))
            path = (old if old.best >= path.best else path)._replace(logp=total)
        merged[tokens] = path
    return merged


def lm_context(lm, tokens: tuple) -> tuple:
    """The LM's history for the next word after `tokens`: the sentence start `bos`, then the words."""
    return ((lm.bos,) * (lm.order - 1) + tokens)[1 - lm.order:]


@torch.no_grad()
def segment_beam_search(decoder: SegmentDecoder, h: torch.Tensor, src_lengths: torch.Tensor, max_seg: int,
                        beam: int, word_bonus: float = 0.0, lm=None, lm_weight: float = 0.0,
                        banned: tuple[int, ...] = ()) -> list[list[tuple[int, ...]]]:
    """Each sentence's best output as its non-empty segments, by the authors' beam search (their
    npmt.lua `beam_search`) maximising Q(y) = log p(y|x) + word_bonus * |y| + lm_weight * log10 p_lm(y).

    At each source position every hypothesis (string) is extended token by token together with the
    segment it writes: a step scores each (open segment, next token) by Q so far plus the token's log p
    and keeps the best ones of each sentence (`beam` at the first step, then as many as stayed open),
    closes those that chose `$` and charges each token kept its word bonus and LM score, so that long or
    LM-preferred segments compete while they are written, not only once whole; after L tokens `$` is
    forced. Closed segments whose strings are equal merge (`merge`) and all of them go on to the next
    position. As the authors' code, the LM reads the string after one `bos` and scores no sentence end.
    h: (B, S, d_source)."""
    pools = [{(): Hypothesis()} for _ in range(h.size(0))]

    def objective(logp: float, words: int, lm_logp: float) -> float:
        return logp + word_bonus * words + lm_weight * lm_logp

    def q(entry: Open) -> float:
        return objective(entry.hyp.logp + entry.seg_logp, len(entry.tokens) + len(entry.segment), entry.lm_logp)

    for t in range(h.size(1)):
        entries = [Open(b, tokens, hyp, lm_logp=hyp.lm_logp) for b, n in enumerate(src_lengths.tolist()) if t < n
                   for tokens, hyp in pools[b].items()]
        if not entries:
            break
        closed = {b: [] for b in {e.sentence for e in entries}}
        # A segment's first step reads only h_t: run once per sentence, shared by its hypotheses.
        sentences = sorted(closed)
        state = decoder.start_state(h[sentences, t])
        inputs = torch.full((len(sentences),), decoder.end_index, dtype=torch.long, device=h.device)
        first = torch.tensor([sentences.index(e.sentence) for e in entries], device=h.device)
        budget = dict.fromkeys(sentences, beam)
        for step in range(max_seg + 1):
            state, logp = decoder.step(inputs, state)                              # (N, V)
            if step == 0:
                state, logp = state[first], logp[first]
            if step == max_seg:                                                    # `$` after L tokens
                ends = logp[:, decoder.end_index].tolist()
                for e, end in zip(entries, ends):
                    closed[e.sentence].append(e._replace(seg_logp=e.seg_logp + end))
                break
            logp[:, list(banned)] = float("-inf")
            rows, tokens, token_logp = _best_steps(entries, logp, [q(e) for e in entries], budget)
            kept = []
            for row, token, lp in zip(rows, tokens, token_logp):
                e = entries[row]
                if token == decoder.end_index:
                    closed[e.sentence].append(e._replace(seg_logp=e.seg_logp + lp))
                    continue
                lm_word = lm.log10_prob(token, lm_context(lm, e.tokens + e.segment)) if lm is not None else 0.0
                kept.append((row, token, e._replace(segment=e.segment + (token,), seg_logp=e.seg_logp + lp,
                                                    lm_logp=e.lm_logp + lm_word)))
            if not kept:
                break
            entries = [e for _, _, e in kept]
            budget = collections.Counter(e.sentence for e in entries)
            state = state[[row for row, _, _ in kept]]
            inputs = torch.tensor([token for _, token, _ in kept], dtype=torch.long, device=h.device)
        for b, paths in closed.items():
            pools[b] = merge([(e.tokens + e.segment,
                               Hypothesis(e.hyp.logp + e.seg_logp, e.lm_logp, e.hyp.best + e.seg_logp,
                                          e.hyp.segments + ((e.segment,) if e.segment else ())))
                              for e in paths])

    def final(item) -> float:
        tokens, hyp = item
        return objective(hyp.logp, len(tokens), hyp.lm_logp)

    return [list(max(pool.items(), key=final)[1].segments) for pool in pools]


def _best_steps(entries: list[Open], logp: torch.Tensor, scores: list[float], budget: dict[int, int]):
    """The budget[sentence] best (row, token) continuations of each sentence's open segments (`entries`,
    grouped by sentence), by score + log p: their rows into `entries`, tokens and log p. One top-k over
    a (sentences, rows, V) padded view."""
    sentences = list(dict.fromkeys(e.sentence for e in entries))
    which = {b: i for i, b in enumerate(sentences)}
    slot, seen = [], collections.Counter()
    for e in entries:
        slot.append(seen[e.sentence])
        seen[e.sentence] += 1
    n, vocab = max(seen.values()), logp.size(1)
    total = logp + torch.tensor(scores, dtype=logp.dtype, device=logp.device)[:, None]
    padded = total.new_full((len(sentences), n, vocab), float("-inf"))
    padded[[which[e.sentence] for e in entries], slot] = total
    k = min(max(budget[b] for b in sentences), n * vocab)
    values, index = padded.view(len(sentences), -1).topk(k, dim=1)
    row_of = {(which[e.sentence], s): r for r, (e, s) in enumerate(zip(entries, slot))}
    picks = [(row_of[i, flat // vocab], flat % vocab)
             for i, (vs, flats) in enumerate(zip(values.tolist(), index.tolist()))
             for v, flat in zip(vs[:budget[sentences[i]]], flats) if v > float("-inf")]
    rows = [r for r, _ in picks]
    tokens = [k for _, k in picks]
    chosen = logp[rows, tokens].tolist() if picks else []
    return rows, tokens, chosen
