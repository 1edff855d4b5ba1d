"""Prepare a dataset for training: Moses tokenization, joint BPE, length filtering, vocabularies and
binarized splits; and the same tokenization + BPE for each test split.

Paper C prepares word-level, lowercased data (0 BPE merges, `lowercase`) and maps rare words to
<unk> (`min_count`); stats.json records both, so that the test splits get the same treatment. A
dataset whose recipe tokenized it (IWSLT14: its manifest says `tokenized`) is only split on spaces:
Moses over Moses output with XML escapes would split the escapes (`&apos;s` -> `& apos ; s`).

BPE is learned on the whole training corpus, as the papers learned it, unless the dataset's
`bpe_sample_lines` bounds it: learning's time and memory grow with the corpus's word types (subword-nmt
indexes every pair of symbols in every type), and WMT14 En-Fr's would not fit an hour and 8 GB; so its
codes are learned on that many training pairs evenly spaced through the corpus (docs/paper-scale.md,
"Learning BPE on a sample"). They are still applied to every pair.

Outputs use side names (src, tgt), not language codes, so rules need not know the languages.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import itertools
import logging
import multiprocessing
import tempfile
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..core.files import (InputError, atomic_open, count_lines, evenly_spaced, iter_lines, read_json, read_parallel,
                          write_json, write_lines)
from ..core.text import BPE, learn_bpe, tokenize
from ..core.vocab import IndexedData, Vocab, flat_chunk, save_chunks
from .shards import chunks

log = logging.getLogger("nmtrepro.data.prepare")

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "prepare": "tokenize, learn/apply joint BPE, build vocabularies, binarize",
    "prepare-test": "tokenize and BPE one test split with the learned codes",
    "prepare-ref": "prepare a test split's further reference (NIST's ref1..ref3) as its first",
}


def keep_pair(src: str, tgt: str, max_len: int, max_ratio: float) -> str | None:
    """None if the pair is kept, else the reason it is dropped (counted in stats.json)."""
    ls, lt = len(src.split()), len(tgt.split())
    if ls == 0 or lt == 0:
        return "empty"
    if ls > max_len or lt > max_len:
        return "too_long"
    if max(ls, lt) / min(ls, lt) > max_ratio:
        return "ratio"
    return None


def tokenize_side(lines: list[str], lang: str, lowercase: bool, tokenized: bool = False) -> list[str]:
    """Moses-tokenized lines (`tokenized`: already so, only whitespace normalised), lowercased if asked."""
    out = [" ".join(line.split()) for line in lines] if tokenized else tokenize(lines, lang)
    return [line.lower() for line in out] if lowercase else out


def recipe_tokenized(data_dir: Path) -> bool:
    """Whether the fetched dataset's files are tokenized already (its manifest, written by `fetch`)."""
    manifest = data_dir / "manifest.json"
    return manifest.is_file() and read_json(manifest).get("tokenized", False)


# Tokenization and BPE stream through the corpus in chunks of this many pairs, each chunk one task
# of the worker pool: En-Fr's 36M pairs are never in memory at once, on any number of workers.
_CHUNK = 10_000


def iter_parallel(src_path: Path, tgt_path: Path) -> Iterator[tuple[str, str]]:
    """The pairs of two line-aligned files, read as they are used; files of different lengths are
    refused (at the first line one of them lacks)."""
    for number, (src, tgt) in enumerate(itertools.zip_longest(iter_lines(src_path), iter_lines(tgt_path)), 1):
        if src is None or tgt is None:
            short = src_path if src is None else tgt_path
            raise InputError(f"parallel files differ in length: {short} ends after {number - 1} lines, "
                             f"{tgt_path if src is None else src_path} goes on")
        yield src, tgt


