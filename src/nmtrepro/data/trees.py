"""Constituency trees over a sentence's words, and the Penn Treebank bracketed format.

One Tree serves both its readers: paper A's parser phrases (nmtrepro.data.parse reads word positions
off stanza's, spaCy-derived or gold trees) and the probing tasks (nmtrepro.analyses.probing reads labels,
function tags, POS tags and words of gold PTB trees). The bracketed reader drops empty elements (-NONE-)
and the constituents left without words, and splits function tags off labels (NP-SBJ-1 -> NP, ("SBJ",));
PTB escapes stay in the words and are undone only when a sentence is rendered (`sentence`).
"""
from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass
from itertools import count
from pathlib import Path

from ..core.files import InputError

_TOKENS = re.compile(r"\(|\)|[^\s()]+")
_EMPTY_ELEMENT = "-NONE-"  # PTB traces and null elements: not words of the sentence
_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]",
            "``": '"', "''": '"'}


@dataclass(frozen=True)
class Tree:
    """A node: a leaf is a word under its POS tag (`label`); an inner node has a phrase label and
    children in word order."""

    label: str                          # category without function tags: S, NP, VP; on a leaf NN, VBZ ...
    children: tuple["Tree", ...] = ()
    tags: tuple[str, ...] = ()          # function tags: ("SBJ",) ...
    word: str | None = None             # leaves only: the word
    position: int | None = None         # leaves only: the word's 0-based index in the sentence

    @property
    def is_leaf(self) -> bool:
        return self.position is not None

    def leaves(self) -> list["Tree"]:
        return [self] if self.is_leaf else [leaf for c in self.children for leaf in c.leaves()]

    def words(self) -> list[str]:
        return [leaf.word for leaf in self.leaves()]

    def positions(self) -> list[int]:
        """Word indices under this node, left to right."""
        return [leaf.position for leaf in self.leaves()]

    def depth(self) -> int:
        """Phrase levels on the longest root-to-word path (a leaf counts as one level)."""
        return 1 if self.is_leaf else 1 + max(c.depth() for c in self.children)

    def __str__(self) -> str:
        if self.is_leaf:
            return f"({self.label} {self.word})"
        return f"({self.label} {' '.join(map(str, self.children))})"


def split_label(raw: str) -> tuple[str, tuple[str, ...]]:
    """NP-SBJ-1 -> ("NP", ("SBJ",)); index suffixes (-1, =2) go; -LRB- and -NONE- stay whole."""
    if raw.startswith("-") and raw.endswith("-"):
        return raw, ()
    parts = re.split(r"[-=]", raw)
    return parts[0], tuple(p for p in parts[1:] if p and not p.isdigit())


def from_nested(node) -> Tree | None:
    """A Tree from nested (label, [children]) with words as plain strings, positions numbered left to
    right; None when nothing but empty elements is under it. An unlabelled node with one child is that
    child (the WSJ files' outer bracket); with several it is labelled ROOT."""
    positions = count()

    def build(label: str, children: list) -> Tree | None:
        if label == _EMPTY_ELEMENT:
            return None
        name, tags = split_label(label)
        if len(children) == 1 and isinstance(children[0], str):  # preterminal: (TAG word)
            return Tree(name, tags=tags, word=children[0], position=next(positions))
        if any(isinstance(c, str) for c in children):
            raise InputError(f"bracketed tree: word outside a (TAG word) pair under {label or 'the root'}")
        kept = tuple(t for t in (build(*c) for c in children) if t is not None)
        if not kept:
            return None
        if label == "" and len(kept) == 1:
            return kept[0]
        return Tree(name or "ROOT", kept, tags)

    return build(*node)


def read_bracketed(text: str, source: str = "<string>") -> list[Tree]:
    """Every PTB-style tree in `text` (a .mrg file, a parser's output), trees left empty dropped."""
    trees, stack = [], []
    tokens = _TOKENS.findall(text)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token == "(":
            label = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1] not in "()" else ""
            stack.append((label, []))
            i += 2 if label else 1
            continue
        if not stack:
            raise InputError(f"{source}: {'unbalanced' if token == ')' else 'text outside brackets near'} {token!r}")
        if token == ")":
            node = stack.pop()
            if stack:
                stack[-1][1].append(node)
            elif (tree := from_nested(node)) is not None:
                trees.append(tree)
        else:
            stack[-1][1].append(token)
        i += 1
    if stack:
        raise InputError(f"{source}: unbalanced '(' at end of text")
    return trees


def read_treebank(path: str | Path) -> list[Tree]:
    """All trees of a treebank zip (NLTK's layout: treebank/combined/wsj_*.mrg), in file order."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"missing treebank: {path}")
    with zipfile.ZipFile(path) as archive:
        names = sorted(n for n in archive.namelist() if n.endswith(".mrg"))
        if not names:
            raise InputError(f"{path}: no .mrg files inside")
        return [t for n in names for t in read_bracketed(archive.read(n).decode("utf-8"), f"{path}:{n}")]


def sentence(words: list[str]) -> str:
    """Render PTB tokens as space-separated plain tokens: escapes undone, "n't" style clitics kept."""
    return " ".join(_ESCAPES.get(w, w).replace("\\/", "/").replace("\\*", "*") for w in words)
