"""`nmtrepro examples`: translations of a system and its baseline beside source and references (paper D, Fig. 6).

Paper D shows hand-chosen sentences with the hypothesis n-grams coloured by how many of NIST's four
references hold them. Here a rule picks them, so the figure can be rebuilt and is not cherry-picked by a
person: per system, among the test sentences short enough to read (source of at most `max_len` tokens),
the `count` with the largest sentence-BLEU gain over the baseline, ties going to the earlier line.
Sentence BLEU is sacreBLEU's sentence-level default (exp smoothing, effective order) on the
Moses-tokenized text, against every reference. With one reference the found n-grams are bold; with
several, bold with how many references hold each, coloured in HTML as the paper's figure.
"""
from __future__ import annotations

from collections import Counter

import pandas as pd
from sacrebleu.metrics.bleu import BLEU, MAX_NGRAM_ORDER, BLEUScore

from ..core.files import InputError, read_lines
from ..core.text import strip_bpe
from ..evaluation.metrics.bleu import make_metric
from ..reporting.render import REFERENCE_COLOURS, Marked, add_table_arguments, write_table
from ..reporting.report import parse_system_pairs

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "examples": "translations of systems and baselines picked by rule, reference n-grams in bold",
}

COLUMNS = ["system", "line", "", "text", "matched n-grams (n = 1/2/3/4)", "sentence BLEU"]


def ngram_counts(tokens: list[str]) -> Counter:
    """Every n-gram of `tokens`, n = 1..4, with how often it occurs."""
    return Counter(tuple(tokens[i:i + n]) for n in range(1, MAX_NGRAM_ORDER + 1) for i in range(len(tokens) - n + 1))


def highlight(hyp: list[str], *refs: list[str]) -> tuple[tuple[str, int], ...]:
    """The hypothesis as (text, k) spans: k references hold the span as an n-gram (n <= 4), 0 if none.

    Greedy from left to right, longest first: a span is the longest n-gram at its place that some
    reference still holds. It uses up its n-gram and every n-gram inside it from the counts of each
    reference that holds it, and is held by a reference only while that reference has them left: a
    reference n-gram is matched at most as often as it occurs there, as BLEU clips, and a word is never
    marked twice for one reference word. With one reference k is 0 or 1 (bold or not).
    """
    lefts = [ngram_counts(ref) for ref in refs]
    spans, i = [], 0
    while i < len(hyp):
        for n in range(min(MAX_NGRAM_ORDER, len(hyp) - i), 0, -1):
            inside = ngram_counts(hyp[i:i + n])
            holders = [left for left in lefts if all(left[gram] >= k for gram, k in inside.items())]
            if holders:
                for left in holders:
                    left.subtract(inside)
                spans.append((" ".join(hyp[i:i + n]), len(holders)))
                i += n
                break
        else:
            spans.append((hyp[i], 0))
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


def example_rows(label: str, line: int, src: list[str], refs: list[list[str]],
                 translations: dict[str, tuple[list[str], BLEUScore]]) -> list[list]:
    """One example's rows: source and each reference as they are, then each translation (baseline,
    system) with its reference n-grams marked (bold; with several references, by how many hold each),
    its matches per order and its sentence BLEU."""
    named = [("Reference", refs[0])] if len(refs) == 1 else [(f"Reference {k}", ref) for k, ref in enumerate(refs, 1)]
    rows = [[name, Marked(((" ".join(words), 0),)), "", ""] for name, words in [("Source", src), *named]]
    rows += [[name, Marked(highlight(hyp, *refs), counted=len(refs) > 1), matches(score), f"{score.score:.2f}"]
             for name, (hyp, score) in translations.items()]
    return [[label, str(line), *rows[0]]] + [["", "", *row] for row in rows[1:]]  # label and line once


