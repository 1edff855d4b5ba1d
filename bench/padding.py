"""How much of what a training step computes is real tokens: the trainer's batches (`token_batches`
and `collate`, as `nmtrepro train` makes them) of a corpus's sentence lengths, plain, bucketed
(`buckets: true`) and bucketed to fixed rows (`fast: graphs`), at each `--max-tokens`.

A step's cost follows its padded shapes, rows x length on each side, while MFU and tok/s count real
target tokens; so real / padded on the target side (the decoder and the output layer, about two thirds
of a Transformer Base step) and on the source side bound the step's useful share. Printed per mode:
those two ratios, batches (fewer for the same sentences: each holds more), and the distinct shapes a
CUDA graph records. The lengths are a corpus's words times `--subword-factor` (BPE makes a word ~1.3
pieces) plus EOS, 1..256 kept; token ids are irrelevant here. Run from the repo root:

    python bench/padding.py       # newstest2012+2013 En-De (data/wmt), 4,096 and 25,000 tokens
    python bench/padding.py --synthetic 60000   # the GPU benches' synthetic WMT-like lengths instead
"""
from __future__ import annotations

import argparse
import gzip
from pathlib import Path

import numpy as np
from data_memory import synthetic_lengths

from nmtrepro.core.vocab import IndexedData
from nmtrepro.training.batching import collate, token_batches

WMT = Path(__file__).resolve().parents[1] / "data" / "wmt"
SOURCES = [str(WMT / f"newstest{year}-src.en.txt.gz") for year in (2012, 2013)]
TARGETS = [str(WMT / f"newstest{year}-ref.de.txt.gz") for year in (2012, 2013)]
MODES = {"plain": {}, "buckets": {"bucketed": True}, "buckets, fixed rows": {"bucketed": True, "fixed": True}}


def lengths(paths: list[str], factor: float) -> np.ndarray:
    """Each line's words times `factor`, plus EOS, over the gzipped files in turn."""
    counts = []
    for path in paths:
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            counts += [int(len(line.split()) * factor) + 1 for line in lines]
    return np.array(counts)


def side(sizes: np.ndarray) -> IndexedData:
    """Sentences of these lengths (EOS last); only their lengths matter here."""
    return IndexedData.of([5] * int(n - 1) + [2] for n in sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", nargs="+", default=SOURCES, help="gzipped source-side files")
    parser.add_argument("--target", nargs="+", default=TARGETS, help="gzipped target-side files, line-aligned")
    parser.add_argument("--subword-factor", type=float, default=1.3)
    parser.add_argument("--max-tokens", type=int, nargs="+", default=[4096, 25000])
    parser.add_argument("--synthetic", type=int, metavar="PAIRS",
                        help="instead of files, the lengths of gpu_train.py's synthetic data (data_memory.py)")
    args = parser.parse_args()
    if args.synthetic:
        src_len, tgt_len = synthetic_lengths(args.synthetic, np.random.default_rng(0))
    else:
        src_len, tgt_len = lengths(args.source, args.subword_factor), lengths(args.target, args.subword_factor)
    keep = (src_len <= 256) & (tgt_len <= 256)
    src, tgt = side(src_len[keep]), side(tgt_len[keep])
    print(f"{int(keep.sum())} pairs, mean length {src.sizes.mean():.1f} / {tgt.sizes.mean():.1f} (source / target)")
    print(f"{'max_tokens':>10} {'mode':<20} {'target real':>11} {'source real':>11} {'batches':>8} {'shapes':>7}")
    for max_tokens in args.max_tokens:
        for mode, options in MODES.items():
            plan = token_batches(src.sizes, tgt.sizes, max_tokens, seed=0, buckets=bool(options))
            padded = np.zeros(2)
            shapes = set()
            for indices in plan:
                batch = collate(src, tgt, indices, bucketed=options.get("bucketed", False),
                                fixed=max_tokens if options.get("fixed") else None)
                padded += batch.target.numel(), batch.net_input["src"].numel()
                shapes.add((*batch.net_input["src"].shape, *batch.target.shape))
            real = tgt.sizes.sum(), src.sizes.sum()
            print(f"{max_tokens:>10} {mode:<20} {real[0] / padded[0]:>11.3f} {real[1] / padded[1]:>11.3f} "
                  f"{len(plan):>8} {len(shapes):>7}")


if __name__ == "__main__":
    main()
