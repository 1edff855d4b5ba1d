"""How learning BPE grows with the corpus's word types, and what learning it on a sample of lines changes.

subword-nmt's learner counts the corpus's words (time linear in its tokens), then indexes every pair
of symbols in every word type and merges the most frequent pair `--merges` times, updating the types
that hold it: its memory and the merges' time grow with the word types, not the lines. WMT corpora
cannot be fetched here, so this writes synthetic corpora with a given number of types:

- word shapes: the types of newstest2012-2014 (data/wmt: English, German and French news, ~36k lines,
  split into words and punctuation) in their frequency order as the most frequent types, then words
  drawn from a character trigram model of those types, each new type once;
- frequencies: Zipf-Mandelbrot, the r-th type's count C / (r + 2.7)^1.1 with the rarest seen once
  (~30 % of the types seen once, the most frequent ~4 % of the tokens, ~25 tokens a type at 1M types);
- lines: the tokens shuffled (a seeded generator) into lines of 27 words, a WMT side's length.

At each --types size it runs, in a process of its own as prepare runs it, `nmtrepro.core.text.learn_bpe`
over the lines (the workflow's joint learner: counting, then --merges merges) and, apart, the counting
alone, and prints the CPU seconds (user + system, from wait4) and peak RSS of each (wait4's maxresident
counts this process's pages at the fork, ~400 MiB with the words: below that, read the sampled peak
anonymous RSS beside it), the merges' share
(learning less counting), and the growth exponents (slopes of log CPU seconds and log peak RSS over log
types). Then, at --compare-types, it learns again on --sample-lines pairs evenly spaced through the
corpus (prepare's `bpe_lines`, config `bpe_sample_lines`) and compares the two codes on held-out text
drawn from the same distribution (--heldout tokens): the share of held-out tokens and of distinct
held-out words that both segment the same, pieces a token under each, the merges they share, and the
same for the words the sample never saw. Run from the repository root:

    python bench/bpe_scaling.py                                          # 100k, 300k and 1M types
    python bench/bpe_scaling.py --types 100000 300000 1000000 2000000 --compare-types 1000000
"""
from __future__ import annotations

import argparse
import bisect
import collections
import gzip
import json
import random
import re
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

from data_scaling import exponent, measured

ROOT = Path(__file__).resolve().parents[1]
NEWS = sorted((ROOT / "data/wmt").glob("newstest201[234]-*.txt.gz"))
WORD = re.compile(r"\w+|[^\w\s]")
ZIPF_S, ZIPF_Q = 1.1, 2.7
LINE_WORDS = 27


def news_counts() -> collections.Counter:
    counts = collections.Counter()
    for path in NEWS:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                counts.update(WORD.findall(line))
    return counts


def trigram_model(types: list[str]) -> dict[str, tuple[list[str], list[int]]]:
    """For each two-character context ('^' pads a word's start), the next characters ('$' ends it) and
    their cumulative counts over the types."""
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for word in types:
        padded = "^^" + word + "$"
        for k in range(2, len(padded)):
            table[padded[k - 2:k]][padded[k]] += 1
    model = {}
    for context, nxt in table.items():
        chars, counts = zip(*sorted(nxt.items()))
        model[context] = (list(chars), list(np.cumsum(counts)))
    return model


def vocabulary(types: int, seed: int) -> list[str]:
    """`types` distinct words, most frequent first: newstest's types by frequency, then drawn ones."""
    counts = news_counts()
    words = [w for w, _ in counts.most_common(types)]
    seen, rng = set(words), random.Random(seed)
    model = trigram_model(list(counts))
    while len(words) < types:
        word, context = [], "^^"
        while len(word) < 30:
            chars, cum = model[context]
            char = chars[bisect.bisect_right(cum, rng.random() * cum[-1])]
            if char == "$":
                break
            word.append(char)
            context = context[1] + char
        if word and (new := "".join(word)) not in seen:
            seen.add(new)
            words.append(new)
    return words


def zipf_counts(types: int) -> np.ndarray:
    ranks = np.arange(1, types + 1, dtype=np.float64)
    scale = (types + ZIPF_Q) ** ZIPF_S  # the rarest type once
    return np.maximum(1, np.rint(scale / (ranks + ZIPF_Q) ** ZIPF_S)).astype(np.int64)


