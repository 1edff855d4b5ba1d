"""Batched beam search with incremental (cached) decoding, and the `decode` command.

Scores follow fairseq: a finished hypothesis scores sum(log p) / len^lenpen, with len counting EOS.
A sentence is done once it holds `beam` finished hypotheses; done sentences leave the batch, so the
cache shrinks as decoding goes on. A family whose outputs are segments (its `searches`: paper C's NPMT)
is searched by segment_search.py instead, with a per-word bonus and an optional n-gram LM
(`kneser_ney.py`); its output keeps its segments, and `decode` reports their average length and the
segmented lines. `search` is the one interface the decode command and the analyses call.
"""
from __future__ import annotations

import logging
import time

import torch
import torch.nn.functional as F

from ..core import runtime
from ..core.files import InputError, atomic_open, read_lines, write_json
from ..core.text import detokenize, strip_bpe
from ..core.vocab import IndexedData, Vocab
from ..training import checkpoint
from . import segment_search
from .kneser_ney import KneserNeyLM
from .options import DEFAULTS
from .sources import Sources, add_arguments_sources, source_options

log = logging.getLogger("nmtrepro.evaluation.generate")
# decode warns above this share of unknown source tokens: BPE'd test sets have next to none, and a
# word-level dataset that maps rare words to <unk> (paper C) a few per cent.
UNKNOWN_WARNING = 0.1


def max_lengths(src_len: torch.Tensor, max_len_a: float, max_len_b: int) -> torch.Tensor:
    """(B,) most tokens before the EOS that ends an output, of sources of `src_len` (B,) tokens (their
    EOS included): a * len + b, rounded down, in float32. CTranslate2's decoding
    (ct2.py) takes the same limits."""
    return (src_len.float() * max_len_a + max_len_b).long()


@torch.no_grad()
def beam_search_nbest(model, net_input: dict, beam: int = DEFAULTS["beam"], lenpen: float = DEFAULTS["lenpen"],
                      max_len_a: float = DEFAULTS["max_len_a"], max_len_b: int = DEFAULTS["max_len_b"],
                      use_cache: bool = True) -> list[list[tuple[float, list[int]]]]:
    """Every finished hypothesis per sentence of net_input["src"] (B, S), best first: (score, token ids
    without EOS), at most `beam` of them.

    `net_input` is what `model.encode` takes (the source and the family's extra inputs); it is read
    once, and beam rows then reorder the encoder state."""
    src = net_input["src"]
    bsz, k, device = src.size(0), beam, src.device
    max_len = max_lengths(src.ne(Vocab.pad).sum(1), max_len_a, max_len_b)  # (B,)
    enc = model.encode(**net_input)
    order = torch.arange(bsz, device=device).repeat_interleave(k)
    enc = model.reorder_encoder(enc, order)
    cache = {} if use_cache else None
    tokens = torch.full((bsz * k, 1), Vocab.bos, dtype=torch.long, device=device)
    scores = torch.full((bsz, k), float("-inf"), device=device)
    scores[:, 0] = 0.0                           # all beams start identical: expand only the first
    alive = torch.arange(bsz, device=device)     # original sentence index of each live row block
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(bsz)]

    for step in range(int(max_len.max()) + 1):
        n = alive.numel()
        prev = tokens[:, -1:] if use_cache else tokens
        hidden = model.decode(prev, enc, cache)[:, -1]
        lprobs = F.log_softmax(model.logits(hidden).float(), dim=-1)   # (n*k, V)
        lprobs[:, Vocab.pad] = lprobs[:, Vocab.bos] = float("-inf")
        at_limit = (max_len[alive] <= step).repeat_interleave(k)
        if at_limit.any():                       # force EOS once a sentence reaches its length limit
            eos_col = lprobs[at_limit, Vocab.eos].clone()
            lprobs[at_limit] = float("-inf")
            lprobs[at_limit, Vocab.eos] = eos_col
        vocab = lprobs.size(1)
        cand = (scores.view(-1, 1) + lprobs).view(n, k * vocab)
        cand_scores, cand_idx = cand.topk(2 * k, dim=1)                 # (n, 2k)
        cand_beam, cand_tok = cand_idx // vocab, cand_idx % vocab
        is_eos = cand_tok.eq(Vocab.eos) & torch.isfinite(cand_scores)

        # EOS among the top k candidates finishes a hypothesis.
        for row, col in is_eos[:, :k].nonzero().tolist():
            sent = int(alive[row])
            if len(finished[sent]) < k:
                hyp = tokens[row * k + int(cand_beam[row, col]), 1:].tolist()
                finished[sent].append((float(cand_scores[row, col]) / (step + 1) ** lenpen, hyp))

        # The best k non-EOS candidates go on.
        rank = is_eos.float() * (2 * k) + torch.arange(2 * k, device=device)
        sel = rank.argsort(dim=1)[:, :k]
        next_beam, next_tok = cand_beam.gather(1, sel), cand_tok.gather(1, sel)
        scores = cand_scores.gather(1, sel)
        rows = (torch.arange(n, device=device)[:, None] * k + next_beam).view(-1)

        keep = torch.tensor([len(finished[int(s)]) < k for s in alive], device=device)
        if not keep.any():
            break
        if not keep.all():                       # drop sentences that are done
            alive, scores = alive[keep], scores[keep]
            next_tok = next_tok[keep]
            rows = rows.view(n, k)[keep].view(-1)
            enc = model.reorder_encoder(enc, rows)  # rows of one sentence share its encoder state
        tokens = torch.cat([tokens[rows], next_tok.view(-1, 1)], dim=1)
        if cache is not None:
            model.reorder_cache(cache, rows)
    return [sorted(hyps, reverse=True) for hyps in finished]


