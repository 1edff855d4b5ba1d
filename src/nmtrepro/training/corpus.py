"""The data a training reads: a prepared dataset's binarized train and valid splits, with the binarized
source annotations (parser phrases, POS tags) of the models that read them, as token batches."""
from __future__ import annotations

from pathlib import Path

from ..core.files import InputError
from ..core.vocab import IndexedData, Vocab
from ..data.annotations import binarized
from .batching import collate, token_batches


class Corpus:
    """The binarized training and validation data of a prepared dataset, read a batch at a time
    (`IndexedData`): every training rank on a host reads the page cache's one copy of the tokens."""

    def __init__(self, data_dir: str | Path, annotations: dict[str, str | Path] | None = None):
        """`annotations`: name -> the folder of the binarized train/valid files of each source annotation
        the model reads (the parse stage's .spans.bin, the pos stage's .pos.bin: data.annotations)."""
        data_dir = Path(data_dir)
        self.src_vocab = Vocab.load(data_dir / "dict.src.txt")
        self.tgt_vocab = Vocab.load(data_dir / "dict.tgt.txt")
        self.splits, self.extras = {}, {"train": {}, "valid": {}}
        for split in ("train", "valid"):
            src, tgt = IndexedData(data_dir / f"{split}.src.bin"), IndexedData(data_dir / f"{split}.tgt.bin")
            if len(src) != len(tgt):
                raise InputError(f"{data_dir}: {split}.src.bin has {len(src)} sentences, {split}.tgt.bin {len(tgt)}")
            self.splits[split] = (src, tgt)
            for name, folder in (annotations or {}).items():
                self.extras[split][name] = binarized(folder, split, name, src)

    def batches(self, split: str, max_tokens: int, seed=None, epoch=0, buckets: bool = False):
        src, tgt = self.splits[split]
        return token_batches(src.sizes, tgt.sizes, max_tokens, seed, epoch, buckets)

    def collate(self, split: str, indices, bucketed: bool = False, fixed: int | None = None):
        return collate(*self.splits[split], indices, self.extras[split], bucketed, fixed)
