"""`nmtrepro translate`: raw lines in, detokenized translations out, one line for each line in, from a
model bundle alone (bundle.py), as fairseq-interactive, sockeye-translate and marian-decoder do.

A line goes through what the test sets went through (`prepare-test`: the dataset's tokenizer and
lowercasing, then its BPE codes), the annotations the model reads are made on the fly (parser phrases,
POS tags: sources.py), and the search is `decode`'s, at the workflow's settings unless a flag says
otherwise: on a test set's raw source the output equals the workflow's own decode of it, line for line
(tests/test_translate.py).

What a line cannot be is named, never dropped: an empty line gives an empty line; a line longer than
the longest source training kept (the bundle's `max_source_len`, prepare's max_len) is split at word
boundaries into parts that are translated on their own and joined, and stderr names it; invalid UTF-8
is an error naming the line. `--nbest N` writes N rows a line instead, tab-separated:
`line number (from 1) \\t rank (from 1) \\t score \\t translation`, the score fairseq's (sum of the
tokens' log-probabilities over length ** lenpen; a split line's parts' scores summed).
"""
from __future__ import annotations

import contextlib
import logging
import sys
import time
from typing import IO, Callable, Iterator

from ..core.files import InputError, atomic_open
from ..core.text import BPE_SEPARATOR, detokenize, strip_bpe
from ..data.prepare import tokenize_side
from . import bundle as bundles
from .generate import joined, translate
from .options import SEARCH, SEGMENTS
from .sources import Sources, add_arguments_sources

log = logging.getLogger("nmtrepro.evaluation.translate")


def source_pieces(bundle: bundles.Bundle, lines: list[str]) -> list[str]:
    """Raw source lines as the model's training and test sources were made: tokenized (or, for a
    dataset its recipe tokenized, split on spaces), lowercased where the dataset was, BPE'd."""
    pre = bundle.meta["preprocess"]
    return bundle.bpe(tokenize_side(lines, bundle.meta["src_lang"], pre["lowercase"], pre["tokenized"]))


def split_long(pieces: str, limit: int) -> list[str]:
    """A BPE'd line as parts of at most `limit` pieces, cut after a word's last piece where one lies within
    the limit (a single word longer than the limit is cut inside it)."""
    tokens, parts = pieces.split(), []
    while len(tokens) > limit:
        cut = max((i + 1 for i in range(limit) if not tokens[i].endswith(BPE_SEPARATOR)), default=limit)
        parts.append(" ".join(tokens[:cut]))
        tokens = tokens[cut:]
    return parts + [" ".join(tokens)]


def translate_lines(bundle: bundles.Bundle, lines: list[str], nbest: int = 0, max_source_len: int | None = None,
                    first_line: int = 1, warn: Callable[[str], None] = log.warning, parse_backend: str = "auto",
                    stanza_dir: str | None = None, **options) -> list[list[tuple[float | None, str]]]:
    """Each raw line's translations, best first, as (score, detokenized text): one (None, text) without
    `nbest`, else `nbest` of them with their scores. `options` override the bundle's search settings
    (beam, lenpen, max_len_a, max_len_b, max_tokens, precision, word_bonus); `max_source_len` its split
    limit (0: none); `first_line` numbers the lines in what `warn` says."""
    settings = {**bundle.search, **{k: v for k, v in options.items() if v is not None}}
    limit = bundle.meta["preprocess"]["max_source_len"] if max_source_len is None else max_source_len
    # Each non-empty line's parts (one part unless it is over the limit), flattened into one list.
    owner, parts = [], []
    for number, pieces in enumerate(source_pieces(bundle, lines)):
        if not pieces.strip():
            continue
        split = split_long(pieces, limit) if limit else [pieces]
        if len(split) > 1:
            warn(f"line {first_line + number}: {len(pieces.split())} BPE pieces, over the {limit} the model was "
                 f"trained on: translated in {len(split)} parts")
        owner += [number] * len(split)
        parts += split
    outputs = [[] for _ in lines]
    if parts:
        sources = Sources.of_lines(bundle.model, parts, bundle.src_vocab, parse_backend=parse_backend,
                                   stanza_dir=stanza_dir, src_lang=bundle.meta["src_lang"])
        search = {key: settings[key] for key in ("beam", "lenpen", "max_len_a", "max_len_b")}
        if not nbest:
            search.update(word_bonus=settings["word_bonus"], lm=bundle.target_lm(), lm_weight=settings["lm_weight"])
        found = translate(bundle.model, sources, bundle.tgt_vocab, bundle.device, settings["max_tokens"],
                          settings["precision"], nbest=nbest, **search)
        hyps = found if nbest else [[(None, line)] for line in joined(found)]
        for number, hyp in zip(owner, hyps):
            outputs[number].append(hyp)
    width = nbest or 1
    return [_joined_parts(line_parts, width, bundle.meta["tgt_lang"]) for line_parts in outputs]


def _joined_parts(parts: list[list[tuple[float | None, str]]], width: int, lang: str) -> list[tuple[float | None, str]]:
    """One line's translations from its parts' (empty for an empty line: `width` empty ones): rank k
    joins each part's k-th (or its last) hypothesis, BPE removed, detokenized; scores summed."""
    if not parts:
        return [(0.0 if width > 1 else None, "")] * width
    ranked = []
    for rank in range(max(len(p) for p in parts)):
        chosen = [p[min(rank, len(p) - 1)] for p in parts]
        scores = [score for score, _ in chosen]
        text = detokenize([" ".join(strip_bpe(line) for _, line in chosen)], lang)[0]
        ranked.append((None if None in scores else sum(scores), text))
    return ranked


