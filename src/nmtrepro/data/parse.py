"""Parser phrases for paper A: Algorithm 1 over a constituency tree, mapped onto BPE positions.

Pipeline per source sentence (the `parse` stage):
  BPE'd line -> words (BPE joined back) -> constituency tree (`nlp.constituency`) -> Algorithm 1 with
  the n-gram segmentation's phrase limit -> word spans -> spans over BPE positions, EOS as its own span.
The spans file has one line per sentence, line-aligned with the binarized source, e.g. `0-3 3-5 5-6`
(half-open [start, end) over BPE positions; the last span is the EOS that `Vocab.encode` appends).
`pad_spans` batches them; the phrase model gathers tokens per span (`models.phrase.gather_index`).
Sentences outside the parse stage's files are parsed on the fly by the same path (`parse_lines`).
A large source is parsed in line-range shards, one job each, and gathered (`data.shards`).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from ..core.files import InputError, atomic_open, iter_lines, write_json
from ..core.text import BPE_SEPARATOR, strip_bpe
from ..core.vocab import IndexedData
from .annotations import Annotation
from .nlp import BACKENDS, PARSERS, constituency, resolve_backend
from .shards import (add_gather_arguments, add_shard_arguments, chunks, gather, merge_counts,
                     shard_lines)
from .trees import Tree

if TYPE_CHECKING:  # torch where a batch is made, not with the module (core/vocab.py says why)
    import torch

log = logging.getLogger("nmtrepro.data.parse")

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "parse": "parser phrases (paper A, Algorithm 1) as BPE-position spans",
    "gather-parse": "concatenate the parse stage's line-range shards and merge their stats",
}

Span = tuple[int, int]  # [start, end) over words or BPE positions
_CHUNK = 2000  # sentences parsed, then written, at a time by `parse_file`: never a corpus's trees in memory


def tokens_per_phrase(seql: int) -> int:
    """ntok = max(min(8, ceil(seql / 6)), 3) for a padded batch width seql (paper A, footnote 2).

    The footnote prints seq/6; the implementation notes (from the authors' code) round up. Rounding
    down would differ for seql 19..47 not divisible by 6 (seql 20: 4 tokens, not 3); the paper's
    own examples agree either way (13 -> 3 tokens x 5 phrases, 30 -> 5 x 6, 50 -> 8 x 7). Integer
    arithmetic, so that a compiled step traces it for any width (training/fast.py).
    It lives here, below the models, because both phrase kinds use it: the n-gram chunks of
    `models.phrase` and Algorithm 1's limit (from the sentence's own length) below."""
    return max(min(8, (seql + 5) // 6), 3)


def _paths(tree: Tree, n_words: int) -> list[list[tuple[int, int]]]:
    """For each word, the (start word, depth) of every node containing it, root first (index = depth)."""
    paths: list[list[tuple[int, int]]] = [[] for _ in range(n_words)]

    def visit(node: Tree, depth: int) -> None:
        leaves = node.positions()
        if leaves != list(range(leaves[0], leaves[0] + len(leaves))):
            raise InputError(f"tree constituent {node.label} is not a contiguous span: {leaves}")
        for w in leaves:
            paths[w].append((leaves[0], depth))
        for child in node.children:
            visit(child, depth + 1)

    if tree.positions() != list(range(n_words)):
        raise InputError(f"tree leaves are not the words 0..{n_words - 1} in order: {tree}")
    visit(tree, 0)
    return paths


def extract_phrases(tree: Tree, max_tokens: int, weights: Sequence[int] | None = None) -> list[Span]:
    """Algorithm 1 (paper A): segment a sentence into phrases read off its parse tree, right to left.

    Each phrase starts as the largest sub-tree at the right edge of what is left of the tree whose
    size is within `max_tokens` (a leaf if none is), then takes in the adjacent sub-trees of the same
    depth to its left while they fit, and is removed from the tree. A node partly removed by earlier
    phrases counts only its remaining words. Sizes are in tokens: `weights[i]` is word i's number of
    BPE pieces (default 1), so the limit means the same as for n-gram phrases.

    Two readings of the pseudo-code, chosen so that no phrase exceeds the limit (the text: "the
    largest sub-tree that complies with the maximum token limitation"): line 3's `nst < n` is taken
    as nst <= n, and the budget left for adjacent sub-trees is n - nst (line 2 sets mt = n but
    never subtracts nst). Only a single word longer than the limit makes a longer phrase.

    Returns contiguous [start, end) word spans covering every word in order.
    """
    n_words = len(tree.positions())
    weights = [1] * n_words if weights is None else list(weights)
    prefix = [0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    paths = _paths(tree, n_words)
    phrases, right = [], n_words
    while right > 0:                                                   # line 1
        path = paths[right - 1]  # nodes at the right edge of the remaining tree, root first
        start, depth = next(((a, d) for a, d in path if prefix[right] - prefix[a] <= max_tokens),
                            path[-1])                                  # line 3: largest ST
        budget = max_tokens - (prefix[right] - prefix[start])         # line 2 (mt), less nst
        while budget > 0 and start > 0:                                # line 6
            left = paths[start - 1]
            if len(left) <= depth:                                     # no STA at depth dst
                break
            a, _ = left[depth]                                         # line 7: STA ends at `start`
            size = prefix[start] - prefix[a]
            if size > budget:                                          # line 8
                break
            start, budget = a, budget - size                          # lines 9-11
        phrases.append((start, right))                                 # line 16
        right = start                                                  # lines 5, 10: removed
    return phrases[::-1]                                               # line 18


def word_pieces(bpe_line: str) -> list[Span]:
    """[start, end) BPE positions of each word: a piece ending in '@@' continues into the next one."""
    spans, start = [], 0
    pieces = bpe_line.split()
    for i, piece in enumerate(pieces):
        if not piece.endswith(BPE_SEPARATOR) or i == len(pieces) - 1:
            spans.append((start, i + 1))
            start = i + 1
    return spans


def to_pieces(word_spans: Sequence[Span], pieces: Sequence[Span]) -> list[Span]:
    """Word spans -> BPE position spans, plus the EOS position as a phrase of its own.

    EOS gets its own span rather than joining the last phrase: it is not a word of the parse, and a
    one-token phrase keeps every other phrase exactly as the tree made it.
    """
    spans = [(pieces[a][0], pieces[b - 1][1]) for a, b in word_spans]
    eos = pieces[-1][1] if pieces else 0
    return spans + [(eos, eos + 1)]


def sentence_spans(bpe_line: str, tree: Tree | None) -> list[Span]:
    """BPE-position phrase spans of one sentence (EOS included), limit from its BPE length + EOS."""
    pieces = word_pieces(bpe_line)
    if tree is None:
        return to_pieces([], pieces)
    weights = [b - a for a, b in pieces]
    limit = tokens_per_phrase(sum(weights) + 1)
    return to_pieces(extract_phrases(tree, limit, weights), pieces)


def format_spans(spans: Sequence[Span]) -> str:
    return " ".join(f"{a}-{b}" for a, b in spans)


def checked_spans(path: str | Path, lengths: Sequence[int] | None = None) -> Iterator[list[Span]]:
    """The sentences' spans of a spans file, a line at a time, each line checked to tile positions 0..n
    contiguously and, given the sentences' token `lengths` (EOS included), to end at its n, and the file
    to hold one line per sentence."""
    lineno = 0
    for lineno, line in enumerate(iter_lines(path), 1):
        try:
            spans = [tuple(map(int, item.split("-"))) for item in line.split()]
        except ValueError:
            raise InputError(f"{path}:{lineno}: expected 'start-end' items, got {line!r}") from None
        ends = [0] + [b for _, b in spans]
        if not spans or any(a != e or b <= a for (a, b), e in zip(spans, ends)):
            raise InputError(f"{path}:{lineno}: spans must tile 0..n contiguously, got {line!r}")
        if lengths is not None and lineno <= len(lengths) and spans[-1][1] != lengths[lineno - 1]:
            raise InputError(f"{path}:{lineno}: spans end at {spans[-1][1]}, the sentence has "
                             f"{lengths[lineno - 1]} tokens (was it parsed from another BPE?)")
        yield spans
    if lengths is not None and lineno != len(lengths):
        raise InputError(f"{path}: {lineno} lines of spans for {len(lengths)} sentences")


def read_spans(path: str | Path, lengths: Sequence[int] | None = None) -> list[list[Span]]:
    """A spans file's sentences' spans, checked (`checked_spans`)."""
    return list(checked_spans(path, lengths))


def span_bounds(path: str | Path, lengths: Sequence[int] | None = None) -> Iterator[list[int]]:
    """A spans file's sentences, checked (`checked_spans`), each as its flat bounds (start, end, start,
    end, ...): the rows of `flat_spans` and of its binarized file (`annotations.binarize`)."""
    return ([bound for span in spans for bound in span] for spans in checked_spans(path, lengths))


def parse_lines(lines: Sequence[str], backend: str, batch_size: int = 64,
                stanza_models: str | None = None) -> list[list[Span]]:
    """Spans of BPE'd source lines: the `parse` command's path, also taken by the analyses for
    sentences the parse stage never saw (probing tasks, contrastive sources)."""
    trees = constituency([strip_bpe(line) for line in lines], backend, batch_size=batch_size,
                         stanza_models=stanza_models)
    return [sentence_spans(line, tree) for line, tree in zip(lines, trees)]


def flat_spans(spans: Sequence[list[Span]]) -> IndexedData:
    """Each sentence's spans as one flat sequence (start, end, start, end, ...) in compact arrays, as a
    training corpus reads them from their binarized file (`span_bounds`): a batch of them is one take
    (`pad_spans`)."""
    return IndexedData.of([bound for span in sentence for bound in span] for sentence in spans)


def pad_spans(spans: Sequence[list[Span]] | IndexedData, indices: list[int] | None = None) -> torch.Tensor:
    """Ragged per-sentence [start, end) spans (of sentences `indices`, or all; lists, or `flat_spans`)
    -> (B, P, 2) LongTensor; missing phrases are (0, 0), the flat sequences' padding."""
    if not isinstance(spans, IndexedData):  # lists (decoding's sources): flattened first
        spans, indices = flat_spans(spans if indices is None else [spans[i] for i in indices]), None
    flat = spans.padded(range(len(spans)) if indices is None else indices, 0)    # (B, 2P)
    return flat.view(flat.size(0), -1, 2)