def write_corpus(path: Path, words: list[str], counts: np.ndarray, seed: int) -> int:
    """Every type's tokens shuffled into lines of LINE_WORDS words; returns the tokens written."""
    tokens = np.repeat(np.arange(len(words), dtype=np.int32), counts)
    np.random.default_rng(seed).shuffle(tokens)
    with open(path, "w", encoding="utf-8") as out:
        for start in range(0, len(tokens), LINE_WORDS * 10_000):
            block = tokens[start:start + LINE_WORDS * 10_000]
            out.writelines(" ".join(words[i] for i in block[k:k + LINE_WORDS]) + "\n"
                           for k in range(0, len(block), LINE_WORDS))
    return len(tokens)


def worker(task: str, corpus: Path, merges: int, codes: Path, sample_lines: int | None) -> None:
    """One measured process: `count` the corpus's words as subword-nmt does, or `learn` its codes as
    prepare does (on every pair, or on `sample_lines` of them), the corpus as the source side."""
    from subword_nmt.learn_bpe import get_vocabulary

    from nmtrepro.core.files import iter_lines
    from nmtrepro.core.text import learn_bpe
    from nmtrepro.data.prepare import bpe_lines

    if task == "count":
        print(f"{len(get_vocabulary(iter_lines(corpus)))} types", file=sys.stderr)
        return
    src, _, pairs = bpe_lines(corpus, corpus, sample_lines)
    learn_bpe(src, [], merges, codes)
    print(f"learned on {pairs} lines", file=sys.stderr)


def segmented(bpe, words: list[str]) -> list[str]:
    """Each word's segmentation as one string of pieces ('@@ '-joined)."""
    line = bpe([" ".join(words)])[0].split(" ")
    out, current = [], []
    for piece in line:
        current.append(piece)
        if not piece.endswith("@@"):
            out.append(" ".join(current))
            current = []
    return out


def segment(codes: Path, words: list[str]) -> list[str]:
    from nmtrepro.core.text import BPE

    bpe = BPE(codes)
    return [seg for k in range(0, len(words), 1000) for seg in segmented(bpe, words[k:k + 1000])]


def merges_of(codes: Path) -> set[str]:
    return set(codes.read_text(encoding="utf-8").splitlines()[1:])  # after '#version: 0.2'