def beam_search(model, net_input: dict, **options) -> list[list[int]]:
    """The best hypothesis per sentence (`beam_search_nbest`'s options), as token ids without EOS."""
    return [hyps[0][1] if hyps else [] for hyps in beam_search_nbest(model, net_input, **options)]


def searches_segments(model) -> bool:
    """Whether the model's outputs are segments (its family's `searches`; a token decoder's are tokens)."""
    return getattr(model, "searches", "tokens") == "segments"


def search(model, net_input: dict, beam: int = DEFAULTS["beam"], lenpen: float = DEFAULTS["lenpen"],
           max_len_a: float = DEFAULTS["max_len_a"], max_len_b: int = DEFAULTS["max_len_b"], use_cache: bool = True,
           word_bonus: float = DEFAULTS["word_bonus"], lm: KneserNeyLM | None = None,
           lm_weight: float = DEFAULTS["lm_weight"]) -> list[list[list[int]]]:
    """Each sentence's best output as segments of token ids: one segment for a token-level decoder,
    SWAN's segments for a segment model (which takes beam, word_bonus and the LM; lenpen and the
    length limits are the token search's)."""
    if searches_segments(model):
        return segment_search.translate(model, net_input["src"], beam, word_bonus, lm, lm_weight)
    return [[hyp] for hyp in beam_search(model, net_input, beam=beam, lenpen=lenpen, max_len_a=max_len_a,
                                         max_len_b=max_len_b, use_cache=use_cache)]


def nbest_search(model, net_input: dict, nbest: int, beam: int = DEFAULTS["beam"], lenpen: float = DEFAULTS["lenpen"],
                 max_len_a: float = DEFAULTS["max_len_a"], max_len_b: int = DEFAULTS["max_len_b"],
                 use_cache: bool = True, **segment_options) -> list[list[tuple[float, list[int]]]]:
    """Each sentence's `nbest` best hypotheses, (score, token ids), best first: a token decoder's only
    (a segment model's search keeps one output a sentence)."""
    if searches_segments(model):
        raise InputError(f"n-best lists come from the token beam search; a {model.config.__class__.__name__} "
                         "model's segment search keeps one output a sentence")
    if not 1 <= nbest <= beam:
        raise InputError(f"--nbest {nbest}: between 1 and the beam ({beam})")
    found = beam_search_nbest(model, net_input, beam, lenpen, max_len_a, max_len_b, use_cache)
    return [hyps[:nbest] for hyps in found]


def translate(model, sources: Sources, tgt_vocab: Vocab, device, max_tokens: int,
              precision: str = "fp32", nbest: int = 0, **options) -> list[list]:
    """Translate sources in length-sorted batches; returns, in input order, each output's BPE'd segments
    (one segment for a token-level decoder), or with `nbest` its n best (score, BPE'd line) pairs."""
    precision = runtime.resolve_precision(device, precision)
    out: list[list | None] = [None] * len(sources.ids)
    batches = sources.batches(max_tokens)
    for done, indices in enumerate(batches, 1):
        with runtime.autocast(device, precision):
            net_input = sources.net_input(indices, device)
            outputs = nbest_search(model, net_input, nbest, **options) if nbest else search(model, net_input, **options)
        for i, output in zip(indices, outputs):
            out[i] = ([(score, tgt_vocab.decode(ids)) for score, ids in output] if nbest
                      else [tgt_vocab.decode(seg) for seg in output])
        if done % 10 == 0 or done == len(batches):
            log.info("decoded %d/%d batches", done, len(batches))
    return out


def segment_stats(segmented: list[list[str]]) -> dict:
    """Paper C's average segment length (output tokens, `$` excluded, over the non-empty segments:
    its footnote 4) and each output with its segments marked by " • " (as its Table 2 prints them)."""
    pieces = [[strip_bpe(seg) for seg in segs if seg] for segs in segmented]
    tokens, count = sum(len(seg.split()) for segs in pieces for seg in segs), sum(map(len, pieces))
    return {"avg_segment_length": tokens / count if count else None, "segments": count,
            "segmented": [" • ".join(segs) for segs in pieces]}


def target_lm(prepared: str, order: int) -> KneserNeyLM:
    """The n-gram LM of the prepared training targets (ids; BOS and EOS pad each sentence)."""
    data = IndexedData(f"{prepared}/train.tgt.bin")
    sentences = (data[i].tolist()[:-1] for i in range(len(data)))  # without the appended EOS
    return KneserNeyLM(sentences, Vocab.bos, Vocab.eos, order=order)