def span_width(spans: torch.Tensor, rows: int, bucket) -> dict:
    """A bucketed batch's "span_width" (rows, W): W is the `bucket` of its widest phrase, so that the
    model reads that bound from a shape rather than from the data and a compiled step has no
    data-dependent size (models/phrase.py)."""
    import torch

    width = bucket(max(1, int((spans[..., 1] - spans[..., 0]).max())))                 # spans (B, P, 2)
    return {"span_width": torch.zeros(rows, width, dtype=torch.bool)}


def stand_in(sentences: int, src_length: int, device) -> dict:
    """Phrases of three tokens, and the widest as a shape as `span_width` gives it (training.flops)."""
    import torch

    spans = [[(i, min(i + 3, src_length)) for i in range(0, src_length, 3)]] * sentences
    return {"spans": torch.tensor(spans, device=device),
            "span_width": torch.zeros(sentences, 3, dtype=torch.bool, device=device)}


def parse_on_the_fly(lines: Sequence[str], lang: str | None, backend: str, stanza_dir: str | None):
    log.info("parsing %d source sentences into phrases (%s backend)", len(lines), backend)
    return parse_lines(lines, backend, stanza_models=stanza_dir)


def summarise(stats: dict) -> dict:
    """The parse statistics' rates and averages, from their counts (one job's or the gathered shards')."""
    sentences, phrases, seconds = stats["sentences"], stats["phrases"], stats["parse_seconds"]
    return {**stats, "parse_seconds": round(seconds, 2),
            "sentences_per_second": round(sentences / max(seconds, 1e-9), 1),
            "phrases_per_sentence": round(phrases / max(sentences, 1), 2),
            "tokens_per_phrase": round(stats["tokens"] / max(phrases, 1), 2)}


