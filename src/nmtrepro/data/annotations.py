"""Source annotations: what a family may read beside the source tokens, each defined once, in its data module.

An annotation (parser phrases "spans" for paper A, POS tags "pos" for paper D) is
- made per dataset part by a stage of its own, as results/<scale>/<stage>/<dataset>/<part>.<name> with
  <part>.stats.json beside it (its rule file under workflow/rules/annotations/, its module's COMMANDS);
- read back aligned with the binarized source (`read`), or made on the fly for lines that no stage saw
  (`make`: probing tasks, contrastive sources);
- batched (`pad`), with what a row holding no sentence carries first (`blank_first`) and the shapes a
  bucketed batch adds (`shapes`), and stood in for on the meta device when FLOPs are counted (`stand_in`);
- named under a table by who made it (`note`, from its stats' `stats_key`).

A family names those it reads in `config.extra_inputs`; the corpus, the sources of decoding and the
analyses, the train and decode commands (`--annotation NAME=PATH`), the FLOPs count, the plan and the
table's note all find them here. Every module of this package is looked at for an `ANNOTATION` (as
models/ registers its families), so a new annotation is its module, its rule file, the family that
reads it and the config (docs/organisation.md).
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..core.files import InputError


def _parse_backend(lang: str, backend: str) -> str:
    return backend


@dataclass(frozen=True)
class Annotation:
    name: str       # the family's input name, the files' extension, NAME in `--annotation NAME=PATH`
    stage: str      # the stage (rule, results folder) that makes it
    read: Callable[[str | Path, Sequence[int] | None], Sequence]  # (file, the source's token counts) -> values
    make: Callable[[Sequence[str], str | None, str, str | None], Sequence]  # (BPE'd lines, lang, backend, stanza dir)
    stand_in: Callable[[int, int, str], dict]  # (sentences, source length, device) -> inputs of that shape
    note: str       # how the table's line naming its maker starts, e.g. "Parser phrases: trees made by"
    stats_key: str  # the field of its stats that names the maker
    makers: Mapping[str, str]  # that field's values -> how the note names them
    pad: Callable | None = None  # (values, indices) -> (B, ...) tensor; None: one value a source token, padded as it
    compact: Callable | None = None  # how a training corpus holds what `read` gives (None: as it is)
    blank_first: int | None = None  # what a row without a sentence holds first (collate's fixed shapes)
    shapes: Callable | None = None  # (its (B, ...) batch, rows) -> further inputs of a bucketed batch
    tool: Callable[[str, str], str] = field(default=_parse_backend)  # (source lang, backend) -> the plan's cost key


@functools.cache
def registry() -> dict[str, Annotation]:
    """Every source annotation by name, in the order of their modules' names."""
    from .. import data

    found = {}
    for info in sorted(pkgutil.iter_modules(data.__path__), key=lambda m: m.name):
        annotation = getattr(importlib.import_module(f"{data.__name__}.{info.name}"), "ANNOTATION", None)
        if isinstance(annotation, Annotation):
            found[annotation.name] = annotation
    return found


def annotation(name: str) -> Annotation:
    if name not in registry():
        raise InputError(f"{name!r} is no source annotation; known: {', '.join(registry())}")
    return registry()[name]


def by_stage(stage: str) -> Annotation:
    return next(a for a in registry().values() if a.stage == stage)


def check_rule_files(stages: Sequence[str]) -> None:
    """Every annotation's stage has its rule file (workflow/rules/annotations/<stage>.smk, `stages` their
    stems), and every such file an annotation."""
    known = {a.stage for a in registry().values()}
    if missing := sorted(known - set(stages)):
        raise InputError(f"workflow/rules/annotations/ has no rule file for the stage(s) {', '.join(missing)} "
                         f"(source annotations of nmtrepro.data)")
    if unknown := sorted(set(stages) - known):
        raise InputError(f"workflow/rules/annotations/{unknown[0]}.smk: no source annotation of nmtrepro.data "
                         f"is made by a stage {unknown[0]!r} (known: {', '.join(sorted(known))})")


def add_annotation_argument(parser, what: str) -> None:
    """`--annotation NAME=PATH` (repeat): where the annotations of the command's source come from."""
    parser.add_argument("--annotation", action="append", default=[], metavar="NAME=PATH",
                        help=f"{what}, NAME one of {', '.join(registry())} (repeat)")


def annotation_paths(specs: Sequence[str]) -> dict[str, str]:
    """{name: path} from `--annotation NAME=PATH` flags: each name known, none twice."""
    paths = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not path:
            raise InputError(f"--annotation {spec!r}: expected NAME=PATH")
        annotation(name)
        if name in paths:
            raise InputError(f"--annotation {name} given twice ({paths[name]}, {path})")
        paths[name] = path
    return paths
