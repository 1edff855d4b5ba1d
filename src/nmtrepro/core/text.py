"""Thin wrappers over the field's text tools: Moses tokenization (sacremoses), Chinese word
segmentation (jieba) and BPE (subword-nmt)."""
from __future__ import annotations

import functools
import itertools
import logging
import re
import time
from pathlib import Path
from typing import Iterable

from subword_nmt.apply_bpe import BPE as _SubwordBPE
from subword_nmt.learn_bpe import learn_bpe as _learn_bpe

from .files import atomic_open, require_file

BPE_SEPARATOR = "@@"
_BPE_JOINS = re.compile(r"@@( |$)")
# CJK ideographs, kana, CJK and fullwidth punctuation, and the quotes and marks Chinese text uses:
# written Chinese puts no space beside them.
_CJK = "\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef\u2014\u2018\u2019\u201c\u201d\u2026"
_CJK_SPACES = re.compile(rf" +(?=[{_CJK}])|(?<=[{_CJK}]) +")

log = logging.getLogger("nmtrepro.core.text")


# sacremoses is imported where a tokenizer is first built: importing it compiles its regular
# expressions (~0.3 s), which every job that imports the models (through data.parse) paid for nothing.
@functools.lru_cache(maxsize=None)
def _tokenizer(lang: str):
    from sacremoses import MosesTokenizer
    return MosesTokenizer(lang=lang)


@functools.lru_cache(maxsize=None)
def _detokenizer(lang: str):
    from sacremoses import MosesDetokenizer
    return MosesDetokenizer(lang=lang)


@functools.lru_cache(maxsize=None)
def _segmenter():
    """jieba's segmenter, built once per process on first use (~1 s: it builds a prefix dictionary,
    which jieba caches as jieba.cache in the temp folder).

    A private `jieba.Tokenizer` rather than the module-level default one, so that nothing else in the
    process (a user dictionary, jieba.posseg) can change how the corpus is segmented; jieba's own
    progress lines to stderr are silenced.
    """
    import jieba  # imported here: only Chinese data pays for it

    jieba.setLogLevel(logging.WARNING)
    segmenter = jieba.Tokenizer()
    start = time.perf_counter()
    segmenter.initialize()
    log.info("jieba %s: dictionary loaded in %.1f s", jieba.__version__, time.perf_counter() - start)
    return segmenter


def tokenize(lines: Iterable[str], lang: str, escape: bool = False) -> list[str]:
    """Words separated by single spaces, as every stage that tokenizes needs them (training, test
    sets, analyses): this is the one place that decides how a language is tokenized.

    Moses tokenization as the papers' preprocessing did it: no XML escaping (`escape=True` escapes
    as tokenizer.perl does by default, for recipes that reproduce it), dashes kept whole.

    Chinese ("zh") is segmented into words with jieba (default dictionary and HMM, which is
    deterministic), as WMT17 Zh-En systems commonly did before BPE, whitespace runs collapsed. No
    Moses pass follows: jieba already splits punctuation and Latin/digit runs from Chinese words, Moses
    could only re-split a few of them ("3.5%") and cannot undo jieba's splits, and the Chinese side is
    a source, never scored, so it only has to be tokenized the same way in training and test.
    """
    if lang == "zh":
        if escape:
            raise ValueError("XML escaping is a Moses option; jieba segmentation has none")
        segmenter = _segmenter()
        return [" ".join(" ".join(segmenter.cut(line)).split()) for line in lines]
    tok = _tokenizer(lang)
    return [tok.tokenize(line, escape=escape, return_str=True) for line in lines]


def detokenize(lines: Iterable[str], lang: str) -> list[str]:
    """Moses detokenization; for Chinese also no space beside a CJK character or punctuation mark
    (Moses joins only two CJK words, not a word and fullwidth punctuation or Latin text)."""
    detok = _detokenizer(lang)
    out = [detok.detokenize(line.split()) for line in lines]
    return [_CJK_SPACES.sub("", line) for line in out] if lang == "zh" else out


# The codes file of word-level data: subword-nmt's header with no merge after it.
WORD_LEVEL_CODES = "#version: 0.2 (word level: no merges)\n"


def learn_bpe(src: Iterable[str], tgt: Iterable[str], merges: int, codes_path: str | Path) -> None:
    """Learn joint BPE codes on both tokenized sides together (Sennrich et al. 2016); 0 merges writes
    codes that `BPE` applies as the identity (word-level data, paper C). The lines stream through
    (subword-nmt keeps only the word counts), so `src` and `tgt` may read files as large as En-Fr's."""
    with atomic_open(codes_path) as out:
        if merges == 0:
            out.write(WORD_LEVEL_CODES)
            return
        _learn_bpe(itertools.chain(src, tgt), out, merges)


class BPE:
    """Apply learned codes to tokenized text, marking word-internal splits with '@@'; word-level codes
    (`learn_bpe` with 0 merges) leave the words whole (subword-nmt would split them into characters)."""

    def __init__(self, codes_path: str | Path):
        path = require_file(codes_path)
        if path.read_text(encoding="utf-8") == WORD_LEVEL_CODES:
            self._bpe = None
            return
        with open(path, encoding="utf-8") as codes:
            self._bpe = _SubwordBPE(codes, separator=BPE_SEPARATOR)

    def __call__(self, lines: Iterable[str]) -> list[str]:
        if self._bpe is None:
            return [" ".join(line.split()) for line in lines]
        return [self._bpe.process_line(line) for line in lines]


def strip_bpe(line: str) -> str:
    """Undo BPE: join pieces marked with '@@ ' (and a dangling '@@' at the end of a line)."""
    return _BPE_JOINS.sub("", line)