def parse_file(bpe_path: str | Path, out: str | Path, backend: str, batch_size: int = 64,
               stanza_models: str | None = None, shard: int = 1, shards: int = 1) -> dict:
    """Write the spans of every line of a BPE'd source file (or of one of its line-range shards) to
    `out`, a chunk of sentences at a time, and return statistics for the log and the report: the
    backend asked for, the one that made the trees (`auto` resolved) and how the report names it."""
    resolved = resolve_backend(backend, stanza_models)
    counts = {"sentences": 0, "phrases": 0, "tokens": 0}  # phrases and tokens without the EOS span
    started = time.perf_counter()
    with atomic_open(out) as handle:
        for chunk in chunks(shard_lines(bpe_path, shard, shards), _CHUNK):
            for spans in parse_lines(chunk, resolved, batch_size, stanza_models):
                handle.write(format_spans(spans) + "\n")
                counts["phrases"] += len(spans) - 1
                counts["tokens"] += spans[-1][0]
            counts["sentences"] += len(chunk)
            log.info("parsed %d sentences", counts["sentences"])
    return summarise({"requested_backend": backend, "backend": resolved, "parser": PARSERS[resolved], **counts,
                      "parse_seconds": time.perf_counter() - started})


def merge_stats(stats: list[dict]) -> dict:
    """The statistics of the shards of one file as one job over it would give them (seconds summed)."""
    return summarise(merge_counts(stats, ("requested_backend", "backend", "parser"),
                                  ("sentences", "phrases", "tokens", "parse_seconds")))


