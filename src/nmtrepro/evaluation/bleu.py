"""`nmtrepro bleu`: corpus BLEU of one decoded test set, two ways, written as JSON.

The papers report tokenized case-sensitive BLEU (multi-bleu.perl on Moses-tokenized text), which depends
on the tokenizer and so is not comparable across setups; sacreBLEU on detokenized text is. We record both,
each with the sacreBLEU signature that says exactly how it was computed. A test set with several references
(NIST's four, config `refs`) is scored against all of them, as sacreBLEU and multi-bleu.perl do: an n-gram
counts up to its largest count in any reference, and the brevity penalty takes the closest reference length.
"""
from __future__ import annotations

import logging
import os

from sacrebleu.metrics import BLEU

from ..core.files import InputError, read_lines, write_json

log = logging.getLogger(__name__)


def make_metric(name: str) -> BLEU:
    """The sacreBLEU metric behind each BLEU we report, so every analysis scores the same way."""
    if name == "tok_bleu":
        # multi-bleu.perl scores 0 when any n-gram order has no match, hence no smoothing.
        return BLEU(tokenize="none", smooth_method="none")
    if name == "sacrebleu":
        return BLEU()
    if name == "sentence_tok_bleu":
        # sacrebleu.sentence_bleu's settings (exp smoothing, effective order) on Moses tokens: one
        # sentence rarely has a 4-gram match, and unsmoothed it would score 0.
        return BLEU(tokenize="none", effective_order=True)
    raise InputError(f"unknown BLEU metric {name!r}; known: sacrebleu, tok_bleu, sentence_tok_bleu")


def corpus_bleu(hyps: list[str], refs: list[str] | list[list[str]], metric: BLEU) -> dict:
    """Score aligned lines with one sacreBLEU metric; plain data for JSON. `refs`: the reference lines, or
    one list of lines per reference (several references, each aligned with `hyps`)."""
    streams = [refs] if not refs or isinstance(refs[0], str) else list(refs)
    result = metric.corpus_score(hyps, streams)
    return {
        "score": result.score,
        "signature": str(metric.get_signature()),  # its nrefs says how many references
        "precisions": list(result.precisions),  # n = 1..4, in percent as sacreBLEU prints them
        "bp": result.bp,
        "sys_len": result.sys_len,
        "ref_len": result.ref_len,
    }


def _as_paths(value) -> list:
    return [value] if isinstance(value, (str, os.PathLike)) else list(value)


def score(hyp, ref, hyp_tok, ref_tok) -> dict:
    """Both BLEUs for one test set, from files with one sentence per line.

    `hyp`/`ref`: detokenized hypothesis and raw reference (sacreBLEU, its default 13a tokenization).
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
    return {
        "n": counts[0],
        "references": k,
        "sacrebleu": corpus_bleu(lines[0], lines[1:1 + k], make_metric("sacrebleu")),
        "tok_bleu": corpus_bleu(lines[1 + k], lines[2 + k:], make_metric("tok_bleu")),
    }


def add_arguments_bleu(parser) -> None:
    parser.add_argument("--hyp", required=True, help="detokenized hypothesis, one sentence per line")
    parser.add_argument("--ref", action="append", required=True,
                        help="raw reference (repeat for several references: NIST's four)")
    parser.add_argument("--hyp-tok", required=True, help="Moses-tokenized hypothesis")
    parser.add_argument("--ref-tok", action="append", required=True,
                        help="Moses-tokenized reference (repeat, in --ref's order)")
    parser.add_argument("--out", required=True, help="JSON with sacreBLEU and tokenized BLEU")


def run_bleu(args) -> None:
    result = score(args.hyp, args.ref, args.hyp_tok, args.ref_tok)
    write_json(args.out, result)
    log.info("%d sentences, %d reference(s) | sacreBLEU %.2f | tokenized BLEU %.2f", result["n"],
             result["references"], result["sacrebleu"]["score"], result["tok_bleu"]["score"])