def examples_table(src: list[str], refs: list[list[str]], systems: dict[str, tuple[list[str], list[str]]],
                   count: int, max_len: int, metric: BLEU) -> pd.DataFrame:
    """Rows for every system's picked examples; `refs` holds one list of lines per reference, `systems`
    maps a label to its and its baseline's tokenized hypotheses, all aligned with the source lines;
    `metric` scores sentences against every reference."""
    rows, src_lengths = [], [len(line.split()) for line in src]
    for label, (hyps, base_hyps) in systems.items():
        if not all(len(src) == len(lines) for lines in (*refs, hyps, base_hyps)):
            raise InputError(f"examples of {label} need aligned inputs: {len(src)} source, "
                             f"{'/'.join(str(len(ref)) for ref in refs)} reference, {len(hyps)} system and "
                             f"{len(base_hyps)} baseline lines")
        line_refs = [list(row) for row in zip(*refs)]  # per sentence, its references
        sys_scores = [metric.sentence_score(h, r) for h, r in zip(hyps, line_refs)]
        base_scores = [metric.sentence_score(h, r) for h, r in zip(base_hyps, line_refs)]
        gains = [s.score - b.score for s, b in zip(sys_scores, base_scores)]
        for i in pick(src_lengths, gains, count, max_len):
            rows += example_rows(label, i + 1, src[i].split(), [r.split() for r in line_refs[i]],
                                 {"Baseline": (base_hyps[i].split(), base_scores[i]),
                                  "System": (hyps[i].split(), sys_scores[i])})
    return pd.DataFrame(rows, columns=COLUMNS)


def picking_note(count: int, max_len: int, metric: BLEU, references: int = 1) -> str:
    """The rule that chose the examples and what the marks mean, for the line under the table (the
    metric's signature exists once it has scored)."""
    if references == 1:
        marks = (f"Bold: hypothesis n-grams (n ≤ {MAX_NGRAM_ORDER}) found in the reference, longest first from left "
                 "to right, each reference n-gram used at most as often as it occurs there.")
    else:
        colours = ", ".join(f"{name} {k}" for k, name in zip(REFERENCE_COLOURS, ("orange", "yellow", "blue", "green"))
                            if k <= references)
        marks = (f"Bold: hypothesis n-grams (n ≤ {MAX_NGRAM_ORDER}) found in any of the {references} references, "
                 "longest first from left to right, each reference n-gram used at most as often as it occurs there; "
                 f"the superscript (and in HTML the colour, as the paper's Fig. 6: {colours}) says how many "
                 "references hold it.")
    return (f"Examples picked by rule: per system, the {count} test sentence(s) with the largest sentence-BLEU "
            f"gain over its baseline among those whose source has at most {max_len} tokens, ties to the earlier "
            f"line (sentence BLEU: sacreBLEU {metric.get_signature()}, on Moses tokens"
            f"{', against every reference' if references > 1 else ''}). "
            f"{marks} Matched n-grams: BLEU's clipped matches / hypothesis n-grams.")


def add_example_table_arguments(parser) -> None:
    """The flags of a table of example lines (this command's and `segments`'s): the test source and
    reference, how many lines and how short, title, note and the three table files."""
    parser.add_argument("--src-bpe", required=True, help="the BPE'd tokenized source the models translated")
    parser.add_argument("--ref-tok", action="append", required=True,
                        help="Moses-tokenized reference (repeat for several references: NIST's four)")
    parser.add_argument("--count", type=int, default=3, help="examples per system")
    parser.add_argument("--max-len", type=int, default=40, help="longest source (tokens) an example may have")
    add_table_arguments(parser, "line under the table, before the rule that picked the lines")


def add_arguments_examples(parser) -> None:
    add_example_table_arguments(parser)
    parser.add_argument("--system", action="append", required=True, metavar="LABEL=HYP_TOK=BASELINE_HYP_TOK",
                        help="a system's and its baseline's Moses-tokenized hypotheses (repeat)")


def run_examples(args) -> None:
    src = [strip_bpe(line) for line in read_lines(args.src_bpe)]
    systems = {label: (read_lines(hyp), read_lines(base))
               for label, (hyp, base) in parse_system_pairs(args.system, "--system").items()}
    metric = make_metric("sentence_tok_bleu")
    refs = [read_lines(path) for path in args.ref_tok]
    table = examples_table(src, refs, systems, args.count, args.max_len, metric)
    note = " ".join(filter(None, [args.note, picking_note(args.count, args.max_len, metric, len(refs))]))
    write_table(table, args.title, note, args.out_md, args.out_html, args.out_tex)