def _bounded_map(pool, func: Callable, items: Iterable, ahead: int) -> Iterator:
    """`pool.imap` in order, with at most `ahead` tasks in flight: imap's feeder would read the whole
    input ahead of the workers, the corpus into memory."""
    pending = collections.deque()
    for item in items:
        pending.append(pool.apply_async(func, (item,)))
        if len(pending) >= ahead:
            yield pending.popleft().get()
    while pending:
        yield pending.popleft().get()


@contextlib.contextmanager
def worker_map(workers: int, initializer: Callable | None = None, initargs: tuple = ()) -> Iterator[Callable]:
    """An ordered `map` over chunks in `workers` processes (1: in this one, no pool to start).
    forkserver, not fork: the parent has imported torch, whose threads a fork would copy mid-state."""
    if workers <= 1:
        if initializer is not None:
            initializer(*initargs)
        yield map
        return
    context = multiprocessing.get_context("forkserver")
    with context.Pool(workers, initializer, initargs) as pool:
        yield functools.partial(_bounded_map, pool, ahead=2 * workers)


def _tokenize_chunk(task: tuple[list[tuple[str, str]], str, str, bool, bool]) -> tuple[list[str], list[str]]:
    pairs, src_lang, tgt_lang, lowercase, tokenized = task
    return (tokenize_side([s for s, _ in pairs], src_lang, lowercase, tokenized),
            tokenize_side([t for _, t in pairs], tgt_lang, lowercase, tokenized))


_worker_bpe: BPE | None = None  # a pool worker's codes, loaded once by `_load_bpe`, not once per chunk


def _load_bpe(codes: Path) -> None:
    global _worker_bpe
    _worker_bpe = BPE(codes)


