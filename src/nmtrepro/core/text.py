"""Thin wrappers over the field's text tools: Moses tokenization (sacremoses) and BPE (subword-nmt)."""
from __future__ import annotations

import functools
import io
import re
from pathlib import Path
from typing import Iterable

from sacremoses import MosesDetokenizer, MosesTokenizer
from subword_nmt.apply_bpe import BPE as _SubwordBPE
from subword_nmt.learn_bpe import learn_bpe as _learn_bpe

from .files import atomic_open, require_file

BPE_SEPARATOR = "@@"
_BPE_JOINS = re.compile(r"@@( |$)")


@functools.lru_cache(maxsize=None)
def _tokenizer(lang: str) -> MosesTokenizer:
    return MosesTokenizer(lang=lang)


@functools.lru_cache(maxsize=None)
def _detokenizer(lang: str) -> MosesDetokenizer:
    return MosesDetokenizer(lang=lang)


def tokenize(lines: Iterable[str], lang: str) -> list[str]:
    """Moses tokenization as the papers' preprocessing did it: no XML escaping, dashes kept whole."""
    tok = _tokenizer(lang)
    return [tok.tokenize(line, escape=False, return_str=True) for line in lines]


def detokenize(lines: Iterable[str], lang: str) -> list[str]:
    detok = _detokenizer(lang)
    return [detok.detokenize(line.split()) for line in lines]


def learn_bpe(src: Iterable[str], tgt: Iterable[str], merges: int, codes_path: str | Path) -> None:
    """Learn joint BPE codes on both tokenized sides together (Sennrich et al. 2016)."""
    text = io.StringIO("\n".join(list(src) + list(tgt)) + "\n")
    with atomic_open(codes_path) as out:
        _learn_bpe(text, out, merges)


class BPE:
    """Apply learned codes to tokenized text, marking word-internal splits with '@@'."""

    def __init__(self, codes_path: str | Path):
        with open(require_file(codes_path), encoding="utf-8") as codes:
            self._bpe = _SubwordBPE(codes, separator=BPE_SEPARATOR)

    def __call__(self, lines: Iterable[str]) -> list[str]:
        return [self._bpe.process_line(line) for line in lines]


def strip_bpe(line: str) -> str:
    """Undo BPE: join pieces marked with '@@ ' (and a dangling '@@' at the end of a line)."""
    return _BPE_JOINS.sub("", line)
