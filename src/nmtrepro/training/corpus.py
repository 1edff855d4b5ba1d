"""The data a training reads: a prepared dataset's binarized train and valid splits, with the source
annotations (parser phrases, POS tags) of the models that read them, as token batches."""
from __future__ import annotations

from pathlib import Path

from ..core.files import InputError
from ..core.vocab import IndexedData, Vocab
from ..data.parse import read_spans
from ..data.pos import read_pos
from .batching import collate, flat_spans, token_batches


class Corpus:
    """The binarized training and validation data of a prepared dataset, memory-mapped (`IndexedData`):
    every training rank on a host shares one copy of the tokens through the page cache."""

    def __init__(self, data_dir: str | Path, spans_dir: str | Path | None = None,
                 pos_dir: str | Path | None = None):
        """`spans_dir`: the parse stage's train/valid .spans (source phrases); `pos_dir`: the pos stage's
        train/valid .pos (source POS tags); each for models that take them."""
        data_dir = Path(data_dir)
        self.src_vocab = Vocab.load(data_dir / "dict.src.txt")
        self.tgt_vocab = Vocab.load(data_dir / "dict.tgt.txt")
        self.splits, self.extras = {}, {"train": {}, "valid": {}}
        for split in ("train", "valid"):
            src, tgt = IndexedData(data_dir / f"{split}.src.bin"), IndexedData(data_dir / f"{split}.tgt.bin")
            if len(src) != len(tgt):
                raise InputError(f"{data_dir}: {split}.src.bin has {len(src)} sentences, {split}.tgt.bin {len(tgt)}")
            self.splits[split] = (src, tgt)
            if spans_dir is not None:
                self.extras[split]["spans"] = flat_spans(read_spans(Path(spans_dir) / f"{split}.spans", src.sizes))
            if pos_dir is not None:
                self.extras[split]["pos"] = read_pos(Path(pos_dir) / f"{split}.pos", src.sizes)

    def batches(self, split: str, max_tokens: int, seed=None, epoch=0, buckets: bool = False):
        src, tgt = self.splits[split]
        return token_batches(src.sizes, tgt.sizes, max_tokens, seed, epoch, buckets)

    def collate(self, split: str, indices, bucketed: bool = False, fixed: int | None = None):
        return collate(*self.splits[split], indices, self.extras[split], bucketed, fixed)
