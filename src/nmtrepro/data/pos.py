"""Source POS tags for paper D's syntax group, one per BPE piece: the `pos` stage beside `parse`.

Pipeline per source sentence, as `parse` does it:
  BPE'd line -> words (BPE joined back) -> one tag per word -> the word's tag copied to each of its BPE
  pieces (paper D: "BPE units from the same word have the same POS-tag as this word").
Taggers (paper D used Stanford CoreNLP for both languages):
- English: universal POS from `nlp.pos_tags`, the tagger alone, with the scale's `parse_backend`
  (stanza at paper scale, spaCy's en_core_web_sm at ci and tiny).
- Chinese (zh): jieba.posseg over the jieba-segmented words of the prepare stage (`core.text.tokenize`);
  its ICTCLAS-style tags are mapped onto universal POS (`JIEBA_UPOS`).
The .pos file has one line per sentence and one tag of `core.pos.UPOS` per BPE piece, e.g.
`DET NOUN VERB VERB ADP DET NOUN PUNCT`; a tag outside the inventory is written `<unk>` (counted in the
stats). EOS has no tag in the file: `POS_VOCAB.encode` appends the EOS tag as `Vocab.encode` appends
EOS to the ids, and `read_pos` checks that each line has one tag per piece.
Sentences outside the stage's files are tagged on the fly by the same path (`tag_lines`).
A large source is tagged in line-range shards, one job each, and gathered (`data.shards`).
"""
from __future__ import annotations

import collections
import functools
import logging
import time
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from ..core.files import InputError, atomic_open, iter_lines, write_json
from ..core.pos import POS_VOCAB, UPOS
from ..core.text import strip_bpe
from ..core.vocab import UNK, IndexedData
from .annotations import Annotation
from .nlp import pos_tags, resolve_backend
from .parse import add_backend_arguments, word_pieces
from .shards import add_gather_arguments, add_shard_arguments, chunks, gather, merge_counts, shard_lines

log = logging.getLogger("nmtrepro.data.pos")

COMMANDS = {  # `nmtrepro` commands of this module (cli.declared_commands)
    "pos": "source POS tags (paper D), one per BPE piece: each word's tag copied to its pieces",
    "gather-pos": "concatenate the pos stage's line-range shards and merge their stats",
}

# Who made the tags (by resolved tagger), as the pos stats and the report's tables say it.
TAGGERS = {
    "stanza": "stanza's POS tagger (universal POS; paper D: Stanford CoreNLP)",
    "spacy": "spaCy en_core_web_sm's tagger (universal POS; a stand-in for paper D's Stanford CoreNLP)",
    "jieba": "jieba 0.42.1's posseg tagger on the jieba-segmented words, its tags mapped onto universal "
             "POS (paper D: Stanford CoreNLP)",
}
# jieba.posseg's tags (ICTCLAS / PKU style) -> universal POS, as UD's Chinese treebanks tag those words:
# localizers (f) are ADP, classifiers (q), place (s) and time (t) words NOUN, aspect markers 了/着/过 AUX.
# Names (nr*, ns, nt, nz) and abbreviations (j) are PROPN; idioms (i, l) and morphemes (g, zg) X.
JIEBA_UPOS = {
    "a": "ADJ", "ad": "ADV", "ag": "ADJ", "an": "NOUN", "b": "ADJ", "c": "CCONJ", "d": "ADV", "df": "ADV",
    "dg": "ADV", "e": "INTJ", "eng": "X", "f": "ADP", "g": "X", "h": "PART", "i": "X", "j": "PROPN",
    "k": "PART", "l": "X", "m": "NUM", "mg": "NUM", "mq": "NUM", "n": "NOUN", "ng": "NOUN", "nr": "PROPN",
    "nrfg": "PROPN", "nrt": "PROPN", "ns": "PROPN", "nt": "PROPN", "nz": "PROPN", "o": "INTJ", "p": "ADP",
    "q": "NOUN", "r": "PRON", "rg": "PRON", "rr": "PRON", "rz": "PRON", "s": "NOUN", "t": "NOUN",
    "tg": "NOUN", "u": "PART", "ud": "PART", "ug": "AUX", "uj": "PART", "ul": "AUX", "uv": "PART",
    "uz": "AUX", "v": "VERB", "vd": "VERB", "vg": "VERB", "vi": "VERB", "vn": "VERB", "vq": "VERB",
    "w": "PUNCT", "x": "PUNCT", "y": "PART", "z": "ADJ", "zg": "X",
}


_INVENTORY = {tag: tag for tag in UPOS}
_CHUNK = 10_000  # sentences tagged, then written, at a time by `tag_file`: a corpus's tags never all in memory


def tagger_name(lang: str, backend: str, stanza_dir: str | None = None) -> str:
    """The tagger that tags `lang`: jieba for Chinese, else the resolved nlp backend (English)."""
    return "jieba" if lang == "zh" else resolve_backend(backend, stanza_dir)


