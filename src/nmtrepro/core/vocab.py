"""Token vocabularies: one per language side (paper A keeps source and target vocabularies apart).

torch is imported where a binarized corpus is written or read, not with the module: the workflow's
parse (the annotations' registry, data/parse.py and data/pos.py) and its light commands (tables) read
this module without needing torch's ~1.5 s import."""
from __future__ import annotations

import array
import collections
import hashlib
import itertools
import pickle
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Sequence

import numpy as np

from .files import InputError, atomic_open, require_file
from .token_store import ArrayTokens, FileTokens, stored_at

if TYPE_CHECKING:
    import torch

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

    @property
    def digest(self) -> str:
        """sha256 of the symbols in index order: what a model's embedding rows mean. Counts do not enter
        it (two dict files listing the same symbols in the same order are one vocabulary to a model)."""
        return hashlib.sha256("\n".join(self.symbols).encode("utf-8")).hexdigest()

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

    @classmethod
    def load_pair(cls, folder: str | Path) -> tuple["Vocab", "Vocab"]:
        """The source and target vocabularies of a prepared folder or a model bundle (dict.src.txt, dict.tgt.txt)."""
        return cls.load(Path(folder) / "dict.src.txt"), cls.load(Path(folder) / "dict.tgt.txt")


def narrow(tokens: np.ndarray) -> np.ndarray:
    """Tokens as a binarized corpus holds them: uint16 where every id fits (vocabularies up to 65,536
    symbols: half the bytes of int32 on disk and in the page cache), else int32."""
    if not len(tokens) or (tokens.min() >= 0 and tokens.max() < 2 ** 16):
        return tokens.astype(np.uint16)
    return tokens


def flatten(sequences: Iterable[Sequence[int]]) -> dict[str, torch.Tensor]:
    """Sequences as one flat tensor "tokens" plus int64 "offsets" (sequence i is
    tokens[offsets[i]:offsets[i + 1]]), built in compact arrays in memory (`narrow` tokens); a corpus
    streams to a file instead (`save_indexed`)."""
    import torch

    flat, offsets = array.array("i"), array.array("q", [0])
    for seq in sequences:
        flat.extend(seq)
        offsets.append(len(flat))
    tokens = narrow(np.frombuffer(flat, dtype=np.int32))   # a view of `flat` where int32 stays
    return {"tokens": torch.from_numpy(tokens), "offsets": torch.from_numpy(np.frombuffer(offsets, dtype=np.int64))}


_SPOOL = 10_000  # sequences flattened, then written, at a time by `save_indexed`


