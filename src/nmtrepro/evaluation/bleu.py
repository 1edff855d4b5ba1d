"""`nmtrepro bleu`: corpus BLEU of one decoded test set, two ways, written as JSON.

The papers report tokenized case-sensitive BLEU (multi-bleu.perl on Moses-tokenized text), which depends
on the tokenizer and so is not comparable across setups; sacreBLEU on detokenized text is. We record both,
each with the sacreBLEU signature that says exactly how it was computed.
"""
from __future__ import annotations

import logging

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


def corpus_bleu(hyps: list[str], refs: list[str], metric: BLEU) -> dict:
    """Score aligned lines with one sacreBLEU metric; plain data for JSON."""
    result = metric.corpus_score(hyps, [refs])
    return {
        "score": result.score,
        "signature": str(metric.get_signature()),
        "precisions": list(result.precisions),  # n = 1..4, in percent as sacreBLEU prints them
        "bp": result.bp,
        "sys_len": result.sys_len,
        "ref_len": result.ref_len,
    }


def score(hyp, ref, hyp_tok, ref_tok) -> dict:
    """Both BLEUs for one test set, from four files with one sentence per line.

    `hyp`/`ref`: detokenized hypothesis and raw reference (sacreBLEU, its default 13a tokenization).
    `hyp_tok`/`ref_tok`: the same sentences Moses-tokenized (tokenized BLEU, split on whitespace only).
    """
    paths = {"hyp": hyp, "ref": ref, "hyp_tok": hyp_tok, "ref_tok": ref_tok}
    lines = {name: read_lines(path) for name, path in paths.items()}
    counts = {name: len(text) for name, text in lines.items()}
    if len(set(counts.values())) != 1:
        listed = ", ".join(f"{paths[name]} has {count}" for name, count in counts.items())
        raise InputError(f"BLEU inputs differ in line count: {listed}")
    if counts["hyp"] == 0:
        raise InputError(f"no sentences to score: {hyp} is empty")
    return {
        "n": counts["hyp"],
        "sacrebleu": corpus_bleu(lines["hyp"], lines["ref"], make_metric("sacrebleu")),
        "tok_bleu": corpus_bleu(lines["hyp_tok"], lines["ref_tok"], make_metric("tok_bleu")),
    }


def add_arguments_bleu(parser) -> None:
    parser.add_argument("--hyp", required=True, help="detokenized hypothesis, one sentence per line")
    parser.add_argument("--ref", required=True, help="raw reference")
    parser.add_argument("--hyp-tok", required=True, help="Moses-tokenized hypothesis")
    parser.add_argument("--ref-tok", required=True, help="Moses-tokenized reference")
    parser.add_argument("--out", required=True, help="JSON with sacreBLEU and tokenized BLEU")


def run_bleu(args) -> None:
    result = score(args.hyp, args.ref, args.hyp_tok, args.ref_tok)
    write_json(args.out, result)
    log.info("%d sentences | sacreBLEU %.2f | tokenized BLEU %.2f", result["n"],
             result["sacrebleu"]["score"], result["tok_bleu"]["score"])
