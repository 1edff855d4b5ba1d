"""Where a binarized corpus's tokens are read from: its file, a batch's sentences at a time by pread, or
an array in memory. Both give the same thing, `take`: some sentences' tokens end to end.

A file is read, not memory-mapped. A mapping counts every page a process has touched in its RSS, and
this kernel maps a page-cache file in whole folios (up to 2 MiB a fault), so one epoch's random batches
leave the whole corpus in each training rank's RSS (docs/measurements.md). pread copies only a batch's
sentences out of the page cache, which still holds one copy for the host's ranks. The offsets (8 bytes a
sentence, every one read when the sizes are) stay mapped, as their own range, so that the ranks share
them too."""
from __future__ import annotations

import os
import re
import struct
import zipfile
from itertools import permutations
from pathlib import Path

import numpy as np

from .files import InputError

_RECORD = re.compile(r"[^/]+/data/\d+")  # a torch.save zip's tensor storages
_LOCAL_HEADER = struct.Struct("<IHHHHHIIIHH")  # a zip member's local header: its name's and extra's sizes last


class ArrayTokens:
    """Tokens already in memory (sequences flattened by `vocab.flatten`)."""

    def __init__(self, tokens: np.ndarray):
        self.dtype = tokens.dtype
        self.tokens = tokens

    def take(self, begins: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """(sum(sizes),) the tokens of the sentences that begin at `begins`, end to end: one gather."""
        shift = np.repeat(begins - (np.cumsum(sizes) - sizes), sizes)
        return self.tokens[np.arange(len(shift)) + shift]


class FileTokens:
    """The tokens of a binarized corpus file, read by pread where they are stored."""

    def __init__(self, path: Path, start: int, dtype: np.dtype):
        self.start, self.dtype = start, np.dtype(dtype)
        self.file = open(path, "rb", buffering=0)

    def take(self, begins: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        """(sum(sizes),) the tokens of the sentences that begin at `begins`, end to end: one pread a
        sentence (~1 µs each from the page cache; a 4,096-token batch holds ~100-300 sentences)."""
        width, fd = self.dtype.itemsize, self.file.fileno()
        data = b"".join(os.pread(fd, int(n) * width, self.start + int(b) * width) for b, n in zip(begins, sizes))
        return np.frombuffer(data, dtype=self.dtype)


def stored_at(path: Path, tokens, offsets) -> tuple[int, int]:
    """The bytes in `path` (a torch.save zip, storages stored uncompressed) where the values of `tokens`
    and of `offsets` start, the two being the file's tensors as `torch.load(mmap=True)` gives them. That
    maps the file as one storage, so the tensors lie as far apart in memory as their records in the file:
    which record holds which follows from that distance."""
    with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
        starts = []
        for info in archive.infolist():
            if _RECORD.fullmatch(info.filename):
                raw.seek(info.header_offset)
                *_, name_size, extra_size = _LOCAL_HEADER.unpack(raw.read(_LOCAL_HEADER.size))
                starts.append(info.header_offset + _LOCAL_HEADER.size + name_size + extra_size)
    apart = tokens.data_ptr() - offsets.data_ptr()
    for tokens_at, offsets_at in permutations(starts, 2):
        if tokens_at - offsets_at == apart:
            return tokens_at, offsets_at
    raise InputError(f"{path}: its tokens' record was not found (a torch.save file of another layout?); "
                     "re-run prepare")
