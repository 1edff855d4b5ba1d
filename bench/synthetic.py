"""The benchmarks' synthetic data, one helper for all of them: sentence lengths like WMT's after BPE (or
a real corpus's), random token ids, as the trainer's own batches or as a prepared dataset that `nmtrepro
train` reads. What a benchmark measures depends on the lengths (padding, shapes, attention's square), so
they come from one place, and batches are planned and padded by the trainer's code, not a copy of it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from nmtrepro.core.files import read_lines
from nmtrepro.core.pos import UPOS
from nmtrepro.core.vocab import IndexedData, Vocab, save_flat, save_indexed
from nmtrepro.data.annotations import binarize

# The standard deviation of log(target / source words) on newstest2012+2013 En-De (6,003 pairs).
RATIO_LOG_SD = 0.19


def wmt_lengths(pairs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(pairs,) source and target lengths with EOS: log-normal source pieces (mean ~29), target pieces a
    log-normal ratio of them (median 1.1, French runs longer), both kept within prepare's filter (<= 256,
    ratio <= 1.5). The ratio spreads as real WMT's does, which bucketed batching feels: a bucket bounds
    both sides, so the wider the ratio, the more padding."""
    src = np.clip(np.rint(rng.lognormal(3.2, 0.6, pairs)), 1, 256)

    def ratios(n: int) -> np.ndarray:
        return np.exp(rng.normal(np.log(1.1), RATIO_LOG_SD, n))
    ratio = ratios(pairs)
    while (outside := (ratio < 1 / 1.5) | (ratio > 1.5)).any():  # prepare drops them: draw those again
        ratio[outside] = ratios(int(outside.sum()))
    tgt = np.clip(np.rint(src * ratio), 1, 256)
    return src.astype(np.int64) + 1, tgt.astype(np.int64) + 1


def corpus_lengths(path: str | Path, factor: float = 1.0) -> np.ndarray:
    """Each line's words times `factor` (BPE makes a word ~1.3 pieces), plus EOS, of a (gzipped) text."""
    return np.array([int(len(line.split()) * factor) + 1 for line in read_lines(path)])


def sentences(lengths: np.ndarray, vocab: int, rng: np.random.Generator) -> IndexedData:
    """Sentences of these lengths, random ids below `vocab` each ending in EOS, in memory."""
    return IndexedData(None, flat(lengths, vocab, rng))


def flat(lengths: np.ndarray, vocab: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """`sentences`' tokens and offsets, as a .bin file holds them (numpy throughout: 36M sentences would
    take minutes one at a time)."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    tokens = rng.integers(4, vocab, int(offsets[-1]), dtype=np.uint16)
    tokens[offsets[1:] - 1] = Vocab.eos
    return {"tokens": torch.from_numpy(tokens), "offsets": torch.from_numpy(offsets)}


def batch(rows: int, length: int, vocab: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(src, prev, target), each (rows, length): random tokens ending in EOS, no padding; `prev` is the
    target behind BOS. A batch of one length, for a cost measured by length."""
    src = torch.randint(4, vocab, (rows, length), generator=gen)
    tgt = torch.randint(4, vocab, (rows, length), generator=gen)
    src[:, -1] = tgt[:, -1] = Vocab.eos
    prev = torch.cat([torch.full((rows, 1), Vocab.bos), tgt[:, :-1]], dim=1)
    return src, prev, tgt


def write_dataset(folder: Path, pairs: int, vocab: int, short: bool = False, annotations: bool = True) -> None:
    """A prepared dataset (dictionaries, train and valid .bin) of `pairs` WMT-like sentence pairs and, with
    `annotations`, .spans and .pos beside it, and binarized (.spans.bin, .pos.bin): phrases of three pieces (the last one shorter) and random
    tags, one per BPE piece. `short`: paper C's IWSLT14 preparation, words of talks (two thirds of WMT's
    lengths), at most 50 a sentence."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(pairs + short)
    for side in ("src", "tgt"):
        Vocab([f"w{i}" for i in range(vocab - 4)]).save(folder / f"dict.{side}.txt")
    src, tgt = wmt_lengths(pairs, rng)
    if short:  # lengths count EOS
        src, tgt = (np.clip(n * 2 // 3, 2, 51) for n in (src, tgt))
    for side, lengths in (("src", src), ("tgt", tgt)):
        save_flat(folder / f"train.{side}.bin", flat(lengths, vocab, rng))
        save_indexed(folder / f"valid.{side}.bin", [[5] * int(n - 1) + [Vocab.eos] for n in lengths[:500]])
    if not annotations:
        return
    for split, lengths in (("train", src), ("valid", src[:500])):
        with open(folder / f"{split}.spans", "w") as spans, open(folder / f"{split}.pos", "w") as pos:
            for n in lengths.tolist():  # n counts EOS: spans tile 0..n, tags cover the n - 1 pieces
                spans.write(" ".join(f"{a}-{min(a + 3, n)}" for a in range(0, n, 3)) + "\n")
                pos.write(" ".join(UPOS[i] for i in rng.integers(0, len(UPOS), n - 1)) + "\n")
        for name in ("spans", "pos"):  # what a training reads (rule binarize_annotation)
            binarize(name, folder / f"{split}.{name}", folder / f"{split}.src.bin", folder / f"{split}.{name}.bin")


def write_datasets(out: Path, pairs: int, vocab: int, iwslt_vocab: int) -> dict[bool, Path]:
    """The WMT-like dataset (out/data) and paper C's IWSLT-like one (out/data_short), each written
    unless already there; keyed by `short`, as an experiment picks one (`dataset.startswith("iwslt")`)."""
    data = {short: out / ("data_short" if short else "data") for short in (False, True)}
    for short, folder in data.items():
        if not folder.exists():
            write_dataset(folder, pairs, iwslt_vocab if short else vocab, short)
    return data
