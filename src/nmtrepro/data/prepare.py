"""Prepare a dataset for training: Moses tokenization, joint BPE, length filtering, vocabularies and
binarized splits; and the same tokenization + BPE for each test split.

Paper C prepares word-level, lowercased data (0 BPE merges, `lowercase`) and maps rare words to
<unk> (`min_count`); stats.json records both, so that the test splits get the same treatment.

Outputs use side names (src, tgt), not language codes, so rules need not know the languages.
"""
from __future__ import annotations

import logging
from pathlib import Path

from ..core.files import read_json, read_parallel, write_json, write_lines
from ..core.text import BPE, learn_bpe, tokenize
from ..core.vocab import Vocab, save_indexed

log = logging.getLogger("nmtrepro.data.prepare")


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


def tokenize_side(lines: list[str], lang: str, lowercase: bool) -> list[str]:
    out = tokenize(lines, lang)
    return [line.lower() for line in out] if lowercase else out


def prepare(data_dir: Path, out_dir: Path, src_lang: str, tgt_lang: str, bpe_merges: int,
            max_len: int, max_ratio: float, lowercase: bool = False, min_count: int = 1) -> dict:
    tokenized = {}
    for split in ("train", "valid"):
        src, tgt = read_parallel(data_dir / f"{split}.src", data_dir / f"{split}.tgt")
        tokenized[split] = (tokenize_side(src, src_lang, lowercase), tokenize_side(tgt, tgt_lang, lowercase))
        log.info("tokenized %s: %d pairs", split, len(src))
    learn_bpe(*tokenized["train"], bpe_merges, out_dir / "bpe.codes")
    bpe = BPE(out_dir / "bpe.codes")
    stats = {"src_lang": src_lang, "tgt_lang": tgt_lang, "bpe_merges": bpe_merges, "lowercase": lowercase,
             "min_count": min_count, "splits": {}}
    pieces = {split: (bpe(src), bpe(tgt)) for split, (src, tgt) in tokenized.items()}

    dropped = {"empty": 0, "too_long": 0, "ratio": 0}
    train_pairs = []
    for pair in zip(*pieces["train"]):
        reason = keep_pair(*pair, max_len, max_ratio)
        if reason is None:
            train_pairs.append(pair)
        else:
            dropped[reason] += 1
    pieces["train"] = ([s for s, _ in train_pairs], [t for _, t in train_pairs])
    src_vocab, tgt_vocab = (Vocab.build(side, min_count) for side in pieces["train"])
    src_vocab.save(out_dir / "dict.src.txt")
    tgt_vocab.save(out_dir / "dict.tgt.txt")
    for split, (src, tgt) in pieces.items():
        src_ids, tgt_ids = [src_vocab.encode(s) for s in src], [tgt_vocab.encode(t) for t in tgt]
        save_indexed(out_dir / f"{split}.src.bin", src_ids)
        save_indexed(out_dir / f"{split}.tgt.bin", tgt_ids)
        write_lines(out_dir / f"{split}.src.bpe", src)  # aligned with .bin: the parse stage reads it
        stats["splits"][split] = {"pairs": len(src), "src_tokens": sum(map(len, src_ids)),
                                  "tgt_tokens": sum(map(len, tgt_ids))}
    stats["splits"]["train"]["dropped"] = dropped
    stats["vocab"] = {"src": len(src_vocab), "tgt": len(tgt_vocab)}
    log.info("kept %d training pairs (dropped %s); vocabularies: src %d, tgt %d",
             len(train_pairs), dropped, len(src_vocab), len(tgt_vocab))
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


def run_prepare(args) -> None:
    prepare(Path(args.data_dir), Path(args.out_dir), args.src_lang, args.tgt_lang, args.bpe_merges,
            args.max_len, args.max_ratio, args.lowercase, args.min_count)


def add_arguments_prepare_test(parser) -> None:
    parser.add_argument("--prepared", required=True, help="prepared dataset folder (holds bpe.codes)")
    parser.add_argument("--data-dir", required=True, help="fetched dataset folder")
    parser.add_argument("--split", required=True)
    parser.add_argument("--src-lang", required=True)
    parser.add_argument("--tgt-lang", required=True)
    parser.add_argument("--out-prefix", required=True,
                        help="writes PREFIX.src (raw), .src.bpe, .ref (raw), .ref.tok (Moses-tokenized)")


def run_prepare_test(args) -> None:
    """Every test line is kept (no filtering), so scores cover the whole test set. A lowercased dataset
    (stats.json) gets lowercased references too: its BLEU is case-insensitive, as paper C's."""
    data, prepared = Path(args.data_dir), Path(args.prepared)
    lowercase = read_json(prepared / "stats.json").get("lowercase", False)
    src, ref = read_parallel(data / f"{args.split}.src", data / f"{args.split}.tgt")
    bpe = BPE(prepared / "bpe.codes")
    prefix = args.out_prefix
    write_lines(f"{prefix}.src", src)
    write_lines(f"{prefix}.src.bpe", bpe(tokenize_side(src, args.src_lang, lowercase)))
    write_lines(f"{prefix}.ref", [line.lower() for line in ref] if lowercase else ref)
    write_lines(f"{prefix}.ref.tok", tokenize_side(ref, args.tgt_lang, lowercase))
    log.info("%s: %d sentences", args.split, len(src))
