"""File helpers shared by every stage: atomic writes and clear input errors.

Every output is written under a temporary name in the same directory and renamed into place, so a
killed job never leaves a half-written file that a later stage would trust.
"""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import itertools
import json
import os
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import IO, Iterable, Iterator

_UMASK = os.umask(0)
os.umask(_UMASK)


def results_tree(scale: str, budget: int = 1) -> str:
    """Where a run writes: results/<scale>, or results/<scale>-budget<N> for a longer budget N
    (nmtrepro.study.budgets), which never mixes with the scale's own run."""
    return f"results/{scale}" + (f"-budget{budget}" if budget > 1 else "")


class InputError(Exception):
    """Bad user input (missing file, mismatched corpora, bad value); the CLI prints it without a traceback."""


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it onto `path` only if the block succeeds. A failed
    write (a full disk, a read-only folder) names `path`, not the temporary file it removes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as err:
        raise OSError(err.errno, err.strerror, str(path)) from None
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs should read like any written file
    try:
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(err, OSError) and err.filename in (None, tmp):
            raise OSError(err.errno, err.strerror, str(path)) from None
        raise


@contextlib.contextmanager
def atomic_dir(final: str | os.PathLike) -> Iterator[Path]:
    """A new hidden folder beside `final` to fill: renamed onto `final` (replacing a folder there whole)
    when the block exits cleanly, removed when it does not, so that a reader sees the old folder or the
    new one, never half of either. mkdtemp makes 0700, but a dataset, an extracted archive or a model
    folder should be as readable as any folder the user creates."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    os.chmod(staging, 0o777 & ~_UMASK)
    try:
        yield staging
        if final.exists():
            shutil.rmtree(final)
        os.replace(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w") -> Iterator[IO]:
    """Open a temporary file for writing that replaces `path` when the block exits cleanly."""
    with atomic_path(path) as tmp:
        encoding = None if "b" in mode else "utf-8"
        with open(tmp, mode, encoding=encoding) as handle:
            yield handle


def write_json(path: str | os.PathLike, obj) -> None:
    with atomic_open(path) as handle:
        json.dump(obj, handle, indent=2, ensure_ascii=False)
        handle.write("\n")


def read_json(path: str | os.PathLike):
    with open(require_file(path), encoding="utf-8") as handle:
        return json.load(handle)


def write_lines(path: str | os.PathLike, lines) -> None:
    with atomic_open(path) as handle:
        for line in lines:
            handle.write(line + "\n")


def file_digest(path: str | os.PathLike, algorithm: str = "sha256") -> str:
    """The hex digest of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def require_file(path: str | os.PathLike) -> Path:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"missing input file: {path}")
    return path


def iter_lines(path: str | os.PathLike) -> Iterator[str]:
    """The lines of a UTF-8 text file (plain or .gz) without their newline; invalid UTF-8 is an error
    naming the file and line, a truncated or corrupt .gz one naming the file."""
    path = require_file(path)
    opener = gzip.open if path.suffix == ".gz" else open
    number = 0
    try:
        with opener(path, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                yield raw.decode("utf-8").rstrip("\n")
    except UnicodeDecodeError as err:
        raise InputError(f"{path}:{number}: not valid UTF-8 ({err.reason} at byte {err.start})") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as err:
        raise InputError(f"{path}: truncated or corrupt gzip file after line {number} ({err})") from None


def count_lines(path: str | os.PathLike) -> int:
    """The number of lines of a text file as `iter_lines` reads it."""
    return sum(1 for _ in iter_lines(path))


def evenly_spaced(items: Iterable, total: int, n: int) -> Iterator:
    """`n` of an iterable's `total` items (all where there are no more), evenly spaced through it, the
    last among them: item i (from 0) is taken where (i + 1) * n // total steps up. A corpus concatenated
    from several (Europarl first, Giga-FrEn last) is sampled in its parts' proportions, and the same
    (total, n) takes the same positions from each of two line-aligned files."""
    if n >= total:
        yield from items
        return
    for i, item in enumerate(itertools.islice(items, total)):
        if (i + 1) * n // total > i * n // total:
            yield item


def read_lines(path: str | os.PathLike) -> list[str]:
    """Read a text file (plain or .gz) as a list of lines without their newline."""
    return list(iter_lines(path))


def read_parallel(src_path, tgt_path) -> tuple[list[str], list[str]]:
    """Read two aligned files and refuse them when their line counts differ."""
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise InputError(
            f"parallel files differ in length: {src_path} has {len(src)} lines, "
            f"{tgt_path} has {len(tgt)}"
        )
    return src, tgt