def add_arguments_search(parser) -> None:
    """The beam search's flags, and where the source and its extra inputs come from: `decode`'s, and
    `select-checkpoint`'s, which decodes the dev set with each candidate checkpoint."""
    parser.add_argument("--prepared", required=True, help="prepared dataset folder, for the vocabularies")
    parser.add_argument("--src-bpe", required=True, help="tokenized, BPE'd source, one sentence a line")
    parser.add_argument("--beam", type=int, default=DEFAULTS["beam"])
    parser.add_argument("--lenpen", type=float, default=DEFAULTS["lenpen"])
    parser.add_argument("--max-len-a", type=float, default=DEFAULTS["max_len_a"])
    parser.add_argument("--max-len-b", type=int, default=DEFAULTS["max_len_b"])
    parser.add_argument("--max-tokens", type=int, default=DEFAULTS["max_tokens"], help="source tokens per batch")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--precision", default=DEFAULTS["precision"], choices=["fp32", "bf16"])
    add_arguments_sources(parser)


def search_options(args) -> dict:
    """`add_arguments_search`'s beam settings as `translate`'s options."""
    return {"beam": args.beam, "lenpen": args.lenpen, "max_len_a": args.max_len_a, "max_len_b": args.max_len_b}


def joined(segmented: list[list[str]]) -> list[str]:
    """Each output of `translate` as one BPE'd line: its segments in order, empty ones dropped."""
    return [" ".join(seg for seg in segs if seg) for segs in segmented]


def add_arguments_decode(parser) -> None:
    parser.add_argument("--model", required=True, help="model file (final or averaged)")
    parser.add_argument("--tgt-lang", required=True, help="target language, for detokenization")
    add_arguments_search(parser)
    parser.add_argument("--no-cache", action="store_true", help="recompute every prefix (for checking)")
    parser.add_argument("--word-bonus", type=float, default=DEFAULTS["word_bonus"],
                        help="segment models: lambda1 per output word")
    parser.add_argument("--lm-order", type=int, default=DEFAULTS["lm_order"],
                        help="segment models: an n-gram LM of this order on the training targets (0: none)")
    parser.add_argument("--lm-weight", type=float, default=DEFAULTS["lm_weight"],
                        help="segment models: lambda2 on the LM's log10 p")
    parser.add_argument("--out", required=True, help="detokenized hypotheses")
    parser.add_argument("--out-tok", required=True, help="tokenized hypotheses (BPE removed)")
    parser.add_argument("--stats", help="JSON with decoding speed")


def run_decode(args) -> None:
    device = runtime.setup(args.threads)
    src_vocab, tgt_vocab = Vocab.load_pair(args.prepared)
    model = checkpoint.load_model(args.model, device, {"src": src_vocab, "tgt": tgt_vocab}, args.prepared)
    segment_model = searches_segments(model)
    if not segment_model and (args.word_bonus or args.lm_order or args.lm_weight):
        raise InputError(f"--word-bonus, --lm-order and --lm-weight are options of segment models (NPMT); "
                         f"{args.model} is a {model.config.__class__.__name__} model")
    if args.lm_weight and not args.lm_order:
        raise InputError("--lm-weight needs an LM: give --lm-order (3 in paper C)")
    lines = read_lines(args.src_bpe)
    sources = Sources.of_lines(model, lines, src_vocab, **source_options(args))
    if (unknown := sources.unknown_share()) > UNKNOWN_WARNING:
        log.warning("%.0f%% of %s's tokens are not in %s/dict.src.txt: is it tokenized and BPE'd with this "
                    "dataset's codes (prepare-test)? Raw text goes to `nmtrepro translate`", 100 * unknown,
                    args.src_bpe, args.prepared)
    lm = target_lm(args.prepared, args.lm_order) if args.lm_order else None
    start = time.perf_counter()
    segmented = translate(model, sources, tgt_vocab, device, args.max_tokens, args.precision, **search_options(args),
                          use_cache=not args.no_cache, word_bonus=args.word_bonus, lm=lm, lm_weight=args.lm_weight)
    seconds = time.perf_counter() - start
    hyps = joined(segmented)
    tokenized = [strip_bpe(h) for h in hyps]
    with atomic_open(args.out_tok) as handle:
        handle.writelines(line + "\n" for line in tokenized)
    with atomic_open(args.out) as handle:
        handle.writelines(line + "\n" for line in detokenize(tokenized, args.tgt_lang))
    n_tokens = sum(len(h.split()) + 1 for h in hyps)
    log.info("%d sentences in %.1f s: %.1f sentences/s, %.0f tokens/s",
             len(lines), seconds, len(lines) / seconds, n_tokens / seconds)
    if args.stats:
        stats = {"sentences": len(lines), "seconds": seconds, "target_tokens": n_tokens,
                 "sentences_per_s": len(lines) / seconds, "tokens_per_s": n_tokens / seconds,
                 "beam": args.beam, "device": str(device), "threads": torch.get_num_threads()}
        if segment_model:
            stats.update(word_bonus=args.word_bonus, lm_order=args.lm_order, lm_weight=args.lm_weight,
                         **segment_stats(segmented))
        write_json(args.stats, stats)
