"""`nmtrepro bleu`: every metric of one decoded test set (evaluation/metrics: both BLEUs, chrF, chrF++,
TER), written as JSON with each one's sacreBLEU signature, and each sentence's scores beside it.

The papers report tokenized case-sensitive BLEU (multi-bleu.perl on Moses-tokenized text), which depends
on the tokenizer and so is not comparable across setups; sacreBLEU's metrics on detokenized text are. A
test set with several references (NIST's four, config `refs`) is scored against all of them, as sacreBLEU
and multi-bleu.perl do. The sentences' scores (a TSV, one row a sentence, one column a metric) are what a
reader sorts to find where two systems differ; each is the metric's sentence-level score (BLEU's smoothed,
as sacrebleu.sentence_bleu's). The sentences' statistics are kept too (.npz): every paired bootstrap that
compares this output reads them instead of computing them again (TER's shifts cost most).
"""
from __future__ import annotations

import logging
import os

import numpy as np

from ..core.files import InputError, atomic_open, read_lines, write_json
from .metrics import METRICS, write_statistics

log = logging.getLogger(__name__)


def _as_paths(value) -> list:
    return [value] if isinstance(value, (str, os.PathLike)) else list(value)


def score_sentences(hyp, ref, hyp_tok, ref_tok) -> tuple[dict, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Every metric's corpus score for one test set, each sentence's scores ({metric: [n]}) and its
    statistics ({metric: [n, S]}), from files with one sentence per line.

    `hyp`/`ref`: detokenized hypothesis and raw reference (sacreBLEU's metrics, their own tokenization).
    `hyp_tok`/`ref_tok`: the same sentences Moses-tokenized (tokenized BLEU, split on whitespace only).
    `ref` and `ref_tok` may each be a list of files, one per reference, in the same order.
    """
    refs, refs_tok = _as_paths(ref), _as_paths(ref_tok)
    if len(refs) != len(refs_tok) or not refs:
        raise InputError(f"BLEU needs each reference raw and tokenized: {len(refs)} raw ({', '.join(map(str, refs))}), "
                         f"{len(refs_tok)} tokenized ({', '.join(map(str, refs_tok))})")
    paths = [hyp, *refs, hyp_tok, *refs_tok]
    lines = [read_lines(path) for path in paths]
    counts = [len(text) for text in lines]
    if len(set(counts)) != 1:
        listed = ", ".join(f"{path} has {count}" for path, count in zip(paths, counts))
        raise InputError(f"BLEU inputs differ in line count: {listed}")
    if counts[0] == 0:
        raise InputError(f"no sentences to score: {hyp} is empty")
    k = len(refs)
    texts = {"hyp": (lines[0], lines[1:1 + k]), "hyp_tok": (lines[1 + k], lines[2 + k:])}
    result, sentences, statistics = {"n": counts[0], "references": k}, {}, {}
    for name, metric in METRICS.items():
        statistics[name] = metric.statistics(*texts[metric.reads])     # [n, S]
        result[name] = metric.corpus(statistics[name])                  # its signature's nrefs: the references
        sentences[name] = metric.sentence_scores(statistics[name])
    return result, sentences, statistics


def score(hyp, ref, hyp_tok, ref_tok) -> dict:
    """Every metric's corpus score for one test set (`score_sentences`)."""
    return score_sentences(hyp, ref, hyp_tok, ref_tok)[0]


def add_arguments_bleu(parser) -> None:
    parser.add_argument("--hyp", required=True, help="detokenized hypothesis, one sentence per line")
    parser.add_argument("--ref", action="append", required=True,
                        help="raw reference (repeat for several references: NIST's four)")
    parser.add_argument("--hyp-tok", required=True, help="Moses-tokenized hypothesis")
    parser.add_argument("--ref-tok", action="append", required=True,
                        help="Moses-tokenized reference (repeat, in --ref's order)")
    parser.add_argument("--out", required=True, help="JSON: each metric's score and signature (sacreBLEU, "
                                                     "tokenized BLEU, chrF, chrF++, TER)")
    parser.add_argument("--out-sentences", help="TSV: each sentence's score in each metric")
    parser.add_argument("--out-statistics", help="each metric's sentence statistics (.npz), which the paired "
                                                 "bootstrap (nmtrepro significance) reads")


def run_bleu(args) -> None:
    result, sentences, statistics = score_sentences(args.hyp, args.ref, args.hyp_tok, args.ref_tok)
    write_json(args.out, result)
    if args.out_statistics:
        write_statistics(args.out_statistics, statistics, {name: result[name]["signature"] for name in statistics})
    if args.out_sentences:
        with atomic_open(args.out_sentences) as out:
            out.write("\t".join(["sentence", *sentences]) + "\n")
            for i, row in enumerate(zip(*sentences.values()), 1):
                out.write("\t".join([str(i), *(f"{value:.4f}" for value in row)]) + "\n")
    log.info("%d sentences, %d reference(s) | %s", result["n"], result["references"],
             " | ".join(f"{metric.label} {result[name]['score']:.2f}" for name, metric in METRICS.items()))
