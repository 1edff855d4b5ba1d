"""Line-range shards of the parse and pos stages, and their gathering.

Parsing or tagging a large corpus (WMT14's 4.5M English sentences) in one process takes days, so the
workflow splits a source file into `n` shards by line ranges (`shard_range`), runs one job per shard,
and gathers the shards' outputs in order into one file (`gather`), line for line what one job over the
whole file writes. Each job streams: it reads its lines, annotates them a chunk at a time and writes
each chunk's lines before reading the next, so memory does not grow with the corpus.
"""
from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from ..core.files import InputError, atomic_open, count_lines, iter_lines, read_json, require_file, write_json


def shard_range(lines: int, shard: int, shards: int) -> tuple[int, int]:
    """[start, end) line numbers (0-based) of shard `shard` (1-based) of `shards`: contiguous, in order,
    covering every line, sizes differing by at most one."""
    if not 1 <= shard <= shards:
        raise InputError(f"shard {shard} of {shards}: a shard is numbered 1..{shards}")
    return lines * (shard - 1) // shards, lines * shard // shards


def shard_lines(path: str | Path, shard: int = 1, shards: int = 1) -> Iterator[str]:
    """The lines of one shard of a text file, read as they are used (a first pass counts the lines)."""
    start, end = shard_range(count_lines(path), shard, shards)
    return itertools.islice(iter_lines(path), start, end)


def chunks(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def gather(parts: Sequence[str | Path], out: str | Path, stats: Sequence[str | Path], stats_out: str | Path,
           merge: Callable[[list[dict]], dict]) -> dict:
    """Concatenate the shards' files in the order given into `out` and their statistics (`merge`, the
    stage's own) into `stats_out`, each shard's line count checked against the sentences its stats say."""
    if len(parts) != len(stats):
        raise InputError(f"{len(parts)} shard files but {len(stats)} stats files")
    shard_stats = [read_json(path) for path in stats]
    for part, shard in zip(parts, shard_stats):
        lines = count_lines(part)
        if lines != shard["sentences"]:
            raise InputError(f"{part}: {lines} lines, its stats count {shard['sentences']} sentences "
                             "(a shard from another run?)")
    merged = merge(shard_stats)
    with atomic_open(out, "wb") as handle:
        for part in parts:
            with open(require_file(part), "rb") as shard_file:
                shutil.copyfileobj(shard_file, handle)
    write_json(stats_out, merged)
    return merged


def merge_counts(stats: list[dict], same: Sequence[str], summed: Sequence[str]) -> dict:
    """The shards' `same` keys (which must agree: one parser made every shard) and the sums of their
    `summed` keys (numbers, or dicts of numbers summed key by key)."""
    if not stats:
        raise InputError("no shards to gather")
    merged = {}
    for key in same:
        values = {str(s.get(key)) for s in stats}
        if len(values) > 1:
            raise InputError(f"the shards disagree on {key}: {', '.join(sorted(values))}")
        merged[key] = stats[0].get(key)
    for key in summed:
        if isinstance(stats[0][key], dict):
            total: dict = {}
            for s in stats:
                for name, n in s[key].items():
                    total[name] = total.get(name, 0) + n
            merged[key] = total
        else:
            merged[key] = sum(s[key] for s in stats)
    return merged


def add_shard_arguments(parser) -> None:
    parser.add_argument("--shard", type=int, default=1, help="which line range of the file to annotate (1-based)")
    parser.add_argument("--shards", type=int, default=1, help="line ranges the file is split into")


def add_gather_arguments(parser, what: str) -> None:
    parser.add_argument("--parts", nargs="+", required=True, help=f"the shards' {what} files, in order")
    parser.add_argument("--part-stats", nargs="+", required=True, help="the shards' stats files, in the same order")
    parser.add_argument("--out", required=True, help=f"the gathered {what} file")
    parser.add_argument("--stats", required=True, help="the gathered statistics (JSON)")