def _bpe_chunk(pairs: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    return _worker_bpe([s for s, _ in pairs]), _worker_bpe([t for _, t in pairs])


def _write_pairs(chunked_pairs: Iterable[tuple[list[str], list[str]]], src_path: Path, tgt_path: Path) -> None:
    """Write chunks of (source lines, target lines) to two line-aligned files as they come."""
    with atomic_open(src_path) as src_out, atomic_open(tgt_path) as tgt_out:
        for src, tgt in chunked_pairs:
            src_out.writelines(line + "\n" for line in src)
            tgt_out.writelines(line + "\n" for line in tgt)


def bpe_lines(src: Path, tgt: Path, sample_lines: int | None = None) -> tuple[Iterator[str], Iterator[str], int]:
    """The tokenized training lines that BPE is learned on, read as they are used, and how many pairs:
    every pair, or with `sample_lines` that many evenly spaced through the corpus (the same pairs on
    both sides; all of them where the corpus has no more)."""
    total = count_lines(src)
    if not sample_lines or sample_lines >= total:
        return iter_lines(src), iter_lines(tgt), total
    return (evenly_spaced(iter_lines(src), total, sample_lines), evenly_spaced(iter_lines(tgt), total, sample_lines),
            sample_lines)


def tokenize_and_bpe(data_dir: Path, out_dir: Path, work_dir: Path, src_lang: str, tgt_lang: str,
                     bpe_merges: int, max_len: int, max_ratio: float, lowercase: bool,
                     workers: int, pretokenized: bool = False,
                     bpe_sample_lines: int | None = None) -> tuple[dict[str, tuple[Path, Path]], dict, int]:
    """Tokenize train and valid, learn joint BPE codes on train (out_dir/bpe.codes; on `bpe_sample_lines`
    of its pairs where given: `bpe_lines`) and apply them, filtering training pairs (`keep_pair`, in words
    before BPE is learned, in pieces after). Streams: tokenized text goes to `work_dir`, the codes are
    learned from those files, BPE'd text is written chunk by chunk; `workers` processes tokenize and apply
    BPE (the output does not depend on their number); `pretokenized` text is only split on spaces. The
    BPE'd source is written to out_dir/<split>.src.bpe, which the parse and pos stages read; the target
    beside the tokenized text in `work_dir`. Returns each split's BPE'd (source, target) files, the counts
    of dropped pairs and how many pairs BPE was learned on."""
    dropped = {"empty": 0, "too_long": 0, "ratio": 0}

    def kept(chunked_pairs, ratio: float):
        for src, tgt in chunked_pairs:
            pairs = []
            for pair in zip(src, tgt):
                reason = keep_pair(*pair, max_len, ratio)
                if reason is None:
                    pairs.append(pair)
                else:
                    dropped[reason] += 1
            yield [s for s, _ in pairs], [t for _, t in pairs]

    # Training pairs that no segmentation could keep (empty, or more words than max_len pieces) are
    # dropped before BPE is learned, so that they never shape the codes: one 20k-word line of the ci
    # slice otherwise halved its vocabulary. Length in pieces and the ratio depend on the codes, so
    # those are checked after BPE (a few pairs that BPE then drops were among those it learned from).
    tokenized = {split: (work_dir / f"{split}.tok.src", work_dir / f"{split}.tok.tgt") for split in ("train", "valid")}
    with worker_map(workers) as pmap:
        for split, paths in tokenized.items():
            tasks = ((chunk, src_lang, tgt_lang, lowercase, pretokenized)
                     for chunk in chunks(iter_parallel(data_dir / f"{split}.src", data_dir / f"{split}.tgt"), _CHUNK))
            words = pmap(_tokenize_chunk, tasks)
            _write_pairs(kept(words, float("inf")) if split == "train" else words, *paths)
            log.info("tokenized %s", split)
    src, tgt, learned_on = bpe_lines(*tokenized["train"], bpe_sample_lines)
    learn_bpe(src, tgt, bpe_merges, out_dir / "bpe.codes")
    log.info("learned BPE on %d training pairs (dropped before: %s)", learned_on, dropped)

    pieces = {split: (out_dir / f"{split}.src.bpe", work_dir / f"{split}.tgt.bpe") for split in tokenized}
    with worker_map(workers, _load_bpe, (out_dir / "bpe.codes",)) as pmap:
        for split, (src, tgt) in tokenized.items():
            bped = pmap(_bpe_chunk, chunks(zip(iter_lines(src), iter_lines(tgt)), _CHUNK))
            _write_pairs(kept(bped, max_ratio) if split == "train" else bped, *pieces[split])
            log.info("applied BPE to %s", split)
    return pieces, dropped, learned_on


_worker_vocabs: dict[str, Vocab] = {}  # a pool worker's vocabularies by side, loaded once by `_load_vocabs`


def _load_vocabs(out_dir: Path) -> None:
    _worker_vocabs.update((side, Vocab.load(out_dir / f"dict.{side}.txt")) for side in ("src", "tgt"))


def _encode_chunk(task: tuple[str, list[str]]) -> tuple:
    side, lines = task
    return flat_chunk([_worker_vocabs[side].encode(line) for line in lines])


def binarize(pieces: dict[str, tuple[Path, Path]], out_dir: Path, workers: int) -> dict[str, dict]:
    """Each split's BPE'd sides as ids (`Vocab.encode` with the saved vocabularies, EOS appended) in
    out_dir/<split>.<side>.bin, streamed chunk by chunk through `workers` processes (`save_chunks`):
    memory stays a few chunks' at any corpus size. Returns each split's pairs and tokens a side."""
    counts = {}
    with worker_map(workers, _load_vocabs, (out_dir,)) as pmap:
        for split, sides in pieces.items():
            for side, lines in zip(("src", "tgt"), sides):
                path = out_dir / f"{split}.{side}.bin"
                save_chunks(path, pmap(_encode_chunk, ((side, chunk) for chunk in chunks(iter_lines(lines), _CHUNK))))
                binarized = IndexedData(path)
                counts.setdefault(split, {"pairs": len(binarized)})[f"{side}_tokens"] = int(binarized.offsets[-1])
    return counts


def prepare(data_dir: Path, out_dir: Path, src_lang: str, tgt_lang: str, bpe_merges: int,
            max_len: int, max_ratio: float, lowercase: bool = False, min_count: int = 1,
            workers: int = 1, tokenized: bool = False, bpe_sample_lines: int | None = None) -> dict:
    out_dir.mkdir(parents=True, exist_ok=True)
    stats = {"src_lang": src_lang, "tgt_lang": tgt_lang, "bpe_merges": bpe_merges, "lowercase": lowercase,
             "min_count": min_count, "tokenized": tokenized, "bpe_sample_lines": bpe_sample_lines, "splits": {}}
    with tempfile.TemporaryDirectory(prefix=".tokenized.", dir=out_dir) as work_dir:
        pieces, dropped, stats["bpe_learned_on"] = tokenize_and_bpe(
            data_dir, out_dir, Path(work_dir), src_lang, tgt_lang, bpe_merges, max_len, max_ratio, lowercase, workers,
            tokenized, bpe_sample_lines)
        src_vocab, tgt_vocab = (Vocab.build(iter_lines(side), min_count) for side in pieces["train"])
        src_vocab.save(out_dir / "dict.src.txt")
        tgt_vocab.save(out_dir / "dict.tgt.txt")
        stats["splits"] = binarize(pieces, out_dir, workers)
    stats["splits"]["train"]["dropped"] = dropped
    stats["vocab"] = {"src": len(src_vocab), "tgt": len(tgt_vocab)}
    log.info("kept %d training pairs (dropped %s); vocabularies: src %d, tgt %d",
             stats["splits"]["train"]["pairs"], dropped, len(src_vocab), len(tgt_vocab))
    write_json(out_dir / "stats.json", stats)
    return stats


def add_arguments_prepare(parser) -> None:
    parser.add_argument("--data-dir", required=True, help="fetched dataset (train/valid .src/.tgt)")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--src-lang", required=True)
    parser.add_argument("--tgt-lang", required=True)
    parser.add_argument("--bpe-merges", type=int, required=True)
    parser.add_argument("--max-len", type=int, required=True, help="drop training pairs longer than this (subwords)")
    parser.add_argument("--max-ratio", type=float, required=True, help="drop training pairs with a larger length ratio")
    parser.add_argument("--lowercase", action="store_true", help="lowercase both sides after tokenizing")
    parser.add_argument("--min-count", type=int, default=1, help="rarer training symbols become <unk>")
    parser.add_argument("--workers", type=int, default=1,
                        help="processes that tokenize, apply BPE and binarize (the output is the same for any number)")
    parser.add_argument("--bpe-sample-lines", type=int,
                        help="learn BPE on this many training pairs evenly spaced through the corpus (default: all)")


def run_prepare(args) -> None:
    if args.bpe_sample_lines is not None and args.bpe_sample_lines < 1:
        raise InputError(f"--bpe-sample-lines {args.bpe_sample_lines}: BPE is learned on at least one pair "
                         f"(leave it out to learn on all of them)")
    prepare(Path(args.data_dir), Path(args.out_dir), args.src_lang, args.tgt_lang, args.bpe_merges,
            args.max_len, args.max_ratio, args.lowercase, args.min_count, args.workers,
            recipe_tokenized(Path(args.data_dir)), args.bpe_sample_lines)


def add_arguments_prepare_test(parser) -> None:
    parser.add_argument("--prepared", required=True, help="prepared dataset folder (holds bpe.codes)")
    parser.add_argument("--data-dir", required=True, help="fetched dataset folder")
    parser.add_argument("--split", required=True)
    parser.add_argument("--src-lang", required=True)
    parser.add_argument("--tgt-lang", required=True)
    parser.add_argument("--out-prefix", required=True,
                        help="writes PREFIX.src (raw), .src.bpe, .ref (raw), .ref.tok (Moses-tokenized)")


def binarized(lines: list[str], vocab: Vocab) -> list[str]:
    """Word-level lines as the model's vocabulary holds them: a word outside it becomes <unk>."""
    return [vocab.decode(vocab.encode(line, append_eos=False)) for line in lines]


def reference_lines(ref: list[str], prepared: Path, tgt_lang: str) -> tuple[list[str], list[str]]:
    """One test reference as it is scored: raw (sacreBLEU) and Moses-tokenized (tokenized BLEU), prepared
    as the dataset was (stats.json; see `run_prepare_test`)."""
    stats = read_json(prepared / "stats.json")
    lowercase, tokenized = stats.get("lowercase", False), stats.get("tokenized", False)
    ref_tok = tokenize_side(ref, tgt_lang, lowercase, tokenized)
    if stats.get("bpe_merges") == 0 and stats.get("min_count", 1) > 1:
        ref_tok = binarized(ref_tok, Vocab.load(prepared / "dict.tgt.txt"))
    return [line.lower() for line in ref] if lowercase else ref, ref_tok


def run_prepare_test(args) -> None:
    """Every test line is kept (no filtering), so scores cover the whole test set. A lowercased dataset
    (stats.json) gets lowercased references too: its BLEU is case-insensitive, as paper C's. A dataset its
    recipe tokenized is not tokenized again (stats.json `tokenized`). A word-level dataset that maps rare
    words to <unk> (paper C) gets its tokenized reference (.ref.tok, tokenized BLEU) binarized the same
    way, as paper C's authors scored against their binarized test set (its Table 2's ground truth shows
    UNK); the raw reference (.ref, sacreBLEU) keeps every word. This writes the first reference (the
    split's `tgt`); `prepare-ref` writes each further one (config `refs`) the same way."""
    data, prepared = Path(args.data_dir), Path(args.prepared)
    stats = read_json(prepared / "stats.json")
    lowercase, tokenized = stats.get("lowercase", False), stats.get("tokenized", False)
    src, ref = read_parallel(data / f"{args.split}.src", data / f"{args.split}.tgt")
    bpe = BPE(prepared / "bpe.codes")
    prefix = args.out_prefix
    write_lines(f"{prefix}.src", src)
    write_lines(f"{prefix}.src.bpe", bpe(tokenize_side(src, args.src_lang, lowercase, tokenized)))
    raw, ref_tok = reference_lines(ref, prepared, args.tgt_lang)
    write_lines(f"{prefix}.ref", raw)
    write_lines(f"{prefix}.ref.tok", ref_tok)
    log.info("%s: %d sentences", args.split, len(src))


def add_arguments_prepare_ref(parser) -> None:
    parser.add_argument("--prepared", required=True, help="prepared dataset folder (holds stats.json)")
    parser.add_argument("--data-dir", required=True, help="fetched dataset folder (holds SPLIT.tgtK)")
    parser.add_argument("--split", required=True)
    parser.add_argument("--ref", type=int, required=True, help="which further reference: K >= 1 reads SPLIT.tgtK")
    parser.add_argument("--tgt-lang", required=True)
    parser.add_argument("--out-prefix", required=True,
                        help="writes PREFIX.refK (raw) and PREFIX.refK.tok (Moses-tokenized)")


def run_prepare_ref(args) -> None:
    """A test split's K-th further reference (NIST's ref1..ref3; the first is `prepare-test`'s .ref),
    prepared as the first, aligned with the split's source."""
    data, prepared = Path(args.data_dir), Path(args.prepared)
    if args.ref < 1:
        raise InputError(f"--ref {args.ref}: further references count from 1 (the first is prepare-test's .ref)")
    _, ref = read_parallel(data / f"{args.split}.src", data / f"{args.split}.tgt{args.ref}")
    raw, ref_tok = reference_lines(ref, prepared, args.tgt_lang)
    write_lines(f"{args.out_prefix}.ref{args.ref}", raw)
    write_lines(f"{args.out_prefix}.ref{args.ref}.tok", ref_tok)
    log.info("%s: reference %d, %d sentences", args.split, args.ref + 1, len(ref))
