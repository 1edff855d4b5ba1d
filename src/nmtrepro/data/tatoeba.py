"""The embedded Chinese->English splits, cut from Tatoeba's single file of pairs (manythings.org cmn.txt).

Tatoeba ships no train/valid/test split, and one Chinese sentence often comes with several English
translations, so a split of pairs could test on a source sentence it trained on. Here the split of a
pair is a function of its Chinese sentence alone: sha256 of the sentence, modulo 20, puts bucket 0 in
valid, bucket 1 in test, the rest in train. So every copy of a source sentence lands in the same split
(the splits are disjoint in sources by construction), the cut is independent of the file's order,
and each split keeps the file's order. `nmtrepro tatoeba-splits` writes the files shipped in
data/tatoeba-cmn/ (gzip without a name or time stamp, so the same zlib writes the same bytes);
data/README.md gives their counts.
"""
from __future__ import annotations

import gzip
import hashlib
import logging
from pathlib import Path

from ..core.files import InputError, atomic_open, iter_lines

log = logging.getLogger("nmtrepro.data.tatoeba")

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "tatoeba-splits": "cut Tatoeba's Zh-En pairs into the embedded train/valid/test files",
}

BUCKETS = 20
SPLIT_OF_BUCKET = {0: "valid", 1: "test"}  # every other bucket: train
SPLITS = ("train", "valid", "test")


def split_of(zh: str) -> str:
    """The split of every pair whose Chinese sentence is `zh`."""
    bucket = int.from_bytes(hashlib.sha256(zh.encode("utf-8")).digest()[:8], "big") % BUCKETS
    return SPLIT_OF_BUCKET.get(bucket, "train")


def read_pairs(path: str | Path) -> list[tuple[str, str]]:
    """(Chinese, English) of each `English<TAB>Chinese[<TAB>attribution]` line of cmn.txt."""
    pairs = []
    for number, line in enumerate(iter_lines(path), 1):
        fields = line.split("\t")
        if len(fields) < 2 or not fields[0].strip() or not fields[1].strip():
            raise InputError(f"{path}:{number}: expected English<TAB>Chinese, got {line!r}")
        pairs.append((fields[1], fields[0]))
    return pairs


def split_pairs(pairs: list[tuple[str, str]]) -> dict[str, list[tuple[str, str]]]:
    """Split name -> its (Chinese, English) pairs, in their original order."""
    splits = {name: [] for name in SPLITS}
    for zh, en in pairs:
        splits[split_of(zh)].append((zh, en))
    return splits


def _write_gz(path: Path, lines: list[str]) -> None:
    """Gzip with no file name and time stamp in the header, so the same lines give the same bytes."""
    with atomic_open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
        out.write("".join(line + "\n" for line in lines).encode("utf-8"))


def write_splits(raw: str | Path, out_dir: str | Path) -> dict[str, int]:
    """Write out_dir/{split}.{zh,en}.gz from cmn.txt(.gz); returns the pairs per split."""
    out_dir = Path(out_dir)
    counts = {}
    for name, pairs in split_pairs(read_pairs(raw)).items():
        _write_gz(out_dir / f"{name}.zh.gz", [zh for zh, _ in pairs])
        _write_gz(out_dir / f"{name}.en.gz", [en for _, en in pairs])
        counts[name] = len(pairs)
        log.info("%s: %d pairs", name, len(pairs))
    return counts


def add_arguments_tatoeba_splits(parser) -> None:
    parser.add_argument("--raw", required=True, help="manythings.org cmn.txt or cmn.txt.gz")
    parser.add_argument("--out-dir", required=True, help="folder for {train,valid,test}.{zh,en}.gz")


def run_tatoeba_splits(args) -> None:
    write_splits(args.raw, args.out_dir)