def flat_chunk(sequences: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """A few sequences as `save_chunks` takes them: their tokens end to end (int32) and their sizes."""
    sizes = np.fromiter(map(len, sequences), dtype=np.int64, count=len(sequences))
    return np.frombuffer(array.array("i", itertools.chain.from_iterable(sequences)), dtype=np.int32), sizes


def save_indexed(path: str | Path, sequences: Iterable[Sequence[int]]) -> None:
    """Binarize sequences as `flatten` would, byte for byte the same file, streamed (`save_chunks`)."""
    iterator = iter(sequences)
    save_chunks(path, map(flat_chunk, iter(lambda: list(itertools.islice(iterator, _SPOOL)), [])))


def _spooled(path: Path, dtype) -> np.ndarray:
    """A spool file's values, mapped (copy-on-write, so torch may wrap them without a read-only warning)."""
    return np.memmap(path, dtype=dtype, mode="c") if path.stat().st_size else np.zeros(0, dtype=dtype)


def save_chunks(path: str | Path, chunks: Iterable[tuple[np.ndarray, np.ndarray]]) -> None:
    """Binarize sequences that come as chunks (`flat_chunk`: tokens, sizes; made by worker processes
    where that helps) into the file `flatten` + `save_flat` write, byte for byte, without holding them:
    the chunks go to int32 token and int64 offset spool files beside `path`, which are narrowed
    (`narrow`, read a block at a time) and written by torch.save from their memory maps. A corpus of any
    size costs a chunk's memory of the process's own (the mapped spool pages are the page cache's);
    the file loads in milliseconds (`IndexedData`: its offsets, then a batch's tokens at a time)."""
    import torch

    path = Path(path)
    with tempfile.TemporaryDirectory(prefix=f".{path.name}.", dir=path.parent) as spool:
        wide, offsets, narrowed = (Path(spool) / name for name in ("tokens.int32", "offsets.int64", "tokens.uint16"))
        end, low, high = 0, 0, 0
        with open(wide, "wb") as tokens_out, open(offsets, "wb") as offsets_out:
            offsets_out.write(np.zeros(1, dtype=np.int64).tobytes())
            for flat, sizes in chunks:
                if len(flat):
                    low, high = min(low, int(flat.min())), max(high, int(flat.max()))
                tokens_out.write(flat.tobytes())
                offsets_out.write((end + np.cumsum(sizes)).tobytes())
                end += int(sizes.sum())
        if low >= 0 and high < 2 ** 16:   # as `narrow` decides, from the whole corpus's ids
            with open(wide, "rb") as spooled, open(narrowed, "wb") as out:
                while len(block := np.fromfile(spooled, dtype=np.int32, count=1 << 20)):
                    out.write(block.astype(np.uint16).tobytes())
            tokens = _spooled(narrowed, np.uint16)
        else:
            tokens = _spooled(wide, np.int32)
        save_flat(path, {"tokens": torch.from_numpy(tokens), "offsets": torch.from_numpy(_spooled(offsets, np.int64))})


def save_flat(path: str | Path, blob: dict[str, torch.Tensor]) -> None:
    """Write sequences already flat ("tokens" and "offsets" as `flatten` makes them; the memory bench
    builds a 36M-pair corpus this way) as a torch.save file, whose tensors are stored uncompressed and
    aligned, so that `IndexedData` can read a sentence where it lies."""
    import torch

    with atomic_open(path, "wb") as handle:
        torch.save(blob, handle)


class IndexedData:
    """Read-only view of a binarized file (or of sequences in memory, `of`): `data[i]` is sequence i
    as an int64 tensor.

    A file's tokens are neither loaded nor mapped but read a batch's sentences at a time (`token_store`):
    at WMT14 En-Fr scale every training rank would otherwise hold the whole corpus, as its own copy or
    as mapped pages, whereas reads share the page cache's one copy and a rank holds its sizes (4 bytes a
    sentence, private), its offsets (8, mapped) and its batch. Files written with int32 tokens (before
    uint16) read the same.
    """

    def __init__(self, path: str | Path | None, blob: dict[str, torch.Tensor] | None = None):
        import torch

        read = blob is None
        if read:
            try:
                blob = torch.load(require_file(path), mmap=True, weights_only=True)
                tokens, offsets = blob["tokens"], blob["offsets"]
            except (RuntimeError, KeyError, TypeError, pickle.UnpicklingError) as error:
                raise InputError(f"{path}: not a binarized corpus file ({error}); re-run prepare") from None
            if (tokens.dim() != 1 or offsets.dim() != 1 or offsets.dtype != torch.int64 or not len(offsets)
                    or offsets[-1] != len(tokens)):
                raise InputError(f"{path}: tokens and offsets do not match; re-run prepare")
        if read and len(tokens):
            tokens_at, offsets_at = stored_at(Path(path), tokens, offsets)
            self.store = FileTokens(Path(path), tokens_at, tokens.numpy().dtype)
            self.offsets = np.memmap(path, np.int64, "r", offsets_at, len(offsets))  # (sentences + 1,), mapped
        else:  # sequences in memory, or a file of none or empty ones (its few offsets copied)
            self.store = ArrayTokens(blob["tokens"].numpy())
            self.offsets = np.array(blob["offsets"].numpy())                # (sentences + 1,) int64
        self.dtype = self.store.dtype                                       # uint16 or int32
        self.sizes = np.diff(self.offsets).astype(np.int32)  # (sentences,) tokens per sentence, EOS included

    @classmethod
    def of(cls, sequences: Iterable[Sequence[int]]) -> "IndexedData":
        return cls(None, flatten(sequences))

    def __len__(self) -> int:
        return len(self.sizes)

    def __getitem__(self, i: int) -> torch.Tensor:
        """Sentence i, a fresh tensor the caller may keep or change."""
        return self.padded([i], Vocab.pad)[0]

    def padded(self, indices: Sequence[int], pad: int) -> torch.Tensor:
        """(B, n) int64: sentences `indices`, right-padded with `pad` to the longest, n. One take from
        the store rather than a tensor a sentence: a training step on a GPU waits on the host's
        batches, and a 4,096-token micro-batch holds ~100 sentences."""
        import torch

        indices = np.asarray(indices, dtype=np.int64)
        sizes = self.sizes[indices]
        real = np.arange(int(sizes.max()) if len(sizes) else 0) < sizes[:, None]    # (B, n)
        out = np.full(real.shape, pad, dtype=np.int64)
        out[real] = self.store.take(self.offsets[indices], sizes)
        return torch.from_numpy(out)
