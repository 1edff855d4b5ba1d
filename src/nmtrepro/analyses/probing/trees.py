"""Penn Treebank bracketed trees: a small reader that drops traces and splits function tags.

The probing tasks need only labels, function tags (NP-SBJ), POS tags and words, so a 40-line reader
beats a dependency on nltk. Empty elements (-NONE-) and the constituents left empty by removing them
are dropped; index suffixes (NP-SBJ-1, NP=2) are removed; PTB escapes are kept in leaves and undone
only when a sentence is rendered (`sentence`).
"""
from __future__ import annotations

import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from ...core.files import InputError

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "-LSB-": "[", "-RSB-": "]",
            "``": '"', "''": '"'}


@dataclass
class Tree:
    label: str                      # category without function tags: NP, VP, NN ...
    tags: tuple[str, ...] = ()      # function tags: ("SBJ",) ...
    children: list["Tree"] = field(default_factory=list)
    word: str | None = None         # set on preterminals only

    @property
    def is_pos(self) -> bool:
        return self.word is not None

    def leaves(self) -> list["Tree"]:
        return [self] if self.is_pos else [leaf for c in self.children for leaf in c.leaves()]

    def words(self) -> list[str]:
        return [leaf.word for leaf in self.leaves()]

    def depth(self) -> int:
        """Phrase levels on the longest root-to-word path (preterminals count as one level)."""
        return 1 if self.is_pos else 1 + max(c.depth() for c in self.children)


def _split_label(raw: str) -> tuple[str, tuple[str, ...]]:
    if raw.startswith("-") and raw.endswith("-"):  # -NONE-, -LRB- as POS tags
        return raw, ()
    parts = re.split(r"[-=]", raw)
    return parts[0], tuple(p for p in parts[1:] if p and not p.isdigit())


def parse_trees(text: str, source: str = "<string>") -> list[Tree]:
    """Parse every top-level bracketing of a .mrg file; the unlabelled outer bracket is unwrapped."""
    tokens, trees, stack = _TOKEN.findall(text), [], []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == "(":
            label = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1] not in ("(", ")") else ""
            stack.append([label, []])
            i += 2 if label else 1
            continue
        if tok != ")":
            if not stack:
                raise InputError(f"{source}: text outside brackets near {tok!r}")
            stack[-1][1].append(tok)
            i += 1
            continue
        if not stack:
            raise InputError(f"{source}: unbalanced ')'")
        label, kids = stack.pop()
        node = _build(label, kids)
        if stack:
            if node is not None:
                stack[-1][1].append(node)
        elif node is not None:
            trees.append(node.children[0] if node.label == "" and len(node.children) == 1 else node)
        i += 1
    if stack:
        raise InputError(f"{source}: unbalanced '(' at end of file")
    return trees


def _build(raw: str, kids: list) -> Tree | None:
    """A node from its raw label and parsed children; None for traces and emptied constituents."""
    if raw == "-NONE-":
        return None
    label, tags = _split_label(raw)
    if len(kids) == 1 and isinstance(kids[0], str):
        return Tree(label, tags, word=kids[0])
    children = [k for k in kids if isinstance(k, Tree)]
    return Tree(label, tags, children) if children else None


def read_treebank(path: str | Path) -> list[Tree]:
    """All trees of a treebank zip (NLTK's layout: treebank/combined/wsj_*.mrg), in file order."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"missing treebank: {path}")
    with zipfile.ZipFile(path) as archive:
        names = sorted(n for n in archive.namelist() if n.endswith(".mrg"))
        if not names:
            raise InputError(f"{path}: no .mrg files inside")
        return [t for n in names for t in parse_trees(archive.read(n).decode("utf-8"), f"{path}:{n}")]


def sentence(words: list[str]) -> str:
    """Render PTB tokens as space-separated plain tokens: escapes undone, "n't" style clitics kept."""
    return " ".join(_ESCAPES.get(w, w).replace("\\/", "/").replace("\\*", "*") for w in words)