class Translator:
    """What `nmtrepro.load` gives: a bundle ready to translate raw lines in Python, as the command does."""

    def __init__(self, bundle: bundles.Bundle):
        self.bundle = bundle

    def translate(self, lines: list[str], **options) -> list[str]:
        """Raw source lines to detokenized translations, one a line; `options` as `translate_lines`'
        (beam, lenpen, max_tokens, ...: the bundle's search settings where not given)."""
        return [hyps[0][1] for hyps in translate_lines(self.bundle, lines, **options)]

    def nbest(self, lines: list[str], n: int, **options) -> list[list[tuple[float, str]]]:
        """Each line's `n` best translations, (score, text), best first."""
        return translate_lines(self.bundle, lines, nbest=n, **options)


def load(path, device: str = "auto", threads: int = 0) -> Translator:
    """The bundle folder `path` ready to translate (bundle.load)."""
    return Translator(bundles.load(path, device, threads))


def read_raw(stream: IO[bytes], name: str, buffer: int) -> Iterator[list[str]]:
    """The lines of a byte stream, `buffer` at a time, each decoded as UTF-8 (an error names the line)
    without its line ending; a last line without one counts as a line."""
    chunk = []
    for number, raw in enumerate(stream, 1):
        try:
            chunk.append(raw.decode("utf-8").rstrip("\n").removesuffix("\r"))
        except UnicodeDecodeError as err:
            raise InputError(f"{name}:{number}: not valid UTF-8 ({err.reason} at byte {err.start})") from None
        if len(chunk) == buffer:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def format_rows(translations: list[list[tuple[float | None, str]]], first_line: int, nbest: int) -> list[str]:
    """The output lines: a translation a line, or with `nbest` the tab-separated rows (module docstring)."""
    if not nbest:
        return [hyps[0][1] + "\n" for hyps in translations]
    return [f"{first_line + i}\t{rank}\t{score:.4f}\t{text}\n"
            for i, hyps in enumerate(translations) for rank, (score, text) in enumerate(hyps, 1)]


def add_arguments_translate(parser) -> None:
    parser.add_argument("--model", required=True, help="a model bundle folder (results/<scale>/bundle/<experiment>)")
    parser.add_argument("--input", default="-", help="raw source lines (default: standard input)")
    parser.add_argument("--output", default="-", help="translations (default: standard output)")
    parser.add_argument("--beam", type=int, help=f"beam size (default: the bundle's; {SEARCH['beam']} in most)")
    parser.add_argument("--greedy", action="store_true", help="greedy search (beam 1)")
    parser.add_argument("--nbest", type=int, default=0,
                        help="write the N best a line as rows 'line\\trank\\tscore\\ttranslation'")
    parser.add_argument("--lenpen", type=float, help="length penalty (default: the bundle's)")
    parser.add_argument("--max-len-a", type=float, help="output length limit a*source+b (default: the bundle's)")
    parser.add_argument("--max-len-b", type=int)
    parser.add_argument("--max-tokens", type=int, help="source tokens a batch (default: the bundle's)")
    parser.add_argument("--word-bonus", type=float, help=f"segment models (default: the bundle's, {SEGMENTS['word_bonus']} "
                                                         "where it has none)")
    parser.add_argument("--precision", choices=["fp32", "bf16"], help="default: the bundle's")
    parser.add_argument("--max-source-len", type=int,
                        help="split lines longer than this many BPE pieces (default: the bundle's; 0: never)")
    parser.add_argument("--buffer", type=int, default=10_000, help="lines read and batched together")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (default: torch's)")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:1 (auto: a GPU where there is one)")
    add_arguments_sources(parser, files=False)


@contextlib.contextmanager
def _opened(path: str, mode: str):
    """Standard input or output for "-", else the file (an output written atomically)."""
    if path == "-" and "r" in mode:
        yield sys.stdin.buffer
    elif path == "-":
        sys.stdout.reconfigure(encoding="utf-8")  # whatever the locale says: the translations are UTF-8
        yield sys.stdout
    elif "r" in mode:
        try:
            with open(path, mode) as handle:
                yield handle
        except FileNotFoundError:
            raise InputError(f"missing input file: {path}") from None
    else:
        with atomic_open(path, mode) as handle:
            yield handle


def run_translate(args) -> None:
    if args.greedy and args.beam not in (None, 1):
        raise InputError(f"--greedy is beam 1; --beam {args.beam} says otherwise")
    if args.nbest < 0 or args.buffer < 1:
        raise InputError("--nbest and --buffer take a positive number")
    bundle = bundles.load(args.model, args.device, args.threads)
    options = {"beam": 1 if args.greedy else args.beam, "lenpen": args.lenpen, "max_len_a": args.max_len_a,
               "max_len_b": args.max_len_b, "max_tokens": args.max_tokens, "precision": args.precision,
               "word_bonus": args.word_bonus}
    name = "<stdin>" if args.input == "-" else args.input
    done, start = 0, time.perf_counter()
    with _opened(args.input, "rb") as source, _opened(args.output, "w") as out:
        for chunk in read_raw(source, name, args.buffer):
            translations = translate_lines(bundle, chunk, args.nbest, args.max_source_len, done + 1,
                                           parse_backend=args.parse_backend, stanza_dir=args.stanza_dir, **options)
            out.writelines(format_rows(translations, done + 1, args.nbest))
            out.flush()
            done += len(chunk)
            log.info("%d line%s translated (%.1f lines/s)", done, "s"[:done != 1], done / (time.perf_counter() - start))
