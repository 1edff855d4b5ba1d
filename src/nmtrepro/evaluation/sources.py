"""Source sentences as a model reads them: token ids plus the extra inputs its family declares.

Decoding, head similarity, probing and contrastive scoring all start from BPE'd source lines and hand
`model.encode(**net_input)` one batch at a time. What a family reads besides the ids is named in
`model.config.extra_inputs`; this is the one place that makes those inputs for source lines:
- "spans" (parser phrases, paper A): the parse stage's spans file when the lines are a set it parsed
  (`--spans`), else parsed here by the `parse` command's own path (`data.parse.parse_lines`), for
  sentences that stage never saw (probing tasks, contrastive sources).
- "pos" (POS tag ids, paper D): likewise the pos stage's file (`--pos`), else tagged here by the
  `pos` command's own path (`data.pos.tag_lines`) in the source language that the prepared
  folder's stats.json records.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import torch

from ..core.files import InputError, read_json
from ..core.vocab import Vocab
from ..data.nlp import BACKENDS
from ..data.parse import parse_lines, read_spans
from ..data.pos import read_pos, tag_ids, tag_lines
from ..training.batching import net_input, token_batches

log = logging.getLogger("nmtrepro.evaluation.sources")


@dataclass
class Sources:
    """Per sentence: its ids (EOS appended) and, per extra input name, its value (`extras[name][i]`:
    its spans, or its POS tag ids)."""
    ids: list[torch.Tensor]
    extras: dict[str, Sequence] = field(default_factory=dict)

    @classmethod
    def of_lines(cls, model, lines: Sequence[str], vocab: Vocab, spans: str | None = None,
                 pos: str | None = None, parse_backend: str = "auto", stanza_dir: str | None = None,
                 src_lang: str | None = None) -> "Sources":
        """BPE'd `lines` with whatever `model` reads besides them. `spans` / `pos`: the parse / pos
        stage's file of exactly these lines; without it they are parsed / tagged here (`parse_backend`,
        and for POS the `src_lang`)."""
        ids = [torch.tensor(vocab.encode(line), dtype=torch.long) for line in lines]
        sizes = [len(i) for i in ids]
        extras = {}
        for name in model.config.extra_inputs:
            if name == "spans" and spans is not None:
                extras[name] = read_spans(spans, sizes)
            elif name == "spans":
                log.info("parsing %d source sentences into phrases (%s backend)", len(lines), parse_backend)
                extras[name] = parse_lines(lines, parse_backend, stanza_models=stanza_dir)
            elif name == "pos" and pos is not None:
                extras[name] = read_pos(pos, sizes)
            elif name == "pos":
                if src_lang is None:
                    raise InputError("tagging sources on the fly needs their language (the prepared "
                                     "folder's stats.json), or the pos stage's tags: --pos")
                log.info("tagging %d %s source sentences (%s backend)", len(lines), src_lang, parse_backend)
                extras[name] = tag_ids(tag_lines(lines, src_lang, parse_backend, stanza_dir=stanza_dir))
            else:
                raise InputError(f"{type(model).__name__} reads {name!r}, which no command can make yet")
        return cls(ids, extras)

    @property
    def sizes(self) -> list[int]:
        return [len(i) for i in self.ids]

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
        parser.add_argument("--spans", help="the parse stage's spans of the BPE'd source (parser-phrase "
                                            "models; without it such a model's sources are parsed here)")
        parser.add_argument("--pos", help="the pos stage's tags of the BPE'd source (models that read POS; "
                                          "without it such a model's sources are tagged here)")
    parser.add_argument("--parse-backend", choices=BACKENDS, default="auto",
                        help="parser and English tagger for sources without spans or tags, as `parse --backend`")
    parser.add_argument("--stanza-dir", help="stanza models folder, as `parse --stanza-dir`")


def source_options(args) -> dict:
    """`Sources.of_lines` keyword arguments from the flags of `add_arguments_sources`, and the source
    language from the command's prepared folder (`--prepared`, its stats.json) where it has one."""
    stats = Path(args.prepared) / "stats.json"
    return {"spans": getattr(args, "spans", None), "pos": getattr(args, "pos", None),
            "parse_backend": args.parse_backend, "stanza_dir": args.stanza_dir,
            "src_lang": read_json(stats)["src_lang"] if stats.is_file() else None}
