"""Source sentences as a model reads them: token ids plus the source annotations its family declares.

Decoding, head similarity, probing and contrastive scoring all start from BPE'd source lines and hand
`model.encode(**net_input)` one batch at a time. What a family reads besides the ids is named in
`model.config.extra_inputs` (data.annotations): each is read from its stage's file of exactly these
lines where the command is given one (`--annotation NAME=FILE`: the parse stage's spans, the pos
stage's tags), else made here by that stage's own path (`make`: parsed, or tagged in the source
language that the prepared folder's stats.json records), for sentences no stage saw (probing tasks,
contrastive sources).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch

from ..core.files import read_json
from ..core.vocab import Vocab
from ..data.annotations import add_annotation_argument, annotation, annotation_paths
from ..data.nlp import BACKENDS
from ..training.batching import net_input, token_batches


@dataclass
class Sources:
    """Per sentence: its ids (EOS appended) and, per extra input name, its value (`extras[name][i]`:
    its spans, or its POS tag ids)."""
    ids: list[torch.Tensor]
    extras: dict[str, Sequence] = field(default_factory=dict)

    @classmethod
    def of_lines(cls, model, lines: Sequence[str], vocab: Vocab, files: dict[str, str] | None = None,
                 parse_backend: str = "auto", stanza_dir: str | None = None,
                 src_lang: str | None = None) -> "Sources":
        """BPE'd `lines` with whatever `model` reads besides them. `files`: annotation name -> its
        stage's file of exactly these lines; an annotation without one is made here (`parse_backend`,
        and for POS the `src_lang`)."""
        ids = [torch.tensor(vocab.encode(line), dtype=torch.long) for line in lines]
        sizes = [len(i) for i in ids]
        files = files or {}
        extras = {}
        for name in model.config.extra_inputs:
            kind = annotation(name)
            extras[name] = kind.read(files[name], sizes) if name in files else \
                kind.make(lines, src_lang, parse_backend, stanza_dir)
        return cls(ids, extras)

    @property
    def sizes(self) -> list[int]:
        return [len(i) for i in self.ids]

    def unknown_share(self) -> float:
        """The share of source tokens (EOS aside) outside the vocabulary: near 0 for text BPE'd with the
        model's codes, a third or more for raw text, which the model would still decode, into nonsense."""
        tokens = sum(len(i) - 1 for i in self.ids)
        return sum(int(i.eq(Vocab.unk).sum()) for i in self.ids) / tokens if tokens else 0.0

    def batches(self, max_tokens: int) -> list[list[int]]:
        """Sentence indices in length-sorted batches of at most `max_tokens` padded source tokens."""
        return token_batches(self.sizes, None, max_tokens)

    def net_input(self, indices: list[int], device="cpu") -> dict:
        """`encode`'s keyword arguments for sentences `indices`, padded, on `device`."""
        return {name: value.to(device) for name, value in net_input(self.ids, self.extras, indices).items()}


def add_arguments_sources(parser, files: bool = True) -> None:
    """The flags that say where a model's extra source inputs (parser phrases, POS tags) come from;
    `files`: the command reads a prepared source file, which the parse and pos stages may have annotated."""
    if files:
        add_annotation_argument(parser, "the stage's file of an annotation of the BPE'd source that the model "
                                        "reads (without it, the annotation is made here)")
    parser.add_argument("--parse-backend", choices=BACKENDS, default="auto",
                        help="parser and English tagger for sources without spans or tags, as `parse --backend`")
    parser.add_argument("--stanza-dir", help="stanza models folder, as `parse --stanza-dir`")


def source_options(args) -> dict:
    """`Sources.of_lines` keyword arguments from the flags of `add_arguments_sources`, and the source
    language from the command's prepared folder (`--prepared`, its stats.json) where it has one."""
    stats = Path(args.prepared) / "stats.json"
    return {"files": annotation_paths(getattr(args, "annotation", [])),
            "parse_backend": args.parse_backend, "stanza_dir": args.stanza_dir,
            "src_lang": read_json(stats)["src_lang"] if stats.is_file() else None}
