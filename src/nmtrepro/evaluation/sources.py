"""Source sentences as a model reads them: token ids plus the extra inputs its family declares.

Decoding, head similarity, probing and contrastive scoring all start from BPE'd source lines and hand
`model.encode(**net_input)` one batch at a time. What a family reads besides the ids is named in
`model.config.extra_inputs`; this is the one place that makes those inputs for source lines:
- "spans" (parser phrases, paper A): the parse stage's spans file when the lines are a set it parsed
  (`--spans`), else parsed here by the `parse` command's own path (`data.parse.parse_lines`), for
  sentences that stage never saw (probing tasks, contrastive sources).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Sequence

import torch

from ..core.files import InputError
from ..core.vocab import Vocab
from ..data.nlp import BACKENDS
from ..data.parse import parse_lines, read_spans
from ..training.batching import net_input, token_batches

log = logging.getLogger("nmtrepro.evaluation.sources")


@dataclass
class Sources:
    """Per sentence: its ids (EOS appended) and, per extra input name, its value (e.g. its spans)."""
    ids: list[torch.Tensor]
    extras: dict[str, list] = field(default_factory=dict)

    @classmethod
    def of_lines(cls, model, lines: Sequence[str], vocab: Vocab, spans: str | None = None,
                 parse_backend: str = "auto", stanza_dir: str | None = None) -> "Sources":
        """BPE'd `lines` with whatever `model` reads besides them. `spans`: the parse stage's spans
        file of exactly these lines; without it a parser-phrase model's lines are parsed here."""
        ids = [torch.tensor(vocab.encode(line), dtype=torch.long) for line in lines]
        extras = {}
        for name in model.config.extra_inputs:
            if name != "spans":
                raise InputError(f"{type(model).__name__} reads {name!r}, which no command can make yet")
            if spans is not None:
                extras[name] = read_spans(spans, [len(i) for i in ids])
            else:
                log.info("parsing %d source sentences into phrases (%s backend)", len(lines), parse_backend)
                extras[name] = parse_lines(lines, parse_backend, stanza_models=stanza_dir)
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


def add_arguments_sources(parser, spans: bool = True) -> None:
    """The flags that say where a parser-phrase model's source phrases come from."""
    if spans:
        parser.add_argument("--spans", help="the parse stage's spans of the BPE'd source (parser-phrase "
                                            "models; without it such a model's sources are parsed here)")
    parser.add_argument("--parse-backend", choices=BACKENDS, default="auto",
                        help="parser for sources without spans (parser-phrase models only), as `parse --backend`")
    parser.add_argument("--stanza-dir", help="stanza models folder, as `parse --stanza-dir`")


def source_options(args) -> dict:
    """`Sources.of_lines` keyword arguments from the flags of `add_arguments_sources`."""
    return {"spans": getattr(args, "spans", None), "parse_backend": args.parse_backend,
            "stanza_dir": args.stanza_dir}
