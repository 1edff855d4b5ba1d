"""`nmtrepro examples`: translations of a system and its baseline beside source and reference (paper D, Fig. 6).

Paper D shows hand-chosen sentences with the hypothesis n-grams found in the references coloured. Here a
rule picks them, so the figure can be rebuilt and is not cherry-picked by a person: per system, among
the test sentences short enough to read (source of at most `max_len` tokens), the `count` with the
largest sentence-BLEU gain over the baseline, ties going to the earlier line. Sentence BLEU is sacreBLEU's
sentence-level default (exp smoothing, effective order) on the Moses-tokenized text.
"""
from __future__ import annotations

from collections import Counter

import pandas as pd
from sacrebleu.metrics.bleu import BLEU, MAX_NGRAM_ORDER, BLEUScore

from ..core.files import InputError, read_lines
from ..core.text import strip_bpe
from ..evaluation.bleu import make_metric
from ..reporting.render import Marked, write_table
from ..reporting.report import parse_system_pairs

COLUMNS = ["system", "line", "", "text", "matched n-grams (n = 1/2/3/4)", "sentence BLEU"]


def ngram_counts(tokens: list[str]) -> Counter:
    """Every n-gram of `tokens`, n = 1..4, with how often it occurs."""
    return Counter(tuple(tokens[i:i + n]) for n in range(1, MAX_NGRAM_ORDER + 1) for i in range(len(tokens) - n + 1))


def highlight(hyp: list[str], ref: list[str]) -> tuple[tuple[str, bool], ...]:
    """The hypothesis as (text, found) spans: a found span is a reference n-gram (n <= 4).

    Greedy from left to right, longest first. A span uses up its n-gram and every n-gram inside it from
    the reference's counts, and is found only while the reference has them left: a reference n-gram is
    matched at most as often as it occurs there, as BLEU clips, and a word is never bold twice for one
    reference word.
    """
    left = ngram_counts(ref)
    spans, i = [], 0
    while i < len(hyp):
        for n in range(min(MAX_NGRAM_ORDER, len(hyp) - i), 0, -1):
            inside = ngram_counts(hyp[i:i + n])
            if all(left[gram] >= k for gram, k in inside.items()):
                left -= inside
                spans.append((" ".join(hyp[i:i + n]), True))
                i += n
                break
        else:
            spans.append((hyp[i], False))
            i += 1
    return tuple(spans)


def pick(src_lengths: list[int], gains: list[float], count: int, max_len: int) -> list[int]:
    """Indices of the `count` sentences with the largest gain among those of at most `max_len` source
    tokens, the earlier line first on a tie."""
    short = [i for i, length in enumerate(src_lengths) if length <= max_len]
    return sorted(short, key=lambda i: (-gains[i], i))[:count]


def matches(score: BLEUScore) -> str:
    """BLEU's clipped n-gram matches over the hypothesis's n-grams, per order: '7/9, 4/8, 2/7, 1/6'."""
    return ", ".join(f"{m}/{t}" for m, t in zip(score.counts, score.totals))


def example_rows(label: str, line: int, src: list[str], ref: list[str],
                 translations: dict[str, tuple[list[str], BLEUScore]]) -> list[list]:
    """One example's rows: source and reference as they are, then each translation (baseline, system)
    with its reference n-grams in bold, its matches per order and its sentence BLEU."""
    rows = [[name, Marked(((" ".join(words), False),)), "", ""]
            for name, words in (("Source", src), ("Reference", ref))]
    rows += [[name, Marked(highlight(hyp, ref)), matches(score), f"{score.score:.2f}"]
             for name, (hyp, score) in translations.items()]
    return [[label, str(line), *rows[0]]] + [["", "", *row] for row in rows[1:]]  # label and line once


def examples_table(src: list[str], refs: list[str], systems: dict[str, tuple[list[str], list[str]]],
                   count: int, max_len: int, metric: BLEU) -> pd.DataFrame:
    """Rows for every system's picked examples; `systems` maps a label to its and its baseline's
    tokenized hypotheses, all aligned with the source and reference lines; `metric` scores sentences."""
    rows, src_lengths = [], [len(line.split()) for line in src]
    for label, (hyps, base_hyps) in systems.items():
        if not (len(src) == len(refs) == len(hyps) == len(base_hyps)):
            raise InputError(f"examples of {label} need aligned inputs: {len(src)} source, {len(refs)} reference, "
                             f"{len(hyps)} system and {len(base_hyps)} baseline lines")
        sys_scores = [metric.sentence_score(h, [r]) for h, r in zip(hyps, refs)]
        base_scores = [metric.sentence_score(h, [r]) for h, r in zip(base_hyps, refs)]
        gains = [s.score - b.score for s, b in zip(sys_scores, base_scores)]
        for i in pick(src_lengths, gains, count, max_len):
            rows += example_rows(label, i + 1, src[i].split(), refs[i].split(),
                                 {"Baseline": (base_hyps[i].split(), base_scores[i]),
                                  "System": (hyps[i].split(), sys_scores[i])})
    return pd.DataFrame(rows, columns=COLUMNS)


def picking_note(count: int, max_len: int, metric: BLEU) -> str:
    """The rule that chose the examples and what the marks mean, for the line under the table (the
    metric's signature exists once it has scored)."""
    return (f"Examples picked by rule: per system, the {count} test sentence(s) with the largest sentence-BLEU "
            f"gain over its baseline among those whose source has at most {max_len} tokens, ties to the earlier "
            f"line (sentence BLEU: sacreBLEU {metric.get_signature()}, on Moses tokens). Bold: hypothesis "
            f"n-grams (n ≤ {MAX_NGRAM_ORDER}) found in the reference, longest first from left to right, each "
            f"reference n-gram used at most as often as it occurs there. Matched n-grams: BLEU's clipped matches / "
            f"hypothesis n-grams.")


def add_example_table_arguments(parser) -> None:
    """The flags of a table of example lines (this command's and `segments`'s): the test source and
    reference, how many lines and how short, title, note and the three table files."""
    parser.add_argument("--src-bpe", required=True, help="the BPE'd tokenized source the models translated")
    parser.add_argument("--ref-tok", required=True, help="Moses-tokenized reference")
    parser.add_argument("--count", type=int, default=3, help="examples per system")
    parser.add_argument("--max-len", type=int, default=40, help="longest source (tokens) an example may have")
    parser.add_argument("--title", required=True)
    parser.add_argument("--note", default="", help="line under the table, before the rule that picked the lines")
    for name in ("md", "html", "tex"):
        parser.add_argument(f"--out-{name}", required=True)


def add_arguments_examples(parser) -> None:
    add_example_table_arguments(parser)
    parser.add_argument("--system", action="append", required=True, metavar="LABEL=HYP_TOK=BASELINE_HYP_TOK",
                        help="a system's and its baseline's Moses-tokenized hypotheses (repeat)")


def run_examples(args) -> None:
    src = [strip_bpe(line) for line in read_lines(args.src_bpe)]
    systems = {label: (read_lines(hyp), read_lines(base))
               for label, (hyp, base) in parse_system_pairs(args.system, "--system").items()}
    metric = make_metric("sentence_tok_bleu")
    table = examples_table(src, read_lines(args.ref_tok), systems, args.count, args.max_len, metric)
    note = " ".join(filter(None, [args.note, picking_note(args.count, args.max_len, metric)]))
    write_table(table, args.title, note, args.out_md, args.out_html, args.out_tex)