def add_arguments_parse(parser) -> None:
    parser.add_argument("--src-bpe", required=True, help="BPE'd source file (one sentence a line, '@@' joins)")
    parser.add_argument("--out", required=True, help="spans file: one line per sentence, 'a-b c-d ...'")
    parser.add_argument("--stats", help="also write parse statistics (JSON) here")
    add_backend_arguments(parser)
    add_shard_arguments(parser)


def add_backend_arguments(parser) -> None:
    """The English NLP backend's flags, the same for the parse and pos stages."""
    parser.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="auto: stanza if its English models are present, else spacy")
    parser.add_argument("--stanza-dir", help="stanza models folder (default $STANZA_RESOURCES_DIR or ~/stanza_resources)")
    parser.add_argument("--batch-size", type=int, default=64, help="sentences per parser or tagger batch")


def run_parse(args) -> None:
    stats = parse_file(args.src_bpe, args.out, args.backend, args.batch_size, args.stanza_dir, args.shard, args.shards)
    if args.stats:
        write_json(args.stats, stats)
    log.info("%s", stats)


def add_arguments_gather_parse(parser) -> None:
    add_gather_arguments(parser, "spans")


def run_gather_parse(args) -> None:
    log.info("%s", gather(args.parts, args.out, args.part_stats, args.stats, merge_stats))


ANNOTATION = Annotation(
    name="spans", stage="parse", read=read_spans, ids=span_bounds, make=parse_on_the_fly, stand_in=stand_in,
    annotate=lambda bpe, out, lang, backend, batch, stanza_dir: parse_file(bpe, out, backend, batch, stanza_dir),
    note="Parser phrases: trees made by", stats_key="backend", makers=PARSERS, pad=pad_spans, shapes=span_width,
    tools="parser (stanza, spacy)")
