"""Token vocabularies: one per language side (paper A keeps source and target vocabularies apart)."""
from __future__ import annotations

import array
import collections
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import torch

from .files import InputError, atomic_open, require_file

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)


class Vocab:
    """Symbol <-> index map with the four specials at fixed indices 0..3."""

    pad, bos, eos, unk = 0, 1, 2, 3

    def __init__(self, symbols: Iterable[str], counts: Iterable[int] | None = None):
        self.symbols = list(SPECIALS) + [s for s in symbols if s not in SPECIALS]
        self.counts = list(counts) if counts is not None else []
        self.index = {s: i for i, s in enumerate(self.symbols)}

    def __len__(self) -> int:
        return len(self.symbols)

    @classmethod
    def build(cls, lines: Iterable[str], min_count: int = 1) -> "Vocab":
        """Count whitespace tokens; order by frequency, ties alphabetically, so the result is stable."""
        counter = collections.Counter(tok for line in lines for tok in line.split())
        kept = sorted((c, s) for s, c in counter.items() if c >= min_count and s not in SPECIALS)
        kept.sort(key=lambda cs: (-cs[0], cs[1]))
        return cls([s for _, s in kept], [c for c, _ in kept])

    def encode(self, line: str, append_eos: bool = True) -> list[int]:
        ids = [self.index.get(tok, self.unk) for tok in line.split()]
        return ids + [self.eos] if append_eos else ids

    def decode(self, ids: Iterable[int]) -> str:
        """Map ids back to symbols, stopping at EOS and dropping padding and BOS."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.eos:
                break
            if i not in (self.pad, self.bos):
                out.append(self.symbols[i])
        return " ".join(out)

    def save(self, path: str | Path) -> None:
        """fairseq-style dict file: `symbol count` per line, specials implied."""
        counts = self.counts or [1] * (len(self) - len(SPECIALS))
        with atomic_open(path) as handle:
            for sym, cnt in zip(self.symbols[len(SPECIALS):], counts):
                handle.write(f"{sym} {cnt}\n")

    @classmethod
    def load(cls, path: str | Path) -> "Vocab":
        symbols, counts = [], []
        with open(require_file(path), encoding="utf-8") as handle:
            for lineno, line in enumerate(handle, 1):
                parts = line.rstrip("\n").split(" ")
                if len(parts) != 2 or not parts[1].isdigit():
                    raise InputError(f"{path}:{lineno}: expected 'symbol count', got {line!r}")
                symbols.append(parts[0])
                counts.append(int(parts[1]))
        return cls(symbols, counts)


def flatten(sequences: Iterable[Sequence[int]]) -> dict[str, torch.Tensor]:
    """Sequences as one flat int32 tensor "tokens" plus int64 "offsets" (sequence i is
    tokens[offsets[i]:offsets[i + 1]]), built in compact arrays so a corpus can stream through."""
    flat, offsets = array.array("i"), array.array("q", [0])
    for seq in sequences:
        flat.extend(seq)
        offsets.append(len(flat))
    return {"tokens": torch.from_numpy(np.array(flat, dtype=np.int32)),
            "offsets": torch.from_numpy(np.array(offsets, dtype=np.int64))}


def save_indexed(path: str | Path, sequences: Iterable[Sequence[int]]) -> None:
    """Binarize sequences as one flat int32 tensor plus offsets: loads in milliseconds."""
    with atomic_open(path, "wb") as handle:
        torch.save(flatten(sequences), handle)


class IndexedData:
    """Read-only view of a binarized file (or of sequences in memory, `of`): `data[i]` is sequence i
    as an int64 tensor."""

    def __init__(self, path: str | Path | None, blob: dict[str, torch.Tensor] | None = None):
        blob = torch.load(require_file(path), weights_only=True) if blob is None else blob
        self.tokens, self.offsets = blob["tokens"], blob["offsets"]
        self.sizes = (self.offsets[1:] - self.offsets[:-1]).tolist()

    @classmethod
    def of(cls, sequences: Iterable[Sequence[int]]) -> "IndexedData":
        return cls(None, flatten(sequences))

    def __len__(self) -> int:
        return len(self.sizes)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.tokens[self.offsets[i]: self.offsets[i + 1]].long()