@functools.lru_cache(maxsize=None)
def _jieba_tagger():
    """jieba's POS tagger over a private Tokenizer (as `core.text` segments with one), built once."""
    import jieba
    import jieba.posseg

    jieba.setLogLevel(logging.WARNING)
    return jieba.posseg.POSTokenizer(jieba.Tokenizer())


def jieba_tags(words: Sequence[str]) -> list[str]:
    """jieba's tag of each given word. posseg tags the sentence (words joined by spaces, so it sees
    their context) and may cut it otherwise than the segmenter did; a word takes the tag of the posseg
    token holding its last character (Chinese compounds are head-final)."""
    text = " ".join(words)
    owner = [pair.flag for pair in _jieba_tagger().cut(text) for _ in pair.word]  # tag per character
    if len(owner) != len(text):
        raise InputError(f"jieba.posseg changed the text of {text!r}")
    tags, end = [], -1
    for word in words:
        end += len(word) + 1                                  # one past the word: the space after it
        tags.append(owner[end - 1])
    return tags


def word_tags(sentences: Sequence[str], lang: str, backend: str = "auto", batch_size: int = 64,
              stanza_dir: str | None = None) -> list[list[str]]:
    """The tagger's own tag of every word of whitespace-tokenized sentences."""
    if lang == "zh":
        return [jieba_tags(line.split()) for line in sentences]
    if lang != "en":
        raise InputError(f"no POS tagger for source language {lang!r}: English (nlp backends) and "
                         "Chinese (jieba) only")
    return pos_tags(list(sentences), backend, batch_size=batch_size, stanza_models=stanza_dir)


def inventory_tag(tag: str, lang: str) -> str:
    """The tag as `core.pos.UPOS` names it (jieba's mapped), else <unk>; the inventory's own string
    objects, so a corpus of tags holds 21 strings, not one per word."""
    tag = JIEBA_UPOS.get(tag, tag) if lang == "zh" else tag
    return _INVENTORY.get(tag, UNK)


def piece_tags(bpe_line: str, tags: Sequence[str]) -> list[str]:
    """Each word's tag copied to all its BPE pieces (paper D); EOS gets none here (see the docstring)."""
    pieces = word_pieces(bpe_line)
    if len(pieces) != len(tags):
        raise InputError(f"{len(tags)} tags for the {len(pieces)} words of {bpe_line!r}")
    return [tag for (a, b), tag in zip(pieces, tags) for _ in range(a, b)]


def tag_lines(lines: Sequence[str], lang: str, backend: str = "auto", batch_size: int = 64,
              stanza_dir: str | None = None, raw_counts: collections.Counter | None = None) -> list[list[str]]:
    """Inventory tags per BPE piece of BPE'd source lines: the `pos` command's path, also taken by
    the analyses for sentences the pos stage never saw. `raw_counts` counts the tagger's own tags."""
    words = word_tags([strip_bpe(line) for line in lines], lang, backend, batch_size, stanza_dir)
    if raw_counts is not None:
        raw_counts.update(t for sentence in words for t in sentence)
    return [piece_tags(line, [inventory_tag(t, lang) for t in tags]) for line, tags in zip(lines, words)]


def encoded(tags: Iterable[Sequence[str]]) -> Iterator[list[int]]:
    """Tag ids of each sentence, the EOS tag appended: position by position those of the source ids."""
    return (POS_VOCAB.encode(" ".join(sentence)) for sentence in tags)


def tag_ids(tags: Iterable[Sequence[str]]) -> IndexedData:
    """The sentences' tag ids (`encoded`), in compact arrays, as a training corpus reads them from their
    binarized file (`pos_ids`)."""
    return IndexedData.of(encoded(tags))


def checked_tags(path: str | Path, lengths: Sequence[int] | None = None) -> Iterator[list[str]]:
    """A .pos file's sentences' tags, a line at a time, checked, given the sentences' token `lengths`
    (EOS included), to hold one line per sentence with one tag per BPE piece."""
    lineno = 0
    for lineno, line in enumerate(iter_lines(path), 1):
        tags = line.split()
        if lengths is not None and lineno <= len(lengths) and len(tags) + 1 != lengths[lineno - 1]:
            raise InputError(f"{path}:{lineno}: {len(tags)} tags, the sentence has {lengths[lineno - 1] - 1} "
                             "BPE pieces (was it tagged from another BPE?)")
        yield tags
    if lengths is not None and lineno != len(lengths):
        raise InputError(f"{path}: {lineno} lines of tags for {len(lengths)} sentences")


def read_pos(path: str | Path, lengths: Sequence[int] | None = None) -> IndexedData:
    """A .pos file as tag ids (`tag_ids`), checked (`checked_tags`)."""
    return tag_ids(checked_tags(path, lengths))