def compare(full: Path, sample: Path, corpus: Path, sample_lines: int, words: list[str], counts: np.ndarray,
            heldout: int, seed: int) -> dict:
    """The sample's codes against the full corpus's on `heldout` tokens drawn from the corpus's distribution."""
    from nmtrepro.core.files import count_lines, evenly_spaced, iter_lines

    sampled_types = set()
    for line in evenly_spaced(iter_lines(corpus), count_lines(corpus), sample_lines):
        sampled_types.update(line.split())
    drawn = np.random.default_rng(seed + 1).choice(len(words), size=heldout, p=counts / counts.sum())
    ids, mult = np.unique(drawn, return_counts=True)
    held = [words[i] for i in ids]
    by_full, by_sample = segment(full, held), segment(sample, held)
    same = np.array([a == b for a, b in zip(by_full, by_sample)])
    pieces = {name: np.array([seg.count(" ") + 1 for seg in segs]) for name, segs in
              (("full", by_full), ("sample", by_sample))}
    unseen = np.array([w not in sampled_types for w in held])
    full_merges, sample_merges = merges_of(full), merges_of(sample)
    return {"sample_lines": sample_lines, "sample_types": len(sampled_types), "heldout_tokens": heldout,
            "heldout_types": len(held), "same_tokens": float((mult * same).sum() / mult.sum()),
            "same_types": float(same.mean()),
            "pieces_per_token": {k: float((mult * v).sum() / mult.sum()) for k, v in pieces.items()},
            "unseen_by_sample": {"tokens": float(mult[unseen].sum() / mult.sum()), "types": int(unseen.sum()),
                                 "same_types": float(same[unseen].mean()) if unseen.any() else None},
            "merges_shared": len(full_merges & sample_merges) / max(1, len(full_merges)),
            "merges": {"full": len(full_merges), "sample": len(sample_merges)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", type=int, nargs="+", default=[100_000, 300_000, 1_000_000])
    ap.add_argument("--merges", type=int, default=32_000, help="the paper scale's joint merges")
    ap.add_argument("--compare-types", type=int, help="compare a sample's codes at this size (one of --types)")
    ap.add_argument("--sample-fraction", type=float, default=0.1, help="the sample's share of the corpus's lines")
    ap.add_argument("--heldout", type=int, default=500_000, help="held-out tokens the two codes segment")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tmp", default=tempfile.gettempdir(), help="where the temporary folder goes")
    ap.add_argument("--json", help="also write every figure here")
    ap.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        task, corpus, merges, codes, sample = args.worker
        return worker(task, Path(corpus), int(merges), Path(codes), int(sample) or None)
    work = Path(tempfile.mkdtemp(prefix="bpe_scaling_", dir=args.tmp))
    words = vocabulary(max(args.types), args.seed)
    results, comparison = {}, None
    me = [sys.executable, __file__, "--worker"]
    try:
        for types in args.types:
            counts = zipf_counts(types)
            corpus = work / f"{types}.txt"
            tokens = write_corpus(corpus, words[:types], counts, args.seed)
            row = {"tokens": tokens, "lines": -(-tokens // LINE_WORDS)}
            for task in ("count", "learn"):
                row[task] = measured([*me, task, str(corpus), str(args.merges), str(work / f"{types}.codes"), "0"],
                                     work / f"{types}.{task}.log")
            results[types] = row
            print(f"{types:>10,} types {tokens:>12,} tokens  count {row['count']['cpu_s']:>7.1f} CPU s "
                  f"{row['count']['peak_rss_mib']:>6.0f} MiB  learn {row['learn']['cpu_s']:>7.1f} CPU s "
                  f"{row['learn']['peak_rss_mib']:>6.0f} MiB ({row['learn']['peak_anon_mib']:.0f} anon)", flush=True)
            if types == args.compare_types:
                sample_lines = int(row["lines"] * args.sample_fraction)
                sample_codes = work / f"{types}.sample.codes"
                row["learn_sample"] = measured([*me, "learn", str(corpus), str(args.merges), str(sample_codes),
                                                str(sample_lines)], work / f"{types}.sample.log")
                comparison = compare(work / f"{types}.codes", sample_codes, corpus, sample_lines, words[:types],
                                     counts, args.heldout, args.seed)
                comparison["learn_sample"] = row["learn_sample"]
                print(json.dumps(comparison, indent=1), flush=True)
            for path in work.glob(f"{types}.*"):
                path.unlink()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    sizes = list(results)
    print(f"\n{'types':>10}{'tokens':>13}{'count s':>9}{'learn s':>9}{'merges s':>10}{'learn MiB':>11}"
          f"{'µs/token count':>16}{'ms/type merges':>16}")
    for types, row in results.items():
        merges_s = row["learn"]["cpu_s"] - row["count"]["cpu_s"]
        print(f"{types:>10,}{row['tokens']:>13,}{row['count']['cpu_s']:>9.1f}{row['learn']['cpu_s']:>9.1f}"
              f"{merges_s:>10.1f}{row['learn']['peak_rss_mib']:>11.0f}"
              f"{row['count']['cpu_s'] / row['tokens'] * 1e6:>16.2f}{merges_s / types * 1e3:>16.3f}")
    if len(sizes) > 1:
        growth = {"learn CPU s": [results[n]["learn"]["cpu_s"] for n in sizes],
                  "merges CPU s": [results[n]["learn"]["cpu_s"] - results[n]["count"]["cpu_s"] for n in sizes],
                  "learn peak RSS": [results[n]["learn"]["peak_rss_mib"] for n in sizes],
                  "learn peak anon RSS": [results[n]["learn"]["peak_anon_mib"] for n in sizes]}
        print("growth exponents over types: " + ", ".join(f"{name} {exponent(sizes, values):.2f}"
                                                         for name, values in growth.items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"merges": args.merges, "types": results, "sample": comparison},
                                              indent=1) + "\n")


if __name__ == "__main__":
    main()