def pos_ids(path: str | Path, lengths: Sequence[int] | None = None) -> Iterator[list[int]]:
    """A .pos file's sentences' tag ids (`encoded`), checked (`checked_tags`), a line at a time: the
    rows of its binarized file (`annotations.binarize`)."""
    return encoded(checked_tags(path, lengths))


def tag_on_the_fly(lines: Sequence[str], lang: str | None, backend: str, stanza_dir: str | None) -> IndexedData:
    if lang is None:
        raise InputError("tagging sources on the fly needs their language (the prepared folder's "
                         "stats.json), or the pos stage's tags: --annotation pos=FILE")
    log.info("tagging %d %s source sentences (%s backend)", len(lines), lang, backend)
    return tag_ids(tag_lines(lines, lang, backend, stanza_dir=stanza_dir))


def stand_in(sentences: int, src_length: int, device) -> dict:
    import torch  # here, not with the module (core/vocab.py says why)

    return {"pos": torch.full((sentences, src_length), 5, dtype=torch.long, device=device)}  # a tag's id


def tagger_tool(lang: str, backend: str) -> str:
    """`tagger_name` with the backend unresolved: the plan costs a scale whose stanza models this
    machine may not have."""
    return "jieba" if lang == "zh" else backend


def summarise(stats: dict) -> dict:
    """The tagging statistics' rate, tag ranking and unknown tags, from their counts (one job's or the
    gathered shards')."""
    tags = collections.Counter(stats["tags"])
    return {**stats, "tag_seconds": round(stats["tag_seconds"], 2),
            "words_per_second": round(stats["words"] / max(stats["tag_seconds"], 1e-9), 1),
            "tags": dict(tags.most_common()),
            "unknown_tags": {t: n for t, n in tags.most_common() if inventory_tag(t, stats["lang"]) == UNK}}


def tag_file(bpe_path: str | Path, out: str | Path, lang: str, backend: str, batch_size: int = 64,
             stanza_dir: str | None = None, shard: int = 1, shards: int = 1) -> dict:
    """Write the tags of every line of a BPE'd source file (or of one of its line-range shards) to
    `out`, a chunk of sentences at a time, and return statistics for the log and the report: the tagger
    that made them (`auto` resolved) and how the report names it, and how often each tag occurs."""
    tagger = tagger_name(lang, backend, stanza_dir)
    raw = collections.Counter()
    counts = {"sentences": 0, "pieces": 0}
    started = time.perf_counter()
    with atomic_open(out) as handle:
        for chunk in chunks(shard_lines(bpe_path, shard, shards), _CHUNK):
            for tags in tag_lines(chunk, lang, backend, batch_size, stanza_dir, raw):
                handle.write(" ".join(tags) + "\n")
                counts["pieces"] += len(tags)
            counts["sentences"] += len(chunk)
            log.info("tagged %d sentences", counts["sentences"])
    return summarise({"lang": lang, "requested_backend": backend, "tagger": tagger, "tagger_name": TAGGERS[tagger],
                      **counts, "words": sum(raw.values()), "tag_seconds": time.perf_counter() - started,
                      "tags": dict(raw)})


def merge_stats(stats: list[dict]) -> dict:
    """The statistics of the shards of one file as one job over it would give them (seconds summed)."""
    return summarise(merge_counts(stats, ("lang", "requested_backend", "tagger", "tagger_name"),
                                  ("sentences", "pieces", "words", "tag_seconds", "tags")))


def add_arguments_pos(parser) -> None:
    parser.add_argument("--src-bpe", required=True, help="BPE'd source file (one sentence a line, '@@' joins)")
    parser.add_argument("--lang", required=True, help="source language: en (nlp backend) or zh (jieba)")
    parser.add_argument("--out", required=True, help="tags file: one line per sentence, one tag per BPE piece")
    parser.add_argument("--stats", help="also write tagging statistics (JSON) here")
    add_backend_arguments(parser)                    # the English tagger's, as `parse`'s
    add_shard_arguments(parser)


def run_pos(args) -> None:
    stats = tag_file(args.src_bpe, args.out, args.lang, args.backend, args.batch_size, args.stanza_dir,
                     args.shard, args.shards)
    if args.stats:
        write_json(args.stats, stats)
    log.info("%s", {k: v for k, v in stats.items() if k not in ("tags", "unknown_tags")})


def add_arguments_gather_pos(parser) -> None:
    add_gather_arguments(parser, "tags")


def run_gather_pos(args) -> None:
    stats = gather(args.parts, args.out, args.part_stats, args.stats, merge_stats)
    log.info("%s", {k: v for k, v in stats.items() if k not in ("tags", "unknown_tags")})


ANNOTATION = Annotation(
    name="pos", stage="pos", read=read_pos, ids=pos_ids, make=tag_on_the_fly, stand_in=stand_in, annotate=tag_file,
    note="POS tags: made by", stats_key="tagger", makers=TAGGERS,
    blank_first=POS_VOCAB.eos, tool=tagger_tool, tools="tagger (stanza, spacy, jieba)")
